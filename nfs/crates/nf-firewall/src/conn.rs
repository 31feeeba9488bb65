//! TCP connection tracking per direction (thesis Algorithm 4): pure state transitions.

use nfcore::Track;
use packet::{Direction, TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN};

/// First byte of a record since tracks are kept (an older record starts with its phase, 1-4).
const VERSION_1: u8 = 0x81;

/// Connection phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Initiator sent SYN.
    SynSent = 1,
    /// Responder answered SYN+ACK.
    SynRecv = 2,
    Established = 3,
    /// A FIN was seen.
    Closing = 4,
}

/// The state kept in the tier per connection (canonical key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnState {
    pub phase: Phase,
    /// Direction (relative to the canonical key) of the packet that opened the connection.
    pub initiator: Direction,
    /// When the idle timer was last moved (ms).
    pub refreshed_ms: u64,
    /// What the connection's packets showed (directions: the canonical key's 0, reverse 1):
    /// its timeout ([`nfcore::Timeouts::for_track`]).
    pub track: Track,
}

impl ConnState {
    /// `[0x81, phase, initiator, track, refreshed_ms (8, LE)]`.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![
            VERSION_1,
            self.phase as u8,
            (self.initiator == Direction::Reverse) as u8,
            self.track.0,
        ];
        v.extend_from_slice(&self.refreshed_ms.to_le_bytes());
        v
    }

    /// None for anything that is not a valid encoding (treated as no state). A record of the
    /// older layout (`[phase, initiator, refreshed_ms]`, no track) decodes with the track its
    /// phase implies ([`Track::legacy`]).
    pub fn decode(b: &[u8]) -> Option<ConnState> {
        match (b.len(), b.first()) {
            (12, Some(&VERSION_1)) => {
                let mut st = Self::decode_v0(&[&b[1..3], &b[4..]].concat())?;
                if b[3] & !Track::MASK != 0 {
                    return None;
                }
                st.track = Track(b[3]);
                Some(st)
            }
            (10, _) => {
                let mut st = Self::decode_v0(b)?;
                let init = (st.initiator == Direction::Reverse) as usize;
                st.track = match st.phase {
                    Phase::SynSent => Track(Track::SEEN[init]),
                    Phase::SynRecv => Track(Track::SEEN[0] | Track::SEEN[1]),
                    Phase::Established => Track::legacy(false),
                    Phase::Closing => Track::legacy(true),
                };
                Some(st)
            }
            _ => None,
        }
    }

    fn decode_v0(b: &[u8]) -> Option<ConnState> {
        if b.len() != 10 {
            return None;
        }
        let phase = match b[0] {
            1 => Phase::SynSent,
            2 => Phase::SynRecv,
            3 => Phase::Established,
            4 => Phase::Closing,
            _ => return None,
        };
        let initiator = match b[1] {
            0 => Direction::Forward,
            1 => Direction::Reverse,
            _ => return None,
        };
        let mut t = [0u8; 8];
        t.copy_from_slice(&b[2..10]);
        Some(ConnState {
            phase,
            initiator,
            refreshed_ms: u64::from_le_bytes(t),
            track: Track::default(),
        })
    }
}

/// Outcome of one packet on an existing connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Forward; the connection continues in this phase.
    Allow(Phase),
    /// Forward and forget the connection (RST).
    AllowAndClose,
    /// Drop; state unchanged.
    Deny,
}

/// Transition for a TCP packet with `flags` going `dir` on a connection in `st`.
pub fn tcp_step(st: &ConnState, dir: Direction, flags: u8) -> Step {
    let from_initiator = dir == st.initiator;
    if flags & TCP_RST != 0 {
        return Step::AllowAndClose;
    }
    match st.phase {
        Phase::SynSent => {
            if from_initiator && flags & TCP_SYN != 0 && flags & TCP_ACK == 0 {
                Step::Allow(Phase::SynSent) // retransmitted SYN
            } else if !from_initiator && flags & (TCP_SYN | TCP_ACK) == TCP_SYN | TCP_ACK {
                Step::Allow(Phase::SynRecv)
            } else {
                Step::Deny
            }
        }
        Phase::SynRecv => {
            if from_initiator && flags & TCP_ACK != 0 && flags & TCP_SYN == 0 {
                Step::Allow(if flags & TCP_FIN != 0 {
                    Phase::Closing
                } else {
                    Phase::Established
                })
            } else if flags & TCP_SYN != 0 {
                Step::Allow(Phase::SynRecv) // retransmitted SYN / SYN+ACK
            } else {
                Step::Deny
            }
        }
        Phase::Established => {
            if flags & TCP_SYN != 0 {
                Step::Deny
            } else if flags & TCP_FIN != 0 {
                Step::Allow(Phase::Closing)
            } else {
                Step::Allow(Phase::Established)
            }
        }
        Phase::Closing => {
            if flags & TCP_SYN != 0 {
                Step::Deny
            } else {
                Step::Allow(Phase::Closing)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Direction::*;

    #[test]
    fn handshake_data_close() {
        let mut st = ConnState {
            phase: Phase::SynSent,
            initiator: Reverse,
            refreshed_ms: 0,
            track: Track(3),
        };
        assert_eq!(tcp_step(&st, Reverse, TCP_ACK), Step::Deny);
        assert_eq!(
            tcp_step(&st, Forward, TCP_ACK),
            Step::Deny,
            "responder data before SYN+ACK"
        );
        assert_eq!(
            tcp_step(&st, Forward, TCP_SYN | TCP_ACK),
            Step::Allow(Phase::SynRecv)
        );
        st.phase = Phase::SynRecv;
        assert_eq!(
            tcp_step(&st, Reverse, TCP_ACK),
            Step::Allow(Phase::Established)
        );
        st.phase = Phase::Established;
        assert_eq!(
            tcp_step(&st, Forward, TCP_ACK),
            Step::Allow(Phase::Established)
        );
        assert_eq!(tcp_step(&st, Forward, TCP_SYN), Step::Deny);
        assert_eq!(
            tcp_step(&st, Forward, TCP_FIN | TCP_ACK),
            Step::Allow(Phase::Closing)
        );
        assert_eq!(tcp_step(&st, Forward, TCP_RST), Step::AllowAndClose);
        assert_eq!(ConnState::decode(&st.encode()), Some(st));
        assert_eq!(ConnState::decode(&[9; 10]), None);
        assert_eq!(ConnState::decode(&[1]), None);
        // A record of the older layout still decodes, with the track its phase implies.
        let mut old = vec![3u8, 1];
        old.extend_from_slice(&77u64.to_le_bytes());
        let st = ConnState::decode(&old).unwrap();
        assert_eq!(
            (st.phase, st.initiator, st.refreshed_ms),
            (Phase::Established, Reverse, 77)
        );
        assert_eq!(st.track, Track::legacy(false));
        let mut bad = st.encode();
        bad[3] = 0x80;
        assert_eq!(ConnState::decode(&bad), None);
    }
}
