"""End to end (root, real OVS, OneSwitch, the agent in-process): a filtering table installed by a controller's
flow-mods through OneSwitch, placed on the sNIC by the agent's solver from the measured traffic, filters
exactly the packets it filtered on the host (one probe per rule, both directions); a table over the sNIC's
max_rules stays on the host with the reason "memory" or OneSwitch's refusal."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from domain.errors import TableRefused
from emulated_host import naming as nm
from testkit.live import LIVE_MARKS, next_run
from testkit.testbed import Testbed, report

pytestmark = LIVE_MARKS
REPO = Path(__file__).resolve().parents[2]
N = 40  # filtering rules of table 0; rule i matches UDP source port 10000 + i, destination port 5001
BIG = 120  # table 2's rules: more than max_rules
MAX_RULES = 100
HIGH = 101


def allowed(i: int) -> bool:
    return i % 4 == 0


def priority(i: int) -> int:
    """Half of table 0's rules (allowing and dropping ones) one priority higher: a split at HIGH keeps them
    on the host (none overlap: no verdict changes)."""
    return HIGH if i % 8 < 4 else 100


def flows(vm: int, wire: int) -> list[str]:
    """Table 0 filters, table 1 forwards (in_port wire <-> VM); table 2 holds counting rules no goto reaches,
    more than the sNIC's max_rules."""
    out = [
        f"table=0,priority={priority(i)},udp,tp_src={10000 + i},tp_dst=5001,actions="
        + ("goto_table:1" if allowed(i) else "drop")
        for i in range(N)
    ]
    out.append("table=0,priority=0,actions=goto_table:1")
    out += [
        f"table=1,priority=10,in_port={wire},actions=output:{vm}",
        f"table=1,priority=10,in_port={vm},actions=output:{wire}",
    ]
    out += [f"table=2,priority=100,udp,tp_src={20000 + i},tp_dst=7000,actions=drop" for i in range(BIG)]
    return out


def probe(tb: Testbed, to_vm: bool, tmp: Path) -> set[int]:
    """One packet per rule from the wire to the VM (or back); the rule indexes whose packet arrived."""
    ns, iface = (tb.vm_ns, tb.vm_if) if to_vm else (tb.out_ns, tb.out_if)
    path = tmp / f"cap-{uuid.uuid4().hex[:6]}.json"
    cap = subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, "-m", "testkit.udp_capture", iface, str(path), "2000", "20"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    try:
        assert '"ready"' in cap.stdout.readline()
        report(tb.gen("out" if to_vm else "vm", next_run(), flows=N, pkts=1, rate=500, dst_port=5001))
        cap.communicate(timeout=60)
    finally:
        if cap.poll() is None:
            cap.kill()
            cap.wait()
    return {sport - 10000 for sport, dport in json.loads(path.read_text()) if dport == 5001}


def flow_counts(tb: Testbed) -> dict[int, int]:
    """Table 0's filter rules' packet counts as the controller sees them (OneSwitch's merged FLOW stats)."""
    out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", tb.listen, "table=0"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    got = {}
    for line in out.splitlines():
        m = re.search(r"n_packets=(\d+),.*tp_src=(\d+),tp_dst=5001", line)
        if m:
            got[int(m[2]) - 10000] = int(m[1])
    return got


def test_agent_offloads_a_filter_table_that_filters_the_same_packets(tmp_path):
    with Testbed(max_rules=MAX_RULES) as tb:
        lines = flows(nm.vport_vm(0), nm.vport_eth(0, 0))
        (tmp_path / "rules.flows").write_text("\n".join(lines) + "\n")
        subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "del-flows", tb.listen], check=True)
        # Table 2 does not fit the sNIC: copied "everywhere" (the default) its flow-mods would be refused
        # (TABLE_FULL), so the operator keeps it on the host before the controller fills it.
        assert tb.host.oneswitch().client().move_table(2, "host").to == "host"
        subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--bundle", "add-flows", tb.listen,
                        str(tmp_path / "rules.flows")], check=True)  # fmt: skip
        expected = {i for i in range(N) if allowed(i)}
        on_host = {d: probe(tb, d, tmp_path) for d in (True, False)}
        assert on_host == {True: expected, False: expected}

        # traffic the agent measures: the tables' load, so offloading saves host CPU
        load = tb.gen("out", next_run(), flows=8, pkts=400, rate=800, dst_port=6000)
        tb.agent.sample()
        time.sleep(1.5)
        tb.agent.sample()
        out = tb.agent.place_tables()
        report(load)
        assert {m["table"]: m["to"] for m in out["moves"]}.get(0) == "snic0", out
        rows = {r["table"]: r for r in tb.agent.tables()}
        assert rows[0]["location"] == "snic0" and rows[0]["why"] is None
        assert rows[2]["location"] == "host"  # 120 rules > max_rules 100: never offloaded
        assert rows[2]["why"]["reason"] in ("memory", "refused by OneSwitch"), rows[2]
        assert rows[2]["split"] is None and rows[0]["split"] is None
        assert tb.host.oneswitch().client().tables()[0].location == "snic0"
        # split, it does not fit either: OneSwitch's split keeps the whole table on the sNIC (the high part
        # on the host besides), so it refuses with the sNIC's max_rules and nothing changes
        with pytest.raises(TableRefused, match="max_rules"):
            tb.host.oneswitch().client().move_table(2, "snic0", host_min_priority=100)
        t2 = {t.table: t for t in tb.host.oneswitch().client().tables()}[2]
        assert (t2.location, t2.host_min_priority) == ("host", None)

        offloaded = {d: probe(tb, d, tmp_path) for d in (True, False)}
        assert offloaded == on_host  # 0 differences

        # an operator's pin brings it back (make-before-break) and the filter is still the same
        assert tb.agent.pin_table(0, "host")["pin"] == "host"
        assert {d: probe(tb, d, tmp_path) for d in (True, False)} == on_host

        # an operator's split pin: table 0 split on snic0 at HIGH through OneSwitch's host_min_priority
        out = tb.agent.pin_table(0, "snic0", HIGH)
        assert out["pin"] == "snic0" and out["host_min_priority"] == HIGH, out
        row = {r["table"]: r for r in tb.agent.tables()}[0]
        high = sum(1 for i in range(N) if priority(i) >= HIGH)
        assert row["location"] == "snic0" and row["split"]["host_min_priority"] == HIGH, row
        assert row["split"]["rules"]["host"] == high  # the high part's replicas, no lower rule
        assert row["split"]["rules"]["snic0"] >= N + 1  # the whole table (and its miss rule)
        before = flow_counts(tb)
        assert {d: probe(tb, d, tmp_path) for d in (True, False)} == on_host  # verdicts both ways
        after = flow_counts(tb)
        # FLOW stats merged: every rule counted its two probes (one each way) once, wherever it matched
        assert {i: after[i] - before[i] for i in range(N)} == dict.fromkeys(range(N), 2)
        assert tb.agent.place_tables()["moves"] == []  # a placement run keeps the pinned split
        assert tb.host.oneswitch().client().tables()[0].host_min_priority == HIGH
