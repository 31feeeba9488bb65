"""Run an os-ken application under `osken-manager` (os-ken 3.1, installed with Faucet) on a loopback port."""

from __future__ import annotations

from pathlib import Path

from .controller_proc import VENV_BIN, ControllerProcess

APPS = Path(__file__).parent / "apps"


class OsKenApp(ControllerProcess):
    """`app`: a module path or an app file, e.g. `APPS / "simple_switch_13.py"`."""

    def __init__(self, workdir: Path, app: str | Path):
        super().__init__(workdir)
        self.app = str(app)

    def argv(self) -> list[str]:
        return [
            str(VENV_BIN / "osken-manager"),
            "--ofp-listen-host=127.0.0.1",
            f"--ofp-tcp-listen-port={self.port}",
            self.app,
        ]
