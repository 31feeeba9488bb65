"""engine._tightened: the budget rows' coefficient tightening and the configurations no placement meeting
a row can use. Exact: the selections (one configuration per group) meeting every row are the same before
and after, checked by brute force on random groups; the LP bound rises where one configuration alone
covers a row's whole excess (third draw 3007's structure)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import random

import numpy as np
import pytest

from placement import engine
from placement.model import parse_problem
from placement.solver import solve


@dataclasses.dataclass
class _Groups:
    start: np.ndarray
    cost: np.ndarray
    use: np.ndarray
    budget: list[int]

    @property
    def n_groups(self) -> int:
        return len(self.start) - 1


def _random_groups(rng: random.Random) -> _Groups:
    sizes = [rng.randint(1, 4) for _ in range(rng.randint(1, 5))]
    n, rows = sum(sizes), rng.randint(1, 3)
    lo = -5 if rng.random() < 0.2 else 0
    use = np.array([[rng.randint(lo, 20) for _ in range(rows)] for _ in range(n)], dtype=np.int64)
    if rng.random() < 0.5:  # an elephant: one configuration using far more than the rest
        use[rng.randrange(n), rng.randrange(rows)] = rng.randint(30, 200)
    top = int(np.abs(use).max()) * len(sizes)  # (at least every group's most)
    budget = [rng.randint(-3, int(top) + 5) for _ in range(rows)]
    start = np.array([0, *np.cumsum(sizes).tolist()], dtype=np.int64)
    return _Groups(start, np.array([rng.randint(0, 9) for _ in range(n)], dtype=np.int64), use, budget)


def _selections(gr: _Groups):
    return itertools.product(*[range(gr.start[g], gr.start[g + 1]) for g in range(gr.n_groups)])


def _meets(use: np.ndarray, budget: list[int], sel) -> bool:
    return all(int(use[list(sel), r].sum()) <= b for r, b in enumerate(budget))


@pytest.mark.parametrize("seed", range(300))
def test_same_selections_meet_the_rows(seed):
    rng = random.Random(seed)
    gr = _random_groups(rng)
    new, alive = engine._tightened(gr)
    assert (new.use >= gr.use).all()  # (raised only)
    for sel in _selections(gr):
        before = _meets(gr.use, gr.budget, sel)
        assert before == _meets(new.use, new.budget, sel), (seed, sel)
        if before:
            assert alive[list(sel)].all(), (seed, sel)  # a configuration of a placement stays alive


def _knapsack(elephant: int) -> _Groups:
    """One row of budget 10; items of use 4 (cost 4 on the host side), and an elephant of use `elephant`."""
    uses = [[0], [4]] * 5 + [[0], [elephant]]
    cost = [4, 0] * 5 + [12, 0]
    return _Groups(
        np.arange(0, 13, 2, dtype=np.int64),
        np.array(cost, dtype=np.int64),
        np.array(uses, dtype=np.int64),
        [10],
    )


def test_elephant_row_tightened():
    # the five small items and the elephant use 20 + 180 of the budget; budget 10: need 190 > 180, nothing
    # raised (and the elephant's sNIC side, 180 > 10, is in no placement)
    new, alive = engine._tightened(_knapsack(180))
    assert (new.use == _knapsack(180).use).all() and not alive[11] and alive[:11].all()
    gr = dataclasses.replace(_knapsack(180), budget=[190])  # need 10: the elephant's host side 0 -> 170
    new, alive = engine._tightened(gr)
    assert new.use[10, 0] == 170 and new.use[11, 0] == 180 and alive.all()
    assert (new.use[:10] == gr.use[:10]).all()


def test_lp_bound_rises_on_an_elephant():
    """The Lagrangian bound the engine computes, before and after: an elephant whose sNIC side alone exceeds
    the row's excess made the LP pay a fraction of it (old engine: no _tightened)."""
    gr = dataclasses.replace(_knapsack(180), budget=[190])

    def bound(g):
        lam, _, _ = engine._lp(g, np.ones(len(g.cost), dtype=bool), g.cost, [])
        lb, den, _ = engine._bound(g, np.ones(len(g.cost), dtype=bool), g.cost, lam, [], np.zeros(0))
        return lb / den

    before, after = bound(gr), bound(engine._tightened(gr)[0])
    best = min(sum(int(gr.cost[c]) for c in sel) for sel in _selections(gr) if _meets(gr.use, gr.budget, sel))
    # LP before: the small items, then 170/180 of the elephant (2/3); after: 10 (the elephant's sNIC side
    # leaves 10 for the small items); the optimum 12
    assert before == pytest.approx(2 / 3) and after == pytest.approx(10) and best == 12


def test_small_elephants_agree_with_mip():
    """Third draw 3007's structure (5,000 vertices: too slow here) at small scale: one sNIC, PCIe loose, a
    few elephants among many small NFs; the engine and the MIP agree on the proven host cost."""
    rng = random.Random(7)
    nodes = [{"id": "vm", "kind": "vm"}, {"id": "p0", "kind": "port", "pinned": "snic0"}]
    edges = []
    for i in range(40):
        g = rng.choice([0.5, 1, 2, 3]) if i % 10 else rng.choice([40, 60, 90])
        nodes.append({"id": f"nf{i}", "kind": "nf", "r_host": 1, "r_nic": rng.choice([0.8, 1, 1.2])})
        edges += [{"src": "p0", "dst": f"nf{i}", "gbps": g}, {"src": f"nf{i}", "dst": "vm", "gbps": g}]
    obj = {"nodes": nodes, "edges": edges, "snics": [{"id": "snic0", "capacity": 150, "pcie_gbps": 10000}]}
    ours = solve(parse_problem(obj), time_limit=20)
    mip = solve(parse_problem(json.loads(json.dumps(obj))), time_limit=20, solver="mip")
    assert ours["status"] == mip["status"] == "optimal"
    assert ours["host_cost"] == pytest.approx(mip["host_cost"], rel=2e-5)
