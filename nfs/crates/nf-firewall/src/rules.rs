//! Firewall rules: which packets may open a connection. Pure logic.

use serde_json::Value;
use std::net::IpAddr;

/// An address prefix (`10.0.0.0/8`, `fd00::/64`, or `any`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cidr {
    Any,
    Net(IpAddr, u8),
}

impl Cidr {
    pub fn parse(s: &str) -> Result<Cidr, String> {
        if s == "any" {
            return Ok(Cidr::Any);
        }
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let ip: IpAddr = a.parse().map_err(|_| format!("bad address {s:?}"))?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let len = match l {
            Some(l) => l
                .parse::<u8>()
                .ok()
                .filter(|n| *n <= max)
                .ok_or_else(|| format!("bad prefix length in {s:?}"))?,
            None => max,
        };
        Ok(Cidr::Net(ip, len))
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self, ip) {
            (Cidr::Any, _) => true,
            (Cidr::Net(IpAddr::V4(n), l), IpAddr::V4(a)) => {
                let m = if *l == 0 { 0 } else { u32::MAX << (32 - l) };
                u32::from(*n) & m == u32::from(a) & m
            }
            (Cidr::Net(IpAddr::V6(n), l), IpAddr::V6(a)) => {
                let m = if *l == 0 { 0 } else { u128::MAX << (128 - l) };
                u128::from(*n) & m == u128::from(a) & m
            }
            _ => false,
        }
    }
}

/// One rule; the first matching rule decides. `proto` 0 = any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub allow: bool,
    pub proto: u8,
    pub src: Cidr,
    pub dst: Cidr,
    pub dst_ports: (u16, u16),
}

fn proto_num(s: &str) -> Result<u8, String> {
    match s {
        "any" => Ok(0),
        "tcp" => Ok(packet::PROTO_TCP),
        "udp" => Ok(packet::PROTO_UDP),
        "icmp" => Ok(packet::PROTO_ICMP),
        "icmpv6" => Ok(packet::PROTO_ICMPV6),
        _ => Err(format!("proto must be any|tcp|udp|icmp|icmpv6, not {s:?}")),
    }
}

impl Rule {
    /// From `{"action": "allow"|"deny", "proto": "tcp", "src": "10.0.0.0/8", "dst": "any",
    /// "dst_port": 80 | "1000-2000"}` (all but action optional).
    pub fn from_json(v: &Value, idx: usize) -> Result<Rule, String> {
        let w = |e: String| format!("rules[{idx}]: {e}");
        let o = v.as_object().ok_or_else(|| w("must be an object".into()))?;
        nfcore::config::only_keys(
            o,
            &["action", "proto", "src", "dst", "dst_port"],
            &format!("rules[{idx}]"),
        )?;
        let allow = match o.get("action").and_then(|a| a.as_str()) {
            Some("allow") => true,
            Some("deny") => false,
            _ => return Err(w("action must be \"allow\" or \"deny\"".into())),
        };
        let s = |k: &str| -> Result<&str, String> {
            match o.get(k) {
                None => Ok("any"),
                Some(v) => v.as_str().ok_or_else(|| w(format!("{k} must be a string"))),
            }
        };
        let dst_ports = match o.get("dst_port") {
            None => (0, u16::MAX),
            Some(Value::Number(n)) => {
                let p = n
                    .as_u64()
                    .filter(|p| *p <= 65535)
                    .ok_or_else(|| w("dst_port out of range".into()))?;
                (p as u16, p as u16)
            }
            Some(Value::String(r)) => {
                let (a, b) = r
                    .split_once('-')
                    .ok_or_else(|| w("dst_port range must be \"lo-hi\"".into()))?;
                let a: u16 = a.parse().map_err(|_| w("bad dst_port range".into()))?;
                let b: u16 = b.parse().map_err(|_| w("bad dst_port range".into()))?;
                if a > b {
                    return Err(w("dst_port range is empty".into()));
                }
                (a, b)
            }
            _ => return Err(w("dst_port must be a number or \"lo-hi\"".into())),
        };
        Ok(Rule {
            allow,
            proto: proto_num(s("proto")?).map_err(w)?,
            src: Cidr::parse(s("src")?).map_err(w)?,
            dst: Cidr::parse(s("dst")?).map_err(w)?,
            dst_ports,
        })
    }

    pub fn matches(&self, k: &packet::FlowKey) -> bool {
        (self.proto == 0 || self.proto == k.proto)
            && self.src.contains(k.src)
            && self.dst.contains(k.dst)
            && (self.dst_ports.0..=self.dst_ports.1).contains(&k.dst_port)
    }
}

/// First matching rule's action, else `default_allow`.
pub fn may_open(rules: &[Rule], default_allow: bool, k: &packet::FlowKey) -> bool {
    rules
        .iter()
        .find(|r| r.matches(k))
        .map_or(default_allow, |r| r.allow)
}
