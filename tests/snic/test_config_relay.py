"""The sNIC agent relays a config to its instance's real NF (`PUT /v1/instances/ID/config`; root: a real
`nf` monitor process with a real `nf_local.LocalNfs` under a real `SnicAgent` and its Flask app).

The instance runs on the loopback of a network namespace of its own (this test's, not a bridge port: what is
tested is the config's way from the API to the NF and back, not the switch). The NF's own answers come back
as the API's: applied in place (200, same pid, the NF's `reconfigured` counter up, the agent's record and the
config file its restarts read are the new config), refused (400 `config`, the NF's field named in the
message), takes a restart (409 `config`); unknown instance 404, bodies that are not an object 400 `body`; a
fuzz of config objects gets only 200/400/409 JSON, the NF keeps running and a refused config changes
nothing."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from domain.model import Instance
from nf_local.processes import NF_BINARY, LocalNfs
from nf_local.tier_access import as_access
from snic_agent.api import create_app
from snic_agent.config import parse_config
from snic_agent.service import SnicAgent

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (a network namespace)"),
    pytest.mark.skipif(not NF_BINARY.exists(), reason="nfs not built (setup.sh rust)"),
    pytest.mark.timeout(300),
]
TOKEN = "s3cret-snic-token"
MONITOR = {"idle_timeout_ms": 60_000}


class NamespaceNfs(LocalNfs):
    """The agent's real runtime, but an instance runs on the loopback of one namespace (no bridge port)."""

    def __init__(self, directory: Path, netns: str):
        super().__init__("sc", {}, directory, "local")
        self.netns = netns

    def new_instance(self, nf, location, seq, used_ofports):
        return Instance(f"{nf.id}-{seq}", location, location, 100 + seq, self.netns, "lo", "none")

    def start(self, nf, inst, buffer=0, store=None):
        self.stores[inst.id] = as_access(store or self.store)
        self.start_processes(nf, inst, buffer)

    def stop(self, inst):
        self.stop_processes(inst)


@pytest.fixture
def relay(tmp_path):
    netns = f"snicconf-{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", netns], check=True)
    agent = None
    try:
        subprocess.run(["ip", "-n", netns, "link", "set", "lo", "up"], check=True)
        tok = tmp_path / "agent.token"
        tok.write_text(TOKEN)
        cfg = parse_config({
            "snic": "snic0", "listen": "192.0.2.2:7700", "token_file": str(tok), "dir": str(tmp_path / "a"),
            "prefix": "sc", "bridge": "br-none", "ovsdb": f"unix:{tmp_path}/no.sock", "switch_netns": netns,
        })  # fmt: skip
        agent = SnicAgent(cfg)
        agent.nfs = NamespaceNfs(cfg.directory, netns)
        agent.exits.start()
        client = create_app(agent, TOKEN).test_client()
        r = put(client, "POST", "/v1/instances",
                {"id": "mon-1", "nf_id": "mon", "type": "monitor", "config": MONITOR, "store": "local"})  # fmt: skip
        assert r.status_code == 201, r.get_json()
        yield agent, client
    finally:
        try:
            if agent is not None:
                for inst_id in list(agent.records):
                    agent.exits.forget(inst_id)
                    agent.nfs.stop_processes(agent.instance(inst_id))
                agent.exits.stop()
        finally:
            subprocess.run(["ip", "netns", "del", netns], check=False)


def put(client, method: str, path: str, body=None, raw: bytes | None = None):
    data = raw if raw is not None else json.dumps(body)
    return client.open(path, method=method, data=data, headers={"Authorization": f"Bearer {TOKEN}"})


def nf_stats(client) -> dict:
    r = client.get("/v1/instances/mon-1/nf/stats", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def pid(agent: SnicAgent) -> int:
    return agent.instance("mon-1").pid


def config_file(agent: SnicAgent) -> dict:
    return json.loads((agent.cfg.directory / "mon-1.json").read_text())


def test_applied_in_place_refused_and_restart_needed_are_the_nfs_own_answers(relay):
    agent, c = relay
    was = pid(agent)
    new = {"idle_timeout_ms": 30_000}
    r = put(c, "PUT", "/v1/instances/mon-1/config", new)
    assert r.status_code == 200, r.get_json()
    assert r.get_json()["pid"] == was and r.get_json()["alive"]
    assert nf_stats(c)["counters"]["reconfigured"] == 1
    assert agent.records["mon-1"]["config"] == new
    assert config_file(agent)["idle_timeout_ms"] == 30_000  # what its restarts read

    # the NF refuses: its field named, nothing changed
    r = put(c, "PUT", "/v1/instances/mon-1/config", {"counters": "increments"})
    assert r.status_code == 400 and r.get_json()["field"] == "config", r.get_json()
    assert "counters" in r.get_json()["error"]
    r = put(c, "PUT", "/v1/instances/mon-1/config", {"idle_timeout_ms": "soon"})
    assert r.status_code == 400 and "idle_timeout_ms" in r.get_json()["error"], r.get_json()
    # a runtime option changes: the NF takes a restart
    r = put(c, "PUT", "/v1/instances/mon-1/config", {**new, "batch_size": 7})
    assert r.status_code == 409 and r.get_json()["field"] == "config", r.get_json()
    assert "restart" in r.get_json()["error"]
    assert agent.records["mon-1"]["config"] == new and config_file(agent)["idle_timeout_ms"] == 30_000
    assert "batch_size" not in config_file(agent)
    assert pid(agent) == was and nf_stats(c)["counters"]["reconfigured"] == 1

    # a restart of its process reads the config applied in place
    r = put(c, "POST", "/v1/instances/mon-1/start", raw=b"")
    assert r.status_code == 200, r.get_json()
    assert pid(agent) != was and config_file(agent)["idle_timeout_ms"] == 30_000
    assert nf_stats(c)["counters"]["reconfigured"] == 0  # a new process, started with it


@pytest.mark.parametrize("raw", [b"", b"[]", b'"x"', b"nope", b"{" * 40 + b"}" * 40])
def test_bad_bodies_and_unknown_ids_never_reach_the_nf(relay, raw):
    agent, c = relay
    r = put(c, "PUT", "/v1/instances/mon-1/config", raw=raw)
    assert r.status_code == 400 and r.get_json()["field"] == "body", r.get_json()
    r = put(c, "PUT", "/v1/instances/mon-9/config", {"idle_timeout_ms": 1000})
    assert r.status_code == 404, r.get_json()
    assert nf_stats(c)["counters"]["reconfigured"] == 0
    assert agent.records["mon-1"]["config"] == MONITOR


KEYS = st.sampled_from(["idle_timeout_ms", "counters", "flush_ms", "batch_size", "spin_us", "x", ""])
VALUES = (
    st.none()
    | st.booleans()
    | st.integers(-5, 10**7)
    | st.text(max_size=8)
    | st.sampled_from(["record", "increments", {"mode": "increments"}, []])
)


def test_fuzz_configs_only_nf_answers_and_the_nf_keeps_running(relay):
    agent, c = relay
    was = pid(agent)
    seen: set[int] = set()

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.dictionaries(KEYS, VALUES, max_size=3))
    def run(config):
        before = agent.records["mon-1"]["config"]
        r = put(c, "PUT", "/v1/instances/mon-1/config", config)
        assert r.status_code in (200, 400, 409), (config, r.status_code, r.get_data(as_text=True)[:300])
        body = r.get_json()
        seen.add(r.status_code)
        if r.status_code == 200:
            assert agent.records["mon-1"]["config"] == config
        else:
            assert body["field"] == "config" and body["error"], body
            assert agent.records["mon-1"]["config"] == before, config
        assert pid(agent) == was and agent.nfs.alive(agent.instance("mon-1"))

    run()
    assert {200, 400} <= seen
