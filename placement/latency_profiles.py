"""Measured per-packet latencies in a profile file: per NF type and location, and per sNIC's PCIe link.

An NF type's profile may hold `latency_us: {"host", "nic"}` (the medians the placement model adds per packet
where the NF runs) and `latency_p99_us: {"host", "nic"}` (the 99th percentiles), with their provenance under
`measured.latency_us.<location>` (`host` or an sNIC id): `{"date", "command", "commit", "median", "p99"}`
plus optional `packets`, `rate_pps`, `load1` (the machine's load while it was measured), and the raw one-way figures the NF's share was taken from, `path` (with
the NF) and `base` (the same path without it), each `{"median", "p99"}`. `nic` is the largest of the measured
sNICs (all sNICs of a host are one placement side).

The reserved top-level key `pcie` (not an NF type) maps an sNIC id to its link:
`{"latency_us", "latency_p99_us", "measured": {...same provenance...}}`: what one crossing of the link adds.
"""

from __future__ import annotations

import math
import re

from placement.model import PlacementInputError

PCIE_KEY = "pcie"  # reserved: the sNICs' PCIe crossing latencies, not an NF type
STATS = ("median", "p99")
_LOC_RE = re.compile(r"^(host|[a-z][a-z0-9_-]{0,31})$")
_REQUIRED = {"date", "command", "commit", "median", "p99"}
_OPTIONAL = {"packets", "rate_pps", "load1", "path", "base"}
_PCIE_KEYS = {"latency_us", "latency_p99_us", "measured"}


def _amount(where: str, v: object) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        raise PlacementInputError(f"{where}: must be a non-negative number")
    return float(v)


def validate_record(where: str, rec: object) -> None:
    """One measurement's provenance; raises PlacementInputError naming the field."""
    if not isinstance(rec, dict):
        raise PlacementInputError(f"{where}: expected an object with {', '.join(sorted(_REQUIRED))}")
    missing = sorted(_REQUIRED - set(rec))
    if missing:
        raise PlacementInputError(f"{where}.{missing[0]}: missing")
    unknown = sorted(set(rec) - _REQUIRED - _OPTIONAL)
    if unknown:
        raise PlacementInputError(f"{where}.{unknown[0]}: unknown key")
    for k in ("date", "command", "commit"):
        if not isinstance(rec[k], str) or not rec[k]:
            raise PlacementInputError(f"{where}.{k}: must be a non-empty string")
    _pair(where, rec)
    for k in ("packets", "rate_pps", "load1"):
        if k in rec:
            _amount(f"{where}.{k}", rec[k])
    for k in ("path", "base"):
        if k in rec:
            if not isinstance(rec[k], dict) or set(rec[k]) != set(STATS):
                raise PlacementInputError(f"{where}.{k}: expected exactly median, p99")
            _pair(f"{where}.{k}", rec[k])


def _pair(where: str, rec: dict) -> None:
    med, p99 = _amount(f"{where}.median", rec["median"]), _amount(f"{where}.p99", rec["p99"])
    if p99 < med:
        raise PlacementInputError(f"{where}.p99: {p99:g} is below the median {med:g}")


def validate_nf_latency(name: str, prof: dict) -> None:
    """The latency fields of NF type `name`'s profile: `latency_us`, `latency_p99_us`, `measured.latency_us`."""
    for key in ("latency_us", "latency_p99_us"):
        if key not in prof:
            continue
        val = prof[key]
        if not isinstance(val, dict) or set(val) - {"host", "nic"}:
            raise PlacementInputError(f"profiles.{name}.{key}: expected an object with host and/or nic")
        for side, v in val.items():
            _amount(f"profiles.{name}.{key}.{side}", v)
    measured = prof.get("measured")
    locs = measured.get("latency_us") if isinstance(measured, dict) else None
    if locs is None:
        return
    where = f"profiles.{name}.measured.latency_us"
    if not isinstance(locs, dict) or not locs:
        raise PlacementInputError(f"{where}: expected an object of location -> measurement")
    for loc, rec in locs.items():
        if not _LOC_RE.match(loc):
            raise PlacementInputError(f"{where}.{loc}: not a location (host or an sNIC id)")
        validate_record(f"{where}.{loc}", rec)


def validate_pcie(section: object) -> None:
    """The reserved `pcie` section: sNIC id -> {latency_us, latency_p99_us?, measured?}."""
    if not isinstance(section, dict):
        raise PlacementInputError(f"profiles.{PCIE_KEY}: expected an object of sNIC id -> link latency")
    for sid, link in section.items():
        where = f"profiles.{PCIE_KEY}.{sid}"
        if sid == "host" or not _LOC_RE.match(sid):
            raise PlacementInputError(f"{where}: not an sNIC id")
        if not isinstance(link, dict) or "latency_us" not in link or set(link) - _PCIE_KEYS:
            raise PlacementInputError(f"{where}: expected latency_us (and latency_p99_us, measured)")
        _amount(f"{where}.latency_us", link["latency_us"])
        if "latency_p99_us" in link:
            _amount(f"{where}.latency_p99_us", link["latency_p99_us"])
        if "measured" in link:
            validate_record(f"{where}.measured", link["measured"])


def measurement(median: float, p99: float, meta: dict) -> dict:
    """A provenance record: `meta` gives date, command, commit and optionally packets, rate_pps, load1, path,
    base."""
    rec = {**meta, "median": round(median, 2), "p99": round(p99, 2)}
    return rec


def record_nf_latency(raw: dict, nf_type: str, location: str, rec: dict) -> dict:
    """`raw` (a profile file's content) with `nf_type`'s latency measured at `location` (host or an sNIC id):
    the provenance stored, `latency_us`/`latency_p99_us` of the side recomputed (nic: the largest sNIC)."""
    if (
        not isinstance(nf_type, str)
        or nf_type == PCIE_KEY
        or not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", nf_type)
    ):
        raise PlacementInputError(f"measurement.type: {nf_type!r} is not an NF type name ([a-z][a-z0-9_-]*)")
    if not isinstance(location, str) or not _LOC_RE.match(location):
        raise PlacementInputError(f"measurement.location: {location!r} is not host or an sNIC id")
    validate_record(f"measurement.{location}", rec)
    old = raw.get(nf_type, {})
    locs = {**old.get("measured", {}).get("latency_us", {}), location: rec}
    prof = {**old, "measured": {**old.get("measured", {}), "latency_us": locs}}
    for key, stat in (("latency_us", "median"), ("latency_p99_us", "p99")):
        side = dict(prof.get(key, {}))
        if "host" in locs:
            side["host"] = locs["host"][stat]
        nics = [r[stat] for loc, r in locs.items() if loc != "host"]
        if nics:
            side["nic"] = max(nics)
        prof[key] = side
    return {**raw, nf_type: prof}


def record_pcie_latency(raw: dict, snic: str, rec: dict) -> dict:
    """`raw` with sNIC `snic`'s PCIe crossing latency (median and p99 of `rec`) and its provenance."""
    if not isinstance(snic, str) or snic == "host" or not _LOC_RE.match(snic):
        raise PlacementInputError(f"measurement.snic: {snic!r} is not an sNIC id")
    validate_record(f"measurement.{snic}", rec)
    links = {**raw.get(PCIE_KEY, {}), snic: {"latency_us": rec["median"], "latency_p99_us": rec["p99"],
                                             "measured": rec}}  # fmt: skip
    return {**raw, PCIE_KEY: links}


def pcie_latency(section: dict, snics: list[str], stat: str = "median") -> dict[str, float]:
    """sNIC id -> its measured PCIe crossing latency (`stat`: median or p99). An sNIC with no measurement of
    its own gets the largest measured one (the emulated sNICs' links are alike); none measured: {}."""
    key = "latency_us" if stat == "median" else "latency_p99_us"
    got = {s: float(v.get(key, v["latency_us"])) for s, v in section.items()}
    if not got:
        return {}
    worst = max(got.values())
    return {s: got.get(s, worst) for s in snics}


def with_latency_stat(profiles: dict[str, dict], stat: str) -> dict[str, dict]:
    """`profiles` whose `latency_us` is the chosen statistic's (the placement model reads `latency_us`)."""
    if stat not in STATS:
        raise PlacementInputError(f"latency statistic: {stat!r} is not one of {', '.join(STATS)}")
    out = {}
    for name, prof in profiles.items():
        lat = latency_for(prof, stat)
        out[name] = {**prof, "latency_us": lat} if lat else prof
    return out


def latency_for(prof: dict, stat: str = "median") -> dict | None:
    """The node's `latency_us` ({"host", "nic"}) from a profile for the chosen statistic (p99 falls back to the
    median where no p99 was measured); None when the profile has none."""
    med = prof.get("latency_us")
    if stat == "p99" and prof.get("latency_p99_us"):
        return {**(med or {}), **prof["latency_p99_us"]}
    return med or None
