"""Cover cuts of the plain model's budget rows (placement/covers.py, solver._Model.add_cover_cuts): every
cut is implied by its row in integers (brute force over the row's 0/1 points), and the plain model's full
solve through the cut path (several sNICs, the box unproven) answers as brute force and the MIP."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import placement.solver as solver_mod
from bench.placement.foreign import instance as foreign_instance
from placement import parse_problem, solve
from placement.covers import Rows, cover_cuts, implied, separate
from placement.evaluate import evaluate
from placement.solver import Options, _Model
from tests.placement.test_families import brute_force


def _row_points(idx, coeffs, cap):
    for bits in itertools.product((0, 1), repeat=len(idx)):
        if sum(c * b for c, b in zip(coeffs, bits, strict=True)) <= cap:
            yield dict(zip(idx, bits, strict=True))


def _holds(point, lits, rhs) -> bool:
    return sum((1 - point[v]) if neg else point[v] for v, neg in lits) <= rhs


def test_every_separated_cover_is_implied_by_its_row_and_violated_at_the_point():
    rng = random.Random(23)
    found = 0
    for _ in range(3000):
        n = rng.randint(3, 8)
        idx = rng.sample(range(20), n)
        coeffs = [rng.choice([-5, -2, 1, 2, 3, 5, 8, 13]) for _ in range(n)]
        cap = rng.randint(0, max(1, sum(c for c in coeffs if c > 0)))
        val = [rng.choice([0.0, 1.0, rng.random()]) for _ in range(20)]
        cut = separate(idx, coeffs, cap, val)
        if cut is None:
            continue
        lits, rhs = cut
        found += 1
        assert implied(idx, coeffs, cap, lits, rhs)
        assert all(_holds(pt, lits, rhs) for pt in _row_points(idx, coeffs, cap))  # no 0/1 point is cut
        assert sum((1 - val[v]) if neg else val[v] for v, neg in lits) > rhs  # the LP point is
    assert found > 100


def test_implied_refuses_a_cut_its_row_does_not_imply():
    idx, coeffs, cap = [0, 1, 2], [3, 3, 3], 6  # two of three fit
    assert implied(idx, coeffs, cap, [(0, False), (1, False), (2, False)], 2)
    assert not implied(idx, coeffs, cap, [(0, False), (1, False), (2, False)], 1)
    assert not implied(
        idx, coeffs, cap, [(0, True), (1, False), (2, False)], 2
    )  # a literal it does not weigh


def test_cover_cuts_on_a_tiny_lp():
    # max x0 + x1 + x2 with 2 x0 + 2 x1 + 2 x2 <= 3: the LP sets 1.5 of them, the cover x0 + x1 + x2 <= 1
    rows = Rows(n_vars=3, objective=[(-1, 0), (-1, 1), (-1, 2)])
    rows.add([0, 1, 2], [2, 2, 2], None, 3, budget=True)
    cuts = cover_cuts(rows)
    assert cuts and all(implied([0, 1, 2], [2, 2, 2], 3, *c) for c in cuts)
    assert ([(0, False), (1, False), (2, False)], 1) in [(sorted(lits), rhs) for lits, rhs in cuts]


@st.composite
def several_snics(draw):
    n_nf = draw(st.integers(2, 6))
    n_snic = draw(st.integers(2, 3))
    nodes = [{"id": "vm0", "kind": "vm"}]
    nodes += [{"id": f"e{k}", "kind": "port", "pinned": f"snic{k}"} for k in range(n_snic)]
    for i in range(n_nf):
        nodes.append({"id": f"f{i}", "kind": "nf", "r_host": draw(st.sampled_from([0.5, 1, 2, 3])),
                      "r_nic": draw(st.sampled_from([0.25, 1, 2, 3])),
                      "b_nic": draw(st.sampled_from([0, 0, 1]))})  # fmt: skip
    ids = [n["id"] for n in nodes]
    edges = []
    for _ in range(draw(st.integers(2, 9))):
        a, b = draw(st.sampled_from(ids)), draw(st.sampled_from(ids))
        if a != b:
            edges.append({"src": a, "dst": b, "gbps": draw(st.sampled_from([0.5, 1, 2.5, 4]))})
    snics = [{"id": f"snic{k}", "capacity": draw(st.sampled_from([1, 2, 3, 5])),
              "pcie_gbps": draw(st.sampled_from([2, 4, 6, 50]))} for k in range(n_snic)]  # fmt: skip
    return {"nodes": nodes, "edges": edges, "snics": snics,
            "pcie_model": draw(st.sampled_from(["duplex", "shared"]))}  # fmt: skip


def _force_cuts(monkeypatch) -> dict[str, list[int]]:
    """The plain model's box never proves (the cut path always runs); each call's cover and Gomory cut
    counts (the cut path runs both: covers.py, gomory.py)."""
    counts: dict[str, list[int]] = {"cover": [], "gomory": []}
    monkeypatch.setattr(solver_mod, "CUTS_BOX", 1e-9)
    for kind, name in (("cover", "add_cover_cuts"), ("gomory", "add_gomory_cuts")):
        real = getattr(_Model, name)
        monkeypatch.setattr(
            _Model,
            name,
            lambda self, *a, real=real, kind=kind, **kw: (
                counts[kind].append(real(self, *a, **kw)) or counts[kind][-1]
            ),
        )
    return counts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(several_snics())
def test_cut_path_matches_brute_force(inst):
    problem = parse_problem(inst)
    best = brute_force(problem)
    with pytest.MonkeyPatch.context() as mp:
        counts = _force_cuts(mp)
        r = solve(problem, time_limit=20, engine=False)  # the plain model's full solve
    if best is None:
        assert r["status"] == "infeasible"
        return
    assert r["status"] == "optimal", r
    assert counts["cover"] and counts["gomory"]  # the cut path ran, both separators
    ev = evaluate(problem, r["placement"])
    assert ev.feasible and ev.host_cost == best


@st.composite
def one_snic_with_slos(draw):
    """One sNIC, chains from the port through 1-4 NFs to a VM, most with a latency SLO of 1-1.8 x their
    least latency (all on the host, one crossing: some met by every placement, some by a few), PCIe
    crossings that cost latency and budget."""
    n_nf = draw(st.integers(2, 7))
    nodes = [{"id": "vm0", "kind": "vm"}, {"id": "e0", "kind": "port", "pinned": "snic0"}]
    lat = {}
    for i in range(n_nf):
        lat[f"f{i}"] = host = draw(st.sampled_from([1.2, 4, 9]))
        nodes.append({"id": f"f{i}", "kind": "nf", "r_host": draw(st.sampled_from([0.5, 1, 2, 3])),
                      "r_nic": draw(st.sampled_from([0.25, 1, 2])),
                      "latency_us": {"host": host, "nic": host * draw(st.sampled_from([1.5, 2.2]))}})  # fmt: skip
    pcie_latency = draw(st.sampled_from([0.5, 3]))
    edges, chains = [], []
    order = draw(st.permutations(range(n_nf)))
    at = 0
    while at < n_nf:
        k = draw(st.integers(1, 4))
        path = ["e0", *(f"f{i}" for i in order[at : at + k]), "vm0"]
        at += k
        g = draw(st.sampled_from([0.5, 1, 2.5]))
        edges += [{"src": a, "dst": b, "gbps": g} for a, b in zip(path, path[1:], strict=False)]
        chain = {"id": f"c{len(chains)}", "vertices": path}
        if draw(st.integers(0, 3)):
            least = sum(lat[v] for v in path[1:-1]) + pcie_latency
            chain["latency_us"] = least * draw(st.sampled_from([1.0, 1.15, 1.4, 1.8]))
        chains.append(chain)
    snic = {"id": "snic0", "capacity": draw(st.sampled_from([1, 2, 4])),
            "pcie_gbps": draw(st.sampled_from([2, 5, 50])), "pcie_latency_us": pcie_latency}  # fmt: skip
    return {"nodes": nodes, "edges": edges, "snics": [snic], "chains": chains}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(one_snic_with_slos())
def test_slo_cut_path_with_one_snic_matches_brute_force(inst):
    """One sNIC and a kept latency row: the plain model's full solve takes the cut path (covers.py of the
    latency and budget rows) and still finds the least host cost; without a kept latency row it does not."""
    problem = parse_problem(inst)
    best = brute_force(problem)
    with pytest.MonkeyPatch.context() as mp:
        counts = _force_cuts(mp)
        mp.setattr(solver_mod, "SLO_CUTS_BOX", 1e-9)
        r = solve(problem, time_limit=20, engine=False)
    rows = _Model(problem, Options()).latency_rows
    if best is None:
        assert r["status"] == "infeasible"
        return
    assert r["status"] == "optimal", r
    assert bool(counts["cover"]) == (rows > 0)  # the cut path ran exactly where a latency row is kept
    ev = evaluate(problem, r["placement"])
    assert ev.feasible and ev.host_cost == best


def test_latency_rows_count_only_the_kept_ones():
    """A chain whose SLO every placement meets gets no row (left out, not counted); a binding one does."""
    base = {"nodes": [{"id": "vm0", "kind": "vm"}, {"id": "e0", "kind": "port", "pinned": "snic0"},
                      {"id": "f0", "kind": "nf", "r_host": 1, "r_nic": 1, "latency_us": {"host": 2, "nic": 5}}],
            "edges": [{"src": "e0", "dst": "f0", "gbps": 1}, {"src": "f0", "dst": "vm0", "gbps": 1}],
            "snics": [{"id": "snic0", "capacity": 4, "pcie_gbps": 10, "pcie_latency_us": 1}]}  # fmt: skip
    loose = base | {"chains": [{"id": "c0", "vertices": ["e0", "f0", "vm0"], "latency_us": 100}]}
    tight = base | {"chains": [{"id": "c0", "vertices": ["e0", "f0", "vm0"], "latency_us": 4}]}
    m_loose, m_tight = _Model(parse_problem(loose), Options()), _Model(parse_problem(tight), Options())
    assert m_loose.latency_rows == 0 and "latency of chain c0:" in m_loose.left_out
    assert m_tight.latency_rows == 1
    assert solver_mod._cuts_box(parse_problem(tight), m_tight) == solver_mod.SLO_CUTS_BOX
    assert solver_mod._cuts_box(parse_problem(loose), m_loose) is None


def test_cuts_are_implied_by_the_model_rows_on_foreign_draws():
    """Cuts on the recorded rows of real models (each checked against its own row inside cover_cuts): every
    cut's variables lie in one budget row."""
    for draw in (1541, 1598, 1615, 1565, 11):
        problem = parse_problem(foreign_instance(draw))
        m = _Model(problem, Options())
        rows = m.lp_rows()
        cuts = cover_cuts(rows)
        assert cuts
        budget_idx = {frozenset(rows.rows[r][0]) for r in rows.budgets}
        for lits, _ in cuts:
            assert any({v for v, _ in lits} <= b for b in budget_idx)


@pytest.mark.parametrize("draw", [1541, 1598, 1615, 1565])
def test_cut_path_answers_as_the_mip(monkeypatch, draw):
    counts = _force_cuts(monkeypatch)
    problem = parse_problem(foreign_instance(draw))
    ours = solve(problem, time_limit=30, engine=False)
    assert counts["cover"] and counts["cover"][0] > 0  # cuts were added
    if draw in (1541, 1598):  # (SCIP proves these two at its root with Gomory cuts: snics23)
        assert counts["gomory"] and counts["gomory"][0] > 0
    assert ours["status"] == "optimal" and evaluate(problem, ours["placement"]).feasible
    # 1565 (four sNICs): SCIP does not prove it within minutes; its best placement is no better than ours
    mip = solve(problem, solver="mip", time_limit=10 if draw == 1565 else 60)
    a, b = ours["host_cost"], mip["host_cost"]
    tol = 2e-5 * max(1.0, abs(a), abs(b))
    if mip["status"] == "optimal":
        assert abs(a - b) <= tol
    else:
        assert draw == 1565 and mip["status"] == "feasible" and a <= b + tol
