"""Every accepted rule of a large random rule set checked for equivalence with a reference OVS, by real packets.

The topology of `./uno bench oneswitch` part (b) (the paper's experiment): one host switch and two sNIC switches
behind OneSwitch, 7 virtual ports: 1 and 9 (the sNICs' Ethernet ports), 100 and 101 (VMs), 200-202 (NF ports on
the host, snic0 and snic1); a spare namespace on snic0 stays unmapped (anything reaching it is a difference).

`check()`:
1. Installs the rules on OneSwitch (each with cookie = its index + 1), pipelined (ofencode), and what OneSwitch
   accepts on the reference; what it refuses is listed with its OFPT_ERROR and OneSwitch's reason (its log).
2. In rounds: for each accepted rule not exercised yet (all, or a sample), a frame that should take it
   (framegen: a goto chain to it and a frame every rule of the chain matches, chosen with a local model of the
   pipeline), injected at its in_port, or at every virtual port when the chain has none; round 1 adds random
   frames (rulegen.packets). The reference's `ofproto/trace` (ovstrace) of each injection tells which rules it
   takes: a rule is *exercised* when some injected frame takes it there.
3. Sends every frame at its port of both switches (real packets) and compares, per frame, the multiset of
   (virtual port, exact bytes) that left. Reading stops once nothing arrived for SETTLE s and both agree on
   every frame (else after 0.6 s of quiet); an output arriving later is seen by the next send (or the final
   one, 0.6 s after the last round) and its frame is sent again like a differing one (`late`). A frame whose
   outputs differ is sent again on both, and again after every datapath cache is emptied: a difference that
   does not repeat is `flaky` (a lost frame) or `stale` (a cached flow behind its tables); one that repeats is
   a *difference*, reported with the rules the frame takes on the reference, the frame and both outputs. After round 1, the per-rule packet counters of the two
   switches are compared too (OneSwitch sums its physical replicas).
4. Between rounds, the rules that take the frames meant for rules not exercised yet (of higher priority:
   they shadow them on both switches alike) and have been exercised themselves are deleted from both switches
   (DELETE_STRICT through OneSwitch); the next round checks what they uncover. Such a rule that a pending
   rule's goto chain goes through is held back until that rule is exercised (deleting it would cut the rule
   off; only when nothing else moves is it deleted anyway); a pending rule left with no chain over the rules
   installed gets one over all the accepted rules, and its deleted rules are installed again on both
   (ADD through OneSwitch, `restored`).
5. A rule no frame can take on the reference is `unreachable` (counted apart, never as exercised): in a table
   no goto_table chain of the accepted rules leads to, or, for a rule left at the end, every such chain asks
   two different things of one field (framegen.dead_chain: a proof, VLANs left out). Every other accepted rule
   not exercised at the end is `unexercised`, with the reason (`unreached`).
"""

from __future__ import annotations

import contextlib
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from emulated_host import naming as nm
from host_datapath.switch import parse_dump_flows
from testkit.oneswitch import equiv, framegen, ofencode, rulegen
from testkit.oneswitch.flowspec import parse
from testkit.oneswitch.ovstrace import Tracer, Unixctl
from testkit.oneswitch.pktio import Endpoint

VPORTS = [1, 9, 100, 101, 200, 201, 202]
NF_PORTS = {200: "host", 201: "snic0", 202: "snic1"}  # vport -> switch (physical port NF_PORT_BASE)
SPARE = 201  # physical port of the spare namespace on snic0 (unmapped; the bench's remap target)
WIRE_QINQ = (
    "only a frame arriving with 2 VLAN headers takes it (a pop, then a VLAN match), not sent: wire QinQ at a"
    " rule not matching its VLANs is OneSwitch's documented known limit (oneswitch/README.md, depth)"
)
SETTLE = 0.2  # s of silence after which reading outputs stops if both switches agree on every frame
HOST_CONFIG = {"vms": 2, "snics": [{"pcie_gbps": 0}, {"pcie_gbps": 0}]}


def attach_nfs(host) -> None:
    """NF namespaces n0 (host), n1 (snic0), n2 (snic1) at physical port NF_PORT_BASE, the spare n3 (snic0)."""
    n = host.name
    sw = host.switches()
    try:
        for i, (s, port) in enumerate([("host", nm.NF_PORT_BASE), ("snic0", nm.NF_PORT_BASE),
                                       ("snic1", nm.NF_PORT_BASE), ("snic0", SPARE)]):  # fmt: skip
            sw[s].attach_namespace(f"{n}-nf{i}", f"{n}-n{i}", f"{n}-n{i}p", port)
    finally:
        for s in sw.values():
            s.close()


def vswitchd_ctls(host) -> list[Path]:
    """The unixctl sockets of the host's physical switches (host and sNICs)."""
    sw = host.switches()
    try:
        return [s.ovs.rundir / "ovs-vswitchd.ctl" for s in sw.values()]
    finally:
        for s in sw.values():
            s.close()


def map_nfs(client) -> None:
    for v, s in NF_PORTS.items():
        client.map_port(v, s, nm.NF_PORT_BASE)


@contextlib.contextmanager
def rig(host, listen: str, ref) -> Iterator[dict]:
    """The arguments `check` needs beside the rules, for `host` (OneSwitch listening on `listen`) and the
    reference switch `ref` (testkit/oneswitch/refswitch.RefSwitch): both targets opened, the reference's
    ofproto/trace tracer, both OpenFlow listeners' TCP ports, the physical switches' unixctl sockets. Closed on
    exit."""
    sut = equiv.Target("oneswitch", listen, endpoints(host.name)).open()
    reference = tracer = None
    try:
        reference = equiv.Target("reference", ref.target, ref.endpoints()).open()
        tracer = Tracer(ref.sw.ovs.rundir / "ovs-vswitchd.ctl", ref.sw.bridge)
        yield {
            "sut": sut,
            "ref": reference,
            "tracer": tracer,
            "ports": (_tcp_port(listen), _tcp_port(ref.sw.endpoint.target())),
            "caches": vswitchd_ctls(host),
        }
    finally:
        if tracer is not None:
            tracer.close()
        if reference is not None:
            reference.close()
        sut.close()


def _tcp_port(target: str) -> int:
    """The port of an OpenFlow target `tcp:127.0.0.1:PORT`."""
    return int(target.rsplit(":", 1)[1])


def endpoints(name: str) -> dict[object, list[Endpoint]]:
    """Where each virtual port's frames enter and leave the host `name`; "unmapped": the spare."""
    return {
        1: [Endpoint(nm.ns_outside(name, 0, 0), nm.if_eth(name, 0, 0)[1])],
        9: [Endpoint(nm.ns_outside(name, 1, 0), nm.if_eth(name, 1, 0)[1])],
        100: [Endpoint(nm.ns_vm(name, 0), nm.if_vm(name, 0)[0])],
        101: [Endpoint(nm.ns_vm(name, 1), nm.if_vm(name, 1)[0])],
        **{v: [Endpoint(f"{name}-nf{i}", f"{name}-n{i}")] for i, v in enumerate(NF_PORTS)},
        "unmapped": [Endpoint(f"{name}-nf3", f"{name}-n3")],
    }


@dataclass
class Difference:
    round: int  # the check's round (rules exercised in earlier rounds and in the way were deleted)
    pid: int
    vport: int
    frame: bytes
    rules: list[str]  # the rules the frame takes on the reference (its trace)
    only_sut: Counter
    only_ref: Counter

    def text(self) -> str:
        return (
            f"round {self.round}, frame {self.pid} in at {self.vport}: {equiv.summary(self.frame)}\n"
            + "".join(f"    takes {r}\n" for r in self.rules)
            + f"    only oneswitch: {equiv.fmt(self.only_sut)}\n    only reference: {equiv.fmt(self.only_ref)}"
        )

    def to_dict(self) -> dict:
        return {"round": self.round, "frame": self.pid, "in": self.vport, "bytes": self.frame.hex(), "rules": self.rules,
                "only_oneswitch": _outputs(self.only_sut), "only_reference": _outputs(self.only_ref)}  # fmt: skip


def _outputs(c: Counter) -> list[dict]:
    return [{"vport": str(v), "frame": f.hex(), "n": n} for (v, f), n in sorted(c.items(), key=str)]


@dataclass
class Result:
    seed: int
    generated: int
    accepted: list[str]  # specs (with their cookie)
    refused: list[dict]  # {"spec", "error", "reason"}
    checked: list[str] = field(default_factory=list)  # the rules frames were derived for (all, or a sample)
    exercised: dict[str, int] = field(default_factory=dict)  # spec -> round in which a frame took it
    frames: int = 0  # frames sent (derived + random), to each switch
    rounds: int = 0
    flaky: int = 0  # frames whose outputs differed once, not when sent again
    stale: int = 0  # frames whose outputs differed twice, not after every datapath cache was emptied
    late: int = 0  # frames with an output after both switches had agreed (SETTLE): sent again, compared
    differences: list[Difference] = field(default_factory=list)
    counter_mismatches: list[dict] = field(default_factory=list)
    unreached: dict[str, str] = field(default_factory=dict)  # checked rule not exercised -> why
    # no frame can take it (no goto chain to its table, or framegen.Paths.dead) -> why
    unreachable: dict[str, str] = field(default_factory=dict)
    restored: int = 0  # deleted rules installed again (both switches) for a chain to a pending rule
    restore_refused: int = 0  # of those, refused by OneSwitch (not installed on either)
    seconds: dict[str, float] = field(default_factory=dict)

    def summary(self) -> dict:
        reasons = Counter(re.sub(r"\d+", "N", r["reason"]) for r in self.refused)
        return {
            "seed": self.seed, "generated": self.generated, "accepted": len(self.accepted),
            "refused": len(self.refused), "refused_by_reason": dict(reasons.most_common()),
            "checked": len(self.checked), "exercised": sum(1 for s in self.checked if s in self.exercised),
            "unreachable": len(self.unreachable), "unexercised": len(self.unreached),
            "exercised_first_round": sum(1 for r in self.exercised.values() if r == 1),
            "rounds": self.rounds, "restored": self.restored, "restore_refused": self.restore_refused,
            "frames": self.frames, "differences": len(self.differences),
            "flaky": self.flaky, "stale": self.stale, "late": self.late, "counter_mismatches": len(self.counter_mismatches),
            "unreached": dict(Counter(self.unreached.values()).most_common()), "seconds": self.seconds,
        }  # fmt: skip

    def report(self) -> dict:
        """Per rule: accepted (the round a frame took it in, differences of frames that took it, or why none
        did) or refused (its error and OneSwitch's reason)."""
        diffs: dict[str, list[int]] = {}
        for d in self.differences:
            for r in d.rules:
                diffs.setdefault(r, []).append(d.pid)
        rules = [{"spec": s, "exercised_in_round": self.exercised.get(s), "differences": diffs.get(s, []),
                  **({"not_exercised": self.unreached[s]} if s in self.unreached else {}),
                  **({"unreachable": self.unreachable[s]} if s in self.unreachable else {})}
                 for s in self.accepted]  # fmt: skip
        return {
            "summary": self.summary(),
            "rules": rules + [{**r, "refused": True} for r in self.refused],
            "differences": [d.to_dict() for d in self.differences],
            "counter_mismatches": self.counter_mismatches,
        }


def _refusal_reasons(log: Path | None, offset: int) -> dict[int, str]:
    """OneSwitch's reason per refused xid, from the log lines written since `offset`."""
    if log is None or not log.exists():
        return {}
    with open(log, "rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"flow-mod refused \(xid (\d+)\): (.*)", text)}


def _count_flows(t: equiv.Target) -> int:
    return len(parse_dump_flows(t.ofctl("dump-flows").stdout))


def install(
    rules: rulegen.RuleSet, sut: equiv.Target, ref: equiv.Target, ports: tuple[int, int], log: Path | None
) -> tuple[dict[str, bytes], list[dict]]:
    """Groups and flows (cookie = index + 1) to OneSwitch, what it accepts to the reference; `ports`: their
    OpenFlow listeners (TCP on 127.0.0.1). Returns ({accepted spec: its FLOW_MOD}, refused [{spec, error,
    reason}])."""
    equiv.clear(sut)
    equiv.clear(ref)
    flows = [f"cookie={i + 1:#x},{s}" for i, s in enumerate(rules.flows)]
    specs = list(rules.groups) + flows
    msgs = ofencode.encode("add-groups", list(rules.groups)) + ofencode.encode("add-flows", flows)
    offset = log.stat().st_size if log is not None and log.exists() else 0
    errors = ofencode.install(ports[0], msgs)
    reasons = _refusal_reasons(log, offset)
    assert not any(i < len(rules.groups) for i in errors), f"a group was refused: {errors}"
    accepted = {specs[i]: m for i, m in enumerate(msgs) if i >= len(rules.groups) and i not in errors}
    refused = [{"spec": specs[i], "error": f"{t}/{c}", "reason": reasons.get(i + 1, "?")}
               for i, (t, c) in sorted(errors.items())]  # fmt: skip
    ref_errors = ofencode.install(ports[1], msgs[: len(rules.groups)] + list(accepted.values()))
    assert not ref_errors, f"the reference refused what OneSwitch accepted: {ref_errors}"
    for t in (sut, ref):
        assert _count_flows(t) == len(accepted), f"{t.name}: not the {len(accepted)} accepted flows installed"
    return accepted, refused


def _counters(t: equiv.Target) -> dict[int, int]:
    return {f.cookie: f.packets for f in parse_dump_flows(t.ofctl("dump-flows").stdout)}


def _cookie(spec: str) -> int:
    return int(spec.split(",", 1)[0].split("=", 1)[1], 0)


def _remark(frame: bytes, pid: int) -> bytes:
    """`frame` with its marker id replaced by `pid`."""
    i = frame.find(rulegen.MARK) + len(rulegen.MARK)
    return frame[:i] + rulegen.marker(pid)[len(rulegen.MARK) :] + frame[i + 4 :]


class _Run:
    """The state of one check between rounds."""

    def __init__(
        self,
        res: Result,
        sut: equiv.Target,
        ref: equiv.Target,
        tracer: Tracer,
        caches: list[Unixctl],
        gap: float,
    ):
        self.res, self.sut, self.ref, self.tracer, self.caches, self.gap = res, sut, ref, tracer, caches, gap
        self.by_cookie = {_cookie(s): s for s in res.accepted}
        self.spent: Counter = Counter()  # seconds per step of the rounds
        self.settled: dict[int, tuple[tuple[int, int, bytes], list[int]]] = {}  # pid -> (frame, its rules)
        # outputs that arrived after their frame's reading stopped: (target index, vport, frame)
        self.late: list[tuple[int, object, bytes]] = []

    def flush(self, rnd: int) -> None:
        """The outputs still to come after the last round (up to 0.6 s late, as without SETTLE) checked."""
        time.sleep(0.6)
        self.send([], rnd)

    @contextlib.contextmanager
    def timed(self, step: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            self.spent[step] += time.perf_counter() - t

    def send(self, pkts: list[tuple[int, int, bytes]], rnd: int) -> set[str]:
        """Traces and sends `pkts` (ids from res.frames on) to both; records differences; returns the rules
        the frames take on the reference. Reading stops early when both agree (SETTLE): a frame of an earlier
        call with an output arriving after that is sent again here like a differing one."""
        with self.timed("trace"):
            taken = {pid: self.tracer.cookies(v, frame) for pid, v, frame in pkts}
        with self.timed("packets"):
            got_sut, got_ref = equiv.run_packets_on(
                [self.sut, self.ref], pkts, gap=self.gap, settle=SETTLE, late=self.late
            )
        self.res.frames += len(pkts)
        differing = [p for p in pkts if got_sut[p[0]] != got_ref[p[0]]]
        again_late = sorted({pid for _, _, f in self.late if (pid := rulegen.marker_id(f)) in self.settled})
        self.late.clear()
        self.res.late += len(again_late)
        self.settled.update({p[0]: (p, taken[p[0]]) for p in pkts})
        first = {p[0] for p in differing}
        for pid in again_late:
            pkt, taken[pid] = self.settled[pid]
            if pid not in first:
                differing.append(pkt)
        if differing:  # again, both: a lost frame does not repeat, a translation bug does
            again_sut, again_ref = equiv.run_packets_on(
                [self.sut, self.ref], differing, gap=0.002, late=self.late
            )
            still = [p for p in differing if again_sut[p[0]] != again_ref[p[0]]]
            self.res.flaky += len(first) - sum(1 for p in still if p[0] in first)
            if still:  # and with every datapath cache emptied: a stale cache entry does not repeat either
                self.purge()
                again_sut, again_ref = equiv.run_packets_on(
                    [self.sut, self.ref], still, gap=0.002, late=self.late
                )
                self.res.stale += sum(1 for p in still if again_sut[p[0]] == again_ref[p[0]])
            for pid, v, frame in still:
                if again_sut[pid] == again_ref[pid]:
                    continue
                self.settled.pop(pid, None)  # reported: a late output of it needs no second report
                rules = [self.by_cookie.get(c, f"cookie {c:#x}") for c in taken[pid]]
                self.res.differences.append(
                    Difference(
                        rnd,
                        pid,
                        v,
                        frame,
                        rules,
                        again_sut[pid] - again_ref[pid],
                        again_ref[pid] - again_sut[pid],
                    )
                )
        return {self.by_cookie[c] for cs in taken.values() for c in cs if c in self.by_cookie}

    def delete(self, specs: set[str], msgs: dict[str, bytes], ports: tuple[int, int]) -> None:
        """DELETE_STRICT of `specs` on both switches (their FLOW_MODs with the command changed)."""
        dels = [_delete_strict(msgs[s]) for s in sorted(specs)]
        for port, t in zip(ports, (self.sut, self.ref), strict=True):
            errors = ofencode.install(port, dels)
            assert not errors, f"{t.name}: delete refused: {errors}"

    def add(self, specs: set[str], msgs: dict[str, bytes], ports: tuple[int, int]) -> set[str]:
        """`specs` (deleted earlier) installed again on both switches, their FLOW_MODs as first sent; the reference
        gets what OneSwitch accepts (a refusal can depend on the rules installed). Returns those installed."""
        order = sorted(specs)
        errors = ofencode.install(ports[0], [msgs[s] for s in order])
        back = [s for i, s in enumerate(order) if i not in errors]
        ref_errors = ofencode.install(ports[1], [msgs[s] for s in back])
        assert not ref_errors, f"the reference refused what OneSwitch accepted: {ref_errors}"
        self.res.restore_refused += len(errors)
        return set(back)

    def purge(self) -> None:
        """Empties the datapath flow caches of every vswitchd (the reference's and OneSwitch's switches'): a
        cached flow of a rule just deleted must not answer for the tables (seen once under load, > 1 s)."""
        for u in [self.tracer, *self.caches]:
            u.purge()

    def rounds(
        self,
        msgs: dict[str, bytes],
        ports: tuple[int, int],
        chooser: framegen.Chooser,
        extra: list[tuple[int, int, bytes]],
        max_rounds: int | None,
    ) -> set[str]:
        """The rounds of check() (see there): frames for the rules that can be reached now, then the blockers
        deleted; `extra` frames (random) go with round 1. Returns the rules still installed."""
        res = self.res
        pending, installed = set(res.checked) - set(res.unreachable), set(res.accepted)
        tries: Counter = Counter()
        before = (_counters(self.sut), _counters(self.ref))
        renewed = False
        while pending and (max_rounds is None or res.rounds < max_rounds):
            res.rounds += 1
            pkts: list[tuple[int, int, bytes]] = []
            with self.timed("plan"):
                reach = chooser.plan(pending, set()).reach
            for spec, cand in reach.items():
                tries[spec] += 1
                for p in chooser.ports(cand):
                    pkts.append((res.frames + len(pkts), p, cand.frame(res.frames + len(pkts))))
            if res.rounds == 1:
                for _, v, frame in extra:
                    pkts.append((res.frames + len(pkts), v, _remark(frame, res.frames + len(pkts))))
            for spec in self.send(pkts, res.rounds) if pkts else ():
                res.exercised.setdefault(spec, res.rounds)
            pending -= set(res.exercised)
            for spec in [s for s in pending if tries[s] >= 2]:  # the local model is wrong about it: give up
                pending.discard(spec)
                res.unreached[spec] = "the reference's trace did not take it where the local model did"
            if res.rounds == 1:
                self.compare_counters(before)
            with self.timed("plan"):
                plan = chooser.plan(pending, set(res.exercised) & installed)
            blockers = plan.blockers
            if not pkts and not blockers and not plan.restore:
                blockers = plan.held  # nothing else moves: cut chains (a later restore may bring them back)
            if not pkts and not blockers and not plan.restore:
                if renewed:
                    break
                chooser.renew(pending)  # other chains and fills, once
                renewed = True
                continue
            renewed = False
            if blockers:
                with self.timed("delete"):
                    self.delete(blockers, msgs, ports)
                installed -= blockers
                chooser.remove(blockers)
            if plan.restore:
                with self.timed("restore"):
                    back = self.add(plan.restore, msgs, ports)
                res.restored += len(back)
                installed |= back
                chooser.add(back)
                chooser.refused(plan.restore - back)
            if blockers or plan.restore:
                with self.timed("purge"):
                    self.purge()  # no datapath flow of a rule deleted may answer for the tables
        self.flush(res.rounds)
        capped = max_rounds is not None and res.rounds >= max_rounds
        for spec in sorted(pending):
            if capped:
                res.unreached[spec] = f"not reached within {max_rounds} rounds"
            elif not chooser.qinq and chooser.only_qinq(spec):
                res.unreached[spec] = WIRE_QINQ
            elif chooser.all_paths.dead(chooser.flows[spec]):
                res.unreachable[spec] = (
                    "every goto chain to it asks two things of one field (framegen.dead_chain)"
                )
            else:
                res.unreached[spec] = (
                    "no frame found that takes it (shadowed, or its chains need what the model lacks)"
                )
        return installed

    def compare_counters(self, before: tuple[dict[int, int], dict[int, int]]) -> None:
        """Per-rule packet counters of both switches since `before` must be equal."""
        time.sleep(2.5)  # OVS brings flow counters up to date about once a second
        after = (_counters(self.sut), _counters(self.ref))
        for c in sorted(set(after[0]) | set(after[1])):
            d_sut, d_ref = (a.get(c, 0) - b.get(c, 0) for a, b in zip(after, before, strict=True))
            if d_sut != d_ref:
                self.res.counter_mismatches.append({"cookie": c, "oneswitch": d_sut, "reference": d_ref})


def _delete_strict(flow_mod: bytes) -> bytes:
    """The OF1.3 FLOW_MOD `flow_mod` as a DELETE_STRICT (any out_port, any out_group)."""
    return flow_mod[:25] + bytes([4]) + flow_mod[26:36] + b"\xff" * 8 + flow_mod[44:]


def check(
    rules: rulegen.RuleSet,
    sut: equiv.Target,
    ref: equiv.Target,
    tracer: Tracer,
    ports: tuple[int, int],
    *,
    log: Path | None = None,
    vports: list[int] = VPORTS,
    sample: int | None = None,
    max_rounds: int | None = None,
    random_per_port: int = 20,
    gap: float = 0.0005,
    after_install: Callable[[list[str]], None] | None = None,
    caches: list[Path] = (),  # type: ignore[assignment]
    qinq: bool = False,
) -> Result:
    """The full check of `rules` (see the module doc). `ports`: the OpenFlow listeners (TCP, 127.0.0.1) of
    OneSwitch and of the reference; `log`: OneSwitch's log file (for the reasons of refusals); `sample`: derive
    frames for that many accepted rules only (at random), None = all; `max_rounds`: stop uncovering shadowed
    rules after that many rounds; `after_install(accepted specs)` runs once all are installed, before any frame;
    `caches`: the unixctl sockets of OneSwitch's physical vswitchds (their datapath caches are emptied with the
    reference's after deletions); `qinq`: also send frames that arrive with 2 VLAN headers (derived where a rule
    needs one, and among the random packets): for a OneSwitch with `wire_vlans: 2`, which carries them.

    Round 1 runs on the whole accepted rule set. A rule of higher priority that takes every frame meant for a
    rule (it shadows it, on both switches alike) hides that rule's translation; so after each round the
    rules that stood in the way of the rules not exercised yet, and have been exercised themselves, are
    deleted from both switches (DELETE_STRICT through OneSwitch), and the next round checks what they uncover.
    """
    t0 = time.perf_counter()
    msgs, refused = install(rules, sut, ref, ports, log)
    accepted = list(msgs)
    if after_install is not None:
        after_install(accepted)
    res = Result(rules.seed, len(rules.flows), accepted, refused)
    rng = random.Random(rules.seed ^ 0xF00D)
    res.checked = accepted if sample is None or sample >= len(accepted) else rng.sample(accepted, sample)
    flows = [parse(s) for s in accepted]
    tables = framegen.reachable_tables(flows)
    checked = set(res.checked)
    res.unreachable = {s: "no goto chain leads to its table" for s, f in zip(accepted, flows, strict=True)
                       if f.table not in tables and s in checked}  # fmt: skip
    run = _Run(res, sut, ref, tracer, [Unixctl(c) for c in caches], gap)
    t1 = time.perf_counter()
    try:
        installed = run.rounds(msgs, ports, framegen.Chooser(flows, vports, rng, qinq=qinq),
                               rulegen.packets(rules.seed, vports, random_per_port, qinq=qinq),
                               max_rounds)  # fmt: skip
    finally:
        for u in run.caches:
            u.close()
    for t in (sut, ref):
        assert _count_flows(t) == len(installed), f"{t.name}: not the {len(installed)} remaining flows"
    res.seconds = {"install": round(t1 - t0, 1), "rounds": round(time.perf_counter() - t1, 1),
                   **{f"rounds_{k}": round(v, 1) for k, v in sorted(run.spent.items())}}  # fmt: skip
    return res
