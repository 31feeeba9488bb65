"""Fakes of the agent's two I/O edges, for unit tests of its REST and rollback logic only.

The lifecycle tests (test_lifecycle.py) use the real runtime (NF processes, namespaces, OVS) and OneSwitch.
"""

from __future__ import annotations

from dataclasses import replace

from domain.errors import PortMapError, RestartNeeded, ScaleUnsupported, StartError, TableRefused
from domain.model import Instance, Nf
from host_datapath.oneswitch_client import TableMove, TableState
from nf_agent.graph import SnicInfo
from nf_agent.service import Agent, AgentConfig
from placement.profiles import load_profiles


class FakeRuntime:
    def __init__(self, snics=("snic0",)):
        self.snics = list(snics)
        self.running: dict[str, Instance] = {}
        self.fail_start: set[str] = set()  # NF ids whose start fails
        self.dropped: list[tuple[str, str]] = []  # (tenant, NF id) whose state drop_state deleted
        self.counters: dict[str, dict[str, dict[str, int]]] = {"host": {}, **{s: {} for s in self.snics}}
        self.pids = 1000
        self.store_up: bool | None = True  # what store_reachable answers (None: local state)
        self.silent: set[str] = set()  # sNICs whose agent does not answer
        self.restart_config: set[str] = set()  # NF ids whose config takes a restart (RestartNeeded)
        self.configs: dict[str, dict] = {}  # instance id -> the config applied in place
        self.nf_rx: dict[str, int] = {}  # instance id -> packets its NF process received (its stats' rx)

    def locations(self):
        return ["host", *self.snics]

    def new_instance(self, nf: Nf, location: str, seq: int, used_ofports: set[int]) -> Instance:
        port = 200
        while port in used_ofports:
            port += 1
        return Instance(f"{nf.id}-{seq}", location, location, port, f"x-i{seq}", f"x-i{seq}", f"x-j{seq}")

    def start(self, nf: Nf, inst: Instance) -> None:
        if nf.id in self.fail_start:
            raise StartError(f"{inst.id}: NF process exited: boom")
        self.start_processes(nf, inst)

    def start_processes(self, nf: Nf, inst: Instance) -> None:
        if nf.id in self.fail_start:
            raise StartError(f"{inst.id}: NF process exited: boom")
        self.pids += 1
        inst.pid, inst.state = self.pids, "running"
        self.running[inst.id] = inst

    def stop(self, inst: Instance) -> None:
        self.stop_processes(inst)

    def stop_processes(self, inst: Instance) -> None:
        self.running.pop(inst.id, None)
        inst.pid = None

    def reconfigure(self, nf: Nf, inst: Instance) -> None:
        if nf.id in self.restart_config:
            raise RestartNeeded(f"{inst.id}: takes a restart")
        self.configs[inst.id] = dict(nf.config or {})

    def alive(self, inst: Instance) -> bool:
        return inst.id in self.running

    def drop_state(self, nf_id: str, tenant: str = "default") -> int:
        self.dropped.append((tenant, nf_id))
        return 0

    def healthy(self, inst: Instance, timeout: float = 1.0) -> bool:
        return inst.id in self.running

    def store_reachable(self, timeout: float = 0.5) -> bool | None:
        return self.store_up

    def stats(self, inst: Instance):
        return {"rx": self.nf_rx.get(inst.id, 0), "tx": 0} if inst.id in self.running else None

    def cpu_seconds(self, inst: Instance) -> float:
        return 0.0

    def answers(self, location: str) -> bool:
        return location not in self.silent

    def port_counters_timed(self, clock):
        now = clock()
        counters = {sw: {p: dict(c) for p, c in ports.items()} for sw, ports in self.counters.items()}
        return counters, {sw: now for sw in self.counters}

    def pcie_ports(self):
        return {s: f"x-p{s[4:]}h" for s in self.snics}

    def pcie_snic_ports(self):
        return {}


class FakeMapper:
    def __init__(self):
        self.map_: dict[int, tuple[str, int]] = {}
        self.fail = False
        self.remaps: list[tuple[int, str, int]] = []
        self.drain_ms: list[int | None] = []  # the drain_ms of every remap / set_instances call
        self.sets: dict[int, list[tuple[str, int]]] = {}  # vports spread over several ports
        self.bucket_weights: dict[int, list[int] | None] = {}  # their bucket weights (None: all equal)
        self.set_calls: list[tuple[int, list[tuple[str, int]]]] = []
        self.fail_set = False
        self.unsupported = False
        self.fail_prepare = False
        self.prepared: list[tuple[int, str, int, int | None]] = []  # (vport, switch, port, ms) per prepare
        self.disconnected: set[str] = set()  # switches OneSwitch has no connection to

    def map(self, vport, switch, port, name):
        if self.fail:
            raise PortMapError("OneSwitch 503: down")
        self.map_[vport] = (switch, port)

    def remap(self, vport, switch, port, drain_ms=None):
        if self.fail:
            raise PortMapError("OneSwitch 503: down")
        self.map_[vport] = (switch, port)
        self.sets.pop(vport, None)
        self.remaps.append((vport, switch, port))
        self.drain_ms.append(drain_ms)
        return 1.5

    def prepare(self, vport, switch, port, ms=None):
        if self.fail_prepare:
            raise PortMapError("OneSwitch 503: down")
        if vport not in self.map_:
            raise PortMapError("OneSwitch 404: vport not mapped (field vport)")
        self.prepared.append((vport, switch, port, ms))
        return 1.0

    def unmap(self, vport):
        self.map_.pop(vport, None)
        self.sets.pop(vport, None)

    def mapped(self):
        return dict(self.map_)

    def set_instances(self, vport, instances, drain_ms=None, weights=None):
        if self.unsupported:
            raise ScaleUnsupported("OneSwitch 404: no such path")
        if self.fail or self.fail_set:
            raise PortMapError("OneSwitch 503: down")
        if vport not in self.map_:
            raise PortMapError("OneSwitch 404: vport not mapped (field vport)")
        self.set_calls.append((vport, list(instances)))
        self.drain_ms.append(drain_ms)
        self.map_[vport] = tuple(instances[0])
        self.sets[vport] = list(instances)
        self.bucket_weights[vport] = list(weights) if weights is not None else None
        return 2.5

    def instances(self):
        return {v: list(self.sets.get(v, [m])) for v, m in self.map_.items()}

    def weights(self):
        return {
            v: list(self.bucket_weights.get(v) or [1] * len(self.sets.get(v, [m])))
            for v, m in self.map_.items()
        }

    def connected(self, switch):
        return switch not in self.disconnected


class FakeTables:
    """OneSwitch's tables as its REST contract states them (GET/PUT /v1/tables), for the agent's unit tests:
    a move to an sNIC whose `limits` (rules) it exceeds, or that is in `refuse`, is refused (409 reason)."""

    def __init__(self, tables: dict[int, int] | None = None, snics=("snic0",), limits: dict | None = None):
        self.snics = list(snics)
        self.limits = dict(limits or {})
        self.refuse: dict[str, str] = {}  # sNIC -> reason OneSwitch gives for any table there
        self.state = {
            t: TableState(t, "everywhere", n, {}, dict.fromkeys(self.snics))
            for t, n in (tables or {}).items()
        }
        self.moves: list[tuple[int, str]] = []

    def tables(self) -> list[TableState]:
        return [replace(t, offload={s: self._reason(t, s) for s in self.snics}) for t in self.state.values()]

    def _reason(self, t: TableState, snic: str) -> str | None:
        if snic in self.refuse:
            return self.refuse[snic]
        limit = self.limits.get(snic)
        others = sum(x.rules for x in self.state.values() if x.location == snic and x.table != t.table)
        if limit is not None and others + t.rules > limit:
            return f"{snic} holds at most {limit} rules ({others} in use)"
        return None

    def move_table(
        self, table: int, location: str, drain_ms: int | None = None, host_min_priority: int | None = None
    ) -> TableMove:
        """As OneSwitch: a split (`host_min_priority`) needs an sNIC and counts the whole table there."""
        t = self.state[table]
        if host_min_priority is not None and location not in self.snics:
            raise ValueError("host_min_priority with a location that is not an sNIC: OneSwitch's 400")
        if location in self.snics and (reason := self._reason(t, location)):
            raise TableRefused(str(table), reason)
        self.state[table] = replace(t, location=location, host_min_priority=host_min_priority)
        self.moves.append(
            (table, location) if host_min_priority is None else (table, location, host_min_priority)
        )
        return TableMove(table, t.location, location, t.rules, 1.0)


class Clock:
    """A clock passed in: `clock()` reads it, `clock.sleep(s)` advances it (the sleep of the code under test)."""

    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def make_agent(
    tmp_path, capacity=36.0, pcie=40.0, tables=None, max_rules=None, **kw
) -> tuple[Agent, FakeRuntime, FakeMapper, Clock]:
    """An agent on fakes; `tables`: a FakeTables (switching offload), `max_rules`: snic0's rule budget."""
    rt, mp, clock = FakeRuntime(), FakeMapper(), Clock()
    cfg = AgentConfig(
        snics=[SnicInfo("snic0", capacity, pcie, 1, max_rules)],
        vm_slots=2,
        profiles=load_profiles(),
        solve_time_limit=5,
        **kw,
    )
    return Agent(cfg, rt, mp, tmp_path / "state.json", clock=clock, tables=tables), rt, mp, clock
