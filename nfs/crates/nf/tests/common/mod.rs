//! Support shared by the tests that run the `nf` binary on real veth ports: guards that remove what
//! a test made (veth, child process, temp dir) also when it fails, and the few shell-outs they need.
#![allow(dead_code)] // each test binary uses its own subset

use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

/// A veth pair, deleted (with its peer) on drop.
pub struct Veth(pub String);

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).status();
    }
}

/// A child process, killed and reaped on drop.
pub struct Child(pub std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A directory removed with its contents on drop.
pub struct TempDir(pub std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `ip ARGS...`; false when it fails (e.g. not root).
pub fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Where a test reaches the NF's stats endpoint: a loopback port or a unix socket.
#[derive(Clone)]
pub enum StatsAt {
    Tcp(u16),
    Unix(std::path::PathBuf),
}

impl From<u16> for StatsAt {
    fn from(port: u16) -> StatsAt {
        StatsAt::Tcp(port)
    }
}

impl From<&std::path::Path> for StatsAt {
    fn from(p: &std::path::Path) -> StatsAt {
        StatsAt::Unix(p.to_path_buf())
    }
}

/// GET `path` from the NF's stats endpoint; the whole response, or None.
pub fn http_get(at: impl Into<StatsAt>, path: &str) -> Option<String> {
    fn talk(mut c: impl Read + Write, path: &str) -> Option<String> {
        // One write: the request must not depend on how the server's reads are split.
        c.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .ok()?;
        let mut s = String::new();
        c.read_to_string(&mut s).ok()?;
        Some(s)
    }
    let t = Some(Duration::from_secs(2));
    match at.into() {
        StatsAt::Tcp(port) => {
            let c = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
            c.set_read_timeout(t).ok()?;
            talk(c, path)
        }
        StatsAt::Unix(p) => {
            let c = std::os::unix::net::UnixStream::connect(p).ok()?;
            c.set_read_timeout(t).ok()?;
            talk(c, path)
        }
    }
}

/// Polls the NF's `/health` until it answers 200; panics naming `what` after `timeout`.
pub fn wait_ready(at: impl Into<StatsAt>, timeout: Duration, what: &str) {
    let at = at.into();
    let t0 = std::time::Instant::now();
    while !http_get(at.clone(), "/health").is_some_and(|r| r.starts_with("HTTP/1.1 200")) {
        assert!(t0.elapsed() < timeout, "{what}: nf did not become ready");
        std::thread::sleep(Duration::from_millis(20));
    }
}
