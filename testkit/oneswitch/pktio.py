"""Raw Ethernet I/O at interfaces inside network namespaces, from this process (no helper processes).

A socket keeps the network namespace it was created in: we enter the namespace (setns, this thread only),
open an AF_PACKET socket bound to the interface, and come back. The kernel takes the outermost VLAN tag off
every received frame (skb_vlan_untag, whatever the offload settings) and hands it over as PACKET_AUXDATA:
we put it back, so a frame's bytes are exactly those on the wire.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import socket
import struct
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

CLONE_NEWNET = 0x40000000
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
SOL_PACKET, PACKET_AUXDATA = 263, 8
TP_STATUS_VLAN_VALID, TP_STATUS_VLAN_TPID_VALID = 0x10, 0x40
_AUX = struct.Struct("IIIHHHH")  # struct tpacket_auxdata
_libc = ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def in_netns(netns: str) -> Iterator[None]:
    """Run the block in network namespace `netns` (the calling thread only)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{netns}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns({netns})")
        try:
            yield
        finally:
            if _libc.setns(own, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back to our namespace")
    finally:
        os.close(own)
        os.close(target)


def quiet_endpoint(netns: str, ifname: str) -> None:
    """No VLAN offload (tags stay in the bytes), no IPv6 chatter (router solicitations, MLD) on `ifname`."""
    subprocess.run(
        ["ip", "netns", "exec", netns, "ethtool", "-K", ifname, "rxvlan", "off", "txvlan", "off"],
        capture_output=True,
    )
    subprocess.run(
        ["ip", "netns", "exec", netns, "sysctl", "-qw", f"net.ipv6.conf.{ifname}.disable_ipv6=1"],
        capture_output=True,
    )
    subprocess.run(["ip", "-n", netns, "link", "set", ifname, "up"], check=True)


@dataclass
class Endpoint:
    """Interface `ifname` in namespace `netns`, where frames enter and leave one (virtual) switch port."""

    netns: str
    ifname: str
    sock: socket.socket | None = field(default=None, repr=False)

    def open(self) -> Endpoint:
        if self.sock is None:
            quiet_endpoint(self.netns, self.ifname)
            with in_netns(self.netns):
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
                s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
                s.bind((self.ifname, 0))
            s.setblocking(False)
            self.sock = s
        return self

    def send(self, frame: bytes) -> None:
        assert self.sock is not None
        self.sock.send(frame)

    def drain(self) -> list[bytes]:
        """Frames received since the last call (those we sent ourselves are skipped)."""
        out = []
        assert self.sock is not None
        while True:
            try:
                data, anc, _, addr = self.sock.recvmsg(65535, socket.CMSG_SPACE(_AUX.size))
            except BlockingIOError:
                return out
            if addr[2] != PACKET_OUTGOING:
                out.append(with_vlan(data, anc))

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def with_vlan(data: bytes, ancillary: list) -> bytes:
    """The frame with the VLAN tag the kernel took off (PACKET_AUXDATA) put back after the MAC addresses."""
    for level, kind, raw in ancillary:
        if level == SOL_PACKET and kind == PACKET_AUXDATA and len(raw) >= _AUX.size:
            status, _, _, _, _, tci, tpid = _AUX.unpack_from(raw)
            if status & TP_STATUS_VLAN_VALID:
                tpid = tpid if status & TP_STATUS_VLAN_TPID_VALID else 0x8100
                return data[:12] + struct.pack("!HH", tpid, tci) + data[12:]
    return data


def collect(
    endpoints: dict[object, list[Endpoint]], quiet: float = 0.6, limit: float = 15.0
) -> list[tuple[object, bytes]]:
    """(key, frame) for every frame received on any endpoint until nothing arrived for `quiet` seconds."""
    socks = {ep.sock: key for key, eps in endpoints.items() for ep in eps}
    eps = {ep.sock: ep for key_eps in endpoints.values() for ep in key_eps}
    got: list[tuple[object, bytes]] = []
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        ready, _, _ = select.select(list(socks), [], [], quiet)
        if not ready:
            break
        for s in ready:
            got += [(socks[s], f) for f in eps[s].drain()]
    return got


def marked_frame(magic: bytes, pid: int, src_mac: str, dst_ip: str = "10.9.9.9", dport: int = 4243) -> bytes:
    """A UDP frame whose payload carries `magic` and the id `pid` (found again by `marked_arrivals`)."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    return bytes(
        Ether(src=src_mac, dst="02:00:00:00:09:09")
        / IP(src="10.7.0.1", dst=dst_ip)
        / UDP(sport=4242, dport=dport)
        / Raw(magic + struct.pack("!I", pid) + b"x" * 20)
    )


def marked_arrivals(endpoints: dict[str, Endpoint], magic: bytes) -> dict[int, list[str]]:
    """Per id of a `marked_frame` with `magic`: the endpoints it arrived at (until 0.8 s of quiet)."""
    got: dict[int, list[str]] = {}
    for key, f in collect({k: [ep] for k, ep in endpoints.items()}, quiet=0.8):
        i = f.find(magic)
        if i >= 0:
            got.setdefault(struct.unpack_from("!I", f, i + len(magic))[0], []).append(str(key))
    return got


def ofctl13_run(
    target: str, *args: str, stdin: str | None = None, names: bool = True
) -> subprocess.CompletedProcess:
    """`ovs-ofctl -O OpenFlow13 COMMAND TARGET ARGS...` (args[0] is the command), not checked: for refusals.

    ``names=False`` passes ``--no-names`` (ports as numbers); ``stdin`` feeds a ``-`` file argument.
    """
    cmd = ["ovs-ofctl", "-O", "OpenFlow13", *([] if names else ["--no-names"]), args[0], target, *args[1:]]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=60)


def ofctl13(target: str, *args: str, stdin: str | None = None, names: bool = True) -> str:
    """As `ofctl13_run`, asserting success; its output."""
    r = ofctl13_run(target, *args, stdin=stdin, names=names)
    assert r.returncode == 0, f"ovs-ofctl {args}: {r.stderr}"
    return r.stdout
