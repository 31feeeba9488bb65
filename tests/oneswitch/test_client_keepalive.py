"""OneSwitchClient's kept-alive transport: one connection reused, thread-safe, reconnect when dropped.

The logic tests use a real HTTP/1.1 server (Python's http.server on a loopback port) whose connection count
and closing we control; `test_oneswitch_keeps_the_connection` checks OneSwitch's own REST server.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from host_datapath.oneswitch_client import OneSwitchClient, OneSwitchError


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    connections = 0
    close_after_reply = False  # answer with Connection: close (the server drops the connection)
    drop_next = False  # close the connection on the next request without answering it
    requests = 0

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.socks: list[socket.socket] = []


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.server.connections += 1
        self.server.socks.append(self.connection)

    def log_message(self, *args) -> None:  # quiet
        pass

    def _reply(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if self.server.close_after_reply:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def parse_request(self) -> bool:
        if self.server.drop_next:  # the request line was read: drop the connection unanswered
            self.server.drop_next = False
            self.close_connection = True
            return False
        return super().parse_request()

    def do_GET(self) -> None:
        self.server.requests += 1
        if self.path == "/v1/health":
            self._reply(200, {"ok": True, "switches": {"host": "connected"}})
        else:
            self._reply(404, {"error": "no such path", "field": "path"})

    def do_POST(self) -> None:
        self.server.requests += 1
        n = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(n))
        vport = int(self.path.split("/")[3])
        self._reply(200, {"vport": vport, "to": body, "rules": 1, "duration_ms": 0.5})


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
        t.join(timeout=10)


def _client(srv: _Server) -> OneSwitchClient:
    return OneSwitchClient(f"http://127.0.0.1:{srv.server_address[1]}", timeout=10)


def test_one_connection_for_many_calls(server):
    c = _client(server)
    for i in range(20):
        assert c.health().all_connected()
        assert c.remap(200 + i, "snic0", 5).to == {"switch": "snic0", "port": 5}
    assert server.connections == 1
    c.close()


def test_error_answer_keeps_status_and_field_and_the_connection(server):
    c = _client(server)
    with pytest.raises(OneSwitchError) as e:
        c.request("GET", "/v1/nothing")
    assert (e.value.status, e.value.field, e.value.error) == (404, "path", "no such path")
    assert c.health().ok
    assert server.connections == 1


def test_server_closing_connections_is_survived(server):
    server.close_after_reply = True
    c = _client(server)
    for _ in range(5):
        assert c.health().ok
    assert server.connections == 5  # a new one after each close, no error


def test_dropped_idle_connection_is_reopened(server):
    c = _client(server)
    assert c.health().ok
    # Drop the pooled connection under the client (as an idle timeout or a OneSwitch restart would).
    idle = c._idle[0]
    assert idle.sock is not None
    idle.sock.shutdown(socket.SHUT_RDWR)
    assert c.remap(7, "host", 3).vport == 7
    assert server.connections == 2


def test_connection_closed_by_the_server_while_idle_is_replaced(server):
    c = _client(server)
    assert c.health().ok
    server.socks[-1].shutdown(socket.SHUT_RDWR)  # as OneSwitch's idle timeout does
    assert c.remap(8, "host", 3).vport == 8
    assert server.connections == 2 and server.requests == 2


def test_connection_dropped_during_the_request_is_retried_once(server):
    c = _client(server)
    assert c.health().ok
    server.drop_next = True
    assert c.health().ok  # sent on the kept connection, dropped unanswered, sent again on a new one
    assert server.connections == 2 and server.requests == 2


def test_fresh_connection_dropped_is_an_error_not_a_retry(server):
    c = OneSwitchClient(f"http://127.0.0.1:{server.server_address[1]}", timeout=10, pool_size=0)
    server.drop_next = True
    with pytest.raises(OneSwitchError) as e:
        c.health()
    assert e.value.status == 0
    assert c.health().ok and server.connections == 2  # pool_size=0: a new connection for each call


def test_threads_share_the_client(server):
    c = _client(server)
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(25):
                assert c.remap(k * 100 + i, "host", k).vport == k * 100 + i
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert not errors
    assert server.connections <= 8  # at most one per concurrent caller, reused after
    assert len(c._idle) <= 4  # the pool keeps at most pool_size idle connections


def test_unreachable_is_status_0():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(OneSwitchError) as e:
        OneSwitchClient(f"http://127.0.0.1:{port}", timeout=5).health()
    assert e.value.status == 0 and "cannot reach OneSwitch" in str(e.value)


def test_bad_base_address_is_refused():
    with pytest.raises(ValueError, match="http"):
        OneSwitchClient("127.0.0.1:8080")


def test_oneswitch_keeps_the_connection(os_host):
    """OneSwitch's REST server (JDK HttpServer) keeps HTTP/1.1 connections alive: the same socket serves
    every call, also after an error answer."""
    c = OneSwitchClient(os_host.client.base, token=os_host.client.token, timeout=30)
    assert c.health().ok
    local = c._idle[0].sock.getsockname()
    for _ in range(10):
        c.ports()
    with pytest.raises(OneSwitchError) as e:
        c.request("POST", "/v1/ports/200/remap", raw=b"{not json")
    assert 400 <= e.value.status < 500
    assert c.health().ok
    assert len(c._idle) == 1 and c._idle[0].sock.getsockname() == local
    c.close()
