"""Scale-out/in: the pure decisions, the state machine's steps and abort paths, and the agent's REST/state
handling of `POST /v1/nfs/ID/scale` (fakes of runtime/mapper: logic only; real processes, OneSwitch's
select group and packets are in test_scale.py)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from domain.model import Instance, Nf
from migration.protocol import MigrationConfig, oneswitch_drain_ms
from migration.scale import (
    NoRoom,
    ScaleError,
    choose_leaving,
    per_instance_cost,
    place_instances,
    scale,
    scale_in,
    scale_out,
)
from nf_agent import store
from nf_agent.api import create_app
from testkit.fakes import Clock, FakeMapper, FakeRuntime, make_agent


def inst(seq: int, loc: str = "host", state: str = "running") -> Instance:
    i = Instance(f"fw-{seq}", loc, loc, 200 + seq, f"n-i{seq}", f"n-i{seq}", f"n-j{seq}")
    i.state = state
    return i


def bed(n: int = 1):
    rt, mp = FakeRuntime(), FakeMapper()
    nf = Nf(id="fw", type="firewall", config={}, vport=1000, expected_gbps=0.1, src=None, dst=None)
    nf.instances = [inst(k) for k in range(1, n + 1)]
    for i in nf.instances:
        rt.start(nf, i)
    mp.map(1000, "host", 201, "fw")
    if n > 1:
        mp.set_instances(1000, [(i.switch, i.ofport) for i in nf.instances])
    return rt, mp, nf


# -- pure decisions ---------------------------------------------------------------------------------------
def test_place_instances_prefers_snic_with_room_then_host():
    locs = ["host", "snic0", "snic1"]
    assert place_instances(3, locs, {"snic0": 10, "snic1": 4}, {"snic0": 4, "snic1": 4}) == [
        "snic0",
        "snic0",
        "snic1",
    ]
    assert place_instances(2, locs, {"snic0": 1, "snic1": 0}, {"snic0": 4, "snic1": 4}) == ["host", "host"]
    assert place_instances(2, ["host"], {}, {}) == ["host", "host"]
    free = {"snic0": 8.0}
    place_instances(2, locs, free, {"snic0": 4})
    assert free == {"snic0": 8.0}  # not modified


def test_place_instances_pinned():
    assert place_instances(2, ["host", "snic0"], {"snic0": 100}, {"snic0": 1}, pin="host") == ["host", "host"]
    assert place_instances(1, ["host", "snic0"], {"snic0": 5}, {"snic0": 5}, pin="snic0") == ["snic0"]
    with pytest.raises(NoRoom):
        place_instances(2, ["host", "snic0"], {"snic0": 5}, {"snic0": 5}, pin="snic0")


def test_per_instance_cost():
    assert per_instance_cost(2.0, 3.0, 2) == 3.0
    assert per_instance_cost(2.0, 3.0, 0) == 6.0
    assert per_instance_cost(2.0, 3.0, 2, b_nic=0.5) == 3.5  # every instance carries its base


def test_choose_leaving_failed_first_then_newest_first_stays():
    insts = [inst(1), inst(2), inst(3), inst(4)]
    assert [i.id for i in choose_leaving(insts, 1)] == ["fw-2", "fw-3", "fw-4"]
    assert [i.id for i in choose_leaving(insts, 3)] == ["fw-4"]
    insts[1].state = "failed"
    assert [i.id for i in choose_leaving(insts, 3)] == ["fw-2"]
    assert choose_leaving(insts, 4) == [] and choose_leaving(insts, 9) == []


# -- state machine --------------------------------------------------------------------------------------------
def test_scale_out_steps_and_set():
    rt, mp, nf = bed(1)
    new = [inst(2, "snic0"), inst(3)]
    events = []
    res = scale_out(nf, nf.instances, new, rt, mp, Clock(0.0), events.append)
    assert [e.step for e in res.steps] == ["start", "ready", "set", "verify"] and events == res.steps
    assert mp.sets[1000] == [("host", 201), ("snic0", 202), ("host", 203)]
    assert res.added == ["fw-2", "fw-3"] and res.set_ms == 2.5 and res.aborted_at is None
    assert set(rt.running) == {"fw-1", "fw-2", "fw-3"}


class HoldingRuntime(FakeRuntime):
    """A FakeRuntime whose instances can start buffering, flush and be released (the held scale-out)."""

    def __init__(self, refuse_release: bool = False, flushed: bool = True):
        super().__init__()
        self.calls: list[tuple] = []
        self.refuse_release, self.flushed = refuse_release, flushed

    def start(self, nf, inst, buffer: int = 0):
        self.calls.append(("start", inst.id, buffer))
        super().start(nf, inst)

    def drain(self, inst, quiet_ms, timeout_s, flush=False):
        self.calls.append(("drain", inst.id, flush))
        return {"drained": self.flushed, "waited_ms": 21.0}

    def release(self, inst, timeout=60.0):
        self.calls.append(("release", inst.id))
        if self.refuse_release:
            raise RuntimeError("409 not buffering")
        return {"replayed": 3}


def test_held_scale_out_holds_the_new_instances_until_the_old_ones_flushed():
    rt = HoldingRuntime()
    mp = FakeMapper()
    nf = Nf(id="fw", type="firewall", config={}, vport=1000, expected_gbps=0.1, src=None, dst=None)
    nf.instances = [inst(1), inst(2)]
    for i in nf.instances:
        rt.start(nf, i)
    mp.map(1000, "host", 201, "fw")
    rt.calls.clear()
    res = scale_out(nf, nf.instances, [inst(3, "snic0")], rt, mp, Clock(0.0), cfg=MigrationConfig())
    assert [e.step for e in res.steps] == ["start", "ready", "set", "verify", "flush", "resume"]
    assert rt.calls[0] == ("start", "fw-3", MigrationConfig().buffer_packets)  # holding
    # the old ones flush (at once; they keep serving), then the new one processes its queue
    assert sorted(rt.calls[1:3]) == [("drain", "fw-1", True), ("drain", "fw-2", True)]
    assert rt.calls[3:] == [("release", "fw-3")] and res.drained is True
    # a type moved unheld: the plain make-before-break scale-out
    rt2 = HoldingRuntime()
    nf2 = dataclasses.replace(nf, instances=[inst(1)])
    rt2.start(nf2, nf2.instances[0])
    rt2.calls.clear()
    cfg = MigrationConfig(buffer_types=frozenset({"ips"}))
    mp2 = FakeMapper()
    mp2.map(1000, "host", 201, "fw")
    res2 = scale_out(nf2, nf2.instances, [inst(3)], rt2, mp2, Clock(0.0), cfg=cfg)
    assert [e.step for e in res2.steps] == ["start", "ready", "set", "verify"]
    assert rt2.calls == [("start", "fw-3", 0)]


def test_held_scale_out_not_flushed_in_time_still_resumes_and_says_so():
    rt = HoldingRuntime(flushed=False)
    mp = FakeMapper()
    nf = Nf(id="fw", type="firewall", config={}, vport=1000, expected_gbps=0.1, src=None, dst=None)
    nf.instances = [inst(1)]
    rt.start(nf, nf.instances[0])
    mp.map(1000, "host", 201, "fw")
    res = scale_out(nf, nf.instances, [inst(2)], rt, mp, Clock(0.0), cfg=MigrationConfig())
    flush = next(e for e in res.steps if e.step == "flush")
    assert res.drained is False and "NOT flushed" in flush.detail and res.steps[-1].step == "resume"


def test_held_scale_out_refused_release_goes_back_to_the_old_set():
    rt = HoldingRuntime(refuse_release=True)
    mp = FakeMapper()
    nf = Nf(id="fw", type="firewall", config={}, vport=1000, expected_gbps=0.1, src=None, dst=None)
    nf.instances = [inst(1)]
    rt.start(nf, nf.instances[0])
    mp.map(1000, "host", 201, "fw")
    with pytest.raises(ScaleError) as e:
        scale_out(nf, nf.instances, [inst(2)], rt, mp, Clock(0.0), cfg=MigrationConfig())
    assert e.value.step == "resume" and "back on 1" in str(e.value)
    assert mp.sets[1000] == [("host", 201)] and set(rt.running) == {"fw-1"}


class HoldInRuntime(HoldingRuntime):
    """A HoldingRuntime whose running instances can be told to hold (the held scale-in); `refuse_hold`: the
    ids that refuse."""

    def __init__(self, refuse_hold: frozenset[str] = frozenset(), **kw):
        super().__init__(**kw)
        self.refuse_hold = refuse_hold

    def hold(self, inst, buffer, timeout=10.0):
        self.calls.append(("hold", inst.id, buffer))
        if inst.id in self.refuse_hold:
            raise RuntimeError("409 buffering already")
        return {"holding": True, "pending": 0}


# Scale-ins held (the default: MigrationConfig.hold_scale_in).
HELD_IN = MigrationConfig()
UNHELD_IN = MigrationConfig(hold_scale_in=False)


def held_in_bed(n: int, rt: HoldInRuntime):
    mp = FakeMapper()
    nf = Nf(id="fw", type="firewall", config={}, vport=1000, expected_gbps=0.1, src=None, dst=None)
    nf.instances = [inst(k) for k in range(1, n + 1)]
    for i in nf.instances:
        rt.start(nf, i)
    mp.map(1000, "host", 201, "fw")
    mp.set_instances(1000, [(i.switch, i.ofport) for i in nf.instances])
    real = mp.set_instances

    def set_instances(vport, insts, drain_ms=None):
        rt.calls.append(("set", len(insts)))
        return real(vport, insts, drain_ms)

    mp.set_instances = set_instances
    rt.calls.clear()
    return mp, nf


def test_held_scale_in_holds_the_staying_instances_until_the_leaving_ones_drained():
    rt = HoldInRuntime()
    mp, nf = held_in_bed(3, rt)
    cfg = HELD_IN
    res = scale_in(nf, nf.instances[:2], nf.instances[2:], rt, mp, cfg, Clock(0.0))
    assert [e.step for e in res.steps] == ["hold", "set", "drain", "resume", "stop", "release"]
    # both staying hold (at once) before the set; the leaving one drains (not a flush); then they go on
    assert sorted(rt.calls[:2]) == [
        ("hold", "fw-1", cfg.buffer_packets),
        ("hold", "fw-2", cfg.buffer_packets),
    ]
    assert rt.calls[2:4] == [("set", 2), ("drain", "fw-3", False)]
    assert sorted(rt.calls[4:]) == [("release", "fw-1"), ("release", "fw-2")]
    assert res.drained is True and res.cleanup_errors == [] and set(rt.running) == {"fw-1", "fw-2"}
    # not held: by the config, or for a type moved unheld
    for off in (UNHELD_IN, dataclasses.replace(HELD_IN, buffer_types=frozenset({"ips"}))):
        rt2 = HoldInRuntime()
        mp2, nf2 = held_in_bed(2, rt2)
        res2 = scale_in(nf2, nf2.instances[:1], nf2.instances[1:], rt2, mp2, off, Clock(0.0))
        assert [e.step for e in res2.steps] == ["set", "drain", "stop", "release"]
        assert not [c for c in rt2.calls if c[0] in ("hold", "release")]


def test_held_scale_in_one_refused_hold_releases_the_others_and_goes_on_unheld():
    rt = HoldInRuntime(refuse_hold=frozenset({"fw-2"}))
    mp, nf = held_in_bed(3, rt)
    res = scale_in(nf, nf.instances[:2], nf.instances[2:], rt, mp, HELD_IN, Clock(0.0))
    assert [e.step for e in res.steps] == ["hold", "set", "drain", "stop", "release"]
    hold = res.steps[0]
    assert not hold.ok and "fw-2: 409 buffering already" in hold.detail and "unheld" in hold.detail
    # fw-1 held and was released before the set: nobody holds while the flows move
    assert rt.calls.index(("release", "fw-1")) < rt.calls.index(("set", 2))
    assert mp.sets[1000] == [("host", 201), ("host", 202)] and set(rt.running) == {"fw-1", "fw-2"}


def test_held_scale_in_set_refused_releases_the_held_and_changes_nothing():
    rt = HoldInRuntime()
    mp, nf = held_in_bed(2, rt)
    mp.fail_set = True
    with pytest.raises(ScaleError) as e:
        scale_in(nf, nf.instances[:1], nf.instances[1:], rt, mp, HELD_IN, Clock(0.0))
    assert e.value.step == "set" and [s.step for s in e.value.result.steps] == ["hold", "set", "resume"]
    assert rt.calls[-1] == ("release", "fw-1") and set(rt.running) == {"fw-1", "fw-2"}


def test_held_scale_in_refused_release_is_reported_the_scale_in_stays_committed():
    rt = HoldInRuntime(refuse_release=True)
    mp, nf = held_in_bed(2, rt)
    res = scale_in(nf, nf.instances[:1], nf.instances[1:], rt, mp, HELD_IN, Clock(0.0))
    resume = next(e for e in res.steps if e.step == "resume")
    assert not resume.ok and "fw-1 not released" in resume.detail and res.removed == ["fw-2"]
    assert any("fw-1 not released" in e for e in res.cleanup_errors)


def test_scale_out_start_failure_stops_what_started_mapping_untouched():
    rt, mp, nf = bed(1)
    new = [inst(2), inst(3)]
    real = rt.start

    def start(nf_, i):
        if i.id == "fw-3":
            raise RuntimeError("boom")
        real(nf_, i)

    rt.start = start
    with pytest.raises(ScaleError) as e:
        scale_out(nf, nf.instances, new, rt, mp)
    assert e.value.step == "start" and e.value.result.aborted_at == "start"
    assert set(rt.running) == {"fw-1"} and mp.set_calls == [] and mp.map_[1000] == ("host", 201)


def test_scale_out_set_refused_old_set_serves():
    rt, mp, nf = bed(2)
    mp.fail_set = True
    with pytest.raises(ScaleError) as e:
        scale_out(nf, nf.instances, [inst(3)], rt, mp)
    assert e.value.step == "set" and isinstance(e.value.cause, Exception)
    assert set(rt.running) == {"fw-1", "fw-2"} and mp.sets[1000] == [("host", 201), ("host", 202)]


def test_scale_out_new_dies_after_set_goes_back():
    rt, mp, nf = bed(1)
    new = inst(2)
    real = mp.set_instances

    def set_then_kill(vport, insts):
        ms = real(vport, insts)
        if len(insts) == 2:
            rt.running.pop("fw-2")
        return ms

    mp.set_instances = set_then_kill
    with pytest.raises(ScaleError) as e:
        scale_out(nf, nf.instances, [new], rt, mp)
    assert e.value.step == "verify" and "back on 1" in str(e.value)
    assert mp.sets[1000] == [("host", 201)] and set(rt.running) == {"fw-1"}


def test_scale_in_set_drain_stop_release():
    rt, mp, nf = bed(4)
    clock = Clock(0.0)
    res = scale_in(
        nf, nf.instances[:1], nf.instances[1:], rt, mp, MigrationConfig(1, 0.1), clock, clock.sleep
    )
    assert [e.step for e in res.steps] == ["set", "drain", "stop", "release"]
    assert res.drained is True and res.removed == ["fw-2", "fw-3", "fw-4"]
    assert mp.sets[1000] == [("host", 201)] and set(rt.running) == {"fw-1"}


def test_scale_in_drain_bounded_and_set_failure_changes_nothing():
    rt, mp, nf = bed(2)
    clock = Clock(0.0)
    n = {"rx": 0}

    def busy(i):
        n["rx"] += 1
        return {"counters": {"rx": n["rx"]}}

    rt.stats = busy
    res = scale_in(
        nf, nf.instances[:1], nf.instances[1:], rt, mp, MigrationConfig(0.3, 0.1), clock, clock.sleep
    )
    assert res.drained is False and 0.3 <= clock.t < 0.4
    rt2, mp2, nf2 = bed(2)
    mp2.fail_set = True
    with pytest.raises(ScaleError) as e:
        scale_in(nf2, nf2.instances[:1], nf2.instances[1:], rt2, mp2)
    assert e.value.step == "set" and set(rt2.running) == {"fw-1", "fw-2"}


def test_scale_in_waits_for_the_leaving_instances_in_flight_frames():
    rt, mp, nf = bed(2)
    clock = Clock(0.0)
    backlog = {"n": 4}

    def stats(i):
        if i.id == "fw-1":
            return {"counters": {"rx": 9, "tx": 9}}
        backlog["n"] = max(0, backlog["n"] - 1)  # rx already quiet; its frames leave one per poll
        return {"counters": {"rx": 30, "tx": 30 - backlog["n"]}}

    rt.stats = stats
    cfg = MigrationConfig(drain_timeout_s=1, quiet_s=0.02, poll_s=0.01)
    res = scale_in(nf, nf.instances[:1], nf.instances[1:], rt, mp, cfg, clock, clock.sleep)
    assert res.drained is True and clock.t >= 0.03
    assert mp.drain_ms[-1] == oneswitch_drain_ms(1)  # OneSwitch keeps fw-2's port ingress-only meanwhile


def test_scale_dispatch():
    rt, mp, nf = bed(1)
    seq = iter(range(2, 10))
    res, insts = scale(nf, 3, rt, mp, lambda k: [inst(next(seq)) for _ in range(k)])
    assert res.after == 3 and [i.id for i in insts] == ["fw-1", "fw-2", "fw-3"]
    nf.instances = insts
    res, insts = scale(nf, 1, rt, mp, lambda k: [], MigrationConfig(0))
    assert res.removed == ["fw-2", "fw-3"] and [i.id for i in insts] == ["fw-1"]
    nf.instances = insts
    res, insts = scale(nf, 1, rt, mp, lambda k: [])
    assert res.steps == [] and insts == nf.instances


# -- the agent and its REST call -------------------------------------------------------------------------------
@pytest.fixture
def env(tmp_path):
    agent, rt, mp, clock = make_agent(tmp_path)
    return agent, rt, mp, create_app(agent).test_client(), tmp_path


def post(c, path, body):
    return c.post(path, data=json.dumps(body), content_type="application/json")


def test_rest_scale_1_2_4_1_one_vport_state_persisted(env):
    agent, rt, mp, c, tmp = env
    nf = post(c, "/v1/nfs", {"type": "firewall", "id": "fw", "hints": {"prefer": "host"}}).get_json()
    assert nf["vport"] == 200
    for n in (2, 4):
        r = post(c, "/v1/nfs/fw/scale", {"instances": n})
        assert r.status_code == 200, r.get_json()
        body = r.get_json()
        assert body["instances"] == n and body["changed"] and len(body["locations"]) == n
        assert len(mp.sets[200]) == n and len(rt.running) == n
        assert len(set(mp.sets[200])) == n  # distinct physical ports
    got = c.get("/v1/nfs/fw").get_json()
    assert got["instance_count"] == 4 and got["vport"] == 200 and "ofport" not in json.dumps(got)
    assert [p["vport"] for p in c.get("/v1/ports").get_json() if p["kind"] == "nf"] == [200]  # one vport
    saved = store.load(tmp / "state.json")
    assert len(saved.nfs["fw"].instances) == 4
    first = agent.state.nfs["fw"].instances[0].id
    r = post(c, "/v1/nfs/fw/scale", {"instances": 1})
    assert r.status_code == 200 and r.get_json()["instances"] == 1
    assert list(rt.running) == [first] and mp.sets[200] == [mp.map_[200]]
    assert post(c, "/v1/nfs/fw/scale", {"instances": 1}).get_json()["changed"] is False
    metrics = c.get("/metrics").get_data(as_text=True)
    assert "uno_agent_nf_scales_total 3.0" in metrics and 'uno_agent_nf_instances{nf="fw"} 1.0' in metrics
    assert len(store.load(tmp / "state.json").nfs["fw"].instances) == 1


def test_rest_scale_errors(env):
    agent, rt, mp, c, tmp = env
    post(c, "/v1/nfs", {"type": "firewall", "id": "fw"})
    for bad in ({"instances": 0}, {"instances": 17}, {"instances": True}, {"n": 2}, {}):
        r = post(c, "/v1/nfs/fw/scale", bad)
        assert r.status_code == 400, bad
        assert r.get_json()["field"] in ("instances", "n")
    assert post(c, "/v1/nfs/ghost/scale", {"instances": 2}).status_code == 404
    before = json.dumps(agent.state.to_json(), sort_keys=True)
    mp.unsupported = True  # an older OneSwitch: fail closed, nothing left running
    r = post(c, "/v1/nfs/fw/scale", {"instances": 2})
    assert r.status_code == 409 and r.get_json()["field"] == "instances"
    assert len(rt.running) == 1
    mp.unsupported, mp.fail_set = False, True
    r = post(c, "/v1/nfs/fw/scale", {"instances": 3})
    assert r.status_code == 502 and len(rt.running) == 1
    mp.fail_set = False
    rt.fail_start.add("fw")
    assert post(c, "/v1/nfs/fw/scale", {"instances": 2}).status_code == 500 and len(rt.running) == 1
    rt.fail_start.clear()
    state = json.loads(before)
    after = agent.state.to_json()
    assert state["nfs"] == after["nfs"]  # only history/sequence numbers moved
    # an sNIC-pinned NF spread over more instances there costs the same sNIC units (linear model): fits
    post(c, "/v1/nfs", {"type": "ips", "id": "ips", "pin": "snic0", "expected": {"gbps": 30}})
    r = post(c, "/v1/nfs/ips/scale", {"instances": 3})
    assert r.status_code == 200 and r.get_json()["locations"] == ["snic0"] * 3
    # ... but not beyond the sNIC's budget (capacity now below the NF's load): 409, nothing started
    agent.cfg.snics[0] = dataclasses.replace(agent.cfg.snics[0], capacity=10.0)
    n = len(rt.running)
    r = post(c, "/v1/nfs/ips/scale", {"instances": 4})
    assert r.status_code == 409 and r.get_json()["field"] == "instances" and len(rt.running) == n
    # a scaled NF is not moved
    assert post(c, "/v1/nfs/fw/scale", {"instances": 2}).status_code == 200
    r = post(c, "/v1/nfs/fw/migrate", {"to": "snic0"})
    assert r.status_code == 409 and r.get_json()["field"] == "to"


def test_delete_stops_every_instance(env):
    agent, rt, mp, c, _ = env
    post(c, "/v1/nfs", {"type": "monitor", "id": "m"})
    post(c, "/v1/nfs/m/scale", {"instances": 3})
    assert len(rt.running) == 3
    assert c.delete("/v1/nfs/m").status_code == 200
    assert rt.running == {} and mp.map_ == {} and mp.sets == {}


def test_failover_of_one_of_several_replaces_it_in_the_set(tmp_path):
    agent, rt, mp, clock = make_agent(tmp_path, failover=True)
    create_app(agent)
    from nf_agent.validation import NfRequest

    agent.create_nf(NfRequest("fw", "firewall", {}, 0.1, None, None, "host", None))
    agent.scale("fw", 3)
    nf = agent.state.nfs["fw"]
    dead = nf.instances[1]
    rt.running.pop(dead.id)  # died
    agent.supervise()
    assert len(nf.instances) == 3 and dead.id not in [i.id for i in nf.instances]
    assert mp.sets[200] == [(i.switch, i.ofport) for i in nf.instances]
    # no replacement can start: the dead one only leaves the set
    dead = nf.instances[2]
    rt.running.pop(dead.id)
    rt.fail_start.add("fw")
    agent.supervise()
    assert len(nf.instances) == 2 and mp.sets[200] == [(i.switch, i.ofport) for i in nf.instances]
    assert agent.counters.failovers == 2


def test_reconcile_sets_missing_instances(tmp_path):
    agent, rt, mp, clock = make_agent(tmp_path)
    from nf_agent.validation import NfRequest

    agent.create_nf(NfRequest("fw", "firewall", {}, 0.1, None, None, "host", None))
    agent.scale("fw", 2)
    mp.sets.clear()  # OneSwitch restarted with only the first port mapped
    done = agent.reconcile()
    assert any("set 2 instances" in d for d in done)
    assert len(mp.sets[200]) == 2
    assert not any("set" in d for d in agent.reconcile())  # in step: nothing to do
