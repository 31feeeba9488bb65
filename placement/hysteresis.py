"""When to act on a new optimum: hysteresis on the saving and a dampening window (pure; clock passed in)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Dampener:
    """Decides whether a re-placement may run.

    - the saving (current cost - new cost) must exceed `threshold` (absolute, host-cost units) and
      `rel_threshold` of the current cost;
    - no migration within `window` seconds of the previous one;
    - no return to a placement left less than `flap_window` seconds ago (no flapping between two configs).
    """

    threshold: float = 0.0
    rel_threshold: float = 0.05
    window: float = 30.0
    flap_window: float = 300.0
    last_migration: float | None = None
    left: dict[tuple, float] = field(default_factory=dict)  # placement key -> when we left it

    @staticmethod
    def key(placement: dict[str, str]) -> tuple:
        return tuple(sorted(placement.items()))

    def decide(self, now: float, current: dict[str, str], current_cost: float, new: dict[str, str],
               new_cost: float, current_feasible: bool = True) -> tuple[bool, str]:  # fmt: skip
        """(go, why): whether to migrate from `current` to `new` at time `now`.

        A current placement that violates a budget (traffic grew) is always left: hysteresis, dampening
        and anti-flap only hold back moves that merely save cost."""
        if self.key(new) == self.key(current):
            return False, "already optimal"
        if not current_feasible:
            return True, "current placement violates a budget"
        saving = current_cost - new_cost
        if saving <= self.threshold or saving <= self.rel_threshold * abs(current_cost):
            return False, f"saving {saving:.3g} below hysteresis threshold"
        if self.last_migration is not None and now - self.last_migration < self.window:
            return False, f"dampening: last migration {now - self.last_migration:.1f}s ago (< {self.window}s)"
        left_at = self.left.get(self.key(new))
        if left_at is not None and now - left_at < self.flap_window:
            return False, f"anti-flap: that placement was left {now - left_at:.1f}s ago"
        return True, f"saving {saving:.3g}"

    def forced(self, now: float) -> None:
        """Call after a move that was not chosen (NFs failed over from a dead sNIC): the window counts from
        `now`, but returning to the placement left is no flap (it is where the NFs belong once it is back)."""
        self.last_migration = now

    def record(self, now: float, old: dict[str, str]) -> None:
        """Call after a migration from `old` completed at `now`."""
        self.last_migration = now
        self.left[self.key(old)] = now
        self.left = {k: t for k, t in self.left.items() if now - t < self.flap_window}
