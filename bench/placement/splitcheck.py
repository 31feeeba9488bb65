"""Where prepare gives up (a component past MAX_ROW), could the groups engine still answer stage 1 exactly?

Issue 25, branch split25. The host cost of an NF is b_host x instances + r_host x load whatever its
neighbours do, and capacity, resources and max_moves are rows over single NFs: only the PCIe rows (a
crossing needs both ends of an edge) and the latency SLOs tie NFs together. So where no PCIe row and no
SLO row can bind, every NF could be its own group (the edges kept for the tie-break only). Per draw where
`prepare_plan` gives up, this lists:

- `pcie`/`slo` a-priori: how many of the plain model's PCIe and SLO rows it leaves out because every 0/1
  point meets them (`_Model.left_out`: constants and every positive coefficient within the budget, on the
  row's working integers): the split is exact a priori only when all of them are;
- `relaxed`: the same instance with its edges dropped (each NF keeps its load, as a `through` that is on
  no link: the same host and sNIC costs, no PCIe use), which the engine can prepare unless SLO chains still
  join its NFs past MAX_ROW (`noplan`); its proven optimum is a lower bound of the instance's, and the
  optimum itself when its placement meets every PCIe row (`MEETS`), else `violates` (the row it breaks)
  or `infeasible` (so is the instance), with its CPU seconds.

    .venv/bin/python -m bench.placement.splitcheck [--third 3000:100-500,1000:3,5000:10 ...] [--no-files]

Draws: bench/placement/giveup_draws*.txt (sweep and lead draws) and third-generator draws
(`SEED:SIZES:DRAWS`, as `bench.placement.third --seed SEED --sizes SIZES --draws DRAWS`).
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import time
from pathlib import Path

import numpy as np

from bench.common import final_json, print_machine
from bench.placement import third
from bench.placement.giveups import read_draws

TIME_LIMIT = 20.0


def relaxed(p):
    """The problem without its edges, every placed vertex keeping its load off the links."""
    from placement.model import Problem

    loads = p.loads()
    nodes = [
        dataclasses.replace(n, through=ld / 2) if n.placed else n
        for n, ld in zip(p.nodes, loads, strict=True)
    ]
    return Problem(nodes=nodes, edges=[], snics=p.snics, pcie_model=p.pcie_model, chains=p.chains)


def check(obj: dict, o: dict) -> dict | None:
    from placement.decompose import prepare_plan
    from placement.evaluate import evaluate
    from placement.model import parse_problem
    from placement.solver import Options, _Model, prepare_within, run_engine

    p = parse_problem(obj)
    opts = Options(time_limit=TIME_LIMIT, **o)
    if prepare_plan(p, max_moves=opts.max_moves) is not None:
        return None  # prepare does not give up: nothing to split
    m = _Model(p, opts)
    out = {
        "snics": len(p.snics),
        "vertices": len(p.nodes),
        "pcie_rows": len(p.snics) * (1 if p.pcie_model == "shared" else 2),
        "pcie_left_out": sum(1 for x in m.left_out if x.startswith("pcie")),
        "slo_rows": sum(1 for c in p.chains if c.latency_us is not None),
        "slo_left_out": sum(1 for x in m.left_out if x.startswith("latency")),
    }
    rp = relaxed(p)
    c, t0 = time.process_time(), time.monotonic()
    build = prepare_plan(rp, max_moves=opts.max_moves)
    if build is None:
        out["relaxed"] = "noplan"
    else:
        gr = prepare_within(rp, opts, t0, build)
        if gr is None:
            out["relaxed"] = "noprep"
        else:
            gr = dataclasses.replace(gr, moves=np.zeros_like(gr.moves))  # stage 1 only (no tie-break)
            oc = run_engine(gr, opts, t0 + TIME_LIMIT)
            if oc.status == "optimal":
                placement = gr.placement(rp, oc.chosen)
                ev = evaluate(p, placement)
                out["relaxed"] = "MEETS" if not ev.violations else "violates " + ev.violations[0]
                out["relaxed_host_cost"] = float(evaluate(rp, placement).host_cost)
            else:
                out["relaxed"] = oc.status
    out["relaxed_cpu"] = round(time.process_time() - c, 3)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--third", nargs="*", default=["3000:100-500,1000:3,5000:10", "3100:1000:3,5000:1:4"],
                    help="SEED:SIZES:DRAWS of bench.placement.third")  # fmt: skip
    ap.add_argument("--no-files", action="store_true", help="skip bench/placement/giveup_draws*.txt")
    args = ap.parse_args()
    print_machine()
    from placement.solver import load_backends

    load_backends()
    draws: list[tuple[str, dict, dict]] = []
    if not args.no_files:
        for f in ("giveup_draws.txt", "giveup_draws_one_snic.txt"):
            draws += [(lab, obj, {}) for lab, obj in read_draws(Path(__file__).parent / f)]
    for spec in args.third:
        seed, rest = spec.split(":", 1)
        sizes, _, n = rest.rpartition(":")
        for k, (size, ns) in enumerate(third._sizes(sizes, int(n), random.Random(int(seed)))):
            obj, o, _ = third.draw(int(seed) + k, size, ns)
            draws.append((f"third {int(seed) + k} {size}:{ns}", obj, o))
    rows = []
    for label, obj, o in draws:
        try:
            r = check(obj, o)
        except Exception as e:  # noqa: BLE001 - a refused draw (edge cases): not a give-up
            r = None if "PlacementInputError" in type(e).__name__ else {"error": str(e)}
        if r is None:
            continue
        r["draw"] = label
        rows.append(r)
        print(f"{label:<42} {r.get('snics')} sNICs n {r.get('vertices')} pcie left out "
              f"{r.get('pcie_left_out')}/{r.get('pcie_rows')} slo {r.get('slo_left_out')}/{r.get('slo_rows')} "
              f"relaxed {str(r.get('relaxed'))[:60]} cpu {r.get('relaxed_cpu')}", flush=True)  # fmt: skip
    apriori = [r["draw"] for r in rows if r.get("pcie_left_out") == r.get("pcie_rows")
               and r.get("slo_left_out") == r.get("slo_rows")]  # fmt: skip
    meets = [r["draw"] for r in rows if r.get("relaxed") == "MEETS"]
    final_json({"giveups": len(rows), "split_exact_a_priori": apriori, "relaxed_meets": meets, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
