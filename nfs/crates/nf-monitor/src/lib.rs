//! Flow monitor (the NFActor paper's monitor): per-flow packet and byte counters per direction,
//! kept in the tier (table `mon`, one key per connection), idle flows expire by tier-held timers.
//! Forwards every packet unchanged.
//!
//! Config (JSON): `{"idle_timeout_ms": 30000}` plus the runtime options.

use nfcore::config::{object, only_keys, opt_u64, RUNTIME_KEYS};
use nfcore::{Ctx, Key, KeySpace, NetworkFunction, Parsed, StoreError, Verdict};
use packet::Direction;
use serde_json::Value;

pub const TABLE: &str = "mon";

/// Counters of one connection (directions relative to the canonical key).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowRecord {
    pub pkts_fwd: u64,
    pub bytes_fwd: u64,
    pub pkts_rev: u64,
    pub bytes_rev: u64,
    pub first_ms: u64,
    pub last_ms: u64,
    /// When the idle timer was last moved.
    pub timer_ms: u64,
}

impl FlowRecord {
    pub fn encode(&self) -> Vec<u8> {
        [
            self.pkts_fwd,
            self.bytes_fwd,
            self.pkts_rev,
            self.bytes_rev,
            self.first_ms,
            self.last_ms,
            self.timer_ms,
        ]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect()
    }

    pub fn decode(b: &[u8]) -> Option<FlowRecord> {
        if b.len() != 56 {
            return None;
        }
        let f = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        Some(FlowRecord {
            pkts_fwd: f(0),
            bytes_fwd: f(1),
            pkts_rev: f(2),
            bytes_rev: f(3),
            first_ms: f(4),
            last_ms: f(5),
            timer_ms: f(6),
        })
    }
}

/// The monitor NF.
pub struct Monitor {
    idle_ms: u64,
    new_flows: u64,
    expired: u64,
}

impl Monitor {
    pub fn from_config(cfg: &Value) -> Result<Monitor, String> {
        let o = object(cfg, "monitor config")?;
        let mut allowed = vec!["idle_timeout_ms"];
        allowed.extend_from_slice(RUNTIME_KEYS);
        only_keys(o, &allowed, "monitor config")?;
        Ok(Monitor {
            idle_ms: opt_u64(o, "idle_timeout_ms", 30_000, 1, 86_400_000)?,
            new_flows: 0,
            expired: 0,
        })
    }

    /// Key of the record of the connection `pkt` belongs to.
    pub fn key(keys: &KeySpace, pkt: &Parsed) -> Key {
        keys.flow(pkt.flow_key().bidirectional_hash(), TABLE)
    }
}

impl NetworkFunction for Monitor {
    fn name(&self) -> &'static str {
        "monitor"
    }

    fn read_set(&self, keys: &KeySpace, pkt: &Parsed, _frame: &[u8], out: &mut Vec<Key>) {
        out.push(Self::key(keys, pkt));
    }

    fn process(
        &mut self,
        ctx: &mut Ctx<'_>,
        _frame: &mut Vec<u8>,
        pkt: &Parsed,
    ) -> Result<Verdict, StoreError> {
        let key = Self::key(ctx.keys, pkt);
        let now = ctx.now_ms();
        let mut r = match ctx.get(&key)?.and_then(FlowRecord::decode) {
            Some(r) => r,
            None => {
                self.new_flows += 1;
                FlowRecord {
                    first_ms: now,
                    ..FlowRecord::default()
                }
            }
        };
        let bytes = pkt.frame_len as u64;
        match pkt.flow_key().canonical().1 {
            Direction::Forward => {
                r.pkts_fwd += 1;
                r.bytes_fwd += bytes;
            }
            Direction::Reverse => {
                r.pkts_rev += 1;
                r.bytes_rev += bytes;
            }
        }
        r.last_ms = now;
        if r.pkts_fwd + r.pkts_rev == 1 || now.saturating_sub(r.timer_ms) >= self.idle_ms / 4 {
            r.timer_ms = now;
            ctx.timer_set(key.clone(), now + self.idle_ms);
        }
        ctx.set(&key, r.encode());
        Ok(Verdict::Forward)
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, member: &[u8]) -> Result<(), StoreError> {
        self.expired += 1;
        ctx.del(member);
        Ok(())
    }

    fn stats(&self) -> Value {
        serde_json::json!({"new_flows": self.new_flows, "expired": self.expired})
    }
}
