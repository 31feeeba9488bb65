//! The batch loop: read set -> one store round trip -> process -> one write round trip -> send.

use crate::config::RuntimeOptions;
use crate::control::{ControlError, ControlHandle, Envelope, Reply, Request};
use crate::drain::{mono_ns, mono_of, Decision, Drains, Seen};
use crate::stats::Stats;
use crate::{Ctx, FailMode, NetworkFunction, Verdict};
use flowstore::{BatchState, FlowStore, Key, KeySpace, StoreError, WriteOp};
use netio::{Batch, Device};
use packet::Parsed;
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{mpsc, Arc};

mod intake;
pub mod phases;
mod pipelined;

/// A claim of this batch (or one it relied on) was lost: none of its forwarded packets may
/// leave. Conservative (a packet of another flow is dropped too): which packets read the
/// claimed value is not tracked, and the race is rare (two instances opening one connection at
/// the same instant, during a move or a resize).
fn drop_claim_dependents(parsed: &[Option<Parsed>], keep: &mut [bool], st: &Stats) {
    for (p, k) in parsed.iter().zip(keep.iter_mut()) {
        if p.is_some() && *k {
            *k = false;
            st.claim_dropped.fetch_add(1, Relaxed);
        }
    }
}

// (defined with the configuration that bounds them, so that config does not depend on the runtime)
pub use crate::config::{DEFAULT_PIPELINE_DEPTH, MAX_PIPELINE_DEPTH};

/// Where the runtime's notion of "now" comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeSource {
    /// Wall clock (live ports; instances on different hosts share timer deadlines).
    Wall,
    /// The latest packet timestamp (pcap replay: deterministic).
    Packets,
}

/// Wall-clock ns since the Unix epoch.
pub fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Runs one NF instance on one device with one store.
pub struct Runtime<D: Device> {
    nf: Box<dyn NetworkFunction>,
    store: Box<dyn FlowStore>,
    dev: D,
    keys: KeySpace,
    timers_key: Key,
    opts: RuntimeOptions,
    stats: Arc<Stats>,
    batch: Batch,
    state: BatchState,
    parsed: Vec<Option<Parsed>>,
    keep: Vec<bool>,
    readset: Vec<Key>,
    last_timer_ms: u64,
    batches_since_snapshot: u32,
    /// Batches whose reads may be in flight at once (pipelined stores); 1 = batch by batch.
    depth: usize,
    /// Small batches may borrow keys from earlier batches in flight (pipelined loop).
    borrow: bool,
    pipe: pipelined::PipeState,
    /// Per-batch receive-to-transmit times in us, when recording (benchmarks).
    latencies: Option<Vec<f64>>,
    /// Per-packet phase marks of the pipelined loop, when recording ([`phases`]).
    phases: Option<Vec<phases::PacketPhases>>,
    /// Buffering mode (a move's target waiting for its state): frames queued, not processed.
    buffer: Option<PacketBuffer>,
    /// Released frames not processed yet (a pipelined store: the pipelined loop takes them before
    /// anything new from the port, so arrival order is kept).
    backlog: VecDeque<(Vec<u8>, u64)>,
    /// Requests of the HTTP thread (state export/import, release, drain), when a handle was made.
    control: Option<mpsc::Receiver<Envelope>>,
    /// Drain requests waiting for their answer ([`crate::drain`]), and when frames were last
    /// taken from the port ([`mono_ns`]).
    drains: Drains<mpsc::SyncSender<Result<Reply, ControlError>>>,
    last_rx_ns: u64,
    /// The port's wait as shortened for the drains (None: its own bound).
    wait_ms: Option<u32>,
    /// The runtime options it was started with (a reconfiguration must leave them as they are).
    runtime_cfg: Option<crate::config::RuntimeConfig>,
}

/// Frames received while buffering, in arrival order, at most `cap` (the rest counted as overflow).
#[derive(Debug)]
struct PacketBuffer {
    frames: VecDeque<(Vec<u8>, u64)>,
    cap: usize,
}

impl<D: Device> Runtime<D> {
    pub fn new(
        nf: Box<dyn NetworkFunction>,
        store: Box<dyn FlowStore>,
        dev: D,
        keys: KeySpace,
        opts: RuntimeOptions,
    ) -> Runtime<D> {
        let timers_key = keys.global("timers");
        mono_ns(); // the drain clock's epoch: before any frame is taken
        Runtime {
            nf,
            store,
            dev,
            keys,
            timers_key,
            batch: Batch::with_capacity(opts.batch_size),
            opts,
            stats: Arc::new(Stats::default()),
            state: BatchState::new(),
            parsed: Vec::new(),
            keep: Vec::new(),
            readset: Vec::new(),
            last_timer_ms: 0,
            batches_since_snapshot: 0,
            depth: DEFAULT_PIPELINE_DEPTH,
            borrow: false,
            pipe: pipelined::PipeState::default(),
            latencies: None,
            phases: None,
            buffer: None,
            backlog: VecDeque::new(),
            control: None,
            drains: Drains::default(),
            last_rx_ns: 0,
            wait_ms: None,
            runtime_cfg: None,
        }
    }

    /// Enter buffering mode: received frames are queued (at most `cap`; more are dropped and
    /// counted as `buffer_overflow`) instead of processed, until a state import
    /// ([`Request::Install`], local store) or a release ([`Request::Release`], state in the tier)
    /// replays them in order. While buffering, [`Runtime::run`] goes batch by batch (that loop
    /// serves the requests), pipelined after the release when the store can.
    pub fn set_buffering(&mut self, cap: usize) {
        self.buffer = Some(PacketBuffer {
            frames: VecDeque::new(),
            cap,
        });
        self.stats.buffering.store(true, Relaxed);
    }

    /// The runtime options this instance runs with: a `PUT /config` that changes them is refused
    /// (they take a restart), one that keeps them goes to the NF ([`Request::Reconfigure`]).
    pub fn set_runtime_config(&mut self, cfg: crate::config::RuntimeConfig) {
        self.runtime_cfg = Some(cfg);
    }

    /// Apply a new config in place (see [`Request::Reconfigure`]).
    fn reconfigure(&mut self, cfg: &serde_json::Value) -> Result<Reply, ControlError> {
        let rt = crate::config::RuntimeConfig::from_config(cfg)
            .map_err(|e| ControlError::new(400, e))?;
        if self.runtime_cfg.is_some_and(|cur| cur != rt) {
            return Err(ControlError::new(
                409,
                "a runtime option changes (batch_size, fail_mode, timer_interval_ms, owner_cache, pipeline_depth, spin_us or cpu_latency_us): it takes a restart",
            ));
        }
        match self.nf.reconfigure(cfg, self.store.as_mut(), &self.keys) {
            Ok(true) => {
                self.stats.reconfigured.fetch_add(1, Relaxed);
                self.snapshot();
                Ok(Reply::Reconfigured)
            }
            Ok(false) => Err(ControlError::new(
                409,
                format!(
                    "the {} NF cannot change its config in place: it takes a restart",
                    self.nf.name()
                ),
            )),
            Err(crate::Refused::Invalid(e)) => Err(ControlError::new(400, e)),
            Err(crate::Refused::Store(e)) => {
                self.stats.store_errors.fetch_add(1, Relaxed);
                Err(ControlError::new(503, format!("state tier: {e}")))
            }
        }
    }

    pub fn buffering(&self) -> bool {
        self.buffer.is_some()
    }

    /// A handle for the HTTP thread's state requests (served between batches by
    /// [`Runtime::serve_control`]); replaces an earlier one.
    pub fn control_handle(&mut self) -> ControlHandle {
        let (h, rx) = ControlHandle::channel();
        self.control = Some(rx);
        h
    }

    /// Answer pending control requests (between batches, so an export is a consistent snapshot).
    pub fn serve_control(&mut self, now_ns: u64) -> io::Result<()> {
        let reqs = self.take_control();
        self.handle_control(reqs, now_ns)
    }

    /// The control requests sent so far (none: no allocation).
    fn take_control(&mut self) -> Vec<Envelope> {
        match &self.control {
            Some(rx) => rx.try_iter().collect(),
            None => vec![],
        }
    }

    fn handle_control(&mut self, reqs: Vec<Envelope>, now_ns: u64) -> io::Result<()> {
        for (req, reply) in reqs {
            let ans = match req {
                Request::Drain(_) if self.buffer.is_some() => Err(ControlError::new(
                    409,
                    "buffering: its queue is processed only when it is released (POST /release, PUT /state)",
                )),
                Request::Reconfigure(cfg) => self.reconfigure(&cfg),
                Request::Drain(d) => {
                    // Answered by `check_drains` once drained (or at its deadline).
                    self.drains.add(d, reply);
                    continue;
                }
                Request::Export => match self.flush_port(now_ns).map(|_| self.store.export_state()) {
                    Err(e) => {
                        let _ = reply.send(Err(ControlError::new(500, e.to_string())));
                        return Err(e);
                    }
                    Ok(None) => Err(ControlError::new(
                        409,
                        format!("store {}: cannot export its state (not held by this process, or records the snapshot does not carry)", self.store.kind()),
                    )),
                    Ok(Some(b)) => {
                        self.stats.state_exports.fetch_add(1, Relaxed);
                        Ok(Reply::State(b))
                    }
                },
                Request::Hold(_) if self.buffer.is_some() => Err(ControlError::new(
                    409,
                    "buffering already: POST /release first",
                )),
                Request::Hold(cap) => Ok(self.hold(cap)),
                Request::Release if self.buffer.is_none() => Err(ControlError::new(
                    409,
                    "not buffering: nothing to release (started without --buffer, or released already)",
                )),
                Request::Release if self.depth > 1 && self.store.pipeline().is_some() => {
                    // Handed to the pipelined loop (one round trip per batch, not two per batch
                    // here, which on a CPU-throttled sNIC left the port's ring to overflow).
                    let overflow = self.stats.buffer_overflow.load(Relaxed);
                    let buf = self.buffer.take().expect("buffering");
                    let replayed = buf.frames.len() as u64;
                    self.backlog = buf.frames;
                    self.stats.buffering.store(false, Relaxed);
                    Ok(Reply::Released { replayed, overflow })
                }
                Request::Release => {
                    let overflow = self.stats.buffer_overflow.load(Relaxed);
                    match self.replay(now_ns) {
                        Ok(replayed) => Ok(Reply::Released { replayed, overflow }),
                        Err(e) => {
                            let _ = reply.send(Err(ControlError::new(500, e.to_string())));
                            return Err(e);
                        }
                    }
                }
                Request::Install { .. } if self.buffer.is_none() => Err(ControlError::new(
                    409,
                    "state can only be imported by an instance waiting for it (started with --buffer)",
                )),
                Request::Install { store, entries } => {
                    match store.kind() == self.store.kind() {
                        false => Err(ControlError::new(
                            409,
                            format!("a {} store cannot replace a {} store", store.kind(), self.store.kind()),
                        )),
                        true => {
                            self.store = store;
                            self.stats.state_imports.fetch_add(1, Relaxed);
                            let overflow = self.stats.buffer_overflow.load(Relaxed);
                            match self.replay(now_ns) {
                                Ok(replayed) => Ok(Reply::Imported {
                                    entries,
                                    replayed,
                                    overflow,
                                }),
                                Err(e) => {
                                    let _ = reply.send(Err(ControlError::new(500, e.to_string())));
                                    return Err(e);
                                }
                            }
                        }
                    }
                }
            };
            let _ = reply.send(ans);
        }
        Ok(())
    }

    /// Enter buffering mode while running ([`Request::Hold`]; nothing in flight: the caller
    /// finished its batches). Released frames not taken yet go first in the queue: they arrived
    /// earlier.
    fn hold(&mut self, cap: usize) -> Reply {
        self.set_buffering(cap);
        let pending = std::mem::take(&mut self.backlog);
        let n = pending.len() as u64;
        if let Some(buf) = self.buffer.as_mut() {
            let later = std::mem::replace(&mut buf.frames, pending);
            buf.frames.extend(later);
        }
        self.stats.holds.fetch_add(1, Relaxed);
        Reply::Holding { pending: n }
    }

    /// Leave buffering mode: process the queued frames in arrival order. Returns how many.
    fn replay(&mut self, now_ns: u64) -> io::Result<u64> {
        let Some(buf) = self.buffer.take() else {
            return Ok(0);
        };
        let mut it = buf.frames.into_iter();
        let mut done = 0u64;
        loop {
            self.batch.clear();
            while !self.batch.is_full() {
                let Some((f, ts)) = it.next() else { break };
                self.batch.push(&f, ts);
            }
            let n = self.batch.len();
            if n == 0 {
                break;
            }
            self.process_batch(n, now_ns)?;
            done += n as u64;
            self.stats.replayed.fetch_add(n as u64, Relaxed);
            self.stats.buffered_now.fetch_sub(n as u64, Relaxed);
        }
        self.stats.buffering.store(false, Relaxed);
        self.snapshot();
        Ok(done)
    }

    /// Take in what already sits in the port's receive ring (never waits; bounded), so that an
    /// export includes the effect of every packet that reached this instance before it.
    fn flush_port(&mut self, now_ns: u64) -> io::Result<()> {
        for _ in 0..4096 {
            let n = self.dev.recv_nowait(&mut self.batch, now_ns)?;
            if n == 0 {
                break;
            }
            self.count_rx(n, std::time::Instant::now());
            if self.buffer.is_some() {
                self.enqueue(n);
            } else {
                self.process_batch(n, now_ns)?;
            }
        }
        Ok(())
    }

    /// `n` frames were taken from the port at `at` (rx; a drain's quiet window starts again).
    fn count_rx(&mut self, n: usize, at: std::time::Instant) {
        self.stats.rx.fetch_add(n as u64, Relaxed);
        self.last_rx_ns = mono_of(at);
    }

    /// Wait on the port no longer than until a drain request may be answered (its port's own
    /// bound again when none waits).
    fn bound_wait(&mut self) {
        if self.drains.is_empty() && self.wait_ms.is_none() {
            return;
        }
        let seen = Seen {
            last_rx_ns: self.last_rx_ns,
            ..Seen::default()
        };
        let want = self
            .drains
            .wake_in_ns(&seen, mono_ns())
            .map(|ns| ns.div_ceil(1_000_000).min(u64::from(u32::MAX)) as u32);
        if want != self.wait_ms {
            self.dev.set_wait_ms(want);
            self.wait_ms = want;
        }
    }

    /// Answer the drain requests that can be answered now, `in_flight` frames being inside the
    /// runtime (received, not yet sent or dropped). The port is asked what waits in its ring only
    /// when an answer is possible (a request's quiet window is over with nothing in flight, or
    /// its deadline passed): one system call per look on AF_PACKET.
    fn check_drains(&mut self, in_flight: u64) {
        if self.drains.is_empty() {
            return;
        }
        let now = mono_ns();
        let seen = Seen {
            last_rx_ns: self.last_rx_ns,
            rx: self.stats.rx.load(Relaxed),
            in_flight,
        };
        if !self.drains.any_due(&seen, now) {
            return;
        }
        let (rx, err) = match self.dev.rx_counts() {
            Ok(rx) => (rx, None),
            Err(e) => (netio::RxCounts::default(), Some(e)),
        };
        if let Some(d) = rx.dropped {
            self.stats.port_drops.store(d, Relaxed);
        }
        for (reply, report) in self.drains.settle(&seen, now, rx) {
            let ans = match report.decision {
                Decision::CannotTell => Err(ControlError::new(
                    501,
                    format!(
                        "port {} cannot tell what waits in its receive ring{}",
                        self.dev.describe(),
                        err.as_ref().map(|e| format!(": {e}")).unwrap_or_default()
                    ),
                )),
                _ => Ok(Reply::Drain(report)),
            };
            let _ = reply.send(ans);
        }
    }

    fn enqueue(&mut self, n: usize) {
        let buf = self.buffer.as_mut().expect("buffering");
        for i in 0..n {
            if buf.frames.len() < buf.cap {
                buf.frames
                    .push_back((self.batch.frame(i).to_vec(), self.batch.ts_ns(i)));
                self.stats.buffered.fetch_add(1, Relaxed);
                self.stats.buffered_now.fetch_add(1, Relaxed);
            } else {
                self.stats.buffer_overflow.fetch_add(1, Relaxed);
            }
        }
    }

    /// Batches in flight at once when the store supports pipelining (1 = batch by batch: two
    /// round trips per batch, nothing in flight between batches). Default
    /// [`DEFAULT_PIPELINE_DEPTH`]. [`Runtime::step`] always runs one batch to completion.
    pub fn set_pipeline_depth(&mut self, depth: usize) {
        self.depth = depth.clamp(1, MAX_PIPELINE_DEPTH);
    }

    /// Whether a small batch of the pipelined loop may borrow, rather than read, the keys an
    /// earlier batch in flight reads and keeps writing (default off: it lengthens the latency
    /// tail at partial load, bench/RESULTS.md; on for A/B measurements).
    pub fn set_borrow_reads(&mut self, on: bool) {
        self.borrow = on;
    }

    pub fn pipeline_depth(&self) -> usize {
        self.depth
    }

    /// Start (or stop) recording each batch's receive-to-transmit time.
    pub fn record_latencies(&mut self, on: bool) {
        self.latencies = if on { Some(Vec::new()) } else { None };
    }

    /// Record where each packet's time goes in the pipelined loop ([`phases`]; diagnosis only:
    /// a clock reading per step of every batch).
    pub fn record_phases(&mut self, on: bool) {
        self.phases = if on { Some(Vec::new()) } else { None };
    }

    /// The recorded per-packet phases, in transmit order (cleared).
    pub fn take_phases(&mut self) -> Vec<phases::PacketPhases> {
        self.phases.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Now for a phase mark: the wall clock when recording phases, else 0 (no clock reading).
    fn mark(&self) -> u64 {
        if self.phases.is_some() {
            wall_ns()
        } else {
            0
        }
    }

    /// The recorded per-batch latencies in us (cleared).
    pub fn take_latencies(&mut self) -> Vec<f64> {
        self.latencies
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    pub fn device(&self) -> &D {
        &self.dev
    }

    pub fn device_mut(&mut self) -> &mut D {
        &mut self.dev
    }

    pub fn store_mut(&mut self) -> &mut dyn FlowStore {
        self.store.as_mut()
    }

    /// Take the runtime apart (tests inspect the NF, store and device afterwards).
    pub fn into_parts(self) -> (Box<dyn NetworkFunction>, Box<dyn FlowStore>, D) {
        (self.nf, self.store, self.dev)
    }

    pub fn nf(&self) -> &dyn NetworkFunction {
        self.nf.as_ref()
    }

    /// Initialise the NF against the tier and mark the instance ready.
    pub fn init(&mut self) -> Result<(), crate::Refused> {
        self.nf.init(self.store.as_mut(), &self.keys)?;
        self.stats.ready.store(true, Relaxed);
        self.snapshot();
        Ok(())
    }

    /// Stop cleanly: the NF gives back what it holds of shared resources (after [`Runtime::run`]).
    pub fn release(&mut self) -> Result<(), StoreError> {
        let r = self.nf.release(self.store.as_mut(), &self.keys);
        self.snapshot();
        r
    }

    /// Copy store and NF counters into the stats endpoint's snapshot.
    pub fn snapshot(&mut self) {
        let s = self.store.stats();
        if let Ok(mut v) = self.stats.store.lock() {
            *v = serde_json::json!({
                "kind": self.store.kind(), "round_trips": s.round_trips, "keys_read": s.keys_read,
                "keys_written": s.keys_written, "errors": s.errors, "reconnects": s.reconnects,
                "unplanned_reads": s.unplanned_reads, "wait_short": s.wait_short,
                "redirects": s.redirects, "refreshes": s.refreshes,
            });
        }
        if let Ok(mut v) = self.stats.nf.lock() {
            *v = self.nf.stats();
        }
        if let Ok(netio::RxCounts {
            dropped: Some(d), ..
        }) = self.dev.rx_counts()
        {
            self.stats.port_drops.store(d, Relaxed);
        }
        self.batches_since_snapshot = 0;
    }

    /// Receive and process one batch; `now_ns` is the current time (see [`TimeSource`]).
    /// Returns the number of frames received (0: nothing arrived).
    pub fn step(&mut self, now_ns: u64) -> io::Result<usize> {
        let n = self.dev.recv(&mut self.batch, now_ns)?;
        if n == 0 {
            return Ok(0);
        }
        self.count_rx(n, std::time::Instant::now());
        if self.buffer.is_some() {
            self.enqueue(n);
            return Ok(n);
        }
        self.process_batch(n, now_ns)?;
        Ok(n)
    }

    /// Process the `n` frames in `self.batch` and transmit the forwarded ones.
    fn process_batch(&mut self, n: usize, now_ns: u64) -> io::Result<()> {
        let t_recv = std::time::Instant::now();
        let st = &self.stats;
        st.batches.fetch_add(1, Relaxed);
        pipelined::classify(
            self.nf.as_ref(),
            &self.keys,
            &self.batch,
            &mut self.parsed,
            &mut self.keep,
            &mut self.state,
            &mut self.readset,
            st,
        );
        let fail = self.opts.fail_mode;
        let fetched = self.state.fetch(self.store.as_mut());
        if fetched.is_err() {
            st.store_errors.fetch_add(1, Relaxed);
            for i in 0..n {
                if self.parsed[i].is_some() {
                    self.fail_packet(i, fail);
                }
            }
        } else {
            for i in 0..n {
                let Some(p) = self.parsed[i] else { continue };
                let ts = self.batch.ts_ns(i);
                let mut ctx = Ctx::new(
                    ts,
                    &self.keys,
                    &mut self.state,
                    self.store.as_mut(),
                    &self.timers_key,
                );
                match self.nf.process(&mut ctx, self.batch.frame_mut(i), &p) {
                    Ok(Verdict::Forward) => self.keep[i] = true,
                    Ok(Verdict::Drop) => {
                        self.stats.dropped_by_nf.fetch_add(1, Relaxed);
                    }
                    Err(_) => {
                        self.stats.store_errors.fetch_add(1, Relaxed);
                        self.fail_packet(i, fail);
                    }
                }
            }
            match self.state.flush(self.store.as_mut()) {
                Err(e) => {
                    self.stats.store_errors.fetch_add(1, Relaxed);
                    if fail == FailMode::Closed || e.is_not_durable() {
                        // State of this batch is not in the tier: do not let its packets through.
                        for i in 0..n {
                            if self.parsed[i].is_some() && self.keep[i] {
                                self.keep[i] = false;
                                self.stats.fail_closed_dropped.fetch_add(1, Relaxed);
                            }
                        }
                    }
                }
                Ok(lost) if !lost.is_empty() => {
                    drop_claim_dependents(&self.parsed, &mut self.keep, &self.stats);
                    let _ = self.undo_lost(&lost, now_ns);
                }
                Ok(_) => {}
            }
        }
        let sent = self.dev.send(&self.batch, &self.keep, now_ns)?;
        self.stats.tx.fetch_add(sent as u64, Relaxed);
        if let Some(l) = self.latencies.as_mut() {
            l.push(t_recv.elapsed().as_secs_f64() * 1e6);
        }
        self.batches_since_snapshot += 1;
        if self.batches_since_snapshot >= 256 {
            self.snapshot();
        }
        Ok(())
    }

    fn fail_packet(&mut self, i: usize, fail: FailMode) {
        pipelined::fail_packet(&mut self.keep[i], fail, &self.stats);
    }

    /// Conditional writes that did not apply: for each lost claim the NF undoes what it tied to
    /// its value ([`NetworkFunction::claim_lost`]), written at once. Returns those writes (the
    /// pipelined loop overlays them on batches still reading).
    fn undo_lost(&mut self, lost: &[WriteOp], now_ns: u64) -> Result<Vec<WriteOp>, StoreError> {
        let mut undo = BatchState::new();
        for op in lost {
            if let WriteOp::SetIf {
                key,
                expect: None,
                value: Some(v),
            } = op
            {
                self.stats.claims_lost.fetch_add(1, Relaxed);
                let mut ctx = Ctx::new(
                    now_ns,
                    &self.keys,
                    &mut undo,
                    self.store.as_mut(),
                    &self.timers_key,
                );
                self.nf.claim_lost(&mut ctx, key, v)?;
            }
        }
        undo.coalesce();
        let writes = undo.pending_writes().to_vec();
        let r = undo.flush(self.store.as_mut());
        if r.is_err() {
            self.stats.store_errors.fetch_add(1, Relaxed);
        }
        r.map(|_| writes)
    }

    /// Claim and fire due timers (each claimed by exactly one instance). Returns how many fired.
    pub fn fire_timers(&mut self, now_ns: u64) -> Result<usize, StoreError> {
        let now_ms = now_ns / 1_000_000;
        self.last_timer_ms = now_ms;
        let due = match self.store.timer_claim_due(&self.timers_key, now_ms, 1024) {
            Ok(d) => d,
            Err(e) => {
                self.stats.store_errors.fetch_add(1, Relaxed);
                return Err(e);
            }
        };
        if due.is_empty() {
            return Ok(0);
        }
        self.state.clear();
        for m in &due {
            let mut ctx = Ctx::new(
                now_ns,
                &self.keys,
                &mut self.state,
                self.store.as_mut(),
                &self.timers_key,
            );
            self.nf.on_timer(&mut ctx, m)?;
        }
        self.state.flush(self.store.as_mut())?;
        self.stats.timers_fired.fetch_add(due.len() as u64, Relaxed);
        Ok(due.len())
    }

    /// Run until the device is exhausted or `stop` is set: pipelined when the store supports it
    /// and the depth is above 1, else batch by batch.
    pub fn run(&mut self, time: TimeSource, stop: &AtomicBool) -> io::Result<()> {
        let pipelined = self.depth > 1 && self.store.pipeline().is_some();
        let mut clock_ns = 0u64;
        while !stop.load(Relaxed) && !self.dev.exhausted() {
            if pipelined && self.buffer.is_none() {
                // Not buffering (never, or released: its queue processed, nothing in flight):
                // pipelined until it stops or is told to hold (then batch by batch again here).
                self.run_pipelined(time, stop)?;
                if self.buffer.is_none() {
                    return Ok(());
                }
                continue;
            }
            let now = match time {
                TimeSource::Wall => wall_ns(),
                TimeSource::Packets => clock_ns,
            };
            self.bound_wait();
            let n = self.step(now)?;
            self.serve_control(now)?;
            // Batch by batch, nothing is in flight between two steps (a buffering instance
            // refuses drains).
            self.check_drains(0);
            if time == TimeSource::Packets && n > 0 {
                clock_ns = clock_ns.max(self.batch.ts_ns(n - 1));
            }
            let now = match time {
                TimeSource::Wall => wall_ns(),
                TimeSource::Packets => clock_ns,
            };
            if now / 1_000_000 >= self.last_timer_ms + self.opts.timer_interval_ms {
                // A failure is counted; the loop goes on (the tier may come back).
                let _ = self.fire_timers(now);
                if self.store.check_epoch().is_err() {
                    self.stats.store_errors.fetch_add(1, Relaxed);
                }
                self.snapshot();
            }
        }
        self.dev.flush()?;
        self.snapshot();
        Ok(())
    }
}
