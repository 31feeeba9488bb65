"""An sNIC dies under OneSwitch (issue 22): its Open vSwitch is killed -9, vswitchd and ovsdb-server together, as a
DPU reboot takes them. An emulated host with two sNICs; an NF namespace on snic0 (one-armed: a reflector sends
every frame back out) is vport 200; VM 0 -> NF -> snic1's wire port flows through the host switch and both PCIe
links. Then:

- OneSwitch sees snic0 go at once (its unix socket closes): `GET /v1/health` says when and why, and the
  controller (a raw OpenFlow connection) gets PORT_STATUS MODIFY link down for snic0's vports;
- the NF is failed over to a spare namespace on the host switch by a remap of vport 200: the call does not wait
  for snic0 (printed: its time, and the loss window of a stream running through the failover), the vport is up
  again, and VM -> NF -> snic1's wire flows again;
- snic0's OVS comes back (its conf.db kept its bridge and ports, its flow table is empty): OneSwitch reconnects,
  the wire port goes up again, and snic0's flow table is exactly what OneSwitch wants there (`GET /v1/physical`:
  every flow under the cookie it was installed with, no other flow), without the NF's old rules and with its
  wire port's; the host's and snic1's are exact too.

Real frames, real Open vSwitch, real OneSwitch. Everything is torn down, also on a failure."""

from __future__ import annotations

import os
import re
import signal
import struct
import threading
import time
from dataclasses import dataclass, field

import pytest

from emulated_host import naming as nm
from host_datapath.sysutil import pid_alive, wait_for
from testkit.oneswitch import ofraw
from testkit.oneswitch.pktio import Endpoint, ofctl13

from .conftest import ONESWITCH, bring_up, teardown

pytestmark = ONESWITCH

WIRE0, WIRE1, VM, NF = 1, 9, 100, 200  # snic0's Ethernet port, snic1's, VM 0, the NF
MAGIC = b"SNICDEATH"
PORT_STATUS = 12
OFPPR_MODIFY = 2
OFPPS_LINK_DOWN = 1


def frame(pid: int, src_mac: str, dst_ip: str = "10.9.9.9") -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    return bytes(
        Ether(src=src_mac, dst="02:00:00:00:09:09")
        / IP(src="10.7.0.1", dst=dst_ip)
        / UDP(sport=4242, dport=4243)
        / Raw(MAGIC + struct.pack("!I", pid) + b"x" * 20)
    )


def pid_of(f: bytes) -> int | None:
    i = f.find(MAGIC)
    return struct.unpack_from("!I", f, i + len(MAGIC))[0] if i >= 0 else None


@dataclass
class PortEvent:
    t: float
    reason: int
    vport: int
    link_down: bool


@dataclass
class Controller:
    """A raw OpenFlow connection to OneSwitch, read by a thread: echoes answered, PORT_STATUS kept."""

    conn: ofraw.Conn
    events: list[PortEvent] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None

    def start(self) -> Controller:
        self.conn.hello()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self.stop.is_set() and not self.conn.closed:
            r = self.conn.recv(0.2)
            if r is None:
                continue
            if r.type == ofraw.ECHO_REQUEST:
                self.conn.send(ofraw.msg(ofraw.ECHO_REPLY, r.body, xid=r.xid))
            elif r.type == PORT_STATUS and len(r.body) >= 8 + 48:
                port_no = struct.unpack_from("!I", r.body, 8)[0]
                state = struct.unpack_from("!I", r.body, 8 + 36)[0]
                self.events.append(
                    PortEvent(time.monotonic(), r.body[0], port_no, bool(state & OFPPS_LINK_DOWN))
                )

    def wait(self, vport: int, link_down: bool, since: float, timeout: float = 30) -> PortEvent:
        """The first PORT_STATUS MODIFY of `vport` after `since` with that link state."""

        def find() -> PortEvent | None:
            return next(
                (e for e in list(self.events)
                 if e.t >= since and e.vport == vport and e.reason == OFPPR_MODIFY and e.link_down == link_down),
                None,
            )  # fmt: skip

        wait_for(lambda: find() is not None, timeout, f"PORT_STATUS of vport {vport} link_down={link_down}")
        return find()  # type: ignore[return-value]

    def close(self) -> None:
        self.stop.set()
        if self.thread:
            self.thread.join(5)
        self.conn.close()


class Reflector:
    """A one-armed NF: every frame arriving at the endpoint is sent back out of it."""

    def __init__(self, ep: Endpoint):
        self.ep = ep
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            for f in self.ep.drain():
                self.ep.send(f)
            time.sleep(0.0005)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)


class Stream:
    """Frames from `src` every `gap` seconds, numbered from `first`; arrivals at `dst` recorded (both by time)."""

    def __init__(self, src: Endpoint, dst: Endpoint, first: int, gap: float = 0.005):
        self.src, self.dst, self.first, self.gap = src, dst, first, gap
        self.sent: dict[int, float] = {}
        self.got: dict[int, float] = {}
        self.stop = threading.Event()
        self.stop_send = threading.Event()
        self.threads = [
            threading.Thread(target=self._send, daemon=True),
            threading.Thread(target=self._recv, daemon=True),
        ]
        for t in self.threads:
            t.start()

    def _send(self) -> None:
        i = self.first
        while not self.stop_send.is_set():
            self.src.send(frame(i, "02:00:00:00:00:10"))
            self.sent[i] = time.monotonic()
            i += 1
            time.sleep(self.gap)

    def _recv(self) -> None:
        while not self.stop.is_set():
            for f in self.dst.drain():
                p = pid_of(f)
                if p is not None and p >= self.first:
                    self.got.setdefault(p, time.monotonic())
            time.sleep(0.001)

    def close(self) -> None:
        self.stop_send.set()
        self.threads[0].join(5)
        time.sleep(0.5)  # the last frames arrive
        self.stop.set()
        self.threads[1].join(5)


def arrivals(src: Endpoint, frames: list[tuple[int, bytes]], sinks: dict[str, Endpoint], quiet: float = 0.5):
    """Sends `frames` from `src`; returns {pid: [sink names it reached]}."""
    for ep in sinks.values():
        ep.drain()
    for _, f in frames:
        src.send(f)
    got: dict[int, list[str]] = {}
    deadline = time.monotonic() + quiet
    while time.monotonic() < deadline:
        for name, ep in sinks.items():
            for f in ep.drain():
                p = pid_of(f)
                if p is not None:
                    got.setdefault(p, []).append(name)
                    deadline = time.monotonic() + quiet
        time.sleep(0.005)
    return got


@dataclass
class Bed:
    host: object
    status: dict
    client: object
    eps: dict[str, Endpoint]


@pytest.fixture
def bed():
    host, status = bring_up(vms=1, snics=[{"pcie_gbps": 0, "eth_ports": 1}, {"pcie_gbps": 0, "eth_ports": 1}])
    eps: dict[str, Endpoint] = {}
    try:
        n = host.name
        sw = host.switches()
        try:
            sw["snic0"].attach_namespace(f"{n}-nf0", f"{n}-n0", f"{n}-n0p", nm.NF_PORT_BASE)  # the NF
            # its failover place, on the host switch
            sw["host"].attach_namespace(f"{n}-nf1", f"{n}-n1", f"{n}-n1p", nm.NF_PORT_BASE)
        finally:
            for s in sw.values():
                s.close()
        client = host.oneswitch().client(timeout=30)
        client.map_port(NF, "snic0", nm.NF_PORT_BASE, "nf")
        eps = {
            "vm": Endpoint(nm.ns_vm(n, 0), nm.if_vm(n, 0)[0]).open(),
            "wire0": Endpoint(nm.ns_outside(n, 0, 0), nm.if_eth(n, 0, 0)[1]).open(),
            "wire1": Endpoint(nm.ns_outside(n, 1, 0), nm.if_eth(n, 1, 0)[1]).open(),
            "nf_snic0": Endpoint(f"{n}-nf0", f"{n}-n0").open(),
            "nf_host": Endpoint(f"{n}-nf1", f"{n}-n1").open(),
        }
        yield Bed(host, status, client, eps)
    finally:
        for ep in eps.values():
            ep.close()
        teardown(host)


def flows_by_cookie(target: str) -> dict[int, tuple[int, int]]:
    """The switch's flows (ovs-ofctl dump-flows): cookie -> (table, priority)."""
    out: dict[int, tuple[int, int]] = {}
    for ln in ofctl13(target, "dump-flows", names=False).splitlines():
        if "actions=" not in ln:
            continue
        cookie = re.search(r"\bcookie=(0x[0-9a-f]+)", ln)
        table = re.search(r"\btable=(\d+)", ln)
        prio = re.search(r"\bpriority=(\d+)", ln)
        assert cookie, ln
        out[int(cookie.group(1), 16)] = (
            int(table.group(1)) if table else 0,
            int(prio.group(1)) if prio else 32768,
        )
    return out


def wanted(client, sw: str) -> tuple[bool, dict[int | None, tuple[int, int]], int]:
    """OneSwitch's view of switch `sw` (GET /v1/physical): connected?, cookie -> (table, priority) of every
    flow it wants there (None: one not installed), and how many it wants."""
    p = client.request("GET", "/v1/physical")[1][sw]
    flows = {
        None if f["cookie"] is None else int(f["cookie"], 16): (f["table"], f["priority"]) for f in p["flows"]
    }
    return p["connected"], flows, len(p["flows"])


def holds_exactly_what_is_wanted(client, sw: str, target: str) -> bool:
    """The switch's flow table is exactly what OneSwitch wants there: every wanted flow under the cookie it was
    installed with (same table and priority), no other flow."""
    connected, want, n = wanted(client, sw)
    return connected and None not in want and len(want) == n and want == flows_by_cookie(target)


def test_snic_death_failover_and_return(bed):
    host, status, client, eps = bed.host, bed.status, bed.client, bed.eps
    snic0 = status["snics"][0]
    listen = status["oneswitch"]["listen"]
    ctl = Controller(ofraw.Conn(int(listen.rsplit(":", 1)[1]))).start()
    reflectors = [Reflector(eps["nf_snic0"])]
    stream = None
    try:
        for rule in (
            f"table=0,priority=10,in_port={VM},ip,actions=output:{NF}",  # VM -> NF
            f"table=0,priority=10,in_port={NF},ip,actions=output:{WIRE1}",  # NF -> snic1's wire
            f"table=0,priority=10,in_port={WIRE1},ip,actions=output:{NF}",  # snic1's wire -> NF
            f"table=0,priority=10,in_port={WIRE0},ip,actions=output:{VM}",  # snic0's wire -> VM (stays on snic0)
            f"table=0,priority=20,in_port={VM},ip,nw_dst=10.1.0.1,actions=output:{WIRE0}",  # VM -> snic0's wire
        ):
            ofctl13(listen, "add-flow", rule, names=False)
        sinks = {k: eps[k] for k in ("vm", "wire0", "wire1")}
        vm_mac = "02:00:00:00:00:10"
        # VM -> NF (reflected) -> snic1's wire; snic1's wire -> NF -> back to snic1's wire; snic0's wire -> VM.
        assert arrivals(eps["vm"], [(1, frame(1, vm_mac))], sinks) == {1: ["wire1"]}
        assert arrivals(eps["wire1"], [(2, frame(2, "02:00:00:00:00:21"))], sinks) == {2: ["wire1"]}
        assert arrivals(eps["wire0"], [(3, frame(3, "02:00:00:00:00:20"))], sinks) == {3: ["vm"]}
        assert arrivals(eps["vm"], [(4, frame(4, vm_mac, "10.1.0.1"))], sinks) == {4: ["wire0"]}

        stream = Stream(eps["vm"], eps["wire1"], first=1000)
        time.sleep(0.3)
        # -- snic0 dies: vswitchd and ovsdb-server killed -9 together.
        pids = [snic0["pids"]["ovs-vswitchd"], snic0["pids"]["ovsdb-server"]]
        t_kill = time.monotonic()
        wall_kill_ms = time.time() * 1000
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: client.health().switches["snic0"] == "disconnected", 30, "OneSwitch to see snic0 go")
        t_seen = time.monotonic()
        health = client.request("GET", "/v1/health")[1]
        st = health["switch_states"]["snic0"]
        assert st["state"] == "disconnected" and st["downs"] == 1, st
        assert st["since_ms"] >= wall_kill_ms - 1000, (st, wall_kill_ms)  # (clock granularity)
        assert health["switch_states"]["snic1"]["state"] == "connected" and not health["ok"]
        for pid in pids:
            wait_for(lambda p=pid: not pid_alive(p), 10, "snic0's OVS to die")
        # The controller saw snic0's vports go link down: the wire port and the NF still mapped there.
        ctl.wait(WIRE0, True, t_kill)
        ctl.wait(NF, True, t_kill)

        # -- the failover: vport 200 remapped to the spare NF namespace on the host switch.
        reflectors.append(Reflector(eps["nf_host"]))
        t0 = time.monotonic()
        r = client.remap(NF, "host", nm.NF_PORT_BASE)
        t_remapped = time.monotonic()
        print(
            f"\nsnic0 killed: OneSwitch saw it after <= {(t_seen - t_kill) * 1000:.0f} ms (polled);"
            f" remap away from the dead snic0: {(t_remapped - t0) * 1000:.1f} ms REST call,"
            f" duration_ms {r.duration_ms:.1f}, plan_ms {r.plan_ms}, phases {list(r.phases)}"
        )
        assert r.to["switch"] == "host"
        assert all("snic0" not in p["messages"] and "snic0" not in p["barrier_ms"] for p in r.phases), (
            r.phases
        )
        (p,) = [p for p in client.ports() if p.vport == NF]
        assert (p.switch, p.port, p.draining) == ("host", nm.NF_PORT_BASE, []), p  # no drain on a dead switch
        ctl.wait(NF, False, t0)  # the NF vport is up again, at its new place
        time.sleep(1.0)
        stream.close()
        lost = sorted(set(stream.sent) - set(stream.got))
        after = [i for i in stream.sent if stream.sent[i] > t_remapped]
        first = min((stream.got[i] for i in after if i in stream.got), default=None)
        window = (
            f"sent from {(stream.sent[lost[0]] - t_kill) * 1000:.0f} to {(stream.sent[lost[-1]] - t_kill) * 1000:.0f}"
            " ms after the kill"
            if lost
            else "none"
        )
        print(
            f"stream VM -> NF -> snic1's wire, one frame / 5 ms: {len(stream.sent)} sent, {len(lost)} lost"
            f" ({window}; kill -> remap answered"
            f" {(t_remapped - t_kill) * 1000:.0f} ms); sent after the remap answered: {len(after)},"
            f" of them lost {len([i for i in after if i not in stream.got])}; first of them through"
            f" {'never' if first is None else f'{(first - t_remapped) * 1000:.0f} ms'} after the answer"
        )
        stream = None
        # Traffic flows again: VM -> NF (now on the host) -> snic1's wire, and snic1's wire -> NF -> back.
        got = arrivals(eps["vm"], [(i, frame(i, vm_mac)) for i in range(10, 40)], sinks)
        assert got == {i: ["wire1"] for i in range(10, 40)}, got
        assert arrivals(eps["wire1"], [(6, frame(6, "02:00:00:00:00:21"))], sinks) == {6: ["wire1"]}

        # -- snic0 comes back: the same bridge and ports (conf.db), empty flow tables.
        t_back = time.monotonic()
        sw = host.switches()
        try:
            sw["snic0"].ovs.start()
        finally:
            for s in sw.values():
                s.close()
        wait_for(lambda: client.health().all_connected(), 30, "OneSwitch to reconnect snic0")
        ctl.wait(WIRE0, False, t_back)  # the wire port is up again
        wait_for(
            lambda: holds_exactly_what_is_wanted(client, "snic0", snic0["openflow"]),
            30,
            "snic0 reconciled to exactly what OneSwitch wants",
        )
        back_ms = (time.monotonic() - t_back) * 1000
        print(f"snic0 back: reconnected and reconciled {back_ms:.0f} ms after its OVS start")
        flows0 = [
            ln.strip()
            for ln in ofctl13(snic0["openflow"], "dump-flows", names=False).splitlines()
            if "actions=" in ln
        ]
        # The NF's old rules are gone from snic0, its wire port's are there.
        assert not any(f"in_port={nm.NF_PORT_BASE}" in f for f in flows0), flows0
        assert any("in_port=1," in f or "in_port=1 " in f for f in flows0), flows0
        for sw_id, target in (
            ("host", status["host"]["openflow"]),
            ("snic1", status["snics"][1]["openflow"]),
        ):
            assert holds_exactly_what_is_wanted(client, sw_id, target), sw_id
        st = client.request("GET", "/v1/health")[1]["switch_states"]["snic0"]
        assert st["state"] == "connected" and st["downs"] == 1 and st["reason"] is None, st
        # Every path works again, the NF's included; the NF vport never went down again.
        assert arrivals(eps["wire0"], [(7, frame(7, "02:00:00:00:00:20"))], sinks) == {7: ["vm"]}
        assert arrivals(eps["vm"], [(8, frame(8, vm_mac, "10.1.0.1"))], sinks) == {8: ["wire0"]}
        assert arrivals(eps["vm"], [(9, frame(9, vm_mac))], sinks) == {9: ["wire1"]}
        assert not [e for e in ctl.events if e.t >= t_back and e.vport == NF], ctl.events
        assert not [e for e in ctl.events if e.vport == WIRE1 and e.link_down], ctl.events  # snic1 lived on
    finally:
        if stream is not None:
            stream.close()
        for rf in reflectors:
            rf.close()
        ctl.close()
