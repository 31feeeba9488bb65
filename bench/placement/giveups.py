"""Instances where prepare gives no groups: another tree vs this one, side by side, on listed draws.

The draws come from a file, one a line: `k snics size seed shape capacity pcie traffic pinned background
latency ...` (the sweep's parameters; `placement.families.build(Family(...), size, seed)` rebuilds each; `#` a comment).
bench/placement/giveup_draws.txt: 41 such draws, with several sNICs mostly (bench/RESULTS.md). `--foreign A-B,C`
takes the second generator's draws of those seeds instead (bench.placement.foreign.instance).
Per draw, each tree (and with --mip this tree's MIP backend) runs in its own worker process, alternately:
`--prepare` times prepare alone (CPU s, and whether it gave groups: the trees must agree), else the whole
solve at --time-limit (status, host cost, gap, CPU s).

    git archive REV | tar -x -C /tmp/old
    .venv/bin/python -m bench.placement.giveups --old /tmp/old (--draws FILE | --foreign SEEDS) [--prepare] [--mip]
                                                [--time-limit 10]

Last line JSON: per tree, the CPU seconds' median, max and sum, and the per-draw results.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bench.common import final_json, median, print_machine
from bench.placement.foreign import instance
from placement.families import Family, build

WORKER = """
import json, sys, time
from placement.decompose import prepare
from placement.model import parse_problem
from placement.solver import solve
for line in sys.stdin:
    req = json.loads(line)
    t, c = time.monotonic(), time.process_time()
    problem = parse_problem(req["instance"])
    if req["prepare"]:
        c = time.process_time()
        g = prepare(problem)
        out = {"groups": None if g is None else int(g.n_groups)}
    else:
        got = solve(problem, time_limit=req["limit"], started=t, solver=req["solver"])
        out = {k: got.get(k) for k in ("status", "host_cost", "gap")}
    print(json.dumps({**out, "cpu": round(time.process_time() - c, 4)}), flush=True)
"""


def read_draws(path: Path) -> list[tuple[str, dict]]:
    """(label, instance) per line of `path`."""
    out = []
    for line in path.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        fam = Family(shape=f[4], capacity=float(f[5]), pcie=float(f[6]), snics=int(f[1]), traffic=f[7],
                     pinned=float(f[8]), background=float(f[9]), latency=f[10] == "True")  # fmt: skip
        out.append((f"{f[0]}: {f[1]} sNICs {f[2]} {f[4]}", build(fam, int(f[2]), int(f[3]))))
    return out


def foreign_draws(seeds: str) -> list[tuple[str, dict]]:
    """(label, instance) per seed of `seeds` ("A-B" ranges and single seeds, comma separated)."""
    out = []
    for part in seeds.split(","):
        a, _, b = part.partition("-")
        out += [(f"foreign {s}", instance(s)) for s in range(int(a), int(b or a) + 1)]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="tree of the other version (an exported commit)")
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--draws", type=Path, help="file of draws, one a line")
    what.add_argument("--foreign", help="seeds of the second generator's draws: A-B,C,...")
    ap.add_argument("--prepare", action="store_true", help="prepare alone, not the whole solve")
    ap.add_argument("--mip", action="store_true", help="the MIP backend of this tree too (whole solve)")
    ap.add_argument("--time-limit", type=float, default=10.0)
    args = ap.parse_args()
    print_machine()
    trees = {"old": Path(args.old).resolve(), "new": Path(__file__).resolve().parents[2]}
    if args.mip and not args.prepare:
        trees["mip"] = trees["new"]
    procs = {k: subprocess.Popen([sys.executable, "-c", WORKER], cwd=t, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True) for k, t in trees.items()}  # fmt: skip
    runs: dict[str, list[dict]] = {k: [] for k in trees}
    draws = read_draws(args.draws) if args.draws else foreign_draws(args.foreign)
    try:
        for k, p in procs.items():  # each worker's first solve imports its solvers' modules: not a figure
            assert p.stdin and p.stdout
            req = {"instance": draws[0][1], "limit": args.time_limit, "prepare": args.prepare}
            p.stdin.write(json.dumps({**req, "solver": "mip" if k == "mip" else "cpsat"}) + "\n")
            p.stdin.flush()
            p.stdout.readline()
        for n, (label, obj) in enumerate(draws):
            req = {"instance": obj, "limit": args.time_limit, "prepare": args.prepare}
            names = list(trees) if n % 2 == 0 else ["new", "old", *list(trees)[2:]]
            for k in names:
                assert procs[k].stdin and procs[k].stdout
                procs[k].stdin.write(json.dumps({**req, "solver": "mip" if k == "mip" else "cpsat"}) + "\n")
                procs[k].stdin.flush()
                runs[k].append(json.loads(procs[k].stdout.readline()))
            print(label, {k: runs[k][-1] for k in trees}, flush=True)
    finally:
        for p in procs.values():
            if p.stdin:
                p.stdin.close()
            p.wait(timeout=60)
    cpu = {k: [r["cpu"] for r in v] for k, v in runs.items()}
    final_json({k: {"cpu_median_s": median(c), "cpu_max_s": max(c, default=0), "cpu_sum_s": round(sum(c), 3),
                    "runs": runs[k]} for k, c in cpu.items()})  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
