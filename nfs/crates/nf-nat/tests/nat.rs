//! NAT: case directory in local and Redis modes (also two instances alternating), checksums of
//! rewritten packets, timers returning pairs to the pool exactly once, pool races.

use flowstore::test_redis::TestRedis;
use flowstore::{FlowStore, KeySpace, LocalStore, RedisConfig, RedisStore};
use nf_nat::Nat;
use nfcore::harness::{
    case, check_rewrites, recording_runtime, run_alternating, run_frames, run_ticking, verdicts,
    RecordingDevice,
};
use nfcore::runtime::{Runtime, TimeSource};
use packet::build::{FrameSpec, Transport};
use packet::Parsed;
use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::atomic::AtomicBool;

#[test]
fn case_local_redis_and_alternating() {
    let redis = TestRedis::start().expect("redis-server");
    let case = case("nat", "basic");
    let mk = || Box::new(Nat::from_config(&case.config).unwrap());
    for batch in [1, 5, 32] {
        let local = run_frames(
            mk(),
            Box::new(LocalStore::new()),
            "natl",
            &case.frames,
            batch,
        );
        check_rewrites(&local, &case.expected, &format!("local batch {batch}"));
        let s = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
        let remote = run_frames(
            mk(),
            Box::new(s),
            &format!("natr{batch}"),
            &case.frames,
            batch,
        );
        assert_eq!(remote, local, "redis batch {batch}");
    }
    let alt = run_alternating(
        || {
            (
                mk(),
                Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap()),
            )
        },
        "natalt",
        &case.frames,
    );
    check_rewrites(&alt, &case.expected, "two instances alternating");
    // The mapping written with the batch (no compare-and-set round trip): the same packets.
    let mut cfg = case.config.clone();
    cfg["mapping_claim"] = "pipelined".into();
    let mk = || Box::new(Nat::from_config(&cfg).unwrap());
    for batch in [1, 32] {
        let s = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
        let out = run_frames(
            mk(),
            Box::new(s),
            &format!("natp{batch}"),
            &case.frames,
            batch,
        );
        check_rewrites(
            &out,
            &case.expected,
            &format!("pipelined claim, batch {batch}"),
        );
    }
    let alt = run_alternating(
        || {
            (
                mk(),
                Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap()),
            )
        },
        "natpalt",
        &case.frames,
    );
    check_rewrites(
        &alt,
        &case.expected,
        "pipelined claim, two instances alternating",
    );
}

/// Port blocks: two instances take blocks of 8 pairs concurrently; every new flow of both gets
/// a pair, no pair twice, one pool round trip per block; a clean stop returns the unused pairs.
#[test]
fn port_blocks_are_disjoint_and_returned_on_release() {
    let redis = TestRedis::start().expect("redis-server");
    for claim in ["atomic", "pipelined"] {
        let cfg = serde_json::json!({"inside": ["10.0.0.0/8"], "public_ips": ["198.51.100.1"],
                                      "ports": "5000-5099", "port_block": 8, "mapping_claim": claim});
        let id = format!("natb{claim}");
        let threads: Vec<_> = (0..2u32)
            .map(|t| {
                let (url, cfg, id) = (redis.url(), cfg.clone(), id.clone());
                std::thread::spawn(move || {
                    let s = Box::new(RedisStore::connect(RedisConfig::new(&url)).unwrap());
                    let mut rt = runtime_in(&id, s, &cfg, outbound_frames(43, 1 + t * 1000));
                    rt.run(TimeSource::Packets, &AtomicBool::new(false))
                        .unwrap();
                    let st = rt.nf().stats();
                    assert_eq!(st["port_blocks"], 6, "{claim}: 43 flows = 6 blocks of 8");
                    assert_eq!(st["block_free"], 5);
                    rt.release().unwrap();
                    assert_eq!(rt.nf().stats()["block_free"], 0);
                    let (_, _, dev) = rt.into_parts();
                    sources(dev.out)
                })
            })
            .collect();
        let all: Vec<_> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        assert_eq!(all.len(), 86, "{claim}: every flow mapped");
        assert_eq!(
            all.iter().collect::<HashSet<_>>().len(),
            86,
            "{claim}: no pair twice"
        );
        let mut s = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
        let pool = KeySpace::new(&id).unwrap().global("pool");
        assert_eq!(
            s.pool_len(&pool).unwrap(),
            100 - 86,
            "{claim}: unused pairs back"
        );
    }
    // The default block is 1/1024 of the pool (at least 1): small pools behave as before.
    let cfg = serde_json::json!({"inside": ["10.0.0.0/8"], "public_ips": ["198.51.100.1"], "ports": "1-2048"});
    let mut rt = runtime(Box::new(LocalStore::new()), &cfg, outbound_frames(1, 1));
    rt.run(TimeSource::Packets, &AtomicBool::new(false))
        .unwrap();
    assert_eq!(
        rt.nf().stats()["block_free"],
        1,
        "block of 2 for 2048 pairs"
    );
}

fn outbound_frames(n: u32, src_base: u32) -> Vec<(u64, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let src = std::net::Ipv4Addr::from(0x0a00_0000 + src_base + i);
            let t = Transport::Tcp {
                seq: 1,
                ack: 0,
                flags: packet::TCP_SYN,
            };
            (
                i as u64 * 1000,
                FrameSpec::new(src.into(), "192.0.2.1".parse().unwrap(), 1000, 80, t).build(),
            )
        })
        .collect()
}

/// The source address and port of each frame that came out (the pair its flow was given).
fn sources(out: Vec<Option<Vec<u8>>>) -> Vec<(IpAddr, u16)> {
    out.into_iter()
        .flatten()
        .map(|f| {
            let p = Parsed::new_checked(&f).unwrap();
            (p.src, p.ports().0)
        })
        .collect()
}

fn runtime(
    store: Box<dyn FlowStore>,
    cfg: &serde_json::Value,
    frames: Vec<(u64, Vec<u8>)>,
) -> Runtime<RecordingDevice> {
    runtime_in("natt", store, cfg, frames)
}

fn runtime_in(
    nf_id: &str,
    store: Box<dyn FlowStore>,
    cfg: &serde_json::Value,
    frames: Vec<(u64, Vec<u8>)>,
) -> Runtime<RecordingDevice> {
    let nf = Box::new(Nat::from_config(cfg).unwrap());
    recording_runtime(nf, store, nf_id, frames, 8, 1_000_000)
}

#[test]
fn expiry_returns_pairs_once_with_two_instances() {
    let redis = TestRedis::start().expect("redis-server");
    let cfg = serde_json::json!({"inside": ["10.0.0.0/8"], "public_ips": ["198.51.100.1"], "ports": "100-109",
                                  "idle_timeout_ms": 1000});
    let conn = || Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap());
    let mut a = runtime(conn(), &cfg, outbound_frames(6, 1));
    let mut b = runtime(conn(), &cfg, vec![]);
    a.run(TimeSource::Packets, &AtomicBool::new(false)).unwrap();
    assert_eq!(a.device().out.iter().filter(|o| o.is_some()).count(), 6);
    let pool = KeySpace::new("natt").unwrap().global("pool");
    assert_eq!(a.store_mut().pool_len(&pool).unwrap(), 4);
    // Not due yet.
    assert_eq!(b.fire_timers(1_000_000).unwrap(), 0);
    // Both instances try; each timer fires on exactly one of them.
    let late = 100_000_000_000;
    let fired =
        b.fire_timers(late).unwrap() + a.fire_timers(late).unwrap() + b.fire_timers(late).unwrap();
    assert_eq!(fired, 6);
    assert_eq!(
        a.store_mut().pool_len(&pool).unwrap(),
        10,
        "every pair back once"
    );
    let expired = |rt: &Runtime<RecordingDevice>| rt.nf().stats()["expired"].as_u64().unwrap();
    assert_eq!(expired(&a) + expired(&b), 6);
}

#[test]
fn pool_race_between_instances_never_reuses_a_pair() {
    let redis = TestRedis::start().expect("redis-server");
    let cfg = serde_json::json!({"inside": ["10.0.0.0/8"], "public_ips": ["198.51.100.1", "198.51.100.2"],
                                  "ports": "5000-5049"});
    let threads: Vec<_> = (0..2u32)
        .map(|t| {
            let (url, cfg) = (redis.url(), cfg.clone());
            std::thread::spawn(move || {
                let s = Box::new(RedisStore::connect(RedisConfig::new(&url)).unwrap());
                let mut rt = runtime(s, &cfg, outbound_frames(70, 1 + t * 1000));
                rt.run(TimeSource::Packets, &AtomicBool::new(false))
                    .unwrap();
                let (_, _, dev) = rt.into_parts();
                sources(dev.out)
            })
        })
        .collect();
    let all: Vec<_> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(all.len(), 100, "100 pairs for 140 new flows");
    assert_eq!(
        all.iter().collect::<HashSet<_>>().len(),
        100,
        "no pair given twice"
    );
}

#[test]
fn local_pool_exhaustion_and_config_errors() {
    let cfg = serde_json::json!({"inside": ["10.0.0.0/8"], "public_ips": ["198.51.100.1"], "ports": "1-2"});
    let mut rt = runtime(Box::new(LocalStore::new()), &cfg, outbound_frames(3, 1));
    rt.run(TimeSource::Packets, &AtomicBool::new(false))
        .unwrap();
    assert_eq!(rt.device().out.iter().filter(|o| o.is_some()).count(), 2);
    assert_eq!(rt.nf().stats()["pool_empty"], 1);
    for (bad, field) in [
        (
            serde_json::json!({"public_ips": ["198.51.100.1"]}),
            "inside",
        ),
        (
            serde_json::json!({"inside": ["10.0.0.0/8"], "public_ips": ["x"]}),
            "public_ips",
        ),
        (
            serde_json::json!({"inside": ["10.0.0.0/8"], "public_ips": ["1.2.3.4"], "ports": "9-1"}),
            "ports",
        ),
        (
            serde_json::json!({"inside": ["10.0.0.0/40"], "public_ips": ["1.2.3.4"]}),
            "inside",
        ),
        (
            serde_json::json!({"inside": ["10.0.0.0/8"], "public_ips": ["1.2.3.4"], "port_block": 0}),
            "port_block",
        ),
        (
            serde_json::json!({"inside": ["10.0.0.0/8"], "public_ips": ["1.2.3.4"], "mapping_claim": "cas"}),
            "mapping_claim",
        ),
    ] {
        let e = Nat::from_config(&bad).err().unwrap();
        assert!(e.contains(field), "{bad}: {e}");
    }
}

/// Timeouts per protocol and phase (case `timeouts`, default config): an established TCP
/// connection idle for a day keeps its mapping, one closed by FINs or a RST loses it after the
/// short timeout, an unanswered UDP datagram's mapping goes after 30 s, an answered one lives
/// 120 s idle (also kept by inbound packets alone). Local, Redis, and two instances taking turns
/// (each fires the timers due before its packet).
#[test]
fn timeouts_per_protocol_and_phase() {
    let redis = TestRedis::start().expect("redis-server");
    let case = case("nat", "timeouts");
    let want: Vec<String> = serde_json::from_value(case.expected["verdicts"].clone()).unwrap();
    let mk = || Box::new(Nat::from_config(&case.config).unwrap());
    let local = run_ticking(
        || (mk(), Box::new(LocalStore::new())),
        "natto",
        &case.frames,
        1,
    );
    assert_eq!(verdicts(&local), want, "local");
    for (n, claim) in [(1, "atomic"), (2, "atomic"), (2, "pipelined")] {
        let mut cfg = case.config.clone();
        cfg["mapping_claim"] = claim.into();
        let out = run_ticking(
            || {
                (
                    Box::new(Nat::from_config(&cfg).unwrap()),
                    Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap()),
                )
            },
            &format!("natto{n}{claim}"),
            &case.frames,
            n,
        );
        assert_eq!(verdicts(&out), want, "redis, {n} instances, {claim}");
        assert_eq!(out, local, "same frames: redis, {n} instances, {claim}");
    }
    // The older key keeps its meaning: every phase 60 s, so the idle connection is cut (its next
    // outbound packet gets a new mapping, and the remote's packets to the old one are dropped).
    let mut old = case.config.clone();
    old["idle_timeout_ms"] = 60_000.into();
    let out = run_ticking(
        || {
            (
                Box::new(Nat::from_config(&old).unwrap()),
                Box::new(LocalStore::new()),
            )
        },
        "nattold",
        &case.frames,
        1,
    );
    assert_eq!(
        verdicts(&out)[4],
        "drop",
        "idle_timeout_ms 60000: gone after 10 min"
    );
    assert_ne!(out[3], local[3], "a new public port after 10 min");
    old["timeouts"] = serde_json::json!({});
    assert!(Nat::from_config(&old)
        .err()
        .unwrap()
        .starts_with("idle_timeout_ms: not together with timeouts"));
}

fn tcp_at(t_ms: u64, src: &str, dst: &str, sport: u16, dport: u16, flags: &str) -> (u64, Vec<u8>) {
    let t = Transport::Tcp {
        seq: 1,
        ack: 1,
        flags: nfcore::harness::tcp_flags(flags).unwrap(),
    };
    let f = FrameSpec::new(src.parse().unwrap(), dst.parse().unwrap(), sport, dport, t).build();
    (t_ms * 1_000_000, f)
}

/// `PUT /config` on running instances sharing one Redis: the pool moves to another address
/// while a connection holds a pair of the old one. The live connection keeps its pair both
/// ways (also on an instance started after the change), new connections get only the new
/// pairs (pushed once, though two instances were reconfigured), the old pair is not given
/// again when its mapping ends, a change that would bring it back is 400 naming `ports`, a
/// bad config 400 changing nothing, counters kept throughout.
#[test]
fn pool_change_in_place_drains_live_mappings() {
    use nfcore::harness::{feed, reconfigure};
    let redis = TestRedis::start().expect("redis-server");
    let conn = || Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap());
    let cfg1 = serde_json::json!({"inside": ["10.0.0.0/8"], "public_ips": ["198.51.100.1"],
                                   "ports": "100-103", "port_block": 1});
    let cfg2 = serde_json::json!({"inside": ["10.0.0.0/8"], "public_ips": ["198.51.100.2"],
                                   "ports": "100-103", "port_block": 1});
    let mut a = runtime_in("natcfg", conn(), &cfg1, vec![]);
    let mut b = runtime_in("natcfg", conn(), &cfg1, vec![]);
    let out = feed(
        &mut a,
        vec![tcp_at(0, "10.0.0.1", "192.0.2.1", 1000, 80, "S")],
    );
    let (pub_ip, pub_port) = sources(out)[0];
    assert_eq!(pub_ip, "198.51.100.1".parse::<IpAddr>().unwrap());
    let pool = KeySpace::new("natcfg").unwrap().global("pool");
    assert_eq!(a.store_mut().pool_len(&pool).unwrap(), 3);

    // A bad config: refused naming the field, nothing changed.
    let mut bad = cfg2.clone();
    bad["ports"] = "9-1".into();
    let e = reconfigure(&mut a, &bad).unwrap_err();
    assert_eq!(e.status, 400);
    assert!(e.message.contains("ports"), "{}", e.message);
    assert_eq!(a.store_mut().pool_len(&pool).unwrap(), 3);

    for rt in [&mut a, &mut b] {
        reconfigure(rt, &cfg2).expect("in place");
    }
    assert_eq!(
        a.store_mut().pool_len(&pool).unwrap(),
        3 + 4,
        "the new address's 4 pairs pushed once (the old ones are discarded when taken)"
    );
    let dst = pub_ip.to_string();
    // The live connection, both ways, on both instances and on one started after the change.
    let mut c = runtime_in("natcfg", conn(), &cfg2, vec![]);
    for rt in [&mut a, &mut b, &mut c] {
        let out = feed(
            rt,
            vec![
                tcp_at(10, "192.0.2.1", &dst, 80, pub_port, "SA"),
                tcp_at(11, "10.0.0.1", "192.0.2.1", 1000, 80, "A"),
            ],
        );
        assert!(out.iter().all(|o| o.is_some()), "live connection kept");
        let p = Parsed::new_checked(out[0].as_ref().unwrap()).unwrap();
        assert_eq!((p.dst, p.ports().1), ("10.0.0.1".parse().unwrap(), 1000));
        assert_eq!(sources(vec![out[1].clone()]), [(pub_ip, pub_port)]);
    }
    assert_eq!(a.nf().stats()["translated_out"], 2, "counters kept");
    // New connections: only pairs of the new address; the old free ones are dropped when taken.
    let news: Vec<_> = (0..5)
        .map(|i| tcp_at(20 + i, "10.0.1.1", "192.0.2.1", 2000 + i as u16, 80, "S"))
        .collect();
    let got = sources(feed(&mut b, news));
    assert_eq!(got.len(), 4, "4 pairs in the pool now");
    assert!(got
        .iter()
        .all(|(ip, _)| *ip == "198.51.100.2".parse::<IpAddr>().unwrap()));
    assert_eq!(b.nf().stats()["pairs_retired"], 3);
    // The old connection ends (RST): its pair does not go back to the pool.
    feed(
        &mut a,
        vec![tcp_at(30, "192.0.2.1", &dst, 80, pub_port, "R")],
    );
    assert_eq!(a.fire_timers(9_000_000_000).unwrap(), 0, "closed: 10 s");
    assert_eq!(a.fire_timers(10_100_000_000).unwrap(), 1);
    assert_eq!(a.nf().stats()["expired"], 1);
    assert_eq!(a.store_mut().pool_len(&pool).unwrap(), 0);
    // Bringing the old pairs back in place: refused (one may still be mapped elsewhere).
    let mut back = cfg2.clone();
    back["public_ips"] = serde_json::json!(["198.51.100.2", "198.51.100.1"]);
    let e = reconfigure(&mut a, &back).unwrap_err();
    assert_eq!(e.status, 400);
    assert!(
        e.message
            .starts_with("public_ips: 198.51.100.1 ports 100-103"),
        "{}",
        e.message
    );
    // Widening the new address's range is fine: 2 more pairs.
    let mut wider = cfg2.clone();
    wider["ports"] = "100-105".into();
    reconfigure(&mut a, &wider).expect("in place");
    assert_eq!(a.store_mut().pool_len(&pool).unwrap(), 2);
}

/// A pool change by a rolling update (new instances started with the new config beside old
/// ones, no `PUT /config`) reaches the tier as the change in place does: the first new instance's
/// init pushes the new pairs once (a second one pushes nothing), the removed pairs are retired;
/// a live mapping of an old pair keeps working on a new instance; an old instance still running
/// the old config hands out its config's pairs, then the new ones (taken from the tier's spec)
/// instead of losing them;
/// a new instance whose config brings back a pair retired earlier does not start (400-like
/// refusal naming `public_ips`), the pool unchanged.
#[test]
fn pool_change_by_a_rolling_update_reaches_the_tier() {
    use nfcore::harness::feed;
    let redis = TestRedis::start().expect("redis-server");
    let conn = || Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap());
    let cfg1 = serde_json::json!({"inside": ["10.0.0.0/8"], "public_ips": ["198.51.100.1"],
                                   "ports": "100-103", "port_block": 1});
    let cfg2 = serde_json::json!({"inside": ["10.0.0.0/8"], "public_ips": ["198.51.100.2"],
                                   "ports": "100-103", "port_block": 1});
    let (old_ip, new_ip): (IpAddr, IpAddr) = (
        "198.51.100.1".parse().unwrap(),
        "198.51.100.2".parse().unwrap(),
    );
    let mut a = runtime_in("natroll", conn(), &cfg1, vec![]);
    let out = feed(
        &mut a,
        vec![tcp_at(0, "10.0.0.1", "192.0.2.1", 1000, 80, "S")],
    );
    let (pub_ip, pub_port) = sources(out)[0];
    assert_eq!(pub_ip, old_ip);
    let pool = KeySpace::new("natroll").unwrap().global("pool");
    assert_eq!(a.store_mut().pool_len(&pool).unwrap(), 3);

    // The roll starts two new instances with the new config: the new pairs pushed once.
    let mut n1 = runtime_in("natroll", conn(), &cfg2, vec![]);
    let mut n2 = runtime_in("natroll", conn(), &cfg2, vec![]);
    assert_eq!(n1.store_mut().pool_len(&pool).unwrap(), 3 + 4);
    let spec = {
        let mut v = Vec::new();
        let key = KeySpace::new("natroll").unwrap().global("pool-spec");
        n1.store_mut()
            .get_many(std::slice::from_ref(&key), &mut v)
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&v[0].clone().unwrap()).unwrap()
    };
    assert_eq!(spec["ips"], serde_json::json!(["198.51.100.2"]));
    assert_eq!(
        spec["retired"],
        serde_json::json!([["198.51.100.1", 100, 103]])
    );

    // The live connection of an old pair, both ways, on a new instance.
    let dst = pub_ip.to_string();
    let out = feed(
        &mut n1,
        vec![
            tcp_at(10, "192.0.2.1", &dst, 80, pub_port, "SA"),
            tcp_at(11, "10.0.0.1", "192.0.2.1", 1000, 80, "A"),
        ],
    );
    assert!(out.iter().all(|o| o.is_some()), "live connection kept");
    assert_eq!(sources(vec![out[1].clone()]), [(pub_ip, pub_port)]);

    // The old instance, still on the old config until it is replaced, hands out the old pairs
    // left in the pool as that config says, then the new ones, which it takes the tier's spec
    // for (none is lost as not its own).
    let news: Vec<_> = (0..5)
        .map(|i| tcp_at(20 + i, "10.0.1.1", "192.0.2.1", 2000 + i as u16, 80, "S"))
        .collect();
    let got = sources(feed(&mut a, news));
    assert_eq!(got.len(), 5, "{got:?}");
    assert!(got[..3].iter().all(|(ip, _)| *ip == old_ip), "{got:?}");
    assert!(got[3..].iter().all(|(ip, _)| *ip == new_ip), "{got:?}");
    assert_eq!(a.nf().stats()["pool_followed"], 1);
    assert_eq!(a.nf().stats()["pairs_retired"], 0);
    // The new instances share the other 2 new pairs; every new pair handed out once.
    let news: Vec<_> = (0..3)
        .map(|i| tcp_at(30 + i, "10.0.2.1", "192.0.2.1", 3000 + i as u16, 80, "S"))
        .collect();
    let mut got2 = sources(feed(&mut n2, news));
    assert_eq!(got2.len(), 2, "2 pairs left: {got2:?}");
    got2.extend_from_slice(&got[3..]);
    let distinct: HashSet<_> = got2.iter().collect();
    assert_eq!(distinct.len(), 4, "every new pair once: {got2:?}");
    assert!(got2.iter().all(|(ip, _)| *ip == new_ip));

    // A roll back to the old address cannot start: its pairs were retired (may still be live).
    let mut rt = Runtime::new(
        Box::new(Nat::from_config(&cfg1).unwrap()),
        conn(),
        RecordingDevice::new(vec![]),
        KeySpace::new("natroll").unwrap(),
        nfcore::config::RuntimeOptions {
            batch_size: 8,
            fail_mode: nfcore::FailMode::Closed,
            timer_interval_ms: 1_000_000,
            owner_cache: false,
        },
    );
    match rt.init() {
        Err(nfcore::Refused::Invalid(e)) => {
            assert!(
                e.starts_with("public_ips: 198.51.100.1 ports 100-103"),
                "{e}"
            )
        }
        other => panic!("init of a retired pair: {other:?}"),
    }
    assert_eq!(n1.store_mut().pool_len(&pool).unwrap(), 0);
}
