"""What a hop in front of OVS costs OVS: vswitchd's CPU per rule against the client's turnaround.

A plain OVS bridge (own instance, as in `uno bench oneswitch`) gets N x (FLOW_MOD + BARRIER, wait for the reply)
from a raw client on its unix listener; after each reply the client waits G microseconds (busy, so the client
itself adds no wake-up) before the next rule, as a relay or OneSwitch between controller and switch does (its
own hop to the controller and back). For each G: the round trip per rule, vswitchd's CPU per rule (/proc) and its
main thread's sleeps per rule (voluntary context switches). With G = 0 vswitchd finds the next rule before its
main loop ends and handles several per wake-up; with a gap it sleeps and wakes once per rule, and a wake-up of a
netdev vswitchd (poll every port, run the ofproto, wake its revalidator and RCU threads) costs far more CPU than
the rule itself.

    .venv/bin/python -m bench.oneswitch.paced [--rules 2000] [--gaps 0,25,50,100,200,400] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import time
import uuid
from pathlib import Path

from bench.common import final_json, median, print_machine, tree_cpu_seconds
from bench.oneswitch.rate import Side, rate_flow_mods
from testkit.oneswitch import ofraw
from testkit.oneswitch.refswitch import RefSwitch


def main_thread_sleeps(pid: int) -> int:
    """Voluntary context switches of the process's main thread (vswitchd's main loop sleeps in poll)."""
    for line in Path(f"/proc/{pid}/task/{pid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    return 0


def paced(side: Side, pid: int, msgs: list[bytes], gap_us: float) -> dict[str, float]:
    """msgs one by one, each with a barrier, waiting for its reply and then `gap_us`; per rule figures."""
    c = side.connect()
    try:
        c.hello()
        c.send(ofraw.msg(ofraw.FLOW_MOD, struct.pack("!QQBBHHHIIIH2x", 0, 0, 0xFF, 3, 0, 0, 0, *[0xFFFFFFFF] * 3, 0)
                         + struct.pack("!HH4x", 1, 4), xid=1) + ofraw.msg(ofraw.BARRIER_REQUEST, xid=2))  # fmt: skip
        assert c.until(2, ofraw.BARRIER_REPLY)[-1].type == ofraw.BARRIER_REPLY
        cpu0, sleeps0, t0 = tree_cpu_seconds([pid]), main_thread_sleeps(pid), time.perf_counter()
        for i, m in enumerate(msgs):
            c.send(m + ofraw.msg(ofraw.BARRIER_REQUEST, xid=0x100000 + i))
            got = c.until(0x100000 + i, ofraw.BARRIER_REPLY)
            assert got and got[-1].type == ofraw.BARRIER_REPLY and all(r.type != ofraw.ERROR for r in got), (
                got
            )
            end = time.perf_counter() + gap_us / 1e6
            while time.perf_counter() < end:
                pass
        secs = time.perf_counter() - t0
        n = len(msgs)
        return {
            "round_trip_us": secs / n * 1e6 - gap_us,
            "vswitchd_cpu_us": (tree_cpu_seconds([pid]) - cpu0) / n * 1e6,
            "vswitchd_sleeps": (main_thread_sleeps(pid) - sleeps0) / n,
        }
    finally:
        c.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rules", type=int, default=2000)
    ap.add_argument("--gaps", default="0,25,50,100,200,400", help="client turnarounds to try, microseconds")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    gaps = [float(g) for g in args.gaps.split(",")]
    print_machine()
    ref = RefSwitch("p" + uuid.uuid4().hex[:5], [1, 2], base=Path("/run/uno-bench"))
    try:
        ref.up()
        side = Side("ovs", f"unix:{ref.sw.endpoint.unix_socket}")
        pid = ref.sw.ovs.pids()["ovs-vswitchd"]
        msgs = [m for m in rate_flow_mods(args.rules, 7)]
        runs: dict[float, list[dict]] = {g: [] for g in gaps}
        for rep in range(args.repeats):
            for g in gaps if rep % 2 == 0 else gaps[::-1]:
                runs[g].append(paced(side, pid, msgs, g))
        out = {}
        for g, rs in runs.items():
            out[str(int(g))] = {k: round(median([r[k] for r in rs]), 2) for k in rs[0]}
            print(
                f"  gap {g:5.0f} us: " + ", ".join(f"{k} {v}" for k, v in out[str(int(g))].items()),
                flush=True,
            )
        print(f"load1 at the end: {os.getloadavg()[0]:.2f}")
        final_json({"by_gap_us": out})
        return 0
    finally:
        ref.down()


if __name__ == "__main__":
    sys.exit(main())
