//! Intrusion prevention (thesis Algorithm 2) fed by TCP reassembly (Algorithm 3), all per-flow
//! state in the tier.
//!
//! Each TCP direction is a byte stream scanned in order by one Aho-Corasick DFA over all
//! signatures ([`matcher`]); the DFA state, the next expected sequence number and the stream
//! offset of both directions are one record per connection (table `ips`, canonical 5-tuple), read
//! and written once per data packet. Segments that arrive ahead of the expected sequence number
//! are copied into a bounded per-direction buffer in the tier (tables `ips-ooo0.N`/`ips-ooo1.N`, read
//! only when needed) and forwarded; when the gap is filled, the filling segment and the buffered
//! ones are scanned in stream order. A receiver cannot deliver bytes past a hole, so dropping
//! the segment that completes a match (and everything after it) keeps the signature from the
//! application even when its pieces came reordered. Retransmitted bytes are not scanned twice.
//!
//! On a match: a JSON line in the alert log and the `alerts` counter; with `action: "drop"` the
//! packet is dropped and the connection blocked (every later packet, both ways, is dropped).
//! UDP datagrams are scanned one by one (no stream). TCP packets other than a SYN of a
//! connection the tier does not know are dropped (Algorithm 3 line 10).
//!
//! Config (JSON): `{"signatures": [{"id": 1, "msg": "...", "content": "text" | "hex": "41 42"}],
//! "nocase": false, "action": "drop"|"alert", "alert_log": "-" (stderr) | PATH,
//! "max_ooo_segments": 4096, "max_ooo_bytes": 4194304, "window": 4194304, "timeouts": {...},
//! "resync_on_ack": true}`
//! plus the runtime options. A connection is forgotten after the timeout of its phase
//! ([`nfcore::timeouts`]: the record keeps its [`Track`]); the older `idle_timeout_ms` instead
//! of `timeouts` sets every phase, as it did.

pub mod matcher;
pub mod reasm;

use matcher::{Hit, Matcher, Signature};
use nfcore::config::{parse_nf, present, Int, List, Object};
use nfcore::timeouts::{Legacy, TimeoutsConfig};
use nfcore::{
    Ctx, Key, KeySpace, NetworkFunction, Parsed, RecordWrites, StoreError, Timeouts, Track, Verdict,
};
use packet::{Direction, L4, PROTO_TCP, TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN};
use reasm::{arrival, Arrival, DirState, OooBuffer, Segment, DIR_LEN};
use serde::Deserialize;
use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;

pub const TABLE: &str = "ips";
/// Bound on the summed length of all signatures (keeps the DFA in tens of MB).
pub const MAX_SIGNATURE_BYTES: usize = 65_536;
pub const TABLE_OOO: [&str; 2] = ["ips-ooo0", "ips-ooo1"];
/// How far ahead of the expected sequence number a segment may start (`window`), and the
/// out-of-order buffer's bounds per direction. A hole (one segment lost before the IPS, e.g. its
/// full port ring) leaves the sender's whole window behind it: every in-window segment the IPS
/// cannot hold it drops (unscanned, so not forwarded), and a window of several hundred segments
/// losing most of its segments turns into a retransmission timeout with backoff: the connection
/// stalls. So the defaults hold a whole receiver window of a fast local connection (several MB;
/// bench/RESULTS.md, "TCP through a moved IPS"): the cost is tier memory, up to `max_ooo_bytes`
/// per direction of a connection with a hole (lower it where that matters).
pub const DEFAULT_WINDOW: u64 = 4 << 20;
pub const DEFAULT_MAX_OOO_BYTES: u64 = 4 << 20;
pub const DEFAULT_MAX_OOO_SEGMENTS: u64 = 4096;

/// Table name of slot `slot` of direction `dir`'s out-of-order buffer (`ips-ooo<dir>.<slot>`).
pub fn ooo_table(dir: usize, slot: u16) -> String {
    format!("{}.{slot}", TABLE_OOO[dir])
}

/// The per-connection record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// [`Matcher::fingerprint`] of the signature set the `ac` states belong to.
    pub fingerprint: u32,
    pub blocked: bool,
    /// When the idle timer was last moved (ms).
    pub refreshed_ms: u64,
    /// Index 0: the canonical key's direction; 1: the reverse.
    pub dirs: [DirState; 2],
    /// What the connection's packets showed (directions as `dirs`): its timeout.
    pub track: Track,
}

/// Length of a record before tracks were kept (one byte less).
const V0_LEN: usize = 13 + 2 * DIR_LEN;

impl Record {
    /// `[fingerprint (4), blocked, refreshed_ms (8), dirs, track]`.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(V0_LEN + 1);
        v.extend_from_slice(&self.fingerprint.to_le_bytes());
        v.push(self.blocked as u8);
        v.extend_from_slice(&self.refreshed_ms.to_le_bytes());
        for d in &self.dirs {
            d.encode_into(&mut v);
        }
        v.push(self.track.0);
        v
    }

    /// A record of the older layout (no track byte) decodes with [`Track::legacy`].
    pub fn decode(b: &[u8]) -> Option<Record> {
        let track = match b.len() {
            V0_LEN => Track::legacy(false),
            n if n == V0_LEN + 1 && b[V0_LEN] & !Track::MASK == 0 => Track(b[V0_LEN]),
            _ => return None,
        };
        if b[4] > 1 {
            return None;
        }
        let b = &b[..V0_LEN];
        Some(Record {
            fingerprint: u32::from_le_bytes(b[0..4].try_into().ok()?),
            blocked: b[4] == 1,
            refreshed_ms: u64::from_le_bytes(b[5..13].try_into().ok()?),
            dirs: [
                DirState::decode(&b[13..13 + DIR_LEN])?,
                DirState::decode(&b[13 + DIR_LEN..])?,
            ],
            track,
        })
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    scanned_bytes: u64,
    alerts: u64,
    dropped_on_match: u64,
    blocked_dropped: u64,
    no_state: u64,
    retransmissions: u64,
    ooo_buffered: u64,
    ooo_overflow: u64,
    out_of_window: u64,
    reassembled: u64,
    corrupt_state: u64,
    signature_set_changed: u64,
    udp_scanned: u64,
    alert_log_errors: u64,
    expired: u64,
    resyncs: u64,
    resync_gap_bytes: u64,
    /// Claims (a new record, a buffer slot) another instance's write beat.
    lost_races: u64,
}

/// Where alerts go: one JSON object per line.
struct AlertLog {
    path: Option<PathBuf>,
    file: Option<std::fs::File>,
}

impl AlertLog {
    fn write(&mut self, line: &str) -> std::io::Result<()> {
        let Some(p) = &self.path else {
            return writeln!(std::io::stderr(), "{line}");
        };
        if self.file.is_none() {
            self.file = Some(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)?,
            );
        }
        let f = self.file.as_mut().expect("opened above");
        f.write_all(format!("{line}\n").as_bytes())
    }
}

/// The IPS NF.
pub struct Ips {
    m: Matcher,
    drop_on_match: bool,
    max_segs: usize,
    max_bytes: usize,
    window: u32,
    /// Resynchronise on the receiver's ACK (`resync_on_ack`, default true).
    resync: bool,
    timeouts: Timeouts,
    /// Records and buffer slots written conditional on what was read (`record_writes`).
    checked: bool,
    log: AlertLog,
    hits: Vec<Hit>,
    c: Counters,
}

nfcore::config_enum! {
    /// What a match does (`action`).
    #[derive(Default)]
    enum Action { #[default] Drop = "drop", Alert = "alert" }
}

fn stderr() -> String {
    "-".into()
}

fn yes() -> bool {
    true
}

/// The config as written (besides the runtime options).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    signatures: List<Signature, 1, 10_000>,
    #[serde(default)]
    nocase: bool,
    #[serde(default)]
    action: Action,
    /// `-`: stderr.
    #[serde(default = "stderr")]
    alert_log: String,
    #[serde(default)]
    max_ooo_segments: Int<0, 65_535, DEFAULT_MAX_OOO_SEGMENTS>,
    #[serde(default)]
    max_ooo_bytes: Int<0, { 16 << 20 }, DEFAULT_MAX_OOO_BYTES>,
    #[serde(default)]
    window: Int<1, { 1 << 30 }, DEFAULT_WINDOW>,
    #[serde(default, deserialize_with = "present")]
    timeouts: Option<Object<TimeoutsConfig>>,
    #[serde(default, deserialize_with = "present")]
    idle_timeout_ms: Option<Int<1, 86_400_000>>,
    #[serde(default = "yes")]
    resync_on_ack: bool,
    #[serde(default)]
    record_writes: RecordWrites,
}

impl Ips {
    pub fn from_config(cfg: &Value) -> Result<Ips, String> {
        let c: Config = parse_nf(cfg, "ips config")?;
        let sigs = c.signatures.0;
        // The DFA grows with the total signature length (states x byte classes).
        let total: usize = sigs.iter().map(|s| s.content.len()).sum();
        if total > MAX_SIGNATURE_BYTES {
            return Err(format!(
                "signatures: total content must be at most {MAX_SIGNATURE_BYTES} bytes, got {total}"
            ));
        }
        let mut ids = std::collections::HashSet::new();
        for (i, s) in sigs.iter().enumerate() {
            if !ids.insert(s.id) {
                return Err(format!("signatures[{i}].id {} is a duplicate", s.id));
            }
        }
        let path = match c.alert_log.as_str() {
            "-" => None,
            p => {
                let p = PathBuf::from(p);
                let dir = p
                    .parent()
                    .filter(|d| !d.as_os_str().is_empty())
                    .unwrap_or(std::path::Path::new("."));
                if !dir.is_dir() {
                    return Err(format!(
                        "alert_log: directory {} does not exist",
                        dir.display()
                    ));
                }
                Some(p)
            }
        };
        Ok(Ips {
            m: Matcher::new(sigs, c.nocase)?,
            drop_on_match: c.action == Action::Drop,
            max_segs: c.max_ooo_segments.0 as usize,
            max_bytes: c.max_ooo_bytes.0 as usize,
            window: c.window.0 as u32,
            timeouts: Timeouts::resolve(
                c.timeouts.map(|t| t.0),
                Legacy {
                    idle_ms: c.idle_timeout_ms.map(|x| x.0),
                    ..Legacy::default()
                },
            )?,
            resync: c.resync_on_ack,
            checked: c.record_writes == RecordWrites::Checked,
            log: AlertLog { path, file: None },
            hits: Vec::new(),
            c: Counters::default(),
        })
    }

    fn key(keys: &KeySpace, pkt: &Parsed) -> Key {
        keys.flow(pkt.flow_key().bidirectional_hash(), TABLE)
    }

    /// The timeouts in use.
    pub fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }

    /// How long a connection with this track is kept idle.
    fn timeout(&self, t: Track) -> u64 {
        self.timeouts.for_track(t, PROTO_TCP)
    }

    fn alert(&mut self, now_ms: u64, pkt: &Parsed) {
        for h in std::mem::take(&mut self.hits) {
            self.c.alerts += 1;
            let s = &self.m.sigs[h.sig];
            let (sp, dp) = pkt.ports();
            let line = serde_json::json!({
                "ts_ms": now_ms, "sig_id": s.id, "msg": s.msg,
                "src": pkt.src.to_string(), "sport": sp, "dst": pkt.dst.to_string(), "dport": dp,
                "proto": pkt.proto, "stream_offset": h.end_offset,
                "action": if self.drop_on_match { "drop" } else { "alert" },
            });
            if self.log.write(&line.to_string()).is_err() {
                self.c.alert_log_errors += 1;
            }
        }
    }

    /// Deliver `data` (and a FIN) at the direction's expected sequence number.
    fn deliver(&mut self, d: &mut DirState, data: &[u8], fin: bool) {
        d.ac = self.m.scan(d.ac, data, d.offset, &mut self.hits);
        d.offset += data.len() as u64;
        d.expected = d
            .expected
            .wrapping_add(data.len() as u32)
            .wrapping_add(fin as u32);
        self.c.scanned_bytes += data.len() as u64;
    }

    /// The out-of-order buffer of direction `dir`: every slot, in the order they were written
    /// (one round trip for those this batch has not seen), merged as [`OooBuffer::insert`] does
    /// (the first copy of a byte wins). An undecodable slot counts as `corrupt_state`, skipped.
    /// The batch's writes of the slots are made conditional on the values read (another
    /// instance's concurrent change of them makes this batch's packets stay, as for the record).
    fn read_buffer(
        &mut self,
        ctx: &mut Ctx<'_>,
        hash: u64,
        dir: usize,
        d: &DirState,
    ) -> Result<OooBuffer, StoreError> {
        let keys: Vec<Key> = (0..d.slots)
            .map(|i| ctx.keys.flow(hash, &ooo_table(dir, i)))
            .collect();
        let missing: Vec<Key> = keys
            .iter()
            .filter(|k| ctx.peek(k).is_none())
            .cloned()
            .collect();
        let mut fetched = Vec::with_capacity(missing.len());
        if !missing.is_empty() {
            ctx.store().note_unplanned_read();
            ctx.store().get_many(&missing, &mut fetched)?;
        }
        let mut fetched = fetched.into_iter();
        let mut buf = OooBuffer::default();
        for k in &keys {
            let raw = match ctx.peek(k) {
                Some(v) => v.map(|v| v.to_vec()),
                None => fetched.next().flatten(),
            };
            if self.checked {
                ctx.write_if(k, raw.clone());
            }
            match raw.as_deref().map(OooBuffer::decode) {
                Some(Some(slot)) => slot.segs.into_iter().for_each(|s| {
                    buf.insert(s);
                }),
                Some(None) => self.c.corrupt_state += 1,
                None => {}
            }
        }
        Ok(buf)
    }

    /// Append one out-of-order segment to direction `dir`'s buffer as a slot of its own: one
    /// write, no read (the buffer is read only when the gap before it is filled). The slot is
    /// claimed (written only if absent): an instance racing on the same record cannot overwrite
    /// a segment another one buffered and forwarded.
    fn append_segment(
        &self,
        ctx: &mut Ctx<'_>,
        hash: u64,
        dir: usize,
        d: &mut DirState,
        seg: Segment,
    ) {
        let key = ctx.keys.flow(hash, &ooo_table(dir, d.slots));
        d.appended(seg.seq, seg.data.len());
        let v = OooBuffer { segs: vec![seg] }.encode();
        if self.checked {
            ctx.claim(&key, v);
        } else {
            ctx.set(&key, v);
        }
    }

    /// Write back what is left of the buffer after a delivery: one slot, the others deleted.
    fn save_buffer(ctx: &mut Ctx<'_>, hash: u64, dir: usize, d: &mut DirState, rest: &OooBuffer) {
        let old_slots = d.slots;
        d.rewritten(rest);
        if d.slots > 0 {
            ctx.set(&ctx.keys.flow(hash, &ooo_table(dir, 0)), rest.encode());
        }
        for i in d.slots..old_slots {
            ctx.del(&ctx.keys.flow(hash, &ooo_table(dir, i)));
        }
    }

    /// Deliver what the buffer holds that is now in order (after `d.expected` moved), and write
    /// back the rest.
    fn deliver_buffered(
        &mut self,
        ctx: &mut Ctx<'_>,
        hash: u64,
        dir: usize,
        d: &mut DirState,
    ) -> Result<(), StoreError> {
        let mut buf = self.read_buffer(ctx, hash, dir, d)?;
        self.deliver_in_order(d, &mut buf);
        Self::save_buffer(ctx, hash, dir, d, &buf);
        Ok(())
    }

    /// Deliver the buffered segments that are in order at `d.expected`, one after the other.
    fn deliver_in_order(&mut self, d: &mut DirState, buf: &mut OooBuffer) {
        while let Some((seg, skip)) = buf.take_next(d.expected, self.window) {
            self.c.reassembled += 1;
            self.deliver(d, &seg.data[skip..], seg.fin);
        }
    }

    /// The receiver of direction `o` acknowledged bytes up to `ack`, past the expected sequence
    /// number this record holds. It can only have them if they crossed the IPS, scanned by an
    /// instance whose record update this one has not seen (a move or failover raced the tier:
    /// the old instance's last write landed late, or was overwritten by a stale one). Without
    /// this, the direction waits forever for bytes the sender never resends (it got the ACK), its
    /// later segments fill the out-of-order buffer and then everything is dropped. So skip the
    /// gap: the automaton restarts after it (a signature spanning the gap is not seen; counted
    /// in `resyncs`/`resync_gap_bytes`), and buffered segments now in order are scanned.
    fn resync_on_ack(
        &mut self,
        ctx: &mut Ctx<'_>,
        pkt: &Parsed,
        od: &mut DirState,
        o: usize,
        ack: u32,
    ) -> Result<(), StoreError> {
        let rel = ack.wrapping_sub(od.expected) as i32;
        // Only a direction that is stuck: it holds segments ahead of a hole (the stall's symptom).
        if !self.resync || !od.init || od.buffered == 0 || rel <= 0 || rel as u32 > self.window {
            return Ok(());
        }
        self.c.resyncs += 1;
        let hash = pkt.flow_key().bidirectional_hash();
        let mut buf = self.read_buffer(ctx, hash, o, od)?;
        // Jump over each hole only: bytes this instance buffered itself are scanned in order.
        loop {
            let rel = ack.wrapping_sub(od.expected) as i32;
            if rel <= 0 {
                break;
            }
            let next = buf
                .segs
                .iter()
                .map(|sg| sg.seq.wrapping_sub(od.expected) as i32)
                .filter(|r| *r > 0)
                .min();
            let gap = match next {
                Some(r) if r < rel => r,
                _ => rel,
            };
            self.c.resync_gap_bytes += gap as u64;
            od.expected = od.expected.wrapping_add(gap as u32);
            od.offset += gap as u64;
            od.ac = self.m.start();
            self.deliver_in_order(od, &mut buf);
        }
        Self::save_buffer(ctx, hash, o, od, &buf);
        Ok(())
    }

    fn tcp(
        &mut self,
        ctx: &mut Ctx<'_>,
        frame: &[u8],
        pkt: &Parsed,
        seq: u32,
        ack: u32,
        flags: u8,
    ) -> Result<Verdict, StoreError> {
        let key = Self::key(ctx.keys, pkt);
        let di = match pkt.flow_key().canonical().1 {
            Direction::Forward => 0,
            Direction::Reverse => 1,
        };
        let now = ctx.now_ms();
        let syn = flags & TCP_SYN != 0 && flags & TCP_RST == 0;
        // A connection idle past its timeout is gone even if its timer has not fired yet.
        // The record is read, changed and written back: the write applies only if no other
        // instance wrote it meanwhile (else this batch's packets do not leave, the next ones
        // see that instance's record).
        if self.checked {
            ctx.write_if_unchanged(&key)?;
        }
        let existing = ctx
            .get(&key)?
            .map(Record::decode)
            .filter(|r| r.is_none_or(|r| now < r.refreshed_ms + self.timeout(r.track)));
        let is_new = existing.is_none();
        let mut rec = match existing {
            Some(Some(r)) => r,
            Some(None) => {
                self.c.corrupt_state += 1;
                return Ok(Verdict::Drop);
            }
            None if syn && flags & TCP_ACK == 0 => Record {
                fingerprint: self.m.fingerprint,
                blocked: false,
                refreshed_ms: 0,
                dirs: [DirState::default(); 2],
                track: Track::default(),
            },
            None => {
                self.c.no_state += 1;
                return Ok(Verdict::Drop);
            }
        };
        let orig = rec;
        rec.track = rec.track.seen(di, PROTO_TCP, flags);
        if rec.blocked {
            // Stays blocked while packets keep coming (the idle timer moves as for any flow).
            self.c.blocked_dropped += 1;
            let timeout = self.timeout(rec.track);
            if rec.track != orig.track || now.saturating_sub(rec.refreshed_ms) >= timeout / 4 {
                rec.refreshed_ms = now;
                ctx.timer_set(key.clone(), now + timeout);
                ctx.set(&key, rec.encode());
            }
            return Ok(Verdict::Drop);
        }
        if rec.fingerprint != self.m.fingerprint {
            // Another signature set wrote these states: restart both streams' automata.
            self.c.signature_set_changed += 1;
            rec.fingerprint = self.m.fingerprint;
            for d in &mut rec.dirs {
                d.ac = self.m.start();
            }
        }
        if flags & TCP_ACK != 0 {
            self.resync_on_ack(ctx, pkt, &mut rec.dirs[1 - di], 1 - di, ack)?;
        }
        let mut d = rec.dirs[di];
        if !self.m.is_valid(d.ac) && d.init {
            self.c.corrupt_state += 1;
            return Ok(Verdict::Drop);
        }
        let fresh = DirState {
            init: true,
            expected: seq.wrapping_add(syn as u32),
            ac: self.m.start(),
            ..DirState::default()
        };
        // (Re)start the direction on its SYN, unless data was seen (no desynchronising an
        // established stream); a direction seen first mid-stream starts where it is.
        if !d.init || (syn && d.offset == 0 && d.buffered == 0) {
            d = fresh;
        }
        let data_seq = seq.wrapping_add(syn as u32);
        let payload = pkt.payload(frame);
        let fin = flags & TCP_FIN != 0;
        let hash = pkt.flow_key().bidirectional_hash();
        let mut verdict = Verdict::Forward;
        if !payload.is_empty() || fin {
            match arrival(d.expected, data_seq, payload.len(), fin, self.window) {
                Arrival::Deliver { skip } => {
                    self.deliver(&mut d, &payload[skip..], fin);
                    if d.buffer_due() {
                        self.deliver_buffered(ctx, hash, di, &mut d)?;
                    }
                }
                Arrival::Old => self.c.retransmissions += 1,
                Arrival::Future => {
                    if usize::from(d.buffered) >= self.max_segs
                        || d.buffered_bytes as usize + payload.len() > self.max_bytes
                    {
                        // Not buffered, so not forwarded: the sender retransmits it later.
                        self.c.ooo_overflow += 1;
                        verdict = Verdict::Drop;
                    } else {
                        self.c.ooo_buffered += 1;
                        let seg = Segment {
                            seq: data_seq,
                            fin,
                            data: payload.to_vec(),
                        };
                        self.append_segment(ctx, hash, di, &mut d, seg);
                    }
                }
                Arrival::OutOfWindow => {
                    self.c.out_of_window += 1;
                    verdict = Verdict::Drop;
                }
            }
        }
        rec.dirs[di] = d;
        if !self.hits.is_empty() {
            self.alert(now, pkt);
            if self.drop_on_match {
                self.c.dropped_on_match += 1;
                rec.blocked = true;
                verdict = Verdict::Drop;
            }
        }
        let timeout = self.timeout(rec.track);
        let move_timer = is_new
            || rec.track != orig.track
            || now.saturating_sub(rec.refreshed_ms) >= timeout / 4;
        if move_timer {
            rec.refreshed_ms = now;
            ctx.timer_set(key.clone(), now + timeout);
        }
        if rec != orig || is_new {
            ctx.set(&key, rec.encode());
        }
        Ok(verdict)
    }
}

impl NetworkFunction for Ips {
    fn name(&self) -> &'static str {
        "ips"
    }

    fn record_lifetime_ms(&self) -> Option<u64> {
        Some(self.timeouts.longest_ms())
    }

    /// Everything changes in place, counters kept. New signatures: each connection's automata
    /// restart at its next packet (its record names the old set's fingerprint), so a match
    /// spanning the change is not seen; connections already blocked stay blocked.
    fn reconfigure(
        &mut self,
        cfg: &Value,
        _store: &mut dyn nfcore::FlowStore,
        _keys: &KeySpace,
    ) -> Result<bool, nfcore::Refused> {
        let mut new = Ips::from_config(cfg)?;
        if new.log.path == self.log.path {
            new.log.file = self.log.file.take();
        }
        new.c = self.c;
        *self = new;
        Ok(true)
    }

    fn read_set(&self, keys: &KeySpace, pkt: &Parsed, _frame: &[u8], out: &mut Vec<Key>) {
        if matches!(pkt.l4, L4::Tcp { .. }) {
            out.push(Self::key(keys, pkt));
        }
    }

    fn process(
        &mut self,
        ctx: &mut Ctx<'_>,
        frame: &mut Vec<u8>,
        pkt: &Parsed,
    ) -> Result<Verdict, StoreError> {
        match pkt.l4 {
            L4::Tcp {
                seq, ack, flags, ..
            } => self.tcp(ctx, frame, pkt, seq, ack, flags),
            L4::Udp { .. } => {
                let payload = pkt.payload(frame);
                self.c.udp_scanned += 1;
                self.c.scanned_bytes += payload.len() as u64;
                self.m.scan(self.m.start(), payload, 0, &mut self.hits);
                if self.hits.is_empty() {
                    return Ok(Verdict::Forward);
                }
                self.alert(ctx.now_ms(), pkt);
                if self.drop_on_match {
                    self.c.dropped_on_match += 1;
                    return Ok(Verdict::Drop);
                }
                Ok(Verdict::Forward)
            }
            _ => Ok(Verdict::Forward),
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, member: &[u8]) -> Result<(), StoreError> {
        let Some(cur) = ctx.get_owned(member)? else {
            return Ok(());
        };
        if Record::decode(&cur)
            .is_some_and(|r| ctx.now_ms() < r.refreshed_ms + self.timeout(r.track))
        {
            return Ok(()); // refreshed since the timer was claimed; its new timer is pending
        }
        // Delete only what we read: a connection re-created meanwhile stays.
        if !ctx.store().compare_and_set(member, Some(&cur), None)? {
            return Ok(());
        }
        self.c.expired += 1;
        // The buffers' slots live next to the record: same hash tag, other table names; the
        // record says how many (an undecodable record has none we could name).
        if let (Some(base), Some(rec)) =
            (member.strip_suffix(TABLE.as_bytes()), Record::decode(&cur))
        {
            for (dir, d) in rec.dirs.iter().enumerate() {
                for slot in 0..d.slots {
                    let mut k = base.to_vec();
                    k.extend_from_slice(ooo_table(dir, slot).as_bytes());
                    ctx.del(&k);
                }
            }
        }
        Ok(())
    }

    /// A claim of this instance (a new record, a buffer slot) lost to another instance's write:
    /// the packets that depended on it did not leave. A slot taken by a segment whose batch lost
    /// its record write (so it was never forwarded) is counted from the next record write that
    /// appends there on: its bytes are scanned in stream order like any buffered ones. Deleting
    /// it here instead could race with the batch that is about to count it.
    fn claim_lost(
        &mut self,
        _ctx: &mut Ctx<'_>,
        _key: &[u8],
        _value: &[u8],
    ) -> Result<(), StoreError> {
        self.c.lost_races += 1;
        Ok(())
    }

    fn stats(&self) -> Value {
        let c = &self.c;
        serde_json::json!({
            "lost_races": c.lost_races,
            "signatures": self.m.sigs.len(), "automaton_states": self.m.states(),
            "scanned_bytes": c.scanned_bytes, "alerts": c.alerts,
            "dropped_on_match": c.dropped_on_match, "blocked_dropped": c.blocked_dropped,
            "no_state": c.no_state, "retransmissions": c.retransmissions,
            "ooo_buffered": c.ooo_buffered, "ooo_overflow": c.ooo_overflow,
            "out_of_window": c.out_of_window, "reassembled": c.reassembled,
            "corrupt_state": c.corrupt_state, "signature_set_changed": c.signature_set_changed,
            "udp_scanned": c.udp_scanned, "alert_log_errors": c.alert_log_errors,
            "expired": c.expired, "resyncs": c.resyncs, "resync_gap_bytes": c.resync_gap_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_older_records_decode() {
        let r = Record {
            fingerprint: 7,
            blocked: true,
            refreshed_ms: 99,
            dirs: [DirState::default(); 2],
            track: Track(Track::SEEN[0] | Track::RST),
        };
        assert_eq!(Record::decode(&r.encode()), Some(r));
        // The layout before tracks: one byte shorter.
        let old = &r.encode()[..V0_LEN];
        assert_eq!(
            Record::decode(old),
            Some(Record {
                track: Track::legacy(false),
                ..r
            })
        );
        let mut bad = r.encode();
        *bad.last_mut().unwrap() = 0x80;
        assert_eq!(Record::decode(&bad), None);
        assert_eq!(Record::decode(&[0; 5]), None);
    }
}
