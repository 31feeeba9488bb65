//! The backend pool as it is kept in the tier, and the choice of a backend. Pure logic.
//!
//! The pool value is text, one backend a line: `10.1.0.1:8080 up`, `[fd00::1]:80 down` or
//! `10.1.0.3:8080 drain` (removed from the config while it still had connections: it gets no new
//! ones, its connections keep it until they end), so an operator can read and edit it with
//! `redis-cli`.

use std::net::SocketAddr;

/// One backend and its health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backend {
    pub addr: SocketAddr,
    /// Takes new connections (false: marked down, or draining).
    pub up: bool,
    /// Removed from the config: kept only for its connections, removed when they end.
    pub drain: bool,
}

/// Encode a pool for the tier.
pub fn encode(pool: &[Backend]) -> Vec<u8> {
    let mut s = String::new();
    for b in pool {
        s.push_str(&format!(
            "{} {}\n",
            b.addr,
            match (b.drain, b.up) {
                (true, _) => "drain",
                (false, true) => "up",
                (false, false) => "down",
            }
        ));
    }
    s.into_bytes()
}

/// Decode a pool; `Err` names the bad line (the value was edited by hand).
pub fn decode(b: &[u8]) -> Result<Vec<Backend>, String> {
    let s = std::str::from_utf8(b).map_err(|_| "backend pool is not UTF-8".to_string())?;
    let mut out = Vec::new();
    for (i, line) in s.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let (a, st) = line.split_once(' ').unwrap_or((line, "up"));
        let addr: SocketAddr = a
            .parse()
            .map_err(|_| format!("backend pool line {}: bad address {a:?}", i + 1))?;
        let (up, drain) = match st.trim() {
            "up" => (true, false),
            "down" => (false, false),
            "drain" => (false, true),
            o => {
                return Err(format!(
                    "backend pool line {}: state must be up, down or drain, not {o:?}",
                    i + 1
                ))
            }
        };
        out.push(Backend { addr, up, drain });
    }
    Ok(out)
}

/// Rendezvous (highest random weight) score of `addr` for a flow: the tie-break between equally
/// loaded backends, the same on every instance.
pub fn score(flow_hash: u64, addr: &SocketAddr) -> u64 {
    let mut v = flow_hash.to_le_bytes().to_vec();
    v.extend_from_slice(addr.to_string().as_bytes());
    packet::flow::fnv1a(&v)
}

/// thesis Algorithm 1 `nextServer`: the up backend with the fewest active connections (`load`),
/// ties broken by the rendezvous score. None if no backend is up.
pub fn choose(
    pool: &[Backend],
    load: impl Fn(&SocketAddr) -> i64,
    flow_hash: u64,
) -> Option<SocketAddr> {
    pool.iter()
        .filter(|b| b.up)
        .map(|b| {
            (
                load(&b.addr).max(0),
                std::cmp::Reverse(score(flow_hash, &b.addr)),
                b.addr,
            )
        })
        .min()
        .map(|(_, _, a)| a)
}

/// The pool after the config's backend list became `config`: a backend kept keeps its health,
/// a new one is up, a draining one given again is up; a backend no longer in the config drains
/// while `active` (its connection count) is above 0, else it goes. Config order, then the
/// draining ones.
pub fn reconcile(
    pool: &[Backend],
    config: &[SocketAddr],
    active: impl Fn(&SocketAddr) -> i64,
) -> Vec<Backend> {
    let mut out: Vec<Backend> = config
        .iter()
        .map(|a| match pool.iter().find(|b| b.addr == *a) {
            Some(b) if !b.drain => *b,
            _ => Backend {
                addr: *a,
                up: true,
                drain: false,
            },
        })
        .collect();
    for b in pool.iter().filter(|b| !config.contains(&b.addr)) {
        if active(&b.addr) > 0 {
            out.push(Backend {
                addr: b.addr,
                up: false,
                drain: true,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let p = vec![
            Backend {
                addr: "10.1.0.1:8080".parse().unwrap(),
                up: true,
                drain: false,
            },
            Backend {
                addr: "[fd00::1]:80".parse().unwrap(),
                up: false,
                drain: false,
            },
        ];
        assert_eq!(decode(&encode(&p)).unwrap(), p);
        assert_eq!(decode(b"10.1.0.1:1\n\n").unwrap().len(), 1);
        assert!(decode(b"10.1.0.1 up").unwrap_err().contains("line 1"));
        assert!(decode(b"10.1.0.1:1 sideways")
            .unwrap_err()
            .contains("state"));
        assert!(decode(&[0xff]).is_err());
    }

    #[test]
    fn reconcile_adds_keeps_health_and_drains_removed_backends_with_connections() {
        let [a, b, c, d]: [SocketAddr; 4] =
            ["10.1.0.1:80", "10.1.0.2:80", "10.1.0.3:80", "10.1.0.4:80"]
                .map(|s| s.parse().unwrap());
        let be = |addr, up, drain| Backend { addr, up, drain };
        let pool = [
            be(a, true, false),
            be(b, false, false),
            be(c, true, false),
            be(d, false, true),
        ];
        // a kept, b kept down, c removed with 3 connections, d (draining) given again, a new one.
        let e: SocketAddr = "10.1.0.5:80".parse().unwrap();
        let got = reconcile(&pool, &[a, b, d, e], |x| if *x == c { 3 } else { 0 });
        assert_eq!(
            got,
            [
                be(a, true, false),
                be(b, false, false),
                be(d, true, false),
                be(e, true, false),
                be(c, false, true)
            ]
        );
        assert_eq!(decode(&encode(&got)).unwrap(), got);
        // A draining backend gets no new connection.
        assert_eq!(choose(&[be(c, false, true)], |_| 0, 1), None);
        // Removed without connections: gone.
        assert_eq!(reconcile(&pool, &[a], |_| 0), [be(a, true, false)]);
    }

    #[test]
    fn least_loaded_up_backend_ties_by_score() {
        let a: SocketAddr = "10.1.0.1:80".parse().unwrap();
        let b: SocketAddr = "10.1.0.2:80".parse().unwrap();
        let pool = [
            Backend {
                addr: a,
                up: true,
                drain: false,
            },
            Backend {
                addr: b,
                up: true,
                drain: false,
            },
        ];
        assert_eq!(choose(&pool, |x| if *x == a { 5 } else { 1 }, 7), Some(b));
        assert_eq!(choose(&pool, |x| if *x == a { 0 } else { 1 }, 7), Some(a));
        let down = [
            Backend {
                addr: a,
                up: false,
                drain: false,
            },
            Backend {
                addr: b,
                up: true,
                drain: false,
            },
        ];
        assert_eq!(choose(&down, |_| 0, 7), Some(b));
        assert_eq!(
            choose(
                &[Backend {
                    addr: a,
                    up: false,
                    drain: false
                }],
                |_| 0,
                7
            ),
            None
        );
        // Equal loads: spread over flows by the rendezvous score, same answer every time.
        let picks: std::collections::HashSet<_> =
            (0..64u64).filter_map(|h| choose(&pool, |_| 0, h)).collect();
        assert_eq!(picks.len(), 2);
        assert_eq!(choose(&pool, |_| 0, 99), choose(&pool, |_| 0, 99));
    }
}
