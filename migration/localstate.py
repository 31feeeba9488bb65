"""Moving an NF that keeps its per-flow state in its own process (`nf --store local`, standing in for a
third-party NF): an OpenNF-style loss-free move, behind the same `Agent.migrate`.

Steps (each a `StepEvent`, as in migration.protocol):

    start   - start the target in *buffering* mode (`nf --buffer N`): it receives and queues packets, does
              not process them
    ready   - the target answers /health
    prepare - OneSwitch installs the target's rules ahead (an ingress-only port, barriered; skipped when the
              mapper cannot), so the remap only re-points the senders
    remap   - OneSwitch moves the vport to the target (make-before-break): new packets queue at the target
    verify  - the target is still alive (else: mapped back, the old instance keeps serving)
    drain   - the old instance finishes the packets already sent to it (rx quiet for `quiet_s`); the export
              then also takes in whatever still sits in its port's receive ring before serialising
    export  - `GET /state` on the old instance: its whole flow table, serialised (after the drain, so it
              holds the effect of every packet the old instance saw)
    import  - `PUT /state` on the target: the state replaces its (empty) store, then it processes its
              buffer in arrival order and goes on as a normal instance
    stop    - stop the old instance; release: its port and namespace (with stop)

Loss-free and order-preserving within the buffer bound: packets beyond `buffer_packets` are dropped by the
target and reported (`buffer_overflow`), never silently. Abort: before the remap as in the stateless
protocol; from verify to import (target dead, export or import refused), the vport is mapped back to the old
instance, which still runs with its state, and the target is stopped; the packets the target had queued
are lost and reported (`MigrationError` detail). After a successful import the move is committed.

Cost: unlike the stateless move, export and import grow with the number of flows, and every packet that
arrives between the remap and the import waits in the buffer (the latency during the move).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from migration.protocol import (
    MigrationConfig,
    MigrationError,
    MigrationMapper,
    MigrationResult,
    StepEvent,
    map_back,
    oneswitch_drain_ms,
    prepare_step,
    step_recorder,
    stop_all,
    wait_drained,
)
from nf_agent.agent.model import Instance, Nf

STEPS = ("start", "ready", "prepare", "remap", "verify", "drain", "export", "import", "stop", "release")


class LocalStateRuntime(Protocol):
    def start(self, nf: Nf, inst: Instance, buffer: int = 0) -> None: ...
    def stop(self, inst: Instance) -> None: ...
    def alive(self, inst: Instance) -> bool: ...
    def healthy(self, inst: Instance, timeout: float = 1.0) -> bool: ...
    def stats(self, inst: Instance) -> dict | None: ...
    def get_state(self, inst: Instance, timeout: float = 60.0) -> bytes: ...
    def put_state(self, inst: Instance, data: bytes, timeout: float = 60.0) -> dict: ...


@dataclass
class LocalMoveConfig(MigrationConfig):
    buffer_packets: int = 100_000  # the target's queue bound (nf --buffer)
    state_timeout_s: float = 60.0  # per export / import request


@dataclass
class LocalMigrationResult(MigrationResult):
    protocol: str = "local-state"
    state_bytes: int = 0
    state_entries: int = 0
    replayed: int = 0  # packets the target queued and processed after the import
    buffer_overflow: int = 0  # packets the target dropped because its buffer was full (= loss)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            **super().to_json(), "protocol": self.protocol, "state_bytes": self.state_bytes,
            "state_entries": self.state_entries, "replayed": self.replayed,
            "buffer_overflow": self.buffer_overflow,
        }  # fmt: skip


def _counter(stats: dict | None, name: str) -> int:
    try:
        return int(((stats or {}).get("counters") or {}).get(name, 0) or 0)
    except (TypeError, ValueError):
        return 0


def migrate_local(
    nf: Nf,
    old: list[Instance],
    target: Instance,
    runtime: LocalStateRuntime,
    mapper: MigrationMapper,
    cfg: LocalMoveConfig | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_event: Callable[[StepEvent], None] | None = None,
) -> LocalMigrationResult:
    """Move `nf` (one old instance with local state) to the not yet started `target`, state included.

    Returns the result or raises MigrationError (the old instance serves, mapping back on it).
    """
    cfg = cfg or LocalMoveConfig()
    if len(old) != 1:
        raise ValueError(f"a local-state move needs exactly one old instance, got {len(old)}")
    src = old[0]
    res = LocalMigrationResult(nf.id, src.location, target.location)

    record = step_recorder(res.steps, clock, on_event)

    def abort(step: str, t0: float, msg: str, stop_target: bool = True, back: bool = False):
        if back:
            queued = _counter(runtime.stats(target), "buffered")
            msg = map_back(mapper, nf.vport, src, msg)
            if queued:
                msg += f"; {queued} packets queued at the target are lost"
        record(step, False, t0, msg)
        res.aborted_at = step
        if stop_target:
            try:
                runtime.stop(target)
            except Exception as exc:  # noqa: BLE001 - reported; `uno down` sweeps what remains
                res.cleanup_errors.append(f"stopping target {target.id}: {exc}")
        return MigrationError(step, msg, res)

    t0 = clock()
    try:
        runtime.start(nf, target, buffer=cfg.buffer_packets)
    except Exception as exc:  # noqa: BLE001 - runtime.start already removed what it created
        raise abort("start", t0, str(exc), stop_target=False) from None
    record("start", True, t0, f"buffering up to {cfg.buffer_packets} packets")
    t0 = clock()
    if not runtime.healthy(target):
        raise abort("ready", t0, f"{target.id} not healthy after start")
    record("ready", True, t0)
    prepare_step(mapper, nf.vport, target, res, record, abort, clock)
    t0 = clock()
    try:
        # OneSwitch keeps the old port ingress-only meanwhile: what the old instance still emits is forwarded.
        res.remap_ms = mapper.remap(
            nf.vport, target.switch, target.ofport, drain_ms=oneswitch_drain_ms(cfg.drain_timeout_s)
        )
    except Exception as exc:  # noqa: BLE001 - mapping unchanged
        raise abort("remap", t0, str(exc)) from None
    record("remap", True, t0, f"{target.switch}:{target.ofport}")
    t0 = clock()
    if not runtime.alive(target):
        raise abort("verify", t0, f"{target.id} died after the remap", back=True)
    record("verify", True, t0)
    # drain: the old instance must have processed everything sent to it before its state is taken
    t0 = clock()
    # Quiet can also be a starved process with packets still in its socket (an sNIC instance under its
    # CPU quota): the NF processes what is in its ring before it serialises its state (GET /state).
    res.drained = wait_drained([src], runtime, cfg.drain_timeout_s, cfg.quiet_s, cfg.poll_s, clock, sleep)
    record("drain", True, t0, "quiet" if res.drained else "timeout")
    t0 = clock()
    try:
        state = runtime.get_state(src, timeout=cfg.state_timeout_s)
    except Exception as exc:  # noqa: BLE001 - StateError or transport
        raise abort("export", t0, str(exc), back=True) from None
    res.state_bytes = len(state)
    record("export", True, t0, f"{len(state)} bytes")
    t0 = clock()
    try:
        ans = runtime.put_state(target, state, timeout=cfg.state_timeout_s)
    except Exception as exc:  # noqa: BLE001
        raise abort("import", t0, str(exc), back=True) from None
    res.state_entries = int(ans.get("imported", 0) or 0)
    res.replayed = int(ans.get("replayed", 0) or 0)
    res.buffer_overflow = int(ans.get("buffer_overflow", 0) or 0)
    if res.buffer_overflow:
        res.notes.append(f"{res.buffer_overflow} packets dropped: the target's buffer was full")
    record("import", True, t0, f"{res.state_entries} entries, {res.replayed} packets replayed")
    # committed: stop + release the old instance
    t0 = clock()
    res.cleanup_errors += stop_all([src], runtime)  # committed: report, do not undo
    record("stop", not res.cleanup_errors, t0, "; ".join(res.cleanup_errors))
    t0 = clock()
    record("release", not res.cleanup_errors, t0, "port and namespace removed with stop")
    return res
