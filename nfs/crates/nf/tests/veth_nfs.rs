//! The `nf` binary running the load balancer, the IPS and the L7 firewall on a real AF_PACKET
//! port with a real Redis (one-arm, one end of a veth pair): frames sent from the other end come
//! back rewritten (LB, valid checksums) or not at all (IPS match, blocked SNI). Each run ends with
//! a sentinel frame that must come back; since the NF handles its port in order, every frame
//! expected back has arrived by then, and one that should have been dropped would have.
//! Needs root (SKIP otherwise).

use flowstore::test_redis::TestRedis;
use netio::afpacket::{AfPacket, RingConfig};
use netio::{Batch, Device};
use packet::build::{checksums_valid, FrameSpec, Transport};
use packet::{Parsed, L4, TCP_ACK, TCP_SYN};
use std::collections::HashMap;
use std::net::IpAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{wait_ready, Child, TempDir};
use testnet::Veth;

/// One frame to send: TCP from `src:sport` to `dst:dport` with a unique `seq` (its id).
struct Send {
    src: &'static str,
    dst: &'static str,
    sport: u16,
    dport: u16,
    flags: u8,
    seq: u32,
    payload: Vec<u8>,
}

fn tcp(
    src: &'static str,
    dst: &'static str,
    sport: u16,
    dport: u16,
    flags: u8,
    seq: u32,
    payload: &[u8],
) -> Send {
    Send {
        src,
        dst,
        sport,
        dport,
        flags,
        seq,
        payload: payload.to_vec(),
    }
}

/// Run `kind` with `config` on a veth end, send `frames` from the other end; returns what came
/// back, by sequence number (the last frame is the sentinel and must come back).
fn run_on_veth(
    kind: &str,
    config: &str,
    frames: &[Send],
    tag: &str,
) -> Option<HashMap<u32, Vec<u8>>> {
    let id = std::process::id() % 10_000;
    let (a, b) = (format!("un{tag}A{id}"), format!("un{tag}B{id}"));
    let Some(_v) = Veth::named(&a, &b) else {
        eprintln!("SKIP: cannot create a veth pair (not root?)");
        return None;
    };
    let redis = TestRedis::start().expect("redis-server");
    let dir = TempDir(std::env::temp_dir().join(format!("unonfs-veth-{tag}-{id}")));
    std::fs::create_dir_all(&dir.0).unwrap();
    let cfg = dir.0.join("cfg.json");
    std::fs::write(&cfg, config).unwrap();
    let stats_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _nf = Child(
        Command::new(env!("CARGO_BIN_EXE_nf"))
            .args([
                kind,
                "--port",
                &b,
                "--store",
                &redis.url(),
                "--nf-id",
                &format!("v{tag}{id}"),
            ])
            .args(["--instance", "t1", "--config", cfg.to_str().unwrap()])
            .args(["--stats", &format!("127.0.0.1:{stats_port}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_ready(stats_port, Duration::from_secs(20), kind);
    let mut rx = AfPacket::open(&a, RingConfig::for_batch(64)).unwrap();
    let mut tx = AfPacket::open(&a, RingConfig::for_batch(64)).unwrap();
    let mut one = Batch::with_capacity(1);
    for s in frames {
        let (src, dst): (IpAddr, IpAddr) = (s.src.parse().unwrap(), s.dst.parse().unwrap());
        let t = Transport::Tcp {
            seq: s.seq,
            ack: 1,
            flags: s.flags,
        };
        let mut spec = FrameSpec::new(src, dst, s.sport, s.dport, t);
        spec.payload = &s.payload;
        one.clear();
        one.push(&spec.build(), 0);
        tx.send(&one, &[true], 0).unwrap();
        // Paced so that a loaded machine does not overrun the NF's ring.
        std::thread::sleep(Duration::from_millis(5));
    }
    let sentinel = frames.last().unwrap().seq;
    let mut got = HashMap::new();
    let mut inb = Batch::with_capacity(64);
    let t0 = Instant::now();
    while !got.contains_key(&sentinel) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{kind}: sentinel did not come back; got {:?}",
            got.keys()
        );
        rx.recv(&mut inb, 0).unwrap();
        for f in inb.iter() {
            if let Ok(p) = Parsed::new_checked(f) {
                // Only the frames sent (by source port and id): the host's stack may put its own
                // TCP packets (e.g. replies to these SYNs) on the veth too.
                if let L4::Tcp { seq, .. } = p.l4 {
                    if frames
                        .iter()
                        .any(|s| s.seq == seq && s.sport == p.ports().0)
                    {
                        got.insert(seq, f.to_vec());
                    }
                }
            }
        }
    }
    Some(got)
}

fn addrs(f: &[u8]) -> (String, u16, String, u16) {
    let p = Parsed::new_checked(f).unwrap();
    (
        p.src.to_string(),
        p.ports().0,
        p.dst.to_string(),
        p.ports().1,
    )
}

#[test]
fn lb_ips_l7fw_on_veth_with_redis() {
    // Load balancer: connection to the VIP rewritten to a backend and back.
    let lb = r#"{"vip": "10.0.0.100", "port": 80, "backends": ["10.1.0.1:8080", "10.1.0.2:8080"], "batch_size": 8}"#;
    let (c, vip) = ("192.0.2.1", "10.0.0.100");
    let Some(got) = run_on_veth(
        "lb",
        lb,
        &[
            tcp(c, vip, 40000, 80, TCP_SYN, 100, b""),
            tcp(c, vip, 40000, 80, TCP_ACK, 101, b"GET / HTTP/1.1\r\n\r\n"),
            tcp(c, vip, 40001, 80, TCP_ACK, 200, b"no connection"),
            tcp(c, "192.0.2.9", 40000, 22, TCP_SYN, 300, b""),
        ],
        "lb",
    ) else {
        return;
    };
    assert!(!got.contains_key(&200), "data without a connection dropped");
    let syn = &got[&100];
    assert!(checksums_valid(syn) && checksums_valid(&got[&101]));
    let (_, _, backend, bport) = addrs(syn);
    assert!(backend == "10.1.0.1" || backend == "10.1.0.2", "{backend}");
    assert_eq!(bport, 8080);
    assert_eq!(addrs(&got[&101]).2, backend, "affinity");
    assert_eq!(addrs(&got[&300]).2, "192.0.2.9", "other traffic unchanged");

    // IPS: a signature split over two segments; the second is dropped, the flow blocked.
    let ips = r#"{"signatures": [{"id": 1, "content": "ATTACK"}], "alert_log": "/dev/null", "batch_size": 8}"#;
    let (s, d) = ("10.0.0.1", "10.0.0.2");
    let got = run_on_veth(
        "ips",
        ips,
        &[
            tcp(s, d, 40000, 80, TCP_SYN, 1000, b""),
            tcp(s, d, 40000, 80, TCP_ACK, 1001, b"xxATT"),
            tcp(s, d, 40000, 80, TCP_ACK, 1006, b"ACKyy"),
            tcp(s, d, 40000, 80, TCP_ACK, 1011, b"later"),
            tcp(s, d, 40001, 80, TCP_SYN, 5000, b""),
        ],
        "ips",
    )
    .unwrap();
    let mut seqs: Vec<u32> = got.keys().copied().collect();
    seqs.sort();
    assert_eq!(seqs, vec![1000, 1001, 5000]);

    // L7 firewall: blocked SNI dropped, allowed SNI passes.
    let l7 = r#"{"block": [{"proto": "tls", "sni": "*.bad.example"}], "batch_size": 8}"#;
    let bad = nf_l7fw::tls::build_client_hello(Some("www.bad.example"), 0);
    let good = nf_l7fw::tls::build_client_hello(Some("www.good.example"), 0);
    let got = run_on_veth(
        "l7fw",
        l7,
        &[
            tcp(s, d, 40000, 443, TCP_ACK, 1, &bad),
            tcp(s, d, 40001, 443, TCP_ACK, 2, &good),
            tcp(s, d, 40000, 443, TCP_ACK, 3, b"after"),
            tcp(
                s,
                d,
                40002,
                80,
                TCP_ACK,
                4,
                b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n",
            ),
        ],
        "l7",
    )
    .unwrap();
    let mut seqs: Vec<u32> = got.keys().copied().collect();
    seqs.sort();
    assert_eq!(seqs, vec![2, 4]);
}
