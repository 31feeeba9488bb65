"""Faucet as the only controller of OneSwitch (OneSwitch connects actively to it): one VLAN over every virtual
port; VMs, the outside and NF ports on the host and on the sNIC ping each other through Faucet's translated
multi-table pipeline (its VLAN push/pop, learning by packet-in, flooding)."""

from __future__ import annotations

import subprocess

from emulated_host import naming as nm
from emulated_host.host import ping
from host_datapath.sysutil import DatapathError, wait_for
from testkit.hosts import unique_name
from testkit.oneswitch.faucet import Faucet

from .conftest import ONESWITCH, SPARE_SNIC_OFPORT, attach_nfs, bring_up, counter, physical_errors, teardown

pytestmark = ONESWITCH
VPORTS = [1, 2, 100, 101, 200, 201]
NF_VPORTS = (200, 201)
NF_IPS = {0: "10.77.5.1", 1: "10.77.5.2"}  # nf0 on the host switch (vport 200), nf1 on snic0 (vport 201)
PAIRS = [("vm0", "out0"), ("vm0", "vm1"), ("vm1", "nf_snic"), ("out0", "nf_host"), ("nf_host", "nf_snic"),
         ("out1", "vm1"), ("nf_snic", "out1")]  # fmt: skip


def faucet_programmed(client) -> bool:
    """Faucet has pushed its pipeline (rules in at least 3 virtual tables)."""
    return len({r.table for r in client.rules()}) >= 3


def nf_ports_configured(client) -> bool:
    """Faucet has taken both NF ports into its VLAN (its table-0 rule for each, sent when it sees the port)
    and OneSwitch has installed those rules on the physical switches."""
    want = {f"in_port={p},vlan_vid=0x0" for p in NF_VPORTS}
    return want <= {r.match for r in client.rules() if r.table == 0 and r.physical}


def reaches(netns: str, ip: str, within_s: float) -> bool:
    """Pings until one gets through or `within_s` passes: the first packets teach Faucet where the hosts are
    (packet-in, then its learnt rules go through OneSwitch), which takes long on a loaded machine."""
    try:
        wait_for(lambda: ping(netns, ip, count=2), within_s, f"{netns} to reach {ip}")
    except DatapathError:
        return False
    return True


def scenario(tmp_path, nf_ports_first: bool, wire_vlans: int = 1) -> None:
    """`nf_ports_first`: the NF ports are mapped before Faucet starts (it sees all ports at once); else Faucet
    programs OneSwitch first and the NF ports appear later (PORT_STATUS ADD), as when the agent adds NFs.
    `wire_vlans`: OneSwitch's (2: frames may come in QinQ)."""
    name = unique_name()
    faucet = Faucet(tmp_path / "faucet", int(nm.dpid(name), 16), VPORTS)
    host = None
    try:
        if not nf_ports_first:
            faucet.start()
        host, _ = bring_up(name=name, oneswitch={"controllers": [faucet.target], "wire_vlans": wire_vlans})
        attach_nfs(host)
        for i, ip in NF_IPS.items():
            subprocess.run(
                ["ip", "-n", f"{name}-nf{i}", "addr", "add", f"{ip}/16", "dev", f"{name}-n{i}"], check=True
            )
        client = host.oneswitch().client(timeout=30)
        if not nf_ports_first:
            wait_for(lambda: faucet_programmed(client), 60, "Faucet to program OneSwitch")
        assert client.map_port(200, "host", nm.NF_PORT_BASE, "nf0")
        assert client.map_port(201, "snic0", nm.NF_PORT_BASE, "nf1")
        assert SPARE_SNIC_OFPORT not in {p.port for p in client.ports() if p.switch == "snic0"}
        if nf_ports_first:
            faucet.start()  # OneSwitch reconnects to it (backoff at most 5 s)
            wait_for(lambda: faucet_programmed(client), 60, "Faucet to program OneSwitch")
        wait_for(lambda: nf_ports_configured(client), 60, "Faucet to configure the NF ports")
        ns = {
            "vm0": (nm.ns_vm(name, 0), nm.ip_vm(0)),
            "vm1": (nm.ns_vm(name, 1), nm.ip_vm(1)),
            "out0": (nm.ns_outside(name, 0, 0), nm.ip_outside(0, 0)),
            "out1": (nm.ns_outside(name, 0, 1), nm.ip_outside(0, 1)),
            "nf_host": (f"{name}-nf0", NF_IPS[0]),
            "nf_snic": (f"{name}-nf1", NF_IPS[1]),
        }
        failed = [f"{a} -> {b}" for a, b in PAIRS if not reaches(ns[a][0], ns[b][1], 30)]
        if failed:
            log = [
                ln for ln in host.oneswitch().logfile.read_text(errors="replace").splitlines() if "WARN" in ln
            ]
            raise AssertionError(
                f"pings failed: {failed}\n{faucet.tail(20)}\n--- OneSwitch warnings\n" + "\n".join(log[-10:])
            )
        # Every translated rule was taken by the physical switches (OVS refuses inconsistent ones).
        warns = [
            ln for ln in host.oneswitch().logfile.read_text(errors="replace").splitlines() if "error" in ln
        ]
        assert physical_errors(client) == 0, "\n".join(warns[:5])
        assert (
            counter(client, "oneswitch_translation_errors_total") == 0
        )  # OneSwitch carried every rule Faucet sent (wire_vlans 2 too)
        rules = client.rules()
        assert len({r.table for r in rules}) >= 3  # Faucet's multi-table pipeline went through OneSwitch
        assert any(p.switch == "snic0" for r in rules for p in r.physical)  # and was spread onto the sNIC
    finally:
        try:
            if host is not None:
                teardown(host)
        finally:
            faucet.stop()


def test_faucet_drives_oneswitch_hosts_ping_across_host_and_snic(tmp_path):
    scenario(tmp_path, nf_ports_first=True)


def test_faucet_with_nf_ports_mapped_while_it_runs(tmp_path):
    scenario(tmp_path, nf_ports_first=False)


def test_faucet_with_qinq_safe_wire(tmp_path):
    """With wire_vlans 2 (frames may come in QinQ) Faucet's pipeline is still carried."""
    scenario(tmp_path, nf_ports_first=True, wire_vlans=2)
