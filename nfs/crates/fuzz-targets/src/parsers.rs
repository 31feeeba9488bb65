//! Targets for the parsers: packet views and rewrites, the RESP client parser, the config
//! parsers and the tier records.

use crate::input::Input;
use flowstore::resp::{self, Reply, Values};
use packet::build::{checksums_valid, FrameSpec, Transport};
use packet::rewrite::{set_dst_ip, set_dst_port, set_src_ip, set_src_port};
use packet::{Parsed, L4, PROTO_UDP};
use serde_json::Value;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn ip_like(inp: &mut Input<'_>, v6: bool) -> IpAddr {
    if v6 {
        let mut a = [0u8; 16];
        a.copy_from_slice(&{
            let mut b = inp.bytes(16).to_vec();
            b.resize(16, 0);
            b
        });
        IpAddr::V6(Ipv6Addr::from(a))
    } else {
        IpAddr::V4(Ipv4Addr::from(inp.u32()))
    }
}

/// Checksums of `f` (parsed as `p`) valid: [`checksums_valid`], except that a non-first IPv4
/// fragment has no transport header (its checksum is in the first fragment): IPv4 header only.
pub fn csum_valid(f: &[u8], p: &Parsed) -> bool {
    if p.non_first_fragment {
        packet::checksum::ones_sum(&f[p.l3_offset..p.l4_offset], 0) == 0xffff
    } else {
        checksums_valid(f)
    }
}

/// The UDP checksum field, if `p` is UDP.
fn udp_csum(frame: &[u8], p: &Parsed) -> Option<u16> {
    (p.proto == PROTO_UDP && matches!(p.l4, L4::Udp { .. }))
        .then(|| u16::from_be_bytes([frame[p.l4_offset + 6], frame[p.l4_offset + 7]]))
}

/// Rewrite all four fields of `f` (parsed as `p`) to values from `inp`; checks that the views
/// returned match a fresh parse, checksums stay valid and a UDP checksum never becomes 0.
fn rewrite_and_check(f: &mut [u8], p: &Parsed, inp: &mut Input<'_>) {
    let valid = csum_valid(f, p);
    let udp0 = udp_csum(f, p);
    let (ns, nd) = (ip_like(inp, p.src.is_ipv6()), ip_like(inp, p.src.is_ipv6()));
    let (sp, dp) = (inp.u16(), inp.u16());
    let mut q = set_src_ip(f, p, ns).expect("same family");
    q = set_dst_ip(f, &q, nd).expect("same family");
    let ports = matches!(q.l4, L4::Tcp { .. } | L4::Udp { .. });
    match set_src_port(f, &q, sp) {
        Ok(r) => q = r,
        Err(_) => assert!(!ports, "port rewrite refused on TCP/UDP"),
    }
    if let Ok(r) = set_dst_port(f, &q, dp) {
        q = r;
    }
    let again = Parsed::new_checked(f).expect("a rewritten frame still parses");
    assert_eq!(again, q, "the view a rewrite returns equals a fresh parse");
    assert_eq!((q.src, q.dst), (ns, nd));
    if ports {
        assert_eq!(q.ports(), (sp, dp));
    }
    if valid {
        assert!(csum_valid(f, &q), "rewrite broke a valid checksum");
    }
    if let (Some(before), Some(after)) = (udp0, udp_csum(f, &q)) {
        if before != 0 && valid {
            assert_ne!(after, 0, "a UDP checksum became 0 (= none)");
        }
    }
}

/// Packet views and rewrites.
pub fn packet(data: &[u8]) {
    // 1. The input as a frame: parse never panics; offsets are consistent; rewrites hold.
    let mut f = data.to_vec();
    if let Ok(p) = Parsed::new_checked(&f) {
        assert!(p.l3_offset <= p.l4_offset && p.l4_offset <= p.payload_offset);
        assert_eq!(p.payload_offset + p.payload_len, p.frame_len);
        assert!(p.frame_len <= f.len());
        assert_eq!(p.payload(&f).len(), p.payload_len);
        let k = p.flow_key();
        assert_eq!(k.bidirectional_hash(), k.reversed().bidirectional_hash());
        // Rewrite values come from the end of the input (the start is the frame itself).
        let tail: Vec<u8> = data.iter().rev().take(40).copied().collect();
        rewrite_and_check(&mut f, &p, &mut Input::new(&tail));
    }
    // 2. A frame described by the input: build -> parse gives the description back, checksums
    // are valid, and rewriting equals building the rewritten description from scratch.
    let mut inp = Input::new(data);
    let sel = inp.u8();
    let v6 = sel & 1 != 0;
    let vlan_ids = [inp.u16() & 0x0fff, inp.u16() & 0x0fff];
    let vlans = &vlan_ids[..(sel as usize >> 1) % 3];
    let transport = if sel & 8 != 0 {
        Transport::Udp
    } else {
        Transport::Tcp {
            seq: inp.u32(),
            ack: inp.u32(),
            flags: inp.u8(),
        }
    };
    let (src, dst) = (ip_like(&mut inp, v6), ip_like(&mut inp, v6));
    let (sp, dp) = (inp.u16(), inp.u16());
    let plen = (inp.u8() as usize) * 4;
    let payload = inp.bytes(plen).to_vec();
    let mut spec = FrameSpec::new(src, dst, sp, dp, transport);
    spec.vlans = vlans;
    spec.payload = &payload;
    let mut f = spec.build();
    let p = Parsed::new_checked(&f).expect("a built frame parses");
    assert_eq!((p.src, p.dst, p.ports()), (src, dst, (sp, dp)));
    assert_eq!(&p.vlans[..p.vlan_count as usize], vlans);
    assert_eq!(p.payload(&f), &payload[..]);
    match (transport, p.l4) {
        (
            Transport::Tcp { seq, ack, flags },
            L4::Tcp {
                seq: s,
                ack: a,
                flags: fl,
                ..
            },
        ) => {
            assert_eq!((seq, ack, flags), (s, a, fl))
        }
        (Transport::Udp, L4::Udp { .. }) => {}
        (t, l4) => panic!("built {t:?}, parsed {l4:?}"),
    }
    assert!(checksums_valid(&f), "a built frame has valid checksums");
    let (ns, nd) = (ip_like(&mut inp, v6), ip_like(&mut inp, v6));
    let (nsp, ndp) = (inp.u16(), inp.u16());
    let q = set_src_ip(&mut f, &p, ns).unwrap();
    let q = set_dst_ip(&mut f, &q, nd).unwrap();
    let q = set_src_port(&mut f, &q, nsp).unwrap();
    set_dst_port(&mut f, &q, ndp).unwrap();
    let mut spec2 = spec.clone();
    (spec2.src, spec2.dst, spec2.src_port, spec2.dst_port) = (ns, nd, nsp, ndp);
    let fresh = spec2.build();
    assert!(
        checksums_valid(&f),
        "incremental update left an invalid checksum"
    );
    // Equal up to the one's-complement zero (0x0000 vs 0xffff) of a checksum field.
    let l4c = p.l4_offset
        + if matches!(transport, Transport::Udp) {
            6
        } else {
            16
        };
    for (i, (a, b)) in f.iter().zip(fresh.iter()).enumerate() {
        let in_csum =
            (i >= l4c && i < l4c + 2) || (!v6 && i >= p.l3_offset + 10 && i < p.l3_offset + 12);
        if !in_csum {
            assert_eq!(a, b, "byte {i} differs from a frame built from scratch");
        }
    }
    assert_eq!(f.len(), fresh.len());
}

/// Serialize a reply as a server would.
pub fn serialize(r: &Reply, out: &mut Vec<u8>) {
    match r {
        Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
        Reply::Status => out.extend_from_slice(b"+OK\r\n"),
        Reply::Int(i) => out.extend_from_slice(format!(":{i}\r\n").as_bytes()),
        Reply::Bulk(b) => {
            out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
            out.extend_from_slice(b);
            out.extend_from_slice(b"\r\n");
        }
        Reply::Array(a) => {
            out.extend_from_slice(format!("*{}\r\n", a.len()).as_bytes());
            for x in a {
                serialize(x, out);
            }
        }
        Reply::Error(e) => out.extend_from_slice(format!("-{e}\r\n").as_bytes()),
    }
}

fn reply_from(inp: &mut Input<'_>, depth: u32) -> Reply {
    match inp.u8() % 6 {
        0 => Reply::Nil,
        1 => Reply::Status,
        2 => Reply::Int(inp.u32() as i32 as i64 * (inp.u16() as i64 + 1)),
        3 => {
            let n = inp.u8() as usize;
            Reply::Bulk(inp.bytes(n).to_vec())
        }
        4 if depth < 4 => {
            let n = inp.u8() % 5;
            Reply::Array((0..n).map(|_| reply_from(inp, depth + 1)).collect())
        }
        _ => {
            let n = inp.u8() as usize;
            let s: String = inp
                .bytes(n)
                .iter()
                .map(|b| (b' ' + b % 95) as char)
                .collect();
            Reply::Error(s)
        }
    }
}

/// The RESP reply parser and command encoder.
pub fn resp(data: &[u8]) {
    let parsed = resp::parse(data);
    // The checks without building agree with the parser: same length, same verdict.
    assert_eq!(
        resp::complete_len(data),
        parsed.clone().map(|o| o.map(|(_, used)| used))
    );
    // An array's values as an MGET reply is read (bulk strings, anything else None), in one
    // pass: the same verdict as the parser, and nothing left appended unless complete.
    let mut vals = vec![None];
    let got = resp::parse_values(data, &mut vals);
    match (&parsed, &got) {
        (Ok(Some((Reply::Array(items), used))), Ok(Values::Array { items: n, used: u })) => {
            assert_eq!((items.len(), used), (*n, u));
            let want = items.iter().map(|it| match it {
                Reply::Bulk(b) => Some(b.clone()),
                _ => None,
            });
            assert!(vals.iter().skip(1).cloned().eq(want));
        }
        (Ok(None), Ok(Values::Incomplete)) | (Err(_), Err(_)) => assert_eq!(vals.len(), 1),
        // Not an array (or a nil one): left to the parser.
        (_, Ok(Values::Other)) => {
            assert!(!matches!(parsed, Ok(Some((Reply::Array(_), _)))));
            assert_eq!(vals.len(), 1);
        }
        _ => panic!("parse {parsed:?} but parse_values {got:?}"),
    }
    if matches!(got, Err(_) | Ok(Values::Incomplete)) {
        assert!(matches!(data.first(), Some(&b'*') | None));
    }
    if let Ok(Some((r, used))) = parsed {
        assert!(used <= data.len() && used > 0);
        assert_eq!(resp::parse(&data[..used]), Ok(Some((r.clone(), used))));
        // Replies arrive in pieces: no prefix of a complete reply is an error.
        let step = (used / 256).max(1);
        for k in (0..used).step_by(step) {
            assert_eq!(resp::parse(&data[..k]), Ok(None), "prefix {k} of {used}");
        }
    }
    let mut inp = Input::new(data);
    let r = reply_from(&mut inp, 0);
    let mut wire = Vec::new();
    serialize(&r, &mut wire);
    assert_eq!(resp::parse(&wire), Ok(Some((r, wire.len()))));
    // A command (array of bulk strings) parses back to its arguments.
    let args: Vec<&[u8]> = (0..inp.u8() % 6)
        .map(|_| {
            let n = inp.u8() as usize;
            inp.bytes(n)
        })
        .collect();
    let mut cmd = Vec::new();
    resp::encode(&mut cmd, &args);
    let want = Reply::Array(args.iter().map(|a| Reply::Bulk(a.to_vec())).collect());
    assert_eq!(resp::parse(&cmd), Ok(Some((want, cmd.len()))));
}

/// A config error is one non-empty line (the CLI prints it as is, exit 2).
fn one_line(r: Result<(), String>, what: &str) {
    if let Err(e) = r {
        assert!(!e.is_empty() && !e.contains('\n'), "{what}: error {e:?}");
    }
}

/// Every NF's config parser and the runtime options, on JSON text.
pub fn config(data: &[u8]) {
    let Ok(mut v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if let Some(o) = v.as_object_mut() {
        // Never open files while fuzzing (the IPS checks the alert log's directory only).
        if o.contains_key("alert_log") {
            o.insert("alert_log".into(), "/dev/null".into());
        }
    }
    one_line(nf_firewall::Firewall::from_config(&v).map(drop), "firewall");
    one_line(nf_nat::Nat::from_config(&v).map(drop), "nat");
    one_line(nf_monitor::Monitor::from_config(&v).map(drop), "monitor");
    one_line(nf_lb::LoadBalancer::from_config(&v).map(drop), "lb");
    one_line(nf_ips::Ips::from_config(&v).map(drop), "ips");
    one_line(nf_l7fw::L7Firewall::from_config(&v).map(drop), "l7fw");
    one_line(nf_ipsec::Ipsec::from_config(&v).map(drop), "ipsec");
    one_line(
        nfcore::config::RuntimeOptions::from_config(&v).map(drop),
        "runtime",
    );
    one_line(nfcore::config::spin_us(&v).map(drop), "spin_us");
    one_line(
        nfcore::config::pipeline_depth(&v).map(drop),
        "pipeline_depth",
    );
}

/// `decode(encode(x)) == x` for every `x` that `decode` accepts.
fn round_trip<T: PartialEq + std::fmt::Debug>(
    b: &[u8],
    dec: impl Fn(&[u8]) -> Option<T>,
    enc: impl Fn(&T) -> Vec<u8>,
) {
    if let Some(x) = dec(b) {
        let e = enc(&x);
        assert_eq!(dec(&e).as_ref(), Some(&x), "decode(encode(x)) != x");
    }
}

/// The records NFs keep in the tier (another instance, or an operator, may have written them).
pub fn state(data: &[u8]) {
    let sel = data.first().copied().unwrap_or(0);
    let b = data.get(1..).unwrap_or(&[]);
    match sel % 12 {
        0 => round_trip(b, nf_firewall::conn::ConnState::decode, |x| x.encode()),
        1 => round_trip(b, nf_nat::Mapping::decode, |x| x.encode()),
        2 => round_trip(b, nf_nat::decode_endpoint, |x| {
            nf_nat::encode_endpoint(x.0, x.1)
        }),
        3 => round_trip(b, nf_lb::Conn::decode, |x| x.encode()),
        4 => round_trip(
            b,
            |b| nf_lb::pool::decode(b).ok(),
            |x| nf_lb::pool::encode(x),
        ),
        5 => round_trip(b, nf_ips::Record::decode, |x| x.encode()),
        6 => round_trip(b, nf_ips::reasm::DirState::decode, |x| {
            let mut v = vec![];
            x.encode_into(&mut v);
            v
        }),
        7 => round_trip(b, nf_ips::reasm::OooBuffer::decode, |x| x.encode()),
        8 => round_trip(b, nf_l7fw::Record::decode, |x| x.encode()),
        9 => round_trip(b, nf_monitor::FlowRecord::decode, |x| x.encode()),
        10 => {
            let size = 64 * (1 + b.first().copied().unwrap_or(0) as usize % 64);
            round_trip(
                b.get(1..).unwrap_or(&[]),
                |b| nf_ipsec::replay::ReplayWindow::decode(b, size),
                |x| x.encode(),
            )
        }
        _ => {
            // The IPS record must refuse what is not one, the buffer too: both lengths differ.
            let _ = nf_ips::Record::decode(b);
            let _ = nf_l7fw::Record::decode(b);
        }
    }
}
