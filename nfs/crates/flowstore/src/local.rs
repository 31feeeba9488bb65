//! In-process store: the baseline (no tier round trips). Same semantics as [`crate::RedisStore`].

use crate::{FlowStore, HashFields, HashOp, Key, StoreError, StoreStats, WriteOp};
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};

/// One timer set: (deadline, member) in deadline order, plus member -> deadline.
type TimerSet = (BTreeSet<(u64, Vec<u8>)>, HashMap<Vec<u8>, u64>);

/// In-memory [`FlowStore`] for one process.
#[derive(Debug, Default)]
pub struct LocalStore {
    kv: HashMap<Key, Vec<u8>>,
    hashes: HashMap<Key, HashMap<Vec<u8>, Vec<u8>>>,
    pools: HashMap<Key, VecDeque<Vec<u8>>>,
    pools_initialised: HashSet<Key>,
    timers: HashMap<Key, TimerSet>,
    stats: StoreStats,
}

impl LocalStore {
    pub fn new() -> LocalStore {
        LocalStore::default()
    }

    /// Number of plain keys held (tests).
    pub fn len(&self) -> usize {
        self.kv.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kv.is_empty()
    }

    fn timer_set(&mut self, timers: &[u8], member: &[u8], deadline: u64) {
        let (set, idx) = self.timers.entry(timers.to_vec()).or_default();
        if let Some(old) = idx.insert(member.to_vec(), deadline) {
            set.remove(&(old, member.to_vec()));
        }
        set.insert((deadline, member.to_vec()));
    }

    fn timer_cancel(&mut self, timers: &[u8], member: &[u8]) {
        if let Some((set, idx)) = self.timers.get_mut(timers) {
            if let Some(old) = idx.remove(member) {
                set.remove(&(old, member.to_vec()));
            }
        }
    }
}

impl FlowStore for LocalStore {
    fn kind(&self) -> &'static str {
        "local"
    }

    fn get_many(&mut self, keys: &[Key], out: &mut Vec<Option<Vec<u8>>>) -> Result<(), StoreError> {
        out.clear();
        out.extend(keys.iter().map(|k| self.kv.get(k).cloned()));
        self.stats.keys_read += keys.len() as u64;
        Ok(())
    }

    fn write_many(&mut self, ops: &[WriteOp]) -> Result<(), StoreError> {
        for op in ops {
            match op {
                WriteOp::Set { key, value } => {
                    self.kv.insert(key.clone(), value.clone());
                }
                WriteOp::Del { key } => {
                    self.kv.remove(key);
                    self.hashes.remove(key);
                }
                WriteOp::Hash { key, field, op } => {
                    let h = self.hashes.entry(key.clone()).or_default();
                    match op {
                        HashOp::Incr(d) => {
                            let cur = h
                                .get(field)
                                .and_then(|v| std::str::from_utf8(v).ok()?.parse::<i64>().ok())
                                .unwrap_or(0);
                            h.insert(field.clone(), cur.wrapping_add(*d).to_string().into_bytes());
                        }
                        HashOp::Set(v) => {
                            h.insert(field.clone(), v.clone());
                        }
                        HashOp::SetNx(v) => {
                            h.entry(field.clone()).or_insert_with(|| v.clone());
                        }
                    }
                }
                WriteOp::TimerSet {
                    timers,
                    member,
                    deadline_ms,
                } => self.timer_set(timers, member, *deadline_ms),
                WriteOp::TimerCancel { timers, member } => self.timer_cancel(timers, member),
            }
        }
        self.stats.keys_written += ops.len() as u64;
        Ok(())
    }

    fn compare_and_set(
        &mut self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool, StoreError> {
        if self.kv.get(key).map(|v| v.as_slice()) != expected {
            return Ok(false);
        }
        match new {
            Some(v) => self.kv.insert(key.to_vec(), v.to_vec()),
            None => self.kv.remove(key),
        };
        Ok(true)
    }

    fn incr_by(&mut self, key: &[u8], delta: i64) -> Result<i64, StoreError> {
        let cur = match self.kv.get(key) {
            Some(v) => std::str::from_utf8(v)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
                .ok_or_else(|| StoreError("value is not an integer".into()))?,
            None => 0,
        };
        let n = cur.wrapping_add(delta);
        self.kv.insert(key.to_vec(), n.to_string().into_bytes());
        Ok(n)
    }

    fn pool_init(&mut self, pool: &[u8], items: &[Vec<u8>]) -> Result<bool, StoreError> {
        if !self.pools_initialised.insert(pool.to_vec()) {
            return Ok(false);
        }
        self.pools
            .entry(pool.to_vec())
            .or_default()
            .extend(items.iter().cloned());
        Ok(true)
    }

    fn pool_pop(&mut self, pool: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.pools.get_mut(pool).and_then(|p| p.pop_front()))
    }

    fn hash_get_all(&mut self, key: &[u8]) -> Result<HashFields, StoreError> {
        self.stats.round_trips += 1;
        let mut v: Vec<_> = self
            .hashes
            .get(key)
            .map(|h| h.iter().map(|(f, x)| (f.clone(), x.clone())).collect())
            .unwrap_or_default();
        v.sort();
        Ok(v)
    }

    fn pool_pop_many(&mut self, pool: &[u8], max: usize) -> Result<Vec<Vec<u8>>, StoreError> {
        Ok(match self.pools.get_mut(pool) {
            Some(p) => p.drain(..max.min(p.len())).collect(),
            None => Vec::new(),
        })
    }

    fn pool_push(&mut self, pool: &[u8], item: &[u8]) -> Result<(), StoreError> {
        self.pools
            .entry(pool.to_vec())
            .or_default()
            .push_back(item.to_vec());
        Ok(())
    }

    fn pool_len(&mut self, pool: &[u8]) -> Result<usize, StoreError> {
        Ok(self.pools.get(pool).map_or(0, |p| p.len()))
    }

    fn timer_claim_due(
        &mut self,
        timers: &[u8],
        now_ms: u64,
        max: usize,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        let Some((set, idx)) = self.timers.get_mut(timers) else {
            return Ok(vec![]);
        };
        let mut out = vec![];
        while out.len() < max {
            match set.first() {
                Some((d, _)) if *d <= now_ms => {
                    let (_, m) = set.pop_first().expect("non-empty");
                    idx.remove(&m);
                    out.push(m);
                }
                _ => break,
            }
        }
        Ok(out)
    }

    fn stats(&self) -> StoreStats {
        self.stats
    }

    fn note_unplanned_read(&mut self) {
        self.stats.unplanned_reads += 1;
    }
}
