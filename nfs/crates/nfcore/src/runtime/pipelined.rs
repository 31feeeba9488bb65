//! The pipelined batch loop (stores with a [`flowstore::Pipeline`]): up to `depth` batches have
//! their reads in flight while the oldest is processed, and a processed batch's writes travel in
//! the same pipeline as later batches' reads, so each batch costs one round trip's worth of
//! commands and the NF core rarely waits.
//!
//! Correctness, per instance:
//! - Redis runs one connection's commands in order: a read sent after a write sees it.
//! - A read sent BEFORE an earlier batch was processed cannot see that batch's writes; the loop
//!   keeps the values this instance wrote since (`recent`) and overlays them on the fetched
//!   values before processing. Keys changed by atomic operations (compare-and-set, incr) whose
//!   result is not known locally are re-read from the tier.
//! - When enabled (`Runtime::set_borrow_reads`; off by default: it lowers Redis's work per
//!   packet at partial load but lengthens the latency tail), a small batch may borrow, rather
//!   than read, a key that a batch still reading also reads and that the last small batches
//!   reading it wrote (`borrow_reads`): its value is then only what `recent` holds when the batch
//!   is processed (the earlier batch's write), or, if nothing wrote it, a read made at that
//!   moment: never a value older than a read would give.
//! - A batch is transmitted only after its writes are acknowledged, and batches leave in arrival
//!   order, so another instance that sees a later packet of the flow also sees its state, and
//!   per-flow packet order is kept.
//! - Timers and the owner-cache epoch are handled with nothing in flight (the pipeline is drained
//!   first), as in the batch-by-batch loop.
//! - Claims ([`crate::Ctx::claim`], `SET NX` in the write group) are assumed won until their
//!   acknowledgement: later batches see the claimed value, and their writes of a claimed key are
//!   conditional on it (`unconfirmed`). A lost claim drops every forwarded packet of its batch
//!   and of the batches processed after it (none has left: they wait for it), makes batches
//!   still reading re-read the key, and lets the NF undo what it tied to the claim.

use super::intake::{has_room, intake, Intake, Queued};
use super::phases::{Marks, PacketPhases};
use super::{drop_claim_dependents, Runtime, TimeSource};
use crate::stats::Stats;
use crate::{Ctx, FailMode, NetworkFunction, Verdict};
use flowstore::{
    BatchState, FastMap, FlowStore, Key, KeySpace, Newer, Pipeline, StoreError, WriteOp,
};
use netio::{Batch, Device};
use packet::{ParseError, Parsed};
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Instant;

/// A value this instance wrote after some batches' reads were sent.
#[derive(Debug)]
enum Recent {
    Value(Option<Vec<u8>>),
    /// Changed by an atomic operation: read it again.
    Unknown,
}

impl Recent {
    fn newer(&self) -> Newer<'_> {
        match self {
            Recent::Value(v) => Newer::Value(v),
            Recent::Unknown => Newer::Unknown,
        }
    }
}

/// One batch moving through the pipeline.
pub(super) struct Slot {
    batch: Batch,
    parsed: Vec<Option<Parsed>>,
    keep: Vec<bool>,
    state: BatchState,
    /// Batches processed when this one's reads were sent (their writes are in its values).
    sent_at: u64,
    /// Smaller than a full batch when taken (see [`super::intake`]).
    small: bool,
    /// It has reads of its own in flight (or answered).
    has_reads: bool,
    /// Every key of its read set is borrowed from earlier batches (see `borrow_reads`): its
    /// values come with their processing.
    lent: bool,
    processed: bool,
    reads_pending: bool,
    /// Writes acknowledged (or none): may be transmitted once every earlier batch is.
    acked: bool,
    /// Ordinal of the batch among the processed ones (set when processed).
    ord: u64,
    now_ns: u64,
    t_recv: Instant,
    /// Phase marks, when recording them ([`super::phases`]).
    marks: Marks,
}

impl Slot {
    /// Whether the intake waits for this batch: it is small and its first round trip (its
    /// reads; its writes when it reads nothing) is not answered yet.
    fn holds_intake(&self) -> bool {
        self.small
            && (self.reads_pending
                || (self.lent && !self.processed)
                || (!self.has_reads && !self.lent && !self.acked))
    }
}

/// What the next reply group on the connection belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Reads,
    Writes,
}

/// Pipeline bookkeeping kept in the runtime (buffers reused across batches).
#[derive(Default)]
pub(super) struct PipeState {
    /// Reads sent, not processed yet (arrival order).
    reading: VecDeque<Slot>,
    /// Processed, waiting for write acknowledgement and earlier batches (arrival order).
    writing: VecDeque<Slot>,
    free: Vec<Slot>,
    expect: VecDeque<Expect>,
    /// key -> (ordinal of the batch that last changed it, what it is now).
    recent: FastMap<Key, (u64, Recent)>,
    processed: u64,
    /// Batches with groups queued on the connection but not pushed to the tier yet. A batch
    /// counts once: by its read group, or by its write group when it reads nothing (a processed
    /// batch's writes ride along with later batches' reads; counting them too would halve the
    /// groups per send, and so double the sends, of an NF that reads and writes).
    unflushed: usize,
    /// A batch that borrowed its whole read set was processed and its writes are queued: no read
    /// group of its own takes them to the tier, so the next flush point pushes them.
    lent_writes: bool,
    values: Vec<Option<Vec<u8>>>,
    touched: Vec<Key>,
    /// Keys claimed (or written conditionally) by processed batches whose writes are not
    /// acknowledged: the batch that last did, and the value expected in the tier.
    unconfirmed: FastMap<Key, (u64, Option<Vec<u8>>)>,
    /// Keys given a value (set, deleted, claimed) by one of the last [`LEND_WINDOW`] small
    /// batches processed: the ordinal of the last such batch and how many small batches in a row
    /// that read the key wrote it. The keys a later small batch may borrow.
    written: FastMap<Key, (u64, u32)>,
}

/// How recently (in processed batches) a key must have been written for a small batch to
/// borrow it from an earlier batch in flight rather than read it.
const LEND_WINDOW: u64 = 2;
/// How many small batches in a row that read a key must have written it: a key written once
/// (a new connection's record) is usually only read afterwards.
const LEND_STREAK: u32 = 2;

/// Parse every frame of `batch`, collect the read set into `state` and the initial verdicts:
/// malformed frames are dropped, non-IP frames forwarded unprocessed.
#[allow(clippy::too_many_arguments)]
pub(super) fn classify(
    nf: &dyn NetworkFunction,
    keys: &KeySpace,
    batch: &Batch,
    parsed: &mut Vec<Option<Parsed>>,
    keep: &mut Vec<bool>,
    state: &mut BatchState,
    readset: &mut Vec<Key>,
    st: &Stats,
) {
    state.clear();
    parsed.clear();
    keep.clear();
    for i in 0..batch.len() {
        let f = batch.frame(i);
        match Parsed::new_checked(f) {
            Ok(p) => {
                readset.clear();
                nf.read_set(keys, &p, f, readset);
                for k in readset.drain(..) {
                    state.want(k);
                }
                parsed.push(Some(p));
                keep.push(false);
            }
            Err(ParseError::UnsupportedEthertype(_)) => {
                st.non_ip.fetch_add(1, Relaxed);
                parsed.push(None);
                keep.push(true);
            }
            Err(_) => {
                st.malformed.fetch_add(1, Relaxed);
                parsed.push(None);
                keep.push(false);
            }
        }
    }
}

/// Apply the fail mode to a packet whose state could not be read (or written).
pub(super) fn fail_packet(keep: &mut bool, fail: FailMode, st: &Stats) {
    match fail {
        FailMode::Closed => {
            *keep = false;
            st.fail_closed_dropped.fetch_add(1, Relaxed);
        }
        FailMode::Open => {
            *keep = true;
            st.fail_open_forwarded.fetch_add(1, Relaxed);
        }
    }
}

/// The store as the NF sees it during a pipelined batch: records the keys that atomic
/// operations change, so batches whose reads were already sent re-read them.
struct Tracking<'a> {
    inner: &'a mut dyn FlowStore,
    touched: &'a mut Vec<Key>,
}

impl FlowStore for Tracking<'_> {
    flowstore::forward_store!(inner; kind, get_many, pool_init, pool_pop, pool_pop_many,
        hash_get_all, pool_push, pool_len, timer_claim_due, stats, note_unplanned_read);

    fn write_many(&mut self, ops: &[WriteOp]) -> Result<(), StoreError> {
        let mut failed = Vec::new();
        self.write_checked(ops, &mut failed)
    }
    fn write_checked(
        &mut self,
        ops: &[WriteOp],
        failed: &mut Vec<usize>,
    ) -> Result<(), StoreError> {
        for op in ops {
            if !matches!(op, WriteOp::TimerSet { .. } | WriteOp::TimerCancel { .. }) {
                self.touched.push(op.key().clone());
            }
        }
        self.inner.write_checked(ops, failed)
    }
    fn compare_and_set(
        &mut self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool, StoreError> {
        self.touched.push(key.to_vec());
        self.inner.compare_and_set(key, expected, new)
    }
    fn incr_by(&mut self, key: &[u8], delta: i64) -> Result<i64, StoreError> {
        self.touched.push(key.to_vec());
        self.inner.incr_by(key, delta)
    }
}

/// Set `key`'s entry to `v` (the key is copied only when new: a flow's key is usually there
/// already, written by the batch before).
fn upsert<V>(map: &mut FastMap<Key, V>, key: &Key, v: V) {
    match map.get_mut(key) {
        Some(e) => *e = v,
        None => {
            map.insert(key.clone(), v);
        }
    }
}

/// Set `key`'s entry to `(ord, v)`.
fn note<V>(map: &mut FastMap<Key, (u64, V)>, key: &Key, ord: u64, v: V) {
    upsert(map, key, (ord, v));
}

/// Borrow (not read) the keys of a small batch's read set that a batch still reading will have
/// processed before it and that one of the last [`LEND_WINDOW`] small batches wrote, as did the
/// [`LEND_STREAK`] small batches before that read it: an NF that writes a key with every packet
/// (counters, stream state) will write it again. The value the borrower gets is the one the
/// recent-overlay would have put over a fetched value anyway (the lender is processed after the
/// borrower was taken); if the key is not written after all, the borrower reads it when it needs
/// it (a blocking read). Only a batch with reads of its own lends: batches that read and batches
/// that borrow alternate, so the loop keeps waiting for replies and collects the write
/// acknowledgements with them (a chain of borrowing batches, always ready to process, would leave
/// them uncollected until the depth is full). Returns the keys borrowed.
fn borrow_reads(p: &PipeState, state: &mut BatchState) -> usize {
    if p.written.is_empty() || p.reading.is_empty() {
        return 0;
    }
    let since = p.processed.saturating_sub(LEND_WINDOW);
    state.borrow(|k| {
        p.written
            .get(k)
            .is_some_and(|(o, streak)| *o >= since && *streak >= LEND_STREAK)
            && p.reading
                .iter()
                .any(|s| s.has_reads && s.state.in_read_set(k))
    })
}

fn pipe(store: &mut dyn FlowStore) -> &mut dyn Pipeline {
    store.pipeline().expect("pipelined store")
}

impl<D: Device> Runtime<D> {
    /// The pipelined loop (see the module docs).
    pub(super) fn run_pipelined(&mut self, time: TimeSource, stop: &AtomicBool) -> io::Result<()> {
        let mut clock_ns = 0u64;
        let now = |clock: u64| match time {
            TimeSource::Wall => super::wall_ns(),
            TimeSource::Packets => clock,
        };
        while !stop.load(Relaxed) {
            self.bound_wait();
            // 1. Receive batches and send their reads, up to the depth, self-clocked below
            //    saturation (see `intake`).
            let mut small_sent = false;
            while self.intake() == Intake::Take && !self.dev.exhausted() {
                let mut slot = self.pipe.free.pop().unwrap_or_else(|| Slot {
                    batch: Batch::with_capacity(self.opts.batch_size),
                    parsed: Vec::new(),
                    keep: Vec::new(),
                    state: BatchState::new(),
                    sent_at: 0,
                    small: false,
                    has_reads: false,
                    lent: false,
                    processed: false,
                    reads_pending: false,
                    acked: false,
                    ord: 0,
                    now_ns: 0,
                    t_recv: Instant::now(),
                    marks: Marks::default(),
                });
                let t = now(clock_ns);
                // Never wait on the port while batches are in flight: their replies may be in.
                let busy = !self.pipe.reading.is_empty() || !self.pipe.writing.is_empty();
                // Released frames of a move's target first (counted in rx when they arrived).
                let from_backlog = !self.backlog.is_empty();
                let n = if from_backlog {
                    slot.batch.clear();
                    while !slot.batch.is_full() {
                        let Some((f, ts)) = self.backlog.pop_front() else {
                            break;
                        };
                        slot.batch.push(&f, ts);
                    }
                    let n = slot.batch.len();
                    self.stats.replayed.fetch_add(n as u64, Relaxed);
                    self.stats.buffered_now.fetch_sub(n as u64, Relaxed);
                    n
                } else if busy {
                    self.dev.recv_nowait(&mut slot.batch, t)?
                } else {
                    self.dev.recv(&mut slot.batch, t)?
                };
                if n == 0 {
                    self.pipe.free.push(slot);
                    break;
                }
                slot.t_recv = Instant::now();
                slot.now_ns = t;
                slot.marks = Marks {
                    recv: self.mark(),
                    in_flight: (self.pipe.reading.len() + self.pipe.writing.len()) as u32,
                    packets: n as u32,
                    ..Marks::default()
                };
                if time == TimeSource::Packets {
                    clock_ns = clock_ns.max(slot.batch.ts_ns(n - 1));
                }
                if !from_backlog {
                    self.count_rx(n, slot.t_recv);
                }
                self.stats.batches.fetch_add(1, Relaxed);
                classify(
                    self.nf.as_ref(),
                    &self.keys,
                    &slot.batch,
                    &mut slot.parsed,
                    &mut slot.keep,
                    &mut slot.state,
                    &mut self.readset,
                    &self.stats,
                );
                slot.sent_at = self.pipe.processed;
                slot.acked = false;
                slot.processed = false;
                slot.small = !slot.batch.is_full();
                let borrowed = if slot.small && self.borrow {
                    borrow_reads(&self.pipe, &mut slot.state)
                } else {
                    0
                };
                self.stats
                    .reads_borrowed
                    .fetch_add(borrowed as u64, Relaxed);
                let has_reads = !slot.state.to_fetch().is_empty();
                slot.lent = !has_reads && borrowed > 0;
                let slot_small = slot.small;
                slot.has_reads = has_reads;
                let sent = if has_reads {
                    pipe(self.store.as_mut()).send_reads(slot.state.to_fetch())
                } else {
                    Ok(())
                };
                slot.reads_pending = has_reads && sent.is_ok();
                if !has_reads {
                    slot.marks.sent = slot.marks.recv;
                    slot.marks.reads_in = slot.marks.recv;
                }
                self.pipe.reading.push_back(slot);
                match sent {
                    Ok(()) if has_reads => {
                        self.pipe.expect.push_back(Expect::Reads);
                        self.pipe.unflushed += 1;
                        small_sent |= slot_small;
                    }
                    Ok(()) => {}
                    Err(_) => self.fail_in_flight()?,
                }
                // A batch that reaches a timer tick is the last one taken before the timers run
                // (as in the batch-by-batch loop): a later batch must see the expiries due by then.
                // Matters for packet time, where one receive loop can span seconds of traffic.
                if now(clock_ns) / 1_000_000 >= self.last_timer_ms + self.opts.timer_interval_ms {
                    break;
                }
            }
            // Push queued groups once enough batches' worth have gathered (half the depth: the
            // tier works on one half while this core processes the other): a send is a syscall
            // that, on loopback, also wakes the tier and runs its receive path on this core. A
            // blocking receive flushes anyway.
            // A small batch's reads go at once (below saturation: at most one such send per round
            // trip), so the tier works on them while this core processes the batch before.
            if small_sent || self.pipe.lent_writes || self.pipe.unflushed >= (self.depth / 2).max(1)
            {
                self.flush_pipe()?;
            }
            if self.pipe.reading.is_empty() && self.pipe.writing.is_empty() {
                if self.dev.exhausted() {
                    break;
                }
            } else {
                // 2. Process the oldest batch once its values are in, else take one reply.
                // At most `depth` processed batches wait for acknowledgements: an NF that writes
                // without reading always has a batch ready and would otherwise never collect
                // the replies (its batches would leave only at the end of the input).
                let ready = self
                    .pipe
                    .reading
                    .front()
                    .map(|s| !s.reads_pending)
                    .unwrap_or(false);
                if ready && self.writing_room() {
                    self.process_front()?;
                    // A blocking call from inside `process` pushes what is queued.
                    self.mark_sent(self.mark());
                } else if !self.pipe.expect.is_empty() {
                    self.receive_one()?;
                }
                // 3. Transmit what is acknowledged, in order.
                self.transmit_ready()?;
            }
            let t = now(clock_ns);
            if t / 1_000_000 >= self.last_timer_ms + self.opts.timer_interval_ms {
                self.drain()?;
                let _ = self.fire_timers(t);
                if self.store.check_epoch().is_err() {
                    self.stats.store_errors.fetch_add(1, Relaxed);
                }
                self.snapshot();
            }
            // Requests of the HTTP thread: an export, import or release works batch by batch,
            // so the batches in flight are finished first (rare: a move's or a drain's request).
            let reqs = self.take_control();
            if !reqs.is_empty() {
                self.drain()?;
                self.handle_control(reqs, t)?;
                if self.buffer.is_some() {
                    // Told to hold: the batch-by-batch loop queues what comes until the release.
                    break;
                }
            }
            if !self.drains.is_empty() {
                let held = self.frames_in_flight();
                self.check_drains(held);
            }
        }
        self.drain()?;
        self.dev.flush()?;
        self.snapshot();
        Ok(())
    }

    /// Whether to take another batch from the port now ([`super::intake`]).
    fn intake(&self) -> Intake {
        let p = &self.pipe;
        let q = Queued {
            batches: p.reading.len(),
            packets: p.reading.iter().map(|s| s.batch.len()).sum(),
            small_waiting: p
                .reading
                .iter()
                .chain(p.writing.iter())
                .filter(|s| s.holds_intake())
                .count(),
        };
        intake(q, self.depth, self.opts.batch_size)
    }

    /// Whether one more processed batch may wait for its acknowledgement (the depth, as for
    /// batches reading).
    fn writing_room(&self) -> bool {
        let w = &self.pipe.writing;
        let packets = w.iter().map(|s| s.batch.len()).sum();
        has_room(w.len(), packets, self.depth, self.opts.batch_size)
    }

    /// Frames received and not yet sent or dropped: in batches reading or waiting for their
    /// acknowledgement, and released frames not taken yet.
    fn frames_in_flight(&self) -> u64 {
        let p = &self.pipe;
        let batches = p.reading.iter().chain(p.writing.iter());
        (batches.map(|s| s.batch.len()).sum::<usize>() + self.backlog.len()) as u64
    }

    /// Finish every batch in flight (process, wait for acknowledgements, transmit).
    fn drain(&mut self) -> io::Result<()> {
        while !self.pipe.reading.is_empty() || !self.pipe.writing.is_empty() {
            let ready = self
                .pipe
                .reading
                .front()
                .map(|s| !s.reads_pending)
                .unwrap_or(false);
            if ready {
                self.process_front()?;
                self.flush_pipe()?;
            } else if !self.pipe.expect.is_empty() {
                self.receive_one()?;
            }
            self.transmit_ready()?;
            if self.pipe.expect.is_empty()
                && self.pipe.reading.is_empty()
                && self.pipe.writing.iter().any(|s| !s.acked)
            {
                // Cannot happen (every unacked batch has a write group expected); be safe.
                self.fail_in_flight()?;
            }
        }
        Ok(())
    }

    fn flush_pipe(&mut self) -> io::Result<()> {
        self.pipe.unflushed = 0;
        self.pipe.lent_writes = false;
        if pipe(self.store.as_mut()).flush().is_err() {
            self.fail_in_flight()?;
        }
        self.mark_sent(self.mark());
        Ok(())
    }

    /// Phase marks: batches whose reads have left by `t` (nothing queued is left unsent).
    fn mark_sent(&mut self, t: u64) {
        if self.phases.is_none() || pipe(self.store.as_mut()).unsent() > 0 {
            return;
        }
        for s in self.pipe.reading.iter_mut() {
            if s.has_reads && s.marks.sent == 0 {
                s.marks.sent = t;
            }
        }
    }

    /// Take the replies of the oldest group in flight and hand them to their batch.
    fn receive_one(&mut self) -> io::Result<()> {
        let Some(kind) = self.pipe.expect.pop_front() else {
            return Ok(());
        };
        let mut vals = std::mem::take(&mut self.pipe.values);
        let t0 = self.mark();
        let r = pipe(self.store.as_mut()).recv(&mut vals);
        self.mark_sent(t0);
        if r.is_err() {
            self.pipe.values = vals;
            // The reply was lost with everything else in flight.
            self.pipe.expect.push_front(kind);
            return self.fail_in_flight();
        }
        match kind {
            Expect::Reads => {
                let t = self.mark();
                if let Some(s) = self.pipe.reading.iter_mut().find(|s| s.reads_pending) {
                    s.state.install(&mut vals);
                    s.reads_pending = false;
                    s.marks.reads_in = t;
                }
            }
            Expect::Writes => {
                let durable = pipe(self.store.as_mut()).last_durable();
                if let Some(i) = self.pipe.writing.iter().position(|s| !s.acked) {
                    if !durable {
                        // Fewer replicas than `--store-wait` asks acknowledged it: its state
                        // could die with the master, so its packets never leave (whatever the
                        // fail mode), and the batches behind it fail with the tier.
                        let slot = &mut self.pipe.writing[i];
                        for k in 0..slot.batch.len() {
                            if slot.keep[k] {
                                slot.keep[k] = false;
                                self.stats.fail_closed_dropped.fetch_add(1, Relaxed);
                            }
                        }
                        self.pipe.values = vals;
                        return self.fail_in_flight();
                    }
                    self.pipe.writing[i].acked = true;
                    self.pipe.writing[i].marks.acked = self.mark();
                    let lost = self.settle_conditionals(i, &vals);
                    if !lost.is_empty() {
                        self.claims_lost(i, &lost);
                    }
                }
            }
        }
        vals.clear();
        self.pipe.values = vals;
        Ok(())
    }

    /// Match the outcomes of the conditional writes of batch `writing[i]` (in order) to them:
    /// applied ones are confirmed; returns those that did not apply.
    fn settle_conditionals(&mut self, i: usize, outcomes: &[Option<Vec<u8>>]) -> Vec<WriteOp> {
        let slot = &self.pipe.writing[i];
        let conds = slot
            .state
            .pending_writes()
            .iter()
            .filter(|w| matches!(w, WriteOp::SetIf { .. }));
        let mut lost = Vec::new();
        for (w, applied) in conds.zip(outcomes) {
            if applied.is_none() {
                lost.push(w.clone());
            } else if self
                .pipe
                .unconfirmed
                .get(w.key())
                .is_some_and(|(o, _)| *o == slot.ord)
            {
                self.pipe.unconfirmed.remove(w.key());
            }
        }
        lost
    }

    /// Conditional writes of batch `writing[i]` did not apply (another instance claimed a key
    /// first): drop the forwarded packets of it and of every batch processed after it, make
    /// batches still reading forget those keys, and let the NF undo its lost claims.
    fn claims_lost(&mut self, i: usize, lost: &[WriteOp]) {
        for s in self.pipe.writing.iter_mut().skip(i) {
            drop_claim_dependents(&s.parsed, &mut s.keep, &self.stats);
        }
        for w in lost {
            self.pipe.unconfirmed.remove(w.key());
            // Every batch still reading re-reads it (whenever its reads were sent).
            self.pipe
                .recent
                .insert(w.key().clone(), (u64::MAX, Recent::Unknown));
        }
        let now = self.pipe.writing[i].now_ns;
        match self.undo_lost(lost, now) {
            Ok(undo) => {
                for w in undo {
                    let v = match &w {
                        WriteOp::Set { value, .. } => Recent::Value(Some(value.clone())),
                        WriteOp::Del { .. } => Recent::Value(None),
                        _ => Recent::Unknown,
                    };
                    self.pipe.recent.insert(w.key().clone(), (u64::MAX, v));
                }
            }
            Err(_) => {
                // The undo's writes are not known to have applied: re-read what they touch.
                self.stats.store_errors.fetch_add(1, Relaxed);
            }
        }
    }

    /// Process the oldest batch (its values are in) and queue its writes.
    fn process_front(&mut self) -> io::Result<()> {
        let mut slot = self.pipe.reading.pop_front().expect("a batch");
        slot.marks.proc_start = self.mark();
        // Values this instance changed after the batch's reads were sent (walking the smaller of
        // the two: both hold up to a few hundred keys at depth 8, and each probe hashes a key).
        let recent = &self.pipe.recent;
        let sent_at = slot.sent_at;
        if recent.len() > slot.state.read_set().len() {
            slot.state.refresh(|k| match recent.get(k) {
                Some((ord, r)) if *ord >= sent_at => Some(r.newer()),
                _ => None,
            });
        } else {
            for (k, (ord, r)) in recent {
                if *ord >= sent_at && slot.state.in_read_set(k) {
                    slot.state.refresh_one(k, r.newer());
                }
            }
        }
        // Writes of keys whose claim is not acknowledged yet are conditional on it.
        for (k, (_, v)) in &self.pipe.unconfirmed {
            slot.state.guard(k, v.clone());
        }
        let fail = self.opts.fail_mode;
        self.pipe.touched.clear();
        let mut tier_failed = false;
        for i in 0..slot.batch.len() {
            let Some(p) = slot.parsed[i] else { continue };
            let ts = slot.batch.ts_ns(i);
            let mut tracking = Tracking {
                inner: self.store.as_mut(),
                touched: &mut self.pipe.touched,
            };
            let mut ctx = Ctx::new(
                ts,
                &self.keys,
                &mut slot.state,
                &mut tracking,
                &self.timers_key,
            );
            match self.nf.process(&mut ctx, slot.batch.frame_mut(i), &p) {
                Ok(Verdict::Forward) => slot.keep[i] = true,
                Ok(Verdict::Drop) => {
                    self.stats.dropped_by_nf.fetch_add(1, Relaxed);
                }
                Err(_) => {
                    self.stats.store_errors.fetch_add(1, Relaxed);
                    fail_packet(&mut slot.keep[i], fail, &self.stats);
                    tier_failed = true;
                }
            }
        }
        if tier_failed {
            // A failed call dropped the connection and every group in flight on it: fail them
            // all (this batch's writes were never sent, so it counts as unacknowledged).
            slot.acked = false;
            self.pipe.writing.push_back(slot);
            return self.fail_in_flight();
        }
        let ord = self.pipe.processed;
        self.pipe.processed += 1;
        slot.ord = ord;
        slot.processed = true;
        slot.state.coalesce();
        self.note_written(&slot);
        // What later batches must see over the values they fetched: only batches still reading
        // (their reads may have been sent before this batch's writes); none: nothing to keep.
        let oldest = self.pipe.reading.iter().map(|s| s.sent_at).min();
        let recent = &mut self.pipe.recent;
        match oldest {
            None => recent.clear(),
            // Entries older than every batch still to be processed are no longer needed.
            Some(oldest) => recent.retain(|_, (o, _)| *o >= oldest),
        }
        for k in self.pipe.touched.drain(..) {
            if oldest.is_some() {
                note(recent, &k, ord, Recent::Unknown);
            }
        }
        for w in slot.state.pending_writes() {
            if let WriteOp::SetIf { key, value, .. } = w {
                // Assumed to apply until acknowledged (undone then if not).
                note(&mut self.pipe.unconfirmed, key, ord, value.clone());
            }
            if oldest.is_none() {
                continue;
            }
            let r = match w {
                WriteOp::Set { value, .. } => Recent::Value(Some(value.clone())),
                WriteOp::Del { .. } => Recent::Value(None),
                WriteOp::SetIf { value, .. } => Recent::Value(value.clone()),
                // Applied by the tier: its value is known only there.
                WriteOp::Hash { .. } | WriteOp::Incr { .. } => Recent::Unknown,
                WriteOp::TimerSet { .. } | WriteOp::TimerCancel { .. } => continue,
            };
            note(recent, w.key(), ord, r);
        }
        let has_writes = !slot.state.pending_writes().is_empty();
        let has_reads = slot.has_reads;
        let lent = slot.lent;
        slot.marks.proc_end = self.mark();
        if !has_writes {
            slot.marks.acked = slot.marks.proc_end;
        }
        let sent = if has_writes {
            pipe(self.store.as_mut()).send_writes(slot.state.pending_writes())
        } else {
            Ok(())
        };
        slot.acked = !has_writes;
        self.pipe.writing.push_back(slot);
        match sent {
            Ok(()) if has_writes => {
                self.pipe.expect.push_back(Expect::Writes);
                if !has_reads {
                    self.pipe.unflushed += 1;
                }
                self.pipe.lent_writes |= lent;
            }
            Ok(()) => {}
            Err(_) => self.fail_in_flight()?,
        }
        Ok(())
    }

    /// Remember the keys a small batch gave a value (for `borrow_reads`); forget those older than
    /// the window. Full batches (saturation, where nothing is borrowed) skip it.
    fn note_written(&mut self, slot: &Slot) {
        let w = &mut self.pipe.written;
        let ord = slot.ord;
        if !w.is_empty() {
            let since = ord.saturating_sub(LEND_WINDOW - 1);
            w.retain(|_, (o, _)| *o >= since);
        }
        if !slot.small {
            return;
        }
        for op in slot.state.pending_writes() {
            match op {
                WriteOp::Set { key, .. } | WriteOp::Del { key } | WriteOp::SetIf { key, .. } => {
                    let streak = match w.get(key) {
                        Some((o, s)) if *o == ord => *s,
                        Some((_, s)) => s + 1,
                        None => 1,
                    };
                    upsert(w, key, (ord, streak));
                }
                // Applied by the tier: its value is not known here.
                WriteOp::Hash { key, .. } | WriteOp::Incr { key, .. } => {
                    w.remove(key);
                }
                WriteOp::TimerSet { .. } | WriteOp::TimerCancel { .. } => {}
            }
        }
        // Read and not written: the streak ends.
        for k in slot.state.read_set() {
            if w.get(k).is_some_and(|(o, _)| *o != ord) {
                w.remove(k);
            }
        }
    }

    /// Transmit acknowledged batches from the front, in arrival order.
    fn transmit_ready(&mut self) -> io::Result<()> {
        while self.pipe.writing.front().map(|s| s.acked).unwrap_or(false) {
            let slot = self.pipe.writing.pop_front().expect("a batch");
            self.transmit(slot)?;
        }
        Ok(())
    }

    fn transmit(&mut self, slot: Slot) -> io::Result<()> {
        let sent = self.dev.send(&slot.batch, &slot.keep, slot.now_ns)?;
        self.stats.tx.fetch_add(sent as u64, Relaxed);
        if let Some(l) = self.latencies.as_mut() {
            l.push(slot.t_recv.elapsed().as_secs_f64() * 1e6);
        }
        if self.phases.is_some() {
            let marks = Marks {
                tx: self.mark(),
                ..slot.marks
            };
            if let Some(ph) = self.phases.as_mut() {
                ph.extend((0..slot.batch.len()).map(|i| PacketPhases {
                    arrival_ns: slot.batch.ts_ns(i),
                    marks,
                }));
            }
        }
        self.batches_since_snapshot += 1;
        if self.batches_since_snapshot >= 256 {
            self.snapshot();
        }
        self.pipe.free.push(slot);
        Ok(())
    }

    /// The tier failed: everything in flight is lost. Batches not processed get the fail mode
    /// for every packet; processed batches whose writes were not acknowledged lose their
    /// packets in fail-closed mode (their state is not in the tier). All leave in order.
    fn fail_in_flight(&mut self) -> io::Result<()> {
        self.stats.store_errors.fetch_add(1, Relaxed);
        self.pipe.lent_writes = false;
        let fail = self.opts.fail_mode;
        // The store may still hold groups (a failure on its side connection leaves the main one
        // up): they are given up here, so it must forget them too.
        if let Some(p) = self.store.pipeline() {
            p.reset();
        }
        self.pipe.expect.clear();
        self.pipe.recent.clear();
        self.pipe.unconfirmed.clear();
        self.pipe.unflushed = 0;
        while let Some(mut slot) = self.pipe.writing.pop_front() {
            if !slot.acked && fail == FailMode::Closed {
                for i in 0..slot.batch.len() {
                    if slot.parsed[i].is_some() && slot.keep[i] {
                        slot.keep[i] = false;
                        self.stats.fail_closed_dropped.fetch_add(1, Relaxed);
                    }
                }
            }
            self.transmit(slot)?;
        }
        while let Some(mut slot) = self.pipe.reading.pop_front() {
            for i in 0..slot.batch.len() {
                if slot.parsed[i].is_some() {
                    fail_packet(&mut slot.keep[i], fail, &self.stats);
                }
            }
            self.transmit(slot)?;
        }
        Ok(())
    }
}
