//! Test and benchmark harness: run an NF over frames in memory and record each input's fate;
//! load Suricata-verify-style case directories (`packets.json`, `config.json`, `expected.json`).

use crate::config::RuntimeOptions;
use crate::runtime::{Runtime, DEFAULT_PIPELINE_DEPTH};
use crate::NetworkFunction;
use flowstore::{FlowStore, KeySpace};
use netio::{Batch, Device};
use packet::build::{FrameSpec, Transport};
use serde_json::Value;
use std::io;
use std::path::Path;

/// Feeds frames in order and records, per input frame, the frame sent (None = dropped).
pub struct RecordingDevice {
    input: Vec<(u64, Vec<u8>)>,
    pos: usize,
    /// First input index of each batch received and not yet sent (batches leave in order;
    /// a pipelined runtime receives several before sending the first).
    batch_starts: std::collections::VecDeque<usize>,
    /// Output per input index.
    pub out: Vec<Option<Vec<u8>>>,
    /// Frames per receive, in turn (empty: full batches), and receives so far.
    sizes: Vec<usize>,
    receives: usize,
}

impl RecordingDevice {
    pub fn new(input: Vec<(u64, Vec<u8>)>) -> RecordingDevice {
        let n = input.len();
        RecordingDevice {
            input,
            pos: 0,
            batch_starts: std::collections::VecDeque::new(),
            out: vec![None; n],
            sizes: Vec::new(),
            receives: 0,
        }
    }

    /// Receives take at most `sizes[k % len]` frames (k = the receive's number), as a port below
    /// saturation returns what has arrived: batches smaller than full ones (a 0 returns nothing).
    pub fn trickle(mut self, sizes: Vec<usize>) -> RecordingDevice {
        self.sizes = sizes;
        self
    }
}

impl Device for RecordingDevice {
    fn describe(&self) -> String {
        "recording".into()
    }

    fn recv(&mut self, batch: &mut Batch, _now_ns: u64) -> io::Result<usize> {
        batch.clear();
        let start = self.pos;
        let cap = match self.sizes.len() {
            0 => usize::MAX,
            n => self.sizes[self.receives % n],
        };
        self.receives += 1;
        while !batch.is_full() && batch.len() < cap && self.pos < self.input.len() {
            let (ts, f) = &self.input[self.pos];
            batch.push(f, *ts);
            self.pos += 1;
        }
        if !batch.is_empty() {
            self.batch_starts.push_back(start);
        }
        Ok(batch.len())
    }

    fn send(&mut self, batch: &Batch, keep: &[bool], _now_ns: u64) -> io::Result<usize> {
        let start = self.batch_starts.pop_front().unwrap_or(self.pos);
        let mut n = 0;
        for (i, f) in batch.iter().enumerate() {
            if keep.get(i).copied().unwrap_or(false) {
                self.out[start + i] = Some(f.to_vec());
                n += 1;
            }
        }
        Ok(n)
    }

    fn exhausted(&self) -> bool {
        self.pos >= self.input.len()
    }
}

/// Run `nf` on `frames` (timestamp ns, frame) with batches of `batch_size`; timers fire by packet
/// time. Returns the output per input frame.
pub fn run_frames(
    nf: Box<dyn NetworkFunction>,
    store: Box<dyn FlowStore>,
    nf_id: &str,
    frames: &[(u64, Vec<u8>)],
    batch_size: usize,
) -> Vec<Option<Vec<u8>>> {
    run_frames_full(nf, store, nf_id, frames, batch_size).0
}

/// Output per input frame, plus the NF and store afterwards (to inspect state and counters).
pub type RunResult = (
    Vec<Option<Vec<u8>>>,
    Box<dyn NetworkFunction>,
    Box<dyn FlowStore>,
);

/// A runtime over a [`RecordingDevice`] fed `frames`, initialised: batches of `batch_size`, timers
/// every `timer_interval_ms` (of packet time), fail closed, no owner cache.
pub fn recording_runtime(
    nf: Box<dyn NetworkFunction>,
    store: Box<dyn FlowStore>,
    nf_id: &str,
    frames: Vec<(u64, Vec<u8>)>,
    batch_size: usize,
    timer_interval_ms: u64,
) -> Runtime<RecordingDevice> {
    let opts = RuntimeOptions {
        batch_size,
        fail_mode: crate::FailMode::Closed,
        timer_interval_ms,
        owner_cache: false,
    };
    let mut rt = Runtime::new(
        nf,
        store,
        RecordingDevice::new(frames),
        KeySpace::new(nf_id).unwrap(),
        opts,
    );
    rt.init().expect("init");
    rt
}

/// Like [`run_frames`], returning the NF and the store too (default pipeline depth).
pub fn run_frames_full(
    nf: Box<dyn NetworkFunction>,
    store: Box<dyn FlowStore>,
    nf_id: &str,
    frames: &[(u64, Vec<u8>)],
    batch_size: usize,
) -> RunResult {
    run_frames_depth(nf, store, nf_id, frames, batch_size, DEFAULT_PIPELINE_DEPTH)
}

/// Like [`run_frames_full`] with the runtime's pipeline depth set (batches in flight at once on
/// a pipelined store; 1 = batch by batch).
pub fn run_frames_depth(
    nf: Box<dyn NetworkFunction>,
    store: Box<dyn FlowStore>,
    nf_id: &str,
    frames: &[(u64, Vec<u8>)],
    batch_size: usize,
    depth: usize,
) -> RunResult {
    let mut rt = recording_runtime(nf, store, nf_id, frames.to_vec(), batch_size, 1);
    rt.set_pipeline_depth(depth);
    rt.run(
        crate::runtime::TimeSource::Packets,
        &std::sync::atomic::AtomicBool::new(false),
    )
    .expect("run");
    let (nf, store, dev) = rt.into_parts();
    (dev.out, nf, store)
}

/// Two instances (each with its own NF object and store connection, same `nf_id`) process the
/// frames alternately, one packet each (the asymmetric-routing case). Returns output per frame.
pub fn run_alternating(
    mut make: impl FnMut() -> (Box<dyn NetworkFunction>, Box<dyn FlowStore>),
    nf_id: &str,
    frames: &[(u64, Vec<u8>)],
) -> Vec<Option<Vec<u8>>> {
    let mut inst: Vec<Runtime<RecordingDevice>> = (0..2)
        .map(|_| {
            let (nf, store) = make();
            recording_runtime(nf, store, nf_id, vec![], 1, 1)
        })
        .collect();
    let mut out = Vec::with_capacity(frames.len());
    for (i, (ts, f)) in frames.iter().enumerate() {
        let rt = &mut inst[i % 2];
        *rt.device_mut() = RecordingDevice::new(vec![(*ts, f.clone())]);
        rt.step(*ts).expect("step");
        let _ = rt.fire_timers(*ts);
        out.push(rt.device_mut().out.pop().flatten());
    }
    out
}

/// One packet of a case's `packets.json`: `{"t_ms": 0, "src": "10.0.0.1", "dst": "10.0.0.2",
/// "sport": 1000, "dport": 80, "proto": "tcp"|"udp", "flags": "S"|"SA"|"A"|"FA"|"R"|"PA",
/// "seq": 0, "ack": 0, "payload": "text" (or "payload_hex": "16 03 01"), "vlans": [10]}`.
pub fn frame_from_json(v: &Value) -> Result<(u64, Vec<u8>), String> {
    let o = crate::config::object(v, "packet")?;
    let ip = |k: &str| -> Result<std::net::IpAddr, String> {
        o.get(k)
            .and_then(|s| s.as_str())
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("packet: {k} must be an IP address"))
    };
    let num = |k: &str, d: u64| {
        o.get(k)
            .map_or(Some(d), |n| n.as_u64())
            .ok_or_else(|| format!("packet: {k} must be a number"))
    };
    let flags_s = o.get("flags").and_then(|f| f.as_str()).unwrap_or("");
    let mut flags = 0u8;
    for c in flags_s.chars() {
        flags |= match c {
            'S' => packet::TCP_SYN,
            'A' => packet::TCP_ACK,
            'F' => packet::TCP_FIN,
            'R' => packet::TCP_RST,
            'P' => packet::TCP_PSH,
            _ => return Err(format!("packet: unknown TCP flag {c:?}")),
        };
    }
    let transport = match o.get("proto").and_then(|p| p.as_str()).unwrap_or("tcp") {
        "tcp" => Transport::Tcp {
            seq: num("seq", 0)? as u32,
            ack: num("ack", 0)? as u32,
            flags,
        },
        "udp" => Transport::Udp,
        p => {
            return Err(format!(
                "packet: proto {p:?} not supported by the case format"
            ))
        }
    };
    let vlans: Vec<u16> = match o.get("vlans") {
        None => vec![],
        Some(a) => a
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_u64())
                    .map(|x| x as u16)
                    .collect()
            })
            .ok_or("packet: vlans must be a list")?,
    };
    let payload = match (o.get("payload"), o.get("payload_hex")) {
        (Some(_), Some(_)) => return Err("packet: give payload or payload_hex, not both".into()),
        (_, Some(h)) => h
            .as_str()
            .and_then(crate::config::parse_hex)
            .ok_or("packet: payload_hex must be pairs of hex digits")?,
        (p, None) => p.and_then(|p| p.as_str()).unwrap_or("").as_bytes().to_vec(),
    };
    let mut spec = FrameSpec::new(
        ip("src")?,
        ip("dst")?,
        num("sport", 0)? as u16,
        num("dport", 0)? as u16,
        transport,
    );
    spec.vlans = &vlans;
    spec.payload = &payload;
    let f = spec.build();
    Ok((num("t_ms", 0)? * 1_000_000, f))
}

/// A case directory: `config.json`, `packets.json` (list of packets), `expected.json`
/// (`{"verdicts": ["forward"|"drop", ...]}` and optional NF-specific fields).
pub struct Case {
    pub config: Value,
    pub frames: Vec<(u64, Vec<u8>)>,
    pub expected: Value,
}

pub fn load_case(dir: &Path) -> Result<Case, String> {
    let config = crate::config::load(&dir.join("config.json"))?;
    let pk = std::fs::read_to_string(dir.join("packets.json"))
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let pk: Value = serde_json::from_str(&pk).map_err(|e| format!("packets.json: {e}"))?;
    let frames = pk
        .as_array()
        .ok_or("packets.json must be a list")?
        .iter()
        .map(frame_from_json)
        .collect::<Result<_, _>>()?;
    let expected = crate::config::load(&dir.join("expected.json"))?;
    Ok(Case {
        config,
        frames,
        expected,
    })
}

/// Verdicts as strings for comparison with `expected.json`.
pub fn verdicts(out: &[Option<Vec<u8>>]) -> Vec<&'static str> {
    out.iter()
        .map(|o| if o.is_some() { "forward" } else { "drop" })
        .collect()
}
