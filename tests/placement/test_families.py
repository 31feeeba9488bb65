"""Every instance family (placement/families.py): our engine against brute force on small instances and
against the MIP backend (SCIP) on medium ones; measured-looking float inputs throughout."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest

from placement import parse_problem, solve
from placement.evaluate import evaluate
from placement.families import FAMILIES, instance

SMALL = 5_000  # at most this many placements enumerated


def brute_force(problem) -> Fraction | None:
    """Least exact host cost over every feasible placement (None: none is feasible)."""
    best = None
    choices = [problem.allowed(n) for n in problem.nodes]
    for combo in itertools.product(*choices):
        ev = evaluate(problem, {n.id: loc for n, loc in zip(problem.nodes, combo, strict=True)})
        if ev.feasible and (best is None or ev.host_cost < best):
            best = ev.host_cost
    return best


def small_instance(name: str, seed: int) -> dict:
    """The largest instance of the family (from 14 vertices down; further seeds when a family's first
    service alone is too large, e.g. a long chain) whose placements can be enumerated."""
    for s in range(seed, seed + 200, 2):
        for n in range(14, 3, -1):
            obj = instance(name, n, s)
            p = parse_problem(obj)
            if math.prod(len(p.allowed(nd)) for nd in p.nodes) <= SMALL:
                return obj
    raise AssertionError(f"no small instance of {name}")


def check_placed(problem, out) -> Fraction:
    ev = evaluate(problem, out["placement"])
    assert ev.feasible, ev.violations
    assert out["host_cost"] == pytest.approx(float(ev.host_cost), rel=1e-12, abs=1e-12)
    return ev.host_cost


@pytest.mark.parametrize("name", list(FAMILIES))
@pytest.mark.parametrize("seed", [0, 1])
def test_family_matches_brute_force(name, seed):
    obj = small_instance(name, seed)
    problem = parse_problem(obj)
    best = brute_force(problem)
    for solver in ("cpsat", "mip"):
        out = solve(problem, solver=solver, time_limit=20, gap_limit=0)
        if best is None:
            assert out["status"] == "infeasible" and out["reason"], out
            continue
        assert out["status"] == "optimal", out
        cost = check_placed(problem, out)
        assert cost >= best  # never better than the exact optimum: the placement is re-checked exactly
        rounding = out.get("rounding", {})
        if solver == "cpsat" and not rounding.get("budgets"):
            assert cost <= best + Fraction(rounding.get("host_cost_within", 0)) * (1 + Fraction(1, 10**9))
        else:  # the MIP works in floating point; conservative budgets may cut placements at their edge
            assert float(cost) <= float(best) * (1 + 1e-6) + 1e-9


@pytest.mark.parametrize("name", list(FAMILIES))
def test_family_medium_agrees_with_mip(name):
    problem = parse_problem(instance(name, 70, seed=3))
    ours = solve(problem, time_limit=20)
    mip = solve(problem, solver="mip", time_limit=20)
    assert ours["status"] in ("optimal", "feasible"), ours
    a = check_placed(problem, ours)
    if mip["status"] in ("optimal", "feasible"):
        b = check_placed(problem, mip)
        if ours["status"] == "optimal":  # proven within gap_limit: no feasible placement is much cheaper
            slack = ours["gap_limit"] * float(a) + ours.get("rounding", {}).get("host_cost_within", 0)
            assert float(a) <= float(b) + slack + 1e-9, (ours, mip)
        if mip["status"] == "optimal" and ours["status"] == "optimal":
            assert float(b) <= float(a) * (1 + 2 * mip["gap_limit"]) + 1e-9
    for out in (ours, mip):
        if out["status"] == "optimal":
            assert out["tiebreak"] in ("proven", "best-effort") and "gap" not in out
        elif out["status"] == "feasible":
            assert "tiebreak" not in out and out["gap"] >= 0


def test_measured_float_ratio_is_accepted_and_reported():
    obj = {
        "nodes": [{"id": "e", "kind": "port", "pinned": "s"}, {"id": "vm", "kind": "vm"},
                  {"id": "f", "kind": "nf", "r_host": 0.2777777777777778, "r_nic": 0.5555555555555556}],
        "edges": [{"src": "e", "dst": "f", "gbps": 1.2345678901234567}, {"src": "f", "dst": "vm", "gbps": 3}],
        "snics": [{"id": "s", "capacity": 1.0000000000000002, "pcie_gbps": 10}],
    }  # fmt: skip
    problem = parse_problem(obj)
    assert problem.nodes[2].r_host == Fraction(5, 18)  # a float of a small ratio is that ratio
    out = solve(problem, time_limit=10)
    assert out["status"] == "optimal"
    inexact = out["inexact_inputs"]
    assert inexact["count"] >= 3 and 0 < inexact["max_relative_error"] < 5e-9
    assert "nodes[2].r_host" in inexact["fields"]
    exact = {**obj, "nodes": [*obj["nodes"][:2], {**obj["nodes"][2], "r_host": 0.123456789}]}
    assert parse_problem(exact).nodes[2].r_host == Fraction(123456789, 10**9)
    exact["nodes"][2]["r_nic"] = 0.5
    exact["snics"] = [{"id": "s", "capacity": 1, "pcie_gbps": 10}]
    assert "inexact_inputs" not in solve(parse_problem({**exact, "edges": obj["edges"][1:]}), time_limit=5)


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        (("nodes", 2, "r_host"), float("nan"), "nodes[2].r_host: must be finite"),
        (("nodes", 2, "r_nic"), float("inf"), "nodes[2].r_nic: must be finite"),
        (("edges", 0, "gbps"), -0.5, "edges[0].gbps: must not be negative"),
        (("snics", 0, "capacity"), -1e-300, "snics[0].capacity: must not be negative"),
        (("snics", 0, "pcie_latency_us"), float("nan"), "snics[0].pcie_latency_us: must be finite"),
    ],
)
def test_bad_numbers_name_the_field(where, value, message):
    obj = instance("chains", 8, 0)
    obj["snics"][0]["pcie_latency_us"] = 1
    obj[where[0]][where[1]][where[2]] = value
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_problem(obj)


def test_huge_and_tiny_numbers_solve():
    obj = instance("chains", 30, 0)
    obj["edges"][0]["gbps"] = 1e-300
    obj["nodes"][-1]["r_host"] = 123456.78901234567
    obj["snics"][0]["pcie_gbps"] = 1e300
    out = solve(parse_problem(obj), time_limit=10)
    assert out["status"] == "optimal", out
    check_placed(parse_problem(obj), out)


def _latency_chain(slo: float) -> dict:
    return {
        "nodes": [{"id": "e", "kind": "port", "pinned": "s"}, {"id": "vm", "kind": "vm"},
                  {"id": "f", "kind": "nf", "r_host": 1, "r_nic": 1, "latency_us": {"host": 2, "nic": 10}}],
        "edges": [{"src": "e", "dst": "f", "gbps": 1}, {"src": "f", "dst": "vm", "gbps": 1}],
        "snics": [{"id": "s", "capacity": 10, "pcie_gbps": 10, "pcie_latency_us": 3}],
        "chains": [{"id": "web", "vertices": ["e", "f", "vm"], "latency_us": slo}],
    }  # fmt: skip


@pytest.mark.parametrize("solver", ["cpsat", "mip"])
def test_chain_slo_keeps_the_nf_on_the_host_when_the_snic_is_too_slow(solver):
    # On the sNIC: 10 + 3 (f -> vm crosses) = 13 us; on the host: 3 (e -> f crosses) + 2 = 5 us.
    free = solve(parse_problem(_latency_chain(13)), solver=solver)
    assert free["placement"]["f"] == "s" and free["chain_latency_us"] == {"web": 13.0}
    tight = solve(parse_problem(_latency_chain(12.5)), solver=solver)
    assert tight["placement"]["f"] == "host" and tight["chain_latency_us"] == {"web": 5.0}


def test_chain_slo_infeasible_names_the_chain():
    out = solve(parse_problem(_latency_chain(4)), time_limit=5)
    assert out["status"] == "infeasible" and "chain web" in out["reason"], out
    pinned = _latency_chain(6)
    pinned["nodes"][2]["pinned"] = "s"
    out = solve(parse_problem(pinned), time_limit=5)
    assert out["status"] == "infeasible" and "chain web" in out["reason"], out


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda o: o["chains"][0].update(vertices=["e", "ghost"]),
            r"chains\[0\]\.vertices\[1\]: unknown vertex",
        ),
        (lambda o: o["chains"][0].update(latency_us=-1), r"chains\[0\]\.latency_us: must not be negative"),
        (lambda o: o["chains"].append(dict(o["chains"][0])), r"chains\[1\]\.id: duplicate chain id"),
        (lambda o: o["nodes"][0].update(latency_us={"host": 1}), r"nodes\[0\]\.latency_us: only an NF"),
        (lambda o: o["nodes"][2]["latency_us"].update(gpu=1), r"nodes\[2\]\.latency_us\.gpu: unknown key"),
    ],
)
def test_bad_chains_name_the_field(mutate, message):
    obj = _latency_chain(10)
    mutate(obj)
    with pytest.raises(ValueError, match=message):
        parse_problem(obj)


def test_latency_family_keeps_every_slo():
    problem = parse_problem(instance("latency", 120, 2))
    out = solve(problem, time_limit=20)
    assert out["status"] == "optimal"
    for c in problem.chains:
        assert out["chain_latency_us"][c.id] <= float(c.latency_us) + 1e-9


def test_slo_with_latencies_beyond_int64_on_their_common_denominator():
    """Measured latencies as floats of many denominators (k/p for the primes to 53): the SLO check's exact
    integers no longer fit int64 (its object path); the answer still matches brute force."""
    primes = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53]
    nfs = [f"f{i}" for i in range(8)]
    nodes = [{"id": "e", "kind": "port", "pinned": "s"}, {"id": "vm", "kind": "vm"}]
    for i, f in enumerate(nfs):
        lat = {"host": 3 + 1 / primes[2 * i], "nic": 1 + 1 / primes[2 * i + 1]}
        nodes.append({"id": f, "kind": "nf", "r_host": 1 + i / 7, "r_nic": 1, "latency_us": lat})
    path = ["e", *nfs, "vm"]
    obj = {
        "nodes": nodes,
        "edges": [{"src": a, "dst": b, "gbps": 1} for a, b in zip(path, path[1:], strict=False)],
        "snics": [{"id": "s", "capacity": 10, "pcie_gbps": 10, "pcie_latency_us": 2 + 1 / 59}],
        "chains": [{"id": "c", "vertices": path, "latency_us": 20}],
    }
    problem = parse_problem(obj)
    best = brute_force(problem)
    assert best is not None
    for solver in ("cpsat", "mip"):
        out = solve(problem, solver=solver, time_limit=20, gap_limit=0)
        assert out["status"] == "optimal", out
        assert check_placed(problem, out) == best
