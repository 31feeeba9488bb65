"""An "emulated BlueField" is a placement target like an emulated sNIC (root, real OVS, OneSwitch, NFs).

The DPU is a separate machine reached over TCP only: its own namespace and OVS, its sNIC agent on its
management address, its ports named as on a BlueField (`p0` the uplink, `pf0hpf` the host representor). The
host's config names it `backend: bluefield` with its agent, the agent's token file and the host's address on
the management network. `uno up` finds the DPU's layout through its agent (no port numbers given), the
agent's runtime places an NF there through the DPU's agent, traffic VM -> NF on the DPU -> the DPU's wire
passes, and the PCIe load is measured on the DPU's host representor.

The DPU's bridge is the operator's (OneSwitch's config says `shared`): flows the operator put there before
OneSwitch connected are still there, unchanged, after OneSwitch connected and reconciled, and after OneSwitch
restarted (whose reconcile deletes the previous run's flows, by their marked cookies)."""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest

from domain.model import HOST
from emulated_host import agent_endpoint
from emulated_host import naming as nm
from emulated_host.config import parse_config
from emulated_host.host import EmulatedHost, MgmtLinks
from emulated_host.oneswitch import jar_missing_reason
from emulated_host.snic_machine import AgentSpec, EmulatedSnic, MgmtLink
from host_datapath.sysutil import free_port, netns_del, quiet_switch_port, veth_pair
from nf_agent.graph import SnicInfo
from nf_agent.service import Agent, AgentConfig
from nf_agent.validation import NfRequest, VmRequest
from nf_runtime.portmap import OneSwitchPortMapper
from nf_runtime.runtime import NF_BINARY, HostRuntime
from placement.profiles import load_profiles
from testkit.hosts import EMPTY, machine_snapshot, needs_root, unique_name
from testkit.poll import wait

pytestmark = [
    pytest.mark.root,
    needs_root,
    pytest.mark.skipif(bool(jar_missing_reason()), reason=jar_missing_reason() or ""),
    pytest.mark.skipif(not NF_BINARY.exists(), reason="nfs not built (setup.sh rust)"),
]
TOKEN = "emulated-bluefield-token-0123"


def _free_mgmt() -> tuple[str, str]:
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    j = int(time.time() * 1000) % 16000
    while any(a in used for a in nm.mgmt_addresses(j)):
        j += 1
    return nm.mgmt_addresses(j)


# The operator's own flows on the DPU's bridge, none of which UNO's traffic meets: in table 0 below OneSwitch's
# dispatch and only for the bridge's LOCAL port (which UNO never maps), and in table 253, which OneSwitch never
# uses (with physical_tables 254, OVS's: table 0 is its dispatch, 1..252 the controller's tables, 253 is kept
# free; OVS's own table 254 takes no flow). One has cookie 0, as a hand-made flow does.
OPERATOR_FLOWS = (
    "table=0,priority=1,cookie=0x1234,arp,in_port=LOCAL,actions=NORMAL",
    "table=0,priority=2,cookie=0,ip,in_port=LOCAL,actions=drop",
    "table=253,priority=10,cookie=0x4321,ip,actions=drop",
)


def _marked(cookie: int) -> bool:
    return cookie >> 56 == 0x55  # OneSwitch's flows (oneswitch/README.md "Shared switches")


def operator_flows(dpu: EmulatedSnic) -> set[tuple]:
    """The flows on the DPU's bridge that are not OneSwitch's: (table, priority, cookie, match, actions)."""
    return {(f.table, f.priority, f.cookie, f.match, f.actions) for f in dpu.driver.flow_stats()
            if not _marked(f.cookie)}  # fmt: skip


def reconciled(host: EmulatedHost, times: int) -> bool:
    """OneSwitch has reconciled the DPU's switch `times` times (its log; one log across restarts)."""
    log = host.oneswitch().logfile.read_text(errors="replace")  # type: ignore[union-attr]
    return len(re.findall(r"switch snic0( \(shared\))?: reconciled", log)) >= times


def ping(ns: str, ip: str, count: int = 1) -> bool:
    return subprocess.run(["ip", "netns", "exec", ns, "ping", "-c", str(count), "-i", "0.2", "-W", "1", ip],
                          capture_output=True, timeout=30).returncode == 0  # fmt: skip


def test_an_emulated_bluefield_is_a_placement_target(tmp_path):
    d = unique_name()
    host_ip, dpu_ip = _free_mgmt()
    link = MgmtLink(f"{d}-m0h", f"{d}-m0s", host_ip, dpu_ip)
    mgmt = MgmtLinks(d, {0: link})  # the DPU's management network (its namespace is `d-snic0`)
    dpu = EmulatedSnic(
        netns=nm.ns_snic(d, 0), rundir=tmp_path / "dpu", bridge=f"{d}-bf", cgroup_name=f"uno-{d}-snic0",
        ovsdb_tcp_port=free_port(), mgmt=link, token=TOKEN,
        agent=AgentSpec(snic="snic0", prefix=f"{d}-x", warm_slots=0),  # its layout: found by name
    )  # fmt: skip
    wire_ns, host, runtime = f"{d}-wire", None, None
    token_file = tmp_path / "dpu.token"
    token_file.write_text(TOKEN)
    try:
        mgmt.up()
        dpu.up()
        dpu.attach_namespace(wire_ns, f"{d}-w", "p0", 5, ip_cidr=f"{nm.ip_outside(0, 0)}/16")  # the uplink
        subprocess.run(["ip", "-n", wire_ns, "link", "set", f"{d}-w", "address", nm.mac(2, 0, 0)], check=True)
        name = unique_name()
        host_ns = nm.ns_host(name)
        h_if = f"{name}-ph"
        veth_pair(
            h_if, dpu.netns, "pf0hpf", dpu.netns
        )  # the "PCIe" cable; its host end moves over after `up`
        quiet_switch_port("pf0hpf", dpu.netns)
        dpu.driver.add_port("pf0hpf", 42)  # the host representor: a port number UNO is not told
        dpu.driver.add_flows(list(OPERATOR_FLOWS))  # the operator's, before OneSwitch ever connects
        theirs = operator_flows(dpu)
        assert {(t, c) for t, _, c, _, _ in theirs} == {(0, 0x1234), (0, 0), (253, 0x4321)}, theirs
        host = EmulatedHost(parse_config({
            "name": name, "rundir": "/run/uno-test", "vms": 1,
            "snics": [{"backend": "bluefield", "ovsdb": f"tcp:127.0.0.1:{dpu.ovsdb_tcp_port}",
                       "openflow": dpu.openflow_target(), "bridge": dpu.bridge, "datapath_type": "netdev",
                       "agent": dpu.agent_url(), "agent_token_file": str(token_file), "host_address": host_ip}],
        }))  # fmt: skip
        status = host.up()
        conf = json.loads((host.rundir / "oneswitch" / "config.json").read_text())
        assert conf["pcie"] == [{"snic": "snic0", "host_port": 1, "snic_port": 42}], conf["pcie"]
        assert [s.get("shared", False) for s in conf["switches"]] == [False, True], conf["switches"]
        assert wait(lambda: reconciled(host, 1), 30, "OneSwitch to reconcile the DPU's switch")
        flows = dpu.driver.flow_stats()
        assert operator_flows(dpu) == theirs  # the operator's flows: there, unchanged
        assert any(_marked(f.cookie) and f.table == 0 and "in_port=5" in f.match for f in flows), flows
        assert {(p["vport"], p["switch"], p["port"]) for p in status["oneswitch"]["ports"]} >= {
            (1, "snic0", 5)
        }
        subprocess.run(["ip", "-n", dpu.netns, "link", "set", h_if, "netns", host_ns], check=True, timeout=10)
        subprocess.run(["ip", "-n", host_ns, "link", "set", h_if, "up"], check=True, timeout=10)
        quiet_switch_port(h_if, host_ns)
        sw = host.host_switch()
        sw.driver.add_port(h_if, nm.HOST_PCIE_OFPORT_BASE)
        sw.close()

        adir = agent_endpoint.agent_dir(host.rundir)
        adir.mkdir(parents=True, exist_ok=True)
        runtime = HostRuntime(
            host, adir, status["redis"]["port"], redis_socket=status["redis"]["unix_socket"]
        )
        runtime.open()
        assert runtime.locations() == [HOST, "snic0"] and runtime.pcie_ports() == {}
        assert runtime.pcie_snic_ports() == {"snic0": "pf0hpf"}
        cfg = AgentConfig(snics=[SnicInfo("snic0", 36.0, 40.0, 1)], vm_slots=1, profiles=load_profiles())
        agent = Agent(cfg, runtime, OneSwitchPortMapper(host.oneswitch().client()), adir / "state.json")
        agent.create_vm(VmRequest(id="web"))
        fw = {"rules": [{"action": "allow", "proto": "icmp", "src": "any", "dst": "any"}], "default": "deny"}
        nf = agent.create_nf(NfRequest("fw", "firewall", fw, 0.1, None, "web", "snic0", None))
        inst = nf.instances[0]
        assert nf.location == "snic0" and inst.port_if.startswith(f"{d}-x")  # the DPU's agent made it
        assert (
            runtime.alive(inst)
            and runtime.remote["snic0"].store == f"redis://{host_ip}:{status['redis']['port']}"
        )
        vm, out_mac, vm_mac = nm.vport_vm(0), nm.mac(2, 0, 0), nm.mac(1, 0, 0)
        listen = status["oneswitch"]["listen"]
        rules = (f"in_port={vm},actions=output:{nf.vport}\nin_port=1,actions=output:{nf.vport}\n"
                 f"in_port={nf.vport},dl_src={vm_mac},actions=output:1\n"
                 f"in_port={nf.vport},dl_src={out_mac},actions=output:{vm}\n")  # fmt: skip
        subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-flows", listen, "-"], input=rules, text=True,
                       check=True, capture_output=True, timeout=30)  # fmt: skip
        assert wait(
            lambda: ping(nm.ns_vm(name, 0), nm.ip_outside(0, 0)), 30, "ping through the NF on the DPU"
        )
        agent.sample()
        time.sleep(1.0)
        ping(nm.ns_vm(name, 0), nm.ip_outside(0, 0), count=5)
        m = agent.sample()
        assert m.pcie["snic0"]["down"] > 0 and m.pcie["snic0"]["up"] > 0  # measured on the representor

        # OneSwitch restarts: a new run (new cookies) reconnects and reconciles the DPU's switch. Its previous
        # run's flows are deleted (marked cookies), the operator's stay, and the traffic passes again.
        old_runs = {f.cookie >> 32 for f in dpu.driver.flow_stats() if _marked(f.cookie)}
        osw = host.oneswitch()
        assert osw is not None
        osw.down()
        osw.up()
        assert wait(lambda: reconciled(host, 2), 30, "OneSwitch to reconcile the DPU's switch again")
        assert wait(
            lambda: not {f.cookie >> 32 for f in dpu.driver.flow_stats() if _marked(f.cookie)} & old_runs,
            10, "the previous run's flows to be deleted",
        )  # fmt: skip
        assert operator_flows(dpu) == theirs
        assert wait(
            lambda: ping(nm.ns_vm(name, 0), nm.ip_outside(0, 0)), 30, "ping after OneSwitch's restart"
        )
        agent.delete_nf("fw")
        assert operator_flows(dpu) == theirs
    finally:
        try:
            if runtime is not None:
                runtime.close()
            if host is not None:
                host.down()
                assert machine_snapshot(host.name) == EMPTY
        finally:
            dpu.down()
            mgmt.down()
            for ns in (wire_ns, dpu.netns):
                netns_del(ns)
    assert not [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
                if n.startswith(f"{d}-")]  # fmt: skip
