"""CP-SAT as the placement paths create it (placement/cpsat.py): the answer of a model whose optimum
OR-Tools 9.15's inclusion presolve drops (google/or-tools#5293) is the true one."""

from __future__ import annotations

from pathlib import Path

import pytest
from ortools.sat.python import cp_model

from bench.placement.foreign import _agree, instance
from placement import parse_problem, solve
from placement.cpsat import new_solver

# The plain model of foreign draw 1610 cut down to the 29 constraints that keep the defect: the default
# CpSolver proves 38,259,932,655 optimal (9.15.6755), without presolve the optimum is 0.
CUT_DOWN = Path(__file__).parent / "data" / "cpsat_inclusion_presolve.pbtxt"


def _model() -> cp_model.CpModel:
    m = cp_model.CpModel()
    m.Proto().parse_text_format(CUT_DOWN.read_text())
    return m


def _solve(solver: cp_model.CpSolver) -> tuple[str, float]:
    solver.parameters.num_workers = 1
    status = solver.solve(_model())
    return solver.status_name(status), solver.objective_value


def test_new_solver_keeps_the_optimum_presolve_drops():
    plain = cp_model.CpSolver()
    plain.parameters.cp_model_presolve = False
    truth = _solve(plain)
    assert truth == ("OPTIMAL", 0.0)
    assert _solve(new_solver(cp_model)) == truth


@pytest.mark.parametrize("seed", [1610])
def test_foreign_draw_agrees_with_the_mip(seed):
    # Two sNICs, 28 vertices: answered `optimal` at 24.42 (the MIP: 23.87, a placement the exact evaluation
    # accepts) before the parameter.
    obj = instance(seed)
    ours = solve(parse_problem(obj), time_limit=20)
    mip = solve(parse_problem(obj), solver="mip", time_limit=20)
    assert ours["status"] == "optimal"
    assert _agree(ours, mip), (ours.get("host_cost"), mip.get("host_cost"))
