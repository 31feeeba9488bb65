//! TLS ClientHello parser: the server name (SNI) from the first bytes a client sends.
//!
//! Bounds-checked throughout. The handshake message may be fragmented over several TCP
//! segments (the caller accumulates bytes and calls again on [`Parse::NeedMore`]) and over
//! several TLS records (their fragments are joined). Anything that is not a well-formed
//! ClientHello is refused with a reason.

/// Outcome of parsing the bytes seen so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parse {
    /// A complete ClientHello; its SNI host name if it carries one.
    Hello { sni: Option<String> },
    /// Consistent so far; more bytes are needed.
    NeedMore,
    /// Not (or not a valid) ClientHello.
    Refused(&'static str),
}

/// Largest TLS record fragment (2^14) plus the expansion TLS 1.2 allows for ciphertext.
const MAX_RECORD: usize = 16384 + 2048;
const HANDSHAKE: u8 = 22;
const CLIENT_HELLO: u8 = 1;

/// Does `b` start like a TLS handshake record (enough to claim the flow is TLS)?
pub fn looks_like_tls(b: &[u8]) -> bool {
    b.first() == Some(&HANDSHAKE) && b.get(1).is_none_or(|v| *v == 3)
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        let s = self
            .b
            .get(self.at..self.at + n)
            .ok_or("field runs past the end of the ClientHello")?;
        self.at += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<usize, &'static str> {
        Ok(self.take(1)?[0] as usize)
    }
    fn u16(&mut self) -> Result<usize, &'static str> {
        let s = self.take(2)?;
        Ok(u16::from_be_bytes([s[0], s[1]]) as usize)
    }
    fn rest(&self) -> usize {
        self.b.len() - self.at
    }
}

/// Parse the first bytes of a client stream.
pub fn parse_client_hello(b: &[u8]) -> Parse {
    // Join the fragments of consecutive handshake records until the message is complete.
    let mut hs: Vec<u8> = Vec::new();
    let mut at = 0;
    loop {
        let Some(h) = b.get(at..at + 5) else {
            return Parse::NeedMore;
        };
        if h[0] != HANDSHAKE {
            return Parse::Refused("record is not a handshake record");
        }
        if h[1] != 3 {
            return Parse::Refused("record version is not 3.x");
        }
        let len = u16::from_be_bytes([h[3], h[4]]) as usize;
        if len == 0 || len > MAX_RECORD {
            return Parse::Refused("record length out of range");
        }
        let Some(frag) = b.get(at + 5..at + 5 + len) else {
            // Partial record: enough to check the handshake header early.
            let part = &b[at + 5..];
            hs.extend_from_slice(part);
            return match check_header(&hs) {
                Err(e) => Parse::Refused(e),
                Ok(_) => Parse::NeedMore,
            };
        };
        hs.extend_from_slice(frag);
        at += 5 + len;
        match check_header(&hs) {
            Err(e) => return Parse::Refused(e),
            Ok(Some(total)) if hs.len() >= total => {
                return match hello_body(&hs[4..total]) {
                    Ok(sni) => Parse::Hello { sni },
                    Err(e) => Parse::Refused(e),
                }
            }
            Ok(_) => {}
        }
    }
}

/// Validate the handshake header if present; Some(total message length) once known.
fn check_header(hs: &[u8]) -> Result<Option<usize>, &'static str> {
    match hs.first() {
        None => Ok(None),
        Some(&CLIENT_HELLO) => match hs.get(1..4) {
            None => Ok(None),
            Some(l) => {
                let n = (l[0] as usize) << 16 | (l[1] as usize) << 8 | l[2] as usize;
                if !(38..=1 << 16).contains(&n) {
                    return Err("ClientHello length out of range");
                }
                Ok(Some(4 + n))
            }
        },
        Some(_) => Err("first handshake message is not a ClientHello"),
    }
}

fn hello_body(body: &[u8]) -> Result<Option<String>, &'static str> {
    let mut r = Reader { b: body, at: 0 };
    let ver = r.take(2)?;
    if ver[0] != 3 {
        return Err("ClientHello version is not 3.x");
    }
    r.take(32)?; // random
    let sid = r.u8()?;
    if sid > 32 {
        return Err("session id longer than 32 bytes");
    }
    r.take(sid)?;
    let cs = r.u16()?;
    if cs == 0 || cs % 2 != 0 {
        return Err("bad cipher suites length");
    }
    r.take(cs)?;
    let comp = r.u8()?;
    if comp == 0 {
        return Err("no compression methods");
    }
    r.take(comp)?;
    if r.rest() == 0 {
        return Ok(None); // no extensions (old clients)
    }
    let ext_len = r.u16()?;
    if ext_len != r.rest() {
        return Err("extensions length does not match the message");
    }
    let mut sni = None;
    while r.rest() > 0 {
        let ty = r.u16()?;
        let len = r.u16()?;
        let data = r.take(len)?;
        if ty == 0 {
            if sni.is_some() {
                return Err("two server_name extensions");
            }
            sni = server_name(data)?;
        }
    }
    Ok(sni)
}

fn server_name(data: &[u8]) -> Result<Option<String>, &'static str> {
    let mut r = Reader { b: data, at: 0 };
    let list = r.u16()?;
    if list != r.rest() {
        return Err("server_name list length does not match");
    }
    let mut name = None;
    while r.rest() > 0 {
        let ty = r.u8()?;
        let n = r.u16()?;
        let v = r.take(n)?;
        if ty == 0 {
            if name.is_some() {
                return Err("two host names in server_name");
            }
            name = Some(crate::detect::host_name(v).ok_or("server name is not a DNS host name")?);
        }
    }
    Ok(name)
}

/// Build a ClientHello (for tests and benchmarks): one record, optional SNI, `pad` extra bytes
/// in a padding extension (to make it span several TCP segments).
pub fn build_client_hello(sni: Option<&str>, pad: usize) -> Vec<u8> {
    let mut exts = Vec::new();
    if let Some(s) = sni {
        let n = s.len();
        exts.extend_from_slice(&0u16.to_be_bytes());
        exts.extend_from_slice(&((n + 5) as u16).to_be_bytes());
        exts.extend_from_slice(&((n + 3) as u16).to_be_bytes());
        exts.push(0);
        exts.extend_from_slice(&(n as u16).to_be_bytes());
        exts.extend_from_slice(s.as_bytes());
    }
    if pad > 0 {
        exts.extend_from_slice(&21u16.to_be_bytes());
        exts.extend_from_slice(&(pad as u16).to_be_bytes());
        exts.extend(std::iter::repeat_n(0u8, pad));
    }
    let mut body = vec![3, 3];
    body.extend_from_slice(&[7u8; 32]);
    body.push(0);
    body.extend_from_slice(&[0, 2, 0x13, 0x01]);
    body.extend_from_slice(&[1, 0]);
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend_from_slice(&exts);
    let mut hs = vec![CLIENT_HELLO];
    hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&body);
    let mut rec = vec![HANDSHAKE, 3, 1];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sni_whole_and_in_every_prefix() {
        let h = build_client_hello(Some("WWW.Bad.Example"), 0);
        assert_eq!(
            parse_client_hello(&h),
            Parse::Hello {
                sni: Some("www.bad.example".into())
            }
        );
        for n in 0..h.len() {
            assert_eq!(parse_client_hello(&h[..n]), Parse::NeedMore, "prefix {n}");
        }
        assert_eq!(
            parse_client_hello(&build_client_hello(None, 0)),
            Parse::Hello { sni: None }
        );
        // Large hello (several segments' worth).
        let big = build_client_hello(Some("a.example"), 3000);
        assert_eq!(
            parse_client_hello(&big),
            Parse::Hello {
                sni: Some("a.example".into())
            }
        );
    }

    #[test]
    fn handshake_split_over_two_records() {
        let h = build_client_hello(Some("split.example"), 100);
        let hs = &h[5..];
        let (a, b) = hs.split_at(30);
        let mut two = vec![22, 3, 1];
        two.extend_from_slice(&(a.len() as u16).to_be_bytes());
        two.extend_from_slice(a);
        two.extend_from_slice(&[22, 3, 1]);
        two.extend_from_slice(&(b.len() as u16).to_be_bytes());
        two.extend_from_slice(b);
        assert_eq!(
            parse_client_hello(&two),
            Parse::Hello {
                sni: Some("split.example".into())
            }
        );
    }

    #[test]
    fn refusals_are_clear() {
        let h = build_client_hello(Some("x.example"), 0);
        let mut bad = h.clone();
        bad[5] = 2; // ServerHello
        assert!(matches!(parse_client_hello(&bad), Parse::Refused(e) if e.contains("ClientHello")));
        let mut bad = h.clone();
        bad[0] = 23;
        assert!(matches!(parse_client_hello(&bad), Parse::Refused(_)));
        let mut bad = h.clone();
        let n = bad.len();
        bad[n - 5] = b' '; // not a host name character
        assert!(matches!(parse_client_hello(&bad), Parse::Refused(e) if e.contains("host name")));
        // Extensions length lies: refused, never a panic.
        let mut bad = h.clone();
        bad[5 + 4 + 2 + 32 + 1 + 4 + 2] = 0xff;
        assert!(matches!(parse_client_hello(&bad), Parse::Refused(_)));
        assert!(looks_like_tls(&[22]) && looks_like_tls(&h) && !looks_like_tls(b"GET"));
    }
}
