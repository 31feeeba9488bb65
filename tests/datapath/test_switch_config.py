"""The host switch's configuration (pure): `host.switch.*`, VMs as real ports, `snics[].host_port`; each bad
value is one line naming its key. Plus the pure helpers of the external switch (free OpenFlow numbers, the
kernel datapath's check, the recorded switch, OneSwitch's config from actual port numbers)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from domain.errors import CliError
from emulated_host.config import load_config, parse_config
from emulated_host.host import EmulatedHost
from emulated_host.oneswitch import HostPorts, build_config
from emulated_host.switch_config import (
    DEFAULT_EXTERNAL_OVSDB,
    HostSwitchConfig,
    VmConfig,
    parse_host_switch,
)
from host_datapath.dpdk_options import DpdkOptions
from host_datapath.external_switch import ExternalHostSwitch
from host_datapath.host_switch import HostSwitch
from host_datapath.ovsdb_probe import probe_ovsdb
from host_datapath.switch import free_number
from host_datapath.sysutil import DatapathError, kernel_datapath_problem
from testkit.hosts import EMPTY, machine_snapshot, needs_root, unique_name

REPO = Path(__file__).resolve().parents[2]
EXT = {"mode": "external", "ovsdb": "unix:/var/run/openvswitch/db.sock", "bridge": "br-uno"}


def cfg(switch: dict | None = None, **top) -> object:
    return parse_config({**({"host": {"switch": switch}} if switch is not None else {}), **top})


def fails(key: str, data: dict) -> str:
    with pytest.raises(CliError) as err:
        parse_config(data)
    msg = str(err.value)
    assert msg.startswith(f"config: {key}: ") and "\n" not in msg, msg
    return msg


def test_default_is_the_managed_netdev_switch():
    c = cfg()
    assert c.switch == HostSwitchConfig() and not c.switch.external and c.switch.dpdk is None
    assert c.host_bridge == "uno-hbr"
    assert c.vm_specs == (VmConfig("vm0"), VmConfig("vm1")) and all(v.emulated for v in c.vm_specs)


def test_external_keys_and_defaults():
    c = cfg(EXT)
    assert c.switch == HostSwitchConfig("external", EXT["ovsdb"], "br-uno", "netdev", False)
    assert c.host_bridge == "br-uno"
    bare = cfg({"mode": "external"})
    assert bare.switch.ovsdb == DEFAULT_EXTERNAL_OVSDB and bare.host_bridge == "uno-hbr"
    tcp = cfg({**EXT, "ovsdb": "tcp:192.0.2.1:6640", "adopt": True, "datapath_type": "system"})
    assert tcp.switch.adopt and tcp.switch.datapath_type == "system"
    assert cfg({**EXT, "ovsdb": "tcp:[fd00::1]:6640"}).switch.ovsdb == "tcp:[fd00::1]:6640"


def test_the_recorded_switch_round_trips():
    sw = cfg({**EXT, "adopt": True}).switch
    assert HostSwitchConfig.from_dict(sw.as_dict()) == sw
    assert HostSwitchConfig.from_dict({}) == HostSwitchConfig()  # a host brought up before the key existed


@pytest.mark.parametrize(
    "switch,key",
    [
        ({"mode": "borrowed"}, "host.switch.mode"),
        ({"mode": 1}, "host.switch.mode"),
        ({"colour": "red"}, "host.switch.colour"),
        ({"datapath_type": "dpdk"}, "host.switch.datapath_type"),
        ({"ovsdb": "unix:/x"}, "host.switch.ovsdb"),  # managed: UNO's own OVS
        ({"bridge": "br0"}, "host.switch.bridge"),
        ({"adopt": True}, "host.switch.adopt"),
        ({**EXT, "ovsdb": "tcp:192.0.2.1"}, "host.switch.ovsdb"),
        ({**EXT, "ovsdb": "tcp:192.0.2.1:70000"}, "host.switch.ovsdb"),
        ({**EXT, "ovsdb": "ssl:192.0.2.1:6640"}, "host.switch.ovsdb"),
        ({**EXT, "ovsdb": "unix:relative/db.sock"}, "host.switch.ovsdb"),
        ({**EXT, "ovsdb": "unix:/" + "a" * 120}, "host.switch.ovsdb"),
        ({**EXT, "bridge": "a-bridge-name-too-long"}, "host.switch.bridge"),
        ({**EXT, "bridge": "br/0"}, "host.switch.bridge"),
        ({**EXT, "adopt": "yes"}, "host.switch.adopt"),
        ({**EXT, "dpdk": {}}, "host.switch.dpdk"),  # the operator's OVS-DPDK settings are the operator's
        ({"datapath_type": "system", "dpdk": {}}, "host.switch.dpdk"),
        ({"dpdk": {"hugepages_mb": 3}}, "host.switch.dpdk.hugepages_mb"),
        ({"dpdk": {"pages": 3}}, "host.switch.dpdk.pages"),
    ],
)
def test_bad_switch_keys_name_the_key(switch, key):
    fails(key, {"host": {"switch": switch}})


def test_host_takes_only_switch():
    fails("host.agent", {"host": {"agent": {}}})
    fails("host", {"host": "external"})


def test_dpdk_options_are_parsed_into_the_switch():
    sw = parse_host_switch({"switch": {"dpdk": {"hugepages_mb": 256, "pmd_cpu_mask": "0x2"}}}, cpus={0, 1})
    assert isinstance(sw.dpdk, DpdkOptions)
    assert (sw.dpdk.hugepages_mb, sw.dpdk.pmd_cpu_mask, sw.dpdk.socket_mem) == (256, "0x2", "256")
    with pytest.raises(CliError, match=r"^config: host.switch.dpdk.pmd_cpu_mask: "):
        parse_host_switch({"switch": {"dpdk": {"pmd_cpu_mask": "0x3"}}}, cpus={0, 1})  # every CPU


def test_vms_as_real_ports():
    c = cfg(EXT, vms=[{"name": "web"}, {"name": "db", "port": {"type": "tap", "name": "tap-db"}},
                      {"name": "vm2", "port": {"type": "vhostuser", "socket": "/run/vm2.sock"}}])  # fmt: skip
    assert c.vms == 3
    assert c.vm_specs == (
        VmConfig("web"),
        VmConfig("db", "tap", "tap-db"),
        VmConfig("vm2", "vhostuser", None, "/run/vm2.sock"),
    )
    assert c.vm_specs[2].vm_port().iface().options == {"vhost-server-path": "/run/vm2.sock"}
    assert c.vm_specs[0].vm_port().iface() is None
    # a managed OVS-DPDK switch takes vhost-user VMs too
    dp = parse_config({"host": {"switch": {"dpdk": {}}}, "vms": [{"name": "a", "port": {"type": "vhostuser",
                                                                                         "socket": "/s"}}]})  # fmt: skip
    assert dp.vm_specs[0].type == "vhostuser"


@pytest.mark.parametrize(
    "vms,switch,key",
    [
        ([{"name": "a", "port": {"type": "tap", "name": "t0"}}], None, "vms[0].port.type"),  # managed
        ([{"name": "a", "port": {"type": "vhostuser", "socket": "/s"}}], None, "vms[0].port.type"),
        ([{"name": "a", "port": {"type": "vhostuser", "socket": "/s"}}], {**EXT, "datapath_type": "system"},
         "vms[0].port.type"),
        ([{"name": "a", "port": {"type": "vhostuser", "socket": "rel.sock"}}], EXT, "vms[0].port.socket"),
        ([{"name": "a", "port": {"type": "vhostuser"}}], EXT, "vms[0].port.socket"),
        ([{"name": "a", "port": {"type": "tap"}}], EXT, "vms[0].port.name"),
        ([{"name": "a", "port": {"type": "tap", "name": "t0", "socket": "/s"}}], EXT, "vms[0].port.socket"),
        ([{"name": "a", "port": {"type": "veth", "name": "x"}}], EXT, "vms[0].port"),
        ([{"name": "a", "port": {"type": "internal"}}], EXT, "vms[0].port.type"),
        ([{"name": "a", "port": {"kind": "tap"}}], EXT, "vms[0].port.kind"),
        ([{"name": "A"}], EXT, "vms[0].name"),
        ([{}], EXT, "vms[0].name"),
        ([{"name": "a"}, {"name": "a"}], EXT, "vms[1].name"),
        ([{"name": "a", "port": {"type": "tap", "name": "t0"}}, {"name": "b", "port": {"type": "tap", "name": "t0"}}],
         EXT, "vms[1].port.name"),
        ([{"name": "a", "port": {"type": "tap", "name": "br-uno"}}], EXT, "vms[0].port.name"),
        ([{"name": f"v{i}"} for i in range(33)], EXT, "vms"),
        ("two", EXT, "vms"),
    ],
)  # fmt: skip
def test_bad_vms_name_the_key(vms, switch, key):
    fails(key, {"vms": vms, **({"host": {"switch": switch}} if switch else {})})


def test_snic_host_port():
    c = cfg(EXT, snics=[{"id": "snic0", "host_port": "pf0"}])
    assert c.snics[0].host_port == "pf0"
    fails("snics[0].host_port", {"snics": [{"id": "snic0", "host_port": "pf0"}]})  # managed: NAME-pKh
    fails("snics[1].host_port", {"host": {"switch": EXT}, "snics": [{"id": "snic0", "host_port": "pf0"},
                                                                     {"id": "snic1", "host_port": "pf0"}]})  # fmt: skip
    bf = {"id": "snic0", "backend": "bluefield", "ovsdb": "tcp:192.0.2.9:6640", "openflow": "tcp:192.0.2.9:6653",
          "bridge": "br0"}  # fmt: skip
    fails("snics[0].host_port", {"host": {"switch": EXT}, "snics": [bf]})  # a BlueField's link: named
    assert cfg(EXT, snics=[{**bf, "host_port": "enp3s0f0"}]).snics[0].host_port == "enp3s0f0"
    fails("vms[0].port.name", {"host": {"switch": EXT}, "snics": [{"id": "snic0", "host_port": "pf0"}],
                               "vms": [{"name": "a", "port": {"type": "tap", "name": "pf0"}}]})  # fmt: skip


def test_bluefield_link_by_pci_address_on_a_managed_dpdk_host():
    bf = {"id": "snic0", "backend": "bluefield", "ovsdb": "tcp:192.0.2.9:6640", "openflow": "tcp:192.0.2.9:6653",
          "bridge": "br0", "host_port": "0000:03:00.0"}  # fmt: skip
    dpdk = {"dpdk": {"hugepages_mb": 128, "pci": ["0000:03:00.0", "0000:03:00.1"]}}
    c = cfg(dpdk, snics=[bf])
    assert c.snics[0].host_port == "0000:03:00.0"
    # not listed for DPDK to probe / not a PCI address / no DPDK / an emulated sNIC / twice: one line, the key
    assert "not in host.switch.dpdk.pci" in fails(
        "snics[0].host_port", {"host": {"switch": dpdk}, "snics": [{**bf, "host_port": "0000:04:00.0"}]}
    )
    fails("snics[0].host_port", {"host": {"switch": dpdk}, "snics": [{**bf, "host_port": "pf0"}]})
    fails("snics[0].host_port", {"snics": [bf]})
    fails(
        "snics[0].host_port",
        {"host": {"switch": dpdk}, "snics": [{"id": "snic0", "host_port": "0000:03:00.0"}]},
    )
    second = {**bf, "id": "snic1", "ovsdb": "tcp:192.0.2.10:6640", "openflow": "tcp:192.0.2.10:6653"}
    fails("snics[1].host_port", {"host": {"switch": dpdk}, "snics": [bf, second]})


def test_free_number_keeps_clear_of_taken_numbers():
    assert free_number(1, set()) == 1
    assert free_number(1, {1, 2, 3}) == 4
    assert free_number(0xFF00, {0xFF00}) == 1  # wraps
    with pytest.raises(DatapathError):
        free_number(1, set(range(1, 0xFF01)))


def test_kernel_datapath_problem(tmp_path):
    assert kernel_datapath_problem(tmp_path) is None  # the module's /sys directory is there
    msg = kernel_datapath_problem(tmp_path / "missing")
    assert msg and "openvswitch" in msg and "\n" not in msg


def test_oneswitch_config_takes_the_actual_port_numbers_and_shared_host(tmp_path):
    c = cfg(EXT, vms=[{"name": "web"}, {"name": "db", "port": {"type": "tap", "name": "tap-db"}}])
    conf = build_config(c, {"host": "unix:/x/br-uno.mgmt", "snic0": "tcp:127.0.0.1:2"}, 1, 2, tmp_path,
                        host_ports=HostPorts({1: 7}, {0: 3}), shared={"host"})  # fmt: skip
    host_ports = {p["name"]: p["port"] for p in conf["ports"] if p["switch"] == "host"}
    assert host_ports == {"vm-0": 100, "vm-1": 7}  # neutral names (oneswitch.port_names), actual numbers
    assert conf["pcie"][0]["host_port"] == 3
    assert next(s for s in conf["switches"] if s["id"] == "host")["shared"] is True


def test_oneswitch_config_carries_max_rules_of_the_snics_that_set_it(tmp_path):
    c = parse_config({"snics": [{"max_rules": 16384}, {}]})
    conf = build_config(c, {"host": "unix:/a", "snic0": "unix:/b", "snic1": "unix:/c"}, 1, 2, tmp_path)
    assert {s["id"]: s.get("max_rules") for s in conf["switches"]} == {
        "host": None,
        "snic0": 16384,
        "snic1": None,
    }


def test_the_example_server_config_parses():
    c = load_config(str(REPO / "docs" / "examples" / "host-external.yaml"))
    assert c.switch.external and c.switch.bridge == "br-uno" and c.snics[0].host_port == "enp3s0f0"
    assert [v.type for v in c.vm_specs] == ["tap", "vhostuser"]


def test_status_names_the_mode_and_bridge_of_each_kind(tmp_path):
    managed = HostSwitch("t0-h", tmp_path, "t0-hbr").switch_info()
    assert (
        managed["mode"] == "managed"
        and managed["bridge"] == "t0-hbr"
        and managed["datapath_type"] == "netdev"
    )
    ext = ExternalHostSwitch("t0", f"unix:{tmp_path}/none.sock", "br-uno")
    info = ext.switch_info()  # an OVSDB that does not answer: the configured facts and the error
    assert info["mode"] == "external" and info["bridge"] == "br-uno" and "does not answer" in info["error"]
    assert info["owner_mark"] == "external_ids:uno-owner=t0"
    ext.close()


@needs_root
@pytest.mark.skipif(Path("/sys/module/openvswitch").exists(), reason="the openvswitch module is loaded here")
def test_managed_kernel_datapath_without_the_module_is_one_line_and_makes_nothing():
    name = unique_name()
    host = EmulatedHost(parse_config({"name": name, "rundir": "/run/uno-test",
                                      "host": {"switch": {"datapath_type": "system"}}}))  # fmt: skip
    try:
        with pytest.raises(DatapathError) as err:
            host.up()
        msg = str(err.value)
        assert msg.startswith("config: host.switch.datapath_type: system: ") and "openvswitch" in msg
        assert "\n" not in msg and machine_snapshot(name) == EMPTY
    finally:
        host.down()


def test_probe_ovsdb_names_a_server_that_does_not_answer(tmp_path):
    """A listener that accepts and never answers (a hung server), a refused connection, a missing socket."""
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        with pytest.raises(DatapathError, match=r"does not answer \(no reply within 0.3 s\)"):
            probe_ovsdb(f"tcp:127.0.0.1:{port}", timeout=0.3)
    with pytest.raises(DatapathError, match="does not answer"):
        probe_ovsdb(f"tcp:127.0.0.1:{port}", timeout=0.3)  # closed now: refused
    with pytest.raises(DatapathError, match="does not answer"):
        probe_ovsdb(f"unix:{tmp_path}/none.sock", timeout=0.3)
