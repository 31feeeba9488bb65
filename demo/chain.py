"""The demo chains' description (written by the demo, read by the controller app) and their steering rules.

NFs are one-arm: a packet goes out of the NF's virtual port and comes back on it with its source MAC
unchanged, so the direction of a returning packet is told by its source MAC (VM's = towards the outside).
Several chains (one per VM) share the outside port: a frame from the outside goes to the chain of the VM
whose MAC is its destination, anything else (broadcasts, other MACs) to the first chain.

The optional LB path ({"chains": [...], "lb": {...}}): TCP to the virtual IP:port from the outside goes to the
LB (`nf lb`, DNAT to a backend); what comes back from it towards a backend's address gets that backend VM's MAC
as destination and goes to the VM; the backend's replies (its address and service port as source) go to the LB
(which puts the VIP back as source) and from there to the outside. These rules take precedence over the
chains, so the service's traffic bypasses the VMs' chains in both directions."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
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


MAX_CHAINS = 8


def parse_chains(raw: object) -> tuple[Chain, ...]:
    """One chain object, or {"chains": [chain, ...]} (VMs, MACs and NF ports all distinct, one outside port)."""
    if not isinstance(raw, dict) or "chains" not in raw:
        return (parse_chain(raw),)
    if set(raw) != {"chains"}:
        raise ChainError(f"{sorted(set(raw) - {'chains'})[0]}: unknown field")
    items = raw["chains"]
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_CHAINS:
        raise ChainError(f"chains: expected a list of 1 to {MAX_CHAINS} chains")
    chains = []
    for i, item in enumerate(items):
        try:
            chains.append(parse_chain(item))
        except ChainError as exc:
            raise ChainError(f"chains[{i}].{exc}") from None
    for i, c in enumerate(chains[1:], 1):
        if (c.out_port, c.out_mac) != (chains[0].out_port, chains[0].out_mac):
            raise ChainError(f"chains[{i}].out_port: every chain must use the same outside port and MAC")
    seen_ports: set[int] = set()
    seen_macs: set[str] = set()
    for i, c in enumerate(chains):
        own = {c.vm_port, *c.nf_ports}
        if own & seen_ports:
            raise ChainError(f"chains[{i}].nf_ports: a VM or NF port is in two chains")
        if c.vm_mac in seen_macs:
            raise ChainError(f"chains[{i}].vm_mac: two chains have the same VM MAC")
        seen_ports |= own
        seen_macs.add(c.vm_mac)
    return tuple(chains)


@dataclass(frozen=True)
class Backend:
    vm_port: int
    vm_mac: str
    ip: str
    port: int


@dataclass(frozen=True)
class LbPath:
    port: int  # the LB NF's virtual port
    vip: str
    vip_port: int
    backends: tuple[Backend, ...]


@dataclass(frozen=True)
class Demo:
    chains: tuple[Chain, ...]
    lb: LbPath | None = None


def _ipv4(raw: dict, key: str) -> str:
    v = raw.get(key)
    try:
        if isinstance(v, str):
            return str(ipaddress.IPv4Address(v))
    except ValueError:
        pass
    raise ChainError(f"{key}: expected an IPv4 address, got {v!r}")


def _tcp_port(raw: dict, key: str) -> int:
    v = raw.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 65535:
        raise ChainError(f"{key}: expected a TCP port 1-65535, got {v!r}")
    return v


MAX_BACKENDS = 8


def parse_lb(raw: object, chains: Sequence[Chain]) -> LbPath:
    """The LB path; every backend is one of the chains' VMs (its port and MAC), the LB's port is no other."""
    if not isinstance(raw, dict):
        raise ChainError("lb: expected a JSON object")
    unknown = set(raw) - {"port", "vip", "vip_port", "backends"}
    if unknown:
        raise ChainError(f"lb.{sorted(unknown)[0]}: unknown field")
    try:
        port, vip, vip_port = _port(raw, "port"), _ipv4(raw, "vip"), _tcp_port(raw, "vip_port")
    except ChainError as exc:
        raise ChainError(f"lb.{exc}") from None
    items = raw.get("backends")
    if not isinstance(items, list) or not 1 <= len(items) <= MAX_BACKENDS:
        raise ChainError(f"lb.backends: expected a list of 1 to {MAX_BACKENDS} backends")
    vms = {c.vm_port: c.vm_mac for c in chains}
    if port in {p for c in chains for p in (c.vm_port, c.out_port, *c.nf_ports)}:
        raise ChainError("lb.port: the LB's port must differ from every VM, outside and NF port")
    backends = []
    for i, b in enumerate(items):
        if not isinstance(b, dict):
            raise ChainError(f"lb.backends[{i}]: expected a JSON object")
        try:
            extra = set(b) - {"vm_port", "vm_mac", "ip", "port"}
            if extra:
                raise ChainError(f"{sorted(extra)[0]}: unknown field")
            be = Backend(_port(b, "vm_port"), _mac(b, "vm_mac"), _ipv4(b, "ip"), _tcp_port(b, "port"))
            if vms.get(be.vm_port) != be.vm_mac:
                raise ChainError(f"vm_port: {be.vm_port} with MAC {be.vm_mac} is not a chain's VM")
        except ChainError as exc:
            raise ChainError(f"lb.backends[{i}].{exc}") from None
        if be.ip == vip or any(x.ip == be.ip or x.vm_port == be.vm_port for x in backends):
            raise ChainError(f"lb.backends[{i}].ip: backends need distinct VMs and addresses, none the VIP")
        backends.append(be)
    return LbPath(port, vip, vip_port, tuple(backends))


def parse_demo(raw: object) -> Demo:
    """parse_chains' input, plus an optional "lb" next to "chains"."""
    if isinstance(raw, dict) and "chains" in raw and "lb" in raw:
        chains = parse_chains({k: v for k, v in raw.items() if k != "lb"})
        return Demo(chains, parse_lb(raw["lb"], chains))
    return Demo(parse_chains(raw))


@dataclass(frozen=True)
class Rule:
    priority: int
    in_port: int
    eth_src: str | None
    out_port: int
    eth_dst: str | None = None
    match: tuple[tuple[str, int | str], ...] = ()  # further OXM fields (os-ken names)
    set_eth_dst: str | None = None  # rewrite the destination MAC before the output


def lb_rules(lb: LbPath, out_port: int, out_mac: str) -> list[Rule]:
    """outside -> LB -> backend VM (MAC set for the VM), backend -> LB -> outside; TCP only, above the chains."""
    tcp = (("eth_type", 0x0800), ("ip_proto", 6))
    rules = [Rule(300, out_port, None, lb.port, match=(*tcp, ("ipv4_dst", lb.vip), ("tcp_dst", lb.vip_port)))]
    for b in lb.backends:
        rules += [
            Rule(300, lb.port, out_mac, b.vm_port, match=(*tcp, ("ipv4_dst", b.ip), ("tcp_dst", b.port)),
                 set_eth_dst=b.vm_mac),
            Rule(300, b.vm_port, None, lb.port, match=(*tcp, ("ipv4_src", b.ip), ("tcp_src", b.port))),
            Rule(300, lb.port, b.vm_mac, out_port, match=(*tcp, ("ipv4_src", lb.vip), ("tcp_src", lb.vip_port))),
        ]  # fmt: skip
    return rules


def steering_rules(chains: Chain | Sequence[Chain] | Demo) -> list[Rule]:
    """Per chain: VM -> nf_ports[0] -> ... -> nf_ports[-1] -> outside, and the reverse path back to the VM;
    then the LB path's rules, if any."""
    if isinstance(chains, Demo):
        lb = lb_rules(chains.lb, chains.chains[0].out_port, chains.chains[0].out_mac) if chains.lb else []
        return steering_rules(chains.chains) + lb
    chains = (chains,) if isinstance(chains, Chain) else tuple(chains)
    rules = []
    for chain in chains:
        hops = [chain.vm_port, *chain.nf_ports, chain.out_port]
        for direction, mac in ((hops, chain.vm_mac), (hops[::-1], chain.out_mac)):
            if direction[0] != chain.out_port:
                rules.append(Rule(100, direction[0], None, direction[1]))  # from the VM: no MAC needed
            elif len(chains) == 1:
                rules.append(Rule(100, direction[0], None, direction[1]))
            else:  # the outside port is shared: by destination MAC
                rules.append(Rule(150, direction[0], None, direction[1], chain.vm_mac))
            for i in range(1, len(direction) - 1):
                rules.append(Rule(200, direction[i], mac, direction[i + 1]))
    if len(chains) > 1:  # broadcasts and frames for no VM of a chain: the first chain
        first = [chains[0].vm_port, *chains[0].nf_ports][-1]
        rules.append(Rule(100, chains[0].out_port, None, first))
    return rules
