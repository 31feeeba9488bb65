//! `POST /hold?buffer=N`: a running instance starts queueing what it receives (at most `N`
//! frames; more are counted as `buffer_overflow`) until `POST /release` processes the queue in
//! arrival order. A scale-in asks it of the instances that stay, before the flows of the leaving
//! ones move to them, and releases them once the leaving ones have drained: a packet of a moved
//! flow never overtakes one still inside its old instance.

/// Upper bound of `buffer` (as `--buffer`: frames are copied into the queue).
pub const MAX_BUFFER: u64 = 10_000_000;

/// `buffer` (required, 1..=[`MAX_BUFFER`]) from a request's query string; the error names the
/// field.
pub fn parse_query(query: &str) -> Result<usize, (&'static str, String)> {
    let mut buffer = None;
    for kv in query.split('&').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        if k != "buffer" {
            return Err(("query", format!("unknown parameter {k:?} (buffer)")));
        }
        if buffer.is_some() {
            return Err(("buffer", "buffer given twice".into()));
        }
        match v.parse::<u64>() {
            Ok(n) if (1..=MAX_BUFFER).contains(&n) => buffer = Some(n as usize),
            _ => {
                return Err((
                    "buffer",
                    format!("buffer must be an integer 1..{MAX_BUFFER}, not {v:?}"),
                ))
            }
        }
    }
    buffer.ok_or(("buffer", "buffer is required".to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_is_validated() {
        assert_eq!(parse_query("buffer=100000"), Ok(100_000));
        for (q, field) in [
            ("", "buffer"),
            ("buffer=0", "buffer"),
            ("buffer=-1", "buffer"),
            ("buffer=10000001", "buffer"),
            ("buffer=x", "buffer"),
            ("buffer=5&buffer=5", "buffer"),
            ("buffer=5&quiet_ms=1", "query"),
        ] {
            assert_eq!(parse_query(q).unwrap_err().0, field, "{q}");
        }
    }
}
