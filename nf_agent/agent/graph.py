"""The placement graph of DESIGN.md section 3, built from the agent's state and a traffic matrix (pure).

Vertices: every NF, every VM the agent knows (on `host`) and every sNIC Ethernet port (`snicK-ethJ`, pinned
to its sNIC). Each NF sits in a chain `src -> nf -> dst` (its `expected.src/dst`, default: the first Ethernet
port of the first sNIC, i.e. the wire), giving the edges (src, nf) and (nf, dst). A serial chain of NFs is
declared by naming each NF's neighbours (`chain_links`, PATCH /v1/nfs/ID once they all exist): then the
edge between two NFs is one edge, named by both. An edge's Gbit/s is the measured rate when the monitor has
one, else the NF's expected rate.
"""

from __future__ import annotations

from dataclasses import dataclass

from nf_agent.agent.model import HOST, Nf, ValidationError
from placement.profiles import node_costs

GBPS_DECIMALS = 4  # 0.1 Mbit/s: keeps the solver's exact integer scaling small


@dataclass(frozen=True)
class SnicInfo:
    id: str
    capacity: float
    pcie_gbps: float
    eth_ports: int


def eth_vertex(snic: str, j: int) -> str:
    return f"{snic}-eth{j}"


def vertices(snics: list[SnicInfo], vm_ids: list[str], nf_ids: list[str]) -> dict[str, str]:
    """vertex id -> kind ("vm" | "port" | "nf")."""
    out = {v: "vm" for v in vm_ids}
    out.update({eth_vertex(s.id, j): "port" for s in snics for j in range(s.eth_ports)})
    out.update({n: "nf" for n in nf_ids})
    return out


def default_endpoint(snics: list[SnicInfo]) -> str | None:
    for s in snics:
        if s.eth_ports:
            return eth_vertex(s.id, 0)
    return None


def check_chain(nf_id: str, src: str | None, dst: str | None, known: dict[str, str]) -> None:
    """Raise ValidationError when the chain names an unknown vertex or the NF itself."""
    for fld, v in (("expected.src", src), ("expected.dst", dst)):
        if v is None:
            continue
        if v == nf_id:
            raise ValidationError(fld, "an NF cannot send to itself")
        if v not in known:
            raise ValidationError(fld, f"unknown vertex {v!r} (a VM id, an NF id or snicK-ethJ)")


def chain_links(path: list[str]) -> list[tuple[str, str, str]]:
    """(nf, src, dst) for every NF of the serial chain `path` = [first vertex, NF, ..., NF, last vertex], in
    the direction of its traffic: the `expected.src/dst` each NF must declare for the graph to hold this one
    chain (and not one chain per NF, each from and to the default vertex)."""
    if len(path) < 3:
        raise ValueError(f"a chain needs two end vertices and at least one NF, got {path!r}")
    return [(path[i], path[i - 1], path[i + 1]) for i in range(1, len(path) - 1)]


def nf_edges(nf: Nf, default: str | None) -> list[tuple[str, str]]:
    src, dst = nf.src or default, nf.dst or default
    return [e for e in ((src, nf.id), (nf.id, dst)) if e[0] is not None and e[1] is not None]


def build_problem(
    snics: list[SnicInfo],
    vm_ids: list[str],
    nfs: list[Nf],
    profiles: dict[str, dict[str, float]],
    measured: dict[tuple[str, str], float] | None = None,
    fixed: set[str] = frozenset(),
    pcie_model: str = "duplex",
) -> dict:
    """The JSON placement instance (placement.parse_problem input).

    `measured`: (src, dst) -> Gbit/s from the monitor (overrides an NF's expected rate on that edge).
    `fixed`: NFs that must stay where they are (pinned to their location), e.g. while placing a new one.
    An NF's `location` (or, for a new NF, its `prefer` hint) is its current location, so the solver's
    tie-break prefers not to move it.
    """
    measured = measured or {}
    default = default_endpoint(snics)
    nodes: list[dict] = [{"id": v, "kind": "vm", "pinned": HOST} for v in vm_ids]
    nodes += [
        {"id": eth_vertex(s.id, j), "kind": "port", "pinned": s.id} for s in snics for j in range(s.eth_ports)
    ]
    known = {n["id"] for n in nodes} | {nf.id for nf in nfs}
    edges: dict[tuple[str, str], float] = {}
    for nf in nfs:
        prof = profiles.get(nf.type, {})
        pinned = nf.pin
        if nf.id in fixed and nf.location:
            pinned = nf.location
        nodes.append(
            {
                "id": nf.id,
                "kind": "nf",
                **node_costs(prof),
                **({"instances": len(nf.instances)} if len(nf.instances) > 1 else {}),
                "pinned": pinned,
                "location": nf.location or nf.prefer,
            }
        )
        for e in nf_edges(nf, default):
            if e[0] not in known or e[1] not in known:
                continue  # a neighbour that was deleted: its traffic no longer counts
            gbps = measured.get(e, nf.expected_gbps)
            edges[e] = max(edges.get(e, 0.0), round(gbps, GBPS_DECIMALS))
    return {
        "nodes": nodes,
        "edges": [{"src": s, "dst": d, "gbps": g} for (s, d), g in sorted(edges.items())],
        "snics": [{"id": s.id, "capacity": s.capacity, "pcie_gbps": s.pcie_gbps} for s in snics],
        "pcie_model": pcie_model,
    }
