"""Switching offload (UNO section 3.4, Fig. 8; issue 27): host OVS CPU with N filtering rules all on the host,
half offloaded, split, all on the sNIC, through OneSwitch.

One emulated host (1 VM, one sNIC with one Ethernet port, unshaped PCIe, `max_rules` large enough) with
OneSwitch. A controller's flow-mods (`ovs-ofctl --bundle add-flows` to OneSwitch's listener) install N
filtering rules in two filter tables before a forwarding table (bench/offload/rules.py: a quarter of the
rules allow, the rest drop; half of each table's rules one priority higher). For N in 1K, 8K, 64K and each
placement (OneSwitch's `PUT /v1/tables/{t}`: host / half = table 0 on the sNIC, table 1 on the host / split =
each filter table split at the priority that keeps half its rules on the host (`host_min_priority`: the
sNIC runs the whole table, the host the high half for its own packets) / snic), two UDP loads run in turn, each over every
placement: wire -> VM and VM -> wire at once (the issue's load) and wire -> VM only (Fig. 8's: traffic
injected at the sNIC's Ethernet port). By default every packet is a new flow (`--flows new`): a flow seen
once is classified by the switch holding the rules (an upcall), the cost Fig. 8 moves off the host; a few
long-lived flows would be datapath-cache hits whatever the rules. Each window starts with the host's
datapath flow cache emptied (the windows reuse the same flows). Before each window both switches are left
to settle (an install's or a move's last flow-mods applied: OneSwitch answers a bundle commit before the
host's vswitchd has worked through them). Over each window's middle:
- host OVS CPU: the host's ovs-vswitchd (utime + stime from /proc: the host's own process);
- sNIC CPU: its switch's CPU seconds as the sNIC reports them through its agent's API (`/v1/info`
  `switch_cpu_s`; never read from outside: the sNIC is another machine);
- delivered rate: packets per second the sinks received (VM and wire).
Then, at the largest N: every rule exercised by one probe packet in each direction per placement;
`differences` = rules whose probe was forwarded differently with the tables offloaded than on the host
(half, split and snic against host), `wrong` = probes not doing what their rule says. Last: a stream through the
tables (table-miss path) while the tables move host -> sNIC -> host twice: `lost_on_move` (the sink's
sequence gaps).

Figures (last line JSON): host_cpu_ratio = host OVS cores with all rules on the sNIC / all on the host at
the largest N, load both ways (same offered load; the delivered rates are reported beside it);
host_cpu_ratio_split the same with the tables split (half, host_cpu_ratio_half, by tables);
host_cpu_ratio_to_vm the same for the wire -> VM load; per load, N and placement the medians; the table
profile's measured host cost (`table_profile`: cores per Gbit/s and per Mpps of one filter table, for
placement/profiles.json); differences, wrong, lost_on_move; a PNG like Fig. 8
(bench/out/offload/offload.png).

    ./uno bench offload [--quick] [--sizes 1000,8000,64000] [--seconds S] [--pps PPS] [--repeats R]
                        [--directions each|both|to-vm] [--flows new|N]
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
from domain.errors import TableRefused  # noqa: E402
from emulated_host import naming as nm  # noqa: E402
from emulated_host.config import parse_config  # noqa: E402
from emulated_host.host import EmulatedHost  # noqa: E402
from host_datapath.snic_agent_client import SnicAgentClient  # noqa: E402
from host_datapath.sysutil import cpu_seconds  # noqa: E402

TRAFFIC = REPO / "nfs" / "target" / "release" / "traffic"
OUT = REPO / "bench" / "out" / "offload"
LOADS = {"both": (True, False), "to-vm": (True,)}  # wire -> VM (True) and/or VM -> wire (False)
SIZE = 128  # bytes per frame
DRAIN_MS = 500  # a moved table's old copy keeps serving what is in flight for this long
MOVE_PPS = 2000  # per direction while table 0 moves: a rate the pipeline carries without loss at rest
# rules per bundle: ovs-ofctl answers no echo while it waits for a commit, and OneSwitch drops a controller
# it has not heard from for 30 s: one bundle of 64K rules took longer than that on a loaded machine
BUNDLE = 8000
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
            self.host_ovs = sw.ovs  # its unixctl (ovs-appctl), which outlives the driver closed below
        finally:
            sw.close()
        acc = host.snic_agents()["snic0"]
        self.snic = SnicAgentClient("snic0", acc.agent, acc.token, timeout=10)
        self.vm_ns, self.vm_if = nm.ns_vm(self.name, 0), nm.if_vm(self.name, 0)[0]
        self.out_ns, self.out_if = nm.ns_outside(self.name, 0, 0), nm.if_eth(self.name, 0, 0)[1]

    def settle(self, quiet: float = 0.02, step: float = 0.5, timeout: float = 90.0) -> float:
        """Wait until the host's vswitchd and the sNIC's switch are idle (below `quiet` cores over `step`
        twice running): an install's or a move's flow-mods still being applied would count as the next
        window's CPU. Seconds waited."""
        t0, calm = time.monotonic(), 0
        while calm < 2 and time.monotonic() - t0 < timeout:
            h0, s0, w0 = self.host_cpu(), self.snic_cpu() or 0.0, time.monotonic()
            time.sleep(step)
            w = time.monotonic() - w0
            busy = max(self.host_cpu() - h0, (self.snic_cpu() or 0.0) - s0) / w
            calm = calm + 1 if busy < quiet else 0
        return time.monotonic() - t0

    def forget_flows(self) -> None:
        """Empty the host datapath's flow cache: every window reuses the same flows (ports), and a megaflow of
        the last window (idle less than OVS's 10 s max-idle, its actions revalidated in place) would spare
        this window's packets their upcall. The sNIC's cache is its own (another machine)."""
        self.host_ovs.appctl("dpctl/del-flows")

    def host_cpu(self) -> float:
        return cpu_seconds([self.vswitchd])

    def snic_cpu(self) -> float | None:
        v = self.snic.info().get("switch_cpu_s")
        return float(v) if v is not None else None

    def install(self, n: int) -> float:
        """Replace the virtual pipeline by n filtering rules (bundles of BUNDLE rules); seconds it took."""
        for t in rules.FILTERS:
            self.client.move_table(t, "host")  # a fresh table starts where the last placement left it
        subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "del-flows", self.listen], check=True)
        lines = rules.flow_lines(n, nm.vport_vm(0), nm.vport_eth(0, 0))
        t0 = time.monotonic()
        for k in range(0, len(lines), BUNDLE):
            with tempfile.NamedTemporaryFile("w", suffix=".flows", prefix="offpy-", delete=False) as f:
                f.write("\n".join(lines[k : k + BUNDLE]) + "\n")
            try:
                p = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--bundle", "add-flows", self.listen, f.name],
                                   capture_output=True, text=True, timeout=1800)  # fmt: skip
            finally:
                Path(f.name).unlink()
            if p.returncode != 0:
                raise RuntimeError(f"installing rules {k}..{k + BUNDLE}: {p.stderr.strip()[:300]}")
        return time.monotonic() - t0

    def place(self, placement: str | dict[int, str | tuple[str, int]]) -> list[dict]:
        """Move the tables: per table a location, or (sNIC, host_min_priority) for a split."""
        out = []
        where = rules.PLACEMENTS[placement] if isinstance(placement, str) else placement
        for t, at in where.items():
            loc, split = at if isinstance(at, tuple) else (at, None)
            mv = self._move(t, loc, split)
            out.append({"table": t, "from": mv.from_, "to": mv.to, "ms": mv.ms})
        return out

    def _move(self, table: int, location: str, split: int | None, tries: int = 15):
        """One table move; refused while a switch is disconnected (OneSwitch's echo timeout cut a vswitchd
        busy with a big move on a loaded machine; it reconnects): retried until it is back."""
        for k in range(tries):
            try:
                return self.client.move_table(table, location, drain_ms=DRAIN_MS, host_min_priority=split)
            except TableRefused as exc:
                if "disconnected" not in str(exc) or k == tries - 1:
                    raise
                print(f"  move of table {table} to {location} refused ({exc}): retrying", flush=True)
                time.sleep(2)
        raise AssertionError("unreachable")

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
                flows: int) -> dict:  # fmt: skip
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
    """Host OVS CPU per rule count and placement, one panel per load (cf. UNO Fig. 8)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5.6 * len(results), 3.6), squeeze=False)
    width = 0.8 / len(rules.PLACEMENTS)
    names = {"host": "HOST", "half": "HALF (by table)", "split": "SPLIT (by priority)", "snic": "sNIC"}
    for ax, (load, per_n) in zip(axes[0], results.items(), strict=True):
        sizes = sorted(per_n, key=int)
        for k, placement in enumerate(rules.PLACEMENTS):
            ys = [per_n[s][placement]["host_cores"] * 100 for s in sizes]
            xs = [i + (k - (len(rules.PLACEMENTS) - 1) / 2) * width for i in range(len(sizes))]
            ax.bar(xs, ys, width, label=names[placement])
        ax.set_xticks(range(len(sizes)), [f"{int(s) // 1000}K rules" for s in sizes])
        ax.set_ylabel("host OVS CPU (% of a core)")
        ax.set_title({"both": "wire <-> VM", "to-vm": "wire -> VM (Fig. 8's load)"}[load])
        ax.legend(fontsize="small")
    fig.suptitle("Switching offload: host OVS CPU, every packet a new flow (cf. UNO Fig. 8)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def _medians(ws: list[dict], moves: list[float]) -> dict:
    snic = [w["snic_cores"] for w in ws if w["snic_cores"] is not None]
    return {
        "host_cores": round(median([w["host_cores"] for w in ws]), 4),
        "snic_cores": round(median(snic), 4) if snic else None,
        "delivered_pps": round(median([w["delivered_pps"] for w in ws]), 1),
        "sent_pps": round(median([w["sent_pps"] for w in ws]), 1),
        "move_ms": round(median(moves), 2) if moves else None,
    }


def _ratios(at: dict) -> dict:
    """host_cpu_ratio and its companions for one load at the largest N (`at`: placement -> medians)."""
    h, sn = at["host"], at["snic"]
    return {
        "host_cpu_ratio": rules.ratio(sn["host_cores"], h["host_cores"]),
        "host_cpu_ratio_half": rules.ratio(at["half"]["host_cores"], h["host_cores"]),
        "host_cpu_ratio_split": rules.ratio(at["split"]["host_cores"], h["host_cores"]),
        # host OVS cores per delivered packet, all on the sNIC / all on the host: the comparison when the host
        # could not deliver the offered load with every rule on it (then host_cpu_ratio compares unlike work)
        "host_cpu_per_delivered_ratio": rules.ratio(
            sn["host_cores"] * h["delivered_pps"], h["host_cores"] * sn["delivered_pps"]
        ),
        "delivered_ratio": rules.ratio(sn["delivered_pps"], h["delivered_pps"]),
    }


def measure(bed: Bed, n: int, loads: list[str], args: argparse.Namespace, run: int) -> tuple[dict, int]:
    """Every load over every placement (`repeats` rounds, rotating the order) with n rules installed:
    per load the medians per placement; and the next run id. The loads run one after the other, so a
    flow comes back (the same ports in the next load) only after the other placements' windows: longer
    than OVS's datapath flow idle time, never a cache hit."""
    secs = bed.install(n)
    print(f"{n} rules installed through OneSwitch in {secs:.1f} s (settled {bed.settle():.1f} s)", flush=True)
    out: dict = {}
    for load in loads:
        per: dict = {p: [] for p in rules.PLACEMENTS}
        move_ms: dict = {p: [] for p in rules.PLACEMENTS}
        for r in range(args.repeats):
            names = list(rules.PLACEMENTS)
            order = names[r % len(names) :] + names[: r % len(names)]
            for placement in order:
                move_ms[placement] += [m["ms"] for m in bed.place(placement)]
                bed.settle()
                bed.forget_flows()
                w = load_window(bed, args.seconds, args.pps, run, LOADS[load], args.flows)
                run += 2
                per[placement].append(w)
                print(f"  {n} {load:<5} {placement:<5}: host OVS {w['host_cores']:.3f} cores, sNIC switch "
                      f"{w['snic_cores']} cores, delivered {w['delivered_pps']:.0f} of {w['sent_pps']:.0f} "
                      "pkt/s", flush=True)  # fmt: skip
        out[load] = {p: _medians(ws, move_ms[p]) for p, ws in per.items()}
        out[load]["install_s"] = round(secs, 2)
    return out, run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1K and 64K rules, one short window each")
    ap.add_argument("--sizes", help="comma-separated rule counts (default 1000,8000,64000)")
    ap.add_argument("--seconds", type=float, help="load window, s (default 8; quick 6)")
    ap.add_argument(
        "--pps", type=float, default=4000,
        help="offered packets/s per direction (default 4000: what the host delivers with all 64K rules on it)",
    )  # fmt: skip
    ap.add_argument("--repeats", type=int, help="windows per placement, rotating (default 3; quick 1)")
    ap.add_argument(
        "--directions", choices=("each", *LOADS), default="each",
        help="the loads: wire -> VM and VM -> wire at once, then wire -> VM only (the paper's Fig. 8: traffic "
        "injected at the sNIC's port) (default each), or only one of them",
    )  # fmt: skip
    ap.add_argument(
        "--flows", default="new",
        help="flows of the load per direction: `new` (default: as many as packets in the window, at most "
        f"{rules.SPAN}: every packet a new flow to classify) or a number (e.g. 1024: cached after the first "
        "packets)",
    )  # fmt: skip
    ap.add_argument(
        "--move-only", action="store_true",
        help="only the move part: the largest size installed, then lost_on_move (no load windows, no probes)",
    )  # fmt: skip
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")] if args.sizes else ([1000, 64000] if args.quick else
                                                                       [1000, 8000, 64000])  # fmt: skip
    args.seconds = args.seconds or (6.0 if args.quick else 8.0)
    args.repeats = args.repeats or (1 if args.quick else 3)
    args.flows = rules.flows(args.flows, args.pps, args.seconds)
    if args.flows is None:
        ap.error(f"--flows must be `new` or a number in [1, {rules.SPAN}]")
    loads = list(LOADS) if args.directions == "each" else [args.directions]
    if not TRAFFIC.exists():
        print(f"offload: {TRAFFIC} is missing: scripts/setup.sh rust", file=sys.stderr)
        return 2
    print_machine()
    name = "of" + uuid.uuid4().hex[:4]
    cfg = parse_config({"name": name, "rundir": "/run/uno-bench", "vms": 1,
                        "snics": [{"pcie_gbps": 0, "max_rules": 4 * max(sizes) + 1000}]})  # fmt: skip
    host = EmulatedHost(cfg)
    tmp = Path(tempfile.mkdtemp(prefix="offpy-bench-"))
    figures: dict = {"sizes": sizes, "seconds": args.seconds, "pps_per_direction": args.pps,
                     "repeats": args.repeats, "directions": args.directions, "flows": args.flows,
                     "frame_bytes": SIZE}  # fmt: skip
    results: dict = {load: {} for load in loads}
    try:
        status = host.up()
        bed = Bed(host, status)
        run = 1
        if args.move_only:
            return _move_only(bed, max(sizes), args.quick, figures)
        for n in sizes:
            per_load, run = measure(bed, n, loads, args, run)
            for load, res in per_load.items():
                results[load][str(n)] = res
        top = str(max(sizes))
        figures["results"] = results
        figures |= _ratios(results[loads[0]][top])
        if "to-vm" in results and loads[0] != "to-vm":
            figures |= {f"{k}_to_vm": v for k, v in _ratios(results["to-vm"][top]).items()}
        at = results[loads[0]][top]
        figures["table_profile"] = rules.table_profile(
            at["host"]["host_cores"],
            at["snic"]["host_cores"],
            at["host"]["sent_pps"],
            SIZE,
            len(rules.FILTERS),
            int(top),
        )
        # every rule exercised, both directions, at the largest N
        fates = {}
        for placement in rules.PLACEMENTS:
            bed.place(placement)
            time.sleep(1)
            fates[placement] = probe(bed, max(sizes), PROBE_PPS, tmp)
        figures["probes"] = 2 * max(sizes)
        figures["differences"] = sum(
            rules.differences(fates["host"][d], fates[p][d]) for p in rules.PLACEMENTS if p != "host"
            for d in fates["host"]
        )  # fmt: skip
        figures["split_rules"] = rules.split_counts(max(sizes))
        figures["wrong"] = {
            p: sum(rules.wrong(max(sizes), f[d]) for d in f) for p, f in fates.items()
        }  # fmt: skip
        mv = lost_on_move(bed, MOVE_PPS, 10 if args.quick else 20)
        figures["lost_on_move"] = mv["lost"]
        figures["move"] = mv
        plot(results, OUT / "offload.png")
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
