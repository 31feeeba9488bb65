"""Autoscaling's decision (nf_agent.autoscale, pure: the clock is a number passed in) and the REST validation
of `autoscale` on create and PATCH."""

from __future__ import annotations

import pytest

from domain.errors import ValidationError
from nf_agent.autoscale import AutoscalePolicy, Hysteresis, Inputs, LoadModel, ScaleState, decide
from nf_agent.validation import parse_autoscale, parse_nf, parse_nf_update

POL = AutoscalePolicy(min=1, max=4, target_util=0.5)
MODEL = LoadModel(r_host=1.0)  # one core per Gbit/s: util = load / n
H = Hysteresis(band=0.2, out_after_s=2.0, in_after_s=30.0, cooldown_s=5.0)


def run(loads: list[tuple[float, float]], n: int = 1, room: int = 8, pol: AutoscalePolicy = POL):
    """Feeds (t, load) samples, applying each change; returns [(t, n after)] for the changes."""
    st, out = ScaleState(), []
    for t, load in loads:
        d = decide(Inputs(pol, n, load, MODEL, room), st, t, H)
        if d.target != n:
            n = d.target
            out.append((t, n))
    return out


def test_a_load_step_scales_out_after_the_out_delay_to_the_needed_count():
    # 0.4 Gbit/s on one instance: within the band; at t=10 the load triples (1.2): needs 3 at 0.5 each
    loads = [(t, 0.4 if t < 10 else 1.2) for t in range(0, 20)]
    assert run(loads) == [(12, 3)]


def test_a_short_spike_does_not_scale():
    loads = [(t * 0.5, 1.2 if t == 4 else 0.4) for t in range(40)]
    assert run(loads) == []


def test_scale_in_one_at_a_time_after_the_in_delay_and_cooldown():
    loads = [(float(t), 0.2) for t in range(0, 100)]
    # 3 instances at 0.2 Gbit/s: 2 would be at 0.1 < 0.4: in after 30 s; then again 30 s later
    assert run(loads, n=3) == [(30.0, 2), (61.0, 1)]


def test_no_flapping_around_the_target():
    # oscillating just inside the band on both sides never changes the count
    loads = [(float(t), 0.55 if t % 2 else 0.45) for t in range(200)]
    assert run(loads, n=1) == []


def test_bounds_and_room():
    # capped by room: 10 Gbit/s needs 20 instances, room for 1 more
    st = ScaleState()
    decide(Inputs(POL, 1, 10.0, MODEL, 1), st, 0.0, H)
    assert decide(Inputs(POL, 1, 10.0, MODEL, 1), st, 2.0, H).target == 2
    # capped by max
    st = ScaleState()
    decide(Inputs(POL, 1, 10.0, MODEL, 8), st, 0.0, H)
    assert decide(Inputs(POL, 1, 10.0, MODEL, 8), st, 2.0, H).target == 4
    # no room: stays, says why
    st = ScaleState()
    decide(Inputs(POL, 1, 10.0, MODEL, 0), st, 0.0, H)
    d = decide(Inputs(POL, 1, 10.0, MODEL, 0), st, 2.0, H)
    assert d.target == 1 and "no room" in d.why
    # below min / above max are fixed at once, without a measurement
    two = AutoscalePolicy(min=2, max=3, target_util=0.5)
    assert decide(Inputs(two, 1, None, MODEL, 4), ScaleState(), 0.0, H).target == 2
    assert decide(Inputs(two, 5, None, MODEL, 4), ScaleState(), 0.0, H).target == 3
    assert decide(Inputs(two, 2, None, MODEL, 4), ScaleState(), 0.0, H).why == "no measurement yet"


def test_never_below_min_on_idle():
    two = AutoscalePolicy(min=2, max=3, target_util=0.5)
    assert run([(float(t), 0.0) for t in range(200)], n=2, pol=two) == []


def test_load_model_counts_the_base_cost():
    m = LoadModel(r_host=0.5, b_host=0.1)
    assert m.util(2.0, 2) == pytest.approx(0.6)
    assert m.needed(2.0, 0.35) == 4  # 1.0 core of load over 0.25 per instance


@pytest.mark.parametrize(
    "body, field",
    [
        ({"min": 0, "max": 2, "target_util": 0.5}, "autoscale.min"),
        ({"min": 3, "max": 2, "target_util": 0.5}, "autoscale.min"),
        ({"min": 1, "max": 17, "target_util": 0.5}, "autoscale.max"),
        ({"min": 1, "max": 2, "target_util": 0}, "autoscale.target_util"),
        ({"min": 1, "max": 2, "target_util": 1.5}, "autoscale.target_util"),
        ({"min": 1, "max": 2, "target_util": "x"}, "autoscale.target_util"),
        ({"min": True, "max": 2, "target_util": 0.5}, "autoscale.min"),
        ({"min": 1, "max": 2}, "autoscale.target_util"),
        ({"min": 1, "max": 2, "target_util": 0.5, "step": 1}, "autoscale.step"),
        ([1, 2], "autoscale"),
    ],
)
def test_bad_autoscale_names_the_field(body, field):
    with pytest.raises(ValidationError) as e:
        parse_nf({"type": "firewall", "autoscale": body}, ["host", "snic0"])
    assert e.value.field == field
    with pytest.raises(ValidationError) as e:
        parse_nf_update({"autoscale": body})
    assert e.value.field == field


def test_autoscale_on_create_and_patch():
    req = parse_nf({"type": "firewall", "autoscale": {"min": 1, "max": 3, "target_util": 0.6}}, ["host"])
    assert req.autoscale == {"min": 1, "max": 3, "target_util": 0.6}
    assert parse_nf({"type": "firewall"}, ["host"]).autoscale is None
    assert parse_nf_update({"autoscale": None}) == {"autoscale": None}
    assert parse_nf_update(
        {"expected": {"gbps": 1}, "autoscale": {"min": 2, "max": 2, "target_util": 1}}
    ) == {
        "expected_gbps": 1.0,
        "autoscale": {"min": 2, "max": 2, "target_util": 1.0},
    }
    with pytest.raises(ValidationError):
        parse_nf_update({})
    assert parse_autoscale(None) is None


def test_the_agents_loop_scales_out_then_in_from_the_measured_load(tmp_path):
    """The Autoscaler job with the fake runtime: port counters say 2 Gbit/s through the firewall (0.1 cores at
    r_host 0.05), the policy's target 0.04: after the out delay the job scales to 3; the load gone, it scales
    in one at a time, after the in delay."""
    from nf_agent.validation import NfRequest
    from testkit.fakes import make_agent

    G = 1e9 / 8  # bytes per Gbit
    agent, rt, _mp, clock = make_agent(tmp_path)
    agent.create_nf(NfRequest("fw", "firewall", {}, 0.0, None, None, None, "host", autoscale=None))
    agent.update_nf("fw", {"autoscale": {"min": 1, "max": 3, "target_util": 0.04}})
    assert agent.state.nfs["fw"].public()["autoscale"] == {"min": 1, "max": 3, "target_util": 0.04}
    sent = 0.0

    def tick(gbps: float) -> dict:
        nonlocal sent
        clock.t += 0.5
        sent += gbps * 0.5 * G / 2  # in + out = gbps
        for inst in agent.state.nfs["fw"].instances:
            share = sent / len(agent.state.nfs["fw"].instances)
            rt.counters[inst.switch][inst.port_if] = {"tx_bytes": int(share), "rx_bytes": int(share)}
        agent.sample()
        return agent.autoscale()

    changed = [(clock.t, d.target) for _ in range(12) for d in tick(2.0).values()]
    assert len(changed) == 1 and changed[0][1] == 3, changed
    assert len(agent.state.nfs["fw"].instances) == 3
    assert agent.state.history[-1]["event"] == "nf-autoscale"
    t_out = changed[0][0]
    changed = [(clock.t, d.target) for _ in range(200) for d in tick(0.0).values()]
    assert [n for _, n in changed] == [2, 1], changed
    assert changed[0][0] - t_out >= 30  # the in delay
    agent.update_nf("fw", {"autoscale": None})
    assert tick(5.0) == {}  # no policy: no change
