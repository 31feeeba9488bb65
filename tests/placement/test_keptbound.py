"""The kept-count lower bound (placement/keptbound.py) and prepare's early give-up built on it: the bound
never exceeds the configurations dominance really keeps (brute force: every configuration, every pair), and
prepare with the early give-up returns exactly what it returns without it (the same groups, or None)."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from placement import decompose, keptbound
from placement.families import Family, build
from placement.model import parse_problem


def _kept(host: list[int], cap: list[int], n_snics: int) -> int:
    """Configurations left undominated in (cost; per-sNIC capacity use), equal ones counted once: the
    fewest any group with these members keeps (more rows only make fewer comparable)."""
    points = set()
    for locs in itertools.product(range(n_snics + 1), repeat=len(host)):
        use = [0] * n_snics
        for i, loc in enumerate(locs):
            if loc:
                use[loc - 1] += cap[i]
        points.add((sum(h for h, loc in zip(host, locs, strict=True) if loc == 0), *use))
    pts = list(points)
    return sum(
        1 for a in pts if not any(b != a and all(x <= y for x, y in zip(b, a, strict=True)) for b in pts)
    )


@pytest.mark.parametrize("seed", range(60))
def test_bound_never_exceeds_the_kept_count(seed: int) -> None:
    rng = random.Random(seed)
    n_snics = rng.choice([1, 2, 3])
    m = rng.randint(2, {1: 9, 2: 6, 3: 5}[n_snics])
    top = rng.choice([3, 10, 1000])  # small values: ties among sums
    host = [rng.randint(0, top) for _ in range(m)]
    cap = [rng.randint(0, top) for _ in range(m)]
    kept = _kept(host, cap, n_snics)
    assert not keptbound.kept_exceeds(np.array(host), np.array(cap), n_snics, kept)


def test_bound_is_tight_on_generic_coefficients() -> None:
    """Not a bound that never fires: with distinct coefficients it reaches the kept count here."""
    host, cap = [5, 7, 11, 13, 17], [101, 211, 307, 401, 503]
    kept = _kept(host, cap, 2)
    assert keptbound.kept_exceeds(np.array(host), np.array(cap), 2, kept // 2)


# long / mix with several sNICs mostly give up at the real limit (a few only once built); the small
# shapes at a limit of 96 half give up, half keep their groups.
CASES = [(shape, snics, size, seed, limit) for shapes, limit in ((("long", "mix"), None),
         (("chain", "dag", "fanio", "mesh"), 96)) for shape in shapes for snics in (2, 3)
         for size in (60, 120) for seed in range(6)]  # fmt: skip


def _same_prepare_without_early_give_up(monkeypatch, p) -> None:
    """prepare's groups with the early give-up equal those of the full build (or None both)."""
    early = decompose.prepare(p)
    monkeypatch.setattr(decompose, "_doomed", lambda *a: False)
    late = decompose.prepare(p)
    assert (early is None) == (late is None)
    if early is not None:
        for name in ("start", "config", "cost", "pcie", "moves", "use"):
            assert np.array_equal(getattr(early, name), getattr(late, name))


@pytest.mark.parametrize(("shape", "snics", "size", "seed", "limit"), CASES)
def test_early_give_up_changes_no_result(
    monkeypatch, shape: str, snics: int, size: int, seed: int, limit: int | None
) -> None:
    """prepare gives up early only where the build gives up: the same groups, or None, either way."""
    rng = random.Random(seed)
    fam = Family(shape=shape, snics=snics, capacity=rng.uniform(0.1, 1.0), pcie=rng.uniform(1.1, 3.5),
                 traffic=rng.choice(["uniform", "pareto"]))  # fmt: skip
    p = parse_problem(build(fam, size, seed))
    if limit is not None:
        monkeypatch.setattr(decompose, "MAX_KEPT", limit)
        monkeypatch.setattr(decompose, "KEPT_FLOOR", limit)
    _same_prepare_without_early_give_up(monkeypatch, p)


@pytest.mark.parametrize("seed", range(4))
def test_plain_model_without_a_placement_answers_the_host_placement(monkeypatch, seed: int) -> None:
    """When CP-SAT finds no placement, the plain model answers every movable vertex on the host if that
    meets every constraint (feasible, gap 1), and `unknown` otherwise (max_moves 0 with NFs elsewhere)."""
    from placement import solver
    from placement.evaluate import evaluate

    fam = Family(shape="long", snics=2, capacity=0.5, pcie=2.5)
    p = parse_problem(build(fam, 60, seed))
    monkeypatch.setattr(solver._Model, "solve", lambda self, *a, **k: ("unknown", None, None))
    out = solver.solve(p, engine=False, time_limit=5)
    assert out["status"] == "feasible" and out["gap"] == 1.0
    assert all(
        loc == "host" for n, loc in out["placement"].items() if len(p.allowed(p.nodes[p.index[n]])) > 1
    )
    assert not evaluate(p, out["placement"]).violations
    obj = build(fam, 60, seed)
    for node in obj["nodes"]:
        if len(p.allowed(p.nodes[p.index[node["id"]]])) > 1:
            node["location"] = p.locations[1]  # every NF with a choice on an sNIC now: the host moves them
    moved = parse_problem(obj)
    assert solver.solve(moved, engine=False, time_limit=5, max_moves=0)["status"] == "unknown"


def _most_partials(host: list[int], cap: list[int], edges: list[tuple[int, int]], first: int) -> int:
    """Brute force: the most partial configurations the build keeps after one member j, first <= j < m - 1
    (one sNIC, undominated in (host cost, sNIC capacity use) within a class of the frontier's locations;
    equal points once): the fewest any group with these members and edges keeps there."""
    m, most = len(host), 0
    for j in range(first, m - 1):
        frontier = [
            c for c in range(j + 1) if any((a == c and b > j) or (b == c and a > j) for a, b in edges)
        ]
        classes: dict[tuple, set] = {}
        for locs in itertools.product((0, 1), repeat=j + 1):
            point = (
                sum(host[i] for i in range(j + 1) if locs[i] == 0),
                sum(cap[i] for i in range(j + 1) if locs[i]),
            )
            classes.setdefault(tuple(locs[c] for c in frontier), set()).add(point)
        count = 0
        for pts in classes.values():
            count += sum(1 for a in pts if not any(b != a and b[0] <= a[0] and b[1] <= a[1] for b in pts))
        most = max(most, count)
    return most


@pytest.mark.parametrize("seed", range(80))
def test_partial_bound_never_exceeds_the_partials_or_configurations_kept(seed: int) -> None:
    rng = random.Random(seed)
    m = rng.randint(3, 11)
    top = rng.choice([3, 10, 1000])
    host = [rng.randint(0, top) for _ in range(m)]
    cap = [rng.randint(0, top) for _ in range(m)]
    # A chain, a tree or a denser group, in a shuffled column order (frontiers of several members).
    cols = list(range(m))
    rng.shuffle(cols)
    edges = [(cols[i], cols[rng.randrange(i) if rng.random() < 0.5 else i - 1]) for i in range(1, m)]
    edges += [tuple(rng.sample(range(m), 2)) for _ in range(rng.randint(0, m // 2))]
    last = np.full(m, -1)
    for a, b in edges:
        last[a], last[b] = max(last[a], b), max(last[b], a)
    first = rng.randint(0, 4)
    most, kept = _most_partials(host, cap, edges, first), _kept(host, cap, 1)
    assert not keptbound.one_snic_exceeds(np.array(host), np.array(cap), last, first, most, kept)


def test_partial_bound_fires_on_a_chain() -> None:
    """Not a bound that never fires: a chain of members with generic coefficients."""
    host = [3, 5, 9, 17, 33, 65, 129, 257]
    cap = [2, 4, 8, 16, 32, 64, 128, 256]
    last = np.array([1, 2, 3, 4, 5, 6, 7, 6])
    edges = [(i, i + 1) for i in range(7)]
    most, kept = _most_partials(host, cap, edges, 4), _kept(host, cap, 1)
    args = np.array(host), np.array(cap), last, 4
    assert keptbound.one_snic_exceeds(*args, most - 1, 1 << 20)
    assert keptbound.one_snic_exceeds(*args, 1 << 20, kept - 1)


# One sNIC: the second generator's draws where prepare gives no groups (a component whose partial
# configurations pass the limit) and others that keep their groups, and the families' shapes at a limit of
# 1,024 (long and mix: some give up, some keep their groups).
ONE_SNIC = [("foreign", s) for s in (20, 21, 43, 54, 86, 168, 225, 385, 455, 489, 652, 0, 1, 2, 5, 8)] + [
    (shape, seed) for shape in ("chain", "long", "dag", "mix") for seed in range(4)
]


@pytest.mark.parametrize(("kind", "seed"), ONE_SNIC)
def test_early_give_up_with_one_snic_changes_no_result(monkeypatch, kind: str, seed: int) -> None:
    """prepare gives up early only where the build gives up, with one sNIC too."""
    from bench.placement.foreign import instance

    if kind == "foreign":
        obj = instance(seed)
    else:
        rng = random.Random(seed)
        fam = Family(shape=kind, snics=1, capacity=rng.uniform(0.1, 1.0), pcie=rng.uniform(1.1, 3.5),
                     traffic=rng.choice(["uniform", "pareto"]))  # fmt: skip
        obj = build(fam, 120, seed)
        monkeypatch.setattr(decompose, "MAX_KEPT", 1024)
        monkeypatch.setattr(decompose, "KEPT_FLOOR", 1024)
    p = parse_problem(obj)
    _same_prepare_without_early_give_up(monkeypatch, p)


@pytest.mark.parametrize("seed", range(40))
def test_partial_bound_share_agrees_with_its_answer(seed: int) -> None:
    """one_snic_bound's share of the limit: past 1 exactly when it says the build gives up, and at most
    the brute-force partial count's share otherwise (it is that count's lower bound)."""
    rng = random.Random(1000 + seed)
    m = rng.randint(3, 10)
    host = [rng.randint(0, 50) for _ in range(m)]
    cap = [rng.randint(0, 50) for _ in range(m)]
    edges = [(i, i + 1) for i in range(m - 1)]
    last = np.array([min(i + 1, m - 1) if i < m - 1 else m - 2 for i in range(m)])
    most, kept = _most_partials(host, cap, edges, 0), _kept(host, cap, 1)
    for limit in (most, most - 1, max(1, most // 3)):
        exceeds, share = keptbound.one_snic_bound(np.array(host), np.array(cap), last, 0, limit, 1 << 20)
        assert exceeds == (share > 1)
        assert exceeds == keptbound.one_snic_exceeds(np.array(host), np.array(cap), last, 0, limit, 1 << 20)
        assert share <= max(most / limit, kept / (1 << 20))


def test_the_group_nearest_its_limit_is_built_first(monkeypatch) -> None:
    """Foreign draw 1153 (one sNIC): of its three groups of 16-18 NFs the build gives up on the one whose
    bound came nearest its limit; built first, no other group is built before prepare gives up (three
    builds before), and prepare still answers None as without the early give-up and the order."""
    from bench.placement.foreign import instance

    p = parse_problem(instance(1153))
    builds: list = []
    real = decompose._build_pending
    monkeypatch.setattr(
        decompose, "_build_pending", lambda ctx, pending, *a: builds.append(pending) or real(ctx, pending, *a)
    )
    assert decompose.prepare(p) is None
    assert len(builds) == 1 and len(builds[0]) == 1 and builds[0][0][1].shape == (1, 18)
    builds.clear()
    monkeypatch.setattr(decompose, "_doomed", lambda *a: 0.0)  # no bound: no early give-up, no order
    assert decompose.prepare(p) is None and len(builds) == 3
