//! `nf-bench [--quick] [--batch N] [--nfs firewall,nat,monitor,lb,ips,l7fw]`: packets/s on one core and per-batch latency
//! of each NF, stateless (Redis on loopback, started here) vs local, side by side, fed from memory.
//! Prints one JSON object: {nf: {workload: {mode: {pps, p50_us, p99_us}}}}. With NFBENCH_DEBUG set,
//! each run also prints its store counters (round trips, keys) and the NF's counters on stderr.

mod workload;

use flowstore::test_redis::TestRedis;
use flowstore::{CachedStore, FlowStore, KeySpace, LocalStore, RedisConfig, RedisStore};
use netio::mem::MemDevice;
use netio::Device;
use nfcore::config::RuntimeOptions;
use nfcore::runtime::Runtime;
use nfcore::{FailMode, NetworkFunction};
use serde_json::{json, Value};
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
                "public_ips": ["198.51.100.1", "198.51.100.2"], "ports": "1024-65535"}))
            .unwrap(),
        ),
        "monitor" => Box::new(nf_monitor::Monitor::from_config(&json!({})).unwrap()),
        "lb" => Box::new(
            nf_lb::LoadBalancer::from_config(&json!({"vip": LB_VIP, "port": 80,
                "backends": ["10.1.0.1:8080", "10.1.0.2:8080", "10.1.0.3:8080", "10.1.0.4:8080"]}))
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
        _ => panic!("unknown NF {kind}"),
    }
}

const LB_VIP: &str = "10.0.0.100";
const HTTP_REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: bench.example\r\n\r\n";

/// (packets/s, p50 us, p99 us) of one run.
type RunFigures = (f64, f64, f64);

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// One run: returns (packets/s, p50 us, p99 us of the per-batch processing time, which every
/// packet of the batch experiences between receive and transmit).
fn run_once(
    kind: &str,
    store: Box<dyn FlowStore>,
    nf_id: &str,
    frames: &[Vec<u8>],
    batch: usize,
) -> (f64, f64, f64) {
    let opts = RuntimeOptions {
        batch_size: batch,
        fail_mode: FailMode::Closed,
        timer_interval_ms: 1000,
        owner_cache: false,
    };
    let dev = MemDevice::new(frames.to_vec(), 1, false);
    let mut rt = Runtime::new(
        make_nf(kind),
        store,
        dev,
        KeySpace::new(nf_id).unwrap(),
        opts,
    );
    // A loaded machine can push NAT's pool fill (one Lua call, 129k entries) past the client's
    // 200 ms timeout; the script still completes in Redis and init is idempotent, so retry.
    let mut tries = 0;
    while let Err(e) = rt.init() {
        tries += 1;
        assert!(tries < 5, "init of {kind}: {e}");
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let mut lat = Vec::with_capacity(frames.len() / batch + 1);
    let t0 = Instant::now();
    let now = nfcore::runtime::wall_ns();
    while !rt.device().exhausted() {
        let s = Instant::now();
        rt.step(now).expect("step");
        lat.push(s.elapsed().as_secs_f64() * 1e6);
    }
    let secs = t0.elapsed().as_secs_f64();
    if std::env::var("NFBENCH_DEBUG").is_ok() {
        rt.snapshot();
        eprintln!(
            "DEBUG {kind} {:?} {}",
            rt.store_mut().stats(),
            rt.nf().stats()
        );
    }
    let st = rt.stats();
    let rx = st.rx.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(rx as usize, frames.len());
    assert_eq!(
        st.store_errors.load(std::sync::atomic::Ordering::Relaxed),
        0,
        "store errors in {kind}"
    );
    // The new NFs must pass the whole workload, or the figures measure a broken run (e.g. an
    // IPS buffering a stream with gaps).
    if ["lb", "ips", "l7fw"].contains(&kind) {
        let dropped = st.dropped_by_nf.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(dropped, 0, "{kind} dropped packets: {}", rt.nf().stats());
    }
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (
        rx as f64 / secs,
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
    )
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
            ["firewall", "nat", "monitor", "lb", "ips", "l7fw"]
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
    let redis = TestRedis::start().expect("redis-server (is it installed?)");
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
            let shape = Shape {
                flows: if long { 16 } else { 1000 * scale },
                pkts_per_flow: if long { 1000 * scale } else { 20 },
                window: if long { 16 } else { 64 },
                frame_len: len,
                one_way: kind == "nat" || kind == "lb",
                server: (kind == "lb").then(|| LB_VIP.parse().unwrap()),
                first_payload: (kind == "l7fw").then_some(HTTP_REQUEST),
            };
            let frames = workload::frames(&shape);
            let mut modes: Vec<(&str, Vec<RunFigures>)> =
                vec![("local", vec![]), ("stateless", vec![]), ("cached", vec![])];
            for _ in 0..repeats {
                for (mode, acc) in modes.iter_mut() {
                    run_id += 1;
                    let nf_id = format!("bench{}-{run_id}", std::process::id());
                    let store: Box<dyn FlowStore> = if *mode == "local" {
                        Box::new(LocalStore::new())
                    } else if *mode == "stateless" {
                        Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap())
                    } else {
                        let r = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
                        let epoch = KeySpace::new(&nf_id).unwrap().global("epoch");
                        Box::new(CachedStore::new(r, epoch, 1 << 20))
                    };
                    acc.push(run_once(kind, store, &nf_id, &frames, batch));
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
            eprintln!("{kind} {wname}: {}", Value::Object(w.clone()));
            per_nf.insert(wname.into(), Value::Object(w));
        }
        result.insert(kind.clone(), Value::Object(per_nf));
    }
    println!(
        "{}",
        json!({"batch": batch, "repeats": repeats, "results": result})
    );
}
