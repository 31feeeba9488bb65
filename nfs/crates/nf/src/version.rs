//! What this `nf` binary is: its version and the state schema (record layouts) it writes and
//! reads per NF type, for the agent's live update (`nf --state-schema`), which refuses a version
//! that cannot read the state the running one wrote.
//!
//! Build-time knobs (read by `option_env!`, so a changed value rebuilds this crate only):
//! - `UNO_NF_VERSION`: the version string (default: the crate's version). Tests build a second
//!   binary of the same source with another version to roll to and back.
//! - `UNO_NF_TEST_STATE_LAYOUT=N` (N > the current layouts): declare writing layout N and reading
//!   it besides the built-in ones, as a future version that changed its records would. For tests
//!   of the refusal only: the records are still encoded in the current layout.

use serde_json::{json, Value};

/// The version string of this build.
pub fn version() -> &'static str {
    option_env!("UNO_NF_VERSION").unwrap_or(env!("CARGO_PKG_VERSION"))
}

/// Record layouts of the per-flow state: (type, layout written, layouts read). Layout 0 is the
/// one before the per-record version byte / track (the decoders still read it), 1 the current
/// (the LB's 2: its shared pool, below).
const LAYOUTS: &[(&str, u32, &[u32])] = &[
    ("firewall", 1, &[0, 1]),
    ("nat", 1, &[0, 1]),
    // 2: the backend pool may hold `drain` entries (a backend removed by a config change).
    ("lb", 2, &[0, 1, 2]),
    ("ips", 1, &[0, 1]),
    ("l7fw", 1, &[0, 1]),
    ("monitor", 1, &[1]),
    ("ipsec", 1, &[1]),
];

/// Layout of the local store's state snapshot (`GET /state`, a move of a local-state NF).
const SNAPSHOT_LAYOUT: u32 = 1;

fn test_layout() -> Option<u32> {
    option_env!("UNO_NF_TEST_STATE_LAYOUT").and_then(|s| s.parse().ok())
}

/// `nf --state-schema`: `{"version", "snapshot", "types": {TYPE: {"writes", "reads"}}}`.
pub fn schema() -> Value {
    let extra = test_layout();
    let types: serde_json::Map<String, Value> = LAYOUTS
        .iter()
        .map(|(t, w, r)| {
            let mut reads = r.to_vec();
            reads.extend(extra);
            (
                t.to_string(),
                json!({"writes": extra.unwrap_or(*w), "reads": reads}),
            )
        })
        .collect();
    json!({"version": version(), "snapshot": SNAPSHOT_LAYOUT, "types": types})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_has_a_schema_that_reads_what_it_writes() {
        let s = schema();
        for t in crate::registry::TYPES {
            let e = &s["types"][*t];
            let w = e["writes"].as_u64().unwrap();
            assert!(
                e["reads"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r.as_u64() == Some(w)),
                "{t}"
            );
        }
        assert_eq!(s["version"], version());
    }
}
