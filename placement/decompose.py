"""Exact integer data of a placement problem, split into independent choice groups (numpy, vectorised).

A *group* is a connected component of the traffic graph restricted to the NFs that can move (an edge to a
fixed vertex - VM, port, pinned NF - does not connect two groups). A group's only interaction with the rest
is through the shared budgets (sNIC capacity and resources, PCIe per link, the move budget). So a group is
replaced by the list of its *configurations* (one location per NF in it) with, per configuration:

- ``cost``: primary objective (host cost plus the per-move cost), exact integer units;
- ``pcie``: PCIe Gbit/s it puts on all links (the first tie-break), exact integer units;
- ``moves``: NFs it moves away from the current placement (the second tie-break);
- ``use``: its use of every shared budget row (capacity, resources, PCIe up/down or shared, moves).

A configuration is dropped when another one of the same group is no worse in the lexicographic objective
(cost, pcie, moves) and uses no more of any budget (dominance; exact: swapping it in keeps every solution
feasible and no worse). Chains of the UNO placement graph give groups of 1-3 NFs, i.e. 2-8 configurations
with one sNIC. A group of more than ENUMERATE_MAX configurations (a long chain) is built one NF at a time,
dominated partial configurations dropped on the way (``_configs_by_member``, pareto.py), a group with a
latency SLO too (each chain's latency so far one more compared use). Components too large to enumerate make
``prepare`` return None (the caller then uses the plain variable-per-NF model).
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from placement import integers, keptbound, pareto
from placement.evaluate import Evaluation, latencies
from placement.model import Problem, chain_latency

SAFE = 2**60  # every integer sum we form stays below this (int64, and CP-SAT's overflow checks)
CHUNK_CELLS = 1 << 20  # configurations x rows built at once: the deadline is checked between chunks
# Chunks built member by member are batched together up to this many (full-table) configurations x rows:
# small groups' build is mostly a fixed cost per member column; large ones gain nothing from a batch
MERGE_CELLS = 1 << 16
ENUMERATE_MAX = 64  # configurations of a group enumerated at once; larger groups are built member by member
# ... if they have at most 256 (else every pair is compared), or few budget rows: with many rows few
# configurations dominate another, and comparing them costs more than enumerating them all
BY_MEMBER_ROWS = 4
# Above max_configs a group is only built member by member (never enumerated); its row in the full
# table (mixed radix) and the dominance class must stay in int64, and the partial configurations alive
# at once (memory) are capped: past either limit the instance goes to the plain model. So does a group
# that keeps more than MAX_KEPT: with several sNICs few configurations dominate another, and building and
# searching ever larger groups costs more than the plain model (bench/RESULTS.md, place10cap).
MAX_ROW = 2**40
# The member-by-member build first compares partial configurations once a group may have more than this
# many (each comparison is a fixed cost of tens of numpy calls, and among a few of them few dominate).
# Exact: a partial configuration dominated now has its completions dominated by those of the one that
# dominates it, in the next member's classes too; the limits below cannot be passed before it.
FILTER_FROM = 16
# ... and past it leaves the comparison of every SKIP_EVERY-th member to the next member (only the groups
# completing there compared): exact for the same reason, and only while no group can pass its limits there
# (fewer numpy calls; prepare of long 500 / 1,000 1-4 % less than comparing on every member (0), skipping
# every other one (2) about half that, measured with pareto's elite filter: near the noise of this machine).
SKIP_EVERY = 3
MAX_PARTIALS = 1 << 20
MAX_KEPT = 16384
# ... and sooner on a small instance: a group keeping more than KEPT_PER_BOOLEAN configurations per location
# boolean of the whole instance (the plain model's size) cost more to build and search than the plain model
# took (bench/RESULTS.md: one-sNIC instances with base costs, 54-148 booleans, up to 16,384 kept: prepare
# 0.06-0.34 s, then the plain model; the families keep at most ~11 per boolean below 512 booleans).
KEPT_PER_BOOLEAN = 32
KEPT_FLOOR = 1024


def kept_limit(problem: Problem) -> int:
    """The most configurations a group may keep in `problem` (MAX_KEPT, less on small instances)."""
    return min(MAX_KEPT, max(KEPT_FLOOR, KEPT_PER_BOOLEAN * problem.location_booleans()))


class PrepareTimeout(Exception):
    """prepare passed its deadline before every group's configurations were built."""


@dataclass
class Groups:
    """Flattened configurations of all groups (arrays indexed by configuration, sorted by group)."""

    locations: list[str]
    fixed: dict[int, int]  # node index -> location index, for every vertex that cannot move
    group_nodes: list[np.ndarray]  # per group: the movable node indices, in column order
    start: np.ndarray  # configurations of group g are start[g]:start[g+1]
    config: np.ndarray  # row of the configuration in its group's full table (mixed radix, see _digits)
    cost: np.ndarray
    pcie: np.ndarray
    moves: np.ndarray
    use: np.ndarray  # (configs, rows)
    budget: list[int]  # per row: what is left once the fixed vertices are accounted for
    row_names: list[str]
    cost_const: Fraction  # primary cost of the fixed vertices (host cost of NFs pinned to the host)
    cost_unit: Fraction  # one cost unit in host-cost units
    # Rounding of the working integers (integers.py): the optimum's exact cost is at most this far above
    # the solver's (host-cost units; 0 when exact), and the rows that were rounded conservatively.
    cost_error: Fraction
    rounded_rows: list[str]
    current: np.ndarray  # per group: configuration index (global) of the current placement, or -1
    exact: dict  # unscaled integer data for `evaluation` (host, nic, needs, edges and their units)
    memo: Memo | None = field(default=None, repr=False, compare=False)  # for reprepare.py
    # Edges with traffic between two groups (only where no PCIe row can bind, prepare_plan): no group's
    # `pcie` counts them, so a PCIe tie-break over the groups is not exact.
    free_edges: int = 0

    @property
    def n_groups(self) -> int:
        return len(self.group_nodes)

    def evaluation(self, problem: Problem, placement: dict[str, str]) -> Evaluation:
        """The same figures as evaluate.evaluate, from the exact integers (no per-term Fraction work)."""
        x = self.exact
        ix = {loc: k for k, loc in enumerate(self.locations)}
        loc = np.array([ix[placement[n.id]] for n in problem.nodes], dtype=np.int64)
        where = loc.tolist()
        host_cost = Fraction(sum(h for h, k in zip(x["host"], where, strict=True) if k == 0), x["host_den"])
        snic_load, used, pcie = {}, {}, {}
        la, lb, g = loc[x["src"]], loc[x["dst"]], x["g"]
        for k, s in enumerate(problem.snics, start=1):
            snic_load[s.id] = Fraction(
                sum(v for v, w in zip(x["nic"], where, strict=True) if w == k), x["nic_den"]
            )
            used[s.id] = {r: Fraction(sum(v for v, w in zip(c, where, strict=True) if w == k), den)
                          for r, (c, den) in x["needs"].items()}  # fmt: skip
            crossing = {"up": (la == k) & (lb != k), "down": (lb == k) & (la != k)}
            pcie[s.id] = {d: s.background[d] + Fraction(int(g[m].sum()), x["G"]) for d, m in crossing.items()}
        violations = []
        for s in problem.snics:
            if snic_load[s.id] > s.capacity:
                violations.append(f"capacity of {s.id}")
            violations += [
                f"resource {r} of {s.id}" for r, have in s.resources.items() if used[s.id][r] > have
            ]
            up, down = pcie[s.id]["up"], pcie[s.id]["down"]
            if (up + down if problem.pcie_model == "shared" else max(up, down)) > s.pcie_gbps:
                violations.append(f"pcie of {s.id}")
        lat, late = latencies(problem, placement)
        return Evaluation(host_cost, snic_load, pcie, violations + late, used, lat)

    def placement(self, problem: Problem, chosen: list[int]) -> dict[str, str]:
        """Placement from one chosen configuration (global index) per group."""
        out = {problem.nodes[i].id: self.locations[loc] for i, loc in self.fixed.items()}
        L = len(self.locations)
        for g, c in enumerate(chosen):
            row = _digits(int(self.config[c]), L, len(self.group_nodes[g]))
            for i, loc in zip(self.group_nodes[g].tolist(), row, strict=True):
                out[problem.nodes[i].id] = self.locations[loc]
        return {n.id: out[n.id] for n in problem.nodes}


def _times(v: Fraction, den: int) -> int:
    """v * den as an int, for den a multiple of v's denominator (no Fraction arithmetic)."""
    return v.numerator * (den // v.denominator)


def _lcm_den(values) -> int:
    return math.lcm(*{v.denominator for v in values})


def pcie_never_binds(
    g: np.ndarray, both_fixed: np.ndarray, budgets: list[int], first: int, n_pcie: int
) -> bool:
    """Whether no PCIe row can bind: each one's budget (`budgets[first : first + n_pcie]`, fixed vertices'
    crossings taken off) holds every edge that could cross (`g`, working units rounded up, less the edges
    `both_fixed`): an edge crosses a link at most once, in one direction. False without edges or PCIe rows."""
    if not len(g) or not n_pcie:
        return False
    total = int(g[~both_fixed].sum())
    return all(total <= b for b in budgets[first : first + n_pcie])


def _components(movable: list[int], a: np.ndarray, b: np.ndarray, is_mov: np.ndarray) -> list[list[int]]:
    """The movable nodes joined by the links a[k] - b[k] (a link with a fixed end joins nothing): each
    component's nodes ascending, the components by their first node (the order of `movable`, ascending).
    Each round, a link's ends and their labels take the least label of the two ends, then every label
    follows its label's label to the end: the labels (each a node of the same component) settle on each
    component's least node in a few rounds (vectorised; no loop per link). Hooking the labels too and
    following them to the end is what keeps the rounds few: moving only the ends' labels one step took a
    round per few nodes of a path listed in random order (50,000 nodes: 11.8 s, now 0.03 s)."""
    inner = is_mov[a] & is_mov[b]
    a, b = a[inner], b[inner]
    label = np.arange(len(is_mov), dtype=np.int64)
    while True:
        least = np.minimum(label[a], label[b])
        new = label.copy()
        for end in (a, b, label[a], label[b]):
            np.minimum.at(new, end, least)
        while not np.array_equal(jumped := new[new], new):
            new = jumped
        if np.array_equal(new, label):
            break
        label = new
    nodes = np.array(movable, dtype=np.int64)
    nodes = nodes[np.lexsort((nodes, label[nodes]))]
    cut = np.nonzero(np.diff(label[nodes]))[0] + 1
    return [part.tolist() for part in np.split(nodes, cut)] if len(nodes) else []


def prepare(
    problem: Problem,
    move_cost: Fraction = Fraction(0),
    max_moves: int | None = None,
    max_configs: int = 4096,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> Groups | None:
    """Integer data and dominance-pruned configurations, or None when a group is too large (above
    `max_configs` configurations and not built member by member, or past MAX_ROW / MAX_PARTIALS) or a sum
    would not fit in 60 bits. With a `deadline` (on `clock`): PrepareTimeout once it has passed, checked
    between chunks of groups (large groups enumerate thousands of configurations each)."""
    build = prepare_plan(problem, move_cost, max_moves, max_configs)
    return None if build is None else build(deadline, clock)


def prepare_plan(
    problem: Problem,
    move_cost: Fraction = Fraction(0),
    max_moves: int | None = None,
    max_configs: int = 4096,
) -> Callable[[float | None, Callable[[], float]], Groups | None] | None:
    """prepare() up to its groups: None where prepare gives up before looking at any group's configurations
    (a sum past 60 bits, fixed vertices missing an SLO, a component past MAX_ROW, a chunk too large), else
    `build(deadline, clock)`, the rest of prepare (which may still give up: first where keptbound.py shows a
    group would keep too many, then on the way). Cheap (foreign draws: ~0.001 s; the kept-count bound,
    2-15 ms with two sNICs, is the build's): a caller can ask it before choosing a path (solver.solve: no
    plain-model box first where the engine would not run)."""
    p = problem
    locs = p.locations
    loc_ix = {loc: k for k, loc in enumerate(locs)}
    n_nodes, n_snic = len(p.nodes), len(p.snics)
    fixed: dict[int, int] = {}
    movable: list[int] = []
    for i, n in enumerate(p.nodes):
        allowed = p.allowed(n)
        if len(allowed) == 1:
            fixed[i] = loc_ix[allowed[0]]
        else:
            movable.append(i)
    cur = np.full(n_nodes, -1, dtype=np.int64)
    for i in movable:
        if p.nodes[i].location is not None:
            cur[i] = loc_ix[p.nodes[i].location]

    # Exact scaling: traffic in units of 1/G (G also makes every PCIe budget integral).
    has_traffic = np.fromiter((bool(e.gbps) for e in p.edges), dtype=bool, count=len(p.edges))
    edges = [e for e, t in zip(p.edges, has_traffic.tolist(), strict=True) if t]
    edge_pos = np.where(has_traffic, np.cumsum(has_traffic) - 1, -1).tolist()
    G = _lcm_den(
        [e.gbps for e in edges]
        + [s.pcie_budget(d) for s in p.snics for d in ("up", "down", "both")]
        + [n.through for n in p.nodes]
    )
    src = np.fromiter((p.index[e.src] for e in edges), dtype=np.int64, count=len(edges))
    dst = np.fromiter((p.index[e.dst] for e in edges), dtype=np.int64, count=len(edges))
    g_int = [_times(e.gbps, G) for e in edges]
    pcie_shift = 0  # one grid for every PCIe row, so the PCIe tie-break adds like units
    for s in p.snics:
        for d in ("up", "down", "both"):
            pcie_shift = max(pcie_shift, integers.row(g_int, _times(s.pcie_budget(d), G)).shift)
    g_work = [-((-g) >> pcie_shift) for g in g_int] if pcie_shift else g_int  # rounded up, as in rows
    load = [2 * _times(n.through, G) for n in p.nodes]  # a table's traffic (in + out) on no link
    for a, b, g in zip(src.tolist(), dst.tolist(), g_int, strict=True):
        load[a] += g
        load[b] += g
    nfs = [i for i, n in enumerate(p.nodes) if n.placed]
    # Primary cost: b_host x instances + r_host x load (+ move_cost per move), units 1/(R*G), reduced by
    # the common gcd.
    R = _lcm_den([p.nodes[i].r_host for i in nfs] + [p.nodes[i].b_host for i in nfs] + [move_cost])
    host = [0] * n_nodes
    for i in nfs:
        nd = p.nodes[i]
        host[i] = _times(nd.r_host, R) * load[i] + _times(nd.b_host, R) * G * nd.instances
    mc = int(move_cost * R * G)
    div = 0
    for i in movable:
        div = math.gcd(div, host[i])
    if any(cur[i] >= 0 for i in movable):
        div = math.gcd(div, mc)
    div = div or 1
    host_raw = host
    host = [h // div for h in host] if div > 1 else host
    mc //= div
    obj = integers.objective([host[i] for i in movable] + [mc] * len(movable))
    cost_shift = obj.shift
    if cost_shift:
        half = 1 << (cost_shift - 1)
        host = [(h + half) >> cost_shift for h in host]
        mc = (mc + half) >> cost_shift
    cost_unit = Fraction(div << cost_shift, R * G)
    fixed_host = sum(host_raw[i] for i, loc in fixed.items() if loc == 0)
    cost_const = Fraction(fixed_host, div << cost_shift)
    cost_error = cost_unit * len(movable) * (2 if mc else 1) if cost_shift else Fraction(0)
    rounded_rows: list[str] = ["PCIe budgets"] if pcie_shift else []

    # Budget rows: per sNIC capacity, per sNIC x resource, PCIe per link (and direction), moves.
    row_names: list[str] = []
    node_rows: list[tuple[int, list[int]]] = []  # (sNIC location index, per-node coefficient)
    budgets: list[int] = []
    needs_raw: dict[str, tuple[list[int], int]] = {}
    Rn = _lcm_den([p.nodes[i].r_nic for i in nfs] + [p.nodes[i].b_nic for i in nfs]
                  + [s.capacity for s in p.snics])  # fmt: skip
    nic = [0] * n_nodes
    cap_shifts: list[int] = []
    for i in nfs:
        nd = p.nodes[i]
        nic[i] = _times(nd.r_nic, Rn) * load[i] + _times(nd.b_nic, Rn) * G * nd.instances
    for k, s in enumerate(p.snics):
        sc = integers.row(nic, _times(s.capacity, Rn) * G)
        cap_shifts.append(sc.shift)
        row_names.append(f"capacity of {s.id}")
        node_rows.append((k + 1, sc.ints))
        budgets.append(sc.budget)
        if not sc.exact:
            rounded_rows.append(row_names[-1])
    for r in p.resource_names:
        Rr = _lcm_den([p.nodes[i].needs.get(r, Fraction(0)) for i in nfs] + [s.resources[r] for s in p.snics])
        coef = [0] * n_nodes
        for i in nfs:
            coef[i] = _times(p.nodes[i].needs.get(r, Fraction(0)), Rr)
        needs_raw[r] = (coef, Rr)
        for k, s in enumerate(p.snics):
            sc = integers.row(coef, _times(s.resources[r], Rr))
            row_names.append(f"resource {r} of {s.id}")
            node_rows.append((k + 1, sc.ints))
            budgets.append(sc.budget)
            if not sc.exact:
                rounded_rows.append(row_names[-1])
    pcie_rows: list[tuple[int, str]] = []  # (sNIC location index, "up"|"down"|"both")
    for k, s in enumerate(p.snics):
        dirs = ["both"] if p.pcie_model == "shared" else ["up", "down"]
        for d in dirs:
            pcie_rows.append((k + 1, d))
            row_names.append(f"PCIe budget of {s.id}" + ("" if d == "both" else f" ({d})"))
            budgets.append(_times(s.pcie_budget(d), G) >> pcie_shift)  # the link minus its background
    move_row = max_moves is not None
    if move_row:
        # A pinned NF whose current location is elsewhere moves anyway: it uses the budget too.
        forced = sum(1 for i, loc in fixed.items() if p.nodes[i].location not in (None, locs[loc]))
        row_names.append(f"max_moves={max_moves}")
        budgets.append(int(max_moves) - forced)
    n_rows = len(row_names)
    n_node_rows = len(node_rows)

    limit_terms = [sum(host), mc * len(movable), sum(g_work) * 2 * max(n_snic, 1)]
    limit_terms += [sum(c) for _, c in node_rows] + [abs(b) for b in budgets]
    if max(limit_terms, default=0) >= SAFE:
        return None

    base_budgets = list(budgets)
    # Fixed vertices' share of every budget.
    for r, (k, coef) in enumerate(node_rows):
        budgets[r] -= sum(coef[i] for i, loc in fixed.items() if loc == k)
    is_mov = np.zeros(n_nodes, dtype=bool)
    is_mov[movable] = True
    g_arr = np.array(g_work, dtype=np.int64)
    both_fixed = ~is_mov[src] & ~is_mov[dst] if len(edges) else np.zeros(0, dtype=bool)
    floc = np.zeros(n_nodes, dtype=np.int64)
    for i, loc in fixed.items():
        floc[i] = loc
    for r, (k, d) in enumerate(pcie_rows):
        la, lb, g = floc[src[both_fixed]], floc[dst[both_fixed]], g_arr[both_fixed]
        up = int(g[(la == k) & (lb != k)].sum())
        down = int(g[(lb == k) & (la != k)].sum())
        budgets[n_node_rows + r] -= {"up": up, "down": down, "both": up + down}[d]

    # Components of the movable NFs.
    # Where no placement can break a PCIe row (all traffic that could cross fits every link), edges bind
    # nothing: each NF's cost depends on its own location only, so edges join no group (a component of
    # thousands of NFs becomes single-NF groups; the PCIe tie-break then cannot see the edges between
    # groups: Groups.free_edges, the tie-break best-effort).
    loose = pcie_never_binds(g_arr, both_fixed, budgets, n_node_rows, len(pcie_rows))
    # A chain's movable vertices join one group, so that its latency SLO is a rule of that group alone.
    slo = [c for c in p.chains if c.latency_us is not None]
    none = np.zeros(0, dtype=np.int64)
    link_a, link_b = ([none], [none]) if loose else ([src], [dst])
    for c in slo:
        mov = [p.index[v] for v in c.vertices if is_mov[p.index[v]]]
        link_a.append(np.array(mov[:-1], dtype=np.int64))
        link_b.append(np.array(mov[1:], dtype=np.int64))
    fixed_at = {p.nodes[i].id: locs[loc] for i, loc in fixed.items()}
    for c in slo:
        if all(v in fixed_at for v in c.vertices) and chain_latency(p, c, fixed_at) > c.latency_us:
            return None  # fixed vertices alone miss this SLO: the plain model finds it infeasible
    L = len(locs)
    by_size: dict[int, list[list[int]]] = {}
    for members in _components(movable, np.concatenate(link_a), np.concatenate(link_b), is_mov):
        if L ** len(members) > MAX_ROW:
            return None
        by_size.setdefault(len(members), []).append(members)

    ctx = Ctx(problem=p, L=L, host=np.array(host, dtype=np.int64), mc=mc, cur=cur,
              row_loc=[k for k, _ in node_rows], coef=[np.array(c, dtype=np.int64) for _, c in node_rows],
              pcie_rows=pcie_rows, n_rows=n_rows, move_row=move_row, src=src, dst=dst,
              g=np.array(g_work, dtype=np.int64), is_mov=is_mov, floc=floc, slo=slo, fixed=fixed,
              lat=_latencies(p, slo) if slo else None, max_configs=max_configs,
              max_kept=kept_limit(p), loose=loose)  # fmt: skip
    group_nodes: list[np.ndarray] = []
    group_of = np.full(n_nodes, -1, dtype=np.int64)
    for m in sorted(by_size):
        mat = np.array(by_size[m], dtype=np.int64)  # (nc, m)
        group_of[mat] = len(group_nodes) + np.arange(len(mat))[:, None]
        group_nodes += list(mat)
    e_grp = np.where(is_mov[src], group_of[src], group_of[dst]) if len(edges) else np.zeros(0, np.int64)
    if loose:  # an edge between two groups belongs to neither (no row it enters can bind)
        e_grp[is_mov[src] & is_mov[dst] & (group_of[src] != group_of[dst])] = -1
    chunks = _chunks(ctx, by_size, e_grp)
    if chunks is None:
        return None  # a group too large

    def build(deadline: float | None = None, clock: Callable[[], float] = time.monotonic) -> Groups | None:
        def check(where: str) -> None:
            if deadline is not None and clock() > deadline:
                raise PrepareTimeout(f"time limit hit in prepare ({where})")

        shares = [0.0] * len(chunks)  # per chunk: its bound's share of the build's limit (_doomed)
        for ix in reversed(range(len(chunks))):
            shares[ix] = _doomed(ctx, chunks[ix][1], chunks[ix][3])
            if shares[ix] > 1:
                return None  # a group keeping more than max_kept: the build would give up there
        # The chunk built member by member whose bound came nearest its limit is built first (alone): where
        # a build gives up it is mostly there (foreign draws, one sNIC: the highest share on all 16
        # measured), and the groups built before it were work for nothing (draw 1153: a 16-NF group, 0.04 of
        # 0.07 s). The same groups either way: each group's configurations are its own, whatever it is
        # built with.
        early = max((ix for ix, (_, _, _, how) in enumerate(chunks) if how[0] and shares[ix] > 0),
                    key=lambda ix: shares[ix], default=None)  # fmt: skip
        # Chunks built member by member wait and are built together, several sizes at once, up to
        # MERGE_CELLS: the build's fixed cost is per member column, whatever the number of groups.
        blocks: list[Block] = []
        built: list[list[Block] | None] = [None] * len(chunks)  # per chunk, in group order (None: pending)
        pending: list[tuple[int, np.ndarray, np.ndarray, SloTerms | None]] = []  # (chunk, groups, edges, SLO)
        cells = 0
        if early is not None:
            m, mat, esel, how = chunks[early]
            check(f"groups of {m} NFs")
            if not _build_pending(ctx, [(early, mat, esel, how[1])], built, check):
                return None
        for ix, (m, mat, esel, how) in enumerate(chunks):
            if ix == early:
                continue
            check(f"groups of {m} NFs")
            if how[0]:
                size = L**m * len(mat) * max(1, n_rows)
                if pending and cells + size > MERGE_CELLS:
                    if not _build_pending(ctx, pending, built, check):
                        return None
                    pending, cells = [], 0
                pending.append((ix, mat, esel, how[1]))
                cells += size
                continue
            blocks_m = _enumerated(ctx, mat, esel)
            if blocks_m is None:
                return None  # no configuration meets an SLO (the plain model says infeasible)
            built[ix] = blocks_m
        if pending and not _build_pending(ctx, pending, built, check):
            return None
        for chunk in built:
            assert chunk is not None
            blocks += chunk
        memo = Memo(ctx=ctx, group_of=group_of, e_grp=e_grp, blocks=blocks, G=G, R=R, Rn=Rn, div=div,
                    cost_shift=cost_shift, pcie_shift=pcie_shift, cap_shifts=cap_shifts, load=load,
                    host_raw=host_raw, host=host, nic=nic, node_rows=[c for _, c in node_rows], g_int=g_int,
                    g_work=g_work, movable=movable, base_budgets=base_budgets, move_cost=move_cost,
                    max_moves=max_moves, edge_pos=edge_pos)  # fmt: skip
        return assemble(memo, locs, fixed, group_nodes, budgets, row_names, cost_const, cost_unit,
                        cost_error, rounded_rows, needs_raw)  # fmt: skip

    return build


def _chunks(ctx: Ctx, by_size: dict[int, list[list[int]]], e_grp: np.ndarray) -> list[tuple] | None:
    """The groups in build order (by size), in chunks of up to CHUNK_CELLS cells: per chunk (size, groups
    (nc, m), its edges' mask, how configs builds it (_member_plan)); None when a chunk is too large."""
    out, first, L = [], 0, ctx.L
    for m in sorted(by_size):
        step = max(1, CHUNK_CELLS // (L**m * max(1, ctx.n_rows)))
        for a in range(0, len(by_size[m]), step):
            mat = np.array(by_size[m][a : a + step], dtype=np.int64)
            esel = (e_grp >= first) & (e_grp < first + len(mat))
            first += len(mat)
            plan = _member_plan(ctx, mat)
            if plan is None:
                return None
            out.append((m, mat, esel, plan))
    return out


def _doomed(ctx: Ctx, mat: np.ndarray, plan: tuple[bool, SloTerms | None]) -> float:
    """Past 1 when a group of the chunk `mat` surely keeps more than ctx.max_kept configurations (or, one
    sNIC, more than L x max_kept partial ones after some member), so that its build member by member gives
    up (keptbound.py: only without SLOs in the chunk, without move costs, and with the same coefficients in
    every sNIC's capacity row); else, one sNIC, the largest share of its limit the bound reached in the
    chunk's groups (0: no bound)."""
    n_snics = ctx.L - 1
    share = 0.0
    if not plan[0] or plan[1] is not None or n_snics < 1:
        return share
    if ctx.L ** mat.shape[1] <= ctx.max_kept:
        return share
    cap = np.array([ctx.coef[r] for r in range(n_snics)])  # the capacity rows come first, one per sNIC
    for members in mat:
        if ctx.mc and (ctx.cur[members] >= 0).any():
            continue
        c = cap[:, members]
        if not (c == c[0]).all():
            continue
        if n_snics > 1:
            if keptbound.kept_exceeds(ctx.host[members], c[0], n_snics, ctx.max_kept):
                return math.inf
            continue
        # One sNIC: the whole group's front is small next to what the PCIe rows keep, but the partial
        # configurations after some member may surely be more than the build allows (L x max_kept).
        last, first = _latest_neighbours(ctx, members), _first_compared(ctx.L)
        exceeds, most = keptbound.one_snic_bound(
            ctx.host[members], c[0], last, first, ctx.L * ctx.max_kept, ctx.max_kept
        )
        if exceeds:
            return math.inf
        share = max(share, min(most, 1.0))
    return share


def _latest_neighbours(ctx: Ctx, members: np.ndarray) -> np.ndarray:
    """Per member of a group (column order): the column of its latest neighbour in the group, or -1 (the
    build's frontier: _configs_by_member's `last`, without SLOs)."""
    col = np.full(len(ctx.host), -1, dtype=np.int64)
    col[members] = np.arange(len(members))
    ca, cb = col[ctx.src], col[ctx.dst]
    inner = (ca >= 0) & (cb >= 0)
    last = np.full(len(members), -1, dtype=np.int64)
    np.maximum.at(last, ca[inner], cb[inner])
    np.maximum.at(last, cb[inner], ca[inner])
    return last


def _first_compared(L: int) -> int:
    """The first member after which _configs_by_member surely compares its partial configurations."""
    j = 0
    while L ** (j + 1) <= FILTER_FROM:
        j += 1
    return j


@dataclass
class Ctx:
    """What building a group's configurations reads (kept, updated in place of changes, by reprepare.py)."""

    problem: Problem
    L: int  # locations
    host: np.ndarray  # per node: primary cost on the host (working units)
    mc: int  # per move
    cur: np.ndarray  # per node: current location index, or -1
    row_loc: list[int]  # per node row (capacity, resources): its sNIC's location index
    coef: list[np.ndarray]  # per node row: per node coefficient
    pcie_rows: list[tuple[int, str]]  # (sNIC location index, "up"|"down"|"both")
    n_rows: int
    move_row: bool
    src: np.ndarray  # per edge with traffic: source node
    dst: np.ndarray
    g: np.ndarray  # per edge with traffic: PCIe working units
    is_mov: np.ndarray
    floc: np.ndarray  # per node: its location if fixed (else 0)
    slo: list  # chains with a latency SLO
    fixed: dict[int, int]
    lat: Latencies | None = None  # the latencies as integers (when a chain has an SLO)
    max_configs: int = 4096  # a larger group is built member by member or not at all
    max_kept: int = MAX_KEPT  # a group keeping more: no groups (kept_limit)
    # No PCIe row can bind (prepare_plan): edges between groups are in no group's pcie, so an enumerated
    # group's dominance goes by strictly lower cost alone (a tie on cost may differ in PCIe the group cannot see)
    loose: bool = False


@dataclass
class Latencies:
    """Every latency of a problem with SLOs on one common denominator, converted once (exact)."""

    host: np.ndarray  # per node: its latency on the host (int64, or Python ints when int64 may not hold sums)
    nic: np.ndarray  # ... on an sNIC
    cross: np.ndarray  # per location: the latency of its PCIe link (0 for the host)
    slo: dict[str, int]  # per chain id with an SLO: its latency_us
    vertices: dict[str, list[int]]  # ... its vertices' node indices
    flat: np.ndarray  # every such chain's vertices' node indices, chain after chain
    starts: np.ndarray  # per such chain: where its vertices start in `flat`
    pos: dict[str, int]  # per chain id with an SLO: its index in `starts`


def _latencies(p: Problem, slo: list) -> Latencies:
    den = _lcm_den([x for n in p.nodes for x in (n.latency_host, n.latency_nic)]
                   + [s.pcie_latency for s in p.snics] + [c.latency_us for c in slo])  # fmt: skip
    host = [_times(n.latency_host, den) for n in p.nodes]
    nic = [_times(n.latency_nic, den) for n in p.nodes]
    cross = [0] + [_times(s.pcie_latency, den) for s in p.snics]
    worst = max(host + nic + cross, default=0) * 3 * max((len(c.vertices) for c in slo), default=1)
    dtype = np.int64 if worst < 2**62 else object
    vertices = {c.id: [p.index[v] for v in c.vertices] for c in slo}
    lens = [len(c.vertices) for c in slo]
    # An SLO at least `worst` is met by every configuration (a chain's latency sums at most 3 x the largest
    # latency a vertex): such an SLO counts as `worst`, so that it fits the dtype (an SLO of 9.3e18 us beside
    # latencies of a few us raised OverflowError in the int64 comparison).
    return Latencies(np.array(host, dtype=dtype), np.array(nic, dtype=dtype), np.array(cross, dtype=dtype),
                     {c.id: min(_times(c.latency_us, den), worst) for c in slo}, vertices,
                     np.array([i for c in slo for i in vertices[c.id]], dtype=np.int64),
                     np.cumsum([0] + lens[:-1], dtype=np.int64), {c.id: k for k, c in enumerate(slo)})  # fmt: skip


def _chain_rows(lat: Latencies, slo: list, where_row: np.ndarray) -> list[int]:
    """Per chain of `slo`: the row (in `where_row`'s batch) of the group its movable vertices join (a
    chain's movable vertices are one group), -1 when none is in the batch; one pass over every chain."""
    rows = np.maximum.reduceat(where_row[lat.flat], lat.starts) if len(lat.starts) else lat.starts
    return rows[[lat.pos[c.id] for c in slo]].tolist()


@dataclass
class Block:
    """One group's configurations (its undominated rows of the full table, never kept: see _digits)."""

    size: int  # L**m: configurations of the full table
    config: np.ndarray  # kept rows of the full table
    cost: np.ndarray
    pcie: np.ndarray
    moves: np.ndarray
    use: np.ndarray  # (kept, rows)
    current: int  # index among the kept ones of the current placement, or -1


@dataclass
class Memo:
    """prepare's intermediate data, for an incremental update (reprepare.py)."""

    ctx: Ctx
    group_of: np.ndarray  # per node: its group, -1 if fixed
    e_grp: np.ndarray  # per edge with traffic: its group, -1 between fixed vertices
    blocks: list[Block]
    G: int
    R: int
    Rn: int
    div: int
    cost_shift: int
    pcie_shift: int
    cap_shifts: list[int]
    load: list[int]  # per node: Gbit/s in + out, units 1/G
    host_raw: list[int]  # per node: exact host cost, units 1/(R*G)
    host: list[int]  # per node: host cost in working units (the objective's)
    nic: list[int]  # per node: exact sNIC units, units 1/(Rn*G)
    node_rows: list[list[int]]  # per node row: per node coefficient (working units)
    g_int: list[int]  # per edge with traffic: exact Gbit/s, units 1/G
    g_work: list[int]  # ... in PCIe working units
    movable: list[int]
    base_budgets: list[int]  # per row: before the fixed vertices' share
    move_cost: Fraction
    max_moves: int | None
    edge_pos: list[int]  # per input edge: its index among the edges with traffic, or -1
    dens: dict | None = None  # denominators behind G, R, Rn, counted (reprepare.py, on its first update)

    @property
    def loose(self) -> bool:
        """No PCIe row can bind: edges join no group (prepare_plan)."""
        return self.ctx.loose


def configs(
    ctx: Ctx, mat: np.ndarray, esel: np.ndarray, check: Callable[[str], None] | None = None
) -> list[Block] | None:
    """The blocks of the groups `mat` (nc, m) (all of one size m), `esel` the edges (with traffic) of these
    groups; None when a group has no configuration meeting the SLOs, or when they are too large: above
    ctx.max_configs configurations and not buildable member by member (latencies beyond int64), or past
    MAX_PARTIALS or ctx.max_kept. `check(where)` (prepare's deadline) is called before each member of a
    group built member by member: one large group is a chunk of its own."""
    plan = _member_plan(ctx, mat)
    if plan is None:
        return None
    if plan[0]:
        return _configs_by_member(ctx, mat, esel, plan[1], check)
    return _enumerated(ctx, mat, esel)


def _where(mat: np.ndarray, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Per node: its row in `mat` (groups, members; -1 pads a group with fewer members) and its column,
    -1 for a node in none."""
    where_row = np.full(n_nodes, -1, dtype=np.int64)
    where_col = np.full(n_nodes, -1, dtype=np.int64)
    r, c = np.nonzero(mat >= 0)
    where_row[mat[r, c]] = r
    where_col[mat[r, c]] = c
    return where_row, where_col


def _member_plan(ctx: Ctx, mat: np.ndarray) -> tuple[bool, SloTerms | None] | None:
    """How configs builds the groups `mat` (nc, m): (True, their SLO terms or None) member by member,
    (False, None) enumerated; None when neither (too large)."""
    L, (_, m) = ctx.L, mat.shape
    K = L**m
    if K <= ENUMERATE_MAX:
        return False, None
    touches = _slo_touches(ctx, mat)
    slo = _slo_terms(ctx, mat, *_where(mat, len(ctx.host))) if touches else None
    rows = ctx.n_rows + (slo.budget.shape[1] if slo is not None else 0)  # an SLO compares like a row
    # Above max_configs enumerating is out of reach: member by member whatever the rows.
    if (K <= 256 or rows <= BY_MEMBER_ROWS or ctx.max_configs < K) and (slo is not None or not touches):
        return True, slo
    if ctx.max_configs < K:
        return None
    return False, None


def _build_pending(ctx: Ctx, pending: list, built: list, check: Callable[[str], None]) -> bool:
    """Build the chunks `pending` (chunk index, groups, edges, their SLO terms) member by member in one
    batch, their groups' members padded to the largest size, into `built`; False when configs would
    return None for one of them."""
    if len(pending) == 1:
        _, mat, esel, slo = pending[0]
        got = _configs_by_member(ctx, mat, esel, slo, check)
    else:
        width = max(mat.shape[1] for _, mat, _, _ in pending)
        mat = np.concatenate(
            [np.pad(m, ((0, 0), (0, width - m.shape[1])), constant_values=-1) for _, m, _, _ in pending]
        )
        esel = np.logical_or.reduce([e for _, _, e, _ in pending])
        has_slo = any(t is not None for _, _, _, t in pending)
        slo = _slo_terms(ctx, mat, *_where(mat, len(ctx.host))) if has_slo else None
        got = _configs_by_member(ctx, mat, esel, slo, check)
    if got is None:
        return False
    at = 0
    for chunk, m, _, _ in pending:
        built[chunk] = got[at : at + len(m)]
        at += len(m)
    return True


def _enumerated(ctx: Ctx, mat: np.ndarray, esel: np.ndarray) -> list[Block] | None:
    """configs of the groups `mat` (nc, m) from their full table: every configuration, then the
    undominated ones (up to 256 configurations; those meeting the SLOs when a chain with one passes)."""
    p, L, n_nodes = ctx.problem, ctx.L, len(ctx.host)
    nc, m = mat.shape
    where_row, where_col = _where(mat, n_nodes)
    where_m = np.full(n_nodes, -1, dtype=np.int64)
    where_m[mat] = m
    K = L**m
    table = _table(L, m)
    is_mov, floc, src, dst = ctx.is_mov, ctx.floc, ctx.src, ctx.dst
    on_host = (table == 0).astype(np.int64)
    cost = ctx.host[mat] @ on_host.T  # (nc, K)
    cur_m = ctx.cur[mat]
    if (cur_m >= 0).any():
        moved = ((cur_m[:, None, :] >= 0) & (table[None, :, :] != cur_m[:, None, :])).sum(-1)
    else:  # no current placement: the (groups, configurations, members) comparison is all false
        moved = np.zeros((nc, K), dtype=np.int64)
    cost = cost + ctx.mc * moved
    use = np.zeros((nc, K, ctx.n_rows), dtype=np.int64)
    for r, k in enumerate(ctx.row_loc):
        use[:, :, r] = ctx.coef[r][mat] @ (table == k).astype(np.int64).T
    n_node_rows = len(ctx.row_loc)
    es, ed, eg = src[esel], dst[esel], ctx.g[esel]
    row = np.where(is_mov[es], where_row[es], where_row[ed])
    la = np.where(is_mov[es][:, None], table[:, where_col[es]].T, floc[es][:, None])  # (ne, K)
    lb = np.where(is_mov[ed][:, None], table[:, where_col[ed]].T, floc[ed][:, None])
    pcie = np.zeros((nc, K), dtype=np.int64)
    # Edges sorted by their group's row: per-row sums by reduceat (np.add.at is far slower).
    order = np.argsort(row, kind="stable")
    row, la, lb, eg = row[order], la[order], lb[order], eg[order]
    firsts = np.nonzero(np.diff(row, prepend=-1))[0] if len(row) else np.zeros(0, dtype=np.int64)
    rows_hit = row[firsts]
    for r, (k, d) in enumerate(ctx.pcie_rows):
        contrib = np.where(_crosses(la, lb, k, d), eg[:, None], 0)
        acc = np.zeros((nc, K), dtype=np.int64)
        if len(firsts):
            acc[rows_hit] = np.add.reduceat(contrib, firsts, axis=0)
        use[:, :, n_node_rows + r] = acc
        pcie += acc  # a "both" row already counts up + down
    if ctx.move_row:
        use[:, :, ctx.n_rows - 1] = moved
    meets = _meets_slos(p, ctx.lat, ctx.slo, ctx.fixed, mat, table, where_row, where_col, where_m, m)
    if meets is None:
        keep = _undominated(cost, pcie, moved, use, ctx.loose) if K <= 256 else np.ones((nc, K), dtype=bool)
    else:  # among the configurations meeting the SLOs only
        keep = meets if K > 256 else _undominated_within(cost, pcie, moved, use, meets, ctx.loose)
    if not keep.any(1).all():
        return None
    cur_row = _current_rows(cur_m, L)
    # Flattened once (row-major: grouped by group), each block a view of its run.
    rows, ks = np.nonzero(keep)
    f_cost, f_pcie, f_moves, f_use = cost[rows, ks], pcie[rows, ks], moved[rows, ks], use[rows, ks]
    ends = np.cumsum(keep.sum(1)).tolist()
    rank = np.cumsum(keep, axis=1) - 1  # index among the kept ones
    at = np.maximum(cur_row, 0)
    hits = np.where((cur_row >= 0) & keep[np.arange(nc), at], rank[np.arange(nc), at], -1).tolist()
    out, s0 = [], 0
    for c, s1 in enumerate(ends):
        out.append(Block(K, ks[s0:s1], f_cost[s0:s1], f_pcie[s0:s1], f_moves[s0:s1], f_use[s0:s1], hits[c]))
        s0 = s1
    return out


def _crosses(la: np.ndarray, lb: np.ndarray, k: int, d: str) -> np.ndarray:
    """Where an edge from location `la` to `lb` counts on the PCIe row (sNIC k, direction d): only the
    direction the row counts ("both": up + down, i.e. exactly one end at sNIC k)."""
    at_a, at_b = la == k, lb == k
    return (at_a != at_b) if d == "both" else (at_a & ~at_b) if d == "up" else (at_b & ~at_a)


def _current_rows(cur_m: np.ndarray, L: int) -> np.ndarray:
    """Per group (row of `cur_m`, its members' current locations) the row of its current configuration in
    the full table (mixed radix, first member most significant); -1 where a member has none."""
    radix = L ** np.arange(cur_m.shape[1] - 1, -1, -1)
    return np.where((cur_m >= 0).all(1), (np.maximum(cur_m, 0) * radix).sum(1), -1)


def _slo_touches(ctx: Ctx, mat: np.ndarray) -> bool:
    """Whether a chain with a latency SLO passes through one of the groups `mat`."""
    if not ctx.slo or ctx.lat is None:  # prepare builds ctx.lat whenever a chain has an SLO
        return False
    where_row = np.full(len(ctx.host), -1, dtype=np.int64)
    where_row[mat] = 0
    return max(_chain_rows(ctx.lat, ctx.slo, where_row)) >= 0


@dataclass
class SloTerms:
    """The latency SLOs of a batch of groups for the member-by-member build: per group (row of the batch)
    one slot per chain with an SLO through it, its latency split by the member whose placement settles
    each term (int64: only built when the latencies fit)."""

    budget: np.ndarray  # (nc, S) the SLO less the latency of its fixed vertices and their crossings
    on_host: np.ndarray  # (nc, S, m) latency a member adds on the host (x its occurrences in the chain)
    on_nic: np.ndarray  # ... on an sNIC
    rest: np.ndarray  # (nc, S, m) the least latency the members after column j can still add
    row: np.ndarray  # per pair of consecutive chain vertices with at least one member: its group's row
    slot: np.ndarray  # ... its chain's slot
    ca: np.ndarray  # ... column of its first vertex (-1: fixed)
    cb: np.ndarray  # ... of its second
    fa: np.ndarray  # ... location of its first vertex when fixed
    fb: np.ndarray


def _slo_terms(ctx: Ctx, mat: np.ndarray, where_row: np.ndarray, where_col: np.ndarray) -> SloTerms | None:
    """SloTerms of the groups `mat`, None when the latencies need more than int64."""
    lat = ctx.lat
    if lat is None or lat.host.dtype != np.int64:
        return None
    nc, m = mat.shape
    host, nic, cross, floc, is_mov = (
        lat.host.tolist(),
        lat.nic.tolist(),
        lat.cross.tolist(),
        ctx.floc,
        ctx.is_mov,
    )
    slots = np.zeros(nc, dtype=np.int64)
    terms = []  # (row, slot, chain)
    for c, row in zip(ctx.slo, _chain_rows(lat, ctx.slo, where_row), strict=True):
        if row >= 0:
            terms.append((row, int(slots[row]), c, lat.vertices[c.id]))
            slots[row] += 1
    S = max(1, int(slots.max()))
    budget = np.full((nc, S), SAFE, dtype=np.int64)  # an unused slot never binds
    on_host = np.zeros((nc, S, m), dtype=np.int64)
    on_nic = np.zeros((nc, S, m), dtype=np.int64)
    pairs = []
    for g, k, c, idx in terms:
        const = 0
        for i in idx:
            if is_mov[i]:
                on_host[g, k, where_col[i]] += host[i]
                on_nic[g, k, where_col[i]] += nic[i]
            else:
                const += host[i] if floc[i] == 0 else nic[i]
        for a, b in zip(idx, idx[1:], strict=False):
            if is_mov[a] or is_mov[b]:
                pairs.append((g, k, int(where_col[a]) if is_mov[a] else -1, int(where_col[b]) if is_mov[b] else -1,
                              int(floc[a]), int(floc[b])))  # fmt: skip
            elif floc[a] != floc[b]:
                const += cross[floc[a]] + cross[floc[b]]
        budget[g, k] = lat.slo[c.id] - const
    least = np.minimum(on_host, on_nic)
    rest = np.cumsum(least[:, :, ::-1], axis=2)[:, :, ::-1] - least  # after column j
    p = np.array(pairs, dtype=np.int64).reshape(-1, 6).T
    return SloTerms(budget, on_host, on_nic, rest, *p)


def _closing(closing: np.ndarray, rows: np.ndarray, nc: int, grp: np.ndarray):
    """The terms `closing` (indices; `rows` their groups' rows) per partial configuration of groups `grp`:
    rounds of (has, term, the round's terms), the s-th term of its group in round s (a group may settle
    several at once); `term` is any term where `has` is false."""
    closing = closing[np.argsort(rows[closing], kind="stable")]
    rows_c = rows[closing]
    slot = np.arange(len(closing)) - np.searchsorted(rows_c, rows_c)  # index among its group's terms
    for s in range(int(slot.max()) + 1 if len(slot) else 0):
        term_of = np.full(nc, -1, dtype=np.int64)
        term_of[rows_c[slot == s]] = closing[slot == s]
        e = term_of[grp]
        yield e >= 0, np.maximum(e, 0), closing[slot == s]


def _end(
    digs: np.ndarray, col: np.ndarray, fixed_loc: np.ndarray, e: np.ndarray, terms: np.ndarray
) -> np.ndarray:
    """Location of an end of a term per partial configuration (`digs` their members' locations, `e` their
    terms, of the round's `terms`): member col[e]'s, or its fixed one fixed_loc[e] where col[e] < 0. Only
    where the partial configuration has a term does it count (the caller masks the rest): when every term
    of the round has this end at the same member (a chain's previous one), that member's column as is,
    without a gather per partial configuration."""
    c = col[terms]
    if len(c) and c[0] >= 0 and (c == c[0]).all():
        return digs[:, int(c[0])]
    c = col[e]
    return np.where(c >= 0, digs[np.arange(len(digs)), np.maximum(c, 0)], fixed_loc[e])


def _rows(a: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """a[mask] for a 2-D `a` (np.compress: measured ~3x faster than boolean row indexing)."""
    return np.compress(mask, a, axis=0)


def _configs_by_member(
    ctx: Ctx,
    mat: np.ndarray,
    esel: np.ndarray,
    slo: SloTerms | None = None,
    check: Callable[[str], None] | None = None,
) -> list[Block] | None:
    """configs of the groups `mat` (nc, m) built one member (column) at a time, dropping dominated
    partial configurations on the way; `slo` the latency SLOs through them, if any (then None when a
    group has no configuration meeting them).

    A partial configuration (locations of the first j members) carries the objective and the budget use
    of its members and of the edges with both ends placed; the edges still open join a placed member of
    the *frontier* (one with a neighbour not yet placed) to a later one. Two partial configurations with
    the same frontier locations get the same terms from every completion, so one that dominates the other
    (same rule as _undominated) still dominates after any completion: exactly the undominated rows of the
    full table are left, without building it (a chain's frontier is its last member).

    With SLOs, each chain's latency so far (its placed members and its crossings between placed
    vertices; consecutive chain vertices count as neighbours) is one more use compared, smaller being
    better: a dominating partial configuration's completions are then also no later, so they meet every
    SLO its rival's do. A partial one that cannot meet an SLO even with the least latency of its
    remaining members is dropped; the complete ones are compared without the latencies (all meet their
    SLOs): the undominated ones among those that meet the SLOs are left (_undominated_within).

    None as well when more than MAX_PARTIALS partial configurations would be alive at once, or a group
    keeps more than ctx.max_kept (see kept_limit; given up early once one has more than L times as many partial
    ones: the last member's locations still split them into up to L classes).

    Groups of several sizes are built together: a row of `mat` padded with -1 after its members; a
    group's partial configurations stay as they are once it has placed its last member."""
    L = ctx.L
    nc, m = mat.shape
    size = (mat >= 0).sum(1)
    mixed = bool((size < m).any())
    grow, col = _where(mat, len(ctx.host))
    es, ed, eg = ctx.src[esel], ctx.dst[esel], ctx.g[esel]
    ca = np.where(ctx.is_mov[es], col[es], -1)
    cb = np.where(ctx.is_mov[ed], col[ed], -1)
    e_row = np.where(ca >= 0, grow[es], grow[ed])
    fa, fb = ctx.floc[es], ctx.floc[ed]
    close = np.maximum(ca, cb)  # the member whose placement places the edge's last end
    last = np.full((nc, m), -1, dtype=np.int64)  # per member: its latest neighbour in the group
    inner = (ca >= 0) & (cb >= 0)
    np.maximum.at(last, (e_row[inner], ca[inner]), cb[inner])
    np.maximum.at(last, (e_row[inner], cb[inner]), ca[inner])
    if slo is not None:
        p_close = np.maximum(slo.ca, slo.cb)
        inner = (slo.ca >= 0) & (slo.cb >= 0)
        np.maximum.at(last, (slo.row[inner], slo.ca[inner]), slo.cb[inner])
        np.maximum.at(last, (slo.row[inner], slo.cb[inner]), slo.ca[inner])
        lat = np.zeros((nc, slo.budget.shape[1]), dtype=np.int64)  # per partial configuration and slot
    n_node_rows = len(ctx.row_loc)
    first_pcie = 3 + n_node_rows
    # Per partial configuration: its group (row of mat), its prefix (mixed radix, first member most
    # significant: the row of the full table once complete) and [cost, pcie, moves, use...].
    grp = np.arange(nc, dtype=np.int64)
    pre = np.zeros(nc, dtype=np.int64)
    vec = np.zeros((nc, 3 + ctx.n_rows), dtype=np.int64)
    # ... and its members' locations (the prefix's digits, read without dividing the prefix)
    digs = np.zeros((nc, m), dtype=np.min_scalar_type(L))
    for j in range(m):
        if check is not None:
            check(f"groups of {m} NFs, member {j + 1}")
        n = len(grp)
        # Per partial configuration: the copies it becomes (1: its group is complete).
        reps = np.where(size[grp] > j, L, 1) if mixed else L
        if (int(reps.sum()) if mixed else n * L) > MAX_PARTIALS:
            return None
        if mixed:
            active = np.repeat(size[grp] > j, reps)
            grp, vec = np.repeat(grp, reps), np.repeat(vec, reps, axis=0)
            digit = np.arange(len(grp)) - np.repeat(np.cumsum(reps) - reps, reps)
            pre = np.repeat(pre, reps) * np.where(active, L, 1) + digit
            loc = np.where(active, digit, -1)  # -1: no member placed (adds nothing below)
            digs = np.repeat(digs, reps, axis=0)
            digs[:, j] = np.where(active, digit, 0)
        else:
            grp, vec = np.repeat(grp, L), np.repeat(vec, L, axis=0)
            loc = np.tile(np.arange(L, dtype=np.int64), n)
            pre = np.repeat(pre, L) * L + loc
            digs = np.repeat(digs, L, axis=0)
            digs[:, j] = loc
        node = mat[grp, j]
        cur = ctx.cur[node]
        moved = ((cur >= 0) & (loc != cur) & (loc >= 0)).astype(np.int64)
        vec[:, 0] += np.where(loc == 0, ctx.host[node], 0) + ctx.mc * moved
        vec[:, 2] += moved
        for r, k in enumerate(ctx.row_loc):
            vec[:, 3 + r] += np.where(loc == k, ctx.coef[r][node], 0)
        if ctx.move_row:
            vec[:, 3 + ctx.n_rows - 1] += moved
        for has, e, terms in _closing(np.nonzero(close == j)[0], e_row, nc, grp):
            la, lb = _end(digs, ca, fa, e, terms), _end(digs, cb, fb, e, terms)
            g_e = np.where(has, eg[e], 0)
            for r, (k, d) in enumerate(ctx.pcie_rows):
                add = np.where(_crosses(la, lb, k, d), g_e, 0)
                vec[:, first_pcie + r] += add
                vec[:, 1] += add  # a "both" row already counts up + down
        use = vec[:, 3:]
        if slo is not None:
            lat = np.repeat(lat, reps, axis=0)
            lat += np.where((loc == 0)[:, None], slo.on_host[grp, :, j], slo.on_nic[grp, :, j])
            at = np.arange(len(grp))
            for has, e, terms in _closing(np.nonzero(p_close == j)[0], slo.row, nc, grp):
                la, lb = _end(digs, slo.ca, slo.fa, e, terms), _end(digs, slo.cb, slo.fb, e, terms)
                lat[at, slo.slot[e]] += np.where(has & (la != lb), ctx.lat.cross[la] + ctx.lat.cross[lb], 0)
            ok = (lat + slo.rest[grp, :, j] <= slo.budget[grp]).all(1)
            grp, pre, vec, lat, digs = grp[ok], pre[ok], _rows(vec, ok), _rows(lat, ok), _rows(digs, ok)
            if mixed:  # complete ones compared without their latencies (zeros compare equal)
                use = np.hstack([vec[:, 3:], np.where((size[grp] > j + 1)[:, None], lat, 0)])
            else:
                use = vec[:, 3:] if j == m - 1 else np.hstack([vec[:, 3:], lat])
        if j + 1 < int(size.min()) and L ** (j + 1) <= FILTER_FROM and len(grp) * L <= MAX_PARTIALS:
            continue  # few to compare yet, no group complete: the next member's comparison drops them
        # On every SKIP_EVERY-th member, while so few are alive that no group can pass its limit here, only
        # the groups completing now are compared: the next member's comparison drops the same ones (see above).
        now = None
        if (
            SKIP_EVERY
            and j % SKIP_EVERY == SKIP_EVERY - 1
            and len(grp) <= ctx.max_kept
            and len(grp) * L <= MAX_PARTIALS
        ):
            now = size[grp] == j + 1
            if not now.any():
                continue
        elif mixed:  # groups complete before this member: compared already
            now = size[grp] > j
        key = np.zeros(len(grp), dtype=np.int64)  # the frontier's locations
        for c in np.nonzero((last[:, : j + 1] > j).any(0))[0].tolist():  # a chain: the member just placed
            key += np.where(last[grp, c] > j, digs[:, c].astype(np.int64) * L**c, 0)
        # What a group may keep (a chain's last member still splits its partial configurations in up to L
        # classes): the comparison gives up, and so does the build, as soon as one keeps more.
        limit = np.where(size > j + 1, L, 1) * ctx.max_kept
        stop = None if check is None else functools.partial(check, f"groups of {m} NFs, member {j + 1}")
        if now is not None:
            dom = np.zeros(len(grp), dtype=bool)
            got = pareto.dominated(
                (grp * L**m + key)[now], vec[now, :3], use[now], pre[now], grp[now], limit, stop
            )
            if got is not None:
                dom[now] = got
        else:
            got = dom = pareto.dominated(grp * L**m + key, vec[:, :3], use, pre, grp, limit, stop)
        if got is None:
            return None
        keep = ~dom
        grp, pre, vec, digs = grp[keep], pre[keep], _rows(vec, keep), _rows(digs, keep)
        if slo is not None:
            lat = _rows(lat, keep)
    # Still sorted by (group, prefix): repeats and filters keep the order.
    cur_m = np.where(mat >= 0, ctx.cur[mat], 0)
    radix = np.where(mat >= 0, L ** np.maximum(size[:, None] - 1 - np.arange(m)[None, :], 0), 0)
    cur_row = np.where((cur_m >= 0).all(1), (np.maximum(cur_m, 0) * radix).sum(1), -1)
    ends = np.searchsorted(grp, np.arange(nc + 1))
    if (np.diff(ends) == 0).any():
        return None  # a group whose every configuration misses an SLO
    out = []
    for c in range(nc):
        s0, s1 = int(ends[c]), int(ends[c + 1])
        rows = pre[s0:s1]
        at = int(np.searchsorted(rows, cur_row[c]))
        hit = at if cur_row[c] >= 0 and at < len(rows) and rows[at] == cur_row[c] else -1
        v = vec[s0:s1]
        out.append(Block(L ** int(size[c]), rows, v[:, 0], v[:, 1], v[:, 2], v[:, 3:], hit))
    return out


@functools.lru_cache(maxsize=64)
def _table(L: int, m: int) -> np.ndarray:
    """(L**m, m) every assignment of m members to L locations (first column most significant)."""
    table = np.array(list(itertools.product(range(L), repeat=m)), dtype=np.int64).reshape(-1, m)
    table.setflags(write=False)
    return table


def _digits(row: int, L: int, m: int) -> list[int]:
    """The members' locations of row `row` of the full (L**m, m) table (first member most significant)."""
    out = [0] * m
    for j in range(m - 1, -1, -1):
        row, out[j] = divmod(row, L)
    return out


def assemble(memo: Memo, locs, fixed, group_nodes, budgets, row_names, cost_const, cost_unit,
             cost_error, rounded_rows, needs_raw) -> Groups:  # fmt: skip
    """Groups from the per-group blocks of `memo`."""
    blocks = memo.blocks
    n_rows = memo.ctx.n_rows
    counts = np.fromiter((len(b.config) for b in blocks), dtype=np.int64, count=len(blocks))
    start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    def cat(xs, shape=(0,)):
        return np.concatenate(xs) if xs else np.zeros(shape, dtype=np.int64)

    current = [int(start[g]) + b.current if b.current >= 0 else -1 for g, b in enumerate(blocks)]
    ctx = memo.ctx
    free = (
        int((memo.e_grp < 0).sum() - (~ctx.is_mov[ctx.src] & ~ctx.is_mov[ctx.dst]).sum()) if memo.loose else 0
    )
    return Groups(
        locations=locs,
        fixed=fixed,
        group_nodes=group_nodes,
        start=start,
        config=cat([b.config for b in blocks]),
        cost=cat([b.cost for b in blocks]),
        pcie=cat([b.pcie for b in blocks]),
        moves=cat([b.moves for b in blocks]),
        use=cat([b.use for b in blocks], (0, n_rows)),
        budget=budgets,
        row_names=row_names,
        cost_const=cost_const,
        cost_unit=cost_unit,
        cost_error=cost_error,
        rounded_rows=rounded_rows,
        current=np.array(current, dtype=np.int64),
        exact={
            "host": memo.host_raw,
            "host_den": memo.R * memo.G,
            "nic": memo.nic,
            "nic_den": memo.Rn * memo.G,
            "needs": needs_raw,
            "src": memo.ctx.src,
            "dst": memo.ctx.dst,
            "g": np.array(memo.g_int, dtype=object),  # exact, any size
            "G": memo.G,
        },  # fmt: skip
        memo=memo,
        free_edges=free,
    )


def _undominated(cost, pcie, moves, use, strict: bool = False) -> np.ndarray:
    """(nc, K) mask of configurations no other one of the same group dominates (see module doc); in
    chunks of groups, so that the (groups, K, K, rows) comparison stays small. `strict`: only by a
    strictly lower cost (Ctx.loose)."""
    nc, K = cost.shape
    step = max(1, 2_000_000 // max(1, K * K * max(1, use.shape[-1])))
    if nc <= step:
        return _undominated_chunk(cost, pcie, moves, use, strict)
    return np.concatenate([_undominated_chunk(cost[a : a + step], pcie[a : a + step], moves[a : a + step],
                                              use[a : a + step], strict) for a in range(0, nc, step)])  # fmt: skip


def _undominated_chunk(cost, pcie, moves, use, strict: bool = False) -> np.ndarray:
    """_undominated of a few groups at once.

    j dominates k: objective (cost, pcie, moves) lexicographically <= and every use <=, and strictly
    better somewhere or (all equal and j < k). Such a relation has no cycles, so every group keeps one.
    `strict`: j dominates k only with a lower cost and every use <=.
    """
    c1, c2 = cost[:, :, None], cost[:, None, :]  # [.., k, j]
    u1, u2 = use[:, :, None, :], use[:, None, :, :]
    le = (u2 <= u1).all(-1)
    if strict:
        return ~(le & (c2 < c1)).any(-1)
    p1, p2 = pcie[:, :, None], pcie[:, None, :]
    m1, m2 = moves[:, :, None], moves[:, None, :]
    lex_lt = (c2 < c1) | ((c2 == c1) & ((p2 < p1) | ((p2 == p1) & (m2 < m1))))
    lex_eq = (c2 == c1) & (p2 == p1) & (m2 == m1)
    lt_some = (u2 < u1).any(-1)
    K = cost.shape[1]
    idx_lt = np.arange(K)[None, :] < np.arange(K)[:, None]  # [k, j]: j < k
    dominated = le & (lex_lt | (lex_eq & (lt_some | idx_lt[None])))
    return ~dominated.any(-1)


def _meets_slos(p: Problem, lat: Latencies | None, slo, fixed, mat, table, where_row, where_col, where_m, m):
    """(nc, K) mask: the configurations of the size-m groups that keep every chain (SLO) through them
    within its latency_us; None when no chain with an SLO touches them. Exact: `lat`, the latencies on
    their common denominator (Python integers when int64 would not hold them)."""
    if not slo or lat is None:
        return None
    nc, K = len(mat), len(table)
    if lat.host.dtype == np.int64:
        return _meets_slos_int64(lat, slo, fixed, nc, table, where_row, where_col)
    ok = np.ones((nc, K), dtype=bool)
    touched = False
    dtype = lat.host.dtype
    for c in slo:
        idx = lat.vertices[c.id]
        groups = {int(where_row[i]) for i in idx if where_m[i] == m}
        if not groups:
            continue  # this chain's group is of another size (or it has none: checked in prepare)
        locs = [np.full(K, fixed[i], dtype=np.int64) if i in fixed else table[:, where_col[i]] for i in idx]
        total = np.zeros(K, dtype=dtype)
        for i, lr in zip(idx, locs, strict=True):
            total = total + np.where(lr == 0, lat.host[i : i + 1], lat.nic[i : i + 1])
        for a, b in zip(locs, locs[1:], strict=False):
            total = total + np.where(a != b, lat.cross[a] + lat.cross[b], 0).astype(dtype)
        (g,) = groups
        ok[g] &= (total <= lat.slo[c.id]).astype(bool)
        touched = True
    return ok if touched else None


SLO_CELLS = 1 << 18  # configurations x chain vertices compared at once by _meets_slos_int64


def _meets_slos_int64(lat: Latencies, slo, fixed, nc, table, where_row, where_col) -> np.ndarray | None:
    """_meets_slos when the latencies are int64: the chains' vertices side by side as columns (chains
    in turn, a batch at a time), each chain's latency a sum over its run of columns."""
    K = len(table)
    # (group row, chain) of each chain through these groups
    chains = [(row, c) for c, row in zip(slo, _chain_rows(lat, slo, where_row), strict=True) if row >= 0]
    if not chains:
        return None
    ok = np.ones((nc, K), dtype=bool)
    fix = np.zeros(len(where_row), dtype=np.int64)
    for i, loc in fixed.items():
        fix[i] = loc
    step = max(1, SLO_CELLS // (K * max(len(lat.vertices[c.id]) for _, c in chains)))
    for a in range(0, len(chains), step):
        part = chains[a : a + step]
        idx = np.concatenate([lat.vertices[c.id] for _, c in part])
        lens = np.array([len(lat.vertices[c.id]) for _, c in part], dtype=np.int64)
        starts = np.cumsum(lens) - lens
        cols = where_col[idx]
        locs = np.where(cols >= 0, table[:, np.maximum(cols, 0)], fix[idx])  # (K, vertices)
        val = np.where(locs == 0, lat.host[idx], lat.nic[idx])
        x, y = locs[:, :-1], locs[:, 1:]
        same_chain = np.ones(len(idx) - 1, dtype=bool)
        same_chain[starts[1:] - 1] = False  # a chain's last vertex and the next chain's first
        val[:, :-1] += np.where((x != y) & same_chain, lat.cross[x] + lat.cross[y], 0)
        total = np.add.reduceat(val, starts, axis=1)  # (K, chains)
        limit = np.array([lat.slo[c.id] for _, c in part], dtype=np.int64)
        meets = (total <= limit).T
        for (g, _), m in zip(part, meets, strict=True):
            ok[g] &= m
    return ok


def _undominated_within(cost, pcie, moves, use, allowed, strict: bool = False) -> np.ndarray:
    """_undominated among the `allowed` configurations only (the others neither kept nor dominating)."""
    big = np.iinfo(np.int64).max // 4
    c = np.where(allowed, cost, big)
    keep = _undominated(c, np.where(allowed, pcie, big), np.where(allowed, moves, big),
                        np.where(allowed[..., None], use, big), strict)  # fmt: skip
    return keep & allowed
