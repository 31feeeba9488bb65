"""NF benchmark: packets/s on one core and per-batch latency, stateless (Redis on loopback) vs local
baseline side by side in one run, long flows (thousands of packets) and short flows (20 packets),
64 B and 1500 B, fed from memory so the NF and its state client are measured (no NIC, no OVS).

Builds and runs the Rust harness nfs/crates/nfbench (`nf-bench`). Last line: one JSON object, per NF
`stateless_pps`, `local_pps` (long flows, 64 B), `ratio_long` and `ratio_short64` (stateless/local
packets/s), `added_p50_us`, `added_p99_us` (stateless minus local latency, long flows 64 B, at the same
offered load), and the same for the batch-by-batch client (`sync_*`) and the owner cache (`cached_*`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bench.common import final_json, print_machine

NFS_DIR = Path(__file__).resolve().parent.parent.parent / "nfs"


def _ratio(w: dict, mode: str) -> float:
    return round(w[mode]["pps"] / w["local"]["pps"], 3)


def summarise(results: dict) -> dict:
    """Per-NF headline figures from the harness's {nf: {workload: {mode: {...}, paced: {...}}}}.

    stateless = Redis, pipelined (the default client); sync = Redis batch by batch (the client before
    pipelining); cached = pipelined with the owner cache. Added latency = stateless minus local at the
    same offered load (`paced`: half of what both carry), p50 and p99; `sat_added_*` = the same at
    saturation (every batch queues behind the ones in flight).
    """
    out = {}
    for nf, w in results.items():
        long64, short64 = w["long64"], w["short64"]
        paced = long64.get("paced", {})
        row = {
            "stateless_pps": long64["stateless"]["pps"],
            "local_pps": long64["local"]["pps"],
            "ratio_long": _ratio(long64, "stateless"),
            "ratio_short64": _ratio(short64, "stateless"),
            "sat_added_p50_us": round(long64["stateless"]["p50_us"] - long64["local"]["p50_us"], 1),
            "sat_added_p99_us": round(long64["stateless"]["p99_us"] - long64["local"]["p99_us"], 1),
            "sync_ratio_long": _ratio(long64, "sync"),
            "sync_ratio_short64": _ratio(short64, "sync"),
            "cached_ratio_long": _ratio(long64, "cached"),
            "cached_ratio_short64": _ratio(short64, "cached"),
        }
        if paced:
            row["offered_pps"] = paced["offered_pps"]
            row["added_p50_us"] = round(paced["stateless"]["p50_us"] - paced["local"]["p50_us"], 1)
            row["added_p99_us"] = round(paced["stateless"]["p99_us"] - paced["local"]["p99_us"], 1)
            row["sync_added_p99_us"] = round(paced["sync"]["p99_us"] - paced["local"]["p99_us"], 1)
            row["cached_added_p99_us"] = round(paced["cached"]["p99_us"] - paced["local"]["p99_us"], 1)
        out[nf] = row
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--depth", type=int, default=8, help="batches in flight (pipelined stateless/cached)")
    ap.add_argument(
        "--nfs",
        default="firewall,nat,nat-pipelined,monitor,monitor-inc,monitor-wb,lb,lb-pipelined,ips,l7fw,ipsec-out,ipsec-in",
    )
    a = ap.parse_args()
    print_machine()
    build = subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "nfbench"], cwd=NFS_DIR, capture_output=True, text=True
    )
    if build.returncode != 0:
        print(build.stderr, file=sys.stderr)
        return 1
    cmd = [
        str(NFS_DIR / "target/release/nf-bench"),
        "--batch",
        str(a.batch),
        "--depth",
        str(a.depth),
        "--nfs",
        a.nfs,
    ]
    if a.quick:
        cmd.append("--quick")
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if run.returncode != 0:
        print(run.stderr, file=sys.stderr)
        return 1
    data = json.loads(run.stdout.strip().splitlines()[-1])
    print(
        f"batch {data['batch']}, depth {data['depth']}, {data['repeats']} repeat(s) per mode (medians), "
        f"Redis on loopback, pinned: {data['pinned']}; sync = Redis batch by batch, stateless = pipelined, "
        "cached = pipelined + owner cache; latency p50/p99 us"
    )
    modes = ["local", "sync", "stateless", "cached"]
    print(
        f"{'nf':9} {'workload':10} " + " ".join(f"{m + ' pps':>14} {'x':>5} {'p50/p99':>13}" for m in modes)
    )
    for nf, w in data["results"].items():
        for name, r in w.items():
            lo = r["local"]["pps"]
            cells = " ".join(
                f"{r[m]['pps']:14.0f} {r[m]['pps'] / lo:5.2f} {r[m]['p50_us']:6.0f}/{r[m]['p99_us']:<6.0f}"
                for m in modes
            )
            print(f"{nf:9} {name:10} {cells}")
            if "paced" in r:
                p = r["paced"]
                lat = " ".join(f"{m} {p[m]['p50_us']:.0f}/{p[m]['p99_us']:.0f}" for m in modes)
                print(f"{'':9} {'':10} at {p['offered_pps']:.0f} pps offered: {lat}")
    final_json(summarise(data["results"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
