"""Our exact engine: decomposed configurations (decompose.py), exact reduction, then CP-SAT on a small core.

Pipeline (every step exact; the floating-point LP is only a guide):
1. ``prepare``: integer data, independent groups, dominated configurations dropped.
2. The budget rows tightened (``_tightened``: configurations no placement can use dropped, uses raised
   where a group's choice alone covers a row's excess; exact). Prices of the budget rows maximising the
   Lagrangian dual of the primary cost (dual.py; equal to the LP relaxation's optimum, GLOP's LP as the
   fallback); from them an EXACT integer Lagrangian bound and
   per configuration reduced costs (``_bound``). The repaired LP rounding (or the current placement),
   made cheaper by an exact local search (swaps.py; where several sNIC rows bind at one price, first the
   pooled fill and split of pack.py), is the incumbent p1 when within the slack of the
   bound; else CP-SAT solves a small restricted core around the LP optimum for it (lexicographic
   objective folded, below), its result again improved by the local search and, where it is still far
   above the bound on a wide proof core, by CP-SAT minimising on the configurations within a third of
   its gap (``_widened``).
3. Reduced-cost fixing: a configuration whose bound exceeds p1 cannot be in any optimum and is removed.
   p1 is proven optimal when the bound rounds up to it, or else when a dynamic programme over the
   (small, gcd-reduced) integer costs shows that even the relaxation keeping only the most binding budget
   row has no solution of cost p1 - 1 (``_dp_no_better``), or when a relaxation keeping one binding row
   exactly and pricing the others (rowbound.py) shows it, or one keeping the two most binding rows exactly
   (``_two_rows_bound``: a sparse DP over both rows' uses, given up past its states); those relaxations'
   bounds, above the LP's where two rows bind, otherwise raise the floor of the bisection below. When the
   bound is tight but the
   incumbent is not within its slack, one boxed CP-SAT question among the near-free configurations
   (``_near_free``, asked before the local search of step 2 when that runs) looks for a placement the
   bound proves. Where the incumbent is still many slacks above the bound on a small core, CP-SAT
   minimises there in a small box (``_minimised``): its own objective bound proves p1 or raises the
   bisection's floor. Otherwise CP-SAT proves the primary
   on the fixed core by feasibility questions "cost <= x?" (bisecting between the bound and p1 while far apart,
   but asking p1's refutation first, without ``_minimised``, when p1 is a CP-SAT core's proven optimum),
   each with the exact reduced-cost row as a redundant constraint (and, where the kept-row bound rose above
   the LP's, one per binding row of the prices with that row's freed: ``_row_freed_bounds``); below a core's
   floor (``_CoreFloor``) each asks for a configuration outside that core, and where the grown core's floor
   does not decide the refutation, CP-SAT first minimises inside it (``_inside``) so that it does; on a small
   core each question is first answered exactly without CP-SAT (choicebb.py, boxed; ``_answered``), CP-SAT asked when it runs out.
4. Tie-breaks (fewer PCIe units, then fewer moves) among placements of cost p1: a second exact bound with
   the row cost == p1 fixes more configurations; then CP-SAT on the core with one folded objective,
   boxed in a share of the primary's deterministic work (the host cost is proven already;
   ``tiebreak_proven`` says whether the tie-break is).

Determinism: every box inside the user's limit is deterministic work (CP-SAT's deterministic time, the
local search's units, work.py), never seconds; the clock (passed in) bounds only the whole solve and the
tie-break (``tiebreak_time``), so the same groups and options give the same path on any machine load.

Folding: with per-group ranges rebased to 0, Rm = total range of moves and Rp = of PCIe units, the weights
W_pcie = Rm + 1 and W_cost = (Rp + 1) * (Rm + 1) make the folded minimum the lexicographic one: a change of
the PCIe term by >= 1 unit outweighs every change of moves (<= Rm < W_pcie), and a change of cost by >= 1
unit outweighs every change of the rest (<= Rp * W_pcie + Rm < W_cost). When the folded values would not
fit in 60 bits, the levels are solved in stages (each bounding the previous optimum) instead.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from types import SimpleNamespace

import numpy as np

from placement import choicebb, knapsack
from placement.cpsat import new_solver, new_stock_solver, satisfies
from placement.decompose import SAFE, Groups
from placement.dual import prices
from placement.pack import pack
from placement.rowbound import kept_row_bound, two_rows_bound
from placement.swaps import fill, improve, shake
from placement.work import Work

log = logging.getLogger(__name__)


class ModelRefused(RuntimeError):
    """A solver refused a model we built (CP-SAT's MODEL_INVALID, e.g. a row that could overflow 64 bits, or
    the MIP's MODEL_INVALID/ABNORMAL): a defect of ours, never to be taken for a time-out."""


@dataclass
class Outcome:
    status: str  # optimal | feasible | infeasible | unknown
    chosen: list[int] | None  # global configuration index per group
    gap: float = 0.0  # proven relative gap of the primary cost (feasible only)
    core_groups: int = 0  # groups that still had a choice in the last CP-SAT model
    tiebreak_proven: bool = False  # PCIe / moves tie-breaks proven minimal too
    primary_seconds: float | None = None  # when the primary cost was proven (seconds from the start)
    # Groups split at a loose PCIe link (Groups.free_edges): the configurations a placement of primary at
    # most the answer's may use (the caller's tie-break pins the groups keeping one; solver._tiebreak)
    alive: np.ndarray | None = None


def _reduce(values: np.ndarray, start: np.ndarray, fn) -> np.ndarray:
    if len(values) == 0:
        return np.zeros(0, dtype=np.int64)
    return fn.reduceat(values, start[:-1])


@dataclass
class _Run:
    """One solve's clock (read for the outer deadline only) and the CP-SAT deterministic time it spent."""

    clock: Callable[[], float] = time.monotonic
    cpsat_work: float = 0.0
    exact_work: int = 0  # units of the exact answers (choicebb.py)
    stock_found: int = 0  # placements from a stock-presolve run (_Core.solve's `stock`), checked exactly
    stock_refused: int = 0  # such placements that failed the exact check (not used)


@functools.cache
def _model_class() -> type:
    """CP-SAT's CpModel without its pre-PEP 8 aliases. CpModel() binds a deprecated camelCase alias of each
    add_ / new_ / clear_ method on every instance it makes (dir() and getattr over the whole class, ~1.5 ms a
    model: 5 % of the engine's CPU at 500 vertices, where a solve builds about ten small models; measured,
    bench/RESULTS.md place pin19); the engine calls only the snake_case names, and the model's proto is the
    same. Its minimize writes CpModel.minimize's objective, faster (tests/placement/test_core_model.py)."""
    from ortools.sat.python import cp_model
    from ortools.sat.python import cp_model_helper as cmh

    class _Model(cp_model.CpModel):
        def _add_pre_pep8_methods(self) -> None:
            return None

        def minimize(self, obj) -> None:
            """CpModel.minimize for the engine's integer linear expressions (the same proto): the variables'
            indices extended at once, where CP-SAT appends them one by one (~1 ms a core of 300 variables)."""
            if not isinstance(obj, cp_model.LinearExpr) or not obj.is_integer():
                return super().minimize(obj)
            self.clear_objective()
            flat = cmh.FlatIntExpr(obj)
            objective = self.model_proto.objective
            objective.vars.extend([v.index for v in flat.vars])
            objective.scaling_factor = 1.0
            objective.offset = flat.offset
            objective.coeffs.extend(flat.coeffs)
            return None

    return _Model


@functools.cache
def _bool_domain():
    from ortools.util.python import sorted_interval_list

    return sorted_interval_list.Domain(0, 1)


def _new_bool_vars(m, names: list[str]) -> list:
    """m.new_bool_var(name) for each name, in order (the same proto), with one 0-1 domain for all: CpModel's
    builds a Domain object per variable (about a third of a core's build, measured)."""
    from ortools.sat.python import cp_model_helper as cmh

    proto, domain = m.model_proto, _bool_domain()
    return [cmh.IntVar(proto).with_name(n).with_domain(domain) for n in names]


class _Core:
    """The CP-SAT model of the groups that still have a choice (the rest are constants)."""

    def __init__(
        self, gr: Groups, alive: np.ndarray, workers: int, linearization: int, run: _Run | None = None
    ):
        from ortools.sat.python import cp_model

        self.cp = cp_model
        self.run = run if run is not None else _Run()
        self.gr, self.workers, self.linearization = gr, workers, linearization
        self.m = _model_class()()
        start = gr.start
        n_alive = np.add.reduceat(alive.astype(np.int64), start[:-1]) if len(alive) else alive
        self.single = np.zeros(gr.n_groups, dtype=np.int64)  # the configuration of a group without choice
        multi = []
        for g, cnt in enumerate(np.asarray(n_alive).tolist()):
            if cnt == 1:
                self.single[g] = start[g] + int(np.argmax(alive[start[g] : start[g + 1]]))
            else:
                multi.append(g)
                self.single[g] = -1
        self.multi = multi
        self.var_cfg = np.nonzero(alive & np.repeat(self.single < 0, np.diff(start)))[0]
        self.vars = _new_bool_vars(self.m, [f"y{c}" for c in self.var_cfg.tolist()])
        self.var_of = {c: v for c, v in zip(self.var_cfg.tolist(), self.vars, strict=True)}
        grp = np.repeat(np.arange(gr.n_groups), np.diff(start))[self.var_cfg]
        bounds = np.searchsorted(grp, np.arange(gr.n_groups + 1)) if len(grp) else None
        for g in multi:
            self.m.add_exactly_one(self.vars[bounds[g] : bounds[g + 1]])
        fixed_cfg = self.single[self.single >= 0]
        self.infeasible_row = None
        # Each group with a choice takes exactly one configuration, so its least value of a row (or of an
        # objective) is spent whatever it chooses: moved into the constant, the row keeps its meaning with
        # smaller coefficients. This is the reduction CP-SAT's own presolve makes, which placement/cpsat.py
        # turns off (its 9.15 code drops optima); without it here some proofs took x2-x9 longer (measured).
        self._firsts = bounds[multi] if multi else np.zeros(0, dtype=np.int64)
        self._sizes = np.diff(np.append(self._firsts, len(self.var_cfg)))
        for r, budget in enumerate(gr.budget):
            const = int(gr.use[fixed_cfg, r].sum()) if len(fixed_cfg) else 0
            coef, least = self._shifted(gr.use[self.var_cfg, r])
            const += least
            nz = np.nonzero(coef)[0]
            if len(nz):
                expr = cp_model.LinearExpr.weighted_sum(
                    [self.vars[k] for k in nz.tolist()], coef[nz].tolist()
                )
                self.m.add(expr <= budget - const)
            elif const > budget:
                self.infeasible_row = gr.row_names[r]
                self.m.add_bool_or([])  # unsatisfiable
        self.hint = None
        self.stock_optimal = False  # (see solve)

    def _shifted(self, coef: np.ndarray) -> tuple[np.ndarray, int]:
        """Per-variable `coef` less its group's least, and the sum of those leasts (spent by any choice)."""
        if not len(self._firsts):
            return coef, 0
        least = np.minimum.reduceat(coef, self._firsts)
        return coef - np.repeat(least, self._sizes), sum(least.tolist())  # (Python integers: no overflow)

    def const(self, values: np.ndarray) -> int:
        """What every placement of this core spends of `values` whatever it chooses: its sum over the
        groups without a choice and each other group's least (objective(values) + const(values) is the
        placement's sum of `values`)."""
        single = self.single[self.single >= 0]
        fixed = int(values[single].sum()) if len(single) else 0
        return fixed + self._shifted(values[self.var_cfg])[1]

    def objective(self, values: np.ndarray):
        """Linear expression over this core's variables of per-configuration `values` less each group's
        least (see const)."""
        coef = self._shifted(values[self.var_cfg])[0]
        nz = np.nonzero(coef)[0]
        return self.cp.LinearExpr.weighted_sum([self.vars[k] for k in nz.tolist()], coef[nz].tolist())

    def add_reduced_cut(self, d: np.ndarray, room: int) -> None:
        """sum of d over the chosen configurations <= room, with d >= 0 (exact reduced costs: every
        placement of the cost asked satisfies it), scaled down (rounded down, still valid) to fit CP-SAT's
        64 bits. Redundant for the LP, but CP-SAT propagates one combined row far better than the cost row
        and the budget rows apart."""
        single = self.single[self.single >= 0]
        coef, least = self._shifted(d[self.var_cfg])  # (each group's least spent whatever it chooses)
        room -= sum(d[single].tolist()) + least  # Python integers: no int64 overflow
        if room < 0:
            self.m.add_bool_or([])
            return
        total = sum(coef.tolist())  # CP-SAT refuses a row whose terms could sum past 64 bits
        if room >= total:
            return  # implied: every choice meets it
        q = 1 << max(0, total.bit_length() - 55)
        scaled = coef // q
        nz = np.nonzero(scaled)[0]
        if len(nz):
            expr = self.cp.LinearExpr.weighted_sum([self.vars[k] for k in nz.tolist()], scaled[nz].tolist())
            self.m.add(expr <= room // q)

    def add_outside(self, keep: np.ndarray) -> None:
        """At least one chosen configuration outside `keep` (where a ``_CoreFloor`` proves every placement
        inside it costs more than asked)."""
        if (~keep[self.single[self.single >= 0]]).any():
            return  # a group without a choice is outside already
        out = np.nonzero(~keep[self.var_cfg])[0]
        self.m.add_bool_or([self.vars[k] for k in out.tolist()])  # (none: unsatisfiable)

    def solve(self, deadline: float, hint: list[int] | None, abs_gap: float = 0.0, work: float | None = None,
              cuts: bool = True, first: bool = False, conflicts: int | None = None,
              stock: float | None = None, lead: float | None = None):  # fmt: skip
        """CP-SAT until `deadline` (wall clock) and, if given, `work` units of CP-SAT's deterministic time
        (a box that does not shrink when the machine is loaded) or `conflicts` conflicts (also
        deterministic). `cuts=False`: no cutting planes (cut_level 0; where they cost more than they
        prune, see the callers). `first`: stop at the first solution (a question asked with an objective
        only to guide the search: status "feasible"). `stock`: first a run with CP-SAT's stock presolve
        (placement/cpsat.py), boxed in `stock` deterministic seconds (within `work`), for a PLACEMENT only:
        one that meets every row of this model in exact integers (cpsat.satisfies) comes back as
        "feasible" with no bound, whatever that run called it (`self.stock_optimal`: whether it said
        "optimal", a hint for the caller's order of questions, never a proof); without one, the run with
        the safe solver follows in the rest of the box, and its answers (a proof included) are returned.
        `lead` (with `stock`): before the stock run, one with the safe solver boxed in `lead` deterministic
        seconds, whose answer is taken if it has one (optimal, infeasible; with `first` a solution)."""
        self.stock_optimal = False
        self.m.clear_hints()
        if hint is not None:
            for c in hint:
                v = self.var_of.get(c)
                if v is not None:
                    self.m.add_hint(v, 1)
        if lead is not None and stock is not None and self.vars:
            solver = new_solver(self.cp)
            self._set(
                solver, deadline, abs_gap, lead if work is None else min(lead, work), cuts, first, conflicts
            )
            st = self._run_solver(solver)
            if st in (self.cp.OPTIMAL, self.cp.INFEASIBLE) or (st == self.cp.FEASIBLE and first):
                return self._answer(solver, st)  # (answered; a solution its box cut short is not)
            if work is not None:
                work = max(1e-3, work - solver.deterministic_time)
        if stock is not None and self.vars:
            box = stock if work is None else min(stock, work)
            solver = new_stock_solver(self.cp)
            if self._set(solver, deadline, abs_gap, box, cuts, first, conflicts):
                st = self._run_solver(solver)
                if st in (self.cp.OPTIMAL, self.cp.FEASIBLE):
                    values = [int(solver.boolean_value(v)) for v in self.vars]
                    if satisfies(self.m.model_proto, values):
                        self.stock_optimal = st == self.cp.OPTIMAL
                        self.run.stock_found += 1
                        return (
                            "feasible",
                            self._chosen(np.array(values, dtype=bool)),
                            solver.objective_value,
                            None,
                        )
                    self.run.stock_refused += 1
                if work is not None:
                    work = max(1e-3, work - solver.deterministic_time)
        solver = new_solver(self.cp)
        self._set(solver, deadline, abs_gap, work, cuts, first, conflicts)
        return self._answer(solver, self._run_solver(solver))

    def _answer(self, solver, st) -> tuple:
        """(status, placement, objective, bound) of a safe solver's run (new_solver)."""
        status = {self.cp.OPTIMAL: "optimal", self.cp.FEASIBLE: "feasible", self.cp.INFEASIBLE: "infeasible"}
        status = status.get(st, "unknown")
        if status not in ("optimal", "feasible"):
            return status, None, None, None
        values = np.array([solver.boolean_value(v) for v in self.vars], dtype=bool) if self.vars else None
        return status, self._chosen(values), solver.objective_value, solver.best_objective_bound

    def _set(self, solver, deadline: float, abs_gap: float, work: float | None, cuts: bool, first: bool,
             conflicts: int | None) -> bool:  # fmt: skip
        """The parameters of one solve (see solve); whether CP-SAT's presolve runs."""
        if conflicts is not None:
            solver.parameters.max_number_of_conflicts = conflicts
        if not cuts:
            solver.parameters.cut_level = 0
        solver.parameters.stop_after_first_solution = first
        solver.parameters.absolute_gap_limit = abs_gap
        solver.parameters.max_time_in_seconds = max(0.01, deadline - self.run.clock())
        presolve = True
        if work is not None:
            solver.parameters.max_deterministic_time = work
            if work < NO_PRESOLVE_WORK and len(self.vars) > NO_PRESOLVE_VARS:
                # CP-SAT adds presolve's deterministic time only when it ends: a box this small would
                # be overrun by a whole presolve (measured: mesh 5,000's tie-break 0.073 for 0.0125).
                solver.parameters.cp_model_presolve = presolve = False
        solver.parameters.num_workers = self.workers
        solver.parameters.linearization_level = self.linearization
        return presolve

    def _run_solver(self, solver):
        st = solver.solve(self.m)
        self.run.cpsat_work += solver.deterministic_time
        log.debug("cp-sat wall %.3f deterministic %.3f vars %d", solver.wall_time, solver.deterministic_time,
                  len(self.vars))  # fmt: skip
        if st == self.cp.MODEL_INVALID:
            raise ModelRefused(f"CP-SAT refused the engine's model: {self.m.validate() or 'no reason given'}")
        return st

    def _chosen(self, values: np.ndarray | None) -> list[int]:
        """The configuration of each group: its single one, or the one its variables pick."""
        chosen = self.single.copy()
        if self.vars:
            picked = self.var_cfg[values]
            grp = np.searchsorted(self.gr.start, picked, side="right") - 1
            chosen[grp] = picked
        return chosen.tolist()


def _tightened(gr: Groups) -> tuple[Groups, np.ndarray]:
    """The groups with every budget row's coefficients tightened, and the configurations that can be in a
    placement meeting every row (exact; the placements meeting every row are the same, only the LP
    relaxation is tighter: the coefficient tightening of a MIP presolve, measured, bench/RESULTS.md big25).

    1. A configuration k of group g with use_k + sum over the other groups of their least use > budget (in
       one row) is in no placement meeting that row: not alive (repeated while that raises a least use).
    2. Per row, with top_g the most a group's alive configuration uses and need = sum_g top_g - budget (what
       the groups must leave unused together), every use below top_g - need is raised to it. A placement
       meets the row before iff after: raising only adds; and if one group's use was raised, to
       top_g - need, the others use at most their tops, so the row's total is at most
       top_g - need + (budget + need - top_g) = budget. Where need <= 0 (the row cannot bind) every use
       becomes its group's top: the row holds whatever the choice, and the engine's CP-SAT models leave it
       out (third draw 3000: 15.0 CPU s with those rows kept, 6.1 without). Without the raise the LP may
       pay for a fraction of a configuration leaving far more than the need unused (an elephant NF kept
       off an sNIC whose whole excess it covers alone: one-sNIC draw 3007 of bench/placement/third.py, LP
       0.9 % below the optimum, 0.013 % after)."""
    alive = np.ones(len(gr.cost), dtype=bool)
    if not gr.n_groups or not len(gr.budget) or not len(gr.cost):
        return gr, alive
    use = gr.use
    sizes = np.diff(gr.start)
    budget = [int(b) for b in gr.budget]
    least, top = _reduce(use, gr.start, np.minimum), _reduce(use, gr.start, np.maximum)
    for _ in range(4):
        room = [b - sum(least[:, r].tolist()) for r, b in enumerate(budget)]
        if min(room) < 0:
            return gr, np.ones(len(gr.cost), dtype=bool)  # infeasible as it is: the steps below say so
        room_a = np.array(room, dtype=np.int64)
        if not (top - least > room_a).any():
            break  # (no group's alive configuration is over: the usual case, without a pass over them all)
        dead = alive & ((use - np.repeat(least, sizes, axis=0)) > room_a).any(axis=1)
        alive = alive & ~dead  # (each group's least stays: the room is >= 0)
        least = _reduce(np.where(alive[:, None], use, SAFE), gr.start, np.minimum)
        top = _reduce(np.where(alive[:, None], use, -SAFE), gr.start, np.maximum)
    new = None
    for r, b in enumerate(budget):
        need = sum(top[:, r].tolist()) - b
        # (need <= 0: every use its group's top, a constant row CP-SAT's model leaves out; a need past every
        # top raises nothing, and min() keeps the int64 arithmetic from overflowing)
        floor_ = top[:, r] - min(max(need, 0), SAFE)
        if not (floor_ > least[:, r]).any():
            continue
        if new is None:
            new = use.copy()
        new[:, r] = np.maximum(use[:, r], np.repeat(floor_, sizes))
    return (gr if new is None else dataclasses.replace(gr, use=new)), alive


def _levels(arrays: list[np.ndarray], start: np.ndarray) -> list[list[tuple[np.ndarray, int]]]:
    """Objective stages for lexicographic levels `arrays` (most significant first): each stage a list of
    (per-group rebased values, weight), folded into one objective while the folded values fit."""
    lv = []
    for arr in arrays:
        lo = _reduce(arr, start, np.minimum)
        hi = _reduce(arr, start, np.maximum)
        lv.append((arr - np.repeat(lo, np.diff(start)), int((hi - lo).sum())))
    stages: list[list[tuple[np.ndarray, int]]] = []
    cur: list[tuple[np.ndarray, int]] = []
    span, total = 0, 0.0  # largest folded value of the current stage, and the sum of all its values
    for reb, rng in reversed(lv):  # from the least significant level upward
        w = span + 1 if cur else 1
        new_span, new_total = span + rng * w, total + float(reb.sum()) * w
        if cur and (new_span >= SAFE or new_total >= SAFE):
            stages.insert(0, cur)
            cur, w, new_span, new_total = [], 1, rng, float(reb.sum())
        cur = [(reb, w), *cur]
        span, total = new_span, new_total
    stages.insert(0, cur)
    return stages


def _fold(stage: list[tuple[np.ndarray, int]]) -> np.ndarray:
    out = np.zeros_like(stage[0][0])
    for reb, w in stage:
        out = out + reb * w
    return out


def _lp(gr: Groups, alive: np.ndarray, obj: np.ndarray, eqs: list[tuple[np.ndarray, int]]):
    """LP relaxation over the alive configurations (GLOP): min obj s.t. one per group, budget rows,
    and equality rows sum(coef * y) == rhs. Returns (duals of budget rows >= 0, duals of equality rows,
    primal values over all configurations), or None. Only a guide: ``_bound`` recomputes an exact bound
    from these multipliers, whatever their precision."""
    from ortools.linear_solver.python import model_builder_helper as mbh

    cfg = np.nonzero(alive)[0]
    n = len(cfg)
    m = mbh.ModelBuilderHelper()
    m.add_var_array_with_bounds(np.zeros(n), np.ones(n), np.zeros(n, dtype=bool), "y")
    # GLOP fails ("abnormal") on coefficients of 2^40 and more: every row and the objective are divided
    # by their largest coefficient, and the duals scaled back.
    obj_f = obj[cfg].astype(float)
    o_scale = float(np.abs(obj_f).max(initial=0.0)) or 1.0
    m.set_objective_coefficients(list(range(n)), (obj_f / o_scale).tolist())
    ys = [mbh.Variable(m, k) for k in range(n)]
    grp = np.repeat(np.arange(gr.n_groups), np.diff(gr.start))[cfg]
    bounds = np.searchsorted(grp, np.arange(gr.n_groups + 1)).tolist()
    for g in range(gr.n_groups):
        c = m.add_linear_constraint()
        m.set_constraint_lower_bound(c, 1.0)
        m.set_constraint_upper_bound(c, 1.0)
        m.add_terms_to_constraint(c, ys[bounds[g] : bounds[g + 1]], [1.0] * (bounds[g + 1] - bounds[g]))
    rows, scales = [], []
    specs = [(gr.use[cfg, r], -math.inf, float(b)) for r, b in enumerate(gr.budget)]
    specs += [(coef[cfg], float(rhs), float(rhs)) for coef, rhs in eqs]
    for col, lo, hi in specs:
        c = m.add_linear_constraint()
        rows.append(c)
        col_f = col.astype(float)
        f = float(np.abs(col_f).max(initial=0.0)) or 1.0
        scales.append(f)
        m.set_constraint_lower_bound(c, lo / f)
        m.set_constraint_upper_bound(c, hi / f)
        nz = np.nonzero(col)[0]
        m.add_terms_to_constraint(c, [ys[k] for k in nz.tolist()], (col_f[nz] / f).tolist())
    solver = mbh.ModelSolverHelper("glop")
    solver.solve(m)
    if solver.status() != mbh.SolveStatus.OPTIMAL:
        return None
    duals = -np.asarray(solver.dual_values())[rows] * o_scale / np.array(scales) if rows else np.zeros(0)
    nb = len(gr.budget)
    y = np.zeros(len(obj))
    y[cfg] = np.asarray(solver.variable_values())
    return np.maximum(0.0, duals[:nb]), duals[nb:], y


def _prices(gr: Groups, alive: np.ndarray, deadline: float, clock: Callable[[], float] = time.monotonic):
    """Prices of the budget rows and a fractional solution for the primary cost: the Lagrangian dual
    (dual.py, a few vectorised passes), else the LP relaxation (GLOP); the same shape as ``_lp``."""
    pr = prices(gr.use, gr.budget, gr.cost, gr.start, alive, deadline, clock=clock)
    if pr is None:
        return _lp(gr, alive, gr.cost, [])
    log.debug("prices: %d passes, bound %.1f", pr.passes, pr.bound)
    return pr.lam, np.zeros(0), pr.y


BIG = 2**62


def _bound(gr: Groups, alive: np.ndarray, obj: np.ndarray, lam: np.ndarray,
           eqs: list[tuple[np.ndarray, int]], mu: np.ndarray) -> tuple[int, int, np.ndarray]:  # fmt: skip
    """Exact Lagrangian bound from multipliers lam (budget rows) and mu (equality rows).

    With integers l ~ den * lam (l >= 0) and u ~ den * mu (any sign), every solution x using only alive
    configurations, meeting the budgets and the equality rows, satisfies
      den * obj(x) >= sum_g min_k (den * obj_k + l . use_k + u . eq_k) - l . budget - u . rhs  =: lb,
    and if it uses configuration k of group g: den * obj(x) >= lb + d_k, with d_k = (that bracket for k)
    - (its minimum over g's alive configurations) >= 0. Returns (lb, den, d), exact integers (d is
    meaningless for configurations that are not alive).
    """
    cols = [gr.use[:, r] for r in range(len(gr.budget))] + [coef for coef, _ in eqs]
    rhs = list(gr.budget) + [int(r) for _, r in eqs]
    den, ell = _integer_prices(gr, obj, lam, eqs, mu)
    val = den * obj
    for e, c in zip(ell, cols, strict=True):
        if e:
            val = val + e * c
    val = np.where(alive, val, BIG)
    gmin = _reduce(val, gr.start, np.minimum)
    d = val - np.repeat(gmin, np.diff(gr.start))
    lb = sum(gmin.tolist()) - sum(e * r for e, r in zip(ell, rhs, strict=True))
    return lb, den, d


def _integer_prices(gr: Groups, obj: np.ndarray, lam: np.ndarray, eqs: list[tuple[np.ndarray, int]],
                    mu: np.ndarray) -> tuple[int, list[int]]:  # fmt: skip
    """The integers den and l ~ den * lam (rounded down: l >= 0), u ~ den * mu (rounded) of ``_bound``: den
    as large as keeps den * obj + l . use of one configuration below 2**60. Where even den = 1 does not
    (huge prices: a folded objective's weight times the budget rows' prices), the multipliers are scaled
    down instead (den 1, l ~ f * lam with f < 1): ``_bound`` holds for ANY l >= 0 and u, only weaker."""
    cols = [gr.use[:, r] for r in range(len(gr.budget))] + [coef for coef, _ in eqs]
    mult = np.concatenate([lam, mu]) if len(mu) else lam
    maxes = [float(np.abs(c).max()) if len(c) else 0.0 for c in cols]
    max_o = float(np.abs(obj).max()) if len(obj) else 0.0
    den = 2**30
    while (
        den > 1 and den * max_o + sum(abs(x) * den * mx for x, mx in zip(mult, maxes, strict=True)) >= 2**60
    ):
        den //= 2
    scale = float(den)
    spread = sum(abs(x) * mx for x, mx in zip(mult, maxes, strict=True))
    if max_o + scale * spread >= 2**60:  # den is 1: shrink the multipliers (0 when obj alone is that large)
        scale = 0.0 if max_o >= 2**59 else 2.0 ** math.floor(math.log2((2**59 - max_o) / spread))
    ell = [int(math.floor(x * scale)) if k < len(lam) else int(round(x * scale)) for k, x in enumerate(mult)]
    return den, ell


DP_STATES = 400_000
# The exact local search's box (swaps.py): SWAP_SHARE of the time limit, at most SWAP_MAX seconds, as work
# units at SWAP_RATE units per second of an idle core (calibrated in bench/RESULTS.md, helper place9).
SWAP_SHARE, SWAP_MAX, SWAP_RATE = 0.3, 1.0, 800_000_000
TIES_SWAP_CAP = 3.0  # x SWAP_MAX: the local search's box when ties between sNICs fill the core
# CP-SAT's deterministic seconds per second of one idle core on the engine's cores (measured: 0.1-0.33,
# most near 0.25): converts the wall-clock boxes these replaced.
CPSAT_WORK_PER_SECOND = 0.25
# The tie-break's box: this share of the primary's work (its CP-SAT deterministic time and its local
# search's units), at least TIEBREAK_MIN_WORK; below one, so that it ends before its wall-clock bound
# (tiebreak_time) even on a loaded machine, where that bound would make the answer depend on the load.
TIEBREAK_WORK_SHARE, TIEBREAK_MIN_WORK = 0.25, 0.05 * CPSAT_WORK_PER_SECOND
TIES_NEAR = 4  # slacks: a ties incumbent this close to the bound skips the restricted core
SHAKE_MISSES = 3  # shakes in a row that find no exchange: the local search stops
# Shakes in a row whose descents find no cheaper placement: the local search stops. The box alone let a
# 39-vertex instance shake for its whole time limit (third generator draw 1007: an optimal incumbent, a bound
# 31 % below, thousands of fruitless shakes whose fixed per-call cost the box's units undercount); on the
# families and 390 foreign draws no shake was ever followed by a gain (bench/RESULTS.md, lead 2026-12-01).
SHAKE_FRUITLESS = 16
POOL_MOVES = 4  # per priced row: exchanges of one gathering shake (swaps.shake's pool)
STARTS_SHARE = 0.6  # of the local search's box: its descents from the starts; the rest shakes (swaps.shake)
# Priced rows within this relative difference of the largest price are pooled (pack.py), and the pooled fill
# stops 1 / PACK_MARGIN of the slack short of their summed room: what the split into the rows may leave.
POOL_PRICE_TOLERANCE, PACK_MARGIN = 1e-6, 8
# CP-SAT boxes of less deterministic time on more variables skip the presolve (_Core.solve); a small core's
# presolve is cheap and lets a small box prove the tie-break (measured: pinned 500).
NO_PRESOLVE_WORK, NO_PRESOLVE_VARS = 0.05, 1000
# Deterministic time of the first incumbent's CP-SAT (on the small restricted core): the 3 s it had.
RESTRICTED_WORK = 3.0 * CPSAT_WORK_PER_SECOND
# The grown restricted core (_regrow): REGROW x the restricted core's rank of reduced costs, minimised to its
# optimum in REGROW_CONFLICTS conflicts (or WIDEN_WORK) where the incumbent is within MINIMISE_GAP slacks of
# the bound, else stopped at its first placement below the incumbent's. Minimised everywhere, it changed the
# next step's _minimised path where that runs (chains-tight 500 seed 2 0.17 -> 0.22-0.30 CPU s); settled at
# any gap, its refutation was an extra "yes" (seed 1); 1,000 conflicts: mesh 300 seed 5's box 0.042
# deterministic seconds, 0.17 -> 0.40 CPU s (bench/RESULTS.md, placeregrow20).
REGROW, REGROW_CONFLICTS = 2, 300
# The kept-row DP (rowbound.py): levels of reduced cost, at most KEPT_WORK level x configuration steps, and
# skipped when fewer than KEPT_MIN_STATES_PER_GROUP levels per group with a choice remain (the rounding down
# of each group's reduced cost to a level then loses more than the row adds).
KEPT_STATES, KEPT_WORK, KEPT_MIN_STATES_PER_GROUP = 20_000, 40_000_000, 20
# The two-rows DP (rowbound.two_rows_bound): at most TWO_ROWS_STATES states after a group and TWO_ROWS_WORK
# state x configuration steps in all, else no bound (measured: see bench/RESULTS.md, issue 25 place14bound).
TWO_ROWS_STATES, TWO_ROWS_WORK = 10_000, 3_000_000
# ... not tried on more groups with a choice or more configurations among them: its states then passed the
# cap nearly every time, after 0.01-0.05 s (measured: 92 proof steps of pinned, mesh, chains-tight, long,
# background 200 / 500 seeds 0-11: from 41 to 60 groups 3 proven, 24 given up, 0.41 s in all - pinned 500
# paid 0.02-0.055 s of its ~0.2 s on four seeds; up to 40 groups 41 proven, 18 given up, 0.27 s).
TWO_ROWS_MAX_GROUPS, TWO_ROWS_MAX_VARS = 40, 400
# The near-free question (_near_free): configurations within 1 / NEAR_FREE_SHARE of the slack, boxed in
# NEAR_FREE_WORK deterministic seconds.
NEAR_FREE_SHARE, NEAR_FREE_WORK = 32, 0.2
# The proof's first step (_minimised): CP-SAT minimising on the fixed core, boxed in this deterministic time
# (measured: chains-tight 500 seed 2 proven within 0.05; long 500 seeds 4-5 not within 0.1).
MINIMISE_WORK = 0.06

# CP-SAT's stock presolve (placement/cpsat.py) asked first for a PLACEMENT only, where a caller's answer can be one:
# a solve's status "optimal" / "infeasible" and its bound always come from the safe solver (`_Core.solve`).
# Measured (bench/RESULTS.md, presolve22): the boxed minimisations (_minimised, _widened) found the optimum
# in their box with it where the safe solver ran out (skewed 500 seed 9: 0.42 -> 0.15 deterministic s; long
# 500 seed 5), and two-snics 200 seed 2's question found its "yes" at 2.7 deterministic s (the safe solver
# none in 20). Its "no" answers are asked again (the safe solver's proof): the one-sNIC questions (mostly
# "no" near the optimum) then cost twice (mesh 500 seed 3: 0.31 -> 0.60 CPU s), so they do not take it.
# The budget rows' coefficient tightening and the configurations no placement meeting the rows can use
# (_tightened; exact). False: the rows as prepared (comparisons).
TIGHTEN = True
STOCK_PLACEMENTS = True
STOCK_LEAD_WORK = 0.02  # a boxed minimisation's safe run first (most prove in this: chains-tight 500 seed 2)
STOCK_QUESTION_WORK = 4.0  # a question's stock run (several sNICs), after a safe one of STOCK_QUESTION_LEAD
STOCK_QUESTION_LEAD = 0.25
# ... run only when the incumbent is more than this many slacks above the bound (else the bisection's
# questions are few) and the core has at most MINIMISE_MAX_VARS variables.
MINIMISE_GAP, MINIMISE_MAX_VARS = 32, 1000
# ... on a larger core, a minimisation until the deadline in place of the questions when the incumbent is more
# than WHOLE_MINIMISE_GAP slacks above the floor (measured, bench/RESULTS.md: 17 of 80 tight long-chain draws at
# 200-500 reach such a core, 16 of them 150-14,000 slacks above, where one question ran to the limit; no
# family's instance at 200 / 500 seeds 0-11 reaches one).
WHOLE_MINIMISE_GAP = 64
# The widened core (_widened): run when the incumbent is more than WIDEN_FROM slacks above the bound, on the
# configurations of reduced cost at most 1 / WIDEN_SHARE of that gap (only where the proof's core is wider than
# MINIMISE_MAX_VARS), boxed in WIDEN_WORK deterministic seconds, at most WIDEN_ROUNDS times (a second round
# only while still more than WIDEN_GAP slacks above). The grown restricted core (_regrow), and the widened one
# from a core's proven optimum: more than WIDEN_GAP.
# WIDEN_FROM 4, not 16: 4-16 slacks above, the bisection's questions on the whole proof core took 2-5 answers
# where the widened core's optimum then needed one refutation or none (measured, bench/RESULTS.md place18long:
# long 500 seeds 0 / 2 0.204 / 0.072 -> 0.061 / 0.034 CP-SAT deterministic seconds, long 300 seed 11 0.083 -> 0.030).
WIDEN_FROM, WIDEN_GAP, WIDEN_SHARE, WIDEN_WORK, WIDEN_ROUNDS = 4, 16, 3, 0.05, 2
# ... and on a narrower proof core whose groups have at least this many configurations each on average.
WIDEN_NARROW_CONFIGS = 4
# The widened core carries the exact reduced-cost row for "cost <= incumbent - 1" (_Core.add_reduced_cut, as
# _minimised and the questions do): redundant for its LP, but CP-SAT propagates it far better than the cost and
# budget rows apart (measured, bench/RESULTS.md long25: long 500 seeds 0-35 CPU sum 24.0 -> 16.2 s, max 3.03 -> 0.98;
# seeds 29 / 33 / 35 2.0-3.0 -> 0.4-0.8 s, their box now reaching the core's optimum). Not on the grown restricted
# core (_regrown): chains-tight 500 seeds 0-11 CPU sum 2.61 -> 2.90 s with it.
WIDEN_REDUCED_CUT = True
# The exact answer to the proof's questions (choicebb.py): on cores of at most EXACT_MAX_GROUPS groups with a
# choice and EXACT_MAX_VARS variables, boxed in EXACT_WORK units (EXACT_RATE a second of an idle core,
# measured 3e7-2e8; the least search of long 200 seed 8 took 1.1e8 units, 1.3 s CPU, where CP-SAT's
# questions ran out of 10 s). 6,000 variables, not 2,000: the batches bound the memory, and a long-chain draw
# of 20 groups and 4,750 variables was proven in 0.8 s where CP-SAT's question ran out (bench/RESULTS.md
# place15bb; neutral on chains-tight, mesh, pinned, fanio, background 200 / 500 and long 100-300).
EXACT_MAX_GROUPS, EXACT_MAX_VARS, EXACT_WORK, EXACT_RATE = 25, 6000, 150_000_000, 70_000_000
# The question inside the grown core's floor (_inside): asked first in the proof's loop, once, boxed in
# INSIDE_WORK deterministic seconds (measured, bench/RESULTS.md pinned21); INSIDE_FIRST False: not asked (tests).
INSIDE_FIRST, INSIDE_WORK = True, WIDEN_WORK
# On a core of at least REFUTE_MIN_GROUPS groups with a choice, the proof's questions ask the incumbent's
# refutation (p1 - 1 - slack) at once, not the midpoint, once the floor is within REFUTE_GAP slacks of it: there
# each "no" near the optimum costs ~0.3 CPU s (third draw 3007, 5,000 x 1: a local-search incumbent one slack
# above the optimum, the kept-row floor 4.7 below; the bisection's three "no" answers and a "yes", CPU median
# 2.11 s for the solve, vs a "yes" and a "no", 1.59; bench/RESULTS.md big25). On every core (REFUTE_MIN_GROUPS 0)
# it was mixed on the families at 500 (chains-tight CPU median 0.109 -> 0.120, long 0.227 -> 0.223).
REFUTE_GAP, REFUTE_MIN_GROUPS = 8, 200
FEASIBILITY_LINEARIZATION = 1  # measured: 'cost <= p1 - 1?' refuted in 0.18 s vs 1.5 s with 2


def _knapsack_bound(gr: Groups, useful: np.ndarray, target: int) -> knapsack.Bound | None:
    """knapsack.bound on the `useful` configurations when they form a binary knapsack (None when they
    do not)."""
    its = knapsack.items(gr.cost, gr.use, gr.budget, gr.start, useful)
    if its is None:
        return None
    if isinstance(its, str):  # some group keeps no configuration: nothing costs target or less
        return knapsack.Bound(target + 1, None, 0)
    return knapsack.bound(its, target)


def _dp_span(gr: Groups, alive: np.ndarray, limit: int) -> int:
    """Cost units between the sum of the groups' cheapest alive configurations and `limit`: the DP's
    states (checked first: the surrogate row's weights cost a pass over every configuration)."""
    return limit - int(_reduce(np.where(alive, gr.cost, BIG), gr.start, np.minimum).sum())


def _dp_no_better(gr: Groups, alive: np.ndarray, weight: np.ndarray, budget: int, limit: int) -> bool | None:
    """Exact: True if no choice of alive configurations has primary cost <= limit while meeting the one
    row sum(weight) <= budget (a relaxation of the problem: one budget row, or a surrogate combination of
    rows with non-negative multipliers), False if one has; None if the cost range is too wide.

    f[t] = least weight over the groups seen so far with cost exactly (sum of group minima) + t.
    """
    if int(_reduce(np.where(alive, weight, 0), gr.start, np.maximum).sum()) >= 2**60:
        return None  # sums could pass the "infinity" below
    start = gr.start
    counts = np.add.reduceat(alive.astype(np.int64), start[:-1]) if gr.n_groups else np.zeros(0)
    if (counts == 0).any():
        return True  # some group has no usable configuration at all
    cmin = _reduce(np.where(alive, gr.cost, BIG), start, np.minimum)
    span = limit - int(cmin.sum())
    if span < 0:
        return True
    if span > DP_STATES:
        return None
    inf = 2**61
    f = np.full(span + 1, inf, dtype=np.int64)
    f[0] = 0
    base = 0
    w_all = weight
    for g in range(gr.n_groups):
        lo, hi = int(start[g]), int(start[g + 1])
        ks = np.nonzero(alive[lo:hi])[0] + lo
        if counts[g] == 1:
            base += int(w_all[ks[0]])
            continue
        new = None
        for e, w in zip((gr.cost[ks] - cmin[g]).tolist(), w_all[ks].tolist(), strict=True):
            if e > span:
                continue
            if new is None:
                new = np.full(span + 1, inf, dtype=np.int64) if e else f + w
                if e:
                    np.add(f[: span + 1 - e], w, out=new[e:])
            else:
                np.minimum(new[e:], f[: span + 1 - e] + w, out=new[e:])
        np.minimum(new, inf, out=new)
        f = new
    return bool(int(f.min()) + base > budget)


def _dp_rows(gr: Groups, lam: np.ndarray):
    """Rows for the DP proof: the surrogate row sum_r l_r * use_r <= sum_r l_r * budget_r (l ~ the LP
    duals, integers), then the most binding single row."""
    if (lam > 0).sum() > 1:
        max_u = np.abs(gr.use).max(0).astype(float)
        den = 2**30
        while den > 1 and float((lam * den * max_u).sum()) * max(gr.n_groups, 1) >= 2**59:
            den //= 2
        ell = np.floor(lam * den).astype(np.int64)
        yield gr.use @ ell, sum(int(a) * int(b) for a, b in zip(ell.tolist(), gr.budget, strict=True))
    row = int(np.argmax(lam * np.array(gr.budget, dtype=float)))
    yield gr.use[:, row], gr.budget[row]


def _kept_rows_bound(gr: Groups, useful: np.ndarray, lam: np.ndarray, target: int,
                     deadline: float, clock: Callable[[], float]) -> bool | Fraction | None:  # fmt: skip
    """Exact lower bound on the primary from relaxations keeping one binding budget row exactly, the
    others at the LP prices (rowbound.py), over the `useful` configurations (every placement of primary
    <= target uses only those): True when one shows that no placement has primary <= target, else the
    best bound found (None: none computed, e.g. too much DP work)."""
    best: Fraction | None = None
    rows = [r for r in np.argsort(-lam * np.array(gr.budget, dtype=float)).tolist() if lam[r] > 0]
    for r in rows:
        if clock() >= deadline:
            break
        others = lam.copy()
        others[r] = 0.0
        lbr, den, dr = _bound(gr, useful, gr.cost, others, [], np.zeros(0))
        room = den * target - lbr
        if room < 0:
            return True
        b = kept_row_bound(dr, gr.use[:, r], gr.budget[r], gr.start, useful, room, KEPT_STATES, KEPT_WORK,
                           KEPT_MIN_STATES_PER_GROUP)  # fmt: skip
        if b is None:
            continue
        if lbr + b > den * target:
            return True
        if best is None or Fraction(lbr + b, den) > best:
            best = Fraction(lbr + b, den)
    return best


def _row_freed_bounds(gr: Groups, alive: np.ndarray, lam: np.ndarray) -> list[tuple[int, int, np.ndarray]]:
    """Where several budget rows are priced: per priced row r the exact Lagrangian bound (``_bound``) of the
    prices with r's set to 0, over the `alive` configurations (its reduced costs are a valid row for every
    placement among them that meets row r)."""
    rows = np.nonzero(lam > 0)[0].tolist()
    out = []
    for r in rows if len(rows) > 1 else []:
        others = lam.copy()
        others[r] = 0.0
        out.append(_bound(gr, alive, gr.cost, others, [], np.zeros(0)))
    return out


def _two_rows_bound(gr: Groups, useful: np.ndarray, lam: np.ndarray, lb: int, den: int, d: np.ndarray,
                    target: int) -> bool | Fraction | None:  # fmt: skip
    """Exact lower bound on the primary from the relaxation keeping the two most binding budget rows (by
    lam * budget) exactly and dropping the others' priced slack (rowbound.two_rows_bound), with (lb, den,
    d) the Lagrangian bound of prices lam (``_bound``, all configurations alive), over the `useful`
    configurations (every placement of primary <= target uses only those): True when it shows that no
    placement has primary <= target, else the bound; None when fewer than two rows are priced, the core is
    past TWO_ROWS_MAX_GROUPS / TWO_ROWS_MAX_VARS or the DP gives up (TWO_ROWS_STATES, TWO_ROWS_WORK)."""
    order = np.argsort(-lam * np.array(gr.budget, dtype=float), kind="stable").tolist()
    rows = [r for r in order if lam[r] > 0][:2]
    groups, n_vars = _core_size(gr, useful)
    if len(rows) < 2 or groups > TWO_ROWS_MAX_GROUPS or n_vars > TWO_ROWS_MAX_VARS:
        return None
    den_ell, ell = _integer_prices(gr, gr.cost, lam, [], np.zeros(0))
    if den_ell != den:
        return None  # (not the integer prices of (lb, den, d): the DP's identity would not hold)
    b = two_rows_bound(d, gr.use[:, rows], [gr.budget[r] for r in rows], [ell[r] for r in rows], gr.start,
                       useful, den * target - lb, TWO_ROWS_STATES, TWO_ROWS_WORK)  # fmt: skip
    if b is None:
        return None
    return True if lb + b > den * target else Fraction(lb + b, den)


def _near_free(gr: Groups, d: np.ndarray, lb: int, den: int, inc: list[int], slack, workers: int,
               deadline: float, run: _Run) -> list[int] | None:  # fmt: skip
    """A placement the bound lb / den proves (within its slack), searched only among the near-free
    configurations (reduced cost d at most 1 / NEAR_FREE_SHARE of the slack) and the incumbent's: a
    feasibility question boxed in NEAR_FREE_WORK deterministic seconds. Where the LP bound is tight, such a
    placement often exists but differs from the incumbent in many groups at once, beyond the local search
    (measured: background 5,000 seed 0, 18 groups; CP-SAT on the whole core found none in 116 s)."""
    floor = -(-lb // den)
    ask = floor + slack(floor)  # lb > den * (ask - 1 - slack(ask)): such a placement is proven
    units = slack(floor)
    if units <= 0:
        return None
    near = _within(d, den * units // NEAR_FREE_SHARE)
    near[np.array(inc, dtype=np.int64)] = True
    core = _Core(gr, near, workers, FEASIBILITY_LINEARIZATION, run)
    core.m.add(core.objective(gr.cost) <= ask - core.const(gr.cost))
    core.add_reduced_cut(d, den * ask - lb)
    status, ch, _, _ = core.solve(deadline, None, work=NEAR_FREE_WORK)
    log.debug("near-free question %s core=%d", status, len(core.multi))
    return ch if status in ("optimal", "feasible") else None


@dataclass
class _CoreFloor:
    """No placement of only `keep`'s configurations costs less than `floor` (a CP-SAT core's proven bound):
    a question asking less needs a configuration outside `keep` (``_Core.add_outside``)."""

    keep: np.ndarray
    floor: int
    grown: bool = False  # the grown restricted core's (_regrown), not the widened one's


def _widened(gr: Groups, d: np.ndarray, lb: int, den: int, inc: list[int], slack, workers: int,
             deadline: float, run: _Run,
             least: int = WIDEN_FROM) -> tuple[list[int] | None, bool, _CoreFloor | None, list[int] | None]:  # fmt: skip
    """A cheaper incumbent than `inc` from CP-SAT minimising the primary on the configurations of reduced
    cost at most 1 / WIDEN_SHARE of `inc`'s gap above the bound lb / den (and `inc`'s), from `inc`, boxed
    in WIDEN_WORK deterministic seconds, again on the narrower core of the gap left when the box ended the
    search; None when `inc` is within `least` slacks of the bound, when the proof's core at `inc` is
    small enough for ``_minimised`` or nothing cheaper is found. With it, whether CP-SAT proved it
    within the slack of its core's optimum (a sign, not a proof, that it is the problem's). Where two budget rows bind (one sNIC's
    capacity and PCIe) the optimum can lie tens of slacks above the bound and differ from the local
    search's stop in many groups at once, each a configuration of a few to tens of slacks of reduced cost:
    the restricted core (the least reduced costs) does not hold them, the proof's core (everything within
    the incumbent's gap) is too wide to find them in a small box (measured, bench/RESULTS.md). Third: the
    highest floor a round's core proved (None if none), for the proof's questions below it. Fourth: a
    placement cheaper than `inc` that is not returned as the incumbent (a narrow core's box ended it unproven),
    or None: a "yes" to every question asking at least its cost (solve_groups' proof answers those without
    CP-SAT: measured, long 500 seed 2, bench/RESULTS.md)."""
    wide = _wide_gap(gr, d, lb, den, inc, slack, least)
    if wide is None:
        return None, False, None, None
    gap, units, groups, n_vars = wide
    # Where the proof's core at this incumbent is too wide for its minimisation (_minimised): there the
    # first questions' "yes" answers are the costly ones. On a narrower core the minimisation closes the
    # gap from a poorer incumbent sooner (measured: chains-tight 500 seed 2), unless its groups have many
    # configurations each (long chains: 7 a group; chains-tight 2.7): there the widened core's optimum and
    # the refutation outside it were 2-15x cheaper (long 200 / 500), and only that optimum is taken
    # (`narrow`), from one round: an incumbent the box left unproven sent long 300 seed 4 down a 4x longer
    # proof, and a second round settled none of long 200-1,000 seeds 0-11 (0.05 deterministic s lost each).
    narrow = n_vars <= MINIMISE_MAX_VARS
    if narrow and n_vars < WIDEN_NARROW_CONFIGS * groups:
        return None, False, None, None
    found, settled, floor = None, False, None
    for _ in range(1 if narrow else WIDEN_ROUNDS):  # (narrow: a second round's optimum never paid, below)
        keep = _within(d, gap // WIDEN_SHARE)
        core = _below(gr, keep, inc, workers, run)
        if WIDEN_REDUCED_CUT:  # (every placement below inc's cost meets it: exact)
            core.add_reduced_cut(d, den * (_sum(gr.cost, inc) - 1) - lb)
        status, ch, _, bound = core.solve(deadline, inc, float(units), WIDEN_WORK, cuts=False,
                                          stock=None if narrow or not STOCK_PLACEMENTS else WIDEN_WORK)  # fmt: skip
        # (narrow: only a proven optimum of its core is taken, with its floor: the safe solver's alone)
        log.debug("widened %s core=%d", status, len(core.multi))
        if status not in ("optimal", "feasible"):
            break
        low = _exact_floor(bound)
        if low is not None and (floor is None or low + core.const(gr.cost) > floor.floor):
            floor = _CoreFloor(keep, low + core.const(gr.cost))
        found = inc = ch
        settled = status == "optimal" or core.stock_optimal  # (a hint for the questions' order, not a proof)
        gap = den * _sum(gr.cost, inc) - lb
        if settled or gap <= den * units * WIDEN_GAP:
            break  # (the next core is a part of this one)
    if narrow and not settled:
        return None, False, None, found
    return found, settled, floor, None


def _regrow(gr: Groups, d: np.ndarray, lb: int, den: int, inc: list[int], slack) -> bool:
    """Whether CP-SAT runs again on the restricted core grown to REGROW x its rank of reduced costs
    (solve_groups): `inc` more than WIDEN_GAP slacks above the bound lb / den, on a proof core of few
    configurations per group (_widened's other case). There the local search's stop differs from the
    optimum in 9-20 groups at once (one switch taking the second binding row's room, the first row's
    refilled by many switches of near-zero reduced cost: chains-tight 500 seeds 1, 2, 8), which the
    grown core often holds (measured, bench/RESULTS.md); the widened core (a third of the gap) was too
    wide for CP-SAT's box there."""
    wide = _wide_gap(gr, d, lb, den, inc, slack, WIDEN_GAP)
    if wide is None:
        return False
    _, _, groups, n_vars = wide
    return n_vars <= MINIMISE_MAX_VARS and n_vars < WIDEN_NARROW_CONFIGS * groups


def _wide_gap(gr: Groups, d: np.ndarray, lb: int, den: int, inc: list[int], slack,
              least: int) -> tuple[int, int, int, int] | None:  # fmt: skip
    """`inc`'s gap above the bound lb / den (in 1 / den units), the slack units at the bound
    and the proof's core at that gap (groups with a choice, variables); None when `inc` is within
    `least` slacks of the bound (_widened and _regrow then leave it to the proof)."""
    units = slack(-(-lb // den))
    gap = den * _sum(gr.cost, inc) - lb
    if units <= 0 or gap <= den * units * least:
        return None
    groups, n_vars = _core_size(gr, _within(d, gap))
    return gap, units, groups, n_vars


def _below(gr: Groups, keep: np.ndarray, inc: list[int], workers: int, run: _Run) -> _Core:
    """CP-SAT minimising the primary strictly below `inc`'s on the `keep` configurations and `inc`'s (`keep`
    is marked in place)."""
    keep[np.array(inc, dtype=np.int64)] = True
    core = _Core(gr, keep, workers, FEASIBILITY_LINEARIZATION, run)
    core.m.add(core.objective(gr.cost) <= _sum(gr.cost, inc) - 1 - core.const(gr.cost))
    core.m.minimize(core.objective(gr.cost))
    return core


def _regrown(gr: Groups, d: np.ndarray, y: np.ndarray, alive: np.ndarray, lb: int, den: int, inc: list[int],
             slack, workers: int, deadline: float,
             run: _Run) -> tuple[str, list[int] | None, int, _CoreFloor | None]:  # fmt: skip
    """CP-SAT minimising the primary below `inc`'s on the grown restricted core (_restricted at REGROW x its
    rank, and `inc`'s configurations), from `inc`, boxed in WIDEN_WORK deterministic seconds: minimised to
    the core's optimum (within the slack at the bound lb / den, and REGROW_CONFLICTS conflicts) where `inc`
    is within MINIMISE_GAP slacks of the bound, else stopped at its first placement below `inc`'s (the
    proof then minimises on its own core first, _minimise_step). Returns (status, its best placement or
    None, the core's groups with a choice, the core's proven floor or None: "infeasible" proves `inc`'s
    cost the floor)."""
    keep = _restricted(gr, d, y, alive, REGROW)
    core = _below(gr, keep, inc, workers, run)
    units = slack(lb // den)  # (the slack at the bound)
    first = not _regrow_minimises(gr, lb, den, inc, slack)
    status, chosen, _, bound = core.solve(
        deadline, inc, float(units), WIDEN_WORK, cuts=False, first=first,
        conflicts=None if first else REGROW_CONFLICTS,
    )  # fmt: skip
    low = _sum(gr.cost, inc) if status == "infeasible" else _exact_floor(bound)
    if low is not None and status != "infeasible":
        low += core.const(gr.cost)
    return status, chosen, len(core.multi), None if low is None else _CoreFloor(keep, low, grown=True)


def _regrow_minimises(gr: Groups, lb: int, den: int, inc: list[int], slack) -> bool:
    """Whether _regrown minimises to the grown core's optimum: `inc` within MINIMISE_GAP slacks (at the bound
    lb / den) of it, where the bisection's questions are the proof's first step; further above, the proof's
    _minimised comes next and a better start changed its path (measured, bench/RESULTS.md)."""
    return den * _sum(gr.cost, inc) - lb <= den * MINIMISE_GAP * slack(lb // den)


def _settles(gr: Groups, lb: int, den: int, inc: list[int], slack) -> bool:
    """Whether the grown core's minimised optimum `inc` goes to its refutation first (`settled`): only within
    WIDEN_GAP slacks of the bound lb / den, as the other core optima (further above, such an optimum was
    not the problem's and its refutation an extra "yes": chains-tight 500 seed 1, bench/RESULTS.md)."""
    p = _sum(gr.cost, inc)
    return den * p - lb <= den * WIDEN_GAP * slack(p)


def _exact_floor(bound: float | None) -> int | None:
    """CP-SAT's objective bound as an exact integer lower bound, None when it reported none or it is too
    large to be exact in a double (CP-SAT reports it as one)."""
    if bound is None or not math.isfinite(bound) or abs(bound) >= 2**52:
        return None
    return math.floor(bound)  # (an integer objective's bound is an integer; floor() keeps it valid if not)


def _minimised(gr: Groups, alive: np.ndarray, d: np.ndarray, lb: int, den: int, best: list[int], p1: int,
               slack: int, workers: int, deadline: float, run: _Run,
               whole: bool = False) -> tuple[str, list[int] | None, int | None, bool]:  # fmt: skip
    """CP-SAT minimising the primary over the `alive` configurations (every placement of primary <= p1 uses
    only those: reduced-cost fixing at p1), from the incumbent `best`, with the exact reduced-cost row as a
    redundant constraint; it stops within `slack` of its own bound or after MINIMISE_WORK deterministic
    seconds per bisection question it replaces. `whole`: at the deadline only, and without the reduced-cost
    row (measured on a core of 4,749 variables 1,200 slacks above the bound: proven in 4.0 deterministic
    seconds without it, 10.2 with it). Returns (status, its best placement or None, floor or None): floor
    is an exact lower bound on every placement of primary <= p1 (so on the optimum, p1 being a placement's), None when CP-SAT
    reported none or the bound is too large to be exact in a double (CP-SAT reports it as one); and whether
    the placement came from a stock-presolve run that called it optimal (no floor then: a hint only). Boxed,
    CP-SAT's stock presolve is asked first for the placement (after a short safe run, STOCK_LEAD_WORK)."""
    core = _Core(gr, alive, workers, FEASIBILITY_LINEARIZATION, run)
    const = core.const(gr.cost)
    core.m.add(core.objective(gr.cost) <= p1 - const)
    if not whole:
        core.add_reduced_cut(d, den * p1 - lb)
    core.m.minimize(core.objective(gr.cost))
    # A box per question the bisection would otherwise ask (about log2 of the gap in slacks): a gap of
    # hundreds of slacks takes ten questions of 0.05-0.25 deterministic seconds each (measured: long 150).
    questions = max(1.0, math.log2(max(1, den * p1 - lb) / (den * max(1, slack))))
    box = None if whole else MINIMISE_WORK * questions
    status, ch, _, bound = core.solve(
        deadline, best, float(slack), box, stock=box if STOCK_PLACEMENTS else None, lead=STOCK_LEAD_WORK
    )
    low = _exact_floor(bound)
    return status, ch, None if low is None else low + const, core.stock_optimal


def _minimise_into(gr: Groups, alive: np.ndarray, d: np.ndarray, lb: int, den: int, best: list[int], p1: int,
                   lower: Fraction, slack: Callable[[int], int], workers: int, deadline: float, run: _Run,
                   step: str, t0: float) -> tuple[list[int], int, np.ndarray, Fraction, bool, bool]:  # fmt: skip
    """_minimised (`step` "whole" or "boxed") taken in: (incumbent, its primary, the core fixed at it, the
    floor, whether the incumbent changed, whether a stock-presolve run called it optimal: a hint only)."""
    status, ch, floor_, hinted = _minimised(
        gr, alive, d, lb, den, best, p1, slack(p1), workers, deadline, run, step == "whole"
    )
    log.debug("minimised %s %s vars %d gap %.1f slacks -> %s t=%.3f", step, status, _choice_vars(gr, alive),
              float(p1 - lower) / slack(p1),
              None if floor_ is None else float(p1 - floor_) / slack(p1), run.clock() - t0)  # fmt: skip
    better = ch is not None and _sum(gr.cost, ch) < p1
    if better:
        best, p1 = ch, _sum(gr.cost, ch)
        alive = _fixed(alive, d, den * p1 - lb, best)
    if floor_ is not None and floor_ > lower:
        lower = Fraction(floor_)
    return best, p1, alive, lower, better, hinted


def _minimise_step(gr: Groups, alive: np.ndarray, gap: Fraction, slack: int, settled: str | None,
                   whole_from: tuple[float, int], exact_first: bool = True) -> str | None:  # fmt: skip
    """Whether the proof starts with a minimisation (_minimised) of the fixed core `alive`, the incumbent `gap`
    above the floor: "whole" (a gap of more than whole_from[0] slacks on a core of more than whole_from[1]
    variables: until the deadline, in place of the questions), "boxed" (a core of at most MINIMISE_MAX_VARS
    variables, a gap of more than MINIMISE_GAP slacks, not the widened core's optimum) or None (the
    questions at once). `exact_first`: not "whole" on a core the exact search takes (``_exact_fits``): it
    comes first there, and "whole" only if it runs out (measured on tight long-chain draws at 200-300: 926933
    proven in 0.74 CPU s instead of the whole minimisation's 8.3, 230536 in 1.4 instead of unproven in 20 s;
    646933 and 414544 need the whole minimisation after the exact search ran out)."""
    if slack <= 0:
        return None
    n_vars = _choice_vars(gr, alive)
    if (
        n_vars > whole_from[1]
        and gap > whole_from[0] * slack
        and not (exact_first and _exact_fits(gr, alive))
    ):
        return "whole"
    if n_vars <= MINIMISE_MAX_VARS and gap > MINIMISE_GAP * slack and settled != "widened":
        return "boxed"
    return None


@dataclass
class _Answer:
    status: str  # yes | no | unknown (choicebb.Answer's)
    chosen: list[int] | None
    least: bool  # (yes) no placement of the core costs at most lowered(p) (proven), p the chosen one's
    groups: int  # groups with a choice


def _answered(gr: Groups, alive: np.ndarray, ask: int, known: choicebb.Prices, lowered: Callable[[int], int],
              deadline: float, run: _Run) -> _Answer:  # fmt: skip
    """The exact search (choicebb.py) for a placement of primary <= ask among the `alive` configurations,
    lowering the ask to lowered(p) below each one found of primary p, boxed in EXACT_WORK units; on a core
    ``_exact_fits``."""
    box = Work(EXACT_WORK, deadline, run.clock)
    out = choicebb.exists(gr.cost, gr.use, gr.budget, gr.start, alive, ask, known, box, lowered)
    run.exact_work += box.spent
    return _Answer(out.status, out.chosen, out.least, _core_size(gr, alive)[0])


def _exact_fits(gr: Groups, alive: np.ndarray) -> bool:
    """The core of `alive` is small enough for the exact answer (EXACT_MAX_GROUPS, EXACT_MAX_VARS)."""
    groups, n_vars = _core_size(gr, alive)
    return groups <= EXACT_MAX_GROUPS and n_vars <= EXACT_MAX_VARS


def _core_size(gr: Groups, alive: np.ndarray) -> tuple[int, int]:
    """The core of `alive`: its groups with a choice (more than one alive configuration) and their alive
    configurations (the CP-SAT core's variables)."""
    n_alive = np.add.reduceat(alive.astype(np.int64), gr.start[:-1]) if gr.n_groups else np.zeros(0, np.int64)
    multi = n_alive > 1
    return int(multi.sum()), int(n_alive[multi].sum())


def _choice_vars(gr: Groups, alive: np.ndarray) -> int:
    """Variables of the CP-SAT core of `alive`: the alive configurations of groups with more than one."""
    return _core_size(gr, alive)[1]


def _near(gr: Groups, current: list[int]) -> list[int] | None:
    """`current` (one configuration per group) repaired into the budgets and made cheaper (``_repair``)."""
    budget = np.array(gr.budget, dtype=np.int64)
    grp = np.repeat(np.arange(gr.n_groups), np.diff(gr.start))
    ok = np.ones(len(gr.cost), dtype=bool)
    return _repair(gr, np.array(current, dtype=np.int64), ok, grp, budget)


def _greedy(gr: Groups, y: np.ndarray, alive: np.ndarray | None = None, enough=None) -> list[int] | None:
    """A feasible choice, cheap: the LP solution rounded (largest y per group) and repaired (below), else
    per group the configuration using the least of the budgets (relative to each budget); the cheaper
    that fits, None if neither does (the first one when `enough` of it holds). CP-SAT on coefficients of 2^40 can take seconds to find any solution
    (measured: none in 10 s with three or four sNICs); with this as a hint it starts from one."""
    if not gr.n_groups:
        return []
    budget = np.array(gr.budget, dtype=np.int64)
    grp = np.repeat(np.arange(gr.n_groups), np.diff(gr.start))
    ok = np.ones(len(gr.cost), dtype=bool) if alive is None else alive

    def least_use() -> np.ndarray:
        return (np.maximum(gr.use, 0) / np.maximum(budget, 1).astype(float)).sum(1)

    found = None
    for second, dense in ((lambda: -y, False), (lambda: -y, True), (least_use, False)):
        chosen = _repair(gr, _first_least(gr.start, ~ok, second(), gr.cost), ok, grp, budget, dense=dense)
        if chosen is not None and (found is None or _sum(gr.cost, chosen) < _sum(gr.cost, found)):
            found = chosen
            if enough is not None and enough(found):
                break  # already the answer (e.g. within the slack of the bound): the other rounding is moot
    return found


def _first_least(start: np.ndarray, *keys: np.ndarray) -> np.ndarray:
    """Per group (configurations start[g]:start[g+1], none empty) the first configuration of the least
    `keys` (lexicographic, the first key most significant): np.lexsort((*reversed(keys), group))[start[:-1]]
    without sorting (one masked minimum per key; a sort of every configuration cost the rounding ~40 ms
    at 5,000 vertices). Falls back to the sort when a key holds a NaN (which a minimum does not order)."""
    sizes = np.diff(start)
    if any(k.dtype.kind == "f" and np.isnan(k).any() for k in keys):
        return np.lexsort((*reversed(keys), np.repeat(np.arange(len(sizes)), sizes)))[start[:-1]]
    n = len(keys[0])
    tied = np.ones(n, dtype=bool)  # still least on every key so far
    for key in keys:
        top = np.inf if key.dtype.kind == "f" else True if key.dtype.kind == "b" else np.iinfo(key.dtype).max
        least = np.minimum.reduceat(np.where(tied, key, top), start[:-1])
        tied &= key == np.repeat(least, sizes)
    return np.minimum.reduceat(np.where(tied, np.arange(n), n), start[:-1])


def _repair(gr: Groups, chosen: np.ndarray, ok: np.ndarray, grp: np.ndarray, budget: np.ndarray,
            steps: int = 200, dense: bool = False) -> list[int] | None:  # fmt: skip
    """Make `chosen` fit the budgets, then cheaper: while a row is over, switch the one group whose
    switch removes the most excess per unit of added cost; then, while a switch lowers the cost and
    keeps every row within budget, take the one that lowers it most (`dense`: the most per unit of the
    room it takes, each row's use relative to what is left of it: a knapsack's greedy fill, where the
    largest savings first spend a tight row on large switches of little saving per unit). None if it
    cannot fit."""
    chosen = chosen.copy()
    used = gr.use[chosen].sum(0)
    if (used > budget).any() and not _fit(gr, chosen, used, ok, grp, budget, steps):
        return None
    use_t = np.ascontiguousarray(gr.use.T)  # a row's uses contiguous: one pass per row below
    for _ in range(5):
        # Per group its cheapest switch that fits alone; taken, largest saving first, while all fit.
        cur = chosen[grp]
        fits = ok.copy()
        room = np.zeros(len(gr.cost)) if dense else None
        for r, col in enumerate(use_t):
            fits &= used[r] - col[cur] + col <= budget[r]
            if room is not None:
                room += np.maximum(col - col[cur], 0) / float(max(budget[r] - used[r], 1))
        saving = np.where(fits, gr.cost[cur] - gr.cost, 0)
        if room is not None:
            saving = saving / np.maximum(room, 1e-12)  # per unit of room (ordering only; > 0 where saving is)
        best = _reduce(saving, gr.start, np.maximum)
        gs = np.nonzero(best > 0)[0]
        if not len(gs):
            break
        # Per group the first configuration with its best saving.
        n = len(saving)
        cand = np.where(saving == np.repeat(best, np.diff(gr.start)), np.arange(n), n)
        pick = _reduce(cand, gr.start, np.minimum)
        taken = 0
        for g in gs[np.argsort(-best[gs], kind="stable")].tolist():
            k = int(pick[g])
            new_used = used + gr.use[k] - gr.use[chosen[g]]
            if (new_used <= budget).all():
                used, chosen[g] = new_used, k
                taken += 1
        if not taken:
            break
    return chosen.tolist()


def _fit(gr: Groups, chosen: np.ndarray, used: np.ndarray, ok: np.ndarray, grp: np.ndarray, budget: np.ndarray,
         steps: int) -> bool:  # fmt: skip
    """Switch groups of `chosen` (in place, `used` with it) until every budget row fits: each step the
    one `ok` switch that removes the most excess (relative to each row's budget) per unit of added cost,
    the first such configuration on ties. False if no switch removes any or `steps` run out."""
    fits = _FitScores(gr, chosen, grp, ok, budget)
    for _ in range(steps):
        if (used <= budget).all():
            return True
        k = fits.best(used - budget)
        if k < 0:
            return False
        used += fits.delta_t[:, k]
        g = int(grp[k])
        chosen[g] = k
        fits.switched(g, k)
    return False


FIT_PROBES = 8  # configurations whose exact scores set a bar for the others' bounds (_FitScores.best)
# A score bound's slack for rounding: a row-by-row sum of R terms is within ~R x 1.1e-16 of their magnitude
# of any other order of the same sum (the exact score's), far below this for any number of rows.
FIT_MARGIN = 1e-9


class _FitScores:
    """_fit's scores, kept per switch: each configuration's use and cost relative to its group's chosen
    one (only the switched group's slice changes: gathering them anew each step took most of the repair's
    CPU at 5,000 vertices, long seed 1), the use row-major (a row's deltas contiguous, read one row at a
    time), and `cap`, a bound on each one's score that holds while the over rows stay among `rows`."""

    def __init__(self, gr: Groups, chosen: np.ndarray, grp: np.ndarray, ok: np.ndarray, budget: np.ndarray):
        self.gr, self.ok, self.grp = gr, ok, grp
        self.scale = np.maximum(np.abs(budget), 1).astype(float)
        cur = chosen[grp]
        self.delta_t = np.ascontiguousarray((gr.use - gr.use[cur]).T)
        self.denom = np.maximum((gr.cost - gr.cost[cur]).astype(float), 0) + 1.0
        self.rows: set[int] = set()
        self.cap = np.zeros(0)
        self.last = np.zeros(0, dtype=np.int64)  # the previous step's best few: the next step's bar

    def switched(self, g: int, k: int) -> None:
        """Group g's choice is now configuration k."""
        a, b = int(self.gr.start[g]), int(self.gr.start[g + 1])
        self.delta_t[:, a:b] = (self.gr.use[a:b] - self.gr.use[k]).T
        self.denom[a:b] = np.maximum((self.gr.cost[a:b] - self.gr.cost[k]).astype(float), 0) + 1.0
        if len(self.cap):
            self.cap[a:b] = self._cap(slice(a, b))

    def _cap(self, at: slice) -> np.ndarray:
        """Per configuration of `at`: what it uses less of the rows `rows` (relative to each budget) per
        unit of added cost, with the margin; 0 where not ok. Its gain is no more while only those rows
        are over (it removes at most that of them, and counts <= 0 on every other row)."""
        out = np.zeros(len(self.denom[at]))
        for r in sorted(self.rows):
            out += np.maximum(-self.delta_t[r, at], 0) / self.scale[r]
        return np.where(self.ok[at], out * (1 + FIT_MARGIN) / self.denom[at], 0.0)

    def best(self, excess: np.ndarray) -> int:
        """The configuration of largest score (excess removed, relative to each row's budget, per unit of
        added cost), the first on ties; -1 when none removes any excess. The previous step's best few,
        scored now, set a bar: when few configurations' `cap` reach it, only those are looked at (the
        others score below it); else all are."""
        over = np.maximum(excess, 0)
        rows = set(np.flatnonzero(over).tolist())
        if not rows <= self.rows or not len(self.cap):
            self.rows, self.cap = rows, np.zeros(0)
            self.cap = self._cap(slice(None))
        at = None
        last_score = _fit_scores(self.delta_t, self.denom, self.last, excess, over, self.scale)
        if len(self.last):
            bar = last_score.max()
            near = np.flatnonzero(self.cap >= bar) if bar > 0 else None
            if near is not None and 4 * len(near) <= len(self.denom):
                at = near
        k, scored, score = _best_fit_switch(self.delta_t, self.denom, self.ok, excess, over, self.scale, at)
        self.last = self._rivals(k, scored, score, last_score)
        return k

    def _rivals(self, k: int, scored: np.ndarray, score: np.ndarray, last_score: np.ndarray) -> np.ndarray:
        """The next bar: the FIT_PROBES best of those scored now and the previous ones (`last`), outside the
        switched group k's (whose deltas change), by score then index. Their scores are taken as computed
        (the same expression per configuration), not computed again, and the best few picked by a
        partition, not a sort of all of them (both took most of the repair's CPU on groups of hundreds
        of configurations: fanio 1,000 with three sNICs, 8 s)."""
        fresh = np.ones(len(self.denom), dtype=bool)
        fresh[scored] = False
        extra = fresh[self.last]  # (a previous one scored again is in `scored` already)
        idx = np.concatenate([scored, self.last[extra]])
        val = np.concatenate([score, last_score[extra]])
        keep = self.grp[idx] != (self.grp[k] if k >= 0 else -1)
        idx, val = idx[keep], val[keep]
        if len(idx) > FIT_PROBES:
            top = val >= np.partition(val, len(val) - FIT_PROBES)[len(val) - FIT_PROBES]
            idx, val = idx[top], val[top]
        return idx[np.lexsort((idx, -val))[:FIT_PROBES]]


def _best_fit_switch(delta_t: np.ndarray, denom: np.ndarray, ok: np.ndarray, excess: np.ndarray,
                     over: np.ndarray, scale: np.ndarray,
                     at: np.ndarray | None = None) -> tuple[int, np.ndarray, np.ndarray]:  # fmt: skip
    """_fit's step among the configurations `at` (ascending; None: all): the one of largest score (excess
    removed, relative to each row's budget, per unit of added cost: gain / denom), the first on ties, -1
    when none removes any excess; and those scored positive (the pick's rivals at the next step), each once, with
    their scores.

    The gain is first summed row by row (a row's deltas contiguous: a few numpy passes each, against one
    over (configurations, rows) per operation), as a bound: what it removes of the over rows (less what
    it adds there) less what it puts over on the others, plus a margin for the order of the sum. The exact scores (the same expression as ever) are then computed only for the FIT_PROBES largest
    bounds, which set a bar, and for those whose bound reaches it: the same pick as scoring every one."""

    def row(r: int) -> np.ndarray:
        return delta_t[r] if at is None else delta_t[r, at]

    n = len(denom) if at is None else len(at)
    removed, gain, size = np.zeros(n), np.zeros(n), np.zeros(n)
    for r in range(len(over)):
        if over[r] > 0:
            # The score's term of an over row is min(over, -delta): negative where the switch adds to it (a
            # move between sNICs both over). Kept in the bound: counted as 0 there, the bound let tens of
            # thousands of such moves past the bar each step (fanio 1,000, three sNICs).
            term = np.minimum(-row(r), over[r]) / scale[r]
            removed += np.maximum(term, 0)  # (only a configuration using less of it removes excess)
        else:
            term = -np.maximum(row(r) + excess[r], 0) / scale[r]
        gain += term
        size += np.abs(term)
    bound = (gain + FIT_MARGIN * size) / (denom if at is None else denom[at])
    pos = np.flatnonzero((ok if at is None else ok[at]) & (removed > 0))
    probed, probe_score = np.zeros(0, dtype=np.int64), np.zeros(0)
    if len(pos) > FIT_PROBES:
        probe = np.sort(pos[np.argpartition(-bound[pos], FIT_PROBES)[:FIT_PROBES]])
        probed = probe if at is None else at[probe]
        probe_score = _fit_scores(delta_t, denom, probed, excess, over, scale)
        bar = probe_score.max()
        pos = pos[bound[pos] >= bar] if bar > 0 else pos[bound[pos] > 0]
        probed, probe_score = probed[probe_score > 0], probe_score[probe_score > 0]
    cand = pos if at is None else at[pos]
    score = _fit_scores(delta_t, denom, cand, excess, over, scale)
    if not len(cand) or score.max() <= 0:
        return -1, probed, probe_score
    in_cand = np.zeros(len(denom), dtype=bool)
    in_cand[cand] = True
    again = in_cand[probed]  # (a probe scored again among `cand` counted once)
    kept = score > 0
    scored = np.concatenate([probed[~again], cand[kept]])
    return int(cand[np.argmax(score)]), scored, np.concatenate([probe_score[~again], score[kept]])


def _fit_scores(delta_t: np.ndarray, denom: np.ndarray, cand: np.ndarray, excess: np.ndarray, over: np.ndarray,
                scale: np.ndarray) -> np.ndarray:  # fmt: skip
    """_fit's score of the configurations `cand`: the excess a switch to each removes (relative to each
    row's budget; rows it would put over count against it) per unit of added cost, -1 when none."""
    after = np.maximum(np.ascontiguousarray(delta_t[:, cand].T) + excess[None, :], 0)
    gain = ((over[None, :] - after) / scale[None, :]).sum(1)
    return np.where(gain > 0, gain / denom[cand], -1.0)


def _restricted(gr: Groups, d: np.ndarray, y: np.ndarray, alive: np.ndarray, grow: int = 1) -> np.ndarray:
    """The small core around the LP optimum: the configurations in its support and those of the least
    reduced costs (up to the (20 + groups / 50)-th least positive one, `grow` times that rank)."""
    pos = np.sort(d[alive & (d > 0)])
    delta = int(pos[min(len(pos) - 1, grow * (20 + gr.n_groups // 50))]) if len(pos) else 0
    return alive & ((d <= delta) | (y > 1e-6))


def solve_groups(
    gr: Groups,
    deadline: float,
    workers: int = 1,
    linearization: int = 2,
    tiebreak_time: float = 0.25,
    reduce: bool = True,
    gap_limit: float = 0.0,
    time_limit: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    whole_from: tuple[float, int] = (WHOLE_MINIMISE_GAP, MINIMISE_MAX_VARS),
) -> Outcome:
    """Lexicographic optimum over the groups (see module doc). The primary cost is proven within the
    relative `gap_limit` (0: exactly), or the time limit reported; the tie-break stage then gets as much
    deterministic work as the primary took (at least 0.05, CP-SAT's deterministic seconds), never more than
    `tiebreak_time` seconds. reduce=False skips the LP bounds and fixing (CP-SAT on every configuration;
    tests, comparisons).

    Every box inside is one of deterministic work (CP-SAT's deterministic time, the local search's units
    sized from `time_limit`: the user's limit, default `deadline` - now), so the same groups and options
    give the same path and placement on any machine load; `deadline` on `clock` is only the outer bound.
    `whole_from` (slacks, variables): the gap and core size past which the proof minimises until the deadline
    (_minimise_step; tests lower it)."""
    run = _Run(clock)
    t0 = clock()
    limit = time_limit if time_limit is not None else deadline - t0
    swap_work = 0  # units the local search spent (part of the primary's work, for the tie-break's box)
    gap_frac = Fraction(gap_limit)

    def slack(p: int) -> int:
        """Cost units a proven bound may stay below p and p still count as optimal (gap_limit)."""
        return math.floor(gap_frac * (gr.cost_const + p)) if gap_frac else 0

    hint = [int(c) for c in gr.current] if gr.n_groups and (gr.current >= 0).all() else None
    # With one sNIC the restricted core and every "cost <= x?" question go without CP-SAT's cutting
    # planes: the LP there is a few budget rows (plus the reduced-cost row) and the cut rounds cost more
    # than they pruned (measured, bench/RESULTS.md: the proof questions of long 300 / 500, chains-tight,
    # pinned and mesh 500 seeds 0-11 took 1.48 deterministic seconds without, 2.22 with cuts on the
    # midpoints); everything with several sNICs keeps them.
    one_snic = len(gr.locations) <= 2
    full = _levels([gr.cost, gr.pcie, gr.moves], gr.start)
    folded0 = _fold(full[0]) if len(full) == 1 else gr.cost
    alive = np.ones(len(gr.cost), dtype=bool)
    if reduce and TIGHTEN:
        gr, alive = _tightened(gr)
    best, p1, proven, lower = None, None, False, None
    restricted = None
    # Which CP-SAT core's proven optimum the incumbent is, if any: "restricted" (untouched by the steps
    # after it), "regrown" (the grown restricted core's, _regrow) or "widened"; the proof then asks the
    # refutation at once (below), and does not minimise a widened core's optimum. None once the near-free
    # question or a proof question improved it (a better placement from _minimised leaves it as it was).
    settled: str | None = None
    # Whether the kept-row bound rose above the LP's (by a slack at least): the questions then carry the
    # reduced-cost rows of each binding row's freed prices (_row_freed_bounds).
    freed = False
    # knapsack.py's lower bound on the primary, once asked (where the groups are a binary knapsack)
    k_low: int | None = None
    # A core whose placements all cost at least its floor (_regrown's or _widened's, the higher): the
    # questions below it need a configuration outside it, which CP-SAT refutes far sooner than the question
    # alone (measured, bench/RESULTS.md).
    core_floor: _CoreFloor | None = None
    # A placement cheaper than the incumbent that is not the incumbent (_widened's narrow core, unproven):
    # every question asking at least its cost is a "yes" without CP-SAT (below).
    spare: list[int] | None = None
    lp1 = _prices(gr, alive, deadline, run.clock) if gr.n_groups and reduce else None
    if lp1 is not None:
        # Incumbent from a small core around the LP optimum, then exact reduced-cost fixing.
        lam, _, y = lp1
        lb1, den1, d1 = _bound(gr, alive, gr.cost, lam, [], np.zeros(0))
        lower = Fraction(lb1, den1)

        def close_enough(c: list[int] | None) -> bool:
            return c is not None and lb1 > den1 * (_sum(gr.cost, c) - 1 - slack(_sum(gr.cost, c)))

        # The current placement (warm start) or the repaired LP rounding may already be within the slack
        # of the bound: then it is the answer, without CP-SAT (the current one checked first: a warm
        # re-solve then skips the rounding and the restricted core).
        current = hint if _fits(gr, hint) else None
        near = None
        if hint is not None and not close_enough(current):
            # A re-placement after a small change: the current placement repaired (fit, then cheaper
            # switches) is often within the slack, without the LP rounding and CP-SAT.
            near = _near(gr, hint)
        greedy, ties, nf_asked = None, False, False
        if not close_enough(current) and not close_enough(near):
            restricted = _restricted(gr, d1, y, alive)
            multi = int((np.add.reduceat(restricted.astype(np.int64), gr.start[:-1]) > 1).sum())
            if len(full) == 1 and multi > gr.n_groups // 2:
                # Cost ties (e.g. the same NF on either of two sNICs) put most groups in the core
                # (measured: 1,908 of 1,908 at 5000 vertices, no incumbent in time): choose it by reduced
                # costs of the folded objective instead (same prices scaled by the cost weight), where
                # those ties differ.
                _, _, df = _bound(gr, alive, folded0, lam * full[0][0][1], [], np.zeros(0))
                restricted = _restricted(gr, df, y, alive)
            # Several sNICs priced alike: the pooled fill and split first; where it is within the slack
            # the LP rounding's repair (most of the CPU before it at 5,000 vertices) is not needed.
            box = _swap_work(limit, deadline, run.clock)
            greedy = _packed(gr, None, lb1, den1, d1, y, slack, lam, box, t0)
            swap_work += box.spent
            if not close_enough(greedy):
                # (the incumbent if CP-SAT finds none on the core)
                rounded = _greedy(gr, y, alive, close_enough)
                if greedy is None or (rounded is not None and _sum(gr.cost, rounded) < _sum(gr.cost, greedy)):
                    greedy = rounded
            ties = multi > gr.n_groups // 2
            if ties and not close_enough(greedy):
                # Ties between sNICs: CP-SAT on the core takes its whole box for a poor incumbent
                # (measured), the exact local search goes first, with a longer box: its shakes keep
                # closing the gap where CP-SAT's box after it found nothing better (measured).
                box = _swap_work(limit, deadline, run.clock, TIES_SWAP_CAP)
                greedy = _improved(gr, greedy, lb1, den1, d1, y, slack, box, t0, lam)
                swap_work += box.spent
            if greedy is not None:
                restricted[np.array(greedy, dtype=np.int64)] = True
        cands = [c for c in (current, near, greedy) if c is not None]
        quick = min(cands, key=lambda c: _sum(gr.cost, c)) if cands else None
        if close_enough(quick) or (
            ties
            and quick is not None
            and lb1 > den1 * (_sum(gr.cost, quick) - 1 - TIES_NEAR * slack(_sum(gr.cost, quick)))
        ):
            # (ties: within a few slacks the proof's questions below, on the core reduced-cost fixing
            # leaves, find the better placement sooner than CP-SAT on the restricted core; measured)
            status, inc, core_groups = "feasible", quick, 0
        else:
            core = _Core(gr, restricted, workers, linearization, run)
            core.m.minimize(core.objective(folded0))
            # Only an incumbent is needed here (any feasible one makes the fixing below valid): boxed in
            # CP-SAT's deterministic time, which does not shrink on a loaded machine. Good enough once
            # within half the slack the proof below allows (absolute: the core's objective leaves out the
            # groups without a choice).
            abs_gap = float(slack(max(0, math.floor(lower)))) / 2 if len(full) > 1 else 0.0
            status, inc, _, _ = core.solve(deadline, quick, abs_gap, RESTRICTED_WORK, cuts=not one_snic)
            core_groups = len(core.multi)
            log.debug("restricted core %s groups=%d t=%.3f", status, core_groups, run.clock() - t0)
            if quick is not None and (
                status not in ("optimal", "feasible") or _sum(gr.cost, quick) < _sum(gr.cost, inc)
            ):
                status, inc = "feasible", quick
            if (
                status in ("optimal", "feasible")
                and not close_enough(inc)
                and gap_frac
                and not _past(deadline, run)
            ):
                # Before the local search: where the bound is tight, a placement it proves is often one
                # question away (measured: background 5,000 seed 0, 0.03 s here vs 0.4 s of swaps).
                nf_asked = True
                nf = _near_free(gr, d1, lb1, den1, inc, slack, workers, deadline, run)
                log.debug("near-free %s t=%.3f", nf is not None, run.clock() - t0)
                if nf is not None and _sum(gr.cost, nf) < _sum(gr.cost, inc):
                    status, inc = "feasible", nf
            if status in ("optimal", "feasible") and not close_enough(inc) and not (ties and inc is quick):
                # (a restricted core's optimum is not the problem's: switches outside it may still help)
                # A shorter box: on one sNIC the refutation below usually finishes the proof soon.
                box = _swap_work(limit, deadline, run.clock, 0.4)
                better = _improved(gr, inc, lb1, den1, d1, y, slack, box, t0, lam)
                swap_work += box.spent
                if better is not None and _sum(gr.cost, better) < _sum(gr.cost, inc):
                    status, inc = "feasible", better
            if (
                status in ("optimal", "feasible")
                and not _past(deadline, run)
                and _regrow(gr, d1, lb1, den1, inc, slack)
            ):
                minimises = _regrow_minimises(gr, lb1, den1, inc, slack)
                regrown, inc2, grown_groups, core_floor = _regrown(
                    gr, d1, y, alive, lb1, den1, inc, slack, workers, deadline, run
                )
                log.debug("regrown core %s groups=%d floor=%s t=%.3f", regrown, grown_groups,
                          core_floor and core_floor.floor, run.clock() - t0)  # fmt: skip
                if regrown in ("optimal", "feasible"):
                    status, inc, core_groups = "feasible", inc2, grown_groups
                if regrown == "infeasible" or (
                    regrown == "optimal" and (not minimises or _settles(gr, lb1, den1, inc, slack))
                ):
                    settled = "regrown"  # (the incumbent is the grown core's optimum, within a slack)
            if status in ("optimal", "feasible") and not close_enough(inc):
                # A binary knapsack (two configurations a group, one row that can bind, e.g. one sNIC on a
                # loose PCIe link): branch and bound on its LP closes the gap a few large NFs leave open
                # (knapsack.py; foreign large 5,000 draw 0: 115 nodes, 7 ms, where the widened core's box
                # took 0.47 s for nothing and the questions after it 1-2 s each).
                p_inc = _sum(gr.cost, inc)
                k_target = p_inc - 1 - slack(p_inc)
                kb = _knapsack_bound(gr, alive & _within(d1, den1 * k_target - lb1), k_target)
                if kb is not None:
                    k_low = kb.lower
                    log.debug("knapsack bound %d nodes=%d t=%.3f", k_low, kb.nodes, run.clock() - t0)
                    if kb.placement is not None and _sum(gr.cost, kb.placement) < p_inc:
                        status, inc, settled = "feasible", kb.placement, None
            if (
                status in ("optimal", "feasible")
                and not close_enough(inc)
                and not (k_low is not None and k_low > _sum(gr.cost, inc) - 1 - slack(_sum(gr.cost, inc)))
                and not _past(deadline, run)
            ):
                # A core's proven optimum (the restricted core's, unimproved, or the grown one's) goes to its
                # refutation first (below) unless far above the bound: such optima were usually the optimum
                # (measured: background 500 seed 10, 4.6 slacks above, the widened core's box 0.05 lost).
                least = WIDEN_GAP if status == "optimal" or settled is not None else WIDEN_FROM
                wide, wide_settled, wide_floor, spare = _widened(
                    gr, d1, lb1, den1, inc, slack, workers, deadline, run, least
                )
                if wide_floor is not None and (core_floor is None or wide_floor.floor > core_floor.floor):
                    core_floor = wide_floor
                if wide is not None and _sum(gr.cost, wide) < _sum(gr.cost, inc):
                    status, inc, settled = "feasible", wide, "widened" if wide_settled else None
        if status in ("optimal", "feasible"):
            best = inc
            p1 = _sum(gr.cost, inc)
            if status == "optimal":  # (only the restricted core's solve answers "optimal" here)
                settled = "restricted"
            # A lexicographic optimum has primary <= p1: configurations forcing more are out.
            alive = _within(d1, den1 * p1 - lb1)
            alive[np.array(inc, dtype=np.int64)] = True
            proven = lb1 > den1 * (p1 - 1 - slack(p1)) or (k_low is not None and k_low > p1 - 1 - slack(p1))
            log.debug("incumbent %s p1=%d lb=%.1f slack=%d alive=%d core=%d settled=%s t=%.3f", status, p1,
                      lb1 / den1, slack(p1), int(alive.sum()), core_groups, settled is not None, run.clock() - t0)  # fmt: skip
            if not proven and lam.max(initial=0) > 0:
                # The LP bound is fractional below p1: decide "primary <= p1 - 1" exactly on the
                # relaxation keeping only the most binding budget row (dynamic programme over cost).
                # Only configurations whose bound allows cost p1 - 1 can be in such a selection.
                target = p1 - 1 - slack(p1)
                useful = alive & _within(d1, den1 * target - lb1)
                if _dp_span(gr, useful, target) <= DP_STATES:
                    for weight, budget in _dp_rows(gr, lam):
                        no_better = _dp_no_better(gr, useful, weight, budget, target)
                        log.debug("dp proof %s t=%.3f", no_better, run.clock() - t0)
                        if no_better is True:
                            proven = True
                            break
                if not proven:
                    kept = _kept_rows_bound(gr, useful, lam, target, deadline, run.clock)
                    log.debug("kept-row bound %s t=%.3f", kept, run.clock() - t0)
                    if kept is True:
                        proven = True
                    elif kept is not None and kept >= lower + max(1, slack(p1)):
                        # (a rise of less than a slack only moves the bisection's midpoints, measured:
                        # long 500 seed 0 +0.15 slacks, a 0.2 s question became a 1.1 s one)
                        lower, freed = kept, True
                if not proven:
                    # Both binding rows kept: the integer gap the LP and the one-row DP each leave
                    both = _two_rows_bound(gr, useful, lam, lb1, den1, d1, target)
                    log.debug("two-rows bound %s t=%.3f", both, run.clock() - t0)
                    if both is True:
                        proven = True
                    elif both is not None and both >= lower + max(1, slack(p1)):
                        lower = both
                if not proven and k_low is not None and k_low >= lower + max(1, slack(p1)):
                    lower = k_low  # (knapsack.py's, asked before the widened core)
            if not proven and not nf_asked and not _past(deadline, run):
                nf = _near_free(gr, d1, lb1, den1, best, slack, workers, deadline, run)
                log.debug("near-free %s t=%.3f", nf is not None, run.clock() - t0)
                if nf is not None and _sum(gr.cost, nf) < p1:
                    best, p1, settled = nf, _sum(gr.cost, nf), None
                    alive = _fixed(alive, d1, den1 * p1 - lb1, best)
                    proven = lb1 > den1 * (p1 - 1 - slack(p1))
                    restricted = None
            if status != "optimal":
                restricted = None
        else:
            restricted = None
    step = (
        None
        if proven or best is None or lower is None or _past(deadline, run)
        else _minimise_step(gr, alive, p1 - lower, slack(p1), settled, whole_from)
    )
    if step is not None:
        # Where the bisection below would take many questions, CP-SAT first minimises on the fixed core:
        # its own bound (its LP with cuts, then the search) often closes two binding rows' gap in one
        # step (measured: chains-tight 500 seed 2, one step instead of ten questions). Not where the
        # gap is a few slacks: there a feasibility question or two refute it sooner than a minimisation;
        # nor boxed on a large core, whose presolve alone takes the box (measured: long 500, no solution):
        # there only far above the floor, until the deadline ("whole": one question there ran to the limit
        # where the minimisation proved the optimum, bench/RESULTS.md);
        # nor on the widened core's optimum (long 500 seeds 4-6: it was the optimum). A restricted core's
        # optimum is minimised too: on a few groups it was often hundreds of slacks above (long 100-200).
        best, p1, alive, lower, better, hinted = _minimise_into(
            gr, alive, d1, lb1, den1, best, p1, lower, slack, workers, deadline, run, step, t0
        )
        if hinted:
            settled = "minimised"  # (the stock presolve's "optimal": its refutation first, a hint only)
        restricted = None if better else restricted
        if lower > p1 - 1 - slack(p1):
            proven = True
            restricted = restricted if _holds(restricted, alive) else None
    lo = math.ceil(lower) if lower is not None else 0  # no placement costs less (proven)
    # Prices the exact answers (choicebb.py) found, carried from one question to the next; whether one ran out
    # of its box (CP-SAT answers from there on).
    known = choicebb.Prices([lam] if lp1 is not None else [])
    exact_out = False
    inside_asked = False
    while not proven and best is not None:
        # Is there a placement of cost <= p1 - 1? Asked as a pure feasibility question (measured: CP-SAT
        # refutes it in 0.2 s where minimising the cost on the same core did not close a 1-unit gap in
        # 20 s). Yes: a better incumbent, fix again, repeat. No: p1 is optimal. While the incumbent is
        # more than twice the slack above the bound, the midpoint is asked first (bisection: a "no" raises
        # the bound, a "yes" a better incumbent; the optimum usually lies a few slacks above the bound),
        # unless the incumbent is `settled`: then its refutation first (measured: 13 of 15 unimproved
        # restricted-core optima at 500 on chains-tight, mesh, pinned and background seeds 0-11 were the
        # optimum; on long 500 the widened core's too, and the bisection's "no" answers below it were 3-6
        # questions spent for nothing).
        target = p1 - 1 - slack(p1)
        if lo > target:
            # The floor already proves it (a "yes" landed within a slack of the floor): no question needed
            # (measured: 8 of 48 instances at 500 on chains-tight, pinned, background and long asked one,
            # 0.01-0.1 s each).
            proven = True
            restricted = restricted if _holds(restricted, alive) else None
            log.debug("floor proves p1=%d t=%.3f", p1, run.clock() - t0)
            break
        if _past(deadline, run):
            return Outcome("feasible", best, _gap(gr, p1, lower), _core_size(gr, alive)[0])
        # On a small core the exact search minimises below the target in one answer (measured: long 200 seed
        # 8, 1.3 s against five exact "no" answers of the bisection, 2.8 s, and a sixth that ran out).
        exact = not exact_out and _exact_fits(gr, alive)
        bisect = (
            not exact
            and gap_frac
            and target - lo > slack(p1)
            and settled is None
            and (target - lo > REFUTE_GAP * slack(p1) or _core_size(gr, alive)[0] < REFUTE_MIN_GROUPS)
        )
        ask = lo + (target - lo) // 2 if bisect else target
        # A known placement within the ask answers it (the same "yes" a solve would give, without one).
        spared = spare is not None and _sum(gr.cost, spare) <= ask
        answer = (
            _answered(gr, alive, ask, known, lambda c: c - 1 - slack(c), deadline, run)
            if exact and not spared
            else None
        )
        if answer is not None and (
            answer.status == "unknown" or (answer.status == "yes" and not answer.least)
        ):
            exact_out = True
        if (
            answer is not None
            and answer.status == "unknown"
            and _minimise_step(gr, alive, p1 - lower, slack(p1), settled, whole_from, exact_first=False)
            == "whole"
        ):
            # The exact search ran out on a core far above the floor: the whole minimisation, not questions
            # (after the exact search's full box: a third of it lost 230536's proof and still left 646933
            # 3.3 s slower, bench/RESULTS.md).
            best, p1, alive, lower, better, _ = _minimise_into(
                gr, alive, d1, lb1, den1, best, p1, lower, slack, workers, deadline, run, "whole", t0
            )
            restricted = None if better else restricted
            if lower > p1 - 1 - slack(p1):
                proven = True
                restricted = restricted if _holds(restricted, alive) else None
                break
            return Outcome("feasible", best, _gap(gr, p1, lower), _core_size(gr, alive)[0])
        exact = answer is not None and answer.status != "unknown"
        outside = inside_settles = False
        if exact:
            status = "feasible" if answer.status == "yes" else "infeasible"
            ch, core_groups = answer.chosen, answer.groups
            if answer.least:
                status = "least"
        elif spared:
            status, ch, core_groups, spare = "feasible", spare, 0, None
        else:
            status = None
            if (
                core_floor is not None
                and core_floor.grown
                and target >= core_floor.floor
                and not inside_asked
                and INSIDE_FIRST
                and _regrow_minimises(gr, lb1, den1, best, slack)
            ):
                # The core's floor does not decide the question: first CP-SAT minimises below the refutation
                # on that core alone (a few tens of groups), boxed. Its optimum (or, boxed, its best and bound)
                # raises the core's floor above every later ask, which then asks for a configuration outside it.
                inside_asked = True
                in_status, in_ch, in_groups, in_floor = _inside(gr, alive & core_floor.keep, target, d1, lb1, den1,
                                                                 lam, freed, slack(lb1 // den1), workers, deadline, run)  # fmt: skip
                log.debug("inside the core's floor: cost <= p1 - 1 - slack? %s floor=%s core=%d t=%.3f", in_status,
                          in_floor, in_groups, run.clock() - t0)  # fmt: skip
                if in_floor is not None and in_floor > core_floor.floor:
                    core_floor = _CoreFloor(core_floor.keep, in_floor, grown=True)
                if in_status in ("optimal", "feasible"):
                    status, ch, core_groups, ask = "feasible", in_ch, in_groups, target
                    inside_settles = in_status == "optimal" and _settles(gr, lb1, den1, in_ch, slack)
                elif in_status == "infeasible" and _settles(gr, lb1, den1, best, slack):
                    settled, ask = "inside", target  # (the incumbent is that core's optimum, within a slack)
            if status is None:
                outside = core_floor is not None and ask < core_floor.floor
                status, ch, core_groups = _question(gr, alive, ask, d1, lb1, den1, lam, freed,
                                                    core_floor.keep if outside else None, best, one_snic, workers,
                                                    deadline, run)  # fmt: skip
        log.debug("cost <= %s? %s at %.3f of [lo %d, target %d] in slacks %.1f core=%d %s t=%.3f",
                  "p1 - 1 - slack" if ask == target else "midpoint", status, (ask - lo) / max(1, target - lo), lo,
                  target, (target - lo) / max(1, slack(p1)), core_groups,
                  "exact" if exact else "spare" if spared else "cp-sat outside" if outside else "cp-sat",
                  run.clock() - t0)  # fmt: skip
        if status == "infeasible" and ask < target:
            lo = ask + 1
            lower = max(lower, Fraction(lo))
        elif status == "infeasible":
            proven = True
            restricted = restricted if _holds(restricted, alive) else None
        elif status in ("optimal", "feasible", "least"):
            best, p1 = ch, _sum(gr.cost, ch)
            settled = "inside" if inside_settles else None
            alive = _fixed(alive, d1, den1 * p1 - lb1, best)
            restricted = None
            proven = status == "least"  # (no placement costs p1 - 1 - slack or less: within the gap)
        else:
            return Outcome("feasible", best, _gap(gr, p1, lower), core_groups)
    if not proven:
        # No incumbent yet (LP relaxation or restricted core failed): CP-SAT minimises on everything.
        core = _Core(gr, alive, workers, linearization, run)
        core.m.minimize(core.objective(gr.cost))
        status, ch, obj, bound = core.solve(deadline, best or hint)
        log.debug("full core %s groups=%d t=%.3f", status, len(core.multi), run.clock() - t0)
        if status in ("infeasible", "unknown"):
            return Outcome(status, None, core_groups=len(core.multi))
        best, p1 = ch, _sum(gr.cost, ch)
        if status == "feasible":
            lo = Fraction(math.ceil(bound - 1e-6)) + core.const(gr.cost)
            lower = max(lower, lo) if lower is not None else lo
            return Outcome("feasible", best, _gap(gr, p1, lower), len(core.multi))
        restricted = None  # the incumbent came from this solve, not from the restricted core
    # Tie-break among placements of primary cost p1 (proven optimal): fewer PCIe units, then moves.
    primary_s = run.clock() - t0
    if gr.free_edges:
        # The groups' PCIe units miss the edges between groups: the caller breaks the tie on the whole
        # instance (solver._tiebreak), pinning what `alive` leaves one way.
        return Outcome("optimal", best, 0.0, 0, False, primary_s, alive=alive)
    tb_stages = _levels([gr.pcie, gr.moves], gr.start)
    if all(not int(reb.max(initial=0)) for st in tb_stages for reb, _ in st):
        return Outcome("optimal", best, 0.0, 0, tiebreak_proven=True, primary_seconds=primary_s)
    eq = [(gr.cost, p1)]
    # The answer is known: the tie-break may do a share of the work the primary did (TIEBREAK_WORK_SHARE),
    # never hold it more than tiebreak_time. Work, not the primary's seconds: those grow with the load.
    tb_deadline = min(deadline, run.clock() + tiebreak_time)
    primary_work = (
        run.cpsat_work + (swap_work / SWAP_RATE + run.exact_work / EXACT_RATE) * CPSAT_WORK_PER_SECOND
    )
    tb_until = run.cpsat_work + max(TIEBREAK_MIN_WORK, TIEBREAK_WORK_SHARE * primary_work)
    if len(full) == 1 and gr.n_groups and reduce:
        lp2 = _lp(gr, alive, folded0, eq)
        if lp2 is not None:
            lam2, mu2, y2 = lp2
            lb2, den2, d2 = _bound(gr, alive, folded0, lam2, eq, mu2)
            if not lb2 > den2 * (_sum(folded0, best) - 1):
                # A better incumbent for the tie-break from a small core around the second LP.
                restricted = _restricted(gr, d2, y2, alive)
                restricted[np.array(best, dtype=np.int64)] = True
                core = _Core(gr, restricted, workers, linearization, run)
                core.m.add(core.objective(gr.cost) <= p1 - core.const(gr.cost))
                core.m.minimize(core.objective(folded0))
                status, ch, _, _ = core.solve(tb_deadline, best, work=_left(tb_until, run))
                if status in ("optimal", "feasible") and _sum(folded0, ch) <= _sum(folded0, best):
                    best = ch
                if status != "optimal":
                    restricted = None
            pf = _sum(folded0, best)
            if lb2 > den2 * (pf - 1):
                return Outcome("optimal", best, 0.0, 0, True, primary_s)  # the bound meets it
            alive = _fixed(alive, d2, den2 * (pf - 1) - lb2, best)
            if _holds(restricted, alive):
                # Nothing outside the restricted core can beat its optimum: that is the optimum.
                return Outcome("optimal", best, 0.0, 0, True, primary_s)
    core = _Core(gr, alive, workers, linearization, run)
    core.m.add(core.objective(gr.cost) <= p1 - core.const(gr.cost))
    tb_proven = True
    for stage in tb_stages:
        folded = _fold(stage)
        core.m.minimize(core.objective(folded))
        status, ch, _, _ = core.solve(tb_deadline, best, work=_left(tb_until, run))
        if status in ("optimal", "feasible") and _sum(folded, ch) <= _sum(folded, best):
            best = ch
        if status != "optimal":
            tb_proven = False
            break
        core.m.add(core.objective(folded) <= _sum(folded, best) - core.const(folded))
    return Outcome("optimal", best, 0.0, len(core.multi), tb_proven, primary_s)


def _inside(gr: Groups, keep: np.ndarray, ask: int, d1: np.ndarray, lb1: int, den1: int, lam: np.ndarray,
            freed: bool, units: int, workers: int, deadline: float,
            run: _Run) -> tuple[str, list[int] | None, int, int | None]:  # fmt: skip
    """CP-SAT minimising the primary over the `keep` configurations below `ask` + 1 (within `units`), boxed in
    INSIDE_WORK: (status, its placement or None, groups with a choice, a floor: no placement of only `keep`'s
    configurations costs less, or None)."""
    core = _asking(gr, keep, ask, d1, lb1, den1, lam, freed, workers, run)
    core.m.minimize(core.objective(gr.cost))
    status, ch, _, bound = core.solve(deadline, None, float(units), INSIDE_WORK, cuts=False)
    if status == "infeasible":
        return status, None, len(core.multi), ask + 1
    low = _exact_floor(bound) if status in ("optimal", "feasible") else None
    return status, ch, len(core.multi), None if low is None else low + core.const(gr.cost)


def _asking(gr: Groups, alive: np.ndarray, ask: int, d1: np.ndarray, lb1: int, den1: int, lam: np.ndarray,
            freed: bool, workers: int, run: _Run) -> _Core:  # fmt: skip
    """The core of `alive` asking for primary <= ask: the cost row and the reduced-cost cuts (of the prices and,
    `freed`, of each binding row freed) every placement of that cost meets."""
    core = _Core(gr, alive, workers, FEASIBILITY_LINEARIZATION, run)
    core.m.add(core.objective(gr.cost) <= ask - core.const(gr.cost))
    core.add_reduced_cut(d1, den1 * ask - lb1)
    for lbr, denr, dr in _row_freed_bounds(gr, alive, lam) if freed else []:
        core.add_reduced_cut(dr, denr * ask - lbr)
    return core


def _question(gr: Groups, alive: np.ndarray, ask: int, d1: np.ndarray, lb1: int, den1: int, lam: np.ndarray,
              freed: bool, outside: np.ndarray | None, best: list[int], one_snic: bool, workers: int,
              deadline: float, run: _Run) -> tuple[str, list[int] | None, int]:  # fmt: skip
    """CP-SAT on "is there a placement of the `alive` configurations of primary <= ask?" (with a configuration
    outside `outside` when given): (status, its placement or None, the core's groups with a choice)."""
    core = _asking(gr, alive, ask, d1, lb1, den1, lam, freed, workers, run)
    if outside is not None:
        core.add_outside(outside)
    # Several sNICs: the incumbent as CP-SAT's hint, its "yes" is usually a few switches away
    # (measured: two-snics 200 seed 11's midpoint "yes" 2.5 deterministic seconds later without);
    # with one sNIC the hint slowed long and background 500 (0.61 -> 1.03 CPU s; bench/RESULTS.md).
    hint_q = None if one_snic else best
    if one_snic:
        # The cost as an objective, stopped at the first placement within the ask: the same answer,
        # found sooner (measured: the questions of long 300 / 500, chains-tight, pinned and mesh 500
        # seeds 0-11 replayed offline, 0.92 deterministic seconds against 1.48 as a pure
        # feasibility model, both without cuts).
        core.m.minimize(core.objective(gr.cost))
    status, ch, _, _ = core.solve(
        deadline,
        hint_q,
        cuts=not one_snic,
        first=one_snic,
        stock=None if one_snic or not STOCK_PLACEMENTS else STOCK_QUESTION_WORK,
        lead=STOCK_QUESTION_LEAD,
    )
    return status, ch, len(core.multi)


def _past(deadline: float, run: _Run) -> bool:
    """Whether the outer deadline has passed: the optional CP-SAT steps are then skipped, not built (their
    models took 0.5-1.2 s each at 40,000-50,000 variables, a 10 s limit overrun by 2-4 s: fanio 1,000
    with three sNICs, bench/RESULTS.md), and the proof returns its incumbent."""
    return run.clock() >= deadline


def _left(until: float, run: _Run) -> float:
    """CP-SAT deterministic time left until `until` (a token amount when none: CP-SAT then stops at once)."""
    return max(1e-3, until - run.cpsat_work)


def _swap_work(time_limit: float, deadline: float, clock: Callable[[], float], cap: float = 1.0) -> Work:
    """The local search's box: `cap` x the work of min(SWAP_MAX, SWAP_SHARE x the time limit) seconds on an
    idle core (SWAP_RATE), within the outer `deadline`. Sized from the limit, not from the time left, so
    that it does not depend on how long the steps before took."""
    return Work(cap * SWAP_RATE * min(SWAP_MAX, SWAP_SHARE * time_limit), deadline, clock)


def _improved(gr: Groups, chosen: list[int] | None, lb: int, den: int, d: np.ndarray, y: np.ndarray, slack,
              work: Work, t0: float | None = None, lam: np.ndarray | None = None) -> list[int] | None:  # fmt: skip
    """A cheaper incumbent by exact switches (swaps.py), until within the slack of the bound lb / den.

    Two starts: `chosen` (the repaired LP rounding); and every group at its least reduced cost (the LP's
    choice on ties), repaired by least added reduced cost. From each, switches among near-free
    configurations first (reduced cost a small share of the slack: they fill the binding rows without
    giving up what the prices say is right), then among every configuration that can still be in a
    better placement. The cheaper result, or None when neither start fits. Before all that, with several
    priced sNIC rows at one price: pack.py's pooled fill and split, returned when within the slack, else
    the start when cheaper than `chosen`. Among interchangeable sNICs
    a stop of the descent is a plateau, not the end: moving NFs between sNICs at no cost opens switches
    that fill the rows further. So after the first start's descent, with several priced rows (`lam`):
    the free room gathered on each priced row in turn and filled by a subset of switches
    (swaps.shake's pool, swaps.fill), descended again; at the end, while above the slack and the `work`
    box is not used up, random cost-neutral exchanges (swaps.shake), descended again. Bounded by `work`
    (units the switches charge, not seconds): the same instance gives the same incumbent on any load."""
    floor = -(-lb // den)
    target = floor + slack(floor)
    unit = max(1, slack(floor))
    budget = np.array(gr.budget, dtype=np.int64)
    grp = np.repeat(np.arange(gr.n_groups), np.diff(gr.start))

    def descend(cur: list[int], box: Work, shares: tuple[int, ...] = (256, 1)) -> list[int]:
        for share in shares:
            near = _within(d, den * (unit // share))
            near[np.array(cur, dtype=np.int64)] = True
            cur = improve(gr.cost, gr.use, budget, gr.start, cur, near, target, box, near)
        allowed = _within(d, den * _sum(gr.cost, cur) - lb)
        return improve(gr.cost, gr.use, budget, gr.start, cur, allowed, target, box, near)

    rng = np.random.default_rng(0)  # seeded: the same instance gives the same incumbent
    neutral = _within(d, den * (unit // 256))
    # The priced rows whose free room is gathered (below): only among several sNICs, whose interchangeable
    # rows the gathering is for. With one sNIC, capacity and PCIe can both be priced, and gathering took
    # a third of the local search's CPU there without a better incumbent (measured, long 500).
    several = len(gr.locations) > 2
    rows = (
        np.nonzero(lam > 1e-9 * lam.max(initial=0))[0]
        if lam is not None and several
        else np.zeros(0, dtype=np.int64)
    )
    packed = _packed(gr, chosen, lb, den, d, y, slack, lam, work, t0)
    if packed is not None and (chosen is None or _sum(gr.cost, packed) < _sum(gr.cost, chosen)):
        chosen = packed
        if _sum(gr.cost, chosen) <= target:
            return chosen
    # With several priced rows the starts' descents leave a share of the time to gathering and shaking
    # (measured: one gathering and descent closed what the whole box of descents left); with one sNIC
    # they have it all, as before.
    starts_box = work.share(STARTS_SHARE if len(rows) > 1 else 1.0)

    def gather(cur: list[int]) -> list[int]:
        """The free room of the priced rows gathered on each of them in turn (a saving switch then has
        to fit one row's room, not several small ones) and filled by a subset of switches in and out of
        that row; each result descended. The cheapest."""
        best = cur
        for k in rows.tolist() if len(rows) > 1 else []:
            if _sum(gr.cost, best) <= target or work.over():
                break
            pooled = shake(
                gr.cost, gr.use, budget, gr.start, best, neutral, rng, work, POOL_MOVES * len(rows), (rows, k)
            )
            pooled = fill(gr.cost, gr.use, budget, gr.start, pooled, _within(d, den * unit), rows, k, work)
            out = descend(pooled, work, (256,))
            if _sum(gr.cost, out) < _sum(gr.cost, best):
                best = out
        return best

    reduced = SimpleNamespace(cost=d // den, use=gr.use, n_groups=gr.n_groups, start=gr.start)
    by_d = _repair(reduced, _first_least(gr.start, d, -y), np.ones(len(d), dtype=bool), grp, budget)
    best = chosen
    for k, start in enumerate(s for s in (by_d, chosen) if s is not None):
        cur = descend(start, starts_box)
        if k == 0 and _sum(gr.cost, cur) > target:
            cur = gather(cur)  # before the second start: it usually closes what the first descent left
        if best is None or _sum(gr.cost, cur) < _sum(gr.cost, best):
            best = cur
        if _sum(gr.cost, best) <= target:
            break
    # Then random shakes while time is left, each descended and gathered again.
    cur, misses, fruitless = best, 0, 0
    while (
        cur is not None and _sum(gr.cost, best) > target and not work.over() and fruitless < SHAKE_FRUITLESS
    ):
        shaken = shake(gr.cost, gr.use, budget, gr.start, cur, neutral, rng, work)
        if shaken == cur:
            misses += 1  # none fit in the sample drawn, or none at all (e.g. one sNIC)
            if misses == SHAKE_MISSES:
                break
            continue
        misses = 0
        cur = gather(descend(shaken, work, (256,)))  # fewer stages: more shakes in the box
        fruitless += 1
        if _sum(gr.cost, cur) < _sum(gr.cost, best):
            best, fruitless = cur, 0
    if best is not None and t0 is not None:
        log.debug(
            "swaps p=%d lb=%.1f work=%d t=%.3f", _sum(gr.cost, best), lb / den, work.spent, work.clock() - t0
        )
    return best


def _packed(gr: Groups, chosen: list[int] | None, lb: int, den: int, d: np.ndarray, y: np.ndarray, slack,
            lam: np.ndarray | None, work: Work, t0: float | None = None) -> list[int] | None:  # fmt: skip
    """pack.py's placement where several sNIC rows are priced alike (the bound pools them): the pooled room
    filled and split directly, usually within the slack at once where the switches of ``_improved``
    approach it slowly (measured). None with one sNIC, without such rows, or when no split fits."""
    if lam is None or len(gr.locations) <= 2:
        return None
    rows = np.nonzero(lam > 1e-9 * lam.max(initial=0))[0]
    pool = rows[lam[rows] >= (1 - POOL_PRICE_TOLERANCE) * lam[rows].max()] if len(rows) else rows
    if len(pool) < 2:
        return None
    unit = max(1, slack(-(-lb // den)))
    margin = int(unit / (PACK_MARGIN * float(lam[pool].max())))
    budget = np.array(gr.budget, dtype=np.int64)
    out = pack(
        gr.cost, gr.use, budget, gr.start, chosen, _within(d, den * (unit // 256)), y, pool, margin, work
    )
    if out is not None and t0 is not None:
        log.debug("pack p=%d lb=%.1f t=%.3f", _sum(gr.cost, out), lb / den, work.clock() - t0)
    return out


def _fixed(alive: np.ndarray, d: np.ndarray, room: int, keep: list[int]) -> np.ndarray:
    """Reduced-cost fixing: `alive` less the configurations whose exact reduced cost `d` exceeds `room`
    (none of them can be in a placement the fixing asks about), the configurations of `keep` (the
    incumbent) kept."""
    out = alive & _within(d, room)
    out[np.array(keep, dtype=np.int64)] = True
    return out


def _holds(restricted: np.ndarray | None, alive: np.ndarray) -> bool:
    """Whether the restricted core holds every `alive` configuration (its optimum is then the core's)."""
    return restricted is not None and not (alive & ~restricted).any()


def _within(d: np.ndarray, slack: int) -> np.ndarray:
    """d <= slack for an exact (Python) integer slack of any size."""
    if slack >= 2**62:
        return np.ones(len(d), dtype=bool)
    if slack < -(2**62):
        return np.zeros(len(d), dtype=bool)
    return d <= slack


def _fits(gr: Groups, chosen: list[int] | None) -> bool:
    """`chosen` (one configuration per group) is within every budget row."""
    if chosen is None:
        return False
    used = gr.use[np.array(chosen, dtype=np.int64)].sum(0) if len(chosen) else np.zeros(len(gr.budget))
    return bool((used <= np.array(gr.budget, dtype=np.int64)).all())


def _sum(values: np.ndarray, chosen: list[int]) -> int:
    return int(values[np.array(chosen, dtype=np.int64)].sum()) if len(chosen) else 0


def _gap(gr: Groups, value: int, lower: Fraction) -> float:
    v = gr.cost_const + value
    lo = gr.cost_const + lower
    return 0.0 if v <= 0 else round(float(max(Fraction(0), v - lo) / v), 6)
