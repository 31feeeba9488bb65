"""Switching offload (UNO section 3.4, Fig. 8; issue 27): host OVS CPU with N filtering rules all on the host,
half offloaded, all on the sNIC, through OneSwitch.

One emulated host (1 VM, one sNIC with one Ethernet port, unshaped PCIe, `max_rules` large enough) with
OneSwitch. A controller's flow-mods (`ovs-ofctl --bundle add-flows` to OneSwitch's listener) install N
filtering rules in two filter tables before a forwarding table (bench/offload/rules.py: a quarter of the
rules allow, the rest drop). For N in 1K, 8K, 64K and each placement (OneSwitch's `PUT /v1/tables/{t}`:
host / half = table 0 on the sNIC, table 1 on the host / snic), the same UDP load runs wire -> VM and
VM -> wire at once (`traffic gen`, many flows, each matching a filter rule), and over its middle:
- host OVS CPU: the host's ovs-vswitchd (utime + stime from /proc: the host's own process);
- sNIC CPU: its switch's CPU seconds as the sNIC reports them through its agent's API (`/v1/info`
  `switch_cpu_s`; never read from outside: the sNIC is another machine);
- delivered rate: packets per second the sinks received (VM and wire).
Then, at the largest N: every rule exercised by one probe packet in each direction per placement;
`differences` = rules whose probe was forwarded differently with the tables offloaded than on the host
(half and snic against host), `wrong` = probes not doing what their rule says. Last: a stream through the
tables (table-miss path) while the tables move host -> sNIC -> host twice: `lost_on_move` (the sink's
sequence gaps).

Figures (last line JSON): host_cpu_ratio = host OVS cores with all rules on the sNIC / all on the host at
the largest N (same offered load; the delivered rates are reported beside it), per N and placement the
medians, differences, wrong, lost_on_move; a PNG like Fig. 8 (bench/out/offload/offload.png).

    ./uno bench offload [--quick] [--sizes 1000,8000,64000] [--seconds S] [--pps PPS] [--repeats R]
                        [--directions both|to-vm] [--flows N]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.common import final_json, median, print_machine  # noqa: E402
from bench.offload import rules  # noqa: E402
from emulated_host import naming as nm  # noqa: E402
from emulated_host.config import parse_config  # noqa: E402
from emulated_host.host import EmulatedHost  # noqa: E402
from host_datapath.snic_agent_client import SnicAgentClient  # noqa: E402
from host_datapath.sysutil import cpu_seconds  # noqa: E402

TRAFFIC = REPO / "nfs" / "target" / "release" / "traffic"
OUT = REPO / "bench" / "out" / "offload"
FLOWS = 1024  # flows of the load per direction: rules 0..1023 (every table holds some)
SIZE = 128  # bytes per frame
DRAIN_MS = 500  # a moved table's old copy keeps serving what is in flight for this long
MOVE_PPS = 2000  # per direction while table 0 moves: a rate the pipeline carries without loss at rest
PROBE_PPS = 5000  # one probe per rule: slow enough for the Python capture to see every frame


class Bed:
    """The running host: names, OneSwitch's client and listener, the CPU probes."""

    def __init__(self, host: EmulatedHost, status: dict):
        self.host, self.name = host, host.name
        self.client = host.oneswitch().client(timeout=600)
        self.listen = status["oneswitch"]["listen"]
        sw = host.host_switch()
        try:
            self.vswitchd = sw.ovs.pids()["ovs-vswitchd"]
        finally:
            sw.close()
        acc = host.snic_agents()["snic0"]
        self.snic = SnicAgentClient("snic0", acc.agent, acc.token, timeout=10)
        self.vm_ns, self.vm_if = nm.ns_vm(self.name, 0), nm.if_vm(self.name, 0)[0]
        self.out_ns, self.out_if = nm.ns_outside(self.name, 0, 0), nm.if_eth(self.name, 0, 0)[1]

    def host_cpu(self) -> float:
        return cpu_seconds([self.vswitchd])

    def snic_cpu(self) -> float | None:
        v = self.snic.info().get("switch_cpu_s")
        return float(v) if v is not None else None

    def install(self, n: int) -> float:
        """Replace the virtual pipeline by n filtering rules (one bundle); seconds it took."""
        for t in rules.FILTERS:
            self.client.move_table(t, "host")  # a fresh table starts where the last placement left it
        subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "del-flows", self.listen], check=True)
        lines = rules.flow_lines(n, nm.vport_vm(0), nm.vport_eth(0, 0))
        with tempfile.NamedTemporaryFile("w", suffix=".flows", prefix="offpy-", delete=False) as f:
            f.write("\n".join(lines) + "\n")
        t0 = time.monotonic()
        try:
            subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--bundle", "add-flows", self.listen, f.name],
                           check=True, capture_output=True, timeout=1800)  # fmt: skip
        finally:
            Path(f.name).unlink()
        return time.monotonic() - t0

    def place(self, placement: str | dict[int, str]) -> list[dict]:
        out = []
        where = rules.PLACEMENTS[placement] if isinstance(placement, str) else placement
        for t, loc in where.items():
            mv = self.client.move_table(t, loc, drain_ms=DRAIN_MS)
            out.append({"table": t, "from": mv.from_, "to": mv.to, "ms": mv.ms})
        return out

    # -- traffic -------------------------------------------------------------------------------------------
    def gen(self, to_vm: bool, flows: int, pkts: int, pps: float, dport: int, run: int) -> subprocess.Popen:
        ns, port = (self.out_ns, self.out_if) if to_vm else (self.vm_ns, self.vm_if)
        src, dst = (nm.ip_outside(0, 0), nm.ip_vm(0)) if to_vm else (nm.ip_vm(0), nm.ip_outside(0, 0))
        smac, dmac = (nm.mac(2, 0, 0), nm.mac(1, 0, 0)) if to_vm else (nm.mac(1, 0, 0), nm.mac(2, 0, 0))
        return subprocess.Popen(
            ["ip", "netns", "exec", ns, str(TRAFFIC), "gen", "--port", port, "--udp", "--flows", str(flows),
             "--pkts", str(pkts), "--rate", str(pps), "--size", str(SIZE), "--src", src, "--dst", dst,
             "--src-mac", smac, "--dst-mac", dmac, "--dst-port", str(dport), "--run", str(run)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    def sink(self, at_vm: bool, run: int, seconds: float) -> subprocess.Popen:
        ns, port = (self.vm_ns, self.vm_if) if at_vm else (self.out_ns, self.out_if)
        p = subprocess.Popen(
            ["ip", "netns", "exec", ns, str(TRAFFIC), "sink", "--port", port, "--run", str(run),
             "--duration-ms", str(int(seconds * 1000)), "--idle-ms", "2000"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        _ready(p)
        return p

    def capture(self, at_vm: bool, path: Path) -> subprocess.Popen:
        ns, port = (self.vm_ns, self.vm_if) if at_vm else (self.out_ns, self.out_if)
        p = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "testkit.udp_capture", port, str(path), "2500"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        )  # fmt: skip
        _ready(p)
        return p


def _ready(p: subprocess.Popen) -> None:
    line = p.stdout.readline() if p.stdout else ""
    if '"ready"' not in line:
        err = p.stderr.read() if p.stderr else ""
        raise RuntimeError(f"receiver did not start: {line} {err[:300]}")


def _report(p: subprocess.Popen, timeout: float) -> dict:
    out, err = p.communicate(timeout=timeout)
    lines = [x for x in out.splitlines() if x.startswith("{")]
    if p.returncode != 0 or not lines:
        raise RuntimeError(f"traffic: exit {p.returncode}: {err[:300]}")
    return json.loads(lines[-1])


def load_window(bed: Bed, seconds: float, pps: float, run: int, directions: tuple[bool, ...],
                flows: int = FLOWS) -> dict:  # fmt: skip
    """The same UDP load of `flows` flows wire -> VM (True) and/or VM -> wire (False) for `seconds`; CPU over its
    middle. Few flows are datapath-cache hits whatever the rules; many (each seen once in the window) make the
    switch classify every packet against the rules, the cost Fig. 8 moves off the host."""
    pkts = max(1, int(pps * seconds / flows))
    sinks = [bed.sink(d, run + k, seconds + 6) for k, d in enumerate(directions)]
    gens = [bed.gen(d, flows, pkts, pps, rules.BASE_DPORT, run + k) for k, d in enumerate(directions)]
    warm = min(2.0, seconds / 4)
    time.sleep(warm)
    h0, s0, t0 = bed.host_cpu(), bed.snic_cpu(), time.monotonic()
    time.sleep(seconds - 2 * warm)
    h1, s1, t1 = bed.host_cpu(), bed.snic_cpu(), time.monotonic()
    sent = [_report(g, seconds + 60) for g in gens]
    got = [_report(s, seconds + 60) for s in sinks]
    wall = t1 - t0
    return {
        "host_cores": round((h1 - h0) / wall, 4),
        "snic_cores": round((s1 - s0) / wall, 4) if s0 is not None and s1 is not None else None,
        "sent_pps": round(sum(x["sent"] for x in sent) / seconds, 1),
        "delivered_pps": round(sum(x["received"] for x in got) / seconds, 1),
        "delivered": {
            ("to_vm" if d else "to_wire"): g["received"] for d, g in zip(directions, got, strict=True)
        },
    }


def probe(bed: Bed, n: int, pps: float, tmp: Path) -> dict[str, list[bool]]:
    """One packet per rule in each direction; per direction the fate of every rule's probe."""
    out = {}
    for to_vm in (True, False):
        path = tmp / f"cap-{uuid.uuid4().hex[:6]}.json"
        cap = bed.capture(to_vm, path)
        for k, (flows, dport) in enumerate(rules.probes(n)):
            _report(bed.gen(to_vm, flows, 1, pps, dport, 900 + k), flows / pps + 120)
        _report(cap, 300)
        out["to_vm" if to_vm else "to_wire"] = rules.fates(n, map(tuple, json.loads(path.read_text())))
        path.unlink()
    return out


def lost_on_move(bed: Bed, pps: float, seconds: float) -> dict:
    """A stream both ways through the tables (table-miss path) while table 0 moves host -> sNIC -> host twice
    (table 1 where OneSwitch runs it by default, at each packet's ingress: no state of the move sends a
    packet back across the link)."""
    bed.place({0: "host", 1: "everywhere"})
    flows = 64
    pkts = int(pps * seconds / flows)
    sinks = [bed.sink(True, 700, seconds + 10), bed.sink(False, 701, seconds + 10)]
    gens = [bed.gen(True, flows, pkts, pps, rules.MISS_DPORT, 700),
            bed.gen(False, flows, pkts, pps, rules.MISS_DPORT, 701)]  # fmt: skip
    moves = []
    step = seconds / 5
    for loc in ("snic0", "host", "snic0", "host"):
        time.sleep(step)
        moves += bed.place({0: loc})
    sent = [_report(g, seconds + 60) for g in gens]
    got = [_report(s, seconds + 60) for s in sinks]
    return {
        "sent": sum(x["sent"] for x in sent),
        "received": sum(x["received"] for x in got),
        "lost": sum(x["lost"] for x in got),
        "moves": len(moves),
        "move_ms": round(median([m["ms"] for m in moves]), 2) if moves else None,
    }


def _move_only(bed: Bed, n: int, quick: bool, figures: dict) -> int:
    """`--move-only`: n rules installed, then the move part alone; prints the figures (the caller's finally
    takes the host down)."""
    secs = bed.install(n)
    print(f"{n} rules installed through OneSwitch in {secs:.1f} s", flush=True)
    mv = lost_on_move(bed, MOVE_PPS, 10 if quick else 20)
    figures["lost_on_move"] = mv["lost"]
    figures["move"] = mv
    final_json(figures)
    return 0


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(results, key=int)
    fig, ax = plt.subplots(figsize=(6, 3.6))
    width = 0.25
    for k, placement in enumerate(rules.PLACEMENTS):
        ys = [results[s][placement]["host_cores"] * 100 for s in sizes]
        xs = [i + (k - 1) * width for i in range(len(sizes))]
        ax.bar(xs, ys, width, label={"host": "HOST", "half": "HALF", "snic": "sNIC"}[placement])
    ax.set_xticks(range(len(sizes)), [f"{int(s) // 1000}K rules" for s in sizes])
    ax.set_ylabel("host OVS CPU (% of a core)")
    ax.set_title("Switching offload: host OVS CPU (cf. UNO Fig. 8)")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1K and 64K rules, one short window each")
    ap.add_argument("--sizes", help="comma-separated rule counts (default 1000,8000,64000)")
    ap.add_argument("--seconds", type=float, help="load window, s (default 10; quick 6)")
    ap.add_argument(
        "--pps", type=float, default=20000, help="offered packets/s per direction (default 20000)"
    )
    ap.add_argument("--repeats", type=int, help="windows per placement, rotating (default 3; quick 1)")
    ap.add_argument(
        "--directions", choices=("both", "to-vm"), default="both",
        help="the load: wire -> VM and VM -> wire at once (default), or wire -> VM only (the paper's Fig. 8: "
        "traffic injected at the sNIC's port)",
    )  # fmt: skip
    ap.add_argument(
        "--flows", type=int, default=FLOWS,
        help=f"flows of the load per direction (default {FLOWS}: cached after the first packets; as many as "
        "packets in the window, e.g. 30000, makes every packet a new flow to classify)",
    )  # fmt: skip
    ap.add_argument(
        "--move-only", action="store_true",
        help="only the move part: the largest size installed, then lost_on_move (no load windows, no probes)",
    )  # fmt: skip
    args = ap.parse_args()
    if not 1 <= args.flows <= rules.SPAN:
        ap.error(f"--flows must be in [1, {rules.SPAN}]")
    sizes = [int(x) for x in args.sizes.split(",")] if args.sizes else ([1000, 64000] if args.quick else
                                                                       [1000, 8000, 64000])  # fmt: skip
    seconds = args.seconds or (6.0 if args.quick else 10.0)
    repeats = args.repeats or (1 if args.quick else 3)
    directions = (True, False) if args.directions == "both" else (True,)
    if not TRAFFIC.exists():
        print(f"offload: {TRAFFIC} is missing: scripts/setup.sh rust", file=sys.stderr)
        return 2
    print_machine()
    name = "of" + uuid.uuid4().hex[:4]
    cfg = parse_config({"name": name, "rundir": "/run/uno-bench", "vms": 1,
                        "snics": [{"pcie_gbps": 0, "max_rules": 4 * max(sizes) + 1000}]})  # fmt: skip
    host = EmulatedHost(cfg)
    tmp = Path(tempfile.mkdtemp(prefix="offpy-bench-"))
    figures: dict = {"sizes": sizes, "seconds": seconds, "pps_per_direction": args.pps, "repeats": repeats,
                     "directions": args.directions, "flows": args.flows}  # fmt: skip
    results: dict = {}
    try:
        status = host.up()
        bed = Bed(host, status)
        run = 1
        if args.move_only:
            return _move_only(bed, max(sizes), args.quick, figures)
        for n in sizes:
            secs = bed.install(n)
            print(f"{n} rules installed through OneSwitch in {secs:.1f} s", flush=True)
            per: dict = {p: [] for p in rules.PLACEMENTS}
            move_ms: dict = {p: [] for p in rules.PLACEMENTS}
            for r in range(repeats):
                order = list(rules.PLACEMENTS)[r % 3 :] + list(rules.PLACEMENTS)[: r % 3]
                for placement in order:
                    move_ms[placement] += [m["ms"] for m in bed.place(placement)]
                    time.sleep(1)
                    w = load_window(bed, seconds, args.pps, run, directions, args.flows)
                    run += 2
                    per[placement].append(w)
                    print(f"  {n} {placement:<4}: host OVS {w['host_cores']:.3f} cores, sNIC switch "
                          f"{w['snic_cores']} cores, delivered {w['delivered_pps']:.0f} of {w['sent_pps']:.0f} "
                          "pkt/s", flush=True)  # fmt: skip
            results[str(n)] = {
                p: {
                    "host_cores": round(median([w["host_cores"] for w in ws]), 4),
                    "snic_cores": round(median([w["snic_cores"] for w in ws if w["snic_cores"] is not None]), 4)
                    if any(w["snic_cores"] is not None for w in ws) else None,
                    "delivered_pps": round(median([w["delivered_pps"] for w in ws]), 1),
                    "sent_pps": round(median([w["sent_pps"] for w in ws]), 1),
                    "move_ms": round(median(move_ms[p]), 2) if move_ms[p] else None,
                }
                for p, ws in per.items()
            }  # fmt: skip
            results[str(n)]["install_s"] = round(secs, 2)
        top = str(max(sizes))
        figures["results"] = results
        figures["host_cpu_ratio"] = rules.ratio(
            results[top]["snic"]["host_cores"], results[top]["host"]["host_cores"]
        )
        figures["host_cpu_ratio_half"] = rules.ratio(
            results[top]["half"]["host_cores"], results[top]["host"]["host_cores"]
        )
        # host OVS cores per delivered packet, all on the sNIC / all on the host: the comparison when the host
        # could not deliver the offered load with every rule on it (then host_cpu_ratio compares unlike work)
        h, sn = results[top]["host"], results[top]["snic"]
        figures["host_cpu_per_delivered_ratio"] = rules.ratio(
            sn["host_cores"] * h["delivered_pps"], h["host_cores"] * sn["delivered_pps"]
        )
        figures["delivered_ratio"] = rules.ratio(
            results[top]["snic"]["delivered_pps"], results[top]["host"]["delivered_pps"]
        )
        # every rule exercised, both directions, at the largest N
        fates = {}
        for placement in ("host", "half", "snic"):
            bed.place(placement)
            time.sleep(1)
            fates[placement] = probe(bed, max(sizes), PROBE_PPS, tmp)
        figures["probes"] = 2 * max(sizes)
        figures["differences"] = sum(
            rules.differences(fates["host"][d], fates[p][d]) for p in ("half", "snic") for d in fates["host"]
        )
        figures["wrong"] = {
            p: sum(rules.wrong(max(sizes), f[d]) for d in f) for p, f in fates.items()
        }  # fmt: skip
        mv = lost_on_move(bed, MOVE_PPS, 10 if args.quick else 20)
        figures["lost_on_move"] = mv["lost"]
        figures["move"] = mv
        plot({k: v for k, v in results.items()}, OUT / "offload.png")
        figures["plot"] = str((OUT / "offload.png").relative_to(REPO))
    except Exception as exc:  # noqa: BLE001 - the figures so far and the error, as the last line
        figures["error"] = f"{type(exc).__name__}: {exc}"
        print(f"offload: {figures['error']}", file=sys.stderr, flush=True)
    finally:
        try:
            host.down()
        finally:
            for p in tmp.glob("*"):
                p.unlink()
            tmp.rmdir()
    final_json(figures)
    return 1 if "error" in figures else 0


if __name__ == "__main__":
    sys.exit(main())
