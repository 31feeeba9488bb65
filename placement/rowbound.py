"""A lower bound above the LP's: one budget row kept exactly, the others priced (a knapsack by DP).

The engine's Lagrangian bound prices every budget row, so it is the LP bound; where two rows bind (an
sNIC's capacity and one PCIe direction), the best integer choice can lie far above it (measured:
tens to hundreds of gap_limit slacks), and CP-SAT then refutes "cost <= x?" by search. Keeping one
binding row r as a constraint and pricing only the others gives the relaxation

    min_x  sum_g dr_x(g)   s.t.  one configuration per group,  sum_g use_r(x(g)) <= budget_r,

where dr are the exact integer reduced costs of the prices without row r (engine._bound): every
placement x meeting every row has den * cost(x) >= lbr + sum dr(x). This multiple-choice knapsack is
solved by a dynamic programme over the reduced costs divided by q and rounded down (still a valid lower
bound: floor(d / q) * q <= d), recording per cost level the least use of row r.
"""

from __future__ import annotations

import numpy as np

INF = 2**62
WEIGHT_LIMIT = 2**60  # sums of weights must stay far below INF


def kept_row_bound(dr: np.ndarray, weight: np.ndarray, budget: int, start: np.ndarray, usable: np.ndarray,
                   room: int, states: int, work: int | None = None, per_group: int = 0) -> int | None:  # fmt: skip
    """A lower bound B on sum(dr) over every choice of `usable` configurations (one per group
    start[g]:start[g+1]) with sum(weight) <= budget, exact: B = q * T, T the least level (of at most
    `states`, fewer when levels x configurations would pass `work`) reached within the budget, or just
    above `room` when none is (then no such choice has sum(dr) <= room). None when the weights are too
    large for the DP's integers, or when fewer than `per_group` levels per group with a choice would remain
    (each such group's rounding down may lose up to one level). dr >= 0 on usable configurations; a group
    with no usable configuration gives a bound above room (there is no choice at all)."""
    if room < 0:
        return 0
    n_groups = len(start) - 1
    inside = usable & (dr <= room)
    counts = np.add.reduceat(inside.astype(np.int64), start[:-1]) if n_groups else np.zeros(0)
    if (counts == 0).any():
        return room + 1
    w_abs = np.where(inside, np.abs(weight), 0)
    if n_groups and int(np.maximum.reduceat(w_abs, start[:-1]).sum()) >= WEIGHT_LIMIT:
        return None
    # Per group only its Pareto front of (dr, weight): one with less dr and no more weight serves every
    # choice as well. A group left with one configuration is a constant.
    idx = np.nonzero(inside)[0]
    grp = np.searchsorted(start, idx, side="right") - 1
    order = np.lexsort((weight[idx], dr[idx], grp))
    idx, grp = idx[order], grp[order]
    # Running minimum of the weight within each group (sorted by dr): weights replaced by their ranks,
    # each group shifted below every earlier one, so one running minimum over all restarts per group.
    rank = np.unique(weight[idx], return_inverse=True)[1].astype(np.int64)
    key = rank - grp.astype(np.int64) * (len(idx) + 1)
    keep = np.ones(len(idx), dtype=bool)
    keep[1:] = key[1:] < np.minimum.accumulate(key)[:-1]
    idx, grp = idx[keep], grp[keep]
    first = np.searchsorted(grp, np.arange(n_groups))
    sizes = np.diff(np.append(first, len(idx)))
    base_d = sum(dr[idx[first]].tolist())
    base_w = sum(weight[idx[first[sizes == 1]]].tolist())
    fronts = []
    for g in np.nonzero(sizes > 1)[0].tolist():
        ks = idx[first[g] : first[g] + sizes[g]]
        e = dr[ks] - dr[ks[0]]
        fronts.append(list(zip(e.tolist(), weight[ks].tolist(), strict=True)))
    span = room - base_d
    if span < 0:
        return room + 1
    size = sum(len(fr) for fr in fronts)
    if work is not None and size:
        states = min(states, work // size)
    if fronts and states < per_group * len(fronts):
        return None
    q = max(1, -(-span // max(1, states)))
    top = span // q  # levels 0..top of the groups with a choice
    f = np.full(top + 1, INF, dtype=np.int64)  # f[t]: least weight of the groups so far at level t
    f[0] = base_w
    for front in fronts:
        new = np.full(top + 1, INF, dtype=np.int64)
        for e, w in front:
            e //= q
            if e <= top:
                np.minimum(new[e:], f[: top + 1 - e] + w, out=new[e:])
        np.minimum(new, INF, out=new)
        f = new
    within = np.nonzero((f <= budget) & (f < INF - WEIGHT_LIMIT))[0]  # (above: no choice reaches t)
    return base_d + q * int(within[0]) if len(within) else room + 1


def kept_two_rows_bound(dr: np.ndarray, w1: np.ndarray, b1: int, w2: np.ndarray, b2: int, start: np.ndarray,
                        usable: np.ndarray, room: int, states: int, points: int) -> int | None:  # fmt: skip
    """Like `kept_row_bound`, with two rows kept exactly: a lower bound B on sum(dr) over every choice of
    `usable` configurations (one per group) with sum(w1) <= b1 and sum(w2) <= b2, or just above `room` when
    no such choice has sum(dr) <= room. The DP keeps, per level of reduced cost (rounded down as there),
    the Pareto front of (use of row 1, use of row 2); when more than `points` states would remain, the
    states of one level are merged in runs into their component-wise minimum (a relaxation: the merged
    state is reachable by no choice but dominates every one it replaces), so the work stays bounded and
    the bound stays valid, only weaker. None when the weights are too large for the DP's integers."""
    if room < 0:
        return 0
    n_groups = len(start) - 1
    inside = usable & (dr <= room)
    counts = np.add.reduceat(inside.astype(np.int64), start[:-1]) if n_groups else np.zeros(0)
    if (counts == 0).any():
        return room + 1
    for w in (w1, w2):
        if (
            n_groups
            and int(np.maximum.reduceat(np.where(inside, np.abs(w), 0), start[:-1]).sum()) >= WEIGHT_LIMIT
        ):
            return None
    idx = np.nonzero(inside)[0]
    grp = np.searchsorted(start, idx, side="right") - 1
    first = np.searchsorted(grp, np.arange(n_groups))
    dmin = np.minimum.reduceat(dr[idx], first)
    base_d = sum(dmin.tolist())
    span = room - base_d
    if span < 0:
        return room + 1
    choice = np.nonzero(counts > 1)[0]
    q = max(1, -(-span // max(1, states)))
    top = span // q
    # Least use of each row by the groups not yet added: a state that cannot meet a row is dropped.
    m1 = np.minimum.reduceat(w1[idx], first)
    m2 = np.minimum.reduceat(w2[idx], first)
    single = counts == 1
    rest1 = np.cumsum(m1[choice][::-1])[::-1].tolist() + [0]
    rest2 = np.cumsum(m2[choice][::-1])[::-1].tolist() + [0]
    fixed1 = sum(m1[single].tolist())
    fixed2 = sum(m2[single].tolist())
    lev = np.zeros(1, dtype=np.int64)
    u1 = np.full(1, fixed1, dtype=np.int64)
    u2 = np.full(1, fixed2, dtype=np.int64)
    if fixed1 + rest1[0] > b1 or fixed2 + rest2[0] > b2:
        return room + 1
    ends = np.append(first, len(idx))
    for k, g in enumerate(choice.tolist()):
        ks = idx[ends[g] : ends[g + 1]]
        e = (dr[ks] - dmin[g]) // q
        lev = (lev[:, None] + e[None, :]).ravel()
        u1 = (u1[:, None] + w1[ks][None, :]).ravel()
        u2 = (u2[:, None] + w2[ks][None, :]).ravel()
        ok = (lev <= top) & (u1 + rest1[k + 1] <= b1) & (u2 + rest2[k + 1] <= b2)
        lev, u1, u2 = lev[ok], u1[ok], u2[ok]
        if not len(lev):
            return room + 1
        lev, u1, u2 = _front(lev, u1, u2, points)
    return base_d + q * int(lev.min())


def _front(lev: np.ndarray, u1: np.ndarray, u2: np.ndarray, points: int):
    """Per level, the states no other of that level dominates in (u1, u2), sorted by u1; then, while more
    than `points` remain, runs of each level merged into their component-wise minimum."""
    order = np.lexsort((u2, u1, lev))
    lev, u1, u2 = lev[order], u1[order], u2[order]
    # Within a level (sorted by u1, then u2) a state survives when its u2 is below every earlier one's:
    # ranks of u2 shifted per level so that one running minimum restarts at each level.
    rank = np.unique(u2, return_inverse=True)[1].astype(np.int64)
    key = rank - lev * (len(lev) + 1)
    keep = np.ones(len(lev), dtype=bool)
    keep[1:] = key[1:] < np.minimum.accumulate(key)[:-1]
    lev, u1, u2 = lev[keep], u1[keep], u2[keep]
    if len(lev) <= points:
        return lev, u1, u2
    run = -(-len(lev) // points)
    starts = np.nonzero(np.diff(lev, prepend=-1))[0]
    pos = np.arange(len(lev)) - np.repeat(starts, np.diff(np.append(starts, len(lev))))
    cut = np.nonzero((pos % run) == 0)[0]  # each run starts at a multiple of `run` within its level
    last = np.append(cut[1:], len(lev)) - 1
    return lev[cut], u1[cut], u2[last]  # u1 rises and u2 falls along a level's front
