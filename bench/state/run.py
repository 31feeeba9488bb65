"""The state tier as a Redis Cluster: throughput beside the single local Redis, a master's failover under
traffic, updates lost across it with and without replica acknowledgement, TCP through the NAT, tenants.

Emulated hosts with the agent in-process (testkit.testbed), all up at once so the runs alternate:

- pps_single / pps_cluster[_6]: a firewall on the host, state in one local Redis (unix socket) or in a local
  Redis Cluster of 3 (and, without --quick, 6) masters with a replica each; `traffic gen` sends `--flows`
  new UDP flows from the VM to the wire at an offered rate above what the NF forwards; the NF's rate is the
  packets the sink got over its receive span. Median over `--repeats` alternating runs;
  ratio_cluster_vs_single = median cluster / median single (same run).
- master_failover_ms: on the 3-master cluster, a firewall with one connection open (its one record, so its
  master is known); the wire side sends 1 packet per ms on it and that master is killed with SIGKILL: every
  packet lost is a ms in which the NF did not forward (fail closed: kill -> the cluster fails the master
  over to its replica -> the NF's client follows the new slot owner).
- broken_conns, tcp_max_gap_ms: a firewall and a NAT between vm0 and the wire, 6 kernel TCP connections; the
  master holding most keys is killed with SIGKILL; connections reset, closed or stalled, and the longest gap
  of an echoed message (TCP's retransmission backoff stretches the outage).
- lost_updates_wait / lost_updates_nowait: the bench's own sequence: a writer sets key i (one hash slot of a
  master) as fast as it can, through redis-py's cluster client, and counts i as acknowledged when SET
  answered (nowait) or SET answered and WAIT 1 confirmed a replica has it (wait: what an NF's
  `--store-wait 1` does per batch); that master is killed mid-stream; after the failover every acknowledged
  key is read back: the missing ones are lost updates. The dead node is started again (`uno up`) between,
  and every replica is back in sync before the next kill.
- cross_tenant: tenant ta's ACL user reading and writing tenant tb's keys: "denied" when the server answers
  NOPERM to both.

    ./uno bench state [--quick] [--repeats N] [--flows N]
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import redis  # noqa: E402

from bench.common import final_json, median, print_machine  # noqa: E402
from state_tier.access import Credentials, node_client, tier_client  # noqa: E402
from testkit.live import burst, next_run  # noqa: E402
from testkit.tcp_chain import NAT, End, TcpChain, add_chains, fw_tcp, run  # noqa: E402
from testkit.testbed import EST_PORT, FW_CONFIG, Testbed, report  # noqa: E402

RUNDIR = "/run/uno-bench"


def log(msg: str) -> None:
    print(f"state: {msg}", file=sys.stderr, flush=True)


def cluster(masters: int) -> dict:
    return {"mode": "cluster", "masters": masters, "replicas": 1}


def pps(tb: Testbed, flows: int, pkts: int) -> float:
    """Packets per second the firewall forwarded of `pkts` per flow offered over `flows` new flows."""
    r = next_run()
    sink = tb.sink("out", r, expect=flows * pkts, idle_ms=1500, duration_ms=120_000)
    report(tb.gen("vm", r, flows=flows, pkts=pkts, rate=200_000, dst_port=6000 + r % 1000), timeout=300)
    got = report(sink, timeout=300)
    return got["received"] / got["rx_span_s"] if got["rx_span_s"] else 0.0


def throughput(beds: dict[str, Testbed], repeats: int, flows: int, pkts: int) -> dict[str, float]:
    runs: dict[str, list[float]] = {k: [] for k in beds}
    for i in range(repeats):
        for name, tb in beds.items():
            runs[name].append(pps(tb, flows, pkts))
            log(f"repeat {i + 1}/{repeats}: {name} {runs[name][-1]:.0f} pps")
    return {k: median(v) for k, v in runs.items()}


def _admin(tb: Testbed) -> Credentials:
    return tb.host.tier().admin


def _busiest_master(tb: Testbed) -> dict:
    """The master node (status entry) holding most keys."""
    masters = [n for n in tb.host.status()["redis"]["nodes"] if n["role"] == "master" and not n["failed"]]
    counts = {}
    for n in masters:
        c = node_client(n["address"], _admin(tb))
        try:
            counts[n["address"]] = c.dbsize()
        finally:
            c.close()
    return max(masters, key=lambda n: counts[n["address"]])


def _heal(tb: Testbed) -> None:
    """Start the killed node again (it rejoins as a replica) and wait until every replica is in sync with its
    master (a replica promoted before its full resync would have none of the data)."""
    tb.host.up()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        nodes = tb.host.status()["redis"]["nodes"]
        replicas = [n for n in nodes if n["role"] == "replica" and not n["failed"]]
        if len(replicas) == len(nodes) // 2 and all(_synced(tb, n["address"]) for n in replicas):
            return
        time.sleep(0.5)
    raise RuntimeError("the cluster did not heal")


def _synced(tb: Testbed, address: str) -> bool:
    c = node_client(address, _admin(tb))
    try:
        info = c.info("replication")
        return info.get("master_link_status") == "up" and not info.get("master_sync_in_progress")
    except (redis.RedisError, OSError):
        return False
    finally:
        c.close()


def failover_outage(tb: Testbed, seconds: float) -> float:
    """ms one flow through a firewall is not forwarded across a SIGKILL of the master serving its record: a
    fresh firewall, one connection opened, its one record's master found; the wire side sends 1 packet per
    ms on it; the master is killed after 1 s; every packet lost is a ms of outage (fail closed)."""
    tb.add_nf("fwf", "firewall", FW_CONFIG, at="host")
    assert burst(tb, "vm", EST_PORT)["received"] == 50
    c = tier_client(tb.host.tier().component.topology(), _admin(tb))
    try:
        [key] = list(c.scan_iter("tn:default:nf:fwf:{*}:fw", count=1000))
        owner = c.get_node_from_key(key)
    finally:
        c.close()
    victim = next(
        n for n in tb.host.status()["redis"]["nodes"] if n["address"] == f"{owner.host}:{owner.port}"
    )
    r = next_run()
    n = int(seconds * 1000)
    sink = tb.sink("vm", r, expect=n, idle_ms=3000, duration_ms=n + 30_000)
    gen = tb.gen("out", r, flows=1, pkts=n, rate=1000, dst_port=EST_PORT)
    time.sleep(1.0)
    os.kill(victim["pid"], signal.SIGKILL)
    report(gen, timeout=seconds + 60)
    got = report(sink, timeout=seconds + 60)
    log(f"outage: killed {victim['address']} (the flow's master); sink {got}")
    tb.agent.delete_nf("fwf")
    _heal(tb)
    return float(got["lost"])


def failover_tcp(tb: Testbed, seconds: float) -> tuple[float, int]:
    chain = TcpChain(
        0, End("wire"), [("fw", "firewall", fw_tcp(0), "host"), ("nat", "nat", NAT, "host")], nat=True
    )
    add_chains(tb, [chain])
    killed = {}

    def kill() -> None:
        victim = _busiest_master(tb)
        killed.update(victim)
        os.kill(victim["pid"], signal.SIGKILL)

    [rep] = run(tb, [chain], conns=6, seconds=seconds, during=kill)
    log(f"tcp through the NAT: killed {killed.get('address')} (most keys); {rep}")
    for nf_id in ("fw", "nat"):
        tb.agent.delete_nf(nf_id)
    _heal(tb)
    return float(rep.get("max_gap_ms") or float("nan")), int(rep.get("broken", 0)) + int(
        rep.get("stalled", 0)
    )


def _slot_tag(c: redis.RedisCluster, address: str) -> str:
    """A hash tag whose slot the master at `address` serves."""
    for i in range(100_000):
        tag = f"seq{i}"
        node = c.get_node_from_key(f"{{{tag}}}")
        if f"{node.host}:{node.port}" == address:
            return tag
    raise RuntimeError(f"no hash tag found for {address}")


def lost_updates(tb: Testbed, wait: bool, seconds: float) -> tuple[int, int]:
    """(lost, acknowledged) updates across a master's SIGKILL (see the module's doc)."""
    victim = _busiest_master(tb)
    topo = tb.host.tier().component.topology()
    c = tier_client(topo, _admin(tb), timeout=0.5)
    tag = _slot_tag(c, victim["address"])
    acked: list[int] = []
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            key = f"tn:bench:{{{tag}}}:{i}"
            try:
                c.set(key, i)
                if wait:
                    node = c.get_node_from_key(key)
                    if int(c.execute_command("WAIT", 1, 100, target_nodes=node)) < 1:
                        continue
                acked.append(i)
            except (redis.RedisError, OSError):
                time.sleep(0.01)

    t = threading.Thread(target=writer)
    t.start()
    time.sleep(seconds / 2)
    os.kill(victim["pid"], signal.SIGKILL)
    time.sleep(seconds / 2)
    stop.set()
    t.join()
    c.close()
    time.sleep(1.0)
    c = tier_client(tb.host.tier().component.topology(), _admin(tb))
    try:
        present = (
            {int(v) for v in c.mget([f"tn:bench:{{{tag}}}:{i}" for i in acked]) if v is not None}
            if acked
            else set()
        )
    finally:
        c.close()
    lost = len(set(acked) - present)
    log(f"lost updates ({'wait' if wait else 'nowait'}): {lost} of {len(acked)} acknowledged")
    _heal(tb)
    return lost, len(acked)


def cross_tenant(tb: Testbed) -> str:
    user, pw = tb.runtime.users.credentials("ta")
    tb.runtime.users.credentials("tb")
    c = tier_client(tb.host.tier().component.topology(), Credentials(user, pw))
    denied = 0
    try:
        for op in (lambda: c.get("tn:tb:nf:x:{1}:t"), lambda: c.set("tn:tb:nf:x:{1}:t", b"x")):
            try:
                op()
            except redis.exceptions.NoPermissionError:
                denied += 1
    finally:
        c.close()
    return "denied" if denied == 2 else "allowed"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--flows", type=int, default=1000)
    args = ap.parse_args()
    repeats = args.repeats or (3 if args.quick else 5)
    pkts = 40 if args.quick else 150  # per flow
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the hosts come down also when stopped
    print_machine()
    beds: dict[str, Testbed] = {}
    try:
        specs = {"single": None, "cluster": cluster(3)}
        if not args.quick:
            specs["cluster_6"] = cluster(6)
        for name, tier in specs.items():
            log(f"bringing up the host with the {name} tier")
            tb = Testbed(rundir=RUNDIR, redis=tier)
            beds[name] = tb
            tb.up()
            tb.add_firewall(at="host")
        rates = throughput(beds, repeats, args.flows, pkts)
        if "cluster_6" in beds:
            beds.pop("cluster_6").close()
        cl = beds["cluster"]
        cl.agent.delete_nf("fw")
        failover_ms = failover_outage(cl, 6 if args.quick else 10)
        cl.agent.delete_vm("web")  # the TCP chain binds its own VM to the one slot
        tcp_gap_ms, broken = failover_tcp(cl, 6 if args.quick else 10)
        lost_nowait, acked_nowait = lost_updates(cl, False, 3 if args.quick else 6)
        lost_wait, acked_wait = lost_updates(cl, True, 3 if args.quick else 6)
        tenants = cross_tenant(cl)
    finally:
        for tb in beds.values():
            tb.close()
    figures = {
        "masters": 3,
        "pps_single": round(rates["single"]),
        "pps_cluster": round(rates["cluster"]),
        "ratio_cluster_vs_single": round(rates["cluster"] / rates["single"], 3) if rates["single"] else None,
        "master_failover_ms": round(failover_ms, 1),
        "tcp_max_gap_ms": round(tcp_gap_ms, 1),
        "broken_conns": broken,
        "lost_updates_nowait": lost_nowait,
        "acked_updates_nowait": acked_nowait,
        "lost_updates_wait": lost_wait,
        "acked_updates_wait": acked_wait,
        "cross_tenant": tenants,
        "repeats": repeats,
        "flows": args.flows,
        "pkts": pkts,
    }
    if "cluster_6" in rates:
        figures["pps_cluster_6"] = round(rates["cluster_6"])
        figures["ratio_cluster6_vs_cluster3"] = round(rates["cluster_6"] / rates["cluster"], 3)
    final_json(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
