//! Frame construction for tests, traffic generation and benchmarks (IPv4/IPv6, TCP/UDP), with
//! correct checksums.

use crate::checksum::{checksum, ones_sum, pseudo_header_sum};
use crate::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, PROTO_TCP, PROTO_UDP};
use std::net::IpAddr;

/// Transport to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Tcp { seq: u32, ack: u32, flags: u8 },
    Udp,
}

/// Description of one frame.
#[derive(Debug, Clone)]
pub struct FrameSpec<'a> {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub vlans: &'a [u16],
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub transport: Transport,
    pub payload: &'a [u8],
}

impl<'a> FrameSpec<'a> {
    /// A frame with default MACs, no VLAN and the given addressing.
    pub fn new(
        src: IpAddr,
        dst: IpAddr,
        src_port: u16,
        dst_port: u16,
        transport: Transport,
    ) -> Self {
        FrameSpec {
            src_mac: [0x02, 0, 0, 0, 0, 1],
            dst_mac: [0x02, 0, 0, 0, 0, 2],
            vlans: &[],
            src,
            dst,
            src_port,
            dst_port,
            transport,
            payload: &[],
        }
    }

    /// Build the frame into `out` (cleared first, allocation reused).
    pub fn build_into(&self, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&self.dst_mac);
        out.extend_from_slice(&self.src_mac);
        for (i, v) in self.vlans.iter().enumerate() {
            let tpid: u16 = if i == 0 && self.vlans.len() == 2 {
                0x88a8
            } else {
                0x8100
            };
            out.extend_from_slice(&tpid.to_be_bytes());
            out.extend_from_slice(&(v & 0x0fff).to_be_bytes());
        }
        let (l4_hdr, proto) = match self.transport {
            Transport::Tcp { .. } => (20usize, PROTO_TCP),
            Transport::Udp => (8usize, PROTO_UDP),
        };
        let l4_len = l4_hdr + self.payload.len();
        let (src_b, dst_b): (Vec<u8>, Vec<u8>) = match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => (s.octets().to_vec(), d.octets().to_vec()),
            (IpAddr::V6(s), IpAddr::V6(d)) => (s.octets().to_vec(), d.octets().to_vec()),
            _ => panic!("FrameSpec: mixed address families"),
        };
        let l3 = out.len() + 2;
        if self.src.is_ipv4() {
            out.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
            let total = (20 + l4_len) as u16;
            out.extend_from_slice(&[0x45, 0]);
            out.extend_from_slice(&total.to_be_bytes());
            out.extend_from_slice(&[0, 0, 0x40, 0, 64, proto, 0, 0]);
            out.extend_from_slice(&src_b);
            out.extend_from_slice(&dst_b);
            let c = checksum(&out[l3..l3 + 20]);
            out[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        } else {
            out.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
            out.extend_from_slice(&[0x60, 0, 0, 0]);
            out.extend_from_slice(&(l4_len as u16).to_be_bytes());
            out.extend_from_slice(&[proto, 64]);
            out.extend_from_slice(&src_b);
            out.extend_from_slice(&dst_b);
        }
        let l4 = out.len();
        out.extend_from_slice(&self.src_port.to_be_bytes());
        out.extend_from_slice(&self.dst_port.to_be_bytes());
        let csum_at = match self.transport {
            Transport::Tcp { seq, ack, flags } => {
                out.extend_from_slice(&seq.to_be_bytes());
                out.extend_from_slice(&ack.to_be_bytes());
                out.extend_from_slice(&[0x50, flags, 0xff, 0xff, 0, 0, 0, 0]);
                l4 + 16
            }
            Transport::Udp => {
                out.extend_from_slice(&(l4_len as u16).to_be_bytes());
                out.extend_from_slice(&[0, 0]);
                l4 + 6
            }
        };
        out.extend_from_slice(self.payload);
        let ph = pseudo_header_sum(&src_b, &dst_b, proto, l4_len as u32);
        let mut c = !(ones_sum(&out[l4..], ph) as u16);
        if c == 0 && proto == PROTO_UDP {
            c = 0xffff;
        }
        out[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
    }

    /// Build the frame into a new vector.
    pub fn build(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.build_into(&mut v);
        v
    }
}

/// Verify the IPv4 header checksum and the TCP/UDP checksum of `frame` (true if all hold).
pub fn checksums_valid(frame: &[u8]) -> bool {
    let Ok(p) = crate::Parsed::new_checked(frame) else {
        return false;
    };
    let (s, d): (Vec<u8>, Vec<u8>) = match (p.src, p.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            if ones_sum(&frame[p.l3_offset..p.l4_offset], 0) != 0xffff {
                return false;
            }
            (s.octets().to_vec(), d.octets().to_vec())
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => (s.octets().to_vec(), d.octets().to_vec()),
        _ => return false,
    };
    if p.proto != PROTO_TCP && p.proto != PROTO_UDP {
        return true;
    }
    let seg = &frame[p.l4_offset..p.frame_len];
    if p.proto == PROTO_UDP && p.src.is_ipv4() && seg[6] == 0 && seg[7] == 0 {
        return true;
    }
    ones_sum(seg, pseudo_header_sum(&s, &d, p.proto, seg.len() as u32)) == 0xffff
}
