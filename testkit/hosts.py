"""Emulated hosts in tests: unique names, the skip mark for root + Open vSwitch, and a snapshot of what a host
could leave behind (each test checks it is empty after teardown)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from emulated_host.config import parse_config
from emulated_host.host import EmulatedHost


def have_ovs() -> bool:
    return os.geteuid() == 0 and shutil.which("ovs-vswitchd") is not None


needs_root = pytest.mark.skipif(
    not have_ovs(), reason="needs root and Open vSwitch (run as root after make setup)"
)


def unique_name() -> str:
    return "t" + uuid.uuid4().hex[:5]


def live_procs(keep: Callable[[str], bool]) -> list[str]:
    """Live processes (zombies left out) whose command line `keep` accepts, as "PID ARGS", sorted: which
    processes they are, not their state of the moment (R or S changes from one `ps` to the next)."""
    out = subprocess.run(["ps", "-eo", "stat=,pid=,args="], capture_output=True, text=True).stdout
    rows = (line.split(None, 2) for line in out.splitlines())
    return sorted(f"{r[1]} {r[2]}" for r in rows if len(r) == 3 and not r[0].startswith("Z") and keep(r[2]))


def machine_snapshot(name: str) -> dict:
    """What a host named `name` could leave behind: namespaces, root links, processes, cgroups, rundir."""
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    cgroups = [str(p) for p in Path("/sys/fs/cgroup").glob(f"*/uno-{name}-*")]
    cgroups += [str(p) for p in Path("/sys/fs/cgroup").glob(f"uno-{name}-*")]
    return {
        "netns": sorted(line.split()[0] for line in ns.splitlines() if line.startswith(f"{name}-")),
        "links": sorted(line.split(":")[1].strip() for line in links.splitlines() if f" {name}-" in line),
        "procs": live_procs(lambda args: f"/run/uno-test/{name}" in args),
        "cgroups": sorted(cgroups),
        "rundir": Path(f"/run/uno-test/{name}").exists(),
    }


EMPTY = {"netns": [], "links": [], "procs": [], "cgroups": [], "rundir": False}


def make_host(**overrides) -> EmulatedHost:
    # These tests drive the physical switches directly: OneSwitch (which owns their tables) stays out.
    cfg = {"name": unique_name(), "rundir": "/run/uno-test", "oneswitch": {"enabled": False}, **overrides}
    return EmulatedHost(parse_config(cfg))
