"""The sNIC agent's configuration: one JSON file on the sNIC, every key checked (an error names the key)."""

from __future__ import annotations

import ipaddress
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domain.errors import CliError
from nf_local.processes import NF_BINARY

LOCATION_RE = re.compile(r"^snic[0-9]{1,2}$")
PREFIX_RE = re.compile(r"^[a-z][a-z0-9-]{0,9}$")  # + "-i12345" stays within an interface name's 15
TOKEN_RE = re.compile(r"^[A-Za-z0-9._~+/=-]{8,256}$")
OVSDB_RE = re.compile(r"^unix:/\S+$")
KEYS = {
    "snic": "this sNIC's location id, snicK",
    "listen": "ADDR:PORT on the management network (never 0.0.0.0)",
    "token_file": "file holding the bearer token (8-256 characters [A-Za-z0-9._~+/=-])",
    "dir": "the agent's own directory: instances, their configs and logs, its state",
    "prefix": "prefix of every namespace and interface it makes",
    "bridge": "its OVS bridge",
    "ovsdb": "its OVS's OVSDB on this machine, unix:PATH (its bridge's local OpenFlow socket is beside it)",
    "switch_netns": "the named network namespace its bridge's ports live in",
    "nf_binary": "the nf binary (default: the checkout's)",
    "cgroup": "CPU cgroup the NFs run in (null: none)",
    "cpu_quota": "cores of CPU the NFs get together (with cgroup)",
    "cpu_period_us": "the quota's period, us",
    "warm_slots": "pre-plugged NF slots kept free (0-8)",
    "pcie_port": "the bridge port facing the host (PCIe link or host representor); default: discovered",
    "wire_ports": "the bridge ports to the wire (uplinks); default: discovered",
}


@dataclass(frozen=True)
class SnicAgentConfig:
    snic: str
    listen: tuple[str, int]
    token: str
    directory: Path
    prefix: str
    bridge: str
    ovsdb: str
    switch_netns: str
    nf_binary: Path = NF_BINARY
    cgroup: str | None = None
    cpu_quota: float | None = None
    cpu_period_us: int | None = None
    warm_slots: int = 0
    pcie_port: str | None = None
    wire_ports: tuple[str, ...] | None = None


def _str(key: str, v: Any, pattern: re.Pattern | None = None) -> str:
    if not isinstance(v, str) or not v or (pattern is not None and not pattern.fullmatch(v)):
        raise CliError(f"config: {key}: expected {KEYS[key]}, got {v!r}")
    return v


def _listen(v: Any) -> tuple[str, int]:
    addr, _, port = _str("listen", v).rpartition(":")
    try:
        ip = ipaddress.ip_address(addr.strip("[]"))
        if not (port.isascii() and port.isdigit()):
            raise ValueError(port)
        p = int(port)
    except ValueError:
        raise CliError(f"config: listen: expected ADDR:PORT, got {v!r}") from None
    if ip.is_unspecified or not 0 < p < 65536:
        raise CliError(f"config: listen: {KEYS['listen']}, got {v!r}")
    return str(ip), p


def parse_value(key: str, value: Any) -> Any:
    """One key's value, checked as in a config (`snic` or `listen`)."""
    return {"snic": lambda v: _str("snic", v, LOCATION_RE), "listen": _listen}[key](value)


def read_token(path: Path) -> str:
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise CliError(f"config: token_file: cannot read {path}: {exc.strerror}") from None
    if not TOKEN_RE.fullmatch(token):
        raise CliError(f"config: token_file: {path} does not hold {KEYS['token_file']}")
    return token


def parse_config(data: Any) -> SnicAgentConfig:
    if not isinstance(data, dict):
        raise CliError("config: expected a JSON object")
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise CliError(f"config: {unknown[0]}: unknown key (known: {', '.join(sorted(KEYS))})")
    for key in ("snic", "listen", "token_file", "dir", "prefix", "bridge", "ovsdb", "switch_netns"):
        if key not in data:
            raise CliError(f"config: {key}: missing ({KEYS[key]})")
    quota = data.get("cpu_quota")
    if quota is not None and (
        isinstance(quota, bool)
        or not isinstance(quota, int | float)
        or not math.isfinite(quota)
        or quota <= 0
    ):
        raise CliError(f"config: cpu_quota: expected a positive number of cores, got {quota!r}")
    period = data.get("cpu_period_us")
    if period is not None and (
        isinstance(period, bool) or not isinstance(period, int) or not 1000 <= period <= 1_000_000
    ):
        raise CliError(f"config: cpu_period_us: expected an integer in [1000, 1000000], got {period!r}")
    slots = data.get("warm_slots", 0)
    if isinstance(slots, bool) or not isinstance(slots, int) or not 0 <= slots <= 8:
        raise CliError(f"config: warm_slots: expected an integer 0-8, got {slots!r}")
    wire = data.get("wire_ports")
    if wire is not None and (not isinstance(wire, list) or not all(isinstance(w, str) and w for w in wire)):
        raise CliError(f"config: wire_ports: expected a list of port names, got {wire!r}")
    cgroup = data.get("cgroup")
    return SnicAgentConfig(
        snic=_str("snic", data["snic"], LOCATION_RE),
        listen=_listen(data["listen"]),
        token=read_token(Path(_str("token_file", data["token_file"]))),
        directory=Path(_str("dir", data["dir"])),
        prefix=_str("prefix", data["prefix"], PREFIX_RE),
        bridge=_str("bridge", data["bridge"]),
        ovsdb=_str("ovsdb", data["ovsdb"], OVSDB_RE),
        switch_netns=_str("switch_netns", data["switch_netns"]),
        nf_binary=Path(_str("nf_binary", data["nf_binary"])) if "nf_binary" in data else NF_BINARY,
        cgroup=_str("cgroup", cgroup) if cgroup is not None else None,
        cpu_quota=float(quota) if quota is not None else None,
        cpu_period_us=period,
        warm_slots=slots,
        pcie_port=_str("pcie_port", data["pcie_port"]) if data.get("pcie_port") is not None else None,
        wire_ports=tuple(wire) if wire is not None else None,
    )


def load_config(path: str | Path) -> SnicAgentConfig:
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise CliError(f"config: cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise CliError(f"config: {path} is not JSON: {exc}") from None
    return parse_config(data)
