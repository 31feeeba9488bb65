"""The placement problem of docs/placement.md: parsing, validation and exact (rational) arithmetic.

Traffic and ratios arrive as JSON numbers; they are read as exact fractions (via their decimal text), so
costs and budgets are compared without float rounding, and the solver scales them to integers exactly.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Set
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

HOST = "host"
KINDS = ("nf", "table", "vm", "port")
PLACED = ("nf", "table")  # the kinds the solver places (a virtual switch table is placed like an NF)
RULES = "rules"  # the sNIC resource that a table's rules use (an sNIC's max_rules; reserved name)


LOADS_DEN_MAX = 1 << 256  # Problem.loads sums over one common denominator up to this size


class PlacementInputError(ValueError):
    """Invalid placement instance; the message names the offending field."""


@dataclass(frozen=True, slots=True)  # slots: a cheaper init (thousands per parse)
class Node:
    id: str
    kind: str
    r_host: Fraction = Fraction(0)
    r_nic: Fraction = Fraction(0)
    pinned: str | None = None
    location: str | None = None  # current location, for tie-breaks and move budgets
    needs: dict[str, Fraction] = field(default_factory=dict)  # other sNIC resources (e.g. memory) it uses
    b_host: Fraction = Fraction(0)  # host cores per running instance, whatever the load (affine cost)
    b_nic: Fraction = Fraction(0)  # sNIC units per running instance
    instances: int = 1
    latency_host: Fraction = Fraction(0)  # per-packet latency (us) it adds on the host
    latency_nic: Fraction = Fraction(0)  # ... and on an sNIC
    # Table only: Gbit/s it classifies that cross PCIe wherever it runs (wire <-> VM traffic: the sNIC runs
    # its offloaded tables on the way in, the host its own on the way out): load, but on no link.
    through: Fraction = Fraction(0)

    @property
    def placed(self) -> bool:
        """Whether the solver places this vertex (an NF or a switch table; VMs and ports are fixed)."""
        return self.kind in PLACED

    def latency(self, loc: str) -> Fraction:
        """Per-packet latency (us) the vertex adds at location `loc`."""
        return self.latency_host if loc == HOST else self.latency_nic


@dataclass(frozen=True, slots=True)
class Edge:
    src: str
    dst: str
    gbps: Fraction


PCIE_DIRECTIONS = ("up", "down")  # up: sNIC -> host, down: host -> sNIC


@dataclass(frozen=True)
class Snic:
    id: str
    capacity: Fraction
    pcie_gbps: Fraction
    resources: dict[str, Fraction] = field(default_factory=dict)  # further capacities, e.g. {"mem_gb": 8}
    # Gbit/s per direction on the link that no vertex accounts for (e.g. VM <-> wire traffic through no NF,
    # as measured by the agent): it uses the link whatever the placement.
    background: dict[str, Fraction] = field(
        default_factory=lambda: dict.fromkeys(PCIE_DIRECTIONS, Fraction(0))
    )
    pcie_latency: Fraction = Fraction(0)  # us a packet takes to cross this sNIC's link (either direction)

    def pcie_budget(self, direction: str) -> Fraction:
        """Gbit/s of the link left for the vertices' crossings in `direction` ("up", "down", or "both" for
        the shared model's one budget): pcie_gbps minus the background there (negative: over already)."""
        dirs = PCIE_DIRECTIONS if direction == "both" else (direction,)
        return self.pcie_gbps - sum((self.background[d] for d in dirs), Fraction(0))


@dataclass(frozen=True)
class Chain:
    """A declared path of vertices (the packets' order) with an optional latency SLO."""

    id: str
    vertices: tuple[str, ...]
    latency_us: Fraction | None = None


def chain_latency(problem: Problem, chain: Chain, placement: dict[str, str]) -> Fraction:
    """Per-packet latency of `chain` under `placement`: its vertices' latencies where they run, plus the
    link latency of every PCIe crossing between consecutive vertices (sNIC to sNIC crosses both links)."""
    snic = {s.id: s for s in problem.snics}
    total = Fraction(0)
    prev = None
    for v in chain.vertices:
        loc = placement[v]
        total += problem.nodes[problem.index[v]].latency(loc)
        if prev is not None and prev != loc:
            total += sum((snic[x].pcie_latency for x in (prev, loc) if x != HOST), Fraction(0))
        prev = loc
    return total


@dataclass
class Problem:
    nodes: list[Node]
    edges: list[Edge]
    snics: list[Snic]
    pcie_model: str = "duplex"  # duplex: a budget per direction; shared: one budget for both (the paper)
    # inputs read inexactly (floats with more digits than EXACT_DIGITS): (field, given, used, relative error)
    inexact: list[tuple[str, float, Fraction, float]] = field(default_factory=list)
    chains: list[Chain] = field(default_factory=list)
    index: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.index = {n.id: i for i, n in enumerate(self.nodes)}

    @property
    def resource_names(self) -> list[str]:
        """Resources besides `capacity` that every sNIC declares (multi-resource capacity)."""
        return sorted(self.snics[0].resources) if self.snics else []

    @property
    def locations(self) -> list[str]:
        return [HOST] + [s.id for s in self.snics]

    def loads(self) -> list[Fraction]:
        """load_i = sum of traffic in and out of vertex i (Gbit/s), plus a table's `through_gbps`."""
        vals = [n.through for n in self.nodes] + [e.gbps for e in self.edges]
        den = 1
        for d in {v.denominator for v in vals}:
            den = den * d // math.gcd(den, d)
            if den > LOADS_DEN_MAX:  # many unrelated denominators: exact fractions, one addition at a time
                load = [2 * n.through for n in self.nodes]  # in + out, like an edge through it
                for e in self.edges:
                    load[self.index[e.src]] += e.gbps
                    load[self.index[e.dst]] += e.gbps
                return load
        # The same sums as integers over one common denominator (a Fraction addition per edge end cost most of
        # the plain model's build at 5,000 vertices); Fraction(n, den) reduces them to the same values.
        num = [2 * n.through.numerator * (den // n.through.denominator) for n in self.nodes]
        for e in self.edges:
            g = e.gbps.numerator * (den // e.gbps.denominator)
            num[self.index[e.src]] += g
            num[self.index[e.dst]] += g
        return [Fraction(x, den) for x in num]

    def host_costs(self, loads: list[Fraction] | None = None) -> list[Fraction]:
        """Per vertex: host cores it costs on the host (NFs and tables: b_host x instances + r_host x load; else 0).
        `loads`: self.loads(), if the caller has it."""
        return [
            n.b_host * n.instances + n.r_host * ld if n.placed else Fraction(0)
            for n, ld in zip(self.nodes, self.loads() if loads is None else loads, strict=True)
        ]

    def nic_costs(self, loads: list[Fraction] | None = None) -> list[Fraction]:
        """Per vertex: sNIC capacity units it uses on an sNIC (NFs and tables: b_nic x instances + r_nic x load).
        `loads`: self.loads(), if the caller has it."""
        return [
            n.b_nic * n.instances + n.r_nic * ld if n.placed else Fraction(0)
            for n, ld in zip(self.nodes, self.loads() if loads is None else loads, strict=True)
        ]

    def location_booleans(self) -> int:
        """The plain model's size: one boolean per allowed location of each vertex with a choice."""
        return sum(len(a) for a in (self.allowed(n) for n in self.nodes) if len(a) > 1)

    def allowed(self, node: Node) -> list[str]:
        """Where a vertex may go: VMs on host, ports on their sNIC, pinned NFs/tables where pinned."""
        if node.kind == "vm":
            return [HOST]
        if node.pinned:
            return [node.pinned]
        return self.locations


# Any finite JSON number is accepted (docs/placement.md "Numbers"). Read exactly: an integer, a number with
# at most EXACT_DIGITS digits after the decimal point or at most EXACT_DIGITS significant digits, and every
# numeric string ("1/3", "0.1", ...). Any other float (a measured ratio such as 0.2777777777777778 = 5/18 as
# a float, a counter-derived rate with 16 digits) is replaced by the nearest rational of a fixed rule, within
# relative error REL_ERROR_BOUND, and the output reports it (`inexact_inputs`):
# 1. the simplest fraction p/q with q <= SMALL_DEN within relative 1e-14 of it (a float computed as a ratio
#    of small numbers, e.g. 5/18, is that ratio: floats carry ~1.1e-16), else
# 2. the float rounded half-even to EXACT_DIGITS significant digits, and never to fewer than EXACT_DIGITS
#    decimal places (so every such value lies on the same 10^-9 grid as the exact ones of magnitude >= 1).
EXACT_DIGITS = 9
SMALL_DEN = 10_000
SMALL_DEN_TOL = Fraction(1, 10**14)
REL_ERROR_BOUND = 5e-9  # 0.5 x 10^(1 - EXACT_DIGITS): half a unit of the 9th significant digit


def _decimal(value: float) -> tuple[int, int, int]:
    """(sign, digits, exponent) of the shortest decimal text of the finite float `value` (its repr), the
    value being sign x digits x 10^exponent: Decimal(repr(value)) without Decimal (parsing is on the hot
    path of every instance: thousands of numbers)."""
    text = repr(value)
    if text[0] != "-" and "e" not in text:  # the common case, e.g. 0.11444773114541912: one split
        point = text.index(".")
        return 1, int(text[:point] + text[point + 1 :]), point + 1 - len(text)
    sign = 1
    if text[0] == "-":
        sign, text = -1, text[1:]
    exponent = 0
    if "e" in text:
        text, e = text.split("e")
        exponent = int(e)
    if "." in text:
        whole, frac = text.split(".")
        text, exponent = whole + frac, exponent - len(frac)
    return sign, int(text), exponent


# 10^k for every k the rule below needs: a finite float's decimal text has an exponent in [-324, 308].
_POW10 = [10**k for k in range(400)]


def _ratio(digits: int, exponent: int) -> Fraction:
    return Fraction(digits * _POW10[exponent]) if exponent >= 0 else Fraction(digits, _POW10[-exponent])


def _limit_denominator(n: int, d: int, max_den: int) -> tuple[int, int]:
    """Fraction(n, d).limit_denominator(max_den) for n, d > 0 coprime, on integers only (the same
    continued-fraction algorithm and tie rule as the standard library's)."""
    if d <= max_den:
        return n, d
    p0, q0, p1, q1 = 0, 1, 1, 0
    nn, dd = n, d
    while True:
        a = nn // dd
        q2 = q0 + a * q1
        if q2 > max_den:
            break
        p0, q0, p1, q1 = p1, q1, p0 + a * p1, q2
        nn, dd = dd, nn - a * dd
    k = (max_den - q0) // q1
    pb, qb = p0 + k * p1, q0 + k * q1
    # |p1/q1 - n/d| <= |pb/qb - n/d|, cross-multiplied by d * q1 * qb > 0.
    if abs(p1 * d - n * q1) * qb <= abs(pb * d - n * qb) * q1:
        return p1, q1
    return pb, qb


def rationalize(value: float) -> Fraction:
    """The rational the solver uses for the finite float `value` (the rule above; exact when it can be)."""
    return _rationalize(value)[0]


_READINGS: dict[float, tuple[Fraction, int, int, float | None]] = {}  # per distinct float, see _rationalize
_READINGS_MAX = 1 << 16  # a re-placement re-reads mostly the same measured floats; beyond this, start over


def _rationalize(value: float) -> tuple[Fraction, int, int, float | None]:
    """(the rational used for `value`, numerator and denominator of the exact value of its decimal text,
    the relative error between them or None when equal: computed once per distinct float)."""
    got = _READINGS.get(value)
    if got is None:
        got = _remember(value, _rule(value))
    return got


def _remember(value: float, rule: tuple[Fraction, int, int]) -> tuple[Fraction, int, int, float | None]:
    """Cache `value`'s reading `rule` (from _rule) with its relative error."""
    frac, gn, gd = rule
    err = abs(gn * frac.denominator - frac.numerator * gd)
    return _keep(value, (frac, gn, gd, (err / abs(gn * frac.denominator) if err else None)))


def _keep(
    value: float, reading: tuple[Fraction, int, int, float | None]
) -> tuple[Fraction, int, int, float | None]:
    """Cache `reading` (rational, text's numerator and denominator, relative error) for `value`."""
    if len(_READINGS) >= _READINGS_MAX:
        _READINGS.clear()
    _READINGS[value] = reading
    return reading


def read_floats(values: Iterable[float]) -> None:
    """Read every distinct finite float of `values` not read yet, at once: the continued fractions of
    step 1 (above) for all of them in one vectorised pass, which proves for nearly every measured float
    that no small ratio is near it, so only the rare others take step 1's exact integer search; those
    proven far are rounded by step 2 at once (_on_grid). The readings are those of _rule (the same
    rationals and errors), cached for _rationalize."""
    todo = [v for v in set(values) if v not in _READINGS and math.isfinite(v)]
    if not todo:
        return
    far = _far_from_small_ratios(np.abs(np.array(todo, dtype=np.float64))).tolist()
    near = [v for v, no_ratio in zip(todo, far, strict=True) if not no_ratio]
    for value in near:
        _remember(value, _rule(value))
    _on_grid([v for v, no_ratio in zip(todo, far, strict=True) if no_ratio])


_P10 = np.array(_POW10[:19], dtype=np.int64)  # the powers of ten int64 holds


def _on_grid(values: list[float]) -> None:
    """Cache the readings of `values`, floats for which step 1 is known to fail: step 2 (rounding the
    decimal text half-even onto its grid) on int64 arrays for every value whose text and grid fit 10^18
    (measured 15-17-digit floats of magnitude >= 1e-10), _rule for the others. Same readings as _rule."""
    if not values:
        return
    # A float's decimal text has at most 17 digits and an exponent in [-324, 308]: all fit int64.
    sign, digits, exponent = (
        np.array(column, dtype=np.int64) for column in zip(*map(_decimal, values), strict=True)
    )
    width = np.searchsorted(_P10, digits, side="right")  # digits in [10^(width-1), 10^width)
    quantum = np.minimum(-EXACT_DIGITS, exponent + width - EXACT_DIGITS)  # as _rule: magnitude - 8
    shift = quantum - exponent
    fits = (
        (exponent < -EXACT_DIGITS)
        & (width > EXACT_DIGITS)
        & (exponent >= -18)
        & (quantum >= -18)
        & (shift > 0)
    )
    unit = _P10[np.where(fits, shift, 1)]
    kept, rest = digits // unit, digits % unit
    half = unit // 2
    kept += (rest > half) | ((rest == half) & (kept % 2 == 1))  # half-even, as _rule
    off = np.abs(kept * unit - digits)  # |used - given| x 10^-exponent
    grid = _P10[np.where(fits, -quantum, 0)]
    g = np.gcd(kept, grid)
    text = _P10[np.where(fits, -exponent, 0)]
    h = np.gcd(digits, text)
    rows = zip(values, fits.tolist(), sign.tolist(), (kept // g).tolist(), (grid // g).tolist(),
               (digits // h).tolist(), (text // h).tolist(), off.tolist(), digits.tolist(), strict=True)  # fmt: skip
    for value, ok, sg, p, q, gn, gd, err, dig in rows:
        if not ok:
            _remember(value, _rule(value, small_ratio=False))
            continue
        # the relative error |kept x 10^shift - digits| / digits, the same rational (and float) as _remember's
        _keep(value, (Fraction(sg * p, q), sg * gn, gd, err / dig if err else None))


# Step 1's search is skipped for |x| in [2^-8, _LEGENDRE_MAX): there any p/q (q <= SMALL_DEN) within
# SMALL_DEN_TOL of the decimal text's value is within (SMALL_DEN_TOL + 2^-52) x of the float x (the text
# rounds to x), below 1/(2 q^2), so by Legendre's theorem it is a convergent of x's continued fraction.
# x = m / 2^k exactly with k <= 61, so the expansion runs exactly on int64.
_LEGENDRE_MAX = 1 / (2 * SMALL_DEN**2 * (1.01 * float(SMALL_DEN_TOL) + 2.0**-52))
# Partial quotients are capped here (> _LEGENDRE_MAX, so a capped one still ends the expansion: q > SMALL_DEN)
# to keep the products within int64.
_QUOTIENT_CAP = 1 << 20


def _far_from_small_ratios(x: np.ndarray) -> np.ndarray:
    """Per float x > 0 (an array): True when proven that no p/q with q <= SMALL_DEN lies within relative
    SMALL_DEN_TOL of the value of x's decimal text, i.e. step 1 of the rule fails; False: not proven."""
    fits = (x >= 2.0**-8) & (x < _LEGENDRE_MAX)
    mant, exp = np.frexp(np.where(fits, x, 1.0))  # x = mant x 2^exp, mant in [0.5, 1)
    num = (mant * 2.0**53).astype(np.int64)  # exact: 53-bit significand
    den = np.left_shift(np.ones_like(num), 53 - exp.astype(np.int64))
    p0, q0 = np.zeros_like(num), np.ones_like(num)  # convergents k-2 and k-1
    p1, q1 = np.ones_like(num), np.zeros_like(num)
    near = np.zeros_like(fits)
    live = fits.copy()
    while live.any():
        a = np.minimum(num // np.where(live, den, 1), _QUOTIENT_CAP)
        p2, q2 = p0 + a * p1, q0 + a * q1
        live &= q2 <= SMALL_DEN
        # |q x - p| <= 2 SMALL_DEN_TOL q x in floats: the products' rounding (~1e-16 q x) stays inside the
        # doubled tolerance, so no convergent within SMALL_DEN_TOL (+ the text's offset) is missed.
        near |= live & (np.abs(q2 * x - p2) <= 2 * float(SMALL_DEN_TOL) * q2 * x)
        p0, q0 = np.where(live, p1, p0), np.where(live, q1, q0)
        p1, q1 = np.where(live, p2, p1), np.where(live, q2, q1)
        num, den = np.where(live, den, num), np.where(live, num % np.where(live, den, 1), den)
        live &= den != 0  # x is p1/q1 exactly (and near)
    return fits & ~near


def _rule(value: float, small_ratio: bool = True) -> tuple[Fraction, int, int]:
    """_rationalize without the error; `small_ratio` False: step 1 is known to fail (read_floats)."""
    sign, digits, exponent = _decimal(value)
    if exponent >= 0:
        exact = Fraction(sign * digits * _POW10[exponent])
        return exact, exact.numerator, 1
    den = _POW10[-exponent]
    width = len(str(digits))
    if exponent >= -EXACT_DIGITS or digits == 0 or width <= EXACT_DIGITS:
        exact = Fraction(sign * digits, den)
        return exact, exact.numerator, exact.denominator
    g = math.gcd(digits, den)
    n, d = digits // g, den // g
    if small_ratio:
        p, q = _limit_denominator(n, d, SMALL_DEN)
        # |p/q - n/d| <= SMALL_DEN_TOL x n/d, cross-multiplied by q x d.
        if abs(p * d - n * q) * SMALL_DEN_TOL.denominator <= SMALL_DEN_TOL.numerator * n * q:
            return Fraction(sign * p, q), sign * n, d
    magnitude = exponent + width - 1  # floor(log10 |value|)
    quantum = min(-EXACT_DIGITS, magnitude - EXACT_DIGITS + 1)
    shift = quantum - exponent
    if shift <= 0:
        return Fraction(sign * n, d), sign * n, d
    kept, rest = divmod(digits, _POW10[shift])
    half = 5 * _POW10[shift - 1]
    if rest > half or (rest == half and kept % 2):  # half-even, as Decimal.quantize(ROUND_HALF_EVEN)
        kept += 1
    return _ratio(sign * kept, quantum), sign * n, d


def round_onto(value: float, scale: int) -> tuple[Fraction, float] | None:
    """The multiple of 1/`scale` nearest the float `value` (the value of its decimal text) and its relative
    error, when that error is within REL_ERROR_BOUND and the multiple is not 0 (nor of the other sign);
    None otherwise. A re-placement reads a changed measured float onto the scale it keeps (reprepare.py)
    with it, when the rule above gives a rational on a finer grid."""
    _, gn, gd, _ = _rationalize(value)
    if gn == 0 or scale <= 0:
        return None
    k = round(Fraction(gn * scale, gd))
    if k == 0 or (k < 0) != (gn < 0):
        return None
    off = abs(k * gd - gn * scale)
    # off / |gn x scale| <= 5 / 10^9, cross-multiplied
    if off * 10**EXACT_DIGITS > 5 * abs(gn * scale):
        return None
    return Fraction(k, scale), off / abs(gn * scale)


# The largest magnitude a number may have: a double's (JSON numbers are doubles to most peers). Python's json
# reads an integer of any length: 1e400 written out was accepted, and the solve then raised OverflowError where
# it reported a figure as a float (a 500 for the agent's REST API).
_MAX_MAGNITUDE = int(np.finfo(np.float64).max)  # an int: the edges' fast path compares ints with it


def _too_large(where: str, value: Any) -> PlacementInputError:
    got = f"an integer of {int(value).bit_length()} bits" if isinstance(value, int) else repr(value)
    return PlacementInputError(
        f"{where}: out of range (at most {float(_MAX_MAGNITUDE)!r} in magnitude), got {got}"
    )


def _exact(where: str, value: Any, *, nonneg: bool = True, inexact: list | None = None) -> Fraction:
    kind = type(value)
    if kind is int:  # the common cases first (JSON gives exactly int or float; bool is another type)
        if nonneg and value < 0:
            raise PlacementInputError(f"{where}: must not be negative, got {value}")
        if abs(value) > _MAX_MAGNITUDE:
            raise _too_large(where, value)
        return Fraction(value)
    if (kind is float or isinstance(value, float)) and math.isfinite(value):
        frac, _, _, rel = _READINGS.get(value) or _rationalize(value)
        if nonneg and value < 0:  # the reading has the float's sign (-0.0 reads 0)
            raise PlacementInputError(f"{where}: must not be negative, got {value}")
        if inexact is not None and rel is not None:
            inexact.append((where, value, frac, rel))
        return frac
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise PlacementInputError(f"{where}: expected a number, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise PlacementInputError(f"{where}: must be finite, got {value}")
    if isinstance(value, str) and not value.isascii():  # Fraction would read other scripts' digits
        raise PlacementInputError(f"{where}: not a number: {value!r}")
    try:  # an int subclass or a string (every finite float was read above)
        frac = Fraction(value)
    except (ValueError, ZeroDivisionError):
        raise PlacementInputError(f"{where}: not a number: {value!r}") from None
    if nonneg and frac.numerator < 0:
        raise PlacementInputError(f"{where}: must not be negative, got {value}")
    if abs(frac) > _MAX_MAGNITUDE:
        raise _too_large(where, value)
    return frac


def _amounts(where: str, obj: Any, inexact: list | None = None) -> dict[str, Fraction]:
    if not isinstance(obj, dict):
        raise PlacementInputError(f"{where}: expected an object of resource name -> amount")
    out = {}
    for name, val in obj.items():
        if not name:
            raise PlacementInputError(f"{where}: empty resource name")
        out[name] = _exact(f"{where}.{name}", val, inexact=inexact)
    return out


def _keys(where: str, obj: Any, required: Set[str], optional: Set[str]) -> dict:
    if not isinstance(obj, dict):
        raise PlacementInputError(f"{where}: expected an object")
    keys = obj.keys()
    if not keys >= required:
        raise PlacementInputError(f"{where}.{sorted(required - keys)[0]}: missing")
    if len(keys) > len(required) and not keys - required <= optional:
        raise PlacementInputError(f"{where}.{sorted(keys - required - optional)[0]}: unknown key")
    return obj


_NODE_REQUIRED = frozenset({"id", "kind"})
_NODE_OPTIONAL = frozenset({"r_host", "r_nic", "b_host", "b_nic", "instances", "pinned", "location", "needs",
                            "latency_us", "rules", "through_gbps"})  # fmt: skip
_EDGE_KEYS = frozenset({"src", "dst", "gbps"})
_LATENCY_KEYS = frozenset({"host", "nic"})
_ZERO = Fraction(0)  # a Fraction is immutable: every absent field shares this one


def parse_problem(data: Any, offsets: list[int] | None = None) -> Problem:
    """Validate the JSON input of docs/placement.md into a Problem; PlacementInputError names the field.

    `offsets` (an empty list), if given, receives per node and then per edge the index in the Problem's
    `inexact` where that element's entries start, and their end (warm.py re-reads one element alone)."""
    _keys("input", data, {"nodes", "edges", "snics"}, {"pcie_model", "chains"})
    inexact: list[tuple[str, float, Fraction, float]] = []  # (field, given, used, relative error)

    def num(where: str, value: Any) -> Fraction:
        return _exact(where, value, inexact=inexact)

    read_floats(_element_floats(data))
    pcie_model = data.get("pcie_model", "duplex")
    if pcie_model not in ("duplex", "shared"):
        raise PlacementInputError(f"pcie_model: {pcie_model!r} is not 'duplex' or 'shared'")
    if not isinstance(data["snics"], list):
        raise PlacementInputError("snics: expected a list")
    snics: list[Snic] = []
    for i, s in enumerate(data["snics"]):
        w = f"snics[{i}]"
        _keys(w, s, {"id", "capacity", "pcie_gbps"},
              {"resources", "background_gbps", "pcie_latency_us", "max_rules"})  # fmt: skip
        if not isinstance(s["id"], str) or not s["id"] or s["id"] == HOST:
            raise PlacementInputError(f"{w}.id: must be a non-empty string other than 'host'")
        if any(x.id == s["id"] for x in snics):
            raise PlacementInputError(f"{w}.id: duplicate sNIC id {s['id']!r}")
        resources = _amounts(f"{w}.resources", s.get("resources", {}), inexact)
        if RULES in resources:
            raise PlacementInputError(f"{w}.resources.{RULES}: reserved (an sNIC's rule memory is max_rules)")
        if "max_rules" in s:
            resources[RULES] = Fraction(_count(f"{w}.max_rules", s["max_rules"]))
        background = _keys(f"{w}.background_gbps", s.get("background_gbps", {}), set(), set(PCIE_DIRECTIONS))
        snics.append(
            Snic(s["id"], num(f"{w}.capacity", s["capacity"]), num(f"{w}.pcie_gbps", s["pcie_gbps"]),
                 resources,
                 {d: num(f"{w}.background_gbps.{d}", background.get(d, 0)) for d in PCIE_DIRECTIONS},
                 num(f"{w}.pcie_latency_us", s.get("pcie_latency_us", 0)))
        )  # fmt: skip
    declared = set(snics[0].resources) - {RULES} if snics else set()
    for i, sn in enumerate(snics):
        if set(sn.resources) - {RULES} != declared:
            raise PlacementInputError(
                f"snics[{i}].resources: every sNIC must declare the same resources ({sorted(declared)})"
            )
    locations = {HOST, *(s.id for s in snics)}
    if not isinstance(data["nodes"], list):
        raise PlacementInputError("nodes: expected a list")
    nodes: list[Node] = []
    seen: set[str] = set()
    for i, n in enumerate(data["nodes"]):
        if offsets is not None:
            offsets.append(len(inexact))
        nodes.append(parse_node(i, n, locations, declared, inexact, seen))
    if not isinstance(data["edges"], list):
        raise PlacementInputError("edges: expected a list")
    edges = _parse_edges(data["edges"], seen, inexact, offsets)
    if offsets is not None:
        offsets.append(len(inexact))
    chains = _chains(data.get("chains", []), seen, num)
    _rule_budgets(snics, nodes)
    return Problem(nodes, edges, snics, pcie_model, inexact=inexact, chains=chains)


def _element_floats(data: dict) -> list[float]:
    """The floats of the nodes and edges (nearly every number of an instance), unchecked (the parse
    checks them), for read_floats to read at once."""
    out: list[float] = []
    for part in ("nodes", "edges"):
        elements = data[part]
        if type(elements) is not list:
            continue
        for element in elements:
            if type(element) is not dict:
                continue
            for v in element.values():
                if type(v) is float:
                    out.append(v)
                elif type(v) is dict:  # latency_us, needs
                    out.extend(w for w in v.values() if type(w) is float)
    return out


def parse_node(
    i: int, n: Any, locations: Set[str], declared: Set[str], inexact: list, seen: set[str] | None = None
) -> Node:
    """nodes[i] of the input; its inexact numbers appended to `inexact`; its id added to `seen` (refused
    when there already; None: not checked)."""
    w = f"nodes[{i}]"

    def num(obj: dict, key: str, label: str) -> Fraction:
        """obj[key], the field nodes[i].`label`; 0 when absent (most are: no text built, no Fraction made)."""
        if key not in obj:
            return _ZERO
        return _exact(f"{w}.{label}", obj[key], inexact=inexact)

    _keys(w, n, _NODE_REQUIRED, _NODE_OPTIONAL)
    nid = n["id"]
    if not isinstance(nid, str) or not nid:
        raise PlacementInputError(f"{w}.id: must be a non-empty string")
    if seen is not None:
        if nid in seen:
            raise PlacementInputError(f"{w}.id: duplicate id {nid!r}")
        seen.add(nid)
    kind = n["kind"]
    if kind not in KINDS:
        raise PlacementInputError(f"{w}.kind: {kind!r} is not one of nf, table, vm, port")
    pinned, location = n.get("pinned"), n.get("location")
    for key, val in (("pinned", pinned), ("location", location)):
        if val is not None and (not isinstance(val, str) or val not in locations):
            raise PlacementInputError(f"{w}.{key}: unknown location {val!r} (known: {sorted(locations)})")
    if kind == "vm" and pinned not in (None, HOST):
        raise PlacementInputError(f"{w}.pinned: a VM runs on the host, not {pinned!r}")
    if kind == "port" and (pinned is None or pinned == HOST):
        raise PlacementInputError(f"{w}.pinned: a port must name its sNIC")
    r_host, r_nic = num(n, "r_host", "r_host"), num(n, "r_nic", "r_nic")
    b_host, b_nic = num(n, "b_host", "b_host"), num(n, "b_nic", "b_nic")
    instances = n.get("instances", 1)
    if isinstance(instances, float) and instances.is_integer():  # 2.0 is the JSON number 2
        instances = int(instances)
    if isinstance(instances, bool) or not isinstance(instances, int) or not 1 <= instances <= 1024:
        raise PlacementInputError(f"{w}.instances: must be an integer 1..1024, got {instances!r}")
    for key in ("b_host", "b_nic", "instances"):
        if key in n and kind not in PLACED:
            raise PlacementInputError(f"{w}.{key}: only an NF or a table has base costs and instances")
    needs = _amounts(f"{w}.needs", n["needs"], inexact) if "needs" in n else {}
    if needs and kind not in PLACED:
        raise PlacementInputError(f"{w}.needs: only an NF or a table uses sNIC resources")
    for res in needs:
        if res not in declared:
            raise PlacementInputError(f"{w}.needs.{res}: no sNIC declares resource {res!r}")
    if "rules" in n:
        if kind != "table":
            raise PlacementInputError(f"{w}.rules: only a table has rules")
        needs[RULES] = Fraction(_count(f"{w}.rules", n["rules"]))
    if "through_gbps" in n and kind != "table":
        raise PlacementInputError(f"{w}.through_gbps: only a table has traffic through it off the edges")
    lat = _keys(f"{w}.latency_us", n["latency_us"], frozenset(), _LATENCY_KEYS) if "latency_us" in n else {}
    if lat and kind not in PLACED:
        raise PlacementInputError(f"{w}.latency_us: only an NF or a table has a per-location latency")
    return Node(nid, kind, r_host, r_nic, pinned if kind != "vm" else HOST, location, needs,
                      b_host, b_nic, instances, num(lat, "host", "latency_us.host"),
                      num(lat, "nic", "latency_us.nic"), num(n, "through_gbps", "through_gbps"))  # fmt: skip


def _parse_edges(items: list, known: Set[str], inexact: list, offsets: list[int] | None) -> list[Edge]:
    """The input's edges (parse_edge of each, `offsets` as parse_problem's). The common edge - exactly its
    three keys, two distinct known ids, a non-negative int or an already read float - is read inline:
    the same checks and values without parse_edge's call, key check and number dispatch (a third of the
    parse at 5,000 vertices); any other edge goes through parse_edge, whose error it raises."""
    out: list[Edge] = []
    readings = _READINGS
    for i, e in enumerate(items):
        if offsets is not None:
            offsets.append(len(inexact))
        if type(e) is dict and len(e) == 3:
            src, dst, gbps = e.get("src"), e.get("dst"), e.get("gbps")
            if type(src) is str and type(dst) is str and src != dst and src in known and dst in known:
                kind = type(gbps)
                if kind is float and gbps >= 0 and (got := readings.get(gbps)) is not None:
                    if got[3] is not None:
                        inexact.append((f"edges[{i}].gbps", gbps, got[0], got[3]))
                    out.append(Edge(src, dst, got[0]))
                    continue
                if kind is int and 0 <= gbps <= _MAX_MAGNITUDE:
                    out.append(Edge(src, dst, Fraction(gbps)))
                    continue
        out.append(parse_edge(i, e, known, inexact))
    return out


def parse_edge(i: int, e: Any, known: Set[str], inexact: list) -> Edge:
    """edges[i] of the input, between vertices of `known`; its inexact numbers appended to `inexact`."""
    w = f"edges[{i}]"
    _keys(w, e, _EDGE_KEYS, frozenset())
    for key in ("src", "dst"):
        if not isinstance(e[key], str) or e[key] not in known:
            raise PlacementInputError(f"{w}.{key}: unknown vertex {e[key]!r}")
    if e["src"] == e["dst"]:
        raise PlacementInputError(f"{w}: an edge from {e['src']!r} to itself")
    return Edge(e["src"], e["dst"], _exact(f"{w}.gbps", e["gbps"], inexact=inexact))


def _count(where: str, value: Any) -> int:
    """A rule count: a non-negative integer (2.0 is the JSON number 2)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PlacementInputError(f"{where}: must be a non-negative integer, got {value!r}")
    if value > _MAX_MAGNITUDE:
        raise _too_large(where, value)
    return value


def _rule_budgets(snics: list[Snic], nodes: list[Node]) -> None:
    """Make `rules` a resource of every sNIC once any sNIC limits it or any table counts rules: an sNIC
    without max_rules is unlimited, i.e. holds every table's rules at once (so the row never binds)."""
    if not any(RULES in s.resources for s in snics) and not any(RULES in n.needs for n in nodes):
        return
    every = sum((n.needs.get(RULES, Fraction(0)) for n in nodes), Fraction(0))
    for s in snics:
        s.resources.setdefault(RULES, every)


def _chains(data: Any, known: set[str], num) -> list[Chain]:
    """`chains`: [{"id", "vertices": [vertex ids in packet order], "latency_us"?}]."""
    if not isinstance(data, list):
        raise PlacementInputError("chains: expected a list")
    chains: list[Chain] = []
    ids: set[str] = set()  # a set, not a scan of the chains so far (thousands of chains)
    for i, c in enumerate(data):
        w = f"chains[{i}]"
        _keys(w, c, {"id", "vertices"}, {"latency_us"})
        if not isinstance(c["id"], str) or not c["id"]:
            raise PlacementInputError(f"{w}.id: must be a non-empty string")
        if c["id"] in ids:
            raise PlacementInputError(f"{w}.id: duplicate chain id {c['id']!r}")
        ids.add(c["id"])
        verts = c["vertices"]
        if not isinstance(verts, list) or not verts:
            raise PlacementInputError(f"{w}.vertices: expected a non-empty list of vertex ids")
        for k, v in enumerate(verts):
            if not isinstance(v, str) or v not in known:
                raise PlacementInputError(f"{w}.vertices[{k}]: unknown vertex {v!r}")
            if k and verts[k - 1] == v:
                raise PlacementInputError(f"{w}.vertices[{k}]: {v!r} twice in a row")
        slo = c.get("latency_us")
        chains.append(Chain(c["id"], tuple(verts), None if slo is None else num(f"{w}.latency_us", slo)))
    return chains
