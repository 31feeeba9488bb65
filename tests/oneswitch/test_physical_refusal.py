"""A physical refusal is never silent: what OVS cannot do is refused up front in translation (a third VLAN
header across the PCIe link where the MPLS carrier cannot be used), and what a physical OVS still refuses is answered to the controller with an
OFPT_ERROR for ITS message (before the barrier reply covering it) and rolled back on every switch, so the
virtual rules (GET /v1/rules) and the physical flow tables are as before."""

from __future__ import annotations

import json
import struct
import subprocess

import pytest

from testkit.oneswitch import ofraw
from testkit.oneswitch.pktio import ofctl13_run

from .conftest import ONESWITCH, physical_errors

pytestmark = ONESWITCH
OFPET_BAD_ACTION = 2
OFPBAC_UNSUPPORTED_ORDER = 11


def metric(os_host, name: str) -> int:
    for line in os_host.client.metrics().splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    raise AssertionError(f"{name} missing from /metrics")


def rules_view(os_host) -> list[str]:
    return sorted(json.dumps(r.raw, sort_keys=True) for r in os_host.client.rules())


def physical_view(os_host) -> dict[str, list[tuple]]:
    """Every physical switch's flows without counters: what a leftover would change."""
    sws = os_host.host.switches()
    try:
        return {
            n: sorted((f.table, f.priority, f.match, f.actions) for f in s.driver.flow_stats())
            for n, s in sws.items()
        }
    finally:
        for s in sws.values():
            s.close()


def ofctl(os_host, *args: str) -> subprocess.CompletedProcess:
    return ofctl13_run(os_host.listen, *args, names=False)


@pytest.fixture
def clean(os_host):
    """OneSwitch with one known rule; the test checks that a refused message changes nothing."""
    for cmd in ("del-flows", "del-groups"):
        assert ofctl(os_host, cmd).returncode == 0
    assert ofctl(os_host, "add-flow", "table=0,priority=10,in_port=100,actions=output:1").returncode == 0
    ofctl(os_host, "dump-flows")  # a barrier round: installed everywhere
    yield os_host
    assert os_host.host.oneswitch().running(), "OneSwitch died"
    for cmd in ("del-flows", "del-groups"):
        ofctl(os_host, cmd)


def test_third_vlan_header_across_pcie_is_refused_up_front(clean):
    os_host = clean
    rules, phys, errors = rules_view(os_host), physical_view(os_host), physical_errors(os_host.client)
    # No eth_type in the match: the MPLS carrier (pop_mpls needs the payload type) cannot take it either, nor
    # the VLAN id rewrite (the pushed header's id is not set: not known).
    r = ofctl(os_host, "add-flow", "dl_vlan=10,actions=push_vlan:0x8100,output:200,output:1")
    assert r.returncode != 0
    assert "OFPT_ERROR" in r.stderr and "OFPBAC_UNSUPPORTED_ORDER" in r.stderr, r.stderr
    assert rules_view(os_host) == rules
    assert physical_view(os_host) == phys, "a physical leftover"
    assert physical_errors(os_host.client) == errors, "refused up front: nothing reached a physical switch"
    # Two headers that stay on one switch are fine (in_port=100 and vport 101 are both on the host).
    ok = ofctl(os_host, "add-flow", "in_port=100,dl_vlan=10,actions=push_vlan:0x8100,output:101")
    assert ok.returncode == 0, ok.stderr
    # With the ethertype known, the crossing takes the MPLS carrier (test_mpls_carrier.py) instead; with the
    # pushed id set, the VLAN id rewrite.
    for rule in ("dl_vlan=10,arp,actions=push_vlan:0x8100,set_field:4106->vlan_vid,output:200,output:1",
                 "dl_vlan=10,actions=push_vlan:0x8100,set_field:4106->vlan_vid,output:200,output:1"):  # fmt: skip
        ok = ofctl(os_host, "add-flow", rule)
        assert ok.returncode == 0, ok.stderr


def set_ip_src_without_prerequisite(xid: int, priority: int) -> bytes:
    """FLOW_MOD ADD, empty match, apply-actions set_field:1.2.3.4->ip_src, output:1. OneSwitch translates it
    as is; OVS refuses it (ip_src needs eth_type=0x0800 in the match): ovs-ofctl would not even send it."""
    fixed = struct.pack("!QQBBHHHIIIH2x", 0, 0, 0, 0, 0, 0, priority, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    match = struct.pack("!HH", 1, 4) + b"\0" * 4
    set_field = struct.pack("!HH", 25, 16) + struct.pack("!I", 0x80001604) + bytes([1, 2, 3, 4]) + b"\0" * 4
    output = struct.pack("!HHIH6x", 0, 16, 1, 0xFFFF)
    actions = set_field + output
    instr = struct.pack("!HH4x", 4, 8 + len(actions)) + actions
    body = fixed + match + instr
    return ofraw.header(ofraw.FLOW_MOD, 8 + len(body), xid) + body


def test_physical_refusal_reaches_the_controller_and_is_rolled_back(clean):
    os_host = clean
    rules, phys = rules_view(os_host), physical_view(os_host)
    errors, refusals = physical_errors(os_host.client), metric(os_host, "oneswitch_physical_refusals_total")
    c = ofraw.Conn(int(os_host.listen.rsplit(":", 1)[1]))
    try:
        c.hello()
        c.send(set_ip_src_without_prerequisite(xid=71, priority=77))
        c.send(ofraw.msg(ofraw.BARRIER_REQUEST, xid=72))
        got = c.until(72, ofraw.BARRIER_REPLY, timeout=30)
    finally:
        c.close()
    assert got and got[-1].type == ofraw.BARRIER_REPLY, got
    errs = [r for r in got if r.type == ofraw.ERROR and r.xid == 71]
    assert len(errs) == 1, got  # one answer for the message, however many switches refused it
    assert errs[0].error[0] == OFPET_BAD_ACTION, errs[0].error  # the switch's own type, passed on
    # The replica on every switch (no in_port: host and snic0) was refused or removed again.
    assert rules_view(os_host) == rules
    assert physical_view(os_host) == phys, "a physical leftover"
    assert physical_errors(os_host.client) > errors
    assert metric(os_host, "oneswitch_physical_refusals_total") == refusals + 1


def test_vlan_pushed_by_an_earlier_table_is_never_carried_under_a_third_header(clean):
    """Cross-table (VlanPushOrder): a rule not matching "no VLAN" after a table that pushes one may see a QinQ
    frame. Its output across PCIe takes the MPLS label (known eth_type) or is refused; a push that would
    make such a rule already installed uncarriable is refused. Refusals change nothing, virtual or physical."""
    os_host = clean
    relying = "table=1,priority=10,in_port=100,actions=output:1"
    push = "table=0,priority=20,in_port=100,actions=push_vlan:0x8100,set_field:4106->vlan_vid,goto_table:1"
    assert ofctl(os_host, "add-flow", relying).returncode == 0
    rules, phys, errors = rules_view(os_host), physical_view(os_host), physical_errors(os_host.client)
    r = ofctl(os_host, "add-flow", push)
    assert r.returncode != 0 and "OFPBAC_UNSUPPORTED_ORDER" in r.stderr, r.stderr
    assert (rules_view(os_host), physical_view(os_host)) == (rules, phys), "a refused push left a trace"
    assert physical_errors(os_host.client) == errors
    # The other order: push first, then the rule matching no VLAN is judged deeper.
    assert ofctl(os_host, "del-flows", "table=1").returncode == 0
    ok = ofctl(os_host, "add-flow", push)
    assert ok.returncode == 0, ok.stderr
    r = ofctl(os_host, "add-flow", relying)
    assert r.returncode != 0 and "OFPBAC_UNSUPPORTED_ORDER" in r.stderr, r.stderr
    ok = ofctl(os_host, "add-flow", "table=1,priority=10,in_port=100,ip,actions=output:1")
    assert ok.returncode == 0, ok.stderr
    acts = [p.actions for r in os_host.client.rules() for p in r.physical]
    assert any("push_mpls:0x8847" in a and "pop_mpls:0x800" in a for a in acts), acts
    # A VLAN match cannot tell a QinQ frame either (the full check's seed 7): refused when neither the
    # ethertype nor the outer VLAN id is known; the VLAN id rewrite with dl_vlan=10, the label with ip.
    r = ofctl(os_host, "add-flow", "table=1,priority=11,in_port=100,vlan_tci=0x1000/0x1000,actions=output:1")
    assert r.returncode != 0 and "OFPBAC_UNSUPPORTED_ORDER" in r.stderr, r.stderr
    for rule in ("table=1,priority=11,in_port=100,dl_vlan=10,actions=output:1",
                 "table=1,priority=12,in_port=100,dl_vlan=10,ip,actions=output:1"):  # fmt: skip
        ok = ofctl(os_host, "add-flow", rule)
        assert ok.returncode == 0, ok.stderr
    assert physical_errors(os_host.client) == errors
