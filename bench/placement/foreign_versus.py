"""Two trees of `placement/` side by side on the second generator's draws (bench/placement/foreign.py), and
the MIP once per draw: per draw the CPU seconds of each whole solve (parse, proof, tie-break; process_time of
its worker), min of --reps runs in alternating order, the host costs and statuses of both trees, and the
draws where a tree is slower than the MIP by foreign.py's rule (x2 and +0.05 s):

    git archive REV | tar -x -C /tmp/old && ln -s /work/main/.venv /tmp/old/.venv
    .venv/bin/python -m bench.placement.foreign_versus --old /tmp/old --draws 90 [--seed 0] [--reps 1]
    .venv/bin/python -m bench.placement.foreign_versus --old /tmp/old --size 500 --draws 30 --reps 2
    .venv/bin/python -m bench.placement.foreign_versus --old /tmp/old --seeds 54,1627 --reps 5

(`--size N[:SNICS]`: the large regime, `large_instance(seed, N, SNICS)`.) Last line JSON: {old, new: {cpu_sum,
cpu_median, proven, slower}, mip: {cpu_sum, cpu_median}, differ: [seeds whose proven host costs differ]}.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.common import final_json, median, print_machine
from bench.placement.foreign import instance, large_instance, slower_than_mip
from bench.placement.versus import Worker
from placement.solver import GAP_LIMIT

WORKER = """
import json, sys, time
from placement.model import parse_problem
from placement.solver import solve
for line in sys.stdin:
    req = json.loads(line)
    c = time.process_time()
    out = solve(parse_problem(req["instance"]), time_limit=req["limit"], solver=req["solver"])
    print(json.dumps({"cpu": time.process_time() - c, "status": out["status"], "host_cost": out.get("host_cost"),
                      "tiebreak": out.get("tiebreak")}), flush=True)
"""


def _same(a: dict, b: dict) -> bool:
    if a["status"] != b["status"]:
        return False
    if a["status"] != "optimal":
        return True
    x, y = a["host_cost"], b["host_cost"]
    return abs(x - y) <= 2 * GAP_LIMIT * max(abs(x), abs(y), 1e-9)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="tree of the other version (an exported commit)")
    ap.add_argument("--draws", type=int, default=90)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seeds", default=None, help="these seeds (a,b,...) in place of --seed / --draws")
    ap.add_argument("--size", default=None, help="N or N:SNICS: the large regime")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=20.0)
    args = ap.parse_args()
    print_machine()
    trees = {"old": Path(args.old), "new": Path(__file__).resolve().parents[2]}
    workers = {k: Worker(t, WORKER) for k, t in trees.items()}
    rows = []
    try:
        for w in workers.values():  # the first solve of a process loads the libraries: not a draw's
            for backend in ("cpsat", "mip"):
                w.ask({"instance": instance(1), "limit": args.time_limit, "solver": backend})
        seeds = range(args.seed, args.seed + args.draws)
        for s in [int(x) for x in args.seeds.split(",")] if args.seeds else seeds:
            if args.size:
                n, _, k = args.size.partition(":")
                obj = large_instance(s, int(n), int(k or 1))
            else:
                obj = instance(s)
            runs: dict[str, dict] = {}
            for r in range(args.reps):
                for name in ("old", "new") if (s + r) % 2 == 0 else ("new", "old"):
                    got = workers[name].ask({"instance": obj, "limit": args.time_limit, "solver": "cpsat"})
                    if name not in runs or got["cpu"] < runs[name]["cpu"]:
                        runs[name] = got
            mip = workers["new"].ask({"instance": obj, "limit": args.time_limit, "solver": "mip"})
            row = {"seed": s, "old": runs["old"], "new": runs["new"], "mip": mip}
            rows.append(row)
            flag = "" if _same(runs["old"], runs["new"]) else "  DIFFER"
            print(f"{s}: old {runs['old']['cpu']:.3f} new {runs['new']['cpu']:.3f} mip {mip['cpu']:.3f}  "
                  f"{runs['old']['status']} {runs['old']['host_cost']} / {runs['new']['status']} "
                  f"{runs['new']['host_cost']}  tiebreak {runs['old']['tiebreak']} / {runs['new']['tiebreak']}"
                  f"{flag}", flush=True)  # fmt: skip
    finally:
        for w in workers.values():
            w.close()

    out: dict = {}
    for name in ("old", "new"):
        cpu = [r[name]["cpu"] for r in rows]
        out[name] = {"cpu_sum": round(sum(cpu), 3), "cpu_median": round(median(cpu), 4),
                     "proven": sum(r[name]["status"] == "optimal" for r in rows),
                     "tiebreak_proven": sum(r[name]["tiebreak"] == "proven" for r in rows),
                     "slower": [r["seed"] for r in rows if slower_than_mip(r[name]["cpu"], r["mip"]["cpu"])]}  # fmt: skip
    mcpu = [r["mip"]["cpu"] for r in rows]
    out["mip"] = {"cpu_sum": round(sum(mcpu), 3), "cpu_median": round(median(mcpu), 4)}
    out["differ"] = [r["seed"] for r in rows if not _same(r["old"], r["new"])]
    ratios = sorted(r["new"]["cpu"] / max(r["old"]["cpu"], 1e-9) for r in rows)
    out["ratio_median"] = round(median(ratios), 4)
    for name in ("old", "new"):
        print(name, out[name])
    print("mip", out["mip"], "differ", out["differ"], "ratio median new/old", out["ratio_median"])
    final_json(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
