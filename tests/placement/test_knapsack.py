"""knapsack.py: the binary knapsack's branch and bound against brute force, its shape test, its exact ratio
order; prepare's split of the groups where no PCIe row can bind; the engine on such instances."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from placement import knapsack
from placement.decompose import prepare
from placement.model import parse_problem
from placement.solver import solve


def _groups(rng: random.Random, n: int, rows: int = 1, shape: str = "uniform"):
    """Flattened two-configuration groups: (cost, use, start); config 0 of a group = on the host (cost h,
    use 0), config 1 = on the sNIC (cost 0 or a move cost, use w)."""
    cost, use = [], []
    for _ in range(n):
        if shape == "ties":
            w = rng.choice([3, 6, 9, 12]) * rng.randint(1, 50)
            h = 7 * w // 3
        elif shape == "large":
            w = int(rng.paretovariate(0.8) * 1000)
            h = int(w * rng.uniform(0.5, 2.0)) + rng.randint(0, 5)
        else:
            w = rng.randint(1, 10**6)
            h = rng.randint(1, 10**6)
        other = [rng.randint(0, 3) for _ in range(rows - 1)]
        cost += [h, rng.choice([0, 0, 0, rng.randint(0, h)])]
        use += [[0] * rows, [w] + other]
    start = np.arange(0, 2 * n + 1, 2, dtype=np.int64)
    return np.array(cost, dtype=np.int64), np.array(use, dtype=np.int64).reshape(-1, rows), start


def _brute(cost, use, budget, start, keep):
    """Least cost of one kept configuration per group within every budget (None if none fits)."""
    options = [[k for k in range(start[g], start[g + 1]) if keep[k]] for g in range(len(start) - 1)]
    best = None
    for pick in itertools.product(*options):
        if (use[list(pick)].sum(0) <= np.array(budget)).all():
            c = int(cost[list(pick)].sum())
            best = c if best is None or c < best else best
    return best


@pytest.mark.parametrize("seed", range(60))
def test_bound_against_brute_force(seed):
    rng = random.Random(seed)
    shape = ["uniform", "ties", "large"][seed % 3]
    n = rng.randint(1, 13)
    cost, use, start = _groups(rng, n, rows=rng.choice([1, 2]), shape=shape)
    total = int(use[:, 0].sum())
    budget = [rng.randint(0, total + 1)] + [10**9] * (use.shape[1] - 1)  # the second row never binds
    keep = np.ones(len(cost), dtype=bool)
    if seed % 4 == 0:  # some groups keep one configuration only
        for g in range(n):
            if rng.random() < 0.3:
                keep[start[g] + rng.randint(0, 1)] = False
    it = knapsack.items(cost, use, budget, start, keep)
    assert isinstance(it, knapsack.Items)
    opt = _brute(cost, use, budget, start, keep)
    if opt is None:  # groups kept on their sNIC side alone break the row
        assert knapsack.bound(it, 10**15)[:2] == (10**15 + 1, None)
        return
    for target in (opt - 1, opt, opt + 5, 10**15):
        # searched to the end: exact
        lower, placement, _ = knapsack.bound(it, target, nodes=10**6, stall=10**6)
        assert lower == min(opt, target + 1), (target, lower, opt)
        assert (use[placement].sum(0) <= np.array(budget)).all()
        assert int(cost[placement].sum()) >= opt
        if target >= opt:
            assert int(cost[placement].sum()) == opt  # the optimum met on the way
        # boxed: still a valid bound
        lower, placement, _ = knapsack.bound(it, target, nodes=2, stall=1)
        assert lower <= min(opt, target + 1)
        assert (use[placement].sum(0) <= np.array(budget)).all()


def test_bound_when_the_sum_breaks_the_budget_is_infeasible():
    cost = np.array([5, 0, 5, 0], dtype=np.int64)
    use = np.array([[2], [3], [2], [3]], dtype=np.int64)  # both configurations use the row
    start = np.array([0, 2, 4], dtype=np.int64)
    it = knapsack.items(cost, use, [3], start, np.ones(4, dtype=bool))
    lower, placement, _ = knapsack.bound(it, 100)
    assert lower == 101 and placement is None


def test_items_refuses_what_is_not_a_binary_knapsack():
    cost = np.array([3, 1, 0, 2, 0], dtype=np.int64)
    use = np.array([[0, 0], [1, 1], [2, 2], [0, 0], [3, 3]], dtype=np.int64)
    start = np.array([0, 3, 5], dtype=np.int64)
    keep = np.ones(5, dtype=bool)
    assert knapsack.items(cost, use, [1, 1], start, keep) is None  # three configurations in group 0
    keep[1] = False
    assert knapsack.items(cost, use, [1, 1], start, keep) is None  # two rows can bind
    assert isinstance(knapsack.items(cost, use, [1, 10], start, keep), knapsack.Items)  # one can
    keep[3:5] = False
    assert knapsack.items(cost, use, [1, 10], start, keep) == "empty"  # group 1 keeps nothing


def test_ratio_order_is_exact_where_floats_tie():
    # p / w equal as floats, different exactly: 2^53 + 1 over 2^53 vs 1
    p = np.array([2**53, 2**53 + 1, 3], dtype=np.int64)
    w = np.array([2**53, 2**53, 3], dtype=np.int64)
    order = knapsack._ratio_order(p, w)
    assert order.tolist()[0] == 1  # the larger ratio first, though the floats are the same
    ratios = [(int(p[k]), int(w[k])) for k in order.tolist()]
    assert all(a * d >= c * b for (a, b), (c, d) in zip(ratios, ratios[1:], strict=False))


def _loose_instance(pcie: float) -> dict:
    """One sNIC, chains of 4 NFs joined into one component by the edges; PCIe `pcie` Gbit/s."""
    rng = random.Random(7)
    nodes = [{"id": "port", "kind": "port", "pinned": "s0"}, {"id": "vm", "kind": "vm", "pinned": "host"}]
    edges = []
    for c in range(6):
        prev = "port"
        for k in range(4):
            nid = f"n{c}.{k}"
            nodes.append({"id": nid, "kind": "nf", "r_host": round(rng.uniform(0.1, 0.5), 3),
                          "r_nic": round(rng.uniform(1, 9), 2)})  # fmt: skip
            edges.append({"src": prev, "dst": nid, "gbps": round(rng.uniform(0.5, 3), 2)})
            prev = nid
        edges.append({"src": prev, "dst": "vm", "gbps": round(rng.uniform(0.5, 3), 2)})
    return {"snics": [{"id": "s0", "capacity": 60, "pcie_gbps": pcie}], "nodes": nodes, "edges": edges}


def test_a_pcie_row_that_cannot_bind_splits_the_groups():
    loose = parse_problem(_loose_instance(1000))
    gr = prepare(loose)
    assert gr is not None and gr.n_groups == 24 and gr.free_edges == 18  # 6 chains x 3 inner edges
    assert gr.memo.loose
    tight = parse_problem(_loose_instance(8))
    gr = prepare(tight)
    assert gr is not None and gr.n_groups == 6 and gr.free_edges == 0 and not gr.memo.loose


@pytest.mark.parametrize("pcie", [1000, 8])
def test_engine_on_split_groups_agrees_with_the_mip(pcie):
    obj = _loose_instance(pcie)
    ours = solve(parse_problem(obj), time_limit=20)
    mip = solve(parse_problem(obj), time_limit=20, solver="mip")
    assert ours["status"] == mip["status"] == "optimal"
    assert ours["host_cost"] == pytest.approx(mip["host_cost"], rel=1e-5)
    # Split groups (pcie 1000): the groups' tie-break does not see the edges between them; the plain
    # model's stage 2 after the engine does (solver._tiebreak)
    assert ours["tiebreak"] == "proven"
    total = lambda out: sum(d["up"] + d["down"] for d in out["pcie_gbps"].values())  # noqa: E731
    assert ours["host_cost"] == pytest.approx(mip["host_cost"], rel=1e-12)  # (the same optimum here)
    assert total(ours) <= total(mip) + 1e-9  # the MIP's tie-break is boxed (best-effort on 1000)
    if mip["tiebreak"] == "proven":
        assert total(ours) == pytest.approx(total(mip), rel=1e-9)


def _loose_random(rng: random.Random) -> tuple[dict, dict]:
    """A small instance on loose PCIe links: 1-2 sNICs, chains (some with a latency SLO), current
    locations, move costs or a move budget, memory in some."""
    n_snic = rng.choice([1, 1, 2])
    locs = ["host"] + [f"s{k}" for k in range(n_snic)]
    nodes = [{"id": "vm", "kind": "vm"}] + [
        {"id": f"p{k}", "kind": "port", "pinned": f"s{k}"} for k in range(n_snic)
    ]
    mem = rng.random() < 0.3
    nfs = []
    for i in range(rng.randint(2, 7)):
        n = {"id": f"f{i}", "kind": "nf", "r_host": rng.choice([0.5, 1, 1.5, 0.3333]),
             "r_nic": rng.choice([0.25, 1, 3]), "location": rng.choice([None, *locs]),
             "latency_us": {"host": rng.choice([1, 5]), "nic": rng.choice([2, 8])}}  # fmt: skip
        if rng.random() < 0.15:
            n["pinned"] = rng.choice(locs)
        if mem:
            n["needs"] = {"mem": rng.choice([0, 1, 2])}
        nodes.append(n)
        nfs.append(n["id"])
    edges, chains = [], []
    rng.shuffle(nfs)
    for c in range(rng.randint(1, 3)):
        members = nfs[c::3] or nfs[:1]
        path = [f"p{rng.randrange(n_snic)}", *members, "vm"]
        g = rng.choice([0.5, 1, 2.5])
        edges += [{"src": a, "dst": b, "gbps": g} for a, b in zip(path, path[1:], strict=False)]
        if rng.random() < 0.5:
            chains.append({"id": f"c{c}", "vertices": path, "latency_us": rng.choice([10, 20, 40])})
    snics = [{"id": f"s{k}", "capacity": rng.choice([1, 3, 6]), "pcie_gbps": 100,
              "pcie_latency_us": rng.choice([0, 3])} for k in range(n_snic)]  # fmt: skip
    if mem:
        for s in snics:
            s["resources"] = {"mem": rng.choice([1, 2, 4])}
    inst = {"nodes": nodes, "edges": edges, "snics": snics, "chains": chains,
            "pcie_model": rng.choice(["duplex", "shared"])}  # fmt: skip
    opts = {"max_moves": rng.choice([None, None, 1, 2]), "move_cost": rng.choice([0, 0, 0.5])}
    return inst, opts


@pytest.mark.parametrize("seed", range(80))
def test_split_groups_are_lexicographically_optimal(seed):
    # The whole lexicographic objective (host cost + moves' cost, then PCIe, then moves) against brute
    # force, where the PCIe links are loose (the groups split) and SLO chains, pins and moves apply.
    from tests.placement.test_engine import brute_force, check

    inst, opts = _loose_random(random.Random(seed))
    problem = parse_problem(inst)
    best = brute_force(problem, opts["max_moves"], opts["move_cost"])
    ours = solve(problem, solver="cpsat", time_limit=20, **opts)
    check(problem, opts, ours, best)
