"""A small JSON-over-HTTP client: kept-alive connections (a small pool, thread-safe), TCP_NODELAY, bearer token;
every non-2xx answer raised as the client's error class with the HTTP status and the server's JSON error
(`error`, `field`). An idle pooled connection the server has closed (its idle timeout, a restart) is seen
before use and replaced; one that breaks while the request is sent is replaced and the request sent once
more. No answer at all is status 0."""

from __future__ import annotations

import http.client
import json
import select
import socket
import threading
import urllib.parse
from typing import Any


class RestError(Exception):
    """An error answer (status >= 400), or no answer at all (status 0)."""

    what = "server"

    def __init__(self, status: int, error: str, fld: str | None = None, body: Any = None):
        super().__init__(f"{self.what} {status}: {error}" + (f" (field {fld})" if fld else ""))
        self.status = status
        self.error = error
        self.field = fld
        self.body = body


class RestClient:
    """`base` is the server's address, `http://HOST:PORT`."""

    what = "server"
    error: type[RestError] = RestError

    def __init__(self, base: str, token: str | None = None, timeout: float = 30.0, pool_size: int = 4):
        self.base = base.rstrip("/")
        self.token = token
        self.timeout = timeout
        u = urllib.parse.urlsplit(self.base)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"{self.what} address must be http(s)://HOST:PORT, not {base!r}")
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port or (443 if self._https else 80)
        self._prefix = u.path.rstrip("/")
        self._pool_size = pool_size
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    # -- transport -----------------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, raw: bytes | None = None) -> tuple[int, Any]:
        """One request; returns (status, parsed JSON or text). Raises `self.error` for status >= 400."""
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        headers = {}
        if data is not None:
            headers["Content-Type"] = "application/octet-stream" if raw is not None else "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        status, ctype, payload = self._exchange(method, self._prefix + path, data, headers)
        decoded = decode(payload, ctype)
        if status >= 400:
            err = decoded.get("error", str(decoded)) if isinstance(decoded, dict) else str(decoded)
            fld = decoded.get("field") if isinstance(decoded, dict) else None
            raise self.error(status, err, fld, decoded)
        return status, decoded

    def _exchange(self, method: str, path: str, data: bytes | None, headers: dict) -> tuple[int, str, bytes]:
        """Send on a pooled connection (or a new one); returns (status, content type, body)."""
        conn, reused = self._take()
        try:
            try:
                return self._send(conn, method, path, data, headers)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                if not reused:
                    raise
                # The server closed the idle connection before reading this request: send it once more.
                conn.close()
                conn, reused = self._new(), False
                return self._send(conn, method, path, data, headers)
        except (http.client.HTTPException, OSError) as exc:
            conn.close()
            raise self.error(0, f"cannot reach {self.what} at {self.base}: {exc}") from None

    def _send(
        self, conn: http.client.HTTPConnection, method: str, path: str, data: bytes | None, headers: dict
    ) -> tuple[int, str, bytes]:
        if conn.sock is None:
            conn.connect()
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        payload = resp.read()
        result = resp.status, resp.headers.get_content_type(), payload
        if resp.will_close:
            conn.close()
        else:
            self._give(conn)
        return result

    def _new(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return cls(self._host, self._port, timeout=self.timeout)

    def _take(self) -> tuple[http.client.HTTPConnection, bool]:
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return self._new(), False
            if not _closed_by_peer(conn):
                return conn, True
            conn.close()  # the server closed it while idle (its idle timeout, a restart)

    def _give(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            if len(self._idle) < self._pool_size:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Close the pooled idle connections (the client stays usable: the next call opens a new one)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for c in idle:
            c.close()


def _closed_by_peer(conn: http.client.HTTPConnection) -> bool:
    """An idle kept-alive connection is readable only if the server closed it (EOF) or broke the protocol."""
    if conn.sock is None:
        return True
    try:
        readable, _, _ = select.select([conn.sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def decode(data: bytes, ctype: str) -> Any:
    text = data.decode(errors="replace")
    if ctype == "application/json" or text[:1] in "[{":
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text
