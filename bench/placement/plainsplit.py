"""Where the plain model's time goes on the foreign generator's large draws that prepare gives up on (issue 25).

Per draw of `bench.placement.foreign.large_instance(seed, size, snics)`: the components of the movable NFs (as
prepare joins them: edges and SLO chains), where prepare gives up (`plan`: prepare_plan, `build`: the build, or
`built`), and CPU seconds of each phase: parse, prepare_plan, its build, the plain model's build (`_Model`) and
its stage-1 CP-SAT solve. Then, each as CP-SAT on the plain stage 1 (model build included, min of --reps runs,
the two sides alternating):

- `halves`: where a component is past prepare's MAX_ROW: stage 1 with only the large components free (the rest
  pinned where the optimum put them), and with only the others free: is the time in one part, or in their
  coupling through the shared rows?
- `hint`: stage 1 with the optimum as CP-SAT's hint against none (what a perfect incumbent would save);
- `lp_slacks`: the plain model's LP relaxation (GLOP) below the optimum, in slacks (1e-5 x host cost, the
  engine's gap unit);
- `--hybrid`: the plain model plus, for every group prepare can build (prepare run on the instance without the
  components too large for it), one boolean per kept configuration, exactly one per group, channelled to its NFs'
  location booleans; the large components stay plain booleans. Its stage 1 against the plain one.

    .venv/bin/python -m bench.placement.plainsplit [--size 500] [--snics 1] [--seed 0] [--draws 30] [--reps 3]
        [--hybrid]

One JSON line per draw, the last line the medians. A study (bench/RESULTS.md, 2026-11-30 hybrid21), not part of
`./uno bench placement`.
"""

from __future__ import annotations

import argparse
import copy
import json
import time

from bench.common import final_json, median, print_machine
from bench.placement.foreign import large_instance
from placement import decompose
from placement.cpsat import new_solver
from placement.model import Problem, parse_problem
from placement.solver import Options, _Model, load_backends

GAP = 1e-5


def components(p: Problem) -> list[list[int]]:
    """The movable NFs' components as prepare joins them (edges with traffic, SLO chains), largest first."""
    mov = {i for i, n in enumerate(p.nodes) if len(p.allowed(n)) > 1}
    parent = {i: i for i in mov}

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    links = [(p.index[e.src], p.index[e.dst]) for e in p.edges if e.gbps]
    for c in p.chains:
        if c.latency_us is not None:
            ix = [p.index[v] for v in c.vertices if p.index[v] in mov]
            links += list(zip(ix, ix[1:], strict=False))
    for a, b in links:
        if a in mov and b in mov and root(a) != root(b):
            parent[root(a)] = root(b)
    out: dict[int, list[int]] = {}
    for i in sorted(mov):
        out.setdefault(root(i), []).append(i)
    return sorted(out.values(), key=len, reverse=True)


def cpu(fn):
    t = time.process_time()
    r = fn()
    return r, time.process_time() - t


def stage1(p: Problem, hint: dict[str, str] | None = None, extra=None) -> dict:
    """The plain model's stage 1 (as solver._solve_model builds it) on CP-SAT, one worker: CPU seconds of
    build + solve, status, objective (working integers), placement. `extra(model)` adds rows first."""
    from ortools.sat.python import cp_model

    t = time.process_time()
    m = _Model(p, Options(time_limit=20))
    m.minimize(m.stage1)
    if extra is not None:
        extra(m)
    if hint:
        for (i, loc), v in m.x.items():
            m.m.AddHint(v, int(hint[p.nodes[i].id] == loc))
    built = time.process_time() - t
    s = new_solver(cp_model)
    s.parameters.num_workers = 1
    s.parameters.linearization_level = 2
    s.parameters.relative_gap_limit = GAP
    s.parameters.max_time_in_seconds = 20
    st = s.Solve(m.m)
    m.value = lambda v: v if isinstance(v, int) else s.Value(v)
    ok = st in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    return {"cpu": time.process_time() - t, "build": built, "status": s.StatusName(st),
            "obj": s.ObjectiveValue() if ok else None, "const": m.stage1_const,
            "placement": m.placement() if ok else None}  # fmt: skip


def lp_bound(p: Problem) -> float | None:
    """The plain model's LP relaxation (GLOP; objective scaled to at most 1 per term), working integers."""
    from ortools.linear_solver import pywraplp

    m = _Model.__new__(_Model)
    m.p, m.opts = p, Options(solver="mip")
    m.m, m.x, m.gap_limit, m.work_done = pywraplp.Solver.CreateSolver("GLOP"), {}, 0, 0.0
    m.boolvar = lambda name: m.m.NumVar(0, 1, name)
    m.build()
    top = max((c for c, _ in m.stage1), default=1)
    m.m.Minimize(sum((c / top) * v for c, v in m.stage1))
    return m.m.Objective().Value() * top if m.m.Solve() == pywraplp.Solver.OPTIMAL else None


def pinned(obj: dict, ids: set[str], placement: dict[str, str]) -> Problem:
    o = copy.deepcopy(obj)
    for n in o["nodes"]:
        if n["id"] in ids:
            n["pinned"] = placement[n["id"]]
    return parse_problem(o)


def best(runs: list[dict]) -> dict:
    return min(runs, key=lambda r: r["cpu"])


def side_by_side(reps: int, a, b) -> tuple[dict, dict]:
    """min-of-reps runs of a() and b(), alternating which goes first."""
    ra, rb = [], []
    for k in range(reps):
        for f in (a, b) if k % 2 == 0 else (b, a):
            (ra if f is a else rb).append(f())
    return best(ra), best(rb)


def buildable(p: Problem, comps: list[list[int]], limit: int):
    """prepare on `p` without the components too large for it (a component whose build still gives up
    joins them, largest first): (the sub-problem, its Groups or None, the large components, CPU s)."""
    big = [c for c in comps if len(p.locations) ** len(c) > decompose.MAX_ROW]
    small = [c for c in comps if c not in big]
    orig = decompose.kept_limit
    decompose.kept_limit = lambda _p: limit  # the whole instance's limit, not the sub-problem's
    spent = 0.0
    try:
        while True:
            drop = {p.nodes[i].id for c in big for i in c}
            sub = Problem([n for n in p.nodes if n.id not in drop],
                          [e for e in p.edges if e.src not in drop and e.dst not in drop], p.snics,
                          p.pcie_model, chains=[c for c in p.chains if not set(c.vertices) & drop])  # fmt: skip
            gr, t = cpu(lambda sub=sub: decompose.prepare(sub))
            spent += t
            if gr is not None or not small:
                return sub, gr, big, spent
            big.append(small.pop(0))
    finally:
        decompose.kept_limit = orig


def configurations(p: Problem, sub: Problem, gr):
    """extra() for stage1: per group with configurations pruned, one boolean per kept configuration."""

    def extra(m: _Model) -> None:
        L = len(gr.locations)
        for g, members in enumerate(gr.group_nodes):
            ids = [sub.nodes[i].id for i in members.tolist()]
            rows = [
                decompose._digits(int(gr.config[c]), L, len(ids)) for c in range(gr.start[g], gr.start[g + 1])
            ]
            if len(rows) == L ** len(ids):
                continue  # nothing pruned: the NF booleans say the same
            ys = [m.m.NewBoolVar(f"y{g}_{k}") for k in range(len(rows))]
            m.m.AddExactlyOne(ys)
            for col, nid in enumerate(ids):
                for li, loc in enumerate(gr.locations):
                    on, at = (
                        m.on(p.index[nid], loc),
                        [y for y, row in zip(ys, rows, strict=True) if row[col] == li],
                    )
                    if isinstance(on, int):
                        for y in [] if on else at:
                            m.m.Add(y == 0)
                    else:
                        m.m.Add(on == sum(at))

    return extra


def draw(seed: int, size: int, snics: int, reps: int, hybrid: bool) -> dict:
    obj = large_instance(seed, size, snics)
    p, t_parse = cpu(lambda: parse_problem(obj))
    comps = components(p)
    plan, t_plan = cpu(lambda: decompose.prepare_plan(p))
    gr, t_build = (None, 0.0) if plan is None else cpu(lambda: plan(None))
    where = "plan" if plan is None else "build" if gr is None else "built"
    base = stage1(p)
    r = {"seed": seed, "nfs": sum(map(len, comps)), "components": len(comps), "largest": [len(c) for c in comps[:4]],
         "gives_up": where, "parse": t_parse, "prepare_plan": t_plan, "build": t_build,
         "model": base["build"], "stage1": base["cpu"] - base["build"], "status": base["status"]}  # fmt: skip
    opt, total = base["placement"], (base["obj"] or 0) + base["const"]
    if opt is None:
        return r
    big = [c for c in comps if len(p.locations) ** len(c) > decompose.MAX_ROW]
    if big:
        large = {p.nodes[i].id for c in big for i in c}
        others = {p.nodes[i].id for c in comps if c not in big for i in c}
        r["large_free"] = stage1(pinned(obj, others, opt))["cpu"]
        r["others_free"] = stage1(pinned(obj, large, opt))["cpu"]
    plain, hinted = side_by_side(reps, lambda: stage1(p), lambda: stage1(p, hint=opt))
    r.update(plain=plain["cpu"], hinted=hinted["cpu"])
    lp = lp_bound(p)
    r["lp_slacks"] = None if lp is None or not total else (base["obj"] - lp) / (GAP * total)
    if hybrid:
        sub, sgr, _, t_sub = buildable(p, comps, decompose.kept_limit(p))
        if sgr is not None:
            extra = configurations(p, sub, sgr)
            plain, hyb = side_by_side(reps, lambda: stage1(p), lambda: stage1(p, extra=extra))
            r.update(hyb_prepare=t_sub, hyb_configs=int(sgr.start[-1]), hyb_plain=plain["cpu"], hyb=hyb["cpu"],
                     hyb_status=hyb["status"],
                     hyb_same=abs(hyb["obj"] - plain["obj"]) <= 2 * GAP * max(1.0, abs(plain["obj"]) + base["const"]))  # fmt: skip
    return r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=500)
    ap.add_argument("--snics", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--draws", type=int, default=30)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--hybrid", action="store_true", help="also the hybrid prototype (slow: x2-x30 per draw)")
    args = ap.parse_args()
    print_machine()
    load_backends()
    stage1(parse_problem(large_instance(99, 60, 1)))  # first call imports CP-SAT: not a figure
    rows = []
    for seed in range(args.seed, args.seed + args.draws):
        r = draw(seed, args.size, args.snics, args.reps, args.hybrid)
        rows.append(r)
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}), flush=True)

    def med(key: str) -> float:
        return round(median([r[key] for r in rows if r.get(key) is not None]), 4)

    keys = ["parse", "prepare_plan", "build", "model", "stage1", "plain", "hinted", "lp_slacks"]
    out = {k: med(k) for k in keys}
    out["gives_up"] = {w: sum(r["gives_up"] == w for r in rows) for w in ("plan", "build", "built")}
    out["draws"] = len(rows)
    if args.hybrid:
        out.update(hyb=med("hyb"), hyb_plain=med("hyb_plain"))
    final_json(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
