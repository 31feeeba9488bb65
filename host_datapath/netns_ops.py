"""Interface settings made in-process inside a named network namespace (`ip netns add` / /run/netns/NAME).

`ip netns exec NS cmd` costs a process (or two) plus a remount of /sys per call, and attaching an NF takes
several such settings. Here a short-lived thread enters the
namespace with setns(2) (it changes only that thread's namespace; the thread ends right after) and sets the
interfaces with the plain ioctls and /proc/sys writes the tools would make: link up (SIOCSIFFLAGS), transmit
checksum offload off (SIOCETHTOOL ETHTOOL_STXCSUM, which the kernel applies to the same feature group as
`ethtool -K IF tx off`, so TSO goes too) and `net.ipv6.conf.IF.*` (the /proc/sys/net tree a thread sees is
its own namespace's). Python 3.11 has no os.setns: libc's is called through ctypes.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import socket
import struct
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

NETNS_DIR = Path("/run/netns")
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, SIOCETHTOOL = 0x8913, 0x8914, 0x8946
ETHTOOL_STXCSUM = 0x17
IFF_UP = 0x1
IFREQ_SIZE = 40  # sizeof(struct ifreq) on 64-bit Linux

_libc = ctypes.CDLL(None, use_errno=True)


def netns_path(netns: str) -> Path:
    """The bind mount `ip netns add` made for `netns` (ValueError for a name that is no plain file name)."""
    if not netns or "/" in netns or netns in (".", "..") or "\0" in netns:
        raise ValueError(f"invalid network namespace name: {netns!r}")
    return NETNS_DIR / netns


def netns_exists(netns: str) -> bool:
    """`netns` was made by `ip netns add` (False for an invalid name)."""
    try:
        return netns_path(netns).exists()
    except ValueError:
        return False


def enter_netns_fd(fd: int) -> None:
    """setns(fd, CLONE_NEWNET) for the calling thread."""
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def in_netns(netns: str, fn: Callable[[], T]) -> T:
    """Run `fn()` in a new thread that entered network namespace `netns`; its result, or its exception
    (raised again in the caller's thread)."""
    path = netns_path(netns)
    box: dict[str, object] = {}

    def body() -> None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                enter_netns_fd(fd)
            finally:
                os.close(fd)
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
            box["error"] = exc

    t = threading.Thread(target=body, name=f"uno-netns-{netns}", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


# -- operations for `in_netns` (they act on the calling thread's namespace) ------------------------------------
def _ifreq(ifname: str, tail: bytes) -> bytearray:
    name = ifname.encode()
    if not 0 < len(name) <= 15 or b"\0" in name:
        raise ValueError(f"invalid interface name: {ifname!r}")
    return bytearray(struct.pack("16s", name) + tail.ljust(IFREQ_SIZE - 16, b"\0"))


def _ioctl(sock: socket.socket, request: int, ifname: str, tail: bytes) -> bytearray:
    buf = _ifreq(ifname, tail)
    try:
        fcntl.ioctl(sock.fileno(), request, buf)
    except OSError as exc:
        raise OSError(exc.errno, f"{ifname}: {os.strerror(exc.errno or 0)}") from None
    return buf


def link_present(ifname: str) -> bool:
    """The interface exists (in the calling thread's namespace)."""
    try:
        socket.if_nametoindex(ifname)
    except OSError:
        return False
    return True


def link_up(ifname: str) -> None:
    """`ip link set IF up`."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack_from("H", _ioctl(s, SIOCGIFFLAGS, ifname, b""), 16)[0]
        if not flags & IFF_UP:
            _ioctl(s, SIOCSIFFLAGS, ifname, struct.pack("H", flags | IFF_UP))


def _ethtool_value(s: socket.socket, ifname: str, cmd: int, data: int = 0) -> int:
    """One `struct ethtool_value` command; the value the kernel left in it."""
    val = ctypes.create_string_buffer(struct.pack("II", cmd, data), 8)
    _ioctl(s, SIOCETHTOOL, ifname, struct.pack("P", ctypes.addressof(val)))  # ifr_data points at `val`
    return struct.unpack("II", val.raw)[1]


def tx_checksum_off(ifname: str) -> None:
    """`ethtool -K IF tx off`: transmit checksum offload off (the kernel then drops TSO, which needs it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        _ethtool_value(s, ifname, ETHTOOL_STXCSUM, 0)


def disable_ipv6(ifname: str) -> None:
    """`sysctl net.ipv6.conf.IF.disable_ipv6=1`; nothing to do on a kernel without IPv6."""
    if not link_present(ifname):
        raise OSError(errno.ENODEV, f"{ifname}: no such device")
    try:
        with open(f"/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6", "w") as f:
            f.write("1")
    except FileNotFoundError:
        if os.path.exists("/proc/sys/net/ipv6"):
            raise
