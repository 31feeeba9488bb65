"""The kinds of port an OVS-DPDK bridge (datapath_type netdev on ovs-vswitchd-dpdk) takes, as OVSDB Interface
settings; pure (no I/O).

- `af_packet(port, iface)`: a kernel interface of the switch's namespace read and written by DPDK's
  net_af_packet PMD (a TPACKET_V2 ring). UNO plugs a namespace (a VM, an NF instance) in with a veth whose
  switch end is taken this way (`DpdkHostSwitch.attach_namespace`); `qdisc_bypass=False` keeps the kernel's
  qdisc on the way out (the PMD bypasses it by default, which would skip a tc shaping of the link).
- `tap(port, iface)`: DPDK's net_tap PMD makes a kernel tap device `iface` in the switch's namespace (for
  the host's own stack). It needs as many rx as tx queues: OVS gives a port one tx queue per PMD thread
  plus one, so `n_rxq` is set to match.
- `vhost_user_client(socket)`: a VM's virtio NIC through vhost-user, OVS the client (`dpdkvhostuserclient`,
  `vhost-server-path`): QEMU (`-chardev socket,path=SOCKET,server=on`) or another vhost-user server owns
  the socket and OVS reconnects when it restarts.
- `pci(address)`: a physical port by PCI address (`dpdk-devargs=0000:03:00.0`); the device must be bound
  to a DPDK-capable driver (vfio-pci) beforehand and listed in `host.switch.dpdk.pci`.

MTU: DPDK 22.11's af_packet and tap PMDs refuse an MTU above 1500 (their maximum frame is 1518), so those
ports keep OVS's default 1500, and the af_packet PMD sets its kernel interface to 1500 too. The namespaces
plugged into such a switch (VMs, NFs) therefore get 1500-MTU veths (`DpdkHostSwitch.veth_mtu`): a full-size
frame with one flow-id tag is then 1518 bytes, which both OVS (it sends frames up to MTU + 18 bytes) and the
kernel (a veth takes MTU + one VLAN header) let through, also on a PCIe link's host end.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from domain.errors import ValidationError
from host_datapath.dpdk_options import parse_pci_address

MAX_IFNAME = 15
DPDK_VDEV_MTU = 1500  # the most DPDK 22.11's af_packet and tap PMDs take
MAX_UNIX_PATH = 107
VM_PORT_TYPES = ("veth", "vhostuser")


@dataclass(frozen=True)
class DpdkIface:
    """One OVSDB Interface's `type` and `options` (and `mtu_request`, None = OVS's default)."""

    type: str
    options: dict[str, str] = field(default_factory=dict)
    mtu: int | None = None


def _ifname(name: str, what: str) -> str:
    if (
        not isinstance(name, str)
        or not 0 < len(name) <= MAX_IFNAME
        or "," in name
        or "/" in name
        or " " in name
    ):
        raise ValidationError(what, f"{name!r} is not an interface name (1-15 characters, no ',', '/', ' ')")
    return name


def af_packet(port: str, iface: str | None = None, qdisc_bypass: bool = True, qpairs: int = 1) -> DpdkIface:
    """Port `port` on kernel interface `iface` (default: the same name) through a net_af_packet vdev.

    The vdev is named after the port (`net_af_packet_PORT`): one per port in the DPDK process."""
    _ifname(port, "port")
    iface = _ifname(iface or port, "iface")
    devargs = f"net_af_packet_{port},iface={iface},qpairs={qpairs},qdisc_bypass={int(qdisc_bypass)}"
    return DpdkIface("dpdk", {"dpdk-devargs": devargs})


def tap(port: str, iface: str | None = None, pmd_threads: int = 1) -> DpdkIface:
    """Port `port` as a kernel tap `iface` (default: the same name) made by a net_tap vdev."""
    _ifname(port, "port")
    iface = _ifname(iface or port, "iface")
    return DpdkIface("dpdk", {"dpdk-devargs": f"net_tap_{port},iface={iface}", "n_rxq": str(pmd_threads + 1)})


def vhost_user_client(socket: str, where: str = "socket") -> DpdkIface:
    """A vhost-user port, OVS the client of the server socket `socket` (an absolute path)."""
    if not isinstance(socket, str) or not socket.startswith("/") or len(socket.encode()) > MAX_UNIX_PATH:
        raise ValidationError(where, f"{socket!r} must be an absolute path of at most {MAX_UNIX_PATH} bytes")
    if "," in socket or "\0" in socket:
        raise ValidationError(where, f"{socket!r}: no ',' in a vhost-user socket path")
    return DpdkIface("dpdkvhostuserclient", {"vhost-server-path": socket})


def pci(address: str, where: str = "address") -> DpdkIface:
    """A physical port by PCI address (canonical form, see dpdk_options.parse_pci_address)."""
    return DpdkIface("dpdk", {"dpdk-devargs": parse_pci_address(address, where)})


@dataclass(frozen=True)
class VmPort:
    """How a VM is plugged into the host switch: `veth` (a namespace, as the emulated host's VMs) or
    `vhostuser` (a real VM's virtio NIC on `socket`)."""

    type: str = "veth"
    socket: str | None = None

    def iface(self) -> DpdkIface | None:
        """The DPDK interface for a vhost-user VM; None for a veth VM (plugged in by attach_namespace)."""
        return vhost_user_client(self.socket) if self.type == "vhostuser" and self.socket else None


def parse_vm_port(data: Any, where: str = "vms[0].port") -> VmPort:
    """A VM's `port` in the config: None/{} or {type: veth}, or {type: vhostuser, socket: PATH}."""
    if data is None:
        return VmPort()
    if not isinstance(data, Mapping):
        raise ValidationError(where, "expected a mapping {type: veth} or {type: vhostuser, socket: PATH}")
    kind = data.get("type", "veth")
    if kind not in VM_PORT_TYPES:
        raise ValidationError(f"{where}.type", f"{kind!r} is not one of {', '.join(VM_PORT_TYPES)}")
    known = {"type"} | ({"socket"} if kind == "vhostuser" else set())
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValidationError(
            f"{where}.{unknown[0]}", f"unknown key for a {kind} port (known: {', '.join(sorted(known))})"
        )
    if kind == "veth":
        return VmPort()
    if "socket" not in data:
        raise ValidationError(f"{where}.socket", "a vhostuser port needs the socket path of its VM")
    vhost_user_client(data["socket"], f"{where}.socket")
    return VmPort("vhostuser", data["socket"])
