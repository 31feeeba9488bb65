"""OneSwitch: rule install rate vs plain OVS, physical/virtual rule ratio, remap time.

One emulated host (2 VMs, two sNICs with one Ethernet port each, unshaped PCIe) with OneSwitch (it reaches each
switch over the bridge's unix socket), NF ports on the host (vport 200), snic0 (201) and snic1 (202), plus a
spare port on snic0 for remaps; and, for (a), a plain OVS bridge (own instance, the same kind as the host's).

(a) rules/s: `ovs-ofctl -O OpenFlow13 add-flows TARGET FILE` of N rules, side by side (bench/oneswitch/rate.py):
    `oneswitch` (its TCP listener) and the plain OVS reached straight: `ovs` (its unix listener, the shortest
    path), `ovs_tcp` (TCP, the client in the bridge's namespace: the transport the controller uses to OneSwitch)
    and `ovs_relay` (through a socat TCP relay: one zero-logic forwarder hop). Every side is warmed up first
    (JIT), then the repeats rotate the order; medians. rate_ratio = OneSwitch / `ovs`; rate_ratio_tcp and
    rate_ratio_relay against the other two. NOTE: ovs-ofctl (3.1) sends a BARRIER after EVERY flow-mod and waits
    for its reply (checked on the wire), so this is a flow-mod + barrier round-trip rate; OneSwitch's virtual
    barrier needs a physical barrier round trip before it can answer, so it is latency-bound. Each run also
    takes the CPU per rule of every process on the path (`cpu_us_per_rule`).
(a2) pipelined: a raw OF1.3 client sends the same N FLOW_MODs back to back, then ONE barrier, timed to its
    reply (no error allowed, all N installed): rate_ratio_pipelined = OneSwitch / `ovs` (throughput).
(a3) per flow-mod latency: a raw client sends a flow-mod and a barrier and waits for the reply before the next,
    on `oneswitch` and `ovs`, rotating runs: added_latency_us_p50/p99 = OneSwitch's p50/p99 minus plain OVS's.
    With (a)'s CPU: cpu_us_per_flowmod (OneSwitch's process) beside ovs_cpu_us_per_flowmod (the plain vswitchd
    reached straight, same rules). The rules/s ratios are machine-bound (this shared 2-core machine's
    scheduling and wake-ups), marked so in the JSON; these per flow-mod figures are what OneSwitch adds.
(b) 3,024 random OF1.3 virtual rules (testkit/oneswitch/rulegen.py seed 2024, 3 tables, one ALL group, 7 vports
    on 3 switches): phys_virt_ratio = physical flows on all three switches (dump-flows, everything OneSwitch
    installed) / accepted virtual rules; also the ratio without OneSwitch's fixed rules (those present with no
    virtual rule); refusals by OneSwitch's reason. Then every accepted rule is checked for equivalence with a
    reference OVS by real packets (testkit/oneswitch/fullcheck.py): `checked` rules, `exercised` (a frame took
    it on the reference), `unreachable` (in a table no goto chain leads to: dead in both switches),
    `unexercised` (neither: target 0), `differences` (frames whose outputs differ, twice). `--quick` stops after 25 rounds of
    uncovering shadowed rules, so it checks a part of them (says so). Per-rule report: bench/out/oneswitch/
    equiv-2024.json, or --equiv-report PATH.
(c) remap time of vport 200 (host <-> snic0) vs the number of virtual rules on it (half match in_port=200,
    half output to it): OneSwitch's duration_ms (all barriers answered), medians; remap_ms = at 100 rules.
    In the same loop, scale-out: PUT instances host:200 + snic0 spare (1 -> 2) and back (2 -> 1), OneSwitch's
    `ms`, medians; scale_to_2_ms = at 100 rules. Then, side by side, remaps with drain_ms 0 (the old port's
    rules deleted at once: a break phase; remap_nodrain_ms_by_rules) and prepared remaps (POST
    .../prepare, then the remap: only the re-pointing; remap_prepared_ms_by_rules, prepare_ms_by_rules).

With `--wire-vlans 2` OneSwitch runs with `wire_vlans: 2` (frames may come in QinQ): (b) then reports how many
of the same rules that mode refuses, and checks the rest with frames that arrive QinQ as well.

    ./uno bench oneswitch [--quick] [--parts abc] [--equiv-report PATH] [--wire-vlans 1|2]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.common import final_json, median, print_machine
from bench.oneswitch.rate import (
    VPORTS,
    Side,
    bench_latency,
    bench_rate,
    bench_rate_pipelined,
    count_flows,
    ofctl,
    warm_up,
)
from emulated_host import naming as nm
from emulated_host.config import parse_config
from emulated_host.host import EmulatedHost
from host_datapath.oneswitch_client import OneSwitchError
from testkit.oneswitch import fullcheck, rulegen
from testkit.oneswitch.refswitch import RefSwitch

SPARE = fullcheck.SPARE  # physical port on snic0 where vport 200 moves
REF_TCP_PORT = 6653  # the plain OVS's ptcp listener, inside its own network namespace
REPORT = Path("bench/out/oneswitch/equiv-2024.json")  # (b)'s per-rule report unless --equiv-report
JIT = "C2 CompilerThre"  # the JVM's optimising compiler thread (comm is cut at 15 chars): warm = near 0
GC = "VM Thread"  # runs the serial collector's collections
# Unmeasured runs per side (least, most): until OneSwitch's JIT compiler is nearly idle (Side.warm). First the
# pipelined flow-mod + barrier pairs (fast), then a few of each measured kind.
WARM_UP = (5, 150)
WARMUPS = (2, 6)


def distribution(rules: rulegen.RuleSet) -> dict:
    fl = rules.flows
    share = lambda pred: round(sum(1 for f in fl if pred(f)) / len(fl), 3)  # noqa: E731
    return {
        "rules": len(fl),
        "tables": {t: share(lambda f, t=t: f.startswith(f"table={t},")) for t in range(3)},
        "in_port": share(lambda f: ",in_port=" in f),
        "output": share(lambda f: "output:" in f),
        "two_outputs": share(lambda f: f.count("output:") >= 2),
        "group": share(lambda f: "group:" in f),
        "in_port_action": share(lambda f: ",in_port," in f.split("actions=")[1] + ","),
        "goto_table": share(lambda f: "goto_table" in f),
        "vlan_ops": share(lambda f: "push_vlan" in f or "pop_vlan" in f),
        "vlan_match": share(lambda f: "dl_vlan=" in f or "vlan_tci=" in f),
        "set_field": share(lambda f: "set_field" in f),
    }


def bench_ratio(listen: str, physical: dict[str, str], n: int, check: dict, report: Path) -> dict:
    """(b): install the n rules through OneSwitch, count the physical rules, then check every accepted rule
    against the reference by real packets (testkit/oneswitch/fullcheck.py; `check`: its arguments)."""
    ofctl("del-flows", listen)
    ofctl("del-groups", listen)
    base = {sw: count_flows(t) for sw, t in physical.items()}
    rules = rulegen.generate(2024, VPORTS, n_rules=n, tables=3, groups=True, prio_max=60000)
    counted: dict = {}

    def count(accepted: list[str]) -> None:
        counted["physical"] = {sw: count_flows(t) for sw, t in physical.items()}
        counted["virtual"] = count_flows(listen)

    t0 = time.perf_counter()
    res = fullcheck.check(rules, after_install=count, **check)
    secs = time.perf_counter() - t0
    phys, virt = counted["physical"], counted["virtual"]
    total, fixed = sum(phys.values()), sum(base.values())
    summary = res.summary()
    out = {
        "virtual_generated": n,
        "virtual_accepted": len(res.accepted),
        "virtual_dumped": virt,
        "refused": len(res.refused),
        "refused_by_reason": summary["refused_by_reason"],
        "physical": phys,
        "physical_fixed": base,
        "phys_virt_ratio": round(total / max(virt, 1), 3),
        "phys_virt_ratio_without_fixed": round((total - fixed) / max(virt, 1), 3),
        "install_s": summary["seconds"]["install"],
        "checked": summary["checked"],
        "exercised": summary["exercised"],
        "unreachable": summary["unreachable"],
        "unexercised": summary["unexercised"],
        "differences": summary["differences"],
        "check": {
            k: summary[k]
            for k in (
                "exercised_first_round",
                "rounds",
                "restored",
                "restore_refused",
                "frames",
                "flaky",
                "stale",
                "counter_mismatches",
                "unreached",
            )
        },  # fmt: skip
        "check_s": round(secs, 1),
        "distribution": distribution(rules),
    }
    for d in res.differences[:10]:
        print(d.text(), file=sys.stderr)
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps(res.report(), indent=1))
    ofctl("del-flows", listen)
    ofctl("del-groups", listen)
    return out


def bench_remap(client, listen: str, sizes: list[int], repeats: int, workdir: Path) -> dict:
    out = {}
    for n in sizes:
        ofctl("del-flows", listen)
        rules = [
            f"table=0,priority={100 + i},in_port=200,ip,nw_dst=10.1.{i >> 8 & 255}.{i & 255},actions=output:1"
            if i % 2 == 0
            else f"table=0,priority={100 + i},in_port=100,ip,nw_dst=10.1.{i >> 8 & 255}.{i & 255},actions=output:200"
            for i in range(n)
        ]
        path = workdir / "remap.flows"
        path.write_text("\n".join(rules) + "\n")
        ofctl("add-flows", listen, str(path))
        durations, walls, counts = [], [], []
        grow, shrink = [], []  # side by side: scale-out to 2 instances (host + snic0 spare) and back
        for _ in range(repeats):
            for switch, port in (("snic0", SPARE), ("host", nm.NF_PORT_BASE)):
                t0 = time.perf_counter()
                r = client.remap(200, switch, port)
                walls.append((time.perf_counter() - t0) * 1e3)
                durations.append(r.duration_ms)
                counts.append(r.rules)
            grow.append(client.set_instances(200, [("host", nm.NF_PORT_BASE), ("snic0", SPARE)]).duration_ms)
            shrink.append(client.set_instances(200, [("host", nm.NF_PORT_BASE)]).duration_ms)
        # Side by side, each remap to a port that is not draining (a drain-0 round trip first ends the
        # windows the remaps above left): drain 0 (make, modify, and the break of the old port's rules) and
        # prepared (POST .../prepare, then the remap: only the re-pointing).
        nodrain, prepared, prep = [], [], []
        for i in range(repeats + 1):
            for switch, port in (("snic0", SPARE), ("host", nm.NF_PORT_BASE)):
                r = client.remap(200, switch, port, drain_ms=0)
                if i:
                    nodrain.append(r.duration_ms)
            for switch, port in (("snic0", SPARE), ("host", nm.NF_PORT_BASE)) if i else ():
                try:
                    prep.append(client.prepare(200, switch, port).duration_ms)
                except OneSwitchError as exc:  # an older OneSwitch without the endpoint: not measured
                    if exc.status != 404 or exc.field is not None:
                        raise
                    break
                prepared.append(client.remap(200, switch, port, drain_ms=0).duration_ms)
        out[n] = {
            "duration_ms": round(median(durations), 2),
            "wall_ms": round(median(walls), 2),
            "rules_reported": int(median(counts)),
            "remaps": len(durations),
            "to_2_instances_ms": round(median(grow), 2),
            "to_1_instance_ms": round(median(shrink), 2),
            "nodrain_ms": round(median(nodrain), 2),
            "prepared_ms": round(median(prepared), 2) if prepared else None,
            "prepare_ms": round(median(prep), 2) if prep else None,
        }
        print(f"  (c) {n} rules on vport 200: remap {out[n]['duration_ms']} ms (OneSwitch), {out[n]['wall_ms']} ms (client), "
              f"{len(durations)} remaps; 1->2 instances {out[n]['to_2_instances_ms']} ms, "
              f"2->1 {out[n]['to_1_instance_ms']} ms; drain 0: {out[n]['nodrain_ms']} ms; prepared: "
              f"{out[n]['prepared_ms']} ms (prepare {out[n]['prepare_ms']} ms before)", file=sys.stderr,
              flush=True)  # fmt: skip
    ofctl("del-flows", listen)
    return out


def rate_sides(status: dict, ref: RefSwitch) -> list[Side]:
    """OneSwitch and the plain OVS straight (unix, TCP in its namespace, through a socat relay), with the
    processes on each path."""
    oneswitch_pid = status["oneswitch"]["pid"]
    switches = [status["host"], *status["snics"]]
    ref_vswitchd = ref.sw.ovs.pids()["ovs-vswitchd"]
    ref.sw.driver.set_controller([f"ptcp:{REF_TCP_PORT}:127.0.0.1"])  # passive: no flush, listeners kept
    direct = {"vswitchd": [ref_vswitchd]}
    return [
        Side(
            "oneswitch",
            status["oneswitch"]["listen"],
            procs={
                "oneswitch": [oneswitch_pid],
                **{f"vswitchd_{sw.get('id', 'host')}": [sw["pids"]["ovs-vswitchd"]] for sw in switches},
                # The socat relays: on the path only with UNO_ONESWITCH_SOUTH=tcp (an old jar's A/B).
                "relays": [sw["openflow_relay_pid"] for sw in switches if sw.get("openflow_relay_pid")],
            },
            # The VM thread runs the serial GC (stop-the-world: on the core thread's path).
            threads={
                "oneswitch_core": (oneswitch_pid, "oneswitch-core"),
                "oneswitch_gc": (oneswitch_pid, GC),
            },
            jit=(oneswitch_pid, JIT),
        ),
        Side("ovs", f"unix:{ref.sw.endpoint.unix_socket}", procs=direct),
        Side("ovs_tcp", f"tcp:127.0.0.1:{REF_TCP_PORT}", netns=ref.sw.netns, procs=direct),
        Side("ovs_relay", ref.sw.endpoint.target(), procs={**direct, "relay": [ref.sw.endpoint.pid()]}),
    ]


def report(label: str, res: dict[str, dict]) -> dict[str, float]:
    """Prints one line per side and the ratios; returns OneSwitch / each OVS side."""
    for key, r in res.items():
        cpu = ", ".join(f"{k} {v:g}" for k, v in r["cpu_us"].items())
        print(f"    {label} {key:9s} {r['rps']:8.0f} rules/s (median); CPU us/rule (all repeats): {cpu}")
    ratios = {key: res["oneswitch"]["rps"] / r["rps"] for key, r in res.items() if key != "oneswitch"}
    print(f"    {label} OneSwitch / " + ", ".join(f"{k} {v:.3f}" for k, v in ratios.items()), flush=True)
    return ratios


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rules and repeats (about a minute)")
    ap.add_argument("--parts", default="abc", help="which parts to run (default abc; a includes a2)")
    ap.add_argument("--equiv-report", type=Path, help="(b): write the per-rule check report (JSON) here")
    ap.add_argument(
        "--wire-vlans",
        type=int,
        choices=(1, 2),
        default=1,
        help="OneSwitch's wire_vlans: the most VLAN headers a frame may carry when it comes in (default 1)",
    )
    args = ap.parse_args()
    n_rate, repeats = (2000, 5) if args.quick else (5000, 7)
    n_ratio = 3024
    # --quick: few rounds of uncovering shadowed rules (the rules reached by then are checked).
    max_rounds = 25 if args.quick else None
    sizes = [10, 100] if args.quick else [1, 10, 100, 1000]
    print_machine()
    name = "b" + uuid.uuid4().hex[:5]
    cfg = parse_config(
        {
            "name": name,
            "rundir": "/run/uno-bench",
            **fullcheck.HOST_CONFIG,
            "oneswitch": {"wire_vlans": args.wire_vlans},
        }
    )
    host = EmulatedHost(cfg)
    ref = RefSwitch("r" + uuid.uuid4().hex[:5], VPORTS, base=Path("/run/uno-bench"))
    workdir = Path(tempfile.mkdtemp(prefix="uno-bench-os-"))
    figures: dict = {"wire_vlans": args.wire_vlans}
    try:
        status = host.up()
        ref.up()
        fullcheck.attach_nfs(host)
        client = host.oneswitch().client(timeout=300)
        fullcheck.map_nfs(client)
        listen = status["oneswitch"]["listen"]
        physical = {"host": status["host"]["openflow"], **{s["id"]: s["openflow"] for s in status["snics"]}}

        if "a" in args.parts:
            sides = rate_sides(status, ref)
            runs = warm_up(sides, n_rate, WARM_UP)
            print(f"warm-up: {n_rate} flow-mod + barrier pairs pipelined, runs per side {runs}", flush=True)
            print(f"(a) install rate, {n_rate} rules, {repeats} repeats each, rotating", flush=True)
            rate = bench_rate(sides, n_rate, repeats, WARMUPS, workdir)
            rate_ratios = report("(a)", rate)
            print(
                f"(a2) pipelined install, {n_rate} flow-mods then one barrier, {repeats} repeats each",
                flush=True,
            )
            piped = bench_rate_pipelined(sides, n_rate, repeats, WARMUPS)
            piped_ratios = report("(a2)", piped)
            n_lat = 500 if args.quick else 2000
            print(
                f"(a3) per flow-mod latency, {n_lat} flow-mod + barrier round trips, {repeats} runs",
                flush=True,
            )
            lat = bench_latency([s for s in sides if s.key in ("oneswitch", "ovs")], n_lat, repeats)
            for key, r in lat.items():
                print(f"    (a3) {key:9s} p50 {r['p50_us']} us, p99 {r['p99_us']} us ({r['n']} round trips)")
            os_cpu, ovs_cpu = rate["oneswitch"]["cpu_us"], rate["ovs"]["cpu_us"]
            figures |= {
                # Rules/s ratios depend on this machine (2 shared cores, scheduling, wake-ups): machine-bound.
                # The per flow-mod figures below are what OneSwitch adds wherever it runs.
                "rate_ratio": round(rate_ratios["ovs"], 3),
                "rate_ratio_machine_bound": True,
                "added_latency_us_p50": round(lat["oneswitch"]["p50_us"] - lat["ovs"]["p50_us"], 1),
                "added_latency_us_p99": round(lat["oneswitch"]["p99_us"] - lat["ovs"]["p99_us"], 1),
                "latency_us": lat,
                # (a)'s runs (ovs-ofctl add-flows: a barrier after every flow-mod): OneSwitch's process CPU per
                # flow-mod, beside the plain OVS vswitchd's for the same rules reached straight.
                "cpu_us_per_flowmod": os_cpu["oneswitch"],
                "ovs_cpu_us_per_flowmod": ovs_cpu["vswitchd"],
                "oneswitch_path_vswitchd_cpu_us_per_flowmod": round(
                    sum(v for k, v in os_cpu.items() if k.startswith("vswitchd_")), 1
                ),
                "rate_ratio_tcp": round(rate_ratios["ovs_tcp"], 3),
                "rate_ratio_relay": round(rate_ratios["ovs_relay"], 3),
                "rate_oneswitch_rps": round(rate["oneswitch"]["rps"]),
                "rate_ovs_rps": round(rate["ovs"]["rps"]),
                "rate_rules": n_rate,
                "rate_ratio_pipelined": round(piped_ratios["ovs"], 3),
                "rate_oneswitch_pipelined_rps": round(piped["oneswitch"]["rps"]),
                "rate_ovs_pipelined_rps": round(piped["ovs"]["rps"]),
                "cpu_us_per_rule": {key: r["cpu_us"] for key, r in rate.items()},
                "cpu_us_per_rule_pipelined": {key: r["cpu_us"] for key, r in piped.items()},
            }
        if "b" in args.parts:
            scope = (
                f"quick: only {max_rounds} rounds (a part of the rules)"
                if args.quick
                else "every accepted rule"
            )
            print(
                f"(b) {n_ratio} random virtual rules over host + 2 sNICs; equivalence check: {scope}",
                flush=True,
            )
            report_path = args.equiv_report or REPORT
            with fullcheck.rig(host, listen, ref) as rig:
                check = {
                    **rig,
                    "log": host.oneswitch().logfile,
                    "max_rounds": max_rounds,
                    "qinq": args.wire_vlans == 2,  # frames arriving QinQ too: that mode carries them
                }
                ratio = bench_ratio(listen, physical, n_ratio, check, report_path)
            print(f"    {ratio}")
            print(f"    per-rule report: {report_path}")
            figures |= {
                "phys_virt_ratio": ratio["phys_virt_ratio"],
                "phys_virt_ratio_without_fixed": ratio["phys_virt_ratio_without_fixed"],
                "virtual_rules": ratio["virtual_dumped"],
                "physical_rules": sum(ratio["physical"].values()),
                "refused": ratio["refused"],
                "checked": ratio["checked"],
                "exercised": ratio["exercised"],
                "unreachable": ratio["unreachable"],
                "unexercised": ratio["unexercised"],
                "differences": ratio["differences"],
            }
        if "c" in args.parts:
            print(
                f"(c) remap vport 200 host <-> snic0 vs rules on it, {repeats} round trips each", flush=True
            )
            remap = bench_remap(client, listen, sizes, repeats, workdir)
            for n, r in remap.items():
                print(
                    f"    {n:5d} rules: {r['duration_ms']} ms; to 2 instances {r['to_2_instances_ms']} ms, "
                    f"back to 1 {r['to_1_instance_ms']} ms"
                )
            figures |= {
                "remap_ms": remap.get(100, {}).get("duration_ms"),
                "remap_ms_by_rules": {str(n): r["duration_ms"] for n, r in remap.items()},
                "scale_to_2_ms": remap.get(100, {}).get("to_2_instances_ms"),
                "scale_to_2_ms_by_rules": {str(n): r["to_2_instances_ms"] for n, r in remap.items()},
                "remap_nodrain_ms_by_rules": {str(n): r["nodrain_ms"] for n, r in remap.items()},
                "remap_prepared_ms_by_rules": {str(n): r["prepared_ms"] for n, r in remap.items()},
                "prepare_ms_by_rules": {str(n): r["prepare_ms"] for n, r in remap.items()},
            }
        final_json(figures)
        return 0
    finally:
        try:
            host.down()
        finally:
            ref.down()
            shutil.rmtree(workdir, ignore_errors=True)  # the rule files written for (a) and (c)


if __name__ == "__main__":
    sys.exit(main())
