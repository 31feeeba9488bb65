"""Scaling one NF out and in: several instances behind its ONE virtual port (a select group in OneSwitch).

The NF stays one NF with one virtual port to the controller and the orchestrator; OneSwitch spreads the
traffic sent to the vport over the instances' physical ports per flow (an OVS select group, hash of the
flow). With per-flow state in the tier (Redis) any instance can take any flow, so a resize moves flows
between instances without breaking them; with local state, a flow that lands on another instance loses it.

Steps (each one a `StepEvent`, as in migration/protocol.py):

  scale out (k new instances):
    start   - start the new instances (their domains + cgroups), one after the other; held (an NF type of
              `MigrationConfig.buffer_types`, a runtime that can release): in buffering mode, queueing what
              they receive
    ready   - all of them answer /health
    set     - OneSwitch: the vport now spreads over old + new instances (make-before-break)
    verify  - the new instances are still alive (else: the set goes back to the old instances)
    flush   - (held) until each old instance has sent everything that reached it before its quiet window
              ended (`POST /drain?flush=1`, all at once; it keeps serving its other flows meanwhile),
              bounded by `drain_timeout_s`: the packets of the flows that moved to a new instance and still
              sat at their old one are out before the new instance processes that flow's later ones
    resume  - (held) release the new instances: each processes its queue in arrival order, then goes on
              (a refused release maps the vport back to the old instances and stops the new ones)
  scale in (k leaving instances):
    hold    - (held: `MigrationConfig.hold_scale_in`, on by default, as a held scale-out, and the runtime can
              tell a running instance to hold) each staying
              instance queues what it receives from now on (`POST /hold`), in arrival order: the flows of the
              leaving instances are about to reach them while their earlier packets may still sit there
              (a refused hold releases those that held and goes on unheld)
    set     - OneSwitch: the vport spreads over the staying instances only (make-before-break)
    drain   - until each leaving instance answers drained (`POST /drain`, all at once; an instance that
              cannot tell: its rx counter quiet for `quiet_s` and nothing in flight), bounded by
              `drain_timeout_s`; OneSwitch keeps the leaving ports ingress-only meanwhile, and delivers
              them the frames still tagged for their slot (on the PCIe link, or sent by a switch datapath
              still on its cached old buckets), which they forward before they answer drained
    resume  - (held) release the staying instances: each processes its queue in order, then goes on (also
              when the drain timed out, or the set failed: holding longer would only drop)
    stop    - stop the leaving instances' processes
    release - their ports and namespaces (done with stop by the runtime)

Abort rules (nothing half-done): a failed start/ready stops every instance this call started and leaves the
mapping untouched; a failed `set` leaves the previous instance set serving (OneSwitch changes nothing on an
error) and stops what was started; a new instance dead right after the set maps the vport back to the old
set. A scale-in is committed once its `set` succeeded: cleanup errors on leaving instances are reported.

Pure decisions (no I/O): `place_instances` (where new instances go), `choose_leaving` (which ones go).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from domain.model import HOST, Instance, Nf
from migration.protocol import (
    MigrationConfig,
    MigrationRuntime,
    StepEvent,
    drain_old,
    oneswitch_drain_ms,
    step_recorder,
    stop_all,
)


class ScaleMapper(Protocol):
    def set_instances(
        self,
        vport: int,
        instances: list[tuple[str, int]],
        drain_ms: int | None = None,
        weights: list[int] | None = None,
    ) -> float:
        """Spread `vport` over these (switch, port)s, make-before-break; returns the OneSwitch time in ms. A
        removed instance's port stays ingress-only for `drain_ms`. `weights`: the instances' select bucket
        weights (None: all equal)."""


class ScaleError(Exception):
    """The resize was aborted at `step`; the previous instance set still serves the vport."""

    def __init__(self, step: str, message: str, result: ScaleResult, cause: Exception | None = None):
        super().__init__(f"scale aborted at {step}: {message}")
        self.step = step
        self.result = result
        self.cause = cause  # the mapper's or runtime's exception, if one


class NoRoom(Exception):
    """No location can take the requested instances (a 409 for the agent)."""


@dataclass
class ScaleResult:
    nf: str
    before: int
    after: int
    added: list[str] = field(default_factory=list)  # instance ids started
    removed: list[str] = field(default_factory=list)  # instance ids stopped
    steps: list[StepEvent] = field(default_factory=list)
    set_ms: float | None = None
    drained: bool | None = None
    aborted_at: str | None = None
    cleanup_errors: list[str] = field(default_factory=list)

    @property
    def duration_ms(self) -> float:
        return sum(s.ms for s in self.steps)

    def to_json(self) -> dict:
        return {
            "nf": self.nf, "before": self.before, "after": self.after, "added": self.added,
            "removed": self.removed, "duration_ms": round(self.duration_ms, 2), "set_ms": self.set_ms,
            "drained": self.drained, "aborted_at": self.aborted_at, "cleanup_errors": self.cleanup_errors,
            "steps": [s.to_json() for s in self.steps],
        }  # fmt: skip


# -- pure decisions -----------------------------------------------------------------------------------------
def place_instances(
    k: int,
    locations: list[str],
    snic_free: dict[str, float],
    nic_cost: dict[str, float],
    pin: str | None = None,
) -> list[str]:
    """Where `k` new instances go (pure).

    UNO's objective is host CPU: an instance goes to the sNIC with the most free capacity that can still
    carry one more instance's share (`nic_cost[snic]` units: b_nic + the NF's r_nic x its load / new count), else
    to the host (no capacity bound in the model). A pinned NF only scales at its pin; NoRoom when that is
    an sNIC without room. `snic_free` is not modified.
    """
    free = dict(snic_free)
    out = []
    for _ in range(k):
        cands = [pin] if pin else [loc for loc in locations if loc != HOST] + [HOST]
        pick = None
        for loc in sorted(cands, key=lambda c: (c == HOST, -free.get(c, 0.0), c)):
            if loc == HOST:
                pick = loc
                break
            cost = nic_cost.get(loc, 0.0)
            if loc in free and free[loc] + 1e-9 >= cost:
                free[loc] -= cost
                pick = loc
                break
        if pick is None:
            raise NoRoom(f"no room for another instance at {pin or 'any location'}")
        out.append(pick)
    return out


def choose_leaving(instances: list[Instance], n: int) -> list[Instance]:
    """Which instances leave when scaling to `n` (pure): failed ones first, then the newest; the first
    (oldest) instance stays, so the NF's location does not change on a scale-in."""
    if n >= len(instances):
        return []
    k = len(instances) - n
    order = sorted(
        range(1, len(instances)), key=lambda i: (instances[i].state != "failed", -i)
    )  # failed first, then newest
    return [instances[i] for i in sorted(order[:k])]


def per_instance_cost(r_nic: float, load_gbps: float, n: int, b_nic: float = 0.0) -> float:
    """sNIC units one of `n` instances costs when the NF's load is spread evenly (pure): its base cost
    `b_nic` plus its share of r_nic x load."""
    return b_nic + r_nic * load_gbps / max(1, n)


# -- the state machine ------------------------------------------------------------------------------------
def _ports(insts: list[Instance]) -> list[tuple[str, int]]:
    return [(i.switch, i.ofport) for i in insts]


def held_scale_out(nf: Nf, runtime: object, cfg: MigrationConfig) -> bool:
    """Whether a scale-out of `nf` holds the new instances' packets until the old ones flushed (pure): its type
    is moved buffered and the runtime can release an instance and ask one to flush."""
    return (
        cfg.buffer_packets > 0
        and nf.type in cfg.buffer_types
        and cfg.drain_quiet_ms is not None
        and hasattr(runtime, "release")
        and hasattr(runtime, "drain")
    )


def held_scale_in(nf: Nf, runtime: object, cfg: MigrationConfig) -> bool:
    """Whether a scale-in of `nf` holds the staying instances' packets until the leaving ones drained (pure):
    as `held_scale_out`, scale-ins held by the config, and the runtime can tell a running instance to hold."""
    return cfg.hold_scale_in and held_scale_out(nf, runtime, cfg) and hasattr(runtime, "hold")


def hold_all(instances: list[Instance], runtime: object, buffer: int) -> tuple[list[Instance], str]:
    """Tell each instance at once to hold (`runtime.hold`): the ones that hold now, and one detail line."""

    def ask(i: Instance) -> str | None:
        try:
            runtime.hold(i, buffer)  # type: ignore[attr-defined]
            return None
        except Exception as exc:  # noqa: BLE001 - reported; that instance goes on unheld
            return f"{i.id}: {exc}"

    with ThreadPoolExecutor(max(1, len(instances))) as pool:
        errors = list(pool.map(ask, instances))
    holding = [i for i, e in zip(instances, errors, strict=True) if e is None]
    return holding, "; ".join(e for e in errors if e) or ",".join(i.id for i in holding)


def release_all(instances: list[Instance], runtime: object) -> list[str]:
    """Release each instance (`runtime.release`), at once, asking a refusing one once more (one left holding
    queues its flows until its buffer overflows): the errors, one per instance that refused twice."""

    def ask(i: Instance) -> str | None:
        for _ in range(2):
            try:
                runtime.release(i)  # type: ignore[attr-defined]
                return None
            except Exception as exc:  # noqa: BLE001 - reported
                err = exc
        return f"{i.id} not released: {err}"

    with ThreadPoolExecutor(max(1, len(instances))) as pool:
        return [e for e in pool.map(ask, instances) if e]


def flush_all(instances: list[Instance], runtime: MigrationRuntime, cfg: MigrationConfig) -> tuple[bool, str]:
    """Ask each instance at once to flush (`runtime.drain(..., flush=True)`): whether all answered flushed, and
    one detail line."""
    bound = max(cfg.drain_timeout_s, 0.1)
    quiet = cfg.drain_quiet_ms or 0

    def ask(o: Instance) -> dict | None:
        return runtime.drain(o, quiet, bound, flush=True)  # type: ignore[call-arg]

    with ThreadPoolExecutor(max(1, len(instances))) as pool:
        got = list(pool.map(ask, instances))
    parts = []
    for o, a in zip(instances, got, strict=True):
        if a is None:
            parts.append(f"{o.id}: cannot tell")
        else:
            parts.append(
                f"{o.id}: {'flushed' if a.get('drained') else 'NOT flushed'} in {a.get('waited_ms')} ms"
            )
    return all(a is not None and a.get("drained") is True for a in got), "; ".join(parts)


def scale_out(
    nf: Nf,
    current: list[Instance],
    new: list[Instance],
    runtime: MigrationRuntime,
    mapper: ScaleMapper,
    clock: Callable[[], float] = time.monotonic,
    on_event: Callable[[StepEvent], None] | None = None,
    cfg: MigrationConfig | None = None,
) -> ScaleResult:
    """Start the not yet started `new` instances and spread the vport over current + new; held (see the module
    doc), the new instances hold their packets until the current ones flushed.

    Raises ScaleError (current set serving, every new instance stopped) or returns the result; the caller
    updates nf.instances only after a successful return.
    """
    cfg = cfg or MigrationConfig()
    held = held_scale_out(nf, runtime, cfg)
    res = ScaleResult(nf.id, len(current), len(current) + len(new))
    started: list[Instance] = []

    record = step_recorder(res.steps, clock, on_event)

    def abort(step: str, t0: float, msg: str, cause: Exception | None = None) -> ScaleError:
        record(step, False, t0, msg)
        res.aborted_at = step
        res.cleanup_errors += stop_all(started, runtime)  # reported; `uno down` sweeps what remains
        return ScaleError(step, msg, res, cause)

    def back_to_old(msg: str) -> str:
        """Maps the vport back on the old instances after a failure past the set; `msg` plus how that went."""
        try:
            mapper.set_instances(nf.vport, _ports(current))
            return f"{msg}; vport {nf.vport} back on {len(current)} instance(s)"
        except Exception as exc:  # noqa: BLE001
            return f"{msg}; setting the old instances back FAILED: {exc}"

    t0 = clock()
    for inst in new:
        try:
            if held:
                runtime.start(nf, inst, buffer=cfg.buffer_packets)
            else:
                runtime.start(nf, inst)
        except Exception as exc:  # noqa: BLE001 - runtime.start removed what it created
            raise abort("start", t0, f"{inst.id}: {exc}", exc) from None
        started.append(inst)
    record("start", True, t0, ",".join(i.id for i in new) + (" (holding)" if held else ""))
    t0 = clock()
    sick = [i.id for i in new if not runtime.healthy(i)]
    if sick:
        raise abort("ready", t0, f"not healthy after start: {', '.join(sick)}")
    record("ready", True, t0)
    t0 = clock()
    try:
        res.set_ms = mapper.set_instances(nf.vport, _ports(current + new))
    except Exception as exc:  # noqa: BLE001 - OneSwitch refused: the old set is unchanged
        raise abort("set", t0, str(exc), exc) from None
    record("set", True, t0, " ".join(f"{s}:{p}" for s, p in _ports(current + new)))
    t0 = clock()
    dead = [i.id for i in new if not runtime.alive(i)]
    if dead:
        raise abort("verify", t0, back_to_old(f"died after the set: {', '.join(dead)}"))
    record("verify", True, t0)
    if held:
        t0 = clock()
        flushed, detail = flush_all(current, runtime, cfg)
        res.drained = flushed
        record("flush", True, t0, detail)
        t0 = clock()
        for inst in new:
            try:
                runtime.release(inst)  # type: ignore[attr-defined]
            except Exception as exc:  # noqa: BLE001 - a held instance that will not go on: back to the old set
                raise abort("resume", t0, back_to_old(f"{inst.id} not released: {exc}")) from None
        record("resume", True, t0, ",".join(i.id for i in new))
    res.added = [i.id for i in new]
    return res


def scale_in(
    nf: Nf,
    staying: list[Instance],
    leaving: list[Instance],
    runtime: MigrationRuntime,
    mapper: ScaleMapper,
    cfg: MigrationConfig | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_event: Callable[[StepEvent], None] | None = None,
) -> ScaleResult:
    """Take `leaving` out of the vport's set, drain them, stop and release them; held (see the module doc),
    the staying instances hold their packets until the leaving ones drained.

    ScaleError only at `set` (nothing changed, held instances released); after it the scale-in is committed.
    """
    cfg = cfg or MigrationConfig()
    res = ScaleResult(nf.id, len(staying) + len(leaving), len(staying))

    record = step_recorder(res.steps, clock, on_event)

    if not staying:
        raise ValueError("scale_in needs at least one staying instance")
    holding: list[Instance] = []
    if held_scale_in(nf, runtime, cfg):
        t0 = clock()
        holding, detail = hold_all(staying, runtime, cfg.buffer_packets)
        if len(holding) < len(staying):
            # One that cannot hold would let the moved flows through at once: nobody holds.
            errors = release_all(holding, runtime)
            holding = []
            detail = "; ".join([detail, *errors, "going on unheld"])
        record("hold", bool(holding), t0, detail)

    def resume() -> None:
        if holding:
            t0 = clock()
            errors = release_all(holding, runtime)
            res.cleanup_errors += errors
            record("resume", not errors, t0, "; ".join(errors) or ",".join(i.id for i in holding))

    t0 = clock()
    try:
        res.set_ms = mapper.set_instances(
            nf.vport, _ports(staying), drain_ms=oneswitch_drain_ms(cfg.drain_timeout_s)
        )
    except Exception as exc:  # noqa: BLE001
        record("set", False, t0, str(exc))
        res.aborted_at = "set"
        resume()
        raise ScaleError("set", str(exc), res, exc) from None
    record("set", True, t0, " ".join(f"{s}:{p}" for s, p in _ports(staying)))
    t0 = clock()
    out = drain_old(leaving, runtime, cfg, clock, sleep)
    res.drained = out.drained
    record("drain", True, t0, out.detail)
    resume()
    t0 = clock()
    res.cleanup_errors += stop_all(leaving, runtime)
    record("stop", not res.cleanup_errors, t0, "; ".join(res.cleanup_errors))
    t0 = clock()
    record("release", not res.cleanup_errors, t0, "ports and namespaces removed with stop")
    res.removed = [o.id for o in leaving]
    return res


def scale(
    nf: Nf,
    n: int,
    runtime: MigrationRuntime,
    mapper: ScaleMapper,
    new_instances: Callable[[int], list[Instance]],
    cfg: MigrationConfig | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    on_event: Callable[[StepEvent], None] | None = None,
) -> tuple[ScaleResult, list[Instance]]:
    """Resize `nf` to `n` instances: out (`new_instances(k)` allocates k not yet started instances) or in
    (`choose_leaving`). Returns the result and the new instance list (the caller stores it); ScaleError
    leaves `nf.instances` serving as they were."""
    cur = list(nf.instances)
    if n < 1:
        raise ValueError("n must be >= 1")
    if n > len(cur):
        new = new_instances(n - len(cur))
        return scale_out(nf, cur, new, runtime, mapper, clock, on_event, cfg), cur + new
    leaving = choose_leaving(cur, n)
    if not leaving:
        return ScaleResult(nf.id, len(cur), len(cur)), cur
    staying = [i for i in cur if i not in leaving]
    return scale_in(nf, staying, leaving, runtime, mapper, cfg, clock, sleep, on_event), staying
