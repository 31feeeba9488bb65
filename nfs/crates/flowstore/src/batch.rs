//! Per-batch read set, overlay and write buffer.

use crate::fasthash::FastState;
use crate::{FastMap, FastSet, FlowStore, HashOp, Key, StoreError, WriteOp};
use std::hash::BuildHasher;

/// A value of a key newer than the one a batch fetched ([`BatchState::refresh`]).
#[derive(Debug, Clone, Copy)]
pub enum Newer<'a> {
    /// This instance wrote it (None: deleted) after the batch's reads were sent.
    Value(&'a Option<Vec<u8>>),
    /// Changed in a way only the tier knows (an increment, an atomic call, a lost claim).
    Unknown,
}

/// What a batch sees of one key, and where its own plain write of it is.
#[derive(Debug)]
struct Seen {
    val: Option<Vec<u8>>,
    /// Index in `writes` of this batch's last `Set`/`Del` of the key while no other write of the
    /// key came after it ([`NO_WRITE`]: none): a repeated write replaces it in place instead of
    /// adding one (long flows write a key several times per batch; each write cost a copy of the
    /// key and, at coalescing, the drop of the superseded one). Checked before use: the op there
    /// must be a `Set`/`Del` of the same key (writes are flushed and coalesced behind it).
    w: u32,
}

const NO_WRITE: u32 = u32::MAX;

impl Seen {
    fn fetched(val: Option<Vec<u8>>) -> Seen {
        Seen { val, w: NO_WRITE }
    }
}

/// The entry of `key` in `view`, made if absent (the key is copied only then: usually it was
/// fetched and is there).
fn entry<'v>(view: &'v mut FastMap<Key, Seen>, key: &[u8]) -> &'v mut Seen {
    if !view.contains_key(key) {
        view.insert(key.to_vec(), Seen::fetched(None));
    }
    view.get_mut(key).expect("inserted")
}

/// State of one packet batch: planned reads fetched in one round trip, an overlay so packet k+1
/// sees packet k's writes, and the writes to flush in one round trip. Reused across batches
/// (`clear` keeps allocations).
#[derive(Debug, Default)]
pub struct BatchState {
    keys: Vec<Key>,
    /// The last `borrowed` keys of `keys` are not fetched: an earlier batch in flight reads and
    /// is expected to write them, and its values reach this one as newer values
    /// ([`BatchState::refresh`]); one it does not write is read when needed ([`BatchState::get`]).
    borrowed: usize,
    /// The read set's keys by their hash (the first index in `keys` with that hash): no copy of
    /// each key (one was made per distinct key per batch); equal hashes of different keys are
    /// told apart by comparing with `keys`.
    wanted: FastMap<u64, u32>,
    hasher: FastState,
    /// What this batch sees: fetched values, then overlaid by its own writes.
    view: FastMap<Key, Seen>,
    values: Vec<Option<Vec<u8>>>,
    writes: Vec<WriteOp>,
    /// Keys whose value in the tier is not confirmed yet (this instance's claim, or a write
    /// conditional on one, not acknowledged), with the value this instance expects there:
    /// writes of them are conditional on it ([`WriteOp::SetIf`]), so a lost claim is never
    /// overwritten.
    guards: FastMap<Key, Option<Vec<u8>>>,
}

impl BatchState {
    pub fn new() -> BatchState {
        BatchState::default()
    }

    /// Forget the previous batch.
    pub fn clear(&mut self) {
        self.keys.clear();
        self.borrowed = 0;
        self.wanted.clear();
        self.view.clear();
        self.values.clear();
        self.writes.clear();
        self.guards.clear();
    }

    /// Add `key` to the read set (duplicates are fetched once).
    pub fn want(&mut self, key: Key) {
        let h = self.hasher.hash_one(key.as_slice());
        if self.in_read_set_hashed(h, &key) {
            return;
        }
        // A key whose hash another key has (rare) keeps that one's index: `in_read_set_hashed`
        // finds it by scanning.
        self.wanted.entry(h).or_insert(self.keys.len() as u32);
        self.keys.push(key);
    }

    /// Whether `key` is in the read set.
    pub fn in_read_set(&self, key: &[u8]) -> bool {
        self.in_read_set_hashed(self.hasher.hash_one(key), key)
    }

    fn in_read_set_hashed(&self, h: u64, key: &[u8]) -> bool {
        match self.wanted.get(&h) {
            None => false,
            Some(&i) if self.keys.get(i as usize).is_some_and(|k| k == key) => true,
            // Another key with this hash (a collision): look through them all.
            Some(_) => self.keys.iter().any(|k| k == key),
        }
    }

    /// Keys in the read set.
    pub fn read_set(&self) -> &[Key] {
        &self.keys
    }

    /// Keys of the read set to fetch: all but the borrowed ones ([`BatchState::borrow`]).
    pub fn to_fetch(&self) -> &[Key] {
        &self.keys[..self.keys.len() - self.borrowed]
    }

    /// Do not fetch the keys of the read set for which `lent` is true (an earlier batch in flight
    /// fetches them and is expected to write them): they move to the end of the read set and get
    /// no fetched value. Returns how many keys are borrowed in all. Call before fetching.
    pub fn borrow(&mut self, mut lent: impl FnMut(&Key) -> bool) -> usize {
        let n = self.keys.len() - self.borrowed;
        let mut fetch = 0;
        for i in 0..n {
            if !lent(&self.keys[i]) {
                self.keys.swap(fetch, i);
                fetch += 1;
            }
        }
        // keys[fetch..n] are lent; together with those borrowed before they end the list.
        self.borrowed = self.keys.len() - fetch;
        // The keys moved: index them again (first index per hash, as `want` does).
        self.wanted.clear();
        for (i, k) in self.keys.iter().enumerate() {
            let h = self.hasher.hash_one(k.as_slice());
            self.wanted.entry(h).or_insert(i as u32);
        }
        self.borrowed
    }

    /// Fetch the read set in one round trip (no round trip if it is empty).
    pub fn fetch(&mut self, store: &mut dyn FlowStore) -> Result<(), StoreError> {
        let n = self.keys.len() - self.borrowed;
        if n == 0 {
            return Ok(());
        }
        store.get_many(&self.keys[..n], &mut self.values)?;
        for (k, v) in self.keys.iter().zip(self.values.drain(..)) {
            self.view.entry(k.clone()).or_insert(Seen::fetched(v));
        }
        Ok(())
    }

    /// Current value of `key` as seen by this batch. A key outside the fetched read set costs its
    /// own round trip (counted as an unplanned read) and is then cached for the rest of the batch.
    pub fn get(
        &mut self,
        store: &mut dyn FlowStore,
        key: &[u8],
    ) -> Result<Option<&[u8]>, StoreError> {
        if !self.view.contains_key(key) {
            store.note_unplanned_read();
            let mut out = Vec::with_capacity(1);
            store.get_many(&[key.to_vec()], &mut out)?;
            self.view
                .insert(key.to_vec(), Seen::fetched(out.pop().flatten()));
        }
        Ok(self.view.get(key).and_then(|v| v.val.as_deref()))
    }

    /// Overlay `v` on `key`; any write index there is dropped (only `write` sets one).
    fn insert(&mut self, key: &[u8], v: Option<Vec<u8>>) {
        let e = entry(&mut self.view, key);
        e.val = v;
        e.w = NO_WRITE;
    }

    /// A plain write (`Some`: set, `None`: delete) of an unguarded key: replaces this batch's
    /// previous plain write of it in place when nothing else wrote the key since, else is added.
    fn write(&mut self, key: &[u8], value: Option<Vec<u8>>) {
        let e = entry(&mut self.view, key);
        let op = |key: Key, value: Option<Vec<u8>>| match value {
            Some(value) => WriteOp::Set { key, value },
            None => WriteOp::Del { key },
        };
        e.w = match self.writes.get_mut(e.w as usize) {
            Some(w @ (WriteOp::Set { .. } | WriteOp::Del { .. })) if w.key() == key => {
                let k = match w {
                    WriteOp::Set { key, .. } | WriteOp::Del { key } => std::mem::take(key),
                    _ => unreachable!("matched a Set or Del"),
                };
                *w = op(k, value.clone());
                e.w
            }
            _ => {
                self.writes.push(op(key.to_vec(), value.clone()));
                (self.writes.len() - 1) as u32
            }
        };
        e.val = value;
    }

    /// Another kind of write of `key` follows: a later plain write must not replace an earlier
    /// one in place (that would move it before this one).
    fn unpin(&mut self, key: &[u8]) {
        if let Some(e) = self.view.get_mut(key) {
            e.w = NO_WRITE;
        }
    }

    /// Set `key` to `value` (visible to later packets of this batch; written at flush).
    pub fn set(&mut self, key: &[u8], value: Vec<u8>) {
        if self.guarded(key, Some(&value)) {
            self.insert(key, Some(value));
            return;
        }
        self.write(key, Some(value));
    }

    /// Delete `key`.
    pub fn del(&mut self, key: &[u8]) {
        if self.guarded(key, None) {
            self.insert(key, None);
            return;
        }
        self.write(key, None);
    }

    /// A write of a guarded key becomes conditional on the value expected there (true: done).
    fn guarded(&mut self, key: &[u8], value: Option<&Vec<u8>>) -> bool {
        let Some(expect) = self.guards.get_mut(key) else {
            return false;
        };
        let value = value.cloned();
        let expect = std::mem::replace(expect, value.clone());
        self.writes.push(WriteOp::SetIf {
            key: key.to_vec(),
            expect,
            value,
        });
        true
    }

    /// Claim `key` for `value` if it is absent in the tier, with the batch's writes (no round
    /// trip of its own): visible at once to this batch as if it applied. Whether it did is known
    /// when the writes are acknowledged; a pipelined runtime does not let packets that depended
    /// on a lost claim leave ([`crate::WriteOp::SetIf`]).
    pub fn claim(&mut self, key: &[u8], value: Vec<u8>) {
        self.insert(key, Some(value.clone()));
        if self.guarded(key, Some(&value)) {
            return;
        }
        self.guards.insert(key.to_vec(), Some(value.clone()));
        self.writes.push(WriteOp::SetIf {
            key: key.to_vec(),
            expect: None,
            value: Some(value),
        });
    }

    /// Make writes of `key` in this batch conditional on its value in the tier being `expect`
    /// (a claim or conditional write of an earlier batch, not acknowledged yet).
    pub fn guard(&mut self, key: &[u8], expect: Option<Vec<u8>>) {
        self.guards.insert(key.to_vec(), expect);
    }

    /// Schedule (or move) a tier-held timer.
    pub fn timer_set(&mut self, timers: &[u8], member: Vec<u8>, deadline_ms: u64) {
        self.writes.push(WriteOp::TimerSet {
            timers: timers.to_vec(),
            member,
            deadline_ms,
        });
    }

    /// Cancel a tier-held timer.
    pub fn timer_cancel(&mut self, timers: &[u8], member: Vec<u8>) {
        self.writes.push(WriteOp::TimerCancel {
            timers: timers.to_vec(),
            member,
        });
    }

    /// Change one field of the hash at `key` in the tier (not visible through [`BatchState::get`]:
    /// a hash is read with [`FlowStore::hash_get_all`]).
    pub fn hash_op(&mut self, key: &[u8], field: &[u8], op: HashOp) {
        self.unpin(key);
        self.writes.push(WriteOp::Hash {
            key: key.to_vec(),
            field: field.to_vec(),
            op,
        });
    }

    /// Add `delta` to the integer at `key` in the tier with the batch's writes. The batch no
    /// longer knows the value: a later [`BatchState::get`] of `key` reads it again.
    pub fn incr(&mut self, key: &[u8], delta: i64) {
        self.view.remove(key);
        self.writes.push(WriteOp::Incr {
            key: key.to_vec(),
            delta,
        });
    }

    /// The value of `key` if this batch knows it (fetched or written), without a round trip:
    /// `None` when it would have to be read.
    pub fn peek(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        self.view.get(key).map(|v| v.val.as_deref())
    }

    /// Pending writes (tests, stats).
    pub fn pending_writes(&self) -> &[WriteOp] {
        &self.writes
    }

    /// Drop writes made redundant by later ones: repeated writes of one key keep only the last;
    /// hash field updates of one field between two writes of its key merge into the first
    /// (increments add up, the last set wins, the first set-if-absent stays); order is otherwise
    /// preserved.
    pub fn coalesce(&mut self) {
        if self.writes.len() < 2 {
            return;
        }
        self.merge_hash_ops();
        self.merge_conditional_chains();
        // Keys with conditional writes keep every write (each outcome is reported and matters,
        // and a conditional write expects what the plain writes before it left).
        let conditional: FastSet<&[u8]> = self
            .writes
            .iter()
            .filter_map(|w| match w {
                WriteOp::SetIf { key, .. } => Some(key.as_slice()),
                _ => None,
            })
            .collect();
        let mut seen: FastSet<&[u8]> = FastSet::default();
        let mut keep = vec![false; self.writes.len()];
        for (i, w) in self.writes.iter().enumerate().rev() {
            keep[i] = match w {
                WriteOp::Set { key, .. } | WriteOp::Del { key } => {
                    conditional.contains(key.as_slice()) || seen.insert(key.as_slice())
                }
                _ => true,
            };
        }
        if keep.iter().all(|k| *k) {
            return;
        }
        let mut it = keep.into_iter();
        self.writes.retain(|_| it.next().unwrap_or(true));
    }

    /// A conditional write of a key that expects the value this batch's previous write of it
    /// (conditional, nothing else writing the key between) left merges into that one: a key
    /// guarded through a batch (a read-modify-write record) then costs one compare-and-set from
    /// the first expected value to the last value, not one per packet. It applies when the chain
    /// would have, all or nothing.
    fn merge_conditional_chains(&mut self) {
        if !self.writes.iter().any(|w| {
            matches!(
                w,
                WriteOp::SetIf {
                    expect: Some(_),
                    ..
                }
            )
        }) {
            return;
        }
        // key -> index of its last write, when that is a conditional one.
        let mut last: FastMap<Key, usize> = FastMap::default();
        let mut drop = vec![false; self.writes.len()];
        for (i, dropped) in drop.iter_mut().enumerate() {
            let (key, expect, value) = match &self.writes[i] {
                WriteOp::SetIf { key, expect, value } => (key, expect, value),
                WriteOp::TimerSet { .. } | WriteOp::TimerCancel { .. } => continue,
                w => {
                    last.remove(w.key());
                    continue;
                }
            };
            let into = last.get(key).copied().filter(
                |&j| matches!(&self.writes[j], WriteOp::SetIf { value: v, .. } if v == expect),
            );
            match into {
                Some(j) => {
                    let value = value.clone();
                    if let WriteOp::SetIf { value: v, .. } = &mut self.writes[j] {
                        *v = value;
                    }
                    *dropped = true;
                }
                None => {
                    last.insert(key.clone(), i);
                }
            }
        }
        let mut it = drop.into_iter();
        self.writes.retain(|_| !it.next().unwrap_or(false));
    }

    fn merge_hash_ops(&mut self) {
        if !self
            .writes
            .iter()
            .any(|w| matches!(w, WriteOp::Hash { .. }))
        {
            return;
        }
        // (key, field) -> index of the op later ones of the same field merge into.
        let mut first: FastMap<(Key, Vec<u8>), usize> = FastMap::default();
        let mut merged_away: Vec<usize> = Vec::new();
        for i in 0..self.writes.len() {
            let (key, field, op) = match &self.writes[i] {
                WriteOp::Set { key, .. } | WriteOp::Del { key } => {
                    // A whole-key write orders the field updates around it: no merging across.
                    first.retain(|(k, _), _| k != key);
                    continue;
                }
                WriteOp::Hash { key, field, op } => (key.clone(), field.clone(), op.clone()),
                _ => continue,
            };
            let Some(&j) = first.get(&(key.clone(), field.clone())) else {
                first.insert((key, field), i);
                continue;
            };
            let WriteOp::Hash { op: into, .. } = &mut self.writes[j] else {
                unreachable!("indexes point at hash ops")
            };
            let merged = match (into.clone(), op) {
                (HashOp::Incr(a), HashOp::Incr(b)) => Some(HashOp::Incr(a.wrapping_add(b))),
                (HashOp::Set(_), HashOp::Set(v)) => Some(HashOp::Set(v)),
                (HashOp::SetNx(v), HashOp::SetNx(_)) => Some(HashOp::SetNx(v)),
                _ => None,
            };
            match merged {
                Some(m) => {
                    *into = m;
                    merged_away.push(i);
                }
                // Different kinds on one field: keep both in order; later ones merge here.
                None => {
                    first.insert((key, field), i);
                }
            }
        }
        let mut drop = vec![false; self.writes.len()];
        for i in merged_away {
            drop[i] = true;
        }
        let mut it = drop.into_iter();
        self.writes.retain(|_| !it.next().unwrap_or(false));
    }

    /// Install fetched values for the read set (one per key of [`BatchState::to_fetch`], in
    /// order), as [`BatchState::fetch`] does after its round trip.
    pub fn install(&mut self, values: &mut Vec<Option<Vec<u8>>>) {
        for (k, v) in self.keys.iter().zip(values.drain(..)) {
            self.view.entry(k.clone()).or_insert(Seen::fetched(v));
        }
    }

    /// Replace what this batch sees for `key` (a newer value this instance wrote after the
    /// batch's reads were sent).
    pub fn override_value(&mut self, key: &[u8], value: Option<Vec<u8>>) {
        self.insert(key, value);
    }

    /// Forget the fetched value of `key`: the next read of it goes to the tier.
    pub fn forget(&mut self, key: &[u8]) {
        self.view.remove(key);
    }

    /// What this instance knows of `key` that is newer than the fetched value.
    pub fn refresh_one(&mut self, key: &[u8], newer: Newer<'_>) {
        match newer {
            Newer::Value(v) => self.override_value(key, v.clone()),
            Newer::Unknown => self.forget(key),
        }
    }

    /// [`BatchState::refresh_one`] for every key of the read set `newer` knows something of.
    pub fn refresh<'n>(&mut self, mut newer: impl FnMut(&[u8]) -> Option<Newer<'n>>) {
        for k in &self.keys {
            match newer(k) {
                Some(Newer::Value(v)) => match self.view.get_mut(k.as_slice()) {
                    Some(e) => {
                        e.val = v.clone();
                        e.w = NO_WRITE;
                    }
                    None => {
                        self.view.insert(k.clone(), Seen::fetched(v.clone()));
                    }
                },
                Some(Newer::Unknown) => {
                    self.view.remove(k);
                }
                None => {}
            }
        }
    }

    /// Write the batch's changes in one round trip (none if there are none), coalesced.
    /// Returns the conditional writes that did not apply (a lost claim: the caller must not let
    /// the packets that depended on it leave).
    pub fn flush(&mut self, store: &mut dyn FlowStore) -> Result<Vec<WriteOp>, StoreError> {
        if self.writes.is_empty() {
            return Ok(Vec::new());
        }
        self.coalesce();
        let mut failed = Vec::new();
        store.write_checked(&self.writes, &mut failed)?;
        let lost = failed.iter().map(|&i| self.writes[i].clone()).collect();
        self.writes.clear();
        Ok(lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LocalStore;

    #[test]
    fn repeated_plain_writes_replace_in_place_with_the_same_outcome() {
        // Random sequences of sets, deletes and increments over three keys: the batch's writes
        // (in-place replacement, then coalescing) must leave the tier as the ops one by one do.
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        let keys: [&[u8]; 3] = [b"a", b"b", b"c"];
        for round in 0..500 {
            let mut b = BatchState::new();
            let mut reference = LocalStore::new();
            let n = 1 + next(12);
            for i in 0..n {
                let k = keys[next(3) as usize];
                let op = match next(5) {
                    0..=2 => {
                        let v = format!("{}", round * 100 + i).into_bytes();
                        b.set(k, v.clone());
                        WriteOp::Set {
                            key: k.to_vec(),
                            value: v,
                        }
                    }
                    3 => {
                        b.del(k);
                        WriteOp::Del { key: k.to_vec() }
                    }
                    _ => {
                        b.incr(k, 3);
                        WriteOp::Incr {
                            key: k.to_vec(),
                            delta: 3,
                        }
                    }
                };
                reference.write_many(std::slice::from_ref(&op)).unwrap();
            }
            assert!(b.pending_writes().len() as u64 <= n);
            b.coalesce();
            let mut s = LocalStore::new();
            s.write_many(b.pending_writes()).unwrap();
            let all: Vec<Key> = keys.iter().map(|k| k.to_vec()).collect();
            let (mut x, mut y) = (Vec::new(), Vec::new());
            s.get_many(&all, &mut x).unwrap();
            reference.get_many(&all, &mut y).unwrap();
            assert_eq!(x, y, "round {round}: {:?}", b.pending_writes());
        }
        // Five writes of one key are one op; another kind of write between two keeps them apart
        // (and in order).
        let mut b = BatchState::new();
        for i in 0..5u8 {
            b.set(b"k", vec![i]);
        }
        assert_eq!(b.pending_writes().len(), 1);
        assert_eq!(b.peek(b"k"), Some(Some(&[4u8][..])));
        b.hash_op(b"k", b"f", HashOp::Incr(1));
        b.set(b"k", vec![9]);
        assert_eq!(b.pending_writes().len(), 3);
        // After a flush the next write of the key is a new op.
        let mut s = LocalStore::new();
        b.flush(&mut s).unwrap();
        b.set(b"k", vec![7]);
        assert_eq!(b.pending_writes().len(), 1);
    }

    #[test]
    fn coalescing_keeps_plain_writes_of_a_key_that_also_has_a_conditional_write() {
        // A plain set, then a write conditional on the value it left: the set must reach the
        // tier first, or the compare-and-set fails (and the key keeps its old value).
        let mut s = LocalStore::new();
        s.write_many(&[WriteOp::Set {
            key: b"k".to_vec(),
            value: b"old".to_vec(),
        }])
        .unwrap();
        let mut b = BatchState::new();
        b.set(b"k", b"v1".to_vec());
        b.guard(b"k", Some(b"v1".to_vec()));
        b.set(b"k", b"v2".to_vec());
        // A plain delete, then a claim of the (now absent) key.
        b.del(b"c");
        b.claim(b"c", b"mine".to_vec());
        s.write_many(&[WriteOp::Set {
            key: b"c".to_vec(),
            value: b"theirs".to_vec(),
        }])
        .unwrap();
        let before = b.pending_writes().len();
        b.coalesce();
        assert_eq!(b.pending_writes().len(), before, "{:?}", b.pending_writes());
        s.write_many(b.pending_writes()).unwrap();
        let mut out = Vec::new();
        s.get_many(&[b"k".to_vec(), b"c".to_vec()], &mut out)
            .unwrap();
        assert_eq!(out, vec![Some(b"v2".to_vec()), Some(b"mine".to_vec())]);
    }

    #[test]
    fn the_read_set_finds_its_keys_after_duplicates_and_a_borrow_reorders_them() {
        let mut b = BatchState::new();
        for k in [&b"a"[..], b"b", b"a", b"c", b"b", b"d"] {
            b.want(k.to_vec());
        }
        assert_eq!(
            b.read_set(),
            [b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]
        );
        assert_eq!(b.borrow(|k| k == b"a" || k == b"c"), 2);
        assert_ne!(b.read_set()[0], b"a".to_vec(), "reordered");
        for k in [&b"a"[..], b"b", b"c", b"d"] {
            assert!(b.in_read_set(k), "{k:?}");
        }
        assert!(!b.in_read_set(b"e"));
        b.want(b"c".to_vec());
        assert_eq!(b.read_set().len(), 4);
        b.clear();
        assert!(!b.in_read_set(b"a"));
    }

    #[test]
    fn hash_ops_merge_per_field_between_whole_key_writes() {
        let mut b = BatchState::new();
        b.hash_op(b"h", b"n", HashOp::Incr(1));
        b.hash_op(b"h", b"last", HashOp::Set(b"1".to_vec()));
        b.hash_op(b"h", b"first", HashOp::SetNx(b"1".to_vec()));
        b.hash_op(b"g", b"n", HashOp::Incr(5));
        b.hash_op(b"h", b"n", HashOp::Incr(2));
        b.hash_op(b"h", b"last", HashOp::Set(b"2".to_vec()));
        b.hash_op(b"h", b"first", HashOp::SetNx(b"2".to_vec()));
        b.del(b"h");
        b.hash_op(b"h", b"n", HashOp::Incr(4));
        b.hash_op(b"h", b"n", HashOp::Incr(8));
        let mut s = LocalStore::new();
        let mut unmerged = LocalStore::new();
        unmerged.write_many(b.pending_writes()).unwrap();
        b.coalesce();
        assert_eq!(b.pending_writes().len(), 6, "{:?}", b.pending_writes());
        s.write_many(b.pending_writes()).unwrap();
        for k in [&b"h"[..], b"g"] {
            assert_eq!(
                s.hash_get_all(k).unwrap(),
                unmerged.hash_get_all(k).unwrap()
            );
        }
        assert_eq!(
            s.hash_get_all(b"h").unwrap(),
            vec![(b"n".to_vec(), b"12".to_vec())]
        );
    }

    #[test]
    fn borrowed_keys_are_not_fetched_and_get_a_newer_value_or_a_read() {
        let mut s = LocalStore::new();
        for k in [&b"a"[..], b"b", b"c"] {
            s.write_many(&[WriteOp::Set {
                key: k.to_vec(),
                value: [k, b"-tier"].concat(),
            }])
            .unwrap();
        }
        let mut b = BatchState::new();
        for k in [&b"a"[..], b"b", b"c"] {
            b.want(k.to_vec());
        }
        assert_eq!(b.borrow(|k| k.as_slice() != b"b"), 2);
        assert_eq!(b.to_fetch(), &[b"b".to_vec()][..]);
        assert_eq!(b.read_set().len(), 3);
        // Borrowing again keeps what was borrowed.
        assert_eq!(b.borrow(|_| false), 2);
        assert_eq!(b.to_fetch(), &[b"b".to_vec()][..]);
        let mut vals = vec![Some(b"b-tier".to_vec())];
        b.install(&mut vals);
        // The lender wrote "a"; "c" it did not write: read when asked for.
        let a_new = Some(b"a-lender".to_vec());
        b.refresh(|k| (k == b"a").then_some(Newer::Value(&a_new)));
        assert_eq!(b.get(&mut s, b"a").unwrap(), Some(&b"a-lender"[..]));
        assert_eq!(b.get(&mut s, b"b").unwrap(), Some(&b"b-tier"[..]));
        assert_eq!(s.stats().unplanned_reads, 0);
        assert_eq!(b.get(&mut s, b"c").unwrap(), Some(&b"c-tier"[..]));
        assert_eq!(s.stats().unplanned_reads, 1);
        b.clear();
        b.want(b"a".to_vec());
        assert_eq!(b.to_fetch().len(), 1);
    }

    #[test]
    fn overlay_and_single_round_trips() {
        let mut s = LocalStore::new();
        s.write_many(&[WriteOp::Set {
            key: b"a".to_vec(),
            value: b"1".to_vec(),
        }])
        .unwrap();
        let mut b = BatchState::new();
        b.want(b"a".to_vec());
        b.want(b"b".to_vec());
        b.want(b"a".to_vec());
        assert_eq!(b.read_set().len(), 2);
        b.fetch(&mut s).unwrap();
        assert_eq!(b.get(&mut s, b"a").unwrap(), Some(&b"1"[..]));
        assert_eq!(b.get(&mut s, b"b").unwrap(), None);
        b.set(b"b", b"2".to_vec());
        assert_eq!(b.get(&mut s, b"b").unwrap(), Some(&b"2"[..]));
        b.set(b"b", b"3".to_vec());
        b.del(b"a");
        assert_eq!(b.get(&mut s, b"a").unwrap(), None);
        assert_eq!(s.stats().unplanned_reads, 0);
        // Not in the read set: one extra read, counted.
        assert_eq!(b.get(&mut s, b"c").unwrap(), None);
        assert_eq!(s.stats().unplanned_reads, 1);
        // An increment: the batch no longer knows the value (peek None, get reads it again).
        assert_eq!(b.peek(b"b"), Some(Some(&b"3"[..])));
        assert_eq!(b.peek(b"zz"), None);
        b.incr(b"n", 2);
        assert_eq!(b.peek(b"n"), None);
        b.flush(&mut s).unwrap();
        assert_eq!(s.incr_by(b"n", 0).unwrap(), 2);
        let mut out = vec![];
        s.get_many(&[b"a".to_vec(), b"b".to_vec()], &mut out)
            .unwrap();
        assert_eq!(out, vec![None, Some(b"3".to_vec())]);
        assert_eq!(
            s.stats().keys_written,
            1 + 3,
            "the overwritten set of b is dropped"
        );
    }

    /// Claims and guards: a claim is a conditional write of an absent key, seen at once by the
    /// batch; writes of a claimed or guarded key are conditional on the value expected there
    /// (chained within the batch), and coalescing merges each chain into one conditional write.
    #[test]
    fn claims_and_guarded_writes_are_conditional() {
        let mut b = BatchState::new();
        b.guard(b"g", Some(b"old".to_vec()));
        b.claim(b"c", b"1".to_vec());
        assert_eq!(b.peek(b"c"), Some(Some(&b"1"[..])));
        b.set(b"c", b"2".to_vec());
        b.set(b"g", b"new".to_vec());
        b.del(b"g");
        b.set(b"x", b"1".to_vec());
        b.set(b"x", b"2".to_vec());
        let si = |k: &str, e: Option<&str>, v: Option<&str>| WriteOp::SetIf {
            key: k.as_bytes().to_vec(),
            expect: e.map(|x| x.as_bytes().to_vec()),
            value: v.map(|x| x.as_bytes().to_vec()),
        };
        assert_eq!(
            b.pending_writes(),
            &[
                si("c", None, Some("1")),
                si("c", Some("1"), Some("2")),
                si("g", Some("old"), Some("new")),
                si("g", Some("new"), None),
                WriteOp::Set {
                    key: b"x".to_vec(),
                    value: b"2".to_vec()
                },
            ]
        );
        b.coalesce();
        assert_eq!(
            b.pending_writes(),
            &[
                si("c", None, Some("2")),
                si("g", Some("old"), None),
                WriteOp::Set {
                    key: b"x".to_vec(),
                    value: b"2".to_vec()
                },
            ]
        );
        // Through a store where "g" is no longer "old": the claim chain applies, the guarded
        // writes do not, and the flush says which.
        let mut s = LocalStore::new();
        s.write_many(&[WriteOp::Set {
            key: b"g".to_vec(),
            value: b"other".to_vec(),
        }])
        .unwrap();
        let lost = b.flush(&mut s).unwrap();
        assert_eq!(lost, vec![si("g", Some("old"), None)]);
        let mut out = vec![];
        s.get_many(&[b"c".to_vec(), b"g".to_vec()], &mut out)
            .unwrap();
        assert_eq!(out, vec![Some(b"2".to_vec()), Some(b"other".to_vec())]);
    }

    #[test]
    fn conditional_chains_merge_only_where_nothing_else_wrote_the_key() {
        let si = |k: &str, e: Option<&str>, v: Option<&str>| WriteOp::SetIf {
            key: k.as_bytes().to_vec(),
            expect: e.map(|x| x.as_bytes().to_vec()),
            value: v.map(|x| x.as_bytes().to_vec()),
        };
        let timer = WriteOp::TimerSet {
            timers: b"t".to_vec(),
            member: b"a".to_vec(),
            deadline_ms: 5,
        };
        let mut b = BatchState::new();
        b.writes = vec![
            si("a", Some("0"), Some("1")),
            si("b", Some("x"), Some("y")),
            timer.clone(),
            si("a", Some("1"), Some("2")),
            WriteOp::Incr {
                key: b"a".to_vec(),
                delta: 1,
            },
            si("a", Some("9"), Some("3")),
            si("a", Some("3"), Some("4")),
            si("b", Some("other"), Some("z")),
        ];
        b.coalesce();
        assert_eq!(
            b.pending_writes(),
            &[
                si("a", Some("0"), Some("2")),
                si("b", Some("x"), Some("y")),
                timer,
                WriteOp::Incr {
                    key: b"a".to_vec(),
                    delta: 1,
                },
                si("a", Some("9"), Some("4")),
                si("b", Some("other"), Some("z")),
            ]
        );
    }
}
