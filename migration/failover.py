"""Failover: notice a dead or stuck NF instance fast and move its virtual port to a replacement.

- `FailureDetector` (pure): per instance, "dead" as soon as its process is gone; "stuck" after `max_misses`
  consecutive failed /health probes (speculative: a slow instance may be replaced, which costs only a
  restart since the state lives in the tier). Probes run every `interval_s` (tens of ms).
- `failover()`: the replacement is a standby already started (and healthy), or a new instance started
  now; the vport is remapped to it in OneSwitch; the failed instance is stopped and its port/namespace
  released. Flows keep their state when the NF keeps it in Redis; with `--store local` it is lost.
- `Watchdog`: the probing loop (a thread) that calls a handler on a detection; the clock and sleep are
  passed in. Given the instances' PIDs it also waits on their pidfds between probes, so a process exit is
  handled the moment it happens instead of at the next probe.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from domain.model import Instance, Nf
from migration.protocol import MigrationMapper, MigrationRuntime


@dataclass
class DetectorConfig:
    interval_s: float = 0.03
    max_misses: int = 3


@dataclass
class FailureDetector:
    cfg: DetectorConfig = field(default_factory=DetectorConfig)
    misses: dict[str, int] = field(default_factory=dict)

    def observe(self, inst_id: str, alive: bool, healthy: bool) -> str | None:
        """One probe's outcome -> "dead", "stuck" or None (fine, or not yet enough misses)."""
        if not alive:
            self.misses.pop(inst_id, None)
            return "dead"
        if healthy:
            self.misses[inst_id] = 0
            return None
        n = self.misses.get(inst_id, 0) + 1
        self.misses[inst_id] = n
        if n >= self.cfg.max_misses:
            self.misses.pop(inst_id, None)
            return "stuck"
        return None


class FailoverError(Exception):
    """No replacement could take over (the failed instance's mapping is left as it was)."""


@dataclass
class FailoverResult:
    nf: str
    failed: str
    replacement: str
    reason: str
    used_standby: bool
    start_ms: float  # 0 with a standby
    remap_ms: float
    total_ms: float  # from the call (= detection) to the port remapped
    cleanup_errors: list[str] = field(default_factory=list)
    remap_wall_ms: float = 0.0  # the agent's whole remap call (REST round trip included)

    def to_json(self) -> dict:
        return {k: (round(v, 2) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


def failover(
    nf: Nf,
    failed: Instance,
    replacement: Instance,
    runtime: MigrationRuntime,
    mapper: MigrationMapper,
    reason: str,
    standby: bool = False,
    clock: Callable[[], float] = time.monotonic,
    on_switched: Callable[[], None] | None = None,
    release: bool = True,
) -> FailoverResult:
    """Move `nf`'s vport from `failed` to `replacement` (a running standby if `standby`, else started now).

    `on_switched` runs right after the remap, before the failed instance is released (its stop, port and
    namespace removal are off the traffic's path): the caller records the new instance. `release=False`
    leaves the failed instance alone (its machine is gone: the caller releases it once that comes back)."""
    t0 = clock()
    start_ms = 0.0
    if standby:
        if not runtime.alive(replacement):
            raise FailoverError(f"standby {replacement.id} is not running")
    else:
        try:
            runtime.start(nf, replacement)
        except Exception as exc:  # noqa: BLE001 - runtime.start cleaned up after itself
            raise FailoverError(f"starting replacement {replacement.id}: {exc}") from None
        start_ms = (clock() - t0) * 1000
    t1 = clock()
    try:
        remap_ms = mapper.remap(nf.vport, replacement.switch, replacement.ofport)
    except Exception as exc:  # noqa: BLE001
        if not standby:
            with contextlib.suppress(Exception):  # the failover error below is what matters
                runtime.stop(replacement)
        raise FailoverError(f"remapping vport {nf.vport} to {replacement.id}: {exc}") from None
    remap_wall = (clock() - t1) * 1000
    total_ms = (clock() - t0) * 1000
    if on_switched:
        on_switched()
    errors = []
    try:
        if release:
            runtime.stop(failed)
    except Exception as exc:  # noqa: BLE001 - traffic already moved; reported
        errors.append(f"stopping {failed.id}: {exc}")
    return FailoverResult(
        nf.id,
        failed.id,
        replacement.id,
        reason,
        standby,
        start_ms,
        remap_ms or remap_wall,
        total_ms,
        errors,
        remap_wall,
    )


class Watchdog:
    """Probes instances every `cfg.interval_s`; calls `on_failure(inst_id, reason)` once per detection.

    `probe()` returns {instance_id: (alive, healthy)}; instances that disappear from it are forgotten.
    `pids()` (optional) returns {instance_id: pid}: between probes the thread then waits on the processes'
    pidfds (Linux >= 5.3), so an exit is reported at once ("dead") rather than up to one interval later.
    """

    def __init__(
        self,
        probe: Callable[[], dict[str, tuple[bool, bool]]],
        on_failure: Callable[[str, str], None],
        cfg: DetectorConfig | None = None,
        sleep: Callable[[float], None] = time.sleep,
        pids: Callable[[], dict[str, int]] | None = None,
    ):
        self.detector = FailureDetector(cfg or DetectorConfig())
        self.probe, self.on_failure, self.sleep = probe, on_failure, sleep
        self.pids = pids if pids is not None and hasattr(os, "pidfd_open") else None
        self._fds: dict[str, tuple[int, int]] = {}  # instance -> (pid, pidfd)
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="uno-failover-watchdog", daemon=True)

    def step(self) -> list[tuple[str, str]]:
        """One round of probes; returns the detections it handled."""
        found = []
        for inst_id, (alive, healthy) in self.probe().items():
            reason = self.detector.observe(inst_id, alive, healthy)
            if reason:
                found.append((inst_id, reason))
                self.on_failure(inst_id, reason)
        return found

    def wait_exits(self, timeout_s: float) -> list[str]:
        """Wait up to `timeout_s` for a watched process to exit; report each exit ("dead") and return the
        instances. Without `pids` this is a plain sleep."""
        if self.pids is None:
            self.sleep(timeout_s)
            return []
        want = self.pids()
        for iid in [i for i in self._fds if self._fds[i][0] != want.get(i)]:
            os.close(self._fds.pop(iid)[1])
        for iid, pid in want.items():
            if iid not in self._fds and pid:
                try:
                    self._fds[iid] = (pid, os.pidfd_open(pid))
                except OSError:
                    continue  # already gone: the next probe finds it dead
        if not self._fds:
            self.sleep(timeout_s)
            return []
        poller = select.poll()
        by_fd = {fd: iid for iid, (_, fd) in self._fds.items()}
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        exited = []
        for fd, _ in poller.poll(timeout_s * 1000):
            iid = by_fd[fd]
            os.close(self._fds.pop(iid)[1])
            if self.detector.observe(iid, False, False) == "dead":
                exited.append(iid)
                self.on_failure(iid, "dead")
        return exited

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.step()
                self.wait_exits(self.detector.cfg.interval_s)
        finally:
            for _, fd in self._fds.values():
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._fds.clear()

    def start(self) -> Watchdog:
        self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self.thread.is_alive():
            self.thread.join(timeout=5)
