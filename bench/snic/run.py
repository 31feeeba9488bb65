"""The sNIC as its own machine: NF starts through its agent, an NF's failover, a whole sNIC's death.

On an emulated host with the agent in-process (testkit.testbed) and its defaults (failover watchdog every
50 ms, sNIC heartbeat every 10 ms with a 40 ms timeout, one warm slot per location):

- start_ms: an NF instance started on snic0 through its sNIC agent (the REST call, the agent's start in a
  warm slot, the NF's /health), median over `--starts` starts; `start_cold_ms` with no slot left.
- nf_failover_ms: an NF instance killed with SIGKILL (a firewall, on the host and on snic0) under a datagram
  per ms through it: the longest gap at the receiver (the path's outage: exit seen, replacement started, port
  remapped), median over the kills; per location beside it.
- snic_failover_ms, broken_conns, lost_state: two sNICs; a firewall and a NAT on snic0 between vm0 and the wire
  behind snic1, a firewall on snic0 between vm1 and vm2; 6 kernel TCP connections and a datagram per ms along
  each chain; snic0 killed whole (agent, OVS and NFs at once). snic_failover_ms: the longest datagram gap
  (median over repeats, the worst chain of each); broken_conns: TCP connections reset, closed or stalled (a
  lost NAT mapping or firewall record would break them); lost_state: per-flow records of the three NFs in
  Redis before the death and gone after (only the repeat's own flows: an earlier repeat's records expire by
  their NFs' timeouts whenever they are due); snic_detect_ms: from the kill to the heartbeat watch's verdict
  (median). snic0 is brought back between repeats (its NFs moved back, checked in OneSwitch's map).

- false_deaths: both sNICs healthy while `--hogs` busy processes load the machine and `--threads` busy threads
  the agent's own process (the interpreter lock) for `--load-seconds`: the
  heartbeat watch's death verdicts with the default `--snic-confirm-ms 300` (each is false), beside
  false_deaths_confirm_0, the old verdict (a HELLO probe that misses its 20 ms is a death at once).

    ./uno bench snic [--quick] [--repeats N] [--starts N] [--load-seconds S] [--hogs N] [--threads N]
        [--only-load]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import final_json, median, print_machine  # noqa: E402
from domain.model import Nf  # noqa: E402
from migration.failover import DetectorConfig  # noqa: E402
from nf_runtime.snic_client import SnicWatch  # noqa: E402
from testkit.poll import wait  # noqa: E402
from testkit.tcp_chain import NAT, End, TcpChain, add_chains, fw_tcp, run  # noqa: E402
from testkit.testbed import Testbed  # noqa: E402

NFS = ("fw", "nat", "fw2")


def starts(n: int) -> dict:
    """`n` starts of a firewall on snic0 through its agent, each stopped again: with a warm slot (the agent
    refills its one slot between starts) and cold (no slot)."""
    out = {"slot": [], "cold": []}
    for slots, key in ((1, "slot"), (0, "cold")):
        with Testbed(warm_slots=slots) as tb:
            remote = tb.runtime.remote["snic0"]
            fw = Nf(
                id="fw", type="firewall", config=fw_tcp(0), vport=0, expected_gbps=0.1, src=None, dst=None
            )
            for i in range(n):
                if slots:
                    wait(
                        lambda r=remote: any(p["kind"] == "slot" for p in r.client.ports()), 30, "a warm slot"
                    )
                inst = remote.new_instance(fw, "snic0", 100 + i, set())
                t0 = time.monotonic()
                remote.start(fw, inst)
                out[key].append((time.monotonic() - t0) * 1000)
                remote.stop(inst)
    return {k: round(median(v), 1) for k, v in out.items()}


def nf_failovers(repeats: int) -> dict[str, list[float]]:
    """Per location: the datagram outage (ms) of each kill -9 of the firewall there."""
    out: dict[str, list[float]] = {}
    for where in ("host", "snic0"):
        with Testbed(warm_slots=1) as tb:
            chain = TcpChain(0, End("wire"), [("fw", "firewall", fw_tcp(0), where)])
            add_chains(tb, [chain])
            tb.start_watchdog(DetectorConfig(interval_s=0.05))
            for r in range(repeats):
                udp: list[dict] = []

                def kill() -> None:
                    os.kill(tb.agent.state.nfs["fw"].instances[0].pid, signal.SIGKILL)

                [tcp] = run(tb, [chain], conns=2, seconds=4, during=kill, port=5600 + 10 * r, udp=udp)
                out.setdefault(where, []).append(udp[0]["max_gap_ms"])
                print(f"  kill -9 of fw on {where}: outage {udp[0]['max_gap_ms']} ms, tcp {tcp['broken']} broken",
                      flush=True)  # fmt: skip
                time.sleep(1.0)  # the warm slot refilled
    return out


def flow_records(tb: Testbed) -> set[str]:
    import redis

    r = redis.Redis(host="127.0.0.1", port=tb.host.status()["redis"]["port"])
    try:
        return {k.decode() for nf in NFS for k in r.scan_iter(f"tn:default:nf:{nf}:{{*", count=1000)}
    finally:
        r.close()


def snic_deaths(repeats: int) -> list[dict]:
    rows = []
    with Testbed(warm_slots=1, snics=2, vms=3) as tb:
        chains = [
            TcpChain(
                0,
                End("wire", 1, 0),
                [("fw", "firewall", fw_tcp(0), "snic0"), ("nat", "nat", NAT, "snic0")],
                nat=True,
            ),  # fmt: skip
            TcpChain(1, End("vm", 2), [("fw2", "firewall", fw_tcp(1), "snic0")]),
        ]
        add_chains(tb, chains)
        tb.start_watchdog()
        for r in range(repeats):
            udp: list[dict] = []
            seen: dict = {}

            def die(seen: dict = seen) -> None:
                seen["before"] = flow_records(tb)
                seen["t0"] = time.monotonic()
                tb.host.snic("snic0").kill()
                wait(
                    lambda: any(h["event"] == "snic-dead" for h in tb.agent.state.history[-20:]),
                    10,
                    "the death",
                )
                time.sleep(0.5)
                seen["after"] = flow_records(tb)

            # Records of earlier repeats' flows expire by their NFs' timeouts (closed TCP 10 s, unreplied UDP 30 s)
            # whenever they are due: only this repeat's flows (records new since here) are the death's to keep.
            seen["old"] = flow_records(tb)
            tcp = run(tb, chains, conns=6, seconds=6, during=die, port=5700 + 10 * r, udp=udp)
            ev = next(h for h in reversed(tb.agent.state.history) if h["event"] == "snic-dead")
            watch = next(w for w in tb.runtime.watches if w.remote.snic == "snic0")
            row = {
                "outage_ms": max(u["max_gap_ms"] or 0 for u in udp),
                "detect_ms": round((watch.died_at - seen["t0"]) * 1000, 1),
                "agent_ms": ev["total_ms"],
                "broken": sum(t["broken"] + t["stalled"] for t in tcp),
                "lost_state": len(seen["before"] - seen["old"] - seen["after"]),
                "failed_over": len(ev["failed_over"]),
            }
            rows.append(row)
            print(f"  snic0 dead: {row}", flush=True)
            # snic0 comes back; its NFs go back to it for the next repeat
            tb.host.snic("snic0").up()
            wait(lambda: "snic0" not in tb.agent.ctx.down, 60, "snic0 back")
            for nf_id in NFS:
                tb.agent.migrate(tb.agent.state.nfs[nf_id], "snic0")
            mapped = tb.agent.ctx.mapper.mapped()
            for nf in tb.agent.state.nfs.values():  # the next death is measured on NFs that run on snic0
                if nf.location != "snic0" or mapped.get(nf.vport) != (
                    nf.instances[0].switch,
                    nf.instances[0].ofport,
                ):
                    raise RuntimeError(
                        f"{nf.id} is not back on snic0: {nf.location}, mapped {mapped.get(nf.vport)}"
                    )
            time.sleep(1.0)
    return rows


def false_deaths(seconds: float, hogs: int, threads: int) -> dict[str, int]:
    """Two healthy sNICs for `seconds`, the machine loaded by `hogs` busy processes and the agent's own process
    by `threads` busy Python threads (they hold the interpreter lock the watch thread needs, as a busy agent's
    own work does): death verdicts of the heartbeat watch with the old verdict (a silent HELLO probe is death
    at once: confirm 0) and the default (300 ms of silence), each watching both sNICs side by side. Every
    verdict here is a false one."""
    out = {"confirm_0": 0, "confirm_300": 0}
    with Testbed(warm_slots=0, snics=2, vms=1) as tb:
        watches = []
        for confirm in (0, 300):
            for sid, remote in tb.runtime.remote.items():
                w = SnicWatch(remote, tb.runtime.access[sid].openflow, None, lambda *_: None, lambda *_: None,
                              confirm_ms=confirm)  # fmt: skip

                def dead(sid: str, key: str = f"confirm_{confirm}", w: SnicWatch = w) -> None:
                    out[key] += 1
                    print(f"  {key}: {sid} declared dead: {w.verdict}", flush=True)

                w.on_dead = dead
                watches.append(w.start())
        procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(hogs)]
        stop = threading.Event()

        def spin() -> None:
            n = 0
            while not stop.is_set():
                n += 1

        spinners = [threading.Thread(target=spin, daemon=True) for _ in range(threads)]
        for t in spinners:
            t.start()
        try:
            time.sleep(seconds)
        finally:
            stop.set()
            for t in spinners:
                t.join()
            for p in procs:
                p.kill()
                p.wait()
            for w in watches:
                w.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 of each, about a minute and a half")
    ap.add_argument("--repeats", type=int, help="kills and deaths per part (default 5; --quick 3)")
    ap.add_argument("--starts", type=int, help="starts per mode (default 10; --quick 5)")
    ap.add_argument(
        "--load-seconds", type=float, help="false deaths under load: seconds (default 60; --quick 20)"
    )
    ap.add_argument("--hogs", type=int, default=4, help="busy processes for the load part (default 4)")
    ap.add_argument("--threads", type=int, default=8, help="busy threads in the agent's process (default 8)")
    ap.add_argument("--only-load", action="store_true", help="run only the false-deaths-under-load part")
    a = ap.parse_args()
    repeats = a.repeats or (3 if a.quick else 5)
    n_starts = a.starts or (5 if a.quick else 10)
    if not 1 <= repeats <= 50 or not 1 <= n_starts <= 100:
        ap.error("--repeats must be in [1, 50] and --starts in [1, 100]")
    load_s = a.load_seconds if a.load_seconds is not None else (20 if a.quick else 60)
    if not 1 <= load_s <= 3600 or not 0 <= a.hogs <= 256 or not 0 <= a.threads <= 64:
        ap.error("--load-seconds must be in [1, 3600], --hogs in [0, 256] and --threads in [0, 64]")
    print_machine()
    print(f"false sNIC deaths under load ({a.hogs} busy processes, {a.threads} busy threads, {load_s:g} s)",
          flush=True)  # fmt: skip
    fd = false_deaths(load_s, a.hogs, a.threads)
    print(f"  verdicts on healthy sNICs: {fd}", flush=True)
    if a.only_load:
        final_json({"false_deaths_confirm_0": fd["confirm_0"], "false_deaths": fd["confirm_300"],
                    "load_seconds": load_s, "hogs": a.hogs, "threads": a.threads})  # fmt: skip
        return 0
    print("starts through the sNIC agent", flush=True)
    st = starts(n_starts)
    print(f"  median: {st['slot']} ms with a warm slot, {st['cold']} ms cold", flush=True)
    print("NF failover (kill -9, default settings)", flush=True)
    fo = nf_failovers(repeats)
    print("whole sNIC death (agent, OVS and NFs at once)", flush=True)
    deaths = snic_deaths(repeats)
    final_json({
        "start_ms": st["slot"], "start_cold_ms": st["cold"],
        "nf_failover_ms": round(median([x for v in fo.values() for x in v]), 1),
        "nf_failover_ms_by_location": {k: round(median(v), 1) for k, v in fo.items()},
        "snic_failover_ms": round(median([d["outage_ms"] for d in deaths]), 1),
        "snic_failover_agent_ms": round(median([d["agent_ms"] for d in deaths]), 1),
        "snic_detect_ms": round(median([d["detect_ms"] for d in deaths]), 1),
        "broken_conns": sum(d["broken"] for d in deaths),
        "lost_state": sum(d["lost_state"] for d in deaths),
        "repeats": repeats, "starts": n_starts,
        "false_deaths_confirm_0": fd["confirm_0"], "false_deaths": fd["confirm_300"], "load_seconds": load_s,
    })  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
