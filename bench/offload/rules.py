"""The offload benchmark's rule set and its figures (pure).

N filtering rules in two filter tables (rule i in table i % 2: "A" = table 0, "B" = table 1), each rule
matching one UDP (source port, destination port) pair; a quarter of them allow (goto the next table), the
rest drop. Half the rules of each filter table (allowing and dropping ones alike) have a higher priority
than the other half: none overlap, so priority changes no verdict, but a split at HIGH keeps exactly that half
on the host. Table-misses go on to the next table; table 2 forwards by in_port (wire <-> VM). Placements move
the filter tables: all on the host, half (A on the sNIC, B on the host), split (each filter table split on
the sNIC at HIGH: its high half also on the host, for the host's own packets), all on the sNIC; table 2 stays
where OneSwitch runs it by default (at each packet's ingress switch).
"""

from __future__ import annotations

from collections.abc import Iterable

SPAN = 32768  # source ports per destination port: rule i is (BASE_SPORT + i % SPAN, BASE_DPORT + i // SPAN)
BASE_SPORT = 10_000  # `traffic gen`'s flow f has source port 10000 + f
BASE_DPORT = 5001
MISS_DPORT = 6000  # matched by no filter rule: the table-miss path (the move-under-traffic stream)
FILTERS = (0, 1)
FORWARD = 2
LOW, HIGH = 100, 101  # the filter rules' two priorities
# table -> location, or (sNIC, host_min_priority) for a split
PLACEMENTS: dict[str, dict[int, str | tuple[str, int]]] = {
    "host": {0: "host", 1: "host"},
    "half": {0: "snic0", 1: "host"},
    "split": {0: ("snic0", HIGH), 1: ("snic0", HIGH)},
    "snic": {0: "snic0", 1: "snic0"},
}


def match(i: int) -> tuple[int, int]:
    """(UDP source port, destination port) that rule i matches."""
    return BASE_SPORT + i % SPAN, BASE_DPORT + i // SPAN


def allowed(i: int) -> bool:
    return i % 4 == 0


def priority(i: int) -> int:
    """Rule i's priority: HIGH for i % 8 in 0..3 (in each table one allowing and one dropping rule of four)."""
    return HIGH if (i // 4) % 2 == 0 else LOW


def split_counts(n: int) -> dict[str, int]:
    """Filter rules (of n) a split at HIGH keeps on the host, and all the sNIC runs (the whole tables)."""
    return {"host": sum(1 for i in range(n) if priority(i) >= HIGH), "snic": n}


def flow_lines(n: int, vm_vport: int, wire_vport: int) -> list[str]:
    """`ovs-ofctl add-flows` lines of the pipeline with n filtering rules."""
    lines = []
    for i in range(n):
        sport, dport = match(i)
        table = i % 2
        action = f"goto_table:{table + 1}" if allowed(i) else "drop"
        lines.append(
            f"table={table},priority={priority(i)},udp,tp_src={sport},tp_dst={dport},actions={action}"
        )
    lines += [f"table={t},priority=0,actions=goto_table:{t + 1}" for t in FILTERS]
    lines += [
        f"table={FORWARD},priority=10,in_port={wire_vport},actions=output:{vm_vport}",
        f"table={FORWARD},priority=10,in_port={vm_vport},actions=output:{wire_vport}",
    ]
    return lines


def probes(n: int) -> list[tuple[int, int]]:
    """`traffic gen` runs that send one packet per rule: (flows, destination port) per run."""
    return [(min(SPAN, n - d * SPAN), BASE_DPORT + d) for d in range((n + SPAN - 1) // SPAN)]


def fates(n: int, arrived: Iterable[tuple[int, int]]) -> list[bool]:
    """Per rule: whether its probe arrived (from the (sport, dport) pairs captured)."""
    got = set(arrived)
    return [match(i) in got for i in range(n)]


def differences(a: list[bool], b: list[bool]) -> int:
    """Rules whose probe had a different fate in the two runs."""
    return sum(1 for x, y in zip(a, b, strict=True) if x != y)


def wrong(n: int, fate: list[bool]) -> int:
    """Rules whose probe did not do what the rule says (an allowed one lost, a dropped one delivered)."""
    return sum(1 for i in range(n) if fate[i] != allowed(i))


def ratio(num: float | None, den: float | None) -> float | None:
    return round(num / den, 3) if num is not None and den else None


def flows(spec: str, pps: float, seconds: float) -> int | None:
    """Flows per direction of a load window: `new` = one per packet of the window (every packet a new flow),
    at most SPAN (the source ports one destination port offers); a number in [1, SPAN]; None if neither."""
    if spec == "new":
        return max(1, min(SPAN, int(pps * seconds)))
    try:
        n = int(spec)
    except ValueError:
        return None
    return n if 1 <= n <= SPAN else None


def table_profile(
    host_all: float, host_none: float, pps: float, frame_bytes: int, tables: int, rules: int
) -> dict | None:
    """The `table` placement profile's host cost from one load: host OVS cores with every filter table on the
    host minus with none there, per table, per Gbit/s and per Mpps of the load through the pipeline (`pps`
    offered, all directions; the model's load of a table is in + out, twice what passes through it), and
    per Mpps per 1,000 of the `rules` the tables hold."""
    if pps <= 0 or tables <= 0 or rules <= 0:
        return None
    saved = max(0.0, host_all - host_none) / tables
    gbps = pps * frame_bytes * 8 / 1e9
    per_mpps = saved / (pps / 1e6)
    return {
        "r_host": round(saved / (2 * gbps), 3),
        "cores_per_mpps": round(per_mpps, 3),
        "cores_per_mpps_per_1k_rules": round(per_mpps / (rules / tables / 1000), 4),
        "cores_saved_per_table": round(saved, 4),
    }
