"""The agent: VMs and NFs requested northbound, placed, started, wired into OneSwitch, monitored, re-placed.

All mutations run under one lock and either complete or are rolled back (nothing half-created remains): the
state file is written only after the NF runs and its virtual port is mapped. The NF runtime and the port
mapper are injected (`runtime.HostRuntime` / `portmap.OneSwitchPortMapper` in production), as is the clock.
`migrate()` is the ONE place that moves an NF (its protocol: migration/protocol.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from nf_agent.agent import graph, store
from nf_agent.agent.background import pcie_background
from nf_agent.agent.decide import Decision, decide
from nf_agent.agent.model import (
    HOST,
    Conflict,
    Instance,
    Nf,
    NfRequest,
    NotFound,
    ValidationError,
    Vm,
    VmRequest,
)
from nf_agent.agent.monitor import Measurement, Monitor, Sample, Wiring
from nf_agent.agent.portmap import PortMapError, PortMapper
from nf_agent.emulated_host import naming as nm
from placement import parse_problem
from placement.evaluate import evaluate
from placement.hysteresis import Dampener

log = logging.getLogger("uno.agent")


class AgentError(Exception):
    """A server-side failure (an NF did not start, OneSwitch refused): HTTP 500/502, state unchanged."""

    def __init__(self, message: str, status: int = 500):
        super().__init__(message)
        self.status = status


class NotImplementedYet(Exception):
    """A documented limitation, failing closed: HTTP 409 naming the field (the request is valid, but this
    host cannot do it yet)."""

    def __init__(self, message: str, fld: str | None = None):
        super().__init__(message)
        self.field = fld


class Runtime(Protocol):
    def locations(self) -> list[str]: ...
    def new_instance(self, nf: Nf, location: str, seq: int, used_ofports: set[int]) -> Instance: ...
    def start(self, nf: Nf, inst: Instance) -> None: ...
    def start_processes(self, nf: Nf, inst: Instance) -> None: ...
    def stop(self, inst: Instance) -> None: ...
    def stop_processes(self, inst: Instance) -> None: ...
    def alive(self, inst: Instance) -> bool: ...
    def healthy(self, inst: Instance, timeout: float = 1.0) -> bool: ...
    def store_reachable(self, timeout: float = 0.5) -> bool | None: ...
    def stats(self, inst: Instance) -> dict | None: ...
    def port_counters(self) -> dict[str, dict[str, dict[str, int]]]: ...
    def pcie_ports(self) -> dict[str, str]: ...


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
    failover: bool = (
        False  # supervisor: replace a dead instance by a new one (remap) instead of restarting it
    )


def default_solver(time_limit: float, max_moves: int | None) -> Callable[[dict], dict]:
    from placement import solve

    def run(problem_json: dict) -> dict:
        return solve(parse_problem(problem_json), time_limit=time_limit, max_moves=max_moves)

    return run


class Agent:
    def __init__(
        self,
        cfg: AgentConfig,
        runtime: Runtime,
        mapper: PortMapper,
        state_path: Path,
        clock: Callable[[], float] = time.time,
        solver: Callable[[dict], dict] | None = None,
        drain_s: float = 0.0,
    ):
        self.cfg = cfg
        self.runtime = runtime
        self.mapper = mapper
        self.state_path = state_path
        self.clock = clock
        self.solver = solver or default_solver(cfg.solve_time_limit, cfg.max_moves)
        self.lock = threading.RLock()
        self.state = store.load(state_path)
        self.monitor = Monitor(alpha=0.5)
        self.counters = Counters()
        self.last_decision: Decision | None = None
        self.drain_s = drain_s
        self._restart_times: dict[str, list[float]] = {}
        self.last_migration = None  # migration.protocol.MigrationResult of the last move
        self.last_scale = None  # migration.scale.ScaleResult of the last resize
        # NFs with local state (runtime store "local") move with their state (migration.localstate);
        # False = a plain remap, which loses it (kept for the side-by-side tests and benchmark).
        self.move_state = True
        # Pre-started standby instances (failover without a start): kept in memory only, not in the state
        # file; an agent restart loses track of them and `uno down` sweeps their namespaces.
        self.standbys: dict[str, Instance] = {}
        self.store_state = "unknown"  # the state tier as the last health check saw it (events on a change)
        # (NF, target) -> when OneSwitch did not take that move (502: it refused the prepare or remap, e.g. a
        # controller rule it cannot carry from there, or did not answer): the re-placement does not retry it
        # within the dampening window, so a placement it cannot reach does not start and stop an instance at
        # every run.
        self.refused_moves: dict[tuple[str, str], float] = {}

    # -- helpers ---------------------------------------------------------------------------------------
    @property
    def locations(self) -> list[str]:
        return self.runtime.locations()

    def _save(self) -> None:
        store.save(self.state, self.state_path)

    def _event(self, event: str, **kw) -> None:
        entry = {"t": round(self.clock(), 3), "event": event, **kw}
        self.state.record(entry)
        log.info(event, extra={"fields": kw})

    def _nf(self, nf_id: str) -> Nf:
        nf = self.state.nfs.get(nf_id)
        if nf is None:
            raise NotFound(f"no NF {nf_id!r}")
        return nf

    def _vertices(self, extra_nf: str | None = None) -> dict[str, str]:
        ids = list(self.state.nfs) + ([extra_nf] if extra_nf else [])
        return graph.vertices(self.cfg.snics, list(self.state.vms), ids)

    def _check_new_id(self, new_id: str) -> None:
        """409 when a VM, an NF or an sNIC Ethernet port (`snicK-ethJ`) already has this vertex id."""
        kind = self._vertices().get(new_id)
        if kind is not None:
            what = " (an sNIC Ethernet port)" if kind == "port" else ""
            raise Conflict(f"id {new_id!r} already exists{what}", "id")

    def measured_edges(self) -> dict[tuple[str, str], float]:
        m = self.monitor.measurement
        return dict(m.edges) if m else {}

    def problem(self, nfs: list[Nf], fixed: set[str] = frozenset()) -> dict:
        """The placement instance (graph.build_problem) under the latest measurement: a scaled-out NF at
        several locations is one vertex per location, its traffic divided by its ports' measured split;
        each sNIC's PCIe link carries its measured background (`pcie_background`)."""
        return self._graph(nfs, fixed, self.pcie_background())

    def _graph(self, nfs: list[Nf], fixed: set[str] = frozenset(), background: dict | None = None) -> dict:
        m = self.monitor.measurement
        return graph.build_problem(
            self.cfg.snics, list(self.state.vms), nfs, self.cfg.profiles, self.measured_edges(), fixed,
            measured_split=m.nf_split if m else None, background=background,
        )  # fmt: skip

    def pcie_background(self) -> dict[str, dict[str, float]]:
        """Per sNIC: the measured PCIe Gbit/s the model of the current NFs at their current locations does not
        predict (agent/background.py: traffic through no NF, beyond a noise floor); {} before a measurement."""
        m = self.monitor.measurement
        if m is None or not m.pcie:
            return {}
        problem = parse_problem(self._graph(list(self.state.nfs.values())))
        current = self.current_placement()
        ev = evaluate(problem, {n.id: current.get(n.id, problem.allowed(n)[0]) for n in problem.nodes})
        return pcie_background(m.pcie, {s: {d: float(x) for d, x in v.items()} for s, v in ev.pcie.items()})

    def current_placement(self) -> dict[str, str]:
        return {k: n.location for k, n in self.state.nfs.items() if n.location}

    # -- VMs -------------------------------------------------------------------------------------------
    def create_vm(self, req: VmRequest) -> Vm:
        with self.lock:
            self._check_new_id(req.id)
            used = {v.slot for v in self.state.vms.values()}
            free = [i for i in range(self.cfg.vm_slots) if i not in used]
            if not free:
                raise Conflict(f"all {self.cfg.vm_slots} VM slots of this host are in use")
            vm = Vm(id=req.id, slot=free[0], vport=nm.vport_vm(free[0]))
            self.state.vms[vm.id] = vm
            self._event("vm-create", vm=vm.id, vport=vm.vport)
            try:
                self._save()
            except OSError as exc:
                del self.state.vms[vm.id]
                raise AgentError(f"cannot persist state: {exc}") from None
            return vm

    def delete_vm(self, vm_id: str) -> None:
        with self.lock:
            if vm_id not in self.state.vms:
                raise NotFound(f"no VM {vm_id!r}")
            users = sorted(n.id for n in self.state.nfs.values() if vm_id in (n.src, n.dst))
            if users:
                raise Conflict(f"VM {vm_id!r} is in the chain of NF(s) {', '.join(users)}; delete them first")
            self.state.vms.pop(vm_id)
            self._event("vm-delete", vm=vm_id)
            self._save()

    # -- NFs -------------------------------------------------------------------------------------------
    def create_nf(self, req: NfRequest) -> Nf:
        t0 = time.monotonic()
        with self.lock:
            nf_id = req.id or self.state.new_nf_id()
            self._check_new_id(nf_id)
            graph.check_chain(nf_id, req.src, req.dst, self._vertices())
            nf = Nf(
                id=nf_id, type=req.type, config=req.config, vport=self.state.free_vport(nm.VPORT_NF_BASE),
                expected_gbps=req.expected_gbps, src=req.src, dst=req.dst, pin=req.pin, prefer=req.prefer,
                created=self.clock(),
            )  # fmt: skip
            if nf.pin and nf.pin not in self.locations:
                raise ValidationError("pin", f"no location {nf.pin!r} on this host")
            loc = self._place_new(nf)
            inst = self.runtime.new_instance(
                nf, loc, self.state.new_instance_seq(), self.state.used_ofports(loc)
            )
            self._start(nf, inst)
            try:
                self.mapper.map(nf.vport, inst.switch, inst.ofport, nf.id)
            except PortMapError as exc:
                self._stop_quietly(inst)
                raise AgentError(str(exc), 502) from None
            nf.location, nf.instances = loc, [inst]
            self.state.nfs[nf_id] = nf
            self._event("nf-create", nf=nf_id, type=nf.type, location=loc, vport=nf.vport)
            try:
                self._save()
            except OSError as exc:
                del self.state.nfs[nf_id]
                self._unmap_quietly(nf.vport)
                self._stop_quietly(inst)
                raise AgentError(f"cannot persist state: {exc}") from None
            self.counters.provisions += 1
            self.counters.last_provision_ms = round((time.monotonic() - t0) * 1000, 1)
            return nf

    def _place_new(self, nf: Nf) -> str:
        """Where a new NF goes: solved with every existing NF held where it is (creating never migrates).

        When the existing NFs (or a PCIe link's background traffic) alone already break a budget under the
        measured traffic (re-placement has not caught up yet), the new NF goes to the first location that adds
        no violation of its own.
        """
        existing = list(self.state.nfs.values())
        problem_json = self.problem([*existing, nf], fixed={n.id for n in existing})
        res = self.solver(problem_json)
        self.counters.solves += 1
        if res.get("status") in ("optimal", "feasible"):
            return res["placement"][nf.id]
        problem = parse_problem(problem_json)
        base = {n.id: n.location or problem.allowed(n)[0] for n in problem.nodes if n.id != nf.id}
        # (with no NF yet, what the links' background alone breaks)
        already = set(evaluate(parse_problem(self.problem(existing)), base).violations)
        if already:
            for loc in [nf.pin] if nf.pin else [nf.prefer or HOST, *self.locations]:
                if set(evaluate(problem, {**base, nf.id: loc}).violations) <= already:
                    log.warning(
                        "placed on an over-budget host", extra={"fields": {"nf": nf.id, "location": loc}}
                    )
                    return loc
        raise Conflict(f"no placement for {nf.id}: {res.get('reason', res.get('status'))}", "expected.gbps")

    def _start(self, nf: Nf, inst: Instance) -> None:
        from nf_agent.agent.runtime import ConfigRejected, StartError

        try:
            self.runtime.start(nf, inst)
        except ConfigRejected as exc:
            raise ValidationError("config", f"the {nf.type} NF refused it: {exc}") from None
        except StartError as exc:
            raise AgentError(str(exc)) from None

    def _stop_quietly(self, inst: Instance) -> None:
        try:
            self.runtime.stop(inst)
        except Exception as exc:  # noqa: BLE001 - rollback continues; the sweep of `uno down` is the backstop
            log.error(
                "rollback: stopping instance failed",
                extra={"fields": {"instance": inst.id, "error": str(exc)}},
            )

    def _unmap_quietly(self, vport: int) -> None:
        try:
            self.mapper.unmap(vport)
        except PortMapError as exc:
            log.error("rollback: unmap failed", extra={"fields": {"vport": vport, "error": str(exc)}})

    def update_nf(self, nf_id: str, changes: dict) -> Nf:
        """Change an NF's traffic expectation (`model.parse_nf_update`: expected_gbps, src, dst): the chain
        vertices must exist and not be the NF itself. Only the model changes (the next solve and monitoring
        sample use it); nothing moves. On a bad vertex or a failed save nothing is changed."""
        with self.lock:
            nf = self._nf(nf_id)
            src, dst = changes.get("src", nf.src), changes.get("dst", nf.dst)
            graph.check_chain(nf_id, src, dst, self._vertices())
            before = {k: getattr(nf, k) for k in changes}
            for k, v in changes.items():
                setattr(nf, k, v)
            history = list(self.state.history)
            self._event("nf-update", nf=nf_id, expected=nf.public()["expected"])
            try:
                self._save()
            except OSError as exc:
                for k, v in before.items():
                    setattr(nf, k, v)
                self.state.history = history
                raise AgentError(f"cannot persist state: {exc}") from None
            return nf

    def _unlink(self, gone: Nf) -> list[dict]:
        """Splice `gone` out of the chains that name it: a neighbour whose dst (src) was `gone` takes `gone`'s
        dst (src), so a -> gone -> b becomes a -> b (None, the default, where that would name the neighbour
        itself). Returns the changed neighbours' new src/dst."""
        out = []
        for n in self.state.nfs.values():
            if n.id == gone.id or gone.id not in (n.src, n.dst):
                continue
            if n.src == gone.id:
                n.src = gone.src if gone.src != n.id else None
            if n.dst == gone.id:
                n.dst = gone.dst if gone.dst != n.id else None
            out.append({"nf": n.id, "src": n.src, "dst": n.dst})
        return out

    def delete_nf(self, nf_id: str) -> None:
        """Stop every instance, unmap the vport, forget the NF; NFs whose chain named it are spliced
        (`_unlink`)."""
        with self.lock:
            nf = self._nf(nf_id)
            errors = []
            try:
                self.mapper.unmap(nf.vport)
            except PortMapError as exc:
                errors.append(str(exc))
            sb = self.standbys.pop(nf_id, None)
            for inst in [*nf.instances, *([sb] if sb else [])]:
                try:
                    self.runtime.stop(inst)
                except Exception as exc:  # noqa: BLE001
                    errors.append(str(exc))
            del self.state.nfs[nf_id]
            self._event("nf-delete", nf=nf_id, errors=errors, rechained=self._unlink(nf))
            self._save()
            if errors:
                raise AgentError(f"NF {nf_id} deleted, with cleanup errors: {'; '.join(errors)}")

    # -- migration: the ONE call site that moves an NF ----------------------------------------------------
    def migrate(self, nf: Nf, target: str) -> float:
        """Move `nf` to `target` with the protocol of `migration.protocol` (start, ready, make-before-break
        remap, verify, drain, stop, release). Returns the remap time (ms).

        On failure (AgentError: 502 when OneSwitch refused, 500 otherwise) the NF keeps running where it was.
        """
        from migration.localstate import LocalMoveConfig, migrate_local
        from migration.protocol import MigrationConfig, MigrationError
        from migration.protocol import migrate as run_protocol

        old = list(nf.instances)
        inst = self.runtime.new_instance(
            nf, target, self.state.new_instance_seq(), self._used_ofports(target)
        )
        # The protocol follows where the NF keeps its state: in the tier (a remap suffices) or in its
        # process (OpenNF-style: buffer at the target, move the state, replay).
        local = getattr(self.runtime, "store", "redis") == "local" and self.move_state and len(old) == 1
        try:
            if local:
                lcfg = LocalMoveConfig(drain_timeout_s=max(self.drain_s, 0.5))
                res = migrate_local(nf, old, inst, self.runtime, self.mapper, lcfg)
            else:
                cfg = MigrationConfig(drain_timeout_s=self.drain_s)
                res = run_protocol(nf, old, inst, self.runtime, self.mapper, cfg)
        except MigrationError as exc:
            self.counters.migration_failures += 1
            self._event(
                "nf-migrate-failed", nf=nf.id, dst=target, step=exc.step, steps=exc.result.to_json()["steps"]
            )
            raise AgentError(str(exc), 502 if exc.step in ("prepare", "remap") else 500) from None
        nf.instances = [inst]
        prev, nf.location = nf.location, target
        self.counters.migrations += 1
        if not local and nf.config.get("owner_cache") and hasattr(self.runtime, "bump_epoch"):
            # Ownership moved: the new owner must not keep reads cached while the old one still wrote (the
            # drain); bumped after the old instance stopped, so nothing writes behind it any more.
            try:
                self.runtime.bump_epoch(nf.id)
                self.counters.epoch_bumps += 1
            except Exception as exc:  # noqa: BLE001 - committed move; reported
                res.cleanup_errors.append(f"owner-cache epoch not bumped: {exc}")
        self.counters.last_remap_ms = res.remap_ms
        self.last_migration = res
        self._event(
            "nf-migrate", nf=nf.id, src=prev, dst=target, remap_ms=res.remap_ms,
            duration_ms=round(res.duration_ms, 1), drained=res.drained, cleanup_errors=res.cleanup_errors,
            buffered=res.buffered, replayed=res.replayed, buffer_overflow=res.buffer_overflow,
            steps=[s.to_json() for s in res.steps],
            **({"protocol": "local-state", "state_bytes": res.state_bytes} if local else {}),
        )  # fmt: skip
        self._save()
        return res.remap_ms

    def migrate_request(self, nf_id: str, target: str) -> dict:
        with self.lock:
            nf = self._nf(nf_id)
            if nf.pin and nf.pin != target:
                raise Conflict(f"NF {nf_id} is pinned to {nf.pin}", "to")
            if len(nf.instances) > 1:
                raise Conflict(
                    f"NF {nf_id} runs {len(nf.instances)} instances; scale it in to 1 before moving it", "to"
                )
            if nf.location == target:
                return {"id": nf_id, "location": target, "moved": False}
            before = self.current_placement()
            placement = {**before, nf_id: target}
            problem = parse_problem(self.problem(list(self.state.nfs.values())))
            full = {n.id: placement.get(n.id, problem.allowed(n)[0]) for n in problem.nodes}
            ev = evaluate(problem, full)
            if ev.violations:
                raise Conflict(f"moving {nf_id} to {target} violates " + "; ".join(ev.violations), "to")
            ms = self.migrate(nf, target)
            self.cfg.dampener.record(self.clock(), before)  # an operator's move counts for dampening too
            return {"id": nf_id, "location": target, "moved": True, "remap_ms": ms}

    def scale(self, nf_id: str, n: int) -> dict:
        """Resize `nf_id` to `n` instances behind its one virtual port (migration.scale): out = start the new
        instances where `place_instances` puts them, wait /health, spread the vport over all (OneSwitch select
        group, make-before-break); in = take the leaving ones out of the set, drain, stop, release.

        409 when the location cannot take them or OneSwitch cannot spread a vport; AgentError (502 when
        OneSwitch refused, 500 otherwise) leaves the previous instance set serving.
        """
        from migration.protocol import MigrationConfig
        from migration.scale import NoRoom, ScaleError
        from migration.scale import scale as run_scale
        from nf_agent.agent.portmap import ScaleUnsupported

        with self.lock:
            nf = self._nf(nf_id)
            before = len(nf.instances)
            if n == before:
                return self._scale_view(nf, changed=False)
            if n > before:
                try:
                    locs = self._scale_locations(nf, n)
                except NoRoom as exc:
                    raise Conflict(str(exc), "instances") from None
            else:
                locs = []

            def allocate(k: int) -> list[Instance]:
                out: list[Instance] = []
                for loc in locs[:k]:
                    used = self._used_ofports(loc) | {i.ofport for i in out if i.switch == loc}
                    out.append(self.runtime.new_instance(nf, loc, self.state.new_instance_seq(), used))
                return out

            cfg = MigrationConfig(drain_timeout_s=self.drain_s)
            try:
                res, insts = run_scale(nf, n, self.runtime, self.mapper, allocate, cfg)
            except ScaleError as exc:
                self.counters.scale_failures += 1
                self._event(
                    "nf-scale-failed", nf=nf.id, to=n, step=exc.step, steps=exc.result.to_json()["steps"]
                )
                if isinstance(exc.cause, ScaleUnsupported):
                    raise NotImplementedYet(str(exc), "instances") from None
                raise AgentError(str(exc), 502 if exc.step == "set" else 500) from None
            nf.instances = insts
            nf.location = insts[0].location
            self.counters.scales += 1
            self.last_scale = res
            self._event(
                "nf-scale", nf=nf.id, before=before, after=n, added=res.added, removed=res.removed,
                set_ms=res.set_ms, duration_ms=round(res.duration_ms, 1), drained=res.drained,
                cleanup_errors=res.cleanup_errors,
            )  # fmt: skip
            self._save()
            return {**self._scale_view(nf, changed=True), "set_ms": res.set_ms}

    def _scale_view(self, nf: Nf, changed: bool) -> dict:
        return {
            "id": nf.id,
            "instances": len(nf.instances),
            "locations": [i.location for i in nf.instances],
            "changed": changed,
        }

    def _scale_locations(self, nf: Nf, n: int) -> list[str]:
        """Where the n - current new instances go: `migration.scale.place_instances` on each sNIC's headroom
        once the NF is spread evenly over n instances: capacity minus the predicted load of everything else
        there minus one instance's share (`per_instance_cost`) per instance of the NF staying there. The
        model charges the NF where its instances run (one vertex per location when they span several), so
        its own vertices' cost there is what the resize replaces."""
        from migration.scale import per_instance_cost, place_instances

        problem = parse_problem(self.problem(list(self.state.nfs.values())))
        current = self.current_placement()
        full = {x.id: current.get(x.id, problem.allowed(x)[0]) for x in problem.nodes}
        ev = evaluate(problem, full)
        ncost, loads = problem.nic_costs(), problem.loads()
        own = [i for i, x in enumerate(problem.nodes) if graph.vertex_nf(x.id) == nf.id]
        prof = self.cfg.profiles.get(nf.type, {})
        share = per_instance_cost(
            prof.get("r_nic", 0.0), float(sum(loads[i] for i in own)), n, prof.get("b_nic", 0.0)
        )
        counts = graph.instance_counts(nf)
        free = {}
        for s in self.cfg.snics:
            mine = sum(float(ncost[i]) for i in own if full[problem.nodes[i].id] == s.id)
            free[s.id] = (
                s.capacity - (float(ev.snic_load.get(s.id, 0.0)) - mine) - share * counts.get(s.id, 0)
            )
        cost = {s.id: share for s in self.cfg.snics}
        return place_instances(n - len(nf.instances), self.locations, free, cost, nf.pin)

    # -- monitoring ------------------------------------------------------------------------------------
    def wiring(self) -> Wiring:
        return Wiring(
            nf_ports={(i.switch, i.port_if): n.id for n in self.state.nfs.values() for i in n.instances},
            pcie_ports=self.runtime.pcie_ports(),
            chains={n.id: self._chain(n) for n in self.state.nfs.values()},
        )

    def _chain(self, nf: Nf) -> tuple[str | None, str | None]:
        default = graph.default_endpoint(self.cfg.snics)
        return nf.src or default, nf.dst or default

    def sample(self) -> Measurement | None:
        """Take one sample of counters now (clock) and update the measurement."""
        from nf_agent.agent.runtime import cpu_seconds

        with self.lock:
            nfs = list(self.state.nfs.values())
            wiring = self.wiring()
        cpu: dict[str, float] = {loc: 0.0 for loc in self.locations}
        stats: dict[str, dict] = {}
        for n in nfs:
            for i in n.instances:
                cpu[i.location] = cpu.get(i.location, 0.0) + cpu_seconds([p for p in [i.pid] if p])
                st = self.runtime.stats(i)
                if st:
                    agg = stats.setdefault(n.id, {"rx": 0, "tx": 0})
                    for k in ("rx", "tx"):
                        agg[k] += int(st.get("counters", st).get(k, 0) or 0)
        sample = Sample(self.clock(), self.runtime.port_counters(), cpu, stats)
        return self.monitor.update(sample, wiring)

    def supervise(self) -> None:
        """Restart dead NF processes under the restart policy; mark them failed when it is exhausted.

        With `cfg.failover`, a dead instance is instead replaced by a new one and the vport remapped
        (`failover`), which also covers an instance whose namespace or port is gone.
        """
        with self.lock:
            for nf in list(self.state.nfs.values()):
                for inst in list(nf.instances):
                    if inst.state == "failed" or self.runtime.alive(inst):
                        continue
                    if self.cfg.failover:
                        try:
                            self.failover(nf.id, inst.id, "dead")
                            continue
                        except AgentError as exc:
                            log.error(
                                "failover failed, restarting in place", extra={"fields": {"error": str(exc)}}
                            )
                    now = self.clock()
                    times = [
                        t for t in self._restart_times.get(inst.id, []) if now - t < self.cfg.restart.window
                    ]
                    if len(times) >= self.cfg.restart.max_restarts:
                        inst.state = "failed"
                        self._event("nf-failed", nf=nf.id, instance=inst.id)
                        self._save()
                        continue
                    times.append(now)
                    self._restart_times[inst.id] = times
                    try:
                        self._restart_in_place(nf, inst)
                        self._event("nf-restart", nf=nf.id, instance=inst.id, restarts=inst.restarts)
                    except Exception as exc:  # noqa: BLE001 - retried on the next round
                        inst.state = "starting"
                        log.error(
                            "restart failed", extra={"fields": {"instance": inst.id, "error": str(exc)}}
                        )
                    self._save()

    def probe(self, health_timeout: float = 0.1) -> dict[str, tuple[bool, bool]]:
        """Every instance's (alive, healthy), for the failover watchdog (migration.failover.Watchdog); a
        /health answer slower than `health_timeout` s counts as a miss."""
        with self.lock:
            insts = [i for n in self.state.nfs.values() for i in n.instances if i.state != "failed"]
        return {i.id: (self.runtime.alive(i), self.runtime.healthy(i, health_timeout)) for i in insts}

    def instance_pids(self) -> dict[str, int]:
        """{instance: pid} of the NF processes the failover watchdog watches for an exit."""
        with self.lock:
            return {
                i.id: i.pid
                for n in self.state.nfs.values()
                for i in n.instances
                if i.state != "failed" and i.pid
            }

    def start_standby(self, nf_id: str, location: str | None = None) -> Instance:
        """Pre-start a standby instance of `nf_id` (not mapped, no traffic) for a faster failover."""
        with self.lock:
            nf = self._nf(nf_id)
            if nf_id in self.standbys:
                raise Conflict(f"NF {nf_id} already has a standby", "standby")
            loc = location or nf.location
            inst = self.runtime.new_instance(nf, loc, self.state.new_instance_seq(), self._used_ofports(loc))
            self._start(nf, inst)
            self.standbys[nf_id] = inst
            self._event("nf-standby", nf=nf_id, instance=inst.id, location=loc)
            return inst

    def stop_standby(self, nf_id: str) -> None:
        """Stop and release `nf_id`'s standby (404 when it has none)."""
        with self.lock:
            self._nf(nf_id)
            inst = self.standbys.pop(nf_id, None)
            if inst is None:
                raise NotFound(f"NF {nf_id!r} has no standby")
            self._stop_quietly(inst)
            self._event("nf-standby-stopped", nf=nf_id, instance=inst.id)

    def restart_nf(self, nf_id: str) -> dict:
        """Restart every instance of `nf_id` in place (its namespace and port), its restart budget reset: how
        an operator revives a `failed` NF once its cause is fixed, or restarts a misbehaving one. An instance
        that does not come up is marked failed and the call is a 502 naming it (the others stay restarted)."""
        with self.lock:
            nf = self._nf(nf_id)
            done, errors = [], []
            for inst in nf.instances:
                self._restart_times.pop(inst.id, None)
                try:
                    self._restart_in_place(nf, inst)
                except Exception as exc:  # noqa: BLE001 - reported in the answer and the event
                    inst.state = "failed"
                    errors.append(f"{inst.id}: {exc}")
                    continue
                done.append(inst.id)
            self._event("nf-restart", nf=nf.id, instances=done, errors=errors, manual=True)
            self._save()
        if errors:
            raise AgentError(f"restart of {nf_id}: {'; '.join(errors)}", 502)
        return {"id": nf_id, "restarted": done}

    def _restart_in_place(self, nf: Nf, inst: Instance) -> None:
        """Stop the instance's processes and start them again in its namespace, on its port; counted as a
        restart once it answers /health (raises what `start_processes` raises)."""
        self.runtime.stop_processes(inst)
        self.runtime.start_processes(nf, inst)
        inst.restarts += 1
        self.counters.restarts += 1

    def _used_ofports(self, loc: str) -> set[int]:
        return self.state.used_ofports(loc) | {i.ofport for i in self.standbys.values() if i.switch == loc}

    def failover(self, nf_id: str, inst_id: str, reason: str) -> dict:
        """Replace instance `inst_id` of `nf_id` (dead or stuck) by its running standby if it has one, else by a
        new instance at the same location, and remap the vport to it (migration.failover). Unknown ids
        (already replaced) are a no-op."""
        from migration.failover import FailoverError
        from migration.failover import failover as run_failover

        with self.lock:
            nf = self.state.nfs.get(nf_id)
            failed = next((i for i in nf.instances if i.id == inst_id), None) if nf else None
            if nf is None or failed is None:
                return {}
            new = self.standbys.pop(nf_id, None)
            if new is not None and not self.runtime.alive(new):
                self._stop_quietly(new)
                new = None
            standby = new is not None
            if new is None:
                new = self.runtime.new_instance(
                    nf, failed.location, self.state.new_instance_seq(), self._used_ofports(failed.location)
                )
            if len(nf.instances) > 1:
                return self._failover_in_set(nf, failed, new, reason, standby)

            def switched() -> None:  # traffic is on the replacement: record it before the old one is released
                nf.instances = [new if i.id == inst_id else i for i in nf.instances]
                nf.location = new.location

            try:
                res = run_failover(
                    nf, failed, new, self.runtime, self.mapper, reason, standby=standby, on_switched=switched
                )
            except FailoverError as exc:
                if standby:
                    self.standbys[nf_id] = new
                self._event("nf-failover-failed", nf=nf_id, instance=inst_id, reason=reason, error=str(exc))
                raise AgentError(str(exc), 502) from None
            self.counters.failovers += 1
            self._event("nf-failover", **res.to_json())
            self._save()
            return res.to_json()

    def _failover_in_set(self, nf: Nf, failed: Instance, new: Instance, reason: str, standby: bool) -> dict:
        """One of several instances failed: the replacement takes its place in the vport's set; when no
        replacement starts, the failed one is only removed from the set (the others carry its flows)."""
        t0 = time.monotonic()
        others = [i for i in nf.instances if i.id != failed.id]
        replaced = None
        if standby or self._try_start(nf, new):
            replaced = new
        want = [replaced if i.id == failed.id else i for i in nf.instances] if replaced else others
        try:
            ms = self.mapper.set_instances(nf.vport, [(i.switch, i.ofport) for i in want])
        except PortMapError as exc:
            if replaced is not None and not standby:
                self._stop_quietly(replaced)
            elif standby:
                self.standbys[nf.id] = new
            self._event("nf-failover-failed", nf=nf.id, instance=failed.id, reason=reason, error=str(exc))
            raise AgentError(f"failover of {failed.id}: {exc}", 502) from None
        errors = []
        try:
            self.runtime.stop(failed)
        except Exception as exc:  # noqa: BLE001 - traffic already moved; reported
            errors.append(f"stopping {failed.id}: {exc}")
        nf.instances = want
        nf.location = nf.instances[0].location
        self.counters.failovers += 1
        out = {
            "nf": nf.id, "failed": failed.id, "replacement": replaced.id if replaced else None,
            "reason": reason, "used_standby": standby, "set_ms": ms, "instances": len(nf.instances),
            "total_ms": round((time.monotonic() - t0) * 1000, 2), "cleanup_errors": errors,
        }  # fmt: skip
        self._event("nf-failover", **out)
        self._save()
        return out

    def _try_start(self, nf: Nf, inst: Instance) -> bool:
        try:
            self.runtime.start(nf, inst)
            return True
        except Exception as exc:  # noqa: BLE001 - runtime.start cleaned up; the set shrinks instead
            log.error("replacement did not start", extra={"fields": {"instance": inst.id, "error": str(exc)}})
            return False

    # -- re-placement ----------------------------------------------------------------------------------
    def run_placement(self, force: bool = False) -> Decision:
        """Solve with the measured matrix; migrate the chosen NFs when hysteresis and dampening allow."""
        with self.lock:
            current = self.current_placement()
            if not current:
                d = Decision(False, "no NFs to place")
            else:
                d = decide(
                    self.problem(list(self.state.nfs.values())),
                    current,
                    self.solver,
                    self.cfg.dampener,
                    self.clock(),
                    force,
                )
                self.counters.solves += 1
            done = []
            if d.go:
                now, hold = self.clock(), self.cfg.dampener.window
                self.refused_moves = {k: t for k, t in self.refused_moves.items() if now - t < hold}
                for mv in d.moves:
                    if len(self.state.nfs[mv["id"]].instances) > 1:  # a scaled-out NF is not moved
                        d.why += f"; {mv['id']} not moved: it runs several instances"
                        continue
                    refused_at = self.refused_moves.get((mv["id"], mv["to"]))
                    if refused_at is not None:
                        d.why += (
                            f"; {mv['id']} not moved to {mv['to']}: OneSwitch did not take that move "
                            f"{now - refused_at:.0f}s ago (tried again {hold:g}s after)"
                        )
                        continue
                    try:
                        self.migrate(self.state.nfs[mv["id"]], mv["to"])
                        # the move's steps with their times (ms) go back with the decision
                        done.append({**mv, "migration": self.last_migration.to_json()})
                    except AgentError as exc:  # counted in migration_failures by migrate()
                        d.why += f"; migrating {mv['id']} failed: {exc}"
                        if exc.status == 502:
                            self.refused_moves[(mv["id"], mv["to"])] = now
                if done:
                    self.cfg.dampener.record(self.clock(), current)
                d.moves = done if done else d.moves
            self.last_decision = d
            self._event("placement-run", go=d.go, why=d.why, moves=d.moves)
            self._save()
            return d

    # -- restart -------------------------------------------------------------------------------------------
    def reconcile(self) -> list[str]:
        """After an agent restart: adopt running instances, restart dead ones, re-map missing ports.

        Running NFs and mappings that match the saved state are left untouched (no traffic disturbed).
        Returns what was done, one line per action.
        """
        done = []
        with self.lock:
            try:
                mapped = self.mapper.mapped()
            except PortMapError as exc:
                raise AgentError(f"cannot read OneSwitch's port map: {exc}", 502) from None
            for nf in self.state.nfs.values():
                for inst in nf.instances:
                    if self.runtime.alive(inst):
                        inst.state = "running"
                        continue
                    try:
                        if self.runtime.plugged(inst):  # only the process died: restart it in place
                            self.runtime.stop_processes(inst)
                            self.runtime.start_processes(nf, inst)
                        else:
                            # Its port is gone: plug it in again on a port nothing else has. Not its old one:
                            # a warm slot made meanwhile may hold that (OVS then gives another number).
                            self.runtime.stop(inst)
                            inst.ofport = self.runtime.free_ofport(
                                inst.switch, self._used_ofports(inst.switch)
                            )
                            self.runtime.start(nf, inst)
                        done.append(f"restarted {inst.id}")
                    except Exception as exc:  # noqa: BLE001 - the supervisor retries
                        inst.state = "starting"
                        done.append(f"could not restart {inst.id}: {exc}")
                if len(nf.instances) > 1:
                    want_all = [(i.switch, i.ofport) for i in nf.instances]
                    try:
                        have_all = self.mapper.instances().get(nf.vport)
                        if have_all is None:
                            self.mapper.map(nf.vport, *want_all[0], nf.id)
                        if have_all != want_all:
                            self.mapper.set_instances(nf.vport, want_all)
                            done.append(f"set {len(want_all)} instances of vport {nf.vport}")
                    except PortMapError as exc:
                        done.append(f"could not set the instances of vport {nf.vport}: {exc}")
                elif nf.instances:
                    want = (nf.instances[0].switch, nf.instances[0].ofport)
                    have = mapped.get(nf.vport)
                    try:
                        if have is None:
                            self.mapper.map(nf.vport, *want, nf.id)
                            done.append(f"mapped vport {nf.vport}")
                        elif have != want:
                            self.mapper.remap(nf.vport, *want)
                            done.append(f"remapped vport {nf.vport}")
                    except PortMapError as exc:
                        done.append(f"could not map vport {nf.vport}: {exc}")
            self._event("reconcile", actions=done)
            self._save()
        return done

    # -- views -----------------------------------------------------------------------------------------
    def placement_view(self) -> dict:
        with self.lock:
            current = self.current_placement()
            nfs = list(self.state.nfs.values())
            problem_json = self.problem(nfs)
            predicted = None
            if nfs:
                problem = parse_problem(problem_json)
                full = {n.id: current.get(n.id, problem.allowed(n)[0]) for n in problem.nodes}
                ev = evaluate(problem, full)
                predicted = {
                    "host_cores": float(ev.host_cost),
                    "snic_load": {k: float(v) for k, v in ev.snic_load.items()},
                    # the link's load: the NFs' crossings plus the background, comparable to `measured`
                    "pcie_gbps": {k: {d: float(x) for d, x in v.items()} for k, v in ev.pcie.items()},
                    "background_gbps": {
                        s.id: {d: float(x) for d, x in s.background.items()} for s in problem.snics
                    },
                    "violations": ev.violations,
                    "split": self._split_view(nfs, problem),
                }
            m = self.monitor.measurement
            return {
                "locations": current,
                "predicted": predicted,
                "measured": m.to_json() if m else None,
                "traffic": problem_json["edges"],
                "last_solve": self.last_decision.to_json() if self.last_decision else None,
                "history": self.state.history[-20:],
            }

    def _split_view(self, nfs: list[Nf], problem) -> dict:
        """Per NF running at several locations: each location's instances, shares of the NF's traffic (which
        directions measured), load and predicted cost there (host cores or sNIC units)."""
        m = self.monitor.measurement
        loads, hcost, ncost = problem.loads(), problem.host_costs(), problem.nic_costs()
        out = {}
        for nf in nfs:
            sp = graph.nf_split(nf, m.nf_split.get(nf.id) if m else None)
            if sp is None:
                continue
            locs = sp.to_json()
            for loc, row in locs.items():
                i = problem.index[graph.split_vertex(nf.id, loc)]
                row["load_gbps"] = float(loads[i])
                row |= {"host_cores": float(hcost[i])} if loc == HOST else {"snic_units": float(ncost[i])}
            out[nf.id] = {"measured": list(sp.measured), "locations": locs}
        return out

    def ports(self) -> list[dict]:
        with self.lock:
            out = [{"vport": v.vport, "kind": "vm", "owner": v.id} for v in self.state.vms.values()]
            out += [{"vport": n.vport, "kind": "nf", "owner": n.id} for n in self.state.nfs.values()]
            out += [
                {"vport": nm.vport_eth(int(s.id[4:]), j), "kind": "eth", "owner": graph.eth_vertex(s.id, j)}
                for s in self.cfg.snics
                for j in range(s.eth_ports)
            ]
            return sorted(out, key=lambda p: p["vport"])

    def health(self) -> dict:
        """Each NF's process health, and the state tier's: while Redis does not answer, every stateless NF
        fails closed (drops what needs state), so it is `degraded` and the agent not ok, although its
        process is alive (the failover watchdog, which looks at processes, rightly does nothing)."""
        reachable = self.runtime.store_reachable()  # outside the lock: a hung Redis costs its timeout
        store = {None: "local", True: "ok", False: "unreachable"}[reachable]
        with self.lock:
            if store != self.store_state:
                if store == "unreachable" or self.store_state == "unreachable":
                    self._event("store-" + ("down" if store == "unreachable" else "up"), store=store)
                self.store_state = store
            nfs = {
                n.id: (
                    "healthy"
                    if n.instances and all(self.runtime.healthy(i) for i in n.instances)
                    else "unhealthy"
                )
                for n in self.state.nfs.values()
            }
        if store == "unreachable":
            nfs = {k: "degraded: state tier unreachable" if v == "healthy" else v for k, v in nfs.items()}
        return {"ok": store != "unreachable" and all(v == "healthy" for v in nfs.values()), "nfs": nfs,
                "store": store}  # fmt: skip
