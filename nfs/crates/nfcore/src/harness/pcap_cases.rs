//! The pcap cases: `tests-data/<nf>/<case>/{config.json, input.pcap, expected.pcap,
//! expected.json}`, written by `cargo run -p nfcore --example pcap-cases` (and compared with the
//! committed files by `nf/tests/pcap_cases.rs`, so they cannot go stale).
//!
//! A case is a table of steps: an input packet, what the NF must do with it (drop it, forward it
//! unchanged, or forward it with other addresses and ports) and why, in words. The expected
//! frames are built here from that statement, not recorded from the NF; a rewritten one is built
//! from scratch with the new addresses (so its checksums are computed afresh, independently of
//! the NF's incremental update). `expected.json` repeats the table readably (`steps`), with the
//! verdicts and the NF counters the case must end with.

use crate::harness::{describe_frame, flag_letters, tcp_flags};
use packet::build::{FrameSpec, Transport};
use serde_json::{json, Value};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;

/// One input packet (TCP unless `udp`), at `t_ms`.
#[derive(Debug, Clone)]
pub struct Pkt {
    pub t_ms: u64,
    pub src: IpAddr,
    pub sport: u16,
    pub dst: IpAddr,
    pub dport: u16,
    /// TCP flags, seq, ack; None: UDP.
    pub tcp: Option<(u8, u32, u32)>,
    pub payload: Vec<u8>,
    pub vlans: Vec<u16>,
}

/// What the NF must do with a packet.
#[derive(Debug, Clone)]
pub enum Then {
    Drop,
    /// Sent as it came.
    Forward,
    /// Sent with these addresses and ports (src, sport, dst, dport), everything else as it came.
    Rewrite(IpAddr, u16, IpAddr, u16),
}

/// A packet, its fate and why.
#[derive(Debug, Clone)]
pub struct Step {
    pub pkt: Pkt,
    pub then: Then,
    pub why: &'static str,
}

/// One case of one NF.
#[derive(Debug, Clone)]
pub struct PcapCase {
    pub nf: &'static str,
    pub name: &'static str,
    pub config: Value,
    pub steps: Vec<Step>,
    /// NF counters (stats) the run must end with (those named; others are not checked).
    pub counters: Value,
}

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("ADDR:PORT in a case table")
}

/// A TCP packet `from` -> `to` (`"10.0.0.1:40000"`) with flags (`"SA"`), seq and ack.
fn tcp(from: &str, to: &str, flags: &str, seq: u32, ack: u32) -> Pkt {
    let flags = tcp_flags(flags).expect("flags in a case table");
    Pkt::new(from, to, Some((flags, seq, ack)))
}

/// A UDP datagram `from` -> `to`.
fn udp(from: &str, to: &str) -> Pkt {
    Pkt::new(from, to, None)
}

impl Pkt {
    fn new(from: &str, to: &str, tcp: Option<(u8, u32, u32)>) -> Pkt {
        let (from, to) = (addr(from), addr(to));
        Pkt {
            t_ms: 0,
            src: from.ip(),
            sport: from.port(),
            dst: to.ip(),
            dport: to.port(),
            tcp,
            payload: vec![],
            vlans: vec![],
        }
    }

    fn data(mut self, payload: &[u8]) -> Pkt {
        self.payload = payload.to_vec();
        self
    }

    fn vlan(mut self, id: u16) -> Pkt {
        self.vlans.push(id);
        self
    }

    fn build_as(&self, src: IpAddr, sport: u16, dst: IpAddr, dport: u16) -> Vec<u8> {
        let t = match self.tcp {
            Some((flags, seq, ack)) => Transport::Tcp { seq, ack, flags },
            None => Transport::Udp,
        };
        let mut s = FrameSpec::new(src, dst, sport, dport, t);
        s.payload = &self.payload;
        s.vlans = &self.vlans;
        s.build()
    }

    fn frame(&self) -> Vec<u8> {
        self.build_as(self.src, self.sport, self.dst, self.dport)
    }
}

/// A case's steps from its table rows, one packet a millisecond.
fn steps(rows: Vec<(Pkt, Then, &'static str)>) -> Vec<Step> {
    rows.into_iter()
        .enumerate()
        .map(|(i, (mut pkt, then, why))| {
            pkt.t_ms = i as u64;
            Step { pkt, then, why }
        })
        .collect()
}

/// A case's steps at the times given (ms): cases about time (timeouts).
fn steps_at(rows: Vec<(u64, Pkt, Then, &'static str)>) -> Vec<Step> {
    rows.into_iter()
        .map(|(t_ms, mut pkt, then, why)| {
            pkt.t_ms = t_ms;
            Step { pkt, then, why }
        })
        .collect()
}

/// Forwarded with source and destination `src` and `dst` (`"ADDR:PORT"`).
fn rw(src: &str, dst: &str) -> Then {
    let (s, d) = (addr(src), addr(dst));
    Then::Rewrite(s.ip(), s.port(), d.ip(), d.port())
}

impl PcapCase {
    /// `input.pcap`: each packet at its time (one a millisecond unless the case is about time).
    pub fn input(&self) -> Vec<(u64, Vec<u8>)> {
        self.steps
            .iter()
            .map(|s| (s.pkt.t_ms * 1_000_000, s.pkt.frame()))
            .collect()
    }

    /// `expected.pcap`: the frames the NF sends, in order.
    pub fn expected_out(&self) -> Vec<(u64, Vec<u8>)> {
        self.steps
            .iter()
            .filter_map(|s| {
                let p = &s.pkt;
                let f = match s.then {
                    Then::Drop => return None,
                    Then::Forward => p.frame(),
                    Then::Rewrite(src, sport, dst, dport) => p.build_as(src, sport, dst, dport),
                };
                Some((p.t_ms * 1_000_000, f))
            })
            .collect()
    }

    /// `expected.json`: verdicts, counters and the steps in words.
    pub fn expected_json(&self) -> Value {
        let verdicts: Vec<&str> = self
            .steps
            .iter()
            .map(|s| match s.then {
                Then::Drop => "drop",
                _ => "forward",
            })
            .collect();
        let steps: Vec<String> = self
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let what = match s.then {
                    Then::Drop => "drop".to_string(),
                    Then::Forward => "forward unchanged".to_string(),
                    Then::Rewrite(src, sport, dst, dport) => {
                        format!("forward as {src}:{sport} -> {dst}:{dport}")
                    }
                };
                let p = &s.pkt;
                let (proto, fl) = match p.tcp {
                    Some((f, ..)) => ("tcp", format!(" {}", flag_letters(f))),
                    None => ("udp", String::new()),
                };
                format!(
                    "{i}: {}:{} -> {}:{} {proto}{fl}: {what} ({})",
                    p.src, p.sport, p.dst, p.dport, s.why
                )
            })
            .collect();
        json!({"verdicts": verdicts, "counters": self.counters, "steps": steps})
    }

    /// The case's files and their bytes.
    pub fn files(&self) -> Vec<(&'static str, Vec<u8>)> {
        let pcap = |frames: &[(u64, Vec<u8>)]| {
            let mut w = netio::pcap::PcapWriter::new(Vec::new()).expect("pcap to memory");
            for (ts, f) in frames {
                w.write_frame(*ts, f).expect("pcap to memory");
            }
            w.into_inner()
        };
        let text = |v: &Value| {
            let mut s = serde_json::to_string_pretty(v).expect("JSON");
            s.push('\n');
            s.into_bytes()
        };
        vec![
            ("config.json", text(&self.config)),
            ("input.pcap", pcap(&self.input())),
            ("expected.pcap", pcap(&self.expected_out())),
            ("expected.json", text(&self.expected_json())),
        ]
    }

    /// Write the case below `tests_data` (`<nf>/<name>/`).
    pub fn write(&self, tests_data: &Path) -> std::io::Result<()> {
        let dir = tests_data.join(self.nf).join(self.name);
        std::fs::create_dir_all(&dir)?;
        for (name, bytes) in self.files() {
            std::fs::write(dir.join(name), bytes)?;
        }
        Ok(())
    }

    /// Each step in one line, for a person reading a failure.
    pub fn describe(&self) -> String {
        self.steps
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{i}: {} ({})", describe_frame(&s.pkt.frame()), s.why))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Every pcap case.
pub fn all() -> Vec<PcapCase> {
    vec![
        firewall(),
        firewall_timeouts(),
        nat(),
        lb(),
        ips(),
        monitor(),
    ]
}

/// The default timeouts (conntrack's) over days of packet time.
fn firewall_timeouts() -> PcapCase {
    let (c1, c2, web) = ("10.0.0.1:40000", "10.0.0.2:40001", "192.0.2.1:80");
    let (u1, u2, dns) = ("10.0.0.5:5000", "10.0.0.6:5001", "192.0.2.53:53");
    let day = 86_400_000;
    use Then::{Drop, Forward};
    #[rustfmt::skip]
    let rows = vec![
        (0, tcp(c1, web, "S", 100, 0), Forward, "opens a connection"),
        (1, tcp(web, c1, "SA", 900, 101), Forward, "its reply"),
        (2, tcp(c1, web, "A", 101, 901), Forward, "established"),
        (600_002, tcp(c1, web, "PA", 101, 901).data(b"ten minutes idle"), Forward, "established, idle 10 min: kept (tcp_established_ms 5 days)"),
        (day, tcp(web, c1, "PA", 901, 117).data(b"a day idle"), Forward, "idle a day: kept"),
        (day + 1, tcp(c2, web, "S", 500, 0), Forward, "opens another connection"),
        (day + 2, tcp(web, c2, "SA", 700, 501), Forward, "its reply"),
        (day + 3, tcp(c2, web, "FA", 501, 701), Forward, "the client closes its side"),
        (day + 100_003, tcp(web, c2, "PA", 701, 502).data(b"late answer"), Forward, "half-closed, idle 100 s: kept (tcp_closing_ms 120 s)"),
        (day + 100_004, tcp(web, c2, "FA", 712, 502), Forward, "the server closes too"),
        (day + 230_004, tcp(web, c2, "A", 713, 502), Drop, "130 s after both FINs: forgotten, and no rule lets it in"),
        (day + 230_005, udp(u1, dns).data(b"query"), Forward, "rule 1 allows udp from 10/8"),
        (day + 259_005, udp(dns, u1).data(b"answer"), Forward, "the answer after 29 s (udp_unreplied_ms 30 s)"),
        (day + 378_005, udp(dns, u1).data(b"more"), Forward, "answered, idle 119 s: kept (udp_replied_ms 120 s)"),
        (day + 378_006, udp(u2, dns).data(b"query"), Forward, "another udp flow"),
        (day + 409_006, udp(dns, u2).data(b"answer"), Drop, "31 s unanswered: forgotten"),
        (day + 409_007, tcp(c1, web, "A", 117, 911), Forward, "the first connection, idle 409 s: kept"),
    ];
    PcapCase {
        nf: "firewall",
        name: "pcap-timeouts",
        config: json!({"rules": [
            {"action": "allow", "proto": "tcp", "src": "10.0.0.0/8", "dst_port": 80},
            {"action": "allow", "proto": "udp", "src": "10.0.0.0/8"}],
            "default": "deny"}),
        steps: steps_at(rows),
        counters: json!({"opened": 4, "denied_by_rule": 2}),
    }
}

fn firewall() -> PcapCase {
    let (c1, c2, web) = ("10.0.0.1:40000", "10.0.0.2:40001", "192.0.2.1:80");
    let dns = "192.0.2.53:53";
    use Then::{Drop, Forward};
    #[rustfmt::skip]
    let rows = vec![
        (tcp(c1, web, "S", 100, 0), Forward, "rule 0 allows tcp from 10/8 to port 80: opens the connection"),
        (tcp(web, c1, "SA", 900, 101), Forward, "the reply of an open connection"),
        (tcp(c1, web, "PA", 101, 901).data(b"GET / HTTP/1.1\r\n\r\n"), Forward, "data of the open connection"),
        (tcp("192.0.2.9:5555", "10.0.0.1:22", "S", 1, 0), Drop, "from outside 10/8: no rule allows it, default deny"),
        (tcp(c2, "192.0.2.1:443", "S", 1, 0), Drop, "port 443: no rule allows it, default deny"),
        (tcp(web, "10.0.0.2:40002", "A", 5, 6), Drop, "no connection, and no rule allows it from outside"),
        (udp("10.0.0.1:5353", dns).data(b"query"), Forward, "rule 1 allows udp from 10/8"),
        (udp(dns, "10.0.0.1:5353").data(b"answer"), Forward, "the reply of an open udp flow"),
        (tcp("10.0.0.4:40003", web, "S", 1, 0).vlan(10), Forward, "rule 0 allows it; the VLAN tag is kept"),
        (tcp(c1, web, "FA", 119, 901), Forward, "a FIN of the open connection passes"),
    ];
    PcapCase {
        nf: "firewall",
        name: "pcap-basic",
        config: json!({"rules": [
            {"action": "allow", "proto": "tcp", "src": "10.0.0.0/8", "dst_port": 80},
            {"action": "allow", "proto": "udp", "src": "10.0.0.0/8"}],
            "default": "deny"}),
        steps: steps(rows),
        counters: json!({"opened": 3, "denied_by_rule": 3}),
    }
}

fn nat() -> PcapCase {
    let (c1, c2, web, dns) = (
        "10.0.0.1:40000",
        "10.0.0.2:40000",
        "192.0.2.1:80",
        "192.0.2.53:53",
    );
    use Then::{Drop, Forward};
    #[rustfmt::skip]
    let rows = vec![
        (tcp(c1, web, "S", 100, 0), rw("198.51.100.1:20000", web), "new outbound connection: the first pool pair"),
        (tcp(web, "198.51.100.1:20000", "SA", 900, 101), rw(web, c1), "return traffic to the mapping: back to its owner"),
        (tcp(c1, web, "PA", 101, 901).data(b"hello"), rw("198.51.100.1:20000", web), "the same connection keeps its mapping"),
        (tcp(c2, web, "S", 7, 0), rw("198.51.100.1:20001", web), "another inside host: the next pair"),
        (tcp("192.0.2.7:80", "198.51.100.1:20001", "A", 1, 8), Drop, "to a mapped pair from a remote it was not mapped to"),
        (udp("10.0.0.3:5353", dns).data(b"query"), rw("198.51.100.1:20002", dns), "udp is translated too: the next pair"),
        (udp("10.0.0.4:1", "10.0.0.5:2").data(b"x"), Forward, "inside to inside passes unchanged"),
        (tcp(web, "198.51.100.1:29999", "S", 1, 0), Drop, "to the public address without a mapping"),
    ];
    PcapCase {
        nf: "nat",
        name: "pcap-basic",
        config: json!({"inside": ["10.0.0.0/8"], "public_ips": ["198.51.100.1"], "ports": "20000-20003"}),
        steps: steps(rows),
        counters: json!({"translated_out": 4, "translated_in": 1, "new_mappings": 3,
                         "no_mapping": 2, "passthrough": 1}),
    }
}

fn lb() -> PcapCase {
    let (vip, b1, b2) = ("10.0.0.100:80", "10.1.0.1:8080", "10.1.0.2:8080");
    let (a, b) = ("192.0.2.1:40000", "192.0.2.2:40001");
    use Then::{Drop, Forward};
    #[rustfmt::skip]
    let rows = vec![
        (tcp(a, vip, "S", 100, 0), rw(a, b1), "new connection, equal loads: the rendezvous hash of this 5-tuple picks 10.1.0.1 (as in lb/basic)"),
        (tcp(b1, a, "SA", 900, 101), rw(vip, a), "the backend's reply leaves from the VIP"),
        (tcp(a, vip, "PA", 101, 901).data(b"GET / HTTP/1.1\r\n\r\n"), rw(a, b1), "the connection keeps its backend"),
        (tcp(b, vip, "S", 7, 0), rw(b, b2), "new connection: least connections picks 10.1.0.2"),
        (tcp(b2, b, "SA", 5, 8), rw(vip, b), "the second backend's reply leaves from the VIP"),
        (tcp("192.0.2.3:5555", vip, "A", 1, 1), Drop, "not a SYN and no connection"),
        (tcp(a, "10.0.0.5:22", "S", 1, 0), Forward, "not to the VIP: unchanged"),
        (udp(a, vip).data(b"u"), Forward, "udp to the tcp VIP: unchanged"),
    ];
    PcapCase {
        nf: "lb",
        name: "pcap-basic",
        config: json!({"vip": "10.0.0.100", "port": 80, "backends": [b1, b2]}),
        steps: steps(rows),
        counters: json!({"new_conns": 2, "to_backend": 3, "to_client": 2, "no_conn": 1,
                         "passthrough": 2}),
    }
}

fn ips() -> PcapCase {
    let (c, s, c3) = ("10.0.0.1:1234", "10.0.0.2:80", "10.0.0.3:1235");
    use Then::{Drop, Forward};
    #[rustfmt::skip]
    let rows = vec![
        (tcp(c, s, "S", 999, 0), Forward, "opens the connection"),
        (tcp(s, c, "SA", 4999, 1000), Forward, "the server's answer"),
        (tcp(c, s, "PA", 1000, 5000).data(b"hello AT"), Forward, "no signature yet"),
        (tcp(c, s, "PA", 1008, 5000).data(b"TACK world"), Drop, "completes ATTACK across two segments: alert, dropped, connection blocked"),
        (tcp(s, c, "A", 5000, 1008), Drop, "the blocked connection, other direction"),
        (tcp(c3, s, "S", 1, 0), Forward, "another connection"),
        (tcp(c3, s, "PA", 2, 0).data(b"benign bytes"), Forward, "no signature"),
        (udp("10.0.0.3:5000", "10.0.0.2:53").data(b"xx\xde\xad\xbe\xefxx"), Drop, "udp datagram with signature 1002 (hex de ad be ef)"),
    ];
    PcapCase {
        nf: "ips",
        name: "pcap-split",
        config: json!({"signatures": [
            {"id": 1001, "msg": "ATTACK in stream", "content": "ATTACK"},
            {"id": 1002, "msg": "dead beef", "hex": "de ad be ef"}],
            "action": "drop", "alert_log": "/dev/null"}),
        steps: steps(rows),
        counters: json!({"alerts": 2, "blocked_dropped": 1, "udp_scanned": 1}),
    }
}

fn monitor() -> PcapCase {
    let (c1, web) = ("10.0.0.1:40000", "192.0.2.1:80");
    use Then::Forward;
    #[rustfmt::skip]
    let rows = vec![
        (tcp(c1, web, "S", 1, 0), Forward, "counted, forwarded unchanged"),
        (tcp(web, c1, "SA", 9, 2), Forward, "the same flow, other direction"),
        (udp("10.0.0.2:5353", "192.0.2.53:53").data(b"query"), Forward, "a second flow"),
        (tcp("10.0.0.4:1", web, "S", 1, 0).vlan(20), Forward, "a third flow, VLAN tag kept"),
    ];
    PcapCase {
        nf: "monitor",
        name: "pcap-basic",
        config: json!({"idle_timeout_ms": 1000}),
        steps: steps(rows),
        counters: json!({"new_flows": 3}),
    }
}
