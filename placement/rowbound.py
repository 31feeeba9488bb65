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
