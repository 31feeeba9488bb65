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
//!
//! Config (JSON): `{"block": [{"proto": "tls", "sni": "*.bad.example"}], "allow": [...],
//! "default": "allow", "unparsed": "block", "signatures": [{"name": "myproto", "offset": 0,
//! "content": "MYP" | "hex": "4d5950"}], "max_inspect_bytes": 16384, "max_inspect_packets": 8,
//! "idle_timeout_ms": 60000}` plus the runtime options.

pub mod classify;
pub mod dns;
pub mod follow;
pub mod http;
pub mod policy;
pub mod tls;

use classify::{classify, Class, Outcome, SigRule};
use nfcore::config::{parse_nf, Int, Object};
use nfcore::{Ctx, Key, KeySpace, NetworkFunction, Parsed, StoreError, Verdict};
use packet::{Direction, L4, TCP_RST, TCP_SYN};
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
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub refreshed_ms: u64,
    pub state: FlowState,
}

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
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&self.refreshed_ms.to_le_bytes());
        match &self.state {
            FlowState::Pending {
                next,
                dir,
                packets,
                buf,
            } => {
                v.push(0);
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
            FlowState::Done { class, blocked } => {
                v.push(1);
                v.push(*blocked as u8);
                put_str(&mut v, Some(&class.proto));
                put_str(&mut v, class.name.as_deref());
                put_str(&mut v, class.refused.as_deref());
            }
        }
        v
    }

    pub fn decode(b: &[u8]) -> Option<Record> {
        let refreshed_ms = u64::from_le_bytes(b.get(..8)?.try_into().ok()?);
        let state = match *b.get(8)? {
            0 => {
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
            1 => {
                let blocked = match *b.get(9)? {
                    0 => false,
                    1 => true,
                    _ => return None,
                };
                let mut at = 10;
                let proto = get_str(b, &mut at)??;
                let name = get_str(b, &mut at)?;
                let refused = get_str(b, &mut at)?;
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
                }
            }
            _ => return None,
        };
        Some(Record {
            refreshed_ms,
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
}

/// The L7 firewall NF.
pub struct L7Firewall {
    policy: Policy,
    sigs: Vec<SigRule>,
    max_bytes: usize,
    max_packets: u16,
    idle_ms: u64,
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
    #[serde(default)]
    idle_timeout_ms: Int<1, 86_400_000, 60_000>,
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
            idle_ms: c.idle_timeout_ms.0,
            c: Counters::default(),
        })
    }

    fn key(keys: &KeySpace, pkt: &Parsed) -> Key {
        keys.flow(pkt.flow_key().bidirectional_hash(), TABLE)
    }

    /// A classification is final: count it and decide.
    fn decided(&mut self, class: Class) -> FlowState {
        let blocked = self.policy.blocks(&class);
        *self.c.classified.entry(class.proto.clone()).or_default() += 1;
        if class.refused.is_some() {
            self.c.unparsed += 1;
        }
        if blocked {
            *self.c.blocked_flows.entry(class.proto.clone()).or_default() += 1;
        }
        FlowState::Done { class, blocked }
    }

    /// Write `rec` if `force` or when its idle timer moves (a quarter of the timeout passed, or
    /// the record is `new`).
    fn save(&self, ctx: &mut Ctx<'_>, key: &Key, mut rec: Record, force: bool, new: bool) {
        let now = ctx.now_ms();
        let move_timer = new || now.saturating_sub(rec.refreshed_ms) >= self.idle_ms / 4;
        if move_timer {
            rec.refreshed_ms = now;
            ctx.timer_set(key.clone(), now + self.idle_ms);
        }
        if move_timer || force {
            ctx.set(key, rec.encode());
        }
    }
}

impl NetworkFunction for L7Firewall {
    fn name(&self) -> &'static str {
        "l7fw"
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
        let syn = flags & (TCP_SYN | TCP_RST) == TCP_SYN;
        let key = Self::key(ctx.keys, pkt);
        let d = match pkt.flow_key().canonical().1 {
            Direction::Forward => 0usize,
            Direction::Reverse => 1,
        };
        let payload = pkt.payload(frame);
        // A flow idle past its timeout is gone even if its timer has not fired yet.
        let (now, idle) = (ctx.now_ms(), self.idle_ms);
        let existing = ctx
            .get(&key)?
            .map(Record::decode)
            .filter(|r| r.as_ref().is_none_or(|r| now < r.refreshed_ms + idle));
        let is_new = existing.is_none();
        let rec = match existing {
            Some(Some(r)) => r,
            Some(None) => {
                self.c.corrupt_state += 1;
                return Ok(Verdict::Drop);
            }
            // Nothing to learn from (a SYN is: where the stream starts).
            None if payload.is_empty() && !syn => return Ok(Verdict::Forward),
            None => Record {
                refreshed_ms: 0,
                state: FlowState::Pending {
                    next: [None, None],
                    dir: None,
                    packets: 0,
                    buf: Vec::new(),
                },
            },
        };
        match rec.state {
            FlowState::Done { blocked: true, .. } => {
                // Stays blocked while packets keep coming (the idle timer moves as for any flow).
                self.c.blocked_packets += 1;
                self.save(ctx, &key, rec, false, false);
                Ok(Verdict::Drop)
            }
            FlowState::Done { ref class, .. } => {
                // DNS over UDP: every query on the flow is checked, not only the first (also on a
                // flow that started with something else, e.g. a datagram from the server side).
                if !tcp && (class.proto == "dns" || class.proto == "unknown") && !payload.is_empty()
                {
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
                                refreshed_ms: rec.refreshed_ms,
                                state: FlowState::Done {
                                    class: q,
                                    blocked: true,
                                },
                            };
                            self.save(ctx, &key, r, true, false);
                            return Ok(Verdict::Drop);
                        }
                    }
                }
                self.save(ctx, &key, rec, false, false);
                Ok(Verdict::Forward)
            }
            FlowState::Pending {
                mut next,
                dir,
                packets,
                mut buf,
            } => {
                let this = Some(d as u8);
                let mut changed = is_new;
                // The stream of a direction starts after its SYN (until its first byte is seen).
                if syn && dir != this && next[d] != Some(seq.wrapping_add(1)) {
                    next[d] = Some(seq.wrapping_add(1));
                    changed = true;
                }
                if payload.is_empty() || (dir.is_some() && dir != this) {
                    let r = Record {
                        refreshed_ms: rec.refreshed_ms,
                        state: FlowState::Pending {
                            next,
                            dir,
                            packets,
                            buf,
                        },
                    };
                    self.save(ctx, &key, r, changed, is_new);
                    return Ok(Verdict::Forward);
                }
                if tcp {
                    let data_seq = seq.wrapping_add(syn as u32);
                    // Without a SYN seen, the flow is picked up where its data starts.
                    let start = next[d].unwrap_or(data_seq);
                    let rel = data_seq.wrapping_sub(start) as i32;
                    if rel > 0 {
                        // Bytes ahead of the stream start (or of what was inspected): the first
                        // bytes must come first, so the sender retransmits these.
                        self.c.pending_ooo_dropped += 1;
                        if changed {
                            let r = Record {
                                refreshed_ms: rec.refreshed_ms,
                                state: FlowState::Pending {
                                    next,
                                    dir,
                                    packets,
                                    buf,
                                },
                            };
                            self.save(ctx, &key, r, true, is_new);
                        }
                        return Ok(Verdict::Drop);
                    }
                    let skip = rel.unsigned_abs() as usize;
                    if skip >= payload.len() {
                        return Ok(Verdict::Forward); // retransmission of inspected bytes
                    }
                    let room = self.max_bytes.saturating_sub(buf.len());
                    let new = &payload[skip..];
                    buf.extend_from_slice(&new[..new.len().min(room)]);
                    next[d] = Some(start.wrapping_add(new.len() as u32));
                } else {
                    buf = payload[..payload.len().min(self.max_bytes)].to_vec();
                }
                let packets = packets.saturating_add(1);
                let last = !tcp || packets >= self.max_packets || buf.len() >= self.max_bytes;
                let state = match classify(&buf, tcp, &self.sigs, last) {
                    Outcome::NeedMore => FlowState::Pending {
                        next,
                        dir: this,
                        packets,
                        buf,
                    },
                    Outcome::Done(class) => self.decided(class),
                };
                let verdict = match state {
                    FlowState::Done { blocked: true, .. } => {
                        self.c.blocked_packets += 1;
                        Verdict::Drop
                    }
                    _ => Verdict::Forward,
                };
                let r = Record {
                    refreshed_ms: rec.refreshed_ms,
                    state,
                };
                self.save(ctx, &key, r, true, is_new);
                Ok(verdict)
            }
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, member: &[u8]) -> Result<(), StoreError> {
        let Some(cur) = ctx.get_owned(member)? else {
            return Ok(());
        };
        if Record::decode(&cur).is_some_and(|r| ctx.now_ms() < r.refreshed_ms + self.idle_ms) {
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
            "expired": c.expired,
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
                state: FlowState::Pending {
                    next: [Some(5), None],
                    dir: Some(1),
                    packets: 2,
                    buf: b"GET".to_vec(),
                },
            },
            Record {
                refreshed_ms: 0,
                state: FlowState::Pending {
                    next: [None, Some(u32::MAX)],
                    dir: None,
                    packets: 0,
                    buf: vec![],
                },
            },
            Record {
                refreshed_ms: 9,
                state: FlowState::Done {
                    class: Class {
                        proto: "tls".into(),
                        name: Some("a.example".into()),
                        refused: None,
                    },
                    blocked: true,
                },
            },
        ];
        for r in &recs {
            assert_eq!(Record::decode(&r.encode()).as_ref(), Some(r));
        }
        let mut bad = recs[2].encode();
        bad.push(0);
        assert_eq!(Record::decode(&bad), None);
        assert_eq!(Record::decode(&[1, 2, 3]), None);
    }
}
