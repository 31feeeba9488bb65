//! `nf-bench [--quick] [--batch N] [--depth N] [--nfs firewall,nat,monitor,lb,lb-pipelined,ips,l7fw,ipsec-out,ipsec-in] [--modes local,sync,stateless,cached]
//!  [--workloads long64,long1500,short64,short1500] [--paced-load 0.5 (0: no latency runs)] [--no-pin]`: packets/s on one core and per-batch latency
//! of each NF, stateless (Redis on loopback, started here) vs local, side by side, fed from memory.
//! Prints one JSON object: {nf: {workload: {mode: {pps, p50_us, p99_us}, paced: {offered_pps,
//! mode: {p50_us, p99_us}}}}} (paced: long64 and short64 offered at a fraction of the lower of the
//! local and stateless saturation rates). With NFBENCH_DEBUG set, each run also prints its store
//! counters (round trips, keys) and the NF's counters on stderr.

mod paced;
mod workload;

use flowstore::test_redis::TestRedis;
use flowstore::{CachedStore, FlowStore, KeySpace, LocalStore, RedisConfig, RedisStore};
use netio::mem::MemDevice;
use netio::Device;
use nfcore::config::RuntimeOptions;
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
        "ips" => Box::new(
            nf_ips::Ips::from_config(&json!({
                "signatures": (0..64).map(|i| json!({"id": i, "content": format!("sig-{i:03}-attack")}))
                    .collect::<Vec<_>>(),
                "action": "drop", "alert_log": "/dev/null"}))
            .unwrap(),
        ),
        "l7fw" => Box::new(
            nf_l7fw::L7Firewall::from_config(&json!({
                "block": [{"proto": "tls", "sni": "*.bad.example"}, {"proto": "http", "host": "evil.example"}],
                "default": "allow"}))
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
const HTTP_REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: bench.example\r\n\r\n";

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

/// (packets/s, p50 us, p99 us) of one run.
type RunFigures = (f64, f64, f64);

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// One run: returns (packets/s, p50 us, p99 us). Unpaced (`pps` None): frames as fast as the NF
/// takes them; latency = per-batch receive-to-transmit time (every packet of the batch waits
/// for it) at saturation. Paced: full batches offered at `pps`; latency = arrival to transmit.
fn run_once(
    kind: &str,
    store: Box<dyn FlowStore>,
    nf_id: &str,
    frames: &[Vec<u8>],
    batch: usize,
    depth: usize,
    pps: Option<f64>,
) -> RunFigures {
    let (rate, mut lat) = match pps {
        None => {
            let dev = MemDevice::new(frames.to_vec(), 1, false);
            let (rate, lat, _) = run_dev(kind, store, nf_id, dev, frames.len(), batch, depth);
            (rate, lat)
        }
        Some(r) => {
            let dev = paced::PacedDevice::new(frames.to_vec(), batch, r);
            let (rate, _, dev) = run_dev(kind, store, nf_id, dev, frames.len(), batch, depth);
            (rate, dev.lat_us)
        }
    };
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (rate, percentile(&lat, 0.5), percentile(&lat, 0.99))
}

/// CPU time of this thread (user + system, us) and its voluntary context switches (waits).
fn thread_usage() -> (f64, i64) {
    // SAFETY: getrusage writes the struct it is given; a zeroed rusage is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage owned by this frame.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return (f64::NAN, 0);
    }
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    (us(ru.ru_utime) + us(ru.ru_stime), ru.ru_nvcsw)
}

/// Run the NF over `dev` to its end: (packets/s, per-batch receive-to-transmit us, the device).
fn run_dev<D: Device>(
    kind: &str,
    store: Box<dyn FlowStore>,
    nf_id: &str,
    dev: D,
    n_frames: usize,
    batch: usize,
    depth: usize,
) -> (f64, Vec<f64>, D) {
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
    rt.record_latencies(true);
    let ru0 = thread_usage();
    let t0 = Instant::now();
    rt.run(TimeSource::Wall, &AtomicBool::new(false))
        .expect("run");
    let secs = t0.elapsed().as_secs_f64();
    let ru1 = thread_usage();
    if std::env::var("NFBENCH_DEBUG").is_ok() {
        rt.snapshot();
        let s = rt.store_mut().stats();
        // Load-independent figures: CPU time of the NF thread (not wall time), and the store
        // traffic per packet.
        let n = n_frames.max(1) as f64;
        eprintln!(
            "DEBUG {kind} {s:?} {} | per pkt: cpu_us {:.3} keys_read {:.3} keys_written {:.3} | \
             round_trips/1000 pkts {:.1} | voluntary ctx switches/1000 pkts {:.1}",
            rt.nf().stats(),
            (ru1.0 - ru0.0) / n,
            s.keys_read as f64 / n,
            s.keys_written as f64 / n,
            s.round_trips as f64 * 1000.0 / n,
            (ru1.1 - ru0.1) as f64 * 1000.0 / n,
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
    if ["lb", "lb-pipelined", "ips", "l7fw"].contains(&kind) {
        let dropped = st.dropped_by_nf.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(dropped, 0, "{kind} dropped packets: {}", rt.nf().stats());
    }
    let lat = rt.take_latencies();
    let (_, _, dev) = rt.into_parts();
    (rx as f64 / secs, lat, dev)
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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let nfs: Vec<String> = args
        .iter()
        .position(|a| a == "--nfs")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').map(String::from).collect())
        .unwrap_or_else(|| {
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
    let scale = if quick { 1 } else { 4 };
    let batch: usize = args
        .iter()
        .position(|a| a == "--batch")
        .and_then(|i| args.get(i + 1))
        .map(|b| b.parse().expect("--batch N"))
        .unwrap_or(32);
    let only_modes: Option<Vec<String>> = args
        .iter()
        .position(|a| a == "--modes")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').map(String::from).collect());
    let only_workloads: Option<Vec<String>> = args
        .iter()
        .position(|a| a == "--workloads")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').map(String::from).collect());
    let depth: usize = args
        .iter()
        .position(|a| a == "--depth")
        .and_then(|i| args.get(i + 1))
        .map(|b| b.parse().expect("--depth N"))
        .unwrap_or(nfcore::runtime::DEFAULT_PIPELINE_DEPTH);
    let paced_load: f64 = args
        .iter()
        .position(|a| a == "--paced-load")
        .and_then(|i| args.get(i + 1))
        .map(|b| b.parse().expect("--paced-load FRACTION"))
        .unwrap_or(0.5);
    let redis = TestRedis::start().expect("redis-server (is it installed?)");
    let pinned = !args.iter().any(|a| a == "--no-pin") && pin(redis.pid());
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
                first_payload: (kind == "l7fw").then_some(HTTP_REQUEST),
            };
            let mut frames = workload::frames(&shape);
            if kind == "ipsec-in" {
                frames = encapsulated(&frames);
            }
            let mut modes: Vec<(&str, Vec<RunFigures>)> = ["local", "sync", "stateless", "cached"]
                .into_iter()
                .filter(|m| only_modes.as_ref().is_none_or(|o| o.iter().any(|x| x == m)))
                .map(|m| (m, vec![]))
                .collect();
            let make_store = |mode: &str, nf_id: &str| -> Box<dyn FlowStore> {
                match mode {
                    "local" => Box::new(LocalStore::new()),
                    "stateless" | "sync" => {
                        Box::new(RedisStore::connect(bench_redis(&redis.url())).unwrap())
                    }
                    _ => {
                        let r = RedisStore::connect(bench_redis(&redis.url())).unwrap();
                        let epoch = KeySpace::new(nf_id).unwrap().global("epoch");
                        Box::new(CachedStore::new(r, epoch, 1 << 20))
                    }
                }
            };
            // sync: batch by batch (two round trips per batch, nothing in flight between batches),
            // the client before pipelining; stateless and cached: pipelined when the store can.
            let depth_of = |mode: &str| if mode == "sync" { 1 } else { depth };
            for _ in 0..repeats {
                for (mode, acc) in modes.iter_mut() {
                    run_id += 1;
                    let nf_id = format!("bench{}-{run_id}", std::process::id());
                    let store = make_store(mode, &nf_id);
                    acc.push(run_once(
                        kind,
                        store,
                        &nf_id,
                        &frames,
                        batch,
                        depth_of(mode),
                        None,
                    ));
                }
            }
            // Offered load for the latency runs: a fraction of what both local and stateless
            // carry (above a mode's capacity its queue, and so its latency, grows without bound).
            let sat = |name: &str| {
                modes
                    .iter()
                    .find(|(m, _)| *m == name)
                    .map(|(_, acc)| median(acc.iter().map(|r| r.0).collect()))
            };
            let local_pps = match (sat("local"), sat("stateless")) {
                (Some(l), Some(s)) => Some(l.min(s)),
                (l, s) => l.or(s),
            };
            // Latency at a fixed offered load (a fraction of the local baseline's rate).
            let mut paced = serde_json::Map::new();
            let latency_run = paced_load > 0.0 && (wname == "long64" || wname == "short64");
            if let (Some(lp), true) = (local_pps, latency_run) {
                let rate = lp * paced_load;
                paced.insert("offered_pps".into(), json!(rate.round()));
                for (mode, _) in &modes {
                    let mut acc = vec![];
                    for _ in 0..repeats {
                        run_id += 1;
                        let nf_id = format!("bench{}-{run_id}", std::process::id());
                        let store = make_store(mode, &nf_id);
                        acc.push(run_once(
                            kind,
                            store,
                            &nf_id,
                            &frames,
                            batch,
                            depth_of(mode),
                            Some(rate),
                        ));
                    }
                    paced.insert(
                        (*mode).into(),
                        json!({
                            "p50_us": (median(acc.iter().map(|r| r.1).collect()) * 10.0).round() / 10.0,
                            "p99_us": (median(acc.iter().map(|r| r.2).collect()) * 10.0).round() / 10.0,
                        }),
                    );
                }
            }
            let mut w = serde_json::Map::new();
            for (mode, acc) in modes {
                w.insert(
                    mode.into(),
                    json!({
                        "pps": median(acc.iter().map(|r| r.0).collect()).round(),
                        "p50_us": (median(acc.iter().map(|r| r.1).collect()) * 10.0).round() / 10.0,
                        "p99_us": (median(acc.iter().map(|r| r.2).collect()) * 10.0).round() / 10.0,
                    }),
                );
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
        json!({"batch": batch, "depth": depth, "pinned": pinned, "paced_load": paced_load, "repeats": repeats, "results": result})
    );
}
