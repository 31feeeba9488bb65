"""Probes of what crosses the NFs while something happens to them. Run each inside a namespace
(`ip netns exec NS python -m testkit.probes ...`).

Kernel TCP connections that must survive: `server ADDR PORT SECONDS` echoes every connection it accepts until
SECONDS pass (then prints {"accepted", "peers"}); `client ADDR PORT CONNS SECONDS [--every-ms N]` opens CONNS
connections, sends each a numbered 8-byte message every N ms and expects it echoed in order; at the end it
prints one JSON line: {"conns", "broken" (reset, closed or a wrong echo), "stalled" (nothing echoed in the
last second), "max_gap_ms" (the longest time any connection went without an echo), "sent", "echoed",
"errors"}.

The path's outage, packet by packet (TCP's own retransmission timer would add to it): `udp-send ADDR PORT
SECONDS [--every-ms N]` sends a numbered datagram every N ms (default 1); `udp-sink ADDR PORT SECONDS`
prints {"received", "lost", "max_gap_ms" (the longest time between two datagrams arriving)}."""

from __future__ import annotations

import argparse
import contextlib
import json
import selectors
import socket
import struct
import sys
import time

MSG = struct.Struct("!Q")


def server(addr: str, port: int, seconds: float) -> None:
    sel = selectors.DefaultSelector()
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind((addr, port))
    lst.listen(128)
    lst.setblocking(False)
    sel.register(lst, selectors.EVENT_READ)
    peers = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for key, _ in sel.select(0.1):
            if key.fileobj is lst:
                c, peer = lst.accept()
                c.setblocking(False)
                peers.append(list(peer))
                sel.register(c, selectors.EVENT_READ)
                continue
            c = key.fileobj
            try:
                data = c.recv(65536)
            except OSError:
                data = b""
            if not data:
                sel.unregister(c)
                c.close()
                continue
            try:
                c.sendall(data)
            except OSError:
                sel.unregister(c)
                c.close()
    print(json.dumps({"accepted": len(peers), "peers": peers}), flush=True)


def client(addr: str, port: int, conns: int, seconds: float, every_ms: float) -> dict:
    socks, pending, last_echo, max_gap, sent, echoed = [], [], [], [0.0] * conns, 0, 0
    broken: set[int] = set()
    errors: list[str] = []
    for _ in range(conns):
        s = socket.create_connection((addr, port), timeout=10)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        socks.append(s)
        pending.append(bytearray())
    sel = selectors.DefaultSelector()
    for i, s in enumerate(socks):
        sel.register(s, selectors.EVENT_READ, i)
    seq_out, seq_in = [0] * conns, [0] * conns
    start = time.monotonic()
    last_echo = [start] * conns
    next_send = start
    while (now := time.monotonic()) < start + seconds:
        if now >= next_send:
            for i, s in enumerate(socks):
                if i in broken:
                    continue
                try:
                    s.send(MSG.pack(seq_out[i]))
                    seq_out[i] += 1
                    sent += 1
                except BlockingIOError:
                    pass  # the window is full (the path is down): the same number goes next time
                except OSError as exc:
                    broken.add(i)
                    errors.append(f"conn {i}: send: {exc}")
            next_send += every_ms / 1000
        for key, _ in sel.select(max(0.0, min(next_send, start + seconds) - time.monotonic())):
            i = key.data
            try:
                data = socks[i].recv(65536)
            except BlockingIOError:
                continue
            except OSError as exc:
                data, msg = b"", f"conn {i}: recv: {exc}"
            else:
                msg = f"conn {i}: closed by the peer"
            if not data:
                broken.add(i)
                errors.append(msg)
                sel.unregister(socks[i])
                continue
            pending[i] += data
            t = time.monotonic()
            while len(pending[i]) >= MSG.size:
                (n,) = MSG.unpack_from(pending[i])
                del pending[i][: MSG.size]
                if n != seq_in[i]:
                    broken.add(i)
                    errors.append(f"conn {i}: echo {n}, expected {seq_in[i]}")
                seq_in[i] = n + 1
                echoed += 1
                max_gap[i] = max(max_gap[i], t - last_echo[i])
                last_echo[i] = t
    end = time.monotonic()
    stalled = [i for i in range(conns) if i not in broken and end - last_echo[i] > 1.0]
    for s in socks:
        s.close()
    return {"conns": conns, "broken": len(broken), "stalled": len(stalled),
            "max_gap_ms": round(max(max_gap) * 1000, 1), "sent": sent, "echoed": echoed,
            "errors": errors[:10]}  # fmt: skip


def udp_send(addr: str, port: int, seconds: float, every_ms: float) -> dict:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    start, n = time.monotonic(), 0
    while (now := time.monotonic()) < start + seconds:
        with contextlib.suppress(OSError):  # no route for a moment: that datagram is lost, as on a wire
            s.sendto(MSG.pack(n), (addr, port))
        n += 1
        time.sleep(max(0.0, start + n * every_ms / 1000 - now))
    return {"sent": n}


def udp_sink(addr: str, port: int, seconds: float) -> dict:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    s.settimeout(0.2)
    deadline = time.monotonic() + seconds
    seen: set[int] = set()
    last = None
    max_gap = 0.0
    while time.monotonic() < deadline:
        try:
            data = s.recv(64)
        except TimeoutError:
            continue
        t = time.monotonic()
        if len(data) >= MSG.size:
            seen.add(MSG.unpack_from(data)[0])
        if last is not None:
            max_gap = max(max_gap, t - last)
        last = t
    top = max(seen) + 1 if seen else 0
    return {"received": len(seen), "lost": top - len(seen), "max_gap_ms": round(max_gap * 1000, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tcp_probe")
    sub = p.add_subparsers(dest="role", required=True)
    s = sub.add_parser("server")
    s.add_argument("addr")
    s.add_argument("port", type=int)
    s.add_argument("seconds", type=float)
    c = sub.add_parser("client")
    c.add_argument("addr")
    c.add_argument("port", type=int)
    c.add_argument("conns", type=int)
    c.add_argument("seconds", type=float)
    c.add_argument("--every-ms", type=float, default=20.0)
    u = sub.add_parser("udp-send")
    u.add_argument("addr")
    u.add_argument("port", type=int)
    u.add_argument("seconds", type=float)
    u.add_argument("--every-ms", type=float, default=1.0)
    k = sub.add_parser("udp-sink")
    k.add_argument("addr")
    k.add_argument("port", type=int)
    k.add_argument("seconds", type=float)
    a = p.parse_args(argv)
    if a.role == "server":
        server(a.addr, a.port, a.seconds)
    elif a.role == "client":
        print(json.dumps(client(a.addr, a.port, a.conns, a.seconds, a.every_ms)), flush=True)
    elif a.role == "udp-send":
        print(json.dumps(udp_send(a.addr, a.port, a.seconds, a.every_ms)), flush=True)
    else:
        print(json.dumps(udp_sink(a.addr, a.port, a.seconds)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
