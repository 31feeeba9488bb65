"""Warm NF slots: pre-created namespace + veth + bridge port, waiting for an instance to take them.

Starting an instance cold costs its namespace, veth pair and bridge port before `nf` itself starts
(bench/RESULTS.md `migration` measures both starts). A slot has all of that ready, not running an NF and not
mapped in OneSwitch; `HostRuntime.start` takes one when its location has one free, so only `nf` start + /health remain
on the failover, migration, scale-out and create paths. `SlotPool` keeps `per_domain` free slots per location
(host and each sNIC), refilled by a background thread after each take. (No process runs in a slot: the NF
reaches Redis and serves its stats endpoint on unix sockets, so there are no relays to pre-start.)

The pool is the bookkeeping and the thread; creating and destroying a slot (the I/O) are the runtime's
(`HostRuntime.create_slot` / `destroy_slot`), passed in. `missing()` is the pure refill decision.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass

log = logging.getLogger("uno.agent.slots")


@dataclass
class Slot:
    """One warm slot: the names an instance takes over."""

    key: int
    location: str  # "host" | "snicK" (also the switch its port is on)
    netns: str
    inside_if: str
    port_if: str
    ofport: int

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Slot:
        """A slot file; the relay fields of files an older agent wrote (its relays ran in the slot's namespace,
        whose processes `destroy_slot` ends) are ignored."""
        return cls(**{k: v for k, v in d.items() if k not in ("stats_sock", "relay_pids")})


def missing(free: dict[str, int], locations: list[str], per_domain: int) -> list[str]:
    """Locations to create one slot at each, in order: every location below `per_domain`, the emptiest first
    (so a failover's location gets its slot back before a second one elsewhere)."""
    need = [(free.get(loc, 0), i, loc) for i, loc in enumerate(locations) if free.get(loc, 0) < per_domain]
    return [loc for _, _, loc in sorted(need)]


class SlotPool:
    """Free slots per location, refilled in the background; `close()` destroys every free slot.

    `create(location) -> Slot` builds one (cleaning up after itself on failure, raising); `destroy(slot)`
    removes one (idempotent). A slot handed out by `take` belongs to the caller from then on.
    """

    def __init__(
        self,
        create: Callable[[str], Slot],
        destroy: Callable[[Slot], None],
        locations: list[str],
        per_domain: int = 1,
        retry_s: float = 1.0,
        refill_delay_s: float = 0.3,
    ):
        """`refill_delay_s`: how long after `refill()` the thread starts building (the caller's start and
        remap, on the 2 shared cores, should not compete with the slot's namespace and bridge port)."""
        if per_domain < 0:
            raise ValueError("per_domain must be >= 0")
        self.create, self.destroy = create, destroy
        self.locations, self.per_domain, self.retry_s = list(locations), per_domain, retry_s
        self.refill_delay_s = refill_delay_s
        self.free: dict[str, list[Slot]] = {loc: [] for loc in self.locations}
        self.lock = threading.Lock()
        self.created = 0
        self.taken = 0
        self.failures = 0
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def counts(self) -> dict[str, int]:
        with self.lock:
            return {loc: len(s) for loc, s in self.free.items()}

    def take(self, location: str) -> Slot | None:
        """A free slot at `location` (removed from the pool), or None. Call `refill()` once the caller's
        start is done."""
        if self.per_domain == 0:
            return None
        with self.lock:
            slots = self.free.get(location)
            slot = slots.pop(0) if slots else None
            if slot is not None:
                self.taken += 1
        return slot

    def refill(self) -> None:
        """Wake the refill thread (it waits `refill_delay_s`, then builds what is missing)."""
        self._wake.set()

    def fill_once(self) -> int:
        """Create the slots missing now, one at a time, round by round (one per short location a round: the
        emptiest first) until none is missing; stops early when closed, and after a round with a failure
        (the caller retries later). Returns how many failed."""
        failed = 0
        while not failed and not self._closed.is_set():
            todo = missing(self.counts(), self.locations, self.per_domain)
            if not todo:
                break
            failed = self._fill_round(todo)
        return failed

    def _fill_round(self, todo: list[str]) -> int:
        failed = 0
        for loc in todo:
            if self._closed.is_set():
                break
            try:
                slot = self.create(loc)
            except Exception as exc:  # noqa: BLE001 - logged and retried after retry_s
                failed += 1
                self.failures += 1
                log.warning("warm slot not created", extra={"fields": {"location": loc, "error": str(exc)}})
                continue
            with self.lock:
                closed = self._closed.is_set()
                if not closed:
                    self.free[loc].append(slot)
                    self.created += 1
            if closed:  # close() ran while this one was being built: it is ours to remove
                self.destroy(slot)
        return failed

    def start(self) -> SlotPool:
        """Start the refill thread (fills the pool at once, then after each take)."""
        if self.per_domain > 0 and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="uno-warm-slots", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        streak = 0  # rounds in a row with a failure: the retry backs off (x2, at most 30 s)
        while not self._closed.is_set():
            failed = self.fill_once()
            streak = streak + 1 if failed else 0
            # after a failure retry later (not in a tight loop); else sleep until the next refill()
            self._wake.wait(min(self.retry_s * 2 ** (streak - 1), 30.0) if failed else None)
            self._wake.clear()
            self._closed.wait(self.refill_delay_s)

    def stop(self) -> None:
        """Stop refilling (waits for a slot being built); the free slots stay, as after a crash."""
        self._closed.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def close(self) -> list[str]:
        """Stop refilling and destroy every free slot; returns the errors (nothing is left on success)."""
        self.stop()
        with self.lock:
            slots = [s for loc in self.free.values() for s in loc]
            for loc in self.free.values():
                loc.clear()
        errors = []
        for slot in slots:
            try:
                self.destroy(slot)
            except Exception as exc:  # noqa: BLE001 - keep removing the others
                errors.append(f"slot {slot.netns}: {exc}")
        return errors
