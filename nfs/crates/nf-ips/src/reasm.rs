//! TCP reassembly (thesis Algorithm 3), pure logic: per direction the next expected sequence
//! number, and a bounded buffer of out-of-order segments. The NF keeps both in the tier.
//!
//! Policy: bytes are delivered to the scanner exactly once, in stream order. Bytes already
//! delivered are not scanned again (a retransmission, or the overlapping head of a segment), so
//! the copy of a byte delivered first wins (a buffered segment with the same start as another
//! is not stored twice; one covered by an in-order segment is discarded, as a receiver trims it).

/// One direction of a connection as kept in the tier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirState {
    /// The direction's initial sequence number is known (SYN / SYN-ACK seen).
    pub init: bool,
    /// Next expected sequence number.
    pub expected: u32,
    /// Aho-Corasick state after the bytes delivered so far.
    pub ac: u32,
    /// Stream bytes delivered so far.
    pub offset: u64,
    /// Segments and bytes in the out-of-order buffer.
    pub buffered: u16,
    pub buffered_bytes: u32,
    /// Where the buffer lies in the tier: keys (slots) `0..slots`, each an encoded [`OooBuffer`]
    /// (a segment that arrived out of order is appended as a slot of its own, without reading
    /// the others).
    pub slots: u16,
    /// Start of the earliest buffered segment (meaningful while `buffered > 0`): the buffer is
    /// read only once the expected sequence number reaches it.
    pub ooo_next: u32,
}

pub const DIR_LEN: usize = 1 + 4 + 4 + 8 + 2 + 4 + 2 + 4;

impl DirState {
    pub fn encode_into(&self, v: &mut Vec<u8>) {
        v.push(self.init as u8);
        v.extend_from_slice(&self.expected.to_le_bytes());
        v.extend_from_slice(&self.ac.to_le_bytes());
        v.extend_from_slice(&self.offset.to_le_bytes());
        v.extend_from_slice(&self.buffered.to_le_bytes());
        v.extend_from_slice(&self.buffered_bytes.to_le_bytes());
        v.extend_from_slice(&self.slots.to_le_bytes());
        v.extend_from_slice(&self.ooo_next.to_le_bytes());
    }

    pub fn decode(b: &[u8]) -> Option<DirState> {
        if b.len() != DIR_LEN || b[0] > 1 {
            return None;
        }
        Some(DirState {
            init: b[0] == 1,
            expected: u32::from_le_bytes(b[1..5].try_into().ok()?),
            ac: u32::from_le_bytes(b[5..9].try_into().ok()?),
            offset: u64::from_le_bytes(b[9..17].try_into().ok()?),
            buffered: u16::from_le_bytes(b[17..19].try_into().ok()?),
            buffered_bytes: u32::from_le_bytes(b[19..23].try_into().ok()?),
            slots: u16::from_le_bytes(b[23..25].try_into().ok()?),
            ooo_next: u32::from_le_bytes(b[25..29].try_into().ok()?),
        })
    }

    /// The buffer must be read: something buffered may now be deliverable (the expected
    /// sequence number reached the earliest buffered segment).
    pub fn buffer_due(&self) -> bool {
        self.buffered > 0 && !before(self.expected, self.ooo_next)
    }

    /// Account for one segment appended as a new slot.
    pub fn appended(&mut self, seq: u32, len: usize) {
        if self.buffered == 0 || before(seq, self.ooo_next) {
            self.ooo_next = seq;
        }
        self.buffered += 1;
        self.slots += 1;
        self.buffered_bytes += len as u32;
    }

    /// Account for the buffer as rewritten after a delivery: `rest` in one slot (none if empty).
    pub fn rewritten(&mut self, rest: &OooBuffer) {
        self.buffered = rest.segs.len() as u16;
        self.buffered_bytes = rest.bytes() as u32;
        self.slots = (!rest.segs.is_empty()) as u16;
        self.ooo_next = rest.first_seq().unwrap_or(0);
    }
}

/// `a` comes before `b` in sequence space (both within 2^31 of each other).
pub fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// Where a segment (first data byte at `seq`, `len` bytes, plus FIN) falls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// Starts at or before `expected` and brings new bytes (or a new FIN): deliver from `skip`.
    Deliver { skip: usize },
    /// Everything in it was delivered before.
    Old,
    /// Starts after `expected` within `window` bytes: buffer.
    Future,
    /// Starts more than `window` bytes ahead: refuse.
    OutOfWindow,
}

pub fn arrival(expected: u32, seq: u32, len: usize, fin: bool, window: u32) -> Arrival {
    let rel = seq.wrapping_sub(expected) as i32;
    if rel > 0 {
        return if rel as u32 > window {
            Arrival::OutOfWindow
        } else {
            Arrival::Future
        };
    }
    let skip = rel.unsigned_abs() as usize;
    // A FIN occupies the sequence number just after the data.
    if skip < len || (fin && skip == len) {
        Arrival::Deliver { skip }
    } else {
        Arrival::Old
    }
}

/// A buffered out-of-order segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub seq: u32,
    pub fin: bool,
    pub data: Vec<u8>,
}

/// The out-of-order buffer of one direction (kept in the tier under its own key).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OooBuffer {
    pub segs: Vec<Segment>,
}

impl OooBuffer {
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        for s in &self.segs {
            v.extend_from_slice(&s.seq.to_le_bytes());
            v.push(s.fin as u8);
            v.extend_from_slice(&(s.data.len() as u32).to_le_bytes());
            v.extend_from_slice(&s.data);
        }
        v
    }

    pub fn decode(b: &[u8]) -> Option<OooBuffer> {
        let mut segs = Vec::new();
        let mut at = 0;
        while at < b.len() {
            let seq = u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?);
            let fin = match *b.get(at + 4)? {
                0 => false,
                1 => true,
                _ => return None,
            };
            let n = u32::from_le_bytes(b.get(at + 5..at + 9)?.try_into().ok()?) as usize;
            let data = b.get(at + 9..at + 9 + n)?.to_vec();
            at += 9 + n;
            segs.push(Segment { seq, fin, data });
        }
        Some(OooBuffer { segs })
    }

    pub fn bytes(&self) -> usize {
        self.segs.iter().map(|s| s.data.len()).sum()
    }

    /// Start of the earliest segment in sequence space.
    pub fn first_seq(&self) -> Option<u32> {
        self.segs
            .iter()
            .map(|s| s.seq)
            .reduce(|a, b| if before(b, a) { b } else { a })
    }

    /// Add a segment. One with the same start as a buffered one only adds the bytes (and FIN)
    /// past that one's end: the first copy of a byte wins, but a longer copy's tail is kept,
    /// since it was forwarded and the receiver will deliver it. False if nothing was added.
    pub fn insert(&mut self, seg: Segment) -> bool {
        if let Some(s) = self.segs.iter_mut().find(|s| s.seq == seg.seq) {
            if seg.data.len() <= s.data.len() {
                return false;
            }
            s.data.extend_from_slice(&seg.data[s.data.len()..]);
            s.fin = seg.fin;
            return true;
        }
        self.segs.push(seg);
        true
    }

    /// Remove and return the next segment that can be delivered at `expected` (the one starting
    /// earliest at or before it that still brings something new); drop segments entirely old.
    pub fn take_next(&mut self, expected: u32, window: u32) -> Option<(Segment, usize)> {
        loop {
            let (i, skip) = self
                .segs
                .iter()
                .enumerate()
                .filter_map(
                    |(i, s)| match arrival(expected, s.seq, s.data.len(), s.fin, window) {
                        Arrival::Deliver { skip } => Some((i, Some(skip))),
                        Arrival::Old => Some((i, None)),
                        _ => None,
                    },
                )
                .next()?;
            let s = self.segs.swap_remove(i);
            if let Some(skip) = skip {
                return Some((s, skip));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrival_cases_with_wraparound() {
        assert_eq!(
            arrival(100, 100, 10, false, 1000),
            Arrival::Deliver { skip: 0 }
        );
        assert_eq!(
            arrival(100, 95, 10, false, 1000),
            Arrival::Deliver { skip: 5 }
        );
        assert_eq!(arrival(100, 90, 10, false, 1000), Arrival::Old);
        assert_eq!(
            arrival(100, 90, 10, true, 1000),
            Arrival::Deliver { skip: 10 }
        );
        assert_eq!(arrival(100, 110, 10, false, 1000), Arrival::Future);
        assert_eq!(arrival(100, 5000, 10, false, 1000), Arrival::OutOfWindow);
        assert_eq!(arrival(u32::MAX - 2, 3, 4, false, 1000), Arrival::Future);
        assert_eq!(
            arrival(3, u32::MAX - 2, 10, false, 1000),
            Arrival::Deliver { skip: 6 }
        );
        assert_eq!(arrival(100, 100, 0, false, 1000), Arrival::Old);
    }

    /// A longer copy of a buffered segment (same start) adds its tail to the buffer: it is
    /// forwarded, so a tail left out would reach the receiver unscanned (a fuzz input, nfs/fuzz
    /// reasm).
    #[test]
    fn longer_copy_with_the_same_start_keeps_its_tail() {
        let seg = |d: &[u8], fin| Segment {
            seq: 10,
            fin,
            data: d.to_vec(),
        };
        let mut b = OooBuffer::default();
        assert!(b.insert(seg(b"AT", false)));
        assert!(b.insert(seg(b"XXTACK", true)));
        assert_eq!(
            b.segs,
            vec![seg(b"ATTACK", true)],
            "first copy's bytes, longer tail"
        );
        assert_eq!(b.bytes(), 6);
    }

    #[test]
    fn buffer_round_trip_first_copy_wins_and_drains_in_order() {
        let mut b = OooBuffer::default();
        let seg = |seq, d: &[u8]| Segment {
            seq,
            fin: false,
            data: d.to_vec(),
        };
        assert!(b.insert(seg(20, b"cc")));
        assert!(b.insert(seg(10, b"bbbbb")));
        assert!(!b.insert(seg(10, b"XXXXX")));
        assert!(!b.insert(seg(10, b"XX")));
        assert!(b.insert(seg(5, b"aa")));
        assert_eq!(OooBuffer::decode(&b.encode()).unwrap(), b);
        assert_eq!(b.bytes(), 9);
        assert!(
            b.take_next(8, 1000).is_none(),
            "nothing deliverable at 8; the old one dropped"
        );
        assert_eq!(b.segs.len(), 2);
        assert_eq!(b.take_next(10, 1000).unwrap().0.data, b"bbbbb".to_vec());
        assert_eq!(b.segs.len(), 1);
        assert!(b.take_next(15, 1000).is_none());
        assert_eq!(b.take_next(21, 1000).unwrap().1, 1);
        assert!(OooBuffer::decode(&[1, 2, 3]).is_none());
        assert!(DirState::decode(&[0; 5]).is_none());
    }
}
