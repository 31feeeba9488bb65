//! Load balancer (thesis Algorithm 1): connections to a virtual IP:port (VIP) are spread over a
//! backend pool kept in the tier; the choice is stored per connection (affinity) and every later
//! packet of the connection goes to the same backend, whichever instance handles it.
//!
//! - New connection (TCP SYN, or the first UDP datagram): the up backend with the fewest active
//!   connections, ties by a rendezvous hash of the flow. The choice is claimed with
//!   compare-and-set, so two instances racing on one new connection agree on one backend (the
//!   loser uses the winner's). The backend's active-connection counter is INCRBY'd by the winner.
//! - Client -> VIP packets: destination rewritten to the backend; backend -> client replies:
//!   source rewritten back to the VIP (incremental checksum updates).
//! - Health: a backend marked `down` in the tier gets no new connections; packets of existing
//!   connections to it pass (`on_backend_down: "keep"`, default) or are dropped (`"drop"`).
//! - TCP packets other than a SYN without a connection are dropped (Algorithm 1 line 13).
//! - Connections expire by tier-held timers after the timeout of their protocol and phase
//!   ([`nfcore::timeouts`]: the record keeps the connection's [`Track`]; established TCP days, a
//!   FIN or RST seen minutes or seconds); the instance that fires the timer deletes the
//!   connection (compare-and-set) and decrements the backend's counter, exactly once.
//!
//! - `conn_claim: "pipelined"` (option; default `"atomic"`): a new connection's record is
//!   claimed (`SET NX`) and the backend's counter increment (INCRBY) written with the batch, no
//!   round trip of their own, and the choice uses the counters this instance last read (a batch
//!   whose reads were sent before this instance's last increments does not read them again).
//!   Two instances seeing one SYN at the same instant: the one whose claim lands second has its
//!   packets dropped before they leave (the runtime checks the claim at acknowledgement; the
//!   retransmitted SYN follows the winner's choice) and takes its increment back (`claim_lost`),
//!   so one backend per connection and one count, as with `"atomic"`.
//!
//! Keys: `nf:<id>:{backends}` (the pool, see [`pool`]), `nf:<id>:{lb-conns:<addr>}` (active
//! connections of a backend), `nf:<id>:{<hash of client -> VIP 5-tuple>}:lb` -> [`Conn`].
//!
//! Config (JSON): `{"vip": "10.0.0.100", "port": 80, "proto": "tcp", "backends":
//! ["10.1.0.1:8080", "10.1.0.2:8080"], "on_backend_down": "keep", "timeouts": {...},
//! "conn_claim": "atomic"}` plus the runtime options; the older `idle_timeout_ms` /
//! `close_timeout_ms` instead of `timeouts` still work as they did.

pub mod pool;

use nfcore::config::{parse_nf, present, Int, Ip, List, Object};
use nfcore::timeouts::{Legacy, TimeoutsConfig};
use nfcore::{
    Ctx, FlowStore, Key, KeySpace, NetworkFunction, Parsed, StoreError, Timeouts, Track, Verdict,
};
use packet::rewrite::{set_dst, set_src};
use packet::{FlowKey, PROTO_TCP, PROTO_UDP, TCP_ACK, TCP_RST, TCP_SYN};
use pool::Backend;
use serde::de::{Deserializer, Error as _};
use serde::Deserialize;
use serde_json::Value;
use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

pub const TABLE: &str = "lb";
pub const POOL: &str = "backends";
/// The config's backends the pool was last made to follow (one `addr:port` a line, config
/// order): an instance whose config names others brings the change (a rolling update's new
/// instance); one whose config names these leaves the pool as it is (edits to it win).
pub const POOL_SPEC: &str = "backends-spec";

/// What `close_timeout_ms` meant when absent, before `timeouts` (kept for configs with
/// `idle_timeout_ms`).
pub const LEGACY_CLOSE_MS: u64 = 2_000;

/// Key of a backend's active-connection counter.
pub fn load_key(keys: &KeySpace, addr: &SocketAddr) -> Key {
    keys.global(&format!("lb-conns:{addr}"))
}

/// One connection's affinity record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conn {
    pub backend: SocketAddr,
    /// When the timer was last moved (ms).
    pub refreshed_ms: u64,
    /// What the connection's packets showed (direction 0: client -> VIP, 1: backend -> client):
    /// its timeout.
    pub track: Track,
}

/// Marks the byte after `refreshed_ms` as a track (an older record has 0 or 1 there: closing).
const TRACKED: u8 = 0x80;

impl Conn {
    /// `[refreshed_ms (8, LE), 0x80 | track, backend as text]`.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = self.refreshed_ms.to_le_bytes().to_vec();
        v.push(TRACKED | self.track.0);
        v.extend_from_slice(self.backend.to_string().as_bytes());
        v
    }

    /// An older record (a closing flag where the track is) decodes with [`Track::legacy`].
    pub fn decode(b: &[u8]) -> Option<Conn> {
        let t = u64::from_le_bytes(b.get(..8)?.try_into().ok()?);
        let track = match *b.get(8)? {
            0 => Track::legacy(false),
            1 => Track::legacy(true),
            x if x & TRACKED != 0 => Track(x & Track::MASK),
            _ => return None,
        };
        let backend = std::str::from_utf8(b.get(9..)?).ok()?.parse().ok()?;
        Some(Conn {
            backend,
            refreshed_ms: t,
            track,
        })
    }
}

/// How a new connection's backend choice is claimed (`conn_claim`): atomic is compare-and-set,
/// then INCRBY of the backend's counter (two blocking round trips); pipelined writes both with
/// the batch (SET NX + INCRBY).
pub use nfcore::Claim;

/// A pool value parsed (or why it could not be).
type PoolParse = Result<Vec<Backend>, String>;

nfcore::config_enum! {
    /// What an existing connection does when its backend is marked down.
    #[derive(Default)]
    pub enum OnDown { #[default] Keep = "keep", Drop = "drop" }
}

nfcore::config_enum! {
    /// The VIP's transport protocol.
    #[derive(Default)]
    enum Proto { #[default] Tcp = "tcp", Udp = "udp" }
}

/// A backend in the config: `"ADDR:PORT"`.
struct BackendAddr(SocketAddr);

impl<'de> Deserialize<'de> for BackendAddr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<BackendAddr, D::Error> {
        let v = Value::deserialize(d)?;
        v.as_str()
            .and_then(|s| s.parse().ok())
            .map(BackendAddr)
            .ok_or_else(|| D::Error::custom(format!("must be \"ADDR:PORT\", not {v}")))
    }
}

/// The config as written (besides the runtime options).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    vip: Ip,
    port: Int<1, 65535>,
    #[serde(default)]
    proto: Proto,
    backends: List<BackendAddr, 1, 1024>,
    #[serde(default)]
    on_backend_down: OnDown,
    #[serde(default, deserialize_with = "present")]
    timeouts: Option<Object<TimeoutsConfig>>,
    #[serde(default, deserialize_with = "present")]
    idle_timeout_ms: Option<Int<1, 86_400_000>>,
    #[serde(default, deserialize_with = "present")]
    close_timeout_ms: Option<Int<1, 86_400_000>>,
    #[serde(default)]
    conn_claim: Claim,
}

#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    new_conns: u64,
    lost_races: u64,
    to_backend: u64,
    to_client: u64,
    no_conn: u64,
    no_backend: u64,
    backend_down_dropped: u64,
    bad_pool: u64,
    passthrough: u64,
    expired: u64,
}

/// The load balancer NF.
pub struct LoadBalancer {
    vip: IpAddr,
    port: u16,
    proto: u8,
    seed: Vec<Backend>,
    on_down: OnDown,
    timeouts: Timeouts,
    claim: Claim,
    /// Pipelined claim: each backend's counter as last read (used when a batch does not know it).
    last_load: HashMap<SocketAddr, i64>,
    /// Last pool value read from the tier and its parse (parsing once per change, not per packet).
    pool_cache: RefCell<(Vec<u8>, PoolParse)>,
    /// Connections this instance opened per backend since it last saw the counter at a value:
    /// (counter value seen, opened since) so several SYNs in one batch still spread.
    opened: HashMap<SocketAddr, (i64, i64)>,
    c: Counters,
}

enum Way {
    /// Client -> VIP.
    ToVip,
    /// Possibly a backend's reply (source is in the pool).
    FromBackend,
    Other,
}

impl LoadBalancer {
    pub fn from_config(cfg: &Value) -> Result<LoadBalancer, String> {
        let c: Config = parse_nf(cfg, "lb config")?;
        let vip = c.vip.0;
        let mut seed = Vec::new();
        for (i, BackendAddr(addr)) in c.backends.0.into_iter().enumerate() {
            if addr.is_ipv4() != vip.is_ipv4() {
                return Err(format!(
                    "backends[{i}]: address family differs from the vip"
                ));
            }
            if addr.port() == 0 || seed.iter().any(|s: &Backend| s.addr == addr) {
                return Err(format!("backends[{i}]: port 0 or duplicate backend {addr}"));
            }
            if addr.ip() == vip {
                return Err(format!("backends[{i}]: must not be the vip"));
            }
            seed.push(Backend {
                addr,
                up: true,
                drain: false,
            });
        }
        let seed_enc = pool::encode(&seed);
        Ok(LoadBalancer {
            vip,
            port: c.port.0 as u16,
            proto: match c.proto {
                Proto::Tcp => PROTO_TCP,
                Proto::Udp => PROTO_UDP,
            },
            pool_cache: RefCell::new((seed_enc, Ok(seed.clone()))),
            seed,
            on_down: c.on_backend_down,
            timeouts: Timeouts::resolve(
                c.timeouts.map(|t| t.0),
                Legacy {
                    idle_ms: c.idle_timeout_ms.map(|x| x.0),
                    close_ms: c.close_timeout_ms.map(|x| x.0),
                    close_default_ms: Some(LEGACY_CLOSE_MS),
                },
            )?,
            claim: c.conn_claim,
            last_load: HashMap::new(),
            opened: HashMap::new(),
            c: Counters::default(),
        })
    }

    fn way(&self, pkt: &Parsed) -> Way {
        if pkt.proto != self.proto {
            return Way::Other;
        }
        let (sp, dp) = pkt.ports();
        if pkt.dst == self.vip && dp == self.port {
            return Way::ToVip;
        }
        let src = SocketAddr::new(pkt.src, sp);
        let cache = self.pool_cache.borrow();
        match &cache.1 {
            Ok(p) if p.iter().any(|b| b.addr == src) => Way::FromBackend,
            // An unreadable pool: treat possible replies as replies (they fail closed below).
            Err(_) => Way::FromBackend,
            _ => Way::Other,
        }
    }

    /// Key of the connection as the client sees it (client -> VIP), for both directions.
    fn conn_key(&self, keys: &KeySpace, client: IpAddr, client_port: u16) -> Key {
        let fk = FlowKey {
            src: client,
            dst: self.vip,
            src_port: client_port,
            dst_port: self.port,
            proto: self.proto,
        };
        keys.flow(fk.stable_hash(), TABLE)
    }

    /// The pool as this batch sees it (parsed once per distinct value).
    fn pool(&mut self, ctx: &mut Ctx<'_>) -> Result<PoolParse, StoreError> {
        let key = ctx.keys.global(POOL);
        let raw = ctx.get(&key)?;
        let mut cache = self.pool_cache.borrow_mut();
        match raw {
            // Not seeded (init did not run on this tier): the config's pool.
            None => Ok(Ok(self.seed.clone())),
            Some(r) => {
                if cache.0 != r {
                    *cache = (r.to_vec(), pool::decode(r));
                }
                Ok(cache.1.clone())
            }
        }
    }

    fn is_new(&self, pkt: &Parsed) -> bool {
        self.proto == PROTO_UDP || pkt.tcp_flags() & (TCP_SYN | TCP_ACK | TCP_RST) == TCP_SYN
    }

    /// The timeouts in use.
    pub fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }

    /// A packet going `dir` (0: client -> VIP, 1: backend -> client) with TCP `flags`: record
    /// what it showed and move the timer (on a change, or when a quarter of the timeout passed).
    fn touch(&self, ctx: &mut Ctx<'_>, key: &Key, conn: &mut Conn, dir: usize, flags: u8) {
        let now = ctx.now_ms();
        let track = conn.track.seen(dir, self.proto, flags);
        let timeout = self.timeouts.for_track(track, self.proto);
        if track != conn.track || now.saturating_sub(conn.refreshed_ms) >= timeout / 4 {
            conn.track = track;
            conn.refreshed_ms = now;
            ctx.set(key, conn.encode());
            ctx.timer_set(key.clone(), now + timeout);
        }
    }

    /// Algorithm 1 lines 4-8: choose a backend and claim the connection for it.
    fn open(
        &mut self,
        ctx: &mut Ctx<'_>,
        key: &Key,
        flow_hash: u64,
        pool: &[Backend],
        flags: u8,
    ) -> Result<Option<Conn>, StoreError> {
        let mut loads = HashMap::new();
        for b in pool.iter().filter(|b| b.up) {
            let k = load_key(ctx.keys, &b.addr);
            let parse = |v: Option<&[u8]>| {
                v.and_then(|v| std::str::from_utf8(v).ok()?.parse::<i64>().ok())
                    .unwrap_or(0)
            };
            let seen = match self.claim {
                Claim::Atomic => parse(ctx.get(&k)?),
                // Advisory: the last value this instance saw when the batch does not know it.
                Claim::Pipelined => match ctx.peek(&k) {
                    Some(v) => {
                        let n = parse(v);
                        self.last_load.insert(b.addr, n);
                        n
                    }
                    None => self.last_load.get(&b.addr).copied().unwrap_or(0),
                },
            };
            let extra = match self.opened.get(&b.addr) {
                Some((at, n)) if *at == seen => *n,
                _ => 0,
            };
            loads.insert(b.addr, (seen, seen + extra));
        }
        let Some(addr) = pool::choose(pool, |a| loads.get(a).map_or(0, |l| l.1), flow_hash) else {
            self.c.no_backend += 1;
            return Ok(None);
        };
        let now = ctx.now_ms();
        let cand = Conn {
            backend: addr,
            refreshed_ms: now,
            track: Track::default().seen(0, self.proto, flags),
        };
        let enc = cand.encode();
        let lk = load_key(ctx.keys, &addr);
        let claimed = match self.claim {
            Claim::Atomic => ctx.store().compare_and_set(key, None, Some(&enc))?,
            Claim::Pipelined => true,
        };
        if claimed {
            self.c.new_conns += 1;
            match self.claim {
                Claim::Atomic => {
                    ctx.store().incr_by(&lk, 1)?;
                }
                Claim::Pipelined => ctx.incr(&lk, 1),
            }
            let seen = loads[&addr].0;
            let e = self.opened.entry(addr).or_insert((seen, 0));
            if e.0 != seen {
                *e = (seen, 0);
            }
            e.1 += 1;
            match self.claim {
                Claim::Atomic => ctx.set(key, enc),
                Claim::Pipelined => ctx.claim(key, enc),
            }
            let t = self.timeouts.for_track(cand.track, self.proto);
            ctx.timer_set(key.clone(), now + t);
            Ok(Some(cand))
        } else {
            // Another instance claimed this connection first: use its choice.
            self.c.lost_races += 1;
            let mut v = Vec::new();
            ctx.store().get_many(std::slice::from_ref(key), &mut v)?;
            let won = v.pop().flatten().as_deref().and_then(Conn::decode);
            if let Some(c) = won {
                ctx.set(key, c.encode());
            }
            Ok(won)
        }
    }

    fn backend_usable(&self, pool: &[Backend], addr: &SocketAddr) -> bool {
        // A draining backend (removed from the config) keeps its connections.
        self.on_down == OnDown::Keep || pool.iter().any(|b| b.addr == *addr && (b.up || b.drain))
    }

    /// Make the tier's pool follow the config's backends ([`pool::reconcile`]; compare-and-set,
    /// so instances reconfigured one after another, or marking health meanwhile, agree).
    fn reconcile_pool(
        &self,
        store: &mut dyn FlowStore,
        keys: &KeySpace,
        config: &[SocketAddr],
    ) -> Result<Vec<Backend>, nfcore::Refused> {
        let key = keys.global(POOL);
        for _ in 0..100 {
            let mut v = Vec::new();
            store.get_many(std::slice::from_ref(&key), &mut v)?;
            let cur = v.pop().flatten();
            let pool = match &cur {
                None => self.seed.clone(),
                Some(raw) => pool::decode(raw).map_err(|e| {
                    nfcore::Refused::Invalid(format!("backends: the pool in the tier: {e}"))
                })?,
            };
            let gone: Vec<Key> = pool
                .iter()
                .filter(|b| !config.contains(&b.addr))
                .map(|b| load_key(keys, &b.addr))
                .collect();
            let mut loads = Vec::new();
            if !gone.is_empty() {
                store.get_many(&gone, &mut loads)?;
            }
            let mut active = HashMap::new();
            for (b, l) in pool
                .iter()
                .filter(|b| !config.contains(&b.addr))
                .zip(&loads)
            {
                let n = l
                    .as_deref()
                    .and_then(|v| std::str::from_utf8(v).ok()?.parse::<i64>().ok())
                    .unwrap_or(0);
                active.insert(b.addr, n);
            }
            let next = pool::reconcile(&pool, config, |a| active.get(a).copied().unwrap_or(0));
            let enc = pool::encode(&next);
            if cur.as_deref() == Some(&enc[..])
                || store.compare_and_set(&key, cur.as_deref(), Some(&enc))?
            {
                return Ok(next);
            }
        }
        Err(nfcore::Refused::Store(StoreError(
            "backend pool keeps changing; try again".into(),
        )))
    }

    /// A draining backend whose last connection ended leaves the pool.
    fn drop_drained(
        &self,
        store: &mut dyn FlowStore,
        keys: &KeySpace,
        addr: SocketAddr,
    ) -> Result<(), StoreError> {
        let key = keys.global(POOL);
        for _ in 0..100 {
            let mut v = Vec::new();
            store.get_many(std::slice::from_ref(&key), &mut v)?;
            let Some(cur) = v.pop().flatten() else {
                return Ok(());
            };
            let Ok(mut p) = pool::decode(&cur) else {
                return Ok(());
            };
            let before = p.len();
            p.retain(|b| !(b.addr == addr && b.drain));
            if p.len() == before
                || store.compare_and_set(&key, Some(&cur), Some(&pool::encode(&p)))?
            {
                return Ok(());
            }
        }
        Ok(())
    }

    fn client_packet(
        &mut self,
        ctx: &mut Ctx<'_>,
        frame: &mut [u8],
        pkt: &Parsed,
    ) -> Result<Verdict, StoreError> {
        let (sp, _) = pkt.ports();
        let key = self.conn_key(ctx.keys, pkt.src, sp);
        let pool = match self.pool(ctx)? {
            Ok(p) => p,
            Err(_) => {
                self.c.bad_pool += 1;
                return Ok(Verdict::Drop);
            }
        };
        let existing = ctx.get(&key)?.and_then(Conn::decode);
        let mut conn = match existing {
            Some(c) => c,
            None if self.is_new(pkt) => {
                let h = pkt.flow_key().stable_hash();
                match self.open(ctx, &key, h, &pool, pkt.tcp_flags())? {
                    Some(c) => c,
                    None => return Ok(Verdict::Drop),
                }
            }
            None => {
                self.c.no_conn += 1;
                return Ok(Verdict::Drop);
            }
        };
        if !self.backend_usable(&pool, &conn.backend) {
            self.c.backend_down_dropped += 1;
            return Ok(Verdict::Drop);
        }
        self.touch(ctx, &key, &mut conn, 0, pkt.tcp_flags());
        if set_dst(frame, pkt, conn.backend.ip(), conn.backend.port()).is_err() {
            return Ok(Verdict::Drop);
        }
        self.c.to_backend += 1;
        Ok(Verdict::Forward)
    }

    fn backend_packet(
        &mut self,
        ctx: &mut Ctx<'_>,
        frame: &mut [u8],
        pkt: &Parsed,
    ) -> Result<Verdict, StoreError> {
        let (sp, dp) = pkt.ports();
        let pool = match self.pool(ctx)? {
            Ok(p) => p,
            Err(_) => {
                self.c.bad_pool += 1;
                return Ok(Verdict::Drop);
            }
        };
        let src = SocketAddr::new(pkt.src, sp);
        if !pool.iter().any(|b| b.addr == src) {
            self.c.passthrough += 1;
            return Ok(Verdict::Forward);
        }
        let key = self.conn_key(ctx.keys, pkt.dst, dp);
        let Some(mut conn) = ctx
            .get(&key)?
            .and_then(Conn::decode)
            .filter(|c| c.backend == src)
        else {
            self.c.no_conn += 1;
            return Ok(Verdict::Drop);
        };
        if !self.backend_usable(&pool, &conn.backend) {
            self.c.backend_down_dropped += 1;
            return Ok(Verdict::Drop);
        }
        self.touch(ctx, &key, &mut conn, 1, pkt.tcp_flags());
        if set_src(frame, pkt, self.vip, self.port).is_err() {
            return Ok(Verdict::Drop);
        }
        self.c.to_client += 1;
        Ok(Verdict::Forward)
    }
}

/// The [`POOL_SPEC`] value of a config's backends.
fn spec_text(addrs: &[SocketAddr]) -> Vec<u8> {
    addrs
        .iter()
        .map(|a| format!("{a}\n"))
        .collect::<String>()
        .into_bytes()
}

/// Mark `addr` up or down in the pool of the LB `keys` (compare-and-set loop, so concurrent
/// edits are not lost). Returns false if `addr` is not in the pool.
pub fn set_backend_state(
    store: &mut dyn FlowStore,
    keys: &KeySpace,
    addr: SocketAddr,
    up: bool,
) -> Result<bool, String> {
    let key = keys.global(POOL);
    for _ in 0..100 {
        let mut v = Vec::new();
        store
            .get_many(std::slice::from_ref(&key), &mut v)
            .map_err(|e| e.to_string())?;
        let cur = v.pop().flatten().ok_or("backend pool not initialised")?;
        let mut p = pool::decode(&cur)?;
        let Some(b) = p.iter_mut().find(|b| b.addr == addr && !b.drain) else {
            return Ok(false);
        };
        b.up = up;
        if store
            .compare_and_set(&key, Some(&cur), Some(&pool::encode(&p)))
            .map_err(|e| e.to_string())?
        {
            return Ok(true);
        }
    }
    Err("backend pool keeps changing; try again".into())
}

impl NetworkFunction for LoadBalancer {
    fn name(&self) -> &'static str {
        "lb"
    }

    fn record_lifetime_ms(&self) -> Option<u64> {
        Some(self.timeouts.longest_ms())
    }

    /// Backends (added, removed: draining while they have connections, which keep their
    /// backend), `on_backend_down`, timeouts and `conn_claim` change in place, counters kept.
    /// Another `vip`, `port` or `proto` is another service: a rolling update (`Ok(false)`).
    fn reconfigure(
        &mut self,
        cfg: &Value,
        store: &mut dyn FlowStore,
        keys: &KeySpace,
    ) -> Result<bool, nfcore::Refused> {
        let new = LoadBalancer::from_config(cfg)?;
        if (new.vip, new.port, new.proto) != (self.vip, self.port, self.proto) {
            return Ok(false);
        }
        let addrs: Vec<SocketAddr> = new.seed.iter().map(|b| b.addr).collect();
        let pool = self.reconcile_pool(store, keys, &addrs)?;
        *self.pool_cache.borrow_mut() = (pool::encode(&pool), Ok(pool));
        store.write_many(&[flowstore::WriteOp::Set {
            key: keys.global(POOL_SPEC),
            value: spec_text(&addrs),
        }])?;
        self.seed = new.seed;
        (self.on_down, self.timeouts, self.claim) = (new.on_down, new.timeouts, new.claim);
        Ok(true)
    }

    /// Seeds the shared pool once (an existing pool, possibly edited, wins), unless the pool
    /// was made for other backends ([`POOL_SPEC`]): then it follows this config's as in
    /// [`Self::reconfigure`] (a rolling update's new instances bring a change of backends; the
    /// health marks of backends kept stay).
    fn init(&mut self, store: &mut dyn FlowStore, keys: &KeySpace) -> Result<(), nfcore::Refused> {
        let addrs: Vec<SocketAddr> = self.seed.iter().map(|b| b.addr).collect();
        let (spec_key, mine) = (keys.global(POOL_SPEC), spec_text(&addrs));
        // The first instance (or the first since specs): no read.
        if !store.compare_and_set(&spec_key, None, Some(&mine))? {
            let mut v = Vec::new();
            store.get_many(std::slice::from_ref(&spec_key), &mut v)?;
            if let Some(cur) = v.pop().flatten().filter(|cur| *cur != mine) {
                let pool = self.reconcile_pool(store, keys, &addrs)?;
                *self.pool_cache.borrow_mut() = (pool::encode(&pool), Ok(pool));
                store.compare_and_set(&spec_key, Some(&cur), Some(&mine))?;
                return Ok(());
            }
        }
        store.compare_and_set(&keys.global(POOL), None, Some(&pool::encode(&self.seed)))?;
        Ok(())
    }

    fn read_set(&self, keys: &KeySpace, pkt: &Parsed, _frame: &[u8], out: &mut Vec<Key>) {
        let (sp, dp) = pkt.ports();
        match self.way(pkt) {
            Way::ToVip => {
                out.push(keys.global(POOL));
                out.push(self.conn_key(keys, pkt.src, sp));
                if self.is_new(pkt) {
                    if let Ok(p) = &self.pool_cache.borrow().1 {
                        for b in p.iter().filter(|b| b.up) {
                            out.push(load_key(keys, &b.addr));
                        }
                    }
                }
            }
            Way::FromBackend => {
                out.push(keys.global(POOL));
                out.push(self.conn_key(keys, pkt.dst, dp));
            }
            // The pool may have gained a backend since this instance last read it.
            Way::Other if pkt.proto == self.proto => out.push(keys.global(POOL)),
            Way::Other => {}
        }
    }

    fn process(
        &mut self,
        ctx: &mut Ctx<'_>,
        frame: &mut Vec<u8>,
        pkt: &Parsed,
    ) -> Result<Verdict, StoreError> {
        if pkt.proto == self.proto {
            // Refresh the parsed pool first: whether a packet is a backend's reply depends on it.
            let _ = self.pool(ctx)?;
        }
        match self.way(pkt) {
            Way::ToVip => self.client_packet(ctx, frame, pkt),
            Way::FromBackend => self.backend_packet(ctx, frame, pkt),
            Way::Other => {
                self.c.passthrough += 1;
                Ok(Verdict::Forward)
            }
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, member: &[u8]) -> Result<(), StoreError> {
        let Some(cur) = ctx.get_owned(member)? else {
            return Ok(());
        };
        let Some(conn) = Conn::decode(&cur) else {
            ctx.del(member);
            return Ok(());
        };
        let timeout = self.timeouts.for_track(conn.track, self.proto);
        if ctx.now_ms() < conn.refreshed_ms + timeout {
            return Ok(()); // refreshed after the timer was claimed; its new timer is pending
        }
        // Delete only what we read (a concurrent refresh wins), then release the backend slot.
        if ctx.store().compare_and_set(member, Some(&cur), None)? {
            self.c.expired += 1;
            ctx.del(member);
            let lk = load_key(ctx.keys, &conn.backend);
            let left = ctx.store().incr_by(&lk, -1)?;
            // No longer in the config: it may be draining (the tier's pool says).
            if left <= 0 && !self.seed.iter().any(|b| b.addr == conn.backend) {
                let keys = ctx.keys.clone();
                self.drop_drained(ctx.store(), &keys, conn.backend)?;
            }
        }
        Ok(())
    }

    /// A pipelined claim of a connection was lost: take back the backend count it added.
    fn claim_lost(
        &mut self,
        ctx: &mut Ctx<'_>,
        _key: &[u8],
        value: &[u8],
    ) -> Result<(), StoreError> {
        self.c.lost_races += 1;
        if let Some(conn) = Conn::decode(value) {
            ctx.incr(&load_key(ctx.keys, &conn.backend), -1);
            if let Some(e) = self.opened.get_mut(&conn.backend) {
                e.1 = e.1.saturating_sub(1);
            }
        }
        Ok(())
    }

    fn stats(&self) -> Value {
        let c = &self.c;
        serde_json::json!({
            "new_conns": c.new_conns, "lost_races": c.lost_races, "to_backend": c.to_backend,
            "to_client": c.to_client, "no_conn": c.no_conn, "no_backend": c.no_backend,
            "backend_down_dropped": c.backend_down_dropped, "bad_pool": c.bad_pool,
            "passthrough": c.passthrough, "expired": c.expired,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_older_records_decode() {
        let c = Conn {
            backend: "10.1.0.1:8080".parse().unwrap(),
            refreshed_ms: 5,
            track: Track(Track::SEEN[0] | Track::SEEN[1] | Track::FIN[1]),
        };
        assert_eq!(Conn::decode(&c.encode()), Some(c));
        // The layout before tracks: a closing flag (0 or 1) where the track is.
        for (flag, closing) in [(0u8, false), (1, true)] {
            let mut old = c.encode();
            old[8] = flag;
            let got = Conn::decode(&old).unwrap();
            assert_eq!(got.track, Track::legacy(closing));
            assert_eq!((got.backend, got.refreshed_ms), (c.backend, 5));
        }
        let mut bad = c.encode();
        bad[8] = 2;
        assert_eq!(Conn::decode(&bad), None);
    }
}
