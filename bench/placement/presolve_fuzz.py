"""Is CP-SAT's stock presolve exact on the models placement builds? (OR-Tools 9.15's is not: google/or-tools#5293,
placement/cpsat.py.) Dumps every CP-SAT model the solver builds on a set of instances (the engine's cores and
questions, the plain model: each instance solved by `solve()` and, at 200 vertices and on the foreign draws, by
`solve(engine=False)` too), plus random small models shaped like ours (exactly-one groups, rows with
coefficients 2^30-2^45), then solves each dump with the stock presolve and with `cp_model_presolve: false`
(the reference, same OR-Tools), under each given Python (each with its own OR-Tools), and counts disagreements.

    .venv/bin/python -m bench.placement.presolve_fuzz --dir /tmp/fuzz --python .venv/bin/python \
        --python /tmp/v914/bin/python [--families 200,500 --seeds 2 --foreign 0-299,1500-1649 --large 2 \
        --random 400 --time-limit 2 --current]

One command: `dump` (this Python builds the models with the placement code of this tree: it needs the
OR-Tools of .venv, the engine uses 9.15's model API), then `check` under each --python (a subprocess:
`PY -m bench.placement.presolve_fuzz check DIR [--current]`; the other Python needs numpy and its OR-Tools
only). A model is solved with the parameters placement gave it, less its boxes (time, deterministic time,
conflicts, stop at the first solution), one worker, --time-limit seconds; the stock run clears
placement/cpsat.py's presolve_inclusion_work_limit, --current adds a run with it (as placement solves).
Disagreement (sound whatever the statuses): one run's proven bound above the other's solution (1e-6
relative), or "infeasible" where the other found a solution. Per Python the last line is JSON: {"version",
"models", "disagree": {"stock": [[file, stock, reference]...], "current": [...]}, "status_pairs" (stock /
reference), "cpu"}. The defaults: ~4,000 models (~160 MB of text), dump ~7 min, check ~20 min with 9.15 and
~35 min with 9.14 (its protobuf parses the text in Python) on a loaded 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

LIMIT_FIELDS = ("max_time_in_seconds", "max_deterministic_time", "max_number_of_conflicts")


# Dumping ----------------------------------------------------------------------------------------------
def _hook(out: Path, tag: list[str]):
    """Replace placement's new_solver so that every solve first writes its model and parameters."""
    import placement.cpsat as pc
    import placement.engine as pe
    import placement.solver as ps

    original = pc.new_solver
    count = [0]

    def new_solver(cp_model):
        solver = original(cp_model)
        for name in ("solve", "Solve"):
            real = getattr(solver, name)

            def dumping(model, *a, _real=real, **k):
                count[0] += 1
                stem = out / f"{tag[0]}_{count[0]:05d}"
                model.export_to_file(str(stem) + ".txt")
                (Path(str(stem) + ".params")).write_text(str(solver.parameters))
                return _real(model, *a, **k)

            setattr(solver, name, dumping)
        return solver

    pe.new_solver = ps.new_solver = new_solver
    return count


def _random_model(seed: int):
    """Exactly-one groups of 2-6 booleans, 1-6 rows over them with coefficients 2^30-2^45 (some negative,
    some rows two-sided), an objective with big coefficients: the shape of the engine's cores."""
    from ortools.sat.python import cp_model

    rng = random.Random(seed)
    m = cp_model.CpModel()
    groups = [
        [m.new_bool_var(f"g{g}_{k}") for k in range(rng.randint(2, 6))] for g in range(rng.randint(2, 14))
    ]
    for grp in groups:
        if rng.random() < 0.85:
            m.add_exactly_one(grp)
        else:
            m.add_at_most_one(grp)
    allv = [v for grp in groups for v in grp]

    def coef():
        c = rng.randint(2**30, 2 ** rng.randint(31, 45))
        return -c if rng.random() < 0.15 else c

    for _ in range(rng.randint(1, 6)):
        vs = rng.sample(allv, rng.randint(2, len(allv)))
        cs = [coef() for _ in vs]
        pos = sum(c for c in cs if c > 0)
        hi = int(pos * rng.uniform(0.2, 0.9))
        lo = -(2**62) if rng.random() < 0.7 else int(hi * rng.uniform(0.0, 0.8))
        m.add_linear_constraint(sum(c * v for c, v in zip(cs, vs, strict=True)), lo, hi)
    m.minimize(sum(coef() * v for v in allv if rng.random() < 0.7))
    return m


def _ranges(text: str) -> list[int]:
    seeds = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        seeds.extend(range(int(lo), int(hi or lo) + 1))
    return seeds


def dump(args) -> None:
    from bench.placement.foreign import instance as foreign
    from bench.placement.foreign import large_instance
    from placement import parse_problem, solve
    from placement.families import FAMILIES
    from placement.families import instance as family

    out = Path(args.dir)
    out.mkdir(parents=True, exist_ok=True)
    tag = [""]
    count = _hook(out, tag)
    jobs = []
    for size in [int(x) for x in args.families.split(",") if x]:
        for name in FAMILIES:
            for seed in range(args.seeds):
                jobs.append(
                    (f"fam-{name}-{size}-{seed}", lambda n=name, s=size, d=seed: family(n, s, d), size <= 200)
                )
    for seed in _ranges(args.foreign):
        jobs.append((f"for-{seed}", lambda d=seed: foreign(d), True))
    for seed in range(args.large):
        for size, ns in ((500, 1), (1000, 3), (500, 2)):
            jobs.append(
                (f"lar-{size}x{ns}-{seed}", lambda d=seed, z=size, k=ns: large_instance(d, z, k), False)
            )
    for name, make, plain in jobs:
        obj = make()
        runs = [("e", True)] + ([("p", False)] if plain else [])
        for kind, engine in runs:
            tag[0] = f"{name}-{kind}"
            solve(parse_problem(obj), time_limit=args.solve_limit, engine=engine)
    for seed in range(args.random):
        stem = out / f"rnd-{seed}_00001"
        _random_model(seed).export_to_file(str(stem) + ".txt")
        Path(str(stem) + ".params").write_text("")
    print(f"dumped {count[0]} solver models + {args.random} random", flush=True)


# Checking ---------------------------------------------------------------------------------------------
def _solve(model_text: str, params: str, stock: bool | None, time_limit: float):
    """stock True: the stock presolve; False: no presolve (the reference); None: as placement/cpsat.py sets it."""
    from ortools.sat.python import cp_model

    m = cp_model.CpModel()
    proto = m.Proto()
    if hasattr(proto, "parse_text_format"):
        proto.parse_text_format(model_text)
    else:
        from google.protobuf import text_format

        text_format.Parse(model_text, proto)
    s = cp_model.CpSolver()
    p = s.parameters
    if params:
        if hasattr(p, "parse_text_format"):
            p.parse_text_format(params)
        else:
            from google.protobuf import text_format

            text_format.Parse(params, p)
    for f in LIMIT_FIELDS:
        p.ClearField(f) if hasattr(p, "ClearField") else getattr(p, f"clear_{f}")()
    p.stop_after_first_solution = False
    p.num_workers = 1
    p.max_time_in_seconds = time_limit
    if stock is None:
        p.cp_model_presolve = True
        p.presolve_inclusion_work_limit = 0
    elif stock:
        p.cp_model_presolve = True
        p.ClearField("presolve_inclusion_work_limit") if hasattr(
            p, "ClearField"
        ) else p.clear_presolve_inclusion_work_limit()
    else:
        p.cp_model_presolve = False
    t = time.process_time()
    st = s.solve(m)
    cpu = time.process_time() - t
    name = s.status_name(st)
    if name in ("OPTIMAL", "FEASIBLE"):
        return name, s.objective_value, s.best_objective_bound, cpu
    return name, None, None, cpu


def _conflict(a, b) -> bool:
    """a's proof against b's solution (minimisation)."""
    if b[1] is None:
        return False
    if a[0] == "INFEASIBLE":
        return True
    if a[2] is None:
        return False
    return a[2] > b[1] + 1e-6 * max(1.0, abs(b[1]))


def check(args) -> None:
    import ortools

    files = sorted(Path(args.dir).glob("*.txt"))
    random.Random(0).shuffle(files)  # (an interrupted run has covered every kind of model)
    modes = {"stock": True, "reference": False} | ({"current": None} if args.current else {})
    disagree, pairs, cpu = {m: [] for m in modes if m != "reference"}, {}, dict.fromkeys(modes, 0.0)
    for k, f in enumerate(files):
        text = f.read_text()
        pf = f.with_suffix(".params")
        params = pf.read_text() if pf.exists() else ""
        got = {m: _solve(text, params, how, args.time_limit) for m, how in modes.items()}
        ref = got["reference"]
        for m, r in got.items():
            cpu[m] += r[3]
        key = f"{got['stock'][0]}/{ref[0]}"
        pairs[key] = pairs.get(key, 0) + 1
        for m in disagree:
            if _conflict(got[m], ref) or _conflict(ref, got[m]):
                disagree[m].append([f.name, got[m][:3], ref[:3]])
                print("DISAGREE", m, f.name, got[m], ref, flush=True)
        if k % 200 == 0:
            print(f"{k}/{len(files)} {pairs}", flush=True)
    cpu = {m: round(c, 2) for m, c in cpu.items()}
    print(json.dumps({"version": ortools.__version__, "models": len(files), "disagree": disagree,
                      "status_pairs": pairs, "cpu": cpu}))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", nargs="?", choices=["run", "dump", "check"], default="run")
    ap.add_argument("dir", nargs="?")
    ap.add_argument("--dir", dest="dir_opt")
    ap.add_argument("--python", action="append", default=[])
    ap.add_argument("--families", default="200,500")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--foreign", default="0-299,1500-1649")
    ap.add_argument("--large", type=int, default=2)
    ap.add_argument("--random", type=int, default=400)
    ap.add_argument("--solve-limit", type=float, default=5.0)
    ap.add_argument("--time-limit", type=float, default=2.0)
    ap.add_argument("--current", action="store_true", help="also solve as placement/cpsat.py sets CP-SAT")
    args = ap.parse_args()
    args.dir = args.dir or args.dir_opt
    if not args.dir:
        ap.error("a directory is needed (--dir)")
    if args.mode == "dump":
        dump(args)
    elif args.mode == "check":
        check(args)
    else:
        dump(args)
        for py in args.python or [sys.executable]:
            cmd = [
                py,
                "-m",
                "bench.placement.presolve_fuzz",
                "check",
                args.dir,
                "--time-limit",
                str(args.time_limit),
            ]
            cmd += ["--current"] if args.current else []
            subprocess.run(cmd, check=True, env=dict(os.environ))


if __name__ == "__main__":
    main()
