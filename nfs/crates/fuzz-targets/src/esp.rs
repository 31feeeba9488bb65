//! Targets for ESP (RFC 4303 with AES-GCM) and the anti-replay window.

use crate::input::Input;
use nf_ipsec::esp::{decapsulate, encapsulate, esp_header, Cipher, EspError, SaCrypto};
use nf_ipsec::replay::{Refused, ReplayWindow};
use packet::Parsed;
use std::collections::BTreeSet;
use std::net::Ipv4Addr;

/// Encapsulation round trip, tampering, and decapsulation of arbitrary frames.
pub fn esp(data: &[u8]) {
    let mut inp = Input::new(data);
    let sel = inp.u8();
    let mut key = inp.bytes(if sel & 1 == 0 { 16 } else { 32 }).to_vec();
    key.resize(if sel & 1 == 0 { 16 } else { 32 }, 0);
    let cipher = Cipher::new(&key).expect("16 or 32 bytes");
    let salt = inp.u32().to_be_bytes();
    let sa = SaCrypto {
        spi: inp.u32(),
        cipher: &cipher,
        salt: &salt,
        tunnel_src: Ipv4Addr::new(203, 0, 113, 1),
        tunnel_dst: Ipv4Addr::new(203, 0, 113, 2),
    };
    let seq = inp.u32();
    let tamper_at = inp.u16() as usize;
    let tamper_xor = inp.u8().max(1);
    let frame = inp.rest();
    let Ok(p) = Parsed::new_checked(frame) else {
        return;
    };
    // The frame as ESP: decapsulation never panics (it fails authentication, mostly).
    if esp_header(frame, &p).is_some() {
        let mut f = frame.to_vec();
        let mut out = Vec::new();
        let _ = decapsulate(&sa, &mut f, &p, &mut out);
    }
    // The frame as cleartext: encapsulate, then decapsulate gives it back.
    if !nf_ipsec::esp::fits(&p) {
        return; // too long for one outer IPv4 packet: the gateway drops it (too_big)
    }
    let mut esp = Vec::new();
    encapsulate(&sa, seq, frame, &p, &mut esp);
    let q = Parsed::new_checked(&esp).expect("an ESP frame parses");
    assert_eq!(q.frame_len, esp.len());
    assert_eq!(esp_header(&esp, &q), Some((sa.spi, seq)));
    assert!(packet::checksum::ones_sum(&esp[q.l3_offset..q.l4_offset], 0) == 0xffff);
    let mut copy = esp.clone();
    let mut inner = Vec::new();
    assert_eq!(decapsulate(&sa, &mut copy, &q, &mut inner), Ok(()));
    assert_eq!(inner, &frame[..p.frame_len], "round trip changed the frame");
    // Any changed byte of the ESP part (SPI, sequence number, IV, ciphertext, ICV) fails.
    let n = q.frame_len - q.l4_offset;
    let at = q.l4_offset + tamper_at % n;
    let mut t = esp.clone();
    t[at] ^= tamper_xor;
    let qt = Parsed::new_checked(&t).expect("same headers");
    assert_eq!(
        decapsulate(&sa, &mut t, &qt, &mut inner),
        Err(EspError::Auth),
        "tampered byte {at} accepted"
    );
}

/// The anti-replay window against a set of accepted sequence numbers.
pub fn replay(data: &[u8]) {
    let mut inp = Input::new(data);
    let size = 64 * (1 + inp.u8() as usize % 64);
    let mut w = ReplayWindow::new(size);
    let mut seen = BTreeSet::new();
    let mut top = 0u32;
    while !inp.is_empty() {
        let k = inp.u8();
        let seq = match k % 4 {
            // Near the top (both sides), far ahead, or anywhere.
            0 | 1 => top.wrapping_add(inp.u8() as u32).wrapping_sub(128),
            2 => top.wrapping_add(inp.u16() as u32 * (1 + (k as u32 >> 2))),
            _ => inp.u32(),
        };
        let want = if seq == 0 {
            Err(Refused::Zero)
        } else if seq as u64 + size as u64 <= top as u64 {
            Err(Refused::TooOld)
        } else if seen.contains(&seq) {
            Err(Refused::Replay)
        } else {
            Ok(())
        };
        assert_eq!(w.check(seq), want, "check({seq}), top {top}, size {size}");
        assert_eq!(w.accept(seq), want, "accept({seq}), top {top}, size {size}");
        if want.is_ok() {
            seen.insert(seq);
            top = top.max(seq);
        }
        assert_eq!(w.top(), top);
        assert_eq!(ReplayWindow::decode(&w.encode(), size).as_ref(), Some(&w));
    }
}
