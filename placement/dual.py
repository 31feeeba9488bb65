"""Lagrangian prices of the budget rows for the engine's bound and reduced-cost fixing (no LP of all groups).

The LP relaxation of "one configuration per group, within the budget rows" has few rows that couple the
groups (per sNIC: capacity, PCIe up and down, resources; the move budget). Its optimum equals the
Lagrangian dual

    max_{lam >= 0} L(lam),  L(lam) = sum_g min_k (cost_k + lam . use_k) - lam . budget,

a concave piecewise-linear function of a handful of prices, each evaluation one vectorised pass over
the configurations. It is maximised here by a stabilised cutting-plane method (Kelley's cuts in a trust
region; the small master LP in GLOP): tens of passes instead of one LP with a row per group (measured
seconds at 5,000 vertices on the loaded machine). Only a guide, like the LP: the engine computes an exact
integer bound from whatever prices come out (engine._bound).
The LP's fractional solution, which the engine rounds for an incumbent, comes from complementary
slackness: only configurations of (near) zero reduced cost at the best prices, a small LP (``_primal``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass
class Prices:
    lam: np.ndarray  # per budget row, >= 0, in cost units per unit of the row
    y: np.ndarray  # per configuration (all, not only the alive ones): fractional LP-like solution
    bound: float  # L(lam), in cost units (floating point: a guide; the exact bound is engine._bound)
    passes: int  # evaluations of L


def _argmin_per_group(v: np.ndarray, st: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    gmin = np.minimum.reduceat(v, st)
    n = len(v)
    cand = np.where(v == np.repeat(gmin, np.diff(np.append(st, n))), np.arange(n), n)
    return gmin, np.minimum.reduceat(cand, st)


def prices(use: np.ndarray, budget: list[int], cost: np.ndarray, start: np.ndarray, alive: np.ndarray,
           deadline: float, rel_tol: float = 1e-7, max_passes: int = 200,
           clock: Callable[[], float] = time.monotonic) -> Prices | None:  # fmt: skip
    """Near-optimal Lagrangian prices (module doc) over the `alive` configurations of groups
    start[g]:start[g+1]; None when a group has no alive configuration. Stops when the cutting-plane
    model's optimum is within `rel_tol` of the best value found (relative to the cost scale), after
    `max_passes` evaluations or at `deadline` (on `clock`)."""
    from ortools.linear_solver.python import model_builder_helper as mbh

    cfg = np.nonzero(alive)[0]
    grp_all = np.repeat(np.arange(len(start) - 1), np.diff(start))
    grp = grp_all[cfg]
    if len(start) - 1 == 0:
        return Prices(np.zeros(len(budget)), np.zeros(len(cost)), 0.0, 0)
    st = np.searchsorted(grp, np.arange(len(start) - 1))
    if len(cfg) == 0 or (np.diff(np.append(st, len(cfg))) == 0).any():
        return None
    b = np.array(budget, dtype=float)
    u = use[cfg].astype(float)
    # Rows scaled to a budget of 1 (or their largest coefficient when the budget is not positive), cost to
    # its total range: prices of order 1 for the master LP.
    scale = np.where(b > 0, b, np.maximum(np.abs(u).max(0, initial=0.0), 1.0))
    u /= scale
    bn = b / scale
    c = cost[cfg].astype(float)
    c_scale = float(np.maximum.reduceat(c, st).sum() - np.minimum.reduceat(c, st).sum()) or 1.0
    c0 = float(np.minimum.reduceat(c, st).sum())
    c = (c - np.repeat(np.minimum.reduceat(c, st), np.diff(np.append(st, len(cfg))))) / c_scale
    n_rows = len(b)
    active = np.abs(u).max(0, initial=0.0) > 0 if len(u) else np.zeros(n_rows, dtype=bool)

    def evaluate(lam: np.ndarray):
        gmin, am = _argmin_per_group(c + u @ lam, st)
        return float(gmin.sum() - lam @ bn), u[am].sum(0) - bn, am

    lam_best = np.zeros(n_rows)
    val_best, g_best, _ = evaluate(lam_best)
    passes, radius, upper = 1, 1.0, np.inf
    m = mbh.ModelBuilderHelper()
    m.add_var_array_with_bounds(np.array([-1.0] + [0.0] * n_rows), np.array([10.0] + [1e6] * n_rows),
                                np.zeros(n_rows + 1, dtype=bool), "v")  # fmt: skip
    m.set_maximize(True)
    m.set_objective_coefficients([0], [1.0])
    theta = mbh.Variable(m, 0)
    lvars = [mbh.Variable(m, 1 + r) for r in range(n_rows)]
    rows = []

    def add_cut(val, g, lam):
        # theta <= val + g . (l - lam)
        ci = m.add_linear_constraint()
        m.set_constraint_lower_bound(ci, -np.inf)
        m.set_constraint_upper_bound(ci, float(val - g @ lam))
        m.add_terms_to_constraint(ci, [theta, *lvars], [1.0, *(-g).tolist()])
        rows.append(ci)

    add_cut(val_best, g_best, lam_best)
    while passes < max_passes and clock() < deadline:
        for r in range(n_rows):
            if active[r]:
                m.set_var_lower_bound(1 + r, max(0.0, lam_best[r] - radius))
                m.set_var_upper_bound(1 + r, lam_best[r] + radius)
            else:
                m.set_var_upper_bound(1 + r, 0.0)
        solver = mbh.ModelSolverHelper("glop")
        solver.solve(m)
        if solver.status() != mbh.SolveStatus.OPTIMAL:
            return None
        sol = np.asarray(solver.variable_values())
        lam, model_val = np.maximum(sol[1:], 0.0), float(sol[0])
        inside = bool((np.abs(lam - lam_best) < radius * 0.999)[active].all())
        if inside:
            upper = min(upper, model_val)
        if model_val - val_best <= rel_tol and (inside or radius >= 1e6):
            break
        val, g, _ = evaluate(lam)
        passes += 1
        add_cut(val, g, lam)
        if val > val_best + 1e-12:
            step = val - val_best
            lam_best, val_best = lam, val
            # A good step (most of the predicted gain): trust the model further.
            if step >= 0.5 * (model_val - (val_best - step)):
                radius *= 2.0
        else:
            radius = max(radius * 0.5, 1e-9)
        if upper - val_best <= rel_tol:
            break
    y = np.zeros(len(cost))
    _, _, am = evaluate(lam_best)
    y[cfg[am]] = 1.0
    d = c + u @ lam_best
    d -= np.repeat(np.minimum.reduceat(d, st), np.diff(np.append(st, len(cfg))))
    for eps in (1e-9, 1e-7, 1e-5, 1e-3):
        mix = _primal(c, u, bn, st, d <= eps)
        if mix is not None:
            y[:] = 0.0
            y[cfg] = mix
            break
    lam_out = lam_best * c_scale / scale
    return Prices(np.maximum(lam_out, 0.0), y, c0 + val_best * c_scale, passes)


def _primal(
    c: np.ndarray, u: np.ndarray, bn: np.ndarray, st: np.ndarray, near: np.ndarray
) -> np.ndarray | None:
    """The LP optimum among the near-tied configurations `near` at the best prices (complementary
    slackness: an optimal fractional solution uses only configurations of reduced cost 0): groups with one
    such configuration take it, the few with several share an LP (GLOP); None if that LP is infeasible."""
    from ortools.linear_solver.python import model_builder_helper as mbh

    n = len(c)
    sizes = np.diff(np.append(st, n))
    cnt = np.add.reduceat(near.astype(np.int64), st)
    if (cnt == 0).any():
        return None
    grp = np.repeat(np.arange(len(st)), sizes)
    single = near & (cnt[grp] == 1)
    y = single.astype(float)
    rest = bn - u[single].sum(0)
    var = np.nonzero(near & (cnt[grp] > 1))[0]
    if not len(var):
        return y if (rest >= -1e-9).all() else None
    m = mbh.ModelBuilderHelper()
    k = len(var)
    m.add_var_array_with_bounds(np.zeros(k), np.ones(k), np.zeros(k, dtype=bool), "y")
    m.set_objective_coefficients(list(range(k)), c[var].tolist())
    ys = [mbh.Variable(m, j) for j in range(k)]
    vg = grp[var]
    bounds = np.searchsorted(vg, np.unique(vg))
    ends = np.append(bounds[1:], k)
    for a, b in zip(bounds.tolist(), ends.tolist(), strict=True):
        ci = m.add_linear_constraint()
        m.set_constraint_lower_bound(ci, 1.0)
        m.set_constraint_upper_bound(ci, 1.0)
        m.add_terms_to_constraint(ci, ys[a:b], [1.0] * (b - a))
    for r in range(u.shape[1]):
        col = u[var, r]
        nz = np.nonzero(col)[0]
        if not len(nz):
            if rest[r] < -1e-9:
                return None
            continue
        ci = m.add_linear_constraint()
        m.set_constraint_lower_bound(ci, -np.inf)
        m.set_constraint_upper_bound(ci, float(rest[r]))
        m.add_terms_to_constraint(ci, [ys[j] for j in nz.tolist()], col[nz].tolist())
    solver = mbh.ModelSolverHelper("glop")
    solver.solve(m)
    if solver.status() != mbh.SolveStatus.OPTIMAL:
        return None
    y[var] = np.clip(np.asarray(solver.variable_values()), 0.0, 1.0)
    return y
