"""The proof's minimising step (engine._minimised): CP-SAT's own bound on the fixed core, used to prove the
incumbent or to raise the bisection's floor. Against brute force on small random multi-row instances: the
floor it returns is never above the least cost of any choice of cost <= p1 (so never above the optimum),
equal to it when CP-SAT ends proven with no slack; its placement fits and costs what it says; and the engine
that uses it on chains-tight (where the incumbent starts tens to hundreds of slacks above the LP bound) stays
within the gap limit of the exact optimum."""

from __future__ import annotations

import logging
import random
import time
from types import SimpleNamespace

import numpy as np
import pytest

from placement import engine, parse_problem
from placement.families import instance
from placement.solver import Options, prepare_within

from .test_swaps import _exact_best, _random_groups


def _groups(cost, use, budget, start) -> SimpleNamespace:
    """The fields of decompose.Groups that _Core and _bound read."""
    return SimpleNamespace(cost=cost, use=use, budget=[int(b) for b in budget], start=start,
                           n_groups=len(start) - 1, row_names=[f"row{r}" for r in range(len(budget))])  # fmt: skip


def _priced(rng: random.Random) -> SimpleNamespace:
    """A small random multi-row instance (test_swaps._random_groups) with its groups, an exact Lagrangian
    bound lb / den and reduced costs d at random prices, the feasible start `first` and its cost p, and
    the brute-force optimum `best`."""
    cost, use, budget, start, first = _random_groups(rng, rng.randint(1, 7), rng.randint(1, 3))
    gr = _groups(cost, use, budget, start)
    lam = np.array([rng.choice([0.0, rng.random()]) for _ in budget])  # any prices give an exact bound
    lb, den, d = engine._bound(gr, np.ones(len(cost), dtype=bool), cost, lam, [], np.zeros(0))
    p = engine._sum(cost, first)
    best = _exact_best(cost, use, budget, start)
    assert best is not None and best <= p
    return SimpleNamespace(cost=cost, use=use, budget=budget, start=start, first=first, gr=gr, lb=lb, den=den,
                           d=d, p=p, best=best)  # fmt: skip


def _assert_fits(t: SimpleNamespace, chosen: list[int]) -> None:
    """`chosen` takes one configuration of each group of `t` and fits every budget row."""
    ix = np.array(chosen)
    assert (np.searchsorted(t.start, ix, side="right") - 1 == np.arange(len(t.start) - 1)).all()
    assert (t.use[ix].sum(0) <= t.budget).all()


@pytest.mark.parametrize("stock", [False, True])
@pytest.mark.parametrize("whole", [False, True])
@pytest.mark.parametrize("seed", range(40))
def test_floor_never_above_the_optimum_and_exact_when_proven(seed, whole, stock, monkeypatch):
    """(whole: until the deadline, without the reduced-cost row; stock: the boxed one's stock-presolve run
    first, whose placement comes without a floor and never as "optimal")"""
    monkeypatch.setattr(engine, "STOCK_PLACEMENTS", stock)
    rng = random.Random(seed)
    t = _priced(rng)
    cost, d, lb, den, p1, best = t.cost, t.d, t.lb, t.den, t.p, t.best  # the feasible start is the incumbent
    alive = engine._within(d, den * p1 - lb)
    alive[np.array(t.first)] = True
    slack = rng.choice([0, 0, rng.randint(0, 10**11)])
    run = engine._Run()
    status, ch, floor_, _ = engine._minimised(
        t.gr, alive, d, lb, den, t.first, p1, slack, 1, time.monotonic() + 30, run, whole
    )
    if run.stock_found:
        assert floor_ is None and status == "feasible" and ch is not None
    else:
        assert floor_ is not None and floor_ <= best  # a valid lower bound on the optimum
    if ch is not None:
        _assert_fits(t, ch)
        assert best <= engine._sum(cost, ch) <= p1
    if status == "optimal":
        assert engine._sum(cost, ch) - floor_ <= slack
        if slack == 0:
            assert floor_ == best == engine._sum(cost, ch)


def test_floor_is_withheld_when_a_double_cannot_hold_it_exactly(monkeypatch):
    gr = _groups(np.array([2**53 + 1, 2**53 + 3], dtype=np.int64), np.zeros((2, 1), dtype=np.int64),
                 [0], np.array([0, 2]))  # fmt: skip
    monkeypatch.setattr(engine._Core, "solve", lambda self, *a, **k: ("feasible", [0], 2.0**53, 2.0**53))
    alive = np.ones(2, dtype=bool)
    d = np.array([0, 2], dtype=np.int64)
    out = engine._minimised(gr, alive, d, 0, 1, [0], 2**53 + 1, 1, 1, time.monotonic() + 30, engine._Run())
    assert out == ("feasible", [0], None, False)


@pytest.mark.parametrize(
    ("family", "size", "seed"),
    [("chains-tight", 250, 2), ("chains-tight", 250, 4), ("chains-tight", 250, 1), ("chains-tight", 250, 3),
     ("chains-tight", 300, 2), ("long", 150, 0), ("long", 150, 4), ("long", 150, 5), ("long", 100, 3)],
)  # fmt: skip
def test_engine_with_the_minimising_step_is_within_the_gap_of_the_exact_optimum(
    family, size, seed, caplog, monkeypatch
):
    """chains-tight and long with a gap limit: the incumbent starts far above the LP bound, so the
    minimising step runs (checked in the debug log; on long 150 seeds 0 and 4 from a core's proven optimum
    that is not the problem's, on long with a box of several questions); the answer is within the limit of
    the exact optimum (the engine at gap 0, where the step does not run). (chains-tight 150 seed 5 and 200
    seed 2 no longer get there: the two-rows bound proves them; the widened core kept off the narrow proof
    cores, where on long it now settles the incumbent first: test_widened.py.)"""
    monkeypatch.setattr(engine, "WIDEN_NARROW_CONFIGS", 10**9)
    gr = prepare_within(parse_problem(instance(family, size, seed)), Options(), time.monotonic())
    exact = engine.solve_groups(gr, time.monotonic() + 60)
    with caplog.at_level(logging.DEBUG, logger="placement.engine"):
        ours = engine.solve_groups(gr, time.monotonic() + 60, gap_limit=1e-5)
    assert any(r.getMessage().startswith("minimised") for r in caplog.records)
    assert exact.status == ours.status == "optimal"
    p_exact, p_ours = engine._sum(gr.cost, exact.chosen), engine._sum(gr.cost, ours.chosen)
    assert p_exact <= p_ours <= p_exact + 1e-5 * (gr.cost_const + p_ours)


@pytest.mark.parametrize(
    ("family", "size", "seed"),
    [("long", 100, 1), ("long", 150, 0), ("long", 150, 1), ("long", 100, 3), ("chains-tight", 150, 3),
     ("chains-tight", 60, 7), ("mesh", 100, 0), ("mesh", 60, 2), ("pinned", 100, 3), ("background", 60, 3),
     ("chains", 100, 2)],
)  # fmt: skip
@pytest.mark.parametrize("after_exact", [False, True])
def test_engine_through_the_whole_minimisation_is_within_the_gap_of_the_exact_optimum(
    family, size, seed, after_exact, caplog, monkeypatch
):
    """The minimisation until the deadline (on large cores far above the floor) forced on small ones
    (whole_from (0, 0): any gap, any core): it runs (debug log) and the answer is within the gap limit of
    the exact optimum (the engine at gap 0, where no minimisation runs). Either in place of the exact search
    (no core fits it) or after the exact search ran out of its box (at once: a box of one unit).
    (chains-tight 60 seed 1 no longer gets there: on the tightened rows, engine._tightened, the two-rows
    bound proves it; seed 7 does, with and without the tightening.)"""
    monkeypatch.setattr(engine, "WIDEN_NARROW_CONFIGS", 10**9)  # (its proven optimum would skip the step)
    monkeypatch.setattr(engine, "_regrow", lambda *_: False)  # (nor the grown core: the floor may prove it)
    gr = prepare_within(parse_problem(instance(family, size, seed)), Options(), time.monotonic())
    exact = engine.solve_groups(gr, time.monotonic() + 60)
    if after_exact:  # (and no boxed minimisation before the questions)
        monkeypatch.setattr(engine, "EXACT_WORK", 1)
        monkeypatch.setattr(engine, "MINIMISE_MAX_VARS", 0)
    else:
        monkeypatch.setattr(engine, "EXACT_MAX_GROUPS", 0)
    with caplog.at_level(logging.DEBUG, logger="placement.engine"):
        ours = engine.solve_groups(gr, time.monotonic() + 60, gap_limit=1e-5, whole_from=(0, 0))
    said = [r.getMessage() for r in caplog.records]
    # (after the exact search: unless the floor proved the incumbent before any question was needed)
    assert any(m.startswith("minimised whole") for m in said) or (
        after_exact and not any(m.startswith("cost <=") for m in said)
    )
    assert exact.status == ours.status == "optimal"
    p_exact, p_ours = engine._sum(gr.cost, exact.chosen), engine._sum(gr.cost, ours.chosen)
    assert p_exact <= p_ours <= p_exact + 1e-5 * (gr.cost_const + p_ours)
    assert (gr.use[np.array(ours.chosen)].sum(0) <= gr.budget).all()
