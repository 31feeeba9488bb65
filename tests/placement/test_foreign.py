"""The second generator's instances (bench/placement/foreign.py, written apart from placement/families.py):
all valid, and on the small ones our engine and the MIP agree (status; proven host costs within the gap)."""

from __future__ import annotations

from bench.placement.foreign import _agree, _to_host_cost, instance
from placement import parse_problem, solve


def _solved_alike(obj: dict, tag) -> tuple[dict, dict]:
    """Ours and the MIP on `obj`, asserted to agree (status; proven host costs within the gap)."""
    ours = solve(parse_problem(obj), time_limit=20)
    mip = solve(parse_problem(obj), solver="mip", time_limit=20)
    assert _agree(ours, mip), (
        tag,
        ours["status"],
        mip["status"],
        ours.get("host_cost"),
        mip.get("host_cost"),
    )
    return ours, mip


def test_to_host_cost_counts_only_a_proof():
    assert _to_host_cost({"status": "optimal", "host_cost_seconds": 0.25, "solve_seconds": 0.4}, 20) == 0.25
    assert _to_host_cost({"status": "infeasible", "solve_seconds": 0.03}, 20) == 0.03
    assert _to_host_cost({"status": "feasible", "solve_seconds": 20.1, "gap": 0.01}, 20) == 20
    assert _to_host_cost({"status": "unknown", "solve_seconds": 20.0}, 20) == 20
    solved = solve(parse_problem(instance(1)), time_limit=20)  # a real answer carries the field
    assert solved["status"] == "optimal" and 0 <= _to_host_cost(solved, 20) <= solved["solve_seconds"] + 1e-3


def test_every_instance_parses():
    for seed in range(200):
        parse_problem(instance(seed))  # raises PlacementInputError naming the field


def test_ours_agrees_with_the_mip_on_small_instances():
    checked = decided = 0
    for seed in range(60):
        obj = instance(seed)
        if len(obj["nodes"]) > 30:
            continue
        ours, mip = _solved_alike(obj, seed)
        checked += 1
        decided += ours["status"] in ("optimal", "infeasible") and mip["status"] in ("optimal", "infeasible")
    assert checked >= 20 and decided >= checked - 2


def test_large_instances_are_valid_deterministic_and_draw_every_option():
    from bench.placement.foreign import large_instance

    seen: set[str] = set()
    for seed in range(40):
        ns = 1 + seed % 3
        obj = large_instance(seed, 300, ns)
        assert obj == large_instance(seed, 300, ns)  # the same draw per (seed, size, sNICs)
        assert obj != large_instance(seed + 1, 300, ns)
        problem = parse_problem(obj)  # raises PlacementInputError naming the field
        assert len(obj["nodes"]) == 300 and len(obj["snics"]) == ns
        assert problem is not None
        nfs = [n for n in obj["nodes"] if n["kind"] == "nf"]
        snics = obj["snics"]
        seen |= {k for k in ("pcie_model", "chains") if k in obj}
        seen |= {k for sn in snics for k in ("background_gbps", "resources", "pcie_latency_us") if k in sn}
        seen |= {
            k for n in nfs for k in ("b_host", "b_nic", "instances", "pinned", "needs", "location") if k in n
        }
        seen |= {"slo"} if any(c.get("latency_us") for c in obj.get("chains", [])) else set()
        seen |= (
            {"interchangeable"}
            if ns > 1 and all(sn["capacity"] == snics[0]["capacity"] for sn in snics)
            else set()
        )
    assert seen >= {
        "pcie_model", "chains", "slo", "background_gbps", "resources", "pcie_latency_us", "b_host", "b_nic",
        "instances", "pinned", "needs", "location", "interchangeable",
    }  # fmt: skip


def test_ours_agrees_with_the_mip_on_large_draws():
    from bench.placement.foreign import large_instance

    for seed, size, ns in ((0, 120, 1), (1, 120, 1), (2, 90, 2), (3, 120, 1)):
        ours, _ = _solved_alike(large_instance(seed, size, ns), seed)
        assert ours["status"] in ("optimal", "infeasible")
