"""The surrogate one-row relaxation (placement/surrogate.py) against brute force on small random groups:
the frontier keeps a minimiser, the minimum is exact (real CP-SAT), and it never exceeds the optimum of
the problem it relaxes (so the engine's bound from it is valid, sNICs alike or not)."""

from __future__ import annotations

import itertools
import random
import time

import numpy as np
import pytest

from placement import surrogate


def _instance(rng: random.Random):
    sizes = [rng.randint(1, 5) for _ in range(rng.randint(1, 6))]
    start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n, rows = int(start[-1]), rng.randint(1, 3)
    cost = np.array([rng.randint(0, 10**12) for _ in range(n)], dtype=np.int64)
    use = np.array([[rng.randint(0, 10**10) for _ in range(rows)] for _ in range(n)], dtype=np.int64)
    budget = np.array([rng.randint(0, 10**10 * len(sizes) // 2) for _ in range(rows)], dtype=np.int64)
    alive = np.array([rng.random() < 0.85 for _ in range(n)])
    for a, b in zip(start[:-1], start[1:], strict=True):
        alive[rng.randrange(int(a), int(b))] = True
    return cost, use, budget, start, alive


def _brute(cost, start, alive, ok) -> int | None:
    best = None
    ranges = [
        [k for k in range(int(a), int(b)) if alive[k]] for a, b in zip(start[:-1], start[1:], strict=True)
    ]
    for pick in itertools.product(*ranges):
        ix = np.array(pick)
        if ok(ix):
            c = int(cost[ix].sum())
            best = c if best is None else min(best, c)
    return best


@pytest.mark.parametrize("seed", range(40))
def test_surrogate_minimum_is_exact_and_below_the_real_optimum(seed):
    rng = random.Random(seed)
    cost, use, budget, start, alive = _instance(rng)
    mult = np.array([rng.randint(0, 5) for _ in range(use.shape[1])], dtype=np.int64)
    weight, capacity = use @ mult, int(budget @ mult)
    relaxed = _brute(cost, start, alive, lambda ix: int(weight[ix].sum()) <= capacity)
    real = _brute(cost, start, alive, lambda ix: bool((use[ix].sum(0) <= budget).all()))
    low, chosen = surrogate.minimise(cost, weight, capacity, start, alive, time.monotonic() + 30)
    if relaxed is None:
        assert low == 2**62 and chosen is None and real is None
        return
    assert low == relaxed
    ix = np.array(chosen)
    assert alive[ix].all() and int(weight[ix].sum()) <= capacity and int(cost[ix].sum()) == relaxed
    assert real is None or low <= real


def test_frontier_keeps_one_of_equal_configurations_and_drops_dominated_ones():
    cost = np.array([5, 5, 3, 7, 1, 1], dtype=np.int64)
    weight = np.array([2, 2, 4, 1, 9, 9], dtype=np.int64)
    start = np.array([0, 4, 6])
    keep = surrogate.frontier(cost, weight, start, np.ones(6, dtype=bool))
    # group 0: (3,4), (5,2) once, (7,1) all on the frontier; group 1: one of the two equal ones
    assert keep[:4].tolist() in ([True, False, True, True], [False, True, True, True])
    assert keep[4:].sum() == 1
    assert not surrogate.frontier(cost, weight, start, np.array([1, 1, 1, 1, 0, 1], dtype=bool))[4]
