"""Live migration and failover tests on the testbed (testkit.testbed): their marks, a burst of one flow, and a
kill -9 under load."""

from __future__ import annotations

import os
import signal
import time

import pytest

from emulated_host.oneswitch import jar_missing_reason
from nf_runtime.runtime import NF_BINARY
from testkit.hosts import needs_root
from testkit.poll import wait
from testkit.testbed import EST_PORT, TRAFFIC, Testbed, report

LIVE_MARKS = [
    pytest.mark.root,
    needs_root,
    pytest.mark.skipif(bool(jar_missing_reason()), reason=jar_missing_reason() or ""),
    pytest.mark.skipif(
        not NF_BINARY.exists() or not TRAFFIC.exists(), reason="nfs not built (setup.sh rust)"
    ),
]
_runs = iter(range(100, 10_000))


def next_run() -> int:
    """A run id no other stream of this test session uses (the sink tells streams apart by it)."""
    return next(_runs)


def burst(tb: Testbed, side: str, dst_port: int, pkts: int = 50, expect_none: bool = False) -> dict:
    """`pkts` packets of one flow from `side` to the other; the sink's report."""
    run = next_run()
    sink = tb.sink("out" if side == "vm" else "vm", run, expect=pkts, idle_ms=2000,
                   duration_ms=3000 if expect_none else 60_000)  # fmt: skip
    report(tb.gen(side, run, flows=1, pkts=pkts, rate=500, dst_port=dst_port))
    return report(sink)


def kill_under_load(tb: Testbed, standby: bool = False) -> tuple[dict, dict]:
    """kill -9 the firewall while the wire side sends on the established connection; the failover event and
    the sink's report of that stream."""
    if standby:
        tb.agent.start_standby("fw")
    tb.start_watchdog()
    nf = tb.agent.state.nfs["fw"]
    old = nf.instances[0]
    run = next_run()
    sink = tb.sink("vm", run, expect=2000, idle_ms=3000, duration_ms=30_000)
    gen = tb.gen("out", run, flows=1, pkts=2000, rate=1000, dst_port=EST_PORT)
    time.sleep(0.5)
    os.kill(old.pid, signal.SIGKILL)
    wait(lambda: any(h["event"] == "nf-failover" and h["failed"] == old.id for h in tb.agent.state.history), 60,
         "failover")  # fmt: skip
    report(gen)
    got = report(sink)
    ev = next(h for h in reversed(tb.agent.state.history) if h["event"] == "nf-failover")
    assert ev["failed"] == old.id and ev["reason"] == "dead" and ev["used_standby"] is standby
    assert tb.runtime.alive(nf.instances[0]) and not tb.runtime.alive(old)
    assert tb.agent.mapper.mapped()[nf.vport] == (nf.instances[0].switch, nf.instances[0].ofport)
    tb.watchdog.stop()
    return ev, got
