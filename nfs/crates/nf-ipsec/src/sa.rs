//! Static security associations from the NF config, validated (errors name the field).

use crate::esp::Cipher;
use nf_firewall::rules::Cidr;
use nfcore::config::{object, only_keys, opt_u64, RUNTIME_KEYS};
use serde_json::{Map, Value};
use std::net::{IpAddr, Ipv4Addr};

/// Direction of an SA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Protect matching cleartext leaving through the tunnel.
    Out,
    /// Accept ESP arriving through the tunnel.
    In,
}

/// Which inner traffic an SA carries: source and destination prefixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selector {
    pub src: Cidr,
    pub dst: Cidr,
}

impl Selector {
    pub fn matches(&self, src: IpAddr, dst: IpAddr) -> bool {
        self.src.contains(src) && self.dst.contains(dst)
    }
}

/// One SA.
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

/// What happens to cleartext that no outbound SA covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unprotected {
    Bypass,
    Drop,
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

fn hex(s: &str, field: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{field} must be hex digits"));
    }
    Ok((0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex checked"))
        .collect())
}

fn str_field<'a>(o: &'a Map<String, Value>, k: &str, what: &str) -> Result<&'a str, String> {
    o.get(k)
        .and_then(|v| v.as_str())
        .ok_or_else(|| format!("{what}.{k} is required (a string)"))
}

fn ipv4(o: &Map<String, Value>, k: &str, what: &str) -> Result<Ipv4Addr, String> {
    str_field(o, k, what)?
        .parse()
        .map_err(|_| format!("{what}.{k} must be an IPv4 address"))
}

fn parse_sa(v: &Value, what: &str) -> Result<Sa, String> {
    let o = object(v, what)?;
    only_keys(
        o,
        &[
            "name",
            "dir",
            "spi",
            "key",
            "salt",
            "tunnel_src",
            "tunnel_dst",
            "selectors",
        ],
        what,
    )?;
    let dir = match str_field(o, "dir", what)? {
        "out" => Dir::Out,
        "in" => Dir::In,
        d => return Err(format!("{what}.dir must be \"in\" or \"out\", not {d:?}")),
    };
    let spi = o
        .get("spi")
        .and_then(|s| s.as_u64())
        .filter(|s| (256..=u32::MAX as u64).contains(s))
        .ok_or_else(|| format!("{what}.spi must be an integer in [256, 4294967295]"))?
        as u32;
    let key = hex(str_field(o, "key", what)?, &format!("{what}.key"))?;
    let cipher = Cipher::new(&key).map_err(|e| format!("{what}.key {e}"))?;
    let salt: [u8; 4] = hex(str_field(o, "salt", what)?, &format!("{what}.salt"))?
        .try_into()
        .map_err(|_| format!("{what}.salt must be 4 bytes (8 hex digits)"))?;
    let sels = o
        .get("selectors")
        .and_then(|s| s.as_array())
        .filter(|a| !a.is_empty())
        .ok_or_else(|| format!("{what}.selectors must be a non-empty list"))?;
    let mut selectors = Vec::new();
    for (i, s) in sels.iter().enumerate() {
        let w = format!("{what}.selectors[{i}]");
        let so = object(s, &w)?;
        only_keys(so, &["src", "dst"], &w)?;
        let cidr = |k: &str| -> Result<Cidr, String> {
            Cidr::parse(so.get(k).and_then(|x| x.as_str()).unwrap_or("any"))
                .map_err(|e| format!("{w}.{k}: {e}"))
        };
        selectors.push(Selector {
            src: cidr("src")?,
            dst: cidr("dst")?,
        });
    }
    Ok(Sa {
        name: o
            .get("name")
            .and_then(|n| n.as_str())
            .unwrap_or("")
            .to_string(),
        dir,
        spi,
        cipher,
        salt,
        tunnel_src: ipv4(o, "tunnel_src", what)?,
        tunnel_dst: ipv4(o, "tunnel_dst", what)?,
        selectors,
    })
}

impl Config {
    pub fn from_json(cfg: &Value) -> Result<Config, String> {
        let o = object(cfg, "ipsec config")?;
        let mut allowed = vec!["sas", "replay_window", "seq_block", "unprotected"];
        allowed.extend_from_slice(RUNTIME_KEYS);
        only_keys(o, &allowed, "ipsec config")?;
        let list = o
            .get("sas")
            .and_then(|s| s.as_array())
            .filter(|a| !a.is_empty())
            .ok_or("sas must be a non-empty list")?;
        let mut sas: Vec<Sa> = Vec::new();
        for (i, v) in list.iter().enumerate() {
            let sa = parse_sa(v, &format!("sas[{i}]"))?;
            if sas.iter().any(|s| s.dir == sa.dir && s.spi == sa.spi) {
                return Err(format!(
                    "sas[{i}].spi {} is used twice in one direction",
                    sa.spi
                ));
            }
            sas.push(sa);
        }
        let replay_window = opt_u64(o, "replay_window", 128, 64, 4096)? as usize;
        if !replay_window.is_multiple_of(64) {
            return Err("replay_window must be a multiple of 64".into());
        }
        let seq_block = opt_u64(o, "seq_block", 4096, 1, 1 << 20)? as u32;
        let unprotected = match o.get("unprotected").map(|u| u.as_str()) {
            None | Some(Some("bypass")) => Unprotected::Bypass,
            Some(Some("drop")) => Unprotected::Drop,
            _ => return Err("unprotected must be \"bypass\" or \"drop\"".into()),
        };
        Ok(Config {
            sas,
            replay_window,
            seq_block,
            unprotected,
        })
    }
}
