"""An incumbent for interchangeable sNICs: the pooled room filled, then split into the sNICs (numpy).

Where several sNIC capacity rows bind at one Lagrangian price, the bound treats them as one pool, and
most groups have several configurations of (near) zero reduced cost: an NF that must be on an sNIC can be
on any of them, one at the break-even ratio on the host or on any sNIC. A placement the bound proves has
to fill every one of those rows almost exactly at once: a multiple subset sum that exchanges of two or
three groups (swaps.py) approach only slowly, and that CP-SAT on working integers of 2^40 does not solve
in seconds. Here it is built directly, among the near-free configurations only:

1. pool: per group a near-free configuration such that the summed use of the pooled rows fills their
   summed room as closely as possible, short of a small margin (greedy, then a meet in the middle over
   the groups of the finest steps);
2. split: those configurations' NFs assigned to the rows one row at a time, each row filled from the
   groups not yet settled by switches among configurations of the same pooled use and cost (the same NFs
   on sNICs, other sNICs), again greedy then a meet in the middle; the last row takes the rest.

Exact int64 throughout: the result is returned only when it fits every budget row (the other rows, e.g.
PCIe, are checked, not priced) and costs less; an incumbent only, optimality is proven by the bound.
"""

from __future__ import annotations

import numpy as np

from placement.meet import best_within, decode, sums
from placement.swaps import CALL
from placement.work import Work

HALF_CHOICES = 1 << 13  # multiple-choice combinations per half of a meet in the middle
# Per group and pass over the groups: a few numpy calls on small arrays (measured: pack's units then
# within 2x of swaps.py's per CPU second).
PER_GROUP = 3 * CALL
LP_SUPPORT = 1e-6  # a configuration the LP takes at least this much of is in its support


def _meet(values: list[list[int]], room: int, work: Work) -> tuple[int, list[int]] | None:
    """Per group at most one of its `values` (a choice of none allowed) with the largest sum <= room:
    (sum, index of the value taken per group or -1), or None when no choice fits."""
    half = _split_point(values)
    left, right = sums(values[:half]), sums(values[half:])
    work.charge(CALL + 4 * (len(left[0]) + len(right[0])))
    found = best_within(left[0], right[0], room)
    if found is None:
        return None
    total, i, j = found
    return total, decode(values[:half], int(left[1][i])) + decode(values[half:], int(right[1][j]))


def _split_point(values: list[list[int]]) -> int:
    """Index splitting `values` into two halves of about equal numbers of combinations."""
    logs = np.cumsum([np.log2(len(v) + 1) for v in values])
    return int(np.searchsorted(logs, logs[-1] / 2)) + 1 if len(values) > 1 else len(values)


def _fill(steps: list[list[int]], order: list[int], room: int, work: Work) -> list[int] | None:
    """Per item (a list of its possible steps, each nonzero, either sign) the index of the step taken or
    -1, so that the sum is as large as possible within `room`: items in `order` taken greedily (the step
    that brings the room nearest the middle of what the finest items can reach), the finest items saved
    for a meet in the middle over the rest. None when nothing fits."""
    n = len(steps)
    taken = [-1] * n
    fine: list[int] = []
    combos = 1
    # The finest items (smallest largest step) go to the meet in the middle, while its combinations last.
    for i in sorted(range(n), key=lambda i: max(abs(s) for s in steps[i])):
        if combos * (len(steps[i]) + 1) > HALF_CHOICES * HALF_CHOICES:
            break
        fine.append(i)
        combos *= len(steps[i]) + 1
    fine_set = set(fine)
    mid = (sum(max(0, max(steps[i])) for i in fine) + sum(min(0, min(steps[i])) for i in fine)) // 2
    left = room
    for i in order:
        if i in fine_set or left == mid:
            continue
        gap = left - mid  # > 0: use more (a positive step); < 0: free some (a negative one)
        fit = [j for j, s in enumerate(steps[i]) if (0 < s <= gap) or (gap <= s < 0)]
        if fit:
            j = max(fit, key=lambda j: abs(steps[i][j]))
            taken[i] = j
            left -= steps[i][j]
    work.charge(CALL + n)
    got = _meet([steps[i] for i in fine], left, work) if fine else (0, [])
    if got is None:
        return None
    for i, j in zip(fine, got[1], strict=True):
        taken[i] = j
    return taken


def _choices(delta: np.ndarray, configs: np.ndarray, rank: np.ndarray) -> tuple[list[int], list[int]]:
    """The distinct nonzero values of `delta` (steps) and for each the configuration of least `rank`."""
    best: dict[int, tuple[int, int]] = {}
    for v, c, r in zip(delta.tolist(), configs.tolist(), rank.tolist(), strict=True):
        if v and (v not in best or r < best[v][1]):
            best[v] = (c, r)
    steps = sorted(best)
    return steps, [best[v][0] for v in steps]


def pack(cost: np.ndarray, use: np.ndarray, budget: np.ndarray, start: np.ndarray, chosen: list[int] | None,
         neutral: np.ndarray, y: np.ndarray, rows: np.ndarray, margin: int, work: Work) -> list[int] | None:  # fmt: skip
    """A placement among the `neutral` configurations and those of `y`'s support (the LP's), from `y`, that
    fills the pooled `rows` to within about `margin` of their summed room and then splits the pooled use
    row by row (module doc), each row in turn last; None when no split fits every budget row in the
    `work` box. `chosen` settles ties."""
    if work.over():
        return None
    n_groups = len(start) - 1
    grp_all = np.repeat(np.arange(n_groups), np.diff(start))
    sel = np.array(chosen if chosen is not None else start[:-1], dtype=np.int64)
    ok = neutral | (y > LP_SUPPORT)  # the LP's configurations too: its prices are approximate
    ok[sel] = ok[sel] | ~np.add.reduceat(neutral.astype(np.int64), start[:-1]).astype(bool)
    pooled = use[:, rows].sum(1)
    if int(np.abs(pooled).max(initial=0)) * (n_groups + 1) >= 1 << 62:
        return None  # the sums of the meet in the middle could pass 64 bits
    others = np.array([r for r in range(use.shape[1]) if r not in set(rows.tolist())], dtype=np.int64)
    # The rows not pooled (e.g. PCIe), weighted by how little room the LP left them: a configuration
    # of less weighted use is easier to fit.
    lp_room = budget[others] - (y[:, None] * use[:, others]).sum(0)
    weight = 1.0 / np.maximum(lp_room, np.maximum(budget[others], 1) / 1000)
    spare = use[:, others] @ weight if len(others) else np.zeros(len(cost))
    not_current = (np.arange(len(cost)) != sel[grp_all]).astype(np.int64)
    work.charge(CALL + len(cost) * (2 + use.shape[1]))
    cfg = [np.nonzero(ok[start[g] : start[g + 1]])[0] + start[g] for g in range(n_groups)]
    work.charge(PER_GROUP * n_groups)
    # 1. Pool: from the LP's choice per group, the steps that fill the summed room.
    prefer = [np.lexsort((spare[c], not_current[c], -y[c])) for c in cfg]
    base = np.array([c[o[0]] for c, o in zip(cfg, prefer, strict=True)], dtype=np.int64)
    room = int(budget[rows].sum()) - int(pooled[base].sum()) - margin
    steps, picks = [], []
    for g, c in enumerate(cfg):
        s, p = _choices(pooled[c] - pooled[base[g]], c, prefer[g].argsort())
        if s:
            steps.append(s)
            picks.append((g, p))
    order = sorted(range(len(steps)), key=lambda i: min(abs(v) for v in steps[i]))
    taken = _fill(steps, order, room, work)
    if taken is None:
        return None
    pick = base.copy()
    for (g, p), j in zip(picks, taken, strict=True):
        if j >= 0:
            pick[g] = p[j]
    # 2. Split: each group among the configurations of its pooled use and cost, from the LP's.
    same = [c[(pooled[c] == pooled[pick[g]]) & (cost[c] == cost[pick[g]])] for g, c in enumerate(cfg)]
    cur = np.array([c[np.lexsort((spare[c], -y[c]))[0]] for c in same], dtype=np.int64)
    for turn in range(len(rows)):
        if work.over():
            break
        out = _split(use, budget, same, cur, np.roll(rows, -turn), others, spare, work)
        if out is not None:
            return out.tolist()
    return None


BANS = 8  # retries of one row's fill, each without the moves that overfilled another row


def _split(use: np.ndarray, budget: np.ndarray, same: list[np.ndarray], cur: np.ndarray, rows: np.ndarray,
           others: np.ndarray, spare: np.ndarray, work: Work) -> np.ndarray | None:  # fmt: skip
    """The pooled `rows` settled one at a time (the last takes the rest), each by moves of the groups'
    use (among `same`) between it and the rows not settled yet, the moves that add least weighted use
    (`spare`) of the `others` rows per unit first; a fill that overfills one of those rows is retried
    without the moves that added most to it. The choice, or None when it does not fit every row."""
    cur = cur.copy()
    used = use[cur].sum(0)
    for k, r in enumerate(rows.tolist()[:-1]):
        done = rows[:k]
        banned: set[int] = set()
        for _ in range(BANS + 1):
            steps, picks = [], []
            for g, c in enumerate(same):
                c = c[(use[c][:, done] == use[cur[g], done]).all(1)] if k else c
                c = c[[x not in banned for x in c.tolist()]] if banned else c
                s, p = _choices(use[c, r] - use[cur[g], r], c, spare[c].argsort().argsort())
                if s:
                    steps.append(s)
                    picks.append((g, p))
            work.charge(PER_GROUP * len(same) + sum(len(c) for c in same) * (2 + len(rows)))
            ratio = [min((spare[x] - spare[cur[g]]) / abs(v) for x, v in zip(p, s, strict=True))
                     for (g, p), s in zip(picks, steps, strict=True)]  # fmt: skip
            taken = _fill(
                steps, sorted(range(len(steps)), key=ratio.__getitem__), int(budget[r] - used[r]), work
            )
            if taken is None:
                return None
            moves = [(g, p[j]) for (g, p), j in zip(picks, taken, strict=True) if j >= 0]
            new = used.copy()
            for g, x in moves:
                new += use[x] - use[cur[g]]
            over = others[(new[others] > budget[others]) & (new[others] > used[others])]
            if not len(over):
                break
            # Without the moves that added most to the overfilled rows, until they would fit.
            add = sorted(((int(np.maximum(use[x, over] - use[cur[g], over], 0).sum()), x) for g, x in moves),
                         reverse=True)  # fmt: skip
            excess = int((new[over] - np.maximum(budget[over], used[over])).sum())
            for a, x in add:
                if excess <= 0 or a <= 0:
                    break
                banned.add(x)
                excess -= a
        else:
            return None
        for g, x in moves:
            cur[g] = x
        used = new
    return cur if (used <= budget).all() else None
