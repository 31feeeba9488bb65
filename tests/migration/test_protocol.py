"""The migration state machine's decisions and abort paths (fakes of runtime/mapper: logic only; the real
processes, OneSwitch and packets are in test_live.py)."""

from __future__ import annotations

import pytest

from domain.model import NF_TYPES, Instance, Nf
from migration.protocol import (
    PREPARE_MS,
    MigrationConfig,
    MigrationError,
    drain_done,
    drained,
    in_flight,
    migrate,
    oneswitch_drain_ms,
)
from testkit.fakes import Clock, FakeMapper, FakeRuntime


def setup():
    rt, mp = FakeRuntime(), FakeMapper()
    nf = Nf(id="fw", type="firewall", config={}, vport=1000, expected_gbps=0.1, src=None, dst=None)
    old = Instance("fw-1", "host", "host", 200, "n-i1", "n-i1", "n-j1")
    rt.start(nf, old)
    mp.map(1000, "host", 200, "fw")
    new = Instance("fw-2", "snic0", "snic0", 200, "n-i2", "n-i2", "n-j2")
    return rt, mp, nf, old, new


def test_drain_done_pure():
    assert not drain_done([], 0.1)
    assert drain_done([(0.0, 5), (0.05, 5), (0.1, 5)], 0.1)
    assert not drain_done([(0.0, 4), (0.05, 5), (0.1, 5)], 0.1)
    assert drain_done([(0.0, 4), (0.1, None)], 0.1)  # stats gone


def test_success_steps_in_order_and_old_released():
    rt, mp, nf, old, new = setup()
    clock = Clock(0.0)
    events = []
    res = migrate(nf, [old], new, rt, mp, MigrationConfig(drain_timeout_s=1, quiet_s=0.1), clock, clock.sleep,
                  events.append)  # fmt: skip
    assert [e.step for e in res.steps] == [
        "start", "ready", "prepare", "remap", "verify", "drain", "stop", "release"
    ]  # fmt: skip
    assert events == res.steps and res.drained is True and res.aborted_at is None
    assert mp.map_[1000] == ("snic0", 200) and "fw-1" not in rt.running and "fw-2" in rt.running
    # the target's rules went in ahead of the remap, for a bounded window
    assert mp.prepared == [(1000, "snic0", 200, PREPARE_MS)] and res.prepare_ms == 1.0
    assert res.to_json()["prepare_ms"] == 1.0


def test_an_older_oneswitch_without_prepare_is_remapped_directly():
    from domain.errors import PrepareUnsupported

    rt, mp, nf, old, new = setup()

    def no_endpoint(vport, switch, port, ms=None):
        raise PrepareUnsupported("OneSwitch 404: no such path")

    mp.prepare = no_endpoint
    res = migrate(nf, [old], new, rt, mp, MigrationConfig(drain_timeout_s=0), Clock(0.0), lambda s: None)
    assert "prepare" not in [e.step for e in res.steps] and res.prepare_ms is None and res.aborted_at is None
    assert mp.map_[1000] == ("snic0", 200)


def test_a_mapper_without_prepare_remaps_directly():
    rt, mp, nf, old, new = setup()

    class NoPrepare:  # an older mapper: remap only
        remap = staticmethod(mp.remap)

    res = migrate(
        nf, [old], new, rt, NoPrepare(), MigrationConfig(drain_timeout_s=0), Clock(0.0), lambda s: None
    )
    assert [e.step for e in res.steps][:4] == ["start", "ready", "remap", "verify"] and res.prepare_ms is None
    assert mp.map_[1000] == ("snic0", 200) and mp.prepared == []


def test_drain_waits_for_quiet_and_is_bounded():
    rt, mp, nf, old, new = setup()
    clock = Clock(0.0)
    n = {"rx": 0}

    def busy_stats(inst):
        n["rx"] += 1  # the old instance keeps receiving: never quiet
        return {"counters": {"rx": n["rx"]}}

    rt.stats = busy_stats
    res = migrate(
        nf, [old], new, rt, mp, MigrationConfig(drain_timeout_s=0.5, quiet_s=0.1), clock, clock.sleep
    )
    assert res.drained is False and 0.5 <= clock.t < 0.6
    assert "fw-1" not in rt.running  # stopped after the bound anyway


def test_in_flight_is_rx_minus_where_received_frames_end():
    c = {"rx": 100, "tx": 90, "dropped_by_nf": 4, "malformed": 1, "fail_closed_dropped": 2, "non_ip": 7,
         "fail_open_forwarded": 3, "store_errors": 9, "batches": 50}  # fmt: skip
    assert in_flight({"counters": c}) == 3  # non_ip / fail-open frames are sent (in tx); errors are no frames
    assert in_flight({"counters": {**c, "tx": 93}}) == 0
    assert in_flight({"counters": {**c, "tx": 95}}) == -2  # a batch ended between two reads: nothing pending
    assert in_flight({"rx": 5, "tx": 5}) == 0  # flat counters (as the fakes give)
    assert in_flight(None) is None and in_flight({}) is None
    assert in_flight({"counters": {"rx": 5}}) is None  # no tx: cannot tell
    assert in_flight({"counters": {"rx": "x", "tx": 1}}) is None


def test_drained_needs_quiet_rx_and_nothing_in_flight():
    quiet = [(0.0, 5), (0.1, 5)]
    assert drained(quiet, 0.1, 0) and drained(quiet, 0.1, -1) and drained(quiet, 0.1, None)
    assert not drained(quiet, 0.1, 2)  # rx quiet, yet 2 frames still inside (a CPU-starved instance)
    assert not drained([(0.0, 4), (0.1, 5)], 0.1, 0)


def test_oneswitch_drain_window_covers_the_drain_bound():
    assert oneswitch_drain_ms(0.5) == 2500 and oneswitch_drain_ms(0) == 2000
    assert oneswitch_drain_ms(0.0001) == 2001  # rounded up, never below the bound
    assert oneswitch_drain_ms(1000) == 60_000  # OneSwitch's maximum


def test_drain_waits_until_nothing_is_in_flight_and_passes_the_window():
    rt, mp, nf, old, new = setup()
    clock = Clock(0.0)
    backlog = {"n": 6}  # received, still being processed: rx is already quiet

    def stats(inst):
        backlog["n"] = max(0, backlog["n"] - 1)  # one frame leaves per poll
        return {"counters": {"rx": 50, "tx": 44 - backlog["n"], "dropped_by_nf": 6}}

    rt.stats = stats
    res = migrate(nf, [old], new, rt, mp, MigrationConfig(drain_timeout_s=1, quiet_s=0.02, poll_s=0.01),
                  clock, clock.sleep)  # fmt: skip
    assert res.drained is True and clock.t >= 0.05  # waited for the 5 polls, not just the quiet 0.02 s
    assert mp.drain_ms == [oneswitch_drain_ms(1)]  # the remap asked OneSwitch to keep the old port


@pytest.mark.parametrize("where", ["start", "ready", "prepare", "remap", "verify"])
def test_abort_keeps_old_serving(where):
    rt, mp, nf, old, new = setup()
    if where == "start":
        rt.fail_start.add("fw")
    elif where == "ready":
        rt.healthy = lambda inst: inst.id != "fw-2"
    elif where == "prepare":
        mp.fail_prepare = True
    elif where == "remap":
        mp.fail = True
    else:  # the target dies right after the remap
        real = mp.remap

        def remap_then_die(vport, switch, port, drain_ms=None):
            r = real(vport, switch, port, drain_ms)
            if switch == "snic0":
                rt.running.pop("fw-2", None)
            return r

        mp.remap = remap_then_die
    with pytest.raises(MigrationError) as exc:
        migrate(nf, [old], new, rt, mp, MigrationConfig(drain_timeout_s=0.1), Clock(0.0), lambda s: None)
    assert exc.value.step == where and exc.value.result.aborted_at == where
    assert mp.map_[1000] == ("host", 200)  # mapping unchanged / mapped back
    assert "fw-1" in rt.running and "fw-2" not in rt.running  # old serves, nothing of the target remains


def test_agent_migrate_failure_counts_and_keeps_location(tmp_path):
    from nf_agent.validation import NfRequest
    from testkit.fakes import make_agent

    agent, rt, mp, _ = make_agent(tmp_path)
    nf = agent.create_nf(
        NfRequest(
            id="f", type="firewall", config={}, expected_gbps=0.1, src=None, dst=None, pin=None, prefer="host"
        )
    )
    loc = nf.location
    other = "snic0" if loc == "host" else "host"
    mp.fail = True
    from domain.errors import OperationFailed
    from nf_agent.api import failure_status

    with pytest.raises(OperationFailed) as exc:
        agent.migrate(nf, other)
    assert failure_status(exc.value) == 502 and nf.location == loc and agent.counters.migration_failures == 1
    assert agent.state.history[-1]["event"] == "nf-migrate-failed"
    mp.fail = False
    agent.migrate(nf, other)
    assert nf.location == other and agent.last_migration.drained is None  # drain 0: skipped


def test_detector_dead_at_once_stuck_after_misses():
    from migration.failover import DetectorConfig, FailureDetector

    d = FailureDetector(DetectorConfig(max_misses=3))
    assert d.observe("a", True, True) is None
    assert [d.observe("a", True, False) for _ in range(3)] == [None, None, "stuck"]
    assert d.observe("a", True, False) is None  # counting again after a detection
    d.observe("a", True, True)
    assert d.observe("a", True, False) is None  # a healthy probe resets the count
    assert d.observe("b", False, False) == "dead"


def test_agent_failover_replaces_and_remaps(tmp_path):
    from migration.failover import Watchdog
    from nf_agent.validation import NfRequest
    from testkit.fakes import make_agent

    agent, rt, mp, _ = make_agent(tmp_path)
    nf = agent.create_nf(NfRequest(id="f", type="firewall", config={}, expected_gbps=0.1, src=None, dst=None,
                                   pin=None, prefer="host"))  # fmt: skip
    old = nf.instances[0]
    rt.running.pop(old.id)  # the process died
    wd = Watchdog(agent.probe, lambda i, r: agent.failover("f", i, r))
    assert wd.step() == [(old.id, "dead")]
    new = nf.instances[0]
    assert new.id != old.id and new.location == old.location and mp.map_[nf.vport] == (new.switch, new.ofport)
    assert agent.counters.failovers == 1 and agent.state.history[-1]["event"] == "nf-failover"
    assert wd.step() == []
    # the supervisor's failover path (cfg.failover) does the same instead of restarting in place
    agent.cfg.failover = True
    rt.running.pop(new.id)
    agent.supervise()
    assert nf.instances[0].id not in (old.id, new.id) and agent.counters.restarts == 0


def test_agent_failover_prefers_a_running_standby(tmp_path):
    from nf_agent.validation import NfRequest
    from testkit.fakes import make_agent

    agent, rt, mp, _ = make_agent(tmp_path)
    nf = agent.create_nf(NfRequest(id="f", type="firewall", config={}, expected_gbps=0.1, src=None, dst=None,
                                   pin=None, prefer="host"))  # fmt: skip
    sb = agent.start_standby("f")
    assert sb.ofport != nf.instances[0].ofport and mp.map_[nf.vport] != (sb.switch, sb.ofport)
    old = nf.instances[0]
    rt.running.pop(old.id)
    res = agent.failover("f", old.id, "dead")
    assert res["used_standby"] is True and res["start_ms"] == 0 and nf.instances == [sb]
    assert mp.map_[nf.vport] == (sb.switch, sb.ofport) and agent.standbys == {}
    # a dead standby is not used: a new instance is started instead
    sb2 = agent.start_standby("f")
    rt.running.pop(sb2.id)
    rt.running.pop(sb.id)
    res = agent.failover("f", sb.id, "dead")
    assert res["used_standby"] is False and nf.instances[0].id not in (sb.id, sb2.id)
    agent.start_standby("f")
    agent.delete_nf("f")
    assert rt.running == {}  # the standby is stopped with its NF


class BufferingRuntime(FakeRuntime):
    """A fake runtime that can start a target buffering and release it (records the calls)."""

    def __init__(self, refuse_release: bool = False):
        super().__init__()
        self.buffers: dict[str, int] = {}
        self.released: list[str] = []
        self.refuse_release = refuse_release

    def start(self, nf, inst, buffer: int = 0):
        super().start(nf, inst)
        self.buffers[inst.id] = buffer

    def release(self, inst):
        if self.refuse_release:
            raise RuntimeError("409: not buffering")
        self.released.append(inst.id)
        return {"replayed": 7, "buffer_overflow": 0}


def _buffered_setup(nf_type: str, refuse_release: bool = False):
    rt, mp = BufferingRuntime(refuse_release), FakeMapper()
    nf = Nf(id="x", type=nf_type, config={}, vport=1000, expected_gbps=0.1, src=None, dst=None)
    old = Instance("x-1", "snic0", "snic0", 200, "n-i1", "n-i1", "n-j1")
    rt.start(nf, old)
    mp.map(1000, "snic0", 200, "x")
    return rt, mp, nf, old, Instance("x-2", "host", "host", 200, "n-i2", "n-i2", "n-j2")


def test_only_the_buffer_types_are_held_until_the_old_instance_drained():
    """By default every type is held (order-preserving moves); a type left out of `buffer_types` is not."""
    cases = [(typ, frozenset(NF_TYPES), True) for typ in ("ips", "firewall", "nat")]
    cases += [("ips", frozenset({"ips"}), True), ("firewall", frozenset({"ips"}), False)]
    assert MigrationConfig().buffer_types == frozenset(NF_TYPES)
    for typ, types, held in cases:
        rt, mp, nf, old, new = _buffered_setup(typ)
        clock = Clock(0.0)
        cfg = MigrationConfig(drain_timeout_s=1, quiet_s=0.1, buffer_types=types)
        res = migrate(nf, [old], new, rt, mp, cfg, clock, clock.sleep)
        steps = [e.step for e in res.steps]
        assert res.buffered is held and (rt.buffers["x-2"] > 0) is held, typ
        assert ("resume" in steps) is held and rt.released == (["x-2"] if held else []), typ
        if held:  # released only after the drain, before the old instance stops
            assert steps.index("drain") < steps.index("resume") < steps.index("stop") and res.replayed == 7
        assert mp.map_[1000] == ("host", 200) and "x-1" not in rt.running


def test_a_refused_release_maps_back_to_the_old_instance():
    rt, mp, nf, old, new = _buffered_setup("ips", refuse_release=True)
    clock = Clock(0.0)
    with pytest.raises(MigrationError) as e:
        migrate(nf, [old], new, rt, mp, MigrationConfig(drain_timeout_s=1, quiet_s=0.1), clock, clock.sleep)
    assert e.value.result.aborted_at == "resume"
    assert mp.map_[1000] == ("snic0", 200) and "x-1" in rt.running and "x-2" not in rt.running
    assert "releasing x-2: 409: not buffering; vport 1000 mapped back to x-1" in str(e.value)


def test_a_refused_release_reports_the_target_queue_lost():
    """The one abort rule of both protocols (MoveSteps): after the remap, map back and report what the
    buffering target had queued (the local-state move did; the tier move now does too)."""
    rt, mp, nf, old, new = _buffered_setup("ips", refuse_release=True)
    rt.stats = lambda inst: (
        {"counters": {"rx": 12, "tx": 0, "buffered": 12}} if inst.id in rt.running else None
    )
    clock = Clock(0.0)
    with pytest.raises(MigrationError) as e:
        migrate(
            nf, [old], new, rt, mp, MigrationConfig(drain_timeout_s=0.1, quiet_s=0.02), clock, clock.sleep
        )
    assert "12 packets queued at the target are lost" in e.value.result.steps[-1].detail
    assert [s.step for s in e.value.result.steps][-1] == "resume" and "x-2" not in rt.running


class DrainingRuntime(BufferingRuntime):
    """A fake runtime whose instances answer `POST /drain` themselves (`answers`: instance id -> answer,
    None = cannot tell); each call advances the clock by the answer's `waited_ms`."""

    def __init__(self, clock, answers):
        super().__init__()
        self.clock, self.answers, self.asked = clock, answers, []
        self.polls = 0

    def drain(self, inst, quiet_ms, timeout_s):
        self.asked.append((inst.id, quiet_ms, timeout_s))
        ans = self.answers.get(inst.id)
        if ans is not None:
            self.clock.sleep(ans.get("waited_ms", 0) / 1000)
        return ans

    def stats(self, inst):
        self.polls += 1
        return super().stats(inst)


def test_the_old_instance_says_when_it_drained_and_the_target_is_released_at_once():
    clock = Clock(0.0)
    ans = {"drained": True, "waited_ms": 21.0, "late": 3, "last_ms": 1.5, "waiting": 0, "in_flight": 0}
    rt, mp, nf, old, new = _buffered_setup("ips")
    rt = DrainingRuntime(clock, {"x-1": ans})
    rt.start(nf, old)
    cfg = MigrationConfig(drain_timeout_s=0.5, quiet_s=0.25)
    res = migrate(nf, [old], new, rt, mp, cfg, clock, clock.sleep)
    steps = {s.step: s for s in res.steps}
    # asked once with the NF-side quiet window and the drain's bound; no counter polled, no 0.25 s wait
    assert rt.asked == [("x-1", 20, 0.5)] and rt.polls == 0
    assert res.drained is True and res.drain == {"x-1": ans} and res.to_json()["drain"] == {"x-1": ans}
    assert (
        steps["drain"].ms == pytest.approx(21.0)
        and steps["drain"].detail == "drained (nf: 3 late, last +1.5 ms)"
    )
    names = [s.step for s in res.steps]
    assert rt.released == ["x-2"] and names.index("resume") == names.index("drain") + 1


def test_an_instance_that_cannot_tell_is_polled_and_one_not_drained_is_a_timeout():
    # None (an older nf, a port that cannot count): the counters are polled, as before
    clock = Clock(0.0)
    rt, mp, nf, old, new = _buffered_setup("firewall")
    rt = DrainingRuntime(clock, {})
    rt.start(nf, old)
    res = migrate(nf, [old], new, rt, mp, MigrationConfig(drain_timeout_s=1, quiet_s=0.1), clock, clock.sleep)
    assert res.drained is True and rt.polls > 1 and _step(res, "drain").detail == "quiet" and res.drain == {}
    # drained false at the bound: a timeout (the move goes on, as with the counter poll)
    clock = Clock(0.0)
    rt = DrainingRuntime(clock, {"x-1": {"drained": False, "waited_ms": 500, "waiting": 4, "in_flight": 0}})
    rt.start(nf, old)
    res = migrate(nf, [old], new, rt, mp, MigrationConfig(drain_timeout_s=0.5), clock, clock.sleep)
    assert res.drained is False and _step(res, "drain").detail == "timeout (nf: 4 waiting, 0 in flight)"
    assert "x-1" not in rt.running
    # drain_quiet_ms None: the NF is not asked
    rt = DrainingRuntime(clock, {"x-1": {"drained": True}})
    rt.start(nf, old)
    migrate(nf, [old], new, rt, mp, MigrationConfig(drain_quiet_ms=None, quiet_s=0.1), clock, clock.sleep)
    assert rt.asked == [] and rt.polls > 0


def test_leaving_instances_are_asked_at_once_and_the_rest_polled():
    import threading

    from migration.protocol import drain_old

    clock = Clock(0.0)
    a, b, c = (Instance(f"x-{i}", "host", "host", 200 + i, f"i{i}", f"i{i}", f"j{i}") for i in (1, 2, 3))
    both = threading.Barrier(2, timeout=5)  # each call returns only once the other one is in flight

    class Parallel(DrainingRuntime):
        def drain(self, inst, quiet_ms, timeout_s):
            if inst.id != "x-3":
                both.wait()
            return super().drain(inst, quiet_ms, timeout_s)

    rt = Parallel(clock, {"x-1": {"drained": True, "late": 0}, "x-2": {"drained": True, "late": 1}})
    for i in (a, b, c):
        rt.running[i.id] = i
    out = drain_old([a, b, c], rt, MigrationConfig(drain_timeout_s=1, quiet_s=0.05), clock, clock.sleep)
    assert out.drained is True and set(out.answers) == {"x-1", "x-2"} and rt.polls > 0  # x-3 polled
    assert out.detail == "x-1: drained (nf: 0 late); x-2: drained (nf: 1 late); x-3: quiet"
    assert drain_old([], rt, MigrationConfig(), clock, clock.sleep).drained is None
    assert drain_old([a], rt, MigrationConfig(drain_timeout_s=0), clock, clock.sleep).drained is None


def _step(res, name: str):
    return next(s for s in res.steps if s.step == name)
