"""Migration and failover: duration and loss vs number of active flows, failover time, broken connections.

On an emulated host with OneSwitch and Redis (testkit.testbed: agent in-process, real NF processes and
packets), a stateful firewall (state in Redis) on the host:

- per N active flows (100, 1,000, 10,000, 100,000; --quick: 100, 1,000): N connections opened from the VM,
  then a sequenced UDP stream over min(N, 1000) of them (traffic gen -> sink, 6000 packets at ~1500/s); 1 s
  in, the firewall is migrated host <-> sNIC (alternating). duration_ms = the protocol's start..release,
  remap_ms = OneSwitch's remap (the switch-over: after the `prepare` step installed the target's rules,
  prepare_ms), lost = packets the sink did not get, latency_during_ms = the stream's max one-way latency.
  Medians over the repeats. The state stays in Redis: duration should not grow with N.
- the same, side by side, with the firewall run with `--store local` (its connection table in its process),
  moved OpenNF-style (migration/localstate.py: the target buffers, the state is exported from the old
  instance and imported into the target, which replays its buffer): local_* figures, plus the state's size
  and the export/import times; these grow with N. conn_kept / local_conn_kept: a connection opened from the
  VM before the moves passes from the wire after each of them (1 = every move kept it).
- failover: kill -9 the firewall under a 1000 packets/s stream on an established connection (wire -> VM);
  failover_ms = kill -> first packet counted by the replacement (watchdog at 30 ms probes, new instance
  started, port remapped). broken_conns: of the connections opened before the kill, how many no longer pass
  after it (1 tested per store): with the state in Redis and with `--store local` side by side; and with a
  pre-started standby (failover_ms_standby: no start on the failover path). outage_ms: the packets of
  the 1000/s stream lost around the kill, in ms (the traffic's own view of the gap).

- warm slots (`--part fo` alone, or in the full run): failover (kill -9, new instance) cold and into a warm
  slot (nf_local/slots.py), alternating, and the stateless move without and with slots at the first two
  N: failover_ms_cold/_slot, failover_start_ms_*, outage_ms_*, duration_ms_cold/_slot, start_ms_*; each row
  also has the start's step times (attach, relays, nf spawn, health) and the remap's OneSwitch vs call time.

- (d) scale-out/in: goodput vs offered rate over time, 1 -> 2 -> 4 -> 1 instances under a rising then
  falling rate, Redis vs `--store local` (bench/migration/scale.py; plot in bench/out/migration/scale.png).

- the buffered move's hold (bench/migration/hold.py): the IPS moved sNIC -> host and back under an unpaced
  TCP stream; ips_hold_gap_ms = the receiver's longest gap between two data segments around a move (median),
  ips_drain_ms = the drain step. drain_ms (every part): the moves' drain step (the old instance's own answer).

    ./uno bench migration [--quick] [--repeats N] [--part d|fo|hold]
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
from testkit.testbed import EST_PORT, Testbed, report  # noqa: E402

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


def open_flows(tb: Testbed, flows: int) -> None:
    """N connections (one packet each) from the VM; a slower rate for large N so the NF keeps up."""
    run = next(RUN)
    sink = tb.sink("out", run, expect=flows, idle_ms=2000)
    report(tb.gen("vm", run, flows=flows, pkts=1, rate=5000 if flows <= 10_000 else 8000), timeout=600)
    report(sink, timeout=600)


def one_migration(tb: Testbed, flows: int, target: str) -> dict:
    open_flows(tb, flows)
    sflows = min(flows, 1000)
    pkts = max(2, 6000 // sflows)
    run = next(RUN)
    sink = tb.sink("out", run, expect=sflows * pkts, idle_ms=3000)
    gen = tb.gen("vm", run, flows=sflows, pkts=pkts, rate=1500)
    time.sleep(1.0)
    tb.agent.migrate(tb.agent.state.nfs["fw"], target)
    res = tb.agent.last_migration
    report(gen)
    got = report(sink)
    row = {
        "flows": flows, "target": target, "duration_ms": round(res.duration_ms, 1), "remap_ms": res.remap_ms,
        "remap_wall_ms": round(res.step_ms("remap") or 0, 1), "drain_ms": round(res.step_ms("drain") or 0, 1), "start_ms": round(res.step_ms("start") or 0, 1),
        "prepare_ms": res.prepare_ms, "prepare_wall_ms": round(res.step_ms("prepare") or 0, 1),
        "sent": got["expected"], "lost": got["lost"], "latency_max_ms": round(got["latency_us"]["max"] / 1000, 2),
        # the old instance's own drain answer (POST /drain): frames it took after the request; None = polled
        "drain_late": sum(a.get("late", 0) for a in res.drain.values()) if res.drain else None,
    }  # fmt: skip
    if getattr(res, "protocol", None) == "local-state":
        row.update({
            "export_ms": round(res.step_ms("export") or 0, 1), "import_ms": round(res.step_ms("import") or 0, 1),
            "state_bytes": res.state_bytes, "state_entries": res.state_entries, "replayed": res.replayed,
            "buffer_overflow": res.buffer_overflow,
        })  # fmt: skip
    return row


def wait_slots(tb: Testbed, timeout: float = 60) -> None:
    """Until every location has its warm slot(s) (no-op without slots)."""
    pool = tb.runtime.pool
    deadline = time.monotonic() + timeout
    while pool.per_domain and min(pool.counts().values()) < pool.per_domain:
        if time.monotonic() > deadline:
            raise RuntimeError(f"warm slots not refilled: {pool.counts()}")
        time.sleep(0.05)


def move_series(store: str, flow_counts: list[int], repeats: int, slots: int = 0) -> tuple[list[dict], int]:
    """Moves host <-> sNIC per N; returns the rows and whether the connection opened first passed from the
    wire after every move (checked after each one, which also keeps it from idling out: 60 s).
    `slots`: warm slots per location (the target then takes one; refilled before each move)."""
    rows = []
    with Testbed(rundir=RUNDIR, store=store, drain_s=0.5, warm_slots=slots) as tb:
        tb.add_firewall(at="host")
        burst(tb, "vm", EST_PORT)
        i = 0
        for n in flow_counts:
            for _ in range(repeats):
                wait_slots(tb)
                r = one_migration(tb, n, "snic0" if i % 2 == 0 else "host")
                r["slot"] = int(tb.runtime.last_start.get("slot", False))
                r["conn_kept"] = int(burst(tb, "out", EST_PORT, expect_none=True)["received"] == 50)
                i += 1
                rows.append(r)
                print(f"migration store={store} " + " ".join(f"{k}={v}" for k, v in r.items()), flush=True)
    return rows, min((r["conn_kept"] for r in rows), default=0)


def failover_run(store: str, standby: bool = False, slots: int = 0) -> dict:
    with Testbed(rundir=RUNDIR, store=store, drain_s=0.5, warm_slots=slots) as tb:
        tb.add_firewall(at="host")
        burst(tb, "vm", EST_PORT)
        ok_before = burst(tb, "out", EST_PORT)["received"] == 50
        if standby:
            tb.agent.start_standby("fw")
        wait_slots(tb)
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
            "store": store, "standby": standby, "slots": slots, "start": dict(tb.runtime.last_start),
            "failover_ms": round(restored, 1) if restored else None,
            "failover_start_ms": ev["start_ms"], "failover_remap_ms": ev["remap_ms"],
            "failover_remap_wall_ms": ev.get("remap_wall_ms"), "failover_total_ms": ev["total_ms"],
            "stream_lost": got["lost"], "outage_ms": got["lost"],  # 1000 packets/s: 1 lost packet = 1 ms
            "broken_conns": int(ok_before and not passes_after),
            "health_ms": tb.runtime.last_start.get("health_ms"),
        }  # fmt: skip


def rest_remap_run(calls: int = 20) -> dict:
    """The agent's remap call over REST, side by side: a new TCP connection per call (as before) vs the
    kept-alive connection (OneSwitchClient's pool), alternating, same vport moved between its port and a warm
    slot's port on the host switch. Per call: wall time, OneSwitch's own `duration_ms`, their difference (REST)."""
    from host_datapath.oneswitch_client import OneSwitchClient

    with Testbed(rundir=RUNDIR, store="redis", drain_s=0.5, warm_slots=1) as tb:
        tb.add_firewall(at="host")
        wait_slots(tb)
        nf = tb.agent.state.nfs["fw"]
        base = tb.host.oneswitch().client()
        cur = next(p for p in base.ports() if p.vport == nf.vport)
        slot = tb.runtime.pool.take("host")
        assert slot is not None
        try:
            clients = {
                "fresh": OneSwitchClient(base.base, token=base.token, pool_size=0),
                "kept": OneSwitchClient(base.base, token=base.token),
            }
            clients["kept"].health()  # the connection a running agent already has open
            rows: dict[str, list[tuple[float, float]]] = {"fresh": [], "kept": []}
            targets = [("host", slot.ofport), (cur.switch, cur.port)]
            for _ in range(calls):
                for kind, c in clients.items():
                    for sw, port in targets:
                        t0 = time.perf_counter()
                        r = c.remap(nf.vport, sw, port, drain_ms=0)
                        rows[kind].append(((time.perf_counter() - t0) * 1000, r.duration_ms))
            clients["kept"].close()
        finally:
            tb.runtime.local.destroy_slot(slot)
    out: dict = {"rest_remap_calls": calls * 2}
    for kind, rs in rows.items():
        out[f"rest_remap_wall_ms_{kind}"] = round(median([w for w, _ in rs]), 2)
        out[f"rest_remap_os_ms_{kind}"] = round(median([d for _, d in rs]), 2)
        out[f"rest_overhead_ms_{kind}"] = round(median([w - d for w, d in rs]), 2)
    print("rest " + " ".join(f"{k}={v}" for k, v in out.items()), flush=True)
    return out


def slots_part(flow_counts: list[int], repeats: int) -> dict:
    """Side by side in one run: failover (kill -9, new instance) cold and into a warm slot, alternating, and
    the stateless move without and with slots (N = `flow_counts`)."""
    fos: dict[int, list[dict]] = {0: [], 1: []}
    for _ in range(repeats):
        for slots in (0, 1):
            r = failover_run("redis", slots=slots)
            print("failover " + " ".join(f"{k}={v}" for k, v in r.items()), flush=True)
            fos[slots].append(r)
    moves = {slots: move_series("redis", flow_counts, repeats, slots=slots)[0] for slots in (0, 1)}
    rest = rest_remap_run()

    def fmed(slots: int, key: str) -> float | None:
        vals = [r[key] for r in fos[slots] if r[key] is not None]
        return median(vals) if vals else None

    def mmed(slots: int, key: str) -> list[float]:
        return [median([r[key] for r in moves[slots] if r["flows"] == n]) for n in flow_counts]

    return {
        "failover_ms_cold": fmed(0, "failover_ms"), "failover_ms_slot": fmed(1, "failover_ms"),
        "failover_start_ms_cold": fmed(0, "failover_start_ms"), "failover_start_ms_slot": fmed(1, "failover_start_ms"),
        "failover_remap_ms_cold": fmed(0, "failover_remap_ms"), "failover_remap_ms_slot": fmed(1, "failover_remap_ms"),
        "outage_ms_cold": fmed(0, "outage_ms"), "outage_ms_slot": fmed(1, "outage_ms"),
        "broken_conns_slot": sum(r["broken_conns"] for r in fos[1]),
        "slot_flows": flow_counts,
        "duration_ms_cold": mmed(0, "duration_ms"), "duration_ms_slot": mmed(1, "duration_ms"),
        "start_ms_cold": mmed(0, "start_ms"), "start_ms_slot": mmed(1, "start_ms"),
        "remap_ms_slot": mmed(1, "remap_ms"), "remap_wall_ms_slot": mmed(1, "remap_wall_ms"),
        "failover_remap_wall_ms_slot": fmed(1, "failover_remap_wall_ms"),
        "lost_slot": sum(r["lost"] for r in moves[1]), "moves_in_slot": sum(r["slot"] for r in moves[1]),
        "failover_health_ms_slot": fmed(1, "health_ms"), "failover_total_ms_slot": fmed(1, "failover_total_ms"),
        **rest,
    }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument(
        "--part", choices=["all", "d", "fo", "hold"], default="all",
        help="d: only scale-out/in; fo: only failover and moves with and without warm slots (N = 100, 1000); "
        "hold: only the IPS's buffered moves under a TCP stream",
    )  # fmt: skip
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench migration: needs root (namespaces, OVS)", file=sys.stderr)
        return 2
    flow_counts = [100, 1000] if args.quick else [100, 1000, 10_000, 100_000]
    repeats = args.repeats or (1 if args.quick else 3)
    print_machine()
    from bench.migration.hold import run_part as hold_part
    from bench.migration.scale import run_part as scale_part

    if args.part == "hold":
        final_json(hold_part(repeats, RUNDIR))
        return 0
    if args.part == "d":
        final_json(scale_part(args.quick, RUNDIR))
        return 0
    if args.part == "fo":
        final_json(slots_part(flow_counts[:2], repeats))
        return 0
    rows, kept = move_series("redis", flow_counts, repeats)
    lrows, lkept = move_series("local", flow_counts, repeats)
    fo = {s: failover_run(s) for s in ("redis", "local")}
    fo["standby"] = failover_run("redis", standby=True)
    for r in fo.values():
        print("failover " + " ".join(f"{k}={v}" for k, v in r.items()), flush=True)
    slots = slots_part(flow_counts[:2], repeats)
    scale = scale_part(args.quick, RUNDIR)
    hold = hold_part(repeats, RUNDIR)

    def med(n: int, key: str, rs: list[dict] = rows) -> float:
        return median([r[key] for r in rs if r["flows"] == n])

    final_json({
        "flows": flow_counts,
        "duration_ms": [med(n, "duration_ms") for n in flow_counts],
        "remap_ms": [med(n, "remap_ms") for n in flow_counts],
        "prepare_ms": [med(n, "prepare_ms") for n in flow_counts],
        "lost": [sum(r["lost"] for r in rows if r["flows"] == n) for n in flow_counts],
        "sent": [sum(r["sent"] for r in rows if r["flows"] == n) for n in flow_counts],
        "latency_during_ms": [med(n, "latency_max_ms") for n in flow_counts],
        "drain_ms": [med(n, "drain_ms") for n in flow_counts],
        "repeats": repeats,
        "failover_ms": fo["redis"]["failover_ms"],
        "failover_ms_local": fo["local"]["failover_ms"],
        "failover_ms_standby": fo["standby"]["failover_ms"],
        "stream_lost_failover": fo["redis"]["stream_lost"],
        "stream_lost_failover_standby": fo["standby"]["stream_lost"],
        "outage_ms": fo["redis"]["outage_ms"],
        "outage_ms_standby": fo["standby"]["outage_ms"],
        "broken_conns": fo["redis"]["broken_conns"],
        "broken_conns_local": fo["local"]["broken_conns"],
        **slots,
        **scale,
        **hold,
        "local_duration_ms": [med(n, "duration_ms", lrows) for n in flow_counts],
        "local_remap_ms": [med(n, "remap_ms", lrows) for n in flow_counts],
        "local_prepare_ms": [med(n, "prepare_ms", lrows) for n in flow_counts],
        "local_export_ms": [med(n, "export_ms", lrows) for n in flow_counts],
        "local_import_ms": [med(n, "import_ms", lrows) for n in flow_counts],
        "local_state_bytes": [med(n, "state_bytes", lrows) for n in flow_counts],
        "local_lost": [sum(r["lost"] for r in lrows if r["flows"] == n) for n in flow_counts],
        "local_buffer_overflow": [sum(r["buffer_overflow"] for r in lrows if r["flows"] == n) for n in flow_counts],
        "local_sent": [sum(r["sent"] for r in lrows if r["flows"] == n) for n in flow_counts],
        "local_latency_during_ms": [med(n, "latency_max_ms", lrows) for n in flow_counts],
        "local_drain_ms": [med(n, "drain_ms", lrows) for n in flow_counts],
        "conn_kept": kept,
        "local_conn_kept": lkept,
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
