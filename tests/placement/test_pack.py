"""The pooled fill and split of interchangeable sNICs (placement/pack.py): the meet in the middle and the
greedy fill against brute force, exact splits found, an overfilled PCIe row avoided, and on family
instances with two to four sNICs a placement that fits, uses only near-free configurations and lies
within the slack of the bound."""

from __future__ import annotations

import itertools
import math
import random
import time

import numpy as np
import pytest

from placement import engine, parse_problem
from placement.decompose import prepare
from placement.dual import prices
from placement.families import instance
from placement.pack import _fill, _meet, pack
from placement.work import Work


def _box() -> Work:
    return Work(1e12, time.monotonic() + 30)


def _best(values: list[list[int]], room: int) -> int | None:
    """Brute force: the largest sum <= room of at most one value per group."""
    best = None
    for pick in itertools.product(*[[0, *vs] for vs in values]):
        s = sum(pick)
        if s <= room and (best is None or s > best):
            best = s
    return best


@pytest.mark.parametrize("seed", range(40))
def test_meet_in_the_middle_finds_the_best_sum_within_the_room(seed):
    rng = random.Random(seed)
    values = [
        [rng.randint(-(10**9), 10**9) or 1 for _ in range(rng.randint(1, 3))]
        for _ in range(rng.randint(1, 7))
    ]
    room = rng.randint(-(10**9), 2 * 10**9)
    got = _meet(values, room, _box())
    best = _best(values, room)
    if best is None:
        assert got is None
        return
    assert got[0] == best
    assert sum(vs[j] for vs, j in zip(values, got[1], strict=True) if j >= 0) == best


@pytest.mark.parametrize("seed", range(40))
def test_fill_stays_within_the_room_and_is_exact_when_every_item_is_fine(seed):
    rng = random.Random(seed)
    steps = [
        [rng.randint(-(10**6), 10**6) or 1 for _ in range(rng.randint(1, 2))]
        for _ in range(rng.randint(1, 60))
    ]
    room = rng.randint(-(10**7), 10**7)
    taken = _fill(steps, list(range(len(steps))), room, _box())
    if taken is None:  # nothing fits: not even the least sum of every item's most negative step
        assert sum(min(0, *s) for s in steps) > room
        return
    total = sum(s[j] for s, j in zip(steps, taken, strict=True) if j >= 0)
    assert total <= room
    if len(steps) <= 8:  # all of them in the meet in the middle: the best sum
        assert total == _best(steps, room)


def _one_nf_groups(sizes: list[int], snics: int, pcie: list[list[int]] | None = None):
    """One group per NF: on the host (cost 2 x size, nothing used) or on sNIC k (cost 0, `size` of row k,
    and pcie[k][i] of the one PCIe row). Rows: the sNICs' capacities, then the PCIe row."""
    n_cfg = snics + 1
    start = np.arange(0, n_cfg * len(sizes) + 1, n_cfg, dtype=np.int64)
    cost, use = [], []
    for i, w in enumerate(sizes):
        cost.append(2 * w)
        use.append([0] * (snics + 1))
        for k in range(snics):
            cost.append(0)
            row = [0] * (snics + 1)
            row[k] = w
            row[snics] = pcie[k][i] if pcie else 0
            use.append(row)
    return np.array(cost, dtype=np.int64), np.array(use, dtype=np.int64), start


def test_pack_fills_two_snics_exactly_when_a_split_exists():
    """48 units of NFs, two sNICs of 24: every NF on an sNIC, 11 + 13 on one (the only exact split with
    them); the host keeps none."""
    sizes = [3, 5, 7, 9, 11, 13]
    cost, use, start = _one_nf_groups(sizes, 2)
    budget = np.array([24, 24, 10**6], dtype=np.int64)
    neutral = np.ones(len(cost), dtype=bool)
    y = np.zeros(len(cost))
    out = pack(cost, use, budget, start, None, neutral, y, np.array([0, 1]), 0, _box())
    assert out is not None
    ix = np.array(out)
    assert use[ix].sum(0)[:2].tolist() == [24, 24]
    assert int(cost[ix].sum()) == 0


def test_pack_avoids_a_split_that_overfills_another_row():
    """Two sNICs of 12 and NFs of 5, 7 and 12: on sNIC 0 the NF of 12 would take 5 units of a PCIe row
    that has 1; the split puts 5 + 7 there instead."""
    sizes = [5, 7, 12]
    cost, use, start = _one_nf_groups(sizes, 2, pcie=[[0, 0, 5], [0, 0, 0]])
    budget = np.array([12, 12, 1], dtype=np.int64)
    neutral = np.ones(len(cost), dtype=bool)
    out = pack(cost, use, budget, start, None, neutral, np.zeros(len(cost)), np.array([0, 1]), 0, _box())
    assert out is not None
    ix = np.array(out)
    assert (use[ix].sum(0) <= budget).all()
    assert use[ix].sum(0)[:2].tolist() == [12, 12]


def test_pack_returns_none_when_no_split_fits():
    """Two sNICs of 10 and NFs of 6 that must be on an sNIC (the host is not near-free): 18 units fit the
    pool of 20, but no split of three 6s fits two sNICs of 10."""
    cost, use, start = _one_nf_groups([6, 6, 6], 2)
    budget = np.array([10, 10, 10**6], dtype=np.int64)
    neutral = cost == 0
    out = pack(cost, use, budget, start, None, neutral, np.zeros(len(cost)), np.array([0, 1]), 0, _box())
    assert out is None


@pytest.mark.parametrize(
    ("name", "size", "snics", "seed", "within"),
    [("two-snics", 500, None, 5, True), ("chains", 600, 3, 5, True), ("four-snics", 500, None, 6, True),
     ("four-snics", 500, None, 7, True), ("four-snics", 300, None, 5, False)],
)  # fmt: skip
def test_pack_on_family_instances_fits_near_free_and_within_the_slack(name, size, snics, seed, within):
    """Seeds the bench does not use. At 300 vertices with four sNICs (seed 5) the NFs that must be on an
    sNIC at zero reduced cost do not fit the pool: a placement, not one within the slack."""
    gr = prepare(parse_problem(instance(name, size, seed, **({"snics": snics} if snics else {}))))
    alive = np.ones(len(gr.cost), dtype=bool)
    pr = prices(gr.use, gr.budget, gr.cost, gr.start, alive, time.monotonic() + 30)
    lb, den, d = engine._bound(gr, alive, gr.cost, pr.lam, [], np.zeros(0))
    unit = math.floor(1e-5 * -(-lb // den))
    neutral = engine._within(d, den * (unit // 256))
    rows = np.nonzero(pr.lam > 1e-9 * pr.lam.max())[0]
    assert len(rows) > 1 and np.allclose(pr.lam[rows], pr.lam[rows[0]])  # the sNICs are priced alike
    budget = np.array(gr.budget, dtype=np.int64)
    margin = int(unit / (8 * pr.lam[rows].max()))
    out = pack(gr.cost, gr.use, budget, gr.start, None, neutral, pr.y, rows, margin, _box())
    assert out is not None and engine._fits(gr, out)
    assert (neutral | (pr.y > 1e-6))[np.array(out)].all()
    assert lb <= den * engine._sum(gr.cost, out)
    if within:  # proven by the bound (1e-5 of the cost)
        assert den * engine._sum(gr.cost, out) < lb + den * (unit + 1)
