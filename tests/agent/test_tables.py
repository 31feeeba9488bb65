"""Switching offload in the agent (issue 27): OneSwitch's tables placed by the solver within the sNIC's
max_rules, moves applied through OneSwitch, a refusal keeps the table where it was (its reason shown),
GET /v1/tables says why a table stays on the host, PUT /v1/tables/{t} pins, bad bodies are 400 naming the
field. OneSwitch's tables are a fake of its REST contract here (testkit/fakes.py FakeTables); the end-to-end
test with the real OneSwitch is tests/datapath/test_table_offload.py."""

from __future__ import annotations

import json

import pytest

from nf_agent import store
from nf_agent.api import create_app
from nf_agent.monitor import Measurement
from nf_agent.tables import pipeline_edges, table_nodes, through_gbps
from testkit.fakes import FakeTables, make_agent


def _measure(agent, up: float, down: float) -> None:
    agent.monitor.measurement = Measurement(0.0, 1.0, {}, {}, {"snic0": {"up": up, "down": down}}, {}, {})


@pytest.fixture
def env(tmp_path):
    tables = FakeTables({0: 64000, 1: 8000, 2: 100}, limits={"snic0": 16384})
    agent, rt, mp, clock = make_agent(tmp_path, tables=tables, max_rules=16384)
    _measure(agent, 1.0, 1.0)
    return agent, tables, create_app(agent).test_client()


def put(client, path, body):
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.put(path, data=data, content_type="application/json")


def test_tables_fitting_max_rules_go_to_the_snic_and_the_big_one_says_memory(env):
    agent, tables, client = env
    r = client.post("/v1/tables/place")
    assert r.status_code == 200, r.get_json()
    out = r.get_json()
    assert {m["table"]: m["to"] for m in out["moves"]} == {0: "host", 1: "snic0", 2: "snic0"}
    rows = {t["table"]: t for t in client.get("/v1/tables").get_json()}
    assert rows[1]["location"] == "snic0" and rows[1]["why"] is None
    assert rows[0]["location"] == "host"
    assert rows[0]["why"]["reason"] == "refused by OneSwitch"  # OneSwitch itself says it cannot hold it
    assert "16384" in rows[0]["why"]["detail"]


def test_memory_named_when_only_our_budget_forbids(env):
    agent, tables, client = env
    tables.limits = {}  # OneSwitch could take it; the agent's max_rules is what keeps it on the host
    client.post("/v1/tables/place")
    row = {t["table"]: t for t in client.get("/v1/tables").get_json()}[0]
    assert row["location"] == "host" and row["why"]["reason"] == "memory", row


def test_refusal_keeps_the_table_and_is_recorded(env):
    agent, tables, client = env
    tables.limits = {}

    def refuse(table, location, drain_ms=None, host_min_priority=None):
        from domain.errors import TableRefused

        if location == "snic0":
            raise TableRefused(str(table), "the sNIC cannot match on tun_id")
        return orig(table, location, drain_ms, host_min_priority)

    orig, tables.move_table = tables.move_table, refuse
    out = client.post("/v1/tables/place").get_json()
    assert {r["table"] for r in out["refused"]} == {1, 2}
    rows = {t["table"]: t for t in client.get("/v1/tables").get_json()}
    assert rows[1]["location"] == "everywhere"  # kept where it was: never half moved
    tables.move_table(1, "host")
    rows = {t["table"]: t for t in client.get("/v1/tables").get_json()}
    assert rows[1]["why"] == {"reason": "refused by OneSwitch", "detail": "the sNIC cannot match on tun_id"}


def test_no_gain_without_traffic_and_pin(env):
    agent, tables, client = env
    _measure(agent, 0.0, 0.0)
    tables.move_table(2, "host")
    row = {t["table"]: t for t in client.get("/v1/tables").get_json()}[2]
    assert row["why"]["reason"] == "no gain"
    r = put(client, "/v1/tables/1", {"pin": "host"})
    assert r.status_code == 200 and r.get_json()["pin"] == "host"
    row = {t["table"]: t for t in client.get("/v1/tables").get_json()}[1]
    assert row["location"] == "host" and row["why"]["reason"] == "pinned" and row["pin"] == "host"
    _measure(agent, 1.0, 1.0)
    client.post("/v1/tables/place")
    assert {t["table"]: t for t in client.get("/v1/tables").get_json()}[1]["location"] == "host"
    assert store.load(agent.state_path).table_pins == {1: "host"}  # persisted
    assert put(client, "/v1/tables/1", {"pin": None}).status_code == 200
    client.post("/v1/tables/place")
    assert {t["table"]: t for t in client.get("/v1/tables").get_json()}[1]["location"] == "snic0"


def test_pin_refused_by_oneswitch_is_409_and_not_kept(env):
    agent, tables, client = env
    r = put(client, "/v1/tables/0", {"pin": "snic0"})
    assert r.status_code == 409 and r.get_json()["field"] == "pin"
    assert agent.state.table_pins == {}


@pytest.mark.parametrize(
    "path, body, field",
    [
        ("/v1/tables/1", {"pin": 3}, "pin"),
        ("/v1/tables/1", {"pin": ""}, "pin"),
        ("/v1/tables/1", {"pin": "snic7"}, "pin"),
        ("/v1/tables/1", {}, "pin"),
        ("/v1/tables/1", {"pin": "host", "x": 1}, "x"),
        ("/v1/tables/1", [1], "body"),
        ("/v1/tables/300", {"pin": "host"}, "table"),
        ("/v1/tables/1", {"pin": "snic0", "host_min_priority": 0}, "host_min_priority"),
        ("/v1/tables/1", {"pin": "snic0", "host_min_priority": 65536}, "host_min_priority"),
        ("/v1/tables/1", {"pin": "snic0", "host_min_priority": "100"}, "host_min_priority"),
        ("/v1/tables/1", {"pin": "snic0", "host_min_priority": True}, "host_min_priority"),
        ("/v1/tables/1", {"pin": "host", "host_min_priority": 100}, "host_min_priority"),
        ("/v1/tables/1", {"pin": None, "host_min_priority": 100}, "host_min_priority"),
        ("/v1/tables/1", {"pin": "snic7", "host_min_priority": 100}, "pin"),
    ],
)
def test_bad_pin_bodies_are_400_naming_the_field_and_change_nothing(env, path, body, field):
    agent, tables, client = env
    r = put(client, path, body)
    assert r.status_code == 400, r.get_json()
    assert r.get_json()["field"] == field
    assert agent.state.table_pins == {} and agent.state.table_splits == {} and tables.moves == []


def test_a_split_pin_splits_on_the_snic_persists_and_survives_placement(env):
    agent, tables, client = env
    r = put(client, "/v1/tables/1", {"pin": "snic0", "host_min_priority": 101})
    assert r.status_code == 200, r.get_json()
    assert r.get_json()["host_min_priority"] == 101
    assert tables.moves == [(1, "snic0", 101)]
    assert (tables.state[1].location, tables.state[1].host_min_priority) == ("snic0", 101)
    for st in (agent.state, store.load(agent.state_path)):  # persisted
        assert st.table_pins == {1: "snic0"} and st.table_splits == {1: 101}
    client.post("/v1/tables/place")
    assert (tables.state[1].location, tables.state[1].host_min_priority) == ("snic0", 101)  # kept split
    assert [m for m in tables.moves if m[0] == 1] == [(1, "snic0", 101)]
    row = {t["table"]: t for t in client.get("/v1/tables").get_json()}[1]
    assert row["split"]["host_min_priority"] == 101 and row["pin"] == "snic0"
    # the same pin unsplit: moved whole, the split forgotten
    assert put(client, "/v1/tables/1", {"pin": "snic0"}).status_code == 200
    assert tables.state[1].host_min_priority is None and agent.state.table_splits == {}


def test_a_split_pin_of_a_table_the_snic_cannot_hold_is_409_and_not_kept(env):
    """OneSwitch's split keeps the whole table on the sNIC: table 0 (64,000 rules) no more fits split."""
    agent, tables, client = env
    r = put(client, "/v1/tables/0", {"pin": "snic0", "host_min_priority": 101})
    assert r.status_code == 409 and r.get_json()["field"] == "pin", r.get_json()
    assert agent.state.table_pins == {} and agent.state.table_splits == {}
    assert tables.state[0].location == "everywhere" and tables.state[0].host_min_priority is None


def test_a_split_made_on_oneswitch_is_kept_in_place_and_dropped_by_a_move_elsewhere(env):
    from dataclasses import replace

    agent, tables, client = env
    tables.state[1] = replace(tables.state[1], location="snic0", host_min_priority=7)
    assert put(client, "/v1/tables/1", {"pin": "host"}).status_code == 200
    assert tables.moves[-1] == (1, "host") and tables.state[1].host_min_priority is None


def test_unknown_table_is_404_and_no_offload_is_409(tmp_path, env):
    _, _, client = env
    assert put(client, "/v1/tables/9", {"pin": "host"}).status_code == 404
    assert put(client, "/v1/tables/x1", {"pin": "host"}).status_code == 404  # not a table's path
    assert put(client, "/v1/tables/place", {"pin": "host"}).status_code == 405
    agent, *_ = make_agent(tmp_path / "plain")
    plain = create_app(agent).test_client()
    assert plain.get("/v1/tables").status_code == 409


def test_nf_placement_sees_offloaded_tables_fixed(env):
    agent, tables, client = env
    client.post("/v1/tables/place")
    problem = agent.problem([])
    nodes = {n["id"]: n for n in problem["nodes"]}
    assert nodes["table1"]["pinned"] == "snic0" and "rules" not in nodes["table1"]
    assert nodes["table0"]["pinned"] == "host"


def test_table_nodes_pure():
    class T:
        def __init__(self, table, location, rules, offload):
            self.table, self.location, self.rules, self.offload = table, location, rules, offload

    ts = [T(0, "everywhere", 5, {"snic0": None}), T(1, "snic0", 7, {"snic0": "no room"}), T(2, "host", 1, {})]
    nodes = table_nodes(ts, {"r_host": 0.1}, 2.0, ["snic0"], {2: "host"})
    assert nodes[0] == {"id": "table0", "kind": "table", "r_host": 0.1, "r_nic": 0.0, "rules": 5,
                        "through_gbps": 2.0}  # fmt: skip
    assert (
        "pinned" not in nodes[1] and nodes[1]["location"] == "snic0"
    )  # OneSwitch's word is tried, not modelled
    assert nodes[2]["pinned"] == "host"
    # its sNIC is down: the host runs it meanwhile
    assert table_nodes(ts[1:2], {}, 0, [], {}, fixed=True)[0]["pinned"] == "host"
    assert through_gbps({"snic0": {"up": 1.5, "down": 0.25}, "snic1": {"up": 1}}) == 2.75
    assert through_gbps(None) == 0


def test_uno_agent_tables_renders_where_and_why(env):
    from uno_cli.tables_cmd import render

    agent, tables, client = env
    client.post("/v1/tables/place")
    text = render(client.get("/v1/tables").get_json())
    lines = text.splitlines()
    assert lines[0].split() == ["TABLE", "LOCATION", "RULES", "SPLIT", "PIN", "WHY", "ON", "HOST"]
    assert "refused by OneSwitch: snic0: snic0 holds at most 16384 rules" in lines[1]
    assert lines[2].split()[:4] == ["1", "snic0", "8000", "-"]


def test_a_split_table_shows_its_priority_and_sides_and_stays_split_where_the_solver_keeps_it(env):
    """A table OneSwitch runs split (`host_min_priority`, set on OneSwitch) on the sNIC the solver also picks
    is not moved (a move would unsplit it); GET and the CLI show the split priority and each side's rules."""
    from dataclasses import replace

    from uno_cli.tables_cmd import render

    agent, tables, client = env
    tables.state[1] = replace(tables.state[1], location="snic0", host_min_priority=101,
                              physical={"host": 4000, "snic0": 8002})  # fmt: skip
    out = client.post("/v1/tables/place").get_json()
    assert 1 not in {m["table"] for m in out["moves"]}, out
    rows = client.get("/v1/tables").get_json()
    row = {r["table"]: r for r in rows}[1]
    assert row["location"] == "snic0" and row["why"] is None
    assert row["split"] == {"host_min_priority": 101, "rules": {"host": 4000, "snic0": 8002}}
    assert {r["table"]: r for r in rows}[2]["split"] is None
    line = [x for x in render(rows).splitlines() if x.split()[0] == "1"][0]
    assert line.split()[:6] == ["1", "snic0", "8000", ">=101", "host:4000", "snic0:8002"]


def test_pipeline_edges_in_table_order_both_ways():
    class T:
        def __init__(self, table):
            self.table = table

    pcie = {"snic0": {"up": 1.5, "down": 0.5}, "snic1": {"up": 1.0, "down": 0.0}}
    edges = pipeline_edges([T(2), T(0)], pcie, {"snic0": "snic0-eth0", "snic1": "snic1-eth0"}, "vm0")
    got = {(e["src"], e["dst"]): e["gbps"] for e in edges}
    assert got == {
        ("snic0-eth0", "table0"): 1.5, ("snic1-eth0", "table0"): 1.0, ("table0", "table2"): 3.0,
        ("table2", "vm0"): 2.5, ("vm0", "table0"): 0.5, ("table2", "snic0-eth0"): 0.5,
    }  # fmt: skip
    assert pipeline_edges([T(0)], pcie, {"snic0": "snic0-eth0"}, None) == []  # no VM to end the chain
    assert pipeline_edges([], pcie, {"snic0": "snic0-eth0"}, "vm0") == []


def test_the_agents_instance_carries_the_pipeline_not_through_gbps(env):
    agent, tables, client = env
    assert all(e["src"] != "table0" for e in agent.problem([])["edges"])  # no VM: through_gbps, no chain
    r = client.post("/v1/vms", data=json.dumps({"id": "web"}), content_type="application/json")
    assert r.status_code in (200, 201), r.get_json()
    client.post("/v1/tables/place")
    problem = agent.problem([])
    edges = {(e["src"], e["dst"]): e["gbps"] for e in problem["edges"]}
    assert edges[("table0", "table1")] == 2.0 and edges[("table1", "table2")] == 2.0  # up + down, in order
    assert edges[("snic0-eth0", "table0")] == 1.0 and edges[("table2", "web")] == 1.0
    assert all("through_gbps" not in n for n in problem["nodes"] if n["kind"] == "table")


def test_uno_agent_tables_split_needs_pin():
    import argparse

    from domain.errors import CliError
    from uno_cli.tables_cmd import cmd_tables

    args = argparse.Namespace(pin=None, unpin=None, place=False, split=101, json=False, agent="http://x")
    with pytest.raises(CliError, match="--split needs --pin"):
        cmd_tables(args)
