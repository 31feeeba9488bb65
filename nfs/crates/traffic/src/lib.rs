//! Traffic tools for tests and benchmarks: a generator of N flows (TCP-like with handshake and
//! FIN, or UDP) whose data packets carry a marker with run id, flow, sequence number and send
//! timestamp, and a sink that reports loss, duplicates, reordering and latency percentiles.

pub mod esp;
pub mod gen;
pub mod sink;

/// Marker at the start of each data payload.
pub const MAGIC: &[u8; 4] = b"UNOT";
/// Marker length: magic, run id (u32), flow (u32), seq (u32), send time ns (u64).
pub const MARKER_LEN: usize = 24;

/// Fields of a data packet's marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Marker {
    pub run: u32,
    pub flow: u32,
    pub seq: u32,
    pub ts_ns: u64,
}

impl Marker {
    pub fn write(&self, out: &mut [u8]) {
        out[..4].copy_from_slice(MAGIC);
        out[4..8].copy_from_slice(&self.run.to_be_bytes());
        out[8..12].copy_from_slice(&self.flow.to_be_bytes());
        out[12..16].copy_from_slice(&self.seq.to_be_bytes());
        out[16..24].copy_from_slice(&self.ts_ns.to_be_bytes());
    }

    /// The marker at the start of `payload`, if any.
    pub fn read(payload: &[u8]) -> Option<Marker> {
        if payload.len() < MARKER_LEN || &payload[..4] != MAGIC {
            return None;
        }
        let u32_at = |i: usize| u32::from_be_bytes(payload[i..i + 4].try_into().expect("4"));
        Some(Marker {
            run: u32_at(4),
            flow: u32_at(8),
            seq: u32_at(12),
            ts_ns: u64::from_be_bytes(payload[16..24].try_into().expect("8")),
        })
    }
}
