"""Seeded placement instance families for the bench and the property tests (issue 25).

Each family builds an instance of about `n_vertices` vertices out of *services*: a VM reached from an
sNIC port through a small NF graph of one shape, with traffic in both directions. What varies between
families is the shape of those graphs, the capacity/PCIe tightness, the number of sNICs, the traffic
distribution, pins and background PCIe. Every amount is a float as a measurement gives it (profiles
jittered by a few percent, traffic from heavy-tailed draws), never a rounded decimal, so the instances
exercise the inexact-input path of model.rationalize.

    from placement.families import FAMILIES, instance
    obj = instance("mesh", 500, seed=3)            # JSON object, as `uno placement solve` reads it
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, replace

# Base profiles (cores per Gbit/s of load): the shipped profiles' ratios, jittered per NF type and seed.
_TYPES = {
    "dpi": (0.2777777777777778, 0.5555555555555556),
    "l7fw": (0.2777777777777778, 1.1111111111111112),
    "secgw": (0.2777777777777778, 0.20833333333333334),
    "firewall": (0.05, 0.1),
    "nat": (0.05, 0.1),
    "lb": (0.05, 0.1),
    "monitor": (0.03, 0.06),
}
# Per-packet latency (microseconds) per location: an sNIC's slower cores take longer per packet.
_LATENCY = {"dpi": (9.0, 21.0), "l7fw": (6.0, 19.0), "secgw": (4.0, 7.5), "firewall": (1.2, 2.6),
            "nat": (1.0, 2.1), "lb": (0.8, 1.7), "monitor": (0.6, 1.1)}  # fmt: skip


@dataclass(frozen=True)
class Family:
    """How to build one family's instances."""

    shape: str = "chain"  # chain | long | dag | fanio | mesh | mix
    capacity: float = 0.4  # sNIC capacity as a share of what all NFs would need on sNICs
    pcie: float = 1.5  # PCIe budget per link as a multiple of the traffic that must cross anyway
    snics: int = 1
    traffic: str = "uniform"  # uniform | pareto (heavy-tailed)
    pinned: float = 0.0  # share of NFs pinned (half to the host, half to an sNIC)
    background: float = 0.0  # background PCIe per direction as a share of the link
    latency: bool = False  # per-type latencies and a latency_us SLO per chain


FAMILIES: dict[str, Family] = {
    "chains": Family(),
    "chains-loose": Family(capacity=1.2, pcie=4.0),
    "chains-tight": Family(capacity=0.15, pcie=1.05),
    "long": Family(shape="long"),
    "dag": Family(shape="dag"),
    "fanio": Family(shape="fanio"),
    "mesh": Family(shape="mesh"),
    "skewed": Family(traffic="pareto"),
    "pinned": Family(shape="mix", pinned=0.3),
    "background": Family(shape="mix", background=0.3, pcie=1.2),
    "two-snics": Family(snics=2),
    "four-snics": Family(snics=4),
    "latency": Family(shape="mix", latency=True),
}


def family(name: str, **overrides) -> Family:
    """FAMILIES[name] with fields replaced (e.g. snics=3)."""
    if name not in FAMILIES:
        raise KeyError(f"unknown family {name!r}; known: {', '.join(FAMILIES)}")
    return replace(FAMILIES[name], **overrides)


def _graph(shape: str, rng: random.Random) -> tuple[int, list[tuple[int, int, float]]]:
    """An NF graph between an entry (-1) and the VM (-2): (NF count, [(src, dst, traffic share)])."""
    if shape == "mix":
        shape = rng.choice(["chain", "chain", "long", "dag", "fanio", "mesh"])
    if shape in ("chain", "long"):
        k = rng.randint(1, 3) if shape == "chain" else rng.randint(5, 12)
        path = [-1, *range(k), -2]
        return k, [(a, b, 1.0) for a, b in zip(path, path[1:], strict=False)]
    if shape == "fanio":  # a splitter fans out to parallel NFs that fan in to a merger
        k = rng.randint(2, 3)
        w = [rng.random() + 0.2 for _ in range(k)]
        share = [x / sum(w) for x in w]
        edges = [(-1, 0, 1.0)] + [(0, 1 + j, share[j]) for j in range(k)]
        edges += [(1 + j, k + 1, share[j]) for j in range(k)] + [(k + 1, -2, 1.0)]
        return k + 2, edges
    if shape == "dag":  # a random DAG: each NF fed by one or two earlier ones
        k = rng.randint(2, 4)
        edges = [(-1, 0, 1.0)]
        for j in range(1, k):
            for src in sorted(set(rng.sample(range(j), min(j, rng.randint(1, 2))))):
                edges.append((src, j, rng.uniform(0.3, 1.0)))
        edges.append((k - 1, -2, 1.0))
        return k, edges
    if shape == "mesh":  # NFs exchanging traffic with several others (cycles included)
        k = rng.randint(3, 4)
        edges = [(-1, 0, 1.0), (k - 1, -2, 1.0)]
        edges += [(j, j + 1, 1.0) for j in range(k - 1)]
        for _ in range(k):
            a, b = rng.sample(range(k), 2)
            edges.append((a, b, rng.uniform(0.05, 0.5)))
        return k, edges
    raise ValueError(f"unknown shape {shape!r}")


def _traffic(kind: str, rng: random.Random) -> float:
    if kind == "pareto":
        return min(0.05 * rng.paretovariate(1.2), 40.0)  # most flows small, a few elephants
    return rng.uniform(0.2, 4.0)


def build(
    fam: Family,
    n_vertices: int,
    seed: int = 0,
    latency: dict[str, tuple[float, float]] | None = None,
    pcie_us: float | None = None,
) -> dict:
    """An instance of family `fam` with about `n_vertices` vertices (JSON object of docs/placement.md).
    With `fam.latency`: `latency` (NF type -> measured (host, nic) us) replaces the placeholder latencies of
    the types it names, as measured (not jittered), and `pcie_us` every sNIC's crossing latency; the random
    draws are the same either way, so one seed gives the same graph and traffic."""
    rng = random.Random(seed)
    types = list(_TYPES)
    jitter = {t: (rng.uniform(0.93, 1.07), rng.uniform(0.93, 1.07)) for t in types}
    nodes: list[dict] = []
    edges: list[dict] = []
    chains: list[dict] = []
    ports = [f"p{s}_{j}" for s in range(fam.snics) for j in range(2)]
    nodes += [{"id": p, "kind": "port", "pinned": f"snic{p[1:].split('_')[0]}"} for p in ports]
    must_cross = [0.0] * fam.snics
    nf = vm = 0
    while len(nodes) < n_vertices:
        vid = f"vm{vm}"
        vm += 1
        nodes.append({"id": vid, "kind": "vm"})
        for _ in range(rng.randint(1, 2)):
            port = rng.choice(ports)
            gbps = _traffic(fam.traffic, rng)
            must_cross[int(port[1:].split("_")[0])] += gbps
            k, graph = _graph(fam.shape, rng)
            ids = [f"nf{nf + j}" for j in range(k)]
            nf += k
            for nid in ids:
                t = rng.choice(types)
                rh, rn = _TYPES[t]
                node = {"id": nid, "kind": "nf", "type": t,
                        "r_host": rh * jitter[t][0], "r_nic": rn * jitter[t][1]}  # fmt: skip
                if fam.pinned and rng.random() < fam.pinned:
                    node["pinned"] = "host" if rng.random() < 0.5 else f"snic{rng.randrange(fam.snics)}"
                if fam.latency:
                    lh, ln = _LATENCY[t]
                    node["latency_us"] = {"host": lh * jitter[t][0], "nic": ln * jitter[t][1]}
                    if latency and t in latency:
                        node["latency_us"] = {"host": latency[t][0], "nic": latency[t][1]}
                nodes.append(node)
            name = {-1: port, -2: vid}
            for a, b, share in graph:
                src, dst = name.get(a) or ids[a], name.get(b) or ids[b]
                edges.append({"src": src, "dst": dst, "gbps": gbps * share})
                edges.append({"src": dst, "dst": src, "gbps": gbps * share * rng.uniform(0.05, 0.15)})
            if fam.latency:
                path = [port] + [ids[j] for j in _longest_path(k, graph)] + [vid]
                chains.append({"id": f"c{len(chains)}", "vertices": path, "latency_us": 0.0})
    load = {n["id"]: 0.0 for n in nodes}
    for e in edges:
        load[e["src"]] += e["gbps"]
        load[e["dst"]] += e["gbps"]
    need = sum(n["r_nic"] * load[n["id"]] for n in nodes if n["kind"] == "nf")
    snics = []
    for s in range(fam.snics):
        link = fam.pcie * must_cross[s] + 1.0
        snic = {"id": f"snic{s}", "capacity": fam.capacity * need / fam.snics, "pcie_gbps": link}
        if fam.background:
            snic["background_gbps"] = {"up": fam.background * link * 0.5, "down": fam.background * link}
            snic["pcie_gbps"] = link * (1 + fam.background)
        snics.append(snic)
    out: dict = {"nodes": nodes, "edges": edges, "snics": snics}
    if fam.latency:
        _set_latency(out, chains, rng, pcie_us=pcie_us)
    for n in nodes:
        n.pop("type", None)
    return out


def _longest_path(k: int, graph: list[tuple[int, int, float]]) -> list[int]:
    """NFs on one entry-to-VM path of the service graph (the first successor each step)."""
    succ: dict[int, list[int]] = {}
    for a, b, _ in graph:
        succ.setdefault(a, []).append(b)
    path, cur, seen = [], -1, set()
    while cur != -2 and cur not in seen:
        seen.add(cur)
        nxt = [b for b in succ.get(cur, []) if b not in seen]
        cur = max(nxt) if nxt else -2  # the largest index reaches the VM first in every shape here
        if cur >= 0:
            path.append(cur)
    return path


def _set_latency(
    obj: dict,
    chains: list[dict],
    rng: random.Random,
    slack: float | None = None,
    pcie_us: float | dict[str, float] | None = None,
) -> None:
    """Latency data: a PCIe crossing latency per sNIC (`pcie_us`: one for all or per sNIC id, else a
    placeholder draw), and each chain's SLO between its all-host latency (always met) and its all-sNIC one,
    at `slack` (default: random per chain) of the way."""
    for s in obj["snics"]:
        drawn = rng.uniform(1.5, 3.0)
        given = pcie_us.get(s["id"]) if isinstance(pcie_us, dict) else pcie_us
        s["pcie_latency_us"] = drawn if given is None else given
    cross = {s["id"]: s["pcie_latency_us"] for s in obj["snics"]}
    lat = {n["id"]: n.get("latency_us") for n in obj["nodes"]}
    pin = {n["id"]: n.get("pinned") for n in obj["nodes"]}
    for c in chains:
        nfs = [lat[v] for v in c["vertices"] if lat[v]]
        host = sum(x["host"] for x in nfs) + cross[pin[c["vertices"][0]]]
        extra = sum(max(x["nic"] - x["host"], 0.0) for x in nfs)
        frac = slack if slack is not None else rng.uniform(0.1, 0.9)
        c["latency_us"] = host + frac * extra + 1e-6
    obj["chains"] = chains


def set_slo(obj: dict, slack: float) -> dict:
    """A copy of a latency-family instance with every chain's SLO at `slack` of the way from its
    all-host latency (0) to its all-sNIC one (1)."""
    out = {**obj, "snics": [dict(s) for s in obj["snics"]]}
    chains = [{k: v for k, v in c.items() if k != "latency_us"} for c in obj["chains"]]
    rng = random.Random(0)
    # the SLOs are computed with the instance's own crossing latencies (not fresh draws)
    _set_latency(out, chains, rng, slack, pcie_us={s["id"]: s["pcie_latency_us"] for s in obj["snics"]})
    return out


def instance(name: str, n_vertices: int, seed: int = 0, **overrides) -> dict:
    """An instance of family `name` (FAMILIES), fields overridden (e.g. snics=3)."""
    return build(family(name, **overrides), n_vertices, seed)


GENERATORS: dict[str, Callable[[int, int], dict]] = {
    name: (lambda n, seed, _f=fam: build(_f, n, seed)) for name, fam in FAMILIES.items()
}


def long_chains(lengths: list[int], snics: int, seed: int) -> dict:
    """An instance of chains port -> NFs -> VM of the given lengths (groups far above 4,096
    configurations: decompose.py builds them member by member), sNIC capacity and PCIe about 40% of what
    everything on the sNICs would need (so that both bind)."""
    rng = random.Random(seed)
    nodes, edges, nic_need, traffic = [], [], 0.0, 0.0
    for c, k in enumerate(lengths):
        chain = [f"p{c}"] + [f"c{c}f{j}" for j in range(k)] + [f"v{c}"]
        nodes += [{"id": f"p{c}", "kind": "port", "pinned": "snic0"}, {"id": f"v{c}", "kind": "vm"}]
        for j in range(k):
            r_nic = round(rng.uniform(0.5, 3.0), 2)
            nic_need += r_nic
            nodes.append({"id": f"c{c}f{j}", "kind": "nf", "r_host": round(rng.uniform(0.5, 2.0), 2),
                          "r_nic": r_nic})  # fmt: skip
        for a, b in itertools.pairwise(chain):
            g = round(rng.uniform(0.2, 4.0), 2)
            traffic += g
            edges.append({"src": a, "dst": b, "gbps": g})
    share = 0.4 / snics
    snic_list = [{"id": f"snic{s}", "capacity": round(nic_need * share, 2), "pcie_gbps": round(traffic * share, 2)}
                 for s in range(snics)]  # fmt: skip
    return {"nodes": nodes, "edges": edges, "snics": snic_list, "pcie_model": "duplex"}
