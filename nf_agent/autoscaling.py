"""The autoscaling job: each round, every NF with an autoscale policy is resized to what
`nf_agent.autoscale.decide` says, from the monitor's latest measurement and the placement's room (I/O edge:
the decision itself is pure)."""

from __future__ import annotations

from domain.errors import Conflict, NotFound, NotSupported, OperationFailed
from migration.scale import NoRoom
from nf_agent.autoscale import (
    AutoscalePolicy,
    Hysteresis,
    Inputs,
    LoadModel,
    ScaleDecision,
    ScaleState,
    decide,
)
from nf_agent.context import AgentContext
from nf_agent.moves import Moves


class Autoscaler:
    def __init__(self, ctx: AgentContext, moves: Moves, hysteresis: Hysteresis | None = None):
        self.ctx, self.moves = ctx, moves
        self.hysteresis = hysteresis or Hysteresis()
        self.states: dict[str, ScaleState] = {}  # nf id -> the hysteresis' timers
        self.last: dict[str, ScaleDecision] = {}  # nf id -> the latest decision (GET views, events)

    def room(self, nf, most: int) -> int:
        """How many more instances (up to `most`) the placement has room for: host and sNIC headroom as a
        manual scale-out would place them (Moves.scale_locations)."""
        n = len(nf.instances)
        for k in range(most, 0, -1):
            try:
                self.moves.scale_locations(nf, n + k)
                return k
            except NoRoom:
                continue
        return 0

    def tick(self) -> dict[str, ScaleDecision]:
        """One round over the NFs with a policy; returns the decisions that changed an instance count."""
        ctx = self.ctx
        now = ctx.clock()
        m = ctx.monitor.measurement
        changed: dict[str, ScaleDecision] = {}
        with ctx.lock:
            nfs = [nf for nf in ctx.state.nfs.values() if nf.autoscale]
        for gone in set(self.states) - {nf.id for nf in nfs}:
            self.states.pop(gone, None)
            self.last.pop(gone, None)
        for nf in nfs:
            pol = AutoscalePolicy(**nf.autoscale)
            n = len(nf.instances)
            prof = ctx.cfg.profiles.get(nf.type, {})
            load = m.nf_load.get(nf.id, 0.0) if m is not None else None
            model = LoadModel(prof.get("r_host", 0.0), prof.get("b_host", 0.0))
            # The room costs a model evaluation per count tried: only asked when a scale-out may follow.
            hot = n < pol.min or (
                load is not None and model.util(load, n) > pol.target_util * (1 + self.hysteresis.band)
            )
            inp = Inputs(pol, n, load, model, self.room(nf, max(0, pol.max - n)) if hot else 0)
            d = decide(inp, self.states.setdefault(nf.id, ScaleState()), now, self.hysteresis)
            self.last[nf.id] = d
            if d.target == n:
                continue
            try:
                self.moves.scale(nf.id, d.target)
            except (
                Conflict,
                NotFound,
                NotSupported,
                OperationFailed,
            ) as exc:  # the NF keeps its instances; tried again next round
                ctx.event("nf-autoscale-failed", nf=nf.id, to=d.target, why=d.why, error=str(exc))
                continue
            ctx.event("nf-autoscale", nf=nf.id, before=n, after=d.target, why=d.why, util=d.util)
            changed[nf.id] = d
        return changed
