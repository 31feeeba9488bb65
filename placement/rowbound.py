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


def two_rows_bound(d: np.ndarray, use: np.ndarray, budget: list[int], ell: list[int], start: np.ndarray,
                   usable: np.ndarray, room: int, max_states: int, work: int) -> int | None:  # fmt: skip
    """Exact: the least F(x) = sum d(x) + sum_j ell_j * (budget_j - use_j(x)) over every choice x of `usable`
    configurations (one per group start[g]:start[g+1]) within both kept rows use[:, j] <= budget[j], or
    room + 1 when none has F(x) <= room. With d the reduced costs of integer prices ell (ell_j >= 0 for these
    two rows, the others' slack terms dropped: >= 0), den * cost(x) = lb + F(x) + (those terms), so lb + this
    is a lower bound on den * cost of every placement (module doc: it keeps both rows where the LP and the
    one-row DP each relax one). None when more than `max_states` states or `work` state x configuration steps
    would be needed, or the integers could pass 62 bits.

    A dynamic programme over sparse states (D, U_0, U_1) = (sum d, the two rows' uses) of the groups so far:
    a state over a row's budget (uses above each group's least), or whose F is above room even if the
    remaining groups fill the rows as far as they can (d >= 0: D only grows), is dropped; so
    is one another state with the same use of row 0 dominates (``_undominated``)."""
    if room < 0:
        return 0  # F >= 0: d >= 0 and the slack terms of choices within the rows are >= 0
    n_groups = len(start) - 1
    inside = usable & (d <= room)
    idx = np.nonzero(inside)[0]
    grp = np.searchsorted(start, idx, side="right") - 1
    first = np.searchsorted(grp, np.arange(n_groups + 1))
    sizes = np.diff(first)
    if (sizes == 0).any():
        return room + 1  # some group has no configuration with d <= room
    # Uses above each group's least (>= 0), against the budgets above the least total: the states' uses then
    # lie in [0, budget], so V and F below stay within ell . budget + room.
    u = use[idx].astype(np.int64)
    u_min = np.minimum.reduceat(u, first[:-1]) if n_groups else np.zeros((0, 2), dtype=np.int64)
    u = u - np.repeat(u_min, sizes, axis=0)
    u_max = np.maximum.reduceat(u, first[:-1]) if n_groups else np.zeros((0, 2), dtype=np.int64)
    above = [budget[j] - sum(u_min[:, j].tolist()) for j in (0, 1)]
    if min(above) < 0:
        return room + 1  # no choice fits a row
    tops = [above[j] + int(u_max[:, j].max(initial=0)) for j in (0, 1)]
    if (
        max(tops) >= WEIGHT_LIMIT
        or 2 * room + sum(e * a for e, a in zip(ell, above, strict=True)) >= WEIGHT_LIMIT
    ):
        return None
    order = np.argsort(sizes, kind="stable")  # small groups first: the state set grows late
    # The most the groups after stage i can add to each row's use (suffix sums in that order).
    rest_max = np.vstack([np.cumsum(u_max[order][::-1], 0)[::-1], np.zeros((1, 2), dtype=np.int64)])
    bud = np.array(above, dtype=np.int64)
    ell_a = np.array(ell, dtype=np.int64)
    dd = d[idx].astype(np.int64)
    # The groups with one configuration come first (the order): their stages keep the one state (0, 0) of
    # uses (a single configuration uses its group's least) and only add its d, each checked as below but
    # on Python integers (long 500: ~45 of ~55 groups, ~30 numpy calls a stage, most of the bound's CPU).
    singles = int((sizes == 1).sum())
    unfilled_0 = sum(
        int(e) * max(b - int(r), 0) for e, b, r in zip(ell, above, rest_max[singles].tolist(), strict=True)
    )
    total = 0
    for g in order[:singles].tolist():
        work -= 1
        if work < 0:
            return None
        total += int(dd[first[g]])
        if total + unfilled_0 > room:
            return room + 1  # (its one state dropped: none left)
        if max_states < 1:
            return None
    states_d = np.full(1, total, dtype=np.int64)
    states_u = np.zeros((1, 2), dtype=np.int64)
    for i, g in enumerate(order[singles:].tolist(), start=singles):
        ks = np.arange(first[g], first[g + 1])
        work -= len(states_d) * len(ks)
        if work < 0:
            return None
        nd = (states_d[:, None] + dd[ks][None, :]).ravel()
        nu = (states_u[:, None, :] + u[ks][None, :, :]).reshape(-1, 2)
        # The rows' room the remaining groups cannot fill is paid at their prices in any completion.
        unfilled = np.maximum(bud - nu - rest_max[i + 1], 0) @ ell_a
        keep = (nu <= bud).all(1) & (nd + unfilled <= room)
        states_d, states_u = _undominated(nd[keep], nu[keep], ell_a)
        if not len(states_d):
            return room + 1
        if len(states_d) > max_states:
            return None
    f = states_d + (bud - states_u) @ ell_a
    return int(min(int(f.min()), room + 1))


def _undominated(dsum: np.ndarray, u: np.ndarray, ell: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The states (dsum, u) less those another state with the same use of row 0 dominates: no more V = dsum
    - ell . u and no more use of row 1 (exact integers; ties keep one). For every completion the dominating
    state's F is no higher and its uses no higher (within every budget it is). One pass only: the same test
    with the rows swapped, and the full three-way test, removed few more states than they cost (measured)."""
    v = dsum - u @ ell
    o = np.lexsort((v, u[:, 1], u[:, 0]))  # by row 0's use, then row 1's, then V
    dsum, u, v = dsum[o], u[o], v[o]
    # Running minimum of V within each run of equal use of row 0: ranks shifted per run (kept_row_bound
    # does the same for its Pareto fronts).
    rank = np.unique(v, return_inverse=True)[1].astype(np.int64).ravel()
    run = np.concatenate([[0], np.cumsum(u[1:, 0] != u[:-1, 0])]) if len(v) else np.zeros(0, np.int64)
    key = rank - run * (len(v) + 1)
    keep = np.ones(len(v), dtype=bool)
    keep[1:] = key[1:] < np.minimum.accumulate(key)[:-1]
    return dsum[keep], u[keep]
