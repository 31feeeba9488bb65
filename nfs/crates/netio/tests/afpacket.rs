//! AF_PACKET TPACKET_V3 on a real veth pair (needs root; skipped with a message otherwise).

use netio::afpacket::{AfPacket, RingConfig};
use netio::{Batch, Device};
use packet::build::{FrameSpec, Transport};
use std::time::{Duration, Instant};
use testnet::Veth;

/// A UDP frame with payload `<tag>-<i>` and these VLAN tags.
fn udp(tag: &str, i: u32, vlans: &[u16]) -> Vec<u8> {
    let payload = format!("{tag}-{i:05}");
    let mut s = FrameSpec::new(
        "10.9.0.1".parse().unwrap(),
        "10.9.0.2".parse().unwrap(),
        7,
        9,
        Transport::Udp,
    );
    s.payload = payload.as_bytes();
    s.vlans = vlans;
    s.build()
}

#[test]
fn veth_round_trip_batches() {
    let tag = std::process::id() % 100_000;
    let (a, b) = (format!("unpA{tag}"), format!("unpB{tag}"));
    let Some(_veth) = Veth::named(&a, &b) else {
        eprintln!("SKIP: cannot create a veth pair (not root?)");
        return;
    };
    let mut tx = AfPacket::open(&a, RingConfig::for_batch(64)).unwrap();
    let mut rx = AfPacket::open(&b, RingConfig::for_batch(64)).unwrap();
    let mut out = Batch::with_capacity(64);
    let n_send = 200u32;
    let mut sent = 0;
    for i in 0..n_send {
        let vlans: &[u16] = if i % 2 == 0 { &[42] } else { &[] };
        out.push(&udp("unotest", i, vlans), 0);
        if out.is_full() || i + 1 == n_send {
            let keep = vec![true; out.len()];
            sent += tx.send(&out, &keep, 0).unwrap();
            out.clear();
        }
    }
    assert_eq!(sent, n_send as usize);
    let mut got = std::collections::BTreeMap::new();
    let mut inb = Batch::with_capacity(64);
    let t0 = Instant::now();
    while got.len() < n_send as usize && t0.elapsed() < Duration::from_secs(10) {
        rx.recv(&mut inb, 0).unwrap();
        for f in inb.iter() {
            let Ok(p) = packet::Parsed::new_checked(f) else {
                continue;
            };
            let pl = p.payload(f);
            if let Some(rest) = pl.strip_prefix(b"unotest-") {
                let i: u32 = std::str::from_utf8(rest).unwrap().parse().unwrap();
                got.insert(i, p.vlan_count);
            }
        }
    }
    assert_eq!(got.len(), n_send as usize, "all frames received");
    for (i, vlans) in got {
        assert_eq!(
            vlans,
            if i % 2 == 0 { 1 } else { 0 },
            "VLAN tag of frame {i} kept"
        );
    }
    // Our own transmissions do not come back on the sending socket.
    let mut echo = 0;
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(100) {
        tx.recv(&mut inb, 0).unwrap();
        echo += inb
            .iter()
            .filter(|f| f.windows(8).any(|w| w == b"unotest-"))
            .count();
    }
    assert_eq!(echo, 0);
}

/// Frames in a TPACKET_V3 block the kernel has not retired yet cannot be received, but they are
/// counted as waiting (the kernel's PACKET_STATISTICS against the frames taken), so a drain never
/// declares the ring empty with them inside; taken, they are no longer counted.
#[test]
fn ring_counts_frames_in_a_block_not_retired() {
    let tag = std::process::id() % 100_000;
    let (a, b) = (format!("unrA{tag}"), format!("unrB{tag}"));
    let Some(_veth) = Veth::named(&a, &b) else {
        eprintln!("SKIP: cannot create a veth pair (not root?)");
        return;
    };
    let mut tx = AfPacket::open(&a, RingConfig::for_batch(8)).unwrap();
    // A block is handed over when full (32 KiB) or after 3 s.
    let slow = RingConfig {
        retire_ms: 3000,
        ..RingConfig::for_batch(64)
    };
    let mut rx = AfPacket::open(&b, slow).unwrap();
    assert_eq!(rx.rx_counts().unwrap().waiting, Some(0));
    let mut out = Batch::with_capacity(8);
    for i in 0..5 {
        out.push(&udp("unoring", i, &[]), 0);
    }
    assert_eq!(tx.send(&out, &[true; 5], 0).unwrap(), 5);
    let mut inb = Batch::with_capacity(64);
    let got = rx.recv_nowait(&mut inb, 0).unwrap() as u64;
    let c = rx.rx_counts().unwrap();
    assert_eq!(c.waiting, Some(5 - got), "{got} taken");
    assert_eq!(c.dropped, Some(0));
    if got == 0 {
        eprintln!("5 frames in a block not retired: recv got none, counted as waiting");
    }
    let t0 = Instant::now();
    let mut total = got;
    while total < 5 && t0.elapsed() < Duration::from_secs(10) {
        total += rx.recv(&mut inb, 0).unwrap() as u64;
    }
    assert_eq!(total, 5);
    assert_eq!(rx.rx_counts().unwrap().waiting, Some(0));
}

#[test]
fn missing_interface_is_a_clear_error() {
    let e = AfPacket::open("nosuchif0", RingConfig::for_batch(8))
        .err()
        .unwrap();
    assert!(e.to_string().contains("nosuchif0"), "{e}");
}

/// The default ring holds 100+ ms of traffic while the NF does not run (a block is retired every
/// `retire_ms` however few frames it holds), in 4 MiB, and a jumbo frame fits in a block.
#[test]
fn default_ring_outlasts_a_throttled_period() {
    let c = RingConfig::for_batch(64);
    assert!(c.block_nr * c.retire_ms >= 100, "{} blocks", c.block_nr);
    assert_eq!(u64::from(c.block_nr) * u64::from(c.block_size), 4 << 20);
    assert!(c.block_size >= 9216 + 128);
    assert_eq!(c.block_size % c.frame_size, 0);
}
