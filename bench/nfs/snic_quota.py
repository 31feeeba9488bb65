"""An NF in an sNIC's CPU-quota cgroup under paced traffic: loss, latency and throttling per CFS period.

`python -m bench.nfs.snic_quota [--nfs firewall,ips] [--cores 0.2] [--periods 100000,10000,5000]
[--loads 0.5,0.9,1.2] [--seconds 3] [--rounds 2]` (root; nfs built in release). The real `nf` binary on a veth
(AF_PACKET, Redis over its unix socket with `spin_us: 0`, as the agent starts sNIC NFs) in a cgroup made by
snic_datapath/cgroup.py, `traffic gen` and `traffic sink` on the veth's other end (testkit/veth_testbed.py,
`direct`: no OVS in the path, so the latency is the NF's). Per NF:

1. calibration: the NF unthrottled (a quota of 2 cores, more than its one busy thread can use) at a modest
   rate; its CPU per packet gives the rates whose demand is each `--loads` fraction of `--cores`, each corrected
   by two more unthrottled runs (rate x wanted / measured demand: the CPU per packet falls as the rate grows);
2. per load: `none` (the unthrottled quota: the baseline at that rate, and its measured demand) and each
   period, alternating within each round. Figures per run: offered pps, loss, sink latency p50/p99/max (generator
   send to sink receive), the group's CPU (cores over the sending time), periods and throttled periods per
   second, throttled ms per second (cpu.stat), and the frames the NF's port ring dropped (`port_drops`: the
   kernel's PACKET_STATISTICS). Medians over the rounds; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

from bench.common import median
from bench.nfs.veth import NF_CONFIGS, NF_DST, Binaries, VethBench
from host_datapath.sysutil import DatapathError
from snic_datapath.cgroup import CpuCgroup, quota_us
from testkit.procs import last_json, wait_exit
from testkit.veth_testbed import Testbed

NONE = 0  # period key of the unthrottled baseline
UNLIMITED_CORES = 2.0  # more than the NF's one packet thread can use: never throttled
UNLIMITED_PERIOD_US = 100_000  # the period of the `none` runs (any: they are never throttled)
FLOWS = 16
CALIBRATION_STEPS = 2  # unthrottled runs per load that correct its rate to the measured demand
FIGURES = ("offered_pps", "loss", "p50_us", "p99_us", "max_us", "cores", "throttled_per_s", "throttled_ms_per_s",
           "port_drops", "cpu_us_per_pkt")  # fmt: skip


def nf_config(nf: str) -> dict:
    """The veth bench's config of `nf`, with the agent's setting under a quota: no spinning for replies."""
    return {**NF_CONFIGS[nf], "spin_us": 0}


class QuotaBench(VethBench):
    """Runs on one direct `Testbed`; every run gets its own cgroup, removed after the run."""

    def __init__(self, tb: Testbed, bins: Binaries, seconds: float):
        super().__init__(tb, bins)
        self.seconds = seconds

    def measure_in_cgroup(self, nf: str, rate: float, cores: float, period_us: int) -> dict:
        """One run of `nf` at `rate` pps in a fresh cgroup of `cores` per `period_us` (NONE: UNLIMITED_PERIOD_US)."""
        tb = self.tb
        cfg = self.next_run(nf, nf_config(nf))
        tb.redis_flush()
        cg = CpuCgroup(f"uno-{tb.name}-snic{self.run_id}")
        proc = None
        try:
            cg.create(cores, period_us or UNLIMITED_PERIOD_US)
            proc = tb.start_nf(self.bins.nf, nf, tb.store_url, cfg)
            cg.add(proc.pid)
            pkts = max(1, round(rate * self.seconds / FLOWS))
            sink = tb.start_sink(self.bins.traffic, [
                "--run", str(self.run_id), "--expect", str(pkts * FLOWS), "--idle-ms", "1500",
                "--duration-ms", str(int(self.seconds * 1000 + 30_000))])  # fmt: skip
            thr0, use0 = cg.throttling(), cg.usage_seconds()
            gen = tb.traffic(self.bins.traffic, "gen", [
                "--run", str(self.run_id), "--flows", str(FLOWS), "--pkts", str(pkts), "--rate", f"{rate:.0f}",
                "--size", "64", "--dst", NF_DST.get(nf, "10.0.0.2"), "--dst-port", "80"])  # fmt: skip
            g = last_json(wait_exit(gen, self.seconds * 4 + 60))
            s = last_json(wait_exit(sink, self.seconds * 4 + 60))
            thr1, use1 = cg.throttling(), cg.usage_seconds()
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=30)
            stats = last_json(out.decode())
        finally:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.communicate()
            cg.destroy()
        secs = max(g["seconds"], 1e-9)
        c = stats.get("counters", stats)
        rx = c.get("rx") or 0
        return {
            "offered_pps": round(g["data_packets"] * g["sent"] / max(g["frames"], 1) / secs),
            "loss": round(s["lost"] / max(s["expected"], 1), 4),
            "p50_us": s["latency_us"]["p50"],
            "p99_us": s["latency_us"]["p99"],
            "max_us": s["latency_us"]["max"],
            "cores": round((use1 - use0) / secs, 4),
            "throttled_per_s": round((thr1.throttled - thr0.throttled) / secs, 1),
            "throttled_ms_per_s": round((thr1.throttled_s - thr0.throttled_s) * 1e3 / secs, 1),
            "port_drops": c.get("port_drops", 0),
            "cpu_us_per_pkt": round((use1 - use0) * 1e6 / rx, 2) if rx else None,
        }


def medians(runs: list[dict]) -> dict:
    out = {}
    for k in FIGURES:
        xs = [r[k] for r in runs if r.get(k) is not None]
        out[k] = round(median(xs), 4) if xs else None
    out["loss_max"] = max((r["loss"] for r in runs), default=None)
    out["port_drops_max"] = max((r["port_drops"] for r in runs), default=None)
    return out


def rates_for(loads: list[float], cores: float, cpu_us_per_pkt: float) -> list[float]:
    """Offered packets/s whose CPU demand is `load` x `cores` at `cpu_us_per_pkt` (pure)."""
    return [load * cores * 1e6 / cpu_us_per_pkt for load in loads]


def label(period_us: int) -> str:
    return "none" if period_us == NONE else f"{period_us // 1000}ms"


def run(tb: Testbed, bins: Binaries, nfs: list[str], cores: float, periods: list[int], loads: list[float],
        seconds: float, rounds: int, calib_pps: float, log=print) -> dict:  # fmt: skip
    qb = QuotaBench(tb, bins, seconds)
    results: dict = {}
    for nf in nfs:
        cal = qb.measure_in_cgroup(nf, calib_pps, UNLIMITED_CORES, NONE)
        log(f"{nf}: calibration at {calib_pps:.0f} pps unthrottled: {cal['cpu_us_per_pkt']} us CPU per packet, "
            f"{cal['cores']} cores")  # fmt: skip
        res: dict = {"calibration": cal, "cores": cores, "loads": {}}
        for load, rate in zip(loads, rates_for(loads, cores, cal["cpu_us_per_pkt"]), strict=True):
            for _ in range(CALIBRATION_STEPS):  # the CPU per packet falls as batches grow with the rate
                rate *= load * cores / qb.measure_in_cgroup(nf, rate, UNLIMITED_CORES, NONE)["cores"]
            runs: dict[int, list[dict]] = {p: [] for p in (NONE, *periods)}
            for _ in range(rounds):
                for p in runs:
                    runs[p].append(qb.measure_in_cgroup(nf, rate, UNLIMITED_CORES if p == NONE else cores, p))
            row = {label(p): medians(r) for p, r in runs.items()}
            res["loads"][f"{load:g}"] = {
                "rate_pps": round(rate),
                **row,
                "runs": {label(p): r for p, r in runs.items()},
            }
            for p in runs:
                m = row[label(p)]
                log(f"{nf:8} load {load:4g} ({rate:6.0f} pps) {label(p):>5}: demand/used {m['cores']:.3f} cores "
                    f"loss {m['loss']:.4f} (max {m['loss_max']:.4f}) p50/p99/max {m['p50_us']:.0f}/{m['p99_us']:.0f}/"
                    f"{m['max_us']:.0f} us  throttled {m['throttled_per_s']:.0f}/s {m['throttled_ms_per_s']:.0f} ms/s "
                    f"port_drops {m['port_drops_max']}  cpu/pkt {m['cpu_us_per_pkt']} us")  # fmt: skip
        results[nf] = res
    return results


def _csv(kind, text: str) -> list:
    try:
        return [kind(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad list {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nfs", type=lambda t: _csv(str, t), default=["firewall"])
    ap.add_argument("--cores", type=float, default=0.2)
    ap.add_argument("--periods", type=lambda t: _csv(int, t), default=[100_000, 10_000, 5_000])
    ap.add_argument("--loads", type=lambda t: _csv(float, t), default=[0.5, 0.9, 1.2])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--calib-pps", type=float, default=10_000.0)
    ap.add_argument("--rundir", default="/run/uno-bench")
    a = ap.parse_args(argv)
    bad = [n for n in a.nfs if n not in NF_CONFIGS]
    if (
        bad
        or a.cores <= 0
        or a.seconds <= 0
        or a.rounds < 1
        or a.calib_pps <= 0
        or not a.loads
        or not a.periods
    ):
        ap.error(f"bad arguments (unknown NFs: {bad})" if bad else "--cores, --seconds, --rounds, --calib-pps "
                 "must be positive, --loads and --periods not empty")  # fmt: skip
    for period in a.periods:
        try:
            quota_us(a.cores, period)
        except DatapathError as exc:
            ap.error(f"--periods: {exc}")
    if os.geteuid() != 0:
        ap.error("needs root (namespaces, cgroups)")
    target = Path(__file__).resolve().parents[2] / "nfs" / "target" / "release"
    bins = Binaries(target / "nf", target / "traffic")
    t0 = time.monotonic()
    print(f"load at start: {Path('/proc/loadavg').read_text().strip()}", flush=True)
    with Testbed(a.rundir, direct=True) as tb:
        res = run(tb, bins, a.nfs, a.cores, a.periods, a.loads, a.seconds, a.rounds, a.calib_pps,
                  log=lambda m: print(m, flush=True))  # fmt: skip
    print(
        f"load at end: {Path('/proc/loadavg').read_text().strip()}, {time.monotonic() - t0:.0f} s", flush=True
    )
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
