"""The question inside the grown core's floor (engine._inside, asked first in the proof's loop when that floor
does not decide the refutation). Against brute force on small random multi-row instances: what it returns
fits every row, uses only the core's configurations, costs no more than asked, and is within the slack of the
core's best choice when proven ("optimal"); "infeasible" only when nothing in the core costs the ask or less;
its floor is never above the core's best choice (the ask + 1 when there is none). And on the instances where
it runs the engine stays within the gap limit of the exact optimum and asks fewer CP-SAT questions than
without it (pinned 500 seed 8: four "no" answers of the bisection before, one refutation outside the core
after)."""

from __future__ import annotations

import logging
import random
import time

import numpy as np
import pytest

from placement import engine, parse_problem
from placement.families import instance
from placement.solver import Options, prepare_within

from .test_minimised import _assert_fits, _priced
from .test_swaps import _exact_best
from .test_widened import _assert_within_gap


@pytest.mark.parametrize("seed", range(40))
def test_inside_fits_stays_in_its_core_and_its_floor_is_valid(seed):
    rng = random.Random(seed)
    t = _priced(rng)
    keep = np.array([rng.random() < 0.7 for _ in range(len(t.cost))])
    keep[np.array(t.first)] = True
    best_keep = _exact_best(t.cost, t.use, t.budget, t.start, keep)
    assert best_keep is not None  # (the start is in the core)
    ask = rng.choice([t.p - 1, t.p, best_keep, best_keep - 1, rng.randint(t.best - 5, t.p)])
    units = rng.choice([0, 1, rng.randint(1, 10**9)])
    freed = rng.random() < 0.5
    lam = np.array([rng.choice([0.0, rng.random()]) for _ in t.budget])
    status, out, _, floor = engine._inside(
        t.gr, keep, ask, t.d, t.lb, t.den, lam, freed, units, 1, time.monotonic() + 30, engine._Run()
    )
    if status == "infeasible":
        assert best_keep > ask and floor == ask + 1
        return
    if status == "unknown":  # (the box ran out before a placement)
        assert out is None
        return
    assert status in ("optimal", "feasible")
    _assert_fits(t, out)
    assert keep[np.array(out)].all()
    assert best_keep <= engine._sum(t.cost, out) <= ask
    assert floor is None or floor <= best_keep
    if status == "optimal":
        assert engine._sum(t.cost, out) <= best_keep + units


@pytest.mark.parametrize(("family", "seed"), [("pinned", 8), ("chains-tight", 8)])
def test_engine_with_the_inside_question_keeps_the_exact_optimum_in_fewer_questions(
    family, seed, caplog, monkeypatch
):
    """500 vertices, where the inside question runs (checked in the debug log): the answer is within the gap
    limit of the exact optimum (the engine at gap 0, where it does not run), with fewer CP-SAT questions
    than without it."""
    gr = prepare_within(parse_problem(instance(family, 500, seed)), Options(), time.monotonic())
    exact = engine.solve_groups(gr, time.monotonic() + 120)
    asked = {}
    for inside in (False, True):
        monkeypatch.setattr(engine, "INSIDE_FIRST", inside)
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="placement.engine"):
            ours = engine.solve_groups(gr, time.monotonic() + 60, gap_limit=1e-5)
        messages = [r.getMessage() for r in caplog.records]
        assert any(m.startswith("inside the core's floor") for m in messages) == inside
        asked[inside] = sum(m.startswith(("cost <=", "inside the core's floor")) for m in messages)
        assert exact.status == ours.status == "optimal"
        _assert_within_gap(gr, ours, exact)
    assert asked[True] < asked[False]
