"""The OpenNF-style move of a local-state NF with real packets and processes (root): the firewall run with
`--store local` (its connection table in its process) on an emulated host with OneSwitch, moved host ->
sNIC -> host by `Agent.migrate`, which picks the local-state protocol (buffer at the target, state exported
from the old instance and imported into the target, buffer replayed).

- under a sequenced stream on an established connection (wire -> VM, passes only with the state): zero
  packets lost, no reordering, no buffer overflow; the connection still passes after both moves;
- the same move without the state transfer (a plain remap of the local NF) breaks the connection.
"""

from __future__ import annotations

import time

from testkit.hosts import EMPTY, machine_snapshot
from testkit.live import LIVE_MARKS, burst
from testkit.testbed import EST_PORT, Testbed, report

pytestmark = LIVE_MARKS


def test_local_state_move_keeps_connections_and_plain_remap_breaks_them():
    tb = Testbed(store="local", drain_s=0.5)
    try:
        tb.up()
        tb.add_firewall(at="host")
        nf = tb.agent.state.nfs["fw"]
        assert burst(tb, "vm", EST_PORT)["received"] == 50  # the VM opens the connection
        assert burst(tb, "out", EST_PORT)["received"] == 50  # the wire side's replies pass
        # A stream on the established connection, from the wire (dropped by a firewall without the state).
        run, pkts = 7001, 3000  # 3 s at 1000/s
        sink = tb.sink("vm", run, expect=pkts, idle_ms=3000)
        gen = tb.gen("out", run, flows=1, pkts=pkts, rate=1000, dst_port=EST_PORT)
        time.sleep(0.4)
        moves = []
        for target in ("snic0", "host"):
            old = nf.instances[0]
            tb.agent.migrate(nf, target)
            moves.append(tb.agent.last_migration)
            assert nf.location == target and not tb.runtime.alive(old)
        report(gen)
        got = report(sink)
        assert got["lost"] == 0 and got["duplicates"] == 0 and got["reordered"] == 0, got
        for m in moves:
            assert m.protocol == "local-state" and m.aborted_at is None
            steps = [s.step for s in m.steps]
            assert steps[steps.index("drain") :][:3] == ["drain", "export", "import"]
            assert steps.index("prepare") < steps.index("remap")  # the target's rules went in ahead
            assert m.state_bytes > 0 and m.state_entries >= 1 and m.buffer_overflow == 0
        assert sum(m.replayed for m in moves) > 0  # packets did wait in the target's buffer
        assert burst(tb, "out", EST_PORT)["received"] == 50  # the state moved twice

        # Without the state transfer the moved firewall no longer knows the connection.
        tb.agent.move_state = False
        tb.agent.migrate(nf, "snic0")
        assert not hasattr(tb.agent.last_migration, "protocol")
        assert burst(tb, "out", EST_PORT, expect_none=True)["received"] == 0
        assert burst(tb, "vm", EST_PORT)["received"] == 50  # new connections still open from the VM
    finally:
        tb.close()
    assert machine_snapshot(tb.name) == EMPTY
