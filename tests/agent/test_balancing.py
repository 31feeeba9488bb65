"""The balancing job on the agent's fakes (nf_agent.balancing), the order of a held weight change
(migration.reweight) and the `balance` switch's validation. The real thing: tests/oneswitch/test_weights.py
(real OVS) and bench/ops `--part spread` (the emulated host)."""

from __future__ import annotations

import pytest

from domain.errors import ValidationError
from domain.model import Instance, Nf
from migration.protocol import MigrationConfig
from migration.reweight import reweight
from nf_agent.validation import NfRequest, parse_nf, parse_nf_update


def scaled(tmp_path, balance: bool = True):
    from testkit.fakes import make_agent

    agent, rt, mp, clock = make_agent(tmp_path)
    agent.create_nf(NfRequest("fw", "firewall", {}, 0.0, None, None, None, "host", balance=balance))
    agent.scale("fw", 3)
    return agent, rt, mp, clock


def feed(agent, rt, clock, per_round: list[int], rounds: int, dt: float = 1.0) -> list:
    """`rounds` rounds of `dt` s, instance i receiving per_round[i] packets in each; the weight changes made."""
    out = []
    for _ in range(rounds):
        clock.t += dt
        for inst, n in zip(agent.state.nfs["fw"].instances, per_round, strict=True):
            rt.nf_rx[inst.id] = rt.nf_rx.get(inst.id, 0) + n
        out += list(agent.balance().values())
    return out


def test_a_starved_instance_gets_a_higher_weight_after_the_cooldown_then_nothing_while_it_cools(tmp_path):
    agent, rt, mp, clock = scaled(tmp_path)
    vport = agent.state.nfs["fw"].vport
    assert mp.bucket_weights[vport] is None  # the scale-out: equal weights
    changes = feed(agent, rt, clock, [40, 220, 300], 3)  # the first round only sees the set; cooldown 3 s
    assert changes == []
    changes = feed(agent, rt, clock, [40, 220, 300], 1)
    assert len(changes) == 1 and changes[0].gainer == 0
    w0 = mp.bucket_weights[vport]
    assert 1000 < w0[0] <= 1250 and w0[1:] == [1000, 1000]  # equal weights scaled to the base, then one step
    assert mp.sets[vport] == [(i.switch, i.ofport) for i in agent.state.nfs["fw"].instances]
    assert agent.state.history[-1]["event"] == "nf-balance"
    assert feed(agent, rt, clock, [40, 220, 300], 2) == []  # cooling down
    assert len(feed(agent, rt, clock, [40, 220, 300], 1)) == 1
    w1 = mp.bucket_weights[vport]
    assert w0[0] < w1[0] <= w0[0] * 1.25 + 1 and w1[1:] == [1000, 1000]  # from the weights in force
    assert feed(agent, rt, clock, [180, 190, 190], 10) == []  # balanced


def test_a_scale_change_resets_the_weights_and_balance_false_turns_it_off(tmp_path):
    agent, rt, mp, clock = scaled(tmp_path)
    vport = agent.state.nfs["fw"].vport
    feed(agent, rt, clock, [0, 300, 300], 4)
    assert mp.bucket_weights[vport] is not None
    agent.scale("fw", 2)
    assert mp.bucket_weights[vport] is None  # OneSwitch: equal again
    assert agent.balancer.weights_of(agent.state.nfs["fw"]) == [1, 1]
    assert feed(agent, rt, clock, [0, 300], 3) == []  # the new set cools down first
    assert len(feed(agent, rt, clock, [0, 300], 1)) == 1
    agent.update_nf("fw", {"balance": False})
    assert agent.state.nfs["fw"].public()["balance"] is False
    assert feed(agent, rt, clock, [0, 300], 10) == []


class Recording:
    """A runtime that records the calls of a held weight change (hold / drain / release)."""

    def __init__(self):
        self.calls: list[tuple[str, str]] = []

    def hold(self, inst, buffer, timeout=10.0):
        self.calls.append(("hold", inst.id))

    def release(self, inst, timeout=60.0):
        self.calls.append(("release", inst.id))

    def drain(self, inst, quiet_ms, timeout_s, flush=False):
        self.calls.append(("flush" if flush else "drain", inst.id))
        return {"drained": True, "waited_ms": 1}


def test_a_held_weight_change_holds_the_gainer_until_the_others_flushed():
    insts = [Instance(f"i{n}", "host", "host", 200 + n, "ns", "in", "p") for n in range(3)]
    nf = Nf("fw", "firewall", {}, 7, 0.0, None, None, instances=insts)
    rt, order = Recording(), []

    class Mapper:
        def set_instances(self, vport, instances, drain_ms=None, weights=None):
            rt.calls.append(("set", ",".join(map(str, weights))))
            order.append((vport, instances))
            return 1.0

    res = reweight(nf, [1000, 1300, 1000], [insts[1]], rt, Mapper(), MigrationConfig())
    assert res.held and res.flushed
    assert rt.calls[0] == ("hold", "i1") and rt.calls[1] == ("set", "1000,1300,1000")
    assert sorted(rt.calls[2:4]) == [("flush", "i0"), ("flush", "i2")]
    assert rt.calls[4] == ("release", "i1")
    assert order == [(7, [("host", 200), ("host", 201), ("host", 202)])]

    class Refusing(Mapper):
        def set_instances(self, vport, instances, drain_ms=None, weights=None):
            raise RuntimeError("OneSwitch 409")

    rt.calls.clear()
    with pytest.raises(RuntimeError):
        reweight(nf, [1000, 1300, 1000], [insts[1]], rt, Refusing(), MigrationConfig())
    assert rt.calls == [("hold", "i1"), ("release", "i1")]  # released, nothing flushed


@pytest.mark.parametrize("bad", ["yes", 1, None, 0.0, {}])
def test_balance_must_be_a_boolean_on_create_and_patch(bad):
    with pytest.raises(ValidationError) as e:
        parse_nf({"type": "firewall", "balance": bad}, ["host", "snic0"])
    assert e.value.field == "balance"
    with pytest.raises(ValidationError) as e:
        parse_nf_update({"balance": bad})
    assert e.value.field == "balance"
    assert parse_nf({"type": "firewall"}, ["host"]).balance is True
    assert parse_nf_update({"balance": False}) == {"balance": False}


def test_at_first_sight_the_weights_are_read_from_oneswitch(tmp_path):
    """After an agent restart the balancer has no memory: it steps from the weights OneSwitch holds, not
    from equal ones (which would move flows back and forth)."""
    agent, rt, mp, clock = scaled(tmp_path)
    nf = agent.state.nfs["fw"]
    mp.set_instances(nf.vport, mp.sets[nf.vport], weights=[1000, 1000, 400])
    assert len(feed(agent, rt, clock, [200, 300, 10], 5)) == 1
    w = mp.bucket_weights[nf.vport]
    assert w[:2] == [2000, 2000] and 800 < w[2] <= 1000  # x2 (to the base), then the third one up


def test_a_counter_that_went_back_skips_the_round(tmp_path):
    """An instance restarted in place starts its counter at 0: that window is no measure of the spread."""
    agent, rt, mp, clock = scaled(tmp_path)
    feed(agent, rt, clock, [200, 200, 200], 5)  # past the cooldown, balanced
    first = agent.state.nfs["fw"].instances[0].id
    rt.nf_rx[first] = 0  # restarted
    assert feed(agent, rt, clock, [0, 300, 300], 1) == []
    assert agent.balancer.last["fw"].why == "balanced"  # the last decision made, not one on that window
    assert len(feed(agent, rt, clock, [0, 300, 300], 1)) == 1  # the next window counts


def test_the_load_is_measured_over_a_window_so_one_odd_round_changes_nothing(tmp_path):
    """Rounds of 0.5 s, the window 2 s: one round in which an instance counted nothing (a throttled instance
    counts its ring when it runs) is a quarter of the window, not the whole measure."""
    agent, rt, mp, clock = scaled(tmp_path)
    assert feed(agent, rt, clock, [200, 200, 200], 12, dt=0.5) == []
    assert feed(agent, rt, clock, [0, 300, 300], 1, dt=0.5) == []
    assert agent.balancer.last["fw"].why == "balanced"
    assert len(feed(agent, rt, clock, [0, 300, 300], 3, dt=0.5)) == 1  # it goes on: then it is the load
