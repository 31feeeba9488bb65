//! What the protocol detectors (TLS, HTTP, DNS, SSH) share: their answer and the host-name check.
//! Pure logic; kept apart from `classify` so that the detectors do not depend on their caller.

/// One detector's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Det {
    /// This protocol; its name (host, SNI, query name, SSH software) if it has one.
    Yes(&'static str, Option<String>),
    /// Cannot tell yet; Some(protocol) when the protocol is clear but its name is not complete.
    More(Option<&'static str>),
    No,
    /// The protocol is clear but its name cannot be parsed (the reason).
    Refused(&'static str, &'static str),
}

/// Lower-cased host name if `v` is one (letters, digits, '-', '_', dots; a trailing dot is
/// dropped; labels 1-63 bytes; at most 253 characters).
pub fn host_name(v: &[u8]) -> Option<String> {
    let v = v.strip_suffix(b".").unwrap_or(v);
    if v.is_empty() || v.len() > 253 {
        return None;
    }
    for label in v.split(|c| *c == b'.') {
        if label.is_empty()
            || label.len() > 63
            || !label
                .iter()
                .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
        {
            return None;
        }
    }
    Some(String::from_utf8_lossy(v).to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names() {
        assert_eq!(host_name(b"A.Example."), Some("a.example".into()));
        for bad in [&b""[..], b".", b"a..b", b"a b", &[b'a'; 64], b"x\xff"] {
            assert_eq!(host_name(bad), None, "{bad:?}");
        }
    }
}
