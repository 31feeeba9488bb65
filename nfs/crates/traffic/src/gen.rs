//! Frame sequence of the generator (pure: timestamps are filled in at send time).

use crate::{Marker, MARKER_LEN};
use packet::build::{FrameSpec, Transport};
use packet::{TCP_ACK, TCP_FIN, TCP_PSH, TCP_SYN};
use std::net::IpAddr;

/// What to generate.
#[derive(Debug, Clone)]
pub struct GenConfig {
    pub run: u32,
    pub flows: u32,
    /// Data packets per flow.
    pub pkts: u32,
    pub tcp: bool,
    /// Ethernet frame length without FCS (at least the headers plus the marker).
    pub frame_len: usize,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub dst_port: u16,
}

/// One frame to send; `data` frames get their marker's timestamp at send time.
#[derive(Debug, Clone)]
pub struct GenFrame {
    pub frame: Vec<u8>,
    /// Offset of the marker in `frame` (data packets only).
    pub marker_at: Option<usize>,
}

fn spec<'a>(
    c: &GenConfig,
    flow: u32,
    reverse: bool,
    t: Transport,
    payload: &'a [u8],
) -> FrameSpec<'a> {
    let sport = 10_000 + (flow % 50_000) as u16;
    let mut s = if reverse {
        FrameSpec::new(c.dst, c.src, c.dst_port, sport, t)
    } else {
        FrameSpec::new(c.src, c.dst, sport, c.dst_port, t)
    };
    if reverse {
        s.src_mac = c.dst_mac;
        s.dst_mac = c.src_mac;
    } else {
        s.src_mac = c.src_mac;
        s.dst_mac = c.dst_mac;
    }
    s.payload = payload;
    s
}

/// Frames of all flows, interleaved round-robin, built as they are taken (a run of many flows
/// and packets never sits in memory whole). TCP flows: SYN, SYN+ACK (from the server side), ACK,
/// data..., FIN (client), FIN+ACK (server). Data packets carry a [`Marker`]. TCP sequence numbers
/// are byte offsets as a real stream's (the SYN takes 0, data starts at 1 and is contiguous), so a
/// reassembling NF (the IPS) scans every payload byte. [`frame_count`] frames in all.
pub fn frames(c: &GenConfig) -> impl Iterator<Item = GenFrame> + '_ {
    let handshakes = if c.tcp { c.flows } else { 0 };
    let open = (0..handshakes).flat_map(move |f| {
        [
            ctrl(c, f, false, 0, TCP_SYN),
            ctrl(c, f, true, 0, TCP_SYN | TCP_ACK),
            ctrl(c, f, false, 1, TCP_ACK),
        ]
    });
    let data = (0..c.pkts).flat_map(move |seq| (0..c.flows).map(move |f| data(c, f, seq)));
    let close = (0..handshakes).flat_map(move |f| {
        [
            ctrl(c, f, false, data_seq(c, c.pkts), TCP_FIN | TCP_ACK),
            ctrl(c, f, true, 1, TCP_FIN | TCP_ACK),
        ]
    });
    open.chain(data).chain(close)
}

/// How many frames [`frames`] yields.
pub fn frame_count(c: &GenConfig) -> u64 {
    let per_flow = u64::from(c.pkts) + if c.tcp { 5 } else { 0 };
    u64::from(c.flows) * per_flow
}

fn payload_len(c: &GenConfig) -> usize {
    let hdr = if c.tcp { 54 } else { 42 };
    c.frame_len.saturating_sub(hdr).max(MARKER_LEN)
}

fn data_seq(c: &GenConfig, i: u32) -> u32 {
    1u32.wrapping_add(i.wrapping_mul(payload_len(c) as u32))
}

fn ctrl(c: &GenConfig, flow: u32, reverse: bool, seq: u32, flags: u8) -> GenFrame {
    let t = Transport::Tcp { seq, ack: 0, flags };
    GenFrame {
        frame: spec(c, flow, reverse, t, &[]).build(),
        marker_at: None,
    }
}

fn data(c: &GenConfig, flow: u32, seq: u32) -> GenFrame {
    let plen = payload_len(c);
    let mut payload = vec![0u8; plen];
    Marker {
        run: c.run,
        flow,
        seq,
        ts_ns: 0,
    }
    .write(&mut payload);
    let t = if c.tcp {
        Transport::Tcp {
            seq: data_seq(c, seq),
            ack: 0,
            flags: TCP_PSH | TCP_ACK,
        }
    } else {
        Transport::Udp
    };
    let frame = spec(c, flow, false, t, &payload).build();
    let at = frame.len() - plen;
    GenFrame {
        frame,
        marker_at: Some(at),
    }
}

/// Write the send time into a data frame's marker and fix the transport checksum incrementally.
pub fn stamp(g: &mut GenFrame, ts_ns: u64) {
    let Some(at) = g.marker_at else { return };
    let Ok(p) = packet::Parsed::new_checked(&g.frame) else {
        return;
    };
    let csum_at = p.l4_offset + if p.proto == packet::PROTO_TCP { 16 } else { 6 };
    let old = g.frame[at + 16..at + 24].to_vec();
    g.frame[at + 16..at + 24].copy_from_slice(&ts_ns.to_be_bytes());
    let hc = u16::from_be_bytes([g.frame[csum_at], g.frame[csum_at + 1]]);
    let mut new = packet::checksum::update_bytes(hc, &old, &ts_ns.to_be_bytes());
    if new == 0 && p.proto == packet::PROTO_UDP {
        new = 0xffff;
    }
    // Marker offsets are even (headers are 42 or 54 bytes plus VLAN-free), so 16-bit words align.
    g.frame[csum_at..csum_at + 2].copy_from_slice(&new.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_sequence_numbers_are_contiguous_byte_offsets() {
        let c = GenConfig {
            run: 1,
            flows: 2,
            pkts: 3,
            tcp: true,
            frame_len: 100,
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            dst_port: 80,
        };
        let fr: Vec<GenFrame> = frames(&c).collect();
        assert_eq!(fr.len(), 2 * 3 + 2 * 5);
        assert_eq!(frame_count(&c), fr.len() as u64);
        // Client side of flow 0: SYN 0, ACK 1, data 1, 47, 93 (46-byte payloads), FIN 139.
        let seqs: Vec<(u32, usize)> = fr
            .iter()
            .filter_map(|g| {
                let p = packet::Parsed::new_checked(&g.frame).unwrap();
                let t = &g.frame[p.l4_offset..];
                let sport = u16::from_be_bytes([t[0], t[1]]);
                (sport == 10_000).then(|| {
                    (
                        u32::from_be_bytes(t[4..8].try_into().unwrap()),
                        p.payload(&g.frame).len(),
                    )
                })
            })
            .collect();
        assert_eq!(
            seqs,
            vec![(0, 0), (1, 0), (1, 46), (47, 46), (93, 46), (139, 0)]
        );
    }
}
