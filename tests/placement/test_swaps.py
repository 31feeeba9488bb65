"""The exact local search for incumbents (placement/swaps.py, engine._improved): every result is a
feasible choice no dearer than where it started and never below the exact optimum (brute force on small
random multi-row instances); on multi-sNIC family instances, sNICs alike and sNICs that differ in capacity,
PCIe and max_rules, the engine's answers stay exact (brute force) and `optimal` only when proven."""

from __future__ import annotations

import itertools
import random
import time

import numpy as np
import pytest

from placement import engine, parse_problem, solve, swaps
from placement.decompose import prepare
from placement.dual import prices
from placement.families import instance
from placement.swaps import fill, improve, shake
from placement.work import Work

from .test_families import brute_force, check_placed, small_instance


def _box(limit: float = 1e12) -> Work:
    """A work box that ends the search only when the search ends by itself (on the real clock)."""
    return Work(limit, time.monotonic() + 30)


def _random_groups(rng: random.Random, n_groups: int, rows: int):
    sizes = [rng.randint(1, 4) for _ in range(n_groups)]
    start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(start[-1])
    cost = np.array([rng.randint(0, 10**12) for _ in range(n)], dtype=np.int64)
    use = np.array([[rng.randint(-(10**9), 10**11) for _ in range(rows)] for _ in range(n)], dtype=np.int64)
    # A feasible start: the first configuration of every group, the budgets a little above its use.
    first = start[:-1]
    budget = use[first].sum(0) + np.array([rng.randint(0, 10**11) for _ in range(rows)], dtype=np.int64)
    return cost, use, budget, start, first.tolist()


def _exact_best(cost, use, budget, start, usable=None) -> int | None:
    """The least cost of one configuration per group (only `usable` ones, if given) within every budget
    row, by brute force; None when no choice fits."""
    best = None
    for pick in itertools.product(
        *[range(int(a), int(b)) for a, b in zip(start[:-1], start[1:], strict=True)]
    ):
        ix = np.array(pick)
        if (usable is None or usable[ix].all()) and (use[ix].sum(0) <= budget).all():
            c = int(cost[ix].sum())
            best = c if best is None else min(best, c)
    return best


@pytest.mark.parametrize("seed", range(30))
def test_improve_stays_feasible_never_dearer_never_below_the_optimum(seed):
    rng = random.Random(seed)
    cost, use, budget, start, chosen = _random_groups(rng, rng.randint(1, 7), rng.randint(1, 3))
    best = _exact_best(cost, use, budget, start)
    allowed = np.ones(len(cost), dtype=bool)
    near = np.array([rng.random() < 0.5 for _ in range(len(cost))])
    out = improve(cost, use, budget, start, chosen, allowed, -(10**18), _box(), near)
    ix = np.array(out)
    assert (np.searchsorted(start, ix, side="right") - 1 == np.arange(len(start) - 1)).all()
    assert (use[ix].sum(0) <= budget).all()
    assert best <= int(cost[ix].sum()) <= int(cost[np.array(chosen)].sum())


def test_improve_uses_only_allowed_configurations_and_stops_at_the_target():
    rng = random.Random(7)
    cost, use, budget, start, chosen = _random_groups(rng, 6, 2)
    allowed = np.zeros(len(cost), dtype=bool)
    allowed[np.array(chosen)] = True
    assert improve(cost, use, budget, start, chosen, allowed, 0, _box(), allowed) == chosen
    everything = np.ones(len(cost), dtype=bool)
    start_cost = int(cost[np.array(chosen)].sum())
    assert improve(cost, use, budget, start, chosen, everything, start_cost, _box()) == chosen


@pytest.mark.parametrize("seed", range(20))
def test_shake_keeps_the_cost_and_every_budget(seed):
    rng = random.Random(seed)
    cost, use, budget, start, chosen = _random_groups(rng, rng.randint(2, 7), rng.randint(1, 3))
    # Cost-neutral switches exist: some configurations cost what their group's chosen one costs.
    for g, c in enumerate(chosen):
        for k in range(int(start[g]), int(start[g + 1])):
            if rng.random() < 0.5:
                cost[k] = cost[c]
    neutral = np.array([rng.random() < 0.8 for _ in range(len(cost))])
    out = shake(cost, use, budget, start, chosen, neutral, np.random.default_rng(seed), _box(), moves=3)
    ix = np.array(out)
    assert (np.searchsorted(start, ix, side="right") - 1 == np.arange(len(start) - 1)).all()
    assert (use[ix].sum(0) <= budget).all()
    assert int(cost[ix].sum()) == int(cost[np.array(chosen)].sum())
    assert all(neutral[k] for k, c in zip(out, chosen, strict=True) if k != c)


@pytest.mark.parametrize("seed", range(20))
def test_fill_stays_feasible_and_never_dearer(seed):
    rng = random.Random(seed)
    cost, use, budget, start, chosen = _random_groups(rng, rng.randint(2, 8), rng.randint(2, 3))
    allowed = np.array([rng.random() < 0.7 for _ in range(len(cost))])
    rows = np.arange(use.shape[1])
    out = fill(cost, use, budget, start, chosen, allowed, rows, rng.randrange(use.shape[1]), _box())
    ix = np.array(out)
    assert (np.searchsorted(start, ix, side="right") - 1 == np.arange(len(start) - 1)).all()
    assert (use[ix].sum(0) <= budget).all()
    assert int(cost[ix].sum()) <= int(cost[np.array(chosen)].sum())
    assert all(allowed[k] for k, c in zip(out, chosen, strict=True) if k != c)


def test_fill_finds_the_subset_that_fills_the_row():
    """Six groups of one item each (off, or on the row at a saving proportional to its size): the room
    is filled exactly only by items 3 + 5 + 11 - 7 (three in, one out), which no single or paired
    switch reaches; fill finds it, and nothing when nothing fits."""
    sizes = [3, 5, 11, 7, 40, 50]
    on = [False, False, False, True, False, False]
    start = np.arange(0, 2 * len(sizes) + 1, 2, dtype=np.int64)
    use = np.array([[0] if k % 2 == 0 else [sizes[k // 2]] for k in range(2 * len(sizes))], dtype=np.int64)
    cost = np.array([0 if k % 2 == 0 else -10 * sizes[k // 2] for k in range(2 * len(sizes))], dtype=np.int64)
    chosen = [2 * g + int(x) for g, x in enumerate(on)]
    budget = np.array([7 + 12], dtype=np.int64)  # 12 free
    allowed = np.ones(len(cost), dtype=bool)
    out = fill(cost, use, budget, start, chosen, allowed, np.array([0]), 0, _box())
    assert int(use[np.array(out)].sum()) == 19
    assert [k % 2 for k in out] == [1, 1, 1, 0, 0, 0]
    tight = np.array([7], dtype=np.int64)
    assert fill(cost, use, tight, start, chosen, allowed, np.array([0]), 0, _box()) == chosen


def test_shake_moves_nfs_between_like_snics_and_leaves_one_snic_alone():
    """Two sNICs alike: an exchange is found (the placement changes, same cost); with nothing
    cost-neutral to switch to, the placement comes back as it was."""
    gr = prepare(parse_problem(instance("two-snics", 300, 5)))
    alive = np.ones(len(gr.cost), dtype=bool)
    pr = prices(gr.use, gr.budget, gr.cost, gr.start, alive, time.monotonic() + 30)
    chosen = engine._greedy(gr, pr.y, alive)
    budget = np.array(gr.budget, dtype=np.int64)
    out = shake(gr.cost, gr.use, budget, gr.start, chosen, alive, np.random.default_rng(0), _box())
    assert (
        out != chosen and engine._fits(gr, out) and engine._sum(gr.cost, out) == engine._sum(gr.cost, chosen)
    )
    none = np.zeros(len(gr.cost), dtype=bool)
    assert shake(gr.cost, gr.use, budget, gr.start, chosen, none, np.random.default_rng(0), _box()) == chosen


@pytest.mark.parametrize(("name", "snics"), [("two-snics", None), ("chains", 3), ("four-snics", None)])
def test_improved_incumbent_fits_and_is_not_below_the_bound(name, snics):
    gr = prepare(parse_problem(instance(name, 300, 5, **({"snics": snics} if snics else {}))))
    alive = np.ones(len(gr.cost), dtype=bool)
    pr = prices(gr.use, gr.budget, gr.cost, gr.start, alive, time.monotonic() + 30)
    lb, den, d = engine._bound(gr, alive, gr.cost, pr.lam, [], np.zeros(0))
    greedy = engine._greedy(gr, pr.y, alive)
    out = engine._improved(gr, greedy, lb, den, d, pr.y, lambda p: p // 10**5, _box())
    assert out is not None and engine._fits(gr, out)
    assert den * engine._sum(gr.cost, out) >= lb
    assert engine._sum(gr.cost, out) <= engine._sum(gr.cost, greedy)


def _unlike_snics(obj: dict, rng: random.Random) -> dict:
    """The same instance with sNICs that differ: capacity, PCIe and max_rules scaled per sNIC."""
    for s in obj["snics"]:
        s["capacity"] *= rng.uniform(0.3, 1.7)
        s["pcie_gbps"] *= rng.uniform(0.6, 1.5)
        s["max_rules"] = rng.randint(0, 3)
    for n in obj["nodes"]:
        if n["kind"] == "nf" and rng.random() < 0.4:  # a switch table: its rules count against max_rules
            n["kind"], n["rules"] = "table", rng.randint(1, 2)
    return obj


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("name", "snics", "unlike"), [("two-snics", None, False), ("two-snics", None, True),
                                                        ("chains", 3, True), ("four-snics", None, True)])  # fmt: skip
def test_multi_snic_answers_match_brute_force(name, snics, unlike, seed):
    obj = small_instance(name, seed) if snics is None else _small_with(name, seed, snics)
    if unlike:
        obj = _unlike_snics(obj, random.Random(seed))
    problem = parse_problem(obj)
    best = brute_force(problem)
    out = solve(problem, time_limit=20, gap_limit=0)
    if best is None:
        assert out["status"] == "infeasible", out
        return
    assert out["status"] == "optimal", out
    cost = check_placed(problem, out)
    assert best <= cost <= best * (1 + 1e-12) + 1e-12


def _small_with(name: str, seed: int, snics: int) -> dict:
    for s in range(seed, seed + 200, 2):
        for n in range(12, 3, -1):
            obj = instance(name, n, s, snics=snics)
            p = parse_problem(obj)
            if np.prod([len(p.allowed(nd)) for nd in p.nodes], dtype=float) <= 5_000:
                return obj
    raise AssertionError("no small instance")


@pytest.mark.parametrize("seed", [11, 12])
def test_multi_snic_medium_optimal_only_when_the_mip_agrees(seed):
    """Seeds the bench does not use; sNICs that differ. `optimal` must hold against SCIP's placement."""
    obj = _unlike_snics(instance("chains", 90, seed, snics=3), random.Random(seed))
    problem = parse_problem(obj)
    ours = solve(problem, time_limit=20)
    mip = solve(problem, solver="mip", time_limit=20)
    if ours["status"] == "infeasible":
        assert mip["status"] == "infeasible"
        return
    a = check_placed(problem, ours)
    if ours["status"] == "optimal" and mip["status"] in ("optimal", "feasible"):
        b = check_placed(problem, mip)
        assert float(a) <= float(b) * (1 + ours["gap_limit"]) + 1e-9


class _JumpingClock:
    """A clock that jumps forward by a random step on every reading (as a loaded machine's would, seen
    from a search that reads it between steps), never reaching `until`."""

    def __init__(self, seed: int, until: float):
        self.rng, self.now, self.until = random.Random(seed), 0.0, until

    def __call__(self) -> float:
        self.now = min(self.until - 1.0, self.now + self.rng.choice([0.0, 1e-4, 0.5, 7.0]))
        return self.now


@pytest.mark.parametrize(("name", "snics"), [("two-snics", None), ("chains", 3), ("long", None)])
def test_local_search_result_does_not_depend_on_the_clock(name, snics):
    """The local search is boxed in work, not seconds: with a box small enough to end it early (so the
    box decides where it stops), the same result from the real clock and from clocks that jump by up to
    seven seconds between readings; the outer deadline alone still stops it (a clock past it: no step)."""
    gr = prepare(parse_problem(instance(name, 300, 5, **({"snics": snics} if snics else {}))))
    alive = np.ones(len(gr.cost), dtype=bool)
    pr = prices(gr.use, gr.budget, gr.cost, gr.start, alive, time.monotonic() + 30)
    lb, den, d = engine._bound(gr, alive, gr.cost, pr.lam, [], np.zeros(0))
    greedy = engine._greedy(gr, pr.y, alive)
    slack = lambda p: p // 10**6  # noqa: E731 (a tight target: the box, not the target, ends the search)
    full = Work(1e15, time.monotonic() + 60)
    engine._improved(gr, greedy, lb, den, d, pr.y, slack, full, None, pr.lam)
    limit = full.spent // 3  # a box that stops the search a third of the way
    assert limit > 0
    outs, spent = [], []
    for clock in (time.monotonic, _JumpingClock(1, 10**9), _JumpingClock(2, 10**9)):
        box = Work(limit, clock() + 10**6 if clock is time.monotonic else 10**9, clock)
        outs.append(engine._improved(gr, greedy, lb, den, d, pr.y, slack, box, None, pr.lam))
        spent.append(box.spent)
    assert outs[0] == outs[1] == outs[2] and spent[0] == spent[1] == spent[2] >= limit
    assert engine._fits(gr, outs[0]) and engine._sum(gr.cost, outs[0]) <= engine._sum(gr.cost, greedy)
    late = Work(1e15, 5.0, lambda: 6.0)  # the outer deadline has passed: not one step is taken
    assert engine._improved(gr, greedy, lb, den, d, pr.y, slack, late, None, pr.lam) is not None
    assert late.spent <= full.spent // 10


def test_work_shares_one_meter():
    outer = Work(100, 10.0, lambda: 0.0)
    inner = outer.share(0.5)
    assert inner.limit == 50
    inner.charge(50)
    assert inner.over() and not outer.over() and outer.spent == 50
    assert Work(100, 10.0, lambda: 11.0).over()  # the outer deadline, whatever is left of the box


@pytest.mark.parametrize("block", [1 << 16, 64])
def test_best_pair_by_blocks_is_the_pair_and_the_work_of_every_pair(monkeypatch, block):
    """swaps._best_pair (blocks of savers, cheapest first, stopped early) gives the pair that building every
    pair gives (_Pairs.best: least cost, first in left x right order among equals) and charges the same
    units, on random instances with ties, small and large numbers, capped left sides and small blocks."""
    monkeypatch.setattr(swaps, "BLOCK_CELLS", block)
    monkeypatch.setattr(swaps, "PAIR_CELLS", 5000)
    for seed in range(400):
        rng = np.random.default_rng(seed)
        spread, (d_cost, d_use, grp, left, right, room) = _pair_case(rng)
        every, blocks = _box(), _box()
        assert swaps._best_pair(d_cost, d_use, grp, left, right, room, blocks) == swaps._Pairs(
            d_cost, d_use, grp, left, right, every
        ).best(room)
        assert blocks.spent == every.spent


def _pair_case(rng: np.random.Generator) -> tuple[int, tuple]:
    """A random pair-search case (spread, (d_cost, d_use, grp, left, right, room)): ties, small and large
    numbers, any sides."""
    n, rows, spread = int(rng.integers(1, 300)), int(rng.integers(1, 4)), int(rng.choice([3, 50, 10**9]))
    d_cost, d_use = rng.integers(-spread, spread, n), rng.integers(-spread, spread, (n, rows))
    grp = rng.integers(0, int(rng.integers(1, 12)), n)
    left = np.sort(rng.choice(n, int(rng.integers(1, n + 1)), replace=False))
    right = np.sort(rng.choice(n, int(rng.integers(1, n + 1)), replace=False))
    return spread, (d_cost, d_use, grp, left, right, rng.integers(-spread // 2, spread, rows))


@pytest.mark.parametrize("block", [1 << 16, 64])
def test_best_pair_within_a_limit_is_the_cheapest_pair_or_none_and_the_same_work(monkeypatch, block):
    """swaps._best_pair with a cost limit (the local search's two-group move: only a pair cheaper than the
    best single switch is taken) answers the cheapest fitting pair when it costs at most the limit, else
    (0, -1, -1), and charges the units of building every pair (the engine's path does not change)."""
    monkeypatch.setattr(swaps, "BLOCK_CELLS", block)
    monkeypatch.setattr(swaps, "PAIR_CELLS", 5000)
    for seed in range(400):
        rng = np.random.default_rng(5000 + seed)
        spread, (d_cost, d_use, grp, left, right, room) = _pair_case(rng)
        every, limited = _box(), _box()
        cheapest = swaps._Pairs(d_cost, d_use, grp, left, right, every).best(room)
        limit = int(rng.integers(-2 * spread, 2 * spread))
        if cheapest[1] >= 0 and rng.random() < 0.3:
            limit = cheapest[0] - int(rng.integers(0, 2))  # at the cheapest pair's cost and just below it
        expected = cheapest if cheapest[1] >= 0 and cheapest[0] <= limit else (0, -1, -1)
        assert swaps._best_pair(d_cost, d_use, grp, left, right, room, limited, limit) == expected
        assert limited.spent == every.spent


@pytest.mark.parametrize("block", [1 << 16, 64])
def test_pair_search_answers_and_charges_every_question_as_every_pair(monkeypatch, block):
    """swaps._PairSearch (the three-group moves' partner pairs, each question by blocks) gives, question
    after question on one set of pairs (with and without a cost limit), the pair that building every pair gives (_Pairs.best: least cost,
    first in left x right order among equals, neither of the skipped group) and charges the same units,
    rows built by an earlier question included; random instances with ties, 2^30 spreads, capped sides."""
    monkeypatch.setattr(swaps, "BLOCK_CELLS", block)
    monkeypatch.setattr(swaps, "PAIR_CELLS", 5000)
    for seed in range(300):
        rng = np.random.default_rng(1000 + seed)
        n, rows, spread = int(rng.integers(1, 300)), int(rng.integers(1, 4)), int(rng.choice([3, 50, 10**9]))
        d_cost, d_use = rng.integers(-spread, spread, n), rng.integers(-spread, spread, (n, rows))
        n_groups = int(rng.integers(1, 12))
        grp = rng.integers(0, n_groups, n)
        side = np.sort(rng.choice(n, int(rng.integers(1, n + 1)), replace=False))
        every, blocks = _box(), _box()
        built, search = (
            swaps._Pairs(d_cost, d_use, grp, side, side, every),
            swaps._PairSearch(d_cost, d_use, grp, side, side, blocks),
        )
        assert blocks.spent == every.spent
        for _ in range(int(rng.integers(1, 8))):
            room = rng.integers(-spread // 2, spread, rows)
            skip = int(rng.integers(-1, n_groups))
            want = built.best(room, skip)
            if rng.random() < 0.5:
                assert search.best(room, skip) == want
            else:  # with a limit: the pair only when it costs at most the limit (ties at the limit too)
                limit = (
                    want[0] + int(rng.integers(-1, 2)) if want[1] >= 0 else int(rng.integers(-spread, spread))
                )
                assert search.best(room, skip, limit) == (
                    want if want[1] >= 0 and want[0] <= limit else (0, -1, -1)
                )
            assert blocks.spent == every.spent
