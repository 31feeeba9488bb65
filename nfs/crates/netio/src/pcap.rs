//! Classic pcap files (libpcap format, Ethernet link type) read and written by our own code.

use crate::{Batch, Device};
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

const MAGIC_US: u32 = 0xa1b2_c3d4;
const MAGIC_NS: u32 = 0xa1b2_3c4d;
const LINKTYPE_ETHERNET: u32 = 1;
const MAX_SNAPLEN: u32 = 262_144;

fn bad(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Reads frames and their timestamps (ns) from a pcap file.
pub struct PcapReader<R: Read> {
    r: R,
    swapped: bool,
    nanos: bool,
    buf: Vec<u8>,
}

impl PcapReader<BufReader<File>> {
    pub fn open(path: &Path) -> io::Result<Self> {
        let f = File::open(path)
            .map_err(|e| io::Error::new(e.kind(), format!("pcap {}: {e}", path.display())))?;
        PcapReader::new(BufReader::new(f))
    }
}

impl<R: Read> PcapReader<R> {
    /// Validate the global header (magic, version, Ethernet link type).
    pub fn new(mut r: R) -> io::Result<Self> {
        let mut h = [0u8; 24];
        r.read_exact(&mut h)
            .map_err(|_| bad("pcap: file shorter than its header".into()))?;
        let m = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let (swapped, nanos) = match m {
            MAGIC_US => (false, false),
            MAGIC_NS => (false, true),
            _ if m.swap_bytes() == MAGIC_US => (true, false),
            _ if m.swap_bytes() == MAGIC_NS => (true, true),
            _ => {
                return Err(bad(format!(
                    "pcap: bad magic 0x{m:08x} (pcapng is not supported)"
                )))
            }
        };
        let rd = |b: &[u8]| {
            let v = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            if swapped {
                v.swap_bytes()
            } else {
                v
            }
        };
        let link = rd(&h[20..24]) & 0x0fff_ffff;
        if link != LINKTYPE_ETHERNET {
            return Err(bad(format!("pcap: link type {link} is not Ethernet (1)")));
        }
        Ok(PcapReader {
            r,
            swapped,
            nanos,
            buf: Vec::new(),
        })
    }

    fn u32_at(&self, b: &[u8]) -> u32 {
        let v = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if self.swapped {
            v.swap_bytes()
        } else {
            v
        }
    }

    /// Next record as (timestamp ns, frame); None at a clean end of file.
    pub fn next_frame(&mut self) -> io::Result<Option<(u64, &[u8])>> {
        let mut h = [0u8; 16];
        let mut got = 0;
        while got < 16 {
            let n = self.r.read(&mut h[got..])?;
            if n == 0 {
                if got == 0 {
                    return Ok(None);
                }
                return Err(bad("pcap: truncated record header".into()));
            }
            got += n;
        }
        let sec = self.u32_at(&h[0..4]) as u64;
        let frac = self.u32_at(&h[4..8]) as u64;
        let caplen = self.u32_at(&h[8..12]);
        if caplen > MAX_SNAPLEN {
            return Err(bad(format!(
                "pcap: record length {caplen} exceeds {MAX_SNAPLEN}"
            )));
        }
        self.buf.resize(caplen as usize, 0);
        self.r
            .read_exact(&mut self.buf)
            .map_err(|_| bad("pcap: truncated record".into()))?;
        let ts = sec * 1_000_000_000 + if self.nanos { frac } else { frac * 1000 };
        Ok(Some((ts, &self.buf)))
    }
}

/// Writes frames to a pcap file (microsecond timestamps, Ethernet).
pub struct PcapWriter<W: Write> {
    w: W,
}

impl PcapWriter<BufWriter<File>> {
    pub fn create(path: &Path) -> io::Result<Self> {
        let f = File::create(path)
            .map_err(|e| io::Error::new(e.kind(), format!("pcap {}: {e}", path.display())))?;
        PcapWriter::new(BufWriter::new(f))
    }
}

impl<W: Write> PcapWriter<W> {
    pub fn new(mut w: W) -> io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&MAGIC_US.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&[0; 8]);
        h.extend_from_slice(&MAX_SNAPLEN.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        w.write_all(&h)?;
        Ok(PcapWriter { w })
    }

    pub fn write_frame(&mut self, ts_ns: u64, frame: &[u8]) -> io::Result<()> {
        let sec = (ts_ns / 1_000_000_000) as u32;
        let usec = ((ts_ns % 1_000_000_000) / 1000) as u32;
        let len = frame.len() as u32;
        self.w.write_all(&sec.to_le_bytes())?;
        self.w.write_all(&usec.to_le_bytes())?;
        self.w.write_all(&len.to_le_bytes())?;
        self.w.write_all(&len.to_le_bytes())?;
        self.w.write_all(frame)
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    pub fn into_inner(self) -> W {
        self.w
    }
}

/// Read all frames of a pcap file (tests, tools).
pub fn read_all(path: &Path) -> io::Result<Vec<(u64, Vec<u8>)>> {
    let mut r = PcapReader::open(path)?;
    let mut out = vec![];
    while let Some((ts, f)) = r.next_frame()? {
        out.push((ts, f.to_vec()));
    }
    Ok(out)
}

/// Write frames to a pcap file (tests, tools).
pub fn write_all(path: &Path, frames: &[(u64, Vec<u8>)]) -> io::Result<()> {
    let mut w = PcapWriter::create(path)?;
    for (ts, f) in frames {
        w.write_frame(*ts, f)?;
    }
    w.flush()
}

/// A device reading from a pcap file and/or writing to one.
pub struct PcapDevice {
    reader: Option<PcapReader<BufReader<File>>>,
    writer: Option<PcapWriter<BufWriter<File>>>,
    done: bool,
    desc: String,
}

impl PcapDevice {
    /// `input` None = nothing to read (exhausted at once); `output` None = sent frames are counted
    /// and discarded.
    pub fn open(input: Option<&Path>, output: Option<&Path>) -> io::Result<PcapDevice> {
        let reader = input.map(PcapReader::open).transpose()?;
        let writer = output.map(PcapWriter::create).transpose()?;
        Ok(PcapDevice {
            done: reader.is_none(),
            reader,
            writer,
            desc: format!(
                "pcap in={} out={}",
                input.map_or("-".into(), |p| p.display().to_string()),
                output.map_or("-".into(), |p| p.display().to_string())
            ),
        })
    }
}

impl Device for PcapDevice {
    fn describe(&self) -> String {
        self.desc.clone()
    }

    fn recv(&mut self, batch: &mut Batch, _now_ns: u64) -> io::Result<usize> {
        batch.clear();
        let Some(r) = self.reader.as_mut() else {
            return Ok(0);
        };
        while !batch.is_full() {
            match r.next_frame()? {
                Some((ts, f)) => {
                    batch.push(f, ts);
                }
                None => {
                    self.done = true;
                    break;
                }
            }
        }
        Ok(batch.len())
    }

    fn send(&mut self, batch: &Batch, keep: &[bool], _now_ns: u64) -> io::Result<usize> {
        let mut n = 0;
        for i in 0..batch.len() {
            if keep.get(i).copied().unwrap_or(false) {
                if let Some(w) = self.writer.as_mut() {
                    w.write_frame(batch.ts_ns(i), batch.frame(i))?;
                }
                n += 1;
            }
        }
        Ok(n)
    }

    fn exhausted(&self) -> bool {
        self.done
    }

    /// A file's frames all "wait" until read; the reader does not count ahead, so 1 until the
    /// end was seen (never 0 with a frame left).
    fn rx_counts(&mut self) -> io::Result<crate::RxCounts> {
        Ok(crate::RxCounts {
            waiting: Some(u64::from(!self.done)),
            dropped: Some(0),
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.writer.as_mut() {
            Some(w) => w.flush(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_validation() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        w.write_frame(1_500_000_000_123_456_000, &[1, 2, 3])
            .unwrap();
        w.write_frame(7_000, &[9; 60]).unwrap();
        let bytes = w.into_inner();
        let mut r = PcapReader::new(&bytes[..]).unwrap();
        assert_eq!(
            r.next_frame().unwrap(),
            Some((1_500_000_000_123_456_000, &[1u8, 2, 3][..]))
        );
        assert_eq!(r.next_frame().unwrap().unwrap().1.len(), 60);
        assert_eq!(r.next_frame().unwrap(), None);
        // Truncated record, bad magic, short header: errors, not panics.
        assert!(PcapReader::new(&bytes[..bytes.len() - 1])
            .unwrap()
            .next_frame()
            .is_ok());
        let mut r = PcapReader::new(&bytes[..bytes.len() - 1]).unwrap();
        r.next_frame().unwrap();
        assert!(r.next_frame().is_err());
        assert!(PcapReader::new(&[0u8; 24][..]).is_err());
        assert!(PcapReader::new(&bytes[..10]).is_err());
        let mut huge = bytes.clone();
        huge[24 + 8..24 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(PcapReader::new(&huge[..]).unwrap().next_frame().is_err());
    }
}
