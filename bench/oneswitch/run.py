"""OneSwitch: rule install rate vs plain OVS, physical/virtual rule ratio, remap time.

One emulated host (2 VMs, two sNICs with one Ethernet port each, unshaped PCIe) with OneSwitch, NF ports on
the host (vport 200), snic0 (201) and snic1 (202), plus a spare port on snic0 for remaps; and, for (a), a plain
OVS bridge (own instance) reached the same way OneSwitch reaches its switches (TCP relay to its controller
socket).

(a) rules/s: `ovs-ofctl -O OpenFlow13 add-flows TARGET FILE` of N rules to OneSwitch vs the same N rules to
    the plain OVS, alternating, medians: rate_ratio = OneSwitch / OVS. NOTE: ovs-ofctl (3.1) sends a BARRIER
    after EVERY flow-mod and waits for its reply (checked on the wire), so this is a flow-mod + barrier round
    trip rate; OneSwitch's virtual barrier needs a physical barrier round trip (through the same relay as the
    plain OVS) before it can answer, so it is latency-bound.
(a2) pipelined: a raw OF1.3 client sends the same N FLOW_MODs back to back, then ONE barrier, timed to its
    reply (no error allowed, all N installed): rate_ratio_pipelined = OneSwitch / OVS (throughput).
(b) 3,024 random OF1.3 virtual rules (tests/oneswitch/rulegen.py seed 2024, 3 tables, one ALL group, 7 vports
    on 3 switches): phys_virt_ratio = physical flows on all three switches (dump-flows, everything OneSwitch
    installed) / accepted virtual rules; also the ratio without OneSwitch's fixed rules (those present with no
    virtual rule); refusals by OneSwitch's reason. Then every accepted rule is checked for equivalence with a
    reference OVS by real packets (tests/oneswitch/fullcheck.py): `checked` rules, `exercised` (a frame took
    it on the reference), `differences` (frames whose outputs differ, twice). `--quick` stops after 25 rounds of
    uncovering shadowed rules, so it checks a part of them (says so). Per-rule report: --equiv-report PATH.
(c) remap time of vport 200 (host <-> snic0) vs the number of virtual rules on it (half match in_port=200,
    half output to it): OneSwitch's duration_ms (all barriers answered), medians; remap_ms = at 100 rules.
    In the same loop, scale-out: PUT instances host:200 + snic0 spare (1 -> 2) and back (2 -> 1), OneSwitch's
    `ms`, medians; scale_to_2_ms = at 100 rules.

    ./uno bench oneswitch [--quick] [--parts abc] [--equiv-report PATH]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.common import final_json, median, print_machine
from host_datapath.sysutil import DatapathError
from nf_agent.emulated_host import naming as nm
from nf_agent.emulated_host.config import parse_config
from nf_agent.emulated_host.host import EmulatedHost
from tests.oneswitch import equiv, fullcheck, rulegen
from tests.oneswitch.ovstrace import Tracer
from tests.oneswitch.refswitch import RefSwitch

VPORTS = fullcheck.VPORTS
SPARE = fullcheck.SPARE  # physical port on snic0 where vport 200 moves


def ofctl(*args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(
        ["ovs-ofctl", "-O", "OpenFlow13", "--no-names", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if check and r.returncode != 0:
        raise DatapathError(f"ovs-ofctl {' '.join(args[:2])}: {r.stderr.strip()[:500]}")
    return r


def count_flows(target: str) -> int:
    return sum(1 for line in ofctl("dump-flows", target).stdout.splitlines() if "actions=" in line)


def timed_add_flows(target: str, path: Path) -> float:
    t0 = time.perf_counter()
    ofctl("add-flows", target, str(path))
    return time.perf_counter() - t0


def rate_rules(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        f"table=0,priority={1000 + i},in_port={rng.choice(VPORTS)},ip,nw_dst=10.{(i >> 8) & 255}.{i & 255}.1,"
        f"actions=output:{rng.choice(VPORTS)}"
        for i in range(n)
    ]


def bench_rate(listen: str, direct: str, n: int, repeats: int, workdir: Path) -> dict:
    path = workdir / "rate.flows"
    path.write_text("\n".join(rate_rules(n, 7)) + "\n")
    return _alternating_rates("(a)", listen, direct, n, repeats, lambda target: timed_add_flows(target, path))


def _alternating_rates(label: str, listen: str, direct: str, n: int, repeats: int, install) -> dict:
    """Rules/s of `install(target)` (seconds for n rules) on OneSwitch and plain OVS, alternating which goes
    first, medians per side."""
    rates: dict[str, list[float]] = {"oneswitch": [], "ovs": []}
    for rep in range(repeats):
        order = [("oneswitch", listen), ("ovs", direct)]
        if rep % 2:
            order.reverse()
        for key, target in order:
            ofctl("del-flows", target)
            secs = install(target)
            assert count_flows(target) == n, f"{key}: not all {n} rules installed"
            rates[key].append(n / secs)
            print(
                f"  {label} {key}: {n} rules in {secs:.3f} s = {n / secs:.0f} rules/s",
                file=sys.stderr,
                flush=True,
            )
        ofctl("del-flows", listen)
    return {k: median(v) for k, v in rates.items()}


def rate_flow_mods(n: int, seed: int) -> list[bytes]:
    """The rules of rate_rules(n, seed) as OF1.3 FLOW_MOD ADDs (xids 1..n), for the pipelined run."""
    import struct

    from tests.oneswitch import ofraw

    rng = random.Random(seed)
    out = []
    for i in range(n):
        in_port, out_port = rng.choice(VPORTS), rng.choice(VPORTS)
        fixed = struct.pack(
            "!QQBBHHHIIIH2x", 0, 0, 0, 0, 0, 0, 1000 + i, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0
        )
        oxms = struct.pack("!II", 0x80000004, in_port) + struct.pack("!IH", 0x80000A02, 0x0800)
        oxms += struct.pack("!I4B", 0x80001804, 10, (i >> 8) & 255, i & 255, 1)
        match = struct.pack("!HH", 1, 4 + len(oxms)) + oxms
        match += b"\0" * (-len(match) % 8)
        action = struct.pack("!HHIH6x", 0, 16, out_port, 0xFFFF)
        instr = struct.pack("!HH4x", 4, 8 + len(action)) + action
        body = fixed + match + instr
        out.append(ofraw.header(ofraw.FLOW_MOD, 8 + len(body), i + 1) + body)
    return out


def timed_pipelined(target: str, msgs: list[bytes]) -> float:
    """Every flow-mod back to back, then ONE barrier; seconds until its reply (no error allowed)."""
    from tests.oneswitch import ofraw

    c = ofraw.Conn(int(target.rsplit(":", 1)[1]), timeout=60)
    try:
        c.hello()
        t0 = time.perf_counter()
        c.send(b"".join(msgs))
        c.send(ofraw.msg(ofraw.BARRIER_REQUEST, xid=0xFFFFFF))
        got = c.until(0xFFFFFF, ofraw.BARRIER_REPLY, timeout=300)
        secs = time.perf_counter() - t0
    finally:
        c.close()
    assert got and got[-1].type == ofraw.BARRIER_REPLY, "no barrier reply"
    errors = [r for r in got if r.type == ofraw.ERROR]
    assert not errors, f"{len(errors)} errors, first {errors[0]}"
    return secs


def bench_rate_pipelined(listen: str, direct: str, n: int, repeats: int) -> dict:
    """(a2) as (a) but pipelined: a controller that sends all flow-mods, then one barrier."""
    msgs = rate_flow_mods(n, 7)
    return _alternating_rates(
        "(a2)", listen, direct, n, repeats, lambda target: timed_pipelined(target, msgs)
    )


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
    against the reference by real packets (tests/oneswitch/fullcheck.py; `check`: its arguments)."""
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
        "differences": summary["differences"],
        "check": {
            k: summary[k]
            for k in (
                "exercised_first_round",
                "rounds",
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
        out[n] = {
            "duration_ms": round(median(durations), 2),
            "wall_ms": round(median(walls), 2),
            "rules_reported": int(median(counts)),
            "remaps": len(durations),
            "to_2_instances_ms": round(median(grow), 2),
            "to_1_instance_ms": round(median(shrink), 2),
        }
        print(f"  (c) {n} rules on vport 200: remap {out[n]['duration_ms']} ms (OneSwitch), {out[n]['wall_ms']} ms (client), "
              f"{len(durations)} remaps; 1->2 instances {out[n]['to_2_instances_ms']} ms, "
              f"2->1 {out[n]['to_1_instance_ms']} ms", file=sys.stderr, flush=True)  # fmt: skip
    ofctl("del-flows", listen)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rules and repeats (about a minute)")
    ap.add_argument("--parts", default="abc", help="which parts to run (default abc; a includes a2)")
    ap.add_argument("--equiv-report", type=Path, help="(b): write the per-rule check report (JSON) here")
    args = ap.parse_args()
    n_rate, repeats = (2000, 3) if args.quick else (5000, 5)
    n_ratio = 3024
    # --quick: few rounds of uncovering shadowed rules (the rules reached by then are checked).
    max_rounds = 25 if args.quick else None
    sizes = [10, 100] if args.quick else [1, 10, 100, 1000]
    print_machine()
    name = "b" + uuid.uuid4().hex[:5]
    cfg = parse_config({"name": name, "rundir": "/run/uno-bench", **fullcheck.HOST_CONFIG})
    host = EmulatedHost(cfg)
    ref = RefSwitch("r" + uuid.uuid4().hex[:5], VPORTS, base=Path("/run/uno-bench"))
    workdir = Path(tempfile.mkdtemp(prefix="uno-bench-os-"))
    figures: dict = {}
    targets: list[equiv.Target] = []
    tracer = None
    try:
        status = host.up()
        ref.up()
        fullcheck.attach_nfs(host)
        client = host.oneswitch().client(timeout=300)
        fullcheck.map_nfs(client)
        listen = status["oneswitch"]["listen"]
        physical = {"host": status["host"]["openflow"], **{s["id"]: s["openflow"] for s in status["snics"]}}
        direct = ref.sw.endpoint.target()

        if "a" in args.parts:
            print(f"(a) install rate, {n_rate} rules, {repeats} repeats each, alternating", flush=True)
            rate = bench_rate(listen, direct, n_rate, repeats, workdir)
            rate_ratio = rate["oneswitch"] / rate["ovs"]
            print(
                f"    OneSwitch {rate['oneswitch']:.0f} rules/s, OVS {rate['ovs']:.0f} rules/s: ratio {rate_ratio:.3f}"
            )
            print(
                f"(a2) pipelined install, {n_rate} flow-mods then one barrier, {repeats} repeats each",
                flush=True,
            )
            piped = bench_rate_pipelined(listen, direct, n_rate, repeats)
            piped_ratio = piped["oneswitch"] / piped["ovs"]
            print(
                f"    OneSwitch {piped['oneswitch']:.0f} rules/s, OVS {piped['ovs']:.0f} rules/s: ratio {piped_ratio:.3f}"
            )
            figures |= {
                "rate_ratio": round(rate_ratio, 3),
                "rate_oneswitch_rps": round(rate["oneswitch"]),
                "rate_ovs_rps": round(rate["ovs"]),
                "rate_rules": n_rate,
                "rate_ratio_pipelined": round(piped_ratio, 3),
                "rate_oneswitch_pipelined_rps": round(piped["oneswitch"]),
                "rate_ovs_pipelined_rps": round(piped["ovs"]),
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
            targets = [
                equiv.Target("oneswitch", listen, fullcheck.endpoints(name)).open(),
                equiv.Target("reference", ref.target, ref.endpoints()).open(),
            ]
            tracer = Tracer(ref.sw.ovs.rundir / "ovs-vswitchd.ctl", ref.sw.bridge)
            report = args.equiv_report or workdir / "equiv-2024.json"
            check = {
                "sut": targets[0],
                "ref": targets[1],
                "tracer": tracer,
                "ports": (_port(listen), _port(direct)),
                "log": host.oneswitch().logfile,
                "max_rounds": max_rounds,
                "caches": fullcheck.vswitchd_ctls(host),
            }
            ratio = bench_ratio(listen, physical, n_ratio, check, report)
            print(f"    {ratio}")
            print(f"    per-rule report: {report}")
            figures |= {
                "phys_virt_ratio": ratio["phys_virt_ratio"],
                "phys_virt_ratio_without_fixed": ratio["phys_virt_ratio_without_fixed"],
                "virtual_rules": ratio["virtual_dumped"],
                "physical_rules": sum(ratio["physical"].values()),
                "refused": ratio["refused"],
                "checked": ratio["checked"],
                "exercised": ratio["exercised"],
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
            }
        final_json(figures)
        return 0
    finally:
        try:
            for t in targets:
                t.close()
            if tracer is not None:
                tracer.close()
            host.down()
        finally:
            ref.down()


def _port(target: str) -> int:
    return int(target.rsplit(":", 1)[1])


if __name__ == "__main__":
    sys.exit(main())
