"""Migration and failover with real packets and processes (root): an emulated host with OneSwitch and Redis,
the firewall (stateful: the wire side only gets through on a connection the VM opened) as a real NF process,
sequenced UDP streams from `traffic gen` to `traffic sink` through it.

- host -> sNIC -> host under a stream: zero packets lost, a connection opened before still passes after.
- the target killed before / right after the remap: the migration aborts (at ready / verify), the mapping
  is (back) on the old instance, which keeps serving; nothing of the target remains.
- a stuck (SIGSTOPped) instance: missed /health probes -> replaced.
- kill -9 under load: the watchdog replaces the instance; with the state in Redis the connection opened
  before the kill still passes, with `--store local` it does not (the replacement has no state).
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from domain.errors import OperationFailed
from testkit.hosts import EMPTY, machine_snapshot
from testkit.instances import leaves_nothing
from testkit.live import LIVE_MARKS, burst, kill_under_load, next_run
from testkit.poll import wait
from testkit.testbed import EST_PORT, Testbed, report

pytestmark = LIVE_MARKS


@pytest.fixture(scope="module")
def redis_bed():
    tb = Testbed(store="redis", drain_s=1.0)
    try:
        tb.up()
        tb.add_firewall(at="host")
        yield tb
    finally:
        tb.close()
        assert machine_snapshot(tb.name) == EMPTY


def test_migration_host_snic_host_no_loss_state_kept(redis_bed):
    tb = redis_bed
    assert burst(tb, "vm", EST_PORT)["received"] == 50  # the VM opens the connection
    assert burst(tb, "out", EST_PORT)["received"] == 50  # the wire side's replies pass
    assert burst(tb, "out", EST_PORT + 1, expect_none=True)["received"] == 0  # never opened: denied

    run, flows, pkts = next_run(), 20, 250  # 5000 packets at 1000/s: 5 s
    sink = tb.sink("out", run, expect=flows * pkts, idle_ms=3000)
    gen = tb.gen("vm", run, flows=flows, pkts=pkts, rate=1000)
    nf = tb.agent.state.nfs["fw"]
    moves, olds = [], []
    time.sleep(0.5)
    for target in ("snic0", "host"):
        old = nf.instances[0]
        olds.append(old.id)
        tb.agent.migrate(nf, target)
        moves.append(tb.agent.last_migration)
        assert nf.location == target and nf.instances[0].netns != old.netns
        assert not tb.runtime.alive(old)
    report(gen)
    got = report(sink)
    assert got["lost"] == 0 and got["duplicates"] == 0, (got, [m.to_json() for m in moves])
    assert [m.aborted_at for m in moves] == [None, None]
    # each old instance said itself when it had drained (POST /drain): no counter poll
    assert [m.drained for m in moves] == [True, True] and [list(m.drain) for m in moves] == [
        [o] for o in olds
    ]
    # the connection opened before both moves still passes (its state is in Redis)
    assert burst(tb, "out", EST_PORT)["received"] == 50


def test_target_dies_after_remap_old_keeps_serving(redis_bed):
    tb = redis_bed
    nf = tb.agent.state.nfs["fw"]
    old = nf.instances[0]
    real_remap, real_start = tb.agent.mapper.remap, tb.runtime.start
    started = []

    def start(nf_, inst, **kw):
        real_start(nf_, inst, **kw)
        started.append(inst)

    def remap_then_kill(vport, switch, port, drain_ms=None):
        ms = real_remap(vport, switch, port, drain_ms)
        if switch == "snic0":  # the new instance dies right after the switch-over
            os.kill(started[-1].pid, signal.SIGKILL)
            wait(lambda: not tb.runtime.alive(started[-1]), 10, "target dead")
        return ms

    tb.runtime.start = start
    tb.agent.mapper.remap = remap_then_kill
    try:
        with pytest.raises(OperationFailed, match="verify"):
            tb.agent.migrate(nf, "snic0")
    finally:
        tb.agent.mapper.remap, tb.runtime.start = real_remap, real_start
    assert nf.instances == [old] and nf.location == "host" and tb.runtime.alive(old)
    assert tb.agent.mapper.mapped()[nf.vport] == (old.switch, old.ofport)
    assert tb.agent.state.history[-1]["event"] == "nf-migrate-failed"
    assert leaves_nothing(tb.runtime, started[-1])  # nothing of the target remains
    assert burst(tb, "vm", EST_PORT)["received"] == 50
    assert burst(tb, "out", EST_PORT)["received"] == 50


def test_kill9_failover_redis_keeps_connections(redis_bed):
    ev, got = kill_under_load(redis_bed)
    assert got["received"] > 0
    # established before the kill, still passing via the replacement (state in Redis)
    assert burst(redis_bed, "out", EST_PORT)["received"] == 50
    # again with a pre-started standby taking over (no start on the failover path)
    ev, got = kill_under_load(redis_bed, standby=True)
    assert ev["start_ms"] == 0 and got["received"] > 0
    assert burst(redis_bed, "out", EST_PORT)["received"] == 50


def test_kill9_failover_local_store_breaks_connections():
    tb = Testbed(store="local", drain_s=0.5)
    try:
        tb.up()
        tb.add_firewall(at="host")
        assert burst(tb, "vm", EST_PORT)["received"] == 50
        assert burst(tb, "out", EST_PORT)["received"] == 50
        kill_under_load(tb)
        # the replacement serves (new connections from the VM open) but the old connection is gone
        assert burst(tb, "out", EST_PORT, expect_none=True)["received"] == 0
        assert burst(tb, "vm", EST_PORT + 2)["received"] == 50
    finally:
        tb.close()
        assert machine_snapshot(tb.name) == EMPTY


def test_stuck_instance_detected_by_missed_health_and_replaced(redis_bed):
    """SIGSTOP: the process exists but answers no /health; after `max_misses` probes it is replaced."""
    from migration.failover import DetectorConfig

    tb = redis_bed
    nf = tb.agent.state.nfs["fw"]
    old = nf.instances[0]
    tb.start_watchdog(DetectorConfig(interval_s=0.03, max_misses=3))
    try:
        os.kill(old.pid, signal.SIGSTOP)
        # the event is recorded once the stuck instance is also released (nf.instances changes before)
        wait(
            lambda: any(
                h["event"] == "nf-failover" and h["failed"] == old.id for h in tb.agent.state.history
            ),
            60,
            "failover of the stuck instance",
        )
    finally:
        tb.watchdog.stop()
        if tb.runtime.alive(old):
            os.kill(old.pid, signal.SIGCONT)
    ev = next(h for h in reversed(tb.agent.state.history) if h["event"] == "nf-failover")
    assert ev["failed"] == old.id and ev["reason"] == "stuck"
    assert not tb.runtime.alive(old) and leaves_nothing(tb.runtime, old)
    assert burst(tb, "out", EST_PORT)["received"] == 50  # established connection passes via the replacement


def test_target_dies_before_remap_old_keeps_serving(redis_bed):
    tb = redis_bed
    nf = tb.agent.state.nfs["fw"]
    old, before = nf.instances[0], tb.agent.mapper.mapped()[nf.vport]
    real_start = tb.runtime.start
    started = []

    def start_then_die(nf_, inst, **kw):
        real_start(nf_, inst, **kw)
        started.append(inst)
        os.kill(inst.pid, signal.SIGKILL)  # dies between its start and the remap
        wait(lambda: not tb.runtime.alive(inst), 10, "target dead")

    tb.runtime.start = start_then_die
    try:
        with pytest.raises(OperationFailed, match="ready"):
            tb.agent.migrate(nf, "snic0")
    finally:
        tb.runtime.start = real_start
    assert nf.instances == [old] and tb.runtime.alive(old)
    assert tb.agent.mapper.mapped()[nf.vport] == before  # never remapped
    assert leaves_nothing(tb.runtime, started[-1])
    assert burst(tb, "out", EST_PORT)["received"] == 50
