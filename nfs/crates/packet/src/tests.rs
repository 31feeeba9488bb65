use super::build::{checksums_valid, FrameSpec, Transport};
use super::rewrite::*;
use super::*;

fn v4(a: &str) -> IpAddr {
    a.parse().unwrap()
}

fn tcp(flags: u8) -> Transport {
    Transport::Tcp {
        seq: 1000,
        ack: 0,
        flags,
    }
}

#[test]
fn parses_ipv4_tcp_with_qinq() {
    let mut s = FrameSpec::new(v4("10.0.0.1"), v4("10.0.0.2"), 1234, 80, tcp(TCP_SYN));
    s.vlans = &[100, 200];
    s.payload = b"hello";
    let f = s.build();
    let p = Parsed::new_checked(&f).unwrap();
    assert_eq!(p.vlan_count, 2);
    assert_eq!(p.vlans, [100, 200]);
    assert_eq!(p.proto, PROTO_TCP);
    assert_eq!(p.ports(), (1234, 80));
    assert_eq!(p.tcp_flags(), TCP_SYN);
    assert_eq!(p.payload(&f), b"hello");
    assert!(checksums_valid(&f));
}

#[test]
fn parses_ipv6_udp() {
    let s = FrameSpec::new(v4("fd00::1"), v4("fd00::2"), 53, 5353, Transport::Udp);
    let f = s.build();
    let p = Parsed::new_checked(&f).unwrap();
    assert_eq!(p.ethertype, ETHERTYPE_IPV6);
    assert!(matches!(
        p.l4,
        L4::Udp {
            src_port: 53,
            dst_port: 5353
        }
    ));
    assert!(checksums_valid(&f));
}

#[test]
fn rejects_truncated_and_bad_headers() {
    let f = FrameSpec::new(v4("10.0.0.1"), v4("10.0.0.2"), 1, 2, tcp(0)).build();
    for cut in 0..f.len() {
        assert!(Parsed::new_checked(&f[..cut]).is_err(), "cut at {cut}");
    }
    let mut bad = f.clone();
    bad[14] = 0x44; // IHL 16 bytes
    assert_eq!(Parsed::new_checked(&bad), Err(ParseError::BadHeader));
    let mut arp = f.clone();
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(
        Parsed::new_checked(&arp),
        Err(ParseError::UnsupportedEthertype(0x0806))
    );
}

#[test]
fn ethernet_padding_is_not_payload() {
    let mut f = FrameSpec::new(v4("10.0.0.1"), v4("10.0.0.2"), 1, 2, Transport::Udp).build();
    let n = f.len();
    f.resize(64, 0);
    let p = Parsed::new_checked(&f).unwrap();
    assert_eq!(p.frame_len, n);
    assert_eq!(p.payload_len, 0);
}

#[test]
fn rewrites_keep_checksums_valid() {
    for t in [tcp(TCP_ACK), Transport::Udp] {
        for (a, b, n) in [
            ("10.0.0.1", "10.0.0.2", "192.0.2.77"),
            ("fd00::1", "fd00::2", "2001:db8::99"),
        ] {
            let mut s = FrameSpec::new(v4(a), v4(b), 40000, 443, t);
            s.payload = b"some payload bytes!";
            let mut f = s.build();
            let p = Parsed::new_checked(&f).unwrap();
            let p = set_src_ip(&mut f, &p, v4(n)).unwrap();
            let p = set_src_port(&mut f, &p, 61000).unwrap();
            let p = set_dst_port(&mut f, &p, 8443).unwrap();
            let p = set_dst_ip(&mut f, &p, v4(a)).unwrap();
            assert!(checksums_valid(&f), "{t:?} {a}");
            let q = Parsed::new_checked(&f).unwrap();
            assert_eq!(p, q);
            assert_eq!(q.src, v4(n));
            assert_eq!(q.ports(), (61000, 8443));
            // The incremental result equals a frame built from scratch with the new fields.
            let mut s2 = s.clone();
            s2.src = v4(n);
            s2.dst = v4(a);
            s2.src_port = 61000;
            s2.dst_port = 8443;
            assert_eq!(f, s2.build());
        }
    }
    let mut f = FrameSpec::new(v4("10.0.0.1"), v4("10.0.0.2"), 1, 2, Transport::Udp).build();
    let p = Parsed::new_checked(&f).unwrap();
    assert!(set_src_ip(&mut f, &p, v4("fd00::1")).is_err());
}

#[test]
fn endpoint_rewrites_equal_the_field_rewrites() {
    for t in [tcp(TCP_ACK), Transport::Udp] {
        let f0 = FrameSpec::new(v4("10.0.0.1"), v4("10.0.0.2"), 40000, 443, t).build();
        let p0 = Parsed::new_checked(&f0).unwrap();
        let (mut f, mut g) = (f0.clone(), f0.clone());
        let p = set_src(&mut f, &p0, v4("192.0.2.7"), 61000).unwrap();
        let p = set_dst(&mut f, &p, v4("192.0.2.8"), 8443).unwrap();
        let q = set_src_ip(&mut g, &p0, v4("192.0.2.7")).unwrap();
        let q = set_src_port(&mut g, &q, 61000).unwrap();
        let q = set_dst_ip(&mut g, &q, v4("192.0.2.8")).unwrap();
        let q = set_dst_port(&mut g, &q, 8443).unwrap();
        assert_eq!((f, p), (g, q));
    }
    // Another address family is refused.
    let mut f = FrameSpec::new(v4("10.0.0.1"), v4("10.0.0.2"), 1, 2, Transport::Udp).build();
    let p = Parsed::new_checked(&f).unwrap();
    assert!(set_src(&mut f, &p, v4("fd00::1"), 5).is_err());
    assert!(set_dst(&mut f, &p, v4("fd00::1"), 5).is_err());
}

#[test]
fn rfc1624_example() {
    // RFC 1624 section 4: HC = 0xdd2f, m = 0x5555 -> m' = 0x3285 gives HC' = 0x0000.
    assert_eq!(checksum::update16(0xdd2f, 0x5555, 0x3285), 0x0000);
}

#[test]
fn canonical_key_is_symmetric() {
    let f = FrameSpec::new(v4("10.0.0.9"), v4("10.0.0.2"), 5555, 80, tcp(0)).build();
    let k = Parsed::new_checked(&f).unwrap().flow_key();
    let (c1, d1) = k.canonical();
    let (c2, d2) = k.reversed().canonical();
    assert_eq!(c1, c2);
    assert_ne!(d1, d2);
    assert_eq!(k.bidirectional_hash(), k.reversed().bidirectional_hash());
    assert_ne!(k.stable_hash(), k.reversed().stable_hash());
    // Stable across builds: a fixed value.
    assert_eq!(flow::fnv1a(b"a"), 0xaf63dc4c8601ec8c);
}

/// The tier's flow keys are named by this hash: it must never change (instances of two versions
/// share state during a rolling upgrade). Values from FNV-1a over proto, ports (big endian) and
/// addresses, computed apart from this code.
#[test]
fn stable_hash_is_pinned() {
    let k4 = flow::FlowKey {
        src: "10.0.0.9".parse().unwrap(),
        dst: "10.0.0.2".parse().unwrap(),
        src_port: 5555,
        dst_port: 80,
        proto: 6,
    };
    assert_eq!(k4.stable_hash(), 0xb0ac8971a82074c0);
    assert_eq!(k4.to_bytes().len(), 13);
    let k6 = flow::FlowKey {
        src: "2001:db8::1".parse().unwrap(),
        dst: "2001:db8::2".parse().unwrap(),
        src_port: 53,
        dst_port: 4000,
        proto: 17,
    };
    assert_eq!(k6.stable_hash(), 0x4982b4133576f3f5);
    assert_eq!(flow::fnv1a(&k6.to_bytes()), k6.stable_hash());
}

/// Bounded fuzz pass (stable toolchain, fixed seed and case count): random and mutated frames
/// must parse or fail cleanly, and rewrites on anything that parses must not panic.
#[test]
fn fuzz_parser_and_rewrites() {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut seeds = vec![];
    for t in [tcp(TCP_SYN), Transport::Udp] {
        let mut s = FrameSpec::new(v4("10.0.0.1"), v4("10.0.0.2"), 1, 2, t);
        s.payload = b"0123456789";
        seeds.push(s.build());
        s.vlans = &[7, 8];
        seeds.push(s.build());
        let s6 = FrameSpec::new(v4("fd00::1"), v4("fd00::2"), 1, 2, t);
        seeds.push(s6.build());
    }
    for i in 0..20000 {
        let mut f = if i % 5 == 0 {
            let n = (next() % 200) as usize;
            (0..n).map(|_| next() as u8).collect()
        } else {
            seeds[(next() as usize) % seeds.len()].clone()
        };
        for _ in 0..(next() % 4) {
            if f.is_empty() {
                break;
            }
            let at = (next() as usize) % f.len();
            f[at] = next() as u8;
        }
        if next() % 4 == 0 && !f.is_empty() {
            let n = (next() as usize) % f.len();
            f.truncate(n);
        }
        if let Ok(p) = Parsed::new_checked(&f) {
            let _ = p.payload(&f);
            let _ = p.flow_key().bidirectional_hash();
            let _ = set_src_port(&mut f, &p, 9).and_then(|p| set_dst_ip(&mut f, &p, p.src));
        }
    }
}
