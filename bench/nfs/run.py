"""NF benchmark: packets/s on one core and per-batch latency, stateless (Redis on loopback) vs local
baseline side by side in one run, long flows (thousands of packets) and short flows (20 packets),
64 B and 1500 B, fed from memory so the NF and its state client are measured (no NIC, no OVS).

Builds and runs the Rust harness nfs/crates/nfbench (`nf-bench`). Last line: one JSON object, per NF
`stateless_pps`, `local_pps` (long flows, 64 B), `ratio_long` and `ratio_short64` (stateless/local
packets/s), `added_p50_us`, `added_p99_us` (stateless minus local per-batch latency, long flows 64 B).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bench.common import final_json, print_machine

NFS_DIR = Path(__file__).resolve().parent.parent.parent / "nfs"


def summarise(results: dict) -> dict:
    """Per-NF headline figures from the harness's {nf: {workload: {mode: {...}}}}."""
    out = {}
    for nf, w in results.items():
        long64, short64 = w["long64"], w["short64"]
        out[nf] = {
            "stateless_pps": long64["stateless"]["pps"],
            "local_pps": long64["local"]["pps"],
            "ratio_long": round(long64["stateless"]["pps"] / long64["local"]["pps"], 3),
            "ratio_short64": round(short64["stateless"]["pps"] / short64["local"]["pps"], 3),
            "added_p50_us": round(long64["stateless"]["p50_us"] - long64["local"]["p50_us"], 1),
            "added_p99_us": round(long64["stateless"]["p99_us"] - long64["local"]["p99_us"], 1),
            # Owner cache (reads of owned flows served locally, writes through): extra figures.
            "cached_ratio_long": round(long64["cached"]["pps"] / long64["local"]["pps"], 3),
            "cached_ratio_short64": round(short64["cached"]["pps"] / short64["local"]["pps"], 3),
            "cached_added_p99_us": round(long64["cached"]["p99_us"] - long64["local"]["p99_us"], 1),
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--nfs", default="firewall,nat,monitor,lb,ips,l7fw")
    a = ap.parse_args()
    print_machine()
    build = subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "nfbench"], cwd=NFS_DIR, capture_output=True, text=True
    )
    if build.returncode != 0:
        print(build.stderr, file=sys.stderr)
        return 1
    cmd = [str(NFS_DIR / "target/release/nf-bench"), "--batch", str(a.batch), "--nfs", a.nfs]
    if a.quick:
        cmd.append("--quick")
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if run.returncode != 0:
        print(run.stderr, file=sys.stderr)
        return 1
    data = json.loads(run.stdout.strip().splitlines()[-1])
    print(f"batch {data['batch']}, {data['repeats']} repeat(s) per mode (medians), Redis on loopback")
    print(
        f"{'nf':9} {'workload':10} {'local pps':>11} {'stateless pps':>14} {'ratio':>6} "
        f"{'p50 us l/s':>13} {'p99 us l/s':>15} {'cached pps':>11} {'ratio':>6} {'p99 us':>7}"
    )
    for nf, w in data["results"].items():
        for name, r in w.items():
            lo, st, ca = r["local"], r["stateless"], r["cached"]
            print(
                f"{nf:9} {name:10} {lo['pps']:11.0f} {st['pps']:14.0f} {st['pps'] / lo['pps']:6.2f} "
                f"{lo['p50_us']:6.1f}/{st['p50_us']:<6.1f} {lo['p99_us']:7.1f}/{st['p99_us']:<7.1f} "
                f"{ca['pps']:11.0f} {ca['pps'] / lo['pps']:6.2f} {ca['p99_us']:7.1f}"
            )
    final_json(summarise(data["results"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
