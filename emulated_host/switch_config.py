"""The host switch's part of the configuration (`host.switch`, `vms` as a list, `snics[].host_port`): pure
validation into frozen dataclasses; every error is one line naming the key (`config: KEY: why`).

    host:
      switch:
        mode: managed | external      # managed (default): UNO's own private OVS; external: the operator's
        ovsdb: unix:/PATH/db.sock | tcp:ADDR:PORT   # external: the operator's OVSDB
        bridge: NAME                  # external: UNO's bridge there (default NAME-hbr)
        datapath_type: netdev | system
        adopt: false                  # external: take over an existing bridge UNO did not make
        dpdk: {hugepages_mb, pmd_cpu_mask, socket_mem, pci}   # managed: run the switch on OVS-DPDK
    vms: 2 | [{name, port: {type: veth | tap | vhostuser, name?, socket?}}]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from domain.errors import CliError, ValidationError
from host_datapath.dpdk_options import DpdkOptions, parse_pci_address
from host_datapath.dpdk_ports import VmPort, vhost_user_client

SWITCH_MODES = ("managed", "external")
DATAPATH_TYPES = ("netdev", "system")
SWITCH_KEYS = ("mode", "ovsdb", "bridge", "datapath_type", "adopt", "dpdk")
DEFAULT_EXTERNAL_OVSDB = "unix:/var/run/openvswitch/db.sock"  # the Debian/Ubuntu openvswitch-switch service
VM_PORT_TYPES = ("veth", "tap", "vhostuser")
MAX_VMS = 32

_OVSDB_RE = re.compile(r"^(unix:/\S+|tcp:([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\]):([1-9]\d{0,4}))$")
# OVS bridge and port names: a Linux interface name (1-15 characters, no '/', blanks or ':')
IFNAME_RE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,14}$")
_VM_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,14}$")


def config_error(where: str, msg: str) -> CliError:
    """The one-line error of a bad config key."""
    return CliError(f"config: {where}: {msg}")


@dataclass(frozen=True)
class HostSwitchConfig:
    """The host switch (`host.switch`): `managed` = UNO's own private OVS in the host's namespace (the
    emulated host; on OVS-DPDK when `dpdk` is given); `external` = a bridge of an Open vSwitch someone else runs
    (the server's), reached at `ovsdb`, where UNO makes (or, with `adopt`, takes over) only `bridge` and its own
    ports."""

    mode: str = "managed"
    ovsdb: str | None = None  # external: the operator's OVSDB
    bridge: str | None = None  # external: UNO's bridge there (None: NAME-hbr)
    datapath_type: str = "netdev"
    adopt: bool = False  # external: take over an existing bridge that UNO did not make
    dpdk: DpdkOptions | None = None  # managed: the OVS-DPDK settings (None: the plain userspace switch)

    @property
    def external(self) -> bool:
        return self.mode == "external"

    def as_dict(self) -> dict:
        """What `uno up` records (a later `uno down` removes what this switch made, whatever the config says
        by then)."""
        return {"mode": self.mode, "ovsdb": self.ovsdb, "bridge": self.bridge,
                "datapath_type": self.datapath_type, "adopt": self.adopt,
                "dpdk": self.dpdk.as_dict() if self.dpdk else None}  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict) -> HostSwitchConfig:
        dpdk = DpdkOptions.from_dict(data["dpdk"]) if data.get("dpdk") else None
        return cls(
            **{k: data[k] for k in ("mode", "ovsdb", "bridge", "datapath_type", "adopt") if k in data},
            dpdk=dpdk,
        )


@dataclass(frozen=True)
class VmConfig:
    """One VM slot on the host switch: an emulated VM (`veth`: a namespace UNO makes, one veth to the bridge),
    or a real VM's port: its existing tap device (`tap`, `port` = the device), or its virtio NIC through
    vhost-user (`vhostuser`: an OVS-DPDK port `port` of type dpdkvhostuserclient, `socket` = the socket the
    VM's QEMU serves)."""

    name: str
    type: str = "veth"
    port: str | None = None  # tap: the device; vhostuser: the OVS port's name (None: NAME-vuI)
    socket: str | None = None  # vhostuser: the vhost-user server socket

    @property
    def emulated(self) -> bool:
        return self.type == "veth"

    def vm_port(self) -> VmPort:
        """As host_datapath.dpdk_ports sees it (a managed OVS-DPDK switch plugs vhost-user VMs from it)."""
        return VmPort("vhostuser", self.socket) if self.type == "vhostuser" else VmPort()


def _mapping(where: str, raw: Any, known: tuple[str, ...]) -> dict:
    """A mapping (None = empty) whose keys are all in `known`."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise config_error(where, "expected a mapping")
    for key in raw:
        if key not in known:
            raise config_error(f"{where}.{key}", f"unknown key (known: {', '.join(known)})")
    return raw


def parse_host_switch(raw: Any, cpus: set[int] | None = None) -> HostSwitchConfig:
    """`host: {switch: {mode, ovsdb, bridge, datapath_type, adopt, dpdk}}` (`cpus`: the CPUs a PMD thread may
    use, default this process's affinity)."""
    host = _mapping("host", raw, ("switch",))
    sw = _mapping("host.switch", host.get("switch"), SWITCH_KEYS)
    mode = sw.get("mode", "managed")
    if mode not in SWITCH_MODES:
        raise config_error("host.switch.mode", f"{mode!r} is not one of: {', '.join(SWITCH_MODES)}")
    dp = sw.get("datapath_type", "netdev")
    if dp not in DATAPATH_TYPES:
        raise config_error("host.switch.datapath_type", f"{dp!r} is not one of: {', '.join(DATAPATH_TYPES)}")
    adopt = sw.get("adopt", False)
    if not isinstance(adopt, bool):
        raise config_error(
            "host.switch.adopt", f"expected true or false, got {type(adopt).__name__} {adopt!r}"
        )
    if mode == "managed":
        for key in ("ovsdb", "bridge", "adopt"):
            if key in sw:
                raise config_error(
                    f"host.switch.{key}",
                    "only with mode: external (a managed host switch is UNO's own private OVS, its bridge NAME-hbr)",
                )
        dpdk = None
        if "dpdk" in sw:
            if dp != "netdev":
                raise config_error(
                    "host.switch.dpdk", "needs datapath_type: netdev (OVS-DPDK is a userspace datapath)"
                )
            try:
                dpdk = DpdkOptions.parse(sw["dpdk"], cpus=cpus)
            except ValidationError as exc:
                raise config_error(exc.field, exc.message) from None
        return HostSwitchConfig(mode=mode, datapath_type=dp, dpdk=dpdk)
    if "dpdk" in sw:
        raise config_error(
            "host.switch.dpdk",
            "only with mode: managed (an external OVS's DPDK settings are its operator's; UNO does not change them)",
        )
    ovsdb = sw.get("ovsdb", DEFAULT_EXTERNAL_OVSDB)
    m = _OVSDB_RE.match(ovsdb) if isinstance(ovsdb, str) else None
    if not m or (m.group(3) and int(m.group(3)) > 65535):
        raise config_error(
            "host.switch.ovsdb", f"{ovsdb!r} is not unix:/PATH or tcp:ADDR:PORT (the operator's OVSDB)"
        )
    if ovsdb.startswith("unix:") and len(ovsdb.encode()) - len("unix:") > 107:
        raise config_error("host.switch.ovsdb", "the socket path is longer than 107 bytes")
    bridge = sw.get("bridge")
    if bridge is not None and (not isinstance(bridge, str) or not IFNAME_RE.match(bridge)):
        raise config_error(
            "host.switch.bridge", f"{bridge!r} is not a bridge name (1-15 characters [A-Za-z0-9_.-])"
        )
    return HostSwitchConfig(mode=mode, ovsdb=ovsdb, bridge=bridge, datapath_type=dp, adopt=adopt)


def parse_vms(raw: Any, switch: HostSwitchConfig) -> tuple[int, tuple[VmConfig, ...] | None]:
    """`vms: N` (N emulated VMs vm0..) or `vms: [{name, port: {type, name?, socket?}}, ...]`: the slot count
    and the list (None for a count)."""
    if not isinstance(raw, list):
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise config_error("vms", f"expected int or a list of VMs, got {type(raw).__name__} {raw!r}")
        if not 0 <= raw <= MAX_VMS:
            raise config_error("vms", f"{raw} out of range 0..{MAX_VMS}")
        return raw, None
    if len(raw) > MAX_VMS:
        raise config_error("vms", f"{len(raw)} VMs; at most {MAX_VMS}")
    out: list[VmConfig] = []
    for i, item in enumerate(raw):
        vm = _parse_vm(f"vms[{i}]", item, switch)
        if vm.name in {v.name for v in out}:
            raise config_error(f"vms[{i}].name", f"{vm.name!r} is the name of another VM")
        if vm.port is not None and vm.port in {v.port for v in out}:
            raise config_error(f"vms[{i}].port.name", f"{vm.port!r} is the port of another VM")
        if vm.socket is not None and vm.socket in {v.socket for v in out}:
            raise config_error(f"vms[{i}].port.socket", f"{vm.socket!r} is the socket of another VM")
        out.append(vm)
    return len(out), tuple(out)


def _parse_vm(where: str, item: Any, switch: HostSwitchConfig) -> VmConfig:
    vm = _mapping(where, item, ("name", "port"))
    name = vm.get("name")
    if not isinstance(name, str) or not _VM_NAME_RE.match(name):
        raise config_error(
            f"{where}.name", f"{name!r}: required, 1-15 characters [a-z0-9_-], starting with a letter"
        )
    port = _mapping(f"{where}.port", vm.get("port"), ("type", "name", "socket"))
    kind = port.get("type", "veth")
    if kind not in VM_PORT_TYPES:
        raise config_error(f"{where}.port.type", f"{kind!r} is not one of: {', '.join(VM_PORT_TYPES)}")
    pname, sock = port.get("name"), port.get("socket")
    if kind == "veth":
        if pname is not None or sock is not None:
            raise config_error(
                f"{where}.port", "name and socket are for type tap or vhostuser (a veth VM is UNO's)"
            )
        return VmConfig(name)
    if pname is not None and (not isinstance(pname, str) or not IFNAME_RE.match(pname)):
        raise config_error(f"{where}.port.name", f"{pname!r} is not an interface name (1-15 characters)")
    if kind == "tap":
        if not switch.external:
            raise config_error(
                f"{where}.port.type",
                "tap needs host.switch.mode: external (a managed host switch runs in its own network namespace, "
                "where this machine's tap devices are not)",
            )
        if pname is None:
            raise config_error(f"{where}.port.name", "required for type tap: the VM's tap device")
        if sock is not None:
            raise config_error(f"{where}.port.socket", "only for type vhostuser")
        return VmConfig(name, "tap", pname)
    if switch.datapath_type != "netdev":
        raise config_error(
            f"{where}.port.type", "vhostuser needs host.switch.datapath_type: netdev (OVS-DPDK)"
        )
    if not switch.external and switch.dpdk is None:
        raise config_error(
            f"{where}.port.type",
            "vhostuser needs an OVS-DPDK host switch: host.switch.dpdk, or mode: external",
        )
    if sock is None:
        raise config_error(f"{where}.port.socket", "required for type vhostuser: the VM's vhost-user socket")
    try:
        vhost_user_client(sock, f"{where}.port.socket")
    except ValidationError as exc:
        raise config_error(exc.field, exc.message) from None
    return VmConfig(name, "vhostuser", pname, sock)


def is_pci_address(text: str) -> bool:
    """Whether `snics[k].host_port` names a PCI device (a DPDK physical port) rather than an interface."""
    try:
        parse_pci_address(text, "host_port")
    except ValidationError:
        return False
    return True


def check_host_ports(snics: list, switch: HostSwitchConfig) -> None:
    """`snics[k].host_port` (the host switch's port of sNIC k's PCIe link): with an external host switch an
    interface the operator names, required there for a BlueField (its link's host end is hardware); on a managed
    OVS-DPDK host switch a BlueField's link may be a PCI address of `host.switch.dpdk.pci` (a DPDK physical
    port, e.g. the DPU's PF bound to vfio-pci); distinct."""
    seen: set[str] = set()
    for k, sn in enumerate(snics):
        where = f"snics[{k}].host_port"
        if sn.host_port is None:
            if switch.external and sn.backend == "bluefield":
                raise config_error(
                    where,
                    "required with host.switch.mode: external: the host switch's port of the BlueField's PCIe "
                    "link (e.g. its PF netdev)",
                )
            continue
        if not switch.external:
            if switch.dpdk is None or sn.backend != "bluefield":
                raise config_error(
                    where,
                    "only with host.switch.mode: external, or a BlueField's PCI address on a managed OVS-DPDK "
                    "host switch (host.switch.dpdk); a managed host names its emulated links NAME-pKh",
                )
            try:
                addr = parse_pci_address(sn.host_port, where)
            except ValidationError as exc:
                raise config_error(where, f"on a managed OVS-DPDK host switch: {exc.message}") from None
            if addr not in switch.dpdk.pci:
                listed = ", ".join(switch.dpdk.pci) or "empty"
                raise config_error(
                    where,
                    f"PCI device {addr} is not in host.switch.dpdk.pci ({listed}): DPDK may probe only those",
                )
            if addr in seen:
                raise config_error(where, f"{addr} is the link of another sNIC")
            seen.add(addr)
            continue
        if not IFNAME_RE.match(sn.host_port):
            raise config_error(where, f"{sn.host_port!r} is not an interface name (1-15 characters)")
        if sn.host_port in seen:
            raise config_error(where, f"{sn.host_port!r} is the link of another sNIC")
        seen.add(sn.host_port)
