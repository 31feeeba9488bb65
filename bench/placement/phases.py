"""Where a placement solve's CPU seconds go, phase by phase, on the families' seeded instances.

Per instance: parse_problem, prepare (decompose.py: groups, configurations, dominance) and solve_groups
(engine.py: bound, incumbent, proof, tie-break), each in CPU seconds (process_time, the claim on a shared
machine), with the configurations prepare kept and the seconds the engine took to prove the host cost:

    .venv/bin/python -m bench.placement.phases --families long,latency,mesh --size 5000 --seeds 0,1,2

The engine gets the options solve() gives it by default (gap 1e-5, one CP-SAT worker, the 10 s limit).
Last line JSON: {family: {seed: {parse, prepare, engine, configs, status, primary_s}}}.
"""

from __future__ import annotations

import argparse
import sys
import time

from bench.common import final_json, print_machine
from placement.decompose import prepare
from placement.families import FAMILIES, instance
from placement.model import parse_problem
from placement.solver import Options, load_backends, run_engine


def phases(obj: dict, limit: float) -> dict:
    """CPU seconds of each phase of one solve of `obj` (the JSON instance)."""
    opts = Options(time_limit=limit)
    c0 = time.process_time()
    problem = parse_problem(obj)
    c1 = time.process_time()
    gr = prepare(problem)
    c2 = time.process_time()
    out = {"parse": round(c1 - c0, 4), "prepare": round(c2 - c1, 4)}
    if gr is None:
        return out | {"status": "no groups (the plain model would answer)"}
    oc = run_engine(gr, opts, time.monotonic() + limit)
    out["engine"] = round(time.process_time() - c2, 4)
    primary = None if oc.primary_seconds is None else round(oc.primary_seconds, 4)
    return out | {"configs": len(gr.cost), "status": oc.status, "primary_s": primary}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="long,latency,mesh")
    ap.add_argument("--size", type=int, default=5000)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--time-limit", type=float, default=10.0)
    args = ap.parse_args()
    unknown = [f for f in args.families.split(",") if f not in FAMILIES]
    if unknown:
        print(f"--families: unknown {unknown[0]!r}; known: {', '.join(FAMILIES)}", file=sys.stderr)
        return 2
    print_machine()
    load_backends()
    phases(instance("chains", 50, 99), args.time_limit)  # warms the libraries
    figures: dict = {}
    for fam in args.families.split(","):
        figures[fam] = {}
        for seed in [int(s) for s in args.seeds.split(",")]:
            got = phases(instance(fam, args.size, seed), args.time_limit)
            figures[fam][str(seed)] = got
            print(
                f"{fam} {args.size} seed {seed}: " + ", ".join(f"{k} {v}" for k, v in got.items()), flush=True
            )
    final_json(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
