"""A process supervisor: runs one command and starts it again when it dies, within a second.

`python -m emulated_host.supervise --pidfile CHILD.pid -- CMD...` (started by `OneSwitch.up()` in its own
session): the child's pid goes to CHILD.pid (so `kill -9 $(cat CHILD.pid)` is a crash of the child, not of its
supervisor). A child that exits with 0 or 2 (a clean stop, or a bad config: starting again cannot help) ends the
supervisor with that status; any other end (a signal, e.g. kill -9, an OOM, status 1) starts it again after a
short delay that doubles while it keeps failing young, and the supervisor gives up after `max_quick` failures in a
row. SIGTERM/SIGINT to the supervisor stop the child (SIGTERM, SIGKILL after 10 s) and then the supervisor."""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

FINAL_STATUSES = (0, 2)


@dataclass
class RestartPolicy:
    """When to start a dead child again. Pure: the caller passes the times (seconds, monotonic)."""

    first_delay: float = 0.1
    max_delay: float = 5.0
    healthy_after: float = 10.0  # a child that lived this long resets the delay and the failure count
    max_quick: int = 8
    failures: int = 0

    def after_exit(self, status: int, lived: float) -> float | None:
        """The delay before the next start, or None to give up (a final status, or too many quick failures)."""
        if status in FINAL_STATUSES:
            return None
        if lived >= self.healthy_after:
            self.failures = 0
        self.failures += 1
        if self.failures > self.max_quick:
            return None
        return min(self.max_delay, self.first_delay * 2 ** (self.failures - 1))


def exit_status(returncode: int) -> int:
    """A Popen returncode as a shell status (128 + signal for a signal)."""
    return 128 - returncode if returncode < 0 else returncode


def supervise(
    cmd: list[str],
    pidfile: Path,
    policy: RestartPolicy,
    log: Callable[[str], None],
    clock: Callable[[], float] = time.monotonic,
) -> int:
    stopping = False
    child: subprocess.Popen | None = None

    def stop(_sig, _frame) -> None:
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    restarts = 0
    while True:
        started = clock()
        child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
        tmp = pidfile.with_suffix(".tmp")
        tmp.write_text(f"{child.pid}\n")
        tmp.replace(pidfile)  # readers never see a half-written pid
        if restarts:
            log(f"supervise: started again (pid {child.pid}, restart {restarts})")
        if stopping:  # a stop that came while it was starting
            child.terminate()
        while True:
            try:
                rc = child.wait(timeout=10.0 if stopping else None)
                break
            except subprocess.TimeoutExpired:
                child.kill()
        status = exit_status(rc)
        if stopping:
            pidfile.unlink(missing_ok=True)
            return status
        delay = policy.after_exit(status, clock() - started)
        if delay is None:
            log(f"supervise: child exited with status {status}; not starting it again")
            pidfile.unlink(missing_ok=True)
            return status
        log(
            f"supervise: child (pid {child.pid}) ended with status {status}; starting it again in {delay:.1f} s"
        )
        time.sleep(delay)
        if stopping:
            pidfile.unlink(missing_ok=True)
            return status
        restarts += 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="supervise", description=__doc__.split("\n")[0])
    p.add_argument("--pidfile", required=True, type=Path, help="where the child's pid is written")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    a = p.parse_args(argv)
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        p.error("no command given (after --)")

    def log(msg: str) -> None:
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}", file=sys.stderr, flush=True)

    return supervise(cmd, a.pidfile, RestartPolicy(), log)


if __name__ == "__main__":
    sys.exit(main())
