//! Per-packet access to the state tier, through the batch overlay.

use flowstore::{BatchState, FlowStore, HashOp, Key, KeySpace, StoreError};

/// What an NF sees while processing one packet (or one timer).
pub struct Ctx<'a> {
    /// Packet timestamp (or the time of the timer run), ns since the Unix epoch for live ports.
    pub now_ns: u64,
    pub keys: &'a KeySpace,
    batch: &'a mut BatchState,
    store: &'a mut dyn FlowStore,
    timers: &'a Key,
}

impl<'a> Ctx<'a> {
    pub fn new(
        now_ns: u64,
        keys: &'a KeySpace,
        batch: &'a mut BatchState,
        store: &'a mut dyn FlowStore,
        timers: &'a Key,
    ) -> Ctx<'a> {
        Ctx {
            now_ns,
            keys,
            batch,
            store,
            timers,
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.now_ns / 1_000_000
    }

    /// Value of `key` as this batch sees it.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<&[u8]>, StoreError> {
        self.batch.get(self.store, key)
    }

    /// Like `get`, but copied out (convenient when the NF also writes in the same step).
    pub fn get_owned(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.get(key)?.map(|v| v.to_vec()))
    }

    /// Write `key` (visible at once to this batch, sent to the tier at the end of the batch).
    pub fn set(&mut self, key: &[u8], value: Vec<u8>) {
        self.batch.set(key, value)
    }

    pub fn del(&mut self, key: &[u8]) {
        self.batch.del(key)
    }

    /// Claim `key` for `value` if it is absent in the tier, with the batch's writes (no round
    /// trip): this batch sees it at once. If another instance claimed it first, the packets that
    /// depended on the claim are dropped when the writes are acknowledged (none leave with a
    /// losing value) and [`crate::NetworkFunction::claim_lost`] undoes the rest.
    pub fn claim(&mut self, key: &[u8], value: Vec<u8>) {
        self.batch.claim(key, value)
    }

    /// Make this batch's writes of `key` conditional on its value in the tier being `expect`
    /// (None: absent), compare-and-set with the batch's writes, no round trip of its own. If
    /// another instance changed it meanwhile, they do not apply, and no packet of the batch
    /// leaves (the runtime drops them, as for a lost [`Ctx::claim`]; batches still reading
    /// re-read the key): the next packet of the flow sees the other instance's value. This is
    /// how a record updated read-modify-write stays correct when two instances handle packets
    /// of one connection at the same instant.
    pub fn write_if(&mut self, key: &[u8], expect: Option<Vec<u8>>) {
        self.batch.guard(key, expect)
    }

    /// [`Ctx::write_if`] the value this batch sees now (read if it is not known yet).
    pub fn write_if_unchanged(&mut self, key: &[u8]) -> Result<(), StoreError> {
        let cur = self.get_owned(key)?;
        self.batch.guard(key, cur);
        Ok(())
    }

    /// Change one field of the hash at `key` in the tier with the batch's writes, without
    /// reading it (the tier applies it; several instances may add to one hash).
    pub fn hash_op(&mut self, key: &[u8], field: &[u8], op: HashOp) {
        self.batch.hash_op(key, field, op)
    }

    /// Add `delta` to the integer at `key` in the tier with the batch's writes (INCRBY, no round
    /// trip of its own; the batch forgets the value, a later `get` reads it again).
    pub fn incr(&mut self, key: &[u8], delta: i64) {
        self.batch.incr(key, delta)
    }

    /// Value of `key` if this batch already knows it (no round trip); `None` if it would have
    /// to be read. For values where the NF can do with the last one it saw (advisory counters).
    pub fn peek(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        self.batch.peek(key)
    }

    /// Set or move the NF's timer `member` to fire at `deadline_ms` (tier-held, NF-wide set).
    pub fn timer_set(&mut self, member: Vec<u8>, deadline_ms: u64) {
        self.batch.timer_set(self.timers, member, deadline_ms)
    }

    pub fn timer_cancel(&mut self, member: Vec<u8>) {
        self.batch.timer_cancel(self.timers, member)
    }

    /// The store itself, for atomic operations that must not wait for the batch end
    /// (pool pop/push, compare-and-set, incr). Each call is one round trip.
    pub fn store(&mut self) -> &mut dyn FlowStore {
        self.store
    }
}
