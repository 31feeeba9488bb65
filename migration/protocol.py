"""Moving one NF instance to another location: the protocol as a small state machine.

Steps (each one recorded as a `StepEvent` with its duration):

    start   - start the target instance in its domain + cgroup (namespace, port, processes); for an NF type
              in `buffer_types` (default: every type), with `buffer_packets` > 0 and a runtime that can
              `release`, in buffering mode: it queues what it receives and processes nothing until `resume`
    ready   - wait until the target answers /health (the runtime's start already waits; re-checked here)
    prepare - OneSwitch installs the target's rules ahead (an ingress-only port of the vport for PREPARE_MS,
              barriered; skipped when the mapper cannot), so the remap only re-points the senders
    remap   - move the NF's virtual port to the target's physical port in OneSwitch, make-before-break
    verify  - the target is still alive after the remap (else: remap back, the old one keeps serving)
    drain   - let packets already in/behind the old instance leave: the old instance itself answers
              `POST /drain?quiet_ms=N` once its port's ring is empty by the kernel's count, nothing is in
              flight in it and no frame came for `drain_quiet_ms` (`drain_old`); an instance that cannot
              tell (an older `nf`) is polled until its rx counter is quiet for `quiet_s` AND it has
              nothing in flight (`in_flight`). Bounded by `drain_timeout_s`. OneSwitch keeps the old port
              ingress-only for `oneswitch_drain_ms` (the remap's `drain_ms`), so what it still emits is
              forwarded as coming from the NF's vport
    resume  - (buffered move) `release` the target: it processes its queue in arrival order, then goes on.
              Only now does it read the flows' records, so it sees every write the old instance made:
              two instances never update one flow's record at once (an NF that keeps a stream's state,
              such as the IPS's expected sequence number, would otherwise lose updates and stall TCP)
    stop    - stop the old instance's processes
    release - remove its port and namespace (done with `stop` by the runtime: one call, idempotent)

Abort rules (nothing half-done): a failure before the remap stops the target and leaves the mapping and the
old instance untouched; a failure of the target right after the remap, or a refused `release` (buffered
move), maps the port back to the old instance (still running: it is stopped only after the resume) and stops
the target (the packets it had queued are lost and reported). Once traffic has moved and the
target is verified, the migration is committed: cleanup errors on the old instance are reported in the result,
not raised (the old instance no longer carries traffic).

The I/O edges (runtime, port mapper, clock, sleep) are passed in; the agent's `Agent.migrate` is the one
caller.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from domain.errors import PrepareUnsupported
from domain.model import NF_TYPES, Instance, Nf

T = TypeVar("T")
STEPS = ("start", "ready", "prepare", "remap", "verify", "drain", "resume", "stop", "release")


class MigrationRuntime(Protocol):
    def start(self, nf: Nf, inst: Instance, buffer: int = 0) -> None: ...
    def stop(self, inst: Instance) -> None: ...
    def alive(self, inst: Instance) -> bool: ...
    def healthy(self, inst: Instance) -> bool: ...
    def stats(self, inst: Instance) -> dict | None: ...


class DrainingRuntime(MigrationRuntime, Protocol):
    """A runtime whose instances say themselves when they are drained (`POST /drain` on the NF)."""

    def drain(self, inst: Instance, quiet_ms: int, timeout_s: float, flush: bool = False) -> dict | None:
        """The instance's answer once drained or at `timeout_s` ({"drained": bool, "waited_ms", "late",
        "last_ms", "waiting", "in_flight", ...}); None when it cannot tell (then its counters are polled).
        `flush`: once what reached it before `quiet_ms` passed has left, while it keeps receiving."""


class BufferingRuntime(MigrationRuntime, Protocol):
    """A runtime that can start a target buffering and release it (an order-preserving move)."""

    def release(self, inst: Instance) -> dict: ...


class MigrationMapper(Protocol):
    def remap(self, vport: int, switch: str, port: int, drain_ms: int | None = None) -> float: ...

    # Optional (`prepare` step skipped without it): install the vport's rules for the target port ahead, an
    # ingress-only port for `ms`, so the remap only re-points the senders; returns the time in ms.
    # def prepare(self, vport: int, switch: str, port: int, ms: int | None = None) -> float: ...


class MigrationError(Exception):
    """The migration was aborted at `step`; the NF still runs on its old instance, mapping unchanged."""

    def __init__(self, step: str, message: str, result: MigrationResult, cause: Exception | None = None):
        super().__init__(f"migration aborted at {step}: {message}")
        self.step = step
        self.result = result
        self.cause = cause  # the runtime's or mapper's exception, if one (e.g. the target's ConfigRejected)


@dataclass
class MigrationConfig:
    drain_timeout_s: float = 0.5  # upper bound of the drain; 0 = no drain
    # The NF's own drain (`POST /drain`): it answers once its port's ring is empty (the kernel's count,
    # looked at whenever it runs: a throttled instance answers later, never early), nothing is in flight in
    # it, and no frame reached it for this long after the request. The window only covers frames the
    # switches sent to the old port just before the remap and still on their way (veth, the switch
    # datapath's cached flows). None = poll counters (below) only.
    drain_quiet_ms: int | None = 20
    # Fallback for an instance that cannot tell (an older `nf`): its rx counter unchanged this long =
    # drained. Above the cgroup CPU period (10 ms, up to 100 ms for small quotas: snic_datapath/cgroup.py): a
    # throttled sNIC instance may not run for a whole period while frames wait in its port's ring, which its
    # counters do not show (0.1 s, with the 100 ms period of then, let the move stop it with frames still
    # queued: holes in TCP streams).
    quiet_s: float = 0.25
    poll_s: float = 0.02
    # The target queues up to this many packets between the remap and the end of the old instance's drain
    # (`nf --buffer`), so the two never process one flow at once; 0 = process at once (make-before-break
    # with both instances live during the drain).
    buffer_packets: int = 100_000
    # NF types moved buffered: all of them. The hold keeps a flow's packets in order across a move (with
    # both instances live, packets sent to the target overtook those still queued at or behind the old
    # one: reordering at every move), and an NF whose per-flow record changes on every packet (the IPS)
    # needs it for correctness. A type left out gets the plain make-before-break move: no hold (lower
    # latency during the move) but reordering.
    buffer_types: frozenset[str] = frozenset(NF_TYPES)
    # A scale-in of such a type also holds: the staying instances queue every packet from just before the
    # remap until the leaving ones drained (migration/scale.py), so a moved flow's packets cannot overtake
    # its last ones inside a leaving instance (a CPU-throttled sNIC instance may sit on them for tens of ms);
    # the cost is latency for every flow of the NF meanwhile. OneSwitch delivers frames still tagged for a
    # leaving instance's slot to that instance while it drains (before, they went to another instance and
    # arrived after later frames: why holding did not help at first). False: scale-ins unheld.
    hold_scale_in: bool = True


@dataclass
class StepEvent:
    step: str
    ok: bool
    ms: float
    detail: str = ""

    def to_json(self) -> dict:
        return {"step": self.step, "ok": self.ok, "ms": round(self.ms, 2), "detail": self.detail}


@dataclass
class MigrationResult:
    nf: str
    src: str | None
    dst: str
    steps: list[StepEvent] = field(default_factory=list)
    remap_ms: float | None = None
    prepare_ms: float | None = None  # OneSwitch's time to install the target's rules ahead of the remap
    drained: bool | None = None  # True: drained within the bound; False: timeout hit
    drain: dict[str, dict] = field(default_factory=dict)  # old instance id -> its own /drain answer
    buffered: bool = False  # the target queued packets until the old instance drained
    replayed: int = 0  # packets the target queued and processed at `resume`
    buffer_overflow: int = 0  # packets the target dropped because its queue was full (= loss)
    aborted_at: str | None = None
    cleanup_errors: list[str] = field(default_factory=list)

    @property
    def duration_ms(self) -> float:
        return sum(s.ms for s in self.steps)

    def step_ms(self, step: str) -> float | None:
        return next((s.ms for s in self.steps if s.step == step), None)

    def to_json(self) -> dict:
        return {
            "nf": self.nf, "src": self.src, "dst": self.dst, "duration_ms": round(self.duration_ms, 2),
            "remap_ms": self.remap_ms, "prepare_ms": self.prepare_ms, "drained": self.drained, "drain": self.drain,
            "aborted_at": self.aborted_at,
            "buffered": self.buffered, "replayed": self.replayed, "buffer_overflow": self.buffer_overflow,
            "cleanup_errors": self.cleanup_errors, "steps": [s.to_json() for s in self.steps],
        }  # fmt: skip


def rx_count(stats: dict | None) -> int | None:
    """Pure: the frames an instance received (its /stats `rx`); None without a readable counter."""
    if not stats:
        return None
    c = stats.get("counters", stats)
    try:
        return int(c.get("rx", 0) or 0)
    except (TypeError, ValueError):
        return None


# OneSwitch keeps a leaving port ingress-only this much longer than the drain's own bound: the drain step
# ends at the latest after `drain_timeout_s`, then `stop` kills the old instance (its last frames are in
# the switch well within this margin, also on a loaded machine).
DRAIN_MARGIN_MS = 2000


# How long a prepared target port waits for its remap (OneSwitch `ms`); the remap follows at once, and if it
# never comes (abort) the ingress-only entry of the stopped target lapses by itself.
PREPARE_MS = 5000


def oneswitch_drain_ms(drain_timeout_s: float) -> int:
    """Pure: the OneSwitch drain window (`drain_ms`, 0..60000) covering a drain bounded by `drain_timeout_s`."""
    return min(60_000, max(0, math.ceil(drain_timeout_s * 1000)) + DRAIN_MARGIN_MS)


# Where a frame an NF received ends (nfs/crates/nfcore runtime.rs, runtime/pipelined.rs): exactly one of
# tx (sent; non-IP frames and fail-open forwards are sent, so they are in tx too), dropped_by_nf (verdict
# Drop), malformed (does not parse), fail_closed_dropped (store failure, fail-closed). A frame the socket
# refused on send (transient: queue full) is counted in none: then the instance never looks idle and the
# drain ends at its bound.
_ENDS = ("tx", "dropped_by_nf", "malformed", "fail_closed_dropped")


def in_flight(stats: dict | None) -> int | None:
    """Pure: frames the instance received (rx) and has not yet sent or dropped, from its /stats answer.

    <= 0 means nothing in flight (the counters are read one by one while the NF runs, so a batch finishing
    between two reads can make it negative). None: no counters to tell (stats unreadable or an old NF)."""
    if not stats:
        return None
    c = stats.get("counters", stats)
    try:
        if "rx" not in c or "tx" not in c:
            return None
        return int(c["rx"] or 0) - sum(int(c.get(k, 0) or 0) for k in _ENDS)
    except (TypeError, ValueError, AttributeError):
        return None


def drained(samples: list[tuple[float, int | None]], quiet_s: float, pending: int | None) -> bool:
    """Pure: rx quiet for `quiet_s` (`drain_done`) and nothing in flight (`pending` from `in_flight`; None
    = unknown, the rx rule alone decides)."""
    return drain_done(samples, quiet_s) and (pending is None or pending <= 0)


def wait_drained(
    instances: list[Instance],
    runtime: MigrationRuntime,
    timeout_s: float,
    quiet_s: float,
    poll_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> bool:
    """Poll the instances' /stats until every one is `drained` (True) or `timeout_s` elapsed (False; a
    timeout <= 0 takes one sample)."""
    samples: dict[str, list[tuple[float, int | None]]] = {o.id: [] for o in instances}
    pending: dict[str, int | None] = {}
    deadline = clock() + max(timeout_s, 0.0)
    while True:
        now = clock()
        for o in instances:
            st = runtime.stats(o)
            samples[o.id].append((now, rx_count(st)))
            pending[o.id] = in_flight(st)
        if all(drained(s, quiet_s, pending[i]) for i, s in samples.items()):
            return True
        if now >= deadline:
            return False
        sleep(poll_s)


@dataclass
class DrainOutcome:
    drained: bool | None  # None: no drain (bound 0 or nothing to drain)
    detail: str
    answers: dict[str, dict]  # instance id -> its /drain answer (instances that could tell)


def drain_old(
    instances: list[Instance],
    runtime: MigrationRuntime,
    cfg: MigrationConfig,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    always: bool = False,
) -> DrainOutcome:
    """Wait until the leaving `instances` drained, bounded by `cfg.drain_timeout_s` (skipped when that is 0
    or there is no instance, unless `always`). Each instance is asked itself (`runtime.drain`, all at once);
    those that cannot tell are polled (`wait_drained`) for the rest of the bound."""
    if not instances or not (always or cfg.drain_timeout_s > 0):
        return DrainOutcome(None, "", {})
    bound = max(cfg.drain_timeout_s, 0.0)
    deadline = clock() + bound
    answers: dict[str, dict | None] = {o.id: None for o in instances}
    ask = getattr(runtime, "drain", None)
    if ask is not None and cfg.drain_quiet_ms is not None and bound > 0:
        quiet_ms = cfg.drain_quiet_ms
        if len(instances) == 1:
            answers[instances[0].id] = ask(instances[0], quiet_ms, bound)
        else:  # at once: each waits out its own quiet window
            with ThreadPoolExecutor(len(instances)) as pool:
                got = list(pool.map(lambda o: ask(o, quiet_ms, bound), instances))
            answers = {o.id: a for o, a in zip(instances, got, strict=True)}
    told = {i: a for i, a in answers.items() if a is not None}
    ok = all(a.get("drained") is True for a in told.values())
    parts = [(i, _told_detail(a)) for i, a in told.items()]
    polled = [o for o in instances if answers[o.id] is None]
    if polled:
        quiet = wait_drained(polled, runtime, deadline - clock(), cfg.quiet_s, cfg.poll_s, clock, sleep)
        ok = ok and quiet
        parts.append((", ".join(o.id for o in polled), "quiet" if quiet else "timeout"))
    detail = parts[0][1] if len(parts) == 1 else "; ".join(f"{who}: {what}" for who, what in parts)
    return DrainOutcome(ok, detail, told)


def _told_detail(a: dict) -> str:
    """One instance's /drain answer in a step's detail."""
    if a.get("drained") is True:
        last = a.get("last_ms")
        late = f", last +{last} ms" if last is not None else ""
        return f"drained (nf: {a.get('late', 0)} late{late})"
    what = a.get("error") or f"{a.get('waiting')} waiting, {a.get('in_flight')} in flight"
    return f"timeout (nf: {what})"


def step_recorder(
    steps: list[StepEvent], clock: Callable[[], float], on_event: Callable[[StepEvent], None] | None
) -> Callable[..., None]:
    """`record(step, ok, t0, detail="")`: append the step's outcome and duration since `t0` to `steps` and
    tell `on_event` (the step log of a move, a scale-out/in, a local-state move)."""

    def record(step: str, ok: bool, t0: float, detail: str = "") -> None:
        ev = StepEvent(step, ok, (clock() - t0) * 1000, detail)
        steps.append(ev)
        if on_event:
            on_event(ev)

    return record


def map_back(mapper: MigrationMapper, vport: int, back: Instance | None, msg: str) -> str:
    """Abort after the remap: map `vport` back to the `back` instance (still running); `msg` + what happened."""
    if back is not None:
        try:
            mapper.remap(vport, back.switch, back.ofport)
            msg += f"; vport {vport} mapped back to {back.id}"
        except Exception as exc:  # noqa: BLE001
            msg += f"; mapping back to {back.id} FAILED: {exc}"
    return msg


def stop_all(instances: list[Instance], runtime: MigrationRuntime) -> list[str]:
    """Stop (and release) every instance; the errors, one line each (committed steps report, never undo)."""
    errors = []
    for o in instances:
        try:
            runtime.stop(o)
        except Exception as exc:  # noqa: BLE001
            errors.append(f"stopping {o.id}: {exc}")
    return errors


def drain_done(samples: list[tuple[float, int | None]], quiet_s: float) -> bool:
    """Pure: the rx samples (t, rx) show no change over the last `quiet_s` (an unreadable counter = gone)."""
    if not samples:
        return False
    t_last, rx_last = samples[-1]
    if rx_last is None:
        return True  # stats gone: nothing can still be leaving through it
    for t, rx in reversed(samples):
        if rx != rx_last:
            return False
        if t_last - t >= quiet_s:
            return True
    return False


class MoveSteps:
    """The steps every move of one NF to a new instance shares, and their abort rules, for both protocols
    (this module's `migrate`, state in the tier; `migration.localstate.migrate_local`, state in the process):
    `switch_over` (start -> ready -> remap -> verify), `drain`, the protocol's own steps through `step`
    (resume; export, import), then `commit` (stop -> release of the old instances).

    Abort: before the remap the target is stopped (if it started), mapping and old instances untouched; from
    `verify` on (`back=True`) the vport is first mapped back to the old instance (still running) and the
    packets the target had queued (a buffering target) are reported lost. `MigrationError.result` holds the
    steps so far."""

    def __init__(
        self,
        nf: Nf,
        old: list[Instance],
        target: Instance,
        runtime: MigrationRuntime,
        mapper: MigrationMapper,
        cfg: MigrationConfig,
        res: MigrationResult,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
        on_event: Callable[[StepEvent], None] | None,
    ):
        self.nf, self.old, self.target, self.runtime, self.mapper = nf, old, target, runtime, mapper
        self.cfg, self.res, self.clock, self.sleep = cfg, res, clock, sleep
        self.record = step_recorder(res.steps, clock, on_event)

    def abort(
        self,
        step: str,
        t0: float,
        msg: str,
        stop_target: bool = True,
        back: bool = False,
        cause: Exception | None = None,
    ) -> MigrationError:
        """Record `step` as failed, undo as the abort rules say; the error to raise."""
        if back:
            queued = _queued(self.runtime.stats(self.target))
            msg = map_back(self.mapper, self.nf.vport, self.old[0] if self.old else None, msg)
            if queued:
                msg += f"; {queued} packets queued at the target are lost"
        self.record(step, False, t0, msg)
        self.res.aborted_at = step
        if stop_target:
            try:
                self.runtime.stop(self.target)
            except Exception as exc:  # noqa: BLE001 - reported; `uno down` sweeps what remains
                self.res.cleanup_errors.append(f"stopping target {self.target.id}: {exc}")
        return MigrationError(step, msg, self.res, cause)

    def step(
        self,
        name: str,
        fn: Callable[[], T],
        detail: Callable[[T], str] = lambda _: "",
        what: str = "",
        stop_target: bool = True,
        back: bool = True,
    ) -> T:
        """Run one step: `fn()`'s value, recorded with `detail(value)`; any exception aborts the move at
        `name` (message `what: exc`, undone as `stop_target` / `back` say)."""
        t0 = self.clock()
        try:
            value = fn()
        except Exception as exc:  # noqa: BLE001 - each step's failure is the move's abort, never a crash
            msg = f"{what}: {exc}" if what else str(exc)
            raise self.abort(name, t0, msg, stop_target, back, cause=exc) from None
        self.record(name, True, t0, detail(value))
        return value

    def switch_over(self, buffer: int = 0, start_detail: str = "") -> None:
        """start (the target; buffering up to `buffer` packets when > 0) -> ready -> prepare -> remap
        (make-before-break; OneSwitch keeps the old port ingress-only for the drain) -> verify (the target
        survived the remap)."""
        t, rt = self.target, self.runtime
        self.step("start", lambda: rt.start(self.nf, t, buffer=buffer) if buffer else rt.start(self.nf, t),
                  lambda _: start_detail, stop_target=False, back=False)  # fmt: skip
        self.step("ready", lambda: _check(rt.healthy(t), f"{t.id} not healthy after start"), back=False)
        self.prepare()
        drain_ms = oneswitch_drain_ms(self.cfg.drain_timeout_s)
        self.res.remap_ms = self.step(
            "remap", lambda: self.mapper.remap(self.nf.vport, t.switch, t.ofport, drain_ms=drain_ms),
            lambda _: f"{t.switch}:{t.ofport}", back=False,
        )  # fmt: skip
        self.step("verify", lambda: _check(rt.alive(t), f"{t.id} died after the remap"))

    def prepare(self) -> None:
        """The `prepare` step (skipped when the mapper or OneSwitch has no `prepare`): the target's rules go in
        ahead (OneSwitch: an ingress-only port of the vport for PREPARE_MS, barriered; it lapses by itself if no
        remap follows), so the remap only re-points the senders: one barrier round at the switch-over instead of
        two. A failure aborts like a failed remap (target stopped, mapping unchanged)."""
        prepare = getattr(self.mapper, "prepare", None)
        if prepare is None:
            return
        t = self.target
        t0 = self.clock()
        try:
            self.res.prepare_ms = prepare(self.nf.vport, t.switch, t.ofport, ms=PREPARE_MS)
        except PrepareUnsupported:
            return  # an older OneSwitch: the remap makes the target's rules itself
        except Exception as exc:  # noqa: BLE001 - PortMapError or a transport error: mapping unchanged
            raise self.abort("prepare", t0, str(exc)) from None
        self.record("prepare", True, t0, f"{t.switch}:{t.ofport}")

    def drain(self, always: bool = False) -> None:
        """Wait until the old instances drained (`drain_old`), bounded by `drain_timeout_s`; skipped when
        that is 0 (or no old instance) unless `always` (then a 0 bound takes one counter sample)."""
        t0 = self.clock()
        out = drain_old(self.old, self.runtime, self.cfg, self.clock, self.sleep, always)
        self.res.drained, self.res.drain = out.drained, out.answers
        self.record("drain", True, t0, out.detail)

    def commit(self) -> None:
        """stop + release the old instances (runtime.stop does both; timed as one, reported as two steps).
        Committed: errors are reported in the result, never undone."""
        t0 = self.clock()
        self.res.cleanup_errors += stop_all(self.old, self.runtime)
        self.record("stop", not self.res.cleanup_errors, t0, "; ".join(self.res.cleanup_errors))
        t0 = self.clock()
        self.record("release", not self.res.cleanup_errors, t0, "port and namespace removed with stop")


def _check(ok: bool, msg: str) -> None:
    if not ok:
        raise RuntimeError(msg)


def _queued(stats: dict | None) -> int:
    """Packets a buffering instance took into its queue (its `buffered` counter; 0 if unreadable)."""
    try:
        return int(((stats or {}).get("counters") or {}).get("buffered", 0) or 0)
    except (TypeError, ValueError, AttributeError):
        return 0


def migrate(
    nf: Nf,
    old: list[Instance],
    target: Instance,
    runtime: MigrationRuntime,
    mapper: MigrationMapper,
    cfg: MigrationConfig | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_event: Callable[[StepEvent], None] | None = None,
) -> MigrationResult:
    """Move `nf` from its `old` instances to the not yet started instance `target`.

    Returns the result (steps, durations, drain outcome) or raises MigrationError (old instances serving).
    The caller updates its own state (nf.instances/location) only after a successful return.
    """
    cfg = cfg or MigrationConfig()
    res = MigrationResult(nf.id, old[0].location if old else None, target.location)
    # Buffer only for the NF types that need it, when there is an old instance to wait for and the runtime
    # can release the target.
    res.buffered = (
        cfg.buffer_packets > 0 and nf.type in cfg.buffer_types and bool(old) and hasattr(runtime, "release")
    )
    mv = MoveSteps(nf, old, target, runtime, mapper, cfg, res, clock, sleep, on_event)
    mv.switch_over(buffer=cfg.buffer_packets if res.buffered else 0)
    mv.drain()  # committed from here on when not buffered
    if res.buffered:
        # resume: the target processes its queue (every write of the old instance is in the tier by now);
        # refused: the old instance still runs, traffic goes back to it
        mv.step("resume", lambda: runtime.release(target), replayed_detail(res), f"releasing {target.id}")
    mv.commit()
    return res


def replayed_detail(res: MigrationResult) -> Callable[[dict], str]:
    """The detail of the step that ends a target's buffering (resume, import): takes the target's answer's
    `replayed` / `buffer_overflow` into `res`."""

    def detail(ans: dict) -> str:
        res.replayed = int(ans.get("replayed", 0) or 0)
        res.buffer_overflow = int(ans.get("buffer_overflow", 0) or 0)
        return f"replayed {res.replayed}, overflow {res.buffer_overflow}"

    return detail
