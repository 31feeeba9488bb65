"""Validation of the agent's requests (pure): REST bodies -> typed requests.

Each function raises `domain.errors.ValidationError(field, message)`; the REST edge turns it into a 400 naming
the field. Nothing here does I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from domain.errors import ValidationError
from domain.model import NF_TYPES

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
LOCATION_RE = re.compile(r"^(host|snic[0-9]{1,2})$")
MAX_GBPS = 400.0
MAX_INSTANCES = 16  # instances of one NF behind its vport (scale-out)
MAX_LATENCY_US = 1e6
EXPECTED_KEYS = {
    "gbps",
    "src",
    "dst",
    "latency_us",
}  # an NF's traffic expectation: Gbit/s on its chain src -> NF -> dst


# -- validation --------------------------------------------------------------------------------------------
def _obj(body: Any, allowed: set[str], required: set[str], where: str = "") -> dict:
    if not isinstance(body, dict):
        raise ValidationError(where.rstrip(".") or "body", "expected a JSON object")
    for k in body:
        if k not in allowed:
            known = ", ".join(sorted(allowed))
            if not k:  # an empty key cannot name itself
                raise ValidationError(where.rstrip(".") or "body", f'unknown field "" (known: {known})')
            raise ValidationError(f"{where}{k}", f"unknown field (known: {known})")
    for k in sorted(required):
        if k not in body:
            raise ValidationError(f"{where}{k}", "required")
    return body


def _name(fld: str, v: Any) -> str:
    if not isinstance(v, str) or not NAME_RE.match(v):
        raise ValidationError(fld, "must be 1-32 characters [a-z0-9-], starting with a letter")
    return v


def _number(fld: str, v: Any, lo: float, hi: float) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or v != v or not lo <= v <= hi:
        raise ValidationError(fld, f"must be a number in [{lo:g}, {hi:g}]")
    return float(v)


def location(fld: str, v: Any, locations: list[str]) -> str:
    """A known location ("host" or an sNIC id of this host)."""
    if not isinstance(v, str) or v not in locations:
        raise ValidationError(fld, f"must be one of {', '.join(locations)}")
    return v


@dataclass(frozen=True)
class VmRequest:
    id: str
    tenant: str = "default"


def parse_vm(body: Any) -> VmRequest:
    """POST /v1/vms body: {id, tenant?}."""
    b = _obj(body, {"id", "tenant"}, {"id"})
    return VmRequest(id=_name("id", b["id"]), tenant=_name("tenant", b.get("tenant", "default")))


WAIT_RE = re.compile(r"^([1-9]|1[0-6])(:([1-9][0-9]{0,4}))?$")


def _durability(d: dict) -> str | None:
    """`durability: {wait: N | "N:MS"}` -> the NF's `--store-wait` (replicas 1-16, timeout 1-60000 ms)."""
    if "wait" not in d or d["wait"] is None:
        return None
    w = d["wait"]
    text = str(w) if isinstance(w, int) and not isinstance(w, bool) else w
    m = WAIT_RE.match(text) if isinstance(text, str) else None
    if not m or (m.group(3) and int(m.group(3)) > 60000):
        raise ValidationError("durability.wait", 'must be replicas 1-16 or "N:MS" (timeout 1-60000 ms)')
    return text


@dataclass(frozen=True)
class NfRequest:
    id: str | None
    type: str
    config: dict
    expected_gbps: float
    src: str | None
    dst: str | None
    pin: str | None
    prefer: str | None
    tenant: str = "default"
    store_wait: str | None = None
    latency_us: float | None = None  # the chain's latency SLO (expected.latency_us)
    autoscale: dict | None = None  # AutoscalePolicy.to_json() (nf_agent.autoscale), None: fixed count
    balance: bool = True  # weigh a scaled-out NF's instances by their load (nf_agent.balance)


def parse_autoscale(v: Any, fld: str = "autoscale") -> dict | None:
    """`{"min", "max", "target_util"}` (min 1 <= min <= max <= MAX_INSTANCES, target_util in (0, 1]: a
    fraction of one core per instance) or null (no autoscaling)."""
    if v is None:
        return None
    b = _obj(v, {"min", "max", "target_util"}, {"min", "max", "target_util"}, f"{fld}.")
    lim = {}
    for k in ("min", "max"):
        x = b[k]
        if isinstance(x, bool) or not isinstance(x, int) or not 1 <= x <= MAX_INSTANCES:
            raise ValidationError(f"{fld}.{k}", f"must be an integer in [1, {MAX_INSTANCES}]")
        lim[k] = x
    if lim["min"] > lim["max"]:
        raise ValidationError(f"{fld}.min", f"must be at most max ({lim['max']})")
    t = _number(f"{fld}.target_util", b["target_util"], 0.0, 1.0)
    if t <= 0:
        raise ValidationError(f"{fld}.target_util", "must be a number in (0, 1]")
    return {"min": lim["min"], "max": lim["max"], "target_util": t}


def parse_nf(body: Any, locations: list[str]) -> NfRequest:
    """POST /v1/nfs body: {type, config?, id?, expected?: {gbps, src?, dst?}, pin?, hints?: {prefer},
    tenant?, durability?: {wait}, autoscale?: {min, max, target_util}, balance?: bool}."""
    b = _obj(
        body,
        {"id", "type", "config", "expected", "pin", "hints", "tenant", "durability", "autoscale", "balance"},
        {"type"},
    )
    nf_id = _name("id", b["id"]) if b.get("id") is not None else None
    t = b["type"]
    if not isinstance(t, str) or t not in NF_TYPES:
        raise ValidationError("type", f"must be one of {', '.join(NF_TYPES)}")
    config = b.get("config", {})
    if not isinstance(config, dict):
        raise ValidationError("config", "expected a JSON object (the NF's config, nfs/README.md)")
    exp = _expected(_obj(b.get("expected", {}), EXPECTED_KEYS, set(), "expected."))
    gbps = exp.get("expected_gbps", 0.0)
    src, dst = exp.get("src"), exp.get("dst")
    pin = location("pin", b["pin"], locations) if b.get("pin") is not None else None
    hints = _obj(b.get("hints", {}), {"prefer"}, set(), "hints.")
    prefer = location("hints.prefer", hints["prefer"], locations) if hints.get("prefer") is not None else None
    tenant = _name("tenant", b.get("tenant", "default"))
    wait = _durability(_obj(b.get("durability", {}), {"wait"}, set(), "durability."))
    autoscale = parse_autoscale(b.get("autoscale"))
    balance = parse_balance(b.get("balance", True))
    return NfRequest(
        nf_id, t, config, gbps, src, dst, pin, prefer, tenant, wait, exp.get("latency_us"), autoscale, balance
    )


def parse_balance(v: Any) -> bool:
    """`balance`: true (the default: the agent weighs a scaled-out NF's select buckets by the load each
    instance gets, nf_agent.balance) or false (the flow hash alone spreads the flows)."""
    if not isinstance(v, bool):
        raise ValidationError("balance", "must be true or false")
    return v


def _expected(exp: dict) -> dict[str, Any]:
    """The fields given in a validated `expected` object, by Nf attribute: expected_gbps, src, dst (a null
    src/dst is None: the default vertex, the first sNIC Ethernet port)."""
    out: dict[str, Any] = {}
    if "gbps" in exp:
        out["expected_gbps"] = _number("expected.gbps", exp["gbps"], 0.0, MAX_GBPS)
    for k in ("src", "dst"):
        if k in exp:
            out[k] = _name(f"expected.{k}", exp[k]) if exp[k] is not None else None
    if "latency_us" in exp:  # null: no SLO
        slo = exp["latency_us"]
        out["latency_us"] = None if slo is None else _number("expected.latency_us", slo, 0.0, MAX_LATENCY_US)
    return out


def parse_nf_update(body: Any) -> dict[str, Any]:
    """PATCH /v1/nfs/ID body: {"expected"?: {"gbps"?, "src"?, "dst"?}, "config"?: {...}, "autoscale"?: {...} |
    null, "balance"?: bool}, at least one, and `expected` with at least one key. Returns the changes by Nf attribute
    (expected_gbps, src, dst, config, autoscale); a key not given is left as it is, a null src/dst goes back to
    the default (the first sNIC Ethernet port), a null autoscale turns autoscaling off. The config's own fields
    are the NF binary's to check (`nf --check-config`)."""
    b = _obj(body, {"expected", "config", "autoscale", "balance"}, set())
    if not b:
        raise ValidationError("body", "give at least one of autoscale, balance, config, expected")
    out: dict[str, Any] = {}
    if "expected" in b:
        exp = _obj(b["expected"], EXPECTED_KEYS, set(), "expected.")
        if not exp:
            raise ValidationError("expected", f"give at least one of {', '.join(sorted(EXPECTED_KEYS))}")
        out = _expected(exp)
    if "config" in b:
        out["config"] = _config(b["config"])
    if "autoscale" in b:
        out["autoscale"] = parse_autoscale(b["autoscale"])
    if "balance" in b:
        out["balance"] = parse_balance(b["balance"])
    return out


def _config(v: Any) -> dict:
    if not isinstance(v, dict):
        raise ValidationError("config", "expected a JSON object (the NF's config, nfs/README.md)")
    return v


def parse_update(body: Any) -> tuple[str | None, str | None, dict | None]:
    """POST /v1/nfs/ID/update body: {"version" | "binary", "config"?}: (version, binary, config). The version's
    existence and the config's fields are checked against the versions directory and the binary."""
    b = _obj(body, {"version", "binary", "config"}, set())
    if ("version" in b) == ("binary" in b):
        raise ValidationError("version", "give exactly one of version or binary")
    for k in ("version", "binary"):
        if k in b and (not isinstance(b[k], str) or not b[k]):
            raise ValidationError(k, "must be a non-empty string")
    config = _config(b["config"]) if "config" in b else None
    return b.get("version"), b.get("binary"), config


def parse_migrate(body: Any, locations: list[str]) -> str:
    b = _obj(body, {"to"}, {"to"})
    return location("to", b["to"], locations)


def parse_standby(body: Any, locations: list[str]) -> str | None:
    """POST /v1/nfs/ID/standby body ({} when empty): {"location"?}: where the standby runs (default: the NF's
    current location)."""
    b = _obj(body, {"location"}, set())
    return location("location", b["location"], locations) if "location" in b else None


def parse_restart(body: Any) -> None:
    """POST /v1/nfs/ID/restart body: empty or {} (no options yet; any field is unknown)."""
    _obj(body, set(), set())


def parse_delete_query(args: Mapping[str, str]) -> bool:
    """DELETE /v1/nfs/ID query: `drop_state=true|false` (default false) deletes the NF's keys on the state tier
    too; any other parameter is refused (a typo must not keep state the caller meant to drop)."""
    for key in args:
        if key != "drop_state":
            raise ValidationError(f"query.{key}", "unknown parameter (known: drop_state)")
    v = args.get("drop_state", "false")
    if v not in ("true", "false"):
        raise ValidationError("query.drop_state", f"must be true or false, not {v[:40]!r}")
    return v == "true"


def parse_scale(body: Any) -> int:
    b = _obj(body, {"instances"}, {"instances"})
    n = b["instances"]
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_INSTANCES:
        raise ValidationError("instances", f"must be an integer in [1, {MAX_INSTANCES}]")
    return n


def parse_run(body: Any) -> bool:
    """POST /v1/placement/run body ({} when empty): {"force": bool} bypasses the dampening window only."""
    b = _obj(body, {"force"}, set())
    force = b.get("force", False)
    if not isinstance(force, bool):
        raise ValidationError("force", "must be a boolean")
    return force


def parse_table(raw: str) -> int:
    """A table number in a path: 0..253 (OneSwitch's virtual tables)."""
    if not raw.isdigit() or not 0 <= int(raw) <= 253:
        raise ValidationError("table", f"must be a table number 0..253, not {raw!r}")
    return int(raw)


def parse_table_pin(body: Any) -> tuple[str | None, int | None]:
    """PUT /v1/tables/{t} body: {"pin": "host" | SNIC | null, "host_min_priority"?: P} (null: the solver
    places it again; P, 1..65535, with an sNIC pin only: split there, the host keeping the rules of
    priority >= P). Returns (pin, P or None)."""
    b = _obj(body, {"pin", "host_min_priority"}, {"pin"})
    pin = b["pin"]
    if pin is not None and (not isinstance(pin, str) or not pin):
        raise ValidationError("pin", "must be 'host', an sNIC id, or null")
    split = b.get("host_min_priority")
    if split is None:
        return pin, None
    if isinstance(split, bool) or not isinstance(split, int) or not 1 <= split <= 65535:
        raise ValidationError("host_min_priority", f"must be an integer 1..65535, got {split!r}")
    if pin is None or pin == "host":
        raise ValidationError("host_min_priority", "a split needs an sNIC pin (not host or null)")
    return pin, split
