"""A third placement generator, written apart from placement/families.py and bench/placement/foreign.py.

Written from the input format only (docs/placement.md, placement/README.md "Input and output", the
examples) and issue 25's text, to find what the other two generators miss. It draws what a data center's
operator would feed the solver:

- tenants with 1-4 VMs and their own NF instances (firewall, NAT, LB, IPS, IPsec, L7 firewall, flow
  monitor; a vendor appliance that cannot be offloaded), many short chains sharing those instances (the
  tenant's firewall sees every chain of the tenant), chains that fan out (a firewall sending the
  suspicious share to an IPS, the rest to NAT; an LB to each VM) and join (a shared flow monitor or IPS
  over several tenants: components of hundreds of NFs);
- per-packet costs as an operator measures them (cores used / Gbit/s of a counter over an interval:
  16-digit floats), per NF type, sometimes per NF; some types much cheaper on the sNIC (IPS with a regex
  engine, IPsec with crypto offload, the monitor), some faster on the host (L7 firewall on slow sNIC
  cores); base costs (DPDK polling) and several instances in some draws; sNIC units per core drawn
  (1, 72, 1,000: the scale of the numbers moves);
- heavy-tailed traffic (Pareto per chain, a few elephant flows, Zipf over tenants), idle tenants (0 Gbit/s);
- 1-4 sNICs of different sizes, tight to loose capacity and PCIe (duplex or shared), memory, background
  PCIe, switch tables with rules, latency SLOs on declared chains (some impossible on purpose: they must
  be refused with a reason naming the chain), pins (accelerators, non-offloadable NFs), current locations
  with `max_moves` / `move_cost` (a re-placement);
- edge cases: one NF, nothing movable, zero traffic, huge and tiny numbers, numeric strings, no sNIC, and
  duplicate ids (node, sNIC, chain: must be refused).

`draw(seed, size, snics)` gives (instance, options, meta); `instance(seed, size, snics)` the instance alone.
`brute(obj, options)` is an exhaustive solver of the documented model written here (numpy, no import of
placement/), `evaluate(obj, options, placement)` checks one placement against every documented rule.

    .venv/bin/python -m bench.placement.third --draws 60 --seed 0 --sizes 5-60
    .venv/bin/python -m bench.placement.third --draws 10 --seed 0 --sizes 100-500,1000:3,5000

For each draw: ours (`--solver cpsat`) and the MIP solve it (CPU seconds, process_time), the brute force
where it fits (at most BRUTE_MAX assignments of the movable vertices), and every answer's placement is
checked against the rules. Reported: disagreements (status, proven host cost, against the brute force and
between the backends), rule violations, crashes and unclear refusals, draws where ours is slower than the
MIP (x2 and +0.05 CPU s) or over issue 25's targets (500 / 1 sNIC 0.1 s, 5,000 / 1 sNIC 1 s, 1,000 / 3
sNICs 10 s).

Last line JSON: {"draws", "findings": [...], "disagree", "violations", "crashes", "slower", "missed",
"brute_checked", "ours_proven", "mip_proven", "median_cpu_ours", "median_cpu_mip", "cpu_sum_ours",
"cpu_sum_mip"}.
"""

from __future__ import annotations

import argparse
import itertools
import math
import random
import sys
import time
from fractions import Fraction

import numpy as np

BRUTE_MAX = 1 << 20  # assignments the brute force enumerates at most
TOL = 1e-8  # relative slack for budgets: the parse reads a float within 5e-9 (docs/placement.md "Numbers")
GAP = 1e-5  # the default gap_limit
SLOWER_RATIO, SLOWER_ABS = 2.0, 0.05
TARGETS = {(500, 1): 0.1, (5000, 1): 1.0, (1000, 3): 10.0}

# NF types: r_host (cores per Gbit/s of load, in + out) range, sNIC/host cost ratio range (in cores of the
# sNIC's own units: multiplied by units_per_core), host and sNIC latency (us), memory (GB) on an sNIC,
# polling base (cores) when the draw has bases.
NF_TYPES = {
    "firewall": ((0.015, 0.06), (0.4, 1.6), (2.0, 6.0), (1.5, 5.0), (0.25, 1.0)),
    "nat": ((0.02, 0.07), (0.5, 1.3), (2.0, 5.0), (1.5, 4.0), (0.5, 2.0)),
    "lb": ((0.02, 0.09), (0.7, 2.2), (3.0, 8.0), (3.0, 9.0), (0.5, 1.5)),
    "ips": ((0.25, 0.9), (0.06, 0.3), (15.0, 60.0), (8.0, 30.0), (2.0, 6.0)),  # regex engine on the sNIC
    "ipsec": ((0.15, 0.55), (0.04, 0.2), (8.0, 25.0), (3.0, 10.0), (0.5, 2.0)),  # crypto offload
    "l7fw": ((0.4, 1.3), (2.0, 7.0), (20.0, 80.0), (60.0, 250.0), (1.0, 4.0)),  # slower on sNIC cores
    "monitor": ((0.008, 0.04), (0.1, 0.5), (1.0, 3.0), (0.8, 2.5), (0.25, 1.5)),
    "vendor": ((0.1, 0.4), (1.0, 1.0), (10.0, 30.0), (10.0, 30.0), (1.0, 2.0)),  # not offloadable
}
ORDER = ["firewall", "ips", "l7fw", "monitor", "lb", "nat", "ipsec"]  # ingress order in a chain


def measured(rng: random.Random, value: float) -> float:
    """value as an operator's measurement gives it: cores over a counter-derived rate, a 16-digit float."""
    seconds = rng.choice([5.0, 10.0, 30.0, 60.0])
    gbit = rng.uniform(0.5, 40.0)
    nbytes = int(gbit * 1e9 / 8 * seconds) + rng.randrange(1000)
    rate = nbytes * 8 / seconds / 1e9
    return round(value * rate, 4) / rate if value > 0 else 0.0


def counter_gbps(rng: random.Random, gbps: float) -> float:
    """A traffic rate read from a byte counter over an interval."""
    if gbps <= 0:
        return 0.0
    seconds = rng.choice([1.0, 5.0, 10.0, 15.0])
    return int(gbps * 1e9 / 8 * seconds) * 8 / seconds / 1e9


def _pareto(rng: random.Random, alpha: float, scale: float) -> float:
    return scale * rng.paretovariate(alpha)


class _Builder:
    def __init__(self, rng: random.Random, ns: int, style: dict) -> None:
        self.rng, self.ns, self.style = rng, ns, style
        self.nodes: list[dict] = []
        self.edges: list[dict] = []
        self.paths: list[tuple[list[str], float]] = []  # declared chain candidates (vertices, gbps)
        self.profile: dict[str, dict] = {}
        self.ports = [f"snic{s}-eth{j}" for s in range(ns) for j in range(style["ports"])]
        for p in self.ports:
            self.nodes.append({"id": p, "kind": "port", "pinned": p.split("-")[0]})
        for t in NF_TYPES:
            self.profile[t] = self._profile(t)

    def _profile(self, t: str) -> dict:
        rng, st = self.rng, self.style
        rh, ratio, lh, ln, mem = NF_TYPES[t][:5]
        r_host = rng.uniform(*rh)
        r_nic = r_host * rng.uniform(*ratio) * st["units"]
        prof = {"r_host": measured(rng, r_host), "r_nic": measured(rng, r_nic)}
        if st["bases"]:
            prof["b_host"] = round(rng.choice([0.05, 0.1, 0.25, 0.5, 1.0]) * rng.uniform(0.8, 1.2), 3)
            prof["b_nic"] = round(rng.uniform(0.1, 1.0) * st["units"] * 0.1, 3)
        if st["latency"]:
            prof["latency_us"] = {"host": round(rng.uniform(*lh), 2), "nic": round(rng.uniform(*ln), 2)}
        if st["memory"]:
            prof["needs"] = {"mem_gb": round(rng.uniform(*mem), 2)}
        return prof

    def nf(self, name: str, t: str) -> str:
        rng, st = self.rng, self.style
        node = {"id": name, "kind": "nf"}
        prof = self._profile(t) if st["per_nf"] else self.profile[t]
        node.update({k: (dict(v) if isinstance(v, dict) else v) for k, v in prof.items()})
        if st["bases"] and rng.random() < 0.25:
            node["instances"] = rng.choice([2, 2, 3, 4, 8])
        if t == "vendor" or (t == "l7fw" and rng.random() < 0.3):
            node["pinned"] = "host"
        elif t in ("ipsec", "ips") and self.ns and rng.random() < st["accel_pins"]:
            node["pinned"] = f"snic{rng.randrange(self.ns)}"
        if st["locations"] and rng.random() < 0.85:
            anywhere = rng.choice(["host"] + [f"snic{s}" for s in range(self.ns)])
            node["location"] = node["pinned"] if "pinned" in node and rng.random() < 0.9 else anywhere
        self.nodes.append(node)
        return name

    def edge(self, a: str, b: str, g: float) -> None:
        self.edges.append({"src": a, "dst": b, "gbps": counter_gbps(self.rng, g)})

    def tenant(self, k: int, scale: float, shared: dict[str, str]) -> None:
        rng = self.rng
        vms = [f"t{k}-vm{i}" for i in range(rng.randint(1, 4))]
        for v in vms:
            self.nodes.append({"id": v, "kind": "vm"})
        kinds = ["firewall"] + [
            t for t in ("ips", "l7fw", "monitor", "lb", "nat", "ipsec") if rng.random() < 0.4
        ]
        if rng.random() < 0.05:
            kinds.append("vendor")
        mine = {t: self.nf(f"t{k}-{t}", t) for t in kinds}
        for t, name in shared.items():
            if rng.random() < 0.5:
                mine[t] = name  # the shared instance replaces (or adds) the tenant's own
        idle = rng.random() < 0.08
        for _ in range(rng.randint(1, 6)):
            g = 0.0 if idle else _pareto(rng, self.style["alpha"], scale)
            if rng.random() < 0.02:
                g *= rng.uniform(20, 200)  # an elephant
            src = rng.choice(self.ports) if self.ports and rng.random() < 0.8 else rng.choice(vms)
            dst = rng.choice(vms)
            types = [t for t in ORDER if t in mine and rng.random() < 0.6] or ["firewall"]
            if "vendor" in mine and rng.random() < 0.5:
                types.append("vendor")
            seq = [mine[t] for t in types]
            egress = rng.random() < 0.3 and self.ports
            path = [dst, *reversed(seq), rng.choice(self.ports)] if egress else [src, *seq, dst]
            path = [v for i, v in enumerate(path) if i == 0 or v != path[i - 1]]
            if len(path) < 2:
                continue
            for a, b in itertools.pairwise(path):
                self.edge(a, b, g)
            self.paths.append((path, g))
            # fan-out: the firewall sends a share to the IPS, which joins the chain again
            if "ips" in mine and "firewall" in mine and mine["ips"] not in seq and rng.random() < 0.25:
                share = g * rng.uniform(0.05, 0.3)
                self.edge(mine["firewall"], mine["ips"], share)
                self.edge(mine["ips"], dst, share)
        if "lb" in mine and len(vms) > 1:
            for v in vms:
                self.edge(mine["lb"], v, _pareto(self.rng, 2.0, scale * 0.3))


def _style(rng: random.Random, ns: int) -> dict:
    return {
        "ports": rng.choice([1, 1, 2]),
        "units": rng.choice([1.0, 72.0, 72.0, 1000.0]),
        "bases": rng.random() < 0.35,
        "per_nf": rng.random() < 0.4,
        "latency": rng.random() < 0.4,
        "memory": rng.random() < 0.4 and ns > 0,
        "locations": rng.random() < 0.4,
        "accel_pins": rng.choice([0.0, 0.0, 0.05, 0.2]),
        "alpha": rng.choice([1.1, 1.3, 1.6, 2.5]),
        "shared": rng.random() < 0.35,
        "tables": rng.random() < 0.15 and ns > 0,
    }


def _snics(rng: random.Random, b: _Builder, obj: dict, ns: int) -> None:
    st = b.style
    nic_total = sum(
        float(n.get("b_nic", 0)) * n.get("instances", 1) + float(n["r_nic"]) * _loads(obj).get(n["id"], 0.0)
        for n in obj["nodes"]
        if n["kind"] in ("nf", "table") and n.get("pinned") != "host"
    )
    traffic = sum(e["gbps"] for e in obj["edges"]) or 1.0
    kinds = {n["id"]: n["kind"] for n in obj["nodes"]}
    # what surely crosses each link: a port's traffic from / to the host's VMs (every chain ends on one side)
    forced = [[0.0, 0.0] for _ in range(ns)]
    for e in obj["edges"]:
        for end, d in ((e["src"], 0), (e["dst"], 1)):
            if kinds[end] == "port":
                forced[int(end.split("-")[0][4:])][d] += e["gbps"]
    pinned_mem = [0.0] * ns
    for n in obj["nodes"]:
        p = n.get("pinned")
        if n["kind"] == "nf" and p not in (None, "host"):
            pinned_mem[int(p[4:])] += float(n.get("needs", {}).get("mem_gb", 0))
    shared = rng.random() < 0.2
    if shared:
        obj["pcie_model"] = "shared"
    snics = []
    for s in range(ns):
        size = rng.choice([0.03, 0.1, 0.3, 0.6, 1.2]) * rng.uniform(0.7, 1.3)
        pcie_share = rng.choice([0.01, 0.05, 0.15, 0.4, 2.0]) * rng.uniform(0.7, 1.3)
        snic = {
            "id": f"snic{s}",
            "capacity": round(size * nic_total / ns, 3) if nic_total > 0 else rng.choice([0, 10, 36]),
            "pcie_gbps": round(max(forced[s]) * rng.choice([0.97, 1.02, 1.1, 1.5]) + pcie_share * traffic, 2),
        }
        if st["memory"]:
            snic["resources"] = {"mem_gb": round(pinned_mem[s] * 1.05, 1) + rng.choice([0, 2, 4, 8, 16, 32])}
        if rng.random() < 0.2:
            bg = {"up": round(rng.uniform(0, 0.3) * snic["pcie_gbps"], 3)}
            if rng.random() < 0.6:
                bg["down"] = round(rng.uniform(0, 0.3) * snic["pcie_gbps"], 3)
            snic["background_gbps"] = bg
        if st["latency"]:
            snic["pcie_latency_us"] = round(rng.uniform(0.8, 6.0), 2)
        if st["tables"]:
            snic["max_rules"] = rng.choice([1024, 8192, 65536])
        snics.append(snic)
    obj["snics"] = snics


def _loads(obj: dict) -> dict[str, float]:
    load: dict[str, float] = {}
    for e in obj["edges"]:
        g = float(Fraction(e["gbps"])) if isinstance(e["gbps"], str) else float(e["gbps"])
        load[e["src"]] = load.get(e["src"], 0.0) + g
        load[e["dst"]] = load.get(e["dst"], 0.0) + g
    for n in obj["nodes"]:
        if n["kind"] == "table":
            load[n["id"]] = load.get(n["id"], 0.0) + 2 * float(n.get("through_gbps", 0))
    return load


def _tables(rng: random.Random, b: _Builder) -> None:
    """1-3 switch tables in the wire -> VM pipeline of the first port (the agent's shape)."""
    if not b.ports:
        return
    vm = next((n["id"] for n in b.nodes if n["kind"] == "vm"), None)
    names = [f"table{i}" for i in range(rng.randint(1, 3))]
    for t in names:
        b.nodes.append({"id": t, "kind": "table", "r_host": measured(rng, rng.uniform(0.01, 0.05)), "r_nic": 0,
                        "rules": rng.choice([0, 100, 2000, 20000, 64000])})  # fmt: skip
    if vm is None or rng.random() < 0.3:
        for t in names:
            b.nodes[-len(names) + names.index(t)]["through_gbps"] = round(rng.uniform(0.1, 20), 3)
        return
    up, down = rng.uniform(0.5, 10), rng.uniform(0.1, 5)
    for a, c in itertools.pairwise([b.ports[0], *names, vm]):
        b.edge(a, c, up)
    for a, c in itertools.pairwise([vm, *names, b.ports[0]]):
        b.edge(a, c, down)


def _chains(rng: random.Random, b: _Builder, obj: dict, meta: dict) -> None:
    nodes = {n["id"]: n for n in obj["nodes"]}
    pl = {s["id"]: float(s.get("pcie_latency_us", 0)) for s in obj["snics"]}
    chains = []
    picked = rng.sample(b.paths, min(len(b.paths), rng.randint(1, 12)))
    impossible = rng.randrange(len(picked)) if rng.random() < 0.2 else -1  # at most one chain per draw
    for i, (path, _g) in enumerate(picked):
        lat_host = sum(float(nodes[v].get("latency_us", {}).get("host", 0)) for v in path)
        # the least latency of the vertices wherever they may run (crossings ignored)
        least = 0.0
        for v in path:
            n = nodes[v]
            if n["kind"] not in ("nf", "table"):
                continue
            lat = n.get("latency_us", {})
            h, c = float(lat.get("host", 0)), float(lat.get("nic", 0))
            least += h if n.get("pinned") == "host" else (c if n.get("pinned") else min(h, c))
        chain: dict = {"id": f"chain{i}", "vertices": list(path)}
        r = rng.random()
        if i == impossible and least > 0:
            chain["latency_us"] = round(least * rng.uniform(0.3, 0.9), 3)  # impossible on purpose
            meta["impossible_slo"].append(chain["id"])
        elif r < 0.85:
            crossings = 2 * (max(pl.values()) if pl else 0)
            chain["latency_us"] = round(max(lat_host, least + crossings) * rng.uniform(0.7, 1.6), 3)
        chains.append(chain)
    obj["chains"] = chains


def draw(seed: int, size: int, snics: int | None = None) -> tuple[dict, dict, dict]:
    """(instance, solve options, meta) for a seed: about `size` vertices, `snics` sNICs (1-4 drawn if None).
    meta: {"expect": "refused"|None, "impossible_slo": [chain ids], "kind": str}."""
    rng = random.Random(seed * 7919 + size)
    meta: dict = {"expect": None, "impossible_slo": [], "kind": "operator"}
    if size <= 60 and rng.random() < 0.18:
        return _edge_case(rng, seed, meta)
    ns = snics if snics is not None else rng.choice([1, 1, 1, 2, 2, 3, 4])
    st = _style(rng, ns)
    b = _Builder(rng, ns, st)
    scale = rng.choice([0.01, 0.1, 0.5, 2.0]) * rng.uniform(0.5, 2)
    shared = {}
    if st["shared"]:
        for t in rng.sample(["monitor", "ips", "nat", "firewall"], rng.randint(1, 2)):
            shared[t] = b.nf(f"shared-{t}", t)
    k = 0
    while len(b.nodes) < size:
        b.tenant(k, scale / (1 + k) ** rng.choice([0.0, 0.5, 1.0]) if k < 50 else scale * 0.05, shared)
        k += 1
    if st["tables"]:
        _tables(rng, b)
    obj: dict = {"nodes": b.nodes, "edges": [e for e in b.edges if e["src"] != e["dst"]]}
    _snics(rng, b, obj, ns)
    if st["latency"] and b.paths:
        _chains(rng, b, obj, meta)
    opts: dict = {}
    if st["locations"]:
        r = rng.random()
        if r < 0.35:
            located = sum(n.get("location") is not None for n in obj["nodes"])
            opts["max_moves"] = rng.randint(0, max(5, located // 8))
        elif r < 0.6:
            opts["move_cost"] = round(rng.uniform(0.001, 0.2), 4)
    return obj, opts, meta


def _edge_case(rng: random.Random, seed: int, meta: dict) -> tuple[dict, dict, dict]:
    kind = rng.choice(["one_nf", "all_pinned", "zero_traffic", "huge_tiny", "strings", "no_snic", "dup_node",
                       "dup_snic", "dup_chain", "isolated_nf"])  # fmt: skip
    meta["kind"] = kind
    port = {"id": "snic0-eth0", "kind": "port", "pinned": "snic0"}
    vm = {"id": "vm0", "kind": "vm"}
    snic = {"id": "snic0", "capacity": 36, "pcie_gbps": 40}
    opts: dict = {}
    if kind == "one_nf":
        nf = {"id": "fw", "kind": "nf", "r_host": measured(rng, 0.04), "r_nic": measured(rng, 1.1)}
        obj = {"nodes": [port, vm, nf], "edges": [{"src": "snic0-eth0", "dst": "fw", "gbps": 3.7},
               {"src": "fw", "dst": "vm0", "gbps": 3.7}], "snics": [snic]}  # fmt: skip
        if rng.random() < 0.5:
            obj["snics"][0]["capacity"] = rng.choice([0, 1, 8.14, 100])
    elif kind == "all_pinned":
        nfs = [{"id": f"nf{i}", "kind": "nf", "r_host": 0.05 + i / 100, "r_nic": 0.5 + i / 10,
                "pinned": rng.choice(["host", "snic0"]), "location": rng.choice(["host", "snic0"])}
               for i in range(5)]  # fmt: skip
        path = ["snic0-eth0", *[n["id"] for n in nfs], "vm0"]
        obj = {"nodes": [port, vm, *nfs], "snics": [dict(snic, capacity=rng.choice([1, 5, 36]))],
               "edges": [{"src": a, "dst": c, "gbps": 2.5} for a, c in itertools.pairwise(path)]}  # fmt: skip
        if rng.random() < 0.5:
            opts["max_moves"] = rng.randint(0, 2)
    elif kind == "zero_traffic":
        nfs = [{"id": f"nf{i}", "kind": "nf", "r_host": 0.05, "r_nic": 0.5, "b_host": rng.choice([0, 0.2]),
                "b_nic": rng.choice([0, 3])} for i in range(6)]  # fmt: skip
        path = ["snic0-eth0", *[n["id"] for n in nfs], "vm0"]
        obj = {"nodes": [port, vm, *nfs], "snics": [dict(snic, capacity=rng.choice([0, 7, 36]))],
               "edges": [{"src": a, "dst": c, "gbps": 0} for a, c in itertools.pairwise(path)]}  # fmt: skip
    elif kind == "huge_tiny":
        big, tiny = rng.choice([1e6, 1e9, 1e12]), rng.choice([1e-6, 1e-9, 1e-12])
        nfs = [{"id": f"nf{i}", "kind": "nf", "r_host": rng.choice([big, tiny, 0.0173]) * rng.uniform(0.5, 2),
                "r_nic": rng.choice([big, tiny, 1.3]) * rng.uniform(0.5, 2)} for i in range(8)]  # fmt: skip
        path = ["snic0-eth0", *[n["id"] for n in nfs], "vm0"]
        g = rng.choice([big, tiny, 7.3])
        obj = {"nodes": [port, vm, *nfs], "snics": [dict(snic, capacity=rng.choice([big, tiny, 36]),
               pcie_gbps=rng.choice([big, tiny, 40]))],
               "edges": [{"src": a, "dst": c, "gbps": g * rng.uniform(0.5, 2)}
                         for a, c in itertools.pairwise(path)]}  # fmt: skip
    elif kind == "strings":
        nfs = [{"id": f"nf{i}", "kind": "nf", "r_host": rng.choice(["1/3", "0.25", "2.5e-3", "1/7"]),
                "r_nic": rng.choice(["3/7", "1.5", "2/3"])} for i in range(7)]  # fmt: skip
        path = ["snic0-eth0", *[n["id"] for n in nfs], "vm0"]
        obj = {"nodes": [port, vm, *nfs], "snics": [dict(snic, capacity="10/3", pcie_gbps="7/2")],
               "edges": [{"src": a, "dst": c, "gbps": rng.choice(["1/3", "2", "5/11"])}
                         for a, c in itertools.pairwise(path)]}  # fmt: skip
    elif kind == "no_snic":
        nfs = [{"id": f"nf{i}", "kind": "nf", "r_host": 0.1, "r_nic": 1} for i in range(3)]
        path = ["vm0", *[n["id"] for n in nfs], "vm1"]
        obj = {"nodes": [vm, {"id": "vm1", "kind": "vm"}, *nfs], "snics": [],
               "edges": [{"src": a, "dst": c, "gbps": 1.25} for a, c in itertools.pairwise(path)]}  # fmt: skip
    elif kind == "isolated_nf":
        nfs = [{"id": f"nf{i}", "kind": "nf", "r_host": 0.1, "r_nic": 1, "b_host": 0.3, "b_nic": 2,
                "instances": rng.randint(1, 4)} for i in range(4)]  # fmt: skip
        obj = {"nodes": [port, vm, *nfs], "snics": [dict(snic, capacity=rng.choice([3, 9]))],
               "edges": [{"src": "snic0-eth0", "dst": "nf0", "gbps": 1.5}, {"src": "nf0", "dst": "vm0",
                         "gbps": 1.5}]}  # fmt: skip
    else:
        nfs = [{"id": f"nf{i}", "kind": "nf", "r_host": 0.1, "r_nic": 1} for i in range(3)]
        path = ["snic0-eth0", *[n["id"] for n in nfs], "vm0"]
        obj = {"nodes": [port, vm, *nfs], "snics": [snic],
               "edges": [{"src": a, "dst": c, "gbps": 1.25} for a, c in itertools.pairwise(path)]}  # fmt: skip
        meta["expect"] = "refused"
        if kind == "dup_node":
            obj["nodes"].append({"id": "nf1", "kind": rng.choice(["nf", "vm"]), "r_host": 0.2, "r_nic": 2})
        elif kind == "dup_snic":
            obj["snics"].append(dict(snic, capacity=5))
        else:
            obj["chains"] = [{"id": "c", "vertices": path}, {"id": "c", "vertices": path[:2]}]
    return obj, opts, meta


def instance(seed: int, size: int = 30, snics: int | None = None) -> dict:
    return draw(seed, size, snics)[0]


# ------------------------------------------------------------------ my own reading of the documented model


def _num(x) -> float:
    return float(Fraction(x)) if isinstance(x, str) else float(x)


class Model:
    """The documented model, read here from the JSON (no placement/ code): arrays for vectorised evaluation."""

    def __init__(self, obj: dict, options: dict) -> None:
        nodes, snics = obj["nodes"], obj["snics"]
        self.ids = [n["id"] for n in nodes]
        self.locs = ["host"] + [s["id"] for s in snics]
        L = len(self.locs)
        li = {loc: i for i, loc in enumerate(self.locs)}
        idx = {v: i for i, v in enumerate(self.ids)}
        n = len(nodes)
        load = np.zeros(n)
        self.edges = []
        for e in obj["edges"]:
            g = _num(e["gbps"])
            load[idx[e["src"]]] += g
            load[idx[e["dst"]]] += g
            self.edges.append((idx[e["src"]], idx[e["dst"]], g))
        self.hc = np.zeros(n)
        self.nc = np.zeros(n)
        self.allowed: list[list[int]] = []
        self.cur = np.full(n, -1)
        resources = sorted(snics[0].get("resources", {})) if snics else []
        self.res_names = resources
        self.needs = np.zeros((len(resources), n))
        self.rules = np.zeros(n)
        self.lat = np.zeros((n, 2))  # host, nic
        for i, nd in enumerate(nodes):
            k = nd["kind"]
            if k in ("nf", "table"):
                if k == "table":
                    load[i] += 2 * _num(nd.get("through_gbps", 0))
                inst = nd.get("instances", 1) if k == "nf" else 1
                self.hc[i] = _num(nd.get("b_host", 0)) * inst + _num(nd.get("r_host", 0)) * load[i]
                self.nc[i] = _num(nd.get("b_nic", 0)) * inst + _num(nd.get("r_nic", 0)) * load[i]
                for r, name in enumerate(resources):
                    self.needs[r, i] = _num(nd.get("needs", {}).get(name, 0))
                self.rules[i] = nd.get("rules", 0)
                lat = nd.get("latency_us", {})
                self.lat[i] = (_num(lat.get("host", 0)), _num(lat.get("nic", 0)))
                p = nd.get("pinned")
                self.allowed.append([li[p]] if p is not None else list(range(L)))
            elif k == "vm":
                self.allowed.append([0])
            else:
                self.allowed.append([li[nd["pinned"]]])
            if nd.get("location") is not None:
                self.cur[i] = li[nd["location"]]
        self.cap = np.array([_num(s["capacity"]) for s in snics])
        self.pcie = np.array([_num(s["pcie_gbps"]) for s in snics])
        self.bg = np.array(
            [[_num(s.get("background_gbps", {}).get(d, 0)) for d in ("up", "down")] for s in snics]
        )
        self.res_cap = np.array([[_num(s["resources"][r]) for s in snics] for r in resources])
        self.max_rules = [s.get("max_rules") for s in snics]
        self.plat = np.array([_num(s.get("pcie_latency_us", 0)) for s in snics])
        self.shared = obj.get("pcie_model", "duplex") == "shared"
        self.chains = [
            ([idx[v] for v in c["vertices"]], c.get("latency_us"), c["id"]) for c in obj.get("chains", [])
        ]
        self.max_moves = options.get("max_moves")
        self.move_cost = options.get("move_cost", 0.0) or 0.0
        self.movable = [i for i in range(n) if len(self.allowed[i]) > 1]
        self.size = math.prod(len(self.allowed[i]) for i in self.movable)

    def evaluate(self, asg: np.ndarray, slo: bool = True) -> dict:
        """asg: (rows, n) location indices. Per row: host cost, primary, PCIe total, moves, and the worst relative
        budget excess (<= 0: every rule met; the budgets' slack relative to their size)."""
        rows = asg.shape[0]
        host = (asg == 0) @ self.hc
        worst = np.full(rows, -np.inf)

        def row(use: np.ndarray, budget: float, scale: float) -> None:
            nonlocal worst
            worst = np.maximum(worst, (use - budget) / max(scale, 1e-300))

        up = np.zeros((rows, len(self.locs)))
        down = np.zeros((rows, len(self.locs)))
        ptotal = np.zeros(rows)
        for u, v, g in self.edges:
            lu, lv = asg[:, u], asg[:, v]
            diff = lu != lv
            for s in range(1, len(self.locs)):
                up[:, s] += g * (diff & (lu == s))
                down[:, s] += g * (diff & (lv == s))
            ptotal += g * (diff * ((lu != 0).astype(float) + (lv != 0)))
        for s in range(1, len(self.locs)):
            on = asg == s
            nc_pos = self.nc[self.nc > 0].sum()
            row(on @ self.nc, self.cap[s - 1], max(self.cap[s - 1], nc_pos))
            for r in range(len(self.res_names)):
                row(
                    on @ self.needs[r],
                    self.res_cap[r, s - 1],
                    max(self.res_cap[r, s - 1], self.needs[r].sum()),
                )
            if self.max_rules[s - 1] is not None:
                use = on @ self.rules
                worst = np.maximum(worst, np.where(use > self.max_rules[s - 1], 1.0, -1.0))
            u_, d_ = up[:, s] + self.bg[s - 1, 0], down[:, s] + self.bg[s - 1, 1]
            tot = sum(g for _, _, g in self.edges) + self.bg[s - 1].sum()
            if self.shared:
                row(u_ + d_, self.pcie[s - 1], max(self.pcie[s - 1], tot))
            else:
                row(u_, self.pcie[s - 1], max(self.pcie[s - 1], tot))
                row(d_, self.pcie[s - 1], max(self.pcie[s - 1], tot))
        lat = []
        for verts, bound, _cid in self.chains:
            t = np.zeros(rows)
            for v in verts:
                t += np.where(asg[:, v] == 0, self.lat[v, 0], self.lat[v, 1])
            for a, b in itertools.pairwise(verts):
                la, lb = asg[:, a], asg[:, b]
                diff = la != lb
                pl = np.concatenate([[0.0], self.plat])
                t += diff * (pl[la] + pl[lb])
            lat.append(t)
            if slo and bound is not None:
                row(t, _num(bound), max(_num(bound), float(t.max()), 1e-9))
        has = self.cur >= 0
        moves = ((asg != self.cur) & has).sum(axis=1)
        if self.max_moves is not None:
            worst = np.maximum(worst, np.where(moves > self.max_moves, 1.0, -1.0))
        return {"host": host, "primary": host + self.move_cost * moves, "pcie": ptotal, "moves": moves,
                "worst": worst, "lat": lat, "up": up, "down": down}  # fmt: skip

    def assignments(self, chunk: int = 1 << 16):
        """Every placement of the movable vertices, in chunks of rows."""
        base = np.array([a[0] for a in self.allowed], dtype=np.int16)
        sizes = [len(self.allowed[i]) for i in self.movable]
        for start in range(0, self.size, chunk):
            k = np.arange(start, min(self.size, start + chunk), dtype=np.int64)
            asg = np.tile(base, (len(k), 1))
            for j, i in enumerate(self.movable):
                asg[:, i] = np.array(self.allowed[i], dtype=np.int16)[k % sizes[j]]
                k = k // sizes[j]
            yield asg


def brute(obj: dict, options: dict, ours: dict | None = None) -> dict | None:
    """The exhaustive optimum (None when over BRUTE_MAX assignments): primary optimum among placements meeting
    every rule with slack TOL (strict) and within TOL (loose); feasibility ignoring SLOs; with `ours`'s
    primary cost c, the least (PCIe, moves) among strict placements of primary <= c."""
    m = Model(obj, options)
    if m.size > BRUTE_MAX:
        return None
    best = {"strict": math.inf, "loose": math.inf, "no_slo": False, "tie": None}
    c = ours
    for asg in m.assignments():
        ev = m.evaluate(asg)
        strict, loose = ev["worst"] <= -TOL, ev["worst"] <= TOL
        if strict.any():
            best["strict"] = min(best["strict"], float(ev["primary"][strict].min()))
        if loose.any():
            best["loose"] = min(best["loose"], float(ev["primary"][loose].min()))
        if not best["no_slo"] and m.chains:
            best["no_slo"] = bool((m.evaluate(asg, slo=False)["worst"] <= TOL).any())
        if c is not None:
            sel = strict & (ev["primary"] <= c + 1e-9 * max(1.0, abs(c)))
            if sel.any():
                key = min(zip(ev["pcie"][sel].tolist(), ev["moves"][sel].tolist(), strict=True))
                best["tie"] = key if best["tie"] is None else min(best["tie"], key)
    return best


# ------------------------------------------------------------------ checking one answer


def check_answer(obj: dict, options: dict, out: dict, who: str) -> tuple[list[str], dict | None]:
    """Violations of a documented rule by an answer (its placement and its reported figures)."""
    bad: list[str] = []
    if out["status"] not in ("optimal", "feasible"):
        if not out.get("reason"):
            bad.append(f"{who}: {out['status']} without a reason")
        return bad, None
    m = Model(obj, options)
    pl = out["placement"]
    if set(pl) != set(m.ids):
        bad.append(f"{who}: placement names {len(pl)} vertices, the instance {len(m.ids)}")
        return bad, None
    li = {loc: i for i, loc in enumerate(m.locs)}
    asg = np.array([[li.get(pl[v], -1) for v in m.ids]], dtype=np.int16)
    if (asg < 0).any():
        bad.append(f"{who}: unknown location in placement")
        return bad, None
    for i, v in enumerate(m.ids):
        if asg[0, i] not in m.allowed[i]:
            bad.append(f"{who}: {v} at {pl[v]} against its pin/kind")
    ev = m.evaluate(asg)
    if ev["worst"][0] > TOL:
        bad.append(f"{who}: a budget/SLO/max_moves broken (worst relative excess {ev['worst'][0]:.3g})")
    host = float(ev["host"][0])
    if abs(out["host_cost"] - host) > 1e-7 * max(1.0, abs(host)):
        bad.append(f"{who}: host_cost {out['host_cost']} but its placement costs {host}")
    for s in range(1, len(m.locs)):
        sid = m.locs[s]
        load = float((asg[0] == s) @ m.nc)
        got = out.get("snic_load", {}).get(sid)
        if got is None or abs(got - load) > 1e-7 * max(1.0, abs(load)):
            bad.append(f"{who}: snic_load[{sid}] {got} but {load}")
        for d, arr, b in (("up", ev["up"], 0), ("down", ev["down"], 1)):
            want = float(arr[0, s] + m.bg[s - 1, b])
            got = out.get("pcie_gbps", {}).get(sid, {}).get(d)
            if got is None or abs(got - want) > 1e-7 * max(1.0, abs(want)):
                bad.append(f"{who}: pcie_gbps[{sid}].{d} {got} but {want}")
    moved = {mv["id"] for mv in out.get("moves", [])}
    want_moved = {m.ids[i] for i in range(len(m.ids)) if m.cur[i] >= 0 and asg[0, i] != m.cur[i]}
    if moved != want_moved:
        bad.append(f"{who}: moves lists {sorted(moved)[:5]}, the placement moves {sorted(want_moved)[:5]}")
    if m.chains:
        got = out.get("chain_latency_us") or {}
        for (_v, _b, cid), t in zip(m.chains, ev["lat"], strict=True):
            if cid not in got or abs(got[cid] - float(t[0])) > 1e-6 * max(1.0, float(t[0])):
                bad.append(f"{who}: chain_latency_us[{cid}] {got.get(cid)} but {float(t[0])}")
    fig = {"primary": float(ev["primary"][0]), "pcie": float(ev["pcie"][0]), "moves": int(ev["moves"][0])}
    return bad, fig


def compare(obj: dict, options: dict, meta: dict, ours: dict, mip: dict, with_brute: bool = True) -> dict:
    """Findings of one draw: rule violations, disagreements with the brute force and between the backends."""
    f: dict = {"violations": [], "disagree": [], "brute": None}
    figs = {}
    for who, out in (("ours", ours), ("mip", mip)):
        bad, fig = check_answer(obj, options, out, who)
        f["violations"] += bad
        figs[who] = fig
    if meta["impossible_slo"] and ours["status"] in ("optimal", "feasible"):
        f["disagree"].append(f"ours: {ours['status']} although chains {meta['impossible_slo']} cannot hold")
    b = brute(obj, options, figs["ours"]["primary"] if figs.get("ours") else None) if with_brute else None
    f["brute"] = b is not None
    if b is not None:
        feasible = b["loose"] < math.inf
        edge = (b["strict"] < math.inf) != feasible or not math.isclose(b["strict"], b["loose"], rel_tol=1e-7)
        for who, out in (("ours", ours), ("mip", mip)):
            st = out["status"]
            if st == "infeasible" and b["strict"] < math.inf:
                f["disagree"].append(f"{who}: infeasible, brute force found {b['strict']}")
            slo_only = st == "infeasible" and b["strict"] == math.inf and m_chains(obj) and b["no_slo"]
            if slo_only and "chain" not in out.get("reason", "") and who == "ours":
                f["disagree"].append(
                    f"ours: infeasible by an SLO, reason names no chain: {out.get('reason')!r}"
                )
            if st in ("optimal", "feasible") and not feasible:
                f["disagree"].append(f"{who}: {st} but brute force finds nothing within the rules")
            if st == "optimal" and feasible and figs[who] and not edge:
                p = figs[who]["primary"]
                lim = b["strict"] * (1 + GAP + 1e-8) + 1e-9 * max(1.0, abs(b["strict"]))
                within = out.get("rounding", {}).get("host_cost_within", 0) or 0
                if p > lim + within:
                    f["disagree"].append(f"{who}: optimal {p!r}, brute force {b['strict']!r}")
            if (
                who == "ours"
                and st == "optimal"
                and out.get("tiebreak") == "proven"
                and b["tie"]
                and not edge
            ):
                mine = (figs[who]["pcie"], figs[who]["moves"])
                pc, mv = b["tie"]
                if mine[0] > pc * (1 + 1e-7) + 1e-9 or (
                    math.isclose(mine[0], pc, rel_tol=1e-7) and mine[1] > mv
                ):
                    f["disagree"].append(f"ours: tiebreak proven at (pcie {mine[0]:.6g}, moves {mine[1]}),"
                                         f" brute force (pcie {pc:.6g}, moves {mv})")  # fmt: skip
        f["brute_opt"] = b["strict"] if b["strict"] < math.inf else None
    # the backends against each other
    so, sm = ours["status"], mip["status"]
    if (so == "infeasible") != (sm == "infeasible") and "unknown" not in (so, sm):
        f["disagree"].append(f"status ours {so}, mip {sm}")
    if so == "optimal" and sm == "optimal" and figs["ours"] and figs["mip"]:
        a, c = figs["ours"]["primary"], figs["mip"]["primary"]
        if abs(a - c) > 2 * GAP * max(1e-9, abs(a), abs(c)) + 1e-12:
            f["disagree"].append(f"proven ours {a!r}, mip {c!r}")
    return f


def m_chains(obj: dict) -> bool:
    return bool(obj.get("chains"))


# ------------------------------------------------------------------ running the solvers


def run_solver(obj: dict, options: dict, solver: str, time_limit: float) -> tuple[dict, float]:
    """One solve: (output, CPU seconds); a refusal is {"status": "refused", "reason"}, a crash "crash"."""
    from placement.model import PlacementInputError, parse_problem
    from placement.solver import solve

    cpu = time.process_time()
    try:
        out = solve(
            parse_problem(obj), solver=solver, time_limit=time_limit, started=time.monotonic(), **options
        )
    except PlacementInputError as e:
        out = {"status": "refused", "reason": str(e)}
    except Exception as e:  # noqa: BLE001 - a crash is a finding
        out = {"status": "crash", "reason": f"{type(e).__name__}: {e}"}
    return out, time.process_time() - cpu


def _sizes(spec: str, draws: int, rng: random.Random) -> list[tuple[int, int | None]]:
    out = []
    for part in spec.split(","):
        n, _, ns = part.partition(":")
        lo, _, hi = n.partition("-")
        out += [(rng.randint(int(lo), int(hi or lo)), int(ns) if ns else None) for _ in range(draws)]
    return out


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.9g}"


def main() -> int:
    from bench.common import final_json, median, print_machine
    from placement.solver import load_backends

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=60, help="draws per --sizes entry")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sizes", default="5-60", help='"5-60,100-500,1000:3,5000" (LO-HI or N, :SNICS)')
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--no-brute", action="store_true")
    args = ap.parse_args()
    print_machine()
    load_backends()
    warm = draw(1, 20, 1)
    for solver in ("cpsat", "mip"):
        run_solver(warm[0], {}, solver, args.time_limit)
    todo = _sizes(args.sizes, args.draws, random.Random(args.seed))
    runs, findings = [], []
    for k, (size, ns) in enumerate(todo):
        seed = args.seed + k
        obj, opts, meta = draw(seed, size, ns)
        ours, c_ours = run_solver(obj, opts, "cpsat", args.time_limit)
        mip, c_mip = run_solver(obj, opts, "mip", args.time_limit)
        run = {"seed": seed, "size": size, "snics_arg": ns, "vertices": len(obj["nodes"]),
               "snics": len(obj["snics"]), "kind": meta["kind"], "opts": opts, "ours": ours["status"],
               "mip": mip["status"], "cpu_ours": round(c_ours, 4), "cpu_mip": round(c_mip, 4),
               "cost_ours": ours.get("host_cost"), "cost_mip": mip.get("host_cost"),
               "host_s_ours": ours.get("host_cost_seconds"), "host_s_mip": mip.get("host_cost_seconds")}  # fmt: skip
        notes = []
        for who, out in (("ours", ours), ("mip", mip)):
            if out["status"] == "crash":
                notes.append(f"{who} crashed: {out['reason']}")
            elif out["status"] == "refused" and meta["expect"] != "refused":
                notes.append(f"{who} refused valid input: {out['reason']}")
        if meta["expect"] == "refused":
            for who, out in (("ours", ours), ("mip", mip)):
                if out["status"] != "refused":
                    notes.append(f"{who}: {out['status']} on {meta['kind']} (must be refused)")
        elif not any(o["status"] in ("crash", "refused") for o in (ours, mip)):
            f = compare(obj, opts, meta, ours, mip, with_brute=not args.no_brute)
            notes += f["violations"] + f["disagree"]
            run["brute"] = f["brute"]
            run["brute_opt"] = f.get("brute_opt")
        slower = c_ours > SLOWER_RATIO * c_mip and c_ours - c_mip > SLOWER_ABS
        target = TARGETS.get((size, run["snics"]))
        miss = []
        if slower:
            miss.append("slower than the MIP")
        if target is not None and c_ours > target:
            miss.append(f"> {target} s")
        if ours["status"] in ("feasible", "unknown") and mip["status"] in ("optimal", "infeasible"):
            miss.append("unproven (the MIP proved it)")
        run["notes"], run["miss"] = notes, miss
        runs.append(run)
        if notes:
            findings.append({"seed": seed, "size": size, "snics": ns, "notes": notes})
        print(f"{seed:>5} n={run['vertices']:<5} snics {run['snics']} {meta['kind']:<12} ours {ours['status']:<10}"
              f" {c_ours:7.3f} s  mip {mip['status']:<10} {c_mip:7.3f} s"
              f"  host cost {_fmt(ours.get('host_cost'))} / {_fmt(mip.get('host_cost'))}"
              f"{'  brute' if run.get('brute') else ''}"
              f"{'  FINDING ' + ' | '.join(notes) if notes else ''}{'  MISS ' + ', '.join(miss) if miss else ''}",
              flush=True)  # fmt: skip
    solved = [r for r in runs if r["ours"] not in ("refused", "crash")]
    figures = {
        "draws": len(runs),
        "findings": findings,
        "disagree": sum(any("brute" in n or "mip" in n or "ours:" in n for n in r["notes"]) for r in runs),
        "violations": sum(any("broken" in n or " but " in n for n in r["notes"]) for r in runs),
        "crashes": sum(any("crash" in n for n in r["notes"]) for r in runs),
        "slower": [
            (r["seed"], r["size"], r["snics_arg"], r["cpu_ours"], r["cpu_mip"])
            for r in runs
            if "slower than the MIP" in r["miss"]
        ],  # fmt: skip
        "missed": [
            (r["seed"], r["size"], r["snics_arg"], r["miss"], r["cpu_ours"], r["cpu_mip"])
            for r in runs
            if r["miss"]
        ],  # fmt: skip
        "brute_checked": sum(bool(r.get("brute")) for r in runs),
        "ours_proven": sum(r["ours"] in ("optimal", "infeasible") for r in solved),
        "mip_proven": sum(r["mip"] in ("optimal", "infeasible") for r in solved),
        "median_cpu_ours": round(median([r["cpu_ours"] for r in solved]), 4),
        "median_cpu_mip": round(median([r["cpu_mip"] for r in solved]), 4),
        "cpu_sum_ours": round(sum(r["cpu_ours"] for r in solved), 3),
        "cpu_sum_mip": round(sum(r["cpu_mip"] for r in solved), 3),
        "time_limit": args.time_limit,
    }
    print(f"{len(findings)} draws with findings of {len(runs)}; brute-checked {figures['brute_checked']}; "
          f"slower than the MIP {len(figures['slower'])}; missed {len(figures['missed'])}")  # fmt: skip
    final_json(figures)
    return 0 if not findings else 1


if __name__ == "__main__":
    sys.exit(main())
