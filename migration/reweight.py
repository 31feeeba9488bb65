"""Changing a scaled-out NF's select bucket weights without reordering a flow (nf_agent.balance decides them).

A weight change moves flows between instances like a resize does. The balancer raises one instance's weight
per change, and with OVS's rendezvous pick that moves flows only TO that instance (the gainer); so it is held
the way a held scale-out's new instances are (migration/scale.py):

    hold    - the gainer queues what it receives from now on (`POST /hold`), in arrival order
    set     - OneSwitch: the new weights (a group modify in place; no dispatch change, no drain)
    flush   - until each other instance has sent everything that reached it before its quiet window ended
              (`POST /drain?flush=1`, all at once, bounded by `drain_timeout_s`): the earlier packets of the
              flows that moved are out before the gainer processes their later ones
    resume  - release the gainer: it processes its queue in order, then goes on

Unheld (the NF's type is not moved buffered, or the runtime cannot hold a running instance): only `set`. A
refused hold: unheld. A failed set: released, the old weights stay (OneSwitch changes nothing on an error).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from domain.model import Instance, Nf
from migration.protocol import MigrationConfig, MigrationRuntime, StepEvent, step_recorder
from migration.scale import ScaleMapper, flush_all, held_scale_out, hold_all, release_all


@dataclass
class ReweightResult:
    nf: str
    weights: list[int]
    held: bool = False
    flushed: bool | None = None
    set_ms: float | None = None
    steps: list[StepEvent] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "nf": self.nf,
            "weights": self.weights,
            "held": self.held,
            "flushed": self.flushed,
            "set_ms": self.set_ms,
            "steps": [s.to_json() for s in self.steps],
        }


def held_reweight(nf: Nf, runtime: object, cfg: MigrationConfig) -> bool:
    """Whether a weight change of `nf` holds its gainers (pure): as a held scale-out, and the runtime can tell
    a running instance to hold."""
    return held_scale_out(nf, runtime, cfg) and hasattr(runtime, "hold")


def reweight(
    nf: Nf,
    weights: list[int],
    gainers: list[Instance],
    runtime: MigrationRuntime,
    mapper: ScaleMapper,
    cfg: MigrationConfig | None = None,
    clock: Callable[[], float] = time.monotonic,
    on_event: Callable[[StepEvent], None] | None = None,
) -> ReweightResult:
    """Give `nf`'s instances (in bucket order) the bucket `weights`; `gainers` are the instances that gain
    flows by it (the rest only lose), held as the module doc says. Raises what `mapper.set_instances` raised
    (the old weights stay)."""
    cfg = cfg or MigrationConfig()
    res = ReweightResult(nf.id, list(weights))
    record = step_recorder(res.steps, clock, on_event)
    others = [i for i in nf.instances if i not in gainers]
    holding: list[Instance] = []
    if gainers and others and held_reweight(nf, runtime, cfg):
        t0 = clock()
        holding, detail = hold_all(gainers, runtime, cfg.buffer_packets)
        if len(holding) < len(gainers):
            release_all(holding, runtime)
            holding = []
        record("hold", bool(holding), t0, detail)
    res.held = bool(holding)
    t0 = clock()
    try:
        res.set_ms = mapper.set_instances(
            nf.vport, [(i.switch, i.ofport) for i in nf.instances], weights=weights
        )
    except Exception as exc:
        record("set", False, t0, str(exc))
        if holding:
            release_all(holding, runtime)
        raise
    record("set", True, t0, ",".join(map(str, weights)))
    if holding:
        t0 = clock()
        res.flushed, detail = flush_all(others, runtime, cfg)
        record("flush", True, t0, detail)
        t0 = clock()
        errors = release_all(holding, runtime)
        record("resume", not errors, t0, "; ".join(errors) or ",".join(i.id for i in holding))
    return res
