//! Synthetic workloads fed from memory: TCP connections (handshake, data both ways, FIN),
//! interleaved round-robin over a window of concurrently active flows.

use packet::build::{FrameSpec, Transport};
use packet::{TCP_ACK, TCP_FIN, TCP_PSH, TCP_SYN};
use std::net::{IpAddr, Ipv4Addr};

/// Shape of a workload.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub flows: u32,
    pub pkts_per_flow: u32,
    /// Flows active at the same time (round-robin among them).
    pub window: u32,
    /// Ethernet frame length without FCS (60 = 64 B on the wire, 1514 = 1500 B IP).
    pub frame_len: usize,
    /// Only the initiator sends (NAT, LB: return traffic would need the translated address).
    pub one_way: bool,
    /// Every flow goes to this server (a load balancer's VIP) instead of 200 servers.
    pub server: Option<Ipv4Addr>,
    /// Payload of the client's first data packet (an L7 firewall classifies it).
    pub first_payload: Option<&'static [u8]>,
}

const CLIENT_ISN: u32 = 1000;
const SERVER_ISN: u32 = 5000;

/// Sequence number of packet `i` of a flow: each direction's stream is contiguous (an IPS
/// reassembles it), data packets of `len` bytes, the client's first one `first` bytes.
fn seq(i: u32, from_server: bool, s: &Shape, len: u32, first: u32) -> u32 {
    if i == 0 {
        return CLIENT_ISN;
    }
    if i == 1 && !s.one_way {
        return SERVER_ISN;
    }
    if from_server {
        // Server data packets are i = 3, 5, ...: (i - 3) / 2 before this one.
        return SERVER_ISN + 1 + (i - 3) / 2 * len;
    }
    // Client data packets: i = 2, 4, ... (two-way) or 1, 2, ... (one-way).
    let k = if s.one_way { i - 1 } else { (i - 2) / 2 };
    if k == 0 {
        CLIENT_ISN + 1
    } else {
        CLIENT_ISN + 1 + first + (k - 1) * len
    }
}

fn frame(flow: u32, i: u32, n: u32, s: &Shape) -> Vec<u8> {
    let client = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + 1 + flow / 30_000));
    let server = IpAddr::V4(
        s.server
            .unwrap_or_else(|| Ipv4Addr::new(192, 0, 2, 1 + (flow % 200) as u8)),
    );
    let cport = 10_000 + (flow % 30_000) as u16;
    let from_server = !s.one_way && i > 0 && i % 2 == 1;
    let flags = if i == 0 {
        TCP_SYN
    } else if i == 1 && !s.one_way {
        TCP_SYN | TCP_ACK
    } else if i + 1 == n {
        TCP_FIN | TCP_ACK
    } else {
        TCP_PSH | TCP_ACK
    };
    let payload_len = s.frame_len.saturating_sub(54);
    let first_data = if s.one_way { 1 } else { 2 };
    let payload = match s.first_payload {
        Some(p) if i == first_data => p.to_vec(),
        _ if flags & TCP_SYN != 0 => vec![],
        _ => vec![b'x'; payload_len],
    };
    let first_len = s.first_payload.map_or(payload_len, |p| p.len()) as u32;
    let t = Transport::Tcp {
        seq: seq(i, from_server, s, payload_len as u32, first_len),
        ack: 0,
        flags,
    };
    let mut spec = if from_server {
        FrameSpec::new(server, client, 80, cport, t)
    } else {
        FrameSpec::new(client, server, cport, 80, t)
    };
    spec.payload = &payload;
    spec.build()
}

/// All frames of the workload in arrival order.
pub fn frames(s: &Shape) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity((s.flows * s.pkts_per_flow) as usize);
    let mut next_flow = 0u32;
    let mut active: Vec<(u32, u32)> = Vec::new(); // (flow, next packet index)
    while next_flow < s.flows || !active.is_empty() {
        while active.len() < s.window as usize && next_flow < s.flows {
            active.push((next_flow, 0));
            next_flow += 1;
        }
        let mut k = 0;
        while k < active.len() {
            let (f, i) = active[k];
            out.push(frame(f, i, s.pkts_per_flow, s));
            if i + 1 == s.pkts_per_flow {
                active.swap_remove(k);
            } else {
                active[k].1 += 1;
                k += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use packet::{Parsed, L4};
    use std::collections::HashMap;

    /// Each direction's stream is contiguous, so an IPS reassembles it without gaps.
    #[test]
    fn sequence_numbers_are_contiguous_per_direction() {
        for (one_way, first) in [(false, None), (true, None), (false, Some(&b"GET / x"[..]))] {
            let s = Shape {
                flows: 3,
                pkts_per_flow: 9,
                window: 2,
                frame_len: 60,
                one_way,
                server: None,
                first_payload: first,
            };
            let mut next: HashMap<_, u32> = HashMap::new();
            for f in frames(&s) {
                let p = Parsed::new_checked(&f).unwrap();
                let L4::Tcp { seq, flags, .. } = p.l4 else {
                    panic!()
                };
                let k = p.flow_key();
                if flags & TCP_SYN != 0 {
                    next.insert(k, seq.wrapping_add(1));
                    continue;
                }
                let want = next[&k];
                assert_eq!(seq, want, "{k} one_way {one_way}");
                let fin = (flags & TCP_FIN != 0) as u32;
                next.insert(k, seq + p.payload_len as u32 + fin);
            }
        }
    }
}
