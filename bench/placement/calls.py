"""Every CP-SAT call of the engine's solves, one line each: the engine function that asked it, the model's
variables, its status, CP-SAT's deterministic seconds, the CPU seconds of the call and its deterministic box;
then per instance the whole solve's CPU seconds, the seconds to the proven host cost, its status and host cost
and the CPU seconds of CP-SAT per calling function. Deterministic seconds do not depend on the machine's load
(one worker): the figure to compare two variants by on a shared machine (`--set` switches an engine constant):

    .venv/bin/python -m bench.placement.calls --families long,skewed,background --size 500 --seeds 12
                                              [--set STOCK_PLACEMENTS=False] [--quiet]

Last line JSON: {family: {seed: {cpu, det, host_cost, status, calls}}}.
"""

from __future__ import annotations

import argparse
import ast
import sys
import time

import placement.engine as engine
from bench.common import final_json, print_machine
from placement.families import FAMILIES, instance
from placement.model import parse_problem
from placement.solver import solve


class Calls:
    """Wraps `engine._Core.solve` (to learn the caller) and `engine._Core._run_solver` (one line per run)."""

    def __init__(self, verbose: bool):
        self.verbose, self.caller, self.det, self.cpu, self.n = verbose, "?", 0.0, {}, 0
        solve_, run_ = engine._Core.solve, engine._Core._run_solver
        calls = self

        def solve_w(core, *a, **k):
            calls.caller = sys._getframe(1).f_code.co_name
            return solve_(core, *a, **k)

        def run_w(core, solver):
            c = time.process_time()
            st = run_(core, solver)
            cpu = time.process_time() - c
            calls.det += solver.deterministic_time
            calls.cpu[calls.caller] = calls.cpu.get(calls.caller, 0.0) + cpu
            calls.n += 1
            if calls.verbose:
                print(f"  {calls.caller:22s} vars {len(core.vars):6d} {solver.status_name(st):10s} "
                      f"det {solver.deterministic_time:.3f} cpu {cpu:.3f} "
                      f"box {solver.parameters.max_deterministic_time:.3f}", flush=True)  # fmt: skip
            return st

        self._orig = solve_, run_
        engine._Core.solve, engine._Core._run_solver = solve_w, run_w

    def close(self) -> None:
        """The engine's own methods back."""
        engine._Core.solve, engine._Core._run_solver = self._orig

    def reset(self) -> None:
        self.det, self.cpu, self.n = 0.0, {}, 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", default="long,skewed,background")
    ap.add_argument("--size", type=int, default=500)
    ap.add_argument("--seeds", type=int, default=12)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument(
        "--set", action="append", default=[], help="NAME=VALUE: an engine.py constant (Python literal)"
    )
    ap.add_argument("--quiet", action="store_true", help="no line per CP-SAT call")
    args = ap.parse_args()
    for spec in args.set:
        name, value = spec.split("=", 1)
        if not hasattr(engine, name):
            sys.exit(f"placement/engine.py has no {name}")
        setattr(engine, name, ast.literal_eval(value))
    print_machine()
    calls = Calls(not args.quiet)
    solve(parse_problem(instance("long", 100, 0)), time_limit=args.time_limit)  # (warms the libraries)
    out: dict = {}
    for fam in args.families.split(","):
        if fam not in FAMILIES:
            sys.exit(f"no family {fam}")
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            obj = instance(fam, args.size, seed)
            calls.reset()
            print(f"=== {fam} {args.size} seed {seed}", flush=True)
            t, c = time.monotonic(), time.process_time()
            res = solve(parse_problem(obj), time_limit=args.time_limit, started=t)
            cpu = time.process_time() - c
            per = " ".join(f"{k}={v:.3f}" for k, v in calls.cpu.items())
            print(f"### {fam} {seed} cpu {cpu:.3f} to-host-cost {res.get('host_cost_seconds')} det {calls.det:.3f} "
                  f"{res['status']} {res.get('host_cost')} calls {calls.n} cp-sat cpu: {per}", flush=True)  # fmt: skip
            out.setdefault(fam, {})[seed] = {"cpu": round(cpu, 4), "det": round(calls.det, 4), "calls": calls.n,
                                             "status": res["status"], "host_cost": res.get("host_cost")}  # fmt: skip
    final_json(out)


if __name__ == "__main__":
    main()
