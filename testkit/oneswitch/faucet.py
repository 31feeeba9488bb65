"""Run Faucet (a production OpenFlow 1.3 multi-table controller) on a loopback port, for one datapath whose
listed ports are all in one VLAN; stopped (process group) by `stop()`."""

from __future__ import annotations

from pathlib import Path

from host_datapath.of_endpoint import free_port

from .controller_proc import VENV_BIN, ControllerProcess


def faucet_yaml(dp_id: int, ports: list[int], vid: int = 100) -> str:
    lines = ["vlans:", "  uno:", f"    vid: {vid}", "dps:", "  unohost:", f"    dp_id: {dp_id:#x}",
             '    hardware: "Open vSwitch"', "    interfaces:"]  # fmt: skip
    for p in ports:
        lines += [f"      {p}:", f"        name: p{p}", "        native_vlan: uno"]
    return "\n".join(lines) + "\n"


class Faucet(ControllerProcess):
    """Faucet with one VLAN over `ports` of datapath `dp_id`."""

    def __init__(self, workdir: Path, dp_id: int, ports: list[int]):
        super().__init__(workdir)
        self.dp_id, self.ports = dp_id, ports

    @property
    def log(self) -> Path:
        return self.workdir / "faucet.log"

    def prepare(self) -> None:
        (self.workdir / "faucet.yaml").write_text(faucet_yaml(self.dp_id, self.ports))

    def argv(self) -> list[str]:
        return [
            str(VENV_BIN / "faucet"),
            "--ryu-ofp-listen-host=127.0.0.1",
            f"--ryu-ofp-tcp-listen-port={self.port}",
        ]

    def env(self) -> dict[str, str]:
        return {
            "FAUCET_CONFIG": str(self.workdir / "faucet.yaml"),
            "FAUCET_LOG": str(self.log),
            "FAUCET_EXCEPTION_LOG": str(self.workdir / "faucet-exception.log"),
            "FAUCET_PROMETHEUS_ADDR": "127.0.0.1",
            "FAUCET_PROMETHEUS_PORT": str(free_port()),
        }

    def logs(self) -> list[Path]:
        return [self.log, self.workdir / "controller.out", self.workdir / "faucet-exception.log"]
