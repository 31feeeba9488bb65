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
(b) 3,024 random OF1.3 virtual rules (tests/oneswitch/rulegen.py, 3 tables, one ALL group, 7 vports on 3
    switches): phys_virt_ratio = physical flows on all three switches (dump-flows, everything OneSwitch
    installed) / accepted virtual rules; also the ratio without OneSwitch's fixed rules (those present with no
    virtual rule).
(c) remap time of vport 200 (host <-> snic0) vs the number of virtual rules on it (half match in_port=200,
    half output to it): OneSwitch's duration_ms (all barriers answered), medians; remap_ms = at 100 rules.
    In the same loop, scale-out: PUT instances host:200 + snic0 spare (1 -> 2) and back (2 -> 1), OneSwitch's
    `ms`, medians; scale_to_2_ms = at 100 rules. Then, side by side, remaps with drain_ms 0 (the old port's
    rules deleted at once: a break phase; remap_nodrain_ms_by_rules) and prepared remaps (POST
    .../prepare, then the remap: only the re-pointing; remap_prepared_ms_by_rules, prepare_ms_by_rules).

    ./uno bench oneswitch [--quick]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.common import final_json, median, print_machine
from host_datapath.oneswitch_client import OneSwitchError
from host_datapath.sysutil import DatapathError
from nf_agent.emulated_host import naming as nm
from nf_agent.emulated_host.config import parse_config
from nf_agent.emulated_host.host import EmulatedHost
from tests.oneswitch import rulegen
from tests.oneswitch.refswitch import RefSwitch

VPORTS = [1, 9, 100, 101, 200, 201, 202]
SPARE = 201  # physical port on snic0 where vport 200 moves


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


def install_chunked(listen: str, rules: rulegen.RuleSet, workdir: Path) -> tuple[int, list[str]]:
    """Groups, then flows in chunks of 200 (a chunk with a refused rule is retried rule by rule)."""
    refused = []
    for g in rules.groups:
        if ofctl("add-group", listen, g, check=False).returncode != 0:
            refused.append(g)
    flows = list(rules.flows)
    accepted = 0
    for i in range(0, len(flows), 200):
        chunk = flows[i : i + 200]
        path = workdir / "chunk.flows"
        path.write_text("\n".join(chunk) + "\n")
        if ofctl("add-flows", listen, str(path), check=False).returncode == 0:
            accepted += len(chunk)
            continue
        for f in chunk:  # which ones: an OFPT_ERROR each
            if ofctl("add-flow", listen, f, check=False).returncode == 0:
                accepted += 1
            else:
                refused.append(f)
    return accepted, refused


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


def bench_ratio(listen: str, physical: dict[str, str], n: int, workdir: Path) -> dict:
    ofctl("del-flows", listen)
    ofctl("del-groups", listen)
    base = {sw: count_flows(t) for sw, t in physical.items()}
    rules = rulegen.generate(2024, VPORTS, n_rules=n, tables=3, groups=True, prio_max=60000)
    t0 = time.perf_counter()
    accepted, refused = install_chunked(listen, rules, workdir)
    secs = time.perf_counter() - t0
    phys = {sw: count_flows(t) for sw, t in physical.items()}
    virt = count_flows(listen)
    total, fixed = sum(phys.values()), sum(base.values())
    out = {
        "virtual_generated": n,
        "virtual_accepted": accepted,
        "virtual_dumped": virt,
        "refused": len(refused),
        "physical": phys,
        "physical_fixed": base,
        "phys_virt_ratio": round(total / max(virt, 1), 3),
        "phys_virt_ratio_without_fixed": round((total - fixed) / max(virt, 1), 3),
        "install_s": round(secs, 2),
        "distribution": distribution(rules),
    }
    if refused:
        out["refused_examples"] = refused[:5]
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rules and repeats (about a minute)")
    args = ap.parse_args()
    n_rate, repeats = (2000, 3) if args.quick else (5000, 5)
    n_ratio = 3024
    sizes = [10, 100] if args.quick else [1, 10, 100, 1000]
    print_machine()
    name = "b" + uuid.uuid4().hex[:5]
    cfg = parse_config(
        {"name": name, "rundir": "/run/uno-bench", "vms": 2, "snics": [{"pcie_gbps": 0}, {"pcie_gbps": 0}]}
    )
    host = EmulatedHost(cfg)
    ref = RefSwitch("r" + uuid.uuid4().hex[:5], VPORTS, base=Path("/run/uno-bench"))
    workdir = Path(tempfile.mkdtemp(prefix="uno-bench-os-"))
    try:
        status = host.up()
        ref.up()
        sw = host.switches()
        try:
            sw["host"].attach_namespace(f"{name}-nf0", f"{name}-n0", f"{name}-n0p", nm.NF_PORT_BASE)
            sw["snic0"].attach_namespace(f"{name}-nf1", f"{name}-n1", f"{name}-n1p", nm.NF_PORT_BASE)
            sw["snic1"].attach_namespace(f"{name}-nf2", f"{name}-n2", f"{name}-n2p", nm.NF_PORT_BASE)
            sw["snic0"].attach_namespace(f"{name}-nf3", f"{name}-n3", f"{name}-n3p", SPARE)
        finally:
            for s in sw.values():
                s.close()
        client = host.oneswitch().client(timeout=300)
        client.map_port(200, "host", nm.NF_PORT_BASE)
        client.map_port(201, "snic0", nm.NF_PORT_BASE)
        client.map_port(202, "snic1", nm.NF_PORT_BASE)
        listen = status["oneswitch"]["listen"]
        physical = {"host": status["host"]["openflow"], **{s["id"]: s["openflow"] for s in status["snics"]}}
        direct = ref.sw.endpoint.target()

        print(f"(a) install rate, {n_rate} rules, {repeats} repeats each, alternating", flush=True)
        rate = bench_rate(listen, direct, n_rate, repeats, workdir)
        rate_ratio = rate["oneswitch"] / rate["ovs"]
        print(
            f"    OneSwitch {rate['oneswitch']:.0f} rules/s, OVS {rate['ovs']:.0f} rules/s: ratio {rate_ratio:.3f}"
        )
        print(
            f"(a2) pipelined install, {n_rate} flow-mods then one barrier, {repeats} repeats each", flush=True
        )
        piped = bench_rate_pipelined(listen, direct, n_rate, repeats)
        piped_ratio = piped["oneswitch"] / piped["ovs"]
        print(
            f"    OneSwitch {piped['oneswitch']:.0f} rules/s, OVS {piped['ovs']:.0f} rules/s: ratio {piped_ratio:.3f}"
        )
        print(f"(b) {n_ratio} random virtual rules over host + 2 sNICs", flush=True)
        ratio = bench_ratio(listen, physical, n_ratio, workdir)
        print(f"    {ratio}")
        print(f"(c) remap vport 200 host <-> snic0 vs rules on it, {repeats} round trips each", flush=True)
        remap = bench_remap(client, listen, sizes, repeats, workdir)
        for n, r in remap.items():
            print(
                f"    {n:5d} rules: {r['duration_ms']} ms; to 2 instances {r['to_2_instances_ms']} ms, "
                f"back to 1 {r['to_1_instance_ms']} ms"
            )
        final_json(
            {
                "rate_ratio": round(rate_ratio, 3),
                "rate_oneswitch_rps": round(rate["oneswitch"]),
                "rate_ovs_rps": round(rate["ovs"]),
                "rate_rules": n_rate,
                "rate_ratio_pipelined": round(piped_ratio, 3),
                "rate_oneswitch_pipelined_rps": round(piped["oneswitch"]),
                "rate_ovs_pipelined_rps": round(piped["ovs"]),
                "phys_virt_ratio": ratio["phys_virt_ratio"],
                "phys_virt_ratio_without_fixed": ratio["phys_virt_ratio_without_fixed"],
                "virtual_rules": ratio["virtual_dumped"],
                "physical_rules": sum(ratio["physical"].values()),
                "refused": ratio["refused"],
                "remap_ms": remap.get(100, {}).get("duration_ms"),
                "remap_ms_by_rules": {str(n): r["duration_ms"] for n, r in remap.items()},
                "scale_to_2_ms": remap.get(100, {}).get("to_2_instances_ms"),
                "scale_to_2_ms_by_rules": {str(n): r["to_2_instances_ms"] for n, r in remap.items()},
                "remap_nodrain_ms_by_rules": {str(n): r["nodrain_ms"] for n, r in remap.items()},
                "remap_prepared_ms_by_rules": {str(n): r["prepared_ms"] for n, r in remap.items()},
                "prepare_ms_by_rules": {str(n): r["prepare_ms"] for n, r in remap.items()},
            }
        )
        return 0
    finally:
        try:
            host.down()
        finally:
            ref.down()


if __name__ == "__main__":
    sys.exit(main())
