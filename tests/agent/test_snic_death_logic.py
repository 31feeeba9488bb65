"""The agent's part of an sNIC's death, with fakes for the runtime and OneSwitch (the real thing:
tests/migration/test_snic_death.py): every instance there is replaced on the host, a pinned NF is marked failed,
the sNIC is no location while dead, a silent sNIC's instances are not failed over one by one, and a returning
sNIC is a location again only once OneSwitch has its switch back."""

from __future__ import annotations

import threading

from nf_agent.api import create_app
from testkit.fakes import make_agent
from testkit.poll import wait
from tests.agent.test_api import post


def on_snic0(tmp_path):
    agent, rt, mp, clock = make_agent(tmp_path)
    c = create_app(agent).test_client()
    for nf_id in ("fw", "nat"):
        body = {"type": "firewall", "id": nf_id, "expected": {"gbps": 2.0, "src": "snic0-eth0"}}
        assert post(c, "/v1/nfs", body).status_code == 201
        nf = agent.state.nfs[nf_id]
        if nf.location != "snic0":
            agent.migrate(nf, "snic0")
    assert {n.location for n in agent.state.nfs.values()} == {"snic0"}
    return agent, rt, mp


def test_dead_snic_fails_over_to_host_and_is_no_location(tmp_path):
    agent, rt, mp = on_snic0(tmp_path)
    old = {k: n.instances[0] for k, n in agent.state.nfs.items()}
    rt.silent.add("snic0")
    out = agent.snic_dead("snic0")
    assert sorted(r["nf"] for r in out["failed_over"]) == ["fw", "nat"] and out["errors"] == []
    for nf in agent.state.nfs.values():
        assert nf.location == "host" and nf.instances[0].id in rt.running
        assert mp.map_[nf.vport] == ("host", nf.instances[0].ofport)
    assert "snic0" not in agent.ctx.live_locations
    assert agent.snic_dead("snic0") == {}  # once
    # the dead instances are not released yet (their agent is gone): kept to be released when it is back
    assert {i.id for i in agent.ctx.orphans["snic0"]} == {i.id for i in old.values()}


def test_silent_snic_instance_is_not_failed_over_alone(tmp_path):
    agent, rt, mp = on_snic0(tmp_path)
    inst = agent.state.nfs["fw"].instances[0]
    rt.silent.add("snic0")
    rt.running.pop(inst.id)  # looks dead: its sNIC does not answer
    assert agent.failover("fw", inst.id, "dead") == {}
    assert agent.state.nfs["fw"].instances[0] is inst and agent.probe() == {}


def test_snic_back_is_a_location_once_oneswitch_has_its_switch(tmp_path):
    agent, rt, mp = on_snic0(tmp_path)
    orphans = [n.instances[0] for n in agent.state.nfs.values()]
    rt.silent.add("snic0")
    agent.snic_dead("snic0")
    mp.disconnected.add("snic0")
    rt.silent.discard("snic0")
    out = agent.snic_back("snic0", "boot-2", poll_s=0.01)
    assert out["placeable"] is False and sorted(out["released"]) == sorted(i.id for i in orphans)
    assert all(i.id not in rt.running for i in orphans)
    assert "snic0" not in agent.ctx.live_locations
    mp.disconnected.clear()  # OneSwitch reconnected
    wait(lambda: "snic0" in agent.ctx.live_locations, 5, "snic0 placeable")
    assert [h["event"] for h in agent.state.history[-2:]] == ["snic-back", "snic-placeable"]


def test_snic_back_waits_no_longer_once_it_is_silent_again(tmp_path):
    agent, rt, mp = on_snic0(tmp_path)
    rt.silent.add("snic0")
    agent.snic_dead("snic0")
    mp.disconnected.add("snic0")
    rt.silent.discard("snic0")
    agent.snic_back("snic0", poll_s=0.01)
    rt.silent.add("snic0")  # died again before OneSwitch reconnected
    wait(lambda: not any(t.name == "uno-snic-return-snic0" for t in threading.enumerate()), 5,
         "the waiting thread to end")  # fmt: skip
    assert "snic0" in agent.ctx.down


def test_nfs_go_back_after_the_dampening_window_not_before(tmp_path):
    """A failover is no choice: the window counts from it, but going back is no flap."""
    agent, rt, mp = on_snic0(tmp_path)
    clock = agent.ctx.clock
    window = agent.ctx.cfg.dampener.window
    rt.silent.add("snic0")
    agent.snic_dead("snic0")
    d = agent.run_placement()
    assert not d.go and {n.location for n in agent.state.nfs.values()} == {"host"}  # snic0 is no location
    rt.silent.discard("snic0")
    assert agent.snic_back("snic0")["placeable"] is True
    clock.sleep(window / 2)
    d = agent.run_placement()
    assert not d.go and "dampening" in d.why, d.why
    clock.sleep(window)
    d = agent.run_placement()
    assert d.go, d.why
    assert {n.location for n in agent.state.nfs.values()} == {"snic0"}


def test_a_move_is_not_undone_by_a_failover_of_the_instance_it_stops(tmp_path):
    """The failover watchdog sees the old instance exit at the end of a move (its stop): that is no death. The
    move holds the agent's lock, so the failover it triggers finds the instance already replaced."""
    agent, rt, mp = on_snic0(tmp_path)
    nf = agent.state.nfs["fw"]
    old = nf.instances[0]
    stop = rt.stop_processes
    seen = []

    def stop_and_notice(inst):
        stop(inst)
        if inst.id == old.id:  # the watchdog's thread notices the exit while the move goes on
            t = threading.Thread(target=lambda: seen.append(agent.instance_failed(inst.id, "exit")))
            t.start()
            t.join(timeout=0.3)

    rt.stop_processes = stop_and_notice
    agent.migrate(nf, "host")
    wait(lambda: seen, 5, "the watchdog's call to return")
    assert seen == [{}]
    new = agent.state.nfs["fw"].instances[0]
    assert new.location == "host" and mp.map_[nf.vport] == (new.switch, new.ofport)
