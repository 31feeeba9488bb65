"""engine._repair (kept per-switch arrays) against the plain per-step formula, on seeded instances."""

from __future__ import annotations

import numpy as np
import pytest

from placement.decompose import prepare
from placement.engine import _reduce, _repair
from placement.families import instance
from placement.model import parse_problem


def _plain_repair(
    gr, chosen: np.ndarray, ok: np.ndarray, grp: np.ndarray, budget: np.ndarray
) -> list[int] | None:
    """The repair as first written: every array gathered anew from the choice at each step."""
    chosen = chosen.copy()
    used = gr.use[chosen].sum(0)
    scale = np.maximum(np.abs(budget), 1).astype(float)
    for _ in range(200):
        over = np.maximum(used - budget, 0)
        if not over.any():
            break
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
    else:
        return None
    if (used > budget).any():
        return None
    for _ in range(5):
        cur = chosen[grp]
        fits = ok & ((used[None, :] - gr.use[cur] + gr.use) <= budget[None, :]).all(1)
        saving = np.where(fits, gr.cost[cur] - gr.cost, 0)
        best = _reduce(saving, gr.start, np.maximum)
        gs = np.nonzero(best > 0)[0]
        if not len(gs):
            break
        n = len(saving)
        pick = _reduce(
            np.where(saving == np.repeat(best, np.diff(gr.start)), np.arange(n), n), gr.start, np.minimum
        )
        taken = 0
        for g in gs[np.argsort(-best[gs], kind="stable")].tolist():
            k = int(pick[g])
            new_used = used + gr.use[k] - gr.use[chosen[g]]
            if (new_used <= budget).all():
                used, chosen[g] = new_used, k
                taken += 1
        if not taken:
            break
    return chosen.tolist()


@pytest.mark.parametrize("family", ["long", "background", "mesh", "pinned", "chains-tight", "four-snics"])
def test_repair_matches_plain_formula(family: str) -> None:
    for seed in range(4):
        gr = prepare(parse_problem(instance(family, 300, seed)))
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
            assert _repair(gr, start, ok, grp, budget) == _plain_repair(gr, start, ok, grp, budget)
