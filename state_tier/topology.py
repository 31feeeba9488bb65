"""The tier's nodes and roles, parsed from `CLUSTER NODES` (pure)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Node:
    """One Redis server of the tier: `address` HOST:PORT as the cluster announces it, `role` master|replica,
    `master` the id of its master (replicas), `failed` when the cluster marks it fail/pfail."""

    id: str
    address: str
    role: str
    master: str | None = None
    failed: bool = False
    slots: int = 0  # hash slots served (masters)

    def public(self) -> dict:
        return {"address": self.address, "role": self.role, "failed": self.failed}


def parse_cluster_nodes(text: str) -> list[Node]:
    """Nodes of a `CLUSTER NODES` reply, sorted by address (handshake and no-address entries left out)."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 8:
            continue
        node_id, addr, flags = parts[0], parts[1], set(parts[2].split(","))
        address = addr.split("@")[0].split(",")[0]
        if "handshake" in flags or "noaddr" in flags or address.startswith(":"):
            continue
        role = "master" if "master" in flags else "replica"
        master = parts[3] if parts[3] != "-" else None
        out.append(
            Node(node_id, address, role, master, bool(flags & {"fail", "fail?"}), _slot_count(parts[8:]))
        )
    return sorted(out, key=lambda n: n.address)


def _slot_count(ranges: list[str]) -> int:
    n = 0
    for r in ranges:
        if r.startswith("["):  # a slot being migrated
            continue
        lo, _, hi = r.partition("-")
        n += int(hi or lo) - int(lo) + 1
    return n


def split_address(address: str) -> tuple[str, int]:
    """ "HOST:PORT" or "[V6]:PORT" -> (host, port)."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)
