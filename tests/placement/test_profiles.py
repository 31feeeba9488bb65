"""Profiles: the measured-profile update path (`uno placement profile --measure`) with provenance, and
validation of profile files (a bad field is named, nothing is written)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from domain.model import NF_TYPES
from placement.model import PlacementInputError
from placement.profiles import (
    EMULATED_PROFILES,
    fit_affine,
    load_profiles,
    node_costs,
    read_profile_file,
    record_measurement,
)

ROOT = Path(__file__).resolve().parents[2]


def uno(*args):
    return subprocess.run([sys.executable, "-m", "uno_cli.main", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


def test_record_measurement_sets_r_and_provenance_and_keeps_the_rest():
    raw = {"_about": "x", "ips": {"r_host": 1.0, "r_nic": 2.0}}
    out = record_measurement(raw, "ips", "host", 0.05, 0.1, "2026-11-23T15:00:00Z", "bench")
    assert out["_about"] == "x" and out["ips"]["r_nic"] == 2.0
    assert out["ips"]["r_host"] == pytest.approx(0.25)  # 0.05 cores / (2 x 0.1 Gbit/s)
    assert out["ips"]["measured"] == {
        "r_host": {"date": "2026-11-23T15:00:00Z", "command": "bench", "used": 0.05, "load_gbps": 0.2}
    }
    out2 = record_measurement(out, "ips", "nic", 3.6, 0.1, "d2", "c2")
    assert set(out2["ips"]["measured"]) == {"r_host", "r_nic"} and out2["ips"]["r_nic"] == pytest.approx(18)
    assert raw == {"_about": "x", "ips": {"r_host": 1.0, "r_nic": 2.0}}  # not mutated


def test_cli_measure_writes_the_file_with_provenance(tmp_path):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"_about": "kept", "firewall": {"r_host": 9}}))
    out = uno("placement", "profile", "--file", str(f), "--measure", "firewall", "host", "0.02", "0.1",
              "--source", "./uno bench agent --profile firewall")  # fmt: skip
    assert out.returncode == 0, out.stderr
    raw = json.loads(f.read_text())
    assert raw["_about"] == "kept" and raw["firewall"]["r_host"] == pytest.approx(0.1)
    prov = raw["firewall"]["measured"]["r_host"]
    assert prov["command"] == "./uno bench agent --profile firewall" and prov["date"].endswith("Z")
    assert json.loads(out.stdout)["firewall"]["r_host"] == pytest.approx(0.1)
    assert load_profiles(f)["firewall"]["r_host"] == pytest.approx(0.1)  # the agent's --profiles reads it


@pytest.mark.parametrize(
    ("args", "msg"),
    [
        (["firewall", "host", "0.1", "0"], "gbps_through > 0"),
        (["firewall", "gpu", "0.1", "1"], "measurement.on"),
        (["Bad type", "host", "0.1", "1"], "measurement.type"),
        (["firewall", "host", "abc", "1"], "--measure CORES: expected a number"),
        (["firewall", "host", "1", "nan"], "--measure GBPS: expected a finite number"),
        (["firewall", "host", "0.1", "0.05", "0.2"], "--measure: expected TYPE ON CORES GBPS"),
        (["firewall", "host", "0.1", "0.05", "0.2", "-1"], "gbps_through > 0"),
    ],
)
def test_cli_measure_bad_input_is_one_line_and_writes_nothing(tmp_path, args, msg):
    f = tmp_path / "p.json"
    f.write_text("{}")
    out = uno("placement", "profile", "--file", str(f), "--measure", *args)
    assert out.returncode == 2 and msg in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert f.read_text() == "{}"


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"ips": {"r_host": -1}}, "profiles.ips.r_host"),
        ({"ips": {"r_gpu": 1}}, "profiles.ips"),
        ({"ips": {"r_host": 1, "measured": {"r_host": {"date": "d"}}}}, "profiles.ips.measured.r_host"),
        ({"ips": {"measured": {"r_host": {"date": "", "command": "c", "used": 1, "load_gbps": 1}}}},
         "profiles.ips.measured.r_host.date"),
        ({"ips": {"measured": {"r_host": {"date": "d", "command": "c", "used": True, "load_gbps": 1}}}},
         "profiles.ips.measured.r_host.used"),
        ({"ips": {"r_host": 1, "b_host": -0.1}}, "profiles.ips.b_host"),
        ({"ips": {"measured": {"r_nic": {"date": "d", "command": "c", "points": [{"used": 1, "load_gbps": 1}],
                                         "residual": 0}}}}, "profiles.ips.measured.r_nic.points"),
        ({"ips": {"measured": {"r_nic": {"date": "d", "command": "c", "residual": 0,
                                         "points": [{"used": 1, "load_gbps": 1}, {"used": -1, "load_gbps": 2}]}}}},
         "profiles.ips.measured.r_nic.points[1].used"),
        ({"ips": {"measured": {"r_nic": {"date": "d", "command": "c", "residual": "x",
                                         "points": [{"used": 1, "load_gbps": 1}, {"used": 1, "load_gbps": 2}]}}}},
         "profiles.ips.measured.r_nic.residual"),
        ([], "expected a JSON object"),
    ],
)  # fmt: skip
def test_bad_profile_files_name_the_field(tmp_path, raw, field):
    f = tmp_path / "p.json"
    f.write_text(json.dumps(raw))
    with pytest.raises(PlacementInputError, match=field.replace(".", r"\.").replace("[", r"\[")):
        read_profile_file(f)


def test_shipped_emulated_profiles_are_valid_and_measured():
    raw = read_profile_file(EMULATED_PROFILES)
    for sid, link in raw.pop("pcie", {}).items():  # the sNICs' PCIe links (latency_profiles.PCIE_KEY)
        assert link["measured"]["median"] == link["latency_us"], sid
    for name, prof in raw.items():
        if name.startswith("_"):
            continue
        # every value has its provenance: r_host, r_nic where measured (lb's CPU cost is not: the shipped
        # profile's) and, where measured, each location's latency
        assert set(prof["measured"]) - {"latency_us"} == {"r_host", "r_nic"} & set(prof), name
        locs = prof["measured"].get("latency_us", {})
        assert ("latency_us" in prof) == bool(locs) and set(locs) <= {"host", "snic0"}, name


def test_every_nf_type_the_agent_runs_has_measured_latencies_and_the_link_too():
    raw = read_profile_file(EMULATED_PROFILES)
    assert raw["pcie"]["snic0"]["latency_us"] > 0
    for name in NF_TYPES:
        assert set(raw[name]["latency_us"]) == {"host", "nic"}, name
        assert set(raw[name]["measured"]["latency_us"]) == {"host", "snic0"}, name


def test_fit_affine_least_squares_and_residual():
    base, slope, res = fit_affine([(0.05 + 0.3 * ld, ld) for ld in (0.06, 0.2, 0.4)])
    assert base == pytest.approx(0.05) and slope == pytest.approx(0.3) and res == pytest.approx(0, abs=1e-12)
    base, slope, res = fit_affine([(1.0, 1.0), (2.0, 2.0), (2.0, 3.0)])  # not on a line
    assert slope == pytest.approx(0.5) and base == pytest.approx(2 / 3) and res > 0
    assert fit_affine([(0.0, 1.0), (2.0, 2.0)])[:2] == pytest.approx(
        (0.0, 0.8)
    )  # base < 0: through the origin
    assert fit_affine([(2.0, 1.0), (1.0, 2.0)])[:2] == pytest.approx((1.5, 0.0))  # slope < 0: flat
    assert fit_affine([(0.5, 1.0)]) == pytest.approx((0.0, 0.5, 0.0))


def test_record_fit_sets_base_and_slope_and_a_single_point_clears_the_base():
    out = record_measurement({}, "ips", "nic", [(2.0, 0.03), (5.0, 0.1)], None, "d", "c")
    prof = out["ips"]
    assert prof["b_nic"] > 0 and prof["r_nic"] > 0 and "b_host" not in prof
    assert prof["b_nic"] + prof["r_nic"] * 0.2 == pytest.approx(5.0, abs=1e-5)
    assert [p["load_gbps"] for p in prof["measured"]["r_nic"]["points"]] == [0.06, 0.2]
    assert prof["measured"]["r_nic"]["residual"] == pytest.approx(0, abs=1e-6)
    record_measurement(out, "ips", "host", 0.1, 0.1, "d", "c")  # the fitted entry validates when updated
    again = record_measurement(out, "ips", "nic", 5.0, 0.1, "d", "c")
    assert "b_nic" not in again["ips"] and again["ips"]["r_nic"] == pytest.approx(25)
    assert node_costs(prof) == {"r_host": 0.0, "r_nic": prof["r_nic"], "b_nic": prof["b_nic"]}


def test_cli_measure_two_rates_fits_base_and_slope(tmp_path):
    f = tmp_path / "p.json"
    out = uno(
        "placement", "profile", "--file", str(f), "--measure", "ips", "host", "0.08", "0.03", "0.12", "0.1"
    )
    assert out.returncode == 0, out.stderr
    prof = json.loads(f.read_text())["ips"]
    assert prof["r_host"] == pytest.approx(0.04 / 0.14, rel=1e-4)
    assert prof["b_host"] == pytest.approx(0.08 - 0.06 * 0.04 / 0.14, rel=1e-4)
    assert len(prof["measured"]["r_host"]["points"]) == 2
    assert load_profiles(f)["ips"]["b_host"] == prof["b_host"]


def test_a_missing_profile_file_is_an_error_not_the_shipped_profiles(tmp_path):
    # `uno agent serve --profiles TYPO` ran on the shipped profiles without a word
    with pytest.raises(PlacementInputError, match="profiles: no such file"):
        load_profiles(tmp_path / "missing.json")
    assert read_profile_file(tmp_path / "missing.json") == {}  # `placement profile --measure` creates it
