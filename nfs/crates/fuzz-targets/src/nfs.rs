//! Targets for each NF's packet path: the runtime (batches, timers by packet time) and the NF
//! with a local FlowStore, over a frame list from the input ([`crate::input::frames`]), with the
//! configs of the case directories (`nfs/tests-data`).

use crate::input::{frames, Input};
use crate::parsers::csum_valid;
use flowstore::LocalStore;
use nfcore::harness::run_frames_full;
use nfcore::NetworkFunction;
use packet::{FlowKey, ParseError, Parsed, L4, PROTO_UDP};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};

/// The case configs the targets run with (compiled in: the fuzz binary needs no files).
pub mod configs {
    pub const FIREWALL: &str = include_str!("../../../tests-data/firewall/basic/config.json");
    pub const NAT: &str = include_str!("../../../tests-data/nat/basic/config.json");
    pub const LB: &str = include_str!("../../../tests-data/lb/basic/config.json");
    pub const LB_V6: &str = include_str!("../../../tests-data/lb/udp-v6/config.json");
    pub const IPS: &str = include_str!("../../../tests-data/ips/split/config.json");
    pub const L7FW: &str = include_str!("../../../tests-data/l7fw/basic/config.json");
    pub const MONITOR: &str = include_str!("../../../tests-data/monitor/basic/config.json");
    pub const IPSEC_A: &str = include_str!("../../../tests-data/ipsec/basic/config.json");
    pub const IPSEC_B: &str = include_str!("../../../tests-data/ipsec/basic/peer.json");
}

pub fn config(text: &str) -> Value {
    let mut v: Value = serde_json::from_str(text).expect("case config is JSON");
    if v.get("alert_log").is_some() || v.get("signatures").is_some() {
        v["alert_log"] = "/dev/null".into();
    }
    v
}

/// What a run gives: the inputs, their parses, the outputs, the NF (for its counters).
struct Run {
    input: Vec<(u64, Vec<u8>)>,
    parsed: Vec<Result<Parsed, ParseError>>,
    out: Vec<Option<Vec<u8>>>,
    nf: Box<dyn NetworkFunction>,
}

/// What an NF may do to the frames it forwards.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Out {
    /// Nothing.
    Unchanged,
    /// Addresses and ports: same length and payload, valid checksums stay valid (and a UDP
    /// checksum never becomes 0 = none).
    Rewritten,
    /// Anything (encapsulation): the target checks.
    Own,
}

/// Run `nf` over the frames of `data` (first byte: batch size 1-32), checking what holds for
/// every NF: non-IP frames are forwarded unchanged, malformed ones dropped, forwarded frames
/// parse, and `out`.
fn run(nf: Box<dyn NetworkFunction>, data: &[u8], out_check: Out) -> Run {
    let mut inp = Input::new(data);
    let batch = 1 + inp.u8() as usize % 32;
    let input = frames(&mut inp);
    let (out, nf, _) = run_frames_full(nf, Box::new(LocalStore::new()), "fuzz", &input, batch);
    assert_eq!(out.len(), input.len());
    let parsed: Vec<_> = input.iter().map(|(_, f)| Parsed::new_checked(f)).collect();
    for (i, ((_, f), o)) in input.iter().zip(&out).enumerate() {
        match (&parsed[i], o) {
            (Err(ParseError::UnsupportedEthertype(_)), o) => {
                assert_eq!(o.as_ref(), Some(f), "frame {i}: non-IP not forwarded as is")
            }
            (Err(e), o) => assert!(o.is_none(), "frame {i}: malformed ({e}) forwarded"),
            (Ok(_), None) => {}
            (Ok(p), Some(o)) => {
                let q = Parsed::new_checked(o).expect("a forwarded frame parses");
                match out_check {
                    Out::Unchanged => {
                        assert_eq!(o, f, "frame {i} changed");
                        continue;
                    }
                    Out::Own => continue,
                    Out::Rewritten => {}
                }
                assert_eq!(o.len(), f.len(), "frame {i}: length changed");
                assert_eq!(q.payload(o), p.payload(f), "frame {i}: payload changed");
                if csum_valid(f, p) {
                    assert!(csum_valid(o, &q), "frame {i}: rewrite broke the checksums");
                    if p.proto == PROTO_UDP && matches!(p.l4, L4::Udp { .. }) {
                        let c = |b: &[u8], at: usize| u16::from_be_bytes([b[at + 6], b[at + 7]]);
                        if c(f, p.l4_offset) != 0 {
                            assert_ne!(c(o, q.l4_offset), 0, "frame {i}: UDP checksum became 0");
                        }
                    }
                }
            }
        }
    }
    Run {
        input,
        parsed,
        out,
        nf,
    }
}

impl Run {
    /// (index, input parse, output parse) of every forwarded IP frame.
    fn forwarded(&self) -> impl Iterator<Item = (usize, &Parsed, Parsed)> + '_ {
        self.out.iter().enumerate().filter_map(|(i, o)| {
            let p = self.parsed[i].as_ref().ok()?;
            let q = Parsed::new_checked(o.as_ref()?).ok()?;
            Some((i, p, q))
        })
    }

    fn counter(&self, name: &str) -> u64 {
        self.nf.stats()[name].as_u64().unwrap_or(0)
    }
}

/// Firewall: every forwarded packet's connection was opened by a forwarded packet that the
/// rules allow (connections are keyed by the canonical 5-tuple).
pub fn firewall(data: &[u8]) {
    let cfg = config(configs::FIREWALL);
    let nf = nf_firewall::Firewall::from_config(&cfg).unwrap();
    let rules: Vec<nf_firewall::rules::Rule> =
        nfcore::config::parse(&cfg["rules"], "rules").unwrap();
    let r = run(Box::new(nf), data, Out::Unchanged);
    let mut opened: HashSet<FlowKey> = HashSet::new();
    for (i, p, _) in r.forwarded() {
        let k = p.flow_key();
        if nf_firewall::rules::may_open(&rules, false, &k) {
            opened.insert(k.canonical().0);
        } else {
            assert!(
                opened.contains(&k.canonical().0),
                "frame {i}: {k} forwarded, but no allowed packet opened its connection"
            );
        }
    }
}

/// NAT: outbound leaves from a pool address and port; while no mapping expired, each outbound
/// flow has one public endpoint and each endpoint one flow; inbound goes to the flow owning the
/// endpoint it was sent to.
pub fn nat(data: &[u8]) {
    let cfg = config(configs::NAT);
    let nf = nf_nat::Nat::from_config(&cfg).unwrap();
    let public: IpAddr = cfg["public_ips"][0].as_str().unwrap().parse().unwrap();
    let inside = nf_firewall::rules::Cidr::parse(cfg["inside"][0].as_str().unwrap()).unwrap();
    let r = run(Box::new(nf), data, Out::Rewritten);
    let expired = r.counter("expired") > 0;
    let mut by_flow: HashMap<FlowKey, (IpAddr, u16)> = HashMap::new();
    let mut by_endpoint: HashMap<(IpAddr, u16), FlowKey> = HashMap::new();
    for (i, p, q) in r.forwarded() {
        let (k, o) = (p.flow_key(), q.flow_key());
        let ports = matches!(p.l4, L4::Tcp { .. } | L4::Udp { .. });
        if p.dst == public {
            assert!(
                ports,
                "frame {i}: untranslatable packet to the public address forwarded"
            );
            assert!(
                inside.contains(o.dst),
                "frame {i}: inbound not sent inside: {o}"
            );
            assert_eq!((o.src, o.src_port), (k.src, k.src_port));
            if !expired {
                let owner = by_endpoint.get(&(k.dst, k.dst_port));
                let owner =
                    owner.unwrap_or_else(|| panic!("frame {i}: inbound {k} without mapping"));
                assert_eq!((owner.src, owner.src_port), (o.dst, o.dst_port));
                assert_eq!((owner.dst, owner.dst_port), (k.src, k.src_port));
            }
        } else if inside.contains(p.src) && !inside.contains(p.dst) {
            assert!(ports, "frame {i}: untranslatable outbound packet forwarded");
            assert_eq!(o.src, public, "frame {i}: outbound left untranslated: {o}");
            assert!(
                (20000..=20003).contains(&o.src_port),
                "frame {i}: port {}",
                o.src_port
            );
            assert_eq!((o.dst, o.dst_port), (k.dst, k.dst_port));
            if !expired {
                let ep = (o.src, o.src_port);
                assert_eq!(
                    *by_flow.entry(k).or_insert(ep),
                    ep,
                    "frame {i}: flow remapped"
                );
                assert_eq!(
                    *by_endpoint.entry(ep).or_insert(k),
                    k,
                    "frame {i}: endpoint shared"
                );
            }
        } else {
            assert_eq!(
                r.out[i].as_ref(),
                Some(&r.input[i].1),
                "frame {i}: passthrough changed"
            );
        }
    }
}

/// LB (TCP VIP over IPv4 or UDP VIP over IPv6, by the first input byte): nothing to the VIP
/// leaves unrewritten, and rewritten packets go to a configured backend.
pub fn lb(data: &[u8]) {
    let cfg = config(if data.first().is_some_and(|b| b & 0x80 != 0) {
        configs::LB_V6
    } else {
        configs::LB
    });
    let nf = nf_lb::LoadBalancer::from_config(&cfg).unwrap();
    let vip: IpAddr = cfg["vip"].as_str().unwrap().parse().unwrap();
    let port = cfg["port"].as_u64().unwrap() as u16;
    let proto = if cfg["proto"] == "tcp" { 6 } else { 17 };
    let backends: Vec<SocketAddr> = cfg["backends"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_str().unwrap().parse().unwrap())
        .collect();
    let r = run(Box::new(nf), data, Out::Rewritten);
    for (i, p, q) in r.forwarded() {
        let k = p.flow_key();
        if k.dst == vip && k.dst_port == port && k.proto == proto && !p.non_first_fragment {
            let to = SocketAddr::new(q.dst, q.flow_key().dst_port);
            assert!(
                backends.contains(&to),
                "frame {i}: to the VIP, left for {to}"
            );
        }
    }
}

/// IPS: frames unchanged; no forwarded UDP datagram carries a signature (drop mode).
pub fn ips(data: &[u8]) {
    let nf = nf_ips::Ips::from_config(&config(configs::IPS)).unwrap();
    let r = run(Box::new(nf), data, Out::Unchanged);
    for (i, p, _) in r.forwarded() {
        if matches!(p.l4, L4::Udp { .. }) {
            let pl = p.payload(&r.input[i].1);
            for sig in [&b"ATTACK"[..], &[0xde, 0xad, 0xbe, 0xef]] {
                assert!(
                    !pl.windows(sig.len()).any(|w| w == sig),
                    "frame {i}: UDP datagram with a signature forwarded"
                );
            }
        }
    }
}

/// L7 firewall: frames unchanged, never a panic.
pub fn l7fw(data: &[u8]) {
    let nf = nf_l7fw::L7Firewall::from_config(&config(configs::L7FW)).unwrap();
    run(Box::new(nf), data, Out::Unchanged);
}

/// Monitor: every frame that parses is forwarded unchanged.
pub fn monitor(data: &[u8]) {
    let nf = nf_monitor::Monitor::from_config(&config(configs::MONITOR)).unwrap();
    let r = run(Box::new(nf), data, Out::Unchanged);
    for (i, p) in r.parsed.iter().enumerate() {
        if p.is_ok() {
            assert!(r.out[i].is_some(), "frame {i}: monitor dropped a packet");
        }
    }
}

/// IPsec gateway A or B (first input byte's top bit): an (SPI, sequence number) is never sent
/// twice (nonce reuse) nor accepted twice (replay); decapsulated frames match the SA's
/// selectors.
pub fn ipsec(data: &[u8]) {
    let b = data.first().is_some_and(|b| b & 0x80 != 0);
    let cfg = config(if b {
        configs::IPSEC_B
    } else {
        configs::IPSEC_A
    });
    let nf = nf_ipsec::Ipsec::from_config(&cfg).unwrap();
    let parsed = nf_ipsec::sa::Config::from_json(&cfg).unwrap();
    let r = run(Box::new(nf), data, Out::Own);
    let mut sent = HashSet::new();
    let mut accepted = HashSet::new();
    for (i, p, q) in r.forwarded() {
        let f = &r.input[i].1;
        let o = r.out[i].as_ref().unwrap();
        let esp_in = nf_ipsec::esp::esp_header(f, p);
        let esp_out = nf_ipsec::esp::esp_header(o, &q);
        match (esp_in, esp_out) {
            (None, Some(h)) => assert!(sent.insert(h), "frame {i}: ESP {h:?} sent twice"),
            (Some(h), _) if o != f => {
                assert!(accepted.insert(h), "frame {i}: ESP {h:?} accepted twice");
                let sa = parsed.sas.iter().find(|s| s.spi == h.0).expect("an SA");
                assert!(
                    sa.matches(q.src, q.dst),
                    "frame {i}: inner {} -> {}",
                    q.src,
                    q.dst
                );
            }
            _ => assert_eq!(o, f, "frame {i}: bypassed frame changed"),
        }
    }
}
