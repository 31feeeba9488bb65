"""choicebb.exists, the exact answer to the proof's questions: against brute force on many random small cores
(yes and no, at and around the optimum, one to three rows, zero-cost and tied configurations), and the
engine's proven host cost with it against the engine asking CP-SAT only."""

from __future__ import annotations

import itertools
import logging
import time

import numpy as np
import pytest

from placement import choicebb, engine, parse_problem
from placement.dual import prices
from placement.families import instance
from placement.solver import Options, prepare_within
from placement.work import Work


def _core(rng: np.random.Generator, n_groups: int, n_rows: int, scale: int):
    sizes = rng.integers(1, 6, n_groups)
    start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(start[-1])
    cost = rng.integers(0, scale, n).astype(np.int64)
    cost[rng.random(n) < 0.15] = 0  # zero-cost configurations
    use = rng.integers(0, scale, (n, n_rows)).astype(np.int64)
    dup = rng.random(n) < 0.15  # ties: a configuration equal to its predecessor
    dup[start[:-1]] = False
    for k in np.nonzero(dup)[0].tolist():
        cost[k], use[k] = cost[k - 1], use[k - 1]
    budget = [int(x) for x in (use.sum(0) * rng.uniform(0.15, 0.6, n_rows) / n_groups * sizes.mean())]
    alive = rng.random(n) < 0.9
    alive[start[:-1]] = True
    return cost, use, budget, start, alive


def _brute(cost, use, budget, start, alive) -> list[int]:
    """Every feasible choice's cost, sorted."""
    opts = [[k for k in range(start[g], start[g + 1]) if alive[k]] for g in range(len(start) - 1)]
    out = []
    for ch in itertools.product(*opts):
        idx = np.array(ch, dtype=np.int64)
        if (use[idx].sum(0) <= np.array(budget)).all():
            out.append(int(cost[idx].sum()))
    return sorted(out)


def _check(cost, use, budget, start, alive, ask: int, feasible: bool, known: choicebb.Prices) -> str:
    ans = choicebb.exists(cost, use, budget, start, alive, ask, known, Work(1e12, time.monotonic() + 60))
    assert ans.status == ("yes" if feasible else "no")
    if ans.status == "yes":
        idx = np.array(ans.chosen, dtype=np.int64)
        assert (
            alive[idx].all() and (np.searchsorted(start, idx, side="right") - 1 == np.arange(len(idx))).all()
        )
        assert int(cost[idx].sum()) <= ask and (use[idx].sum(0) <= np.array(budget)).all()
    return ans.status


@pytest.mark.parametrize("n_rows", [1, 2, 3])
@pytest.mark.parametrize("scale", [10, 10**9])
def test_answers_match_brute_force_at_and_around_the_optimum(n_rows, scale):
    rng = np.random.default_rng(n_rows * 1000 + scale % 997)
    seen = set()
    for _ in range(40):
        cost, use, budget, start, alive = _core(rng, int(rng.integers(1, 8)), n_rows, scale)
        costs = _brute(cost, use, budget, start, alive)
        pr = prices(use, budget, cost, start, alive, time.monotonic() + 10)
        known = choicebb.Prices([pr.lam] if pr is not None else [])
        if not costs:
            seen.add(_check(cost, use, budget, start, alive, 10**12, False, known))
            continue
        best = costs[0]
        for ask in (best - 1, best, best + 1, (best + costs[-1]) // 2, best - scale):
            seen.add(_check(cost, use, budget, start, alive, ask, ask >= best, known))
    assert seen == {"yes", "no"}


def test_an_empty_box_answers_unknown_never_wrong():
    rng = np.random.default_rng(7)
    cost, use, budget, start, alive = _core(rng, 7, 2, 1000)
    ans = choicebb.exists(
        cost, use, budget, start, alive, 10**9, choicebb.Prices(), Work(0, time.monotonic() + 60)
    )
    assert ans.status == "unknown"


@pytest.mark.parametrize(("max_states", "cells"), [(2, 8_000_000), (3, 40), (10_000, 8_000_000)])
def test_wide_layers_split_into_batches_answer_exactly(max_states, cells, monkeypatch):
    """With MAX_STATES 2-3 (and STATE_CELLS 40) every wide layer is split into batches searched depth
    first: the answers stay those of brute force, and the least one is the optimum."""
    monkeypatch.setattr(choicebb, "MAX_STATES", max_states)
    monkeypatch.setattr(choicebb, "STATE_CELLS", cells)
    rng = np.random.default_rng(3 + max_states)
    for n_rows in (1, 2, 3):
        for _ in range(12):
            cost, use, budget, start, alive = _core(rng, int(rng.integers(4, 9)), n_rows, 1000)
            costs = _brute(cost, use, budget, start, alive)
            pr = prices(use, budget, cost, start, alive, time.monotonic() + 10)
            known = choicebb.Prices([pr.lam] if pr is not None else [])
            if not costs:
                _check(cost, use, budget, start, alive, 10**9, False, known)
                continue
            for ask in (costs[0] - 1, costs[0], costs[len(costs) // 2], costs[-1]):
                _check(cost, use, budget, start, alive, ask, ask >= costs[0], known)
                _check_least(cost, use, budget, start, alive, ask, costs[0], known)


def _check_least(cost, use, budget, start, alive, ask: int, best: int, known: choicebb.Prices,
                 slack: int = 0) -> None:  # fmt: skip
    """Asked with lowered(c) = c - 1 - slack: "no" when the optimum `best` is above ask, else "yes" with a
    placement marked least, of cost within `slack` of `best` (the optimum itself at slack 0)."""
    ans = choicebb.exists(cost, use, budget, start, alive, ask, known, Work(1e12, time.monotonic() + 60),
                          lambda c: c - 1 - slack)  # fmt: skip
    if best > ask:
        assert ans.status == "no"
        return
    assert ans.status == "yes" and ans.least
    idx = np.array(ans.chosen, dtype=np.int64)
    assert alive[idx].all() and (use[idx].sum(0) <= np.array(budget)).all()
    assert best <= int(cost[idx].sum()) <= min(ask, best + slack)


@pytest.mark.parametrize("n_rows", [1, 2, 3])
@pytest.mark.parametrize("scale", [10, 10**9])
def test_least_answers_are_the_brute_force_optimum(n_rows, scale):
    """Asked for the least below asks at, around and far above the optimum (zero costs, ties, 1-3 rows,
    with the caller's prices, so with the kept-row tables, and without): the optimum or "no"."""
    rng = np.random.default_rng(n_rows * 77 + scale % 991)
    for _ in range(30):
        cost, use, budget, start, alive = _core(rng, int(rng.integers(1, 8)), n_rows, scale)
        costs = _brute(cost, use, budget, start, alive)
        pr = prices(use, budget, cost, start, alive, time.monotonic() + 10)
        for known in (choicebb.Prices([pr.lam] if pr is not None else []), choicebb.Prices()):
            if not costs:
                _check_least(cost, use, budget, start, alive, 10**12, 10**13, known)
                continue
            for ask in (costs[0] - 1, costs[0], costs[0] + 1, costs[-1], 10**12):
                _check_least(cost, use, budget, start, alive, ask, costs[0], known)
                _check_least(cost, use, budget, start, alive, ask, costs[0], known, scale // 3)


def test_an_exhausted_least_search_returns_its_last_placement_not_marked_least():
    """A box that ends after a placement was found: "yes" with it (a valid placement), not marked least."""
    rng = np.random.default_rng(5)
    for _ in range(40):
        cost, use, budget, start, alive = _core(rng, 8, 2, 1000)
        costs = _brute(cost, use, budget, start, alive)
        if len(costs) < 2:
            continue
        for limit in (1, 50, 200, 1000, 5000):
            ans = choicebb.exists(cost, use, budget, start, alive, costs[-1], choicebb.Prices(),
                                  Work(limit, time.monotonic() + 60), lambda c: c - 1)  # fmt: skip
            assert ans.status in ("yes", "unknown")
            if ans.status == "yes":
                idx = np.array(ans.chosen, dtype=np.int64)
                assert (use[idx].sum(0) <= np.array(budget)).all() and int(cost[idx].sum()) <= costs[-1]
                assert ans.least == (int(cost[idx].sum()) == costs[0]) or not ans.least


def test_kept_row_tables_never_cut_a_feasible_completion():
    """For every feasible choice and each of its prefixes, each table leaves room (slack >= 0) for it."""
    rng = np.random.default_rng(17)
    for n_rows in (1, 2, 3):
        for _ in range(15):
            cost, use, budget, start, alive = _core(rng, 5, n_rows, 10**6)
            alive[:] = True
            values = np.column_stack([cost, use]).astype(np.int64)
            lim = np.array([10**12, *budget], dtype=np.int64)
            per = [values[start[g] : start[g + 1]] for g in range(len(start) - 1)]
            span = np.abs(values).max(0) * len(per) + np.abs(lim)
            pr = prices(use, budget, cost, start, alive, time.monotonic() + 10)
            if pr is None:
                continue
            lam = np.maximum(pr.lam, 0.5)  # (every row priced: a table per row)
            tables = choicebb._kept_tables(per, lim, choicebb.Prices([lam]), span, Work(1e12, 1e18))
            assert len(tables) == n_rows
            opts = [range(len(v)) for v in per]
            for ch in itertools.product(*opts):
                total = sum(per[g][k] for g, k in enumerate(ch))
                if (total[1:] > lim[1:]).any():
                    continue
                lim[0] = total[0]  # (the tightest ask this choice meets)
                for j in range(len(per) + 1):
                    prefix = sum(
                        (per[g][k] for g, k in enumerate(ch[:j])), np.zeros(values.shape[1], np.int64)
                    )
                    for tab in tables:
                        assert tab.slack(prefix[None, :], lim, j)[0] >= 0


@pytest.mark.parametrize(("family", "size", "seed"), [("long", 100, 9), ("long", 100, 11), ("long", 200, 1)])
def test_the_engine_proves_the_same_host_cost_as_with_cp_sat_questions(family, size, seed, monkeypatch):
    """Instances whose proof asks several questions on a small core (the exact answers take them)."""
    gr = prepare_within(parse_problem(instance(family, size, seed)), Options(), time.monotonic())
    ours = engine.solve_groups(gr, time.monotonic() + 120, gap_limit=1e-5)
    monkeypatch.setattr(engine, "EXACT_MAX_GROUPS", -1)
    theirs = engine.solve_groups(gr, time.monotonic() + 120, gap_limit=1e-5)
    assert ours.status == theirs.status == "optimal"
    p_ours, p_theirs = engine._sum(gr.cost, ours.chosen), engine._sum(gr.cost, theirs.chosen)
    # (either may stop within the gap limit's slack of the optimum: both are within it of the other)
    assert abs(p_ours - p_theirs) <= 1e-5 * (gr.cost_const + max(p_ours, p_theirs))


@pytest.mark.parametrize(("family", "size", "seed"), [("long", 100, 11), ("long", 200, 1)])
def test_the_exact_engine_proves_the_same_optimum_as_with_cp_sat_questions(
    family, size, seed, monkeypatch, caplog
):
    """At gap 0 (every question a refutation of p1 - 1) the optimum is one number: the same with either
    (and some question was answered exactly, its debug line says so)."""
    gr = prepare_within(parse_problem(instance(family, size, seed)), Options(), time.monotonic())
    with caplog.at_level(logging.DEBUG, logger="placement.engine"):
        ours = engine.solve_groups(gr, time.monotonic() + 120)
    assert any(r.getMessage().startswith("cost <=") and " exact t=" in r.getMessage() for r in caplog.records)
    monkeypatch.setattr(engine, "EXACT_MAX_GROUPS", -1)
    theirs = engine.solve_groups(gr, time.monotonic() + 120)
    assert ours.status == theirs.status == "optimal"
    assert engine._sum(gr.cost, ours.chosen) == engine._sum(gr.cost, theirs.chosen)


def test_prices_that_are_not_finite_or_negative_give_no_invalid_surrogate():
    span = np.array([10**12, 10**12], dtype=np.int64)
    assert not choicebb._surrogate(np.array([1.0, np.nan]), span).any()
    w = choicebb._surrogate(np.array([1.0, -3.0]), span)
    assert w[0] > 0 and w[1] == 0
    rng = np.random.default_rng(11)
    cost, use, budget, start, alive = _core(rng, 6, 1, 1000)
    costs = _brute(cost, use, budget, start, alive)
    best = costs[0] if costs else 10**9
    known = choicebb.Prices([np.array([np.nan]), np.array([-5.0])])
    _check(cost, use, budget, start, alive, best - 1, False, known)
