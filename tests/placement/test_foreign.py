"""The second generator's instances (bench/placement/foreign.py, written apart from placement/families.py):
all valid, and on the small ones our engine and the MIP agree (status; proven host costs within the gap)."""

from __future__ import annotations

from bench.placement.foreign import _agree, instance
from placement import parse_problem, solve


def test_every_instance_parses():
    for seed in range(200):
        parse_problem(instance(seed))  # raises PlacementInputError naming the field


def test_ours_agrees_with_the_mip_on_small_instances():
    checked = decided = 0
    for seed in range(60):
        obj = instance(seed)
        if len(obj["nodes"]) > 30:
            continue
        ours = solve(parse_problem(obj), time_limit=20)
        mip = solve(parse_problem(obj), solver="mip", time_limit=20)
        assert _agree(ours, mip), (
            seed,
            ours["status"],
            mip["status"],
            ours.get("host_cost"),
            mip.get("host_cost"),
        )
        checked += 1
        decided += ours["status"] in ("optimal", "infeasible") and mip["status"] in ("optimal", "infeasible")
    assert checked >= 20 and decided >= checked - 2
