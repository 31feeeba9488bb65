"""The emulated host with its host switch on OVS-DPDK (`host.switch.dpdk`), end to end (root): `uno up` starts
ovs-vswitchd-dpdk with hugetlbfs mounted and one PMD thread, the VM, the PCIe link (tbf kept) and the NF ports
are DPDK af_packet vdevs; OneSwitch and `uno agent serve` run on it as on the plain switch. A firewall placed
on the host carries ping and HTTP VM -> firewall -> wire, moves to the sNIC and back under a ping stream, and
`uno down` gives the hugepages back and leaves no mount. Short: the PMD thread holds a whole CPU meanwhile."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from emulated_host import naming as nm
from emulated_host.host import ping
from host_datapath.hugepages import SYSFS_2M
from host_datapath.oneswitch_client import OneSwitchClient
from host_datapath.sysutil import pid_alive, wait_for
from nf_agent.client import call
from testkit.agent_host import AGENT_E2E, agent_host, instance, ofctl
from testkit.instances import gone
from testkit.poll import wait
from testkit.switch_testbed import dpdk_missing
from testkit.traffic import http_get, serve_http

pytestmark = [*AGENT_E2E, pytest.mark.skipif(bool(dpdk_missing()), reason=dpdk_missing() or "")]

HUGEPAGES_MB = 256
FW = {
    "rules": [
        {"action": "allow", "proto": "icmp", "src": "any", "dst": "any"},
        {
            "action": "allow",
            "proto": "tcp",
            "src": f"{nm.ip_vm(0)}/32",
            "dst": "any",
            "dst_port": "8000-8000",
        },
    ],
    "default": "deny",
}


def hugepages() -> int:
    return int((SYSFS_2M / "nr_hugepages").read_text())


def hugetlb_mounts(under: Path) -> list[str]:
    return [m for m in Path("/proc/mounts").read_text().splitlines() if m.split()[1].startswith(str(under))]


def test_nf_on_a_dpdk_host_switch_ping_http_and_moves(tmp_path):
    before = hugepages()
    host_cfg = {"switch": {"datapath_type": "netdev", "dpdk": {"hugepages_mb": HUGEPAGES_MB}}}
    rundir = None
    www = tmp_path / "www"
    www.mkdir()
    (www / "hello.txt").write_text("hello from the wire\n")
    blob = os.urandom(1 << 20)
    (www / "blob").write_bytes(blob)
    server = None
    try:
        with agent_host(tmp_path, host_cfg=host_cfg) as (host, status, _agent, url):
            rundir = host.rundir
            n = host.name
            sw = status["host"]
            # the host switch is OVS-DPDK: initialised, one PMD thread, its hugetlbfs mounted in its rundir
            assert sw["datapath"] == "dpdk" and sw["dpdk"]["initialized"], sw
            assert len(sw["dpdk"]["pmd_threads"]) == 1 and sw["dpdk"]["hugepages"]["mounted"]
            assert status["host"]["switch"]["dpdk"]["hugepages_mb"] == HUGEPAGES_MB
            assert hugetlb_mounts(rundir) and "hugetlbfs" in hugetlb_mounts(rundir)[0]
            assert hugepages() >= HUGEPAGES_MB // 2
            switches = host.switches()
            try:
                hsw = switches["host"]
                vm_port, pcie_port = nm.if_vm(n, 0)[1], nm.if_pcie(n, 0)[0]
                for port, bypass in ((vm_port, 1), (pcie_port, 0)):  # the PCIe link keeps its tbf
                    opts = hsw.driver.api.db_get("Interface", port, "options").execute(check_error=True)
                    assert opts["dpdk-devargs"].startswith(f"net_af_packet_{port},iface={port}"), opts
                    assert opts["dpdk-devargs"].endswith(f"qdisc_bypass={bypass}"), opts
            finally:
                for s in switches.values():
                    s.close()

            code, vm = call(url, "POST", "/v1/vms", {"id": "web"})
            assert code == 201
            code, body = call(url, "POST", "/v1/nfs", {"type": "firewall", "id": "fw1", "config": FW,
                                                       "hints": {"prefer": "host"}})  # fmt: skip
            assert code == 201, body
            vport = body["vport"]
            inst = instance(host, "fw1")
            assert inst["location"] == "host"
            switches = host.switches()
            try:  # the NF's port on the host switch is a DPDK port too
                opts = switches["host"].driver.api.db_get("Interface", inst["port_if"], "options")
                assert "net_af_packet" in opts.execute(check_error=True)["dpdk-devargs"]
            finally:
                for s in switches.values():
                    s.close()

            # the controller's rules on the one virtual switch: VM <-> firewall <-> wire (one-arm: by source MAC)
            listen = status["oneswitch"]["listen"]
            vm_mac, out_mac, eth = nm.mac(1, 0, 0), nm.mac(2, 0, 0), nm.vport_eth(0, 0)
            for f in (f"in_port={vm['vport']},actions=output:{vport}", f"in_port={eth},actions=output:{vport}",
                      f"in_port={vport},dl_src={vm_mac},actions=output:{eth}",
                      f"in_port={vport},dl_src={out_mac},actions=output:{vm['vport']}"):  # fmt: skip
                ofctl(status, "add-flow", listen, f)
            vm_ns, out_ns, out_ip = nm.ns_vm(n, 0), nm.ns_outside(n, 0, 0), nm.ip_outside(0, 0)
            assert wait(lambda: ping(vm_ns, out_ip, count=2), 30, "ping through the firewall on the host")
            server = serve_http(out_ns, out_ip, www, 8000, tmp_path / "http.log")
            page = f"http://{out_ip}:8000/hello.txt"
            assert http_get(vm_ns, page) == b"hello from the wire\n"
            assert http_get(vm_ns, f"http://{out_ip}:8000/blob") == blob  # full-size segments both ways
            # the firewall decides: the wire may not open a connection to the VM
            with pytest.raises(RuntimeError):
                http_get(out_ns, f"http://{nm.ip_vm(0)}:8000/", timeout=1.5)

            client = OneSwitchClient(status["oneswitch"]["rest"])
            for target in ("snic0", "host"):
                old = instance(host, "fw1")
                pinger = subprocess.Popen(["ip", "netns", "exec", vm_ns, "ping", "-q", "-i", "0.02", "-c", "150",
                                           "-W", "2", out_ip], stdout=subprocess.PIPE, text=True)  # fmt: skip
                time.sleep(0.5)
                code, res = call(url, "POST", "/v1/nfs/fw1/migrate", {"to": target})
                out = pinger.communicate(timeout=60)[0]
                assert code == 200 and res["moved"] is True, res
                received = int(out.split(" received")[0].rsplit(" ", 1)[1])
                # make-before-break: as on the plain switch (test_lifecycle), at most one in-flight echo lost
                assert received >= 149, f"moving to {target}: {out}"
                new = instance(host, "fw1")
                assert new["location"] == target and gone(host, old) and not pid_alive(old["pid"])
                assert {p.vport: (p.switch, p.port) for p in client.ports()}[vport] == (
                    new["switch"],
                    new["ofport"],
                )
                assert http_get(vm_ns, page) == b"hello from the wire\n"
            assert call(url, "DELETE", "/v1/nfs/fw1")[0] == 200
    finally:
        if server is not None:
            server.kill()
            server.wait()
    # `uno down` (agent_host's exit, which also checked nothing of the host is left) gave the pages back
    wait_for(lambda: hugepages() == before, 10, f"nr_hugepages back to {before}", error=AssertionError)
    assert rundir is None or not hugetlb_mounts(rundir)
