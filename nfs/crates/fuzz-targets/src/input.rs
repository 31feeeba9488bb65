//! Reading structured values out of fuzz input bytes, and the frame-list format of the NF
//! packet-path targets (with its encoder, for the seed corpora).

/// A cursor over fuzz input: every read succeeds (zeros past the end), so any input is valid.
pub struct Input<'a> {
    d: &'a [u8],
}

impl<'a> Input<'a> {
    pub fn new(d: &'a [u8]) -> Input<'a> {
        Input { d }
    }

    pub fn is_empty(&self) -> bool {
        self.d.is_empty()
    }

    pub fn u8(&mut self) -> u8 {
        match self.d.split_first() {
            Some((b, rest)) => {
                self.d = rest;
                *b
            }
            None => 0,
        }
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// Up to `n` bytes.
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.d.split_at(n.min(self.d.len()));
        self.d = b;
        a
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        self.bytes(self.d.len())
    }
}

/// At most this many frames per input (keeps one execution short).
pub const MAX_FRAMES: usize = 256;

/// Frame list: records `[dt: u8][len: u16 BE][len bytes]` (the last may be short); the clock
/// advances `dt^3` ms before each frame (0..~4.6 h, so idle timeouts of seconds to hours can
/// expire). Returns (timestamp ns, frame).
pub fn frames(inp: &mut Input<'_>) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut t_ms = 0u64;
    while !inp.is_empty() && out.len() < MAX_FRAMES {
        let dt = inp.u8() as u64;
        t_ms += dt * dt * dt;
        let len = inp.u16() as usize;
        out.push((t_ms * 1_000_000, inp.bytes(len).to_vec()));
    }
    out
}

/// Inverse of [`frames`] (timestamps rounded to what `dt^3` steps can express).
pub fn encode_frames(out: &mut Vec<u8>, frames: &[(u64, Vec<u8>)]) {
    let mut t_ms = 0u64;
    for (ts, f) in frames {
        let want = ts / 1_000_000;
        let mut dt = 0u64;
        while dt < 255 && t_ms + (dt + 1).pow(3) <= want {
            dt += 1;
        }
        t_ms += dt.pow(3);
        out.push(dt as u8);
        out.extend_from_slice(&(f.len().min(u16::MAX as usize) as u16).to_be_bytes());
        out.extend_from_slice(&f[..f.len().min(u16::MAX as usize)]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip() {
        let fr = vec![
            (0, vec![1, 2, 3]),
            (1_000_000, vec![]),
            (9_000_000, vec![7; 300]),
        ];
        let mut b = vec![];
        encode_frames(&mut b, &fr);
        assert_eq!(frames(&mut Input::new(&b)), fr);
        // A short last record keeps what is there.
        assert_eq!(frames(&mut Input::new(&[0, 0, 5, 9])), vec![(0, vec![9])]);
    }
}
