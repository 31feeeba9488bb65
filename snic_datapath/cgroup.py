"""A CPU-quota cgroup for the processes placed on an emulated sNIC (cgroup v1 and v2).

v1: the quota goes in the `cpu` hierarchy and usage is read from `cpuacct`; v2: both from one directory
(`cpu.max`, `cpu.stat`). The quota is in cores: 0.5 = half of one CPU, granted as `cores * period` of CPU time
per CFS bandwidth period; a group that used its quota is throttled (not run at all) until the period ends.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

from host_datapath.sysutil import DatapathError, kill_and_wait

ROOT = Path("/sys/fs/cgroup")
# The CFS bandwidth period. A group that used its quota stands still until the period ends: up to
# period x (1 - cores) with frames waiting in its NFs' rings. 10 ms, not the kernel's default 100 ms: an NF near
# its quota that keeps up has a lower p99 latency, with no more loss (bench/RESULTS.md `snic-quota`); much
# shorter periods come near the scheduler tick and make the quota erratic. Quotas under 0.1 core get a longer
# period (default_period_us): the kernel's minimum quota is 1 ms.
PERIOD_US = 10_000
# The kernel's bounds (kernel/sched/core.c, both hierarchies): a period of 1 ms .. 1 s, a quota of at least 1 ms.
MIN_PERIOD_US, MAX_PERIOD_US = 1_000, 1_000_000
MIN_QUOTA_US = 1_000


def quota_us(cores: float, period_us: int) -> int:
    """The quota in microseconds per period for `cores`; DatapathError for values the kernel would refuse."""
    if isinstance(period_us, bool) or not isinstance(period_us, int):
        raise DatapathError(f"CPU period must be an integer number of microseconds, got {period_us!r}")
    if not MIN_PERIOD_US <= period_us <= MAX_PERIOD_US:
        raise DatapathError(f"CPU period {period_us} us: must be in {MIN_PERIOD_US}..{MAX_PERIOD_US} us")
    if not cores > 0:  # also refuses NaN
        raise DatapathError(f"CPU quota must be positive, got {cores}")
    quota = round(cores * period_us)
    if quota < MIN_QUOTA_US:
        raise DatapathError(
            f"CPU quota {cores} cores x {period_us} us period = {quota} us: the kernel's minimum is "
            f"{MIN_QUOTA_US} us per period (give at least {MIN_QUOTA_US / period_us:g} cores or a longer period)"
        )
    return quota


def default_period_us(cores: float) -> int:
    """PERIOD_US, or the shortest longer period that still grants `cores` the kernel's minimum quota (1 ms)."""
    if not cores > 0:
        raise DatapathError(f"CPU quota must be positive, got {cores}")
    return min(MAX_PERIOD_US, max(PERIOD_US, math.ceil(MIN_QUOTA_US / cores)))


@dataclass(frozen=True)
class Throttling:
    """CFS bandwidth counters since the group was created (cpu.stat)."""

    periods: int  # periods in which the group had something to run
    throttled: int  # periods at whose end the group had used its quota and was stopped
    throttled_s: float  # time its run queues were held off, summed over the CPUs (can exceed wall time)


def cgroup_version(root: Path = ROOT) -> int:
    if (root / "cgroup.controllers").exists():
        return 2
    if (root / "cpu").is_dir():
        return 1
    raise DatapathError(f"no usable cgroup hierarchy under {root} (need v1 cpu controller or v2)")


@dataclass
class CpuCgroup:
    name: str
    root: Path = ROOT

    @property
    def version(self) -> int:
        return cgroup_version(self.root)

    def dirs(self) -> list[Path]:
        if self.version == 2:
            return [self.root / self.name]
        dirs = [self.root / "cpu" / self.name]
        if (self.root / "cpuacct").is_dir() and not (self.root / "cpu").samefile(self.root / "cpuacct"):
            dirs.append(self.root / "cpuacct" / self.name)
        return dirs

    def exists(self) -> bool:
        return self.dirs()[0].is_dir()

    def create(self, cores: float, period_us: int = PERIOD_US) -> None:
        """Create the group (or update it) with `cores` of CPU per `period_us`; bad values change nothing."""
        try:
            quota = quota_us(cores, period_us)
        except DatapathError as exc:
            raise DatapathError(f"cgroup {self.name}: {exc}") from None
        for d in self.dirs():
            d.mkdir(exist_ok=True)
        if self.version == 2:
            with contextlib.suppress(OSError):
                (self.root / "cgroup.subtree_control").write_text("+cpu")
            (self.dirs()[0] / "cpu.max").write_text(f"{quota} {period_us}")
        else:
            # One file at a time, each pair must be valid: lift the quota first (-1: none), then set the period.
            d = self.dirs()[0]
            (d / "cpu.cfs_quota_us").write_text("-1")
            (d / "cpu.cfs_period_us").write_text(str(period_us))
            (d / "cpu.cfs_quota_us").write_text(str(quota))

    def quota_cores(self) -> float | None:
        if not self.exists():
            return None
        if self.version == 2:
            quota, period = (self.dirs()[0] / "cpu.max").read_text().split()
            return None if quota == "max" else int(quota) / int(period)
        d = self.dirs()[0]
        quota = int((d / "cpu.cfs_quota_us").read_text())
        return None if quota < 0 else quota / int((d / "cpu.cfs_period_us").read_text())

    def period_us(self) -> int | None:
        """The CFS period in microseconds (None: no group)."""
        if not self.exists():
            return None
        if self.version == 2:
            return int((self.dirs()[0] / "cpu.max").read_text().split()[1])
        return int((self.dirs()[0] / "cpu.cfs_period_us").read_text())

    def throttling(self) -> Throttling:
        """How often and how long the group was throttled (v1 reports nanoseconds, v2 microseconds)."""
        stat = dict(line.split() for line in (self.dirs()[0] / "cpu.stat").read_text().splitlines() if line)
        if self.version == 2:
            throttled_s = int(stat.get("throttled_usec", 0)) / 1e6
        else:
            throttled_s = int(stat.get("throttled_time", 0)) / 1e9
        return Throttling(int(stat.get("nr_periods", 0)), int(stat.get("nr_throttled", 0)), throttled_s)

    def add(self, pid: int) -> None:
        """Move process `pid` (all its threads) into the cgroup."""
        for d in self.dirs():
            (d / "cgroup.procs").write_text(str(pid))

    def pids(self) -> list[int]:
        """Processes in the group: on v1 the union over its controllers' directories (a process can sit in
        one and not the other, and any one of them keeps its directory from being removed)."""
        found: set[int] = set()
        for d in self.dirs():
            with contextlib.suppress(FileNotFoundError):
                found.update(int(p) for p in (d / "cgroup.procs").read_text().split())
        return sorted(found)

    def usage_seconds(self) -> float:
        """CPU time used by the cgroup's processes so far."""
        if self.version == 2:
            for line in (self.dirs()[0] / "cpu.stat").read_text().splitlines():
                if line.startswith("usage_usec"):
                    return int(line.split()[1]) / 1e6
            return 0.0
        acct = self.dirs()[-1] / "cpuacct.usage"
        return int(acct.read_text()) / 1e9 if acct.exists() else 0.0

    def destroy(self, timeout: float = 5.0) -> None:
        """Kill what still runs inside, then remove the directories (idempotent).

        Retried for a few seconds: a supervisor may start a process into the group while it is torn down,
        and a killed process keeps the group busy (EBUSY) until its parent has reaped it."""
        deadline = time.monotonic() + timeout
        while True:
            for pid in self.pids():
                if pid != os.getpid():
                    kill_and_wait(pid, timeout=2.0)
            try:
                for d in reversed(self.dirs()):
                    if d.is_dir():
                        d.rmdir()
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise DatapathError(f"cannot remove cgroup {d}: {exc.strerror}") from exc
                time.sleep(0.05)
