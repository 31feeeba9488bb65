"""The host switch on an Open vSwitch someone else runs (the server's own: the openvswitch-switch service,
OVS-DPDK): UNO makes one bridge there, or with `adopt` takes over an existing one, plugs its own ports into it,
and changes nothing else of that OVS (no other bridge, port, flow, nor the Open_vSwitch table's settings).

Ownership marks (`external_ids`), the value being the UNO host's name:
- a bridge UNO made: `uno-owner`; a bridge UNO took over: `uno-adopted` (and `uno-added-protocols` when UNO
  had to add OpenFlow13 to its `protocols`);
- every Port, Interface, QoS and Controller row UNO adds: `uno-owner`.
A bridge is UNO host N's if it carries `uno-owner=N` or `uno-adopted=N`; any other existing bridge is refused
unless `adopt` (and one marked for another UNO host always is). `down()` removes only rows carrying the mark:
a bridge UNO made, with all it holds; on an adopted bridge UNO's ports, QoS and Controller rows, OneSwitch's
flows (cookie top byte 0x55) and groups (its reserved ids), and the adoption marks (the protocols it added).

OpenFlow: OneSwitch and ovs-ofctl reach the bridge through the management socket ovs-vswitchd keeps for every
bridge in its run directory, `unix:RUNDIR/BRIDGE.mgmt` (RUNDIR: the Open_vSwitch row's `external_ids:rundir`,
which ovs-ctl records, else the OVSDB socket's directory). It needs no setting on the bridge, takes no TCP port,
and only root can open it (a `ptcp:` listener on 127.0.0.1 would let any local user program the bridge).
Such a connection is an OVS "service" connection: it gets asynchronous messages (packet-in, port status) once
it sets a non-zero miss_send_len, which OneSwitch's handshake does. With a `tcp:` OVSDB the run directory is
not known here: UNO's bridge then gets a passive listener `ptcp:PORT:127.0.0.1` (a Controller row of UNO's
bridge, marked; PORT picked free at `up`).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from host_datapath.host_switch import BridgePorts
from host_datapath.ovsdb_probe import probe_ovsdb
from host_datapath.switch import SwitchDriver
from host_datapath.sysutil import (
    DatapathError,
    free_port,
    kernel_datapath_problem,
    link_exists,
    read_pidfile,
    run,
    tcp_open,
    wait_for,
)

OWNER = "uno-owner"
ADOPTED = "uno-adopted"
ADDED_PROTOCOLS = "uno-added-protocols"
ONESWITCH_COOKIES = "cookie=0x5500000000000000/0xff00000000000000"  # oneswitch/README.md "Shared switches"
ONESWITCH_GROUPS = range(0xFFF00000, 0xFFF40000)  # its reserved group ids (select, carrier, label variants)


class SwitchConfigError(DatapathError):
    """The operator's OVS does not fit the config: `key` names the config key to change; nothing was changed."""

    def __init__(self, key: str, message: str):
        super().__init__(f"config: {key}: {message}")
        self.key = key
        self.message = message


@dataclass
class ExternalHostSwitch(BridgePorts):
    """Bridge `bridge` of the OVS at `ovsdb`, for UNO host `owner`; its ports live in the root namespace."""

    owner: str
    ovsdb: str
    bridge: str
    datapath_type: str = "netdev"
    adopt: bool = False
    timeout: float = 10.0
    netns: str | None = (
        None  # the switch's ports are in the root namespace, where the operator's vswitchd runs
    )
    driver: SwitchDriver = field(init=False)

    key = "host"  # its key in `uno status --json`

    def __post_init__(self) -> None:
        # an adopted bridge's operator ports may hold the OpenFlow numbers UNO asks for: take what OVS gives
        self.driver = SwitchDriver(
            self.bridge, self.ovsdb, openflow=None, datapath_type=self.datapath_type, netns=None,
            timeout=self.timeout, external_ids={OWNER: self.owner}, exact_ofport=not self.adopt,
        )  # fmt: skip

    # -- reading the operator's OVS (no changes) --------------------------------------------------------------
    def _connect(self) -> None:
        try:
            dbs = probe_ovsdb(self.ovsdb)
        except DatapathError as exc:
            raise SwitchConfigError("host.switch.ovsdb", str(exc)) from None
        if "Open_vSwitch" not in dbs:
            raise SwitchConfigError(
                "host.switch.ovsdb", f"{self.ovsdb} serves no Open_vSwitch database ({dbs})"
            )
        try:
            self.driver.api  # noqa: B018 - connects
        except DatapathError as exc:
            raise SwitchConfigError("host.switch.ovsdb", str(exc)) from None

    def _rows(self, table: str) -> list:
        for _ in range(3):  # the IDL's thread may change the rows while they are read
            try:
                return list(self.driver.api.tables[table].rows.values())
            except RuntimeError:
                time.sleep(0.01)
        raise DatapathError(f"cannot read table {table} of {self.ovsdb}")

    def _ovs(self):
        rows = self._rows("Open_vSwitch")
        if not rows:
            raise SwitchConfigError(
                "host.switch.ovsdb", f"{self.ovsdb} has no Open_vSwitch row (not initialised)"
            )
        return rows[0]

    def _bridge_row(self):
        return next((br for br in self._rows("Bridge") if br.name == self.bridge), None)

    def _mine(self, ids: dict) -> bool:
        return ids.get(OWNER) == self.owner

    def ownership(self) -> str:
        """ "absent", "created" (UNO made it), "adopted" (UNO took it over), "foreign" (nobody's mark) or
        "uno:NAME" (another UNO host's)."""
        br = self._bridge_row()
        if br is None:
            return "absent"
        ids = br.external_ids
        if ids.get(OWNER) == self.owner:
            return "created"
        if ids.get(ADOPTED) == self.owner:
            return "adopted"
        other = ids.get(OWNER) or ids.get(ADOPTED)
        return f"uno:{other}" if other else "foreign"

    def rundir(self) -> Path | None:
        """ovs-vswitchd's run directory (its pidfile and the bridges' management sockets): None with a `tcp:`
        OVSDB (not known from here)."""
        if not self.ovsdb.startswith("unix:"):
            return None
        recorded = self._ovs().external_ids.get("rundir")
        return Path(recorded) if recorded else Path(self.ovsdb[len("unix:") :]).parent

    def vswitchd_pid(self) -> int | None:
        rundir = self.rundir()
        return read_pidfile(rundir / "ovs-vswitchd.pid") if rundir else None

    def vlan_limit(self) -> int:
        """The operator's `other_config:vlan-limit` (how many VLAN headers OVS parses; 0 = as many as it can,
        2); OVS's default is 1."""
        raw = self._ovs().other_config.get("vlan-limit", "1")
        return int(raw) if str(raw).isdigit() else 1

    def dpdk_initialized(self) -> bool:
        return bool(getattr(self._ovs(), "dpdk_initialized", False))

    def preflight(self, ports: tuple[tuple[str, str, str], ...] = ()) -> None:
        """Check, changing nothing, that UNO can use this OVS, its bridge and `ports` ((name, config key, kind)
        each, see `check_port`); SwitchConfigError naming the key."""
        self._connect()
        ovs = self._ovs()
        types = list(getattr(ovs, "datapath_types", []) or [])
        if types and self.datapath_type not in types:
            raise SwitchConfigError(
                "host.switch.datapath_type",
                f"{self.datapath_type!r}: this OVS offers only {', '.join(types)}",
            )
        if self.datapath_type == "system":  # OVS lists it whether or not the kernel has the module
            problem = kernel_datapath_problem()
            if problem:
                raise SwitchConfigError("host.switch.datapath_type", f"system: {problem}; use netdev")
        rundir = self.rundir()
        if rundir is not None:
            if not rundir.is_dir():
                raise SwitchConfigError(
                    "host.switch.ovsdb",
                    f"ovs-vswitchd's run directory {rundir} does not exist on this machine",
                )
            if not read_pidfile(rundir / "ovs-vswitchd.pid"):
                raise SwitchConfigError(
                    "host.switch.ovsdb",
                    f"no ovs-vswitchd runs for {self.ovsdb} (no live process in {rundir}/ovs-vswitchd.pid)",
                )
        state = self.ownership()
        if state == "absent" and link_exists(self.bridge):
            raise SwitchConfigError(
                "host.switch.bridge", f"an interface {self.bridge} exists on this machine (not a bridge of this "
                "OVS): its internal port would clash; name another bridge",
            )  # fmt: skip
        if state.startswith("uno:"):
            raise SwitchConfigError(
                "host.switch.bridge",
                f"bridge {self.bridge} belongs to UNO host {state[4:]!r} (its external_ids); name another bridge",
            )
        if state == "foreign" and not self.adopt:
            raise SwitchConfigError(
                "host.switch.bridge",
                f"bridge {self.bridge} exists on {self.ovsdb} and is not UNO's: set host.switch.adopt: true to take "
                "it over (UNO then adds only its own ports and flows there), or name another bridge",
            )
        if state in ("foreign", "adopted"):
            have = self._bridge_row().datapath_type or "system"
            if have != self.datapath_type:
                raise SwitchConfigError(
                    "host.switch.datapath_type",
                    f"bridge {self.bridge} has datapath_type {have}, the config says {self.datapath_type}",
                )
        for name, key, kind in ports:
            self.check_port(name, key, kind)

    def check_port(self, name: str, key: str, kind: str) -> None:
        """Changing nothing, check that port `name` can be UNO's (`key`: the config key naming it). `kind`:
        "new" (UNO makes the device: nothing of that name may exist), "tap" (an existing tap device),
        "device" (an existing kernel device, or a port already on UNO's bridge), "vhostuser" (an OVS-DPDK
        port UNO adds)."""
        holder = self.driver.port_bridge(name)
        if holder is not None and holder != self.bridge:
            raise SwitchConfigError(key, f"{name} is a port of bridge {holder}, which is not UNO's (UNO never changes "
                                    "another bridge)")  # fmt: skip
        on_ours = holder == self.bridge
        if kind == "new":
            if (on_ours and not self._port_marked(name)) or (not on_ours and link_exists(name)):
                raise SwitchConfigError(key, f"an interface {name} exists on this machine; UNO makes this one itself "
                                        "(name another)")  # fmt: skip
            return
        if kind == "vhostuser":
            if not self.dpdk_initialized():
                raise SwitchConfigError(
                    key, f"vhostuser needs an OVS with DPDK initialised (Open_vSwitch dpdk_initialized is false at "
                    f"{self.ovsdb}: OVS-DPDK with other_config:dpdk-init=true)",
                )  # fmt: skip
            if on_ours and not self._port_marked(name):
                raise SwitchConfigError(key, f"{name} is already a port of {self.bridge} (not UNO's)")
            return
        if on_ours:
            return  # an operator's port on an adopted bridge: used as it is
        if not link_exists(name):
            raise SwitchConfigError(key, f"no interface {name} on this machine")
        if kind == "tap" and not Path(f"/sys/class/net/{name}/tun_flags").exists():
            raise SwitchConfigError(key, f"{name} is not a tap device")

    def _port_marked(self, name: str) -> bool:
        row = next((p for p in self._rows("Port") if p.name == name), None)
        return row is not None and self._mine(row.external_ids)

    # -- lifecycle -------------------------------------------------------------------------------------------
    def up(self) -> None:
        """Make UNO's bridge (or take the adopted one over), idempotent; then wait for its OpenFlow endpoint.
        (`EmulatedHost.up` runs `preflight` with every port first, before it changes anything.)"""
        self.preflight()
        api = self.driver.api
        state = self.ownership()
        if state == "absent":
            with api.transaction(check_error=True) as txn:
                txn.add(api.add_br(self.bridge, may_exist=False, datapath_type=self.datapath_type))
                txn.add(api.db_set(
                    "Bridge", self.bridge, ("protocols", ["OpenFlow13"]), ("fail_mode", "secure"),
                    ("other_config", {"disable-in-band": "true"}), ("external_ids", {OWNER: self.owner}),
                ))  # fmt: skip
                for table in ("Port", "Interface"):  # its internal port
                    txn.add(api.db_set(table, self.bridge, ("external_ids", {OWNER: self.owner})))
        elif state == "foreign":
            br = self._bridge_row()
            marks = {ADOPTED: self.owner}
            cols: list[tuple] = []
            protocols = list(br.protocols)
            if protocols and "OpenFlow13" not in protocols:  # empty = OVS's default set, which has it
                cols.append(("protocols", [*protocols, "OpenFlow13"]))
                marks[ADDED_PROTOCOLS] = "OpenFlow13"
            api.db_set("Bridge", self.bridge, ("external_ids", marks), *cols).execute(check_error=True)
        self.driver.exact_ofport = self.ownership() != "adopted"  # the operator's ports may hold our numbers
        if self.rundir() is None and self._listener() is None:
            ctl = api.db_create(
                "Controller", target=f"ptcp:{free_port()}:127.0.0.1", external_ids={OWNER: self.owner}
            ).execute(check_error=True)
            api.db_add("Bridge", self.bridge, "controller", ctl).execute(check_error=True)
        target = self.openflow_target()
        self.driver.openflow = target
        if target.startswith("unix:"):
            path = Path(target[len("unix:") :])
            wait_for(path.exists, 10, f"ovs-vswitchd's management socket {path} (is its run directory "
                     f"{path.parent}?)")  # fmt: skip
        else:
            port = int(target.rsplit(":", 1)[1])
            wait_for(lambda: tcp_open(port), 10, f"the OpenFlow listener {target} of bridge {self.bridge}")

    def _listener(self) -> str | None:
        """`tcp:127.0.0.1:PORT` of UNO's passive listener on the bridge (tcp OVSDB only), if there is one."""
        br = self._bridge_row()
        for ctl in list(br.controller) if br is not None else []:
            m = re.match(r"^ptcp:(\d+):127\.0\.0\.1$", ctl.target)
            if m and self._mine(ctl.external_ids):
                return f"tcp:127.0.0.1:{m.group(1)}"
        return None

    def openflow_target(self) -> str:
        """Where OneSwitch and ovs-ofctl reach the bridge (module docstring)."""
        rundir = self.rundir()
        if rundir is not None:
            return f"unix:{rundir}/{self.bridge}.mgmt"
        listener = self._listener()
        if listener is None:
            raise DatapathError(f"bridge {self.bridge} has no OpenFlow listener of UNO's (is it up?)")
        return listener

    def ofctl_target(self) -> str:
        return self.openflow_target()

    def attach_device(self, name: str, ofport: int) -> int:
        """Put existing device `name` (a VM's tap, a DPU's PF) on the bridge as OpenFlow port `ofport`, marked;
        a port already on the bridge (an adopted bridge's) is used as it is. Returns its port number."""
        if self.driver.port_bridge(name) == self.bridge and not self._port_marked(name):
            got = self.driver.ofport(name)
            if got is None:
                raise DatapathError(f"port {name} of {self.bridge} has no OpenFlow port number")
            return got
        return self.driver.add_port(name, ofport)

    def connect_controllers(self, targets: list[str]) -> list[str]:
        raise DatapathError("an external host switch is driven by OneSwitch only (oneswitch.enabled)")

    def down(self, must_reach: bool = True) -> None:
        """Remove what UNO made on the operator's OVS, and only that (module docstring). Idempotent; changes
        nothing (no transaction) when nothing carries UNO's marks. `must_reach`: an unreachable OVSDB is an
        error (else nothing to do: e.g. a host that never came up)."""
        try:
            self._connect()
        except SwitchConfigError:
            self.driver.close()
            if must_reach:
                raise
            return
        try:
            self._remove_own_rows()
        finally:
            self.driver.close()

    def _remove_own_rows(self) -> None:
        api = self.driver.api
        state = self.ownership()
        errors: list[str] = []
        cmds = []
        br = self._bridge_row()
        if state == "created":
            cmds.append(api.del_br(self.bridge, if_exists=True))
        elif state == "adopted":
            errors += self._remove_oneswitch_flows()
            for port in br.ports:
                if self._mine(port.external_ids):
                    cmds.append(api.del_port(port.name, bridge=self.bridge, if_exists=True))
            for ctl in br.controller:
                if self._mine(ctl.external_ids):
                    cmds.append(api.db_remove("Bridge", self.bridge, "controller", ctl.uuid))
            if br.external_ids.get(ADDED_PROTOCOLS):
                added = br.external_ids[ADDED_PROTOCOLS]
                cmds.append(
                    api.db_set("Bridge", self.bridge, ("protocols", [p for p in br.protocols if p != added]))
                )
            cmds.append(api.db_remove("Bridge", self.bridge, "external_ids", ADOPTED, ADDED_PROTOCOLS))
        self._commit(cmds)
        # QoS rows are roots in the schema: they outlive the ports that used them (deleted once no port, the
        # ones just removed included, refers to them: a second transaction)
        in_use = {q.uuid for p in self._rows("Port") for q in p.qos}
        self._commit([api.db_destroy("QoS", q.uuid) for q in self._rows("QoS")
                      if self._mine(q.external_ids) and q.uuid not in in_use])  # fmt: skip
        if errors:
            raise DatapathError("; ".join(errors))

    def _commit(self, cmds: list) -> None:
        if cmds:
            with self.driver.api.transaction(check_error=True) as txn:
                for cmd in cmds:
                    txn.add(cmd)

    def _remove_oneswitch_flows(self) -> list[str]:
        """OneSwitch's flows and reserved groups on an adopted bridge (it ran as a shared switch's controller)."""
        try:
            target = self.openflow_target()
        except DatapathError as exc:
            return [str(exc)]
        errors = []
        try:
            run(["ovs-ofctl", "-O", "OpenFlow13", "del-flows", target, ONESWITCH_COOKIES])
            dump = run(["ovs-ofctl", "-O", "OpenFlow13", "dump-groups", target])
            for gid in re.findall(r"group_id=(\d+)", dump):
                if int(gid) in ONESWITCH_GROUPS:
                    run(["ovs-ofctl", "-O", "OpenFlow13", "del-groups", target, f"group_id={gid}"])
        except DatapathError as exc:
            errors.append(f"OneSwitch's flows on {self.bridge}: {exc}")
        return errors

    # -- status --------------------------------------------------------------------------------------------
    def running(self) -> bool:
        """The OVS answers, the bridge is UNO's, and (known run directory) its ovs-vswitchd runs."""
        try:
            self._connect()
            if self.ownership() not in ("created", "adopted"):
                return False
            return self.rundir() is None or self.vswitchd_pid() is not None
        except DatapathError:
            return False

    def port_numbers(self) -> dict[str, int]:
        try:
            return self.driver.ports() if self.running() else {}
        except DatapathError:
            return {}

    def switch_info(self) -> dict:
        """`host.switch` of `uno status --json`."""
        out: dict = {"mode": "external", "bridge": self.bridge, "ovsdb": self.ovsdb,
                     "datapath_type": self.datapath_type, "owner_mark": f"external_ids:{OWNER}={self.owner}"}  # fmt: skip
        try:
            self._connect()
            state = self.ownership()
            out |= {"adopted": state == "adopted", "created": state == "created", "shared": state == "adopted",
                    "rundir": str(self.rundir()) if self.rundir() else None, "vlan_limit": self.vlan_limit(),
                    "dpdk_initialized": self.dpdk_initialized()}  # fmt: skip
        except DatapathError as exc:
            out["error"] = str(exc)
        return out

    def status(self) -> dict:
        running = self.running()
        try:
            target = self.openflow_target() if running else None
        except DatapathError:
            target = None
        return {
            "netns": None,
            "bridge": self.bridge,
            "ovsdb": self.ovsdb,
            "openflow": target,
            "openflow_tcp": target if target and target.startswith("tcp:") else None,
            "openflow_tcp_socket": None,
            "openflow_relay_pid": None,
            "pids": {"ovs-vswitchd": self.vswitchd_pid() if running else None},
            "running": running,
            "ports": self.port_numbers(),
        }

    def shared(self) -> bool:
        """OneSwitch must treat the bridge as an operator's ("shared": it keeps what is not its own there)."""
        return self.ownership() == "adopted"
