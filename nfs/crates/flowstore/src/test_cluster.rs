//! A private Redis Cluster for tests: `masters x (1 + replicas)` redis-server processes with
//! `cluster-enabled yes` on free loopback ports (and their bus ports, +10000), in one temp dir,
//! joined by `redis-cli --cluster create`. Every process is killed and the dir removed on drop,
//! also when the test panics or the start fails half-way. Each node logs to `n<i>/redis.log`; a
//! start that fails says which step and quotes the nodes' state or log.

use crate::resp::{encode, Conn, Endpoint, Reply};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One redis-server of the cluster.
pub struct ClusterNode {
    child: Option<Child>,
    pub port: u16,
}

impl ClusterNode {
    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Process id (None once killed).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }
}

/// A running Redis Cluster owned by a test.
pub struct TestCluster {
    pub nodes: Vec<ClusterNode>,
    dir: PathBuf,
}

/// How long a node may take to answer PING, and the cluster to agree after `--cluster create`.
/// Generous: a fresh, loaded machine runs several clusters at once (cargo runs tests in parallel).
const PING_LIMIT: Duration = Duration::from_secs(15);
const READY_LIMIT: Duration = Duration::from_secs(60);
/// Attempts to start one node on a fresh port pair when it exits at once (its port was taken
/// between the check and its bind).
const NODE_ATTEMPTS: usize = 5;

/// Ports are taken below the kernel's ephemeral range when it leaves room (node 20000-22699, bus
/// +10000): an outgoing connection's local port (the fixture's own probes make many) can then
/// never take a node's port or bus port between the check and the server's bind.
const LOW_BASE: u16 = 20_000;
const LOW_SPAN: u16 = 2_700;

fn ephemeral_low() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// A cheap per-call pseudo-random number (no RNG crate for a test fixture).
fn spread(salt: u64) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut x =
        t ^ (u64::from(std::process::id()) << 32) ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^ (x >> 33)
}

fn pair_free(p: u16) -> bool {
    TcpListener::bind(("127.0.0.1", p)).is_ok()
        && TcpListener::bind(("127.0.0.1", p + 10_000)).is_ok()
}

/// A free port whose cluster bus port (+10000) is free too.
fn free_port_pair() -> std::io::Result<u16> {
    if u32::from(LOW_BASE) + u32::from(LOW_SPAN) + 10_000 <= u32::from(ephemeral_low()) {
        for i in 0..400u64 {
            let p = LOW_BASE + (spread(i) % u64::from(LOW_SPAN)) as u16;
            if pair_free(p) {
                return Ok(p);
            }
        }
    }
    for _ in 0..200 {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let p = l.local_addr()?.port();
        drop(l);
        if p < 55_000 && pair_free(p) {
            return Ok(p);
        }
    }
    Err(std::io::Error::other(
        "no free port pair for a cluster node",
    ))
}

/// The last `n` lines of a node's log (empty when it has none).
fn log_tail(ndir: &std::path::Path, n: usize) -> String {
    let text = std::fs::read_to_string(ndir.join("redis.log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// One command on a fresh connection to `addr` (tests and tools).
pub fn command(addr: &str, args: &[&[u8]]) -> std::io::Result<Reply> {
    let mut c = Conn::connect(&Endpoint::Tcp(addr.to_string()), Duration::from_secs(5))?;
    encode(&mut c.out, args);
    c.flush()?;
    c.read_reply()
}

impl TestCluster {
    /// Start `masters` masters with `replicas` replicas each; `node_timeout_ms` is
    /// `cluster-node-timeout` (how long before a dead master's replica is promoted). Waits
    /// (bounded) until every slot is served and every node agrees.
    pub fn start(masters: usize, replicas: usize, node_timeout_ms: u32) -> std::io::Result<Self> {
        let dir = std::env::temp_dir().join(format!(
            "unonfs-cluster-{}-{}",
            std::process::id(),
            free_port_pair()?
        ));
        std::fs::create_dir_all(&dir)?;
        let mut c = TestCluster {
            nodes: Vec::new(),
            dir,
        };
        for i in 0..masters * (1 + replicas) {
            let ndir = c.dir.join(format!("n{i}"));
            std::fs::create_dir_all(&ndir)?;
            let node = start_node(&ndir, node_timeout_ms)?;
            c.nodes.push(node);
        }
        let mut create = Command::new("redis-cli");
        create.args(["--cluster", "create"]);
        for n in &c.nodes {
            create.arg(n.addr());
        }
        let out = create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(std::io::Error::other(format!(
                "redis-cli --cluster create: {}",
                String::from_utf8_lossy(&out.stdout)
            )));
        }
        let want = masters * (1 + replicas);
        let agreed = wait_for(READY_LIMIT, || {
            c.nodes.iter().all(|n| {
                let info = info(&n.addr(), b"CLUSTER", b"INFO");
                info.contains("cluster_state:ok")
                    && info.contains("cluster_slots_ok:16384")
                    && info.contains(&format!("cluster_known_nodes:{want}"))
            }) && c.replicas_synced(replicas)
        });
        if !agreed {
            return Err(std::io::Error::other(format!(
                "cluster did not become ready in {READY_LIMIT:?} after --cluster create: {}",
                c.state_summary()
            )));
        }
        Ok(c)
    }

    /// Each node's view in one line (for a start that timed out).
    fn state_summary(&self) -> String {
        let pick = |text: &str, key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key))
                .unwrap_or("?")
                .trim()
                .to_string()
        };
        self.nodes
            .iter()
            .map(|n| {
                let ci = info(&n.addr(), b"CLUSTER", b"INFO");
                let ri = info(&n.addr(), b"INFO", b"replication");
                format!(
                    "{} state={} slots_ok={} known={} role={} replicas={}",
                    n.addr(),
                    pick(&ci, "cluster_state:"),
                    pick(&ci, "cluster_slots_ok:"),
                    pick(&ci, "cluster_known_nodes:"),
                    pick(&ri, "role:"),
                    pick(&ri, "connected_slaves:"),
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Every master sees `replicas` connected replicas, and every node's `CLUSTER SLOTS` lists
    /// them (gossip reaches the nodes a little later).
    fn replicas_synced(&self, replicas: usize) -> bool {
        let connected = self.masters().iter().all(|m| {
            info(m, b"INFO", b"replication").contains(&format!("connected_slaves:{replicas}"))
        });
        connected
            && self
                .nodes
                .iter()
                .all(|n| match command(&n.addr(), &[b"CLUSTER", b"SLOTS"]) {
                    Ok(Reply::Array(ranges)) => ranges
                        .iter()
                        .all(|r| matches!(r, Reply::Array(f) if f.len() >= 3 + replicas)),
                    _ => false,
                })
    }

    /// `redis-cluster://` URL with every node as a seed.
    pub fn url(&self) -> String {
        let seeds: Vec<String> = self.nodes.iter().map(|n| n.addr()).collect();
        format!("redis-cluster://{}", seeds.join(","))
    }

    /// Addresses of the nodes that are masters now (alive ones only).
    pub fn masters(&self) -> Vec<String> {
        self.nodes
            .iter()
            .filter(|n| n.child.is_some())
            .map(|n| n.addr())
            .filter(|a| info(a, b"INFO", b"replication").contains("role:master"))
            .collect()
    }

    /// The node with address `addr`.
    pub fn node(&self, addr: &str) -> Option<&ClusterNode> {
        self.nodes.iter().find(|n| n.addr() == addr)
    }

    /// Kill the node at `addr` with SIGKILL (a crash: no goodbye to the cluster).
    pub fn kill9(&mut self, addr: &str) {
        if let Some(n) = self.nodes.iter_mut().find(|n| n.addr() == addr) {
            if let Some(mut ch) = n.child.take() {
                let _ = ch.kill();
                let _ = ch.wait();
            }
        }
    }

    /// Send `sig` (e.g. SIGSTOP / SIGCONT) to the node at `addr`.
    pub fn signal(&self, addr: &str, sig: i32) {
        if let Some(pid) = self.node(addr).and_then(|n| n.pid()) {
            // SAFETY: kill(2) on a process this fixture started and still owns.
            unsafe {
                libc::kill(pid as i32, sig);
            }
        }
    }

    /// Run one command on every live node (ACL rules are per node, not replicated).
    pub fn on_every_node(&self, args: &[&[u8]]) -> std::io::Result<()> {
        for n in self.nodes.iter().filter(|n| n.child.is_some()) {
            match command(&n.addr(), args)? {
                Reply::Error(e) => return Err(std::io::Error::other(format!("{}: {e}", n.addr()))),
                _ => continue,
            }
        }
        Ok(())
    }
}

/// Poll `ok` every 50 ms until it holds (true) or `limit` passes (false).
fn wait_for(limit: Duration, mut ok: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Whether the server answering at `addr` is the one started in `ndir` (not another test's
/// node that took the port first: a bare PONG cannot tell them apart).
fn serves_dir(addr: &str, ndir: &std::path::Path) -> bool {
    // Redis reports its working directory as resolved (getcwd), so compare resolved paths.
    let ndir = std::fs::canonicalize(ndir).unwrap_or_else(|_| ndir.to_path_buf());
    match command(addr, &[b"CONFIG", b"GET", b"dir"]) {
        Ok(Reply::Array(kv)) => {
            matches!(kv.get(1), Some(Reply::Bulk(d)) if d.as_slice() == ndir.as_os_str().as_encoded_bytes())
        }
        _ => false,
    }
}

/// Start one cluster-enabled redis-server in `ndir` and wait until it answers as itself. A
/// server that exits at once (its port or bus port taken meanwhile, e.g. by a test running in
/// parallel) is started again on another pair.
fn start_node(ndir: &std::path::Path, node_timeout_ms: u32) -> std::io::Result<ClusterNode> {
    let mut last = String::new();
    for _ in 0..NODE_ATTEMPTS {
        let port = free_port_pair()?;
        let _ = std::fs::remove_file(ndir.join("nodes.conf"));
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--cluster-enabled", "yes", "--cluster-config-file"])
            .arg(ndir.join("nodes.conf"))
            .args(["--cluster-node-timeout", &node_timeout_ms.to_string()])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(ndir)
            .arg("--logfile")
            .arg(ndir.join("redis.log"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut node = ClusterNode {
            child: Some(child),
            port,
        };
        let addr = node.addr();
        let mut exited = false;
        let up = wait_for(PING_LIMIT, || {
            if let Some(ch) = node.child.as_mut() {
                if matches!(ch.try_wait(), Ok(Some(_))) {
                    exited = true;
                    return true;
                }
            }
            serves_dir(&addr, ndir)
        });
        if up && !exited {
            return Ok(node);
        }
        last = format!(
            "node on port {port} {}: {}",
            if exited {
                "exited"
            } else {
                "did not answer as itself in time"
            },
            log_tail(ndir, 3)
        );
        if let Some(mut ch) = node.child.take() {
            let _ = ch.kill();
            let _ = ch.wait();
        }
        if !exited {
            break;
        }
    }
    Err(std::io::Error::other(format!(
        "cluster node did not start: {last}"
    )))
}

/// A bulk-string reply of `addr` to a two-word command (empty on any error).
fn info(addr: &str, a: &[u8], b: &[u8]) -> String {
    match command(addr, &[a, b]) {
        Ok(Reply::Bulk(v)) => String::from_utf8_lossy(&v).into_owned(),
        _ => String::new(),
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            if let Some(mut ch) = n.child.take() {
                // SAFETY: a stopped (SIGSTOP) node must be continued to die promptly on SIGKILL
                // too, but SIGKILL works on stopped processes; the SIGCONT is harmless.
                unsafe {
                    libc::kill(ch.id() as i32, libc::SIGCONT);
                }
                let _ = ch.kill();
                let _ = ch.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node is recognised by its directory, so another test's node on the same port is not
    /// taken for ours; its ports come from below the ephemeral range when there is room.
    #[test]
    fn a_node_answers_as_itself_only() {
        let base = std::env::temp_dir().join(format!("unonfs-node-{}", std::process::id()));
        let (mine, other) = (base.join("a"), base.join("b"));
        std::fs::create_dir_all(&mine).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        let mut node = start_node(&mine, 5000).expect("a node starts");
        let (ours, theirs) = (
            serves_dir(&node.addr(), &mine),
            serves_dir(&node.addr(), &other),
        );
        if ephemeral_low() >= LOW_BASE + LOW_SPAN + 10_000 {
            assert!((LOW_BASE..LOW_BASE + LOW_SPAN).contains(&node.port));
        }
        if let Some(mut ch) = node.child.take() {
            let _ = ch.kill();
            let _ = ch.wait();
        }
        let _ = std::fs::remove_dir_all(&base);
        assert!(ours, "the node is recognised in its own directory");
        assert!(!theirs, "and not as another directory's node");
    }
}
