//! Redis implementation of [`FlowStore`]: one pipelined round trip per batch read and per batch
//! write; atomic primitives as Lua scripts; reconnect after failures.

use crate::{FlowStore, Key, StoreError, StoreStats, WriteOp};
use std::time::Duration;

/// Connection settings.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    /// `redis://host:port[/db]`.
    pub url: String,
    /// Connect and per-command I/O timeout: a dead tier costs at most this per batch.
    pub timeout: Duration,
}

impl RedisConfig {
    pub fn new(url: &str) -> RedisConfig {
        RedisConfig {
            url: url.to_string(),
            timeout: Duration::from_millis(200),
        }
    }
}

const CAS: &str = r#"
local cur = redis.call('GET', KEYS[1])
local exp_absent = ARGV[1] == '0'
if (exp_absent and cur) or ((not exp_absent) and cur ~= ARGV[2]) then return 0 end
if ARGV[3] == '1' then redis.call('SET', KEYS[1], ARGV[4]) else redis.call('DEL', KEYS[1]) end
return 1
"#;

// KEYS[1] = pool list, KEYS[2] = init marker (same hash tag as the pool).
const POOL_INIT: &str = r#"
if redis.call('SETNX', KEYS[2], '1') == 0 then return 0 end
for i = 1, #ARGV do redis.call('RPUSH', KEYS[1], ARGV[i]) end
return 1
"#;

const CLAIM_DUE: &str = r#"
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for i = 1, #due do redis.call('ZREM', KEYS[1], due[i]) end
return due
"#;

/// [`FlowStore`] on Redis (sync client; one connection per instance).
pub struct RedisStore {
    cfg: RedisConfig,
    client: redis::Client,
    conn: Option<redis::Connection>,
    pipe: redis::Pipeline,
    cas: redis::Script,
    pool_init: redis::Script,
    claim_due: redis::Script,
    stats: StoreStats,
}

impl RedisStore {
    /// Validate the URL and connect. A tier that is down at start is an error (the caller decides
    /// whether to retry); later failures reconnect transparently on the next call.
    pub fn connect(cfg: RedisConfig) -> Result<RedisStore, StoreError> {
        let client = redis::Client::open(cfg.url.as_str())
            .map_err(|e| StoreError(format!("bad store URL {:?}: {e}", cfg.url)))?;
        let mut s = RedisStore {
            cfg,
            client,
            conn: None,
            pipe: redis::pipe(),
            cas: redis::Script::new(CAS),
            pool_init: redis::Script::new(POOL_INIT),
            claim_due: redis::Script::new(CLAIM_DUE),
            stats: StoreStats::default(),
        };
        s.ensure_conn()?;
        Ok(s)
    }

    fn ensure_conn(&mut self) -> Result<&mut redis::Connection, StoreError> {
        if self.conn.is_none() {
            let c = self
                .client
                .get_connection_with_timeout(self.cfg.timeout)
                .map_err(|e| StoreError(format!("connect {}: {e}", self.cfg.url)))?;
            c.set_read_timeout(Some(self.cfg.timeout))
                .and_then(|_| c.set_write_timeout(Some(self.cfg.timeout)))
                .map_err(|e| StoreError(format!("socket timeout: {e}")))?;
            if self.stats.round_trips > 0 || self.stats.errors > 0 {
                self.stats.reconnects += 1;
            }
            self.conn = Some(c);
        }
        Ok(self.conn.as_mut().expect("connected"))
    }

    /// Run `f` on the connection as one round trip; on failure drop the connection (reconnect next
    /// time) and count the error.
    fn run<T>(
        &mut self,
        f: impl FnOnce(&mut redis::Connection, &mut redis::Pipeline, &Scripts) -> redis::RedisResult<T>,
    ) -> Result<T, StoreError> {
        let r = match self.ensure_conn() {
            Ok(_) => {
                let scripts = Scripts {
                    cas: &self.cas,
                    pool_init: &self.pool_init,
                    claim_due: &self.claim_due,
                };
                let conn = self.conn.as_mut().expect("connected");
                f(conn, &mut self.pipe, &scripts).map_err(|e| StoreError(e.to_string()))
            }
            Err(e) => Err(e),
        };
        self.stats.round_trips += 1;
        if r.is_err() {
            self.stats.errors += 1;
            self.conn = None;
        }
        r
    }
}

struct Scripts<'a> {
    cas: &'a redis::Script,
    pool_init: &'a redis::Script,
    claim_due: &'a redis::Script,
}

fn pool_marker(pool: &[u8]) -> Vec<u8> {
    let mut m = pool.to_vec();
    m.extend_from_slice(b":init");
    m
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
        // GETs in one pipeline rather than MGET: works on Redis Cluster across slots too.
        let vals: Vec<Option<Vec<u8>>> = self.run(|c, pipe, _| {
            pipe.clear();
            for k in keys {
                pipe.cmd("GET").arg(k.as_slice());
            }
            pipe.query(c)
        })?;
        self.stats.keys_read += keys.len() as u64;
        out.extend(vals);
        Ok(())
    }

    fn write_many(&mut self, ops: &[WriteOp]) -> Result<(), StoreError> {
        if ops.is_empty() {
            return Ok(());
        }
        self.run(|c, pipe, _| {
            pipe.clear();
            for op in ops {
                match op {
                    WriteOp::Set { key, value } => {
                        pipe.cmd("SET").arg(key.as_slice()).arg(value.as_slice())
                    }
                    WriteOp::Del { key } => pipe.cmd("DEL").arg(key.as_slice()),
                    WriteOp::TimerSet {
                        timers,
                        member,
                        deadline_ms,
                    } => pipe
                        .cmd("ZADD")
                        .arg(timers.as_slice())
                        .arg(*deadline_ms)
                        .arg(member.as_slice()),
                    WriteOp::TimerCancel { timers, member } => pipe
                        .cmd("ZREM")
                        .arg(timers.as_slice())
                        .arg(member.as_slice()),
                }
                .ignore();
            }
            pipe.query::<()>(c)
        })?;
        self.stats.keys_written += ops.len() as u64;
        Ok(())
    }

    fn compare_and_set(
        &mut self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool, StoreError> {
        let r: i64 = self.run(|c, _, s| {
            s.cas
                .key(key)
                .arg(if expected.is_some() { "1" } else { "0" })
                .arg(expected.unwrap_or(b""))
                .arg(if new.is_some() { "1" } else { "0" })
                .arg(new.unwrap_or(b""))
                .invoke(c)
        })?;
        Ok(r == 1)
    }

    fn incr_by(&mut self, key: &[u8], delta: i64) -> Result<i64, StoreError> {
        self.run(|c, _, _| redis::cmd("INCRBY").arg(key).arg(delta).query(c))
    }

    fn pool_init(&mut self, pool: &[u8], items: &[Vec<u8>]) -> Result<bool, StoreError> {
        let marker = pool_marker(pool);
        let r: i64 = self.run(|c, _, s| {
            let mut inv = s.pool_init.key(pool);
            inv.key(marker.as_slice());
            for it in items {
                inv.arg(it.as_slice());
            }
            inv.invoke(c)
        })?;
        Ok(r == 1)
    }

    fn pool_pop(&mut self, pool: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.run(|c, _, _| redis::cmd("LPOP").arg(pool).query(c))
    }

    fn pool_push(&mut self, pool: &[u8], item: &[u8]) -> Result<(), StoreError> {
        self.run(|c, _, _| redis::cmd("RPUSH").arg(pool).arg(item).query::<()>(c))
    }

    fn pool_len(&mut self, pool: &[u8]) -> Result<usize, StoreError> {
        self.run(|c, _, _| redis::cmd("LLEN").arg(pool).query(c))
    }

    fn timer_claim_due(
        &mut self,
        timers: &[u8],
        now_ms: u64,
        max: usize,
    ) -> Result<Vec<Vec<u8>>, StoreError> {
        self.run(|c, _, s| s.claim_due.key(timers).arg(now_ms).arg(max).invoke(c))
    }

    fn stats(&self) -> StoreStats {
        self.stats
    }

    fn note_unplanned_read(&mut self) {
        self.stats.unplanned_reads += 1;
    }
}
