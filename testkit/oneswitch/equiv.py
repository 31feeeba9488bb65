"""Semantic equivalence of two OpenFlow switches by real packets: the same rules, the same injected frames,
the same multiset of (virtual port, exact bytes) leaving, per injected frame.

A `Target` is one switch seen from outside: an ovs-ofctl target (OneSwitch's listener, or a reference bridge's
management socket) and, per virtual port, the namespace endpoint(s) where its frames enter and leave.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from testkit.oneswitch import rulegen
from testkit.oneswitch.pktio import Endpoint, collect


@dataclass
class Target:
    name: str
    ofctl_target: str
    endpoints: dict[int, list[Endpoint]]  # vport -> endpoints whose frames count as that vport's
    inject: dict[int, Endpoint] = field(default_factory=dict)  # vport -> where to send (default: the first)

    def open(self) -> Target:
        for eps in self.endpoints.values():
            for ep in eps:
                ep.open()
        for ep in self.inject.values():
            ep.open()
        return self

    def close(self) -> None:
        for eps in self.endpoints.values():
            for ep in eps:
                ep.close()
        for ep in self.inject.values():
            ep.close()

    def sender(self, vport: int) -> Endpoint:
        return self.inject.get(vport) or self.endpoints[vport][0]

    def ofctl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
        """`ovs-ofctl -O OpenFlow13 CMD TARGET ARGS...` (never raises: callers look at returncode/stderr).

        Numbers only (`--no-names`): names play no part in what is compared here; ovs-ofctl's name lookups
        (TABLE_FEATURES, PORT_DESC) are tested on their own in test_ofctl.
        """
        cmd = [
            "ovs-ofctl",
            "-O",
            "OpenFlow13",
            "--no-names",
            "--timeout=20",
            args[0],
            self.ofctl_target,
            *args[1:],
        ]
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=60)


@dataclass
class Loaded:
    accepted: list[str]
    refused: list[tuple[str, str]]  # (spec, ovs-ofctl's error output: the OFPT_ERROR)


def clear(t: Target) -> None:
    for cmd in (("del-flows",), ("del-groups",)):
        r = t.ofctl(*cmd)
        assert r.returncode == 0, f"{t.name}: {' '.join(cmd)}: {r.stderr}"


def load(rules: rulegen.RuleSet, sut: Target, ref: Target) -> Loaded:
    """Install each group/flow on `sut`; what it refuses (OFPT_ERROR) is skipped on `ref` too."""
    clear(sut)
    clear(ref)
    out = Loaded([], [])
    for cmd, specs in (("add-group", rules.groups), ("add-flow", rules.flows)):
        for spec in specs:
            r = sut.ofctl(cmd, spec)
            if r.returncode != 0:
                out.refused.append((spec, (r.stderr or r.stdout).strip()))
                continue
            rr = ref.ofctl(cmd, spec)
            assert rr.returncode == 0, f"{ref.name} refused what {sut.name} accepted: {spec}: {rr.stderr}"
            out.accepted.append(spec)
    return out


def run_packets(
    t: Target, pkts: list[tuple[int, int, bytes]], gap: float = 0.0005, drain_every: int = 64
) -> dict[int, Counter]:
    """Send each (id, vport, frame) at its vport; per id, the Counter of (vport, frame) that left."""
    return run_packets_on([t], pkts, gap, drain_every)[0]


def run_packets_on(
    targets: list[Target],
    pkts: list[tuple[int, int, bytes]],
    gap: float = 0.0005,
    drain_every: int = 64,
    settle: float | None = None,
    late: list[tuple[int, object, bytes]] | None = None,
) -> list[dict[int, Counter]]:
    """`run_packets` on several targets at once: each frame goes to every target in turn. What arrived is read
    every `drain_every` frames too, so that long runs never overflow a socket's receive buffer. Reading stops
    when nothing arrived for 0.6 s, or with `settle`, as soon as nothing arrived for `settle` s and every target
    has the same outputs for every frame (a late output then arrives after: pass `late` on the next call). What
    arrived before sending is dropped, or, given `late`, appended to it as (target index, vport, frame)."""
    for i, t in enumerate(targets):
        for key, eps in t.endpoints.items():
            for ep in eps:
                before = ep.drain()  # forget anything from before (or hand it back as late)
                if late is not None:
                    late += [(i, key, f) for f in before]
        for ep in t.inject.values():
            ep.drain()
    got: list[dict[int, Counter]] = [{pid: Counter() for pid, _, _ in pkts} for _ in targets]
    every = {(i, key): eps for i, t in enumerate(targets) for key, eps in t.endpoints.items()}

    def take(where: tuple[int, object], frame: bytes) -> None:
        pid = rulegen.marker_id(frame)
        if pid in got[where[0]]:
            got[where[0]][pid][(where[1], frame)] += 1

    for n, (_, v, frame) in enumerate(pkts):
        for t in targets:
            t.sender(v).send(frame)
        if gap:
            time.sleep(gap)
        if n % drain_every == drain_every - 1:
            for where, eps in every.items():
                for ep in eps:
                    for f in ep.drain():
                        take(where, f)
    if settle is not None:
        for where, frame in collect(every, quiet=settle):  # type: ignore[arg-type]
            take(where, frame)  # type: ignore[arg-type]
        if all(g == got[0] for g in got[1:]):
            return got
    for where, frame in collect(every):  # type: ignore[arg-type]
        take(where, frame)  # type: ignore[arg-type]
    return got


def run_across_remaps(
    client, t: Target, pkts: list[tuple[int, int, bytes]], vport: int, back: tuple[str, int],
    spare: tuple[str, int], first_delay: float,
) -> tuple[dict[int, Counter], int, int, list]:  # fmt: skip
    """`run_packets` while another thread remaps `vport` to the `spare` (switch, port) after `first_delay` s
    and `back` 0.4 s later; `t.endpoints[f"{vport}@snic0"]` must be the spare's port. Returns the outputs
    with the spare's folded onto `vport`, how many left at the old place and at the spare, and the two remap
    answers (asserted both came)."""
    at = f"{vport}@snic0"
    results: list = []

    def remaps() -> None:
        time.sleep(first_delay)
        results.append(client.remap(vport, *spare))
        time.sleep(0.4)
        results.append(client.remap(vport, *back))

    th = threading.Thread(target=remaps)
    th.start()
    try:
        got = run_packets(t, pkts, gap=0.002)
    finally:
        th.join()
    assert len(results) == 2, "a remap failed"
    at_spare = sum(k for c in got.values() for (v, _), k in c.items() if v == at)
    at_old = sum(k for c in got.values() for (v, _), k in c.items() if v == vport)
    folded = {
        pid: Counter({(vport if v == at else v, f): k for (v, f), k in c.items()}) for pid, c in got.items()
    }
    return folded, at_old, at_spare, results


def differences(
    pkts: list[tuple[int, int, bytes]], a: dict[int, Counter], b: dict[int, Counter], names=("sut", "ref")
) -> list[str]:
    """Human-readable differences, one per injected frame whose outputs differ."""
    out = []
    for pid, v, frame in pkts:
        if a[pid] != b[pid]:
            only_a = a[pid] - b[pid]
            only_b = b[pid] - a[pid]
            out.append(
                f"packet {pid} in at {v}: {summary(frame)}\n"
                f"    only {names[0]}: {fmt(only_a)}\n    only {names[1]}: {fmt(only_b)}"
            )
    return out


def summary(frame: bytes) -> str:
    from scapy.layers.l2 import Ether

    return Ether(frame).summary() + " " + frame.hex()


def fmt(c: Counter) -> str:
    return "; ".join(f"{n}x out {v}: {summary(f)}" for (v, f), n in sorted(c.items(), key=str)) or "-"
