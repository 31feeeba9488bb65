"""CP-SAT parameter sets on the plain model's stage 1 (host cost), side by side on the second generator's draws.

The plain model (solver._Model: a boolean per NF and location) answers small instances with several sNICs
and every instance prepare gives up on. This builds its stage-1 model per draw and solves it once per
parameter set (the shipped ones from `cpsat.new_solver` and `_Model.solve`, then the set's overrides), in
turns, and reports CP-SAT's deterministic time (no noise from the load), CPU seconds (min of --reps) and
status, and whether every set found the same host cost (within the gap limit where proven):

    .venv/bin/python -m bench.placement.plainparams --draws 1541,1598,1615 \
        --sets 'lazyoff=add_lp_constraints_lazily:false' 'cut10=max_cut_rounds_at_level_zero:10'

`--draws` a list or A-B (only draws with at least --min-snics sNICs are kept); `--large SIZE:SNICS`: the
large regime's draws (foreign.large_instance) instead. Last line JSON: per set {det_sum, cpu_sum, optimal}.
"""

from __future__ import annotations

import argparse
import sys
import time

from bench.common import final_json, print_machine
from bench.placement.foreign import instance, large_instance
from placement.cpsat import new_solver
from placement.model import parse_problem
from placement.solver import GAP_LIMIT, Options, _Model, load_backends


def _value(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text  # an enum's name, e.g. search_branching:LP_SEARCH


def _sets(specs: list[str]) -> dict[str, dict]:
    out: dict[str, dict] = {"shipped": {}}
    for spec in specs:
        name, _, body = spec.partition("=")
        out[name] = {k: _value(v) for k, v in (kv.split(":", 1) for kv in body.split(",") if kv)}
    return out


def draws(text: str) -> list[int]:
    """Draw numbers from "A-B,C,D-E" (ranges inclusive)."""
    out = []
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            out += range(int(a), int(b) + 1)
        else:
            out.append(int(part))
    return out


def instances(args) -> dict[int, dict]:
    """The draws `args.draws` as foreign instances: `args.large` SIZE:SNICS -> large_instance, else the small
    regime's instance() with at least `args.min_snics` sNICs."""
    if args.large:
        size, snics = (int(x) for x in args.large.split(":"))
        return {d: large_instance(d, size, snics) for d in draws(args.draws)}
    objs = {d: instance(d) for d in draws(args.draws)}
    return {d: o for d, o in objs.items() if len(o["snics"]) >= args.min_snics}


def stage1(problem, params: dict, time_limit: float) -> tuple[str, float, float, float]:
    """(status, objective, deterministic s, CPU s) of the plain model's stage 1 with `params` on top."""
    opts = Options()
    m = _Model(problem, opts)
    m.minimize(m.stage1)
    solver = new_solver(m.cp)
    solver.parameters.num_workers = opts.workers
    solver.parameters.linearization_level = opts.linearization
    solver.parameters.relative_gap_limit = GAP_LIMIT
    solver.parameters.max_time_in_seconds = time_limit
    for key, value in params.items():
        if isinstance(value, str):
            value = getattr(type(solver.parameters), value)
        setattr(solver.parameters, key, value)
    c0 = time.process_time()
    st = solver.Solve(m.m)
    cpu = time.process_time() - c0
    return solver.StatusName(st), solver.ObjectiveValue(), solver.deterministic_time, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", default="1500-1649")
    ap.add_argument("--large", default=None, help="SIZE:SNICS: foreign.large_instance draws")
    ap.add_argument("--min-snics", type=int, default=2)
    ap.add_argument("--sets", nargs="*", default=[], help="NAME=param:value,param:value")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=5.0)
    args = ap.parse_args()
    load_backends()
    print_machine()
    sets = _sets(args.sets)
    objs = instances(args)
    totals = {name: {"det_sum": 0.0, "cpu_sum": 0.0, "optimal": 0} for name in sets}
    for k, (draw, obj) in enumerate(objs.items()):
        problem = parse_problem(obj)
        names = list(sets) if k % 2 == 0 else list(reversed(sets))
        best: dict[str, tuple] = {}
        for _ in range(args.reps):
            for name in names:
                r = stage1(problem, sets[name], args.time_limit)
                best[name] = r if name not in best or r[3] < best[name][3] else best[name]
        objs_seen = [r[1] for r in best.values() if r[0] in ("OPTIMAL", "FEASIBLE")]
        same = not objs_seen or max(objs_seen) - min(objs_seen) <= GAP_LIMIT * max(abs(x) for x in objs_seen)
        for name, (st, _, det, cpu) in best.items():
            totals[name]["det_sum"] += det
            totals[name]["cpu_sum"] += cpu
            totals[name]["optimal"] += st == "OPTIMAL"
        cells = " | ".join(f"{n}: {best[n][0][:3]} det {best[n][2]:.4f} cpu {best[n][3]:.4f}" for n in sets)
        print(f"{draw}: {cells}{'' if same else '  HOST COSTS DIFFER'}", flush=True)
    final_json({n: {k: round(v, 4) for k, v in t.items()} for n, t in totals.items()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
