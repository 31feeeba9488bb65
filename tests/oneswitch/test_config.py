"""OneSwitch's part of the host config and naming (pure: no root, no jar)."""

from __future__ import annotations

import os

import pytest

from domain.errors import CliError
from emulated_host import naming as nm
from emulated_host.config import parse_config
from emulated_host.oneswitch import build_config, l2_flows, select_hash_opts


def test_defaults_enable_oneswitch_without_controllers():
    cfg = parse_config({})
    assert cfg.oneswitch.enabled is True and cfg.oneswitch.controllers == () and cfg.oneswitch.token is None
    assert parse_config({"oneswitch": {"enabled": False}}).oneswitch.enabled is False


@pytest.mark.parametrize(
    "raw,field",
    [
        ({"oneswitch": []}, "oneswitch"),
        ({"oneswitch": {"enabled": "yes"}}, "oneswitch.enabled"),
        ({"oneswitch": {"enabled": 1}}, "oneswitch.enabled"),
        ({"oneswitch": {"nope": 1}}, "oneswitch.nope"),
        ({"oneswitch": {"controllers": "tcp:127.0.0.1:6653"}}, "oneswitch.controllers"),
        ({"oneswitch": {"controllers": ["tcp:127.0.0.1:6653", "ptcp:6653"]}}, "oneswitch.controllers[1]"),
        ({"oneswitch": {"controllers": ["tcp:127.0.0.1:70000"]}}, "oneswitch.controllers[0]"),
        ({"oneswitch": {"controllers": [6653]}}, "oneswitch.controllers[0]"),
        ({"oneswitch": {"token": "short"}}, "oneswitch.token"),
        ({"oneswitch": {"token": "has space in it"}}, "oneswitch.token"),
        ({"oneswitch": {"token": 12345678}}, "oneswitch.token"),
        ({"oneswitch": {"wire_vlans": 3}}, "oneswitch.wire_vlans"),
        ({"oneswitch": {"wire_vlans": 0}}, "oneswitch.wire_vlans"),
        ({"oneswitch": {"wire_vlans": "2"}}, "oneswitch.wire_vlans"),
        ({"oneswitch": {"wire_vlans": True}}, "oneswitch.wire_vlans"),
        ({"oneswitch": {"wire_vlans": 2.0}}, "oneswitch.wire_vlans"),
        ({"oneswitch": {"carrier": "MPLS"}}, "oneswitch.carrier"),
        ({"oneswitch": {"carrier": 1}}, "oneswitch.carrier"),
        ({"oneswitch": {"supervise": "yes"}}, "oneswitch.supervise"),
        ({"oneswitch": {"port_names": ["wire{n}"]}}, "oneswitch.port_names"),
        ({"oneswitch": {"port_names": {"pcie": "p{n}"}}}, "oneswitch.port_names.pcie"),
        ({"oneswitch": {"port_names": {"wire": "wire"}}}, "oneswitch.port_names.wire"),
        ({"oneswitch": {"port_names": {"vm": "vm{n}{n}"}}}, "oneswitch.port_names.vm"),
        ({"oneswitch": {"port_names": {"nf": "nf-{n}"}}}, "oneswitch.port_names.nf"),
        ({"oneswitch": {"port_names": {"wire": "a-very-long-name{n}"}}}, "oneswitch.port_names.wire"),
        ({"oneswitch": {"port_names": {"vm": "vm {n}"}}}, "oneswitch.port_names.vm"),
        ({"oneswitch": {"select_hash": "l4"}}, "oneswitch.select_hash"),
    ],
)
def test_bad_oneswitch_config_names_the_field(raw, field):
    with pytest.raises(CliError) as exc:
        parse_config(raw)
    assert str(exc.value).startswith(f"config: {field}:"), str(exc.value)


def test_virtual_port_numbering_is_fixed_and_disjoint():
    eth = {nm.vport_eth(k, j) for k in range(8) for j in range(8)}
    vms = {nm.vport_vm(i) for i in range(33)}
    assert min(eth) == 1 and max(eth) == 64 and len(eth) == 64
    assert min(vms) == 100 and max(vms) < nm.VPORT_NF_BASE
    assert not eth & vms
    assert nm.dpid("abcdef") == "0000616263646566" and len(nm.dpid("a")) == 16


def test_generated_config_maps_vms_and_ethernet_ports_and_pcie_pairs(tmp_path):
    cfg = parse_config(
        {
            "name": "h1",
            "vms": 2,
            "snics": [{"eth_ports": 2}, {}],
            "oneswitch": {"controllers": ["tcp:127.0.0.1:6653"]},
        }
    )
    conf = build_config(
        cfg,
        {"host": "tcp:127.0.0.1:1", "snic0": "tcp:127.0.0.1:2", "snic1": "tcp:127.0.0.1:3"},
        7000,
        7001,
        tmp_path,
    )
    assert (
        conf["dpid"] == nm.dpid("h1")
        and conf["listen"] == "ptcp:7000:127.0.0.1"
        and conf["rest"] == "127.0.0.1:7001"
    )
    assert conf["controllers"] == ["tcp:127.0.0.1:6653"] and conf["token"] is None
    assert conf["wire_vlans"] == 1  # the default; 2 where QinQ frames arrive
    qinq = parse_config({"oneswitch": {"wire_vlans": 2}})
    assert build_config(qinq, {"host": "tcp:127.0.0.1:1"}, 1, 2, tmp_path)["wire_vlans"] == 2
    assert conf["carrier"] == "auto"
    mpls = parse_config({"oneswitch": {"carrier": "mpls"}})
    assert build_config(mpls, {"host": "tcp:127.0.0.1:1"}, 1, 2, tmp_path)["carrier"] == "mpls"
    assert [s["id"] for s in conf["switches"]] == ["host", "snic0", "snic1"]
    assert conf["pcie"] == [
        {"snic": "snic0", "host_port": 1, "snic_port": 100},
        {"snic": "snic1", "host_port": 2, "snic_port": 100},
    ]
    assert [(p["vport"], p["switch"], p["port"]) for p in conf["ports"]] == [
        (1, "snic0", 1),
        (2, "snic0", 2),
        (9, "snic1", 1),
        (100, "host", 100),
        (101, "host", 101),
    ]
    # Neutral names: nothing in them tells which switch serves a port (OneSwitch's REST does).
    assert [p["name"] for p in conf["ports"]] == ["wire0", "wire1", "wire2", "vm-0", "vm-1"]


def test_l2_flows_unicast_per_mac_and_broadcast_to_every_other_port():
    status = {
        "vms": [{"mac": "02:00:00:00:00:01"}, {"mac": "02:00:00:00:00:02"}],
        "snics": [{"eth_ports": [{"mac": "02:00:00:00:01:01"}]}],
    }
    flows = l2_flows(status)
    assert "table=0,priority=10,dl_dst=02:00:00:00:00:02,actions=output:101" in flows
    assert "table=0,priority=10,dl_dst=02:00:00:00:01:01,actions=output:1" in flows
    assert "table=0,priority=20,in_port=1,dl_dst=ff:ff:ff:ff:ff:ff,actions=output:100,output:101" in flows
    assert len(flows) == 6


def _bluefield(openflow: str) -> dict:
    return {"backend": "bluefield", "ovsdb": "tcp:192.0.2.10:6640", "openflow": openflow, "bridge": "br-dpu"}


@pytest.mark.parametrize(
    "openflow", ["unix:/run/dpu/br-dpu.mgmt", "ssl:192.0.2.10:6634", "tcp:192.0.2.10:0", "tcp:[::1]:6634"]
)
def test_bluefield_given_to_oneswitch_needs_a_tcp_openflow_listener(openflow):
    with pytest.raises(CliError) as exc:
        parse_config({"snics": [{}, _bluefield(openflow)]})
    assert str(exc.value).startswith("config: snics[1].openflow:"), str(exc.value)
    assert "tcp:HOST:PORT" in str(exc.value)
    # Without OneSwitch the host drives the DPU itself, over any OVS remote.
    parse_config({"snics": [_bluefield(openflow)], "oneswitch": {"enabled": False}})


def test_generated_config_gives_a_bluefield_snic_to_oneswitch_like_an_emulated_one(tmp_path):
    cfg = parse_config(
        {"name": "h2", "vms": 1, "snics": [{}, {**_bluefield("tcp:192.0.2.10:6634"), "eth_ports": 2}]}
    )
    switches = {"host": "tcp:127.0.0.1:1", "snic0": "tcp:127.0.0.1:2", "snic1": "tcp:192.0.2.10:6634"}
    conf = build_config(cfg, switches, 7000, 7001, tmp_path)
    # The DPU's bridge is the operator's: shared (OneSwitch changes only what it owns there); the emulated
    # sNIC's and the host's are UNO's own (no key: an older jar reads the config too).
    assert conf["switches"][2] == {"id": "snic1", "openflow": "tcp:192.0.2.10:6634", "shared": True}
    assert conf["switches"][:2] == [
        {"id": "host", "openflow": "tcp:127.0.0.1:1"},
        {"id": "snic0", "openflow": "tcp:127.0.0.1:2"},
    ]
    assert conf["pcie"][1] == {"snic": "snic1", "host_port": 2, "snic_port": 100}
    assert [(p["vport"], p["switch"], p["port"]) for p in conf["ports"]] == [
        (1, "snic0", 1),
        (9, "snic1", 1),
        (10, "snic1", 2),
        (100, "host", 100),
    ]


def test_oneswitch_reaches_an_emulated_bridge_by_its_unix_listener_or_its_relay(tmp_path):
    from emulated_host.oneswitch import south_target
    from host_datapath.of_endpoint import OpenFlowTcpEndpoint
    from host_datapath.sysutil import DatapathError

    ep = OpenFlowTcpEndpoint(tmp_path, "h1-hbr")
    for mode in (None, "", "unix"):
        assert south_target(mode)(ep) == f"unix:{tmp_path}/h1-hbr.ctl"
    (tmp_path / "of-relay.port").write_text("4321")
    (tmp_path / "of-relay.pid").write_text(str(os.getpid()))  # a live pid: the relay "runs"
    assert south_target("tcp")(ep) == "tcp:127.0.0.1:4321"
    with pytest.raises(DatapathError, match="UNO_ONESWITCH_SOUTH='udp'"):
        south_target("udp")


def test_the_relay_starts_on_a_port_of_its_own_when_its_first_is_taken(tmp_path, monkeypatch):
    """The relay's port is chosen free and bound later: taken in between by another listener, the relay (a real
    socat) starts on a new port, not on the one that other program answers."""
    import socket

    from host_datapath import of_endpoint
    from host_datapath.sysutil import free_port, session_listens

    ep = of_endpoint.OpenFlowTcpEndpoint(tmp_path, "h1-hbr")
    with socket.socket(socket.AF_UNIX) as switch, socket.socket() as other:
        switch.bind(str(ep.unix_socket))
        switch.listen(1)
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        taken = other.getsockname()[1]
        handed = iter([taken])
        monkeypatch.setattr(of_endpoint, "free_port", lambda: next(handed, None) or free_port())
        try:
            target = ep.start()
            port = int(target.rsplit(":", 1)[1])
            assert port != taken and session_listens(ep.pid(), port), (target, taken)
            assert not session_listens(ep.pid(), taken)  # the other program's listener is not the relay's
            with socket.create_connection(("127.0.0.1", port), timeout=5):
                switch.settimeout(5)
                switch.accept()[0].close()  # the connection reached the switch's unix listener
        finally:
            ep.stop()
    assert ep.target() is None


def test_port_names_are_configurable(tmp_path):
    cfg = parse_config({"vms": 1, "oneswitch": {"port_names": {"wire": "uplink{n}", "vm": "tenant{n}"}}})
    conf = build_config(cfg, {"host": "tcp:127.0.0.1:1", "snic0": "tcp:127.0.0.1:2"}, 1, 2, tmp_path)
    assert [p["name"] for p in conf["ports"]] == ["uplink0", "tenant0"]
    assert cfg.oneswitch.port_names.nf_name("firewall-eu-west-1") == "nf-firewall-eu-"  # 15 bytes at most


def test_select_hash_is_symmetric_unless_configured():
    assert parse_config({}).oneswitch.select_hash == "symmetric"
    assert select_hash_opts(parse_config({}).oneswitch.select_hash) == []
    five = parse_config({"oneswitch": {"select_hash": "5tuple"}}).oneswitch.select_hash
    assert select_hash_opts(five) == ["-Doneswitch.select_method=dp_hash"]
    ovs = parse_config({"oneswitch": {"select_hash": "ovs"}}).oneswitch.select_hash
    assert select_hash_opts(ovs) == ["-Doneswitch.select_method=ovs"]
