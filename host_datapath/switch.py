"""Driver of one Open vSwitch bridge: the host switch, or a SmartNIC's switch (same interface).

OVSDB goes through ovsdbapp (idempotent commands, batched transactions, one IDL connection owned by
ovsdbapp's own thread). OpenFlow (flows, flow statistics) goes through `ovs-ofctl -O OpenFlow13` against the
bridge's OpenFlow endpoint: its management socket locally, or a TCP listener on a DPU.
"""

from __future__ import annotations

import re
import time
import warnings
from dataclasses import dataclass, field

from host_datapath.sysutil import DatapathError, run

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # ovs.poller warns that eventlet (pulled in by faucet) is deprecated
    from ovsdbapp.backend.ovs_idl import connection as ovs_connection
    from ovsdbapp.schema.open_vswitch import impl_idl


@dataclass(frozen=True)
class FlowStat:
    """One row of a flow-statistics reply."""

    table: int
    priority: int
    match: str
    actions: str
    packets: int
    bytes: int
    cookie: int = 0


@dataclass
class SwitchDriver:
    """One bridge reached through `ovsdb` (an OVSDB remote) and `openflow` (an ovs-ofctl target).

    `datapath_type` is "netdev" for the emulated host (userspace datapath) and "" (kernel or DPU default)
    or "netdev" on real servers; `netns` is where the bridge's ports live (None on a remote DPU).
    """

    bridge: str
    ovsdb: str
    openflow: str | None = None
    datapath_type: str = "netdev"
    netns: str | None = None
    timeout: float = 10.0
    listeners: tuple[str, ...] = ()  # passive OpenFlow listeners kept through every set_controller
    # Marks every Port, Interface and QoS row this driver adds (external_ids), e.g. {"uno-owner": NAME} on an
    # operator's OVS, where a teardown removes only the rows carrying it.
    external_ids: dict[str, str] = field(default_factory=dict)
    # add_port: OVS must give the requested OpenFlow port number (else an error); False: take what it gives
    # (a bridge shared with an operator's ports may have the number taken).
    exact_ofport: bool = True
    _api: impl_idl.OvsdbIdl | None = field(default=None, init=False, repr=False)

    # -- OVSDB -------------------------------------------------------------------------------------
    @property
    def api(self) -> impl_idl.OvsdbIdl:
        if self._api is None:
            try:
                idl = ovs_connection.OvsdbIdl.from_server(self.ovsdb, "Open_vSwitch")
                # ovsdbapp keeps the connection in a class attribute (one per process): a private subclass
                # per driver, or a second switch's commands would silently go to the first switch's OVSDB.
                backend = type("SwitchOvsdb", (impl_idl.OvsdbIdl,), {"_ovsdb_connection": None})
                self._api = backend(ovs_connection.Connection(idl=idl, timeout=self.timeout))
            except Exception as exc:  # ovsdbapp raises several types for an unreachable server
                raise DatapathError(f"cannot reach OVSDB at {self.ovsdb}: {exc}") from exc
        return self._api

    def close(self) -> None:
        if self._api is not None:
            self._api.ovsdb_connection.stop()
            self._api = None

    def ensure_bridge(self) -> None:
        """Create the bridge if missing: OpenFlow 1.3 (and 1.5, which OneSwitch uses only to set its scale-out
        groups' hash: OneSwitch's SelectMethod), fail_mode secure, in-band off (idempotent)."""
        with self.api.transaction(check_error=True) as txn:
            txn.add(self.api.add_br(self.bridge, may_exist=True, datapath_type=self.datapath_type or None))
            txn.add(
                self.api.db_set(
                    "Bridge",
                    self.bridge,
                    ("protocols", ["OpenFlow13", "OpenFlow15"]),
                    ("fail_mode", "secure"),
                    ("other_config", {"disable-in-band": "true"}),
                )
            )
        if self.listeners:
            self.set_controller([])
        if self.openflow is None:
            self.openflow = f"unix:{self.rundir_of_bridge()}/{self.bridge}.mgmt"

    def rundir_of_bridge(self) -> str:
        if not self.ovsdb.startswith("unix:"):
            raise DatapathError(f"bridge {self.bridge}: give the OpenFlow endpoint of a remote switch")
        return self.ovsdb[len("unix:") :].rsplit("/", 1)[0]

    def delete_bridge(self) -> None:
        self.api.del_br(self.bridge, if_exists=True).execute(check_error=True)

    def add_port(
        self,
        name: str,
        ofport: int,
        internal: bool = False,
        iface_type: str | None = None,
        options: dict[str, str] | None = None,
        mtu: int | None = None,
    ) -> int:
        """Attach device `name` as OpenFlow port `ofport` (idempotent; the device must exist in `netns`);
        returns the port's number.

        `iface_type`/`options`/`mtu`: the Interface's type, options and mtu_request, set in the same transaction
        (a DPDK port: type "dpdk", options {"dpdk-devargs": ...}; host_datapath/dpdk_ports.py; a VM's
        vhost-user port: dpdkvhostuserclient with vhost-server-path). The driver's `external_ids` mark the Port
        and Interface rows. A port OVS cannot open fails naming the Interface's error."""
        if not 1 <= ofport <= 0xFF00:
            raise DatapathError(f"ofport {ofport} out of range 1..65280")
        if not self.exact_ofport:  # a number another port has or asked for: OVS would renumber that port
            ofport = free_number(ofport, self._numbers_taken(name))
        cols: list[tuple[str, object]] = [("ofport_request", ofport)]
        if internal or iface_type:
            cols.append(("type", "internal" if internal else iface_type))
        if options:
            cols.append(("options", dict(options)))
        if mtu:
            cols.append(("mtu_request", mtu))
        if self.external_ids:
            cols.append(("external_ids", dict(self.external_ids)))
        holder = self.port_bridge(name)
        if holder not in (None, self.bridge):  # ovsdbapp's may_exist would take (and change) it silently
            raise DatapathError(f"port {name} is a port of bridge {holder}, not of {self.bridge}")
        with self.api.transaction(check_error=True) as txn:
            txn.add(self.api.add_port(self.bridge, name, may_exist=True))
            if self.external_ids:
                txn.add(self.api.db_set("Port", name, ("external_ids", dict(self.external_ids))))
            txn.add(self.api.db_set("Interface", name, *cols))
        got = self.ofport(name)
        if got is None or (self.exact_ofport and got != ofport):
            why = self.interface_error(name)
            raise DatapathError(
                f"port {name}: asked for OpenFlow port {ofport}, OVS gave {got}" + (f": {why}" if why else "")
            )
        return got

    def _numbers_taken(self, name: str) -> set[int]:
        """The OpenFlow numbers the bridge's other interfaces have or asked for (from the IDL's copy)."""
        for _ in range(3):  # the IDL's thread may change the rows while they are read
            try:
                br = next((b for b in self.api.tables["Bridge"].rows.values() if b.name == self.bridge), None)
                ifaces = [i for p in (br.ports if br else []) for i in p.interfaces if i.name != name]
                return {n for i in ifaces for n in (*i.ofport, *i.ofport_request)}
            except RuntimeError:
                time.sleep(0.01)
        raise DatapathError(f"cannot read the ports of {self.ovsdb}")

    def interface_error(self, name: str) -> str:
        """The Interface's `error` column (why OVS could not open it), "" if none."""
        try:
            val = self.api.db_get("Interface", name, "error").execute(check_error=True)
        except Exception:  # the row is gone: no error to tell
            return ""
        val = val[0] if isinstance(val, list) and val else val
        return val if isinstance(val, str) else ""

    def keep_own_qdisc(self, port: str) -> None:
        """Give `port` OVS's linux-noop QoS, so OVS leaves its Linux qdisc (our tc shaping) alone.

        Without it OVS replaces the root qdisc of a port without QoS when it (re)configures the port.
        """
        marks = {"external_ids": dict(self.external_ids)} if self.external_ids else {}
        qos = self.api.db_create("QoS", type="linux-noop", **marks).execute(check_error=True)
        self.api.db_set("Port", port, ("qos", qos)).execute(check_error=True)

    def del_port(self, name: str) -> None:
        """Remove port `name` from this bridge; nothing when it is not there (also when it is a port of another
        bridge: ovsdbapp's if_exists would delete that one's rows)."""
        if self.port_bridge(name) != self.bridge:
            return
        self.api.del_port(name, bridge=self.bridge, if_exists=True).execute(check_error=True)

    def port_bridge(self, name: str) -> str | None:
        """The bridge that holds port `name` in this OVS (None: no such port); from the IDL's local copy."""
        for _ in range(3):  # the IDL's thread may change the rows while they are read
            try:
                for br in list(self.api.tables["Bridge"].rows.values()):
                    if any(p.name == name for p in br.ports):
                        return br.name
                return None
            except RuntimeError:
                time.sleep(0.01)
        raise DatapathError(f"cannot read the ports of {self.ovsdb}")

    def ofport(self, name: str, wait: float = 5.0) -> int | None:
        """OpenFlow port number of `name`, once vswitchd has assigned it (None if it never does).

        Polled every 2 ms: a read is a look-up in the IDL's local copy (no OVSDB round trip), and a new
        port's number comes a few ms after its transaction (on the cold NF start's path, which a 50 ms
        interval rounded up to 50 ms)."""
        deadline = time.monotonic() + wait
        while True:
            val = self.api.db_get("Interface", name, "ofport").execute(check_error=True)
            val = val[0] if isinstance(val, list) and val else val
            if isinstance(val, int) and val > 0:
                return val
            if time.monotonic() > deadline:
                return None
            time.sleep(0.002)

    def ports(self) -> dict[str, int]:
        """Port name -> OpenFlow port number, for every port of the bridge but its internal one."""
        names = self.api.list_ports(self.bridge).execute(check_error=True)
        out = {}
        for name in names:
            num = self.api.db_get("Interface", name, "ofport").execute(check_error=True)
            num = num[0] if isinstance(num, list) and num else num
            if isinstance(num, int) and num > 0:
                out[name] = num
        return out

    def port_stats(self) -> dict[str, dict[str, int]]:
        """Per port name: rx/tx packets, bytes and drops, live from OpenFlow port statistics.

        (OVSDB's Interface statistics lag by vswitchd's stats-update-interval, 5 s by default.)
        """
        by_number = parse_dump_ports(self.ofctl("dump-ports"))
        return {name: by_number[num] for name, num in self.ports().items() if num in by_number}

    def set_controller(self, targets: list[str]) -> None:
        """Point the bridge at OpenFlow controllers (`targets`, e.g. `unix:...`), out-of-band.

        The driver's passive `listeners` are always kept. Adding the first *active* controller or removing the
        last one flushes the bridge's flows (docs/emulated-host.md; passive listeners do not count, measured): set
        controllers before installing flows.
        """
        wanted = list(dict.fromkeys([*self.listeners, *targets]))
        self.api.set_controller(self.bridge, wanted).execute(check_error=True)
        ctls = self.api.db_get("Bridge", self.bridge, "controller").execute(check_error=True)
        ctls = ctls if isinstance(ctls, list) else [ctls]  # ovsdbapp unwraps a one-element set
        with self.api.transaction(check_error=True) as txn:
            for ctl in ctls:
                txn.add(
                    self.api.db_set(
                        "Controller", getattr(ctl, "uuid", ctl), ("connection_mode", "out-of-band")
                    )
                )

    # -- OpenFlow -------------------------------------------------------------------------------------
    def ofctl(self, *args: str) -> str:
        if self.openflow is None:
            raise DatapathError(f"bridge {self.bridge}: no OpenFlow endpoint (call ensure_bridge first)")
        return run(["ovs-ofctl", "-O", "OpenFlow13", *args[:1], self.openflow, *args[1:]])

    def add_flows(self, flows: list[str]) -> None:
        """Install flows in ovs-ofctl syntax, all in one OpenFlow bundle (atomic)."""
        if not flows:
            return
        run(
            ["ovs-ofctl", "-O", "OpenFlow13", "--bundle", "add-flows", self._target(), "-"],
            input_text="\n".join(flows) + "\n",
        )

    def del_flows(self, match: str = "") -> None:
        self.ofctl("del-flows", *([match] if match else []))

    def flow_stats(self) -> list[FlowStat]:
        return parse_dump_flows(self.ofctl("dump-flows"))

    def _target(self) -> str:
        if self.openflow is None:
            raise DatapathError(f"bridge {self.bridge}: no OpenFlow endpoint (call ensure_bridge first)")
        return self.openflow


def free_number(want: int, taken: set[int], top: int = 0xFF00) -> int:
    """`want`, or the next OpenFlow port number above it that is not `taken` (wrapping to 1)."""
    for n in [*range(want, top + 1), *range(1, want)]:
        if n not in taken:
            return n
    raise DatapathError("no free OpenFlow port number on the bridge")


_PORT_LINE = re.compile(r"^\s*port\s+(\S+):\s+rx\s+(.*)$")


def parse_dump_ports(text: str) -> dict[int, dict[str, int]]:
    """Parse `ovs-ofctl -O OpenFlow13 dump-ports`: OpenFlow port number -> counters (LOCAL is skipped)."""
    out: dict[int, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in text.splitlines():
        m = _PORT_LINE.match(line)
        if m:
            num, rest = m.groups()
            current = None
            if num.isdigit():
                current = out.setdefault(int(num), {})
                current.update(_counters("rx", rest))
            continue
        stripped = line.strip()
        if current is not None and stripped.startswith("tx "):
            current.update(_counters("tx", stripped[3:]))
    return out


def _counters(prefix: str, text: str) -> dict[str, int]:
    names = {"pkts": "packets", "bytes": "bytes", "drop": "dropped"}
    vals = {}
    for key, val in _FIELD.findall(text):
        if key in names:
            vals[f"{prefix}_{names[key]}"] = int(val) if val.isdigit() else 0  # "?" = not supported
    return vals


_FIELD = re.compile(r"(\w+)=([^,\s]+)")
_STAT_KEYS = ("cookie", "duration", "table", "n_packets", "n_bytes", "idle_timeout", "hard_timeout", "idle_age",
              "hard_age", "importance", "reset_counts", "send_flow_rem", "no_packet_counts", "no_byte_counts")  # fmt: skip


def parse_dump_flows(text: str) -> list[FlowStat]:
    """Parse `ovs-ofctl -O OpenFlow13 dump-flows` output. Unparseable lines raise DatapathError.

    ovs-ofctl separates statistics with ", " and match fields with ","; the match (which starts with
    "priority=N" unless the priority is the default 32768) is the last ", "-separated token.
    """
    flows = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("OFPST_", "NXST_", "OFPT_")):
            continue
        head, sep, actions = line.partition("actions=")
        if not sep:
            raise DatapathError(f"unparseable flow line: {line!r}")
        tokens = [t.strip() for t in head.strip().rstrip(",").split(", ")]
        stats = dict(_FIELD.findall(", ".join(t for t in tokens if t.startswith(_STAT_KEYS))))
        last = tokens[-1] if tokens else ""
        match = "" if last.startswith(_STAT_KEYS) else last
        priority = 32768
        if match.startswith("priority="):
            prio, _, match = match.partition(",")
            priority = int(prio.split("=", 1)[1])
        try:
            flows.append(
                FlowStat(
                    table=int(stats.get("table", 0)),
                    priority=priority,
                    match=match,
                    actions=actions.strip(),
                    packets=int(stats.get("n_packets", 0)),
                    bytes=int(stats.get("n_bytes", 0)),
                    cookie=int(stats.get("cookie", "0"), 16),
                )
            )
        except ValueError as exc:
            raise DatapathError(f"unparseable flow line: {line!r}") from exc
    return flows
