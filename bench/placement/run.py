"""Placement solve time vs vertex count: CP-SAT (ours) vs OR-Tools MIP (SCIP), same seeded instances, one run.

Last line JSON: sizes, ours_s, mip_s (median seconds per size over the instances each proved optimal; null
where none was proven within the time limit), plus ours_proven / mip_proven counts (host cost proven
optimal) and ours_tiebreak_proven / mip_tiebreak_proven (the PCIe/moves tie-breaks proven minimal too).

    ./uno bench placement [--quick]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.common import final_json, median, print_machine
from placement.sim import run_scaling


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="sizes 100 and 500, one instance each")
    ap.add_argument("--out", default="bench/out/placement")
    args = ap.parse_args()
    print_machine()
    sizes = [100, 500] if args.quick else [100, 500, 1000, 2000, 5000]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = run_scaling(out, args.quick, sizes=sizes, seeds=1 if args.quick else 3)
    figures: dict = {"sizes": sizes, "ours_s": [], "mip_s": [], "ours_proven": [], "mip_proven": [],
                     "ours_tiebreak_proven": [], "mip_tiebreak_proven": []}  # fmt: skip
    print(
        f"{'vertices':>8} {'ours s':>16} {'MIP (SCIP) s':>14}   proven optimal ours/mip"
        "   tie-break proven ours/mip"
    )
    for n in sizes:
        line = []
        for name, key in (("cpsat", "ours"), ("mip", "mip")):
            proven = [r[4] for r in rows if r[0] == n and r[2] == name and r[3] == "optimal"]
            figures[f"{key}_s"].append(round(median(proven), 4) if proven else None)
            figures[f"{key}_proven"].append(len(proven))
            tb = [r for r in rows if r[0] == n and r[2] == name and r[6] == "proven"]
            figures[f"{key}_tiebreak_proven"].append(len(tb))
            line.append(figures[f"{key}_s"][-1])
        total = len([r for r in rows if r[0] == n and r[2] == "cpsat"])
        print(f"{n:>8} {line[0]!s:>16} {line[1]!s:>14}   {figures['ours_proven'][-1]}/{total} "
              f"{figures['mip_proven'][-1]}/{total}              {figures['ours_tiebreak_proven'][-1]}/{total} "
              f"{figures['mip_tiebreak_proven'][-1]}/{total}")  # fmt: skip
    print(f"plot: {out / 'scaling.png'}, rows: {out / 'scaling.csv'}")
    final_json(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
