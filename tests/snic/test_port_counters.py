"""How the host reads an sNIC's port counters (nf_runtime RemoteNfs.port_counters): with the read time its
agent reports (its own clock), or, from an agent without `GET /v1/port-counters`, without one (the caller
then times the round trip). The real agent's answer is checked in test_emulated_snic."""

from __future__ import annotations

from host_datapath.snic_agent_client import SnicAgentError
from nf_runtime.snic_client import COUNTERS_RECHECK_S, RemoteNfs

PORTS = [{"name": "s0-nf1", "ofport": 3, "kind": "nf", "counters": {"tx_bytes": 10, "rx_bytes": 7}}]


class Client:
    """The two calls RemoteNfs makes here; `timed` is what GET /v1/port-counters answers (an exception:
    raised)."""

    snic = "snic0"

    def __init__(self, timed):
        self.timed = timed
        self.calls: list[str] = []

    def port_counters(self):
        self.calls.append("port-counters")
        if isinstance(self.timed, Exception):
            raise self.timed
        return self.timed

    def ports(self):
        self.calls.append("ports")
        return PORTS


def remote(client) -> RemoteNfs:
    return RemoteNfs(client, "redis://10.0.0.1:6379")  # type: ignore[arg-type]


def test_the_agents_read_time_comes_with_the_counters():
    c = Client({"t": 5012.25, "counters": {"s0-nf1": {"tx_bytes": 10}}})
    assert remote(c).port_counters() == ({"s0-nf1": {"tx_bytes": 10}}, 5012.25)
    assert c.calls == ["port-counters"]


def test_an_older_agent_answers_404_and_its_port_listing_is_used_untimed():
    c = Client(SnicAgentError(404, "no such path"))
    assert remote(c).port_counters() == ({"s0-nf1": {"tx_bytes": 10, "rx_bytes": 7}}, None)
    assert c.calls == ["port-counters", "ports"]


def test_an_agent_that_fails_or_answers_garbage_gives_no_counters():
    for timed in (SnicAgentError(500, "OVS: down"), SnicAgentError(0, "no answer"), {"t": "x", "counters": {}},
                  {"counters": {}}, ["not", "an", "object"]):  # fmt: skip
        c = Client(timed)
        assert remote(c).port_counters() == ({}, None), timed
        assert c.calls == ["port-counters"]  # one failed read: not a second one on the same sample


def test_a_dead_snic_is_not_asked():
    c = Client({"t": 1.0, "counters": {}})
    r = remote(c)
    r.down = True
    assert r.port_counters() == ({}, None) and c.calls == []


def test_an_older_agents_404_is_remembered_until_its_agent_changes():
    now = [100.0]
    c = Client(SnicAgentError(404, "no such path"))
    r = remote(c)
    r.clock = lambda: now[0]
    r.agent_boot = "a1"
    for _ in range(3):
        assert r.port_counters()[1] is None
    assert c.calls == ["port-counters", "ports", "ports", "ports"]  # one 404, not one per sample
    c.calls.clear()
    r.agent_boot = "a2"  # the heartbeat shows another agent process (an upgrade): asked again
    c.timed = {"t": 7.5, "counters": {}}
    assert r.port_counters() == ({}, 7.5) and c.calls == ["port-counters"]


def test_an_unwatched_older_agent_is_asked_again_after_the_recheck_period():
    now = [100.0]
    c = Client(SnicAgentError(404, "no such path"))
    r = remote(c)
    r.clock = lambda: now[0]
    r.port_counters(), r.port_counters()
    assert c.calls == ["port-counters", "ports", "ports"]
    now[0] += COUNTERS_RECHECK_S + 1
    c.calls.clear()
    r.port_counters()
    assert c.calls == ["port-counters", "ports"]
