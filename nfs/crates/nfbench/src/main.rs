//! `nf-bench [--quick] [--batch N (default 64, the NFs' batch_size default)] [--depth N] [--scale N] [--nfs firewall,nat,monitor,lb,lb-pipelined,ips,ips-lastwins,l7fw,l7fw-lastwins,ipsec-out,ipsec-in]
//!  [--modes local,sync,stateless,stateless-tcp,cached] [--workloads long64,long1500,short64,short1500]
//!  [--paced-load 0.5 (0: no latency runs)] [--paced-pps N (instead: this fixed rate)] [--rtt N (0: no round-trip probe)] [--no-pin]
//!  [--recv-cap N (saturated runs: at most N frames per receive, the batches of a port below saturation)]
//!  [--borrow (small batches borrow keys: `Runtime::set_borrow_reads(true)`, off by default, for A/B runs)]
//!  [--stall-probe (a machine-stall probe beside the paced runs, see [`stallprobe`])]
//!  [--cpu-latency-us N (hold this CPU wake-up latency bound for the whole run, both modes:
//!  `nfcore::cpu_latency`, as the NF's `cpu_latency_us`)]`:
//! packets/s on one core, CPU per packet and latency of each NF, stateless (Redis on the same
//! machine, started here) vs local, side by side, fed from memory. Redis is reached over its unix
//! socket (the deployed configuration: the agent starts NFs on it) except in `stateless-tcp`
//! (the same pipelined client over TCP loopback).
//! Prints one JSON object: {rtt: {unix|tcp: {...}}, results: {nf: {workload: {mode: {pps,
//! p50_us, p99_us, cpu_us_per_pkt, busy_cpu_us_per_pkt (without the client's spinning for
//! replies), redis_cpu_us_per_pkt, round_trips_per_1000}, paced: {offered_pps, mode: {p50_us,
//! p99_us, p99_all_us, redis_cpu_us_per_pkt, round_trips_per_1000}}}}}} (paced: long64 and
//! short64 offered at a fraction of the lower of the local and stateless saturation rates, or at
//! `--paced-pps`, packets arriving one by one; p50/p99 after a warm-up of the first 1/16 of the
//! packets, p99_all over all of them; with `--stall-probe` (needs root) also p99_clean_us,
//! stall_ms and touched_pct, see [`stallprobe`]). With NFBENCH_DEBUG set, each run also prints its store counters (round trips, keys)
//! and the NF's counters on stderr.

mod breakdown;
mod paced;
mod stallprobe;
mod workload;

use flowstore::test_redis::TestRedis;
use flowstore::{CachedStore, FlowStore, KeySpace, LocalStore, RedisConfig, RedisStore};
use netio::mem::MemDevice;
use netio::Device;
use nfcore::config::RuntimeOptions;
use nfcore::runtime::phases::PacketPhases;
use nfcore::runtime::{Runtime, TimeSource};
use nfcore::{FailMode, NetworkFunction};
use serde_json::{json, Value};
use std::sync::atomic::AtomicBool;
use std::time::Instant;
use workload::Shape;

fn make_nf(kind: &str) -> Box<dyn NetworkFunction> {
    match kind {
        "firewall" => Box::new(
            nf_firewall::Firewall::from_config(&json!({
                "rules": [{"action": "allow", "proto": "tcp", "src": "10.0.0.0/8", "dst_port": 80}],
                "idle_timeout_ms": 60000}))
            .unwrap(),
        ),
        "nat" => Box::new(
            nf_nat::Nat::from_config(&json!({"inside": ["10.0.0.0/8"],
                "public_ips": ["198.51.100.1"], "ports": "10000-29999"}))
            .unwrap(),
        ),
        // NAT with the mapping written with the batch (no compare-and-set round trip per new flow).
        "nat-pipelined" => Box::new(
            nf_nat::Nat::from_config(&json!({"inside": ["10.0.0.0/8"],
                "public_ips": ["198.51.100.1"], "ports": "10000-29999", "mapping_claim": "pipelined"}))
            .unwrap(),
        ),
        "monitor" => Box::new(nf_monitor::Monitor::from_config(&json!({})).unwrap()),
        // Counters as hash increments, flushed with every batch / write-behind every 1 ms.
        "monitor-inc" => Box::new(
            nf_monitor::Monitor::from_config(&json!({"counters": "increments"})).unwrap(),
        ),
        "monitor-wb" => Box::new(
            nf_monitor::Monitor::from_config(&json!({"counters": "increments", "flush_ms": 1}))
                .unwrap(),
        ),
        "lb" => Box::new(
            nf_lb::LoadBalancer::from_config(&json!({"vip": LB_VIP, "port": 80,
                "backends": ["10.1.0.1:8080", "10.1.0.2:8080", "10.1.0.3:8080", "10.1.0.4:8080"]}))
            .unwrap(),
        ),
        // LB with the connection record and counter increment written with the batch.
        "lb-pipelined" => Box::new(
            nf_lb::LoadBalancer::from_config(&json!({"vip": LB_VIP, "port": 80,
                "backends": ["10.1.0.1:8080", "10.1.0.2:8080", "10.1.0.3:8080", "10.1.0.4:8080"],
                "conn_claim": "pipelined"}))
            .unwrap(),
        ),
        // 64 signatures (none occurs in the workload's payload, so every byte is scanned).
        // The IPS and L7 firewall with their records written conditional on what was read
        // (`record_writes: checked`, their default), and plainly (`last_wins`): the A/B of that
        // check's cost.
        "ips" | "ips-lastwins" => Box::new(
            nf_ips::Ips::from_config(&json!({
                "signatures": (0..64).map(|i| json!({"id": i, "content": format!("sig-{i:03}-attack")}))
                    .collect::<Vec<_>>(),
                "action": "drop", "alert_log": "/dev/null", "record_writes": record_writes(kind)}))
            .unwrap(),
        ),
        "l7fw" | "l7fw-lastwins" => Box::new(
            nf_l7fw::L7Firewall::from_config(&json!({
                "block": [{"proto": "tls", "sni": "*.bad.example"}, {"proto": "http", "host": "evil.example"}],
                "default": "allow", "record_writes": record_writes(kind)}))
            .unwrap(),
        ),
        // IPsec gateway A encapsulating (sequence numbers from the tier in blocks), and gateway B
        // decapsulating A's output (anti-replay window read and written every batch).
        "ipsec-out" => Box::new(nf_ipsec::Ipsec::from_config(&ipsec_config(true)).unwrap()),
        "ipsec-in" => Box::new(nf_ipsec::Ipsec::from_config(&ipsec_config(false)).unwrap()),
        _ => panic!("unknown NF {kind}"),
    }
}

const LB_VIP: &str = "10.0.0.100";

/// `record_writes` of an IPS / L7 firewall variant.
fn record_writes(kind: &str) -> &'static str {
    if kind.ends_with("-lastwins") {
        "last_wins"
    } else {
        "checked"
    }
}
/// A request whose body is the rest of the client's stream (the L7 firewall follows a connection's
/// requests: bytes after a head without a body would be an unparsed request).
const HTTP_REQUEST: &[u8] =
    b"POST / HTTP/1.1\r\nHost: bench.example\r\nContent-Length: 1000000000000\r\n\r\n";

/// One SA carrying the workload's traffic (10/8 -> 192.0.2/24) from gateway A to gateway B.
fn ipsec_config(gateway_a: bool) -> serde_json::Value {
    json!({"sas": [{"dir": if gateway_a { "out" } else { "in" }, "spi": 4097,
        "key": "000102030405060708090a0b0c0d0e0f", "salt": "01020304",
        "tunnel_src": "203.0.113.1", "tunnel_dst": "203.0.113.2",
        "selectors": [{"src": "10.0.0.0/8", "dst": "192.0.2.0/24"}]}],
        "replay_window": 1024})
}

/// Gateway A's ESP output for `frames` (the input of the ipsec-in benchmark).
fn encapsulated(frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let input: Vec<(u64, Vec<u8>)> = frames.iter().map(|f| (0, f.clone())).collect();
    nfcore::harness::run_frames(
        make_nf("ipsec-out"),
        Box::new(LocalStore::new()),
        "seed",
        &input,
        256,
    )
    .into_iter()
    .map(|o| o.expect("every workload packet is protected"))
    .collect()
}

/// The figures of one run.
#[derive(Debug, Clone, Copy)]
struct RunFigures {
    pps: f64,
    p50_us: f64,
    p99_us: f64,
    /// On-CPU time of the NF thread per packet (load-independent, unlike `pps`).
    cpu_us: f64,
    /// The same without the time the client spun waiting for replies (the work).
    busy_cpu_us: f64,
    /// On-CPU time of Redis per packet.
    redis_cpu_us: f64,
    /// Blocking round trips per 1000 packets (a pipelined batch counts once).
    round_trips_per_1000: f64,
    /// Paced: p99 over every packet, the warm-up included (unpaced: `p99_us`).
    p99_all_us: f64,
    /// Paced, with the stall probe: p99 (after the warm-up) over the packets no machine stall
    /// touched ([`stallprobe`]); NaN without it.
    p99_clean_us: f64,
    /// Paced, with the stall probe: the stalls' summed length over all CPUs (ms) and the share of
    /// packets (after the warm-up) they touched (%); NaN without it.
    stall_ms: f64,
    touched_pct: f64,
}

/// Paced runs: the first 1/`PACED_WARMUP` of the packets are a warm-up left out of p50/p99 (the
/// first round trips on a new connection and the runtime's first timer tick, a few hundred us
/// once, would otherwise be the p99 of a 16,000-packet run).
const PACED_WARMUP: usize = 16;

/// On-CPU time (ns) of a CPU-time clock, the running slice included (a schedstat file lags by up
/// to a scheduler tick, as long as a whole quick run).
fn clock_ns(clk: libc::clockid_t) -> u64 {
    // SAFETY: clock_gettime writes the timespec it is given.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a timespec owned by this frame.
    if unsafe { libc::clock_gettime(clk, &mut t) } != 0 {
        return 0;
    }
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// On-CPU time (ns) of this thread.
fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// On-CPU time (ns) of every thread of process `pid` (0 if it cannot be read).
fn process_cpu_ns(pid: u32) -> u64 {
    let mut clk: libc::clockid_t = 0;
    // SAFETY: writes the clock id of process `pid` into `clk`.
    if unsafe { libc::clock_getcpuclockid(pid as libc::pid_t, &mut clk) } != 0 {
        return 0;
    }
    clock_ns(clk)
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// One run. Unpaced (`pps` None): frames as fast as the NF takes them; latency = per-batch
/// receive-to-transmit time (every packet of the batch waits for it) at saturation. Paced:
/// packets arriving one by one at `pps`; latency = each packet's arrival to transmit.
fn run_once(
    cfg: &Settings,
    kind: &str,
    store: Box<dyn FlowStore>,
    nf_id: &str,
    frames: &[Vec<u8>],
    depth: usize,
    pps: Option<f64>,
) -> RunFigures {
    let recv_cap = cfg.recv_cap;
    let spec = RunSpec {
        kind,
        nf_id,
        n_frames: frames.len(),
        batch: cfg.batch,
        depth,
        redis_pid: cfg.redis_pid,
        borrow: cfg.borrow,
        debug: cfg.debug,
        phases: (pps.is_some() || recv_cap.is_some()) && cfg.debug,
    };
    let sorted = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v
    };
    let (mut fig, lat, all) = match pps {
        None => {
            let (fig, lat) = match recv_cap {
                Some(cap) => {
                    let dev = paced::PacedDevice::capped(frames.to_vec(), cap);
                    let (fig, lat, phases, _) = run_dev(&spec, store, dev);
                    // Every packet arrives at the start: `port` is the run so far.
                    if let Some(b) = breakdown::describe(&phases, 0) {
                        eprintln!("PHASES {kind} receives capped at {cap}: {b}");
                    }
                    (fig, lat)
                }
                None => {
                    let dev = MemDevice::new(frames.to_vec(), 1, false);
                    let (fig, lat, _, _) = run_dev(&spec, store, dev);
                    (fig, lat)
                }
            };
            (fig, sorted(lat), None)
        }
        Some(r) => {
            let dev = paced::PacedDevice::new(frames.to_vec(), r);
            let probe = cfg
                .stall_probe
                .then(probe_cpus)
                .flatten()
                .map(|c| stallprobe::Probe::start(&c));
            let (mut fig, _, phases, dev) = run_dev(&spec, store, dev);
            // Transmit order is arrival order (batches leave in order).
            let skip = dev.lat_us.len() / PACED_WARMUP;
            if let Some(stalls) = probe.and_then(stallprobe::Probe::stop) {
                clean_figures(&mut fig, &dev, &stalls, skip, cfg.debug);
            }
            if let Some(b) = breakdown::describe(&phases, skip) {
                eprintln!("PHASES {kind} @ {r:.0} pps: {b}");
            }
            let steady = sorted(dev.lat_us[skip..].to_vec());
            (fig, steady, Some(sorted(dev.lat_us)))
        }
    };
    fig.p50_us = percentile(&lat, 0.5);
    fig.p99_us = percentile(&lat, 0.99);
    fig.p99_all_us = all.map_or(fig.p99_us, |a| percentile(&a, 0.99));
    fig
}

/// The CPUs the stall probe watches: those the NF and Redis are pinned to (see [`pin`]);
/// `None` on one CPU.
fn probe_cpus() -> Option<Vec<usize>> {
    // Online CPUs (not `available_parallelism`: this thread is pinned to one by then).
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    (n >= 2).then(|| vec![0, 1])
}

/// The paced figures that leave out packets a machine stall touched (see [`stallprobe`]):
/// packets `skip..` of `dev` (after the warm-up).
fn clean_figures(
    fig: &mut RunFigures,
    dev: &paced::PacedDevice,
    stalls: &[stallprobe::Stall],
    skip: usize,
    debug: bool,
) {
    let n = dev.lat_us.len();
    let mut clean: Vec<f64> = (skip..n)
        .filter(|&i| {
            let from = dev.arrived_ns[i];
            let to = from + (dev.lat_us[i] * 1e3) as u64;
            !stallprobe::touched(stalls, from, to)
        })
        .map(|i| dev.lat_us[i])
        .collect();
    clean.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let counted = n.saturating_sub(skip).max(1);
    fig.p99_clean_us = percentile(&clean, 0.99);
    fig.stall_ms = stalls.iter().map(|s| s.dur_ns).sum::<u64>() as f64 / 1e6;
    fig.touched_pct = 100.0 * (counted - clean.len().min(counted)) as f64 / counted as f64;
    if debug {
        let t0 = dev.arrived_ns.first().copied().unwrap_or(0);
        let list: Vec<String> = stalls
            .iter()
            .map(|s| {
                let at = s.start_ns.saturating_sub(t0) as f64 / 1e6;
                format!("cpu{} @{at:.1} ms {:.0} us", s.cpu, s.dur_ns as f64 / 1e3)
            })
            .collect();
        eprintln!("STALLS {}: {}", list.len(), list.join(", "));
    }
}

/// The command line's settings every run shares, parsed once in `main`.
struct Settings {
    batch: usize,
    recv_cap: Option<usize>,
    redis_pid: u32,
    /// `--borrow`: small batches borrow keys ([`Runtime::set_borrow_reads`]).
    borrow: bool,
    /// `--stall-probe`: probe threads beside the paced runs ([`stallprobe`]).
    stall_probe: bool,
    /// `NFBENCH_DEBUG` set: paced and capped runs print their phases ([`breakdown`]).
    debug: bool,
}

/// What one run runs.
struct RunSpec<'a> {
    kind: &'a str,
    nf_id: &'a str,
    n_frames: usize,
    batch: usize,
    depth: usize,
    redis_pid: u32,
    borrow: bool,
    /// Print the store's counters after the run.
    debug: bool,
    /// Record the pipelined loop's per-packet phases ([`breakdown`]).
    phases: bool,
}

/// Run the NF over `dev` to its end: (figures without latency, per-batch receive-to-transmit
/// us, per-packet phases if recorded, the device).
fn run_dev<D: Device>(
    spec: &RunSpec,
    store: Box<dyn FlowStore>,
    dev: D,
) -> (RunFigures, Vec<f64>, Vec<PacketPhases>, D) {
    let &RunSpec {
        kind,
        nf_id,
        n_frames,
        batch,
        depth,
        redis_pid,
        borrow,
        debug,
        phases,
    } = spec;
    let opts = RuntimeOptions {
        batch_size: batch,
        fail_mode: FailMode::Closed,
        timer_interval_ms: 1000,
        owner_cache: false,
    };
    let mut rt = Runtime::new(
        make_nf(kind),
        store,
        dev,
        KeySpace::new(nf_id).unwrap(),
        opts,
    );
    // A loaded machine can push NAT's pool fill (one Lua call, 129k entries) past the client's
    // timeout; the script still completes in Redis and init is idempotent, so retry.
    let mut tries = 0;
    while let Err(e) = rt.init() {
        tries += 1;
        assert!(tries < 5, "init of {kind}: {e}");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    rt.set_pipeline_depth(depth);
    rt.set_borrow_reads(borrow);
    rt.record_latencies(true);
    rt.record_phases(phases);
    let s0 = rt.store_mut().stats();
    let (cpu0, rcpu0, ctx0) = (
        thread_cpu_ns(),
        process_cpu_ns(redis_pid),
        context_switches(),
    );
    let t0 = Instant::now();
    rt.run(TimeSource::Wall, &AtomicBool::new(false))
        .expect("run");
    let secs = t0.elapsed().as_secs_f64();
    let (cpu1, rcpu1, ctx1) = (
        thread_cpu_ns(),
        process_cpu_ns(redis_pid),
        context_switches(),
    );
    let n = n_frames.max(1) as f64;
    let s = rt.store_mut().stats();
    let fig = RunFigures {
        pps: n / secs,
        p50_us: f64::NAN,
        p99_us: f64::NAN,
        p99_all_us: f64::NAN,
        p99_clean_us: f64::NAN,
        stall_ms: f64::NAN,
        touched_pct: f64::NAN,
        cpu_us: cpu1.saturating_sub(cpu0) as f64 / 1e3 / n,
        busy_cpu_us: (cpu1.saturating_sub(cpu0) as f64 - (s.spin_ns - s0.spin_ns) as f64) / 1e3 / n,
        redis_cpu_us: rcpu1.saturating_sub(rcpu0) as f64 / 1e3 / n,
        round_trips_per_1000: (s.round_trips - s0.round_trips) as f64 * 1000.0 / n,
    };
    if debug {
        rt.snapshot();
        eprintln!(
            "DEBUG {kind} {s:?} {} | per pkt: cpu_us {:.3} busy_cpu_us {:.3} redis_cpu_us {:.3} \
             keys_read {:.3} keys_written {:.3} keys_borrowed {:.3} unplanned {:.4} | round_trips/1000 \
             pkts {:.1} | ctx switches/1000 pkts voluntary {:.1} involuntary {:.1} | wall us/pkt {:.3}",
            rt.nf().stats(),
            fig.cpu_us,
            fig.busy_cpu_us,
            fig.redis_cpu_us,
            s.keys_read as f64 / n,
            s.keys_written as f64 / n,
            rt.stats()
                .reads_borrowed
                .load(std::sync::atomic::Ordering::Relaxed) as f64
                / n,
            (s.unplanned_reads - s0.unplanned_reads) as f64 / n,
            fig.round_trips_per_1000,
            (ctx1.0 - ctx0.0) as f64 * 1000.0 / n,
            (ctx1.1 - ctx0.1) as f64 * 1000.0 / n,
            secs * 1e6 / n,
        );
    }
    let st = rt.stats();
    let rx = st.rx.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(rx as usize, n_frames);
    assert_eq!(
        st.store_errors.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "store errors in {kind}"
    );
    // These NFs must pass the whole workload, or the figures measure a broken run (e.g. an
    // IPS buffering a stream with gaps).
    if [
        "lb",
        "lb-pipelined",
        "ips",
        "l7fw",
        "ips-lastwins",
        "l7fw-lastwins",
    ]
    .contains(&kind)
    {
        let dropped = st.dropped_by_nf.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(dropped, 0, "{kind} dropped packets: {}", rt.nf().stats());
    }
    let lat = rt.take_latencies();
    let ph = rt.take_phases();
    let (_, _, dev) = rt.into_parts();
    (fig, lat, ph, dev)
}

/// Context switches of this thread: (voluntary = waits, involuntary = preempted).
fn context_switches() -> (i64, i64) {
    // SAFETY: getrusage writes the struct it is given; a zeroed rusage is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage owned by this frame.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return (0, 0);
    }
    (ru.ru_nvcsw, ru.ru_nivcsw)
}

/// Round trips of a one-key MGET (blocking, nothing else in flight) to the tier at `url`:
/// latency percentiles and the on-CPU time per round trip of this thread and of Redis, with the
/// client's default spin and without spinning.
fn rtt_probe(url: &str, redis_pid: u32, n: usize) -> Value {
    let mut out = serde_json::Map::new();
    for (name, spin_us) in [("spin", 200u64), ("nospin", 0)] {
        let mut cfg = bench_redis(url);
        cfg.spin = std::time::Duration::from_micros(spin_us);
        let mut s = RedisStore::connect(cfg).expect("connect");
        let key = vec![KeySpace::new("rtt").unwrap().flow(1, "x")];
        let mut vals = Vec::new();
        for _ in 0..n / 10 {
            s.get_many(&key, &mut vals).expect("warm-up");
        }
        let mut lat = Vec::with_capacity(n);
        let (cpu0, rcpu0) = (thread_cpu_ns(), process_cpu_ns(redis_pid));
        for _ in 0..n {
            let t = Instant::now();
            s.get_many(&key, &mut vals).expect("round trip");
            lat.push(t.elapsed().as_secs_f64() * 1e6);
        }
        let (cpu1, rcpu1) = (thread_cpu_ns(), process_cpu_ns(redis_pid));
        lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let r1 = |v: f64| (v * 100.0).round() / 100.0;
        out.insert(
            name.into(),
            json!({
                "p50_us": r1(percentile(&lat, 0.5)), "p99_us": r1(percentile(&lat, 0.99)),
                "client_cpu_us": r1(cpu1.saturating_sub(cpu0) as f64 / 1e3 / n as f64),
                "redis_cpu_us": r1(rcpu1.saturating_sub(rcpu0) as f64 / 1e3 / n as f64),
            }),
        );
    }
    Value::Object(out)
}

/// Client settings for the benchmark: a 2 s timeout, so a stall of this shared machine is measured
/// as latency rather than turned into a tier failure (the default 200 ms is for live NFs).
fn bench_redis(url: &str) -> RedisConfig {
    let mut c = RedisConfig::new(url);
    c.timeout = std::time::Duration::from_secs(2);
    c
}

/// With two or more CPUs: the NF (this process) on CPU 0 and Redis on CPU 1, so each mode runs
/// on one core with the tier beside it rather than wherever the scheduler puts them. Returns
/// whether both were pinned.
fn pin(redis_pid: u32) -> bool {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    if n < 2 {
        return false;
    }
    let set = |pid: libc::pid_t, cpu: usize| -> bool {
        // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it; pid is a process id.
        unsafe {
            let mut s: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut s);
            libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &s) == 0
        }
    };
    set(0, 0) & set(redis_pid as libc::pid_t, 1)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// The value after `flag`, parsed (`what` names it in the panic message of a bad value).
fn flag<T: std::str::FromStr>(args: &[String], name: &str, what: &str) -> Option<T> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} {what}: bad value {v:?}"))
        })
}

/// A comma-separated list after `name`.
fn flag_list(args: &[String], name: &str) -> Option<Vec<String>> {
    flag::<String>(args, name, "LIST").map(|s| s.split(',').map(String::from).collect())
}

/// The modes a run compares (stateless modes over the unix socket unless named `-tcp`).
const MODES: [&str; 5] = ["local", "sync", "stateless", "stateless-tcp", "cached"];

/// Median of each figure over repeats (latencies rounded to 0.1 us).
fn medians(acc: &[RunFigures]) -> Value {
    let m = |f: fn(&RunFigures) -> f64| median(acc.iter().map(f).collect());
    let r = |v: f64, k: f64| (v * k).round() / k;
    let mut v = json!({
        "pps": m(|r| r.pps).round(),
        "p50_us": r(m(|r| r.p50_us), 10.0),
        "p99_us": r(m(|r| r.p99_us), 10.0),
        "p99_all_us": r(m(|r| r.p99_all_us), 10.0),
        "cpu_us_per_pkt": r(m(|r| r.cpu_us), 1000.0),
        "busy_cpu_us_per_pkt": r(m(|r| r.busy_cpu_us), 1000.0),
        "redis_cpu_us_per_pkt": r(m(|r| r.redis_cpu_us), 1000.0),
        "round_trips_per_1000": r(m(|r| r.round_trips_per_1000), 10.0),
    });
    // The stall probe's figures, when every repeat had them (paced runs with the probe).
    type Figure = fn(&RunFigures) -> f64;
    let probed: [(&str, Figure, f64); 3] = [
        ("p99_clean_us", |r| r.p99_clean_us, 10.0),
        ("stall_ms", |r| r.stall_ms, 100.0),
        ("touched_pct", |r| r.touched_pct, 100.0),
    ];
    for (k, f, prec) in probed {
        if !acc.is_empty() && acc.iter().all(|x| f(x).is_finite()) {
            v[k] = json!(r(m(f), prec));
        }
    }
    v
}

/// Options taking a value, and switches.
const VALUE_FLAGS: [&str; 11] = [
    "--cpu-latency-us",
    "--batch",
    "--depth",
    "--scale",
    "--nfs",
    "--modes",
    "--workloads",
    "--paced-load",
    "--paced-pps",
    "--rtt",
    "--recv-cap",
];
const SWITCHES: [&str; 4] = ["--quick", "--no-pin", "--borrow", "--stall-probe"];

/// Checks the command line before anything runs: `Err` names the first unknown option or an
/// option missing its value (a typo must not silently run the whole default bench).
fn check_args(args: &[String]) -> Result<(), String> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if VALUE_FLAGS.contains(&a) {
            match args.get(i + 1) {
                Some(v) if !v.starts_with("--") => i += 2,
                _ => return Err(format!("{a}: missing value")),
            }
        } else if SWITCHES.contains(&a) {
            i += 1;
        } else {
            return Err(format!("unknown option {a:?}"));
        }
    }
    Ok(())
}

const USAGE: &str = "nf-bench [--quick] [--batch N] [--depth N] [--scale N] [--nfs LIST] [--modes LIST] \
[--workloads LIST] [--paced-load FRACTION] [--paced-pps N] [--rtt N] [--recv-cap N] [--borrow] [--no-pin] [--stall-probe] [--cpu-latency-us N]
  --nfs        firewall,nat,nat-pipelined,monitor,monitor-inc,monitor-wb,lb,lb-pipelined,ips,ips-lastwins,l7fw,l7fw-lastwins,ipsec-out,ipsec-in
  --modes      local,sync,stateless,stateless-tcp,cached
  --workloads  long64,long1500,short64,short1500
  --paced-load fraction of the lower saturated rate offered in the latency runs (0: none; default 0.5)
  --paced-pps  a fixed offered rate instead
  --rtt        round-trip probe requests (0: none)
  --recv-cap   saturated runs: a receive returns at most N frames (small batches, as below saturation)
  --borrow     small batches borrow keys earlier batches in flight read (off by default; A/B runs)
  --cpu-latency-us  hold this CPU wake-up latency bound during the whole run (0: idle CPUs poll)
  --stall-probe  paced runs: real-time probe threads record CPU stalls; adds p99_clean_us (packets no
               stall touched), stall_ms, touched_pct (a diagnosis: the probe's wake-ups perturb the run)
Prints one JSON object (see the crate docs); needs redis-server on PATH.";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return;
    }
    if let Err(e) = check_args(&args) {
        eprintln!("nf-bench: {e}\n{USAGE}");
        std::process::exit(2);
    }
    let quick = args.iter().any(|a| a == "--quick");
    let cpu_latency_us: Option<u32> = flag(&args, "--cpu-latency-us", "N");
    // Held to the end of main: both modes run under it.
    let _cpu_latency = cpu_latency_us.map(|us| {
        nfcore::cpu_latency::CpuLatencyRequest::hold(us)
            .unwrap_or_else(|e| panic!("--cpu-latency-us {us}: {e}"))
    });
    let nfs: Vec<String> = flag_list(&args, "--nfs").unwrap_or_else(|| {
        [
            "firewall",
            "nat",
            "monitor",
            "lb",
            "ips",
            "l7fw",
            "ipsec-out",
            "ipsec-in",
        ]
        .map(String::from)
        .to_vec()
    });
    let repeats = if quick { 1 } else { 3 };
    let scale: u32 = flag(&args, "--scale", "N").unwrap_or(if quick { 1 } else { 4 });
    let batch: usize =
        flag(&args, "--batch", "N").unwrap_or(nfcore::config::DEFAULT_BATCH_SIZE as usize);
    let only_modes = flag_list(&args, "--modes");
    if let Some(bad) = only_modes
        .iter()
        .flatten()
        .find(|m| !MODES.contains(&m.as_str()))
    {
        panic!("--modes: unknown mode {bad:?} ({})", MODES.join(", "));
    }
    let only_workloads = flag_list(&args, "--workloads");
    let depth: usize =
        flag(&args, "--depth", "N").unwrap_or(nfcore::runtime::DEFAULT_PIPELINE_DEPTH);
    let paced_load: f64 = flag(&args, "--paced-load", "FRACTION").unwrap_or(0.5);
    // A fixed offered rate (A/B runs of two builds on a busy machine: the same load for both).
    let paced_pps: Option<f64> = flag(&args, "--paced-pps", "N");
    if paced_pps.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
        panic!("--paced-pps N: must be a positive rate");
    }
    let recv_cap: Option<usize> = flag(&args, "--recv-cap", "N");
    if recv_cap == Some(0) {
        panic!("--recv-cap N: must be at least 1");
    }
    let rtt_n: usize = flag(&args, "--rtt", "N").unwrap_or(if quick { 5_000 } else { 20_000 });
    let redis = TestRedis::start().expect("redis-server (is it installed?)");
    let pinned = !args.iter().any(|a| a == "--no-pin") && pin(redis.pid());
    let settings = Settings {
        batch,
        recv_cap,
        redis_pid: redis.pid(),
        borrow: args.iter().any(|a| a == "--borrow"),
        stall_probe: args.iter().any(|a| a == "--stall-probe"),
        debug: std::env::var("NFBENCH_DEBUG").is_ok(),
    };
    let url_of = |mode: &str| {
        if mode.ends_with("-tcp") {
            redis.url()
        } else {
            redis.unix_url()
        }
    };
    let mut rtt = serde_json::Map::new();
    if rtt_n > 0 {
        for (name, url) in [("unix", redis.unix_url()), ("tcp", redis.url())] {
            rtt.insert(name.into(), rtt_probe(&url, redis.pid(), rtt_n));
        }
        eprintln!("rtt: {}", Value::Object(rtt.clone()));
    }
    let mut result = serde_json::Map::new();
    let mut run_id = 0u32;
    for kind in &nfs {
        let mut per_nf = serde_json::Map::new();
        for (wname, long, len) in [
            ("long64", true, 60),
            ("long1500", true, 1514),
            ("short64", false, 60),
            ("short1500", false, 1514),
        ] {
            if only_workloads
                .as_ref()
                .is_some_and(|o| !o.iter().any(|x| x == wname))
            {
                continue;
            }
            let shape = Shape {
                flows: if long { 16 } else { 1000 * scale },
                pkts_per_flow: if long { 1000 * scale } else { 20 },
                window: if long { 16 } else { 64 },
                frame_len: len,
                one_way: kind.starts_with("nat")
                    || kind.starts_with("lb")
                    || kind.starts_with("ipsec"),
                server: kind.starts_with("lb").then(|| LB_VIP.parse().unwrap()),
                first_payload: kind.starts_with("l7fw").then_some(HTTP_REQUEST),
            };
            let mut frames = workload::frames(&shape);
            if kind == "ipsec-in" {
                frames = encapsulated(&frames);
            }
            let mut modes: Vec<(&str, Vec<RunFigures>)> = MODES
                .into_iter()
                .filter(|m| only_modes.as_ref().is_none_or(|o| o.iter().any(|x| x == m)))
                .map(|m| (m, vec![]))
                .collect();
            let make_store = |mode: &str, nf_id: &str| -> Box<dyn FlowStore> {
                if mode == "local" {
                    return Box::new(LocalStore::new());
                }
                let r = RedisStore::connect(bench_redis(&url_of(mode))).unwrap();
                if mode == "cached" {
                    let epoch = KeySpace::new(nf_id).unwrap().global("epoch");
                    return Box::new(CachedStore::new(r, epoch, 1 << 20));
                }
                Box::new(r)
            };
            // sync: batch by batch (two round trips per batch, nothing in flight between batches),
            // the client before pipelining; the others: pipelined when the store can.
            let depth_of = |mode: &str| if mode == "sync" { 1 } else { depth };
            let mut run = |mode: &str, pps: Option<f64>| {
                run_id += 1;
                let nf_id = format!("bench{}-{run_id}", std::process::id());
                let store = make_store(mode, &nf_id);
                run_once(&settings, kind, store, &nf_id, &frames, depth_of(mode), pps)
            };
            for _ in 0..repeats {
                for (mode, acc) in modes.iter_mut() {
                    acc.push(run(mode, None));
                }
            }
            // Offered load for the latency runs: a fraction of what both local and stateless
            // carry (above a mode's capacity its queue, and so its latency, grows without bound).
            let sat = |name: &str| {
                modes
                    .iter()
                    .find(|(m, _)| *m == name)
                    .map(|(_, acc)| median(acc.iter().map(|r| r.pps).collect()))
            };
            let local_pps = match (sat("local"), sat("stateless")) {
                (Some(l), Some(s)) => Some(l.min(s)),
                (l, s) => l.or(s),
            };
            let mut paced = serde_json::Map::new();
            let latency_run = paced_load > 0.0 && (wname == "long64" || wname == "short64");
            if let (Some(lp), true) = (local_pps, latency_run) {
                let rate = paced_pps.unwrap_or(lp * paced_load);
                paced.insert("offered_pps".into(), json!(rate.round()));
                for (mode, _) in &modes {
                    let acc: Vec<RunFigures> =
                        (0..repeats).map(|_| run(mode, Some(rate))).collect();
                    // The NF's CPU is not a figure here: it polls its port while idle.
                    let mut m = medians(&acc);
                    for k in ["pps", "cpu_us_per_pkt", "busy_cpu_us_per_pkt"] {
                        m.as_object_mut().unwrap().remove(k);
                    }
                    paced.insert((*mode).into(), m);
                }
            }
            let mut w = serde_json::Map::new();
            for (mode, acc) in &modes {
                let mut m = medians(acc);
                m.as_object_mut().unwrap().remove("p99_all_us");
                w.insert((*mode).into(), m);
            }
            w.insert("packets".into(), json!(frames.len()));
            if !paced.is_empty() {
                w.insert("paced".into(), Value::Object(paced));
            }
            eprintln!("{kind} {wname}: {}", Value::Object(w.clone()));
            per_nf.insert(wname.into(), Value::Object(w));
        }
        result.insert(kind.clone(), Value::Object(per_nf));
    }
    println!(
        "{}",
        json!({"batch": batch, "depth": depth, "pinned": pinned, "paced_load": paced_load,
               "cpu_latency_us": cpu_latency_us,
               "repeats": repeats, "scale": scale, "rtt": rtt, "results": result})
    );
}

#[cfg(test)]
mod tests {
    use super::check_args;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn command_line_is_checked_before_running() {
        assert!(check_args(&args("")).is_ok());
        assert!(check_args(&args("--quick --nfs firewall,nat --batch 64 --no-pin")).is_ok());
        assert!(check_args(&args("--recv-cap 16 --borrow --paced-load 0")).is_ok());
        assert!(check_args(&args("--recv-cap"))
            .unwrap_err()
            .contains("missing value"));
        assert!(check_args(&args("--quik")).unwrap_err().contains("--quik"));
        assert!(check_args(&args("--batch"))
            .unwrap_err()
            .contains("missing value"));
        assert!(check_args(&args("--batch --quick"))
            .unwrap_err()
            .contains("--batch"));
        assert!(check_args(&args("--nfs firewall stray"))
            .unwrap_err()
            .contains("stray"));
    }
}
