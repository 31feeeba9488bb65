"""A broader random rule generator than rulegen's (pure): action lists interleave outputs with set_fields
(L2, L3, L4), VLAN pushes/pops/vid rewrites, dec_ttl, the group and goto_table in any order, and matches
mix VLAN ids, "no VLAN", IPv4/TCP/UDP/ARP and ports. It does not aim at valid rules: what plain OVS refuses
is filtered out by installing on the reference first (tests/oneswitch/test_broad_rules.py), so the rest
is exactly what a controller may send a real switch. Used to measure OneSwitch's refusals against plain
OVS and to check that no translation is refused by a physical switch (e.g. MATCH_INCONSISTENT)."""

from __future__ import annotations

import random

from .rulegen import GROUP_ID, MACS, METAS, TP_PORTS, VLANS, RuleSet, _match


def _step(rng: random.Random, vports: list[int], facts: dict, groups: bool) -> list[str]:
    r = rng.random()
    if r < 0.35:
        return [f"output:{rng.choice(vports)}"]
    if r < 0.45:
        return [f"set_field:{rng.choice(MACS)}->eth_{rng.choice(['src', 'dst'])}"]
    if r < 0.55 and facts["ip"]:
        return [f"set_field:10.99.{rng.randint(0, 1)}.{rng.randint(1, 9)}->ip_{rng.choice(['src', 'dst'])}"]
    if r < 0.65 and facts["l4"]:
        name = "tcp" if facts["l4"] == 6 else "udp"
        return [f"set_field:{rng.choice(TP_PORTS)}->{name}_{rng.choice(['src', 'dst'])}"]
    if r < 0.72:
        return ["push_vlan:0x8100", f"set_field:{4096 + rng.choice(VLANS)}->vlan_vid"]
    if r < 0.77:
        return ["pop_vlan"]
    if r < 0.82:
        return [f"set_field:{4096 + rng.choice(VLANS)}->vlan_vid"]
    if r < 0.86 and facts["ip"]:
        return ["dec_ttl"]
    if r < 0.9 and groups:
        return [f"group:{GROUP_ID}"]
    if r < 0.93:
        return ["in_port"]
    return [f"output:{rng.choice(vports)}"]


def generate(
    seed: int, vports: list[int], n_rules: int = 60, tables: int = 3, groups: bool = True
) -> RuleSet:
    rng = random.Random(seed ^ 0xB40AD)
    group_specs = []
    if groups:
        group_specs.append(
            f"group_id={GROUP_ID},type=all,bucket=output:{rng.choice(vports)},"
            f"bucket=set_field:{MACS[2]}->eth_dst,output:{rng.choice(vports)}"
        )
    used: dict[int, set[int]] = {t: set() for t in range(tables)}
    flows = []
    for _ in range(n_rules):
        table = rng.choices(range(tables), weights=[5, 3, 2][:tables])[0]
        prio = rng.randint(1, 60000)
        while prio in used[table]:
            prio = rng.randint(1, 60000)
        used[table].add(prio)
        match, facts = _match(rng, vports, table, True)
        acts: list[str] = []
        for _ in range(rng.randint(1, 5)):
            acts += _step(rng, vports, facts, groups)
        if table + 1 < tables and rng.random() < 0.35:
            if rng.random() < 0.4:
                acts.append(f"write_metadata:{rng.choice(METAS):#x}/0xff")
            acts.append(f"goto_table:{rng.randint(table + 1, tables - 1)}")
        flows.append(",".join([f"table={table}", f"priority={prio}", *match]) + ",actions=" + ",".join(acts))
    return RuleSet(seed=seed, groups=tuple(group_specs), flows=tuple(flows))
