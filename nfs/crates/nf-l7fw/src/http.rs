//! HTTP/1.x request head: the Host header from the first bytes a client sends.

use crate::detect::{host_name, Det};

const METHODS: &[&[u8]] = &[
    b"GET ",
    b"POST ",
    b"HEAD ",
    b"PUT ",
    b"DELETE ",
    b"OPTIONS ",
    b"PATCH ",
    b"CONNECT ",
    b"TRACE ",
];

/// Longest request head we wait for (request line + headers).
const MAX_HEAD: usize = 8192;

/// Detect an HTTP/1.x request and extract the host (without port).
pub fn detect(b: &[u8]) -> Det {
    let Some(m) = METHODS.iter().find(|m| b.starts_with(m)) else {
        return if METHODS.iter().any(|m| m.starts_with(b)) {
            Det::More(None)
        } else {
            Det::No
        };
    };
    let mut lines = b.split(|c| *c == b'\n');
    let Some(first) = lines.next() else {
        return Det::More(Some("http"));
    };
    // The request line must be complete to be sure (it ends with " HTTP/1.x").
    if first.len() == b.len() {
        return if b.len() > MAX_HEAD {
            Det::Refused("http", "request line too long")
        } else {
            Det::More(Some("http"))
        };
    }
    let mut seen = first.len() + 1;
    let first = first.strip_suffix(b"\r").unwrap_or(first);
    if !first[m.len()..].ends_with(b" HTTP/1.1") && !first[m.len()..].ends_with(b" HTTP/1.0") {
        return Det::No;
    }
    for line in lines {
        let complete = seen + line.len() < b.len();
        if !complete {
            break;
        }
        seen += line.len() + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            return Det::Yes("http", None); // end of headers, no Host (HTTP/1.0)
        }
        if line.len() > 5 && line[..5].eq_ignore_ascii_case(b"host:") {
            let v = std::str::from_utf8(&line[5..]).unwrap_or("").trim();
            let host = strip_port(v);
            if let Ok(ip) = host.parse::<std::net::IpAddr>() {
                return Det::Yes("http", Some(ip.to_string()));
            }
            return match host_name(host.as_bytes()) {
                Some(h) => Det::Yes("http", Some(h)),
                None => Det::Refused("http", "Host header is not a host name"),
            };
        }
    }
    if b.len() > MAX_HEAD {
        Det::Refused("http", "request head too long")
    } else {
        Det::More(Some("http"))
    }
}

/// Whether `m` is a request method this detector knows.
pub fn is_method(m: &str) -> bool {
    METHODS
        .iter()
        .any(|x| x.len() == m.len() + 1 && x.starts_with(m.as_bytes()))
}

/// Whether `b` starts like a request line (a known method and a space, or a prefix of one).
pub fn may_start_request(b: &[u8]) -> bool {
    METHODS.iter().any(|m| b.starts_with(m) || m.starts_with(b))
}

/// The host of a Host header's value (without a port; an IPv6 address without brackets).
pub fn strip_port(v: &str) -> &str {
    if let Some(rest) = v.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match v.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.bytes().all(|c| c.is_ascii_digit()) => h,
        _ => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_from_request_heads() {
        let r = b"GET /x HTTP/1.1\r\nUser-Agent: t\r\nHOST: Www.Example.com:8080\r\n\r\n";
        assert_eq!(detect(r), Det::Yes("http", Some("www.example.com".into())));
        for n in 1..r.len() - 20 {
            assert!(matches!(detect(&r[..n]), Det::More(_)), "prefix {n}");
        }
        assert_eq!(detect(b"GET / HTTP/1.0\r\n\r\n"), Det::Yes("http", None));
        assert_eq!(detect(b"GET / SPDY/9\r\n"), Det::No);
        assert_eq!(detect(b"HELLO"), Det::No);
        assert_eq!(detect(b"PO"), Det::More(None));
        assert!(matches!(
            detect(b"GET / HTTP/1.1\r\nHost: a b\r\n"),
            Det::Refused(..)
        ));
        assert_eq!(
            detect(b"GET / HTTP/1.1\nhost: [::1]:80\n"),
            Det::Yes("http", Some("::1".into()))
        );
    }
}
