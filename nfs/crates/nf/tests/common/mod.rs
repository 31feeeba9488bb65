//! Support shared by the tests that run the `nf` binary on real veth ports (the veth pairs come from
//! the `testnet` crate): guards that remove what a test made (child process, temp dir) also when it
//! fails, and the few requests they need.
#![allow(dead_code)] // each test binary uses its own subset

use std::io::{Read, Write};
use std::time::Duration;

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

/// Send `raw` (one write: the request must not depend on how the server's reads are split) to the
/// NF's stats endpoint and read the whole response, or None.
pub fn exchange(at: impl Into<StatsAt>, raw: &[u8], timeout: Duration) -> Option<Vec<u8>> {
    fn talk(mut c: impl Read + Write, raw: &[u8]) -> Option<Vec<u8>> {
        c.write_all(raw).ok()?;
        let mut s = vec![];
        c.read_to_end(&mut s).ok()?;
        Some(s)
    }
    let t = Some(timeout);
    match at.into() {
        StatsAt::Tcp(port) => {
            let c = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
            c.set_read_timeout(t).ok()?;
            talk(c, raw)
        }
        StatsAt::Unix(p) => {
            let c = std::os::unix::net::UnixStream::connect(p).ok()?;
            c.set_read_timeout(t).ok()?;
            talk(c, raw)
        }
    }
}

/// GET `path` from the NF's stats endpoint; the whole response, or None.
pub fn http_get(at: impl Into<StatsAt>, path: &str) -> Option<String> {
    let raw = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
    let r = exchange(at, raw.as_bytes(), Duration::from_secs(2))?;
    Some(String::from_utf8_lossy(&r).into_owned())
}

/// The NF's `/stats` document (panics when the endpoint does not answer or the body is not JSON).
pub fn stats_json(at: impl Into<StatsAt>) -> serde_json::Value {
    let s = http_get(at, "/stats").expect("/stats answered");
    let body = s.split("\r\n\r\n").nth(1).expect("a response body");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// The bytes of a `method path` request with `body`.
pub fn request(method: &str, path: &str, body: &[u8]) -> Vec<u8> {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    req
}

/// A whole response: (status line, body).
pub fn split_response(resp: &[u8]) -> (String, Vec<u8>) {
    let i = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let status = String::from_utf8_lossy(&resp[..i])
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    (status, resp[i + 4..].to_vec())
}

/// `method path` with `body` on the NF's stats endpoint: (status line, body); panics when the
/// endpoint does not answer within 30 s.
pub fn http(at: impl Into<StatsAt>, method: &str, path: &str, body: &[u8]) -> (String, Vec<u8>) {
    let resp = exchange(at, &request(method, path, body), Duration::from_secs(30));
    split_response(&resp.expect("an answer"))
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

/// `nf monitor` on `iface` (NF id `nf_id`) with its stats on the unix socket `sock`, `extra`
/// arguments last; returns once it answers /health.
pub fn spawn_monitor(
    nf_id: &str,
    iface: &str,
    store: &str,
    sock: &std::path::Path,
    cfg: &std::path::Path,
    extra: &[&str],
) -> Child {
    let c = Child(
        std::process::Command::new(env!("CARGO_BIN_EXE_nf"))
            .args(["monitor", "--port", iface, "--store", store])
            .args(["--nf-id", nf_id, "--instance", iface])
            .args(["--config", cfg.to_str().unwrap()])
            .args(["--stats", &format!("unix://{}", sock.display())])
            .args(extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_ready(sock, Duration::from_secs(10), "monitor");
    c
}

/// A JSON body, or a panic naming it.
pub fn json(body: &[u8]) -> serde_json::Value {
    serde_json::from_slice(body).unwrap_or_else(|e| panic!("{e}: {body:?}"))
}

/// Send `n` UDP frames of run `run` (`traffic` markers, one flow, sequence 0..n) from 10.9.`net`.1
/// to 10.9.`net`.2 as fast as the socket takes them.
pub fn burst(tx: &mut netio::afpacket::AfPacket, run: u32, n: u32, net: u8) {
    use netio::Device;
    let gen = traffic::gen::GenConfig {
        run,
        flows: 1,
        pkts: n,
        tcp: false,
        frame_len: 64,
        src: std::net::Ipv4Addr::new(10, 9, net, 1).into(),
        dst: std::net::Ipv4Addr::new(10, 9, net, 2).into(),
        src_mac: [2, 0, 0, 0, net, 1],
        dst_mac: [2, 0, 0, 0, net, 2],
        dst_port: 9,
    };
    let mut b = netio::Batch::with_capacity(32);
    for chunk in traffic::gen::frames(&gen).collect::<Vec<_>>().chunks(32) {
        b.clear();
        for g in chunk {
            b.push(&g.frame, 0);
        }
        assert_eq!(tx.send(&b, &vec![true; b.len()], 0).unwrap(), b.len());
    }
}

/// The sequence numbers of run `run`'s frames that came back within `wait`, in arrival order
/// (stops at `want`).
pub fn returned(
    rx: &mut netio::afpacket::AfPacket,
    run: u32,
    want: usize,
    wait: Duration,
) -> Vec<u32> {
    use netio::Device;
    let mut got = vec![];
    let mut b = netio::Batch::with_capacity(64);
    let t0 = std::time::Instant::now();
    while got.len() < want && t0.elapsed() < wait {
        rx.recv(&mut b, 0).unwrap();
        got.extend(
            b.iter()
                .filter_map(|f| {
                    let p = packet::Parsed::new_checked(f).ok()?;
                    traffic::Marker::read(p.payload(f))
                })
                .filter(|m| m.run == run)
                .map(|m| m.seq),
        );
    }
    got
}
