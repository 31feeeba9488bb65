//! `POST /hold` on real `nf` processes on a real veth port, batch by batch (`--store local`) and
//! pipelined (a real Redis): a running instance told to hold queues every frame from then on
//! (none leaves), and its release sends them in arrival order before anything later; it then
//! goes on as before. Bad requests are refused naming the field and change nothing. Needs root
//! (SKIP otherwise).

use flowstore::test_redis::TestRedis;
use netio::afpacket::{AfPacket, RingConfig};
use std::path::Path;
use std::time::{Duration, Instant};

mod common;
use common::{burst, http, json, returned, spawn_monitor, stats_json, TempDir};
use testnet::Veth;

const BURST: u32 = 200;

fn post(sock: &Path, path: &str) -> (String, serde_json::Value) {
    let (st, body) = http(sock, "POST", path, b"");
    (st, json(&body))
}

fn counter(sock: &Path, k: &str) -> u64 {
    stats_json(sock)["counters"][k].as_u64().unwrap()
}

fn case(store: &str, what: &str, veth: (&str, &str), dir: &Path) {
    let cfg = dir.join("mon.json");
    std::fs::write(&cfg, r#"{"batch_size": 8}"#).unwrap();
    let sock_path = dir.join(format!("{what}.stats"));
    let sock = sock_path.as_path();
    let _nf = spawn_monitor("hmon", veth.1, store, sock, &cfg, &[]);
    let mut tx = AfPacket::open(veth.0, RingConfig::for_batch(32)).unwrap();
    let ring = RingConfig {
        block_size: 1 << 12,
        block_nr: 1024,
        ..RingConfig::for_batch(64)
    };
    let mut rx = AfPacket::open(veth.0, ring).unwrap();
    let all: Vec<u32> = (0..BURST).collect();
    let wait = Duration::from_secs(5);

    // Bad requests: refused naming the field; the instance goes on unheld.
    let (st, _) = http(sock, "GET", "/hold?buffer=10", b"");
    assert!(st.contains("405"), "{what}: {st}");
    for (q, field) in [
        ("", "buffer"),
        ("?buffer=0", "buffer"),
        ("?buffer=x", "buffer"),
        ("?buffer=5&x=1", "query"),
    ] {
        let (st, v) = post(sock, &format!("/hold{q}"));
        assert!(
            st.contains("400") && v["field"] == field,
            "{what} {q}: {st} {v}"
        );
    }
    let (st, v) = post(sock, "/release");
    assert!(st.contains("409"), "{what}: not holding: {st} {v}");
    burst(&mut tx, 1, BURST, 1);
    assert_eq!(returned(&mut rx, 1, BURST as usize, wait), all, "{what}");

    // Held: nothing leaves, everything is queued; a second hold is refused.
    let (st, v) = post(sock, "/hold?buffer=1000");
    assert!(
        st.contains("200") && v["holding"] == true,
        "{what}: {st} {v}"
    );
    let (st, v) = post(sock, "/hold?buffer=1000");
    assert!(
        st.contains("409") && v["field"] == "hold",
        "{what}: {st} {v}"
    );
    burst(&mut tx, 2, BURST, 1);
    let early = returned(&mut rx, 2, 1, Duration::from_millis(300));
    assert!(early.is_empty(), "{what}: sent while held: {early:?}");
    let t0 = Instant::now();
    while counter(sock, "buffered_now") < u64::from(BURST) && t0.elapsed() < wait {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(counter(sock, "buffered_now"), u64::from(BURST), "{what}");
    // A drain is refused while held (its queue waits for the release).
    let (st, _) = post(sock, "/drain?quiet_ms=0");
    assert!(st.contains("409"), "{what}: {st}");

    // Released: the queue in arrival order, then it goes on (pipelined again with Redis).
    let (st, v) = post(sock, "/release");
    assert!(
        st.contains("200") && v["replayed"] == BURST,
        "{what}: {st} {v}"
    );
    assert_eq!(returned(&mut rx, 2, BURST as usize, wait), all, "{what}");
    burst(&mut tx, 3, BURST, 1);
    assert_eq!(returned(&mut rx, 3, BURST as usize, wait), all, "{what}");
    let c = stats_json(sock)["counters"].clone();
    assert_eq!(
        (c["holds"].as_u64(), c["buffered_now"].as_u64()),
        (Some(1), Some(0)),
        "{c}"
    );
    // And can be held again.
    let (st, _) = post(sock, "/hold?buffer=10");
    assert!(st.contains("200"), "{what}: {st}");
    let (st, v) = post(sock, "/release");
    assert!(st.contains("200") && v["replayed"] == 0, "{what}: {st} {v}");
}

#[test]
fn a_running_instance_holds_then_releases_in_order() {
    let tag = std::process::id() % 100_000;
    let Some((_veth, a, b)) = Veth::pair("uho") else {
        eprintln!("SKIP: cannot create a veth pair (not root?)");
        return;
    };
    let dir = TempDir(std::env::temp_dir().join(format!("unonfs-hold-{tag}")));
    std::fs::create_dir_all(&dir.0).unwrap();
    case("local", "local", (&a, &b), &dir.0);
    match TestRedis::start() {
        Ok(redis) => case(&redis.unix_url(), "redis", (&a, &b), &dir.0),
        Err(e) => eprintln!("SKIP (pipelined case): no redis-server: {e}"),
    }
}
