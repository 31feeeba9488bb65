"""Migration and failover: duration and loss vs number of active flows, failover time, broken connections.

On an emulated host with OneSwitch and Redis (migration.testbed: agent in-process, real NF processes and
packets), a stateful firewall (state in Redis) on the host:

- per N active flows (100, 1,000, 10,000; --quick: 100, 1,000): N connections opened from the VM, then a
  sequenced UDP stream over the same N flows (traffic gen -> sink, ~1500 packets/s); 1 s in, the firewall is
  migrated host <-> sNIC (alternating). duration_ms = the protocol's start..release, remap_ms = OneSwitch's
  remap, lost = packets the sink did not get, latency_during_ms = the stream's max one-way latency.
  Medians over the repeats. The state stays in Redis: duration should not grow with N.
- failover: kill -9 the firewall under a 1000 packets/s stream on an established connection (wire -> VM);
  failover_ms = kill -> first packet counted by the replacement (watchdog at 30 ms probes, new instance
  started, port remapped). broken_conns: of the connections opened before the kill, how many no longer pass
  after it (1 tested per store): with the state in Redis and with `--store local` side by side; and with a
  pre-started standby (failover_ms_standby: no start on the failover path).

- (d) scale-out/in: goodput vs offered rate over time, 1 -> 2 -> 4 -> 1 instances under a rising then
  falling rate, Redis vs `--store local` (bench/migration/scale.py; plot in bench/out/migration/scale.png).

    ./uno bench migration [--quick] [--part d]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import final_json, median, print_machine  # noqa: E402
from migration.testbed import EST_PORT, Testbed, report  # noqa: E402

RUNDIR = "/run/uno-bench"


def _run_ids():
    n = 1000
    while True:
        n += 1
        yield n


RUN = _run_ids()


def burst(tb: Testbed, side: str, dst_port: int, pkts: int = 50, flows: int = 1, expect_none=False) -> dict:
    run = next(RUN)
    sink = tb.sink("out" if side == "vm" else "vm", run, expect=pkts * flows, idle_ms=2000,
                   duration_ms=3000 if expect_none else 120_000)  # fmt: skip
    report(tb.gen(side, run, flows=flows, pkts=pkts, rate=5000, dst_port=dst_port))
    return report(sink)


def one_migration(tb: Testbed, flows: int, target: str) -> dict:
    burst(tb, "vm", 5001, pkts=1, flows=flows)  # open the N connections
    pkts = max(2, 6000 // flows)
    run = next(RUN)
    sink = tb.sink("out", run, expect=flows * pkts, idle_ms=3000)
    gen = tb.gen("vm", run, flows=flows, pkts=pkts, rate=1500)
    time.sleep(1.0)
    tb.agent.migrate(tb.agent.state.nfs["fw"], target)
    res = tb.agent.last_migration
    report(gen)
    got = report(sink)
    return {
        "flows": flows, "target": target, "duration_ms": round(res.duration_ms, 1), "remap_ms": res.remap_ms,
        "drain_ms": round(res.step_ms("drain") or 0, 1), "start_ms": round(res.step_ms("start") or 0, 1),
        "sent": got["expected"], "lost": got["lost"], "latency_max_ms": round(got["latency_us"]["max"] / 1000, 2),
    }  # fmt: skip


def failover_run(store: str, standby: bool = False) -> dict:
    with Testbed(rundir=RUNDIR, store=store, drain_s=0.5) as tb:
        tb.add_firewall(at="host")
        burst(tb, "vm", EST_PORT)
        ok_before = burst(tb, "out", EST_PORT)["received"] == 50
        if standby:
            tb.agent.start_standby("fw")
        tb.start_watchdog()
        nf = tb.agent.state.nfs["fw"]
        old = nf.instances[0]
        run = next(RUN)
        sink = tb.sink("vm", run, expect=3000, idle_ms=3000, duration_ms=30_000)
        gen = tb.gen("out", run, flows=1, pkts=3000, rate=1000, dst_port=EST_PORT)
        time.sleep(0.5)
        t_kill = time.monotonic()
        os.kill(old.pid, signal.SIGKILL)
        restored = None
        while time.monotonic() - t_kill < 30:
            cur = nf.instances[0]
            if cur.id != old.id:
                st = tb.runtime.stats(cur) or {}
                if int(st.get("counters", {}).get("rx", 0) or 0) > 0:
                    restored = (time.monotonic() - t_kill) * 1000
                    break
            time.sleep(0.002)
        report(gen)
        got = report(sink)
        tb.watchdog.stop()
        ev = next(h for h in reversed(tb.agent.state.history) if h["event"] == "nf-failover")
        passes_after = burst(tb, "out", EST_PORT, expect_none=True)["received"] > 0
        return {
            "store": store, "standby": standby, "failover_ms": round(restored, 1) if restored else None,
            "failover_start_ms": ev["start_ms"], "failover_remap_ms": ev["remap_ms"],
            "stream_lost": got["lost"], "broken_conns": int(ok_before and not passes_after),
        }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--part", choices=["all", "d"], default="all", help="d: only scale-out/in")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench migration: needs root (namespaces, OVS)", file=sys.stderr)
        return 2
    flow_counts = [100, 1000] if args.quick else [100, 1000, 10_000]
    repeats = args.repeats or (1 if args.quick else 3)
    print_machine()
    from bench.migration.scale import run_part as scale_part

    if args.part == "d":
        final_json(scale_part(args.quick, RUNDIR))
        return 0
    rows = []
    with Testbed(rundir=RUNDIR, store="redis", drain_s=0.5) as tb:
        tb.add_firewall(at="host")
        i = 0
        for n in flow_counts:
            for _ in range(repeats):
                r = one_migration(tb, n, "snic0" if i % 2 == 0 else "host")
                i += 1
                rows.append(r)
                print("migration " + " ".join(f"{k}={v}" for k, v in r.items()), flush=True)
    fo = {s: failover_run(s) for s in ("redis", "local")}
    fo["standby"] = failover_run("redis", standby=True)
    for r in fo.values():
        print("failover " + " ".join(f"{k}={v}" for k, v in r.items()), flush=True)
    scale = scale_part(args.quick, RUNDIR)

    def med(n: int, key: str) -> float:
        return median([r[key] for r in rows if r["flows"] == n])

    final_json({
        "flows": flow_counts,
        "duration_ms": [med(n, "duration_ms") for n in flow_counts],
        "remap_ms": [med(n, "remap_ms") for n in flow_counts],
        "lost": [sum(r["lost"] for r in rows if r["flows"] == n) for n in flow_counts],
        "sent": [sum(r["sent"] for r in rows if r["flows"] == n) for n in flow_counts],
        "latency_during_ms": [med(n, "latency_max_ms") for n in flow_counts],
        "repeats": repeats,
        "failover_ms": fo["redis"]["failover_ms"],
        "failover_ms_local": fo["local"]["failover_ms"],
        "failover_ms_standby": fo["standby"]["failover_ms"],
        "stream_lost_failover": fo["redis"]["stream_lost"],
        "stream_lost_failover_standby": fo["standby"]["stream_lost"],
        "broken_conns": fo["redis"]["broken_conns"],
        "broken_conns_local": fo["local"]["broken_conns"],
        **scale,
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
