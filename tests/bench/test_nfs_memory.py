"""The memory variant's summary (bench/nfs/run.py `summarise`): ratios, added latency and the CPU figures per
NF from the harness's JSON, for every transport; and the relay round-trip probe's parser (bench/nfs/relay_rtt.py).
Pure; the harness itself runs in `cargo test` (nf-bench builds) and `./uno bench nfs`."""

from __future__ import annotations

from bench.nfs import run as nfs_run


def _mode(pps, p50=10.0, p99=20.0, cpu=0.5, redis=0.1, rt=31.3):
    return {"pps": pps, "p50_us": p50, "p99_us": p99, "cpu_us_per_pkt": cpu + 0.2, "busy_cpu_us_per_pkt": cpu,
            "redis_cpu_us_per_pkt": redis, "round_trips_per_1000": rt}  # fmt: skip


def _workload(scale: float) -> dict:
    w = {m: _mode(1000 * scale) for m in nfs_run.MODES}
    w["stateless"] = _mode(800 * scale, 60, 120, cpu=0.7, redis=0.2)
    w["stateless-tcp"] = _mode(700 * scale, 70, 150)
    return w


def test_summary_per_transport_with_cpu_figures():
    long64, short64 = _workload(1), _workload(0.5)
    paced = {"offered_pps": 400, **{m: {"p50_us": 1.0, "p99_us": 30.0} for m in nfs_run.MODES}}
    paced["stateless"] = {"p50_us": 41.0, "p99_us": 110.0, "p99_all_us": 400.0}
    paced["local"]["p99_all_us"] = 50.0
    paced["stateless-tcp"] = {"p50_us": 51.0, "p99_us": 130.0}
    long64["paced"] = paced
    s = nfs_run.summarise({"firewall": {"long64": long64, "short64": short64}})["firewall"]
    assert s["ratio_long"] == 0.8 and s["tcp_ratio_long"] == 0.7 and s["cached_ratio_short64"] == 1.0
    assert s["added_p50_us"] == 40.0 and s["added_p99_us"] == 80.0 and s["tcp_added_p99_us"] == 100.0
    assert s["added_p99_all_us"] == 350.0
    assert "added_p99_clean_us" not in s  # no stall probe
    paced["stateless"]["p99_clean_us"], paced["local"]["p99_clean_us"] = 90.0, 25.0
    assert (
        nfs_run.summarise({"fw": {"long64": long64, "short64": short64}})["fw"]["added_p99_clean_us"] == 65.0
    )
    assert s["sat_added_p50_us"] == 50.0 and s["offered_pps"] == 400
    assert s["stateless_busy_cpu_us_per_pkt"] == 0.7 and s["local_cpu_us_per_pkt"] == 0.7
    assert s["stateless_redis_cpu_us_per_pkt"] == 0.2 and s["stateless_round_trips_per_1000"] == 31.3
    # Without latency runs (--paced-load 0) there are no added-latency figures.
    del paced["stateless"]["p99_all_us"]  # an older harness: no such figure
    assert "added_p99_all_us" not in nfs_run.summarise({"fw": {"long64": long64, "short64": short64}})["fw"]
    del long64["paced"]
    assert "added_p99_us" not in nfs_run.summarise({"nat": {"long64": long64, "short64": short64}})["nat"]


def test_relay_rtt_reads_redis_benchmark_csv():
    from bench.nfs.relay_rtt import parse_csv

    text = (
        '"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms",'
        '"max_latency_ms"\n"GET","21000.50","0.045","0.020","0.043","0.060","0.091","1.200"\n'
    )
    assert parse_csv(text) == {"rps": 21000.5, "p50_us": 43.0, "p99_us": 91.0}
