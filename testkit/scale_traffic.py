"""Scale-out/in under traffic, on the real testbed (testkit.testbed): the driver shared by
tests/migration/test_scale.py and `./uno bench migration` part (d) (StatelessNF NSDI Figure 9 analogue).

A stateful firewall (TCP: only the VM may open a connection; state in Redis, or in the process with
`--store local`) serves the VM <-> wire chain; a schedule of phases, each one `traffic gen` run of many
TCP-like flows (SYN, SYN+ACK, ACK, sequenced data, FIN) at its own rate, the NF resized to the phase's
instance count shortly after the phase started (so the resize happens with the phase's connections
established and their data flowing). Per phase the sink's report (received/lost); the whole run sampled
every `sample_s` from the VM's tx and the wire's rx packet counters (offered vs delivered packets/s).
"""

from __future__ import annotations

import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from emulated_host import naming as nm
from testkit.testbed import Testbed, report

# TCP connections may only be opened from the VM; packets of an unknown connection are dropped.
FW_TCP = {
    "rules": [{"action": "allow", "proto": "tcp", "src": f"{nm.ip_vm(0)}/32", "dst": "any"}],
    "default": "deny",
}
# The generator's MACs: NOT the namespaces' own, so neither kernel takes the TCP frames as its own (it would
# answer with RSTs, which close the firewall's connections); OneSwitch's rules steer by these source MACs.
GEN_VM_MAC, GEN_OUT_MAC = "02:00:00:00:5c:01", "02:00:00:00:5c:02"


@dataclass
class Phase:
    rate: float  # offered packets/s (all frames of the gen: data + handshakes)
    secs: float
    instances: int  # the NF is resized to this count `resize_after` s into the phase


@dataclass
class PhaseResult:
    phase: Phase
    sent: int
    received: int
    lost: int
    duplicates: int
    scale_ms: float | None  # the agent's scale call (start..verify or set..release)
    set_ms: float | None  # OneSwitch's time to re-spread the vport
    t_resize: float | None  # seconds since the run's start


@dataclass
class ScaleRun:
    phases: list[PhaseResult] = field(default_factory=list)
    samples: list[tuple[float, float, float, int]] = field(
        default_factory=list
    )  # t, offered, delivered pps, n

    @property
    def lost(self) -> int:
        return sum(p.lost for p in self.phases)


def add_tcp_firewall(tb: Testbed, nf_id: str = "fw", at: str = "host") -> int:
    """The TCP firewall pinned to `at`, chained VM <-> NF <-> wire for the generator's MACs."""
    return tb.add_nf(nf_id, "firewall", FW_TCP, at, pin=True, macs=(GEN_VM_MAC, GEN_OUT_MAC))


class _Counters:
    """Packet counters of an interface inside a namespace, read through /proc/PID/net/dev of a process
    (a `sleep`) that lives there: no fork per sample."""

    def __init__(self, ns: str, iface: str):
        self.iface = iface
        self.p = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "3600"], stdin=subprocess.DEVNULL)
        time.sleep(0.05)

    def read(self) -> tuple[int, int]:
        """(rx_packets, tx_packets)."""
        for line in Path(f"/proc/{self.p.pid}/net/dev").read_text().splitlines():
            name, _, rest = line.partition(":")
            if name.strip() == self.iface:
                f = rest.split()
                return int(f[1]), int(f[9])
        return 0, 0

    def close(self) -> None:
        self.p.kill()
        self.p.wait(timeout=10)


def run_schedule(tb: Testbed, phases: list[Phase], flows: int = 64, nf_id: str = "fw",
                 resize_after: float | None = None, sample_s: float = 0.25, run_base: int = 5000) -> ScaleRun:  # fmt: skip
    """Drive `phases` through the NF `nf_id` of `tb`; resize during each phase (`resize_after` s into it;
    default: once the handshakes of all flows went out, so every connection is established first); sample
    the rates."""
    out = ScaleRun()
    vm, wire = _Counters(tb.vm_ns, tb.vm_if), _Counters(tb.out_ns, tb.out_if)
    stop = threading.Event()
    t0 = time.monotonic()

    def sampler() -> None:
        prev = (time.monotonic(), vm.read()[1], wire.read()[0])
        while not stop.wait(sample_s):
            now = (time.monotonic(), vm.read()[1], wire.read()[0])
            dt = now[0] - prev[0]
            n = len(tb.agent.state.nfs[nf_id].instances)
            out.samples.append((round(now[0] - t0, 3), (now[1] - prev[1]) / dt, (now[2] - prev[2]) / dt, n))
            prev = now

    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    try:
        for k, ph in enumerate(phases):
            run = run_base + k
            pkts = max(1, int(ph.rate * ph.secs / flows) - 5)  # data packets per flow (+5 handshake frames)
            sink = tb.sink(
                "out", run, expect=flows * pkts, idle_ms=2500, duration_ms=int(ph.secs * 1000) + 60_000
            )
            gen = _gen_tcp(tb, run, flows, pkts, ph.rate, 5001 + k)  # fresh connections per phase
            scale_ms = set_ms = t_resize = None
            if len(tb.agent.state.nfs[nf_id].instances) != ph.instances:
                time.sleep(resize_after if resize_after is not None else 3 * flows / ph.rate + 0.2)
                t_resize = time.monotonic() - t0
                ts = time.monotonic()
                r = tb.agent.scale(nf_id, ph.instances)
                scale_ms, set_ms = (time.monotonic() - ts) * 1000, r.get("set_ms")
            report(gen, timeout=ph.secs * 4 + 120)
            got = report(sink, timeout=ph.secs * 4 + 120)
            out.phases.append(
                PhaseResult(
                    ph,
                    int(got["expected"]),
                    int(got["received"]),
                    int(got["lost"]),
                    int(got["duplicates"]),
                    scale_ms,
                    set_ms,
                    t_resize,
                )  # fmt: skip
            )
    finally:
        stop.set()
        th.join(timeout=5)
        vm.close()
        wire.close()
    return out


def _gen_tcp(
    tb: Testbed, run: int, flows: int, pkts: int, rate: float, dst_port: int = 5001
) -> subprocess.Popen:
    """`traffic gen` of TCP-like flows from the VM to the wire (Testbed.gen sends UDP)."""
    return tb._spawn(tb.vm_ns, ["gen", "--port", tb.vm_if, "--run", str(run), "--flows", str(flows),
                                "--pkts", str(pkts), "--rate", str(rate), "--size", "64",
                                "--src", nm.ip_vm(0), "--dst", nm.ip_outside(0, 0), "--src-mac", GEN_VM_MAC,
                                "--dst-mac", GEN_OUT_MAC, "--dst-port", str(dst_port)])  # fmt: skip
