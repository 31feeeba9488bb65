"""The plain model (solver._Model, CP-SAT) leaves out a budget row that every 0/1 point meets (PCIe: with the
crossing indicators only it uses, made for the tie-break by crossings(); a chain's latency SLO: with its
indicators): the same host cost and the same tie-break (least PCIe, then moves) as brute force and as the model
with every row; a row that can bind is always kept."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from fractions import Fraction

import pytest

from bench.placement.foreign import instance as foreign_instance
from bench.placement.foreign import large_instance
from placement import parse_problem, solver
from placement.evaluate import evaluate, pcie_total
from placement.model import Problem
from placement.solver import GAP_LIMIT, Options, _Model, solve

SMALL = 4096  # placements enumerated per instance


def _always_met_off(monkeypatch) -> None:
    monkeypatch.setattr(solver._Model, "_met", staticmethod(lambda spec, ints: False))


def _loose(p: Problem, factor: int) -> Problem:
    """`p` with every PCIe budget and SLO multiplied by `factor` (large: those rows can no longer bind)."""
    snics = [replace(s, pcie_gbps=s.pcie_gbps * factor) for s in p.snics]
    chains = [c if c.latency_us is None else replace(c, latency_us=c.latency_us * factor) for c in p.chains]
    return Problem(p.nodes, p.edges, snics, p.pcie_model, chains=chains)


def _brute(p: Problem) -> tuple[Fraction, Fraction] | None:
    """(least host cost, least PCIe Gbit/s among the placements of that cost) over every feasible placement."""
    best = None
    for combo in itertools.product(*(p.allowed(n) for n in p.nodes)):
        ev = evaluate(p, {n.id: loc for n, loc in zip(p.nodes, combo, strict=True)})
        if ev.feasible:
            key = (ev.host_cost, pcie_total(ev))
            best = key if best is None or key < best else best
    return best


def _small(count: int) -> list[Problem]:
    out = []
    for seed in itertools.count():
        p = parse_problem(foreign_instance(seed))
        if math.prod(len(p.allowed(n)) for n in p.nodes) <= SMALL and p.edges:
            out.append(p)
            if len(out) == count:
                return out
    return out


def _always_met(spec: list[tuple[Fraction, object]], budget: Fraction) -> bool:
    """_Model._met on the working integers add_row gives the row."""
    return _Model._met(spec, solver._scale([c for c, _ in spec] + [budget], row=True)[0])


def test_always_met_is_exact_at_the_budget():
    met = _always_met
    assert met([(Fraction(1, 3), None), (Fraction(2, 3), None)], Fraction(1))  # both on: exactly the budget
    assert not met([(Fraction(1, 3), None), (Fraction(2, 3), None)], Fraction(999, 1000))
    assert met([(Fraction(5), 1), (Fraction(-2), None), (Fraction(3), None)], Fraction(8))  # constant 5, +3
    assert not met([(Fraction(5), 1), (Fraction(3), None)], Fraction(7))
    assert met([(Fraction(5), 0), (Fraction(3), None)], Fraction(3))  # a constant 0 adds nothing


@pytest.mark.parametrize("factor", [1, 10**6])
@pytest.mark.parametrize("k", range(12))
def test_plain_model_matches_brute_force_with_rows_left_out(k, factor):
    p = _small(12)[k]
    if factor != 1:
        p = _loose(p, factor)
    best = _brute(p)
    m = _Model(p, Options())
    if factor != 1 and any(e.gbps for e in p.edges) and len(p.snics) and any(len(a) > 1 for a in m.allowed):
        assert m.pending or not m.pcie_terms  # the loose PCIe rows are left out, their indicators deferred
    out = solve(p, time_limit=20, engine=False)
    if best is None:
        assert out["status"] == "infeasible"
        return
    assert out["status"] == "optimal"
    assert out["host_cost"] == pytest.approx(float(best[0]), rel=2 * GAP_LIMIT, abs=1e-9)
    if out.get("tiebreak") == "proven":
        ev = evaluate(p, out["placement"])
        assert ev.host_cost <= best[0] * (1 + 2 * GAP_LIMIT)
        if ev.host_cost == best[0]:
            assert pcie_total(ev) == best[1]


@pytest.mark.parametrize("seed,size,snics", [(3, 200, 1), (6, 200, 1), (23, 200, 1), (28, 200, 1), (29, 200, 2),
                                             (4, 100, 2)])  # fmt: skip
def test_the_same_answers_as_the_model_with_every_row(monkeypatch, seed, size, snics):
    """Large draws with rows that cannot bind (PCIe both ways, one way, SLO rows; one and two sNICs): the same
    host cost and, tie-breaks proven, the same PCIe total as the model with every row."""
    obj = large_instance(seed, size, snics)
    p = parse_problem(obj)
    assert _Model(p, Options()).left_out
    ours = solve(p, time_limit=20, engine=False)
    _always_met_off(monkeypatch)
    assert not _Model(p, Options()).pending
    every = solve(parse_problem(obj), time_limit=20, engine=False)
    assert ours["status"] == every["status"] == "optimal"
    a, b = ours["host_cost"], every["host_cost"]
    assert abs(a - b) <= 2 * GAP_LIMIT * max(a, b, 1e-9), (a, b)
    if ours["tiebreak"] == every["tiebreak"] == "proven" and a == b:
        pa = sum(d["up"] + d["down"] for d in ours["pcie_gbps"].values())
        pb = sum(d["up"] + d["down"] for d in every["pcie_gbps"].values())
        assert pa == pytest.approx(pb, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("factor", [1, 2, 4, 16])
def test_a_row_left_out_is_met_by_every_placement(factor):
    """Every row the model leaves out holds at every placement (brute force), at budgets from tight to loose;
    and some are left out."""
    left = 0
    for p in _small(8):
        p = _loose(p, factor)
        m = _Model(p, Options())
        out = set(m.left_out)
        left += len(out)
        for combo in itertools.product(*(p.allowed(n) for n in p.nodes)):
            ev = evaluate(p, {n.id: loc for n, loc in zip(p.nodes, combo, strict=True)})
            for v in ev.violations:
                assert not any(v.startswith(name) for name in out), (v, out)
    assert left or factor == 1
