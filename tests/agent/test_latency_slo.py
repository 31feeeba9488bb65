"""Latency-aware placement end to end: on an emulated host with OneSwitch, `uno agent serve` places a chain
VM web -> firewall -> VM web2 under its SLO (`expected.latency_us`) with the latencies measured on this kind
of host (placement/profiles-emulated.json: the firewall's per location, the PCIe crossing's). With the NF on
the sNIC the chain crosses PCIe twice (down to it, back up): a tight SLO keeps it on the host, a loose one
lets the agent move it there, tightening again brings it back. Real NF processes, real pings through the
chain; the decision is asserted, never a latency (the measured latencies are ./uno bench latency's)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from demo.chain import Chain
from emulated_host import naming as nm
from nf_agent.client import call
from placement.latency_profiles import PCIE_KEY
from placement.profiles import EMULATED_PROFILES, read_profile_file
from testkit.agent_host import AGENT_E2E, FW_CONFIG, REPO, agent_host, install_chain
from testkit.traffic import ping

pytestmark = AGENT_E2E


def measured_slos() -> tuple[float, float, float, float]:
    """(all-host prediction, sNIC prediction, tight SLO, loose SLO) from the measured profiles."""
    raw = read_profile_file(EMULATED_PROFILES)
    fw, link = raw["firewall"], raw[PCIE_KEY]["snic0"]
    host_us = fw["latency_us"]["host"]
    snic_us = fw["latency_us"]["nic"] + 2 * link["latency_us"]
    assert snic_us > host_us, f"measured profiles: the sNIC path ({snic_us} us) is not slower than the host's"
    return host_us, snic_us, host_us + (snic_us - host_us) / 2, 2 * snic_us


def chain_row(url: str) -> dict:
    code, rows = call(url, "GET", "/v1/chains")
    assert code == 200, rows
    (row,) = rows
    return row


def replace(url: str) -> dict:
    code, dec = call(url, "POST", "/v1/placement/run", {"force": True})
    assert code == 200, dec
    return dec


def test_a_tight_slo_keeps_the_chain_from_crossing_pcie_twice_and_a_loose_one_lets_it(tmp_path):
    host_us, snic_us, tight, loose = measured_slos()
    args = ("--profiles", str(EMULATED_PROFILES), "--dampening", "0", "--flap-window", "0")
    with agent_host(tmp_path, vms=2, agent_args=args) as (host, status, _agent, url):
        for vm in ("web", "web2"):
            assert call(url, "POST", "/v1/vms", {"id": vm})[0] == 201
        code, body = call(url, "POST", "/v1/nfs", {"type": "firewall", "id": "fw", "config": FW_CONFIG,
                                                   "expected": {"src": "web", "dst": "web2", "gbps": 0.01,
                                                                "latency_us": tight}})  # fmt: skip
        assert code == 201, body
        install_chain(status, Chain(nm.vport_vm(0), nm.mac(1, 0, 0), nm.vport_vm(1), nm.mac(1, 0, 1),
                                    (body["vport"],)))  # fmt: skip
        vm0, vm1_ip = nm.ns_vm(host.name, 0), nm.ip_vm(1)

        # tight: the firewall is placed on the host (0 crossings), although the sNIC would save host CPU
        row = chain_row(url)
        assert row["vertices"] == ["web", "fw", "web2"] and row["locations"] == ["host", "host", "host"]
        assert row["pcie_crossings"] == 0 and row["within_slo"] is True
        assert row["predicted_latency_us"] == pytest.approx(host_us, abs=0.01)
        assert row["slo_us"] == pytest.approx(tight)
        assert ping(vm0, vm1_ip)  # real packets through the NF on the host

        # loose: the agent's own re-placement moves it to the sNIC (two crossings, within the SLO)
        assert call(url, "PATCH", "/v1/nfs/fw", {"expected": {"latency_us": loose}})[0] == 200
        dec = replace(url)
        assert [(m["id"], m["to"]) for m in dec["moves"]] == [("fw", "snic0")], dec
        row = chain_row(url)
        assert row["locations"] == ["host", "snic0", "host"] and row["pcie_crossings"] == 2
        assert row["predicted_latency_us"] == pytest.approx(snic_us, abs=0.01) and row["within_slo"] is True
        assert ping(vm0, vm1_ip)  # and through the NF on the sNIC
        code, nf = call(url, "GET", "/v1/nfs/fw")
        assert code == 200 and nf["location"] == "snic0"
        assert nf["latency"]["chain"]["id"] == "chain-fw" and nf["latency"]["chain"]["pcie_crossings"] == 2
        assert nf["latency"]["nf_us"] == pytest.approx(read_profile_file(EMULATED_PROFILES)["firewall"]
                                                       ["latency_us"]["nic"])  # fmt: skip
        cli = subprocess.run([sys.executable, "-m", "uno_cli.main", "agent", "chains", "--agent", url], cwd=REPO,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        assert cli.returncode == 0, cli.stderr
        assert "chain-fw" in cli.stdout and "fw@snic0" in cli.stdout and f"{snic_us:.1f}" in cli.stdout

        # tight again: the placement breaks the SLO, so it is left at once (no hysteresis)
        assert call(url, "PATCH", "/v1/nfs/fw", {"expected": {"latency_us": tight}})[0] == 200
        dec = replace(url)
        assert [(m["id"], m["to"]) for m in dec["moves"]] == [("fw", "host")], dec
        assert chain_row(url)["pcie_crossings"] == 0
        assert ping(vm0, vm1_ip)
