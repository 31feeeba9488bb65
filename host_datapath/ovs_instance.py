"""A private Open vSwitch instance: its own ovsdb-server and userspace (netdev) ovs-vswitchd.

ovsdb-server runs in the root namespace (its unix socket is reachable from anywhere); ovs-vswitchd runs in the
switch's own network namespace, because two netdev vswitchds in one namespace fight over the `ovs-netdev` tap
device (docs/emulated-host.md). Everything lives in one rundir, which OVS also accepts for controller sockets.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from host_datapath.sysutil import DatapathError, kill_and_wait, read_pidfile, run, set_root_sysctls, wait_for

SCHEMA = Path("/usr/share/openvswitch/vswitch.ovsschema")


@dataclass
class OvsInstance:
    """Start/stop one private OVS. `rundir` must be private to this instance.

    `vswitchd`: the ovs-vswitchd binary (the DPDK build is another file, host_datapath/ovs_dpdk.py);
    `other_config`: Open_vSwitch other_config keys written before vswitchd starts (DPDK reads its settings only
    then); `start_timeout`: seconds to wait for vswitchd's pidfile."""

    rundir: Path
    netns: str
    vswitchd: str = "ovs-vswitchd"
    other_config: dict[str, str] = field(default_factory=dict)
    start_timeout: float = 10.0

    @property
    def db_sock(self) -> Path:
        return self.rundir / "db.sock"

    @property
    def db_remote(self) -> str:
        return f"unix:{self.db_sock}"

    def _pidfile(self, daemon: str) -> Path:
        return self.rundir / f"{daemon}.pid"

    def pids(self) -> dict[str, int | None]:
        return {d: read_pidfile(self._pidfile(d)) for d in ("ovsdb-server", "ovs-vswitchd")}

    def running(self) -> bool:
        return all(self.pids().values())

    def start(self, ovsdb_tcp_port: int | None = None) -> None:
        """Start both daemons (idempotent: a running daemon is left alone).

        `ovsdb_tcp_port`: also serve OVSDB on tcp 127.0.0.1:PORT in the root namespace, as a DPU's OVSDB is
        reached over TCP (the bluefield backend and its tests use this).
        """
        if not SCHEMA.exists():
            raise DatapathError(f"Open vSwitch schema not found at {SCHEMA} (run `make setup`)")
        self.rundir.mkdir(parents=True, exist_ok=True)
        env = dict(
            os.environ, OVS_RUNDIR=str(self.rundir), OVS_DBDIR=str(self.rundir), OVS_LOGDIR=str(self.rundir)
        )
        db = self.rundir / "conf.db"
        if not db.exists():
            run(["ovsdb-tool", "create", str(db), str(SCHEMA)])
        if not read_pidfile(self._pidfile("ovsdb-server")):
            remotes = [f"--remote=punix:{self.db_sock}"]
            if ovsdb_tcp_port:
                remotes.append(f"--remote=ptcp:{ovsdb_tcp_port}:127.0.0.1")
            _daemon(
                ["ovsdb-server", str(db), *remotes, f"--pidfile={self._pidfile('ovsdb-server')}",
                 f"--unixctl={self.rundir / 'ovsdb-server.ctl'}",
                 f"--log-file={self.rundir / 'ovsdb-server.log'}", "--detach"],
                env,
            )  # fmt: skip
            wait_for(self.db_sock.exists, 10, f"ovsdb-server socket {self.db_sock}")
            # vlan-limit 0: parse every VLAN header (OVS parses 2), so a frame that already carries the
            # controller's VLAN keeps it under OneSwitch's flow-id tag (QinQ) and pop_vlan removes only ours.
            run(["ovs-vsctl", f"--db={self.db_remote}", "--no-wait", "init", "--",
                 "set", "Open_vSwitch", ".", "other_config:vlan-limit=0"])  # fmt: skip
        if not read_pidfile(self._pidfile("ovs-vswitchd")):
            set_root_sysctls()
            if self.other_config:
                run(["ovs-vsctl", f"--db={self.db_remote}", "--no-wait", "set", "Open_vSwitch", ".",
                     *(f"other_config:{k}={_quoted(v)}" for k, v in self.other_config.items())])  # fmt: skip
            _daemon(
                ["ip", "netns", "exec", self.netns, self.vswitchd, self.db_remote,
                 f"--pidfile={self._pidfile('ovs-vswitchd')}", f"--unixctl={self.rundir / 'ovs-vswitchd.ctl'}",
                 f"--log-file={self.rundir / 'ovs-vswitchd.log'}", "--detach"],
                env,
            )  # fmt: skip
            wait_for(
                lambda: read_pidfile(self._pidfile("ovs-vswitchd")),
                self.start_timeout,
                "ovs-vswitchd to start",
            )

    def stop(self) -> None:
        for daemon in ("ovs-vswitchd", "ovsdb-server"):
            pid = read_pidfile(self._pidfile(daemon))
            if pid:
                kill_and_wait(pid)

    def appctl(self, *args: str) -> str:
        return run(["ovs-appctl", "-t", str(self.rundir / "ovs-vswitchd.ctl"), *args])


def _quoted(value: str) -> str:
    """An OVSDB string atom for ovs-vsctl (double-quoted: spaces, commas and '=' stay part of the value)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _daemon(cmd: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise DatapathError(f"`{' '.join(cmd)}` failed: {proc.stderr.strip()}")
