//! The pipelined runtime (several batches in flight on one Redis connection) gives the same
//! packets out and the same state in the tier as the local baseline, on traffic where later
//! batches read what earlier ones wrote (handshakes, counters, NAT mappings made by
//! compare-and-set), at several depths and batch sizes, with and without the owner cache.

use flowstore::test_redis::TestRedis;
use flowstore::{FlowStore, Key, KeySpace, LocalStore, RedisConfig, RedisStore};
use nfcore::harness::{recording_runtime, run_frames_depth, RecordingDevice};
use nfcore::runtime::TimeSource;
use nfcore::NetworkFunction;
use packet::build::{FrameSpec, Transport};
use packet::{Parsed, TCP_ACK, TCP_FIN, TCP_PSH, TCP_SYN};
use serde_json::json;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// `flows` TCP connections of `n` packets (handshake, data both ways unless `one_way`, FIN),
/// `window` active at a time, round-robin; 1 us apart (so timers rarely interrupt the pipeline).
fn traffic(flows: u32, n: u32, window: u32, one_way: bool) -> Vec<(u64, Vec<u8>)> {
    let mut out = vec![];
    let mut active: Vec<(u32, u32)> = vec![];
    let mut next = 0;
    while next < flows || !active.is_empty() {
        while active.len() < window as usize && next < flows {
            active.push((next, 0));
            next += 1;
        }
        let mut k = 0;
        while k < active.len() {
            let (f, i) = active[k];
            let client = IpAddr::V4(Ipv4Addr::new(10, 0, (f / 250) as u8, 1 + (f % 250) as u8));
            let server = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1 + (f % 7) as u8));
            let cport = 20_000 + f as u16;
            let back = !one_way && i % 2 == 1;
            let flags = match i {
                0 => TCP_SYN,
                1 if !one_way => TCP_SYN | TCP_ACK,
                _ if i + 1 == n => TCP_FIN | TCP_ACK,
                _ => TCP_PSH | TCP_ACK,
            };
            let t = Transport::Tcp {
                seq: i,
                ack: 0,
                flags,
            };
            let spec = if back {
                FrameSpec::new(server, client, 80, cport, t)
            } else {
                FrameSpec::new(client, server, cport, 80, t)
            };
            out.push((1_000_000_000 + out.len() as u64 * 1000, spec.build()));
            if i + 1 == n {
                active.swap_remove(k);
            } else {
                active[k].1 += 1;
                k += 1;
            }
        }
    }
    out
}

fn make(kind: &str) -> Box<dyn NetworkFunction> {
    match kind {
        "firewall" => Box::new(
            nf_firewall::Firewall::from_config(&json!({
                "rules": [{"action": "allow", "proto": "tcp", "src": "10.0.0.0/8", "dst_port": 80}]}))
            .unwrap(),
        ),
        "nat" => Box::new(
            nf_nat::Nat::from_config(&json!({"inside": ["10.0.0.0/8"],
                "public_ips": ["198.51.100.1"], "ports": "20000-29999"}))
            .unwrap(),
        ),
        "ips" => Box::new(
            nf_ips::Ips::from_config(&json!({
                "signatures": [{"id": 1, "content": "attack"}], "alert_log": "/dev/null"}))
            .unwrap(),
        ),
        _ => Box::new(nf_monitor::Monitor::from_config(&json!({})).unwrap()),
    }
}

/// Values of `keys` in `store`.
fn state(store: &mut dyn FlowStore, keys: &[Key]) -> Vec<Option<Vec<u8>>> {
    let mut out = vec![];
    store.get_many(keys, &mut out).unwrap();
    out
}

/// The monitor's per-flow counters of `frames` in the tier equal the local ones.
fn assert_same_counters(
    frames: &[(u64, Vec<u8>)],
    local: (&mut dyn FlowStore, &str),
    remote: (&mut dyn FlowStore, &str),
    what: &str,
) {
    let keys_of = |id: &str| -> Vec<Key> {
        let ks = KeySpace::new(id).unwrap();
        let mut v: Vec<Key> = frames
            .iter()
            .map(|(_, f)| nf_monitor::Monitor::key(&ks, &Parsed::new_checked(f).unwrap()))
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let a = state(local.0, &keys_of(local.1));
    let b = state(remote.0, &keys_of(remote.1));
    assert!(a.iter().all(|v| v.is_some()));
    assert_eq!(a, b, "{what}: counters");
}

#[test]
fn pipelined_matches_local_outputs_and_state() {
    let redis = TestRedis::start().expect("redis-server");
    let mut run = 0;
    for kind in ["firewall", "nat", "monitor"] {
        let frames = traffic(120, 12, 24, kind == "nat");
        for batch in [1, 8, 32] {
            let (want, _, mut local) = run_frames_depth(
                make(kind),
                Box::new(LocalStore::new()),
                "p",
                &frames,
                batch,
                1,
            );
            assert!(want.iter().filter(|o| o.is_some()).count() > frames.len() / 2);
            for (depth, cached) in [(2, false), (8, false), (8, true)] {
                run += 1;
                let nf_id = format!("p{run}");
                let r = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
                let store: Box<dyn FlowStore> = if cached {
                    // Owner cache: reads of cached keys complete without the tier.
                    let epoch = KeySpace::new(&nf_id).unwrap().global("epoch");
                    Box::new(flowstore::CachedStore::new(r, epoch, 1 << 16))
                } else {
                    Box::new(r)
                };
                let (got, _, mut remote) =
                    run_frames_depth(make(kind), store, &nf_id, &frames, batch, depth);
                let first_diff = got.iter().zip(&want).position(|(a, b)| a != b);
                assert_eq!(
                    first_diff, None,
                    "{kind} batch {batch} depth {depth} cached {cached}: first packet out that differs"
                );
                assert_eq!(got.len(), want.len());
                assert_eq!(remote.stats().errors, 0);
                if kind == "monitor" {
                    let what = format!("monitor batch {batch} depth {depth}");
                    assert_same_counters(
                        &frames,
                        (local.as_mut(), "p"),
                        (remote.as_mut(), &nf_id),
                        &what,
                    );
                }
            }
        }
    }
}

/// Below saturation a port returns what has arrived: batches of a few frames, taken while others
/// are in flight by the self-clocking intake (at most two small ones waiting for their reads, full
/// ones up to the depth). Outputs and state still equal the local baseline's.
#[test]
fn pipelined_small_batches_match_local() {
    let redis = TestRedis::start().expect("redis-server");
    for kind in ["firewall", "nat", "monitor"] {
        let frames = traffic(60, 12, 24, kind == "nat");
        let (want, _, mut local) =
            run_frames_depth(make(kind), Box::new(LocalStore::new()), "s", &frames, 32, 1);
        for (i, sizes) in [vec![1, 2, 1, 5, 32, 3, 0, 1, 17, 32, 32], vec![1]]
            .into_iter()
            .enumerate()
        {
            let nf_id = format!("s-{kind}-{i}");
            let store = RedisStore::connect(RedisConfig::new(&redis.unix_url())).unwrap();
            let mut rt = recording_runtime(make(kind), Box::new(store), &nf_id, vec![], 32, 1);
            *rt.device_mut() = RecordingDevice::new(frames.clone()).trickle(sizes);
            rt.set_pipeline_depth(8);
            rt.run(TimeSource::Packets, &AtomicBool::new(false))
                .expect("run");
            let small = rt.stats().batches.load(Relaxed);
            let (_, mut remote, dev) = rt.into_parts();
            assert!(
                small as usize > frames.len() / 16,
                "{kind}: {small} batches"
            );
            let first_diff = dev.out.iter().zip(&want).position(|(a, b)| a != b);
            assert_eq!(
                first_diff, None,
                "{kind} sizes {i}: first packet out that differs"
            );
            assert_eq!(remote.stats().errors, 0);
            if kind == "monitor" {
                let what = format!("monitor sizes {i}");
                assert_same_counters(
                    &frames,
                    (local.as_mut(), "s"),
                    (remote.as_mut(), &nf_id),
                    &what,
                );
            }
        }
    }
}

/// Few flows, so consecutive small batches read the same keys: a small batch borrows the keys an
/// earlier batch in flight reads and keeps writing (the monitor's counters every packet; the
/// firewall's record through a handshake, after which it is only read: a borrowed key not
/// written after all is read when needed). Outputs and state equal the local baseline's.
#[test]
fn pipelined_borrowed_reads_match_local() {
    let redis = TestRedis::start().expect("redis-server");
    for kind in ["monitor", "firewall", "nat", "ips"] {
        let frames = traffic(12, 40, 4, kind == "nat");
        let (want, _, mut local) =
            run_frames_depth(make(kind), Box::new(LocalStore::new()), "b", &frames, 32, 1);
        let nf_id = format!("b-{kind}");
        let store = RedisStore::connect(RedisConfig::new(&redis.unix_url())).unwrap();
        let mut rt = recording_runtime(make(kind), Box::new(store), &nf_id, vec![], 32, 1);
        *rt.device_mut() =
            RecordingDevice::new(frames.clone()).trickle(vec![1, 2, 3, 1, 1, 4, 2, 0, 1, 5]);
        rt.set_pipeline_depth(8);
        rt.set_borrow_reads(true);
        rt.run(TimeSource::Packets, &AtomicBool::new(false))
            .expect("run");
        let borrowed = rt.stats().reads_borrowed.load(Relaxed);
        let (_, mut remote, dev) = rt.into_parts();
        let first_diff = dev.out.iter().zip(&want).position(|(a, b)| a != b);
        assert_eq!(first_diff, None, "{kind}: first packet out that differs");
        assert_eq!(dev.out.len(), want.len());
        assert_eq!(remote.stats().errors, 0);
        if kind == "monitor" {
            // Every key it reads it writes: borrowed often, never read after all.
            assert!(
                borrowed as usize > frames.len() / 10,
                "monitor: {borrowed} borrowed"
            );
            assert_eq!(remote.stats().unplanned_reads, 0);
            assert_same_counters(
                &frames,
                (local.as_mut(), "b"),
                (remote.as_mut(), &nf_id),
                "monitor borrowed",
            );
        }
    }
}

/// Feeds frames like [`RecordingDevice`] and kills the tier when batch `kill_at` is received.
struct KillingDevice {
    inner: nfcore::harness::RecordingDevice,
    redis: Option<TestRedis>,
    received: usize,
    kill_at: usize,
}

impl netio::Device for KillingDevice {
    fn describe(&self) -> String {
        "killing".into()
    }
    fn recv(&mut self, batch: &mut netio::Batch, now_ns: u64) -> std::io::Result<usize> {
        self.received += 1;
        if self.received == self.kill_at {
            if let Some(mut r) = self.redis.take() {
                r.kill();
            }
        }
        self.inner.recv(batch, now_ns)
    }
    fn send(&mut self, batch: &netio::Batch, keep: &[bool], now_ns: u64) -> std::io::Result<usize> {
        self.inner.send(batch, keep, now_ns)
    }
    fn exhausted(&self) -> bool {
        self.inner.exhausted()
    }
}

/// The tier dies with batches in flight: fail-closed drops every packet whose state is not in
/// the tier, nothing panics, and every packet is accounted for.
#[test]
fn pipelined_tier_failure_fails_closed() {
    // monitor: the failure shows on the pipeline; nat: also inside process (pool pop, CAS).
    for kind in ["monitor", "nat"] {
        tier_failure_fails_closed(kind);
    }
}

fn tier_failure_fails_closed(kind: &str) {
    use nfcore::config::RuntimeOptions;
    use nfcore::runtime::{Runtime, TimeSource};
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    let redis = TestRedis::start().expect("redis-server");
    let store = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
    let frames = traffic(40, 10, 8, kind == "nat");
    let (batch, kill_at) = (4, 40);
    let dev = KillingDevice {
        inner: nfcore::harness::RecordingDevice::new(frames.clone()),
        redis: Some(redis),
        received: 0,
        kill_at,
    };
    let opts = RuntimeOptions {
        batch_size: batch,
        fail_mode: nfcore::FailMode::Closed,
        timer_interval_ms: 3_600_000,
        owner_cache: false,
    };
    let mut rt = Runtime::new(
        make(kind),
        Box::new(store),
        dev,
        KeySpace::new("pk").unwrap(),
        opts,
    );
    rt.set_pipeline_depth(8);
    rt.init().unwrap();
    rt.run(TimeSource::Packets, &AtomicBool::new(false))
        .unwrap();
    let st = rt.stats();
    let out = &rt.device().inner.out;
    let sent = out.iter().filter(|o| o.is_some()).count();
    assert!(
        sent > 0,
        "{kind}: batches done before the failure are forwarded"
    );
    // Batches received from the kill on cannot have their state read: all dropped.
    assert!(out[(kill_at - 1) * batch..].iter().all(|o| o.is_none()));
    assert!(st.store_errors.load(Relaxed) >= 1);
    assert_eq!(st.rx.load(Relaxed) as usize, frames.len());
    assert_eq!(st.tx.load(Relaxed) as usize, sent);
    assert_eq!(
        sent + st.fail_closed_dropped.load(Relaxed) as usize,
        frames.len(),
        "{kind}: every packet forwarded or dropped by the fail mode"
    );
}

/// TCP flows like [`traffic`] with byte-accurate sequence numbers and payloads
/// (`payload(flow, i)` for packet i after the handshake), to `server` if given (an LB VIP).
fn stream_traffic(
    flows: u32,
    n: u32,
    window: u32,
    one_way: bool,
    server: Option<IpAddr>,
    payload: &dyn Fn(u32, u32) -> Vec<u8>,
) -> Vec<(u64, Vec<u8>)> {
    let mut out = vec![];
    // (flow, packet index, client seq, server seq)
    let mut active: Vec<(u32, u32, u32, u32)> = vec![];
    let mut next = 0;
    while next < flows || !active.is_empty() {
        while active.len() < window as usize && next < flows {
            active.push((next, 0, 1000, 5000));
            next += 1;
        }
        let mut k = 0;
        while k < active.len() {
            let (f, i, cseq, sseq) = active[k];
            let client = IpAddr::V4(Ipv4Addr::new(10, 0, (f / 250) as u8, 1 + (f % 250) as u8));
            let srv = server.unwrap_or(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1 + (f % 7) as u8)));
            let cport = 20_000 + f as u16;
            let handshake = if one_way { 1 } else { 2 };
            let back = !one_way && i % 2 == 1;
            let (flags, data) = match i {
                0 => (TCP_SYN, vec![]),
                1 if !one_way => (TCP_SYN | TCP_ACK, vec![]),
                _ if i + 1 == n => (TCP_FIN | TCP_ACK, vec![]),
                _ => (TCP_PSH | TCP_ACK, payload(f, i)),
            };
            let seq = if back { sseq } else { cseq };
            let t = Transport::Tcp {
                seq,
                ack: if back { cseq } else { sseq },
                flags,
            };
            let mut spec = if back {
                FrameSpec::new(srv, client, 80, cport, t)
            } else {
                FrameSpec::new(client, srv, cport, 80, t)
            };
            spec.payload = &data;
            out.push((1_000_000_000 + out.len() as u64 * 1000, spec.build()));
            let used = data.len() as u32 + u32::from(i < handshake);
            let (c2, s2) = if back {
                (cseq, sseq + used)
            } else {
                (cseq + used, sseq)
            };
            if i + 1 == n {
                active.swap_remove(k);
            } else {
                active[k] = (f, i + 1, c2, s2);
                k += 1;
            }
        }
    }
    out
}

/// Timestamped frames.
type Frames = Vec<(u64, Vec<u8>)>;

/// The new NFs (lb, ips, l7fw) and their traffic: LB one way to its VIP; IPS streams where
/// every sixth flow carries a signature split over two packets; L7 firewall HTTP flows, every
/// fifth to a blocked Host.
fn new_nf(kind: &str) -> (Box<dyn NetworkFunction>, Frames) {
    let vip: IpAddr = "10.0.0.100".parse().unwrap();
    match kind {
        "lb" => (
            Box::new(
                nf_lb::LoadBalancer::from_config(&json!({"vip": "10.0.0.100", "port": 80,
                    "backends": ["10.1.0.1:8080", "10.1.0.2:8080", "10.1.0.3:8080"]}))
                .unwrap(),
            ),
            stream_traffic(120, 12, 24, true, Some(vip), &|f, i| {
                format!("req {f} {i}").into_bytes()
            }),
        ),
        "ips" => (
            Box::new(
                nf_ips::Ips::from_config(&json!({"signatures": [{"id": 1, "content": "ATTACK"}],
                    "action": "drop", "alert_log": "/dev/null"}))
                .unwrap(),
            ),
            stream_traffic(120, 12, 24, false, None, &|f, i| match (f % 6, i) {
                (0, 2) => b"hello ATT".to_vec(),
                (0, 4) => b"ACK there".to_vec(),
                _ => format!("data {f} {i};").into_bytes(),
            }),
        ),
        _ => (
            Box::new(
                nf_l7fw::L7Firewall::from_config(
                    &json!({"block": [{"proto": "http", "host": "evil.example"}]}),
                )
                .unwrap(),
            ),
            stream_traffic(120, 12, 24, false, None, &|f, i| {
                if i == 2 {
                    let host = if f % 5 == 0 {
                        "evil.example"
                    } else {
                        "ok.example"
                    };
                    format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n").into_bytes()
                } else {
                    format!("body {f} {i}").into_bytes()
                }
            }),
        ),
    }
}

/// lb, ips and l7fw (which read back per-flow state they wrote in earlier batches: LB choices,
/// IPS automaton state and reassembly point, L7 classification) give local's packets out under
/// the pipelined runtime, one instance and two instances taking turns chunk by chunk.
#[test]
fn pipelined_new_nfs_match_local() {
    let redis = TestRedis::start().expect("redis-server");
    let mut run = 0;
    for kind in ["lb", "ips", "l7fw"] {
        let (nf, frames) = new_nf(kind);
        let (want, _, _) = run_frames_depth(nf, Box::new(LocalStore::new()), "p", &frames, 8, 1);
        let fwd = want.iter().filter(|o| o.is_some()).count();
        assert!(fwd > frames.len() / 2, "{kind}: {fwd} forwarded");
        if kind != "lb" {
            assert!(fwd < frames.len(), "{kind}: the traffic has drops");
        }
        let connect = || -> Box<dyn FlowStore> {
            Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap())
        };
        for batch in [1, 8, 32] {
            for (depth, cached) in [(2, false), (8, false), (8, true)] {
                run += 1;
                let nf_id = format!("n{run}");
                let store: Box<dyn FlowStore> = if cached {
                    let r = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
                    let epoch = KeySpace::new(&nf_id).unwrap().global("epoch");
                    Box::new(flowstore::CachedStore::new(r, epoch, 1 << 16))
                } else {
                    connect()
                };
                let (got, _, remote) =
                    run_frames_depth(new_nf(kind).0, store, &nf_id, &frames, batch, depth);
                let first_diff = got.iter().zip(&want).position(|(a, b)| a != b);
                assert_eq!(
                    first_diff, None,
                    "{kind} batch {batch} depth {depth} cached {cached}: first packet out that differs"
                );
                assert_eq!(remote.stats().errors, 0);
            }
        }
        // Two instances (own NF object and connection, one nf_id) take turns, 50 packets each.
        run += 1;
        let nf_id = format!("n{run}");
        let mut inst = [(new_nf(kind).0, connect()), (new_nf(kind).0, connect())];
        let mut got = vec![];
        for (k, chunk) in frames.chunks(50).enumerate() {
            let (nf, store) = std::mem::replace(
                &mut inst[k % 2],
                (new_nf(kind).0, Box::new(LocalStore::new())),
            );
            let (out, nf, store) = run_frames_depth(nf, store, &nf_id, chunk, 8, 8);
            got.extend(out);
            inst[k % 2] = (nf, store);
        }
        let first_diff = got.iter().zip(&want).position(|(a, b)| a != b);
        assert_eq!(first_diff, None, "{kind} two instances in turn");
    }
}
