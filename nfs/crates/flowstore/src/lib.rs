//! The state-tier client of the UNO network functions.
//!
//! Every instance of one logical NF shares its per-flow state through a [`FlowStore`]:
//! [`RedisStore`] (the stateless mode) or [`LocalStore`] (the in-process baseline). Stores that
//! talk to a remote tier may also offer a [`Pipeline`] (several batches in flight on one ordered
//! connection; the runtime's pipelined loop uses it). Batch by batch, the runtime drives a store
//! through a [`BatchState`]:
//!
//! 1. the NF names the keys each packet needs ([`BatchState::want`]),
//! 2. one pipelined round trip fetches them all ([`BatchState::fetch`]),
//! 3. packets are processed in order; reads see earlier packets' writes of the same batch (overlay),
//! 4. one pipelined round trip writes the batch's changes ([`BatchState::flush`]).
//!
//! Keys follow `tn:<tenant>:nf:<nf_id>:{<flow-hash>}:<table>` ([`KeySpace`]): they name the tenant
//! and the logical NF, not the instance, and the hash tag keeps all keys of one flow in one Redis Cluster slot.
//!
//! Operations where instances race (NAT port pool, LB backend choice) use atomic primitives that
//! are single round trips outside the batch: [`FlowStore::pool_pop`], [`FlowStore::compare_and_set`].
//! Timers (idle expiry) live in the tier as sorted sets; [`FlowStore::timer_claim_due`] removes and
//! returns due members atomically, so exactly one instance fires each timer.

mod batch;
mod cache;
pub mod cluster;
mod commands;
pub mod fasthash;
mod keys;
mod local;
mod redis_store;
pub mod resp;
pub mod slots;
pub mod snapshot;
pub mod test_cluster;
pub mod test_redis;

pub use batch::{BatchState, Newer};
pub use cache::CachedStore;
pub use cluster::{parse_cluster_url, ClusterStore};
pub use fasthash::{FastMap, FastSet};
pub use keys::{check_tenant, KeySpace, DEFAULT_TENANT};
pub use local::LocalStore;
pub use redis_store::{parse_url, RedisConfig, RedisStore, WaitPolicy};
pub use resp::Endpoint;

/// A full key in the tier (bytes; built by [`KeySpace`]).
pub type Key = Vec<u8>;

/// The fields of a hash and their values, sorted by field ([`FlowStore::hash_get_all`]).
pub type HashFields = Vec<(Vec<u8>, Vec<u8>)>;

/// A write applied at the end of a batch, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOp {
    Set {
        key: Key,
        value: Vec<u8>,
    },
    Del {
        key: Key,
    },
    /// Add or move `member` in the timer set `timers` to fire at `deadline_ms`.
    TimerSet {
        timers: Key,
        member: Vec<u8>,
        deadline_ms: u64,
    },
    /// Remove `member` from the timer set `timers`.
    TimerCancel {
        timers: Key,
        member: Vec<u8>,
    },
    /// Change one field of the hash at `key` (Redis HINCRBY / HSET / HSETNX): the tier applies
    /// it without the NF reading the value, so instances can add to one record concurrently.
    Hash {
        key: Key,
        field: Vec<u8>,
        op: HashOp,
    },
    /// Add `delta` to the integer at `key` (Redis INCRBY; absent = 0) without reading it: the
    /// batch-path form of [`FlowStore::incr_by`] for counters whose new value the NF does not
    /// need at once (the value is unknown to this batch until read again).
    Incr {
        key: Key,
        delta: i64,
    },
    /// Conditional write: if the value of `key` equals `expect` (None = absent), set it to
    /// `value` (None = delete); otherwise change nothing. Its outcome is reported
    /// ([`FlowStore::write_checked`], [`Pipeline::recv`]). A pipelined claim (`expect` None) is
    /// `SET key value NX` on Redis: the first instance to claim a key wins, and the loser learns
    /// it when its batch's writes are acknowledged, before its packets leave.
    SetIf {
        key: Key,
        expect: Option<Vec<u8>>,
        value: Option<Vec<u8>>,
    },
}

impl WriteOp {
    /// The data key this op writes (a timer op: its timer set).
    pub fn key(&self) -> &Key {
        match self {
            WriteOp::Set { key, .. }
            | WriteOp::Del { key }
            | WriteOp::Hash { key, .. }
            | WriteOp::Incr { key, .. }
            | WriteOp::SetIf { key, .. } => key,
            WriteOp::TimerSet { timers, .. } | WriteOp::TimerCancel { timers, .. } => timers,
        }
    }
}

/// An update of one hash field ([`WriteOp::Hash`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HashOp {
    /// Add to the integer field (absent = 0).
    Incr(i64),
    /// Set the field.
    Set(Vec<u8>),
    /// Set the field unless it exists.
    SetNx(Vec<u8>),
}

/// A tier failure (connection lost, timeout, script error). The store reconnects on the next call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError(pub String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "state tier: {}", self.0)
    }
}

impl std::error::Error for StoreError {}

impl StoreError {
    /// Writes applied by the master but not acknowledged by the replicas `--store-wait` asks
    /// for ([`WaitPolicy`]): the batch must not leave whatever the fail mode (its state could
    /// be lost with the master).
    pub fn is_not_durable(&self) -> bool {
        self.0.starts_with("WAIT ") && self.0.contains("acknowledged")
    }
}

/// Client counters (monotonic).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Round trips to the tier (a pipeline counts once).
    pub round_trips: u64,
    pub keys_read: u64,
    pub keys_written: u64,
    pub errors: u64,
    pub reconnects: u64,
    /// Reads that were not in the batch's read set and needed their own round trip.
    pub unplanned_reads: u64,
    /// CPU time the client spent spinning for replies (ns): waiting, not working.
    pub spin_ns: u64,
    /// Write groups (batches) whose `WAIT` got fewer replicas than asked (failed closed).
    pub wait_short: u64,
    /// Redis Cluster: redirections followed (`MOVED`, `ASK`).
    pub redirects: u64,
    /// Redis Cluster: slot map refreshes (`CLUSTER SLOTS`).
    pub refreshes: u64,
}

/// Per-flow state storage shared by all instances of one NF.
///
/// All methods are blocking; every method that talks to a remote tier is exactly one round trip.
pub trait FlowStore: Send {
    /// Short name for logs and stats: "redis" or "local".
    fn kind(&self) -> &'static str;

    /// Fetch `keys` in one round trip; `out` is cleared and gets one entry per key, in order.
    fn get_many(&mut self, keys: &[Key], out: &mut Vec<Option<Vec<u8>>>) -> Result<(), StoreError>;

    /// Apply `ops` in order in one round trip (conditional ops that do not apply are skipped).
    fn write_many(&mut self, ops: &[WriteOp]) -> Result<(), StoreError> {
        let mut failed = Vec::new();
        self.write_checked(ops, &mut failed)
    }

    /// [`FlowStore::write_many`], reporting in `failed` the positions in `ops` of the
    /// [`WriteOp::SetIf`] ops that did not apply (cleared first).
    fn write_checked(&mut self, ops: &[WriteOp], failed: &mut Vec<usize>)
        -> Result<(), StoreError>;

    /// Atomically: if the value of `key` equals `expected` (None = absent), set it to `new`
    /// (None = delete) and return true; otherwise change nothing and return false.
    fn compare_and_set(
        &mut self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool, StoreError>;

    /// Atomically add `delta` to the integer at `key` (absent = 0) and return the new value.
    fn incr_by(&mut self, key: &[u8], delta: i64) -> Result<i64, StoreError>;

    /// Fill the pool `pool` with `items` unless it was initialised before (by any instance).
    /// Returns true if this call initialised it.
    fn pool_init(&mut self, pool: &[u8], items: &[Vec<u8>]) -> Result<bool, StoreError>;

    /// Atomically take one item from the pool (None if empty). Two instances never get the same item.
    fn pool_pop(&mut self, pool: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;

    /// Atomically take up to `max` items from the pool in one round trip (fewer if it holds
    /// fewer; empty if it is empty). Two instances never get the same item.
    fn pool_pop_many(&mut self, pool: &[u8], max: usize) -> Result<Vec<Vec<u8>>, StoreError> {
        let mut v = Vec::new();
        while v.len() < max {
            match self.pool_pop(pool)? {
                Some(x) => v.push(x),
                None => break,
            }
        }
        Ok(v)
    }

    /// Return an item to the pool.
    fn pool_push(&mut self, pool: &[u8], item: &[u8]) -> Result<(), StoreError>;

    /// Number of items in the pool.
    fn pool_len(&mut self, pool: &[u8]) -> Result<usize, StoreError>;

    /// Atomically remove and return up to `max` members of `timers` whose deadline is <= `now_ms`.
    /// Each member is returned to exactly one caller.
    fn timer_claim_due(
        &mut self,
        timers: &[u8],
        now_ms: u64,
        max: usize,
    ) -> Result<Vec<Vec<u8>>, StoreError>;

    /// Every field of the hash at `key` (one round trip; empty if absent).
    fn hash_get_all(&mut self, _key: &[u8]) -> Result<HashFields, StoreError> {
        Err(StoreError("hashes are not supported by this store".into()))
    }

    /// Client counters.
    fn stats(&self) -> StoreStats;

    /// Count a read that was outside the planned read set (called by [`BatchState`]).
    fn note_unplanned_read(&mut self);

    /// The non-blocking interface, when this store has one (Redis). The runtime then keeps
    /// several batches in flight (see [`Pipeline`]); other stores run batch by batch.
    fn pipeline(&mut self) -> Option<&mut dyn Pipeline> {
        None
    }

    /// Caching stores: drop cached state if ownership moved (see [`CachedStore`]). Others: no-op.
    fn check_epoch(&mut self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Serialise every entry ([`snapshot`] format) for a state move; None when the state is not
    /// held by this process (Redis: it is in the tier already).
    fn export_state(&self) -> Option<Vec<u8>> {
        None
    }

    /// Replace the whole content by a serialised store (from [`FlowStore::export_state`]) whose
    /// keys all start with `prefix`; all or nothing. Returns the number of entries imported.
    fn import_state(&mut self, _data: &[u8], _prefix: &[u8]) -> Result<usize, String> {
        Err("this store does not hold its state in the process".into())
    }
}

/// Implements the named [`FlowStore`] methods by forwarding them to the store in field `$inner`:
/// for wrappers that change a few methods and pass the others through.
#[macro_export]
macro_rules! forward_store {
    ($inner:ident; $($m:ident),+ $(,)?) => { $( $crate::forward_store!(@ $inner $m); )+ };
    (@ $i:ident kind) => {
        fn kind(&self) -> &'static str { self.$i.kind() }
    };
    (@ $i:ident get_many) => {
        fn get_many(
            &mut self, keys: &[$crate::Key], out: &mut Vec<Option<Vec<u8>>>,
        ) -> Result<(), $crate::StoreError> { self.$i.get_many(keys, out) }
    };
    (@ $i:ident write_checked) => {
        fn write_checked(
            &mut self, ops: &[$crate::WriteOp], failed: &mut Vec<usize>,
        ) -> Result<(), $crate::StoreError> { self.$i.write_checked(ops, failed) }
    };
    (@ $i:ident compare_and_set) => {
        fn compare_and_set(
            &mut self, key: &[u8], expected: Option<&[u8]>, new: Option<&[u8]>,
        ) -> Result<bool, $crate::StoreError> { self.$i.compare_and_set(key, expected, new) }
    };
    (@ $i:ident incr_by) => {
        fn incr_by(&mut self, key: &[u8], delta: i64) -> Result<i64, $crate::StoreError> {
            self.$i.incr_by(key, delta)
        }
    };
    (@ $i:ident pool_init) => {
        fn pool_init(
            &mut self, pool: &[u8], items: &[Vec<u8>],
        ) -> Result<bool, $crate::StoreError> { self.$i.pool_init(pool, items) }
    };
    (@ $i:ident pool_pop) => {
        fn pool_pop(&mut self, pool: &[u8]) -> Result<Option<Vec<u8>>, $crate::StoreError> {
            self.$i.pool_pop(pool)
        }
    };
    (@ $i:ident pool_pop_many) => {
        fn pool_pop_many(
            &mut self, pool: &[u8], max: usize,
        ) -> Result<Vec<Vec<u8>>, $crate::StoreError> { self.$i.pool_pop_many(pool, max) }
    };
    (@ $i:ident pool_push) => {
        fn pool_push(&mut self, pool: &[u8], item: &[u8]) -> Result<(), $crate::StoreError> {
            self.$i.pool_push(pool, item)
        }
    };
    (@ $i:ident pool_len) => {
        fn pool_len(&mut self, pool: &[u8]) -> Result<usize, $crate::StoreError> {
            self.$i.pool_len(pool)
        }
    };
    (@ $i:ident timer_claim_due) => {
        fn timer_claim_due(
            &mut self, timers: &[u8], now_ms: u64, max: usize,
        ) -> Result<Vec<Vec<u8>>, $crate::StoreError> {
            self.$i.timer_claim_due(timers, now_ms, max)
        }
    };
    (@ $i:ident hash_get_all) => {
        fn hash_get_all(
            &mut self, key: &[u8],
        ) -> Result<$crate::HashFields, $crate::StoreError> { self.$i.hash_get_all(key) }
    };
    (@ $i:ident stats) => {
        fn stats(&self) -> $crate::StoreStats { self.$i.stats() }
    };
    (@ $i:ident note_unplanned_read) => {
        fn note_unplanned_read(&mut self) { self.$i.note_unplanned_read() }
    };
}

/// Non-blocking access to a remote tier over one ordered connection: groups of reads and writes
/// are sent without waiting; their replies come back in the order the groups were sent. Because
/// the tier executes one connection's commands in order, a read group sent after a write group
/// sees those writes. Blocking [`FlowStore`] calls stay valid at any time (they first collect the
/// replies of the groups in flight, which `recv` then returns).
pub trait Pipeline {
    /// Queue an MGET-like read of `keys` (one group; `recv` returns one value per key).
    fn send_reads(&mut self, keys: &[Key]) -> Result<(), StoreError>;
    /// Queue `ops` (one group; `recv` returns no values).
    fn send_writes(&mut self, ops: &[WriteOp]) -> Result<(), StoreError>;
    /// Push queued groups to the tier.
    fn flush(&mut self) -> Result<(), StoreError>;
    /// Wait for the oldest group's replies (`out` gets its values; for a write group one entry
    /// per [`WriteOp::SetIf`] op, in order: `Some(empty)` applied, `None` not applied). After an
    /// error every group in flight is lost (`in_flight` is 0).
    fn recv(&mut self, out: &mut Vec<Option<Vec<u8>>>) -> Result<(), StoreError>;
    /// Groups sent and not yet received.
    fn in_flight(&self) -> usize;
    /// Groups queued and not pushed to the tier yet (diagnosis: when a group left).
    fn unsent(&self) -> usize {
        0
    }
    /// Forget every group in flight (the caller failed them); the next call starts afresh.
    fn reset(&mut self);
    /// Whether the write group last returned by `recv` is durable: the replicas a configured
    /// `WAIT` asked for acknowledged it (true when none is configured). A group that is not was
    /// applied by the master but could be lost with it: its batch must not leave.
    fn last_durable(&self) -> bool {
        true
    }
}
