"""The host switch: a private userspace OVS in its own namespace with one bridge; plugging namespaces into a
bridge's ports (BridgePorts, also for a bridge someone else runs)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from host_datapath.of_endpoint import ControllerRelay, OpenFlowTcpEndpoint, parse_tcp_target
from host_datapath.ovs_instance import OvsInstance
from host_datapath.switch import SwitchDriver
from host_datapath.sysutil import (
    DatapathError,
    link_exists,
    netns_add,
    netns_del,
    netns_exists,
    quiet_switch_port,
    run,
    veth_pair,
)


class BridgePorts:
    """The ports of an OVS bridge whose switch runs in namespace `netns` (None: the root namespace; someone
    else runs the OVS): plug a namespace in as an OpenFlow port, unplug it. `driver` is the bridge's
    SwitchDriver."""

    # MTU of the veths it plugs in: room for a flow-id tag on full-size frames. An OVS-DPDK switch uses 1500,
    # the most its DPDK ports take (host_datapath/dpdk_ports.py).
    veth_mtu: ClassVar[int] = 1600

    def __init__(self, driver: SwitchDriver, netns: str | None):
        self.driver = driver
        self.netns = netns

    def close(self) -> None:
        """Drop the OVSDB connection (the switch keeps running)."""
        self.driver.close()

    def attach_namespace(
        self,
        ns: str,
        inside: str,
        port: str,
        ofport: int,
        ip_cidr: str | None = None,
        on_veth: Callable[[], object] | None = None,
    ) -> None:
        """Plug namespace `ns` (an NF or VM; created if missing) into the bridge as OpenFlow port `ofport`.

        A veth `inside` (in `ns`) <-> `port` (on the bridge, in the switch's namespace), offloads off, MTU
        `veth_mtu`, optional address `ip_cidr` on `inside`. Idempotent. Prefix names with the host's instance name
        (`NAME-...`): `uno down` then removes them with their namespace. On a failure what this call made
        (namespace, veth, bridge port) is removed again before the error is raised. `on_veth()` runs once
        the namespace's end is ready, before the bridge port is added (a cold NF start spawns `nf` there,
        so its start-up overlaps the OVSDB step; the caller stops what it started if the attach fails).
        """
        new_ns = not netns_exists(ns)
        made_veth = False
        try:
            netns_add(ns)
            if new_ns or not link_exists(inside, ns):  # a namespace just made has no veth yet
                made_veth = True
                veth_pair(inside, ns, port, self.netns, mtu=self.veth_mtu)
            if ip_cidr:
                run(["ip", "addr", "replace", ip_cidr, "dev", inside], netns=ns)
            quiet_switch_port(port, self.netns)
            if on_veth is not None:
                on_veth()
            self.add_bridge_port(port, ofport)
        except BaseException:
            # the attach's own error is the one to report
            if made_veth:
                with contextlib.suppress(Exception):
                    self.detach(port)
            if new_ns:
                with contextlib.suppress(Exception):
                    netns_del(ns)
            raise

    def add_bridge_port(self, port: str, ofport: int, shaped: bool = False) -> None:
        """Make kernel interface `port` (in the switch's namespace) OpenFlow port `ofport` of the bridge.

        `shaped`: the interface has a tc qdisc of ours (a PCIe link's tbf) that must stay in the packets' way.
        (The OVS-DPDK switch takes the interface with a DPDK af_packet vdev instead: ovs_dpdk.DpdkHostSwitch.)"""
        self.driver.add_port(port, ofport)
        if shaped:
            self.driver.keep_own_qdisc(port)

    def detach(self, port: str) -> None:
        """Remove bridge port `port` and its veth (the namespace on the other end stays)."""
        self.driver.del_port(port)
        if link_exists(port, self.netns):
            run(["ip", "link", "del", port], netns=self.netns)


@dataclass
class HostSwitch(BridgePorts):
    """Namespace `netns`, OVS state in `rundir`, bridge `bridge` (datapath `datapath_type`: netdev, or system
    where the openvswitch kernel module is loaded)."""

    netns: str
    rundir: Path
    bridge: str
    datapath_type: str = "netdev"

    def __post_init__(self) -> None:
        self.ovs = OvsInstance(self.rundir, self.netns)
        self.endpoint = OpenFlowTcpEndpoint(self.rundir, self.bridge)
        self.driver = SwitchDriver(
            self.bridge, self.ovs.db_remote, netns=self.netns, listeners=(self.endpoint.controller_target,),
            datapath_type=self.datapath_type,
        )  # fmt: skip

    def running(self) -> bool:
        return self.ovs.running()

    def ofctl_target(self) -> str:
        """The bridge's management socket (ovs-ofctl, the agent's port statistics)."""
        return f"unix:{self.rundir}/{self.bridge}.mgmt"

    def switch_info(self) -> dict:
        """`host.switch` of `uno status --json`: UNO's own private OVS."""
        return {"mode": "managed", "bridge": self.bridge, "ovsdb": self.ovs.db_remote,
                "datapath_type": self.datapath_type}  # fmt: skip

    def up(self) -> None:
        netns_add(self.netns)
        self.ovs.start()
        self.driver.ensure_bridge()
        self.endpoint.start()

    def connect_controllers(self, targets: list[str]) -> list[str]:
        """Make the bridge connect actively to controllers `tcp:HOST:PORT` of the root namespace.

        Each goes through a ControllerRelay (127.0.0.1 inside the switch's namespace is not the root's).
        Replaces the previous active controllers; an empty list removes them. Adding the first / removing the
        last active controller flushes the bridge's flows (OVS): connect before installing flows.
        """
        relays = [ControllerRelay(self.rundir, *parse_tcp_target(t)) for t in targets]
        self.driver.set_controller([r.start() for r in relays])
        keep = {r.unix_socket.name for r in relays}
        for pidfile in self.rundir.glob("ctl-*.pid"):
            if f"{pidfile.stem}.sock" not in keep:
                ControllerRelay(self.rundir, "", int(pidfile.stem.split("-", 1)[1])).stop()
        return [r.switch_target for r in relays]

    def down(self) -> None:
        for pidfile in self.rundir.glob("ctl-*.pid"):
            ControllerRelay(self.rundir, "", int(pidfile.stem.split("-", 1)[1])).stop()
        self.endpoint.stop()
        self.driver.close()
        self.ovs.stop()

    key = "host"  # its key in `uno status --json`

    def port_numbers(self) -> dict[str, int]:
        """Its bridge's ports (name -> OpenFlow port); {} when its OVS is down."""
        try:
            return self.driver.ports() if self.ovs.running() else {}
        except DatapathError:
            return {}

    def status(self) -> dict:
        ports = self.port_numbers()
        return {
            "netns": self.netns,
            "bridge": self.bridge,
            "ovsdb": self.ovs.db_remote,
            "openflow": f"unix:{self.rundir}/{self.bridge}.mgmt",
            "openflow_tcp": self.endpoint.target(),
            "openflow_tcp_socket": str(self.endpoint.unix_socket),
            "openflow_relay_pid": self.endpoint.pid(),
            "pids": self.ovs.pids(),
            "running": self.ovs.running(),
            "ports": ports,
        }
