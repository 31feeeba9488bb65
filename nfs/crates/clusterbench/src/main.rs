//! `cluster-bench`: the NF's own Redis Cluster client (`flowstore::ClusterStore`) against the
//! maintained `redis` crate's cluster client, side by side on the same batches and the same
//! cluster (and one plain Redis as the single-node reference), plus the cost of `WAIT`.
//!
//! A batch is what an NF sends per batch of packets: a read of B flow keys (values of a monitor
//! record's size), then a write of the same B keys. Modes, interleaved round by round:
//! - `own`: `get_many` + `write_many` (batch by batch: one pipeline per master each);
//! - `own-nospin`: the same with `spin` 0 (blocks on a reply at once, as the crate does; the
//!   default spins up to 200 us first, which on a machine with fewer cores than processes takes
//!   CPU from the servers);
//! - `own-pipelined`: the runtime's way, up to `--depth` batches' groups in flight;
//! - `crate`: `redis::cluster::cluster_pipe()` of B GETs, then one of B SETs (the crate sends
//!   one pipeline per node and then reads them, like `own`);
//! - `own-wait`: `own-pipelined` with `WAIT 1 100` after each write group (needs replicas);
//! - `single` / `single-pipelined`: `RedisStore` on one redis-server.
//!
//! Then the NF itself (`nf-*`, packets/s): the monitor NF (a 56-byte record per flow, read and
//! written per packet's batch) in the runtime's pipelined loop (batch 64, depth 8) over frames of
//! `--keys` flows from memory, on one Redis, on the cluster, and on the cluster with `WAIT 1`.
//!
//! `cluster-bench [--masters 3] [--replicas 1] [--batch 64] [--keys 4096] [--depth 8]
//! [--secs 1.0] [--rounds 5] [--url redis-cluster://...] [--modes MODE,...]`: starts its own cluster (and
//! redis-server) unless `--url` is given; the last line is JSON (medians of the rounds).

use flowstore::test_cluster::TestCluster;
use flowstore::test_redis::TestRedis;
use flowstore::{
    ClusterStore, FlowStore, Key, KeySpace, RedisConfig, RedisStore, WaitPolicy, WriteOp,
};
use std::time::{Duration, Instant};

struct Opts {
    masters: usize,
    replicas: usize,
    batch: usize,
    keys: usize,
    depth: usize,
    secs: f64,
    rounds: usize,
    url: Option<String>,
    /// Run only these modes (all when None).
    only: Option<Vec<String>>,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        masters: 3,
        replicas: 1,
        batch: 64,
        keys: 4096,
        depth: 8,
        secs: 1.0,
        rounds: 5,
        url: None,
        only: None,
    };
    let a: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < a.len() {
        let v = a.get(i + 1).ok_or(format!("{} needs a value", a[i]))?;
        let n = || {
            v.parse::<usize>()
                .map_err(|_| format!("{} must be a number, not {v:?}", a[i]))
        };
        match a[i].as_str() {
            "--masters" => o.masters = n()?,
            "--replicas" => o.replicas = n()?,
            "--batch" => o.batch = n()?,
            "--keys" => o.keys = n()?,
            "--depth" => o.depth = n()?,
            "--rounds" => o.rounds = n()?,
            "--secs" => {
                o.secs = v
                    .parse()
                    .map_err(|_| format!("--secs must be a number, not {v:?}"))?
            }
            "--url" => o.url = Some(v.clone()),
            "--modes" => o.only = Some(v.split(',').map(String::from).collect()),
            x => return Err(format!("unknown option {x:?}")),
        }
        i += 2;
    }
    if o.masters < 3 || o.batch == 0 || o.keys < o.batch || o.depth == 0 || o.rounds == 0 {
        return Err(
            "--masters >= 3, --batch >= 1, --keys >= --batch, --depth >= 1, --rounds >= 1".into(),
        );
    }
    Ok(o)
}

/// The batches: `batch` distinct keys each, drawn from `keys` flows (xorshift, fixed seed).
fn batches(o: &Opts) -> Vec<Vec<Key>> {
    let ks = KeySpace::new("bench").unwrap();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..256)
        .map(|_| {
            let mut b: Vec<Key> = Vec::with_capacity(o.batch);
            let mut seen = std::collections::HashSet::new();
            while b.len() < o.batch {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let f = x % o.keys as u64;
                if seen.insert(f) {
                    b.push(ks.flow(f, "mon"));
                }
            }
            b
        })
        .collect()
}

const VALUE: [u8; 56] = [7; 56];

fn writes(keys: &[Key]) -> Vec<WriteOp> {
    keys.iter()
        .map(|k| WriteOp::Set {
            key: k.clone(),
            value: VALUE.to_vec(),
        })
        .collect()
}

/// Batches per second of `step` over `secs`.
fn timed(secs: f64, mut step: impl FnMut(usize)) -> f64 {
    let t0 = Instant::now();
    let mut n = 0;
    while t0.elapsed().as_secs_f64() < secs {
        step(n);
        n += 1;
    }
    n as f64 / t0.elapsed().as_secs_f64()
}

fn blocking(s: &mut dyn FlowStore, b: &[Vec<Key>], w: &[Vec<WriteOp>], secs: f64) -> f64 {
    let mut out = Vec::new();
    timed(secs, |n| {
        let i = n % b.len();
        s.get_many(&b[i], &mut out).expect("read");
        assert_eq!(out.len(), b[i].len());
        s.write_many(&w[i]).expect("write");
    })
}

/// The runtime's pattern: reads sent `depth` batches ahead, each batch's writes queued behind
/// the later reads; a batch is done when its writes are acknowledged.
fn pipelined(
    s: &mut dyn FlowStore,
    b: &[Vec<Key>],
    w: &[Vec<WriteOp>],
    depth: usize,
    secs: f64,
) -> f64 {
    let p = s.pipeline().expect("pipelines");
    let mut out = Vec::new();
    let mut sent = 0usize;
    let mut expect = std::collections::VecDeque::new();
    let t0 = Instant::now();
    let mut done = 0usize;
    while t0.elapsed().as_secs_f64() < secs {
        while sent < done + depth {
            p.send_reads(&b[sent % b.len()]).expect("send reads");
            expect.push_back((true, sent));
            sent += 1;
        }
        p.flush().expect("flush");
        let (reads, i) = expect.pop_front().expect("in flight");
        p.recv(&mut out).expect("recv");
        if reads {
            p.send_writes(&w[i % w.len()]).expect("send writes");
            expect.push_back((false, i));
        } else {
            assert!(p.last_durable(), "WAIT not met");
            done += 1;
        }
    }
    let rate = done as f64 / t0.elapsed().as_secs_f64();
    while expect.pop_front().is_some() {
        p.recv(&mut out).expect("recv");
    }
    rate
}

fn crate_client(url: &str, b: &[Vec<Key>], secs: f64) -> f64 {
    let seeds: Vec<String> = flowstore::parse_cluster_url(url)
        .unwrap()
        .into_iter()
        .map(|a| format!("redis://{a}"))
        .collect();
    let client = redis::cluster::ClusterClient::new(seeds).expect("redis crate client");
    let mut con = client.get_connection().expect("redis crate connect");
    timed(secs, |n| {
        let keys = &b[n % b.len()];
        let mut p = redis::cluster::cluster_pipe();
        for k in keys {
            p.cmd("GET").arg(k.as_slice());
        }
        let v: Vec<Option<Vec<u8>>> = p.query(&mut con).expect("crate read");
        assert_eq!(v.len(), keys.len());
        let mut p = redis::cluster::cluster_pipe();
        for k in keys {
            p.cmd("SET").arg(k.as_slice()).arg(&VALUE[..]).ignore();
        }
        let () = p.query(&mut con).expect("crate write");
    })
}

/// 64-byte TCP frames, the flows in turn.
fn nf_frames(flows: usize, n: usize) -> Vec<Vec<u8>> {
    use packet::build::{FrameSpec, Transport};
    use std::net::{IpAddr, Ipv4Addr};
    (0..n)
        .map(|i| {
            let f = (i % flows) as u32;
            let c = IpAddr::V4(Ipv4Addr::new(10, (f >> 16) as u8, (f >> 8) as u8, f as u8));
            let s = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
            let t = Transport::Tcp {
                seq: i as u32,
                ack: 1,
                flags: packet::TCP_ACK,
            };
            FrameSpec::new(c, s, 20_000 + (f % 40_000) as u16, 80, t).build()
        })
        .collect()
}

/// Packets/s of the monitor NF over `frames` on `store` (pipelined loop, depth `depth`).
fn nf_pps(store: Box<dyn FlowStore>, frames: &[Vec<u8>], depth: usize, nf_id: &str) -> f64 {
    use nfcore::runtime::{Runtime, TimeSource};
    let nf = nf_monitor::Monitor::from_config(&serde_json::json!({})).expect("monitor");
    let opts = nfcore::config::RuntimeOptions {
        batch_size: 64,
        fail_mode: nfcore::FailMode::Closed,
        timer_interval_ms: 3_600_000,
        owner_cache: false,
    };
    let dev = netio::mem::MemDevice::new(frames.to_vec(), 1, false);
    let mut rt = Runtime::new(
        Box::new(nf),
        store,
        dev,
        KeySpace::new(nf_id).unwrap(),
        opts,
    );
    rt.set_pipeline_depth(depth);
    rt.init().expect("init");
    let t0 = Instant::now();
    rt.run(TimeSource::Wall, &std::sync::atomic::AtomicBool::new(false))
        .expect("run");
    let secs = t0.elapsed().as_secs_f64();
    let st = rt.stats();
    let tx = st.tx.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(tx as usize, frames.len(), "every packet forwarded");
    tx as f64 / secs
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("cluster-bench: {e}");
            std::process::exit(2);
        }
    };
    let own_cluster;
    let url = match &o.url {
        Some(u) => u.clone(),
        None => {
            own_cluster = TestCluster::start(o.masters, o.replicas, 5000).expect("start a cluster");
            own_cluster.url()
        }
    };
    let single = TestRedis::start().expect("start redis-server");
    let b = batches(&o);
    let w: Vec<Vec<WriteOp>> = b.iter().map(|k| writes(k)).collect();
    let cfg = |url: &str, wait: Option<WaitPolicy>| {
        let mut c = RedisConfig::new(url);
        c.timeout = Duration::from_secs(2);
        c.wait = wait;
        c
    };
    let mut own = ClusterStore::connect(cfg(&url, None)).expect("own client");
    let mut one = RedisStore::connect(cfg(&single.url(), None)).expect("single redis");
    let wait = WaitPolicy {
        replicas: 1,
        timeout_ms: 100,
    };
    let mut own_nospin = ClusterStore::connect(RedisConfig {
        spin: Duration::ZERO,
        ..cfg(&url, None)
    })
    .expect("own client, no spin");
    let mut own_wait = (o.replicas > 0)
        .then(|| ClusterStore::connect(cfg(&url, Some(wait))).expect("own client, WAIT"));
    // Fill the keys once, so reads return values.
    for x in &w {
        own.write_many(x).unwrap();
        one.write_many(x).unwrap();
    }
    let modes = [
        "own",
        "own-nospin",
        "own-pipelined",
        "crate",
        "own-wait",
        "single",
        "single-pipelined",
        "nf-single",
        "nf-cluster",
        "nf-cluster-wait",
    ];
    let frames = nf_frames(o.keys, 100_000);
    let mut res: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for r in 0..o.rounds {
        for (m, name) in modes.iter().enumerate() {
            if o.only
                .as_ref()
                .is_some_and(|v| !v.iter().any(|x| x == name))
            {
                continue;
            }
            let rate = match *name {
                "own" => blocking(&mut own, &b, &w, o.secs),
                "own-nospin" => blocking(&mut own_nospin, &b, &w, o.secs),
                "own-pipelined" => pipelined(&mut own, &b, &w, o.depth, o.secs),
                "crate" => crate_client(&url, &b, o.secs),
                "own-wait" => match own_wait.as_mut() {
                    Some(s) => pipelined(s, &b, &w, o.depth, o.secs),
                    None => continue,
                },
                "single" => blocking(&mut one, &b, &w, o.secs),
                "single-pipelined" => pipelined(&mut one, &b, &w, o.depth, o.secs),
                "nf-single" => {
                    let s = RedisStore::connect(cfg(&single.url(), None)).expect("single");
                    nf_pps(Box::new(s), &frames, o.depth, "nfb")
                }
                "nf-cluster" => {
                    let s = ClusterStore::connect(cfg(&url, None)).expect("cluster");
                    nf_pps(Box::new(s), &frames, o.depth, "nfb")
                }
                _ => {
                    if o.replicas == 0 {
                        continue;
                    }
                    let s = ClusterStore::connect(cfg(&url, Some(wait))).expect("cluster");
                    nf_pps(Box::new(s), &frames, o.depth, "nfb")
                }
            };
            if name.starts_with("nf-") {
                eprintln!("round {r} {name}: {rate:.0} packets/s");
            } else {
                eprintln!(
                    "round {r} {name}: {rate:.0} batches/s ({:.0} keys/s)",
                    rate * o.batch as f64
                );
            }
            res[m].push(rate);
        }
    }
    let idx = |n: &str| modes.iter().position(|m| *m == n).unwrap();
    // Ratios per round (the two modes ran seconds apart), then their median: on a machine whose
    // load moves, steadier than a ratio of medians.
    let paired = |a: &str, b: &str| {
        let (x, y) = (&res[idx(a)], &res[idx(b)]);
        let v: Vec<f64> = x.iter().zip(y).map(|(p, q)| p / q).collect();
        if v.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::json!((median(v) * 1000.0).round() / 1000.0)
        }
    };
    let mut j = serde_json::json!({
        "masters": o.masters, "replicas": o.replicas, "batch": o.batch, "keys": o.keys,
        "depth": o.depth, "secs": o.secs, "rounds": o.rounds,
        "unit": "batches/s (median); nf-*: packets/s (median); ratios: median of per-round ratios",
        "nf_ratio_cluster_vs_single": paired("nf-cluster", "nf-single"),
        "nf_ratio_wait_vs_nowait": paired("nf-cluster-wait", "nf-cluster"),
        "ratio_crate_vs_own": paired("crate", "own"),
        "ratio_crate_vs_own_nospin": paired("crate", "own-nospin"),
        "ratio_own_pipelined_vs_crate": paired("own-pipelined", "crate"),
        "ratio_cluster_vs_single_pipelined": paired("own-pipelined", "single-pipelined"),
        "ratio_wait_vs_nowait": paired("own-wait", "own-pipelined"),
    });
    let med: Vec<f64> = res
        .into_iter()
        .map(|v| if v.is_empty() { 0.0 } else { median(v) })
        .collect();
    for (m, v) in modes.iter().zip(&med) {
        j[*m] = serde_json::json!(v.round());
    }
    println!("{j}");
}
