"""NF agent: provisioning time, and host CPU saved by placing an NF on the sNIC, predicted vs measured.

On an emulated host with OneSwitch, `uno agent serve` runs as a process; a controller's rules are installed
through OneSwitch (VM <-> NF <-> wire, one-arm NF by source MAC).

- provision_ms: POST /v1/nfs (firewall) -> rules installed on OneSwitch -> first ping through the NF
  answered (median over repeats; api_ms is the POST alone).
- Saving: the same UDP load (iperf3, fixed rate) through the firewall placed on the host, then migrated to
  the sNIC. measured_saving = host CPU cores used by the NF's processes (/proc) on the host minus on the sNIC
  (there they run in the sNIC's cgroup, whose usage is reported separately); predicted_saving = the
  agent's model (profile r_host x measured load) for the same two placements. Delivered throughput of both
  runs is printed to show they match.

    ./uno bench agent [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from bench.common import final_json, median, print_machine
from nf_agent.agent.runtime import cpu_seconds
from nf_agent.emulated_host import naming as nm
from nf_agent.emulated_host.config import parse_config
from nf_agent.emulated_host.host import EmulatedHost, ping
from snic_datapath.cgroup import CpuCgroup

REPO = Path(__file__).resolve().parents[2]
FW = {"rules": [{"action": "allow", "proto": "any", "src": "any", "dst": "any"}], "default": "deny"}


def call(base: str, method: str, path: str, body=None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def ofctl(listen: str, *args: str) -> None:
    subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", *args[:1], listen, *args[1:]], check=True,
                   capture_output=True)  # fmt: skip


def chain_rules(listen: str, vport: int) -> None:
    vm_mac, out_mac, eth, vmp = nm.mac(1, 0, 0), nm.mac(2, 0, 0), nm.vport_eth(0, 0), nm.vport_vm(0)
    ofctl(listen, "del-flows")
    for f in (f"in_port={vmp},actions=output:{vport}", f"in_port={eth},actions=output:{vport}",
              f"in_port={vport},dl_src={vm_mac},actions=output:{eth}",
              f"in_port={vport},dl_src={out_mac},actions=output:{vmp}"):  # fmt: skip
        ofctl(listen, "add-flow", f)


def instance(rundir: Path, nf: str) -> dict:
    return json.loads((rundir / "agent" / "state.json").read_text())["nfs"][nf]["instances"][0]


def inst_pids(inst: dict) -> list[int]:
    return [p for p in [inst["pid"], *inst["relay_pids"]] if p]


def iperf_udp(vm_ns: str, out_ns: str, ip: str, mbps: float, seconds: float) -> float:
    """Received Mbit/s of a UDP stream vm -> outside at `mbps` (1400 B datagrams)."""
    srv = subprocess.Popen(["ip", "netns", "exec", out_ns, "iperf3", "-s", "-1", "-p", "5302", "-B", ip],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        time.sleep(0.5)
        out = subprocess.run(
            ["ip", "netns", "exec", vm_ns, "iperf3", "-c", ip, "-p", "5302", "-u", "-l", "1400", "-b", f"{mbps}M",
             "-t", str(seconds), "-J"], capture_output=True, text=True, timeout=seconds + 60,
        )  # fmt: skip
        end = json.loads(out.stdout)["end"]["sum"]
        return (end["packets"] - end["lost_packets"]) * 1400 * 8 / end["seconds"] / 1e6
    finally:
        srv.kill()
        srv.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--mbps", type=float, default=200.0, help="UDP load through the NF (Mbit/s)")
    args = ap.parse_args()
    repeats = 3 if args.quick else 7
    seconds = 5.0 if args.quick else 10.0
    print_machine()
    name = "b" + uuid.uuid4().hex[:5]
    host = EmulatedHost(parse_config({"name": name, "rundir": "/run/uno-bench", "vms": 1,
                                      "snics": [{"pcie_gbps": 0}]}))  # fmt: skip
    cfg = Path(f"/tmp/uno-bench-{name}.yaml")
    cfg.write_text(f"name: {name}\nrundir: /run/uno-bench\nvms: 1\nsnics: [{{pcie_gbps: 0}}]\n")
    agent = None
    try:
        status = host.up()
        listen = status["oneswitch"]["listen"]
        agent = subprocess.Popen(
            [sys.executable, "-m", "nf_agent.cli", "agent", "serve", "--config", str(cfg), "--replace-interval", "0",
             "--sample-interval", "1"], cwd=REPO, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        url = agent.stdout.readline().strip()
        assert url, "agent did not start"
        assert call(url, "POST", "/v1/vms", {"id": "web"})[0] == 201
        vm_ns, out_ns, out_ip = nm.ns_vm(name, 0), nm.ns_outside(name, 0, 0), nm.ip_outside(0, 0)

        # -- provisioning time ---------------------------------------------------------------------------
        prov, api = [], []
        for i in range(repeats):
            t0 = time.monotonic()
            code, body = call(url, "POST", "/v1/nfs", {"type": "firewall", "id": f"p{i}", "config": FW,
                                                       "pin": "host" if i % 2 else "snic0"})  # fmt: skip
            t1 = time.monotonic()
            assert code == 201, body
            chain_rules(listen, body["vport"])
            while not ping(vm_ns, out_ip, count=1, timeout=5):
                if time.monotonic() - t0 > 60:
                    raise RuntimeError("no traffic through the new NF after 60 s")
            t2 = time.monotonic()
            prov.append((t2 - t0) * 1000)
            api.append((t1 - t0) * 1000)
            print(
                f"[provision {i + 1}/{repeats}] api {api[-1]:.0f} ms, traffic {prov[-1]:.0f} ms",
                file=sys.stderr,
            )
            assert call(url, "DELETE", f"/v1/nfs/p{i}")[0] == 200

        # -- saving: same load on host vs sNIC -------------------------------------------------------
        code, body = call(url, "POST", "/v1/nfs", {"type": "firewall", "id": "fw", "config": FW,
                                                   "expected": {"dst": "web"}, "pin": None,
                                                   "hints": {"prefer": "host"}})  # fmt: skip
        assert code == 201, body
        chain_rules(listen, body["vport"])
        cg = CpuCgroup(nm.cgroup_snic(name, 0))
        runs: dict[str, dict] = {}
        for loc in ("host", "snic0"):
            if instance(host.rundir, "fw")["location"] != loc:
                code, res = call(url, "POST", "/v1/nfs/fw/migrate", {"to": loc})
                assert code == 200, res
            inst = instance(host.rundir, "fw")
            assert ping(vm_ns, out_ip, count=2)
            c0, g0, t0 = cpu_seconds(inst_pids(inst)), cg.usage_seconds(), time.monotonic()
            views = []
            rx = []
            for _ in range(repeats if not args.quick else 1):
                rx.append(iperf_udp(vm_ns, out_ns, out_ip, args.mbps, seconds))
                views.append(call(url, "GET", "/v1/placement")[1])
            wall = time.monotonic() - t0
            on_host = loc == "host"
            cores = (cpu_seconds(inst_pids(inst)) - c0) / wall
            snic_cores = (cg.usage_seconds() - g0) / wall
            pred = median([v["predicted"]["host_cores"] for v in views])
            load = median([v["measured"]["nf_load_gbps"].get("fw", 0.0) for v in views if v["measured"]])
            runs[loc] = {"host_cores": cores if on_host else 0.0, "snic_cores": snic_cores,
                         "predicted_host_cores": pred, "load_gbps": load, "rx_mbps": median(rx)}  # fmt: skip
            print(f"[{loc}] {json.dumps(runs[loc])}", file=sys.stderr)
        measured = runs["host"]["host_cores"] - runs["snic0"]["host_cores"]
        predicted = runs["host"]["predicted_host_cores"] - runs["snic0"]["predicted_host_cores"]
        print(f"provisioning: POST -> traffic through the NF, median of {repeats}: {median(prov):.0f} ms "
              f"(POST alone {median(api):.0f} ms)")  # fmt: skip
        print(
            f"UDP {args.mbps:g} Mbit/s through the firewall: delivered {runs['host']['rx_mbps']:.1f} (host) vs "
            f"{runs['snic0']['rx_mbps']:.1f} Mbit/s (sNIC); NF load measured {runs['host']['load_gbps']:.3f} Gbit/s"
        )
        print(f"host CPU saved by the sNIC placement: measured {measured:.3f} cores, predicted {predicted:.3f} "
              f"(profile r_host); NF on the sNIC used {runs['snic0']['snic_cores']:.3f} sNIC cores")  # fmt: skip
        final_json({
            "provision_ms": round(median(prov), 1),
            "api_ms": round(median(api), 1),
            "measured_saving": round(measured, 4),
            "predicted_saving": round(predicted, 4),
            "saving_ratio": round(measured / predicted, 2) if predicted else None,
            "rx_mbps_host": round(runs["host"]["rx_mbps"], 1),
            "rx_mbps_snic": round(runs["snic0"]["rx_mbps"], 1),
        })  # fmt: skip
        return 0
    finally:
        if agent and agent.poll() is None:
            agent.send_signal(signal.SIGTERM)
            try:
                agent.wait(timeout=30)
            except subprocess.TimeoutExpired:
                agent.kill()
        host.down()
        cfg.unlink(missing_ok=True)
        os.sync()


if __name__ == "__main__":
    sys.exit(main())
