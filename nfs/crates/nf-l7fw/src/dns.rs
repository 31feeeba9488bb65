//! DNS query: the query name. Strict, so random payloads are not taken for DNS: a standard
//! query (QR=0, opcode 0) with exactly one question, no answers or authority records and at most
//! one additional record (EDNS OPT).

use crate::detect::Det;

/// Parse one DNS message (UDP payload, or a TCP message without its length prefix).
pub fn query_name(m: &[u8]) -> Result<String, &'static str> {
    let h = m.get(..12).ok_or("shorter than a DNS header")?;
    let be = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
    let flags = be(2);
    if flags & 0x8000 != 0 || (flags >> 11) & 0xf != 0 {
        return Err("not a standard query");
    }
    if be(4) != 1 || be(6) != 0 || be(8) != 0 || be(10) > 1 {
        return Err("not one question without answers");
    }
    let mut at = 12;
    let mut name = String::new();
    loop {
        let n = *m.get(at).ok_or("query name runs past the end")? as usize;
        at += 1;
        if n == 0 {
            break;
        }
        if n > 63 {
            return Err("label longer than 63 bytes (or a compression pointer)");
        }
        let label = m.get(at..at + n).ok_or("query name runs past the end")?;
        at += n;
        if !label
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
        {
            return Err("query name has characters outside a host name");
        }
        if !name.is_empty() {
            name.push('.');
        }
        name.push_str(&String::from_utf8_lossy(label).to_ascii_lowercase());
        if name.len() > 253 {
            return Err("query name longer than 253 characters");
        }
    }
    m.get(at..at + 4).ok_or("question runs past the end")?;
    at += 4;
    let rest = &m[at..];
    if be(10) == 1 {
        // EDNS OPT: root name, type 41, then class, TTL, rdlength and rdata.
        if rest.len() < 11 || rest[0] != 0 || rest[1..3] != [0, 41] {
            return Err("additional record is not EDNS OPT");
        }
        let rdlen = u16::from_be_bytes([rest[9], rest[10]]) as usize;
        if rest.len() != 11 + rdlen {
            return Err("trailing bytes after the OPT record");
        }
    } else if !rest.is_empty() {
        return Err("trailing bytes after the question");
    }
    if name.is_empty() {
        return Ok(".".into());
    }
    Ok(name)
}

/// Detect a DNS query: a whole UDP datagram, or a TCP stream (2-byte length prefix).
pub fn detect(b: &[u8], tcp: bool) -> Det {
    if !tcp {
        return match query_name(b) {
            Ok(n) => Det::Yes("dns", Some(n)),
            Err(_) => Det::No,
        };
    }
    let Some(l) = b.get(..2) else {
        return Det::More(None);
    };
    let len = u16::from_be_bytes([l[0], l[1]]) as usize;
    if !(17..=4096).contains(&len) {
        return Det::No;
    }
    match b.get(2..2 + len) {
        None => {
            // Judge the header early so other protocols are not kept waiting.
            if b.len() >= 14 && query_name(&b[2..]).is_err_and(|e| e.starts_with("not")) {
                Det::No
            } else {
                Det::More(None)
            }
        }
        Some(m) => match query_name(m) {
            Ok(n) => Det::Yes("dns", Some(n)),
            Err(_) => Det::No,
        },
    }
}

/// Build a query (tests and benchmarks).
pub fn build_query(name: &str, id: u16) -> Vec<u8> {
    let mut m = id.to_be_bytes().to_vec();
    m.extend_from_slice(&[1, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
    for l in name.split('.').filter(|l| !l.is_empty()) {
        m.push(l.len() as u8);
        m.extend_from_slice(l.as_bytes());
    }
    m.extend_from_slice(&[0, 0, 1, 0, 1]);
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_and_non_queries() {
        let q = build_query("Tracker.Example.", 7);
        assert_eq!(query_name(&q).unwrap(), "tracker.example");
        assert_eq!(
            detect(&q, false),
            Det::Yes("dns", Some("tracker.example".into()))
        );
        let mut tcp = (q.len() as u16).to_be_bytes().to_vec();
        tcp.extend_from_slice(&q);
        assert_eq!(
            detect(&tcp, true),
            Det::Yes("dns", Some("tracker.example".into()))
        );
        assert_eq!(detect(&tcp[..10], true), Det::More(None));
        let mut resp = q.clone();
        resp[2] |= 0x80;
        assert!(query_name(&resp).is_err());
        let mut ptr = q.clone();
        ptr[12] = 0xc0;
        assert!(query_name(&ptr).is_err());
        assert!(query_name(&q[..q.len() - 1]).is_err());
        let mut trailing = q.clone();
        trailing.push(0);
        assert!(query_name(&trailing).is_err());
        assert_eq!(detect(b"hello world, not dns at all", false), Det::No);
    }
}
