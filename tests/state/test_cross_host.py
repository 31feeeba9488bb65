"""Two emulated hosts sharing one state tier (root; real processes and packets): StatelessNF's cross-server
failover.

Host A runs a Redis Cluster (`redis.mode: cluster`); host B uses it as an operator's tier (`mode: external`,
A's nodes as seeds, A's admin password file). The same NF (id `fw`, tenant `default`) runs on both.

What the test shows: a connection opened through A's firewall instance (its record written to the cluster
by A) passes through B's instance of the same NF after A's instance was killed with SIGKILL: B's instance
reads the record A wrote. A flow never opened does not pass on B (the firewall still denies). Both agents
make the tenant's ACL user with the same derived password, so B's start does not cut A's NFs off.

What it does not show: one kernel TCP connection moving between the hosts. The two emulated hosts have
separate VMs and wires (namespaces with the same addresses), so no route carries one connection from A's
path to B's; the test sends the connection's packets (same 5-tuple) into B's path instead. TCP connections
through the NAT across a master's failover within one host: bench/state (broken_conns)."""

from __future__ import annotations

import os
import signal

from testkit.hosts import EMPTY, machine_snapshot
from testkit.live import LIVE_MARKS, burst
from testkit.testbed import EST_PORT, Testbed

pytestmark = LIVE_MARKS


def test_flow_state_written_on_host_a_is_served_on_host_b_after_a_dies():
    a = Testbed(rundir="/run/uno-test", redis={"mode": "cluster", "masters": 3, "replicas": 1})
    b = None
    try:
        a.up()
        a.add_firewall(at="host")
        assert burst(a, "vm", EST_PORT)["received"] == 50  # opened on A: its record is in the cluster
        tier = a.host.status()["redis"]
        b = Testbed(rundir="/run/uno-test", redis={
            "mode": "external", "nodes": [n["address"] for n in tier["nodes"]],
            "password_file": tier["password_file"],
        })  # fmt: skip
        b.up()
        assert b.host.status()["redis"]["mode"] == "external"
        assert sorted(n["address"] for n in b.host.status()["redis"]["nodes"]) == sorted(
            n["address"] for n in tier["nodes"]
        )
        a_inst = a.agent.state.nfs["fw"].instances[0]
        os.kill(a_inst.pid, signal.SIGKILL)  # A's instance dies (no watchdog: nothing replaces it on A)
        b.add_firewall(at="host")  # the same NF, on host B
        assert burst(b, "out", EST_PORT)["received"] == 50  # the reply passes on A's record
        assert burst(b, "out", EST_PORT + 3, expect_none=True)["received"] == 0  # never opened: denied
    finally:
        for tb in (b, a):
            if tb is not None:
                tb.close()
    for tb in (a, b):
        if tb is not None:
            assert machine_snapshot(tb.name) == EMPTY
