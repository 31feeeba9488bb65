"""An exact bound for the groups when they are a binary knapsack: every group has at most two
configurations left and at most one budget row can bind (the others hold whatever is chosen).

That is the shape of one sNIC with a loose PCIe link (prepare_plan then splits the NFs into one group
each) and only its capacity tight: a 0/1 knapsack of thousands of NFs whose LP bound sits far below the
optimum when a few NFs use a large share of the sNIC (foreign large 5,000 draw 0: 52 slacks), where
CP-SAT's "cost <= x?" questions took 1-2 s each. Best-first branch and bound on the LP (Dantzig) bound,
branching on the break item, closes such a gap in a few nodes (draw 0: 115, 7 ms). On a plateau of equal ratios
(many NFs of one type) the bound stalls; the search then stops and hands back the bound it reached.

Exact: integer profits and weights, the NFs in exact ratio order (a float sort checked pair by pair in
Python integers), the LP's fractional term rounded up.
"""

from __future__ import annotations

import functools
import heapq
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

NODES = 300  # nodes of the branch and bound at most (each one O(n) numpy work, ~10-80 us)
STALL = 50  # ... and it stops once this many nodes in a row moved the best bound by less than 1 % of its
# distance to the goal (a plateau of equal ratios: the bound creeps down a unit at a time)
FILL = 64  # free items past the break item tried by each node's greedy completion


@dataclass
class Items:
    """The knapsack: item k switches group `group[k]` from its configuration in `chosen` to `take[k]`,
    saving `p[k]` cost units for `w[k]` of the binding row (both > 0), items in descending exact ratio
    p / w."""

    p: np.ndarray
    w: np.ndarray
    group: np.ndarray
    take: np.ndarray
    cap: int  # the binding row's budget less the chosen configurations' use outside the items
    const: int  # cost of every group at its base configuration (the items' savings come off it)
    chosen: np.ndarray  # per group: the base configuration (the placement before any item is taken)


def items(cost: np.ndarray, use: np.ndarray, budget: list[int], start: np.ndarray, keep: np.ndarray):
    """The knapsack of the configurations `keep` (bool per configuration); "empty" when some group keeps
    none (no placement among them), None when it is not one (a group keeps three or more, or two rows
    can bind)."""
    n_groups = len(start) - 1
    kept = np.add.reduceat(keep.astype(np.int64), start[:-1]) if n_groups else np.zeros(0, np.int64)
    if (kept == 0).any():
        return "empty"
    if (kept > 2).any():
        return None
    idx = np.nonzero(keep)[0]
    first = idx[np.r_[True, np.diff(np.repeat(np.arange(n_groups), kept)) != 0]]  # per group its first kept
    last = idx[np.cumsum(kept) - 1]  # ... and its last (the same when it keeps one)
    lo = np.minimum(use[first], use[last])
    hi = np.maximum(use[first], use[last])
    room = np.array(budget, dtype=np.int64) - lo.sum(0)
    binding = np.nonzero((hi - lo).sum(0) > room)[0]
    if (room < 0).any() and not len(binding):
        return "empty"  # (cannot happen: some row breaks whatever is chosen)
    if len(binding) > 1:
        return None
    r = int(binding[0]) if len(binding) else 0
    # Per group: base = the configuration using less of row r (the cheaper on a tie), other = the rest.
    a_first = (use[first, r] < use[last, r]) | ((use[first, r] == use[last, r]) & (cost[first] <= cost[last]))
    base = np.where(a_first, first, last)
    other = np.where(a_first, last, first)
    p = cost[base] - cost[other]
    w = use[other, r] - use[base, r]
    pair = base != other
    free = pair & (p > 0) & (w > 0)
    always = pair & (p > 0) & (w == 0)  # cheaper at no use of the row: always taken
    chosen = base.copy()
    chosen[always] = other[always]
    cap = int(budget[r]) - int(use[chosen, r].sum())
    const = int(cost[chosen].sum())
    p, w, g, t = p[free], w[free], np.nonzero(free)[0], other[free]
    order = _ratio_order(p, w)
    return Items(p=p[order], w=w[order], group=g[order], take=t[order], cap=cap, const=const, chosen=chosen)


def _ratio_order(p: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Indices by descending p / w, exactly (a float sort, checked pair by pair in Python integers)."""
    order = np.argsort(-(p / w), kind="stable")
    ps, ws = p[order].tolist(), w[order].tolist()
    if all(ps[k] * ws[k + 1] >= ps[k + 1] * ws[k] for k in range(len(ps) - 1)):
        return order

    def cmp(i: int, j: int) -> int:
        x, y = int(p[i]) * int(w[j]), int(p[j]) * int(w[i])
        return -1 if x > y else 1 if x < y else 0

    return np.array(sorted(range(len(p)), key=functools.cmp_to_key(cmp)), dtype=np.int64)


class Bound(NamedTuple):
    lower: (
        int  # no placement among the items' configurations costs less (capped at target + 1: none <= target)
    )
    placement: (
        list[int] | None
    )  # the cheapest one the search met, a configuration per group (None: none fits)
    nodes: int  # branch-and-bound nodes expanded


def bound(it: Items, target: int, nodes: int = NODES, stall: int = STALL) -> Bound:
    """The branch and bound on `it`, asked whether a placement costs `target` or less."""
    n = len(it.p)
    p, w = it.p, it.w
    goal = it.const - target  # a placement of cost <= target saves at least this much
    if it.cap < 0:  # the budget row broken whatever is chosen
        return Bound(target + 1, None, 0)
    best_save, best_in = 0, np.zeros(n, dtype=bool)

    def relax(free: np.ndarray, inn: np.ndarray, cap: int, saved: int):
        """(LP bound on the saving, break item or -1, a feasible saving, its items)."""
        cw = np.cumsum(np.where(free, w, 0))
        k = int(np.searchsorted(cw, cap, side="right"))  # free items before k fit whole (k itself is free)
        whole = free.copy()
        whole[k:] = False
        base = saved + int(p[whole].sum())
        if k >= n:
            return base, -1, base, inn | whole
        left = cap - (int(cw[k - 1]) if k else 0)
        ub = base + -((-left * int(p[k])) // int(w[k]))  # the fraction, rounded up
        got, pick = base, inn | whole
        for j in (np.nonzero(free[k + 1 :] & (w[k + 1 :] <= left))[0][:FILL] + k + 1).tolist():
            if w[j] <= left:
                left -= int(w[j])
                got += int(p[j])
                pick[j] = True
        return ub, k, got, pick

    free0 = np.ones(n, dtype=bool)
    none = np.zeros(n, dtype=bool)
    ub, k, got, pick = relax(free0, none, it.cap, 0)
    if got > best_save:
        best_save, best_in = got, pick
    heap = [(-ub, 0, k, free0, none, it.cap, 0)] if k >= 0 and ub >= goal else []
    mark, quiet, count = ub, 0, 0
    while heap and count < nodes and quiet < stall:
        neg, _, k, free, inn, cap, saved = heapq.heappop(heap)
        if -neg < goal or -neg <= best_save:
            heap.clear()  # (best first: no open node can reach the goal or beat the best)
            break
        count += 1
        rest = free.copy()
        rest[k] = False
        for take in (True, False):
            cap2 = cap - int(w[k]) if take else cap
            if cap2 < 0:
                continue
            inn2 = inn.copy()
            inn2[k] = take
            saved2 = saved + (int(p[k]) if take else 0)
            ub2, k2, got2, pick2 = relax(rest, inn2, cap2, saved2)
            if got2 > best_save:
                best_save, best_in = got2, pick2
            if k2 >= 0 and ub2 >= goal and ub2 > best_save:
                heapq.heappush(heap, (-ub2, count * 2 + take, k2, rest, inn2, cap2, saved2))
        top = max(-heap[0][0] if heap else best_save, best_save)
        if mark - top >= max(1, (mark - goal) // 100):
            mark, quiet = top, 0
        else:
            quiet += 1
    # Every placement lies under an open node, was met (best_save), or under a node dropped for saving
    # less than the goal (cost above target) or no more than best_save.
    open_ub = max([-h[0] for h in heap], default=-1)
    lower = min(it.const - max(open_ub, best_save), target + 1)
    chosen = it.chosen.copy()
    taken = np.nonzero(best_in)[0]
    chosen[it.group[taken]] = it.take[taken]
    return Bound(lower, chosen.tolist(), count)
