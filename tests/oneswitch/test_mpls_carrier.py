"""The MPLS flow-id carrier on real OVS: a QinQ frame (802.1ad outer + 802.1Q inner, IPv4) crossing the PCIe
link host <-> snic0 takes an MPLS label (a VLAN carrier tag would be a third header, more than OVS handles),
and leaves the virtual port byte-identical to the reference OVS bridge holding the same rules; later actions
of the list see the frame unchanged. Also under a remap of the egress NF port host -> snic0 -> host while
QinQ streams come in from both sides (every frame delivered once, identical to the reference)."""

from __future__ import annotations

import re

import pytest

from emulated_host import naming as nm
from testkit.oneswitch import equiv, rulegen

from .conftest import NF_HOST, NF_SNIC, ONESWITCH, SPARE_SNIC_OFPORT, close_pair, open_pair, physical_errors

pytestmark = ONESWITCH

RULES = [
    # A tagged IPv4 frame from VM 0 (host) to Ethernet port 1 (snic0) and VM 1: OF1.3 cannot tell a QinQ
    # frame from a single-tagged one; its outer VLAN id is known, so the crossing takes the VLAN id rewrite
    # (no header added; before issue 26 the MPLS label).
    "table=0,priority=20,in_port=100,dl_vlan=10,dl_type=0x0800,actions=output:1,output:101",
    # The rule makes the frame QinQ itself (known 2 headers, outer id 20): the rewrite, then the QinQ copy.
    "table=0,priority=20,in_port=101,dl_vlan=10,dl_type=0x0800,"
    "actions=push_vlan:0x88a8,set_field:4116->vlan_vid,output:1,output:100",
    # QinQ streams into NF port 200 for the remap, from the sNIC side and from the host side. A push and a
    # pop (the frame unchanged) leave the outer VLAN id unknown statically: the MPLS label, not the rewrite.
    "table=0,priority=30,in_port=1,dl_vlan=30,dl_type=0x0800,actions=push_vlan:0x8100,pop_vlan,output:200",
    "table=0,priority=30,in_port=100,dl_vlan=30,dl_type=0x0800,actions=push_vlan:0x8100,pop_vlan,output:200",
]


def qinq(pid: int, outer: int, inner: int | None, src: str = rulegen.MACS[0]) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Dot1AD, Dot1Q, Ether
    from scapy.packet import Raw

    eth = Ether(src=src, dst=rulegen.MACS[1])
    tags = Dot1AD(vlan=outer) / Dot1Q(vlan=inner) if inner is not None else Dot1Q(vlan=outer)
    return bytes(
        eth
        / tags
        / IP(src="10.0.0.1", dst="10.0.0.2")
        / UDP(sport=1000 + pid % 50, dport=53)
        / Raw(rulegen.marker(pid))
    )


@pytest.fixture(scope="module")
def pair(os_host, ref):
    sut, reference = open_pair(os_host, ref)
    try:
        rules = rulegen.RuleSet(0, (), tuple(RULES))
        loaded = equiv.load(rules, sut, reference)
        assert not loaded.refused, loaded.refused
        yield os_host, sut, reference
    finally:
        close_pair(sut, reference)


def physical_actions(os_host) -> list[str]:
    return [p.actions for r in os_host.client.rules() for p in r.physical]


def same_as_reference(sut, ref, pkts: list) -> dict:
    """Sends `pkts` through the reference and OneSwitch, asserts that the same frames came out of both,
    and returns what came out of OneSwitch (equiv.run_packets' form)."""
    got_ref, got_sut = equiv.run_packets(ref, pkts), equiv.run_packets(sut, pkts)
    diffs = equiv.differences(pkts, got_sut, got_ref, ("oneswitch", "reference"))
    assert not diffs, "\n".join(diffs[:10])
    return got_sut


def at_vport(got: dict, vport: int) -> list[bytes]:
    """The frames in `got` (equiv.run_packets' form) that came out of virtual port `vport`."""
    return [f for c in got.values() for (v, f), n in c.items() if v == vport]


def test_qinq_crosses_pcie_under_mpls_identical_to_reference(pair):
    os_host, sut, ref = pair
    errors_before = physical_errors(os_host.client)
    acts = physical_actions(os_host)
    # The carrier really is MPLS (and popped back to IPv4), not a third VLAN header.
    assert any("push_mpls:0x8847" in a and "pop_mpls:0x800" in a for a in acts), acts
    pkts = []
    for i in range(6):
        pkts.append((i, 100, qinq(i, 10, 20 + i)))  # QinQ in, matched as dl_vlan=10
        pkts.append((100 + i, 100, qinq(100 + i, 10, None)))  # single-tagged, same rule
        pkts.append((200 + i, 101, qinq(200 + i, 10, None)))  # the rule pushes the 802.1ad header
    at1 = at_vport(same_as_reference(sut, ref, pkts), 1)
    assert len(at1) == len(pkts), "not every frame crossed to Ethernet port 1"
    assert sum(1 for f in at1 if f[12:14] == b"\x88\xa8" and f[16:18] == b"\x81\x00") == 12  # QinQ kept
    assert physical_errors(os_host.client) == errors_before


def stream(first: int, n: int, src: str) -> list[bytes]:
    return [qinq(first + i, 30, 40, src) for i in range(n)]


def remaps_lossless_and_identical(client, sut, ref, pkts: list) -> dict:
    """Sends `pkts` through the reference, then through OneSwitch while vport 200 moves host:200 -> snic0:201
    (the spare namespace) -> host; asserts every frame left once, as from the reference, and some at each
    place. Returns OneSwitch's outputs (the spare's folded onto vport 200)."""
    old, spare = sut.endpoints[NF_HOST][0], sut.endpoints.pop("unmapped")[0]  # type: ignore[call-overload]
    sut.endpoints["200@snic0"] = [spare]  # type: ignore[index]
    try:
        got_ref = equiv.run_packets(ref, pkts, gap=0.002)
        got_sut, at_old, at_spare, _ = equiv.run_across_remaps(
            client, sut, pkts, NF_HOST, ("host", nm.NF_PORT_BASE), ("snic0", SPARE_SNIC_OFPORT), 0.3
        )
        lost = [pid for pid, _, _ in pkts if sum(got_sut[pid].values()) != 1]
        assert not lost, f"{len(lost)} of {len(pkts)} lost or duplicated during the remaps: {lost[:20]}"
        diffs = equiv.differences(pkts, got_sut, got_ref, ("oneswitch", "reference"))
        assert not diffs, "\n".join(diffs[:10])
        assert at_old > 0 and at_spare > 0, (at_old, at_spare)
        return got_sut
    finally:
        sut.endpoints.pop("200@snic0", None)  # type: ignore[call-overload]
        sut.endpoints["unmapped"] = [spare]  # type: ignore[index]
        sut.endpoints[NF_HOST] = [old]


def test_remap_under_qinq_stream_is_lossless_and_identical(pair):
    """vport 200 moves host:200 -> snic0:201 -> host while QinQ frames stream in at vports 100 and 1."""
    os_host, sut, ref = pair
    n = 300
    pkts = [(1000 + i, 100, f) for i, f in enumerate(stream(1000, n, rulegen.MACS[0]))]
    pkts += [(2000 + i, 1, f) for i, f in enumerate(stream(2000, n, rulegen.MACS[2]))]
    pkts.sort(key=lambda p: p[0] % 1000)
    remaps_lossless_and_identical(os_host.client, sut, ref, pkts)
    # Labels followed the port both ways: while on snic0, the host side's stream crossed under MPLS.
    assert any("push_mpls:0x8847" in a for a in physical_actions(os_host))


def labelled_output(sw) -> tuple[int, int]:
    """(label, PCIe port) of the translated rule on physical switch `sw` that pushes an MPLS label."""
    for f in sw.driver.flow_stats():
        if f.table == 1:
            m = re.search(r"set_field:(0x[0-9a-f]+|\d+)->mpls_label.*output:(\d+)", f.actions)
            if m:
                return int(m.group(1), 0), int(m.group(2))
    raise AssertionError("no labelled translation")


@pytest.mark.parametrize("where", ["snic", "host"])
def test_labelled_frame_at_the_wrong_end_reaches_the_vport(os_host, where):
    """A QinQ frame still crossing under a label after a remap moved its vport: the switch where the vport
    is NOT sends it on (back out of the link), the other pops the label; it arrives as QinQ IPv4."""
    from .test_inflight import MARK, inject_at, wait_no_drains
    from .test_physical_refusal import ofctl

    for cmd in ("del-flows", "del-groups"):
        assert ofctl(os_host, cmd).returncode == 0
    wait_no_drains(os_host)  # the remap test before leaves its spare port draining for 2 s
    sws = os_host.host.switches()
    try:
        if where == "snic":
            vport, ingress_v, sw, ns = NF_SNIC, 100, sws["host"], os_host.nf(1)
        else:
            vport, ingress_v, sw, ns = NF_HOST, 1, sws["snic0"], os_host.nf(0)
        # Tagged, any VLAN id (not known statically: the label, not the VLAN id rewrite), IPv4.
        spec = f"in_port={ingress_v},vlan_tci=0x1000/0x1000,dl_type=0x0800,actions=output:{vport}"
        assert ofctl(os_host, "add-flow", spec).returncode == 0
        ofctl(os_host, "dump-flows")  # a barrier round: installed everywhere
        label, pcie = labelled_output(sw)
        plain = qinq(0, 30, 40) + MARK  # dst, src, 88a8 tag, 8100 tag (20 bytes), 0800, IPv4
        assert plain[12:14] == b"\x88\xa8" and plain[20:22] == b"\x08\x00"
        shim = label << 12 | 1 << 8 | 64  # bos=1, ttl 64
        labelled = plain[:20] + b"\x88\x47" + shim.to_bytes(4, "big") + plain[22:]  # as push_mpls makes it
        got = inject_at(sw, pcie, labelled, ns)
        assert got[12:14] == b"\x88\xa8" and got[16:18] == b"\x81\x00", got.hex()
        assert got == plain, f"not the frame before the label: {got.hex()}"
    finally:
        for s in sws.values():
            s.close()
        for cmd in ("del-flows", "del-groups"):
            ofctl(os_host, cmd)


def untagged(pid: int) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    eth = Ether(src=rulegen.MACS[1], dst=rulegen.MACS[0])
    return bytes(
        eth
        / IP(src="10.0.0.2", dst="10.0.0.1")
        / UDP(sport=2000 + pid % 50, dport=53)
        / Raw(rulegen.marker(pid))
    )


# Outputs inside write_actions go through OneSwitch's carrier groups, whose bucket across PCIe carries only the
# VLAN tag: where the apply path would take an MPLS label (or refuse), a set output across PCIe is refused.
SET_ACCEPTED = [
    # QinQ made by the set itself, to local VM 1: the carrier group's bucket is a plain output, no tag.
    "table=0,priority=20,in_port=100,dl_vlan=10,dl_type=0x0800,"
    "actions=write_actions(push_vlan:0x88a8,set_field:4116->vlan_vid,output:101)",
    # Untagged IPv4 to Ethernet port 1 (snic0): the VLAN carrier is faithful.
    "table=0,priority=20,in_port=101,dl_type=0x0800,actions=write_actions(output:1)",
]
SET_REFUSED = [
    # Tagged with a known type: the apply path labels it (it may be QinQ already).
    "table=0,priority=30,in_port=100,dl_vlan=10,dl_type=0x0800,actions=write_actions(output:1)",
    # Two known headers: the VLAN carrier would be a third.
    "table=0,priority=31,in_port=100,dl_vlan=10,"
    "actions=write_actions(push_vlan:0x88a8,set_field:4116->vlan_vid,output:1)",
    # The same through FLOOD (its ALL carrier group reaches port 1 across PCIe).
    "table=0,priority=32,in_port=100,dl_vlan=10,dl_type=0x0800,"
    "actions=write_actions(push_vlan:0x88a8,set_field:4116->vlan_vid,output:FLOOD)",
]


def test_write_actions_output_needing_a_label_is_refused_and_the_rest_identical(pair):
    """A set output across PCIe of a frame the apply path would label is refused with OFPT_ERROR (no third VLAN
    header, no lost inner one), nothing reaches a physical switch; the accepted set outputs (local QinQ, untagged
    across PCIe) deliver exactly what the reference OVS delivers."""
    os_host, sut, ref = pair
    errors_before = physical_errors(os_host.client)
    loaded = equiv.load(rulegen.RuleSet(0, (), tuple(SET_ACCEPTED + SET_REFUSED)), sut, ref)
    assert loaded.accepted == SET_ACCEPTED, loaded.refused
    assert [s for s, _ in loaded.refused] == SET_REFUSED
    for spec, err in loaded.refused:
        assert "OFPT_ERROR" in err and "OFPBAC_UNSUPPORTED_ORDER" in err, (spec, err)
    acts = physical_actions(os_host)
    assert not any("push_mpls" in a for a in acts), acts
    assert any("write_actions(group:" in a for a in acts), acts  # the carrier groups really are used
    pkts = []
    for i in range(6):
        pkts.append((300 + i, 100, qinq(300 + i, 10, None)))  # -> VM 1 as QinQ (local carrier)
        pkts.append((400 + i, 101, untagged(400 + i)))  # -> port 1 across PCIe (VLAN carrier, popped)
    got_sut = same_as_reference(sut, ref, pkts)
    at1 = at_vport(got_sut, 1)
    assert len(at1) == 6 and all(f[12:14] == b"\x08\x00" for f in at1), [f[:18].hex() for f in at1]
    at101 = at_vport(got_sut, 101)
    assert len(at101) == 6 and all(f[12:14] == b"\x88\xa8" and f[16:18] == b"\x81\x00" for f in at101)
    assert physical_errors(os_host.client) == errors_before


RELABELLED = [
    # Matches no vlan_vid, installed first: the VLAN tag carries it across PCIe.
    "table=1,priority=10,in_port=100,ip,actions=output:1,output:101",
    "table=0,priority=5,in_port=100,actions=goto_table:1",
    # A push that reaches table 1 (a tagged frame leaves it QinQ): accepted, and the rule above is
    # re-translated under the MPLS label (translate/VlanPushOrder; before, this push was refused).
    "table=0,priority=10,in_port=100,actions=push_vlan:0x8100,set_field:4106->vlan_vid,goto_table:1",
]


def test_a_push_relabels_the_rules_it_reaches_identical_to_reference(pair):
    """The rule of table 1 goes under the MPLS label when the push arrives and back to the VLAN tag when it
    goes; tagged and untagged IPv4 frames from VM 0 leave as on the reference OVS every time."""
    os_host, sut, ref = pair
    errors_before = physical_errors(os_host.client)
    loaded = equiv.load(rulegen.RuleSet(0, (), tuple(RELABELLED)), sut, ref)
    assert loaded.accepted == RELABELLED, loaded.refused

    def same(first: int) -> list[bytes]:
        pkts = [
            (first + i, 100, qinq(first + i, 20, None) if i % 2 else untagged(first + i)) for i in range(8)
        ]
        return at_vport(same_as_reference(sut, ref, pkts), 1)

    assert any("push_mpls:0x8847" in a and "pop_mpls:0x800" in a for a in physical_actions(os_host))
    at1 = same(500)
    assert len(at1) == 8 and sum(1 for f in at1 if f[16:18] == b"\x81\x00") == 4  # QinQ kept across PCIe
    for t in (sut, ref):
        r = t.ofctl("del-flows", RELABELLED[2].split(",actions=")[0], "--strict")
        assert r.returncode == 0, r.stderr
    assert not any("push_mpls" in a for a in physical_actions(os_host))  # the VLAN tag again
    assert len(same(600)) == 8
    assert physical_errors(os_host.client) == errors_before


LABELLED_GROUP = "group_id=5,type=all,bucket=set_field:02:aa:00:00:00:03->eth_dst,output:1,bucket=output:101"
# The rule makes a tagged IPv4 frame QinQ, then its group sends it across PCIe (bucket 1) and to VM 1: the
# bucket's VLAN tag would be a third header, so the rule uses the group's MPLS label variant.
GROUP_RULE = (
    "table=0,priority=40,in_port=100,dl_vlan=10,ip,actions=push_vlan:0x88a8,set_field:4116->vlan_vid,group:5"
)


def test_group_across_pcie_takes_its_label_variant_identical_to_reference(pair):
    """A QinQ frame through a group bucket across PCIe: OneSwitch's label variant of the group (push_mpls in
    the bucket), byte-identical outputs to the reference, and GROUP_STATS of the controller's group count
    the frames (the variant's counters are its group's)."""
    os_host, sut, ref = pair
    errors_before = physical_errors(os_host.client)
    loaded = equiv.load(rulegen.RuleSet(0, (LABELLED_GROUP,), (GROUP_RULE,)), sut, ref)
    assert not loaded.refused, loaded.refused
    acts = physical_actions(os_host)
    used = [int(g) for a in acts for g in re.findall(r"group:(\d+)", a)]
    assert any(0xFFF30000 <= g < 0xFFF40000 for g in used), acts  # the variant, not group 5
    sw = os_host.host.switches()
    try:
        dumped = sw["host"].driver.ofctl("dump-groups")
    finally:
        for s in sw.values():
            s.close()
    assert "push_mpls:0x8847" in dumped, dumped
    pkts = [(700 + i, 100, qinq(700 + i, 10, None)) for i in range(6)]
    at1 = at_vport(same_as_reference(sut, ref, pkts), 1)
    assert len(at1) == 6 and all(f[12:14] == b"\x88\xa8" and f[16:18] == b"\x81\x00" for f in at1)
    counts = {}
    for t in (sut, ref):
        stats = t.ofctl("dump-group-stats").stdout
        counts[t.name] = int(re.search(r"group_id=5,.*?packet_count=(\d+)", stats).group(1))  # type: ignore[union-attr]
    assert counts["oneswitch"] == counts["reference"] >= 6, counts
    assert physical_errors(os_host.client) == errors_before


PUSHED_TWICE = [
    # Table 0 tags every frame from VM 0 (a tagged one becomes QinQ) ...
    "table=0,priority=10,in_port=100,actions=push_vlan:0x8100,set_field:4106->vlan_vid,goto_table:1",
    # ... and table 1 tags it again: OVS keeps 2 headers (the innermost of 3 is dropped, on the reference
    # too), and the output across PCIe takes the VLAN id rewrite (its outer id 30 is known: no header added;
    # before issue 26 the MPLS label), which carries the 2 left.
    "table=1,priority=10,in_port=100,udp,actions=push_vlan:0x8100,set_field:4126->vlan_vid,output:1,output:101",
]


def test_a_push_onto_a_possible_qinq_frame_crosses_by_the_rewrite_identical_to_reference(pair):
    os_host, sut, ref = pair
    errors_before = physical_errors(os_host.client)
    loaded = equiv.load(rulegen.RuleSet(0, (), tuple(PUSHED_TWICE)), sut, ref)
    assert loaded.accepted == PUSHED_TWICE, loaded.refused
    acts = physical_actions(os_host)
    assert any(re.search(r"->vlan_vid,output:\d+,set_field:[^,]+->vlan_vid", a) for a in acts), acts
    assert not any("push_mpls" in a for a in acts), acts
    pkts = [(800 + i, 100, qinq(800 + i, 20, None) if i % 2 else untagged(800 + i)) for i in range(8)]
    at1 = at_vport(same_as_reference(sut, ref, pkts), 1)
    assert len(at1) == 8 and all(f[12:14] == b"\x81\x00" and f[16:18] == b"\x81\x00" for f in at1), at1
    assert physical_errors(os_host.client) == errors_before


SEED7 = [
    # The full check's seed 7, with the ethertype known: table 0 may make a tagged frame QinQ, and table 1's
    # rule matching VLAN 10 cannot tell; its group's bucket across PCIe takes the label variant (before: the
    # VLAN tag, a third header, the inner one lost).
    "table=0,priority=10,in_port=100,actions=push_vlan:0x8100,set_field:4106->vlan_vid,goto_table:1",
    "table=1,priority=10,in_port=100,dl_vlan=10,ip,actions=group:5",
]


def test_a_vlan_match_after_a_qinq_push_sends_its_group_under_the_label(pair):
    os_host, sut, ref = pair
    errors_before = physical_errors(os_host.client)
    loaded = equiv.load(rulegen.RuleSet(0, (LABELLED_GROUP,), tuple(SEED7)), sut, ref)
    assert not loaded.refused, loaded.refused
    pkts = [(900 + i, 100, qinq(900 + i, 20, None) if i % 2 else untagged(900 + i)) for i in range(8)]
    at1 = at_vport(same_as_reference(sut, ref, pkts), 1)
    assert len(at1) == 8 and sum(1 for f in at1 if f[16:18] == b"\x81\x00") == 4  # QinQ ones kept both
    assert physical_errors(os_host.client) == errors_before


# A tagged frame of unknown ethertype made QinQ by the rule's own push: no label (pop_mpls needs the type), but
# the outer VLAN id is known (set after the push): it is rewritten to the flow-id across PCIe and back.
REWRITTEN = "table=0,priority=60,in_port=100,dl_vlan=10,actions=push_vlan:0x8100,set_field:4116->vlan_vid,output:1,output:101"


def test_a_known_outer_vlan_id_crosses_by_its_rewrite_identical_to_reference(pair):
    from scapy.layers.l2 import Dot1Q, Ether
    from scapy.packet import Raw

    os_host, sut, ref = pair
    errors_before = physical_errors(os_host.client)
    loaded = equiv.load(rulegen.RuleSet(0, (), (REWRITTEN,)), sut, ref)
    assert not loaded.refused, loaded.refused
    assert not any("push_mpls" in a for a in physical_actions(os_host))
    pkts = []
    for i in range(6):
        frame = Ether(src=rulegen.MACS[0], dst=rulegen.MACS[1]) / Dot1Q(vlan=10, type=0x88B5)
        pkts.append((950 + i, 100, bytes(frame / Raw(rulegen.marker(950 + i) + bytes([i]) * 20))))
    at1 = at_vport(same_as_reference(sut, ref, pkts), 1)
    assert len(at1) == 6 and all(f[12:18] == b"\x81\x00\x00\x14\x81\x00" for f in at1), at1  # 20 outside 10
    assert physical_errors(os_host.client) == errors_before
