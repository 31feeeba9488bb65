"""Placement: time to the proven host-cost optimum per instance family, ours vs the MIP backend (SCIP).

Same seeded instances (placement/families.py) for both, one run, side by side. Per family and size:
median and max seconds from the start of parse_problem to the proven host cost (`host_cost_seconds` with
the limit's clock started before the parse: the answer, before the tie-breaks; an instance not proven
within the time limit counts as the limit) and how many were proven. Then 1,000
vertices with three sNICs, and a warm re-placement at 5,000 vertices (`warm`: one edge's traffic
changed after a settled solve; WarmSolver vs a cold re-solve, side by side).

Last line JSON: {"families": {family: {size: {ours_median_s, ours_max_s, ours_proven, mip_median_s,
mip_max_s, mip_proven, instances}}}, "three_snics_1000": {...}, "warm_5000": {...}, gap_limit, time_limit}.

    ./uno bench placement [--quick] [--families a,b] [--sizes 200,500,5000] [--seeds N] [--large-seeds N]
                          [--time-limit S] [--warm-changes N] [--warm-only]
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
from placement.warm import WarmSolver


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


MEASURED = 1.2937418263514  # a measured-looking factor: the changed traffic is a float of 16 digits


def changed(gbps: float, k: int) -> float:
    """The k-th change of an edge's traffic: x or / MEASURED (on the kept 10^-9-ish grid), every third a
    ratio of small numbers (n/18 as a float: a grid of 18 the kept scale lacks, read onto it)."""
    if k % 3 == 2:
        return max(1, round(gbps * 18)) / 18
    return gbps * MEASURED if k % 2 == 0 else gbps / MEASURED


def warm(n: int, seed: int, limit: float, changes: int = 5) -> dict:
    """Re-placement after one changed edge, side by side: an instance solved and settled (every NF at its
    placed location, solved again), then `changes` times one edge's traffic changed (`changed`) and both
    re-solves on the same instance, in alternating order: cold (`solve(parse_problem(obj))`) and warm
    (WarmSolver: incremental parse and prepare, from the current placement). Seconds from the start of the
    parse to the proven host cost; the NFs then move to the warm answer. `plain`: a WarmSolver that never
    reads a value onto its kept scale (`onto_scale=False`), the third of the side-by-side runs (the order
    rotates). `host_cost_rel_diff`: |warm - cold| / cold (within the gap limit; and the documented relative
    error where warm read a value onto its kept scale)."""
    obj = instance("chains", n, seed)
    ws = WarmSolver(time_limit=limit)
    plain = WarmSolver(time_limit=limit, onto_scale=False)  # A/B: off-scale values take the full path
    first = ws.solve(obj)
    for node in obj["nodes"]:
        if node["kind"] == "nf":
            node["location"] = first["placement"][node["id"]]
    ws.solve(obj)
    plain.solve(obj)
    rng = random.Random(seed)
    runs = []
    orders = [("warm", "plain", "cold"), ("cold", "warm", "plain"), ("plain", "cold", "warm")]
    for k in range(changes):
        edge = rng.choice(obj["edges"])
        edge["gbps"] = changed(edge["gbps"], k)
        got = {}
        for which in orders[k % 3]:
            t0 = time.monotonic()
            if which == "warm":
                out = ws.solve(obj, started=t0)
            elif which == "plain":
                out = plain.solve(obj, started=t0)
                plain_path = plain.last["prepare"]
            else:
                out = solve(parse_problem(obj), time_limit=limit, started=t0)
            got[which] = (out, out.get("host_cost_seconds") or limit, time.monotonic() - t0)
        (w, w_s, w_total), (c, c_s, _) = got["warm"], got["cold"]
        runs.append({"warm_s": w_s, "cold_s": c_s, "plain_s": got["plain"][1], "plain_prepare": plain_path,
                     "warm_total_s": round(w_total, 4), "status": w["status"],
                     "same_host_cost": w.get("host_cost") == c.get("host_cost"), "moves": len(w["moves"]),
                     "host_cost_rel_diff": abs(w["host_cost"] - c["host_cost"]) / c["host_cost"]
                     if w.get("host_cost") is not None and c.get("host_cost") else None,
                     **ws.last})  # fmt: skip
        for node in obj["nodes"]:
            if node["kind"] == "nf":
                node["location"] = w["placement"][node["id"]]
    return {"first_s": first.get("host_cost_seconds"), "runs": runs}


def warm_figures(n: int, seeds: int, limit: float, changes: int) -> dict:
    """Median / max of warm() over seeds, warm vs cold, and the ratio of the medians."""
    runs = [r for seed in range(seeds) for r in warm(n, seed, limit, changes)["runs"]]
    w, c = [r["warm_s"] for r in runs], [r["cold_s"] for r in runs]
    onto = [r for r in runs if r["onto_scale"]]
    return {"warm_median_s": round(median(w), 4), "warm_max_s": round(max(w), 4),
            "onto_scale_warm_median_s": round(median([r["warm_s"] for r in onto]), 4) if onto else None,
            "onto_scale_plain_median_s": round(median([r["plain_s"] for r in onto]), 4) if onto else None,
            "onto_scale_plain_full": sum(r["plain_prepare"] == "full" for r in onto),
            "cold_median_s": round(median(c), 4), "cold_max_s": round(max(c), 4),
            "cold_over_warm": round(median(c) / median(w), 1), "changes": len(runs),
            "incremental": sum(r["prepare"] == "incremental" for r in runs),
            "onto_scale": sum(r["prepare"] == "incremental" and r["onto_scale"] > 0 for r in runs),
            "within_0_1_s": sum(r["warm_s"] <= 0.1 for r in runs),
            "host_cost_rel_diff_max": max((r["host_cost_rel_diff"] or 0.0) for r in runs),
            "same_host_cost": sum(r["same_host_cost"] for r in runs), "runs": runs}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="500 vertices, one seed, no 5,000-vertex runs")
    ap.add_argument("--families", default=",".join(FAMILIES))
    # 200 beside the targets' 500 and 5,000: instances no one here wrote come in every size, and smaller
    # long chains were slower than 500 (fewer groups, a larger gap per group).
    ap.add_argument("--sizes", default="200,500,5000")
    ap.add_argument("--seeds", type=int, default=3, help="instances per family below 5,000 vertices")
    ap.add_argument("--large-seeds", type=int, default=1, help="instances per family at 5,000 and more")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--out", default="bench/out/placement")
    ap.add_argument("--warm-changes", type=int, default=5, help="one-edge changes per warm instance")
    ap.add_argument("--warm-only", action="store_true", help="only the warm re-placement at 5,000")
    args = ap.parse_args()
    print_machine()
    if args.warm_only:
        solve(parse_problem(instance("chains", 50, 99)), time_limit=args.time_limit)
        figures = {
            "warm_5000": warm_figures(5000, max(args.large_seeds, 2), args.time_limit, args.warm_changes)
        }
        for r in figures["warm_5000"]["runs"]:
            print(r, flush=True)
        final_json(figures | {"gap_limit": GAP_LIMIT, "time_limit": args.time_limit})
        return 0
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
        figures["warm_5000"] = warm_figures(5000, max(args.large_seeds, 2), limit, args.warm_changes)
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
