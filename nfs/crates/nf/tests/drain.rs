//! `POST /drain` on real `nf` processes on real veth ports, batch by batch (`--store local`) and
//! pipelined (a real Redis): frames sent right before the request are taken, processed and sent
//! before it answers, also when the NF was stopped (SIGSTOP, as a throttled instance) while they
//! arrived; a frame during the quiet window restarts it; bad requests are refused and change
//! nothing. Needs root (SKIP otherwise).

use flowstore::test_redis::TestRedis;
use netio::afpacket::{AfPacket, RingConfig};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;
use common::{
    burst, http, http_get, json, request, returned, spawn_monitor, split_response, stats_json,
    TempDir,
};
use testnet::Veth;

const BURST: u32 = 300;

fn counters(sock: &Path) -> serde_json::Value {
    stats_json(sock)["counters"].clone()
}

/// The answer says drained, with run `run`'s burst (sent after rx was `rx0`) counted, and every
/// frame of it came back through the NF.
fn assert_burst_through(
    answer: &(String, serde_json::Value),
    rx0: u64,
    rx: &mut AfPacket,
    run: u32,
) {
    let (st, v) = answer;
    assert!(st.contains("200") && v["drained"] == true, "{st} {v}");
    assert!(v["rx"].as_u64().unwrap() >= rx0 + u64::from(BURST), "{v}");
    let back = returned(rx, run, BURST as usize, Duration::from_secs(5)).len();
    let ring = netio::Device::rx_counts(rx);
    assert_eq!(back, BURST as usize, "{v}; the test's own ring: {ring:?}");
}

/// The test's receive ring for what the NF sends back. It is read only once a drain has
/// answered, so it must hold everything sent back until then however the NF's sends are spread in
/// time: a TPACKET_V3 block is handed over 1 ms after its first frame, with as few as one frame in
/// it (a slowed NF), so the ring has more blocks than frames can wait (a burst, and what earlier steps left).
fn return_ring() -> RingConfig {
    RingConfig {
        block_size: 1 << 12,
        block_nr: 1024,
        ..RingConfig::for_batch(64)
    }
}

fn drain(sock: &Path, query: &str) -> (String, serde_json::Value) {
    let (st, body) = http(sock, "POST", &format!("/drain?{query}"), b"");
    (st, json(&body))
}

type Answer = std::thread::JoinHandle<(String, serde_json::Value)>;

/// A drain request sent now (connected and written before this returns: the endpoint takes it in
/// order, before any later request), its answer read on a thread.
fn drain_sent(sock: &Path, query: &str) -> Answer {
    let mut c = UnixStream::connect(sock).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c.write_all(&request("POST", &format!("/drain?{query}"), b""))
        .unwrap();
    std::thread::spawn(move || {
        let mut resp = vec![];
        c.read_to_end(&mut resp).unwrap();
        let (st, body) = split_response(&resp);
        (st, json(&body))
    })
}

/// Once this answers, the endpoint has taken every request sent before (one connection at a time).
fn taken(sock: &Path) {
    assert!(http_get(sock, "/health")
        .unwrap()
        .starts_with("HTTP/1.1 200"));
}

/// rx = everything it received has been sent or dropped.
fn assert_idle(c: &serde_json::Value) {
    let g = |k: &str| c[k].as_u64().unwrap();
    let ends = g("tx") + g("dropped_by_nf") + g("malformed") + g("fail_closed_dropped");
    assert_eq!(g("rx"), ends, "{c}");
}

fn case(store: &str, what: &str, veth: (&str, &str), dir: &Path) {
    let cfg = dir.join("mon.json");
    std::fs::write(&cfg, r#"{"batch_size": 8}"#).unwrap();
    let sock_path: PathBuf = dir.join(format!("{what}.stats"));
    let sock = sock_path.as_path();
    let nf = spawn_monitor("dmon", veth.1, store, sock, &cfg, &[]);
    let pid = nf.0.id() as libc::pid_t;
    let mut tx = AfPacket::open(veth.0, RingConfig::for_batch(32)).unwrap();
    let mut rx = AfPacket::open(veth.0, return_ring()).unwrap();

    // Bad requests: refused, naming the field; the instance goes on.
    let (st, _) = http(sock, "GET", "/drain?quiet_ms=0", b"");
    assert!(st.contains("405"), "{what}: {st}");
    for (q, field) in [
        ("", "quiet_ms"),
        ("quiet_ms=x", "quiet_ms"),
        ("quiet_ms=10001", "quiet_ms"),
        ("quiet_ms=0&timeout_ms=0", "timeout_ms"),
        ("quiet_ms=0&nope=1", "query"),
    ] {
        let (st, v) = drain(sock, q);
        assert!(
            st.contains("400") && v["field"] == field,
            "{what} {q}: {st} {v}"
        );
    }

    // 1. A burst, the request right behind it (quiet 0: only the ring and what is in flight
    // decide). Every frame of the burst is counted, processed and sent by the answer.
    let rx0 = counters(sock)["rx"].as_u64().unwrap();
    burst(&mut tx, 1, BURST, 0);
    let answer = drain(sock, "quiet_ms=0&timeout_ms=5000");
    let v = &answer.1;
    assert_eq!(
        (v["waiting"].as_u64(), v["in_flight"].as_u64()),
        (Some(0), Some(0)),
        "{v}"
    );
    assert_eq!(v["port_drops"], 0, "{what}: {v}");
    assert_burst_through(&answer, rx0, &mut rx, 1);
    assert_idle(&counters(sock));

    // 2. Frames arriving while the NF does not run (stopped, as a throttled sNIC instance for a
    // CPU period), the request queued behind them: answered only after they are through.
    let rx0 = counters(sock)["rx"].as_u64().unwrap();
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    burst(&mut tx, 2, BURST, 0);
    let asker = drain_sent(sock, "quiet_ms=0&timeout_ms=5000");
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert_burst_through(&asker.join().unwrap(), rx0, &mut rx, 2);

    // 3. A frame during the quiet window starts it again: the answer comes `quiet` after it.
    // The window is long next to the 50 ms before the frame (1 s): were the test itself delayed
    // past the window (a loaded machine), the drain would answer before the frame was sent.
    let asker = drain_sent(sock, "quiet_ms=1000&timeout_ms=5000");
    taken(sock);
    std::thread::sleep(Duration::from_millis(50));
    burst(&mut tx, 3, 1, 0);
    let (st, v) = asker.join().unwrap();
    assert!(
        st.contains("200") && v["drained"] == true,
        "{what}: {st} {v}"
    );
    let last = v["last_ms"].as_f64().expect("a late frame");
    assert!(v["late"].as_u64().unwrap() >= 1, "{v}");
    assert!(
        v["waited_ms"].as_f64().unwrap() >= last + 1000.0,
        "{what}: {v}"
    );

    // 4. Past its deadline a request is answered "not drained" (a window longer than the bound
    // cannot end in time), with frames still arriving; the instance goes on serving.
    let asker = drain_sent(sock, "quiet_ms=1000&timeout_ms=400");
    let t0 = Instant::now();
    while !asker.is_finished() && t0.elapsed() < Duration::from_secs(5) {
        burst(&mut tx, 4, 4, 0);
        std::thread::sleep(Duration::from_millis(20));
    }
    let (st, v) = asker.join().unwrap();
    assert!(
        st.contains("200") && v["drained"] == false,
        "{what}: {st} {v}"
    );
    assert!(v["waited_ms"].as_f64().unwrap() >= 400.0, "{v}");
    taken(sock);
    drop(nf);
}

#[test]
fn drain_answers_once_what_came_before_it_has_left() {
    let tag = std::process::id() % 100_000;
    let Some((_veth, a, b)) = Veth::pair("udr") else {
        eprintln!("SKIP: cannot create a veth pair (not root?)");
        return;
    };
    let dir = TempDir(std::env::temp_dir().join(format!("unonfs-drain-{tag}")));
    std::fs::create_dir_all(&dir.0).unwrap();
    case("local", "local", (&a, &b), &dir.0);
    match TestRedis::start() {
        Ok(redis) => case(&redis.unix_url(), "redis", (&a, &b), &dir.0),
        Err(e) => eprintln!("SKIP (pipelined case): no redis-server: {e}"),
    }
    // A buffering instance (a move's target) is not drained: its queue waits for its release.
    let cfg = dir.0.join("mon.json");
    let sock = dir.0.join("buf.stats");
    let _buf = spawn_monitor("dmon", &b, "local", &sock, &cfg, &["--buffer", "100"]);
    let (st, v) = drain(&sock, "quiet_ms=0");
    assert!(st.contains("409") && v["field"] == "drain", "{st} {v}");
}
