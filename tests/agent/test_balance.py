"""The balancer's decision (nf_agent.balance, pure: the clock is a number passed in): hysteresis, bounds, and
convergence on a model of OVS's rendezvous pick (the highest `(hash & 0xffff) x weight` wins)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nf_agent.balance import MAX_WEIGHT, BalancePolicy, BalanceState, decide, even, scaled_up

POL = BalancePolicy(threshold=0.75, min_packets=100, cooldown_s=3.0, max_step=0.25, base=1000)
IDS = ("a", "b", "c")


def primed(ids=IDS, t: float = 0.0) -> BalanceState:
    """A state that has seen `ids` long enough ago that no cooldown is running."""
    return BalanceState(instances=ids, last_change=t - 100.0)


def test_a_new_instance_set_resets_and_cools_down():
    st_ = BalanceState()
    d = decide(IDS, [0, 100, 200], even(3), st_, 10.0, POL)
    assert d.weights is None and "instance set" in d.why
    assert decide(IDS, [0, 100, 200], even(3), st_, 12.9, POL).weights is None  # cooldown
    d = decide(IDS, [0, 100, 200], even(3), st_, 13.0, POL)
    assert d.weights == [1250, 1000, 1000] and d.gainer == 0


def test_too_few_packets_or_a_fair_share_changes_nothing():
    assert decide(IDS, [0, 10, 80], even(3), primed(), 0.0, POL).weights is None
    d = decide(IDS, [26, 37, 37], even(3), primed(), 0.0, POL)
    assert d.weights is None and d.why == "balanced"  # 0.26 >= 0.25


def test_the_step_shrinks_as_the_share_nears_a_fair_one_and_cools_down_after():
    s = primed()
    d = decide(IDS, [20, 40, 40], [1000, 1000, 1000], s, 0.0, POL)  # share 0.2: deficit 0.4 -> step 10 %
    assert d.weights == [1100, 1000, 1000] and d.gainer == 0
    assert decide(IDS, [20, 40, 40], d.weights, s, 1.0, POL).weights is None  # cooling down


def test_equal_small_weights_are_scaled_by_one_integer_first():
    assert scaled_up([1, 1, 1], 1000) == [1000, 1000, 1000]
    assert scaled_up([3, 5], 1000) == [999, 1665]  # x333: the ratio stays
    assert scaled_up([1000, 60000], 1000) == [1000, 60000]
    assert scaled_up([1, 40000], 1000) == [1, 40000]  # no room at the top


def test_at_the_largest_weight_it_stops():
    d = decide(IDS, [0, 50, 50], [MAX_WEIGHT, 100, 100], primed(), 0.0, POL)
    assert d.weights is None and "largest" in d.why


def test_wrong_lengths_are_refused():
    with pytest.raises(ValueError):
        decide(IDS, [1, 2], even(3), primed(), 0.0, POL)


@settings(max_examples=300, deadline=None)
@given(
    k=st.integers(2, 6),
    data=st.data(),
)
def test_never_leaves_the_bounds_and_raises_only_the_smallest_share(k, data):
    ids = tuple(f"i{n}" for n in range(k))
    deltas = data.draw(st.lists(st.integers(0, 10**6), min_size=k, max_size=k))
    weights = data.draw(st.lists(st.integers(1, MAX_WEIGHT), min_size=k, max_size=k))
    d = decide(ids, deltas, weights, primed(ids), 0.0, POL)
    if d.weights is None:
        return
    assert all(1 <= w <= MAX_WEIGHT for w in d.weights)
    f = d.weights[(d.gainer + 1) % k] // weights[(d.gainer + 1) % k]
    for i in range(k):  # every weight but the gainer's scaled by one integer; the gainer's by more, bounded
        if i != d.gainer:
            assert d.weights[i] == weights[i] * f
    g = d.gainer
    assert weights[g] * f < d.weights[g] <= max(weights[g] * f + 1, weights[g] * f * (1 + POL.max_step) + 1)
    assert deltas[g] == min(deltas)


def rendezvous(scores: list[list[int]], weights: list[int]) -> list[int]:
    """OVS's pick per flow (ofproto-dpif-xlate.c group_best_live_bucket): the last bucket with the highest
    (hash & 0xffff) x weight."""
    out = []
    for s in scores:
        best, bi = -1, 0
        for i, (h, w) in enumerate(zip(s, weights, strict=True)):
            if h * w >= best:
                best, bi = h * w, i
        out.append(bi)
    return out


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**9), k=st.integers(2, 3))
def test_converges_on_a_fixed_assignment_model(seed, k):
    """30 flows of equal rate, each with a fixed random bucket hash per bucket: every flow set ends with every
    instance at >= threshold / k of the load, and each change moves flows only to the instance it raised.
    (k = 4 is left out: over 2,000 seeds one climbed to the largest weight before it balanced, where the
    balancer stops; 30 flows leave little room over 4 instances.)"""
    rng = random.Random(seed)
    ids = tuple(f"i{n}" for n in range(k))
    scores = [[rng.randrange(0x10000) for _ in range(k)] for _ in range(30)]
    weights, st_, t = even(k), primed(ids), 0.0
    pick = rendezvous(scores, weights)
    for _ in range(200):
        deltas = [100 * pick.count(i) for i in range(k)]
        d = decide(ids, deltas, weights, st_, t, POL)
        t += POL.cooldown_s
        if d.weights is None:
            if d.why == "balanced":
                break
            assert d.why == "cooling down" or "largest" not in d.why, d.why
            continue
        new = rendezvous(scores, d.weights)
        assert all(b == a or b == d.gainer for a, b in zip(pick, new, strict=True)), "a flow moved elsewhere"
        weights, pick = d.weights, new
    assert min(pick.count(i) for i in range(k)) / 30 >= POL.threshold / k, (weights, pick)
