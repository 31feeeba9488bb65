"""Operating NFs without disruption (issue 28): flow spread over scaled-out instances, reordering across moves,
autoscaling's reaction to a load step, and (from bench/ops_update.py when present) live update.

On an emulated host with OneSwitch and Redis (testkit.testbed: agent in-process, real NF processes, real
packets), the stateful firewall (state in Redis) on the host, chained VM <-> firewall <-> wire:

- udp_spread_min_share / tcp_spread_min_share: with OneSwitch's default select hash (symmetric L3/L4 with UDP
  ports, oneswitch/README.md "Scale-out"), the firewall scaled to 3 instances (POST /v1/nfs/fw/scale's path:
  Agent.scale), 30 UDP flows of ONE address pair (VM -> wire, source ports differ) from `traffic gen` for
  30 s, then 30 TCP flows (their SYN+ACK and FIN+ACK from the server's address), with the agent's balancer
  (nf_agent.balance) run every 0.5 s; the frames each instance received (its own rx counter); the smallest
  share (1/3 = even, 0 = an idle instance) after the balancer's last weight change (*_min_share) and before
  its first (*_min_share_hash: the hash alone); *_balance_s: first frame -> its last change; *_lost: data
  packets the wire's sink missed, *_reordered: packets it got after a later one of their flow (both over
  the whole send, the weight changes included). Side by side, each on a fresh host, 2 s of flows with the
  balancer off: *_5tuple (`select_hash: 5tuple`, dp_hash, not symmetric) and *_ovs_default (`select_hash:
  ovs`: OVS's own hash, UDP ports left out).
- reordered_on_move: sequenced UDP at 50 Mbit/s (8 flows, 1000-byte frames) through the firewall while it
  is moved host <-> snic0 10 times (--quick: 4, scaled to 10); the sink's count of packets that arrived
  after a later one of their flow, lost packets, and the stream's worst one-way latency (the hold's cost).
  Side by side in the same run, first: the same with the plain make-before-break move (*_unheld; the target
  does not hold packets until the old instance drained: the default before issue 28).
- reordered_on_scale: the same stream (32 flows) while the firewall is resized 1 -> 2 -> 3 -> 2 -> 1 -> ...
  (8 changes, --quick: 4; per 10 changes) with the agent's defaults (scale-outs and scale-ins held:
  MigrationConfig.hold_scale_in); side by side first: *_unheld, neither held (the new instances process at
  once, before the old ones flushed the moved flows' packets), and *_out_only, scale-ins not held (the
  default before: the staying instances process the leaving ones' flows at once, while the leaving ones may
  still hold their earlier packets).
- autoscale_out_s: the firewall with autoscale {min 1, max 3, target_util set so the base load is at 0.9 of
  it}; the agent's loop (sample + autoscale every 0.5 s, as `uno agent serve`) under a base load of 30 flows;
  at t0 the offered load triples; autoscale_out_s = t0 -> the first packet counted by a new instance.
- update_lost, update_broken_conns, update_ms: bench/ops_update.py's figures (live software update), or null
  with update_reason when that module is not there.

Progress on stderr; the last line is one JSON object.

    ./uno bench ops [--quick]
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import final_json, machine  # noqa: E402
from migration.protocol import MigrationConfig, rx_count  # noqa: E402
from testkit.scale_traffic import GEN_OUT_MAC, GEN_VM_MAC  # noqa: E402
from testkit.testbed import FW_CONFIG, Testbed, report  # noqa: E402

# The spread's frames carry MACs that are not the namespaces' own (the chain steers by them): the TCP flows'
# segments would else meet the kernels, whose RSTs close the firewall's connections.
GEN_MACS = (GEN_VM_MAC, GEN_OUT_MAC)

RUNDIR = "/run/uno-bench-ops"
SAMPLE_S = 0.5


def log(msg: str) -> None:
    print(f"[ops] {msg}", file=sys.stderr, flush=True)


def rx_by_instance(tb: Testbed, nf_id: str = "fw") -> dict[str, int]:
    """Each instance's rx counter; a stats call without an answer (a loaded machine) is asked again for up to
    2 s, so a missing reading does not count as 0 (then it does, logged)."""
    out = {}
    for inst in tb.agent.state.nfs[nf_id].instances:
        deadline = time.monotonic() + 2.0
        while not (st := tb.runtime.stats(inst)) and time.monotonic() < deadline:
            time.sleep(0.05)
        if not st:
            log(f"no stats from {inst.id}: counted 0")
        out[inst.id] = rx_count(st) or 0
    return out


def _shares(a: dict[str, int], b: dict[str, int]) -> tuple[float, list[int]]:
    """The smallest share of the frames the instances received between snapshots `a` and `b`, and the counts
    (sorted)."""
    got = sorted(b[k] - a.get(k, 0) for k in b)
    total = sum(got)
    return (round(got[0] / total, 3) if total else 0.0), got


def _spread_one(tb: Testbed, proto: str, run: int, port: int, flows: int, per_flow: int, rate: float,
                balanced: bool) -> dict:  # fmt: skip
    """One proto's flows through the scaled firewall. Unbalanced: the frames each instance got over the whole
    send (the hash alone). Balanced: the agent's balancer runs every SAMPLE_S as in `uno agent serve`; the
    hash alone is the share before its first weight change, the balanced one the share from 1 s after its
    last change to the end, and `balance_s` the time from the first frame to that last change."""
    p = f"{proto}_spread"
    snap0 = rx_by_instance(tb)
    secs = flows * per_flow / rate
    sink = tb.sink(
        "out", run=run, expect=flows * per_flow, idle_ms=1500, duration_ms=int(secs * 1000) + 60_000
    )
    g = tb.gen("vm", run=run, flows=flows, pkts=per_flow, rate=rate, dst_port=port, tcp=proto == "tcp",
               macs=GEN_MACS)  # fmt: skip
    t0 = time.monotonic()
    snaps: list[tuple[float, dict[str, int]]] = []
    changes: list[dict] = []
    while g.poll() is None:
        time.sleep(SAMPLE_S)
        snaps.append((time.monotonic() - t0, rx_by_instance(tb)))
        if balanced:
            d = tb.agent.balance().get("fw")
            if d is not None:
                at = round(time.monotonic() - t0, 2)
                changes.append({"t": at, "weights": d.weights, "why": d.why, "snap": len(snaps) - 1})
                log(f"{proto} balance at {changes[-1]['t']} s: {d.weights} ({d.why})")
    report(g, timeout=secs + 120)
    r = report(sink, timeout=secs + 180)
    time.sleep(0.5)
    end = rx_by_instance(tb)
    out: dict = {
        f"{p}_lost": flows * per_flow - int(r.get("received", 0)),
        f"{p}_reordered": r.get("reordered", 0),
    }
    if not balanced:
        out[f"{p}_min_share"], out[f"{p}_frames_per_instance"] = _shares(snap0, end)
        log(f"{proto} spread (hash alone): {out}")
        return out
    first = snaps[changes[0].pop("snap")][1] if changes else end  # taken just before the first change
    for c in changes[1:]:
        c.pop("snap")
    settled_t = changes[-1]["t"] + 1.0 if changes else 0.0
    settled = next((s for t, s in snaps if t >= settled_t), end)
    out[f"{p}_min_share_hash"], out[f"{p}_frames_per_instance_hash"] = _shares(snap0, first)
    out[f"{p}_min_share"], out[f"{p}_frames_per_instance"] = _shares(settled, end)
    out[f"{p}_balance_s"] = changes[-1]["t"] if changes else 0.0
    out[f"{p}_weight_changes"] = changes
    out[f"{p}_latency_max_ms"] = round(r.get("latency_us", {}).get("max", 0) / 1000, 1)
    log(f"{proto} spread: {out}; sink {r}")
    return out


def udp_spread(tb: Testbed, flows: int = 30, balanced: bool = True) -> dict:
    """30 UDP, then 30 TCP flows of one address pair over the firewall's 3 instances: each instance's share of
    the frames, and the data packets the wire's sink missed (a TCP flow whose SYN+ACK reached an instance that
    did not see its SYN yet is refused by the firewall). `balanced`: 30 s of flows with the agent's balancer
    (the share before its first change and after its last), else 2 s with the hash alone (balance off)."""
    tb.agent.update_nf("fw", {"balance": balanced})
    out: dict = {}
    per_flow, rate = (2000, 2000.0) if balanced else (200, 3000.0)
    for proto, run, port in (("udp", 11, 5011), ("tcp", 12, 5012)):
        tb.agent.scale("fw", 3)  # per proto: each starts with equal weights (a scale change resets them)
        out.setdefault("udp_spread_locations", [i.location for i in tb.agent.state.nfs["fw"].instances])
        out |= _spread_one(tb, proto, run, port, flows, per_flow, rate, balanced)
        tb.agent.scale("fw", 1)
    for k in ("", "_hash"):
        if f"udp_spread_frames_per_instance{k}" in out:
            got = out[f"udp_spread_frames_per_instance{k}"]
            out[f"udp_spread_flows_per_instance{k}"] = [round(flows * v / max(1, sum(got)), 1) for v in got]
    out["spread_stream"] = {"flows": flows, "per_flow": per_flow, "pps": rate}
    return out


def by_step(times_ns: list[int], starts: list[tuple[int, str]]) -> dict[str, int]:
    """Pure: events at `times_ns` (wall ns) counted by the step that last started before each (`starts`: (wall
    ns, label) in time order; "before" when none had)."""
    out: dict[str, int] = {}
    for at in times_ns:
        label = "before"
        for t, name in starts:
            if t <= at:
                label = name
        out[label] = out.get(label, 0) + 1
    return out


def _across(tb: Testbed, run: int, flows: int, port: int, steps: int, step) -> dict:
    """Sequenced UDP at 50 Mbit/s (`flows` flows of 1,000-byte frames, VM -> wire) while `step(k)` runs `steps`
    times 1.5 s apart (it returns the step's label); the sink's report, with `reordered_by_step`: the
    reordered packets it lists, counted by the step during or after which they arrived, and `lost_by_step`:
    the missing ones it lists, by the step during or after which they were sent (flows round-robin at the
    paced rate: sequence number s left about s x flows / rate after the generator started)."""
    size = 1000
    pps = 50e6 / 8 / size
    gap_s = 1.5
    secs = steps * gap_s + 3.0
    per_flow = int(pps * secs / flows)
    sink = tb.sink(
        "out", run=run, expect=per_flow * flows, idle_ms=2000, duration_ms=int(secs * 1000) + 60_000
    )
    g = tb.gen("vm", run=run, flows=flows, pkts=per_flow, rate=pps, size=size, dst_port=port)
    t_gen = time.time_ns()
    time.sleep(1.0)
    starts = []
    for k in range(steps):
        t = time.time_ns()  # the sink stamps with the wall clock too
        starts.append((t, step(k)))
        time.sleep(gap_s)
    report(g, timeout=secs + 120)
    r = report(sink, timeout=secs + 180)
    r["reordered_by_step"] = by_step([e["at_ns"] for e in r.get("reorder_events", [])], starts)
    r["lost_by_step"] = by_step(
        [t_gen + int(seq * flows / pps * 1e9) for _, seq in r.get("missing", [])], starts
    )
    log(f"sink: {r}")
    return r


def _per_10(r: dict, what: str, suffix: str, steps: int) -> dict:
    """Reordered and lost datagrams per 10 `what`s, and the stream's worst latency."""
    per10 = 10 / steps
    return {
        f"reordered_on_{what}{suffix}": round(r.get("reordered", 0) * per10, 1),
        f"lost_on_{what}{suffix}": round(r.get("lost", 0) * per10, 1),
        f"latency_max_ms_on_{what}{suffix}": round(r.get("latency_us", {}).get("max", 0) / 1000, 1),
        f"reordered_by_step_on_{what}{suffix}": r.get("reordered_by_step", {}),
        f"lost_by_step_on_{what}{suffix}": r.get("lost_by_step", {}),
    }


def reorder_on_move(tb: Testbed, moves: int, held: bool = True) -> dict:
    """Sequenced UDP at 50 Mbit/s across `moves` moves host <-> snic0; reordered and lost per 10 moves.
    `held`: the agent's default (the target holds packets until the old instance drained), else the plain
    make-before-break move (the default before issue 28)."""
    suffix = "" if held else "_unheld"
    tb.agent.moves.buffer_types = MigrationConfig().buffer_types if held else frozenset({"ips"})

    def move(k: int) -> str:
        nf = tb.agent.state.nfs["fw"]
        target = "snic0" if nf.location == "host" else "host"
        tb.agent.migrate(nf, target)
        log(f"move {k + 1}/{moves} -> {target}")
        return f"to_{target}"

    flows = 8
    r = _across(tb, 21, flows, 5021, moves, move)
    tb.agent.moves.buffer_types = MigrationConfig().buffer_types
    return {
        **_per_10(r, "move", suffix, moves),
        f"moves{suffix}": moves,
        "move_stream": {"mbit_s": 50, "size": 1000, "flows": flows},
    }


SCALE_MODES = ("unheld", "out_only", "default")


def reorder_on_scale(tb: Testbed, changes: int, mode: str = "default") -> dict:
    """Sequenced UDP at 50 Mbit/s (32 flows) across `changes` scale changes 1 -> 2 -> 3 -> 2 -> 1 -> 2 ...;
    reordered and lost per 10 changes. `mode` (SCALE_MODES): "default", the agent's (a scale-out's new
    instances hold their packets until the old ones flushed; a scale-in's staying ones until the leaving
    ones drained: MigrationConfig.hold_scale_in); "out_only", scale-ins not held; "unheld", plain
    make-before-break both ways."""
    suffix = "" if mode == "default" else f"_{mode}"
    tb.agent.moves.buffer_types = MigrationConfig().buffer_types if mode != "unheld" else frozenset()
    tb.agent.moves.hold_scale_in = {"out_only": False, "unheld": False}.get(
        mode, MigrationConfig().hold_scale_in
    )
    counts = [2, 3, 2, 1]

    def change(k: int) -> str:
        n = counts[k % len(counts)]
        before = len(tb.agent.state.nfs["fw"].instances)
        tb.agent.scale("fw", n)
        log(f"scale {k + 1}/{changes} -> {n}")
        return f"{'out' if n > before else 'in'}_{before}_{n}"

    r = _across(tb, 41, 32, 5041, changes, change)
    tb.agent.scale("fw", 1)
    tb.agent.moves.buffer_types = MigrationConfig().buffer_types
    tb.agent.moves.hold_scale_in = MigrationConfig().hold_scale_in
    return {**_per_10(r, "scale", suffix, changes), f"scale_changes{suffix}": changes}


def autoscale_out(tb: Testbed, timeout_s: float = 30.0) -> dict:
    """The load triples under the agent's loop: seconds until a new instance serves."""
    agent = tb.agent
    if agent.state.nfs["fw"].location != "host":
        agent.migrate(agent.state.nfs["fw"], "host")
    base_pps, flows, size = 1500.0, 30, 1000
    base = tb.gen("vm", run=31, flows=flows, pkts=int(base_pps * 120 / flows), rate=base_pps, size=size,
                  dst_port=5031)  # fmt: skip
    t_end = time.monotonic() + 4.0
    while time.monotonic() < t_end:  # the monitor's EWMA settles on the base load
        agent.sample()
        time.sleep(SAMPLE_S)
    load = agent.ctx.monitor.measurement.nf_load.get("fw", 0.0)
    r_host = agent.ctx.cfg.profiles["firewall"]["r_host"]
    target = min(1.0, r_host * load / 0.9)
    agent.update_nf("fw", {"autoscale": {"min": 1, "max": 3, "target_util": target}})
    log(f"base load {load:.4f} Gbit/s; autoscale target_util {target:.6f}")
    step = tb.gen("vm", run=32, flows=flows, pkts=int(2 * base_pps * 120 / flows), rate=2 * base_pps,
                  size=size, dst_port=5032)  # fmt: skip
    t0 = time.monotonic()
    first = {i.id for i in agent.state.nfs["fw"].instances}
    served_s, decisions = None, []
    while time.monotonic() - t0 < timeout_s and served_s is None:
        agent.sample()
        changed = agent.autoscale()
        if changed:
            decisions.append({"t": round(time.monotonic() - t0, 2), **changed["fw"].to_json()})
            log(f"autoscale at {decisions[-1]['t']} s: {changed['fw'].to_json()}")
        for inst_id, rx in rx_by_instance(tb).items():
            if inst_id not in first and rx > 0:
                served_s = time.monotonic() - t0
        time.sleep(0.1 if decisions else SAMPLE_S)
    for p in (base, step):
        p.kill()
        p.wait()
    n = len(agent.state.nfs["fw"].instances)
    agent.update_nf("fw", {"autoscale": None})
    log(f"autoscale_out_s {served_s}; instances {n}")
    return {
        "autoscale_out_s": round(served_s, 2) if served_s is not None else None,
        "autoscale_instances": n,
        "autoscale_decisions": decisions,
    }


def update_figures(quick: bool) -> dict:
    try:
        mod = importlib.import_module("bench.ops_update")
    except ModuleNotFoundError:
        return {
            "update_lost": None, "update_broken_conns": None, "update_ms": None,
            "update_reason": "bench/ops_update.py (live update, helper upd) is not on this branch",
        }  # fmt: skip
    return mod.measure_update(rounds=1 if quick else 3)


def spread_with(env: dict[str, str], balanced: bool = True) -> dict:
    """`udp_spread` on a fresh host whose processes see `env` (OneSwitch's JVM reads JAVA_TOOL_OPTIONS: the
    emulated host's `oneswitch.select_hash: 5tuple` passes the same -D option)."""
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        with Testbed(rundir=RUNDIR, drain_s=0.5) as tb:
            vm = FW_CONFIG["rules"][0]
            fw = {**FW_CONFIG, "rules": [vm, {**vm, "proto": "tcp"}]}
            tb.add_nf("fw", "firewall", fw, at="host", macs=GEN_MACS)
            return udp_spread(tb, balanced=balanced)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--part", choices=["spread", "move", "scale", "autoscale", "update"], action="append")
    args = ap.parse_args()
    parts = args.part or ["spread", "move", "scale", "autoscale", "update"]
    log(f"machine {machine()}")
    figures: dict = {"quick": args.quick}
    if {"move", "scale", "autoscale"} & set(parts):
        with Testbed(rundir=RUNDIR, drain_s=0.5) as tb:
            tb.add_firewall("fw", at="host")
            if "move" in parts:
                figures |= reorder_on_move(tb, 4 if args.quick else 10, held=False)
                figures |= reorder_on_move(tb, 4 if args.quick else 10)
            if "scale" in parts:
                for mode in SCALE_MODES:
                    figures |= reorder_on_scale(tb, 4 if args.quick else 8, mode)
            if "autoscale" in parts:
                figures |= autoscale_out(tb)
    if "spread" in parts:
        figures |= spread_with({})
        for name, opt in (("5tuple", "dp_hash"), ("ovs_default", "ovs")):
            other = spread_with({"JAVA_TOOL_OPTIONS": f"-Doneswitch.select_method={opt}"}, balanced=False)
            figures |= {
                f"{k}_{name}": v
                for k, v in other.items()
                if k not in ("udp_spread_locations", "spread_stream")
            }
    if "update" in parts:
        figures |= update_figures(args.quick)
    final_json(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
