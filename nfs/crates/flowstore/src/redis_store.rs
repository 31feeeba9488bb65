//! Redis implementation of [`FlowStore`] on its own RESP connection ([`crate::resp`]): a batch
//! read is one MGET, a batch write one pipeline of MSET/DEL/ZADD/ZREM runs; atomic primitives are
//! Lua scripts (EVAL); failures drop the connection and the next call reconnects.
//!
//! It also implements [`Pipeline`]: read and write groups are sent without waiting for replies,
//! so the runtime keeps several batches in flight on the one connection. Redis executes the
//! commands of one connection in order, so a read sent after a write sees it. A blocking call
//! made while groups are in flight goes over a second (side) connection when none of the write
//! groups in flight touches its keys, since then no write of ours can be reordered against it;
//! otherwise it first collects the replies of the groups in flight (kept for
//! [`Pipeline::recv`]) and runs on the main connection.

use crate::commands::{self, Call};
use crate::resp::{self, Conn, Endpoint, Reply, MAX_UNIX_PATH};
use crate::{
    FastMap, FlowStore, HashFields, HashOp, Key, Pipeline, StoreError, StoreStats, WriteOp,
};
use std::collections::VecDeque;
use std::time::Duration;

/// Connection settings.
#[derive(Clone)]
pub struct RedisConfig {
    /// `redis://host:port[/db]` or `unix:///path[?db=N]` ([`parse_url`]).
    pub url: String,
    /// Connect and per-command I/O timeout: a dead tier costs at most this per batch.
    pub timeout: Duration,
    /// How long to spin for a reply before sleeping (an NF core polls anyway; 0 = never spin).
    pub spin: Duration,
    /// ACL user (`AUTH user password`); None with a password: the `default` user.
    pub user: Option<String>,
    /// Password (read from a file by the caller: never a command-line argument). Sent with
    /// `AUTH` on every new connection.
    pub password: Option<String>,
    /// Durability: after each batch's writes, `WAIT` for this many replicas (on every node that
    /// got writes) before the batch may leave; fewer acknowledgements fail the batch closed.
    pub wait: Option<WaitPolicy>,
}

/// `WAIT numreplicas timeout` after a batch's writes ([`RedisConfig::wait`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPolicy {
    /// Replicas that must acknowledge (1-16).
    pub replicas: u32,
    /// How long Redis waits for them (ms, 1-60000; WAIT's 0 = forever is not allowed).
    pub timeout_ms: u32,
}

impl WaitPolicy {
    /// Default timeout of `--store-wait N` (ms).
    pub const DEFAULT_TIMEOUT_MS: u32 = 100;

    /// `N[:TIMEOUT_MS]` (the `nf` option `--store-wait`).
    pub fn parse(s: &str) -> Result<WaitPolicy, String> {
        let bad = || {
            format!(
                "--store-wait must be N[:TIMEOUT_MS] (replicas 1-16, timeout 1-60000 ms, default {}), not {s:?}",
                Self::DEFAULT_TIMEOUT_MS
            )
        };
        let (n, t) = match s.split_once(':') {
            Some((n, t)) => (n, Some(t)),
            None => (s, None),
        };
        let digits =
            |x: &str| !x.is_empty() && x.len() <= 5 && x.bytes().all(|b| b.is_ascii_digit());
        if !digits(n) || t.is_some_and(|t| !digits(t)) {
            return Err(bad());
        }
        let replicas: u32 = n.parse().map_err(|_| bad())?;
        let timeout_ms: u32 = match t {
            Some(t) => t.parse().map_err(|_| bad())?,
            None => Self::DEFAULT_TIMEOUT_MS,
        };
        if !(1..=16).contains(&replicas) || !(1..=60_000).contains(&timeout_ms) {
            return Err(bad());
        }
        Ok(WaitPolicy {
            replicas,
            timeout_ms,
        })
    }

    /// The `WAIT` command (appended to a write group).
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        resp::encode_header(out, 3);
        resp::encode_arg(out, b"WAIT");
        resp::encode_int_arg(out, self.replicas as i64);
        resp::encode_int_arg(out, self.timeout_ms as i64);
    }
}

/// `AUTH` (when credentials are configured) on a new connection, then a `PING` on the first
/// one of a store (`check`): a wrong credential or a tier that wants one is one clear error at
/// start, not a failure of the first batch. `what` names the tier in messages.
pub(crate) fn handshake(
    c: &mut Conn,
    cfg: &RedisConfig,
    what: &str,
    check: bool,
) -> Result<(), StoreError> {
    let mut n = 0;
    if let Some(pw) = &cfg.password {
        match &cfg.user {
            Some(u) => resp::encode(&mut c.out, &[b"AUTH", u.as_bytes(), pw.as_bytes()]),
            None => resp::encode(&mut c.out, &[b"AUTH", pw.as_bytes()]),
        }
        n += 1;
    }
    if check {
        resp::encode(&mut c.out, &[b"PING"]);
        n += 1;
    }
    if n == 0 {
        return Ok(());
    }
    c.flush().map_err(|e| StoreError(format!("{what}: {e}")))?;
    let user = cfg.user.as_deref().unwrap_or("default");
    for i in 0..n {
        let r = c
            .read_reply()
            .map_err(|e| StoreError(format!("{what}: {e}")))?;
        if let Reply::Error(e) = r {
            let auth = cfg.password.is_some() && i == 0;
            return Err(StoreError(if auth {
                format!(
                    "{what}: AUTH as user {user:?} refused: {e} (check --store-user and --store-password-file)"
                )
            } else if e.starts_with("NOAUTH") {
                format!("{what}: the tier requires credentials: {e} (give --store-user and --store-password-file)")
            } else {
                format!("{what}: {e}")
            }));
        }
    }
    Ok(())
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &self.url)
            .field("timeout", &self.timeout)
            .field("spin", &self.spin)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<hidden>"))
            .field("wait", &self.wait)
            .finish()
    }
}

impl RedisConfig {
    pub fn new(url: &str) -> RedisConfig {
        RedisConfig {
            url: url.to_string(),
            timeout: Duration::from_millis(200),
            spin: Duration::from_micros(200),
            user: None,
            password: None,
            wait: None,
        }
    }
}

/// Parse a store URL into (endpoint, db): `redis://HOST[:PORT][/DB]` (TCP, port 6379 by default)
/// or `unix:///ABSOLUTE/PATH[?db=N]` (also spelled `redis+unix://`; the tier's unix socket).
pub fn parse_url(url: &str) -> Result<(Endpoint, Option<u32>), String> {
    if let Some(rest) = url
        .strip_prefix("unix://")
        .or_else(|| url.strip_prefix("redis+unix://"))
    {
        return parse_unix(url, rest);
    }
    let rest = url.strip_prefix("redis://").ok_or_else(|| {
        format!("bad store URL {url:?}: must start with redis:// or unix:// (a socket path)")
    })?;
    let (hostport, db) = match rest.split_once('/') {
        None => (rest, None),
        Some((h, "")) => (h, None),
        Some((h, d)) => (h, Some(parse_db(url, d)?)),
    };
    if hostport.is_empty() || hostport.contains('@') {
        return Err(format!(
            "bad store URL {url:?}: expected redis://HOST[:PORT][/DB] (no credentials)"
        ));
    }
    let hp = if let Some(v6) = hostport.strip_prefix('[') {
        match v6.split_once("]:") {
            Some((_, p)) => {
                p.parse::<u16>()
                    .map_err(|_| format!("bad store URL {url:?}: port must be a number"))?;
                hostport.to_string()
            }
            None => format!("{hostport}:6379"),
        }
    } else if let Some((_, p)) = hostport.rsplit_once(':') {
        p.parse::<u16>()
            .map_err(|_| format!("bad store URL {url:?}: port must be a number"))?;
        hostport.to_string()
    } else {
        format!("{hostport}:6379")
    };
    Ok((Endpoint::Tcp(hp), db))
}

fn parse_db(url: &str, d: &str) -> Result<u32, String> {
    d.parse::<u32>()
        .map_err(|_| format!("bad store URL {url:?}: database must be a number"))
}

/// The part of a unix URL after `unix://`: an absolute path, optionally `?db=N`.
fn parse_unix(url: &str, rest: &str) -> Result<(Endpoint, Option<u32>), String> {
    let (path, query) = match rest.split_once('?') {
        None => (rest, None),
        Some((p, q)) => (p, Some(q)),
    };
    let db = match query {
        None | Some("") => None,
        Some(q) => match q.strip_prefix("db=") {
            Some(d) => Some(parse_db(url, d)?),
            None => {
                return Err(format!(
                    "bad store URL {url:?}: the only query parameter is db=N"
                ))
            }
        },
    };
    if !path.starts_with('/') {
        return Err(format!(
            "bad store URL {url:?}: expected unix:///ABSOLUTE/PATH[?db=N] (no host, no credentials)"
        ));
    }
    if path.len() > MAX_UNIX_PATH || path.contains('\0') {
        return Err(format!(
            "bad store URL {url:?}: a unix socket path has at most {MAX_UNIX_PATH} bytes and no NUL"
        ));
    }
    Ok((Endpoint::Unix(path.into()), db))
}

/// A cheap 64-bit fingerprint of a key (FNV-1a): for the side-connection check, where a
/// collision only costs a wait, never a wrong result.
fn fingerprint(key: &[u8]) -> u64 {
    key.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ *b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// How the reply of a conditional write ([`WriteOp::SetIf`]) says whether it applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cond {
    /// `SET key value NX`: `+OK` applied, nil not.
    Nx,
    /// The compare-and-set script: `:1` applied, `:0` not.
    Cas,
}

/// The write commands of one group: how many, and which of them are conditional (command
/// index and reply kind, in order).
#[derive(Debug, Clone, Default)]
pub(crate) struct WriteCmds {
    pub n: usize,
    pub conds: Vec<(usize, Cond)>,
    /// Where each command starts in the output buffer (the cluster client resends single
    /// commands after a redirection).
    pub starts: Vec<usize>,
    /// A `WAIT` follows the commands ([`RedisConfig::wait`]): one more reply, the number of
    /// replicas that acknowledged.
    pub wait: Option<u32>,
}

/// What a group of commands in flight returns.
#[derive(Debug, Clone)]
enum Group {
    /// One MGET of this many keys.
    Reads(usize),
    Writes(WriteCmds),
}

/// [`FlowStore`] on Redis (one connection per instance).
pub struct RedisStore {
    cfg: RedisConfig,
    addr: Endpoint,
    db: Option<u32>,
    conn: Option<Conn>,
    /// Groups sent (or buffered) whose replies have not been read.
    in_flight: VecDeque<Group>,
    /// How many of the oldest groups in flight have been written to the socket.
    flushed: usize,
    /// Replies of groups collected early by a blocking call, oldest first, and whether each was
    /// durable (its `WAIT` satisfied, or none asked).
    stash: VecDeque<(Vec<Option<Vec<u8>>>, bool)>,
    /// Whether the group last returned by [`Pipeline::recv`] was durable.
    last_durable: bool,
    /// Fingerprints of the keys written by each write group in flight, oldest first (dropped
    /// when its replies are read): a blocking call on a key none of them matches may use the side
    /// connection. A fingerprint collision only sends the call the slow way (after the pipeline).
    write_keys: VecDeque<Vec<u64>>,
    /// Second connection for blocking calls made while groups are in flight on keys none of
    /// them writes: such a call cannot be reordered against a write of ours, so it need not
    /// wait for the pipeline (NAT pool pop and mapping CAS, IPsec sequence blocks, re-reads).
    side: Option<Conn>,
    stats: StoreStats,
}

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError(e.to_string())
}

impl RedisStore {
    /// Validate the URL and connect. A tier that is down at start is an error (the caller decides
    /// whether to retry); later failures reconnect transparently on the next call.
    pub fn connect(cfg: RedisConfig) -> Result<RedisStore, StoreError> {
        let (addr, db) = parse_url(&cfg.url).map_err(StoreError)?;
        let mut s = RedisStore {
            cfg,
            addr,
            db,
            conn: None,
            in_flight: VecDeque::new(),
            flushed: 0,
            stash: VecDeque::new(),
            write_keys: VecDeque::new(),
            side: None,
            last_durable: true,
            stats: StoreStats::default(),
        };
        let c = s.new_conn(true)?;
        s.conn = Some(c);
        if let Some(w) = s.cfg.wait {
            // `WAIT N` on a Redis with fewer replicas would fail every batch: say so at start.
            let replicas = match s.call(&[b"ROLE"], &[], false)? {
                Reply::Array(r) if r.len() >= 3 && r[0] == Reply::Bulk(b"master".to_vec()) => {
                    match &r[2] {
                        Reply::Array(v) => v.len(),
                        _ => 0,
                    }
                }
                r => {
                    return Err(StoreError(format!(
                        "--store-wait: {} is not a master ({r:?})",
                        s.cfg.url
                    )))
                }
            };
            if replicas < w.replicas as usize {
                return Err(StoreError(format!(
                    "--store-wait {}: {} has {replicas} replica(s)",
                    w.replicas, s.cfg.url
                )));
            }
        }
        Ok(s)
    }

    /// A new connection: AUTH when configured, SELECT when a database is named; `check`: PING it
    /// (the first connection: a tier that wants credentials is an error at start).
    fn new_conn(&self, check: bool) -> Result<Conn, StoreError> {
        let mut c = Conn::connect(&self.addr, self.cfg.timeout)
            .map_err(|e| StoreError(format!("connect {}: {e}", self.cfg.url)))?;
        c.set_spin(self.cfg.spin);
        handshake(&mut c, &self.cfg, &self.cfg.url, check)?;
        if let Some(db) = self.db {
            resp::encode(&mut c.out, &[b"SELECT", db.to_string().as_bytes()]);
            c.flush().map_err(err)?;
            if let Reply::Error(e) = c.read_reply().map_err(err)? {
                return Err(StoreError(format!("SELECT {db}: {e}")));
            }
        }
        Ok(c)
    }

    fn ensure_conn(&mut self) -> Result<&mut Conn, StoreError> {
        if self.conn.is_none() {
            let c = self.new_conn(false)?;
            if self.stats.round_trips > 0 || self.stats.errors > 0 {
                self.stats.reconnects += 1;
            }
            self.conn = Some(c);
        }
        Ok(self.conn.as_mut().expect("connected"))
    }

    /// Whether a blocking call on `keys` may use the side connection: groups are in flight on
    /// the main one and none of them writes any of `keys`.
    fn side_ok(&self, keys: &[&[u8]]) -> bool {
        !self.in_flight.is_empty()
            && keys.iter().all(|k| {
                let f = fingerprint(k);
                !self.write_keys.iter().any(|g| g.contains(&f))
            })
    }

    /// One command on the side connection (connected on first use); `write`: followed by the
    /// configured `WAIT`.
    fn side_call(&mut self, args: &[&[u8]], write: bool) -> Result<Reply, StoreError> {
        let wait = self.cfg.wait.filter(|_| write);
        let r = (|| {
            if self.side.is_none() {
                self.side = Some(self.new_conn(false)?);
            }
            let c = self.side.as_mut().expect("connected");
            call_on(c, args, wait)
        })();
        self.stats.round_trips += 1;
        if r.is_err() {
            self.stats.errors += 1;
            let c = self.side.take();
            self.retire(c);
        }
        r
    }

    /// Keep the counters of a connection that is dropped.
    fn retire(&mut self, c: Option<Conn>) {
        if let Some(c) = c {
            self.stats.spin_ns += c.spun_ns;
        }
    }

    /// Forget the connection and everything in flight on it (reconnect on the next call).
    fn fail(&mut self, e: StoreError) -> StoreError {
        self.stats.errors += 1;
        let c = self.conn.take();
        self.retire(c);
        self.in_flight.clear();
        self.flushed = 0;
        self.write_keys.clear();
        self.stash.clear();
        e
    }

    /// Read the replies of the oldest group in flight, appended to `out`; returns whether it
    /// was durable (its `WAIT` got the replicas asked for, or none was asked).
    fn read_group(&mut self, out: &mut Vec<Option<Vec<u8>>>) -> Result<bool, StoreError> {
        let g = self
            .in_flight
            .pop_front()
            .ok_or_else(|| StoreError("no pipeline group in flight".into()))?;
        self.flushed = self.flushed.saturating_sub(1);
        if let Group::Writes(_) = g {
            self.write_keys.pop_front();
        }
        let conn = self.conn.as_mut().ok_or_else(|| err("not connected"))?;
        let mut first_err = None;
        let mut durable = true;
        match g {
            // The values go straight into `out` (no reply tree); anything but an array of the
            // right length is an error.
            Group::Reads(n) => {
                let before = out.len();
                match conn.read_values(out).map_err(err)? {
                    Some(k) if k == n => {}
                    Some(k) => {
                        out.truncate(before);
                        first_err = Some(format!("unexpected MGET reply: {k} values for {n} keys"));
                    }
                    None => match conn.read_reply().map_err(err)? {
                        Reply::Error(e) => first_err = Some(e),
                        r => first_err = Some(format!("unexpected MGET reply {r:?}")),
                    },
                }
            }
            Group::Writes(w) => {
                let mut conds = w.conds.iter().peekable();
                for i in 0..w.n {
                    let r = conn.read_reply().map_err(err)?;
                    if let Reply::Error(e) = r {
                        first_err.get_or_insert(e);
                        if conds.next_if(|c| c.0 == i).is_some() {
                            out.push(None);
                        }
                    } else if let Some(&(_, kind)) = conds.next_if(|c| c.0 == i) {
                        let applied = match kind {
                            Cond::Nx => r == Reply::Status,
                            Cond::Cas => r == Reply::Int(1),
                        };
                        out.push(applied.then(Vec::new));
                    }
                }
                if let Some(want) = w.wait {
                    match conn.read_reply().map_err(err)? {
                        Reply::Int(k) => durable = k >= want as i64,
                        Reply::Error(e) => {
                            first_err.get_or_insert(format!("WAIT: {e}"));
                        }
                        r => {
                            first_err.get_or_insert(format!("WAIT: unexpected reply {r:?}"));
                        }
                    }
                    if !durable {
                        self.stats.wait_short += 1;
                    }
                }
            }
        }
        match first_err {
            Some(e) => Err(StoreError(e)),
            None => Ok(durable),
        }
    }

    /// Collect the replies of every group in flight into the stash (before a blocking call).
    fn drain_in_flight(&mut self) -> Result<(), StoreError> {
        if self.in_flight.is_empty() {
            return Ok(());
        }
        let r = (|| {
            self.conn
                .as_mut()
                .ok_or_else(|| err("not connected"))?
                .flush()
                .map_err(err)?;
            self.flushed = self.in_flight.len();
            while !self.in_flight.is_empty() {
                let mut v = Vec::new();
                let durable = self.read_group(&mut v)?;
                self.stash.push_back((v, durable));
            }
            Ok(())
        })();
        r.map_err(|e| self.fail(e))
    }

    fn encode_reads(out: &mut Vec<u8>, keys: &[Key]) {
        resp::encode_header(out, keys.len() + 1);
        resp::encode_arg(out, b"MGET");
        for k in keys {
            resp::encode_arg(out, k);
        }
    }

    /// Encode `ops` as runs of MSET / DEL / ZADD / ZREM (a conditional write is a command of
    /// its own); returns the commands. Ops are grouped by command first when that changes no
    /// outcome ([`grouped`]), so a batch whose packets each wrote a record and moved its timer
    /// costs one MSET and one ZADD, not two commands per packet.
    pub(crate) fn encode_writes<W: std::borrow::Borrow<WriteOp>>(
        out: &mut Vec<u8>,
        ops: &[W],
    ) -> WriteCmds {
        match grouped(ops) {
            Some(g) => Self::encode_runs(out, &g),
            None => Self::encode_runs(out, ops),
        }
    }

    /// Encode consecutive runs of one command (order kept).
    fn encode_runs<W: std::borrow::Borrow<WriteOp>>(out: &mut Vec<u8>, ops: &[W]) -> WriteCmds {
        let ops: Vec<&WriteOp> = ops.iter().map(|o| o.borrow()).collect();
        let mut cmds = WriteCmds::default();
        let mut i = 0;
        while i < ops.len() {
            // A run of ops of one kind (and one timer set) becomes one command.
            let mut j = i + 1;
            while j < ops.len() && same_run(ops[i], ops[j]) {
                j += 1;
            }
            let run = &ops[i..j];
            cmds.starts.push(out.len());
            match ops[i] {
                WriteOp::Set { .. } => {
                    resp::encode_header(out, 1 + 2 * run.len());
                    resp::encode_arg(out, b"MSET");
                    for op in run {
                        if let WriteOp::Set { key, value } = op {
                            resp::encode_arg(out, key);
                            resp::encode_arg(out, value);
                        }
                    }
                }
                WriteOp::Del { .. } => {
                    resp::encode_header(out, 1 + run.len());
                    resp::encode_arg(out, b"DEL");
                    for op in run {
                        if let WriteOp::Del { key } = op {
                            resp::encode_arg(out, key);
                        }
                    }
                }
                WriteOp::TimerSet { timers, .. } => {
                    resp::encode_header(out, 2 + 2 * run.len());
                    resp::encode_arg(out, b"ZADD");
                    resp::encode_arg(out, timers);
                    for op in run {
                        if let WriteOp::TimerSet {
                            member,
                            deadline_ms,
                            ..
                        } = op
                        {
                            resp::encode_int_arg(out, *deadline_ms as i64);
                            resp::encode_arg(out, member);
                        }
                    }
                }
                WriteOp::Hash { key, field, op } => {
                    let (cmd, v): (&[u8], std::borrow::Cow<[u8]>) = match op {
                        HashOp::Incr(d) => (b"HINCRBY", d.to_string().into_bytes().into()),
                        HashOp::Set(v) => (b"HSET", v.as_slice().into()),
                        HashOp::SetNx(v) => (b"HSETNX", v.as_slice().into()),
                    };
                    resp::encode_header(out, 4);
                    resp::encode_arg(out, cmd);
                    resp::encode_arg(out, key);
                    resp::encode_arg(out, field);
                    resp::encode_arg(out, &v);
                }
                WriteOp::Incr { key, delta } => {
                    resp::encode_header(out, 3);
                    resp::encode_arg(out, b"INCRBY");
                    resp::encode_arg(out, key);
                    resp::encode_int_arg(out, *delta);
                }
                WriteOp::TimerCancel { timers, .. } => {
                    resp::encode_header(out, 2 + run.len());
                    resp::encode_arg(out, b"ZREM");
                    resp::encode_arg(out, timers);
                    for op in run {
                        if let WriteOp::TimerCancel { member, .. } = op {
                            resp::encode_arg(out, member);
                        }
                    }
                }
                WriteOp::SetIf {
                    key,
                    expect: None,
                    value: Some(v),
                } => {
                    resp::encode(out, &[b"SET", key, v, b"NX"]);
                    cmds.conds.push((cmds.n, Cond::Nx));
                }
                WriteOp::SetIf { key, expect, value } => {
                    let flag = |o: &Option<Vec<u8>>| if o.is_some() { &b"1"[..] } else { b"0" };
                    resp::encode(
                        out,
                        &[
                            b"EVAL",
                            commands::CAS,
                            b"1",
                            key,
                            flag(expect),
                            expect.as_deref().unwrap_or(b""),
                            flag(value),
                            value.as_deref().unwrap_or(b""),
                        ],
                    );
                    cmds.conds.push((cmds.n, Cond::Cas));
                }
            }
            cmds.n += 1;
            i = j;
        }
        cmds
    }
}

/// `ops` stably grouped by command (MSET, DEL, hash ops, INCRBY, then ZADD and ZREM per timer set,
/// then the conditional writes, one command each, in their order: outcomes are reported in it),
/// or None when grouping could change an outcome: a key written by two kinds of command (e.g.
/// a hash update and a DEL of the same key, or a data key that is also a timer set), or one timer
/// member both set and cancelled. Otherwise each key is touched by one kind only, and the order
/// within a kind is kept, so the final state is the same; commands of one pipeline are never
/// atomic for other clients, and the runtime transmits a batch only after all are acknowledged.
fn grouped<W: std::borrow::Borrow<WriteOp>>(ops: &[W]) -> Option<Vec<&WriteOp>> {
    let class = write_class;
    if ops.len() < 3 {
        return None;
    }
    let ops: Vec<&WriteOp> = ops.iter().map(|o| o.borrow()).collect();
    // Already in class order (a batch of record writes only, say): nothing to regroup, and no
    // need to hash every key to find out whether regrouping would be safe.
    let already_grouped = ops
        .windows(2)
        .all(|w| same_run(w[0], w[1]) || class(w[0]).0 <= class(w[1]).0);
    if already_grouped {
        return None;
    }
    let mut owner: FastMap<&[u8], u8> =
        FastMap::with_capacity_and_hasher(ops.len(), Default::default());
    let mut member: FastMap<(&[u8], &[u8]), u8> = FastMap::default();
    for &op in &ops {
        let (c, _) = class(op);
        let key: &[u8] = match op {
            WriteOp::Set { key, .. }
            | WriteOp::Del { key }
            | WriteOp::Hash { key, .. }
            | WriteOp::Incr { key, .. }
            | WriteOp::SetIf { key, .. } => key,
            WriteOp::TimerSet {
                timers, member: m, ..
            }
            | WriteOp::TimerCancel { timers, member: m } => {
                if *member.entry((timers, m)).or_insert(c) != c {
                    return None;
                }
                // The timer set itself is touched by the timer kinds only.
                let t = *owner.entry(timers).or_insert(4);
                if t != 4 {
                    return None;
                }
                continue;
            }
        };
        if *owner.entry(key).or_insert(c) != c {
            return None;
        }
    }
    let mut v = ops;
    v.sort_by(|a, b| class(a).cmp(&class(b)));
    Some(v)
}

/// The command kind of a write (grouping order) and, for timers, its timer set.
fn write_class(op: &WriteOp) -> (u8, &[u8]) {
    match op {
        WriteOp::Set { .. } => (0, b""),
        WriteOp::Del { .. } => (1, b""),
        WriteOp::Hash { .. } => (2, b""),
        WriteOp::Incr { .. } => (3, b""),
        WriteOp::TimerSet { timers, .. } => (4, timers),
        WriteOp::TimerCancel { timers, .. } => (5, timers),
        WriteOp::SetIf { .. } => (6, b""),
    }
}

/// Whether `b` continues the run started by `a` (same command, same timer set). A ZADD with the
/// same member twice would keep the last score, as separate commands would.
fn same_run(a: &WriteOp, b: &WriteOp) -> bool {
    match (a, b) {
        (WriteOp::Set { .. }, WriteOp::Set { .. }) | (WriteOp::Del { .. }, WriteOp::Del { .. }) => {
            true
        }
        (WriteOp::TimerSet { timers: x, .. }, WriteOp::TimerSet { timers: y, .. })
        | (WriteOp::TimerCancel { timers: x, .. }, WriteOp::TimerCancel { timers: y, .. }) => {
            x == y
        }
        _ => false,
    }
}

/// One blocking command on `c` (nothing else in flight on it), followed by `WAIT` when given:
/// its reply; an error reply, or fewer replicas than asked, is a [`StoreError`].
fn call_on(c: &mut Conn, args: &[&[u8]], wait: Option<WaitPolicy>) -> Result<Reply, StoreError> {
    resp::encode(&mut c.out, args);
    if let Some(w) = wait {
        w.encode(&mut c.out);
    }
    c.flush().map_err(err)?;
    let r = c.read_reply().map_err(err)?;
    if let Some(w) = wait {
        match c.read_reply().map_err(err)? {
            Reply::Int(k) if k >= w.replicas as i64 => {}
            Reply::Int(k) => {
                return Err(StoreError(format!(
                    "WAIT {} {}: {k} replicas acknowledged",
                    w.replicas, w.timeout_ms
                )))
            }
            r => return Err(StoreError(format!("WAIT: unexpected reply {r:?}"))),
        }
    }
    match r {
        Reply::Error(e) => Err(StoreError(e)),
        r => Ok(r),
    }
}

impl Call for RedisStore {
    /// One blocking command on `keys`: its reply (an error reply is a [`StoreError`]). On the
    /// side connection when allowed ([`RedisStore::side_ok`]), else after collecting the
    /// replies of the groups in flight.
    fn call(&mut self, args: &[&[u8]], keys: &[&[u8]], write: bool) -> Result<Reply, StoreError> {
        if self.side_ok(keys) {
            return self.side_call(args, write);
        }
        self.drain_in_flight()?;
        let wait = self.cfg.wait.filter(|_| write);
        let r = (|| {
            let c = self.ensure_conn()?;
            call_on(c, args, wait)
        })();
        self.stats.round_trips += 1;
        r.map_err(|e| self.fail(e))
    }
}

impl FlowStore for RedisStore {
    fn kind(&self) -> &'static str {
        "redis"
    }

    fn get_many(&mut self, keys: &[Key], out: &mut Vec<Option<Vec<u8>>>) -> Result<(), StoreError> {
        out.clear();
        if keys.is_empty() {
            return Ok(());
        }
        let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
        if self.side_ok(&refs) {
            let mut args: Vec<&[u8]> = Vec::with_capacity(keys.len() + 1);
            args.push(b"MGET");
            args.extend_from_slice(&refs);
            match self.side_call(&args, false)? {
                Reply::Array(items) if items.len() == keys.len() => {
                    out.extend(items.into_iter().map(|it| match it {
                        Reply::Bulk(b) => Some(b),
                        _ => None,
                    }));
                    self.stats.keys_read += keys.len() as u64;
                    return Ok(());
                }
                r => return Err(StoreError(format!("unexpected MGET reply {r:?}"))),
            }
        }
        self.drain_in_flight()?;
        let before = out.len();
        let r = (|| {
            let c = self.ensure_conn()?;
            Self::encode_reads(&mut c.out, keys);
            c.flush().map_err(err)?;
            self.in_flight.push_back(Group::Reads(keys.len()));
            self.flushed = self.in_flight.len();
            self.read_group(out).map(|_| ())
        })();
        self.stats.round_trips += 1;
        if let Err(e) = r {
            out.truncate(before);
            return Err(self.fail(e));
        }
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
        self.drain_in_flight()?;
        let r = (|| {
            let wait = self.cfg.wait;
            let c = self.ensure_conn()?;
            let mut cmds = Self::encode_writes(&mut c.out, ops);
            if let Some(w) = wait {
                w.encode(&mut c.out);
                cmds.wait = Some(w.replicas);
            }
            c.flush().map_err(err)?;
            self.in_flight.push_back(Group::Writes(cmds));
            self.write_keys.push_back(Vec::new());
            self.flushed = self.in_flight.len();
            let mut outcomes = Vec::new();
            let durable = self.read_group(&mut outcomes)?;
            Ok((outcomes, durable))
        })();
        self.stats.round_trips += 1;
        let (outcomes, durable) = r.map_err(|e| self.fail(e))?;
        self.stats.keys_written += ops.len() as u64;
        if !durable {
            // Applied by the master, not acknowledged by the replicas asked for: the caller
            // fails the batch closed (its state could be lost with the master).
            let w = self.cfg.wait.expect("wait configured");
            return Err(StoreError(format!(
                "WAIT {} {}: fewer replicas acknowledged the batch's writes",
                w.replicas, w.timeout_ms
            )));
        }
        // Conditional writes are encoded in order, one command each: their outcomes map back.
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
        // One-time setup that may carry 10^5 items: allow it more than the per-batch timeout.
        let long = self.cfg.timeout.max(Duration::from_secs(10));
        let _ = self.ensure_conn()?.set_read_timeout(long);
        let r = commands::pool_init(self, pool, items);
        if let Some(c) = self.conn.as_mut() {
            let _ = c.set_read_timeout(self.cfg.timeout);
        }
        r
    }

    fn pool_pop(&mut self, pool: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        commands::pool_pop(self, pool)
    }

    fn hash_get_all(&mut self, key: &[u8]) -> Result<HashFields, StoreError> {
        commands::hash_get_all(self, key)
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

    fn stats(&self) -> StoreStats {
        let mut s = self.stats;
        s.spin_ns += [&self.conn, &self.side]
            .iter()
            .filter_map(|c| c.as_ref().map(|c| c.spun_ns))
            .sum::<u64>();
        s
    }

    fn note_unplanned_read(&mut self) {
        self.stats.unplanned_reads += 1;
    }

    fn pipeline(&mut self) -> Option<&mut dyn Pipeline> {
        Some(self)
    }
}

impl Pipeline for RedisStore {
    fn send_reads(&mut self, keys: &[Key]) -> Result<(), StoreError> {
        let c = match self.ensure_conn() {
            Ok(c) => c,
            Err(e) => return Err(self.fail(e)),
        };
        Self::encode_reads(&mut c.out, keys);
        self.in_flight.push_back(Group::Reads(keys.len()));
        self.stats.keys_read += keys.len() as u64;
        self.stats.round_trips += 1;
        Ok(())
    }

    fn send_writes(&mut self, ops: &[WriteOp]) -> Result<(), StoreError> {
        let wait = self.cfg.wait;
        let c = match self.ensure_conn() {
            Ok(c) => c,
            Err(e) => return Err(self.fail(e)),
        };
        let mut cmds = Self::encode_writes(&mut c.out, ops);
        if let Some(w) = wait {
            w.encode(&mut c.out);
            cmds.wait = Some(w.replicas);
        }
        self.in_flight.push_back(Group::Writes(cmds));
        self.write_keys
            .push_back(ops.iter().map(|op| fingerprint(op.key())).collect());
        self.stats.keys_written += ops.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        let r = match self.conn.as_mut() {
            Some(c) => c.flush().map_err(err),
            None => Ok(()),
        };
        self.flushed = self.in_flight.len();
        r.map_err(|e| self.fail(e))
    }

    fn recv(&mut self, out: &mut Vec<Option<Vec<u8>>>) -> Result<(), StoreError> {
        out.clear();
        if let Some((v, durable)) = self.stash.pop_front() {
            out.extend(v);
            self.last_durable = durable;
            return Ok(());
        }
        if self.in_flight.is_empty() {
            return Err(StoreError("no pipeline group in flight".into()));
        }
        // Push queued groups if the one awaited has not been sent yet, or if its reply is not in
        // yet: the wait is the time they would otherwise sit here (a batch's reads then go out as
        // soon as its packets arrive, not one round trip later). When the reply is already in, the
        // queue waits for more groups (fewer sends; see the runtime's flush policy).
        let waiting = match self.conn.as_mut() {
            Some(c) if self.flushed > 0 && self.flushed < self.in_flight.len() => {
                match c.reply_ready() {
                    Ok(ready) => !ready,
                    Err(e) => return Err(self.fail(err(e))),
                }
            }
            _ => false,
        };
        if self.flushed == 0 || waiting {
            self.flush()?;
        }
        let durable = self.read_group(out).map_err(|e| self.fail(e))?;
        self.last_durable = durable;
        Ok(())
    }

    fn last_durable(&self) -> bool {
        self.last_durable
    }

    fn in_flight(&self) -> usize {
        self.in_flight.len() + self.stash.len()
    }

    fn unsent(&self) -> usize {
        self.in_flight.len().saturating_sub(self.flushed)
    }

    fn reset(&mut self) {
        // Replies still on the way belong to groups the caller gave up: drop the connection.
        let c = self.conn.take();
        self.retire(c);
        self.in_flight.clear();
        self.flushed = 0;
        self.stash.clear();
        self.write_keys.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let tcp = |a: &str| Endpoint::Tcp(a.into());
        let unix = |p: &str| Endpoint::Unix(p.into());
        assert_eq!(
            parse_url("redis://127.0.0.1:7000").unwrap(),
            (tcp("127.0.0.1:7000"), None)
        );
        assert_eq!(
            parse_url("redis://localhost/3").unwrap(),
            (tcp("localhost:6379"), Some(3))
        );
        assert_eq!(
            parse_url("redis://[::1]:7000/").unwrap(),
            (tcp("[::1]:7000"), None)
        );
        assert_eq!(
            parse_url("unix:///run/uno/redis.sock").unwrap(),
            (unix("/run/uno/redis.sock"), None)
        );
        assert_eq!(
            parse_url("redis+unix:///r.sock?db=2").unwrap(),
            (unix("/r.sock"), Some(2))
        );
        let long = format!("unix:///{}", "a".repeat(MAX_UNIX_PATH));
        for bad in [
            "http://x",
            "redis://",
            "redis://h:port",
            "redis://h/x",
            "redis://u:p@h:1",
            "unix://",
            "unix://relative/path",
            "unix://u:p@/x.sock",
            "unix:///x.sock?db=x",
            "unix:///x.sock?password=y",
            "unix:/x.sock",
            long.as_str(),
        ] {
            let e = parse_url(bad).unwrap_err();
            assert!(e.contains(bad), "{bad}: {e}");
        }
    }

    /// A tier that is not there is a clear error naming the URL, for either transport.
    #[test]
    fn connect_errors_name_the_url() {
        let dir = std::env::temp_dir().join(format!("unonfs-nosock-{}", std::process::id()));
        let url = format!("unix://{}/none.sock", dir.display());
        let e = RedisStore::connect(RedisConfig::new(&url)).err().unwrap();
        assert!(e.0.contains(&url), "{e}");
        let e = RedisStore::connect(RedisConfig::new("unix://rel"))
            .err()
            .unwrap();
        assert!(e.0.contains("ABSOLUTE"), "{e}");
    }

    /// The write of "v" to `k`.
    fn set(k: &str) -> WriteOp {
        WriteOp::Set {
            key: k.as_bytes().to_vec(),
            value: b"v".to_vec(),
        }
    }

    /// The timer of `m` in the timer set "T", due at 5 ms.
    fn t(m: &str) -> WriteOp {
        WriteOp::TimerSet {
            timers: b"T".to_vec(),
            member: m.as_bytes().to_vec(),
            deadline_ms: 5,
        }
    }

    #[test]
    fn write_runs() {
        let mut out = vec![];
        let ops = [
            set("a"),
            set("b"),
            t("x"),
            t("y"),
            WriteOp::Del { key: b"c".to_vec() },
        ];
        assert_eq!(RedisStore::encode_writes(&mut out, &ops).n, 3);
        let s = String::from_utf8(out).unwrap();
        assert!(s.starts_with("*5\r\n$4\r\nMSET\r\n"), "{s}");
        assert!(
            s.contains("*6\r\n$4\r\nZADD\r\n$1\r\nT\r\n$1\r\n5\r\n$1\r\nx\r\n"),
            "{s}"
        );
    }

    #[test]
    fn writes_grouped_by_command_when_no_key_has_two_kinds() {
        let tc = |m: &str| WriteOp::TimerCancel {
            timers: b"T".to_vec(),
            member: m.as_bytes().to_vec(),
        };
        let mut out = vec![];
        // Three packets each writing a record and moving its timer: one MSET, one ZADD.
        let ops = [set("a"), t("a"), set("b"), t("b"), set("c"), t("c")];
        assert_eq!(RedisStore::encode_writes(&mut out, &ops).n, 2);
        let s = String::from_utf8(out.clone()).unwrap();
        assert!(s.starts_with("*7\r\n$4\r\nMSET\r\n"), "{s}");
        // One member set then cancelled: the order is kept (4 commands).
        out.clear();
        let ops = [set("a"), t("a"), set("b"), tc("a")];
        assert!(grouped(&ops).is_none());
        assert_eq!(RedisStore::encode_writes(&mut out, &ops).n, 4);
        // A key both hash-updated and deleted: kept in order.
        let h = WriteOp::Hash {
            key: b"a".to_vec(),
            field: b"f".to_vec(),
            op: HashOp::Incr(1),
        };
        assert!(grouped(&[set("b"), h.clone(), WriteOp::Del { key: b"a".to_vec() }]).is_none());
        // A data write to the timer set's key: kept in order.
        assert!(grouped(&[t("x"), set("T"), t("y")]).is_none());
        // Already grouped: nothing to do.
        assert!(grouped(&[set("a"), set("b"), t("a")]).is_none());
    }
}
