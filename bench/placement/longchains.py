"""Long chains (groups far above 4,096 configurations) at about 500 vertices: this tree's solve against
another tree's (e.g. main before place10cap, where such an instance went whole to the plain model).

    .venv/bin/python -m bench.placement.longchains --old /tmp/place10cap_old --seeds 0,1,2

Instances (placement.families.long_chains, per seed): 30 chains of 13-16 NFs with one sNIC, 50 of 8-9 NFs
with two, 45 of 8-10 NFs with two. Each tree solves every instance in its own process (versus.Worker: the
default solver, the 10 s limit); CPU seconds (process_time of parse + solve) are the claim on a shared
machine. Last line JSON: {instance: {tree: {status, host_cost, cpu, s (to the proven host cost), ok, gap}}}.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from bench.common import final_json, print_machine
from bench.placement.versus import Worker
from placement.families import long_chains


def instances(seeds: list[int]) -> dict[str, dict]:
    """The benchmark's instances, by name."""
    out = {}
    for seed in seeds:
        rng = random.Random(seed)
        out[f"1snic-13to16-s{seed}"] = long_chains([rng.randint(13, 16) for _ in range(30)], 1, seed)
        out[f"2snic-8to9-s{seed}"] = long_chains([rng.randint(8, 9) for _ in range(50)], 2, seed)
        out[f"2snic-8to10-s{seed}"] = long_chains([rng.randint(8, 10) for _ in range(45)], 2, seed)
    return out


def run_tree(tree: Path, insts: dict[str, dict], limit: float) -> dict:
    """Every instance solved by the `placement` of `tree`, in its own process (versus.Worker)."""
    worker = Worker(tree)
    try:
        return {name: worker.solve(obj, limit) for name, obj in insts.items()}
    finally:
        worker.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", type=Path, required=True, help="the other tree (e.g. git archive main | tar -x)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--limit", type=float, default=10.0)
    args = ap.parse_args(argv)
    print_machine()
    insts = instances([int(s) for s in args.seeds.split(",")])
    new_tree = Path(__file__).resolve().parents[2]
    res = {"new": run_tree(new_tree, insts, args.limit), "old": run_tree(args.old, insts, args.limit)}
    table = {}
    for name, obj in insts.items():
        table[name] = {t: res[t][name] for t in ("new", "old")}
        n, o = table[name]["new"], table[name]["old"]
        print(f"{name:18} {len(obj['nodes']):5}  new {n['status']:9} {n['host_cost']!s:>10} cpu {n['cpu']:6.2f}"
              f"  | old {o['status']:9} {o['host_cost']!s:>10} cpu {o['cpu']:6.2f}")  # fmt: skip
    final_json(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
