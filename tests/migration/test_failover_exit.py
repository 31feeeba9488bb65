"""The watchdog's exit watch: a process exit is reported through its pidfd between probes (a real child)."""

from __future__ import annotations

import os
import subprocess

import pytest

from migration.failover import Watchdog

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd_open")


def test_exit_reported_once_through_pidfd():
    p = subprocess.Popen(["sleep", "60"])
    q = subprocess.Popen(["sleep", "60"])
    seen = []
    try:
        wd = Watchdog(lambda: {}, lambda i, r: seen.append((i, r)), pids=lambda: {"a": p.pid, "b": q.pid})
        assert wd.wait_exits(0.05) == []  # both running: a plain timeout
        p.kill()
        assert wd.wait_exits(30) == ["a"]  # returns on the exit, not after the 30 s
        assert seen == [("a", "dead")]
        wd.pids = lambda: {"b": q.pid}  # the agent replaced "a": its pidfd is forgotten
        assert wd.wait_exits(0.05) == [] and set(wd._fds) == {"b"}
    finally:
        for c in (p, q):
            c.kill()
            c.wait()
    # without pids it is the plain sleep of before
    slept = []
    assert Watchdog(lambda: {}, lambda i, r: None, sleep=slept.append).wait_exits(0.03) == [] and slept == [
        0.03
    ]
