"""One instance and one set of options give one placement by one path, whatever the clock says.

The engine's boxes inside the user's time limit are deterministic work (the local search's units, CP-SAT's
deterministic time), so a clock that jumps between readings (a loaded machine, seen from the solve) changes
neither the answer nor the sequence of steps and proof questions (the engine's debug log, with the clock's
figures removed). The clock only bounds the whole solve: one already past the deadline gets no proof."""

from __future__ import annotations

import logging
import random
import re
import time

import pytest

from placement import engine, parse_problem
from placement.decompose import prepare
from placement.families import instance
from placement.solver import GAP_LIMIT

WALL = re.compile(r"\b(t|wall)[= ]\d+\.\d+")


class _JumpingClock:
    """Readings that jump forward by a random step (up to seconds), far from the deadline given."""

    def __init__(self, seed: int):
        self.rng, self.now = random.Random(seed), 1000.0

    def __call__(self) -> float:
        self.now += self.rng.choice([0.0, 1e-3, 0.3, 2.5])
        return self.now


def _solve(gr, clock, caplog) -> tuple[engine.Outcome, list[str]]:
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="placement"):
        out = engine.solve_groups(gr, clock() + 10**6, gap_limit=GAP_LIMIT, tiebreak_time=10**6, time_limit=10.0,
                                  clock=clock)  # fmt: skip
    return out, [WALL.sub(r"\1 _", r.getMessage()) for r in caplog.records]


@pytest.mark.parametrize(("name", "n", "seed", "snics"), [("long", 300, 0, None), ("chains", 300, 5, 3)])
def test_same_placement_and_path_whatever_the_clock(name, n, seed, snics, caplog):
    gr = prepare(parse_problem(instance(name, n, seed, **({"snics": snics} if snics else {}))))
    ref, ref_path = _solve(gr, time.monotonic, caplog)
    # the incumbent's search ran (the local search, or with sNICs alike the pooled fill and split)
    assert ref.status == "optimal" and any(("swaps p=" in line or "pack p=" in line) for line in ref_path)
    for k in range(2):
        out, path = _solve(gr, _JumpingClock(k), caplog)
        assert (out.status, out.chosen, out.tiebreak_proven) == (ref.status, ref.chosen, ref.tiebreak_proven)
        assert path == ref_path


def test_the_clock_still_bounds_the_whole_solve(caplog):
    """A clock already past the deadline: the local search takes no step (its box is not what stops it),
    and whatever comes back is never a wrong `optimal`."""
    gr = prepare(parse_problem(instance("long", 300, 0)))
    ref, _ = _solve(gr, time.monotonic, caplog)
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="placement"):
        out = engine.solve_groups(gr, 0.0, gap_limit=GAP_LIMIT, time_limit=10.0, clock=lambda: 5.0)
    swaps = [r.getMessage() for r in caplog.records if r.getMessage().startswith("swaps p=")]
    assert all(" work=0 " in line for line in swaps)
    assert out.status in ("optimal", "feasible", "unknown")
    if out.status == "optimal":
        assert engine._sum(gr.cost, out.chosen) == engine._sum(gr.cost, ref.chosen)
