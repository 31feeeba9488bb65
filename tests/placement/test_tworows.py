"""The two-rows bound (placement/rowbound.two_rows_bound) against brute force on small random
multiple-choice knapsacks with two rows: exactly the least F = sum d + ell . (budget - use) over the choices
within both rows when that is <= room, room + 1 when none is; and the engine with it proves the same
optimum as CP-SAT on every configuration."""

from __future__ import annotations

import itertools
import logging
import random
import time

import numpy as np
import pytest

from placement import engine, parse_problem
from placement.families import instance
from placement.rowbound import two_rows_bound
from placement.solver import Options, prepare_within


def _random(rng: random.Random):
    sizes = [rng.randint(1, 4) for _ in range(rng.randint(0, 6))]
    start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(start[-1])
    d = np.array([rng.choice([0, 0, rng.randint(0, 10**6)]) for _ in range(n)], dtype=np.int64)
    # (uses from a few round values too: states with equal use of a row, where dominance decides)
    use = [
        [rng.choice([rng.randint(-(10**3), 10**5), rng.randint(0, 4) * 25_000]) for _ in range(2)]
        for _ in range(n)
    ]
    use = np.array(use, dtype=np.int64).reshape(n, 2)
    usable = np.array([rng.random() < 0.85 for _ in range(n)], dtype=bool)
    budget = [rng.randint(0, 5 * 10**5) for _ in range(2)]
    ell = [rng.choice([0, rng.randint(0, 30)]) for _ in range(2)]
    return d, use, budget, ell, start, usable


def _least(d, use, budget, ell, start, usable) -> int | None:
    """The least F over every choice within both rows, by brute force (None: no choice fits)."""
    best = None
    for pick in itertools.product(*[range(int(a), int(b)) for a, b in itertools.pairwise(start.tolist())]):
        ix = np.array(pick, dtype=np.int64)
        used = use[ix].sum(0) if len(ix) else np.zeros(2, dtype=np.int64)
        if (len(ix) and not usable[ix].all()) or (used > np.array(budget)).any():
            continue
        f = int(d[ix].sum()) + sum(
            e * (b - int(x)) for e, b, x in zip(ell, budget, used.tolist(), strict=True)
        )
        best = f if best is None else min(best, f)
    return best


@pytest.mark.parametrize("seed", range(200))
def test_exactly_the_least_within_room(seed):
    rng = random.Random(seed)
    d, use, budget, ell, start, usable = _random(rng)
    least = _least(d, use, budget, ell, start, usable)
    room = rng.choice([rng.randint(0, 3 * 10**6), 10**9])
    b = two_rows_bound(d, use, budget, ell, start, usable, room, 10**6, 10**8)
    if least is not None and least <= room:
        assert b == least
    else:
        assert b == room + 1


@pytest.mark.parametrize("seed", range(60))
def test_groups_of_one_configuration_are_stages_like_the_others(seed):
    # Mostly groups with one usable configuration (the engine's cores after fixing): they are taken before
    # the DP's arrays (rowbound: Python integers), with the same answers and room cut.
    rng = random.Random(1000 + seed)
    d, use, budget, ell, start, usable = _random(rng)
    n_single = rng.randint(1, 12)
    d = np.concatenate([np.array([rng.randint(0, 10**5) for _ in range(n_single)], dtype=np.int64), d])
    use = np.concatenate([np.array([[rng.randint(0, 10**4), rng.randint(0, 10**4)] for _ in range(n_single)],
                                   dtype=np.int64).reshape(-1, 2), use])  # fmt: skip
    start = np.concatenate([np.arange(n_single, dtype=np.int64), start + n_single])
    usable = np.concatenate([np.ones(n_single, dtype=bool), usable])
    budget = [b + 10**4 * n_single for b in budget]
    least = _least(d, use, budget, ell, start, usable)
    for room in (rng.randint(0, 10**6), int(d[:n_single].sum()) - 1, 10**9):
        b = two_rows_bound(d, use, budget, ell, start, usable, room, 10**6, 10**8)
        assert b == (least if least is not None and least <= room else room + 1)


def test_gives_up_past_its_states_or_work_and_negative_room():
    rng = random.Random(3)
    start = np.arange(0, 41, 4, dtype=np.int64)  # 10 groups of 4
    d = np.zeros(40, dtype=np.int64)
    use = np.array([[rng.randint(0, 1000), rng.randint(0, 1000)] for _ in range(40)], dtype=np.int64)
    usable = np.ones(40, dtype=bool)
    args = (d, use, [10**6, 10**6], [1, 1], start, usable, 10**9)
    assert two_rows_bound(*args, 3, 10**9) is None
    assert two_rows_bound(*args, 10**9, 10) is None
    assert two_rows_bound(d, use, [10, 10], [1, 1], start, usable, -1, 10, 10) == 0


@pytest.mark.parametrize(
    ("family", "size", "seed"),
    [("long", 100, 0), ("long", 100, 7), ("chains-tight", 150, 0)],
)
def test_engine_with_the_two_rows_bound_matches_the_plain_model(family, size, seed, caplog):
    """The engine (where the two-rows bound is computed, checked in its debug log: it proves these) and CP-SAT
    on every configuration (reduce=False) reach the same primary cost, both proven."""
    gr = prepare_within(parse_problem(instance(family, size, seed)), Options(), time.monotonic())
    with caplog.at_level(logging.DEBUG, logger="placement.engine"):
        ours = engine.solve_groups(gr, time.monotonic() + 60)
    steps = [r.getMessage().split()[2] for r in caplog.records if r.getMessage().startswith("two-rows bound")]
    assert steps and steps[0] != "None"  # the bound was computed (proved, or a floor)
    plain = engine.solve_groups(gr, time.monotonic() + 60, reduce=False)
    assert ours.status == plain.status == "optimal"
    assert engine._sum(gr.cost, ours.chosen) == engine._sum(gr.cost, plain.chosen)
