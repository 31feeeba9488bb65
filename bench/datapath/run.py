"""Datapath baseline: VM -> host switch -> PCIe link (unshaped) -> sNIC switch -> outside, real packets.

Measures UDP 64 B packets/s, UDP 1400 B Gbit/s and TCP Gbit/s (iperf3, receiver's count), and the CPU share of
each switch's ovs-vswitchd during the runs. Every figure is the median of the repeats. Last line: JSON with
udp64_kpps, udp1400_gbps, tcp_gbps, cpu_host, cpu_snic.

    ./uno bench datapath [--quick]
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 repeat of 3 s per test")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--seconds", type=float, default=None)
    args = ap.parse_args()
    repeats = args.repeats or (1 if args.quick else 3)
    seconds = args.seconds or (3.0 if args.quick else 5.0)
    print_machine()
    host = EmulatedHost(parse_config({"name": "b" + uuid.uuid4().hex[:5], "rundir": "/run/uno-bench", "vms": 1,
                                      "snics": [{"pcie_gbps": 0}], "oneswitch": {"enabled": False}}))  # fmt: skip
    try:
        status = host.up()
        h, s = status["host"], status["snics"][0]
        for sw in (h, s):
            drv = SwitchDriver(sw["bridge"], sw["ovsdb"], openflow=sw["openflow"])
            drv.add_flows(["in_port=100,actions=output:1", "in_port=1,actions=output:100"])
        vm_ns, out_ns, out_ip = nm.ns_vm(host.name, 0), nm.ns_outside(host.name, 0, 0), nm.ip_outside(0, 0)
        pids = {"host": h["pids"]["ovs-vswitchd"], "snic": s["pids"]["ovs-vswitchd"]}
        results: dict[str, list[float]] = {k: [] for k in ("udp64_kpps", "udp1400_gbps", "tcp_gbps")}
        cpu: dict[str, list[float]] = {"host": [], "snic": []}
        tests = [("udp64_kpps", 64), ("udp1400_gbps", 1400), ("tcp_gbps", None)]
        total = repeats * len(tests)
        done = 0
        for _ in range(repeats):
            for key, udp_len in tests:
                c0 = {k: cpu_seconds(p) for k, p in pids.items()}
                t0 = time.monotonic()
                end = iperf(out_ns, out_ip, vm_ns, seconds, udp_len)
                wall = time.monotonic() - t0
                for k, p in pids.items():
                    cpu[k].append((cpu_seconds(p) - c0[k]) / wall)
                if udp_len:
                    summ = end["sum"]
                    got = summ["packets"] - summ["lost_packets"]
                    if key == "udp64_kpps":
                        results[key].append(got / summ["seconds"] / 1e3)
                    else:
                        results[key].append(got * udp_len * 8 / summ["seconds"] / 1e9)
                else:
                    results[key].append(end["sum_received"]["bits_per_second"] / 1e9)
                done += 1
                print(f"[{done}/{total}] {key}: {results[key][-1]:.3f}", file=sys.stderr, flush=True)
        figures = {k: round(median(v), 3) for k, v in results.items()}
        figures["cpu_host"] = round(median(cpu["host"]), 3)
        figures["cpu_snic"] = round(median(cpu["snic"]), 3)
        print(
            f"VM -> host OVS -> PCIe (unshaped) -> sNIC OVS -> outside; {repeats} x {seconds:.0f} s, medians"
        )
        print(f"  UDP 64 B     {figures['udp64_kpps']:8.1f} kpps (received)")
        print(f"  UDP 1400 B   {figures['udp1400_gbps']:8.3f} Gbit/s (received payload)")
        print(f"  TCP          {figures['tcp_gbps']:8.3f} Gbit/s")
        print(f"  vswitchd CPU host {figures['cpu_host']:.2f} cores, sNIC {figures['cpu_snic']:.2f} cores")
        final_json(figures)
        return 0
    finally:
        host.down()


if __name__ == "__main__":
    sys.exit(main())
