"""model._parse_nodes (a plain node read inline) against parse_node on every node: the same Node values
and inexact entries, or the same error, on well-formed and broken nodes."""

from __future__ import annotations

import copy
import random

import pytest

from placement.families import instance
from placement.model import _READINGS, HOST, PlacementInputError, parse_node, parse_problem, read_floats


class _Float(float):
    pass


def _nf(n: dict) -> dict:
    return n if n["kind"] == "nf" else {"id": n["id"], "kind": "nf", "r_host": 0.5, "r_nic": 1.25}


_VARIANTS = [
    lambda n: n,
    lambda n: {k: v for k, v in n.items() if k != "kind"},
    lambda n: {k: v for k, v in n.items() if k != "id"},
    lambda n: {**n, "id": ""},
    lambda n: {**n, "id": 3},
    lambda n: {**n, "id": "p0_0"},
    lambda n: {**n, "kind": "switch"},
    lambda n: {**n, "kind": "table"},
    lambda n: {**n, "kind": "vm"},
    lambda n: {**n, "kind": "vm", "pinned": "snic0"},
    lambda n: {**n, "kind": "vm", "pinned": HOST},
    lambda n: {**n, "kind": "port", "pinned": HOST},
    lambda n: {**n, "kind": "port"},
    lambda n: {**n, "kind": "port", "pinned": "snic0"},
    lambda n: {**n, "pinned": "nowhere"},
    lambda n: {**n, "pinned": 1},
    lambda n: {**n, "pinned": "snic0"},
    lambda n: {**n, "location": "snic0"},
    lambda n: {**n, "extra": 1},
    lambda n: {**_nf(n), "r_host": -0.25},
    lambda n: {**_nf(n), "r_host": -0.0},
    lambda n: {**_nf(n), "r_nic": -2},
    lambda n: {**_nf(n), "r_nic": 7},
    lambda n: {**_nf(n), "r_nic": True},
    lambda n: {**_nf(n), "r_nic": "1/3"},
    lambda n: {**_nf(n), "r_host": float("nan")},
    lambda n: {**_nf(n), "r_host": _Float(0.5)},
    lambda n: {**_nf(n), "r_host": 0.1234567891234567, "r_nic": 0.7654321987654321},
    lambda n: {**_nf(n), "latency_us": {"host": 0.3333333333333333, "nic": 2}},
    lambda n: {**_nf(n), "latency_us": {"host": -1.5}},
    lambda n: {**_nf(n), "latency_us": {"wire": 1.0}},
    lambda n: {**_nf(n), "latency_us": [1.0]},
    lambda n: {**_nf(n), "latency_us": {}},
    lambda n: {**n, "kind": "vm", "latency_us": {"host": 1.0}},
    lambda n: {**_nf(n), "b_host": 0.5, "instances": 2},
    lambda n: {**_nf(n), "needs": {}},
    lambda n: [n["id"], n["kind"]],
    lambda n: None,
]


def _reference(obj: dict):
    """The nodes and their inexact entries as parse_node reads them one by one, or the error it raises."""
    read_floats(v for n in obj["nodes"] if isinstance(n, dict) for v in n.values() if type(v) is float)
    read_floats(w for n in obj["nodes"] if isinstance(n, dict) for v in n.values() if isinstance(v, dict)
                for w in v.values() if type(w) is float)  # fmt: skip
    locations = {HOST, *(s["id"] for s in obj["snics"])}
    inexact: list = []
    seen: set[str] = set()
    try:
        return [
            parse_node(i, n, locations, set(), inexact, seen) for i, n in enumerate(obj["nodes"])
        ], inexact
    except PlacementInputError as err:
        return str(err)


@pytest.mark.parametrize("family", ["chains", "pinned", "latency"])
def test_parse_nodes_matches_parse_node(family: str) -> None:
    rng = random.Random(family)
    base = instance(family, 60, 1)
    for k, variant in enumerate(_VARIANTS):
        for at in rng.sample(range(len(base["nodes"])), 4):
            obj = copy.deepcopy(base)
            obj["nodes"][at] = variant(obj["nodes"][at])
            _READINGS.clear()
            want = _reference(obj)
            _READINGS.clear()
            try:
                p = parse_problem(obj)
                got = p.nodes, [x for x in p.inexact if x[0].startswith("nodes[")]
            except PlacementInputError as err:
                got = str(err)
            if isinstance(want, str) and isinstance(got, str) and not got.startswith("nodes["):
                continue  # a later check (an edge's end, a chain's vertex) refuses the changed id instead
            assert got == want, (k, obj["nodes"][at])
