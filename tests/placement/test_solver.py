"""Placement on hand-checkable graphs: every constraint binding in turn, infeasible cases, pins, k sNICs."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from placement import parse_problem, solve
from placement.evaluate import evaluate
from placement.model import PlacementInputError

SOLVERS = ["cpsat", "mip"]


def nf(i, r_host=1, r_nic=1, **kw):
    return {"id": i, "kind": "nf", "r_host": r_host, "r_nic": r_nic, **kw}


def chain(gbps=1.0, capacity=100, pcie=100, snics=1, model="duplex"):
    """eth (sNIC 0) -> a -> b -> vm."""
    return {
        "nodes": [
            {"id": "eth", "kind": "port", "pinned": "snic0"},
            nf("a"),
            nf("b"),
            {"id": "vm", "kind": "vm"},
        ],
        "edges": [
            {"src": "eth", "dst": "a", "gbps": gbps},
            {"src": "a", "dst": "b", "gbps": gbps},
            {"src": "b", "dst": "vm", "gbps": gbps},
        ],  # fmt: skip
        "snics": [{"id": f"snic{k}", "capacity": capacity, "pcie_gbps": pcie} for k in range(snics)],
        "pcie_model": model,
    }


@pytest.mark.parametrize("solver", SOLVERS)
def test_unconstrained_everything_offloaded(solver):
    r = solve(parse_problem(chain()), solver=solver)
    assert r["status"] == "optimal"
    assert r["placement"] == {"eth": "snic0", "a": "snic0", "b": "snic0", "vm": "host"}
    assert r["host_cost"] == 0 and r["snic_load"] == {"snic0": 4.0}
    assert r["pcie_gbps"] == {"snic0": {"up": 1.0, "down": 0.0}}
    assert r["moves"] == []


@pytest.mark.parametrize("solver", SOLVERS)
def test_capacity_binds(solver):
    # Each NF has load 2 -> sNIC cost 2; capacity 3 fits one of them.
    r = solve(parse_problem(chain(capacity=3)), solver=solver)
    assert r["status"] == "optimal" and r["host_cost"] == 2.0
    assert sorted(r["placement"][x] for x in ("a", "b")) == ["host", "snic0"]
    # Tie-break: 'a' on the sNIC keeps one crossing (a->b), 'b' there would cost three.
    assert r["placement"]["a"] == "snic0"
    assert r["pcie_gbps"]["snic0"] == {"up": 1.0, "down": 0.0}


@pytest.mark.parametrize("solver", SOLVERS)
def test_pcie_binds_with_east_west_traffic(solver):
    # vm1 -> x -> vm2: offloading x costs 2 Gbit/s of PCIe (down then up); the duplex budget is 1 each way.
    inst = {
        "nodes": [{"id": "vm1", "kind": "vm"}, {"id": "vm2", "kind": "vm"}, nf("x")],
        "edges": [{"src": "vm1", "dst": "x", "gbps": 2}, {"src": "x", "dst": "vm2", "gbps": 2}],
        "snics": [{"id": "snic0", "capacity": 100, "pcie_gbps": 1}],
    }
    r = solve(parse_problem(inst), solver=solver)
    assert r["placement"]["x"] == "host" and r["host_cost"] == 4.0
    inst["snics"][0]["pcie_gbps"] = 2
    r = solve(parse_problem(inst), solver=solver)
    assert r["placement"]["x"] == "snic0" and r["pcie_gbps"]["snic0"] == {"up": 2.0, "down": 2.0}
    inst["pcie_model"] = "shared"  # the paper's single budget: 4 needed
    r = solve(parse_problem(inst), solver=solver)
    assert r["placement"]["x"] == "host"


@pytest.mark.parametrize("solver", SOLVERS)
def test_pinned_nf_and_infeasible_reasons(solver):
    inst = chain(capacity=1)
    inst["nodes"][1]["pinned"] = "snic0"  # 'a' needs 2 on a sNIC of capacity 1
    r = solve(parse_problem(inst), solver=solver)
    assert r["status"] == "infeasible" and "capacity of snic0" in r["reason"]
    inst = chain(pcie=0.5)  # the chain must cross PCIe at least once with 1 Gbit/s
    r = solve(parse_problem(inst), solver=solver)
    assert r["status"] == "infeasible" and "PCIe" in r["reason"]


@pytest.mark.parametrize("solver", SOLVERS)
def test_two_snics_traffic_between_them_crosses_both_links(solver):
    inst = {
        "nodes": [
            {"id": "e0", "kind": "port", "pinned": "snic0"},
            {"id": "e1", "kind": "port", "pinned": "snic1"},
            nf("f", pinned="snic1"),
        ],  # fmt: skip
        "edges": [{"src": "e0", "dst": "f", "gbps": 3}],
        "snics": [
            {"id": "snic0", "capacity": 100, "pcie_gbps": 10},
            {"id": "snic1", "capacity": 100, "pcie_gbps": 10},
        ],
    }
    r = solve(parse_problem(inst), solver=solver)
    assert r["pcie_gbps"] == {"snic0": {"up": 3.0, "down": 0.0}, "snic1": {"up": 0.0, "down": 3.0}}
    inst["snics"][1]["pcie_gbps"] = 2
    assert solve(parse_problem(inst), solver=solver)["status"] == "infeasible"


@pytest.mark.parametrize("solver", SOLVERS)
def test_moves_budget_and_tie_break_prefers_staying(solver):
    inst = chain(capacity=3)
    inst["nodes"][1]["location"] = "host"
    inst["nodes"][2]["location"] = "snic0"  # b on the sNIC now: same host cost as a, more PCIe
    r = solve(parse_problem(inst), solver=solver)
    assert r["placement"]["a"] == "snic0" and len(r["moves"]) == 2  # PCIe tie-break beats moves
    r = solve(parse_problem(inst), solver=solver, max_moves=0)
    assert r["placement"]["b"] == "snic0" and r["moves"] == []


def test_exact_fractions_no_float_rounding():
    # 0.1 + 0.2 == 0.3 exactly: capacity exactly met must be feasible.
    inst = {
        "nodes": [{"id": "v1", "kind": "vm"}, nf("a", r_host=1, r_nic=0.5), nf("b", r_host=1, r_nic=0.5)],
        "edges": [{"src": "v1", "dst": "a", "gbps": 0.1}, {"src": "v1", "dst": "b", "gbps": 0.2}],
        "snics": [{"id": "snic0", "capacity": 0.15, "pcie_gbps": 10}],
    }
    r = solve(parse_problem(inst))
    assert r["placement"]["a"] == r["placement"]["b"] == "snic0"
    ev = evaluate(parse_problem(inst), r["placement"])
    assert ev.snic_load["snic0"] == Fraction(3, 20) and ev.feasible


def two_chains(b_a=None, b_b=None, capacity=2):
    """eth -> a -> vm and eth -> b -> vm at 1 Gbit/s (load 2 each); room on the sNIC for one of them."""
    a, b = nf("a", r_host=1, r_nic=1, **(b_a or {})), nf("b", r_host=0.9, r_nic=1, **(b_b or {}))
    return {
        "nodes": [{"id": "eth", "kind": "port", "pinned": "snic0"}, a, b, {"id": "vm", "kind": "vm"}],
        "edges": [
            {"src": s, "dst": d, "gbps": 1} for s, d in (("eth", "a"), ("a", "vm"), ("eth", "b"), ("b", "vm"))
        ],
        "snics": [{"id": "snic0", "capacity": capacity, "pcie_gbps": 100}],
    }


@pytest.mark.parametrize("solver", SOLVERS)
def test_base_cost_changes_the_optimal_placement(solver):
    # Linear: a saves 2 host cores on the sNIC, b 1.8: a goes.
    r = solve(parse_problem(two_chains()), solver=solver)
    assert r["placement"]["a"] == "snic0" and r["placement"]["b"] == "host"
    assert r["host_cost"] == pytest.approx(1.8)
    # b's base cost on the host (0.5 core per instance, e.g. its relays and polling): b now saves 2.3.
    r = solve(parse_problem(two_chains(b_b={"b_host": 0.5})), solver=solver)
    assert r["placement"]["b"] == "snic0" and r["placement"]["a"] == "host"
    assert r["host_cost"] == pytest.approx(2.0)
    assert r["snic_load"]["snic0"] == pytest.approx(2.0)
    # a's base cost on the sNIC: a no longer fits (2 + 0.5 > 2), b does.
    r = solve(parse_problem(two_chains(b_a={"b_nic": 0.5})), solver=solver)
    assert r["placement"] == {"eth": "snic0", "a": "host", "b": "snic0", "vm": "host"}
    # Per running instance: two instances of b at 0.5 each make 2.8, more than a's 2 + a base of 0.7.
    p = parse_problem(two_chains(b_a={"b_host": 0.7}, b_b={"b_host": 0.5, "instances": 2}))
    r = solve(p, solver=solver)
    assert r["placement"]["b"] == "snic0" and r["host_cost"] == pytest.approx(2.7)
    ev = evaluate(p, {"eth": "snic0", "a": "host", "b": "host", "vm": "host"})
    assert ev.host_cost == Fraction(27, 10) + Fraction(28, 10)


def test_base_cost_alone_exceeds_capacity_of_pinned_nf():
    inst = two_chains(b_a={"b_nic": 3, "pinned": "snic0"})
    r = solve(parse_problem(inst))
    assert r["status"] == "infeasible" and "capacity of snic0" in r["reason"]


def test_zero_load_nf_still_costs_its_base():
    inst = two_chains(b_a={"b_host": 0.25})
    inst["edges"] = [e for e in inst["edges"] if "a" not in (e["src"], e["dst"])]
    p = parse_problem(inst)
    assert evaluate(
        p, {n.id: "host" if n.kind != "port" else "snic0" for n in p.nodes}
    ).host_cost == Fraction(1, 4) + Fraction(18, 10)


@pytest.mark.parametrize(
    "node, field",
    [
        ({"b_host": -1}, "nodes[1].b_host"),
        ({"b_nic": "x"}, "nodes[1].b_nic"),
        ({"b_nic": float("inf")}, "nodes[1].b_nic"),
        ({"instances": 0}, "nodes[1].instances"),
        ({"instances": 1.5}, "nodes[1].instances"),
        ({"instances": True}, "nodes[1].instances"),
    ],
)
def test_base_cost_fields_validated(node, field):
    from placement.model import PlacementInputError

    with pytest.raises(PlacementInputError) as exc:
        parse_problem(two_chains(b_a=node))
    assert str(exc.value).startswith(field + ":")


def test_base_cost_only_on_nfs():
    from placement.model import PlacementInputError

    inst = two_chains()
    inst["nodes"][3]["b_host"] = 1
    with pytest.raises(PlacementInputError, match=r"nodes\[3\].b_host: only an NF"):
        parse_problem(inst)


def east_west(pcie: float, background: dict | None = None, model: str = "duplex") -> dict:
    """vm1 -> x -> vm2 at 1 Gbit/s: x on the sNIC crosses PCIe down and up once each (1 Gbit/s each way)."""
    snic = {"id": "snic0", "capacity": 100, "pcie_gbps": pcie}
    if background is not None:
        snic["background_gbps"] = background
    return {
        "nodes": [{"id": "vm1", "kind": "vm"}, {"id": "vm2", "kind": "vm"}, nf("x")],
        "edges": [{"src": "vm1", "dst": "x", "gbps": 1}, {"src": "x", "dst": "vm2", "gbps": 1}],
        "snics": [snic],
        "pcie_model": model,
    }


@pytest.mark.parametrize("solver", SOLVERS)
def test_background_pcie_takes_part_of_the_link(solver):
    # Without background x fits on the sNIC (1 Gbit/s each way of 1.5); with 0.75 down in the background
    # the down direction would carry 1.75 > 1.5: x stays on the host. The up direction keeps its budget.
    r = solve(parse_problem(east_west(1.5)), solver=solver)
    assert r["placement"]["x"] == "snic0" and r["pcie_gbps"]["snic0"] == {"up": 1.0, "down": 1.0}
    r = solve(parse_problem(east_west(1.5, {"down": 0.75})), solver=solver)
    assert r["status"] == "optimal" and r["placement"]["x"] == "host"
    assert r["pcie_gbps"]["snic0"] == {"up": 0.0, "down": 0.75}  # the link's load: the background alone
    r = solve(parse_problem(east_west(1.5, {"up": 0.5})), solver=solver)
    assert r["placement"]["x"] == "snic0" and r["pcie_gbps"]["snic0"] == {
        "up": 1.5,
        "down": 1.0,
    }  # exactly full
    # Shared model: one budget for both directions and the background of both.
    r = solve(parse_problem(east_west(2.5, {"up": 0.25, "down": 0.25}, "shared")), solver=solver)
    assert r["placement"]["x"] == "snic0"
    r = solve(parse_problem(east_west(2.5, {"up": 0.25, "down": 0.3}, "shared")), solver=solver)
    assert r["placement"]["x"] == "host"


@pytest.mark.parametrize("solver", SOLVERS)
def test_background_alone_over_the_link_is_infeasible_and_named(solver):
    r = solve(parse_problem(east_west(1.5, {"up": 2})), solver=solver)
    assert r["status"] == "infeasible"
    assert r["reason"].startswith("the background traffic alone exceeds the pcie of snic0 (up)"), r["reason"]


def test_background_counts_in_evaluate_as_a_violation():
    problem = parse_problem(east_west(1.5, {"down": 0.75}))
    ev = evaluate(problem, {"vm1": "host", "vm2": "host", "x": "snic0"})
    assert ev.pcie["snic0"] == {"up": Fraction(1), "down": Fraction(7, 4)}
    assert ev.violations == ["pcie of snic0 (down): 1.75 > 1.5 Gbit/s"]
    assert evaluate(problem, {"vm1": "host", "vm2": "host", "x": "host"}).feasible


def test_without_background_field_the_instance_means_what_it_did():
    old, zero = parse_problem(east_west(1.5)), parse_problem(east_west(1.5, {"up": 0, "down": 0}))
    assert old.snics == zero.snics
    assert old.snics[0].pcie_budget("down") == old.snics[0].pcie_gbps


@pytest.mark.parametrize(
    ("background", "message"),
    [
        ([], "snics[0].background_gbps: expected an object"),
        ({"left": 1}, "snics[0].background_gbps.left: unknown key"),
        ({"up": -0.1}, "snics[0].background_gbps.up: must not be negative"),
        ({"down": "x"}, "snics[0].background_gbps.down: not a number"),
        ({"down": True}, "snics[0].background_gbps.down: expected a number"),
        ({"up": float("inf")}, "snics[0].background_gbps.up: must be finite"),
    ],
)
def test_background_field_validated(background, message):
    with pytest.raises(PlacementInputError, match=message.replace(".", r"\.").replace("[", r"\[")):
        parse_problem(east_west(1.5, background))


@pytest.mark.parametrize("solver", SOLVERS)
def test_time_limit_counts_from_started_and_a_late_proof_is_not_optimal(solver):
    """The limit covers everything from `started` (e.g. the parse before solve): a host cost proven after
    it is 'feasible' with its gap, never 'optimal' with a host_cost_seconds above the limit."""
    import time

    problem = parse_problem(chain(capacity=1, pcie=100))
    on_time = solve(problem, solver=solver, time_limit=5, started=time.monotonic())
    assert on_time["status"] == "optimal" and on_time["host_cost_seconds"] <= 5
    late = solve(problem, solver=solver, time_limit=0.5, started=time.monotonic() - 1.0)
    assert late["status"] != "optimal" and "host_cost_seconds" not in late
    if late["status"] == "feasible":  # gap 1: the host placement, when CP-SAT had no time to find one
        assert late["solve_seconds"] > 0.5 and 0 <= late["gap"] <= 1


@pytest.mark.parametrize("solver", SOLVERS)
def test_diagnosis_trials_are_feasibility_questions(solver):
    from placement.families import Family, build
    from placement.solver import Options, _placeable

    # Two sNICs, SLO chains: infeasible through one chain's SLO; each trial (the instance without a chain)
    # only needs a placement, not its optimum.
    fam = Family(
        shape="chain", capacity=0.908, pcie=3.17, snics=2, traffic="pareto", pinned=0.13, latency=True
    )
    problem = parse_problem(build(fam, 50, 961020))
    opts = Options(solver=solver, time_limit=20)
    assert not _placeable(problem, opts)
    assert _placeable(replace(problem, chains=[]), opts)
    r = solve(problem, solver=solver, time_limit=20)
    assert r["status"] == "infeasible" and r["reason"].startswith("chain c13: its latency_us"), r["reason"]


def test_all_host_last_resort_answers_only_what_it_can_claim():
    """The plain model's last resort (every movable vertex on the host): feasible with gap 1 when it costs
    something, optimal (tie-break unproven) when it costs nothing, None when it breaks a budget or max_moves."""
    import time

    from placement.solver import Options, _on_host

    t0 = time.monotonic()
    costly = _on_host(parse_problem(chain()), Options(), t0)
    assert costly["status"] == "feasible" and costly["gap"] == 1.0
    assert costly["placement"] == {"eth": "snic0", "a": "host", "b": "host", "vm": "host"}
    free = chain()
    free["nodes"][1:3] = [nf("a", r_host=0), nf("b", r_host=0)]
    zero = _on_host(parse_problem(free), Options(), t0)
    assert zero["status"] == "optimal" and zero["tiebreak"] == "best-effort" and "gap" not in zero
    assert zero["host_cost"] == 0.0
    # 1 Gbit/s down and back up over a 0.5 Gbit/s PCIe link: the all-host placement breaks its budget.
    assert _on_host(parse_problem(chain(pcie=0.5)), Options(), t0) is None
    moved = chain()
    for n in moved["nodes"][1:3]:
        n["location"] = "snic0"
    assert _on_host(parse_problem(moved), Options(max_moves=1), t0) is None
    assert _on_host(parse_problem(moved), Options(max_moves=2), t0)["status"] == "feasible"


def _shrinking(capacity=100):
    """eth (sNIC 0) -> a -> b (pinned on the host) -> vm, 1 Gbit/s into a, 0.1 after it, a 0.5 Gbit/s link:
    all on the host crosses down with 1 Gbit/s (over the link); a on the sNIC crosses with 0.1."""
    obj = chain(pcie=0.5, capacity=capacity)
    obj["edges"][1]["gbps"] = obj["edges"][2]["gbps"] = 0.1
    obj["nodes"][2]["pinned"] = "host"
    return obj


def test_stage1_without_a_placement_answers_with_the_first_fitting_one(monkeypatch):
    """All on the host breaks a row (1 Gbit/s down over a 0.5 Gbit/s link, _shrinking) and stage 1 (host
    cost minimised) finds nothing within the limit (made so here): the placement of the feasibility solve
    before it comes back, checked exactly, `feasible` with gap 1. (Before: no placement at all; foreign large
    5,000 seed 3 on a loaded machine.)"""
    from placement import solver as S

    orig = S._Model.solve

    def no_stage1(self, deadline, hint=None, work=None, first=False):
        if not first:
            return "unknown", None, None
        return orig(self, deadline, hint=hint, work=work, first=first)

    monkeypatch.setattr(S._Model, "solve", no_stage1)
    problem = parse_problem(_shrinking())
    assert evaluate(problem, {"eth": "snic0", "a": "host", "b": "host", "vm": "host"}).violations
    r = solve(problem, time_limit=5, engine=False)
    assert r["status"] == "feasible" and r["gap"] == 1.0, r
    assert not evaluate(problem, r["placement"]).violations
    assert r["placement"]["a"] == "snic0"  # the only way under the link's budget: a on the sNIC


def test_feasibility_first_refutes_and_stage1_still_proves():
    """The feasibility solve's 'infeasible' is a proof (the same rows as stage 1): the instance is infeasible
    and says why; where it finds a placement, stage 1 still proves the optimum from its hint."""
    problem = parse_problem(_shrinking(capacity=0.5))  # host: over the link; a on the sNIC: over capacity
    r = solve(problem, time_limit=5, engine=False)
    assert r["status"] == "infeasible" and r["reason"], r
    for solver in SOLVERS:
        ok = solve(parse_problem(_shrinking()), solver=solver, time_limit=5, engine=False)
        assert ok["status"] == "optimal" and ok["placement"]["a"] == "snic0", ok
        assert ok["host_cost"] == 0.2  # b's load (0.1 in, 0.1 out) x r_host 1


def test_engine_without_a_placement_answers_all_on_host_when_it_fits(monkeypatch):
    """The engine ends 'unknown' (no placement within the limit; made so here): all on the host comes back
    when it meets every row (feasible, gap 1), else no placement."""
    from placement import solver as S
    from placement.engine import Outcome

    monkeypatch.setattr(S, "run_engine", lambda gr, opts, deadline: Outcome("unknown", None))
    r = solve(parse_problem(chain()), time_limit=5)
    assert r["status"] == "feasible" and r["gap"] == 1.0, r
    assert r["placement"] == {"eth": "snic0", "a": "host", "b": "host", "vm": "host"}
    r = solve(parse_problem(chain(pcie=0.5)), time_limit=5)
    assert r["status"] == "unknown" and r["placement"] == {}, r
