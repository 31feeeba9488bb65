//! Policy: which classified flows are blocked. Pure logic.
//!
//! `allow` rules are checked first (exceptions), then `block` rules, then `default`. A rule is
//! `{"proto": "tls"}` (every flow of that protocol; `"any"` for every protocol) or with a name
//! pattern: `sni` (tls), `host` (http), `qname` (dns) or `name` (any protocol's name). Patterns
//! are case-insensitive: `bad.example` (exactly), `*.bad.example` (any name below it, not
//! `bad.example` itself) or `*` (any name). A rule with a pattern never matches a flow whose
//! name is unknown. Flows whose protocol was recognised but whose name could not be parsed
//! (malformed, or incomplete at the inspection limit) follow `unparsed` (default `"block"`).

use crate::classify::Class;
use nfcore::config::{present, Object};
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    Any,
    Exact(String),
    /// `*.suffix`: stored as ".suffix".
    Below(String),
}

impl Pattern {
    pub fn parse(s: &str) -> Result<Pattern, String> {
        let s = s.trim_end_matches('.').to_ascii_lowercase();
        if s == "*" {
            return Ok(Pattern::Any);
        }
        let (below, rest) = match s.strip_prefix("*.") {
            Some(r) => (true, r.to_string()),
            None => (false, s.clone()),
        };
        if rest.is_empty() || rest.contains('*') {
            return Err(format!("bad name pattern {s:?} (use name, *.suffix or *)"));
        }
        Ok(if below {
            Pattern::Below(format!(".{rest}"))
        } else {
            Pattern::Exact(rest)
        })
    }

    pub fn matches(&self, name: &str) -> bool {
        let name = name.trim_end_matches('.');
        match self {
            Pattern::Any => true,
            Pattern::Exact(e) => name.eq_ignore_ascii_case(e),
            Pattern::Below(sfx) => {
                name.len() > sfx.len()
                    && name.as_bytes()[name.len() - sfx.len()..]
                        .eq_ignore_ascii_case(sfx.as_bytes())
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// None = any protocol.
    pub proto: Option<String>,
    pub name: Option<Pattern>,
}

/// A rule as the config writes it: a protocol and at most one name pattern.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    proto: String,
    #[serde(default, deserialize_with = "present")]
    sni: Option<String>,
    #[serde(default, deserialize_with = "present")]
    host: Option<String>,
    #[serde(default, deserialize_with = "present")]
    qname: Option<String>,
    #[serde(default, deserialize_with = "present")]
    name: Option<String>,
}

impl Rule {
    /// Parse `v`, the rule at `what` (e.g. `block[2]`); `known` are the protocol names.
    pub fn from_json(v: &Value, what: &str, known: &[String]) -> Result<Rule, String> {
        let Object(c) = nfcore::config::parse(v, what)?;
        Rule::from_config(c, what, known)
    }

    /// The rule at `what` (e.g. `block[2]`); `known` are the protocol names.
    pub fn from_config(c: RuleConfig, what: &str, known: &[String]) -> Result<Rule, String> {
        let proto = c.proto;
        if proto != "any" && !known.contains(&proto) {
            return Err(format!(
                "{what}.proto: {proto:?} is not known (known: any, {})",
                known.join(", ")
            ));
        }
        let mut name = None;
        // (in the order of the field names: which error a rule with several gets is fixed)
        for (k, val, field_proto) in [
            ("host", c.host, Some("http")),
            ("name", c.name, None),
            ("qname", c.qname, Some("dns")),
            ("sni", c.sni, Some("tls")),
        ] {
            let Some(val) = val else { continue };
            if let Some(fp) = field_proto {
                if proto != fp {
                    return Err(format!("{what}.{k} needs proto {fp:?}"));
                }
            }
            if name.is_some() {
                return Err(format!("{what}: at most one name pattern"));
            }
            name = Some(Pattern::parse(&val).map_err(|e| format!("{what}.{k}: {e}"))?);
        }
        Ok(Rule {
            proto: (proto != "any").then_some(proto),
            name,
        })
    }

    pub fn matches(&self, c: &Class) -> bool {
        if self.proto.as_deref().is_some_and(|p| p != c.proto) {
            return false;
        }
        match (&self.name, &c.name) {
            (None, _) => true,
            (Some(p), Some(n)) => p.matches(n),
            (Some(_), None) => false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    pub allow: Vec<Rule>,
    pub block: Vec<Rule>,
    pub default_block: bool,
    pub unparsed_block: bool,
}

impl Policy {
    /// Whether a flow of class `c` is blocked.
    pub fn blocks(&self, c: &Class) -> bool {
        if c.refused.is_some() {
            return self.unparsed_block;
        }
        if self.allow.iter().any(|r| r.matches(c)) {
            return false;
        }
        if self.block.iter().any(|r| r.matches(c)) {
            return true;
        }
        self.default_block
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(p: &str, n: Option<&str>) -> Class {
        Class {
            proto: p.into(),
            name: n.map(String::from),
            refused: None,
        }
    }

    #[test]
    fn patterns() {
        let p = Pattern::parse("*.Bad.Example.").unwrap();
        assert!(p.matches("x.bad.example") && p.matches("a.b.BAD.example."));
        assert!(!p.matches("bad.example") && !p.matches("xbad.example"));
        assert!(Pattern::parse("bad.example")
            .unwrap()
            .matches("BAD.example"));
        assert!(Pattern::parse("*").unwrap().matches("anything"));
        for bad in ["", "a.*.b", "**", "*.*"] {
            assert!(Pattern::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn allow_then_block_then_default() {
        let known: Vec<String> = ["tls", "http", "dns", "ssh", "unknown"]
            .map(String::from)
            .into();
        let r = |v: Value| Rule::from_json(&v, "block[0]", &known).unwrap();
        let pol = Policy {
            allow: vec![r(
                serde_json::json!({"proto": "tls", "sni": "good.bad.example"}),
            )],
            block: vec![
                r(serde_json::json!({"proto": "tls", "sni": "*.bad.example"})),
                r(serde_json::json!({"proto": "ssh"})),
                r(serde_json::json!({"proto": "any", "name": "evil.example"})),
            ],
            default_block: false,
            unparsed_block: true,
        };
        assert!(pol.blocks(&class("tls", Some("x.bad.example"))));
        assert!(!pol.blocks(&class("tls", Some("good.bad.example"))));
        assert!(!pol.blocks(&class("tls", None)), "a pattern needs a name");
        assert!(pol.blocks(&class("ssh", None)));
        assert!(pol.blocks(&class("http", Some("evil.example"))));
        assert!(!pol.blocks(&class("http", Some("ok.example"))));
        let mut refused = class("tls", None);
        refused.refused = Some("bad".into());
        assert!(pol.blocks(&refused));
        for (v, field) in [
            (serde_json::json!({"proto": "http", "sni": "x"}), "sni"),
            (serde_json::json!({"proto": "quic"}), "proto"),
            (serde_json::json!({"proto": "tls", "sni": "a.*"}), "sni"),
            (
                serde_json::json!({"proto": "tls", "sni": "a", "name": "b"}),
                "name pattern",
            ),
            (serde_json::json!({"proto": "tls", "port": 1}), "port"),
        ] {
            let e = Rule::from_json(&v, "block[0]", &known).unwrap_err();
            assert!(e.contains(field) && e.contains("block[0]"), "{v}: {e}");
        }
    }
}
