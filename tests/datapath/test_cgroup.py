"""The sNIC's CPU-quota cgroup: real on this machine's hierarchy, and the v2 file layout on a scratch tree."""

from __future__ import annotations

import subprocess

import pytest

from host_datapath.sysutil import DatapathError, pid_alive
from snic_datapath.cgroup import (
    MAX_PERIOD_US,
    MIN_PERIOD_US,
    MIN_QUOTA_US,
    PERIOD_US,
    ROOT,
    CpuCgroup,
    cgroup_version,
    default_period_us,
    quota_us,
)
from testkit.hosts import needs_root, unique_name


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
    assert (tmp_path / "uno-x-snic0" / "cpu.max").read_text() == f"{int(1.5 * PERIOD_US)} {PERIOD_US}"
    assert cg.quota_cores() == pytest.approx(1.5) and cg.period_us() == PERIOD_US
    cg.create(0.5, period_us=10_000)
    assert (tmp_path / "uno-x-snic0" / "cpu.max").read_text() == "5000 10000"
    assert cg.quota_cores() == pytest.approx(0.5) and cg.period_us() == 10_000
    (tmp_path / "uno-x-snic0" / "cpu.stat").write_text(
        "usage_usec 2500000\nuser_usec 1\nnr_periods 40\nnr_throttled 7\nthrottled_usec 350000\n"
    )
    assert cg.usage_seconds() == pytest.approx(2.5)
    t = cg.throttling()
    assert (t.periods, t.throttled, t.throttled_s) == (40, 7, pytest.approx(0.35))


def test_v1_layout_on_a_scratch_tree(tmp_path):
    for ctrl in ("cpu", "cpuacct"):
        (tmp_path / ctrl).mkdir()
    cg = CpuCgroup("uno-x-snic1", root=tmp_path)
    assert cg.version == 1 and cg.dirs() == [
        tmp_path / "cpu" / "uno-x-snic1",
        tmp_path / "cpuacct" / "uno-x-snic1",
    ]
    cg.create(0.5)
    d = tmp_path / "cpu" / "uno-x-snic1"
    assert (d / "cpu.cfs_quota_us").read_text() == str(PERIOD_US // 2)
    assert (d / "cpu.cfs_period_us").read_text() == str(PERIOD_US)
    assert cg.quota_cores() == pytest.approx(0.5)
    cg.create(0.25, period_us=5_000)
    assert ((d / "cpu.cfs_quota_us").read_text(), (d / "cpu.cfs_period_us").read_text()) == ("1250", "5000")
    assert cg.period_us() == 5_000
    (d / "cpu.stat").write_text("nr_periods 12\nnr_throttled 3\nthrottled_time 4500000000\n")
    t = cg.throttling()
    assert (t.periods, t.throttled, t.throttled_s) == (12, 3, pytest.approx(4.5))


@pytest.mark.parametrize(
    ("cores", "period", "msg"),
    [
        (0.5, 999, "must be in 1000..1000000"),
        (0.5, 1_000_001, "must be in 1000..1000000"),
        (0.5, 10_000.0, "integer"),
        (0.5, True, "integer"),
        (0.09, 10_000, "900 us: the kernel's minimum is 1000 us per period (give at least 0.1 cores"),
        (0.0, 10_000, "positive"),
        (float("nan"), 10_000, "positive"),
    ],
)
def test_quota_and_period_the_kernel_would_refuse(tmp_path, cores, period, msg):
    with pytest.raises(DatapathError, match=msg.replace("(", r"\(")):
        quota_us(cores, period)
    (tmp_path / "cgroup.controllers").write_text("cpu\n")
    cg = CpuCgroup("uno-x-snic3", root=tmp_path)
    with pytest.raises(DatapathError, match="cgroup uno-x-snic3: "):
        cg.create(cores, period)
    assert not cg.exists()  # nothing written
    assert quota_us(0.1, 10_000) == MIN_QUOTA_US and quota_us(2.0, MIN_PERIOD_US) == 2_000


@pytest.mark.root
@needs_root
def test_the_kernel_agrees_with_the_bounds():
    """The kernel takes what quota_us accepts at its edges and refuses one microsecond beyond them."""
    cg = CpuCgroup(f"uno-{unique_name()}-snic0")
    try:
        cg.create(MIN_QUOTA_US / MIN_PERIOD_US, period_us=MIN_PERIOD_US)  # 1 ms per 1 ms
        assert cg.period_us() == MIN_PERIOD_US and cg.quota_cores() == pytest.approx(1.0)
        cg.create(0.5, period_us=10_000)
        assert cg.period_us() == 10_000 and cg.quota_cores() == pytest.approx(0.5)
        assert cg.throttling().throttled_s >= 0.0
        d = cg.dirs()[0]
        if cg.version == 2:
            bad = [(d / "cpu.max", f"{MIN_QUOTA_US - 1} 10000"), (d / "cpu.max", f"5000 {MIN_PERIOD_US - 1}")]
        else:
            bad = [
                (d / "cpu.cfs_quota_us", str(MIN_QUOTA_US - 1)),
                (d / "cpu.cfs_period_us", str(MIN_PERIOD_US - 1)),
            ]
        for f, value in bad:
            with pytest.raises(OSError):
                f.write_text(value)
        assert cg.period_us() == 10_000 and cg.quota_cores() == pytest.approx(0.5)
    finally:
        cg.destroy()


def test_no_hierarchy_and_bad_quota_are_errors(tmp_path):
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


def test_default_period_grants_the_kernel_minimum():
    """PERIOD_US unless the quota would fall under 1 ms per period; then the shortest period that gives 1 ms."""
    assert default_period_us(0.5) == PERIOD_US
    assert default_period_us(MIN_QUOTA_US / PERIOD_US) == PERIOD_US
    assert default_period_us(0.01) == max(PERIOD_US, 100_000)
    for cores in (0.001, 0.003, 0.01, 0.07, 0.1, 0.15, 0.2, 0.5, 2.0):
        period = default_period_us(cores)
        assert quota_us(cores, period) >= MIN_QUOTA_US and period >= PERIOD_US
    assert default_period_us(0.0001) == MAX_PERIOD_US  # still too small: create() refuses it, naming why
    with pytest.raises(DatapathError, match="minimum"):
        quota_us(0.0001, default_period_us(0.0001))
    with pytest.raises(DatapathError, match="positive"):
        default_period_us(0)
