"""NF agent: provisioning time, per-NF-type CPU profiles, and host CPU saved by the agent's placement,
predicted vs measured.

On an emulated host with OneSwitch (one VM, the default sNIC: capacity 36 units = 0.5 cores of CPU quota, PCIe
unshaped), `uno agent serve` runs as a process; the steering rules (VM <-> NFs <-> wire, one-arm NFs told
apart by source MAC, demo/chain.py) go through OneSwitch with ovs-ofctl. Traffic: iperf3 TCP
VM -> outside at a fixed rate (`--mbps`), so the L7 firewall and the IPS really parse and reassemble streams.
CPU of an NF = its instance's processes (`nf`; an instance started by an agent from before the NFs used unix
sockets also has two socat relays, counted with their forked per-connection children) from /proc on the host,
or the sNIC's CPU cgroup when it runs there. The profiles in placement/profiles-emulated.json were measured
with the relays (they included their CPU: 0.8-1.7 us per packet, bench/RESULTS.md nfs).

- provision_ms: POST /v1/nfs (firewall) -> rules installed on OneSwitch -> first ping through the NF
  answered (median over repeats; api_ms is the POST alone).
- `--profile TYPES [--rates 30,60,100]`: per type, the NF alone on the host, then on the sNIC, at each offered
  rate; cost = base + slope x load fitted by least squares (load: Gbit/s in + out of the NF as the agent
  measures it; sNIC side in units, 72 per core of quota); stored with `uno placement profile --file F
  --measure TYPE SIDE CORES GBPS ...` (provenance: date, this command, points, residual) into `--write`
  (default placement/profiles-emulated.json).
- Saving, per chain (`demo`: l7fw -> ips; `dpi`: ips -> l7fw -> ips): the chain all on the host, then the
  agent's placement (POST /v1/placement/run under the load); measured_saving = host cores of the NFs' processes
  all-on-host minus under the agent's placement; predicted_saving = the agent's model (GET /v1/placement
  `predicted.host_cores`, profile b_host + r_host x measured load) for the same two placements; delivered
  throughput of both phases is printed, and `same_throughput` says whether they match within 5 %. The agent's
  graph holds each chain as declared with PATCH /v1/nfs/ID (VM -> NFs -> wire, the bulk traffic's direction);
  per phase, sNIC snic0's PCIe Mbit/s measured (host end of the link) vs predicted by that model (medians over
  the window, `pcie_mbps_host`, `pcie_mbps_placed`).

    ./uno bench agent [--quick] [--mbps 100] [--profiles F] [--profile firewall,ips,l7fw,monitor [--write F]]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from bench.common import final_json, median, print_machine, tree_cpu_seconds
from demo.chain import Chain, steering_rules
from emulated_host import naming as nm
from emulated_host.config import UNITS_PER_CORE, parse_config
from emulated_host.host import EmulatedHost, ping
from nf_agent.client import call
from nf_agent.graph import chain_links, eth_vertex
from placement.profiles import EMULATED_PROFILES
from snic_datapath.cgroup import CpuCgroup

REPO = Path(__file__).resolve().parents[2]
FW = {"rules": [{"action": "allow", "proto": "any", "src": "any", "dst": "any"}], "default": "deny"}
IPS = {"signatures": [{"id": 1001, "msg": "demo exploit", "content": "EVIL-DEMO-PAYLOAD"}], "action": "drop"}
L7FW = {"block": [{"proto": "http", "host": "evil.example"}], "default": "allow", "unparsed": "allow"}
NAT = {"inside": ["10.77.0.0/24"], "public_ips": ["198.51.100.1"], "ports": "20000-29999"}
IPSEC = {"sas": [{"name": "vm-out", "dir": "out", "spi": 8193, "key": "00112233445566778899aabbccddeeff", "salt": "01020304",
                  "tunnel_src": "192.0.2.1", "tunnel_dst": nm.ip_outside(0, 0),
                  "selectors": [{"src": f"{nm.ip_vm(0)}/32", "dst": f"{nm.ip_outside(0, 0)}/32"}]}]}  # fmt: skip
LB_VIP, LB_PORT = "10.77.0.200", 9000  # a VIP in the VMs' /16; its one backend: the wire's address
LB = {"vip": LB_VIP, "port": LB_PORT, "proto": "udp", "backends": [f"{nm.ip_outside(0, 0)}:{LB_PORT}"]}
CONFIGS = {"firewall": FW, "ips": IPS, "l7fw": L7FW, "monitor": {}, "nat": NAT, "ipsec": IPSEC, "lb": LB}
# Types measured with UDP frames from `traffic gen` (no answer needed: the NAT's and the IPsec gateway's
# output is not something the outside's stack answers; the LB's frames go to its VIP); the others with
# iperf3 TCP.
GEN_TYPES = {"nat", "ipsec", "lb"}
GEN_DST = {"lb": (LB_VIP, LB_PORT)}  # where a type's frames are sent (others: the wire's address)
TRAFFIC = REPO / "nfs" / "target" / "release" / "traffic"
# NFs in order from the wire to the VM: (id, type)
CHAINS = {
    "demo": [("l7fw", "l7fw"), ("ips", "ips")],
    "dpi": [("ips1", "ips"), ("l7fw", "l7fw"), ("ips2", "ips")],
}


def ofctl(listen: str, *args: str) -> None:
    subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", *args[:1], listen, *args[1:]], check=True,
                   capture_output=True)  # fmt: skip


def chain_rules(listen: str, vports_vm_first: list[int]) -> None:
    """Replace OneSwitch's table with VM <-> NFs (VM side first) <-> wire."""
    chain = Chain(
        nm.vport_vm(0), nm.mac(1, 0, 0), nm.vport_eth(0, 0), nm.mac(2, 0, 0), tuple(vports_vm_first)
    )
    ofctl(listen, "del-flows")
    for r in steering_rules(chain):
        src = (f",dl_src={r.eth_src}" if r.eth_src else "") + (f",dl_dst={r.eth_dst}" if r.eth_dst else "")
        ofctl(
            listen, "add-flow", f"priority={r.priority},in_port={r.in_port}{src},actions=output:{r.out_port}"
        )


def instance(rundir: Path, nf: str) -> dict:
    return json.loads((rundir / "agent" / "state.json").read_text())["nfs"][nf]["instances"][0]


def inst_roots(rundir: Path, nf: str) -> list[int]:
    inst = instance(rundir, nf)
    return [p for p in [inst["pid"], *inst["relay_pids"]] if p]


class Load:
    """iperf3 TCP vm -> outside at a fixed rate, in the background (`gen`: UDP frames of 1400 B from
    `traffic gen` on the VM's interface instead, 4 flows, no receiver, to `dst` (address, port) when
    given)."""

    def __init__(
        self, name: str, mbps: float, seconds: float, port: int = 5302, gen: bool = False,
        dst: tuple[str, int] | None = None,
    ):  # fmt: skip
        vm, out, ip = nm.ns_vm(name, 0), nm.ns_outside(name, 0, 0), nm.ip_outside(0, 0)
        self.gen = gen
        if gen:
            to = ["--dst", dst[0], "--dst-port", str(dst[1])] if dst else ["--dst", ip]
            pps = int(mbps * 1e6 / (1400 * 8))
            self.srv = None
            self.cli = subprocess.Popen(
                ["ip", "netns", "exec", vm, str(TRAFFIC), "gen", "--port", nm.if_vm(name, 0)[0], "--udp", "--flows",
                 "4", "--pkts", str(int(pps * seconds)), "--rate", str(pps), "--size", "1400", "--src", nm.ip_vm(0),
                 *to, "--src-mac", nm.mac(1, 0, 0), "--dst-mac", nm.mac(2, 0, 0)],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            )  # fmt: skip
            return
        self.srv = subprocess.Popen(["ip", "netns", "exec", out, "iperf3", "-s", "-1", "-p", str(port), "-B", ip],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        time.sleep(0.5)
        self.cli = subprocess.Popen(
            ["ip", "netns", "exec", vm, "iperf3", "-c", ip, "-p", str(port), "-b", f"{mbps}M", "-t", str(seconds),
             "-J"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip

    def result(self, timeout: float) -> float:
        """Received Mbit/s (0 if the stream failed)."""
        try:
            out = self.cli.communicate(timeout=timeout)[0]
            if self.gen:  # sent, not received: nothing in the outside answers or counts these frames
                return 0.0
            return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e6
        except (ValueError, KeyError, TypeError, subprocess.TimeoutExpired):
            return 0.0
        finally:
            for p in (self.cli, self.srv):
                if p is not None and p.poll() is None:
                    p.kill()
                if p is not None:
                    p.wait()


def measure(url: str, rundir: Path, cg: CpuCgroup, name: str, nfs: list[str], mbps: float, seconds: float,
            before_window=None, gen: bool = False, dst: tuple[str, int] | None = None) -> dict:  # fmt: skip
    """Load for `seconds`; over its middle (after a 3 s warm-up, `before_window()` run first): host cores of
    the NFs placed on the host, sNIC cgroup cores, the agent's predicted host cores and NF loads."""
    load = Load(name, mbps, seconds, gen=gen, dst=dst)
    try:
        time.sleep(3)
        if before_window:
            before_window()
            time.sleep(3)
        where = {nf: instance(rundir, nf)["location"] for nf in nfs}
        roots = [p for nf in nfs if where[nf] == "host" for p in inst_roots(rundir, nf)]
        c0, g0, t0 = tree_cpu_seconds(roots), cg.usage_seconds(), time.monotonic()
        views = []
        end = t0 + max(seconds - (9 if before_window else 5), 2)
        while time.monotonic() < end:
            time.sleep(1)
            views.append(call(url, "GET", "/v1/placement")[1])
        wall = time.monotonic() - t0
        host = (tree_cpu_seconds(roots) - c0) / wall
        snic = (cg.usage_seconds() - g0) / wall
    finally:
        rx = load.result(seconds + 60)
    views = [v for v in views if v.get("measured") and v.get("predicted")]
    return {
        "where": where,
        "host_cores": round(host, 4),
        "snic_cores": round(snic, 4),
        "predicted_host_cores": round(median([v["predicted"]["host_cores"] for v in views]), 4),
        "predicted_snic_load": round(median([v["predicted"]["snic_load"].get("snic0", 0) for v in views]), 4),
        "load_gbps": {
            nf: round(median([v["measured"]["nf_load_gbps"].get(nf, 0.0) for v in views]), 4) for nf in nfs
        },  # fmt: skip
        "rx_mbps": round(rx, 1),
        # sNIC snic0's PCIe link (Mbit/s): the host end's counters vs the agent's model on its placement graph
        # (predicted = the NFs' crossings + the background, the measured traffic the model does not explain)
        "pcie_mbps": {
            name: {
                d: round(median([v[side][key].get("snic0", {}).get(d, 0.0) for v in views]) * 1000, 2)
                for d in ("down", "up")
            }
            for name, side, key in (
                ("measured", "measured", "pcie_gbps"),
                ("predicted", "predicted", "pcie_gbps"),
                ("background", "predicted", "background_gbps"),
            )
        },
    }


def pcie_text(pcie: dict) -> str:
    m, p, b = pcie["measured"], pcie["predicted"], pcie.get("background", {"down": 0.0, "up": 0.0})
    return (f"measured down {m['down']:.1f} up {m['up']:.1f} Mbit/s, predicted down {p['down']:.1f} "
            f"up {p['up']:.1f} (of which background down {b['down']:.1f} up {b['up']:.1f})")  # fmt: skip


def migrate(url: str, rundir: Path, nf: str, to: str) -> None:
    if instance(rundir, nf)["location"] != to:
        code, res = call(url, "POST", f"/v1/nfs/{nf}/migrate", {"to": to})
        assert code == 200, res


def profile_types(url, rundir, cg, name, listen, types, args, out_file: Path) -> dict:
    """Measure r_host and r_nic per NF type and store them through `uno placement profile --measure`."""
    source = "./uno bench agent " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    found = {}
    for typ in types:
        code, body = call(url, "POST", "/v1/nfs", {"type": typ, "id": "prof", "config": CONFIGS[typ],
                                                   "expected": {"src": "web"}, "hints": {"prefer": "host"}})  # fmt: skip
        assert code == 201, body
        chain_rules(listen, [body["vport"]])
        assert typ in GEN_TYPES or ping(nm.ns_vm(name, 0), nm.ip_outside(0, 0), count=2)
        found[typ] = {}
        for loc, side in (("host", "host"), ("snic0", "nic")):
            migrate(url, rundir, "prof", loc)
            points = []  # (amount, Gbit/s through) per rate
            for mbps in args.rates:
                r = measure(url, rundir, cg, name, ["prof"], mbps, args.seconds, gen=typ in GEN_TYPES,
                            dst=GEN_DST.get(typ))  # fmt: skip
                cores = r["host_cores"] if loc == "host" else r["snic_cores"]
                load = r["load_gbps"]["prof"]
                got = "UDP, no receiver" if typ in GEN_TYPES else f"delivered {r['rx_mbps']:.1f} Mbit/s"
                print(f"[profile {typ} on {loc} at {mbps:g} Mbit/s] {cores:.4f} cores at {load:.4f} Gbit/s of "
                      f"load, {got}", file=sys.stderr)  # fmt: skip
                if load <= 0:
                    raise RuntimeError(f"{typ} on {loc}: the agent measured no load")
                # r_nic is in the sNIC's placement units: UNITS_PER_CORE units = one core of its CPU quota
                amount = cores if side == "host" else cores * UNITS_PER_CORE
                points.append((amount, load / 2))
                found[typ].setdefault(f"points_{side}", []).append(
                    {"mbps": mbps, "used": round(amount, 4), "load_gbps": load, "rx_mbps": r["rx_mbps"]}
                )
            vals = [f"{v:.6f}" for a, g in points for v in (a, g)]
            out = subprocess.run(
                [sys.executable, "-m", "uno_cli.main", "placement", "profile", "--file", str(out_file), "--measure",
                 typ, side, *vals, "--source", source],
                cwd=REPO, check=True, capture_output=True, text=True,
            )  # fmt: skip
            prof = json.loads(out.stdout)[typ]
            found[typ][f"r_{side}"] = prof[f"r_{side}"]
            found[typ][f"b_{side}"] = prof.get(f"b_{side}", 0.0)
            rec = prof["measured"][f"r_{side}"]
            found[typ][f"residual_{side}"] = rec.get("residual", 0.0)
        assert call(url, "DELETE", "/v1/nfs/prof")[0] == 200
    return found


def chain_saving(url, rundir, cg, name, listen, chain_id, args) -> dict:
    """The chain all on the host vs the agent's placement, under the same load."""
    ids = [nf for nf, _ in CHAINS[chain_id]]
    vports = {}
    for nf, typ in reversed(CHAINS[chain_id]):  # VM side first
        code, body = call(url, "POST", "/v1/nfs", {"type": typ, "id": nf, "config": CONFIGS[typ],
                                                   "hints": {"prefer": "host"}})  # fmt: skip
        assert code == 201, body
        vports[nf] = body["vport"]
    # the agent's graph holds the one chain, in the direction of the bulk traffic (iperf3 VM -> outside)
    for nf, src, dst in chain_links(["web", *reversed(ids), eth_vertex("snic0", 0)]):
        code, body = call(url, "PATCH", f"/v1/nfs/{nf}", {"expected": {"src": src, "dst": dst}})
        assert code == 200, body
    chain_rules(listen, [vports[nf] for nf in reversed(ids)])
    assert ping(nm.ns_vm(name, 0), nm.ip_outside(0, 0), count=2)
    for nf in ids:
        migrate(url, rundir, nf, "host")
    all_host = measure(url, rundir, cg, name, ids, args.mbps, args.seconds)
    print(f"[{chain_id} all on host] {json.dumps(all_host)}", file=sys.stderr)
    decision = {}

    def replace():
        code, d = call(url, "POST", "/v1/placement/run", {"force": True})
        assert code == 200, d
        decision.update(d)

    placed = measure(url, rundir, cg, name, ids, args.mbps, args.seconds + 6, before_window=replace)
    moves = ", ".join(f"{m['id']} {m['from']}->{m['to']}" for m in decision.get("moves", [])) or "none"
    print(f"[{chain_id} agent placement] moves: {moves}; {json.dumps(placed)}", file=sys.stderr)
    for nf in ids:
        assert call(url, "DELETE", f"/v1/nfs/{nf}")[0] == 200
    measured = all_host["host_cores"] - placed["host_cores"]
    predicted = all_host["predicted_host_cores"] - placed["predicted_host_cores"]
    rx_a, rx_p = all_host["rx_mbps"], placed["rx_mbps"]
    # A saving only means something at the same delivered throughput (within 5 %).
    same = rx_a > 0 and abs(rx_a - rx_p) <= 0.05 * rx_a
    return {"all_host": all_host, "placed": placed, "moves": decision.get("moves", []), "same_throughput": same,
            "measured_saving": round(measured, 4), "predicted_saving": round(predicted, 4),
            "saving_ratio": round(measured / predicted, 2) if predicted > 0 else None}  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--mbps", type=float, default=100.0, help="TCP load through the NFs (Mbit/s)")
    ap.add_argument("--profiles", default=str(EMULATED_PROFILES), help="profiles the agent predicts with")
    ap.add_argument("--profile", help="comma-separated NF types to measure profiles of (no saving run)")
    ap.add_argument("--write", default=str(EMULATED_PROFILES), help="profile file --profile updates")
    ap.add_argument("--rates", default="30,60,100",
                    help="--profile: offered Mbit/s to measure at (two or more: base + slope fitted)")  # fmt: skip
    ap.add_argument("--chains", default="demo,dpi", help=f"chains of the saving run ({', '.join(CHAINS)})")
    args = ap.parse_args()
    types = [t for t in (args.profile or "").split(",") if t]
    for t in types:
        if t not in CONFIGS:
            print(f"--profile: unknown NF type {t!r} (known: {', '.join(CONFIGS)})", file=sys.stderr)
            return 2
    try:
        args.rates = [float(x) for x in args.rates.split(",") if x]
    except ValueError:
        print(f"--rates: expected comma-separated Mbit/s, got {args.rates!r}", file=sys.stderr)
        return 2
    if not args.rates or any(not 0 < r <= 10000 for r in args.rates):
        print("--rates: expected one or more rates in (0, 10000] Mbit/s", file=sys.stderr)
        return 2
    chains = [c for c in args.chains.split(",") if c]
    for c in chains:
        if c not in CHAINS:
            print(f"--chains: unknown chain {c!r} (known: {', '.join(CHAINS)})", file=sys.stderr)
            return 2
    repeats = 3 if args.quick else 7
    args.seconds = 10.0 if args.quick else 20.0
    print_machine()
    name = "b" + uuid.uuid4().hex[:5]
    conf = {"name": name, "rundir": "/run/uno-bench", "vms": 1, "snics": [{"pcie_gbps": 0}]}
    host = EmulatedHost(parse_config(conf))
    cfg = Path(f"/tmp/uno-bench-{name}.json")
    cfg.write_text(json.dumps(conf))  # YAML is a superset of JSON
    agent = None
    try:
        status = host.up()
        listen = status["oneswitch"]["listen"]
        agent = subprocess.Popen(
            [sys.executable, "-m", "uno_cli.main", "agent", "serve", "--config", str(cfg), "--replace-interval", "0",
             "--sample-interval", "1", "--dampening", "0", "--flap-window", "0", "--profiles", args.profiles],
            cwd=REPO, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        url = agent.stdout.readline().strip()
        assert url, "agent did not start"
        assert call(url, "POST", "/v1/vms", {"id": "web"})[0] == 201
        vm_ns, out_ip = nm.ns_vm(name, 0), nm.ip_outside(0, 0)
        cg = CpuCgroup(nm.cgroup_snic(name, 0))
        if types:
            found = profile_types(url, host.rundir, cg, name, listen, types, args, Path(args.write))
            print(f"profiles (cores per Gbit/s of load) written to {args.write}: {json.dumps(found)}")
            final_json({"profiles": found, "rates_mbps": args.rates})
            return 0

        # -- provisioning time ---------------------------------------------------------------------------
        prov, api = [], []
        for i in range(repeats):
            t0 = time.monotonic()
            code, body = call(url, "POST", "/v1/nfs", {"type": "firewall", "id": f"p{i}", "config": FW,
                                                       "pin": "host" if i % 2 else "snic0"})  # fmt: skip
            t1 = time.monotonic()
            assert code == 201, body
            chain_rules(listen, [body["vport"]])
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

        # -- saving per chain ----------------------------------------------------------------------------
        res = {c: chain_saving(url, host.rundir, cg, name, listen, c, args) for c in chains}
        print(f"provisioning: POST -> traffic through the NF, median of {repeats}: {median(prov):.0f} ms "
              f"(POST alone {median(api):.0f} ms)")  # fmt: skip
        for c, r in res.items():
            a, p = r["all_host"], r["placed"]
            print(f"chain {c} ({' -> '.join(t for _, t in CHAINS[c])}), TCP {args.mbps:g} Mbit/s offered: "
                  f"delivered {a['rx_mbps']:.1f} (all on host) vs {p['rx_mbps']:.1f} Mbit/s (agent: {p['where']}); "
                  f"host cores {a['host_cores']:.4f} -> {p['host_cores']:.4f}, sNIC cgroup {p['snic_cores']:.4f}; "
                  f"saving measured {r['measured_saving']:.4f} vs predicted {r['predicted_saving']:.4f} "
                  f"(ratio {r['saving_ratio']}); PCIe snic0 all on host: {pcie_text(a['pcie_mbps'])}; under the "
                  f"agent's placement: {pcie_text(p['pcie_mbps'])}"
                  + ("" if r["same_throughput"] else "; NOT at the same delivered throughput"))  # fmt: skip
        first = res[chains[0]] if chains else {}
        final_json({
            "provision_ms": round(median(prov), 1),
            "api_ms": round(median(api), 1),
            "measured_saving": first.get("measured_saving"),
            "predicted_saving": first.get("predicted_saving"),
            "saving_ratio": first.get("saving_ratio"),
            "chains": {c: {k: r[k] for k in ("measured_saving", "predicted_saving", "saving_ratio")} |
                       {"rx_mbps_host": r["all_host"]["rx_mbps"], "rx_mbps_placed": r["placed"]["rx_mbps"],
                        "placement": r["placed"]["where"], "same_throughput": r["same_throughput"],
                        "pcie_mbps_host": r["all_host"]["pcie_mbps"], "pcie_mbps_placed": r["placed"]["pcie_mbps"],
                        "mbps": args.mbps} for c, r in res.items()},
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
