"""The live-update part of `./uno bench ops`: roll a firewall (state in Redis, on the host) to another nf
version and back, `rounds` times, under kernel TCP connections and a UDP datagram per ms through it, each
update through the agent's REST API (its Flask app in-process on a real emulated host).

`measure_update()` returns {"update_lost" (datagrams lost), "update_broken_conns" (TCP connections reset,
closed, wrongly echoed or stalled), "update_ms" (median time of one update call: start beside, remap, drain,
stop), "update_ms_all", "updates"}. Run alone: `python -m bench.ops_update [--quick]` (root).

The second version is the checkout's nf built with another version string (scripts/nf-version.sh, built when
missing).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from bench.common import final_json, median, print_machine
from nf_agent.api import create_app
from nf_local.versions import DEFAULT_DIR
from testkit.tcp_chain import End, TcpChain, add_chains, fw_tcp, run
from testkit.testbed import Testbed

REPO = Path(__file__).resolve().parents[1]
OTHER = "0.1.1"


def ensure_version(version: str = OTHER) -> None:
    """Build the checkout's nf as `version` into the versions directory unless it is there."""
    if not (DEFAULT_DIR / version / "nf").is_file():
        subprocess.run([str(REPO / "scripts" / "nf-version.sh"), version], check=True, timeout=1800,
                       env=dict(os.environ), capture_output=True)  # fmt: skip


def measure_update(rounds: int = 3, conns: int = 4) -> dict:
    """Roll to the other version and back `rounds` times under traffic (see the module doc)."""
    ensure_version()
    default = subprocess.run([str(DEFAULT_DIR.parent / "target" / "release" / "nf"), "--version"],
                             capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    took: list[float] = []
    errors: list[str] = []
    with Testbed(warm_slots=0) as tb:
        chain = TcpChain(0, End("wire"), [("fw", "firewall", fw_tcp(0), "host")])
        add_chains(tb, [chain])
        api = create_app(tb.agent).test_client()

        def roll() -> None:
            for _ in range(rounds):
                for version in (OTHER, default):
                    t0 = time.monotonic()
                    r = api.post("/v1/nfs/fw/update", json={"version": version})
                    took.append((time.monotonic() - t0) * 1000)
                    if r.status_code != 200:
                        errors.append(f"{version}: {r.status_code} {r.get_json()}")
                    time.sleep(0.3)

        udp: list[dict] = []
        seconds = 3.0 + rounds * 2 * 1.5
        [tcp] = run(tb, [chain], conns=conns, seconds=seconds, during=roll, udp=udp)
    return {
        "update_lost": udp[0]["lost"] if udp else None,
        "update_received": udp[0]["received"] if udp else None,
        "update_broken_conns": tcp.get("broken", conns) + tcp.get("stalled", 0),
        "update_ms": round(median(took), 1),
        "update_ms_all": [round(x, 1) for x in took],
        "updates": len(took),
        "update_errors": errors,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one round (two updates) instead of three")
    a = ap.parse_args(argv)
    print_machine()
    final_json(measure_update(rounds=1 if a.quick else 3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
