"""What the agent's jobs share: configuration, the injected I/O edges (NF runtime, port mapper, clock, solver),
the persisted state under one lock, the monitor, counters, and the small primitives every job uses (record
an event, save, start or stop an instance with its errors turned into domain errors)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from domain.errors import (
    ConfigRejected,
    Conflict,
    NotFound,
    OperationFailed,
    PortMapError,
    StartError,
    ValidationError,
)
from domain.model import Instance, Nf
from nf_agent import graph, store
from nf_agent.decide import Decision
from nf_agent.monitor import Monitor
from placement.hysteresis import Dampener

log = logging.getLogger("uno.agent")


class Runtime(Protocol):
    """NF instances: where they can run, start/stop, liveness, stats (nf_runtime.runtime.HostRuntime)."""

    def locations(self) -> list[str]: ...
    def new_instance(self, nf: Nf, location: str, seq: int, used_ofports: set[int]) -> Instance: ...
    def start(self, nf: Nf, inst: Instance) -> None: ...
    def start_processes(self, nf: Nf, inst: Instance) -> None: ...
    def stop(self, inst: Instance) -> None: ...
    def stop_processes(self, inst: Instance) -> None: ...
    def reconfigure(self, nf: Nf, inst: Instance) -> None:
        """Apply nf.config to the running instance in place; RestartNeeded when it takes a restart."""

    def alive(self, inst: Instance) -> bool: ...
    def healthy(self, inst: Instance, timeout: float = 1.0) -> bool: ...
    def store_reachable(self, timeout: float = 0.5) -> bool | None: ...
    def stats(self, inst: Instance) -> dict | None: ...
    def cpu_seconds(self, inst: Instance) -> float: ...
    def port_counters_timed(
        self, clock: Callable[[], float]
    ) -> tuple[dict[str, dict[str, dict[str, int]]], dict[str, float]]:
        """Per switch: port name -> counters, and the middle of that switch's read on `clock`."""

    def pcie_ports(self) -> dict[str, str]: ...
    def pcie_snic_ports(self) -> dict[str, str]: ...
    def plugged(self, inst: Instance) -> bool: ...
    def answers(self, location: str) -> bool: ...
    def free_ofport(self, location: str, used_ofports: set[int]) -> int: ...


class PortMapper(Protocol):
    """NF virtual ports in OneSwitch (nf_runtime.portmap.OneSwitchPortMapper); failures raise PortMapError."""

    def map(self, vport: int, switch: str, port: int, name: str) -> None:
        """Map virtual port `vport` to physical port `port` of `switch` ("host", "snic0", ...)."""

    def remap(self, vport: int, switch: str, port: int, drain_ms: int | None = None) -> float:
        """Move `vport` to a new physical port make-before-break; returns the remap time in ms. The old port
        stays ingress-only (draining) for `drain_ms` (None: OneSwitch's default)."""

    def unmap(self, vport: int) -> None:
        """Remove the mapping (no error if it is not mapped)."""

    def mapped(self) -> dict[int, tuple[str, int]]:
        """The current map: vport -> (switch, port) (the first instance when the vport has several)."""

    def set_instances(
        self,
        vport: int,
        instances: list[tuple[str, int]],
        drain_ms: int | None = None,
        weights: list[int] | None = None,
    ) -> float:
        """Spread `vport` over several physical ports (OneSwitch: an OVS select group, per-flow hash),
        make-before-break; the vport must be mapped. Returns OneSwitch's time in ms. ScaleUnsupported when
        OneSwitch has no such endpoint. A removed instance's port drains for `drain_ms` as in `remap`.
        `weights`: the instances' bucket weights (None: all equal; nf_agent.balance)."""

    def instances(self) -> dict[int, list[tuple[str, int]]]:
        """vport -> all (switch, port)s it spreads over (one entry for a plainly mapped vport)."""

    def weights(self) -> dict[int, list[int]]:
        """vport -> its instances' select bucket weights (all 1 unless set by `set_instances`)."""

    def connected(self, switch: str) -> bool:
        """Whether OneSwitch holds a connection to `switch` now (traffic can be moved there)."""


@dataclass
class RestartPolicy:
    """Restart a dead NF process at most `max_restarts` times per `window` seconds, then mark it failed."""

    max_restarts: int = 5
    window: float = 60.0


@dataclass
class Counters:
    solves: int = 0
    migrations: int = 0
    migration_failures: int = 0
    restarts: int = 0
    failovers: int = 0
    scales: int = 0
    scale_failures: int = 0
    epoch_bumps: int = 0
    provisions: int = 0
    last_provision_ms: float | None = None
    last_remap_ms: float | None = None


@dataclass
class AgentConfig:
    snics: list[graph.SnicInfo]
    vm_slots: int
    profiles: dict[str, dict[str, float]]
    solve_time_limit: float = 5.0
    max_moves: int | None = None
    dampener: Dampener = field(default_factory=Dampener)
    restart: RestartPolicy = field(default_factory=RestartPolicy)
    # supervisor: replace a dead instance by a new one (remap) instead of restarting it
    failover: bool = False


def default_solver(time_limit: float, max_moves: int | None) -> Callable[[dict], dict]:
    """The placement solver: a WarmSolver, so that a re-placement after a small change (measured traffic,
    where NFs run now) re-reads and rebuilds only what changed (placement/warm.py; the same answers)."""
    from placement.warm import WarmSolver

    return WarmSolver(time_limit=time_limit, max_moves=max_moves)


class AgentContext:
    """The agent's shared state. Every mutation of `state` runs under `lock`; `save()` persists it."""

    def __init__(
        self,
        cfg: AgentConfig,
        runtime: Runtime,
        mapper: PortMapper,
        state_path: Path,
        clock: Callable[[], float] = time.time,
        solver: Callable[[dict], dict] | None = None,
        drain_s: float = 0.0,
        tables: object | None = None,
    ):
        self.cfg = cfg
        self.runtime = runtime
        self.mapper = mapper
        self.state_path = state_path
        self.clock = clock
        self.solver = solver or default_solver(cfg.solve_time_limit, cfg.max_moves)
        self.drain_s = drain_s
        # OneSwitch's virtual tables (nf_agent/tables.py TableSwitch), None: no switching offload; and the
        # tables as last seen, which the NF placement counts where they run.
        self.tables = tables
        self.tables_seen: list = []
        self.lock = threading.RLock()
        self.state = store.load(state_path)
        self.monitor = Monitor(alpha=0.5)
        self.counters = Counters()
        self.last_decision: Decision | None = None
        # Pre-started standby instances (failover without a start): kept in memory only, not in the state
        # file; an agent restart loses track of them and `uno down` sweeps their namespaces.
        self.standbys: dict[str, Instance] = {}
        # sNICs whose death the runtime reported (until they are back): not a place for an NF meanwhile;
        # their instances that failed over stay to be released there once the sNIC is back.
        self.down: set[str] = set()
        self.orphans: dict[str, list[Instance]] = {}

    @property
    def locations(self) -> list[str]:
        return self.runtime.locations()

    @property
    def live_locations(self) -> list[str]:
        """Where an NF may go now: every location but the sNICs that are down."""
        return [loc for loc in self.locations if loc not in self.down]

    def save(self) -> None:
        store.save(self.state, self.state_path)

    def event(self, event: str, **kw) -> None:
        entry = {"t": round(self.clock(), 3), "event": event, **kw}
        self.state.record(entry)
        log.info(event, extra={"fields": kw})

    def nf(self, nf_id: str) -> Nf:
        nf = self.state.nfs.get(nf_id)
        if nf is None:
            raise NotFound(f"no NF {nf_id!r}")
        return nf

    def vertices(self, extra_nf: str | None = None) -> dict[str, str]:
        ids = list(self.state.nfs) + ([extra_nf] if extra_nf else [])
        return graph.vertices(self.cfg.snics, list(self.state.vms), ids)

    def check_new_id(self, new_id: str) -> None:
        """Conflict when a VM, an NF or an sNIC Ethernet port (`snicK-ethJ`) already has this vertex id."""
        kind = self.vertices().get(new_id)
        if kind is not None:
            what = " (an sNIC Ethernet port)" if kind == "port" else ""
            raise Conflict(f"id {new_id!r} already exists{what}", "id")

    def used_ofports(self, loc: str) -> set[int]:
        """OpenFlow ports at `loc` held by an instance or a standby."""
        return self.state.used_ofports(loc) | {i.ofport for i in self.standbys.values() if i.switch == loc}

    def new_instance(self, nf: Nf, loc: str, used: set[int] | None = None) -> Instance:
        """A new instance of `nf` at `loc` (not started) on a port no instance or standby there holds."""
        ports = self.used_ofports(loc) if used is None else used
        inst = self.runtime.new_instance(nf, loc, self.state.new_instance_seq(), ports)
        inst.binary = nf.binary  # a live update's new instances run the NF's new binary
        return inst

    def start(self, nf: Nf, inst: Instance) -> None:
        """Start `inst`; a config the NF refuses is a ValidationError of `config`, any other failure
        OperationFailed (the runtime cleaned up what it made)."""
        try:
            self.runtime.start(nf, inst)
        except ConfigRejected as exc:
            raise ValidationError("config", f"the {nf.type} NF refused it: {exc}") from None
        except StartError as exc:
            raise OperationFailed(str(exc)) from None

    def stop_quietly(self, inst: Instance) -> None:
        try:
            self.runtime.stop(inst)
        except Exception as exc:  # noqa: BLE001 - rollback continues; the sweep of `uno down` is the backstop
            log.error(
                "rollback: stopping instance failed",
                extra={"fields": {"instance": inst.id, "error": str(exc)}},
            )

    def unmap_quietly(self, vport: int) -> None:
        try:
            self.mapper.unmap(vport)
        except PortMapError as exc:
            log.error("rollback: unmap failed", extra={"fields": {"vport": vport, "error": str(exc)}})
