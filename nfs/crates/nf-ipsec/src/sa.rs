//! Static security associations from the NF config, validated (errors name the field).

use crate::esp::Cipher;
use nf_firewall::rules::Cidr;
use nfcore::config::{parse_nf, Int, List, Object};
use serde::de::{Deserializer, Error as _};
use serde::Deserialize;
use serde_json::Value;
use std::net::{IpAddr, Ipv4Addr};

nfcore::config_enum! {
    /// Direction of an SA.
    pub enum Dir {
        /// Accept ESP arriving through the tunnel.
        In = "in",
        /// Protect matching cleartext leaving through the tunnel.
        Out = "out",
    }
}

/// Which inner traffic an SA carries: source and destination prefixes (`{"src": "10.1.0.0/16",
/// "dst": "10.2.0.0/16"}`, each `any` when absent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(from = "Object<SelectorConfig>")]
pub struct Selector {
    pub src: Cidr,
    pub dst: Cidr,
}

/// A selector as the config writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelectorConfig {
    #[serde(default, deserialize_with = "prefix")]
    src: Cidr,
    #[serde(default, deserialize_with = "prefix")]
    dst: Cidr,
}

impl From<Object<SelectorConfig>> for Selector {
    fn from(Object(c): Object<SelectorConfig>) -> Selector {
        Selector {
            src: c.src,
            dst: c.dst,
        }
    }
}

/// A selector's prefix: a string ("any" or a prefix). Anything else is refused: read as `any` it
/// would widen the selector to every packet (fail closed, never open).
fn prefix<'de, D: Deserializer<'de>>(d: D) -> Result<Cidr, D::Error> {
    match Value::deserialize(d)? {
        Value::String(s) => Cidr::parse(&s).map_err(D::Error::custom),
        other => Err(D::Error::custom(format!(
            "must be a string (a prefix or \"any\"), not {other}"
        ))),
    }
}

/// An SA's name: a label for people, a string when given.
fn string_or_empty<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match Value::deserialize(d)? {
        Value::String(s) => Ok(s),
        other => Err(D::Error::custom(format!("must be a string, not {other}"))),
    }
}

impl Selector {
    pub fn matches(&self, src: IpAddr, dst: IpAddr) -> bool {
        self.src.contains(src) && self.dst.contains(dst)
    }
}

/// One SA. In a config: `{"name": "a-to-b", "dir": "out"|"in", "spi": 4097, "key": "<32 or 64
/// hex digits>", "salt": "<8 hex digits>", "tunnel_src": "203.0.113.1", "tunnel_dst":
/// "203.0.113.2", "selectors": [...]}`.
#[derive(Deserialize)]
#[serde(try_from = "Object<SaConfig>")]
pub struct Sa {
    pub name: String,
    pub dir: Dir,
    pub spi: u32,
    pub cipher: Cipher,
    pub salt: [u8; 4],
    /// Outer addresses: this gateway and the peer for `Out`, the peer and this gateway for `In`.
    pub tunnel_src: Ipv4Addr,
    pub tunnel_dst: Ipv4Addr,
    pub selectors: Vec<Selector>,
}

impl Sa {
    pub fn matches(&self, src: IpAddr, dst: IpAddr) -> bool {
        self.selectors.iter().any(|s| s.matches(src, dst))
    }
}

nfcore::config_enum! {
    /// What happens to cleartext that no outbound SA covers.
    #[derive(Default)]
    pub enum Unprotected { #[default] Bypass = "bypass", Drop = "drop" }
}

/// The whole IPsec config.
pub struct Config {
    pub sas: Vec<Sa>,
    /// Anti-replay window in bits (64-4096, a multiple of 64).
    pub replay_window: usize,
    /// Sequence numbers reserved from the tier at a time per outbound SA.
    pub seq_block: u32,
    pub unprotected: Unprotected,
}

/// Bytes from hex digits (no separators), for `field`.
fn hex(s: &str, field: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{field} must be hex digits"));
    }
    Ok((0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex checked"))
        .collect())
}

/// An SA as the config writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SaConfig {
    #[serde(default, deserialize_with = "string_or_empty")]
    name: String,
    dir: Dir,
    spi: Int<256, { u32::MAX as u64 }>,
    /// 32 or 64 hex digits: AES-128 or AES-256.
    key: String,
    /// 8 hex digits.
    salt: String,
    tunnel_src: String,
    tunnel_dst: String,
    selectors: List<Selector>,
}

impl TryFrom<Object<SaConfig>> for Sa {
    type Error = String;
    fn try_from(Object(c): Object<SaConfig>) -> Result<Sa, String> {
        let key = hex(&c.key, ".key")?;
        let cipher = Cipher::new(&key).map_err(|e| format!(".key {e}"))?;
        let salt: [u8; 4] = hex(&c.salt, ".salt")?
            .try_into()
            .map_err(|_| ".salt must be 4 bytes (8 hex digits)".to_string())?;
        let ipv4 = |s: &str, k: &str| -> Result<Ipv4Addr, String> {
            s.parse()
                .map_err(|_| format!(".{k} must be an IPv4 address"))
        };
        Ok(Sa {
            name: c.name,
            dir: c.dir,
            spi: c.spi.0 as u32,
            cipher,
            salt,
            tunnel_src: ipv4(&c.tunnel_src, "tunnel_src")?,
            tunnel_dst: ipv4(&c.tunnel_dst, "tunnel_dst")?,
            selectors: c.selectors.0,
        })
    }
}

/// The config as written (besides the runtime options).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFields {
    sas: List<Sa>,
    #[serde(default)]
    replay_window: Int<64, 4096, 128>,
    #[serde(default)]
    seq_block: Int<1, { 1 << 20 }, 4096>,
    #[serde(default)]
    unprotected: Unprotected,
}

impl Config {
    pub fn from_json(cfg: &Value) -> Result<Config, String> {
        let c: ConfigFields = parse_nf(cfg, "ipsec config")?;
        let mut sas: Vec<Sa> = Vec::new();
        for (i, sa) in c.sas.0.into_iter().enumerate() {
            if sas.iter().any(|s| s.dir == sa.dir && s.spi == sa.spi) {
                return Err(format!(
                    "sas[{i}].spi {} is used twice in one direction",
                    sa.spi
                ));
            }
            sas.push(sa);
        }
        let replay_window = c.replay_window.0 as usize;
        if !replay_window.is_multiple_of(64) {
            return Err("replay_window must be a multiple of 64".into());
        }
        let seq_block = c.seq_block.0 as u32;
        let unprotected = c.unprotected;
        Ok(Config {
            sas,
            replay_window,
            seq_block,
            unprotected,
        })
    }
}
