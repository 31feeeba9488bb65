"""CP-SAT solvers as every placement path creates them: one place for the parameters that keep answers exact."""

from __future__ import annotations


def new_solver(cp_model):
    """A `cp_model.CpSolver` with the parameters every placement solve needs (callers add their own)."""
    solver = cp_model.CpSolver()
    # OR-Tools 9.15's presolve of at-most-one constraints against linear rows (ProcessAtMostOneAndLinear and
    # the inclusion detections, all gated by this work limit) can drop the optimum of an all-linear model and
    # prove a worse one optimal (google/or-tools#5293). Met here: foreign draw 1610 (two sNICs) was answered
    # `optimal` at host cost 24.42 where 23.87 is feasible (tests/placement/test_cpsat.py). 0 turns that
    # family off; the rest of presolve stays on.
    solver.parameters.presolve_inclusion_work_limit = 0
    return solver
