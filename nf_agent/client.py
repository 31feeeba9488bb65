"""A minimal client of the agent's REST API (JSON over HTTP), for the demo, tests and benchmarks."""

from __future__ import annotations

import json
import urllib.error
import urllib.request


def call(base: str, method: str, path: str, body=None, timeout: float = 120) -> tuple[int, dict]:
    """`method` `base + path` with `body` as JSON; returns (HTTP status, decoded JSON body). An error status is
    returned, not raised (its body is the agent's `{"error", "field"}`); no connection raises URLError."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")
