"""The NF benchmark through veth + OVS: the `nf` binary on a veth behind a real Open vSwitch bridge (userspace
datapath), fed by `traffic gen` and measured by `traffic sink` (testkit/veth_testbed.py builds the path).

Per NF: local (in-process store, the baseline) vs stateless (Redis, pipelined client) vs cached (stateless
+ owner cache), alternating run by run in one session, medians over the repeats, for each workload:
- saturation: the generator sends as fast as it can (offered above what the path sustains); reported are the
  offered data packets/s (sent / the generator's sending time), delivered data packets/s (received by the
  sink / its receive window, first to last), the loss, and the NF process's CPU time per packet it received
  (/proc schedstat of its threads, which holds on a loaded machine where wall-clock rates do not) and
  Redis's CPU time per NF packet;
- paced: long flows of 64 B at a stated offered load below saturation (half the lower of local's and
  stateless's delivered rate in this run), sink latency p50/p99 (generator send to sink receive, so OVS and
  the veths are in it for both modes); added latency = stateless minus local.
"""

from __future__ import annotations

import json
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.common import median
from testkit.procs import last_json, wait_exit
from testkit.veth_testbed import Testbed, proc_cpu_s

NF_TYPES = ("firewall", "nat", "monitor", "lb", "ips", "l7fw")
MODES = ("local", "stateless", "cached")
LB_VIP = "10.0.0.100"

# The memory variant's configs (nfs/crates/nfbench/src/main.rs), so the two variants measure the same NFs.
NF_CONFIGS: dict[str, dict] = {
    "firewall": {
        "rules": [{"action": "allow", "proto": "tcp", "src": "10.0.0.0/8", "dst_port": 80}],
        "idle_timeout_ms": 60000,
    },
    "nat": {"inside": ["10.0.0.0/8"], "public_ips": ["198.51.100.1"], "ports": "10000-29999"},
    "monitor": {},
    "lb": {
        "vip": LB_VIP,
        "port": 80,
        "backends": ["10.1.0.1:8080", "10.1.0.2:8080", "10.1.0.3:8080", "10.1.0.4:8080"],
    },
    # 64 signatures, none in the generator's payload: every stream byte is scanned.
    "ips": {
        "signatures": [{"id": i, "content": f"sig-{i:03}-attack"} for i in range(64)],
        "action": "drop",
        "alert_log": "/dev/null",
    },
    "l7fw": {
        "block": [{"proto": "tls", "sni": "*.bad.example"}, {"proto": "http", "host": "evil.example"}],
        "default": "allow",
    },
}
# Where the generator sends (source 10.0.0.1, TCP-like flows): NAT translates inside -> outside, the LB
# balances connections to its VIP; the others see 10.0.0.1 -> 10.0.0.2:80.
NF_DST = {"nat": "192.0.2.2", "lb": LB_VIP}


@dataclass(frozen=True)
class Workload:
    name: str
    flows: int
    pkts: int  # data packets per flow
    size: int  # frame length asked of the generator

    @property
    def data_packets(self) -> int:
        return self.flows * self.pkts


def workloads(quick: bool) -> list[Workload]:
    """Saturation workloads: long flows (thousands of packets each) and short flows (20 packets)."""
    if quick:
        return [Workload("long64", 16, 1500, 64), Workload("short64", 500, 20, 64)]
    return [
        Workload("long64", 16, 5000, 64),
        Workload("short64", 2000, 20, 64),
        Workload("long1500", 16, 1500, 1514),
        Workload("short1500", 600, 20, 1514),
    ]


def nf_config(nf: str, mode: str) -> dict:
    return {**NF_CONFIGS[nf], **({"owner_cache": True} if mode == "cached" else {})}


@dataclass
class Binaries:
    nf: Path
    traffic: Path


class VethBench:
    """Runs measurements on one `Testbed`; `run_id` keeps every run's packets apart at the sink."""

    def __init__(self, tb: Testbed, bins: Binaries, xdp: bool = False):
        self.tb, self.bins, self.xdp = tb, bins, xdp
        self.run_id = 0

    def next_run(self, name: str, config: dict) -> Path:
        """A new `run_id` and the NF's config for it written to `<name>.json` in the testbed's directory."""
        self.run_id += 1
        path = self.tb.dir / f"{name}.json"
        path.write_text(json.dumps(config))
        return path

    def measure(self, nf: str, mode: str, wl: Workload, rate: float) -> dict:
        """One run: NF up, sink up, generator at `rate` pps, sink report, NF down."""
        tb = self.tb
        cfg = self.next_run(f"{nf}-{mode}", nf_config(nf, mode))
        if mode != "local":
            tb.redis_flush()
        store = "local" if mode == "local" else tb.store_url
        proc = tb.start_nf(self.bins.nf, nf, store, cfg, xdp=self.xdp)
        try:
            sink = tb.start_sink(self.bins.traffic, [
                "--run", str(self.run_id), "--expect", str(wl.data_packets), "--idle-ms", "800",
                "--duration-ms", "300000"])  # fmt: skip
            cpu0, rcpu0, lcpu0 = proc_cpu_s(proc.pid), tb.redis_cpu_s(), tb.relay_cpu_s()
            gen = tb.traffic(self.bins.traffic, "gen", [
                "--run", str(self.run_id), "--flows", str(wl.flows), "--pkts", str(wl.pkts),
                "--rate", f"{rate:.0f}", "--size", str(wl.size), "--dst", NF_DST.get(nf, "10.0.0.2"),
                "--dst-port", "80"])  # fmt: skip
            g = last_json(wait_exit(gen, 600))
            s = last_json(wait_exit(sink, 600))
            cpu1, rcpu1, lcpu1 = proc_cpu_s(proc.pid), tb.redis_cpu_s(), tb.relay_cpu_s()
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                out, _ = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, _ = proc.communicate()
        stats = last_json(out.decode() if isinstance(out, bytes) else out)
        relay = None if lcpu0 is None or lcpu1 is None or mode == "local" else lcpu1 - lcpu0
        return run_figures(wl, g, s, stats, cpu1 - cpu0, rcpu1 - rcpu0, relay)


def run_figures(
    wl: Workload,
    gen: dict,
    sink: dict,
    stats: dict,
    nf_cpu_s: float,
    redis_cpu_s: float,
    relay_cpu_s: float | None = None,
) -> dict:
    """Figures of one run from the generator's, the sink's and the NF's reports (pure); `relay_cpu_s`: the
    Redis relays' CPU (`--veth-redis relay` only)."""
    secs = max(gen["seconds"], 1e-9)
    sent_frac = gen["sent"] / max(gen["frames"], 1)
    # Delivered over the sink's receive window (first to last data packet) when that is longer than the
    # sending time: at saturation the queues in the veths and OVS drain after the generator stops, so the
    # sending time alone would overstate the rate; a few packets in a short window (near-total loss) would
    # overstate it too, so never less than the sending time.
    rx_secs = max(sink.get("rx_span_s", 0.0), secs)
    rx = stats.get("counters", stats).get("rx", 0) or 0
    return {
        "offered_pps": round(wl.data_packets * sent_frac / secs),
        "delivered_pps": round(sink["received"] / rx_secs),
        "loss": round(sink["lost"] / max(sink["expected"], 1), 4),
        "p50_us": sink["latency_us"]["p50"],
        "p99_us": sink["latency_us"]["p99"],
        "nf_rx": rx,
        "nf_cpu_us_per_pkt": round(nf_cpu_s * 1e6 / rx, 3) if rx else None,
        "redis_cpu_us_per_pkt": round(redis_cpu_s * 1e6 / rx, 3) if rx else None,
        "relay_cpu_us_per_pkt": round(relay_cpu_s * 1e6 / rx, 3) if rx and relay_cpu_s is not None else None,
    }


FIGURES = (
    "offered_pps",
    "delivered_pps",
    "loss",
    "p50_us",
    "p99_us",
    "nf_cpu_us_per_pkt",
    "redis_cpu_us_per_pkt",
    "relay_cpu_us_per_pkt",
)


def medians(runs: list[dict]) -> dict:
    out = {}
    for k in FIGURES:
        xs = [r[k] for r in runs if r.get(k) is not None]
        out[k] = round(median(xs), 3) if xs else None
    return out


def paced_rate(sat: dict) -> float:
    """Offered load of the latency runs: half the lower delivered rate of local and stateless (long, 64 B)."""
    w = sat["long64"]
    return max(1000.0, 0.5 * min(w["local"]["delivered_pps"], w["stateless"]["delivered_pps"]))


def summarise(results: dict) -> dict:
    """Headline figures per NF from {nf: {workload: {mode: medians}, "paced": {...}}} (pure)."""
    out = {}
    for nf, w in results.items():
        long64, short64 = w["long64"], w["short64"]

        def ratio(wl: dict, mode: str) -> float | None:
            lo = wl["local"]["delivered_pps"]
            return round(wl[mode]["delivered_pps"] / lo, 3) if lo else None

        row = {
            "local_pps": long64["local"]["delivered_pps"],
            "stateless_pps": long64["stateless"]["delivered_pps"],
            "cached_pps": long64["cached"]["delivered_pps"],
            "offered_pps": long64["local"]["offered_pps"],
            "ratio_long": ratio(long64, "stateless"),
            "ratio_short64": ratio(short64, "stateless"),
            "cached_ratio_long": ratio(long64, "cached"),
            "cached_ratio_short64": ratio(short64, "cached"),
        }
        for mode in MODES:
            row[f"{mode}_loss"] = long64[mode]["loss"]
            row[f"{mode}_cpu_us_per_pkt"] = long64[mode]["nf_cpu_us_per_pkt"]
            row[f"{mode}_short64_cpu_us_per_pkt"] = short64[mode]["nf_cpu_us_per_pkt"]
        for mode in ("stateless", "cached"):
            row[f"{mode}_redis_cpu_us_per_pkt"] = long64[mode]["redis_cpu_us_per_pkt"]
            if long64[mode].get("relay_cpu_us_per_pkt") is not None:
                row[f"{mode}_relay_cpu_us_per_pkt"] = long64[mode]["relay_cpu_us_per_pkt"]
        paced = w.get("paced")
        if paced:
            row["paced_offered_pps"] = paced["offered_pps"]
            for mode, prefix in (("stateless", ""), ("cached", "cached_")):
                for q in ("p50", "p99"):
                    row[f"{prefix}added_{q}_us"] = round(
                        paced[mode][f"{q}_us"] - paced["local"][f"{q}_us"], 1
                    )
            row["local_p50_us"], row["local_p99_us"] = paced["local"]["p50_us"], paced["local"]["p99_us"]
        out[nf] = row
    return out


def run(tb: Testbed, bins: Binaries, nfs: list[str], quick: bool, repeats: int, xdp: bool = False,
        log=print) -> dict:  # fmt: skip
    """All measurements (modes alternating within each repeat); returns the per-NF medians."""
    vb = VethBench(tb, bins, xdp)
    results: dict = {}
    saturate = 1e9  # the generator's pacing never holds it back: it sends as fast as it can
    for nf in nfs:
        res: dict = {}
        for wl in workloads(quick):
            runs: dict[str, list[dict]] = {m: [] for m in MODES}
            for _ in range(repeats):
                for mode in MODES:
                    runs[mode].append(vb.measure(nf, mode, wl, saturate))
            res[wl.name] = {m: medians(runs[m]) for m in MODES}
            log(_row(nf, wl.name, res[wl.name]))
        rate = paced_rate(res)
        secs = 1.0 if quick else 2.0
        pw = Workload("paced64", 16, max(1, int(rate * secs / 16)), 64)
        runs = {m: [] for m in MODES}
        for _ in range(repeats):
            for mode in MODES:
                runs[mode].append(vb.measure(nf, mode, pw, rate))
        res["paced"] = {"offered_pps": round(rate), **{m: medians(runs[m]) for m in MODES}}
        log(f"{'':9} at {rate:.0f} pps offered (long, 64 B), sink latency p50/p99 us: "
            + "  ".join(f"{m} {res['paced'][m]['p50_us']:.0f}/{res['paced'][m]['p99_us']:.0f}" for m in MODES)
            + "  loss " + "/".join(f"{res['paced'][m]['loss']:.3f}" for m in MODES))  # fmt: skip
        results[nf] = res
    return results


def header() -> str:
    cell = f"{'offered':>9} {'delivered':>9} {'x':>5} {'loss':>6} {'cpu us/p':>8} {'redis':>6}"
    return f"{'nf':9} {'workload':10} " + " | ".join(f"{m:>9}: {cell}" for m in MODES)


def _row(nf: str, wl: str, r: dict) -> str:
    lo = r["local"]["delivered_pps"] or 1

    def cell(m: str) -> str:
        x = r[m]
        cpu = x["nf_cpu_us_per_pkt"]
        rc = x["redis_cpu_us_per_pkt"]
        return (f"{'':>9}  {x['offered_pps']:9.0f} {x['delivered_pps']:9.0f} {x['delivered_pps'] / lo:5.2f} "
                f"{x['loss']:6.3f} {cpu if cpu is not None else float('nan'):8.2f} "
                f"{rc if rc is not None else float('nan'):6.2f}")  # fmt: skip

    return f"{nf:9} {wl:10} " + " | ".join(cell(m) for m in MODES)
