"""Per-NF-type resource profiles, shipped defaults + overrides.

Cost is affine per side: host cores = b_host x instances + r_host x load, sNIC units = b_nic x instances +
r_nic x load (load: Gbit/s in + out). A profile file maps an NF type to `{"r_host", "r_nic", "b_host"?,
"b_nic"?, "measured"?}` (b_* default 0). `measured` is provenance, per side (`"r_host"`/`"r_nic"`): either
one point `{"date", "command", "used", "load_gbps"}` (r = used / load, base 0) or a least-squares fit of
base + slope over several rates `{"date", "command", "points": [{"used", "load_gbps"}, ...], "residual"}`
(`residual`: root mean square of used - fit, same unit as `used`: host cores for r_host, sNIC placement
units for r_nic). Keys starting with `_` are comments and are kept when a file is updated."""

from __future__ import annotations

import json
import re
from pathlib import Path

from placement.latency_profiles import PCIE_KEY, latency_for, validate_nf_latency, validate_pcie
from placement.model import PlacementInputError

DEFAULT_PROFILES = Path(__file__).with_name("profiles.json")
# Measured on the emulated host (bench/agent/run.py --profile): r_nic in cores of the sNIC's CPU cgroup
EMULATED_PROFILES = Path(__file__).with_name("profiles-emulated.json")
_PROVENANCE = {"date", "command", "used", "load_gbps"}
_FIT_PROVENANCE = {"date", "command", "points", "residual"}
_KEYS = {"r_host", "r_nic", "b_host", "b_nic", "measured", "latency_us", "latency_p99_us"}


def load_profiles(path: str | Path | None = None) -> dict[str, dict]:
    """Shipped profiles, overlaid with `path` (same shape) when given; a `path` that does not exist is an
    error (a mistyped file name must not silently mean the shipped profiles)."""
    data = {k: v for k, v in json.loads(DEFAULT_PROFILES.read_text()).items() if not k.startswith("_")}
    if path:
        if not Path(path).is_file():
            raise PlacementInputError(f"profiles: no such file: {path}")
        for name, prof in read_profile_file(path).items():
            if not name.startswith("_") and name != PCIE_KEY:
                data[name] = {**data.get(name, {}), **prof}
    return data


def load_pcie_section(path: str | Path | None) -> dict:
    """The file's measured PCIe links (its reserved `pcie` key: sNIC id -> latency), {} without a file."""
    return read_profile_file(path).get(PCIE_KEY, {}) if path else {}


def profile_file(path: str | Path | None = None) -> dict:
    """A whole profile file as the agent's `--profiles` reads it: the shipped profiles overlaid with `path`,
    and `path`'s measured PCIe links (the reserved `pcie` key), so a copy written from it (e.g. with some
    figures changed) predicts what `path` does: the crossing latency included."""
    links = load_pcie_section(path)
    return load_profiles(path) | ({PCIE_KEY: links} if links else {})


def node_costs(prof: dict, latency_stat: str = "median") -> dict[str, float]:
    """The cost fields of a placement NF vertex from a profile: r_host, r_nic, b_host/b_nic when set, and its
    per-location `latency_us` (the profile's medians, or with `latency_stat` "p99" its 99th percentiles)."""
    out = {"r_host": prof.get("r_host", 0.0), "r_nic": prof.get("r_nic", 0.0)}
    out |= {k: prof[k] for k in ("b_host", "b_nic") if prof.get(k)}
    lat = latency_for(prof, latency_stat)
    return out | ({"latency_us": lat} if lat else {})


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
        if name == PCIE_KEY:
            validate_pcie(prof)
        elif not name.startswith("_"):
            validate_profile(name, prof)
    return raw


def validate_profile(name: str, prof: object) -> None:
    if not isinstance(prof, dict) or set(prof) - _KEYS:
        raise PlacementInputError(
            f"profiles.{name}: expected an object with r_host and/or r_nic (and b_host, b_nic, measured)"
        )
    validate_nf_latency(name, prof)
    for key, val in prof.items():
        if key == "measured":
            _validate_provenance(
                name, {k: v for k, v in val.items() if k != "latency_us"} if isinstance(val, dict) else val
            )
        elif key in ("latency_us", "latency_p99_us"):
            continue  # validate_nf_latency
        elif isinstance(val, bool) or not isinstance(val, int | float) or val < 0:
            raise PlacementInputError(f"profiles.{name}.{key}: must be a non-negative number, got {val!r}")


def _validate_provenance(name: str, val: object) -> None:
    if not isinstance(val, dict) or set(val) - {"r_host", "r_nic"}:
        raise PlacementInputError(
            f"profiles.{name}.measured: expected an object with r_host, r_nic and/or latency_us"
        )
    for side, rec in val.items():
        where = f"profiles.{name}.measured.{side}"
        if not isinstance(rec, dict) or set(rec) not in (_PROVENANCE, _FIT_PROVENANCE):
            raise PlacementInputError(
                f"{where}: expected exactly {', '.join(sorted(_PROVENANCE))} "
                f"or {', '.join(sorted(_FIT_PROVENANCE))}"
            )
        for k in ("date", "command"):
            if not isinstance(rec[k], str) or not rec[k]:
                raise PlacementInputError(f"{where}.{k}: must be a non-empty string")
        if "points" in rec:
            pts = rec["points"]
            if not isinstance(pts, list) or len(pts) < 2:
                raise PlacementInputError(f"{where}.points: expected a list of at least two points")
            for j, pt in enumerate(pts):
                if not isinstance(pt, dict) or set(pt) != {"used", "load_gbps"}:
                    raise PlacementInputError(f"{where}.points[{j}]: expected exactly load_gbps, used")
                for k in ("used", "load_gbps"):
                    _nonneg(f"{where}.points[{j}].{k}", pt[k])
            _nonneg(f"{where}.residual", rec["residual"])
        else:
            for k in ("used", "load_gbps"):
                _nonneg(f"{where}.{k}", rec[k])


def _nonneg(where: str, v: object) -> None:
    if isinstance(v, bool) or not isinstance(v, int | float) or v != v or v < 0 or v == float("inf"):
        raise PlacementInputError(f"{where}: must be a non-negative number")


def fit_affine(points: list[tuple[float, float]]) -> tuple[float, float, float]:
    """(base, slope, residual) of used = base + slope x load over `points` of (used, load) by least squares,
    with base >= 0 and slope >= 0 (a negative one is refitted at 0); residual = RMS of used - fit.
    One point: slope through the origin (base 0, residual 0)."""
    if not points:
        raise PlacementInputError("measurement: no points")
    for used, load in points:
        if not (used >= 0 and load > 0) or used == float("inf") or load == float("inf"):
            raise PlacementInputError("measurement: need cores >= 0 and gbps_through > 0 at every point")
    n = len(points)
    if n == 1 or len({round(ld, 9) for _, ld in points}) == 1:
        slope, base = sum(u for u, _ in points) / sum(ld for _, ld in points), 0.0
    else:
        mu = sum(u for u, _ in points) / n
        ml = sum(ld for _, ld in points) / n
        slope = sum((ld - ml) * (u - mu) for u, ld in points) / sum((ld - ml) ** 2 for _, ld in points)
        base = mu - slope * ml
        if base < 0:  # through the origin
            slope, base = sum(u * ld for u, ld in points) / sum(ld * ld for _, ld in points), 0.0
        elif slope < 0:  # flat: all base
            slope, base = 0.0, mu
    res = (sum((u - base - slope * ld) ** 2 for u, ld in points) / n) ** 0.5
    return base, slope, res


def from_measurement(cores: float, gbps_through: float, on: str) -> dict[str, float]:
    """Profile entry from a measurement: `cores` used while `gbps_through` Gbit/s passed (load = 2x through)."""
    if gbps_through <= 0 or cores < 0:
        raise PlacementInputError("measurement: need cores >= 0 and gbps_through > 0")
    if on not in ("host", "nic"):
        raise PlacementInputError(f"measurement.on: {on!r} is not 'host' or 'nic'")
    return {f"r_{on}": round(cores / (2 * gbps_through), 6)}


def record_measurement(
    raw: dict,
    nf_type: str,
    on: str,
    cores: float | list[tuple[float, float]],
    gbps_through: float | None,
    date: str,
    command: str,
) -> dict:
    """`raw` (a profile file's content) with the measured r_host/r_nic of `nf_type` and its provenance.

    `cores` and `gbps_through`: one measurement (r = cores / load, the side's base cost set to 0), or
    `cores` a list of (cores, gbps_through) at two or more rates and `gbps_through` None: base b_host/b_nic
    and slope fitted by least squares (`fit_affine`), the residual kept in the provenance."""
    if not isinstance(nf_type, str) or not re.fullmatch(r"[a-z][a-z0-9_-]{0,31}", nf_type):
        raise PlacementInputError(f"measurement.type: {nf_type!r} is not an NF type name ([a-z][a-z0-9_-]*)")
    if on not in ("host", "nic"):
        raise PlacementInputError(f"measurement.on: {on!r} is not 'host' or 'nic'")
    side, base_key = f"r_{on}", f"b_{on}"
    old = raw.get(nf_type, {})
    if isinstance(cores, list) and len(cores) >= 2:
        pts = [(u, 2 * g) for u, g in cores]
        base, slope, res = fit_affine(pts)
        entry = {side: round(slope, 6), base_key: round(base, 6)}
        rec = {"date": date, "command": command, "residual": round(res, 6),
               "points": [{"used": round(u, 6), "load_gbps": round(ld, 6)} for u, ld in pts]}  # fmt: skip
    else:
        if isinstance(cores, list):
            if not cores:
                raise PlacementInputError("measurement: no points")
            ((cores, gbps_through),) = cores
        entry = {**from_measurement(cores, gbps_through, on), base_key: 0.0}
        rec = {"date": date, "command": command, "used": round(cores, 6),
               "load_gbps": round(2 * gbps_through, 6)}  # fmt: skip
    prov = {**old.get("measured", {}), side: rec}
    merged = {**old, **entry, "measured": prov}
    if not merged[base_key]:
        del merged[base_key]  # a single-point profile keeps the old file shape
    out = {**raw, nf_type: merged}
    validate_profile(nf_type, out[nf_type])
    return out
