//! A private redis-server for tests: free port and a unix socket in its temp dir, stopped and
//! removed on drop (also when the test panics).

use crate::resp::{encode, Conn, Endpoint};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running redis-server owned by a test.
pub struct TestRedis {
    child: Child,
    dir: PathBuf,
    pub port: u16,
}

impl TestRedis {
    /// Start redis-server on a free loopback port; waits (bounded, 10 s) until it answers PING.
    pub fn start() -> std::io::Result<TestRedis> {
        let mut last_err = None;
        for attempt in 0..3 {
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let dir = std::env::temp_dir().join(format!(
                "unonfs-redis-{}-{}-{}",
                std::process::id(),
                port,
                attempt
            ));
            std::fs::create_dir_all(&dir)?;
            let child = Command::new("redis-server")
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--unixsocketperm",
                    "700",
                    "--unixsocket",
                ])
                .arg(dir.join("redis.sock"))
                .args(["--appendonly", "no", "--dir"])
                .arg(&dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            let mut r = TestRedis { child, dir, port };
            if r.wait_ready(Duration::from_secs(10)) {
                return Ok(r);
            }
            last_err = Some(std::io::Error::other(format!(
                "redis-server on port {port} did not start"
            )));
            let _ = r.child.kill();
        }
        Err(last_err.expect("attempted"))
    }

    fn wait_ready(&mut self, limit: Duration) -> bool {
        let t0 = Instant::now();
        while t0.elapsed() < limit {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            // Ready when both listeners answer.
            let eps = [
                Endpoint::Tcp(format!("127.0.0.1:{}", self.port)),
                Endpoint::Unix(self.socket_path()),
            ];
            if eps.iter().all(|ep| {
                let Ok(mut c) = Conn::connect(ep, Duration::from_millis(200)) else {
                    return false;
                };
                encode(&mut c.out, &[b"PING"]);
                c.flush().is_ok() && c.read_reply().is_ok()
            }) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Process id of the server.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's unix socket.
    pub fn socket_path(&self) -> PathBuf {
        self.dir.join("redis.sock")
    }

    /// `unix://<socket path>`.
    pub fn unix_url(&self) -> String {
        format!("unix://{}", self.socket_path().display())
    }

    /// Stop the server (simulates a tier failure); `Drop` still cleans up.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for TestRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
