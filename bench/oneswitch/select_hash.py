"""How evenly OneSwitch's scale-out hash spreads flows over k instances, on a real Open vSwitch (issue 28 part 5).

A private OVS (own network namespace and run directory, a netdev bridge with k + 1 internal ports) gets exactly
the rules OneSwitch installs for a scaled vport: the dispatch rule of the ingress port runs
`multipath(symmetric_l3l4+udp,0,modulo_n,65536,0,NXM_NX_REG7[0..15])` then `goto_table:1`, which sends to a
SELECT group `selection_method=hash,fields(reg7)` with buckets 0..k-1 (one output port each). Every flow of
many flow sets is traced (`ofproto/trace`, one persistent unixctl connection) and the bucket it takes counted.
Alternatives side by side on the same flow sets (each its own bridge, rules swapped in between):

- `oneswitch`: the rules above (the default);
- `basis1`: the same with multipath basis 1 (a different hash of the same fields);
- `mp_hrw`, `mp_iter`, `mp_modn`: multipath straight to the k links (`hrw`, `iter_hash`, `modulo_n`, n_links = k)
  and one rule per value of reg7 (no group hash);
- `grp_5tuple`: the group hashing the 5-tuple fields itself (not symmetric: for comparison only).

Flow sets (UDP, one destination port): `random_ports` (one address pair, random source ports), `seq_ports`
(one pair, consecutive source ports from a random start), `step2_ports` (one pair, every second port) and
`random_pairs` (random addresses and ports). Per alternative and family: the mean over sets of the chi-square
of the per-bucket counts against an even split (a uniform random pick: k - 1 on average), the share of sets
whose smallest bucket has less than 0.15 of the flows (30 flows over 3: 3.7 % for a uniform random pick), and
the bucket totals over all sets.

    ./.venv/bin/python bench/oneswitch/select_hash.py [--sets 200] [--flows 30] [--k 3] [--seed 1]

Needs root. Progress on stderr; the last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from host_datapath.ovs_instance import OvsInstance  # noqa: E402
from host_datapath.sysutil import netns_add, netns_del  # noqa: E402
from testkit.oneswitch.ovstrace import Unixctl  # noqa: E402

NETNS = "ops3hash"
BRIDGE = "ops3hbr"
MP = "symmetric_l3l4+udp"
ALTERNATIVES = ("oneswitch", "basis1", "mp_hrw", "mp_iter", "mp_modn", "grp_5tuple")
FAMILIES = ("random_ports", "seq_ports", "step2_ports", "random_pairs")
_OUT = re.compile(r"output:(\d+)")


def rules(alt: str, k: int) -> tuple[list[str], str | None]:
    """The flows and the group (None: none) of alternative `alt` with `k` buckets (ports 2..k+1)."""
    buckets = ",".join(f"bucket=bucket_id:{i},actions=output:{i + 2}" for i in range(k))
    if alt in ("oneswitch", "basis1"):
        basis = 1 if alt == "basis1" else 0
        flows = [f"table=0,in_port=1,ip,actions=multipath({MP},{basis},modulo_n,65536,0,NXM_NX_REG7[0..15]),"
                 "goto_table:1", "table=1,actions=group:1"]  # fmt: skip
        return flows, f"group_id=1,type=select,selection_method=hash,fields(reg7),{buckets}"
    if alt == "grp_5tuple":
        flows = ["table=0,in_port=1,ip,actions=goto_table:1", "table=1,actions=group:1"]
        fields = "fields(ip_src,ip_dst,ip_proto,udp_src,udp_dst)"
        return flows, f"group_id=1,type=select,selection_method=hash,{fields},{buckets}"
    algo = {"mp_hrw": "hrw", "mp_iter": "iter_hash", "mp_modn": "modulo_n"}[alt]
    flows = [f"table=0,in_port=1,ip,actions=multipath({MP},0,{algo},{k},0,NXM_NX_REG7[0..15]),goto_table:1"]
    flows += [f"table=1,reg7={i},actions=output:{i + 2}" for i in range(k)]
    return flows, None


def flow_set(family: str, n: int, rng: random.Random) -> list[tuple[str, str, int, int]]:
    """`n` distinct UDP flows (src, dst, sport, dport) of `family`."""
    a, b = (
        f"10.{rng.randrange(256)}.{rng.randrange(256)}.1",
        f"10.{rng.randrange(256)}.{rng.randrange(256)}.2",
    )
    dport = rng.randrange(1024, 65536)
    if family == "random_ports":
        return [(a, b, p, dport) for p in rng.sample(range(1024, 65536), n)]
    if family in ("seq_ports", "step2_ports"):
        step = 1 if family == "seq_ports" else 2
        start = rng.randrange(1024, 65536 - step * n)
        return [(a, b, start + step * i, dport) for i in range(n)]

    def ip() -> str:
        return f"{rng.randrange(1, 224)}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"

    return [(ip(), ip(), rng.randrange(1024, 65536), rng.randrange(1, 65536)) for _ in range(n)]


def bucket_of(ctl: Unixctl, flow: tuple[str, str, int, int]) -> int:
    """The output port (2..k+1) the traced flow takes, minus 2 (its bucket)."""
    src, dst, sp, dp = flow
    spec = f"in_port=1,dl_type=0x0800,nw_proto=17,nw_src={src},nw_dst={dst},udp_src={sp},udp_dst={dp}"
    out = ctl.transact("ofproto/trace", BRIDGE, spec)
    ports = _OUT.findall(out)
    if not ports:
        raise RuntimeError(f"no output in the trace of {spec}: {out[-400:]}")
    return int(ports[-1]) - 2


def ofctl(*args: str) -> None:
    subprocess.run(["ovs-ofctl", "-O", "OpenFlow15", *args], check=True, capture_output=True, text=True)


def install(mgmt: str, alt: str, k: int) -> None:
    ofctl("del-flows", mgmt)
    ofctl("del-groups", mgmt)
    flows, group = rules(alt, k)
    if group:
        ofctl("add-group", mgmt, group)
    for f in flows:
        ofctl("add-flow", mgmt, f)


def figures(counts: list[list[int]], k: int) -> dict:
    """Mean chi-square against an even split, share of sets with a bucket under 0.15, bucket totals."""
    chi, low = [], 0
    for c in counts:
        n = sum(c)
        e = n / k
        chi.append(sum((x - e) ** 2 / e for x in c))
        low += min(c) / n < 0.15
    totals = [sum(c[i] for c in counts) for i in range(k)]
    n_all = sum(totals)
    chi_all = sum((t - n_all / k) ** 2 / (n_all / k) for t in totals)
    return {
        "chi2_mean": round(sum(chi) / len(chi), 3),
        "min_share_lt_0.15": round(low / len(counts), 4),
        "totals": totals,
        "totals_chi2": round(chi_all, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", type=int, default=200)
    ap.add_argument("--flows", type=int, default=30)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    sets = {f: [flow_set(f, a.flows, rng) for _ in range(a.sets)] for f in FAMILIES}
    rundir = Path(tempfile.mkdtemp(prefix="ops3-hash-"))
    ovs = OvsInstance(rundir, NETNS)
    netns_add(NETNS)
    out: dict = {"sets": a.sets, "flows": a.flows, "k": a.k, "seed": a.seed}
    try:
        ovs.start()
        vsctl = ["ovs-vsctl", f"--db={ovs.db_remote}"]
        subprocess.run([*vsctl, "add-br", BRIDGE, "--", "set", "bridge", BRIDGE, "datapath_type=netdev",
                        "protocols=OpenFlow13,OpenFlow15"], check=True)  # fmt: skip
        for p in range(1, a.k + 2):
            subprocess.run([*vsctl, "add-port", BRIDGE, f"{BRIDGE}p{p}", "--", "set", "interface",
                            f"{BRIDGE}p{p}", "type=internal", f"ofport_request={p}"], check=True)  # fmt: skip
        mgmt = f"unix:{rundir / (BRIDGE + '.mgmt')}"
        ctl = Unixctl(rundir / "ovs-vswitchd.ctl")
        try:
            for alt in ALTERNATIVES:
                install(mgmt, alt, a.k)
                t0 = time.monotonic()
                for fam in FAMILIES:
                    counts = []
                    for s in sets[fam]:
                        c = [0] * a.k
                        for fl in s:
                            c[bucket_of(ctl, fl)] += 1
                        counts.append(c)
                    out[f"{alt}.{fam}"] = figures(counts, a.k)
                print(f"[select_hash] {alt}: {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
        finally:
            ctl.close()
    finally:
        ovs.stop()
        netns_del(NETNS)
        subprocess.run(["rm", "-rf", str(rundir)], check=False)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
