"""The re-placement loop: sample the counters into a measurement, solve under it, and move the NFs the decision
names when hysteresis and dampening allow (nf_agent/decide.py decides; `Moves.migrate` moves)."""

from __future__ import annotations

from domain.errors import DependencyFailed, OperationFailed
from domain.model import Nf
from nf_agent import graph
from nf_agent.context import AgentContext
from nf_agent.decide import Decision, decide
from nf_agent.monitor import Measurement, Sample, Wiring
from nf_agent.moves import Moves
from nf_agent.placement_model import PlacementModel


class Replacement:
    def __init__(self, ctx: AgentContext, model: PlacementModel, moves: Moves):
        self.ctx = ctx
        self.model = model
        self.moves = moves
        # (NF, target) -> when OneSwitch did not take that move (it refused the prepare or remap, e.g. a
        # controller rule it cannot carry from there, or did not answer): not retried within the dampening
        # window, so a placement it cannot reach does not start and stop an instance at every run.
        self.refused_moves: dict[tuple[str, str], float] = {}

    # -- monitoring ------------------------------------------------------------------------------------
    def wiring(self) -> Wiring:
        ctx = self.ctx
        return Wiring(
            nf_ports={(i.switch, i.port_if): n.id for n in ctx.state.nfs.values() for i in n.instances},
            pcie_ports=ctx.runtime.pcie_ports(),
            pcie_snic_ports=ctx.runtime.pcie_snic_ports(),
            chains={n.id: self._chain(n) for n in ctx.state.nfs.values()},
        )

    def _chain(self, nf: Nf) -> tuple[str | None, str | None]:
        default = graph.default_endpoint(self.ctx.cfg.snics)
        return nf.src or default, nf.dst or default

    def sample(self) -> Measurement | None:
        """Take one sample of counters now (clock) and update the measurement."""
        ctx = self.ctx
        with ctx.lock:
            nfs = list(ctx.state.nfs.values())
            wiring = self.wiring()
        cpu: dict[str, float] = {loc: 0.0 for loc in ctx.locations}
        stats: dict[str, dict] = {}
        for n in nfs:
            for i in n.instances:
                cpu[i.location] = cpu.get(i.location, 0.0) + ctx.runtime.cpu_seconds(i)
                st = ctx.runtime.stats(i)
                if st:
                    agg = stats.setdefault(n.id, {"rx": 0, "tx": 0})
                    for k in ("rx", "tx"):
                        agg[k] += int(st.get("counters", st).get(k, 0) or 0)
        t = ctx.clock()
        ports, port_t = ctx.runtime.port_counters_timed(ctx.clock)
        sample = Sample(t, ports, cpu, stats, port_t)
        return ctx.monitor.update(sample, wiring)

    # -- re-placement ----------------------------------------------------------------------------------
    def run_placement(self, force: bool = False) -> Decision:
        """Solve with the measured matrix; migrate the chosen NFs when hysteresis and dampening allow."""
        ctx = self.ctx
        with ctx.lock:
            current = self.model.current_placement()
            if not current:
                d = Decision(False, "no NFs to place")
            else:
                d = decide(self.model.all_nfs(), current, ctx.solver, ctx.cfg.dampener, ctx.clock(), force)
                ctx.counters.solves += 1
            done = []
            if d.go:
                now, hold = ctx.clock(), ctx.cfg.dampener.window
                self.refused_moves = {k: t for k, t in self.refused_moves.items() if now - t < hold}
                for mv in d.moves:
                    if len(ctx.state.nfs[mv["id"]].instances) > 1:  # a scaled-out NF is not moved
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
                        self.moves.migrate(ctx.state.nfs[mv["id"]], mv["to"])
                        # the move's steps with their times (ms) go back with the decision
                        done.append({**mv, "migration": self.moves.last_migration.to_json()})
                    except OperationFailed as exc:  # counted in migration_failures by migrate()
                        d.why += f"; migrating {mv['id']} failed: {exc}"
                        if isinstance(exc, DependencyFailed):
                            self.refused_moves[(mv["id"], mv["to"])] = now
                if done:
                    ctx.cfg.dampener.record(ctx.clock(), current)
                d.moves = done if done else d.moves
            ctx.last_decision = d
            ctx.event("placement-run", go=d.go, why=d.why, moves=d.moves)
            ctx.save()
            return d
