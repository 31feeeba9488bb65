//! Test and benchmark harness: run an NF over frames in memory and record each input's fate;
//! load Suricata-verify-style case directories (`nfs/tests-data/<nf>/<case>/`): `config.json`
//! with `packets.json` and `expected.json` (a readable packet list), or with `input.pcap` and
//! `expected.pcap` (the frames the NF must send, compared packet by packet: [`compare_frames`])
//! and optionally `expected.json`. [`pcap_cases`] generates the pcap cases.

pub mod gated;
pub mod pcap_cases;

use crate::config::RuntimeOptions;
use crate::runtime::{Runtime, DEFAULT_PIPELINE_DEPTH};
use crate::NetworkFunction;
use flowstore::{FlowStore, KeySpace};
use netio::{Batch, Device};
use packet::build::{FrameSpec, Transport};
use packet::Parsed;
use serde_json::Value;
use std::io;
use std::path::{Path, PathBuf};

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

/// `instances` instances (each with its own NF object and store connection, same `nf_id`) take
/// the frames in turn, one packet each, and the one taking a packet first fires the timers due
/// at its time (as a running NF's timer tick would have): what a flow idle past its timeout
/// meets. With one instance: batch by batch, timers before every packet. Returns output per frame.
pub fn run_ticking(
    mut make: impl FnMut() -> (Box<dyn NetworkFunction>, Box<dyn FlowStore>),
    nf_id: &str,
    frames: &[(u64, Vec<u8>)],
    instances: usize,
) -> Vec<Option<Vec<u8>>> {
    let mut inst: Vec<Runtime<RecordingDevice>> = (0..instances.max(1))
        .map(|_| {
            let (nf, store) = make();
            recording_runtime(nf, store, nf_id, vec![], 1, 1)
        })
        .collect();
    let n = inst.len();
    let mut out = Vec::with_capacity(frames.len());
    for (i, (ts, f)) in frames.iter().enumerate() {
        let rt = &mut inst[i % n];
        rt.fire_timers(*ts).expect("timers");
        *rt.device_mut() = RecordingDevice::new(vec![(*ts, f.clone())]);
        rt.step(*ts).expect("step");
        out.push(rt.device_mut().out.pop().flatten());
    }
    out
}

/// Feed `frames` to `rt` one batch after another, the timers due before each batch fired first
/// (as a running NF's tick would); the output per frame. The runtime (its NF object, counters
/// and store) stays, so a test can change its config between two feeds ([`reconfigure`]).
pub fn feed(
    rt: &mut Runtime<RecordingDevice>,
    frames: Vec<(u64, Vec<u8>)>,
) -> Vec<Option<Vec<u8>>> {
    *rt.device_mut() = RecordingDevice::new(frames);
    loop {
        let d = rt.device();
        let Some((ts, _)) = d.input.get(d.pos) else {
            break;
        };
        let ts = *ts;
        rt.fire_timers(ts).expect("timers");
        rt.step(ts).expect("step");
    }
    std::mem::take(&mut rt.device_mut().out)
}

/// Give `rt` the config `cfg` as `PUT /config` does: through its control channel, answered by
/// the runtime between two batches. The answer (or the refusal with its HTTP status).
pub fn reconfigure<D: Device>(
    rt: &mut Runtime<D>,
    cfg: &Value,
) -> Result<crate::control::Reply, crate::control::ControlError> {
    let h = rt.control_handle();
    let cfg = cfg.clone();
    std::thread::scope(|s| {
        let call = s.spawn(move || {
            h.call(
                crate::control::Request::Reconfigure(cfg),
                std::time::Duration::from_secs(30),
            )
        });
        while !call.is_finished() {
            rt.serve_control(0).expect("serve control");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        call.join().expect("control call")
    })
}

/// TCP flags and their letters in the case formats.
const FLAG_LETTERS: [(u8, char); 5] = [
    (packet::TCP_SYN, 'S'),
    (packet::TCP_ACK, 'A'),
    (packet::TCP_FIN, 'F'),
    (packet::TCP_RST, 'R'),
    (packet::TCP_PSH, 'P'),
];

/// TCP flags from letters (`"SA"`: SYN and ACK).
pub fn tcp_flags(letters: &str) -> Result<u8, String> {
    letters.chars().try_fold(0, |acc, c| {
        FLAG_LETTERS
            .iter()
            .find(|(_, l)| *l == c)
            .map(|(b, _)| acc | b)
            .ok_or_else(|| format!("unknown TCP flag {c:?}"))
    })
}

/// The letters of TCP flags `f` (S, A, F, R, P).
pub fn flag_letters(f: u8) -> String {
    FLAG_LETTERS
        .iter()
        .filter(|(b, _)| f & b != 0)
        .map(|(_, c)| *c)
        .collect()
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
    let flags = tcp_flags(o.get("flags").and_then(|f| f.as_str()).unwrap_or(""))
        .map_err(|e| format!("packet: {e}"))?;
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

/// `nfs/tests-data`: one folder per NF, one case directory in it per case.
pub fn tests_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests-data")
}

/// How a case gives its packets and what must come out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaseFormat {
    /// `packets.json` (a readable packet list, [`frame_from_json`]) and `expected.json`.
    Json,
    /// `input.pcap` and `expected.pcap` (the frames sent, in order), `expected.json` optional.
    Pcap,
}

impl CaseFormat {
    /// The format of the case directory `dir` (None: not a case).
    pub fn of(dir: &Path) -> Option<CaseFormat> {
        if dir.join("input.pcap").is_file() {
            Some(CaseFormat::Pcap)
        } else if dir.join("packets.json").is_file() {
            Some(CaseFormat::Json)
        } else {
            None
        }
    }
}

/// The case directories of `nf` in `format`, sorted by name.
pub fn case_dirs(nf: &str, format: CaseFormat) -> Vec<PathBuf> {
    let root = tests_data().join(nf);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.expect("read_dir entry").path())
        .filter(|d| CaseFormat::of(d) == Some(format))
        .collect();
    v.sort();
    v
}

/// The case `name` of `nf` (panics, naming it, if it does not load).
pub fn case(nf: &str, name: &str) -> Case {
    let dir = tests_data().join(nf).join(name);
    load_case(&dir).unwrap_or_else(|e| panic!("case {}: {e}", dir.display()))
}

/// A case directory: `config.json`, the input frames and what must come out: `expected.json`
/// (`{"verdicts": ["forward"|"drop", ...]}` and optional NF-specific fields; `{}` when a pcap
/// case has none) and, for a pcap case, the frames the NF sends.
pub struct Case {
    pub config: Value,
    pub frames: Vec<(u64, Vec<u8>)>,
    pub expected: Value,
    /// `expected.pcap` of a pcap case: the frames sent, in order.
    pub expected_out: Option<Vec<(u64, Vec<u8>)>>,
}

pub fn load_case(dir: &Path) -> Result<Case, String> {
    let format = CaseFormat::of(dir)
        .ok_or_else(|| format!("{}: neither packets.json nor input.pcap", dir.display()))?;
    let config = crate::config::load(&dir.join("config.json"))?;
    let pcap = |name: &str| {
        netio::pcap::read_all(&dir.join(name)).map_err(|e| format!("{}: {e}", dir.display()))
    };
    let (frames, expected_out) = match format {
        CaseFormat::Json => {
            let pk = std::fs::read_to_string(dir.join("packets.json"))
                .map_err(|e| format!("{}: {e}", dir.display()))?;
            let pk: Value = serde_json::from_str(&pk).map_err(|e| format!("packets.json: {e}"))?;
            let frames = pk
                .as_array()
                .ok_or("packets.json must be a list")?
                .iter()
                .map(frame_from_json)
                .collect::<Result<_, _>>()?;
            (frames, None)
        }
        CaseFormat::Pcap => (pcap("input.pcap")?, Some(pcap("expected.pcap")?)),
    };
    let expected = if format == CaseFormat::Pcap && !dir.join("expected.json").exists() {
        Value::Object(Default::default())
    } else {
        crate::config::load(&dir.join("expected.json"))?
    };
    Ok(Case {
        config,
        frames,
        expected,
        expected_out,
    })
}

/// Verdicts as strings for comparison with `expected.json`.
pub fn verdicts(out: &[Option<Vec<u8>>]) -> Vec<&'static str> {
    out.iter()
        .map(|o| if o.is_some() { "forward" } else { "drop" })
        .collect()
}

/// Check a run against a JSON case's `verdicts` and its `rewritten` entries (`{"index", "src",
/// "sport", "dst", "dport"}`: a forwarded packet's addresses and ports after the NF, its
/// checksums valid). `what` names the run in failures.
pub fn check_rewrites(out: &[Option<Vec<u8>>], expected: &Value, what: &str) {
    let want: Vec<String> = serde_json::from_value(expected["verdicts"].clone()).unwrap();
    assert_eq!(verdicts(out), want, "{what}");
    for r in expected["rewritten"].as_array().unwrap() {
        let i = r["index"].as_u64().unwrap() as usize;
        let f = out[i].as_ref().unwrap();
        assert!(
            packet::build::checksums_valid(f),
            "{what}: checksums of packet {i}"
        );
        let p = Parsed::new_checked(f).unwrap();
        let got = (
            p.src.to_string(),
            p.ports().0,
            p.dst.to_string(),
            p.ports().1,
        );
        let want = (
            r["src"].as_str().unwrap().to_string(),
            r["sport"].as_u64().unwrap() as u16,
            r["dst"].as_str().unwrap().to_string(),
            r["dport"].as_u64().unwrap() as u16,
        );
        assert_eq!(got, want, "{what}: packet {i}");
    }
}

/// A directory for a test's files, removed with them when dropped (also when the test fails).
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh `unonfs-<tag>-<pid>` in the system's temp directory.
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("unonfs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One line about a frame: addresses, ports, protocol, TCP flags, length, checksums.
pub fn describe_frame(f: &[u8]) -> String {
    match Parsed::new_checked(f) {
        Ok(p) => {
            let (sp, dp) = p.ports();
            let vlans = &p.vlans[..p.vlan_count as usize];
            let flags = if p.proto == packet::PROTO_TCP {
                format!(" [{}]", flag_letters(p.tcp_flags()))
            } else {
                String::new()
            };
            let sums = if packet::build::checksums_valid(f) {
                "valid"
            } else {
                "BAD"
            };
            format!(
                "{}:{sp} -> {}:{dp} proto {}{flags}{} payload {} B, {} B, checksums {sums}",
                p.src,
                p.dst,
                p.proto,
                if vlans.is_empty() {
                    String::new()
                } else {
                    format!(" vlans {vlans:?}")
                },
                p.payload_len,
                f.len(),
            )
        }
        Err(e) => format!("{} B, does not parse ({e:?})", f.len()),
    }
}

/// Hex of `f[from..to]` (clamped), bytes separated by spaces.
fn hex_window(f: &[u8], from: usize, to: usize) -> String {
    let to = to.min(f.len());
    let from = from.min(to);
    f[from..to]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Compare the frames an NF sent with those expected, packet by packet. Err: which packet
/// differs (or is missing or extra), the fields of both, the first differing byte and the bytes
/// around it.
pub fn compare_frames(got: &[Vec<u8>], want: &[Vec<u8>]) -> Result<(), String> {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g == w {
            continue;
        }
        let at = g
            .iter()
            .zip(w.iter())
            .position(|(a, b)| a != b)
            .unwrap_or(g.len().min(w.len()));
        let (from, to) = (at.saturating_sub(8), at + 8);
        return Err(format!(
            "sent packet {i} differs from the expected one at byte {at}:\n  want: {}\n  got:  {}\n  \
             want bytes {from}..: {}\n  got bytes  {from}..: {}",
            describe_frame(w),
            describe_frame(g),
            hex_window(w, from, to),
            hex_window(g, from, to),
        ));
    }
    if got.len() != want.len() {
        let n = got.len().min(want.len());
        let (which, f) = if got.len() > want.len() {
            ("one more than expected was sent", &got[n])
        } else {
            ("one expected was not sent", &want[n])
        };
        return Err(format!(
            "{} packets sent, {} expected; packet {n}: {which}: {}",
            got.len(),
            want.len(),
            describe_frame(f)
        ));
    }
    Ok(())
}
