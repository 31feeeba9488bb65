"""Placement on random family parameters: the families' fixed settings are a few points of a wide space.

Each draw picks a graph shape, the sNIC capacity (log-uniform 0.1-1.5 of what all NFs would need on
sNICs), the PCIe budget (1.0-4.0 times what must cross), the traffic distribution, pins, background PCIe
and a size, then solves the instance with our engine (time limit, gap as shipped) and reports how many
were proven (optimal, or infeasible: a random draw can be), the time to the proven host cost per size class (median, p90, max) and the slowest draws
with their parameters (each one re-buildable with `placement.families.build`).

    .venv/bin/python -m bench.placement.sweep [--draws 60] [--sizes 100,200,300,500,1000] [--seed 0]
                                              [--snics 1] [--time-limit 10]

Last line JSON: {"sizes": {size: {median_s, p90_s, max_s, proven, draws}}, "slowest": [...], ...}.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from dataclasses import asdict

from bench.common import final_json, median, print_machine
from placement.families import Family, build, instance
from placement.model import parse_problem
from placement.solver import GAP_LIMIT, solve

SHAPES = ["chain", "long", "dag", "fanio", "mesh", "mix"]


def draw(rng: random.Random, snics: int) -> Family:
    """One point of the family parameter space."""
    return Family(
        shape=rng.choice(SHAPES),
        capacity=round(math.exp(rng.uniform(math.log(0.1), math.log(1.5))), 3),
        pcie=round(rng.uniform(1.0, 4.0), 2),
        snics=snics,
        traffic=rng.choice(["uniform", "pareto"]),
        pinned=rng.choice([0.0, 0.0, round(rng.uniform(0.05, 0.4), 2)]),
        background=rng.choice([0.0, 0.0, round(rng.uniform(0.05, 0.4), 2)]),
        latency=rng.random() < 0.2,
    )


def _p90(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, math.ceil(0.9 * len(s)) - 1)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=60)
    ap.add_argument("--sizes", default="100,200,300,500,1000")
    ap.add_argument(
        "--seed", type=int, default=0, help="seed of the draws (each instance's own seed follows)"
    )
    ap.add_argument("--snics", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--slowest", type=int, default=10, help="draws listed with their parameters")
    args = ap.parse_args()
    if args.draws < 1 or args.time_limit <= 0:
        ap.error("--draws must be >= 1 and --time-limit > 0")
    sizes = [int(x) for x in args.sizes.split(",")]
    print_machine()
    rng = random.Random(args.seed)
    solve(parse_problem(instance("chains", 50, 99)), time_limit=args.time_limit)  # the import, not a figure
    runs = []
    for k in range(args.draws):
        fam, n, seed = draw(rng, args.snics), rng.choice(sizes), rng.randrange(1 << 20)
        obj = build(fam, n, seed)
        started, cpu = time.monotonic(), time.process_time()
        out = solve(parse_problem(obj), time_limit=args.time_limit, started=started)
        # (a random draw may be infeasible - pins or SLOs beyond the budgets: a proven answer too)
        proven = out["status"] in ("optimal", "infeasible")
        t = out.get("host_cost_seconds", out.get("solve_seconds")) if proven else args.time_limit
        run = {"draw": k, "size": n, "seed": seed, "family": asdict(fam), "status": out["status"],
               "host_cost_s": round(t, 4), "cpu_s": round(time.process_time() - cpu, 4)}  # fmt: skip
        runs.append(run)
        print(f"{k:>3} n={n:<5} {fam.shape:<6} cap {fam.capacity:<5} pcie {fam.pcie:<4} {fam.traffic:<7} "
              f"pin {fam.pinned:<4} bg {fam.background:<4} lat {int(fam.latency)}  {out['status']:<9} "
              f"{t:7.3f} s", flush=True)  # fmt: skip
    figures: dict = {"sizes": {}, "gap_limit": GAP_LIMIT, "time_limit": args.time_limit, "seed": args.seed,
                     "snics": args.snics}  # fmt: skip
    for n in sizes:
        ts = [r["host_cost_s"] for r in runs if r["size"] == n]
        if ts:
            figures["sizes"][str(n)] = {"median_s": round(median(ts), 4), "p90_s": round(_p90(ts), 4),
                                        "max_s": round(max(ts), 4), "draws": len(ts),
                                        "proven": sum(r["host_cost_s"] < args.time_limit for r in runs
                                                      if r["size"] == n),
                                        "infeasible": sum(r["status"] == "infeasible" for r in runs
                                                          if r["size"] == n)}  # fmt: skip
    figures["slowest"] = sorted(runs, key=lambda r: -r["host_cost_s"])[: args.slowest]
    for n, f in figures["sizes"].items():
        print(f"size {n:>5}: {f}")
    final_json(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
