//! Internet checksum (RFC 1071) and incremental update (RFC 1624, eqn. 3).

/// One's-complement sum of `data` folded to 16 bits, added to `initial` (not inverted).
pub fn ones_sum(data: &[u8], initial: u32) -> u32 {
    let mut sum = initial as u64;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u64) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u32
}

/// Final checksum of `data` (the inverted one's-complement sum).
pub fn checksum(data: &[u8]) -> u16 {
    !(ones_sum(data, 0) as u16)
}

/// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') for a 16-bit field changing from `old` to `new`.
pub fn update16(hc: u16, old: u16, new: u16) -> u16 {
    let mut sum = (!hc as u32) + (!old as u32 & 0xffff) + new as u32;
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Incremental update for a field of any even length (addresses) changing from `old` to `new`.
pub fn update_bytes(mut hc: u16, old: &[u8], new: &[u8]) -> u16 {
    debug_assert_eq!(old.len(), new.len());
    for (o, n) in old.chunks(2).zip(new.chunks(2)) {
        let o = u16::from_be_bytes([o[0], *o.get(1).unwrap_or(&0)]);
        let n = u16::from_be_bytes([n[0], *n.get(1).unwrap_or(&0)]);
        hc = update16(hc, o, n);
    }
    hc
}

/// Pseudo-header sum for TCP/UDP checksums (IPv4 or IPv6 addresses as bytes).
pub fn pseudo_header_sum(src: &[u8], dst: &[u8], proto: u8, len: u32) -> u32 {
    let mut s = ones_sum(src, 0);
    s = ones_sum(dst, s);
    s = ones_sum(&[0, proto], s);
    s = ones_sum(&len.to_be_bytes(), s);
    s
}
