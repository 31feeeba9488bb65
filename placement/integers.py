"""Working integers for the solvers: exact when they fit, else rounded on a power-of-two grid with a bound.

Inputs are exact rationals (model.py). Their common denominators can make the integer coefficients far
wider than the 60 bits CP-SAT and int64 arrays hold (a measured ratio on a 10^-9 grid times a traffic
counter on a 10^-9 grid is already ~10^20 per NF). Then each quantity is divided by a power of two 2^s:
- an objective (host cost): rounded to nearest, so any placement's cost moves by at most 1/2 unit per
  term; the solver's optimum is then within `terms` units (x 2^s) of the exact optimum, reported;
- a budget row: coefficients rounded up, the budget down, so every placement the solver accepts meets the
  exact budget (conservative); placements using the last `terms` units (x 2^s) of it may be missed.
WORK_BITS leaves room above the totals for the engine's folded tie-break objectives and CP-SAT's checks.
"""

from __future__ import annotations

from dataclasses import dataclass

WORK_BITS = 44  # sum of |coefficients| of one objective or row after scaling: below 2^WORK_BITS


@dataclass(frozen=True)
class Scaled:
    ints: list[int]  # the coefficients, each exact value // 2^shift (rounded as described above)
    budget: int | None  # the row's budget on the same grid (rounded down), None for an objective
    shift: int  # 0: exact

    @property
    def exact(self) -> bool:
        return self.shift == 0


def _shift_for(values: list[int], budget: int | None, bits: int) -> int:
    return shift_for_total(sum(abs(v) for v in values) + (abs(budget) if budget is not None else 0), bits)


def shift_for_total(total: int, bits: int = WORK_BITS) -> int:
    """The shift of a row or objective whose |coefficients| (and |budget|) sum to `total`."""
    return max(0, total.bit_length() - bits)


def objective(values: list[int], bits: int = WORK_BITS) -> Scaled:
    """Exact integers `values` as an objective of at most `bits` bits (rounded to nearest)."""
    s = _shift_for(values, None, bits)
    if s == 0:
        return Scaled(list(values), None, 0)
    half = 1 << (s - 1)
    return Scaled([(v + half) >> s for v in values], None, s)


def row(values: list[int], budget: int, bits: int = WORK_BITS) -> Scaled:
    """Exact integers `values` <= `budget` as a conservative row of at most `bits` bits."""
    s = _shift_for(values, budget, bits)
    if s == 0:
        return Scaled(list(values), budget, 0)
    return Scaled([-((-v) >> s) for v in values], budget >> s, s)  # coefficients up, budget down
