"""OneSwitch reaches the host's own switch over its bridge's unix socket (no relay) and an emulated sNIC's switch
over its management network only (a separate machine: its bridge's listener on its management address): the
generated config names them, rules reach the real OVS through them, and an sNIC switch whose vswitchd died and
came back is reconnected and reconciled (its flows reinstalled) over the same path."""

from __future__ import annotations

import json
import os
import signal

from host_datapath.sysutil import pid_alive, wait_for
from testkit.oneswitch.pktio import ofctl13

from .conftest import ONESWITCH, bring_up, teardown

pytestmark = ONESWITCH


def test_switches_over_unix_sockets_and_a_restarted_vswitchd_is_reconciled():
    host, status = bring_up()
    try:
        conf = json.loads((host.rundir / "oneswitch" / "config.json").read_text())
        snic = status["snics"][0]
        assert snic["openflow_tcp"] == f"tcp:{snic['mgmt']['snic_ip']}:6653"
        assert {s["id"]: s["openflow"] for s in conf["switches"]} == {
            "host": f"unix:{status['host']['openflow_tcp_socket']}",
            "snic0": snic["openflow_tcp"],
        }
        client = host.oneswitch().client(timeout=30)
        listen = status["oneswitch"]["listen"]
        # vport 1 is snic0's Ethernet port 0 (physical 1), vport 100 the first VM on the host switch.
        ofctl13(
            listen,
            "add-flow",
            "table=0,priority=77,in_port=1,ip,nw_dst=10.7.7.7,actions=output:100",
            names=False,
        )
        wait_for(
            lambda: "nw_dst=10.7.7.7" in ofctl13(snic["openflow"], "dump-flows", names=False),
            10,
            "the rule on snic0",
        )

        old = snic["pids"]["ovs-vswitchd"]
        os.kill(old, signal.SIGKILL)
        wait_for(lambda: not pid_alive(old), 10, "snic0's vswitchd to die")
        wait_for(lambda: client.health().switches["snic0"] == "disconnected", 30, "OneSwitch to see it go")
        sw = host.switches()
        try:
            sw["snic0"].ovs.start()  # the same bridge (its config is in ovsdb), empty flow tables
        finally:
            for s in sw.values():
                s.close()
        wait_for(
            lambda: client.health().all_connected(), 30, "OneSwitch to reconnect over the management network"
        )
        wait_for(
            lambda: "nw_dst=10.7.7.7" in ofctl13(snic["openflow"], "dump-flows", names=False),
            30,
            "the rule reinstalled (reconcile)",
        )
        ofctl13(
            listen,
            "add-flow",
            "table=0,priority=78,in_port=1,ip,nw_dst=10.7.7.8,actions=output:100",
            names=False,
        )
        assert "nw_dst=10.7.7.8" in ofctl13(
            snic["openflow"], "dump-flows", names=False
        )  # add-flow waited for the barrier
    finally:
        teardown(host)
