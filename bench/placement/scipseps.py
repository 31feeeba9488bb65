"""Which of SCIP's separators proves the plain model at the root (issue 25, snics23).

SCIP (the MIP backend, `--solver mip`) proves foreign draws 1541 / 1598 at the root node where CP-SAT closes
the same 0.3-0.5 % root gap by branching. This solves the very model `solve(solver="mip")` builds
(solver._Model with solver "mip", stage 1: host cost) with SCIP parameter sets
(`SetSolverSpecificParametersAsString`) and reports per draw and set: status, CPU s, B&B nodes, LP
iterations and the objective. Each solve runs in a child process under `timeout` (SCIP with some separators
off ignores its time limit: 1541 with `separating/gomory/freq = -1` did not return in 60 s).

    .venv/bin/python -m bench.placement.scipseps --draws 1541,1598 --mode off   # one family off at a time
    .venv/bin/python -m bench.placement.scipseps --draws 1541,1598 --mode only  # all but one off
    .venv/bin/python -m bench.placement.scipseps --draws 1541 --sets 'G=separating/gomory/freq = -1'

`--sets NAME=param = value;param = value` (";" separates SCIP parameter lines). SCIP 10 (OR-Tools 9.15)
nests separators: gomory runs gomorymi and strongcg, aggregation runs cmir, flowcover and knapsackcover
(each with its own freq); `--mode only` keeps a parent's children on with it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

SEPARATORS = ["closecuts", "flower", "rlt", "disjunctive", "gauge", "interminor", "minor", "convexproj", "mixing",
              "impliedbounds", "intobj", "cgmip", "gomory", "strongcg", "gomorymi", "flowcover", "cmir",
              "knapsackcover", "aggregation", "clique", "zerohalf", "lagromory", "mcf", "eccuts", "oddcycle",
              "rapidlearning"]  # fmt: skip
CHILDREN = {"gomory": ["gomorymi", "strongcg"], "aggregation": ["cmir", "flowcover", "knapsackcover"]}
HANDLERS = ["linear", "knapsack", "setppc", "varbound", "logicor", "integral"]  # constraints/X/sepafreq


def off(names: list[str]) -> str:
    """SCIP parameter lines turning the named separators / constraint handlers' separation off."""
    lines = [f"separating/{s}/freq = -1" for s in names if s in SEPARATORS]
    return "\n".join(lines + [f"constraints/{c}/sepafreq = -1" for c in names if c in HANDLERS])


def variants(mode: str, specs: list[str]) -> dict[str, str]:
    out = {"default": ""}
    every = SEPARATORS + HANDLERS
    if mode == "off":
        out.update({f"-{s}": off([s]) for s in every})
    elif mode == "only":
        out["none"] = off(every)
        for s in every:
            keep = {s, *CHILDREN.get(s, [])} | {p for p, kids in CHILDREN.items() if s in kids}
            out[f"+{s}"] = off([x for x in every if x not in keep])
    for spec in specs:
        name, _, body = spec.partition("=")
        out[name] = body.replace(";", "\n")
    return out


def child(draw: int, params: str, time_limit: float) -> dict:
    """One solve in this process: the MIP backend's stage-1 model of foreign draw `draw` with `params`."""
    from bench.placement.foreign import instance
    from placement.model import parse_problem
    from placement.solver import GAP_LIMIT, Options, _Model, load_backends

    load_backends()
    m = _Model(parse_problem(instance(draw)), Options(solver="mip"))
    m.minimize(m.stage1)
    if params and not m.m.SetSolverSpecificParametersAsString(params):
        raise SystemExit(f"SCIP refused the parameters {params!r}")
    m.gap_limit = GAP_LIMIT
    c0 = time.process_time()
    st, obj, bound = m.solve(time.monotonic() + time_limit)
    cpu = time.process_time() - c0
    return {"st": st, "obj": obj, "bound": bound, "cpu": cpu, "nodes": m.m.nodes(), "iters": m.m.iterations()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", default="1541,1598")
    ap.add_argument("--mode", choices=["off", "only", "sets"], default="sets")
    ap.add_argument("--sets", nargs="*", default=[])
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--timeout", type=float, default=60.0, help="wall s per child before it is killed")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)  # DRAW: one solve, JSON on stdout
    ap.add_argument("--params", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(child(int(args.child), args.params, args.time_limit)))
        return 0
    from bench.common import final_json, print_machine
    from bench.placement.plainparams import draws

    print_machine()
    sets = variants(args.mode, args.sets)
    table: dict[str, dict] = {}
    for d in draws(args.draws):
        for name, params in sets.items():
            cmd = [sys.executable, "-m", "bench.placement.scipseps", "--child", str(d), "--params", params,
                   "--time-limit", str(args.time_limit)]  # fmt: skip
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
                res = (
                    json.loads(r.stdout.strip().splitlines()[-1])
                    if r.returncode == 0
                    else {"st": f"rc {r.returncode}"}
                )
            except subprocess.TimeoutExpired:
                res = {"st": f"no answer in {args.timeout:g} s"}
            table.setdefault(str(d), {})[name] = res
            if "cpu" in res:
                text = f"{res['st'][:4]} cpu {res['cpu']:.3f} nodes {res['nodes']} iters {res['iters']} obj {res['obj']}"
            else:
                text = res["st"]
            print(f"{d} {name:16s} {text}", flush=True)
    final_json(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
