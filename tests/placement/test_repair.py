"""engine._fit (the repair's fitting steps on kept per-switch arrays) against the plain per-step formula, on
seeded instances."""

from __future__ import annotations

import numpy as np
import pytest

from placement.decompose import prepare
from placement.engine import _first_least, _fit
from placement.families import instance
from placement.model import parse_problem


def _plain_fit(gr, chosen: np.ndarray, ok: np.ndarray, grp: np.ndarray, budget: np.ndarray):
    """The repair's fitting steps as first written, every array gathered anew from the choice at each step:
    (the fitted choice, its use) or None."""
    chosen = chosen.copy()
    used = gr.use[chosen].sum(0)
    scale = np.maximum(np.abs(budget), 1).astype(float)
    for _ in range(200):
        over = np.maximum(used - budget, 0)
        if not over.any():
            return chosen, used
        cur = chosen[grp]
        after = np.maximum(used[None, :] - gr.use[cur] + gr.use - budget[None, :], 0)
        gain = ((over[None, :] - after) / scale[None, :]).sum(1)
        extra = (gr.cost - gr.cost[cur]).astype(float)
        score = np.where(ok & (gain > 0), gain / (np.maximum(extra, 0) + 1.0), -1.0)
        k = int(np.argmax(score))
        if score[k] <= 0:
            return None
        used += gr.use[k] - gr.use[chosen[grp[k]]]
        chosen[grp[k]] = k
    return None


def _fitted(gr, chosen: np.ndarray, ok: np.ndarray, grp: np.ndarray, budget: np.ndarray):
    """engine._fit on a copy of `chosen`: (the fitted choice, its use) or None."""
    chosen = chosen.copy()
    used = gr.use[chosen].sum(0)
    if (used > budget).any() and not _fit(gr, chosen, used, ok, grp, budget, 200):
        return None
    return chosen, used


# (fanio and mesh with three sNICs: groups of hundreds of configurations, many scored positive each step: the
# bar of the previous step's best few decides which are scored)
@pytest.mark.parametrize(
    ("family", "snics"),
    [("long", 1), ("background", 1), ("mesh", 1), ("pinned", 1), ("chains-tight", 1), ("four-snics", 4),
     ("fanio", 3), ("mesh", 3)],
)  # fmt: skip
def test_fit_matches_plain_formula(family: str, snics: int) -> None:
    for seed in range(4):
        gr = prepare(parse_problem(instance(family, 300, seed, snics=snics)))
        assert gr is not None
        budget = np.array(gr.budget, dtype=np.int64)
        grp = np.repeat(np.arange(gr.n_groups), np.diff(gr.start))
        rng = np.random.default_rng(seed)
        # Random starts (most over the budgets: many repair steps) and the most-using one per group.
        starts = [
            gr.start[:-1] + (rng.random(gr.n_groups) * np.diff(gr.start)).astype(np.int64) for _ in range(3)
        ]
        heavy = np.lexsort((-gr.use.sum(1), grp))[gr.start[:-1]]
        for i, start in enumerate([*starts, heavy]):
            ok = np.ones(len(gr.cost), dtype=bool) if i % 2 == 0 else rng.random(len(gr.cost)) < 0.8
            ok[start] = True
            got, want = _fitted(gr, start, ok, grp, budget), _plain_fit(gr, start, ok, grp, budget)
            assert (got is None) == (want is None)
            if got is not None:
                assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()


def test_first_least_matches_lexsort() -> None:
    """engine._first_least (per group the first configuration of least keys, by masked minima) against the
    sort it replaces, on random groups with ties, -0.0, infinities, the int64 maximum and NaN keys."""
    rng = np.random.default_rng(0)
    for t in range(500):
        sizes = rng.integers(1, 9, int(rng.integers(1, 40)))
        start = np.concatenate([[0], np.cumsum(sizes)])
        n = int(start[-1])
        grp = np.repeat(np.arange(len(sizes)), sizes)
        ok = rng.random(n) < 0.7
        y = rng.integers(0, 3, n) / 2.0
        y[rng.random(n) < 0.2] = -0.0
        if t % 7 == 0:
            y[rng.random(n) < 0.1] = np.inf
        if t % 11 == 0:
            y[rng.random(n) < 0.1] = np.nan
        cost = rng.integers(0, 4, n)
        if t % 5 == 0:
            cost[rng.random(n) < 0.3] = np.iinfo(np.int64).max
        want = np.lexsort((cost, -y, ~ok, grp))[start[:-1]]
        assert _first_least(start, ~ok, -y, cost).tolist() == want.tolist()
        assert _first_least(start, cost, -y).tolist() == np.lexsort((-y, cost, grp))[start[:-1]].tolist()
