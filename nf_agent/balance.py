"""Balancing a scaled-out NF's instances by their select bucket weights (the decision is pure; the clock is
passed in).

OneSwitch spreads a scaled vport's flows by a per-flow hash (OVS's select group, `selection_method=hash`),
which behaves as a uniform random pick per flow: for one given set of flows it can leave an instance with
little of the load (30 flows over 3 instances: 4 / 11 / 15 in `uno bench ops --part spread`). OVS picks the
live bucket with the highest `(hash(bucket id, flow hash) & 0xffff) x weight` (rendezvous hashing), so
raising ONE bucket's weight only moves flows TO that bucket, from any other; nothing else moves. The balancer
raises the weight of the instance with the smallest share of the measured load, one bounded step per
change, until every instance has a fair share:

- it acts only when the smallest share is under `threshold / k` of the load over the last `window_s` (the
  agent's job keeps the rounds' readings), the window saw at least `min_packets` packets, and `cooldown_s` passed since the last weight change AND since the last change of
  the instance set (the new spread must show in the counters first);
- a step raises the smallest instance's weight by at most `max_step` (relative), less the closer its share is
  to the fair one: no single step swings the load far;
- equal small weights (OneSwitch's default 1, also right after every scale change) are first scaled to
  `base`: multiplying every weight by one integer keeps every flow where it is and leaves room for fine steps;
- a weight never leaves 1..`max_weight`; at the top, nothing more is done (said in the decision's reason).

Only one instance gains flows per change, which is what makes the change order-preserving like a held
scale-out (migration/reweight.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_WEIGHT = 0xFFFF  # OpenFlow's 16-bit bucket weight


@dataclass(frozen=True)
class BalancePolicy:
    threshold: float = 0.75  # act when the smallest share < threshold / k
    min_packets: int = 300  # in the window, summed over the instances
    window_s: float = 2.0  # the agent measures the load over the rounds of the last window_s
    cooldown_s: float = 3.0  # after a weight change and after a change of the instance set
    max_step: float = 0.25  # the largest relative raise of one weight in one change
    min_step: float = 0.02  # the smallest (so a step always moves at least some flows' scores)
    base: int = 1000  # the weight equal weights are scaled to before the first step
    max_weight: int = MAX_WEIGHT


@dataclass
class BalanceState:
    """What the decision remembers per NF between rounds (the agent keeps one per NF, in memory)."""

    instances: tuple[str, ...] = ()  # the instance set the weights belong to
    last_change: float | None = None  # the last weight or instance-set change (clock)


@dataclass(frozen=True)
class BalanceDecision:
    weights: list[int] | None  # None: no change
    why: str
    gainer: int | None = None  # index of the instance that gains flows
    shares: list[float] | None = None

    def to_json(self) -> dict:
        return {"weights": self.weights, "why": self.why, "gainer": self.gainer, "shares": self.shares}


def even(k: int) -> list[int]:
    """The weights of k instances the hash alone spreads over (OneSwitch's default)."""
    return [1] * k


def decide(
    instances: tuple[str, ...],
    deltas: list[int],
    weights: list[int],
    state: BalanceState,
    now: float,
    policy: BalancePolicy,
) -> BalanceDecision:
    """New bucket weights for the NF's `instances` (ids, in bucket order) from the packets each received in
    the last window (`deltas`) and the weights in force (`weights`), or none (see the module doc). Updates
    `state` (the instance set seen, the time of a change it returns)."""
    k = len(instances)
    if len(deltas) != k or len(weights) != k:
        raise ValueError("one packet count and one weight per instance")
    if note_instances(state, instances, now):
        return BalanceDecision(None, "instance set changed: cooling down")
    if k < 2:
        return BalanceDecision(None, "one instance")
    if state.last_change is not None and now - state.last_change < policy.cooldown_s:
        return BalanceDecision(None, "cooling down")
    total = sum(max(0, d) for d in deltas)
    if total < policy.min_packets:
        return BalanceDecision(None, f"{total} packets in the window: too few to judge")
    shares = [max(0, d) / total for d in deltas]
    j = min(range(k), key=lambda i: (shares[i], i))
    if shares[j] >= policy.threshold / k:
        return BalanceDecision(None, "balanced", shares=shares)
    w = scaled_up(weights, policy.base, policy.max_weight)
    if w[j] >= policy.max_weight:
        return BalanceDecision(None, f"instance {j} at the largest weight", shares=shares)
    deficit = 1.0 - shares[j] * k  # 1: no load at all; 0: a fair share
    step = max(policy.min_step, min(policy.max_step, policy.max_step * deficit))
    w[j] = min(policy.max_weight, max(w[j] + 1, math.ceil(w[j] * (1.0 + step))))
    state.last_change = now
    why = f"instance {j} had {shares[j]:.3f} of the load (under {policy.threshold / k:.3f}): weight up {step:.0%}"
    return BalanceDecision(w, why, gainer=j, shares=shares)


def note_instances(state: BalanceState, instances: tuple[str, ...], now: float) -> bool:
    """Records `instances` as the set in force; True (and the cooldown starts at `now`) if it changed."""
    if instances == state.instances:
        return False
    state.instances, state.last_change = instances, now
    return True


def scaled_up(weights: list[int], base: int, max_weight: int = MAX_WEIGHT) -> list[int]:
    """`weights` times the largest integer that brings the smallest to at most `base` and the largest to at
    most `max_weight` (at least 1: unchanged). The same factor on every bucket keeps every flow's bucket."""
    f = max(1, min(base // max(1, min(weights)), max_weight // max(1, max(weights))))
    return [x * f for x in weights]
