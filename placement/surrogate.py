"""An exact bound above the LP one: the surrogate relaxation with one knapsack row, solved by CP-SAT.

With several sNICs the LP (= Lagrangian) bound can sit further below the optimum than the gap_limit allows,
and CP-SAT on the whole model wades through the near-symmetric choices (the same NFs on one sNIC or on
another, equal in cost) without refuting "cost <= p1 - 1". Replacing the budget rows by one combination
with non-negative integer multipliers (sum_r l_r * use_r <= sum_r l_r * budget_r, l ~ the LP prices) is a
relaxation whatever the sNICs are (every placement within the budgets meets it), so its minimum is a valid
lower bound; with the prices of identical sNICs equal, it pools them: configurations that differ only in
which sNIC an NF uses become equal, and per group only the configurations on the (cost, weight) Pareto
frontier can be in a minimum, a few per group. CP-SAT minimises that one-row problem in a fraction of a
second where the full model takes minutes. Its minimiser is also a hint: the same cost per group, spread
over the real rows (``same_cost``).
"""

from __future__ import annotations

import math
import time

import numpy as np


def frontier(cost: np.ndarray, weight: np.ndarray, start: np.ndarray, alive: np.ndarray) -> np.ndarray:
    """Mask of the alive configurations on their group's Pareto frontier of (cost, weight): no other
    alive configuration of the group has cost and weight both <= (one kept of equal pairs)."""
    n_groups = len(start) - 1
    grp = np.repeat(np.arange(n_groups), np.diff(start))
    idx = np.nonzero(alive)[0]
    order = idx[np.lexsort((weight[idx], cost[idx], grp[idx]))]
    keep = np.zeros(len(cost), dtype=bool)
    g_sorted = grp[order]
    bounds = np.searchsorted(g_sorted, np.arange(n_groups + 1))
    w_sorted = weight[order]
    for g in range(n_groups):
        a, b = int(bounds[g]), int(bounds[g + 1])
        if a == b:
            continue
        w = w_sorted[a:b]
        # Sorted by cost then weight: a configuration is on the frontier when its weight is below every
        # earlier one's.
        prev = np.minimum.accumulate(w)
        on = np.ones(b - a, dtype=bool)
        on[1:] = w[1:] < prev[:-1]
        keep[order[a:b][on]] = True
    return keep


def minimise(cost: np.ndarray, weight: np.ndarray, capacity: int, start: np.ndarray, alive: np.ndarray,
             deadline: float, abs_gap: float = 0.0, hint: list[int] | None = None
             ) -> tuple[int | None, list[int] | None]:  # fmt: skip
    """min sum cost over one alive configuration per group with sum weight <= capacity (CP-SAT, until
    `deadline`): (a proven lower bound of that minimum, the best choice found or None). The bound is None
    when CP-SAT proved nothing (time out); an infeasible relaxation gives a bound of +inf as 2**62."""
    from ortools.sat.python import cp_model

    n_groups = len(start) - 1
    keep = frontier(cost, weight, start, alive)
    m = cp_model.CpModel()
    const_c, const_w = 0, 0
    c_vars, c_coef, w_coef, picks = [], [], [], []
    single = np.full(n_groups, -1, dtype=np.int64)
    for g in range(n_groups):
        ks = np.nonzero(keep[start[g] : start[g + 1]])[0] + int(start[g])
        if not len(ks):
            return 2**62, None
        if len(ks) == 1:
            single[g] = ks[0]
            const_c += int(cost[ks[0]])
            const_w += int(weight[ks[0]])
            continue
        cmin, wmin = int(cost[ks].min()), int(weight[ks].min())
        const_c, const_w = const_c + cmin, const_w + wmin
        vs = [m.new_bool_var(f"g{g}k{k}") for k in ks.tolist()]
        m.add_exactly_one(vs)
        for v, k in zip(vs, ks.tolist(), strict=True):
            c_vars.append(v)
            c_coef.append(int(cost[k]) - cmin)
            w_coef.append(int(weight[k]) - wmin)
            picks.append(k)
    if const_w > capacity:
        return 2**62, None
    if not c_vars:
        return const_c, single.tolist()
    m.add(cp_model.LinearExpr.weighted_sum(c_vars, w_coef) <= capacity - const_w)
    m.minimize(cp_model.LinearExpr.weighted_sum(c_vars, c_coef))
    if hint is not None:
        wanted = set(hint)
        for v, k in zip(c_vars, picks, strict=True):
            m.add_hint(v, k in wanted)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = max(0.01, deadline - time.monotonic())
    solver.parameters.absolute_gap_limit = abs_gap
    status = solver.solve(m)
    if status == cp_model.INFEASIBLE:
        return 2**62, None
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, None
    lower = const_c + math.ceil(solver.best_objective_bound - 1e-6)
    chosen = single.copy()
    for v, k in zip(c_vars, picks, strict=True):
        if solver.boolean_value(v):
            chosen[np.searchsorted(start, k, side="right") - 1] = k
    return lower, chosen.tolist()
