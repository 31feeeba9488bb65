"""An NF instance's command line: the config it starts with (`run_config`), the CPU wake-up bound option, and
the wrapper that runs it in its namespace after joining its cgroups (`spawn_command`)."""

from __future__ import annotations

from collections.abc import Sequence

from domain.model import HOST
from host_datapath.netns_ops import netns_path

# `sh -c` script of `_spawn`: "N FILE1..FILEN CMD...": write "0" (= itself) to each cgroup.procs file, then
# execute CMD; exit 126 (before CMD) if a write fails.
JOIN_CGROUPS_SH = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do echo 0 > "$1" || exit 126; shift; n=$((n - 1)); done; exec "$@"'
)


# Claim options the agent sets for NFs whose config leaves them out: the pipelined claim (written with the
# batch, no round trip per new connection; checked when the writes are acknowledged, so two instances that
# race on one connection still end with one mapping / backend) instead of a compare-and-set round trip.
PIPELINED_CLAIMS = {"nat": "mapping_claim", "lb": "conn_claim"}


MAX_CPU_LATENCY_US = 1_000_000  # nfcore::cpu_latency::MAX_US


def parse_cpu_latency(text: str) -> int | None:
    """A `--cpu-latency-us` value: 'off' -> None, else an integer bound in [0, MAX_CPU_LATENCY_US] us.
    ValueError says what is wrong (the caller names the option)."""
    if text == "off":
        return None
    try:
        us = int(text)
    except ValueError:
        raise ValueError(f"must be 'off' or an integer, not {text!r}") from None
    if not 0 <= us <= MAX_CPU_LATENCY_US:
        raise ValueError(f"must be 'off' or in [0, {MAX_CPU_LATENCY_US}] us")
    return us


def run_config(nf_type: str, config: dict, location: str, cpu_latency_us: int | None = None) -> dict:
    """The config an NF instance starts with. NAT and LB claim new connections pipelined
    (`PIPELINED_CLAIMS`) unless the config says otherwise: the atomic claim costs a blocking round trip per
    new connection (bench/RESULTS.md `nfs` measures both); both keep one mapping per connection when
    instances race (a move's or a resize's make-before-break window), the pipelined one by dropping the
    losing instance's packets of that connection before they leave (a retransmission takes the winner's
    mapping) where the atomic one adopts the winner's at once. Under an sNIC's CPU quota the Redis client does not spin for replies
    (`spin_us: 0`) unless the config says otherwise: spinning (200 us per read by default) burns the quota
    the NF's own work needs, per batch, not per byte. `cpu_latency_us` (the agent's `--cpu-latency-us`): the
    CPU wake-up latency bound the NF holds while it runs (nfs/README.md `cpu_latency_us`), unless its config
    sets one."""
    out = dict(config)
    if cpu_latency_us is not None and "cpu_latency_us" not in out:
        out["cpu_latency_us"] = cpu_latency_us
    claim = PIPELINED_CLAIMS.get(nf_type)
    if claim and claim not in out:
        out[claim] = "pipelined"
    if location != HOST and "spin_us" not in out:
        out["spin_us"] = 0
    return out


def spawn_command(cmd: list[str], netns: str | None = None, cgroup: Sequence[str] = ()) -> list[str]:
    """The command line that runs `cmd` in namespace `netns` (`nsenter --net`) after joining the cgroups
    whose `cgroup.procs` files `cgroup` lists (`sh`, JOIN_CGROUPS_SH); exec all the way: one PID."""
    full = ["nsenter", f"--net={netns_path(netns)}", "--", *cmd] if netns else list(cmd)
    if cgroup:
        full = ["sh", "-c", JOIN_CGROUPS_SH, "uno-join-cgroup", str(len(cgroup)), *cgroup, *full]
    return full
