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
    /// Only the initiator sends (NAT: return traffic would need the translated address).
    pub one_way: bool,
}

fn frame(flow: u32, i: u32, n: u32, s: &Shape) -> Vec<u8> {
    let client = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + 1 + flow / 30_000));
    let server = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1 + (flow % 200) as u8));
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
    let t = Transport::Tcp {
        seq: i,
        ack: 0,
        flags,
    };
    let payload_len = s.frame_len.saturating_sub(54);
    let payload = vec![b'x'; payload_len];
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
