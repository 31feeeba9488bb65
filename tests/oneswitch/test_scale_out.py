"""One virtual port served by several instances (issue 7 scale-out), on the real emulated host.

Vport 200 is served by the host NF namespace (host:200) and the spare namespace on snic0 (snic0:201) through
`PUT /v1/ports/200/instances`: OneSwitch's select group on each ingress switch spreads the flows sent to it,
each flow sticking to one instance. Real frames, real Open vSwitch, real OneSwitch.

OneSwitch's select groups hash a symmetric L3/L4 hash with UDP ports by default (the dispatch rules' multipath
into reg7, `selection_method=hash,fields(reg7)` over OpenFlow 1.5: south.SelectMethod): UDP flows of one
address pair spread, and both directions of a flow reach one instance
(test_flows_of_one_address_pair_spread_over_three_instances). A second host with `oneswitch.select_hash: ovs`
(OVS's own default dp_hash, UDP ports left out) is the comparison: there every UDP flow of the pair takes one
instance.
"""

from __future__ import annotations

import struct
import threading
import time
from collections import Counter, defaultdict

import pytest

from emulated_host import naming as nm
from testkit.oneswitch import ofraw
from testkit.oneswitch.pktio import Endpoint, collect, ofctl13

from .conftest import (
    NF_HOST,
    NF_SNIC,
    ONESWITCH,
    SPARE_HOST_OFPORT,
    SPARE_SNIC_OFPORT,
    OsHost,
    attach_nfs,
    bring_up,
    teardown,
)

pytestmark = ONESWITCH

MAGIC = b"SCALEOUT"
UDP_DST = 7777
TWO = [("host", nm.NF_PORT_BASE), ("snic0", SPARE_SNIC_OFPORT)]
ONE = [("host", nm.NF_PORT_BASE)]
THREE = [*TWO, ("host", SPARE_HOST_OFPORT)]


def frame(
    pid: int,
    sport: int,
    src_mac: str,
    src_ip: str,
    dport: int = UDP_DST,
    tcp: bool = False,
    dst_ip: str = "10.9.9.9",
) -> bytes:
    """A UDP/IPv4 frame of flow (src_ip, sport -> dst_ip:dport) carrying packet id `pid` (`tcp`: a TCP
    segment, ACK set, of that flow instead)."""
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    return bytes(
        Ether(src=src_mac, dst="02:00:00:00:09:09")
        / IP(src=src_ip, dst=dst_ip)
        / (TCP(sport=sport, dport=dport, flags="A", seq=pid) if tcp else UDP(sport=sport, dport=dport))
        / Raw(MAGIC + struct.pack("!I", pid) + b"x" * 20)
    )


def pid_of(f: bytes) -> int | None:
    i = f.find(MAGIC)
    return struct.unpack_from("!I", f, i + len(MAGIC))[0] if i >= 0 else None


class Bench:
    """ovs-ofctl against OneSwitch and raw sockets at the ports of the test."""

    def __init__(self, os_host):
        self.os = os_host
        n = os_host.name
        self.vm0 = Endpoint(nm.ns_vm(n, 0), nm.if_vm(n, 0)[0]).open()
        self.vm1 = Endpoint(nm.ns_vm(n, 1), nm.if_vm(n, 1)[0]).open()
        self.eth0 = Endpoint(nm.ns_outside(n, 0, 0), nm.if_eth(n, 0, 0)[1]).open()
        self.a = os_host.nf(0).open()  # instance host:200
        self.b = os_host.nf(2).open()  # instance snic0:201
        self.other = os_host.nf(1).open()  # vport 201: nothing for it must arrive
        self.c = os_host.nf(3).open()  # instance host:202 (the third)

    def ofctl(self, *args: str) -> str:
        return ofctl13(self.os.listen, *args)

    def sinks(self) -> dict[str, list[Endpoint]]:
        return {"a": [self.a], "b": [self.b], "c": [self.c], "vm1": [self.vm1], "other": [self.other]}

    def drain(self) -> None:
        for ep in (self.vm0, self.vm1, self.eth0, self.a, self.b, self.c, self.other):
            ep.drain()

    def close(self) -> None:
        for ep in (self.vm0, self.vm1, self.eth0, self.a, self.b, self.c, self.other):
            ep.close()


@pytest.fixture(scope="module")
def bench(os_host):
    yield from _bench(os_host)


@pytest.fixture(scope="module")
def bench_ovs():
    """A second host whose OneSwitch leaves scale-out groups to OVS's default hash (`select_hash: ovs`)."""
    host, _ = bring_up(oneswitch={"select_hash": "ovs"})
    try:
        attach_nfs(host)
        client = host.oneswitch().client(timeout=30)
        client.map_port(NF_HOST, "host", nm.NF_PORT_BASE, "nf0")
        client.map_port(NF_SNIC, "snic0", nm.NF_PORT_BASE, "nf1")
        yield from _bench(OsHost(host, host.status(), client))
    finally:
        teardown(host)


def _bench(os_host):
    b = Bench(os_host)
    b.ofctl("del-flows")
    b.ofctl("del-groups")
    for f in (
        f"in_port=100,udp,tp_dst={UDP_DST},actions=output:{NF_HOST}",
        f"in_port=1,udp,tp_dst={UDP_DST},actions=output:{NF_HOST}",
        f"in_port={NF_HOST},udp,tp_dst={UDP_DST},actions=output:101",
    ):
        b.ofctl("add-flow", f)
    try:
        yield b
    finally:
        try:
            os_host.client.set_instances(NF_HOST, ONE)
            b.ofctl("del-flows")
        finally:
            b.close()


def send(b: Bench, pkts: list[tuple[Endpoint, bytes]], gap: float = 0.0) -> dict[int, list[str]]:
    """Sends the frames (with `gap` seconds between them); returns packet id -> sinks it arrived at."""
    b.drain()
    got: dict[int, list[str]] = defaultdict(list)
    for ep, f in pkts:
        ep.send(f)
        if gap:
            time.sleep(gap)
    for key, f in collect(b.sinks(), quiet=0.8):
        p = pid_of(f)
        if p is not None:
            got[p].append(str(key))
    return got


def src_of(i: int) -> tuple[str, str]:
    """Source MAC and IP of flow i: even flows from VM 0 (host switch), odd ones from Ethernet port 0 (snic0)."""
    return (
        "02:00:00:00:00:10" if i % 2 == 0 else "02:00:00:00:00:20"
    ), f"10.{i % 2}.{i // 250}.{i % 250 + 1}"


def flows(n_flows: int, per_flow: int, first_pid: int = 0) -> tuple[list, dict[int, tuple]]:
    """Frames of n_flows UDP flows, per_flow packets each, interleaved."""
    pkts, flow_of = [], {}
    pid = first_pid
    for _ in range(per_flow):
        for i in range(n_flows):
            key = ("vm0" if i % 2 == 0 else "eth0", 20000 + i)
            pkts.append((key, frame(pid, 20000 + i, *src_of(i))))
            flow_of[pid] = key
            pid += 1
    return pkts, flow_of


def test_two_instances_spread_flows_each_sticking_to_one(os_host, bench):
    r = os_host.client.set_instances(NF_HOST, TWO)
    assert r.vport == NF_HOST and r.rules >= 2, r
    m = {p.vport: p for p in os_host.client.ports()}[NF_HOST]
    assert m.instances == TWO and (m.switch, m.port) == TWO[0]
    st = {p["vport"]: p for p in os_host.host.oneswitch().status()["ports"]}  # what `uno status --json` shows
    assert st[NF_HOST]["instances"] == [list(i) for i in TWO] and "instances" not in st[100]
    pkts, flow_of = flows(n_flows=64, per_flow=3)
    eps = {"vm0": bench.vm0, "eth0": bench.eth0}
    got = send(bench, [(eps[k[0]], f) for k, f in pkts])
    lost = [p for p in flow_of if len(got.get(p, [])) != 1]
    assert not lost, (
        f"{len(lost)} of {len(flow_of)} not delivered exactly once: {[got.get(p) for p in lost[:10]]}"
    )
    assert all(got[p][0] in ("a", "b") for p in flow_of), Counter(got[p][0] for p in flow_of)
    per_flow: dict[tuple, set[str]] = defaultdict(set)
    for p, key in flow_of.items():
        per_flow[key].add(got[p][0])
    assert all(len(s) == 1 for s in per_flow.values()), "a flow hit two instances"
    where = Counter(next(iter(s)) for s in per_flow.values())
    assert where["a"] > 0 and where["b"] > 0, where
    for src in ("vm0", "eth0"):  # from the host switch and from the sNIC switch alike
        assert {next(iter(per_flow[k])) for k in per_flow if k[0] == src} == {"a", "b"}, (src, per_flow)


def test_in_port_of_the_scaled_port_matches_both_instances_and_port_stats_sum(os_host, bench):
    os_host.client.set_instances(NF_HOST, TWO)

    def rx() -> int:
        out = bench.ofctl("dump-ports", str(NF_HOST))
        line = next(x for x in out.splitlines() if "rx pkts=" in x)
        return int(line.split("rx pkts=")[1].split(",")[0])

    n = 20
    before = rx()
    got = send(
        bench, [(bench.a, frame(1000 + i, 30000 + i, "02:00:00:00:00:30", "10.0.0.30")) for i in range(n)]
    )
    mid = rx()
    got.update(
        send(
            bench, [(bench.b, frame(2000 + i, 30000 + i, "02:00:00:00:00:31", "10.0.0.31")) for i in range(n)]
        )
    )
    after = rx()
    for base in (1000, 2000):
        assert [got.get(base + i) for i in range(n)] == [["vm1"]] * n, "in_port=200 from each instance -> vm1"
    # The virtual port's counters sum its instances: frames into either physical port count.
    assert mid - before >= n and after - mid >= n, (before, mid, after)


def test_resize_one_two_one_under_traffic_loses_nothing(os_host, bench):
    os_host.client.set_instances(NF_HOST, ONE)
    n = 600
    pkts = []
    for i in range(n):  # every packet its own flow: spread as soon as there are two instances
        pkts.append((bench.vm0 if i % 2 == 0 else bench.eth0, frame(5000 + i, 40000 + i, *src_of(i))))
    results = []

    def resize():
        time.sleep(0.3)
        results.append(os_host.client.set_instances(NF_HOST, TWO))
        time.sleep(0.5)
        results.append(os_host.client.set_instances(NF_HOST, ONE))

    th = threading.Thread(target=resize)
    th.start()
    try:
        got = send(bench, pkts, gap=0.002)
    finally:
        th.join()
    assert len(results) == 2, "a resize failed"
    lost = [5000 + i for i in range(n) if len(got.get(5000 + i, [])) != 1]
    assert not lost, f"{len(lost)} of {n} lost or duplicated during 1->2->1: {lost[:20]}"
    where = Counter(got[5000 + i][0] for i in range(n))
    assert set(where) <= {"a", "b"}, where
    assert where["b"] > 0 and where["a"] > where["b"], where  # the second instance served only in between


def test_packet_in_from_either_instance_carries_the_vport(os_host, bench):
    os_host.client.set_instances(NF_HOST, TWO)
    port = int(os_host.listen.rsplit(":", 1)[1])
    conn = ofraw.Conn(port)
    try:
        conn.hello()
        conn.send(ofraw.flow_mod(NF_HOST, 0xFFFFFFFD, priority=50, xid=80))  # in_port=200 -> CONTROLLER
        conn.send(ofraw.msg(ofraw.BARRIER_REQUEST, xid=81))
        assert not [r.error for r in conn.until(81, ofraw.BARRIER_REPLY) if r.error]
        for i, ep in enumerate((bench.a, bench.b)):
            ep.send(frame(9000 + i, 50000 + i, "02:00:00:00:00:40", "10.0.0.40", dport=7778))
        in_ports = {}
        deadline = time.monotonic() + 15
        while len(in_ports) < 2 and time.monotonic() < deadline:
            r = conn.recv(1.0)
            if r is None or r.type != 10:  # OFPT_PACKET_IN
                continue
            mlen = struct.unpack_from("!H", r.body, 18)[0]  # buffer_id, total_len, reason, table, cookie
            oxm, value = struct.unpack_from("!II", r.body, 20)
            data = r.body[16 + mlen + (-mlen % 8) + 2 :]
            if oxm == 0x80000004 and pid_of(data) is not None:
                in_ports[pid_of(data)] = value
        assert in_ports == {9000: NF_HOST, 9001: NF_HOST}, in_ports
    finally:
        conn.close()
        bench.ofctl("del-flows", "--strict", f"priority=50,in_port={NF_HOST}")


def assert_one_instance_and_vm1(bench, first_pid: int) -> None:
    """32 flows x 2 frames from VM 0 and Ethernet port 0: each frame reaches one instance of vport 200 and
    VM 1, once each, and both instances are used."""
    pkts, flow_of = flows(n_flows=32, per_flow=2, first_pid=first_pid)
    eps = {"vm0": bench.vm0, "eth0": bench.eth0}
    got = send(bench, [(eps[k[0]], f) for k, f in pkts])
    bad = {p: got.get(p) for p in flow_of if sorted(got.get(p, [])) not in (["a", "vm1"], ["b", "vm1"])}
    assert not bad, f"{len(bad)} of {len(flow_of)} frames not at one instance + vm1: {list(bad.items())[:8]}"
    where = Counter(next(x for x in got[p] if x != "vm1") for p in flow_of)
    assert where["a"] > 0 and where["b"] > 0, where


def test_copies_beside_the_scaled_port_and_a_controller_group_chained_to_it(os_host, bench):
    """in_port=1: output:200 then output:101 in one list; in_port=100: a controller ALL group with buckets
    output:200 and output:101 (chained to OneSwitch's select group). Each frame reaches one instance of 200
    and VM 1, once each."""
    os_host.client.set_instances(NF_HOST, TWO)
    bench.ofctl("add-group", "group_id=5,type=all,bucket=output:200,bucket=output:101")
    rules = (
        f"priority=40000,in_port=100,udp,tp_dst={UDP_DST},actions=group:5",
        f"priority=40000,in_port=1,udp,tp_dst={UDP_DST},actions=output:{NF_HOST},output:101",
    )
    for f in rules:
        bench.ofctl("add-flow", f)
    try:
        assert_one_instance_and_vm1(bench, first_pid=60000)
    finally:
        for f in rules:
            bench.ofctl("del-flows", "--strict", f.split(",actions")[0])
        bench.ofctl("del-groups", "group_id=5")


def test_write_actions_output_to_the_scaled_port_uses_its_select_group(os_host, bench):
    """`output:101, write_actions(output:200)` from VM 0 (host switch) and Ethernet port 0 (snic0): the action set
    reaches OneSwitch's select group of vport 200 at the end of the pipeline. Each frame reaches one instance
    of 200 and VM 1, once each, and both instances are used."""
    os_host.client.set_instances(NF_HOST, TWO)
    rules = tuple(
        f"priority=40000,in_port={v},udp,tp_dst={UDP_DST},actions=output:101,write_actions(output:{NF_HOST})"
        for v in (100, 1)
    )
    for f in rules:
        bench.ofctl("add-flow", f)
    try:
        assert_one_instance_and_vm1(bench, first_pid=70000)
    finally:
        for f in rules:
            bench.ofctl("del-flows", "--strict", f.split(",actions")[0])


def spread(
    bench, tcp: bool, first_pid: int, n_flows: int = 30, per_flow: int = 4, reverse: bool = False
) -> dict[str, int]:
    """n_flows flows of ONE address pair (VM 0 -> 10.9.9.9, source ports differ), per_flow frames each,
    over vport 200's three instances: each frame arrives once, each flow at one instance; returns the flows
    per instance. `reverse`: each flow's replies too (10.9.9.9 -> VM 0's address, ports swapped), sent from
    Ethernet port 0 (its ingress switch is snic0, not the host switch), must reach the flow's instance."""
    return dict(Counter(placed(bench, tcp, first_pid, n_flows, per_flow, reverse).values()))


def placed(
    bench, tcp: bool, first_pid: int, n_flows: int = 30, per_flow: int = 4, reverse: bool = False
) -> dict[int, str]:
    """As `spread`, but flow i -> the instance ("a", "b", "c") that received it."""
    pkts, flow_of = [], {}
    for k in range(per_flow):
        for i in range(n_flows):
            pid = first_pid + 2 * (k * n_flows + i)
            pkts.append((bench.vm0, frame(pid, 21000 + i, "02:00:00:00:00:10", "10.0.0.77", tcp=tcp)))
            flow_of[pid] = i
            if reverse:
                back = frame(
                    pid + 1, UDP_DST, "02:00:00:00:00:20", "10.9.9.9", 21000 + i, tcp=tcp, dst_ip="10.0.0.77"
                )
                pkts.append((bench.eth0, back))
                flow_of[pid + 1] = i
    got = send(bench, pkts)
    lost = [p for p in flow_of if len(got.get(p, [])) != 1 or got[p][0] not in ("a", "b", "c")]
    assert not lost, f"{len(lost)} of {len(flow_of)} frames not at exactly one instance: {lost[:10]}"
    per_flow_at: dict[int, set[str]] = defaultdict(set)
    for p, i in flow_of.items():
        per_flow_at[i].add(got[p][0])
    split = {i: s for i, s in per_flow_at.items() if len(s) != 1}
    assert not split, f"flows (both directions: {reverse}) at two instances: {split}"
    return {i: next(iter(s)) for i, s in per_flow_at.items()}


def test_bucket_weights_are_honoured_and_raising_one_moves_flows_only_to_it(os_host, bench):
    """The balancer's ground (nf_agent.balance): OVS gives a flow the bucket with the highest hash x weight, so
    raising one instance's weight moves flows only TO it, and a weights-only change keeps the selection
    method (an OpenFlow 1.3 modify would fall back to OVS's default hash: every UDP flow of the pair on one
    instance). Real OVS, 30 UDP flows of one address pair over three instances."""
    c = os_host.client
    c.set_instances(NF_HOST, THREE)
    try:
        even = placed(bench, tcp=False, first_pid=90000, per_flow=2)
        assert set(even.values()) == {"a", "b", "c"}, even
        scaled = c.set_instances(NF_HOST, THREE, weights=[1000, 1000, 1000])
        assert scaled.to["instances"] and [p.weights for p in c.ports() if p.vport == NF_HOST] == [[1000] * 3]
        assert placed(bench, tcp=False, first_pid=90200, per_flow=2) == even, "equal weights: the hash alone"
        c.set_instances(NF_HOST, THREE, weights=[1000, 1000, 1600])
        raised = placed(bench, tcp=False, first_pid=90400, per_flow=2)
        moved = {i: (even[i], raised[i]) for i in even if even[i] != raised[i]}
        assert moved, "a 1.6x weight moved no flow"
        assert all(to == "c" for _, to in moved.values()), moved
        print(
            f"\nweights 1000/1000/1600: {len(moved)} of 30 flows moved to c: {sorted(Counter(raised.values()).items())}"
        )
        c.set_instances(NF_HOST, THREE, weights=[65535, 1, 1])
        assert set(placed(bench, tcp=False, first_pid=90600, per_flow=2).values()) == {"a"}
    finally:
        c.set_instances(NF_HOST, ONE)


def spread_both(b: Bench, reverse: bool = False) -> dict[str, dict[str, int]]:
    """30 UDP and 30 TCP flows of one address pair over vport 200's three instances: flows per instance
    (`reverse`: with each flow's replies from Ethernet port 0, which must reach the same instance)."""
    b.os.client.set_instances(NF_HOST, THREE)
    proto_rules = [f"priority=40000,in_port=100,tcp,tp_dst={UDP_DST},actions=output:{NF_HOST}"]
    if reverse:
        proto_rules += [
            f"priority=40000,in_port=1,{p},tp_src={UDP_DST},actions=output:{NF_HOST}" for p in ("udp", "tcp")
        ]
    for rule in proto_rules:
        b.ofctl("add-flow", rule)
    try:
        return {
            "udp": spread(b, tcp=False, first_pid=80000, reverse=reverse),
            "tcp": spread(b, tcp=True, first_pid=81000, reverse=reverse),
        }
    finally:
        for rule in proto_rules:
            b.ofctl("del-flows", "--strict", rule.split(",actions")[0])
        b.os.client.set_instances(NF_HOST, ONE)


def test_flows_of_one_address_pair_spread_over_three_instances(bench, bench_ovs):
    """30 UDP and 30 TCP flows between one pair of addresses, each flow sticking to one instance, its replies
    (entering at another switch) at the same instance: by default both spread over all three. With OVS's own
    default hash (`select_hash: ovs`) the TCP flows spread but every UDP flow takes one instance."""
    default, ovs = spread_both(bench, reverse=True), spread_both(bench_ovs)
    print(f"\nflows per instance of 30: default (symmetric, replies included) {default}; ovs {ovs}")
    for proto, where in default.items():
        assert set(where) == {"a", "b", "c"}, (proto, where)
    assert set(ovs["tcp"]) == {"a", "b", "c"} and len(ovs["udp"]) == 1, ovs


# OneSwitch's first scale group id (translate.Translator.SCALE_GROUP_BASE) as OVS prints it.
SCALE_GROUP = str(0xFFF00000)


def _received(log_text: str) -> list[str]:
    """The OpenFlow messages the switch logged as received (vconn debug), in order, each one string (a message
    printed over several lines: its continuation lines, which carry no timestamp, joined)."""
    entries: list[str] = []
    for line in log_text.splitlines():
        if line[:4].isdigit() and "|" in line:
            entries.append(line)
        elif entries:
            entries[-1] += " " + line.strip()
    return [e.split("received: ", 1)[1] for e in entries if "received: " in e]


def test_scale_group_hashes_by_its_method_before_any_flow_uses_it(os_host, bench):
    """On the real switch, across 1 -> 2 -> 3 -> 2 -> 1: the scale group is added, then given its selection
    method over OpenFlow 1.5, before any flow sends to it; its bucket changes come over OpenFlow 1.5 only, with
    the method (an OpenFlow 1.3 modify would put it on OVS's default hash until the next message)."""
    sw = os_host.host.host_switch()
    log = sw.ovs.rundir / "ovs-vswitchd.log"
    start = log.stat().st_size if log.exists() else 0
    sw.ovs.appctl("vlog/set", "vconn:file:dbg")
    try:
        for insts in (TWO, THREE, TWO, ONE):
            os_host.client.set_instances(NF_HOST, insts)
    finally:
        sw.ovs.appctl("vlog/set", "vconn:file:info")
    with open(log, errors="replace") as f:
        f.seek(start)
        msgs = _received(f.read())
    mods = [m for m in msgs if "GROUP_MOD" in m and f"group_id={SCALE_GROUP}" in m]
    uses = [i for i, m in enumerate(msgs) if "FLOW_MOD" in m and f"group:{SCALE_GROUP}" in m]
    assert mods and uses, f"no scale group traffic logged: {len(msgs)} messages"
    of13_modify = [m for m in mods if "(OF1.3)" in m and "): MOD " in m]
    assert not of13_modify, of13_modify[:2]
    method_set = next(i for i, m in enumerate(msgs) if m in mods and "(OF1.5)" in m)
    assert "selection_method=hash,fields=reg7" in msgs[method_set], msgs[method_set]
    assert method_set < uses[0], (msgs[method_set], msgs[uses[0]])
    for m in mods:
        if "(OF1.5)" in m:
            assert "selection_method=hash,fields=reg7" in m, m
