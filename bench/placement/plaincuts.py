"""Cover inequalities added to the plain model's stage 1 before the solve, side by side with the shipped model.

Idea (issue 25, after snics22): SCIP proves foreign draws 1541 / 1598 at the root with its cuts, CP-SAT
closes the same 0.3-0.5 % gap by branching. Here every linear row of the plain model's CP-SAT proto that is a
0/1 knapsack (capacity, resources, PCIe over the crossing indicators, latency; negative coefficients
complemented) is separated against GLOP's LP relaxation of the whole proto: a minimal cover C (greedy on
(1 - v) / a, then minimised), extended by every item at least as heavy as C's heaviest, kept if
sum(v) > |C| - 1 + eps; a few rounds (cuts added to the LP each round). Every cut is checked in integers
(sum of C's coefficients > the budget), so it is implied by its row: the optimum is unchanged. The cuts are
then added to the CP-SAT model as redundant rows and stage 1 solved; reported per draw: CP-SAT's
deterministic time and CPU (separation included) of each variant, and whether the host costs agree. Variants
(--variants): shipped; cuts (separate, then solve); boxed (the shipped model first in PLAINCUTS_BOX
deterministic s, default 0.02; if unproven, its placement as a hint, the cuts, and the solve again).
Measured and dropped (bench/RESULTS.md, cuts22): nothing of it is in placement/.

    .venv/bin/python -m bench.placement.plaincuts --draws 1541,1598,1615
    .venv/bin/python -m bench.placement.plaincuts --draws 0-89,1500-1649 --min-snics 2
    .venv/bin/python -m bench.placement.plaincuts --large 1000:3 --draws 0-4 --time-limit 10
    .venv/bin/python -m bench.placement.plaincuts --draws 0-89,1500-1649 --min-snics 2 --old /tmp/main23

cuts23: variants own (separated from _Model's recorded rows: placement/covers.py, what solve() now runs)
and ownbox (the model in PLAINCUTS_BOX first, no hint, then own); gomory23: gomory (Chvatal-Gomory cuts,
placement/gomory.py, then solve), gombox (the box, then gomory), bothbox (the box, then covers and gomory: what
solve() runs); --old DIR: the whole solve() side by side
with the tree DIR (one worker per tree, alternating).

Last line JSON: per variant {det_sum, cpu_sum, optimal}.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from bench.common import final_json, print_machine
from bench.placement.foreign import instance
from bench.placement.plainparams import instances
from placement import covers
from placement.cpsat import new_solver
from placement.model import parse_problem
from placement.solver import GAP_LIMIT, Options, _Model, load_backends

INF = 2**62


def knapsacks(proto) -> list[tuple[list[tuple[int, int, bool]], int]]:
    """Every one-sided linear row of >= 3 booleans as (items (coefficient > 0, var, complemented), budget)."""
    out = []
    for ct in proto.constraints:
        if not ct.has_linear() or ct.enforcement_literal:
            continue
        lin = ct.linear
        if len(lin.vars) < 3 or len(lin.domain) != 2 or min(lin.vars) < 0:
            continue
        lo, hi = lin.domain[0], lin.domain[1]
        for sign, bound in ((1, hi), (-1, -lo)):
            if abs(bound) >= INF:
                continue
            items, budget = [], bound
            for v, c in zip(lin.vars, lin.coeffs, strict=True):
                c *= sign
                if c > 0:
                    items.append((c, v, False))
                elif c < 0:  # c x = c - c (1 - x): complement
                    items.append((-c, v, True))
                    budget -= c
            if items and sum(a for a, _, _ in items) > budget:
                out.append((items, budget))
    return out


def separate(items, budget, val) -> tuple[list[tuple[int, bool]], int] | None:
    """A violated extended minimal cover of one knapsack at the LP point `val`: (literals, rhs) or None
    (covers.separate on the row the complemented items come from)."""
    idx = [v for _, v, _ in items]
    coeffs = [-a if neg else a for a, _, neg in items]
    return covers.separate(idx, coeffs, budget - sum(a for a, _, neg in items if neg), val)


def cover_cuts(proto, rounds: int = 5) -> list[tuple[list[tuple[int, bool]], int]]:
    from ortools.linear_solver import pywraplp

    lp = pywraplp.Solver.CreateSolver("GLOP")
    xs = [
        lp.NumVar(float(v.domain[0]), float(v.domain[len(v.domain) - 1]), "") for v in proto.variables
    ]  # no [-1]
    for ct in proto.constraints:
        if not ct.has_linear() or ct.enforcement_literal or len(ct.linear.domain) != 2:
            continue
        assert min(ct.linear.vars, default=0) >= 0, "a negative reference in a linear row"
        lin = ct.linear
        top = max(abs(c) for c in lin.coeffs) if lin.coeffs else 1
        lo = -lp.infinity() if lin.domain[0] <= -INF else lin.domain[0] / top
        hi = lp.infinity() if lin.domain[1] >= INF else lin.domain[1] / top
        row = lp.Constraint(lo, hi)
        for v, c in zip(lin.vars, lin.coeffs, strict=True):
            row.SetCoefficient(xs[v], c / top)
    obj = lp.Objective()
    top = max((abs(c) for c in proto.objective.coeffs), default=1)
    assert min(proto.objective.vars, default=0) >= 0
    for v, c in zip(proto.objective.vars, proto.objective.coeffs, strict=True):
        obj.SetCoefficient(xs[v], c / top)
    obj.SetMinimization()
    sacks = knapsacks(proto)
    cuts, seen = [], set()
    for _ in range(rounds):
        if lp.Solve() != pywraplp.Solver.OPTIMAL:
            break
        val = [x.solution_value() for x in xs]
        new = 0
        for items, budget in sacks:
            cut = separate(items, budget, val)
            if cut is None:
                continue
            key = (tuple(sorted(cut[0])), cut[1])
            if key in seen:
                continue
            seen.add(key)
            cuts.append(cut)
            new += 1
            row = lp.Constraint(-lp.infinity(), cut[1] - sum(1 for _, neg in cut[0] if neg))
            for v, neg in cut[0]:
                row.SetCoefficient(xs[v], -1.0 if neg else 1.0)
        if not new:
            break
    return cuts


BOX_DET = float(
    os.environ.get("PLAINCUTS_BOX", "0.02")
)  # "boxed": the shipped model first, in this many deterministic s; the cuts only if unproven


def _solver(m, opts, time_limit: float, det: float | None = None):
    solver = new_solver(m.cp)
    solver.parameters.num_workers = opts.workers
    solver.parameters.linearization_level = opts.linearization
    solver.parameters.relative_gap_limit = GAP_LIMIT
    solver.parameters.max_time_in_seconds = time_limit
    if det is not None:
        solver.parameters.max_deterministic_time = det
    return solver


def stage1(problem, mode: str, time_limit: float) -> tuple[str, float, float, float, int]:
    """mode: shipped | cuts (separate, then solve) | boxed (shipped in BOX_DET; if unproven, cuts and again)
    | own (cuts23: separated from _Model's recorded rows, placement/covers.py, then solve)."""
    c0 = time.process_time()
    opts = Options()
    m = _Model(problem, opts)
    m.minimize(m.stage1)
    found, det0 = [], 0.0
    if mode == "boxed":
        solver = _solver(m, opts, time_limit, BOX_DET)
        st = solver.Solve(m.m)
        det0 = solver.deterministic_time
        if st in (m.cp.OPTIMAL, m.cp.INFEASIBLE):
            return solver.StatusName(st), solver.ObjectiveValue(), det0, time.process_time() - c0, 0
        if st == m.cp.FEASIBLE:  # its placement as a hint (a hint proves nothing)
            for k in range(len(m.m.proto.variables)):
                var = m.m.get_int_var_from_proto_index(k)
                m.m.add_hint(var, solver.Value(var))
    if mode in (
        "ownbox",
        "gombox",
        "bothbox",
    ):  # cuts23: the shipped model in BOX_DET first (no hint after it); if unproven, own
        solver = _solver(m, opts, time_limit, BOX_DET)
        st = solver.Solve(m.m)
        det0 = solver.deterministic_time
        if st in (m.cp.OPTIMAL, m.cp.INFEASIBLE):
            return solver.StatusName(st), solver.ObjectiveValue(), det0, time.process_time() - c0, 0
    if mode in ("own", "ownbox", "bothbox"):  # cuts23: separated from _Model's own rows (placement/covers.py)
        n = m.add_cover_cuts(int(os.environ.get("PLAINCUTS_ROUNDS", "5")))
        found = [None] * n
    if mode in ("gomory", "gombox", "bothbox"):  # gomory23: Chvatal-Gomory cuts (placement/gomory.py)
        found += [None] * m.add_gomory_cuts()
    if mode in ("cuts", "boxed"):
        found = cover_cuts(m.m.proto)
        for lits, rhs in found:
            terms = [m.m.get_bool_var_from_proto_index(v) for v, _ in lits]
            terms = [t.Not() if neg else t for t, (_, neg) in zip(terms, lits, strict=True)]
            m.m.add(sum(terms) <= rhs)
    solver = _solver(m, opts, time_limit)
    st = solver.Solve(m.m)
    cpu = time.process_time() - c0
    return solver.StatusName(st), solver.ObjectiveValue(), det0 + solver.deterministic_time, cpu, len(found)


def whole(args, objs: dict) -> int:
    """cuts23: the whole solve() side by side, this tree ("new") vs --old DIR, one long-lived worker per tree
    (bench.placement.versus.Worker), the order alternating per draw; per draw status, host cost, CPU s."""
    from pathlib import Path

    from bench.placement.versus import Worker

    workers = {"old": Worker(Path(args.old)), "new": Worker(Path("."))}
    cpu: dict[str, list[float]] = {"old": [], "new": []}
    proven = {"old": 0, "new": 0}
    try:
        warm = instance(0)
        for w in workers.values():
            w.solve(warm, args.time_limit)
        for k, (draw, obj) in enumerate(objs.items()):
            runs = {}
            for n in ("old", "new") if k % 2 == 0 else ("new", "old"):
                runs[n] = workers[n].solve(obj, args.time_limit)
            for n, r in runs.items():
                cpu[n].append(r["cpu"])
                proven[n] += r["ok"]
            a, b = runs["old"], runs["new"]
            both = a["status"] == b["status"] == "optimal"
            same = not both or abs(a["host_cost"] - b["host_cost"]) <= 2 * GAP_LIMIT * max(
                1.0, abs(a["host_cost"]), abs(b["host_cost"])
            )
            print(
                f"{draw}: old {a['status'][:3]} cpu {a['cpu']:.4f} cost {a['host_cost']} | new {b['status'][:3]} "
                f"cpu {b['cpu']:.4f} cost {b['host_cost']}{'' if same else '  HOST COSTS DIFFER'}",
                flush=True,
            )
    finally:
        for w in workers.values():
            w.close()
    out = {}
    for n in cpu:
        xs = sorted(cpu[n])
        out[n] = {"cpu_median": round(xs[len(xs) // 2], 4), "cpu_sum": round(sum(xs), 3), "proven": proven[n]}
    final_json(out)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", default="1500-1649")
    ap.add_argument("--large", default=None, help="SIZE:SNICS: foreign.large_instance draws")
    ap.add_argument("--min-snics", type=int, default=2)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--variants", nargs="+", default=["shipped", "cuts", "boxed"])
    ap.add_argument("--time-limit", type=float, default=5.0)
    ap.add_argument("--old", default=None, help="cuts23: the whole solve() of this tree vs the tree DIR")
    args = ap.parse_args()
    load_backends()
    print_machine()
    objs = instances(args)
    if args.old:
        return whole(args, objs)
    names = {n: n for n in args.variants}
    totals = {n: {"det_sum": 0.0, "cpu_sum": 0.0, "optimal": 0} for n in names}
    for k, (draw, obj) in enumerate(objs.items()):
        problem = parse_problem(obj)
        order = list(names) if k % 2 == 0 else list(reversed(names))
        best: dict[str, tuple] = {}
        for _ in range(args.reps):
            for n in order:
                r = stage1(problem, names[n], args.time_limit)
                best[n] = r if n not in best or r[3] < best[n][3] else best[n]
        seen = [r[1] for r in best.values() if r[0] == "OPTIMAL"]
        same = not seen or max(seen) - min(seen) <= GAP_LIMIT * max(abs(x) for x in seen)
        for n, (st, _, det, cpu, _) in best.items():
            totals[n]["det_sum"] += det
            totals[n]["cpu_sum"] += cpu
            totals[n]["optimal"] += st == "OPTIMAL"
        cells = " | ".join(
            f"{n}: {best[n][0][:3]} det {best[n][2]:.4f} cpu {best[n][3]:.4f} obj {best[n][1]:.6g}"
            for n in names
        )
        print(
            f"{draw}: {cells} cuts {max(r[4] for r in best.values())}{'' if same else '  HOST COSTS DIFFER'}",
            flush=True,
        )
    final_json({n: {k: round(v, 4) for k, v in t.items()} for n, t in totals.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
