//! Seed inputs per target: real frames of the case directories (`nfs/tests-data`), the case
//! configs, valid ESP made by gateway A, tier records, protocol openings. `fuzz-seeds DIR` writes
//! them to `DIR/<target>/seed-<n>` (the committed `nfs/fuzz/corpus`); the replay test runs them
//! too, so they cannot go stale.

use crate::input::encode_frames;
use crate::nfs::configs;
use flowstore::LocalStore;
use nfcore::harness::{case, run_frames};
use packet::{Direction, FlowKey};

fn case_frames(nf: &str, name: &str) -> Vec<(u64, Vec<u8>)> {
    case(nf, name).frames
}

/// A frame-list input: batch byte, then the frames.
fn frame_list(first: u8, frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut v = vec![first];
    encode_frames(&mut v, frames);
    v
}

/// Gateway A's output (ESP) for the ipsec case's cleartext.
fn esp_frames() -> Vec<(u64, Vec<u8>)> {
    let case = case_frames("ipsec", "basic");
    let a = nf_ipsec::Ipsec::from_config(&crate::nfs::config(configs::IPSEC_A)).unwrap();
    let out = run_frames(Box::new(a), Box::new(LocalStore::new()), "seed", &case, 8);
    case.iter()
        .zip(out)
        .filter_map(|((t, _), o)| Some((*t, o?)))
        .collect()
}

fn all_case_frames() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = [
        ("firewall", "basic"),
        ("nat", "basic"),
        ("lb", "basic"),
        ("lb", "udp-v6"),
        ("ips", "split"),
        ("l7fw", "basic"),
        ("ipsec", "basic"),
    ]
    .iter()
    .flat_map(|(n, c)| case_frames(n, c))
    .map(|(_, f)| f)
    .collect();
    v.sort();
    v.dedup();
    // A small corpus: every k-th distinct frame (the fuzzer finds the rest).
    let k = v.len().div_ceil(20);
    v.into_iter().step_by(k.max(1)).collect()
}

fn reasm_seed(hdr: u8, s0: &[u8], s1: &[u8], segs: &[(u8, u16, u8)]) -> Vec<u8> {
    let mut v = vec![hdr];
    v.extend_from_slice(&1000u32.to_be_bytes());
    v.extend_from_slice(&u32::MAX.wrapping_sub(20).to_be_bytes()); // wraps mid-stream
    v.extend_from_slice(&(s0.len() as u16).to_be_bytes());
    v.push((s1.len() / 2) as u8);
    v.extend_from_slice(s0);
    v.extend_from_slice(s1);
    for (b, off, len) in segs {
        v.push(*b);
        v.extend_from_slice(&off.to_be_bytes());
        v.push(*len);
    }
    v
}

/// The seeds of target `name`.
pub fn seeds(name: &str) -> Vec<Vec<u8>> {
    match name {
        "packet" => all_case_frames()
            .into_iter()
            .chain(esp_frames().into_iter().map(|(_, f)| f).take(4))
            .collect(),
        "resp" => [
            &b"*3\r\n$2\r\nab\r\n$-1\r\n:7\r\n"[..],
            b"+OK\r\n",
            b"-ERR wrong type\r\n",
            b"$4\r\na\r\nb\r\n",
            b"*2\r\n*1\r\n:-12\r\n$0\r\n\r\n",
            b"*-1\r\n",
        ]
        .iter()
        .map(|s| s.to_vec())
        .collect(),
        "config" => [
            configs::FIREWALL,
            configs::NAT,
            configs::LB,
            configs::LB_V6,
            configs::IPS,
            configs::L7FW,
            configs::MONITOR,
            configs::IPSEC_A,
            configs::IPSEC_B,
            r#"{"batch_size": 64, "fail_mode": "open", "pipeline_depth": 4, "spin_us": 0}"#,
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect(),
        "state" => state_seeds(),
        "reasm" => vec![
            // In order; reordered with a hole filled later; overlapping retransmissions; FIN.
            reasm_seed(0x46, b"GET /ATTACK HTTP/1.0\r\n", b"", &[(0, 0, 22)]),
            reasm_seed(
                0x45,
                b"xxxxATTACKyyyyEVILzz",
                b"OK EVIL!",
                &[
                    (0, 10, 10),
                    (1, 4, 4),
                    (0, 0, 6),
                    (0, 4, 8),
                    (3, 0, 8),
                    (2, 18, 2),
                ],
            ),
            reasm_seed(
                0x27,
                b"0123456789ATTACK0123456789",
                b"",
                &[
                    (0, 20, 6),
                    (0, 10, 3),
                    (0, 13, 3),
                    (0, 0, 10),
                    (0, 5, 15),
                    (2, 16, 10),
                ],
            ),
        ],
        "l7_classify" => {
            let mut v = Vec::new();
            let hello = nf_l7fw::tls::build_client_hello(Some("www.bad.example"), 40);
            for (sel, b) in [
                (0u8, hello.clone()),
                (0, nf_l7fw::tls::build_client_hello(None, 0)),
                (
                    2,
                    b"GET / HTTP/1.1\r\nHost: evil.example:8080\r\n\r\n".to_vec(),
                ),
                (1, nf_l7fw::dns::build_query("a.tracker.example", 7)),
                (0, b"SSH-2.0-OpenSSH_9.2p1 Debian\r\n".to_vec()),
                (0, b"\x13BitTorrent protocol\x00\x00".to_vec()),
                (4, b"\x00\x00\x00\x50\xfeSMBrest".to_vec()),
            ] {
                let mut s = vec![sel, 0, 20, 0, 60, 1, 0];
                s.extend_from_slice(&b);
                v.push(s);
            }
            v
        }
        "esp" => {
            let mut v = Vec::new();
            let esp = esp_frames();
            for (i, f) in all_case_frames()
                .into_iter()
                .chain(esp.into_iter().map(|(_, f)| f).take(4))
                .enumerate()
            {
                let mut s = vec![i as u8];
                s.extend((0..32).map(|k| k as u8)); // key (16 or 32 bytes used)
                s.truncate(if i % 2 == 0 { 17 } else { 33 });
                s.extend_from_slice(&[1, 2, 3, 4, 0, 0, 0x10, 1, 0, 0, 0, 9, 0, 40, 0x80]);
                s.extend_from_slice(&f);
                v.push(s);
            }
            v
        }
        "replay" => vec![
            vec![
                1, 0, 129, 0, 130, 0, 135, 0, 133, 0, 133, 2, 0, 200, 0, 1, 3, 0, 0, 0, 1,
            ],
            vec![
                63, 2, 0xff, 0xff, 0, 120, 0, 128, 3, 0xff, 0xff, 0xff, 0xff, 0, 127,
            ],
        ],
        "nf_firewall" => vec![frame_list(3, &case_frames("firewall", "basic"))],
        "nf_nat" => vec![frame_list(3, &case_frames("nat", "basic"))],
        "nf_lb" => vec![
            frame_list(3, &case_frames("lb", "basic")),
            frame_list(0x80 | 3, &case_frames("lb", "udp-v6")),
        ],
        "nf_ips" => vec![
            frame_list(0, &case_frames("ips", "split")),
            frame_list(4, &case_frames("ips", "reordered")),
        ],
        "nf_l7fw" => vec![frame_list(1, &case_frames("l7fw", "basic"))],
        "nf_monitor" => vec![frame_list(7, &case_frames("monitor", "basic"))],
        "nf_ipsec" => {
            let clear = case_frames("ipsec", "basic");
            let mut esp = esp_frames();
            let mut mixed = clear.clone();
            mixed.extend(esp.iter().cloned());
            esp.extend(esp.clone()); // replays
            vec![
                frame_list(3, &clear),
                frame_list(0x80 | 3, &esp),
                frame_list(0x80, &mixed),
            ]
        }
        other => panic!("no seeds for unknown target {other}"),
    }
}

fn state_seeds() -> Vec<Vec<u8>> {
    let with = |sel: u8, b: Vec<u8>| {
        let mut v = vec![sel];
        v.extend(b);
        v
    };
    let k = FlowKey {
        src: "10.0.0.1".parse().unwrap(),
        dst: "192.0.2.9".parse().unwrap(),
        src_port: 40000,
        dst_port: 443,
        proto: 6,
    };
    let dir = nf_ips::reasm::DirState {
        init: true,
        expected: 12345,
        ac: 3,
        offset: 77,
        buffered: 1,
        buffered_bytes: 5,
        slots: 1,
        ooo_next: 12350,
    };
    let mut dir_b = vec![];
    dir.encode_into(&mut dir_b);
    let mut w = nf_ipsec::replay::ReplayWindow::new(128);
    for s in [1, 2, 5, 70] {
        w.accept(s).unwrap();
    }
    let mut win = vec![1u8]; // size byte: 64 * (1 + 1) = 128
    win.extend(w.encode());
    vec![
        with(
            0,
            nf_firewall::conn::ConnState {
                phase: nf_firewall::conn::Phase::Established,
                initiator: Direction::Reverse,
                refreshed_ms: 5000,
                track: nfcore::Track(0x07),
            }
            .encode(),
        ),
        with(
            1,
            nf_nat::Mapping {
                public: ("198.51.100.1".parse().unwrap(), 20001),
                orig: k,
                refreshed_ms: 9,
                track: nfcore::Track(0x0f),
            }
            .encode(),
        ),
        with(2, nf_nat::encode_endpoint("fd00::1".parse().unwrap(), 53)),
        with(
            3,
            nf_lb::Conn {
                backend: "[fd00:1::1]:5353".parse().unwrap(),
                refreshed_ms: 1,
                track: nfcore::Track(0x35),
            }
            .encode(),
        ),
        with(4, b"10.1.0.1:8080 up\n[fd00::1]:80 down\n".to_vec()),
        with(
            5,
            nf_ips::Record {
                fingerprint: 0xdead_beef,
                blocked: false,
                refreshed_ms: 100,
                dirs: [dir, nf_ips::reasm::DirState::default()],
                track: nfcore::Track(0x05),
            }
            .encode(),
        ),
        with(6, dir_b),
        with(
            7,
            nf_ips::reasm::OooBuffer {
                segs: vec![nf_ips::reasm::Segment {
                    seq: 12350,
                    fin: true,
                    data: b"ATTACK".to_vec(),
                }],
            }
            .encode(),
        ),
        with(
            8,
            nf_l7fw::Record {
                refreshed_ms: 3,
                track: nfcore::Track(0x01),
                proto: 6,
                state: nf_l7fw::FlowState::Pending {
                    next: [Some(100), None],
                    dir: Some(0),
                    packets: 1,
                    buf: b"\x16\x03\x01".to_vec(),
                },
            }
            .encode(),
        ),
        with(
            8,
            nf_l7fw::Record {
                refreshed_ms: 4,
                track: nfcore::Track(0x0f),
                proto: 6,
                state: nf_l7fw::FlowState::Done {
                    class: nf_l7fw::classify::Class {
                        proto: "http".into(),
                        name: Some("x.example".into()),
                        refused: None,
                    },
                    blocked: false,
                    follow: Some(nf_l7fw::Followed {
                        dir: 0,
                        next: 1000,
                        at: nf_l7fw::follow::Follow::ChunkData { left: 5, crlf: 2 },
                    }),
                },
            }
            .encode(),
        ),
        with(
            9,
            nf_monitor::FlowRecord {
                pkts_fwd: 3,
                bytes_fwd: 180,
                ..Default::default()
            }
            .encode(),
        ),
        with(10, win),
    ]
}
