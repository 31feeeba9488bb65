"""The questions' extra reduced-cost rows (engine._row_freed_bounds: per binding row, the exact Lagrangian bound
of the prices with that row's set to 0): against brute force on small random multi-row instances, every
choice within every budget row satisfies den * cost >= lb + sum of d (so the row "sum d <= den * ask - lb"
cuts off no placement of cost <= ask); and the engine that adds them (chains-tight 500 seed 1, where the
kept-row bound rises above the LP's) stays within the gap limit of the exact optimum."""

from __future__ import annotations

import itertools
import random
import time

import numpy as np
import pytest

from placement import engine, parse_problem
from placement.families import instance
from placement.solver import Options, prepare_within

from .test_minimised import _groups
from .test_swaps import _random_groups


@pytest.mark.parametrize("seed", range(60))
def test_freed_rows_cut_off_no_placement(seed):
    rng = random.Random(seed)
    cost, use, budget, start, _ = _random_groups(rng, rng.randint(1, 6), rng.randint(2, 3))
    gr = _groups(cost, use, budget, start)
    lam = np.array([rng.choice([0.0, rng.random(), 10 * rng.random()]) for _ in budget])
    alive = np.array([rng.random() < 0.85 for _ in cost]) | np.isin(np.arange(len(cost)), start[:-1])
    bounds = engine._row_freed_bounds(gr, alive, lam)
    assert len(bounds) == (int((lam > 0).sum()) if (lam > 0).sum() > 1 else 0)
    for pick in itertools.product(
        *[range(int(a), int(b)) for a, b in zip(start[:-1], start[1:], strict=True)]
    ):
        ix = np.array(pick)
        if not alive[ix].all() or not (use[ix].sum(0) <= budget).all():
            continue
        c = sum(cost[ix].tolist())
        for lb, den, d in bounds:
            assert den * c >= lb + sum(d[ix].tolist())


def test_engine_with_the_freed_rows_stays_within_the_gap(monkeypatch):
    """chains-tight 500 seed 1 asks questions with the freed rows (the kept-row bound rose above the LP's):
    its host cost is within the gap limit of the exact engine's (gap 0)."""
    gr = prepare_within(parse_problem(instance("chains-tight", 500, 1)), Options(), time.monotonic())
    calls = []
    freed = engine._row_freed_bounds

    def counted(*args):
        calls.append(1)
        return freed(*args)

    exact = engine.solve_groups(gr, time.monotonic() + 120)
    monkeypatch.setattr(engine, "_row_freed_bounds", counted)
    ours = engine.solve_groups(gr, time.monotonic() + 120, gap_limit=1e-5)
    assert calls
    assert exact.status == ours.status == "optimal"
    p_exact, p_ours = engine._sum(gr.cost, exact.chosen), engine._sum(gr.cost, ours.chosen)
    assert p_exact <= p_ours <= p_exact + 1e-5 * (gr.cost_const + p_ours)
