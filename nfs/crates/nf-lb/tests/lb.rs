//! Load balancer: case directory in local and Redis modes (also two instances alternating),
//! checksums of rewritten packets, two instances racing on the same new connections, backend
//! health from the tier, timers releasing backend slots exactly once, config errors.

use flowstore::test_redis::TestRedis;
use flowstore::{FlowStore, KeySpace, LocalStore, RedisConfig, RedisStore};
use nf_lb::{load_key, set_backend_state, LoadBalancer};
use nfcore::harness::{
    case_dirs, check_rewrites, frame_from_json, load_case, recording_runtime, run_alternating,
    run_frames, run_ticking, verdicts, CaseFormat, RecordingDevice,
};
use nfcore::runtime::{Runtime, TimeSource};
use packet::build::{checksums_valid, FrameSpec, Transport};
use packet::Parsed;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicBool;

#[test]
fn cases_local_redis_and_alternating() {
    let redis = TestRedis::start().expect("redis-server");
    let dirs = case_dirs("lb", CaseFormat::Json);
    assert!(dirs.len() >= 2);
    for dir in dirs {
        let name = dir.file_name().unwrap().to_str().unwrap().to_string();
        let case = load_case(&dir).unwrap();
        let mk = || Box::new(LoadBalancer::from_config(&case.config).unwrap());
        for batch in [1, 4, 32] {
            let local = run_frames(
                mk(),
                Box::new(LocalStore::new()),
                "lbl",
                &case.frames,
                batch,
            );
            check_rewrites(
                &local,
                &case.expected,
                &format!("{name} local batch {batch}"),
            );
            let s = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
            let id = format!("lbr{name}{batch}");
            let remote = run_frames(mk(), Box::new(s), &id, &case.frames, batch);
            assert_eq!(remote, local, "{name} redis batch {batch}");
        }
        let alt = run_alternating(
            || {
                let s = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
                (mk(), Box::new(s))
            },
            &format!("lbalt{name}"),
            &case.frames,
        );
        check_rewrites(
            &alt,
            &case.expected,
            &format!("{name} two instances alternating"),
        );
        // Connection record and counter written with the batch: the same packets.
        let mut pcfg = case.config.clone();
        pcfg["conn_claim"] = "pipelined".into();
        let mkp = || Box::new(LoadBalancer::from_config(&pcfg).unwrap());
        for batch in [1, 32] {
            let local = run_frames(
                mkp(),
                Box::new(LocalStore::new()),
                "lbpl",
                &case.frames,
                batch,
            );
            let what = format!("{name} pipelined claim local batch {batch}");
            check_rewrites(&local, &case.expected, &what);
            let s = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
            let id = format!("lbpr{name}{batch}");
            let remote = run_frames(mkp(), Box::new(s), &id, &case.frames, batch);
            assert_eq!(remote, local, "{name} pipelined claim redis batch {batch}");
        }
        let alt = run_alternating(
            || {
                let s = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
                (mkp(), Box::new(s))
            },
            &format!("lbpalt{name}"),
            &case.frames,
        );
        check_rewrites(
            &alt,
            &case.expected,
            &format!("{name} pipelined claim, two instances alternating"),
        );
    }
}

fn syn(client: u32, t_ms: u64) -> (u64, Vec<u8>) {
    // Client 192.0.2.(client), port 40000.
    let src = IpAddr::V4(std::net::Ipv4Addr::from(0xc000_0200 + client));
    let t = Transport::Tcp {
        seq: 1,
        ack: 0,
        flags: packet::TCP_SYN,
    };
    let f = FrameSpec::new(src, "10.0.0.100".parse().unwrap(), 40000, 80, t).build();
    (t_ms * 1_000_000, f)
}

fn data(client: u32, t_ms: u64) -> (u64, Vec<u8>) {
    let src = IpAddr::V4(std::net::Ipv4Addr::from(0xc000_0200 + client));
    let t = Transport::Tcp {
        seq: 2,
        ack: 1,
        flags: packet::TCP_ACK,
    };
    let f = FrameSpec::new(src, "10.0.0.100".parse().unwrap(), 40000, 80, t).build();
    (t_ms * 1_000_000, f)
}

fn cfg(extra: serde_json::Value) -> serde_json::Value {
    let mut c = serde_json::json!({"vip": "10.0.0.100", "port": 80,
        "backends": ["10.1.0.1:8080", "10.1.0.2:8080", "10.1.0.3:8080"], "idle_timeout_ms": 1000});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

fn runtime(
    store: Box<dyn FlowStore>,
    nf_id: &str,
    cfg: &serde_json::Value,
    frames: Vec<(u64, Vec<u8>)>,
) -> Runtime<RecordingDevice> {
    let nf = Box::new(LoadBalancer::from_config(cfg).unwrap());
    recording_runtime(nf, store, nf_id, frames, 8, 1_000_000)
}

fn backend_of(f: &Option<Vec<u8>>) -> Option<SocketAddr> {
    f.as_ref().map(|f| {
        let p = Parsed::new_checked(f).unwrap();
        SocketAddr::new(p.dst, p.ports().1)
    })
}

fn load(store: &mut dyn FlowStore, addr: &str) -> i64 {
    let k = load_key(&KeySpace::new("lbt").unwrap(), &addr.parse().unwrap());
    store.incr_by(&k, 0).unwrap()
}

#[test]
fn two_instances_racing_on_the_same_connections_agree() {
    let redis = TestRedis::start().expect("redis-server");
    let c = cfg(serde_json::json!({}));
    let frames: Vec<_> = (0..60).map(|i| syn(i, 0)).collect();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let (url, c, frames) = (redis.url(), c.clone(), frames.clone());
            std::thread::spawn(move || {
                let s = Box::new(RedisStore::connect(RedisConfig::new(&url)).unwrap());
                let mut rt = runtime(s, "lbt", &c, frames);
                rt.run(TimeSource::Packets, &AtomicBool::new(false))
                    .unwrap();
                let st = rt.nf().stats();
                let (_, _, dev) = rt.into_parts();
                (dev.out.iter().map(backend_of).collect::<Vec<_>>(), st)
            })
        })
        .collect();
    let res: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(
        res[0].0, res[1].0,
        "both instances send each connection to one backend"
    );
    assert!(res[0].0.iter().all(|b| b.is_some()));
    let won: u64 = res.iter().map(|r| r.1["new_conns"].as_u64().unwrap()).sum();
    let lost: u64 = res
        .iter()
        .map(|r| r.1["lost_races"].as_u64().unwrap())
        .sum();
    assert_eq!(won, 60, "each connection claimed once");
    assert!(lost <= 60);
    let mut s = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
    let loads: Vec<i64> = ["10.1.0.1:8080", "10.1.0.2:8080", "10.1.0.3:8080"]
        .iter()
        .map(|a| load(&mut s, a))
        .collect();
    assert_eq!(loads.iter().sum::<i64>(), 60, "{loads:?}");
    assert!(
        loads.iter().all(|l| (5..=40).contains(l)),
        "spread: {loads:?}"
    );
}

/// Open 3 connections (one per backend), mark the backend of connection 0 down, then send data
/// on all three and open 6 more.
fn health_run(
    store: Box<dyn FlowStore>,
    on_down: &str,
) -> (Vec<Option<SocketAddr>>, Vec<Option<SocketAddr>>) {
    let c = cfg(serde_json::json!({"on_backend_down": on_down}));
    let mut rt = runtime(
        store,
        &format!("lbh{on_down}"),
        &c,
        (0..3).map(|i| syn(i, 0)).collect(),
    );
    rt.run(TimeSource::Packets, &AtomicBool::new(false))
        .unwrap();
    let first: Vec<_> = rt.device().out.iter().map(backend_of).collect();
    let down = first[0].unwrap();
    let keys = KeySpace::new(&format!("lbh{on_down}")).unwrap();
    assert!(set_backend_state(rt.store_mut(), &keys, down, false).unwrap());
    let mut later: Vec<_> = (0..3).map(|i| data(i, 1)).collect();
    later.extend((3..9).map(|i| syn(i, 1)));
    *rt.device_mut() = RecordingDevice::new(later);
    rt.run(TimeSource::Packets, &AtomicBool::new(false))
        .unwrap();
    let second: Vec<_> = rt.device().out.iter().map(backend_of).collect();
    (first, second)
}

#[test]
fn backend_marked_down_gets_no_new_connections() {
    let redis = TestRedis::start().expect("redis-server");
    for on_down in ["keep", "drop"] {
        let stores: Vec<Box<dyn FlowStore>> = vec![
            Box::new(LocalStore::new()),
            Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap()),
        ];
        for store in stores {
            let kind = store.kind();
            let (first, second) = health_run(store, on_down);
            let down = first[0].unwrap();
            let distinct: std::collections::HashSet<_> = first.iter().collect();
            assert_eq!(
                distinct.len(),
                3,
                "{kind}: one connection per backend: {first:?}"
            );
            for (i, b) in second[..3].iter().enumerate() {
                if on_down == "drop" && i == 0 {
                    assert_eq!(
                        *b, None,
                        "{kind} {on_down}: connection to the down backend dropped"
                    );
                } else {
                    assert_eq!(*b, first[i], "{kind} {on_down}: affinity of connection {i}");
                }
            }
            for b in &second[3..] {
                assert!(
                    b.is_some() && *b != Some(down),
                    "{kind} {on_down}: new connection to {b:?}"
                );
            }
        }
    }
}

#[test]
fn expiry_releases_backend_slots_once_with_two_instances() {
    let redis = TestRedis::start().expect("redis-server");
    for claim in ["atomic", "pipelined"] {
        // The atomic run leaves every counter at 0 and no connection: the next starts clean.
        expiry_run(&redis, claim);
    }
}

/// Nine connections opened by one instance (counters written atomically or with the batch),
/// expired by two.
fn expiry_run(redis: &TestRedis, claim: &str) {
    let c = cfg(serde_json::json!({ "conn_claim": claim }));
    let conn = || Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap());
    let mut a = runtime(conn(), "lbt", &c, (0..9).map(|i| syn(i, 0)).collect());
    let mut b = runtime(conn(), "lbt", &c, vec![]);
    a.run(TimeSource::Packets, &AtomicBool::new(false)).unwrap();
    let total = |s: &mut dyn FlowStore| {
        ["10.1.0.1:8080", "10.1.0.2:8080", "10.1.0.3:8080"]
            .iter()
            .map(|x| load(s, x))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        total(a.store_mut()),
        vec![3, 3, 3],
        "least connections spreads evenly"
    );
    assert_eq!(b.fire_timers(500_000_000).unwrap(), 0, "not due yet");
    let late = 10_000_000_000;
    let fired =
        b.fire_timers(late).unwrap() + a.fire_timers(late).unwrap() + b.fire_timers(late).unwrap();
    assert_eq!(fired, 9);
    assert_eq!(
        total(a.store_mut()),
        vec![0, 0, 0],
        "every slot released once"
    );
    let expired = |rt: &Runtime<RecordingDevice>| rt.nf().stats()["expired"].as_u64().unwrap();
    assert_eq!(expired(&a) + expired(&b), 9);
    // The connection is gone: a data packet without a SYN is dropped.
    *a.device_mut() = RecordingDevice::new(vec![data(0, 20_000)]);
    a.run(TimeSource::Packets, &AtomicBool::new(false)).unwrap();
    assert_eq!(a.device().out, vec![None]);
}

#[test]
fn unreadable_pool_fails_closed_and_config_errors_name_the_field() {
    let mut s = LocalStore::new();
    let keys = KeySpace::new("lbt").unwrap();
    s.write_many(&[flowstore::WriteOp::Set {
        key: keys.global(nf_lb::POOL),
        value: b"10.1.0.1:8080 sideways\n".to_vec(),
    }])
    .unwrap();
    let mut rt = runtime(
        Box::new(s),
        "lbt",
        &cfg(serde_json::json!({})),
        vec![syn(0, 0)],
    );
    rt.run(TimeSource::Packets, &AtomicBool::new(false))
        .unwrap();
    assert_eq!(rt.device().out, vec![None]);
    assert_eq!(rt.nf().stats()["bad_pool"], 1);
    for (bad, field) in [
        (
            serde_json::json!({"port": 80, "backends": ["10.1.0.1:1"]}),
            "vip",
        ),
        (
            serde_json::json!({"vip": "10.0.0.1", "port": 0, "backends": ["10.1.0.1:1"]}),
            "port",
        ),
        (
            serde_json::json!({"vip": "10.0.0.1", "port": 80, "backends": []}),
            "backends",
        ),
        (
            serde_json::json!({"vip": "10.0.0.1", "port": 80, "backends": ["10.1.0.1"]}),
            "backends[0]",
        ),
        (
            serde_json::json!({"vip": "10.0.0.1", "port": 80, "backends": ["[fd00::1]:80"]}),
            "backends[0]",
        ),
        (
            serde_json::json!({"vip": "10.0.0.1", "port": 80, "backends": ["10.1.0.1:1", "10.1.0.1:1"]}),
            "backends[1]",
        ),
        (
            serde_json::json!({"vip": "10.0.0.1", "port": 80, "backends": ["10.1.0.1:1"], "proto": "sctp"}),
            "proto",
        ),
        (
            serde_json::json!({"vip": "10.0.0.1", "port": 80, "backends": ["10.1.0.1:1"], "on_backend_down": "x"}),
            "on_backend_down",
        ),
        (
            serde_json::json!({"vip": "10.0.0.1", "port": 80, "backends": ["10.1.0.1:1"], "conn_claim": "cas"}),
            "conn_claim",
        ),
        (
            serde_json::json!({"vip": "10.0.0.1", "port": 80, "backends": ["10.1.0.1:1"], "vips": 1}),
            "vips",
        ),
    ] {
        let e = LoadBalancer::from_config(&bad).err().unwrap();
        assert!(e.contains(field), "{bad}: {e}");
    }
}

#[test]
fn backend_added_in_the_tier_serves_and_its_replies_are_rewritten() {
    let redis = TestRedis::start().expect("redis-server");
    let c = cfg(serde_json::json!({}));
    let s = Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap());
    let mut rt = runtime(s, "lbadd", &c, vec![]);
    // The operator replaces the pool: only a backend the config never named is up.
    let keys = KeySpace::new("lbadd").unwrap();
    rt.store_mut()
        .write_many(&[flowstore::WriteOp::Set {
            key: keys.global(nf_lb::POOL),
            value: b"10.1.0.1:8080 down\n10.1.0.9:9000 up\n".to_vec(),
        }])
        .unwrap();
    let client: IpAddr = "192.0.2.5".parse().unwrap();
    let t = Transport::Tcp {
        seq: 1,
        ack: 2,
        flags: packet::TCP_SYN | packet::TCP_ACK,
    };
    let reply = FrameSpec::new("10.1.0.9".parse().unwrap(), client, 9000, 40000, t).build();
    *rt.device_mut() = RecordingDevice::new(vec![syn(5, 0)]);
    rt.run(TimeSource::Packets, &AtomicBool::new(false))
        .unwrap();
    assert_eq!(
        backend_of(&rt.device().out[0]),
        Some("10.1.0.9:9000".parse().unwrap())
    );
    // The reply reaches another instance, which has seen no packet yet (asymmetric routing).
    let s = Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap());
    let mut other = runtime(s, "lbadd", &c, vec![(1_000_000, reply)]);
    other
        .run(TimeSource::Packets, &AtomicBool::new(false))
        .unwrap();
    let out = other.device().out[0].as_ref().expect("reply forwarded");
    let r = Parsed::new_checked(out).unwrap();
    assert_eq!(
        (r.src.to_string(), r.ports().0),
        ("10.0.0.100".to_string(), 80)
    );
    assert!(checksums_valid(out));
}

/// Packets between clients and the VIP / the backend `10.1.0.1:<bport>`: `(t_ms, client port,
/// to the VIP (else from the backend), TCP flags ("" for UDP), verdict)`.
fn lb_packets(
    vport: u16,
    bport: u16,
    rows: &[(u64, u16, bool, &str, &str)],
) -> (Vec<(u64, Vec<u8>)>, Vec<String>) {
    let mut frames = Vec::new();
    for &(t, cport, to_vip, flags, _) in rows {
        let (src, dst, sport, dport) = if to_vip {
            ("192.0.2.1", "10.0.0.100", cport, vport)
        } else {
            ("10.1.0.1", "192.0.2.1", bport, cport)
        };
        let mut v = serde_json::json!({"t_ms": t, "src": src, "dst": dst, "sport": sport,
                                       "dport": dport, "payload": "x"});
        if flags.is_empty() {
            v["proto"] = "udp".into();
        } else {
            v["flags"] = flags.into();
        }
        frames.push(frame_from_json(&v).unwrap());
    }
    (frames, rows.iter().map(|r| r.4.to_string()).collect())
}

/// Timeouts per protocol and phase with the default config: an established TCP connection idle
/// for a day keeps its backend, one half-closed lives 120 s idle, one closed by FINs both ways
/// goes 10 s after the last FIN, one reset 10 s after (then
/// the backend's packets to the client are dropped: no connection); UDP: a flow answered lives
/// 120 s idle, one never answered 30 s. Local, Redis, two instances taking turns.
#[test]
fn timeouts_per_protocol_and_phase() {
    let redis = TestRedis::start().expect("redis-server");
    let day = 86_400_000;
    let tcp = lb_packets(
        80,
        8080,
        &[
            (0, 40000, true, "S", "forward"),
            (1, 40000, false, "SA", "forward"),
            (2, 40000, true, "A", "forward"),
            (600_000, 40000, true, "PA", "forward"),
            (day, 40000, false, "PA", "forward"),
            (day + 1, 40001, true, "S", "forward"),
            (day + 2, 40001, false, "SA", "forward"),
            (day + 3, 40001, true, "A", "forward"),
            (day + 4, 40001, true, "FA", "forward"),
            (day + 100_004, 40001, false, "PA", "forward"),
            (day + 100_005, 40001, false, "FA", "forward"),
            (day + 111_005, 40001, false, "A", "drop"),
            (day + 230_006, 40002, true, "S", "forward"),
            (day + 230_007, 40002, false, "SA", "forward"),
            (day + 230_008, 40002, false, "R", "forward"),
            (day + 241_008, 40002, false, "A", "drop"),
            (day + 241_009, 40000, true, "A", "forward"),
        ],
    );
    let udp = lb_packets(
        53,
        5353,
        &[
            (0, 5000, true, "", "forward"),
            (29_000, 5000, false, "", "forward"),
            (139_000, 5000, false, "", "forward"),
            (258_000, 5000, true, "", "forward"),
            (379_000, 5000, false, "", "drop"),
            (379_001, 5001, true, "", "forward"),
            (410_001, 5001, false, "", "drop"),
        ],
    );
    let tcp_cfg =
        serde_json::json!({"vip": "10.0.0.100", "port": 80, "backends": ["10.1.0.1:8080"]});
    let udp_cfg = serde_json::json!({"vip": "10.0.0.100", "port": 53, "proto": "udp",
                                     "backends": ["10.1.0.1:5353"]});
    for (what, cfg, (frames, want)) in [("tcp", &tcp_cfg, &tcp), ("udp", &udp_cfg, &udp)] {
        let mk = || Box::new(LoadBalancer::from_config(cfg).unwrap());
        let local = run_ticking(|| (mk(), Box::new(LocalStore::new())), "lbto", frames, 1);
        assert_eq!(&verdicts(&local), want, "{what} local");
        for n in [1, 2] {
            let out = run_ticking(
                || {
                    let s = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
                    (mk(), Box::new(s))
                },
                &format!("lbto{what}{n}"),
                frames,
                n,
            );
            assert_eq!(out, local, "{what} redis, {n} instances");
        }
    }
    // The older keys keep their meaning: idle 60 s cuts the idle connection.
    let old = serde_json::json!({"vip": "10.0.0.100", "port": 80, "backends": ["10.1.0.1:8080"],
                                 "idle_timeout_ms": 60000});
    let out = run_ticking(
        || {
            (
                Box::new(LoadBalancer::from_config(&old).unwrap()),
                Box::new(LocalStore::new()),
            )
        },
        "lbtold",
        &tcp.0,
        1,
    );
    assert_eq!(verdicts(&out)[3], "drop", "idle_timeout_ms 60000");
}

/// The backend's packet to client `client` (port 40000) from `backend`.
fn from_backend(backend: SocketAddr, client: u32, t_ms: u64, flags: u8) -> (u64, Vec<u8>) {
    let dst = IpAddr::V4(std::net::Ipv4Addr::from(0xc000_0200 + client));
    let t = Transport::Tcp {
        seq: 1,
        ack: 2,
        flags,
    };
    let f = FrameSpec::new(backend.ip(), dst, backend.port(), 40000, t).build();
    (t_ms * 1_000_000, f)
}

fn pool_text(store: &mut dyn FlowStore, nf_id: &str) -> String {
    let mut v = Vec::new();
    let key = KeySpace::new(nf_id).unwrap().global(nf_lb::POOL);
    store.get_many(&[key], &mut v).unwrap();
    String::from_utf8(v.pop().flatten().unwrap()).unwrap()
}

/// `PUT /config` on two running instances sharing one Redis: the backend of a live connection
/// is removed and another added. The connection keeps its backend both ways on both instances
/// (`on_backend_down: drop` does not cut it: removed is not down), new connections never get
/// it, and it leaves the tier's pool when its last connection ends. Another VIP takes a restart
/// (409), a bad config is 400 naming the field and changes nothing, counters are kept.
#[test]
fn backends_change_in_place_and_live_connections_keep_theirs() {
    use nfcore::harness::{feed, reconfigure};
    let redis = TestRedis::start().expect("redis-server");
    let conn = || Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap());
    let base = serde_json::json!({"vip": "10.0.0.100", "port": 80, "on_backend_down": "drop",
                                   "backends": ["10.1.0.1:8080", "10.1.0.2:8080"]});
    let mut a = runtime(conn(), "lbcfg", &base, vec![]);
    let mut b = runtime(conn(), "lbcfg", &base, vec![]);
    let out = feed(&mut a, vec![syn(1, 0)]);
    let live = backend_of(&out[0]).expect("forwarded");
    let other: SocketAddr = if live.port() == 8080 && live.ip().to_string() == "10.1.0.1" {
        "10.1.0.2:8080".parse().unwrap()
    } else {
        "10.1.0.1:8080".parse().unwrap()
    };
    let added: SocketAddr = "10.1.0.3:8080".parse().unwrap();
    let mut next = base.clone();
    next["backends"] = serde_json::json!([other.to_string(), added.to_string()]);

    let mut bad = next.clone();
    bad["backends"] = serde_json::json!(["10.1.0.1:0"]);
    let e = reconfigure(&mut a, &bad).unwrap_err();
    assert_eq!(e.status, 400);
    assert!(e.message.contains("backends"), "{}", e.message);
    let before = pool_text(a.store_mut(), "lbcfg");
    assert!(!before.contains("drain"), "{before}");

    for rt in [&mut a, &mut b] {
        reconfigure(rt, &next).expect("in place");
    }
    let pool = pool_text(a.store_mut(), "lbcfg");
    assert_eq!(
        pool,
        format!("{other} up\n{added} up\n{live} drain\n"),
        "added once, the removed one drains"
    );
    // The live connection, both ways, on both instances.
    for (i, rt) in [&mut a, &mut b].into_iter().enumerate() {
        let t = 10 + 2 * i as u64;
        let out = feed(
            rt,
            vec![data(1, t), from_backend(live, 1, t + 1, packet::TCP_ACK)],
        );
        assert_eq!(backend_of(&out[0]), Some(live), "instance {i}");
        let r = Parsed::new_checked(out[1].as_ref().expect("reply forwarded")).unwrap();
        assert_eq!((r.src.to_string(), r.ports().0), ("10.0.0.100".into(), 80));
    }
    assert_eq!(a.nf().stats()["to_backend"], 2, "counters kept");
    // New connections: never the removed backend.
    let got: Vec<_> = feed(&mut b, (2..10).map(|c| syn(c, 20)).collect())
        .iter()
        .map(|o| backend_of(o).expect("forwarded"))
        .collect();
    assert!(got.iter().all(|x| *x == other || *x == added), "{got:?}");
    assert!(got.contains(&added));
    // The live connection ends: once its record expires, the backend leaves the pool.
    feed(&mut a, vec![from_backend(live, 1, 30, packet::TCP_RST)]);
    assert_eq!(a.fire_timers(10_100_000_000).unwrap(), 1);
    assert_eq!(
        pool_text(a.store_mut(), "lbcfg"),
        format!("{other} up\n{added} up\n")
    );
    // Another VIP is another service: not in place.
    let mut vip = next.clone();
    vip["vip"] = "10.0.0.101".into();
    let e = reconfigure(&mut a, &vip).unwrap_err();
    assert_eq!(e.status, 409, "{}", e.message);
}

/// Backends changed by a rolling update (new instances started with the new config beside an
/// old one, no `PUT /config`) reach the tier as the change in place does: the first new
/// instance's start makes the pool follow (added up, the live connection's removed backend
/// draining), a second changes nothing; the live connection keeps its backend on a new
/// instance, new connections never get it. An instance of the same config started after an
/// operator's edit of the pool (a backend marked down) leaves the edit as it is.
#[test]
fn backends_changed_by_a_rolling_update_reach_the_tier() {
    use nfcore::harness::feed;
    let redis = TestRedis::start().expect("redis-server");
    let conn = || Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap());
    let base = serde_json::json!({"vip": "10.0.0.100", "port": 80,
                                   "backends": ["10.1.0.1:8080", "10.1.0.2:8080"]});
    let mut a = runtime(conn(), "lbroll", &base, vec![]);
    let live = backend_of(&feed(&mut a, vec![syn(1, 0)])[0]).expect("forwarded");
    let other: SocketAddr = if live.to_string() == "10.1.0.1:8080" {
        "10.1.0.2:8080".parse().unwrap()
    } else {
        "10.1.0.1:8080".parse().unwrap()
    };
    let added: SocketAddr = "10.1.0.3:8080".parse().unwrap();
    let mut next = base.clone();
    next["backends"] = serde_json::json!([other.to_string(), added.to_string()]);

    // An instance of the same config after an edit: the edit stays.
    let keys = KeySpace::new("lbroll").unwrap();
    assert!(set_backend_state(a.store_mut(), &keys, other, false).unwrap());
    let _same = runtime(conn(), "lbroll", &base, vec![]);
    assert_eq!(
        pool_text(a.store_mut(), "lbroll"),
        format!(
            "10.1.0.1:8080 {}\n10.1.0.2:8080 {}\n",
            if other.to_string() == "10.1.0.1:8080" {
                "down"
            } else {
                "up"
            },
            if other.to_string() == "10.1.0.2:8080" {
                "down"
            } else {
                "up"
            }
        ),
    );
    assert!(set_backend_state(a.store_mut(), &keys, other, true).unwrap());

    let mut n1 = runtime(conn(), "lbroll", &next, vec![]);
    let want = format!("{other} up\n{added} up\n{live} drain\n");
    assert_eq!(
        pool_text(a.store_mut(), "lbroll"),
        want,
        "added, the removed one drains"
    );
    let _n2 = runtime(conn(), "lbroll", &next, vec![]);
    assert_eq!(pool_text(a.store_mut(), "lbroll"), want, "changed once");
    // The live connection keeps its backend on a new instance.
    let out = feed(
        &mut n1,
        vec![data(1, 10), from_backend(live, 1, 11, packet::TCP_ACK)],
    );
    assert_eq!(backend_of(&out[0]), Some(live));
    let r = Parsed::new_checked(out[1].as_ref().expect("reply forwarded")).unwrap();
    assert_eq!((r.src.to_string(), r.ports().0), ("10.0.0.100".into(), 80));
    // New connections, on the new instance and on the old one: never the removed backend.
    for rt in [&mut n1, &mut a] {
        let got: Vec<_> = feed(rt, (2..8).map(|c| syn(c, 20)).collect())
            .iter()
            .map(|o| backend_of(o).expect("forwarded"))
            .collect();
        assert!(got.iter().all(|x| *x == other || *x == added), "{got:?}");
    }
}
