"""The balancing job: each round, every NF with more than one instance (and `balance` on, the default) gets
new select bucket weights when `nf_agent.balance.decide` says so, from the packets each instance received
since the previous round (its own rx counter). The change is applied order-preserving (migration.reweight:
the instance that gains flows holds them until the others flushed). I/O edge: the decision itself is pure."""

from __future__ import annotations

from domain.errors import OperationFailed, PortMapError
from domain.model import Nf
from migration.protocol import MigrationConfig, rx_count
from migration.reweight import reweight
from nf_agent.balance import BalanceDecision, BalancePolicy, BalanceState, decide, even, note_instances
from nf_agent.context import AgentContext
from nf_agent.moves import Moves


def _key(nf: Nf) -> tuple[str, ...]:
    """The instance set the weights belong to, in bucket order (an instance restarted on another port is a
    new set: OneSwitch's weights went back to equal with it)."""
    return tuple(f"{i.id}@{i.switch}:{i.ofport}" for i in nf.instances)


class Balancer:
    def __init__(self, ctx: AgentContext, moves: Moves, policy: BalancePolicy | None = None):
        self.ctx, self.moves = ctx, moves
        self.policy = policy or BalancePolicy()
        self.states: dict[str, BalanceState] = {}  # nf id -> the hysteresis' memory
        self.weights: dict[str, tuple[tuple[str, ...], list[int]]] = {}  # nf id -> (instance set, weights)
        # nf id -> (clock, instance id -> rx packets) of the rounds within the window, oldest first
        self.rx: dict[str, list[tuple[float, dict[str, int]]]] = {}
        self.last: dict[str, BalanceDecision] = {}  # nf id -> the latest decision (GET views, events)

    def _counts(self, nf: Nf) -> dict[str, int] | None:
        """Each instance's rx counter now; None if one has no reading."""
        out = {}
        for i in nf.instances:
            v = rx_count(self.ctx.runtime.stats(i))
            if v is None:
                return None
            out[i.id] = v
        return out

    def weights_of(self, nf: Nf) -> list[int]:
        """The weights in force for `nf`'s current instances (equal after any change of the set; at the first
        sight of the NF, e.g. after an agent restart, what OneSwitch has)."""
        if nf.id not in self.weights:
            self.weights[nf.id] = (_key(nf), self._installed(nf))
        key, w = self.weights[nf.id]
        return list(w) if key == _key(nf) else even(len(nf.instances))

    def _installed(self, nf: Nf) -> list[int]:
        try:
            w = self.ctx.mapper.weights().get(nf.vport) or []
        except PortMapError:
            w = []
        return list(w) if len(w) == len(nf.instances) else even(len(nf.instances))

    def tick(self) -> dict[str, BalanceDecision]:
        """One round over the scaled-out NFs; returns the decisions that changed weights."""
        ctx = self.ctx
        changed: dict[str, BalanceDecision] = {}
        with ctx.lock:
            nfs = [nf for nf in ctx.state.nfs.values() if len(nf.instances) > 1 and nf.balance]
        live = {nf.id for nf in nfs}
        for memo in (self.states, self.weights, self.rx, self.last):
            for gone in set(memo) - live:
                memo.pop(gone, None)
        for nf in nfs:
            with ctx.lock:
                if ctx.state.nfs.get(nf.id) is not nf or len(nf.instances) < 2:
                    continue  # deleted or scaled in meanwhile
                d = self._round(nf)
            if d is not None:
                changed[nf.id] = d
        return changed

    def _round(self, nf: Nf) -> BalanceDecision | None:
        ctx = self.ctx
        now = ctx.clock()
        key = _key(nf)
        state = self.states.setdefault(nf.id, BalanceState())
        counts = self._counts(nf)
        if counts is None:
            note_instances(state, key, now)
            return None  # no reading: this round says nothing; the window goes on from the last one
        snaps = self.rx.setdefault(nf.id, [])
        if snaps and (
            snaps[-1][1].keys() != counts.keys() or any(v < snaps[-1][1][i] for i, v in counts.items())
        ):
            snaps.clear()  # a new instance, or one restarted (its counter went back): a new window
        snaps.append((now, counts))
        while len(snaps) > 2 and now - snaps[1][0] >= self.policy.window_s:
            snaps.pop(0)
        t_old, old = snaps[0]
        if now - t_old <= 0:
            note_instances(state, key, now)
            return None
        # The load over the window (up to window_s): one round's counts can be off (a throttled instance
        # counts its ring only when it runs), which must not make a change.
        deltas = [counts[i.id] - old[i.id] for i in nf.instances]
        d = decide(key, deltas, self.weights_of(nf), state, now, self.policy)
        self.last[nf.id] = d
        if d.weights is None:
            return None
        gainer = nf.instances[d.gainer] if d.gainer is not None else None
        cfg = MigrationConfig(drain_timeout_s=ctx.drain_s, buffer_types=self.moves.buffer_types)
        try:
            res = reweight(nf, d.weights, [gainer] if gainer else [], ctx.runtime, ctx.mapper, cfg, ctx.clock)
        except (PortMapError, OperationFailed) as exc:  # the old weights stay; tried again after the cooldown
            ctx.event("nf-balance-failed", nf=nf.id, weights=d.weights, error=str(exc))
            return None
        self.weights[nf.id] = (key, list(d.weights))
        # The next window starts after the change: the packets before it say nothing of the new spread.
        after = self._counts(nf)
        self.rx[nf.id] = [(ctx.clock(), after)] if after is not None else []
        ctx.event(
            "nf-balance", nf=nf.id, weights=d.weights, why=d.why, shares=[round(s, 3) for s in d.shares or []],
            held=res.held, flushed=res.flushed, set_ms=res.set_ms,
        )  # fmt: skip
        return d
