//! A private Redis Cluster for tests: `masters x (1 + replicas)` redis-server processes with
//! `cluster-enabled yes` on free loopback ports (and their bus ports, +10000), in one temp dir,
//! joined by `redis-cli --cluster create`. Every process is killed and the dir removed on drop,
//! also when the test panics or the start fails half-way.

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

/// A free port whose cluster bus port (+10000) is free too.
fn free_port_pair() -> std::io::Result<u16> {
    for _ in 0..200 {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let p = l.local_addr()?.port();
        if p < 55_000 && TcpListener::bind(("127.0.0.1", p + 10_000)).is_ok() {
            return Ok(p);
        }
    }
    Err(std::io::Error::other(
        "no free port pair for a cluster node",
    ))
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
            let port = free_port_pair()?;
            let ndir = c.dir.join(format!("n{i}"));
            std::fs::create_dir_all(&ndir)?;
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--cluster-enabled", "yes", "--cluster-config-file"])
                .arg(ndir.join("nodes.conf"))
                .args(["--cluster-node-timeout", &node_timeout_ms.to_string()])
                .args(["--save", "", "--appendonly", "no", "--dir"])
                .arg(&ndir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            c.nodes.push(ClusterNode {
                child: Some(child),
                port,
            });
        }
        for n in &c.nodes {
            c.wait_for(Duration::from_secs(10), || {
                matches!(command(&n.addr(), &[b"PING"]), Ok(Reply::Status))
            })?;
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
        c.wait_for(Duration::from_secs(20), || {
            c.nodes.iter().all(|n| {
                let info = info(&n.addr(), b"CLUSTER", b"INFO");
                info.contains("cluster_state:ok")
                    && info.contains("cluster_slots_ok:16384")
                    && info.contains(&format!("cluster_known_nodes:{want}"))
            }) && c.replicas_synced(replicas)
        })?;
        Ok(c)
    }

    fn wait_for(&self, limit: Duration, mut ok: impl FnMut() -> bool) -> std::io::Result<()> {
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(std::io::Error::other(
            "cluster did not become ready in time",
        ))
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
