"""sysutil.kill_and_wait on real processes: SIGTERM first, SIGKILL for one that ignores it, and the answer says
whether the process is gone."""

from __future__ import annotations

import subprocess
import sys
import time

from host_datapath.sysutil import kill_and_wait, pid_alive


def test_a_process_that_obeys_sigterm_is_gone_at_once():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        t = time.monotonic()
        assert kill_and_wait(p.pid, timeout=5.0) is True
        assert time.monotonic() - t < 4.0 and not pid_alive(p.pid)
    finally:
        p.kill()
        p.wait()


def test_one_that_ignores_sigterm_is_killed_after_the_timeout():
    code = "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)"
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None and p.stdout.readline()  # its handler is in place
        t = time.monotonic()
        assert kill_and_wait(p.pid, timeout=0.3) is True
        assert time.monotonic() - t >= 0.3 and not pid_alive(p.pid)
    finally:
        p.kill()
        p.wait()


def test_a_pid_already_gone_is_gone():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert kill_and_wait(p.pid) is True
