"""Seeded instance generator resembling the UNO paper's placement graph (Fig. 15).

Each VM is served by chains: sNIC Ethernet port -> NF -> ... -> NF -> VM, with the reverse direction
carrying a fraction of the traffic. NF types and their profiles come from profiles.json.
"""

from __future__ import annotations

import random

from placement.profiles import load_profiles, node_costs


def chains_instance(
    n_vertices: int,
    seed: int = 0,
    snics: int = 1,
    capacity: float | None = None,
    pcie_gbps: float | None = None,
    chain_len: tuple[int, int] = (1, 3),
    types: tuple[str, ...] = ("dpi", "l7fw", "secgw"),
) -> dict:
    """About `n_vertices` vertices in chains.

    Defaults: capacity ~40 % of what all NFs would need on the sNIC; PCIe budget 1.5x the traffic that must
    cross anyway (every chain runs from an sNIC port to a VM on the host).
    """
    rng = random.Random(seed)
    prof = load_profiles()
    nodes, edges = [], []
    ports = [f"p{s}_{j}" for s in range(snics) for j in range(2)]
    for pid in ports:
        nodes.append({"id": pid, "kind": "port", "pinned": f"snic{pid[1:].split('_')[0]}"})
    vm = nf = 0
    must_cross = 0.0
    while len(nodes) < n_vertices:
        vid = f"vm{vm}"
        vm += 1
        nodes.append({"id": vid, "kind": "vm"})
        for _ in range(rng.randint(1, 2)):
            gbps = round(rng.uniform(0.2, 4.0), 1)
            must_cross += gbps
            prev = rng.choice(ports)
            for _ in range(rng.randint(*chain_len)):
                t = rng.choice(types)
                nid = f"nf{nf}"
                nf += 1
                nodes.append({"id": nid, "kind": "nf", **node_costs(prof[t])})
                edges.append({"src": prev, "dst": nid, "gbps": gbps})
                edges.append({"src": nid, "dst": prev, "gbps": round(gbps / 10, 2)})
                prev = nid
            edges.append({"src": prev, "dst": vid, "gbps": gbps})
            edges.append({"src": vid, "dst": prev, "gbps": round(gbps / 10, 2)})
    if capacity is None:
        need = 0.0
        load = {n["id"]: 0.0 for n in nodes}
        for e in edges:
            load[e["src"]] += e["gbps"]
            load[e["dst"]] += e["gbps"]
        for n in nodes:
            if n["kind"] == "nf":
                need += n.get("b_nic", 0) + n["r_nic"] * load[n["id"]]
        capacity = round(0.4 * need / snics, 1)
    if pcie_gbps is None:
        pcie_gbps = round(1.5 * must_cross / snics, 1)
    return {
        "nodes": nodes,
        "edges": edges,
        "snics": [{"id": f"snic{s}", "capacity": capacity, "pcie_gbps": pcie_gbps} for s in range(snics)],
    }
