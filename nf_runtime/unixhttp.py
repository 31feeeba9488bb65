"""Talking to an NF over unix sockets: HTTP to its stats endpoint (/health, /stats, /state, /drain, ...) and a
Redis PING on the state tier's socket."""

from __future__ import annotations

import http.client
import socket
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
            c.sendall(b"*1\r\n$4\r\nPING\r\n")
            got = b""
            while not got.endswith(b"\r\n") and len(got) < 64:
                part = c.recv(64)
                if not part:
                    break
                got += part
            return got == b"+PONG\r\n"
    except OSError:
        return False


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
