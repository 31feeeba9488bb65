"""prepare (decompose.py: groups, configurations, dominance) before vs after a change, side by side.

Like versus.py (its workers, one per tree, alternating per seed), but each times parse_problem + prepare
alone, in CPU seconds (process_time), the least of --repeat runs; it also checks that both trees keep the
same configurations (the group blocks' rows and vectors):

    git archive REV | tar -x -C /tmp/old
    .venv/bin/python -m bench.placement.prepare_versus --old /tmp/old --families long,chains --sizes 500
                                                       [--seeds 12] [--repeat 3] [--snics K]

Last line JSON: {family: {size: {old: {cpu_median_s, cpu_max_s}, new: {...}, instances, same}}}.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.common import final_json, median, print_machine
from bench.placement.versus import Worker, alternate
from placement.families import FAMILIES

WORKER = """
import hashlib, json, sys, time
from placement.decompose import prepare
from placement.model import parse_problem
for line in sys.stdin:
    req = json.loads(line)
    best, gr = None, None
    for _ in range(req["repeat"]):
        c = time.process_time()
        gr = prepare(parse_problem(req["instance"]))
        cpu = time.process_time() - c
        best = cpu if best is None else min(best, cpu)
    h = hashlib.sha256(json.dumps(None if gr is None else [[g.tolist() for g in gr.group_nodes], gr.budget]).encode())
    for a in ([] if gr is None else [gr.start, gr.config, gr.cost, gr.pcie, gr.moves, gr.use, gr.current]):
        h.update(a.tobytes())
    print(json.dumps({"cpu": best, "configs": 0 if gr is None else len(gr.cost), "digest": h.hexdigest()}),
          flush=True)
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="tree of the other version (an exported commit)")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--sizes", default="500,5000")
    ap.add_argument("--seeds", type=int, default=12)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--snics", type=int, default=None, help="override the families' sNIC count")
    ap.add_argument("--repeat", type=int, default=3, help="runs per instance and tree (the least counts)")
    args = ap.parse_args()
    print_machine()
    trees = {"old": Path(args.old).resolve(), "new": Path(__file__).resolve().parents[2]}
    workers = {v: Worker(t, WORKER) for v, t in trees.items()}

    def show(fam: str, n: int, seed: int, runs: dict[str, list[dict]]) -> None:
        o, w = runs["old"][-1], runs["new"][-1]
        print(f"{fam} {n} seed {seed}: old {o['cpu']:.4f}, new {w['cpu']:.4f} CPU s, "
              f"{w['configs']} configurations, same {o['digest'] == w['digest']}", flush=True)  # fmt: skip

    def summary(k: int, runs: dict[str, list[dict]]) -> dict:
        return {"instances": k} | {
            v: {"cpu_median_s": round(median([r["cpu"] for r in rs]), 4),
                "cpu_max_s": round(max(r["cpu"] for r in rs), 4)} for v, rs in runs.items()
        } | {"same": all(a["digest"] == b["digest"] for a, b in zip(runs["old"], runs["new"], strict=True))}  # fmt: skip

    figures = alternate(workers, args, lambda n: args.seeds,
                        lambda w, obj: w.ask({"instance": obj, "repeat": args.repeat}), show, summary)  # fmt: skip
    final_json(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
