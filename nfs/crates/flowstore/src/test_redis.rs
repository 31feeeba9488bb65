//! A private redis-server for tests: free port, temp dir, stopped and removed on drop (also when
//! the test panics).

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
                ])
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
            let addr = format!("127.0.0.1:{}", self.port);
            if let Ok(mut c) = crate::resp::Conn::connect(&addr, Duration::from_millis(200)) {
                crate::resp::encode(&mut c.out, &[b"PING"]);
                if c.flush().is_ok() && c.read_reply().is_ok() {
                    return true;
                }
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
