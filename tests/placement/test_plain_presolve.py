"""The plain model's CP-SAT solves run one presolve round (solver.PLAIN_PRESOLVE_ITERATIONS): the same
proven host costs as brute force on small instances and as CP-SAT's default rounds on larger ones."""

from __future__ import annotations

import itertools
import math

import pytest

from bench.placement.foreign import instance as foreign_instance
from bench.placement.foreign import large_instance
from placement import parse_problem, solver
from placement.solver import GAP_LIMIT, solve
from tests.placement.test_families import brute_force

SMALL = 4096  # placements enumerated per instance


def _small_foreign(count: int) -> list[dict]:
    out = []
    for seed in itertools.count():
        obj = foreign_instance(seed)
        p = parse_problem(obj)
        if math.prod(len(p.allowed(n)) for n in p.nodes) <= SMALL:
            out.append(obj)
            if len(out) == count:
                return out
    return out


def test_one_presolve_round_is_what_the_plain_model_asks(monkeypatch):
    seen = []
    make = solver.new_solver

    def spy(cp):
        s = make(cp)
        seen.append(s)
        return s

    monkeypatch.setattr(solver, "new_solver", spy)
    out = solve(parse_problem(large_instance(11, 100, 1)), time_limit=20, engine=False)
    assert out["status"] == "optimal"
    assert seen and all(s.parameters.max_presolve_iterations == 1 for s in seen)
    assert all(s.parameters.presolve_inclusion_work_limit == 0 for s in seen)  # the defect's fix stays


@pytest.mark.parametrize("obj", _small_foreign(20), ids=lambda o: str(len(o.get("vertices", o))))
def test_plain_model_matches_brute_force(obj):
    p = parse_problem(obj)
    best = brute_force(p)
    out = solve(p, time_limit=20, engine=False)
    if best is None:
        assert out["status"] == "infeasible"
        return
    assert out["status"] == "optimal"
    assert out["host_cost"] == pytest.approx(float(best), rel=2 * GAP_LIMIT, abs=1e-9)


@pytest.mark.parametrize("seed,size,snics", [(s, 100, 1 + s % 2) for s in range(6)])
def test_one_round_proves_what_default_rounds_prove(monkeypatch, seed, size, snics):
    obj = large_instance(seed, size, snics)
    ours = solve(parse_problem(obj), time_limit=20, engine=False)
    monkeypatch.setattr(solver, "PLAIN_PRESOLVE_ITERATIONS", None)
    stock = solve(parse_problem(obj), time_limit=20, engine=False)
    assert ours["status"] == stock["status"]
    if ours["status"] == "optimal":
        a, b = ours["host_cost"], stock["host_cost"]
        assert abs(a - b) <= 2 * GAP_LIMIT * max(a, b, 1e-9), (a, b)
