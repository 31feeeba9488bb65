"""`uno placement solve`: exact output object; bad input is one clear line and a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from placement.hysteresis import Dampener

ROOT = Path(__file__).resolve().parents[2]
GOOD = {
    "nodes": [
        {"id": "eth", "kind": "port", "pinned": "snic0"},
        {"id": "f", "kind": "nf", "r_host": 1, "r_nic": 1},
        {"id": "vm", "kind": "vm"},
    ],  # fmt: skip
    "edges": [{"src": "eth", "dst": "f", "gbps": 1}, {"src": "f", "dst": "vm", "gbps": 1}],
    "snics": [{"id": "snic0", "capacity": 10, "pcie_gbps": 10}],
}


def uno(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "uno_cli.main", *args], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_solve_prints_the_contract_object(tmp_path):
    f = tmp_path / "in.json"
    f.write_text(json.dumps(GOOD))
    out = uno("placement", "solve", str(f), "--solver", "mip", "--time-limit", "5")
    assert out.returncode == 0, out.stderr
    obj = json.loads(out.stdout)
    assert set(obj) == {
        "status",
        "placement",
        "host_cost",
        "snic_load",
        "pcie_gbps",
        "moves",
        "solve_seconds",
        "tiebreak",
        "host_cost_seconds",
        "gap_limit",
    }
    assert obj["status"] == "optimal" and obj["placement"]["f"] == "snic0"
    assert obj["tiebreak"] in ("proven", "best-effort") and "gap" not in obj


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d["edges"].append({"src": "eth", "dst": "ghost", "gbps": 1}),
            "edges[2].dst: unknown vertex",
        ),
        (lambda d: d["edges"][0].update(gbps=-1), "edges[0].gbps: must not be negative"),
        (lambda d: d["nodes"][1].update(pinned="snic9"), "nodes[1].pinned: unknown location"),
        (lambda d: d["nodes"].append({"id": "f", "kind": "nf"}), "nodes[3].id: duplicate id"),
        (lambda d: d["nodes"][2].update(kind="router"), "nodes[2].kind"),
        (lambda d: d.update(pcie_model="half"), "pcie_model"),
        (lambda d: d["snics"][0].pop("capacity"), "snics[0].capacity: missing"),
    ],
)
def test_bad_input_is_a_clear_error(tmp_path, mutate, message):
    data = json.loads(json.dumps(GOOD))
    mutate(data)
    f = tmp_path / "in.json"
    f.write_text(json.dumps(data))
    out = uno("placement", "solve", str(f))
    assert out.returncode == 2
    assert message in out.stderr and "Traceback" not in out.stderr


def test_not_json_and_missing_file(tmp_path):
    f = tmp_path / "x.json"
    f.write_text("{nope")
    assert "not valid JSON" in uno("placement", "solve", str(f)).stderr
    out = uno("placement", "solve", str(tmp_path / "missing.json"))
    assert out.returncode == 2 and "cannot read" in out.stderr


def test_infeasible_exits_1_with_reason():
    data = json.loads(json.dumps(GOOD))
    data["snics"][0]["pcie_gbps"] = 0.5
    out = uno("placement", "solve", "-", stdin=json.dumps(data))
    assert out.returncode == 1
    obj = json.loads(out.stdout)
    assert obj["status"] == "infeasible" and "PCIe" in obj["reason"]


def test_dampener_hysteresis_window_and_anti_flap():
    a, b = {"f": "host"}, {"f": "snic0"}
    d = Dampener(threshold=0.0, rel_threshold=0.1, window=10, flap_window=100)
    assert d.decide(0, a, 10.0, b, 9.5)[0] is False  # 5 % saving < 10 %
    assert d.decide(0, a, 10.0, b, 5.0)[0] is True
    d.record(0, a)
    assert "dampening" in d.decide(5, b, 5.0, {"f": "snic1"}, 1.0)[1]
    assert "anti-flap" in d.decide(50, b, 10.0, a, 1.0)[1]  # going back to a, left at t=0
    assert d.decide(150, b, 10.0, a, 1.0)[0] is True


@pytest.mark.parametrize(
    "opt,value,message",
    [
        ("--time-limit", "nan", "time_limit"),
        ("--time-limit", "inf", "time_limit"),
        ("--move-cost", "nan", "move_cost"),  # was a Fraction traceback, exit 1
        ("--move-cost", "inf", "move_cost"),
    ],
)
def test_non_finite_options_are_a_clear_error(tmp_path, opt, value, message):
    f = tmp_path / "in.json"
    f.write_text(json.dumps(GOOD))
    out = uno("placement", "solve", str(f), opt, value)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr
