"""parse_problem seconds, two versions of `placement/` side by side (the rest of versus.py times solves).

Each round runs one fresh process per tree (this tree and --old, order alternating per round) that
parses the same seeded chains instances (placement/families.py of that tree, seeds 10-12) at 500 and
5,000 vertices; median / max over all rounds.

    git archive REV | tar -x -C /tmp/old
    .venv/bin/python -m bench.placement.parse_versus --old /tmp/old [--rounds 3]

Last line JSON: {"old": {"500": {median_s, max_s}, "5000": {...}}, "new": {...}}.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bench.common import final_json, median, print_machine

WORKER = """
import json, time
from placement.families import instance
from placement.model import parse_problem
out = {}
for n in (500, 5000):
    ts = []
    for seed in range(10, 13):
        obj = instance("chains", n, seed)
        t = time.perf_counter()
        parse_problem(obj)
        ts.append(time.perf_counter() - t)
    out[n] = ts
print(json.dumps(out))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="tree of the other version (an exported commit)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    print_machine()
    trees = {"old": Path(args.old).resolve(), "new": Path(__file__).resolve().parents[2]}
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    for r in range(args.rounds):
        for name in ("old", "new") if r % 2 == 0 else ("new", "old"):
            done = subprocess.run([sys.executable, "-c", WORKER], cwd=trees[name], capture_output=True,
                                  text=True, check=True)  # fmt: skip
            runs[name].append(json.loads(done.stdout))
    figures = {
        name: {n: {"median_s": round(median([x for run in rs for x in run[n]]), 4),
                   "max_s": round(max(x for run in rs for x in run[n]), 4)} for n in ("500", "5000")}
        for name, rs in runs.items()
    }  # fmt: skip
    for name, f in figures.items():
        print(f"{name}: " + ", ".join(f"{n}: {v['median_s']} / {v['max_s']} s" for n, v in f.items()))
    final_json(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
