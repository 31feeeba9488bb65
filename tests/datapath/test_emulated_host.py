"""The emulated host on real Open vSwitch: lifecycle without leftovers, real packets, tags, shaping, backends."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from emulated_host import naming as nm
from emulated_host.host import AlreadyRunning, free_port
from emulated_host.snic_machine import EmulatedSnic
from host_datapath.switch import SwitchDriver
from host_datapath.sysutil import (
    DatapathError,
    link_exists,
    netns_add,
    netns_del,
    netns_list,
    read_pidfile,
    wait_for,
)
from snic_datapath.bluefield import BlueFieldSnic
from snic_datapath.cgroup import PERIOD_US
from testkit.hosts import EMPTY, machine_snapshot, needs_root, unique_name
from testkit.traffic import Capture, iperf3_tcp, ping

pytestmark = [pytest.mark.root, needs_root]


def drivers(status: dict) -> tuple[SwitchDriver, SwitchDriver]:
    h, s = status["host"], status["snics"][0]
    return (
        SwitchDriver(h["bridge"], h["ovsdb"], openflow=h["openflow"]),
        SwitchDriver(s["bridge"], s["ovsdb"], openflow=s["openflow"]),
    )


def plain_path_flows(host: SwitchDriver, snic: SwitchDriver) -> None:
    """vm0 (host port 100) <-> PCIe (host 1 / sNIC 100) <-> Ethernet port 1 of snic0."""
    host.add_flows(["in_port=100,actions=output:1", "in_port=1,actions=output:100"])
    snic.add_flows(["in_port=100,actions=output:1", "in_port=1,actions=output:100"])


def test_up_down_leaves_nothing_and_second_up_changes_nothing(host_factory):
    h = host_factory()
    assert machine_snapshot(h.name) == EMPTY
    status = h.up()
    assert status["up"] is True
    assert set(status) >= {"host", "snics", "redis", "vms"}
    assert all(status["host"]["pids"].values())
    snic = status["snics"][0]
    assert snic["cgroup"]["cpu_quota"] == pytest.approx(0.5)
    assert snic["cgroup"]["cpu_period_us"] == PERIOD_US and snic["cgroup"]["nr_throttled"] >= 0
    assert snic["pcie"]["host_ofport"] == 1 and snic["pcie"]["snic_ofport"] == 100
    assert status["host"]["ports"] == {
        nm.if_pcie(h.name, 0)[0]: 1,
        nm.if_vm(h.name, 0)[1]: 100,
        nm.if_vm(h.name, 1)[1]: 101,
    }
    before = machine_snapshot(h.name)
    with pytest.raises(AlreadyRunning):
        h.up()
    assert machine_snapshot(h.name) == before
    h.down()
    assert machine_snapshot(h.name) == EMPTY


def test_recovers_after_kill9_of_a_vswitchd(host_factory):
    h = host_factory()
    status = h.up()
    pid = status["host"]["pids"]["ovs-vswitchd"]
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not h.is_up(), 10, "the host to be seen as down")
    assert h.status()["up"] is False and h.status()["host"]["running"] is False
    status = h.up()  # sweeps the crashed run, then comes up afresh
    assert status["host"]["pids"]["ovs-vswitchd"] != pid
    snic_pid = status["snics"][0]["pids"]["ovs-vswitchd"]
    os.kill(snic_pid, signal.SIGKILL)  # a crashed sNIC switch makes the host not up either
    wait_for(lambda: not h.is_up(), 10, "the host to be seen as down after the sNIC crash")
    status = h.up()
    assert status["up"] and status["snics"][0]["pids"]["ovs-vswitchd"] not in (None, snic_pid)
    host, snic = drivers(status)
    plain_path_flows(host, snic)
    assert ping(nm.ns_vm(h.name, 0), nm.ip_outside(0, 0))
    h.down()
    assert machine_snapshot(h.name) == EMPTY


def test_a_killed_redis_makes_the_host_not_up_and_up_restarts_it_alone(host_factory):
    # before: the host stayed "up" with Redis dead (NFs failing closed) and `uno up` said "nothing changed",
    # so the only way back was `uno down` + `uno up`, which removes every NF and flow
    from uno_cli.host_cmd import _what_is_down

    h = host_factory()
    status = h.up()
    host, snic = drivers(status)
    plain_path_flows(host, snic)
    flows_before = sorted((f.match, f.actions) for f in host.flow_stats())
    redis = status["redis"]
    os.kill(redis["pid"], signal.SIGKILL)
    wait_for(lambda: not h.is_up(), 10, "the host to be seen as down")
    down = h.status()
    assert down["up"] is False and down["redis"]["pid"] is None and down["host"]["running"]
    assert _what_is_down(down) == ": redis not running (`uno up` restarts it alone)"
    status = h.up()
    assert status["up"] and status["redis"]["pid"] not in (None, redis["pid"])
    assert status["redis"]["port"] == redis["port"] and status["redis"]["unix_socket"] == redis["unix_socket"]
    assert status["host"]["pids"] == down["host"]["pids"]  # the switches were left running, flows and all
    assert status["snics"][0]["pids"] == down["snics"][0]["pids"]
    assert sorted((f.match, f.actions) for f in host.flow_stats()) == flows_before
    pong = subprocess.run(["redis-cli", "-s", redis["unix_socket"], "ping"], capture_output=True, text=True)
    assert pong.stdout.strip() == "PONG"
    assert ping(nm.ns_vm(h.name, 0), nm.ip_outside(0, 0))
    host.close()
    snic.close()


def test_a_redis_port_in_use_is_a_clear_error_and_leaves_nothing(host_factory):
    # was: "timed out after 10s waiting for redis on port P" (redis-server had exited at once)
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        h = host_factory(redis={"port": port})
        with pytest.raises(DatapathError, match=f"redis: port {port} on 127.0.0.1 is in use"):
            h.up()
        assert machine_snapshot(h.name) == EMPTY


@pytest.fixture(scope="module")
def running_host():
    from testkit.hosts import make_host

    h = make_host(snics=[{"pcie_gbps": 0}])
    try:
        status = h.up()
        yield h, status
    finally:
        h.down()
        assert machine_snapshot(h.name) == EMPTY


def test_ping_and_tcp_through_host_pcie_snic(running_host):
    h, status = running_host
    host, snic = drivers(status)
    host.del_flows()
    snic.del_flows()
    plain_path_flows(host, snic)
    assert ping(nm.ns_vm(h.name, 0), nm.ip_outside(0, 0))
    bps = iperf3_tcp(nm.ns_outside(h.name, 0, 0), nm.ip_outside(0, 0), nm.ns_vm(h.name, 0), seconds=2)
    assert bps > 10e6  # TCP really flows (checksums survive the userspace datapath)
    stats = {f.match: f.packets for f in host.flow_stats()}
    assert stats["in_port=100"] > 0 and stats["in_port=1"] > 0
    assert host.port_stats()[nm.if_pcie(h.name, 0)[0]]["tx_packets"] > 0
    link = h.status()["snics"][0]["pcie"]["host_end_counters"]
    assert link["tx_bytes"] > 1_000_000 and link["rx_packets"] > 0  # the iperf3 stream crossed the link


TAGS = {
    "vlan": (
        # host: tag toward the sNIC, untag from it; sNIC: the mirror image.
        ["in_port=100,actions=push_vlan:0x8100,set_field:4196->vlan_vid,output:1",
         "in_port=1,dl_vlan=100,actions=pop_vlan,output:100"],
        ["in_port=100,dl_vlan=100,actions=pop_vlan,output:1",
         "in_port=1,actions=push_vlan:0x8100,set_field:4196->vlan_vid,output:100"],
        "vlan 100",
    ),
    "mpls": (
        ["in_port=100,ip,actions=push_mpls:0x8847,set_field:42->mpls_label,output:1",
         "in_port=100,arp,actions=push_mpls:0x8847,set_field:43->mpls_label,output:1",
         "in_port=1,mpls,mpls_label=42,actions=pop_mpls:0x0800,output:100",
         "in_port=1,mpls,mpls_label=43,actions=pop_mpls:0x0806,output:100"],
        ["in_port=100,mpls,mpls_label=42,actions=pop_mpls:0x0800,output:1",
         "in_port=100,mpls,mpls_label=43,actions=pop_mpls:0x0806,output:1",
         "in_port=1,ip,actions=push_mpls:0x8847,set_field:42->mpls_label,output:100",
         "in_port=1,arp,actions=push_mpls:0x8847,set_field:43->mpls_label,output:100"],
        "MPLS",
    ),
}  # fmt: skip


@pytest.mark.parametrize("carrier", sorted(TAGS))
def test_flow_id_tag_seen_on_pcie_never_outside(running_host, carrier):
    h, status = running_host
    host, snic = drivers(status)
    host.del_flows()
    snic.del_flows()
    host_flows, snic_flows, marker = TAGS[carrier]
    host.add_flows(host_flows)
    snic.add_flows(snic_flows)
    on_link = Capture(nm.ns_snic(h.name, 0), nm.if_pcie(h.name, 0)[1])
    outside = Capture(nm.ns_outside(h.name, 0, 0), nm.if_eth(h.name, 0, 0)[1])
    vm_side = Capture(nm.ns_vm(h.name, 0), nm.if_vm(h.name, 0)[0])
    assert ping(nm.ns_vm(h.name, 0), nm.ip_outside(0, 0))
    link, out, vm = on_link.lines(), outside.lines(), vm_side.lines()
    assert link and out and vm
    tagged = [line for line in link if "ICMP echo" in line or "ARP" in line]
    assert tagged and all(marker in line for line in tagged), link
    assert any("ICMP" in line for line in out)
    assert not any(marker in line for line in out + vm)


def test_pcie_shaping_holds(host_factory):
    h = host_factory(snics=[{"pcie_gbps": 0.1}], vms=1)
    status = h.up()
    host, snic = drivers(status)
    plain_path_flows(host, snic)
    bps = iperf3_tcp(nm.ns_outside(h.name, 0, 0), nm.ip_outside(0, 0), nm.ns_vm(h.name, 0), seconds=3)
    assert 0.9 * 0.1e9 <= bps <= 1.1 * 0.1e9, f"{bps / 1e6:.1f} Mbit/s through a 100 Mbit/s link"


def test_bluefield_backend_drives_a_switch_over_tcp_ovsdb(tmp_path):
    name = unique_name()
    ns = f"{name}-snic0"
    port = free_port()
    dpu = EmulatedSnic(netns=ns, rundir=tmp_path / "dpu", bridge=f"{name}-dpu", cgroup_name=f"uno-{name}-snic0",
                       ovsdb_tcp_port=port)  # fmt: skip
    try:
        netns_add(ns)
        dpu.ovs.start(ovsdb_tcp_port=port)  # the DPU's own OVS; its bridge does not exist yet
        bf = BlueFieldSnic(bridge=f"{name}-bf", ovsdb=f"tcp:127.0.0.1:{port}",
                           openflow=f"unix:{tmp_path / 'dpu'}/{name}-bf.mgmt", datapath_type="netdev")  # fmt: skip
        bf.up()
        wait_for(lambda: (tmp_path / "dpu" / f"{name}-bf.mgmt").exists(), 10, "the bridge's OpenFlow socket")
        bf.driver.add_flows(["priority=5,in_port=1,actions=drop"])
        assert [(f.priority, f.match) for f in bf.driver.flow_stats()] == [(5, "in_port=1")]
        # What the TCP client did is what the DPU's OVSDB holds, seen through its local socket.
        local = SwitchDriver(f"{name}-bf", dpu.ovs.db_remote)
        proto = local.api.db_get("Bridge", f"{name}-bf", "protocols").execute(check_error=True)
        mode = local.api.db_get("Bridge", f"{name}-bf", "fail_mode").execute(check_error=True)
        assert sorted(proto) == ["OpenFlow13", "OpenFlow15"] and mode in ("secure", ["secure"])
        local.close()
        bf.down()
    finally:
        dpu.ovs.stop()
        netns_del(ns)
        assert read_pidfile(tmp_path / "dpu" / "ovs-vswitchd.pid") is None


def test_root_namespace_tcp_openflow_endpoint_reaches_each_bridge(running_host):
    """OneSwitch runs in the root namespace: each bridge's `openflow_tcp` is a controller endpoint it reaches:
    the host switch's through a relay on loopback, an emulated sNIC's (a separate machine) on its management
    address."""
    h, status = running_host
    for sw in (status["host"], *status["snics"]):
        target = sw["openflow_tcp"]
        if sw is status["host"]:
            assert target and target.startswith("tcp:127.0.0.1:")
            listeners = {f"punix:{sw['openflow_tcp_socket']}"}
        else:
            assert target == f"tcp:{sw['mgmt']['snic_ip']}:6653"
            listeners = {f"punix:{sw['openflow_tcp_socket']}", f"ptcp:6653:{sw['mgmt']['snic_ip']}"}
        over_tcp = SwitchDriver(sw["bridge"], sw["ovsdb"], openflow=target)
        local = SwitchDriver(sw["bridge"], sw["ovsdb"], openflow=sw["openflow"])
        over_tcp.del_flows()
        over_tcp.add_flows(["priority=9,in_port=100,actions=drop"])
        assert [(f.priority, f.match) for f in local.flow_stats()] == [(9, "in_port=100")]
        # Passive controller listeners kept on the bridge (a primary, not service, role).
        ctls = local.api.db_find("Controller", columns=["target"]).execute(check_error=True)
        assert {c["target"] for c in ctls} == listeners
        local.del_flows()
        local.close()
        over_tcp.close()


def test_switch_connects_actively_to_a_root_namespace_controller(running_host):
    """A controller listening on the root namespace's loopback gets the switch's OpenFlow 1.3 HELLO."""
    import socket
    from pathlib import Path

    from host_datapath.host_switch import HostSwitch

    h, status = running_host
    hs = status["host"]
    switch = HostSwitch(hs["netns"], Path(hs["ovsdb"][len("unix:") :]).parent, hs["bridge"])
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        srv.settimeout(15)
        port = srv.getsockname()[1]
        try:
            switch.connect_controllers([f"tcp:127.0.0.1:{port}"])
            conn, _ = srv.accept()
            with conn:
                conn.settimeout(10)
                hello = conn.recv(8)
            # OFPT_HELLO; the bridge allows OpenFlow 1.3 and 1.5 (OneSwitch's select-method side connection),
            # so it announces 1.5 with a version bitmap and a 1.3-only controller negotiates 1.3
            assert hello[1] == 0 and hello[0] in (4, 6), hello
            targets = {
                c["target"] for c in switch.driver.api.db_find("Controller", columns=["target"]).execute()
            }
            assert targets == {f"punix:{hs['openflow_tcp_socket']}", f"unix:{switch.rundir}/ctl-{port}.sock"}
        finally:
            switch.connect_controllers([])
        targets = {c["target"] for c in switch.driver.api.db_find("Controller", columns=["target"]).execute()}
        assert targets == {f"punix:{hs['openflow_tcp_socket']}"}
        assert not list(switch.rundir.glob("ctl-*"))
        switch.close()


def test_bad_controller_target_is_an_error():
    from host_datapath.of_endpoint import parse_tcp_target
    from host_datapath.sysutil import DatapathError

    assert parse_tcp_target("tcp:127.0.0.1:6653") == ("127.0.0.1", 6653)
    for bad in ("ssl:1.2.3.4:6653", "tcp:127.0.0.1", "tcp::6653", "tcp:127.0.0.1:0", "tcp:127.0.0.1:x"):
        with pytest.raises(DatapathError, match="expected tcp:HOST:PORT"):
            parse_tcp_target(bad)


def test_down_after_the_rundir_was_lost_still_leaves_nothing(host_factory):
    """A crash that also lost the rundir (state file, pidfiles): down finds everything by name and path."""
    import shutil
    import socket

    h = host_factory(vms=1)
    status = h.up()
    shutil.rmtree(h.rundir)
    h.down()
    assert machine_snapshot(h.name) == EMPTY
    with socket.socket() as s:  # redis (whose command line names no path) is gone too
        assert s.connect_ex(("127.0.0.1", status["redis"]["port"])) != 0
    sw, sn = status["host"], status["snics"][0]
    assert sw["openflow_relay_pid"] and not os.path.exists(f"/proc/{sw['openflow_relay_pid']}")
    assert sn["agent_pid"] and not os.path.exists(f"/proc/{sn['agent_pid']}")  # the sNIC's agent too


def test_two_snics_each_with_its_own_pcie_link(host_factory):
    h = host_factory(vms=1, snics=[{"pcie_gbps": 0}, {"pcie_gbps": 0, "eth_ports": 2}])
    status = h.up()
    assert status["host"]["ports"] == {nm.if_pcie(h.name, 0)[0]: 1, nm.if_pcie(h.name, 1)[0]: 2,
                                       nm.if_vm(h.name, 0)[1]: 100}  # fmt: skip
    s1 = status["snics"][1]
    assert s1["pcie"]["host_ofport"] == 2 and [e["ofport"] for e in s1["eth_ports"]] == [1, 2]
    host = SwitchDriver(
        status["host"]["bridge"], status["host"]["ovsdb"], openflow=status["host"]["openflow"]
    )
    snic1 = SwitchDriver(s1["bridge"], s1["ovsdb"], openflow=s1["openflow"])
    host.add_flows(["in_port=100,actions=output:2", "in_port=2,actions=output:100"])
    snic1.add_flows(["in_port=100,actions=output:2", "in_port=2,actions=output:100"])
    assert ping(nm.ns_vm(h.name, 0), nm.ip_outside(1, 1))  # vm0 -> PCIe link 1 -> sNIC 1's second port
    assert snic1.port_stats()[nm.if_pcie(h.name, 1)[1]]["rx_packets"] > 0
    host.close()
    snic1.close()


def test_host_with_a_bluefield_snic_from_config(host_factory, tmp_path):
    """`snics: [{backend: bluefield, ...}]`: the host drives a DPU's OVS it does not own, over TCP OVSDB."""
    from host_datapath.ovs_instance import OvsInstance

    dpu_ns, port = f"{unique_name()}-dpu", free_port()
    dpu = OvsInstance(tmp_path / "dpu", dpu_ns)
    try:
        netns_add(dpu_ns)
        dpu.start(ovsdb_tcp_port=port)
        bridge = f"{unique_name()}-bf"
        mgmt = tmp_path / "dpu" / f"{bridge}.mgmt"
        h = host_factory(vms=1, snics=[{"backend": "bluefield", "ovsdb": f"tcp:127.0.0.1:{port}",
                                        "openflow": f"unix:{mgmt}", "bridge": bridge, "datapath_type": "netdev"}])  # fmt: skip
        status = h.up()
        sn = status["snics"][0]
        assert sn["backend"] == "bluefield" and sn["ovsdb"] == f"tcp:127.0.0.1:{port}" and "pcie" not in sn
        wait_for(mgmt.exists, 10, "the DPU bridge's OpenFlow socket")
        drv = SwitchDriver(bridge, sn["ovsdb"], openflow=sn["openflow"])
        drv.add_flows(["priority=3,actions=drop"])
        assert [f.priority for f in drv.flow_stats()] == [3]
        drv.close()
        h.down()
        assert dpu.running()  # the DPU's own OVS is not ours to stop
    finally:
        dpu.stop()
        netns_del(dpu_ns)


def test_nf_namespace_attached_to_the_snic_switch(running_host):
    """What the agent does for an NF on the sNIC: a namespace on sNIC port 200, reached from vm0 over PCIe."""
    h, status = running_host
    sw = h.switches()
    host, snic = sw["host"], sw["snic0"]
    nf_ns, nf_if, nf_port = f"{h.name}-nf0", f"{h.name}-n0", f"{h.name}-n0s"
    try:
        snic.attach_namespace(nf_ns, nf_if, nf_port, nm.NF_PORT_BASE, ip_cidr="10.77.9.1/16")
        snic.attach_namespace(nf_ns, nf_if, nf_port, nm.NF_PORT_BASE)  # idempotent
        assert snic.driver.ports()[nf_port] == nm.NF_PORT_BASE
        host.driver.del_flows()
        snic.driver.del_flows()
        host.driver.add_flows(["in_port=100,actions=output:1", "in_port=1,actions=output:100"])
        snic.driver.add_flows(["in_port=100,actions=output:200", "in_port=200,actions=output:100"])
        assert ping(nm.ns_vm(h.name, 0), "10.77.9.1")
        snic.detach(nf_port)
        assert nf_port not in snic.driver.ports()
        assert not ping(nm.ns_vm(h.name, 0), "10.77.9.1", count=1)
    finally:
        netns_del(nf_ns)
        host.close()
        snic.close()


def link_props(netns: str, ifname: str) -> dict:
    """What the system tools report for one interface: MTU, up, tx checksumming / TSO, IPv6 switch."""
    info = json.loads(subprocess.run(["ip", "-n", netns, "-j", "link", "show", "dev", ifname],
                                     capture_output=True, text=True, check=True).stdout)[0]  # fmt: skip
    feats = subprocess.run(["ip", "netns", "exec", netns, "ethtool", "-k", ifname],
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    feat = dict(line.strip().split(": ", 1) for line in feats.splitlines() if ": " in line)
    v6 = subprocess.run(["ip", "netns", "exec", netns, "sysctl", "-n", f"net.ipv6.conf.{ifname}.disable_ipv6"],
                        capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    return {"mtu": info["mtu"], "up": "UP" in info["flags"], "tx": feat["tx-checksumming"],
            "tso": feat["tx-tcp-segmentation"].split()[0], "ipv6_off": v6 == "1"}  # fmt: skip


@pytest.mark.parametrize("switch", ["host", "snic0"])
def test_cold_attached_veth_has_its_properties(running_host, switch):
    """A cold attach (namespace made now): MTU 1600, both ends up, transmit checksumming and TSO off on both
    ends, IPv6 off on the switch end, the bridge port at the asked OpenFlow port; a second attach changes
    nothing; detach and the namespace's removal leave no interface."""
    h, _ = running_host
    sw = h.switches()[switch]
    ns, inside, port = f"{h.name}-c{switch[0]}", f"{h.name}-c{switch[0]}", f"{h.name}-d{switch[0]}"
    try:
        for _ in range(2):  # idempotent
            sw.attach_namespace(ns, inside, port, 230)
            assert sw.driver.ports()[port] == 230
            want = {"mtu": 1600, "up": True, "tx": "off", "tso": "off"}
            assert {k: v for k, v in link_props(ns, inside).items() if k != "ipv6_off"} == want
            assert link_props(sw.netns, port) == {**want, "ipv6_off": True}
        lo = subprocess.run(
            ["ip", "-n", ns, "-j", "link", "show", "dev", "lo"], capture_output=True, text=True
        )
        assert "UP" in json.loads(lo.stdout)[0]["flags"]
        sw.detach(port)
        netns_del(ns)
        assert port not in sw.driver.ports() and not link_exists(port, sw.netns) and ns not in netns_list()
    finally:
        sw.detach(port)
        netns_del(ns)
        sw.close()


@pytest.mark.parametrize("switch", ["host", "snic0"])
@pytest.mark.parametrize("failure", ["ofport taken", "name too long"])
def test_failed_attach_leaves_nothing(running_host, switch, failure):
    """An attach that fails at the bridge port (its OpenFlow port is taken: OVS gives another) or at the veth
    (a name over 15 characters) removes what it made: namespace, veth, bridge port."""
    h, _ = running_host
    sw = h.switches()[switch]
    taken = min(sw.driver.ports().values())  # a VM's or the PCIe link's port
    ns, inside = f"{h.name}-f{switch[0]}", f"{h.name}-f{switch[0]}"
    port = f"{h.name}-g{switch[0]}" if failure == "ofport taken" else "x" * 16
    before = (sorted(sw.driver.ports().items()), switch_links(sw.netns))
    try:
        with pytest.raises(DatapathError):
            sw.attach_namespace(ns, inside, port, taken if failure == "ofport taken" else 231)
        assert ns not in netns_list()
        assert (sorted(sw.driver.ports().items()), switch_links(sw.netns)) == before
    finally:
        if len(port) <= 15:
            sw.detach(port)
        netns_del(ns)
        sw.close()


def switch_links(netns: str) -> list[str]:
    out = subprocess.run(["ip", "-n", netns, "-o", "link"], capture_output=True, text=True, check=True).stdout
    return sorted(line.split(":")[1].strip() for line in out.splitlines())
