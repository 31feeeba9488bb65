"""Exact local search for a cheaper incumbent: switches of one, two or three groups at once (numpy).

The LP (= Lagrangian) bound of a placement with several sNICs often sits very close to the optimum,
but an integer placement that close has to fill every binding budget row almost exactly: a subset-sum over
many groups that CP-SAT, on working integers of 2^44, finds only after tens of seconds. Each round here
takes the best improving move of: one group's switch; two groups' switches (one frees room in a row, the
other uses it for a saving); or a saving switch that does not fit alone plus the best pair of *near-free*
switches (reduced cost, from the Lagrangian prices, small) that makes room for it (the first such
saver found, not the best: each saver's search is a pass over every pair). Exact int64
throughout, so every result is a feasible placement (an incumbent only: optimality is proven elsewhere, by
the bound).
"""

from __future__ import annotations

import logging

import numpy as np

from placement.meet import best_within, sums
from placement.work import Work

log = logging.getLogger(__name__)

PAIR_CELLS = 2_000_000  # largest pair matrix one step builds (memory: a few of these)
SEEDS = 16  # savers tried per round for a three-group move
SHAKES = 4  # random cost-neutral exchanges per shake
FILL_ITEMS = 24  # switches in the meet-in-the-middle of `fill` (2 x 2 ** 12 subset sums)
# Work (placement/work.py) is charged in cells evaluated (configurations, pairs) plus CALL per step: a
# step's fixed cost (numpy calls on small arrays) in cells.
CALL = 4096
BLOCK_CELLS = 1 << 16  # pairs one block of _cheapest_fitting builds (a few cache-sized matrices)


class _Pairs:
    """Every pair (a in `left`, b in `right`, of two groups) with its summed d_cost and, row by row when
    first asked, its summed d_use: built once, then asked for the cheapest pair fitting several rooms
    (the three-group moves ask once per saver)."""

    def __init__(self, d_cost: np.ndarray, d_use: np.ndarray, grp: np.ndarray, left: np.ndarray,
                 right: np.ndarray, work: Work):  # fmt: skip
        left = _capped(d_cost, left, len(right))
        self.left, self.right, self.d_use, self.work = left, right, d_use, work
        self.cells = len(left) * len(right)
        work.charge(CALL + 3 * self.cells)
        self.cost = d_cost[left][:, None] + d_cost[right][None, :]
        self.other = grp[left][:, None] != grp[right][None, :]
        self.grp_l, self.grp_r = grp[left], grp[right]
        # A row can refuse a pair only where its largest pair sum passes the room: others are skipped.
        self.top = d_use[left].max(0) + d_use[right].max(0) if len(left) and len(right) else None
        self.rows: dict[int, np.ndarray] = {}

    def fitting(self, room: np.ndarray, skip_group: int = -1) -> np.ndarray:
        """Mask (left x right) of the pairs that fit `room`, neither of group `skip_group`."""
        ok = self.other
        if skip_group >= 0:
            ok = ok & (self.grp_l != skip_group)[:, None] & (self.grp_r != skip_group)[None, :]
        passes = 1  # matrices of `cells` built or compared
        for r in np.nonzero(self.top > room)[0].tolist():
            if r not in self.rows:
                self.rows[r] = self.d_use[self.left, r][:, None] + self.d_use[self.right, r][None, :]
                passes += 1
            ok = ok & (self.rows[r] <= room[r])
            passes += 2
        self.work.charge(CALL + passes * self.cells)
        return ok

    def best(self, room: np.ndarray, skip_group: int = -1) -> tuple[int, int, int]:
        """(d_cost sum, a, b) of the cheapest pair that fits `room` (neither of group `skip_group`), or
        (0, -1, -1) when none does."""
        if self.top is None:
            return 0, -1, -1
        ok = self.fitting(room, skip_group)
        if not ok.any():
            return 0, -1, -1
        self.work.charge(2 * self.cells)
        flat = int(np.argmin(np.where(ok, self.cost, np.iinfo(np.int64).max)))
        a, b = divmod(flat, len(self.right))
        return int(self.cost.flat[flat]), int(self.left[a]), int(self.right[b])


def _best_pair(d_cost: np.ndarray, d_use: np.ndarray, grp: np.ndarray, left: np.ndarray, right: np.ndarray,
               room: np.ndarray, work: Work) -> tuple[int, int, int]:  # fmt: skip
    """The pair (a in `left`, b in `right`, of two groups) of least summed d_cost that fits `room`:
    (d_cost sum, a, b), the first in `left` x `right` order among equals, or (0, -1, -1) when no pair
    fits. The answer and the work charged are those of ``_Pairs(...).best(room)``, which builds every
    pair; here blocks of `left`, cheapest first, only until no later block can be cheaper."""
    if not len(left) or not len(right):
        return 0, -1, -1
    left = _capped(d_cost, left, len(right))
    cells = len(left) * len(right)
    over = np.nonzero(d_use[left].max(0) + d_use[right].max(0) > room)[0]
    # Charged as _Pairs does (same units, same path under the box): its matrices, then one pass and three
    # per row that can refuse a pair.
    work.charge(CALL + 3 * cells + CALL + (1 + 3 * len(over)) * cells)
    found = _cheapest_fitting(d_cost, d_use[:, over], grp, left, right, room[over])
    if found is None:
        return 0, -1, -1
    work.charge(2 * cells)  # _Pairs.best's pick among the fitting pairs
    return found


def _capped(d_cost: np.ndarray, left: np.ndarray, n_right: int) -> np.ndarray:
    """`left` cut to its cheapest (by d_cost, stable) when its pairs with `n_right` would pass PAIR_CELLS."""
    if len(left) * n_right > PAIR_CELLS:
        return left[np.argsort(d_cost[left], kind="stable")[: max(1, PAIR_CELLS // n_right)]]
    return left


def _cheapest_fitting(d_cost: np.ndarray, d_use: np.ndarray, grp: np.ndarray, left: np.ndarray,
                      right: np.ndarray, room: np.ndarray) -> tuple[int, int, int] | None:  # fmt: skip
    """(d_cost sum, a, b) of the cheapest pair (a in `left`, b in `right`, of two groups) whose summed
    `d_use` (the rows that can refuse a pair) fits `room`, the least flat index of `left` x `right` among
    equals; None when none fits. Blocks of `left` in increasing d_cost, each against the switches of
    `right` (in increasing d_cost) that can still make a pair no dearer than the best found: a block whose
    cheapest pair costs more ends the search (most pairs are never built)."""
    n_right = len(right)
    # Stable: among equal d_cost, right's order (the least flat index first).
    by_cost = np.argsort(d_cost[right], kind="stable")
    lc, gl, ul = d_cost[left], grp[left], d_use[left]
    rc, gr, ur = d_cost[right][by_cost], grp[right][by_cost], d_use[right][by_cost]
    order = np.argsort(lc, kind="stable")
    step = max(1, BLOCK_CELLS // n_right)
    best: tuple[int, int] | None = None  # (cost, flat index in left x right)
    for s in range(0, len(left), step):
        rows = order[s : s + step]
        # Only the switches b with lc[first row] + rc[b] <= best can be in a pair no dearer than it.
        width = n_right if best is None else int(np.searchsorted(rc, best[0] - lc[rows[0]], side="right"))
        if not width:
            break
        ok = gl[rows][:, None] != gr[None, :width]
        for j in range(len(room)):
            # a + b <= room as b <= room - a: one pass a row, not two.
            ok &= ur[:width, j][None, :] <= (room[j] - ul[rows, j])[:, None]
        if not ok.any():
            continue
        cost = np.where(ok, lc[rows][:, None] + rc[None, :width], np.iinfo(np.int64).max)
        low = int(cost.min())
        if best is not None and low > best[0]:
            continue
        ii, jj = np.nonzero(ok & (cost == low))
        flat = int((rows[ii] * n_right + by_cost[jj]).min())
        best = (low, flat) if best is None or low < best[0] else (low, min(best[1], flat))
    if best is None:
        return None
    a, b = divmod(best[1], n_right)
    return best[0], int(left[a]), int(right[b])


def improve(cost: np.ndarray, use: np.ndarray, budget: np.ndarray, start: np.ndarray, chosen: list[int],
            allowed: np.ndarray, target: int, work: Work, near_free: np.ndarray | None = None,
            rounds: int = 2000) -> list[int]:  # fmt: skip
    """`chosen` (one global configuration index per group, within `budget`) made cheaper by switches to
    `allowed` configurations until its cost is <= `target`, no move improves it, `rounds` rounds passed or
    the `work` box is used up (each round charges the cells it evaluates). `near_free` (a mask of configurations) are the partners of the
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
        if total <= target or work.over():
            break
        cand = np.nonzero(allowed & (idx != sel[grp_all]))[0]
        if not len(cand):
            break
        work.charge(CALL + len(cost) + len(cand) * (1 + len(budget)))
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
        g2, a, b = _best_pair(d_cost, d_use, grp, savers, everyone, room, work)
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
            pairs = _Pairs(d_cost, d_use, grp, partners, partners, work)
            for s in np.unique(seeds).tolist():
                if work.over():
                    break
                g3, a, b = pairs.best(room - d_use[s], int(grp[s]))
                if a >= 0 and g3 + int(d_cost[s]) < gain:
                    gain, move = g3 + int(d_cost[s]), [s, a, b]
                    break  # first improvement: each seed costs a pass over the pairs (rounds at 1,000 vertices)
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


def _neutral_pairs(cost: np.ndarray, use: np.ndarray, start: np.ndarray, sel: np.ndarray, neutral: np.ndarray,
                   rng: np.random.Generator, work: Work) -> tuple[np.ndarray, np.ndarray, _Pairs] | None:  # fmt: skip
    """The switches from `sel` to `neutral` configurations that keep the cost (at most a random sample
    of them, so that their pairs fit PAIR_CELLS), their groups and their pairs; None when fewer than two."""
    grp_all = np.repeat(np.arange(len(start) - 1), np.diff(start))
    cand = np.nonzero(neutral & (np.arange(len(cost)) != sel[grp_all]))[0]
    work.charge(CALL + len(cost))
    cand = cand[cost[cand] == cost[sel[grp_all[cand]]]]
    if len(cand) < 2:
        return None
    side = max(2, int(PAIR_CELLS**0.5))
    if len(cand) > side:
        cand = np.sort(rng.choice(cand, size=side, replace=False))
    grp = grp_all[cand]
    local = np.arange(len(cand))
    return (
        cand,
        grp,
        _Pairs(np.zeros(len(cand), dtype=np.int64), use[cand] - use[sel[grp]], grp, local, local, work),
    )


def shake(cost: np.ndarray, use: np.ndarray, budget: np.ndarray, start: np.ndarray, chosen: list[int],
          neutral: np.ndarray, rng: np.random.Generator, work: Work, moves: int = SHAKES,
          pool: tuple[np.ndarray, int] | None = None) -> list[int]:  # fmt: skip
    """`chosen` after up to `moves` cost-neutral exchanges: each a pair of switches of two groups to
    `neutral` configurations, neither changing the cost, that fit the budgets together (with several
    sNICs: an NF from one sNIC to another and another one back). Random ones; or with `pool` = (rows,
    keep) each the one that leaves the least room in `rows` other than row `keep` (the free room of the
    sNICs gathered on one: a saving switch then needs to fit only there). Where ``improve`` stops among
    interchangeable sNICs the cost is flat in every direction it looks; from a shaken placement the
    same search finds switches that fill the rows further. Exact int64; the result is feasible and
    costs what `chosen` costs."""
    sel = np.array(chosen, dtype=np.int64)
    for _ in range(moves):
        found = _neutral_pairs(cost, use, start, sel, neutral, rng, work)
        if found is None:
            break
        cand, grp, pairs = found
        room = budget - use[sel].sum(0)
        ok = pairs.fitting(room)
        if pool is None:
            hits = np.argwhere(ok)
            if not len(hits):
                break
            a, b = hits[int(rng.integers(len(hits)))].tolist()
        else:
            rows, keep = pool
            gain = np.zeros(ok.shape, dtype=np.int64)  # room taken from the rows drained
            for r in rows.tolist():
                if r != keep:
                    gain += pairs.d_use[:, r][:, None] + pairs.d_use[:, r][None, :]
            flat = int(np.argmax(np.where(ok, gain, 0)))
            if not ok.flat[flat] or gain.flat[flat] <= 0:
                break
            a, b = divmod(flat, len(cand))
        sel[grp[a]], sel[grp[b]] = cand[a], cand[b]
    assert (use[sel].sum(0) <= budget).all()
    return sel.tolist()


def fill(cost: np.ndarray, use: np.ndarray, budget: np.ndarray, start: np.ndarray, chosen: list[int],
         allowed: np.ndarray, rows: np.ndarray, row: int, work: Work, items: int = FILL_ITEMS) -> list[int]:  # fmt: skip
    """`chosen` with the set of switches (to `allowed` configurations, at most one per group, each
    changing of the priced `rows` only `row`) that fills the room of `row` most closely (meet in the
    middle over `items` of them: a subset sum no pair or triple of switches reaches), when that set
    fits every row and lowers the cost; else `chosen`. Exact int64."""
    sel = np.array(chosen, dtype=np.int64)
    grp_all = np.repeat(np.arange(len(start) - 1), np.diff(start))
    cand = np.nonzero(allowed & (np.arange(len(cost)) != sel[grp_all]))[0]
    work.charge(CALL + len(cost) + len(cand) * len(budget))
    d_use = use[cand] - use[sel[grp_all[cand]]]
    others = np.array([r for r in rows.tolist() if r != row], dtype=np.int64)
    only = (d_use[:, row] != 0) & ((d_use[:, others] == 0).all(1) if len(others) else True)
    cand = cand[only]
    if not len(cand):
        return sel.tolist()
    # One switch per group (its first), the smallest first: the finest sums.
    grp = grp_all[cand]
    _, first = np.unique(grp, return_index=True)
    cand = cand[first]
    delta = (use[cand, row] - use[sel[grp_all[cand]], row]).astype(np.int64)
    keep = np.argsort(np.abs(delta), kind="stable")[:items]
    cand, delta = cand[keep], delta[keep]
    room = int(budget[row] - use[sel, row].sum())
    half = len(cand) // 2
    work.charge(2 ** (len(cand) - half) * (len(cand) - half + 2))  # subset sums and their search
    ls, lm = sums([[v] for v in delta[:half].tolist()])  # one value per item: the codes are bit masks
    rs, rm = sums([[v] for v in delta[half:].tolist()])
    found = best_within(ls, rs, room)  # the largest total sum that keeps the row within its room
    if found is None or found[0] <= 0:
        return sel.tolist()
    _, i, j = found
    pick = [int(c) for b, c in enumerate(cand[:half].tolist()) if lm[i] >> b & 1]
    pick += [int(c) for b, c in enumerate(cand[half:].tolist()) if rm[j] >> b & 1]
    new = sel.copy()
    new[grp_all[np.array(pick, dtype=np.int64)]] = pick
    if (use[new].sum(0) <= budget).all() and int(cost[new].sum()) < int(cost[sel].sum()):
        return new.tolist()
    return sel.tolist()
