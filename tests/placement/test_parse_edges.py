"""model._parse_edges (the common edge read inline) against parse_edge on every edge: the same Edge values
and inexact entries, or the same error, on well-formed and broken edges."""

from __future__ import annotations

import copy
import random

import pytest

from placement.families import instance
from placement.model import _READINGS, PlacementInputError, parse_edge, parse_problem, read_floats


class _Float(float):
    """A float subclass (not a JSON number, but Python callers may pass one)."""


class _Int(int):
    pass


_VARIANTS = [
    lambda e: e,
    lambda e: {k: v for k, v in e.items() if k != "gbps"},
    lambda e: {k: v for k, v in e.items() if k != "src"},
    lambda e: {**e, "extra": 1},
    lambda e: {"src": e["src"], "dst": e["dst"], "gbs": 1.0},
    lambda e: {**e, "src": 7},
    lambda e: {**e, "dst": None},
    lambda e: {**e, "src": "nowhere"},
    lambda e: {**e, "dst": e["src"]},
    lambda e: {**e, "gbps": -0.5},
    lambda e: {**e, "gbps": -0.0},
    lambda e: {**e, "gbps": 0.0},
    lambda e: {**e, "gbps": -3},
    lambda e: {**e, "gbps": 0},
    lambda e: {**e, "gbps": 12},
    lambda e: {**e, "gbps": True},
    lambda e: {**e, "gbps": "1/3"},
    lambda e: {**e, "gbps": "x"},
    lambda e: {**e, "gbps": float("nan")},
    lambda e: {**e, "gbps": float("inf")},
    lambda e: {**e, "gbps": None},
    lambda e: {**e, "gbps": [1.0]},
    lambda e: {**e, "gbps": _Float(0.25)},
    lambda e: {**e, "gbps": _Int(3)},
    lambda e: {**e, "gbps": 0.1234567891234567},
    lambda e: [e["src"], e["dst"], e["gbps"]],
    lambda e: None,
]


def _reference(obj: dict):
    """parse_problem's edges and their inexact entries as parse_edge reads them one by one (after the
    nodes, whose checks came first), or the error it raises."""
    read_floats(v for e in obj["edges"] if isinstance(e, dict) for v in e.values() if type(v) is float)
    ids = {n["id"] for n in obj["nodes"]}
    inexact: list = []
    try:
        return [parse_edge(i, e, ids, inexact) for i, e in enumerate(obj["edges"])], inexact
    except PlacementInputError as err:
        return str(err)


@pytest.mark.parametrize("family", ["chains", "mesh", "latency"])
def test_parse_edges_matches_parse_edge(family: str) -> None:
    rng = random.Random(family)
    base = instance(family, 60, 1)
    for k, variant in enumerate(_VARIANTS):
        obj = copy.deepcopy(base)
        at = rng.randrange(len(obj["edges"]))
        obj["edges"][at] = variant(obj["edges"][at])
        _READINGS.clear()
        want = _reference(obj)
        _READINGS.clear()
        try:
            p = parse_problem(obj)
            got = p.edges, [x for x in p.inexact if x[0].startswith("edges[")]
        except PlacementInputError as err:
            got = str(err)
        assert got == want, (k, obj["edges"][at])
