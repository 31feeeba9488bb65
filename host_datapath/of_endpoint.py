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
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

from host_datapath.sysutil import DatapathError, kill_and_wait, read_pidfile, wait_for


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tcp_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


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
        port = free_port()
        proc = subprocess.Popen(
            ["socat", f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork", f"UNIX-CONNECT:{self.unix_socket}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # not killed by the terminal's Ctrl-C before our own teardown runs
        )
        self._pidfile.write_text(str(proc.pid))
        self._portfile.write_text(str(port))
        try:
            wait_for(lambda: proc.poll() is None and tcp_open(port), 10, f"OpenFlow relay on port {port}")
        except DatapathError:
            self.stop()
            raise
        return f"tcp:127.0.0.1:{port}"

    def stop(self) -> None:
        pid = read_pidfile(self._pidfile)
        if pid:
            # socat forks one child per connection, all in the relay's own session: end them together.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)
            kill_and_wait(pid)
        self._pidfile.unlink(missing_ok=True)
        self._portfile.unlink(missing_ok=True)
