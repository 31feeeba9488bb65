"""The sNIC agent's REST contract (fast, no root): a real `SnicAgent` and its Flask app, with the NF runtime
(`agent.nfs`, an nf_local.LocalNfs) replaced by a fake that records every call and runs nothing.

Every route wants the bearer token (401 first, before any lookup or side effect); unknown things are 404,
wrong methods 405 with Allow; a start request is checked field by field (400 naming the field) before the
runtime is reached; bodies over the limit are 413; the heartbeat's interval is checked. A fuzz sends
arbitrary JSON (and arbitrary bytes) as start requests: only 4xx JSON answers, the runtime never called."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from domain.errors import ConfigRejected, RestartNeeded, StartError, StateError
from domain.model import NF_TYPES, Instance
from nf_local.processes import NF_BINARY
from nf_local.tier_access import TierAccess
from snic_agent.api import MAX_BODY, create_app
from snic_agent.config import parse_config
from snic_agent.service import MAX_BUFFER, START_KEYS, TIER_KEYS, SnicAgent

TOKEN = "s3cret-snic-token"
INST_ROUTES_404 = [
    ("GET", "/v1/instances/{id}"),
    ("DELETE", "/v1/instances/{id}"),
    ("POST", "/v1/instances/{id}/stop"),
    ("POST", "/v1/instances/{id}/start"),
    ("GET", "/v1/instances/{id}/nf/stats"),
    ("GET", "/v1/instances/{id}/nf/health"),
    ("POST", "/v1/instances/{id}/nf/drain"),
    ("GET", "/v1/instances/{id}/nf/state"),
    ("PUT", "/v1/instances/{id}/nf/state"),
    ("POST", "/v1/instances/{id}/nf/release"),
    ("POST", "/v1/instances/{id}/nf/hold"),
    ("PUT", "/v1/instances/{id}/config"),
]


class FakeNfs:
    """Stands in for nf_local.LocalNfs under the agent: records each call, starts nothing.
    `fail`: an exception the next `start` raises (after which the agent must have rolled back)."""

    def __init__(self):
        self.calls: list[tuple] = []
        self.running: dict[str, Instance] = {}
        self.stores: dict[str, str] = {}
        self.fail: BaseException | None = None
        self.fail_config: BaseException | None = None  # what the next `reconfigure` raises

    def new_instance(self, nf, location, seq, used_ofports):
        self.calls.append(("new_instance", nf.id))
        return Instance(f"{nf.id}-{seq}", location, location, 200 + seq, "ns", f"p-w{seq}", f"p-x{seq}")

    def start(self, nf, inst, buffer=0, store=None):
        self.calls.append(("start", inst.id, nf.type, nf.config, buffer, store))
        if self.fail is not None:
            exc, self.fail = self.fail, None
            raise exc
        inst.pid = os.getpid()  # a live process: the agent's exit watch takes a pidfd of it
        self.running[inst.id] = inst

    def stop(self, inst):
        self.calls.append(("stop", inst.id))
        self.running.pop(inst.id, None)

    def stop_processes(self, inst):
        self.calls.append(("stop_processes", inst.id))
        self.running.pop(inst.id, None)
        inst.pid = None

    def start_processes(self, nf, inst, buffer=0):
        self.calls.append(("start_processes", inst.id))
        inst.pid = os.getpid()
        self.running[inst.id] = inst

    def alive(self, inst):
        return inst.id in self.running

    def cpu_seconds(self, inst):
        return 0.0

    def healthy(self, inst, timeout=1.0):
        self.calls.append(("healthy", inst.id, timeout))
        return inst.id in self.running

    def stats(self, inst):
        self.calls.append(("stats", inst.id))
        return {"instance": inst.id} if inst.id in self.running else None

    def drain(self, inst, quiet_ms, timeout_s, flush=False):
        self.calls.append(("drain", inst.id, quiet_ms, timeout_s) + (("flush",) if flush else ()))
        return {"drained": True}

    def get_state(self, inst, timeout=60.0):
        self.calls.append(("get_state", inst.id))
        return b"\x00state"

    def put_state(self, inst, data, timeout=60.0):
        self.calls.append(("put_state", inst.id, data))
        return {"imported": 0, "replayed": 0, "buffer_overflow": 0}

    def release(self, inst, timeout=60.0):
        self.calls.append(("release", inst.id))
        return {"replayed": 0, "buffer_overflow": 0}

    def hold(self, inst, buffer, timeout=10.0):
        self.calls.append(("hold", inst.id, buffer))
        return {"holding": True, "pending": 0}

    def reconfigure(self, nf, inst):
        self.calls.append(("reconfigure", inst.id, nf.type, nf.config))
        if self.fail_config is not None:
            exc, self.fail_config = self.fail_config, None
            raise exc

    def close(self):
        return []


def make_agent(tmp) -> tuple[SnicAgent, FakeNfs]:
    tok = tmp / "agent.token"
    tok.write_text(TOKEN)
    cfg = parse_config({
        "snic": "snic0", "listen": "192.0.2.2:7700", "token_file": str(tok), "dir": str(tmp / "agent"),
        "prefix": "uno", "bridge": "br-none", "ovsdb": f"unix:{tmp}/no-ovsdb.sock", "switch_netns": "uno-none",
    })  # fmt: skip
    agent = SnicAgent(cfg)  # builds its runtime but touches neither OVSDB nor any namespace until used
    fake = FakeNfs()
    agent.nfs = fake
    return agent, fake


def dispose(agent: SnicAgent) -> None:
    """Close what the agent opened in this process: its exit watch's pidfds and wake-up pipe."""
    for inst_id in list(agent.records):
        agent.exits.forget(inst_id)
    for fd in (getattr(agent.exits, "_wake_r", None), getattr(agent.exits, "_wake_w", None)):
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


@pytest.fixture
def env(tmp_path):
    agent, fake = make_agent(tmp_path)
    client = create_app(agent, TOKEN).test_client()
    yield agent, fake, client
    dispose(agent)


def auth(token: str = TOKEN) -> dict:
    return {"Authorization": f"Bearer {token}"}


def call(client, method: str, path: str, body=None, headers=None, raw: bytes | None = None):
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    return client.open(path, method=method, data=data, headers=headers if headers is not None else auth())


def valid_body(**over) -> dict:
    return {"id": "fw-1", "nf_id": "fw", "type": "firewall", "config": {"default": "deny"},
            "store": "redis://10.252.0.1:6379", "buffer": 0, **over}  # fmt: skip


def assert_error(r, status: int, fld: str | None = None) -> dict:
    assert r.status_code == status, (r.status_code, r.get_data(as_text=True)[:300])
    assert r.mimetype == "application/json"
    body = r.get_json()
    assert isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"]
    if fld is not None:
        assert body.get("field") == fld, body
    return body


def start_one(client, inst_id: str = "fw-1") -> dict:
    r = call(client, "POST", "/v1/instances", valid_body(id=inst_id))
    assert r.status_code == 201, r.get_json()
    return r.get_json()


# -- authentication ---------------------------------------------------------------------------------------------
def every_route(client, inst_id: str) -> list[tuple[str, str]]:
    out = []
    for rule in client.application.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        path = rule.rule.replace("<inst_id>", inst_id).replace("<call>", "stats")
        out += [(m, path) for m in sorted(rule.methods)]
    return out


BAD_AUTH = [
    None,  # no header
    "",
    "Bearer",
    "Bearer ",
    "Bearer wrong-token-123",
    f"Bearer {TOKEN}x",
    f"Bearer {TOKEN[:-1]}",
    f"Basic {TOKEN}",
    TOKEN,
    f"Token {TOKEN}",
    "Bearer \u00e9\u00e8-non-ascii",
]


def test_every_route_wants_the_token_before_anything_else(env):
    agent, fake, c = env
    start_one(c)
    before = list(fake.calls)
    routes = every_route(c, "fw-1") + every_route(c, "no-such") + [("GET", "/nope"), ("DELETE", "/v1")]
    assert len(routes) > 20
    for method, path in routes:
        for header in BAD_AUTH:
            headers = {} if header is None else {"Authorization": header}
            r = call(c, method, path, headers=headers, raw=b"{}" if method in ("POST", "PUT") else None)
            body = assert_error(r, 401, "Authorization") if method != "HEAD" else None
            assert r.status_code == 401, (method, path, header)
            assert r.headers.get("WWW-Authenticate", "").startswith("Bearer"), (method, path)
            if body is not None:
                assert TOKEN not in json.dumps(body)
    assert fake.calls == before  # nothing reached the runtime
    assert list(agent.records) == ["fw-1"]  # nothing deleted, stopped or started
    assert agent.records["fw-1"]["state"] == "running"


def test_the_token_in_the_query_string_is_not_enough(env):
    _, _, c = env
    assert_error(c.get(f"/v1/health?token={TOKEN}"), 401, "Authorization")
    assert_error(c.get(f"/v1/health?access_token={TOKEN}"), 401, "Authorization")


def test_the_right_token_is_accepted(env):
    agent, _, c = env
    r = c.get("/v1/health", headers=auth())
    assert r.status_code == 200
    assert r.get_json() == {"ok": True, "snic": "snic0", "boot_id": agent.boot_id, "instances": 0}
    assert c.get("/v1/instances", headers=auth()).get_json() == []


# -- 404, 405 ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("method", "path"), INST_ROUTES_404)
def test_unknown_instance_is_404(env, method, path):
    _, fake, c = env
    start_one(c)  # another instance exists
    n = len(fake.calls)
    assert_error(call(c, method, path.format(id="no-such")), 404)
    assert fake.calls[n:] == []


@pytest.mark.parametrize("path", ["/nope", "/v1", "/v1/instance", "/v1/instances/fw-1/nf/bogus",
                                  "/v1/instances/fw-1/nf", "/v1/instances/fw-1/extra/x"])  # fmt: skip
def test_unknown_path_is_404(env, path):
    _, _, c = env
    start_one(c)
    assert_error(call(c, "GET", path), 404)


WRONG_METHODS = [
    ("PUT", "/v1/health", {"GET"}),
    ("POST", "/v1/info", {"GET"}),
    ("DELETE", "/v1/ports", {"GET"}),
    ("POST", "/v1/heartbeat", {"GET"}),
    ("PUT", "/v1/instances", {"GET", "POST"}),
    ("DELETE", "/v1/instances", {"GET", "POST"}),
    ("POST", "/v1/instances/fw-1", {"GET", "DELETE"}),
    ("PUT", "/v1/instances/fw-1", {"GET", "DELETE"}),
    ("GET", "/v1/instances/fw-1/stop", {"POST"}),
    ("DELETE", "/v1/instances/fw-1/start", {"POST"}),
    ("POST", "/v1/instances/fw-1/nf/stats", {"GET"}),
    ("PUT", "/v1/instances/fw-1/nf/health", {"GET"}),
    ("GET", "/v1/instances/fw-1/nf/drain", {"POST"}),
    ("POST", "/v1/instances/fw-1/nf/state", {"GET", "PUT"}),
    ("GET", "/v1/instances/fw-1/nf/release", {"POST"}),
    ("GET", "/v1/instances/fw-1/nf/hold", {"POST"}),
]


@pytest.mark.parametrize(("method", "path", "allowed"), WRONG_METHODS)
def test_wrong_method_is_405_with_allow(env, method, path, allowed):
    agent, fake, c = env
    start_one(c)
    n = len(fake.calls)
    r = call(c, method, path, raw=b"{}" if method in ("POST", "PUT") else None)
    assert_error(r, 405)
    allow = {m.strip() for m in r.headers.get("Allow", "").split(",") if m.strip()}
    assert allowed <= allow and method not in allow, (method, path, allow)
    assert fake.calls[n:] == [] and agent.records["fw-1"]["state"] == "running"


def test_405_allow_lists_only_methods_that_are_allowed(env):
    """The Allow of a 405 names only methods the resource takes."""
    _, _, c = env
    start_one(c)
    wrong = []
    for call_name in ("stats", "health", "drain", "state", "release", "hold"):
        path = f"/v1/instances/fw-1/nf/{call_name}"
        for method in ("PATCH", "DELETE"):
            r = call(c, method, path)
            assert_error(r, 405)
            allow = [m.strip() for m in r.headers["Allow"].split(",")]
            for m in allow:
                if m in ("HEAD", "OPTIONS"):
                    continue
                if call(c, m, path, raw=b"" if m in ("POST", "PUT") else None).status_code == 405:
                    wrong.append(f"{method} {path} -> Allow: {', '.join(allow)}; but {m} is 405")
    assert wrong == []


def test_hold_is_relayed_with_its_buffer_and_a_bad_buffer_is_refused(env):
    """`POST .../nf/hold?buffer=N` reaches the NF with N (a scale-in's staying instance on the sNIC); a missing
    or out-of-range buffer is a 400 naming `buffer` and reaches nothing."""
    _, fake, c = env
    start_one(c)
    n = len(fake.calls)
    r = call(c, "POST", "/v1/instances/fw-1/nf/hold?buffer=100000", raw=b"")
    assert r.status_code == 200 and r.get_json() == {"holding": True, "pending": 0}, r.get_data(as_text=True)
    assert fake.calls[n:] == [("hold", "fw-1", 100000)]
    for q in ("", "?buffer=0", "?buffer=x", "?buffer=10000001"):
        assert_error(call(c, "POST", f"/v1/instances/fw-1/nf/hold{q}", raw=b""), 400, "buffer")
    assert fake.calls[n + 1 :] == []


# -- POST /v1/instances: the body, field by field -----------------------------------------------------------------
def _post_refused(env, raw: bytes | None, status: int, fld: str | None) -> dict:
    agent, fake, c = env
    r = call(c, "POST", "/v1/instances", raw=raw if raw is not None else b"")
    body = assert_error(r, status, fld)
    assert fake.calls == [], "the runtime was reached"
    assert agent.records == {}
    return body


@pytest.mark.parametrize(
    "raw",
    [b"", b"not json", b"{", b"{'id': 'x'}", b"\xff\xfe\xfd", b'{"id": "fw-1",}', b"NaN NaN"],
)
def test_body_not_json(env, raw):
    _post_refused(env, raw, 400, "body")


@pytest.mark.parametrize("value", [[], [valid_body()], "x", 3, 1.5, None, True])
def test_body_not_an_object(env, value):
    _post_refused(env, json.dumps(value).encode(), 400, "body")


@pytest.mark.parametrize("key", ["bogus", "ID", "pid", "ofport", "netns", "nf_binary", "argv"])
def test_unknown_field_is_named(env, key):
    _post_refused(env, json.dumps(valid_body(**{key: 1})).encode(), 400, key)


@pytest.mark.parametrize("key", ["id", "nf_id", "type", "store"])
def test_missing_required_field(env, key):
    body = valid_body()
    del body[key]
    _post_refused(env, json.dumps(body).encode(), 400, key)


@pytest.mark.parametrize("key", ["id", "nf_id"])
@pytest.mark.parametrize(
    "value",
    ["", "Fw", "1fw", "-fw", "fw_1", "fw 1", "fw/1", "../x", "a" * 49, "f\u00e9", 3, None, ["fw"], {}],
)
def test_bad_id(env, key, value):
    _post_refused(env, json.dumps(valid_body(**{key: value})).encode(), 400, key)


@pytest.mark.parametrize("value", ["router", "", "Firewall", "firewall ", None, 1, ["firewall"], {"t": 1}])
def test_bad_type(env, value):
    _post_refused(env, json.dumps(valid_body(type=value)).encode(), 400, "type")


@pytest.mark.parametrize("value", [[], "x", 1, None, True, [{"default": "deny"}]])
def test_config_not_an_object(env, value):
    _post_refused(env, json.dumps(valid_body(config=value)).encode(), 400, "config")


@pytest.mark.parametrize(
    "value",
    [
        # nothing crosses the machine boundary as a file: no unix socket, no path
        "unix:///run/uno-test/h/redis.sock",
        "unix://redis.sock",
        "/run/uno/redis.sock",
        "file:///tmp/x",
        # only redis://HOST:PORT[/DB] or local
        "redis://10.0.0.1",
        "redis://:6379",
        "redis://10.0.0.1:6379/0/1",
        "redis://10.0.0.1:6379/123",
        "redis://10.0.0.1:123456",
        "redis://user:pw@10.0.0.1:6379",
        "redis://10.0.0.1:6379?db=1",
        "redis://10.0.0.1:6379 ",
        "rediss://10.0.0.1:6379",
        "tcp://10.0.0.1:6379",
        "http://10.0.0.1:6379",
        "10.0.0.1:6379",
        "LOCAL",
        "local ",
        "",
        None,
        6379,
        ["local"],
    ],
)
def test_bad_store(env, value):
    _post_refused(env, json.dumps(valid_body(store=value)).encode(), 400, "store")


@pytest.mark.parametrize("value", [-1, MAX_BUFFER + 1, 10**12, True, False, 1.5, 10.0, "10", None, [1]])
def test_bad_buffer(env, value):
    _post_refused(env, json.dumps(valid_body(buffer=value)).encode(), 400, "buffer")


def test_body_over_the_size_limit_is_413(env):
    raw = b'{"id": "' + b"a" * (MAX_BODY + 1) + b'"}'
    _post_refused(env, raw, 413, None)


def test_deeply_nested_json_is_400_not_500(env):
    """400 naming "body"."""
    _post_refused(env, b"[" * 200_000, 400, "body")
    config = b'{"id": "fw-1", "nf_id": "fw", "type": "firewall", "store": "local", "config": '
    _post_refused(env, config + b'{"a": ' * 100_000 + b"1" + b"}" * 100_001, 400, "body")


@pytest.mark.parametrize(
    ("key", "value"),
    [("id", "fw-1\n"), ("nf_id", "fw\n"), ("store", "redis://10.252.0.1:6379\n"), ("store", "local\n")],
)
def test_trailing_newline_is_refused(env, key, value):
    """400 naming the field."""
    _post_refused(env, json.dumps(valid_body(**{key: value})).encode(), 400, key)


@pytest.mark.parametrize("port", ["0", "65536", "99999"])
def test_store_port_out_of_range_is_refused(env, port):
    """400 naming "store"."""
    _post_refused(env, json.dumps(valid_body(store=f"redis://10.252.0.1:{port}")).encode(), 400, "store")


# -- what a good start does, and what the runtime's failures become ----------------------------------------------
def test_valid_start_reaches_the_runtime_once_and_a_second_is_409(env):
    agent, fake, c = env
    view = start_one(c)
    assert view["id"] == "fw-1" and view["alive"] is True and view["state"] == "running"
    want = TierAccess("redis://10.252.0.1:6379")
    assert ("start", "fw-1", "firewall", {"default": "deny"}, 0, want) in fake.calls
    n = len(fake.calls)
    assert_error(call(c, "POST", "/v1/instances", valid_body()), 409, "id")
    assert fake.calls[n:] == []
    for store in ("local", "redis://dpu-host.example:6379/2", "redis://[fd00::1]:6379"):
        r = call(c, "POST", "/v1/instances", valid_body(id=f"fw-{len(agent.records) + 1}", store=store))
        assert r.status_code == 201, r.get_json()
    assert call(c, "POST", "/v1/instances", valid_body(id="fw-9", buffer=MAX_BUFFER)).status_code == 201
    listed = call(c, "GET", "/v1/instances").get_json()
    assert sorted(v["id"] for v in listed) == sorted(agent.records)
    persisted = json.loads(agent.state_file.read_text())["instances"]
    assert set(persisted) == set(agent.records)


@pytest.mark.parametrize(
    ("exc", "status", "fld"),
    [(StartError("fw-1: NF process exited: boom"), 500, None), (ConfigRejected("rules: bad"), 400, "config")],
)
def test_failed_start_leaves_nothing(env, exc, status, fld):
    agent, fake, c = env
    fake.fail = exc
    assert_error(call(c, "POST", "/v1/instances", valid_body()), status, fld)
    assert agent.records == {}
    assert json.loads(agent.state_file.read_text())["instances"] == {}
    assert_error(call(c, "GET", "/v1/instances/fw-1"), 404)


def test_delete_stop_start_of_a_known_instance(env):
    agent, fake, c = env
    start_one(c)
    assert_error(call(c, "POST", "/v1/instances/fw-1/stop", raw=b"x"), 400, "body")
    r = call(c, "POST", "/v1/instances/fw-1/stop", raw=b"{}")
    assert r.status_code == 200 and r.get_json()["state"] == "stopped" and r.get_json()["alive"] is False
    r = call(c, "POST", "/v1/instances/fw-1/start")
    assert r.status_code == 200 and r.get_json()["alive"] is True
    assert call(c, "DELETE", "/v1/instances/fw-1").get_json() == {"deleted": "fw-1"}
    assert ("stop", "fw-1") in fake.calls and agent.records == {}
    assert_error(call(c, "DELETE", "/v1/instances/fw-1"), 404)


# -- nf versions shipped by the host (live update) ---------------------------------------------------------------
def _ship(c, name: str, data: bytes, sha: str | None = None):
    return call(
        c, "PUT", f"/v1/nf-versions/{name}?sha256={sha or hashlib.sha256(data).hexdigest()}", raw=data
    )


def test_a_shipped_nf_version_is_checked_kept_once_and_started_by_name(env):
    """The real nf binary shipped as bytes: checked against its digest, run once (`--version`), kept by name;
    an instance started with it runs that file; a version in use cannot be deleted."""
    agent, fake, c = env
    data = NF_BINARY.read_bytes()
    r = _ship(c, "v-test", data)
    assert r.status_code == 201, r.get_json()
    desc = r.get_json()
    assert (
        desc["sha256"] == hashlib.sha256(data).hexdigest() and desc["size"] == len(data) and desc["reports"]
    )
    assert _ship(c, "v-test", data).status_code == 200  # the same bytes again: nothing changes
    assert_error(_ship(c, "v-test", data + b"\0"), 409, "version")  # a name is bound to its bytes
    r = call(c, "POST", "/v1/instances", valid_body(version="v-test"))
    assert r.status_code == 201 and r.get_json()["version"] == "v-test", r.get_json()
    binary = agent.records["fw-1"]["instance"]["binary"]
    assert binary == str(agent.versions.binary("v-test")) and Path(binary).read_bytes() == data
    assert call(c, "GET", "/v1/nf-versions").get_json() == [{**desc, "instances": ["fw-1"]}]
    assert_error(call(c, "DELETE", "/v1/nf-versions/v-test"), 409, "version")
    assert call(c, "DELETE", "/v1/instances/fw-1").status_code == 200
    assert call(c, "DELETE", "/v1/nf-versions/v-test").get_json() == {"deleted": "v-test"}
    assert call(c, "GET", "/v1/nf-versions").get_json() == []


@pytest.mark.parametrize(
    ("name", "data", "sha", "fld"),
    [
        ("v1", b"#!/bin/sh\nexit 3\n", None, "body"),  # runs, but not as an nf binary
        ("v1", b"\x7fELF not really", None, "body"),
        ("v1", b"abc", "0" * 64, "sha256"),  # a truncated or altered upload
        ("v1", b"abc", "ABC", "sha256"),
        ("v1", b"abc", "", "sha256"),
        ("-bad", b"abc", None, "version"),
        ("a" * 81, b"abc", None, "version"),
    ],
)
def test_a_bad_nf_version_upload_is_400_and_keeps_nothing(env, name, data, sha, fld):
    agent, _, c = env
    assert_error(_ship(c, name, data, sha) if sha != "" else call(c, "PUT", f"/v1/nf-versions/{name}", raw=data),
                 400, fld)  # fmt: skip
    assert call(c, "GET", "/v1/nf-versions").get_json() == []
    assert not agent.versions.directory.exists() or not any(agent.versions.directory.iterdir())


def test_start_with_a_version_the_snic_does_not_hold_is_400(env):
    agent, fake, c = env
    assert_error(call(c, "POST", "/v1/instances", valid_body(version="nope")), 400, "version")
    assert_error(call(c, "POST", "/v1/instances", valid_body(version=7)), 400, "version")
    assert agent.records == {} and fake.calls == []
    assert_error(call(c, "GET", "/v1/nf-versions/nope"), 404)


# -- query arguments ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["0", "10001", "-1", "x", "", "1.5", "1e3", "10ms", "5&interval_ms=6"])
def test_heartbeat_interval_out_of_range(env, value):
    _, _, c = env
    assert_error(call(c, "GET", f"/v1/heartbeat?interval_ms={value}"), 400, "interval_ms")


def test_heartbeat_streams_beats_with_the_boot_id(env):
    """A beat every interval_ms, each with the agent's boot_id."""
    agent, _, c = env
    r = c.get("/v1/heartbeat?interval_ms=5", headers=auth(), buffered=False)
    try:
        assert r.status_code == 200 and r.mimetype == "application/x-ndjson"
        it = iter(r.response)
        beats = [json.loads(next(it)) for _ in range(2)]
    finally:
        r.close()
    assert [b["seq"] for b in beats] == [1, 2]
    assert all(b["boot_id"] == agent.boot_id and b["exited"] == [] for b in beats)


@pytest.mark.parametrize("value", ["2", "true", "", "yes"])
@pytest.mark.parametrize("flag", ["health", "counters"])
def test_instances_flags(env, value, flag):
    _, _, c = env
    assert_error(call(c, "GET", f"/v1/instances?{flag}={value}"), 400, flag)
    assert_error(call(c, "GET", f"/v1/instances/fw-1?counters={value}"), 400, "counters")


@pytest.mark.parametrize(
    ("method", "path", "fld"),
    [
        ("POST", "/v1/instances/fw-1/nf/drain?quiet_ms=-1", "quiet_ms"),
        ("POST", "/v1/instances/fw-1/nf/drain?quiet_ms=60001", "quiet_ms"),
        ("POST", "/v1/instances/fw-1/nf/drain?timeout_ms=0", "timeout_ms"),
        ("POST", "/v1/instances/fw-1/nf/drain?flush=2", "flush"),
        ("GET", "/v1/instances/fw-1/nf/health?timeout_ms=x", "timeout_ms"),
        ("GET", "/v1/instances/fw-1/nf/state?timeout_ms=600001", "timeout_ms"),
    ],
)
def test_nf_call_arguments(env, method, path, fld):
    _, fake, c = env
    start_one(c)
    n = len(fake.calls)
    assert_error(call(c, method, path), 400, fld)
    assert [x for x in fake.calls[n:] if x[0] in ("drain", "get_state", "healthy")] == []


def test_nf_calls_are_relayed(env):
    _, fake, c = env
    start_one(c)
    assert call(c, "GET", "/v1/instances/fw-1/nf/stats").get_json() == {"instance": "fw-1"}
    assert call(c, "GET", "/v1/instances/fw-1/nf/health?timeout_ms=250").get_json() == {"healthy": True}
    assert ("healthy", "fw-1", 0.25) in fake.calls
    assert call(c, "GET", "/v1/instances/fw-1/nf/state").get_data() == b"\x00state"
    assert call(c, "PUT", "/v1/instances/fw-1/nf/state", raw=b"abc").status_code == 200
    assert ("put_state", "fw-1", b"abc") in fake.calls
    fake.running.clear()  # the NF died: its stats endpoint does not answer
    assert_error(call(c, "GET", "/v1/instances/fw-1/nf/stats"), 502)


# -- fuzz ------------------------------------------------------------------------------------------------------------
ID_RE = re.compile(r"[a-z][a-z0-9-]{0,47}")
STORE_OK = re.compile(r"redis://[A-Za-z0-9.\-\[\]:]+:([0-9]{1,5})(/[0-9]{1,2})?")


def contract_valid(body) -> bool:
    """The documented contract of a start request (independent of the product's code)."""
    if (
        not isinstance(body, dict)
        or set(body) - START_KEYS
        or not {"id", "nf_id", "type", "store"} <= set(body)
    ):
        return False
    if not all(isinstance(body[k], str) and ID_RE.fullmatch(body[k]) for k in ("id", "nf_id")):
        return False
    if not isinstance(body["type"], str) or body["type"] not in NF_TYPES:
        return False
    if not isinstance(body.get("config", {}), dict):
        return False
    store = body["store"]
    m = STORE_OK.fullmatch(store) if isinstance(store, str) else None
    if store != "local" and not (m and 0 < int(m.group(1)) < 65536):
        return False
    if "version" in body:  # a shipped nf version: the fuzzed agent holds none
        return False
    buf = body.get("buffer", 0)
    return not isinstance(buf, bool) and isinstance(buf, int) and 0 <= buf <= MAX_BUFFER


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
VALID = {
    "id": st.from_regex(ID_RE, fullmatch=True),
    "nf_id": st.from_regex(ID_RE, fullmatch=True),
    "type": st.sampled_from(NF_TYPES),
    "config": st.dictionaries(st.text(max_size=6), JSON, max_size=3),
    "store": st.sampled_from(["local", "redis://10.0.0.1:6379", "redis://h:6379/1", "redis://[fd00::1]:1"])
    | st.builds(
        "redis://{}:{}".format, st.from_regex(r"[a-z0-9.-]{1,8}", fullmatch=True), st.integers(1, 65535)
    ),
    "buffer": st.integers(0, MAX_BUFFER),
}
JUNK = {
    "id": st.text(max_size=8) | JSON,
    "nf_id": st.text(max_size=8) | JSON,
    "type": st.text(max_size=8) | JSON,
    "config": JSON,
    "store": st.sampled_from(["unix:///run/r.sock", "redis://h", "redis://h:1/x", "LOCAL", "/r.sock"])
    | st.builds("redis://{}:{}".format, st.text(max_size=6), st.integers(-10, 65535))
    | st.text(max_size=12)
    | JSON,
    "buffer": st.integers(-3, MAX_BUFFER + 3) | st.integers() | JSON,
    "version": st.text(max_size=8) | JSON,
}
REQUIRED = ("id", "nf_id", "type", "store")
VALID_BODY = st.fixed_dictionaries(
    {k: VALID[k] for k in REQUIRED}, optional={k: VALID[k] for k in ("config", "buffer")}
)
# (body, the field the answer must name): a valid body with one field junk, one required field dropped, or one
# unknown field added; or any JSON at all (None: any field).
ONE_BAD = st.builds(
    lambda body, kv: ({**body, kv[0]: kv[1]}, kv[0]),
    VALID_BODY,
    st.sampled_from(sorted(JUNK)).flatmap(lambda k: st.tuples(st.just(k), JUNK[k])),
)
DROPPED = st.builds(lambda body, k: ({x: v for x, v in body.items() if x != k}, k), VALID_BODY,
                    st.sampled_from(REQUIRED))  # fmt: skip
EXTRA = st.builds(lambda body, k, v: ({**body, k: v}, k), VALID_BODY,
                  st.text(max_size=6).filter(lambda k: k not in START_KEYS), JSON)  # fmt: skip
CASES = st.one_of(ONE_BAD, DROPPED, EXTRA, JSON.map(lambda v: (v, None)))


def each_check(test):
    """One explicit example per checked field (a list where an id, a type, a config, a store, a buffer or a
    version is due) and a body that is no object: every check is reached whatever the random draw (500 random
    bodies once named neither config nor buffer)."""
    base = {"id": "a1", "nf_id": "n1", "type": NF_TYPES[0], "store": "local"}
    for k in sorted(START_KEYS - set(TIER_KEYS)):
        test = example(({**base, k: [1]}, k))(test)
    return example((7, "body"))(test)


def reset(agent: SnicAgent, fake: FakeNfs) -> None:
    """Forget what an earlier example (one that failed) started: each example is judged on its own."""
    for inst_id in list(agent.records):
        agent.exits.forget(inst_id)
    agent.records.clear()
    fake.calls.clear()


def test_fuzz_start_bodies_only_4xx_json_and_never_the_runtime(tmp_path):
    agent, fake = make_agent(tmp_path)
    client = create_app(agent, TOKEN).test_client()
    named: set[str] = set()

    @settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @each_check
    @given(CASES)
    def run(case):
        body, bad = case
        assume(not contract_valid(body))
        reset(agent, fake)
        r = call(client, "POST", "/v1/instances", body)
        assert r.status_code == 400, (body, r.status_code, r.get_data(as_text=True)[:300])
        got = r.get_json()
        assert isinstance(got, dict) and isinstance(got.get("error"), str), got
        assert isinstance(got.get("field"), str) and got["field"], got
        if bad is not None and (bad or "body") != got["field"]:
            raise AssertionError(f"{body!r}: {bad!r} is wrong, the answer names {got['field']!r}")
        named.add(got["field"])
        assert fake.calls == [], f"the runtime was reached for {body!r}"
        assert agent.records == {}

    try:
        run()
    finally:
        dispose(agent)
    # every check was reached (the tier access fields have their own test: test_bad_tier_fields)
    assert named >= {"body", *(START_KEYS - set(TIER_KEYS))}


def test_fuzz_raw_bytes_only_4xx_json(tmp_path):
    agent, fake = make_agent(tmp_path)
    client = create_app(agent, TOKEN).test_client()

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.binary(max_size=64) | st.text(max_size=64).map(str.encode))
    def run(raw):
        try:
            decoded = json.loads(raw)
        except (ValueError, RecursionError):
            decoded = None
        assume(not contract_valid(decoded))
        reset(agent, fake)
        r = call(client, "POST", "/v1/instances", raw=raw)
        assert 400 <= r.status_code < 500, (raw, r.status_code)
        assert isinstance(r.get_json().get("error"), str)
        assert fake.calls == [] and agent.records == {}

    try:
        run()
    finally:
        dispose(agent)


def test_tier_access_fields_reach_the_runtime_and_are_never_shown(env):
    agent, fake, c = env
    body = valid_body(store="redis-cluster://10.252.0.1:7000,10.252.0.1:7001", tenant="acme",
                      store_user="tn-acme", store_password="s3cret-pw", store_wait="1:50")  # fmt: skip
    r = call(c, "POST", "/v1/instances", body)
    assert r.status_code == 201, r.get_json()
    want = TierAccess(
        "redis-cluster://10.252.0.1:7000,10.252.0.1:7001", "acme", "tn-acme", "s3cret-pw", "1:50"
    )
    assert fake.calls[-1][-1] == want
    assert "s3cret-pw" not in r.get_data(as_text=True)
    assert "s3cret-pw" not in call(c, "GET", "/v1/instances").get_data(as_text=True)


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"tenant": "Acme"}, "tenant"),
        ({"store_user": "tn-a"}, "store_password"),
        ({"store_password": "pw"}, "store_user"),
        ({"store_wait": "0"}, "store_wait"),
        ({"store_wait": "1:x"}, "store_wait"),
        ({"store": "redis-cluster://10.0.0.1:7000,nohost"}, "store"),
    ],
)
def test_bad_tier_fields(env, over, field):
    _post_refused(env, json.dumps(valid_body(**over)).encode(), 400, field)


def test_nf_drain_relays_a_flush(env):
    """`drain?flush=1` reaches the NF as a flush (a scale-out's old instance), the default as a drain."""
    _, fake, c = env
    start_one(c)
    n = len(fake.calls)
    assert call(c, "POST", "/v1/instances/fw-1/nf/drain?quiet_ms=5&timeout_ms=100&flush=1").status_code == 200
    assert call(c, "POST", "/v1/instances/fw-1/nf/drain?quiet_ms=5&timeout_ms=100").status_code == 200
    drains = [x for x in fake.calls[n:] if x[0] == "drain"]
    assert drains == [("drain", "fw-1", 5, 0.1, "flush"), ("drain", "fw-1", 5, 0.1)]


# -- config in place (PUT /v1/instances/ID/config); the real NF's answers: tests/snic/test_config_relay.py --------
def test_config_is_relayed_and_kept_for_restarts(env):
    agent, fake, c = env
    start_one(c)
    new = {"default": "allow", "rules": []}
    r = call(c, "PUT", "/v1/instances/fw-1/config", new)
    assert r.status_code == 200 and r.get_json()["id"] == "fw-1", r.get_json()
    assert fake.calls[-1] == ("reconfigure", "fw-1", "firewall", new)
    assert agent.records["fw-1"]["config"] == new
    assert (
        json.loads(agent.state_file.read_text())["instances"]["fw-1"]["config"] == new
    )  # a restarted agent's
    call(c, "POST", "/v1/instances/fw-1/start", raw=b"")
    assert fake.calls[-1] == ("start_processes", "fw-1")


@pytest.mark.parametrize(
    ("exc", "status", "fld"),
    [
        (ConfigRejected("counters: cannot change on a running monitor"), 400, "config"),
        (RestartNeeded("fw-1: PUT /config: a runtime option changes"), 409, "config"),
        (StateError("fw-1: PUT /config: [Errno 111] Connection refused"), 502, None),
    ],
)
def test_config_the_nf_does_not_take_keeps_the_old_one(env, exc, status, fld):
    agent, fake, c = env
    start_one(c)
    was = agent.records["fw-1"]["config"]
    fake.fail_config = exc
    body = assert_error(call(c, "PUT", "/v1/instances/fw-1/config", {"default": "allow"}), status, fld)
    assert str(exc) in body["error"]
    assert agent.records["fw-1"]["config"] == was
    assert json.loads(agent.state_file.read_text())["instances"]["fw-1"]["config"] == was


@pytest.mark.parametrize(
    "raw", [b"", b"not json", b"[]", b'"x"', b"1", b"null", b"{", b"[" * 100 + b"]" * 100, b" "]
)
def test_config_body_not_an_object_is_400_and_never_the_nf(env, raw):
    agent, fake, c = env
    start_one(c)
    n = len(fake.calls)
    assert_error(call(c, "PUT", "/v1/instances/fw-1/config", raw=raw), 400, "body")
    assert fake.calls[n:] == []
    assert agent.records["fw-1"]["config"] == {"default": "deny"}


def test_config_takes_only_put(env):
    _, _, c = env
    start_one(c)
    for method in ("GET", "POST", "PATCH", "DELETE"):
        r = call(c, method, "/v1/instances/fw-1/config", raw=b"{}")
        assert_error(r, 405)
        assert "PUT" in r.headers["Allow"] and method not in r.headers["Allow"]


def test_fuzz_config_bodies_not_objects_only_400_json(tmp_path):
    agent, fake = make_agent(tmp_path)
    client = create_app(agent, TOKEN).test_client()
    start_one(client)

    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(JSON.filter(lambda v: not isinstance(v, dict)).map(lambda v: json.dumps(v).encode())
           | st.binary(max_size=64))  # fmt: skip
    def run(raw):
        with contextlib.suppress(ValueError, RecursionError):  # not JSON: a bad body too
            assume(not isinstance(json.loads(raw), dict))
        fake.calls.clear()
        r = call(client, "PUT", "/v1/instances/fw-1/config", raw=raw)
        assert r.status_code == 400, (raw, r.status_code)
        assert r.get_json().get("field") == "body", r.get_json()
        assert fake.calls == []
        assert agent.records["fw-1"]["config"] == {"default": "deny"}

    try:
        run()
    finally:
        dispose(agent)
