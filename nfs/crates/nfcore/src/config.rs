//! Config loading (JSON) and validation helpers. Errors name the offending field.

use serde_json::{Map, Value};
use std::path::Path;

/// Read a JSON object from `path`.
pub fn load(path: &Path) -> Result<Value, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("config {}: {e}", path.display()))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| format!("config {}: invalid JSON: {e}", path.display()))?;
    if !v.is_object() {
        return Err(format!("config {}: must be a JSON object", path.display()));
    }
    Ok(v)
}

/// The object itself; error if `v` is not an object.
pub fn object<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, String> {
    v.as_object()
        .ok_or_else(|| format!("{what} must be an object"))
}

/// Reject keys not in `allowed` (catches typos).
pub fn only_keys(obj: &Map<String, Value>, allowed: &[&str], what: &str) -> Result<(), String> {
    for k in obj.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(format!(
                "{what}: unknown field {k:?} (allowed: {})",
                allowed.join(", ")
            ));
        }
    }
    Ok(())
}

/// Optional unsigned integer field within [min, max].
pub fn opt_u64(
    obj: &Map<String, Value>,
    key: &str,
    default: u64,
    min: u64,
    max: u64,
) -> Result<u64, String> {
    match obj.get(key) {
        None => Ok(default),
        Some(v) => match v.as_u64() {
            Some(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(format!("{key} must be an integer in [{min}, {max}]")),
        },
    }
}

/// Optional string field.
pub fn opt_str<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
    default: &'a str,
) -> Result<&'a str, String> {
    match obj.get(key) {
        None => Ok(default),
        Some(v) => v.as_str().ok_or_else(|| format!("{key} must be a string")),
    }
}

/// Default `batch_size`: frames taken from the port per receive at most. 64 rather than 32: the
/// stateless path pays a kernel round trip to Redis per batch, and a full batch of 64 halves it per
/// packet (bench/RESULTS.md `nfs`, "Default batch size"); below saturation the self-clocking intake
/// keeps batches as small as what arrived, so the cap does not add latency there.
pub const DEFAULT_BATCH_SIZE: u64 = 64;

/// Runtime options common to all NFs (top level of the config; NFs ignore them).
#[derive(Debug, Clone, Copy)]
pub struct RuntimeOptions {
    pub batch_size: usize,
    pub fail_mode: crate::FailMode,
    pub timer_interval_ms: u64,
    /// Wrap the store in a [`flowstore::CachedStore`] (one instance owns each flow at a time).
    pub owner_cache: bool,
}

/// Field names of [`RuntimeOptions`], for `only_keys` lists of NFs.
pub const RUNTIME_KEYS: &[&str] = &[
    "batch_size",
    "fail_mode",
    "timer_interval_ms",
    "owner_cache",
    "pipeline_depth",
    "spin_us",
    "cpu_latency_us",
];

/// `spin_us` (0-10000, default 200): how long the Redis client spins for a reply before sleeping.
/// An NF with a core of its own should spin; one under a CPU quota (an sNIC cgroup) may prefer 0.
pub fn spin_us(cfg: &Value) -> Result<u64, String> {
    opt_u64(object(cfg, "config")?, "spin_us", 200, 0, 10_000)
}

/// `cpu_latency_us` (0-1000000, default none): hold a CPU wake-up latency request of this bound
/// while the NF runs ([`crate::cpu_latency`]; 0 keeps idle CPUs polling). None: leave the host's
/// idle states alone.
pub fn cpu_latency_us(cfg: &Value) -> Result<Option<u32>, String> {
    let o = object(cfg, "config")?;
    if o.get("cpu_latency_us").is_none_or(Value::is_null) {
        return Ok(None);
    }
    let max = u64::from(crate::cpu_latency::MAX_US);
    Ok(Some(opt_u64(o, "cpu_latency_us", 0, 0, max)? as u32))
}

/// `pipeline_depth` (1-64, default [`crate::runtime::DEFAULT_PIPELINE_DEPTH`]): batches in
/// flight at once on a pipelined store (kept apart from [`RuntimeOptions`] so code that builds
/// that struct literally keeps compiling).
pub fn pipeline_depth(cfg: &Value) -> Result<usize, String> {
    let o = object(cfg, "config")?;
    Ok(opt_u64(
        o,
        "pipeline_depth",
        crate::runtime::DEFAULT_PIPELINE_DEPTH as u64,
        1,
        crate::runtime::MAX_PIPELINE_DEPTH as u64,
    )? as usize)
}

impl RuntimeOptions {
    pub fn from_config(cfg: &Value) -> Result<RuntimeOptions, String> {
        let o = object(cfg, "config")?;
        Ok(RuntimeOptions {
            batch_size: opt_u64(o, "batch_size", DEFAULT_BATCH_SIZE, 1, 1024)? as usize,
            fail_mode: opt_str(o, "fail_mode", "closed")?.parse()?,
            timer_interval_ms: opt_u64(o, "timer_interval_ms", 100, 1, 3_600_000)?,
            owner_cache: match o.get("owner_cache") {
                None => false,
                Some(v) => v.as_bool().ok_or("owner_cache must be true or false")?,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_options_validate() {
        let ok = RuntimeOptions::from_config(
            &serde_json::json!({"batch_size": 64, "fail_mode": "open"}),
        )
        .unwrap();
        assert_eq!(ok.batch_size, 64);
        assert_eq!(ok.fail_mode, crate::FailMode::Open);
        let dflt = RuntimeOptions::from_config(&serde_json::json!({})).unwrap();
        assert_eq!(dflt.batch_size, 64);
        for bad in [
            serde_json::json!({"batch_size": 0}),
            serde_json::json!({"batch_size": "x"}),
            serde_json::json!({"fail_mode": "maybe"}),
            serde_json::json!([1]),
        ] {
            assert!(RuntimeOptions::from_config(&bad).is_err(), "{bad}");
        }
        assert_eq!(pipeline_depth(&serde_json::json!({})).unwrap(), 8);
        assert_eq!(
            pipeline_depth(&serde_json::json!({"pipeline_depth": 16})).unwrap(),
            16
        );
        for bad in [0, 65] {
            let e = pipeline_depth(&serde_json::json!({ "pipeline_depth": bad })).unwrap_err();
            assert!(e.contains("pipeline_depth"), "{e}");
        }
        let lat = |v: serde_json::Value| cpu_latency_us(&v);
        assert_eq!(lat(serde_json::json!({})).unwrap(), None);
        assert_eq!(
            lat(serde_json::json!({"cpu_latency_us": null})).unwrap(),
            None
        );
        assert_eq!(
            lat(serde_json::json!({"cpu_latency_us": 0})).unwrap(),
            Some(0)
        );
        assert_eq!(
            lat(serde_json::json!({"cpu_latency_us": 50})).unwrap(),
            Some(50)
        );
        for bad in [
            serde_json::json!({"cpu_latency_us": -1}),
            serde_json::json!({"cpu_latency_us": 1_000_001}),
            serde_json::json!({"cpu_latency_us": "0"}),
        ] {
            let e = lat(bad.clone()).unwrap_err();
            assert!(e.contains("cpu_latency_us"), "{bad}: {e}");
        }
        let o = serde_json::json!({"a": 1, "zz": 2});
        let e = only_keys(o.as_object().unwrap(), &["a"], "firewall").unwrap_err();
        assert!(e.contains("zz"), "{e}");
    }
}
