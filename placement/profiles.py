"""Per-NF-type resource profiles (r_host, r_nic: cores per Gbit/s of load), shipped defaults + overrides."""

from __future__ import annotations

import json
from pathlib import Path

from placement.model import PlacementInputError

DEFAULT_PROFILES = Path(__file__).with_name("profiles.json")


def load_profiles(path: str | Path | None = None) -> dict[str, dict[str, float]]:
    """Shipped profiles, overlaid with `path` (same shape) when given."""
    data = {k: v for k, v in json.loads(DEFAULT_PROFILES.read_text()).items() if not k.startswith("_")}
    if path:
        try:
            extra = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise PlacementInputError(f"profiles: cannot read {path}: {exc}") from None
        for name, prof in extra.items():
            if name.startswith("_"):
                continue
            validate_profile(name, prof)
            data[name] = {**data.get(name, {}), **prof}
    return data


def validate_profile(name: str, prof: object) -> None:
    if not isinstance(prof, dict) or set(prof) - {"r_host", "r_nic"}:
        raise PlacementInputError(f"profiles.{name}: expected an object with r_host and/or r_nic")
    for key, val in prof.items():
        if isinstance(val, bool) or not isinstance(val, int | float) or val < 0:
            raise PlacementInputError(f"profiles.{name}.{key}: must be a non-negative number, got {val!r}")


def from_measurement(cores: float, gbps_through: float, on: str) -> dict[str, float]:
    """Profile entry from a measurement: `cores` used while `gbps_through` Gbit/s passed (load = 2x through)."""
    if gbps_through <= 0 or cores < 0:
        raise PlacementInputError("measurement: need cores >= 0 and gbps_through > 0")
    if on not in ("host", "nic"):
        raise PlacementInputError(f"measurement.on: {on!r} is not 'host' or 'nic'")
    return {f"r_{on}": round(cores / (2 * gbps_through), 6)}
