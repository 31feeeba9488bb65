//! The blocking commands both Redis stores (one server, a cluster) send alike: how each is
//! encoded and how its reply is decoded. A store supplies [`Call::call`] (where and how the
//! command travels); the rest follows here, once.

use crate::resp::Reply;
use crate::{HashFields, StoreError};

/// Compare-and-set one key: KEYS[1]; ARGV = expected present (0/1), expected value, set (0/1),
/// new value. Returns 1 when it applied.
pub(crate) const CAS: &[u8] = br#"
local cur = redis.call('GET', KEYS[1])
local exp_absent = ARGV[1] == '0'
if (exp_absent and cur) or ((not exp_absent) and cur ~= ARGV[2]) then return 0 end
if ARGV[3] == '1' then redis.call('SET', KEYS[1], ARGV[4]) else redis.call('DEL', KEYS[1]) end
return 1
"#;

// KEYS[1] = pool list, KEYS[2] = init marker (same hash tag as the pool).
pub(crate) const POOL_INIT: &[u8] = br#"
if redis.call('SETNX', KEYS[2], '1') == 0 then return 0 end
for i = 1, #ARGV do redis.call('RPUSH', KEYS[1], ARGV[i]) end
return 1
"#;

pub(crate) const CLAIM_DUE: &[u8] = br#"
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for i = 1, #due do redis.call('ZREM', KEYS[1], due[i]) end
return due
"#;

/// A store that runs one blocking command and returns its reply (an error reply is a
/// [`StoreError`]).
pub(crate) trait Call {
    /// One blocking command on `keys` (`write`: followed by the configured `WAIT`).
    fn call(&mut self, args: &[&[u8]], keys: &[&[u8]], write: bool) -> Result<Reply, StoreError>;

    /// `EVAL script` on `keys` with `args` (a write).
    fn eval(&mut self, script: &[u8], keys: &[&[u8]], args: &[&[u8]]) -> Result<Reply, StoreError> {
        let nk = keys.len().to_string();
        let mut v: Vec<&[u8]> = vec![b"EVAL", script, nk.as_bytes()];
        v.extend_from_slice(keys);
        v.extend_from_slice(args);
        self.call(&v, keys, true)
    }
}

pub(crate) fn int_reply(r: Reply) -> Result<i64, StoreError> {
    match r {
        Reply::Int(n) => Ok(n),
        r => Err(StoreError(format!("expected an integer reply, got {r:?}"))),
    }
}

/// The bulk strings of an array reply; any other item is an error naming `cmd`.
fn bulk_items(cmd: &str, items: Vec<Reply>) -> Result<Vec<Vec<u8>>, StoreError> {
    items
        .into_iter()
        .map(|r| match r {
            Reply::Bulk(b) => Ok(b),
            r => Err(StoreError(format!("{cmd}: unexpected item {r:?}"))),
        })
        .collect()
}

pub(crate) fn compare_and_set(
    c: &mut impl Call,
    key: &[u8],
    expected: Option<&[u8]>,
    new: Option<&[u8]>,
) -> Result<bool, StoreError> {
    let flag = |v: Option<&[u8]>| -> &[u8] {
        if v.is_some() {
            b"1"
        } else {
            b"0"
        }
    };
    let args = [
        flag(expected),
        expected.unwrap_or(b""),
        flag(new),
        new.unwrap_or(b""),
    ];
    Ok(int_reply(c.eval(CAS, &[key], &args)?)? == 1)
}

pub(crate) fn incr_by(c: &mut impl Call, key: &[u8], delta: i64) -> Result<i64, StoreError> {
    let d = delta.to_string();
    int_reply(c.call(&[b"INCRBY", key, d.as_bytes()], &[key], true)?)
}

/// `POOL_INIT` on `pool` (run by the store with a long enough timeout): true when this call
/// filled it.
pub(crate) fn pool_init(
    c: &mut impl Call,
    pool: &[u8],
    items: &[Vec<u8>],
) -> Result<bool, StoreError> {
    let mut marker = pool.to_vec();
    marker.extend_from_slice(b":init");
    let args: Vec<&[u8]> = items.iter().map(|i| i.as_slice()).collect();
    Ok(int_reply(c.eval(POOL_INIT, &[pool, &marker], &args)?)? == 1)
}

pub(crate) fn pool_pop(c: &mut impl Call, pool: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
    match c.call(&[b"LPOP", pool], &[pool], true)? {
        Reply::Bulk(b) => Ok(Some(b)),
        Reply::Nil => Ok(None),
        r => Err(StoreError(format!("LPOP: unexpected reply {r:?}"))),
    }
}

/// LPOP with a count (Redis >= 6.2): one atomic pop of up to `max` items.
pub(crate) fn pool_pop_many(
    c: &mut impl Call,
    pool: &[u8],
    max: usize,
) -> Result<Vec<Vec<u8>>, StoreError> {
    if max == 0 {
        return Ok(Vec::new());
    }
    let n = max.to_string();
    match c.call(&[b"LPOP", pool, n.as_bytes()], &[pool], true)? {
        Reply::Array(items) => bulk_items("LPOP", items),
        Reply::Nil => Ok(Vec::new()),
        r => Err(StoreError(format!("LPOP: unexpected reply {r:?}"))),
    }
}

pub(crate) fn pool_push(c: &mut impl Call, pool: &[u8], item: &[u8]) -> Result<(), StoreError> {
    c.call(&[b"RPUSH", pool, item], &[pool], true).map(|_| ())
}

pub(crate) fn pool_len(c: &mut impl Call, pool: &[u8]) -> Result<usize, StoreError> {
    Ok(int_reply(c.call(&[b"LLEN", pool], &[pool], false)?)?.max(0) as usize)
}

pub(crate) fn timer_claim_due(
    c: &mut impl Call,
    timers: &[u8],
    now_ms: u64,
    max: usize,
) -> Result<Vec<Vec<u8>>, StoreError> {
    let (now, max) = (now_ms.to_string(), max.to_string());
    match c.eval(CLAIM_DUE, &[timers], &[now.as_bytes(), max.as_bytes()])? {
        Reply::Array(items) => Ok(items
            .into_iter()
            .filter_map(|r| match r {
                Reply::Bulk(b) => Some(b),
                _ => None,
            })
            .collect()),
        Reply::Nil => Ok(vec![]),
        r => Err(StoreError(format!("claim timers: unexpected reply {r:?}"))),
    }
}

/// HGETALL as (field, value) pairs sorted by field.
pub(crate) fn hash_get_all(c: &mut impl Call, key: &[u8]) -> Result<HashFields, StoreError> {
    match c.call(&[b"HGETALL", key], &[key], false)? {
        Reply::Array(items) => {
            let mut flat = bulk_items("HGETALL", items)?.into_iter();
            let mut v = Vec::new();
            while let (Some(f), Some(x)) = (flat.next(), flat.next()) {
                v.push((f, x));
            }
            v.sort();
            Ok(v)
        }
        r => Err(StoreError(format!("HGETALL: unexpected reply {r:?}"))),
    }
}
