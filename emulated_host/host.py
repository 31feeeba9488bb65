"""The emulated UNO host: state tier, host switch, sNICs, PCIe links, VMs and the wire, as ordered components.

`EmulatedHost(config).up()` brings them up in order; `down()` tears them down in reverse and then sweeps by
name whatever a crashed run left (namespaces, processes in them, cgroups, rundir). Adding a component (e.g.
the agent) means appending one object with up/down/status to `components()`; OneSwitch is the last one.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from emulated_host import naming as nm
from emulated_host.agent_endpoint import status_entry
from emulated_host.config import HostConfig, TierConfig, period_us, quota_cores
from emulated_host.naming import MAX_UNIX_PATH
from emulated_host.oneswitch import HostPorts, OneSwitch, SnicLayout, discover_layout, south_target
from emulated_host.snic_machine import AgentSpec, EmulatedSnic, MgmtLink
from emulated_host.switch_config import HostSwitchConfig, VmConfig
from emulated_host.tier_link import TierLink
from host_datapath.dpdk_options import parse_pci_address
from host_datapath.external_switch import ExternalHostSwitch
from host_datapath.host_switch import HostSwitch
from host_datapath.ovs_dpdk import DpdkHostSwitch, release_leftovers
from host_datapath.ovs_dpdk import preflight as dpdk_preflight
from host_datapath.snic_agent_client import SnicAgentClient, SnicAgentError
from host_datapath.sysutil import (
    DatapathError,
    free_port,
    kernel_datapath_problem,
    kill_and_wait,
    link_counters,
    link_exists,
    netns_add,
    netns_del,
    netns_list,
    netns_pids,
    process_argv,
    quiet_switch_port,
    read_pidfile,
    run,
    shape,
    tcp_open,
    veth_pair,
    wait_for,
)
from snic_datapath.bluefield import BlueFieldSnic
from snic_datapath.cgroup import CpuCgroup
from state_tier.access import Credentials, probe, read_password
from state_tier.cluster import LocalCluster, free_cluster_ports
from state_tier.external import ExternalTier


def external_credentials(cfg: TierConfig) -> Credentials:
    """The admin credentials of an operator's tier, as the config names them."""
    pw = read_password(cfg.password_file, "redis.password_file") if cfg.password_file else None
    return Credentials(cfg.user, pw)


@dataclass(frozen=True)
class TierAccessInfo:
    """The running host's state tier: `mode`; `local_url` (local mode: Redis on loopback TCP);
    `nf_netns`: where the host's NFs run to reach a TCP tier (None: each in its own namespace, reaching
    the local Redis on its unix socket); `admin`: the admin credentials (None: no access control);
    `component`: the tier's component (`.status()`, `.topology()` for cluster/external)."""

    mode: str
    local_url: str | None
    nf_netns: str | None
    admin: Credentials | None
    component: object


class Component(Protocol):
    key: str

    def up(self) -> None: ...
    def down(self) -> None: ...
    def status(self) -> dict | list: ...


@dataclass
class Redis:
    """The state tier: one redis-server on loopback TCP and on a unix socket in the rundir (mode 700: the
    host's NFs reach it there without a relay), no persistence; also on the host's end of each sNIC's
    management link (`also_bind`), where that sNIC's NFs reach it over TCP."""

    rundir: Path
    port: int
    also_bind: tuple[str, ...] = ()
    key: str = "redis"

    @property
    def pidfile(self) -> Path:
        return self.rundir / "redis.pid"

    @property
    def socket(self) -> Path:
        return self.rundir / "redis.sock"

    def up(self) -> None:
        if read_pidfile(self.pidfile):
            return
        if len(str(self.socket)) > MAX_UNIX_PATH:
            raise DatapathError(
                f"redis: unix socket path {self.socket} is longer than {MAX_UNIX_PATH} bytes (use a shorter "
                "rundir or host name)"
            )
        if tcp_open(self.port):  # else redis-server exits at once and we would only time out waiting
            raise DatapathError(
                f"redis: port {self.port} on 127.0.0.1 is in use (redis.port: 0 picks a free one)"
            )
        run(
            ["redis-server", "--bind", " ".join(["127.0.0.1", *self.also_bind]), "--port", str(self.port),
             # reachable from the sNICs' management addresses (no password yet: only these links reach it)
             "--protected-mode", "no" if self.also_bind else "yes", "--save", "", "--appendonly", "no",
             "--unixsocket", str(self.socket), "--unixsocketperm", "700",
             "--daemonize", "yes", "--pidfile", str(self.pidfile), "--dir", str(self.rundir),
             "--logfile", str(self.rundir / "redis.log")],
        )  # fmt: skip
        wait_for(
            lambda: read_pidfile(self.pidfile) and tcp_open(self.port) and self.socket.exists(),
            10,
            f"redis on port {self.port} and {self.socket}",
        )

    def running(self) -> bool:
        return read_pidfile(self.pidfile) is not None

    def down(self) -> None:
        pid = read_pidfile(self.pidfile)
        if pid:
            kill_and_wait(pid)

    def status(self) -> dict:
        """`unix_socket` is null for a Redis started without one (by an older version: NFs then reach it by
        TCP through the agent's relay)."""
        pid = read_pidfile(self.pidfile)
        return {
            "mode": "local",
            "url": f"redis://127.0.0.1:{self.port}/0",
            "port": self.port,
            "unix_socket": str(self.socket) if self.socket.exists() else None,
            "pid": pid,
            "running": pid is not None,
            "nodes": [{"address": f"127.0.0.1:{self.port}", "role": "master", "failed": pid is None}],
        }


@dataclass
class MgmtLinks:
    """Each emulated sNIC's management link: a veth from the host's root namespace into the sNIC's, a /30 on
    it. Made first: Redis binds the host's ends."""

    name: str
    links: dict[int, MgmtLink]
    key: str = "mgmt"

    def up(self) -> None:
        for k, link in self.links.items():
            ns = nm.ns_snic(self.name, k)
            netns_add(ns)
            if not link_exists(link.host_if):
                run(
                    [
                        "ip",
                        "link",
                        "add",
                        link.host_if,
                        "type",
                        "veth",
                        "peer",
                        "name",
                        link.snic_if,
                        "netns",
                        ns,
                    ]
                )
            run(["ip", "addr", "replace", f"{link.host_ip}/30", "dev", link.host_if])
            run(["ip", "link", "set", link.host_if, "up"])
            run(["ip", "addr", "replace", f"{link.snic_ip}/30", "dev", link.snic_if], netns=ns)
            run(["ip", "link", "set", link.snic_if, "up"], netns=ns)
            run(["ip", "link", "set", "lo", "up"], netns=ns)

    def down(self) -> None:
        for link in self.links.values():
            if link_exists(link.host_if):
                run(["ip", "link", "del", link.host_if], check=False)

    def status(self) -> dict:
        return {f"snic{k}": {"host_if": x.host_if, "host_ip": x.host_ip, "snic_ip": x.snic_ip}
                for k, x in self.links.items()}  # fmt: skip


@dataclass
class Vms:
    """The VM slots on the host bridge: emulated VMs (a namespace each, one veth to the host bridge) and, on an
    external host switch, real VMs' existing ports (a tap device, or an OVS-DPDK vhost-user port)."""

    name: str
    specs: tuple[VmConfig, ...]
    host: HostSwitch | ExternalHostSwitch
    key: str = "vms"

    def port_name(self, i: int) -> str:
        """VM i's port on the host bridge."""
        vm = self.specs[i]
        if vm.emulated:
            return nm.if_vm(self.name, i)[1]
        return vm.port or nm.if_vm_vhost(self.name, i)

    def up(self) -> None:
        for i, vm in enumerate(self.specs):
            ofport = nm.HOST_VM_OFPORT_BASE + i
            if vm.type == "tap":
                self.host.attach_device(vm.port, ofport)  # type: ignore[union-attr,arg-type]
                continue
            iface = vm.vm_port().iface()
            if iface is not None:  # vhost-user: an OVS-DPDK port, OVS the client of the VM's socket
                self.host.driver.add_port(
                    self.port_name(i), ofport, iface_type=iface.type, options=iface.options
                )
                continue
            ns = nm.ns_vm(self.name, i)
            inside, outside = nm.if_vm(self.name, i)
            netns_add(ns)
            if not link_exists(inside, ns):
                veth_pair(inside, ns, outside, self.host.netns, mtu=self.host.veth_mtu)
            run(["ip", "link", "set", inside, "address", nm.mac(1, 0, i)], netns=ns)
            run(["ip", "addr", "replace", f"{nm.ip_vm(i)}/16", "dev", inside], netns=ns)
            quiet_switch_port(outside, self.host.netns)
            self.host.add_bridge_port(outside, ofport)

    def down(self) -> None:
        # A real VM's port row goes with the host switch's teardown (UNO's marked rows); its device stays.
        for i, vm in enumerate(self.specs):
            if vm.emulated:
                netns_del(nm.ns_vm(self.name, i))

    def status(self) -> list:
        numbers = self.host.port_numbers() if isinstance(self.host, ExternalHostSwitch) else {}
        out = []
        for i, vm in enumerate(self.specs):
            emulated = vm.emulated
            out.append({
                "name": vm.name,
                "type": vm.type,
                "netns": nm.ns_vm(self.name, i) if emulated else None,
                "ifname": nm.if_vm(self.name, i)[0] if emulated else None,
                "ip": nm.ip_vm(i) if emulated else None,
                "mac": nm.mac(1, 0, i) if emulated else None,
                "host_port": self.port_name(i),
                "host_ofport": numbers.get(self.port_name(i), nm.HOST_VM_OFPORT_BASE + i),
                **({"socket": vm.socket} if vm.type == "vhostuser" else {}),
            })  # fmt: skip
        return out


@dataclass
class Snic:
    """sNIC k: its switch (emulated or BlueField), Ethernet ports to the wire, and its PCIe link to the host."""

    name: str
    index: int
    cfg: object
    host: HostSwitch | ExternalHostSwitch
    disk: Path  # an emulated sNIC's own directory (never under the host's rundir)
    mgmt: MgmtLink | None = None
    token: str = ""
    key: str = "snic"
    switch: EmulatedSnic | BlueFieldSnic = field(init=False)

    def __post_init__(self) -> None:
        n, k, c = self.name, self.index, self.cfg
        if c.backend == "bluefield":
            # with its own agent the DPU's bridge is the operator's: UNO leaves its settings alone
            self.switch = BlueFieldSnic(c.bridge, c.ovsdb, c.openflow, c.datapath_type, manage=not c.agent)
        else:
            agent = AgentSpec(
                snic=c.id, prefix=nm.snic_prefix(n, k), warm_slots=c.warm_slots,
                pcie_port=nm.if_pcie(n, k)[1], wire_ports=tuple(nm.if_eth(n, k, j)[0] for j in range(c.eth_ports)),
            )  # fmt: skip
            self.switch = EmulatedSnic(
                netns=nm.ns_snic(n, k),
                rundir=self.disk,
                bridge=nm.bridge_snic(n, k),
                cgroup_name=nm.cgroup_snic(n, k),
                cpu_quota=quota_cores(c.capacity, c.cpu_quota),
                cpu_period_us=period_us(c),
                mgmt=self.mgmt,
                agent=agent if self.mgmt is not None else None,
                token=self.token,
            )

    @property
    def emulated(self) -> bool:
        return isinstance(self.switch, EmulatedSnic)

    @property
    def host_if(self) -> str | None:
        """The host switch's port of the PCIe link: the operator's `host_port` (external host switch), an
        emulated link's host end NAME-pKh, or the OVS port NAME-pKh of a BlueField's PCI device (managed OVS-DPDK
        host switch); None for a BlueField on another managed host switch (hardware UNO does not plug in)."""
        if self.pci_link:
            return nm.if_pcie(self.name, self.index)[0]
        if self.cfg.host_port:
            return self.cfg.host_port
        return nm.if_pcie(self.name, self.index)[0] if self.emulated else None

    @property
    def pci_link(self) -> str | None:
        """The PCI address of a BlueField's link on a managed OVS-DPDK host switch (a DPDK physical port)."""
        if self.emulated or not self.cfg.host_port or not isinstance(self.host, DpdkHostSwitch):
            return None
        return parse_pci_address(self.cfg.host_port, f"snics[{self.index}].host_port")

    def up(self) -> None:
        n, k, c = self.name, self.index, self.cfg
        self.switch.up()
        if not self.emulated:
            # a real DPU's Ethernet ports and PCIe link are hardware; on an external host switch its link's
            # host end (the operator's port) goes onto UNO's bridge
            if c.host_port and isinstance(self.host, ExternalHostSwitch):
                self.host.attach_device(c.host_port, nm.HOST_PCIE_OFPORT_BASE + k)
            elif self.pci_link and isinstance(self.host, DpdkHostSwitch):
                self.host.attach_pci(self.host_if, nm.HOST_PCIE_OFPORT_BASE + k, self.pci_link)  # type: ignore[arg-type]
            return
        drv = self.switch.driver
        for j in range(c.eth_ports):
            ons = nm.ns_outside(n, k, j)
            sw_if, out_if = nm.if_eth(n, k, j)
            netns_add(ons)
            if not link_exists(out_if, ons):
                veth_pair(sw_if, self.switch.netns, out_if, ons)
            run(["ip", "link", "set", out_if, "address", nm.mac(2, k, j)], netns=ons)
            run(["ip", "addr", "replace", f"{nm.ip_outside(k, j)}/16", "dev", out_if], netns=ons)
            quiet_switch_port(sw_if, self.switch.netns)
            drv.add_port(sw_if, nm.SNIC_ETH_OFPORT_BASE + j)
        h_if, s_if = self.host_if, nm.if_pcie(n, k)[1]
        if not link_exists(h_if, self.host.netns):
            veth_pair(h_if, self.host.netns, s_if, self.switch.netns)
        quiet_switch_port(h_if, self.host.netns)
        quiet_switch_port(s_if, self.switch.netns)
        shaped = c.pcie_gbps > 0
        self.host.add_bridge_port(h_if, nm.HOST_PCIE_OFPORT_BASE + k, shaped=shaped)
        drv.add_port(s_if, nm.SNIC_PCIE_OFPORT)
        if shaped:
            # Egress shaping on each end: one budget per direction (full duplex, docs/placement.md).
            drv.keep_own_qdisc(s_if)
            for ifname, ns in ((h_if, self.host.netns), (s_if, self.switch.netns)):
                shape(ifname, ns, c.pcie_gbps)

    def down(self) -> None:
        n, k = self.name, self.index
        self.switch.down()
        if self.emulated:
            for j in range(self.cfg.eth_ports):
                netns_del(nm.ns_outside(n, k, j))
            netns_del(self.switch.netns)
            shutil.rmtree(self.disk, ignore_errors=True)

    def status(self) -> dict:
        n, k, c = self.name, self.index, self.cfg
        out = {"id": c.id, "capacity": c.capacity, **self.switch.status()}
        host_ofport = nm.HOST_PCIE_OFPORT_BASE + k
        if isinstance(self.host, ExternalHostSwitch) and self.host_if:
            host_ofport = self.host.port_numbers().get(self.host_if, host_ofport)
        if not self.emulated and self.host_if:
            # a DPDK port has no kernel counters: OpenFlow's port statistics then
            counters = (
                self.host.driver.port_stats().get(self.host_if, {})
                if self.pci_link
                else link_counters(self.host_if, self.host.netns)
            )
            out["pcie"] = {
                "host_port": self.host_if,
                "host_ofport": host_ofport,
                "host_end_counters": counters,
            }
            if self.pci_link:
                out["pcie"]["pci"] = self.pci_link
        if self.emulated:
            h_if, s_if = self.host_if, nm.if_pcie(n, k)[1]
            out["pcie"] = {
                "gbps": c.pcie_gbps,
                "shaped": c.pcie_gbps > 0,
                "host_port": h_if,
                "host_ofport": host_ofport,
                "snic_port": s_if,
                "snic_ofport": nm.SNIC_PCIE_OFPORT,
                "host_end_counters": link_counters(h_if, self.host.netns),  # tx = host -> sNIC
            }
            out["eth_ports"] = [
                {
                    "port": nm.if_eth(n, k, j)[0],
                    "ofport": nm.SNIC_ETH_OFPORT_BASE + j,
                    "outside_netns": nm.ns_outside(n, k, j),
                    "outside_if": nm.if_eth(n, k, j)[1],
                    "ip": nm.ip_outside(k, j),
                    "mac": nm.mac(2, k, j),
                }
                for j in range(c.eth_ports)
            ]
        out["ports"] = self.switch.port_numbers() if self.emulated else _ports(self.switch.driver)
        return out

    def close(self) -> None:
        self.switch.driver.close()


def _ports(driver) -> dict[str, int]:
    try:
        return driver.ports()
    except DatapathError:
        return {}


@dataclass(frozen=True)
class SnicAccess:
    """How the host reaches an sNIC that is an NF location: its agent (URL, bearer token), the address its NFs
    reach the host's state tier at, and its switch's OpenFlow listener (`tcp:ADDR:PORT`)."""

    agent: str
    token: str = field(repr=False)
    state_addr: str
    openflow: str
    pcie_host_port: str | None = None  # the host switch's port of its PCIe link (None: measured on the sNIC)


@dataclass
class SnicAgentProc:
    """An emulated sNIC's agent as a service `uno up` restarts when it alone died (it adopts its NFs)."""

    switch: EmulatedSnic
    key: str = "snic-agent"

    def running(self) -> bool:
        return self.switch.agent_pid() is not None

    def up(self) -> None:
        self.switch.start_agent()


class AlreadyRunning(Exception):
    pass


class EmulatedHost:
    """One emulated UNO host named `config.name`; its rundir holds its state file and daemons' files."""

    def __init__(self, config: HostConfig):
        self.config = config
        self.name = config.name
        self.rundir = config.rundir / config.name
        self.state_file = self.rundir / "state.json"

    # -- the component list ----------------------------------------------------------------------------
    @property
    def snic_disks(self) -> Path:
        """Where the emulated sNICs keep their own files: beside the hosts' run directories, not in this one."""
        return self.config.rundir.with_name(self.config.rundir.name + "-snic") / self.name

    def _token_file(self, k: int) -> Path:
        return self.rundir / f"snic{k}.token"

    def host_switch_component(self, sw: HostSwitchConfig | None = None) -> HostSwitch | ExternalHostSwitch:
        """The host switch as configured (`sw`: as recorded at bring-up, else the config's): UNO's own private
        OVS (managed), or its bridge on the operator's OVS (external)."""
        sw = sw or self.config.switch
        if sw.external:
            return ExternalHostSwitch(
                self.name, sw.ovsdb or "", sw.bridge or nm.bridge_host(self.name), sw.datapath_type, sw.adopt
            )
        if sw.dpdk is not None:
            return DpdkHostSwitch(
                nm.ns_host(self.name), self.rundir / "host", nm.bridge_host(self.name), options=sw.dpdk
            )
        return HostSwitch(
            nm.ns_host(self.name), self.rundir / "host", nm.bridge_host(self.name), sw.datapath_type
        )

    def _recorded_switch(self, state: dict) -> HostSwitchConfig:
        """The host switch of a bring-up as `uno up` recorded it (a host brought up before the key existed:
        managed)."""
        return HostSwitchConfig.from_dict(state.get("switch") or {})

    def components(
        self,
        redis_port: int,
        mgmt: dict[int, int] | None = None,
        switch: HostSwitchConfig | None = None,
        tier: dict | None = None,
    ) -> list[Component]:
        """The parts in bring-up order; `mgmt`: each emulated sNIC's management subnet (index of a /30);
        `switch`: the host switch as recorded at bring-up (default: the config's); `tier`: a TCP tier's link
        subnet (`link`) and a local cluster's node ports (`ports`)."""
        links = {}
        for k, j in (mgmt or {}).items():
            host_ip, snic_ip = nm.mgmt_addresses(j)
            links[k] = MgmtLink(*nm.if_mgmt(self.name, k), host_ip, snic_ip)
        host = self.host_switch_component(switch)
        comps: list = [
            MgmtLinks(self.name, links),
            *self._tier_components(redis_port, links, tier or {}),
            host,
        ]
        for k, c in enumerate(self.config.snics):
            token = self._token_file(k).read_text().strip() if self._token_file(k).exists() else ""
            comps.append(Snic(self.name, k, c, host, self.snic_disks / f"snic{k}", links.get(k), token))
        vms = Vms(self.name, self.config.vm_specs, host)
        comps.append(vms)
        if self.config.oneswitch.enabled:
            snics = [c for c in comps if isinstance(c, Snic)]

            def endpoints() -> dict[str, str | None]:
                # The host switch: its bridge's passive unix listener, straight (a path reaches into the
                # switch's namespace; no TCP stack, no relay process per message: bench/RESULTS.md oneswitch),
                # or its socat TCP relay with UNO_ONESWITCH_SOUTH=tcp. An emulated sNIC: its bridge's listener on
                # its management address (a separate machine); a BlueField: its bridge's tcp:HOST:PORT.
                # An external host switch: its bridge's management socket in ovs-vswitchd's run directory (or
                # UNO's ptcp listener on its bridge with a tcp OVSDB; external_switch.py says why).
                if isinstance(host, ExternalHostSwitch):
                    out = {"host": host.openflow_target()}
                else:
                    out = {"host": south_target(os.environ.get("UNO_ONESWITCH_SOUTH"))(host.endpoint)}
                for sn in snics:
                    out[sn.cfg.id] = sn.switch.openflow_target() if sn.emulated else sn.cfg.openflow  # type: ignore[union-attr]
                return out

            def layouts() -> dict[int, SnicLayout]:
                # A BlueField with an agent: its host representor and uplinks as its agent finds them.
                out = {}
                for sn in snics:
                    c = sn.cfg
                    if not sn.emulated and c.agent:
                        token = Path(c.agent_token_file).read_text().strip()
                        try:
                            ports = SnicAgentClient(c.id, c.agent, token, timeout=10).ports()
                        except SnicAgentError as exc:
                            raise DatapathError(f"snics[{sn.index}].agent: {exc}") from None
                        out[sn.index] = discover_layout(ports, f"snics[{sn.index}]")
                return out

            def host_ports() -> HostPorts:
                # The host switch's port numbers of VMs and PCIe links as OVS gave them (an adopted bridge's
                # operator ports may hold the numbers UNO asks for).
                numbers = host.driver.ports()
                vm_ports = {
                    i: numbers[vms.port_name(i)] for i in range(len(vms.specs)) if vms.port_name(i) in numbers
                }
                pcie = {sn.index: numbers[sn.host_if] for sn in snics if sn.host_if in numbers}
                return HostPorts(vm_ports, pcie)

            def shared() -> set[str]:
                # A bridge UNO took over is the operator's: OneSwitch keeps what is not its own there.
                return {"host"} if isinstance(host, ExternalHostSwitch) and host.shared() else set()

            comps.append(
                OneSwitch(self.config, self.rundir / "oneswitch", endpoints, layouts, host_ports, shared)
            )
        return comps

    def _tier_components(self, redis_port: int, links: dict[int, MgmtLink], tier: dict) -> list:
        """The state tier and, for a TCP tier, the host NFs' link to it (tier_link)."""
        cfg = self.config.tier
        mode = tier.get("mode", cfg.mode)  # as brought up (a teardown with another config still finds it)
        if mode == "local":
            also = tuple(x.host_ip for x in links.values())
            also += tuple(
                c.host_address for c in self.config.snics if c.agent
            )  # BlueFields' NFs reach it there
            return [Redis(self.rundir, redis_port, also)]
        host_ip, nf_ip = nm.mgmt_addresses(tier["link"])
        routes = {nm.ns_snic(self.name, k): x.host_ip for k, x in links.items()}
        link = TierLink(self.name, host_ip, nf_ip, routes)
        if mode == "cluster":
            return [
                link,
                LocalCluster(self.rundir, tuple(tier["ports"]), tier.get("replicas", cfg.replicas), host_ip),
            ]
        return [
            link,
            ExternalTier(cfg.nodes, external_credentials(cfg) if cfg.mode == "external" else Credentials()),
        ]

    def tier(self) -> TierAccessInfo:
        """How the running host's NFs and tools reach the state tier."""
        state = self._saved_state()
        if not state:
            raise DatapathError(f"emulated host '{self.name}' is not up")
        comps = self._live_components(state)
        link = next((c for c in comps if isinstance(c, TierLink)), None)
        t = next(c for c in comps if c.key == "redis")
        if isinstance(t, Redis):
            return TierAccessInfo("local", f"redis://127.0.0.1:{t.port}", None, None, t)
        return TierAccessInfo(self.config.tier.mode, None, link.netns if link else None, t.credentials(), t)

    def oneswitch(self) -> OneSwitch | None:
        """The running host's OneSwitch component (None when disabled): `.client()` for its REST API."""
        state = self._saved_state()
        if not state:
            raise DatapathError(f"emulated host '{self.name}' is not up")
        return next((c for c in self._live_components(state) if isinstance(c, OneSwitch)), None)

    def host_switch(self) -> HostSwitch:
        """The running host's own switch (its NF ports are plugged in from here); `close()` it when done."""
        state = self._saved_state()
        if not state:
            raise DatapathError(f"emulated host '{self.name}' is not up")
        sw = next(c for c in self._live_components(state) if c.key == "host")
        sw.driver.openflow = sw.ofctl_target()  # type: ignore[attr-defined]
        return sw  # type: ignore[return-value]

    def snic_agents(self) -> dict[str, SnicAccess]:
        """Each sNIC that is an NF location: how the host reaches it (its agent, its switch) and the address its
        NFs reach the state tier at (the host's end of its management link)."""
        state = self._saved_state()
        if not state:
            raise DatapathError(f"emulated host '{self.name}' is not up")
        out = {}
        for c in self._live_components(state):
            if not isinstance(c, Snic):
                continue
            if c.emulated and c.mgmt is not None:
                sw = c.switch
                out[c.cfg.id] = SnicAccess(
                    sw.agent_url(), c.token, c.mgmt.host_ip, sw.openflow_target(), c.host_if
                )  # type: ignore[union-attr]
            elif c.cfg.agent:
                # a BlueField: its link measured on the host switch's port the operator named (external host
                # switch), else on the DPU's host representor
                token = Path(c.cfg.agent_token_file).read_text().strip()
                out[c.cfg.id] = SnicAccess(
                    c.cfg.agent, token, c.cfg.host_address, c.cfg.openflow, c.cfg.host_port
                )
        return out

    def snic(self, sid: str) -> EmulatedSnic:
        """A running emulated sNIC, as the machine it is (for what only the emulation does: `kill()` it whole,
        start it again with `up()`)."""
        state = self._saved_state()
        if not state:
            raise DatapathError(f"emulated host '{self.name}' is not up")
        for c in self._live_components(state):
            if isinstance(c, Snic) and c.cfg.id == sid and c.emulated:
                return c.switch  # type: ignore[return-value]
        raise DatapathError(f"no emulated sNIC {sid!r} on '{self.name}'")

    def switches(self) -> dict[str, HostSwitch]:
        """The running host's switches, to drive from another process: "host", "snic0", ... (emulated only).

        Each is a HostSwitch (sNICs: EmulatedSnic with `.cgroup`) with `.driver`, `attach_namespace()`,
        `connect_controllers()`; call `close()` on each when done.
        """
        state = self._saved_state()
        if not state:
            raise DatapathError(f"emulated host '{self.name}' is not up")
        comps = self._live_components(state)
        out: dict[str, HostSwitch] = {"host": next(c for c in comps if c.key == "host")}  # type: ignore[misc]
        for c in comps:
            if isinstance(c, Snic) and c.emulated:
                out[c.cfg.id] = c.switch  # type: ignore[assignment]
        for sw in out.values():
            sw.driver.openflow = sw.ofctl_target()
        return out

    def _saved_state(self) -> dict | None:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return None

    def is_up(self) -> bool:
        """Up = a completed bring-up whose switches (host and emulated sNICs), Redis and OneSwitch all still
        run."""
        state = self._saved_state()
        if not state or not state.get("complete"):
            return False
        dead_switches, dead_services = self._dead_parts(state)
        return not dead_switches and not dead_services

    def _dead_parts(self, state: dict) -> tuple[list[str], list]:
        """What of a bring-up no longer runs: the switches (by id) and the services (Redis, OneSwitch, an
        emulated sNIC's agent)."""
        comps = self._live_components(state)
        switches = [("host", c) for c in comps if c.key == "host"] + [
            (c.cfg.id, c.switch) for c in comps if isinstance(c, Snic) and c.emulated
        ]
        dead = [sw_id for sw_id, sw in switches if not sw.running()]  # type: ignore[attr-defined]
        services = [c for c in comps if isinstance(c, Redis | LocalCluster | OneSwitch) and not c.running()]
        agents = [SnicAgentProc(c.switch) for c in comps if isinstance(c, Snic) and c.emulated and c.mgmt]
        return dead, services + [a for a in agents if not a.running()]

    def _live_components(self, state: dict) -> list[Component]:
        mgmt = {int(k): j for k, j in state.get("mgmt", {}).items()}
        return self.components(state["redis_port"], mgmt, self._recorded_switch(state), state.get("tier"))

    def _allocate_mgmt(self) -> dict[int, int]:
        """A free /30 of the management range for each emulated sNIC (and, key -1, for a TCP tier's link),
        searched from a place the host's name picks (several hosts coexist on one machine: their links must
        not share a subnet)."""
        out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
        used = {ln.split()[3].split("/")[0] for ln in out.splitlines() if len(ln.split()) > 3}
        start = int.from_bytes(self.name.encode(), "big") * 131 % 16384
        picked: dict[int, int] = {}
        j = start
        for k, c in enumerate(self.config.snics):
            if c.backend != "emulated":
                continue
            while any(a in used for a in nm.mgmt_addresses(j)) or j in picked.values():
                j += 1
            picked[k] = j
        if self.config.tier.mode != "local":
            while any(a in used for a in nm.mgmt_addresses(j)) or j in picked.values():
                j += 1
            picked[-1] = j
        return picked

    # -- lifecycle ----------------------------------------------------------------------------------
    def up(self) -> dict:
        """Bring the host up; raise AlreadyRunning (changing nothing) if it already runs."""
        if self.is_up():
            raise AlreadyRunning(f"emulated host '{self.name}' is already up (rundir {self.rundir})")
        services = self._services_only_down()
        if services:
            return self._restart_services(services)
        tcfg = self.config.tier
        if tcfg.mode == "external":  # an operator's tier that does not answer: nothing starts
            probe(list(tcfg.nodes), external_credentials(tcfg))
        self.down()  # sweep the leftovers of a crashed run first
        self._preflight()
        self.rundir.mkdir(parents=True, exist_ok=True)
        port = self.config.redis_port or free_port()
        mgmt = self._allocate_mgmt()
        tier: dict = {"mode": tcfg.mode, "replicas": tcfg.replicas}
        if -1 in mgmt:
            tier["link"] = mgmt.pop(-1)
        if tcfg.mode == "cluster":
            n = tcfg.masters * (1 + tcfg.replicas)
            base = self.config.redis_port
            tier["ports"] = list(range(base, base + n)) if base else free_cluster_ports(n)
        for k in mgmt:  # the host's copy of each sNIC agent's token (the sNIC gets its own at its boot)
            self._token_file(k).write_text(secrets.token_urlsafe(24))
            self._token_file(k).chmod(0o600)
        state = {
            "name": self.name,
            "redis_port": port,
            "mgmt": {str(k): j for k, j in mgmt.items()},
            "switch": self.config.switch.as_dict(),
            "tier": tier,
        }
        self.state_file.write_text(json.dumps({**state, "complete": False}))
        comps = self.components(port, mgmt, tier=tier)
        try:
            for comp in comps:
                comp.up()
        except BaseException:
            self.down()
            raise
        self.state_file.write_text(json.dumps({**state, "complete": True}))
        return self.status()

    def _preflight(self) -> None:
        """Check, changing nothing, that the configured host switch can be used: the kernel datapath's module;
        on an operator's OVS (external) that it answers, that the bridge is UNO's to make or take, and that
        every port UNO will put there can be its. A DatapathError naming the config key otherwise."""
        sw = self.config.switch
        if not sw.external:
            problem = kernel_datapath_problem() if sw.datapath_type == "system" else None
            if problem:
                raise DatapathError(f"config: host.switch.datapath_type: system: {problem}; use netdev")
            if sw.dpdk is not None:
                dpdk_preflight(sw.dpdk)
            return
        host = self.host_switch_component(sw)
        try:
            host.preflight(self._own_ports())  # type: ignore[union-attr]
        finally:
            host.driver.close()

    def _own_ports(self) -> tuple[tuple[str, str, str], ...]:
        """The ports an external host switch gets: (name, config key, kind) as ExternalHostSwitch.check_port
        takes them."""
        out = []
        for i, vm in enumerate(self.config.vm_specs):
            if vm.type == "tap":
                out.append((vm.port, f"vms[{i}].port.name", "tap"))
            elif vm.type == "vhostuser":
                out.append((vm.port or nm.if_vm_vhost(self.name, i), f"vms[{i}].port", "vhostuser"))
            else:
                out.append((nm.if_vm(self.name, i)[1], f"vms[{i}]", "new"))
        for k, c in enumerate(self.config.snics):
            if c.backend == "emulated":
                out.append((c.host_port or nm.if_pcie(self.name, k)[0], f"snics[{k}].host_port", "new"))
            elif c.host_port:
                out.append((c.host_port, f"snics[{k}].host_port", "device"))
        return tuple(out)  # type: ignore[arg-type]

    def _services_only_down(self) -> list:
        """A completed bring-up whose switches all run and of which only Redis and/or OneSwitch died: those."""
        state = self._saved_state()
        if not state or not state.get("complete"):
            return []
        dead_switches, dead_services = self._dead_parts(state)
        return [] if dead_switches else dead_services

    def _restart_services(self, services: list) -> dict:
        """Start the dead services again and nothing else, in bring-up order.

        Redis comes back on its port and unix socket, empty (it has no persistence: the NFs' per-flow state
        is gone, so e.g. a firewall's connections must be opened again); the NFs reconnect by themselves and
        fail closed meanwhile. OneSwitch reloads its persisted virtual rules and port map (`state/state.json`),
        keeps its listen/REST ports, and reconciles the switches without a gap (each wanted flow re-added in
        place, then the stale ones deleted), so installed flows keep forwarding throughout. A failure leaves
        the host as it is (`uno down` removes it)."""
        for comp in services:
            comp.up()
        return self.status()

    def down(self) -> None:
        """Tear down everything this host owns, in reverse order, then sweep by name (idempotent)."""
        self._stop_agent()
        state = self._saved_state()
        errors: list[str] = []
        if state:
            for comp in reversed(self._live_components(state)):
                try:
                    comp.down()
                except Exception as exc:  # keep tearing down; report at the end
                    errors.append(f"{comp.key}: {exc}")
        self._sweep()
        if self.rundir.exists():
            shutil.rmtree(self.rundir, ignore_errors=True)
        shutil.rmtree(self.snic_disks, ignore_errors=True)
        with contextlib.suppress(OSError):  # the sNICs' directory root, once no host has a disk there
            self.snic_disks.parent.rmdir()
        if errors:
            raise DatapathError("teardown finished with errors: " + "; ".join(errors))

    def _stop_agent(self, timeout: float = 20.0) -> None:
        """The host's `uno agent serve` first (it was started last): stopped while the switches still run,
        its failover watchdog does not try to replace the NFs the teardown kills (each try then waited out
        OVSDB timeouts). It leaves its NFs running; the teardown takes them.
        Only a process whose command line is an agent's (a stale endpoint's PID may be another's by now)."""

        entry = status_entry(self.rundir)
        if not entry or not entry["running"]:
            return
        pid = int(entry["pid"])
        argv = process_argv(pid) or []
        if b"agent" in argv and b"serve" in argv:
            kill_and_wait(pid, timeout)

    def _sweep(self) -> None:
        # Processes started from our rundir or an sNIC's disk (daemons whose state file was lost).
        for d in (self.rundir, self.snic_disks):
            for pidfile in d.rglob("*.pid") if d.exists() else []:
                pid = read_pidfile(pidfile)
                if pid:
                    kill_and_wait(pid)
            # ... and those whose pidfiles are gone too (directory removed): by their command line or cwd.
            for pid in processes_using(d):
                kill_and_wait(pid)
        release_leftovers(self.rundir)  # an OVS-DPDK switch's hugepages and hugetlbfs mount, after a crash
        for k in range(len(self.config.snics)):
            host_if = nm.if_mgmt(self.name, k)[0]
            if link_exists(host_if):
                run(["ip", "link", "del", host_if], check=False)
        for ns in nm.owned_namespaces(self.name, netns_list()):
            for pid in netns_pids(ns):
                kill_and_wait(pid)
            netns_del(ns)
        for k in range(16):
            cg = CpuCgroup(nm.cgroup_snic(self.name, k))
            try:
                if cg.exists():
                    cg.destroy()
            except DatapathError:
                continue

    def status(self) -> dict:
        """One object: name, up, rundir, then each component's status under its key ("snic" -> "snics")."""
        state = self._saved_state()
        if not state:
            return {"name": self.name, "up": False}
        out: dict = {"name": self.name, "up": bool(state.get("complete")), "rundir": str(self.rundir)}
        out["snics"] = []
        comps = self._live_components(state)
        try:
            for comp in comps:
                st = comp.status()
                if comp.key == "snic":
                    out["snics"].append(st)
                else:
                    out[comp.key] = st
                if comp.key == "host":
                    st["switch"] = comp.switch_info()  # type: ignore[attr-defined]
        finally:  # after all: the VMs' and sNICs' status read the host switch too
            for comp in comps:
                close = getattr(comp, "close", None)
                if close:
                    close()
        # Up = a completed bring-up whose switches, Redis and OneSwitch still run (after a crash: false, and
        # `uno up` recovers: Redis or OneSwitch alone restarted, the whole host after a switch died).
        switches = [out["host"], *[sn for sn in out["snics"] if "running" in sn]]
        out["up"] = out["up"] and all(sw["running"] for sw in switches) and out["redis"]["running"]
        if "oneswitch" in out:
            out["up"] = out["up"] and out["oneswitch"]["running"]
        out["up"] = out["up"] and all(sn.get("agent_pid") for sn in out["snics"] if sn.get("agent"))

        agent = status_entry(self.rundir)
        if agent is not None:
            out["agent"] = agent
        return out


def processes_using(rundir: Path, proc: Path = Path("/proc")) -> list[int]:
    """PIDs whose command line names a path under `rundir`, or whose working directory is in it.

    (redis-server rewrites its command line, but runs in `--dir rundir`; a removed directory shows as
    "PATH (deleted)".)
    """
    prefix = str(rundir).rstrip("/") + "/"
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            args = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd").removesuffix(" (deleted)") + "/"
        except OSError:
            continue
        if prefix in args or cwd.startswith(prefix):
            found.append(int(entry.name))
    return found


def ping(netns: str, ip: str, count: int = 3, timeout: float = 10) -> bool:
    """True if `ip` answered from `netns`; False also when ping did not finish within `timeout` s."""
    try:
        proc = subprocess.run(
            ["ip", "netns", "exec", netns, "ping", "-c", str(count), "-i", "0.2", "-W", "1", ip],
            capture_output=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return False
    return proc.returncode == 0
