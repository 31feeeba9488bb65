"""The sNIC quota bench (bench/nfs/snic_quota.py): its pure figures, its CLI checks, and a tiny real run (an NF in a
real quota cgroup on a direct veth) so the harness does not rot. No timing is asserted: only that packets
went generator -> NF -> sink, that every figure is there, and that the run's cgroup and testbed are gone."""

from __future__ import annotations

import pytest

from bench.nfs import snic_quota as sq
from bench.nfs.veth import Binaries
from nf_runtime.runtime import NF_BINARY
from snic_datapath.cgroup import CpuCgroup
from testkit.hosts import needs_root
from testkit.veth_testbed import Testbed

TRAFFIC = NF_BINARY.parent / "traffic"
needs_bins = pytest.mark.skipif(
    not NF_BINARY.exists() or not TRAFFIC.exists(), reason="nfs not built (make setup)"
)


def _run(**kw) -> dict:
    base = {f: 1.0 for f in sq.FIGURES}
    return {**base, **kw}


def test_rates_medians_labels():
    # 0.2 cores at 5 us per packet: 40,000 pps is the whole quota.
    assert sq.rates_for([0.5, 1.0], 0.2, 5.0) == [20_000.0, 40_000.0]
    m = sq.medians([_run(loss=0.0, port_drops=0), _run(loss=0.5, port_drops=9), _run(loss=0.1, port_drops=2)])
    assert (m["loss"], m["loss_max"], m["port_drops"], m["port_drops_max"]) == (0.1, 0.5, 2, 9)
    assert m["cpu_us_per_pkt"] == 1.0
    # A figure missing in every run (an NF that received nothing) stays None, never a division by zero.
    assert sq.medians([_run(cpu_us_per_pkt=None)])["cpu_us_per_pkt"] is None
    assert [sq.label(p) for p in (sq.NONE, 100_000, 10_000, 5_000)] == ["none", "100ms", "10ms", "5ms"]
    assert sq.nf_config("firewall")["spin_us"] == 0  # as the agent runs NFs under a quota


@pytest.mark.parametrize(
    ("argv", "msg"),
    [
        (["--nfs", "firewall,dpi"], "unknown NFs"),
        (["--cores", "0"], "--cores"),
        (["--rounds", "0"], "--rounds"),
        (["--loads", ""], "--loads"),
        (["--periods", "x"], "--periods"),
        (
            ["--cores", "0.1", "--periods", "100000,5000"],
            "--periods: CPU quota 0.1 cores x 5000 us period = 500 us",
        ),
    ],
)
def test_cli_rejects_bad_arguments(argv, msg, capsys):
    with pytest.raises(SystemExit) as e:
        sq.main(argv)
    assert e.value.code == 2
    assert msg in capsys.readouterr().err


@pytest.mark.root
@needs_root
@needs_bins
def test_tiny_run_in_a_real_cgroup_and_nothing_left():
    tb = Testbed(rundir="/run/uno-test", direct=True)
    with tb:
        qb = sq.QuotaBench(tb, Binaries(NF_BINARY, TRAFFIC), seconds=0.3)
        free = qb.measure_in_cgroup("firewall", 2000, sq.UNLIMITED_CORES, sq.NONE)
        capped = qb.measure_in_cgroup("firewall", 2000, 0.2, 10_000)
    for f in (free, capped):
        assert set(sq.FIGURES) <= set(f)
        assert f["offered_pps"] > 0 and 0 <= f["loss"] < 1 and f["p50_us"] > 0, f
        assert f["cpu_us_per_pkt"] is not None and f["cores"] > 0, f  # the cgroup counted the NF's CPU
    assert free["throttled_per_s"] == 0  # 2 cores: more than an NF's packet thread can use
    assert tb.leftovers() == []
    assert not any(CpuCgroup(f"uno-{tb.name}-snic{i}").exists() for i in (1, 2))
