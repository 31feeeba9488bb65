//! Source NAT (thesis Algorithm 5) with a shared pool of public IP:port in the tier.
//!
//! Outbound packets (source inside, destination outside) of a new connection take a public
//! IP:port from the pool and the reverse mapping is written for the return direction. Source
//! (outbound) or destination (inbound) address and port are rewritten with incremental checksum
//! updates. Inbound packets without a mapping are dropped. Idle mappings expire by tier-held
//! timers and their pair goes back to the pool.
//!
//! Port blocks: an instance takes `port_block` pairs from the shared pool with one atomic pop
//! (instances never get the same pair) and hands them out locally, so a new connection costs a
//! pool round trip only once per block. An instance that stops cleanly (SIGTERM) pushes its
//! unused pairs back; one that crashes loses them (at most `port_block` per instance; the
//! default block is 1/1024 of the pool, at most 256).
//!
//! Mapping claim (`mapping_claim`): `"atomic"` (default) claims the outbound mapping with a
//! compare-and-set round trip, so two instances that see the first packets of one connection
//! at the same instant agree on one mapping (the loser adopts the winner's); `"pipelined"`
//! claims it with the batch's writes (`SET NX`, no round trip on the packet path), checked when
//! the writes are acknowledged: if another instance claimed the connection first, the packets
//! that went with the losing mapping are dropped before they leave (the runtime; a retransmission
//! then gets the winner's mapping), the reverse mapping is deleted and the pair goes back to this
//! instance's block ([`Nat`]'s `claim_lost`). Both keep one mapping per connection.
//!
//! Keys: `nf:<id>:{<hash of the outbound 5-tuple>}:nat-out` -> [`Mapping`];
//! `nf:<id>:{<hash of the inbound 5-tuple (remote -> public)>}:nat-in` -> [`Reverse`] (original
//! src IP:port); `nf:<id>:{pool}` (list) -> free public IP:port pairs.
//!
//! Timeouts per protocol and phase ([`nfcore::timeouts`]): each record keeps the [`Track`] of its
//! own direction (outbound packets read only the mapping, inbound ones only the reverse record,
//! so the packet path needs no extra read). A record change arms the mapping's timer at most
//! [`Timeouts::short_ms`] ahead; the timer reads both records and, unless the connection's
//! timeout (both tracks merged, from the later refresh) has passed, re-arms itself at it. So an
//! established connection lives for days, one closed by FIN or RST a short timeout, and a UDP
//! flow seen both ways longer than one never answered.
//!
//! Config (JSON): `{"inside": ["10.0.0.0/8"], "public_ips": ["198.51.100.1"],
//! "ports": "20000-20999", "timeouts": {...}, "port_block": 1..4096 (default: pairs / 1024,
//! 1..256), "mapping_claim": "atomic"|"pipelined"}` plus the runtime options; the older
//! `idle_timeout_ms` instead of `timeouts` sets every phase, as it did.

use nf_firewall::rules::Cidr;
use nfcore::config::{parse_nf, present, Int, Ip, List, Object};
use nfcore::timeouts::{Legacy, TimeoutsConfig};
use nfcore::{
    Ctx, FlowStore, Key, KeySpace, NetworkFunction, Parsed, StoreError, Timeouts, Track, Verdict,
};
use packet::rewrite::{set_dst, set_src};
use packet::{FlowKey, L4};
use serde::de::{Deserializer, Error as _};
use serde::Deserialize;
use serde_json::Value;
use std::net::IpAddr;

pub const TABLE_OUT: &str = "nat-out";
pub const TABLE_IN: &str = "nat-in";
pub const POOL: &str = "pool";
/// What the pool was made of (JSON [`PoolSpec`]): written at the first start, changed by a
/// reconfiguration, so instances reconfigured one after another change the pool once.
pub const POOL_SPEC: &str = "pool-spec";

/// First byte of a record since tracks are kept (an older one starts with an endpoint length,
/// 6 or 18).
const VERSION_1: u8 = 0x81;

/// Encode an address and port: 4 or 16 address bytes, then the port (big endian).
pub fn encode_endpoint(ip: IpAddr, port: u16) -> Vec<u8> {
    let mut v = match ip {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    v.extend_from_slice(&port.to_be_bytes());
    v
}

pub fn decode_endpoint(b: &[u8]) -> Option<(IpAddr, u16)> {
    let port = |p: &[u8]| u16::from_be_bytes([p[0], p[1]]);
    match b.len() {
        6 => Some((
            IpAddr::from(<[u8; 4]>::try_from(&b[..4]).ok()?),
            port(&b[4..]),
        )),
        18 => Some((
            IpAddr::from(<[u8; 16]>::try_from(&b[..16]).ok()?),
            port(&b[16..]),
        )),
        _ => None,
    }
}

/// The outbound mapping of one connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub public: (IpAddr, u16),
    /// The connection's outbound 5-tuple before translation.
    pub orig: FlowKey,
    /// When the idle timer was last moved (ms).
    pub refreshed_ms: u64,
    /// What the outbound packets showed (direction 0).
    pub track: Track,
}

impl Mapping {
    /// `[0x81, track, len, public endpoint, refreshed_ms (8, LE), len, src, len, dst, proto]`.
    pub fn encode(&self) -> Vec<u8> {
        let ep = encode_endpoint(self.public.0, self.public.1);
        let mut v = vec![VERSION_1, self.track.0, ep.len() as u8];
        v.extend_from_slice(&ep);
        v.extend_from_slice(&self.refreshed_ms.to_le_bytes());
        let o = &self.orig;
        for (ip, port) in [(o.src, o.src_port), (o.dst, o.dst_port)] {
            let e = encode_endpoint(ip, port);
            v.push(e.len() as u8);
            v.extend_from_slice(&e);
        }
        v.push(o.proto);
        v
    }

    /// An older record (without the version byte and track) decodes with [`Track::legacy`].
    pub fn decode(b: &[u8]) -> Option<Mapping> {
        match b.first() {
            Some(&VERSION_1) => {
                let t = *b.get(1)?;
                if t & !Track::MASK != 0 {
                    return None;
                }
                let mut m = Self::decode_v0(&b[2..])?;
                m.track = Track(t);
                Some(m)
            }
            _ => Self::decode_v0(b),
        }
    }

    fn decode_v0(b: &[u8]) -> Option<Mapping> {
        let mut at = 0;
        let mut ep = |b: &[u8]| -> Option<(IpAddr, u16)> {
            let n = *b.get(at)? as usize;
            let r = decode_endpoint(b.get(at + 1..at + 1 + n)?);
            at += 1 + n;
            r
        };
        let public = ep(b)?;
        let t = b.get(at..at + 8)?;
        let refreshed_ms = u64::from_le_bytes(t.try_into().ok()?);
        at += 8;
        let mut ep2 = |b: &[u8]| -> Option<(IpAddr, u16)> {
            let n = *b.get(at)? as usize;
            let r = decode_endpoint(b.get(at + 1..at + 1 + n)?);
            at += 1 + n;
            r
        };
        let (s, sp) = ep2(b)?;
        let (d, dp) = ep2(b)?;
        let proto = *b.get(at)?;
        if at + 1 != b.len() {
            return None;
        }
        Some(Mapping {
            public,
            orig: FlowKey {
                src: s,
                dst: d,
                src_port: sp,
                dst_port: dp,
                proto,
            },
            refreshed_ms,
            track: Track::legacy(false),
        })
    }

    /// The 5-tuple of return traffic (remote -> public).
    pub fn inbound_key(&self) -> FlowKey {
        FlowKey {
            src: self.orig.dst,
            dst: self.public.0,
            src_port: self.orig.dst_port,
            dst_port: self.public.1,
            proto: self.orig.proto,
        }
    }
}

/// The reverse record of a connection (`nat-in`): where inbound packets go, and what they
/// showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reverse {
    /// The inside host's address and port.
    pub orig: (IpAddr, u16),
    /// What the inbound packets showed (direction 1).
    pub track: Track,
    /// When an inbound packet last moved the timer (ms; 0: never).
    pub refreshed_ms: u64,
}

impl Reverse {
    /// `[0x81, track, refreshed_ms (8, LE), endpoint]`.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![VERSION_1, self.track.0];
        v.extend_from_slice(&self.refreshed_ms.to_le_bytes());
        v.extend_from_slice(&encode_endpoint(self.orig.0, self.orig.1));
        v
    }

    /// An older record (the bare endpoint) decodes with nothing seen inbound.
    pub fn decode(b: &[u8]) -> Option<Reverse> {
        if b.len() == 6 || b.len() == 18 {
            return Some(Reverse {
                orig: decode_endpoint(b)?,
                track: Track::default(),
                refreshed_ms: 0,
            });
        }
        if b.first() != Some(&VERSION_1) || b.len() < 10 || b[1] & !Track::MASK != 0 {
            return None;
        }
        Some(Reverse {
            orig: decode_endpoint(&b[10..])?,
            track: Track(b[1]),
            refreshed_ms: u64::from_le_bytes(b[2..10].try_into().ok()?),
        })
    }
}

/// The public pairs of a pool: addresses x a port range.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct PoolSpec {
    pub ips: Vec<IpAddr>,
    pub ports: (u16, u16),
    /// Pairs removed by earlier reconfigurations `(ip, lo, hi)`: their live mappings drain
    /// (the pair is not given again when they end), so they cannot come back in place.
    #[serde(default)]
    pub retired: Vec<(IpAddr, u16, u16)>,
}

impl PoolSpec {
    /// The pairs of `self` not in `other`, as `(ip, lo, hi)` ranges.
    fn minus(&self, other: &PoolSpec) -> Vec<(IpAddr, u16, u16)> {
        let (lo, hi) = self.ports;
        let mut out = Vec::new();
        for ip in &self.ips {
            if !other.ips.contains(ip) || other.ports.1 < lo || other.ports.0 > hi {
                out.push((*ip, lo, hi));
                continue;
            }
            if lo < other.ports.0 {
                out.push((*ip, lo, other.ports.0 - 1));
            }
            if hi > other.ports.1 {
                out.push((*ip, other.ports.1 + 1, hi));
            }
        }
        out
    }

    /// The spec after the pool became `ips` x `ports`: pairs dropped join `retired`. Err names
    /// the field when a pair retired earlier would come back (its mapping may still be live).
    pub fn change(&self, ips: &[IpAddr], ports: (u16, u16)) -> Result<PoolSpec, String> {
        let new = PoolSpec {
            ips: ips.to_vec(),
            ports,
            retired: Vec::new(),
        };
        for (ip, lo, hi) in new.minus(self) {
            if let Some((_, rlo, rhi)) = self
                .retired
                .iter()
                .find(|(rip, rlo, rhi)| *rip == ip && *rlo <= hi && lo <= *rhi)
            {
                let field = if self.ips.contains(&ip) {
                    "ports"
                } else {
                    "public_ips"
                };
                return Err(format!(
                    "{field}: {ip} ports {}-{} were removed from the pool by an earlier change \
                     and may still be mapped; they cannot be added back in place (recreate the NF)",
                    lo.max(*rlo),
                    hi.min(*rhi)
                ));
            }
        }
        let mut retired = self.retired.clone();
        retired.extend(self.minus(&new));
        Ok(PoolSpec { retired, ..new })
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    translated_out: u64,
    translated_in: u64,
    new_mappings: u64,
    lost_races: u64,
    pool_empty: u64,
    blocks: u64,
    no_mapping: u64,
    unsupported: u64,
    passthrough: u64,
    expired: u64,
    /// Pairs no longer in the pool's config, not handed out again (taken, expired, released).
    pairs_retired: u64,
    /// Pool changes taken from the tier's spec before this instance's own config had them.
    pool_followed: u64,
}

/// How a new connection's outbound mapping is claimed in the tier (`mapping_claim`).
pub use nfcore::Claim;

/// The public port range, `"lo-hi"` with 1 <= lo <= hi.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ports(u16, u16);

impl Default for Ports {
    fn default() -> Ports {
        Ports(20000, 29999)
    }
}

impl<'de> Deserialize<'de> for Ports {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Ports, D::Error> {
        let r = String::deserialize(d)?;
        r.split_once('-')
            .and_then(|(a, b)| Some(Ports(a.parse().ok()?, b.parse().ok()?)))
            .filter(|p| p.0 >= 1 && p.0 <= p.1)
            .ok_or_else(|| {
                D::Error::custom(format!(
                    "must be \"lo-hi\" with 1 <= lo <= hi <= 65535, not {r:?}"
                ))
            })
    }
}

/// The config as written (besides the runtime options).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    inside: List<Cidr>,
    public_ips: List<Ip>,
    #[serde(default)]
    ports: Ports,
    #[serde(default, deserialize_with = "present")]
    timeouts: Option<Object<TimeoutsConfig>>,
    #[serde(default, deserialize_with = "present")]
    idle_timeout_ms: Option<Int<1, 86_400_000>>,
    /// Absent: pairs / 1024, within 1-256.
    #[serde(default, deserialize_with = "present")]
    port_block: Option<Int<1, 4096>>,
    #[serde(default)]
    mapping_claim: Claim,
}

/// The NAT NF.
pub struct Nat {
    inside: Vec<Cidr>,
    public_ips: Vec<IpAddr>,
    /// Public addresses removed from the pool whose mappings may still be live (inbound packets
    /// to them are still translated while a mapping exists).
    draining_ips: Vec<IpAddr>,
    ports: (u16, u16),
    timeouts: Timeouts,
    block: usize,
    claim: Claim,
    /// Pairs taken from the pool and not handed out yet (this instance's block).
    free: Vec<Vec<u8>>,
    c: Counters,
}

enum Way {
    Out,
    In,
    Neither,
}

impl Nat {
    pub fn from_config(cfg: &Value) -> Result<Nat, String> {
        let c: Config = parse_nf(cfg, "nat config")?;
        let public_ips: Vec<IpAddr> = c.public_ips.0.iter().map(|ip| ip.0).collect();
        let ports = (c.ports.0, c.ports.1);
        let pairs = public_ips.len() * (ports.1 - ports.0 + 1) as usize;
        if pairs > 1_000_000 {
            return Err("public_ips x ports must be at most 1000000 pairs".into());
        }
        let auto_block = (pairs / 1024).clamp(1, 256) as u64;
        Ok(Nat {
            inside: c.inside.0,
            public_ips,
            draining_ips: Vec::new(),
            ports,
            timeouts: Timeouts::resolve(
                c.timeouts.map(|t| t.0),
                Legacy {
                    idle_ms: c.idle_timeout_ms.map(|x| x.0),
                    ..Legacy::default()
                },
            )?,
            block: c.port_block.map_or(auto_block, |b| b.0) as usize,
            claim: c.mapping_claim,
            free: Vec::new(),
            c: Counters::default(),
        })
    }

    fn is_inside(&self, ip: IpAddr) -> bool {
        self.inside.iter().any(|c| c.contains(ip))
    }

    fn way(&self, pkt: &Parsed) -> Way {
        if self.public_ips.contains(&pkt.dst) || self.draining_ips.contains(&pkt.dst) {
            Way::In
        } else if self.is_inside(pkt.src) && !self.is_inside(pkt.dst) {
            Way::Out
        } else {
            Way::Neither
        }
    }

    fn translatable(pkt: &Parsed) -> bool {
        matches!(pkt.l4, L4::Tcp { .. } | L4::Udp { .. })
    }

    /// The timeouts in use.
    pub fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }

    /// How far ahead a packet moves the mapping's timer, from what its own record saw: the
    /// earliest the connection's timeout can end (the other record may know it closed, e.g.
    /// the other FIN; the timer re-arms itself from both).
    fn own_timeout(&self, t: Track, proto: u8) -> u64 {
        self.timeouts.one_view_ms(t, proto)
    }

    /// Write the record and move the timer when the track changed or a quarter of its timeout
    /// passed (not on every packet).
    fn due(&self, now: u64, refreshed: u64, old: Track, new: Track, proto: u8) -> bool {
        new != old || now.saturating_sub(refreshed) >= self.own_timeout(new, proto) / 4
    }

    fn touch(&self, ctx: &mut Ctx<'_>, key_out: &Key, m: &mut Mapping, flags: u8) {
        let now = ctx.now_ms();
        let proto = m.orig.proto;
        let track = m.track.seen(0, proto, flags);
        if self.due(now, m.refreshed_ms, m.track, track, proto) {
            m.refreshed_ms = now;
            m.track = track;
            ctx.set(key_out, m.encode());
            ctx.timer_set(key_out.clone(), now + self.own_timeout(track, proto));
        }
    }

    fn outbound(
        &mut self,
        ctx: &mut Ctx<'_>,
        frame: &mut [u8],
        pkt: &Parsed,
    ) -> Result<Verdict, StoreError> {
        let fk = pkt.flow_key();
        let key_out = ctx.keys.flow(fk.stable_hash(), TABLE_OUT);
        let mut m = match ctx.get(&key_out)?.and_then(Mapping::decode) {
            Some(m) => m,
            None => {
                let pool = ctx.keys.global(POOL);
                let Some(item) = self.take_pair(ctx, &pool)? else {
                    self.c.pool_empty += 1;
                    return Ok(Verdict::Drop);
                };
                let Some(public) = decode_endpoint(&item) else {
                    self.c.pool_empty += 1;
                    return Ok(Verdict::Drop);
                };
                let now = ctx.now_ms();
                let cand = Mapping {
                    public,
                    orig: fk,
                    refreshed_ms: now,
                    track: Track::default().seen(0, fk.proto, pkt.tcp_flags()),
                };
                let enc = cand.encode();
                let claimed = match self.claim {
                    Claim::Pipelined => {
                        ctx.claim(&key_out, enc.clone());
                        true
                    }
                    Claim::Atomic => ctx.store().compare_and_set(&key_out, None, Some(&enc))?,
                };
                if claimed {
                    self.c.new_mappings += 1;
                    if self.claim == Claim::Atomic {
                        ctx.set(&key_out, enc);
                    }
                    let rev = Reverse {
                        orig: (fk.src, fk.src_port),
                        track: Track::default(),
                        refreshed_ms: 0,
                    };
                    ctx.set(
                        &ctx.keys.flow(cand.inbound_key().stable_hash(), TABLE_IN),
                        rev.encode(),
                    );
                    let t = self.own_timeout(cand.track, fk.proto);
                    ctx.timer_set(key_out.clone(), now + t);
                    cand
                } else {
                    // Another instance mapped this flow first: use its mapping, return ours.
                    self.c.lost_races += 1;
                    self.free.push(item);
                    let mut v = Vec::new();
                    ctx.store()
                        .get_many(std::slice::from_ref(&key_out), &mut v)?;
                    match v.pop().flatten().as_deref().and_then(Mapping::decode) {
                        Some(m) => m,
                        None => return Ok(Verdict::Drop),
                    }
                }
            }
        };
        self.touch(ctx, &key_out, &mut m, pkt.tcp_flags());
        if set_src(frame, pkt, m.public.0, m.public.1).is_err() {
            self.c.unsupported += 1;
            return Ok(Verdict::Drop);
        }
        self.c.translated_out += 1;
        Ok(Verdict::Forward)
    }

    /// A free pair: from this instance's block, refilled with one atomic pop of `block` pairs.
    fn take_pair(&mut self, ctx: &mut Ctx<'_>, pool: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let mut synced = false;
        loop {
            while let Some(item) = self.free.pop() {
                if self.owns(&item) {
                    return Ok(Some(item));
                }
                // Not this config's pair: added by a change this instance has not had yet (an
                // instance of a rolling update, or reconfigured before this one), which the tier's
                // spec says (once per call); else one left in the pool by an instance that did
                // not know yet that the pool shrank.
                if !synced {
                    synced = true;
                    let keys = ctx.keys;
                    self.follow_spec(ctx.store(), keys)?;
                    if self.owns(&item) {
                        return Ok(Some(item));
                    }
                }
                self.c.pairs_retired += 1;
            }
            let mut got = ctx.store().pool_pop_many(pool, self.block)?;
            if got.is_empty() {
                return Ok(None);
            }
            self.c.blocks += 1;
            // Hand out in pool order.
            got.reverse();
            self.free = got;
        }
    }

    /// Take the tier's spec of the pool as this instance's pool (a change made by other
    /// instances: its added pairs are handed out here too, its removed ones no more).
    fn follow_spec(
        &mut self,
        store: &mut dyn FlowStore,
        keys: &KeySpace,
    ) -> Result<(), StoreError> {
        if let (_, Some(spec)) = Self::read_spec(store, &keys.global(POOL_SPEC))? {
            if spec.ips != self.public_ips || spec.ports != self.ports {
                (self.public_ips, self.ports) = (spec.ips.clone(), spec.ports);
                self.draining_ips = self.draining(&spec);
                self.c.pool_followed += 1;
            }
        }
        Ok(())
    }

    /// Whether the pair `item` belongs to the pool as configured now.
    fn owns(&self, item: &[u8]) -> bool {
        decode_endpoint(item).is_some_and(|(ip, port)| {
            self.public_ips.contains(&ip) && (self.ports.0..=self.ports.1).contains(&port)
        })
    }

    /// The addresses `spec` retired that are not public any more.
    fn draining(&self, spec: &PoolSpec) -> Vec<IpAddr> {
        let mut out: Vec<IpAddr> = Vec::new();
        for (ip, _, _) in &spec.retired {
            if !self.public_ips.contains(ip) && !out.contains(ip) {
                out.push(*ip);
            }
        }
        out
    }

    fn spec(&self) -> PoolSpec {
        PoolSpec {
            ips: self.public_ips.clone(),
            ports: self.ports,
            retired: Vec::new(),
        }
    }

    /// Give a pair back to the shared pool, unless the pool no longer has it (a mapping of a
    /// removed pair drains).
    fn give_back(
        &mut self,
        store: &mut dyn FlowStore,
        pool: &[u8],
        item: &[u8],
    ) -> Result<(), StoreError> {
        if !self.owns(item) {
            self.c.pairs_retired += 1;
            return Ok(());
        }
        store.pool_push(pool, item)
    }

    /// Read the pool's spec (None: written by a version before specs).
    fn read_spec(
        store: &mut dyn FlowStore,
        key: &Key,
    ) -> Result<(Option<Vec<u8>>, Option<PoolSpec>), StoreError> {
        let mut v = Vec::new();
        store.get_many(std::slice::from_ref(key), &mut v)?;
        let raw = v.pop().flatten();
        let spec = raw.as_deref().and_then(|r| serde_json::from_slice(r).ok());
        Ok((raw, spec))
    }

    /// Make the shared pool `ips` x `ports`: added pairs pushed once (by the instance whose
    /// compare-and-set of the spec wins), removed ones retired (see [`PoolSpec::change`]). A
    /// pool without a spec is taken for this instance's.
    fn change_pool(
        &self,
        ips: &[IpAddr],
        ports: (u16, u16),
        store: &mut dyn FlowStore,
        keys: &KeySpace,
    ) -> Result<PoolSpec, nfcore::Refused> {
        let key = keys.global(POOL_SPEC);
        for _ in 0..100 {
            let (raw, spec) = Self::read_spec(store, &key)?;
            let cur = spec.unwrap_or_else(|| self.spec());
            if cur.ips == ips && cur.ports == ports {
                return Ok(cur); // another instance changed it already
            }
            let next = cur.change(ips, ports)?;
            let enc = serde_json::to_vec(&next).expect("spec encodes");
            if !store.compare_and_set(&key, raw.as_deref(), Some(&enc))? {
                continue;
            }
            let pool = keys.global(POOL);
            for (ip, lo, hi) in next.minus(&cur) {
                for port in lo..=hi {
                    store.pool_push(&pool, &encode_endpoint(ip, port))?;
                }
            }
            return Ok(next);
        }
        Err(nfcore::Refused::Store(StoreError(
            "the NAT pool's spec keeps changing; try again".into(),
        )))
    }

    fn inbound(
        &mut self,
        ctx: &mut Ctx<'_>,
        frame: &mut [u8],
        pkt: &Parsed,
    ) -> Result<Verdict, StoreError> {
        let fk = pkt.flow_key();
        let key_in = ctx.keys.flow(fk.stable_hash(), TABLE_IN);
        let Some(mut rev) = ctx.get(&key_in)?.and_then(Reverse::decode) else {
            self.c.no_mapping += 1;
            return Ok(Verdict::Drop);
        };
        let (ip, port) = rev.orig;
        let now = ctx.now_ms();
        let track = rev.track.seen(1, fk.proto, pkt.tcp_flags());
        if self.due(now, rev.refreshed_ms, rev.track, track, fk.proto) {
            rev.track = track;
            rev.refreshed_ms = now;
            ctx.set(&key_in, rev.encode());
            // The mapping's key: the outbound 5-tuple this packet answers.
            let out = FlowKey {
                src: ip,
                dst: fk.src,
                src_port: port,
                dst_port: fk.src_port,
                proto: fk.proto,
            };
            let key_out = ctx.keys.flow(out.stable_hash(), TABLE_OUT);
            ctx.timer_set(key_out, now + self.own_timeout(track, fk.proto));
        }
        if set_dst(frame, pkt, ip, port).is_err() {
            self.c.unsupported += 1;
            return Ok(Verdict::Drop);
        }
        self.c.translated_in += 1;
        Ok(Verdict::Forward)
    }
}

impl NetworkFunction for Nat {
    fn name(&self) -> &'static str {
        "nat"
    }

    fn record_lifetime_ms(&self) -> Option<u64> {
        Some(self.timeouts.longest_ms())
    }

    /// Fills the shared pool once; a pool made by another config (a rolling update's new
    /// instance, or instances started before a change) is changed to this one's as in
    /// [`Self::reconfigure`]: added pairs pushed once, removed ones retired, a pair retired
    /// earlier refused.
    fn init(&mut self, store: &mut dyn FlowStore, keys: &KeySpace) -> Result<(), nfcore::Refused> {
        let mut items = Vec::new();
        for ip in &self.public_ips {
            for port in self.ports.0..=self.ports.1 {
                items.push(encode_endpoint(*ip, port));
            }
        }
        store.pool_init(&keys.global(POOL), &items)?;
        // The pool's spec, once (a pool made by a version before specs: assumed this config's).
        let key = keys.global(POOL_SPEC);
        let spec = serde_json::to_vec(&self.spec()).expect("spec encodes");
        if store.compare_and_set(&key, None, Some(&spec))? {
            return Ok(());
        }
        // Written by another instance or an earlier change: made of this config's pairs, or
        // changed to them now.
        let spec = self.change_pool(&self.public_ips, self.ports, store, keys)?;
        self.draining_ips = self.draining(&spec);
        Ok(())
    }

    /// `inside`, timeouts, `port_block` and `mapping_claim` change in place, counters kept; so
    /// does the pool (`public_ips` x `ports`): added pairs join the shared pool, removed ones
    /// drain (live mappings keep them until they end; they are not given again). A removed pair
    /// cannot come back in place (refused, naming the field): one of its mappings may be live.
    fn reconfigure(
        &mut self,
        cfg: &Value,
        store: &mut dyn FlowStore,
        keys: &KeySpace,
    ) -> Result<bool, nfcore::Refused> {
        let new = Nat::from_config(cfg)?;
        let spec = if new.public_ips != self.public_ips || new.ports != self.ports {
            Some(self.change_pool(&new.public_ips, new.ports, store, keys)?)
        } else {
            None
        };
        let Nat {
            inside,
            public_ips,
            ports,
            timeouts,
            block,
            claim,
            ..
        } = new;
        (self.inside, self.public_ips, self.ports) = (inside, public_ips, ports);
        (self.timeouts, self.block, self.claim) = (timeouts, block, claim);
        if let Some(spec) = spec {
            self.draining_ips = self.draining(&spec);
        }
        // Pairs of this instance's block that left the pool are not handed out.
        let before = self.free.len();
        let free = std::mem::take(&mut self.free);
        self.free = free.into_iter().filter(|p| self.owns(p)).collect();
        self.c.pairs_retired += (before - self.free.len()) as u64;
        Ok(true)
    }

    fn read_set(&self, keys: &KeySpace, pkt: &Parsed, _frame: &[u8], out: &mut Vec<Key>) {
        if !Self::translatable(pkt) {
            return;
        }
        match self.way(pkt) {
            Way::Out => out.push(keys.flow(pkt.flow_key().stable_hash(), TABLE_OUT)),
            Way::In => out.push(keys.flow(pkt.flow_key().stable_hash(), TABLE_IN)),
            Way::Neither => {}
        }
    }

    fn process(
        &mut self,
        ctx: &mut Ctx<'_>,
        frame: &mut Vec<u8>,
        pkt: &Parsed,
    ) -> Result<Verdict, StoreError> {
        let way = self.way(pkt);
        if matches!(way, Way::Neither) {
            self.c.passthrough += 1;
            return Ok(Verdict::Forward);
        }
        if !Self::translatable(pkt) {
            self.c.unsupported += 1;
            return Ok(Verdict::Drop);
        }
        match way {
            Way::Out => self.outbound(ctx, frame, pkt),
            _ => self.inbound(ctx, frame, pkt),
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, member: &[u8]) -> Result<(), StoreError> {
        let Some(cur) = ctx.get_owned(member)? else {
            return Ok(());
        };
        let Some(m) = Mapping::decode(&cur) else {
            ctx.del(member);
            return Ok(());
        };
        let key_in = ctx.keys.flow(m.inbound_key().stable_hash(), TABLE_IN);
        let rev = ctx.get_owned(&key_in)?.as_deref().and_then(Reverse::decode);
        let (track, last) = match rev {
            Some(r) => (m.track.merge(r.track), m.refreshed_ms.max(r.refreshed_ms)),
            None => (m.track, m.refreshed_ms),
        };
        let deadline = last + self.timeouts.for_track(track, m.orig.proto);
        if ctx.now_ms() < deadline {
            // Armed from one record's view: the connection's own timeout is later.
            ctx.timer_set(member.to_vec(), deadline);
            return Ok(());
        }
        // Delete only the mapping we read (a concurrent refresh wins), then free its pair.
        if ctx.store().compare_and_set(member, Some(&cur), None)? {
            self.c.expired += 1;
            ctx.del(member);
            ctx.del(&key_in);
            let pool = ctx.keys.global(POOL);
            let item = encode_endpoint(m.public.0, m.public.1);
            self.give_back(ctx.store(), &pool, &item)?;
        }
        Ok(())
    }

    /// A pipelined claim of `key` (an outbound mapping) was lost: its reverse mapping goes and
    /// its pair comes back to this instance's block (the winner's mapping stays).
    fn claim_lost(
        &mut self,
        ctx: &mut Ctx<'_>,
        _key: &[u8],
        value: &[u8],
    ) -> Result<(), StoreError> {
        self.c.lost_races += 1;
        if let Some(m) = Mapping::decode(value) {
            ctx.del(&ctx.keys.flow(m.inbound_key().stable_hash(), TABLE_IN));
            let item = encode_endpoint(m.public.0, m.public.1);
            if self.owns(&item) {
                self.free.push(item);
            }
        }
        Ok(())
    }

    fn release(&mut self, store: &mut dyn FlowStore, keys: &KeySpace) -> Result<(), StoreError> {
        let pool = keys.global(POOL);
        while let Some(item) = self.free.pop() {
            if let Err(e) = self.give_back(store, &pool, &item) {
                self.free.push(item);
                return Err(e);
            }
        }
        Ok(())
    }

    fn stats(&self) -> Value {
        let c = &self.c;
        serde_json::json!({
            "translated_out": c.translated_out, "translated_in": c.translated_in,
            "new_mappings": c.new_mappings, "lost_races": c.lost_races, "pool_empty": c.pool_empty,
            "port_blocks": c.blocks, "block_free": self.free.len(),
            "no_mapping": c.no_mapping, "unsupported": c.unsupported, "passthrough": c.passthrough,
            "expired": c.expired, "pairs_retired": c.pairs_retired, "pool_followed": c.pool_followed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_older_records_decode() {
        let m = Mapping {
            public: ("198.51.100.1".parse().unwrap(), 20000),
            orig: FlowKey {
                src: "10.0.0.1".parse().unwrap(),
                dst: "192.0.2.1".parse().unwrap(),
                src_port: 40000,
                dst_port: 80,
                proto: 6,
            },
            refreshed_ms: 123,
            track: Track(Track::SEEN[0] | Track::FIN[0]),
        };
        assert_eq!(Mapping::decode(&m.encode()), Some(m.clone()));
        // The layout before tracks: the same without the version byte and track.
        let old = &m.encode()[2..];
        let got = Mapping::decode(old).unwrap();
        assert_eq!(
            (got.public, got.orig, got.refreshed_ms),
            (m.public, m.orig, 123)
        );
        assert_eq!(got.track, Track::legacy(false));
        let mut bad = m.encode();
        bad[1] = 0x80;
        assert_eq!(Mapping::decode(&bad), None);

        let r = Reverse {
            orig: ("10.0.0.1".parse().unwrap(), 40000),
            track: Track(Track::SEEN[1]),
            refreshed_ms: 9,
        };
        assert_eq!(Reverse::decode(&r.encode()), Some(r));
        let old = encode_endpoint(r.orig.0, r.orig.1);
        assert_eq!(
            Reverse::decode(&old),
            Some(Reverse {
                track: Track::default(),
                refreshed_ms: 0,
                ..r
            })
        );
        for bad in [&[][..], &[0x81, 0, 1][..], &[0x81; 16][..]] {
            assert_eq!(Reverse::decode(bad), None, "{bad:?}");
        }
    }
}
