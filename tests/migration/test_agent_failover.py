"""`uno agent serve --failover-interval 30` (a process, real host, OneSwitch, firewall NF): a kill -9 of the NF
is handled by the watchdog: a new instance, the vport remapped to it, the old namespace released, traffic
through the NF again (instead of the default restart in place)."""

from __future__ import annotations

import os
import signal
import urllib.request

import pytest

from emulated_host import naming as nm
from emulated_host.host import ping
from emulated_host.oneswitch import jar_missing_reason
from host_datapath.oneswitch_client import OneSwitchClient
from host_datapath.sysutil import netns_list
from nf_agent.client import call
from nf_runtime.runtime import NF_BINARY
from testkit.agent_host import FW_CONFIG, AgentProc, agent_state, instance, ofctl
from testkit.hosts import EMPTY, machine_snapshot, make_host, needs_root
from testkit.poll import wait

pytestmark = [
    pytest.mark.root,
    needs_root,
    pytest.mark.skipif(bool(jar_missing_reason()), reason=jar_missing_reason() or ""),
    pytest.mark.skipif(not NF_BINARY.exists(), reason=f"{NF_BINARY} not built (scripts/setup.sh rust)"),
]


def test_agent_watchdog_fails_over_a_killed_nf(tmp_path):
    host = make_host(vms=1, oneswitch={"enabled": True})
    cfg_file = tmp_path / "host.yaml"
    cfg_file.write_text(f"name: {host.name}\nrundir: /run/uno-test\nvms: 1\n")
    agent = AgentProc(cfg_file, host.rundir, tmp_path / "agent.log")
    try:
        status = host.up()
        url = agent.start("--failover-interval", "30")
        assert call(url, "POST", "/v1/vms", {"id": "web"})[0] == 201
        code, body = call(url, "POST", "/v1/nfs", {"type": "firewall", "id": "fw", "config": FW_CONFIG,
                                                   "expected": {"gbps": 0.1, "dst": "web"}, "pin": "host"})  # fmt: skip
        assert code == 201, body
        vport, listen = body["vport"], status["oneswitch"]["listen"]
        vm_mac, out_mac, eth, vmp = nm.mac(1, 0, 0), nm.mac(2, 0, 0), nm.vport_eth(0, 0), nm.vport_vm(0)
        for f in (f"in_port={vmp},actions=output:{vport}", f"in_port={eth},actions=output:{vport}",
                  f"in_port={vport},dl_src={vm_mac},actions=output:{eth}",
                  f"in_port={vport},dl_src={out_mac},actions=output:{vmp}"):  # fmt: skip
            ofctl(status, "add-flow", listen, f)
        vm_ns, out_ip = nm.ns_vm(host.name, 0), nm.ip_outside(0, 0)
        assert wait(lambda: ping(vm_ns, out_ip, count=2), 30, "ping through the firewall")
        old = instance(host, "fw")
        os.kill(old["pid"], signal.SIGKILL)
        new = wait(lambda: (i := instance(host, "fw"))["id"] != old["id"] and i, 60, "failover")
        assert new["restarts"] == 0 and new["netns"] != old["netns"]
        client = OneSwitchClient(status["oneswitch"]["rest"])
        assert {p.vport: (p.switch, p.port) for p in client.ports()}[vport] == (new["switch"], new["ofport"])
        assert old["netns"] not in netns_list()
        hist = agent_state(host)["history"]
        ev = next(h for h in reversed(hist) if h["event"] == "nf-failover")
        assert ev["failed"] == old["id"] and ev["reason"] == "dead"
        assert wait(lambda: ping(vm_ns, out_ip, count=2), 30, "ping after the failover")
        with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
            assert "uno_agent_nf_failovers_total 1.0" in r.read().decode()
        assert call(url, "DELETE", "/v1/nfs/fw")[0] == 200
    finally:
        host.down()
        agent.wait_exit(30)
        agent.stop()
        assert machine_snapshot(host.name) == EMPTY
