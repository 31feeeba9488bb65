"""The host switch: a private userspace OVS in its own namespace with one bridge."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from host_datapath.of_endpoint import ControllerRelay, OpenFlowTcpEndpoint, parse_tcp_target
from host_datapath.ovs_instance import OvsInstance
from host_datapath.switch import SwitchDriver
from host_datapath.sysutil import DatapathError, netns_add


@dataclass
class HostSwitch:
    """Namespace `netns`, OVS state in `rundir`, bridge `bridge`."""

    netns: str
    rundir: Path
    bridge: str

    def __post_init__(self) -> None:
        self.ovs = OvsInstance(self.rundir, self.netns)
        self.endpoint = OpenFlowTcpEndpoint(self.rundir, self.bridge)
        self.driver = SwitchDriver(
            self.bridge, self.ovs.db_remote, netns=self.netns, listeners=(self.endpoint.controller_target,)
        )

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

    def close(self) -> None:
        """Drop the OVSDB connection (the switch keeps running)."""
        self.driver.close()

    def status(self) -> dict:
        try:
            ports = self.driver.ports() if self.ovs.running() else {}
        except DatapathError:
            ports = {}
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
