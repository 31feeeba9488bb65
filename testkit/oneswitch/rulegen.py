"""Seeded random OpenFlow 1.3 rule sets (ovs-ofctl syntax) and packets (scapy) over given virtual ports (pure).

Rules: matches over in_port, dl_src/dl_dst, dl_vlan (or "no VLAN"), ip/arp, nw_src/nw_dst (exact or /24),
nw_proto, tp_src/tp_dst, metadata; actions output (1-2 ports, also IN_PORT), set_field on eth/ip/tcp/udp
fields, push_vlan+set vid / pop_vlan, group (ALL), write_metadata, goto_table; with `write_outputs`, also
write_actions sets (output to a port or FLOOD, set_field, the group, CONTROLLER-free) that later tables may
overwrite. Priorities are unique within a
table, so that which rule wins never depends on an implementation's tie-break (OpenFlow leaves it undefined).
Every match meets the prerequisites of its actions, as ovs-ofctl demands. Field values come from small pools
shared with the packet generator, so rules do match packets.

Packets carry a marker `UNOEQ` + a 4-byte id in their payload: frames leaving a switch are attributed to the
injection that caused them by it (a frame without a marker is not ours: kernel chatter).
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass

MACS = ["02:aa:00:00:00:01", "02:aa:00:00:00:02", "02:aa:00:00:00:03", "ff:ff:ff:ff:ff:ff"]
IPS = ["10.99.0.1", "10.99.0.2", "10.99.1.3", "192.168.7.4"]
NETS = ["10.99.0.0/24", "10.99.1.0/24"]
TP_PORTS = [53, 80, 443, 5001]
VLANS = [10, 20]
METAS = [0x1, 0x2, 0x3]
MARK = b"UNOEQ"
GROUP_ID = 1


@dataclass(frozen=True)
class RuleSet:
    seed: int
    groups: tuple[str, ...]  # ovs-ofctl add-group specs
    flows: tuple[str, ...]  # ovs-ofctl add-flow specs

    def describe(self) -> str:
        return "\n".join([f"seed {self.seed}", *self.groups, *self.flows])


def _match(rng: random.Random, vports: list[int], table: int, vlans: bool = True) -> tuple[list[str], dict]:
    """Match fields, and what they imply for actions (has ip / l4 proto / vlan / no vlan)."""
    m: list[str] = []
    facts: dict = {"ip": False, "l4": None, "vlan": False, "novlan": False}
    if rng.random() < 0.5:
        m.append(f"in_port={rng.choice(vports)}")
    if rng.random() < 0.2:
        m.append(f"dl_src={rng.choice(MACS[:3])}")
    if rng.random() < 0.3:
        m.append(f"dl_dst={rng.choice(MACS)}")
    r = rng.random() if vlans else 1.0
    if r < 0.15:
        m.append(f"dl_vlan={rng.choice(VLANS)}")
        facts["vlan"] = True
    elif r < 0.25:
        m.append("vlan_tci=0x0000/0x1000")
        facts["novlan"] = True
    r = rng.random()
    if r < 0.55:
        m.append("ip")
        facts["ip"] = True
        if rng.random() < 0.3:
            m.append(f"nw_src={rng.choice(IPS + NETS)}")
        if rng.random() < 0.3:
            m.append(f"nw_dst={rng.choice(IPS + NETS)}")
        if rng.random() < 0.6:
            proto = rng.choice([6, 17, 1])
            m.append(f"nw_proto={proto}")
            if proto in (6, 17):
                facts["l4"] = proto
                if rng.random() < 0.3:
                    m.append(f"tp_src={rng.choice(TP_PORTS)}")
                if rng.random() < 0.4:
                    m.append(f"tp_dst={rng.choice(TP_PORTS)}")
    elif r < 0.65:
        m.append("arp")
    if table > 0 and rng.random() < 0.35:
        m.append(f"metadata={rng.choice(METAS):#x}/0xff")
    return m, facts


def _set_fields(rng: random.Random, facts: dict) -> list[str]:
    options = [f"set_field:{rng.choice(MACS[:3])}->eth_src", f"set_field:{rng.choice(MACS)}->eth_dst"]
    if facts["ip"]:
        options += [f"set_field:{rng.choice(IPS)}->ip_src", f"set_field:{rng.choice(IPS)}->ip_dst"]
    if facts["l4"]:
        name = "tcp" if facts["l4"] == 6 else "udp"
        options += [
            f"set_field:{rng.choice(TP_PORTS)}->{name}_dst",
            f"set_field:{rng.choice(TP_PORTS)}->{name}_src",
        ]
    return rng.sample(options, k=rng.randint(1, 2))


def _actions(
    rng: random.Random,
    vports: list[int],
    table: int,
    tables: int,
    facts: dict,
    groups: bool,
    vlans: bool = True,
    write_outputs: bool = False,
) -> list[str]:
    acts: list[str] = []
    if write_outputs and rng.random() < 0.45:
        return _write_actions(rng, vports, table, tables, facts, groups)
    if rng.random() < 0.35:
        acts += _set_fields(rng, facts)
    if facts["vlan"] and rng.random() < 0.35:
        acts.append("pop_vlan")
    elif vlans and rng.random() < 0.15:
        acts += ["push_vlan:0x8100", f"set_field:{4096 + rng.choice(VLANS)}->vlan_vid"]
    r = rng.random()
    if groups and r < 0.15:
        acts.append(f"group:{GROUP_ID}")
    elif r < 0.22:
        acts.append("in_port")
    elif r < 0.9:
        for v in rng.sample(vports, k=rng.choice([1, 1, 2])):
            acts.append(f"output:{v}")
    # else: no output here (drop, unless a later table outputs)
    if table + 1 < tables and rng.random() < 0.4:
        if rng.random() < 0.5:
            acts.append(f"write_metadata:{rng.choice(METAS):#x}/0xff")
        acts.append(f"goto_table:{rng.randint(table + 1, tables - 1)}")
    return acts or ["drop"]


def _write_actions(
    rng: random.Random, vports: list[int], table: int, tables: int, facts: dict, groups: bool
) -> list[str]:
    """An action set: the output runs at the end of the pipeline (unless a later table writes another)."""
    acts: list[str] = []
    if rng.random() < 0.3:
        acts += _set_fields(rng, facts)[:1]
    r = rng.random()
    if groups and r < 0.1:
        acts.append(f"group:{GROUP_ID}")
    elif r < 0.25:
        acts.append("output:FLOOD")
    else:
        acts.append(f"output:{rng.choice(vports)}")
    out = [f"write_actions({','.join(acts)})"]
    if table + 1 < tables and rng.random() < 0.5:
        out.append(f"goto_table:{rng.randint(table + 1, tables - 1)}")
    return out


def generate(
    seed: int,
    vports: list[int],
    n_rules: int = 30,
    tables: int = 3,
    groups: bool = True,
    prio_max: int = 999,
    vlans: bool = True,
    write_outputs: bool = False,
) -> RuleSet:
    """`vlans=False`: no VLAN match or push/pop (rules a VLAN-carried flow-id tag cannot clash with).
    `write_outputs`: some rules write their output into the action set instead."""
    rng = random.Random(seed)
    group_specs: list[str] = []
    if groups:
        buckets = [f"bucket=output:{v}" for v in rng.sample(vports, k=min(2, len(vports)))]
        buckets.insert(
            rng.randint(0, len(buckets)), f"bucket=set_field:{MACS[2]}->eth_dst,output:{rng.choice(vports)}"
        )
        group_specs.append(f"group_id={GROUP_ID},type=all," + ",".join(buckets))
    used: dict[int, set[int]] = {t: set() for t in range(tables)}
    flows = []
    for _ in range(n_rules):
        table = rng.choices(range(tables), weights=[5, 3, 2][:tables])[0]
        prio = rng.randint(1, prio_max)
        while prio in used[table]:
            prio = rng.randint(1, prio_max)
        used[table].add(prio)
        match, facts = _match(rng, vports, table, vlans)
        acts = _actions(rng, vports, table, tables, facts, groups, vlans, write_outputs)
        flows.append(",".join([f"table={table}", f"priority={prio}", *match]) + ",actions=" + ",".join(acts))
    return RuleSet(seed=seed, groups=tuple(group_specs), flows=tuple(flows))


def marker(pid: int) -> bytes:
    return MARK + struct.pack("!I", pid)


def marker_id(frame: bytes) -> int | None:
    i = frame.find(MARK)
    if i < 0 or i + len(MARK) + 4 > len(frame):
        return None
    return struct.unpack("!I", frame[i + len(MARK) : i + len(MARK) + 4])[0]


def packet(rng: random.Random, pid: int, vlans: bool = True, qinq: bool = False) -> bytes:
    """One random frame from the same pools as the rules, with marker `pid`. With `qinq` (and `vlans`), half
    of the tagged frames come in double-tagged (an 802.1ad or 802.1Q outer header over an 802.1Q one)."""
    from scapy.layers.inet import ICMP, IP, TCP, UDP
    from scapy.layers.l2 import ARP, Dot1AD, Dot1Q, Ether
    from scapy.packet import Raw

    payload = Raw(marker(pid) + bytes(rng.randrange(256) for _ in range(rng.choice([8, 30]))))
    eth = Ether(src=rng.choice(MACS[:3]), dst=rng.choice(MACS))
    if rng.random() < 0.3 and vlans:
        if qinq and rng.random() < 0.5:
            outer = Dot1AD if rng.random() < 0.5 else Dot1Q
            eth = eth / outer(vlan=rng.choice(VLANS)) / Dot1Q(vlan=rng.choice(VLANS))
        else:
            eth = eth / Dot1Q(vlan=rng.choice(VLANS))
    r = rng.random()
    if r < 0.8:
        ip = IP(src=rng.choice(IPS), dst=rng.choice(IPS), ttl=64, id=pid & 0xFFFF)
        proto = rng.random()
        if proto < 0.4:
            l4 = TCP(sport=rng.choice(TP_PORTS), dport=rng.choice(TP_PORTS), flags="S", seq=pid)
        elif proto < 0.8:
            l4 = UDP(sport=rng.choice(TP_PORTS), dport=rng.choice(TP_PORTS))
        else:
            l4 = ICMP(id=pid & 0xFFFF)
        pkt = eth / ip / l4 / payload
    elif r < 0.9:
        pkt = eth / ARP(op=1, hwsrc=MACS[0], psrc=rng.choice(IPS), pdst=rng.choice(IPS)) / payload
    else:
        eth.type = 0x88B5  # local experimental ethertype
        pkt = eth / payload
    return bytes(pkt)


def packets(
    seed: int, vports: list[int], per_port: int, vlans: bool = True, qinq: bool = False
) -> list[tuple[int, int, bytes]]:
    """(id, ingress vport, frame) for `per_port` packets at each vport, interleaved (`qinq`: see packet)."""
    rng = random.Random(seed ^ 0x5EED)
    out = []
    pid = 0
    for _ in range(per_port):
        for v in vports:
            out.append((pid, v, packet(rng, pid, vlans, qinq)))
            pid += 1
    return out
