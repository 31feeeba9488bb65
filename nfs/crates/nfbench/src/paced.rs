//! A memory-fed port that offers packets at a fixed rate, each at its own arrival time (packet i
//! arrives at start + i / rate, like a NIC at a given load): a receive takes the packets that
//! have arrived by then (at most a batch), so batches are as large as the backlog. Records, per
//! packet, the time from its arrival to the moment its batch is transmitted: the latency a
//! packet sees at that load, queueing included. [`PacedDevice::capped`]: every packet there at
//! once, at most N per receive (the batch structure below saturation without its timing).

use netio::{Batch, Device};
use nfcore::runtime::wall_ns;
use std::io;

pub struct PacedDevice {
    frames: Vec<Vec<u8>>,
    pos: usize,
    gap_ns: f64,
    start_ns: u64,
    /// The most frames one receive returns.
    cap: usize,
    /// Arrival-to-transmit time of each packet, us.
    pub lat_us: Vec<f64>,
    /// Arrival time of each packet (wall clock, ns), in `lat_us` order.
    pub arrived_ns: Vec<u64>,
}

impl PacedDevice {
    /// Offer `frames` at `pps` packets/s.
    pub fn new(frames: Vec<Vec<u8>>, pps: f64) -> PacedDevice {
        let n = frames.len();
        PacedDevice {
            frames,
            pos: 0,
            gap_ns: 1e9 / pps,
            start_ns: 0,
            cap: usize::MAX,
            lat_us: Vec::with_capacity(n),
            arrived_ns: Vec::with_capacity(n),
        }
    }

    /// Every frame there at once; a receive returns at most `cap` of them.
    pub fn capped(frames: Vec<Vec<u8>>, cap: usize) -> PacedDevice {
        PacedDevice {
            gap_ns: 0.0,
            cap: cap.max(1),
            ..PacedDevice::new(frames, 1.0)
        }
    }

    fn arrival_ns(&mut self, i: usize) -> u64 {
        if self.start_ns == 0 {
            self.start_ns = wall_ns();
        }
        self.start_ns + (i as f64 * self.gap_ns) as u64
    }

    /// The packets arrived by now, at most a batch.
    fn take(&mut self, batch: &mut Batch) -> usize {
        batch.clear();
        let now = wall_ns();
        while !batch.is_full() && batch.len() < self.cap && self.pos < self.frames.len() {
            let t = self.arrival_ns(self.pos);
            if t > now {
                break;
            }
            batch.push(&self.frames[self.pos], t);
            self.pos += 1;
        }
        batch.len()
    }
}

impl Device for PacedDevice {
    fn describe(&self) -> String {
        "paced memory".into()
    }

    fn recv(&mut self, batch: &mut Batch, _now_ns: u64) -> io::Result<usize> {
        if self.pos < self.frames.len() {
            let due = self.arrival_ns(self.pos);
            while wall_ns() < due {
                std::hint::spin_loop();
            }
        }
        Ok(self.take(batch))
    }

    fn recv_nowait(&mut self, batch: &mut Batch, _now_ns: u64) -> io::Result<usize> {
        Ok(self.take(batch))
    }

    fn send(&mut self, batch: &Batch, keep: &[bool], _now_ns: u64) -> io::Result<usize> {
        let now = wall_ns();
        for i in 0..batch.len() {
            let t = batch.ts_ns(i);
            self.lat_us.push(now.saturating_sub(t) as f64 / 1e3);
            self.arrived_ns.push(t);
        }
        Ok(keep.iter().filter(|k| **k).count())
    }

    fn exhausted(&self) -> bool {
        self.pos >= self.frames.len()
    }
}
