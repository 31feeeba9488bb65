"""The proof's refutation asked at once near the floor (engine.REFUTE_GAP on cores of REFUTE_MIN_GROUPS groups
with a choice; the bisection's midpoints otherwise). Exact either way: forced on every core (and at any gap),
the engine stays within the gap limit of the exact optimum (the engine at gap 0) on family instances whose
proof bisects by default (chains-tight 500 seeds 1 and 6, pinned 500 seeds 0 and 5: 1-3 midpoints each)."""

from __future__ import annotations

import logging
import time

import pytest

from placement import engine, parse_problem
from placement.families import instance
from placement.solver import Options, prepare_within

from .test_widened import _assert_within_gap


@pytest.mark.parametrize(
    ("family", "seed"), [("chains-tight", 1), ("chains-tight", 6), ("pinned", 0), ("pinned", 5)]
)
def test_the_refutation_first_keeps_the_optimum(family, seed, caplog, monkeypatch):
    gr = prepare_within(parse_problem(instance(family, 500, seed)), Options(), time.monotonic())
    exact = engine.solve_groups(gr, time.monotonic() + 120)
    asked = {}
    for forced in (False, True):
        if forced:
            monkeypatch.setattr(engine, "REFUTE_GAP", 10**6)
            monkeypatch.setattr(engine, "REFUTE_MIN_GROUPS", 0)
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="placement.engine"):
            ours = engine.solve_groups(gr, time.monotonic() + 60, gap_limit=1e-5)
        messages = [r.getMessage() for r in caplog.records]
        asked[forced] = [m for m in messages if m.startswith("cost <=")]
        assert exact.status == ours.status == "optimal"
        _assert_within_gap(gr, ours, exact)
    assert any("midpoint" in m for m in asked[False]), asked[False]  # (the bisection runs here by default)
    # Forced: every question is the incumbent's refutation, never a midpoint.
    assert not any("midpoint" in m for m in asked[True]), asked[True]
