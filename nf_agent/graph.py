"""The placement graph of docs/placement.md, built from the agent's state and a traffic matrix (pure).

Vertices: every NF, every VM the agent knows (on `host`) and every sNIC Ethernet port (`snicK-ethJ`, pinned
to its sNIC). Each NF sits in a chain `src -> nf -> dst` (its `expected.src/dst`, default: the first Ethernet
port of the first sNIC, i.e. the wire), giving the edges (src, nf) and (nf, dst). A serial chain of NFs is
declared by naming each NF's neighbours (`chain_links`, PATCH /v1/nfs/ID once they all exist): then the
edge between two NFs is one edge, named by both. An edge's Gbit/s is the measured rate when the monitor has
one, else the NF's expected rate.

A scaled-out NF whose instances run at m >= 2 locations is m vertices `ID@LOC` (a `split vertex`), each
pinned at LOC with the instances running there, so each location is charged its own base cost, load and
PCIe crossings. '@' is not allowed in an NF or VM id (model.NAME_RE), so a split vertex never collides with
one. The NF's traffic is divided among its locations by `Split`: the measured per-location rates of its
instances' ports when the monitor has them (a measurement), else in proportion to the instance counts (a
model of OneSwitch's SELECT group: one bucket of equal weight per instance, flows hashed evenly over them;
not a measured split, and a few large flows can be far from it). An edge between two split NFs: OVS hashes
a flow alike (same function, basis 0) at every select group (oneswitch/README.md, scale-out), so when both
have the same number of instances and neither rewrites the flow's addresses or ports (`KEEPS_FLOW`), a flow
in bucket i of the first is in bucket i of the second: instance i sends to instance i (measured: both NFs'
per-location rates were identical, tests/agent/test_scaleout_pcie.py). Otherwise the edge is divided by the
product of both shares, as if each vport hashed flows independently (a model, not measured).
An NF at one location (however many instances) stays one vertex with its id, as before. Re-placement never
moves a scaled-out NF; the split vertices are there so the OTHER NFs are placed against the right load.
"""

from __future__ import annotations

from dataclasses import dataclass

from domain.errors import ValidationError
from domain.model import HOST, Nf
from placement.profiles import node_costs

GBPS_DECIMALS = 4  # 0.1 Mbit/s: keeps the solver's exact integer scaling small


@dataclass(frozen=True)
class SnicInfo:
    id: str
    capacity: float
    pcie_gbps: float
    eth_ports: int
    max_rules: int | None = None  # rules its switch holds for offloaded tables; None: unlimited
    pcie_latency_us: float = 0.0  # what one crossing of its PCIe link adds per packet (measured profile)


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


SPLIT_SEP = "@"  # not allowed in an NF or VM id (model.NAME_RE): a split vertex cannot collide with one


def split_vertex(nf_id: str, location: str) -> str:
    """The vertex of the instances of a split NF at `location`."""
    return f"{nf_id}{SPLIT_SEP}{location}"


def vertex_nf(vertex: str) -> str:
    """The NF (or VM, port) id a vertex stands for: a split vertex's NF, any other vertex itself."""
    return vertex.split(SPLIT_SEP, 1)[0]


def instance_counts(nf: Nf) -> dict[str, int]:
    """location -> the NF's instances there, in the order of its instances (the first is nf.location)."""
    out: dict[str, int] = {}
    for inst in nf.instances:
        out[inst.location] = out.get(inst.location, 0) + 1
    return out


# NF types that forward a flow with its addresses and ports unchanged (they pass or drop), so the next
# select group hashes it as the previous one did; NAT and LB rewrite them, IPsec encapsulates.
KEEPS_FLOW = frozenset({"firewall", "monitor", "ips", "l7fw"})


@dataclass(frozen=True)
class Split:
    """How the traffic of an NF running at several locations divides among them (location -> share, sum 1)."""

    instances: dict[str, int]  # location -> instances there
    into: dict[str, float]  # shares of the traffic into the NF (its edges src -> nf)
    out: dict[str, float]  # shares of the traffic out of it (its edges nf -> dst)
    measured: tuple[str, ...]  # the directions ("in", "out") whose shares are measured, not proportional
    buckets: tuple[str, ...] = ()  # the location of each instance, in the order of its select group's buckets
    keeps_flow: bool = False  # the NF forwards a flow with its 5-tuple unchanged (KEEPS_FLOW)

    def to_json(self) -> dict:
        return {
            loc: {"instances": k, "share_in": round(self.into[loc], 4), "share_out": round(self.out[loc], 4)}
            for loc, k in self.instances.items()
        }


def nf_split(nf: Nf, measured: dict[str, dict[str, float]] | None = None) -> Split | None:
    """The split of `nf` over its instances' locations; None when they are all at one location.

    `measured`: location -> {"in": Gbit/s, "out": Gbit/s} of the NF's instance ports there (the monitor's
    `nf_split`). A direction's measured shares are used when the monitor saw exactly the NF's current
    locations and some traffic that way; else the shares are proportional to the instance counts (the SELECT
    group's equal buckets: flows hashed evenly, a model, not a measurement).
    """
    counts = instance_counts(nf)
    if len(counts) < 2:
        return None
    total = sum(counts.values())
    even = {loc: k / total for loc, k in counts.items()}
    usable = measured is not None and set(measured) == set(counts)
    shares: dict[str, dict[str, float]] = {}
    for direction in ("in", "out"):
        rates = {loc: measured[loc].get(direction, 0.0) for loc in counts} if usable else {}
        whole = sum(rates.values())
        if whole > 0:
            shares[direction] = {loc: r / whole for loc, r in rates.items()}
    buckets = tuple(i.location for i in nf.instances)
    return Split(
        counts, shares.get("in", even), shares.get("out", even), tuple(shares), buckets, nf.type in KEEPS_FLOW
    )


def _ends(vertex: str, splits: dict[str, Split], side: str) -> dict[str, float]:
    """The vertices `vertex` stands for on one side of an edge, with their shares of its traffic."""
    sp = splits.get(vertex)
    if sp is None:
        return {vertex: 1.0}
    return {split_vertex(vertex, loc): x for loc, x in (sp.out if side == "src" else sp.into).items()}


def divide_edge(src: str, dst: str, gbps: float, splits: dict[str, Split]) -> dict[tuple[str, str], float]:
    """Edge src -> dst over the split vertices; an edge between unsplit vertices is itself.

    Two split NFs whose select groups pick the same bucket for a flow (`aligned`): bucket i of src sends to
    bucket i of dst, each bucket carrying its location's share over the instances there. Else from each share
    of src to each share of dst, the product of the two (flows hashed independently at each vport).
    """
    a, b = splits.get(src), splits.get(dst)
    if a is not None and b is not None and aligned(a, b):
        out: dict[tuple[str, str], float] = {}
        for la, lb in zip(a.buckets, b.buckets, strict=True):
            e = (split_vertex(src, la), split_vertex(dst, lb))
            out[e] = out.get(e, 0.0) + gbps * a.out[la] / a.instances[la]
        return out
    return {
        (u, v): gbps * x * y
        for u, x in _ends(src, splits, "src").items()
        for v, y in _ends(dst, splits, "dst").items()
    }


def aligned(a: Split, b: Split) -> bool:
    """Whether a flow takes bucket i at both NFs' select groups: the same bucket count (OVS's equal-weight
    tables are then alike) and a 5-tuple neither NF rewrites, so both groups hash the same fields (OVS's
    hash, basis 0, on every switch: the default symmetric one, forward and back alike; the opt-in 5-tuple
    one per direction)."""
    return len(a.buckets) == len(b.buckets) and a.keeps_flow and b.keeps_flow


def nf_nodes(nf: Nf, prof: dict[str, float], split: Split | None, fixed: bool) -> list[dict]:
    """The vertices of `nf`: one with its id (pinned where it runs when `fixed`), or one per location of a
    split, pinned there with the instances there."""

    def node(vid: str, instances: int, pinned: str | None, location: str | None) -> dict:
        return {
            "id": vid,
            "kind": "nf",
            **node_costs(prof),
            **({"instances": instances} if instances > 1 else {}),
            "pinned": pinned,
            "location": location,
        }

    if split is None:
        pinned = nf.location if fixed and nf.location else nf.pin
        return [node(nf.id, len(nf.instances), pinned, nf.location or nf.prefer)]
    return [node(split_vertex(nf.id, loc), k, loc, loc) for loc, k in split.instances.items()]


def build_problem(
    snics: list[SnicInfo],
    vm_ids: list[str],
    nfs: list[Nf],
    profiles: dict[str, dict[str, float]],
    measured: dict[tuple[str, str], float] | None = None,
    fixed: set[str] = frozenset(),
    pcie_model: str = "duplex",
    measured_split: dict[str, dict[str, dict[str, float]]] | None = None,
    background: dict[str, dict[str, float]] | None = None,
    tables: list[dict] | None = None,
    every_chain: bool = False,
    table_edges: list[dict] | None = None,
) -> dict:
    """The JSON placement instance (placement.parse_problem input).

    `measured`: (src, dst) -> Gbit/s from the monitor (overrides an NF's expected rate on that edge; NF ids,
    not split vertices). `measured_split`: nf id -> location -> {"in", "out"} Gbit/s of its instances' ports
    there (the monitor's), dividing a split NF's edges (`nf_split`).
    `fixed`: NFs that must stay where they are (pinned to their location), e.g. while placing a new one.
    An NF's `location` (or, for a new NF, its `prefer` hint) is its current location, so the solver's
    tie-break prefers not to move it. `background`: sNIC -> {"up", "down"} Gbit/s on its PCIe link that no
    edge accounts for (agent/background.py), the sNIC's `background_gbps`; without it the link is all theirs.
    `tables`: OneSwitch's virtual tables as vertices (nf_agent/tables.py `table_nodes`); an sNIC's
    `max_rules` is its budget of their rules; `table_edges` their pipeline (nf_agent/tables.py
    `pipeline_edges`). `every_chain`: `chains` lists every serial chain, also those without an SLO (for
    their predicted latency), instead of only those with one.
    """
    measured = measured or {}
    measured_split = measured_split or {}
    default = default_endpoint(snics)
    nodes: list[dict] = [{"id": v, "kind": "vm", "pinned": HOST} for v in vm_ids]
    nodes += [
        {"id": eth_vertex(s.id, j), "kind": "port", "pinned": s.id} for s in snics for j in range(s.eth_ports)
    ]
    known = {n["id"] for n in nodes} | {nf.id for nf in nfs}
    splits = {nf.id: sp for nf in nfs if (sp := nf_split(nf, measured_split.get(nf.id))) is not None}
    chain: dict[tuple[str, str], float] = {}
    for nf in nfs:
        nodes += nf_nodes(nf, profiles.get(nf.type, {}), splits.get(nf.id), nf.id in fixed)
        for e in nf_edges(nf, default):
            if e[0] not in known or e[1] not in known:
                continue  # a neighbour that was deleted: its traffic no longer counts
            gbps = measured.get(e, nf.expected_gbps)
            chain[e] = max(chain.get(e, 0.0), round(gbps, GBPS_DECIMALS))
    edges = {
        e: round(g, GBPS_DECIMALS)
        for (s, d), gbps in chain.items()
        for e, g in divide_edge(s, d, gbps, splits).items()
    }
    slos = (serial_chains if every_chain else chain_slos)(nfs, default, known, set(splits))
    return {
        "nodes": nodes + list(tables or []),
        "edges": [{"src": s, "dst": d, "gbps": g} for (s, d), g in sorted(edges.items())]
        + list(table_edges or []),
        **({"chains": slos} if slos else {}),
        "snics": [
            {"id": s.id, "capacity": s.capacity, "pcie_gbps": s.pcie_gbps}
            | ({"background_gbps": background[s.id]} if background and s.id in background else {})
            | ({"max_rules": s.max_rules} if s.max_rules is not None else {})
            | ({"pcie_latency_us": s.pcie_latency_us} if s.pcie_latency_us else {})
            for s in snics
        ],
        "pcie_model": pcie_model,
    }


def serial_chains(nfs: list[Nf], default: str | None, known: set[str], split: set[str]) -> list[dict]:
    """Every serial chain of NFs (linked by their src/dst): its vertices first to last and its latency SLO,
    the smallest `latency_us` its NFs give (None: none gives one). A chain through a split NF (one vertex per
    location) is left out: its path is not one vertex list."""
    by_id = {nf.id: nf for nf in nfs}
    out, seen = [], set()
    for nf in nfs:
        if nf.id in seen:
            continue
        first = nf
        while (p := by_id.get(first.src or "")) is not None and p.dst == first.id and p.id != nf.id:
            first = p
        path, cur, slo = [first.src or default], first, None
        while cur is not None and cur.id not in path:
            path.append(cur.id)
            seen.add(cur.id)
            if cur.latency_us is not None:
                slo = cur.latency_us if slo is None else min(slo, cur.latency_us)
            nxt = by_id.get(cur.dst or "")
            if nxt is None or nxt.src != cur.id:
                path.append(cur.dst or default)
                break
            cur = nxt
        if any(v is None or v not in known for v in path) or split & set(path):
            continue
        out.append({"id": f"chain-{path[1]}", "vertices": path, "latency_us": slo})
    return out


def chain_slos(nfs: list[Nf], default: str | None, known: set[str], split: set[str]) -> list[dict]:
    """The placement instance's `chains`: the serial chains (`serial_chains`) that carry a latency SLO."""
    return [c for c in serial_chains(nfs, default, known, split) if c["latency_us"] is not None]
