"""The engine's CP-SAT cores (engine._Core) are built on engine._model_class(), a CpModel that skips the
deprecated camelCase aliases: the model it builds is CpModel's, constraint for constraint, so CP-SAT's answers
and paths are unchanged."""

from __future__ import annotations

import time

import numpy as np
import pytest
from ortools.sat.python import cp_model

from placement import engine, parse_problem
from placement.families import instance
from placement.solver import Options, prepare_within


def _question(gr, alive: np.ndarray, ask: int | None) -> engine._Core:
    """A proof question's core minimising the cost, at most `ask` (None: any)."""
    core = engine._Core(gr, alive, 1, engine.FEASIBILITY_LINEARIZATION)
    if ask is not None:
        core.m.add(core.objective(gr.cost) <= ask - core.const(gr.cost))
    core.m.minimize(core.objective(gr.cost))
    return core


@pytest.mark.parametrize(
    ("family", "size", "seed"), [("pinned", 100, 3), ("chains-tight", 150, 1), ("mesh", 80, 2)]
)
def test_core_model_is_cpmodels(monkeypatch, family, size, seed):
    gr = prepare_within(parse_problem(instance(family, size, seed)), Options(), time.monotonic() + 30)
    assert gr is not None and gr.n_groups
    alive = np.random.default_rng(seed).random(len(gr.cost)) < 0.7
    alive[gr.start[:-1]] = True  # (every group keeps a configuration)
    least = int(np.minimum.reduceat(gr.cost, gr.start[:-1]).sum())  # (cost <= least: usually infeasible)
    for ask in (None, least):
        ours = _question(gr, alive, ask)
        assert type(ours.m) is not cp_model.CpModel and isinstance(ours.m, cp_model.CpModel)
        assert not hasattr(ours.m, "AddExactlyOne")  # (the aliases CpModel() binds on every instance)
        with monkeypatch.context() as m:
            m.setattr(engine, "_model_class", lambda: cp_model.CpModel)
            plain = _question(gr, alive, ask)
        assert str(ours.m.proto) == str(plain.m.proto)
        got = ours.solve(time.monotonic() + 30, None, first=True)
        assert got == plain.solve(time.monotonic() + 30, None, first=True)
        assert ask is not None or got[0] == "feasible"


def test_bool_vars_and_objective_are_cpmodels():
    """engine._new_bool_vars (one shared 0-1 domain) and _model_class().minimize (indices extended at once) write
    what CpModel.new_bool_var and CpModel.minimize write, offset, repeated variables and negative weights too."""
    names = [f"y{k}" for k in (5, 0, 17, 3)]
    ours, plain = engine._model_class()(), cp_model.CpModel()
    xs = engine._new_bool_vars(ours, names)
    ys = [plain.new_bool_var(n) for n in names]
    assert str(ours.proto) == str(plain.proto)
    for objective in (
        lambda v: cp_model.LinearExpr.weighted_sum(v, [3, -2, 0, 7]),
        lambda v: 2 * v[0] + v[1] - 5 * v[0] + 11,
        lambda v: cp_model.LinearExpr.weighted_sum([], []),
        lambda v: 4,
    ):
        ours.minimize(objective(xs))
        plain.minimize(objective(ys))
        assert str(ours.proto) == str(plain.proto)
        assert ours.proto.objective.offset == plain.proto.objective.offset
