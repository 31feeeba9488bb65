"""The equivalence harness itself, reference against reference (two plain OVS bridges): it sees no difference
between equal switches, and it does see one rule changed on one of them."""

from __future__ import annotations

import pytest

from testkit.hosts import machine_snapshot, needs_root, unique_name
from testkit.oneswitch import equiv, rulegen
from testkit.oneswitch.refswitch import RefSwitch

pytestmark = [pytest.mark.root, needs_root]
VPORTS = [1, 2, 100, 101, 200]


@pytest.fixture(scope="module")
def two_refs():
    a, b = RefSwitch(unique_name(), VPORTS), RefSwitch(unique_name(), VPORTS)
    try:
        a.up()
        b.up()
        ta = equiv.Target("A", a.target, a.endpoints()).open()
        tb = equiv.Target("B", b.target, b.endpoints()).open()
        yield ta, tb
        ta.close()
        tb.close()
    finally:
        a.down()
        b.down()
        for r in (a, b):
            snap = machine_snapshot(r.name)
            assert not snap["netns"] and not snap["procs"] and not snap["rundir"], snap


@pytest.mark.parametrize("seed", [1, 2])
def test_equal_switches_are_equivalent(two_refs, seed):
    a, b = two_refs
    rules = rulegen.generate(seed, VPORTS, n_rules=30)
    loaded = equiv.load(rules, a, b)
    assert not loaded.refused, loaded.refused  # plain OVS takes every generated rule
    pkts = rulegen.packets(seed, VPORTS, per_port=12)
    ga, gb = equiv.run_packets(a, pkts), equiv.run_packets(b, pkts)
    diffs = equiv.differences(pkts, ga, gb, ("A", "B"))
    assert not diffs, f"{rules.describe()}\n" + "\n".join(diffs)
    assert sum(sum(c.values()) for c in ga.values()) > len(pkts) // 4  # the rules really forward traffic


def test_a_changed_rule_is_seen(two_refs):
    a, b = two_refs
    rules = rulegen.RuleSet(0, (), ("table=0,priority=10,actions=output:1",))
    equiv.load(rules, a, b)
    assert b.ofctl("add-flow", "table=0,priority=10,actions=output:2").returncode == 0  # B now differs
    pkts = rulegen.packets(7, VPORTS, per_port=2)
    diffs = equiv.differences(pkts, equiv.run_packets(a, pkts), equiv.run_packets(b, pkts))
    # A sends everything to 1 (dropped when it came in at 1: OpenFlow never outputs to the in_port), B to 2.
    assert len(diffs) == len(pkts), diffs
