//! The `nf` binary on an AF_XDP port (`--xdp`): a firewall on one end of a veth pair forwards
//! the allowed SYNs back out of its port and drops the others, and says nothing about falling
//! back to AF_PACKET. Needs root and AF_XDP (SKIP otherwise).

use netio::afpacket::{AfPacket, RingConfig};
use netio::{Batch, Device};
use packet::build::{FrameSpec, Transport};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::Child;
use testnet::Veth;

fn syn(sport: u16, dport: u16) -> Vec<u8> {
    let t = Transport::Tcp {
        seq: 1,
        ack: 0,
        flags: packet::TCP_SYN,
    };
    FrameSpec::new(
        "10.0.0.1".parse().unwrap(),
        "10.1.0.1".parse().unwrap(),
        sport,
        dport,
        t,
    )
    .build()
}

#[test]
fn firewall_on_af_xdp_port() {
    let tag = std::process::id() % 100_000;
    let Some((_v, a, b)) = Veth::pair("uxf") else {
        eprintln!("SKIP: cannot create a veth pair (not root?)");
        return;
    };
    if let Err(e) = netio::afxdp::AfXdp::open(&b) {
        eprintln!("SKIP: AF_XDP not available here: {e}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("unonfs-xdp-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("fw.json");
    std::fs::write(
        &cfg,
        r#"{"rules": [{"action": "allow", "proto": "tcp", "src": "10.0.0.0/8", "dst_port": 80}], "batch_size": 8}"#,
    )
    .unwrap();
    let mut nf = Child(
        Command::new(env!("CARGO_BIN_EXE_nf"))
            .args(["firewall", "--port", &b, "--xdp", "--store", "local"])
            .args(["--nf-id", "xfw", "--instance", "t1"])
            .args(["--config", cfg.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut peer = AfPacket::open(&a, RingConfig::for_batch(64)).unwrap();
    // Send until the NF is up and the first allowed SYN comes back (bounded wait).
    let mut inb = Batch::with_capacity(64);
    let mut back = std::collections::BTreeSet::new();
    let t0 = Instant::now();
    let mut round = 0u16;
    while back.len() < 20 && t0.elapsed() < Duration::from_secs(15) {
        let mut out = Batch::with_capacity(40);
        for i in 0..20u16 {
            out.push(&syn(30_000 + i, 80), 0);
            out.push(&syn(31_000 + round * 20 + i, 22), 0);
        }
        round += 1;
        let keep = vec![true; out.len()];
        peer.send(&out, &keep, 0).unwrap();
        let t1 = Instant::now();
        while t1.elapsed() < Duration::from_millis(300) {
            peer.recv(&mut inb, 0).unwrap();
            for f in inb.iter() {
                if let Ok(p) = packet::Parsed::new_checked(f) {
                    if let packet::L4::Tcp {
                        src_port, dst_port, ..
                    } = p.l4
                    {
                        assert_ne!(dst_port, 22, "a denied SYN came back");
                        if dst_port == 80 {
                            back.insert(src_port);
                        }
                    }
                }
            }
        }
    }
    assert_eq!(back.len(), 20, "allowed SYNs forwarded through AF_XDP");
    let _ = nf.0.kill();
    let _ = nf.0.wait();
    let mut err = String::new();
    nf.0.stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(!err.contains("not available"), "fell back: {err}");
    let _ = std::fs::remove_dir_all(&dir);
}
