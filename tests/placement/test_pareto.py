"""Dominance without all pairs (placement/pareto.py) and the member-by-member build of large groups
(decompose._configs_by_member) against the plain rule: every configuration enumerated, then every pair
compared (decompose._undominated). Both must keep exactly the same configurations."""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

from placement import decompose, families, pareto
from placement.decompose import _undominated, prepare
from placement.families import instance
from placement.model import parse_problem


def _reference(cls, obj, use, index) -> np.ndarray:
    """Dominated mask by the plain rule, class by class in index order."""
    out = np.zeros(len(cls), dtype=bool)
    for c in np.unique(cls):
        at = np.nonzero(cls == c)[0]
        at = at[np.argsort(index[at])]
        keep = _undominated(obj[at, 0][None], obj[at, 1][None], obj[at, 2][None], use[at][None])[0]
        out[at] = ~keep
    return out


@pytest.mark.parametrize(
    "cells,bits_max,block",
    [(1, pareto.BITS_MAX, pareto.BLOCK), (200, pareto.BITS_MAX, pareto.BLOCK), (pareto.WORD_CELLS, 100, 7),
     (pareto.WORD_CELLS, pareto.BITS_MAX, pareto.BLOCK)],
)  # fmt: skip
def test_dominated_matches_every_pair(monkeypatch, cells, bits_max, block):
    monkeypatch.setattr(pareto, "WORD_CELLS", cells)  # few cells: classes split over several chunks
    # a low BITS_MAX: the larger classes go block by block (_by_blocks), the others on bit sets
    monkeypatch.setattr(pareto, "BITS_MAX", bits_max)
    monkeypatch.setattr(pareto, "BLOCK", block)
    rng = np.random.default_rng(cells + bits_max)
    for _ in range(200):
        # up to 300 in a class: bit sets of several words (64 configurations a word)
        n, rows, hi = int(rng.integers(1, 300)), int(rng.integers(0, 4)), int(rng.integers(1, 30))
        obj = np.column_stack([rng.integers(0, hi, n), rng.integers(0, hi, n), rng.integers(0, 2, n)])
        if rng.random() < 0.5:  # distinct costs: the cost-only order
            obj[:, 0] = rng.permutation(n) * 7
        if rng.random() < 0.2:  # values far apart: the order by two keys without a combined one
            obj[:, 0] = obj[:, 0] * 2**55
        use = rng.integers(0, hi, (n, rows))
        cls = rng.integers(0, int(rng.integers(1, 5)), n) * int(rng.choice([1, 2**40]))
        index = rng.permutation(n)
        got = pareto.dominated(cls, obj, use, index)
        assert (got == _reference(cls, obj, use, index)).all()


def test_dominated_matches_every_pair_on_chain_like_classes():
    # Costs and uses moving together, as in a chain's partial configurations (many dominated, often by a
    # near predecessor in the cost order), classes up to ~1,500 (blocks too).
    rng = np.random.default_rng(25)
    for _ in range(12):
        n, rows = int(rng.integers(2, 1500)), int(rng.integers(1, 4))
        cls = np.sort(rng.integers(0, int(rng.integers(1, 4)), n))
        cost = rng.permutation(n) * 5
        trend = (n - cost // 5)[:, None]  # a lower cost, more use: the usual trade
        use = trend * int(rng.integers(1, 4)) + rng.integers(0, int(rng.integers(1, 200)), (n, rows))
        obj = np.column_stack([cost, rng.integers(0, 3, n), np.zeros(n, dtype=np.int64)])
        index = rng.permutation(n)
        got = pareto.dominated(cls, obj, use, index)
        assert (got == _reference(cls, obj, use, index)).all()


@pytest.mark.parametrize("elite,block", [(1, 5), (3, 16), (8, 7)])
def test_the_elite_filter_of_large_classes_keeps_exactly_the_undominated(monkeypatch, elite, block):
    # Large classes mostly dominated (the elite filter's case) and some mostly kept (it stays off there),
    # against every pair; the filter must have run.
    monkeypatch.setattr(pareto, "BITS_MAX", 8)
    monkeypatch.setattr(pareto, "BLOCK", block)
    monkeypatch.setattr(pareto, "ELITE", elite)
    sizes: list[int] = []
    le_all = pareto._le_all
    monkeypatch.setattr(
        pareto, "_le_all", lambda cols, cand, at: sizes.append(len(cand)) or le_all(cols, cand, at)
    )
    rng = np.random.default_rng(elite * 100 + block)
    for _ in range(40):
        n, rows = int(rng.integers(50, 700)), int(rng.integers(1, 5))
        cls = np.sort(rng.integers(0, int(rng.integers(1, 3)), n))
        cost = rng.permutation(n) * 3
        if rng.random() < 0.7:  # uses falling with the cost: most dominated by a few cheap, frugal ones
            use = (cost // 3)[:, None] // int(rng.integers(1, 9)) + rng.integers(
                0, int(rng.integers(2, 400)), (n, rows)
            )
        else:  # independent uses: with several rows most are kept
            use = rng.integers(0, int(rng.integers(2, 50)), (n, rows))
        obj = np.column_stack([cost, rng.integers(0, 2, n), np.zeros(n, dtype=np.int64)])
        index = rng.permutation(n)
        got = pareto.dominated(cls, obj, use, index)
        assert (got == _reference(cls, obj, use, index)).all()
    assert elite in sizes  # the filter ran


@pytest.mark.parametrize("bits_max,block", [(100, 7), (20, 3)])
def test_dominated_gives_up_exactly_when_a_group_keeps_more_than_its_limit(monkeypatch, bits_max, block):
    # The limit's answer is the plain answer's count: None exactly when some group keeps more than its
    # limit, else the same mask; classes of a group small (bit sets) and large (blocks), deadline checks.
    monkeypatch.setattr(pareto, "BITS_MAX", bits_max)
    monkeypatch.setattr(pareto, "BLOCK", block)
    monkeypatch.setattr(pareto, "CHECK_BLOCKS", 2)
    rng = np.random.default_rng(bits_max)
    given_up, calls = 0, []
    for _ in range(300):
        n, rows, hi = int(rng.integers(1, 400)), int(rng.integers(1, 4)), int(rng.integers(2, 30))
        obj = np.column_stack([rng.permutation(n) * 3, rng.integers(0, hi, n), rng.integers(0, 2, n)])
        use = rng.integers(0, hi, (n, rows))
        n_groups = int(rng.integers(1, 4))
        group = rng.integers(0, n_groups, n)
        cls = group * 10 + rng.integers(0, int(rng.integers(1, 4)), n)  # classes within a group
        index = rng.permutation(n)
        plain = _reference(cls, obj, use, index)
        keeps = np.bincount(group[~plain], minlength=n_groups)
        limit = np.maximum(0, keeps + rng.integers(-3, 3, n_groups))
        got = pareto.dominated(cls, obj, use, index, group, limit, lambda: calls.append(1))
        if (keeps > limit).any():
            assert got is None
            given_up += 1
        else:
            assert got is not None and (got == plain).all()
    assert given_up > 50 and calls  # (the deadline checked in the large classes)


def _with_current(obj: dict, seed: int) -> dict:
    """obj with a current location on most NFs (moves count)."""
    rnd = random.Random(seed)
    locs = ["host"] + [s["id"] for s in obj["snics"]]
    for n in obj["nodes"]:
        if n["kind"] == "nf" and "pinned" not in n and rnd.random() < 0.8:
            n["location"] = rnd.choice(locs)
    return obj


CASES = [
    ("long", 150, 0, {}),
    ("long", 150, 7, {"current": True}),
    ("pinned", 300, 4, {}),
    ("background", 200, 1, {"current": True}),
    ("four-snics", 120, 2, {}),
    ("mesh", 150, 3, {"snics": 2, "current": True}),
]


@pytest.mark.parametrize(("fam", "size", "seed", "how"), CASES)
def test_member_by_member_keeps_the_undominated(monkeypatch, fam, size, seed, how):
    obj = instance(fam, size, seed=seed, **({"snics": how["snics"]} if "snics" in how else {}))
    max_moves = None
    if how.get("current"):
        max_moves = size // 10
        obj = _with_current(obj, seed)
    limit = decompose.ENUMERATE_MAX
    big = 0
    for b, f, keep in _built_and_full(monkeypatch, parse_problem(obj), max_moves):
        big += f.size > limit
        assert (b.config == f.config[keep]).all()
        for name in ("cost", "pcie", "moves", "use"):
            assert (getattr(b, name) == getattr(f, name)[keep]).all(), name
        assert b.current == (int(keep[: f.current].sum()) if f.current >= 0 and keep[f.current] else -1)
    assert big, "no group was built member by member"


def _built_and_full(monkeypatch, problem, max_moves):
    """Per group: prepare's block, the block of every configuration enumerated, and the undominated mask
    of the latter (enumerate-then-filter)."""
    built = prepare(problem, move_cost=Fraction(1, 3), max_moves=max_moves)
    monkeypatch.setattr(decompose, "ENUMERATE_MAX", 10**9)
    full = prepare(problem, move_cost=Fraction(1, 3), max_moves=max_moves)
    assert built is not None and full is not None
    for b, f in zip(built.memo.blocks, full.memo.blocks, strict=True):
        yield b, f, _undominated(f.cost[None], f.pcie[None], f.moves[None], f.use[None])[0]


def _vectors(b, keep=None) -> set:
    """The distinct (cost, pcie, moves, use...) of a block's configurations (of `keep` only)."""
    at = np.arange(len(b.config)) if keep is None else np.nonzero(keep)[0]
    return {(int(b.cost[k]), int(b.pcie[k]), int(b.moves[k]), *b.use[k].tolist()) for k in at}


SLO_CASES = [
    (250, 0, 0.5, {}),
    (250, 1, 0.1, {}),
    (250, 2, 0.9, {"current": True}),
    (250, 1, 0.8, {"pinned": 0.05}),
    (250, 1, 1.0, {"pinned": 0.1}),
    (300, 5, 0.4, {"current": True}),
]


@pytest.mark.parametrize(("size", "seed", "slack", "how"), SLO_CASES)
def test_member_by_member_with_slos_keeps_the_undominated_that_meet_them(monkeypatch, size, seed, slack, how):
    """Groups with a latency SLO built member by member (the latency so far compared as one more use):
    the same undominated vectors as every configuration enumerated, those missing an SLO dropped, the
    rest compared pair by pair; each kept configuration is one of the enumerated ones, same figures."""
    over = {k: v for k, v in how.items() if k == "pinned"}
    obj = families.set_slo(instance("latency", size, seed=seed, **over), slack)
    max_moves = None
    if how.get("current"):
        max_moves = size // 10
        obj = _with_current(obj, seed)
    assert _slo_build_matches(monkeypatch, parse_problem(obj), max_moves), (
        "no group was built member by member"
    )


def _slo_build_matches(monkeypatch, problem, max_moves) -> int:
    """prepare's blocks against those of every configuration enumerated (as the test above says); the
    number of groups built member by member."""
    limit = decompose.ENUMERATE_MAX
    big = 0
    for b, f, keep in _built_and_full(monkeypatch, problem, max_moves):
        if f.size > 256 and np.array_equal(b.config, f.config):
            continue  # enumerated (many rows): every configuration meeting the SLOs is kept, as in `full`
        assert _vectors(b) == _vectors(f, keep)
        big += f.size > limit
        at = np.searchsorted(f.config, b.config)
        assert (f.config[np.minimum(at, len(f.config) - 1)] == b.config).all(), (
            "a configuration missing an SLO"
        )
        for name in ("cost", "pcie", "moves", "use"):
            assert (getattr(b, name) == getattr(f, name)[at]).all(), name
        if b.current >= 0:
            assert b.config[b.current] == f.config[f.current]
    monkeypatch.setattr(decompose, "ENUMERATE_MAX", limit)
    return big


def _two_chains(seed: int) -> dict:
    """One group of 7 NFs (128 configurations: built member by member) between a port and a VM, with two
    chains through it that have SLOs: one through every NF, one backwards through a few, visiting one NF
    twice and the VM in between; random latencies and traffic, SLOs between the least and most latency."""
    rnd = random.Random(seed)
    nfs = [f"n{k}" for k in range(7)]
    nodes = [{"id": "p", "kind": "port", "pinned": "s"}, {"id": "vm", "kind": "vm"}]
    nodes += [{"id": n, "kind": "nf", "r_host": rnd.uniform(0.1, 1), "r_nic": rnd.uniform(0.1, 1),
               "latency_us": {"host": rnd.uniform(1, 5), "nic": rnd.uniform(1, 12)}} for n in nfs]  # fmt: skip
    path = ["p", *nfs, "vm"]
    edges = [{"src": a, "dst": b, "gbps": rnd.uniform(0.5, 3)} for a, b in zip(path, path[1:], strict=False)]
    snic = {"id": "s", "capacity": rnd.uniform(1, 4), "pcie_gbps": rnd.uniform(3, 9),
            "pcie_latency_us": rnd.uniform(0.5, 4)}  # fmt: skip
    back = ["vm", "n5", "n2", "vm", "n4", "n2", "n1", "p"]
    lat = {n["id"]: n.get("latency_us", {"host": 0, "nic": 0}) for n in nodes}
    chains = []
    for cid, verts in (("all", path), ("back", back)):
        least = sum(min(lat[v].values()) for v in verts)
        most = sum(max(lat[v].values()) for v in verts) + (len(verts) - 1) * snic["pcie_latency_us"]
        chains.append(
            {"id": cid, "vertices": verts, "latency_us": least + rnd.uniform(0.2, 0.9) * (most - least)}
        )
    return {"nodes": nodes, "edges": edges, "snics": [snic], "chains": chains}


@pytest.mark.parametrize("seed", range(12))
def test_member_by_member_with_two_slos_on_one_group(monkeypatch, seed):
    problem = parse_problem(_two_chains(seed))
    built = prepare(problem)
    if built is None:  # every configuration misses an SLO: so must the enumerated build
        monkeypatch.setattr(decompose, "ENUMERATE_MAX", 10**9)
        assert prepare(problem) is None
        return
    assert _slo_build_matches(monkeypatch, problem, None) == 1


@pytest.mark.parametrize(
    ("seed", "slack", "pinned", "feasible"),
    [(0, 0.3, 0, True), (1, 0.6, 0, True), (3, 0.9, 0, True), (0, 0.9, 0.05, True), (2, 0.9, 0.05, False)],
)
def test_slo_check_on_int64_matches_the_python_integers_one(monkeypatch, seed, slack, pinned, feasible):
    """The enumerated groups' SLO check (decompose._meets_slos) has an int64 path, the chains' vertices
    side by side in batches (small batches here: SLO_CELLS), and one on Python integers (latencies
    beyond int64): the same blocks from both."""
    over = {"pinned": pinned} if pinned else {}
    problem = parse_problem(families.set_slo(instance("latency", 200, seed=seed, **over), slack))
    monkeypatch.setattr(decompose, "ENUMERATE_MAX", 10**9)  # every group enumerated: the check runs on all
    monkeypatch.setattr(decompose, "SLO_CELLS", 64)
    fast = prepare(problem)
    real = decompose._latencies

    def on_python_ints(p, slo):
        lat = real(p, slo)
        lat.host, lat.nic, lat.cross = (x.astype(object) for x in (lat.host, lat.nic, lat.cross))
        return lat

    monkeypatch.setattr(decompose, "_latencies", on_python_ints)
    slow = prepare(problem)
    assert (fast is not None) == feasible  # None: a group with no configuration meeting its SLOs
    assert (slow is not None) == feasible
    if fast is not None:
        for name in ("start", "config", "cost", "pcie", "moves", "use"):
            assert np.array_equal(getattr(fast, name), getattr(slow, name)), name


@pytest.mark.parametrize("skip", [2, 3])
@pytest.mark.parametrize(
    ("fam", "size", "seed", "how"), [*CASES, ("long", 500, 2, {}), ("latency", 300, 1, {})]
)
def test_comparing_only_the_completed_groups_on_some_members_keeps_the_same(
    monkeypatch, skip, fam, size, seed, how
):
    # decompose.SKIP_EVERY: on those members only the groups completing there are compared; the next
    # member's comparison drops the same partial configurations, so every group keeps exactly the same.
    obj = instance(fam, size, seed=seed, **({"snics": how["snics"]} if "snics" in how else {}))
    max_moves = None
    if how.get("current"):
        max_moves = size // 10
        obj = _with_current(obj, seed)
    if fam == "latency":
        obj = families.set_slo(obj, 0.4)
    problem = parse_problem(obj)
    monkeypatch.setattr(decompose, "SKIP_EVERY", skip)
    got = prepare(problem, move_cost=Fraction(1, 3), max_moves=max_moves)
    monkeypatch.setattr(decompose, "SKIP_EVERY", 0)
    want = prepare(problem, move_cost=Fraction(1, 3), max_moves=max_moves)
    assert got is not None and want is not None
    for name in ("start", "config", "cost", "pcie", "moves", "use", "current"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name
