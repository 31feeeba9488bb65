"""OneSwitch against plain OVS over a broad random rule generator (testkit/oneswitch/rulegen_broad.py): rules
plain OVS accepts are installed through OneSwitch; no translation may be refused by a physical switch (a
physical MATCH_INCONSISTENT, BAD_TAG... is a translator bug), each rule OneSwitch refuses must carry one of
the refusals documented in oneswitch/README.md, and every accepted rule is checked by real packets against
the reference. Prints (and with UNO_BROAD_OUT=FILE writes as JSON) the refusal rate vs plain OVS.
Also the two rules of issue 26 (a known outer VLAN id, an L4 set_field after the output across PCIe).

UNO_BROAD_SEEDS="1,2,..." and UNO_BROAD_RULES=N override the seeds and the set size."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest

from testkit.oneswitch import equiv, rulegen, rulegen_broad

from .conftest import ONESWITCH, VPORTS, close_pair, open_pair, physical_errors
from .test_equivalence import check_equivalent

pytestmark = ONESWITCH
SEEDS = [int(s) for s in os.environ.get("UNO_BROAD_SEEDS", "1,2,3").split(",")]
N_RULES = int(os.environ.get("UNO_BROAD_RULES", "60"))
STATS: dict[str, Counter] = {"total": Counter(), "errors": Counter()}
REFUSED: list[str] = []
# Every refusal OneSwitch may answer for a rule plain OVS takes (oneswitch/README.md "Supported / refused").
DOCUMENTED = {"OFPBAC_UNSUPPORTED_ORDER", "OFPBAC_BAD_OUT_PORT", "OFPBAC_BAD_TAG", "OFPFMFC_TABLE_FULL"}


@pytest.fixture(scope="module")
def pair(os_host, ref):
    sut, reference = open_pair(os_host, ref)
    yield os_host, sut, reference
    close_pair(sut, reference)
    t = STATS["total"]
    if t["valid"]:
        summary = {
            "seeds": SEEDS,
            "rules_per_seed": N_RULES,
            "generated": t["generated"],
            "ovs_accepted": t["valid"],
            "oneswitch_refused": t["refused"],
            "refusal_rate": round(t["refused"] / t["valid"], 4),
            "refusals_by_error": dict(STATS["errors"]),
            "refused_examples": REFUSED[:12],
        }
        print("\nbroad rules:", json.dumps(summary))
        if os.environ.get("UNO_BROAD_OUT"):
            with open(os.environ["UNO_BROAD_OUT"], "w") as f:
                json.dump(summary, f, indent=1)


def ovs_valid(rules: rulegen.RuleSet, ref: equiv.Target) -> rulegen.RuleSet:
    """The rules plain OVS accepts (installed on the reference alone, then cleared)."""
    equiv.clear(ref)
    groups = tuple(g for g in rules.groups if ref.ofctl("add-group", g).returncode == 0)
    flows = tuple(f for f in rules.flows if ref.ofctl("add-flow", f).returncode == 0)
    equiv.clear(ref)
    return rulegen.RuleSet(rules.seed, groups, flows)


def error_name(stderr: str) -> str:
    for word in stderr.replace(",", " ").split():
        if word.startswith(("OFPBAC_", "OFPBMC_", "OFPBIC_", "OFPFMFC_", "OFPBRC_", "OFPGMFC_")):
            return word.rstrip(":.")
    return stderr.splitlines()[0] if stderr else "?"


@pytest.mark.parametrize("seed", SEEDS)
def test_broad_rules_no_physical_refusal_and_equivalent(pair, seed):
    os_host, sut, ref = pair
    rules = rulegen_broad.generate(seed, VPORTS, n_rules=N_RULES)
    valid = ovs_valid(rules, ref)
    errors_before = physical_errors(os_host.client)
    loaded = equiv.load(valid, sut, ref)
    names = [error_name(err) for _, err in loaded.refused]
    STATS["total"].update(generated=len(rules.flows), valid=len(valid.flows), refused=len(names))
    STATS["errors"].update(names)
    REFUSED.extend(spec for spec, _ in loaded.refused)
    assert physical_errors(os_host.client) == errors_before, (
        f"seed {seed}: a physical switch refused a translation"
    )
    undocumented = [
        (spec, n) for (spec, _), n in zip(loaded.refused, names, strict=True) if n not in DOCUMENTED
    ]
    assert not undocumented, f"seed {seed}: refusals not in the README table: {undocumented}"
    check_equivalent(sut, ref, seed, valid)


def _issue_frames(proto: str) -> list[tuple[int, int, bytes]]:
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.l2 import Dot1Q, Ether
    from scapy.packet import Raw

    l4 = TCP(sport=1234, dport=5001) if proto == "tcp" else UDP(sport=1234, dport=5001)
    out = []
    for i in range(4):
        f = (
            Ether(src=rulegen.MACS[0], dst=rulegen.MACS[1])
            / Dot1Q(vlan=10)
            / IP(src="10.99.0.1", dst="10.99.0.2")
        )
        out.append((900 + i, 100, bytes(f / l4 / Raw(rulegen.marker(900 + i) + b"z" * 20))))
    return out


@pytest.mark.parametrize("proto,nw_proto", [("tcp", 6), ("udp", 17)])
def test_issue_rules_known_vlan_then_l4_set_field(pair, proto, nw_proto):
    """in_port=100 (a VM, host switch), dl_vlan=10, IPv4/TCP (UDP): output to the wire (vport 1, across PCIe),
    then the L4 port rewritten and output to the other VM: accepted (before: MATCH_INCONSISTENT from the
    physical switch on the MPLS carrier's pop_mpls) and forwarding as plain OVS does."""
    os_host, sut, ref = pair
    spec = (
        f"table=0,priority=100,in_port=100,dl_vlan=10,dl_type=0x0800,nw_proto={nw_proto},"
        f"actions=output:1,set_field:80->{proto}_dst,output:101"
    )
    rules = rulegen.RuleSet(0, (), (spec,))
    errors_before = physical_errors(os_host.client)
    loaded = equiv.load(rules, sut, ref)
    assert loaded.accepted == [spec], loaded.refused
    assert physical_errors(os_host.client) == errors_before
    pkts = _issue_frames(proto)
    got_ref = equiv.run_packets(ref, pkts)
    got_sut = equiv.run_packets(sut, pkts)
    assert not equiv.differences(pkts, got_sut, got_ref, ("oneswitch", "reference"))
    assert all(set(dict(c)) and {v for v, _ in c} == {1, 101} for c in got_ref.values()), got_ref
