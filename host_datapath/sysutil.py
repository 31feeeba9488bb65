"""Thin, checked wrappers over the system tools the drivers need (ip, tc, sysctl, processes).

Every call raises DatapathError with the failing command and its stderr, never a bare CalledProcessError.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from host_datapath import netns_ops

T = TypeVar("T")
log = logging.getLogger("uno.sysutil")
# Longest unix socket path the kernel takes (sun_path is 108 bytes with its NUL).
MAX_UNIX_PATH = 107


class DatapathError(RuntimeError):
    """A datapath operation failed; the message names the command and what it printed."""


def run(
    cmd: Sequence[str],
    netns: str | None = None,
    check: bool = True,
    timeout: float = 30.0,
    input_text: str | None = None,
) -> str:
    """Run a command (inside `netns` when given), feeding it `input_text`, and return its stdout.

    `ip` itself enters the namespace (`ip -n NS ...`: one process, not `ip netns exec`'s two)."""
    if netns and cmd and cmd[0] == "ip":
        full = ["ip", "-n", netns, *cmd[1:]]
    else:
        full = ["ip", "netns", "exec", netns, *cmd] if netns else list(cmd)
    try:
        proc = subprocess.run(full, capture_output=True, text=True, timeout=timeout, input=input_text)
    except FileNotFoundError as exc:
        raise DatapathError(f"command not found: {full[0]} (run `make setup`)") from exc
    except subprocess.TimeoutExpired as exc:
        raise DatapathError(f"timed out after {timeout}s: {' '.join(full)}") from exc
    if check and proc.returncode != 0:
        raise DatapathError(f"`{' '.join(full)}` failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def netns_list() -> list[str]:
    out = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def in_netns(netns: str | None, fn: Callable[[], T]) -> T:
    """`fn()` run in-process inside namespace `netns` (netns_ops.in_netns; None: the root namespace, where this
    process runs); errors as DatapathError."""
    try:
        return fn() if netns is None else netns_ops.in_netns(netns, fn)
    except (OSError, ValueError) as exc:
        raise DatapathError(f"in network namespace {netns or '(root)'}: {exc}") from None


def netns_exists(name: str) -> bool:
    """Namespace `name` exists (its /run/netns file; no process spawned)."""
    return netns_ops.netns_exists(name)


def netns_add(name: str) -> None:
    """Create namespace `name` unless it exists, and set its loopback up (idempotent)."""
    if not netns_exists(name):
        run(["ip", "netns", "add", name])
    in_netns(name, lambda: netns_ops.link_up("lo"))


def netns_del(name: str) -> None:
    if netns_exists(name):
        run(["ip", "netns", "del", name], check=False)


def netns_pids(name: str) -> list[int]:
    out = run(["ip", "netns", "pids", name], check=False)
    return [int(p) for p in out.split() if p.isdigit()]


def netns_members(names: list[str]) -> list[int]:
    """Every process in any of the named namespaces, from one pass over /proc (`netns_pids` costs a process
    and a pass per name: too slow to kill a machine's processes at once)."""
    want = set()
    for n in names:
        try:
            st = os.stat(f"/run/netns/{n}")
        except OSError:
            continue
        want.add((st.st_dev, st.st_ino))
    out = []
    if not want:
        return out
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{entry.name}/ns/net")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in want:
            out.append(int(entry.name))
    return out


def link_exists(ifname: str, netns: str | None = None) -> bool:
    """Interface `ifname` exists in `netns` (None: the caller's namespace); False if `netns` does not exist."""
    if netns is None:
        return netns_ops.link_present(ifname)
    if not netns_exists(netns):
        return False
    return in_netns(netns, lambda: netns_ops.link_present(ifname))


def veth_pair(a: str, a_ns: str | None, b: str, b_ns: str | None, mtu: int = 1600) -> None:
    """Create veth a<->b with each end made in its namespace (None: the root namespace, e.g. the port of an
    operator's OVS that runs there), both up, transmit checksum offload off.

    Transmit checksum offload is switched off on both ends (which also disables TSO): OVS's userspace
    datapath forwards the partial checksums a veth leaves, and the receiver then drops TCP (docs/emulated-host.md).
    Userspace TSO would be ~4x faster for TCP but breaks MPLS, which the flow-id carrier may be.
    MTU 1600 leaves room for a flow-id tag (VLAN or MPLS) on full-size frames.
    One `ip` process makes the pair (`up` is taken for the first end only: the kernel refuses it for the
    peer); the rest is set in-process (netns_ops). On a failure after the pair exists it is removed.
    """
    for name in (a, b):
        if not 0 < len(name) <= 15:
            raise DatapathError(f"interface name must have 1..15 characters: {name!r}")
    where = lambda ns: ["netns", ns] if ns else []  # noqa: E731
    run(["ip", "link", "add", a, *where(a_ns), "mtu", str(mtu), "up",
         "type", "veth", "peer", "name", b, *where(b_ns), "mtu", str(mtu)])  # fmt: skip
    try:
        in_netns(a_ns, lambda: netns_ops.tx_checksum_off(a))
        in_netns(b_ns, lambda: (netns_ops.link_up(b), netns_ops.tx_checksum_off(b)))
    except BaseException:
        with contextlib.suppress(DatapathError):  # deleting one end removes both
            run(["ip", "link", "del", a], netns=a_ns, check=False)
        raise


def quiet_switch_port(ifname: str, netns: str | None) -> None:
    """A switch port is no host interface: no IPv6 link-local address, router or neighbour chatter."""
    in_netns(netns, lambda: netns_ops.disable_ipv6(ifname))


def shape(ifname: str, netns: str | None, gbps: float) -> None:
    """Cap egress of `ifname` to `gbps` with a token bucket (one direction of a full-duplex link)."""
    rate_kbit = max(1, int(gbps * 1_000_000))
    burst = max(256 * 1024, int(gbps * 1e9 / 8 / 250))  # >= 4 ms worth of bytes at rate
    run(
        ["tc", "qdisc", "replace", "dev", ifname, "root", "tbf", "rate", f"{rate_kbit}kbit",
         "burst", str(burst), "latency", "10ms"],
        netns=netns,
    )  # fmt: skip


def read_pidfile(path: Path) -> int | None:
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if pid_alive(pid) else None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); it is dead for our purposes.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def process_argv(pid: int) -> list[bytes] | None:
    """The command-line arguments of process `pid` (None when it is gone or unreadable): to tell a live PID
    from the same number reused by another program."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None


def kill_and_wait(pid: int, timeout: float = 5.0) -> bool:
    """SIGTERM, then SIGKILL after `timeout`; True once the process is gone, False (logged) when it still runs
    `timeout` after the SIGKILL (stuck in the kernel: a caller that must outlive it waits on)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
                return True
            time.sleep(0.02)
    log.warning("process %d still runs %.0f s after SIGKILL", pid, timeout)
    return False


def wait_for(
    predicate: Callable[[], T],
    timeout: float,
    what: str,
    interval: float = 0.05,
    error: type[Exception] = DatapathError,
) -> T:
    """Poll `predicate` until it returns a true value and return that; on timeout raise `error` (a test passes
    AssertionError, the CLI CliError) naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise error(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the caller binds it later: another process
    may take it meanwhile, which the caller's start-up check must catch)."""
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """`n` distinct ports as `free_port` gives one: their sockets are held open together, so two of them cannot be
    the same port (separate `free_port()` calls can be: a port just closed may be handed out again next)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def session_listens(session: int, port: int) -> bool:
    """Whether a process of the session led by pid `session` (a daemon started with start_new_session, or its
    children) listens on TCP `port`: unlike a bare connect, another program that took the port is not counted."""
    out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True).stdout
    for pid in map(int, re.findall(r"pid=(\d+)", out)):
        with contextlib.suppress(OSError):
            if os.getsid(pid) == session:
                return True
    return False


def tcp_open(port: int, host: str = "127.0.0.1") -> bool:
    """Something accepts TCP connections on host:port (0.2 s connect timeout)."""
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def set_root_sysctls() -> None:
    """Socket buffers for vswitchd's AF_PACKET sockets (fewer TCP retransmits: docs/emulated-host.md).

    Only raised, never lowered; these cannot be set inside a namespace.
    """
    for key, want in (("net.core.rmem_max", 8388608), ("net.core.rmem_default", 4194304)):
        path = Path("/proc/sys") / key.replace(".", "/")
        try:
            if int(path.read_text()) < want:
                path.write_text(str(want))
        except OSError:
            pass


def link_counters(ifname: str, netns: str | None = None) -> dict[str, int]:
    """Kernel counters of one interface: rx/tx bytes, packets, dropped (empty if it does not exist)."""
    import json

    out = run(["ip", "-j", "-s", "link", "show", "dev", ifname], netns=netns, check=False)
    try:
        stats = json.loads(out)[0]["stats64"]
    except (ValueError, IndexError, KeyError):
        return {}
    return {f"{d}_{k}": int(stats[d][k]) for d in ("rx", "tx") for k in ("bytes", "packets", "dropped")}


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime of the processes (seconds); gone processes count 0."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


def kernel_datapath_problem(sys_module: Path = Path("/sys/module/openvswitch")) -> str | None:
    """Why OVS's kernel datapath (`system`) cannot work here, or None when the openvswitch module is loaded."""
    if sys_module.exists():
        return None
    try:
        found = (
            subprocess.run(["modprobe", "-n", "openvswitch"], capture_output=True, check=False).returncode
            == 0
        )
    except OSError:  # no modprobe here
        found = False
    if found:
        return "the openvswitch kernel module is not loaded (load it: modprobe openvswitch)"
    return "this kernel has no openvswitch module (modprobe finds none)"


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` with mode 0600 (replacing any file there; no window at a wider mode): secrets
    such as the state tier's passwords."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
