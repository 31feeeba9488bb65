"""parse_problem seconds, two versions of `placement/` side by side (the rest of versus.py times solves).

Each round runs one fresh process per tree (this tree and --old, order alternating per round) that
parses the same seeded instances of each family (placement/families.py of that tree, --seeds from 10) at
each size, the tree's cache of float readings emptied before each parse (a first read: every family draws
some of the same floats); CPU seconds (process_time), median / max over all rounds and seeds.

    git archive REV | tar -x -C /tmp/old
    .venv/bin/python -m bench.placement.parse_versus --old /tmp/old [--rounds 3] [--families a,b]
                                                    [--sizes 500,5000] [--seeds 3]

Last line JSON: {"old": {family: {size: {median_s, max_s}}}, "new": {...}}.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bench.common import final_json, median, print_machine
from placement.families import FAMILIES

WORKER = """
import json, sys, time
from placement import model
from placement.families import instance
families, sizes, seeds = json.loads(sys.argv[1])
cache_clear = getattr(model._rationalize, "cache_clear", None) or model._READINGS.clear
out = {}
for fam in families:
    for n in sizes:
        ts = []
        for seed in range(10, 10 + seeds):
            obj = instance(fam, n, seed)
            cache_clear()
            t = time.process_time()
            model.parse_problem(obj)
            ts.append(time.process_time() - t)
        out[f"{fam} {n}"] = ts
print(json.dumps(out))
"""


def _nested(figures: dict[str, dict]) -> dict[str, dict]:
    """{"family size": x} as {family: {size: x}}."""
    out: dict[str, dict] = {}
    for case, x in figures.items():
        fam, n = case.split(" ")
        out.setdefault(fam, {})[n] = x
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="tree of the other version (an exported commit)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--sizes", default="500,5000")
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    job = json.dumps([args.families.split(","), [int(x) for x in args.sizes.split(",")], args.seeds])
    print_machine()
    trees = {"old": Path(args.old).resolve(), "new": Path(__file__).resolve().parents[2]}
    runs: dict[str, list[dict]] = {"old": [], "new": []}
    for r in range(args.rounds):
        for name in ("old", "new") if r % 2 == 0 else ("new", "old"):
            done = subprocess.run([sys.executable, "-c", WORKER, job], cwd=trees[name], capture_output=True,
                                  text=True, check=True)  # fmt: skip
            runs[name].append(json.loads(done.stdout))
    cases = list(runs["old"][0])
    figures = {
        name: {case: {"median_s": round(median([x for run in rs for x in run[case]]), 4),
                      "max_s": round(max(x for run in rs for x in run[case]), 4)} for case in cases}
        for name, rs in runs.items()
    }  # fmt: skip
    for case in cases:
        old, new = figures["old"][case], figures["new"][case]
        print(f"{case}: old {old['median_s']} / {old['max_s']} s, new {new['median_s']} / {new['max_s']} s "
              f"(median old/new {old['median_s'] / new['median_s']:.2f})")  # fmt: skip
    final_json({name: _nested(f) for name, f in figures.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
