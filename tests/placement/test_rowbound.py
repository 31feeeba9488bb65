"""The kept-row bound (placement/rowbound.py) against brute force on small random multiple-choice knapsacks:
never above the true least reduced cost within the row's budget (any level count, so any rounding), equal
to it when every level is kept (q = 1), above `room` exactly when no choice within the budget reaches it;
and the engine's use of it (chains-tight, where it closes the LP's gap) stays exact."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest

from placement import engine, parse_problem
from placement.families import instance
from placement.rowbound import kept_row_bound
from placement.solver import Options, prepare_within

from .test_swaps import _exact_best


def _random(rng: random.Random):
    sizes = [rng.randint(1, 4) for _ in range(rng.randint(1, 6))]
    start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(start[-1])
    dr = np.array([rng.choice([0, rng.randint(0, 10**6)]) for _ in range(n)], dtype=np.int64)
    weight = np.array([rng.randint(-(10**5), 10**9) for _ in range(n)], dtype=np.int64)
    usable = np.array([rng.random() < 0.85 for _ in range(n)])
    budget = rng.randint(0, 3 * 10**9)
    return dr, weight, budget, start, usable


def _least(dr, weight, budget, start, usable) -> int | None:
    return _exact_best(dr, weight[:, None], np.array([budget]), start, usable)


@pytest.mark.parametrize("seed", range(60))
def test_bound_never_above_the_least_and_exact_with_every_level(seed):
    rng = random.Random(seed)
    dr, weight, budget, start, usable = _random(rng)
    least = _least(dr, weight, budget, start, usable)
    room = rng.randint(0, 4 * 10**6)
    exact = kept_row_bound(dr, weight, budget, start, usable, room, room + 1)  # q = 1
    if least is not None and least <= room:
        assert exact == least
    else:
        assert exact == room + 1  # no choice within the budget has sum(dr) <= room
    for states in (1, 3, 50, 1000):
        b = kept_row_bound(dr, weight, budget, start, usable, room, states)
        assert b is not None
        q = max(1, -(-room // states))
        if least is None:
            assert b > room
        else:
            assert b <= least
            if least <= room:  # each group's rounding down loses less than one level
                assert b > least - (len(start) - 1) * q


def test_negative_room_and_weights_too_large():
    start = np.array([0, 2])
    dr = np.array([0, 5], dtype=np.int64)
    usable = np.ones(2, dtype=bool)
    assert kept_row_bound(dr, np.array([1, 1]), 10, start, usable, -1, 100) == 0
    huge = np.array([2**61, 1], dtype=np.int64)
    assert kept_row_bound(dr, huge, 10, start, usable, 100, 100) is None


@pytest.mark.parametrize("seed", range(4))
def test_engine_with_the_kept_row_bound_matches_the_plain_model(seed):
    """chains-tight at 150 vertices: the engine (where the kept-row bound proves or raises the bound) and
    CP-SAT on every configuration (reduce=False) reach the same primary cost, both proven."""
    gr = prepare_within(parse_problem(instance("chains-tight", 150, seed)), Options(), time.monotonic())
    ours = engine.solve_groups(gr, time.monotonic() + 60)
    plain = engine.solve_groups(gr, time.monotonic() + 60, reduce=False)
    assert ours.status == plain.status == "optimal"
    assert engine._sum(gr.cost, ours.chosen) == engine._sum(gr.cost, plain.chosen)
