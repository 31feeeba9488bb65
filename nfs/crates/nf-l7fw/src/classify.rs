//! Application protocol classification from the first payload bytes of a flow. Pure logic.
//!
//! Detectors, in order: TLS (ClientHello SNI), SSH (banner), HTTP/1.x (Host), DNS (query name),
//! then the signature list (bytes at an offset). The first detector that is sure wins; while a
//! detector needs more bytes the flow stays pending.

pub use crate::detect::{host_name, Det};
use crate::{dns, http, tls};
use nfcore::config::{content_or_hex, present, Hex, Int, Object};
use serde::Deserialize;

/// A flow's classification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Class {
    /// "tls", "http", "dns", "ssh", a signature name, or "unknown".
    pub proto: String,
    pub name: Option<String>,
    /// Why the name could not be read (malformed, or incomplete at the inspection limit).
    pub refused: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Done(Class),
    NeedMore,
}

/// A protocol recognised by bytes at an offset. In a config: `{"name": "myproto", "offset": 0,
/// "content": "MYP"}` or with `"hex": "4d5950"` instead of `content`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Object<SigRuleConfig>")]
pub struct SigRule {
    pub name: String,
    pub offset: usize,
    pub bytes: Vec<u8>,
}

/// A signature as the config writes it.
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct SigRuleConfig {
    /// Absent: refused as any name that is not 1-32 characters.
    name: String,
    offset: Int<0, 1024>,
    #[serde(deserialize_with = "present")]
    content: Option<String>,
    #[serde(deserialize_with = "present")]
    hex: Option<Hex>,
}

impl TryFrom<Object<SigRuleConfig>> for SigRule {
    type Error = String;
    fn try_from(Object(c): Object<SigRuleConfig>) -> Result<SigRule, String> {
        let name = c.name;
        let valid = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_';
        if name.is_empty() || name.len() > 32 || !name.bytes().all(valid) {
            return Err(".name must be 1-32 characters of a-z, 0-9, '-', '_'".into());
        }
        if BUILTIN.contains(&name.as_str()) || name == "any" {
            return Err(format!(".name {name:?} is a built-in protocol"));
        }
        let bytes = content_or_hex(c.content, c.hex)?;
        if bytes.is_empty() || bytes.len() > 256 {
            return Err("content/hex must be 1-256 bytes".into());
        }
        Ok(SigRule {
            name,
            offset: c.offset.0 as usize,
            bytes,
        })
    }
}

/// Built-in signature list (extended by the config's `signatures`).
pub fn default_signatures() -> Vec<SigRule> {
    let s = |name: &str, offset, bytes: &[u8]| SigRule {
        name: name.into(),
        offset,
        bytes: bytes.to_vec(),
    };
    vec![
        s("bittorrent", 0, b"\x13BitTorrent protocol"),
        s("smb", 4, b"\xffSMB"),
        s("smb", 4, b"\xfeSMB"),
    ]
}

/// Names that are built-in protocols (a signature may not reuse them).
pub const BUILTIN: &[&str] = &["tls", "http", "dns", "ssh", "unknown"];

fn ssh(b: &[u8]) -> Det {
    const P: &[u8] = b"SSH-";
    if b.len() < P.len() {
        return if P.starts_with(b) {
            Det::More(None)
        } else {
            Det::No
        };
    }
    if !b.starts_with(P) {
        return Det::No;
    }
    let Some(end) = b.iter().position(|c| *c == b'\n') else {
        return if b.len() > 255 {
            Det::Refused("ssh", "banner longer than 255 bytes")
        } else {
            Det::More(Some("ssh"))
        };
    };
    if end > 255 {
        // As without a newline: how the banner was segmented must not change the decision.
        return Det::Refused("ssh", "banner longer than 255 bytes");
    }
    let line = &b[..end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // SSH-protoversion-softwareversion [SP comments]
    let mut parts = line[P.len()..].splitn(2, |c| *c == b'-');
    let (Some(_ver), Some(rest)) = (parts.next(), parts.next()) else {
        return Det::Refused("ssh", "banner without a software version");
    };
    let sw = rest.split(|c| *c == b' ').next().unwrap_or(b"");
    if sw.is_empty() || !sw.iter().all(|c| c.is_ascii_graphic()) {
        return Det::Refused("ssh", "banner without a software version");
    }
    Det::Yes(
        "ssh",
        Some(String::from_utf8_lossy(sw).to_ascii_lowercase()),
    )
}

fn signature(b: &[u8], s: &SigRule) -> bool {
    b.get(s.offset..s.offset + s.bytes.len()) == Some(&s.bytes[..])
}

/// Could `b` still grow into a match of `s`?
fn signature_pending(b: &[u8], s: &SigRule) -> bool {
    if b.len() >= s.offset + s.bytes.len() {
        return false;
    }
    if b.len() <= s.offset {
        return true;
    }
    let have = &b[s.offset..];
    s.bytes.starts_with(have)
}

/// Classify `b`, the first payload bytes of the flow in the direction that sent first.
/// `last`: no more bytes will be looked at (UDP datagram, or the inspection limit).
pub fn classify(b: &[u8], tcp: bool, sigs: &[SigRule], last: bool) -> Outcome {
    let done = |proto: &str, name, refused: Option<&str>| {
        Outcome::Done(Class {
            proto: proto.to_string(),
            name,
            refused: refused.map(String::from),
        })
    };
    let mut pending: Option<Option<&'static str>> = None;
    // TLS runs over TCP only: a UDP datagram starting 16 03 is e.g. a DNS query with that ID.
    let tls_det = if tcp && tls::looks_like_tls(b) {
        match tls::parse_client_hello(b) {
            tls::Parse::Hello { sni } => Det::Yes("tls", sni),
            tls::Parse::NeedMore => Det::More(Some("tls")),
            tls::Parse::Refused(e) => Det::Refused("tls", e),
        }
    } else {
        Det::No
    };
    for d in [tls_det, ssh(b), http::detect(b), dns::detect(b, tcp)] {
        match d {
            Det::Yes(p, n) => return done(p, n, None),
            Det::Refused(p, e) => return done(p, None, Some(e)),
            Det::More(p) => {
                // A detector that knows the protocol outranks one that cannot tell yet.
                if pending.is_none() || (p.is_some() && pending == Some(None)) {
                    pending = Some(p);
                }
            }
            Det::No => {}
        }
    }
    // A signature decides only where no detector knows the protocol and waits for its name:
    // else splitting e.g. an HTTP request after bytes that look like a signature would decide
    // the flow before its Host header arrives (and segmentation would choose the class).
    if !matches!(pending, Some(Some(_))) {
        if let Some(s) = sigs.iter().find(|s| signature(b, s)) {
            return done(&s.name, None, None);
        }
    }
    if pending.is_none() && sigs.iter().any(|s| signature_pending(b, s)) {
        pending = Some(None);
    }
    match pending {
        None => done("unknown", None, None),
        Some(_) if !last => Outcome::NeedMore,
        Some(Some(p)) => done(p, None, Some("incomplete at the inspection limit")),
        Some(None) => done("unknown", None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto(o: Outcome) -> (String, Option<String>, bool) {
        match o {
            Outcome::Done(c) => (c.proto, c.name, c.refused.is_some()),
            Outcome::NeedMore => ("more".into(), None, false),
        }
    }

    #[test]
    fn each_protocol() {
        let sigs = default_signatures();
        let c = |b: &[u8], tcp| proto(classify(b, tcp, &sigs, false));
        let hello = tls::build_client_hello(Some("x.bad.example"), 0);
        assert_eq!(
            c(&hello, true),
            ("tls".into(), Some("x.bad.example".into()), false)
        );
        assert_eq!(c(&hello[..20], true).0, "more");
        assert_eq!(
            proto(classify(&hello[..20], true, &sigs, true)),
            ("tls".into(), None, true),
            "incomplete at the limit is a refusal"
        );
        assert_eq!(
            c(b"SSH-2.0-OpenSSH_9.2p1 Debian\r\n", true),
            ("ssh".into(), Some("openssh_9.2p1".into()), false)
        );
        assert_eq!(c(b"SSH-2.0", true).0, "more");
        assert_eq!(
            c(b"GET / HTTP/1.1\r\nHost: a.example\r\n", true),
            ("http".into(), Some("a.example".into()), false)
        );
        assert_eq!(c(&dns::build_query("q.example", 1), false).0, "dns");
        assert_eq!(c(b"\x13BitTorrent protocol\x00", true).0, "bittorrent");
        assert_eq!(c(b"\x13BitTor", true).0, "more");
        assert_eq!(c(b"\x00\x00\x00\x50\xfeSMB....", true).0, "smb");
        assert_eq!(c(b"hello there", true).0, "unknown");
        assert_eq!(
            proto(classify(b"SSH-2", true, &sigs, true)),
            ("ssh".into(), None, true)
        );
        assert_eq!(proto(classify(b"SS", true, &sigs, true)).0, "unknown");
    }

    /// Bounded fuzz pass: mutated and truncated protocol openings never panic a parser.
    #[test]
    fn parsers_survive_mutated_input() {
        let sigs = default_signatures();
        let seeds: Vec<Vec<u8>> = vec![
            tls::build_client_hello(Some("a.example"), 30),
            b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n".to_vec(),
            dns::build_query("a.example", 1),
            b"SSH-2.0-x\r\n".to_vec(),
        ];
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for i in 0..20_000 {
            let mut b = seeds[i % seeds.len()].clone();
            for _ in 0..1 + next() % 4 {
                let at = (next() as usize) % b.len();
                b[at] = next() as u8;
            }
            let n = (next() as usize) % (b.len() + 1);
            for last in [false, true] {
                let _ = classify(&b[..n], i % 2 == 0, &sigs, last);
                let _ = classify(&b, i % 2 == 0, &sigs, last);
            }
        }
    }

    /// An HTTP request whose path holds an SMB signature is `http` however it is cut: were it
    /// `smb` when cut after the request line, a blocked Host could pass by splitting the request
    /// (a fuzz input, nfs/fuzz l7_classify).
    #[test]
    fn signature_does_not_preempt_a_pending_detector() {
        let sigs = default_signatures();
        let req = b"GET \xffSMB/ HTTP/1.1\r\nHost: evil.example\r\n\r\n";
        let whole = classify(req, true, &sigs, false);
        assert_eq!(
            proto(whole.clone()),
            ("http".into(), Some("evil.example".into()), false)
        );
        for n in 0..req.len() {
            match classify(&req[..n], true, &sigs, false) {
                Outcome::NeedMore => {}
                d => assert_eq!(d, whole, "decided differently on {n} bytes"),
            }
        }
        assert_eq!(
            proto(classify(&req[..20], true, &sigs, true)),
            ("http".into(), None, true),
            "incomplete at the limit: unparsed, not smb"
        );
        // A signature alone still decides.
        assert_eq!(
            proto(classify(b"\x00\x00\x00\x50\xffSMBx", true, &sigs, false)).0,
            "smb"
        );
    }

    /// A DNS query whose ID is 0x1603 is DNS, not a malformed TLS record: as TLS it would be
    /// unparsed (blocked by default, and with `unparsed: allow` a blocked query name would pass;
    /// a fuzz input, nfs/fuzz l7_classify).
    #[test]
    fn udp_is_never_tls() {
        let sigs = default_signatures();
        let q = dns::build_query("a.tracker.example", 0x1603);
        assert_eq!(
            proto(classify(&q, false, &sigs, true)),
            ("dns".into(), Some("a.tracker.example".into()), false)
        );
        let hello = tls::build_client_hello(Some("x.example"), 0);
        assert_eq!(proto(classify(&hello, false, &sigs, true)).0, "unknown");
    }

    /// An over-long SSH banner line is refused whether it comes whole or its first 256 bytes come
    /// alone: how a flow is cut must not change its class (a fuzz input, nfs/fuzz l7_classify).
    #[test]
    fn long_ssh_banner_is_refused_however_it_is_cut() {
        let sigs = default_signatures();
        let mut b = b"SSH-2.0-OpenSSH_9".to_vec();
        b.resize(265, b'0');
        b.extend_from_slice(b"\r\n");
        let whole = classify(&b, true, &sigs, false);
        assert_eq!(proto(whole.clone()), ("ssh".into(), None, true));
        assert_eq!(classify(&b[..256], true, &sigs, false), whole);
        let mut ok = b"SSH-2.0-OpenSSH_9".to_vec();
        ok.resize(253, b'0');
        ok.extend_from_slice(b"\r\n");
        assert!(!proto(classify(&ok, true, &sigs, false)).2);
    }
}
