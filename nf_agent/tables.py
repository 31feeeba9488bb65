"""Switching offload (UNO section 3.4, issue 27), the agent's pure part: OneSwitch's virtual tables as
vertices of the placement instance, and where each table runs and why it stays on the host.

A table is a vertex of kind `table` (docs/placement.md): its host cost is the host switch's CPU through it
(profile type `table`: cores per Gbit/s of load, like an NF's r_host, measured by `./uno bench offload`),
its sNIC cost its units there, its `rules` count against the sNIC's `max_rules`. Its traffic is every
packet between the wire and the VMs: the sNIC links' measured Gbit/s, which run through the tables in
pipeline order (table number order: a goto only goes forward), so the tables are a chain of edges from
each sNIC's Ethernet port to the VMs (its `up`) and back (its `down`): a packet crosses PCIe wherever two
neighbours in the pipeline run on different switches (OneSwitch hands it to where the next table runs),
so host / sNIC / host costs three crossings where all on one side costs one. Without a VM to end the
chain, each table has `through_gbps` instead (its load, no PCIe). An operator's pin wins over everything. OneSwitch's own word per sNIC (`offload`: null or why it
cannot take the table now) is shown, not modelled: it counts the copies that tables running `everywhere`
keep on the sNIC, which the placement's own moves free; a move OneSwitch refuses keeps the table where it
was, with that reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise
from typing import Protocol

from domain.model import HOST
from placement.explain import MOVES, why_on_host
from placement.model import Problem
from placement.profiles import node_costs

TABLE_PROFILE = "table"  # the profile type of a virtual switch table
EVERYWHERE = "everywhere"  # OneSwitch's location of a table copied to every switch (run at ingress)
PINNED = "pinned"
REFUSED = "refused by OneSwitch"
PENDING = "pending"


class TableSwitch(Protocol):
    """OneSwitch's tables (host_datapath.oneswitch_client.OneSwitchClient): `tables()` lists
    `TableState`s (TablesUnsupported on an older OneSwitch); `move_table` moves one make-before-break
    (TableRefused with OneSwitch's reason when it will not; nothing changed then)."""

    def tables(self) -> list: ...
    def move_table(
        self, table: int, location: str, drain_ms: int | None = None, host_min_priority: int | None = None
    ): ...


def table_vertex(table: int) -> str:
    """The placement vertex id of virtual table `table`."""
    return f"table{table}"


def table_of(vertex: str) -> int | None:
    """The table number of a table vertex id, else None."""
    if vertex.startswith("table") and vertex[5:].isdigit():
        return int(vertex[5:])
    return None


def model_location(location: str) -> str | None:
    """A OneSwitch table location as a placement location ("everywhere" is none of the model's: new)."""
    return None if location == EVERYWHERE else location


def through_gbps(pcie: Mapping[str, Mapping[str, float]] | None) -> float:
    """Gbit/s through the pipeline: the sNIC links' measured up + down (0 before a measurement)."""
    return round(sum(d.get("up", 0.0) + d.get("down", 0.0) for d in (pcie or {}).values()), 4)


def pipeline_edges(
    tables: list,
    pcie: Mapping[str, Mapping[str, float]] | None,
    wire: Mapping[str, str],
    host_end: str | None,
) -> list[dict]:
    """The edges of the virtual pipeline (`tables`: TableState-like, any order): per sNIC in `wire` (sNIC ->
    its Ethernet port vertex), its measured `up` Gbit/s from the port through every table in table order to
    `host_end` (a VM vertex), and its `down` from `host_end` through the tables to the port; the same edge
    from several sNICs is one, their Gbit/s summed. [] without tables, traffic or a host end."""
    order = [table_vertex(t.table) for t in sorted(tables, key=lambda t: t.table)]
    if not order or host_end is None:
        return []
    chain: dict[tuple[str, str], float] = {}
    for snic, port in wire.items():
        link = (pcie or {}).get(snic, {})
        for path, gbps in (([port, *order, host_end], link.get("up", 0.0)),
                           ([host_end, *order, port], link.get("down", 0.0))):  # fmt: skip
            if gbps <= 0:
                continue
            for e in pairwise(path):
                chain[e] = chain.get(e, 0.0) + gbps
    return [{"src": a, "dst": b, "gbps": round(g, 4)} for (a, b), g in sorted(chain.items())]


def refusal(offload: Mapping[str, str | None], snics: list[str]) -> str | None:
    """OneSwitch's reason when it can offload the table to none of `snics` (their reasons joined), else None."""
    reasons = [f"{s}: {offload[s]}" for s in snics if offload.get(s)]
    return "; ".join(reasons) if snics and len(reasons) == len(snics) else None


def table_nodes(
    tables: list,
    profile: Mapping[str, float],
    gbps: float,
    snics: list[str],
    pins: Mapping[int, str],
    fixed: bool = False,
) -> list[dict]:
    """The vertices of OneSwitch's `tables` (TableState-like: table, location, rules, offload). `pins`:
    table -> location an operator pinned it to. `fixed`: every table pinned where it runs (an NF
    re-placement sees the sNIC capacity and rules the offloaded tables take, and moves none of them)."""
    out = []
    for t in tables:
        loc = model_location(t.location)
        pinned = (loc or HOST) if fixed else pins.get(t.table)
        if pinned is not None and pinned != HOST and pinned not in snics:
            pinned = HOST  # its sNIC is down or gone: the host runs it meanwhile
        node = {"id": table_vertex(t.table), "kind": "table", **node_costs(profile)}
        # fixed: its rules are where they are; counting them could only make the NFs' instance infeasible
        node |= {} if fixed else {"rules": t.rules}
        node |= {"through_gbps": gbps} if gbps else {}
        node |= {"pinned": pinned} if pinned else {}
        node |= {"location": loc} if loc in (HOST, *snics) else {}
        out.append(node)
    return out


def why(
    problem: Problem, placement: dict[str, str], table, pins: Mapping[int, str], refused: Mapping[int, str]
) -> dict | None:
    """Why `table` (a TableState) runs on the host ({"reason", "detail"}), or None when it does not. The
    operator's pin first, then OneSwitch's refusal (reported per sNIC, or of the agent's last move), then
    the budget the placement model names (placement/explain.py: memory, capacity, pcie, latency, no gain);
    a move that breaks nothing and saves host CPU is `pending` (the next placement run makes it)."""
    if table.location != HOST:
        return None
    if table.table in pins:
        return {"reason": PINNED, "detail": f"pinned to {pins[table.table]}"}
    snics = [s.id for s in problem.snics]
    reason = refusal(table.offload, snics) or refused.get(table.table)
    if reason:
        return {"reason": REFUSED, "detail": reason}
    w = why_on_host(problem, placement, table_vertex(table.table))
    if w["reason"] == MOVES:
        return {
            "reason": PENDING,
            "detail": "no budget keeps it on the host: the next placement run moves it",
        }
    return w


def split_view(table) -> dict | None:
    """A split table's two sides (OneSwitch's `host_min_priority` P): {"host_min_priority": P, "rules": {"host":
    the host's physical rules of it (its rules of priority >= P), SNIC: the sNIC's (the whole table: a split
    keeps every rule on the sNIC, the high part on the host besides)}}; None for a table not split."""
    p = table.host_min_priority
    if p is None:
        return None
    phys = dict(table.physical)
    return {
        "host_min_priority": p,
        "rules": {HOST: phys.get(HOST, 0), table.location: phys.get(table.location, 0)},
    }


def table_row(table, pin: str | None, why_: dict | None, planned: str | None) -> dict:
    """The REST view of one table (GET /v1/tables)."""
    return {
        "table": table.table,
        "location": table.location,
        "rules": table.rules,
        "split": split_view(table),
        "physical": dict(table.physical),
        "offload": dict(table.offload),
        "pin": pin,
        "why": why_,
        "planned": planned,
    }
