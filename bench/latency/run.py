"""Per-packet latency: the NF types' latency per location and the PCIe crossing's, measured with real packets
on the emulated host (`--profile`), and the agent's latency-aware placement checked against measured chain
latencies (default).

On an emulated host with OneSwitch, two VMs and one sNIC (PCIe unshaped), `uno agent serve` runs as a process;
steering rules go through OneSwitch (demo/chain.py) as a controller's would. One-way latency: `traffic gen`
stamps UDP frames (128 B, one flow) in VM 0 with the wall clock, `traffic sink` reads the stamps where they
arrive (testkit/one_way.py); median (p50) and p99 per run.

- `--profile TYPES [--write F]`: per round, VM0 -> VM1 direct (the host switch only) and VM0 -> wire direct
  (host switch, PCIe link, the sNIC's switch): one PCIe crossing = wire path - VM path. Per type, VM0 -> NF
  -> wire with the NF on the host and on snic0 (moved by the agent, POST /v1/nfs/ID/migrate), each minus the
  direct wire path of the same round: what the NF adds there. ipsec: an outbound SA VM0 -> wire, the sink
  decrypts the ESP frames with its key to read the stamps; lb: a UDP VIP whose one backend is the wire's
  address, the frames sent to the VIP (every other type: to the wire's address). Medians over `--rounds` rounds of the
  per-round differences; written with `uno placement profile --file F --measure-latency TYPE LOCATION MEDIAN
  P99` and `--measure-pcie snic0 MEDIAN P99` (provenance: date, commit, this command, packets, rate, the raw
  path and base figures). Nothing runs inside the sNIC for it: its switch is programmed through OneSwitch and
  its NFs started through its agent's API, as the host's agent does.
- default: a chain VM0 (web) -> firewall -> VM1 (web2) with `expected.latency_us` tight (between the
  all-host prediction and the sNIC one: two PCIe crossings and the NF's sNIC latency) and loose; the agent's
  own decision for each (POST /v1/nfs, PATCH + POST /v1/placement/run); per decision the measured one-way
  latency VM0 -> VM1 through the chain vs the agent's prediction (GET /v1/chains), both as measured total and
  as added over the direct VM0 -> VM1 path of the same run (the model predicts what NFs and crossings add):
  factor = measured added / predicted, for the median (agent's default statistic) and for p99 (profiles'
  p99s summed).

    ./uno bench latency [--quick] [--profile firewall,monitor,ips,l7fw,nat,ipsec,lb [--write F]] [--profiles F]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.agent.run import CONFIGS, IPSEC, LB_PORT, LB_VIP
from bench.common import final_json, machine, median, print_machine
from demo.chain import Chain
from emulated_host import naming as nm
from nf_agent.client import call
from placement.latency_profiles import PCIE_KEY
from placement.profiles import EMULATED_PROFILES, read_profile_file
from testkit.agent_host import agent_host, install_chain
from testkit.one_way import DIRECT, End, Via, one_way

REPO = Path(__file__).resolve().parents[2]
LATENCY_TYPES = ("firewall", "monitor", "ips", "l7fw", "nat", "ipsec", "lb")
_SA = IPSEC["sas"][0]
# what the frames through each type need (the others: none); the direct path of a round is sent as these are
VIA = {"ipsec": Via(esp_key=_SA["key"], esp_salt=_SA["salt"]), "lb": Via(dst_ip=LB_VIP, dst_port=LB_PORT)}


def ends(name: str) -> dict[str, End]:
    vm0 = End(nm.ns_vm(name, 0), nm.if_vm(name, 0)[0], nm.ip_vm(0), nm.mac(1, 0, 0))
    vm1 = End(nm.ns_vm(name, 1), nm.if_vm(name, 1)[0], nm.ip_vm(1), nm.mac(1, 0, 1))
    wire = End(nm.ns_outside(name, 0, 0), nm.if_eth(name, 0, 0)[1], nm.ip_outside(0, 0), nm.mac(2, 0, 0))
    return {"vm0": vm0, "vm1": vm1, "wire": wire}


class Paths:
    """Steering (as a controller, through OneSwitch) and one-way measurements VM0 -> VM1 or wire."""

    def __init__(self, status: dict, name: str, packets: int, rate: float):
        self.status, self.e, self.packets, self.rate = status, ends(name), packets, rate
        self.run = 100

    def measure(self, to: str, nf_ports: tuple[int, ...] = (), via: Via = DIRECT) -> dict:
        """VM0 -> (NFs) -> `to` ("vm1" | "wire"): {"median", "p99", "received"} in us."""
        out_port = nm.vport_vm(1) if to == "vm1" else nm.vport_eth(0, 0)
        install_chain(
            self.status, Chain(nm.vport_vm(0), self.e["vm0"].mac, out_port, self.e[to].mac, nf_ports)
        )
        time.sleep(0.5)  # the rules' translation reaches both switches
        self.run += 1
        r = one_way(self.e["vm0"], self.e[to], self.run, self.packets, self.rate, via=via)
        if r["received"] < 0.9 * self.packets:
            raise RuntimeError(
                f"VM0 -> {to} via {nf_ports}: {r['received']} of {self.packets} frames arrived"
            )
        lat = r["latency_us"]
        return {"median": lat["p50"], "p99": lat["p99"], "received": r["received"]}


def diff(path: dict, base: dict) -> dict:
    """What a path adds over its base, per statistic (clamped at 0: noise can make it negative)."""
    return {k: round(max(path[k] - base[k], 0.0), 2) for k in ("median", "p99")}


def summary(rounds: list[dict]) -> dict:
    """Medians over rounds of the added latency and of the raw path and base figures."""
    out = {k: round(median([r["added"][k] for r in rounds]), 2) for k in ("median", "p99")}
    out["p99"] = max(out["p99"], out["median"])
    for part in ("path", "base"):
        out[part] = {k: round(median([r[part][k] for r in rounds]), 2) for k in ("median", "p99")}
        out[part]["p99"] = max(out[part]["p99"], out[part]["median"])
    return out


def record(write: Path, flag: str, args: list[str], s: dict, meta: dict) -> None:
    """Into `write` with its provenance: the commit the run started at (the measuring code's: files the run
    writes would make the checkout's own `+dirty`) and the load while the figure was measured."""
    details = {"packets": meta["packets"], "rate_pps": meta["rate"], "load1": round(os.getloadavg()[0], 2),
               "path": s["path"], "base": s["base"]}  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "uno_cli.main", "placement", "profile", "--file", str(write), flag, *args,
         f"{s['median']:.2f}", f"{s['p99']:.2f}", "--details", json.dumps(details), "--source", meta["source"],
         "--commit", meta["commit"]],
        cwd=REPO, check=True, capture_output=True, text=True,
    )  # fmt: skip


def migrate(url: str, nf: str, to: str) -> None:
    code, res = call(url, "POST", f"/v1/nfs/{nf}/migrate", {"to": to})
    assert code == 200, res


def profile(url: str, paths: Paths, types: list[str], rounds: int, write: Path, source: str) -> dict:
    meta = {"packets": paths.packets, "rate": paths.rate, "source": source, "commit": machine()["commit"]}
    pcie = []
    for i in range(rounds):
        vm, wire = paths.measure("vm1"), paths.measure("wire")
        pcie.append({"added": diff(wire, vm), "path": wire, "base": vm})
        print(f"[pcie round {i + 1}] VM->VM {vm}, VM->wire {wire}", file=sys.stderr)
    found = {PCIE_KEY: summary(pcie)}
    record(write, "--measure-pcie", ["snic0"], found[PCIE_KEY], meta)
    for typ in types:
        code, body = call(url, "POST", "/v1/nfs", {"type": typ, "id": "lat", "config": CONFIGS[typ],
                                                   "expected": {"src": "web"}, "hints": {"prefer": "host"}})  # fmt: skip
        assert code == 201, body
        found[typ] = {}
        for loc in ("host", "snic0"):
            migrate(url, "lat", loc)
            got = []
            for i in range(rounds):
                via = VIA.get(typ, DIRECT)
                base, path = paths.measure("wire", (), via), paths.measure("wire", (body["vport"],), via)
                got.append({"added": diff(path, base), "path": path, "base": base})
                print(f"[{typ} on {loc} round {i + 1}] direct {base}, through the NF {path}", file=sys.stderr)
            found[typ][loc] = summary(got)
            record(write, "--measure-latency", [typ, loc], found[typ][loc], meta)
        assert call(url, "DELETE", "/v1/nfs/lat")[0] == 200
    return found


def validate(url: str, paths: Paths, prof_file: Path) -> dict:
    """The tight and the loose SLO: the agent's decisions, predictions and the measured chain latency."""
    raw = read_profile_file(prof_file)
    fw, link = raw["firewall"], raw[PCIE_KEY]["snic0"]
    host_us, snic_us = fw["latency_us"]["host"], fw["latency_us"]["nic"] + 2 * link["latency_us"]
    if snic_us <= host_us:
        raise RuntimeError(
            f"profiles: the sNIC path ({snic_us} us) is not slower than the host's ({host_us} us)"
        )
    slos = {"tight": round(host_us + 0.5 * (snic_us - host_us), 2), "loose": round(10 * snic_us + 100, 2)}
    p99 = {"host": fw["latency_p99_us"]["host"],
           "snic0": fw["latency_p99_us"]["nic"] + 2 * link["latency_p99_us"]}  # fmt: skip
    code, body = call(url, "POST", "/v1/nfs", {"type": "firewall", "id": "fw", "config": CONFIGS["firewall"],
                                               "expected": {"src": "web", "dst": "web2", "gbps": 0.01,
                                                            "latency_us": slos["tight"]}})  # fmt: skip
    assert code == 201, body
    out = {}
    for case in ("tight", "loose", "tight-again"):
        slo = slos[case.split("-")[0]]
        if case != "tight":
            assert call(url, "PATCH", "/v1/nfs/fw", {"expected": {"latency_us": slo}})[0] == 200
            code, dec = call(url, "POST", "/v1/placement/run", {"force": True})
            assert code == 200, dec
        (chain,) = call(url, "GET", "/v1/chains")[1]
        where = chain["locations"][1]
        base, path = paths.measure("vm1"), paths.measure("vm1", (body["vport"],))
        added = diff(path, base)
        pred = chain["predicted_latency_us"]
        out[case] = {
            "slo_us": slo, "location": where, "pcie_crossings": chain["pcie_crossings"],
            "predicted_us": pred, "predicted_p99_us": round(p99[where], 2),
            "measured_us": path, "direct_us": base, "added_us": added,
            "factor_median": round(added["median"] / pred, 2) if pred else None,
            "factor_p99": round(added["p99"] / p99[where], 2) if p99[where] else None,
        }  # fmt: skip
        print(f"[{case} SLO {slo} us] firewall on {where} ({chain['pcie_crossings']} PCIe crossings): predicted "
              f"{pred} us, measured added {added} (path {path}, direct {base})", file=sys.stderr)  # fmt: skip
    assert call(url, "DELETE", "/v1/nfs/fw")[0] == 200
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--profile", help=f"comma-separated NF types to measure ({', '.join(LATENCY_TYPES)})")
    ap.add_argument("--write", default=str(EMULATED_PROFILES), help="profile file --profile updates")
    ap.add_argument("--profiles", default=str(EMULATED_PROFILES), help="profiles the agent predicts with")
    ap.add_argument("--rate", type=float, default=1000.0, help="frames per second of each measurement")
    ap.add_argument("--rounds", type=int, default=None, help="rounds per figure (default 6, --quick 2)")
    args = ap.parse_args()
    types = [t for t in (args.profile or "").split(",") if t]
    for t in types:
        if t not in LATENCY_TYPES:
            print(
                f"--profile: {t!r} is not measurable here (known: {', '.join(LATENCY_TYPES)})",
                file=sys.stderr,
            )
            return 2
    if not 10 <= args.rate <= 100_000:
        print("--rate: expected 10..100000 frames per second", file=sys.stderr)
        return 2
    rounds = args.rounds or (2 if args.quick else 6)
    packets = int(args.rate * 2)
    print_machine()
    source = "./uno bench latency " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    agent_args = (
        "--profiles",
        args.profiles,
        "--dampening",
        "0",
        "--flap-window",
        "0",
        "--rel-threshold",
        "0",
    )
    with (
        tempfile.TemporaryDirectory(prefix="placelat-") as tmp,
        agent_host(Path(tmp), vms=2, agent_args=agent_args, name="pl" + os.urandom(2).hex()) as (
            host,
            status,
            _agent,
            url,
        ),
    ):
        for vm in ("web", "web2"):
            assert call(url, "POST", "/v1/vms", {"id": vm})[0] == 201
        paths = Paths(status, host.name, packets, args.rate)
        if types:
            found = profile(url, paths, types, rounds, Path(args.write), source)
            print(f"latencies (us, one way) written to {args.write}: {json.dumps(found)}")
            final_json({"latency_us": found, "rate_pps": args.rate, "packets": packets, "rounds": rounds})
            return 0
        res = validate(url, paths, Path(args.profiles))
    for case, r in res.items():
        print(f"{case}: SLO {r['slo_us']} us -> firewall on {r['location']} ({r['pcie_crossings']} crossings); "
              f"predicted {r['predicted_us']} us (p99 {r['predicted_p99_us']}), measured added median "
              f"{r['added_us']['median']:.1f} p99 {r['added_us']['p99']:.1f} us over the direct path "
              f"(total {r['measured_us']['median']:.1f} / {r['measured_us']['p99']:.1f}); factor median "
              f"{r['factor_median']}, p99 {r['factor_p99']}")  # fmt: skip
    final_json({
        "decisions": {c: r["location"] for c, r in res.items()},
        "factor_median": {c: r["factor_median"] for c, r in res.items()},
        "factor_p99": {c: r["factor_p99"] for c, r in res.items()},
        "predicted_us": {c: r["predicted_us"] for c, r in res.items()},
        "measured_added_median_us": {c: round(r["added_us"]["median"], 1) for c, r in res.items()},
        "rate_pps": args.rate, "packets": packets,
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
