"""The demo chain description's validation and its steering rules (pure logic; the real controller and
OneSwitch are exercised by tests/demo/test_run_once.py)."""

from __future__ import annotations

import json
import random

import pytest

from demo import esp, lb
from demo.chain import (
    Chain,
    ChainError,
    Demo,
    Rule,
    parse_chain,
    parse_chains,
    parse_demo,
    steering_rules,
)
from demo.view import format_move, format_view

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

    # affine profiles: a base cost per running instance counts even without load
    nfs["l7fw"]["instances"] = [{"id": "a"}, {"id": "b"}]
    lines = format_view(view, nfs, {"ips": {"r_host": 1.0}, "l7fw": {"r_host": 2.0, "b_host": 0.5}})
    assert "predicted: 1.02000 cores vs all-on-host 1.03000 -> saved 0.01000" in "\n".join(lines)


def test_a_move_line_shows_each_step_time_and_the_hold():
    steps = [("start", 116.2, ""), ("ready", 3.0, ""), ("remap", 289.4, "host:200"), ("verify", 0.1, ""),
             ("drain", 273.0, "quiet"), ("resume", 9.0, "replayed 170, overflow 0"), ("stop", 251.0, ""),
             ("release", 0.0, "port and namespace removed with stop")]  # fmt: skip
    move = {"id": "ips", "from": "snic0", "to": "host",
            "migration": {"duration_ms": 941.7, "steps": [{"step": n, "ok": True, "ms": ms, "detail": d}
                                                          for n, ms, d in steps]}}  # fmt: skip
    assert format_move(move) == (
        "  ips snic0 -> host: 942 ms; start 116, ready 3, remap 289, verify 0, drain 273 (quiet), "
        "resume 9 (replayed 170, overflow 0), stop 251, release 0"
    )
    no_steps = {"id": "ips", "from": "snic0", "to": "host"}
    assert format_move(no_steps) == "  ips snic0 -> host"


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


LB = {"port": 103, "vip": "10.77.0.100", "vip_port": 80,
      "backends": [{"vm_port": 65, "vm_mac": VM, "ip": "10.77.0.10", "port": 8000},
                   {"vm_port": 66, "vm_mac": APP, "ip": "10.77.0.11", "port": 8000}]}  # fmt: skip
WITH_LB = {**TWO, "lb": LB}
TCP = (("eth_type", 0x0800), ("ip_proto", 6))


def test_lb_path_rules_steer_vip_traffic_through_the_lb_to_each_backend_and_back():
    demo = parse_demo(WITH_LB)
    rules = steering_rules(demo)
    assert rules[:11] == steering_rules(parse_chains(TWO))  # the chains are unchanged
    lb_rules = rules[11:]
    assert lb_rules[0] == Rule(300, 1, None, 103, match=(*TCP, ("ipv4_dst", "10.77.0.100"), ("tcp_dst", 80)))
    for port, mac, ip in ((65, VM, "10.77.0.10"), (66, APP, "10.77.0.11")):
        assert (
            Rule(300, 103, OUT, port, match=(*TCP, ("ipv4_dst", ip), ("tcp_dst", 8000)), set_eth_dst=mac)
            in rules
        )
        assert Rule(300, port, None, 103, match=(*TCP, ("ipv4_src", ip), ("tcp_src", 8000))) in rules
        assert Rule(300, 103, mac, 1, match=(*TCP, ("ipv4_src", "10.77.0.100"), ("tcp_src", 80))) in rules
    assert len(lb_rules) == 1 + 3 * 2
    assert parse_demo(TWO) == Demo(parse_chains(TWO))  # no "lb": the chains only


def _lb(**change):
    return {**TWO, "lb": {**LB, **change}}


def _backend(i, **change):
    bs = [dict(b) for b in LB["backends"]]
    bs[i].update(change)
    return _lb(backends=bs)


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({**TWO, "lb": []}, "lb"),
        (_lb(port=101), r"lb\.port"),
        (_lb(port=1), r"lb\.port"),
        (_lb(port=0), r"lb\.port"),
        (_lb(vip="10.77.0.300"), r"lb\.vip"),
        (_lb(vip=None), r"lb\.vip"),
        (_lb(vip_port=0), r"lb\.vip_port"),
        (_lb(vip_port=65536), r"lb\.vip_port"),
        (_lb(extra=1), r"lb\.extra"),
        (_lb(backends=[]), r"lb\.backends"),
        (_lb(backends=[LB["backends"][0]] * 9), r"lb\.backends"),
        (_lb(backends=[1]), r"lb\.backends\[0\]"),
        (_backend(1, vm_port=67), r"lb\.backends\[1\]\.vm_port"),
        (_backend(1, vm_mac=VM), r"lb\.backends\[1\]\.vm_port"),
        (_backend(0, ip="10.77.0.100"), r"lb\.backends\[0\]\.ip"),
        (_backend(1, ip="10.77.0.10"), r"lb\.backends\[1\]\.ip"),
        (_backend(1, vm_port=65, vm_mac=VM, ip="10.77.0.12"), r"lb\.backends\[1\]\.ip"),
        (_backend(0, port=-1), r"lb\.backends\[0\]\.port"),
        (_backend(0, junk=1), r"lb\.backends\[0\]\.junk"),
        ({**_lb(), "chains": []}, "chains"),
    ],
)
def test_bad_lb_paths_name_the_field(raw, field):
    with pytest.raises(ChainError, match=f"^{field}:"):
        parse_demo(raw)


def test_fuzz_lb_path_rules_stay_within_the_ports():
    rnd = random.Random(13)
    values = [
        0,
        1,
        65,
        66,
        103,
        None,
        "x",
        [],
        {},
        VM,
        APP,
        "10.77.0.10",
        "10.77.0.100",
        80,
        8000,
        True,
        2**16,
    ]
    for _ in range(1000):
        raw = json.loads(json.dumps(WITH_LB))
        for _ in range(rnd.randint(1, 3)):
            bs = raw["lb"]["backends"]
            target = rnd.choice(
                [raw["lb"], *(b for b in bs if isinstance(b, dict))] if isinstance(bs, list) else [raw["lb"]]
            )
            keys = [*LB, "junk"] if target is raw["lb"] else [*LB["backends"][0], "junk"]
            target[rnd.choice(keys)] = rnd.choice(values)
        try:
            demo = parse_demo(raw)
        except ChainError:
            continue
        ports = {p for c in demo.chains for p in (c.vm_port, c.out_port, *c.nf_ports)} | {demo.lb.port}
        for r in steering_rules(demo):
            assert r.in_port in ports and r.out_port in ports and r.in_port != r.out_port


def test_lb_answers_parse_and_spread():
    text = "web 10.77.1.1:40000\napp 10.77.1.1:40002\ngarbage\nother 1.2.3.4:5\nweb 10.77.1.1:40004\n"
    answers = lb.parse_answers(text, ["web", "app"])
    assert answers == [("web", "10.77.1.1:40000"), ("app", "10.77.1.1:40002"), ("web", "10.77.1.1:40004")]
    assert lb.spread(answers, ["web", "app"]) == {"web": 2, "app": 1}
    assert lb.spread([], ["web", "app"]) == {"web": 0, "app": 0}
    assert lb.format_spread({"web": 2, "app": 1}) == "web 2, app 1"
    cfg = lb.lb_config(["10.77.0.10", "10.77.0.11"])
    assert cfg["backends"] == ["10.77.0.10:8000", "10.77.0.11:8000"] and cfg["vip"] == lb.VIP


def test_lb_pool_keys_and_view():
    pool_key, conns = lb.pool_keys("lb", ["10.77.0.10:8000"])
    assert pool_key == "tn:default:nf:lb:{backends}"
    assert conns == {"10.77.0.10:8000": "tn:default:nf:lb:{lb-conns:10.77.0.10:8000}"}
    names = {"10.77.0.10:8000": "web", "10.77.0.11:8000": "app"}
    pool = b"10.77.0.10:8000 down\n10.77.0.11:8000 up\n"
    text = lb.format_pool(pool, {"10.77.0.10:8000": b"2", "10.77.0.11:8000": None}, names)
    assert text == "web 10.77.0.10:8000 down, 2 active; app 10.77.0.11:8000 up, 0 active"
    assert lb.format_pool(None, {}, names) == "pool not seeded yet"
    assert "app 10.77.0.11:8000 not in pool" in lb.format_pool(b"10.77.0.10:8000 up\ngarbage\n", {}, names)
