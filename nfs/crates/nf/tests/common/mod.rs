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

/// GET `path` from the NF's stats endpoint on loopback; the whole response, or None.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    // One write: the request must not depend on how the server's reads are split.
    c.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .ok()?;
    let mut s = String::new();
    c.read_to_string(&mut s).ok()?;
    Some(s)
}

/// Polls the NF's `/health` until it answers 200; panics naming `what` after `timeout`.
pub fn wait_ready(stats_port: u16, timeout: Duration, what: &str) {
    let t0 = std::time::Instant::now();
    while !http_get(stats_port, "/health").is_some_and(|r| r.starts_with("HTTP/1.1 200")) {
        assert!(t0.elapsed() < timeout, "{what}: nf did not become ready");
        std::thread::sleep(Duration::from_millis(20));
    }
}
