"""PCIe traffic that passes no NF (agent/background.py): the measured link load beyond what the model predicts
for the current placement is each sNIC's background; the solver gives the NFs only the rest of the link and
GET /v1/placement's predicted PCIe includes it. Pure, and REST with fakes and an injected measurement."""

from __future__ import annotations

import pytest

from nf_agent.api import create_app
from nf_agent.background import pcie_background
from nf_agent.graph import SnicInfo, build_problem
from nf_agent.monitor import Measurement
from nf_agent.validation import NfRequest
from placement import parse_problem
from testkit.fakes import make_agent


def test_background_is_the_measured_excess_per_direction():
    got = pcie_background({"snic0": {"up": 0.5, "down": 3.0}}, {"snic0": {"up": 0.0, "down": 1.0}})
    assert got == {"snic0": {"up": 0.5, "down": 2.0}}


def test_background_clamped_at_zero_when_the_model_predicts_more():
    got = pcie_background({"snic0": {"up": 0.2, "down": 0.5}}, {"snic0": {"up": 1.0, "down": 1.0}})
    assert got == {"snic0": {"up": 0.0, "down": 0.0}}


def test_ack_direction_error_stays_below_the_floor():
    """A 1 Gbit/s stream down through an sNIC NF: the one-arm counters put its ACKs (2 %) down too, the link
    carries them up. 2 % of the link's predicted crossings is under the 5 % floor: no background."""
    got = pcie_background({"snic0": {"up": 0.02, "down": 1.0}}, {"snic0": {"up": 0.0, "down": 1.02}})
    assert got == {"snic0": {"up": 0.0, "down": 0.0}}
    # the same excess on a link the model predicts idle is above the 1 Mbit/s floor: background
    got = pcie_background({"snic0": {"up": 0.02, "down": 0.0}}, {"snic0": {"up": 0.0, "down": 0.0}})
    assert got == {"snic0": {"up": 0.02, "down": 0.0}}
    got = pcie_background({"snic0": {"up": 0.0005, "down": 0.0}}, {"snic0": {"up": 0.0, "down": 0.0}})
    assert got == {"snic0": {"up": 0.0, "down": 0.0}}  # counter jitter on an idle link


def test_background_only_for_the_model_snics_and_rounded():
    got = pcie_background(
        {"snic0": {"down": 0.123456789}, "snic9": {"up": 5.0}},
        {"snic0": {"up": 0.0, "down": 0.0}, "snic1": {}},
    )
    assert got == {"snic0": {"up": 0.0, "down": 0.1235}, "snic1": {"up": 0.0, "down": 0.0}}


def test_build_problem_carries_the_background_only_when_given():
    snics = [SnicInfo("snic0", 4.0, 10.0, 1), SnicInfo("snic1", 4.0, 10.0, 1)]
    plain = build_problem(snics, ["web"], [], {})
    assert all("background_gbps" not in s for s in plain["snics"])
    bg = build_problem(snics, ["web"], [], {}, background={"snic1": {"up": 0.5, "down": 1.0}})
    assert bg["snics"][0] == plain["snics"][0]
    assert bg["snics"][1]["background_gbps"] == {"up": 0.5, "down": 1.0}
    assert parse_problem(bg).snics[1].pcie_budget("down") == 9


def measured(pcie: dict[str, float], gbps: float) -> Measurement:
    """The monitor's view: web -> fw -> db at `gbps`, the snic0 link at `pcie`."""
    edges = {("web", "fw"): gbps, ("fw", "db"): gbps}
    return Measurement(1000.0, 0.5, edges, {"fw": 2 * gbps}, {"snic0": pcie}, {}, {})


@pytest.fixture
def east_west(tmp_path):
    """An agent (fakes) with VMs web, db and fw (web -> fw -> db, 1 Gbit/s) on the host; snic0's link 2.5
    Gbit/s each way, so fw on snic0 (1 down, 1 up) fits unless something else uses the link."""
    agent, rt, mp, clock = make_agent(tmp_path, pcie=2.5)
    c = create_app(agent).test_client()
    for vm in ("web", "db"):
        assert c.post("/v1/vms", json={"id": vm}).status_code == 201
    agent.create_nf(NfRequest("fw", "firewall", {}, 1.0, "web", "db", None, "host"))
    if agent.state.nfs["fw"].location != "host":
        agent.migrate_request("fw", "host")
    return agent, c


def test_no_background_fw_would_go_to_the_snic(east_west):
    """The control: with the link carrying only what the model predicts (nothing, fw on the host), the solver
    moves fw to snic0 (cheaper) and an operator may move it there."""
    agent, c = east_west
    agent.monitor.measurement = measured({"up": 0.0, "down": 0.0}, 1.0)
    view = c.get("/v1/placement").get_json()
    assert view["predicted"]["background_gbps"] == {"snic0": {"up": 0.0, "down": 0.0}}
    assert agent.run_placement(force=True).result["placement"]["fw"] == "snic0"


def test_background_keeps_fw_off_a_link_it_would_overflow(east_west):
    """2 Gbit/s down on the link that no NF explains (a VM <-> wire stream): fw on snic0 would add 1 down,
    3 > 2.5. The solver keeps it on the host, a manual move is refused naming the link, and the view's
    predicted PCIe is the link's load (the background) beside the background itself."""
    agent, c = east_west
    agent.monitor.measurement = measured({"up": 0.01, "down": 2.0}, 1.0)
    view = c.get("/v1/placement").get_json()
    assert view["predicted"]["background_gbps"] == {"snic0": {"up": 0.01, "down": 2.0}}
    assert view["predicted"]["pcie_gbps"] == {"snic0": {"up": 0.01, "down": 2.0}}
    assert view["predicted"]["violations"] == []
    metrics = c.get("/metrics").get_data(as_text=True)
    assert 'uno_agent_pcie_background_gbps{direction="down",snic="snic0"} 2.0' in metrics
    assert 'uno_agent_predicted_pcie_gbps{direction="down",snic="snic0"} 2.0' in metrics
    d = agent.run_placement(force=True)
    assert d.result["status"] == "optimal" and d.result["placement"]["fw"] == "host"
    assert d.result["pcie_gbps"]["snic0"] == {"up": 0.01, "down": 2.0}
    assert agent.state.nfs["fw"].location == "host"
    r = c.post("/v1/nfs/fw/migrate", json={"to": "snic0"})
    assert r.status_code == 409 and "pcie of snic0 (down): 3 > 2.5" in r.get_json()["error"], r.get_json()


def test_background_measured_with_the_nf_on_the_snic(east_west):
    """fw on snic0 and the link at what its crossings explain plus 0.5 down: background 0.5 down only; the
    predicted link load equals the measured one."""
    agent, c = east_west
    agent.monitor.measurement = None
    assert c.post("/v1/nfs/fw/migrate", json={"to": "snic0"}).status_code == 200
    agent.monitor.measurement = measured({"up": 1.0, "down": 1.5}, 1.0)
    pred = c.get("/v1/placement").get_json()["predicted"]
    assert pred["background_gbps"] == {"snic0": {"up": 0.0, "down": 0.5}}
    assert pred["pcie_gbps"] == {"snic0": {"up": 1.0, "down": 1.5}}


def test_nf_still_created_when_the_background_alone_overflows_the_link(tmp_path):
    """No NF yet, 2 Gbit/s down measured on a 1 Gbit/s link: no placement meets the budget (the solver says
    the background alone exceeds it), but a new NF still goes where it adds nothing to the link: the default
    chain wire -> NF -> wire stays on snic0 (on the host it would cross the link both ways)."""
    agent, rt, mp, clock = make_agent(tmp_path, pcie=1.0)
    agent.monitor.measurement = Measurement(1000.0, 0.5, {}, {}, {"snic0": {"up": 0.0, "down": 2.0}}, {}, {})
    res = agent.solver(agent.problem([]))  # nothing to place: what the solver says of the link itself
    assert res["status"] == "infeasible" and "background traffic alone" in res["reason"], res
    nf = agent.create_nf(NfRequest("fw", "firewall", {}, 0.5, None, None, None, "host"))
    assert nf.location == "snic0"
