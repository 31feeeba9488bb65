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
    base_d, base_w, fronts = 0, 0, []
    for g in range(n_groups):
        ks = np.nonzero(inside[start[g] : start[g + 1]])[0] + start[g]
        front: list[tuple[int, int]] = []
        for e, w in sorted(zip(dr[ks].tolist(), weight[ks].tolist(), strict=True)):
            if not front or w < front[-1][1]:
                front.append((e, w))
        base_d += front[0][0]
        if len(front) == 1:
            base_w += front[0][1]
        else:
            fronts.append([(e - front[0][0], w) for e, w in front])
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
