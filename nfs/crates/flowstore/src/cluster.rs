//! Redis Cluster implementation of [`FlowStore`] and [`Pipeline`] (`redis-cluster://HOST:PORT,...`).
//!
//! A batch's keys are grouped by hash slot (a multi-key command may only name keys of one slot:
//! one `MGET` per slot, and the write runs of [`RedisStore`] per slot) and the slots by their
//! master: each master gets one pipeline per batch, and the pipelines of all masters are sent
//! before any reply is awaited, so a batch costs one round trip per node, concurrently.
//!
//! Order: each master has one ordered connection for the pipeline (as [`RedisStore`] has one),
//! so a read sent after a write of the same key sees it. A slot whose commands are in flight on
//! one node keeps being routed there until they are answered, even when the map says it moved:
//! a command answered `MOVED`/`ASK` is resent (blocking, in the order the replies are read) to
//! the node named, so a later command never overtakes an earlier one of the same slot.
//!
//! Redirections: `MOVED` updates the slot's owner, marks the map for a refresh and resends the
//! command there; `ASK` resends it to the node named, after `ASKING`, without a map change;
//! `TRYAGAIN` (a multi-key command on a slot being migrated, its keys on both sides) splits the
//! command into single-key ones, `CLUSTERDOWN` is retried: both a bounded number of times
//! ([`MAX_TRIES`], [`BUSY_PAUSE`] apart), then the batch fails closed.
//!
//! Failures: a node that does not answer (connection refused or lost, timeout) fails the groups
//! in flight (the runtime fails their batches closed, as with one Redis), is not dialled again
//! for [`DOWN_FOR`], and the map is refreshed from the other nodes (`CLUSTER SLOTS`, at most
//! every [`REFRESH_EVERY`]), so once a replica is promoted its slots go to it.
//!
//! Blocking calls (compare-and-set, pools, timers, unplanned reads) go over a second connection
//! per node (as [`RedisStore`]'s side connection), after collecting the pipeline's replies when a
//! write in flight touches their keys. Every command names keys of one slot only: the NFs' keys
//! carry a hash tag per flow (`nf:<id>:{<flow>}:<table>`) or per NF-wide object (`{timers}`,
//! `{pool}` with its `{pool}:init` marker, ...); a call naming keys of two slots is an error.

use crate::commands::{self, Call};
use crate::redis_store::{handshake, Cond, RedisConfig, RedisStore};
use crate::resp::{self, Conn, Endpoint, Reply};
use crate::slots::{self, key_slot, Redirect, SLOTS};
use crate::{FastMap, FlowStore, HashFields, Key, Pipeline, StoreError, StoreStats, WriteOp};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Attempts of one command after a redirection, `TRYAGAIN` or `CLUSTERDOWN`.
pub const MAX_TRIES: usize = 5;
/// Pause before resending a command answered `TRYAGAIN` / `CLUSTERDOWN`.
pub const BUSY_PAUSE: Duration = Duration::from_millis(5);
/// At most one slot map refresh per this interval (while the map is known to be stale).
pub const REFRESH_EVERY: Duration = Duration::from_millis(10);
/// A node whose connection failed is not dialled again for this long (its commands fail at
/// once: a dead host must not cost every batch a connect timeout).
pub const DOWN_FOR: Duration = Duration::from_millis(20);

const NO_NODE: u16 = u16::MAX;
const NO_SLOT: u16 = u16::MAX;

/// Parse `redis-cluster://HOST:PORT[,HOST:PORT...]` into its seed nodes (`host:port`).
pub fn parse_cluster_url(url: &str) -> Result<Vec<String>, String> {
    let rest = url.strip_prefix("redis-cluster://").ok_or_else(|| {
        format!("bad store URL {url:?}: a cluster URL starts with redis-cluster://")
    })?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let mut seeds = Vec::new();
    for hp in rest.split(',') {
        let bad = |why: &str| {
            format!(
                "bad store URL {url:?}: expected redis-cluster://HOST:PORT[,HOST:PORT...] ({why})"
            )
        };
        if hp.is_empty() {
            return Err(bad("an empty node"));
        }
        if hp.contains('@') || hp.contains('/') || hp.contains('?') {
            return Err(bad("no credentials, database or options in the URL"));
        }
        let (host, port) = if let Some(v6) = hp.strip_prefix('[') {
            let (h, p) = v6
                .split_once("]:")
                .ok_or_else(|| bad(&format!("{hp:?} has no port")))?;
            (h, p)
        } else {
            hp.rsplit_once(':')
                .ok_or_else(|| bad(&format!("{hp:?} has no port")))?
        };
        let port: u16 = port
            .parse()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| bad(&format!("{hp:?}: port must be 1-65535")))?;
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(bad(&format!("{hp:?} has no host")));
        }
        let n = slots::join_host_port(host, port);
        if !seeds.contains(&n) {
            seeds.push(n);
        }
    }
    Ok(seeds)
}

/// What a command's reply means to its group.
#[derive(Debug, Clone)]
enum Kind {
    /// `MGET` of keys whose values go to these positions of the group's output.
    Mget(Vec<u32>),
    /// A write; a conditional one with how its reply says it applied and its outcome position.
    Write(Option<(Cond, u32)>),
    /// `WAIT`: at least this many replicas must acknowledge.
    Wait(u32),
    /// A blocking call: its reply is returned.
    Call,
}

/// One command of a node's sub-group: its slot (`NO_SLOT` for `WAIT`) and its bytes.
#[derive(Debug, Clone)]
struct Cmd {
    slot: u16,
    kind: Kind,
    start: u32,
    end: u32,
}

/// The commands of one group sent to one node, encoded.
#[derive(Debug, Default)]
struct Sub {
    cmds: Vec<Cmd>,
    bytes: Vec<u8>,
}

impl Sub {
    fn clear(&mut self) {
        self.cmds.clear();
        self.bytes.clear();
    }

    fn push(&mut self, slot: u16, kind: Kind, start: usize) {
        self.cmds.push(Cmd {
            slot,
            kind,
            start: start as u32,
            end: self.bytes.len() as u32,
        });
    }
}

/// A group in flight (one [`Pipeline::send_reads`] or [`Pipeline::send_writes`]).
#[derive(Debug)]
struct Group {
    /// Values (reads) or outcomes (writes, one per conditional write) returned by `recv`.
    n_out: usize,
    reads: bool,
    /// Nodes holding a sub-group of it, in order.
    nodes: Vec<u16>,
    /// Fingerprints of the keys it writes (blocking calls on other keys use the side connections).
    write_keys: Vec<u64>,
}

/// A master the client talks to.
struct Node {
    addr: String,
    /// The pipeline's connection.
    conn: Option<Conn>,
    /// Blocking calls and resent commands.
    side: Option<Conn>,
    /// Sub-groups sent on `conn` whose replies are not read, oldest first.
    subs: VecDeque<Sub>,
    /// Not dialled again before this (its last connection failed).
    down_until: Option<Instant>,
    last_error: String,
}

/// What one reply asks for.
enum Got {
    Done,
    /// Resend the command (redirection, `TRYAGAIN`, `CLUSTERDOWN`).
    Retry(Retry),
    /// An error reply (`NOPERM`, `WRONGTYPE`, ...): the group fails.
    Fail(String),
}

#[derive(Debug, Clone)]
enum Retry {
    Redirect(Redirect),
    Busy(String),
}

/// A command to resend after its group's replies are read.
struct Resend {
    cmd: Cmd,
    bytes: Vec<u8>,
    why: Retry,
    /// The node that answered (for a `TRYAGAIN` / `CLUSTERDOWN`, where to ask again).
    from: u16,
}

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError(e.to_string())
}

/// A cheap fingerprint of a key (FNV-1a), for the side-connection check (as in `RedisStore`).
fn fingerprint(key: &[u8]) -> u64 {
    key.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Classify an error reply from node `addr`.
fn classify(e: String, addr: &str) -> Got {
    if let Some(r) = slots::parse_redirect(&e, addr) {
        return Got::Retry(Retry::Redirect(r));
    }
    if e.starts_with("TRYAGAIN") || e.starts_with("CLUSTERDOWN") {
        return Got::Retry(Retry::Busy(e));
    }
    Got::Fail(format!("{addr}: {e}"))
}

/// Read the reply of `cmd` from `c`: values and outcomes go to `out`, a short `WAIT` clears
/// `durable`, a blocking call's reply goes to `reply`.
fn read_cmd(
    c: &mut Conn,
    cmd: &Cmd,
    addr: &str,
    out: &mut [Option<Vec<u8>>],
    tmp: &mut Vec<Option<Vec<u8>>>,
    durable: &mut bool,
    reply: &mut Option<Reply>,
) -> std::io::Result<Got> {
    Ok(match &cmd.kind {
        Kind::Mget(pos) => {
            tmp.clear();
            match c.read_values(tmp)? {
                Some(k) if k == pos.len() => {
                    for (&p, v) in pos.iter().zip(tmp.drain(..)) {
                        out[p as usize] = v;
                    }
                    Got::Done
                }
                Some(k) => Got::Fail(format!(
                    "{addr}: unexpected MGET reply: {k} values for {} keys",
                    pos.len()
                )),
                None => match c.read_reply()? {
                    Reply::Error(e) => classify(e, addr),
                    r => Got::Fail(format!("{addr}: unexpected MGET reply {r:?}")),
                },
            }
        }
        Kind::Write(cond) => match c.read_reply()? {
            Reply::Error(e) => {
                let g = classify(e, addr);
                if let (Got::Fail(_), Some((_, p))) = (&g, cond) {
                    out[*p as usize] = None;
                }
                g
            }
            r => {
                if let Some((kind, p)) = cond {
                    let applied = match kind {
                        Cond::Nx => r == Reply::Status,
                        Cond::Cas => r == Reply::Int(1),
                    };
                    out[*p as usize] = applied.then(Vec::new);
                }
                Got::Done
            }
        },
        Kind::Wait(want) => match c.read_reply()? {
            Reply::Int(k) => {
                if k < *want as i64 {
                    *durable = false;
                }
                Got::Done
            }
            Reply::Error(e) => Got::Fail(format!("{addr}: WAIT: {e}")),
            r => Got::Fail(format!("{addr}: WAIT: unexpected reply {r:?}")),
        },
        Kind::Call => match c.read_reply()? {
            Reply::Error(e) => classify(e, addr),
            r => {
                *reply = Some(r);
                Got::Done
            }
        },
    })
}

/// The arguments of an encoded command (for splitting a multi-key one).
fn command_args(bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    match resp::parse(bytes).ok()?? {
        (Reply::Array(items), used) if used == bytes.len() => items
            .into_iter()
            .map(|r| match r {
                Reply::Bulk(b) => Some(b),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// A multi-key `MGET` / `MSET` / `DEL` as single-key commands (a `TRYAGAIN` while its slot
/// migrates: each key is then on one side or the other). None: not one of those.
fn split(cmd: &Cmd, bytes: &[u8]) -> Option<Vec<(Cmd, Vec<u8>)>> {
    let args = command_args(bytes)?;
    let name = args.first()?.to_ascii_uppercase();
    let mut out = Vec::new();
    let one = |args: &[&[u8]], kind: Kind| {
        let mut b = Vec::new();
        resp::encode(&mut b, args);
        let c = Cmd {
            slot: cmd.slot,
            kind,
            start: 0,
            end: b.len() as u32,
        };
        (c, b)
    };
    match (name.as_slice(), &cmd.kind) {
        (b"MGET", Kind::Mget(pos)) if args.len() > 2 && pos.len() == args.len() - 1 => {
            for (k, &p) in args[1..].iter().zip(pos) {
                out.push(one(&[b"MGET", k], Kind::Mget(vec![p])));
            }
        }
        (b"MSET", Kind::Write(None)) if args.len() > 3 && args.len() % 2 == 1 => {
            for kv in args[1..].chunks(2) {
                out.push(one(&[b"MSET", &kv[0], &kv[1]], Kind::Write(None)));
            }
        }
        (b"DEL", Kind::Write(None)) if args.len() > 2 => {
            for k in &args[1..] {
                out.push(one(&[b"DEL", k], Kind::Write(None)));
            }
        }
        _ => return None,
    }
    Some(out)
}

/// [`FlowStore`] on a Redis Cluster (see the module docs).
pub struct ClusterStore {
    cfg: RedisConfig,
    seeds: Vec<String>,
    nodes: Vec<Node>,
    by_addr: FastMap<String, u16>,
    /// Slot -> master (index in `nodes`), from the last refresh and `MOVED` replies.
    map: Vec<u16>,
    /// Slot -> commands of the pipeline in flight for it, and the node they went to.
    inflight: Vec<u32>,
    routed: Vec<u16>,
    groups: VecDeque<Group>,
    stash: VecDeque<(Vec<Option<Vec<u8>>>, bool)>,
    last_durable: bool,
    /// Groups queued and not pushed to the nodes yet (the newest ones).
    unsent: usize,
    stale: bool,
    last_refresh: Option<Instant>,
    /// Fewest replicas of a master at the last refresh.
    min_replicas: usize,
    stats: StoreStats,
    retired_spin: u64,
    // Scratch buffers, reused.
    order: Vec<(u16, u32)>,
    building: Vec<(u16, Sub)>,
    free_subs: Vec<Sub>,
    tmp: Vec<Option<Vec<u8>>>,
}

impl ClusterStore {
    /// Parse the URL, ask the seeds for the slot map (the first that answers) and connect to
    /// every master. Errors are one line naming what failed: no seed answered (each one's
    /// error), a wrong credential, a node without cluster support, slots without a master,
    /// masters with fewer replicas than `--store-wait` asks for.
    pub fn connect(cfg: RedisConfig) -> Result<ClusterStore, StoreError> {
        let seeds = parse_cluster_url(&cfg.url).map_err(StoreError)?;
        let mut s = ClusterStore {
            cfg,
            seeds,
            nodes: Vec::new(),
            by_addr: FastMap::default(),
            map: vec![NO_NODE; SLOTS],
            inflight: vec![0; SLOTS],
            routed: vec![NO_NODE; SLOTS],
            groups: VecDeque::new(),
            stash: VecDeque::new(),
            last_durable: true,
            unsent: 0,
            stale: true,
            last_refresh: None,
            min_replicas: 0,
            stats: StoreStats::default(),
            retired_spin: 0,
            order: Vec::new(),
            building: Vec::new(),
            free_subs: Vec::new(),
            tmp: Vec::new(),
        };
        s.initial_map()?;
        // Connect to every master now (a node that refuses is an error at start).
        let masters: Vec<u16> = {
            let mut m: Vec<u16> = s.map.clone();
            m.sort_unstable();
            m.dedup();
            m
        };
        for ni in masters {
            s.ensure_conn(ni)?;
        }
        s.stats.refreshes = 0;
        Ok(s)
    }

    /// The masters' addresses (`host:port`), in the order of their first slot.
    pub fn masters(&self) -> Vec<String> {
        let mut seen = Vec::new();
        for &n in &self.map {
            if n != NO_NODE && !seen.contains(&n) {
                seen.push(n);
            }
        }
        seen.iter()
            .map(|&n| self.nodes[n as usize].addr.clone())
            .collect()
    }

    /// The master serving `key` in the current map.
    pub fn master_of(&self, key: &[u8]) -> Option<&str> {
        let n = self.map[key_slot(key) as usize];
        (n != NO_NODE).then(|| self.nodes[n as usize].addr.as_str())
    }

    fn initial_map(&mut self) -> Result<(), StoreError> {
        let mut errors = Vec::new();
        for seed in self.seeds.clone() {
            let mut c = match Conn::connect(&Endpoint::Tcp(seed.clone()), self.cfg.timeout) {
                Ok(c) => c,
                Err(e) => {
                    errors.push(format!("{seed}: {e}"));
                    continue;
                }
            };
            // A credential error is the answer: not a reason to try another seed.
            handshake(&mut c, &self.cfg, &format!("cluster node {seed}"), true)?;
            let r = match cluster_slots(&mut c) {
                Ok(r) => r,
                Err(e) => {
                    errors.push(format!("{seed}: {e}"));
                    continue;
                }
            };
            if let Reply::Error(e) = &r {
                if e.contains("cluster support disabled") {
                    return Err(StoreError(format!(
                        "cluster node {seed}: not a cluster node ({e}); for one Redis use redis://{seed}"
                    )));
                }
                errors.push(format!("{seed}: CLUSTER SLOTS: {e}"));
                continue;
            }
            let ranges = slots::parse_cluster_slots(&r, &seed)
                .map_err(|e| StoreError(format!("cluster node {seed}: {e}")))?;
            let covered: usize = ranges
                .iter()
                .map(|r| r.end as usize - r.start as usize + 1)
                .sum();
            if covered < SLOTS {
                return Err(StoreError(format!(
                    "cluster node {seed}: masters serve only {covered} of {SLOTS} slots (is the cluster created?)"
                )));
            }
            self.apply(&ranges);
            if let Some(w) = self.cfg.wait {
                if self.min_replicas < w.replicas as usize {
                    return Err(StoreError(format!(
                        "--store-wait {}: a master of the cluster has only {} replica(s)",
                        w.replicas, self.min_replicas
                    )));
                }
            }
            return Ok(());
        }
        Err(StoreError(format!(
            "no seed of {} answered: {}",
            self.cfg.url,
            errors.join("; ")
        )))
    }

    /// Install a slot map.
    fn apply(&mut self, ranges: &[slots::SlotRange]) {
        self.map.fill(NO_NODE);
        self.min_replicas = usize::MAX;
        for r in ranges {
            let n = self.node_id(&r.master);
            self.map[r.start as usize..=r.end as usize].fill(n);
            self.min_replicas = self.min_replicas.min(r.replicas.len());
        }
        if ranges.is_empty() {
            self.min_replicas = 0;
        }
        self.stale = false;
        self.last_refresh = Some(Instant::now());
        self.stats.refreshes += 1;
    }

    fn node_id(&mut self, addr: &str) -> u16 {
        if let Some(&n) = self.by_addr.get(addr) {
            return n;
        }
        let n = self.nodes.len() as u16;
        self.nodes.push(Node {
            addr: addr.to_string(),
            conn: None,
            side: None,
            subs: VecDeque::new(),
            down_until: None,
            last_error: String::new(),
        });
        self.by_addr.insert(addr.to_string(), n);
        n
    }

    /// Refresh the slot map from any node that answers (known masters first, then the
    /// seeds), at most every [`REFRESH_EVERY`]. A failed refresh keeps the old map.
    fn maybe_refresh(&mut self) {
        if !self.stale
            || self
                .last_refresh
                .is_some_and(|t| t.elapsed() < REFRESH_EVERY)
        {
            return;
        }
        self.last_refresh = Some(Instant::now());
        let mut candidates: Vec<String> = self.masters();
        for s in &self.seeds {
            if !candidates.contains(s) {
                candidates.push(s.clone());
            }
        }
        for addr in candidates {
            let ni = self.node_id(&addr);
            if self.is_down(ni) {
                continue;
            }
            let r = self.side(ni).and_then(|c| cluster_slots(c).map_err(err));
            match r {
                Ok(r) => match slots::parse_cluster_slots(&r, &addr) {
                    Ok(ranges) => {
                        self.apply(&ranges);
                        return;
                    }
                    Err(_) => continue,
                },
                Err(e) => self.node_down(ni, e.0),
            }
        }
    }

    fn is_down(&self, ni: u16) -> bool {
        self.nodes[ni as usize]
            .down_until
            .is_some_and(|t| Instant::now() < t)
    }

    /// A connection to `ni` failed: drop its side connection, do not dial it for a while,
    /// refresh the map soon.
    fn node_down(&mut self, ni: u16, why: String) {
        let n = &mut self.nodes[ni as usize];
        if let Some(c) = n.side.take() {
            self.retired_spin += c.spun_ns;
        }
        n.down_until = Some(Instant::now() + DOWN_FOR);
        n.last_error = why;
        self.stale = true;
    }

    fn dial(&mut self, ni: u16) -> Result<Conn, StoreError> {
        let addr = self.nodes[ni as usize].addr.clone();
        if self.is_down(ni) {
            return Err(StoreError(format!(
                "cluster node {addr} is down ({})",
                self.nodes[ni as usize].last_error
            )));
        }
        let r = Conn::connect(&Endpoint::Tcp(addr.clone()), self.cfg.timeout)
            .map_err(|e| StoreError(format!("connect cluster node {addr}: {e}")))
            .and_then(|mut c| {
                c.set_spin(self.cfg.spin);
                handshake(&mut c, &self.cfg, &format!("cluster node {addr}"), false)?;
                Ok(c)
            });
        match r {
            Ok(c) => {
                self.nodes[ni as usize].down_until = None;
                Ok(c)
            }
            Err(e) => {
                self.node_down(ni, e.0.clone());
                Err(e)
            }
        }
    }

    fn ensure_conn(&mut self, ni: u16) -> Result<(), StoreError> {
        if self.nodes[ni as usize].conn.is_none() {
            let c = self.dial(ni)?;
            if self.stats.round_trips > 0 || self.stats.errors > 0 {
                self.stats.reconnects += 1;
            }
            self.nodes[ni as usize].conn = Some(c);
        }
        Ok(())
    }

    /// The side connection of `ni` (dialled on first use).
    fn side(&mut self, ni: u16) -> Result<&mut Conn, StoreError> {
        if self.nodes[ni as usize].side.is_none() {
            let c = self.dial(ni)?;
            self.nodes[ni as usize].side = Some(c);
        }
        Ok(self.nodes[ni as usize].side.as_mut().expect("connected"))
    }

    /// The node a command of `slot` goes to: where its commands in flight went, else its master.
    fn route(&self, slot: u16) -> Result<u16, StoreError> {
        if self.inflight[slot as usize] > 0 {
            return Ok(self.routed[slot as usize]);
        }
        match self.map[slot as usize] {
            NO_NODE => Err(StoreError(format!(
                "slot {slot} is not served by any master of the cluster"
            ))),
            n => Ok(n),
        }
    }

    /// The sub-group being built for node `ni`.
    fn building_for(&mut self, ni: u16) -> &mut Sub {
        let i = match self.building.iter().position(|(n, _)| *n == ni) {
            Some(i) => i,
            None => {
                let mut sub = self.free_subs.pop().unwrap_or_default();
                sub.clear();
                self.building.push((ni, sub));
                self.building.len() - 1
            }
        };
        &mut self.building[i].1
    }

    /// Encode the reads of `keys` into `building`: one `MGET` per slot, per node.
    fn build_reads(&mut self, keys: &[Key], pipeline: bool) -> Result<(), StoreError> {
        let slots = keys.iter().map(|k| key_slot(k));
        self.by_slot(slots, pipeline, |s, slot, ni, run| {
            let sub = s.building_for(ni);
            let start = sub.bytes.len();
            resp::encode_header(&mut sub.bytes, run.len() + 1);
            resp::encode_arg(&mut sub.bytes, b"MGET");
            for &(_, k) in run {
                resp::encode_arg(&mut sub.bytes, &keys[k as usize]);
            }
            let pos = run.iter().map(|&(_, k)| k).collect();
            sub.push(slot, Kind::Mget(pos), start);
            1
        })
    }

    /// Calls `f(self, slot, node, run)` once per slot of the items whose slots `slots` gives (in
    /// item order), in slot order; `run` = that slot's (slot, item index) pairs, items in their
    /// order. `f` returns how many commands it queued for the slot (counted in flight with
    /// `pipeline`). Stops at the first slot without a known master.
    fn by_slot(
        &mut self,
        slots: impl Iterator<Item = u16>,
        pipeline: bool,
        mut f: impl FnMut(&mut Self, u16, u16, &[(u16, u32)]) -> usize,
    ) -> Result<(), StoreError> {
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        order.extend(slots.enumerate().map(|(i, s)| (s, i as u32)));
        // (slot, index) pairs are distinct: sorting them keeps the item order within a slot.
        order.sort_unstable();
        let mut r = Ok(());
        for run in order.chunk_by(|a, b| a.0 == b.0) {
            let slot = run[0].0;
            let ni = match self.route(slot) {
                Ok(n) => n,
                Err(e) => {
                    r = Err(e);
                    break;
                }
            };
            let queued = f(self, slot, ni, run);
            if pipeline {
                self.inflight[slot as usize] += queued as u32;
                self.routed[slot as usize] = ni;
            }
        }
        self.order = order;
        r
    }

    /// Encode `ops` into `building`: per slot the write runs of [`RedisStore`] (in order within
    /// the slot), per node, then `WAIT` on every node that got writes. Returns the number of
    /// conditional writes (outcome positions in op order).
    fn build_writes(&mut self, ops: &[WriteOp], pipeline: bool) -> Result<usize, StoreError> {
        // Outcome position of each conditional write: its rank among them, in op order.
        let mut rank = vec![u32::MAX; ops.len()];
        let mut n_cond = 0u32;
        for (i, op) in ops.iter().enumerate() {
            if matches!(op, WriteOp::SetIf { .. }) {
                rank[i] = n_cond;
                n_cond += 1;
            }
        }
        let mut slot_ops: Vec<&WriteOp> = Vec::new();
        let slots = ops.iter().map(|op| key_slot(op.key()));
        self.by_slot(slots, pipeline, |s, slot, ni, run| {
            slot_ops.clear();
            slot_ops.extend(run.iter().map(|&(_, k)| &ops[k as usize]));
            let conds: Vec<u32> = run
                .iter()
                .filter(|&&(_, k)| rank[k as usize] != u32::MAX)
                .map(|&(_, k)| rank[k as usize])
                .collect();
            let sub = s.building_for(ni);
            let base = sub.bytes.len();
            let w = RedisStore::encode_writes(&mut sub.bytes, &slot_ops);
            let mut ci = w.conds.iter().zip(&conds).peekable();
            for c in 0..w.n {
                let start = w.starts[c];
                let end = w.starts.get(c + 1).copied().unwrap_or(sub.bytes.len());
                let cond = ci
                    .next_if(|((k, _), _)| *k == c)
                    .map(|((_, kind), &p)| (*kind, p));
                sub.cmds.push(Cmd {
                    slot,
                    kind: Kind::Write(cond),
                    start: start as u32,
                    end: end as u32,
                });
            }
            debug_assert!(w.starts.first().is_none_or(|&s| s == base));
            w.n
        })?;
        if let Some(w) = self.cfg.wait {
            for (_, sub) in self.building.iter_mut() {
                let start = sub.bytes.len();
                w.encode(&mut sub.bytes);
                sub.push(NO_SLOT, Kind::Wait(w.replicas), start);
            }
        }
        Ok(n_cond as usize)
    }

    /// Drop what `build_*` encoded (an error before it was sent).
    fn discard_building(&mut self, pipeline: bool) {
        for (_, mut sub) in self.building.drain(..) {
            if pipeline {
                for c in &sub.cmds {
                    if c.slot != NO_SLOT {
                        self.inflight[c.slot as usize] -= 1;
                    }
                }
            }
            sub.clear();
            self.free_subs.push(sub);
        }
    }

    /// Queue the sub-groups built on the nodes' pipeline connections as one group.
    fn commit(
        &mut self,
        reads: bool,
        n_out: usize,
        write_keys: Vec<u64>,
    ) -> Result<(), StoreError> {
        for i in 0..self.building.len() {
            let ni = self.building[i].0;
            if let Err(e) = self.ensure_conn(ni) {
                self.discard_building(true);
                return Err(self.fail_all(e));
            }
        }
        let mut nodes = Vec::with_capacity(self.building.len());
        for (ni, sub) in self.building.drain(..) {
            let node = &mut self.nodes[ni as usize];
            node.conn
                .as_mut()
                .expect("connected")
                .out
                .extend_from_slice(&sub.bytes);
            node.subs.push_back(sub);
            nodes.push(ni);
        }
        self.stats.round_trips += nodes.len() as u64;
        self.groups.push_back(Group {
            n_out,
            reads,
            nodes,
            write_keys,
        });
        self.unsent += 1;
        Ok(())
    }

    /// Forget every group in flight and the connections they were on.
    fn reset_all(&mut self) {
        for n in self.nodes.iter_mut() {
            let busy = !n.subs.is_empty() || n.conn.as_ref().is_some_and(|c| !c.out.is_empty());
            if busy {
                if let Some(c) = n.conn.take() {
                    self.retired_spin += c.spun_ns;
                }
                for mut s in n.subs.drain(..) {
                    s.clear();
                    self.free_subs.push(s);
                }
            }
        }
        if !self.groups.is_empty() {
            self.inflight.fill(0);
        }
        self.groups.clear();
        self.stash.clear();
        self.unsent = 0;
    }

    fn fail_all(&mut self, e: StoreError) -> StoreError {
        self.stats.errors += 1;
        self.reset_all();
        self.stale = true;
        e
    }

    /// Push every queued sub-group to its node.
    fn flush_all(&mut self) -> Result<(), StoreError> {
        let mut failed = None;
        for (i, n) in self.nodes.iter_mut().enumerate() {
            if let Some(c) = n.conn.as_mut() {
                if let Err(e) = c.flush() {
                    failed = Some((i as u16, format!("cluster node {}: {e}", n.addr)));
                    break;
                }
            }
        }
        self.unsent = 0;
        if let Some((ni, e)) = failed {
            self.node_down(ni, e.clone());
            return Err(self.fail_all(StoreError(e)));
        }
        Ok(())
    }

    /// Read the replies of the oldest group; values/outcomes into `out`; whether durable.
    fn recv_group(&mut self, out: &mut Vec<Option<Vec<u8>>>) -> Result<bool, StoreError> {
        let g = self
            .groups
            .pop_front()
            .ok_or_else(|| StoreError("no pipeline group in flight".into()))?;
        out.clear();
        out.resize(g.n_out, if g.reads { None } else { Some(Vec::new()) });
        let mut durable = true;
        let mut first_err: Option<String> = None;
        let mut resend = Vec::new();
        let mut tmp = std::mem::take(&mut self.tmp);
        for &ni in &g.nodes {
            let node = &mut self.nodes[ni as usize];
            let Some(mut sub) = node.subs.pop_front() else {
                self.tmp = tmp;
                return Err(self.fail_all(StoreError("pipeline out of step".into())));
            };
            let addr = node.addr.clone();
            let Some(c) = node.conn.as_mut() else {
                self.tmp = tmp;
                return Err(
                    self.fail_all(StoreError(format!("cluster node {addr}: not connected")))
                );
            };
            let mut io_err = None;
            for cmd in &sub.cmds {
                if cmd.slot != NO_SLOT {
                    let f = &mut self.inflight[cmd.slot as usize];
                    *f = f.saturating_sub(1);
                }
                if io_err.is_some() {
                    continue;
                }
                let mut reply = None;
                match read_cmd(c, cmd, &addr, out, &mut tmp, &mut durable, &mut reply) {
                    Err(e) => io_err = Some(format!("cluster node {addr}: {e}")),
                    Ok(Got::Done) => {}
                    Ok(Got::Retry(why)) => resend.push(Resend {
                        cmd: cmd.clone(),
                        bytes: sub.bytes[cmd.start as usize..cmd.end as usize].to_vec(),
                        why,
                        from: ni,
                    }),
                    Ok(Got::Fail(e)) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
            sub.clear();
            self.free_subs.push(sub);
            if let Some(e) = io_err {
                self.tmp = tmp;
                self.node_down(ni, e.clone());
                return Err(self.fail_all(StoreError(e)));
            }
        }
        self.tmp = tmp;
        if let Some(e) = first_err {
            return Err(StoreError(e));
        }
        if !resend.is_empty() {
            self.resend(resend, out, &mut durable, &mut None)?;
        }
        if !durable {
            self.stats.wait_short += 1;
        }
        Ok(durable)
    }

    /// Resend commands answered with a redirection or `TRYAGAIN`/`CLUSTERDOWN`, one by one in
    /// order, over the side connections (nothing of ours is in flight there); then `WAIT` on
    /// every node that took a resent write.
    fn resend(
        &mut self,
        queue: Vec<Resend>,
        out: &mut [Option<Vec<u8>>],
        durable: &mut bool,
        reply: &mut Option<Reply>,
    ) -> Result<(), StoreError> {
        let mut queue: VecDeque<(Resend, usize)> = queue.into_iter().map(|r| (r, 1)).collect();
        let mut wrote_on: Vec<u16> = Vec::new();
        let mut tmp = Vec::new();
        while let Some((r, tries)) = queue.pop_front() {
            if tries > MAX_TRIES {
                self.stale = true;
                return Err(StoreError(format!(
                    "slot {}: still {:?} after {MAX_TRIES} tries",
                    r.cmd.slot, r.why
                )));
            }
            let (target, asking) = match &r.why {
                Retry::Redirect(Redirect::Moved { slot, addr }) => {
                    let n = self.node_id(addr);
                    self.map[*slot as usize] = n;
                    self.stale = true;
                    self.stats.redirects += 1;
                    (n, false)
                }
                Retry::Redirect(Redirect::Ask { addr, .. }) => {
                    self.stats.redirects += 1;
                    (self.node_id(addr), true)
                }
                Retry::Busy(_) => {
                    if let Some(parts) = split(&r.cmd, &r.bytes) {
                        // Each key alone, where it is (source, or target after ASK).
                        for (cmd, bytes) in parts.into_iter().rev() {
                            let from = r.from;
                            let why = Retry::Busy(String::new());
                            queue.push_front((
                                Resend {
                                    cmd,
                                    bytes,
                                    why,
                                    from,
                                },
                                tries,
                            ));
                        }
                        // Sent below without a pause: they carry no `TRYAGAIN` of their own.
                        let (first, t) = queue.pop_front().expect("parts");
                        let target = first.from;
                        self.resend_one(
                            first,
                            t,
                            target,
                            false,
                            &mut queue,
                            out,
                            durable,
                            reply,
                            &mut wrote_on,
                            &mut tmp,
                        )?;
                        continue;
                    }
                    if !matches!(&r.why, Retry::Busy(e) if e.is_empty()) {
                        std::thread::sleep(BUSY_PAUSE);
                    }
                    self.stale = true;
                    self.maybe_refresh();
                    let t = match self.map[r.cmd.slot.min(SLOTS as u16 - 1) as usize] {
                        NO_NODE => r.from,
                        n if r.cmd.slot == NO_SLOT => {
                            let _ = n;
                            r.from
                        }
                        n => n,
                    };
                    (t, false)
                }
            };
            self.resend_one(
                r,
                tries,
                target,
                asking,
                &mut queue,
                out,
                durable,
                reply,
                &mut wrote_on,
                &mut tmp,
            )?;
        }
        if let Some(w) = self.cfg.wait {
            for ni in wrote_on {
                let c = self.side(ni)?;
                let mut cmd = Vec::new();
                w.encode(&mut cmd);
                c.out.extend_from_slice(&cmd);
                let addr = self.nodes[ni as usize].addr.clone();
                let r = (|| {
                    let c = self.nodes[ni as usize].side.as_mut().expect("connected");
                    c.flush()?;
                    c.read_reply()
                })();
                match r {
                    Ok(Reply::Int(k)) if k >= w.replicas as i64 => {}
                    Ok(Reply::Int(_)) => *durable = false,
                    Ok(r) => return Err(StoreError(format!("cluster node {addr}: WAIT: {r:?}"))),
                    Err(e) => {
                        self.node_down(ni, e.to_string());
                        return Err(StoreError(format!("cluster node {addr}: {e}")));
                    }
                }
            }
        }
        Ok(())
    }

    /// Send one command to `target`'s side connection (after `ASKING` when `asking`) and read
    /// its reply; another redirection queues it again (at the front: order is kept).
    #[allow(clippy::too_many_arguments)]
    fn resend_one(
        &mut self,
        r: Resend,
        tries: usize,
        target: u16,
        asking: bool,
        queue: &mut VecDeque<(Resend, usize)>,
        out: &mut [Option<Vec<u8>>],
        durable: &mut bool,
        reply: &mut Option<Reply>,
        wrote_on: &mut Vec<u16>,
        tmp: &mut Vec<Option<Vec<u8>>>,
    ) -> Result<(), StoreError> {
        let addr = self.nodes[target as usize].addr.clone();
        let c = self.side(target)?;
        if asking {
            resp::encode(&mut c.out, &[b"ASKING"]);
        }
        c.out.extend_from_slice(&r.bytes);
        let res = (|| -> std::io::Result<Result<Got, String>> {
            c.flush()?;
            if asking {
                if let Reply::Error(e) = c.read_reply()? {
                    return Ok(Err(format!("{addr}: ASKING: {e}")));
                }
            }
            let cmd = Cmd {
                start: 0,
                end: r.bytes.len() as u32,
                ..r.cmd.clone()
            };
            Ok(Ok(read_cmd(c, &cmd, &addr, out, tmp, durable, reply)?))
        })();
        self.stats.round_trips += 1;
        match res {
            Err(e) => {
                let e = format!("cluster node {addr}: {e}");
                self.node_down(target, e.clone());
                Err(StoreError(e))
            }
            Ok(Err(e)) | Ok(Ok(Got::Fail(e))) => Err(StoreError(e)),
            Ok(Ok(Got::Done)) => {
                if matches!(r.cmd.kind, Kind::Write(_)) && !wrote_on.contains(&target) {
                    wrote_on.push(target);
                }
                Ok(())
            }
            Ok(Ok(Got::Retry(why))) => {
                queue.push_front((
                    Resend {
                        why,
                        from: target,
                        ..r
                    },
                    tries + 1,
                ));
                Ok(())
            }
        }
    }

    /// Collect the replies of every group in flight into the stash (before a blocking call that
    /// must not overtake them).
    fn drain(&mut self) -> Result<(), StoreError> {
        if self.groups.is_empty() {
            return Ok(());
        }
        self.flush_all()?;
        while !self.groups.is_empty() {
            let mut v = Vec::new();
            match self.recv_group(&mut v) {
                Ok(d) => self.stash.push_back((v, d)),
                Err(e) => return Err(self.fail_all(e)),
            }
        }
        Ok(())
    }

    fn side_ok(&self, keys: &[&[u8]]) -> bool {
        keys.iter().all(|k| {
            let f = fingerprint(k);
            !self.groups.iter().any(|g| g.write_keys.contains(&f))
        })
    }

    /// Send what `build_*` encoded over the side connections (nothing in flight there), read
    /// it, resend what was redirected. Returns whether durable.
    fn exec_side(
        &mut self,
        out: &mut [Option<Vec<u8>>],
        reply: &mut Option<Reply>,
    ) -> Result<bool, StoreError> {
        let built: Vec<(u16, Sub)> = self.building.drain(..).collect();
        let mut sent = Vec::with_capacity(built.len());
        let mut result = Ok(());
        for (ni, sub) in built {
            if result.is_ok() {
                match self.side(ni) {
                    Ok(c) => c.out.extend_from_slice(&sub.bytes),
                    Err(e) => result = Err(e),
                }
            }
            sent.push((ni, sub));
        }
        if result.is_ok() {
            let mut failed = None;
            for &(ni, _) in &sent {
                let n = &mut self.nodes[ni as usize];
                if let Err(e) = n.side.as_mut().expect("connected").flush() {
                    failed = Some((ni, format!("cluster node {}: {e}", n.addr)));
                    break;
                }
            }
            if let Some((ni, e)) = failed {
                self.node_down(ni, e.clone());
                result = Err(StoreError(e));
            }
        }
        let mut durable = true;
        let mut first_err = result.err();
        let mut resend = Vec::new();
        let mut tmp = std::mem::take(&mut self.tmp);
        for (ni, mut sub) in sent {
            self.stats.round_trips += 1;
            if first_err.is_none() {
                let node = &mut self.nodes[ni as usize];
                let addr = node.addr.clone();
                let c = node.side.as_mut().expect("connected");
                let mut io_err = None;
                for cmd in &sub.cmds {
                    match read_cmd(c, cmd, &addr, out, &mut tmp, &mut durable, reply) {
                        Err(e) => {
                            io_err = Some(format!("cluster node {addr}: {e}"));
                            break;
                        }
                        Ok(Got::Done) => {}
                        Ok(Got::Retry(why)) => resend.push(Resend {
                            cmd: cmd.clone(),
                            bytes: sub.bytes[cmd.start as usize..cmd.end as usize].to_vec(),
                            why,
                            from: ni,
                        }),
                        Ok(Got::Fail(e)) => {
                            first_err.get_or_insert(StoreError(e));
                        }
                    }
                }
                if let Some(e) = io_err {
                    self.node_down(ni, e.clone());
                    first_err.get_or_insert(StoreError(e));
                }
            } else {
                // Replies that will not be read: the connection is out of step.
                let node = &mut self.nodes[ni as usize];
                if let Some(c) = node.side.take() {
                    self.retired_spin += c.spun_ns;
                }
            }
            sub.clear();
            self.free_subs.push(sub);
        }
        self.tmp = tmp;
        if let Some(e) = first_err {
            self.stats.errors += 1;
            self.stale = true;
            return Err(e);
        }
        if !resend.is_empty() {
            if let Err(e) = self.resend(resend, out, &mut durable, reply) {
                self.stats.errors += 1;
                return Err(e);
            }
        }
        Ok(durable)
    }

    fn with_long_timeout<T>(
        &mut self,
        key: &[u8],
        f: impl FnOnce(&mut Self) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let long = self.cfg.timeout.max(Duration::from_secs(10));
        let ni = self.map[key_slot(key) as usize];
        if ni != NO_NODE {
            if let Ok(c) = self.side(ni) {
                let _ = c.set_read_timeout(long);
            }
        }
        let r = f(self);
        if ni != NO_NODE {
            if let Some(c) = self.nodes[ni as usize].side.as_mut() {
                let _ = c.set_read_timeout(self.cfg.timeout);
            }
        }
        r
    }
}

/// `CLUSTER SLOTS` on `c` (nothing else in flight on it).
fn cluster_slots(c: &mut Conn) -> std::io::Result<Reply> {
    resp::encode(&mut c.out, &[b"CLUSTER", b"SLOTS"]);
    c.flush()?;
    c.read_reply()
}

impl Call for ClusterStore {
    /// One blocking command on keys of one slot (`write`: followed by the configured `WAIT`).
    fn call(&mut self, args: &[&[u8]], keys: &[&[u8]], write: bool) -> Result<Reply, StoreError> {
        let slot = key_slot(keys.first().copied().unwrap_or(b""));
        if keys.iter().any(|k| key_slot(k) != slot) {
            return Err(StoreError(format!(
                "a command's keys must share a hash slot in a cluster: {:?}",
                keys.iter()
                    .map(|k| String::from_utf8_lossy(k).into_owned())
                    .collect::<Vec<_>>()
            )));
        }
        if !self.groups.is_empty() && !self.side_ok(keys) {
            self.drain()?;
        }
        self.maybe_refresh();
        let ni = self.route(slot)?;
        self.building.clear();
        let wait = self.cfg.wait.filter(|_| write);
        let sub = self.building_for(ni);
        let start = sub.bytes.len();
        resp::encode(&mut sub.bytes, args);
        sub.push(slot, Kind::Call, start);
        if let Some(w) = wait {
            let start = sub.bytes.len();
            w.encode(&mut sub.bytes);
            sub.push(NO_SLOT, Kind::Wait(w.replicas), start);
        }
        let mut reply = None;
        let durable = self.exec_side(&mut [], &mut reply)?;
        if !durable {
            self.stats.wait_short += 1;
            let w = self.cfg.wait.expect("wait configured");
            return Err(StoreError(format!(
                "WAIT {} {}: fewer replicas acknowledged",
                w.replicas, w.timeout_ms
            )));
        }
        reply.ok_or_else(|| StoreError("no reply".into()))
    }
}

impl FlowStore for ClusterStore {
    fn kind(&self) -> &'static str {
        "redis-cluster"
    }

    fn get_many(&mut self, keys: &[Key], out: &mut Vec<Option<Vec<u8>>>) -> Result<(), StoreError> {
        out.clear();
        if keys.is_empty() {
            return Ok(());
        }
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        if !self.groups.is_empty() && !self.side_ok(&refs) {
            self.drain()?;
        }
        self.maybe_refresh();
        self.building.clear();
        if let Err(e) = self.build_reads(keys, false) {
            self.discard_building(false);
            return Err(e);
        }
        out.resize(keys.len(), None);
        self.exec_side(out, &mut None)?;
        self.stats.keys_read += keys.len() as u64;
        Ok(())
    }

    fn write_checked(
        &mut self,
        ops: &[WriteOp],
        failed: &mut Vec<usize>,
    ) -> Result<(), StoreError> {
        failed.clear();
        if ops.is_empty() {
            return Ok(());
        }
        self.drain()?;
        self.maybe_refresh();
        self.building.clear();
        let n_cond = match self.build_writes(ops, false) {
            Ok(n) => n,
            Err(e) => {
                self.discard_building(false);
                return Err(e);
            }
        };
        let mut outcomes = vec![Some(Vec::new()); n_cond];
        let durable = self.exec_side(&mut outcomes, &mut None)?;
        self.stats.keys_written += ops.len() as u64;
        if !durable {
            self.stats.wait_short += 1;
            let w = self.cfg.wait.expect("wait configured");
            return Err(StoreError(format!(
                "WAIT {} {}: fewer replicas acknowledged the batch's writes",
                w.replicas, w.timeout_ms
            )));
        }
        let conds = ops
            .iter()
            .enumerate()
            .filter(|(_, o)| matches!(o, WriteOp::SetIf { .. }));
        for ((i, _), applied) in conds.zip(outcomes) {
            if applied.is_none() {
                failed.push(i);
            }
        }
        Ok(())
    }

    fn compare_and_set(
        &mut self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool, StoreError> {
        commands::compare_and_set(self, key, expected, new)
    }

    fn incr_by(&mut self, key: &[u8], delta: i64) -> Result<i64, StoreError> {
        commands::incr_by(self, key, delta)
    }

    fn pool_init(&mut self, pool: &[u8], items: &[Vec<u8>]) -> Result<bool, StoreError> {
        self.with_long_timeout(pool, |s| commands::pool_init(s, pool, items))
    }

    fn pool_pop(&mut self, pool: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        commands::pool_pop(self, pool)
    }

    fn pool_pop_many(&mut self, pool: &[u8], max: usize) -> Result<Vec<Vec<u8>>, StoreError> {
        commands::pool_pop_many(self, pool, max)
    }

    fn pool_push(&mut self, pool: &[u8], item: &[u8]) -> Result<(), StoreError> {
        commands::pool_push(self, pool, item)
    }

    fn pool_len(&mut self, pool: &[u8]) -> Result<usize, StoreError> {
        commands::pool_len(self, pool)
    }

    fn timer_claim_due(
        &mut self,
        timers: &[u8],
        now_ms: u64,
        max: usize,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        commands::timer_claim_due(self, timers, now_ms, max)
    }

    fn hash_get_all(&mut self, key: &[u8]) -> Result<HashFields, StoreError> {
        commands::hash_get_all(self, key)
    }

    fn stats(&self) -> StoreStats {
        let mut s = self.stats;
        s.spin_ns += self.retired_spin;
        for n in &self.nodes {
            for c in [&n.conn, &n.side].into_iter().flatten() {
                s.spin_ns += c.spun_ns;
            }
        }
        s
    }

    fn note_unplanned_read(&mut self) {
        self.stats.unplanned_reads += 1;
    }

    fn pipeline(&mut self) -> Option<&mut dyn Pipeline> {
        Some(self)
    }
}

impl Pipeline for ClusterStore {
    fn send_reads(&mut self, keys: &[Key]) -> Result<(), StoreError> {
        self.maybe_refresh();
        self.building.clear();
        if let Err(e) = self.build_reads(keys, true) {
            self.discard_building(true);
            return Err(self.fail_all(e));
        }
        self.commit(true, keys.len(), Vec::new())?;
        self.stats.keys_read += keys.len() as u64;
        Ok(())
    }

    fn send_writes(&mut self, ops: &[WriteOp]) -> Result<(), StoreError> {
        self.maybe_refresh();
        self.building.clear();
        let n_cond = match self.build_writes(ops, true) {
            Ok(n) => n,
            Err(e) => {
                self.discard_building(true);
                return Err(self.fail_all(e));
            }
        };
        let keys = ops.iter().map(|op| fingerprint(op.key())).collect();
        self.commit(false, n_cond, keys)?;
        self.stats.keys_written += ops.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        self.flush_all()
    }

    fn recv(&mut self, out: &mut Vec<Option<Vec<u8>>>) -> Result<(), StoreError> {
        out.clear();
        if let Some((v, durable)) = self.stash.pop_front() {
            out.extend(v);
            self.last_durable = durable;
            return Ok(());
        }
        if self.groups.is_empty() {
            return Err(StoreError("no pipeline group in flight".into()));
        }
        // Push queued groups if the one awaited has not left, or if its first reply is not in
        // yet (the wait is the time they would sit here otherwise; see `RedisStore::recv`).
        if self.unsent > 0 {
            let awaited_unsent = self.unsent >= self.groups.len();
            let waiting = !awaited_unsent && {
                let first = self.groups[0].nodes.first().copied();
                match first.and_then(|n| self.nodes[n as usize].conn.as_mut()) {
                    Some(c) => match c.reply_ready() {
                        Ok(ready) => !ready,
                        Err(e) => {
                            let e = StoreError(format!("cluster node: {e}"));
                            return Err(self.fail_all(e));
                        }
                    },
                    None => false,
                }
            };
            if awaited_unsent || waiting {
                self.flush_all()?;
            }
        }
        match self.recv_group(out) {
            Ok(d) => {
                self.last_durable = d;
                Ok(())
            }
            Err(e) => Err(self.fail_all(e)),
        }
    }

    fn in_flight(&self) -> usize {
        self.groups.len() + self.stash.len()
    }

    fn unsent(&self) -> usize {
        self.unsent
    }

    fn reset(&mut self) {
        self.reset_all();
    }

    fn last_durable(&self) -> bool {
        self.last_durable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_urls() {
        assert_eq!(
            parse_cluster_url("redis-cluster://127.0.0.1:7000").unwrap(),
            vec!["127.0.0.1:7000"]
        );
        assert_eq!(
            parse_cluster_url("redis-cluster://a:1,b.example:2,[::1]:3,a:1/").unwrap(),
            vec!["a:1", "b.example:2", "[::1]:3"]
        );
        for bad in [
            "redis://a:1",
            "redis-cluster://",
            "redis-cluster://a",
            "redis-cluster://a:0",
            "redis-cluster://a:x",
            "redis-cluster://a:1,,b:2",
            "redis-cluster://u:p@a:1",
            "redis-cluster://a:1/0",
            "redis-cluster://:1",
            "redis-cluster://[::1]",
        ] {
            let e = parse_cluster_url(bad).unwrap_err();
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn multi_key_commands_split() {
        let mut b = Vec::new();
        resp::encode(&mut b, &[b"MGET", b"a", b"b"]);
        let cmd = Cmd {
            slot: 1,
            kind: Kind::Mget(vec![4, 7]),
            start: 0,
            end: b.len() as u32,
        };
        let parts = split(&cmd, &b).unwrap();
        assert_eq!(parts.len(), 2);
        assert!(matches!(&parts[1].0.kind, Kind::Mget(p) if p == &vec![7]));
        assert_eq!(
            command_args(&parts[1].1).unwrap(),
            vec![b"MGET".to_vec(), b"b".to_vec()]
        );
        b.clear();
        resp::encode(&mut b, &[b"MSET", b"a", b"1", b"b", b"2"]);
        let cmd = Cmd {
            kind: Kind::Write(None),
            end: b.len() as u32,
            ..cmd
        };
        let parts = split(&cmd, &b).unwrap();
        assert_eq!(
            command_args(&parts[0].1).unwrap(),
            vec![b"MSET".to_vec(), b"a".to_vec(), b"1".to_vec()]
        );
        b.clear();
        resp::encode(&mut b, &[b"ZADD", b"t", b"1", b"m"]);
        assert!(split(&cmd, &b).is_none());
        b.clear();
        resp::encode(&mut b, &[b"MGET", b"a"]);
        let one = Cmd {
            kind: Kind::Mget(vec![0]),
            end: b.len() as u32,
            ..cmd
        };
        assert!(split(&one, &b).is_none(), "a single key is not split");
    }
}
