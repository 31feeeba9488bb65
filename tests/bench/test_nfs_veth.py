"""The veth + OVS NF benchmark harness (bench/nfs/veth.py): its pure figures, its CLI checks, and a tiny real
run (one NF, three modes, a few hundred packets through a real OVS bridge and Redis) so the harness does not
rot. No timing is asserted: only that packets went generator -> OVS -> NF -> OVS -> sink, that every figure is
there, and that nothing is left behind, also when a run fails."""

from __future__ import annotations

import json
import subprocess

import pytest

from bench.nfs import run as nfs_run
from bench.nfs import veth
from nf_runtime.runtime import NF_BINARY
from testkit.hosts import needs_root
from testkit.veth_testbed import Testbed

TRAFFIC = NF_BINARY.parent / "traffic"
needs_bins = pytest.mark.skipif(
    not NF_BINARY.exists() or not TRAFFIC.exists(), reason="nfs not built (setup.sh rust)"
)
TINY = veth.Workload("long64", 4, 50, 64)
RUNDIR = "/run/uno-test"  # short: unix socket paths (OVS, Redis) must stay under 108 bytes


def test_run_figures_from_reports():
    wl = veth.Workload("w", 10, 100, 64)
    gen = {"sent": 1050, "frames": 1050, "data_packets": 1000, "seconds": 0.5}
    sink = {"received": 900, "lost": 100, "expected": 1000, "latency_us": {"p50": 12.5, "p99": 80.0}}
    stats = {"counters": {"rx": 1050}}
    f = veth.run_figures(wl, gen, sink, stats, nf_cpu_s=0.021, redis_cpu_s=0.0)
    assert f["offered_pps"] == 2000 and f["delivered_pps"] == 1800 and f["loss"] == 0.1
    assert f["nf_cpu_us_per_pkt"] == 20.0 and f["redis_cpu_us_per_pkt"] == 0.0
    assert (f["p50_us"], f["p99_us"]) == (12.5, 80.0)
    # An NF that received nothing has no CPU per packet (not a division by zero).
    assert veth.run_figures(wl, gen, sink, {"counters": {"rx": 0}}, 0.1, 0.1)["nf_cpu_us_per_pkt"] is None
    # With the sink's receive window, delivered is over that window (queues drained after the sender stopped).
    assert veth.run_figures(wl, gen, {**sink, "rx_span_s": 0.6}, stats, 0.0, 0.0)["delivered_pps"] == 1500
    # A few packets in a short window (near-total loss): never more than received / sending time.
    assert veth.run_figures(wl, gen, {**sink, "rx_span_s": 0.01}, stats, 0.0, 0.0)["delivered_pps"] == 1800


def _m(pps, p50=10.0, p99=50.0, cpu=1.0):
    return {"offered_pps": 500, "delivered_pps": pps, "loss": 0.0, "p50_us": p50, "p99_us": p99,
            "nf_cpu_us_per_pkt": cpu, "redis_cpu_us_per_pkt": 0.5}  # fmt: skip


def test_summarise_ratios_and_added_latency():
    res = {
        "firewall": {
            "long64": {"local": _m(100), "stateless": _m(80, cpu=2.0), "cached": _m(90)},
            "short64": {"local": _m(50), "stateless": _m(20), "cached": _m(25)},
            "paced": {"offered_pps": 40, "local": _m(40, 10, 50), "stateless": _m(40, 30, 150),
                      "cached": _m(40, 12, 60)},
        }
    }  # fmt: skip
    s = veth.summarise(res)["firewall"]
    assert (s["ratio_long"], s["ratio_short64"], s["cached_ratio_long"], s["cached_ratio_short64"]) == (
        0.8, 0.4, 0.9, 0.5)  # fmt: skip
    assert (s["added_p50_us"], s["added_p99_us"], s["cached_added_p99_us"]) == (20.0, 100.0, 10.0)
    assert s["stateless_cpu_us_per_pkt"] == 2.0 and s["paced_offered_pps"] == 40
    assert veth.paced_rate(res["firewall"]) == 1000.0  # floor: never pace below 1,000 pps
    assert veth.medians([_m(1), _m(3), _m(2)])["delivered_pps"] == 2


@pytest.mark.parametrize(
    "argv, field",
    [(["--path", "wire"], "--path"), (["--veth-nfs", "firewall,dpi"], "--veth-nfs"),
     (["--veth-repeats", "0"], "--veth-repeats"), (["--veth-redis", "tcp"], "--veth-redis")],
)  # fmt: skip
def test_cli_rejects_bad_arguments(argv, field, capsys):
    with pytest.raises(SystemExit) as e:
        nfs_run._parse(argv)
    assert e.value.code == 2
    assert field in capsys.readouterr().err


def _left(tb: Testbed) -> list[str]:
    procs = subprocess.run(["ps", "-eo", "stat,args"], capture_output=True, text=True).stdout
    return tb.leftovers() + [ln for ln in procs.splitlines() if str(tb.dir) in ln and not ln.startswith("Z")]


@needs_root
@needs_bins
@pytest.mark.parametrize("redis", ["unix", "relay"])
def test_tiny_run_through_ovs_and_nothing_left(redis):
    """Redis over its own unix socket (as the agent runs NFs) and through the two relays used before."""
    tb = Testbed(rundir=RUNDIR, redis=redis)
    with tb:
        vb = veth.VethBench(tb, veth.Binaries(NF_BINARY, TRAFFIC))
        figs = {m: vb.measure("firewall", m, TINY, rate=2000) for m in veth.MODES}
    for m, f in figs.items():
        # Packets crossed the NF (control frames too) and reached the sink; every figure is present.
        assert f["nf_rx"] >= TINY.data_packets, (m, f)
        assert f["delivered_pps"] > 0 and 0 <= f["loss"] < 1, (m, f)
        assert f["nf_cpu_us_per_pkt"] is not None and f["p50_us"] > 0, (m, f)
    # Redis served the stateless and cached runs (its CPU moved), not the local one's store.
    assert figs["stateless"]["redis_cpu_us_per_pkt"] is not None
    # The relays' CPU is measured when there are relays (only then).
    assert (figs["stateless"]["relay_cpu_us_per_pkt"] is not None) == (redis == "relay")
    assert figs["local"]["relay_cpu_us_per_pkt"] is None
    assert _left(tb) == []


@needs_root
@needs_bins
def test_cleanup_after_a_failing_run():
    tb = Testbed(rundir=RUNDIR)
    with pytest.raises(RuntimeError, match="boom"), tb:
        vb = veth.VethBench(tb, veth.Binaries(NF_BINARY, TRAFFIC))
        tb.start_nf(NF_BINARY, "monitor", "local", _write(tb, {}))  # an NF left running by the failure
        assert vb.tb.leftovers()
        raise RuntimeError("boom")
    assert _left(tb) == []


def _write(tb: Testbed, cfg: dict):
    p = tb.dir / "cfg.json"
    p.write_text(json.dumps(cfg))
    return p
