"""The one-sNIC proof questions ("is there a placement of host cost <= ask?") replayed under CP-SAT settings.

Solves the family instances with the engine, keeps a copy of each CP-SAT model the question loop asks (the
cost as objective, stopped at the first solution), then solves every copy again single-threaded under each
setting and sums CP-SAT's deterministic time (load-independent) per setting:

    .venv/bin/python -m bench.placement.questions [--families long,mesh] [--sizes 300,500] [--seeds 12]

Settings: cuts / no cuts (cut_level 0), each as a pure feasibility model (objective cleared) or with the cost
as objective stopped at the first solution. Last line JSON: {setting: summed deterministic seconds}.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager

from ortools.sat.python import cp_model

import placement.engine as engine
from bench.common import final_json, print_machine
from placement.cpsat import new_solver
from placement.families import instance
from placement.model import parse_problem
from placement.solver import solve

SETTINGS = {  # name: (cuts, cost objective stopped at the first solution)
    "feasibility, cuts": (True, False),
    "feasibility, no cuts": (False, False),
    "objective first, cuts": (True, True),
    "objective first, no cuts": (False, True),
}


@contextmanager
def kept_questions(into: list[cp_model.CpModel]) -> Iterator[None]:
    """While open, a copy of every model the question loop asks CP-SAT (its solves with `first`)."""
    plain = engine._Core.solve

    def keeping(core, *args, **kwargs):
        if kwargs.get("first"):
            into.append(core.m.clone())
        return plain(core, *args, **kwargs)

    engine._Core.solve = keeping
    try:
        yield
    finally:
        engine._Core.solve = plain


def replayed(model: cp_model.CpModel, cuts: bool, first: bool) -> tuple[str, float]:
    """Status and deterministic seconds of one question under a setting."""
    m = model.clone()
    m.clear_hints()
    if not first:
        m.proto.clear_objective()
    solver = new_solver(cp_model)  # the engine's fixed parameters
    solver.parameters.num_workers = 1
    solver.parameters.linearization_level = engine.FEASIBILITY_LINEARIZATION
    solver.parameters.max_time_in_seconds = 30.0
    solver.parameters.stop_after_first_solution = first
    if not cuts:
        solver.parameters.cut_level = 0
    status = solver.solve(m)
    return solver.status_name(status), solver.deterministic_time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--families", default="long,chains-tight,pinned,mesh")
    ap.add_argument("--sizes", default="300,500")
    ap.add_argument("--seeds", type=int, default=12)
    args = ap.parse_args()
    print_machine()
    total = dict.fromkeys(SETTINGS, 0.0)
    for fam in args.families.split(","):
        for size in [int(s) for s in args.sizes.split(",")]:
            for seed in range(args.seeds):
                models: list[cp_model.CpModel] = []
                with kept_questions(models):
                    solve(parse_problem(instance(fam, size, seed)), time_limit=10.0)
                for k, model in enumerate(models):
                    row = {name: replayed(model, *how) for name, how in SETTINGS.items()}
                    statuses = {st for st, _ in row.values()}
                    for name, (_, det) in row.items():
                        total[name] += det
                    cells = ", ".join(f"{name} {det:.3f}" for name, (_, det) in row.items())
                    print(f"{fam} {size} seed {seed} question {k}: {'/'.join(sorted(statuses))}: {cells}")
    final_json({name: round(det, 3) for name, det in total.items()})


if __name__ == "__main__":
    main()
