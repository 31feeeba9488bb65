"""2 MB hugepages and a private hugetlbfs mount for one DPDK process (an OVS-DPDK switch).

`HugepageReservation(state_file, mount_dir).acquire(pages)` makes sure `pages` 2 MB pages are free: the
free ones the machine already has count (an operator who reserved them at boot gets nothing added), only the
shortfall is added to `/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages`; it mounts hugetlbfs
(`pagesize=2M`) at `mount_dir`. What it did is written to `state_file` (JSON) *before* it is done, so
`release()` — from this process or a later one, after a crash — unmounts and gives back exactly the pages
added (nr_hugepages lowered by that number, never below 0; pages another program took meanwhile are
left to it). Both are idempotent. When the kernel cannot give the pages (memory short or fragmented) the
count is put back and one DatapathError says so and what to do. `claim_lock()` (a machine-wide flock) is
held by a switch from counting the free pages until its DPDK process has taken them, and while it gives
pages back, so two switches never count the same free pages.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from host_datapath.sysutil import DatapathError, run

SYSFS_2M = Path("/sys/kernel/mm/hugepages/hugepages-2048kB")
KEY = "host.switch.dpdk.hugepages_mb"
CLAIM_LOCK = Path("/run/uno-hugepages.lock")


def read_count(sysfs: Path, name: str) -> int:
    try:
        return int((sysfs / name).read_text())
    except FileNotFoundError:
        raise DatapathError(
            f"this kernel has no 2 MB hugepages ({sysfs} missing): OVS-DPDK needs them"
        ) from None
    except (OSError, ValueError) as exc:
        raise DatapathError(f"cannot read {sysfs / name}: {exc}") from None


def write_count(sysfs: Path, pages: int) -> int:
    """Set nr_hugepages; returns the count the kernel then reports (it may give fewer)."""
    try:
        (sysfs / "nr_hugepages").write_text(str(pages))
    except OSError as exc:
        raise DatapathError(f"cannot set {sysfs / 'nr_hugepages'} to {pages}: {exc} (needs root)") from None
    return read_count(sysfs, "nr_hugepages")


def available_mb(meminfo: Path = Path("/proc/meminfo")) -> int:
    """MemAvailable: what the kernel could still hand out (hugepages come from it)."""
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    raise DatapathError(f"no MemAvailable in {meminfo}")


def shortfall_problem(pages: int, free: int, avail_mb: int, key: str = KEY) -> str | None:
    """Why `pages` 2 MB pages cannot be had when `free` are free and `avail_mb` MB of memory are available
    (None: they can), as the one line naming the config key. Some memory must stay for everything else: the
    pages added may take at most half of what is available."""
    need_mb = max(0, pages - free) * 2
    if need_mb and need_mb > avail_mb // 2:
        return (
            f"config: {key}: {pages * 2} MB of 2 MB hugepages needed, {free * 2} MB of them free, and the "
            f"{need_mb} MB more would take over half of the {avail_mb} MB of memory available: lower it, or "
            "reserve hugepages at boot (kernel command line `hugepagesz=2M hugepages=N`)"
        )
    return None


@contextlib.contextmanager
def claim_lock(path: Path = CLAIM_LOCK) -> Iterator[None]:
    """Held from counting the free pages until the DPDK process has taken its pages (a machine-wide flock):
    otherwise two switches starting at once would both count the same free pages as theirs, and one of them
    would find them gone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def is_mount(path: Path) -> bool:
    return os.path.ismount(path)


@dataclass
class HugepageReservation:
    """The hugepages and hugetlbfs mount one DPDK process uses; `state_file` remembers them (see module doc)."""

    state_file: Path
    mount_dir: Path
    sysfs: Path = SYSFS_2M

    def state(self) -> dict | None:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return None

    def _save(self, st: dict) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(st))
        tmp.replace(self.state_file)

    def acquire(self, pages: int) -> None:
        """Make sure `pages` 2 MB pages are free for the process to come, and hugetlbfs is mounted."""
        if pages <= 0:
            raise DatapathError(f"hugepages: asked for {pages} pages")
        st = self.state()
        if st is None:
            before = read_count(self.sysfs, "nr_hugepages")
            free = read_count(self.sysfs, "free_hugepages")
            problem = shortfall_problem(pages, free, available_mb())
            if problem:
                raise DatapathError(problem)
            need = max(0, pages - free)
            st = {
                "pages": pages,
                "before": before,
                "added": need,
                "mount": str(self.mount_dir),
                "mounted": False,
            }
            self._save(st)  # first: a crash between here and the write below still gives them back
            if need:
                got = write_count(self.sysfs, before + need)
                if got < before + need:
                    with contextlib.suppress(DatapathError):
                        write_count(
                            self.sysfs, max(0, read_count(self.sysfs, "nr_hugepages") - (got - before))
                        )
                    self.state_file.unlink(missing_ok=True)
                    raise DatapathError(
                        f"config: {KEY}: the kernel gave only {got - before} of the {need} more 2 MB hugepages "
                        f"asked for ({pages} needed = {pages * 2} MB, {free} were free): memory is short or too "
                        "fragmented. Lower it, or reserve them at boot (kernel command line "
                        "`hugepagesz=2M hugepages=N`)"
                    )
        if not is_mount(self.mount_dir):
            self.mount_dir.mkdir(parents=True, exist_ok=True)
            st["mounted"] = True
            self._save(st)
            run(["mount", "-t", "hugetlbfs", "-o", "pagesize=2M,mode=0700", "nodev", str(self.mount_dir)])

    def release(self, settle_s: float = 15.0) -> None:
        """Unmount and give back the pages `acquire` added (idempotent; nothing recorded = nothing to do)."""
        st = self.state()
        if st is None:
            return
        mount_dir = Path(st.get("mount") or self.mount_dir)
        if st.get("mounted") and is_mount(mount_dir):
            run(["umount", str(mount_dir)], check=False, timeout=10)
            if is_mount(mount_dir):  # a process still maps a file there: detach now, freed when it exits
                run(["umount", "-l", str(mount_dir)], check=False, timeout=10)
        with contextlib.suppress(OSError):
            mount_dir.rmdir()
        added = int(st.get("added", 0))
        if added:
            target = max(0, read_count(self.sysfs, "nr_hugepages") - added)
            write_count(self.sysfs, target)
            # Pages the stopped process still held become surplus and are freed a moment later (the kernel
            # may defer it): wait for that, so the count the caller reads next is the one given back.
            deadline = time.monotonic() + settle_s
            while read_count(self.sysfs, "nr_hugepages") > target and time.monotonic() < deadline:
                time.sleep(0.05)
        self.state_file.unlink(missing_ok=True)

    def status(self) -> dict:
        st = self.state() or {}
        return {
            "pages": st.get("pages"),
            "added": st.get("added"),
            "mount": str(self.mount_dir),
            "mounted": is_mount(self.mount_dir),
            "nr_hugepages": read_count(self.sysfs, "nr_hugepages"),
            "free_hugepages": read_count(self.sysfs, "free_hugepages"),
        }
