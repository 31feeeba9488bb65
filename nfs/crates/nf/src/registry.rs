//! NF types known to the `nf` binary. To add an NF: one match arm here (and the crate in
//! Cargo.toml).

use nfcore::NetworkFunction;
use serde_json::Value;

/// Type names accepted on the command line.
pub const TYPES: &[&str] = &["firewall", "nat", "monitor", "ipsec"];

/// Build the NF `kind` from its validated config.
pub fn make_nf(kind: &str, cfg: &Value) -> Result<Box<dyn NetworkFunction>, String> {
    Ok(match kind {
        "firewall" => Box::new(nf_firewall::Firewall::from_config(cfg)?),
        "nat" => Box::new(nf_nat::Nat::from_config(cfg)?),
        "monitor" => Box::new(nf_monitor::Monitor::from_config(cfg)?),
        "ipsec" => Box::new(nf_ipsec::Ipsec::from_config(cfg)?),
        _ => {
            return Err(format!(
                "unknown NF type {kind:?} (known: {})",
                TYPES.join(", ")
            ))
        }
    })
}
