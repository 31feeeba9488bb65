//! Fault injection around any device: deterministic loss, duplication and reordering on receive.

use crate::{Batch, Device};
use std::io;

/// Fault rates in packets per million, and a seed (same seed = same faults).
#[derive(Debug, Clone, Copy, Default)]
pub struct FaultConfig {
    pub drop_ppm: u32,
    pub dup_ppm: u32,
    /// Swap a packet with the next one in the batch.
    pub reorder_ppm: u32,
    pub seed: u64,
}

/// Wraps a device and injects faults into what it receives.
pub struct FaultyDevice<D: Device> {
    inner: D,
    cfg: FaultConfig,
    rng: u64,
    tmp: Batch,
    pub dropped: u64,
    pub duplicated: u64,
    pub reordered: u64,
}

impl<D: Device> FaultyDevice<D> {
    pub fn new(inner: D, cfg: FaultConfig) -> Self {
        FaultyDevice {
            inner,
            rng: cfg.seed | 1,
            cfg,
            tmp: Batch::with_capacity(1),
            dropped: 0,
            duplicated: 0,
            reordered: 0,
        }
    }

    fn roll(&mut self, ppm: u32) -> bool {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng % 1_000_000) < ppm as u64
    }

    pub fn into_inner(self) -> D {
        self.inner
    }
}

impl<D: Device> Device for FaultyDevice<D> {
    fn describe(&self) -> String {
        format!("faulty({})", self.inner.describe())
    }

    fn recv(&mut self, batch: &mut Batch, now_ns: u64) -> io::Result<usize> {
        if self.tmp.capacity() != batch.capacity() {
            self.tmp = Batch::with_capacity(batch.capacity());
        }
        self.inner.recv(&mut self.tmp, now_ns)?;
        batch.clear();
        let mut i = 0;
        while i < self.tmp.len() {
            if self.roll(self.cfg.drop_ppm) {
                self.dropped += 1;
                i += 1;
                continue;
            }
            if i + 1 < self.tmp.len() && self.roll(self.cfg.reorder_ppm) {
                self.reordered += 1;
                batch.push(self.tmp.frame(i + 1), self.tmp.ts_ns(i + 1));
                batch.push(self.tmp.frame(i), self.tmp.ts_ns(i));
                i += 2;
                continue;
            }
            batch.push(self.tmp.frame(i), self.tmp.ts_ns(i));
            if self.roll(self.cfg.dup_ppm)
                && batch.len() + self.tmp.len() - i <= batch.capacity()
                && batch.push(self.tmp.frame(i), self.tmp.ts_ns(i))
            {
                self.duplicated += 1;
            }
            i += 1;
        }
        Ok(batch.len())
    }

    fn send(&mut self, batch: &Batch, keep: &[bool], now_ns: u64) -> io::Result<usize> {
        self.inner.send(batch, keep, now_ns)
    }

    fn exhausted(&self) -> bool {
        self.inner.exhausted()
    }

    fn rx_counts(&mut self) -> io::Result<crate::RxCounts> {
        self.inner.rx_counts()
    }

    fn set_wait_ms(&mut self, ms: Option<u32>) {
        self.inner.set_wait_ms(ms)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::MemDevice;

    #[test]
    fn faults_are_deterministic_and_counted() {
        let frames: Vec<Vec<u8>> = (0..1000u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let run = || {
            let cfg = FaultConfig {
                drop_ppm: 100_000,
                dup_ppm: 50_000,
                reorder_ppm: 50_000,
                seed: 42,
            };
            let mut d = FaultyDevice::new(MemDevice::new(frames.clone(), 1, false), cfg);
            let mut b = Batch::with_capacity(32);
            let mut got = vec![];
            while !d.exhausted() {
                d.recv(&mut b, 0).unwrap();
                got.extend(b.iter().map(|f| f.to_vec()));
            }
            (got, d.dropped, d.duplicated, d.reordered)
        };
        let (a, dr, du, re) = run();
        assert_eq!(run().0, a);
        assert!(dr > 50 && du > 10 && re > 10, "{dr} {du} {re}");
        assert_eq!(a.len() as u64, 1000 - dr + du);
    }
}
