"""The agent's latency model (pure): measured PCIe crossing latencies per sNIC go into the placement instance,
every serial chain (with or without an SLO) gets its predicted latency and PCIe crossings."""

from __future__ import annotations

import pytest

from domain.model import Nf
from nf_agent.graph import SnicInfo, build_problem, chain_links
from nf_agent.views import chain_row
from placement import parse_problem

PROFILES = {"firewall": {"r_host": 0.3, "r_nic": 14.0, "latency_us": {"host": 40.0, "nic": 70.0}}}
SNICS = [SnicInfo("snic0", 36.0, 40.0, 1, pcie_latency_us=25.0), SnicInfo("snic1", 36.0, 40.0, 1)]


def chain(path: list[str], slo: float | None = None) -> list[Nf]:
    return [Nf(nf, "firewall", {}, 200 + i, 0.01, src, dst, latency_us=slo if i == 0 else None)
            for i, (nf, src, dst) in enumerate(chain_links(path))]  # fmt: skip


def test_the_instance_carries_each_snics_measured_crossing_latency():
    obj = build_problem(SNICS, ["web"], chain(["web", "a", "snic0-eth0"], slo=500.0), PROFILES)
    assert [s.get("pcie_latency_us") for s in obj["snics"]] == [25.0, None]  # 0: not written (the default)
    assert obj["chains"] == [{"id": "chain-a", "vertices": ["web", "a", "snic0-eth0"], "latency_us": 500.0}]
    node = next(n for n in obj["nodes"] if n["id"] == "a")
    assert node["latency_us"] == {"host": 40.0, "nic": 70.0}


def test_every_chain_is_listed_for_its_prediction_but_only_slos_reach_the_solver():
    nfs = chain(["web", "a", "b", "snic0-eth0"]) + chain(["web", "c", "snic0-eth0"], slo=300.0)
    assert [c["id"] for c in build_problem(SNICS, ["web"], nfs, PROFILES)["chains"]] == ["chain-c"]
    every = build_problem(SNICS, ["web"], nfs, PROFILES, every_chain=True)["chains"]
    assert [(c["id"], c["latency_us"]) for c in every] == [("chain-a", None), ("chain-c", 300.0)]


@pytest.mark.parametrize(
    ("where", "crossings", "latency"),
    [
        ({"a": "host", "b": "host"}, 1, 40 + 40 + 25),  # b -> the wire on snic0
        ({"a": "snic0", "b": "snic0"}, 1, 70 + 70 + 25),  # web -> a
        ({"a": "snic0", "b": "host"}, 3, 70 + 40 + 3 * 25),  # down, up, down again
        ({"a": "snic1", "b": "host"}, 3, 70 + 40 + 25),  # snic1's link: no measured latency (0)
        ({"a": "host", "b": "snic1"}, 3, 40 + 70 + 25),  # b -> wire: snic1 to snic0 crosses both links
    ],
)
def test_a_chains_row_counts_crossings_and_sums_latencies(where, crossings, latency):
    problem = parse_problem(build_problem(SNICS, ["web"], chain(["web", "a", "b", "snic0-eth0"]), PROFILES,
                                          every_chain=True))  # fmt: skip
    placement = {n.id: n.pinned or where.get(n.id, "host") for n in problem.nodes}
    row = chain_row(problem, problem.chains[0], placement)
    assert row["pcie_crossings"] == crossings and row["predicted_latency_us"] == pytest.approx(latency)
    assert row["slo_us"] is None and row["within_slo"] is None
