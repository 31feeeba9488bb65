//! Reading markers out of ESP: the sink of a path through an IPsec gateway (`nf ipsec`, an
//! outbound SA) decrypts each ESP frame with the SA's key and salt and reads the marker of the
//! inner packet, so the one-way latency through the gateway is measured like any other path's.

use crate::Marker;
use nf_ipsec::esp::{decapsulate, esp_header, Cipher, SaCrypto};
use std::net::Ipv4Addr;

/// The receiving end of one outbound SA (AES-GCM key and salt).
pub struct EspOpener {
    cipher: Cipher,
    salt: [u8; 4],
}

fn hex(s: &str, what: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{what} must be hex digits, got {s:?}"));
    }
    Ok((0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex checked"))
        .collect())
}

impl EspOpener {
    /// `key`: 32 or 64 hex digits (AES-128/256-GCM); `salt`: 8 hex digits.
    pub fn new(key: &str, salt: &str) -> Result<EspOpener, String> {
        let cipher = Cipher::new(&hex(key, "--esp-key")?).map_err(|e| format!("--esp-key {e}"))?;
        let salt: [u8; 4] = hex(salt, "--esp-salt")?
            .try_into()
            .map_err(|_| "--esp-salt must be 8 hex digits".to_string())?;
        Ok(EspOpener { cipher, salt })
    }

    /// The marker inside `frame` if it is ESP this SA's key opens (None otherwise: not ESP, a
    /// wrong key, a tampered frame, or no marker inside).
    pub fn marker(&self, frame: &[u8]) -> Option<Marker> {
        let p = packet::Parsed::new_checked(frame).ok()?;
        let (spi, _) = esp_header(frame, &p)?;
        let sa = SaCrypto {
            spi,
            cipher: &self.cipher,
            salt: &self.salt,
            tunnel_src: Ipv4Addr::UNSPECIFIED,
            tunnel_dst: Ipv4Addr::UNSPECIFIED,
        };
        let mut buf = frame.to_vec();
        let mut inner = Vec::with_capacity(frame.len());
        decapsulate(&sa, &mut buf, &p, &mut inner).ok()?;
        let q = packet::Parsed::new_checked(&inner).ok()?;
        Marker::read(q.payload(&inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::{frames, stamp, GenConfig};
    use nf_ipsec::esp::encapsulate;

    const KEY: &str = "00112233445566778899aabbccddeeff";

    fn gen_frame() -> Vec<u8> {
        let cfg = GenConfig {
            run: 3,
            flows: 1,
            pkts: 1,
            tcp: false,
            frame_len: 128,
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            dst_port: 9,
        };
        let mut g = frames(&cfg).next().unwrap();
        stamp(&mut g, 42);
        g.frame
    }

    fn sealed(key: &str) -> Vec<u8> {
        let frame = gen_frame();
        let cipher = Cipher::new(&hex(key, "key").unwrap()).unwrap();
        let sa = SaCrypto {
            spi: 8193,
            cipher: &cipher,
            salt: &[1, 2, 3, 4],
            tunnel_src: Ipv4Addr::new(192, 0, 2, 1),
            tunnel_dst: Ipv4Addr::new(192, 0, 2, 2),
        };
        let p = packet::Parsed::new_checked(&frame).unwrap();
        let mut out = Vec::new();
        encapsulate(&sa, 7, &frame, &p, &mut out);
        out
    }

    #[test]
    fn reads_the_marker_inside_esp_and_only_with_the_key() {
        let open = EspOpener::new(KEY, "01020304").unwrap();
        let m = open.marker(&sealed(KEY)).expect("marker");
        assert_eq!((m.run, m.flow, m.seq, m.ts_ns), (3, 0, 0, 42));
        // the cleartext frame is not ESP; another key or salt does not open it
        assert!(open.marker(&gen_frame()).is_none());
        assert!(open
            .marker(&sealed("ffeeddccbbaa99887766554433221100"))
            .is_none());
        let wrong_salt = EspOpener::new(KEY, "01020305").unwrap();
        assert!(wrong_salt.marker(&sealed(KEY)).is_none());
    }

    #[test]
    fn bad_keys_and_salts_are_refused_naming_the_option() {
        assert!(EspOpener::new("00zz", "01020304")
            .err()
            .unwrap()
            .starts_with("--esp-key"));
        assert!(EspOpener::new("0011", "01020304")
            .err()
            .unwrap()
            .starts_with("--esp-key"));
        assert!(EspOpener::new(KEY, "0102")
            .err()
            .unwrap()
            .starts_with("--esp-salt"));
    }
}
