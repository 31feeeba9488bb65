"""Placement engine before vs after a change: two versions of `placement/` side by side in one run.

Each version runs in its own worker process (its tree first on sys.path), both kept alive for the whole
run and given the same seeded instances (placement/families.py of THIS tree) alternately, the first
solver swapped every seed; per family and size: median / max seconds from the start of parse_problem to
the proven host cost (the limit when not proven) and how many were proven; and the CPU seconds of each
whole solve (parse, proof and tie-break: process_time of its worker), the claim on a shared machine. The other tree is an exported commit:

    git archive REV | tar -x -C /tmp/old
    .venv/bin/python -m bench.placement.versus --old /tmp/old [--families a,b] [--sizes 500,5000]
                                               [--seeds 3] [--large-seeds 1] [--snics K] [--time-limit S]
                                               [--first-seed N]

Last line JSON: {family: {size: {old: {median_s, max_s, proven, cpu_median_s, cpu_max_s}, new: {...}, instances}}}.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bench.common import final_json, median, print_machine
from placement.families import FAMILIES, instance

# One JSON instance per line in, one JSON result per line out; the first solve warms the libraries.
# Seconds count from the start of parse_problem: a version whose Options has no `started` (the clock then
# starts in solve) gets its parse added, and a proof after the limit counts as none.
WORKER = """
import json, sys, time
from placement.model import parse_problem
from placement.solver import Options, solve
has_started = "started" in Options.__dataclass_fields__
for line in sys.stdin:
    req = json.loads(line)
    t, c = time.monotonic(), time.process_time()
    problem = parse_problem(req["instance"])
    parse_s = time.monotonic() - t
    out = solve(problem, time_limit=req["limit"], **({"started": t} if has_started else {}))
    s = out.get("host_cost_seconds", req["limit"]) + (0 if has_started else parse_s)
    ok = out["status"] == "optimal" and s <= req["limit"]
    print(json.dumps({"s": s if ok else req["limit"], "ok": ok, "cpu": time.process_time() - c,
                      "status": out["status"], "host_cost": out.get("host_cost"), "gap": out.get("gap")}),
          flush=True)
"""


class Worker:
    """A solver process on one tree of `placement/`."""

    def __init__(self, tree: Path, script: str = WORKER):
        self.proc = subprocess.Popen([sys.executable, "-c", script], cwd=tree, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)  # fmt: skip

    def solve(self, obj: dict, limit: float) -> dict:
        return self.ask({"instance": obj, "limit": limit})

    def ask(self, req: dict) -> dict:
        """One JSON request to the worker's script, its one JSON line of answer."""
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"placement worker exited with {self.proc.wait()}")
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def alternate(workers: dict[str, Worker], args, seeds_at, run, show, summary) -> dict:
    """The side-by-side loop of both versus benches: a warm-up run on each tree, then per family, size and
    seed (seeds_at(n) of them from args.first_seed), `run(worker, instance)` on the two trees in alternating
    order, `show(fam, n, seed, runs)` after each seed; the workers are closed at the end, also on an error.
    Returns {family: {size: summary(n_seeds, runs)}}."""
    figures: dict = {}
    try:
        warm_up = instance("chains", 50, 99)
        for w in workers.values():
            run(w, warm_up)
        for fam in args.families.split(","):
            figures[fam] = {}
            for n in [int(x) for x in args.sizes.split(",")]:
                k = seeds_at(n)
                runs: dict[str, list[dict]] = {"old": [], "new": []}
                for seed in range(args.first_seed, args.first_seed + k):
                    obj = instance(fam, n, seed, **({"snics": args.snics} if args.snics else {}))
                    for name in ("old", "new") if seed % 2 == 0 else ("new", "old"):
                        runs[name].append(run(workers[name], obj))
                    show(fam, n, seed, runs)
                figures[fam][str(n)] = summary(k, runs)
    finally:
        for w in workers.values():
            w.close()
    return figures


def _line(version: str, run: dict) -> str:
    return f"{version} {run['s']:.3f} s ({run['cpu']:.3f} CPU s, host cost {run['host_cost']})" + (
        "" if run["ok"] else f" (not proven, gap {run['gap']})"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="tree of the other version (an exported commit)")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--sizes", default="500,5000")
    ap.add_argument("--seeds", type=int, default=3, help="instances per family below 5,000 vertices")
    ap.add_argument("--large-seeds", type=int, default=1, help="instances per family at 5,000 and more")
    ap.add_argument("--snics", type=int, default=None, help="override the families' sNIC count")
    ap.add_argument("--first-seed", type=int, default=0, help="seeds from this one (others than the bench's)")
    ap.add_argument("--time-limit", type=float, default=10.0)
    args = ap.parse_args()
    print_machine()
    old_tree = Path(args.old).resolve()
    if not (old_tree / "placement" / "solver.py").is_file():
        print(f"--old: {old_tree} has no placement/solver.py", file=sys.stderr)
        return 2
    workers = {"old": Worker(old_tree), "new": Worker(Path(__file__).resolve().parents[2])}

    def show(fam: str, n: int, seed: int, runs: dict[str, list[dict]]) -> None:
        print(
            f"{fam} {n} seed {seed}: " + ", ".join(_line(v, runs[v][-1]) for v in ("old", "new")), flush=True
        )

    def summary(k: int, runs: dict[str, list[dict]]) -> dict:
        return {"instances": k} | {
            v: {"median_s": round(median([r["s"] for r in rs]), 4),
                "max_s": round(max(r["s"] for r in rs), 4), "proven": sum(r["ok"] for r in rs),
                "cpu_median_s": round(median([r["cpu"] for r in rs]), 4),
                "cpu_max_s": round(max(r["cpu"] for r in rs), 4)}
            for v, rs in runs.items()}  # fmt: skip

    figures = alternate(workers, args, lambda n: args.seeds if n < 5000 else args.large_seeds,
                        lambda w, obj: w.solve(obj, args.time_limit), show, summary)  # fmt: skip
    final_json(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
