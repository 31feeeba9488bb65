//! ESP tunnel mode (RFC 4303) with AES-GCM (RFC 4106): pure functions on frames.
//!
//! Outbound: `Ethernet [VLANs] | inner IP packet` becomes
//! `Ethernet [VLANs] | outer IPv4 (proto 50) | SPI | seq | IV (8) | AES-GCM(inner | pad | pad len |
//! next header) | ICV (16)`. The 8-byte IV is the 64-bit sequence number, unique per SA key as
//! RFC 4106 requires; the nonce is `salt (4) | IV`; the AAD is `SPI | seq` (no extended sequence
//! numbers).

use aes_gcm::aead::AeadInPlace;
use aes_gcm::{Aes128Gcm, Aes256Gcm, KeyInit, Nonce, Tag};
use packet::Parsed;
use std::net::{IpAddr, Ipv4Addr};

pub const PROTO_ESP: u8 = 50;
pub const ICV_LEN: usize = 16;
pub const IV_LEN: usize = 8;
/// SPI + sequence number.
pub const ESP_HDR_LEN: usize = 8;
const NH_IPV4: u8 = 4;
const NH_IPV6: u8 = 41;

/// AES-GCM with a 16-byte ICV, AES-128 or AES-256 by key length.
pub enum Cipher {
    A128(Box<Aes128Gcm>),
    A256(Box<Aes256Gcm>),
}

impl Cipher {
    /// `key`: 16 or 32 bytes.
    pub fn new(key: &[u8]) -> Result<Cipher, String> {
        match key.len() {
            16 => Ok(Cipher::A128(Box::new(
                Aes128Gcm::new_from_slice(key).map_err(|e| e.to_string())?,
            ))),
            32 => Ok(Cipher::A256(Box::new(
                Aes256Gcm::new_from_slice(key).map_err(|e| e.to_string())?,
            ))),
            n => Err(format!("must be 16 or 32 bytes (AES-128/256), got {n}")),
        }
    }

    /// Encrypt `buf` in place; returns the ICV.
    pub fn seal(&self, salt: &[u8; 4], iv: &[u8; 8], aad: &[u8], buf: &mut [u8]) -> [u8; 16] {
        let n = nonce(salt, iv);
        let nonce = Nonce::from_slice(&n);
        let tag = match self {
            Cipher::A128(c) => c.encrypt_in_place_detached(nonce, aad, buf),
            Cipher::A256(c) => c.encrypt_in_place_detached(nonce, aad, buf),
        }
        .expect("AES-GCM accepts any length below 64 GiB");
        tag.into()
    }

    /// Verify and decrypt `buf` in place; false if the ICV does not match (then `buf` is
    /// unspecified and the caller drops it).
    pub fn open(
        &self,
        salt: &[u8; 4],
        iv: &[u8; 8],
        aad: &[u8],
        buf: &mut [u8],
        icv: &[u8],
    ) -> bool {
        let n = nonce(salt, iv);
        let nonce = Nonce::from_slice(&n);
        let tag = Tag::from_slice(icv);
        match self {
            Cipher::A128(c) => c.decrypt_in_place_detached(nonce, aad, buf, tag),
            Cipher::A256(c) => c.decrypt_in_place_detached(nonce, aad, buf, tag),
        }
        .is_ok()
    }
}

fn nonce(salt: &[u8; 4], iv: &[u8; 8]) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[..4].copy_from_slice(salt);
    n[4..].copy_from_slice(iv);
    n
}

/// The keys and tunnel of one SA as the packet functions need them.
pub struct SaCrypto<'a> {
    pub spi: u32,
    pub cipher: &'a Cipher,
    pub salt: &'a [u8; 4],
    pub tunnel_src: Ipv4Addr,
    pub tunnel_dst: Ipv4Addr,
}

/// Why an ESP packet is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EspError {
    /// Too short, misaligned, fragmented, or not ESP over IPv4.
    Malformed,
    /// ICV mismatch (tampered, or the wrong key).
    Auth,
    /// Padding or next header invalid after decryption.
    BadTrailer,
}

/// SPI and sequence number of an ESP-over-IPv4 frame (None if it is not one we can handle:
/// fragments are not reassembled).
pub fn esp_header(frame: &[u8], p: &Parsed) -> Option<(u32, u32)> {
    if p.proto != PROTO_ESP || !p.src.is_ipv4() || p.non_first_fragment {
        return None;
    }
    // More-fragments flag of the outer header.
    if frame.get(p.l3_offset + 6)? & 0x20 != 0 {
        return None;
    }
    let esp = frame.get(p.l4_offset..p.frame_len)?;
    if esp.len() < ESP_HDR_LEN + IV_LEN + 4 + ICV_LEN {
        return None;
    }
    let spi = u32::from_be_bytes(esp[0..4].try_into().ok()?);
    let seq = u32::from_be_bytes(esp[4..8].try_into().ok()?);
    Some((spi, seq))
}

/// Most bytes encapsulation adds to the inner IP packet: outer IPv4 header, SPI, sequence
/// number, IV, padding (up to 3), pad length, next header, ICV.
pub const MAX_OVERHEAD: usize = 20 + ESP_HDR_LEN + IV_LEN + 3 + 2 + ICV_LEN;

/// Whether the IP packet of `p` fits one outer IPv4 packet (total length <= 65535) once
/// encapsulated; [`encapsulate`] requires it.
pub fn fits(p: &Parsed) -> bool {
    p.frame_len - p.l3_offset + MAX_OVERHEAD <= u16::MAX as usize
}

/// Encapsulate the IP packet of `frame` (parsed as `p`) with sequence number `seq`; the result
/// is written to `out` (cleared first). Link-layer header and VLAN tags are kept. The packet
/// must [`fits`].
pub fn encapsulate(sa: &SaCrypto<'_>, seq: u32, frame: &[u8], p: &Parsed, out: &mut Vec<u8>) {
    let l3 = p.l3_offset;
    let inner = &frame[l3..p.frame_len];
    let (next_header, tos) = match p.src {
        IpAddr::V4(_) => (NH_IPV4, inner[1]),
        IpAddr::V6(_) => (NH_IPV6, (inner[0] << 4) | (inner[1] >> 4)),
    };
    let pad = (4 - (inner.len() + 2) % 4) % 4;
    let ct_len = inner.len() + pad + 2;
    let esp_len = ESP_HDR_LEN + IV_LEN + ct_len + ICV_LEN;
    let total = 20 + esp_len;
    debug_assert!(
        total <= u16::MAX as usize,
        "encapsulate: check fits() first"
    );
    out.clear();
    out.reserve(l3 + total);
    out.extend_from_slice(&frame[..l3]);
    out[l3 - 2..l3].copy_from_slice(&packet::ETHERTYPE_IPV4.to_be_bytes());
    // Outer IPv4: no options, DF clear, TTL 64, identification from the sequence number.
    let o = out.len();
    out.extend_from_slice(&[0x45, tos]);
    out.extend_from_slice(&(total as u16).to_be_bytes());
    out.extend_from_slice(&(seq as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 64, PROTO_ESP, 0, 0]);
    out.extend_from_slice(&sa.tunnel_src.octets());
    out.extend_from_slice(&sa.tunnel_dst.octets());
    let c = packet::checksum::checksum(&out[o..o + 20]);
    out[o + 10..o + 12].copy_from_slice(&c.to_be_bytes());
    // ESP header and IV.
    let spi = sa.spi.to_be_bytes();
    let seqb = seq.to_be_bytes();
    out.extend_from_slice(&spi);
    out.extend_from_slice(&seqb);
    let iv = (seq as u64).to_be_bytes();
    out.extend_from_slice(&iv);
    // Plaintext: inner packet, padding 1, 2, 3 ..., pad length, next header.
    let pt = out.len();
    out.extend_from_slice(inner);
    for i in 1..=pad {
        out.push(i as u8);
    }
    out.push(pad as u8);
    out.push(next_header);
    let mut aad = [0u8; 8];
    aad[..4].copy_from_slice(&spi);
    aad[4..].copy_from_slice(&seqb);
    let icv = sa.cipher.seal(sa.salt, &iv, &aad, &mut out[pt..]);
    out.extend_from_slice(&icv);
}

/// Verify and decapsulate the ESP frame `frame` (parsed as `p`, header checked with
/// [`esp_header`]); the inner packet, with the outer frame's link-layer header, is written to
/// `out`. The caller checks the replay window before and updates it after.
pub fn decapsulate(
    sa: &SaCrypto<'_>,
    frame: &mut [u8],
    p: &Parsed,
    out: &mut Vec<u8>,
) -> Result<(), EspError> {
    let l3 = p.l3_offset;
    let esp = frame
        .get_mut(p.l4_offset..p.frame_len)
        .ok_or(EspError::Malformed)?;
    let n = esp.len();
    if n < ESP_HDR_LEN + IV_LEN + 4 + ICV_LEN
        || !(n - ESP_HDR_LEN - IV_LEN - ICV_LEN).is_multiple_of(4)
    {
        return Err(EspError::Malformed);
    }
    let mut aad = [0u8; 8];
    aad.copy_from_slice(&esp[..8]);
    let mut iv = [0u8; 8];
    iv.copy_from_slice(&esp[8..16]);
    let (body, icv) = esp[16..].split_at_mut(n - 16 - ICV_LEN);
    if !sa.cipher.open(sa.salt, &iv, &aad, body, icv) {
        return Err(EspError::Auth);
    }
    let len = body.len();
    let (pad, nh) = (body[len - 2] as usize, body[len - 1]);
    if pad + 2 > len || (1..=pad).any(|i| body[len - 2 - pad + i - 1] != i as u8) {
        return Err(EspError::BadTrailer);
    }
    let ethertype = match nh {
        NH_IPV4 => packet::ETHERTYPE_IPV4,
        NH_IPV6 => packet::ETHERTYPE_IPV6,
        _ => return Err(EspError::BadTrailer),
    };
    let inner_len = len - 2 - pad;
    out.clear();
    out.extend_from_slice(&frame[..l3]);
    out[l3 - 2..l3].copy_from_slice(&ethertype.to_be_bytes());
    let at = p.l4_offset + ESP_HDR_LEN + IV_LEN;
    out.extend_from_slice(&frame[at..at + inner_len]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Known answer: "The Galois/Counter Mode of Operation" (McGrew, Viega; the NIST GCM
    /// submission) test cases 4 (AES-128) and 16 (AES-256), 96-bit IV = salt | explicit IV as
    /// in RFC 4106, with AAD.
    /// A 64 KB inner packet (e.g. a GRO super-packet read from AF_PACKET) does not fit an outer
    /// IPv4 packet: its total length field wrapped around and the gateway sent a corrupt frame.
    /// Up to the limit the ESP frame parses with its full length.
    #[test]
    fn largest_inner_packet_that_fits() {
        use packet::build::{FrameSpec, Transport};
        let cipher = Cipher::new(&[7u8; 16]).unwrap();
        let sa = SaCrypto {
            spi: 300,
            cipher: &cipher,
            salt: &[1, 2, 3, 4],
            tunnel_src: Ipv4Addr::new(203, 0, 113, 1),
            tunnel_dst: Ipv4Addr::new(203, 0, 113, 2),
        };
        let (s, d) = ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        let max_inner = u16::MAX as usize - MAX_OVERHEAD;
        for (extra, ok) in [(0usize, true), (1, false), (57, false)] {
            let payload = vec![0x5a; max_inner + extra - 40 - 8];
            let mut spec = FrameSpec::new(s, d, 1, 2, Transport::Udp);
            spec.payload = &payload;
            let f = spec.build();
            let p = Parsed::new_checked(&f).unwrap_or_else(|e| panic!("{e} len {}", f.len()));
            assert_eq!(fits(&p), ok, "inner {} bytes", max_inner + extra);
            if ok {
                let mut out = Vec::new();
                encapsulate(&sa, 9, &f, &p, &mut out);
                let q = Parsed::new_checked(&out).expect("the ESP frame parses");
                assert_eq!(q.frame_len, out.len());
                let mut inner = Vec::new();
                decapsulate(&sa, &mut out, &q, &mut inner).unwrap();
                assert_eq!(inner, f);
            }
        }
    }

    #[test]
    fn aes_gcm_known_answers() {
        let p = hex(
            "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72\
             1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
        );
        let aad = hex("feedfacedeadbeeffeedfacedeadbeefabaddad2");
        let salt: [u8; 4] = hex("cafebabe").try_into().unwrap();
        let iv: [u8; 8] = hex("facedbaddecaf888").try_into().unwrap();
        for (key, ct, tag) in [
            (
                "feffe9928665731c6d6a8f9467308308",
                "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e\
                 21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091",
                "5bc94fbc3221a5db94fae95ae7121a47",
            ),
            (
                "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308",
                "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa\
                 8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
                "76fc6ece0f4e1768cddf8853bb2d551b",
            ),
        ] {
            let c = Cipher::new(&hex(key)).unwrap();
            let mut buf = p.clone();
            let icv = c.seal(&salt, &iv, &aad, &mut buf);
            assert_eq!(buf, hex(ct), "ciphertext, key {key}");
            assert_eq!(icv.to_vec(), hex(tag), "tag, key {key}");
            assert!(c.open(&salt, &iv, &aad, &mut buf, &icv));
            assert_eq!(buf, p);
        }
        assert!(Cipher::new(&[0u8; 24]).is_err());
    }
}
