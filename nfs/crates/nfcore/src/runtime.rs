//! The batch loop: read set -> one store round trip -> process -> one write round trip -> send.

use crate::config::RuntimeOptions;
use crate::stats::Stats;
use crate::{Ctx, FailMode, NetworkFunction, Verdict};
use flowstore::{BatchState, FlowStore, Key, KeySpace, StoreError};
use netio::{Batch, Device};
use packet::Parsed;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

mod pipelined;

/// Default number of batches in flight on a pipelined store (see [`Runtime::set_pipeline_depth`]).
pub const DEFAULT_PIPELINE_DEPTH: usize = 8;
/// Upper bound of the pipeline depth.
pub const MAX_PIPELINE_DEPTH: usize = 64;

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
    pipe: pipelined::PipeState,
    /// Per-batch receive-to-transmit times in us, when recording (benchmarks).
    latencies: Option<Vec<f64>>,
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
            pipe: pipelined::PipeState::default(),
            latencies: None,
        }
    }

    /// Batches in flight at once when the store supports pipelining (1 = batch by batch: two
    /// round trips per batch, nothing in flight between batches). Default
    /// [`DEFAULT_PIPELINE_DEPTH`]. [`Runtime::step`] always runs one batch to completion.
    pub fn set_pipeline_depth(&mut self, depth: usize) {
        self.depth = depth.clamp(1, MAX_PIPELINE_DEPTH);
    }

    pub fn pipeline_depth(&self) -> usize {
        self.depth
    }

    /// Start (or stop) recording each batch's receive-to-transmit time.
    pub fn record_latencies(&mut self, on: bool) {
        self.latencies = if on { Some(Vec::new()) } else { None };
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
    pub fn init(&mut self) -> Result<(), StoreError> {
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
                "unplanned_reads": s.unplanned_reads,
            });
        }
        if let Ok(mut v) = self.stats.nf.lock() {
            *v = self.nf.stats();
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
        let t_recv = std::time::Instant::now();
        let st = &self.stats;
        st.rx.fetch_add(n as u64, Relaxed);
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
            if self.state.flush(self.store.as_mut()).is_err() {
                self.stats.store_errors.fetch_add(1, Relaxed);
                if fail == FailMode::Closed {
                    // State of this batch is not in the tier: do not let its packets through.
                    for i in 0..n {
                        if self.parsed[i].is_some() && self.keep[i] {
                            self.keep[i] = false;
                            self.stats.fail_closed_dropped.fetch_add(1, Relaxed);
                        }
                    }
                }
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
        Ok(n)
    }

    fn fail_packet(&mut self, i: usize, fail: FailMode) {
        pipelined::fail_packet(&mut self.keep[i], fail, &self.stats);
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
        if self.depth > 1 && self.store.pipeline().is_some() {
            return self.run_pipelined(time, stop);
        }
        let mut clock_ns = 0u64;
        while !stop.load(Relaxed) && !self.dev.exhausted() {
            let now = match time {
                TimeSource::Wall => wall_ns(),
                TimeSource::Packets => clock_ns,
            };
            let n = self.step(now)?;
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
