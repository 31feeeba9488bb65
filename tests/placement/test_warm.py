"""Warm re-placement (placement/warm.py, reparse.py, reprepare.py): after a small change, the incremental
parse and prepare give exactly what the full ones give, the warm solve the same proven host cost as a cold
one, and a change that touches the scale or the structure takes the full path."""

from __future__ import annotations

import copy
import random
from fractions import Fraction

import numpy as np
import pytest

from placement import PlacementInputError, parse_problem, solve
from placement.decompose import Groups, prepare
from placement.families import instance
from placement.reparse import Parsed
from placement.reprepare import update
from placement.warm import WarmSolver

FAMILIES = ["chains", "dag", "mesh", "fanio", "pinned", "background", "latency", "two-snics", "skewed"]


def assert_same_groups(a: Groups, b: Groups) -> None:
    """Every field of two Groups equal (arrays elementwise)."""
    for key, va in a.__dict__.items():
        if key == "memo":
            continue
        vb = b.__dict__[key]
        if key in ("group_nodes", "group_table"):
            assert len(va) == len(vb) and all(np.array_equal(x, y) for x, y in zip(va, vb, strict=True)), key
        elif key == "exact":
            assert va.keys() == vb.keys()
            for k in va:
                x, y = va[k], vb[k]
                x, y = (
                    (x.tolist() if hasattr(x, "tolist") else x),
                    (y.tolist() if hasattr(y, "tolist") else y),
                )
                assert x == y, f"exact.{k}"
        elif isinstance(va, np.ndarray):
            assert va.shape == vb.shape and np.array_equal(va, vb), key
        else:
            assert va == vb, key


def settled(name: str, n: int, seed: int) -> tuple[dict, WarmSolver]:
    """An instance solved once, every NF's location set to that placement, solved again (warm)."""
    obj = instance(name, n, seed)
    ws = WarmSolver(time_limit=20, gap_limit=0)
    out = ws.solve(obj)
    for node in obj["nodes"]:
        if node["kind"] == "nf":
            node["location"] = out["placement"][node["id"]]
    ws.solve(obj)
    return obj, ws


def change(obj: dict, rng: random.Random) -> str:
    """One random change: an edge's traffic, an NF's host ratio, or an NF's current location."""
    what = rng.choice(["edge", "edge", "edge", "ratio", "location"])
    if what == "edge":
        rng.choice(obj["edges"])["gbps"] *= rng.choice([1.3, 0.6, 2.5, 1.0000001])
    else:
        nfs = [n for n in obj["nodes"] if n["kind"] == "nf" and "pinned" not in n]
        node = rng.choice(nfs)
        if what == "ratio":
            node["r_host"] *= rng.choice([1.1, 0.9])
        else:
            node["location"] = rng.choice(["host"] + [s["id"] for s in obj["snics"]])
    return what


@pytest.mark.parametrize("name", FAMILIES)
def test_incremental_prepare_is_the_full_prepare(name):
    rng = random.Random(name)
    obj = instance(name, 250, 1)
    for k, node in enumerate(obj["nodes"]):
        if node["kind"] == "nf" and k % 2:
            node["location"] = "host"
    parsed = Parsed()
    read = parsed.read(obj)
    gr = prepare(read.problem, Fraction(1, 7), 40)
    incremental = 0
    for _ in range(12):
        change(obj, rng)
        read = parsed.read(obj)
        assert read.incremental
        full = prepare(parse_problem(obj), Fraction(1, 7), 40)
        got = update(gr, read.problem, read.nodes, read.edges, Fraction(1, 7), 40)
        if got is not None:
            incremental += 1
            assert_same_groups(got, full)
        gr = got or full
    assert incremental >= 8  # most single changes keep the scale


@pytest.mark.parametrize("name", FAMILIES)
def test_incremental_parse_is_the_full_parse(name):
    rng = random.Random(name)
    obj = instance(name, 200, 2)
    parsed = Parsed()
    parsed.read(obj)
    for _ in range(5):
        change(obj, rng)
        obj["edges"][rng.randrange(len(obj["edges"]))]["gbps"] = 0.1 * rng.random()  # inexact floats
        read = parsed.read(obj)
        full = parse_problem(obj)
        assert read.incremental
        assert read.problem.nodes == full.nodes and read.problem.edges == full.edges
        assert read.problem.inexact == full.inexact and read.problem.snics == full.snics


@pytest.mark.parametrize("name", FAMILIES)
def test_warm_resolve_matches_a_cold_solve(name):
    """Random one-element changes: the warm solve's proven host cost is the cold solve's (gap_limit 0)."""
    rng = random.Random(f"{name}-solve")
    obj, ws = settled(name, 30 if name == "two-snics" else 60, 0)  # small: proven with gap_limit 0
    paths = []
    for _ in range(4):
        change(obj, rng)
        warm = ws.solve(obj)
        paths.append(ws.last["prepare"])
        cold = solve(parse_problem(copy.deepcopy(obj)), time_limit=20, gap_limit=0)
        assert warm["status"] == cold["status"]
        if cold["status"] == "optimal":
            assert warm["host_cost"] == cold["host_cost"]
            assert not parse_problem(obj) or warm["placement"].keys() == cold["placement"].keys()
        for node in obj["nodes"]:
            if node["kind"] == "nf" and warm["placement"]:
                node["location"] = warm["placement"][node["id"]]
    assert "incremental" in paths


def test_a_change_of_scale_takes_the_full_prepare():
    obj, ws = settled("chains", 60, 3)
    obj["edges"][5]["gbps"] = "1/7"  # a denominator no other value has: G changes
    out = ws.solve(obj)
    assert ws.last == {"parse": "incremental", "prepare": "full"}
    cold = solve(parse_problem(obj), time_limit=20, gap_limit=0)
    assert out["host_cost"] == cold["host_cost"]
    parsed = Parsed()
    before = parsed.read(obj).problem
    gr = prepare(before)
    obj["edges"][5]["gbps"] = "2/7"  # the same denominator: kept
    read = parsed.read(obj)
    assert_same_groups(update(gr, read.problem, read.nodes, read.edges), prepare(read.problem))
    obj["edges"][5]["gbps"] = 1.5  # the only 1/7 gone: G shrinks
    read = parsed.read(obj)
    assert update(gr, read.problem, read.nodes, read.edges) is None


def test_structure_changes_take_the_full_path():
    obj, ws = settled("dag", 150, 1)
    obj["edges"][3]["gbps"] = 0  # an edge without traffic is dropped: the groups change
    ws.solve(obj)
    assert ws.last["prepare"] == "full"
    obj["nodes"].append({"id": "extra", "kind": "vm"})
    ws.solve(obj)
    assert ws.last["parse"] == "full"
    nf = next(n for n in obj["nodes"] if n["kind"] == "nf")
    nf["pinned"] = "host"
    ws.solve(obj)
    assert ws.last == {"parse": "incremental", "prepare": "full"}
    cold = solve(parse_problem(obj), time_limit=20)
    assert ws.solve(obj)["host_cost"] == cold["host_cost"]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda o: o["edges"][2].__setitem__("gbps", True), "edges[2].gbps: expected a number"),
        (lambda o: o["edges"][2].__setitem__("gbps", -1), "edges[2].gbps: must not be negative"),
        (lambda o: o["edges"][2].__setitem__("src", "nobody"), "edges[2].src: unknown vertex"),
        (
            lambda o: next(n for n in o["nodes"] if n["kind"] == "nf").__setitem__("r_host", float("nan")),
            "r_host: must be finite",
        ),  # fmt: skip
        (
            lambda o: next(n for n in o["nodes"] if n["kind"] == "nf").__setitem__("location", "mars"),
            "location: unknown location",
        ),  # fmt: skip
        (lambda o: o["nodes"][-1].__setitem__("id", o["nodes"][0]["id"]), "duplicate id"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(mutate, message):
    obj, ws = settled("chains", 120, 2)
    good = copy.deepcopy(obj)
    before = ws.solve(obj)
    bad = copy.deepcopy(obj)
    mutate(bad)
    with pytest.raises(PlacementInputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        ws.solve(bad)
    again = ws.solve(good)
    assert ws.last == {"parse": "incremental", "prepare": "incremental"}
    assert again["host_cost"] == before["host_cost"]


def test_true_is_not_one():
    """JSON true compares equal to 1: the warm parse must still refuse it where 1 was."""
    obj = {"nodes": [{"id": "p", "kind": "port", "pinned": "s"}, {"id": "a", "kind": "nf", "r_host": 1,
                      "r_nic": 1}, {"id": "v", "kind": "vm"}],
           "edges": [{"src": "p", "dst": "a", "gbps": 1}, {"src": "a", "dst": "v", "gbps": 1}],
           "snics": [{"id": "s", "capacity": 10, "pcie_gbps": 10}]}  # fmt: skip
    ws = WarmSolver(time_limit=5)
    ws.solve(obj)
    for where, key in (("edges", "gbps"), ("nodes", "r_host")):
        bad = copy.deepcopy(obj)
        bad[where][1][key] = True
        with pytest.raises(PlacementInputError, match=key):
            ws.solve(bad)
    bad = copy.deepcopy(obj)
    bad["snics"][0]["capacity"] = True  # the top-level part: compared as JSON text
    with pytest.raises(PlacementInputError, match="capacity"):
        ws.solve(bad)


def test_a_table_given_rules_takes_the_full_parse():
    """A table's rules sum into every sNIC's rule budget: re-read as a whole, as parse_problem does."""
    obj = {"nodes": [{"id": "p", "kind": "port", "pinned": "s"}, {"id": "t", "kind": "table", "r_host": 0.1,
                      "r_nic": 0.2}, {"id": "v", "kind": "vm"}],
           "edges": [{"src": "p", "dst": "t", "gbps": 1}, {"src": "t", "dst": "v", "gbps": 1}],
           "snics": [{"id": "s", "capacity": 10, "pcie_gbps": 10}]}  # fmt: skip
    parsed = Parsed()
    parsed.read(obj)
    obj["nodes"][1]["rules"] = 100
    read = parsed.read(obj)
    assert not read.incremental
    assert read.problem.snics == parse_problem(obj).snics


def test_a_broken_element_where_a_risky_one_was_is_refused():
    """Elements that were 0/1-valued (checked for true/false each time) replaced by non-objects."""
    obj = {"nodes": [{"id": "p", "kind": "port", "pinned": "s"}, {"id": "a", "kind": "nf", "r_host": 1,
                      "r_nic": 0}, {"id": "v", "kind": "vm"}],
           "edges": [{"src": "p", "dst": "a", "gbps": 1}, {"src": "a", "dst": "v", "gbps": 0}],
           "snics": [{"id": "s", "capacity": 10, "pcie_gbps": 10}]}  # fmt: skip
    ws = WarmSolver(time_limit=5)
    ws.solve(obj)
    for where, k, message in (("nodes", 1, r"nodes\[1\]: expected an object"),
                              ("edges", 0, r"edges\[0\]: expected an object")):  # fmt: skip
        bad = copy.deepcopy(obj)
        bad[where][k] = "garbage"
        with pytest.raises(PlacementInputError, match=message):
            ws.solve(bad)
    ws.solve(obj)
    assert ws.last["parse"] == "incremental"
