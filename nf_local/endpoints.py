"""Talking to an NF's stats endpoint over its unix socket (HTTP: /health, /stats, /state, /drain, ...) and to
the state tier (a Redis PING, on a unix socket or over TCP)."""

from __future__ import annotations

import http.client
import socket
import urllib.parse
from pathlib import Path


class _UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.path)
        self.sock = s


def redis_ping(path: str | Path, timeout: float = 0.5) -> bool:
    """A Redis PING on unix socket `path` answered +PONG within `timeout` s (a socket error or any other
    answer, e.g. -LOADING or -NOAUTH: False)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.settimeout(timeout)
            c.connect(str(path))
            return _ping(c)
    except OSError:
        return False


def redis_ping_tcp(url: str, timeout: float = 0.5) -> bool:
    """`redis_ping` of the Redis at `redis://HOST:PORT[/DB]`."""
    u = urllib.parse.urlsplit(url)
    try:
        with socket.create_connection((u.hostname or "127.0.0.1", u.port or 6379), timeout=timeout) as c:
            c.settimeout(timeout)
            return _ping(c)
    except (OSError, ValueError):
        return False


def _ping(c: socket.socket) -> bool:
    c.sendall(b"*1\r\n$4\r\nPING\r\n")
    got = b""
    while not got.endswith(b"\r\n") and len(got) < 64:
        part = c.recv(64)
        if not part:
            break
        got += part
    return got == b"+PONG\r\n"


def http_get_unix(path: str, url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    return http_unix(path, "GET", url, None, timeout)


def http_unix(path: str, method: str, url: str, body: bytes | None, timeout: float) -> tuple[int, bytes]:
    conn = _UnixHTTP(path, timeout)
    try:
        conn.request(method, url, body=body)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()
