//! AF_XDP (copy mode, generic XDP) on a real veth pair: frames sent into one end arrive through
//! the XSK socket, frames sent on it come out of the other end, and the program is detached when
//! the socket goes. Needs root and a kernel with AF_XDP; skipped with a message otherwise.

use netio::afpacket::{AfPacket, RingConfig};
use netio::afxdp::AfXdp;
use netio::{Batch, Device};
use packet::build::{FrameSpec, Transport};
use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};
use testnet::Veth;

fn frames(tag: &str, n: u32) -> Batch {
    let mut out = Batch::with_capacity(n as usize);
    for i in 0..n {
        let payload = format!("{tag}-{i:05}");
        let mut s = FrameSpec::new(
            "10.9.1.1".parse().unwrap(),
            "10.9.1.2".parse().unwrap(),
            7,
            9,
            Transport::Udp,
        );
        s.payload = payload.as_bytes();
        out.push(&s.build(), 0);
    }
    out
}

/// Indexes of `tag`-marked frames received on `dev` within a few seconds.
fn collect(dev: &mut dyn Device, tag: &str, n: u32) -> BTreeSet<u32> {
    let mut got = BTreeSet::new();
    let mut inb = Batch::with_capacity(64);
    let t0 = Instant::now();
    let prefix = format!("{tag}-");
    while got.len() < n as usize && t0.elapsed() < Duration::from_secs(10) {
        dev.recv(&mut inb, 0).unwrap();
        for f in inb.iter() {
            let Ok(p) = packet::Parsed::new_checked(f) else {
                continue;
            };
            if let Some(rest) = p.payload(f).strip_prefix(prefix.as_bytes()) {
                got.insert(std::str::from_utf8(rest).unwrap().parse().unwrap());
            }
        }
    }
    got
}

#[test]
fn afxdp_veth_both_directions() {
    let tag = std::process::id() % 100_000;
    let (a, b) = (format!("uxA{tag}"), format!("uxB{tag}"));
    let Some(_veth) = Veth::named(&a, &b) else {
        eprintln!("SKIP: cannot create a veth pair (not root?)");
        return;
    };
    let mut xsk = match AfXdp::open(&a) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("SKIP: AF_XDP not available here: {e}");
            return;
        }
    };
    let mut peer = AfPacket::open(&b, RingConfig::for_batch(64)).unwrap();
    let n = 300;
    // Peer -> XSK.
    let out = frames("toxsk", n);
    let keep = vec![true; out.len()];
    assert_eq!(peer.send(&out, &keep, 0).unwrap(), n as usize);
    // Before any receive they wait in the RX ring, and are counted there.
    let t0 = Instant::now();
    while xsk.rx_counts().unwrap().waiting < Some(u64::from(n)) && t0.elapsed().as_secs() < 5 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let c = xsk.rx_counts().unwrap();
    assert!(c.waiting >= Some(u64::from(n)), "{c:?}");
    assert_eq!(c.dropped, Some(0));
    let got = collect(&mut xsk, "toxsk", n);
    assert_eq!(got.len(), n as usize, "all frames through the XDP redirect");
    let mut inb = Batch::with_capacity(64);
    while xsk.recv_nowait(&mut inb, 0).unwrap() > 0 {}
    assert_eq!(xsk.rx_counts().unwrap().waiting, Some(0));
    // XSK -> peer, in batches.
    for chunk in 0..3 {
        let out = frames(&format!("fromxsk{chunk}"), 100);
        let keep = vec![true; out.len()];
        assert_eq!(xsk.send(&out, &keep, 0).unwrap(), 100);
        let got = collect(&mut peer, &format!("fromxsk{chunk}"), 100);
        assert_eq!(got.len(), 100, "chunk {chunk} out of the other end");
    }
    assert_eq!(xsk.tx_dropped, 0);
    drop(xsk);
    // The program is gone with the socket: the interface has no XDP attached.
    let show = Command::new("ip")
        .args(["link", "show", &a])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(!text.contains("xdp"), "{text}");
}

#[test]
fn afxdp_missing_interface_is_a_clear_error() {
    let e = AfXdp::open("nosuchif1").err().expect("refused");
    assert!(e.to_string().contains("nosuchif1"), "{e}");
}
