//! Config loading (JSON) and parsing.
//!
//! Every NF's config is a serde struct with `#[serde(deny_unknown_fields)]`, read by
//! [`parse_nf`]; the runtime options every NF accepts at the top level beside its own fields are
//! declared once, in [`RuntimeConfig`]. The field types here carry the checks: [`Int`] (an
//! integer in a range, with its default), [`List`] (a list with a length range), [`Object`] (a
//! JSON object, never a list), [`config_enum!`](crate::config_enum) (one of a few names). What
//! they cannot check (one field against another, duplicates) the NF checks after parsing, naming
//! the field the same way.
//!
//! An error is one line naming the field's path, then why: `idle_timeout_ms must be an integer in
//! [1, 86400000]`, `rules[0].src: bad address "x"`, `signatures[0].id is required`,
//! `firewall config: unknown field "rulez" (allowed: rules, default, ...)`.

use serde::de::value::MapAccessDeserializer;
use serde::de::{DeserializeOwned, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::fmt;
use std::marker::PhantomData;
use std::net::IpAddr;
use std::path::Path;

#[doc(hidden)]
pub use serde as __serde;

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

/// Parse `v`, the part of a config at `at` (`"block[0]"`), as a `T`: errors name `at` and the
/// path below it.
pub fn parse<T: DeserializeOwned>(v: &Value, at: &str) -> Result<T, String> {
    parse_with(v, at, at, &[])
}

/// Parse an NF's config: its own fields are `T` (a struct with `deny_unknown_fields`), the
/// runtime options ([`RuntimeConfig`]) may stand beside them. The runtime reads those (and checks
/// them, [`RuntimeConfig::from_config`]); `T` never sees them, and an unknown key is refused
/// naming both sets. `what` names the whole config in errors about it (`"lb config"`).
pub fn parse_nf<T: DeserializeOwned>(cfg: &Value, what: &str) -> Result<T, String> {
    let runtime = runtime_keys();
    let own: Map<String, Value> = object(cfg, what)?
        .iter()
        .filter(|(k, _)| !runtime.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    parse_with(&Value::Object(own), what, "", runtime)
}

/// `v` stands at `at` in a config named `what`; `also`: keys its top level takes besides `T`'s.
fn parse_with<T: DeserializeOwned>(
    v: &Value,
    what: &str,
    at: &str,
    also: &[&str],
) -> Result<T, String> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let mut path: Vec<String> = Vec::new();
        if !at.is_empty() {
            path.push(at.to_string());
        }
        path.extend(e.path().iter().map(|s| s.to_string()));
        let top = usize::from(!at.is_empty());
        describe(what, &path, top, &e.inner().to_string(), also)
    })
}

/// `a.b[0].c` from path segments (`a`, `b`, `[0]`, `c`).
fn join(path: &[String]) -> String {
    let mut s = String::new();
    for p in path {
        if !s.is_empty() && !p.starts_with('[') {
            s.push('.');
        }
        s.push_str(p);
    }
    s
}

/// The backquoted names in a serde message (`unknown field `x`, expected `a` or `b``).
fn quoted(msg: &str) -> Vec<&str> {
    msg.split('`').skip(1).step_by(2).collect()
}

/// One line for a parse error: the field at `path` (`what` for the whole config) and why.
/// serde's own messages for unknown and missing fields and wrong types are reworded to the
/// form the rest of the config errors have; `also` are keys accepted at the top level (a path
/// of `top` segments) besides the struct's own: the runtime options.
fn describe(what: &str, path: &[String], top: usize, msg: &str, also: &[&str]) -> String {
    let subject = |p: &[String]| {
        if p.is_empty() {
            what.to_string()
        } else {
            join(p)
        }
    };
    if let Some(rest) = msg.strip_prefix("unknown field `") {
        // The path ends with the unknown key itself.
        let key = rest.split('`').next().unwrap_or_default();
        let parent = &path[..path.len().saturating_sub(1)];
        let mut known: Vec<&str> = match rest.split_once(", expected ") {
            Some((_, exp)) => quoted(exp),
            None => vec![],
        };
        if parent.len() == top {
            known.extend_from_slice(also);
        }
        let known = if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        };
        return format!(
            "{}: unknown field {key:?} (allowed: {known})",
            subject(parent)
        );
    }
    if let Some(rest) = msg.strip_prefix("missing field `") {
        let key = rest.trim_end_matches('`');
        let mut p = path.to_vec();
        p.push(key.to_string());
        return format!("{} is required", join(&p));
    }
    let here = subject(path);
    for kind in ["invalid type: ", "invalid value: ", "invalid length "] {
        if let Some((_, exp)) = msg
            .strip_prefix(kind)
            .and_then(|r| r.rsplit_once(", expected "))
        {
            let exp = match exp {
                "a sequence" => "a list",
                "a boolean" => "true or false",
                "a borrowed string" => "a string",
                e if e.starts_with("struct ") || e == "a map" => "an object",
                e => e,
            };
            return format!("{here} must be {exp}");
        }
    }
    // The field types' own messages: a predicate follows the field's name ("must be ...",
    // "is ...", "needs ..."), a message about a field below it starts with its name
    // (".sni needs proto \"tls\""), anything else is said about it after a colon.
    if msg.starts_with('.') {
        format!("{here}{msg}")
    } else if ["must ", "is ", "needs "]
        .iter()
        .any(|p| msg.starts_with(p))
    {
        format!("{here} {msg}")
    } else {
        format!("{here}: {msg}")
    }
}

/// The field names a derived `Deserialize` struct takes, in declaration order (read from what
/// serde's derive passes to `deserialize_struct`).
pub fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Capture<'a>(&'a mut &'static [&'static str]);
    impl<'de> Deserializer<'de> for Capture<'_> {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(Self::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(Self::Error::custom("fields captured"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Capture(&mut fields));
    fields
}

/// An integer in `[MIN, MAX]`; `DEF` where the field is absent (with `#[serde(default)]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Int<const MIN: u64, const MAX: u64, const DEF: u64 = MIN>(pub u64);

impl<const MIN: u64, const MAX: u64, const DEF: u64> Default for Int<MIN, MAX, DEF> {
    fn default() -> Self {
        Int(DEF)
    }
}

impl<'de, const MIN: u64, const MAX: u64, const DEF: u64> Deserialize<'de> for Int<MIN, MAX, DEF> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Through a JSON value: 3.0, "3" and null are refused as any other non-integer.
        Value::deserialize(d)?
            .as_u64()
            .filter(|n| (MIN..=MAX).contains(n))
            .map(Int)
            .ok_or_else(|| D::Error::custom(format!("must be an integer in [{MIN}, {MAX}]")))
    }
}

/// A JSON list of `MIN` to `MAX` `T`s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct List<T, const MIN: usize = 1, const MAX: usize = { usize::MAX }>(pub Vec<T>);

impl<T, const MIN: usize, const MAX: usize> List<T, MIN, MAX> {
    fn expecting(f: &mut fmt::Formatter) -> fmt::Result {
        if MIN == 1 && MAX == usize::MAX {
            f.write_str("a non-empty list")
        } else {
            write!(f, "a list of {MIN}-{MAX} entries")
        }
    }
}

impl<'de, T: Deserialize<'de>, const MIN: usize, const MAX: usize> Deserialize<'de>
    for List<T, MIN, MAX>
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T, const MIN: usize, const MAX: usize>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>, const MIN: usize, const MAX: usize> Visitor<'de> for V<T, MIN, MAX> {
            type Value = List<T, MIN, MAX>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                List::<T, MIN, MAX>::expecting(f)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = seq.next_element()? {
                    v.push(x);
                }
                if !(MIN..=MAX).contains(&v.len()) {
                    return Err(A::Error::invalid_length(v.len(), &self));
                }
                Ok(List(v))
            }
        }
        d.deserialize_seq(V(PhantomData))
    }
}

/// A JSON object read as the struct `T`. serde's derived structs also take a list of their
/// fields in order (`["allow", "tcp"]` for a rule); a config never means that, so such a value
/// is refused as any other non-object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(V(PhantomData)).map(Object)
    }
}

/// An IP address (v4 or v6), a JSON string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ip(pub IpAddr);

impl<'de> Deserialize<'de> for Ip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Ip, D::Error> {
        Value::deserialize(d)?
            .as_str()
            .and_then(|s| s.parse().ok())
            .map(Ip)
            .ok_or_else(|| D::Error::custom("must be an IP address"))
    }
}

/// Bytes from hex digit pairs (whitespace between them ignored: `"de ad be ef"`).
pub fn parse_hex(s: &str) -> Option<Vec<u8>> {
    let d: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    if !d.len().is_multiple_of(2) {
        return None;
    }
    (0..d.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(d.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Bytes written as hex digit pairs ([`parse_hex`]), a JSON string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hex(pub Vec<u8>);

impl<'de> Deserialize<'de> for Hex {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Hex, D::Error> {
        Value::deserialize(d)?
            .as_str()
            .and_then(parse_hex)
            .map(Hex)
            .ok_or_else(|| D::Error::custom("must be hex digit pairs"))
    }
}

/// The bytes of a signature given as exactly one of `content` (text) or `hex`.
pub fn content_or_hex(content: Option<String>, hex: Option<Hex>) -> Result<Vec<u8>, String> {
    match (content, hex) {
        (Some(text), None) => Ok(text.into_bytes()),
        (None, Some(Hex(bytes))) => Ok(bytes),
        _ => Err("give exactly one of content or hex".into()),
    }
}

/// For `#[serde(default, deserialize_with = "nfcore::config::present")]` on an `Option<T>`: the
/// field may be absent (None), but where it is given it must be a `T` (serde's `Option` would
/// take `null` for absent; a config that says `null` for a number or a string is refused).
pub fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// The index of the JSON string `d` holds in `names`; errors name the alternatives.
#[doc(hidden)]
pub fn one_of<'de, D: Deserializer<'de>>(d: D, names: &[&str]) -> Result<usize, D::Error> {
    match Value::deserialize(d)? {
        Value::String(s) => names.iter().position(|n| *n == s).ok_or_else(|| {
            let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
            let alternatives = match quoted.split_last() {
                Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
                _ => quoted.concat(),
            };
            D::Error::custom(format!("must be {alternatives}, not {s:?}"))
        }),
        _ => Err(D::Error::custom("must be a string")),
    }
}

/// An enum read from one of its names (a JSON string, nothing else); `#[default]` on a variant
/// (with `#[derive(Default)]`) for a field that may be absent.
///
/// ```
/// nfcore::config_enum! {
///     #[derive(Default)]
///     pub enum Claim { #[default] Atomic = "atomic", Pipelined = "pipelined" }
/// }
/// let c: Claim = nfcore::config::parse(&serde_json::json!("pipelined"), "claim").unwrap();
/// assert_eq!(c, Claim::Pipelined);
/// ```
#[macro_export]
macro_rules! config_enum {
    ($(#[$m:meta])* $vis:vis enum $name:ident {
        $($(#[$vm:meta])* $var:ident = $s:literal),+ $(,)?
    }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $vis enum $name { $($(#[$vm])* $var),+ }

        impl $name {
            /// The names the config uses, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($s),+];

            /// This value's name in the config.
            pub fn name(self) -> &'static str {
                match self { $($name::$var => $s),+ }
            }
        }

        impl<'de> $crate::config::__serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::config::__serde::Deserializer<'de>>(
                d: D,
            ) -> ::std::result::Result<Self, D::Error> {
                const ALL: &[$name] = &[$($name::$var),+];
                $crate::config::one_of(d, Self::NAMES).map(|i| ALL[i])
            }
        }
    };
}

/// Default `batch_size`: frames taken from the port per receive at most. 64 rather than 32: the
/// stateless path pays a round trip to Redis per batch, and a full batch of 64 halves it per
/// packet; below saturation the self-clocking intake keeps batches as small as what arrived, so
/// the cap does not add latency there.
pub const DEFAULT_BATCH_SIZE: u64 = 64;

/// Default number of batches in flight on a pipelined store (the runtime's `set_pipeline_depth`).
pub const DEFAULT_PIPELINE_DEPTH: usize = 8;
/// Upper bound of the pipeline depth.
pub const MAX_PIPELINE_DEPTH: usize = 64;

/// The runtime options, valid at the top level of every NF's config (the NF itself does not
/// read them; [`parse_nf`] sets them apart).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    /// Frames per receive at most.
    #[serde(default)]
    pub batch_size: Int<1, 1024, DEFAULT_BATCH_SIZE>,
    #[serde(default)]
    pub fail_mode: crate::FailMode,
    /// How often due timers are claimed.
    #[serde(default)]
    pub timer_interval_ms: Int<1, 3_600_000, 100>,
    /// Wrap the store in a [`flowstore::CachedStore`] (one instance owns each flow at a time).
    #[serde(default)]
    pub owner_cache: bool,
    /// Batches in flight at once on a pipelined store (1 = batch by batch).
    #[serde(default)]
    pub pipeline_depth: Int<1, { MAX_PIPELINE_DEPTH as u64 }, { DEFAULT_PIPELINE_DEPTH as u64 }>,
    /// How long the Redis client spins for a reply before sleeping: an NF with a core of its own
    /// should spin; one under a CPU quota (an sNIC cgroup) may prefer 0.
    #[serde(default)]
    pub spin_us: Int<0, 10_000, 200>,
    /// Hold a CPU wake-up latency request of this bound while the NF runs
    /// ([`crate::cpu_latency`]; 0 keeps idle CPUs polling). Absent or null: leave the host's
    /// idle states alone.
    #[serde(default)]
    pub cpu_latency_us: Option<Int<0, { crate::cpu_latency::MAX_US as u64 }>>,
}

/// The keys of [`RuntimeConfig`].
pub fn runtime_keys() -> &'static [&'static str] {
    static KEYS: std::sync::OnceLock<&'static [&'static str]> = std::sync::OnceLock::new();
    KEYS.get_or_init(field_names::<RuntimeConfig>)
}

impl RuntimeConfig {
    /// The runtime options of an NF config (its other keys are the NF's).
    pub fn from_config(cfg: &Value) -> Result<RuntimeConfig, String> {
        let keys = runtime_keys();
        let mine: Map<String, Value> = object(cfg, "config")?
            .iter()
            .filter(|(k, _)| keys.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        parse_with(&Value::Object(mine), "config", "", &[])
    }

    /// What [`crate::runtime::Runtime::new`] takes.
    pub fn options(&self) -> RuntimeOptions {
        RuntimeOptions {
            batch_size: self.batch_size.0 as usize,
            fail_mode: self.fail_mode,
            timer_interval_ms: self.timer_interval_ms.0,
            owner_cache: self.owner_cache,
        }
    }
}

/// Runtime options the batch loop is built with.
#[derive(Debug, Clone, Copy)]
pub struct RuntimeOptions {
    pub batch_size: usize,
    pub fail_mode: crate::FailMode,
    pub timer_interval_ms: u64,
    /// Wrap the store in a [`flowstore::CachedStore`] (one instance owns each flow at a time).
    pub owner_cache: bool,
}

impl RuntimeOptions {
    pub fn from_config(cfg: &Value) -> Result<RuntimeOptions, String> {
        RuntimeConfig::from_config(cfg).map(|r| r.options())
    }
}

/// `spin_us` of a config ([`RuntimeConfig::spin_us`]).
pub fn spin_us(cfg: &Value) -> Result<u64, String> {
    RuntimeConfig::from_config(cfg).map(|r| r.spin_us.0)
}

/// `cpu_latency_us` of a config ([`RuntimeConfig::cpu_latency_us`]).
pub fn cpu_latency_us(cfg: &Value) -> Result<Option<u32>, String> {
    RuntimeConfig::from_config(cfg).map(|r| r.cpu_latency_us.map(|us| us.0 as u32))
}

/// `pipeline_depth` of a config ([`RuntimeConfig::pipeline_depth`]).
pub fn pipeline_depth(cfg: &Value) -> Result<usize, String> {
    RuntimeConfig::from_config(cfg).map(|r| r.pipeline_depth.0 as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn runtime_options_validate() {
        let ok =
            RuntimeOptions::from_config(&json!({"batch_size": 64, "fail_mode": "open"})).unwrap();
        assert_eq!(ok.batch_size, 64);
        assert_eq!(ok.fail_mode, crate::FailMode::Open);
        let dflt = RuntimeOptions::from_config(&json!({})).unwrap();
        assert_eq!(dflt.batch_size, 64);
        for bad in [
            json!({"batch_size": 0}),
            json!({"batch_size": "x"}),
            json!({"fail_mode": "maybe"}),
            json!([1]),
        ] {
            assert!(RuntimeOptions::from_config(&bad).is_err(), "{bad}");
        }
        assert_eq!(pipeline_depth(&json!({})).unwrap(), 8);
        assert_eq!(pipeline_depth(&json!({"pipeline_depth": 16})).unwrap(), 16);
        for bad in [0, 65] {
            let e = pipeline_depth(&json!({ "pipeline_depth": bad })).unwrap_err();
            assert!(e.contains("pipeline_depth"), "{e}");
        }
        let lat = |v: Value| cpu_latency_us(&v);
        assert_eq!(lat(json!({})).unwrap(), None);
        assert_eq!(lat(json!({"cpu_latency_us": null})).unwrap(), None);
        assert_eq!(lat(json!({"cpu_latency_us": 0})).unwrap(), Some(0));
        assert_eq!(lat(json!({"cpu_latency_us": 50})).unwrap(), Some(50));
        for bad in [
            json!({"cpu_latency_us": -1}),
            json!({"cpu_latency_us": 1_000_001}),
            json!({"cpu_latency_us": "0"}),
        ] {
            let e = lat(bad.clone()).unwrap_err();
            assert!(e.contains("cpu_latency_us"), "{bad}: {e}");
        }
    }

    #[test]
    fn runtime_keys_are_the_fields_of_runtime_config() {
        assert_eq!(
            runtime_keys(),
            [
                "batch_size",
                "fail_mode",
                "timer_interval_ms",
                "owner_cache",
                "pipeline_depth",
                "spin_us",
                "cpu_latency_us"
            ]
        );
        // Other keys are the NF's: not the runtime's business.
        assert!(RuntimeConfig::from_config(&json!({"rules": 5, "spin_us": 0})).is_ok());
    }

    #[test]
    fn runtime_errors_name_the_field_and_the_rule() {
        let e = |v: Value| RuntimeConfig::from_config(&v).unwrap_err();
        assert_eq!(
            e(json!({"batch_size": 0})),
            "batch_size must be an integer in [1, 1024]"
        );
        assert_eq!(
            e(json!({"fail_mode": "maybe"})),
            "fail_mode must be \"closed\" or \"open\", not \"maybe\""
        );
        assert_eq!(e(json!({"fail_mode": 1})), "fail_mode must be a string");
        assert_eq!(
            e(json!({"owner_cache": "yes"})),
            "owner_cache must be true or false"
        );
        assert_eq!(
            e(json!({"spin_us": 10_001})),
            "spin_us must be an integer in [0, 10000]"
        );
        assert_eq!(e(json!(5)), "config must be an object");
    }

    config_enum! {
        #[derive(Default)]
        enum Mode { #[default] Keep = "keep", Drop = "drop", Flip = "flip" }
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Item {
        name: String,
        #[serde(default)]
        weight: Int<1, 10, 5>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        items: List<Object<Item>, 1, 3>,
        #[serde(default)]
        mode: Mode,
        #[serde(default)]
        on: bool,
        #[serde(default, deserialize_with = "present")]
        note: Option<String>,
        #[serde(default)]
        tags: Vec<String>,
    }

    fn doc(v: Value) -> Result<Doc, String> {
        parse_nf(&v, "doc config")
    }

    #[test]
    fn accepted_values_and_defaults() {
        let d = doc(json!({"items": [{"name": "a"}, {"name": "b", "weight": 10}]})).unwrap();
        assert_eq!(d.items.0.len(), 2);
        assert_eq!(d.items.0[0].0.name, "a");
        assert_eq!(d.items.0[0].0.weight, Int(5));
        assert_eq!(d.items.0[1].0.weight, Int(10));
        assert_eq!(
            (d.mode, d.on, d.note, d.tags.len()),
            (Mode::Keep, false, None, 0)
        );
        let d = doc(
            json!({"items": [{"name": "a"}], "mode": "flip", "on": true, "note": "n",
                           "batch_size": 8, "owner_cache": "not checked here"}),
        )
        .unwrap();
        assert_eq!(
            (d.mode, d.on, d.note.as_deref()),
            (Mode::Flip, true, Some("n"))
        );
        assert_eq!(Mode::NAMES, ["keep", "drop", "flip"]);
        assert_eq!(Mode::Drop.name(), "drop");
    }

    #[test]
    fn refused_values_name_the_field_and_why() {
        let runtime = runtime_keys().join(", ");
        for (v, want) in [
            (json!(5), "doc config must be an object".to_string()),
            (
                json!({"items": [{"name": "a"}], "itemz": 1}),
                format!("doc config: unknown field \"itemz\" (allowed: items, mode, on, note, tags, {runtime})"),
            ),
            (
                json!({"items": [{"name": "a", "wieght": 1}]}),
                "items[0]: unknown field \"wieght\" (allowed: name, weight)".into(),
            ),
            (json!({}), "items is required".into()),
            (json!({"items": [{}]}), "items[0].name is required".into()),
            (json!({"items": []}), "items must be a list of 1-3 entries".into()),
            (
                json!({"items": [{"name": "a"}, {"name": "a"}, {"name": "a"}, {"name": "a"}]}),
                "items must be a list of 1-3 entries".into(),
            ),
            (json!({"items": {"name": "a"}}), "items must be a list of 1-3 entries".into()),
            (json!({"items": [5]}), "items[0] must be an object".into()),
            // A list of the fields in order is no object.
            (json!({"items": [["a", 3]]}), "items[0] must be an object".into()),
            (json!({"items": [{"name": 5}]}), "items[0].name must be a string".into()),
            (
                json!({"items": [{"name": "a", "weight": 11}]}),
                "items[0].weight must be an integer in [1, 10]".into(),
            ),
            (
                json!({"items": [{"name": "a", "weight": 3.0}]}),
                "items[0].weight must be an integer in [1, 10]".into(),
            ),
            (
                json!({"items": [{"name": "a", "weight": null}]}),
                "items[0].weight must be an integer in [1, 10]".into(),
            ),
            (
                json!({"items": [{"name": "a"}], "mode": "x"}),
                "mode must be \"keep\", \"drop\" or \"flip\", not \"x\"".into(),
            ),
            (json!({"items": [{"name": "a"}], "mode": null}), "mode must be a string".into()),
            (
                json!({"items": [{"name": "a"}], "mode": {"keep": null}}),
                "mode must be a string".into(),
            ),
            (json!({"items": [{"name": "a"}], "on": 1}), "on must be true or false".into()),
            (json!({"items": [{"name": "a"}], "note": null}), "note must be a string".into()),
            (json!({"items": [{"name": "a"}], "tags": "x"}), "tags must be a list".into()),
            (json!({"items": [{"name": "a"}], "tags": [1]}), "tags[0] must be a string".into()),
        ] {
            assert_eq!(doc(v.clone()).unwrap_err(), want, "{v}");
        }
    }

    #[test]
    fn hex_pairs_with_any_whitespace_between() {
        assert_eq!(
            parse_hex("de ad\tbe\u{a0}ef"),
            Some(vec![0xde, 0xad, 0xbe, 0xef])
        );
        assert_eq!(parse_hex(""), Some(vec![]));
        for bad in ["abc", "zz", "\u{e9}\u{e9}"] {
            assert_eq!(parse_hex(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_part_parsed_alone_is_named_by_where_it_stands() {
        let e = |v: Value| parse::<Object<Item>>(&v, "items[3]").unwrap_err();
        assert_eq!(e(json!({"name": 5})), "items[3].name must be a string");
        assert_eq!(e(json!({})), "items[3].name is required");
        assert_eq!(e(json!([])), "items[3] must be an object");
        assert_eq!(
            e(json!({"name": "a", "x": 1})),
            "items[3]: unknown field \"x\" (allowed: name, weight)"
        );
    }

    #[test]
    fn messages_of_other_kinds_follow_the_field_after_a_colon() {
        let p = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            describe(
                "c",
                &p(&["rules", "[0]", "src"]),
                0,
                "bad address \"x\"",
                &[]
            ),
            "rules[0].src: bad address \"x\""
        );
        assert_eq!(
            describe("c", &p(&["a"]), 0, "needs proto \"tls\"", &[]),
            "a needs proto \"tls\""
        );
        assert_eq!(
            describe("c", &p(&["a", "[1]"]), 0, ".sni needs proto \"tls\"", &[]),
            "a[1].sni needs proto \"tls\""
        );
        assert_eq!(describe("c", &[], 0, "give one", &[]), "c: give one");
        assert_eq!(
            describe(
                "c",
                &p(&["x", "y"]),
                0,
                "unknown field `y`, there are no fields",
                &[]
            ),
            "x: unknown field \"y\" (allowed: none)"
        );
    }
}
