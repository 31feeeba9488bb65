"""Equivalence over two sNICs: traffic between sNIC 0 and sNIC 1 crosses both PCIe links through the host
switch, which forwards the flow-id tag untouched (a path the one-sNIC tests never take)."""

from __future__ import annotations

import pytest

from emulated_host import naming as nm
from testkit.hosts import machine_snapshot, unique_name
from testkit.oneswitch import equiv, rulegen
from testkit.oneswitch.pktio import Endpoint
from testkit.oneswitch.refswitch import RefSwitch

from .conftest import ONESWITCH, bring_up, physical_errors, teardown

pytestmark = ONESWITCH
VPORTS = [1, 9, 100]  # snic0's Ethernet port, snic1's Ethernet port, VM 0


@pytest.fixture(scope="module")
def pair():
    host, status = bring_up(vms=1, snics=[{"pcie_gbps": 0}, {"pcie_gbps": 0}])
    ref = RefSwitch(unique_name(), VPORTS)
    try:
        ref.up()
        n = host.name
        sut = equiv.Target("oneswitch", status["oneswitch"]["listen"], {
            1: [Endpoint(nm.ns_outside(n, 0, 0), nm.if_eth(n, 0, 0)[1])],
            9: [Endpoint(nm.ns_outside(n, 1, 0), nm.if_eth(n, 1, 0)[1])],
            100: [Endpoint(nm.ns_vm(n, 0), nm.if_vm(n, 0)[0])],
        }).open()  # fmt: skip
        reference = equiv.Target("reference", ref.target, ref.endpoints()).open()
        yield host, sut, reference
        sut.close()
        reference.close()
    finally:
        try:
            teardown(host)
        finally:
            ref.down()
            snap = machine_snapshot(ref.name)
            assert not snap["netns"] and not snap["procs"] and not snap["rundir"], snap


@pytest.mark.parametrize("seed", [1, 2])
def test_snic_to_snic_equivalent(pair, seed):
    host, sut, ref = pair
    client = host.oneswitch().client()
    errors = physical_errors(client)
    rules = rulegen.generate(seed, VPORTS, n_rules=20, vlans=False)
    # Make sure both directions between the sNICs are exercised, whatever the random rules do.
    rules = rulegen.RuleSet(seed, rules.groups, (*rules.flows, "table=0,priority=1000,in_port=1,dl_type=0x88b5,actions=output:9",
                                                  "table=0,priority=1001,in_port=9,dl_type=0x88b5,actions=output:1,output:100"))  # fmt: skip
    loaded = equiv.load(rules, sut, ref)
    assert not loaded.refused, loaded.refused
    pkts = rulegen.packets(seed, VPORTS, per_port=10, vlans=False)
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    for i, v in enumerate([1, 9, 1, 9]):  # sNIC <-> sNIC frames the two rules above carry
        pid = 10_000 + i
        frame = Ether(src=rulegen.MACS[i % 3], dst=rulegen.MACS[3], type=0x88B5) / Raw(
            rulegen.marker(pid) + b"t" * 20
        )
        pkts.append((pid, v, bytes(frame)))
    got_ref, got_sut = equiv.run_packets(ref, pkts), equiv.run_packets(sut, pkts)
    diffs = equiv.differences(pkts, got_sut, got_ref, ("oneswitch", "reference"))
    assert not diffs, f"seed {seed}:\n{rules.describe()}\n" + "\n".join(diffs[:10])
    # sNIC 0 -> sNIC 1 and back really happened (through the host switch).
    assert {v for (v, _) in got_sut[10_000]} == {9} and {v for (v, _) in got_sut[10_001]} == {1, 100}
    assert physical_errors(client) == errors
