//! How long a flow's state is kept when no packet comes: per protocol and phase, as Linux
//! conntrack does (`nf_conntrack_tcp_timeout_*`, `nf_conntrack_udp_timeout[_stream]`,
//! `nf_conntrack_icmp_timeout`, `nf_conntrack_generic_timeout`). Pure: a [`Track`] records what
//! a flow's packets showed (a few bits, stored in the NF's record), [`Track::phase`] names the
//! phase, [`Timeouts::of`] gives its timeout.
//!
//! Config (`"timeouts": {...}` in an NF's config, every key optional): `tcp_syn_ms` (handshake not
//! complete: 120000), `tcp_established_ms` (432000000, 5 days), `tcp_closing_ms` (a FIN seen
//! one way: 120000, conntrack's FIN_WAIT), `tcp_closed_ms` (FINs seen both ways, or a RST:
//! 10000; conntrack keeps TIME_WAIT 120 s, which protects the endpoints' next connection on the
//! same ports; a NAT or LB entry after both FINs only waits for the last ACK), `udp_unreplied_ms` (30000),
//! `udp_replied_ms` (packets seen both ways: 120000), `icmp_ms` (30000), `other_ms` (600000).
//! The older `idle_timeout_ms` (and the firewall's and LB's `close_timeout_ms`) are still read:
//! [`Timeouts::resolve`].

use crate::config::{present, Int};
use packet::{PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP, TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN};
use serde::Deserialize;

/// The longest timeout a config may set (30 days).
pub const MAX_MS: u64 = 30 * 86_400_000;

/// What a flow's packets showed so far, per direction (0 and 1: the NF's two directions, e.g.
/// the canonical key's and its reverse, or outbound and inbound). Bits only get set, so the
/// record changes at most a few times per flow, and two partial views (each direction's packets
/// seen by a different record) combine by [`Track::merge`]. Seven bits: fits next to a flag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Track(pub u8);

impl Track {
    /// A packet went this way.
    pub const SEEN: [u8; 2] = [0x01, 0x02];
    /// A TCP packet with ACK and without SYN went this way: the sender finished its handshake.
    pub const ACKED: [u8; 2] = [0x04, 0x08];
    /// A TCP FIN went this way.
    pub const FIN: [u8; 2] = [0x10, 0x20];
    /// A TCP RST went either way.
    pub const RST: u8 = 0x40;
    /// Every bit a track uses.
    pub const MASK: u8 = 0x7f;

    /// The track after a packet of protocol `proto` going direction `dir` (0 or 1) with TCP
    /// flags `flags` (0 for other protocols).
    pub fn seen(self, dir: usize, proto: u8, flags: u8) -> Track {
        let d = dir & 1;
        let mut t = self.0 | Self::SEEN[d];
        if proto == PROTO_TCP {
            if flags & TCP_RST != 0 {
                t |= Self::RST;
            } else {
                if flags & (TCP_ACK | TCP_SYN) == TCP_ACK {
                    t |= Self::ACKED[d];
                }
                if flags & TCP_FIN != 0 {
                    t |= Self::FIN[d];
                }
            }
        }
        Track(t)
    }

    /// What two partial views of one flow saw together.
    pub fn merge(self, other: Track) -> Track {
        Track(self.0 | other.0)
    }

    fn has(self, bits: u8) -> bool {
        self.0 & bits == bits
    }

    /// The phase of a flow of protocol `proto` with this track.
    pub fn phase(self, proto: u8) -> Phase {
        let both = Self::SEEN[0] | Self::SEEN[1];
        match proto {
            PROTO_TCP => {
                if self.0 & Self::RST != 0 || self.has(Self::FIN[0] | Self::FIN[1]) {
                    Phase::TcpClosed
                } else if self.0 & (Self::FIN[0] | Self::FIN[1]) != 0 {
                    Phase::TcpClosing
                } else if self.has(both) && self.0 & (Self::ACKED[0] | Self::ACKED[1]) != 0 {
                    Phase::TcpEstablished
                } else {
                    Phase::TcpSyn
                }
            }
            PROTO_UDP if self.has(both) => Phase::UdpReplied,
            PROTO_UDP => Phase::UdpUnreplied,
            PROTO_ICMP | PROTO_ICMPV6 => Phase::Icmp,
            _ => Phase::Other,
        }
    }

    /// The track an NF assumes for a record written before tracks were kept: the flow was seen
    /// both ways and (TCP) established, closing if the old record said so. The longer timeout
    /// keeps a live connection rather than cutting it at the upgrade.
    pub fn legacy(closing: bool) -> Track {
        let mut t = Self::SEEN[0] | Self::SEEN[1] | Self::ACKED[0];
        if closing {
            t |= Self::FIN[0];
        }
        Track(t)
    }
}

/// Where a flow stands, as far as its timeout goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// TCP, the handshake not complete (conntrack SYN_SENT / SYN_RECV).
    TcpSyn,
    TcpEstablished,
    /// TCP, a FIN seen one way (FIN_WAIT, CLOSE_WAIT).
    TcpClosing,
    /// TCP, FINs seen both ways (LAST_ACK, TIME_WAIT) or a RST (CLOSE).
    TcpClosed,
    /// UDP, packets one way only.
    UdpUnreplied,
    /// UDP, packets both ways.
    UdpReplied,
    Icmp,
    /// Any other protocol.
    Other,
}

/// Timeouts in ms per phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub tcp_syn_ms: u64,
    pub tcp_established_ms: u64,
    pub tcp_closing_ms: u64,
    pub tcp_closed_ms: u64,
    pub udp_unreplied_ms: u64,
    pub udp_replied_ms: u64,
    pub icmp_ms: u64,
    pub other_ms: u64,
}

impl Default for Timeouts {
    /// conntrack's defaults (closing: its longest closing state, TIME_WAIT).
    fn default() -> Timeouts {
        Timeouts {
            tcp_syn_ms: 120_000,
            tcp_established_ms: 5 * 86_400_000,
            tcp_closing_ms: 120_000,
            tcp_closed_ms: 10_000,
            udp_unreplied_ms: 30_000,
            udp_replied_ms: 120_000,
            icmp_ms: 30_000,
            other_ms: 600_000,
        }
    }
}

/// `"timeouts"` as a config writes it: each key optional (absent: the default).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimeoutsConfig {
    #[serde(deserialize_with = "present")]
    tcp_syn_ms: Option<Int<1, MAX_MS>>,
    #[serde(deserialize_with = "present")]
    tcp_established_ms: Option<Int<1, MAX_MS>>,
    #[serde(deserialize_with = "present")]
    tcp_closing_ms: Option<Int<1, MAX_MS>>,
    #[serde(deserialize_with = "present")]
    tcp_closed_ms: Option<Int<1, MAX_MS>>,
    #[serde(deserialize_with = "present")]
    udp_unreplied_ms: Option<Int<1, MAX_MS>>,
    #[serde(deserialize_with = "present")]
    udp_replied_ms: Option<Int<1, MAX_MS>>,
    #[serde(deserialize_with = "present")]
    icmp_ms: Option<Int<1, MAX_MS>>,
    #[serde(deserialize_with = "present")]
    other_ms: Option<Int<1, MAX_MS>>,
}

/// The older keys of an NF's config that set timeouts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Legacy {
    /// `idle_timeout_ms`: every phase (but the closing ones of an NF with `close_timeout_ms`).
    pub idle_ms: Option<u64>,
    /// `close_timeout_ms` (firewall, LB): the closing phases.
    pub close_ms: Option<u64>,
    /// What `close_timeout_ms` meant when absent (firewall, LB: 2000), None for NFs without it:
    /// with `idle_timeout_ms` alone their closing phases keep that meaning.
    pub close_default_ms: Option<u64>,
}

impl Timeouts {
    /// Every phase `ms`.
    pub fn uniform(ms: u64) -> Timeouts {
        Timeouts {
            tcp_syn_ms: ms,
            tcp_established_ms: ms,
            tcp_closing_ms: ms,
            tcp_closed_ms: ms,
            udp_unreplied_ms: ms,
            udp_replied_ms: ms,
            icmp_ms: ms,
            other_ms: ms,
        }
    }

    /// The timeout of `phase`.
    pub fn of(&self, phase: Phase) -> u64 {
        match phase {
            Phase::TcpSyn => self.tcp_syn_ms,
            Phase::TcpEstablished => self.tcp_established_ms,
            Phase::TcpClosing => self.tcp_closing_ms,
            Phase::TcpClosed => self.tcp_closed_ms,
            Phase::UdpUnreplied => self.udp_unreplied_ms,
            Phase::UdpReplied => self.udp_replied_ms,
            Phase::Icmp => self.icmp_ms,
            Phase::Other => self.other_ms,
        }
    }

    /// The timeout of a flow of protocol `proto` with track `t`.
    pub fn for_track(&self, t: Track, proto: u8) -> u64 {
        self.of(t.phase(proto))
    }

    /// How far ahead an NF whose record sees only one direction of a flow with `own` (its
    /// record's track) may arm the flow's timer: the earliest the whole flow's timeout can end,
    /// whatever the other direction saw (its timer handler, seeing both, re-arms it at the real
    /// deadline). A FIN one way may meet the other way's FIN (closed), otherwise at most the
    /// [`Timeouts::short_ms`].
    pub fn one_view_ms(&self, own: Track, proto: u8) -> u64 {
        let mut ms = self.for_track(own, proto).min(self.short_ms());
        if proto == PROTO_TCP && own.0 & (Track::FIN[0] | Track::FIN[1]) != 0 {
            ms = ms.min(self.tcp_closed_ms);
        }
        ms
    }

    /// The longest timeout of any phase: how long a record can stay idle.
    pub fn longest_ms(&self) -> u64 {
        [
            self.tcp_syn_ms,
            self.tcp_established_ms,
            self.tcp_closing_ms,
            self.tcp_closed_ms,
            self.udp_unreplied_ms,
            self.udp_replied_ms,
            self.icmp_ms,
            self.other_ms,
        ]
        .into_iter()
        .max()
        .unwrap_or(0)
    }

    /// The longest timeout of a phase that is not established TCP, replied UDP or another
    /// protocol: how far ahead an NF whose record sees only one direction may arm a timer
    /// (its timer handler, seeing both, re-arms it).
    pub fn short_ms(&self) -> u64 {
        [
            self.tcp_syn_ms,
            self.tcp_closing_ms,
            self.tcp_closed_ms,
            self.udp_unreplied_ms,
            self.icmp_ms,
        ]
        .into_iter()
        .max()
        .unwrap_or(1)
    }

    /// The timeouts of an NF's config: `timeouts` (each key absent takes the default), or the
    /// older keys: `idle_timeout_ms` sets every phase, as it did when it was the only timeout
    /// (`close_timeout_ms`, where the NF has it, the closing ones); `close_timeout_ms` alone
    /// the closing phases, the others default. Both `timeouts` and an older key: an error naming
    /// the older key.
    pub fn resolve(t: Option<TimeoutsConfig>, legacy: Legacy) -> Result<Timeouts, String> {
        if let Some(t) = t {
            for (key, given) in [
                ("idle_timeout_ms", legacy.idle_ms),
                ("close_timeout_ms", legacy.close_ms),
            ] {
                if given.is_some() {
                    return Err(format!(
                        "{key}: not together with timeouts (timeouts sets each phase; {key} is \
                         the older key, give one of them)"
                    ));
                }
            }
            let d = Timeouts::default();
            let v = |x: Option<Int<1, MAX_MS>>, def: u64| x.map_or(def, |x| x.0);
            return Ok(Timeouts {
                tcp_syn_ms: v(t.tcp_syn_ms, d.tcp_syn_ms),
                tcp_established_ms: v(t.tcp_established_ms, d.tcp_established_ms),
                tcp_closing_ms: v(t.tcp_closing_ms, d.tcp_closing_ms),
                tcp_closed_ms: v(t.tcp_closed_ms, d.tcp_closed_ms),
                udp_unreplied_ms: v(t.udp_unreplied_ms, d.udp_unreplied_ms),
                udp_replied_ms: v(t.udp_replied_ms, d.udp_replied_ms),
                icmp_ms: v(t.icmp_ms, d.icmp_ms),
                other_ms: v(t.other_ms, d.other_ms),
            });
        }
        let mut out = match legacy.idle_ms {
            Some(ms) => Timeouts::uniform(ms),
            None => Timeouts::default(),
        };
        let close = match (legacy.close_ms, legacy.idle_ms) {
            (Some(c), _) => Some(c),
            (None, Some(_)) => legacy.close_default_ms,
            (None, None) => None,
        };
        if let Some(c) = close {
            out.tcp_closing_ms = c;
            out.tcp_closed_ms = c;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_nf;
    use serde_json::{json, Value};

    const S: u8 = TCP_SYN;
    const SA: u8 = TCP_SYN | TCP_ACK;
    const A: u8 = TCP_ACK;
    const FA: u8 = TCP_FIN | TCP_ACK;

    fn run(pkts: &[(usize, u8)], proto: u8) -> Vec<Phase> {
        let mut t = Track::default();
        pkts.iter()
            .map(|&(d, f)| {
                t = t.seen(d, proto, f);
                t.phase(proto)
            })
            .collect()
    }

    #[test]
    fn tcp_phases_through_a_connection() {
        use Phase::*;
        assert_eq!(
            run(
                &[
                    (0, S),
                    (1, SA),
                    (0, A),
                    (1, A),
                    (0, FA),
                    (1, A),
                    (1, FA),
                    (0, A)
                ],
                PROTO_TCP
            ),
            [
                TcpSyn,
                TcpSyn,
                TcpEstablished,
                TcpEstablished,
                TcpClosing,
                TcpClosing,
                TcpClosed,
                TcpClosed
            ]
        );
        // A retransmitted SYN or a lone SYN+ACK is no handshake.
        assert_eq!(
            run(&[(0, S), (0, S), (1, SA), (1, SA)], PROTO_TCP),
            [TcpSyn; 4]
        );
        // A stray ACK one way is not established (nothing came back).
        assert_eq!(run(&[(0, A), (0, A)], PROTO_TCP), [TcpSyn; 2]);
        // Picked up mid-stream: established once data came back.
        assert_eq!(run(&[(1, A), (0, A)], PROTO_TCP), [TcpSyn, TcpEstablished]);
        // RST closes, whatever came before, and stays closed.
        assert_eq!(
            run(&[(0, S), (1, TCP_RST | TCP_ACK), (0, A)], PROTO_TCP),
            [TcpSyn, TcpClosed, TcpClosed]
        );
        // A FIN in the handshake already closes.
        assert_eq!(run(&[(0, S | TCP_FIN)], PROTO_TCP), [TcpClosing]);
    }

    #[test]
    fn datagram_phases() {
        use Phase::*;
        assert_eq!(
            run(&[(0, 0), (0, 0), (1, 0), (0, 0)], PROTO_UDP),
            [UdpUnreplied, UdpUnreplied, UdpReplied, UdpReplied]
        );
        assert_eq!(run(&[(1, 0)], PROTO_UDP), [UdpUnreplied]);
        assert_eq!(run(&[(0, 0), (1, 0)], PROTO_ICMP), [Icmp, Icmp]);
        assert_eq!(run(&[(0, 0)], PROTO_ICMPV6), [Icmp]);
        assert_eq!(run(&[(0, 0), (1, 0)], 47), [Other, Other]);
        // TCP flags mean nothing on other protocols.
        assert_eq!(
            run(&[(0, TCP_RST), (1, TCP_FIN)], PROTO_UDP),
            [UdpUnreplied, UdpReplied]
        );
    }

    #[test]
    fn two_partial_views_merge_into_the_whole() {
        // NAT: the outbound record sees direction 0, the inbound one direction 1.
        let pkts = [(0, S), (1, SA), (0, A), (1, A), (1, FA)];
        let (mut out, mut inb, mut all) = (Track::default(), Track::default(), Track::default());
        for &(d, f) in &pkts {
            all = all.seen(d, PROTO_TCP, f);
            if d == 0 {
                out = out.seen(d, PROTO_TCP, f);
            } else {
                inb = inb.seen(d, PROTO_TCP, f);
            }
        }
        assert_eq!(out.merge(inb), all);
        assert_eq!(out.phase(PROTO_TCP), Phase::TcpSyn, "one view alone");
        assert_eq!(all.phase(PROTO_TCP), Phase::TcpClosing);
        // The other side's FIN too: closed, though each view alone is only closing.
        let inb = inb.seen(1, PROTO_TCP, FA);
        let out = out.seen(0, PROTO_TCP, FA);
        assert_eq!(inb.phase(PROTO_TCP), Phase::TcpClosing);
        assert_eq!(out.merge(inb).phase(PROTO_TCP), Phase::TcpClosed);
        assert_eq!(Track(Track::MASK).0 & 0x80, 0);
    }

    #[test]
    fn legacy_records_keep_a_live_connection() {
        assert_eq!(Track::legacy(false).phase(PROTO_TCP), Phase::TcpEstablished);
        assert_eq!(Track::legacy(true).phase(PROTO_TCP), Phase::TcpClosing);
        assert_eq!(Track::legacy(false).phase(PROTO_UDP), Phase::UdpReplied);
    }

    #[test]
    fn defaults_are_conntracks() {
        let t = Timeouts::default();
        let ms = |p| t.of(p);
        assert_eq!(ms(Phase::TcpEstablished), 432_000_000);
        assert_eq!(ms(Phase::TcpSyn), 120_000);
        assert_eq!(ms(Phase::TcpClosing), 120_000);
        assert_eq!(ms(Phase::TcpClosed), 10_000);
        assert_eq!(ms(Phase::UdpUnreplied), 30_000);
        assert_eq!(ms(Phase::UdpReplied), 120_000);
        assert_eq!(ms(Phase::Icmp), 30_000);
        assert_eq!(ms(Phase::Other), 600_000);
        assert_eq!(t.short_ms(), 120_000);
        assert_eq!(
            t.for_track(Track::default().seen(0, PROTO_UDP, 0), PROTO_UDP),
            30_000
        );
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        #[serde(default, deserialize_with = "present")]
        timeouts: Option<crate::config::Object<TimeoutsConfig>>,
        #[serde(default, deserialize_with = "present")]
        idle_timeout_ms: Option<Int<1, 86_400_000>>,
        #[serde(default, deserialize_with = "present")]
        close_timeout_ms: Option<Int<1, 86_400_000>>,
    }

    fn resolve(v: Value, close_default: Option<u64>) -> Result<Timeouts, String> {
        let d: Doc = parse_nf(&v, "x config")?;
        Timeouts::resolve(
            d.timeouts.map(|t| t.0),
            Legacy {
                idle_ms: d.idle_timeout_ms.map(|x| x.0),
                close_ms: d.close_timeout_ms.map(|x| x.0),
                close_default_ms: close_default,
            },
        )
    }

    #[test]
    fn config_keys_older_keys_and_errors() {
        assert_eq!(resolve(json!({}), None).unwrap(), Timeouts::default());
        assert_eq!(
            resolve(json!({"timeouts": {}}), None).unwrap(),
            Timeouts::default()
        );
        let t = resolve(
            json!({"timeouts": {"tcp_established_ms": 3_600_000, "udp_unreplied_ms": 5000}}),
            None,
        )
        .unwrap();
        assert_eq!(
            (t.tcp_established_ms, t.udp_unreplied_ms, t.tcp_syn_ms),
            (3_600_000, 5000, 120_000)
        );
        // The older key means what it meant: every phase.
        assert_eq!(
            resolve(json!({"idle_timeout_ms": 60000}), None).unwrap(),
            Timeouts::uniform(60000)
        );
        // ... but the closing ones of an NF that had close_timeout_ms.
        let t = resolve(json!({"idle_timeout_ms": 60000}), Some(2000)).unwrap();
        assert_eq!(
            (t.tcp_established_ms, t.tcp_closing_ms, t.tcp_closed_ms),
            (60000, 2000, 2000)
        );
        let t = resolve(json!({"close_timeout_ms": 500}), Some(2000)).unwrap();
        assert_eq!((t.tcp_established_ms, t.tcp_closing_ms), (432_000_000, 500));
        for (v, want) in [
            (
                json!({"timeouts": {}, "idle_timeout_ms": 5}),
                "idle_timeout_ms: not together with timeouts (timeouts sets each phase; \
                 idle_timeout_ms is the older key, give one of them)",
            ),
            (
                json!({"timeouts": {"tcp_syn_ms": 5}, "close_timeout_ms": 5}),
                "close_timeout_ms: not together with timeouts (timeouts sets each phase; \
                 close_timeout_ms is the older key, give one of them)",
            ),
            (
                json!({"timeouts": {"tcp_establised_ms": 5}}),
                "timeouts: unknown field \"tcp_establised_ms\" (allowed: tcp_syn_ms, \
                 tcp_established_ms, tcp_closing_ms, tcp_closed_ms, udp_unreplied_ms, \
                 udp_replied_ms, icmp_ms, other_ms)",
            ),
            (
                json!({"timeouts": {"icmp_ms": 0}}),
                "timeouts.icmp_ms must be an integer in [1, 2592000000]",
            ),
            (
                json!({"timeouts": {"icmp_ms": null}}),
                "timeouts.icmp_ms must be an integer in [1, 2592000000]",
            ),
            (json!({"timeouts": [1]}), "timeouts must be an object"),
            (json!({"timeouts": null}), "timeouts must be an object"),
        ] {
            assert_eq!(resolve(v.clone(), Some(2000)).unwrap_err(), want, "{v}");
        }
    }
}
