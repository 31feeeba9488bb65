//! Flow monitor (the NFActor paper's monitor): per-flow packet and byte counters per direction,
//! kept in the tier (table `mon`, one key per connection), idle flows expire by tier-held timers.
//! Forwards every packet unchanged.
//!
//! Two ways to keep the counters (`counters`):
//! - `"record"` (default): the record ([`FlowRecord`], 56 bytes) is read with the batch and
//!   written back with it; the batch's packets leave after the write is acknowledged.
//! - `"increments"`: the record is a hash (fields [`FIELDS`]) that the NF never reads: each
//!   flush sends, per flow, HINCRBY of the counters that moved, HSET `last_ms` and (once per
//!   flow and instance) HSETNX `first_ms`. Instances add to one record concurrently without a
//!   race. `flush_ms` (increments only): 0 (default) flushes with every batch, acknowledged
//!   before the batch leaves, so nothing counted is lost; N > 0 is write-behind (the workshop
//!   paper's async mode): deltas stay in the instance and are flushed with the first batch at
//!   least N ms after the previous flush, and on a clean stop. A crash loses the deltas not
//!   flushed yet: at most the last N ms of counts, or, if traffic stopped, the counts since the
//!   last flush. The idle timer is moved by the instance that flushes (at most every quarter
//!   of the timeout per flow, from its own memory of when it last did).
//!
//! Config (JSON): `{"idle_timeout_ms": 30000, "counters": "record"|"increments", "flush_ms": 0}`
//! plus the runtime options.

use flowstore::BatchState;
use nfcore::config::{parse_nf, present, Int};
use nfcore::{Ctx, FlowStore, HashOp, Key, KeySpace, NetworkFunction, Parsed, StoreError, Verdict};
use packet::Direction;
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashMap;

pub const TABLE: &str = "mon";
/// Hash fields of a record in `increments` mode, in [`FlowRecord`] order (without `timer_ms`).
pub const FIELDS: [&str; 6] = [
    "pkts_fwd",
    "bytes_fwd",
    "pkts_rev",
    "bytes_rev",
    "first_ms",
    "last_ms",
];
/// Bound on the per-instance memory of flows (timer moves, first seen); cleared when reached.
const MAX_TRACKED: usize = 1 << 20;

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

    /// A record from its hash fields (`increments` mode; absent fields are 0, `timer_ms` 0).
    pub fn from_hash(fields: &[(Vec<u8>, Vec<u8>)]) -> Option<FlowRecord> {
        let mut v = [0u64; 6];
        for (f, x) in fields {
            let i = FIELDS.iter().position(|n| n.as_bytes() == f.as_slice())?;
            v[i] = std::str::from_utf8(x).ok()?.parse().ok()?;
        }
        Some(FlowRecord {
            pkts_fwd: v[0],
            bytes_fwd: v[1],
            pkts_rev: v[2],
            bytes_rev: v[3],
            first_ms: v[4],
            last_ms: v[5],
            timer_ms: 0,
        })
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

/// Counts of one flow not flushed yet (`increments` mode).
#[derive(Debug, Default, Clone, Copy)]
struct Delta {
    pkts: [u64; 2],
    bytes: [u64; 2],
    first_ms: u64,
    last_ms: u64,
}

/// How the counters are kept in the tier (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counters {
    Record,
    Increments { flush_ms: u64 },
}

nfcore::config_enum! {
    /// `counters` as the config names it ([`Counters`] adds the flush interval).
    #[derive(Default)]
    enum CountersName { #[default] Record = "record", Increments = "increments" }
}

/// The config as written (besides the runtime options).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    idle_timeout_ms: Int<1, 86_400_000, 30_000>,
    #[serde(default)]
    counters: CountersName,
    /// `increments` only; absent: 0.
    #[serde(default, deserialize_with = "present")]
    flush_ms: Option<Int<0, 60_000>>,
}

/// The monitor NF.
pub struct Monitor {
    idle_ms: u64,
    mode: Counters,
    new_flows: u64,
    expired: u64,
    /// `increments`: deltas not flushed yet, in first-seen order.
    pending: HashMap<Key, Delta>,
    pending_order: Vec<Key>,
    /// None before the first flush (the first packet flushes).
    last_flush_ms: Option<u64>,
    /// `increments`: when this instance last moved each flow's timer.
    moved: HashMap<Key, u64>,
    flushes: u64,
}

impl Monitor {
    pub fn from_config(cfg: &Value) -> Result<Monitor, String> {
        let c: Config = parse_nf(cfg, "monitor config")?;
        let mode = match (c.counters, c.flush_ms) {
            (CountersName::Record, Some(_)) => {
                return Err("flush_ms needs \"counters\": \"increments\"".into())
            }
            (CountersName::Record, None) => Counters::Record,
            (CountersName::Increments, flush) => Counters::Increments {
                flush_ms: flush.unwrap_or_default().0,
            },
        };
        Ok(Monitor {
            idle_ms: c.idle_timeout_ms.0,
            mode,
            new_flows: 0,
            expired: 0,
            pending: HashMap::new(),
            pending_order: Vec::new(),
            last_flush_ms: None,
            moved: HashMap::new(),
            flushes: 0,
        })
    }

    /// `increments`: add the packet to its flow's pending delta.
    fn count(&mut self, key: Key, di: usize, bytes: u64, now: u64) {
        let d = match self.pending.get_mut(&key) {
            Some(d) => d,
            None => {
                self.pending_order.push(key.clone());
                self.pending.entry(key).or_insert(Delta {
                    first_ms: now,
                    ..Delta::default()
                })
            }
        };
        d.pkts[di] += 1;
        d.bytes[di] += bytes;
        d.last_ms = now;
    }

    /// `increments`: write every pending delta (and move the timers due) through `ctx`.
    fn flush(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.now_ms();
        if self.moved.len() >= MAX_TRACKED {
            self.moved.clear();
        }
        for key in std::mem::take(&mut self.pending_order) {
            let Some(d) = self.pending.remove(&key) else {
                continue;
            };
            for (i, f) in FIELDS[..4].iter().enumerate() {
                let v = if i % 2 == 0 {
                    d.pkts[i / 2]
                } else {
                    d.bytes[i / 2]
                };
                if v > 0 {
                    ctx.hash_op(&key, f.as_bytes(), HashOp::Incr(v as i64));
                }
            }
            let ms = |v: u64| v.to_string().into_bytes();
            ctx.hash_op(&key, b"last_ms", HashOp::Set(ms(d.last_ms)));
            let seen = self.moved.get(&key).copied();
            if seen.is_none() {
                self.new_flows += 1;
                ctx.hash_op(&key, b"first_ms", HashOp::SetNx(ms(d.first_ms)));
            }
            if seen.is_none_or(|t| now.saturating_sub(t) >= self.idle_ms / 4) {
                self.moved.insert(key.clone(), now);
                ctx.timer_set(key, now + self.idle_ms);
            }
        }
        self.last_flush_ms = Some(now);
        self.flushes += 1;
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

    fn record_lifetime_ms(&self) -> Option<u64> {
        Some(self.idle_ms)
    }

    /// `idle_timeout_ms` and `flush_ms` change in place (pending deltas and counters kept; a
    /// flow's timer moves to the new timeout at its next refresh). `counters` cannot: the
    /// two modes keep a flow's record in different layouts, so live flows would be unreadable
    /// (refused, naming it).
    fn reconfigure(
        &mut self,
        cfg: &Value,
        _store: &mut dyn FlowStore,
        _keys: &KeySpace,
    ) -> Result<bool, nfcore::Refused> {
        self.check_change(cfg)?;
        let new = Monitor::from_config(cfg)?;
        (self.idle_ms, self.mode) = (new.idle_ms, new.mode);
        Ok(true)
    }

    fn check_change(&self, cfg: &Value) -> Result<(), String> {
        let new = Monitor::from_config(cfg)?;
        if std::mem::discriminant(&new.mode) != std::mem::discriminant(&self.mode) {
            return Err(
                "counters: cannot change on a running monitor (the record and increments modes \
                 keep a flow's counters in different layouts); recreate the NF"
                    .into(),
            );
        }
        Ok(())
    }

    fn read_set(&self, keys: &KeySpace, pkt: &Parsed, _frame: &[u8], out: &mut Vec<Key>) {
        if self.mode == Counters::Record {
            out.push(Self::key(keys, pkt));
        }
    }

    fn process(
        &mut self,
        ctx: &mut Ctx<'_>,
        _frame: &mut Vec<u8>,
        pkt: &Parsed,
    ) -> Result<Verdict, StoreError> {
        let key = Self::key(ctx.keys, pkt);
        let now = ctx.now_ms();
        if let Counters::Increments { flush_ms } = self.mode {
            let di = match pkt.flow_key().canonical().1 {
                Direction::Forward => 0,
                Direction::Reverse => 1,
            };
            self.count(key, di, pkt.frame_len as u64, now);
            if self
                .last_flush_ms
                .is_none_or(|t| now.saturating_sub(t) >= flush_ms)
            {
                self.flush(ctx);
            }
            return Ok(Verdict::Forward);
        }
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
        // Counts flushed later start a new record, with a new timer.
        self.moved.remove(member);
        Ok(())
    }

    fn release(&mut self, store: &mut dyn FlowStore, keys: &KeySpace) -> Result<(), StoreError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let now_ms = self.pending.values().map(|d| d.last_ms).max().unwrap_or(0);
        let timers = keys.global("timers");
        let mut batch = BatchState::new();
        let mut ctx = Ctx::new(now_ms * 1_000_000, keys, &mut batch, store, &timers);
        self.flush(&mut ctx);
        batch.flush(store).map(|_| ())
    }

    fn stats(&self) -> Value {
        serde_json::json!({"new_flows": self.new_flows, "expired": self.expired,
                           "flushes": self.flushes, "pending_flows": self.pending.len()})
    }
}
