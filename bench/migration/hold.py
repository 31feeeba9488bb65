"""The hold of a buffered move, as a TCP receiver sees it (bench part `hold`).

The IPS (the one NF type moved buffered: its target queues the chain's traffic from the remap until the old
instance drained, then replays it) chained VM <-> IPS <-> wire on the sNIC, an unpaced iperf3 stream VM ->
outside, the IPS moved sNIC -> host 1.5 s in and back 3 s later. tcpdump at the receiver's interface (the
data segments, headers only); per move: the longest gap between two data segments from the move's start to
1 s after its end = the time the receiver got nothing (the hold: the switch-over's part of the remap, the
drain, the release), with the move's steps.

    ./uno bench migration --part hold [--repeats N]
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import median
from emulated_host import naming as nm
from testkit.testbed import IPS_CONFIG, Testbed

PORT = 5399


def longest_gap_ms(ts: list[float], t0: float, t1: float) -> float | None:
    """Pure: the longest gap (ms) between consecutive timestamps (s) within [t0, t1]; None for < 2 of them."""
    win = [t for t in ts if t0 <= t <= t1]
    gaps = [b - a for a, b in zip(win, win[1:], strict=False)]
    return round(max(gaps) * 1000, 1) if gaps else None


def one_run(rundir: str) -> list[dict]:
    """Two buffered moves of the IPS under one stream; a row per move."""
    with tempfile.TemporaryDirectory(prefix="uno-hold-") as tmp, Testbed(rundir=rundir, drain_s=0.5) as tb:
        tb.add_nf("ips", "ips", IPS_CONFIG, at="snic0")  # on the sNIC, chained VM <-> IPS <-> wire
        ip = nm.ip_outside(0, 0)
        pcap = Path(tmp) / "rx.pcap"
        ns = ["ip", "netns", "exec"]
        dump = subprocess.Popen(
            [*ns, tb.out_ns, "tcpdump", "-i", tb.out_if, "-n", "-s", "96", "-B", "16384", "-w", str(pcap),
             f"tcp and dst host {ip} and dst port {PORT} and greater 200"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        tb.procs.append(dump)
        tb.procs.append(subprocess.Popen([*ns, tb.out_ns, "iperf3", "-s", "-1", "-B", ip, "-p", str(PORT)],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
        time.sleep(1.0)
        cli = subprocess.Popen([*ns, tb.vm_ns, "iperf3", "-c", ip, "-p", str(PORT), "-t", "8"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        tb.procs.append(cli)
        nf = tb.agent.state.nfs["ips"]
        moves = []
        for to, after_s in (("host", 1.5), ("snic0", 3.0)):
            time.sleep(after_s)
            t0 = time.time()
            tb.agent.migrate(nf, to)
            res = tb.agent.last_migration
            moves.append((to, t0, time.time(), res))
        cli.wait(timeout=60)
        time.sleep(0.5)
        dump.terminate()
        dump.wait(timeout=10)
        text = subprocess.run(
            ["tcpdump", "-r", str(pcap), "-n", "-tt"], capture_output=True, text=True
        ).stdout
    ts = [float(line.split()[0]) for line in text.splitlines() if line[:1].isdigit()]
    rows = []
    for to, t0, t1, res in moves:
        rows.append({
            "to": to, "gap_ms": longest_gap_ms(ts, t0 - 0.05, t1 + 1.0), "remap_ms": round(res.step_ms("remap"), 1),
            "drain_ms": round(res.step_ms("drain"), 1), "resume_ms": round(res.step_ms("resume") or 0, 1),
            "replayed": res.replayed, "drain": next(s.detail for s in res.steps if s.step == "drain"),
        })  # fmt: skip
    return rows


def run_part(repeats: int, rundir: str) -> dict:
    rows = []
    for _ in range(repeats):
        for r in one_run(rundir):
            print("hold " + " ".join(f"{k}={v}" for k, v in r.items()), flush=True)
            rows.append(r)
    gaps = [r["gap_ms"] for r in rows if r["gap_ms"] is not None]
    return {
        "ips_hold_gap_ms": median(gaps) if gaps else None,
        "ips_hold_gap_ms_max": max(gaps) if gaps else None,
        "ips_drain_ms": median([r["drain_ms"] for r in rows]),
        "ips_moves": len(rows),
    }
