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
    early = decompose.prepare(p)
    monkeypatch.setattr(decompose, "_doomed", lambda *a: False)
    late = decompose.prepare(p)
    assert (early is None) == (late is None)
    if early is not None:
        for name in ("start", "config", "cost", "pcie", "moves", "use"):
            assert np.array_equal(getattr(early, name), getattr(late, name))


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
