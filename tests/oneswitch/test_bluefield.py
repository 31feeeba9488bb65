"""A `bluefield` sNIC is handed to OneSwitch as a physical switch like an emulated one: `uno up` gives OneSwitch
the DPU bridge's own `tcp:HOST:PORT` OpenFlow listener, its PCIe port pair and its Ethernet ports as virtual
ports. The "DPU" here is an emulated sNIC's OVS (own namespace, OVSDB and OpenFlow on TCP), as the foundation
tests do; the host end of its PCIe link is plugged into the host switch as port 1 (hardware on a real host),
and vm0 pings a namespace on the DPU's wire port through rules written to OneSwitch only."""

from __future__ import annotations

import subprocess

from emulated_host import naming as nm
from emulated_host.config import parse_config
from emulated_host.host import EmulatedHost, free_port
from emulated_host.snic_machine import EmulatedSnic
from host_datapath.sysutil import netns_del, quiet_switch_port, veth_pair, wait_for
from testkit.hosts import EMPTY, machine_snapshot, unique_name
from testkit.oneswitch.pktio import ofctl13

from .conftest import ONESWITCH

pytestmark = ONESWITCH


def test_bluefield_snic_is_a_oneswitch_physical_switch(tmp_path):
    d = unique_name()
    dpu = EmulatedSnic(netns=f"{d}-dpu", rundir=tmp_path / "dpu", bridge=f"{d}-bf", cgroup_name=f"uno-{d}-dpu",
                       ovsdb_tcp_port=free_port())  # fmt: skip
    wire_ns = f"{d}-wire"
    host = None
    try:
        dpu.up()  # the DPU's own OVS and bridge, OpenFlow listener relayed to tcp:127.0.0.1:PORT
        dpu_openflow = dpu.endpoint.target()
        assert dpu_openflow and dpu_openflow.startswith("tcp:127.0.0.1:")
        dpu.attach_namespace(wire_ns, f"{d}-w", f"{d}-ws", 1, ip_cidr=f"{nm.ip_outside(0, 0)}/16")
        host = EmulatedHost(
            parse_config(
                {
                    "name": unique_name(),
                    "rundir": "/run/uno-test",
                    "vms": 1,
                    "snics": [
                        {
                            "backend": "bluefield",
                            "ovsdb": f"tcp:127.0.0.1:{dpu.ovsdb_tcp_port}",
                            "openflow": dpu_openflow,
                            "bridge": dpu.bridge,
                            "datapath_type": "netdev",
                        }
                    ],
                }
            )
        )
        status = host.up()
        o = status["oneswitch"]
        assert o["switches"] == {"host": "connected", "snic0": "connected"}
        assert {(p["vport"], p["switch"], p["port"]) for p in o["ports"]} == {
            (1, "snic0", 1),
            (100, "host", 100),
        }
        # The PCIe link: host switch port 1 <-> DPU bridge port 100 (hardware on a real host).
        h_if, s_if = f"{host.name}-ph", f"{d}-pd"
        veth_pair(h_if, nm.ns_host(host.name), s_if, dpu.netns)
        quiet_switch_port(h_if, nm.ns_host(host.name))
        quiet_switch_port(s_if, dpu.netns)
        sw = host.switches()
        try:
            sw["host"].driver.add_port(h_if, nm.HOST_PCIE_OFPORT_BASE)
        finally:
            for s in sw.values():
                s.close()
        dpu.driver.add_port(s_if, nm.SNIC_PCIE_OFPORT)
        ofctl13(
            o["listen"],
            "add-flows",
            "-",
            stdin="in_port=100,actions=output:1\nin_port=1,actions=output:100\n",
            names=False,
        )
        # OneSwitch translated them onto the DPU's bridge: the wire port's rule and the tag delivery from PCIe.
        dpu_flows = ofctl13(f"unix:{dpu.rundir}/{dpu.bridge}.mgmt", "dump-flows", names=False)
        assert "in_port=1 " in dpu_flows or "in_port=1," in dpu_flows, dpu_flows
        assert "in_port=100,dl_vlan=" in dpu_flows and "pop_vlan,output:1" in dpu_flows, dpu_flows

        def pings() -> bool:
            r = subprocess.run(
                [
                    "ip",
                    "netns",
                    "exec",
                    nm.ns_vm(host.name, 0),
                    "ping",
                    "-c",
                    "1",
                    "-W",
                    "1",
                    nm.ip_outside(0, 0),
                ],
                capture_output=True,
                timeout=10,
            )
            return r.returncode == 0

        wait_for(pings, 30, "vm0 -> the DPU's wire through OneSwitch", interval=0.5)
        r = subprocess.run(
            ["ip", "netns", "exec", nm.ns_vm(host.name, 0), "ping", "-c", "5", "-i", "0.2", "-W", "1",
             nm.ip_outside(0, 0)],
            capture_output=True,
            text=True,
            timeout=30,
        )  # fmt: skip
        assert r.returncode == 0 and " 0% packet loss" in r.stdout, r.stdout
    finally:
        try:
            if host is not None:
                host.down()
                assert machine_snapshot(host.name) == EMPTY
        finally:
            dpu.down()
            for ns in (wire_ns, dpu.netns):
                netns_del(ns)
    assert not subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.count(f"{d}-")
