"""The stock-presolve runs of the engine's CP-SAT calls (placement/cpsat.py, `_Core.solve`'s `stock`): only a
placement comes from them, and only one that meets every row of the model in exact integers; every proof
(optimal, infeasible, a bound) comes from the safe solver (`new_solver`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ortools.sat.python import cp_model

import placement.engine as engine
from placement import parse_problem, solve
from placement.cpsat import new_solver, new_stock_solver, satisfies
from placement.families import instance

# The plain model of foreign draw 1610 cut down (tests/placement/test_cpsat.py): the stock presolve proves
# 38,259,932,655 optimal, the optimum is 0.
CUT_DOWN = Path(__file__).parent / "data" / "cpsat_inclusion_presolve.pbtxt"
WRONG_OPTIMUM = 38_259_932_655


class _Groups:
    def __init__(self, n: int):
        self.start = np.arange(n + 1)


def _core(model: cp_model.CpModel) -> engine._Core:
    """A _Core over an all-Boolean model as it stands (each variable its own group, for `_chosen`)."""
    core = object.__new__(engine._Core)
    n = len(model.proto.variables)
    core.cp, core.m, core.run = cp_model, model, engine._Run()
    core.workers, core.linearization = 1, 1
    core.vars = [model.get_bool_var_from_proto_index(k) for k in range(n)]
    core.var_cfg = np.arange(n)
    core.var_of = dict(enumerate(core.vars))
    core.single = np.full(n, -1, dtype=np.int64)
    core.gr = _Groups(n)
    return core


def _cut_down() -> cp_model.CpModel:
    m = cp_model.CpModel()
    m.Proto().parse_text_format(CUT_DOWN.read_text())
    return m


def _stock_answer() -> tuple[str, float]:
    solver = new_stock_solver(cp_model)
    solver.parameters.num_workers = 1
    st = solver.solve(_cut_down())
    return solver.status_name(st), solver.objective_value


def test_the_stock_presolve_still_drops_the_optimum():
    # (if a release fixes google/or-tools#5293 this fails: the stock runs then cost a check for nothing)
    assert _stock_answer() == ("OPTIMAL", float(WRONG_OPTIMUM))


def test_stock_optimal_comes_back_as_a_placement_without_a_bound():
    core = _core(_cut_down())
    status, _, obj, bound = core.solve(1e9, None, work=10.0, stock=10.0)
    assert status == "feasible" and bound is None  # never "optimal", never a bound
    assert obj == WRONG_OPTIMUM and core.stock_optimal  # (its "optimal": a hint only)
    assert core.run.stock_found == 1


def test_the_proof_comes_from_the_safe_solver(monkeypatch):
    made = []
    monkeypatch.setattr(engine, "new_solver", lambda cp: made.append(1) or new_solver(cp))
    core = _core(_cut_down())
    # a safe run first (`lead`) that answers: its proof, the true optimum
    status, _, obj, bound = core.solve(1e9, None, work=10.0, stock=10.0, lead=10.0)
    assert (status, obj, bound) == ("optimal", 0.0, 0.0) and made == [1]
    assert core.run.stock_found == 0
    # no stock run asked: the safe solver's proof
    status, _, obj, bound = core.solve(1e9, None, work=10.0)
    assert (status, obj, bound) == ("optimal", 0.0, 0.0)


def test_stock_infeasible_is_asked_again_safely(monkeypatch):
    model = _cut_down()
    model.add(sum(model.get_bool_var_from_proto_index(k) for k in range(3)) >= 4)  # infeasible
    made = []
    monkeypatch.setattr(engine, "new_solver", lambda cp: made.append(1) or new_solver(cp))
    core = _core(model)
    status, ch, _, bound = core.solve(1e9, None, work=10.0, stock=10.0)
    assert (status, ch, bound) == ("infeasible", None, None) and made == [1]


class _Lying(cp_model.CpSolver):
    """The stock solver's status and objective, with every variable read as 1 (breaks the model's rows)."""

    def boolean_value(self, lit) -> bool:
        return True


def test_a_placement_failing_the_exact_check_is_not_used(monkeypatch):
    monkeypatch.setattr(engine, "new_stock_solver", lambda cp: _Lying())
    core = _core(_cut_down())
    status, _, obj, bound = core.solve(1e9, None, work=10.0, stock=10.0)
    assert core.run.stock_refused == 1 and core.run.stock_found == 0
    assert (status, obj, bound) == ("optimal", 0.0, 0.0)  # the safe solver's answer


def test_satisfies_reads_rows_exactly():
    m = cp_model.CpModel()
    x = [m.new_bool_var(f"x{i}") for i in range(3)]
    big = 2**61
    m.add(big * x[0] + big * x[1] + x[2] <= 2 * big)  # 2^62 + 1 > 2^62: a float sum would round it away
    m.add_exactly_one([x[0], x[2]])
    m.add_bool_or([x[1], x[2].Not()])
    proto = m.proto
    assert satisfies(proto, [1, 1, 0])
    assert not satisfies(proto, [1, 1, 1])  # the row, past floats' precision; and exactly one
    assert not satisfies(proto, [0, 0, 1])  # bool_or with a negated literal
    assert not satisfies(proto, [0, 1, 0])  # exactly one
    assert not satisfies(proto, [1, 1])  # not one value per variable
    assert not satisfies(proto, [2, 1, 0])  # outside the domain
    m.add_multiplication_equality(x[0], [x[1], x[2]])
    assert not satisfies(m.proto, [1, 1, 0])  # a kind not read: not accepted


@pytest.mark.parametrize(
    ("family", "n", "seed"),
    [("skewed", 500, 9), ("long", 500, 5), ("chains-tight", 500, 2), ("two-snics", 200, 5)],
)
def test_same_host_cost_as_the_safe_solver_alone(monkeypatch, family, n, seed):
    problem = instance(family, n, seed)
    ours = solve(parse_problem(problem), time_limit=20)
    monkeypatch.setattr(engine, "STOCK_PLACEMENTS", False)
    safe = solve(parse_problem(problem), time_limit=20)
    assert ours["status"] == safe["status"] == "optimal"
    assert abs(ours["host_cost"] - safe["host_cost"]) <= 1e-6 * max(1.0, safe["host_cost"])
