//! In-place header rewrites with incremental checksum updates (RFC 1624).
//!
//! All functions take the frame and the [`Parsed`] view obtained from it, and return the updated
//! view. They only touch fixed-size fields, so offsets stay valid.

use crate::checksum::{update16, update_bytes};
use crate::{Parsed, L4, PROTO_TCP, PROTO_UDP};
use std::net::IpAddr;

fn rd16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn wr16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Offset of the TCP/UDP checksum field, if the transport has one that must be updated.
fn l4_csum_offset(frame: &[u8], p: &Parsed) -> Option<usize> {
    match (p.l4, p.proto) {
        (L4::Tcp { .. }, PROTO_TCP) => Some(p.l4_offset + 16),
        (L4::Udp { .. }, PROTO_UDP) => {
            let at = p.l4_offset + 6;
            // IPv4 UDP checksum 0 means "none": keep it 0.
            if p.src.is_ipv4() && rd16(frame, at) == 0 {
                None
            } else {
                Some(at)
            }
        }
        _ => None,
    }
}

/// Error for a rewrite that does not fit the packet (address family or protocol mismatch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RewriteError(pub &'static str);

impl std::fmt::Display for RewriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for RewriteError {}

fn set_addr(
    frame: &mut [u8],
    p: &Parsed,
    new: IpAddr,
    is_src: bool,
) -> Result<Parsed, RewriteError> {
    let mut out = *p;
    let l4c = l4_csum_offset(frame, p);
    match (if is_src { p.src } else { p.dst }, new) {
        (IpAddr::V4(old), IpAddr::V4(n)) => {
            let at = p.l3_offset + if is_src { 12 } else { 16 };
            let hc_at = p.l3_offset + 10;
            let hc = update_bytes(rd16(frame, hc_at), &old.octets(), &n.octets());
            wr16(frame, hc_at, hc);
            if let Some(c) = l4c {
                let v = update_bytes(rd16(frame, c), &old.octets(), &n.octets());
                wr16(frame, c, v);
            }
            frame[at..at + 4].copy_from_slice(&n.octets());
        }
        (IpAddr::V6(old), IpAddr::V6(n)) => {
            let at = p.l3_offset + if is_src { 8 } else { 24 };
            if let Some(c) = l4c {
                let v = update_bytes(rd16(frame, c), &old.octets(), &n.octets());
                wr16(frame, c, v);
            }
            frame[at..at + 16].copy_from_slice(&n.octets());
        }
        _ => return Err(RewriteError("address family mismatch")),
    }
    if is_src {
        out.src = new;
    } else {
        out.dst = new;
    }
    Ok(out)
}

/// Replace the source IP address.
pub fn set_src_ip(frame: &mut [u8], p: &Parsed, new: IpAddr) -> Result<Parsed, RewriteError> {
    set_addr(frame, p, new, true)
}

/// Replace the destination IP address.
pub fn set_dst_ip(frame: &mut [u8], p: &Parsed, new: IpAddr) -> Result<Parsed, RewriteError> {
    set_addr(frame, p, new, false)
}

fn set_port(frame: &mut [u8], p: &Parsed, new: u16, is_src: bool) -> Result<Parsed, RewriteError> {
    let mut out = *p;
    let at = p.l4_offset + if is_src { 0 } else { 2 };
    let l4c = l4_csum_offset(frame, p);
    match &mut out.l4 {
        L4::Tcp {
            src_port, dst_port, ..
        }
        | L4::Udp { src_port, dst_port } => {
            let old = rd16(frame, at);
            if let Some(c) = l4c {
                let v = update16(rd16(frame, c), old, new);
                wr16(frame, c, v);
            }
            wr16(frame, at, new);
            if is_src {
                *src_port = new;
            } else {
                *dst_port = new;
            }
            Ok(out)
        }
        _ => Err(RewriteError("not a TCP or UDP packet")),
    }
}

/// Replace the TCP/UDP source port.
pub fn set_src_port(frame: &mut [u8], p: &Parsed, new: u16) -> Result<Parsed, RewriteError> {
    set_port(frame, p, new, true)
}

/// Replace the TCP/UDP destination port.
pub fn set_dst_port(frame: &mut [u8], p: &Parsed, new: u16) -> Result<Parsed, RewriteError> {
    set_port(frame, p, new, false)
}

/// Replace the source IP address and TCP/UDP port (a translated endpoint). On an error the frame
/// may already carry the new address.
pub fn set_src(
    frame: &mut [u8],
    p: &Parsed,
    ip: IpAddr,
    port: u16,
) -> Result<Parsed, RewriteError> {
    let q = set_src_ip(frame, p, ip)?;
    set_src_port(frame, &q, port)
}

/// Replace the destination IP address and TCP/UDP port (a translated endpoint). On an error the
/// frame may already carry the new address.
pub fn set_dst(
    frame: &mut [u8],
    p: &Parsed,
    ip: IpAddr,
    port: u16,
) -> Result<Parsed, RewriteError> {
    let q = set_dst_ip(frame, p, ip)?;
    set_dst_port(frame, &q, port)
}
