"""The process supervisor of OneSwitch (emulated_host/supervise.py): its restart policy, and a real child
killed with SIGKILL started again, a final status ending it, a SIGTERM stopping both."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from emulated_host.supervise import RestartPolicy, exit_status
from host_datapath.sysutil import pid_alive, read_pidfile, wait_for


def test_policy_restarts_quickly_backs_off_and_gives_up():
    p = RestartPolicy(first_delay=0.1, max_delay=1.0, healthy_after=10, max_quick=4)
    assert p.after_exit(137, lived=30) == 0.1  # a crash after a healthy run: at once
    assert p.after_exit(1, lived=0.5) == 0.2  # failing young: doubling
    assert p.after_exit(1, lived=0.5) == 0.4
    assert p.after_exit(1, lived=0.5) == 0.8
    assert p.after_exit(1, lived=0.5) is None  # the fifth quick failure in a row: give up
    q = RestartPolicy(max_quick=2)
    q.after_exit(1, lived=0.1)
    q.after_exit(1, lived=0.1)
    assert q.after_exit(1, lived=60) == q.first_delay  # lived long: the count starts again


def test_policy_final_statuses_end_it():
    assert RestartPolicy().after_exit(0, lived=1) is None
    assert RestartPolicy().after_exit(2, lived=1) is None  # a config error: starting again cannot help
    assert exit_status(-9) == 137


def _start(tmp_path, script: str) -> tuple[subprocess.Popen, object]:
    pidfile = tmp_path / "child.pid"
    sup = subprocess.Popen(
        [sys.executable, "-m", "emulated_host.supervise", "--pidfile", str(pidfile), "--",
         sys.executable, "-c", script],
        stdout=subprocess.DEVNULL, stderr=open(tmp_path / "sup.log", "wb"),  # noqa: SIM115
    )  # fmt: skip
    return sup, pidfile


def test_killed_child_is_started_again_and_sigterm_stops_both(tmp_path):
    sup, pidfile = _start(tmp_path, "import time; time.sleep(600)")
    try:
        first = wait_for(lambda: read_pidfile(pidfile), 30, "the child")
        os.kill(first, signal.SIGKILL)
        second = wait_for(lambda: (p := read_pidfile(pidfile)) and p != first and p, 30, "a new child")
        assert pid_alive(second)
        sup.send_signal(signal.SIGTERM)
        assert sup.wait(timeout=30) == 128 + signal.SIGTERM  # the child's status: stopped by SIGTERM
        wait_for(lambda: not pid_alive(second), 10, "the child to stop")
        assert not pidfile.exists()
        assert "started again" in (tmp_path / "sup.log").read_text()
    finally:
        if sup.poll() is None:
            sup.kill()
            sup.wait()
        p = read_pidfile(pidfile)
        if p:
            os.kill(p, signal.SIGKILL)


def test_config_error_status_is_not_restarted(tmp_path):
    sup, pidfile = _start(tmp_path, "import sys; sys.exit(2)")
    try:
        assert sup.wait(timeout=30) == 2
        time.sleep(0.3)
        assert read_pidfile(pidfile) is None
    finally:
        if sup.poll() is None:
            sup.kill()
            sup.wait()
