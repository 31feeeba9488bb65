"""Reduced-cost fixing around the plain model's root LP on the foreign generator's large draws (issue 25, rcfix23).

Idea: GLOP solves the LP relaxation of the plain model's recorded rows (`_Model.lp_rows()`, the stage-1
objective); with the LP bound L, its reduced costs d and an incumbent of cost U, a boolean whose |d| exceeds
U - L can only take its LP value in a placement cheaper than U, so it is fixed; CP-SAT then searches the rest
below U (or proves U optimal when nothing is left below it). Per draw of
`bench.placement.foreign.large_instance(seed, size, snics)`:

- `core_opt` / `core_box`: how many of the model's booleans keep |d| <= U - L (the core left to search) for U
  = the optimum (the best case) and U = CP-SAT's incumbent after a --box deterministic-s solve; `fixed_x`: the
  NF location booleans fixed at the optimum (each fixes its NF);
- `best_case`: stage 1 (CP-SAT, CPU s incl. the model build) with objective <= optimum alone (`ub`) and with
  the optimum's fixings too (`fixed`): what a perfect incumbent would give;
- `pipe` vs `full`: the realistic pipeline (the model in --box deterministic s; if unproven with a placement:
  the LP, the fixings at its cost, objective <= its cost - 1, the rest; infeasible = it was optimal; without a
  placement: the unfixed solve again) against the unfixed stage 1, min of --reps runs alternating; CPU s.

A study, nothing of it is in placement/: its fixings compare floats (GLOP's reduced costs), so none of its
answers is a proof; only the timings and the agreement of the costs (within the 1e-5 gap) are read.

    .venv/bin/python -m bench.placement.rcfix [--size 500] [--snics 1] [--draws 0-24,26-29] [--box 0.02]
        [--reps 2]

One JSON line per draw, the last line the medians and sums.
"""

from __future__ import annotations

import argparse
import json
import time

from bench.common import final_json, median, print_machine
from bench.placement.foreign import large_instance
from bench.placement.plainparams import draws
from placement.covers import RootLP
from placement.cpsat import new_solver
from placement.model import Problem, parse_problem
from placement.solver import GAP_LIMIT, Options, _Model, load_backends


def reduced_costs(m: _Model) -> tuple[float, list[float], float]:
    """GLOP on the model's rows: (LP bound, reduced cost per proto variable, both in working integers; CPU s)."""
    t = time.process_time()
    root = RootLP(m.lp_rows())
    if not root.solve():
        raise RuntimeError("GLOP: the LP relaxation is not optimal")
    scale = root.scale
    return (
        root.lp.Objective().Value() * scale,
        [x.reduced_cost() * scale for x in root.xs],
        time.process_time() - t,
    )


def model(p: Problem) -> _Model:
    m = _Model(p, Options(time_limit=20))
    m.minimize(m.stage1)
    return m


def run(m: _Model, work: float | None = None) -> tuple[str, int | None, list[int] | None]:
    """Stage 1 as solve() runs it on one worker: (status, objective, values of every proto variable)."""
    s = new_solver(m.cp)
    s.parameters.num_workers = 1
    s.parameters.linearization_level = 2
    s.parameters.relative_gap_limit = GAP_LIMIT
    s.parameters.max_time_in_seconds = 20
    if work is not None:
        s.parameters.max_deterministic_time = work
    st = s.Solve(m.m)
    if st not in (m.cp.OPTIMAL, m.cp.FEASIBLE):
        return s.StatusName(st), None, None
    var = m.m.get_bool_var_from_proto_index
    return (
        s.StatusName(st),
        round(s.ObjectiveValue()),
        [s.Value(var(j)) for j in range(len(m.m.proto.variables))],
    )


def fix(m: _Model, d: list[float], room: float) -> int:
    """Fix every boolean whose |reduced cost| exceeds `room` (U - L) at its LP bound; their count."""
    n = 0
    for j, dj in enumerate(d):
        if abs(dj) > room:
            m.m.add(m.m.get_bool_var_from_proto_index(j) == int(dj < 0))
            n += 1
    return n


def below(m: _Model, u: int) -> None:
    m.add(sum(c * v for c, v in m.stage1) <= u)


def full(p: Problem) -> tuple[float, str, int | None]:
    t = time.process_time()
    st, obj, _ = run(model(p))
    return time.process_time() - t, st, obj


def pipe(p: Problem, box: float) -> tuple[float, str, int | None, dict]:
    t = time.process_time()
    m = model(p)
    st, obj, vals = run(m, box)
    info: dict = {}
    if st == "FEASIBLE":
        lb, d, _ = reduced_costs(m)
        info = {"U": obj, "fixed": fix(m, d, obj - lb)}
        below(m, obj - 1)
        for j, v in enumerate(vals):
            m.m.add_hint(m.m.get_bool_var_from_proto_index(j), v)
        st2, obj2, _ = run(m)
        info["rest"] = st2
        st, obj = ("OPTIMAL", obj) if st2 == "INFEASIBLE" else (st2, obj2)
    elif st != "OPTIMAL":
        st, obj, _ = run(model(p))
    return time.process_time() - t, st, obj, info


def one(seed: int, args) -> dict:
    p = parse_problem(large_instance(seed, args.size, args.snics))
    m = model(p)
    lb, d, lp_cpu = reduced_costs(m)
    f = full(p)
    opt = f[2]
    slack = 1e-5 * max(opt or 1, 1)
    out = {
        "seed": seed,
        "booleans": len(d),
        "lp_cpu": round(lp_cpu, 4),
        "lp_gap_slacks": round((opt - lb) / slack, 1),
    }
    out["core_opt"] = sum(1 for x in d if abs(x) <= opt - lb)
    out["fixed_x"] = sum(1 for v in m.x.values() if abs(d[v.index]) > opt - lb)
    _, inc, _ = run(model(p), args.box)
    out["core_box"] = None if inc is None else sum(1 for x in d if abs(x) <= inc - lb)
    out["box_slacks"] = None if inc is None else round((inc - opt) / slack, 1)
    best = {}
    for name in ("ub", "fixed"):
        t = time.process_time()
        mb = model(p)
        if name == "fixed":
            fix(mb, d, opt - lb)
        below(mb, opt)
        st, _, _ = run(mb)
        best[name] = (round(time.process_time() - t, 4), st)
    out["best_case"] = best
    fs, ps = [], []
    for k in range(args.reps):
        for side in ("full", "pipe") if k % 2 == 0 else ("pipe", "full"):
            (fs if side == "full" else ps).append(full(p) if side == "full" else pipe(p, args.box))
    fb, pb = min(fs, key=lambda r: r[0]), min(ps, key=lambda r: r[0])
    out["full"] = [round(fb[0], 4), fb[1], fb[2]]
    out["pipe"] = [round(pb[0], 4), pb[1], pb[2], pb[3]]
    out["agree"] = fb[2] is not None and pb[2] is not None and abs(fb[2] - pb[2]) <= GAP_LIMIT * max(fb[2], 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=500)
    ap.add_argument("--snics", type=int, default=1)
    ap.add_argument("--draws", default="0-24,26-29", help="seeds (25: unproven in 20 s by both)")
    ap.add_argument("--box", type=float, default=0.02, help="the incumbent's deterministic box")
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    print_machine()
    load_backends()
    res = []
    for seed in draws(args.draws):
        r = one(seed, args)
        res.append(r)
        print(json.dumps(r), flush=True)
    ratio = [r["pipe"][0] / r["full"][0] for r in res]
    final_json({
        "draws": len(res),
        "agree": sum(r["agree"] for r in res),
        "core_opt_share_median": round(median([r["core_opt"] / r["booleans"] for r in res]), 3),
        "core_box_share_median": round(median([r["core_box"] / r["booleans"] for r in res if r["core_box"]]), 3),
        "best_case_median": {k: round(median([r["best_case"][k][0] for r in res]), 4) for k in ("ub", "fixed")},
        "full_median": round(median([r["full"][0] for r in res]), 4),
        "pipe_median": round(median([r["pipe"][0] for r in res]), 4),
        "full_sum": round(sum(r["full"][0] for r in res), 3),
        "pipe_sum": round(sum(r["pipe"][0] for r in res), 3),
        "pipe_over_full_median": round(median(ratio), 3),
        "pipe_slower_10pct": sum(x > 1.1 for x in ratio),
        "pipe_faster_10pct": sum(x < 0.9 for x in ratio),
    })  # fmt: skip


if __name__ == "__main__":
    main()
