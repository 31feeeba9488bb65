"""ovs-ofctl (an independent OpenFlow 1.3 client) drives OneSwitch as it would drive OVS: show, add-flow,
dump-flows with counters that grow with real packets, del-flows, dump-ports, packet-out."""

from __future__ import annotations

import re

import pytest

from host_datapath.switch import parse_dump_flows, parse_dump_ports
from testkit.oneswitch import equiv, rulegen
from testkit.oneswitch.pktio import collect

from .conftest import ONESWITCH, VPORTS

pytestmark = ONESWITCH


def frames(first_id: int, n: int) -> list[bytes]:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    return [
        bytes(
            Ether(src=rulegen.MACS[0], dst=rulegen.MACS[1])
            / IP(src="10.99.0.1", dst="10.99.0.2")
            / UDP(sport=5001, dport=5001)
            / Raw(rulegen.marker(first_id + i) + b"x" * 20)
        )
        for i in range(n)
    ]


@pytest.fixture
def sut(os_host):
    t = equiv.Target("oneswitch", os_host.listen, os_host.endpoints()).open()
    equiv.clear(t)
    yield t
    equiv.clear(t)
    t.close()


def received(t: equiv.Target) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    for v, f in collect(t.endpoints):
        if rulegen.marker_id(f) is not None:
            out.setdefault(v, []).append(f)
    return out


def send(t: equiv.Target, vport: int, pkts: list[bytes]) -> None:
    for ep in [ep for eps in t.endpoints.values() for ep in eps]:
        ep.drain()
    for f in pkts:
        t.sender(vport).send(f)


def test_show_lists_the_virtual_ports(sut, os_host):
    r = sut.ofctl("show")
    assert r.returncode == 0, r.stderr
    shown = {int(m) for m in re.findall(r"^\s*(\d+)\(", r.stdout, re.M)}
    assert shown == set(VPORTS), r.stdout
    assert f"dpid:{os_host.status['oneswitch']['dpid']}" in r.stdout


def test_plain_ovs_ofctl_with_names_table_features(os_host):
    """ovs-ofctl as an operator types it: it looks up port and table names (PORT_DESC, TABLE_FEATURES)."""
    import subprocess

    def plain(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", args[0], os_host.listen, *args[1:]],
                              capture_output=True, text=True, timeout=60)  # fmt: skip

    tf = plain("dump-table-features")
    assert tf.returncode == 0 and "WARN" not in tf.stderr, tf.stderr[:500]
    assert "table 0" in tf.stdout
    try:
        # Neutral names (oneswitch.port_names): the controller is not told which sNIC a wire port is on.
        add = plain("add-flow", "table=0,priority=5,in_port=vm-0,actions=output:wire0")
        assert add.returncode == 0, add.stderr[:500]
        dump = plain("dump-flows")  # not a terminal: numbers
        assert dump.returncode == 0 and "in_port=100 actions=output:1" in dump.stdout, dump.stdout
        named = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--names", "dump-flows", os_host.listen],
                               capture_output=True, text=True, timeout=60)  # fmt: skip
        assert 'in_port="vm-0"' in named.stdout and "wire0" in named.stdout, named.stdout + named.stderr
        shown = plain("show").stdout
        assert "snic" not in shown and "host" not in shown.replace("dpid", ""), shown  # nothing tells where
    finally:
        plain("del-flows")


def test_add_flow_dump_flows_counters_grow_and_del_flows(sut):
    assert sut.ofctl("add-flow", "table=0,priority=100,in_port=100,actions=output:1").returncode == 0
    assert sut.ofctl("add-flow", "table=0,priority=90,in_port=1,actions=output:201").returncode == 0
    flows = {f.match: f for f in parse_dump_flows(sut.ofctl("dump-flows").stdout)}
    assert set(flows) == {"in_port=100", "in_port=1"}
    assert flows["in_port=100"].actions == "output:1" and flows["in_port=100"].priority == 100
    assert flows["in_port=100"].packets == 0
    send(sut, 100, frames(0, 5))  # VM 0 (host switch) -> Ethernet port 0 (snic0): crosses PCIe
    got = received(sut)
    assert len(got.get(1, [])) == 5 and set(got) == {1}, got
    send(sut, 1, frames(10, 3))  # Ethernet port 0 -> NF on the same sNIC
    got = received(sut)
    assert len(got.get(201, [])) == 3 and set(got) == {201}, got
    flows = {f.match: f for f in parse_dump_flows(sut.ofctl("dump-flows").stdout)}
    assert flows["in_port=100"].packets == 5 and flows["in_port=1"].packets == 3
    assert flows["in_port=100"].bytes == 5 * len(frames(0, 1)[0])
    send(sut, 100, frames(20, 4))
    received(sut)
    flows = {f.match: f for f in parse_dump_flows(sut.ofctl("dump-flows").stdout)}
    assert flows["in_port=100"].packets == 9  # the counters grow with real packets
    agg = sut.ofctl("dump-aggregate")
    assert agg.returncode == 0 and "packet_count=12" in agg.stdout, agg.stdout
    assert sut.ofctl("del-flows", "in_port=100").returncode == 0
    assert [f.match for f in parse_dump_flows(sut.ofctl("dump-flows").stdout)] == ["in_port=1"]
    send(sut, 100, frames(30, 3))
    assert received(sut) == {}  # deleted: dropped (table miss)
    assert sut.ofctl("del-flows").returncode == 0
    assert parse_dump_flows(sut.ofctl("dump-flows").stdout) == []
    send(sut, 1, frames(40, 3))
    assert received(sut) == {}


def test_dump_ports_counts_per_virtual_port(sut):
    before = parse_dump_ports(sut.ofctl("dump-ports").stdout)
    assert set(before) == set(VPORTS)
    assert sut.ofctl("add-flow", "in_port=101,actions=output:200").returncode == 0
    send(sut, 101, frames(50, 7))
    assert len(received(sut).get(200, [])) == 7
    after = parse_dump_ports(sut.ofctl("dump-ports").stdout)
    assert after[101]["rx_packets"] - before[101]["rx_packets"] >= 7
    assert after[200]["tx_packets"] - before[200]["tx_packets"] >= 7
    single = sut.ofctl("dump-ports", "200")
    assert single.returncode == 0 and set(parse_dump_ports(single.stdout)) == {200}


@pytest.mark.parametrize("out_port", [101, 2, 201])
def test_packet_out_reaches_the_right_namespace(sut, out_port):
    frame = frames(60 + out_port, 1)[0]
    send(sut, 100, [])  # just drains
    r = sut.ofctl("packet-out", f"in_port=controller,packet={frame.hex()},actions=output:{out_port}")
    assert r.returncode == 0, r.stderr
    got = received(sut)
    assert got == {out_port: [frame]}, got


def test_packet_out_from_a_virtual_in_port_runs_the_table(sut):
    """in_port=V with output:TABLE: the pipeline runs as if the frame had come in at V."""
    assert sut.ofctl("add-flow", "in_port=2,actions=output:100").returncode == 0
    frame = frames(70, 1)[0]
    send(sut, 100, [])
    r = sut.ofctl("packet-out", f"in_port=2,packet={frame.hex()},actions=output:table")
    assert r.returncode == 0, r.stderr
    assert received(sut) == {100: [frame]}


def test_mod_flows_non_strict_takes_effect_on_the_switches(sut, os_host):
    from .conftest import physical_errors

    errors = physical_errors(os_host.client)
    assert (
        sut.ofctl(
            "add-flow", "table=0,priority=50,in_port=100,dl_vlan=10,actions=pop_vlan,output:1"
        ).returncode
        == 0
    )
    r = sut.ofctl("mod-flows", "table=0,in_port=100,dl_vlan=10,actions=pop_vlan,output:2")
    assert r.returncode == 0, r.stderr
    from scapy.layers.l2 import Dot1Q, Ether
    from scapy.packet import Raw

    frame = bytes(
        Ether(src=rulegen.MACS[0], dst=rulegen.MACS[1]) / Dot1Q(vlan=10) / Raw(rulegen.marker(80) + b"m" * 30)
    )
    send(sut, 100, [frame])
    got = received(sut)
    assert physical_errors(os_host.client) == errors, "a physical switch refused the translated MODIFY"
    assert set(got) == {2}, got  # the modified actions, untagged


def _dump(sut) -> list[tuple[int, str, str]]:
    return sorted((f.priority, f.match, f.actions) for f in parse_dump_flows(sut.ofctl("dump-flows").stdout))


def test_bundle_add_flows_applies_all(sut, os_host):
    """`ovs-ofctl --bundle add-flows` (the ONF bundle extension of OF1.3): every rule, at once."""
    from .conftest import physical_errors

    errors = physical_errors(os_host.client)
    rules = "table=0,priority=100,in_port=100,actions=output:1\ntable=0,priority=90,in_port=1,actions=output:201\n"
    r = sut.ofctl("add-flows", "--bundle", "-", stdin=rules)
    assert r.returncode == 0, r.stderr
    assert _dump(sut) == [(90, "in_port=1", "output:201"), (100, "in_port=100", "output:1")]
    send(sut, 100, frames(100, 3))  # crosses PCIe
    assert {v: len(f) for v, f in received(sut).items()} == {1: 3}
    send(sut, 1, frames(110, 2))
    assert {v: len(f) for v, f in received(sut).items()} == {201: 2}
    assert physical_errors(os_host.client) == errors


def test_bundle_with_one_bad_rule_changes_nothing(sut):
    assert sut.ofctl("add-flow", "table=0,priority=80,in_port=101,actions=output:200").returncode == 0
    before = _dump(sut)
    rules = (
        "table=0,priority=100,in_port=100,actions=output:1\n"
        "table=0,priority=81,in_port=101,actions=NORMAL\n"  # refused by OneSwitch (README table)
    )
    r = sut.ofctl("add-flows", "--bundle", "-", stdin=rules)
    assert r.returncode != 0
    assert "OFPBAC_BAD_OUT_PORT" in r.stderr and "OFPBFC_MSG_FAILED" in r.stderr, r.stderr
    assert _dump(sut) == before
    send(sut, 100, frames(120, 2))
    assert received(sut) == {}  # the good rule of the failed bundle was not installed either
    send(sut, 101, frames(125, 2))
    assert {v: len(f) for v, f in received(sut).items()} == {200: 2}


def test_bundle_replace_flows(sut, os_host):
    """`ovs-ofctl --bundle replace-flows`: the table becomes the file's, in one bundle (make-before-break on
    each physical switch), and traffic follows the new rules."""
    from .conftest import physical_errors

    errors = physical_errors(os_host.client)
    assert sut.ofctl("add-flow", "table=0,priority=100,in_port=100,actions=output:1").returncode == 0
    assert sut.ofctl("add-flow", "table=0,priority=70,in_port=101,actions=output:2").returncode == 0
    new = "table=0,priority=100,in_port=100,actions=output:101\ntable=0,priority=60,in_port=1,actions=output:100\n"
    r = sut.ofctl("replace-flows", "--bundle", "-", stdin=new)
    assert r.returncode == 0, r.stderr
    assert _dump(sut) == [(60, "in_port=1", "output:100"), (100, "in_port=100", "output:101")]
    send(sut, 100, frames(130, 2))
    assert {v: len(f) for v, f in received(sut).items()} == {101: 2}
    send(sut, 101, frames(135, 2))
    assert received(sut) == {}  # its rule is gone
    send(sut, 1, frames(140, 2))
    assert {v: len(f) for v, f in received(sut).items()} == {100: 2}
    assert physical_errors(os_host.client) == errors
