"""Failover with kernel TCP connections (root; real OneSwitch, Redis, `nf` processes, kernel TCP in namespaces).

A VM opens TCP connections to a server behind the wire through a stateful firewall and a NAT (state in
Redis). Each NF instance in turn is killed with SIGKILL; the watchdog (as `uno agent serve` runs it by
default) sees the exit at once (on the host its pidfd, on an sNIC its agent's heartbeat), starts a
replacement and remaps the NF's port: every connection keeps its NAT mapping and firewall state and goes on,
none is reset or stalls."""

from __future__ import annotations

import os
import signal
import time

import pytest

from migration.failover import DetectorConfig
from testkit.hosts import EMPTY, machine_snapshot
from testkit.live import LIVE_MARKS
from testkit.poll import wait
from testkit.tcp_chain import NAT, End, TcpChain, add_chains, fw_tcp, run
from testkit.testbed import Testbed

pytestmark = LIVE_MARKS


@pytest.mark.parametrize("where", ["host", "snic0"])
def test_tcp_through_nat_and_firewall_survives_kill9_of_each_instance(where):
    tb = Testbed(warm_slots=1)
    try:
        tb.up()
        chain = TcpChain(
            0, End("wire"), [("fw", "firewall", fw_tcp(0), where), ("nat", "nat", NAT, where)], nat=True
        )
        add_chains(tb, [chain])
        tb.start_watchdog(DetectorConfig(interval_s=0.05))
        took = {}

        def kill_each() -> None:
            for nf_id in ("fw", "nat"):
                inst = tb.agent.state.nfs[nf_id].instances[0]
                t0 = time.monotonic()
                os.kill(inst.pid, signal.SIGKILL)
                ev = wait(lambda i=inst: next((h for h in tb.agent.state.history
                                               if h["event"] == "nf-failover" and h["failed"] == i.id), None),
                          10, f"{nf_id}'s failover")  # fmt: skip
                took[nf_id] = (round((time.monotonic() - t0) * 1000, 1), ev)
                time.sleep(1.0)

        [rep] = run(tb, [chain], conns=8, seconds=8, during=kill_each)
        print(
            f"\n{where}: failover (kill -9 -> remapped, ms): { ({k: v[0] for k, v in took.items()}) }; tcp: {rep}"
        )
        assert rep["broken"] == 0 and rep["stalled"] == 0, rep
        assert rep["echoed"] > 0.9 * rep["sent"], rep
        for nf_id, (_, ev) in took.items():
            assert ev["reason"] == "dead" and not ev["used_standby"], ev
            nf = tb.agent.state.nfs[nf_id]
            assert nf.location == where and nf.instances[0].id == ev["replacement"]
    finally:
        tb.close()
        assert machine_snapshot(tb.name) == EMPTY
