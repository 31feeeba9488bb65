//! In-memory device: replays a list of frames `rounds` times and counts what is sent.

use crate::{Batch, Device};
use std::io;

/// Replays frames from memory (benchmarks, tests); keeps sent frames if asked.
pub struct MemDevice {
    frames: Vec<Vec<u8>>,
    rounds: u64,
    pos: usize,
    round: u64,
    /// Frames sent so far (only when `keep_sent`).
    pub sent: Vec<Vec<u8>>,
    keep_sent: bool,
    pub sent_count: u64,
}

impl MemDevice {
    pub fn new(frames: Vec<Vec<u8>>, rounds: u64, keep_sent: bool) -> MemDevice {
        MemDevice {
            frames,
            rounds,
            pos: 0,
            round: 0,
            sent: vec![],
            keep_sent,
            sent_count: 0,
        }
    }
}

impl Device for MemDevice {
    fn describe(&self) -> String {
        format!(
            "memory ({} frames x {} rounds)",
            self.frames.len(),
            self.rounds
        )
    }

    fn recv(&mut self, batch: &mut Batch, now_ns: u64) -> io::Result<usize> {
        batch.clear();
        while !batch.is_full() && !self.exhausted() {
            batch.push(&self.frames[self.pos], now_ns);
            self.pos += 1;
            if self.pos == self.frames.len() {
                self.pos = 0;
                self.round += 1;
            }
        }
        Ok(batch.len())
    }

    fn send(&mut self, batch: &Batch, keep: &[bool], _now_ns: u64) -> io::Result<usize> {
        let mut n = 0;
        for (i, f) in batch.iter().enumerate() {
            if keep.get(i).copied().unwrap_or(false) {
                n += 1;
                if self.keep_sent {
                    self.sent.push(f.to_vec());
                }
            }
        }
        self.sent_count += n as u64;
        Ok(n)
    }

    fn exhausted(&self) -> bool {
        self.frames.is_empty() || self.round >= self.rounds
    }

    fn rx_counts(&mut self) -> io::Result<crate::RxCounts> {
        let n = self.frames.len() as u64;
        let left = match self.exhausted() {
            true => 0,
            false => (self.rounds - self.round)
                .saturating_mul(n)
                .saturating_sub(self.pos as u64),
        };
        Ok(crate::RxCounts {
            waiting: Some(left),
            dropped: Some(0),
        })
    }
}
