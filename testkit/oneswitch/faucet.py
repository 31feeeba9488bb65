"""Run Faucet (a production OpenFlow 1.3 multi-table controller) on a loopback port, for one datapath whose
listed ports are all in one VLAN; stopped (process group) by `stop()`."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from host_datapath.of_endpoint import free_port
from host_datapath.sysutil import wait_for

VENV_BIN = Path(sys.executable).parent  # faucet execs osken-manager: its venv's bin must be on PATH


def faucet_yaml(dp_id: int, ports: list[int], vid: int = 100) -> str:
    lines = ["vlans:", "  uno:", f"    vid: {vid}", "dps:", "  unohost:", f"    dp_id: {dp_id:#x}",
             '    hardware: "Open vSwitch"', "    interfaces:"]  # fmt: skip
    for p in ports:
        lines += [f"      {p}:", f"        name: p{p}", "        native_vlan: uno"]
    return "\n".join(lines) + "\n"


@dataclass
class Faucet:
    workdir: Path
    dp_id: int
    ports: list[int]
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None

    @property
    def target(self) -> str:
        return f"tcp:127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.workdir / "faucet.log"

    def start(self, attempts: int = 3) -> Faucet:
        """Start Faucet; its port comes from `free_port()` and is bound later, so another process may take it in
        between: then Faucet exits (address in use) or the port answers for someone else, and it is started again on
        a fresh port (up to `attempts` times)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "faucet.yaml"
        cfg.write_text(faucet_yaml(self.dp_id, self.ports))
        for attempt in range(1, attempts + 1):
            self._launch(cfg)
            wait_for(
                lambda: self.proc.poll() is not None or self._ours_listening(), 60, f"Faucet on {self.port}"
            )
            if self.proc.poll() is None:
                return self
            if attempt < attempts:
                self.port = free_port()
        raise AssertionError(f"Faucet did not start in {attempts} attempts:\n{self.tail()}")

    def _launch(self, cfg: Path) -> None:
        env = dict(
            os.environ,
            PATH=f"{VENV_BIN}:{os.environ.get('PATH', '')}",
            FAUCET_CONFIG=str(cfg),
            FAUCET_LOG=str(self.log),
            FAUCET_EXCEPTION_LOG=str(self.workdir / "faucet-exception.log"),
            FAUCET_PROMETHEUS_ADDR="127.0.0.1",
            FAUCET_PROMETHEUS_PORT=str(free_port()),
        )
        self.proc = subprocess.Popen(
            [
                str(VENV_BIN / "faucet"),
                "--ryu-ofp-listen-host=127.0.0.1",
                f"--ryu-ofp-tcp-listen-port={self.port}",
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=open(self.workdir / "faucet.out", "wb"),  # noqa: SIM115 (the child owns it)
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def _ours_listening(self) -> bool:
        """Whether a process of Faucet's session (not some other program) listens on its OpenFlow port."""
        out = subprocess.run(["ss", "-Hltnp", f"sport = :{self.port}"], capture_output=True, text=True).stdout
        for pid in map(int, re.findall(r"pid=(\d+)", out)):
            with contextlib.suppress(OSError):
                if os.getsid(pid) == self.proc.pid:
                    return True
        return False

    def tail(self, n: int = 20) -> str:
        out = []
        for f in (self.log, self.workdir / "faucet.out", self.workdir / "faucet-exception.log"):
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
