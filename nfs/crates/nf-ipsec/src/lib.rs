//! IPsec gateway NF: ESP tunnel mode (RFC 4303) with AES-GCM (RFC 4106), static SAs from the
//! config ([`sa::Config`]).
//!
//! - Cleartext matching an outbound SA's selectors is encapsulated toward the peer
//!   ([`esp::encapsulate`]). Its sequence number comes from the tier: each instance reserves a
//!   block of `seq_block` numbers with one atomic INCRBY on `nf:<id>:{<sa>}:esp-seq` and uses it
//!   up locally. INCRBY hands every block to exactly one caller and only ever moves up, so no
//!   number (and so no AES-GCM nonce) is used twice, by one instance, two instances, or an
//!   instance started after a move; an instance that stops loses the rest of its block, which
//!   only leaves a gap (receivers accept gaps). Numbers run out at 2^32 - 1 (no extended
//!   sequence numbers): the SA must then be replaced, and packets are dropped and counted.
//! - ESP for an inbound SA (SPI, peer and local address) is checked against the anti-replay
//!   window ([`replay::ReplayWindow`], kept in the tier at `nf:<id>:{<sa>}:esp-replay` and read
//!   with the batch), verified and decrypted ([`esp::decapsulate`]); the inner packet must match
//!   the SA's selectors; the window is then updated in the batch write. An instance that takes
//!   over reads the window the previous one wrote, so it rejects replays of packets the old one
//!   accepted. The window is read-modify-write per batch: two instances handling one inbound SA
//!   at the same moment could each accept one copy of a replayed packet; UNO moves an NF by a
//!   port remap, so one instance at a time handles an SA.
//! - Cleartext that an inbound SA's selectors cover arrived unprotected: dropped. Other
//!   cleartext: `unprotected` policy (bypass by default, or drop). ESP that is not for one of our
//!   SAs, tampered, replayed or malformed is dropped and counted.

pub mod esp;
pub mod replay;
pub mod sa;

use esp::{EspError, SaCrypto};
use flowstore::{Key, KeySpace, StoreError};
use nfcore::{Ctx, NetworkFunction, Parsed, Verdict};
use replay::{Refused, ReplayWindow};
use sa::{Config, Dir, Sa, Unprotected};
use serde_json::Value;

/// Counters for the stats endpoint.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counters {
    pub encapsulated: u64,
    pub decapsulated: u64,
    pub bypassed: u64,
    pub unprotected_dropped: u64,
    pub unknown_spi: u64,
    pub replay_dropped: u64,
    pub auth_failed: u64,
    pub malformed_esp: u64,
    pub policy_mismatch: u64,
    pub seq_exhausted: u64,
    pub seq_blocks: u64,
    pub bad_state: u64,
    /// Cleartext too long for one outer IPv4 packet (dropped; fragmentation is not done).
    pub too_big: u64,
}

/// The IPsec gateway.
pub struct Ipsec {
    cfg: Config,
    /// The config as given: an SA's own fields, to tell a changed SA from a kept one.
    raw: Value,
    /// Per SA (index into `cfg.sas`, outbound only): next sequence number and last of the
    /// reserved block (next > last: none left).
    blocks: Vec<(u64, u64)>,
    scratch: Vec<u8>,
    pub c: Counters,
}

fn crypto(sa: &Sa) -> SaCrypto<'_> {
    SaCrypto {
        spi: sa.spi,
        cipher: &sa.cipher,
        salt: &sa.salt,
        tunnel_src: sa.tunnel_src,
        tunnel_dst: sa.tunnel_dst,
    }
}

/// Tier key of an SA's `table` (its own Cluster slot, named by direction and SPI).
pub fn sa_key(keys: &KeySpace, sa: &Sa, table: &str) -> Key {
    let mut id = [0u8; 5];
    id[0] = if sa.dir == Dir::In { b'i' } else { b'o' };
    id[1..].copy_from_slice(&sa.spi.to_be_bytes());
    keys.flow(packet::flow::fnv1a(&id), table)
}

const SEQ: &str = "esp-seq";
const REPLAY: &str = "esp-replay";

impl Ipsec {
    pub fn from_config(raw: &Value) -> Result<Ipsec, String> {
        let cfg = Config::from_json(raw)?;
        let n = cfg.sas.len();
        Ok(Ipsec {
            cfg,
            raw: raw.clone(),
            blocks: vec![(1, 0); n],
            scratch: Vec::with_capacity(2048),
            c: Counters::default(),
        })
    }

    /// SA `i` as the config wrote it, without what may change in place (name, selectors).
    fn sa_keying(raw: &Value, i: usize) -> Value {
        let mut v = raw["sas"][i].clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("name");
            o.remove("selectors");
        }
        v
    }

    /// The inbound SA this ESP packet is for.
    fn inbound_sa(&self, spi: u32, pkt: &Parsed) -> Option<usize> {
        self.cfg.sas.iter().position(|s| {
            s.dir == Dir::In
                && s.spi == spi
                && pkt.src == std::net::IpAddr::V4(s.tunnel_src)
                && pkt.dst == std::net::IpAddr::V4(s.tunnel_dst)
        })
    }

    fn outbound_sa(&self, pkt: &Parsed) -> Option<usize> {
        self.cfg
            .sas
            .iter()
            .position(|s| s.dir == Dir::Out && s.matches(pkt.src, pkt.dst))
    }

    /// Next sequence number of outbound SA `i`, reserving a new block from the tier when the
    /// current one is used up. None: the 32-bit space is exhausted.
    fn next_seq(&mut self, ctx: &mut Ctx<'_>, i: usize) -> Result<Option<u32>, StoreError> {
        if self.blocks[i].0 > self.blocks[i].1 {
            let key = sa_key(ctx.keys, &self.cfg.sas[i], SEQ);
            let block = self.cfg.seq_block as i64;
            let end = ctx.store().incr_by(&key, block)?;
            if end < block {
                // Not a counter this NF wrote (or it went backwards): refuse to guess.
                self.c.bad_state += 1;
                return Ok(None);
            }
            self.blocks[i] = ((end - block + 1) as u64, end as u64);
            self.c.seq_blocks += 1;
        }
        let next = self.blocks[i].0;
        if next > u32::MAX as u64 {
            return Ok(None);
        }
        self.blocks[i].0 += 1;
        Ok(Some(next as u32))
    }

    fn inbound(
        &mut self,
        ctx: &mut Ctx<'_>,
        frame: &mut Vec<u8>,
        pkt: &Parsed,
        spi: u32,
        seq: u32,
    ) -> Result<Verdict, StoreError> {
        let Some(i) = self.inbound_sa(spi, pkt) else {
            self.c.unknown_spi += 1;
            return Ok(Verdict::Drop);
        };
        let sa = &self.cfg.sas[i];
        let key = sa_key(ctx.keys, sa, REPLAY);
        let mut w = match ctx.get(&key)? {
            None => ReplayWindow::new(self.cfg.replay_window),
            Some(b) => match ReplayWindow::decode(b, self.cfg.replay_window) {
                Some(w) => w,
                None => {
                    self.c.bad_state += 1;
                    return Ok(Verdict::Drop);
                }
            },
        };
        if w.check(seq).is_err() {
            self.c.replay_dropped += 1;
            return Ok(Verdict::Drop);
        }
        match esp::decapsulate(&crypto(sa), frame, pkt, &mut self.scratch) {
            Ok(()) => {}
            Err(EspError::Auth) => {
                self.c.auth_failed += 1;
                return Ok(Verdict::Drop);
            }
            Err(_) => {
                self.c.malformed_esp += 1;
                return Ok(Verdict::Drop);
            }
        }
        match Parsed::new_checked(&self.scratch) {
            Ok(inner) if sa.matches(inner.src, inner.dst) => {}
            Ok(_) => {
                self.c.policy_mismatch += 1;
                return Ok(Verdict::Drop);
            }
            Err(_) => {
                self.c.malformed_esp += 1;
                return Ok(Verdict::Drop);
            }
        }
        if let Err(Refused::Replay | Refused::TooOld | Refused::Zero) = w.accept(seq) {
            self.c.replay_dropped += 1;
            return Ok(Verdict::Drop);
        }
        ctx.set(&key, w.encode());
        std::mem::swap(frame, &mut self.scratch);
        self.c.decapsulated += 1;
        Ok(Verdict::Forward)
    }
}

impl NetworkFunction for Ipsec {
    fn name(&self) -> &'static str {
        "ipsec"
    }

    /// SAs added or removed, an SA's name or selectors, `seq_block` and `unprotected` change in
    /// place (counters kept; a kept outbound SA keeps its reserved sequence block, a new one
    /// reserves from the tier). An SA whose key, salt or tunnel addresses change (same
    /// direction and SPI) takes a rolling update (`Ok(false)`). `replay_window` is refused: the
    /// inbound SAs' windows are kept in the tier at their size, which every instance must read.
    fn reconfigure(
        &mut self,
        cfg: &Value,
        _store: &mut dyn flowstore::FlowStore,
        _keys: &KeySpace,
    ) -> Result<bool, nfcore::Refused> {
        self.check_change(cfg)?;
        let mut new = Ipsec::from_config(cfg)?;
        for (i, sa) in new.cfg.sas.iter().enumerate() {
            let old = self
                .cfg
                .sas
                .iter()
                .position(|o| o.dir == sa.dir && o.spi == sa.spi);
            if let Some(j) = old {
                if Self::sa_keying(cfg, i) != Self::sa_keying(&self.raw, j) {
                    return Ok(false);
                }
                new.blocks[i] = self.blocks[j];
            }
        }
        new.c = self.c;
        *self = new;
        Ok(true)
    }

    fn check_change(&self, cfg: &Value) -> Result<(), String> {
        let new = Ipsec::from_config(cfg)?;
        if new.cfg.replay_window != self.cfg.replay_window {
            return Err(format!(
                "replay_window: cannot change on a running gateway ({} -> {}): the inbound SAs' \
                 windows are kept in the tier at their size; recreate the NF",
                self.cfg.replay_window, new.cfg.replay_window
            ));
        }
        Ok(())
    }

    fn read_set(&self, keys: &KeySpace, pkt: &Parsed, frame: &[u8], out: &mut Vec<Key>) {
        if let Some((spi, _)) = esp::esp_header(frame, pkt) {
            if let Some(i) = self.inbound_sa(spi, pkt) {
                out.push(sa_key(keys, &self.cfg.sas[i], REPLAY));
            }
        }
    }

    fn process(
        &mut self,
        ctx: &mut Ctx<'_>,
        frame: &mut Vec<u8>,
        pkt: &Parsed,
    ) -> Result<Verdict, StoreError> {
        if pkt.proto == esp::PROTO_ESP {
            return match esp::esp_header(frame, pkt) {
                Some((spi, seq)) => self.inbound(ctx, frame, pkt, spi, seq),
                None => {
                    self.c.malformed_esp += 1;
                    Ok(Verdict::Drop)
                }
            };
        }
        if let Some(i) = self.outbound_sa(pkt) {
            if !esp::fits(pkt) {
                self.c.too_big += 1;
                return Ok(Verdict::Drop);
            }
            let Some(seq) = self.next_seq(ctx, i)? else {
                self.c.seq_exhausted += 1;
                return Ok(Verdict::Drop);
            };
            esp::encapsulate(
                &crypto(&self.cfg.sas[i]),
                seq,
                frame,
                pkt,
                &mut self.scratch,
            );
            std::mem::swap(frame, &mut self.scratch);
            self.c.encapsulated += 1;
            return Ok(Verdict::Forward);
        }
        let should_be_protected = self
            .cfg
            .sas
            .iter()
            .any(|s| s.dir == Dir::In && s.matches(pkt.src, pkt.dst));
        if should_be_protected {
            self.c.unprotected_dropped += 1;
            return Ok(Verdict::Drop);
        }
        match self.cfg.unprotected {
            Unprotected::Bypass => {
                self.c.bypassed += 1;
                Ok(Verdict::Forward)
            }
            Unprotected::Drop => {
                self.c.unprotected_dropped += 1;
                Ok(Verdict::Drop)
            }
        }
    }

    fn stats(&self) -> Value {
        let c = &self.c;
        serde_json::json!({
            "encapsulated": c.encapsulated, "decapsulated": c.decapsulated, "bypassed": c.bypassed,
            "unprotected_dropped": c.unprotected_dropped, "unknown_spi": c.unknown_spi,
            "replay_dropped": c.replay_dropped, "auth_failed": c.auth_failed,
            "malformed_esp": c.malformed_esp, "policy_mismatch": c.policy_mismatch,
            "seq_exhausted": c.seq_exhausted, "seq_blocks": c.seq_blocks, "bad_state": c.bad_state,
            "too_big": c.too_big,
        })
    }
}
