"""Defects a third, independent instance generator found (bench/placement/third.py), each on its reproducer
under tests/placement/data/ (see also test_huge_prices.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import placement.engine as engine
from placement import parse_problem, solve

DATA = Path(__file__).parent / "data"


def _load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


@pytest.mark.parametrize("backend", ["cpsat", "mip"])
def test_an_slo_is_named_not_the_move_budget(backend):
    """Infeasible by chain0's SLO with or without the move budget: the reason named max_moves and the
    capacity / PCIe budgets (diagnose answered the move budget before any SLO check)."""
    out = solve(parse_problem(_load("third-max-moves-slo-reason.json")), solver=backend, max_moves=2)
    assert out["status"] == "infeasible"
    assert "chain0" in out["reason"] and "max_moves" not in out["reason"], out["reason"]


def test_the_move_budget_is_named_when_it_binds():
    """Feasible without max_moves (two of five NFs must leave the full sNIC), infeasible within one move."""
    out = solve(parse_problem(_load("third-max-moves-overflow.json")), max_moves=1)
    assert out["status"] == "infeasible"
    assert out["reason"].startswith("no placement within max_moves=1 meets the capacity and PCIe budgets")
    assert solve(parse_problem(_load("third-max-moves-overflow.json")))["status"] == "optimal"


def _counted(monkeypatch, name: str) -> list[int]:
    """engine.<name> wrapped to append to the returned list on each call."""
    calls: list[int] = []
    real = getattr(engine, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, name, counted)
    return calls


def test_fruitless_shakes_stop(monkeypatch):
    """The 39-vertex draw's incumbent is optimal at once but its Lagrangian bound 31 % below: the local
    search shook (cost-neutral exchanges, each descended) for the whole time limit and answered
    `feasible`. Now at most SHAKE_FRUITLESS changed shakes in a row without a gain per local search."""
    calls = _counted(monkeypatch, "shake")
    improved = _counted(monkeypatch, "_improved")
    out = solve(parse_problem(_load("third-swaps-box-39.json")), time_limit=10)
    assert out["status"] == "optimal" and out["tiebreak"] == "proven"
    mip = solve(parse_problem(_load("third-swaps-box-39.json")), solver="mip", time_limit=10)
    assert abs(out["host_cost"] - mip["host_cost"]) <= 1e-6 * max(1.0, abs(mip["host_cost"]))
    per_search = engine.SHAKE_FRUITLESS + engine.SHAKE_MISSES
    assert len(calls) <= per_search * len(improved), (len(calls), len(improved))


def _passes(monkeypatch) -> list[int]:
    """engine.prices wrapped: the evaluations (passes) of each call, in order."""
    seen: list[int] = []
    real = engine.prices

    def counted(*args, **kwargs):
        pr = real(*args, **kwargs)
        seen.append(-1 if pr is None else pr.passes)
        return pr

    monkeypatch.setattr(engine, "prices", counted)
    return seen


def test_a_budget_zero_row_needs_few_price_passes(monkeypatch):
    """Draw 5237 (9 vertices drawn): the sNIC's memory is 0 and every NF needs some, so every configuration
    placing an NF there is in no placement. Kept alive (the rows as prepared), the budget-0 row was a flat
    direction of the Lagrangian dual: dual.prices ran all of its 200 passes (0.05 CPU s where the MIP takes
    0.01). engine._tightened drops those configurations (a use above the row's room): one pass."""
    seen = _passes(monkeypatch)
    out = solve(parse_problem(_load("third-dual-passes-9.json")))
    assert out["status"] == "optimal" and out["tiebreak"] == "proven"
    assert seen and max(seen) <= 5, seen
    mip = solve(parse_problem(_load("third-dual-passes-9.json")), solver="mip")
    assert abs(out["host_cost"] - mip["host_cost"]) <= 1e-6 * max(1.0, abs(mip["host_cost"]))
    # The same answer with the rows as prepared, but the prices' loop then runs to its cap.
    seen.clear()
    monkeypatch.setattr(engine, "TIGHTEN", False)
    again = solve(parse_problem(_load("third-dual-passes-9.json")))
    assert again["status"] == "optimal" and again["host_cost"] == out["host_cost"]
    assert max(seen) > 5, seen
