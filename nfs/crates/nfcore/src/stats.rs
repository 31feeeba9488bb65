//! Runtime counters and the stats/health HTTP endpoint (JSON).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Counters shared between the runtime thread and the HTTP thread.
#[derive(Debug, Default)]
pub struct Stats {
    pub rx: AtomicU64,
    pub tx: AtomicU64,
    pub batches: AtomicU64,
    pub dropped_by_nf: AtomicU64,
    pub malformed: AtomicU64,
    pub non_ip: AtomicU64,
    pub store_errors: AtomicU64,
    pub fail_closed_dropped: AtomicU64,
    pub fail_open_forwarded: AtomicU64,
    pub timers_fired: AtomicU64,
    pub ready: AtomicBool,
    /// Latest snapshot of the store's counters and the NF's own counters.
    pub store: Mutex<serde_json::Value>,
    pub nf: Mutex<serde_json::Value>,
}

/// Identity shown by the endpoint.
#[derive(Debug, Clone)]
pub struct Identity {
    pub nf_type: String,
    pub nf_id: String,
    pub instance: String,
    pub store_kind: String,
    pub port: String,
}

impl Stats {
    pub fn to_json(&self, id: &Identity) -> serde_json::Value {
        let g = |a: &AtomicU64| a.load(Relaxed);
        serde_json::json!({
            "nf": id.nf_type, "nf_id": id.nf_id, "instance": id.instance,
            "store_kind": id.store_kind, "port": id.port,
            "ready": self.ready.load(Relaxed),
            "counters": {
                "rx": g(&self.rx), "tx": g(&self.tx), "batches": g(&self.batches),
                "dropped_by_nf": g(&self.dropped_by_nf), "malformed": g(&self.malformed),
                "non_ip": g(&self.non_ip), "store_errors": g(&self.store_errors),
                "fail_closed_dropped": g(&self.fail_closed_dropped),
                "fail_open_forwarded": g(&self.fail_open_forwarded),
                "timers_fired": g(&self.timers_fired),
            },
            "store": self.store.lock().map(|v| v.clone()).unwrap_or_default(),
            "nf_stats": self.nf.lock().map(|v| v.clone()).unwrap_or_default(),
        })
    }
}

/// Serve `GET /stats` (and `/health`: 200 when ready, 503 otherwise) on `addr` in a background
/// thread. Returns the bound address (port 0 picks a free one).
pub fn serve(addr: &str, stats: Arc<Stats>, id: Identity) -> std::io::Result<std::net::SocketAddr> {
    let l = TcpListener::bind(addr)?;
    let bound = l.local_addr()?;
    std::thread::Builder::new().name("nf-stats".into()).spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { continue };
            let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(2)));
            let req = read_request_head(&mut c);
            let path = req.split_whitespace().nth(1).unwrap_or("/");
            let (code, body) = match path {
                "/health" => {
                    let ready = stats.ready.load(Relaxed);
                    (if ready { "200 OK" } else { "503 Service Unavailable" }, serde_json::json!({"ready": ready}))
                }
                "/" | "/stats" => ("200 OK", stats.to_json(&id)),
                _ => ("404 Not Found", serde_json::json!({"error": "not found"})),
            };
            let body = body.to_string();
            let _ = write!(
                c,
                "HTTP/1.1 {code}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    })?;
    Ok(bound)
}

/// Read a request head up to its blank line (bounded, so a slow or hostile client cannot hold the
/// thread or make it allocate). The whole head is consumed before answering: closing a socket
/// with unread request bytes makes the kernel send a reset, which can destroy the answer in flight.
fn read_request_head(c: &mut std::net::TcpStream) -> String {
    const MAX: usize = 8192;
    let mut head = Vec::with_capacity(256);
    let mut buf = [0u8; 1024];
    while head.len() < MAX && !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}
