"""bench/placement/calls.py: its wrappers count every CP-SAT call of a solve and leave the answer unchanged."""

from __future__ import annotations

import placement.engine as engine
from bench.placement.calls import Calls
from placement.families import instance
from placement.model import parse_problem
from placement.solver import solve


def test_calls_counts_the_engine_calls_and_changes_no_answer():
    obj = instance("long", 100, 0)
    plain = solve(parse_problem(obj), time_limit=10)
    own = engine._Core.solve, engine._Core._run_solver
    calls = Calls(verbose=False)
    try:
        assert engine._Core.solve is not own[0]
        out = solve(parse_problem(obj), time_limit=10)
    finally:
        calls.close()
    assert (engine._Core.solve, engine._Core._run_solver) == own
    assert out["status"] == plain["status"] == "optimal"
    assert out["host_cost"] == plain["host_cost"]
    assert calls.n >= 1 and calls.det >= 0.0
    assert "solve_groups" in calls.cpu  # (the restricted core's call, asked by solve_groups itself)
