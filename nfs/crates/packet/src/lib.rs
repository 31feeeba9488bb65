//! Checked packet views for the UNO network functions.
//!
//! [`Parsed::new_checked`] validates an Ethernet frame (with up to two VLAN tags, 802.1Q/802.1ad
//! QinQ), an IPv4 or IPv6 header and a TCP, UDP or ICMP/ICMPv6 header, and returns a small `Copy`
//! representation of the fields and offsets. Parsing never panics: malformed input yields a
//! [`ParseError`] that the runtime counts before dropping the packet.
//!
//! Rewrites ([`rewrite`]) change addresses and ports in place and update the IPv4 header checksum
//! and the TCP/UDP checksum incrementally (RFC 1624), so no full recomputation is needed.
//! Flow keys ([`FlowKey`]) give the 5-tuple, a canonical bidirectional form and a stable hash that
//! every instance computes identically (used in state-tier key names).

pub mod build;
pub mod checksum;
pub mod flow;
pub mod rewrite;

pub use flow::{Direction, FlowKey};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
pub const ETHERTYPE_VLAN: u16 = 0x8100;
pub const ETHERTYPE_QINQ: u16 = 0x88a8;
pub const PROTO_ICMP: u8 = 1;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
pub const PROTO_ICMPV6: u8 = 58;

pub const TCP_FIN: u8 = 0x01;
pub const TCP_SYN: u8 = 0x02;
pub const TCP_RST: u8 = 0x04;
pub const TCP_PSH: u8 = 0x08;
pub const TCP_ACK: u8 = 0x10;

/// Why a frame was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// Shorter than the header it claims to carry.
    Truncated,
    /// A length or version field is inconsistent.
    BadHeader,
    /// Not IPv4/IPv6 (e.g. ARP): valid, but not something an NF parses.
    UnsupportedEthertype(u16),
    /// More than two VLAN tags.
    TooManyVlanTags,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseError::Truncated => write!(f, "truncated packet"),
            ParseError::BadHeader => write!(f, "malformed header"),
            ParseError::UnsupportedEthertype(t) => write!(f, "unsupported ethertype 0x{t:04x}"),
            ParseError::TooManyVlanTags => write!(f, "more than two VLAN tags"),
        }
    }
}

impl std::error::Error for ParseError {}

/// Transport header summary (validated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4 {
    Tcp {
        src_port: u16,
        dst_port: u16,
        seq: u32,
        ack: u32,
        flags: u8,
        window: u16,
    },
    Udp {
        src_port: u16,
        dst_port: u16,
    },
    Icmp {
        icmp_type: u8,
        code: u8,
        /// Echo identifier (0 for non-echo messages); used as the "port" in flow keys.
        ident: u16,
    },
    /// Another IP protocol or a non-first fragment: no transport fields.
    Other,
}

/// Validated representation of one frame: field values and offsets into the buffer it was parsed
/// from. Offsets stay valid as long as the headers before them are not resized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    /// VLAN IDs (outer first); 0 where absent.
    pub vlans: [u16; 2],
    pub vlan_count: u8,
    pub ethertype: u16,
    pub l3_offset: usize,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// IP protocol / IPv6 next header of the transport.
    pub proto: u8,
    pub ttl: u8,
    /// True for IPv4 fragments other than the first (no transport header present).
    pub non_first_fragment: bool,
    pub l4_offset: usize,
    pub l4: L4,
    pub payload_offset: usize,
    pub payload_len: usize,
    /// Frame length up to the end of the IP datagram (excludes Ethernet padding).
    pub frame_len: usize,
}

fn be16(b: &[u8], at: usize) -> Result<u16, ParseError> {
    b.get(at..at + 2)
        .map(|s| u16::from_be_bytes([s[0], s[1]]))
        .ok_or(ParseError::Truncated)
}

fn be32(b: &[u8], at: usize) -> Result<u32, ParseError> {
    b.get(at..at + 4)
        .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or(ParseError::Truncated)
}

impl Parsed {
    /// Parse and validate `frame`; never panics.
    pub fn new_checked(frame: &[u8]) -> Result<Parsed, ParseError> {
        let mut off = 12;
        let mut ethertype = be16(frame, off)?;
        off += 2;
        let mut vlans = [0u16; 2];
        let mut vlan_count = 0u8;
        while ethertype == ETHERTYPE_VLAN || ethertype == ETHERTYPE_QINQ {
            if vlan_count == 2 {
                return Err(ParseError::TooManyVlanTags);
            }
            vlans[vlan_count as usize] = be16(frame, off)? & 0x0fff;
            vlan_count += 1;
            ethertype = be16(frame, off + 2)?;
            off += 4;
        }
        let l3 = off;
        let (src, dst, proto, ttl, l4_off, ip_end, non_first) = match ethertype {
            ETHERTYPE_IPV4 => {
                let h = frame.get(l3..l3 + 20).ok_or(ParseError::Truncated)?;
                if h[0] >> 4 != 4 {
                    return Err(ParseError::BadHeader);
                }
                let ihl = ((h[0] & 0x0f) as usize) * 4;
                let total = u16::from_be_bytes([h[2], h[3]]) as usize;
                if ihl < 20 || total < ihl {
                    return Err(ParseError::BadHeader);
                }
                if frame.len() < l3 + total {
                    return Err(ParseError::Truncated);
                }
                let frag = u16::from_be_bytes([h[6], h[7]]);
                let src = Ipv4Addr::new(h[12], h[13], h[14], h[15]);
                let dst = Ipv4Addr::new(h[16], h[17], h[18], h[19]);
                (
                    IpAddr::V4(src),
                    IpAddr::V4(dst),
                    h[9],
                    h[8],
                    l3 + ihl,
                    l3 + total,
                    frag & 0x1fff != 0,
                )
            }
            ETHERTYPE_IPV6 => {
                let h = frame.get(l3..l3 + 40).ok_or(ParseError::Truncated)?;
                if h[0] >> 4 != 6 {
                    return Err(ParseError::BadHeader);
                }
                let plen = u16::from_be_bytes([h[4], h[5]]) as usize;
                if frame.len() < l3 + 40 + plen {
                    return Err(ParseError::Truncated);
                }
                let mut s = [0u8; 16];
                let mut d = [0u8; 16];
                s.copy_from_slice(&h[8..24]);
                d.copy_from_slice(&h[24..40]);
                (
                    IpAddr::V6(Ipv6Addr::from(s)),
                    IpAddr::V6(Ipv6Addr::from(d)),
                    h[6],
                    h[7],
                    l3 + 40,
                    l3 + 40 + plen,
                    false,
                )
            }
            other => return Err(ParseError::UnsupportedEthertype(other)),
        };
        let seg = &frame[l4_off..ip_end];
        let (l4, hlen) = if non_first {
            (L4::Other, 0)
        } else {
            match proto {
                PROTO_TCP => {
                    if seg.len() < 20 {
                        return Err(ParseError::Truncated);
                    }
                    let doff = ((seg[12] >> 4) as usize) * 4;
                    if doff < 20 || doff > seg.len() {
                        return Err(ParseError::BadHeader);
                    }
                    (
                        L4::Tcp {
                            src_port: be16(seg, 0)?,
                            dst_port: be16(seg, 2)?,
                            seq: be32(seg, 4)?,
                            ack: be32(seg, 8)?,
                            flags: seg[13],
                            window: be16(seg, 14)?,
                        },
                        doff,
                    )
                }
                PROTO_UDP => {
                    if seg.len() < 8 {
                        return Err(ParseError::Truncated);
                    }
                    let ulen = be16(seg, 4)? as usize;
                    if ulen < 8 || ulen > seg.len() {
                        return Err(ParseError::BadHeader);
                    }
                    (
                        L4::Udp {
                            src_port: be16(seg, 0)?,
                            dst_port: be16(seg, 2)?,
                        },
                        8,
                    )
                }
                PROTO_ICMP | PROTO_ICMPV6 => {
                    if seg.len() < 8 {
                        return Err(ParseError::Truncated);
                    }
                    let t = seg[0];
                    let echo = matches!(t, 0 | 8 | 128 | 129);
                    (
                        L4::Icmp {
                            icmp_type: t,
                            code: seg[1],
                            ident: if echo { be16(seg, 4)? } else { 0 },
                        },
                        8,
                    )
                }
                _ => (L4::Other, 0),
            }
        };
        Ok(Parsed {
            vlans,
            vlan_count,
            ethertype,
            l3_offset: l3,
            src,
            dst,
            proto,
            ttl,
            non_first_fragment: non_first,
            l4_offset: l4_off,
            l4,
            payload_offset: l4_off + hlen,
            payload_len: ip_end - l4_off - hlen,
            frame_len: ip_end,
        })
    }

    /// Source and destination ports (ICMP echo: identifier twice; otherwise 0).
    pub fn ports(&self) -> (u16, u16) {
        match self.l4 {
            L4::Tcp {
                src_port, dst_port, ..
            }
            | L4::Udp { src_port, dst_port } => (src_port, dst_port),
            L4::Icmp { ident, .. } => (ident, ident),
            L4::Other => (0, 0),
        }
    }

    /// TCP flags, or 0 for other protocols.
    pub fn tcp_flags(&self) -> u8 {
        match self.l4 {
            L4::Tcp { flags, .. } => flags,
            _ => 0,
        }
    }

    /// The directional 5-tuple of this packet.
    pub fn flow_key(&self) -> FlowKey {
        let (sp, dp) = self.ports();
        FlowKey {
            src: self.src,
            dst: self.dst,
            src_port: sp,
            dst_port: dp,
            proto: self.proto,
        }
    }

    /// Transport payload of `frame` (the buffer this was parsed from).
    pub fn payload<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        &frame[self.payload_offset..self.payload_offset + self.payload_len]
    }
}

#[cfg(test)]
mod tests;
