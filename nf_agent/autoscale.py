"""Autoscaling an NF's instance count from its measured load (the decision is pure; the clock is passed in).

An NF created or patched with `{"autoscale": {"min", "max", "target_util"}}` is resized by the agent's loop
between `min` and `max` instances. Utilization of one instance = the CPU its share of the NF's measured load
costs (the NF type's profile: `b_host + r_host x load / n` host cores, an instance being one process that
can use at most one core). Hysteresis keeps it from flapping:

- out as soon as the utilization stayed above `target_util x (1 + band)` for `out_after_s` (short: a load
  step must be served quickly), to the count that brings it back to `target_util`, at most `max` and what
  the placement has room for;
- in by ONE instance only when, with one instance fewer, the utilization would stay below `target_util x
  (1 - band)`, and that held for `in_after_s` (long: the measurement must not just be a dip);
- after any change, nothing for `cooldown_s` (the new instances' load must show in the counters first).

Scale-in drains (migration.scale): the leaving instances stop only after their flows went quiet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

AUTOSCALE_KEYS = {"min", "max", "target_util"}


@dataclass(frozen=True)
class AutoscalePolicy:
    """An NF's autoscaling bounds and target (validated by `nf_agent.validation.parse_autoscale`)."""

    min: int
    max: int
    target_util: float

    def to_json(self) -> dict:
        return {"min": self.min, "max": self.max, "target_util": self.target_util}


@dataclass(frozen=True)
class Hysteresis:
    band: float = 0.2  # relative: out above target x (1 + band), in below target x (1 - band)
    out_after_s: float = 2.0
    in_after_s: float = 30.0
    cooldown_s: float = 5.0


@dataclass
class ScaleState:
    """What the decision remembers per NF between rounds (the agent keeps one per NF, in memory)."""

    above_since: float | None = None
    below_since: float | None = None
    last_change: float | None = None


@dataclass(frozen=True)
class ScaleDecision:
    target: int  # the instance count to have; == current: no change
    why: str
    util: float | None = None

    def to_json(self) -> dict:
        return {"target": self.target, "why": self.why, "util": self.util}


@dataclass(frozen=True)
class LoadModel:
    """One instance's CPU cost from the NF's load: b_host + r_host x load / n (host cores)."""

    r_host: float
    b_host: float = 0.0

    def util(self, load_gbps: float, n: int) -> float:
        return self.b_host + self.r_host * load_gbps / max(n, 1)

    def needed(self, load_gbps: float, target: float) -> int:
        """The fewest instances that keep each at or under `target` (at least 1)."""
        per = target - self.b_host
        if per <= 0:
            return 1 if self.r_host * load_gbps <= 0 else 10**6
        return max(1, math.ceil(self.r_host * load_gbps / per - 1e-9))


@dataclass
class Inputs:
    policy: AutoscalePolicy
    n: int  # instances now
    load_gbps: float | None  # the NF's measured load (in + out), None before the first measurement
    model: LoadModel
    room: int  # how many more instances the placement can take now (host and sNICs)
    extra: dict = field(default_factory=dict)


def decide(inp: Inputs, state: ScaleState, now: float, hyst: Hysteresis = Hysteresis()) -> ScaleDecision:
    """The instance count `inp`'s NF should have at `now`; updates `state` (the timers of the hysteresis)."""
    p, n = inp.policy, inp.n
    if n < p.min:
        if inp.room <= 0:
            return ScaleDecision(n, "below min, no room on host or sNICs")
        return _change(state, now, min(p.min, n + inp.room), "below min", None)
    if n > p.max:
        return _change(state, now, p.max, "above max", None)
    if inp.load_gbps is None:
        return ScaleDecision(n, "no measurement yet")
    util = inp.model.util(inp.load_gbps, n)
    hi, lo = p.target_util * (1 + hyst.band), p.target_util * (1 - hyst.band)
    state.above_since = (state.above_since if state.above_since is not None else now) if util > hi else None
    util_fewer = inp.model.util(inp.load_gbps, n - 1) if n > 1 else math.inf
    state.below_since = (
        (state.below_since if state.below_since is not None else now) if util_fewer < lo else None
    )
    if state.last_change is not None and now - state.last_change < hyst.cooldown_s:
        return ScaleDecision(n, "cooling down after the last change", util)
    if state.above_since is not None and now - state.above_since >= hyst.out_after_s:
        if n >= p.max:
            return ScaleDecision(n, "overloaded at max", util)
        if inp.room <= 0:
            return ScaleDecision(n, "overloaded, no room on host or sNICs", util)
        want = min(p.max, n + inp.room, max(n + 1, inp.model.needed(inp.load_gbps, p.target_util)))
        return _change(state, now, want, f"utilization {util:.3g} > {hi:.3g}", util)
    if state.below_since is not None and now - state.below_since >= hyst.in_after_s and n > p.min:
        return _change(state, now, n - 1, f"utilization with {n - 1} instances under {lo:.3g}", util)
    return ScaleDecision(n, "within the band", util)


def _change(state: ScaleState, now: float, target: int, why: str, util: float | None) -> ScaleDecision:
    state.above_since = state.below_since = None
    state.last_change = now
    return ScaleDecision(target, why, util)
