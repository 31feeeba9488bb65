//! The backend pool as it is kept in the tier, and the choice of a backend. Pure logic.
//!
//! The pool value is text, one backend a line: `10.1.0.1:8080 up` or `[fd00::1]:80 down`, so an
//! operator can read and edit it with `redis-cli`.

use std::net::SocketAddr;

/// One backend and its health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backend {
    pub addr: SocketAddr,
    pub up: bool,
}

/// Encode a pool for the tier.
pub fn encode(pool: &[Backend]) -> Vec<u8> {
    let mut s = String::new();
    for b in pool {
        s.push_str(&format!(
            "{} {}\n",
            b.addr,
            if b.up { "up" } else { "down" }
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
        let up = match st.trim() {
            "up" => true,
            "down" => false,
            o => {
                return Err(format!(
                    "backend pool line {}: state must be up or down, not {o:?}",
                    i + 1
                ))
            }
        };
        out.push(Backend { addr, up });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let p = vec![
            Backend {
                addr: "10.1.0.1:8080".parse().unwrap(),
                up: true,
            },
            Backend {
                addr: "[fd00::1]:80".parse().unwrap(),
                up: false,
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
    fn least_loaded_up_backend_ties_by_score() {
        let a: SocketAddr = "10.1.0.1:80".parse().unwrap();
        let b: SocketAddr = "10.1.0.2:80".parse().unwrap();
        let pool = [Backend { addr: a, up: true }, Backend { addr: b, up: true }];
        assert_eq!(choose(&pool, |x| if *x == a { 5 } else { 1 }, 7), Some(b));
        assert_eq!(choose(&pool, |x| if *x == a { 0 } else { 1 }, 7), Some(a));
        let down = [
            Backend { addr: a, up: false },
            Backend { addr: b, up: true },
        ];
        assert_eq!(choose(&down, |_| 0, 7), Some(b));
        assert_eq!(choose(&[Backend { addr: a, up: false }], |_| 0, 7), None);
        // Equal loads: spread over flows by the rendezvous score, same answer every time.
        let picks: std::collections::HashSet<_> =
            (0..64u64).filter_map(|h| choose(&pool, |_| 0, h)).collect();
        assert_eq!(picks.len(), 2);
        assert_eq!(choose(&pool, |_| 0, 99), choose(&pool, |_| 0, 99));
    }
}
