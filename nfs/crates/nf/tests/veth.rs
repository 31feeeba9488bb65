//! The `nf` binary on a real AF_PACKET port with a real Redis: a firewall on one end of a veth
//! pair (one-arm: it sends what it forwards back out of its port); generated TCP flows enter from
//! the other end, and only the allowed flows' data comes back. As the agent runs it: Redis over
//! its unix socket, the stats endpoint on a unix socket (removed on a clean stop). Needs root
//! (SKIP otherwise).

use flowstore::test_redis::TestRedis;
use netio::afpacket::{AfPacket, RingConfig};
use netio::{Batch, Device};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use traffic::gen::{frames, stamp, GenConfig};
use traffic::Marker;

mod common;
use common::{stats_json, wait_ready, Child};
use testnet::Veth;

#[test]
fn firewall_on_veth_with_redis_passes_only_allowed_flows() {
    let tag = std::process::id() % 100_000;
    let Some((_v, a, b)) = Veth::pair("unf") else {
        eprintln!("SKIP: cannot create a veth pair (not root?)");
        return;
    };
    let redis = TestRedis::start().expect("redis-server");
    let dir = std::env::temp_dir().join(format!("unonfs-veth-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("fw.json");
    std::fs::write(
        &cfg,
        r#"{"rules": [{"action": "allow", "proto": "tcp", "src": "10.0.0.0/8", "dst_port": 80}], "batch_size": 16}"#,
    )
    .unwrap();
    let stats_sock = dir.join("t1.stats");
    let mut nf = Child(
        Command::new(env!("CARGO_BIN_EXE_nf"))
            .args([
                "firewall",
                "--port",
                &b,
                "--store",
                &redis.unix_url(),
                "--nf-id",
                &format!("vfw{tag}"),
            ])
            .args(["--instance", "t1", "--config", cfg.to_str().unwrap()])
            .args(["--stats", &format!("unix://{}", stats_sock.display())])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_ready(stats_sock.as_path(), Duration::from_secs(10), "firewall");
    let mut rx = AfPacket::open(&a, RingConfig::for_batch(64)).unwrap();
    let mut tx = AfPacket::open(&a, RingConfig::for_batch(64)).unwrap();
    let mk = |run, port| GenConfig {
        run,
        flows: 3,
        pkts: 40,
        tcp: true,
        frame_len: 128,
        src: "10.0.0.1".parse().unwrap(),
        dst: "10.1.0.1".parse().unwrap(),
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        dst_port: port,
    };
    let mut all: Vec<_> = frames(&mk(1, 80)).collect();
    all.extend(frames(&mk(2, 81)));
    let mut b16 = Batch::with_capacity(16);
    for chunk in all.chunks_mut(16) {
        b16.clear();
        for g in chunk.iter_mut() {
            stamp(g, 1);
            b16.push(&g.frame, 0);
        }
        tx.send(&b16, &vec![true; b16.len()], 0).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut got = [0u32; 3];
    let mut inb = Batch::with_capacity(64);
    let t0 = Instant::now();
    while got[1] < 120 && t0.elapsed() < Duration::from_secs(10) {
        rx.recv(&mut inb, 0).unwrap();
        for f in inb.iter() {
            let Ok(p) = packet::Parsed::new_checked(f) else {
                continue;
            };
            if let Some(m) = Marker::read(p.payload(f)) {
                got[(m.run as usize).min(2)] += 1;
            }
        }
    }
    // Give stray denied packets a moment to show up if the NF wrongly forwarded them.
    let t1 = Instant::now();
    while t1.elapsed() < Duration::from_millis(200) {
        rx.recv(&mut inb, 0).unwrap();
        for f in inb.iter() {
            if let Ok(p) = packet::Parsed::new_checked(f) {
                if let Some(m) = Marker::read(p.payload(f)) {
                    got[(m.run as usize).min(2)] += 1;
                }
            }
        }
    }
    assert_eq!(got[1], 120, "allowed flows' data came back through the NF");
    assert_eq!(got[2], 0, "denied flows dropped");
    let v = stats_json(stats_sock.as_path());
    assert_eq!(v["store_kind"], "redis");
    assert!(
        v["counters"]["dropped_by_nf"].as_u64().unwrap() >= 120,
        "{v}"
    );
    assert!(v["store"]["round_trips"].as_u64().unwrap() >= 2, "{v}");
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(nf.0.id() as libc::pid_t, libc::SIGTERM) };
    assert!(nf.0.wait().unwrap().success());
    assert!(
        !stats_sock.exists(),
        "a clean stop removes the endpoint's socket"
    );
    drop(nf);
    let _ = std::fs::remove_dir_all(&dir);
}
