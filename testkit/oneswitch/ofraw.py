"""A minimal raw OpenFlow 1.3 controller connection (plain sockets, struct): for sending bytes no library would
produce (garbage, truncated, oversized, wrong version) and reading what comes back."""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

OFP13 = 0x04
HELLO, ERROR, ECHO_REQUEST, ECHO_REPLY, FLOW_MOD, BARRIER_REQUEST, BARRIER_REPLY = 0, 1, 2, 3, 14, 20, 21


def header(mtype: int, length: int, xid: int, version: int = OFP13) -> bytes:
    return struct.pack("!BBHI", version, mtype, length, xid)


def msg(mtype: int, body: bytes = b"", xid: int = 1, version: int = OFP13) -> bytes:
    return header(mtype, 8 + len(body), xid, version) + body


def flow_mod(in_port: int, out_port: int, priority: int = 100, xid: int = 1, command: int = 0) -> bytes:
    """FLOW_MOD ADD table 0: in_port=IN -> apply-actions output:OUT (88 bytes)."""
    fixed = struct.pack(
        "!QQBBHHHIIIH2x", 0, 0, 0, command, 0, 0, priority, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0
    )
    oxm = struct.pack("!II", 0x80000004, in_port)
    match = struct.pack("!HH", 1, 4 + len(oxm)) + oxm
    match += b"\0" * (-len(match) % 8)
    action = struct.pack("!HHIH6x", 0, 16, out_port, 0xFFFF)
    instr = struct.pack("!HH4x", 4, 8 + len(action)) + action
    body = fixed + match + instr
    return header(FLOW_MOD, 8 + len(body), xid) + body


@dataclass
class Reply:
    version: int
    type: int
    xid: int
    body: bytes

    @property
    def error(self) -> tuple[int, int] | None:
        """(error type, code) of an OFPT_ERROR."""
        return struct.unpack("!HH", self.body[:4]) if self.type == ERROR and len(self.body) >= 4 else None


class Conn:
    """One connection to a switch's OpenFlow listener, as a controller: TCP to 127.0.0.1:`port`, or `sock`
    already connected (e.g. a unix socket)."""

    def __init__(self, port: int = 0, timeout: float = 10.0, sock: socket.socket | None = None):
        self.sock = sock or socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""
        self.closed = False

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def hello(self) -> Reply:
        self.send(msg(HELLO, xid=0))
        r = self.recv()
        assert r is not None and r.type == HELLO, r
        return r

    def recv(self, timeout: float = 10.0) -> Reply | None:
        """The next message, or None when the connection closed or nothing came within `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self.buf) >= 8:
                ver, mtype, length, xid = struct.unpack("!BBHI", self.buf[:8])
                if length >= 8 and len(self.buf) >= length:
                    body, self.buf = self.buf[8:length], self.buf[length:]
                    return Reply(ver, mtype, xid, body)
            left = deadline - time.monotonic()
            if left <= 0 or self.closed:
                return None
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                return None
            except OSError:
                data = b""
            if not data:
                self.closed = True
                continue
            self.buf += data

    def until(self, xid: int, mtype: int, timeout: float = 10.0) -> list[Reply]:
        """Every message up to and including the one of type `mtype` with `xid` (skips echo requests);
        stops early (without it) when the connection closes or `timeout` passes."""
        out = []
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            r = self.recv(left)
            if r is None:
                break
            if r.type == ECHO_REQUEST:
                self.send(msg(ECHO_REPLY, r.body, xid=r.xid))
                continue
            out.append(r)
            if r.xid == xid and r.type == mtype:
                break
        return out

    def close(self) -> None:
        self.sock.close()
