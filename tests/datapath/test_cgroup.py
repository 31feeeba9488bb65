"""The sNIC's CPU-quota cgroup: real on this machine's hierarchy, and the v2 file layout on a scratch tree."""

from __future__ import annotations

import subprocess

import pytest

from host_datapath.sysutil import pid_alive
from snic_datapath.cgroup import ROOT, CpuCgroup, cgroup_version

from .conftest import needs_root, unique_name


@pytest.mark.root
@needs_root
def test_real_cgroup_quota_membership_and_removal():
    cg = CpuCgroup(f"uno-{unique_name()}-snic0")
    proc = subprocess.Popen(["sleep", "30"])
    try:
        cg.create(0.25)
        assert cg.version == cgroup_version(ROOT)
        assert cg.quota_cores() == pytest.approx(0.25)
        cg.add(proc.pid)
        assert cg.pids() == [proc.pid]
        assert cg.usage_seconds() >= 0.0
        cg.destroy()  # kills what runs inside, then removes the directories
        assert not pid_alive(proc.pid)  # (destroy reaps it: it is our child)
        assert not cg.exists() and all(not d.exists() for d in cg.dirs())
    finally:
        proc.kill()
        proc.wait()
        if cg.exists():
            cg.destroy()


def test_v2_layout_on_a_scratch_tree(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    cg = CpuCgroup("uno-x-snic0", root=tmp_path)
    assert cg.version == 2 and cg.dirs() == [tmp_path / "uno-x-snic0"]
    cg.create(1.5)
    assert (tmp_path / "uno-x-snic0" / "cpu.max").read_text() == "150000 100000"
    assert cg.quota_cores() == pytest.approx(1.5)
    (tmp_path / "uno-x-snic0" / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 1\n")
    assert cg.usage_seconds() == pytest.approx(2.5)


def test_v1_layout_on_a_scratch_tree(tmp_path):
    for ctrl in ("cpu", "cpuacct"):
        (tmp_path / ctrl).mkdir()
    cg = CpuCgroup("uno-x-snic1", root=tmp_path)
    assert cg.version == 1 and cg.dirs() == [
        tmp_path / "cpu" / "uno-x-snic1",
        tmp_path / "cpuacct" / "uno-x-snic1",
    ]
    cg.create(0.5)
    assert (tmp_path / "cpu" / "uno-x-snic1" / "cpu.cfs_quota_us").read_text() == "50000"
    assert cg.quota_cores() == pytest.approx(0.5)


def test_no_hierarchy_and_bad_quota_are_errors(tmp_path):
    from host_datapath.sysutil import DatapathError

    with pytest.raises(DatapathError, match="no usable cgroup"):
        cgroup_version(tmp_path)
    (tmp_path / "cpu").mkdir()
    with pytest.raises(DatapathError, match="positive"):
        CpuCgroup("uno-x-snic2", root=tmp_path).create(0)


@pytest.mark.root
@needs_root
def test_destroy_finds_a_process_in_one_v1_controller_only():
    """A process in cpuacct but not cpu (v1) still counts, and destroy kills it and removes both directories."""
    cg = CpuCgroup(f"uno-{unique_name()}-snic0")
    if cg.version != 1 or len(cg.dirs()) < 2:
        pytest.skip("needs cgroup v1 with separate cpu and cpuacct hierarchies")
    cg.create(0.5)
    proc = subprocess.Popen(["sleep", "60"])
    try:
        (cg.dirs()[1] / "cgroup.procs").write_text(str(proc.pid))
        assert cg.pids() == [proc.pid]
        cg.destroy()
        assert not any(d.exists() for d in cg.dirs())
        assert not pid_alive(proc.pid)  # (destroy reaped it: it is our child)
    finally:
        proc.kill()
        proc.wait()
        if cg.exists():
            cg.destroy()
