"""The demo chain's description (written by the demo, read by the controller app) and its steering rules.

NFs are one-arm: a packet goes out of the NF's virtual port and comes back on it with its source MAC
unchanged, so the direction of a returning packet is told by its source MAC (VM's = towards the outside)."""

from __future__ import annotations

from dataclasses import dataclass

_MAC_HEX = set("0123456789abcdef")


class ChainError(ValueError):
    """A malformed chain description; the message names the field."""


@dataclass(frozen=True)
class Chain:
    vm_port: int
    vm_mac: str
    out_port: int
    out_mac: str
    nf_ports: tuple[int, ...]  # in order from the VM to the outside


def _port(raw: dict, key: str) -> int:
    v = raw.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 0xFFFFFF00:
        raise ChainError(f"{key}: expected an OpenFlow port number, got {v!r}")
    return v


def _mac(raw: dict, key: str) -> str:
    v = raw.get(key)
    parts = v.lower().split(":") if isinstance(v, str) else []
    if len(parts) != 6 or any(len(p) != 2 or not set(p) <= _MAC_HEX for p in parts):
        raise ChainError(f"{key}: expected a MAC address aa:bb:cc:dd:ee:ff, got {v!r}")
    return ":".join(parts)


def parse_chain(raw: object) -> Chain:
    """Validate a chain description (JSON object); raises ChainError naming the field."""
    if not isinstance(raw, dict):
        raise ChainError("chain: expected a JSON object")
    unknown = set(raw) - {"vm_port", "vm_mac", "out_port", "out_mac", "nf_ports"}
    if unknown:
        raise ChainError(f"{sorted(unknown)[0]}: unknown field")
    nfs = raw.get("nf_ports")
    if not isinstance(nfs, list) or len(nfs) > 16:
        raise ChainError("nf_ports: expected a list of at most 16 port numbers")
    ports = tuple(_port({"nf_ports": p}, "nf_ports") for p in nfs)
    chain = Chain(
        _port(raw, "vm_port"), _mac(raw, "vm_mac"), _port(raw, "out_port"), _mac(raw, "out_mac"), ports
    )
    every = [chain.vm_port, chain.out_port, *ports]
    if len(set(every)) != len(every):
        raise ChainError("nf_ports: the VM, outside and NF ports must all differ")
    return chain


@dataclass(frozen=True)
class Rule:
    priority: int
    in_port: int
    eth_src: str | None
    out_port: int


def steering_rules(chain: Chain) -> list[Rule]:
    """VM -> nf_ports[0] -> ... -> nf_ports[-1] -> outside, and the reverse path back to the VM."""
    hops = [chain.vm_port, *chain.nf_ports, chain.out_port]
    rules = []
    for direction, mac in ((hops, chain.vm_mac), (hops[::-1], chain.out_mac)):
        rules.append(Rule(100, direction[0], None, direction[1]))  # from the endpoint: no MAC needed
        for i in range(1, len(direction) - 1):
            rules.append(Rule(200, direction[i], mac, direction[i + 1]))
    return rules
