"""model.rationalize (integer arithmetic) against the rule written with Decimal and Fraction directly."""

from __future__ import annotations

import random
import struct
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction

from placement.model import EXACT_DIGITS, SMALL_DEN, SMALL_DEN_TOL, parse_problem, rationalize


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
