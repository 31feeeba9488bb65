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
from tests.placement.test_families import brute_force

FAMILIES = ["chains", "dag", "mesh", "fanio", "pinned", "background", "latency", "two-snics", "skewed"]


def assert_same_groups(a: Groups, b: Groups) -> None:
    """Every field of two Groups equal (arrays elementwise)."""
    for key, va in a.__dict__.items():
        if key == "memo":
            continue
        vb = b.__dict__[key]
        if key == "group_nodes":
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
    obj["edges"][5]["gbps"] = "1/7"  # a denominator no other value has, exact (never rounded): G changes
    out = ws.solve(obj)
    assert ws.last == {"parse": "incremental", "prepare": "full", "onto_scale": 0}
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
    assert ws.last == {"parse": "incremental", "prepare": "full", "onto_scale": 0}
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
    assert ws.last == {"parse": "incremental", "prepare": "incremental", "onto_scale": 0}
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


MEASURED = 1.2937418263514  # a measured-looking factor: products of it are floats of 16 digits


def test_a_value_off_the_kept_scale_is_read_onto_it_within_the_documented_error():
    obj, ws = settled("chains", 60, 3)
    memo = ws._groups.memo
    for value in (2 / 3, 0.2777777777777778, 1 / 7):  # on grids of 3, 18, 7: none divides the kept G
        obj["edges"][5]["gbps"] = value
        assert memo.G % parse_problem(obj).edges[5].gbps.denominator
        warm = ws.solve(obj)
        assert ws.last == {"parse": "incremental", "prepare": "incremental", "onto_scale": 1}
        used = ws._parsed.problem.edges[5].gbps
        assert memo.G % used.denominator == 0 and abs(used - Fraction(value)) <= 5e-9 * Fraction(value)
        entry = next(e for e in ws._parsed.problem.inexact if e[0] == "edges[5].gbps")
        assert entry[2] == used and entry[3] <= 5e-9 and warm["inexact_inputs"]["max_relative_error"] <= 5e-9
        # the incremental prepare is the full prepare of the numbers read; the answer a cold solve of them
        assert_same_groups(ws._groups, prepare(ws._parsed.problem))
        exact = copy.deepcopy(obj)
        exact["edges"][5]["gbps"] = f"{used.numerator}/{used.denominator}"
        assert warm["host_cost"] == solve(parse_problem(exact), time_limit=20, gap_limit=0)["host_cost"]
        cold = solve(parse_problem(copy.deepcopy(obj)), time_limit=20, gap_limit=0)["host_cost"]
        assert abs(warm["host_cost"] - cold) <= 1e-8 * cold  # the numbers differ by <= 5e-9 relative


def test_a_value_too_far_from_the_kept_scale_takes_the_full_path():
    obj, ws = settled("chains", 60, 3)
    obj["edges"][5]["gbps"] = 1.23456789123e-7  # 13 decimals: on the kept 10^-10 grid it is 1e-3 off
    warm = ws.solve(obj)
    assert ws.last == {"parse": "incremental", "prepare": "full", "onto_scale": 0}
    assert ws._parsed.problem.edges[5].gbps == parse_problem(obj).edges[5].gbps  # the parse's own rational
    assert warm["host_cost"] == solve(parse_problem(obj), time_limit=20, gap_limit=0)["host_cost"]
    obj["edges"][6]["gbps"] = "1/3"  # exact input (a numeric string): never rounded
    ws.solve(obj)
    assert ws.last["prepare"] == "full" and ws._parsed.problem.edges[6].gbps == Fraction(1, 3)


def test_round_onto_keeps_within_the_bound_or_refuses():
    from placement.model import REL_ERROR_BOUND, round_onto

    assert round_onto(2 / 3, 10**9) == (Fraction(666666667, 10**9), pytest.approx(5e-10, rel=1e-3))
    assert round_onto(0.0123456789123, 10**9) is None  # 1.2e-11 off a 0.012: above 5e-9 relative
    assert round_onto(1e-12, 10**9) is None  # would round to 0: traffic to/from 0 is structure
    assert round_onto(0.0, 10) is None
    got = round_onto(-2 / 3, 10**9)
    assert got is not None and got[0] < 0
    rng = random.Random(5)
    for _ in range(2000):
        v = rng.uniform(0.05, 50) * rng.choice([1, MEASURED])
        scale = rng.choice([10**9, 10**10, 3 * 10**9, 2**40])
        got = round_onto(v, scale)
        err = abs(Fraction(repr(v)) - Fraction(round(Fraction(repr(v)) * scale), scale)) / Fraction(repr(v))
        assert (got is not None) == (err <= Fraction(5, 10**9))
        if got is not None:
            assert got[0].denominator <= scale and scale % got[0].denominator == 0
            assert got[1] <= REL_ERROR_BOUND


def as_read(obj: dict, problem) -> dict:
    """`obj` with every inexactly read top-level number of its nodes and edges written as the exact rational
    `problem` used (a numeric string): a cold parse of it gives the numbers the warm solver read."""
    out = copy.deepcopy(obj)
    for where, _given, used, _err in problem.inexact:
        part, field = where.split(".", 1)
        kind, idx = part[:-1].split("[")
        if "." not in field:
            out[kind][int(idx)][field] = f"{used.numerator}/{used.denominator}"
    return out


@pytest.mark.parametrize("seed", range(3))
def test_measured_floats_warm_equals_brute_force_on_small(seed):
    """One-edge and one-ratio changes by measured-looking factors (and to ratios of small numbers, on
    other grids): on every change the warm answer's host cost is the brute-force optimum of the numbers
    it read (within the rounding of a float) and within the documented error of the cold parse's."""
    rng = random.Random(seed)
    obj, ws = settled("chains", 10, seed)
    onto = 0
    for k in range(9):
        e = rng.choice(obj["edges"])
        if k % 3 == 2:
            e["gbps"] = rng.randint(1, 30) / 18  # a grid of 18: not the kept scale's
        elif k % 3 == 1:
            e["gbps"] *= rng.choice([MEASURED, 1 / MEASURED])
        else:
            node = rng.choice([n for n in obj["nodes"] if n["kind"] == "nf"])
            node["r_host"] *= rng.choice([MEASURED, 1 / MEASURED])
        warm = ws.solve(obj)
        onto += ws.last["onto_scale"]
        best = brute_force(ws._parsed.problem)
        if best is None:
            assert warm["status"] == "infeasible"
            continue
        assert warm["status"] == "optimal"
        assert warm["host_cost"] == pytest.approx(float(best), rel=1e-12)
        assert warm["host_cost"] == pytest.approx(float(brute_force(parse_problem(obj))), rel=1e-8)
        cold = solve(parse_problem(as_read(obj, ws._parsed.problem)), time_limit=20, gap_limit=0)
        assert cold["host_cost"] == warm["host_cost"]  # a cold solve of the same numbers
        for node in obj["nodes"]:
            if node["kind"] == "nf":
                node["location"] = warm["placement"][node["id"]]
    assert onto >= 1  # the path under test was taken


def test_a_loose_link_keeps_its_split_groups_or_takes_the_full_path():
    # Groups split at a loose PCIe link (decompose.pcie_never_binds): a change that keeps the link loose is
    # rebuilt incrementally, the same as the full prepare; one that lets a PCIe row bind joins the groups
    # again, which only the full path does.
    from tests.placement.test_knapsack import _loose_instance

    obj = _loose_instance(60)  # 24 chain NFs, ~40 Gbit/s could cross: loose
    parsed = Parsed()
    read = parsed.read(obj)
    gr = prepare(read.problem)
    assert gr.memo.loose and gr.n_groups == 24
    obj["edges"][5]["gbps"] = 1.25  # (on the kept scale: hundredths)
    read = parsed.read(obj)
    got = update(gr, read.problem, read.nodes, read.edges)
    full = prepare(parse_problem(obj))
    assert got is not None and full.memo.loose
    assert_same_groups(got, full)
    obj["edges"][5]["gbps"] = 30  # now more could cross than the link carries
    read = parsed.read(obj)
    assert update(got, read.problem, read.nodes, read.edges) is None
    full = prepare(parse_problem(obj))
    assert not full.memo.loose and full.n_groups == 6
