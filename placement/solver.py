"""Exact placement solver (docs/placement.md) on OR-Tools: CP-SAT (default) or MIP (pywraplp + SCIP).

Formulation: for each NF with a choice, one boolean per allowed location (exactly one true); every other
vertex is a constant. For each edge and sNIC s, a crossing indicator z >= on_s(dst) - on_s(src) (down) and
z >= on_s(src) - on_s(dst) (up); sNIC-to-sNIC traffic thus counts on both links. All coefficients are
scaled to integers (common denominators of the rational inputs; integers.py rounds them, with a bound,
when they do not fit). A chain with a latency SLO is one more row. Stage 1 minimises host cost (plus
move costs, if given); stage 2 fixes that optimum and minimises PCIe Gbit/s, then moves (lexicographic, one
weighted objective: moves < 1 PCIe unit).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction

import numpy as np

from placement import integers
from placement.covers import RootLP, Rows, cover_cuts
from placement.cpsat import new_solver
from placement.decompose import Groups, PrepareTimeout, prepare, prepare_plan
from placement.engine import ModelRefused, Outcome, solve_groups
from placement.evaluate import Evaluation, evaluate, moves
from placement.gomory import gomory_cuts
from placement.model import HOST, PlacementInputError, Problem

log = logging.getLogger(__name__)
GAP_LIMIT = 1e-5
TIEBREAK_SHARE = 0.1
PREPARE_SHARE = 0.5  # of the time limit: prepare past it gives up, the plain model gets the rest
# A small instance with several sNICs (at most this many location booleans) first gets the plain model for
# PLAIN_FIRST_WORK units of CP-SAT's deterministic time: there it proves or refutes in ~0.01 s where the
# engine's fixed costs (prepare's dominance in many rows, the ties search) took 0.3-6 s (bench/RESULTS.md).
# With one sNIC the engine was faster at every size measured (the box only added its cost).
PLAIN_FIRST_VARS = 256
PLAIN_FIRST_WORK = 0.01
# ... and with at least PLAIN_ONLY_SNICS sNICs the plain model answers alone (no box, no engine after it):
# the engine's bound sees no single sNIC's packing. Four sNICs at 50: proven 11 of 12 vs the engine's 7;
# three sNICs side by side at 50 / 70 vertices: proven 9 -> 20 of 36 / 12 -> 11 of 20; two sNICs at 100: the
# engine proved 7 of 12, the plain model 1, so two sNICs keep the box, then the engine (bench/RESULTS.md).
PLAIN_ONLY_SNICS = 3
# The plain model's full solve, when all on the host breaks a row: a placement that meets every row first
# (no objective, stop at the first), for at most this share of the time left (_solve_model).
FEASIBLE_SHARE = 0.5
# The plain model's full solve with at least CUTS_SNICS sNICs: stage 1 in CUTS_BOX deterministic s first,
# then, if unproven, again with cover cuts of its budget rows (covers.py; bench/RESULTS.md, cuts23).
CUTS_SNICS = 2
# ... and with one sNIC where the model keeps a chain's latency row (their LP relaxation is weak: a crossing
# indicator is 0 at any two equal fractional locations): foreign large 5,000 draw 3 (150 such rows) unproven at
# 20 s (MIP 10-14 s) -> proven in ~12 s. Not on every one-sNIC model: without SLO rows the cuts cost more
# than they gave (foreign 5,000 draws 1 / 4 x1.4-1.7, foreign 500 draws 13 / 27; bench/RESULTS.md, slocuts).
# Its first box is SLO_CUTS_BOX: the foreign draws at 500 with SLO rows need 0.015-0.073 deterministic s
# alone, and in CUTS_BOX two of them (8, 28) paid the cuts, x1.2-1.4 CPU.
CUTS_WITH_SLO, SLO_CUTS_BOX = True, 0.25
CUTS_BOX = 0.03  # 0.01: foreign draw 1615 (det 0.022 alone) paid the cuts and became 2x slower than the MIP
# and Chvatal-Gomory cuts of every row (gomory.py; bench/RESULTS.md, gomory23), up to this many LP rounds
GOMORY_ROUNDS = 4
# ... on a model of at most this many variables: one round took 0.33-1.27 CPU s at ~10,000 (foreign
# large_instance(1000, 3)), past the time limit in four rounds; 0.01-0.05 s at <= 700 (the foreign small draws)
GOMORY_MAX_VARS = 2000
# ... separated from the root LP with the cover cuts in it (one LP, warm; snics25)
GOMORY_FROM_COVERS = True
# CP-SAT's presolve rounds on the plain model (its default 3): a second round re-runs the whole presolve and
# found nothing more (foreign large 500 draw 11's tie-break: search at 0.07 of 0.12 s, after two rounds with
# the same counts); one round: foreign large 500 x30 CPU median x0.84 (bench/RESULTS.md, giveup23). None:
# CP-SAT's default.
PLAIN_PRESOLVE_ITERATIONS: int | None = 1
# SCIP (the MIP backend) is asked to stop at its time limit, but its ranged-row propagation can run for
# minutes inside a sub-SCIP (lpface heuristic -> rapidlearning), deaf to the limit and to an interrupt
# (foreign draw 3020: 20 s limit, still running after 10 min); with it off SCIP stops at the limit. A
# watchdog interrupts SCIP MIP_GRACE_S past the limit (1 + 10 % of it) for any other such stall.
MIP_PARAMS = "constraints/linear/rangedrowpropagation = FALSE"
MIP_GRACE_S = 1.0


@dataclass
class Options:
    solver: str = "cpsat"  # cpsat | mip
    time_limit: float = 10.0
    max_moves: int | None = None  # incremental re-placement: at most this many NFs change location
    move_cost: float | Fraction = 0  # host-cost units charged per moved NF (stage 1)
    workers: int = 1  # measured on 2 loaded cores: 1 worker beats 2 (and 8) on the engine's small cores
    linearization: int = 2
    reduce: bool = True  # cpsat: LP-bound fixing before CP-SAT (False: CP-SAT on all configurations)
    # Host cost counts as proven optimal once its proven relative gap is at most this (both backends).
    gap_limit: float = GAP_LIMIT
    tiebreak_share: float = TIEBREAK_SHARE  # the tie-breaks never hold the answer past this x time_limit
    # time.monotonic() when the limit's clock started (a caller that parses the instance starts it before
    # parse_problem: the limit covers everything from its call); None: when solve() is called.
    started: float | None = None


def _scale(values: list[Fraction], row: bool = False) -> tuple[list[int], int]:
    """Integers proportional to `values` and the factor used: exact when they fit in the working width,
    else rounded as integers.py says (row=True: the last value is the budget of a <= row of the others,
    rounded conservatively; else an objective, rounded to nearest)."""
    den = math.lcm(*{v.denominator for v in values})  # (the denominators repeat: each once)
    ints = [v.numerator * (den // v.denominator) for v in values]
    if row:
        sc = integers.row(ints[:-1], ints[-1])
        return [*sc.ints, sc.budget], den
    return integers.objective(ints).ints, den


class _Model:
    """Backend-neutral builder: the same constraints for CP-SAT and for the MIP."""

    def __init__(self, problem: Problem, opts: Options):
        self.p, self.opts = problem, opts
        if opts.solver == "cpsat":
            from ortools.sat.python import cp_model

            self.cp = cp_model
            self.m = cp_model.CpModel()
            self._var, self._bool = cp_model.IntVar, cp_model.Domain(0, 1)
        elif opts.solver == "mip":
            from ortools.linear_solver import pywraplp

            self.m = pywraplp.Solver.CreateSolver("SCIP")
            if self.m is None:
                raise RuntimeError("OR-Tools was built without SCIP")
        else:
            raise PlacementInputError(f"solver: {opts.solver!r} is not 'cpsat' or 'mip'")
        self.x: dict[tuple[int, str], object] = {}
        self.gap_limit = opts.gap_limit  # stage 2 sets 0: the tie-break's own optimum
        self.work_done = 0.0  # CP-SAT's deterministic time of the last solve (the first-try box's unit)
        self.allowed = [problem.allowed(n) for n in problem.nodes]  # once: on() asks per term
        # CP-SAT: the linear rows as built, kept as they come and in the model's order (exactly-one: vertex
        # index; crossing: (z, inside, outside); budget: (terms, budget)); lp_rows() turns them into
        # covers.Rows only when cuts are asked for (the order matters: GLOP's LP point among ties)
        self.recorded = opts.solver == "cpsat"
        self.lin_rows: list[tuple] = []
        self.build()

    # Variables -------------------------------------------------------------------------------------
    def boolvar(self, name: str):
        if self.opts.solver == "cpsat":  # CpModel.new_bool_var's variable, one 0-1 Domain for all (engine.py)
            return self._var(self.m.model_proto).with_name(name).with_domain(self._bool)
        return self.m.BoolVar(name)

    def on(self, i: int, loc: str):
        """1 if vertex i is at loc: a constant int or a variable."""
        allowed = self.allowed[i]
        if loc not in allowed:
            return 0
        if len(allowed) == 1:
            return 1
        return self.x[(i, loc)]

    def add(self, expr_le) -> None:
        if self.opts.solver == "cpsat":
            self.m.add(expr_le)  # the snake_case name: the CamelCase one goes through a deprecation wrapper
        else:
            self.m.Add(expr_le)

    def build(self) -> None:
        p = self.p
        loads = p.loads()
        hcost, ncost = p.host_costs(loads), p.nic_costs(loads)  # affine: base per instance + r x load
        self.costs = (hcost, ncost)  # evaluate()'s, computed once per solve
        for i, allowed in enumerate(self.allowed):
            if len(allowed) > 1:
                for loc in allowed:
                    self.x[(i, loc)] = self.boolvar(f"x{i}_{loc}")
                self.add(sum(self.x[(i, loc)] for loc in allowed) == 1)
                if self.recorded:
                    self.lin_rows.append((i,))
        # Host cost and move terms (stage 1 objective).
        nfs = [i for i, n in enumerate(p.nodes) if n.placed]
        move_cost = Fraction(str(self.opts.move_cost)) if self.opts.move_cost else Fraction(0)
        self.moved = {}
        for i in nfs:
            n = p.nodes[i]
            if n.location is not None and len(self.allowed[i]) > 1:
                stay = self.on(i, n.location)
                self.moved[i] = (1 - stay) if not isinstance(stay, int) else 1 - stay
        coeffs = [hcost[i] for i in nfs] + [move_cost] * len(self.moved)
        ints, self.cost_scale = _scale(coeffs + [Fraction(1)])
        host_terms = [(ints[k], self.on(i, HOST)) for k, i in enumerate(nfs)]
        move_terms = [(ints[len(nfs) + k], mv) for k, mv in enumerate(self.moved.values())]
        self.stage1 = [(c, v) for c, v in host_terms + move_terms if c and not isinstance(v, int)]
        self.stage1_const = sum(c * v for c, v in host_terms + move_terms if isinstance(v, int))
        self.lp_objective = (host_terms, move_terms)
        if self.opts.max_moves is not None:
            mv = [v for v in self.moved.values() if not isinstance(v, int)]
            forced = sum(1 for n in p.nodes if n.placed and len(p.allowed(n)) == 1
                         and n.location not in (None, p.allowed(n)[0]))  # fmt: skip
            if mv:
                self.add(sum(mv) <= self.opts.max_moves - forced)
            elif forced > self.opts.max_moves:
                self.add(self.boolvar("never") + 1 <= 0)
        # sNIC capacity (cores from load) and further resources (fixed needs per NF).
        rows = [(s, [(ncost[i], self.on(i, s.id)) for i in nfs], s.capacity) for s in p.snics]
        rows += [(s, [(p.nodes[i].needs.get(r, Fraction(0)), self.on(i, s.id)) for i in nfs], s.resources[r])
                 for s in p.snics for r in p.resource_names]  # fmt: skip
        for _s, terms, budget in rows:
            self.add_row(terms, budget)  # an infeasible constant row: pinned NFs alone exceed it
        # PCIe crossings. CP-SAT: a budget row that every 0/1 point meets (on the working integers it would
        # get: its constants and every positive coefficient together within its budget) is left out, and so
        # are the crossing indicators only it uses: stage 1 never needs them, the tie-break makes them
        # (crossings()); CP-SAT's presolve dropped such rows anyway, after paying for them (bench/RESULTS.md,
        # plain25).
        self.pcie_terms: list[tuple[Fraction, object]] = []
        self.pending: list[tuple[int, str, str, object, object, int]] = []  # (edge, sNIC, dir, in, out, slot)
        self._slots: dict[str, tuple[int, int]] = {}  # sNIC id: (its first pcie_terms entry, its up count)
        self.left_out: list[str] = []  # the rows left out, as evaluate() names their violations
        self.latency_rows = 0  # chains' latency rows kept (every 0/1 point meeting one: left out)
        for s in p.snics:
            cands: dict[str, list[tuple[int, Fraction, object, object]]] = {"up": [], "down": []}
            for k, e in enumerate(p.edges):
                if e.gbps == 0:
                    continue
                a, b = self.on(p.index[e.src], s.id), self.on(p.index[e.dst], s.id)
                for d, (inside, outside) in (("down", (b, a)), ("up", (a, b))):
                    if isinstance(inside, int) and isinstance(outside, int):
                        if inside and not outside:
                            cands[d].append((k, e.gbps, 1, None))
                        continue
                    if isinstance(inside, int) and inside == 0:
                        continue
                    if isinstance(outside, int) and outside == 1:
                        continue
                    cands[d].append((k, e.gbps, inside, outside))
            names = (
                [("both", ("up", "down"))]
                if p.pcie_model == "shared"
                else [("up", ("up",)), ("down", ("down",))]
            )
            deferred, scaled = set(), {}
            for direction, ds in names:
                spec = [(g, 1 if o is None else None) for d in ds for _, g, _, o in cands[d]]
                scaled[direction] = _scale([g for g, _ in spec] + [s.pcie_budget(direction)], row=True)[0]
                if self.recorded and self._met(spec, scaled[direction]):
                    deferred.update(ds)
                    self.left_out.append(
                        f"pcie of {s.id}" + (":" if direction == "both" else f" ({direction}):")
                    )
            dirs: dict[str, list[tuple[Fraction, object]]] = {"up": [], "down": []}
            # the indicators in the order the edges come (the model as before where nothing is left out)
            order = sorted(((c[0], 0 if d == "down" else 1, d, c) for d in ("up", "down") for c in cands[d]),
                           key=lambda t: (t[0], t[1]))  # fmt: skip
            for k, _, d, (_, gbps, inside, outside) in order:
                if outside is None:
                    dirs[d].append((gbps, 1))
                elif d in deferred:
                    self.pending.append((k, s.id, d, inside, outside, len(dirs[d])))
                    dirs[d].append((gbps, None))
                else:
                    dirs[d].append((gbps, self._crossing(k, s.id, d, inside, outside)))
            for direction, ds in names:
                if not deferred.issuperset(ds):
                    self.add_row(
                        [t for d in ds for t in dirs[d]], s.pcie_budget(direction), scaled[direction]
                    )
            self._slots[s.id] = (len(self.pcie_terms), len(dirs["up"]))
            self.pcie_terms += dirs["up"] + dirs["down"]
        for c in p.chains:
            if c.latency_us is not None:
                spec = self.latency_spec(c)
                ints = _scale([co for co, _ in spec] + [c.latency_us], row=True)[0]
                if self.recorded and self._met(
                    [(co, None if isinstance(t, tuple) else t) for co, t in spec], ints
                ):
                    self.left_out.append(f"latency of chain {c.id}:")
                    continue  # every 0/1 point meets it: no row, no indicators (nothing else uses them)
                self.add_row(self._latency_made(c, spec), c.latency_us, ints)
                self.latency_rows += 1

    def _crossing(self, k: int, sid: str, d: str, inside, outside):
        z = self.boolvar(f"z{k}_{sid}_{d}")
        self.add(z >= inside - outside)
        if self.recorded:
            self.lin_rows.append((z, inside, outside))
        return z

    def crossings(self) -> None:
        """Make the crossing indicators build() left out (their budget rows always met): the tie-break's
        objective counts them."""
        for k, sid, d, inside, outside, slot in self.pending:
            first, n_up = self._slots[sid]
            at = first + slot + (n_up if d == "down" else 0)
            self.pcie_terms[at] = (self.pcie_terms[at][0], self._crossing(k, sid, d, inside, outside))
        self.pending = []

    @staticmethod
    def _met(spec: list[tuple[Fraction, object]], ints: list[int]) -> bool:
        """Whether sum(coefficient x term) <= budget holds at every 0/1 point (a term of `spec`: an int constant,
        or None / a variable: 0 or 1), on the row's working integers `ints` (_scale's, the budget last)."""
        top = sum(c * t if isinstance(t, int) else max(c, 0) for c, (_, t) in zip(ints, spec, strict=False))
        return top <= ints[-1]

    def latency_spec(self, chain) -> list[tuple[Fraction, object]]:
        """The chain's latency as (coefficient, term): a term is an int, a location variable, or a pair
        (a, b, k, sNIC id) for the crossing indicator of consecutive vertices (_latency_made makes it)."""
        p = self.p
        terms: list[tuple[Fraction, object]] = []
        idx = [p.index[v] for v in chain.vertices]
        for i in idx:
            n = p.nodes[i]
            terms += [(n.latency_nic, 1), (n.latency_host - n.latency_nic, self.on(i, HOST))]
        for k, (a, b) in enumerate(zip(idx, idx[1:], strict=False)):
            for s in p.snics:
                oa, ob = self.on(a, s.id), self.on(b, s.id)
                if isinstance(oa, int) and isinstance(ob, int):
                    terms.append((s.pcie_latency, int(oa != ob)))
                elif s.pcie_latency:
                    terms.append((s.pcie_latency, (oa, ob, k, s.id)))
        return terms

    def _latency_made(self, chain, spec: list[tuple[Fraction, object]]) -> list[tuple[Fraction, object]]:
        out = []
        for c, t in spec:
            if isinstance(t, tuple):
                oa, ob, k, sid = t
                z = self.boolvar(f"l{chain.id}_{k}_{sid}")
                self.add(z >= oa - ob)
                self.add(z >= ob - oa)
                if self.recorded:
                    self.lin_rows += [(z, oa, ob), (z, ob, oa)]
                t = z
            out.append((c, t))
        return out

    def lp_rows(self) -> Rows:
        """CP-SAT: the model's linear rows over variable indices (covers.py): the exactly-one rows, each
        crossing row z - inside + outside >= 0 (constants moved to the bound), the budget rows, and the
        stage-1 objective (a moved term 1 - stay as -c on stay; constants dropped)."""
        rows = Rows(n_vars=len(self.m.proto.variables))
        for rec in self.lin_rows:
            if len(rec) == 1:
                allowed = self.allowed[rec[0]]
                rows.add([self.x[(rec[0], loc)].index for loc in allowed], [1] * len(allowed), 1, 1)
            elif len(rec) == 2:
                var_terms, cap = rec
                rows.add([v.index for _, v in var_terms], [c for c, _ in var_terms], None, cap, budget=True)
            else:
                z, inside, outside = rec
                idx, coeffs, lo = [z.index], [1], 0
                for v, c in ((inside, -1), (outside, 1)):
                    if isinstance(v, int):
                        lo -= c * v
                    else:
                        idx.append(v.index)
                        coeffs.append(c)
                rows.add(idx, coeffs, lo, None)
        host_terms, move_terms = self.lp_objective
        rows.objective = [(c, v.index) for c, v in host_terms if c and not isinstance(v, int)]
        for (c, _), i in zip(move_terms, self.moved, strict=True):
            stay = self.on(i, self.p.nodes[i].location)
            if c and not isinstance(stay, int):
                rows.objective.append((-c, stay.index))
        return rows

    def add_row(
        self, terms: list[tuple[Fraction, object]], budget: Fraction, ints: list[int] | None = None
    ) -> None:
        """sum(coefficient x term) <= budget, on the working integers (integers.py); `ints`: those, if the
        caller has them (_scale's, the budget last)."""
        if ints is None:
            ints, _ = _scale([c for c, _ in terms] + [budget], row=True)
        cap = ints[-1]
        const = sum(c * v for c, (_, v) in zip(ints, terms, strict=False) if isinstance(v, int))
        var_terms = [(c, v) for c, (_, v) in zip(ints, terms, strict=False) if c and not isinstance(v, int)]
        if var_terms and self.opts.solver == "mip":
            # SCIP works in floating point: rows of integers near 2^44 let it call a 0.1 % worse placement
            # optimal (measured); the same row divided by its largest coefficient does not.
            top = max(abs(c) for c, _ in var_terms)
            # Within its feasibility tolerance (1e-6 on these rows) a placement may break the exact budget:
            # the exact re-check in _solve_model catches it (a margin would cut placements at the budget).
            self.add(sum((c / top) * v for c, v in var_terms) <= (cap - const) / top)
        elif var_terms:
            # CP-SAT: one weighted sum (the same row as summing the products, built without a chain of them)
            self.lin_rows.append((var_terms, cap - const))
            self.add(
                self.cp.LinearExpr.weighted_sum([v for _, v in var_terms], [c for c, _ in var_terms]) + const
                <= cap
            )
        elif const > cap:
            self.add(self.boolvar("never") + 1 <= 0)

    def add_root_cuts(self) -> tuple[int, int]:
        """CP-SAT: cover cuts (add_cover_cuts), then Chvatal-Gomory cuts (add_gomory_cuts) of the rows AND
        the cover cuts, from one LP (the rows built once, GLOP warm from the covers' last basis); their
        counts. The cover cuts are valid rows with integer coefficients and bounds, so every Gomory cut of
        the augmented system is still valid for every placement (snics25)."""
        rows = self.lp_rows()
        if not GOMORY_FROM_COVERS:
            return self.add_cover_cuts(rows=rows), self.add_gomory_cuts(rows=rows)
        root = RootLP(rows)
        return self.add_cover_cuts(rows=rows, root=root), self.add_gomory_cuts(rows=rows, root=root)

    def add_cover_cuts(self, rounds: int = 5, rows: Rows | None = None, root: RootLP | None = None) -> int:
        """CP-SAT: cover cuts of the budget rows at the root LP (covers.py), added as redundant rows (each
        implied by one row in integers: no placement is cut); their count. `rows`: lp_rows() if built;
        `root`: the LP to separate on (the cuts are added to it)."""
        cuts = cover_cuts(self.lp_rows() if rows is None else rows, rounds, root=root)
        for lits, rhs in cuts:
            terms = [self.m.get_bool_var_from_proto_index(v) for v, _ in lits]
            terms = [t.Not() if neg else t for t, (_, neg) in zip(terms, lits, strict=True)]
            self.m.add(sum(terms) <= rhs)
        return len(cuts)

    def add_gomory_cuts(
        self, rounds: int = GOMORY_ROUNDS, rows: Rows | None = None, root: RootLP | None = None
    ) -> int:
        """CP-SAT: Chvatal-Gomory cuts of the rows at the root LP (gomory.py: floored in exact integers from
        multipliers GLOP's basis proposes, valid for every 0/1 point of the rows), added as redundant rows;
        their count. None above GOMORY_MAX_VARS variables (the separation's cost). `rows`, `root`: as
        add_cover_cuts (root's added rows enter the system)."""
        if len(self.m.proto.variables) > GOMORY_MAX_VARS:
            return 0
        cuts = gomory_cuts(self.lp_rows() if rows is None else rows, rounds, root=root)
        for idx, coeffs, rhs in cuts:
            self.m.add(
                self.cp.LinearExpr.weighted_sum(
                    [self.m.get_bool_var_from_proto_index(v) for v in idx], coeffs
                )
                <= rhs
            )
        return len(cuts)

    # Solving -----------------------------------------------------------------------------------------
    def minimize(self, terms: list[tuple[int, object]]) -> None:
        if self.opts.solver == "cpsat":
            self.m.minimize(self.cp.LinearExpr.weighted_sum([v for _, v in terms], [c for c, _ in terms]))
        else:
            self.m.Minimize(sum(c * v for c, v in terms) if terms else 0)

    def solve(
        self, deadline: float, hint: dict | None = None, work: float | None = None, first: bool = False
    ):
        """Returns (status in optimal|feasible|infeasible|unknown, objective, bound); `work`: CP-SAT's
        deterministic time box, if any; `first` (CP-SAT): stop at the first solution (a model without an
        objective then reports it `optimal`: feasible, nothing proven about any cost)."""
        remaining = max(0.01, deadline - time.monotonic())
        if self.opts.solver == "cpsat":
            solver = new_solver(self.cp)
            solver.parameters.max_time_in_seconds = remaining
            if first:
                solver.parameters.stop_after_first_solution = True
            if work is not None:
                solver.parameters.max_deterministic_time = work
            solver.parameters.num_workers = self.opts.workers
            if PLAIN_PRESOLVE_ITERATIONS is not None:
                solver.parameters.max_presolve_iterations = PLAIN_PRESOLVE_ITERATIONS
            # (first: no objective, so no LP bound to tighten; measured on foreign large 5,000 seed 3: the
            # first placement in 0.07 deterministic s at level 0, 0.27 at 1, 0.81 at 2)
            solver.parameters.linearization_level = 0 if first else self.opts.linearization
            solver.parameters.relative_gap_limit = self.gap_limit
            if hint:
                self.m.clear_hints()  # then CpModel.add_hint's entries, in one extend each (every var a positive index)
                self.m.model_proto.solution_hint.vars.extend([var.index for var in hint])
                self.m.model_proto.solution_hint.values.extend([int(val) for val in hint.values()])
            st = solver.Solve(self.m)
            self.work_done = solver.deterministic_time
            if st == self.cp.MODEL_INVALID:
                raise ModelRefused(f"CP-SAT refused the model: {self.m.Validate() or 'no reason given'}")
            self.value = lambda v: v if isinstance(v, int) else solver.value(v)
            status = {
                self.cp.OPTIMAL: "optimal",
                self.cp.FEASIBLE: "feasible",
                self.cp.INFEASIBLE: "infeasible",
            }.get(st, "unknown")
            if status in ("optimal", "feasible"):
                return status, solver.ObjectiveValue(), solver.BestObjectiveBound()
            return status, None, None
        from ortools.linear_solver import pywraplp

        self.m.SetTimeLimit(int(remaining * 1000))
        if not self.m.SetSolverSpecificParametersAsString(MIP_PARAMS):
            raise ModelRefused(f"the MIP solver ({self.m.SolverVersion()}) refused {MIP_PARAMS!r}")
        params = pywraplp.MPSolverParameters()
        # pywraplp stops at a 1e-4 relative gap by default; ask for the same gap_limit as our engine.
        params.SetDoubleParam(pywraplp.MPSolverParameters.RELATIVE_MIP_GAP, self.gap_limit)
        watchdog = threading.Timer(remaining * 1.1 + MIP_GRACE_S, self.m.InterruptSolve)
        watchdog.daemon = True
        watchdog.start()  # (Solve releases the GIL: the timer runs meanwhile)
        try:
            st = self.m.Solve(params)
        finally:
            watchdog.cancel()
        if st in (pywraplp.Solver.MODEL_INVALID, pywraplp.Solver.ABNORMAL):
            what = "refused the model" if st == pywraplp.Solver.MODEL_INVALID else "stopped abnormally"
            raise ModelRefused(f"the MIP solver ({self.m.SolverVersion()}) {what}")
        self.value = lambda v: v if isinstance(v, int) else round(v.solution_value())
        status = {
            pywraplp.Solver.OPTIMAL: "optimal",
            pywraplp.Solver.FEASIBLE: "feasible",
            pywraplp.Solver.INFEASIBLE: "infeasible",
        }.get(st, "unknown")
        if status in ("optimal", "feasible"):
            obj = self.m.Objective()
            return status, obj.Value(), obj.BestBound()
        return status, None, None

    def placement(self) -> dict[str, str]:
        out, value, x = {}, self.value, self.x
        for i, (n, allowed) in enumerate(zip(self.p.nodes, self.allowed, strict=True)):
            out[n.id] = (
                allowed[0] if len(allowed) == 1 else next(loc for loc in allowed if value(x[(i, loc)]))
            )
        return out

    def stage1_value(self, placement: dict[str, str]) -> int:
        """The stage-1 objective (working units, its constant left out) of `placement`."""
        p = self.p
        nfs = [i for i, n in enumerate(p.nodes) if n.placed]
        host_terms, move_terms = self.lp_objective
        value = sum(c for (c, v), i in zip(host_terms, nfs, strict=True)
                    if not isinstance(v, int) and placement[p.nodes[i].id] == HOST)  # fmt: skip
        value += sum(c for (c, v), i in zip(move_terms, self.moved, strict=True)
                     if not isinstance(v, int) and placement[p.nodes[i].id] != p.nodes[i].location)  # fmt: skip
        return value

    def fix_stage1(self, objective: float) -> None:
        expr = sum(c * v for c, v in self.stage1) if self.stage1 else 0
        self.add(expr <= round(objective))


def load_backends() -> None:
    """Import OR-Tools' solvers; call it before starting a time limit's clock (Options.started).

    CP-SAT's first import (pandas with it) took 5-6 s on a loaded machine, and a fresh agent's first
    placement ended "unknown" within its 5 s limit without a single solve."""
    from ortools.sat.python import cp_model  # noqa: F401


def solve(
    problem: Problem,
    options: Options | None = None,
    _diagnose: bool = True,
    *,
    prepared: Groups | None = None,
    engine: bool = True,
    **kwargs,
) -> dict:
    """Place every vertex; returns the output object of docs/placement.md.

    `options` (or keyword arguments of Options): solver, time_limit, max_moves, move_cost, gap_limit,
    workers. Always bounded by time_limit; when it hits, the best placement found is returned with status
    'feasible' and its proven relative `gap`; 'infeasible' comes with a `reason`. Once the host cost is
    proven (within gap_limit), the tie-break stage gets a share of that work (deterministic), never more
    than tiebreak_share x time_limit; `tiebreak` says whether it was proven. `prepared`: the engine's groups,
    prepared by the caller; `engine=False`: the caller's prepare already gave none (the plain model answers).
    """
    opts = options or Options(**kwargs)
    if not (math.isfinite(opts.time_limit) and opts.time_limit > 0):  # NaN or inf would never end the search
        raise PlacementInputError(f"time_limit: must be a positive finite number, got {opts.time_limit}")
    if opts.max_moves is not None and opts.max_moves < 0:
        raise PlacementInputError(f"max_moves: must not be negative, got {opts.max_moves}")
    if not (
        isinstance(opts.gap_limit, int | float) and math.isfinite(opts.gap_limit) and 0 <= opts.gap_limit < 1
    ):
        raise PlacementInputError(f"gap_limit: must be a number in [0, 1), got {opts.gap_limit}")
    if not (math.isfinite(opts.move_cost or 0) and (opts.move_cost or 0) >= 0):
        raise PlacementInputError(f"move_cost: must be a finite number >= 0, got {opts.move_cost}")
    load_backends()
    t0 = time.monotonic() if opts.started is None else opts.started
    deadline = t0 + opts.time_limit
    refused = None
    build = None  # prepare's build, when its start was asked already (prepare_plan)
    if opts.solver == "cpsat" and engine and prepared is None and _plain_first(problem):
        alone = len(problem.snics) >= PLAIN_ONLY_SNICS
        if not alone:
            build = prepare_plan(problem, move_cost=move_cost_of(opts), max_moves=opts.max_moves)
            # prepare gives up before building anything: the engine would not run, and the box's work would
            # be done again by the plain model's full solve after it (foreign draw 45: 0.01 of 0.025
            # deterministic s). The plain model answers below, without the box.
            engine = build is not None
        if engine:
            box = None if alone else PLAIN_FIRST_WORK
            out = _solve_model(problem, opts, t0, deadline, _diagnose, first_work=box, refused_none=True)
            if out is not None:
                return out
    if opts.solver == "cpsat" and engine:
        try:
            out = _solve_engine(problem, opts, t0, deadline, _diagnose, prepared, build)
        except ModelRefused as exc:
            # Our defect, not the instance's: the plain model answers and the output says why.
            log.error("placement engine: %s; the plain model answers", exc)
            out, refused = None, str(exc)
        if out is not None:
            return out
    out = _solve_model(problem, opts, t0, deadline, _diagnose)
    if refused is not None:
        out["engine_refused"] = refused
    return out


def run_engine(gr: Groups, opts: Options, deadline: float) -> Outcome:
    """The engine (engine.solve_groups) on prepared groups with `opts`, as solve() runs it, until `deadline`
    (monotonic); its Outcome."""
    return solve_groups(
        gr, deadline, workers=opts.workers, linearization=opts.linearization, reduce=opts.reduce,
        gap_limit=opts.gap_limit, tiebreak_time=opts.tiebreak_share * opts.time_limit,
        time_limit=opts.time_limit,
    )  # fmt: skip


def _solve_engine(
    problem: Problem,
    opts: Options,
    t0: float,
    deadline: float,
    _diagnose: bool = True,
    prepared: Groups | None = None,
    build: Callable[[float | None], Groups | None] | None = None,
) -> dict | None:
    """Our engine (decompose.py + engine.py); None when the instance does not decompose into small groups
    or its preparation did not finish within PREPARE_SHARE of the limit (the plain model then takes the
    rest: it answers with the best placement it finds, `feasible` unless proven). `build`: prepare's
    build, from prepare_plan (else prepare runs whole)."""
    gr = prepared or prepare_within(problem, opts, t0, build)
    if gr is None:
        return None
    t_engine = time.monotonic()
    oc = run_engine(gr, opts, deadline)
    if oc.status == "unknown":
        # No placement from the engine within the limit: all on the host, if that meets every row.
        out = _on_host(problem, opts, t0)
        if out is not None:
            return out
    if oc.status in ("infeasible", "unknown"):
        return _no_placement(problem, opts, oc.status, t0, _diagnose)
    placement = gr.placement(problem, oc.chosen)
    primary = None if oc.primary_seconds is None else t_engine - t0 + oc.primary_seconds
    tiebreak_proven = oc.tiebreak_proven
    if gr.free_edges and oc.status == "optimal":
        # The groups' PCIe tie-break did not see the edges between them (decompose.prepare_plan): the plain
        # model's stage 2 on the whole instance, below the engine's host cost, from its placement.
        tiebreak_proven = False
        if time.monotonic() < deadline:
            try:
                model = _Model(_narrowed(problem, gr, oc.alive, placement), opts)
                placement, tiebreak_proven = _tiebreak(
                    model, placement, model.stage1_value(placement), primary or 0.0, deadline
                )
            except ModelRefused as exc:  # the host cost stands proven; only the preference is lost
                log.error("placement tie-break: %s", exc)
    ev = gr.evaluation(problem, placement)
    if ev.violations:  # cannot happen unless a solver is wrong: never hand out a violating placement
        raise RuntimeError(f"placement engine produced an infeasible placement: {ev.violations}")
    out = result(problem, placement, oc.status, time.monotonic() - t0, oc.gap, ev, opts=opts,
                 primary_seconds=primary, tiebreak_proven=tiebreak_proven)  # fmt: skip
    if gr.cost_error or gr.rounded_rows:
        out["rounding"] = {"host_cost_within": float(gr.cost_error), "budgets": gr.rounded_rows}
    return out


def _narrowed(problem: Problem, gr: Groups, alive: np.ndarray | None, placement: dict[str, str]) -> Problem:
    """`problem` with the NF of every one-NF group that keeps one configuration in `alive` pinned where
    `placement` has it (no placement of primary at most its own moves it: reduced-cost fixing; such a group's
    dominance went by strictly lower cost alone, decompose.Ctx.loose). Larger groups (SLO chains; built
    member by member past 4,096 configurations, where ties on cost were dropped by PCIe) stay free."""
    if alive is None:
        return problem
    kept = np.add.reduceat(alive.astype(np.int64), gr.start[:-1]) if gr.n_groups else np.zeros(0, np.int64)
    pin = {
        int(gr.group_nodes[g][0]) for g in np.nonzero(kept == 1)[0].tolist() if len(gr.group_nodes[g]) == 1
    }
    nodes = [replace(n, pinned=placement[n.id]) if i in pin else n for i, n in enumerate(problem.nodes)]
    return replace(problem, nodes=nodes)


def prepare_within(
    problem: Problem, opts: Options, t0: float, build: Callable[[float | None], Groups | None] | None = None
) -> Groups | None:
    """prepare() bounded by PREPARE_SHARE of the limit (clock started at t0); None when it does not
    decompose or did not finish in time. `build`: the rest of prepare once prepare_plan gave it."""
    deadline = t0 + PREPARE_SHARE * opts.time_limit
    try:
        if build is not None:
            return build(deadline)
        return prepare(problem, move_cost=move_cost_of(opts), max_moves=opts.max_moves,
                       deadline=deadline)  # fmt: skip
    except PrepareTimeout:
        return None


def move_cost_of(opts: Options) -> Fraction:
    """The options' move_cost as prepare takes it."""
    return Fraction(str(opts.move_cost or 0))


def _no_placement(problem: Problem, opts: Options, status: str, t0: float, why: bool = True) -> dict:
    out = {"status": status, "placement": {}}
    if status != "infeasible":
        out["reason"] = "time limit hit before any placement was found"
    else:
        out["reason"] = diagnose(problem, opts) if why else "infeasible"
    out["solve_seconds"] = round(time.monotonic() - t0, 4)
    return out


def _plain_first(problem: Problem) -> bool:
    """Whether the plain model gets the first try: several sNICs and at most PLAIN_FIRST_VARS location
    booleans (one per allowed location of each vertex with a choice)."""
    if len(problem.snics) < 2:
        return False
    return problem.location_booleans() <= PLAIN_FIRST_VARS


def _solve_model(
    problem: Problem,
    opts: Options,
    t0: float,
    deadline: float,
    _diagnose: bool = True,
    first_work: float | None = None,
    refused_none: bool = False,
) -> dict | None:
    """The plain model (a variable per NF and location): the MIP baseline, and CP-SAT's fallback.
    `first_work`: stage 1 gets that deterministic box and None comes back unless it proves the optimum or
    infeasibility in it (the engine then takes over); None too when CP-SAT refuses the model and
    `refused_none` is set (the engine answers)."""
    model = _Model(problem, opts)
    hint = _current_hint(model)
    fallback = None  # a placement meeting every row (checked exactly): the answer if stage 1 finds none
    try:
        if opts.solver == "cpsat" and first_work is None:
            fallback = _fitting(problem, opts, _movable_on_host(problem), model.costs)
            if fallback is None:
                # Every vertex with a choice on the host breaks a row (e.g. a chain's latency SLO): CP-SAT
                # minimising host cost may find no placement at all within the limit (foreign large 5,000
                # seed 3: none in 20 s on a loaded machine), where the same rows without the objective give
                # one in 0.26 deterministic s. That one first (at most half the time left), then stage 1
                # as before; it is the answer if stage 1 finds none. Not stage 1's hint: from it stage 1
                # ended at 683.72 (gap 0.0065) where without it 680.20 (gap 0.00096), same draw at 20 s.
                left = max(0.0, deadline - time.monotonic())
                # (no hint: the current placement's hint, breaking rows, kept CP-SAT from any placement in
                # 10 s where without it one came in 1.9 s, same draw)
                st0, _, _ = model.solve(time.monotonic() + FEASIBLE_SHARE * left, first=True)
                if st0 == "infeasible":  # the same rows as stage 1's: no placement meets them
                    return _no_placement(problem, opts, "infeasible", t0, _diagnose)
                if st0 in ("optimal", "feasible"):
                    fallback = _fitting(problem, opts, model.placement(), model.costs)
        model.minimize(model.stage1)
        box = _cuts_box(problem, model) if opts.solver == "cpsat" and first_work is None else None
        if box is not None:
            # Several sNICs, or latency rows: the model alone in its box first (most instances are proven there);
            # if not, cover cuts of its budget rows at the root LP (covers.py: each implied by one row, checked in
            # integers), then stage 1 again with them (bench/RESULTS.md, cuts23).
            status, obj, bound = model.solve(deadline, hint=hint, work=box)
            if status not in ("optimal", "infeasible") and time.monotonic() < deadline:
                boxed = (status, obj, bound, model.value if status == "feasible" else None)
                model.add_root_cuts()
                status, obj, bound = model.solve(deadline, hint=hint)
                if status == "unknown" and boxed[3] is not None:  # none in the rest: the box's placement
                    status, obj, bound, model.value = boxed
        else:
            status, obj, bound = model.solve(deadline, hint=hint, work=first_work)
    except ModelRefused as exc:
        if refused_none:
            return None  # the engine answers (and says why if the plain model is refused again)
        log.error("placement: %s", exc)
        out = _no_placement(problem, opts, "unknown", t0, False)
        out["reason"] = str(exc)
        return out
    if first_work is not None and status not in ("optimal", "infeasible"):
        return None
    if status == "unknown" and fallback is not None:
        return _fallback_result(problem, opts, t0, *fallback)
    if status in ("infeasible", "unknown"):
        return _no_placement(problem, opts, status, t0, _diagnose)
    placement = model.placement()
    gap = 0.0 if status == "optimal" else _gap(obj, bound)
    tiebreak_proven = True
    stage1_seconds = time.monotonic() - t0
    if status == "optimal" and time.monotonic() < deadline:
        placement, tiebreak_proven = _tiebreak(model, placement, round(obj), stage1_seconds, deadline)
    ev = evaluate(problem, placement, model.costs)
    if ev.violations:  # the MIP's floating point; never hand out a violating placement
        out = _no_placement(problem, opts, "unknown", t0, False)
        out["reason"] = f"the {opts.solver} placement violates the {ev.violations[0]} (numerical tolerance)"
        return out
    return result(problem, placement, status, time.monotonic() - t0, gap, ev, opts=opts,
                  primary_seconds=stage1_seconds if status == "optimal" else None,
                  tiebreak_proven=tiebreak_proven)  # fmt: skip


def _tiebreak(
    model: _Model, placement: dict[str, str], stage1_value: int, stage1_seconds: float, deadline: float
) -> tuple[dict[str, str], bool]:
    """Stage 2 on the plain model: among placements of stage-1 cost at most `stage1_value` (its working
    units), fewer PCIe Gbit/s, then fewer moves; `placement` (of that cost) is the hint and the answer if
    none better is found. (the placement, whether the tie-break is proven)"""
    problem, opts = model.p, model.opts
    model.fix_stage1(stage1_value)
    model.crossings()
    pc_ints, _ = _scale([c for c, _ in model.pcie_terms] + [Fraction(1)])
    weight = len(model.moved) + 1
    terms = [
        (c * weight, v)
        for c, (_, v) in zip(pc_ints, model.pcie_terms, strict=False)
        if not isinstance(v, int)
    ]
    terms += [(1, v) for v in model.moved.values() if not isinstance(v, int)]
    model.minimize(terms)
    hint = {model.x[k]: int(placement[problem.nodes[k[0]].id] == k[1]) for k in model.x}
    # The tie-break is a preference: it holds the answer for as long as stage 1 took (at least 0.05 s),
    # never more than tiebreak_share of the limit (measured: it can take far longer than stage 1).
    budget = min(opts.tiebreak_share * opts.time_limit, max(0.05, stage1_seconds))
    model.gap_limit = 0.0
    try:
        st2, _, _ = model.solve(
            min(deadline, time.monotonic() + budget), hint=hint if opts.solver == "cpsat" else None
        )
    except ModelRefused as exc:  # the host cost stands proven; only the preference is lost
        log.error("placement tie-break: %s", exc)
        st2 = "refused"
    if st2 in ("optimal", "feasible"):
        placement = model.placement()
    return placement, st2 == "optimal"


def _on_host(problem: Problem, opts: Options, t0: float) -> dict | None:
    """Every vertex with a choice on the host, as a `feasible` answer (gap 1: the only bound is 0) when it
    meets every constraint and max_moves; None otherwise. The last resort when a solver found no placement
    in the limit (3 sNICs at 2,000 vertices: the plain model found none where this one meets every budget).
    When it costs nothing it is optimal (host costs are never negative); its tie-break is then unproven."""
    fit = _fitting(problem, opts, _movable_on_host(problem))
    return None if fit is None else _fallback_result(problem, opts, t0, *fit)


def _fitting(
    problem: Problem, opts: Options, placement: dict[str, str], costs: tuple[list, list] | None = None
) -> tuple[dict, Evaluation] | None:
    """(placement, its exact evaluation) when it meets every row and max_moves; None otherwise. `costs`:
    evaluate()'s, when the caller has them."""
    ev = evaluate(problem, placement, costs)
    if ev.violations or (opts.max_moves is not None and len(moves(problem, placement)) > opts.max_moves):
        return None
    return placement, ev


def _fallback_result(problem: Problem, opts: Options, t0: float, placement: dict, ev: Evaluation) -> dict:
    """A placement that meets every row (checked, _fitting) without a bound: `feasible` with gap 1 (host
    costs are never negative, so 0 bounds them), `optimal` when it costs nothing, moves included
    (tie-break unproven)."""
    seconds = time.monotonic() - t0
    if ev.host_cost == 0 and not (move_cost_of(opts) and moves(problem, placement)):
        return result(problem, placement, "optimal", seconds, ev=ev, opts=opts, primary_seconds=seconds,
                      tiebreak_proven=False)  # fmt: skip
    return result(problem, placement, "feasible", seconds, 1.0, ev, opts=opts)


def _movable_on_host(problem: Problem) -> dict[str, str]:
    """Every vertex with a choice on the host, the others where they must be."""
    return {n.id: a[0] if len(a := problem.allowed(n)) == 1 else HOST for n in problem.nodes}


def _cuts_box(problem: Problem, model: _Model) -> float | None:
    """The first box (deterministic s) after which the plain model's full solve separates root cuts, or None
    when it separates none: CUTS_BOX with several sNICs, SLO_CUTS_BOX with one where a chain's latency row
    is kept (CUTS_SNICS, CUTS_WITH_SLO)."""
    if len(problem.snics) >= CUTS_SNICS:
        return CUTS_BOX
    return SLO_CUTS_BOX if CUTS_WITH_SLO and model.latency_rows > 0 else None


def _current_hint(model: _Model) -> dict | None:
    """The current placement as CP-SAT's hint, only when every vertex with a choice has one: a partial one
    (foreign large 5,000 seeds 1 and 4: a current location on ~30 % of the NFs) kept stage 1 from any
    placement in 15 s where without it seed 1 was proven in 2.3 CPU s (bench/RESULTS.md, large22)."""
    if model.opts.solver != "cpsat":
        return None
    hint = {}
    for (i, loc), var in model.x.items():
        cur = model.p.nodes[i].location
        if cur is None:
            return None
        hint[var] = int(cur == loc)
    return hint or None


def _gap(obj: float | None, bound: float | None) -> float:
    if obj is None or bound is None:
        return 1.0
    return 0.0 if abs(obj) < 1e-9 else round(abs(obj - bound) / abs(obj), 6)


def result(
    problem: Problem,
    placement: dict[str, str],
    status: str,
    seconds: float,
    gap: float = 0.0,
    ev: Evaluation | None = None,
    *,
    opts: Options | None = None,
    primary_seconds: float | None = None,
    tiebreak_proven: bool = True,
) -> dict:
    """The output object of docs/placement.md for a placement found with `status`."""
    ev = ev or evaluate(problem, placement)
    if status == "optimal" and opts is not None and (primary_seconds or 0) > opts.time_limit:
        # Proven, but after the limit (e.g. a slow parse or prepare): not an answer within it. What was
        # proven is a relative gap of at most gap_limit.
        status, gap = "feasible", opts.gap_limit
    out = {
        "status": status,
        "placement": placement,
        "host_cost": float(ev.host_cost),
        "snic_load": {s: float(v) for s, v in ev.snic_load.items()},
        "pcie_gbps": {s: {"up": float(d["up"]), "down": float(d["down"])} for s, d in ev.pcie.items()},
        "moves": moves(problem, placement),
        "solve_seconds": round(seconds, 4),
    }
    if status == "feasible":
        out["gap"] = gap
    if status == "optimal":
        out["tiebreak"] = "proven" if tiebreak_proven else "best-effort"
        if primary_seconds is not None:
            out["host_cost_seconds"] = round(primary_seconds, 4)
    if opts is not None:
        out["gap_limit"] = opts.gap_limit
    if problem.inexact:
        worst = max(problem.inexact, key=lambda t: t[3])
        out["inexact_inputs"] = {"count": len(problem.inexact), "max_relative_error": worst[3],
                                 "fields": [t[0] for t in problem.inexact[:5]]}  # fmt: skip
    if problem.chains:
        out["chain_latency_us"] = {c: float(v) for c, v in ev.chain_latency.items()}
    return out


def _placeable(problem: Problem, opts: Options) -> bool:
    """False only when the plain model proves `problem` infeasible within opts.time_limit. No objective:
    it answers at its first placement (a full solve proved the optimum of every trial: 2.7 s on a 50-NF
    instance with SLO chains where the whole diagnosis now takes a fraction of that)."""
    try:
        status, _, _ = _Model(problem, opts).solve(time.monotonic() + opts.time_limit)
    except ModelRefused:
        return True  # not proven infeasible
    return status != "infeasible"


def diagnose(problem: Problem, opts: Options) -> str:
    """Name the constraint that cannot be met.

    First what fixed vertices alone violate (pinned NFs' sNIC capacity or resources; a link's background
    traffic; traffic between vertices that cannot move); otherwise the family of constraints whose removal
    makes the instance feasible (each trial a feasibility question: the plain model without an
    objective, which stops at its first placement; unanswered within its limit counts as feasible).
    """
    fixed = {n.id for n in problem.nodes if len(problem.allowed(n)) == 1}
    base = _movable_on_host(problem)
    only_fixed = Problem(problem.nodes, [e for e in problem.edges if e.src in fixed and e.dst in fixed],
                         problem.snics, problem.pcie_model)  # fmt: skip
    # With every movable NF on the host, sNIC capacity and resources hold only pinned NFs.
    for v in evaluate(problem, base).violations:
        if not v.startswith(("pcie", "latency")):
            return f"pinned NFs alone exceed the {v}"
    no_traffic = Problem(problem.nodes, [], problem.snics, problem.pcie_model)
    for v in evaluate(no_traffic, base).violations:  # only the sNICs' background is left on the links
        return f"the background traffic alone exceeds the {v}"
    for v in evaluate(only_fixed, base).violations:
        return f"traffic between pinned vertices alone exceeds the {v}"
    forced = [n.id for n in problem.nodes if n.id in fixed and n.location not in (None, base[n.id])]
    if opts.max_moves is not None and len(forced) > opts.max_moves:
        return f"pinned NFs must move ({len(forced)}), more than max_moves={opts.max_moves}"
    slo = [c for c in problem.chains if c.latency_us is not None]
    for c in slo:
        least = sum((min(problem.nodes[problem.index[v]].latency(loc) for loc in
                         problem.allowed(problem.nodes[problem.index[v]])) for v in c.vertices), Fraction(0))  # fmt: skip
        if least > c.latency_us:
            return (f"chain {c.id}: latency_us {float(c.latency_us):g} is below the least latency of its "
                    f"vertices wherever they may run ({float(least):g} us)")  # fmt: skip
    trial_opts = replace(opts, time_limit=max(1.0, opts.time_limit / 4))

    def feasible(trial: Problem) -> bool:
        return _placeable(trial, trial_opts)

    if opts.max_moves is not None:
        # The move budget is named only when it is what binds (feasible without it); else the rest is
        # diagnosed without it, as an SLO or a budget infeasible on its own is the reason either way.
        if _placeable(problem, replace(trial_opts, max_moves=None)):
            within = f"no placement within max_moves={opts.max_moves} meets"
            if slo and feasible(replace(problem, chains=[])):
                return f"{within} the chains' latency SLOs: " + ", ".join(c.id for c in slo[:5])
            return f"{within} the capacity and PCIe budgets"
        trial_opts = replace(trial_opts, max_moves=None)

    if slo and feasible(replace(problem, chains=[])):
        for c in slo[:20]:
            if feasible(replace(problem, chains=[x for x in problem.chains if x is not c])):
                return (
                    f"chain {c.id}: its latency_us {float(c.latency_us):g} cannot be met within the budgets"
                )
        return "the chains' latency SLOs cannot be met together within the budgets: " + ", ".join(
            c.id for c in slo[:5]
        )
    big = Fraction(10**9)
    families = [
        ("PCIe budget", [replace(s, pcie_gbps=big) for s in problem.snics]),
        ("sNIC capacity", [replace(s, capacity=big) for s in problem.snics]),
    ]
    families += [(f"sNIC resource {r}", [replace(s, resources={**s.resources, r: big}) for s in problem.snics])
                 for r in problem.resource_names]  # fmt: skip
    for family, relaxed in families:
        if feasible(
            Problem(problem.nodes, problem.edges, relaxed, problem.pcie_model, chains=problem.chains)
        ):
            return f"the {family} cannot be met: the instance is feasible without it, infeasible with it"
    return "the sNIC capacity, resources and PCIe budgets cannot be met together"
