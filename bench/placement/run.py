"""Placement: time to the proven host-cost optimum per instance family, ours vs the MIP backend (SCIP).

Same seeded instances (placement/families.py) for both, one run, side by side. Per family and size:
median and max seconds from the start of parse_problem to the proven host cost (`host_cost_seconds` with
the limit's clock started before the parse: the answer, before the tie-breaks; an instance not proven
within the time limit counts as the limit) and how many were proven. Then 1,000
vertices with three sNICs, and a warm re-placement at 5,000 vertices: every NF's `location` set to the
first solve's placement, one edge's traffic changed, solved again.

Last line JSON: {"families": {family: {size: {ours_median_s, ours_max_s, ours_proven, mip_median_s,
mip_max_s, mip_proven, instances}}}, "three_snics_1000": {...}, "warm_5000": {...}, gap_limit, time_limit}.

    ./uno bench placement [--quick] [--families a,b] [--sizes 500,5000] [--seeds N] [--large-seeds N]
                          [--time-limit S]
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import time
from pathlib import Path

from bench.common import final_json, median, print_machine
from placement.families import FAMILIES, instance
from placement.model import parse_problem
from placement.solver import GAP_LIMIT, solve


def _time_to_proof(obj: dict, solver: str, limit: float) -> tuple[float, bool, dict]:
    """Seconds from the start of parse_problem (the limit's clock starts there too) to the proven host cost."""
    started = time.monotonic()
    out = solve(parse_problem(obj), solver=solver, time_limit=limit, started=started)
    proven = out["status"] == "optimal"
    return (out["host_cost_seconds"] if proven else limit), proven, out


def _summary(times: list[float], proven: int, key: str) -> dict:
    return {f"{key}_median_s": round(median(times), 4), f"{key}_max_s": round(max(times), 4),
            f"{key}_proven": proven}  # fmt: skip


def _compare(objs: list[dict], limit: float, rows: list, label: str) -> dict:
    fig: dict = {"instances": len(objs)}
    for solver, key in (("cpsat", "ours"), ("mip", "mip")):
        times, proven = [], 0
        for k, obj in enumerate(objs):
            t, ok, out = _time_to_proof(obj, solver, limit)
            times.append(t)
            proven += ok
            rows.append([label, k, solver, out["status"], t, out.get("host_cost"), out.get("tiebreak", "")])
        fig |= _summary(times, proven, key)
    return fig


def warm(n: int, seed: int, limit: float) -> dict:
    """Re-placement after one changed edge: cold solve, then every NF at its placed location, one edge's
    traffic x1.3, solved again (warm) - the time to the proven host cost of that second solve."""
    obj = instance("chains", n, seed)
    cold_started = time.monotonic()
    first = solve(parse_problem(obj), time_limit=limit, started=cold_started)
    for node in obj["nodes"]:
        if node["kind"] == "nf":
            node["location"] = first["placement"][node["id"]]
    edge = random.Random(seed).choice(obj["edges"])
    edge["gbps"] *= 1.3
    t0 = time.monotonic()
    out = solve(parse_problem(obj), time_limit=limit, started=t0)
    return {"cold_s": first.get("host_cost_seconds"), "warm_s": out.get("host_cost_seconds"),
            "warm_total_s": round(time.monotonic() - t0, 4), "status": out["status"],
            "tiebreak": out.get("tiebreak"), "moves": len(out.get("moves", []))}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="500 vertices, one seed, no 5,000-vertex runs")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--sizes", default="500,5000")
    ap.add_argument("--seeds", type=int, default=3, help="instances per family below 5,000 vertices")
    ap.add_argument("--large-seeds", type=int, default=1, help="instances per family at 5,000 and more")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--out", default="bench/out/placement")
    args = ap.parse_args()
    print_machine()
    families = args.families.split(",")
    sizes = [500] if args.quick else [int(x) for x in args.sizes.split(",")]
    seeds = 1 if args.quick else args.seeds
    limit = args.time_limit
    # The first CP-SAT / SCIP model of a process pays the libraries' import: not part of any figure.
    solve(parse_problem(instance("chains", 50, 99)), time_limit=limit)
    solve(parse_problem(instance("chains", 50, 99)), solver="mip", time_limit=limit)
    rows: list = []
    figures: dict = {"families": {}, "gap_limit": GAP_LIMIT, "time_limit": limit}
    print(f"{'family':<13} {'n':>5}  {'ours med/max s':>17} {'MIP med/max s':>17}  proven ours/MIP")
    for fam in families:
        figures["families"][fam] = {}
        for n in sizes:
            k = seeds if n < 5000 or args.quick else args.large_seeds
            objs = [instance(fam, n, seed) for seed in range(k)]
            f = _compare(objs, limit, rows, f"{fam}/{n}")
            figures["families"][fam][str(n)] = f
            print(f"{fam:<13} {n:>5}  {f['ours_median_s']:>8} {f['ours_max_s']:>8} {f['mip_median_s']:>8} "
                  f"{f['mip_max_s']:>8}  {f['ours_proven']}/{f['mip_proven']} of {f['instances']}", flush=True)  # fmt: skip
    if not args.quick:
        objs = [instance("chains", 1000, seed, snics=3) for seed in range(seeds)]
        f = _compare(objs, limit, rows, "three-snics/1000")
        figures["three_snics_1000"] = f
        print(f"three sNICs, 1000 vertices: {f}", flush=True)
        w = [warm(5000, seed, limit) for seed in range(max(args.large_seeds, 2))]
        figures["warm_5000"] = {"warm_median_s": median([x["warm_s"] or limit for x in w]),
                                "warm_max_s": max(x["warm_s"] or limit for x in w), "runs": w}  # fmt: skip
        print(f"warm re-placement, 5000 vertices: {figures['warm_5000']}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "families.csv").open("w", newline="") as fh:
        csv.writer(fh).writerows([["instance", "seed", "solver", "status", "host_cost_s", "host_cost",
                                   "tiebreak"], *rows])  # fmt: skip
    print(f"rows: {out / 'families.csv'}")
    final_json(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
