"""The plain model's first try on small instances with several sNICs (solver.PLAIN_FIRST_VARS): the same
answers as the engine alone and the MIP, and the engine takes over when the plain model's box runs out."""

from __future__ import annotations

import placement.solver as solver_mod
from placement import parse_problem, solve
from placement.decompose import prepare, prepare_plan
from placement.families import Family, build, instance

GAP = 1e-5  # both paths prove the host cost within gap_limit: equal up to it


def _same_cost(a: dict, b: dict) -> bool:
    ca, cb = a["host_cost"], b["host_cost"]
    return abs(ca - cb) <= GAP * max(1.0, abs(ca), abs(cb))


def _engine_calls(monkeypatch) -> list:
    """A list that gets an item each time solve() runs the engine."""
    calls: list = []
    real = solver_mod._solve_engine
    monkeypatch.setattr(solver_mod, "_solve_engine", lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


def test_only_small_instances_with_several_snics_go_first():
    assert not solver_mod._plain_first(parse_problem(build(Family(snics=1), 30, 0)))
    assert solver_mod._plain_first(parse_problem(build(Family(snics=2), 30, 0)))
    assert solver_mod._plain_first(parse_problem(build(Family(snics=4), 30, 0)))
    assert not solver_mod._plain_first(parse_problem(instance("two-snics", 200, 0)))


CASES = [
    (2, "chain", 0),
    (2, "mesh", 1),
    (3, "chain", 0),
    (3, "long", 0),
    (3, "mesh", 2),
    (4, "chain", 1),
    (4, "mix", 1),
]


def test_plain_first_answers_as_the_engine_and_the_mip(monkeypatch):
    calls = _engine_calls(monkeypatch)
    answered_first = 0
    for snics, shape, seed in CASES:
        problem = parse_problem(build(Family(shape=shape, snics=snics, capacity=0.3, pcie=1.3), 30, seed))
        calls.clear()
        monkeypatch.setattr(solver_mod, "PLAIN_FIRST_VARS", 256)
        first = solve(problem, time_limit=20)
        answered_first += not calls
        assert first["status"] == "optimal" and first["tiebreak"] in ("proven", "best-effort")
        assert "host_cost_seconds" in first
        monkeypatch.setattr(solver_mod, "PLAIN_FIRST_VARS", 0)
        calls.clear()
        engine = solve(problem, time_limit=20)
        assert engine["status"] == "optimal" and calls  # the engine answered
        mip = solve(problem, solver="mip", time_limit=20)
        assert mip["status"] == "optimal"
        assert _same_cost(first, engine) and _same_cost(first, mip), (snics, shape, seed)
    assert answered_first >= len(CASES) // 2  # most of these the plain model decides in its box


def test_infeasible_small_instance_is_refuted_first_with_its_reason():
    obj = build(Family(snics=3), 30, 0)
    obj["snics"][1]["background_gbps"] = {"up": obj["snics"][1]["pcie_gbps"] * 2}
    out = solve(parse_problem(obj), time_limit=20)
    assert out["status"] == "infeasible" and "background traffic alone exceeds" in out["reason"]


def test_the_engine_answers_when_the_box_runs_out(monkeypatch):
    problem = parse_problem(build(Family(shape="chain", snics=2, capacity=0.3, pcie=1.3), 30, 0))
    assert prepare_plan(problem) is not None  # the engine runs after the box
    box = solver_mod._solve_model(problem, solver_mod.Options(), 0.0, float("inf"), first_work=1e-6)
    assert box is None  # not decided in the box
    calls = _engine_calls(monkeypatch)
    monkeypatch.setattr(solver_mod, "PLAIN_FIRST_WORK", 1e-6)
    out = solve(problem, time_limit=20)
    mip = solve(problem, solver="mip", time_limit=20)
    assert calls and out["status"] == "optimal" and _same_cost(out, mip)


def test_with_three_or_more_snics_the_plain_model_answers_alone(monkeypatch):
    calls = _engine_calls(monkeypatch)
    monkeypatch.setattr(solver_mod, "PLAIN_FIRST_WORK", 1e-6)  # a box that never decides
    three = parse_problem(build(Family(shape="long", snics=3, capacity=0.3, pcie=1.3), 30, 2))
    for problem in (parse_problem(instance("four-snics", 30, 2)), three):
        out = solve(problem, time_limit=20)
        mip = solve(problem, solver="mip", time_limit=20)
        assert not calls and out["status"] == mip["status"] == "optimal" and _same_cost(out, mip)
    # Two sNICs: the box, then the engine.
    two = parse_problem(build(Family(shape="chain", snics=2, capacity=0.3, pcie=1.3), 30, 0))
    out = solve(two, time_limit=20)
    assert calls and out["status"] == "optimal"


def test_a_refused_plain_model_leaves_the_answer_to_the_engine(monkeypatch):
    def refuse(*a, **k):
        raise solver_mod.ModelRefused("refused for the test")

    monkeypatch.setattr(solver_mod._Model, "solve", refuse)
    four = parse_problem(instance("four-snics", 30, 2))
    out = solver_mod._solve_model(four, solver_mod.Options(), 0.0, float("inf"), refused_none=True)
    assert out is None
    out = solver_mod._solve_model(four, solver_mod.Options(), 0.0, float("inf"))
    assert out["status"] == "unknown" and out["reason"] == "refused for the test"


def test_no_box_where_prepare_gives_up_before_building(monkeypatch):
    """Foreign draw 45 (two sNICs, a component of 37 NFs: 3^37 configurations, past MAX_ROW): prepare gives
    up before looking at any group, so the engine would not run and the plain model answers at once,
    without its box (whose work the full solve after it did again), with the MIP's host cost."""
    from bench.placement.foreign import instance

    problem = parse_problem(instance(45))
    assert solver_mod._plain_first(problem)
    assert prepare_plan(problem) is None and prepare(problem) is None
    boxes: list = []
    real = solver_mod._solve_model
    monkeypatch.setattr(
        solver_mod, "_solve_model", lambda *a, **k: boxes.append(k.get("first_work")) or real(*a, **k)
    )
    calls = _engine_calls(monkeypatch)
    out = solve(problem, time_limit=20)
    assert boxes == [None] and not calls  # one full solve of the plain model, no box, no engine
    mip = solve(problem, solver="mip", time_limit=20)
    assert out["status"] == mip["status"] == "optimal" and _same_cost(out, mip)
    # Where prepare gives up only in its build (the kept-count bound: two sNICs, a 30-NF chain), or builds,
    # the box still comes first.
    for shape, seed in (("long", 2), ("chain", 0)):
        boxes.clear()
        other = parse_problem(build(Family(shape=shape, snics=2, capacity=0.3, pcie=1.3), 30, seed))
        assert prepare_plan(other) is not None
        solve(other, time_limit=20)
        assert boxes[0] == solver_mod.PLAIN_FIRST_WORK
