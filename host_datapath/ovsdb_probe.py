"""Whether an OVSDB server answers: one `list_dbs` request with a deadline (ovsdbapp itself would block or
retry on a socket nobody serves), so a bad `ovsdb` setting is one line naming it."""

from __future__ import annotations

import json
import socket
import time

from host_datapath.sysutil import DatapathError


def probe_ovsdb(remote: str, timeout: float = 3.0) -> list[str]:
    """The databases an OVSDB server at `remote` (`unix:PATH` or `tcp:HOST:PORT`) serves (`list_dbs`);
    DatapathError when nothing answers within `timeout` s (ovsdbapp itself would block or retry)."""
    kind, _, addr = remote.partition(":")
    deadline = time.monotonic() + timeout
    try:
        if kind == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(timeout)
            sock.connect(addr)
        else:
            host, _, port = addr.rpartition(":")
            sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        with sock:
            sock.sendall(json.dumps({"method": "list_dbs", "params": [], "id": 0}).encode())
            buf = b""
            while True:
                sock.settimeout(max(0.05, deadline - time.monotonic()))
                chunk = sock.recv(65536)
                if not chunk:
                    raise DatapathError(f"{remote} closed the connection without answering")
                buf += chunk
                try:
                    reply = json.loads(buf)
                except ValueError:
                    continue
                if reply.get("id") == 0:
                    return list(reply.get("result") or [])
                buf = b""  # an echo request or a notification: wait for the answer
    except TimeoutError:
        raise DatapathError(f"{remote} does not answer (no reply within {timeout:g} s)") from None
    except OSError as exc:
        raise DatapathError(f"{remote} does not answer ({exc.strerror or exc})") from None
