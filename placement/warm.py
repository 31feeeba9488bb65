"""Re-placement: successive versions of one instance solved, re-using what did not change.

    from placement.warm import WarmSolver
    solver = WarmSolver(time_limit=5)        # Options' keyword arguments (solver, max_moves, ...)
    out = solver.solve(obj)                  # the JSON object, as parse_problem takes it
    ...                                      # set each NF's "location", change a measured edge, ...
    out = solver.solve(obj)                  # only the changed nodes/edges re-read, their groups rebuilt

The answer is the one `solve(parse_problem(obj), ...)` gives (the same integers, so the same proven host
cost): reparse.py re-reads only the differing nodes and edges, reprepare.py rebuilds only the groups they
touch, and the engine starts from the current placement (each NF's `location`). When a change touches
the scale or the structure, both take the full path; but a changed measured float that the parse's rule
reads onto a finer grid than the kept scale is read onto the kept scale instead when that is within the
parse's documented relative error (REL_ERROR_BOUND; `inexact_inputs` reports it): then the answer is
`solve` on those numbers (each within that relative error of the cold parse's). `last` says which path
the last solve took. The time limit's clock starts when `solve` is called (before the parse). Calls are
serialised (a lock).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from typing import Any

from placement.decompose import Groups
from placement.reparse import Parsed
from placement.reprepare import update
from placement.solver import Options, move_cost_of, prepare_within, solve


class WarmSolver:
    """A placement solver that keeps the last instance's parse and groups (module doc)."""

    def __init__(self, options: Options | None = None, *, onto_scale: bool = True, **kwargs: Any):
        """`onto_scale` False: a value off the kept scale always takes the full path (for A/B runs)."""
        self.options = options or Options(**kwargs)
        self.onto_scale = onto_scale
        self._parsed = Parsed()
        self._groups: Groups | None = None
        self._lock = threading.Lock()
        # {"parse": "incremental"|"full", "prepare": ... |"none", "onto_scale": values snap read onto it}
        self.last: dict[str, str | int] = {}

    def __call__(self, obj: Any) -> dict:
        return self.solve(obj)

    def solve(self, obj: Any, started: float | None = None) -> dict:
        """The output object of docs/placement.md for `obj` (PlacementInputError when invalid: the kept
        instance is then unchanged). `started`: the limit's clock, default now."""
        t0 = time.monotonic() if started is None else started
        with self._lock:
            opts = replace(self.options, started=t0)
            read = self._parsed.read(obj)
            gr, how = None, "none"
            self._parsed.snapped = 0
            if opts.solver == "cpsat":
                mc = move_cost_of(opts)
                memo = self._groups.memo if self._groups is not None else None
                if read.incremental and memo is not None:
                    # a value off the kept scale read onto it when close enough: else the scale changes
                    if self.onto_scale:
                        read = self._parsed.snap(read, {"G": memo.G, "R": memo.R, "Rn": memo.Rn}) or read
                    gr = update(self._groups, read.problem, read.nodes, read.edges, mc, opts.max_moves)
                    how = "incremental"
                if gr is None:
                    gr = prepare_within(read.problem, opts, t0)
                    how = "full" if gr is not None else "none"
            self._groups = gr
            self.last = {"parse": "incremental" if read.incremental else "full", "prepare": how,
                         "onto_scale": self._parsed.snapped if how == "incremental" else 0}  # fmt: skip
            # prepare gave no groups (no small groups, or out of time): not tried again inside solve
            return solve(read.problem, opts, prepared=gr, engine=gr is not None)
