"""Property tests: returned placements are feasible, their objective is the one recomputed from first
principles, it is no worse than every placement we can enumerate, and CP-SAT and MIP agree."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement import parse_problem, solve
from placement.evaluate import evaluate
from tests.placement.test_families import brute_force


@st.composite
def instances(draw):
    n_nf = draw(st.integers(1, 5))
    n_vm = draw(st.integers(1, 2))
    n_snic = draw(st.integers(1, 2))
    nodes = [{"id": f"vm{i}", "kind": "vm"} for i in range(n_vm)]
    nodes += [{"id": f"e{k}", "kind": "port", "pinned": f"snic{k}"} for k in range(n_snic)]
    for i in range(n_nf):
        nodes.append({"id": f"f{i}", "kind": "nf", "r_host": draw(st.sampled_from([0.5, 1, 2])),
                      "r_nic": draw(st.sampled_from([0.25, 1, 3])),
                      "b_host": draw(st.sampled_from([0, 0, 0.5])), "b_nic": draw(st.sampled_from([0, 0, 1])),
                      "pinned": draw(st.sampled_from([None, None, None, "host", "snic0"]))})  # fmt: skip
    ids = [n["id"] for n in nodes]
    edges = []
    for _ in range(draw(st.integers(1, 8))):
        a, b = draw(st.sampled_from(ids)), draw(st.sampled_from(ids))
        if a != b:
            edges.append({"src": a, "dst": b, "gbps": draw(st.sampled_from([0.1, 0.5, 1, 2.5]))})
    snics = [{"id": f"snic{k}", "capacity": draw(st.sampled_from([0, 1, 3, 10])),
              "pcie_gbps": draw(st.sampled_from([0.5, 2, 5, 50]))} for k in range(n_snic)]  # fmt: skip
    for s in snics:  # traffic through no vertex (the agent's measured background) takes part of the link
        bg = draw(
            st.sampled_from([None, None, {"up": 0.4}, {"down": 1.5}, {"up": 2, "down": 0.1}, {"up": 60}])
        )
        if bg is not None:
            s["background_gbps"] = bg
    return {"nodes": nodes, "edges": edges, "snics": snics,
            "pcie_model": draw(st.sampled_from(["duplex", "shared"]))}  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_optimal_feasible_and_matches_brute_force_and_mip(inst):
    problem = parse_problem(inst)
    best = brute_force(problem)
    results = {s: solve(problem, solver=s, time_limit=20) for s in ("cpsat", "mip")}
    for r in results.values():
        if best is None:
            assert r["status"] == "infeasible" and r["reason"]
            continue
        assert r["status"] == "optimal"
        ev = evaluate(problem, r["placement"])
        assert ev.feasible, ev.violations
        assert abs(r["host_cost"] - float(ev.host_cost)) < 1e-9
        assert ev.host_cost == best
    if best is not None:
        assert results["cpsat"]["host_cost"] == results["mip"]["host_cost"]
