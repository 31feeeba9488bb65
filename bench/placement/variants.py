"""Placement beyond the scaling bench: two sNICs, shared PCIe (the paper's model), incremental re-placement
(current placement = previous optimum, traffic +-20 %) with and without max_moves. Ours vs OR-Tools MIP
(SCIP, gap 0) on the same seeded instances, 3 seeds each, 30 s limit; median solve seconds, statuses, how
many tie-breaks stayed best-effort, and host costs (equal where both prove optimality).

    .venv/bin/python -m bench.placement.variants [--sizes 500,5000] [--solvers cpsat,mip]
"""

from __future__ import annotations

import argparse
import random
import statistics

from placement import parse_problem, solve
from placement.generate import chains_instance

SOLVERS = ["cpsat", "mip"]


def run(label: str, insts: list[dict], **kw) -> None:
    for name in SOLVERS:
        ts, st, hc, tb = [], [], [], 0
        for inst in insts:
            r = solve(parse_problem(inst), solver=name, time_limit=30, **kw)
            ts.append(r["solve_seconds"])
            st.append(r["status"])
            hc.append(round(r["host_cost"], 3) if "host_cost" in r else None)
            tb += "tiebreak" in r
        who = "ours" if name == "cpsat" else "mip "
        print(f"{label:<32} {who} median {statistics.median(ts):7.3f} s  {[round(t, 3) for t in ts]} "
              f"{st} tie-break best-effort {tb}  host {hc}", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="500,5000")
    ap.add_argument("--solvers", default="cpsat,mip", help="cpsat (ours) and/or mip")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    SOLVERS[:] = args.solvers.split(",")
    for name in ("cpsat", "mip"):  # warm-up
        solve(parse_problem(chains_instance(30, seed=99)), solver=name)
    for n in sizes:
        run(f"{n} two sNICs", [chains_instance(n, seed=s, snics=2) for s in range(3)])
        insts = []
        for s in range(3):
            inst = chains_instance(n, seed=s)
            first = solve(parse_problem(inst))
            rng = random.Random(s)
            for e in inst["edges"]:
                e["gbps"] = round(e["gbps"] * rng.uniform(0.8, 1.2), 2)
            for nd in inst["nodes"]:
                nd["location"] = first["placement"][nd["id"]] if nd["kind"] == "nf" else None
            insts.append(inst)
        run(f"{n} incremental", insts)
        run(f"{n} incremental max_moves=10", insts, max_moves=10)
        run(f"{n} shared PCIe", [dict(chains_instance(n, seed=s), pcie_model="shared") for s in range(3)])


if __name__ == "__main__":
    main()
