"""SCIP's root Gomory-family cuts handed to CP-SAT's plain stage 1: would such cuts pay? (issue 25, snics23)

A probe, not a proof: the cuts come from SCIP (floating point) and are not checked here, so the answers are
only compared with the plain model's. Per draw: the MIP backend's stage-1 model (solver._Model, solver "mip")
is exported (MPModelProto) and solved by SCIP through PySCIPOpt in a second Python (`--scip-python`, a venv
with `pip install pyscipopt`; the project's venv has none) with every separator off but gomory and its
strongcg child (no gomorymi: the strong Chvatal-Gomory cuts, integer coefficients), root only (limits/nodes
1); every cut row in SCIP's root LP is written out; then CP-SAT's plain stage 1 is solved with and without
them (the same rows added, integer coefficients) and its deterministic time, CPU and objective reported.

    python3 -m venv /tmp/scipenv && /tmp/scipenv/bin/pip install pyscipopt
    .venv/bin/python -m bench.placement.oraclecuts --scip-python /tmp/scipenv/bin/python --draws 1541,1598
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SCIP_CHILD = r"""
import json, sys
from pyscipopt import Eventhdlr, Model, SCIP_EVENTTYPE, quicksum
spec = json.load(open(sys.argv[1]))
m = Model(); m.hideOutput()
xs = [m.addVar(name=n, vtype="B" if (i and lb == 0 and ub == 1) else ("I" if i else "C"), lb=lb, ub=ub, obj=o)
      for n, lb, ub, i, o in spec["vars"]]
for n, idx, co, lo, hi in spec["cons"]:
    e = quicksum(c * xs[i] for i, c in zip(idx, co))
    if lo is not None and hi is not None and lo == hi:
        m.addCons(e == lo, name=n)
    else:
        if lo is not None:
            m.addCons(e >= lo, name=n + "_lo")
        if hi is not None:
            m.addCons(e <= hi, name=n)
for s in spec["off"]:
    m.setParam(f"separating/{s}/freq", -1)
m.setParam("limits/time", 20); m.setParam("limits/gap", 1e-5); m.setParam("limits/nodes", 1)
seen = {}
class Rows(Eventhdlr):
    def eventinit(self): self.model.catchEvent(SCIP_EVENTTYPE.LPSOLVED, self)
    def eventexit(self): self.model.dropEvent(SCIP_EVENTTYPE.LPSOLVED, self)
    def eventexec(self, ev):
        if self.model.getDepth() != 0:
            return
        for r in self.model.getLPRowsData():
            if r.name.startswith(("scg", "gom")) and r.name not in seen:
                names = [c.getVar().name for c in r.getCols()]
                seen[r.name] = {"terms": [(n[2:] if n.startswith("t_") else n, v) for n, v in zip(names, r.getVals())],
                                "lhs": r.getLhs(), "rhs": r.getRhs(), "const": r.getConstant()}
m.includeEventhdlr(Rows(), "rows", "")
m.optimize()
json.dump({"status": m.getStatus(), "dual": m.getDualbound(), "cuts": seen}, open(sys.argv[2], "w"))
"""

OFF = ["closecuts", "flower", "rlt", "disjunctive", "gauge", "interminor", "minor", "convexproj", "mixing",
       "impliedbounds", "intobj", "cgmip", "gomorymi", "flowcover", "cmir", "knapsackcover", "aggregation", "clique",
       "zerohalf", "lagromory", "mcf", "eccuts", "oddcycle", "rapidlearning"]  # fmt: skip


def scip_cuts(problem, scip_python: str) -> dict:
    from ortools.linear_solver import linear_solver_pb2

    from placement.solver import Options, _Model

    m = _Model(problem, Options(solver="mip"))
    m.minimize(m.stage1)
    pr = linear_solver_pb2.MPModelProto()
    m.m.ExportModelToProto(pr)
    big = 1e29
    spec = {
        "vars": [
            (v.name, v.lower_bound, v.upper_bound, v.is_integer, v.objective_coefficient) for v in pr.variable
        ],
        "cons": [
            (
                c.name,
                list(c.var_index),
                list(c.coefficient),
                c.lower_bound if c.lower_bound > -big else None,
                c.upper_bound if c.upper_bound < big else None,
            )
            for c in pr.constraint
        ],  # fmt: skip
        "off": OFF,
    }
    with tempfile.TemporaryDirectory() as tmp:
        src, dst, prog = (os.path.join(tmp, f) for f in ("model.json", "cuts.json", "child.py"))
        with open(src, "w") as f:
            json.dump(spec, f)
        with open(prog, "w") as f:
            f.write(SCIP_CHILD)
        subprocess.run(["timeout", "60", scip_python, prog, src, dst], check=True)
        with open(dst) as f:
            return json.load(f)


def stage1(problem, cuts: list[dict], time_limit: float) -> tuple[str, float, float, float, int]:
    from placement.cpsat import new_solver
    from placement.solver import GAP_LIMIT, Options, _Model

    opts = Options()
    m = _Model(problem, opts)
    m.minimize(m.stage1)
    index = {v.name: k for k, v in enumerate(m.m.proto.variables)}
    added = 0
    for c in cuts:
        if c["rhs"] > 1e19 or not all(float(v).is_integer() for _, v in c["terms"]):
            continue  # a GMI row with fractional coefficients (gomorymi is off: none expected)
        if not all(n in index for n, _ in c["terms"]):
            continue
        xs = [m.m.get_bool_var_from_proto_index(index[n]) for n, _ in c["terms"]]
        m.m.add(
            sum(int(v) * x for (_, v), x in zip(c["terms"], xs, strict=True)) <= round(c["rhs"] - c["const"])
        )
        added += 1
    solver = new_solver(m.cp)
    solver.parameters.num_workers = opts.workers
    solver.parameters.linearization_level = opts.linearization
    solver.parameters.relative_gap_limit = GAP_LIMIT
    solver.parameters.max_time_in_seconds = time_limit
    c0 = time.process_time()
    st = solver.Solve(m.m)
    cpu = time.process_time() - c0
    return solver.StatusName(st), solver.ObjectiveValue(), solver.deterministic_time, cpu, added


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", default="1541,1598")
    ap.add_argument("--scip-python", required=True)
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--min-snics", type=int, default=2)
    args = ap.parse_args()
    from bench.common import final_json, print_machine
    from bench.placement.plainparams import instances
    from placement.model import parse_problem
    from placement.solver import load_backends

    load_backends()
    print_machine()
    out = {}
    args.large = None
    for d, obj in instances(args).items():
        problem = parse_problem(obj)
        sc = scip_cuts(problem, args.scip_python)
        plain = stage1(problem, [], args.time_limit)
        cut = stage1(problem, list(sc["cuts"].values()), args.time_limit)
        out[d] = {"scip_root": sc["status"], "cuts": cut[4], "plain_det": plain[2], "cuts_det": cut[2],
                  "plain_cpu": plain[3], "cuts_cpu": cut[3], "same": plain[1] == cut[1]}  # fmt: skip
        print(
            f"{d}: SCIP root {sc['status']} (dual {sc['dual']:.7e}), {cut[4]} cuts | plain {plain[0][:3]} det "
            f"{plain[2]:.4f} cpu {plain[3]:.3f} | cuts {cut[0][:3]} det {cut[2]:.4f} cpu {cut[3]:.3f}"
            f"{'' if plain[1] == cut[1] else f'  OBJECTIVES DIFFER {plain[1]} {cut[1]}'}",
            flush=True,
        )
    final_json(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
