"""Measured latencies in profile files (`uno placement profile --measure-latency/--measure-pcie`): recording
with provenance, the model's figures derived from them, and bad files refused naming the field."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from placement.families import build, family
from placement.latency_profiles import (
    PCIE_KEY,
    pcie_latency,
    record_nf_latency,
    record_pcie_latency,
    with_latency_stat,
)
from placement.model import PlacementInputError
from placement.profiles import load_pcie_section, load_profiles, node_costs, read_profile_file
from placement.sim import measured_latencies

ROOT = Path(__file__).resolve().parents[2]
META = {
    "date": "2026-11-29T06:00:00Z",
    "command": "./uno bench latency --profile firewall",
    "commit": "abc1234",
}


def rec(median: float, p99: float, **extra) -> dict:
    return {**META, "median": median, "p99": p99, **extra}


def uno(*args):
    return subprocess.run([sys.executable, "-m", "uno_cli.main", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def test_recorded_latencies_set_the_sides_and_keep_the_rest():
    raw = {"_about": "kept", "firewall": {"r_host": 0.3, "r_nic": 14.0}}
    out = record_nf_latency(raw, "firewall", "host", rec(40.0, 120.0))
    out = record_nf_latency(out, "firewall", "snic0", rec(70.0, 300.0))
    out = record_nf_latency(out, "firewall", "snic1", rec(90.0, 250.0))
    fw = out["firewall"]
    assert fw["r_host"] == 0.3 and out["_about"] == "kept"
    assert fw["latency_us"] == {"host": 40.0, "nic": 90.0}  # nic: the slowest sNIC measured
    assert fw["latency_p99_us"] == {"host": 120.0, "nic": 300.0}
    assert set(fw["measured"]["latency_us"]) == {"host", "snic0", "snic1"}
    assert raw == {"_about": "kept", "firewall": {"r_host": 0.3, "r_nic": 14.0}}  # not mutated
    out = record_pcie_latency(out, "snic0", rec(25.0, 80.0, packets=2000, rate_pps=1000.0))
    assert out[PCIE_KEY]["snic0"]["latency_us"] == 25.0 and out[PCIE_KEY]["snic0"]["latency_p99_us"] == 80.0


def test_the_model_reads_the_chosen_statistic_and_the_links(tmp_path):
    raw = record_nf_latency({}, "firewall", "host", rec(40.0, 120.0))
    raw = record_nf_latency(raw, "firewall", "snic0", rec(70.0, 300.0))
    raw = record_pcie_latency(raw, "snic0", rec(25.0, 80.0))
    f = tmp_path / "p.json"
    f.write_text(json.dumps(raw))
    profiles = load_profiles(f)
    assert PCIE_KEY not in profiles  # the links are not an NF type
    assert node_costs(profiles["firewall"])["latency_us"] == {"host": 40.0, "nic": 70.0}
    p99 = with_latency_stat(profiles, "p99")
    assert node_costs(p99["firewall"])["latency_us"] == {"host": 120.0, "nic": 300.0}
    links = load_pcie_section(f)
    # an sNIC with no measurement of its own gets the largest measured link (the emulated links are alike)
    assert pcie_latency(links, ["snic0", "snic1"]) == {"snic0": 25.0, "snic1": 25.0}
    assert pcie_latency(links, ["snic0"], "p99") == {"snic0": 80.0}
    assert pcie_latency({}, ["snic0"]) == {}
    with pytest.raises(PlacementInputError, match="latency statistic"):
        with_latency_stat(profiles, "p90")


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"fw": {"latency_us": {"host": -1}}}, "profiles.fw.latency_us.host: must be a non-negative number"),
        ({"fw": {"latency_us": {"host": math.nan}}}, "profiles.fw.latency_us.host: must be a non-negative"),
        ({"fw": {"latency_p99_us": {"gpu": 3}}}, "profiles.fw.latency_p99_us: expected an object with host"),
        ({"fw": {"measured": {"latency_us": {"host": {**META, "p99": 3}}}}},
         "profiles.fw.measured.latency_us.host.median: missing"),
        ({"fw": {"measured": {"latency_us": {"host": rec(-2.0, 3.0)}}}},
         "profiles.fw.measured.latency_us.host.median: must be a non-negative number"),
        ({"fw": {"measured": {"latency_us": {"host": rec(5.0, math.nan)}}}},
         "profiles.fw.measured.latency_us.host.p99: must be a non-negative number"),
        ({"fw": {"measured": {"latency_us": {"host": rec(5.0, 3.0)}}}},
         "profiles.fw.measured.latency_us.host.p99: 3 is below the median 5"),
        ({"fw": {"measured": {"latency_us": {"host": {**rec(5.0, 6.0), "commit": ""}}}}},
         "profiles.fw.measured.latency_us.host.commit: must be a non-empty string"),
        ({"fw": {"measured": {"latency_us": {"host": rec(5.0, 6.0, path={"median": 1})}}}},
         "profiles.fw.measured.latency_us.host.path: expected exactly median, p99"),
        ({"fw": {"measured": {"latency_us": {"Bad Loc": rec(5.0, 6.0)}}}}, "latency_us.Bad Loc: not a location"),
        ({"fw": {"measured": {"latency_us": {"host": rec(5.0, 6.0, extra=1)}}}}, "host.extra: unknown key"),
        ({PCIE_KEY: {"snic0": {}}}, "profiles.pcie.snic0: expected latency_us"),
        ({PCIE_KEY: {"snic0": {"latency_us": -3}}}, "profiles.pcie.snic0.latency_us: must be a non-negative"),
        ({PCIE_KEY: {"snic0": {"latency_us": 3, "latency_p99_us": math.inf}}},
         "profiles.pcie.snic0.latency_p99_us: must be a non-negative"),
        ({PCIE_KEY: {"host": {"latency_us": 3}}}, "profiles.pcie.host: not an sNIC id"),
        ({PCIE_KEY: []}, "profiles.pcie: expected an object"),
    ],
)  # fmt: skip
def test_bad_latency_fields_are_named(tmp_path, raw, field):
    f = tmp_path / "p.json"
    f.write_text(json.dumps(raw))  # NaN / Infinity as Python's json writes them (and reads them back)
    with pytest.raises(PlacementInputError) as exc:
        read_profile_file(f)
    assert field in str(exc.value)


def test_cli_records_latency_with_date_and_commit(tmp_path):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"_about": "kept", "firewall": {"r_host": 0.3}}))
    details = {"packets": 2000, "rate_pps": 1000, "load1": 3.5, "path": {"median": 90, "p99": 200},
               "base": {"median": 50, "p99": 80}}  # fmt: skip
    out = uno("placement", "profile", "--file", str(f), "--measure-latency", "firewall", "host", "40", "120",
              "--details", json.dumps(details), "--source", "bench", "--commit", "8cdacce")  # fmt: skip
    assert out.returncode == 0, out.stderr
    out = uno("placement", "profile", "--file", str(f), "--measure-pcie", "snic0", "25", "80")
    assert out.returncode == 0, out.stderr
    raw = json.loads(f.read_text())
    prov = raw["firewall"]["measured"]["latency_us"]["host"]
    assert (
        prov["command"] == "bench"
        and prov["date"].endswith("Z")
        and prov["commit"]
        and prov["path"]["p99"] == 200
    )
    assert prov["commit"] == "8cdacce" and prov["load1"] == 3.5  # the bench's start commit, the load
    assert raw["firewall"]["r_host"] == 0.3 and raw["_about"] == "kept"
    assert raw[PCIE_KEY]["snic0"]["measured"]["command"].startswith("uno placement profile --measure-pcie")


@pytest.mark.parametrize(
    ("args", "msg"),
    [
        (
            ["--measure-latency", "firewall", "host", "40", "nan"],
            "--measure-latency P99: expected a finite number",
        ),
        (["--measure-latency", "firewall", "host", "40", "20"], "p99: 20 is below the median 40"),
        (["--measure-latency", "firewall", "host", "-4", "20"], "median: must be a non-negative number"),
        (["--measure-latency", "firewall", "Not here", "4", "20"], "measurement.location"),
        (["--measure-latency", "pcie", "host", "4", "20"], "measurement.type"),
        (["--measure-pcie", "host", "4", "20"], "measurement.snic"),
        (["--measure-pcie", "snic0", "4", "20", "--details", "[1]"], "--details: expected a JSON object"),
        (
            ["--measure-pcie", "snic0", "4", "20", "--details", '{"load1": -1}'],
            "measurement.snic0.load1: must be a non-negative number",
        ),
    ],
)
def test_cli_bad_latency_is_one_line_and_writes_nothing(tmp_path, args, msg):
    f = tmp_path / "p.json"
    f.write_text("{}")
    out = uno("placement", "profile", "--file", str(f), *args)
    assert out.returncode == 2 and msg in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert f.read_text() == "{}"


def test_sim_latency_instances_take_the_measured_figures(tmp_path):
    raw = record_nf_latency({}, "firewall", "host", rec(40.0, 120.0))
    raw = record_nf_latency(raw, "firewall", "snic0", rec(70.0, 300.0))
    raw = record_pcie_latency(raw, "snic0", rec(25.0, 80.0))
    f = tmp_path / "p.json"
    f.write_text(json.dumps(raw))
    lat, pcie = measured_latencies(f)
    assert lat == {"firewall": (40, 70)} and pcie == 25
    plain, measured = (
        build(family("latency"), 60, 3),
        build(family("latency"), 60, 3, latency=lat, pcie_us=pcie),
    )
    assert plain["edges"] == measured["edges"]  # the same graph and traffic for one seed
    assert {s["pcie_latency_us"] for s in measured["snics"]} == {25.0}
    changed = [m for p, m in zip(plain["nodes"], measured["nodes"], strict=True) if p != m]
    assert changed and all(n["latency_us"] == {"host": 40.0, "nic": 70.0} for n in changed)
    assert measured_latencies(None) == ({}, None)
    with pytest.raises(PlacementInputError, match="no such file"):
        measured_latencies(tmp_path / "typo.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"firewall": {"latency_us": {"nic": -1}}}))
    out = uno("placement", "sim", "latency", "--quick", "--out", str(tmp_path), "--profiles", str(bad))
    assert (
        out.returncode == 2
        and "profiles.firewall.latency_us.nic: must be a non-negative number" in out.stderr
    )
