//! Flow keys: the directional 5-tuple, its canonical bidirectional form and a stable hash.

use std::net::IpAddr;

/// A directional 5-tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    pub proto: u8,
}

/// Which way a packet goes relative to the canonical key of its connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// The packet's 5-tuple equals the canonical key.
    Forward,
    /// The packet's 5-tuple is the reverse of the canonical key.
    Reverse,
}

/// Longest [`FlowKey::to_bytes`]: protocol, two ports, two IPv6 addresses.
const KEY_BYTES: usize = 1 + 2 + 2 + 16 + 16;

/// Append `b` at `buf[*at..]`.
fn put(buf: &mut [u8; KEY_BYTES], at: &mut usize, b: &[u8]) {
    buf[*at..*at + b.len()].copy_from_slice(b);
    *at += b.len();
}

fn put_ip(buf: &mut [u8; KEY_BYTES], at: &mut usize, ip: &IpAddr) {
    match ip {
        IpAddr::V4(a) => put(buf, at, &a.octets()),
        IpAddr::V6(a) => put(buf, at, &a.octets()),
    }
}

impl FlowKey {
    /// The same connection seen from the other side.
    pub fn reversed(&self) -> FlowKey {
        FlowKey {
            src: self.dst,
            dst: self.src,
            src_port: self.dst_port,
            dst_port: self.src_port,
            proto: self.proto,
        }
    }

    /// Canonical key (the smaller of (src,sport) and (dst,dport) first) and this packet's direction.
    /// Both directions of one connection map to the same canonical key.
    pub fn canonical(&self) -> (FlowKey, Direction) {
        if (self.src, self.src_port) <= (self.dst, self.dst_port) {
            (*self, Direction::Forward)
        } else {
            (self.reversed(), Direction::Reverse)
        }
    }

    /// Stable byte encoding: proto, ports, addresses (used for hashing and as state values).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut buf = [0u8; KEY_BYTES];
        let n = self.encode(&mut buf);
        buf[..n].to_vec()
    }

    /// The bytes of [`FlowKey::to_bytes`] into `buf` (no allocation: this runs for every packet
    /// of every NF); returns their length.
    fn encode(&self, buf: &mut [u8; KEY_BYTES]) -> usize {
        let mut at = 0;
        put(buf, &mut at, &[self.proto]);
        put(buf, &mut at, &self.src_port.to_be_bytes());
        put(buf, &mut at, &self.dst_port.to_be_bytes());
        put_ip(buf, &mut at, &self.src);
        put_ip(buf, &mut at, &self.dst);
        at
    }

    /// Stable 64-bit FNV-1a hash of the directional key ([`FlowKey::to_bytes`]): identical on
    /// every instance, build and platform (unlike `std::hash`), so it can name keys in the shared
    /// state tier.
    pub fn stable_hash(&self) -> u64 {
        let mut buf = [0u8; KEY_BYTES];
        let n = self.encode(&mut buf);
        fnv1a(&buf[..n])
    }

    /// Hash of the canonical key: both directions of a connection give the same value.
    pub fn bidirectional_hash(&self) -> u64 {
        self.canonical().0.stable_hash()
    }
}

impl std::fmt::Display for FlowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}->{}:{}/{}",
            self.src, self.src_port, self.dst, self.dst_port, self.proto
        )
    }
}

/// 64-bit FNV-1a.
pub fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= *b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
