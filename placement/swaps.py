"""Exact local search for a cheaper incumbent: switches of one, two or three groups at once (numpy).

The LP (= Lagrangian) bound of a placement with several sNICs often sits very close to the optimum,
but an integer placement that close has to fill every binding budget row almost exactly: a subset-sum over
many groups that CP-SAT, on working integers of 2^44, finds only after tens of seconds. Each round here
takes the best improving move of: one group's switch; two groups' switches (one frees room in a row, the
other uses it for a saving); or a saving switch that does not fit alone plus the best pair of *near-free*
switches (reduced cost, from the Lagrangian prices, small) that makes room for it. Exact int64
throughout, so every result is a feasible placement (an incumbent only: optimality is proven elsewhere, by
the bound).
"""

from __future__ import annotations

import logging
import time

import numpy as np

log = logging.getLogger(__name__)

PAIR_CELLS = 2_000_000  # largest pair matrix one step builds (memory: a few of these)
SEEDS = 16  # savers tried per round for a three-group move


def _best_pair(d_cost: np.ndarray, d_use: np.ndarray, grp: np.ndarray, left: np.ndarray, right: np.ndarray,
               room: np.ndarray) -> tuple[int, int, int]:  # fmt: skip
    """The pair (a in `left`, b in `right`, of two groups) of least summed d_cost that fits `room`:
    (d_cost sum, a, b), or (0, -1, -1) when no pair fits."""
    if not len(left) or not len(right):
        return 0, -1, -1
    if len(left) * len(right) > PAIR_CELLS:
        left = left[np.argsort(d_cost[left], kind="stable")[: max(1, PAIR_CELLS // len(right))]]
    pair = d_cost[left][:, None] + d_cost[right][None, :]
    ok = grp[left][:, None] != grp[right][None, :]
    for r in range(d_use.shape[1]):
        ok &= (d_use[left, r][:, None] + d_use[right, r][None, :]) <= room[r]
    if not ok.any():
        return 0, -1, -1
    flat = int(np.argmin(np.where(ok, pair, np.iinfo(np.int64).max)))
    a, b = divmod(flat, len(right))
    return int(pair.flat[flat]), int(left[a]), int(right[b])


def improve(cost: np.ndarray, use: np.ndarray, budget: np.ndarray, start: np.ndarray, chosen: list[int],
            allowed: np.ndarray, target: int, deadline: float, near_free: np.ndarray | None = None,
            rounds: int = 2000) -> list[int]:  # fmt: skip
    """`chosen` (one global configuration index per group, within `budget`) made cheaper by switches to
    `allowed` configurations until its cost is <= `target`, no move improves it, `rounds` rounds passed or
    `deadline` (monotonic) passed. `near_free` (a mask of configurations) are the partners of the
    three-group moves (none without it). Returns the (feasible) result."""
    n_groups = len(start) - 1
    if not n_groups:
        return list(chosen)
    sel = np.array(chosen, dtype=np.int64)
    grp_all = np.repeat(np.arange(n_groups), np.diff(start))
    used = use[sel].sum(0)
    total = int(cost[sel].sum())
    idx = np.arange(len(cost))
    for _ in range(rounds):
        if total <= target or time.monotonic() > deadline:
            break
        cand = np.nonzero(allowed & (idx != sel[grp_all]))[0]
        if not len(cand):
            break
        grp = grp_all[cand]
        d_cost = cost[cand] - cost[sel[grp]]
        d_use = use[cand] - use[sel[grp]]
        room = budget - used
        fits = (d_use <= room).all(1)
        single = np.where(fits & (d_cost < 0), d_cost, 0)
        k = int(np.argmin(single))
        gain, move = int(single[k]), ([k] if single[k] < 0 else [])
        everyone = np.arange(len(cand))
        savers = np.nonzero(d_cost < 0)[0]
        g2, a, b = _best_pair(d_cost, d_use, grp, savers, everyone, room)
        if a >= 0 and g2 < gain:
            gain, move = g2, [a, b]
        if not move and near_free is not None:
            # A saving switch that needs room, or a near-free one, completed by two near-free switches of
            # other groups (finer sums than a pair can reach: the last units of a binding row).
            partners = np.nonzero(near_free[cand])[0]
            blocked = savers[~fits[savers]]
            # The savers that come closest to fitting (least excess over the rows, each relative to its
            # budget), those that save most, and the near-free switches that save most.
            scale = np.maximum(np.abs(budget), 1).astype(float)
            excess = (np.maximum(d_use[blocked] - room, 0) / scale).sum(1)
            seeds = np.concatenate([blocked[np.argsort(excess, kind="stable")[:SEEDS]],
                                    blocked[np.argsort(d_cost[blocked], kind="stable")[:SEEDS]],
                                    partners[np.argsort(d_cost[partners], kind="stable")[: 2 * SEEDS]]])  # fmt: skip
            for s in np.unique(seeds).tolist():
                if time.monotonic() > deadline:
                    break
                others = partners[grp[partners] != grp[s]]
                g3, a, b = _best_pair(d_cost, d_use, grp, others, others, room - d_use[s])
                if a >= 0 and g3 + int(d_cost[s]) < gain:
                    gain, move = g3 + int(d_cost[s]), [s, a, b]
        if not move:
            break
        log.debug("swaps: %d-group move, cost %d -> %d", len(move), total, total + gain)
        for k in move:
            c, g = int(cand[k]), int(grp[k])
            used += use[c] - use[sel[g]]
            sel[g] = c
        total += gain
    assert (used <= budget).all() and total == int(cost[sel].sum())
    return sel.tolist()
