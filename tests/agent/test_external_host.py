"""The host switch on an operator's Open vSwitch (host.switch.mode: external), end to end as root: an OVS the
test starts the way the Debian service does, holding a foreign bridge with flows and a group; `uno up` makes
UNO's bridge there (marked), OneSwitch drives it, a firewall placed by the agent passes traffic VM -> NF ->
wire and moves host <-> sNIC under a ping stream, the PCIe link is measured on the port the config names;
`uno down` removes what UNO made and only that: the foreign bridge, its flows, its group and the OVS's own
settings are byte-identical before and after (and while UNO runs). Bad configs fail on one line naming the
key, changing nothing on the operator's OVS."""

from __future__ import annotations

import fcntl
import json
import os
import select
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from scapy.layers.inet import ICMP, IP
from scapy.layers.l2 import Ether

from domain.errors import CliError
from emulated_host import naming as nm
from emulated_host.config import parse_config
from emulated_host.host import EmulatedHost, ping
from emulated_host.snic_machine import EmulatedSnic
from host_datapath.oneswitch_client import OneSwitchClient
from host_datapath.sysutil import DatapathError, free_port, netns_del, run, veth_pair
from nf_agent.client import call
from testkit.agent_host import AGENT_E2E, FW_CONFIG, agent_host, instance, ofctl
from testkit.hosts import EMPTY, machine_snapshot, unique_name
from testkit.operator_ovs import operator_ovs
from testkit.poll import wait

REPO = Path(__file__).resolve().parents[2]
pytestmark = AGENT_E2E
FOREIGN = ("flows", "groups", "bridge", "ports", "ifaces")  # the snapshot's rows of the foreign bridge itself


@pytest.fixture(scope="module")
def op():
    """The operator's OVS with its foreign bridge, and the foreign bridge's snapshot before UNO came."""
    tag = unique_name()
    with operator_ovs(Path(f"/run/uno-test-ovs/{tag}")) as ovs:
        bridge = f"{tag}-op"
        ovs.add_foreign_bridge(bridge, (f"{tag}-fa", f"{tag}-fb"))
        yield ovs, bridge, ovs.snapshot(bridge)


def external(ovs, bridge: str | None = None, **more) -> dict:
    return {"switch": {"mode": "external", "ovsdb": ovs.db, **({"bridge": bridge} if bridge else {}), **more}}


def uno_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "uno_cli.main", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def test_attach_chain_move_detach_leaves_the_operators_ovs_as_it_was(op, tmp_path):
    ovs, foreign, before = op
    name = unique_name()
    ubr, link = f"{name}-ubr", f"{name}-pcie"
    with agent_host(tmp_path, host_cfg=external(ovs, ubr), snics=[{"id": "snic0", "host_port": link}],
                    name=name, agent_args=("--failover-interval", "0")) as (host, status, agent, url):  # fmt: skip
        # `uno status --json`: the mode and the bridge
        cli = uno_cli("status", "--json", "--config", str(tmp_path / "host.yaml"))
        st = json.loads(cli.stdout)
        assert cli.returncode == 0, cli.stderr
        assert st["host"]["switch"]["mode"] == "external" and st["host"]["switch"]["bridge"] == ubr
        assert st["host"]["switch"]["created"] is True and st["host"]["bridge"] == ubr
        # UNO's bridge on the operator's OVS, marked as UNO's, with its own ports marked too
        assert set(ovs.vsctl("list-br").split()) == {foreign, ubr}
        assert ovs.vsctl("get", "Bridge", ubr, "external_ids:uno-owner").strip('"\n') == name
        ports = ovs.vsctl("list-ports", ubr).split()
        assert link in ports and nm.if_vm(name, 0)[1] in ports
        for p in ports:
            assert ovs.vsctl("get", "Port", p, "external_ids:uno-owner").strip('"\n') == name
        assert st["snics"][0]["pcie"]["host_port"] == link

        # the NF chain through OneSwitch: VM <-> firewall <-> wire
        listen = status["oneswitch"]["listen"]
        client = OneSwitchClient(status["oneswitch"]["rest"])
        code, vm = call(url, "POST", "/v1/vms", {"id": "web"})
        assert code == 201
        code, body = call(url, "POST", "/v1/nfs", {"type": "firewall", "id": "fw1", "config": FW_CONFIG,
                                                   "expected": {"gbps": 0.5, "dst": "web"}})  # fmt: skip
        assert code == 201, body
        vport = body["vport"]
        vm_mac, out_mac, eth = nm.mac(1, 0, 0), nm.mac(2, 0, 0), nm.vport_eth(0, 0)
        for f in (f"in_port={vm['vport']},actions=output:{vport}", f"in_port={eth},actions=output:{vport}",
                  f"in_port={vport},dl_src={vm_mac},actions=output:{eth}",
                  f"in_port={vport},dl_src={out_mac},actions=output:{vm['vport']}"):  # fmt: skip
            ofctl(status, "add-flow", listen, f)
        vm_ns, out_ip = nm.ns_vm(name, 0), nm.ip_outside(0, 0)
        assert wait(lambda: ping(vm_ns, out_ip, count=2), 30, "ping through the firewall")

        # the PCIe link measured on the operator-named port's counters
        def measured():
            ping(vm_ns, out_ip, count=3)
            m = call(url, "GET", "/v1/placement")[1]["measured"]
            return m if m and m["pcie_gbps"]["snic0"]["down"] > 0 else None

        wait(measured, 30, "PCIe use measured on the link's host port")

        # moves host <-> sNIC under a ping stream (make-before-break on OneSwitch)
        first = instance(host, "fw1")["location"]
        for target in ("host", "snic0") if first == "snic0" else ("snic0", "host"):
            pinger = subprocess.Popen(["ip", "netns", "exec", vm_ns, "ping", "-q", "-i", "0.02", "-c", "150",
                                       "-W", "2", out_ip], stdout=subprocess.PIPE, text=True)  # fmt: skip
            time.sleep(0.5)
            code, res = call(url, "POST", "/v1/nfs/fw1/migrate", {"to": target})
            out = pinger.communicate(timeout=60)[0]
            assert code == 200 and res["moved"] is True, res
            received = int(out.split(" received")[0].rsplit(" ", 1)[1])
            assert received >= 148, f"moving to {target}: {out}"
            new = instance(host, "fw1")
            assert new["location"] == target
            assert {p.vport: (p.switch, p.port) for p in client.ports()}[vport] == (
                new["switch"],
                new["ofport"],
            )
            if target == "host":  # the host instance's port is on UNO's bridge of the operator's OVS, marked
                assert new["port_if"] in ovs.vsctl("list-ports", ubr).split()
                assert ovs.vsctl("get", "Port", new["port_if"], "external_ids:uno-owner").strip('"\n') == name
            assert wait(lambda: ping(vm_ns, out_ip, count=2), 30, f"ping after moving to {target}")

        # OneSwitch's flows went to UNO's bridge only
        assert "goto_table" in ovs.ofctl("dump-flows", ubr)
        now = ovs.snapshot(
            foreign
        )  # the foreign bridge untouched while UNO runs (the OVS-wide rows have UNO's)
        assert {k: now[k] for k in FOREIGN} == {k: before[k] for k in FOREIGN}
    # `uno down` (the fixture's exit) removed UNO's bridge, its ports and rows, and nothing else
    assert ovs.vsctl("list-br").split() == [foreign]
    assert ovs.snapshot(foreign) == before
    assert name not in ovs.vsctl("list", "QoS") + ovs.vsctl("list", "Controller") + ovs.vsctl("list", "Port")


def test_adopt_a_foreign_bridge_then_give_it_back_as_it_was(op, tmp_path):
    """adopt: true takes an existing bridge over; UNO adds its ports and OneSwitch its (cookie-marked) flows
    there, the operator's flows stay; `uno down` leaves the bridge as it found it."""
    ovs, _, _ = op
    tag = unique_name()
    theirs, veth = f"o{tag[1:]}-ad", (f"o{tag[1:]}-aa", f"o{tag[1:]}-ab")  # named unlike UNO's host
    ovs.add_foreign_bridge(theirs, veth)
    before = ovs.snapshot(theirs)
    host = EmulatedHost(parse_config({"name": tag, "rundir": "/run/uno-test", "vms": 1,
                                      "host": external(ovs, theirs, adopt=True)}))  # fmt: skip
    try:
        status = host.up()
        assert status["host"]["switch"]["adopted"] is True and status["host"]["switch"]["shared"] is True
        assert ovs.vsctl("get", "Bridge", theirs, "external_ids:uno-adopted").strip('"\n') == tag
        conf = json.loads((host.rundir / "oneswitch" / "config.json").read_text())
        assert next(s for s in conf["switches"] if s["id"] == "host")["shared"] is True
        # OneSwitch installed its dispatch, and the operator's flows are all still there
        flows = ovs.ofctl("dump-flows", theirs, "--no-stats")
        assert "cookie=0x55" in flows
        for line in before["flows"].splitlines()[1:]:
            assert line.strip() in flows
        # UNO's ports took numbers no operator port had or asked for (an operator's port is never renumbered)
        assert ovs.vsctl("get", "Interface", f"{theirs}-i", "ofport").strip() == "1"
        host.down()
        assert ovs.snapshot(theirs) == before
        assert machine_snapshot(tag) == EMPTY
    finally:
        host.down()
        ovs.del_foreign_bridge(theirs, veth[0])


def open_tap(name: str) -> int:
    """A tap device held by this process (as QEMU holds a VM's): its fd, frames in and out."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, 0x400454CA, struct.pack("16sH", name.encode(), 0x0002 | 0x1000))  # TUNSETIFF: TAP, NO_PI
    run(["ip", "link", "set", name, "up"])
    return fd


def echo_through(fd: int, frame: bytes, ident: int, timeout: float = 30.0) -> bool:
    """Write `frame` (an ICMP echo request) into the tap every half second until its reply comes out of it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        os.write(fd, frame)
        end = time.monotonic() + 0.5
        while (left := end - time.monotonic()) > 0:
            if not select.select([fd], [], [], left)[0]:
                break
            pkt = Ether(os.read(fd, 65536))
            if ICMP in pkt and pkt[ICMP].type == 0 and pkt[ICMP].id == ident:
                return True
    return False


def test_a_vms_own_tap_device_is_its_port(op):
    """vms[].port {type: tap}: the VM's existing tap (held by its "QEMU", here this process) goes onto UNO's
    bridge as the VM's port; a frame the VM sends crosses OneSwitch's rules, the PCIe link and the sNIC to the
    wire, and the answer comes back into the tap. `uno down` takes the port off and leaves the device."""
    ovs, _, _ = op
    name = unique_name()
    tap = f"o{name[1:]}-tap"
    fd = open_tap(tap)
    host = EmulatedHost(parse_config({"name": name, "rundir": "/run/uno-test", "oneswitch": {"enabled": True},
                                      "vms": [{"name": "web", "port": {"type": "tap", "name": tap}}],
                                      "host": external(ovs, f"{name}-ubr")}))  # fmt: skip
    try:
        status = host.up()
        assert status["vms"][0] | {"host_ofport": 0} == {
            "name": "web", "type": "tap", "netns": None, "ifname": None, "ip": None, "mac": None,
            "host_port": tap, "host_ofport": 0,
        }  # fmt: skip
        assert ovs.vsctl("get", "Port", tap, "external_ids:uno-owner").strip('"\n') == name
        listen, eth, vm = status["oneswitch"]["listen"], nm.vport_eth(0, 0), nm.vport_vm(0)
        for f in (f"in_port={vm},actions=output:{eth}", f"in_port={eth},actions=output:{vm}"):
            ofctl(status, "add-flow", listen, f)
        vm_mac, vm_ip = "02:00:00:aa:00:01", "10.77.0.10"
        run(["ip", "neigh", "replace", vm_ip, "lladdr", vm_mac, "dev", nm.if_eth(name, 0, 0)[1], "nud", "permanent"],
            netns=nm.ns_outside(name, 0, 0))  # fmt: skip
        frame = (
            Ether(src=vm_mac, dst=nm.mac(2, 0, 0)) / IP(src=vm_ip, dst=nm.ip_outside(0, 0)) / ICMP(id=4242)
        )
        assert echo_through(fd, bytes(frame), 4242), "no echo reply came back into the VM's tap"
        host.down()
        assert Path(f"/sys/class/net/{tap}").exists()  # the VM's device stays; only UNO's port row went
        assert tap not in ovs.vsctl("list", "Port") and f"{name}-ubr" not in ovs.vsctl("list-br").split()
        assert machine_snapshot(name) == EMPTY
    finally:
        host.down()
        os.close(fd)


def test_a_bluefields_link_is_the_port_the_operator_names(op, tmp_path):
    """snics[k].host_port on an external host switch: the operator's existing device (a BlueField's PF; here a
    veth whose other end is the "DPU" bridge's port 100, the DPU an emulated sNIC's OVS over TCP, as
    tests/oneswitch/test_bluefield.py) goes onto UNO's bridge, OneSwitch is given the number OVS gave it, and
    vm0 pings the DPU's wire port through rules written to OneSwitch only. `uno down` leaves the device."""
    ovs, _, _ = op
    d, name = f"o{unique_name()[1:]}", unique_name()
    pf = f"{d}-pf"
    dpu = EmulatedSnic(netns=f"{d}-dpu", rundir=tmp_path / "dpu", bridge=f"{d}-bf", cgroup_name=f"uno-{d}-dpu",
                       ovsdb_tcp_port=free_port())  # fmt: skip
    host = None
    try:
        dpu.up()
        dpu.attach_namespace(f"{d}-wire", f"{d}-w", f"{d}-ws", 1, ip_cidr=f"{nm.ip_outside(0, 0)}/16")
        veth_pair(pf, None, f"{d}-pd", dpu.netns)  # the PF (root namespace) <-> the DPU's host representor
        dpu.driver.add_port(f"{d}-pd", nm.SNIC_PCIE_OFPORT)
        bf = {"backend": "bluefield", "ovsdb": f"tcp:127.0.0.1:{dpu.ovsdb_tcp_port}", "openflow": dpu.endpoint.target(),
              "bridge": dpu.bridge, "datapath_type": "netdev", "host_port": pf}  # fmt: skip
        host = EmulatedHost(parse_config({"name": name, "rundir": "/run/uno-test", "vms": 1, "snics": [bf],
                                          "host": external(ovs, f"{name}-ubr")}))  # fmt: skip
        status = host.up()
        assert ovs.vsctl("get", "Port", pf, "external_ids:uno-owner").strip('"\n') == name
        number = int(ovs.vsctl("get", "Interface", pf, "ofport"))
        assert (
            status["snics"][0]["pcie"]["host_port"] == pf
            and status["snics"][0]["pcie"]["host_ofport"] == number
        )
        conf = json.loads((host.rundir / "oneswitch" / "config.json").read_text())
        assert conf["pcie"] == [{"snic": "snic0", "host_port": number, "snic_port": nm.SNIC_PCIE_OFPORT}]
        listen = status["oneswitch"]["listen"]
        for f in (f"in_port={nm.vport_vm(0)},actions=output:{nm.vport_eth(0, 0)}",
                  f"in_port={nm.vport_eth(0, 0)},actions=output:{nm.vport_vm(0)}"):  # fmt: skip
            ofctl(status, "add-flow", listen, f)
        assert wait(
            lambda: ping(nm.ns_vm(name, 0), nm.ip_outside(0, 0), count=1), 30, "vm0 -> the DPU's wire"
        )
        host.down()
        assert Path(f"/sys/class/net/{pf}").exists() and pf not in ovs.vsctl("list", "Port")
        assert machine_snapshot(name) == EMPTY
    finally:
        if host is not None:
            host.down()
        dpu.down()
        for ns in (f"{d}-wire", dpu.netns):
            netns_del(ns)


@pytest.mark.parametrize(
    "case",
    [
        "no_socket",
        "dead_socket",
        "foreign_bridge",
        "other_uno",
        "missing_tap",
        "system_datapath",
        "port_of_op",
        "vhost_no_dpdk",
    ],
)
def test_bad_config_is_one_line_naming_the_key_and_changes_nothing(op, tmp_path, case):
    ovs, foreign, _ = op
    name = unique_name()
    host_cfg, vms, key = external(ovs, f"{name}-ubr"), 1, ""
    if case == "no_socket":
        host_cfg, key = (
            {"switch": {"mode": "external", "ovsdb": f"unix:{tmp_path}/none.sock"}},
            "host.switch.ovsdb",
        )
    elif case == "dead_socket":  # a socket file nobody listens on (a stopped ovsdb-server's)
        import socket

        s = socket.socket(socket.AF_UNIX)
        s.bind(str(tmp_path / "dead.sock"))
        s.close()
        host_cfg, key = (
            {"switch": {"mode": "external", "ovsdb": f"unix:{tmp_path}/dead.sock"}},
            "host.switch.ovsdb",
        )
    elif case == "foreign_bridge":
        host_cfg, key = external(ovs, foreign), "host.switch.bridge"
    elif case == "other_uno":
        other = f"o{name[1:]}-ob"  # not named like the host: machine_snapshot(name) looks for those
        ovs.vsctl("add-br", other, "--", "set", "Bridge", other, "datapath_type=netdev",
                  "external_ids:uno-owner=someone")  # fmt: skip
        host_cfg, key = external(ovs, other, adopt=True), "host.switch.bridge"
    elif case == "missing_tap":
        vms, key = [{"name": "vm0", "port": {"type": "tap", "name": f"{name}-tap"}}], "vms[0].port.name"
    elif case == "system_datapath":
        host_cfg, key = external(ovs, f"{name}-ubr", datapath_type="system"), "host.switch.datapath_type"
    elif case == "vhost_no_dpdk":  # this OVS has no DPDK: no vhost-user port
        vms, key = (
            [{"name": "vm0", "port": {"type": "vhostuser", "socket": f"{tmp_path}/vm0.sock"}}],
            "vms[0].port",
        )
    elif case == "port_of_op":  # the sNIC's link named as a port of the operator's bridge
        vms, key = 1, "snics[0].host_port"
    snics = [{"id": "snic0", "host_port": f"{foreign.split('-')[0]}-fa"}] if case == "port_of_op" else None
    br_before, before = ovs.vsctl("list-br"), ovs.snapshot(foreign)
    try:
        cfg = {"name": name, "rundir": "/run/uno-test", "vms": vms, "host": host_cfg, "oneswitch": {"enabled": True},
               **({"snics": snics} if snics else {})}  # fmt: skip
        host = EmulatedHost(parse_config(cfg))
        if case == "system_datapath" and Path("/sys/module/openvswitch").exists():
            pytest.skip("the openvswitch module is loaded here: system is a valid datapath")
        with pytest.raises(DatapathError) as err:
            host.up()
        msg = str(err.value)
        assert msg.startswith(f"config: {key}: ") and "\n" not in msg, msg
        assert ovs.vsctl("list-br") == br_before
        assert ovs.snapshot(foreign) == before
        assert machine_snapshot(name) == EMPTY
    finally:
        if case == "other_uno":
            ovs.vsctl("del-br", f"o{name[1:]}-ob")


def test_uno_up_cli_prints_the_key_of_a_bad_external_config(op, tmp_path):
    """The CLI's one line for an OVSDB that does not answer (and the unknown-mode parse error)."""
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(f"name: {unique_name()}\nrundir: /run/uno-test\n"
                   f"host: {{switch: {{mode: external, ovsdb: 'unix:{tmp_path}/x.sock'}}}}\n")  # fmt: skip
    res = uno_cli("up", "--config", str(cfg))
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "config: host.switch.ovsdb:" in lines[0] and "does not answer" in lines[0], (
        lines
    )
    cfg.write_text("host: {switch: {mode: borrowed}}\n")
    res = uno_cli("up", "--config", str(cfg))
    assert (
        res.returncode != 0
        and "config: host.switch.mode: 'borrowed' is not one of: managed, external" in res.stderr
    )
    with pytest.raises(CliError, match="host.switch.mode"):
        parse_config({"host": {"switch": {"mode": "borrowed"}}})
