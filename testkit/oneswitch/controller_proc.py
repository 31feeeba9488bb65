"""A controller process (Faucet, an os-ken app) listening on a loopback OpenFlow port for OneSwitch to connect
to; started in its own session and stopped (process group) by `stop()`."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from host_datapath.of_endpoint import free_port
from host_datapath.sysutil import session_listens, wait_for

VENV_BIN = Path(sys.executable).parent  # faucet execs osken-manager: its venv's bin must be on PATH


@dataclass
class ControllerProcess:
    """Subclasses give the command line (`argv`), extra environment (`env`) and their log files (`logs`)."""

    workdir: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None

    @property
    def target(self) -> str:
        return f"tcp:127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return {}

    def logs(self) -> list[Path]:
        return [self.workdir / "controller.out"]

    def prepare(self) -> None:
        """Writes what the controller reads at start (config files); called once before the first launch."""

    def start(self, attempts: int = 3) -> ControllerProcess:
        """Start it; its port comes from `free_port()` and is bound later, so another process may take it in
        between: then it exits (address in use) or the port answers for someone else, and it is started again on
        a fresh port (up to `attempts` times)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.prepare()
        for attempt in range(1, attempts + 1):
            self._launch()
            wait_for(
                lambda: self.proc.poll() is not None or self._ours_listening(),
                60,
                f"controller on {self.port}",
            )
            if self.proc.poll() is None:
                return self
            if attempt < attempts:
                self.port = free_port()
        raise AssertionError(f"{type(self).__name__} did not start in {attempts} attempts:\n{self.tail()}")

    def _launch(self) -> None:
        env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}", **self.env())
        self.proc = subprocess.Popen(
            self.argv(),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=open(self.workdir / "controller.out", "wb"),  # noqa: SIM115 (the child owns it)
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def _ours_listening(self) -> bool:
        """Whether a process of its session (not some other program) listens on its OpenFlow port."""
        return session_listens(self.proc.pid, self.port)

    def tail(self, n: int = 20) -> str:
        out = []
        for f in self.logs():
            with contextlib.suppress(OSError):
                out += [f"--- {f.name}"] + f.read_text(errors="replace").splitlines()[-n:]
        return "\n".join(out)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
