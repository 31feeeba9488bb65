"""An operator's Open vSwitch for tests of the external host switch: started as the Debian service's ovs-ctl
starts it (ovsdb-server on RUNDIR/db.sock with the manager_options remote, `init`, the system ids and
`external_ids:rundir`, then ovs-vswitchd on that socket, its pidfile and the bridges' management sockets in
RUNDIR), in the root namespace, in a run directory of its own; and a foreign bridge with ports, flows and a
group, whose every byte a test compares before and after UNO came and went.

(ovs-ctl itself is not used: it loads the openvswitch kernel module first, which this machine lacks, and its
`--monitor` parent would restart a daemon the teardown kills.)

Two netdev ovs-vswitchd in one namespace fight over the `ovs-netdev` tap device (ENVIRONMENT.md), so one
operator OVS at a time runs on the machine: `operator_ovs` holds a machine-wide lock (other worktrees' test
runs wait for it)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from host_datapath.sysutil import kill_and_wait, read_pidfile, run, set_root_sysctls, wait_for

SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
LOCK = Path("/run/uno-test-ovs.lock")  # one root-namespace vswitchd at a time, machine-wide
# The foreign bridge's settings and rows a test compares (columns that do not move by themselves: no
# statistics, status or link state).
BRIDGE_COLS = (
    "_uuid,name,ports,controller,protocols,fail_mode,other_config,external_ids,datapath_type,mirrors"
)
PORT_COLS = "_uuid,name,interfaces,external_ids,qos,tag,trunks,other_config,vlan_mode"
IFACE_COLS = "_uuid,name,type,options,ofport,ofport_request,external_ids,mtu_request"
OVS_COLS = "_uuid,bridges,other_config,external_ids,manager_options,ssl"


@dataclass
class OperatorOvs:
    """The operator's OVS: its run directory (db.sock, pidfiles, BRIDGE.mgmt) and its OVSDB remote."""

    rundir: Path
    links: list[str] = field(default_factory=list)  # root-namespace links it made (removed at stop)

    @property
    def db(self) -> str:
        return f"unix:{self.rundir}/db.sock"

    def vsctl(self, *args: str) -> str:
        return run(["ovs-vsctl", f"--db={self.db}", "--timeout=10", *args])

    def ofctl(self, cmd: str, bridge: str, *args: str) -> str:
        return run(["ovs-ofctl", "-O", "OpenFlow13", cmd, f"unix:{self.rundir}/{bridge}.mgmt", *args])

    def start(self) -> None:
        self.rundir.mkdir(parents=True)
        d = self.rundir
        run(["ovsdb-tool", "create", str(d / "conf.db"), SCHEMA])
        run(["ovsdb-server", str(d / "conf.db"), f"--remote=punix:{d}/db.sock",
             "--remote=db:Open_vSwitch,Open_vSwitch,manager_options", f"--pidfile={d}/ovsdb-server.pid",
             f"--unixctl={d}/ovsdb-server.ctl", f"--log-file={d}/ovsdb-server.log", "--detach"])  # fmt: skip
        version = run(["ovs-vswitchd", "--version"]).split()[-1]
        self.vsctl("--no-wait", "--", "init", "--", "set", "Open_vSwitch", ".", f"ovs-version={version}",
                   "external-ids:system-id=operator-test", f'external-ids:rundir="{d}"',
                   "external-ids:hostname=operator")  # fmt: skip
        set_root_sysctls()
        env = {**os.environ, "OVS_RUNDIR": str(d)}
        proc = subprocess.run(
            ["ovs-vswitchd", self.db, f"--pidfile={d}/ovs-vswitchd.pid", f"--unixctl={d}/ovs-vswitchd.ctl",
             f"--log-file={d}/ovs-vswitchd.log", "--detach"],
            env=env, capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        if proc.returncode != 0:
            raise RuntimeError(f"ovs-vswitchd did not start: {proc.stderr.strip()}")
        wait_for(lambda: read_pidfile(d / "ovs-vswitchd.pid"), 10, "the operator's ovs-vswitchd")

    def stop(self) -> None:
        # A netdev bridge's internal ports are tap devices that outlive a killed vswitchd: delete the bridges
        # first (vswitchd removes their taps), then whatever tap is left of them.
        taps: list[str] = []
        with contextlib.suppress(Exception):  # an OVS that never started or is gone
            for br in self.vsctl("list-br").split():
                taps += [br, *(i for i in self.vsctl("list-ifaces", br).split()
                               if self.vsctl("get", "Interface", i, "type").strip() == "internal")]  # fmt: skip
                self.vsctl("--if-exists", "del-br", br)
        for daemon in ("ovs-vswitchd", "ovsdb-server"):
            pid = read_pidfile(self.rundir / f"{daemon}.pid")
            if pid:
                kill_and_wait(pid)
        for link in [*self.links, *taps]:
            if Path(f"/sys/class/net/{link}").exists():
                run(["ip", "link", "del", link], check=False)
        shutil.rmtree(self.rundir, ignore_errors=True)
        with contextlib.suppress(OSError):  # the run directories' root, once no operator OVS has one there
            self.rundir.parent.rmdir()

    # -- the foreign bridge -------------------------------------------------------------------------------
    def add_foreign_bridge(self, bridge: str, veth: tuple[str, str]) -> None:
        """A bridge of the operator's: an internal port, one end of a veth pair (root namespace), flows under
        several cookies (0 included), a group, a controller-less fail_mode and external_ids of its own."""
        a, b = veth
        run(["ip", "link", "add", a, "type", "veth", "peer", "name", b])
        self.links.append(a)
        run(["ip", "link", "set", a, "up"])
        self.vsctl("add-br", bridge, "--", "set", "Bridge", bridge, "datapath_type=netdev",
                   "protocols=OpenFlow10,OpenFlow13", "fail_mode=standalone",
                   "external_ids:owner=operator", "other_config:disable-in-band=true")  # fmt: skip
        self.vsctl("add-port", bridge, a, "--", "set", "Interface", a, "ofport_request=7")
        self.vsctl(
            "add-port", bridge, f"{bridge}-i", "--", "set", "Interface", f"{bridge}-i", "type=internal"
        )
        wait_for(lambda: (self.rundir / f"{bridge}.mgmt").exists(), 10, f"{bridge}'s management socket")
        self.ofctl("add-group", bridge, "group_id=5,type=all,bucket=output:7")
        flows = [
            "priority=0,actions=NORMAL",
            "cookie=0x0,table=0,priority=100,in_port=7,dl_type=0x0800,nw_dst=10.99.0.1,actions=drop",
            "cookie=0x1234,table=0,priority=200,arp,actions=group:5",
            "cookie=0x55ab,table=1,priority=10,ip,nw_src=10.99.0.0/24,actions=output:7",
            "cookie=0x7700000000000001,table=2,priority=5,actions=drop",
        ]
        for f in flows:
            self.ofctl("add-flow", bridge, f)

    def del_foreign_bridge(self, bridge: str, veth_end: str) -> None:
        self.vsctl("--if-exists", "del-br", bridge)
        run(["ip", "link", "del", veth_end], check=False)
        self.links.remove(veth_end)

    def snapshot(self, bridge: str) -> dict[str, str]:
        """The foreign bridge as the operator sees it: flows (no statistics), groups, and its OVSDB rows."""
        ports = self.vsctl("list-ports", bridge).split()
        return {
            "flows": self.ofctl("dump-flows", bridge, "--no-stats"),
            "groups": self.ofctl("dump-groups", bridge),
            "bridge": self.vsctl(f"--columns={BRIDGE_COLS}", "list", "Bridge", bridge),
            "ports": "".join(self.vsctl(f"--columns={PORT_COLS}", "list", "Port", p) for p in sorted(ports)),
            "ifaces": "".join(
                self.vsctl(f"--columns={IFACE_COLS}", "list", "Interface", p) for p in sorted(ports)
            ),
            "open_vswitch": self.vsctl(f"--columns={OVS_COLS}", "list", "Open_vSwitch"),
            "qos": self.vsctl("list", "QoS"),
            "controllers": self.vsctl("list", "Controller"),
        }


@contextlib.contextmanager
def root_vswitchd_lock(timeout: float = 1200.0) -> Iterator[None]:
    """The machine-wide lock of the root namespace's one netdev vswitchd (waits up to `timeout` s)."""
    with open(LOCK, "a") as f:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"another test's operator OVS held {LOCK} for {timeout:g} s") from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextlib.contextmanager
def operator_ovs(rundir: Path) -> Iterator[OperatorOvs]:
    """An operator's OVS in `rundir` (must not exist), stopped and removed on exit, pass or fail."""
    ovs = OperatorOvs(rundir)
    with root_vswitchd_lock():
        try:
            ovs.start()
            yield ovs
        finally:
            ovs.stop()
