"""The plain model's first try (solver.PLAIN_FIRST_WORK, PLAIN_ONLY_SNICS) measured: per instance, the solve()
path as shipped vs the plain CP-SAT model alone, with the deterministic time the plain model needed to decide.

Per instance: location booleans, the shipped path's status and CPU seconds (process_time: the claim on a
shared machine), the plain model's stage-1 status, its deterministic time and CPU seconds. A box of W
deterministic units decides exactly the instances whose plain deterministic time is <= W (CP-SAT's
deterministic time does not depend on the machine's load), so one run tells what any box would decide:

    .venv/bin/python -m bench.placement.plainfirst [--families two-snics,four-snics] [--sizes 50,100]
                                                   [--seeds 12] [--draws 0 --snics 2 --draw-seed 5]
                                                   [--boxes 0.01,0.03,0.1] [--time-limit 10]

`--draws N` adds N random draws (bench.placement.sweep.draw, --snics sNICs, 40-100 vertices).
Last line JSON: {"runs": [...], "boxes": {W: {decided, decided_where_shipped_unproven}}}.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import asdict

from bench.common import final_json, print_machine
from bench.placement.sweep import draw
from placement.families import FAMILIES, Family, build, instance
from placement.model import Problem, parse_problem
from placement.solver import Options, _current_hint, _Model, solve

DECIDED = ("optimal", "infeasible")


def plain_alone(problem: Problem, limit: float) -> dict:
    """The plain model's stage 1 as solve() builds and solves it, alone: status, deterministic time, CPU
    seconds."""
    cpu = time.process_time()
    model = _Model(problem, Options(time_limit=limit))
    model.minimize(model.stage1)
    status, _, _ = model.solve(time.monotonic() + limit, hint=_current_hint(model))
    return {"status": status, "det": round(model.work_done, 4), "cpu_s": round(time.process_time() - cpu, 4)}


def shipped(problem: Problem, limit: float) -> dict:
    """solve() as shipped: status and CPU seconds."""
    cpu, started = time.process_time(), time.monotonic()
    out = solve(problem, time_limit=limit, started=started)
    return {"status": out["status"], "cpu_s": round(time.process_time() - cpu, 4)}


def instances(args: argparse.Namespace) -> list[tuple[str, dict]]:
    """(label, JSON instance) of the families' seeds and the random draws."""
    out = [(f"{fam} {n} {seed}", instance(fam, n, seed))
           for fam in args.families.split(",") if fam
           for n in (int(x) for x in args.sizes.split(","))
           for seed in range(args.seeds)]  # fmt: skip
    rng = random.Random(args.draw_seed)
    for _ in range(args.draws):
        fam, n, seed = draw(rng, args.snics), rng.choice([40, 60, 80, 100]), rng.randrange(1 << 20)
        out.append((f"{asdict(fam)} {n} {seed}", build(Family(**asdict(fam)), n, seed)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="two-snics,four-snics", help=f"of {','.join(FAMILIES)}")
    ap.add_argument("--sizes", default="50,100")
    ap.add_argument("--seeds", type=int, default=12)
    ap.add_argument("--draws", type=int, default=0)
    ap.add_argument("--snics", type=int, default=2, help="sNICs of the random draws")
    ap.add_argument("--draw-seed", type=int, default=5)
    ap.add_argument("--boxes", default="0.01,0.03,0.1,0.3")
    ap.add_argument("--time-limit", type=float, default=10.0)
    args = ap.parse_args()
    print_machine()
    solve(parse_problem(instance("two-snics", 30, 0)), time_limit=args.time_limit)  # the import, not a figure
    runs = []
    for label, obj in instances(args):
        problem = parse_problem(obj)
        run = {
            "instance": label,
            "booleans": problem.location_booleans(),
            "shipped": shipped(problem, args.time_limit),
            "plain": plain_alone(problem, args.time_limit),
        }
        runs.append(run)
        print(label, run["booleans"], run["shipped"], run["plain"], flush=True)
    boxes: dict = {}
    for w in (float(x) for x in args.boxes.split(",")):
        decided = [r for r in runs if r["plain"]["status"] in DECIDED and r["plain"]["det"] <= w]
        unproven = [r for r in decided if r["shipped"]["status"] not in ("optimal", "infeasible")]
        boxes[str(w)] = {"decided": len(decided), "decided_where_shipped_unproven": len(unproven)}
        print(
            f"box {w}: decides {len(decided)} of {len(runs)} ({len(unproven)} unproven by the shipped path)"
        )
    final_json({"runs": runs, "boxes": boxes, "time_limit": args.time_limit})
    return 0


if __name__ == "__main__":
    sys.exit(main())
