"""The third generator (bench/placement/third.py): a handful of small draws, ours and the MIP against its own
brute force of the documented model, and its checker able to fail."""

from __future__ import annotations

import copy

import pytest

from bench.placement.third import brute, check_answer, compare, draw, run_solver
from placement.solver import load_backends

# small draws the brute force covers: operator instances (1-4 sNICs, SLOs, pins, moves) and edge cases
# (seed, size): one to four sNICs, shared PCIe, SLOs, max_moves / move_cost, numeric strings, huge and tiny numbers
SEEDS = [(4, 7), (5, 21), (6, 37), (17, 13), (21, 11), (31, 11), (39, 11), (42, 25), (52, 8), (55, 5), (75, 12),
         (56, 10), (57, 51), (99, 12), (153, 12)]  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def _backends():
    load_backends()


@pytest.mark.parametrize(("seed", "size"), SEEDS)
def test_small_draws_agree_with_brute_force(seed, size):
    obj, opts, meta = draw(seed, size)
    assert meta["expect"] is None
    assert brute(obj, opts) is not None
    ours, _ = run_solver(obj, opts, "cpsat", 20)
    mip, _ = run_solver(obj, opts, "mip", 20)
    f = compare(obj, opts, meta, ours, mip)
    assert f["brute"]
    assert f["violations"] == [] and f["disagree"] == [], f


@pytest.mark.parametrize("kind", ["dup_node", "dup_snic", "dup_chain"])
def test_duplicate_ids_are_refused(kind):
    seed = next(s for s in range(500) if draw(s, 10)[2]["kind"] == kind)
    obj, opts, _ = draw(seed, 10)
    for solver in ("cpsat", "mip"):
        out, _ = run_solver(obj, opts, solver, 5)
        assert out["status"] == "refused" and "duplicate" in out["reason"].lower(), out


def test_checker_and_brute_force_can_fail():
    obj, opts, meta = draw(39, 11)
    ours, _ = run_solver(obj, opts, "cpsat", 20)
    assert ours["status"] == "optimal"
    assert check_answer(obj, opts, ours, "ours")[0] == []
    # a reported figure that does not match the placement
    bad = copy.deepcopy(ours)
    bad["host_cost"] *= 1.01
    assert any("host_cost" in v for v in check_answer(obj, opts, bad, "ours")[0])
    # a worse placement called optimal: every movable NF on the host costs more here
    worse = copy.deepcopy(ours)
    for n in obj["nodes"]:
        if n["kind"] == "nf" and n.get("pinned") is None:
            worse["placement"][n["id"]] = "host"
    assert worse["placement"] != ours["placement"]
    _, fig = check_answer(obj, opts, worse, "x")
    worse["host_cost"] = fig["primary"]
    f = compare(obj, opts, meta, worse, ours)
    assert any("brute force" in d for d in f["disagree"]), f
    # a placement over a budget: the sNIC's capacity shrunk below what ours put there
    tight = copy.deepcopy(obj)
    tight["snics"][0]["capacity"] = ours["snic_load"]["snic0"] * 0.5
    assert any("broken" in v for v in check_answer(tight, opts, ours, "ours")[0])
