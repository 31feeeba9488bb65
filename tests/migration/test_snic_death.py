"""A whole sNIC dies (root; real OneSwitch, Redis, sNIC agents, `nf` processes, kernel TCP in namespaces).

Two sNICs; every NF on snic0: a firewall and a NAT between vm0 and the wire behind snic1, and a firewall
between vm1 and vm2. snic0 dies at once (its agent, its OVS and its NFs: `EmulatedSnic.kill`, a DPU reboot).
The agent sees its heartbeat stop and its switch gone, starts every NF that ran there on the host and remaps
their ports: the TCP connections through them (NAT mapping and firewall state in Redis) all go on. snic0's
wire port is reported down. When snic0 comes back (a new agent, no NFs), the dead instances are released and,
once OneSwitch has its switch again, it is a place for NFs again. A host whose only NIC dies has no wire left (docs/snic.md)."""

from __future__ import annotations

import time

from host_datapath.oneswitch_client import OneSwitchClient
from testkit.hosts import EMPTY, machine_snapshot
from testkit.live import LIVE_MARKS
from testkit.poll import wait
from testkit.tcp_chain import NAT, End, TcpChain, add_chains, fw_tcp, run
from testkit.testbed import Testbed

pytestmark = LIVE_MARKS


def test_whole_snic_death_fails_its_nfs_over_with_tcp_intact():
    tb = Testbed(warm_slots=1, snics=2, vms=3)
    try:
        tb.up()
        chains = [
            TcpChain(
                0,
                End("wire", 1, 0),
                [("fw", "firewall", fw_tcp(0), "snic0"), ("nat", "nat", NAT, "snic0")],
                nat=True,
            ),  # fmt: skip
            TcpChain(1, End("vm", 2), [("fw2", "firewall", fw_tcp(1), "snic0")]),
        ]
        add_chains(tb, chains)
        assert {n.location for n in tb.agent.state.nfs.values()} == {"snic0"}
        tb.start_watchdog()
        seen = {}

        def snic_dies() -> None:
            t0 = time.monotonic()
            tb.host.snic("snic0").kill()
            ev = wait(lambda: next((h for h in tb.agent.state.history if h["event"] == "snic-dead"), None), 10,
                      "snic0's death")  # fmt: skip
            seen["ms"], seen["event"] = round((time.monotonic() - t0) * 1000, 1), ev

        reps = run(tb, chains, conns=6, seconds=8, during=snic_dies)
        print(f"\nsnic0 dead -> NFs remapped to the host: {seen['ms']} ms (agent: {seen['event']['total_ms']} ms); "
              f"tcp: {reps}")  # fmt: skip
        assert all(r["broken"] == 0 and r["stalled"] == 0 for r in reps), reps
        assert sorted(f["nf"] for f in seen["event"]["failed_over"]) == ["fw", "fw2", "nat"], seen["event"]
        assert {n.location for n in tb.agent.state.nfs.values()} == {"host"}
        # the controller's view: snic0's wire port (vport 1) is down, snic1's (vport 9) is up
        client = OneSwitchClient(tb.host.status()["oneswitch"]["rest"])
        assert client.health().switches["snic0"] != "connected"
        # snic0 comes back: its dead instances are released, it is a place for NFs again
        tb.host.snic("snic0").up()
        wait(lambda: any(h["event"] == "snic-back" for h in tb.agent.state.history), 30, "snic0 back")
        back = next(h for h in tb.agent.state.history if h["event"] == "snic-back")
        assert sorted(back["released"]) == sorted(f["failed"] for f in seen["event"]["failed_over"]), back
        assert tb.runtime.remote["snic0"].client.instances() == []
        # a location again once OneSwitch has reconnected to its switch (and reconciled it)
        wait(lambda: "snic0" not in tb.agent.ctx.down, 30, "snic0 placeable")
        assert client.health().switches["snic0"] == "connected"
        # the NFs move back (as the re-placement would after its dampening window), the watchdog on: OneSwitch
        # maps each vport where the agent says its NF runs, and the chains carry TCP again
        for nf in tb.agent.state.nfs.values():
            tb.agent.migrate(nf, "snic0")
        mapped = {p.vport: (p.switch, p.port) for p in client.ports()}
        for nf in tb.agent.state.nfs.values():
            assert nf.location == "snic0" and mapped[nf.vport] == (
                nf.instances[0].switch,
                nf.instances[0].ofport,
            )
        reps = run(tb, chains, conns=2, seconds=2, during=lambda: None, port=5620)
        assert all(r["broken"] == 0 and r["stalled"] == 0 and r["echoed"] > 0 for r in reps), reps
    finally:
        tb.close()
        assert machine_snapshot(tb.name) == EMPTY
