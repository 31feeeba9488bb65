"""The profile file the demo's agent reads keeps every field the placement reads from the measured one (the
PCIe crossing latency was dropped when the demo rewrote it), and only the IPS's r_nic differs."""

from __future__ import annotations

import json

import pytest

from demo.run import IPS_DEMO_NIC_FACTOR, demo_profiles
from placement.latency_profiles import PCIE_KEY, pcie_latency, with_latency_stat
from placement.profiles import (
    EMULATED_PROFILES,
    load_pcie_section,
    load_profiles,
    node_costs,
    profile_file,
)


@pytest.fixture
def written(tmp_path):
    f = tmp_path / "profiles.json"
    f.write_text(json.dumps(demo_profiles()))
    return f


def test_the_demo_file_keeps_the_pcie_links_the_agent_reads(written):
    links = load_pcie_section(written)
    assert links and links == load_pcie_section(EMULATED_PROFILES)
    for stat in ("median", "p99"):
        got = pcie_latency(links, ["snic0"], stat)
        assert got == pcie_latency(load_pcie_section(EMULATED_PROFILES), ["snic0"], stat)
        assert got["snic0"] > 0


@pytest.mark.parametrize("stat", ["median", "p99"])
def test_every_node_field_is_the_measured_one_but_the_ips_r_nic(written, stat):
    mine = with_latency_stat(load_profiles(written), stat)
    measured = with_latency_stat(load_profiles(EMULATED_PROFILES), stat)
    assert set(mine) == set(measured)
    for typ in measured:
        want = node_costs(measured[typ], stat)
        if typ == "ips":
            want["r_nic"] = round(want["r_nic"] * IPS_DEMO_NIC_FACTOR, 4)
        assert node_costs(mine[typ], stat) == want, typ
    assert any("latency_us" in node_costs(p, stat) for p in mine.values())


def test_profile_file_without_links_has_no_pcie_key(tmp_path):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"firewall": {"r_host": 0.1, "r_nic": 0.2}}))
    assert PCIE_KEY not in profile_file(f)
    assert profile_file(f)["firewall"]["r_host"] == 0.1
    assert PCIE_KEY not in profile_file(None)
