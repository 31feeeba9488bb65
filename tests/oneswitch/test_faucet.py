"""Faucet as the only controller of OneSwitch (OneSwitch connects actively to it): one VLAN over every virtual
port; VMs, the outside and NF ports on the host and on the sNIC ping each other through Faucet's translated
multi-table pipeline (its VLAN push/pop, learning by packet-in, flooding)."""

from __future__ import annotations

import subprocess

import pytest

from nf_agent.emulated_host import naming as nm
from nf_agent.emulated_host.host import ping

from .conftest import ONESWITCH, SPARE_SNIC_OFPORT, attach_nfs, bring_up, teardown
from .faucet import Faucet

pytestmark = ONESWITCH
VPORTS = [1, 2, 100, 101, 200, 201]
NF_IPS = {0: "10.77.5.1", 1: "10.77.5.2"}  # nf0 on the host switch (vport 200), nf1 on snic0 (vport 201)


def test_faucet_drives_oneswitch_hosts_ping_across_host_and_snic(tmp_path):
    from tests.datapath.conftest import unique_name

    name = unique_name()
    faucet = Faucet(tmp_path / "faucet", int(nm.dpid(name), 16), VPORTS).start()
    host = None
    try:
        host, status = bring_up(name=name, oneswitch={"controllers": [faucet.target]})
        attach_nfs(host)
        for i, ip in NF_IPS.items():
            subprocess.run(["ip", "-n", f"{name}-nf{i}", "addr", "add", f"{ip}/16", "dev", f"{name}-n{i}"], check=True)
        client = host.oneswitch().client(timeout=30)
        assert client.map_port(200, "host", nm.NF_PORT_BASE, "nf0")
        assert client.map_port(201, "snic0", nm.NF_PORT_BASE, "nf1")
        assert SPARE_SNIC_OFPORT not in {p.port for p in client.ports() if p.switch == "snic0"}
        ns = {
            "vm0": (nm.ns_vm(name, 0), nm.ip_vm(0)),
            "vm1": (nm.ns_vm(name, 1), nm.ip_vm(1)),
            "out0": (nm.ns_outside(name, 0, 0), nm.ip_outside(0, 0)),
            "out1": (nm.ns_outside(name, 0, 1), nm.ip_outside(0, 1)),
            "nf_host": (f"{name}-nf0", NF_IPS[0]),
            "nf_snic": (f"{name}-nf1", NF_IPS[1]),
        }
        pairs = [("vm0", "out0"), ("vm0", "vm1"), ("vm1", "nf_snic"), ("out0", "nf_host"), ("nf_host", "nf_snic"),
                 ("out1", "vm1"), ("nf_snic", "out1")]  # fmt: skip
        failed = []
        for a, b in pairs:
            # The first packets teach Faucet where the hosts are (packet-in); allow it a few tries.
            ok = any(ping(ns[a][0], ns[b][1], count=2) for _ in range(5))
            if not ok:
                failed.append(f"{a} -> {b}")
        if failed:
            log = host.oneswitch().logfile.read_text(errors="replace").splitlines()[-30:]
            rules = "\n".join(f"  t{r.table} p{r.priority} {r.match} -> {r.instructions}" for r in client.rules())
            raise AssertionError(f"pings failed: {failed}\n{faucet.tail(40)}\n--- OneSwitch log\n" + "\n".join(log) + f"\n--- virtual rules\n{rules}")
        rules = client.rules()
        tables = {r.table for r in rules}
        assert len(tables) >= 3, tables  # Faucet's multi-table pipeline went through OneSwitch
        assert any(p.switch == "snic0" for r in rules for p in r.physical)  # and was spread onto the sNIC
    finally:
        try:
            if host is not None:
                teardown(host)
        finally:
            faucet.stop()
