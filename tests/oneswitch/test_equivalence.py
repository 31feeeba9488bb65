"""Semantic equivalence of OneSwitch (over the host switch, PCIe and snic0) with a real reference OVS bridge:
seeded random rule sets, random packets injected at every virtual port, the multiset of (virtual port, exact
bytes) leaving must be identical, per injected packet. Rules OneSwitch refuses (OFPT_ERROR) are skipped on the
reference too, and reported. Also through a remap of an NF port between host and sNIC under a packet stream.

Seeds: UNO_EQ_SEEDS="1,2,3" overrides the default ones; every failure message starts with its seed.
"""

from __future__ import annotations

import os

import pytest

from emulated_host import naming as nm
from host_datapath.switch import parse_dump_flows
from testkit.oneswitch import equiv, rulegen

from .conftest import NF_HOST, ONESWITCH, SPARE_SNIC_OFPORT, VPORTS, close_pair, open_pair, physical_errors

pytestmark = ONESWITCH
SEEDS = [int(s) for s in os.environ.get("UNO_EQ_SEEDS", "1,2,3,4").split(",")]
# Seed 2 was a known limit (strict xfail), lifted: its rule matches no VLAN, pushes one and sends to a group
# with a bucket across PCIe; a frame that came in tagged left QinQ, and the VLAN flow-id tag was a third header
# (OVS handles two: the innermost was lost). Such a rule (no vlan_vid match, and a push of its own or in an
# earlier table: translate/VlanPushOrder) now takes the MPLS label or is refused. Seed 4 passes under the MPLS
# carrier. Empty set kept for a future known limit: a strict xfail fails once the limit is lifted.
VLAN_TAG_LOSS: set[int] = set()
REFUSALS: list[tuple[int, str, str]] = []


@pytest.fixture(scope="module")
def pair(os_host, ref):
    sut, reference = open_pair(os_host, ref)
    yield os_host, sut, reference
    close_pair(sut, reference)
    if REFUSALS:
        print("\nOneSwitch refused (OFPT_ERROR), skipped on both:")
        for seed, spec, err in REFUSALS:
            print(f"  seed {seed}: {spec}\n    {err.splitlines()[0] if err else ''}")


def check_equivalent(
    sut: equiv.Target,
    ref: equiv.Target,
    seed: int,
    rules: rulegen.RuleSet,
    per_port: int = 8,
    vlans: bool = True,
):
    pkts = rulegen.packets(seed, VPORTS, per_port=per_port, vlans=vlans)
    got_ref = equiv.run_packets(ref, pkts)
    got_sut = equiv.run_packets(sut, pkts)
    diffs = equiv.differences(pkts, got_sut, got_ref, ("oneswitch", "reference"))
    assert not diffs, (
        f"seed {seed}: {len(diffs)} of {len(pkts)} packets differ\n{rules.describe()}\n"
        + "\n".join(diffs[:10])
    )
    return got_ref


def load_checked(rules: rulegen.RuleSet, sut: equiv.Target, ref: equiv.Target) -> equiv.Loaded:
    loaded = equiv.load(rules, sut, ref)
    for spec, err in loaded.refused:
        REFUSALS.append((rules.seed, spec, err))
        assert "OFPT_ERROR" in err or "error" in err.lower(), (
            f"seed {rules.seed}: refused without an error: {err}"
        )
    n_flows = len([s for s in loaded.accepted if "group_id=" not in s])
    assert len(parse_dump_flows(sut.ofctl("dump-flows").stdout)) == n_flows  # refused rules left no trace
    assert len(parse_dump_flows(ref.ofctl("dump-flows").stdout)) == n_flows
    return loaded


def _cases() -> list:
    out = []
    for seed in SEEDS:
        out.append(pytest.param(seed, False, id=f"{seed}-no-vlan"))
        marks = ()
        if seed in VLAN_TAG_LOSS and "UNO_EQ_SEEDS" not in os.environ:
            marks = pytest.mark.xfail(
                strict=True,
                raises=AssertionError,
                reason="a third VLAN header (the flow-id tag) is more than OVS handles",
            )
        out.append(pytest.param(seed, True, id=f"{seed}-vlan", marks=marks))
    return out


@pytest.mark.parametrize("seed,vlans", _cases())
def test_random_rules_equivalent(pair, seed, vlans):
    """Without VLANs in rules and packets, and with (where the flow-id tag must not clash with the
    controller's own VLANs: docs/translation.md carries it in MPLS then)."""
    os_host, sut, ref = pair
    errors_before = physical_errors(os_host.client)
    rules = rulegen.generate(seed, VPORTS, n_rules=30, vlans=vlans)
    loaded = load_checked(rules, sut, ref)
    assert physical_errors(os_host.client) == errors_before, (
        f"seed {seed}: a physical switch refused a translation"
    )
    assert len(loaded.accepted) >= len(rules.flows) // 2, f"seed {seed}: most rules refused: {loaded.refused}"
    out = check_equivalent(sut, ref, seed, rules, vlans=vlans)
    assert sum(sum(c.values()) for c in out.values()) > 0, f"seed {seed}: no packet left the reference"


STREAM_TYPE = 0x88B6  # the stream's own ethertype: no generated rule matches it


def stream_frames(first: int, n: int, src_mac: str) -> list[bytes]:
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    return [
        bytes(
            Ether(src=src_mac, dst=rulegen.MACS[1], type=STREAM_TYPE)
            / Raw(rulegen.marker(first + i) + b"s" * 30)
        )
        for i in range(n)
    ]


def test_remap_under_traffic_equivalent_and_lossless(pair):
    """vport 200 moves host:200 -> snic0:201 and back, while VM 0 and Ethernet port 0 stream into it."""
    os_host, sut, ref = pair
    seed = SEEDS[0] + 1000
    rules = rulegen.generate(seed, VPORTS, n_rules=25)
    # One stream by the apply path, one by an action set (OneSwitch's carrier group, re-pointed by the remap).
    stream_rules = [
        f"table=0,priority=1000,in_port=100,dl_type={STREAM_TYPE:#06x},actions=output:{NF_HOST}",
        f"table=0,priority=1000,in_port=1,dl_type={STREAM_TYPE:#06x},actions=write_actions(output:{NF_HOST})",
    ]
    rules = rulegen.RuleSet(seed, rules.groups, (*rules.flows, *stream_rules))
    loaded = load_checked(rules, sut, ref)
    assert all(r in loaded.accepted for r in stream_rules), loaded.refused
    check_equivalent(sut, ref, seed, rules, per_port=5)  # before

    old, spare = sut.endpoints[NF_HOST][0], sut.endpoints.pop("unmapped")[0]  # type: ignore[call-overload]
    sut.endpoints["200@snic0"] = [spare]  # type: ignore[index]  # during: vport 200 at either place
    n = 400
    pkts = [(i, 100, f) for i, f in enumerate(stream_frames(0, n, rulegen.MACS[0]))]
    pkts += [(n + i, 1, f) for i, f in enumerate(stream_frames(n, n, rulegen.MACS[2]))]
    pkts.sort(key=lambda p: p[0] % n)  # interleave the two streams
    got_ref = equiv.run_packets(ref, pkts, gap=0.002)
    got_sut, at_old, at_spare, results = equiv.run_across_remaps(
        os_host.client, sut, pkts, NF_HOST, ("host", nm.NF_PORT_BASE), ("snic0", SPARE_SNIC_OFPORT), 0.4
    )
    assert results[0].rules >= 2 and results[0].to.get("switch") == "snic0", results[0]
    # Lossless: every stream packet reached vport 200 exactly once, as on the reference.
    lost = [pid for pid, _, _ in pkts if sum(got_sut[pid].values()) != 1]
    assert not lost, f"{len(lost)} of {len(pkts)} packets lost or duplicated during the remaps: {lost[:20]}"
    diffs = equiv.differences(pkts, got_sut, got_ref, ("oneswitch", "reference"))
    assert not diffs, f"seed {seed} during remap:\n" + "\n".join(diffs[:10])
    # Both locations really carried traffic (the stream outlasted each remap).
    assert at_old > 0 and at_spare > 0, (at_old, at_spare)

    # After: vport 200 back on the host; then on the sNIC, the random rules are equivalent at each location.
    sut.endpoints.pop("200@snic0")  # type: ignore[call-overload]
    sut.endpoints["unmapped"] = [spare]  # type: ignore[index]
    check_equivalent(sut, ref, seed, rules, per_port=5)
    os_host.client.remap(NF_HOST, "snic0", SPARE_SNIC_OFPORT)
    try:
        sut.endpoints[NF_HOST] = [spare]
        sut.endpoints["unmapped"] = [old]  # type: ignore[index]
        sut.inject[NF_HOST] = spare
        check_equivalent(sut, ref, seed, rules, per_port=5)
    finally:
        os_host.client.remap(NF_HOST, "host", nm.NF_PORT_BASE)
        sut.endpoints[NF_HOST] = [old]
        sut.endpoints["unmapped"] = [spare]  # type: ignore[index]
        sut.inject.pop(NF_HOST, None)


# Rule kinds OneSwitch refuses (oneswitch/README.md), each with the error ovs-ofctl must show.
REFUSED = {
    "table=0,priority=1000,in_port=100,actions=NORMAL": "OFPBAC_BAD_OUT_PORT",
    "table=0,priority=1001,in_port=101,actions=LOCAL": "OFPBAC_BAD_OUT_PORT",
    # After ORDER_HELPER's group in table 0, an action-set output in table 1 would run OneSwitch's carrier group
    # instead of the controller's (a group in the set wins over an output): refused.
    "table=1,priority=1002,in_port=1,actions=write_actions(output:2)": "OFPBAC_UNSUPPORTED_ORDER",
    "table=0,priority=1003,in_port=2,actions=set_queue:1,output:1": "OFPBAC_BAD_QUEUE",
    "table=0,priority=1004,in_port=200,actions=meter:1,output:1": "OFPBIC_UNSUP_INST",
}
ORDER_HELPER = f"table=0,priority=1005,in_port=1,actions=write_actions(group:{rulegen.GROUP_ID}),goto_table:1"
REFUSED_GROUPS = {"group_id=9,type=ff,bucket=watch_port:1,output:1": "OFPGMFC_BAD_TYPE"}


def test_refused_rule_kinds_are_skipped_on_both(pair):
    """Mixed into a random rule set, each refused kind gets its OFPT_ERROR from OneSwitch, is not loaded on the
    reference either, and the rest stays equivalent."""
    os_host, sut, ref = pair
    seed = 3
    base = rulegen.generate(seed, VPORTS, n_rules=20, vlans=False)
    rules = rulegen.RuleSet(seed, (*base.groups, *REFUSED_GROUPS), (*base.flows, ORDER_HELPER, *REFUSED))
    errors_before = physical_errors(os_host.client)
    loaded = load_checked(rules, sut, ref)
    refused = dict(loaded.refused)
    for spec, code in {**REFUSED, **REFUSED_GROUPS}.items():
        assert spec in refused, f"OneSwitch accepted {spec}"
        assert "OFPT_ERROR" in refused[spec] and code in refused[spec], refused[spec]
    expected = set(REFUSED) | set(REFUSED_GROUPS)
    assert set(refused) == expected, f"refused beyond the expected: {set(refused) - expected}"
    assert physical_errors(os_host.client) == errors_before
    check_equivalent(sut, ref, seed, rules, per_port=5, vlans=False)


WRITE_SEEDS = [int(s) for s in os.environ.get("UNO_EQ_WRITE_SEEDS", "11,12,13").split(",")]


def _write_rules(seed: int) -> rulegen.RuleSet:
    return rulegen.generate(seed, VPORTS, n_rules=30, vlans=False, write_outputs=True)


def _load_write_rules(os_host, sut, ref, rules: rulegen.RuleSet) -> equiv.Loaded:
    errors_before = physical_errors(os_host.client)
    loaded = load_checked(rules, sut, ref)
    assert physical_errors(os_host.client) == errors_before, (
        f"seed {rules.seed}: a physical switch refused a translation"
    )
    outs = [f for f in loaded.accepted if "write_actions(" in f and "output:" in f.split("write_actions(")[1]]
    assert any("output:FLOOD" in f for f in outs) or rules.seed != WRITE_SEEDS[0], outs
    assert len(outs) >= 3, f"seed {rules.seed}: too few write_actions outputs accepted: {loaded.refused}"
    for spec, err in loaded.refused:  # only the action-set order check may refuse these rule sets
        assert "OFPBAC_UNSUPPORTED_ORDER" in err, f"seed {rules.seed}: {spec}: {err}"
    return loaded


@pytest.mark.parametrize("seed", WRITE_SEEDS)
def test_write_actions_outputs_equivalent(pair, seed):
    """Outputs to local and remote vports and FLOOD inside write_actions (OneSwitch's carrier groups)."""
    os_host, sut, ref = pair
    rules = _write_rules(seed)
    _load_write_rules(os_host, sut, ref, rules)
    out = check_equivalent(sut, ref, seed, rules, vlans=False)
    assert sum(sum(c.values()) for c in out.values()) > 0, f"seed {seed}: no packet left the reference"
    # The controller sees only its own group; the carrier groups are OneSwitch's.
    for cmd in ("dump-groups", "dump-group-stats"):
        listed = sut.ofctl(cmd).stdout
        assert "group_id=0xfff" not in listed and "group_id=429" not in listed, listed
        assert f"group_id={rulegen.GROUP_ID}," in listed, listed


def test_write_actions_equivalent_across_remap(pair):
    """The same with vport 200 on the host, remapped to snic0 (its carriers re-pointed), and back."""
    os_host, sut, ref = pair
    seed = WRITE_SEEDS[0] + 100
    rules = _write_rules(seed)
    loaded = _load_write_rules(os_host, sut, ref, rules)
    assert any(f"output:{NF_HOST})" in f for f in loaded.accepted), "no action set outputs to vport 200"
    check_equivalent(sut, ref, seed, rules, per_port=5, vlans=False)
    old, spare = sut.endpoints[NF_HOST][0], sut.endpoints["unmapped"][0]  # type: ignore[index]
    os_host.client.remap(NF_HOST, "snic0", SPARE_SNIC_OFPORT)
    try:
        sut.endpoints[NF_HOST] = [spare]
        sut.endpoints["unmapped"] = [old]  # type: ignore[index]
        check_equivalent(sut, ref, seed, rules, per_port=5, vlans=False)
    finally:
        os_host.client.remap(NF_HOST, "host", nm.NF_PORT_BASE)
        sut.endpoints[NF_HOST] = [old]
        sut.endpoints["unmapped"] = [spare]  # type: ignore[index]
    check_equivalent(sut, ref, seed, rules, per_port=5, vlans=False)
