"""Moving an NF to another location and resizing it behind its one virtual port. `Moves.migrate` is the ONE
place that moves an NF; the protocols themselves are in migration/ (protocol, localstate, scale)."""

from __future__ import annotations

from domain.errors import (
    Conflict,
    DependencyFailed,
    NotSupported,
    OperationFailed,
    ScaleUnsupported,
)
from domain.model import Instance, Nf
from migration.localstate import LocalMoveConfig, migrate_local
from migration.protocol import MigrationConfig, MigrationError, MigrationResult
from migration.protocol import migrate as run_protocol
from migration.scale import NoRoom, ScaleError, ScaleResult, per_instance_cost, place_instances
from migration.scale import scale as run_scale
from nf_agent import graph
from nf_agent.context import AgentContext
from nf_agent.placement_model import PlacementModel
from placement import parse_problem

# Steps of a move or resize where OneSwitch refused (or did not answer) rather than the NF or the host failing.
MOVE_SWITCH_STEPS = ("prepare", "remap")
SCALE_SWITCH_STEPS = ("set",)


class Moves:
    def __init__(self, ctx: AgentContext, model: PlacementModel):
        self.ctx = ctx
        self.model = model
        self.last_migration: MigrationResult | None = None
        self.last_scale: ScaleResult | None = None
        # NFs with local state (runtime store "local") move with their state (migration.localstate);
        # False = a plain remap, which loses it (kept for the side-by-side tests and benchmark).
        self.move_state = True
        # NF types whose moves hold the target's packets until the old instance drained (order-preserving;
        # MigrationConfig's default: all); a smaller set is kept for the side-by-side benchmark.
        self.buffer_types = MigrationConfig().buffer_types
        # Scale-ins of those types hold the staying instances' packets too (MigrationConfig.hold_scale_in).
        self.hold_scale_in = MigrationConfig().hold_scale_in

    def migrate(self, nf: Nf, target: str) -> float:
        """Move `nf` to `target` with the protocol of `migration.protocol` (start, ready, make-before-break
        remap, verify, drain, stop, release). Returns the remap time (ms).

        On failure the NF keeps running where it was: DependencyFailed when OneSwitch refused the prepare or
        remap, OperationFailed otherwise.

        Holds the agent's lock throughout: the old instance's exit at the end of the move must not look like a
        death to the failover watchdog (a failover would remap the vport back behind the move's back).
        """
        with self.ctx.lock:
            return self._migrate(nf, target)

    def _migrate(self, nf: Nf, target: str) -> float:
        ctx = self.ctx
        old = list(nf.instances)
        inst = ctx.new_instance(nf, target)
        # The protocol follows where the NF keeps its state: in the tier (a remap suffices) or in its
        # process (OpenNF-style: buffer at the target, move the state, replay).
        local = getattr(ctx.runtime, "store", "redis") == "local" and self.move_state and len(old) == 1
        try:
            if local:
                lcfg = LocalMoveConfig(drain_timeout_s=max(ctx.drain_s, 0.5))
                res = migrate_local(nf, old, inst, ctx.runtime, ctx.mapper, lcfg)
            else:
                cfg = MigrationConfig(drain_timeout_s=ctx.drain_s, buffer_types=self.buffer_types)
                res = run_protocol(nf, old, inst, ctx.runtime, ctx.mapper, cfg)
        except MigrationError as exc:
            ctx.counters.migration_failures += 1
            ctx.event(
                "nf-migrate-failed", nf=nf.id, dst=target, step=exc.step, steps=exc.result.to_json()["steps"]
            )
            failed = DependencyFailed if exc.step in MOVE_SWITCH_STEPS else OperationFailed
            raise failed(str(exc)) from exc.cause  # e.g. the target refused its config (a roll's caller)
        nf.instances = [inst]
        prev, nf.location = nf.location, target
        ctx.counters.migrations += 1
        if not local and nf.config.get("owner_cache") and hasattr(ctx.runtime, "bump_epoch"):
            # Ownership moved: the new owner must not keep reads cached while the old one still wrote (the
            # drain); bumped after the old instance stopped, so nothing writes behind it any more.
            try:
                ctx.runtime.bump_epoch(nf.id, nf.tenant)
                ctx.counters.epoch_bumps += 1
            except Exception as exc:  # noqa: BLE001 - committed move; reported
                res.cleanup_errors.append(f"owner-cache epoch not bumped: {exc}")
        ctx.counters.last_remap_ms = res.remap_ms
        self.last_migration = res
        ctx.event(
            "nf-migrate", nf=nf.id, src=prev, dst=target, remap_ms=res.remap_ms,
            duration_ms=round(res.duration_ms, 1), drained=res.drained, cleanup_errors=res.cleanup_errors,
            buffered=res.buffered, replayed=res.replayed, buffer_overflow=res.buffer_overflow,
            steps=[s.to_json() for s in res.steps],
            **({"protocol": "local-state", "state_bytes": res.state_bytes} if local else {}),
        )  # fmt: skip
        ctx.save()
        return res.remap_ms

    def migrate_request(self, nf_id: str, target: str) -> dict:
        """An operator's move: checked against pin, instance count and the budgets first (Conflict)."""
        ctx = self.ctx
        with ctx.lock:
            nf = ctx.nf(nf_id)
            if nf.pin and nf.pin != target:
                raise Conflict(f"NF {nf_id} is pinned to {nf.pin}", "to")
            if len(nf.instances) > 1:
                raise Conflict(
                    f"NF {nf_id} runs {len(nf.instances)} instances; scale it in to 1 before moving it", "to"
                )
            if nf.location == target:
                return {"id": nf_id, "location": target, "moved": False}
            before = self.model.current_placement()
            problem = parse_problem(self.model.all_nfs())
            _, ev = self.model.evaluate(problem, {**before, nf_id: target})
            if ev.violations:
                raise Conflict(f"moving {nf_id} to {target} violates " + "; ".join(ev.violations), "to")
            ms = self.migrate(nf, target)
            ctx.cfg.dampener.record(ctx.clock(), before)  # an operator's move counts for dampening too
            return {"id": nf_id, "location": target, "moved": True, "remap_ms": ms}

    def scale(self, nf_id: str, n: int) -> dict:
        """Resize `nf_id` to `n` instances behind its one virtual port (migration.scale): out = start the new
        instances where `place_instances` puts them, wait /health, spread the vport over all (OneSwitch select
        group, make-before-break); in = take the leaving ones out of the set, drain, stop, release.

        Conflict when the location cannot take them, NotSupported when OneSwitch cannot spread a vport;
        DependencyFailed (OneSwitch refused) or OperationFailed leave the previous instance set serving.
        """
        ctx = self.ctx
        with ctx.lock:
            nf = ctx.nf(nf_id)
            before = len(nf.instances)
            if n == before:
                return self._scale_view(nf, changed=False)
            if n > before:
                try:
                    locs = self.scale_locations(nf, n)
                except NoRoom as exc:
                    raise Conflict(str(exc), "instances") from None
            else:
                locs = []

            def allocate(k: int) -> list[Instance]:
                out: list[Instance] = []
                for loc in locs[:k]:
                    used = ctx.used_ofports(loc) | {i.ofport for i in out if i.switch == loc}
                    out.append(ctx.new_instance(nf, loc, used))
                return out

            cfg = MigrationConfig(
                drain_timeout_s=ctx.drain_s, buffer_types=self.buffer_types, hold_scale_in=self.hold_scale_in
            )
            try:
                res, insts = run_scale(nf, n, ctx.runtime, ctx.mapper, allocate, cfg)
            except ScaleError as exc:
                ctx.counters.scale_failures += 1
                ctx.event(
                    "nf-scale-failed", nf=nf.id, to=n, step=exc.step, steps=exc.result.to_json()["steps"]
                )
                if isinstance(exc.cause, ScaleUnsupported):
                    raise NotSupported(str(exc), "instances") from None
                failed = DependencyFailed if exc.step in SCALE_SWITCH_STEPS else OperationFailed
                raise failed(str(exc)) from None
            nf.instances = insts
            nf.location = insts[0].location
            ctx.counters.scales += 1
            self.last_scale = res
            ctx.event(
                "nf-scale", nf=nf.id, before=before, after=n, added=res.added, removed=res.removed,
                set_ms=res.set_ms, duration_ms=round(res.duration_ms, 1), drained=res.drained,
                cleanup_errors=res.cleanup_errors,
            )  # fmt: skip
            ctx.save()
            return {**self._scale_view(nf, changed=True), "set_ms": res.set_ms}

    @staticmethod
    def _scale_view(nf: Nf, changed: bool) -> dict:
        return {
            "id": nf.id,
            "instances": len(nf.instances),
            "locations": [i.location for i in nf.instances],
            "changed": changed,
        }

    def scale_locations(self, nf: Nf, n: int) -> list[str]:
        """Where the n - current new instances go: `migration.scale.place_instances` on each sNIC's headroom
        once the NF is spread evenly over n instances: capacity minus the predicted load of everything else
        there minus one instance's share (`per_instance_cost`) per instance of the NF staying there. The
        model charges the NF where its instances run (one vertex per location when they span several), so
        its own vertices' cost there is what the resize replaces."""
        ctx = self.ctx
        problem = parse_problem(self.model.all_nfs())
        full, ev = self.model.evaluate(problem, self.model.current_placement())
        ncost, loads = problem.nic_costs(), problem.loads()
        own = [i for i, x in enumerate(problem.nodes) if graph.vertex_nf(x.id) == nf.id]
        prof = ctx.cfg.profiles.get(nf.type, {})
        share = per_instance_cost(
            prof.get("r_nic", 0.0), float(sum(loads[i] for i in own)), n, prof.get("b_nic", 0.0)
        )
        counts = graph.instance_counts(nf)
        free = {}
        for s in ctx.cfg.snics:
            mine = sum(float(ncost[i]) for i in own if full[problem.nodes[i].id] == s.id)
            free[s.id] = (
                s.capacity - (float(ev.snic_load.get(s.id, 0.0)) - mine) - share * counts.get(s.id, 0)
            )
        cost = {s.id: share for s in ctx.cfg.snics}
        return place_instances(n - len(nf.instances), ctx.locations, free, cost, nf.pin)
