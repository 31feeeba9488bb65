//! Redis Cluster addressing: the hash slot of a key (CRC16 of its hash tag, modulo 16384), the
//! redirections a node answers (`MOVED` / `ASK`), and the slot map from `CLUSTER SLOTS`.
//! Pure functions, no I/O (the client is [`crate::ClusterStore`]).

use crate::resp::Reply;

/// Number of hash slots of a Redis Cluster.
pub const SLOTS: usize = 16384;

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0, no reflection), the checksum Redis
/// Cluster hashes keys with (cluster spec, appendix A).
pub fn crc16(data: &[u8]) -> u16 {
    static TABLE: std::sync::OnceLock<[u16; 256]> = std::sync::OnceLock::new();
    let t = TABLE.get_or_init(|| {
        let mut t = [0u16; 256];
        for (i, e) in t.iter_mut().enumerate() {
            let mut c = (i as u16) << 8;
            for _ in 0..8 {
                c = if c & 0x8000 != 0 {
                    (c << 1) ^ 0x1021
                } else {
                    c << 1
                };
            }
            *e = c;
        }
        t
    });
    data.iter().fold(0u16, |crc, &b| {
        (crc << 8) ^ t[((crc >> 8) as u8 ^ b) as usize]
    })
}

/// The part of `key` that is hashed: the bytes between the first `{` and the first `}` after
/// it when that is not empty (a hash tag), else the whole key (cluster spec, "Hash tags").
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The hash slot of `key` (0-16383).
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) & (SLOTS as u16 - 1)
}

/// A redirection answered by a cluster node instead of executing a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    /// `MOVED <slot> <host>:<port>`: the slot is served by that node now (refresh the map).
    Moved { slot: u16, addr: String },
    /// `ASK <slot> <host>:<port>`: this key is being migrated; send this one command there,
    /// preceded by `ASKING` (the map does not change).
    Ask { slot: u16, addr: String },
}

/// Parse an error reply as a redirection. `replied_by` is the `host:port` of the node that
/// answered: Redis 7 leaves the host out (`MOVED 3999 :6381`) when the node does not know its
/// own address for the client (`cluster-preferred-endpoint-type unknown-endpoint`), meaning
/// that same host. None: not a redirection, or a malformed one (then the reply counts as the
/// error it is).
pub fn parse_redirect(err: &str, replied_by: &str) -> Option<Redirect> {
    let mut it = err.split(' ');
    let kind = it.next()?;
    let slot = it.next()?;
    let addr = it.next()?;
    if it.next().is_some() || !(kind == "MOVED" || kind == "ASK") {
        return None;
    }
    if slot.is_empty() || slot.len() > 5 || !slot.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let slot: u16 = slot.parse().ok()?;
    if slot as usize >= SLOTS {
        return None;
    }
    // host:port; the host may itself contain ':' (IPv6, written without brackets by Redis).
    let (host, port) = addr.rsplit_once(':')?;
    if port.is_empty() || port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let port: u16 = port.parse().ok().filter(|&p| p != 0)?;
    if host
        .bytes()
        .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
    {
        return None;
    }
    let host = if host.is_empty() || host == "?" {
        host_of(replied_by)
    } else {
        host
    };
    let addr = join_host_port(host, port);
    Some(match kind {
        "MOVED" => Redirect::Moved { slot, addr },
        _ => Redirect::Ask { slot, addr },
    })
}

/// The host part of `host:port` (brackets of an IPv6 host removed).
pub fn host_of(addr: &str) -> &str {
    let h = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    h.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(h)
}

/// `host:port`, an IPv6 host in brackets (the form `ToSocketAddrs` takes).
pub fn join_host_port(host: &str, port: u16) -> String {
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// One slot range of a `CLUSTER SLOTS` reply: its master and its replicas (`host:port`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRange {
    pub start: u16,
    pub end: u16,
    pub master: String,
    pub replicas: Vec<String>,
}

/// Parse a `CLUSTER SLOTS` reply (RESP2: an array of `[start, end, [host, port, id, ...],
/// replica...]`). An empty host means the node that answered (`replied_by`'s host). Errors name
/// what is wrong; an empty list is an error (a node that serves no slot: not a cluster yet, or
/// every master lost).
pub fn parse_cluster_slots(r: &Reply, replied_by: &str) -> Result<Vec<SlotRange>, String> {
    let Reply::Array(ranges) = r else {
        return Err(format!("CLUSTER SLOTS: expected an array, got {r:?}"));
    };
    let node = |n: &Reply| -> Result<String, String> {
        let Reply::Array(f) = n else {
            return Err(format!("CLUSTER SLOTS: a node is not an array: {n:?}"));
        };
        let host = match f.first() {
            Some(Reply::Bulk(h)) => String::from_utf8_lossy(h).into_owned(),
            _ => return Err("CLUSTER SLOTS: a node has no host".into()),
        };
        let port = match f.get(1) {
            Some(Reply::Int(p)) if (1..=65535).contains(p) => *p as u16,
            _ => return Err("CLUSTER SLOTS: a node has no valid port".into()),
        };
        let host = if host.is_empty() || host == "?" {
            host_of(replied_by).to_string()
        } else {
            host
        };
        Ok(join_host_port(&host, port))
    };
    let mut out = Vec::with_capacity(ranges.len());
    for rg in ranges {
        let Reply::Array(f) = rg else {
            return Err(format!("CLUSTER SLOTS: a range is not an array: {rg:?}"));
        };
        let slot = |i: usize| match f.get(i) {
            Some(Reply::Int(s)) if (0..SLOTS as i64).contains(s) => Ok(*s as u16),
            _ => Err(format!("CLUSTER SLOTS: bad slot bound in {rg:?}")),
        };
        let (start, end) = (slot(0)?, slot(1)?);
        if start > end {
            return Err(format!("CLUSTER SLOTS: range {start}-{end} is reversed"));
        }
        let master = node(
            f.get(2)
                .ok_or_else(|| format!("CLUSTER SLOTS: range {start}-{end} has no master"))?,
        )?;
        let replicas = f[3..].iter().map(node).collect::<Result<_, _>>()?;
        out.push(SlotRange {
            start,
            end,
            master,
            replicas,
        });
    }
    if out.is_empty() {
        return Err("CLUSTER SLOTS: no slot is served (no master)".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Vectors of the Redis Cluster specification and of redis-cli's CLUSTER KEYSLOT.
    #[test]
    fn crc16_and_slots_match_the_spec() {
        // Appendix A: "The output for "123456789" is 31C3".
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(crc16(b""), 0);
        for (key, slot) in [
            (&b"foo"[..], 12182),
            (b"bar", 5061),
            (b"hello", 866),
            (b"123456789", 12739),
            (b"{user1000}.following", 3443),
            (b"{user1000}.followers", 3443),
            (b"user1000", 3443),
            // Spec examples: only the first tag counts, an empty tag hashes the whole key.
            (b"foo{{bar}}zap", key_slot(b"{bar")),
            (b"foo{bar}{zap}", key_slot(b"bar")),
            (b"foo{}{bar}", crc16(b"foo{}{bar}") & 16383),
            (b"{}", crc16(b"{}") & 16383),
            (b"}{", crc16(b"}{") & 16383),
            (b"{a", crc16(b"{a") & 16383),
        ] {
            assert_eq!(key_slot(key), slot, "{}", String::from_utf8_lossy(key));
        }
        // The NFs' keys: a flow's tables share a slot; NF-wide keys have their own.
        let ks = crate::KeySpace::new("fw1").unwrap();
        assert_eq!(key_slot(&ks.flow(7, "fw")), key_slot(&ks.flow(7, "mon")));
        assert_eq!(key_slot(&ks.flow(7, "fw")), key_slot(b"0000000000000007"));
        assert_eq!(key_slot(&ks.global("pool")), key_slot(b"nf:x:{pool}:init"));
    }

    #[test]
    fn redirects() {
        let by = "10.0.0.1:7000";
        assert_eq!(
            parse_redirect("MOVED 3999 127.0.0.1:6381", by),
            Some(Redirect::Moved {
                slot: 3999,
                addr: "127.0.0.1:6381".into()
            })
        );
        assert_eq!(
            parse_redirect("ASK 0 h.example:7001", by),
            Some(Redirect::Ask {
                slot: 0,
                addr: "h.example:7001".into()
            })
        );
        // No host: the node that answered.
        assert_eq!(
            parse_redirect("MOVED 16383 :7002", by),
            Some(Redirect::Moved {
                slot: 16383,
                addr: "10.0.0.1:7002".into()
            })
        );
        assert_eq!(
            parse_redirect("MOVED 1 ::1:7002", by),
            Some(Redirect::Moved {
                slot: 1,
                addr: "[::1]:7002".into()
            })
        );
        assert_eq!(
            parse_redirect("ASK 1 :7002", "[::1]:7000"),
            Some(Redirect::Ask {
                slot: 1,
                addr: "[::1]:7002".into()
            })
        );
        for bad in [
            "MOVED",
            "MOVED 1",
            "MOVED 16384 h:1",
            "MOVED -1 h:1",
            "MOVED x h:1",
            "MOVED 1 h",
            "MOVED 1 h:",
            "MOVED 1 h:0",
            "MOVED 1 h:65536",
            "MOVED 1 h:1 extra",
            "MOVED  1 h:1",
            "moved 1 h:1",
            "ERR MOVED 1 h:1",
            "TRYAGAIN Multiple keys request during rehashing of slot",
            "CLUSTERDOWN The cluster is down",
            "",
        ] {
            assert_eq!(parse_redirect(bad, by), None, "{bad:?}");
        }
    }

    #[test]
    fn cluster_slots_reply() {
        let node = |h: &str, p: i64| {
            Reply::Array(vec![
                Reply::Bulk(h.as_bytes().to_vec()),
                Reply::Int(p),
                Reply::Bulk(b"id".to_vec()),
            ])
        };
        let r = Reply::Array(vec![
            Reply::Array(vec![
                Reply::Int(0),
                Reply::Int(5460),
                node("127.0.0.1", 7000),
                node("127.0.0.1", 7003),
            ]),
            Reply::Array(vec![Reply::Int(5461), Reply::Int(16383), node("", 7001)]),
        ]);
        let m = parse_cluster_slots(&r, "10.1.1.1:7001").unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].master, "127.0.0.1:7000");
        assert_eq!(m[0].replicas, vec!["127.0.0.1:7003".to_string()]);
        assert_eq!(m[1].master, "10.1.1.1:7001");
        assert!(parse_cluster_slots(&Reply::Array(vec![]), "h:1")
            .unwrap_err()
            .contains("no master"));
        let bad = Reply::Array(vec![Reply::Array(vec![Reply::Int(5), Reply::Int(1)])]);
        assert!(parse_cluster_slots(&bad, "h:1").is_err());
        assert!(parse_cluster_slots(
            &Reply::Error("ERR This instance has cluster support disabled".into()),
            "h:1"
        )
        .is_err());
    }
}
