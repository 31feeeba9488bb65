"""parse_problem's fast path for common nodes and edges against the full per-field walk (parse_node /
parse_edge alone): the same Problem, inexact entries and offsets, or the same error, on every family and on
randomly broken copies."""

from __future__ import annotations

import copy
import random

import pytest

from placement import model
from placement.families import FAMILIES, instance
from placement.model import PlacementInputError, parse_problem

# values a broken field gets: wrong types, signs, non-finite, unknown names, edge cases of the checks
ODD = [None, -1, -0.5, 1.5, float("nan"), float("inf"), "x", "1/3", True, [], {}, 0, 0.0, -0.0, 2.0, 3,
       "host", "sn0", 1e-300, 0.1234567891234, {"host": 1}, {"nic": 0.3, "x": 1}, {"host": -1}, {"mem": 1},
       2000, 1024, "nf", "vm", "port", "table"]  # fmt: skip
KEYS = ["id", "kind", "r_host", "r_nic", "b_host", "b_nic", "instances", "pinned", "location", "needs",
        "latency_us", "rules", "through_gbps", "src", "dst", "gbps", "bogus"]  # fmt: skip


def _outcome(obj: dict) -> object:
    """What parse_problem gives for `obj`: its Problem's parts and offsets, or its error message."""
    model._READINGS.clear()
    offsets: list[int] = []
    try:
        p = parse_problem(obj, offsets)
    except PlacementInputError as e:
        return str(e)
    return p.nodes, p.edges, p.snics, p.inexact, p.chains, offsets


def _walked(obj: dict, monkeypatch: pytest.MonkeyPatch) -> object:
    """_outcome with the fast path off: every node and edge read by parse_node / parse_edge."""
    with monkeypatch.context() as m:
        m.setattr(model, "_quick_node", lambda *args: None)
        m.setattr(model, "_plain", lambda value: None)
        return _outcome(obj)


def _broken(obj: dict, rng: random.Random) -> dict:
    """A copy of `obj` with one node or edge changed: a field set to an odd value, a field dropped, or
    the element duplicated."""
    out = copy.deepcopy(obj)
    part = out[rng.choice(["nodes", "edges"])]
    element = rng.choice(part)
    r = rng.random()
    if r < 0.6:
        element[rng.choice(KEYS)] = rng.choice([*ODD, rng.choice(out["nodes"])["id"]])
    elif r < 0.8:
        element.pop(rng.choice(list(element)))
    else:
        part.append(copy.deepcopy(element))
    return out


@pytest.mark.parametrize("family", FAMILIES)
def test_fast_path_is_the_walk(family: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in range(3):
        obj = instance(family, 200, seed)
        assert _outcome(obj) == _walked(obj, monkeypatch), (family, seed)
        rng = random.Random(seed)
        for _ in range(25):
            bad = _broken(obj, rng)
            assert _outcome(bad) == _walked(bad, monkeypatch), (family, seed)
    model._READINGS.clear()


def test_well_formed_elements_take_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A family's nodes and edges never reach parse_node / parse_edge (the fast path covers them)."""

    def refuse(*args: object) -> None:
        raise AssertionError("walked")

    obj = instance("latency", 200, 0)
    with monkeypatch.context() as m:
        m.setattr(model, "parse_node", refuse)
        m.setattr(model, "parse_edge", refuse)
        parse_problem(obj)
    model._READINGS.clear()
