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
BLOCK_CELLS = 1 << 16  # pairs one block of _PairSearch builds (a few cache-sized matrices)


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

    def best(self, room: np.ndarray, skip_group: int = -1, limit: int | None = None) -> tuple[int, int, int]:
        """(d_cost sum, a, b) of the cheapest pair that fits `room` (neither of group `skip_group`), or
        (0, -1, -1) when none does or (with `limit`) it costs more than `limit`."""
        if self.top is None:
            return 0, -1, -1
        ok = self.fitting(room, skip_group)
        if not ok.any():
            return 0, -1, -1
        self.work.charge(2 * self.cells)
        flat = int(np.argmin(np.where(ok, self.cost, np.iinfo(np.int64).max)))
        a, b = divmod(flat, len(self.right))
        if limit is not None and int(self.cost.flat[flat]) > limit:
            return 0, -1, -1
        return int(self.cost.flat[flat]), int(self.left[a]), int(self.right[b])


def _best_pair(d_cost: np.ndarray, d_use: np.ndarray, grp: np.ndarray, left: np.ndarray, right: np.ndarray,
               room: np.ndarray, work: Work, limit: int | None = None) -> tuple[int, int, int]:  # fmt: skip
    """The pair (a in `left`, b in `right`, of two groups) of least summed d_cost that fits `room`:
    (d_cost sum, a, b), the first in `left` x `right` order among equals, or (0, -1, -1) when no pair
    fits or, with a `limit`, when that pair costs more (found without building the dearer pairs). The
    answer and the work charged are those of ``_Pairs(...).best(room, limit=limit)``, which builds every
    pair (no charge when a side is empty: no step)."""
    if not len(left) or not len(right):
        return 0, -1, -1
    return _PairSearch(d_cost, d_use, grp, left, right, work).best(room, limit=limit)


class _PairSearch:
    """The answers of `_Pairs.best` and the work it charges, without building every pair: `left` in
    increasing d_cost by blocks, each against the switches of `right` (in increasing d_cost) that can still
    make a pair no dearer than the best found (or than a `limit`); a block whose cheapest pair costs more
    ends the search, so most pairs are never built. The work units are those of `_Pairs` (its matrices,
    then per question one pass and three per row that can refuse a pair, one fewer for a row an earlier
    question built, two more when any pair fits), so the box and with it the engine's path are unchanged."""

    def __init__(self, d_cost: np.ndarray, d_use: np.ndarray, grp: np.ndarray, left: np.ndarray,
                 right: np.ndarray, work: Work):  # fmt: skip
        left = _capped(d_cost, left, len(right))
        self.work, self.n_right, self.cells = work, len(right), len(left) * len(right)
        work.charge(CALL + 3 * self.cells)
        self.top = d_use[left].max(0) + d_use[right].max(0) if len(left) and len(right) else None
        self.built: set[int] = set()  # rows whose pair sums _Pairs would have built by now
        # Both sides sorted once by d_cost (stable: among equals, the least flat index first).
        self.l_at = np.argsort(d_cost[left], kind="stable")
        self.r_at = np.argsort(d_cost[right], kind="stable")
        self.given = left, right  # the caller's order (flat indices count in it)
        self.left, self.right = left[self.l_at], right[self.r_at]
        self.lc, self.gl, self.ul = d_cost[self.left], grp[self.left], d_use[self.left]
        self.rc, self.gr, self.ur = d_cost[self.right], grp[self.right], d_use[self.right]

    def best(self, room: np.ndarray, skip_group: int = -1, limit: int | None = None) -> tuple[int, int, int]:
        """(d_cost sum, a, b) of the cheapest pair that fits `room` (neither of group `skip_group`), or
        (0, -1, -1) when none does (`_Pairs.best`'s answer and units); with `limit`, (0, -1, -1) also
        when that pair costs more than `limit` (found without the dearer pairs)."""
        if self.top is None:
            return 0, -1, -1
        over = np.nonzero(self.top > room)[0]
        fresh = [r for r in over.tolist() if r not in self.built]
        self.built.update(fresh)
        self.work.charge(CALL + (1 + len(fresh) + 2 * len(over)) * self.cells)
        found = self._cheapest(room, over, self._viable(room, over, skip_group, limit), limit)
        if found is None and (
            limit is None or not self._any_fits(room, over, self._viable(room, over, skip_group, None))
        ):
            return 0, -1, -1
        self.work.charge(2 * self.cells)  # _Pairs.best's pick among the fitting pairs
        if found is None:
            return 0, -1, -1
        a, b = divmod(found[1], self.n_right)
        return found[0], int(self.given[0][a]), int(self.given[1][b])

    def _viable(self, room: np.ndarray, over: np.ndarray, skip: int,
                limit: int | None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
        """Positions (on the sorted sides) of the switches that can be in a fitting pair (costing at most
        `limit`): not of group `skip` and, with a `limit` (the three-group questions, where most pairs within
        it do not fit), with some switch of the other side within the room of every two of the rows `over`
        and the cost at once. Only switches in no such pair are dropped."""
        lv, rv = np.nonzero(self.gl != skip)[0], np.nonzero(self.gr != skip)[0]
        if limit is None:  # the two-group move: its cheapest-first blocks end early by themselves
            return lv, rv
        sides = [(self.ul[:, j], self.ur[:, j], int(room[j])) for j in over.tolist()]
        sides.append((self.lc, self.rc, limit))
        lv = lv[
            _can_pair([x[lv] for x, _, _ in sides], [y[rv] for _, y, _ in sides], [t for _, _, t in sides])
        ]
        rv = rv[
            _can_pair([y[rv] for _, y, _ in sides], [x[lv] for x, _, _ in sides], [t for _, _, t in sides])
        ]
        return lv, rv

    def _fits(self, rows: np.ndarray, cols: np.ndarray, room: np.ndarray, over: np.ndarray) -> np.ndarray:
        """Mask (rows x cols) of the pairs of two groups that fit `room` in the rows `over` (the only
        ones that can refuse a pair)."""
        ok = self.gl[rows][:, None] != self.gr[cols][None, :]
        for j in over.tolist():
            # a + b <= room as b <= room - a: one pass a row, not two.
            ok &= self.ur[cols, j][None, :] <= (room[j] - self.ul[rows, j])[:, None]
        return ok

    def _cheapest(self, room: np.ndarray, over: np.ndarray, viable: tuple[np.ndarray, np.ndarray],
                  limit: int | None) -> tuple[int, int] | None:  # fmt: skip
        """(cost, flat index in the caller's left x right) of the cheapest fitting pair of `viable`
        switches costing at most `limit` (any when None), the least flat index among equals; None when
        there is none."""
        vl, vr = viable
        rc = self.rc[vr]
        step = max(1, BLOCK_CELLS // max(1, len(vr)))
        best: tuple[int, int] | None = None
        for s in range(0, len(vl), step):
            rows = vl[s : s + step]
            cap = limit if best is None else best[0]
            # Only the switches b with lc[first row] + rc[b] <= cap can be in a pair no dearer than it.
            width = len(vr) if cap is None else int(np.searchsorted(rc, cap - self.lc[rows[0]], side="right"))
            if not width:
                break
            cols = vr[:width]
            ok = self._fits(rows, cols, room, over)
            if not ok.any():
                continue
            cost = np.where(ok, self.lc[rows][:, None] + rc[None, :width], np.iinfo(np.int64).max)
            low = int(cost.min())
            if cap is not None and low > cap:
                continue
            ii, jj = np.nonzero(ok & (cost == low))
            flat = int((self.l_at[rows[ii]] * self.n_right + self.r_at[cols[jj]]).min())
            best = (low, flat) if best is None or low < best[0] else (low, min(best[1], flat))
        return best

    def _any_fits(self, room: np.ndarray, over: np.ndarray, viable: tuple[np.ndarray, np.ndarray]) -> bool:
        """Whether any pair of `viable` switches fits (block by block, to the first that holds one)."""
        vl, vr = viable
        step = max(1, BLOCK_CELLS // max(1, len(vr)))
        return any(self._fits(vl[s : s + step], vr, room, over).any() for s in range(0, len(vl), step))


def _can_pair(a: list[np.ndarray], b: list[np.ndarray], room: list[int]) -> np.ndarray:
    """Mask of the switches of `a` (their values on several sides) for which, for every two sides x and
    y, some switch of `b` has a[x] + b[x] <= room[x] and a[y] + b[y] <= room[y]: a necessary condition of
    a pair within every room (the least b[y] among the b with b[x] small enough, by a prefix minimum)."""
    ok = np.ones(len(a[0]), dtype=bool)
    if not len(b[0]):
        return ~ok
    for x in range(len(a)):
        order = np.argsort(b[x], kind="stable")
        k = np.searchsorted(b[x][order], room[x] - a[x], side="right")
        ok &= k > 0
        at = np.maximum(k - 1, 0)
        for y in range(len(a)):
            if y != x:
                ok &= np.minimum.accumulate(b[y][order])[at] <= room[y] - a[y]
    return ok


def _capped(d_cost: np.ndarray, left: np.ndarray, n_right: int) -> np.ndarray:
    """`left` cut to its cheapest (by d_cost, stable) when its pairs with `n_right` would pass PAIR_CELLS."""
    if len(left) * n_right > PAIR_CELLS:
        return left[np.argsort(d_cost[left], kind="stable")[: max(1, PAIR_CELLS // n_right)]]
    return left


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
        # Only a pair cheaper than the best single switch is taken: dearer pairs are not built (the same
        # answer and units as the cheapest pair's, see _PairSearch.best).
        g2, a, b = _best_pair(d_cost, d_use, grp, savers, everyone, room, work, gain - 1)
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
            # The partners' own arrays: each question then slices them, not every switch's.
            mine = np.arange(len(partners))
            # Up to a block's cells every pair at once (a few numpy calls a question), else by blocks.
            kind = _Pairs if len(partners) ** 2 <= BLOCK_CELLS else _PairSearch
            pairs = kind(d_cost[partners], d_use[partners], grp[partners], mine, mine, work)
            for s in np.unique(seeds).tolist():
                if work.over():
                    break
                # Only a pair saving more than the saver's d_cost can improve: dearer ones are not built.
                g3, a, b = pairs.best(room - d_use[s], int(grp[s]), gain - int(d_cost[s]) - 1)
                if a >= 0 and g3 + int(d_cost[s]) < gain:
                    gain, move = g3 + int(d_cost[s]), [s, int(partners[a]), int(partners[b])]
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
