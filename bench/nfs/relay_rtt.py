"""Round trips to Redis from an NF's network namespace, the ways an NF has reached it: through the two socat
relays the agent used to start next to every NF (TCP 127.0.0.1:6379 in the namespace -> unix socket -> TCP to
Redis: `relay`), over Redis's own unix socket (the agent's way now: `unix`), and for reference TCP loopback
in the root namespace (`tcp`). `redis-benchmark -c 1` (one GET at a time, the client sleeping in epoll while
it waits, no spinning) pinned to CPU 0 as the NF, Redis on CPU 1; the ways alternate, `--rounds` times.
Per way: requests/s, latency p50/p99 (us), and the CPU per request of Redis and of the relays (their socat
processes and the child each forks per connection).

    python -m bench.nfs.relay_rtt [--requests 20000] [--rounds 3] [--rundir /run/uno-bench]

Last line: JSON {way: {rps, p50_us, p99_us, redis_cpu_us, relay_cpu_us}} (medians over the rounds).
"""

from __future__ import annotations

import argparse
import csv
import io
import sys

from bench.common import final_json, median, print_machine
from host_datapath.sysutil import run
from testkit.veth_testbed import NF_CPU, Testbed

WAYS = ("relay", "unix", "tcp")


def bench_cmd(tb: Testbed, way: str, n: int) -> tuple[list[str], str | None]:
    """The redis-benchmark command line for `way` and the namespace it runs in."""
    base = ["taskset", "-c", NF_CPU, "redis-benchmark", "-c", "1", "-n", str(n), "-t", "get", "--csv"]
    if way == "relay":
        return [*base, "-h", "127.0.0.1", "-p", "6379"], tb.ns["nf"]
    if way == "unix":
        return [*base, "-s", str(tb.redis_sock)], tb.ns["nf"]
    return [*base, "-h", "127.0.0.1", "-p", str(tb.redis_port)], None


def parse_csv(text: str) -> dict:
    """redis-benchmark's --csv line for GET: requests/s and latency p50/p99 in us."""
    rows = [r for r in csv.DictReader(io.StringIO(text)) if r.get("test") == "GET"]
    if not rows:
        raise RuntimeError(f"no GET line in redis-benchmark output: {text[-300:]!r}")
    r = rows[0]
    return {"rps": float(r["rps"]), "p50_us": float(r["p50_latency_ms"]) * 1e3,
            "p99_us": float(r["p99_latency_ms"]) * 1e3}  # fmt: skip


def measure(tb: Testbed, way: str, n: int) -> dict:
    cmd, ns = bench_cmd(tb, way, n)
    r0, l0 = tb.redis_cpu_s(), tb.relay_cpu_s() or 0.0
    out = parse_csv(run(cmd, netns=ns))
    r1, l1 = tb.redis_cpu_s(), tb.relay_cpu_s() or 0.0
    out["redis_cpu_us"] = (r1 - r0) * 1e6 / n
    out["relay_cpu_us"] = (l1 - l0) * 1e6 / n if way == "relay" else 0.0
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rundir", default="/run/uno-bench")
    a = ap.parse_args(argv)
    if not 100 <= a.requests <= 10_000_000 or not 1 <= a.rounds <= 50:
        ap.error("--requests must be 100-10000000, --rounds 1-50")
    print_machine()
    runs: dict[str, list[dict]] = {w: [] for w in WAYS}
    with Testbed(rundir=a.rundir, redis="relay") as tb:
        for _ in range(a.rounds):
            for w in WAYS:
                m = measure(tb, w, a.requests)
                runs[w].append(m)
                print(f"{w:6} " + " ".join(f"{k} {v:.1f}" for k, v in m.items()), flush=True)
    figures = {w: {k: round(median([r[k] for r in rs]), 2) for k in rs[0]} for w, rs in runs.items()}
    final_json(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
