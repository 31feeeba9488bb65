"""The agent end to end on a real emulated host (root): `uno agent serve` as a process, OneSwitch, Redis, a
real `nf firewall` in its own namespace. Ping VM -> firewall -> wire through rules installed on OneSwitch;
monitoring sees the traffic; a kill -9 of the NF is restarted by the supervisor; migrate host <-> sNIC keeps
traffic flowing; an agent restart adopts the running NF; DELETE and teardown leave nothing behind."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from demo.chain import Chain
from emulated_host import agent_endpoint
from emulated_host import naming as nm
from emulated_host.host import ping
from host_datapath.oneswitch_client import OneSwitchClient
from host_datapath.snic_agent_client import SnicAgentClient
from host_datapath.sysutil import netns_list, pid_alive
from nf_agent.client import call
from nf_agent.graph import chain_links
from snic_datapath.cgroup import CpuCgroup
from testkit.agent_host import (
    AGENT_E2E,
    FW_CONFIG,
    agent_host,
    agent_state,
    crossings,
    install_chain,
    instance,
    iperf3,
    ofctl,
    wait_pcie,
)
from testkit.instances import gone
from testkit.poll import wait

REPO = Path(__file__).resolve().parents[2]
pytestmark = AGENT_E2E


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    # failover off (on by default): a dead NF is the supervisor's to restart in place, as this module checks
    with agent_host(tmp_path_factory.mktemp("agent"), agent_args=("--failover-interval", "0")) as e:
        yield e


def test_create_traffic_supervise_migrate_restart_delete(env):
    host, status, agent, url = env
    n = host.name
    client = OneSwitchClient(status["oneswitch"]["rest"])
    listen = status["oneswitch"]["listen"]

    code, vm = call(url, "POST", "/v1/vms", {"id": "web"})
    assert code == 201 and vm == {"id": "web", "vport": nm.vport_vm(0)}
    code, body = call(url, "POST", "/v1/nfs", {"type": "firewall", "id": "fw1", "config": FW_CONFIG,
                                               "expected": {"gbps": 0.5, "dst": "web"}})  # fmt: skip
    assert code == 201, body
    assert set(body) == {"id", "vport"}
    vport = body["vport"]
    agent_status = host.status()["agent"]  # `uno status --json` names the agent and what runs where
    assert agent_status["rest"] == url and agent_status["running"] and "fw1" in agent_status["nfs"]
    inst = instance(host, "fw1")
    assert inst["netns"] in netns_list() and pid_alive(inst["pid"])
    mapping = {p.vport: (p.switch, p.port) for p in client.ports()}
    assert mapping[vport] == (inst["switch"], inst["ofport"])
    first_loc = inst["location"]
    assert first_loc == "snic0"  # a light firewall costs no host CPU on the sNIC (r_nic load fits)
    assert CpuCgroup(nm.cgroup_snic(n, 0)).pids().count(inst["pid"]) == 1

    # The controller's rules on the ONE virtual switch: VM <-> firewall <-> wire (one-arm NF: by source MAC).
    vm_mac, out_mac = nm.mac(1, 0, 0), nm.mac(2, 0, 0)
    eth = nm.vport_eth(0, 0)
    flows = [
        f"in_port={vm['vport']},actions=output:{vport}",
        f"in_port={eth},actions=output:{vport}",
        f"in_port={vport},dl_src={vm_mac},actions=output:{eth}",
        f"in_port={vport},dl_src={out_mac},actions=output:{vm['vport']}",
    ]
    for f in flows:
        ofctl(status, "add-flow", listen, f)
    vm_ns, out_ip = nm.ns_vm(n, 0), nm.ip_outside(0, 0)
    assert wait(lambda: ping(vm_ns, out_ip, count=2), 30, "ping through the firewall on the sNIC")

    # monitoring: the NF port's counters appear as the chain's edges and the NF's load
    def measured():
        m = call(url, "GET", "/v1/placement")[1]["measured"]
        return m if m and m["nf_load_gbps"].get("fw1", 0) > 0 else None

    ping(vm_ns, out_ip, count=5)
    m = wait(measured, 30, "measured NF load")
    assert {e["src"] for e in m["edges"] if e["dst"] == "fw1"} == {"snic0-eth0"}
    assert {e["dst"] for e in m["edges"] if e["src"] == "fw1"} == {"web"}
    # VM (host) -> firewall (sNIC) -> wire: the VM's traffic crosses the PCIe link host -> sNIC
    assert m["pcie_gbps"]["snic0"]["down"] > 0
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        metrics = r.read().decode()
    assert 'uno_agent_nf_healthy{nf="fw1"} 1.0' in metrics and "uno_agent_measured_pcie_gbps" in metrics

    # supervisor: kill -9 the NF, it comes back (same namespace and port) and traffic passes again
    os.kill(inst["pid"], signal.SIGKILL)
    wait(
        lambda: instance(host, "fw1")["restarts"] == 1 and instance(host, "fw1")["state"] == "running",
        60,
        "restart",
    )
    assert wait(lambda: ping(vm_ns, out_ip, count=2), 30, "ping after restart")

    # migrate to the host and back under a 50/s ping stream: new instance, remapped port, old namespace gone,
    # no packet lost
    for target in ("host", "snic0"):
        old = instance(host, "fw1")
        # a fixed count (5 s at 50/s) so that ping waits for every reply: no in-flight packet counted as lost
        pinger = subprocess.Popen(["ip", "netns", "exec", vm_ns, "ping", "-q", "-i", "0.02", "-c", "250",
                                   "-W", "2", out_ip], stdout=subprocess.PIPE, text=True)  # fmt: skip
        time.sleep(0.5)
        code, res = call(url, "POST", "/v1/nfs/fw1/migrate", {"to": target})
        out = pinger.communicate(timeout=60)[0]
        # Make-before-break + drain. Measured: 0 lost in most migrations, 1 of 250 in about 1 of 8 (not yet
        # attributed between OneSwitch's remap and the NF's first batches); more than 1 is a regression.
        received = int(out.split(" received")[0].rsplit(" ", 1)[1])
        assert received >= 249, f"migrating to {target}: {out}"
        assert code == 200 and res["moved"] is True, res
        new = instance(host, "fw1")
        assert new["location"] == target and new["netns"] != old["netns"]
        assert gone(host, old) and not pid_alive(old["pid"])
        assert {p.vport: (p.switch, p.port) for p in client.ports()}[vport] == (new["switch"], new["ofport"])
        assert wait(lambda: ping(vm_ns, out_ip, count=2), 30, f"ping after migrating to {target}")

    # agent restart: the running NF is adopted, not restarted; traffic is not disturbed
    pid = instance(host, "fw1")["pid"]
    pinger = subprocess.Popen(["ip", "netns", "exec", vm_ns, "ping", "-q", "-i", "0.05", "-w", "60", "-c", "120",
                               out_ip], stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        time.sleep(0.5)
        agent.stop()
        assert pid_alive(pid)
        url = agent.start()
        assert instance(host, "fw1")["pid"] == pid
    finally:
        out = pinger.communicate(timeout=90)[0]
    assert " 0% packet loss" in out, out  # the restart did not disturb traffic
    code, nf = call(url, "GET", "/v1/nfs/fw1")
    assert code == 200 and nf["instances"][0]["state"] == "running"

    # the agent killed (-9) and its NF dying meanwhile: the next agent restarts the NF in place (its namespace and
    # port; before, it unplugged and re-plugged it, and a warm slot made meanwhile could take the port: "asked
    # for OpenFlow port 700, OVS gave 2", then the NF stayed failed)
    before = instance(host, "fw1")
    agent.proc.kill()
    agent.proc.wait()
    os.kill(before["pid"], signal.SIGKILL)
    url = agent.start()
    after = instance(host, "fw1")
    assert after["state"] == "running" and after["pid"] != before["pid"] and pid_alive(after["pid"])
    assert (after["netns"], after["ofport"]) == (before["netns"], before["ofport"])
    assert {p.vport: (p.switch, p.port) for p in client.ports()}[vport] == (after["switch"], after["ofport"])
    assert wait(lambda: ping(vm_ns, out_ip, count=2), 30, "ping after the agent and the NF were killed")

    # DELETE: process, namespace, bridge port, mapping all gone
    last = instance(host, "fw1")
    code, _ = call(url, "DELETE", "/v1/nfs/fw1")
    assert code == 200
    assert not pid_alive(last["pid"]) and gone(host, last)
    assert vport not in {p.vport for p in client.ports()}
    switches = host.switches()
    try:
        assert last["port_if"] not in switches[last["switch"]].driver.ports()
    finally:
        for sw in switches.values():
            sw.close()
    assert call(url, "GET", "/v1/nfs")[1] == []
    assert not any(ns.startswith(f"{n}-i") for ns in netns_list())


def test_traffic_shift_triggers_replacement(env, tmp_path):
    """A firewall placed on the sNIC while idle; real traffic then overloads the sNIC under the (test) profile,
    and POST /v1/placement/run moves it to the host, as the solver predicted; traffic keeps flowing."""
    host, status, agent, url = env
    n = host.name
    profiles = tmp_path / "profiles.json"
    # 100000 sNIC units per Gbit/s: a few Mbit/s of ping overload the 36-unit sNIC (the host costs 0.05/Gbit/s)
    profiles.write_text(json.dumps({"firewall": {"r_host": 0.05, "r_nic": 100000}}))
    agent.stop()
    url = agent.start("--profiles", str(profiles), "--dampening", "0")
    env_url = url
    if call(env_url, "GET", "/v1/vms/web")[0] == 404:
        assert call(env_url, "POST", "/v1/vms", {"id": "web"})[0] == 201
    code, body = call(env_url, "POST", "/v1/nfs", {"type": "firewall", "id": "fw2", "config": FW_CONFIG,
                                                   "expected": {"gbps": 0, "dst": "web"},
                                                   "hints": {"prefer": "snic0"}})  # fmt: skip
    assert code == 201, body
    vport = body["vport"]
    assert instance(host, "fw2")["location"] == "snic0"
    listen = status["oneswitch"]["listen"]
    vm_mac, out_mac, eth, vmp = nm.mac(1, 0, 0), nm.mac(2, 0, 0), nm.vport_eth(0, 0), nm.vport_vm(0)
    ofctl(status, "del-flows", listen)
    for f in (f"in_port={vmp},actions=output:{vport}", f"in_port={eth},actions=output:{vport}",
              f"in_port={vport},dl_src={vm_mac},actions=output:{eth}",
              f"in_port={vport},dl_src={out_mac},actions=output:{vmp}"):  # fmt: skip
        ofctl(status, "add-flow", listen, f)
    vm_ns, out_ip = nm.ns_vm(n, 0), nm.ip_outside(0, 0)
    assert wait(lambda: ping(vm_ns, out_ip, count=2), 30, "ping through fw2")
    # nothing to do while idle
    code, d = call(env_url, "POST", "/v1/placement/run", {})
    assert code == 200 and d["go"] is False, d
    # traffic shift: ~5 Mbit/s each way for a few seconds
    flood = subprocess.Popen(["ip", "netns", "exec", vm_ns, "ping", "-q", "-i", "0.002", "-s", "1200", "-w", "8",
                              out_ip], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:

        def loaded():
            m = call(env_url, "GET", "/v1/placement")[1]
            return m if (m["predicted"] or {}).get("violations") else None

        view = wait(loaded, 30, "measured load to overload the sNIC in the model")
        assert any("capacity of snic0" in v for v in view["predicted"]["violations"])
        code, d = call(env_url, "POST", "/v1/placement/run", {})
        assert code == 200 and d["go"] is True, d
        assert [{k: m[k] for k in ("id", "from", "to")} for m in d["moves"]] == [
            {"id": "fw2", "from": "snic0", "to": "host"}
        ]
        steps = [s["step"] for s in d["moves"][0]["migration"]["steps"]]  # the move's step times come back
        # a held move (every NF type now): the new instance's packets wait until the old one drained, then resume
        assert steps == [
            "start",
            "ready",
            "prepare",
            "remap",
            "verify",
            "drain",
            "resume",
            "stop",
            "release",
        ], d["moves"]
        assert d["solve"]["placement"]["fw2"] == "host"
    finally:
        flood.wait(timeout=30)
    inst = instance(host, "fw2")
    assert inst["location"] == "host" and pid_alive(inst["pid"])
    assert wait(lambda: ping(vm_ns, out_ip, count=2), 30, "ping after the re-placement")
    hist = [h["event"] for h in call(env_url, "GET", "/v1/placement")[1]["history"]]
    assert "nf-migrate" in hist and hist[-1] == "placement-run"
    assert call(env_url, "DELETE", "/v1/nfs/fw2")[0] == 200


def test_declared_chain_predicts_the_pcie_use_measured(env):
    """VM web -> fw-a (sNIC) -> fw-b (host) -> wire, declared with PATCH: under a TCP stream the agent's
    model has it cross PCIe down twice (web -> fw-a, fw-b -> wire) and up once (fw-a -> fw-b), as the link's
    counters measure; deleting fw-a splices it out of fw-b's chain."""
    host, status, agent, _ = env
    n = host.name
    url = agent_endpoint.status_entry(host.rundir)["rest"]  # the tests before may have restarted the agent
    if call(url, "GET", "/v1/vms/web")[0] == 404:
        assert call(url, "POST", "/v1/vms", {"id": "web"})[0] == 201
    any_fw = {"rules": [{"action": "allow", "proto": "any", "src": "any", "dst": "any"}], "default": "deny"}
    vports = {}
    procs: list[subprocess.Popen] = []
    try:
        for nf, pin in (("fw-a", "snic0"), ("fw-b", "host")):
            code, body = call(
                url, "POST", "/v1/nfs", {"type": "firewall", "id": nf, "config": any_fw, "pin": pin}
            )
            assert code == 201, body
            vports[nf] = body["vport"]
        for nf, src, dst in chain_links(["web", "fw-a", "fw-b", "snic0-eth0"]):
            code, body = call(url, "PATCH", f"/v1/nfs/{nf}", {"expected": {"src": src, "dst": dst}})
            assert code == 200 and body["expected"] == {"gbps": 0.0, "src": src, "dst": dst}, body
        install_chain(status, Chain(nm.vport_vm(0), nm.mac(1, 0, 0), nm.vport_eth(0, 0), nm.mac(2, 0, 0),
                                    (vports["fw-a"], vports["fw-b"])))  # fmt: skip
        vm_ns, out_ns, out_ip = nm.ns_vm(n, 0), nm.ns_outside(n, 0, 0), nm.ip_outside(0, 0)
        assert wait(lambda: ping(vm_ns, out_ip, count=2), 30, "ping through fw-a and fw-b")
        procs += iperf3(out_ns, vm_ns, out_ip, 5401, "-b", "40M", "-t", "10")
        view = wait_pcie(url, "the stream on the PCIe link")
        assert {(e["src"], e["dst"]) for e in view["traffic"]} == {
            ("web", "fw-a"),
            ("fw-a", "fw-b"),
            ("fw-b", "snic0-eth0"),
        }
        m, p = view["measured"]["pcie_gbps"]["snic0"], crossings(view, "snic0")
        tolerance = 0.1 * (m["down"] + m["up"]) + 0.001  # Gbit/s; the ACKs, on the stream's side in the model
        assert abs(p["down"] - m["down"]) <= tolerance and abs(p["up"] - m["up"]) <= tolerance, (m, p)
        assert m["down"] > 1.5 * m["up"] > 0  # two crossings down, one up
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    assert call(url, "DELETE", "/v1/nfs/fw-a")[0] == 200
    assert call(url, "GET", "/v1/nfs/fw-b")[1]["expected"]["src"] == "web"
    assert call(url, "DELETE", "/v1/nfs/fw-b")[0] == 200


def test_an_nf_config_the_nf_refuses_is_400_naming_config_and_leaves_nothing(env):
    # the NF validates its own config (exit 2, `nf: config: FIELD: ...`): that is the caller's input, a 400
    # naming `config` with the NF's reason, not a 500 "NF process exited"
    host = env[0]
    url = agent_endpoint.status_entry(host.rundir)["rest"]  # the tests before may have restarted the agent
    slots = host.rundir / "agent" / "slots"
    snic = host.snic_agents()["snic0"]
    snic0 = SnicAgentClient("snic0", snic.agent, snic.token)
    wait(lambda: len(list(slots.glob("*.json"))) == 1 and [p for p in snic0.ports() if p["kind"] == "slot"], 30,
         "the warm slots (host, snic0) built")  # fmt: skip

    def own_netns() -> list[str]:  # a refilled slot gets a new number: `NAME-wK` counts as `NAME-w`
        return sorted(re.sub(r"-w\d+$", "-w", ns) for ns in netns_list() if ns.startswith(f"{host.name}-"))

    before = own_netns()
    code, body = call(url, "POST", "/v1/nfs", {"type": "nat", "id": "badnat", "config": {"inside": []}})
    assert code == 400, body
    assert body["field"] == "config" and "inside" in body["error"], body
    assert "badnat" not in agent_state(host)["nfs"]
    assert not [p for p in Path("/proc").glob("[0-9]*") if b"badnat" in _cmdline(p)]
    wait(lambda: own_netns() == before, 10, f"the warm slot refilled, nothing else left: {before}")
    # a config the NF accepts still starts
    code, body = call(
        url,
        "POST",
        "/v1/nfs",
        {
            "type": "nat",
            "id": "goodnat",
            "config": {"inside": ["10.77.0.0/16"], "public_ips": ["198.51.100.1"]},
        },
    )
    assert code == 201, body
    assert call(url, "DELETE", "/v1/nfs/goodnat")[0] == 200


def _cmdline(proc_dir: Path) -> bytes:
    try:
        return (proc_dir / "cmdline").read_bytes()
    except OSError:
        return b""


def test_a_dead_state_tier_is_reported_and_the_nf_recovers_when_it_is_back(env):
    # before: /v1/health stayed 200 "healthy" while Redis was dead and every stateless NF dropped all
    # traffic (fail closed); only the NFs' own /stats showed it
    host, status, _, _ = env
    url = agent_endpoint.status_entry(host.rundir)["rest"]  # the tests before may have restarted the agent
    code, body = call(url, "POST", "/v1/nfs", {"type": "firewall", "id": "fwt", "config": FW_CONFIG})
    assert code == 201, body
    vport, listen = body["vport"], status["oneswitch"]["listen"]
    vm_port, eth, vm_mac, out_mac = nm.vport_vm(0), nm.vport_eth(0, 0), nm.mac(1, 0, 0), nm.mac(2, 0, 0)
    for f in (f"in_port={vm_port},actions=output:{vport}", f"in_port={eth},actions=output:{vport}",
              f"in_port={vport},dl_src={vm_mac},actions=output:{eth}",
              f"in_port={vport},dl_src={out_mac},actions=output:{vm_port}"):  # fmt: skip
        ofctl(status, "add-flow", listen, f)
    vm_ns, out_ip = nm.ns_vm(host.name, 0), nm.ip_outside(0, 0)
    try:
        assert wait(lambda: ping(vm_ns, out_ip, count=2), 30, "ping through the firewall")
        code, h = call(url, "GET", "/v1/health")
        assert code == 200 and h["store"] == "ok" and h["nfs"]["fwt"] == "healthy", h

        os.kill(host.status()["redis"]["pid"], signal.SIGKILL)
        code, h = wait(lambda: (r := call(url, "GET", "/v1/health"))[0] == 503 and r, 10, "health to see it")
        assert h["ok"] is False and h["store"] == "unreachable", h
        assert h["nfs"]["fwt"] == "degraded: state tier unreachable", h
        assert not ping(vm_ns, out_ip, count=2)  # fail closed: the firewall cannot look its state up
        assert "store-down" in [e["event"] for e in call(url, "GET", "/v1/placement")[1]["history"]]

        host.up()  # restarts Redis alone (empty); the NF reconnects by itself
        code, h = wait(lambda: (r := call(url, "GET", "/v1/health"))[0] == 200 and r, 30, "health back")
        assert h["ok"] and h["store"] == "ok" and h["nfs"]["fwt"] == "healthy", h
        assert wait(lambda: ping(vm_ns, out_ip, count=2), 30, "ping once the tier is back")
        assert "store-up" in [e["event"] for e in call(url, "GET", "/v1/placement")[1]["history"]]

        # an operator's restart (how a `failed` NF is revived): a new process in place, traffic passes
        before = instance(host, "fwt")
        code, body = call(url, "POST", "/v1/nfs/fwt/restart", {})
        assert code == 200 and body == {"id": "fwt", "restarted": [before["id"]]}, body
        after = instance(host, "fwt")
        assert after["pid"] != before["pid"] and pid_alive(after["pid"]) and not pid_alive(before["pid"])
        assert (after["netns"], after["ofport"], after["state"]) == (
            before["netns"],
            before["ofport"],
            "running",
        )
        assert wait(lambda: ping(vm_ns, out_ip, count=2), 30, "ping after the restart")
    finally:
        ofctl(status, "del-flows", listen)
        call(url, "DELETE", "/v1/nfs/fwt")


def test_uno_down_stops_the_agent_before_its_nfs_so_no_failover_is_tried(tmp_path):
    # before: the agent noticed `uno down` only once the rundir was gone; its failover watchdog meanwhile saw
    # the NFs die and tried to replace them on switches already down (each try waiting out OVSDB timeouts:
    # the agent took 17-18 s to exit)
    with agent_host(tmp_path, agent_args=("--failover-interval", "50")) as (host, _, agent, url):
        assert call(url, "POST", "/v1/nfs", {"type": "firewall", "id": "fwd", "config": FW_CONFIG})[0] == 201
        pid = agent.proc.pid
        host.down()
        assert not pid_alive(pid) and agent.wait_exit(1)
        log = (tmp_path / "agent.log").read_text()
        assert "failover" not in log, log[-2000:]
