"""Capture UDP (source port, destination port) pairs on an interface until it is idle, run inside the
namespace: `ip netns exec NS python -m testkit.udp_capture IFACE OUT [IDLE_MS] [TOTAL_S]`. Writes them as
JSON [[sport, dport], ...] to OUT; prints {"ready": true} once it listens. Which probe packets got through:
the offload bench and its end-to-end test."""

from __future__ import annotations

import json
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
SO_RCVBUFFORCE = 33


def main(argv: list[str]) -> int:
    iface, out = argv[0], argv[1]
    idle = float(argv[2]) / 1000 if len(argv) > 2 else 1.5
    total = float(argv[3]) if len(argv) > 3 else 120.0
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, 256 << 20)
    s.bind((iface, 0))
    s.settimeout(0.2)
    print(json.dumps({"ready": True}), flush=True)
    seen: set[tuple[int, int]] = set()
    start = last = time.monotonic()
    frames = 0
    while True:
        now = time.monotonic()
        if now - start > total or (frames and now - last > idle):
            break
        try:
            data, addr = s.recvfrom(2048)
        except TimeoutError:
            continue
        if (
            addr[2] == socket.PACKET_OUTGOING
            or len(data) < 42
            or data[12:14] != b"\x08\x00"
            or data[23] != 17
        ):
            continue
        ihl = (data[14] & 15) * 4
        sport, dport = struct.unpack_from("!HH", data, 14 + ihl)
        seen.add((sport, dport))
        frames += 1
        last = time.monotonic()
    with open(out, "w") as f:
        json.dump(sorted(seen), f)
    print(json.dumps({"frames": frames, "pairs": len(seen)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
