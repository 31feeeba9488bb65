//! Pipelined claims (NAT `mapping_claim: "pipelined"`, LB `conn_claim: "pipelined"`) when another
//! instance claims the same new connection first, between this instance's read of it and its
//! write. The race is forced: instance A's store (the real Redis store, wrapped) lets instance B,
//! a real NF runtime on its own connection, process the connection's first packet right after A's
//! first read returns. Then A's claim (`SET NX` with its batch's writes) must lose, none of A's
//! packets may leave with its losing mapping or backend, A undoes what it tied to it, and the
//! connection's later packets follow B's choice. Batch by batch (depth 1) and pipelined (depth 8),
//! with and without the owner cache.

use flowstore::resp::{encode, Conn, Reply};
use flowstore::test_redis::TestRedis;
use flowstore::{
    CachedStore, Endpoint, FlowStore, Key, KeySpace, Pipeline, RedisConfig, RedisStore, StoreError,
    WriteOp,
};
use nfcore::harness::run_frames_depth;
use nfcore::NetworkFunction;
use packet::build::{FrameSpec, Transport};
use packet::{Parsed, TCP_ACK, TCP_PSH, TCP_SYN};
use serde_json::{json, Value};
use std::net::{IpAddr, Ipv4Addr};

/// The real Redis store; after the first read that returns values, `other` runs once.
struct RaceAfterFirstRead {
    inner: RedisStore,
    other: Option<Box<dyn FnOnce() + Send>>,
}

impl RaceAfterFirstRead {
    fn after_read(&mut self, values: &[Option<Vec<u8>>]) {
        if !values.is_empty() {
            if let Some(f) = self.other.take() {
                f();
            }
        }
    }
}

impl FlowStore for RaceAfterFirstRead {
    flowstore::forward_store!(inner; kind, write_checked, compare_and_set, incr_by, pool_init,
        pool_pop, pool_pop_many, pool_push, pool_len, timer_claim_due, hash_get_all, stats,
        note_unplanned_read);

    fn get_many(&mut self, keys: &[Key], out: &mut Vec<Option<Vec<u8>>>) -> Result<(), StoreError> {
        self.inner.get_many(keys, out)?;
        self.after_read(out);
        Ok(())
    }
    fn pipeline(&mut self) -> Option<&mut dyn Pipeline> {
        Some(self)
    }
}

impl Pipeline for RaceAfterFirstRead {
    fn send_reads(&mut self, keys: &[Key]) -> Result<(), StoreError> {
        Pipeline::send_reads(&mut self.inner, keys)
    }
    fn send_writes(&mut self, ops: &[WriteOp]) -> Result<(), StoreError> {
        Pipeline::send_writes(&mut self.inner, ops)
    }
    fn flush(&mut self) -> Result<(), StoreError> {
        Pipeline::flush(&mut self.inner)
    }
    fn recv(&mut self, out: &mut Vec<Option<Vec<u8>>>) -> Result<(), StoreError> {
        Pipeline::recv(&mut self.inner, out)?;
        self.after_read(out);
        Ok(())
    }
    fn in_flight(&self) -> usize {
        Pipeline::in_flight(&self.inner)
    }
    fn reset(&mut self) {
        Pipeline::reset(&mut self.inner)
    }
}

const CLIENT: [u8; 4] = [10, 0, 0, 7];
const SERVER: [u8; 4] = [192, 0, 2, 9];
const VIP: &str = "10.0.0.100";

/// One outbound TCP packet of client port `cport` (a SYN when `syn`) to `dst`:80.
fn pkt(dst: IpAddr, cport: u16, seq: u32, syn: bool) -> Vec<u8> {
    let flags = if syn { TCP_SYN } else { TCP_PSH | TCP_ACK };
    let t = Transport::Tcp { seq, ack: 0, flags };
    FrameSpec::new(IpAddr::V4(Ipv4Addr::from(CLIENT)), dst, cport, 80, t).build()
}

/// Batches of 3: [SYN F, SYN G, F], [F, G, F], [F, G, F] (F: client port 1111, G: 2222).
fn frames(dst: IpAddr) -> Vec<(u64, Vec<u8>)> {
    let mut v = vec![
        pkt(dst, 1111, 0, true),
        pkt(dst, 2222, 0, true),
        pkt(dst, 1111, 1, false),
    ];
    for b in 0..2u32 {
        v.push(pkt(dst, 1111, 2 + 2 * b, false));
        v.push(pkt(dst, 2222, 1 + b, false));
        v.push(pkt(dst, 1111, 3 + 2 * b, false));
    }
    v.into_iter()
        .enumerate()
        .map(|(i, f)| (1_000_000_000 + i as u64 * 1000, f))
        .collect()
}

fn make(kind: &str) -> Box<dyn NetworkFunction> {
    match kind {
        "nat" => Box::new(
            nf_nat::Nat::from_config(&json!({"inside": ["10.0.0.0/8"],
                "public_ips": ["198.51.100.1"], "ports": "20000-20009", "port_block": 4,
                "mapping_claim": "pipelined"}))
            .unwrap(),
        ),
        _ => Box::new(
            nf_lb::LoadBalancer::from_config(&json!({"vip": VIP, "port": 80,
                "backends": ["10.1.0.1:8080", "10.1.0.2:8080"], "conn_claim": "pipelined"}))
            .unwrap(),
        ),
    }
}

/// Source (NAT) or destination (LB) address and port of a forwarded frame: what the NF chose.
fn choice(kind: &str, f: &[u8]) -> (IpAddr, u16) {
    let p = Parsed::new_checked(f).unwrap();
    let (sp, dp) = p.ports();
    if kind == "nat" {
        (p.src, sp)
    } else {
        (p.dst, dp)
    }
}

/// Keys of the tier matching `pattern` (KEYS, a test on a private server).
fn keys(redis: &TestRedis, pattern: &str) -> Vec<Vec<u8>> {
    let mut c = Conn::connect(
        &Endpoint::Unix(redis.socket_path()),
        std::time::Duration::from_secs(2),
    )
    .unwrap();
    encode(&mut c.out, &[b"KEYS", pattern.as_bytes()]);
    c.flush().unwrap();
    match c.read_reply().unwrap() {
        Reply::Array(items) => items
            .into_iter()
            .map(|r| match r {
                Reply::Bulk(b) => b,
                r => panic!("{r:?}"),
            })
            .collect(),
        r => panic!("{r:?}"),
    }
}

#[test]
fn a_lost_pipelined_claim_lets_no_packet_leave_with_it() {
    let redis = TestRedis::start().expect("redis-server");
    let mut run = 0;
    for kind in ["nat", "lb"] {
        let dst: IpAddr = if kind == "nat" {
            IpAddr::V4(Ipv4Addr::from(SERVER))
        } else {
            VIP.parse().unwrap()
        };
        let input = frames(dst);
        for (depth, cached) in [(1, false), (8, false), (8, true)] {
            run += 1;
            let nf_id = format!("race{run}");
            let what = format!("{kind} depth {depth} cached {cached}");
            // B: the first packet of F alone, on its own connection, into the same tier.
            let (url, b_id, syn) = (redis.unix_url(), nf_id.clone(), input[0].clone());
            let b_out = std::sync::Arc::new(std::sync::Mutex::new(None));
            let b_slot = b_out.clone();
            let other = Box::new(move || {
                let s = RedisStore::connect(RedisConfig::new(&url)).unwrap();
                let (out, _, _) = run_frames_depth(make(kind), Box::new(s), &b_id, &[syn], 1, 1);
                *b_slot.lock().unwrap() = out.into_iter().next().flatten();
            });
            let inner = RedisStore::connect(RedisConfig::new(&redis.unix_url())).unwrap();
            let raced = RaceAfterFirstRead {
                inner,
                other: Some(other),
            };
            let store: Box<dyn FlowStore> = if cached {
                let epoch = KeySpace::new(&nf_id).unwrap().global("epoch");
                Box::new(CachedStore::new(raced, epoch, 1 << 10))
            } else {
                Box::new(raced)
            };
            let (out, nf, _) = run_frames_depth(make(kind), store, &nf_id, &input, 3, depth);
            let b_syn = b_out.lock().unwrap().clone().expect("B forwarded its SYN");
            let won = choice(kind, &b_syn);
            // The batch that made the losing claim leaves nothing; the last batch all.
            assert!(out[..3].iter().all(Option::is_none), "{what}: {out:?}");
            assert!(out[6..].iter().all(Option::is_some), "{what}");
            // Every packet of F that left follows B's choice.
            for (i, o) in out.iter().enumerate() {
                let Some(f) = o else { continue };
                if Parsed::new_checked(f).unwrap().ports().0 == 1111 {
                    assert_eq!(choice(kind, f), won, "{what}: packet {i}");
                }
            }
            let st: Value = nf.stats();
            assert_eq!(st["lost_races"], 1, "{what}: {st}");
            if kind == "nat" {
                // A's block of 4: the losing pair came back, G took one.
                assert_eq!(st["block_free"], 3, "{what}: {st}");
                // Reverse mappings: B's for F and A's for G; A's for its losing F mapping is gone.
                let rev = keys(&redis, &format!("tn:default:nf:{nf_id}:*:nat-in"));
                assert_eq!(rev.len(), 2, "{what}");
            } else {
                // One count per connection (F counted once, by B; G by A).
                let mut s = RedisStore::connect(RedisConfig::new(&redis.unix_url())).unwrap();
                let ks = KeySpace::new(&nf_id).unwrap();
                let total: i64 = ["10.1.0.1:8080", "10.1.0.2:8080"]
                    .iter()
                    .map(|b| s.incr_by(&ks.global(&format!("lb-conns:{b}")), 0).unwrap())
                    .sum();
                assert_eq!(total, 2, "{what}");
            }
        }
    }
}
