"""Switch tables as placement vertices (issue 27): `kind: table` with `rules` against an sNIC's
`max_rules`, placed by the same solver as NFs (brute force on small instances with tables), validation that
names the field, old instances unchanged, and why a table stays on the host (placement/explain.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placement import PlacementInputError, parse_problem, solve
from placement.evaluate import evaluate
from placement.explain import rules_used, why_on_host
from tests.placement.test_engine import brute_force, check

ROOT = Path(__file__).resolve().parents[2]


@st.composite
def instances_with_tables(draw):
    n_snic = draw(st.integers(1, 2))
    locs = ["host"] + [f"snic{k}" for k in range(n_snic)]
    nodes = [{"id": "vm0", "kind": "vm"}]
    nodes += [{"id": f"e{k}", "kind": "port", "pinned": f"snic{k}"} for k in range(n_snic)]
    for i in range(draw(st.integers(1, 3))):
        nodes.append({"id": f"t{i}", "kind": "table", "r_host": draw(st.sampled_from([0, 0.5, 1])),
                      "r_nic": draw(st.sampled_from([0, 0.25, 1])), "rules": draw(st.sampled_from([0, 1, 3, 8])),
                      "pinned": draw(st.sampled_from([None, None, None, "host"])),
                      "location": draw(st.sampled_from([None, *locs])),
                      "through_gbps": draw(st.sampled_from([0, 0.3, 1]))})  # fmt: skip
    for i in range(draw(st.integers(0, 2))):
        nodes.append({"id": f"f{i}", "kind": "nf", "r_host": draw(st.sampled_from([0.5, 1.5])),
                      "r_nic": draw(st.sampled_from([0.25, 3]))})  # fmt: skip
    ids = [n["id"] for n in nodes]
    edges = []
    for _ in range(draw(st.integers(1, 8))):
        a, b = draw(st.sampled_from(ids)), draw(st.sampled_from(ids))
        if a != b:
            edges.append({"src": a, "dst": b, "gbps": draw(st.sampled_from([0.5, 1, 2.5]))})
    snics = []
    for k in range(n_snic):
        s = {"id": f"snic{k}", "capacity": draw(st.sampled_from([1, 3, 10])),
             "pcie_gbps": draw(st.sampled_from([2, 5, 50]))}  # fmt: skip
        limit = draw(st.sampled_from([None, 0, 4, 9]))
        if limit is not None:
            s["max_rules"] = limit
        snics.append(s)
    opts = {"max_moves": draw(st.sampled_from([None, None, 1])), "move_cost": draw(st.sampled_from([0, 0.5]))}
    return {"nodes": nodes, "edges": edges, "snics": snics}, opts


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances_with_tables())
def test_tables_and_nfs_placed_optimally_within_max_rules(case):
    inst, opts = case
    problem = parse_problem(inst)
    best = brute_force(problem, opts["max_moves"], opts["move_cost"])
    for solver in ("cpsat", "mip"):
        r = solve(problem, solver=solver, time_limit=20, **opts)
        check(problem, opts, r, best)
        if r["status"] == "optimal":
            used = rules_used(problem, r["placement"])
            for s in inst["snics"]:
                assert used[s["id"]] <= s.get("max_rules", 10**9)


def _acl(rules: int, max_rules: int | None, r_host: float = 0.04) -> dict:
    snic = {"id": "snic0", "capacity": 36, "pcie_gbps": 40}
    if max_rules is not None:
        snic["max_rules"] = max_rules
    return {
        "nodes": [{"id": "e0", "kind": "port", "pinned": "snic0"}, {"id": "vm0", "kind": "vm"},
                  {"id": "acl", "kind": "table", "r_host": r_host, "r_nic": 0.5, "rules": rules}],
        "edges": [{"src": "e0", "dst": "acl", "gbps": 5}, {"src": "acl", "dst": "vm0", "gbps": 5}],
        "snics": [snic],
    }  # fmt: skip


def test_max_rules_keeps_a_big_table_on_the_host_and_says_why():
    problem = parse_problem(_acl(65536, 16384))
    r = solve(problem, time_limit=5)
    assert r["status"] == "optimal" and r["placement"]["acl"] == "host"
    why = why_on_host(problem, r["placement"], "acl")
    assert why["reason"] == "memory" and "rules" in why["detail"]


def test_without_max_rules_the_sNIC_holds_any_table():
    r = solve(parse_problem(_acl(65536, None)), time_limit=5)
    assert r["placement"]["acl"] == "snic0" and r["host_cost"] == 0


def test_a_table_that_fits_exactly_is_offloaded():
    assert solve(parse_problem(_acl(16384, 16384)), time_limit=5)["placement"]["acl"] == "snic0"


def test_why_pinned_capacity_and_no_gain():
    pinned = _acl(10, None)
    pinned["nodes"][2]["pinned"] = "host"
    p = parse_problem(pinned)
    assert why_on_host(p, solve(p, time_limit=5)["placement"], "acl")["reason"] == "pinned"
    tight = _acl(10, None)
    tight["snics"][0]["capacity"] = 1
    p = parse_problem(tight)
    r = solve(p, time_limit=5)
    assert r["placement"]["acl"] == "host" and why_on_host(p, r["placement"], "acl")["reason"] == "capacity"
    free = parse_problem(_acl(10, None, r_host=0))
    assert why_on_host(free, {"e0": "snic0", "vm0": "host", "acl": "host"}, "acl")["reason"] == "no gain"
    narrow = _acl(10, None)
    narrow["edges"] = [{"src": "vm0", "dst": "acl", "gbps": 5}, {"src": "acl", "dst": "vm0", "gbps": 5}]
    narrow["snics"][0]["pcie_gbps"] = 1
    p = parse_problem(narrow)
    assert why_on_host(p, {"e0": "snic0", "vm0": "host", "acl": "host"}, "acl")["reason"] == "pcie"


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda d: d["snics"][0].update(max_rules=-1), "snics[0].max_rules"),
        (lambda d: d["snics"][0].update(max_rules=1.5), "snics[0].max_rules"),
        (lambda d: d["snics"][0].update(max_rules="10"), "snics[0].max_rules"),
        (lambda d: d["nodes"][2].update(rules=True), "nodes[2].rules"),
        (lambda d: d["nodes"][2].update(rules=-3), "nodes[2].rules"),
        (lambda d: d["nodes"][1].update(rules=3), "nodes[1].rules"),
        (lambda d: d["snics"][0].update(resources={"rules": 5}), "snics[0].resources.rules"),
        (lambda d: d["nodes"][2].update(kind="tabel"), "nodes[2].kind"),
        (lambda d: d["nodes"][2].update(through_gbps=-1), "nodes[2].through_gbps"),
        (lambda d: d["nodes"][1].update(through_gbps=1), "nodes[1].through_gbps"),
    ],
)
def test_bad_table_fields_are_named(mutate, field):
    data = _acl(10, 100)
    mutate(data)
    with pytest.raises(PlacementInputError, match=rf"^{__import__('re').escape(field)}"):
        parse_problem(data)


def test_through_gbps_is_load_on_no_link():
    # A table with only wire <-> VM traffic through it: its cost counts 2 x through_gbps, no PCIe either way.
    data = _acl(10, None)
    data["edges"] = []
    data["nodes"][2]["through_gbps"] = 5
    problem = parse_problem(data)
    r = solve(problem, time_limit=5)
    assert r["placement"]["acl"] == "snic0" and r["pcie_gbps"]["snic0"] == {"up": 0, "down": 0}
    assert problem.host_costs()[2] == problem.nodes[2].r_host * 10
    data["snics"][0]["capacity"] = 4  # r_nic 0.5 x 10 = 5 units: does not fit
    r = solve(parse_problem(data), time_limit=5)
    assert r["placement"]["acl"] == "host" and r["host_cost"] == 0.4


def test_old_instances_mean_what_they_did():
    # No table and no max_rules: no `rules` resource appears, the answer is the same as before.
    data = json.loads((ROOT / "placement" / "examples" / "multi-resource.json").read_text())
    problem = parse_problem(copy.deepcopy(data))
    assert problem.resource_names == ["mem_gb"]
    assert solve(problem, time_limit=5)["placement"]["l7fw"] == "host"


def _pipeline(n_tables: int, up: float, down: float, pcie: float) -> dict:
    """A pipeline of tables in table order, wire port e0 (snic0) -> t0 -> ... -> vm0 carrying `up` and
    vm0 -> t0 -> ... -> e0 carrying `down` (nf_agent/tables.py `pipeline_edges`)."""
    order = [f"table{i}" for i in range(n_tables)]
    edges = []
    for path, gbps in ((["e0", *order, "vm0"], up), (["vm0", *order, "e0"], down)):
        edges += [{"src": a, "dst": b, "gbps": gbps} for a, b in zip(path, path[1:], strict=False)]
    nodes = [{"id": "e0", "kind": "port", "pinned": "snic0"}, {"id": "vm0", "kind": "vm"}]
    nodes += [{"id": t, "kind": "table", "r_host": 0.1, "r_nic": 0, "rules": 10} for t in order]
    return {"nodes": nodes, "edges": edges, "snics": [{"id": "snic0", "capacity": 36, "pcie_gbps": pcie}]}


def test_tables_alternating_host_and_snic_pay_a_crossing_per_change():
    # table1 pinned to the host between table0 and table2: offloading both costs 3 crossings each way
    data = _pipeline(3, 1, 1, 3)
    data["nodes"][3]["pinned"] = "host"
    problem = parse_problem(data)
    r = solve(problem, time_limit=5)
    assert r["placement"] == {
        "e0": "snic0",
        "vm0": "host",
        "table0": "snic0",
        "table1": "host",
        "table2": "snic0",
    }
    assert r["pcie_gbps"]["snic0"] == {"up": 3, "down": 3}
    # one crossing less than that: only one of them moves (either saves the same)
    data["snics"][0]["pcie_gbps"] = 2.5
    r = solve(parse_problem(data), time_limit=5)
    assert sorted(r["placement"][t] for t in ("table0", "table2")) == ["host", "snic0"]
    assert r["pcie_gbps"]["snic0"] == {"up": 2, "down": 2}
    # all on one side: one crossing each way, wherever the tables run
    for where in ("host", "snic0"):
        placed = {"e0": "snic0", "vm0": "host"} | {f"table{i}": where for i in range(3)}
        ev = evaluate(parse_problem(_pipeline(3, 1, 1, 3)), placed)
        assert {d: float(g) for d, g in ev.pcie["snic0"].items()} == {"up": 1.0, "down": 1.0}


@st.composite
def pipelines(draw):
    n = draw(st.integers(1, 4))
    data = _pipeline(n, draw(st.sampled_from([0.5, 1, 2])), draw(st.sampled_from([0, 0.5, 1])),
                     draw(st.sampled_from([1, 1.5, 2, 3, 5])))  # fmt: skip
    for node in data["nodes"][2:]:
        node["r_host"] = draw(st.sampled_from([0, 0.1, 0.5]))
        node["r_nic"] = draw(st.sampled_from([0, 0.25]))
        node["pinned"] = draw(st.sampled_from([None, None, "host", "snic0"]))
        if node["pinned"] is None:
            del node["pinned"]
    data["snics"][0]["capacity"] = draw(st.sampled_from([0.5, 2, 36]))
    return data


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pipelines())
def test_pipelines_placed_optimally_with_their_crossings(data):
    problem = parse_problem(data)
    best = brute_force(problem, None, 0)
    for solver in ("cpsat", "mip"):
        check(
            problem, {"max_moves": None, "move_cost": 0}, solve(problem, solver=solver, time_limit=20), best
        )
