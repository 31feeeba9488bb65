//! Key layout in the state tier (docs/state.md).

use crate::Key;

/// Builds keys for one logical NF: `nf:<nf_id>:{<flow-hash>}:<table>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpace {
    prefix: String,
}

impl KeySpace {
    /// `nf_id` must be non-empty and free of ':', '{', '}' and whitespace.
    pub fn new(nf_id: &str) -> Result<KeySpace, String> {
        if nf_id.is_empty()
            || nf_id.len() > 64
            || nf_id
                .chars()
                .any(|c| c == ':' || c == '{' || c == '}' || c.is_whitespace() || c.is_control())
        {
            return Err(format!(
                "nf-id {nf_id:?} must be 1-64 characters without ':', '{{', '}}' or spaces"
            ));
        }
        Ok(KeySpace {
            prefix: format!("nf:{nf_id}:"),
        })
    }

    /// Key of `table` for the flow with (bidirectional) hash `flow_hash`.
    pub fn flow(&self, flow_hash: u64, table: &str) -> Key {
        // Built for every packet (its read set, then its processing): one allocation of the
        // exact size and whole-slice copies (a push per hex digit cost ~300 instructions a key).
        let mut k = Vec::with_capacity(self.prefix.len() + 19 + table.len());
        k.extend_from_slice(self.prefix.as_bytes());
        k.push(b'{');
        k.extend_from_slice(&hex16(flow_hash));
        k.extend_from_slice(b"}:");
        k.extend_from_slice(table.as_bytes());
        k
    }

    /// Key of NF-wide state (pools, timer sets, config): `nf:<nf_id>:{<name>}` — its own slot.
    pub fn global(&self, name: &str) -> Key {
        format!("{}{{{}}}", self.prefix, name).into_bytes()
    }

    /// The `nf:<nf_id>:` prefix (for scans in tests and tools).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

/// `v` as 16 lower-case hex digits.
fn hex16(v: u64) -> [u8; 16] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 16];
    for (i, d) in out.iter_mut().enumerate() {
        *d = HEX[((v >> ((15 - i) * 4)) & 0xf) as usize];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let ks = KeySpace::new("fw1").unwrap();
        assert_eq!(
            ks.flow(0xab, "conn"),
            b"nf:fw1:{00000000000000ab}:conn".to_vec()
        );
        assert_eq!(ks.global("timers"), b"nf:fw1:{timers}".to_vec());
        assert_eq!(
            ks.flow(0x0123_4567_89ab_cdef, "ips"),
            b"nf:fw1:{0123456789abcdef}:ips".to_vec()
        );
        assert_eq!(
            ks.flow(u64::MAX, "x").capacity(),
            ks.flow(u64::MAX, "x").len()
        );
        for bad in ["", "a:b", "a{b", "a b", "x}"] {
            assert!(KeySpace::new(bad).is_err(), "{bad}");
        }
    }
}
