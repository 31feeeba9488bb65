//! In-process store: the baseline (no tier round trips). Same semantics as [`crate::RedisStore`].

use crate::snapshot::Snapshot;
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

    fn write_checked(
        &mut self,
        ops: &[WriteOp],
        failed: &mut Vec<usize>,
    ) -> Result<(), StoreError> {
        failed.clear();
        for (i, op) in ops.iter().enumerate() {
            match op {
                WriteOp::SetIf { key, expect, value } => {
                    if self.kv.get(key) != expect.as_ref() {
                        failed.push(i);
                        continue;
                    }
                    match value {
                        Some(v) => self.kv.insert(key.clone(), v.clone()),
                        None => self.kv.remove(key),
                    };
                }
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
                WriteOp::Incr { key, delta } => {
                    // Like Redis, a value that is not an integer is left alone (INCRBY errors).
                    let cur = match self.kv.get(key) {
                        None => Some(0),
                        Some(v) => std::str::from_utf8(v)
                            .ok()
                            .and_then(|s| s.parse::<i64>().ok()),
                    };
                    if let Some(c) = cur {
                        self.kv
                            .insert(key.clone(), c.wrapping_add(*delta).to_string().into_bytes());
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

    fn export_state(&self) -> Option<Vec<u8>> {
        // The snapshot format does not carry hash records (the monitor's "increments" counters):
        // refuse the export (the move aborts, the old instance keeps serving) rather than drop them.
        if !self.hashes.is_empty() {
            return None;
        }
        Some(self.snapshot().encode())
    }

    fn import_state(&mut self, data: &[u8], prefix: &[u8]) -> Result<usize, String> {
        let snap = Snapshot::decode(data, prefix)?;
        let n = snap.entries();
        self.restore(snap);
        Ok(n)
    }
}

impl LocalStore {
    /// Everything held, in key order (deterministic output).
    pub fn snapshot(&self) -> Snapshot {
        let mut kv: Vec<_> = self
            .kv
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        kv.sort_unstable();
        let names: BTreeSet<&Key> = self.pools.keys().chain(&self.pools_initialised).collect();
        let pools = names
            .into_iter()
            .map(|k| {
                let items = self
                    .pools
                    .get(k)
                    .map(|q| q.iter().cloned().collect())
                    .unwrap_or_default();
                (k.clone(), self.pools_initialised.contains(k), items)
            })
            .collect();
        let mut timers: Vec<_> = self
            .timers
            .iter()
            .filter(|(_, (set, _))| !set.is_empty())
            .map(|(k, (set, _))| (k.clone(), set.iter().cloned().collect::<Vec<_>>()))
            .collect();
        timers.sort_unstable();
        Snapshot { kv, pools, timers }
    }

    /// Replace the content by `snap` (the client counters stay).
    pub fn restore(&mut self, snap: Snapshot) {
        self.kv = snap.kv.into_iter().collect();
        self.pools.clear();
        self.pools_initialised.clear();
        for (k, init, items) in snap.pools {
            if init {
                self.pools_initialised.insert(k.clone());
            }
            self.pools.insert(k, items.into());
        }
        self.timers.clear();
        for (k, members) in snap.timers {
            for (d, m) in members {
                self.timer_set(&k, &m, d);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_import_moves_everything() {
        let mut a = LocalStore::new();
        a.write_many(&[
            WriteOp::Set {
                key: b"nf:fw:{1}:c".to_vec(),
                value: b"est".to_vec(),
            },
            WriteOp::TimerSet {
                timers: b"nf:fw:{timers}".to_vec(),
                member: b"m1".to_vec(),
                deadline_ms: 50,
            },
        ])
        .unwrap();
        a.pool_init(b"nf:fw:{ports}", &[b"1".to_vec(), b"2".to_vec()])
            .unwrap();
        a.pool_pop(b"nf:fw:{ports}").unwrap();
        let data = a.export_state().unwrap();

        let mut b = LocalStore::new();
        b.write_many(&[WriteOp::Set {
            key: b"nf:fw:{9}:c".to_vec(),
            value: b"stale".to_vec(),
        }])
        .unwrap();
        assert_eq!(b.import_state(&data, b"nf:fw:").unwrap(), 3);
        let mut out = vec![];
        b.get_many(
            &[b"nf:fw:{1}:c".to_vec(), b"nf:fw:{9}:c".to_vec()],
            &mut out,
        )
        .unwrap();
        assert_eq!(out, vec![Some(b"est".to_vec()), None]); // replaced, not merged
        assert!(!b.pool_init(b"nf:fw:{ports}", &[b"x".to_vec()]).unwrap());
        assert_eq!(b.pool_pop(b"nf:fw:{ports}").unwrap(), Some(b"2".to_vec()));
        assert_eq!(
            b.timer_claim_due(b"nf:fw:{timers}", 100, 10).unwrap(),
            vec![b"m1".to_vec()]
        );
        assert_eq!(b.snapshot(), {
            let mut c = LocalStore::new();
            c.import_state(&b.export_state().unwrap(), b"nf:fw:")
                .unwrap();
            c.snapshot()
        });
    }

    #[test]
    fn bad_import_changes_nothing() {
        let mut a = LocalStore::new();
        a.write_many(&[WriteOp::Set {
            key: b"nf:fw:{1}:c".to_vec(),
            value: b"keep".to_vec(),
        }])
        .unwrap();
        let mut data = a.export_state().unwrap();
        data.push(0);
        assert!(a.import_state(&data, b"nf:fw:").is_err());
        assert!(a
            .import_state(&data[..data.len() - 1], b"nf:other:")
            .is_err());
        assert_eq!(a.len(), 1);
    }
}
