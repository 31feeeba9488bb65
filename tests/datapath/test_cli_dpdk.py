"""`uno up` with a bad `host.switch.dpdk`: one line naming the key, exit status 2, and nothing changed on the
machine (no namespace, no run directory, no hugepage reserved, no hugetlbfs mounted)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from host_datapath.hugepages import SYSFS_2M
from testkit.hosts import EMPTY, machine_snapshot, needs_root, unique_name
from testkit.switch_testbed import dpdk_missing

pytestmark = [
    pytest.mark.root,
    needs_root,
    pytest.mark.skipif(bool(dpdk_missing()), reason=dpdk_missing() or ""),
]
REPO = Path(__file__).resolve().parents[2]


def all_cpus_mask() -> str:
    return hex(sum(1 << c for c in os.sched_getaffinity(0)))


def total_mb() -> int:
    """The machine's memory (MemTotal): twice that can never be reserved."""
    line = next(ln for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal:"))
    return int(line.split()[1]) // 1024


def machine() -> tuple:
    mounts = [m for m in Path("/proc/mounts").read_text().splitlines() if "hugetlbfs" in m]
    return int((SYSFS_2M / "nr_hugepages").read_text()), mounts


@pytest.mark.parametrize(
    ("dpdk", "key", "why"),
    [
        ("{hugepages_mb: 3}", "host.switch.dpdk.hugepages_mb", "even number of MB"),
        ("{hugepages_mb: 0}", "host.switch.dpdk.hugepages_mb", "even number of MB"),
        ("{hugepages_mb: '256'}", "host.switch.dpdk.hugepages_mb", "integer"),
        ("{pmd_cpu_mask: zz}", "host.switch.dpdk.pmd_cpu_mask", "hex CPU mask"),
        ("{pmd_cpu_mask: '0x0'}", "host.switch.dpdk.pmd_cpu_mask", "selects no CPU"),
        (f"{{pmd_cpu_mask: '{all_cpus_mask()}'}}", "host.switch.dpdk.pmd_cpu_mask", "every CPU"),
        ("{pmd_cpu_mask: '0x10000'}", "host.switch.dpdk.pmd_cpu_mask", "CPU 16 is not one"),
        ("{hugepages_mb: 256, socket_mem: '512'}", "host.switch.dpdk.socket_mem", "more than hugepages_mb"),
        ("{pci: ['3:00.0']}", "host.switch.dpdk.pci[0]", "not a PCI address"),
        ("{hugepage_mb: 256}", "host.switch.dpdk.hugepage_mb", "unknown key"),
        # more than the machine's memory could give: found before anything is started
        (f"{{hugepages_mb: {2 * total_mb()}}}", "host.switch.dpdk.hugepages_mb", "memory"),
    ],
)
def test_bad_dpdk_config_is_one_line_naming_the_key_and_changes_nothing(tmp_path, dpdk, key, why):
    name = unique_name()
    cfg = tmp_path / "host.yaml"
    cfg.write_text(
        f"name: {name}\nrundir: /run/uno-test\nvms: 1\noneswitch: {{enabled: false}}\n"
        f"host: {{switch: {{datapath_type: netdev, dpdk: {dpdk}}}}}\n"
    )
    before = machine()
    try:
        out = subprocess.run([sys.executable, "-m", "uno_cli.main", "up", "--config", str(cfg)], cwd=REPO,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        lines = out.stderr.strip().splitlines()
        assert out.returncode == 2 and len(lines) == 1, out.stderr
        assert lines[0].startswith(f"uno up: error: config: {key}: ") and why in lines[0], lines[0]
        assert machine() == before
        assert machine_snapshot(name) == EMPTY
    finally:
        subprocess.run([sys.executable, "-m", "uno_cli.main", "down", "--config", str(cfg)], cwd=REPO,
                       capture_output=True, timeout=120)  # fmt: skip
