//! Runtime counters and the stats/health HTTP endpoint (JSON).

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::control::{ControlHandle, Reply, Request, MAX_STATE_BYTES};
use serde_json::json;

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
    /// Buffering mode (a move's target waiting for its state) and its counters.
    pub buffering: AtomicBool,
    pub buffered: AtomicU64,
    pub buffered_now: AtomicU64,
    pub buffer_overflow: AtomicU64,
    pub replayed: AtomicU64,
    pub state_exports: AtomicU64,
    pub state_imports: AtomicU64,
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
            "buffering": self.buffering.load(Relaxed),
            "counters": {
                "rx": g(&self.rx), "tx": g(&self.tx), "batches": g(&self.batches),
                "dropped_by_nf": g(&self.dropped_by_nf), "malformed": g(&self.malformed),
                "non_ip": g(&self.non_ip), "store_errors": g(&self.store_errors),
                "fail_closed_dropped": g(&self.fail_closed_dropped),
                "fail_open_forwarded": g(&self.fail_open_forwarded),
                "timers_fired": g(&self.timers_fired),
                "buffered": g(&self.buffered), "buffered_now": g(&self.buffered_now),
                "buffer_overflow": g(&self.buffer_overflow), "replayed": g(&self.replayed),
                "state_exports": g(&self.state_exports), "state_imports": g(&self.state_imports),
            },
            "store": self.store.lock().map(|v| v.clone()).unwrap_or_default(),
            "nf_stats": self.nf.lock().map(|v| v.clone()).unwrap_or_default(),
        })
    }
}

/// Serve `GET /stats` (and `/health`: 200 when ready, 503 otherwise) on `addr` in a background
/// thread. Returns the bound address (port 0 picks a free one).
pub fn serve(addr: &str, stats: Arc<Stats>, id: Identity) -> std::io::Result<std::net::SocketAddr> {
    serve_with_control(addr, stats, id, None)
}

/// [`serve`], plus `GET /state` (the serialised per-flow state, `application/octet-stream`) and
/// `PUT /state` (import it into an instance started in buffering mode, which then processes its
/// buffer; JSON `{"imported", "replayed", "buffer_overflow"}`), answered by the runtime through
/// `control`. Without `control` (state held in the tier) `/state` is 409. Bad bodies are 400
/// with `{"error", "field"}`, bodies over [`MAX_STATE_BYTES`] 413, other methods 405.
pub fn serve_with_control(
    addr: &str,
    stats: Arc<Stats>,
    id: Identity,
    control: Option<ControlHandle>,
) -> std::io::Result<std::net::SocketAddr> {
    let l = TcpListener::bind(addr)?;
    let bound = l.local_addr()?;
    std::thread::Builder::new()
        .name("nf-stats".into())
        .spawn(move || {
            for conn in l.incoming() {
                let Ok(mut c) = conn else { continue };
                let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
                let (head, rest) = read_request_head(&mut c);
                let mut words = head.split_whitespace();
                let method = words.next().unwrap_or("GET").to_string();
                let path = words.next().unwrap_or("/");
                let path = path.split('?').next().unwrap_or(path).to_string();
                let resp = match path.as_str() {
                    "/health" => {
                        let ready = stats.ready.load(Relaxed);
                        Response::json(
                            if ready {
                                "200 OK"
                            } else {
                                "503 Service Unavailable"
                            },
                            json!({"ready": ready}),
                        )
                    }
                    "/" | "/stats" => Response::json("200 OK", stats.to_json(&id)),
                    "/state" => state_request(&mut c, &method, &head, rest, control.as_ref(), &id),
                    "/release" => release_request(&method, control.as_ref()),
                    _ => Response::json("404 Not Found", json!({"error": "not found"})),
                };
                let _ = resp.write(&mut c);
            }
        })?;
    Ok(bound)
}

struct Response {
    status: String,
    content_type: &'static str,
    body: Vec<u8>,
}

impl Response {
    fn json(status: &str, v: serde_json::Value) -> Response {
        Response {
            status: status.into(),
            content_type: "application/json",
            body: v.to_string().into_bytes(),
        }
    }

    fn error(status: u16, msg: &str) -> Response {
        let reason = match status {
            400 => "Bad Request",
            405 => "Method Not Allowed",
            409 => "Conflict",
            411 => "Length Required",
            413 => "Payload Too Large",
            503 => "Service Unavailable",
            _ => "Internal Server Error",
        };
        Response::json(
            &format!("{status} {reason}"),
            json!({"error": msg, "field": "state"}),
        )
    }

    fn write(&self, c: &mut std::net::TcpStream) -> std::io::Result<()> {
        write!(
            c,
            "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.status,
            self.content_type,
            self.body.len()
        )?;
        c.write_all(&self.body)
    }
}

fn state_request(
    c: &mut std::net::TcpStream,
    method: &str,
    head: &str,
    rest: Vec<u8>,
    control: Option<&ControlHandle>,
    id: &Identity,
) -> Response {
    let Some(control) = control else {
        return Response::error(
            409,
            &format!(
                "store {}: the state is not held by this process (only --store local moves state)",
                id.store_kind
            ),
        );
    };
    match method {
        "GET" => match control.call(Request::Export, Duration::from_secs(30)) {
            Ok(Reply::State(b)) => Response {
                status: "200 OK".into(),
                content_type: "application/octet-stream",
                body: b,
            },
            Ok(_) => Response::error(500, "unexpected reply"),
            Err(e) => Response::error(e.status, &e.message),
        },
        "PUT" => {
            let body = match read_body(c, head, rest) {
                Ok(b) => b,
                Err(r) => return r,
            };
            // Decode and build the new store here, off the runtime thread (100,000 flows take ~0.5 s; the
            // runtime keeps queueing packets meanwhile and only swaps the store in).
            let Ok(keys) = flowstore::KeySpace::new(&id.nf_id) else {
                return Response::error(500, "bad nf id");
            };
            let mut store = flowstore::LocalStore::new();
            let entries = match flowstore::FlowStore::import_state(
                &mut store,
                &body,
                keys.prefix().as_bytes(),
            ) {
                Ok(n) => n,
                Err(e) => return Response::error(400, &e),
            };
            drop(body);
            let req = Request::Install {
                store: Box::new(store),
                entries,
            };
            match control.call(req, Duration::from_secs(60)) {
                Ok(Reply::Imported {
                    entries,
                    replayed,
                    overflow,
                }) => Response::json(
                    "200 OK",
                    json!({"imported": entries, "replayed": replayed, "buffer_overflow": overflow}),
                ),
                Ok(_) => Response::error(500, "unexpected reply"),
                Err(e) => Response::error(e.status, &e.message),
            }
        }
        _ => Response::error(
            405,
            &format!("method {method} not allowed on /state (GET, PUT)"),
        ),
    }
}

/// `POST /release`: a buffering instance processes its queue in order and goes on normally
/// (JSON `{"replayed", "buffer_overflow"}`); 409 when it is not buffering (or has no control).
fn release_request(method: &str, control: Option<&ControlHandle>) -> Response {
    if method != "POST" {
        return Response::error(
            405,
            &format!("method {method} not allowed on /release (POST)"),
        );
    }
    let Some(control) = control else {
        return Response::error(
            409,
            "not buffering: nothing to release (started without --buffer)",
        );
    };
    match control.call(Request::Release, Duration::from_secs(60)) {
        Ok(Reply::Released { replayed, overflow }) => Response::json(
            "200 OK",
            json!({"replayed": replayed, "buffer_overflow": overflow}),
        ),
        Ok(_) => Response::error(500, "unexpected reply"),
        Err(e) => Response::error(e.status, &e.message),
    }
}

/// The request body announced by Content-Length (required; at most [`MAX_STATE_BYTES`]).
fn read_body(
    c: &mut std::net::TcpStream,
    head: &str,
    mut body: Vec<u8>,
) -> Result<Vec<u8>, Response> {
    let len = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.trim().parse::<usize>());
    let len = match len {
        None => return Err(Response::error(411, "Content-Length is required")),
        Some(Err(_)) => return Err(Response::error(400, "Content-Length is not a number")),
        Some(Ok(n)) if n > MAX_STATE_BYTES => {
            return Err(Response::error(
                413,
                &format!("body of {n} bytes, at most {MAX_STATE_BYTES}"),
            ))
        }
        Some(Ok(n)) => n,
    };
    if body.len() > len {
        return Err(Response::error(400, "more bytes than Content-Length"));
    }
    body.reserve(len - body.len());
    let mut buf = vec![0u8; 64 << 10];
    while body.len() < len {
        let want = (len - body.len()).min(buf.len());
        match c.read(&mut buf[..want]) {
            Ok(0) | Err(_) => return Err(Response::error(400, "body shorter than Content-Length")),
            Ok(n) => body.extend_from_slice(&buf[..n]),
        }
    }
    Ok(body)
}

/// Read a request head up to its blank line (bounded, so a slow or hostile client cannot hold the
/// thread or make it allocate). The whole head is consumed before answering: closing a socket
/// with unread request bytes makes the kernel send a reset, which can destroy the answer in flight.
fn read_request_head(c: &mut std::net::TcpStream) -> (String, Vec<u8>) {
    const MAX: usize = 8192;
    let mut head = Vec::with_capacity(256);
    let mut buf = [0u8; 1024];
    while head.len() < MAX && !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    // Bytes after the blank line are the start of the body.
    match head.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(i) => (
            String::from_utf8_lossy(&head[..i]).into_owned(),
            head[i + 4..].to_vec(),
        ),
        None => (String::from_utf8_lossy(&head).into_owned(), vec![]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(addr: std::net::SocketAddr, raw: &str) -> String {
        let mut c = std::net::TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(raw.as_bytes()).unwrap();
        let mut s = String::new();
        let _ = c.read_to_string(&mut s);
        s
    }

    fn id(store: &str) -> Identity {
        Identity {
            nf_type: "firewall".into(),
            nf_id: "fw".into(),
            instance: "i".into(),
            store_kind: store.into(),
            port: "p".into(),
        }
    }

    #[test]
    fn state_endpoint_refuses_cleanly() {
        let st = Arc::new(Stats::default());
        let redis = serve_with_control("127.0.0.1:0", st.clone(), id("redis"), None).unwrap();
        let r = req(redis, "GET /state HTTP/1.1\r\n\r\n");
        assert!(
            r.starts_with("HTTP/1.1 409") && r.contains("\"field\":\"state\""),
            "{r}"
        );
        // A local store whose runtime answers nothing here: length checks come first.
        let (h, _rx) = ControlHandle::channel();
        let local = serve_with_control("127.0.0.1:0", st, id("local"), Some(h)).unwrap();
        let r = req(local, "PUT /state HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 411"), "{r}");
        let r = req(local, "PUT /state HTTP/1.1\r\nContent-Length: x\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 400"), "{r}");
        let r = req(
            local,
            &format!(
                "PUT /state HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
                MAX_STATE_BYTES + 1
            ),
        );
        assert!(r.starts_with("HTTP/1.1 413"), "{r}");
        let r = req(
            local,
            "PUT /state HTTP/1.1\r\nContent-Length: 5\r\n\r\nxyzzy",
        );
        assert!(r.starts_with("HTTP/1.1 400") && r.contains("magic"), "{r}");
        let r = req(local, "POST /state HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 405"), "{r}");
        let r = req(local, "GET /release HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 405"), "{r}");
        let r = req(redis, "POST /release HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 409"), "{r}");
        let r = req(local, "GET /health HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 503"), "not ready yet: {r}");
    }
}
