"""Monitoring on recorded counters with an injected clock, the placement graph, and the re-placement
decision (pure), plus the re-placement loop driving migrations through the one call site (fakes)."""

from __future__ import annotations

import re

import pytest

from domain.model import Nf
from nf_agent.decide import decide
from nf_agent.graph import SnicInfo, build_problem
from nf_agent.monitor import Monitor, Sample, Wiring
from placement import parse_problem, solve
from placement.hysteresis import Dampener
from placement.profiles import load_profiles
from testkit.fakes import make_agent

G = 1e9 / 8  # bytes per Gbit


def wiring():
    return Wiring(
        nf_ports={("host", "t-j1"): "fw", ("snic0", "t-j2"): "ips"},
        pcie_ports={"snic0": "t-p0h"},
        chains={"fw": ("snic0-eth0", "ips"), "ips": ("fw", "vm0")},
    )


def ports(fw_tx, fw_rx, ips_tx, ips_rx, pcie_tx, pcie_rx):
    return {
        "host": {
            "t-j1": {"tx_bytes": fw_tx, "rx_bytes": fw_rx},
            "t-p0h": {"tx_bytes": pcie_tx, "rx_bytes": pcie_rx},
        },
        "snic0": {"t-j2": {"tx_bytes": ips_tx, "rx_bytes": ips_rx}},
    }


def test_rates_from_recorded_counters():
    m = Monitor()
    w = wiring()
    assert m.update(Sample(10.0, ports(0, 0, 0, 0, 0, 0), {"host": 1.0}, {"fw": {"rx": 0}}), w) is None
    # 2 s later: fw got 2 Gbit in / sent 2 Gbit out (1 Gbit/s each way), ips 4 Gbit, PCIe 3 Gbit down, 1 up
    got = m.update(
        Sample(12.0, ports(2 * G, 2 * G, 4 * G, 4 * G, 3 * G, 1 * G), {"host": 2.0}, {"fw": {"rx": 1000}}), w
    )
    assert got.interval == 2.0
    assert got.edges == {
        ("snic0-eth0", "fw"): pytest.approx(1.0),
        ("fw", "ips"): pytest.approx(2.0),  # out of fw (1) and into ips (2): the same edge, the larger
        ("ips", "vm0"): pytest.approx(2.0),
    }
    assert got.nf_load == {"fw": pytest.approx(2.0), "ips": pytest.approx(4.0)}
    assert got.pcie == {"snic0": {"down": pytest.approx(1.5), "up": pytest.approx(0.5)}}
    assert got.cpu_cores == {"host": pytest.approx(0.5)}
    assert got.nf_pps == {"fw": pytest.approx(500.0)}
    # the same clock value again changes nothing; a counter reset (restart) counts from 0, never negative
    assert m.update(Sample(12.0, ports(0, 0, 0, 0, 0, 0)), w) is got
    again = m.update(Sample(13.0, ports(G // 8, 0, 5 * G, 5 * G, 3 * G, 1 * G)), w)
    assert (
        again.edges[("snic0-eth0", "fw")] == pytest.approx(1.0 / 8 * 8 / 8 * 8 / 8, rel=1e-6)
        or again.edges[("snic0-eth0", "fw")] >= 0
    )
    assert all(v >= 0 for v in again.edges.values())
    assert again.edges[("fw", "ips")] == pytest.approx(1.0)  # fw's rx reset to 0; ips got 1 Gbit in 1 s


def test_ewma_smooths():
    m = Monitor(alpha=0.5)
    w = wiring()
    m.update(Sample(0.0, ports(0, 0, 0, 0, 0, 0)), w)
    m.update(Sample(1.0, ports(G, 0, 0, 0, 0, 0)), w)  # 1 Gbit/s
    got = m.update(Sample(2.0, ports(G, 0, 0, 0, 0, 0)), w)  # 0 Gbit/s this second
    assert got.edges[("snic0-eth0", "fw")] == pytest.approx(0.5)
    # PCIe is smoothed as the edges it is predicted from: 0, then 2 Gbit/s down -> 1, then 0 -> 0.5
    got = m.update(Sample(3.0, ports(G, 0, 0, 0, 2 * G, 0)), w)
    assert got.pcie == {"snic0": {"down": pytest.approx(1.0), "up": 0.0}}
    got = m.update(Sample(4.0, ports(G, 0, 0, 0, 2 * G, 0)), w)
    assert got.pcie == {"snic0": {"down": pytest.approx(0.5), "up": 0.0}}


SNICS = [SnicInfo("snic0", 36.0, 40.0, 1)]


def nf(i, t, loc, gbps, src=None, dst=None, pin=None):
    return Nf(i, t, {}, 200, gbps, src, dst, pin=pin, location=loc)


def test_graph_uses_measured_rates_over_expected_and_fixes_existing():
    nfs = [nf("a", "ips", "host", 1.0, dst="vm-x"), nf("b", "firewall", None, 2.0, src="a")]
    p = build_problem(SNICS, ["vm-x"], nfs, load_profiles(), {("snic0-eth0", "a"): 3.25}, fixed={"a"})
    edges = {(e["src"], e["dst"]): e["gbps"] for e in p["edges"]}
    assert edges == {("snic0-eth0", "a"): 3.25, ("a", "vm-x"): 1.0, ("a", "b"): 2.0, ("b", "snic0-eth0"): 2.0}
    nodes = {n["id"]: n for n in p["nodes"]}
    assert nodes["a"]["pinned"] == "host" and nodes["b"]["pinned"] is None
    assert nodes["snic0-eth0"] == {"id": "snic0-eth0", "kind": "port", "pinned": "snic0"}
    parse_problem(p)  # valid input for the solver


def test_graph_carries_base_costs_and_instance_count():
    from domain.model import Instance

    a = nf("a", "ips", "host", 0.05)
    b = nf("b", "l7fw", "host", 0.05)
    b.instances = [Instance(f"b{k}", "host", "host", k, "ns", "i", "p") for k in range(2)]
    profiles = {"ips": {"r_host": 0.5, "r_nic": 30, "b_host": 0.05, "b_nic": 2.5}, "l7fw": {"r_host": 0.4}}
    p = build_problem(SNICS, [], [a, b], profiles)
    nodes = {n["id"]: n for n in p["nodes"]}
    assert (nodes["a"]["b_host"], nodes["a"]["b_nic"], nodes["a"].get("instances", 1)) == (0.05, 2.5, 1)
    assert "b_host" not in nodes["b"] and nodes["b"]["instances"] == 2
    prob = parse_problem(p)
    hc = dict(zip((n.id for n in prob.nodes), prob.host_costs(), strict=True))
    assert float(hc["a"]) == pytest.approx(0.05 + 0.5 * 0.1)  # base + r x (in + out)


def test_run_config_no_spin_under_a_quota_and_pipelined_claims():
    from nf_local.command import run_config

    assert run_config("firewall", {"rules": []}, "snic0") == {"rules": [], "spin_us": 0}
    assert run_config("firewall", {"rules": []}, "host") == {"rules": []}
    assert run_config("firewall", {"spin_us": 50}, "snic0") == {"spin_us": 50}
    # NAT and LB claim new connections pipelined unless their config says otherwise.
    assert run_config("nat", {"inside": []}, "host") == {"inside": [], "mapping_claim": "pipelined"}
    assert run_config("nat", {"mapping_claim": "atomic"}, "host") == {"mapping_claim": "atomic"}
    assert run_config("lb", {}, "snic1") == {"conn_claim": "pipelined", "spin_us": 0}
    cfg = {"vip": "10.0.0.1"}
    run_config("lb", cfg, "host")
    assert cfg == {"vip": "10.0.0.1"}, "the NF's own config is not changed"
    # The agent's --cpu-latency-us goes to every NF unless its config sets its own bound.
    assert run_config("firewall", {}, "host", 0) == {"cpu_latency_us": 0}
    assert run_config("firewall", {"cpu_latency_us": 20}, "host", 0) == {"cpu_latency_us": 20}
    assert run_config("firewall", {}, "host", None) == {}


def test_parse_cpu_latency_off_or_a_bound_in_range():
    from nf_local.command import MAX_CPU_LATENCY_US, parse_cpu_latency

    assert parse_cpu_latency("off") is None
    assert parse_cpu_latency("0") == 0 and parse_cpu_latency(str(MAX_CPU_LATENCY_US)) == MAX_CPU_LATENCY_US
    for bad, word in (
        ("-1", "in [0"),
        (str(MAX_CPU_LATENCY_US + 1), "in [0"),
        ("none", "integer"),
        ("", "integer"),
    ):
        with pytest.raises(ValueError, match=re.escape(word)):
            parse_cpu_latency(bad)


def solver(p):
    return solve(parse_problem(p), time_limit=5)


def test_decide_moves_when_saving_beats_hysteresis_and_respects_dampening():
    # one IPS on the host carrying 4 Gbit/s from the wire: the sNIC can take it (0.5556*8 = 4.4 <= 36)
    nfs = [nf("ips1", "ips", "host", 4.0)]
    p = build_problem(SNICS, [], nfs, load_profiles())
    damp = Dampener(threshold=0.1, rel_threshold=0.05, window=30)
    d = decide(p, {"ips1": "host"}, solver, damp, now=100.0)
    assert d.go and d.moves == [{"id": "ips1", "from": "host", "to": "snic0"}]
    assert d.current_cost == pytest.approx(0.2778 * 8) and d.new_cost == 0.0
    damp.record(100.0, {"ips1": "host"})
    # right after a migration: the window holds it back, force lets it through
    d2 = decide(p, {"ips1": "host"}, solver, damp, now=110.0)
    assert not d2.go and "dampening" in d2.why
    assert decide(p, {"ips1": "host"}, solver, damp, now=110.0, force=True).go is True
    # anti-flap: back to a placement left 50 s ago is refused, also when forced
    flap = Dampener(threshold=0.1, window=30, flap_window=300)
    flap.record(100.0, {"ips1": "snic0"})
    d4 = decide(p, {"ips1": "host"}, solver, flap, now=150.0, force=True)
    assert not d4.go and "anti-flap" in d4.why
    # already optimal
    d3 = decide(p, {"ips1": "snic0"}, solver, damp, now=1000.0)
    assert not d3.go and d3.why == "already optimal"


def test_decide_below_threshold_stays():
    nfs = [nf("m", "monitor", "host", 0.01)]
    p = build_problem(SNICS, [], nfs, load_profiles())
    d = decide(p, {"m": "host"}, solver, Dampener(threshold=0.5), now=0.0)
    assert not d.go and "below hysteresis" in d.why and d.moves


def test_decide_leaves_an_overloaded_snic_even_at_a_cost():
    # traffic grew: the IPS on the sNIC now needs 0.5556*2*40 = 44 > 36 units
    nfs = [nf("ips1", "ips", "snic0", 40.0)]
    p = build_problem(SNICS, [], nfs, load_profiles())
    damp = Dampener(window=30)
    damp.record(0.0, {"ips1": "host"})  # a migration just happened: the window would hold a normal move
    d = decide(p, {"ips1": "snic0"}, solver, damp, now=1.0)
    assert d.go and d.moves == [{"id": "ips1", "from": "snic0", "to": "host"}] and "capacity" in d.why


def ips_on_host_under_load(tmp_path):
    """An agent with IPS "ips1" placed while light on the host (preferred), then traffic grows: the monitor's
    counters say 4 Gbit/s. Returns (agent, runtime, mapper, clock, the NF, the list of migrate calls)."""
    agent, rt, mp, clock = make_agent(tmp_path, dampener=Dampener(threshold=0.1, window=30))
    from nf_agent.validation import NfRequest

    agent.create_nf(NfRequest("ips1", "ips", {}, 0.0, None, None, None, "host"))
    n = agent.state.nfs["ips1"]
    assert n.location == "host"
    calls = []
    real = agent.moves.migrate  # the re-placement loop moves through Moves.migrate
    agent.moves.migrate = lambda nf_, target: calls.append((nf_.id, target)) or real(nf_, target)
    port = n.instances[0].port_if
    rt.counters["host"][port] = {"tx_bytes": 0, "rx_bytes": 0}
    agent.sample()
    clock.t += 1
    rt.counters["host"][port] = {"tx_bytes": int(2 * G), "rx_bytes": int(2 * G)}
    m = agent.sample()
    assert m.nf_load["ips1"] == pytest.approx(4.0)
    return agent, rt, mp, clock, n, calls


def test_replacement_loop_migrates_through_the_one_call_site(tmp_path):
    agent, rt, mp, clock, n, calls = ips_on_host_under_load(tmp_path)
    d = agent.run_placement()
    assert d.go and calls == [("ips1", "snic0")]
    assert agent.state.nfs["ips1"].location == "snic0" and mp.remaps[-1][1] == "snic0"
    assert [i.location for i in rt.running.values()] == ["snic0"]
    assert agent.state.history[-1]["event"] == "placement-run"
    assert any(h["event"] == "nf-migrate" for h in agent.state.history)
    # view: predicted from the model under the measured matrix
    view = agent.placement_view()
    assert view["locations"] == {"ips1": "snic0"} and view["predicted"]["host_cores"] == 0.0
    assert view["last_solve"]["go"] is True


def test_supervisor_restarts_then_gives_up(tmp_path):
    from nf_agent.service import RestartPolicy
    from nf_agent.validation import NfRequest

    agent, rt, mp, clock = make_agent(tmp_path, restart=RestartPolicy(max_restarts=2, window=60))
    agent.create_nf(NfRequest("f", "firewall", {}, 0.0, None, None, None, None))
    inst = agent.state.nfs["f"].instances[0]
    for expected_restarts in (1, 2):
        rt.running.clear()  # the process died
        agent.supervise()
        assert inst.restarts == expected_restarts and inst.state == "running"
    rt.running.clear()
    agent.supervise()
    assert inst.state == "failed" and agent.health()["ok"] is False
    clock.t += 1


def test_create_on_an_over_budget_host_still_places_the_new_nf(tmp_path):
    """Existing NFs already overload the sNIC (measured): a new NF goes where it adds no violation."""
    from domain.errors import Conflict
    from nf_agent.validation import NfRequest

    agent, rt, mp, clock = make_agent(tmp_path, capacity=1.0)
    agent.create_nf(NfRequest("ips1", "ips", {}, 0.0, None, None, "snic0", None))
    port = agent.state.nfs["ips1"].instances[0].port_if
    rt.counters["snic0"][port] = {"tx_bytes": 0, "rx_bytes": 0}
    agent.sample()
    clock.t += 1
    rt.counters["snic0"][port] = {"tx_bytes": int(2 * G), "rx_bytes": int(2 * G)}  # 4 Gbit/s: 2.2 > 1 unit
    agent.sample()
    assert agent.placement_view()["predicted"]["violations"]
    nf = agent.create_nf(NfRequest("fw", "firewall", {}, 1.0, None, None, None, "snic0"))
    assert nf.location == "host"  # snic0 would add load to the overloaded sNIC
    with pytest.raises(Conflict):  # pinned to the overloaded sNIC: refused
        agent.create_nf(NfRequest("fw2", "firewall", {}, 1.0, None, None, "snic0", None))
    assert set(agent.state.nfs) == {"ips1", "fw"}


def test_a_move_oneswitch_refuses_is_not_retried_within_the_window(tmp_path):
    """OneSwitch refusing a move (502 at prepare/remap, e.g. a controller rule it cannot carry from there):
    the NF stays, and the next runs do not start and stop a target instance again until the dampening window
    has passed."""
    agent, rt, mp, clock, n, calls = ips_on_host_under_load(tmp_path)
    mp.fail_prepare = True  # OneSwitch answers the prepare with an error
    d = agent.run_placement()
    assert calls == [("ips1", "snic0")] and "migrating ips1 failed" in d.why
    assert n.location == "host" and [i.location for i in rt.running.values()] == ["host"]
    clock.t += 10
    d = agent.run_placement()
    assert calls == [("ips1", "snic0")], "retried within the window"
    assert "not moved to snic0: OneSwitch did not take that move 10s ago" in d.why
    mp.fail_prepare = False  # the cause went away (the rule was changed)
    clock.t += 25
    d = agent.run_placement()
    assert calls == [("ips1", "snic0"), ("ips1", "snic0")] and n.location == "snic0", d.why


def test_each_switch_rates_over_its_own_read_interval():
    """An sNIC's counters come over its agent's API: read 0.25 s later in the second sample than in the first,
    its rates take that switch's own interval (1.25 s), not the sample's (1 s), which would read 25 % high."""
    m, w = Monitor(), wiring()
    m.update(Sample(0.0, ports(0, 0, 0, 0, 0, 0), port_t={"host": 0.0, "snic0": 0.0}), w)
    got = m.update(Sample(1.0, ports(G, G, 5 * G // 4, 0, G, 0), port_t={"host": 1.0, "snic0": 1.25}), w)
    assert got.edges[("fw", "ips")] == pytest.approx(1.0)  # ips (on snic0) got 1.25 Gbit in 1.25 s
    assert got.pcie["snic0"]["down"] == pytest.approx(1.0)  # the host's PCIe port: the host's own interval
    # a read time that does not advance (a clock step) falls back to the sample's interval
    again = m.update(
        Sample(2.0, ports(2 * G, 2 * G, 9 * G // 4, 0, 2 * G, 0), port_t={"host": 2.0, "snic0": 1.0}), w
    )
    assert again.edges[("fw", "ips")] == pytest.approx(1.0)


def test_an_snic_read_on_its_own_clock_and_a_step_of_that_clock():
    """An sNIC's agent reports its read times on its own clock (a DPU booted at another moment: 5000 s
    ahead here): only that switch's differences count. When that clock steps (the DPU rebooted: back near
    0), the interval falls back to the sample's rather than a negative or an hour-long one."""
    m, w = Monitor(), wiring()
    m.update(Sample(10.0, ports(0, 0, 0, 0, 0, 0), port_t={"host": 10.0, "snic0": 5010.0}), w)
    got = m.update(Sample(11.0, ports(G, G, 9 * G // 10, 0, G, 0), port_t={"host": 11.0, "snic0": 5010.9}), w)
    assert got.edges[("fw", "ips")] == pytest.approx(1.0)  # 0.9 Gbit in the sNIC's own 0.9 s
    stepped = m.update(
        Sample(12.0, ports(2 * G, 2 * G, 2 * G, 0, 2 * G, 0), port_t={"host": 12.0, "snic0": 3.0}), w
    )
    assert stepped.edges[("fw", "ips")] == pytest.approx(1.1)  # 1.1 Gbit over the sample's 1 s
    late = m.update(
        Sample(13.0, ports(3 * G, 3 * G, 3 * G, 0, 3 * G, 0), port_t={"host": 13.0, "snic0": 3600.0}), w
    )
    assert late.edges[("fw", "ips")] == pytest.approx(1.0)  # not 1 Gbit over an hour
