"""REST for standby instances (fakes for the runtime and OneSwitch, as in test_api.py): start, refuse a second
one, bad bodies name the field, a failover takes the standby over, DELETE stops it."""

from __future__ import annotations

from nf_agent.api import create_app
from testkit.fakes import make_agent
from tests.agent.test_api import post


def test_standby_over_rest(tmp_path):
    agent, rt, mp, _ = make_agent(tmp_path)
    c = create_app(agent).test_client()
    assert post(c, "/v1/nfs", {"type": "firewall", "id": "fw"}).status_code == 201
    assert post(c, "/v1/nfs/ghost/standby", {}).status_code == 404
    for body, fld in (({"location": "moon"}, "location"), ({"where": "host"}, "where"), ([], "body")):
        r = post(c, "/v1/nfs/fw/standby", body)
        assert r.status_code == 400 and r.get_json()["field"] == fld, r.get_json()
    assert "fw" not in agent.standbys
    r = c.post("/v1/nfs/fw/standby")  # no body: at the NF's location
    assert r.status_code == 201 and r.get_json() == {"id": "fw", "standby": True}
    sb = agent.standbys["fw"]
    assert sb.location == agent.state.nfs["fw"].location and sb.id in rt.running
    r = post(c, "/v1/nfs/fw/standby", {"location": "snic0"})
    assert r.status_code == 409 and r.get_json()["field"] == "standby"
    # a failover takes it over
    old = agent.state.nfs["fw"].instances[0]
    rt.running.pop(old.id)
    agent.failover("fw", old.id, "dead")
    assert agent.state.nfs["fw"].instances[0].id == sb.id and "fw" not in agent.standbys
    assert c.delete("/v1/nfs/fw/standby").status_code == 404  # used up
    assert post(c, "/v1/nfs/fw/standby", {"location": "snic0"}).status_code == 201
    sb2 = agent.standbys["fw"]
    assert sb2.location == "snic0"
    r = c.delete("/v1/nfs/fw/standby")
    assert r.status_code == 200 and r.get_json() == {"id": "fw", "standby": False}
    assert sb2.id not in rt.running and "fw" not in agent.standbys
