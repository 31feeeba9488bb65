"""Live update and config in place with real NFs and traffic (root; real OneSwitch, Redis, `nf` processes,
kernel TCP and UDP through the emulated host), through the agent's REST API (its Flask app in-process).

- roll the firewall to another nf version and back under TCP connections and a datagram per ms: none lost,
  no connection broken or stalled, the instance replaced each time;
- a version whose state layout the running one cannot read: the rollback to it is 409 naming why, and
  nothing changes (same instance, same pid, same version);
- a bad config: 400 naming the field, nothing changes;
- a config change the firewall takes in place: a new flow the new rule denies is dropped, the pid is the same;
  one changing a runtime option rolls the NF instead;
- an NF of two instances: each replaced in its set (no datagram of a sequenced UDP stream lost).

The second version is the same source built with another version string (scripts/nf-version.sh), the third
declares a state layout the first cannot read (UNO_NF_TEST_STATE_LAYOUT=2); built once when missing.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from nf_agent.api import create_app
from nf_local.versions import DEFAULT_DIR
from state_tier.keys import nf_key
from testkit.hosts import EMPTY, machine_snapshot
from testkit.live import LIVE_MARKS, burst, next_run
from testkit.tcp_chain import End, TcpChain, add_chains, fw_tcp, run
from testkit.testbed import FW_CONFIG, Testbed, nf_counters, report

pytestmark = LIVE_MARKS
REPO = Path(__file__).resolve().parents[2]
V_SAME = "0.1.1"  # reads and writes what the default binary does
V_LAYOUT2 = "0.2.0-layout2"  # writes a layout the default binary cannot read


def _ensure_version(version: str, env: dict[str, str]) -> None:
    if (DEFAULT_DIR / version / "nf").is_file():
        return
    import os

    subprocess.run([str(REPO / "scripts" / "nf-version.sh"), version], check=True, timeout=1800,
                   env={**os.environ, **env}, capture_output=True)  # fmt: skip


@pytest.fixture(scope="module")
def versions():
    _ensure_version(V_SAME, {})
    _ensure_version(V_LAYOUT2, {"UNO_NF_TEST_STATE_LAYOUT": "2"})


@pytest.fixture(scope="module")
def tcp_bed(versions):
    tb = Testbed(warm_slots=0)
    try:
        tb.up()
        chain = TcpChain(0, End("wire"), [("fw", "firewall", fw_tcp(0), "host")])
        add_chains(tb, [chain])
        yield tb, chain, create_app(tb.agent).test_client()
    finally:
        tb.close()
        assert machine_snapshot(tb.name) == EMPTY


@pytest.fixture(scope="module")
def udp_bed(versions):
    tb = Testbed()
    try:
        tb.up()
        tb.add_firewall(at="host")
        yield tb, create_app(tb.agent).test_client()
    finally:
        tb.close()
        assert machine_snapshot(tb.name) == EMPTY


def _default_version() -> str:
    out = subprocess.run([str(DEFAULT_DIR.parent / "target" / "release" / "nf"), "--version"], capture_output=True,
                         text=True, check=True)  # fmt: skip
    return out.stdout.strip()


def test_update_and_rollback_under_traffic_lose_nothing(tcp_bed):
    tb, chain, api = tcp_bed
    nf = tb.agent.state.nfs["fw"]
    seen: list[tuple[str, int]] = []
    answers: list[dict] = []
    default = _default_version()

    def roll() -> None:
        seen.append((nf.instances[0].id, nf.instances[0].pid))
        for version in (V_SAME, default):
            r = api.post("/v1/nfs/fw/update", json={"version": version})
            assert r.status_code == 200, r.get_json()
            answers.append(r.get_json())
            seen.append((nf.instances[0].id, nf.instances[0].pid))

    udp: list[dict] = []
    [rep] = run(tb, [chain], conns=4, seconds=8, during=roll, udp=udp)
    print(f"\nupdate + rollback: {answers}; tcp {rep}; udp {udp}")
    assert rep["broken"] == 0 and rep["stalled"] == 0, rep
    assert udp[0]["lost"] == 0 and udp[0]["received"] > 0, udp
    assert answers[0]["version"] == V_SAME and answers[1]["version"] == default
    assert answers[1]["previous_version"] == V_SAME
    assert len({i for i, _ in seen}) == 3 and len({p for _, p in seen}) == 3  # a new instance each time
    got = api.get("/v1/nfs/fw").get_json()
    assert got["version"] == default and got["previous_version"] == V_SAME


def test_update_refused_when_state_unreadable_changes_nothing(tcp_bed):
    tb, _, api = tcp_bed
    nf = tb.agent.state.nfs["fw"]
    r = api.post("/v1/nfs/fw/update", json={"version": V_LAYOUT2})  # reads every layout written so far
    assert r.status_code == 200, r.get_json()
    before = (nf.instances[0].id, nf.instances[0].pid, nf.version, list(nf.state_layouts))
    default = _default_version()
    r = api.post("/v1/nfs/fw/update", json={"version": default})  # cannot read layout 2
    body = r.get_json()
    assert r.status_code == 409 and body["field"] == "version", body
    assert "layout 2" in body["error"], body
    assert (nf.instances[0].id, nf.instances[0].pid, nf.version, list(nf.state_layouts)) == before
    assert tb.runtime.alive(nf.instances[0])
    assert any(h["event"] == "nf-live-update-refused" for h in tb.agent.state.history)


def test_bad_config_is_400_and_changes_nothing(udp_bed):
    tb, api = udp_bed
    nf = tb.agent.state.nfs["fw"]
    before = (nf.instances[0].id, nf.instances[0].pid, dict(nf.config))
    bad = {**FW_CONFIG, "rules": [{"action": "bogus"}]}
    r = api.patch("/v1/nfs/fw", json={"config": bad})
    body = r.get_json()
    assert r.status_code == 400 and body["field"] == "config.rules[0].action", body
    r = api.post("/v1/nfs/fw/update", json={"version": V_SAME, "config": {"rules": [], "batch_size": 0}})
    assert r.status_code == 400 and r.get_json()["field"] == "config.batch_size", r.get_json()
    assert (nf.instances[0].id, nf.instances[0].pid, dict(nf.config)) == before
    assert nf_counters(tb)["counters"].get("reconfigured", 0) == 0


def test_config_in_place_denies_new_flow_pid_unchanged(udp_bed):
    tb, api = udp_bed
    nf = tb.agent.state.nfs["fw"]
    assert burst(tb, "vm", 6001)["received"] == 50  # UDP from the VM is allowed
    inst, pid = nf.instances[0].id, nf.instances[0].pid
    denied_before = nf_counters(tb)["nf_stats"]["denied_by_rule"]
    new = {
        **FW_CONFIG,
        "rules": [{"action": "deny", "proto": "udp", "dst_port": "6002-6099"}, *FW_CONFIG["rules"]],
    }
    r = api.patch("/v1/nfs/fw", json={"config": new})
    assert r.status_code == 200 and r.get_json()["config_applied"] == "in-place", r.get_json()
    assert burst(tb, "vm", 6002, expect_none=True)["received"] == 0  # a new flow the new rule denies
    assert burst(tb, "vm", 6001)["received"] == 50  # an open connection stays open
    assert (nf.instances[0].id, nf.instances[0].pid) == (inst, pid) and tb.runtime.alive(nf.instances[0])
    st = nf_counters(tb)
    assert st["counters"]["reconfigured"] == 1 and st["nf_stats"]["denied_by_rule"] > denied_before
    assert nf.config == new
    # a runtime option cannot change in place: the same call rolls the NF (a new instance, same version)
    r = api.patch("/v1/nfs/fw", json={"config": {**new, "batch_size": 16}})
    assert r.status_code == 200 and r.get_json()["config_applied"] == "rolling", r.get_json()
    assert nf.instances[0].id != inst and nf.config["batch_size"] == 16
    assert burst(tb, "vm", 6003, expect_none=True)["received"] == 0  # the rules went with the roll


def test_update_of_a_scaled_out_nf_replaces_each_instance_losing_nothing(udp_bed):
    tb, api = udp_bed
    nf = tb.agent.state.nfs["fw"]
    nf.pin = "host"  # both instances on the host
    tb.agent.scale("fw", 2)
    try:
        olds = {i.id for i in nf.instances}
        run, flows, pkts = next_run(), 20, 200  # 4000 packets at 1000/s: 4 s
        sink = tb.sink("out", run, expect=flows * pkts, idle_ms=3000)
        gen = tb.gen("vm", run, flows=flows, pkts=pkts, rate=1000)
        time.sleep(0.5)
        r = api.post("/v1/nfs/fw/update", json={"version": V_SAME})
        report(gen)
        got = report(sink)
        body = r.get_json()
        assert r.status_code == 200, body
        assert {x["old"] for x in body["replaced"]} == olds and len(nf.instances) == 2
        assert not olds & {i.id for i in nf.instances} and nf.version == V_SAME
        assert got["lost"] == 0 and got["received"] == flows * pkts, got
    finally:
        tb.agent.scale("fw", 1)
        nf.pin = None


def _udp_through(tb, api, body: dict) -> tuple[dict, dict]:
    """`POST /v1/nfs/fw/update body` under 1,500 UDP packets VM -> wire: (the answer, the sink's report)."""
    run, flows, pkts = next_run(), 10, 150
    sink = tb.sink("out", run, expect=flows * pkts, idle_ms=3000)
    gen = tb.gen("vm", run, flows=flows, pkts=pkts, rate=1000)
    time.sleep(0.4)
    r = api.post("/v1/nfs/fw/update", json=body)
    report(gen)
    return r.get_json() | {"status": r.status_code}, report(sink)


def test_update_of_an_nf_on_an_snic_ships_the_binary_and_loses_nothing(udp_bed):
    """The sNIC is another machine: the new binary reaches it through its agent's API (PUT
    /v1/nf-versions), once, and the new instance runs it there; rolling back runs the sNIC's own again."""
    tb, api = udp_bed
    nf = tb.agent.state.nfs["fw"]
    snic = tb.runtime.remote["snic0"].client
    tb.agent.migrate(nf, "snic0")
    try:
        was = _default_version()  # what the host's default binary (and the sNIC's own) is
        body, got = _udp_through(tb, api, {"version": V_SAME})
        assert body["status"] == 200, body
        assert got["lost"] == 0 and got["received"] == 1500, got
        inst = nf.instances[0]
        assert inst.location == "snic0" and nf.version == V_SAME
        shipped = [v for v in snic.nf_versions() if v["instances"]]
        assert [v["reports"] for v in shipped] == [V_SAME] and shipped[0]["instances"] == [inst.id], shipped
        assert snic.instance(inst.id)["version"] == shipped[0]["version"]
        body, got = _udp_through(tb, api, {"version": was})  # back to the default: the sNIC's own binary
        assert body["status"] == 200 and nf.version == was, body
        assert got["lost"] == 0, got
        assert snic.instance(nf.instances[0].id)["version"] is None
        assert not any(v["instances"] for v in snic.nf_versions())
    finally:
        tb.agent.migrate(nf, "host")


K1 = "000102030405060708090a0b0c0d0e0f"
IPSEC = {"replay_window": 128, "sas": [{
    "name": "in", "dir": "in", "spi": 4097, "key": K1, "salt": "01020304", "tunnel_src": "203.0.113.1",
    "tunnel_dst": "203.0.113.2", "selectors": [{"src": "10.9.0.1/32", "dst": "10.9.0.2/32"}]}]}  # fmt: skip


@pytest.mark.parametrize(
    ("nf_type", "config", "bad", "field"),
    [
        ("monitor", {}, {"counters": "increments"}, "config.counters"),
        ("ipsec", IPSEC, {**IPSEC, "replay_window": 256}, "config.replay_window"),
    ],
)
def test_a_roll_cannot_bring_what_the_state_cannot_take(udp_bed, nf_type, config, bad, field):
    """What the running NF refuses in place (its state in the tier cannot take it) is refused the same way by
    `POST /update` with that config and by a PATCH that would roll (a runtime option changes with it): 400
    naming the field, nothing changed."""
    tb, api = udp_bed
    r = api.post("/v1/nfs", json={"type": nf_type, "id": "st", "config": config, "pin": "host"})
    assert r.status_code == 201, r.get_json()
    try:
        nf = tb.agent.state.nfs["st"]
        before = (nf.instances[0].id, nf.instances[0].pid, nf.config, nf.version)
        answers = [
            api.patch("/v1/nfs/st", json={"config": bad}),
            api.patch("/v1/nfs/st", json={"config": {**bad, "batch_size": 16}}),
            api.post("/v1/nfs/st/update", json={"version": _default_version(), "config": bad}),
            api.post(
                "/v1/nfs/st/update", json={"version": _default_version(), "config": {**bad, "batch_size": 16}}
            ),
        ]
        for r in answers:
            assert r.status_code == 400 and r.get_json()["field"] == field, r.get_json()
        assert (nf.instances[0].id, nf.instances[0].pid, nf.config, nf.version) == before
        assert tb.runtime.alive(nf.instances[0])
        assert nf_counters(tb, "st")["counters"].get("reconfigured", 0) == 0
    finally:
        assert api.delete("/v1/nfs/st").status_code in (200, 204)


def _nat(ip: str) -> dict:
    return {"inside": ["10.0.0.0/8"], "public_ips": [ip], "ports": "20000-20009", "port_block": 1}


def test_a_nat_pool_changed_by_a_roll_reaches_the_tier(udp_bed):
    """The pool of a NAT changed by `POST /update` with a config, and by a PATCH that rolls (a runtime option
    with it), reaches the state tier as a change in place does: the tier's pool spec is the new config's, the
    new pairs are in the shared pool once, the removed ones retired."""
    tb, api = udp_bed
    r = api.post("/v1/nfs", json={"type": "nat", "id": "nt", "config": _nat("198.51.100.1"), "pin": "host"})
    assert r.status_code == 201, r.get_json()
    redis = tb.runtime.tier_client()
    spec_key, pool_key = nf_key("default", "nt", "pool-spec"), nf_key("default", "nt", "pool")

    def tier() -> tuple[dict, list[str]]:
        pairs = sorted(f"{b[:4].hex()}:{int.from_bytes(b[4:], 'big')}" for b in redis.lrange(pool_key, 0, -1))
        return json.loads(redis.get(spec_key)), pairs

    try:
        spec, pairs = tier()
        assert spec["ips"] == ["198.51.100.1"] and len(pairs) == 10
        old = set(pairs)
        r = api.post(
            "/v1/nfs/nt/update", json={"version": _default_version(), "config": _nat("198.51.100.2")}
        )
        assert r.status_code == 200 and r.get_json()["replaced"], r.get_json()
        spec, pairs = tier()
        assert spec["ips"] == ["198.51.100.2"] and spec["retired"] == [["198.51.100.1", 20000, 20009]], spec
        new = set(pairs) - old
        assert len(new) == 10 and all(p.startswith("c6336402:") for p in new), pairs  # 198.51.100.2, once
        r = api.patch("/v1/nfs/nt", json={"config": {**_nat("198.51.100.3"), "batch_size": 16}})
        assert r.status_code == 200 and r.get_json()["config_applied"] == "rolling", r.get_json()
        spec, pairs = tier()
        assert spec["ips"] == ["198.51.100.3"] and len(spec["retired"]) == 2, spec
        assert sum(p.startswith("c6336403:") for p in pairs) == 10, pairs
        # the old pool back: refused before anything starts (its pairs may still be mapped)
        nf = tb.agent.state.nfs["nt"]
        inst = nf.instances[0].id
        r = api.post(
            "/v1/nfs/nt/update", json={"version": _default_version(), "config": _nat("198.51.100.1")}
        )
        assert r.status_code == 400 and r.get_json()["field"] == "config.public_ips", r.get_json()
        assert nf.instances[0].id == inst and nf.config["public_ips"] == ["198.51.100.3"]
        assert tier()[0] == spec
    finally:
        redis.close()
        assert api.delete("/v1/nfs/nt").status_code in (200, 204)
