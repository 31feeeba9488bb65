"""A box on deterministic work: the same instance and options give the same search path on any machine load.

A search boxed in wall-clock seconds stops earlier on a loaded machine, so its incumbent (and every proof
question after it) changes with the load. A `Work` box counts units the search charges for what it
evaluates (matrix cells of the local search) and stops at a fixed count; the wall-clock deadline stays
only as the outer bound (the user's time limit), which a solve that hits it reports as not proven anyway.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Work:
    """Units of work spent (shared by the boxes carved out of one another) against this box's `limit`,
    inside the wall-clock `deadline` read on `clock`."""

    def __init__(self, limit: float, deadline: float, clock: Callable[[], float] = time.monotonic,
                 _meter: list[int] | None = None):  # fmt: skip
        self.limit = limit
        self.deadline = deadline
        self.clock = clock
        self._meter = _meter if _meter is not None else [0]

    @property
    def spent(self) -> int:
        """Units charged so far (by this box and every box sharing its meter)."""
        return self._meter[0]

    def charge(self, units: int) -> None:
        self._meter[0] += int(units)

    def over(self) -> bool:
        """The box is used up, or the outer deadline has passed."""
        return self._meter[0] >= self.limit or self.clock() > self.deadline

    def share(self, fraction: float) -> Work:
        """A box of `fraction` of what is left of this one, on the same meter and deadline."""
        left = max(0.0, self.limit - self._meter[0])
        return Work(self._meter[0] + fraction * left, self.deadline, self.clock, self._meter)
