//! NF types known to the `nf` binary. To add an NF: one match arm here (and the crate in
//! Cargo.toml).

use nfcore::NetworkFunction;
use serde_json::Value;

/// Type names accepted on the command line (also listed in `args::USAGE`).
pub const TYPES: &[&str] = &["firewall", "nat", "monitor", "lb", "ips", "l7fw", "ipsec"];

/// Build the NF `kind` from its validated config.
pub fn make_nf(kind: &str, cfg: &Value) -> Result<Box<dyn NetworkFunction>, String> {
    Ok(match kind {
        "firewall" => Box::new(nf_firewall::Firewall::from_config(cfg)?),
        "nat" => Box::new(nf_nat::Nat::from_config(cfg)?),
        "monitor" => Box::new(nf_monitor::Monitor::from_config(cfg)?),
        "lb" => Box::new(nf_lb::LoadBalancer::from_config(cfg)?),
        "ips" => Box::new(nf_ips::Ips::from_config(cfg)?),
        "l7fw" => Box::new(nf_l7fw::L7Firewall::from_config(cfg)?),
        "ipsec" => Box::new(nf_ipsec::Ipsec::from_config(cfg)?),
        _ => {
            return Err(format!(
                "unknown NF type {kind:?} (known: {})",
                TYPES.join(", ")
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_is_built_and_named_in_the_usage() {
        for t in TYPES {
            assert!(crate::args::USAGE.contains(t), "{t} missing from the usage");
            // An empty config is invalid for some NFs, but never an unknown type.
            if let Err(e) = make_nf(t, &serde_json::json!({})) {
                assert!(!e.contains("unknown NF type"), "{t}: {e}");
            }
        }
        assert!(make_nf("teleporter", &serde_json::json!({})).is_err());
    }
}
