//! Key layout in the state tier (docs/state.md).

use crate::Key;

/// Builds keys for one logical NF of one tenant: `tn:<tenant>:nf:<nf_id>:{<flow-hash>}:<table>`.
///
/// Every key starts with `tn:<tenant>:`, so the tier can confine a tenant's NFs with an ACL user
/// whose key pattern is `~tn:<tenant>:*`. The prefix has no braces: the first `{...}` of a key is
/// its Redis Cluster hash tag, and it must stay the per-flow (or per NF-wide object) one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpace {
    prefix: String,
}

/// The tenant of an NF started without `--tenant`.
pub const DEFAULT_TENANT: &str = "default";

/// Check a tenant name: `[a-z0-9][a-z0-9-]{0,31}` (it becomes part of keys and ACL patterns).
pub fn check_tenant(tenant: &str) -> Result<(), String> {
    let b = tenant.as_bytes();
    let ok = (1..=32).contains(&b.len())
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "tenant {tenant:?} must match [a-z0-9][a-z0-9-]{{0,31}} (lower-case letters, digits, '-')"
        ))
    }
}

impl KeySpace {
    /// The NF `nf_id` of the default tenant ([`DEFAULT_TENANT`]).
    pub fn new(nf_id: &str) -> Result<KeySpace, String> {
        KeySpace::for_tenant(DEFAULT_TENANT, nf_id)
    }

    /// The NF `nf_id` of `tenant` ([`check_tenant`]); `nf_id` must be 1-64 characters free of
    /// ':', '{', '}' and whitespace.
    pub fn for_tenant(tenant: &str, nf_id: &str) -> Result<KeySpace, String> {
        check_tenant(tenant)?;
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
            prefix: format!("tn:{tenant}:nf:{nf_id}:"),
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

    /// Key of NF-wide state (pools, timer sets, config): `tn:<tenant>:nf:<nf_id>:{<name>}` —
    /// its own slot.
    pub fn global(&self, name: &str) -> Key {
        format!("{}{{{}}}", self.prefix, name).into_bytes()
    }

    /// The `tn:<tenant>:nf:<nf_id>:` prefix (for scans in tests and tools).
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
            b"tn:default:nf:fw1:{00000000000000ab}:conn".to_vec()
        );
        assert_eq!(ks.global("timers"), b"tn:default:nf:fw1:{timers}".to_vec());
        assert_eq!(ks.prefix(), "tn:default:nf:fw1:");
        let ks = KeySpace::for_tenant("acme-2", "fw1").unwrap();
        assert_eq!(
            ks.flow(0x0123_4567_89ab_cdef, "ips"),
            b"tn:acme-2:nf:fw1:{0123456789abcdef}:ips".to_vec()
        );
        assert_eq!(
            ks.flow(u64::MAX, "x").capacity(),
            ks.flow(u64::MAX, "x").len()
        );
        for bad in ["", "a:b", "a{b", "a b", "x}"] {
            assert!(KeySpace::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tenants() {
        for good in ["a", "0", "default", "acme-2", "a-", &"x".repeat(32)] {
            assert!(check_tenant(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "-a",
            "A",
            "a_b",
            "a:b",
            "a{b}",
            "a b",
            "a*",
            &"x".repeat(33),
            "é",
        ] {
            let e = check_tenant(bad).unwrap_err();
            assert!(e.contains("tenant"), "{bad}: {e}");
        }
    }
}
