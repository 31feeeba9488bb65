"""Configuration of the emulated host: YAML, strictly validated (unknown keys and bad values are errors)."""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from domain.errors import CliError
from emulated_host.switch_config import (
    HostSwitchConfig,
    VmConfig,
    check_host_ports,
    config_error,
    parse_host_switch,
    parse_vms,
)
from host_datapath.sysutil import DatapathError
from snic_datapath.cgroup import default_period_us, quota_us

NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,5}$")
DEFAULT_CONFIG = Path(__file__).with_name("default.yaml")


# The emulation's unit mapping: placement capacity units (docs/placement.md) per host CPU core of quota. The
# default sNIC (capacity 36) gets half a core: a weaker compute domain than the host, on a 2-core machine.
UNITS_PER_CORE = 72.0
MIN_QUOTA_CORES = 0.01  # 1 ms (the kernel's minimum quota) per 100 ms; cgroup.default_period_us lengthens it


def quota_cores(capacity: float, cpu_quota: float | None) -> float:
    """CPU cores of quota for an sNIC: `cpu_quota` if given, else its capacity mapped by UNITS_PER_CORE."""
    return cpu_quota if cpu_quota is not None else max(MIN_QUOTA_CORES, capacity / UNITS_PER_CORE)


def period_us(snic: SnicConfig) -> int:
    """The CFS period of an sNIC's quota: `cpu_period_us` if given, else the default for its quota."""
    return snic.cpu_period_us or default_period_us(quota_cores(snic.capacity, snic.cpu_quota))


@dataclass(frozen=True)
class SnicConfig:
    id: str
    capacity: float = 36.0  # placement units (docs/placement.md), the sNIC's compute budget
    cpu_quota: float | None = (
        None  # cores for NFs on this sNIC (cgroup quota); None: capacity / UNITS_PER_CORE
    )
    cpu_period_us: int | None = None  # the quota's CFS period; None: cgroup.default_period_us(quota)
    pcie_gbps: float = 40.0  # per direction; 0 = unshaped
    eth_ports: int = 1
    backend: str = "emulated"  # emulated | bluefield
    ovsdb: str | None = None  # bluefield: the DPU's OVSDB remote, e.g. tcp:192.0.2.10:6640
    openflow: str | None = None  # bluefield: the DPU bridge's OpenFlow listener, e.g. tcp:192.0.2.10:6634
    bridge: str | None = None  # bluefield: the DPU's bridge name
    datapath_type: str = ""  # bluefield: "" = the DPU's default (kernel/offloaded), or "netdev"
    warm_slots: int = 1  # emulated: pre-plugged NF slots its sNIC agent keeps free (0-8)
    agent: str | None = None  # bluefield: its sNIC agent, http://ADDR:PORT (none: a switch, no NF location)
    agent_token_file: str | None = None  # bluefield: the file holding that agent's bearer token
    host_address: str | None = None  # bluefield: the host's address as the DPU reaches it (the state tier)
    # External host switch only: the host switch's port of this sNIC's PCIe link. A BlueField: the operator's
    # existing port (the PF netdev, or a port already on an adopted bridge); an emulated sNIC: the name UNO
    # gives its link's host end (default NAME-pKh). The link's PCIe use is measured from its counters.
    host_port: str | None = None
    # Switching offload: the rules this sNIC's switch holds for offloaded tables (OneSwitch refuses more and
    # the placement counts tables' rules against it); None: unlimited.
    max_rules: int | None = None


@dataclass(frozen=True)
class PortNames:
    """The names controllers see for OneSwitch's virtual ports: neutral, so that they do not tell which
    switch (host, which sNIC) serves a port; where a port really is shows in OneSwitch's REST only
    (`GET /v1/ports`). `{n}`: a wire port's index over every sNIC's Ethernet ports in order, or a VM's
    index; `{id}`: an NF's id. OpenFlow port names hold 15 bytes: longer names are cut."""

    wire: str = "wire{n}"
    vm: str = "vm-{n}"
    nf: str = "nf-{id}"

    def wire_name(self, n: int) -> str:
        return self.wire.format(n=n)[:15]

    def vm_name(self, n: int) -> str:
        return self.vm.format(n=n)[:15]

    def nf_name(self, nf_id: str) -> str:
        return self.nf.format(id=nf_id)[:15]


@dataclass(frozen=True)
class OneSwitchConfig:
    """OneSwitch, the host's one virtual OpenFlow switch (oneswitch/); `enabled: false` leaves it out."""

    enabled: bool = True
    controllers: tuple[str, ...] = ()  # active controller connections, tcp:HOST:PORT
    token: str | None = None  # REST bearer token; None: no auth (REST listens on loopback only)
    # The most VLAN headers a frame may carry when it comes in from a port: 1, or 2 where QinQ frames
    # arrive (every output across PCIe then takes a carrier adding no header, or is refused).
    wire_vlans: int = 1
    carrier: str = "auto"  # OneSwitch's flow-id carrier across PCIe: auto | vlan | mpls (oneswitch/README.md)
    supervise: bool = True  # a supervisor process starts OneSwitch again within a second if it dies
    port_names: PortNames = field(default_factory=PortNames)  # what controllers see (PortNames)

    # How scale-out select groups hash a flow: "symmetric" (both directions of a connection at one instance,
    # UDP ports included) | "5tuple" (dp_hash with UDP ports, not symmetric) | "ovs" (OVS's default: symmetric,
    # UDP ports left out); oneswitch/README.md
    select_hash: str = "symmetric"


@dataclass(frozen=True)
class TierConfig:
    """The state tier (`redis:`): one local Redis (`local`), a Redis Cluster this host starts (`cluster`), or
    an operator's Redis / Redis Cluster given by seed nodes (`external`), shared by several hosts."""

    mode: str = "local"  # local | cluster | external
    masters: int = 3  # cluster: master processes
    replicas: int = 1  # cluster: replicas per master
    nodes: tuple[str, ...] = ()  # external: seed nodes HOST:PORT
    user: str | None = None  # external: the admin user (default: `default`)
    password_file: str | None = None  # external: the file holding that user's password


@dataclass(frozen=True)
class HostConfig:
    name: str = "uno"
    vms: int = 2  # how many VM slots (the agent binds VMs to them); `vm_specs` says what each is
    snics: tuple[SnicConfig, ...] = field(default_factory=lambda: (SnicConfig(id="snic0"),))
    redis_port: int = 0  # 0: pick a free port
    rundir: Path = Path("/run/uno")
    oneswitch: OneSwitchConfig = field(default_factory=OneSwitchConfig)
    tier: TierConfig = field(default_factory=TierConfig)
    switch: HostSwitchConfig = field(default_factory=HostSwitchConfig)
    vm_list: tuple[VmConfig, ...] | None = None  # None: `vms` emulated VMs named vm0, vm1, ...

    @property
    def vm_specs(self) -> tuple[VmConfig, ...]:
        return (
            self.vm_list if self.vm_list is not None else tuple(VmConfig(f"vm{i}") for i in range(self.vms))
        )

    @property
    def host_bridge(self) -> str:
        """The host switch's bridge: the configured one (external), else NAME-hbr."""
        return self.switch.bridge or f"{self.name}-hbr"


_SNIC_TYPES: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "capacity": (int, float),
    "cpu_quota": (int, float),
    "cpu_period_us": (int,),
    "pcie_gbps": (int, float),
    "eth_ports": (int,),
    "backend": (str,),
    "ovsdb": (str,),
    "openflow": (str,),
    "bridge": (str,),
    "datapath_type": (str,),
    "warm_slots": (int,),
    "agent": (str,),
    "agent_token_file": (str,),
    "host_address": (str,),
    "host_port": (str,),
    "max_rules": (int,),
}
MAX_RULES = 1 << 24  # rules an sNIC's switch may be said to hold (a config typo of 10**12 is refused)
_TOP_KEYS = {"name", "vms", "snics", "redis", "rundir", "oneswitch", "host"}
_ONESWITCH_KEYS = (
    "enabled",
    "controllers",
    "token",
    "wire_vlans",
    "carrier",
    "supervise",
    "port_names",
    "select_hash",
)
_PORT_NAME_KEYS = {"wire": "{n}", "vm": "{n}", "nf": "{id}"}
_CONTROLLER_RE = re.compile(r"^tcp:([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\]):(\d{1,5})$")
_TCP_TARGET_RE = re.compile(
    r"^tcp:[A-Za-z0-9.-]+:([1-9]\d{0,4})$"
)  # what OneSwitch dials (oneswitch/README.md)
_TOKEN_RE = re.compile(r"^[A-Za-z0-9._~+/=-]{8,256}$")


def _fail(where: str, msg: str) -> CliError:
    return config_error(where, msg)


def _number(where: str, value: Any, types: tuple[type, ...]) -> Any:
    if isinstance(value, bool) or not isinstance(value, types):
        names = " or ".join(t.__name__ for t in types)
        raise _fail(where, f"expected {names}, got {type(value).__name__} {value!r}")
    if isinstance(value, float) and not math.isfinite(value):  # YAML .nan / .inf
        raise _fail(where, f"must be a finite number, got {value}")
    return value


def parse_config(data: Any) -> HostConfig:
    """Validate a parsed YAML document (None = all defaults) into a HostConfig."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise _fail("top level", "expected a mapping")
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise _fail(unknown[0], f"unknown key (known: {', '.join(sorted(_TOP_KEYS))})")
    name = _number("name", data.get("name", "uno"), (str,))
    if not NAME_RE.match(name):
        raise _fail("name", f"{name!r} must be 1-6 characters [a-z0-9], starting with a letter")
    switch = parse_host_switch(data.get("host", {}))
    vms, vm_list = parse_vms(data.get("vms", 2), switch)
    redis_port, tier = _parse_redis(data.get("redis", {}))
    rundir = Path(_number("rundir", data.get("rundir", "/run/uno"), (str,)))
    if (
        not rundir.is_absolute()
    ):  # relative: another directory per working directory, and `uno down` misses it
        raise _fail("rundir", f"must be an absolute path, got {str(rundir)!r}")
    snics_raw = data.get("snics", [{"id": "snic0"}])
    if not isinstance(snics_raw, list) or not snics_raw:
        raise _fail("snics", "expected a non-empty list")
    if len(snics_raw) > 8:
        raise _fail("snics", f"{len(snics_raw)} sNICs; at most 8")
    snics = []
    for i, raw in enumerate(snics_raw):
        snics.append(_parse_snic(f"snics[{i}]", i, raw))
    check_host_ports(snics, switch)
    links = {sn.host_port for sn in snics if sn.host_port} | {switch.bridge}
    for i, vm in enumerate(vm_list or ()):
        if vm.port is not None and vm.port in links:
            raise _fail(f"vms[{i}].port.name", f"{vm.port!r} is the host bridge or an sNIC's host_port")
    oneswitch = _parse_oneswitch(data.get("oneswitch", {}))
    if oneswitch.enabled:
        for i, sn in enumerate(snics):
            if sn.backend == "bluefield" and not _TCP_TARGET_RE.match(sn.openflow or ""):
                raise _fail(
                    f"snics[{i}].openflow",
                    f"{sn.openflow!r}: OneSwitch reaches a BlueField's bridge at tcp:HOST:PORT (its OpenFlow "
                    "listener); or set `oneswitch: {enabled: false}`",
                )
    return HostConfig(
        name=name, vms=vms, snics=tuple(snics), redis_port=redis_port, rundir=rundir, oneswitch=oneswitch,
        switch=switch, vm_list=vm_list, tier=tier,
    )  # fmt: skip


_REDIS_KEYS = ("mode", "port", "masters", "replicas", "nodes", "user", "password_file")
_NODE_RE = re.compile(r"^([A-Za-z0-9.-]+|\[[0-9a-fA-F:]+\]):(\d{1,5})$")
_USER_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def _parse_redis(raw: Any) -> tuple[int, TierConfig]:
    """`redis:` -> (the local Redis's or first cluster node's port, the tier). Keys that do not fit the mode
    are errors: a `nodes` list under `cluster` would otherwise be silently ignored."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise _fail("redis", "expected a mapping")
    for key in raw:
        if key not in _REDIS_KEYS:
            raise _fail(f"redis.{key}", f"unknown key (known: {', '.join(_REDIS_KEYS)})")
    mode = raw.get("mode", "local")
    if mode not in ("local", "cluster", "external"):
        raise _fail("redis.mode", f"must be local, cluster or external, got {mode!r}")
    port = _number("redis.port", raw.get("port", 0), (int,))
    if not 0 <= port <= 65535:
        raise _fail("redis.port", f"{port} out of range 0..65535")
    masters = _number("redis.masters", raw.get("masters", 3), (int,))
    replicas = _number("redis.replicas", raw.get("replicas", 1), (int,))
    if not 3 <= masters <= 16:  # redis-cli --cluster create refuses fewer than 3 masters
        raise _fail("redis.masters", f"{masters} out of range 3..16 (a Redis Cluster has at least 3 masters)")
    if not 0 <= replicas <= 4:
        raise _fail("redis.replicas", f"{replicas} out of range 0..4")
    if port and mode == "cluster" and port + masters * (1 + replicas) - 1 > 65535:
        raise _fail("redis.port", f"{port}: the cluster's {masters * (1 + replicas)} ports run past 65535")
    nodes = raw.get("nodes", [])
    if not isinstance(nodes, list):
        raise _fail("redis.nodes", "expected a list of HOST:PORT")
    for i, node in enumerate(nodes):
        m = _NODE_RE.match(node) if isinstance(node, str) else None
        if not m or not 1 <= int(m.group(2)) <= 65535:
            raise _fail(f"redis.nodes[{i}]", f"{node!r} is not HOST:PORT")
    user = raw.get("user")
    if user is not None and (not isinstance(user, str) or not _USER_RE.match(user)):
        raise _fail("redis.user", f"{user!r}: must be 1-64 characters [A-Za-z0-9._-]")
    pw = raw.get("password_file")
    if pw is not None and (not isinstance(pw, str) or not Path(pw).is_absolute()):
        raise _fail("redis.password_file", f"must be an absolute path, got {pw!r}")
    if mode == "external":
        if not nodes:
            raise _fail("redis.nodes", "required with mode external (the tier's seed nodes, HOST:PORT)")
        if port:
            raise _fail("redis.port", "only for mode local or cluster (external: give redis.nodes)")
        if pw is not None and not Path(pw).is_file():
            raise _fail("redis.password_file", f"file not found: {pw}")
    else:
        for key in ("nodes", "user", "password_file"):
            if key in raw:
                raise _fail(f"redis.{key}", f"only for mode external (this host runs its {mode} tier itself)")
    if mode != "cluster":
        for key in ("masters", "replicas"):
            if key in raw:
                raise _fail(f"redis.{key}", "only for mode cluster")
    tier = TierConfig(mode, masters, replicas, tuple(nodes), user, pw)
    return port, tier


def _parse_oneswitch(raw: Any) -> OneSwitchConfig:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise _fail("oneswitch", "expected a mapping")
    for key in raw:
        if key not in _ONESWITCH_KEYS:
            raise _fail(f"oneswitch.{key}", f"unknown key (known: {', '.join(_ONESWITCH_KEYS)})")
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        raise _fail("oneswitch.enabled", f"expected bool, got {type(enabled).__name__} {enabled!r}")
    ctls = raw.get("controllers", []) or []
    if not isinstance(ctls, list):
        raise _fail("oneswitch.controllers", "expected a list of tcp:HOST:PORT")
    for i, ctl in enumerate(ctls):
        m = _CONTROLLER_RE.match(ctl) if isinstance(ctl, str) else None
        if not m or not 1 <= int(m.group(2)) <= 65535:
            raise _fail(f"oneswitch.controllers[{i}]", f"{ctl!r} is not tcp:HOST:PORT")
    token = raw.get("token")
    if token is not None and (not isinstance(token, str) or not _TOKEN_RE.match(token)):
        raise _fail("oneswitch.token", "must be 8-256 characters [A-Za-z0-9._~+/=-] (a bearer token)")
    wire_vlans = raw.get("wire_vlans", 1)
    if type(wire_vlans) is not int or wire_vlans not in (1, 2):
        raise _fail(
            "oneswitch.wire_vlans",
            f"must be 1 or 2 (the most VLAN headers a frame may carry when it comes in), got {wire_vlans!r}",
        )
    carrier = raw.get("carrier", "auto")
    if carrier not in ("auto", "vlan", "mpls"):
        raise _fail("oneswitch.carrier", f"must be auto, vlan or mpls, got {carrier!r}")
    select_hash = raw.get("select_hash", "symmetric")
    if select_hash not in ("symmetric", "5tuple", "ovs"):
        raise _fail("oneswitch.select_hash", f"must be symmetric, 5tuple or ovs, got {select_hash!r}")
    supervise = raw.get("supervise", True)
    if not isinstance(supervise, bool):
        raise _fail("oneswitch.supervise", f"expected bool, got {type(supervise).__name__} {supervise!r}")
    return OneSwitchConfig(
        enabled=enabled,
        controllers=tuple(ctls),
        token=token,
        wire_vlans=wire_vlans,
        carrier=carrier,
        supervise=supervise,
        port_names=_parse_port_names(raw.get("port_names", {})),
        select_hash=select_hash,
    )


def _parse_port_names(raw: Any) -> PortNames:
    if not isinstance(raw, dict):
        raise _fail("oneswitch.port_names", "expected a mapping of wire, vm, nf to name templates")
    for key, value in raw.items():
        where = f"oneswitch.port_names.{key}"
        if key not in _PORT_NAME_KEYS:
            raise _fail(where, f"unknown key (known: {', '.join(_PORT_NAME_KEYS)})")
        holder = _PORT_NAME_KEYS[key]
        if not isinstance(value, str) or value.count(holder) != 1 or value.count("{") != 1:
            raise _fail(where, f"must be a string holding {holder} once (e.g. {getattr(PortNames(), key)!r})")
        if not re.fullmatch(r"[A-Za-z0-9._{}-]{1,12}", value.replace(holder, "x")):
            raise _fail(where, "at most 11 characters [A-Za-z0-9._-] besides " + holder)
    return PortNames(**raw)


def _parse_snic(where: str, index: int, raw: Any) -> SnicConfig:
    if not isinstance(raw, dict):
        raise _fail(where, "expected a mapping")
    for key, value in raw.items():
        if key not in _SNIC_TYPES:
            raise _fail(f"{where}.{key}", f"unknown key (known: {', '.join(_SNIC_TYPES)})")
        _number(f"{where}.{key}", value, _SNIC_TYPES[key])
    snic = SnicConfig(**{"id": f"snic{index}", **raw})
    if snic.id != f"snic{index}":
        raise _fail(f"{where}.id", f"must be 'snic{index}' (sNICs are numbered in order)")
    for key in ("capacity", "pcie_gbps"):
        if getattr(snic, key) < 0:
            raise _fail(f"{where}.{key}", f"must not be negative, got {getattr(snic, key)}")
    if snic.cpu_quota is not None and not MIN_QUOTA_CORES <= snic.cpu_quota <= 1024:
        raise _fail(f"{where}.cpu_quota", f"{snic.cpu_quota} cores: must be in {MIN_QUOTA_CORES}..1024")
    if snic.cpu_period_us is not None:
        try:
            quota_us(quota_cores(snic.capacity, snic.cpu_quota), snic.cpu_period_us)
        except DatapathError as exc:
            raise _fail(f"{where}.cpu_period_us", str(exc)) from None
    if not 1 <= snic.eth_ports <= 8:
        raise _fail(f"{where}.eth_ports", f"{snic.eth_ports} out of range 1..8")
    if not 0 <= snic.warm_slots <= 8:
        raise _fail(f"{where}.warm_slots", f"{snic.warm_slots} out of range 0..8")
    if snic.max_rules is not None and not 0 <= snic.max_rules <= MAX_RULES:
        raise _fail(f"{where}.max_rules", f"{snic.max_rules} out of range 0..{MAX_RULES}")
    if snic.backend not in ("emulated", "bluefield"):
        raise _fail(f"{where}.backend", f"{snic.backend!r} is not one of: emulated, bluefield")
    if snic.backend == "bluefield":
        for key in ("ovsdb", "openflow", "bridge"):
            if not getattr(snic, key):
                raise _fail(f"{where}.{key}", "required for the bluefield backend")
        for key in ("ovsdb", "openflow"):
            if not re.match(r"^(tcp|ssl|unix):\S+$", getattr(snic, key)):
                raise _fail(f"{where}.{key}", f"{getattr(snic, key)!r} is not an OVS remote (tcp:HOST:PORT)")
        if snic.datapath_type not in ("", "system", "netdev"):
            raise _fail(f"{where}.datapath_type", f"{snic.datapath_type!r} is not one of: system, netdev")
        _parse_bluefield_agent(where, snic)
    elif snic.ovsdb or snic.openflow or snic.bridge or snic.datapath_type:
        raise _fail(where, "ovsdb/openflow/bridge/datapath_type are only for the bluefield backend")
    elif snic.agent or snic.agent_token_file or snic.host_address:
        raise _fail(
            where,
            "agent/agent_token_file/host_address are only for the bluefield backend (an emulated "
            "sNIC runs its own agent)",
        )
    return snic


def _parse_bluefield_agent(where: str, snic: SnicConfig) -> None:
    """A BlueField is an NF location when its sNIC agent is given: its URL, its token and the host's address
    the DPU reaches the state tier at, all three."""
    given = [k for k in ("agent", "agent_token_file", "host_address") if getattr(snic, k)]
    if not given:
        return
    for key in ("agent", "agent_token_file", "host_address"):
        if not getattr(snic, key):
            raise _fail(f"{where}.{key}", f"required with {given[0]} (a BlueField's sNIC agent)")
    if not re.match(r"^http://[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5}$", snic.agent):
        raise _fail(f"{where}.agent", f"{snic.agent!r} is not http://ADDR:PORT")
    try:
        ipaddress.ip_address(snic.host_address)
    except ValueError:
        raise _fail(f"{where}.host_address", f"{snic.host_address!r} is not an IP address") from None
    if not Path(snic.agent_token_file).is_absolute():
        raise _fail(f"{where}.agent_token_file", f"must be an absolute path, got {snic.agent_token_file!r}")


def load_config(path: str | Path | None) -> HostConfig:
    """Load and validate a YAML config file; None loads the shipped defaults."""
    p = Path(path) if path else DEFAULT_CONFIG
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise CliError(f"config: file not found: {p}") from None
    except OSError as exc:
        raise CliError(f"config: cannot read {p}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1}, column {where.column + 1})" if where else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise CliError(f"config: {p} is not valid YAML{at}: {problem}") from None
    return parse_config(data)
