"""Datapath baseline: VM -> host switch -> PCIe link (unshaped) -> sNIC switch -> outside, real packets.

Measures UDP 64 B packets/s, UDP 1400 B Gbit/s and TCP Gbit/s (iperf3, receiver's count), and the CPU share of
each switch's ovs-vswitchd during the runs. Every figure is the median of the repeats. Last line: JSON with
udp64_kpps, udp1400_gbps, tcp_gbps, cpu_host, cpu_snic.

    ./uno bench datapath [--quick] [--host-datapath dpdk] [--hugepages-mb N]

`--host-datapath dpdk` measures the host switch on OVS-DPDK (`host.switch.dpdk`: one PMD thread, the VM and
the PCIe link's host end on af_packet vdevs) beside the plain userspace one, in the same run: each repeat
brings up one host of each kind in turn (alternating which goes first), never both at once (the PMD thread
holds a whole CPU while its switch runs). The JSON then adds the same figures prefixed `dpdk_` and the
ratios `dpdk_vs_netdev_*` (DPDK / netdev).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from bench.common import final_json, median, print_machine
from emulated_host import naming as nm
from emulated_host.config import parse_config
from emulated_host.host import EmulatedHost
from host_datapath.switch import SwitchDriver

CLK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK  # utime + stime


def iperf(server_ns: str, ip: str, client_ns: str, seconds: float, udp_len: int | None) -> dict:
    port = "5301"
    srv = subprocess.Popen(["ip", "netns", "exec", server_ns, "iperf3", "-s", "-1", "-p", port, "-B", ip],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        for _ in range(50):
            ss = subprocess.run(
                ["ip", "netns", "exec", server_ns, "ss", "-ltnu"], capture_output=True, text=True
            )
            if f":{port}" in ss.stdout:
                break
            time.sleep(0.1)
        cmd = ["ip", "netns", "exec", client_ns, "iperf3", "-c", ip, "-p", port, "-t", str(seconds), "-J"]
        if udp_len:
            cmd += ["-u", "-l", str(udp_len), "-b", "0"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30)
        if out.returncode != 0:
            raise RuntimeError(f"iperf3 failed: {out.stdout[-400:]} {out.stderr[-400:]}")
        return json.loads(out.stdout)["end"]
    finally:
        srv.kill()
        srv.wait()


def host_config(datapath: str, hugepages_mb: int) -> dict:
    cfg = {"name": "b" + uuid.uuid4().hex[:5], "rundir": "/run/uno-bench", "vms": 1,
           "snics": [{"pcie_gbps": 0}], "oneswitch": {"enabled": False}}  # fmt: skip
    if datapath == "dpdk":
        cfg["host"] = {"switch": {"datapath_type": "netdev", "dpdk": {"hugepages_mb": hugepages_mb}}}
    return cfg


def measure(datapath: str, hugepages_mb: int, seconds: float, progress: str) -> dict[str, float]:
    """One host with the host switch on `datapath` up, each test once, down again: its figures."""
    host = EmulatedHost(parse_config(host_config(datapath, hugepages_mb)))
    try:
        status = host.up()
        h, s = status["host"], status["snics"][0]
        for sw in (h, s):
            drv = SwitchDriver(sw["bridge"], sw["ovsdb"], openflow=sw["openflow"])
            drv.add_flows(["in_port=100,actions=output:1", "in_port=1,actions=output:100"])
        vm_ns, out_ns, out_ip = nm.ns_vm(host.name, 0), nm.ns_outside(host.name, 0, 0), nm.ip_outside(0, 0)
        pids = {"host": h["pids"]["ovs-vswitchd"], "snic": s["pids"]["ovs-vswitchd"]}
        figures: dict[str, float] = {}
        for key, udp_len in TESTS:
            c0 = {k: cpu_seconds(p) for k, p in pids.items()}
            t0 = time.monotonic()
            end = iperf(out_ns, out_ip, vm_ns, seconds, udp_len)
            wall = time.monotonic() - t0
            for k, p in pids.items():
                figures.setdefault(f"cpu_{k}", 0.0)
                figures[f"cpu_{k}"] += (cpu_seconds(p) - c0[k]) / wall / len(TESTS)
            if udp_len:
                summ = end["sum"]
                got = summ["packets"] - summ["lost_packets"]
                if key == "udp64_kpps":
                    figures[key] = got / summ["seconds"] / 1e3
                else:
                    figures[key] = got * udp_len * 8 / summ["seconds"] / 1e9
            else:
                figures[key] = end["sum_received"]["bits_per_second"] / 1e9
            print(f"{progress} {datapath} {key}: {figures[key]:.3f}", file=sys.stderr, flush=True)
        return figures
    finally:
        host.down()


TESTS = [("udp64_kpps", 64), ("udp1400_gbps", 1400), ("tcp_gbps", None)]
KEYS = [k for k, _ in TESTS] + ["cpu_host", "cpu_snic"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 repeat of 3 s per test")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--seconds", type=float, default=None)
    ap.add_argument("--host-datapath", choices=("netdev", "dpdk"), default="netdev",
                    help="dpdk: also the host switch on OVS-DPDK, beside the plain userspace one")  # fmt: skip
    ap.add_argument("--hugepages-mb", type=int, default=256, help="host.switch.dpdk.hugepages_mb (dpdk)")
    args = ap.parse_args()
    repeats = args.repeats or (1 if args.quick else 3)
    seconds = args.seconds or (3.0 if args.quick else 5.0)
    print_machine()
    kinds = ["netdev"] if args.host_datapath == "netdev" else ["netdev", "dpdk"]
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    for r in range(repeats):
        for dp in kinds if r % 2 == 0 else kinds[::-1]:
            runs[dp].append(measure(dp, args.hugepages_mb, seconds, f"[{r + 1}/{repeats}]"))
    med = {dp: {k: round(median([x[k] for x in runs[dp]]), 3) for k in KEYS} for dp in kinds}
    print(f"VM -> host OVS -> PCIe (unshaped) -> sNIC OVS -> outside; {repeats} x {seconds:.0f} s, medians")
    for dp in kinds:
        f = med[dp]
        label = "host switch OVS-DPDK (1 PMD)" if dp == "dpdk" else "host switch OVS userspace (netdev)"
        print(f" {label}")
        print(f"  UDP 64 B     {f['udp64_kpps']:8.1f} kpps (received)")
        print(f"  UDP 1400 B   {f['udp1400_gbps']:8.3f} Gbit/s (received payload)")
        print(f"  TCP          {f['tcp_gbps']:8.3f} Gbit/s")
        print(f"  vswitchd CPU host {f['cpu_host']:.2f} cores, sNIC {f['cpu_snic']:.2f} cores")
    figures: dict = dict(med["netdev"])
    if "dpdk" in med:
        figures |= {f"dpdk_{k}": v for k, v in med["dpdk"].items()}
        ratios = {}
        for k, _ in TESTS:
            base, test = med["netdev"][k], k.split("_")[0]
            ratios[test] = round(med["dpdk"][k] / base, 3) if base else None
            figures[f"dpdk_vs_netdev_{test}"] = ratios[test]
        figures["host_datapath"] = "dpdk"
        print("  DPDK / netdev: " + ", ".join(f"{t} {r}" for t, r in ratios.items()))
    final_json(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
