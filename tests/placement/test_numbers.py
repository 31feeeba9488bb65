"""model.rationalize (integer arithmetic) against the rule written with Decimal and Fraction directly."""

from __future__ import annotations

import json
import random
import struct
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from placement import model
from placement.families import FAMILIES, instance
from placement.model import (
    _READINGS,
    EXACT_DIGITS,
    SMALL_DEN,
    SMALL_DEN_TOL,
    PlacementInputError,
    parse_problem,
    rationalize,
    read_floats,
)


def _reference(value: float) -> Fraction:
    """The documented rule (model.py comment) with the standard library's Decimal and Fraction."""
    dec = Decimal(repr(value))
    exact = Fraction(dec)
    _, digits, exponent = dec.as_tuple()
    significant = len(str(int("".join(map(str, digits)) or "0")))
    if exponent >= -EXACT_DIGITS or significant <= EXACT_DIGITS or exact == 0:
        return exact
    small = exact.limit_denominator(SMALL_DEN)
    if abs(small - exact) <= SMALL_DEN_TOL * abs(exact):
        return small
    quantum = Decimal(1).scaleb(min(-EXACT_DIGITS, dec.adjusted() - EXACT_DIGITS + 1))
    return Fraction(dec.quantize(quantum, rounding=ROUND_HALF_EVEN))


def _floats(rng: random.Random, n: int) -> list[float]:
    out = [0.0, -0.0, 1.0, 0.1, 1e-05, 1.5e20, 5e-324, 1.7976931348623157e308, 123.0, 2.5, 0.125]
    out += [p / q for p in range(1, 40) for q in range(1, 40)]  # small ratios: the limit_denominator branch
    for _ in range(n):
        kind = rng.random()
        if kind < 0.4:
            v = rng.uniform(0, 50)
        elif kind < 0.6:
            v = rng.paretovariate(1.2) * 10 ** rng.randint(-12, 12)
        elif kind < 0.8:
            v = round(rng.uniform(0, 100), rng.randint(0, 12))  # decimal-looking
        else:  # any bit pattern that is a finite float
            v = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
            if v != v or v in (float("inf"), float("-inf")):
                continue
        out.append(v if rng.random() < 0.8 else -v)
    # Ties of the half-even rounding at the 9th decimal: digits ...5 exactly after it.
    out += [float(f"0.{'1' * 8}{d}5") for d in range(10)] + [
        float(f"12345678.{'0' * 8}{d}5") for d in range(10)
    ]
    return out


def test_rationalize_matches_the_decimal_rule():
    for v in _floats(random.Random(7), 20_000):
        assert rationalize(v) == _reference(v), repr(v)


def test_inexact_report_is_the_relative_error():
    obj = {
        "nodes": [{"id": "a", "kind": "nf", "r_host": 0.2777777777777778, "r_nic": 0.1234567891234567}],
        "edges": [],
        "snics": [{"id": "s", "capacity": 3.0000000001234567, "pcie_gbps": 10}],
    }
    p = parse_problem(obj)
    fields = {f: (given, used, err) for f, given, used, err in p.inexact}
    for where, given in (("nodes[0].r_host", 0.2777777777777778), ("nodes[0].r_nic", 0.1234567891234567),
                         ("snics[0].capacity", 3.0000000001234567)):  # fmt: skip
        g, used, err = fields[where]
        assert g == given and used == _reference(given)
        exact = Fraction(Decimal(repr(given)))
        assert err == float(abs(exact - used) / exact) and 0 < err < 5e-9


def _near_small_ratios(rng: random.Random, n: int) -> list[float]:
    """Floats at and around p/q (q <= SMALL_DEN) of many magnitudes: a few ulps off (step 1 holds) and
    about SMALL_DEN_TOL off (either side of its bound), where read_floats' screen must not err."""
    out = []
    for _ in range(n):
        q = rng.choice((rng.randint(1, 50), rng.randint(1, SMALL_DEN), SMALL_DEN))
        x = rng.randint(1, 10**6) / q * 2.0 ** rng.randint(-12, 12)
        rel = rng.choice((0.0, 1e-16, 1e-15, 5e-15, 9e-15, 1e-14, 1.1e-14, 2e-14, 1e-13, 1e-9))
        v = x * (1 + rng.choice((-1, 1)) * rel * rng.random() * 2)
        out.append(_ulps_off(v, rng.randint(-3, 3)))
    return out


def _ulps_off(v: float, k: int) -> float:
    """The float k representable steps from the positive float v."""
    (bits,) = struct.unpack("<q", struct.pack("<d", v))
    return struct.unpack("<d", struct.pack("<q", bits + k))[0]


def test_read_floats_is_the_rule():
    """The batch reading (a vectorised proof that step 1 fails, then the rule without it) gives every
    float the rational and relative error of the documented rule: a drift of the screen fails here."""
    rng = random.Random(11)
    values = _floats(rng, 20_000) + _near_small_ratios(rng, 20_000)
    _READINGS.clear()
    read_floats(values)
    for v in values:
        frac, gn, gd, rel = _READINGS[v]
        exact = Fraction(Decimal(repr(v)))
        assert frac == _reference(v) and Fraction(gn, gd) == exact, repr(v)
        assert rel == (float(abs(exact - frac) / abs(exact)) if frac != exact else None), repr(v)
    _READINGS.clear()


def test_parse_reads_as_one_float_at_a_time(monkeypatch):
    """parse_problem with read_floats' batch equals the parse reading each float alone (rule above)."""
    for family in FAMILIES:
        obj = instance(family, 300, 4)
        _READINGS.clear()
        batch = parse_problem(obj)
        _READINGS.clear()
        with monkeypatch.context() as m:
            m.setattr(model, "read_floats", lambda values: None)
            alone = parse_problem(obj)
        assert batch == alone and batch.inexact == alone.inexact, family


def _example(name: str = "switch-tables") -> dict:
    """A shipped example instance (placement/examples/NAME.json)."""
    return json.loads((Path(__file__).parents[2] / f"placement/examples/{name}.json").read_text())


def test_numbers_past_a_double_are_refused_with_the_field_named():
    """JSON carries integers of any length (Python's json reads 10**400 exactly): past a double's range a
    number is refused at parse, naming the field, never an OverflowError later in the solve."""
    base = _example()
    cases = [(("nodes", 1, "r_host"), 10**400), (("nodes", 1, "r_host"), "1e400"),
             (("snics", 0, "capacity"), -(10**400)), (("edges", 0, "gbps"), 2**1024),
             (("nodes", 1, "rules"), 10**400), (("snics", 0, "max_rules"), 10**309)]  # fmt: skip
    for path, value in cases:
        obj = _example()
        at = obj
        for key in path[:-1]:
            at = at[key]
        at[path[-1]] = value
        with pytest.raises(PlacementInputError, match=rf"{path[0]}\[{path[1]}\]\.{path[2]}: "):
            parse_problem(obj)
    assert parse_problem(base).nodes  # the example itself parses


def test_an_slo_past_int64_beside_small_latencies_is_met_by_every_placement():
    """A chain's latency_us of 9.3e18 (past int64) with latencies of a few us: the engine's exact SLO check
    (decompose) raised OverflowError; every placement meets it, so the answer is the one without the SLO."""
    from placement import solve

    obj = _example("latency-slo")
    obj["chains"][0]["latency_us"] = 9.3e18
    out = solve(parse_problem(obj), time_limit=10)
    del obj["chains"][0]["latency_us"]
    assert out["status"] == "optimal"
    assert out["host_cost"] == solve(parse_problem(obj), time_limit=10)["host_cost"]
