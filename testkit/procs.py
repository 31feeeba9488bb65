"""Processes a harness starts and reads: wait for one's output, the last JSON line it printed."""

from __future__ import annotations

import json
import subprocess

from host_datapath.sysutil import kill_and_wait


def wait_exit(p: subprocess.Popen, timeout: float) -> str:
    """Wait for `p` and return its stdout; kill it when it overruns `timeout`."""
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_and_wait(p.pid)
        out, _ = p.communicate()
    return out if isinstance(out, str) else (out or b"").decode()


def last_json(text: str) -> dict:
    """The last line of `text` that starts with "{", decoded (`traffic` and `nf-bench` end with one)."""
    lines = [ln for ln in text.strip().splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"no JSON in output: {text[-300:]!r}")
    return json.loads(lines[-1])
