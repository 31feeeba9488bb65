//! L7 firewall: classifies each flow's application protocol from its first payload bytes
//! (TLS SNI, HTTP Host, DNS query name, SSH banner, others by a signature list; [`classify`])
//! and blocks flows by policy ([`policy`]). The classification (or, while it is not decided, the
//! bytes seen so far) is one record per connection in the tier (table `l7`, canonical 5-tuple),
//! so any instance continues a classification another one started.
//!
//! - Payload of the direction that sent first is accumulated in sequence order until a detector
//!   decides, up to `max_inspect_bytes` / `max_inspect_packets` (then: the protocol with its name
//!   unparsed, or `unknown`). Packets are forwarded while pending; the packet that completes a
//!   blocked classification and every later packet of the flow (both ways) are dropped, so e.g.
//!   a TLS server never gets a ClientHello whose SNI is blocked. The stream start comes from the
//!   SYN / SYN-ACK (else the first data); TCP data ahead of what was inspected is dropped while
//!   pending (the sender retransmits it); retransmissions pass.
//! - UDP: the first datagram decides; for DNS every later query on the flow is checked too.
//! - TCP HTTP and DNS: every later request / query of the connection is classified too
//!   ([`follow`]: requests framed as a server reads them), in stream order (data ahead of it is
//!   dropped, the sender retransmits it; body bytes may pass ahead); one that the policy blocks
//!   blocks the flow from that packet on.
//! - A flow is forgotten after the timeout of its protocol and phase ([`nfcore::timeouts`]).
//!
//! Config (JSON): `{"block": [{"proto": "tls", "sni": "*.bad.example"}], "allow": [...],
//! "default": "allow", "unparsed": "block", "signatures": [{"name": "myproto", "offset": 0,
//! "content": "MYP" | "hex": "4d5950"}], "max_inspect_bytes": 16384, "max_inspect_packets": 8,
//! "timeouts": {...}}` plus the runtime options; the older `idle_timeout_ms` instead of
//! `timeouts` sets every phase, as it did.

pub mod classify;
pub mod detect;
pub mod dns;
pub mod follow;
pub mod http;
pub mod policy;
pub mod tls;

use classify::{classify, Class, Outcome, SigRule};
use follow::Follow;
use nfcore::config::{parse_nf, present, Int, Object};
use nfcore::timeouts::{Legacy, TimeoutsConfig};
use nfcore::{
    Ctx, Key, KeySpace, NetworkFunction, Parsed, RecordWrites, StoreError, Timeouts, Track, Verdict,
};
use packet::{Direction, L4, PROTO_TCP, PROTO_UDP, TCP_RST, TCP_SYN};
use policy::{Policy, Rule, RuleConfig};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

pub const TABLE: &str = "l7";

/// What the tier holds for a flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowState {
    Pending {
        /// Next sequence number per direction (0: canonical, 1: reverse), once known: from the
        /// SYN / SYN-ACK, or from the first data seen (a flow picked up mid-stream).
        next: [Option<u32>; 2],
        /// The direction whose bytes are classified (the first to send data), once known.
        dir: Option<u8>,
        packets: u16,
        buf: Vec<u8>,
    },
    Done {
        class: Class,
        blocked: bool,
        /// The connection's later requests / queries, followed ([`follow`]).
        follow: Option<Followed>,
    },
}

/// A TCP connection followed past its first message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Followed {
    /// The client's direction (0: canonical, 1: reverse).
    pub dir: u8,
    /// Its next sequence number.
    pub next: u32,
    pub at: Follow,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub refreshed_ms: u64,
    /// What the flow's packets showed (directions as `next`): its timeout.
    pub track: Track,
    /// The flow's IP protocol (0 in a record of the older layout, which did not keep it).
    pub proto: u8,
    pub state: FlowState,
}

/// How far a followed connection's body may run past its recorded position before the position
/// is written again (well inside TCP's sequence space).
const BODY_STEP: u64 = 1 << 20;

/// State tags: the older layout's (no track, protocol or follower), and the current one's.
const PENDING_V0: u8 = 0;
const DONE_V0: u8 = 1;
const PENDING_V1: u8 = 2;
const DONE_V1: u8 = 3;

fn put_str(v: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => v.push(0),
        Some(s) => {
            let s = &s.as_bytes()[..s.len().min(255)];
            v.push(1);
            v.push(s.len() as u8);
            v.extend_from_slice(s);
        }
    }
}

fn get_str(b: &[u8], at: &mut usize) -> Option<Option<String>> {
    match *b.get(*at)? {
        0 => {
            *at += 1;
            Some(None)
        }
        1 => {
            let n = *b.get(*at + 1)? as usize;
            let s = std::str::from_utf8(b.get(*at + 2..*at + 2 + n)?).ok()?;
            *at += 2 + n;
            Some(Some(s.to_string()))
        }
        _ => None,
    }
}

impl Record {
    /// `[refreshed_ms (8, LE), tag (2 pending, 3 done), track, proto, the state's fields]`.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&self.refreshed_ms.to_le_bytes());
        let tag = match self.state {
            FlowState::Pending { .. } => PENDING_V1,
            FlowState::Done { .. } => DONE_V1,
        };
        v.extend_from_slice(&[tag, self.track.0, self.proto]);
        match &self.state {
            FlowState::Pending {
                next,
                dir,
                packets,
                buf,
            } => {
                let bits = (next[0].is_some() as u8)
                    | ((next[1].is_some() as u8) << 1)
                    | ((dir.is_some() as u8) << 2)
                    | (((dir == &Some(1)) as u8) << 3);
                v.push(bits);
                v.extend_from_slice(&next[0].unwrap_or(0).to_le_bytes());
                v.extend_from_slice(&next[1].unwrap_or(0).to_le_bytes());
                v.extend_from_slice(&packets.to_le_bytes());
                v.extend_from_slice(buf);
            }
            FlowState::Done {
                class,
                blocked,
                follow,
            } => {
                v.push(*blocked as u8);
                put_str(&mut v, Some(&class.proto));
                put_str(&mut v, class.name.as_deref());
                put_str(&mut v, class.refused.as_deref());
                if let Some(f) = follow {
                    v.push(f.dir);
                    v.extend_from_slice(&f.next.to_le_bytes());
                    f.at.encode_into(&mut v);
                }
            }
        }
        v
    }

    /// A record of the older layout decodes with [`Track::legacy`], protocol 0, no follower.
    pub fn decode(b: &[u8]) -> Option<Record> {
        let refreshed_ms = u64::from_le_bytes(b.get(..8)?.try_into().ok()?);
        let tag = *b.get(8)?;
        let (track, proto, b) = match tag {
            PENDING_V0 | DONE_V0 => (Track::legacy(false), 0, b),
            PENDING_V1 | DONE_V1 => {
                let t = *b.get(9).filter(|t| **t & !Track::MASK == 0)?;
                // The same offsets as the older layout from here on.
                (Track(t), *b.get(10)?, &b[2..])
            }
            _ => return None,
        };
        let state = match tag {
            PENDING_V0 | PENDING_V1 => {
                let bits = *b.get(9).filter(|x| **x < 16)?;
                let seq = |at: usize| -> Option<u32> {
                    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
                };
                let (n0, n1) = (seq(10)?, seq(14)?);
                FlowState::Pending {
                    next: [(bits & 1 != 0).then_some(n0), (bits & 2 != 0).then_some(n1)],
                    dir: (bits & 4 != 0).then_some((bits >> 3) & 1),
                    packets: u16::from_le_bytes(b.get(18..20)?.try_into().ok()?),
                    buf: b[20..].to_vec(),
                }
            }
            _ => {
                let blocked = match *b.get(9)? {
                    0 => false,
                    1 => true,
                    _ => return None,
                };
                let mut at = 10;
                let proto = get_str(b, &mut at)??;
                let name = get_str(b, &mut at)?;
                let refused = get_str(b, &mut at)?;
                let follow = if at == b.len() || tag == DONE_V0 {
                    None
                } else {
                    let dir = *b.get(at).filter(|d| **d <= 1)?;
                    let next = u32::from_le_bytes(b.get(at + 1..at + 5)?.try_into().ok()?);
                    let (f, n) = Follow::decode(b.get(at + 5..)?)?;
                    at += 5 + n;
                    Some(Followed { dir, next, at: f })
                };
                if at != b.len() {
                    return None;
                }
                FlowState::Done {
                    class: Class {
                        proto,
                        name,
                        refused,
                    },
                    blocked,
                    follow,
                }
            }
        };
        Some(Record {
            refreshed_ms,
            track,
            proto,
            state,
        })
    }
}

#[derive(Debug, Default, Clone)]
struct Counters {
    classified: BTreeMap<String, u64>,
    blocked_flows: BTreeMap<String, u64>,
    blocked_packets: u64,
    unparsed: u64,
    pending_ooo_dropped: u64,
    corrupt_state: u64,
    expired: u64,
    /// Requests / queries after a connection's first, classified.
    followed: u64,
    /// Data of a followed connection ahead of its stream, dropped (the sender retransmits).
    follow_ooo_dropped: u64,
}

/// The L7 firewall NF.
pub struct L7Firewall {
    policy: Policy,
    sigs: Vec<SigRule>,
    max_bytes: usize,
    max_packets: u16,
    timeouts: Timeouts,
    /// Records written conditional on what was read (`record_writes`).
    checked: bool,
    c: Counters,
}

nfcore::config_enum! {
    /// What `default` and `unparsed` do with a flow.
    enum Decision { Allow = "allow", Block = "block" }
}

impl Decision {
    fn allow() -> Decision {
        Decision::Allow
    }

    fn block() -> Decision {
        Decision::Block
    }
}

/// The config as written (besides the runtime options).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    block: Vec<Object<RuleConfig>>,
    #[serde(default)]
    allow: Vec<Object<RuleConfig>>,
    #[serde(default = "Decision::allow")]
    default: Decision,
    #[serde(default = "Decision::block")]
    unparsed: Decision,
    /// Added to the built-in ones.
    #[serde(default)]
    signatures: Vec<SigRule>,
    #[serde(default)]
    max_inspect_bytes: Int<16, 65_536, 16_384>,
    #[serde(default)]
    max_inspect_packets: Int<1, 64, 8>,
    #[serde(default, deserialize_with = "present")]
    timeouts: Option<Object<TimeoutsConfig>>,
    #[serde(default, deserialize_with = "present")]
    idle_timeout_ms: Option<Int<1, 86_400_000>>,
    #[serde(default)]
    record_writes: RecordWrites,
}

impl L7Firewall {
    pub fn from_config(cfg: &Value) -> Result<L7Firewall, String> {
        let c: Config = parse_nf(cfg, "l7fw config")?;
        let mut sigs = classify::default_signatures();
        sigs.extend(c.signatures);
        let mut known: Vec<String> = classify::BUILTIN.iter().map(|s| s.to_string()).collect();
        for s in &sigs {
            if !known.contains(&s.name) {
                known.push(s.name.clone());
            }
        }
        let rules = |list: Vec<Object<RuleConfig>>, k: &str| -> Result<Vec<Rule>, String> {
            list.into_iter()
                .enumerate()
                .map(|(i, r)| Rule::from_config(r.0, &format!("{k}[{i}]"), &known))
                .collect()
        };
        Ok(L7Firewall {
            policy: Policy {
                allow: rules(c.allow, "allow")?,
                block: rules(c.block, "block")?,
                default_block: c.default == Decision::Block,
                unparsed_block: c.unparsed == Decision::Block,
            },
            sigs,
            max_bytes: c.max_inspect_bytes.0 as usize,
            max_packets: c.max_inspect_packets.0 as u16,
            timeouts: Timeouts::resolve(
                c.timeouts.map(|t| t.0),
                Legacy {
                    idle_ms: c.idle_timeout_ms.map(|x| x.0),
                    ..Legacy::default()
                },
            )?,
            checked: c.record_writes == RecordWrites::Checked,
            c: Counters::default(),
        })
    }

    fn key(keys: &KeySpace, pkt: &Parsed) -> Key {
        keys.flow(pkt.flow_key().bidirectional_hash(), TABLE)
    }

    /// A classification is final: count it and decide.
    fn decided(&mut self, class: Class) -> (Class, bool) {
        let blocked = self.policy.blocks(&class);
        *self.c.classified.entry(class.proto.clone()).or_default() += 1;
        if class.refused.is_some() {
            self.c.unparsed += 1;
        }
        if blocked {
            *self.c.blocked_flows.entry(class.proto.clone()).or_default() += 1;
        }
        (class, blocked)
    }

    /// The requests / queries a follower completed: the first one the policy blocks.
    fn judge_followed(&mut self, classes: Vec<Class>) -> Option<Class> {
        for c in classes {
            self.c.followed += 1;
            if c.refused.is_some() {
                self.c.unparsed += 1;
            }
            if self.policy.blocks(&c) {
                *self.c.blocked_flows.entry(c.proto.clone()).or_default() += 1;
                return Some(c);
            }
        }
        None
    }

    /// The timeouts in use.
    pub fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }

    fn timeout(&self, rec: &Record) -> u64 {
        self.timeouts.for_track(rec.track, rec.proto)
    }

    /// Write `rec` if `force` or when its idle timer moves (the record is `new`, its track is
    /// no longer `old`, or a quarter of the timeout passed).
    fn save(
        &self,
        ctx: &mut Ctx<'_>,
        key: &Key,
        mut rec: Record,
        force: bool,
        new: bool,
        old: Track,
    ) {
        let now = ctx.now_ms();
        let timeout = self.timeout(&rec);
        let move_timer =
            new || rec.track != old || now.saturating_sub(rec.refreshed_ms) >= timeout / 4;
        if move_timer {
            rec.refreshed_ms = now;
            ctx.timer_set(key.clone(), now + timeout);
        }
        if move_timer || force {
            ctx.set(key, rec.encode());
        }
    }

    /// A packet of a decided, allowed TCP flow: the client's data goes through its follower.
    #[allow(clippy::too_many_arguments)]
    fn followed_packet(
        &mut self,
        ctx: &mut Ctx<'_>,
        key: &Key,
        mut rec: Record,
        old: Track,
        d: usize,
        data_seq: u32,
        payload: &[u8],
    ) -> Verdict {
        let FlowState::Done {
            follow: Some(f), ..
        } = &mut rec.state
        else {
            self.save(ctx, key, rec, false, false, old);
            return Verdict::Forward;
        };
        if f.dir as usize != d || payload.is_empty() || f.at == Follow::Opaque {
            self.save(ctx, key, rec, false, false, old);
            return Verdict::Forward;
        }
        let mut rel = data_seq.wrapping_sub(f.next) as i32;
        let len = payload.len() as u64;
        // Body bytes need no inspection: a segment ending within the body passes and the
        // recorded position stays (no write per packet), moving only every BODY_STEP bytes.
        if let Follow::Body { left } = f.at {
            let end = rel as i64 + len as i64;
            if end > 0 && end as u64 <= left.min(BODY_STEP) {
                self.save(ctx, key, rec, false, false, old);
                return Verdict::Forward;
            }
        }
        if rel > 0 {
            // Ahead of the recorded position: only over body bytes (which need no inspection).
            if rel as u64 > f.at.skippable() {
                self.c.follow_ooo_dropped += 1;
                self.save(ctx, key, rec, false, false, old);
                return Verdict::Drop;
            }
            f.at.skip(rel as u64);
            f.next = data_seq;
            rel = 0;
        }
        let skip = rel.unsigned_abs() as usize;
        if skip >= payload.len() {
            // A retransmission of bytes already followed.
            self.save(ctx, key, rec, false, false, old);
            return Verdict::Forward;
        }
        let new = &payload[skip..];
        let mut classes = Vec::new();
        f.at.feed(new, &mut classes);
        f.next = f.next.wrapping_add(new.len() as u32);
        let verdict = match self.judge_followed(classes) {
            Some(class) => {
                self.c.blocked_packets += 1;
                rec.state = FlowState::Done {
                    class,
                    blocked: true,
                    follow: None,
                };
                Verdict::Drop
            }
            None => Verdict::Forward,
        };
        self.save(ctx, key, rec, true, false, old);
        verdict
    }
}

impl NetworkFunction for L7Firewall {
    fn name(&self) -> &'static str {
        "l7fw"
    }

    fn record_lifetime_ms(&self) -> Option<u64> {
        Some(self.timeouts.longest_ms())
    }

    /// Rules, signatures, limits and timeouts change in place, counters kept. A connection's
    /// decision stands until its next request or query, which the new policy classifies.
    fn reconfigure(
        &mut self,
        cfg: &Value,
        _store: &mut dyn nfcore::FlowStore,
        _keys: &KeySpace,
    ) -> Result<bool, nfcore::Refused> {
        let mut new = L7Firewall::from_config(cfg)?;
        new.c = std::mem::take(&mut self.c);
        *self = new;
        Ok(true)
    }

    fn read_set(&self, keys: &KeySpace, pkt: &Parsed, _frame: &[u8], out: &mut Vec<Key>) {
        if matches!(pkt.l4, L4::Tcp { .. } | L4::Udp { .. }) {
            out.push(Self::key(keys, pkt));
        }
    }

    fn process(
        &mut self,
        ctx: &mut Ctx<'_>,
        frame: &mut Vec<u8>,
        pkt: &Parsed,
    ) -> Result<Verdict, StoreError> {
        let (tcp, seq, flags) = match pkt.l4 {
            L4::Tcp { seq, flags, .. } => (true, seq, flags),
            L4::Udp { .. } => (false, 0, 0),
            _ => return Ok(Verdict::Forward),
        };
        let proto = if tcp { PROTO_TCP } else { PROTO_UDP };
        let syn = flags & (TCP_SYN | TCP_RST) == TCP_SYN;
        let key = Self::key(ctx.keys, pkt);
        let d = match pkt.flow_key().canonical().1 {
            Direction::Forward => 0usize,
            Direction::Reverse => 1,
        };
        let payload = pkt.payload(frame);
        // The record is read, changed and written back: the write applies only if no other
        // instance wrote it meanwhile (else this batch's packets do not leave, the next ones
        // see that instance's record).
        if self.checked {
            ctx.write_if_unchanged(&key)?;
        }
        // A flow idle past its timeout is gone even if its timer has not fired yet.
        let now = ctx.now_ms();
        let existing = ctx.get(&key)?.map(Record::decode).filter(|r| {
            r.as_ref()
                .is_none_or(|r| now < r.refreshed_ms + self.timeouts.for_track(r.track, proto))
        });
        let is_new = existing.is_none();
        let mut rec = match existing {
            Some(Some(r)) => r,
            Some(None) => {
                self.c.corrupt_state += 1;
                return Ok(Verdict::Drop);
            }
            // Nothing to learn from (a SYN is: where the stream starts).
            None if payload.is_empty() && !syn => return Ok(Verdict::Forward),
            None => Record {
                refreshed_ms: 0,
                track: Track::default(),
                proto,
                state: FlowState::Pending {
                    next: [None, None],
                    dir: None,
                    packets: 0,
                    buf: Vec::new(),
                },
            },
        };
        let old = rec.track;
        rec.track = rec.track.seen(d, proto, flags);
        rec.proto = proto;
        match rec.state {
            FlowState::Done { blocked: true, .. } => {
                // Stays blocked while packets keep coming (the idle timer moves as for any flow).
                self.c.blocked_packets += 1;
                self.save(ctx, &key, rec, false, false, old);
                Ok(Verdict::Drop)
            }
            FlowState::Done { .. } if tcp => Ok(self.followed_packet(
                ctx,
                &key,
                rec,
                old,
                d,
                seq.wrapping_add(syn as u32),
                payload,
            )),
            FlowState::Done { ref class, .. } => {
                // DNS over UDP: every query on the flow is checked, not only the first (also on a
                // flow that started with something else, e.g. a datagram from the server side).
                if (class.proto == "dns" || class.proto == "unknown") && !payload.is_empty() {
                    if let Ok(name) = dns::query_name(payload) {
                        let q = Class {
                            proto: "dns".into(),
                            name: Some(name),
                            refused: None,
                        };
                        if self.policy.blocks(&q) {
                            *self.c.blocked_flows.entry("dns".into()).or_default() += 1;
                            self.c.blocked_packets += 1;
                            let r = Record {
                                state: FlowState::Done {
                                    class: q,
                                    blocked: true,
                                    follow: None,
                                },
                                ..rec
                            };
                            self.save(ctx, &key, r, true, false, old);
                            return Ok(Verdict::Drop);
                        }
                    }
                }
                self.save(ctx, &key, rec, false, false, old);
                Ok(Verdict::Forward)
            }
            FlowState::Pending {
                mut next,
                dir,
                packets,
                mut buf,
            } => {
                let this = Some(d as u8);
                let mut changed = is_new || rec.track != old;
                // The stream of a direction starts after its SYN (until its first byte is seen).
                if syn && dir != this && next[d] != Some(seq.wrapping_add(1)) {
                    next[d] = Some(seq.wrapping_add(1));
                    changed = true;
                }
                let pending = |next, dir, packets, buf| FlowState::Pending {
                    next,
                    dir,
                    packets,
                    buf,
                };
                if payload.is_empty() || (dir.is_some() && dir != this) {
                    rec.state = pending(next, dir, packets, buf);
                    self.save(ctx, &key, rec, changed, is_new, old);
                    return Ok(Verdict::Forward);
                }
                let prev_len = buf.len();
                let new: &[u8] = if tcp {
                    let data_seq = seq.wrapping_add(syn as u32);
                    // Without a SYN seen, the flow is picked up where its data starts.
                    let start = next[d].unwrap_or(data_seq);
                    let rel = data_seq.wrapping_sub(start) as i32;
                    if rel > 0 {
                        // Bytes ahead of the stream start (or of what was inspected): the first
                        // bytes must come first, so the sender retransmits these.
                        self.c.pending_ooo_dropped += 1;
                        if changed {
                            rec.state = pending(next, dir, packets, buf);
                            self.save(ctx, &key, rec, true, is_new, old);
                        }
                        return Ok(Verdict::Drop);
                    }
                    let skip = rel.unsigned_abs() as usize;
                    if skip >= payload.len() {
                        if changed {
                            rec.state = pending(next, dir, packets, buf);
                            self.save(ctx, &key, rec, true, is_new, old);
                        }
                        return Ok(Verdict::Forward); // retransmission of inspected bytes
                    }
                    let room = self.max_bytes.saturating_sub(buf.len());
                    let new = &payload[skip..];
                    buf.extend_from_slice(&new[..new.len().min(room)]);
                    next[d] = Some(start.wrapping_add(new.len() as u32));
                    new
                } else {
                    buf = payload[..payload.len().min(self.max_bytes)].to_vec();
                    &[]
                };
                let packets = packets.saturating_add(1);
                let last = !tcp || packets >= self.max_packets || buf.len() >= self.max_bytes;
                let state = match classify(&buf, tcp, &self.sigs, last) {
                    Outcome::NeedMore => pending(next, this, packets, buf),
                    Outcome::Done(class) => {
                        let (class, blocked) = self.decided(class);
                        // An allowed HTTP / DNS connection: its later requests are checked too,
                        // from the start of the stream (the first again, by the framing parser).
                        let follow = match Follow::start(&class.proto) {
                            Some(mut at) if tcp && !blocked && class.refused.is_none() => {
                                let mut classes = Vec::new();
                                at.feed(&buf[..prev_len], &mut classes);
                                at.feed(new, &mut classes);
                                match self.judge_followed(classes) {
                                    Some(c) => Err(c),
                                    None => Ok(next[d].map(|n| Followed {
                                        dir: d as u8,
                                        next: n,
                                        at,
                                    })),
                                }
                            }
                            _ => Ok(None),
                        };
                        match follow {
                            Ok(follow) => FlowState::Done {
                                class,
                                blocked,
                                follow,
                            },
                            Err(c) => FlowState::Done {
                                class: c,
                                blocked: true,
                                follow: None,
                            },
                        }
                    }
                };
                let verdict = match state {
                    FlowState::Done { blocked: true, .. } => {
                        self.c.blocked_packets += 1;
                        Verdict::Drop
                    }
                    _ => Verdict::Forward,
                };
                rec.state = state;
                self.save(ctx, &key, rec, true, is_new, old);
                Ok(verdict)
            }
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, member: &[u8]) -> Result<(), StoreError> {
        let Some(cur) = ctx.get_owned(member)? else {
            return Ok(());
        };
        if Record::decode(&cur).is_some_and(|r| ctx.now_ms() < r.refreshed_ms + self.timeout(&r)) {
            return Ok(()); // refreshed since the timer was claimed; its new timer is pending
        }
        // Delete only what we read: a flow re-created meanwhile stays.
        if ctx.store().compare_and_set(member, Some(&cur), None)? {
            self.c.expired += 1;
        }
        Ok(())
    }

    fn stats(&self) -> Value {
        let c = &self.c;
        serde_json::json!({
            "classified": c.classified, "blocked_flows": c.blocked_flows,
            "blocked_packets": c.blocked_packets, "unparsed": c.unparsed,
            "pending_ooo_dropped": c.pending_ooo_dropped, "corrupt_state": c.corrupt_state,
            "expired": c.expired, "followed": c.followed,
            "follow_ooo_dropped": c.follow_ooo_dropped,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_garbage_is_refused() {
        let recs = [
            Record {
                refreshed_ms: 7,
                track: Track(3),
                proto: 6,
                state: FlowState::Pending {
                    next: [Some(5), None],
                    dir: Some(1),
                    packets: 2,
                    buf: b"GET".to_vec(),
                },
            },
            Record {
                refreshed_ms: 0,
                track: Track(0),
                proto: 17,
                state: FlowState::Pending {
                    next: [None, Some(u32::MAX)],
                    dir: None,
                    packets: 0,
                    buf: vec![],
                },
            },
            Record {
                refreshed_ms: 9,
                track: Track(0x47),
                proto: 6,
                state: FlowState::Done {
                    class: Class {
                        proto: "tls".into(),
                        name: Some("a.example".into()),
                        refused: None,
                    },
                    blocked: true,
                    follow: None,
                },
            },
            Record {
                refreshed_ms: 9,
                track: Track(0x0f),
                proto: 6,
                state: FlowState::Done {
                    class: Class {
                        proto: "http".into(),
                        name: Some("a.example".into()),
                        refused: None,
                    },
                    blocked: false,
                    follow: Some(Followed {
                        dir: 1,
                        next: 77,
                        at: Follow::Head {
                            buf: b"GET / HT".to_vec(),
                            upgraded: false,
                        },
                    }),
                },
            },
        ];
        for r in &recs {
            assert_eq!(Record::decode(&r.encode()).as_ref(), Some(r));
        }
        let mut bad = recs[2].encode();
        bad.push(0);
        assert_eq!(Record::decode(&bad), None);
        let mut bad = recs[3].encode();
        bad.push(0);
        assert_eq!(Record::decode(&bad), None);
        assert_eq!(Record::decode(&[1, 2, 3]), None);
        // The older layout (no track, protocol or follower) still decodes.
        for r in &recs[..3] {
            let mut old = r.encode();
            old.drain(9..11);
            old[8] -= 2;
            let got = Record::decode(&old).unwrap();
            assert_eq!((got.track, got.proto), (Track::legacy(false), 0));
            assert_eq!((&got.state, got.refreshed_ms), (&r.state, r.refreshed_ms));
        }
    }
}
