"""(a) and (a2) of `uno bench oneswitch`: install rate through OneSwitch vs straight to a plain OVS, side by side.

A *side* is one way a controller reaches a switch: OneSwitch's listener (TCP; OneSwitch reaches its switches over
their unix sockets), or the plain OVS bridge straight (its unix listener; or TCP inside the bridge's network
namespace; or through a socat TCP relay, the thinnest forwarder hop there is). Every side is warmed up first (a
JVM serving a controller for hours is warm; without it the first repeats measure the JIT), then the repeats rotate
the order of the sides. Besides the rules/s, each run takes the CPU time per rule of every process on the path
(/proc; load-independent where wall clock is not): the client, OneSwitch (process and its core thread), the
vswitchds, the relays.
"""

from __future__ import annotations

import os
import random
import resource
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import median, thread_cpu_seconds, tree_cpu_seconds
from host_datapath.sysutil import DatapathError
from testkit.oneswitch import ofraw
from testkit.oneswitch.pktio import in_netns

VPORTS = [1, 9, 100, 101, 200, 201, 202]
# Runs in a row with the JIT compiler nearly idle that make a side warm (Side.warm). One was not enough: C2 works in
# waves; after a single calm run it still took 5-7 us per pipelined flow-mod over the measured phase (the core
# thread ~8.5), after 150 warm-up runs 0.1 (the core thread 7.1; bench/RESULTS.md oneswitch, os-cpu).
CALM = 3


@dataclass
class Side:
    """One way to a switch: `target` for ovs-ofctl (`tcp:H:P` / `unix:PATH`), entered from network namespace
    `netns` (None: ours); `procs`: name -> pids of processes on the path whose CPU is taken (with their
    descendants; besides the client's); `threads`: name -> (pid, thread name)."""

    key: str
    target: str
    netns: str | None = None
    procs: dict[str, list[int]] = field(default_factory=dict)
    threads: dict[str, tuple[int, str]] = field(default_factory=dict)
    jit: tuple[int, str] | None = None  # the JVM's compiler thread on the path, if any: warm when it is idle

    def cpu(self) -> dict[str, float]:
        out = {name: tree_cpu_seconds(pids) for name, pids in self.procs.items()}
        out.update({name: thread_cpu_seconds(pid, t) for name, (pid, t) in self.threads.items()})
        if self.jit:
            out["jit"] = thread_cpu_seconds(*self.jit)
        return out

    def warm(self, install: Callable[[Side], tuple[float, float]], least: int, most: int) -> int:
        """Unmeasured installs: at least `least`, then until the JIT compiler thread (if any) used under 2 % of
        a run's time in CALM runs in a row (it compiles in the background, in waves, competing for the CPU), at
        most `most`. Returns how many."""
        calm = 0
        for done in range(1, most + 1):
            ofctl("del-flows", self.target, netns=self.netns)
            jit0 = thread_cpu_seconds(*self.jit) if self.jit else 0.0
            secs, _ = install(self)
            # As a measured run does: OneSwitch's flow stats are compiled too, else during the next run.
            count_flows(self.target, self.netns)
            jit = thread_cpu_seconds(*self.jit) - jit0 if self.jit else 0.0
            calm = calm + 1 if jit < 0.02 * secs else 0
            if done >= least and calm >= CALM:
                return done
        return most

    def connect(self, timeout: float = 60) -> ofraw.Conn:
        """A raw OpenFlow connection to the side, as a controller."""
        kind, _, rest = self.target.partition(":")
        if kind == "unix":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(timeout)
            s.connect(rest)
        else:
            host, port = rest.rsplit(":", 1)
            if self.netns:
                with in_netns(self.netns):  # the socket stays in the namespace it was made in
                    s = socket.create_connection((host, int(port)), timeout=timeout)
            else:
                s = socket.create_connection((host, int(port)), timeout=timeout)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return ofraw.Conn(sock=s)


def ofctl(*args: str, stdin: str | None = None, check: bool = True, netns: str | None = None):
    cmd = ["ovs-ofctl", "-O", "OpenFlow13", "--no-names", *args]
    if netns:
        with in_netns(netns):
            r = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=600)
    else:
        r = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=600)
    if check and r.returncode != 0:
        raise DatapathError(f"ovs-ofctl {' '.join(args[:2])}: {r.stderr.strip()[:500]}")
    return r


def count_flows(target: str, netns: str | None = None) -> int:
    return sum(
        1 for line in ofctl("dump-flows", target, netns=netns).stdout.splitlines() if "actions=" in line
    )


def rate_rules(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        f"table=0,priority={1000 + i},in_port={rng.choice(VPORTS)},ip,nw_dst=10.{(i >> 8) & 255}.{i & 255}.1,"
        f"actions=output:{rng.choice(VPORTS)}"
        for i in range(n)
    ]


def rate_flow_mods(n: int, seed: int) -> list[bytes]:
    """The rules of rate_rules(n, seed) as OF1.3 FLOW_MOD ADDs (xids 1..n), for the pipelined run."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        in_port, out_port = rng.choice(VPORTS), rng.choice(VPORTS)
        fixed = struct.pack(
            "!QQBBHHHIIIH2x", 0, 0, 0, 0, 0, 0, 1000 + i, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0
        )
        oxms = struct.pack("!II", 0x80000004, in_port) + struct.pack("!IH", 0x80000A02, 0x0800)
        oxms += struct.pack("!I4B", 0x80001804, 10, (i >> 8) & 255, i & 255, 1)
        match = struct.pack("!HH", 1, 4 + len(oxms)) + oxms
        match += b"\0" * (-len(match) % 8)
        action = struct.pack("!HHIH6x", 0, 16, out_port, 0xFFFF)
        instr = struct.pack("!HH4x", 4, 8 + len(action)) + action
        body = fixed + match + instr
        out.append(ofraw.header(ofraw.FLOW_MOD, 8 + len(body), i + 1) + body)
    return out


def add_flows(side: Side, path: Path) -> tuple[float, float]:
    """`ovs-ofctl add-flows` of the file (it sends FLOW_MOD, BARRIER and waits, per rule): (seconds, client CPU
    seconds)."""
    cmd = ["ovs-ofctl", "-O", "OpenFlow13", "--no-names", "add-flows", side.target, str(path)]
    t0 = time.perf_counter()
    if side.netns:
        with in_netns(side.netns):  # the child starts in the namespace of the thread that forks it
            proc = subprocess.Popen(cmd, stderr=subprocess.PIPE)
    else:
        proc = subprocess.Popen(cmd, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    secs = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise DatapathError(f"ovs-ofctl add-flows {side.target}: {err.strip()[:500]}")
    return secs, usage.ru_utime + usage.ru_stime


def pipelined(side: Side, msgs: list[bytes], barrier_each: bool = False) -> tuple[float, float]:
    """Every flow-mod back to back (`barrier_each`: each followed by a barrier, not waited for: the messages of
    `ovs-ofctl add-flows` at pipelined speed), then ONE barrier: (seconds until its reply, client CPU seconds);
    no error allowed."""
    barrier = ofraw.msg(ofraw.BARRIER_REQUEST, xid=0xFFFFFE)
    c = side.connect()
    try:
        c.hello()
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        data = b"".join(m + barrier for m in msgs) if barrier_each else b"".join(msgs)
        data += ofraw.msg(ofraw.BARRIER_REQUEST, xid=0xFFFFFF)
        # Sent from a thread while this one reads: a switch stops reading a controller that does not take
        # its replies (OVS: the barrier replies), which would block the send forever.
        sender = threading.Thread(target=c.send, args=(data,), daemon=True)
        sender.start()
        got = c.until(0xFFFFFF, ofraw.BARRIER_REPLY, timeout=300)
        secs = time.perf_counter() - t0
        sender.join(timeout=10)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        c.close()
    assert got and got[-1].type == ofraw.BARRIER_REPLY, "no barrier reply"
    errors = [r for r in got if r.type == ofraw.ERROR]
    assert not errors, f"{len(errors)} errors, first {errors[0]}"
    return secs, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)


def latencies(side: Side, msgs: list[bytes]) -> list[float]:
    """Each flow-mod followed by a barrier, the next sent only after the barrier's reply (a controller that
    waits for each rule to be in): the round trip of each, in microseconds; no error allowed."""
    c = side.connect()
    out = []
    try:
        c.hello()
        for i, m in enumerate(msgs):
            xid = 0x800000 + i
            t0 = time.perf_counter()
            c.send(m + ofraw.msg(ofraw.BARRIER_REQUEST, xid=xid))
            got = c.until(xid, ofraw.BARRIER_REPLY, timeout=60)
            out.append((time.perf_counter() - t0) * 1e6)
            errors = [r for r in got if r.type == ofraw.ERROR]
            assert got and not errors, f"{side.key}: flow-mod {i}: {errors[:1] or 'no barrier reply'}"
    finally:
        c.close()
    return out


def percentile(xs: list[float], q: float) -> float:
    """The q-quantile (0..1) of xs, nearest rank."""
    ys = sorted(xs)
    return ys[min(len(ys) - 1, max(0, round(q * (len(ys) - 1))))]


def bench_latency(sides: list[Side], n: int, repeats: int) -> dict[str, dict]:
    """(a3): per flow-mod round trip (flow-mod + barrier, waited for) on each side, `repeats` rotating runs of n
    rules each; p50/p99 over all of them, in microseconds."""
    msgs = rate_flow_mods(n, 11)
    lat: dict[str, list[float]] = {s.key: [] for s in sides}
    for rep in range(repeats):
        k = rep % len(sides)
        for s in sides[k:] + sides[:k]:
            ofctl("del-flows", s.target, netns=s.netns)
            lat[s.key] += latencies(s, msgs)
    for s in sides:
        ofctl("del-flows", s.target, netns=s.netns)
    return {
        key: {"p50_us": round(percentile(xs, 0.5), 1), "p99_us": round(percentile(xs, 0.99), 1), "n": len(xs)}
        for key, xs in lat.items()
    }


def alternating(
    label: str,
    sides: list[Side],
    n: int,
    repeats: int,
    warmups: tuple[int, int],
    install: Callable[[Side], tuple[float, float]],
) -> dict[str, dict]:
    """Rules/s of `install(side)` (n rules) per side (median), and CPU microseconds per rule of every process on
    its path (over all repeats); unmeasured runs per side first (`warmups` = (least, most), see Side.warm), then
    `repeats` rotating which side goes first."""
    runs: dict[str, list[dict]] = {s.key: [] for s in sides}
    for s in sides:
        done = s.warm(install, *warmups)
        print(f"  {label} {s.key}: warmed up in {done} runs", file=sys.stderr, flush=True)
    for rep in range(repeats):
        k = rep % len(sides)
        for s in sides[k:] + sides[:k]:
            ofctl("del-flows", s.target, netns=s.netns)
            before = s.cpu()
            secs, client = install(s)
            after = s.cpu()
            assert count_flows(s.target, s.netns) == n, f"{s.key}: not all {n} rules installed"
            cpu = {name: (after[name] - before[name]) * 1e6 / n for name in after}
            cpu["client"] = client * 1e6 / n
            runs[s.key].append({"rps": n / secs, "cpu_us": cpu})
            print(
                f"  {label} {s.key}: {n} rules in {secs:.3f} s = {n / secs:.0f} rules/s; CPU us/rule "
                + ", ".join(f"{k} {v:.0f}" for k, v in cpu.items()),
                file=sys.stderr,
                flush=True,
            )
    for s in sides:
        ofctl("del-flows", s.target, netns=s.netns)
    return {
        key: {
            "rps": median([r["rps"] for r in rs]),
            # Over all repeats (the mean): /proc counts 10 ms ticks, too coarse for one run of pipelined rules.
            "cpu_us": {
                name: round(sum(r["cpu_us"][name] for r in rs) / len(rs), 1) for name in rs[0]["cpu_us"]
            },
        }
        for key, rs in runs.items()
    }


def warm_up(sides: list[Side], n: int, warmups: tuple[int, int]) -> dict[str, int]:
    """Before any measured run: every side installs the n rules of (a) as pipelined flow-mod + barrier pairs (the
    messages `ovs-ofctl add-flows` sends, fast) until warm (Side.warm, `warmups` = (least, most)); runs each."""
    msgs = rate_flow_mods(n, 7)
    return {s.key: s.warm(lambda side: pipelined(side, msgs, barrier_each=True), *warmups) for s in sides}


def bench_rate(
    sides: list[Side], n: int, repeats: int, warmups: tuple[int, int], workdir: Path
) -> dict[str, dict]:
    """(a): `ovs-ofctl add-flows` of n rules `in_port=V,ip,nw_dst=X -> output:W` per side."""
    path = workdir / "rate.flows"
    path.write_text("\n".join(rate_rules(n, 7)) + "\n")
    return alternating("(a)", sides, n, repeats, warmups, lambda s: add_flows(s, path))


def bench_rate_pipelined(
    sides: list[Side], n: int, repeats: int, warmups: tuple[int, int]
) -> dict[str, dict]:
    """(a2): the same n rules as back-to-back FLOW_MODs and one barrier, per side."""
    msgs = rate_flow_mods(n, 7)
    return alternating("(a2)", sides, n, repeats, warmups, lambda s: pipelined(s, msgs))
