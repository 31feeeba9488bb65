"""Table offload on the real emulated host (issue 27, oneswitch/README.md "Table offload").

A filter table (virtual table 0: UDP 53 and 10.9.9.66 dropped, the rest goes on) and a forwarding table
(virtual table 1: VM 100 <-> wire 1) installed through OneSwitch; the filter moved to snic0 with
`PUT /v1/tables/0`: UDP frames VM -> wire and wire -> VM are filtered exactly as before, the host OVS's
physical table 1 holds only OneSwitch's handoff rules, snic0's the filter; then back to everywhere.
Real frames, real Open vSwitch, real OneSwitch.
"""

from __future__ import annotations

import pytest

from emulated_host import naming as nm
from testkit.oneswitch.pktio import Endpoint, marked_arrivals, marked_frame, ofctl13

from .conftest import ONESWITCH

pytestmark = ONESWITCH

MAGIC = b"OFFLOADT"
WIRE, VM = 1, 100


def physical_table(os_host, sw: str, table: int) -> list[str]:
    """The flows of physical `table` on switch `sw`, read from the switch itself."""
    sws = os_host.host.switches()
    try:
        out = ofctl13(sws[sw].driver.openflow, "dump-flows", f"table={table}")
    finally:
        for s in sws.values():
            s.close()
    return [ln for ln in out.splitlines() if "priority=" in ln]


@pytest.fixture
def bed(os_host):
    n = os_host.name
    eps = {
        "vm0": Endpoint(nm.ns_vm(n, 0), nm.if_vm(n, 0)[0]).open(),
        "wire": Endpoint(nm.ns_outside(n, 0, 0), nm.if_eth(n, 0, 0)[1]).open(),
    }
    c = os_host.client
    ofctl13(os_host.listen, "del-flows")
    for flow in (
        "table=0,priority=30,udp,tp_dst=53,actions=drop",
        "table=0,priority=25,ip,nw_dst=10.9.9.66,actions=drop",
        "table=0,priority=1,actions=goto_table:1",
        f"table=1,priority=10,in_port={VM},actions=output:{WIRE}",
        f"table=1,priority=10,in_port={WIRE},actions=output:{VM}",
    ):
        ofctl13(os_host.listen, "add-flow", flow)
    try:
        yield os_host, eps
    finally:
        try:
            c.request("PUT", "/v1/tables/0", {"location": "everywhere"})
            ofctl13(os_host.listen, "del-flows")
        finally:
            for ep in eps.values():
                ep.close()


def fates(eps: dict[str, Endpoint]) -> dict[int, list[str]]:
    """Sends the same frames from the VM and from the wire; returns where each arrived (by id)."""
    for ep in eps.values():
        ep.drain()
    sent = 0
    for src, mac in (("vm0", "02:00:00:00:00:10"), ("wire", "02:00:00:00:00:20")):
        for dst_ip, dport in (("10.9.9.9", 53), ("10.9.9.9", 54), ("10.9.9.66", 54), ("10.9.9.9", 80)):
            eps[src].send(marked_frame(MAGIC, sent, mac, dst_ip, dport))
            sent += 1
    return marked_arrivals(eps, MAGIC)


def test_filter_table_on_the_snic_filters_exactly_as_on_the_host(bed):
    os_host, eps = bed
    c = os_host.client
    want = {1: ["wire"], 3: ["wire"], 5: ["vm0"], 7: ["vm0"]}  # 53 and 10.9.9.66 dropped both ways
    assert fates(eps) == want

    _, tables = c.request("GET", "/v1/tables")
    t0 = next(t for t in tables if t["table"] == 0)
    assert t0["location"] == "everywhere" and t0["rules"] == 3 and t0["offload"]["snic0"] is None, t0

    _, r = c.request("PUT", "/v1/tables/0", {"location": "snic0"})
    assert (r["table"], r["from"], r["to"], r["rules"]) == (0, "everywhere", "snic0", 3), r
    assert [p["phase"] for p in r["phases"]] == ["make", "modify", "break"], r
    print(
        f"table 0 everywhere -> snic0: {r['ms']:.1f} ms, phases {[(p['phase'], p['ms']) for p in r['phases']]}"
    )
    host_t1 = physical_table(os_host, "host", 1)
    assert host_t1 and all("tp_dst=53" not in f and "10.9.9.66" not in f for f in host_t1), host_t1
    assert any("tp_dst=53" in f for f in physical_table(os_host, "snic0", 1))
    assert fates(eps) == want

    _, again = c.request("PUT", "/v1/tables/0", {"location": "snic0"})
    assert again["phases"] == []

    _, r = c.request("PUT", "/v1/tables/0", {"location": "everywhere"})
    assert r["to"] == "everywhere"
    assert any("tp_dst=53" in f for f in physical_table(os_host, "host", 1))
    assert fates(eps) == want


def test_table_errors_name_their_field(bed):
    os_host, _ = bed
    c = os_host.client
    for path, body, status, field in (
        ("/v1/tables/254", {"location": "snic0"}, 400, "table"),
        ("/v1/tables/0", {"location": "snic9"}, 400, "location"),
        ("/v1/tables/0", {"location": "snic0", "extra": 1}, 400, "extra"),
    ):
        with pytest.raises(c.error) as e:
            c.request("PUT", path, body)
        assert (e.value.status, e.value.field) == (status, field), e.value
    _, tables = c.request("GET", "/v1/tables")
    assert all(t["location"] == "everywhere" for t in tables), tables


def test_moves_under_a_udp_stream_lose_nothing_and_duplicate_nothing(bed):
    """The filter table moved everywhere -> snic0 -> host -> snic0 -> everywhere while marked UDP frames
    stream both ways: every frame the filter passes arrives exactly once, where it should; every frame it
    drops (UDP 53) arrives nowhere, in every state the moves pass through."""
    import threading
    import time

    os_host, eps = bed
    c = os_host.client
    frames = []
    for i in range(2400):
        src = ("vm0", "02:00:00:00:00:10", "wire") if i % 2 == 0 else ("wire", "02:00:00:00:00:20", "vm0")
        dport = 53 if i % 10 == 3 else 54
        frames.append(
            (src[0], marked_frame(MAGIC, i, src[1], "10.9.9.9", dport), [] if dport == 53 else [src[2]])
        )
    for ep in eps.values():
        ep.drain()
    done = threading.Event()

    def stream() -> None:
        start = time.monotonic()
        for i, (src, frame, _) in enumerate(frames):
            delay = start + i / 800 - time.monotonic()  # 800 frames/s in all, 3 s
            if delay > 0:
                time.sleep(delay)
            eps[src].send(frame)
        done.set()

    t = threading.Thread(target=stream)
    t.start()
    moves = []
    try:
        for loc in ("snic0", "host", "snic0", "everywhere"):
            time.sleep(0.5)
            _, r = c.request("PUT", "/v1/tables/0", {"location": loc, "drain_ms": 300})
            moves.append((loc, r))
    finally:
        t.join(timeout=30)
    assert done.is_set()
    got = marked_arrivals(eps, MAGIC)
    assert [r["to"] for _, r in moves] == ["snic0", "host", "snic0", "everywhere"], moves
    lost = [i for i, (_, _, want) in enumerate(frames) if want and i not in got]
    wrong = {i: got[i] for i, (_, _, want) in enumerate(frames) if i in got and got[i] != want}
    print(f"moves under a stream: {len(frames)} frames, lost {len(lost)}, wrong/duplicated {len(wrong)}")
    assert lost == [], f"{len(lost)} lost: {lost[:20]}"
    assert wrong == {}, f"{len(wrong)} arrived wrongly or twice: {dict(list(wrong.items())[:20])}"


def test_packet_in_of_a_handed_off_packet_reports_its_virtual_in_port(bed, tmp_path):
    """A CONTROLLER rule in the filter table on snic0: a VM frame (host port) is handed off to snic0, whose OVS
    sends the PACKET_IN with the PCIe port as in_port and the handoff's tunnel_id in its match; OneSwitch
    reports the original virtual in_port (the VM's) to the controller, without tunnel_id."""
    import subprocess
    import time

    os_host, eps = bed
    c = os_host.client
    ofctl13(os_host.listen, "add-flow", "table=0,priority=40,udp,tp_dst=99,actions=CONTROLLER:128")
    _, r = c.request("PUT", "/v1/tables/0", {"location": "snic0"})
    assert r["to"] == "snic0", r
    mon = subprocess.Popen(
        [
            "ovs-ofctl",
            "-O",
            "OpenFlow13",
            f"--unixctl={tmp_path}/mon.ctl",
            "monitor",
            os_host.listen,
            "65535",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        time.sleep(1.0)
        for i in range(3):
            eps["vm0"].send(marked_frame(MAGIC, 900 + i, "02:00:00:00:00:10", "10.9.9.9", 99))
            eps["wire"].send(marked_frame(MAGIC, 950 + i, "02:00:00:00:00:20", "10.9.9.9", 99))
        time.sleep(2.0)
    finally:
        mon.terminate()
        out = mon.communicate(timeout=10)[0]
    ins = [ln for ln in out.splitlines() if "PACKET_IN" in ln]
    print("\n".join(ins))
    assert len(ins) == 6, out
    assert sum(f" in_port={VM} " in ln for ln in ins) == 3, out
    assert sum(f" in_port={WIRE} " in ln for ln in ins) == 3, out
    assert not any("tun_id" in ln or "tunnel_id" in ln for ln in ins), out
