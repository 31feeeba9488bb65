//! The ESP anti-replay window of an inbound SA (RFC 4303 section 3.4.3, 32-bit sequence
//! numbers): the highest sequence number accepted and a bitmap of the `size` numbers at and
//! below it. Pure logic; the window lives in the state tier as [`ReplayWindow::encode`] bytes.

/// Why a sequence number is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// 0 is never sent.
    Zero,
    /// Below the window: too old to tell.
    TooOld,
    /// Already received.
    Replay,
}

/// Window of `size` bits (a multiple of 64).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayWindow {
    /// Highest sequence number accepted (0: none yet).
    top: u32,
    /// Bit i of the window (word i / 64, bit i % 64) = `top - i` was received.
    bits: Vec<u64>,
}

impl ReplayWindow {
    pub fn new(size: usize) -> ReplayWindow {
        ReplayWindow {
            top: 0,
            bits: vec![0; size.div_ceil(64).max(1)],
        }
    }

    pub fn size(&self) -> u64 {
        self.bits.len() as u64 * 64
    }

    pub fn top(&self) -> u32 {
        self.top
    }

    /// Whether `seq` may be accepted (checked before the integrity check; nothing changes).
    pub fn check(&self, seq: u32) -> Result<(), Refused> {
        if seq == 0 {
            return Err(Refused::Zero);
        }
        if seq > self.top {
            return Ok(());
        }
        let back = (self.top - seq) as u64;
        if back >= self.size() {
            return Err(Refused::TooOld);
        }
        if self.bit(back as usize) {
            Err(Refused::Replay)
        } else {
            Ok(())
        }
    }

    /// Record `seq` as received (after its integrity was verified). Returns the same error as
    /// [`ReplayWindow::check`] if it may not be accepted.
    pub fn accept(&mut self, seq: u32) -> Result<(), Refused> {
        self.check(seq)?;
        if seq > self.top {
            self.shift((seq - self.top) as u64);
            self.top = seq;
            self.set(0);
        } else {
            self.set((self.top - seq) as usize);
        }
        Ok(())
    }

    fn bit(&self, i: usize) -> bool {
        self.bits[i / 64] >> (i % 64) & 1 == 1
    }

    fn set(&mut self, i: usize) {
        self.bits[i / 64] |= 1 << (i % 64);
    }

    /// Move the window up by `n`: bit i becomes bit i + n.
    fn shift(&mut self, n: u64) {
        if n >= self.size() {
            self.bits.iter_mut().for_each(|w| *w = 0);
            return;
        }
        let (words, rem) = ((n / 64) as usize, (n % 64) as u32);
        let len = self.bits.len();
        for i in (0..len).rev() {
            let lo = if i >= words { self.bits[i - words] } else { 0 };
            let lower = if rem > 0 && i > words {
                self.bits[i - words - 1] >> (64 - rem)
            } else {
                0
            };
            self.bits[i] = if rem > 0 { lo << rem | lower } else { lo };
        }
    }

    /// Tier encoding: top (4 bytes) then the bitmap words, big-endian.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(4 + 8 * self.bits.len());
        v.extend_from_slice(&self.top.to_be_bytes());
        for w in &self.bits {
            v.extend_from_slice(&w.to_be_bytes());
        }
        v
    }

    /// Decode a window of `size` bits; None if the bytes are not one (then the caller starts a
    /// fresh window only if nothing is stored at all).
    pub fn decode(b: &[u8], size: usize) -> Option<ReplayWindow> {
        let words = size.div_ceil(64).max(1);
        if b.len() != 4 + 8 * words {
            return None;
        }
        let top = u32::from_be_bytes(b[0..4].try_into().ok()?);
        let bits = b[4..]
            .chunks_exact(8)
            .map(|c| u64::from_be_bytes(c.try_into().expect("8 bytes")))
            .collect();
        Some(ReplayWindow { top, bits })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_semantics() {
        let mut w = ReplayWindow::new(128);
        assert_eq!(w.check(0), Err(Refused::Zero));
        for s in [1, 2, 5, 4] {
            w.accept(s).unwrap();
        }
        assert_eq!(w.accept(4), Err(Refused::Replay));
        assert_eq!(
            w.check(3),
            Ok(()),
            "a gap inside the window is still acceptable"
        );
        w.accept(200).unwrap();
        assert_eq!(w.check(72), Err(Refused::TooOld), "200 - 72 = 128: outside");
        assert_eq!(w.check(73), Ok(()));
        w.accept(73).unwrap();
        assert_eq!(w.check(73), Err(Refused::Replay));
        assert_eq!(w.check(200), Err(Refused::Replay));
        // Shifts across word boundaries keep the bits.
        w.accept(265).unwrap();
        assert_eq!(w.check(200), Err(Refused::Replay), "200 is 65 below 265");
        assert_eq!(w.check(199), Ok(()));
        let d = ReplayWindow::decode(&w.encode(), 128).unwrap();
        assert_eq!(d, w);
        assert!(ReplayWindow::decode(&w.encode(), 64).is_none());
        assert!(ReplayWindow::decode(b"xx", 128).is_none());
    }

    /// Against a plain set of received numbers, on a pseudo-random sequence with reordering.
    #[test]
    fn matches_a_reference_model() {
        let mut w = ReplayWindow::new(192);
        let mut seen = std::collections::BTreeSet::new();
        let mut top = 0u32;
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut base = 1u32;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let seq = (base + (x % 300) as u32).saturating_sub(150).max(1);
            if x.is_multiple_of(3) {
                base += 1 + (x % 5) as u32;
            }
            let want = if seq + 192 <= top {
                Err(Refused::TooOld)
            } else if seen.contains(&seq) {
                Err(Refused::Replay)
            } else {
                Ok(())
            };
            assert_eq!(w.accept(seq), want, "seq {seq} top {top}");
            if want.is_ok() {
                seen.insert(seq);
                top = top.max(seq);
            }
        }
    }
}
