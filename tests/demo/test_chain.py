"""The demo chain description's validation and its steering rules (pure logic; the real controller and
OneSwitch are exercised by tests/demo/test_run_once.py)."""

from __future__ import annotations

import json
import random

import pytest

from nf_agent.demo import esp
from nf_agent.demo.chain import Chain, ChainError, Rule, parse_chain, parse_chains, steering_rules
from nf_agent.demo.view import format_view

VM, OUT = "02:00:00:00:00:01", "02:00:00:00:00:02"
GOOD = {"vm_port": 65, "vm_mac": VM, "out_port": 1, "out_mac": OUT, "nf_ports": [100, 101]}


def test_rules_for_two_nfs_in_series():
    rules = steering_rules(parse_chain(GOOD))
    assert rules == [
        Rule(100, 65, None, 100),
        Rule(200, 100, VM, 101),
        Rule(200, 101, VM, 1),
        Rule(100, 1, None, 101),
        Rule(200, 101, OUT, 100),
        Rule(200, 100, OUT, 65),
    ]


def test_no_nf_is_a_direct_path():
    c = Chain(65, VM, 1, OUT, ())
    assert steering_rules(c) == [Rule(100, 65, None, 1), Rule(100, 1, None, 65)]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"vm_port": 0}, "vm_port"),
        ({"vm_port": True}, "vm_port"),
        ({"out_port": "1"}, "out_port"),
        ({"vm_mac": "02:00:00:00:00"}, "vm_mac"),
        ({"out_mac": "zz:00:00:00:00:02"}, "out_mac"),
        ({"nf_ports": [100, 100]}, "nf_ports"),
        ({"nf_ports": [65]}, "nf_ports"),
        ({"nf_ports": "100"}, "nf_ports"),
        ({"nf_ports": [1.5]}, "nf_ports"),
        ({"extra": 1}, "extra"),
    ],
)
def test_bad_descriptions_name_the_field(change, field):
    with pytest.raises(ChainError, match=f"^{field}:"):
        parse_chain({**GOOD, **change})


def test_fuzz_never_crashes_and_rules_stay_within_the_chain():
    rnd = random.Random(7)
    values = [0, 1, 65, 100, -1, 2**32, None, "x", 1.0, [], {}, VM, OUT, True, [100], [100, 101, 65]]
    for _ in range(2000):
        raw = dict(GOOD)
        for _ in range(rnd.randint(1, 3)):
            raw[rnd.choice([*GOOD, "junk"])] = rnd.choice(values)
        try:
            chain = parse_chain(json.loads(json.dumps(raw)))
        except ChainError:
            continue
        ports = {chain.vm_port, chain.out_port, *chain.nf_ports}
        for r in steering_rules(chain):
            assert r.in_port in ports and r.out_port in ports and r.in_port != r.out_port
    with pytest.raises(ChainError):
        parse_chain([1])


def test_view_counts_saving_from_the_sNIC_placement():
    view = {
        "locations": {"ips": "snic0", "l7fw": "host"},
        "measured": {"nf_load_gbps": {"ips": 0.01, "l7fw": 0.01}, "nf_pps": {"ips": 900.0},
                     "cpu_cores": {"snic0": 0.02, "host": 0.03}, "pcie_gbps": {"snic0": {"down": 0.005, "up": 0.004}}},
        "predicted": {"pcie_gbps": {"snic0": {"down": 0.005, "up": 0.004}}, "violations": []},
    }  # fmt: skip
    nfs = {"ips": {"type": "ips"}, "l7fw": {"type": "l7fw"}}
    lines = format_view(view, nfs, {"ips": {"r_host": 1.0}, "l7fw": {"r_host": 2.0}})
    text = "\n".join(lines)
    assert "predicted: 0.02000 cores vs all-on-host 0.03000 -> saved 0.01000" in text
    assert "measured: 0.0300 cores on the host, 0.0200 on sNICs" in text
    assert "PCIe snic0: measured down 5.000 up 4.000 Mbit/s" in text
    assert any(line.split()[:3] == ["ips", "ips", "snic0"] for line in lines)


APP = "02:00:00:00:00:03"
TWO = {"chains": [GOOD, {"vm_port": 66, "vm_mac": APP, "out_port": 1, "out_mac": OUT, "nf_ports": [102]}]}


def test_two_chains_share_the_outside_port_by_destination_mac():
    rules = steering_rules(parse_chains(TWO))
    assert Rule(150, 1, None, 101, VM) in rules and Rule(150, 1, None, 102, APP) in rules
    assert Rule(100, 1, None, 101) in rules  # broadcasts and other MACs: the first chain
    assert (
        Rule(100, 66, None, 102) in rules
        and Rule(200, 102, APP, 1) in rules
        and Rule(200, 102, OUT, 66) in rules
    )
    assert len(rules) == 6 + 4 + 1  # chain 1: 6 (its outside rule by MAC), chain 2: 4, the default
    assert parse_chains(GOOD) == (parse_chain(GOOD),)  # a single chain object still works


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"chains": []}, "chains"),
        ({"chains": GOOD}, "chains"),
        ({"chains": [GOOD], "x": 1}, "x"),
        ({"chains": [GOOD, {**GOOD, "vm_mac": APP, "vm_port": 66}]}, r"chains\[1\]\.nf_ports"),
        ({"chains": [GOOD, {**GOOD, "vm_port": 66, "nf_ports": [102]}]}, r"chains\[1\]\.vm_mac"),
        ({"chains": [GOOD, {**TWO["chains"][1], "out_port": 2}]}, r"chains\[1\]\.out_port"),
        ({"chains": [GOOD, {**TWO["chains"][1], "vm_port": 0}]}, r"chains\[1\]\.vm_port"),
    ],
)
def test_bad_multi_chain_descriptions_name_the_field(raw, field):
    with pytest.raises(ChainError, match=f"^{field}:"):
        parse_chains(raw)


def test_fuzz_two_chains_rules_stay_within_the_chains():
    rnd = random.Random(11)
    values = [0, 1, 65, 66, 100, 102, None, "x", [], VM, APP, OUT, [102], [100, 102]]
    for _ in range(1000):
        raw = json.loads(json.dumps(TWO))
        for _ in range(rnd.randint(1, 3)):
            c = rnd.choice(raw["chains"])
            c[rnd.choice([*GOOD, "junk"])] = rnd.choice(values)
        try:
            chains = parse_chains(raw)
        except ChainError:
            continue
        ports = {p for c in chains for p in (c.vm_port, c.out_port, *c.nf_ports)}
        for r in steering_rules(chains):
            assert r.in_port in ports and r.out_port in ports and r.in_port != r.out_port


def test_esp_helpers_frame_pcap_round_trip():
    f = esp.udp_frame(OUT, VM, "10.99.0.5", "10.77.0.10", 5555, 5555, b"hi")
    assert esp.udp_payload(f) == ("10.99.0.5", b"hi") and esp.esp_spi(f) is None
    assert esp._csum(f[14:34]) == 0  # the IPv4 header checksum verifies
    assert esp.read_pcap(esp.write_pcap([f, f[:20]])) == [f, f[:20]]
    with pytest.raises(ValueError, match="magic"):
        esp.read_pcap(b"\0" * 24)
    with pytest.raises(ValueError, match="truncated"):
        esp.read_pcap(esp.write_pcap([f])[:-1])
    gw, peer = esp.sa_configs("10.77.0.10", "10.77.1.1", ("00" * 16, "11" * 16))
    assert [(s["dir"], s["spi"]) for s in gw["sas"]] == [("in", esp.SPI_IN), ("out", esp.SPI_OUT)]
    assert [(s["dir"], s["spi"]) for s in peer["sas"]] == [("out", esp.SPI_IN), ("in", esp.SPI_OUT)]
