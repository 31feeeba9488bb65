"""The same placement instance solved several times, idle and under a CPU hog: is the answer the same?

A researcher expects one instance and one set of options to give one placement by one path. This solves a
families.py instance `--runs` times in this process (after a warm-up solve), first with nothing started,
then with `--hog` busy-loop processes (started here, killed by their pids at the end), and compares per run:
the placement, the host cost, the tie-break's status, and the engine's path (its debug log with the
wall-clock figures removed: the incumbents, bounds and CP-SAT questions in order, with CP-SAT's
deterministic times).

    .venv/bin/python -m bench.placement.repeat --family long --size 500 --seed 0 [--runs 5] [--hog 2]

Last line JSON: {same_placement, same_path, placements, tiebreaks, paths, cpu_s: {idle: [..], hog: [..]}}.
A run whose tie-break is "best-effort" where the others' is "proven" ended at the tie-break's wall-clock bound
(docs/placement.md "Same instance, same answer"): its path should differ only in the tie-break's calls. A
tie-break that used up its deterministic work box is "best-effort" in every run.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import re
import subprocess
import sys
import time

from bench.common import final_json, print_machine
from placement.families import instance
from placement.model import parse_problem
from placement.solver import solve

# Figures that measure the wall clock, not the path: removed before the logs are compared.
WALL = re.compile(r"\b(t|wall)[= ]\d+\.\d+")


class _Path(logging.Handler):
    """Collects the engine's debug messages of one solve."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(WALL.sub(r"\1 _", record.getMessage()))


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:12]


def _one(obj: dict, limit: float) -> dict:
    handler = _Path()
    logger = logging.getLogger("placement")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        c0 = time.process_time()
        out = solve(parse_problem(obj), time_limit=limit)
        cpu = time.process_time() - c0
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    return {
        "status": out["status"],
        "host_cost": out.get("host_cost"),
        "tiebreak": out.get("tiebreak"),
        "placement": _digest(out.get("placement")),
        "path": _digest(handler.lines),
        "questions": sum("?" in line for line in handler.lines),
        "cpu_s": round(cpu, 3),
        "lines": handler.lines,
    }


def _hog(k: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(k)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="long")
    ap.add_argument("--size", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--snics", type=int, default=None)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--hog", type=int, default=2, help="busy-loop processes during the second series")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--show-paths", action="store_true", help="print the first differing path lines")
    args = ap.parse_args()
    print_machine()
    obj = instance(args.family, args.size, args.seed, **({"snics": args.snics} if args.snics else {}))
    _one(instance("chains", 50, 99), args.time_limit)  # warm-up: library loading out of the first run
    series: dict[str, list[dict]] = {"idle": []}
    for _ in range(args.runs):
        series["idle"].append(_one(obj, args.time_limit))
        print("idle", {k: v for k, v in series["idle"][-1].items() if k != "lines"}, flush=True)
    if args.hog:
        series["hog"] = []
        hogs = _hog(args.hog)
        try:
            for _ in range(args.runs):
                series["hog"].append(_one(obj, args.time_limit))
                print("hog ", {k: v for k, v in series["hog"][-1].items() if k != "lines"}, flush=True)
        finally:
            for p in hogs:
                p.kill()
                p.wait()
    runs = [r for rs in series.values() for r in rs]
    if args.show_paths:
        paths = {r["path"]: r["lines"] for r in runs}
        for digest, lines in paths.items():
            print(f"--- path {digest}", *lines, sep="\n")
    final_json(
        {
            "instance": f"{args.family} {args.size} seed {args.seed}"
            + (f" snics {args.snics}" if args.snics else ""),
            "same_placement": len({r["placement"] for r in runs}) == 1,
            "same_path": len({r["path"] for r in runs}) == 1,
            "placements": sorted({r["placement"] for r in runs}),
            # both "proven" and "best-effort": some runs' tie-break was cut by its wall-clock bound
            "tiebreaks": sorted({str(r["tiebreak"]) for r in runs}),
            "paths": len({r["path"] for r in runs}),
            "cpu_s": {k: [r["cpu_s"] for r in rs] for k, rs in series.items()},
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
