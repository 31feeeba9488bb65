"""The agent's balancer evens a skewed spread (nf_agent.balance, migration/reweight.py), with real packets and
processes (root): the firewall (state in Redis) scaled to 3 instances by the agent, 30 sequenced UDP flows of
ONE address pair VM -> firewall -> wire, the agent's balancer run every 0.5 s as `uno agent serve` does.

The start is skewed on purpose, so the test does not depend on how the hash happens to split these 30 flows:
the third instance's bucket weight is set low (400 against 1000, as if an earlier balancing had left it
there; OVS's rendezvous pick then gives it about r^2/3 = 5 % of the flows). The balancer must raise it until
every instance has at least 0.2 of the packets, without losing a packet; each raise holds the raised
instance until the others flushed, so the sink should see no packet of a flow after a later one either.
"""

from __future__ import annotations

import time

import pytest

from testkit.live import LIVE_MARKS, next_run
from testkit.testbed import Testbed, firewall_bed, report

pytestmark = LIVE_MARKS

FLOWS, PER_FLOW, PPS = 30, 1000, 1000.0  # 30 s
SKEW = [1000, 1000, 400]


@pytest.fixture(scope="module")
def bed():
    with firewall_bed(rundir="/run/uno-test", drain_s=0.5) as tb:
        yield tb


def rx(tb: Testbed) -> list[int]:
    """Each instance's rx counter (a stats call that gets no answer, e.g. on a loaded machine, is asked again:
    a missing reading must not count as 0)."""
    out = []
    for inst in tb.agent.state.nfs["fw"].instances:
        deadline = time.monotonic() + 5.0
        while not (st := tb.runtime.stats(inst)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert st, f"no stats from {inst.id}"
        out.append(int(st.get("counters", st).get("rx", 0) or 0))
    return out


def shares(a: list[int], b: list[int]) -> list[float]:
    d = [y - x for x, y in zip(a, b, strict=True)]
    return [x / max(1, sum(d)) for x in d]


def test_a_skewed_spread_of_30_udp_flows_gets_balanced_without_loss(bed):
    tb = bed
    agent = tb.agent
    agent.scale("fw", 3)
    nf = agent.state.nfs["fw"]
    ports = [(i.switch, i.ofport) for i in nf.instances]
    agent.ctx.mapper.set_instances(nf.vport, ports, weights=SKEW)  # behind the balancer's back: it reads
    assert (
        "fw" not in agent.balancer.weights
    )  # them from OneSwitch at its first decision (as after a restart)
    run = next_run()
    sink = tb.sink(
        "out",
        run,
        expect=FLOWS * PER_FLOW,
        idle_ms=2000,
        duration_ms=int(FLOWS * PER_FLOW / PPS) * 1000 + 60_000,
    )
    gen = tb.gen("vm", run, flows=FLOWS, pkts=PER_FLOW, rate=PPS, dst_port=5051)
    snaps: list[tuple[float, list[int]]] = []
    changes: list[tuple[float, list[int], int]] = []
    t0 = time.monotonic()
    try:
        while gen.poll() is None:
            time.sleep(0.5)
            snaps.append((time.monotonic() - t0, rx(tb)))
            d = agent.balance().get("fw")
            if d is not None:
                changes.append((time.monotonic() - t0, d.weights, len(snaps) - 1))
    finally:
        try:
            report(gen, timeout=120)
            r = report(sink, timeout=180)
            time.sleep(0.5)
            end = rx(tb)
        finally:
            agent.scale("fw", 1)
    first = snaps[changes[0][2]][1] if changes else end
    skewed = shares(snaps[0][1], first)
    settled_at = changes[-1][0] + 1.0 if changes else 0.0
    settled = next((s for t, s in snaps if t >= settled_at), end)
    after = shares(settled, end)
    print(f"\nskewed {[round(x, 3) for x in skewed]} -> {[round(x, 3) for x in after]} after {len(changes)} "
          f"changes {[(round(t, 1), w) for t, w, _ in changes]}; sink lost {r['lost']} reordered {r['reordered']}")  # fmt: skip
    assert min(skewed) < 0.15, f"the start was not skewed: {skewed}"
    w0 = changes[0][1]
    assert w0[0] == w0[1] and SKEW[2] / SKEW[0] < w0[2] / w0[0] <= 1.25 * SKEW[2] / SKEW[0] + 0.01, changes
    assert sum(end) - sum(settled) > 3000, (
        "too little traffic after the last change to judge",
        settled,
        end,
        snaps[-3:],
    )
    assert min(after) >= 0.2, (after, changes)
    assert r["lost"] == 0 and r["duplicates"] == 0, r
    assert r["reordered"] == 0, (r["reordered"], r["reorder_events"][:8], changes)
    events = [e for e in agent.state.history if e["event"] == "nf-balance"][-len(changes) :]
    assert all(e["held"] and e["flushed"] for e in events), events  # each raise held its gainer
