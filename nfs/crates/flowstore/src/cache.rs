//! Optional owner cache: for state that one instance owns (UNO moves an NF's traffic by a port
//! remap, so one instance at a time sees a flow), reads are served locally and only misses go
//! to the tier; writes go through. When ownership moves, the agent increments the NF's epoch key
//! (`nf:<id>:{epoch}`); [`CachedStore::check_epoch`] (called by the runtime on every timer tick)
//! drops the whole cache when the epoch changed. Not for instances that share flows at the same
//! time (asymmetric routing): leave the cache off there.

use crate::{FastMap, FastSet, FlowStore, Key, Pipeline, StoreError, WriteOp};
use std::collections::VecDeque;

/// A group sent through the cache's [`Pipeline`], oldest first.
enum Pending {
    /// Every key was cached: the values, returned in turn without asking the tier.
    Ready(Vec<Option<Vec<u8>>>),
    /// Values with holes at `miss` (positions), filled by the inner store's group.
    Reads {
        keys: Vec<Key>,
        vals: Vec<Option<Vec<u8>>>,
        miss: Vec<usize>,
    },
    /// A write group; the keys of its conditional writes, in order (forgotten if one did not
    /// apply: the cache assumed it did).
    Writes(Vec<Key>),
}

/// A [`FlowStore`] wrapper with a bounded read cache (cleared when full or on a new epoch).
pub struct CachedStore<S: FlowStore> {
    inner: S,
    cache: FastMap<Key, Option<Vec<u8>>>,
    max_entries: usize,
    epoch_key: Key,
    epoch: Option<Vec<u8>>,
    pub hits: u64,
    pub misses: u64,
    pub invalidations: u64,
    miss_keys: Vec<Key>,
    miss_vals: Vec<Option<Vec<u8>>>,
    pending: VecDeque<Pending>,
    /// Keys changed by an atomic operation (result not known here) while reads were in flight:
    /// values fetched by those reads may predate the change, so they are not cached.
    changed_in_flight: FastSet<Key>,
}

impl<S: FlowStore> CachedStore<S> {
    pub fn new(inner: S, epoch_key: Key, max_entries: usize) -> Self {
        CachedStore {
            inner,
            cache: FastMap::default(),
            max_entries: max_entries.max(1),
            epoch_key,
            epoch: None,
            hits: 0,
            misses: 0,
            invalidations: 0,
            miss_keys: Vec::new(),
            miss_vals: Vec::new(),
            pending: VecDeque::new(),
            changed_in_flight: FastSet::default(),
        }
    }

    /// Forget `key`: its value in the tier changed in a way not known here.
    fn forget(&mut self, key: &[u8]) {
        self.cache.remove(key);
        if !self.pending.is_empty() {
            self.changed_in_flight.insert(key.to_vec());
        }
    }

    /// Drop every cached entry.
    pub fn invalidate(&mut self) {
        self.cache.clear();
        self.invalidations += 1;
    }

    fn put(&mut self, k: &[u8], v: Option<Vec<u8>>) {
        if self.cache.len() >= self.max_entries && !self.cache.contains_key(k) {
            self.cache.clear();
        }
        self.cache.insert(k.to_vec(), v);
    }
}

impl<S: FlowStore> FlowStore for CachedStore<S> {
    crate::forward_store!(inner; kind, hash_get_all, pool_init, pool_pop, pool_pop_many, pool_push,
        pool_len, timer_claim_due, stats, note_unplanned_read);

    fn get_many(&mut self, keys: &[Key], out: &mut Vec<Option<Vec<u8>>>) -> Result<(), StoreError> {
        out.clear();
        self.miss_keys.clear();
        for k in keys {
            if !self.cache.contains_key(k) {
                self.miss_keys.push(k.clone());
            }
        }
        if !self.miss_keys.is_empty() {
            let mk = std::mem::take(&mut self.miss_keys);
            let mut mv = std::mem::take(&mut self.miss_vals);
            let r = self.inner.get_many(&mk, &mut mv);
            if r.is_ok() {
                for (k, v) in mk.iter().zip(mv.drain(..)) {
                    self.put(k, v);
                }
            }
            self.miss_keys = mk;
            self.miss_vals = mv;
            r?;
        }
        self.misses += self.miss_keys.len() as u64;
        self.hits += (keys.len() - self.miss_keys.len()) as u64;
        for k in keys {
            // A key evicted by a clear during this call is re-read (rare: only when full).
            match self.cache.get(k) {
                Some(v) => out.push(v.clone()),
                None => {
                    let mut one = Vec::new();
                    self.inner.get_many(std::slice::from_ref(k), &mut one)?;
                    out.push(one.pop().flatten());
                }
            }
        }
        Ok(())
    }

    fn write_checked(
        &mut self,
        ops: &[WriteOp],
        failed: &mut Vec<usize>,
    ) -> Result<(), StoreError> {
        let r = self.inner.write_checked(ops, failed);
        for (i, op) in ops.iter().enumerate() {
            match op {
                WriteOp::SetIf { key, value, .. } if r.is_ok() && !failed.contains(&i) => {
                    self.put(key, value.clone())
                }
                WriteOp::SetIf { key, .. } => {
                    self.cache.remove(key);
                }
                WriteOp::Set { key, value } if r.is_ok() => self.put(key, Some(value.clone())),
                // On failure the tier's value is unknown: forget it.
                WriteOp::Set { key, .. } | WriteOp::Del { key } if r.is_err() => {
                    self.cache.remove(key);
                }
                WriteOp::Del { key } => self.put(key, None),
                WriteOp::Hash { key, .. } | WriteOp::Incr { key, .. } => {
                    self.cache.remove(key);
                }
                _ => {}
            }
        }
        r
    }

    fn compare_and_set(
        &mut self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool, StoreError> {
        let r = self.inner.compare_and_set(key, expected, new);
        match r {
            Ok(true) => self.put(key, new.map(|v| v.to_vec())),
            _ => self.forget(key),
        }
        r
    }

    fn incr_by(&mut self, key: &[u8], delta: i64) -> Result<i64, StoreError> {
        self.forget(key);
        self.inner.incr_by(key, delta)
    }

    fn pipeline(&mut self) -> Option<&mut dyn Pipeline> {
        if self.inner.pipeline().is_some() {
            Some(self)
        } else {
            None
        }
    }

    fn check_epoch(&mut self) -> Result<(), StoreError> {
        let mut v = Vec::with_capacity(1);
        self.inner
            .get_many(std::slice::from_ref(&self.epoch_key), &mut v)?;
        let cur = v.pop().flatten();
        if cur != self.epoch {
            self.invalidate();
            self.epoch = cur;
        }
        Ok(())
    }
}

/// Pipelined access through the cache: read groups whose keys are all cached complete without
/// the tier; others fetch only their misses; writes go through (and into the cache at once, so
/// later groups see them). After a tier failure the whole cache is dropped.
impl<S: FlowStore> Pipeline for CachedStore<S> {
    fn send_reads(&mut self, keys: &[Key]) -> Result<(), StoreError> {
        let mut vals = Vec::with_capacity(keys.len());
        let mut miss = Vec::new();
        self.miss_keys.clear();
        for (i, k) in keys.iter().enumerate() {
            match self.cache.get(k) {
                Some(v) => vals.push(v.clone()),
                None => {
                    vals.push(None);
                    miss.push(i);
                    self.miss_keys.push(k.clone());
                }
            }
        }
        self.hits += (keys.len() - miss.len()) as u64;
        self.misses += miss.len() as u64;
        if miss.is_empty() {
            self.pending.push_back(Pending::Ready(vals));
            return Ok(());
        }
        let inner = self.inner.pipeline().expect("checked in pipeline()");
        if let Err(e) = inner.send_reads(&self.miss_keys) {
            self.fail();
            return Err(e);
        }
        self.pending.push_back(Pending::Reads {
            keys: std::mem::take(&mut self.miss_keys),
            vals,
            miss,
        });
        Ok(())
    }

    fn send_writes(&mut self, ops: &[WriteOp]) -> Result<(), StoreError> {
        let mut conds = Vec::new();
        for op in ops {
            match op {
                WriteOp::Set { key, value } => self.put(key, Some(value.clone())),
                // Assumed to apply (as this instance's later batches do); undone if not.
                WriteOp::SetIf { key, value, .. } => {
                    self.put(key, value.clone());
                    conds.push(key.clone());
                }
                WriteOp::Del { key } => self.put(key, None),
                WriteOp::Hash { key, .. } | WriteOp::Incr { key, .. } => {
                    self.cache.remove(key);
                }
                _ => {}
            }
        }
        let inner = self.inner.pipeline().expect("checked in pipeline()");
        if let Err(e) = inner.send_writes(ops) {
            self.fail();
            return Err(e);
        }
        self.pending.push_back(Pending::Writes(conds));
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        let r = self
            .inner
            .pipeline()
            .expect("checked in pipeline()")
            .flush();
        if r.is_err() {
            self.fail();
        }
        r
    }

    fn recv(&mut self, out: &mut Vec<Option<Vec<u8>>>) -> Result<(), StoreError> {
        out.clear();
        let Some(p) = self.pending.pop_front() else {
            return Err(StoreError("no pipeline group in flight".into()));
        };
        match p {
            Pending::Ready(v) => out.extend(v),
            Pending::Writes(conds) => {
                let inner = self.inner.pipeline().expect("checked in pipeline()");
                if let Err(e) = inner.recv(out) {
                    self.fail();
                    return Err(e);
                }
                for (k, applied) in conds.iter().zip(out.iter()) {
                    if applied.is_none() {
                        self.forget(k);
                    }
                }
            }
            Pending::Reads {
                keys,
                mut vals,
                miss,
            } => {
                let inner = self.inner.pipeline().expect("checked in pipeline()");
                if let Err(e) = inner.recv(&mut self.miss_vals) {
                    self.fail();
                    return Err(e);
                }
                let fetched = std::mem::take(&mut self.miss_vals);
                for ((k, v), i) in keys.iter().zip(fetched).zip(miss) {
                    // A write sent after this read is newer than the fetched value: keep it.
                    // A key changed atomically meanwhile: the fetched value may be older.
                    if !self.cache.contains_key(k) && !self.changed_in_flight.contains(k) {
                        self.put(k, v.clone());
                    }
                    vals[i] = v;
                }
                out.extend(vals);
            }
        }
        if self.pending.is_empty() {
            self.changed_in_flight.clear();
        }
        Ok(())
    }

    fn in_flight(&self) -> usize {
        self.pending.len()
    }

    fn reset(&mut self) {
        self.fail();
        if let Some(p) = self.inner.pipeline() {
            p.reset();
        }
    }
}

impl<S: FlowStore> CachedStore<S> {
    /// The tier failed with groups in flight: their writes may or may not have happened.
    fn fail(&mut self) {
        self.pending.clear();
        self.changed_in_flight.clear();
        self.invalidate();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LocalStore;

    #[test]
    fn hits_writes_through_and_epoch_invalidates() {
        let mut s = CachedStore::new(LocalStore::new(), b"ep".to_vec(), 100);
        let k = b"k".to_vec();
        let mut out = vec![];
        s.get_many(std::slice::from_ref(&k), &mut out).unwrap();
        s.get_many(std::slice::from_ref(&k), &mut out).unwrap();
        assert_eq!((s.hits, s.misses), (1, 1));
        s.write_many(&[WriteOp::Set {
            key: k.clone(),
            value: b"1".to_vec(),
        }])
        .unwrap();
        s.get_many(std::slice::from_ref(&k), &mut out).unwrap();
        assert_eq!(out, vec![Some(b"1".to_vec())]);
        assert_eq!(s.inner.stats().keys_read, 1, "served from the cache");
        // Another instance changes the value and the agent bumps the epoch.
        s.inner
            .write_many(&[WriteOp::Set {
                key: k.clone(),
                value: b"2".to_vec(),
            }])
            .unwrap();
        s.get_many(std::slice::from_ref(&k), &mut out).unwrap();
        assert_eq!(
            out,
            vec![Some(b"1".to_vec())],
            "stale until the epoch moves"
        );
        s.check_epoch().unwrap();
        s.inner.incr_by(b"ep", 1).unwrap();
        s.check_epoch().unwrap();
        s.get_many(std::slice::from_ref(&k), &mut out).unwrap();
        assert_eq!(out, vec![Some(b"2".to_vec())]);
        assert!(s.invalidations >= 1);
    }
}
