"""Incremental `prepare`: the groups of a changed instance from the previous instance's, rebuilding only
the groups the change touches.

A re-placement usually changes a few numbers (a measured edge's traffic, an NF's profile, where NFs run
now). `update` gives exactly what `prepare` would give for the new instance (the same integers, the same
groups in the same order), or None when that needs a full `prepare`:
- the structure changed: vertex ids, kinds, pins, an edge's ends, an edge's traffic to or from 0 (edges
  without traffic are dropped), the sNICs, the chains, resource needs, latencies under SLOs, options;
- the scale changed: a common denominator (G for traffic, R for host ratios, Rn for sNIC ratios), the
  gcd of the host costs, or a working-integer shift (integers.py) is not what it was, so every integer
  of the instance changes. A measured float on the grid the others share (e.g. 10^-9 Gbit/s) keeps the
  scale; one finer than all the others (or removing the only one that fine) changes it.
Everything else is a number of touched vertices: their integers are recomputed from the kept scale, the
groups holding them rebuilt (configs), the budgets' fixed shares and the constant cost recomputed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from fractions import Fraction

import numpy as np

from placement import integers
from placement.decompose import (
    SAFE,
    Block,
    Ctx,
    Groups,
    Memo,
    assemble,
    configs,
    kept_limit,
    pcie_never_binds,
)
from placement.model import Problem


def _times(v: Fraction, den: int) -> int:
    return v.numerator * (den // v.denominator)


def _dens(p: Problem, memo: Memo) -> dict[str, Counter]:
    """Denominators behind G, R and Rn, counted (so that removing one tells whether the lcm shrinks)."""
    nfs = [n for n in p.nodes if n.placed]
    g = Counter(e.gbps.denominator for e in p.edges if e.gbps)
    g.update(n.through.denominator for n in p.nodes)
    g.update(s.pcie_budget(d).denominator for s in p.snics for d in ("up", "down", "both"))
    r = Counter(x.denominator for n in nfs for x in (n.r_host, n.b_host))
    r[memo.move_cost.denominator] += 1
    rn = Counter(x.denominator for n in nfs for x in (n.r_nic, n.b_nic))
    rn.update(s.capacity.denominator for s in p.snics)
    return {"G": g, "R": r, "Rn": rn}


def _lcm(count: Counter) -> int:
    return math.lcm(*[d for d, c in count.items() if c > 0])


def update(
    gr: Groups,
    problem: Problem,
    nodes: Iterable[int],
    edges: Iterable[int],
    move_cost: Fraction = Fraction(0),
    max_moves: int | None = None,
) -> Groups | None:
    """prepare(problem, move_cost, max_moves), given gr = prepare(old, move_cost, max_moves) and that
    `problem` differs from `old` at most in node indices `nodes` and edge indices `edges`; None when the
    change needs a full prepare (module doc)."""
    memo = gr.memo
    if memo is None or memo.move_cost != move_cost or memo.max_moves != max_moves:
        return None
    ctx = memo.ctx
    old, p = ctx.problem, problem
    if (len(p.nodes), len(p.edges), p.pcie_model) != (len(old.nodes), len(old.edges), old.pcie_model):
        return None
    if (p.snics is not old.snics and p.snics != old.snics) or (
        p.chains is not old.chains and p.chains != old.chains
    ):
        return None
    nodes, edges = sorted(set(nodes)), sorted(set(edges))
    for i in nodes:
        a, b = old.nodes[i], p.nodes[i]
        if (a.id, a.kind, a.pinned, a.needs) != (b.id, b.kind, b.pinned, b.needs):
            return None
        if ctx.slo and (a.latency_host, a.latency_nic) != (b.latency_host, b.latency_nic):
            return None
    for j in edges:
        a, b = old.edges[j], p.edges[j]
        if (a.src, a.dst, bool(a.gbps)) != (b.src, b.dst, bool(b.gbps)):
            return None
    dens = _denominators(memo, old, p, nodes, edges)
    if dens is None:
        return None
    G, R, Rn = memo.G, memo.R, memo.Rn

    # Traffic: exact integers of the changed edges, the loads of their ends.
    g_int, g_work, load = list(memo.g_int), list(memo.g_work), list(memo.load)
    touched = set(nodes)
    ix = p.index
    for j in edges:
        k = memo.edge_pos[j]
        if k < 0:
            continue
        new = _times(p.edges[j].gbps, G)
        delta = new - g_int[k]
        g_int[k] = new
        a, b = ix[p.edges[j].src], ix[p.edges[j].dst]
        load[a] += delta
        load[b] += delta
        touched.update((a, b))
    for i in nodes:
        load[i] += 2 * (_times(p.nodes[i].through, G) - _times(old.nodes[i].through, G))
    g_total = sum(g_int)
    pcie_shift = max((integers.shift_for_total(g_total + abs(_times(s.pcie_budget(d), G)))
                      for s in p.snics for d in ("up", "down", "both")), default=0)  # fmt: skip
    if pcie_shift != memo.pcie_shift:
        return None
    for j in edges:
        k = memo.edge_pos[j]
        if k >= 0:
            g_work[k] = -((-g_int[k]) >> pcie_shift) if pcie_shift else g_int[k]

    # Host cost: the gcd and the objective's shift must stay.
    host_raw, nic = list(memo.host_raw), list(memo.nic)
    for i in touched:
        nd = p.nodes[i]
        if nd.placed:
            host_raw[i] = _times(nd.r_host, R) * load[i] + _times(nd.b_host, R) * G * nd.instances
            nic[i] = _times(nd.r_nic, Rn) * load[i] + _times(nd.b_nic, Rn) * G * nd.instances
    loc_ix = {loc: k for k, loc in enumerate(p.locations)}
    cur = ctx.cur.copy()
    for i in nodes:
        if ctx.is_mov[i]:
            loc = p.nodes[i].location
            cur[i] = -1 if loc is None else loc_ix[loc]
    movable = memo.movable
    mc = int(move_cost * R * G)
    div = math.gcd(*[host_raw[i] for i in movable]) if movable else 0
    if movable and (cur[movable] >= 0).any():
        div = math.gcd(div, mc)
    div = div or 1
    if div != memo.div:
        return None
    mc //= div
    shift = integers.shift_for_total(sum(host_raw[i] for i in movable) // div + mc * len(movable))
    if shift != memo.cost_shift:
        return None
    host = list(memo.host)
    half = 1 << (shift - 1) if shift else 0
    for i in touched:
        h = host_raw[i] // div
        host[i] = (h + half) >> shift if shift else h
    if shift:
        mc = (mc + half) >> shift

    # sNIC capacity rows: their shifts must stay too; the other node rows (resources) did not change.
    node_rows = list(memo.node_rows)
    nic_total = sum(nic)
    for k, s in enumerate(p.snics):
        s_k = integers.shift_for_total(nic_total + _times(s.capacity, Rn) * G)
        if s_k != memo.cap_shifts[k]:
            return None
        row = list(node_rows[k])
        for i in touched:
            row[i] = -((-nic[i]) >> s_k) if s_k else nic[i]
        node_rows[k] = row

    # Budgets: the fixed vertices' share and the forced moves, from the base budgets.
    fixed = gr.fixed
    locs = p.locations
    budgets = list(memo.base_budgets)
    n_node_rows = len(ctx.row_loc)
    if ctx.move_row:
        forced = sum(1 for i, loc in fixed.items() if p.nodes[i].location not in (None, locs[loc]))
        budgets[-1] = int(max_moves) - forced
    limit_terms = [sum(host), mc * len(movable), sum(g_work) * 2 * max(len(p.snics), 1)]
    limit_terms += [sum(c) for c in node_rows] + [abs(b) for b in budgets]
    if max(limit_terms, default=0) >= SAFE:
        return None
    fixed_idx = np.fromiter(fixed, dtype=np.int64, count=len(fixed))
    fixed_loc = ctx.floc[fixed_idx]
    coef_a = [np.array(c, dtype=np.int64) for c in node_rows]
    for r, k in enumerate(ctx.row_loc):
        budgets[r] -= int(coef_a[r][fixed_idx[fixed_loc == k]].sum())
    g_arr = np.array(g_work, dtype=np.int64)
    src, dst = ctx.src, ctx.dst
    both_fixed = ~ctx.is_mov[src] & ~ctx.is_mov[dst]
    for r, (k, d) in enumerate(ctx.pcie_rows):
        la, lb, g = ctx.floc[src[both_fixed]], ctx.floc[dst[both_fixed]], g_arr[both_fixed]
        up = int(g[(la == k) & (lb != k)].sum())
        down = int(g[(lb == k) & (la != k)].sum())
        budgets[n_node_rows + r] -= {"up": up, "down": down, "both": up + down}[d]
    if pcie_never_binds(g_arr, both_fixed, budgets, n_node_rows, len(ctx.pcie_rows)) != ctx.loose:
        return None  # the groups change: edges join them, or no longer do (decompose.prepare_plan)
    cost_const = Fraction(sum(host_raw[i] for i in fixed_idx[fixed_loc == 0].tolist()), div << shift)

    # The groups holding a touched or re-located movable vertex, rebuilt.
    new_ctx = replace(ctx, problem=p, host=np.array(host, dtype=np.int64), mc=mc, cur=cur, coef=coef_a,
                      g=g_arr, max_kept=kept_limit(p))  # fmt: skip
    blocks = _rebuild(gr, new_ctx, touched)
    if blocks is None:
        return None
    new_memo = replace(memo, ctx=new_ctx, blocks=blocks, load=load, host_raw=host_raw, host=host, nic=nic,
                       node_rows=node_rows, g_int=g_int, g_work=g_work, dens=dens)  # fmt: skip
    spliced = _splice(gr, new_memo)
    if spliced is not None:
        g_exact = gr.exact["g"].copy()
        for j in edges:
            if memo.edge_pos[j] >= 0:
                g_exact[memo.edge_pos[j]] = g_int[memo.edge_pos[j]]
        exact = {**gr.exact, "host": host_raw, "nic": nic, "g": g_exact}
        return replace(gr, **spliced, budget=budgets, cost_const=cost_const, exact=exact, memo=new_memo)
    return assemble(new_memo, locs, fixed, gr.group_nodes, budgets, gr.row_names, cost_const,
                    gr.cost_unit, gr.cost_error, gr.rounded_rows, gr.exact["needs"])  # fmt: skip


def _splice(gr: Groups, memo: Memo) -> dict | None:
    """gr's configuration arrays with the changed blocks of `memo` written over theirs (copies), when
    every changed block kept its size; None otherwise (then assemble concatenates them all)."""
    old = gr.memo
    assert old is not None
    changed = [g for g, (a, b) in enumerate(zip(old.blocks, memo.blocks, strict=True)) if a is not b]
    if any(len(old.blocks[g].config) != len(memo.blocks[g].config) for g in changed):
        return None
    out = {k: getattr(gr, k).copy() for k in ("config", "cost", "pcie", "moves", "use", "current")}
    for g in changed:
        b, s0, s1 = memo.blocks[g], int(gr.start[g]), int(gr.start[g + 1])
        for k in ("config", "cost", "pcie", "moves", "use"):
            out[k][s0:s1] = getattr(b, k)
        out["current"][g] = s0 + b.current if b.current >= 0 else -1
    return out


def _rebuild(gr: Groups, ctx: Ctx, touched: set[int]) -> list[Block] | None:
    """gr's blocks with those of the groups holding a vertex of `touched` built again from `ctx`; None
    when one of them has no configuration meeting its SLOs."""
    memo = gr.memo
    assert memo is not None
    ix = ctx.problem.index
    hit = sorted({int(memo.group_of[i]) for i in touched if memo.group_of[i] >= 0})
    blocks = list(memo.blocks)
    by_size: dict[int, list[int]] = {}
    for g in hit:
        by_size.setdefault(len(gr.group_nodes[g]), []).append(g)
    for gs in by_size.values():
        mat = np.stack([gr.group_nodes[g] for g in gs])
        members = set(mat.ravel().tolist())
        sub = replace(ctx, slo=[c for c in ctx.slo if any(ix[v] in members for v in c.vertices)])
        built = configs(sub, mat, np.isin(memo.e_grp, gs))
        if built is None:
            return None
        for g, block in zip(gs, built, strict=True):
            blocks[g] = block
    return blocks


def _denominators(memo: Memo, old: Problem, p: Problem, nodes: list[int], edges: list[int]) -> dict | None:
    """The counted denominators of `p` (from `old`'s, the changed elements swapped), None when the lcm
    behind G, R or Rn is no longer the memo's."""
    if memo.dens is None:
        memo.dens = _dens(old, memo)
    dens = {k: Counter(v) for k, v in memo.dens.items()}
    dropped, added = set(), set()  # which counts fell to 0 / rose from 0 (the lcm may change only then)

    def swap(key: str, was: int, now: int) -> None:
        if was == now:
            return
        count = dens[key]
        count[was] -= 1
        if not count[was]:
            dropped.add(key)
        if not count[now]:
            added.add(key)
        count[now] += 1

    for j in edges:
        if old.edges[j].gbps:
            swap("G", old.edges[j].gbps.denominator, p.edges[j].gbps.denominator)
    for i in nodes:
        a, b = old.nodes[i], p.nodes[i]
        swap("G", a.through.denominator, b.through.denominator)
        if a.placed:
            for f in ("r_host", "b_host"):
                swap("R", getattr(a, f).denominator, getattr(b, f).denominator)
            for f in ("r_nic", "b_nic"):
                swap("Rn", getattr(a, f).denominator, getattr(b, f).denominator)
    kept = {"G": memo.G, "R": memo.R, "Rn": memo.Rn}
    if any(_lcm(dens[k]) != kept[k] for k in dropped | added):
        return None
    return dens
