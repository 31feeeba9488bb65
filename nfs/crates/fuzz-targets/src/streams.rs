//! Targets for the stream stages: the IPS's TCP reassembly (through the IPS itself, so the real
//! stage runs) and the L7 classifier.

use crate::input::Input;
use flowstore::LocalStore;
use nf_l7fw::classify::{classify, default_signatures, host_name, Outcome};
use nf_l7fw::{dns, tls};
use nfcore::harness::run_frames_full;
use packet::build::{FrameSpec, Transport};
use packet::{TCP_ACK, TCP_FIN, TCP_PSH, TCP_SYN};
use std::net::IpAddr;

/// Signatures of the reassembly target: neither overlaps itself or the other, so the number of
/// hits in a stream is the number of occurrences.
pub const REASM_SIGS: [&[u8]; 2] = [b"ATTACK", b"EVIL"];

fn occurrences(s: &[u8], pat: &[u8]) -> u64 {
    s.windows(pat.len()).filter(|w| *w == pat).count() as u64
}

/// Length of the prefix of a stream that the segments (offset, length) cover without a hole:
/// what a receiver of exactly these segments delivers to the application.
pub fn covered_prefix(segs: &mut [(usize, usize)]) -> usize {
    segs.sort();
    let mut end = 0;
    for &(off, len) in segs.iter() {
        if off > end {
            break;
        }
        end = end.max(off + len);
    }
    end
}

/// One connection, both directions: SYN, SYN-ACK, then segments cut from one stream per
/// direction at input-chosen offsets and lengths (overlapping, reordered, duplicated), through
/// the IPS in alert mode with a local store.
pub fn reasm(data: &[u8]) {
    let mut inp = Input::new(data);
    let hdr = inp.u8();
    let isn = [inp.u32(), inp.u32()];
    let n = [inp.u16() as usize % 1500, inp.u8() as usize * 2];
    let streams: Vec<Vec<u8>> = n
        .iter()
        .map(|&n| {
            // The stream's bytes come from the input; a short input repeats "ATTACK-EVIL-".
            let mut s = inp.bytes(n).to_vec();
            let fill = b"ATTACK-EVIL-";
            while s.len() < n {
                s.push(fill[s.len() % fill.len()]);
            }
            s
        })
        .collect();
    let (cli, srv): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    let frame = |d: usize, seq: u32, flags: u8, payload: &[u8]| {
        let (s, t, sp, dp) = if d == 0 {
            (cli, srv, 40000, 80)
        } else {
            (srv, cli, 80, 40000)
        };
        // The ACK covers the other side's SYN only: never past what crossed the IPS (a receiver
        // cannot acknowledge more), so the IPS's ACK resync stays out of this invariant.
        let ack = isn[1 - d].wrapping_add(1);
        let mut spec = FrameSpec::new(s, t, sp, dp, Transport::Tcp { seq, ack, flags });
        spec.payload = payload;
        spec.build()
    };
    let mut frames = vec![
        (0, frame(0, isn[0], TCP_SYN, b"")),
        (0, frame(1, isn[1], TCP_SYN | TCP_ACK, b"")),
    ];
    // (direction, offset, length) of each data segment, by frame index.
    let mut segs: Vec<Option<(usize, usize, usize)>> = vec![None, None];
    let mut given = 0usize;
    while !inp.is_empty() && segs.len() < 128 {
        let b = inp.u8();
        let d = (b & 1) as usize;
        let off = inp.u16() as usize % (n[d] + 1);
        let len = (inp.u8() as usize).min(n[d] - off);
        // A FIN only where the stream ends (a receiver takes nothing after it).
        let fin = b & 2 != 0 && off + len == n[d];
        let seq = isn[d].wrapping_add(1).wrapping_add(off as u32);
        let flags = TCP_ACK | TCP_PSH | if fin { TCP_FIN } else { 0 };
        frames.push((0, frame(d, seq, flags, &streams[d][off..off + len])));
        segs.push(Some((d, off, len)));
        given += len;
    }
    let max_ooo_bytes = [0u64, 64, 1000, 65536][(hdr as usize >> 2) & 3];
    let cfg = serde_json::json!({
        "signatures": [{"id": 1, "content": "ATTACK"}, {"id": 2, "content": "EVIL"}],
        "action": "alert", "alert_log": "/dev/null",
        "max_ooo_segments": (hdr >> 4) as u64,
        "max_ooo_bytes": max_ooo_bytes,
    });
    let ips = nf_ips::Ips::from_config(&cfg).expect("valid config");
    let batch = 1 + (hdr as usize & 3) * 5;
    let (out, nf, _) = run_frames_full(
        Box::new(ips),
        Box::new(LocalStore::new()),
        "fuzz",
        &frames,
        batch,
    );
    assert!(out[0].is_some() && out[1].is_some(), "handshake dropped");
    let mut fwd: [Vec<(usize, usize)>; 2] = [vec![], vec![]];
    for (o, s) in out.iter().zip(&segs) {
        if let (Some(_), Some((d, off, len))) = (o, s) {
            fwd[*d].push((*off, *len));
        }
    }
    let delivered: Vec<usize> = fwd.iter_mut().map(|f| covered_prefix(f)).collect();
    let st = nf.stats();
    let scanned = st["scanned_bytes"].as_u64().unwrap() as usize;
    assert!(scanned <= given, "scanned {scanned} bytes of {given} given");
    assert_eq!(
        scanned,
        delivered[0] + delivered[1],
        "IPS scanned {scanned} bytes; a receiver of the forwarded segments delivers {delivered:?}"
    );
    let want: u64 = (0..2)
        .map(|d| {
            REASM_SIGS
                .iter()
                .map(|p| occurrences(&streams[d][..delivered[d]], p))
                .sum::<u64>()
        })
        .sum();
    assert_eq!(
        st["alerts"].as_u64().unwrap(),
        want,
        "alerts vs signatures in the delivered bytes"
    );
}

fn check_outcome(o: &Outcome) {
    if let Outcome::Done(c) = o {
        if let Some(n) = &c.name {
            match c.proto.as_str() {
                // A query for the root (a resolver's priming query) is named ".".
                "dns" if n == "." => {}
                "tls" | "http" | "dns" => {
                    assert_eq!(host_name(n.as_bytes()).as_ref(), Some(n), "{c:?}")
                }
                "ssh" => assert!(!n.is_empty() && n.bytes().all(|b| b.is_ascii_graphic())),
                p => panic!("protocol {p} with a name"),
            }
            assert!(c.refused.is_none(), "{c:?}");
        }
    }
}

/// The L7 classifier on the first bytes of a flow.
pub fn l7_classify(data: &[u8]) {
    let mut inp = Input::new(data);
    let sel = inp.u8();
    let tcp = sel & 1 == 0;
    let cuts = [inp.u16(), inp.u16(), inp.u16()];
    let b = inp.rest();
    let sigs = default_signatures();
    let whole = classify(b, tcp, &sigs, false);
    check_outcome(&whole);
    let last = classify(b, tcp, &sigs, true);
    assert!(
        matches!(last, Outcome::Done(_)),
        "undecided at the last look"
    );
    check_outcome(&last);
    if tcp {
        // Segmentation cannot change a decision: what is decided on a prefix stays decided on
        // the whole (the NF decides as soon as the bytes so far are enough).
        for c in cuts {
            let k = c as usize % (b.len() + 1);
            if let d @ Outcome::Done(_) = classify(&b[..k], tcp, &sigs, false) {
                assert_eq!(whole, d, "decided on {k} of {} bytes", b.len());
            }
        }
    }
    // Built openings give back their name.
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789-.";
    let name: String = b
        .iter()
        .take(sel as usize)
        .map(|c| alphabet[*c as usize % alphabet.len()] as char)
        .collect();
    if host_name(name.as_bytes()).as_deref() == Some(name.as_str()) {
        let want = |p: &str| {
            Outcome::Done(nf_l7fw::classify::Class {
                proto: p.into(),
                name: Some(name.clone()),
                refused: None,
            })
        };
        let hello = tls::build_client_hello(Some(&name), cuts[0] as usize % 300);
        assert_eq!(classify(&hello, true, &sigs, false), want("tls"));
        let q = dns::build_query(&name, cuts[1]);
        assert_eq!(dns::query_name(&q).as_deref(), Ok(name.as_str()));
        assert_eq!(classify(&q, false, &sigs, true), want("dns"));
        let req = format!("GET / HTTP/1.1\r\nHost: {name}\r\n\r\n");
        assert_eq!(classify(req.as_bytes(), true, &sigs, false), want("http"));
    }
}
