//! Packet I/O for the UNO network functions: batches in, batches out, time passed in.
//!
//! Backends: [`afpacket::AfPacket`] (AF_PACKET TPACKET_V3 mmap RX ring on an interface),
//! [`pcap::PcapDevice`] (pcap file in/out, for tests and benchmarks), [`mem::MemDevice`]
//! (frames from memory, for benchmarks) and [`fault::FaultyDevice`] (wraps any device and drops,
//! duplicates or reorders packets deterministically), [`afxdp::AfXdp`] (AF_XDP copy mode; see
//! [`open_port`] for the fallback to AF_PACKET).

pub mod afpacket;
pub mod afxdp;
pub mod fault;
pub mod mem;
pub mod pcap;

use std::io;

/// A batch of frames with timestamps. Buffers are reused across batches: `clear` keeps them.
#[derive(Debug, Clone)]
pub struct Batch {
    bufs: Vec<Vec<u8>>,
    ts_ns: Vec<u64>,
    len: usize,
    cap: usize,
}

impl Batch {
    /// An empty batch that holds at most `cap` frames (at least 1).
    pub fn with_capacity(cap: usize) -> Batch {
        let cap = cap.max(1);
        Batch {
            bufs: Vec::with_capacity(cap),
            ts_ns: Vec::with_capacity(cap),
            len: 0,
            cap,
        }
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Maximum frames per batch.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    pub fn is_full(&self) -> bool {
        self.len >= self.cap
    }

    /// Append a copy of `frame`; returns false (nothing appended) when full.
    pub fn push(&mut self, frame: &[u8], ts_ns: u64) -> bool {
        if self.is_full() {
            return false;
        }
        if self.len == self.bufs.len() {
            self.bufs.push(Vec::with_capacity(frame.len().max(128)));
            self.ts_ns.push(0);
        }
        let b = &mut self.bufs[self.len];
        b.clear();
        b.extend_from_slice(frame);
        self.ts_ns[self.len] = ts_ns;
        self.len += 1;
        true
    }

    /// Frame `i` (panics if `i >= len`).
    pub fn frame(&self, i: usize) -> &[u8] {
        assert!(i < self.len);
        &self.bufs[i]
    }

    /// Mutable frame `i`, resizable (e.g. for encapsulation).
    pub fn frame_mut(&mut self, i: usize) -> &mut Vec<u8> {
        assert!(i < self.len);
        &mut self.bufs[i]
    }

    /// Timestamp of frame `i` in ns (capture time or receive time).
    pub fn ts_ns(&self, i: usize) -> u64 {
        assert!(i < self.len);
        self.ts_ns[i]
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.bufs[..self.len].iter().map(|b| b.as_slice())
    }
}

/// A port's own receive accounting, read at one instant ([`Device::rx_counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxCounts {
    /// Frames that reached the port and were not taken by `recv` yet. `Some(0)`: none (exact at
    /// the time of the call); `Some(n)`: frames wait (AF_PACKET, AF_XDP, memory: exactly n; a
    /// pcap file: 1 until its end was seen); `None`: the backend cannot tell.
    pub waiting: Option<u64>,
    /// Frames the port dropped since it opened because its receive ring was full (or no buffer
    /// was free); `None`: not counted by this backend.
    pub dropped: Option<u64>,
}

/// A port an NF reads from and writes to.
pub trait Device: Send {
    /// Human-readable description for logs and stats.
    fn describe(&self) -> String;

    /// Receive up to `batch.capacity()` frames into `batch` (cleared first). Returns the number
    /// received; 0 means nothing arrived within the backend's poll timeout. `now_ns` stamps frames
    /// when the backend has no timestamp of its own.
    fn recv(&mut self, batch: &mut Batch, now_ns: u64) -> io::Result<usize>;

    /// Like `recv`, but never waits: 0 when nothing is ready now. Used while batches are in
    /// flight to the state tier. Sources that never wait (memory, pcap) need not implement it.
    fn recv_nowait(&mut self, batch: &mut Batch, now_ns: u64) -> io::Result<usize> {
        self.recv(batch, now_ns)
    }

    /// Transmit frames `i` of `batch` where `keep[i]` is true. Returns the number sent.
    fn send(&mut self, batch: &Batch, keep: &[bool], now_ns: u64) -> io::Result<usize>;

    /// True once a finite source (pcap, memory) has delivered everything.
    fn exhausted(&self) -> bool {
        false
    }

    /// What waits in the port's receive ring and what it dropped, as the kernel (or the source)
    /// counts it now: unlike `recv`, this also sees frames the kernel has not handed over yet
    /// (AF_PACKET: in a TPACKET_V3 block that is not retired). A move's drain asks it before it
    /// declares the port empty. Default: nothing known.
    fn rx_counts(&mut self) -> io::Result<RxCounts> {
        Ok(RxCounts::default())
    }

    /// Wait at most `ms` in `recv` from now on (at least 1 ms, at most the backend's own bound),
    /// or the backend's own bound again (None). A drain shortens it so its answer is not late by a
    /// whole poll period; sources that never wait ignore it.
    fn set_wait_ms(&mut self, _ms: Option<u32>) {}

    /// Flush buffered output (pcap writer).
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The poll timeout of a live port: its own `bound`, shortened to `set` ms (at least 1) by
/// [`Device::set_wait_ms`].
pub(crate) fn wait_bound(bound: i32, set: Option<u32>) -> i32 {
    match set {
        Some(ms) => (ms.max(1).min(i32::MAX as u32) as i32).min(bound),
        None => bound,
    }
}

/// Open a live port: AF_PACKET TPACKET_V3 on `iface`, or with `xdp` AF_XDP (copy mode, generic
/// XDP, queue 0) where the kernel allows it; if it does not, says why on stderr and uses
/// AF_PACKET.
pub fn open_port(iface: &str, xdp: bool, batch: usize) -> io::Result<Box<dyn Device>> {
    if xdp {
        match afxdp::AfXdp::open(iface) {
            Ok(d) => return Ok(Box::new(d)),
            Err(e) => eprintln!(
                "netio: AF_XDP on {iface} not available ({e}); using AF_PACKET TPACKET_V3"
            ),
        }
    }
    Ok(Box::new(afpacket::AfPacket::open(
        iface,
        afpacket::RingConfig::for_batch(batch),
    )?))
}

impl<T: Device + ?Sized> Device for Box<T> {
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn recv(&mut self, batch: &mut Batch, now_ns: u64) -> io::Result<usize> {
        (**self).recv(batch, now_ns)
    }
    fn recv_nowait(&mut self, batch: &mut Batch, now_ns: u64) -> io::Result<usize> {
        (**self).recv_nowait(batch, now_ns)
    }
    fn send(&mut self, batch: &Batch, keep: &[bool], now_ns: u64) -> io::Result<usize> {
        (**self).send(batch, keep, now_ns)
    }
    fn exhausted(&self) -> bool {
        (**self).exhausted()
    }
    fn rx_counts(&mut self) -> io::Result<RxCounts> {
        (**self).rx_counts()
    }
    fn set_wait_ms(&mut self, ms: Option<u32>) {
        (**self).set_wait_ms(ms)
    }
    fn flush(&mut self) -> io::Result<()> {
        (**self).flush()
    }
}

#[cfg(test)]
mod tests {
    use super::wait_bound;

    #[test]
    fn a_shortened_wait_stays_within_the_ports_bound() {
        assert_eq!(wait_bound(10, None), 10);
        assert_eq!(wait_bound(10, Some(3)), 3);
        assert_eq!(wait_bound(10, Some(0)), 1); // never a busy poll
        assert_eq!(wait_bound(10, Some(400)), 10); // never longer than the port's own bound
    }
}
