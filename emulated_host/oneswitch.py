"""OneSwitch as a component of the emulated host: its config, its process, its status.

`up()` writes `RUNDIR/NAME/oneswitch/config.json` (dpid from the name, listen/rest on free loopback ports (the
same ones again when it restarts after a crash), the
switches' OpenFlow endpoints (an emulated bridge's unix listener, a BlueField's TCP address), the PCIe port pairs, the fixed virtual ports of VMs and Ethernet
ports), starts `java -jar oneswitch/target/oneswitch-0.1.0-all.jar --config F` in its own session (pid and log
in that directory) and waits until its REST health reports every switch connected. `down()` stops it (by
pidfile; the host's sweep also finds it by its command line, which names the rundir).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from emulated_host import naming as nm
from emulated_host.config import HostConfig
from host_datapath.of_endpoint import OpenFlowTcpEndpoint
from host_datapath.oneswitch_client import OneSwitchClient, OneSwitchError
from host_datapath.sysutil import DatapathError, free_ports, kill_and_wait, pid_alive, read_pidfile, wait_for

REPO_ROOT = Path(__file__).resolve().parents[1]
# UNO_ONESWITCH_JAR: run another build of OneSwitch (e.g. one under test elsewhere) than this checkout's.
JAR = Path(
    os.environ.get("UNO_ONESWITCH_JAR") or REPO_ROOT / "oneswitch" / "target" / "oneswitch-0.1.0-all.jar"
)


def south_target(mode: str | None) -> Callable[[OpenFlowTcpEndpoint], str | None]:
    """How OneSwitch reaches an emulated bridge (env UNO_ONESWITCH_SOUTH): `unix` (default) its punix listener
    `unix:PATH`; `tcp` the socat relay in front of it, `tcp:127.0.0.1:PORT` (as before unix endpoints: to run
    an older jar, e.g. for an A/B benchmark)."""
    if mode in (None, "", "unix"):
        return lambda ep: f"unix:{ep.unix_socket}"
    if mode == "tcp":
        return lambda ep: ep.target()
    raise DatapathError(f"UNO_ONESWITCH_SOUTH={mode!r}: expected unix or tcp")


# 2 cores shared by many: serial GC (no GC threads). A young generation large enough that installing thousands
# of rules rarely collects: each young collection copies the rules installed since the last one, and with a
# small one OneSwitch spent more CPU collecting than translating (bench/RESULTS.md `oneswitch` compares the
# sizes). Compiler threads kept (not started and ended on demand), so their CPU stays visible per thread in
# /proc (the bench's warm-up watches the JIT).
# UNO_ONESWITCH_JVM_OPTS (shell words) replaces them, e.g. to run an A/B benchmark with the earlier options.
JVM_OPTS = shlex.split(os.environ.get("UNO_ONESWITCH_JVM_OPTS", "")) or [
    "-Xms384m",
    "-Xmn256m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:-UseDynamicNumberOfCompilerThreads",
]
START_TIMEOUT = 90.0  # JVM start + handshakes with every switch, on a loaded 2-core machine


def jar_missing_reason(jar: Path | None = None) -> str | None:
    """Why OneSwitch cannot start here (None when it can)."""
    jar = jar or JAR
    if not jar.exists():
        return f"OneSwitch jar {jar} not built (run `scripts/setup.sh java`)"
    from shutil import which

    if which("java") is None:
        return "java not found on PATH (run `scripts/setup.sh java`)"
    return None


def select_hash_opts(select_hash: str) -> list[str]:
    """JVM options for config `oneswitch.select_hash` (south/SelectMethod): "symmetric" (OneSwitch's default:
    a symmetric L3/L4 hash with UDP ports), "5tuple" (dp_hash over the 5-tuple, not symmetric), "ovs" (OVS's
    own default hash, UDP ports left out)."""
    return {"5tuple": ["-Doneswitch.select_method=dp_hash"], "ovs": ["-Doneswitch.select_method=ovs"]}.get(
        select_hash, []
    )


@dataclass(frozen=True)
class SnicLayout:
    """An sNIC bridge's port numbers: its PCIe-facing port and its Ethernet ports (wire), in order."""

    pcie: int
    wire: tuple[int, ...]


@dataclass(frozen=True)
class HostPorts:
    """The host switch's OpenFlow port numbers as OVS gave them: VM i, and sNIC k's PCIe link (missing ones:
    the numbers UNO asks for, 100 + i and 1 + k)."""

    vms: dict[int, int]
    pcie: dict[int, int]


def build_config(
    cfg: HostConfig, switches: dict[str, str], listen: int, rest: int, state_dir: Path,
    layouts: dict[int, SnicLayout] | None = None, host_ports: HostPorts | None = None,
    shared: set[str] | frozenset[str] = frozenset(),
) -> dict:  # fmt: skip
    """OneSwitch's JSON config (oneswitch/README.md) for host `cfg` (pure).

    `switches`: switch id ("host", "snic0", ...) -> its OpenFlow endpoint, `unix:PATH` (an emulated switch's
    bridge listener) or `tcp:HOST:PORT` (a BlueField). Every sNIC takes
    part, emulated or BlueField, with the same port numbering: on the host switch sNIC k's PCIe link is port
    1+k; on the sNIC's bridge the PCIe link is port 100 and Ethernet port j is 1+j, unless `layouts` gives
    sNIC k's ports as discovered (a BlueField's host representor and uplinks, through its agent). A BlueField's
    switch is `"shared": true` (the operator's DPU bridge: OneSwitch leaves what is not its own there as it is),
    and so is every switch in `shared` (an external host bridge UNO took over). `host_ports`: the host
    switch's actual port numbers of VMs and PCIe links.
    """
    snics = range(len(cfg.snics))
    shared = {c.id for c in cfg.snics if c.backend == "bluefield"} | set(shared)
    limits = {c.id: c.max_rules for c in cfg.snics if c.max_rules is not None}
    host_ports = host_ports or HostPorts({}, {})
    layouts = (
        {k: layouts.get(k) or _default_layout(cfg, k) for k in snics}
        if layouts
        else {k: _default_layout(cfg, k) for k in snics}
    )
    names = cfg.oneswitch.port_names  # neutral: a controller is not told where a port is
    ports = [
        {
            "vport": nm.vport_vm(i),
            "switch": "host",
            "port": host_ports.vms.get(i, nm.HOST_VM_OFPORT_BASE + i),
            "name": names.vm_name(i),
        }
        for i in range(len(cfg.vm_specs))
    ]
    n = 0
    for k in snics:
        for j, port in enumerate(layouts[k].wire):
            ports.append(
                {"vport": nm.vport_eth(k, j), "switch": f"snic{k}", "port": port, "name": names.wire_name(n)}
            )
            n += 1
    return {
        "dpid": nm.dpid(cfg.name),
        "listen": f"ptcp:{listen}:127.0.0.1",
        "controllers": list(cfg.oneswitch.controllers),
        "rest": f"127.0.0.1:{rest}",
        "token": cfg.oneswitch.token,
        "state_dir": str(state_dir),
        # A BlueField's bridge is the operator's: OneSwitch changes only what it owns there ("shared",
        # oneswitch/README.md). Left out for the emulated ones (UNO's own), so an older jar still reads it.
        # An sNIC's max_rules: the rules its switch holds for offloaded tables (OneSwitch refuses a table move
        # beyond it). Left out when unset, like "shared".
        "switches": [
            {"id": sid, "openflow": target, **({"shared": True} if sid in shared else {})}
            | ({"max_rules": limits[sid]} if sid in limits else {})
            for sid, target in switches.items()
        ],
        "pcie": [
            {
                "snic": f"snic{k}",
                "host_port": host_ports.pcie.get(k, nm.HOST_PCIE_OFPORT_BASE + k),
                "snic_port": layouts[k].pcie,
            }
            for k in snics
        ],
        "ports": sorted(ports, key=lambda p: p["vport"]),
        "wire_vlans": cfg.oneswitch.wire_vlans,
        "carrier": cfg.oneswitch.carrier,
    }


def _default_layout(cfg: HostConfig, k: int) -> SnicLayout:
    eth = range(cfg.snics[k].eth_ports)
    return SnicLayout(nm.SNIC_PCIE_OFPORT, tuple(nm.SNIC_ETH_OFPORT_BASE + j for j in eth))


def discover_layout(ports: list[dict], where: str) -> SnicLayout:
    """An sNIC's layout from its agent's port listing (`GET /v1/ports`: kinds pcie and wire)."""
    pcie = [p["ofport"] for p in ports if p["kind"] == "pcie"]
    wire = tuple(p["ofport"] for p in sorted(ports, key=lambda p: p["name"]) if p["kind"] == "wire")
    if len(pcie) != 1 or not wire:
        raise DatapathError(f"{where}: its agent reports {len(pcie)} host-facing port(s) and {len(wire)} "
                            "uplink(s): expected one and at least one (set pcie_port / wire_ports there)")  # fmt: skip
    return SnicLayout(pcie[0], wire)


@dataclass
class OneSwitch:
    """The OneSwitch process of one emulated host (files in `rundir`, i.e. RUNDIR/NAME/oneswitch/)."""

    cfg: HostConfig
    rundir: Path
    endpoints: (
        object  # callable () -> {switch id: unix:/tcp: target}, evaluated at up() (switches are up by then)
    )
    layouts: object = None  # callable () -> {k: SnicLayout} of the sNICs whose ports are discovered
    host_ports: object = None  # callable () -> HostPorts (the host switch's actual port numbers)
    shared: object = None  # callable () -> ids of switches that are an operator's ("shared": true)
    key: str = "oneswitch"

    @property
    def config_file(self) -> Path:
        return self.rundir / "config.json"

    @property
    def pidfile(self) -> Path:
        return self.rundir / "oneswitch.pid"

    @property
    def supervisor_pidfile(self) -> Path:
        return self.rundir / "oneswitch-supervisor.pid"

    @property
    def logfile(self) -> Path:
        return self.rundir / "oneswitch.log"

    @property
    def state_dir(self) -> Path:
        return self.rundir / "state"

    def _config(self) -> dict | None:
        try:
            return json.loads(self.config_file.read_text())
        except (OSError, ValueError):
            return None

    def pid(self) -> int | None:
        return read_pidfile(self.pidfile)

    def rest_url(self) -> str | None:
        c = self._config()
        return f"http://{c['rest']}" if c else None

    def client(self, timeout: float = 10.0) -> OneSwitchClient:
        url = self.rest_url()
        if not url:
            raise DatapathError("OneSwitch is not configured on this host")
        return OneSwitchClient(url, token=self.cfg.oneswitch.token, timeout=timeout)

    def up(self) -> None:
        if self.pid() or read_pidfile(self.supervisor_pidfile):
            return  # running, or its supervisor is starting it again
        reason = jar_missing_reason()
        if reason:
            raise DatapathError(f"{reason}; or set `oneswitch: {{enabled: false}}` in the config")

        self.rundir.mkdir(parents=True, exist_ok=True)
        self.state_dir.mkdir(exist_ok=True)
        switches = self.endpoints()  # type: ignore[operator]
        listen, rest = self._previous_ports() or free_ports(2)
        layouts = self.layouts() if self.layouts else None  # type: ignore[operator]
        host_ports = self.host_ports() if self.host_ports else None  # type: ignore[operator]
        shared = self.shared() if self.shared else set()  # type: ignore[operator]
        conf = build_config(self.cfg, switches, listen, rest, self.state_dir, layouts, host_ports, shared)
        self.config_file.touch(mode=0o600)  # it holds the REST token
        self.config_file.write_text(json.dumps(conf, indent=2))
        java = ["java", *JVM_OPTS, *select_hash_opts(self.cfg.oneswitch.select_hash), "-jar", str(JAR),
                "--config", str(self.config_file)]  # fmt: skip
        if self.cfg.oneswitch.supervise:
            # The supervisor starts it again within a second if it dies, and writes its pid to the pidfile.
            cmd = [
                sys.executable,
                "-m",
                "emulated_host.supervise",
                "--pidfile",
                str(self.pidfile),
                "--",
                *java,
            ]
        else:
            cmd = java
        with open(self.logfile, "ab") as log:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                cwd=self.rundir,  # the host's sweep finds it by cwd/command line after a crash
                start_new_session=True,  # Ctrl-C of `uno run` must not kill it before our own teardown
                env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
            )
        if self.cfg.oneswitch.supervise:
            self.supervisor_pidfile.write_text(str(proc.pid))
        else:
            self.pidfile.write_text(str(proc.pid))
        client = self.client(timeout=2.0)
        missing: list[str] = []

        def healthy() -> bool:
            if proc.poll() is not None:
                raise DatapathError(f"OneSwitch exited with {proc.returncode} at start: {self._log_tail()}")
            try:
                health = client.health()
            except OneSwitchError:
                return False
            missing[:] = [
                f"{sid} ({switches.get(sid)})" for sid, st in health.switches.items() if st != "connected"
            ]
            return health.all_connected()

        try:
            wait_for(healthy, START_TIMEOUT, "OneSwitch to connect every switch", interval=0.25)
        except DatapathError as exc:
            unreached = f" (not connected: {', '.join(missing)})" if missing else ""
            raise DatapathError(f"{exc}{unreached}; log {self.logfile}: {self._log_tail()}") from None

    def _previous_ports(self) -> tuple[int, int] | None:
        """(listen, rest) ports of this host's earlier OneSwitch (a restart after a crash keeps them, so
        controllers and the agent find it where it was), or None on a first start."""
        c = self._config()
        try:
            listen = int(c["listen"].split(":")[1])  # type: ignore[index]
            rest = int(c["rest"].rsplit(":", 1)[1])  # type: ignore[index]
        except (TypeError, KeyError, IndexError, ValueError, AttributeError):
            return None
        return (listen, rest) if listen > 0 and rest > 0 else None

    def _log_tail(self, lines: int = 3) -> str:
        """The log's first error line (a Java stack trace starts with it) and its last lines."""
        try:
            text = self.logfile.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        first = next((ln for ln in text if "Exception" in ln or "ERROR" in ln or "error" in ln), None)
        tail = text[-lines:]
        return " | ".join(([first] if first and first not in tail else []) + tail)

    def down(self) -> None:
        sup = read_pidfile(self.supervisor_pidfile)
        if sup:  # first, so that it does not start OneSwitch again; it stops OneSwitch itself
            kill_and_wait(sup, timeout=20.0)
        pid = self.pid()
        if pid:
            kill_and_wait(pid, timeout=15.0)
        self.pidfile.unlink(missing_ok=True)
        self.supervisor_pidfile.unlink(missing_ok=True)

    def running(self) -> bool:
        pid = self.pid()
        return bool(pid and pid_alive(pid))

    def status(self) -> dict:
        c = self._config() or {}
        listen = c.get("listen", "")
        port = listen.split(":")[1] if listen.startswith("ptcp:") else None
        out = {
            "listen": f"tcp:127.0.0.1:{port}" if port else None,
            "rest": self.rest_url(),
            "dpid": c.get("dpid"),
            "pid": self.pid(),
            "supervisor_pid": read_pidfile(self.supervisor_pidfile),
            "running": self.running(),
            "log": str(self.logfile),
            "wire_vlans": c.get("wire_vlans", 1),
            "carrier": c.get("carrier", "auto"),
            "ports": c.get("ports", []),
        }
        if out["running"]:
            try:
                cl = self.client(timeout=5.0)
                out["ports"] = [
                    {
                        "vport": p.vport,
                        "switch": p.switch,
                        "port": p.port,
                        "name": p.name,
                        # a scaled-out port: every instance (switch/port above are the first)
                        **({"instances": [list(i) for i in p.instances]} if len(p.instances) > 1 else {}),
                    }
                    for p in cl.ports()
                ]
                out["switches"] = cl.health().switches
            except OneSwitchError as exc:
                out["error"] = str(exc)
        return out


def l2_flows(status: dict) -> list[str]:
    """Static L2 forwarding over OneSwitch's virtual ports for `uno run` (pure; ovs-ofctl flow syntax).

    Unicast to each known endpoint's MAC goes to its vport; broadcast is copied to every other endpoint with
    explicit outputs (no NORMAL: a virtual switch has no learning bridge to hand packets to).
    """
    endpoints = [(nm.vport_vm(i), vm["mac"]) for i, vm in enumerate(status.get("vms", [])) if vm.get("mac")]
    for k, sn in enumerate(status.get("snics", [])):
        endpoints += [(nm.vport_eth(k, j), eth["mac"]) for j, eth in enumerate(sn.get("eth_ports", []))]
    flows = [f"table=0,priority=10,dl_dst={mac},actions=output:{v}" for v, mac in endpoints]
    for v, _ in endpoints:
        outs = ",".join(f"output:{w}" for w, _ in endpoints if w != v)
        if outs:
            flows.append(f"table=0,priority=20,in_port={v},dl_dst=ff:ff:ff:ff:ff:ff,actions={outs}")
    return flows


def install_flows(listen: str, flows: list[str]) -> None:
    """`ovs-ofctl -O OpenFlow13 add-flows` through OneSwitch's listener (`tcp:127.0.0.1:PORT`)."""
    from host_datapath.sysutil import run

    run(
        ["ovs-ofctl", "-O", "OpenFlow13", "--no-names", "add-flows", listen, "-"],
        input_text="\n".join(flows) + "\n",
    )
