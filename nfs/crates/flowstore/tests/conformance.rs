//! The same behaviour from the Redis store (real redis-server) and the local store.

use flowstore::test_redis::TestRedis;
use flowstore::*;
use std::collections::HashSet;

fn exercise(s: &mut dyn FlowStore) {
    let ks = KeySpace::new("t").unwrap();
    let a = ks.flow(1, "x");
    let b = ks.flow(2, "x");
    let mut out = vec![];
    s.get_many(&[a.clone(), b.clone()], &mut out).unwrap();
    assert_eq!(out, vec![None, None]);
    s.write_many(&[
        WriteOp::Set {
            key: a.clone(),
            value: b"1".to_vec(),
        },
        WriteOp::Set {
            key: b.clone(),
            value: vec![0, 255, 7],
        },
        WriteOp::Del { key: a.clone() },
    ])
    .unwrap();
    s.get_many(&[a.clone(), b.clone()], &mut out).unwrap();
    assert_eq!(out, vec![None, Some(vec![0, 255, 7])]);
    // Compare-and-set.
    assert!(s.compare_and_set(&a, None, Some(b"v1")).unwrap());
    assert!(!s.compare_and_set(&a, None, Some(b"v2")).unwrap());
    assert!(!s.compare_and_set(&a, Some(b"zz"), Some(b"v2")).unwrap());
    assert!(s.compare_and_set(&a, Some(b"v1"), None).unwrap());
    s.get_many(std::slice::from_ref(&a), &mut out).unwrap();
    assert_eq!(out, vec![None]);
    assert_eq!(s.incr_by(&ks.flow(3, "n"), 5).unwrap(), 5);
    assert_eq!(s.incr_by(&ks.flow(3, "n"), -2).unwrap(), 3);
    // Increments with the batch's writes: absent = 0, in order with the other writes.
    let c = ks.flow(5, "c");
    s.write_many(&[
        WriteOp::Incr {
            key: c.clone(),
            delta: 4,
        },
        WriteOp::Incr {
            key: c.clone(),
            delta: -1,
        },
        WriteOp::Incr {
            key: ks.flow(3, "n"),
            delta: 7,
        },
    ])
    .unwrap();
    s.get_many(std::slice::from_ref(&c), &mut out).unwrap();
    assert_eq!(out, vec![Some(b"3".to_vec())]);
    assert_eq!(s.incr_by(&ks.flow(3, "n"), 0).unwrap(), 10);
    s.write_many(&[
        WriteOp::Set {
            key: c.clone(),
            value: b"40".to_vec(),
        },
        WriteOp::Incr {
            key: c.clone(),
            delta: 2,
        },
    ])
    .unwrap();
    assert_eq!(s.incr_by(&c, 0).unwrap(), 42);
    // Pool: initialised once, FIFO, push back.
    let pool = ks.global("pool");
    assert!(s
        .pool_init(&pool, &[b"p1".to_vec(), b"p2".to_vec()])
        .unwrap());
    assert!(!s.pool_init(&pool, &[b"p3".to_vec()]).unwrap());
    assert_eq!(s.pool_len(&pool).unwrap(), 2);
    assert_eq!(s.pool_pop(&pool).unwrap(), Some(b"p1".to_vec()));
    assert_eq!(s.pool_pop(&pool).unwrap(), Some(b"p2".to_vec()));
    assert_eq!(s.pool_pop(&pool).unwrap(), None);
    s.pool_push(&pool, b"p1").unwrap();
    assert_eq!(s.pool_pop(&pool).unwrap(), Some(b"p1".to_vec()));
    // Blocks: up to `max` in pool order, fewer when the pool holds fewer.
    for p in [b"q1", b"q2", b"q3"] {
        s.pool_push(&pool, p).unwrap();
    }
    assert_eq!(
        s.pool_pop_many(&pool, 2).unwrap(),
        vec![b"q1".to_vec(), b"q2".to_vec()]
    );
    assert_eq!(s.pool_pop_many(&pool, 5).unwrap(), vec![b"q3".to_vec()]);
    assert!(s.pool_pop_many(&pool, 5).unwrap().is_empty());
    // Hash fields: increments, set, set-if-absent; DEL removes the hash.
    let h = ks.flow(4, "h");
    assert!(s.hash_get_all(&h).unwrap().is_empty());
    let hop = |field: &[u8], op: HashOp| WriteOp::Hash {
        key: h.clone(),
        field: field.to_vec(),
        op,
    };
    s.write_many(&[
        hop(b"n", HashOp::Incr(3)),
        hop(b"n", HashOp::Incr(-1)),
        hop(b"first", HashOp::SetNx(b"10".to_vec())),
        hop(b"first", HashOp::SetNx(b"20".to_vec())),
        hop(b"last", HashOp::Set(b"10".to_vec())),
        hop(b"last", HashOp::Set(b"20".to_vec())),
    ])
    .unwrap();
    assert_eq!(
        s.hash_get_all(&h).unwrap(),
        vec![
            (b"first".to_vec(), b"10".to_vec()),
            (b"last".to_vec(), b"20".to_vec()),
            (b"n".to_vec(), b"2".to_vec()),
        ]
    );
    s.write_many(&[WriteOp::Del { key: h.clone() }]).unwrap();
    assert!(s.hash_get_all(&h).unwrap().is_empty());
    // Timers: moved deadlines, cancel, claim due only.
    let tm = ks.global("timers");
    s.write_many(&[
        WriteOp::TimerSet {
            timers: tm.clone(),
            member: b"f1".to_vec(),
            deadline_ms: 100,
        },
        WriteOp::TimerSet {
            timers: tm.clone(),
            member: b"f2".to_vec(),
            deadline_ms: 200,
        },
        WriteOp::TimerSet {
            timers: tm.clone(),
            member: b"f3".to_vec(),
            deadline_ms: 50,
        },
        WriteOp::TimerSet {
            timers: tm.clone(),
            member: b"f1".to_vec(),
            deadline_ms: 300,
        },
        WriteOp::TimerCancel {
            timers: tm.clone(),
            member: b"f3".to_vec(),
        },
    ])
    .unwrap();
    assert!(s.timer_claim_due(&tm, 150, 10).unwrap().is_empty());
    assert_eq!(
        s.timer_claim_due(&tm, 250, 10).unwrap(),
        vec![b"f2".to_vec()]
    );
    assert!(s.timer_claim_due(&tm, 250, 10).unwrap().is_empty());
    assert_eq!(
        s.timer_claim_due(&tm, 1000, 10).unwrap(),
        vec![b"f1".to_vec()]
    );
}

#[test]
fn local_store_semantics() {
    exercise(&mut LocalStore::new());
}

/// Over TCP loopback and over the server's unix socket (each run in its own database, so the
/// second starts from an empty tier).
#[test]
fn redis_store_semantics_and_round_trips() {
    let r = TestRedis::start().expect("redis-server");
    for url in [format!("{}/0", r.url()), format!("{}?db=1", r.unix_url())] {
        redis_semantics(&url);
    }
}

fn redis_semantics(url: &str) {
    let mut s = RedisStore::connect(RedisConfig::new(url)).unwrap();
    exercise(&mut s);
    // A batch read of many keys and a batch write are one round trip each.
    let keys: Vec<Key> = (0..100)
        .map(|i| KeySpace::new("t").unwrap().flow(i, "y"))
        .collect();
    let before = s.stats().round_trips;
    let mut b = BatchState::new();
    for k in &keys {
        b.want(k.clone());
    }
    b.fetch(&mut s).unwrap();
    for k in &keys {
        b.set(k, b"v".to_vec());
    }
    b.flush(&mut s).unwrap();
    assert_eq!(s.stats().round_trips - before, 2);
}

#[test]
fn redis_pool_race_gives_each_item_once() {
    let r = TestRedis::start().expect("redis-server");
    let url = r.url();
    let pool = KeySpace::new("race").unwrap().global("pool");
    let items: Vec<Vec<u8>> = (0..400u32).map(|i| i.to_be_bytes().to_vec()).collect();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (url, pool, items) = (url.clone(), pool.clone(), items.clone());
            std::thread::spawn(move || {
                let mut s = RedisStore::connect(RedisConfig::new(&url)).unwrap();
                s.pool_init(&pool, &items).unwrap();
                let mut got = vec![];
                while let Some(x) = s.pool_pop(&pool).unwrap() {
                    got.push(x);
                }
                got
            })
        })
        .collect();
    let all: Vec<Vec<u8>> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(
        all.len(),
        400,
        "pool initialised exactly once, every item handed out"
    );
    assert_eq!(
        all.iter().collect::<HashSet<_>>().len(),
        400,
        "no item handed out twice"
    );
}

#[test]
fn redis_timers_fire_once_across_instances() {
    let r = TestRedis::start().expect("redis-server");
    let tm = KeySpace::new("tm").unwrap().global("timers");
    let mut s = RedisStore::connect(RedisConfig::new(&r.url())).unwrap();
    let ops: Vec<WriteOp> = (0..500u32)
        .map(|i| WriteOp::TimerSet {
            timers: tm.clone(),
            member: i.to_be_bytes().to_vec(),
            deadline_ms: i as u64,
        })
        .collect();
    s.write_many(&ops).unwrap();
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let (url, tm) = (r.url(), tm.clone());
            std::thread::spawn(move || {
                let mut s = RedisStore::connect(RedisConfig::new(&url)).unwrap();
                let mut got = vec![];
                for now in (0..=520).step_by(20) {
                    got.extend(s.timer_claim_due(&tm, now, 7).unwrap());
                    got.extend(s.timer_claim_due(&tm, now, 7).unwrap());
                }
                got.extend(s.timer_claim_due(&tm, 10_000, 1000).unwrap());
                got
            })
        })
        .collect();
    let all: Vec<Vec<u8>> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(all.len(), 500);
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), 500);
}

/// Over TCP (a new server on the same port) and over the unix socket (a new server on the same
/// path): the client reconnects by itself.
#[test]
fn redis_failure_is_an_error_then_reconnects() {
    for unix in [false, true] {
        failure_then_reconnect(unix);
    }
}

fn failure_then_reconnect(unix: bool) {
    let mut r = TestRedis::start().expect("redis-server");
    let port = r.port;
    let sock = std::env::temp_dir().join(format!("unonfs-re-{}-{port}.sock", std::process::id()));
    let url = if unix {
        format!("unix://{}", sock.display())
    } else {
        r.url()
    };
    // The unix case: the test server's socket is reached through a path the restarted server
    // will take over (a symlink now, the new server's own socket later).
    if unix {
        std::os::unix::fs::symlink(r.socket_path(), &sock).unwrap();
    }
    let mut s = RedisStore::connect(RedisConfig::new(&url)).unwrap();
    let k = KeySpace::new("f").unwrap().flow(9, "x");
    let mut out = vec![];
    s.get_many(std::slice::from_ref(&k), &mut out).unwrap();
    r.kill();
    assert!(s.get_many(std::slice::from_ref(&k), &mut out).is_err());
    assert!(s.get_many(std::slice::from_ref(&k), &mut out).is_err());
    assert!(s.stats().errors >= 2);
    let _ = std::fs::remove_file(&sock);
    let dir = std::env::temp_dir().join(format!("unonfs-redis-re-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = std::process::Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--unixsocket",
        ])
        .arg(&sock)
        .arg("--dir")
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Bounded in time, not in tries: a new redis-server on a loaded machine may take seconds.
    let mut ok = false;
    let t0 = std::time::Instant::now();
    while t0.elapsed() < std::time::Duration::from_secs(30) {
        if s.get_many(std::slice::from_ref(&k), &mut out).is_ok() {
            ok = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&sock);
    assert!(ok, "reconnected (unix: {unix})");
    assert!(s.stats().reconnects >= 1);
}

#[test]
fn bad_url_is_a_clear_error() {
    let e = RedisStore::connect(RedisConfig::new("http://nope"))
        .err()
        .unwrap();
    assert!(e.0.contains("bad store URL"), "{e}");
}

/// The pipelined interface: groups complete in send order, a read sent after a write sees it,
/// a blocking call made with groups in flight gets its own answer and leaves theirs for `recv`,
/// and the owner cache completes fully cached reads without the tier.
#[test]
fn redis_pipeline_order_and_blocking_calls_in_between() {
    let r = TestRedis::start().expect("redis-server");
    pipeline_order(&r.url());
    let r = TestRedis::start().expect("redis-server");
    pipeline_order(&r.unix_url());
}

/// Reads and writes in flight in order, a blocking call among them.
fn pipeline_order_basic(s: &mut dyn FlowStore) {
    let k = |n: u64| KeySpace::new("pl").unwrap().flow(n, "v");
    let set = |n: u64, v: &str| WriteOp::Set {
        key: k(n),
        value: v.as_bytes().to_vec(),
    };
    let p = s.pipeline().expect("redis pipelines");
    p.send_reads(&[k(1), k(2)]).unwrap();
    p.send_writes(&[set(1, "a"), set(2, "b"), WriteOp::Del { key: k(3) }])
        .unwrap();
    p.send_reads(&[k(2), k(1), k(3)]).unwrap();
    p.flush().unwrap();
    assert_eq!(p.in_flight(), 3);
    // A blocking call with three groups in flight.
    assert_eq!(s.incr_by(b"pl-counter", 5).unwrap(), 5);
    let p = s.pipeline().unwrap();
    let mut out = vec![];
    p.recv(&mut out).unwrap();
    assert_eq!(out, vec![None, None], "read before the write");
    p.recv(&mut out).unwrap();
    assert!(out.is_empty(), "write group");
    p.recv(&mut out).unwrap();
    assert_eq!(out, vec![Some(b"b".to_vec()), Some(b"a".to_vec()), None]);
    assert_eq!(p.in_flight(), 0);
    assert!(p.recv(&mut out).is_err(), "nothing in flight");
}

fn pipeline_order(url: &str) {
    use flowstore::CachedStore;
    let mut s = RedisStore::connect(RedisConfig::new(url)).unwrap();
    pipeline_order_basic(&mut s);
    let k = |n: u64| KeySpace::new("pl").unwrap().flow(n, "v");
    let mut out = vec![];
    // Owner cache: a second read of the same keys is answered locally.
    let inner = RedisStore::connect(RedisConfig::new(url)).unwrap();
    let mut c = CachedStore::new(inner, b"pl-epoch".to_vec(), 100);
    let p = c.pipeline().expect("cache over redis pipelines");
    p.send_reads(&[k(1), k(9)]).unwrap();
    p.recv(&mut out).unwrap();
    assert_eq!(out, vec![Some(b"a".to_vec()), None]);
    let trips = c.stats().round_trips;
    let p = c.pipeline().unwrap();
    p.send_reads(&[k(9), k(1)]).unwrap();
    p.recv(&mut out).unwrap();
    assert_eq!(out, vec![None, Some(b"a".to_vec())]);
    assert_eq!(c.stats().round_trips, trips, "served from the cache");
    assert_eq!((c.hits, c.misses), (2, 2));
}

/// Blocking calls with groups in flight: on a key a write group in flight changes, the call waits
/// for the pipeline (it must see that write); on other keys it goes ahead on the side
/// connection without collecting the pipeline's replies.
#[test]
fn redis_blocking_calls_respect_writes_in_flight() {
    use flowstore::WriteOp;
    let r = TestRedis::start().expect("redis-server");
    let mut s = RedisStore::connect(RedisConfig::new(&r.url())).unwrap();
    let k = |n: u64| KeySpace::new("sd").unwrap().flow(n, "v");
    let p = s.pipeline().unwrap();
    // Queued, not even flushed: only a call that pushes the pipeline first can see it.
    p.send_writes(&[WriteOp::Set {
        key: k(1),
        value: b"1".to_vec(),
    }])
    .unwrap();
    p.send_reads(&[k(1), k(2)]).unwrap();
    // Key 2 is not written by anything in flight: side connection, pipeline untouched.
    assert!(s.compare_and_set(&k(2), None, Some(b"x")).unwrap());
    assert_eq!(s.pipeline().unwrap().in_flight(), 2);
    // Key 1 is: the call waits for the write, so the CAS sees "1".
    assert!(s.compare_and_set(&k(1), Some(b"1"), Some(b"2")).unwrap());
    let p = s.pipeline().unwrap();
    let mut out = vec![];
    p.recv(&mut out).unwrap();
    assert!(out.is_empty());
    p.recv(&mut out).unwrap();
    assert_eq!(out, vec![Some(b"1".to_vec()), Some(b"x".to_vec())]);
    // After a reset the store starts afresh.
    p.send_reads(&[k(1)]).unwrap();
    p.reset();
    assert_eq!(p.in_flight(), 0);
    let mut v = vec![];
    s.get_many(&[k(1)], &mut v).unwrap();
    assert_eq!(v, vec![Some(b"2".to_vec())]);
}

/// Random write batches (few keys and timer members, every kind of write incl. conditional ones,
/// interleaved) give the same tier state and the same conditional outcomes applied by Redis (which
/// groups them by command when that is safe) as applied in order by the local store.
#[test]
fn redis_write_grouping_keeps_outcomes() {
    let redis = TestRedis::start().expect("redis-server");
    let mut r = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
    let mut l = LocalStore::new();
    let ks = KeySpace::new("grp").unwrap();
    let timers = ks.global("timers");
    let keys: Vec<Key> = (0..6).map(|i| ks.flow(i, "k")).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for round in 0..300 {
        let mut ops = vec![];
        for _ in 0..(1 + next(8)) {
            let k = keys[next(6) as usize].clone();
            let m = format!("m{}", next(4)).into_bytes();
            ops.push(match next(8) {
                // Claims and conditional writes (their outcomes compared below).
                6 => WriteOp::SetIf {
                    key: k,
                    expect: None,
                    value: Some(b"-3".to_vec()),
                },
                7 => WriteOp::SetIf {
                    key: k,
                    expect: Some(b"-3".to_vec()),
                    value: [None, Some(b"-4".to_vec())][next(2) as usize].clone(),
                },
                0 => WriteOp::Set {
                    key: k,
                    value: format!("{}", next(100)).into_bytes(),
                },
                1 => WriteOp::Del { key: k },
                2 => WriteOp::Incr {
                    key: k,
                    delta: next(5) as i64,
                },
                3 => WriteOp::TimerSet {
                    timers: timers.clone(),
                    member: m,
                    deadline_ms: next(10),
                },
                4 => WriteOp::TimerCancel {
                    timers: timers.clone(),
                    member: m,
                },
                // Values stay integers (INCRBY of anything else is an error in Redis).
                _ => WriteOp::Set {
                    key: k,
                    value: b"-7".to_vec(),
                },
            });
        }
        let (mut fr, mut fl) = (vec![], vec![]);
        r.write_checked(&ops, &mut fr).unwrap();
        l.write_checked(&ops, &mut fl).unwrap();
        assert_eq!(fr, fl, "round {round}: conditional outcomes of {ops:?}");
        let (mut a, mut b) = (vec![], vec![]);
        r.get_many(&keys, &mut a).unwrap();
        l.get_many(&keys, &mut b).unwrap();
        assert_eq!(a, b, "round {round}: {ops:?}");
        if round % 50 == 49 {
            for now in [3, 6, 100] {
                let mut x = r.timer_claim_due(&timers, now, 100).unwrap();
                let mut y = l.timer_claim_due(&timers, now, 100).unwrap();
                x.sort();
                y.sort();
                assert_eq!(x, y, "round {round}: timers due at {now}");
            }
        }
    }
}

/// Conditional writes ([`WriteOp::SetIf`]): applied in order only where the value is the one
/// expected (a claim: absent), the others reported by `write_checked` (local and Redis, SET NX
/// and the compare-and-set script) and by the pipeline's `recv`; the owner cache, which assumed
/// they applied, forgets the values of those that did not.
#[test]
fn conditional_writes_report_outcomes() {
    let k = |n: u64| KeySpace::new("cw").unwrap().flow(n, "v");
    let set_if = |n: u64, expect: Option<&str>, value: Option<&str>| WriteOp::SetIf {
        key: k(n),
        expect: expect.map(|v| v.as_bytes().to_vec()),
        value: value.map(|v| v.as_bytes().to_vec()),
    };
    let ops = [
        WriteOp::Set {
            key: k(2),
            value: b"b".to_vec(),
        },
        set_if(1, None, Some("a")), // claim of an absent key: applies
        set_if(2, None, Some("x")), // claim of a present key: not
        set_if(1, Some("a"), Some("a2")), // conditional on the claim just made: applies
        set_if(2, Some("zz"), Some("y")), // wrong expectation: not
        set_if(2, Some("b"), None), // delete if "b": applies
        set_if(3, Some("q"), None), // delete of an absent key expected present: not
    ];
    let want = vec![Some(b"a2".to_vec()), None, None];
    let r = TestRedis::start().expect("redis-server");
    let mut local = LocalStore::new();
    let mut redis = RedisStore::connect(RedisConfig::new(&r.unix_url())).unwrap();
    for s in [&mut local as &mut dyn FlowStore, &mut redis] {
        let mut failed = vec![];
        s.write_checked(&ops, &mut failed).unwrap();
        assert_eq!(failed, vec![2, 4, 6], "{}", s.kind());
        let mut out = vec![];
        s.get_many(&[k(1), k(2), k(3)], &mut out).unwrap();
        assert_eq!(out, want, "{}", s.kind());
    }
    // Pipelined, behind the owner cache: outcomes per conditional op, in order.
    let inner = RedisStore::connect(RedisConfig::new(&r.unix_url())).unwrap();
    let mut c = CachedStore::new(inner, b"cw-epoch".to_vec(), 100);
    let p = c.pipeline().unwrap();
    p.send_writes(&[set_if(1, None, Some("lost")), set_if(9, None, Some("won"))])
        .unwrap();
    let mut out = vec![];
    p.recv(&mut out).unwrap();
    assert_eq!(out, vec![None, Some(vec![])]);
    // The cache does not keep the losing value.
    let mut v = vec![];
    c.get_many(&[k(1), k(9)], &mut v).unwrap();
    assert_eq!(v, vec![Some(b"a2".to_vec()), Some(b"won".to_vec())]);
}

/// The Redis Cluster client against a real cluster (3 masters, 1 replica each): the same
/// semantics as one Redis, a batch spanning every master costs one round trip per master, its
/// keys land on the masters that own their slots, and a slot migrated under it (ASK while it
/// moves, TRYAGAIN for multi-key commands on the half-moved slot, MOVED once it has) changes
/// no outcome.
#[test]
fn cluster_store_semantics_routing_and_migration() {
    use flowstore::test_cluster::{command, TestCluster};
    let cl = TestCluster::start(3, 1, 5000).expect("redis cluster");
    let mut s = ClusterStore::connect(RedisConfig::new(&cl.url())).unwrap();
    assert_eq!(s.masters().len(), 3);
    exercise(&mut s);
    pipeline_order_basic(&mut s);

    // One batch over many flows: one MGET per slot, one pipeline per master.
    let ks = KeySpace::for_tenant("t1", "cl").unwrap();
    let keys: Vec<Key> = (0..96).map(|i| ks.flow(i * 7919, "r")).collect();
    let ops: Vec<WriteOp> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| WriteOp::Set {
            key: k.clone(),
            value: format!("v{i}").into_bytes(),
        })
        .collect();
    let owners: HashSet<String> = keys
        .iter()
        .map(|k| s.master_of(k).unwrap().to_string())
        .collect();
    assert_eq!(owners.len(), 3, "96 flows hash to every master");
    let before = s.stats().round_trips;
    let p = s.pipeline().unwrap();
    p.send_writes(&ops).unwrap();
    p.send_reads(&keys).unwrap();
    let mut out = vec![];
    let p = s.pipeline().unwrap();
    p.recv(&mut out).unwrap();
    assert!(out.is_empty());
    p.recv(&mut out).unwrap();
    let want: Vec<Option<Vec<u8>>> = (0..96)
        .map(|i| Some(format!("v{i}").into_bytes()))
        .collect();
    assert_eq!(out, want);
    assert_eq!(
        s.stats().round_trips - before,
        6,
        "two groups, three masters each"
    );
    for (i, k) in keys.iter().enumerate() {
        let owner = s.master_of(k).unwrap().to_string();
        assert_eq!(
            command(&owner, &[b"GET", k]).unwrap(),
            flowstore::resp::Reply::Bulk(format!("v{i}").into_bytes()),
            "key {i} on the master of its slot"
        );
    }

    // Migrate one flow's slot from its master to another, step by step.
    let k = |t: &str| ks.flow(424242, t);
    let tables = ["a", "b", "c", "d"];
    let set_all = |s: &mut ClusterStore, v: &str| {
        let ops: Vec<WriteOp> = tables
            .iter()
            .map(|t| WriteOp::Set {
                key: k(t),
                value: format!("{v}{t}").into_bytes(),
            })
            .collect();
        s.write_many(&ops).unwrap();
    };
    let get_all = |s: &mut ClusterStore| {
        let mut out = vec![];
        s.get_many(&tables.map(k), &mut out).unwrap();
        out.into_iter()
            .map(|v| String::from_utf8(v.unwrap()).unwrap())
            .collect::<Vec<_>>()
    };
    set_all(&mut s, "1");
    let slot = flowstore::slots::key_slot(&k("a"));
    let src = s.master_of(&k("a")).unwrap().to_string();
    let dst = s.masters().into_iter().find(|m| *m != src).unwrap();
    let id = |a: &str| match command(a, &[b"CLUSTER", b"MYID"]).unwrap() {
        flowstore::resp::Reply::Bulk(b) => b,
        r => panic!("{r:?}"),
    };
    let (src_id, dst_id) = (id(&src), id(&dst));
    let sl = slot.to_string();
    let ok = |a: &str, args: &[&[u8]]| {
        let r = command(a, args).unwrap();
        assert!(
            !matches!(r, flowstore::resp::Reply::Error(_)),
            "{args:?}: {r:?}"
        );
    };
    ok(
        &dst,
        &[b"CLUSTER", b"SETSLOT", sl.as_bytes(), b"IMPORTING", &src_id],
    );
    ok(
        &src,
        &[b"CLUSTER", b"SETSLOT", sl.as_bytes(), b"MIGRATING", &dst_id],
    );
    let (dh, dp) = dst.rsplit_once(':').unwrap();
    let migrate = |keys: &[Key]| {
        let mut args: Vec<&[u8]> = vec![
            b"MIGRATE",
            dh.as_bytes(),
            dp.as_bytes(),
            b"",
            b"0",
            b"5000",
            b"KEYS",
        ];
        args.extend(keys.iter().map(|k| k.as_slice()));
        ok(&src, &args);
    };
    // Half moved: a and b on the target, c and d on the source.
    migrate(&[k("a"), k("b")]);
    let r0 = s.stats().redirects;
    assert_eq!(get_all(&mut s), ["1a", "1b", "1c", "1d"]);
    set_all(&mut s, "2");
    assert_eq!(get_all(&mut s), ["2a", "2b", "2c", "2d"]);
    // Pipelined too.
    let p = s.pipeline().unwrap();
    p.send_reads(&tables.map(k)).unwrap();
    p.recv(&mut out).unwrap();
    assert_eq!(out[0], Some(b"2a".to_vec()));
    assert_eq!(out[3], Some(b"2d".to_vec()));
    assert!(s.stats().redirects > r0, "ASK followed");
    let get = |a: &str, key: &[u8]| command(a, &[b"GET", key]).unwrap();
    // A settled map first: the TRYAGAINs above marked it stale, and a refresh after the finish
    // would learn the new owner before any MOVED (on a loaded machine the finish takes longer than
    // REFRESH_EVERY). Refreshed now, it still shows the source, so the finish is learnt by MOVED.
    std::thread::sleep(flowstore::cluster::REFRESH_EVERY * 3);
    let mut none = vec![];
    s.get_many(&[ks.flow(7, "other")], &mut none).unwrap();
    // Finish: the rest moves, every master learns the new owner.
    migrate(&[k("c"), k("d")]);
    for m in s.masters() {
        ok(
            &m,
            &[b"CLUSTER", b"SETSLOT", sl.as_bytes(), b"NODE", &dst_id],
        );
    }
    let r1 = s.stats().redirects;
    assert_eq!(get_all(&mut s), ["2a", "2b", "2c", "2d"]);
    assert!(s.stats().redirects > r1, "MOVED followed");
    assert_eq!(
        s.master_of(&k("a")),
        Some(dst.as_str()),
        "the map learnt the move"
    );
    set_all(&mut s, "3");
    assert_eq!(
        get(&dst, &k("d")),
        flowstore::resp::Reply::Bulk(b"3d".to_vec())
    );
}

/// `--store-wait` on one Redis without replicas: refused at start, naming the option.
#[test]
fn wait_needs_replicas_on_one_redis() {
    let r = TestRedis::start().expect("redis-server");
    let mut cfg = RedisConfig::new(&r.url());
    cfg.wait = Some(WaitPolicy {
        replicas: 1,
        timeout_ms: 10,
    });
    let e = RedisStore::connect(cfg).err().expect("refused");
    assert!(
        e.0.contains("--store-wait 1") && e.0.contains("0 replica"),
        "{e}"
    );
}
