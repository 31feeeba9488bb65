"""Groups above 4,096 configurations (long chains): built member by member, never as a full table, and
solved by the engine to the plain model's (MIP backend's) host cost; warm re-solve on one; the limits
past which the whole instance still goes to the plain model."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from placement import decompose, parse_problem, solve
from placement.decompose import prepare
from placement.families import long_chains
from placement.reparse import Parsed
from placement.reprepare import update
from placement.warm import WarmSolver
from tests.placement.test_engine import brute_force, check
from tests.placement.test_warm import assert_same_groups


def _largest(gr) -> int:
    return max(len(gr.locations) ** len(g) for g in gr.group_nodes)


def test_eight_nf_chain_with_two_snics_is_exact():
    # 3**8 = 6,561 configurations: once the plain model's, now built member by member.
    nodes = [{"id": "e0", "kind": "port", "pinned": "snic0"}, {"id": "vm", "kind": "vm"}]
    nodes += [{"id": f"f{i}", "kind": "nf", "r_host": 1, "r_nic": 1 + i % 3} for i in range(8)]
    chain = ["e0"] + [f"f{i}" for i in range(8)] + ["vm"]
    edges = [{"src": a, "dst": b, "gbps": 1} for a, b in itertools.pairwise(chain)]
    inst = {"nodes": nodes, "edges": edges, "pcie_model": "duplex",
            "snics": [{"id": "snic0", "capacity": 9, "pcie_gbps": 3},
                      {"id": "snic1", "capacity": 5, "pcie_gbps": 3}]}  # fmt: skip
    problem = parse_problem(inst)
    gr = prepare(problem)
    assert gr is not None and _largest(gr) == 3**8
    assert len(gr.config) < 3**8  # dominated configurations dropped
    best = brute_force(problem, None, 0)
    opts = {"max_moves": None, "move_cost": 0}
    check(problem, opts, solve(problem, solver="cpsat", time_limit=20), best)


@pytest.mark.parametrize(
    ("lengths", "snics", "seed"),
    [([16, 14, 5, 3], 1, 0), ([15, 2, 7], 1, 3), ([9, 4, 2], 2, 1), ([9, 9], 2, 4)],
)
def test_long_chains_match_the_mip(lengths, snics, seed, monkeypatch):
    # Small instances: without kept_limit's small-instance limit, so that the groups are built.
    monkeypatch.setattr(decompose, "KEPT_PER_BOOLEAN", 10**6)
    problem = parse_problem(long_chains(lengths, snics, seed))
    gr = prepare(problem)
    assert gr is not None and _largest(gr) > 4096
    ours = solve(problem, solver="cpsat", time_limit=60)
    mip = solve(problem, solver="mip", time_limit=60)
    assert ours["status"] == mip["status"] == "optimal", (ours["status"], mip["status"])
    assert ours["host_cost"] == pytest.approx(mip["host_cost"], abs=1e-9)
    assert gr.evaluation(problem, ours["placement"]).violations == []


def test_warm_resolve_of_a_long_chain():
    obj = long_chains([16, 6], 1, 2)
    parsed = Parsed()
    read = parsed.read(obj)
    gr = prepare(read.problem)
    assert gr is not None and _largest(gr) == 2**16
    # on the instance's grid (the scale stays: an incremental update)
    obj["edges"][5]["gbps"] = round(obj["edges"][5]["gbps"] + 0.5, 2)  # inside the 16-NF chain
    obj["nodes"][7]["r_host"] = round(obj["nodes"][7]["r_host"] + 0.11, 2)
    read = parsed.read(obj)
    assert read.incremental
    got = update(gr, read.problem, read.nodes, read.edges)
    assert got is not None
    assert_same_groups(got, prepare(read.problem))
    ws = WarmSolver(time_limit=30, gap_limit=0)
    first = ws.solve(obj)
    for node in obj["nodes"]:
        if node["kind"] == "nf":
            node["location"] = first["placement"][node["id"]]
    obj["edges"][3]["gbps"] = round(obj["edges"][3]["gbps"] * 2 + 0.03, 2)
    warm = ws.solve(obj)
    assert ws.last["prepare"] == "incremental"
    cold = solve(parse_problem(obj), solver="mip", time_limit=60)
    assert warm["status"] == cold["status"] == "optimal"
    assert warm["host_cost"] == pytest.approx(cold["host_cost"], abs=1e-9)


def test_past_the_limits_the_plain_model_answers(monkeypatch):
    # Past MAX_ROW configurations (3**26 > 2**40) the row would not fit: no groups.
    assert prepare(parse_problem(long_chains([26], 2, 0))) is None
    # Past MAX_PARTIALS alive partial configurations: no groups either, and the answer is still exact.
    problem = parse_problem(long_chains([14], 1, 5))
    assert prepare(problem) is not None
    # A group keeping more than MAX_KEPT configurations: no groups.
    monkeypatch.setattr(decompose, "MAX_KEPT", 256)
    assert prepare(problem) is None
    monkeypatch.setattr(decompose, "MAX_KEPT", 10**6)
    monkeypatch.setattr(decompose, "MAX_PARTIALS", 16)
    assert prepare(problem) is None
    ours = solve(problem, solver="cpsat", time_limit=60)
    mip = solve(problem, solver="mip", time_limit=60)
    assert ours["status"] == mip["status"] == "optimal"
    assert ours["host_cost"] == pytest.approx(mip["host_cost"], abs=1e-9)


def test_enumerated_groups_keep_the_limit():
    # max_configs below a group's size, and that group must be enumerated (an SLO whose latencies do not
    # fit int64): no groups.
    inst = long_chains([7], 1, 1)
    primes = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53]
    nfs = [n for n in inst["nodes"] if n["kind"] == "nf"]
    for i, n in enumerate(nfs):
        n["latency_us"] = {"host": 3 + 1 / primes[2 * i], "nic": 1 + 1 / primes[2 * i + 1]}
    inst["snics"][0]["pcie_latency_us"] = 2 + 1 / 59
    inst["chains"] = [{"id": "c0", "vertices": ["p0", *(n["id"] for n in nfs), "v0"], "latency_us": 40}]
    problem = parse_problem(inst)
    assert prepare(problem, max_configs=64) is None
    assert prepare(problem) is not None


def test_prepare_deadline_is_checked_inside_one_large_group(monkeypatch):
    # One 16-NF chain is one group and one chunk: the deadline must still stop its member-by-member build.
    monkeypatch.setattr(decompose, "KEPT_PER_BOOLEAN", 10**6)  # a small instance: built all the same
    problem = parse_problem(long_chains([16], 1, 0))
    reads = iter([0.0] + [2.0] * 100)  # the chunk's check passes, the first member's does not
    with pytest.raises(decompose.PrepareTimeout, match="member"):
        prepare(problem, deadline=1.0, clock=lambda: next(reads))
    assert prepare(problem, deadline=1.0, clock=lambda: 0.0) is not None


def test_small_instances_give_up_sooner_and_the_plain_model_answers():
    # A 60-NF one-sNIC instance with base costs (the foreign generator's draw 87, its PCIe link 30 Gbit/s
    # where 39 could cross: with its own 48.7 no PCIe row can bind and every NF is a group of its own): one
    # group keeps ~4,400 configurations, over 60 per location boolean; past kept_limit's 32 per boolean: no
    # groups.
    from bench.placement.foreign import instance

    obj = instance(87)
    obj["snics"][0]["pcie_gbps"] = 30
    problem = parse_problem(obj)
    limit = decompose.kept_limit(problem)
    assert limit == max(decompose.KEPT_FLOOR, decompose.KEPT_PER_BOOLEAN * problem.location_booleans())
    assert limit < decompose.MAX_KEPT
    assert prepare(problem) is None
    ours = solve(problem, solver="cpsat", time_limit=60)
    mip = solve(problem, solver="mip", time_limit=60)
    assert ours["status"] == mip["status"] == "optimal"
    assert ours["host_cost"] == pytest.approx(mip["host_cost"], rel=2e-5)
    # With MAX_KEPT alone it was built: a group keeps more than the small limit.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(decompose, "KEPT_PER_BOOLEAN", 10**6)
        gr = prepare(problem)
        assert gr is not None and int(np.diff(gr.start).max()) > limit
    # Large instances keep MAX_KEPT.
    big = parse_problem(long_chains([14] * 40, 1, 5))
    assert decompose.kept_limit(big) == decompose.MAX_KEPT
