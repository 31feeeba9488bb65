"""A model a solver refuses (CP-SAT's MODEL_INVALID: a defect of ours, e.g. a row that could overflow) is
never taken for a time-out: the engine's refusal hands the instance to the plain model and the output says
why; the plain model's refusal answers `unknown` with the solver's reason."""

from __future__ import annotations

import time

import numpy as np
import pytest

from placement import engine, parse_problem, solve
from placement import solver as solver_mod
from placement.decompose import prepare
from placement.engine import ModelRefused

from .test_solver import chain

BIG = 1 << 62  # two such terms could sum past 64 bits: CP-SAT refuses the row


def _overflow(m) -> None:
    a, b = m.new_bool_var("a"), m.new_bool_var("b")
    m.add(BIG * a + BIG * b <= BIG)


def test_engine_core_refusal_raises_with_cp_sats_reason():
    gr = prepare(parse_problem(chain(capacity=3)))
    core = engine._Core(gr, np.ones(len(gr.cost), dtype=bool), 1, 2)
    _overflow(core.m)
    with pytest.raises(ModelRefused, match="CP-SAT refused the engine's model: .*overflow"):
        core.solve(time.monotonic() + 5, None)


def test_engine_refusal_hands_over_to_the_plain_model(monkeypatch, caplog):
    def refuse(*args, **kwargs):
        raise ModelRefused("CP-SAT refused the engine's model: Possible integer overflow in constraint")

    monkeypatch.setattr(solver_mod, "solve_groups", refuse)
    out = solve(parse_problem(chain(capacity=3)))
    # The plain model's answer (the same optimum as the engine's, test_solver.test_capacity_binds) ...
    assert out["status"] == "optimal" and out["host_cost"] == 2.0
    assert out["placement"]["a"] == "snic0"
    # ... with the engine's refusal named in the output and the log.
    assert "overflow" in out["engine_refused"]
    assert any("placement engine: CP-SAT refused" in r.getMessage() for r in caplog.records)


def test_plain_model_refusal_is_unknown_with_the_reason(monkeypatch):
    minimize = solver_mod._Model.minimize

    def minimize_and_overflow(self, terms):
        minimize(self, terms)
        _overflow(self.m)

    monkeypatch.setattr(solver_mod._Model, "minimize", minimize_and_overflow)
    out = solve(parse_problem(chain(capacity=3)), engine=False)
    assert out["status"] == "unknown" and out["placement"] == {}
    assert out["reason"].startswith("CP-SAT refused the model:") and "overflow" in out["reason"]


def test_no_refusal_no_field():
    out = solve(parse_problem(chain(capacity=3)))
    assert "engine_refused" not in out
