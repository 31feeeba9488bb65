"""The ovs-ofctl flow specs of testkit/oneswitch/rulegen.py, parsed (pure): table, priority, match fields, the
apply-actions list, the action set, write_metadata and goto_table of each rule.

Only rulegen's vocabulary (plus `cookie=` and `dl_type=`) is understood; anything else raises ValueError, so a
new rule kind cannot be silently half-understood by the frame derivation built on this (framegen.py).
"""

from __future__ import annotations

from dataclasses import dataclass

MATCH_FIELDS = {
    "in_port", "dl_src", "dl_dst", "dl_vlan", "vlan_tci", "dl_type", "nw_src", "nw_dst", "nw_proto", "tp_src",
    "tp_dst", "metadata",
}  # fmt: skip
MATCH_FLAGS = {"ip": 0x0800, "arp": 0x0806}  # shorthand -> eth_type
ACTION_PREFIXES = ("output:", "group:", "set_field:", "push_vlan:")
ACTION_WORDS = {"in_port", "pop_vlan", "drop"}


@dataclass(frozen=True)
class Flow:
    spec: str  # as given (what was installed)
    table: int
    priority: int
    cookie: int | None
    match: dict[str, str]  # field -> value as written ("ip"/"arp" become dl_type)
    apply: tuple[str, ...]  # apply-actions, in order
    write: tuple[str, ...]  # write_actions(...) contents
    write_metadata: tuple[int, int] | None  # (value, mask)
    goto: int | None

    @property
    def in_port(self) -> int | None:
        v = self.match.get("in_port")
        return int(v) if v is not None else None


def split_actions(text: str) -> list[str]:
    """Comma-separated actions, keeping `write_actions(a,b)` whole."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    if cur:
        out.append(cur)
    return out


def _check_action(a: str, spec: str) -> str:
    if a in ACTION_WORDS or a.startswith(ACTION_PREFIXES):
        return a
    raise ValueError(f"action {a!r} not understood: {spec}")


def parse(spec: str) -> Flow:
    """One `add-flow` spec of rulegen's vocabulary."""
    head, sep, acts = spec.partition(",actions=")
    if not sep:
        raise ValueError(f"no actions: {spec}")
    table, priority, cookie = 0, 32768, None
    match: dict[str, str] = {}
    for item in head.split(","):
        key, _, value = item.partition("=")
        if key == "table":
            table = int(value)
        elif key == "priority":
            priority = int(value)
        elif key == "cookie":
            cookie = int(value, 0)
        elif key in MATCH_FLAGS and not value:
            match["dl_type"] = hex(MATCH_FLAGS[key])
        elif key in MATCH_FIELDS:
            match[key] = value
        else:
            raise ValueError(f"match field {item!r} not understood: {spec}")
    apply: list[str] = []
    write: tuple[str, ...] = ()
    wmeta, goto = None, None
    for a in split_actions(acts):
        if a.startswith("write_actions(") and a.endswith(")"):
            write = tuple(_check_action(w, spec) for w in split_actions(a[len("write_actions(") : -1]))
        elif a.startswith("write_metadata:"):
            v, _, m = a.split(":", 1)[1].partition("/")
            wmeta = (int(v, 0), int(m, 0) if m else 2**64 - 1)
        elif a.startswith("goto_table:"):
            goto = int(a.split(":", 1)[1])
        else:
            apply.append(_check_action(a, spec))
    return Flow(spec, table, priority, cookie, match, tuple(apply), write, wmeta, goto)
