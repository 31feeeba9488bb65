//! A memory-fed port that offers full batches at a fixed rate (like a NIC at a given load) and
//! records, per transmitted batch, the time from its arrival (the frames' timestamp) to its
//! transmission: the latency a packet sees at that load, queueing included.

use netio::{Batch, Device};
use nfcore::runtime::wall_ns;
use std::io;

pub struct PacedDevice {
    frames: Vec<Vec<u8>>,
    pos: usize,
    batch: usize,
    interval_ns: u64,
    start_ns: u64,
    /// Arrival-to-transmit time of each batch, us.
    pub lat_us: Vec<f64>,
}

impl PacedDevice {
    /// Offer `frames` in batches of `batch` at `pps` packets/s.
    pub fn new(frames: Vec<Vec<u8>>, batch: usize, pps: f64) -> PacedDevice {
        PacedDevice {
            frames,
            pos: 0,
            batch,
            interval_ns: (batch as f64 / pps * 1e9) as u64,
            start_ns: 0,
            lat_us: Vec::new(),
        }
    }

    fn due_ns(&mut self) -> u64 {
        if self.start_ns == 0 {
            self.start_ns = wall_ns();
        }
        self.start_ns + (self.pos / self.batch) as u64 * self.interval_ns
    }

    fn take(&mut self, batch: &mut Batch, due: u64) -> usize {
        batch.clear();
        while !batch.is_full() && self.pos < self.frames.len() {
            batch.push(&self.frames[self.pos], due);
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
        let due = self.due_ns();
        while wall_ns() < due {
            std::hint::spin_loop();
        }
        Ok(self.take(batch, due))
    }

    fn recv_nowait(&mut self, batch: &mut Batch, _now_ns: u64) -> io::Result<usize> {
        let due = self.due_ns();
        if wall_ns() < due {
            batch.clear();
            return Ok(0);
        }
        Ok(self.take(batch, due))
    }

    fn send(&mut self, batch: &Batch, keep: &[bool], _now_ns: u64) -> io::Result<usize> {
        if !batch.is_empty() {
            let arrived = batch.ts_ns(0);
            self.lat_us
                .push(wall_ns().saturating_sub(arrived) as f64 / 1e3);
        }
        Ok(keep.iter().filter(|k| **k).count())
    }

    fn exhausted(&self) -> bool {
        self.pos >= self.frames.len()
    }
}
