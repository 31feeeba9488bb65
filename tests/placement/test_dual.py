"""The Lagrangian prices (dual.py) against GLOP's LP relaxation, and the repaired LP rounding (engine's
incumbent) against the budgets, on the bench's instance families (real GLOP / CP-SAT, no fakes)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from placement import engine
from placement.decompose import prepare
from placement.dual import prices
from placement.families import instance
from placement.model import parse_problem

CASES = [("chains", {}), ("chains-tight", {}), ("mesh", {}), ("background", {}), ("latency", {}),
         ("pinned", {}), ("two-snics", {}), ("chains", {"snics": 3})]  # fmt: skip


def _groups(name: str, overrides: dict, seed: int = 0):
    gr = prepare(parse_problem(instance(name, 150, seed, **overrides)))
    assert gr is not None and gr.n_groups
    return gr


@pytest.mark.parametrize(("name", "overrides"), CASES)
def test_prices_give_the_lp_bound(name, overrides):
    gr = _groups(name, overrides)
    alive = np.ones(len(gr.cost), dtype=bool)
    lam_lp, _, _ = engine._lp(gr, alive, gr.cost, [])
    lb_lp, den_lp, _ = engine._bound(gr, alive, gr.cost, lam_lp, [], np.zeros(0))
    pr = prices(gr.use, gr.budget, gr.cost, gr.start, alive, time.monotonic() + 30)
    assert pr is not None and (pr.lam >= 0).all()
    lb, den, d = engine._bound(gr, alive, gr.cost, pr.lam, [], np.zeros(0))
    lp, ours = lb_lp / den_lp, lb / den
    assert abs(ours - lp) <= 1e-6 * abs(lp) + 1, (name, ours, lp)
    assert (d[alive] >= 0).all()
    # The fractional solution: one unit per group, within every budget (up to float rounding).
    sums = np.add.reduceat(pr.y, gr.start[:-1])
    assert np.allclose(sums, 1.0, atol=1e-6)
    used = pr.y @ gr.use.astype(float)
    assert (used <= np.array(gr.budget, dtype=float) + 1e-6 * np.abs(gr.budget).max()).all()


@pytest.mark.parametrize(("name", "overrides"), CASES)
def test_repaired_rounding_fits_every_budget_and_is_not_below_the_bound(name, overrides):
    gr = _groups(name, overrides, seed=1)
    alive = np.ones(len(gr.cost), dtype=bool)
    pr = prices(gr.use, gr.budget, gr.cost, gr.start, alive, time.monotonic() + 30)
    chosen = engine._greedy(gr, pr.y, alive)
    assert chosen is not None
    idx = np.array(chosen)
    assert (np.searchsorted(gr.start, idx, side="right") - 1 == np.arange(gr.n_groups)).all()
    assert engine._fits(gr, chosen)
    lb, den, _ = engine._bound(gr, alive, gr.cost, pr.lam, [], np.zeros(0))
    assert den * engine._sum(gr.cost, chosen) >= lb


def test_no_prices_when_a_group_has_no_configuration_left():
    gr = _groups("chains", {})
    alive = np.ones(len(gr.cost), dtype=bool)
    alive[gr.start[3] : gr.start[4]] = False
    assert prices(gr.use, gr.budget, gr.cost, gr.start, alive, time.monotonic() + 30) is None


def test_repair_reports_a_budget_nothing_can_meet():
    gr = _groups("chains", {})
    gr.budget = [-1] + list(gr.budget[1:])  # no placement can use less than nothing of the first row
    y = np.zeros(len(gr.cost))
    assert engine._greedy(gr, y, np.ones(len(gr.cost), dtype=bool)) is None


@pytest.mark.parametrize(("name", "overrides"), [("long", {}), ("chains-tight", {}), ("background", {})])
def test_reduced_cost_row_keeps_the_optimum_and_nothing_cheaper(name, overrides):
    # The engine adds sum(d) <= den x asked - lb to each "cost <= asked?" question: at the exact optimum
    # the question with the row must stay feasible, one unit below it infeasible (CP-SAT, real).
    gr = _groups(name, overrides, seed=2)
    oc = engine.solve_groups(gr, time.monotonic() + 60, gap_limit=0.0)
    assert oc.status == "optimal"
    opt = engine._sum(gr.cost, oc.chosen)
    alive = np.ones(len(gr.cost), dtype=bool)
    lam, _, _ = engine._prices(gr, alive, time.monotonic() + 10)
    lb, den, d = engine._bound(gr, alive, gr.cost, lam, [], np.zeros(0))
    for asked, expect in ((opt, "feasible"), (opt - 1, "infeasible")):
        core = engine._Core(gr, alive, 1, 1)
        core.m.add(core.objective(gr.cost) <= asked - core.const(gr.cost))
        core.add_reduced_cut(d, den * asked - lb)
        status, chosen, _, _ = core.solve(time.monotonic() + 60, oc.chosen if expect == "feasible" else None)
        assert (status in ("optimal", "feasible")) == (expect == "feasible"), (asked, status)
        if chosen is not None:
            assert engine._sum(gr.cost, chosen) <= asked
