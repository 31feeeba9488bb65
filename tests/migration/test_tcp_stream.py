"""Moving the IPS under a live TCP stream (root; real OneSwitch, Redis, `nf ips`, kernel TCP in namespaces).

The IPS keeps each TCP direction's stream state (expected sequence number, automaton state, out-of-order
buffer) in one record per connection. A make-before-break move used to let the old instance (still
working off its backlog) and the new one update that record at once: updates were lost, the new instance
waited for bytes the sender never resent, dropped what overflowed its out-of-order buffer and the stream
stalled for seconds. The move now starts the target buffering
and releases it once the old instance drained, so the target reads every write of the old one.

Checks: the stream completes (iperf3 -n: every byte sent and acknowledged), no IPS instance ever found its
record out of step (no ACK resync: before the fix 1 or more in every run seen, with 500-1000 packets dropped
by the new instance), and the move reports the target's queue replayed without overflow.
"""

from __future__ import annotations

import json
import subprocess
import time

from migration.testbed import OUT_MAC, VM_MAC, Testbed
from nf_agent.emulated_host import naming as nm
from tests.datapath.conftest import EMPTY, machine_snapshot
from tests.migration.live import LIVE_MARKS

pytestmark = LIVE_MARKS
IPS_CONFIG = {"signatures": [{"id": 1, "msg": "x", "content": "EVIL-DEMO-PAYLOAD"}], "action": "drop"}
STREAM_BYTES = 200 << 20  # a few seconds at this machine's rate through the IPS
# What a record that lost updates shows: the receiver ACKs bytes the record says were never seen (`resyncs`),
# or it is gone / unreadable. (`ooo_overflow` / `out_of_window` drops are not checked: unpaced, TCP grows
# until the host IPS's own port ring overflows, and the holes that leaves bring those drops with or without
# a move.)
OUT_OF_STEP = ("resyncs", "resync_gap_bytes", "no_state", "corrupt_state")


def test_ips_moved_under_a_tcp_stream_keeps_its_record_in_step():
    tb = Testbed(drain_s=0.5)
    try:
        tb.up()
        v = tb.add_nf("ips", "ips", IPS_CONFIG, at="snic0")
        eth, vmp = nm.vport_eth(0, 0), nm.vport_vm(0)
        tb._ofctl("del-flows")
        for f in (f"in_port={vmp},actions=output:{v}", f"in_port={eth},actions=output:{v}",
                  f"in_port={v},dl_src={VM_MAC},actions=output:{eth}",
                  f"in_port={v},dl_src={OUT_MAC},actions=output:{vmp}"):  # fmt: skip
            tb._ofctl("add-flow", f)
        ip = nm.ip_outside(0, 0)
        srv = subprocess.Popen(["ip", "netns", "exec", tb.out_ns, "iperf3", "-s", "-1", "-B", ip, "-p", "5399"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        tb.procs.append(srv)
        time.sleep(0.5)
        cli = subprocess.Popen(["ip", "netns", "exec", tb.vm_ns, "iperf3", "-c", ip, "-p", "5399", "-J",
                                "-n", str(STREAM_BYTES)], stdout=subprocess.PIPE, text=True)  # fmt: skip
        tb.procs.append(cli)
        nf = tb.agent.state.nfs["ips"]
        seen: dict[str, dict] = {}
        stop = tb.runtime.stop

        def stop_recording(inst):  # the counters of every instance, read just before it stops
            seen[inst.id] = tb.runtime.stats(inst) or {}
            return stop(inst)

        tb.runtime.stop = stop_recording
        moves = []
        time.sleep(1.0)
        # The demo's move (sNIC -> host). The way back is not checked here: the sNIC's PCIe link then becomes
        # the stream's bottleneck at once, the drops of that queue leave holes and the IPS's bounded
        # out-of-order buffer drops what comes after them (TCP recovers; not a lost update).
        assert cli.poll() is None, "the stream ended before the move: make STREAM_BYTES larger"
        tb.agent.migrate(nf, "host")
        moves.append(tb.agent.last_migration.to_json())
        out, _ = cli.communicate(timeout=300)
        seen[nf.instances[0].id] = tb.runtime.stats(nf.instances[0]) or {}
        res = json.loads(out)
        assert "error" not in res, res.get("error")
        # The sender got every byte acknowledged (the server's own count ends with its last report).
        assert res["end"]["sum_sent"]["bytes"] >= STREAM_BYTES
        assert [m["aborted_at"] for m in moves] == [None], moves
        # Every instance that carried the stream: its record never out of step, no fail-closed drops.
        for inst_id, st in seen.items():
            c, n = st.get("counters", {}), st.get("nf_stats", {})
            assert c.get("fail_closed_dropped") == 0, json.dumps([inst_id, c, moves])
            assert all(n.get(k) == 0 for k in OUT_OF_STEP), json.dumps([inst_id, n, moves])
        assert all(m["buffered"] and m["buffer_overflow"] == 0 for m in moves), moves
    finally:
        tb.close()
        assert machine_snapshot(tb.name) == EMPTY
