"""The plain model's build (solver._Model) on the foreign generator's large draws: CPU seconds and a digest of the
models it builds (issue 25; the plain path answers where prepare gives up).

Per size: `large_instance(seed, size, 1)` for seeds --seed.., parsed once; `_Model` built --reps times (min CPU
seconds), then its stage-1 objective set. The digest covers the text of every model (stage 1 as solve() builds
it, and with max_moves=3 / move_cost=0.5), so two trees build the same models when their digests agree. Run it
in two trees one after the other (alternating for a comparison) and compare medians and digests.

    .venv/bin/python -m bench.placement.plainbuild [--sizes 500,5000] [--draws 30,3] [--seed 0] [--reps 3]

Last line JSON: {"SIZE": {"median": s, "sum": s, "max": s}, ..., "digest": hex}.
"""

from __future__ import annotations

import argparse
import hashlib
import time

from bench.common import final_json, median, print_machine
from bench.placement.foreign import large_instance
from placement.model import parse_problem
from placement.solver import Options, _Model, load_backends


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="500,5000")
    ap.add_argument("--draws", default="30,3", help="one count, or one per size")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    print_machine()
    load_backends()
    sizes = [int(s) for s in a.sizes.split(",")]
    draws = [int(d) for d in a.draws.split(",")]
    draws = draws * len(sizes) if len(draws) == 1 else draws
    digest = hashlib.sha256()
    out: dict = {}
    for size, n in zip(sizes, draws, strict=True):
        times = []
        for seed in range(a.seed, a.seed + n):
            p = parse_problem(large_instance(seed, size, 1))
            best = float("inf")
            for _ in range(a.reps):
                t = time.process_time()
                m = _Model(p, Options())
                m.minimize(m.stage1)
                best = min(best, time.process_time() - t)
            times.append(best)
            digest.update(str(m.m.proto).encode())
            m = _Model(p, Options(max_moves=3, move_cost=0.5))
            m.minimize(m.stage1)
            digest.update(str(m.m.proto).encode())
            print(f"size {size} seed {seed}: build {best:.4f} s", flush=True)
        out[str(size)] = {
            "median": round(median(times), 4),
            "sum": round(sum(times), 3),
            "max": round(max(times), 4),
        }
    out["digest"] = digest.hexdigest()[:16]
    final_json(out)


if __name__ == "__main__":
    main()
