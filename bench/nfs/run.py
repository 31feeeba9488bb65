"""NF benchmark: packets/s on one core and per-batch latency, stateless (Redis on loopback) vs local
baseline side by side in one run, long flows (thousands of packets) and short flows (20 packets),
64 B and 1500 B, in two variants (`--path`, both by default, memory first):

- `memory`: fed from memory so the NF and its state client are measured (no NIC, no OVS): builds and runs
  the Rust harness nfs/crates/nfbench (`nf-bench`), under the CPU wake-up latency bound the agent gives its
  NFs (`--cpu-latency-us`, default 0; `off` measures without it);
- `veth`: the `nf` binary on a veth behind a real OVS bridge, fed by `traffic gen`, measured by
  `traffic sink` (bench/nfs/veth.py; needs root and Open vSwitch).

Last line: one JSON object, per NF `stateless_pps`, `local_pps` (long flows, 64 B), `ratio_long` and
`ratio_short64` (stateless/local packets/s), `added_p50_us`, `added_p99_us` (stateless minus local latency,
long flows 64 B, at the same offered load), and the same for the batch-by-batch client (`sync_*`), the
owner cache (`cached_*`) and the pipelined client over TCP loopback (`tcp_*`); CPU per packet (long flows,
64 B: `local_cpu_us_per_pkt`, `stateless_busy_cpu_us_per_pkt` = the NF thread's CPU without its spinning
for replies, `stateless_redis_cpu_us_per_pkt`, `stateless_round_trips_per_1000`); the round-trip probe under
`rtt`; the veth variant's figures per NF under the key `veth` (bench/nfs/veth.py).

Transport: `stateless`, `sync` and `cached` reach Redis over its unix socket, the configuration the agent
deploys (Redis on the same machine as the NF; `tcp_*` is the same client over TCP loopback, for a tier
reached by TCP: a remote Redis or Redis Cluster).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from bench.common import final_json, print_machine
from bench.nfs import veth
from nf_local.command import parse_cpu_latency
from testkit.veth_testbed import REDIS_MODES, Testbed

NFS_DIR = Path(__file__).resolve().parent.parent.parent / "nfs"


def _ratio(w: dict, mode: str) -> float:
    return round(w[mode]["pps"] / w["local"]["pps"], 3)


# The harness's modes, in print order (see nfs/crates/nfbench).
MODES = ["local", "sync", "stateless", "stateless-tcp", "cached"]


def summarise(results: dict) -> dict:
    """Per-NF headline figures from the harness's {nf: {workload: {mode: {...}, paced: {...}}}}.

    stateless = Redis over its unix socket, pipelined (the default client); sync = the same batch by batch
    (the client before pipelining); cached = pipelined with the owner cache; stateless-tcp (`tcp_*`) =
    pipelined over TCP loopback. Added latency = stateless minus local at the same offered load (`paced`:
    half of what both carry, packets arriving one by one), p50 and p99 after the harness's warm-up (the first
    1/16 of the packets), `added_p99_all_us` over every packet; `sat_added_*` = the same per batch
    at saturation (every batch queues behind the ones in flight).
    """
    out = {}
    for nf, w in results.items():
        long64, short64 = w["long64"], w["short64"]
        paced = long64.get("paced", {})
        st = long64["stateless"]
        row = {
            "stateless_pps": st["pps"],
            "local_pps": long64["local"]["pps"],
            "ratio_long": _ratio(long64, "stateless"),
            "ratio_short64": _ratio(short64, "stateless"),
            "sat_added_p50_us": round(st["p50_us"] - long64["local"]["p50_us"], 1),
            "sat_added_p99_us": round(st["p99_us"] - long64["local"]["p99_us"], 1),
            "local_cpu_us_per_pkt": long64["local"]["cpu_us_per_pkt"],
            "stateless_busy_cpu_us_per_pkt": st["busy_cpu_us_per_pkt"],
            "stateless_redis_cpu_us_per_pkt": st["redis_cpu_us_per_pkt"],
            "stateless_round_trips_per_1000": st["round_trips_per_1000"],
        }
        for prefix, mode in (("sync_", "sync"), ("cached_", "cached"), ("tcp_", "stateless-tcp")):
            row[prefix + "ratio_long"] = _ratio(long64, mode)
            row[prefix + "ratio_short64"] = _ratio(short64, mode)
        if paced:
            row["offered_pps"] = paced["offered_pps"]
            row["added_p50_us"] = round(paced["stateless"]["p50_us"] - paced["local"]["p50_us"], 1)
            row["added_p99_us"] = round(paced["stateless"]["p99_us"] - paced["local"]["p99_us"], 1)
            st_paced, local_paced = paced["stateless"], paced["local"]
            if "p99_all_us" in st_paced:  # harness of 2026-11-26 on: p99 with the warm-up too
                row["added_p99_all_us"] = round(st_paced["p99_all_us"] - local_paced["p99_all_us"], 1)
            if "p99_clean_us" in st_paced and "p99_clean_us" in local_paced:  # nf-bench --stall-probe
                row["added_p99_clean_us"] = round(st_paced["p99_clean_us"] - local_paced["p99_clean_us"], 1)
            for prefix, mode in (("sync_", "sync"), ("cached_", "cached"), ("tcp_", "stateless-tcp")):
                row[prefix + "added_p99_us"] = round(paced[mode]["p99_us"] - paced["local"]["p99_us"], 1)
        out[nf] = row
    return out


def _parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--batch",
        type=int,
        default=64,
        help="memory variant: frames per batch at most (64: the NFs' batch_size default)",
    )
    ap.add_argument("--depth", type=int, default=8, help="batches in flight (pipelined stateless/cached)")
    ap.add_argument(
        "--nfs",
        default="firewall,nat,nat-pipelined,monitor,monitor-inc,monitor-wb,lb,lb-pipelined,ips,ips-lastwins,l7fw,"
        "l7fw-lastwins,ipsec-out,ipsec-in",
        help="NFs of the memory variant",
    )
    ap.add_argument("--path", default="memory,veth", help="variants to run: memory, veth or both (default)")
    ap.add_argument("--veth-nfs", default=",".join(veth.NF_TYPES), help="NFs of the veth variant")
    ap.add_argument("--veth-repeats", type=int, default=None, help="veth runs per mode (default 3, quick 1)")
    ap.add_argument("--veth-redis", default="unix", choices=REDIS_MODES,
                    help="unix: Redis's own unix socket, as the agent runs NFs (default); relay: through the two "
                         "socat relays the agent used before; direct: Redis on TCP in the NF's namespace")  # fmt: skip
    ap.add_argument(
        "--xdp", action="store_true", help="veth variant: the NF uses AF_XDP (AF_PACKET if refused)"
    )
    ap.add_argument("--rundir", default="/run/uno-bench", help="veth variant: where its run directory goes")
    ap.add_argument(
        "--cpu-latency-us",
        default="0",
        help="memory variant: the CPU wake-up latency bound held for the whole run, both modes: 0 (default, as "
        "`uno agent serve` runs NFs: idle CPUs poll) or 'off' (the host's idle states as they are)",
    )
    a = ap.parse_args(argv)
    try:
        a.cpu_latency_us = parse_cpu_latency(a.cpu_latency_us)
    except ValueError as exc:
        ap.error(f"--cpu-latency-us: {exc}")
    paths = [p for p in a.path.split(",") if p]
    bad = [p for p in paths if p not in ("memory", "veth")]
    if bad or not paths:
        ap.error(f"--path: unknown variant {bad[0] if bad else a.path!r} (memory, veth)")
    a.paths = paths
    a.veth_nfs_list = [n for n in a.veth_nfs.split(",") if n]
    bad = [n for n in a.veth_nfs_list if n not in veth.NF_TYPES]
    if bad or not a.veth_nfs_list:
        ap.error(f"--veth-nfs: unknown NF {bad[0] if bad else a.veth_nfs!r} ({', '.join(veth.NF_TYPES)})")
    if a.veth_repeats is None:
        a.veth_repeats = 1 if a.quick else 3
    if not 1 <= a.veth_repeats <= 50:
        ap.error("--veth-repeats: must be 1-50")
    return a


def run_memory(a: argparse.Namespace) -> dict | None:
    build = subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "nfbench"], cwd=NFS_DIR, capture_output=True, text=True
    )
    if build.returncode != 0:
        print(build.stderr, file=sys.stderr)
        return None
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
    if a.cpu_latency_us is not None:
        cmd += ["--cpu-latency-us", str(a.cpu_latency_us)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if run.returncode != 0:
        print(run.stderr, file=sys.stderr)
        return None
    data = json.loads(run.stdout.strip().splitlines()[-1])
    print(
        f"batch {data['batch']}, depth {data['depth']}, {data['repeats']} repeat(s) per mode (medians), "
        f"Redis on this machine, pinned: {data['pinned']}, CPU wake-up bound: "
        f"{data.get('cpu_latency_us', 'none')} us; sync = Redis batch by batch, stateless = pipelined, "
        "cached = pipelined + owner cache (these over Redis's unix socket), stateless-tcp = pipelined over TCP "
        "loopback; latency p50/p99 us; cpu = NF thread us/pkt without spinning for replies (busy), redis = "
        "Redis us/pkt, rt = round trips per 1000 packets"
    )
    for tr, r in data.get("rtt", {}).items():
        print(
            f"round trip ({tr}, one-key MGET, blocking): "
            + "; ".join(
                f"{k}: p50/p99 {v['p50_us']}/{v['p99_us']} us, client cpu {v['client_cpu_us']} us, "
                f"redis cpu {v['redis_cpu_us']} us"
                for k, v in r.items()
            )
        )
    modes = [m for m in MODES if all(m in w for nf in data["results"].values() for w in nf.values())]
    print(
        f"{'nf':9} {'workload':10} " + " ".join(f"{m + ' pps':>18} {'x':>5} {'p50/p99':>13}" for m in modes)
    )
    for nf, w in data["results"].items():
        for name, r in w.items():
            lo = r["local"]["pps"]
            cells = " ".join(
                f"{r[m]['pps']:18.0f} {r[m]['pps'] / lo:5.2f} {r[m]['p50_us']:6.0f}/{r[m]['p99_us']:<6.0f}"
                for m in modes
            )
            print(f"{nf:9} {name:10} {cells}")
            cpu = "  ".join(
                f"{m} {r[m]['busy_cpu_us_per_pkt']:.3f}/{r[m]['redis_cpu_us_per_pkt']:.3f}/"
                f"{r[m]['round_trips_per_1000']:.0f}"
                for m in modes
            )
            print(f"{'':9} {'':10} cpu/redis us per pkt, rt: {cpu}")
            if "paced" in r:
                p = r["paced"]
                lat = " ".join(f"{m} {p[m]['p50_us']:.0f}/{p[m]['p99_us']:.0f}" for m in modes)
                print(f"{'':9} {'':10} at {p['offered_pps']:.0f} pps offered: {lat}")
    out = summarise(data["results"])
    if data.get("rtt"):
        out["rtt"] = data["rtt"]
    out["cpu_latency_us"] = data.get("cpu_latency_us")
    return out


def run_veth(a: argparse.Namespace) -> dict | None:
    build = subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "nf", "-p", "traffic"], cwd=NFS_DIR, capture_output=True,
        text=True,
    )  # fmt: skip
    if build.returncode != 0:
        print(build.stderr, file=sys.stderr)
        return None
    bins = veth.Binaries(NFS_DIR / "target/release/nf", NFS_DIR / "target/release/traffic")
    t0 = time.monotonic()
    print(
        f"veth + OVS: nf on a veth (AF_{'XDP' if a.xdp else 'PACKET'}) behind an OVS userspace bridge, "
        f"traffic gen -> OVS -> nf -> OVS -> traffic sink; Redis {a.veth_redis}; {a.veth_repeats} run(s) per "
        "mode, alternating, medians; pps = data packets/s (offered: sent over the generator's sending time, "
        "delivered: received over the sink's receive window); cpu us/p = NF process CPU per received packet; "
        "redis = Redis CPU per NF packet",
        flush=True,
    )
    print(veth.header(), flush=True)
    with Testbed(rundir=a.rundir, redis=a.veth_redis) as tb:
        results = veth.run(tb, bins, a.veth_nfs_list, a.quick, a.veth_repeats, a.xdp,
                           log=lambda s: print(s, flush=True))  # fmt: skip
    print(f"veth variant: {time.monotonic() - t0:.0f} s", flush=True)
    return veth.summarise(results)


def main(argv: list[str] | None = None) -> int:
    a = _parse(argv)
    print_machine()
    figures: dict = {}
    if "memory" in a.paths:
        mem = run_memory(a)
        if mem is None:
            return 1
        figures.update(mem)
    if "veth" in a.paths:
        v = run_veth(a)
        if v is None:
            return 1
        figures["veth"] = v
    final_json(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
