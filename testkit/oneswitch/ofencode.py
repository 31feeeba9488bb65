"""Install many ovs-ofctl flow/group specs fast, with the OFPT_ERROR of each refused one.

`ovs-ofctl add-flow` per spec costs a process and a barrier round trip each (~15-35 ms here), and
`add-flows` stops at the first error. So: ovs-ofctl itself encodes the specs (OpenFlow 1.3, exactly as it
would send them) to a listener of ours that plays a switch and records every FLOW_MOD/GROUP_MOD; the recorded
messages then go to the real switch back to back with xids of our own, then one barrier, and each OFPT_ERROR
names its message by xid. The switch handles them in order, as it would one by one.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import tempfile
import threading
from pathlib import Path

from testkit.oneswitch import ofraw

GROUP_MOD = 15
FEATURES_REQUEST, FEATURES_REPLY = 5, 6


def _serve(srv: socket.socket, out: list[bytes], failure: list[str]) -> None:
    """Answer one ovs-ofctl connection as an OF1.3 switch that takes everything; record its mods."""
    conn, _ = srv.accept()
    buf = b""
    with conn:
        while True:
            data = conn.recv(65536)
            if not data:
                return
            buf += data
            while len(buf) >= 8:
                _, mtype, length, xid = struct.unpack("!BBHI", buf[:8])
                if len(buf) < length:
                    break
                m, buf = buf[:length], buf[length:]
                if mtype in (ofraw.FLOW_MOD, GROUP_MOD):
                    out.append(m)
                elif mtype == ofraw.HELLO:
                    conn.sendall(ofraw.header(ofraw.HELLO, 8, xid))
                elif mtype == ofraw.BARRIER_REQUEST:
                    conn.sendall(ofraw.header(ofraw.BARRIER_REPLY, 8, xid))
                elif mtype == ofraw.ECHO_REQUEST:
                    conn.sendall(ofraw.header(ofraw.ECHO_REPLY, length, xid) + m[8:])
                elif mtype == FEATURES_REQUEST:
                    body = struct.pack("!QIBB2xII", 1, 0, 254, 0, 0, 0)
                    conn.sendall(ofraw.header(FEATURES_REPLY, 8 + len(body), xid) + body)
                else:
                    failure.append(f"unexpected message type {mtype} from ovs-ofctl")
                    return


def encode(command: str, specs: list[str]) -> list[bytes]:
    """The OF1.3 messages `ovs-ofctl -O OpenFlow13 {command} SWITCH FILE` sends for `specs`, one each."""
    if not specs:
        return []
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    out: list[bytes] = []
    failure: list[str] = []
    th = threading.Thread(target=_serve, args=(srv, out, failure), daemon=True)
    th.start()
    with tempfile.TemporaryDirectory(prefix="uno-ofencode-") as d:
        path = Path(d) / "specs"
        path.write_text("\n".join(specs) + "\n")
        r = subprocess.run(
            ["ovs-ofctl", "-O", "OpenFlow13", "--no-names", command, f"tcp:127.0.0.1:{srv.getsockname()[1]}",
             str(path)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    th.join(timeout=10)
    srv.close()
    if r.returncode != 0 or failure:
        raise ValueError(f"ovs-ofctl {command}: {r.stderr.strip()[:500]} {failure}")
    if len(out) != len(specs):
        raise ValueError(f"ovs-ofctl {command}: {len(out)} messages for {len(specs)} specs")
    return out


def with_xid(m: bytes, xid: int) -> bytes:
    return m[:4] + struct.pack("!I", xid) + m[8:]


def install(port: int, msgs: list[bytes], timeout: float = 600) -> dict[int, tuple[int, int]]:
    """Send `msgs` (in order, xid = index + 1) to the OpenFlow listener at 127.0.0.1:`port`, then a barrier;
    returns {index: (error type, code)} of those refused."""
    c = ofraw.Conn(port, timeout=timeout)
    try:
        c.hello()
        c.send(b"".join(with_xid(m, i + 1) for i, m in enumerate(msgs)))
        barrier = len(msgs) + 1
        c.send(ofraw.msg(ofraw.BARRIER_REQUEST, xid=barrier))
        got = c.until(barrier, ofraw.BARRIER_REPLY, timeout=timeout)
    finally:
        c.close()
    if not got or got[-1].type != ofraw.BARRIER_REPLY:
        raise TimeoutError(f"no barrier reply after {len(msgs)} messages")
    return {r.xid - 1: r.error for r in got if r.error is not None and 1 <= r.xid <= len(msgs)}  # type: ignore[misc]
