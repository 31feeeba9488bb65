//! Following a TCP connection past its first message: every HTTP/1.x request of a keep-alive
//! connection (pipelined or one after the other) and every DNS query of a DNS-over-TCP stream is
//! classified, not only the first. Pure: [`Follow::feed`] takes the client's bytes in stream
//! order and returns one [`Class`] per complete request or query.
//!
//! HTTP framing as a server reads it (RFC 9112 6.3): a request head ends with an empty line;
//! a body follows by `Transfer-Encoding: chunked` (chunks until a zero-size one, then trailers)
//! or `Content-Length`, else there is none. A head that does not parse, conflicting lengths,
//! or both headers (request smuggling) end the framing: that is an unparsed request, judged as
//! such by the policy (`unparsed`), and nothing after it is followed. After `CONNECT` or an
//! `Upgrade` request the server may have switched protocols: bytes that are not a request head
//! then end the following quietly (`Opaque`); a request head is still checked.

use crate::classify::Class;
use crate::detect::host_name;
use crate::{dns, http};

/// Longest request head (as [`http`]) and longest chunk-size or trailer line.
const MAX_HEAD: usize = 8192;
const MAX_LINE: usize = 1024;

/// Where the follower stands in the client's byte stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Follow {
    /// HTTP: collecting a request head (the bytes so far); `upgraded`: the previous request
    /// asked to switch protocols.
    Head { buf: Vec<u8>, upgraded: bool },
    /// HTTP: skipping `left` body bytes.
    Body { left: u64 },
    /// HTTP chunked body: collecting a chunk-size line.
    ChunkSize { buf: Vec<u8> },
    /// HTTP chunked body: skipping `left` chunk bytes and then the CRLF after them (`crlf`: how
    /// many of its 2 bytes are still due).
    ChunkData { left: u64, crlf: u8 },
    /// HTTP chunked body: collecting the trailer section (ends with an empty line).
    Trailer { buf: Vec<u8> },
    /// DNS over TCP: collecting a length-prefixed message.
    Dns { buf: Vec<u8> },
    /// Not followed any more (switched protocols, or the framing was lost).
    Opaque,
}

/// Unparsed: a class the policy judges by `unparsed`.
fn unparsed(proto: &str, why: &str) -> Class {
    Class {
        proto: proto.into(),
        name: None,
        refused: Some(why.into()),
    }
}

/// What a complete request head says.
struct Head {
    class: Class,
    body: Framing,
    upgrade: bool,
}

enum Framing {
    None,
    Length(u64),
    Chunked,
}

/// Parse a complete head (up to and including its empty line). `Err`: not a request head.
fn parse_head(h: &[u8]) -> Result<Head, &'static str> {
    let text = std::str::from_utf8(h).map_err(|_| "request head is not text")?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let first = lines.next().unwrap_or("");
    let (method, rest) = first.split_once(' ').ok_or("no request line")?;
    if !http::is_method(method) {
        return Err("no request line");
    }
    if !rest.ends_with(" HTTP/1.1") && !rest.ends_with(" HTTP/1.0") {
        return Err("no request line");
    }
    let mut host: Option<Result<String, &'static str>> = None;
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut upgrade = method == "CONNECT";
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':').ok_or("header line without a colon")?;
        let value = value.trim();
        match name.to_ascii_lowercase().as_str() {
            "host" => {
                if host.is_some() {
                    return Err("two Host headers");
                }
                let h = http::strip_port(value);
                host = Some(match h.parse::<std::net::IpAddr>() {
                    Ok(ip) => Ok(ip.to_string()),
                    Err(_) => host_name(h.as_bytes()).ok_or("Host header is not a host name"),
                });
            }
            "content-length" => {
                let n: u64 = value.parse().map_err(|_| "bad Content-Length")?;
                if length.is_some_and(|l| l != n) {
                    return Err("conflicting Content-Length headers");
                }
                length = Some(n);
            }
            "transfer-encoding" => {
                let last = value.rsplit(',').next().unwrap_or("").trim();
                if !last.eq_ignore_ascii_case("chunked") {
                    return Err("a request body without a length");
                }
                chunked = true;
            }
            "upgrade" => upgrade = true,
            _ => {}
        }
    }
    let body = match (chunked, length) {
        (true, Some(_)) => return Err("both Transfer-Encoding and Content-Length"),
        (true, None) => Framing::Chunked,
        (false, Some(n)) => Framing::Length(n),
        (false, None) => Framing::None,
    };
    let class = match host {
        Some(Err(why)) => unparsed("http", why),
        Some(Ok(name)) => Class {
            proto: "http".into(),
            name: Some(name),
            refused: None,
        },
        None => Class {
            proto: "http".into(),
            name: None,
            refused: None,
        },
    };
    Ok(Head {
        class,
        body,
        upgrade,
    })
}

/// The end of a head in `b` (the index after its empty line), if complete.
fn head_end(b: &[u8]) -> Option<usize> {
    let mut at = 0;
    while let Some(i) = b[at..].iter().position(|c| *c == b'\n') {
        let line = &b[at..at + i];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        at += i + 1;
        if line.is_empty() && at > 2 {
            return Some(at);
        }
    }
    None
}

impl Follow {
    /// A follower for a connection classified as `proto` ("http" or "dns"), at the start of the
    /// client's stream; None for other protocols.
    pub fn start(proto: &str) -> Option<Follow> {
        match proto {
            "http" => Some(Follow::Head {
                buf: Vec::new(),
                upgraded: false,
            }),
            "dns" => Some(Follow::Dns { buf: Vec::new() }),
            _ => None,
        }
    }

    /// Body bytes at the current position that need no inspection: a segment lying within them
    /// may pass even ahead of the stream ([`Follow::skip`]).
    pub fn skippable(&self) -> u64 {
        match self {
            Follow::Body { left } => *left,
            _ => 0,
        }
    }

    /// Move past `n` (at most [`Follow::skippable`]) body bytes.
    pub fn skip(&mut self, n: u64) {
        if let Follow::Body { left } = self {
            *left -= n.min(*left);
            if *left == 0 {
                *self = Follow::Head {
                    buf: Vec::new(),
                    upgraded: false,
                };
            }
        }
    }

    /// Take the client's next bytes (in stream order); push the class of every request or query
    /// they complete onto `out`.
    pub fn feed(&mut self, mut data: &[u8], out: &mut Vec<Class>) {
        while !data.is_empty() {
            let used = match self {
                Follow::Opaque => return,
                Follow::Body { left } => {
                    let n = (*left).min(data.len() as u64);
                    self.skip(n);
                    n as usize
                }
                Follow::ChunkData { left, crlf } => {
                    if *left > 0 {
                        let n = (*left).min(data.len() as u64);
                        *left -= n;
                        n as usize
                    } else {
                        // The CRLF after the chunk's bytes (a bare LF is taken as one).
                        match (data[0], *crlf) {
                            (b'\r', 2) => {
                                *crlf = 1;
                                1
                            }
                            (b'\n', _) => {
                                *self = Follow::ChunkSize { buf: Vec::new() };
                                1
                            }
                            _ => {
                                out.push(unparsed("http", "chunk not followed by CRLF"));
                                *self = Follow::Opaque;
                                return;
                            }
                        }
                    }
                }
                Follow::Head { buf, .. }
                | Follow::ChunkSize { buf }
                | Follow::Trailer { buf }
                | Follow::Dns { buf } => {
                    // Collect up to the end of what this state needs, then decide.
                    let had = buf.len();
                    buf.extend_from_slice(data);
                    match self.complete(out) {
                        Some(end) => end - had,
                        None => data.len(),
                    }
                }
            };
            data = &data[used..];
        }
    }

    /// The collecting state holds enough to decide? Then decide, move on, and return how many of
    /// its collected bytes it used (the rest belongs to what follows); None: needs more (or ended).
    fn complete(&mut self, out: &mut Vec<Class>) -> Option<usize> {
        match self {
            Follow::Head { buf, upgraded } => {
                let Some(end) = head_end(buf) else {
                    if buf.len() > MAX_HEAD {
                        out.push(unparsed("http", "request head too long"));
                        *self = Follow::Opaque;
                    } else if *upgraded && !http::may_start_request(buf) {
                        *self = Follow::Opaque;
                    }
                    return None;
                };
                let upgraded = *upgraded;
                match parse_head(&buf[..end]) {
                    Ok(h) => {
                        out.push(h.class);
                        *self = match h.body {
                            Framing::None => Follow::Head {
                                buf: Vec::new(),
                                upgraded: h.upgrade,
                            },
                            Framing::Length(0) => Follow::Head {
                                buf: Vec::new(),
                                upgraded: h.upgrade,
                            },
                            Framing::Length(n) => Follow::Body { left: n },
                            Framing::Chunked => Follow::ChunkSize { buf: Vec::new() },
                        };
                    }
                    Err(_) if upgraded => *self = Follow::Opaque,
                    Err(why) => {
                        out.push(unparsed("http", why));
                        *self = Follow::Opaque;
                    }
                }
                Some(end)
            }
            Follow::ChunkSize { buf } => {
                let Some(i) = buf.iter().position(|c| *c == b'\n') else {
                    if buf.len() > MAX_LINE {
                        out.push(unparsed("http", "chunk-size line too long"));
                        *self = Follow::Opaque;
                    }
                    return None;
                };
                let line = &buf[..i];
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                let size = line.split(|c| *c == b';').next().unwrap_or(b"");
                let size = std::str::from_utf8(size)
                    .ok()
                    .map(str::trim)
                    .filter(|s| !s.is_empty() && s.len() <= 15)
                    .and_then(|s| u64::from_str_radix(s, 16).ok());
                *self = match size {
                    None => {
                        out.push(unparsed("http", "bad chunk size"));
                        Follow::Opaque
                    }
                    Some(0) => Follow::Trailer { buf: Vec::new() },
                    Some(n) => Follow::ChunkData { left: n, crlf: 2 },
                };
                Some(i + 1)
            }
            Follow::Trailer { buf } => {
                // Trailer fields end with an empty line; with none, that line comes at once.
                let end = if buf.starts_with(b"\r\n") {
                    Some(2)
                } else if buf.starts_with(b"\n") {
                    Some(1)
                } else {
                    head_end(buf)
                };
                let Some(end) = end else {
                    if buf.len() > MAX_HEAD {
                        out.push(unparsed("http", "trailer section too long"));
                        *self = Follow::Opaque;
                    }
                    return None;
                };
                *self = Follow::Head {
                    buf: Vec::new(),
                    upgraded: false,
                };
                Some(end)
            }
            Follow::Dns { buf } => {
                let len = u16::from_be_bytes([*buf.first()?, *buf.get(1)?]) as usize;
                let m = buf.get(2..2 + len)?;
                out.push(match dns::query_name(m) {
                    Ok(n) => Class {
                        proto: "dns".into(),
                        name: Some(n),
                        refused: None,
                    },
                    Err(why) => unparsed("dns", why),
                });
                let end = 2 + len;
                buf.clear();
                Some(end)
            }
            Follow::Body { .. } | Follow::ChunkData { .. } | Follow::Opaque => None,
        }
    }

    /// Tag byte, then the state's fields.
    pub fn encode_into(&self, v: &mut Vec<u8>) {
        let bytes = |v: &mut Vec<u8>, tag: u8, b: &[u8]| {
            v.push(tag);
            v.extend_from_slice(&(b.len() as u32).to_le_bytes());
            v.extend_from_slice(b);
        };
        match self {
            Follow::Head { buf, upgraded } => bytes(v, if *upgraded { 1 } else { 0 }, buf),
            Follow::Body { left } => {
                v.push(2);
                v.extend_from_slice(&left.to_le_bytes());
            }
            Follow::ChunkSize { buf } => bytes(v, 3, buf),
            Follow::ChunkData { left, crlf } => {
                v.push(4);
                v.extend_from_slice(&left.to_le_bytes());
                v.push(*crlf);
            }
            Follow::Trailer { buf } => bytes(v, 5, buf),
            Follow::Dns { buf } => bytes(v, 6, buf),
            Follow::Opaque => v.push(7),
        }
    }

    /// Decode what [`Follow::encode_into`] wrote at the start of `b`; returns it and the bytes
    /// used.
    pub fn decode(b: &[u8]) -> Option<(Follow, usize)> {
        let bytes = || -> Option<(Vec<u8>, usize)> {
            let n = u32::from_le_bytes(b.get(1..5)?.try_into().ok()?) as usize;
            Some((b.get(5..5 + n)?.to_vec(), 5 + n))
        };
        let u64_at = |at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
        };
        Some(match *b.first()? {
            t @ (0 | 1) => {
                let (buf, n) = bytes()?;
                (
                    Follow::Head {
                        buf,
                        upgraded: t == 1,
                    },
                    n,
                )
            }
            2 => (Follow::Body { left: u64_at(1)? }, 9),
            3 => {
                let (buf, n) = bytes()?;
                (Follow::ChunkSize { buf }, n)
            }
            4 => {
                let crlf = *b.get(9).filter(|c| **c <= 2)?;
                (
                    Follow::ChunkData {
                        left: u64_at(1)?,
                        crlf,
                    },
                    10,
                )
            }
            5 => {
                let (buf, n) = bytes()?;
                (Follow::Trailer { buf }, n)
            }
            6 => {
                let (buf, n) = bytes()?;
                (Follow::Dns { buf }, n)
            }
            7 => (Follow::Opaque, 1),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(f: &mut Follow, data: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        f.feed(data, &mut out);
        out.into_iter()
            .map(|c| match (c.name, c.refused) {
                (_, Some(r)) => format!("unparsed: {r}"),
                (Some(n), None) => n,
                (None, None) => "-".into(),
            })
            .collect()
    }

    /// Every way of cutting `stream` into two pieces gives the same classes as whole.
    fn cut_anywhere(start: &Follow, stream: &[u8], want: &[&str]) {
        let whole = names(&mut start.clone(), stream);
        assert_eq!(whole, want);
        for cut in 0..=stream.len() {
            let mut f = start.clone();
            let mut got = names(&mut f, &stream[..cut]);
            // Through its encoding, as between two packets in the tier.
            let mut enc = Vec::new();
            f.encode_into(&mut enc);
            let (mut f, n) = Follow::decode(&enc).unwrap();
            assert_eq!(n, enc.len());
            got.extend(names(&mut f, &stream[cut..]));
            assert_eq!(got, want, "cut at {cut}");
        }
    }

    #[test]
    fn keep_alive_and_pipelined_requests_each_classified() {
        let http = Follow::start("http").unwrap();
        cut_anywhere(
            &http,
            b"GET / HTTP/1.1\r\nHost: ok.example\r\n\r\n\
              POST /x HTTP/1.1\r\nHost: a.example\r\nContent-Length: 5\r\n\r\nGET /\
              GET /y HTTP/1.1\r\nhost: Evil.Example:8080\r\n\r\n",
            &["ok.example", "a.example", "evil.example"],
        );
        // Chunked body (with an extension and a trailer) then another request.
        cut_anywhere(
            &http,
            b"POST / HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\n\r\n\
              5;x=y\r\nGET /\r\n0\r\nX-T: 1\r\n\r\n\
              GET / HTTP/1.0\r\n\r\n",
            &["a.example", "-"],
        );
        cut_anywhere(
            &http,
            b"POST / HTTP/1.1\r\nHost: a.example\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n\
              GET / HTTP/1.1\r\nHost: b.example\r\n\r\n",
            &["a.example", "b.example"],
        );
    }

    #[test]
    fn lost_framing_is_unparsed_and_ends_following() {
        let http = Follow::start("http").unwrap();
        for (stream, why) in [
            (&b"GET / HTTP/1.1\r\nHost: a\r\n\r\nhello there\r\n\r\nGET / HTTP/1.1\r\nHost: evil.example\r\n\r\n"[..], "no request line"),
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", "both Transfer-Encoding and Content-Length"),
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", "conflicting Content-Length headers"),
            (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size"),
        ] {
            let got = names(&mut http.clone(), stream);
            assert_eq!(got.last().unwrap(), &format!("unparsed: {why}"), "{got:?}");
        }
        let mut f = http.clone();
        f.feed(&[b'x'; MAX_HEAD + 1], &mut Vec::new());
        assert_eq!(f, Follow::Opaque);
    }

    #[test]
    fn after_an_upgrade_only_request_heads_are_checked() {
        let http = Follow::start("http").unwrap();
        let up = b"GET /ws HTTP/1.1\r\nHost: a.example\r\nUpgrade: websocket\r\n\r\n";
        let mut f = http.clone();
        assert_eq!(names(&mut f, up), ["a.example"]);
        assert_eq!(
            names(&mut f, b"\x81\x85binary frames"),
            Vec::<String>::new()
        );
        assert_eq!(f, Follow::Opaque);
        // The server refused the upgrade: the next request is still checked.
        let mut f = http.clone();
        names(&mut f, up);
        assert_eq!(
            names(&mut f, b"GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n"),
            ["evil.example"]
        );
    }

    #[test]
    fn body_bytes_may_be_skipped_ahead() {
        let mut f = Follow::start("http").unwrap();
        names(
            &mut f,
            b"PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n",
        );
        assert_eq!(f.skippable(), 10);
        f.skip(4);
        assert_eq!(f.skippable(), 6);
        assert_eq!(
            names(&mut f, b"123456GET / HTTP/1.1\r\nHost: b\r\n\r\n"),
            ["b"]
        );
    }

    #[test]
    fn dns_queries_each_classified() {
        let mut stream = Vec::new();
        for n in ["a.example", "b.tracker.example"] {
            let q = dns::build_query(n, 1);
            stream.extend_from_slice(&(q.len() as u16).to_be_bytes());
            stream.extend_from_slice(&q);
        }
        stream.extend_from_slice(&[0, 17]);
        stream.extend_from_slice(&[0xff; 17]);
        cut_anywhere(
            &Follow::start("dns").unwrap(),
            &stream,
            &[
                "a.example",
                "b.tracker.example",
                "unparsed: not a standard query",
            ],
        );
        assert_eq!(Follow::start("tls"), None);
    }

    #[test]
    fn garbage_encodings_are_refused() {
        for bad in [
            &[][..],
            &[8][..],
            &[0, 5, 0, 0, 0][..],
            &[4, 0, 0, 0, 0, 0, 0, 0, 0, 3][..],
        ] {
            assert_eq!(Follow::decode(bad), None, "{bad:?}");
        }
    }
}
