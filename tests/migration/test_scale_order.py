"""Scale changes keep each flow's packets in order (issue 28 part 6), with real packets and processes (root):
the firewall (state in Redis) on the host, not pinned, so its new instances go to snic0 (their flows cross
PCIe, tagged per instance slot), resized 1 -> 2 -> 3 -> 2 -> 1 by the agent with its defaults while 32
sequenced UDP flows at 50 Mbit/s pass VM -> firewall -> wire: the sink counts no packet arriving after a later
one of its flow, and none lost.

What keeps the order: a scale-out holds the new instances until the old ones flushed what they had; a scale-in
holds the staying instances until the leaving ones drained, and OneSwitch delivers frames still tagged for a
leaving instance's slot to that instance while it drains (before, they went to a staying instance, after their
flow's later frames: tests/oneswitch/test_inflight.py has the rule alone).
"""

from __future__ import annotations

import time

import pytest

from testkit.live import LIVE_MARKS, next_run
from testkit.testbed import firewall_bed, report

pytestmark = LIVE_MARKS

SIZES = [2, 3, 2, 1]  # from 1 instance: two scale-outs, two scale-ins
FLOWS, FRAME, GAP_S = 32, 1000, 1.5


@pytest.fixture(scope="module")
def bed():
    with firewall_bed(rundir="/run/uno-test", drain_s=0.5) as tb:
        yield tb


def test_sequenced_udp_keeps_its_order_across_scale_changes(bed):
    tb = bed
    pps = 50e6 / 8 / FRAME
    secs = len(SIZES) * GAP_S + 3.0
    per_flow = int(pps * secs / FLOWS)
    run = next_run()
    sink = tb.sink("out", run, expect=per_flow * FLOWS, idle_ms=2000, duration_ms=int(secs * 1000) + 60_000)
    gen = tb.gen("vm", run, flows=FLOWS, pkts=per_flow, rate=pps, size=FRAME, dst_port=5041)
    steps, locations = [], []
    try:
        time.sleep(1.0)
        for n in SIZES:
            tb.agent.scale("fw", n)
            res = tb.agent.moves.last_scale
            steps.append((n, [(s.step, s.ok, s.detail) for s in res.steps]))
            locations.append([i.location for i in tb.agent.state.nfs["fw"].instances])
            time.sleep(GAP_S)
    finally:
        report(gen, timeout=secs + 120)
        r = report(sink, timeout=secs + 180)
    assert "snic0" in locations[1], f"no instance across PCIe: {locations}"
    assert r["lost"] == 0 and r["duplicates"] == 0, r
    assert r["reordered"] == 0, (r["reordered"], r["reorder_events"][:8], steps)
    # both scale-ins held the staying instances and drained the leaving ones
    ins = [s for n, s in steps if n in (2, 1) and any(step == "drain" for step, _, _ in s)]
    assert len(ins) == 2 and all(any(step == "hold" and ok for step, ok, _ in s) for s in ins), ins
