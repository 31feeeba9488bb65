//! The OpenNF-style move of a local-state NF with real `nf` processes on real veth ports: the old
//! firewall (`--store local`) tracks TCP connections; its state is exported (`GET /state`); a new
//! instance started with `--buffer` queues the connections' later packets without processing them,
//! imports the state (`PUT /state`), then forwards the queued packets in order and what follows.
//! A new instance without the state drops the same packets (the difference the move makes).
//! Needs root (SKIP otherwise).

use netio::afpacket::{AfPacket, RingConfig};
use netio::{Batch, Device};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use traffic::gen::{frames, GenConfig, GenFrame};
use traffic::Marker;

mod common;
use common::{http, stats_json, wait_ready, Child, TempDir};
use testnet::{link_up, Veth};

const FLOWS: u32 = 4;
const PKTS: u32 = 20;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Port {
    tx: AfPacket,
    rx: AfPacket,
}

impl Port {
    fn open(iface: &str) -> Port {
        Port {
            tx: AfPacket::open(iface, RingConfig::for_batch(64)).unwrap(),
            rx: AfPacket::open(iface, RingConfig::for_batch(64)).unwrap(),
        }
    }

    fn send(&mut self, fs: &[GenFrame]) {
        let mut b = Batch::with_capacity(16);
        for chunk in fs.chunks(16) {
            b.clear();
            for g in chunk {
                b.push(&g.frame, 0);
            }
            self.tx.send(&b, &vec![true; b.len()], 0).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Markers (flow, seq) of data frames that come back within `wait` (stops early at `want`).
    fn collect(&mut self, want: usize, wait: Duration) -> Vec<(u32, u32)> {
        let mut got = vec![];
        let mut inb = Batch::with_capacity(64);
        let t0 = Instant::now();
        while t0.elapsed() < wait && got.len() < want {
            self.rx.recv(&mut inb, 0).unwrap();
            for f in inb.iter() {
                let Ok(p) = packet::Parsed::new_checked(f) else {
                    continue;
                };
                if let Some(m) = Marker::read(p.payload(f)) {
                    got.push((m.flow, m.seq));
                }
            }
        }
        got
    }
}

fn spawn_fw(iface: &str, cfg: &std::path::Path, stats_port: u16, extra: &[&str]) -> Child {
    let c = Child(
        Command::new(env!("CARGO_BIN_EXE_nf"))
            .args(["firewall", "--port", iface, "--store", "local"])
            .args(["--nf-id", "mfw", "--instance", iface])
            .args(["--config", cfg.to_str().unwrap()])
            .args(["--stats", &format!("127.0.0.1:{stats_port}")])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_ready(stats_port, Duration::from_secs(10), "firewall");
    c
}

#[test]
fn local_state_moves_to_a_buffering_instance_without_loss() {
    let tag = std::process::id() % 100_000;
    let names: Vec<(String, String)> = (0..3)
        .map(|i| (format!("usmA{i}{tag}"), format!("usmB{i}{tag}")))
        .collect();
    let Some(first) = Veth::add(&names[0].0, &names[0].1) else {
        eprintln!("SKIP: cannot create a veth pair (not root?)");
        return;
    };
    let mut _veths = vec![first];
    for (a, b) in &names[1..] {
        _veths.push(Veth::add(a, b).expect("veth pair"));
    }
    for (a, b) in &names {
        assert!(link_up(a, b));
    }
    let dir = TempDir(std::env::temp_dir().join(format!("unonfs-move-{tag}")));
    std::fs::create_dir_all(&dir.0).unwrap();
    let cfg = dir.0.join("fw.json");
    std::fs::write(
        &cfg,
        r#"{"rules": [{"action": "allow", "proto": "tcp", "src": "10.0.0.0/8", "dst_port": 80}], "batch_size": 8}"#,
    )
    .unwrap();
    let gen = GenConfig {
        run: 1,
        flows: FLOWS,
        pkts: PKTS,
        tcp: true,
        frame_len: 128,
        src: "10.0.0.1".parse().unwrap(),
        dst: "10.1.0.1".parse().unwrap(),
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        dst_port: 80,
    };
    let all: Vec<_> = frames(&gen).collect();
    // Handshakes, then data in round-robin order (flow-major within a seq), without the FINs.
    let hs = (FLOWS * 3) as usize;
    let half = hs + (FLOWS * PKTS / 2) as usize;
    let data_end = hs + (FLOWS * PKTS) as usize;
    let (before, after) = (&all[..half], &all[half..data_end]);

    // Old instance: the connections are opened and half of their data passes.
    let p_old = free_port();
    let old = spawn_fw(&names[0].1, &cfg, p_old, &[]);
    let mut port_old = Port::open(&names[0].0);
    port_old.send(before);
    let got = port_old.collect((FLOWS * PKTS / 2) as usize, Duration::from_secs(10));
    assert_eq!(
        got.len(),
        (FLOWS * PKTS / 2) as usize,
        "old instance forwards"
    );
    let (st, state) = http(p_old, "GET", "/state", b"");
    assert!(st.contains("200"), "{st}");
    assert!(state.starts_with(flowstore::snapshot::MAGIC));

    // Target: buffers, forwards nothing until its state arrives.
    let p_new = free_port();
    let _new = spawn_fw(&names[1].1, &cfg, p_new, &["--buffer", "1000"]);
    let mut port_new = Port::open(&names[1].0);
    let (st, _) = http(p_old, "PUT", "/state", &state);
    assert!(st.contains("409"), "import into a running instance: {st}");
    port_new.send(after);
    assert!(
        port_new.collect(1, Duration::from_millis(500)).is_empty(),
        "buffered, not forwarded"
    );
    let t0 = Instant::now();
    while stats_json(p_new)["counters"]["buffered"].as_u64().unwrap() < after.len() as u64 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{}",
            stats_json(p_new)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(stats_json(p_new)["buffering"], true);
    // Bad bodies are 400s and change nothing (still buffering, process alive).
    for bad in [&b""[..], b"garbage", &state[..state.len() - 1]] {
        let (st, body) = http(p_new, "PUT", "/state", bad);
        assert!(st.contains("400"), "{st}");
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["field"], "state", "{v}");
    }
    let (st, _) = http(p_new, "DELETE", "/state", b"");
    assert!(st.contains("405"), "{st}");
    assert_eq!(stats_json(p_new)["buffering"], true);

    let (st, body) = http(p_new, "PUT", "/state", &state);
    assert!(st.contains("200"), "{st}");
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert!(v["replayed"].as_u64().unwrap() >= after.len() as u64, "{v}");
    assert_eq!(v["buffer_overflow"], 0, "{v}");
    let got = port_new.collect(after.len(), Duration::from_secs(10));
    assert_eq!(got.len(), after.len(), "every buffered packet forwarded");
    let expect: Vec<(u32, u32)> = (PKTS / 2..PKTS)
        .flat_map(|s| (0..FLOWS).map(move |f| (f, s)))
        .collect();
    assert_eq!(got, expect, "in arrival order");
    assert_eq!(stats_json(p_new)["buffering"], false);

    // Without the state, the same packets are dropped (connections unknown to a fresh instance).
    let p_cold = free_port();
    let _cold = spawn_fw(&names[2].1, &cfg, p_cold, &[]);
    let mut port_cold = Port::open(&names[2].0);
    port_cold.send(after);
    assert!(port_cold.collect(1, Duration::from_millis(500)).is_empty());
    drop(old);
}
