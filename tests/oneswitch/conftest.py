"""An emulated host with OneSwitch (the system under test) and a reference OVS bridge with the same virtual
ports; both torn down and checked for leftovers at the end, pass or fail.

Virtual ports of the host: 1, 2 (snic0's Ethernet ports 0 and 1), 100, 101 (VMs), and two NF ports the tests
map themselves: 200 on the host switch (physical 200), 201 on snic0 (physical 200). A spare namespace on snic0
(physical 201) is where vport 200 moves in the remap test.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from emulated_host import naming as nm
from emulated_host.config import parse_config
from emulated_host.host import EmulatedHost
from emulated_host.oneswitch import jar_missing_reason
from host_datapath.oneswitch_client import OneSwitchClient
from testkit.hosts import EMPTY, machine_snapshot, needs_root, unique_name
from testkit.oneswitch import equiv
from testkit.oneswitch.pktio import Endpoint
from testkit.oneswitch.refswitch import RefSwitch

VPORTS = [1, 2, 100, 101, 200, 201]
NF_HOST, NF_SNIC = 200, 201  # vports of the two NF ports
SPARE_SNIC_OFPORT = 201  # where vport 200 is remapped to
SPARE_HOST_OFPORT = 202  # a third instance of vport 200 (scale-out over three)

needs_jar = pytest.mark.skipif(bool(jar_missing_reason()), reason=jar_missing_reason() or "")
ONESWITCH = [pytest.mark.root, needs_root, needs_jar]  # pytestmark of modules that run OneSwitch


@dataclass
class OsHost:
    """The running emulated host with OneSwitch, and how to reach each virtual port's namespace."""

    host: EmulatedHost
    status: dict
    client: OneSwitchClient

    @property
    def name(self) -> str:
        return self.host.name

    @property
    def listen(self) -> str:
        return self.status["oneswitch"]["listen"]

    def nf(self, i: int) -> Endpoint:
        """NF namespace i: 0 on the host (vport 200), 1 on snic0 (vport 201), 2 the spare on snic0, 3 the spare
        on the host."""
        return Endpoint(f"{self.name}-nf{i}", f"{self.name}-n{i}")

    def endpoints(self) -> dict[int, list[Endpoint]]:
        n = self.name
        return {
            1: [Endpoint(nm.ns_outside(n, 0, 0), nm.if_eth(n, 0, 0)[1])],
            2: [Endpoint(nm.ns_outside(n, 0, 1), nm.if_eth(n, 0, 1)[1])],
            100: [Endpoint(nm.ns_vm(n, 0), nm.if_vm(n, 0)[0])],
            101: [Endpoint(nm.ns_vm(n, 1), nm.if_vm(n, 1)[0])],
            NF_HOST: [self.nf(0)],
            NF_SNIC: [self.nf(1)],
        }


def counter(client: OneSwitchClient, name: str) -> int:
    """The value of counter `name` in OneSwitch's /metrics (asserted present)."""
    for line in client.metrics().splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    raise AssertionError(f"{name} missing from /metrics")


def physical_errors(client: OneSwitchClient) -> int:
    """OFPT_ERRORs OneSwitch received from the physical switches so far (its /metrics)."""
    return counter(client, "oneswitch_physical_errors_total")


def open_pair(os_host: OsHost, ref: RefSwitch) -> tuple[equiv.Target, equiv.Target]:
    """OneSwitch (every vport of `os_host`; the spare namespace on snic0 is not mapped: anything reaching it is
    a difference, "unmapped") and the reference bridge, opened for equiv's packets."""
    sut = equiv.Target("oneswitch", os_host.listen, os_host.endpoints()).open()
    sut.endpoints["unmapped"] = [os_host.nf(2).open()]  # type: ignore[index]
    return sut, equiv.Target("reference", ref.target, ref.endpoints()).open()


def close_pair(*targets: equiv.Target) -> None:
    """Clears the rules and groups of each target and closes it."""
    for t in targets:
        equiv.clear(t)
        t.close()


def bring_up(**cfg) -> tuple[EmulatedHost, dict]:
    conf = {
        "name": unique_name(),
        "rundir": "/run/uno-test",
        "vms": 2,
        "snics": [{"pcie_gbps": 0, "eth_ports": 2}],
        **cfg,
    }
    host = EmulatedHost(parse_config(conf))
    return host, host.up()


def attach_nfs(host: EmulatedHost) -> None:
    sw = host.switches()
    try:
        n = host.name
        sw["host"].attach_namespace(f"{n}-nf0", f"{n}-n0", f"{n}-n0p", nm.NF_PORT_BASE)
        sw["snic0"].attach_namespace(f"{n}-nf1", f"{n}-n1", f"{n}-n1p", nm.NF_PORT_BASE)
        sw["snic0"].attach_namespace(f"{n}-nf2", f"{n}-n2", f"{n}-n2p", SPARE_SNIC_OFPORT)
        sw["host"].attach_namespace(f"{n}-nf3", f"{n}-n3", f"{n}-n3p", SPARE_HOST_OFPORT)
    finally:
        for s in sw.values():
            s.close()


def teardown(host: EmulatedHost) -> None:
    host.down()
    assert machine_snapshot(host.name) == EMPTY


@pytest.fixture(scope="session")
def os_host():
    """One emulated host with OneSwitch shared by the tests (each starts by clearing rules); NF ports attached and mapped (vports 200, 201)."""
    host, status = bring_up()
    try:
        attach_nfs(host)
        client = host.oneswitch().client(timeout=30)
        client.map_port(NF_HOST, "host", nm.NF_PORT_BASE, "nf0")
        client.map_port(NF_SNIC, "snic0", nm.NF_PORT_BASE, "nf1")
        yield OsHost(host, host.status(), client)
    finally:
        teardown(host)


@pytest.fixture(scope="session")
def ref():
    r = RefSwitch(unique_name(), VPORTS)
    try:
        yield r.up()
    finally:
        r.down()
        snap = machine_snapshot(r.name)
        assert not snap["netns"] and not snap["procs"] and not snap["rundir"], snap
