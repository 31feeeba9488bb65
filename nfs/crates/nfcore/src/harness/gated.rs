//! A test's hold on the timing of one instance's batch writes, over a real store: two instances
//! of an NF handle packets of one connection "at the same instant" when one has read its state
//! and not written it yet while the other runs a whole batch. Only the timing is the test's;
//! reads, writes and their outcomes are the store's own.

use flowstore::{FlowStore, HashFields, Key, StoreError, StoreStats, WriteOp};
use std::sync::{Arc, Condvar, Mutex};

/// Where the gate stands.
#[derive(Debug, Default)]
struct State {
    /// The next batch write is to be held.
    armed: bool,
    /// A write is held now.
    held: bool,
    /// The held write may go on.
    open: bool,
}

/// Shared between the test and the [`GatedStore`].
#[derive(Debug, Default)]
pub struct Gate {
    s: Mutex<State>,
    cv: Condvar,
}

impl Gate {
    pub fn new() -> Arc<Gate> {
        Arc::new(Gate::default())
    }

    /// Hold the next batch write of the store until [`Gate::release`].
    pub fn arm(&self) {
        let mut s = self.s.lock().expect("gate");
        *s = State {
            armed: true,
            ..State::default()
        };
    }

    /// Wait until a write is held (its batch read and processed).
    pub fn wait_held(&self) {
        let mut s = self.s.lock().expect("gate");
        while !s.held {
            s = self.cv.wait(s).expect("gate");
        }
    }

    /// Let the held write go on.
    pub fn release(&self) {
        self.s.lock().expect("gate").open = true;
        self.cv.notify_all();
    }

    fn pass(&self) {
        let mut s = self.s.lock().expect("gate");
        if !s.armed {
            return;
        }
        s.held = true;
        self.cv.notify_all();
        while !s.open {
            s = self.cv.wait(s).expect("gate");
        }
        *s = State::default();
    }
}

/// A store whose batch writes pass a [`Gate`] first; everything else goes straight to `inner`.
/// No pipeline: the runtime runs batch by batch over it.
pub struct GatedStore {
    pub inner: Box<dyn FlowStore>,
    pub gate: Arc<Gate>,
}

impl FlowStore for GatedStore {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    fn get_many(&mut self, keys: &[Key], out: &mut Vec<Option<Vec<u8>>>) -> Result<(), StoreError> {
        self.inner.get_many(keys, out)
    }
    fn write_checked(
        &mut self,
        ops: &[WriteOp],
        failed: &mut Vec<usize>,
    ) -> Result<(), StoreError> {
        self.gate.pass();
        self.inner.write_checked(ops, failed)
    }
    fn compare_and_set(
        &mut self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool, StoreError> {
        self.inner.compare_and_set(key, expected, new)
    }
    fn incr_by(&mut self, key: &[u8], delta: i64) -> Result<i64, StoreError> {
        self.inner.incr_by(key, delta)
    }
    fn pool_init(&mut self, pool: &[u8], items: &[Vec<u8>]) -> Result<bool, StoreError> {
        self.inner.pool_init(pool, items)
    }
    fn pool_pop(&mut self, pool: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.inner.pool_pop(pool)
    }
    fn pool_pop_many(&mut self, pool: &[u8], max: usize) -> Result<Vec<Vec<u8>>, StoreError> {
        self.inner.pool_pop_many(pool, max)
    }
    fn pool_push(&mut self, pool: &[u8], item: &[u8]) -> Result<(), StoreError> {
        self.inner.pool_push(pool, item)
    }
    fn pool_len(&mut self, pool: &[u8]) -> Result<usize, StoreError> {
        self.inner.pool_len(pool)
    }
    fn timer_claim_due(
        &mut self,
        timers: &[u8],
        now_ms: u64,
        max: usize,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        self.inner.timer_claim_due(timers, now_ms, max)
    }
    fn hash_get_all(&mut self, key: &[u8]) -> Result<HashFields, StoreError> {
        self.inner.hash_get_all(key)
    }
    fn stats(&self) -> StoreStats {
        self.inner.stats()
    }
    fn note_unplanned_read(&mut self) {
        self.inner.note_unplanned_read()
    }
}
