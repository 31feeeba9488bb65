"""The host switch on Open vSwitch with the DPDK datapath: a private ovsdb-server + ovs-vswitchd-dpdk
(Debian's openvswitch-switch-dpdk, called by its path: the system's `ovs-vswitchd` alternative is left alone)
in the switch's own namespace, a netdev bridge, and ports taken by DPDK.

`OvsDpdkInstance(rundir, netns, options=DpdkOptions(...))`: like OvsInstance, but before its vswitchd starts
it makes sure the 2 MB hugepages are there and hugetlbfs is mounted at `RUNDIR/hugepages`
(host_datapath/hugepages.py: only the shortfall is reserved, and given back by `stop()`), and writes
`dpdk-init=true`, `dpdk-hugepage-dir`, `dpdk-socket-mem`/`dpdk-socket-limit`, `pmd-cpu-mask` and
`dpdk-extra` (`--file-prefix=uno-NETNS`, and `--no-pci` unless PCI ports are configured, then `-a ADDR`
for each: DPDK cannot grab any other NIC). OVS adds `--in-memory` itself (no DPDK runtime files, so two
DPDK processes cannot collide). `start()` returns once OVS reports `dpdk_initialized=true`, or fails with
the lines of vswitchd's log that say why (and gives the hugepages back).

`DpdkHostSwitch(netns, rundir, bridge, options)`: a HostSwitch on that instance. A namespace (a VM, an NF
instance) is plugged in exactly as on the plain switch (`attach_namespace`: a veth), but the switch's end is
taken by a net_af_packet vdev instead of OVS's kernel-socket netdev; `attach_vhost_user` (a real VM's
vhost-user socket), `attach_pci` (a physical port), `attach_tap` (a kernel tap in the switch's namespace)
add the other kinds (host_datapath/dpdk_ports.py).

What burns a core: each PMD thread (one per CPU of `pmd_cpu_mask`) polls its ports at 100 % of its CPU,
traffic or not, for as long as the switch runs.
"""

from __future__ import annotations

import contextlib
import glob
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from domain.errors import ValidationError
from host_datapath import dpdk_ports
from host_datapath.dpdk_options import DpdkOptions, parse_pci_address
from host_datapath.dpdk_ports import DpdkIface
from host_datapath.host_switch import HostSwitch
from host_datapath.hugepages import (
    SYSFS_2M,
    HugepageReservation,
    available_mb,
    claim_lock,
    read_count,
    shortfall_problem,
)
from host_datapath.ovs_instance import OvsInstance
from host_datapath.sysutil import DatapathError, pid_alive, read_pidfile, run, wait_for

DPDK_VSWITCHD = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"
# DPDK loads its drivers as plugins; without these the mbuf pools or the vdevs cannot be made (Debian
# only recommends them: `make setup` installs them, deps/apt.txt).
NEEDED_PMDS = {
    "librte_mempool_ring": "librte-mempool-ring23",
    "librte_bus_vdev": "librte-bus-vdev23",
    "librte_net_af_packet": "librte-net-af-packet23",
    "librte_net_tap": "librte-net-tap23",
}
PMD_DIRS = "/usr/lib/*/dpdk/pmds-*"
HUGEPAGE_STATE = "hugepages.json"
# How long a stopped ovs-vswitchd-dpdk may take to be gone (past its SIGKILL) before its pages are given back:
# its exit unmaps hundreds of MB of hugepages and closes net_tap's kernel taps, slow on a loaded machine.
EXIT_WAIT_S = 30.0


def check_installed(binary: str = DPDK_VSWITCHD, pmd_dirs: str = PMD_DIRS) -> None:
    """OVS-DPDK and the DPDK drivers UNO uses are installed; otherwise one error naming the packages."""
    if not Path(binary).exists():
        raise DatapathError(
            f"OVS-DPDK is not installed ({binary} missing): `make setup` installs openvswitch-switch-dpdk"
        )
    have = {Path(p).name.split(".so")[0] for d in glob.glob(pmd_dirs) for p in glob.glob(f"{d}/librte_*.so*")}
    missing = [pkg for lib, pkg in NEEDED_PMDS.items() if lib not in have]
    if missing:
        raise DatapathError(f"DPDK drivers missing: install {' '.join(missing)} (`make setup`)")


def preflight(options: DpdkOptions, sysfs: Path = SYSFS_2M) -> DpdkOptions:
    """Check, changing nothing, that an OVS-DPDK switch with `options` can start here: OVS-DPDK and its
    drivers installed, the options valid on this machine's CPUs, the hugepages to be had. Returns the options
    with their defaults filled in; one DatapathError naming the config key otherwise."""
    check_installed()
    try:
        options = options.validate()
    except ValidationError as exc:
        raise DatapathError(f"config: {exc}") from None
    problem = shortfall_problem(options.hugepages, read_count(sysfs, "free_hugepages"), available_mb())
    if problem:
        raise DatapathError(problem)
    return options


def release_leftovers(rundir: Path) -> None:
    """Give back the hugepages and unmount the hugetlbfs of every OVS-DPDK instance under `rundir` whose
    `stop()` did not run (a crash): for a sweep, after its processes are killed and before the directory
    is removed."""
    if not rundir.exists():
        return
    for state in rundir.rglob(HUGEPAGE_STATE):
        with claim_lock():
            HugepageReservation(state, state.with_name("hugepages")).release()


@dataclass
class OvsDpdkInstance(OvsInstance):
    """A private OVS whose vswitchd is the DPDK build (see the module doc)."""

    options: DpdkOptions = field(default_factory=DpdkOptions)
    init_timeout: float = 60.0

    def __post_init__(self) -> None:
        if not (self.options.pmd_cpu_mask and self.options.socket_mem):  # defaults to fill in
            self.options = self.options.validate()
        self.vswitchd = DPDK_VSWITCHD
        self.start_timeout = max(self.start_timeout, 30.0)
        self.hugepages = HugepageReservation(self.rundir / HUGEPAGE_STATE, self.rundir / "hugepages")

    @property
    def file_prefix(self) -> str:
        return f"uno-{self.netns}"

    @property
    def log_file(self) -> Path:
        return self.rundir / "ovs-vswitchd.log"

    def start(self, ovsdb_tcp_port: int | None = None) -> None:
        """Hugepages, DPDK settings, both daemons; returns once DPDK is initialised (idempotent)."""
        self.options = preflight(self.options, self.hugepages.sysfs)
        self.rundir.mkdir(parents=True, exist_ok=True)
        with claim_lock():
            self.hugepages.acquire(self.options.hugepages)
            try:
                self.other_config = self.options.other_config(str(self.hugepages.mount_dir), self.file_prefix)
                try:
                    super().start(ovsdb_tcp_port)
                except DatapathError as exc:  # e.g. DPDK aborted before vswitchd detached: its log says why
                    raise DatapathError(f"{exc}; {self.log_errors()}") from None
                self.wait_initialized()
            except BaseException:
                self._stop()
                raise

    def vsctl(self, *args: str) -> str:
        return run(["ovs-vsctl", f"--db={self.db_remote}", "--timeout=10", *args]).strip()

    def initialized(self) -> bool:
        return self.vsctl("get", "Open_vSwitch", ".", "dpdk_initialized") == "true"

    def wait_initialized(self) -> None:
        deadline = time.monotonic() + self.init_timeout
        while True:
            pid = read_pidfile(self._pidfile("ovs-vswitchd"))
            if pid is None:
                raise DatapathError(f"ovs-vswitchd-dpdk exited while initialising DPDK: {self.log_errors()}")
            if self.initialized():
                return
            if time.monotonic() > deadline:
                raise DatapathError(f"DPDK not initialised after {self.init_timeout:g}s: {self.log_errors()}")
            time.sleep(0.1)

    def log_errors(self, lines: int = 8) -> str:
        """The last error lines of vswitchd's log (EAL's complaints among them), or its tail."""
        try:
            text = self.log_file.read_text(errors="replace").splitlines()
        except OSError:
            return f"(no log at {self.log_file})"
        bad = [ln for ln in text if "|ERR|" in ln or "|EMER|" in ln or "|WARN|dpdk" in ln or "EAL:" in ln]
        picked = (bad or text)[-lines:]
        return " / ".join(ln.split("|", 4)[-1] for ln in picked) + f" (log {self.log_file})"

    def stop(self) -> None:
        with claim_lock():  # pages given back while another switch counts the free ones would vanish under it
            self._stop()

    def _stop(self) -> None:
        pid = read_pidfile(self._pidfile("ovs-vswitchd"))
        super().stop()
        # The pages are given back once the process is gone: lowered while it still exits, they stay surplus
        # until it is, and the count read next is not the one given back.
        if pid:
            with contextlib.suppress(DatapathError):  # still there: given back anyway, freed when it is gone
                wait_for(lambda: not pid_alive(pid), EXIT_WAIT_S, f"ovs-vswitchd-dpdk (pid {pid}) to be gone")
        self.hugepages.release()

    # -- what it costs ------------------------------------------------------------------------------------
    def pmd_threads(self) -> dict[int, str]:
        """Thread id -> name of vswitchd's PMD threads (named `pmd-cCC/idN`)."""
        pid = read_pidfile(self._pidfile("ovs-vswitchd"))
        out: dict[int, str] = {}
        if pid is None:
            return out
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                name = (task / "comm").read_text().strip()
            except OSError:
                continue
            if name.startswith("pmd"):
                out[int(task.name)] = name
        return out

    def dpdk_status(self) -> dict:
        running = read_pidfile(self._pidfile("ovs-vswitchd")) is not None
        out: dict = {
            "vswitchd": self.vswitchd,
            "pmd_cpu_mask": self.options.pmd_cpu_mask,
            "pmd_cpus": self.options.pmd_cpus,
            "socket_mem": self.options.socket_mem,
            "pci": list(self.options.pci),
            "hugepages": self.hugepages.status(),
            "initialized": False,
        }
        if running:
            try:
                out["initialized"] = self.initialized()
                out["version"] = self.vsctl("get", "Open_vSwitch", ".", "dpdk_version").strip('"')
            except DatapathError:
                pass
            out["pmd_threads"] = sorted(self.pmd_threads().values())
        return out


@dataclass
class DpdkHostSwitch(HostSwitch):
    """The host switch on OVS-DPDK: namespace `netns`, OVS state in `rundir`, netdev bridge `bridge`."""

    options: DpdkOptions = field(default_factory=DpdkOptions)
    veth_mtu: ClassVar[int] = dpdk_ports.DPDK_VDEV_MTU

    def __post_init__(self) -> None:
        super().__post_init__()
        self.ovs = OvsDpdkInstance(self.rundir, self.netns, options=self.options)
        self.options = self.ovs.options  # validated, defaults filled in

    def add_dpdk_port(self, name: str, ofport: int, iface: DpdkIface) -> None:
        """Add a port of any DPDK kind (dpdk_ports) as OpenFlow port `ofport` (idempotent)."""
        self.driver.add_port(name, ofport, iface_type=iface.type, options=iface.options, mtu=iface.mtu)

    def add_bridge_port(self, port: str, ofport: int, shaped: bool = False) -> None:
        """Kernel interface `port` of the switch's namespace as OpenFlow port `ofport`, through a net_af_packet
        vdev; `shaped` keeps the kernel's qdisc (a tc shaping on it) in the way out (qdisc_bypass=0)."""
        self.add_dpdk_port(port, ofport, dpdk_ports.af_packet(port, qdisc_bypass=not shaped))

    def attach_vhost_user(self, name: str, ofport: int, socket: str) -> None:
        """A VM's vhost-user NIC: OVS connects to the server socket `socket` (QEMU's `server=on` chardev) and
        reconnects whenever it goes away. `name` is the OVS port name (<= 15 characters)."""
        self.add_dpdk_port(name, ofport, dpdk_ports.vhost_user_client(socket))

    def attach_pci(self, name: str, ofport: int, address: str) -> None:
        """A physical port by PCI address; it must be in `options.pci` (the only devices DPDK may probe) and
        bound to vfio-pci (or another DPDK-capable driver) by the operator."""
        addr = parse_pci_address(address, "address")
        if addr not in self.options.pci:
            raise DatapathError(
                f"PCI device {addr} is not in host.switch.dpdk.pci ({', '.join(self.options.pci) or 'empty'}): "
                "DPDK was started without it"
            )
        existed = name in self.driver.ports()
        try:
            self.add_dpdk_port(name, ofport, dpdk_ports.pci(addr))
        except DatapathError:
            if not existed:  # a device DPDK cannot probe leaves no dead port row behind
                self.driver.del_port(name)
            raise

    def attach_tap(self, name: str, ofport: int) -> None:
        """A kernel tap `name` in the switch's namespace, made by a net_tap vdev (its queues match the PMDs)."""
        self.add_dpdk_port(name, ofport, dpdk_ports.tap(name, pmd_threads=len(self.options.pmd_cpus)))

    def switch_info(self) -> dict:
        """`host.switch` of `uno status --json`: UNO's own private OVS, on DPDK."""
        return {**super().switch_info(), "dpdk": self.options.as_dict()}

    def status(self) -> dict:
        out = super().status()
        out["datapath"] = "dpdk"
        out["dpdk"] = self.ovs.dpdk_status()
        return out
