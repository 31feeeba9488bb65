"""Per-NF-type resource profiles (r_host, r_nic: cores per Gbit/s of load), shipped defaults + overrides.

A profile file maps an NF type to `{"r_host", "r_nic", "measured"?}`; `measured` is provenance, per side
(`"r_host"`/`"r_nic"`): `{"date", "command", "used", "load_gbps"}` of the measurement the value came from
(`used`: host cores for r_host, sNIC placement units for r_nic).
Keys starting with `_` are comments and are kept when a file is updated."""

from __future__ import annotations

import json
import re
from pathlib import Path

from placement.model import PlacementInputError

DEFAULT_PROFILES = Path(__file__).with_name("profiles.json")
# Measured on the emulated host (bench/agent/run.py --profile): r_nic in cores of the sNIC's CPU cgroup
EMULATED_PROFILES = Path(__file__).with_name("profiles-emulated.json")
_PROVENANCE = {"date", "command", "used", "load_gbps"}


def load_profiles(path: str | Path | None = None) -> dict[str, dict]:
    """Shipped profiles, overlaid with `path` (same shape) when given."""
    data = {k: v for k, v in json.loads(DEFAULT_PROFILES.read_text()).items() if not k.startswith("_")}
    if path:
        for name, prof in read_profile_file(path).items():
            if not name.startswith("_"):
                data[name] = {**data.get(name, {}), **prof}
    return data


def read_profile_file(path: str | Path) -> dict:
    """A profile file as written (comments included), validated; {} when it does not exist yet."""
    p = Path(path)
    try:
        raw = json.loads(p.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise PlacementInputError(f"profiles: cannot read {path}: {exc}") from None
    if not isinstance(raw, dict):
        raise PlacementInputError(f"profiles: {path}: expected a JSON object")
    for name, prof in raw.items():
        if not name.startswith("_"):
            validate_profile(name, prof)
    return raw


def validate_profile(name: str, prof: object) -> None:
    if not isinstance(prof, dict) or set(prof) - {"r_host", "r_nic", "measured"}:
        raise PlacementInputError(
            f"profiles.{name}: expected an object with r_host and/or r_nic (and measured)"
        )
    for key, val in prof.items():
        if key == "measured":
            _validate_provenance(name, val)
        elif isinstance(val, bool) or not isinstance(val, int | float) or val < 0:
            raise PlacementInputError(f"profiles.{name}.{key}: must be a non-negative number, got {val!r}")


def _validate_provenance(name: str, val: object) -> None:
    if not isinstance(val, dict) or set(val) - {"r_host", "r_nic"}:
        raise PlacementInputError(f"profiles.{name}.measured: expected an object with r_host and/or r_nic")
    for side, rec in val.items():
        where = f"profiles.{name}.measured.{side}"
        if not isinstance(rec, dict) or set(rec) != _PROVENANCE:
            raise PlacementInputError(f"{where}: expected exactly {', '.join(sorted(_PROVENANCE))}")
        for k in ("date", "command"):
            if not isinstance(rec[k], str) or not rec[k]:
                raise PlacementInputError(f"{where}.{k}: must be a non-empty string")
        for k in ("used", "load_gbps"):
            if isinstance(rec[k], bool) or not isinstance(rec[k], int | float) or rec[k] < 0:
                raise PlacementInputError(f"{where}.{k}: must be a non-negative number")


def from_measurement(cores: float, gbps_through: float, on: str) -> dict[str, float]:
    """Profile entry from a measurement: `cores` used while `gbps_through` Gbit/s passed (load = 2x through)."""
    if gbps_through <= 0 or cores < 0:
        raise PlacementInputError("measurement: need cores >= 0 and gbps_through > 0")
    if on not in ("host", "nic"):
        raise PlacementInputError(f"measurement.on: {on!r} is not 'host' or 'nic'")
    return {f"r_{on}": round(cores / (2 * gbps_through), 6)}


def record_measurement(
    raw: dict, nf_type: str, on: str, cores: float, gbps_through: float, date: str, command: str
) -> dict:
    """`raw` (a profile file's content) with the measured r_host/r_nic of `nf_type` and its provenance."""
    if not isinstance(nf_type, str) or not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", nf_type):
        raise PlacementInputError(f"measurement.type: {nf_type!r} is not an NF type name ([a-z][a-z0-9_-]*)")
    entry = from_measurement(cores, gbps_through, on)
    side = f"r_{on}"
    old = raw.get(nf_type, {})
    prov = {**old.get("measured", {}), side: {"date": date, "command": command, "used": round(cores, 6),
                                              "load_gbps": round(2 * gbps_through, 6)}}  # fmt: skip
    out = {**raw, nf_type: {**old, **entry, "measured": prov}}
    validate_profile(nf_type, out[nf_type])
    return out
