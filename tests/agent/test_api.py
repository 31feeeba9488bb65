"""REST contract of the agent (fast, no root): routes vs the served OpenAPI spec, bad bodies, auth, 409s,
rollback on failure, persistence. The NF runtime and OneSwitch are fakes here (see fakes.py)."""

from __future__ import annotations

import json
import re

import pytest

from nf_agent import store
from nf_agent.api import create_app
from nf_agent.ui import is_open
from testkit.fakes import make_agent

TOKEN = "s3cret-token"


@pytest.fixture
def env(tmp_path):
    agent, rt, mp, clock = make_agent(tmp_path)
    app = create_app(agent)
    return agent, rt, mp, clock, app.test_client()


def post(client, path, body, **kw):
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(path, data=data, content_type="application/json", **kw)


def test_spec_and_routes_match(env):
    agent, *_, client = env
    spec = client.get("/v1/openapi.json").get_json()
    assert spec["openapi"].startswith("3.")
    app = client.application
    served = {}
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static" or is_open(rule.rule):  # the web view's page files: not the JSON API
            continue
        path = re.sub(r"<(?:\w+:)?(\w+)>", "{id}", rule.rule)
        served.setdefault(path, set()).update(m.lower() for m in rule.methods - {"HEAD", "OPTIONS"})
    documented = {p: {m for m in ops if m != "parameters"} for p, ops in spec["paths"].items()}
    assert served == documented
    # every operation documents its error shape
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            if method == "parameters":
                continue
            for code, resp in op["responses"].items():
                if int(code) >= 400 and path != "/v1/health":  # health's 503 carries the health report
                    assert resp["content"]["application/json"]["schema"] == {
                        "$ref": "#/components/schemas/Error"
                    }


def test_vm_and_nf_lifecycle_and_create_answer_names_only_the_vport(env):
    agent, rt, mp, _, c = env
    r = post(c, "/v1/vms", {"id": "web"})
    assert r.status_code == 201 and r.get_json() == {"id": "web", "vport": 100}
    r = post(
        c,
        "/v1/nfs",
        {"type": "firewall", "expected": {"gbps": 1, "dst": "web"}, "config": {"default": "deny"}},
    )
    assert r.status_code == 201, r.get_json()
    body = r.get_json()
    assert set(body) == {"id", "vport"} and body["vport"] == 200
    nf_id = body["id"]
    assert mp.map_[200][1] >= 200 and len(rt.running) == 1
    got = c.get(f"/v1/nfs/{nf_id}").get_json()
    assert got["vport"] == 200 and "ofport" not in json.dumps(got) and "switch" not in json.dumps(got)
    assert c.get("/v1/ports").get_json() == [
        {"vport": 1, "kind": "eth", "owner": "snic0-eth0"},
        {"vport": 100, "kind": "vm", "owner": "web"},
        {"vport": 200, "kind": "nf", "owner": nf_id},
    ]
    pl = c.get("/v1/placement").get_json()
    assert pl["locations"] == {nf_id: agent.state.nfs[nf_id].location}
    assert {"src": nf_id, "dst": "web", "gbps": 1.0} in pl["traffic"]
    # the VM is in the NF's chain: 409 until the NF is gone
    assert c.delete("/v1/vms/web").status_code == 409
    assert c.delete(f"/v1/nfs/{nf_id}").status_code == 200
    assert rt.running == {} and mp.map_ == {}
    assert c.delete("/v1/vms/web").status_code == 200
    assert c.get(f"/v1/nfs/{nf_id}").status_code == 404


BAD_NF = [
    ("not json", "body"),
    ("[1]", "body"),
    ({}, "type"),
    ({"type": "router"}, "type"),
    ({"type": "firewall", "colour": 1}, "colour"),
    ({"type": "firewall", "id": "Bad Id"}, "id"),
    ({"type": "firewall", "config": []}, "config"),
    ({"type": "firewall", "expected": {"gbps": -1}}, "expected.gbps"),
    ({"type": "firewall", "expected": {"gbps": "1"}}, "expected.gbps"),
    ({"type": "firewall", "expected": {"gbps": True}}, "expected.gbps"),
    ({"type": "firewall", "expected": {"gbps": 1e9}}, "expected.gbps"),
    ({"type": "firewall", "expected": {"src": "ghost"}}, "expected.src"),
    ({"type": "firewall", "expected": {"dst": "x", "rate": 1}}, "expected.rate"),
    ({"type": "firewall", "pin": "snic7"}, "pin"),
    ({"type": "firewall", "pin": 0}, "pin"),
    ({"type": "firewall", "hints": {"prefer": "gpu"}}, "hints.prefer"),
    ({"type": "firewall", "hints": []}, "hints"),
]


@pytest.mark.parametrize("body,field", BAD_NF)
def test_bad_nf_bodies_are_400_naming_the_field_and_change_nothing(env, body, field):
    agent, rt, mp, _, c = env
    before = json.dumps(agent.state.to_json(), sort_keys=True)
    r = post(c, "/v1/nfs", body)
    assert r.status_code == 400, r.get_json()
    assert r.get_json()["field"] == field and r.get_json()["error"]
    assert json.dumps(agent.state.to_json(), sort_keys=True) == before
    assert rt.running == {} and mp.map_ == {}


@pytest.mark.parametrize(
    "path,body,field",
    [
        ("/v1/vms", {}, "id"),
        ("/v1/vms", {"id": 5}, "id"),
        ("/v1/vms", {"id": "a", "x": 1}, "x"),
        ("/v1/nfs/NFID/migrate", {}, "to"),
        ("/v1/nfs/NFID/migrate", {"to": "moon"}, "to"),
        ("/v1/nfs/NFID/scale", {"instances": 0}, "instances"),
        ("/v1/nfs/NFID/scale", {"instances": 1.5}, "instances"),
        ("/v1/nfs/NFID/scale", {"instances": "2"}, "instances"),
        ("/v1/placement/run", {"force": "yes"}, "force"),
        ("/v1/placement/run", "{", "body"),
        ("/v1/placement/run", "null", "body"),
        # whitespace is a body that is not JSON, not an absent one (schemathesis sent "\r")
        ("/v1/placement/run", "\r", "body"),
        ("/v1/nfs/NFID/standby", " \n", "body"),
    ],
)
def test_other_bad_bodies(env, path, body, field):
    _, _, _, _, c = env
    nf = post(c, "/v1/nfs", {"type": "monitor"}).get_json()["id"]
    r = post(c, path.replace("NFID", nf), body)
    assert r.status_code == 400 and r.get_json()["field"] == field


def test_conflicts_are_409(env):
    agent, rt, mp, _, c = env
    assert post(c, "/v1/vms", {"id": "a"}).status_code == 201
    assert post(c, "/v1/vms", {"id": "a"}).status_code == 409
    assert post(c, "/v1/vms", {"id": "b"}).status_code == 201
    r = post(c, "/v1/vms", {"id": "c"})  # two slots
    assert r.status_code == 409 and "slots" in r.get_json()["error"]
    assert post(c, "/v1/nfs", {"type": "nat", "id": "n1"}).status_code == 201
    r = post(c, "/v1/nfs", {"type": "nat", "id": "n1"})
    assert r.status_code == 409 and r.get_json()["field"] == "id"
    assert post(c, "/v1/nfs", {"type": "nat", "id": "a"}).status_code == 409  # a VM's id
    # pinned NF cannot migrate elsewhere
    assert post(c, "/v1/nfs", {"type": "nat", "id": "p1", "pin": "host"}).status_code == 201
    r = post(c, "/v1/nfs/p1/migrate", {"to": "snic0"})
    assert r.status_code == 409 and r.get_json()["field"] == "to"
    # an NF that does not fit anywhere: 409, nothing created
    n = len(rt.running)
    r = post(c, "/v1/nfs", {"type": "ips", "pin": "snic0", "expected": {"gbps": 300}})
    assert r.status_code == 409 and len(rt.running) == n
    # scale-out: the current count is a no-op; a OneSwitch that cannot spread a vport fails closed (409)
    assert post(c, "/v1/nfs/n1/scale", {"instances": 1}).status_code == 200
    mp.unsupported = True
    r = post(c, "/v1/nfs/n1/scale", {"instances": 2})
    assert r.status_code == 409 and r.get_json()["field"] == "instances"


def test_an_id_naming_an_snic_ethernet_port_is_409_and_nf_creation_still_works(env):
    # the sNIC Ethernet ports are placement vertices too: a VM or NF named like one made every later
    # placement instance invalid (500 "duplicate id" on each POST /v1/nfs)
    agent, rt, _, _, c = env
    for path, body in (("/v1/vms", {"id": "snic0-eth0"}), ("/v1/nfs", {"type": "nat", "id": "snic0-eth0"})):
        r = post(c, path, body)
        assert r.status_code == 409, r.get_json()
        assert r.get_json()["field"] == "id" and "Ethernet port" in r.get_json()["error"]
    assert agent.state.vms == {} and agent.state.nfs == {} and rt.running == {}
    assert post(c, "/v1/nfs", {"type": "nat", "id": "n1"}).status_code == 201


def test_unknown_route_method_and_huge_body_are_json(env):
    *_, c = env
    r = c.get("/v1/nope")
    assert r.status_code == 404 and "error" in r.get_json()
    r = c.put("/v1/nfs")
    assert r.status_code == 405 and "error" in r.get_json()
    r = post(c, "/v1/nfs", b"{" + b" " * (2 << 20) + b"}")
    assert r.status_code == 413 and "error" in r.get_json()
    assert c.get("/v1/nfs/ghost").status_code == 404
    assert post(c, "/v1/nfs/ghost/migrate", {"to": "host"}).status_code == 404


def test_rollback_when_the_nf_does_not_start(env):
    agent, rt, mp, _, c = env
    rt.fail_start.add("bad")
    r = post(c, "/v1/nfs", {"type": "firewall", "id": "bad"})
    assert r.status_code == 500 and "boom" in r.get_json()["error"]
    assert agent.state.nfs == {} and rt.running == {} and mp.map_ == {}
    assert store.load(agent.state_path).nfs == {}


def test_rollback_when_oneswitch_refuses(env):
    agent, rt, mp, _, c = env
    mp.fail = True
    r = post(c, "/v1/nfs", {"type": "firewall", "id": "f"})
    assert r.status_code == 502
    assert agent.state.nfs == {} and rt.running == {}
    mp.fail = False
    assert post(c, "/v1/nfs", {"type": "firewall", "id": "f"}).status_code == 201
    # a failed remap leaves the NF running where it was
    loc = agent.state.nfs["f"].location
    other = "snic0" if loc == "host" else "host"
    mp.fail = True
    assert post(c, "/v1/nfs/f/migrate", {"to": other}).status_code == 502
    assert agent.state.nfs["f"].location == loc and len(rt.running) == 1


def test_token_auth(tmp_path):
    agent, *_ = make_agent(tmp_path)
    c = create_app(agent, token=TOKEN).test_client()
    assert c.get("/v1/health").status_code == 200  # open
    assert c.get("/v1/openapi.json").status_code == 200  # open
    for path in ("/v1/nfs", "/v1/vms", "/v1/ports", "/v1/placement", "/metrics"):
        r = c.get(path)
        assert r.status_code == 401 and r.get_json()["field"] == "Authorization"
        assert c.get(path, headers={"Authorization": "Bearer wrong-token"}).status_code == 401
        assert c.get(path, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    r = post(c, "/v1/nfs", {"type": "firewall"})
    assert r.status_code == 401 and agent.state.nfs == {}


def test_state_survives_a_restart(tmp_path):
    agent, rt, mp, _ = make_agent(tmp_path)
    c = create_app(agent).test_client()
    post(c, "/v1/vms", {"id": "vm-a"})
    post(c, "/v1/nfs", {"type": "firewall", "id": "f1", "expected": {"gbps": 2, "dst": "vm-a"}})
    again = store.load(tmp_path / "state.json")
    assert again.to_json() == agent.state.to_json()
    assert again.free_vport(200) == 201


def test_a_migration_counts_in_the_metrics(env):
    # uno_agent_migrations_total stayed 0 whatever moved (the increment was lost in a refactor)
    agent, *_, c = env
    assert post(c, "/v1/nfs", {"type": "firewall", "id": "f1"}).status_code == 201
    other = "snic0" if agent.state.nfs["f1"].location == "host" else "host"
    r = post(c, "/v1/nfs/f1/migrate", {"to": other})
    assert r.status_code == 200 and r.get_json()["moved"], r.get_json()
    text = c.get("/metrics").get_data(as_text=True)
    assert "uno_agent_migrations_total 1.0" in text and "uno_agent_migration_failures_total 0.0" in text


def test_corrupt_state_file_is_an_error_not_a_reset(tmp_path):
    (tmp_path / "state.json").write_text("{nope")
    with pytest.raises(ValueError, match="unreadable"):
        store.load(tmp_path / "state.json")


def test_metrics_exposition(env):
    *_, c = env
    post(c, "/v1/nfs", {"type": "firewall", "id": "f1", "expected": {"gbps": 1}})
    text = c.get("/metrics").get_data(as_text=True)
    for name in ("uno_agent_solves_total", "uno_agent_predicted_host_cores", 'uno_agent_nf_healthy{nf="f1"} 1.0',
                 "uno_agent_migrations_total", "uno_agent_http_requests_total"):  # fmt: skip
        assert name in text


def test_health_reports_an_unreachable_state_tier_and_its_changes_once(env):
    agent, rt, _, _, c = env
    assert post(c, "/v1/nfs", {"type": "firewall", "id": "fw"}).status_code == 201
    r = c.get("/v1/health")
    assert r.status_code == 200 and r.get_json() == {"ok": True, "nfs": {"fw": "healthy"}, "store": "ok"}
    rt.store_up = False
    for _ in range(2):  # one event per change, however often it is asked
        r = c.get("/v1/health")
        assert r.status_code == 503
        want = {"ok": False, "nfs": {"fw": "degraded: state tier unreachable"}, "store": "unreachable"}
        assert r.get_json() == want
    metrics = c.get("/metrics").get_data(as_text=True)
    assert "uno_agent_store_up 0.0" in metrics and 'uno_agent_nf_healthy{nf="fw"} 0.0' in metrics
    rt.store_up = True
    assert c.get("/v1/health").status_code == 200
    assert "uno_agent_store_up 1.0" in c.get("/metrics").get_data(as_text=True)
    assert [e["event"] for e in agent.state.history if e["event"].startswith("store-")] == [
        "store-down",
        "store-up",
    ]
    rt.store_up = None  # NFs with local state: no tier to reach
    assert c.get("/v1/health").get_json()["store"] == "local"


def test_restart_revives_a_failed_nf_with_its_budget_reset(env):
    agent, rt, _, _, c = env
    assert post(c, "/v1/nfs", {"type": "firewall", "id": "fw"}).status_code == 201
    inst = agent.state.nfs["fw"].instances[0]
    inst.state, agent.supervisor.restart_times[inst.id] = "failed", [0.0] * 5  # the supervisor gave up on it
    rt.stop_processes(inst)
    assert c.get("/v1/health").status_code == 503
    r = post(c, "/v1/nfs/fw/restart", {})
    assert r.status_code == 200 and r.get_json() == {"id": "fw", "restarted": [inst.id]}
    assert inst.state == "running" and rt.alive(inst) and inst.id not in agent.supervisor.restart_times
    assert c.get("/v1/health").status_code == 200
    assert c.post("/v1/nfs/fw/restart").status_code == 200  # no body: the same
    assert post(c, "/v1/nfs/fw/restart", {"now": True}).get_json()["field"] == "now"
    assert post(c, "/v1/nfs/nope/restart", {}).status_code == 404
    rt.fail_start.add("fw")  # it does not come up: 502 naming it, marked failed
    r = post(c, "/v1/nfs/fw/restart", {})
    assert r.status_code == 502 and inst.id in r.get_json()["error"]
    assert inst.state == "failed"
    assert [e.get("manual") for e in agent.state.history if e["event"] == "nf-restart"] == [True] * 3


@pytest.mark.parametrize("depth", [33, 600, 980, 100_000])
def test_deeply_nested_bodies_are_400_and_change_nothing(env, depth):
    # a ~200 KB body nested a few hundred levels parsed fine, then a handler's recursive walk hit Python's
    # recursion limit: 500 RecursionError. Nesting is bounded at the edge now.
    agent, rt, _, _, c = env
    deep = '{"a":' * depth + "1" + "}" * depth
    for path, body in (
        ("/v1/vms", deep),
        ("/v1/nfs", '{"type":"firewall","config":{"rules":' + deep + "}}"),
        ("/v1/nfs", '{"type":"firewall","config":' + deep + "}"),
        ("/v1/placement/run", "[" * depth + "]" * depth),
    ):
        r = post(c, path, body)
        assert r.status_code == 400, (path, r.get_json())
        assert r.get_json()["field"] == "body"
    assert agent.state.vms == {} and agent.state.nfs == {} and rt.running == {}


def test_nesting_depth_counts_without_recursion():
    from restkit.jsonapi import nesting_depth

    assert nesting_depth(1, 5) == 0
    assert nesting_depth({"a": [1, {"b": []}]}, 5) == 4
    assert nesting_depth({"a": [1, {"b": []}]}, 3) == 4  # stops counting past the limit
    deep: list = []
    for _ in range(50_000):
        deep = [deep]
    assert nesting_depth(deep, 32) == 33


def test_patch_config_applies_in_place_and_a_refusal_changes_nothing(env):
    agent, rt, _, _, c = env
    assert post(c, "/v1/nfs", {"type": "firewall", "id": "fw"}).status_code == 201
    inst = agent.state.nfs["fw"].instances[0]
    cfg = {"rules": [{"action": "deny", "proto": "udp", "dst_port": 53}]}
    r = c.patch("/v1/nfs/fw", data=json.dumps({"config": cfg}), content_type="application/json")
    assert r.status_code == 200, r.get_json()
    assert rt.configs[inst.id] == cfg and agent.state.nfs["fw"].config == cfg
    bad = {"rules": [{"action": "bogus"}]}  # the NF binary's own check refuses it: 400 naming the field
    r = c.patch("/v1/nfs/fw", data=json.dumps({"config": bad}), content_type="application/json")
    assert r.status_code == 400 and r.get_json()["field"].startswith("config.rules[0]")
    assert rt.configs[inst.id] == cfg and agent.state.nfs["fw"].config == cfg
