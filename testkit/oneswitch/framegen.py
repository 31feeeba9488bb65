"""Frames derived from rules (pure), to exercise every rule of a rule set.

For a rule R: a path of rules through the tables that ends at R (a goto_table chain from table 0, picked at
random among the rules whose goto leads there), and one frame that every rule of the path matches as that rule
sees it - after the set_fields, pushes and pops and the write_metadata of the rules before it. Fields no rule of
the path fixes are filled at random from rulegen's pools. Whether the frame really reaches R (no rule of higher
priority takes it first) is for the reference switch to tell (ofproto/trace, ovstrace.py): this only proposes.
"""

from __future__ import annotations

import ipaddress
import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from testkit.oneswitch import rulegen
from testkit.oneswitch.flowspec import Flow

UNSET = object()  # an original header field no rule of the path fixed (yet)
SET_FIELDS = {
    "eth_src": "dl_src", "eth_dst": "dl_dst", "ip_src": "nw_src", "ip_dst": "nw_dst", "tcp_src": "tp_src",
    "udp_src": "tp_src", "tcp_dst": "tp_dst", "udp_dst": "tp_dst",
}  # fmt: skip
IP, ARP, OTHER = 0x0800, 0x0806, 0x88B5
NO_VLAN = "0x0000/0x1000"


@dataclass
class Sym:
    """A frame under construction: original header fields decided so far, and what the actions of the rules
    already passed did to it. `vlan` of the original frame: None = untagged, else its (outer) VLAN id; `vlan2`:
    the id of a second, inner tag (None: none), decided only when a chain pops the outer one and then matches
    (OVS parses two VLAN headers: vlan-limit=0)."""

    rng: random.Random
    orig: dict[str, object] = field(default_factory=dict)
    changed: dict[str, object] = field(default_factory=dict)  # by set_field: wins over orig
    pushed: list[int] = field(default_factory=list)  # VLAN ids pushed by actions, outermost last
    popped: int = 0  # original tags popped (0-2)
    vids: dict[int, int] = field(default_factory=dict)  # original tag (0 outer, 1 inner) -> id set on it
    metadata: int = 0

    def cur(self, f: str) -> object:
        return self.changed.get(f, self.orig.get(f, UNSET))

    def _require(self, f: str, ok, choose) -> bool:
        v = self.cur(f)
        if v is UNSET:
            c = choose()
            if c is None:
                return False
            self.orig[f] = c
            return True
        return ok(v)

    def _eq(self, f: str, value: object) -> bool:
        return self._require(f, lambda v: v == value, lambda: value)

    def top_vlan(self) -> object:
        """The outermost VLAN id now: an int, None (untagged) or UNSET (the original's, not decided)."""
        if self.pushed:
            return self.pushed[-1]
        key = self._tag()
        if key is None:
            return None
        v = self.orig.get(key, UNSET)
        if v is UNSET or v is None:
            return v
        return self.vids.get(self.popped, v)

    def _tag(self) -> str | None:
        """The original tag on top once the pushed ones are gone: "vlan", "vlan2", or None (both popped)."""
        return ("vlan", "vlan2")[self.popped] if self.popped < 2 else None

    def _ip_field(self, f: str, value: str) -> bool:
        net = ipaddress.ip_network(value, strict=False)
        pool = [ip for ip in rulegen.IPS if ipaddress.ip_address(ip) in net]
        return self._eq("dl_type", IP) and self._require(
            f,
            lambda v: ipaddress.ip_address(v) in net,
            lambda: self.rng.choice(pool) if pool else str(net[5]),
        )

    def matches(self, fl: Flow) -> bool:
        """Decides what `fl`'s match needs of the original frame; False if the path cannot satisfy it."""
        for k, v in fl.match.items():
            if k == "dl_vlan":
                t = self.top_vlan()
                if t is UNSET:
                    self.orig[self._tag()] = int(v)  # type: ignore[index]
                elif t != int(v):
                    return False
            elif k == "vlan_tci":
                if v != NO_VLAN:
                    raise ValueError(f"vlan_tci={v} not understood: {fl.spec}")
                t = self.top_vlan()
                if t is UNSET:
                    self.orig[self._tag()] = None  # type: ignore[index]
                elif t is not None:
                    return False
            elif k == "metadata":
                val, _, mask = v.partition("/")
                m = int(mask, 0) if mask else 2**64 - 1
                if self.metadata & m != int(val, 0) & m:
                    return False
            elif k in ("nw_src", "nw_dst"):
                if not self._ip_field(k, v):
                    return False
            elif k in ("tp_src", "tp_dst"):
                if not (
                    self._eq("dl_type", IP)
                    and self._require("nw_proto", lambda p: p in (6, 17), lambda: self.rng.choice([6, 17]))
                    and self._eq(k, int(v))
                ):
                    return False
            elif k == "nw_proto":
                if not (self._eq("dl_type", IP) and self._eq(k, int(v))):
                    return False
            elif k in ("in_port", "dl_type"):
                if not self._eq(k, int(v, 0)):
                    return False
            elif not self._eq(k, v.lower()):  # dl_src, dl_dst
                return False
        return True

    def run(self, fl: Flow) -> None:
        """What `fl`'s apply-actions and write_metadata do to the frame the next table sees."""
        for a in fl.apply:
            if a.startswith("set_field:"):
                value, _, name = a[len("set_field:") :].partition("->")
                if name == "vlan_vid":
                    vid = int(value, 0) & 0xFFF
                    if self.pushed:
                        self.pushed[-1] = vid
                    elif self.top_vlan() not in (UNSET, None):
                        self.vids[self.popped] = vid
                elif name in SET_FIELDS:
                    f = SET_FIELDS[name]
                    self.changed[f] = int(value) if f.startswith("tp_") else value.lower()
                else:
                    raise ValueError(f"set_field {name} not understood: {fl.spec}")
            elif a.startswith("push_vlan:"):
                t = self.top_vlan()
                self.pushed.append(t if isinstance(t, int) else 0)  # OF: the new tag copies the outer id
            elif a == "pop_vlan":
                key = self._tag()
                if self.pushed:
                    self.pushed.pop()
                elif key is not None:  # an original tag goes (popping an untagged frame does nothing)
                    if self.orig.get(key, UNSET) is UNSET:  # tagged; QinQ only if a VLAN match asks for it
                        self.orig[key] = self.rng.choice(rulegen.VLANS) if key == "vlan" else None
                    if self.orig[key] is not None:
                        self.popped += 1
        if fl.write_metadata:
            v, m = fl.write_metadata
            self.metadata = (self.metadata & ~m) | (v & m)

    def fill(self) -> dict[str, object]:
        """Every original field decided: those no rule fixed, at random from rulegen's pools."""
        o = dict(self.orig)
        r = self.rng
        o.setdefault("dl_src", r.choice(rulegen.MACS[:3]))
        o.setdefault("dl_dst", r.choice(rulegen.MACS))
        o.setdefault("vlan", r.choice(rulegen.VLANS) if r.random() < 0.3 else None)
        o.setdefault("vlan2", None)
        o.setdefault("dl_type", r.choices([IP, ARP, OTHER], weights=[7, 1.5, 1.5])[0])
        o.setdefault("nw_src", r.choice(rulegen.IPS))
        o.setdefault("nw_dst", r.choice(rulegen.IPS))
        o.setdefault("nw_proto", r.choice([6, 17, 1]))
        o.setdefault("tp_src", r.choice(rulegen.TP_PORTS))
        o.setdefault("tp_dst", r.choice(rulegen.TP_PORTS))
        return o


def solve(path: list[Flow], rng: random.Random) -> Sym | None:
    """The constraints of a path on the original frame; None if no frame can take every rule of it."""
    s = Sym(rng)
    for fl in path:
        if not s.matches(fl):
            return None
        s.run(fl)
    return s


def build(o: dict[str, object], pid: int) -> bytes:
    """The frame of filled fields `o` with marker `pid` (rulegen.marker_id finds it)."""
    from scapy.layers.inet import ICMP, TCP, UDP
    from scapy.layers.inet import IP as IPv4
    from scapy.layers.l2 import ARP as Arp
    from scapy.layers.l2 import Dot1Q, Ether
    from scapy.packet import Raw

    payload = Raw(rulegen.marker(pid) + bytes(range(20)))
    eth = Ether(src=o["dl_src"], dst=o["dl_dst"])
    l2 = eth / Dot1Q(vlan=o["vlan"]) if o["vlan"] is not None else eth
    if o["vlan"] is not None and o.get("vlan2") is not None:
        l2 = l2 / Dot1Q(vlan=o["vlan2"])  # QinQ: the inner tag
    t = o["dl_type"]
    if t == IP:
        ip = IPv4(src=o["nw_src"], dst=o["nw_dst"], ttl=64, id=pid & 0xFFFF)
        if o["nw_proto"] == 6:
            l4 = TCP(sport=o["tp_src"], dport=o["tp_dst"], flags="S", seq=pid)
        elif o["nw_proto"] == 17:
            l4 = UDP(sport=o["tp_src"], dport=o["tp_dst"])
        else:
            l4 = ICMP(id=pid & 0xFFFF)
        return bytes(l2 / ip / l4 / payload)
    if t == ARP:
        return bytes(l2 / Arp(op=1, hwsrc=o["dl_src"], psrc=o["nw_src"], pdst=o["nw_dst"]) / payload)
    l2.lastlayer().type = t  # type: ignore[union-attr]
    return bytes(l2 / payload)


@dataclass
class Candidate:
    """A path to a rule and the filled original frame that takes it; `in_port` None = any port."""

    path: list[Flow]
    fields: dict[str, object]
    ints: dict[str, object] = field(init=False, repr=False, compare=False)  # concrete(fields)
    rules: frozenset[str] = field(init=False, repr=False, compare=False)  # the specs of `path`
    via: frozenset[str] = field(init=False, repr=False, compare=False)  # ... but its last (the chain to it)
    # port -> (the rules the frame takes in the local model, REACH or the first one not on `path` or None)
    paths: dict[int, tuple[frozenset[str], object]] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.ints = concrete(self.fields)
        self.rules = frozenset(f.spec for f in self.path)
        self.via = frozenset(f.spec for f in self.path[:-1])

    @property
    def qinq(self) -> bool:
        """Whether the frame arrives with 2 VLAN headers."""
        return self.fields.get("vlan2") is not None

    @property
    def in_port(self) -> int | None:
        p = self.fields.get("in_port")
        return int(p) if p is not None else None  # type: ignore[arg-type]

    def frame(self, pid: int) -> bytes:
        return build(self.fields, pid)


class Paths:
    """Goto chains of a rule set: which rules lead into each table."""

    def __init__(self, flows: list[Flow]):
        self.into: dict[int, list[Flow]] = {}
        for f in flows:
            if f.goto is not None:
                self.into.setdefault(f.goto, []).append(f)

    def walk(self, rule: Flow, rng: random.Random) -> list[Flow] | None:
        """A random goto chain from table 0 ending at `rule`; None if no rule leads to its table."""
        path = [rule]
        while path[0].table > 0:
            preds = self.into.get(path[0].table)
            if not preds:
                return None
            path.insert(0, rng.choice(preds))
        return path

    def chains(self, rule: Flow, rng: random.Random) -> Iterator[list[Flow]]:
        """Every goto chain from table 0 ending at `rule`, the predecessors at each step in random order."""
        if rule.table == 0:
            yield [rule]
            return
        preds = list(self.into.get(rule.table, ()))
        rng.shuffle(preds)
        for p in preds:
            for c in self.chains(p, rng):
                yield [*c, rule]

    def dead(self, rule: Flow, limit: int = 200000) -> bool:
        """Whether no goto chain to `rule` can be taken by any frame (dead_chain of each: a proof); False if
        there are more than `limit` chains (not looked at)."""
        chains = list(itertools.islice(self.chains(rule, random.Random(0)), limit + 1))
        return len(chains) <= limit and all(dead_chain(c) is not None for c in chains)

    def candidates(
        self, rule: Flow, rng: random.Random, tries: int = 40, search: int = 20000
    ) -> Iterator[Candidate]:
        """Distinct candidates for `rule`: random chains to it that a frame can take, each with a random fill of
        the fields the chain leaves open (so a rule shadowed for one fill may still be reached with another).
        If `tries` random chains give none (few chains can be taken), up to `search` chains in turn."""
        seen = set()
        walks = (self.walk(rule, rng) for _ in range(tries))
        for n, path in enumerate(itertools.chain(walks, itertools.islice(self.chains(rule, rng), search))):
            if path is None:
                return
            if n >= tries and seen:
                return
            s = solve(path, rng)
            if s is None:
                continue
            fields = s.fill()
            key = (tuple(f.spec for f in path), tuple(sorted((k, str(v)) for k, v in fields.items())))
            if key not in seen:
                seen.add(key)
                yield Candidate(path, fields)


def dead_chain(path: list[Flow]) -> str | None:
    """Why no frame can take every rule of the goto chain `path` (the rules' matches, with what the earlier rules'
    set_fields and write_metadata did, ask two different things of one field), or None if this finds no such
    contradiction. Exact where it judges: in_port and eth_type never change along a path, a set_field makes a
    field known, metadata is known from 0 on; VLAN matches and actions and the fields' implied prerequisites
    are left out, which only admits more frames: a reason given is a proof (unlike `solve`, which picks values
    and may miss a frame)."""
    orig: dict[str, object] = {}  # the original frame: exact values, IPv4 fields (base, mask)
    known: dict[str, object] = {}  # set by a set_field: wins over orig
    metadata = 0
    for n, fl in enumerate(path):
        for k, v in fl.match.items():
            if k in ("dl_vlan", "vlan_tci"):
                continue
            if k == "metadata":
                val, _, mask = v.partition("/")
                m = int(mask, 0) if mask else 2**64 - 1
                if metadata & m != int(val, 0) & m:
                    return f"rule {n + 1} matches metadata {v}, the chain wrote {metadata:#x}"
            elif k in ("nw_src", "nw_dst"):
                net = ipaddress.ip_network(v, strict=False)
                if k in known:
                    if ipaddress.ip_address(known[k]) not in net:  # type: ignore[arg-type]
                        return f"rule {n + 1} matches {k}={v}, the chain set {known[k]}"
                elif k in orig:
                    have: ipaddress.IPv4Network = orig[k]  # type: ignore[assignment]
                    if not have.overlaps(net):
                        return f"rule {n + 1} matches {k}={v}, an earlier rule {have}"
                    orig[k] = net if net.prefixlen > have.prefixlen else have
                else:
                    orig[k] = net
            else:
                value: object = v.lower() if k in ("dl_src", "dl_dst") else int(v, 0)
                have2 = known.get(k, orig.get(k))
                if have2 is not None and have2 != value:
                    return f"rule {n + 1} matches {k}={v}, the chain has {have2}"
                if k not in known:
                    orig[k] = value
        for a in fl.apply:
            if a.startswith("set_field:"):
                value2, _, name = a[len("set_field:") :].partition("->")
                if name in SET_FIELDS:
                    f = SET_FIELDS[name]
                    known[f] = int(value2) if f.startswith("tp_") else value2.lower()
        if fl.write_metadata:
            v, m = fl.write_metadata
            metadata = (metadata & ~m) | (v & m)
    return None


def reachable_tables(flows: list[Flow]) -> set[int]:
    """The tables a frame can get to at all: table 0, and those a goto_table of a rule in one of them names. A
    rule in any other table is dead in every switch holding these rules (groups cannot go to a table)."""
    seen, todo = {0}, [0]
    while todo:
        t = todo.pop()
        for f in flows:
            if f.table == t and f.goto is not None and f.goto not in seen:
                seen.add(f.goto)
                todo.append(f.goto)
    return seen


def _ip(a: str) -> int:
    return int(ipaddress.ip_address(a))


def concrete(fields: dict[str, object]) -> dict[str, object]:
    """Filled fields as the local model compares them (IPv4 addresses as ints)."""
    return {k: _ip(v) if k in ("nw_src", "nw_dst") else v for k, v in fields.items()}  # type: ignore[arg-type]


REACH = object()  # Chooser: a candidate's frame takes its rule
NEVER = -1  # the eth_type of a rule that asks for two: it matches no frame


@dataclass(frozen=True)
class _Compiled:
    """A rule's match and actions on concrete frames (ints and strings, no decisions). `in_port` and `dl_type`
    (None: any) never change along a frame's path: the Pipeline sorts rules by them instead of testing them."""

    flow: Flow
    in_port: int | None
    dl_type: int | None
    exact: tuple[tuple[str, object], ...]
    nets: tuple[tuple[str, int, int], ...]  # (field, base, mask)
    vlan: object  # None: any, "none": untagged, int: outer id
    meta: tuple[int, int] | None
    # ("vid", id), ("set", (field, value)), ("push", None), ("pop", None)
    actions: tuple[tuple[str, object], ...]

    @staticmethod
    def of(fl: Flow) -> _Compiled:
        exact: list[tuple[str, object]] = []
        nets, vlan, meta, types, in_port = [], None, None, set(), None
        for k, v in fl.match.items():
            if k == "dl_vlan":
                vlan = int(v)
            elif k == "vlan_tci":
                vlan = "none"
            elif k == "metadata":
                val, _, mask = v.partition("/")
                m = int(mask, 0) if mask else 2**64 - 1
                meta = (int(val, 0) & m, m)
            elif k in ("nw_src", "nw_dst"):
                net = ipaddress.ip_network(v, strict=False)
                nets.append((k, int(net.network_address), int(net.netmask)))
                types.add(IP)
            elif k == "in_port":
                in_port = int(v, 0)
            elif k == "dl_type":
                types.add(int(v, 0))
            elif k in ("tp_src", "tp_dst", "nw_proto"):
                exact.append((k, int(v, 0)))
                types.add(IP)
            else:
                exact.append((k, v.lower()))
        dl_type = None if not types else types.pop() if len(types) == 1 else NEVER
        actions: list[tuple[str, object]] = []
        for a in fl.apply:
            if a.startswith("set_field:"):
                value, _, name = a[len("set_field:") :].partition("->")
                if name == "vlan_vid":
                    actions.append(("vid", int(value, 0) & 0xFFF))
                else:
                    f = SET_FIELDS[name]
                    v = int(value) if f.startswith("tp_") else _ip(value) if f.startswith("nw_") else value
                    actions.append(("set", (f, v)))
            elif a.startswith("push_vlan:"):
                actions.append(("push", None))
            elif a == "pop_vlan":
                actions.append(("pop", None))
        return _Compiled(fl, in_port, dl_type, tuple(exact), tuple(nets), vlan, meta, tuple(actions))

    def matches(self, fr: dict, vlans: list[int], metadata: int) -> bool:
        """Whether a frame of this rule's in_port and eth_type (the Pipeline's bucket) matches the rest."""
        for k, v in self.exact:
            if fr[k] != v:
                return False
        for k, base, mask in self.nets:
            if fr[k] & mask != base:
                return False
        if self.vlan == "none" and vlans:
            return False
        if self.vlan not in (None, "none") and (not vlans or vlans[-1] != self.vlan):
            return False
        return self.meta is None or metadata & self.meta[1] == self.meta[0]

    def run(self, fr: dict, vlans: list[int], metadata: int) -> int:
        for kind, arg in self.actions:
            if kind == "vid":
                if vlans:
                    vlans[-1] = arg  # type: ignore[assignment]
            elif kind == "set":
                fr[arg[0]] = arg[1]  # type: ignore[index]
            elif kind == "push":
                vlans.append(vlans[-1] if vlans else 0)
            elif vlans:  # pop
                vlans.pop()
        if self.flow.write_metadata:
            v, m = self.flow.write_metadata
            metadata = (metadata & ~m) | (v & m)
        return metadata


class Pipeline:
    """A local model of the virtual switch for rulegen's vocabulary: which rules a frame takes, table by table.
    Only to choose frames cheaply; what counts is the reference switch's trace."""

    def __init__(self, flows: list[Flow]):
        self.tables: dict[int, list[_Compiled]] = {}
        for f in sorted(flows, key=lambda f: -f.priority):
            self.tables.setdefault(f.table, []).append(_Compiled.of(f))
        self._buckets: dict[tuple[int, int, object], list[_Compiled]] = {}

    def _bucket(self, table: int, in_port: int, dl_type: object) -> list[_Compiled]:
        """The rules of `table` a frame in at `in_port` of eth_type `dl_type` may match, by priority."""
        key = (table, in_port, dl_type)
        b = self._buckets.get(key)
        if b is None:
            b = self._buckets[key] = [c for c in self.tables.get(table, ())
                                      if c.in_port in (None, in_port) and c.dl_type in (None, dl_type)]  # fmt: skip
        return b

    def remove(self, gone: set[str]) -> None:
        for t, fl in self.tables.items():
            self.tables[t] = [c for c in fl if c.flow.spec not in gone]
        for k, b in self._buckets.items():
            self._buckets[k] = [c for c in b if c.flow.spec not in gone]

    def add(self, flows: list[Flow]) -> None:
        for f in flows:
            self.tables.setdefault(f.table, []).append(_Compiled.of(f))
        for fl in self.tables.values():
            fl.sort(key=lambda c: -c.flow.priority)
        self._buckets.clear()

    def path(
        self, fields: dict[str, object], in_port: int, ints: dict[str, object] | None = None
    ) -> list[Flow]:
        """The rules a frame of `fields` in at `in_port` takes; `ints`: concrete(fields), if at hand."""
        fr = dict(ints if ints is not None else concrete(fields))
        fr["in_port"] = in_port
        dl_type = fr["dl_type"]
        vlans = [t for t in (fields.get("vlan2"), fields["vlan"]) if t is not None]  # outermost last
        out: list[Flow] = []
        metadata, table = 0, 0
        while table is not None:
            for c in self._bucket(table, in_port, dl_type):
                if c.matches(fr, vlans, metadata):  # type: ignore[arg-type]
                    out.append(c.flow)
                    metadata = c.run(fr, vlans, metadata)  # type: ignore[arg-type]
                    table = c.flow.goto  # type: ignore[assignment]
                    break
            else:
                break
        return out


@dataclass
class Plan:
    """What a round of the check does (Chooser.plan)."""

    reach: dict[str, Candidate]  # rule -> a candidate whose frame takes it now (in the local model)
    blockers: set[str]  # deletable rules in the way of candidates of the others
    held: set[str]  # deletable rules in the way that a pending rule's candidate chain goes through
    restore: set[str]  # deleted rules to install again: the only chains left to some pending rules use them


class Chooser:
    """Which frames reach the rules not exercised yet, and which rules stand in their way.

    Per pending rule a few candidates (Paths.candidates) over the rules installed; the path each takes from each
    of its ports in the local model (cached until a rule on it goes). A candidate reaches its rule when the rule
    is on that path; else the rule that takes its frame where the candidate's chain meant another one is a
    *blocker* (a rule of higher priority that matches it too). Deleting blockers that have been checked already
    uncovers the rules they shadow. A blocker that a pending rule's chain goes through is held back (deleting
    it would cut that rule off); a pending rule left with no chain over the rules installed gets one over all
    the rules, and the deleted rules of that chain are installed again (each at most `restores` times). With
    `qinq` False, no candidate whose frame arrives with 2 VLAN headers."""

    def __init__(
        self,
        flows: list[Flow],
        vports: list[int],
        rng: random.Random,
        per_rule: int = 4,
        restores: int = 2,
        qinq: bool = True,
    ):
        self.flows = {f.spec: f for f in flows}
        self.pipe = Pipeline(flows)
        self.paths = Paths(flows)  # over the rules installed
        self.all_paths = Paths(flows)  # over every rule, deleted or not
        self.gone: set[str] = set()
        self.restored: dict[str, int] = {}
        self.vports, self.rng, self.per_rule, self.restores = vports, rng, per_rule, restores
        self.qinq = qinq
        self.cands: dict[str, list[Candidate]] = {}

    def ports(self, c: Candidate) -> list[int]:
        return [c.in_port] if c.in_port is not None else self.vports

    def _candidates(self, spec: str) -> list[Candidate]:
        if spec not in self.cands:
            gen = (c for c in self.paths.candidates(self.flows[spec], self.rng) if self.qinq or not c.qinq)
            self.cands[spec] = [c for _, c in zip(range(self.per_rule), gen, strict=False)]
            if not self.cands[spec]:  # no chain over the rules installed: one with deleted rules to restore
                gen = self.all_paths.candidates(self.flows[spec], self.rng)
                ok = (c for c in gen if all(self.restored.get(f.spec, 0) < self.restores for f in c.path)
                      and (self.qinq or not c.qinq))  # fmt: skip
                self.cands[spec] = [c for _, c in zip(range(1), ok, strict=False)]
        return self.cands[spec]

    def _outcome(self, c: Candidate, port: int) -> object:
        """REACH if `c`'s frame in at `port` takes its rule in the local model, else the rule that takes it where
        its chain meant another (None: no rule does)."""
        got = c.paths.get(port)
        if got is None:
            path = [f.spec for f in self.pipe.path(c.fields, port, c.ints)]
            if c.path[-1].spec in path:
                out: object = REACH
            else:
                out = next((a for a, m in zip(path, (f.spec for f in c.path), strict=False) if a != m), None)
            got = c.paths[port] = (frozenset(path), out)
        return got[1]

    def plan(self, pending: set[str], deletable: set[str]) -> Plan:
        """The next round for the `pending` rules; `deletable`: the rules installed that may be deleted. A rule
        not checked yet that stands in the way of another's candidate is reached by that candidate's frame."""
        reach: dict[str, Candidate] = {}
        blockers: set[str] = set()
        restore: set[str] = set()
        detours: dict[str, Candidate] = {}
        order = sorted(pending)
        chains = frozenset().union(*(c.via for spec in order for c in self._candidates(spec)))
        for spec in order:
            for c in self._candidates(spec):
                if not self.gone.isdisjoint(c.rules):
                    restore |= c.rules & self.gone
                    continue
                for p in self.ports(c):
                    b = self._outcome(c, p)
                    if b is REACH:
                        reach[spec] = c
                        break
                    if b in deletable:
                        blockers.add(b)  # type: ignore[arg-type]
                    elif b in pending:
                        detours.setdefault(b, c)  # type: ignore[arg-type]  # it exercises the blocker
                if spec in reach:
                    break
        for b, c in detours.items():  # a pending rule in the way of another's frame: that frame reaches it
            reach.setdefault(b, c)
        return Plan(reach, blockers - chains, blockers & chains, restore)

    def remove(self, gone: set[str]) -> None:
        """Rules deleted from the switches: paths through them change, chains through them are gone."""
        self.gone |= gone
        self.pipe.remove(gone)
        for t, fl in self.paths.into.items():
            self.paths.into[t] = [f for f in fl if f.spec not in gone]
        for spec in [s for s, cs in self.cands.items() if any(not c.rules.isdisjoint(gone) for c in cs)]:
            del self.cands[spec]  # fresh chains next time, over the rules still installed
        for cs in self.cands.values():
            for c in cs:
                c.paths = {p: got for p, got in c.paths.items() if got[0].isdisjoint(gone)}

    def add(self, back: set[str]) -> None:
        """Deleted rules installed again: any path may take them now; chains through them are back."""
        self.gone -= back
        for s in back:
            self.restored[s] = self.restored.get(s, 0) + 1
        flows = [self.flows[s] for s in sorted(back)]
        self.pipe.add(flows)
        for f in flows:
            if f.goto is not None:
                self.paths.into.setdefault(f.goto, []).append(f)
        for cs in self.cands.values():
            for c in cs:
                c.paths = {}

    def only_qinq(self, spec: str) -> bool:
        """Whether the candidates found for `spec` over all the rules all need a frame with 2 VLAN headers."""
        found = list(itertools.islice(self.all_paths.candidates(self.flows[spec], self.rng), 8))
        return bool(found) and all(c.qinq for c in found)

    def refused(self, specs: set[str]) -> None:
        """Deleted rules the switch would not take again: no more chains through them."""
        for s in specs:
            self.restored[s] = self.restores
        for spec in [s for s, cs in self.cands.items() if any(not c.rules.isdisjoint(specs) for c in cs)]:
            del self.cands[spec]

    def renew(self, specs: set[str]) -> None:
        """Fresh candidates for `specs` (other chains and fills) the next time they are planned."""
        for s in specs:
            self.cands.pop(s, None)
