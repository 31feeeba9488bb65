"""The grown restricted core (engine._regrown, engine._regrow): CP-SAT minimising on the restricted core
grown to REGROW x its rank of reduced costs. Against brute force on small random multi-row instances: what it
returns fits every row, takes one configuration per group, costs less than the incumbent and no less than the
optimum, and is within the slack of the best choice of the grown core when proven ("optimal"); "infeasible"
only when that core has nothing cheaper; its floor is never above the grown core's best choice. Both ways of
asking (stopped at the first placement below, or minimised: the incumbent far from or near the bound). And the engine that uses it stays within the gap limit of the exact
optimum."""

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
def test_regrown_fits_is_cheaper_and_within_the_slack_of_its_core(seed):
    rng = random.Random(seed)
    t = _priced(rng)
    y = np.array([rng.choice([0.0, rng.random()]) for _ in range(len(t.cost))])  # any LP support
    alive = np.ones(len(t.cost), dtype=bool)
    units = rng.choice([0, 1, rng.randint(1, 10**9)])
    status, out, _, floor = engine._regrown(
        t.gr, t.d, y, alive, t.lb, t.den, t.first, lambda _: units, 1, time.monotonic() + 30, engine._Run()
    )
    grown = engine._restricted(t.gr, t.d, y, alive, engine.REGROW)
    grown[np.array(t.first)] = True
    best_grown = _exact_best(t.cost, t.use, t.budget, t.start, grown)
    assert best_grown is not None and best_grown <= t.p  # (the incumbent is in the grown core)
    assert floor is None or (floor.floor <= best_grown and (floor.keep == grown).all())
    if status == "infeasible":
        assert best_grown == t.p  # nothing cheaper in the grown core
        return
    if status == "unknown":  # (the box ran out before a cheaper placement)
        assert out is None
        return
    assert status in ("optimal", "feasible")
    _assert_fits(t, out)
    assert t.best <= engine._sum(t.cost, out) < t.p
    assert grown[np.array(out)].all()
    if status == "optimal":
        assert engine._sum(t.cost, out) <= best_grown + units


@pytest.mark.parametrize(("size", "seed"), [(150, 5), (300, 2), (500, 8)])
def test_engine_with_the_grown_core_keeps_the_exact_optimum(size, seed, caplog):
    """chains-tight whose local search stops far above the bound on a narrow proof core of few configurations
    a group: the grown core improves the incumbent (checked in the debug log) and the answer is within the gap
    limit of the exact optimum (the engine at gap 0, where it does not run)."""
    gr = prepare_within(parse_problem(instance("chains-tight", size, seed)), Options(), time.monotonic())
    exact = engine.solve_groups(gr, time.monotonic() + 120)
    with caplog.at_level(logging.DEBUG, logger="placement.engine"):
        ours = engine.solve_groups(gr, time.monotonic() + 60, gap_limit=1e-5)
    assert any(
        r.getMessage().startswith("regrown core optimal")
        or r.getMessage().startswith("regrown core feasible")
        for r in caplog.records
    )
    assert exact.status == ours.status == "optimal"
    _assert_within_gap(gr, ours, exact)
