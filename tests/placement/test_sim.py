"""Placement scenarios: CSV + PNG written, and what they show holds (Fig. 16 shape, drift invariants)."""

from __future__ import annotations

import csv

from placement import sim
from placement.hysteresis import Dampener


def rows(path):
    with path.open() as f:
        return list(csv.DictReader(f))


def test_fig16_reproduces_the_papers_shape(tmp_path):
    sim.run("fig16", tmp_path, quick=True)
    assert (tmp_path / "fig16.png").stat().st_size > 10_000
    by_budget = {int(r["pcie_budget_gbps"]): r for r in rows(tmp_path / "fig16.csv")}
    assert all(r["status"] == "optimal" for r in by_budget.values())
    host = [float(by_budget[b]["host_cores"]) for b in (10, 20, 30, 40, 100)]
    assert host == sorted(host, reverse=True) and host[-1] == host[-2]  # flat once capacity binds
    assert all(float(r["snic_cores"]) <= 36 for r in by_budget.values())
    assert all(float(r["pcie_gbps"]) <= int(b) for b, r in by_budget.items())


def test_drift_dampening_moves_less_and_never_keeps_a_violating_placement(tmp_path):
    sim.run("drift", tmp_path, quick=True)
    assert (tmp_path / "drift.png").stat().st_size > 10_000
    rs = rows(tmp_path / "drift.csv")
    assert all(r["feasible"] == "True" for r in rs)
    last = {r["mode"]: int(r["moves_total"]) for r in rs}
    assert last["dampened"] <= last["eager"]
    for step in {r["step"] for r in rs}:
        cost = {r["mode"]: float(r["host_cost"]) for r in rs if r["step"] == step}
        assert cost["eager"] <= cost["dampened"] + 1e-9  # eager is optimal at every step


def test_dampener_always_leaves_a_violating_placement():
    d = Dampener(rel_threshold=0.5, window=100, flap_window=1000)
    d.record(0, {"f": "snic0"})
    go, why = d.decide(1, {"f": "host"}, 1.0, {"f": "snic0"}, 5.0, current_feasible=False)
    assert go and "violates" in why


def test_progress_is_quiet_when_stderr_is_not_a_terminal(capfd):
    with sim.progress(3, "steps") as step:
        for i in range(3):
            step(f"step {i}")
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # no bar, no carriage returns written into a log or a pipe


def test_progress_draws_a_bar_on_a_terminal(monkeypatch, capfd):
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich: treat stderr as a terminal
    monkeypatch.setenv("TTY_INTERACTIVE", "1")
    with sim.progress(2, "steps") as step:
        step("first")
        step("second")
    err = capfd.readouterr().err
    assert "2/2" in err and "second" in err
