"""The pure pieces of the full equivalence check: rulegen specs parsed (flowspec), frames derived from goto chains
and the local pipeline model that chooses them (framegen). No switch: what they propose is judged by the
reference's trace in fullcheck; here, that they propose what they should."""

from __future__ import annotations

import random

import pytest

from testkit.oneswitch import framegen, rulegen
from testkit.oneswitch.flowspec import parse

P = parse(
    "cookie=0x7,table=0,priority=50,in_port=1,ip,actions=set_field:02:aa:00:00:00:03->eth_dst,"
    "push_vlan:0x8100,set_field:4106->vlan_vid,output:9,write_metadata:0x2/0xff,goto_table:1"
)


def test_rulegen_specs_parse_exactly():
    rules = rulegen.generate(5, [1, 9, 100], n_rules=300, write_outputs=True)
    flows = [parse(s) for s in rules.flows]
    assert len(flows) == 300 and {f.table for f in flows} == {0, 1, 2}
    assert P.cookie == 7 and P.table == 0 and P.priority == 50 and P.in_port == 1
    assert P.match == {"in_port": "1", "dl_type": "0x800"}
    assert P.apply == (
        "set_field:02:aa:00:00:00:03->eth_dst", "push_vlan:0x8100", "set_field:4106->vlan_vid", "output:9"
    )  # fmt: skip
    assert P.write_metadata == (2, 0xFF) and P.goto == 1
    w = parse(
        "table=1,priority=3,actions=write_actions(set_field:10.99.0.1->ip_src,output:FLOOD),goto_table:2"
    )
    assert w.write == ("set_field:10.99.0.1->ip_src", "output:FLOOD") and w.apply == () and w.goto == 2


@pytest.mark.parametrize(
    "spec", ["table=0,priority=1,actions=meter:1", "table=0,priority=1,tun_id=5,actions=drop", "table=0,drop"]
)
def test_an_unknown_spec_is_refused_not_half_understood(spec):
    with pytest.raises(ValueError):
        parse(spec)


def test_a_chain_carries_the_constraints_through_the_actions():
    ok = parse(
        "table=1,priority=9,dl_vlan=10,dl_dst=02:aa:00:00:00:03,metadata=0x2/0xff,ip,actions=output:100"
    )
    s = framegen.solve([P, ok], random.Random(1))
    assert s is not None
    f = s.fill()
    # The original frame: in at port 1, IPv4; the VLAN and eth_dst the second rule sees are P's doing.
    assert f["in_port"] == 1 and f["dl_type"] == framegen.IP
    for bad in (
        "table=1,priority=9,dl_dst=02:aa:00:00:00:01,actions=drop",  # P set eth_dst to ...:03
        "table=1,priority=9,dl_vlan=20,actions=drop",  # P pushed VLAN 10
        "table=1,priority=9,metadata=0x3/0xff,actions=drop",  # P wrote 0x2
        "table=1,priority=9,in_port=9,actions=drop",  # in_port never changes
        "table=1,priority=9,arp,actions=drop",  # P matched ip
    ):
        assert framegen.solve([P, parse(bad)], random.Random(1)) is None, bad


def test_the_frame_built_has_the_fields_and_the_marker():
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.l2 import Dot1Q, Ether

    r = parse("table=0,priority=9,dl_vlan=20,ip,nw_dst=10.99.1.0/24,tp_dst=443,actions=drop")
    c = framegen.Candidate([r], framegen.solve([r], random.Random(3)).fill())  # type: ignore[union-attr]
    frame = c.frame(1234)
    pkt = Ether(frame)
    assert pkt[Dot1Q].vlan == 20 and pkt[IP].dst.startswith("10.99.1.")
    assert (pkt[TCP] if pkt.haslayer(TCP) else pkt[UDP]).dport == 443
    assert rulegen.marker_id(frame) == 1234


def test_the_local_model_takes_the_highest_priority_and_follows_goto():
    flows = [
        parse("table=0,priority=10,ip,actions=goto_table:1"),
        parse("table=0,priority=20,in_port=1,ip,actions=drop"),
        parse("table=1,priority=5,actions=output:9"),
        parse("table=1,priority=6,dl_vlan=10,actions=output:100"),
    ]
    pipe = framegen.Pipeline(flows)
    fields = {"dl_src": rulegen.MACS[0], "dl_dst": rulegen.MACS[1], "vlan": None, "dl_type": framegen.IP,
              "nw_src": "10.99.0.1", "nw_dst": "10.99.0.2", "nw_proto": 6, "tp_src": 80, "tp_dst": 443}  # fmt: skip
    assert [f.priority for f in pipe.path(fields, 1)] == [20]
    assert [f.priority for f in pipe.path(fields, 9)] == [10, 5]
    assert [f.priority for f in pipe.path({**fields, "vlan": 10}, 9)] == [10, 6]
    pipe.remove({flows[1].spec})
    assert [f.priority for f in pipe.path(fields, 1)] == [10, 5]


def _rb(plan: framegen.Plan) -> tuple[dict, set]:
    return plan.reach, plan.blockers


def test_the_chooser_names_blockers_and_reaches_rules_in_the_way():
    top = parse("table=0,priority=30,ip,actions=drop")  # takes every IPv4 frame
    mid = parse("table=0,priority=20,ip,nw_proto=6,actions=output:9")
    low = parse("table=0,priority=10,ip,nw_proto=6,tp_dst=443,actions=output:100")
    ch = framegen.Chooser([top, mid, low], [1, 9], random.Random(2))
    reach, blockers = _rb(ch.plan({mid.spec, low.spec}, deletable=set()))
    # Both are shadowed by `top`: their frames reach it instead, and it is not pending: nothing to do yet.
    assert reach == {} and blockers == set()
    reach, blockers = _rb(ch.plan({top.spec, mid.spec, low.spec}, deletable=set()))
    assert top.spec in reach and blockers == set()  # top reached (directly and as the rule in the way)
    reach, blockers = _rb(ch.plan({mid.spec, low.spec}, deletable={top.spec}))
    assert blockers == {top.spec}
    ch.remove(blockers)
    reach, blockers = _rb(ch.plan({mid.spec, low.spec}, deletable=set()))
    assert set(reach) == {mid.spec}  # low is shadowed by mid, which its frame reaches too
    reach, blockers = _rb(ch.plan({low.spec}, deletable={mid.spec}))
    assert blockers == {mid.spec}


def test_the_chooser_holds_back_a_blocker_a_pending_chain_needs_and_restores_a_deleted_chain():
    gate = parse("table=0,priority=30,ip,actions=goto_table:1")  # shadows `low`; the only way into table 1
    low = parse("table=0,priority=10,ip,nw_proto=6,actions=output:9")
    deep = parse("table=1,priority=5,ip,actions=output:100")
    ch = framegen.Chooser([gate, low, deep], [1, 9], random.Random(4))
    plan = ch.plan({low.spec, deep.spec}, deletable={gate.spec})
    # `deep` is reached through `gate`; `gate` is in `low`'s way but `deep`'s chain needs it: held back.
    assert set(plan.reach) == {deep.spec} and plan.blockers == set() and plan.held == {gate.spec}
    plan = ch.plan({low.spec}, deletable={gate.spec, deep.spec})  # once `deep` is exercised, it goes
    assert plan.blockers == {gate.spec} and plan.held == set()
    ch.remove({gate.spec})
    assert set(ch.plan({low.spec}, set()).reach) == {low.spec}
    # A rule whose every chain went with the deleted rules gets a chain over all the rules: restore them.
    plan = ch.plan({deep.spec}, set())
    assert plan.reach == {} and plan.restore == {gate.spec}
    ch.add(plan.restore)
    assert set(ch.plan({deep.spec}, set()).reach) == {deep.spec}


def test_a_table_no_goto_chain_leads_to_is_unreachable():
    flows = [parse("table=0,priority=1,actions=goto_table:2"), parse("table=2,priority=1,actions=goto_table:3"),
             parse("table=1,priority=1,actions=goto_table:4"), parse("table=4,priority=1,actions=drop")]  # fmt: skip
    assert framegen.reachable_tables(flows) == {0, 2, 3}


def test_a_pop_then_a_vlan_match_asks_for_a_qinq_frame():
    from scapy.layers.l2 import Dot1Q, Ether

    pop = parse("table=0,priority=9,dl_vlan=20,ip,actions=pop_vlan,goto_table:1")
    inner = parse("table=1,priority=9,dl_vlan=10,ip,actions=output:1")
    s = framegen.solve([pop, inner], random.Random(5))
    assert s is not None
    fields = s.fill()
    assert (fields["vlan"], fields["vlan2"]) == (20, 10)
    pkt = Ether(framegen.Candidate([pop, inner], fields).frame(7))
    assert [pkt.getlayer(Dot1Q, nb=n).vlan for n in (1, 2)] == [20, 10]
    assert framegen.Pipeline([pop, inner]).path(fields, 1) == [pop, inner]
    # A second pop leaves it untagged: a "no VLAN" match after it holds, a VLAN match does not.
    untag = parse("table=0,priority=9,dl_vlan=20,ip,actions=pop_vlan,pop_vlan,goto_table:1")
    assert framegen.solve([untag, parse("table=1,priority=9,vlan_tci=0x0000/0x1000,actions=drop")],
                          random.Random(5)) is not None  # fmt: skip
    assert framegen.solve([untag, inner], random.Random(5)) is None


def test_dead_chain_proves_only_real_contradictions():
    writes1 = parse("table=0,priority=9,in_port=1,ip,actions=set_field:10.99.0.2->ip_src,write_metadata:0x1/0xff,"
                    "goto_table:1")  # fmt: skip
    for bad, why in (
        ("table=1,priority=9,metadata=0x2/0xff,actions=drop", "metadata"),
        ("table=1,priority=9,in_port=9,actions=drop", "in_port"),
        ("table=1,priority=9,arp,actions=drop", "dl_type"),
        ("table=1,priority=9,ip,nw_src=10.99.1.0/24,actions=drop", "nw_src"),  # the chain set 10.99.0.2
    ):
        reason = framegen.dead_chain([writes1, parse(bad)])
        assert reason is not None and why in reason, (bad, reason)
    for ok in (
        "table=1,priority=9,in_port=1,ip,nw_src=10.99.0.0/24,metadata=0x1/0xff,actions=drop",
        "table=1,priority=9,dl_vlan=10,actions=drop",  # VLANs are left out: never a proof
    ):
        assert framegen.dead_chain([writes1, parse(ok)]) is None, ok
    # Nested prefixes of the original frame: the solver picks one address and may miss, dead_chain does not.
    wide = parse("table=0,priority=9,ip,nw_dst=10.99.0.0/24,actions=goto_table:1")
    narrow = parse("table=1,priority=9,ip,nw_dst=10.99.0.2,actions=drop")
    assert framegen.dead_chain([wide, narrow]) is None
    assert framegen.Paths([wide, narrow]).dead(narrow) is False
    assert framegen.Paths([narrow]).dead(narrow) is True  # no rule goes to table 1
