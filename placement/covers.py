"""Cover inequalities of the plain model's knapsack rows, separated at the root LP (issue 25, cuts23).

The plain model (solver._Model, CP-SAT) records its linear rows as it builds them (`Rows`): the
exactly-one rows, the crossing indicators' z >= a - b, and every budget row (capacity, resources, PCIe,
latency) on its working integers. Here GLOP solves the LP relaxation of those rows with the stage-1
objective; only a budget row with a fractional variable at the LP point can be violated by any valid
inequality (an integral point of the row satisfies every cover), so only those rows are separated: a
greedy cover on (1 - v) / a, minimised (dropping j raises the violation by 1 - v_j), extended by every
item at least as heavy as the cover's heaviest. Each cut is checked in integers (its coefficients sum
above the budget: implied by its row alone), so it removes no integer placement and the optimum stands.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

EPS = 1e-6
VIOLATION = 1e-4


@dataclass
class Rows:
    """Linear rows over CP-SAT variable indices: (indices, coefficients, lo, hi); None = unbounded side.
    `budgets`: the indices (into rows) of the knapsack rows (sum a x <= cap, integers)."""

    n_vars: int = 0
    rows: list[tuple[list[int], list[int], int | None, int | None]] = field(default_factory=list)
    budgets: list[int] = field(default_factory=list)
    objective: list[tuple[int, int]] = field(default_factory=list)  # (coefficient, index), minimised

    def add(self, idx: list[int], coeffs: list[int], lo: int | None, hi: int | None, budget: bool = False):
        if len(set(idx)) < len(idx):  # a variable twice (a chain through a vertex twice): one term
            merged: dict[int, int] = {}
            for v, c in zip(idx, coeffs, strict=True):
                merged[v] = merged.get(v, 0) + c
            idx, coeffs = list(merged), list(merged.values())
        if budget:
            self.budgets.append(len(self.rows))
        self.rows.append((idx, coeffs, lo, hi))


def separate(idx, coeffs, cap, val) -> tuple[list[tuple[int, bool]], int] | None:
    """A violated extended minimal cover of sum(coeffs x) <= cap at `val`: (literals (index, negated), rhs)
    meaning sum of literals <= rhs, or None."""
    items = []  # (weight > 0, var, negated, value of the literal)
    budget = cap
    for v, c in zip(idx, coeffs, strict=True):
        if c > 0:
            items.append((c, v, False, val[v]))
        elif c < 0:  # c x = c - c (1 - x): the complement with weight -c, budget - c
            items.append((-c, v, True, 1.0 - val[v]))
            budget -= c
    if budget < 0:
        return None  # no integer point (the CP-SAT model says infeasible itself)
    cand = sorted((t for t in items if t[3] > EPS), key=lambda t: (1.0 - t[3]) / t[0])
    cover, weight = [], 0
    for t in cand:
        cover.append(t)
        weight += t[0]
        if weight > budget:
            break
    if weight <= budget:
        return None
    for t in sorted(cover, key=lambda t: t[3]):
        if weight - t[0] > budget:
            cover.remove(t)
            weight -= t[0]
    if weight <= budget:  # pragma: no cover - by construction
        return None
    rhs = len(cover) - 1
    if sum(t[3] for t in cover) <= rhs + VIOLATION:
        return None
    top = max(t[0] for t in cover)
    inside = {t[1] for t in cover}
    ext = [(t[1], t[2]) for t in items if t[1] not in inside and t[0] >= top]
    return [(t[1], t[2]) for t in cover] + ext, rhs


def implied(idx, coeffs, cap, lits, rhs) -> bool:
    """Whether the cut sum(lits) <= rhs is implied by the row sum(coeffs x) <= cap alone, in integers: the
    rhs + 1 lightest literals of the cut (weights as in the row, complemented where negated) exceed the
    row's budget, so no 0/1 point of the row has rhs + 1 of them true."""
    w = dict(zip(idx, coeffs, strict=True))
    budget = cap - sum(c for c in coeffs if c < 0)
    weights = []
    for v, neg in lits:
        c = w.get(v, 0)
        if (c > 0) == neg or c == 0:
            return False  # a literal the row does not weigh: the check proves nothing
        weights.append(abs(c))
    weights.sort()
    return rhs + 1 <= len(weights) and sum(weights[: rhs + 1]) > budget


class RootLP:
    """GLOP on the LP relaxation of `rows` (booleans in [0, 1], rows.objective minimised): every row divided
    by its largest coefficient, the objective by its largest, rows in their recorded order (it picks GLOP's
    vertex among ties, and so the cuts); a row with neither side bounded is left out. `cons`: the LP row of
    each kept row, then of each row added by add_row()."""

    def __init__(self, rows: Rows):
        from ortools.linear_solver import pywraplp

        self.lp = pywraplp.Solver.CreateSolver("GLOP")
        self.xs = [self.lp.NumVar(0.0, 1.0, "") for _ in range(rows.n_vars)]
        self.cons: list = []
        self.kept: list[tuple[list[int], list[int], int | None, int | None]] = []
        for idx, coeffs, lo, hi in rows.rows:
            if lo is not None or hi is not None:
                self.add_row(idx, coeffs, lo, hi)
        obj = self.lp.Objective()
        self.scale = float(max((abs(c) for c, _ in rows.objective), default=1))
        for c, v in rows.objective:
            obj.SetCoefficient(self.xs[v], c / self.scale)
        obj.SetMinimization()

    def add_row(self, idx: list[int], coeffs: list[int], lo: int | None, hi: int | None) -> None:
        inf = self.lp.infinity()
        top = max((abs(c) for c in coeffs), default=1) or 1
        row = self.lp.Constraint(-inf if lo is None else lo / top, inf if hi is None else hi / top)
        for v, c in zip(idx, coeffs, strict=True):
            row.SetCoefficient(self.xs[v], c / top)
        self.kept.append((list(idx), list(coeffs), lo, hi))
        self.cons.append(row)

    def solve(self) -> bool:
        """Whether GLOP ends optimal."""
        from ortools.linear_solver import pywraplp

        return self.lp.Solve() == pywraplp.Solver.OPTIMAL


def cover_cuts(rows: Rows, rounds: int = 5, root: RootLP | None = None):
    """Cover cuts (lits, rhs) of the budget rows at GLOP's LP point (rows.objective minimised), up to
    `rounds` rounds; every cut checked in integers against its row. `root`: RootLP(rows) to work on (each
    cut is added to it as a row over the variables: sum of x minus sum of the negated x <= rhs minus their
    count; snics25: the Gomory separator then starts from that LP)."""
    if root is None:
        root = RootLP(rows)
    cuts, seen = [], set()
    for _ in range(rounds):
        if not root.solve():
            break
        val = [x.solution_value() for x in root.xs]
        frac = [EPS < v < 1 - EPS for v in val]
        new = 0
        for r in rows.budgets:
            idx, coeffs, _, cap = rows.rows[r]
            if not any(frac[v] for v in idx):
                continue
            cut = separate(idx, coeffs, cap, val)
            if cut is None:
                continue
            key = (tuple(sorted(cut[0])), cut[1])
            if key in seen:
                continue
            if not implied(idx, coeffs, cap, *cut):
                # (never by construction; a cut not proven implied would cut placements: left out)
                log.warning("cover cut of a budget row not implied by it: left out")
                continue
            seen.add(key)
            cuts.append(cut)
            new += 1
            root.add_row(  # sum of the literals <= rhs, over the variables
                [v for v, _ in cut[0]],
                [-1 if neg else 1 for _, neg in cut[0]],
                None,
                cut[1] - sum(1 for _, neg in cut[0] if neg),
            )
        if not new:
            break
    return cuts
