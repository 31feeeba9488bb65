//! Serialised state of a [`crate::LocalStore`]: what an OpenNF-style move of a local-state NF
//! carries from the old instance to the new one (`GET /state` -> `PUT /state`).
//!
//! Binary, little-endian, versioned by its magic:
//!
//! ```text
//! magic "UNOLST\0\x01"
//! u32 n_kv     { u32 klen, key, u32 vlen, value }*
//! u32 n_pools  { u32 klen, key, u8 initialised (0|1), u32 n, { u32 len, item }* }*
//! u32 n_timers { u32 klen, key, u32 n, { u64 deadline_ms, u32 mlen, member }* }*
//! ```
//!
//! Decoding is bounded and validated (the bytes come over HTTP): lengths are checked against the
//! bytes left before anything is allocated, keys must carry the NF's key prefix, keys are unique,
//! nothing may follow the last section. Every error names the field.

use std::collections::HashSet;

/// Leading bytes of a serialised store (format version 1).
pub const MAGIC: &[u8; 8] = b"UNOLST\x00\x01";
/// Longest key accepted on import.
pub const MAX_KEY: usize = 4096;
/// Longest value, pool item or timer member accepted on import.
pub const MAX_VALUE: usize = 1 << 20;

/// One timer set: its key and its (deadline_ms, member) entries.
pub type TimerEntries = (Vec<u8>, Vec<(u64, Vec<u8>)>);

/// The decoded content of a store.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub kv: Vec<(Vec<u8>, Vec<u8>)>,
    /// (pool, initialised, items in order)
    pub pools: Vec<(Vec<u8>, bool, Vec<Vec<u8>>)>,
    /// (timer set, [(deadline_ms, member)])
    pub timers: Vec<TimerEntries>,
}

impl Snapshot {
    /// Entries of all kinds (kv pairs + pool items + timers).
    pub fn entries(&self) -> usize {
        self.kv.len()
            + self.pools.iter().map(|p| p.2.len().max(1)).sum::<usize>()
            + self.timers.iter().map(|t| t.1.len()).sum::<usize>()
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            64 + self
                .kv
                .iter()
                .map(|(k, v)| 8 + k.len() + v.len())
                .sum::<usize>(),
        );
        out.extend_from_slice(MAGIC);
        put_u32(&mut out, self.kv.len());
        for (k, v) in &self.kv {
            put_bytes(&mut out, k);
            put_bytes(&mut out, v);
        }
        put_u32(&mut out, self.pools.len());
        for (k, init, items) in &self.pools {
            put_bytes(&mut out, k);
            out.push(u8::from(*init));
            put_u32(&mut out, items.len());
            for it in items {
                put_bytes(&mut out, it);
            }
        }
        put_u32(&mut out, self.timers.len());
        for (k, members) in &self.timers {
            put_bytes(&mut out, k);
            put_u32(&mut out, members.len());
            for (d, m) in members {
                out.extend_from_slice(&d.to_le_bytes());
                put_bytes(&mut out, m);
            }
        }
        out
    }

    /// Decode and validate `data`; every key must start with `prefix` (the NF's key space).
    pub fn decode(data: &[u8], prefix: &[u8]) -> Result<Snapshot, String> {
        let mut r = Reader { data, pos: 0 };
        if r.take(MAGIC.len(), "magic")? != MAGIC {
            return Err("state: magic: not a UNO local-state snapshot (version 1)".into());
        }
        let mut s = Snapshot::default();
        let mut seen = HashSet::new();
        let key = |r: &mut Reader, what: &str, seen: &mut HashSet<Vec<u8>>| {
            let k = r.bytes(MAX_KEY, what)?.to_vec();
            if !k.starts_with(prefix) {
                return Err(format!(
                    "state: {what}: key does not belong to this NF (prefix {:?})",
                    String::from_utf8_lossy(prefix)
                ));
            }
            if !seen.insert(k.clone()) {
                return Err(format!("state: {what}: duplicate key"));
            }
            Ok(k)
        };
        // Each entry takes at least 8 bytes, so counts never allocate beyond the body's size.
        let n = r.count(8, "kv")?;
        s.kv.reserve(n);
        for i in 0..n {
            let k = key(&mut r, &format!("kv[{i}].key"), &mut seen)?;
            let v = r.bytes(MAX_VALUE, &format!("kv[{i}].value"))?.to_vec();
            s.kv.push((k, v));
        }
        let n = r.count(9, "pools")?;
        for i in 0..n {
            let k = key(&mut r, &format!("pools[{i}].key"), &mut seen)?;
            let init = match r.take(1, &format!("pools[{i}].initialised"))?[0] {
                0 => false,
                1 => true,
                b => {
                    return Err(format!(
                        "state: pools[{i}].initialised: must be 0 or 1, got {b}"
                    ))
                }
            };
            let m = r.count(4, &format!("pools[{i}].items"))?;
            let mut items = Vec::with_capacity(m);
            for j in 0..m {
                items.push(
                    r.bytes(MAX_VALUE, &format!("pools[{i}].items[{j}]"))?
                        .to_vec(),
                );
            }
            s.pools.push((k, init, items));
        }
        let n = r.count(8, "timers")?;
        for i in 0..n {
            let k = key(&mut r, &format!("timers[{i}].key"), &mut seen)?;
            let m = r.count(12, &format!("timers[{i}].members"))?;
            let mut members = Vec::with_capacity(m);
            let mut mseen = HashSet::with_capacity(m);
            for j in 0..m {
                let d = r.take(8, &format!("timers[{i}].members[{j}].deadline"))?;
                let d = u64::from_le_bytes(d.try_into().expect("8 bytes"));
                let mb = r
                    .bytes(MAX_VALUE, &format!("timers[{i}].members[{j}].member"))?
                    .to_vec();
                if !mseen.insert(mb.clone()) {
                    return Err(format!("state: timers[{i}].members[{j}]: duplicate member"));
                }
                members.push((d, mb));
            }
            s.timers.push((k, members));
        }
        if r.pos != data.len() {
            return Err(format!(
                "state: {} trailing bytes after the last section",
                data.len() - r.pos
            ));
        }
        Ok(s)
    }
}

fn put_u32(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u32).to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_u32(out, b.len());
    out.extend_from_slice(b);
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if self.data.len() - self.pos < n {
            return Err(format!("state: {what}: truncated"));
        }
        let s = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn u32(&mut self, what: &str) -> Result<usize, String> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize)
    }

    /// A count of entries that take at least `min_size` bytes each: larger than what is left = bad.
    fn count(&mut self, min_size: usize, what: &str) -> Result<usize, String> {
        let n = self.u32(&format!("{what} count"))?;
        if n.saturating_mul(min_size) > self.data.len() - self.pos {
            return Err(format!(
                "state: {what}: count {n} exceeds the bytes that follow"
            ));
        }
        Ok(n)
    }

    fn bytes(&mut self, max: usize, what: &str) -> Result<&'a [u8], String> {
        let n = self.u32(&format!("{what} length"))?;
        if n > max {
            return Err(format!("state: {what}: {n} bytes, at most {max}"));
        }
        self.take(n, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Snapshot {
        Snapshot {
            kv: vec![
                (b"nf:fw:{1}:c".to_vec(), b"v1".to_vec()),
                (b"nf:fw:{2}:c".to_vec(), vec![]),
            ],
            pools: vec![(
                b"nf:fw:{pool}".to_vec(),
                true,
                vec![b"a".to_vec(), b"b".to_vec()],
            )],
            timers: vec![(b"nf:fw:{timers}".to_vec(), vec![(5, b"m1".to_vec())])],
        }
    }

    #[test]
    fn round_trip() {
        let s = sample();
        assert_eq!(Snapshot::decode(&s.encode(), b"nf:fw:").unwrap(), s);
        let empty = Snapshot::default();
        assert_eq!(Snapshot::decode(&empty.encode(), b"nf:fw:").unwrap(), empty);
    }

    #[test]
    fn rejects_bad_bodies_naming_the_field() {
        let good = sample().encode();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![], "magic"),
            (b"UNOLST\x00\x02rest".to_vec(), "magic"),
            (good[..good.len() - 1].to_vec(), "truncated"),
            ([good.clone(), vec![0]].concat(), "trailing"),
        ];
        for (body, word) in cases {
            let e = Snapshot::decode(&body, b"nf:fw:").unwrap_err();
            assert!(e.contains(word), "{e}");
        }
        // Another NF's keys.
        let e = Snapshot::decode(&good, b"nf:nat:").unwrap_err();
        assert!(e.contains("kv[0].key") && e.contains("prefix"), "{e}");
        // A huge count with few bytes behind it allocates nothing and is refused.
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&u32::MAX.to_le_bytes());
        let e = Snapshot::decode(&b, b"nf:fw:").unwrap_err();
        assert!(e.contains("kv: count"), "{e}");
        // Duplicate key.
        let mut d = sample();
        d.kv[1].0 = d.kv[0].0.clone();
        let e = Snapshot::decode(&d.encode(), b"nf:fw:").unwrap_err();
        assert!(e.contains("kv[1].key: duplicate"), "{e}");
        // Bad flag byte.
        let mut p = sample();
        p.kv.clear();
        let mut enc = p.encode();
        let flag_at = MAGIC.len() + 4 + 4 + 4 + p.pools[0].0.len();
        enc[flag_at] = 7;
        let e = Snapshot::decode(&enc, b"nf:fw:").unwrap_err();
        assert!(e.contains("pools[0].initialised"), "{e}");
    }

    /// Deterministic fuzz: truncations and byte flips of a valid body never panic.
    #[test]
    fn fuzz_never_panics() {
        let good = sample().encode();
        for cut in 0..good.len() {
            let _ = Snapshot::decode(&good[..cut], b"nf:fw:");
        }
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut b = good.clone();
            for k in 0..1 + (x % 4) as usize {
                let i = ((x >> (8 * k)) as usize) % b.len();
                b[i] = (x >> (16 + k)) as u8;
            }
            let _ = Snapshot::decode(&b, b"nf:fw:");
            let random: Vec<u8> = (0..(x % 64) as usize)
                .map(|i| (x >> (i % 56)) as u8)
                .collect();
            let _ = Snapshot::decode(&[MAGIC.as_slice(), &random].concat(), b"nf:fw:");
        }
    }
}
