"""Bad input from outside: garbage, truncated, oversized and wrong-version OpenFlow bytes on OneSwitch's
listener, flow-mods naming unmapped ports, bad REST requests. OneSwitch answers with errors, stays up, and its
virtual rules (GET /v1/rules) and port map do not change."""

from __future__ import annotations

import json
import random
import struct

import pytest

from host_datapath.oneswitch_client import OneSwitchError
from testkit.oneswitch import ofraw

from .conftest import ONESWITCH

pytestmark = ONESWITCH
BASE_RULES = [
    "table=0,priority=10,in_port=100,actions=output:1",
    "table=0,priority=10,in_port=1,actions=output:100",
]


@pytest.fixture
def sw(os_host):
    """OneSwitch with two known rules; afterwards: still healthy, rules and port map exactly as before."""
    import subprocess

    for cmd in (["del-flows"], ["del-groups"]):
        subprocess.run(
            ["ovs-ofctl", "-O", "OpenFlow13", "--no-names", cmd[0], os_host.listen],
            check=True,
            capture_output=True,
        )
    for r in BASE_RULES:
        subprocess.run(
            ["ovs-ofctl", "-O", "OpenFlow13", "--no-names", "add-flow", os_host.listen, r],
            check=True,
            capture_output=True,
        )
    before = (rules_view(os_host), os_host.client.ports())
    yield os_host
    assert os_host.host.oneswitch().running(), "OneSwitch died"
    assert os_host.client.health().all_connected()
    assert (rules_view(os_host), os_host.client.ports()) == before, "bad input changed OneSwitch's state"


def rules_view(os_host) -> list:
    return sorted(json.dumps(r.raw, sort_keys=True) for r in os_host.client.rules())


def listen_port(os_host) -> int:
    return int(os_host.listen.rsplit(":", 1)[1])


def probe(c: ofraw.Conn, xid: int) -> list[ofraw.Reply]:
    """Send an echo request and read until its reply: everything OneSwitch answered before it."""
    c.send(ofraw.msg(ofraw.ECHO_REQUEST, b"probe", xid=xid))
    return c.until(xid, ofraw.ECHO_REPLY, timeout=15)


def test_malformed_messages_get_errors_and_the_connection_survives(sw):
    c = ofraw.Conn(listen_port(sw))
    try:
        c.hello()
        fm = ofraw.flow_mod(100, 2)
        cases = {
            "truncated match": ofraw.header(ofraw.FLOW_MOD, 60, 11) + fm[8:60],
            "bad match type": fm[:48] + struct.pack("!H", 7) + fm[50:],
            "bad oxm length": fm[:52] + struct.pack("!I", 0x800000FF) + fm[56:],
            "unknown type": ofraw.msg(200, b"\x00" * 16, xid=11),
            "bad command": ofraw.flow_mod(100, 2, xid=11, command=9),
        }
        for i, (what, data) in enumerate(cases.items()):
            c.send(data)
            replies = probe(c, 1000 + i)
            errors = [r.error for r in replies if r.type == ofraw.ERROR]
            assert errors, f"{what}: no OFPT_ERROR, got {replies}"
            assert replies[-1].type == ofraw.ECHO_REPLY, f"{what}: connection lost: {replies}"
    finally:
        c.close()


@pytest.mark.parametrize(
    "in_port,out_port", [(150, 2), (100, 150)], ids=["unmapped-in_port", "unmapped-output"]
)
def test_flow_mod_naming_an_unmapped_port_is_kept_virtual_and_never_widens(os_host, in_port, out_port):
    """Decision (issue 4, "unmappable ports"): a valid port number that is not mapped YET is accepted, as OVS
    accepts an output to a port that does not exist yet, because the agent maps an NF's virtual port after the
    controller may have installed its chain (and during a failover a port is briefly unmapped). It must stay
    virtual: nothing physical matches traffic of the unmapped port, and an output to it sends nothing."""
    import subprocess

    target = os_host.listen
    subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--no-names", "del-flows", target], check=True)
    try:
        r = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--no-names", "add-flow", target,
                            f"in_port={in_port},actions=output:{out_port}"], capture_output=True, text=True)  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
        (rule,) = os_host.client.rules()
        assert f"in_port={in_port}" in rule.match.replace(" ", "") or str(in_port) in rule.match
        if in_port == 150:
            assert rule.physical == (), rule.raw  # no physical rule: nothing can match for it
        else:
            assert rule.physical, rule.raw
            for p in rule.physical:
                assert "output" not in p.actions, rule.raw  # an output to nowhere is a drop, never a flood
    finally:
        subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "--no-names", "del-flows", target], check=True)


def test_framing_errors_and_wrong_versions(sw):
    port = listen_port(sw)
    # Length field below the header size (framing is lost), a message of another version mid-connection:
    # an error and/or a closed connection, no crash.
    for data in (
        ofraw.header(ofraw.FLOW_MOD, 4, 1),
        ofraw.header(ofraw.HELLO, 0, 1),
        ofraw.msg(2, xid=1, version=5),
    ):
        c = ofraw.Conn(port)
        try:
            c.hello()
            c.send(data)
            replies = probe(c, 7)
            assert not replies or replies[-1].type in (ofraw.ERROR, ofraw.ECHO_REPLY), replies
        finally:
            c.close()
    # Oversized: a header announcing 65535 bytes followed by garbage of that size, then a probe.
    c = ofraw.Conn(port)
    try:
        c.hello()
        c.send(
            ofraw.header(ofraw.FLOW_MOD, 0xFFFF, 3)
            + bytes(random.Random(3).randrange(256) for _ in range(0xFFFF - 8))
        )
        replies = probe(c, 8)
        assert any(r.type == ofraw.ERROR for r in replies) or c.closed, replies
    finally:
        c.close()
    # Truncated: the connection closes in the middle of a message.
    c = ofraw.Conn(port)
    c.hello()
    c.send(ofraw.flow_mod(100, 2)[:30])
    c.close()
    # OpenFlow 1.0 only: HELLO_FAILED, as OVS does.
    c = ofraw.Conn(port)
    try:
        c.send(ofraw.msg(ofraw.HELLO, xid=1, version=1))
        replies = [r for r in (c.recv(10), c.recv(5)) if r]
        assert any(r.type == ofraw.ERROR and r.error[0] == 0 for r in replies), replies  # OFPET_HELLO_FAILED
    finally:
        c.close()


def test_seeded_fuzz_of_the_decoder(sw):
    """Random headers and bodies, and valid flow-mods cut inside their match; seeded, so repeatable."""
    rng = random.Random(4242)
    port = listen_port(sw)
    c = ofraw.Conn(port)
    c.hello()
    sent = 0
    try:
        for i in range(300):
            kind = rng.random()
            if kind < 0.5:
                body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 120)))
                data = (
                    ofraw.header(
                        rng.choice([5, 6, 14, 15, 16, 18, 24, 29, rng.randrange(256)]), 8 + len(body), i
                    )
                    + body
                )
            else:
                fm = ofraw.flow_mod(100, 2, xid=i)
                cut = rng.randrange(49, 60)  # inside the match: never a well-formed message
                data = ofraw.header(ofraw.FLOW_MOD, cut, i) + fm[8:cut]
            if c.closed:
                c.close()
                c = ofraw.Conn(port)
                c.hello()
            c.send(data)
            sent += 1
            if i % 25 == 24:
                probe(c, 100000 + i)
        probe(c, 999999)
    finally:
        c.close()
    assert sent == 300


@pytest.mark.parametrize(
    "method,path,body,status,field",
    [
        ("PUT", "/v1/ports/abc", {"switch": "host", "port": 200}, 400, None),
        ("PUT", "/v1/ports/300", b"{not json", 400, None),
        ("PUT", "/v1/ports/300", {"switch": "nosuch", "port": 5}, 400, "switch"),
        ("PUT", "/v1/ports/300", {"switch": "host"}, 400, "port"),
        ("PUT", "/v1/ports/300", {"switch": "host", "port": -1}, 400, "port"),
        ("PUT", "/v1/ports/300", {"switch": "host", "port": "x"}, 400, "port"),
        ("PUT", "/v1/ports/100", {"switch": "snic0", "port": 201}, 409, None),
        ("PUT", "/v1/ports/300", [1, 2], 400, None),
        ("POST", "/v1/ports/200/remap", {"switch": "nosuch", "port": 1}, 400, "switch"),
        ("POST", "/v1/ports/999/remap", {"switch": "host", "port": 200}, 404, None),
        ("DELETE", "/v1/ports/999", None, 404, None),
        ("GET", "/v1/nosuch", None, 404, None),
        ("DELETE", "/v1/health", None, 405, None),
    ],
)
def test_rest_bad_requests_are_4xx_json(sw, method, path, body, status, field):
    raw = body if isinstance(body, bytes) else None
    with pytest.raises(OneSwitchError) as exc:
        sw.client.request(method, path, None if raw is not None else body, raw=raw)
    assert exc.value.status == status, exc.value.body
    assert isinstance(exc.value.body, dict) and exc.value.body.get("error"), exc.value.body
    if field:
        assert exc.value.field == field, exc.value.body
