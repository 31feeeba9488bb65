"""A root-namespace TCP OpenFlow endpoint for a bridge whose ovs-vswitchd runs in its own namespace.

127.0.0.1 is per namespace, so a controller in the root namespace (OneSwitch) cannot reach a `ptcp:` listener
inside the switch's namespace. Instead the bridge gets a passive *controller* listener `punix:` inside the
vswitchd's rundir (OVS accepts unix sockets only there), and a socat relay in the root namespace forwards
`tcp:127.0.0.1:PORT` to it. Connections through it are primary controller connections (they receive
packet-ins and port-status), unlike the `BRIDGE.mgmt` service socket. Being passive, the listener does not
trigger OVS's "first/last active controller flushes all flows", so it is set once at bring-up, before any flow.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from host_datapath.sysutil import (
    DatapathError,
    free_port,
    kill_and_wait,
    read_pidfile,
    session_listens,
    wait_for,
)


@dataclass
class OpenFlowTcpEndpoint:
    """`tcp:127.0.0.1:PORT` in the root namespace, relayed to `punix:RUNDIR/BRIDGE.ctl` of the bridge."""

    rundir: Path
    bridge: str

    @property
    def unix_socket(self) -> Path:
        return self.rundir / f"{self.bridge}.ctl"

    @property
    def controller_target(self) -> str:
        """The Controller row to keep on the bridge (a passive listener, not an active controller)."""
        return f"punix:{self.unix_socket}"

    @property
    def _pidfile(self) -> Path:
        return self.rundir / "of-relay.pid"

    @property
    def _portfile(self) -> Path:
        return self.rundir / "of-relay.port"

    def port(self) -> int | None:
        try:
            return int(self._portfile.read_text())
        except (OSError, ValueError):
            return None

    def target(self) -> str | None:
        """`tcp:127.0.0.1:PORT` while the relay runs, else None."""
        port = self.port()
        return f"tcp:127.0.0.1:{port}" if port and read_pidfile(self._pidfile) else None

    def pid(self) -> int | None:
        return read_pidfile(self._pidfile)

    def start(self) -> str:
        """Start the relay once the bridge's listener socket exists (idempotent); return the TCP target."""
        if self.target():
            return self.target()  # type: ignore[return-value]
        wait_for(self.unix_socket.exists, 10, f"OpenFlow listener {self.unix_socket}")
        # The port is free when chosen and bound by socat later: another process may take it in between (socat
        # then exits, address in use), and a bare connect to it could be answered by that process. So the relay
        # counts as started only once socat itself listens there; one that exited starts again on a new port.
        for attempt in range(1, 4):
            port = free_port()
            proc = subprocess.Popen(
                # nodelay: OpenFlow is small request/reply messages; with Nagle a barrier reply waited up to ~40 ms
                # for a delayed ACK (measured: a 1-rule remap 45 ms -> 3 ms).
                [
                    "socat",
                    f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,nodelay",
                    f"UNIX-CONNECT:{self.unix_socket}",
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # not killed by the terminal's Ctrl-C before our own teardown runs
            )
            self._pidfile.write_text(str(proc.pid))
            self._portfile.write_text(str(port))
            try:
                wait_for(
                    lambda p=proc, n=port: p.poll() is not None or session_listens(p.pid, n),
                    10,
                    f"OpenFlow relay on port {port}",
                )
            except DatapathError:
                self.stop()
                raise
            if proc.poll() is None:
                break
            self.stop()
            if attempt == 3:
                raise DatapathError(
                    f"OpenFlow relay: socat exited at start on 3 ports in turn (the last {port})"
                )
        return f"tcp:127.0.0.1:{port}"

    def stop(self) -> None:
        _stop_group(self._pidfile)
        self._portfile.unlink(missing_ok=True)


@dataclass
class ControllerRelay:
    """The other direction: the switch connects actively to a controller listening in the root namespace.

    vswitchd (in its namespace) connects to `unix:RUNDIR/ctl-PORT.sock`; a socat in the root namespace
    forwards each connection to `tcp:HOST:PORT` there. Target for `SwitchDriver.set_controller`.
    """

    rundir: Path
    host: str
    port: int

    @property
    def unix_socket(self) -> Path:
        return self.rundir / f"ctl-{self.port}.sock"

    @property
    def switch_target(self) -> str:
        return f"unix:{self.unix_socket}"

    @property
    def _pidfile(self) -> Path:
        return self.rundir / f"ctl-{self.port}.pid"

    def start(self) -> str:
        """Start the relay (idempotent); return the target to give the bridge."""
        if not read_pidfile(self._pidfile):
            self.unix_socket.unlink(missing_ok=True)
            proc = subprocess.Popen(
                ["socat", f"UNIX-LISTEN:{self.unix_socket},fork", f"TCP:{self.host}:{self.port},nodelay"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            self._pidfile.write_text(str(proc.pid))
            try:
                wait_for(
                    lambda: proc.poll() is None and self.unix_socket.exists(), 10, f"relay {self.unix_socket}"
                )
            except DatapathError:
                self.stop()
                raise
        return self.switch_target

    def stop(self) -> None:
        _stop_group(self._pidfile)
        self.unix_socket.unlink(missing_ok=True)


def _stop_group(pidfile: Path) -> None:
    pid = read_pidfile(pidfile)
    if pid:
        # socat forks one child per connection, all in the relay's own session: end them together.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
        kill_and_wait(pid)
    pidfile.unlink(missing_ok=True)


def parse_tcp_target(target: str) -> tuple[str, int]:
    """`tcp:HOST:PORT` -> (HOST, PORT); anything else is a DatapathError naming the target."""
    kind, _, rest = target.partition(":")
    host, _, port = rest.rpartition(":")
    if kind != "tcp" or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise DatapathError(f"controller target {target!r}: expected tcp:HOST:PORT")
    return host, int(port)
