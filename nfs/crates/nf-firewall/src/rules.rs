//! Firewall rules: which packets may open a connection. Pure logic.

use nfcore::config::Object;
use serde::de::{Deserializer, Error as _};
use serde::Deserialize;
use serde_json::Value;
use std::net::IpAddr;

/// An address prefix (`10.0.0.0/8`, `fd00::/64`, or `any`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Cidr {
    #[default]
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

impl<'de> Deserialize<'de> for Cidr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Cidr, D::Error> {
        Cidr::parse(&String::deserialize(d)?).map_err(D::Error::custom)
    }
}

nfcore::config_enum! {
    /// What a rule (or the default) does with a new connection.
    #[derive(Default)]
    pub enum Action { Allow = "allow", #[default] Deny = "deny" }
}

nfcore::config_enum! {
    /// The protocol a rule matches.
    #[derive(Default)]
    pub enum Proto {
        #[default]
        Any = "any",
        Tcp = "tcp",
        Udp = "udp",
        Icmp = "icmp",
        Icmpv6 = "icmpv6",
    }
}

impl Proto {
    /// The IP protocol number, 0 for any.
    pub fn number(self) -> u8 {
        match self {
            Proto::Any => 0,
            Proto::Tcp => packet::PROTO_TCP,
            Proto::Udp => packet::PROTO_UDP,
            Proto::Icmp => packet::PROTO_ICMP,
            Proto::Icmpv6 => packet::PROTO_ICMPV6,
        }
    }
}

/// Destination ports of a rule: `80` or `"1000-2000"` (absent: all).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange(pub u16, pub u16);

impl Default for PortRange {
    fn default() -> PortRange {
        PortRange(0, u16::MAX)
    }
}

impl<'de> Deserialize<'de> for PortRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PortRange, D::Error> {
        let e = D::Error::custom;
        match Value::deserialize(d)? {
            Value::Number(n) => {
                let p = n
                    .as_u64()
                    .filter(|p| *p <= 65535)
                    .ok_or(e("out of range"))?;
                Ok(PortRange(p as u16, p as u16))
            }
            Value::String(r) => {
                let (a, b) = r.split_once('-').ok_or(e("range must be \"lo-hi\""))?;
                let a: u16 = a.parse().map_err(|_| e("bad range"))?;
                let b: u16 = b.parse().map_err(|_| e("bad range"))?;
                if a > b {
                    return Err(e("range is empty"));
                }
                Ok(PortRange(a, b))
            }
            _ => Err(e("must be a number or \"lo-hi\"")),
        }
    }
}

/// One rule as the config writes it ([`Rule`] is what the NF matches with).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    action: Action,
    #[serde(default)]
    proto: Proto,
    #[serde(default)]
    src: Cidr,
    #[serde(default)]
    dst: Cidr,
    #[serde(default)]
    dst_port: PortRange,
}

/// One rule; the first matching rule decides. `proto` 0 = any. In a config:
/// `{"action": "allow"|"deny", "proto": "tcp", "src": "10.0.0.0/8", "dst": "any",
/// "dst_port": 80 | "1000-2000"}` (all but action optional).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "Object<RuleConfig>")]
pub struct Rule {
    pub allow: bool,
    pub proto: u8,
    pub src: Cidr,
    pub dst: Cidr,
    pub dst_ports: (u16, u16),
}

impl From<Object<RuleConfig>> for Rule {
    fn from(Object(r): Object<RuleConfig>) -> Rule {
        Rule {
            allow: r.action == Action::Allow,
            proto: r.proto.number(),
            src: r.src,
            dst: r.dst,
            dst_ports: (r.dst_port.0, r.dst_port.1),
        }
    }
}

impl Rule {
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
