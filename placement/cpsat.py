"""CP-SAT solvers as every placement path creates them: one place for the parameters that keep answers exact.

`new_solver` is the safe solver: every proof (status optimal or infeasible used as such, an objective bound)
comes from it. `new_stock_solver` keeps OR-Tools 9.15's stock presolve, which can drop solutions (below):
only a placement may come from it, after `satisfies` checks it against every row of the model in exact
integers (placement/engine.py `_Core.solve`'s `stock`; docs/placement.md)."""

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


def new_stock_solver(cp_model):
    """A `cp_model.CpSolver` with CP-SAT's stock presolve (the inclusion step `new_solver` turns off): ONLY
    for a placement, which the caller must check exactly (`satisfies`) before it uses it. Its statuses
    "optimal" / "infeasible" and its objective bound are never a proof: OR-Tools 9.15's inclusion presolve
    can drop solutions, the optimum included (google/or-tools#5293), but a placement it returns that meets
    every row of the model as built is a placement of the model."""
    return cp_model.CpSolver()


def _literal(values: list[int], lit: int) -> int:
    return values[lit] if lit >= 0 else 1 - values[-lit - 1]


def satisfies(proto, values: list[int]) -> bool:
    """Whether `values` (one integer per variable of the CpModelProto `proto`, in order) meets every
    variable's domain and every constraint, in exact integers. Only the kinds the placement models use are
    read (linear, exactly one, at most one, bool or, bool and, with enforcement literals); any other kind
    answers False (an assignment not checked is not used)."""
    if len(values) != len(proto.variables):
        return False
    for var, v in zip(proto.variables, values, strict=True):
        if not _in_domain(v, list(var.domain)):
            return False
    for c in proto.constraints:
        if not all(_literal(values, lit) for lit in c.enforcement_literal):
            continue
        if c.has_linear():
            lin = c.linear
            refs = list(lin.vars)
            if any(x < 0 for x in refs):
                return False  # (the placement models write none: not read)
            total = sum(k * values[x] for x, k in zip(refs, lin.coeffs, strict=True))
            if not _in_domain(total, list(lin.domain)):
                return False
        elif c.has_exactly_one():
            if sum(_literal(values, lit) for lit in c.exactly_one.literals) != 1:
                return False
        elif c.has_at_most_one():
            if sum(_literal(values, lit) for lit in c.at_most_one.literals) > 1:
                return False
        elif c.has_bool_or():
            if not any(_literal(values, lit) for lit in c.bool_or.literals):
                return False
        elif c.has_bool_and():
            if not all(_literal(values, lit) for lit in c.bool_and.literals):
                return False
        else:
            return False
    return True


def _in_domain(v: int, domain: list[int]) -> bool:
    """Whether v lies in a CP-SAT domain (sorted [lo, hi] pairs, flattened)."""
    return any(domain[i] <= v <= domain[i + 1] for i in range(0, len(domain), 2))
