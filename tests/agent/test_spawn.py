"""How the agent starts an NF process (command.spawn_command), for real: in its network namespace and its
sNIC cgroup before the program runs, one PID throughout; a cgroup it cannot join stops it before the program
runs (root: a real namespace and a real cgroup)."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from host_datapath.sysutil import netns_add, netns_del, wait_for
from nf_local.command import spawn_command
from snic_datapath.cgroup import CpuCgroup
from testkit.hosts import needs_root

pytestmark = [pytest.mark.root, needs_root]

# Prints its own PID, network namespace and cgroups, as the program itself sees them.
SHOW = ["sh", "-c", 'echo "$$"; readlink /proc/self/ns/net; cat /proc/self/cgroup']


@pytest.fixture
def ns_and_cgroup():
    name = "s" + uuid.uuid4().hex[:6]
    cg = CpuCgroup(f"uno-{name}-snic0")
    try:
        netns_add(name)
        cg.create(0.5)
        yield name, cg
    finally:
        if cg.exists():
            cg.destroy()
        netns_del(name)


def test_runs_in_the_namespace_and_the_cgroup_with_one_pid(ns_and_cgroup):
    ns, cg = ns_and_cgroup
    files = [str(d / "cgroup.procs") for d in cg.dirs()]
    p = subprocess.run(spawn_command(SHOW, ns, files), capture_output=True, text=True, timeout=10)
    assert p.returncode == 0, p.stderr
    _, netns, *groups = p.stdout.splitlines()
    assert netns == f"net:[{os.stat(f'/run/netns/{ns}').st_ino}]"
    assert netns != os.readlink("/proc/self/ns/net")
    assert any(f"/uno-{ns}-snic0" in g for g in groups)


def test_pid_of_the_spawn_is_the_program(ns_and_cgroup):
    ns, cg = ns_and_cgroup
    files = [str(d / "cgroup.procs") for d in cg.dirs()]
    p = subprocess.Popen(spawn_command(["sleep", "30"], ns, files))
    try:
        argv = lambda: Path(f"/proc/{p.pid}/cmdline").read_bytes().split(b"\0")[:2]  # noqa: E731
        wait_for(lambda: argv()[0] == b"sleep", 5, "the spawn to execute sleep")
        assert argv() == [b"sleep", b"30"]
        assert p.pid in cg.pids()
    finally:
        p.kill()
        p.wait()


def test_a_cgroup_it_cannot_join_stops_it_before_the_program_runs(ns_and_cgroup, tmp_path):
    ns, _ = ns_and_cgroup
    marker = tmp_path / "ran"
    missing = str(tmp_path / "no-such-cgroup" / "cgroup.procs")
    p = subprocess.run(spawn_command(["touch", str(marker)], ns, [missing]), capture_output=True, text=True,
                       timeout=10)  # fmt: skip
    assert p.returncode == 126 and "no-such-cgroup" in p.stderr
    assert not marker.exists()


def test_without_namespace_or_cgroup_the_command_is_unchanged():
    assert spawn_command(["nf", "x"]) == ["nf", "x"]
