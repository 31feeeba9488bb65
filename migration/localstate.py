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

from domain.model import Instance, Nf
from migration.protocol import (
    MigrationConfig,
    MigrationMapper,
    MigrationResult,
    MoveSteps,
    StepEvent,
    replayed_detail,
)

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
    mv = MoveSteps(nf, old, target, runtime, mapper, cfg, res, clock, sleep, on_event)
    mv.switch_over(buffer=cfg.buffer_packets, start_detail=f"buffering up to {cfg.buffer_packets} packets")
    # drain: the old instance must have processed everything sent to it before its state is taken. Quiet can
    # also be a starved process with packets still in its socket (an sNIC instance under its CPU quota): the
    # NF processes what is in its ring before it serialises its state (GET /state).
    mv.drain(always=True)

    def exported(state: bytes) -> str:
        res.state_bytes = len(state)
        return f"{len(state)} bytes"

    state = mv.step("export", lambda: runtime.get_state(src, timeout=cfg.state_timeout_s), exported)
    replayed = replayed_detail(res)

    def imported(ans: dict) -> str:
        res.state_entries = int(ans.get("imported", 0) or 0)
        replayed(ans)
        if res.buffer_overflow:
            res.notes.append(f"{res.buffer_overflow} packets dropped: the target's buffer was full")
        return f"{res.state_entries} entries, {res.replayed} packets replayed"

    mv.step("import", lambda: runtime.put_state(target, state, timeout=cfg.state_timeout_s), imported)
    mv.commit()  # committed: stop + release the old instance (errors reported, not undone)
    return res
