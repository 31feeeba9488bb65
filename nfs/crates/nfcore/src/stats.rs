//! Runtime counters and the stats/health HTTP endpoint (JSON).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::control::{ControlHandle, Reply, Request, MAX_STATE_BYTES};
use crate::drain::{mono_ns, parse_query, DrainRequest};
use flowstore::resp::{read_through_signals, MAX_UNIX_PATH};
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
    /// Claims ([`crate::Ctx::claim`]) another instance won, and the forwarded packets dropped
    /// because they (or a packet of their batch) depended on one.
    pub claims_lost: AtomicU64,
    pub claim_dropped: AtomicU64,
    /// Keys a small batch did not read from the tier because an earlier batch in flight reads
    /// and was expected to write them (pipelined loop; one that did not is read when needed,
    /// counted as the store's unplanned read).
    pub reads_borrowed: AtomicU64,
    pub ready: AtomicBool,
    /// Buffering mode (a move's target waiting for its state) and its counters.
    pub buffering: AtomicBool,
    pub buffered: AtomicU64,
    pub buffered_now: AtomicU64,
    pub buffer_overflow: AtomicU64,
    pub replayed: AtomicU64,
    /// Times a running instance was told to hold (`POST /hold`).
    pub holds: AtomicU64,
    pub state_exports: AtomicU64,
    pub state_imports: AtomicU64,
    /// Configs applied in place (`PUT /config`).
    pub reconfigured: AtomicU64,
    /// Frames the port dropped because its receive ring was full (as the kernel counts them,
    /// read at snapshots and drain checks; 0 where the port does not count).
    pub port_drops: AtomicU64,
    /// Latest snapshot of the store's counters and the NF's own counters.
    pub store: Mutex<serde_json::Value>,
    pub nf: Mutex<serde_json::Value>,
}

/// Identity shown by the endpoint.
#[derive(Debug, Clone)]
pub struct Identity {
    pub nf_type: String,
    pub nf_id: String,
    /// The tenant the NF's keys belong to (`tn:<tenant>:...`).
    pub tenant: String,
    pub instance: String,
    pub store_kind: String,
    pub port: String,
    /// The CPU wake-up latency bound this process holds (us; None: none, or it could not be
    /// held): see [`crate::cpu_latency`].
    pub cpu_latency_us: Option<u32>,
}

impl Stats {
    pub fn to_json(&self, id: &Identity) -> serde_json::Value {
        let g = |a: &AtomicU64| a.load(Relaxed);
        serde_json::json!({
            "nf": id.nf_type, "nf_id": id.nf_id, "tenant": id.tenant, "instance": id.instance,
            "store_kind": id.store_kind, "port": id.port, "cpu_latency_us": id.cpu_latency_us,
            "ready": self.ready.load(Relaxed),
            "buffering": self.buffering.load(Relaxed),
            "counters": {
                "rx": g(&self.rx), "tx": g(&self.tx), "batches": g(&self.batches),
                "dropped_by_nf": g(&self.dropped_by_nf), "malformed": g(&self.malformed),
                "non_ip": g(&self.non_ip), "store_errors": g(&self.store_errors),
                "fail_closed_dropped": g(&self.fail_closed_dropped),
                "fail_open_forwarded": g(&self.fail_open_forwarded),
                "timers_fired": g(&self.timers_fired),
                "claims_lost": g(&self.claims_lost), "claim_dropped": g(&self.claim_dropped),
                "reads_borrowed": g(&self.reads_borrowed),
                "buffered": g(&self.buffered), "buffered_now": g(&self.buffered_now),
                "buffer_overflow": g(&self.buffer_overflow), "replayed": g(&self.replayed),
                "holds": g(&self.holds),
                "state_exports": g(&self.state_exports), "state_imports": g(&self.state_imports),
                "reconfigured": g(&self.reconfigured),
                "port_drops": g(&self.port_drops),
            },
            "store": self.store.lock().map(|v| v.clone()).unwrap_or_default(),
            "nf_stats": self.nf.lock().map(|v| v.clone()).unwrap_or_default(),
        })
    }
}

/// Where the endpoint listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatsAddr {
    /// `HOST:PORT` (port 0 picks a free one).
    Tcp(String),
    /// `unix:///PATH`: a unix socket (mode 0600), reachable from any network namespace of the
    /// machine, so an agent in the root namespace reads an NF in its own namespace with no relay.
    Unix(PathBuf),
}

impl StatsAddr {
    /// `HOST:PORT` or `unix:///ABSOLUTE/PATH`; the error names the value.
    pub fn parse(s: &str) -> Result<StatsAddr, String> {
        match s.strip_prefix("unix://") {
            Some(p) if p.starts_with('/') && p.len() <= MAX_UNIX_PATH && !p.ends_with('/') => {
                Ok(StatsAddr::Unix(p.into()))
            }
            Some(_) => Err(format!(
                "--stats {s:?}: expected unix:///ABSOLUTE/PATH (at most {MAX_UNIX_PATH} bytes) or HOST:PORT"
            )),
            None if s.rsplit_once(':').is_some_and(|(h, p)| {
                !h.is_empty() && p.parse::<u16>().is_ok()
            }) =>
            {
                Ok(StatsAddr::Tcp(s.into()))
            }
            None => Err(format!(
                "--stats {s:?}: expected HOST:PORT or unix:///ABSOLUTE/PATH"
            )),
        }
    }
}

/// Where a started endpoint listens (a TCP port 0 resolved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bound {
    Tcp(std::net::SocketAddr),
    Unix(PathBuf),
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bound::Tcp(a) => write!(f, "http://{a}"),
            Bound::Unix(p) => write!(f, "unix://{}", p.display()),
        }
    }
}

/// A connection the endpoint answers on (TCP or unix).
trait Stream: Read + Write + Send + 'static {
    fn set_timeout(&self, d: Duration);
}

impl Stream for TcpStream {
    fn set_timeout(&self, d: Duration) {
        let _ = self.set_read_timeout(Some(d));
    }
}

impl Stream for UnixStream {
    fn set_timeout(&self, d: Duration) {
        let _ = self.set_read_timeout(Some(d));
    }
}

/// Serve `GET /stats` (and `/health`: 200 when ready, 503 otherwise) on `addr` in a background
/// thread. Returns the bound address (port 0 picks a free one).
pub fn serve(addr: &str, stats: Arc<Stats>, id: Identity) -> std::io::Result<std::net::SocketAddr> {
    match serve_with_control(&StatsAddr::Tcp(addr.into()), stats, id, None)? {
        Bound::Tcp(a) => Ok(a),
        Bound::Unix(_) => unreachable!("a TCP address binds a TCP listener"),
    }
}

/// Bind a unix socket at `path`: a socket file nobody answers on (left by a crashed process) is
/// replaced; one that answers, or any other kind of file, is an error. Mode 0600.
fn bind_unix(path: &Path) -> std::io::Result<UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_socket() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("{} is served by another process", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let l = UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(l)
}

/// [`serve`], plus `GET /state` (the serialised per-flow state, `application/octet-stream`) and
/// `PUT /state` (import it into an instance started in buffering mode, which then processes its
/// buffer; JSON `{"imported", "replayed", "buffer_overflow"}`), answered by the runtime through
/// `control`. Without `control`, or with a store that is not local (state held in the tier),
/// `/state` is 409. Bad bodies are 400 with `{"error", "field"}`, bodies over [`MAX_STATE_BYTES`]
/// 413, other methods 405. `POST /drain?quiet_ms=N[&timeout_ms=T]` ([`crate::drain`]) is answered
/// by the runtime once drained, on a thread of its own (at most [`MAX_DRAINS`] at once), so
/// `/health` and `/stats` keep answering meanwhile.
pub fn serve_with_control(
    addr: &StatsAddr,
    stats: Arc<Stats>,
    id: Identity,
    control: Option<ControlHandle>,
) -> std::io::Result<Bound> {
    let server = Server {
        stats,
        id,
        control: control.map(Arc::new),
        drains: Arc::new(AtomicUsize::new(0)),
    };
    let thread = std::thread::Builder::new().name("nf-stats".into());
    match addr {
        StatsAddr::Tcp(a) => {
            let l = TcpListener::bind(a)?;
            let bound = l.local_addr()?;
            thread.spawn(move || server.run(l.incoming()))?;
            Ok(Bound::Tcp(bound))
        }
        StatsAddr::Unix(p) => {
            let l = bind_unix(p)?;
            thread.spawn(move || server.run(l.incoming()))?;
            Ok(Bound::Unix(p.clone()))
        }
    }
}

/// Drain requests waiting at once, at most (each holds a thread until its answer).
pub const MAX_DRAINS: usize = 8;

/// What the endpoint thread answers from.
struct Server {
    stats: Arc<Stats>,
    id: Identity,
    control: Option<Arc<ControlHandle>>,
    /// Drain requests waiting now.
    drains: Arc<AtomicUsize>,
}

impl Server {
    fn run<S: Stream>(&self, incoming: impl Iterator<Item = std::io::Result<S>>) {
        for conn in incoming {
            let Ok(mut c) = conn else { continue };
            c.set_timeout(HEAD_WAIT);
            let Some((head, rest)) = read_request_head(&mut c) else {
                // Never guessed (an empty head is no `GET /`): a request cut short is refused,
                // whatever it was going to ask.
                let msg = format!(
                    "incomplete request head (no blank line within {} s and {HEAD_MAX} bytes)",
                    HEAD_WAIT.as_secs()
                );
                let _ = Response::error_in(400, "request", &msg).write(&mut c);
                continue;
            };
            let since_ns = mono_ns();
            let mut words = head.split_whitespace();
            let method = words.next().unwrap_or("GET").to_string();
            let target = words.next().unwrap_or("/");
            let (path, query) = target.split_once('?').unwrap_or((target, ""));
            let resp = match path {
                "/drain" => match self.drain_request(&method, query, since_ns) {
                    Ok(wait) => {
                        // The answer comes when the runtime finds the instance drained.
                        self.spawn_drain(c, wait);
                        continue;
                    }
                    Err(r) => r,
                },
                "/hold" => hold_request(&method, query, self.control.as_deref()),
                _ => self.answer(&mut c, &method, path, &head, rest),
            };
            let _ = resp.write(&mut c);
        }
    }

    /// Check a drain request; the runtime call to make (or the error answer).
    fn drain_request(
        &self,
        method: &str,
        query: &str,
        since_ns: u64,
    ) -> Result<(Arc<ControlHandle>, DrainRequest), Response> {
        if method != "POST" {
            return Err(Response::error_in(
                405,
                "method",
                &format!("method {method} not allowed on /drain (POST)"),
            ));
        }
        let (quiet, timeout, flush) =
            parse_query(query).map_err(|(field, e)| Response::error_in(400, field, &e))?;
        let Some(control) = &self.control else {
            return Err(Response::error_in(
                501,
                "drain",
                "this endpoint does not reach the NF's runtime",
            ));
        };
        let rx = self.stats.rx.load(Relaxed);
        Ok((
            control.clone(),
            match flush {
                true => DrainRequest::new(since_ns, rx, quiet, timeout).flushing(),
                false => DrainRequest::new(since_ns, rx, quiet, timeout),
            },
        ))
    }

    /// Wait for the runtime's answer to a drain request on a thread of its own and write it.
    fn spawn_drain<S: Stream>(&self, mut c: S, (control, req): (Arc<ControlHandle>, DrainRequest)) {
        let busy = self.drains.clone();
        if busy.fetch_add(1, Relaxed) >= MAX_DRAINS {
            busy.fetch_sub(1, Relaxed);
            let msg = format!("{MAX_DRAINS} drain requests are waiting already");
            let _ = Response::error_in(503, "drain", &msg).write(&mut c);
            return;
        }
        let bound = Duration::from_nanos(req.deadline_ns - req.since_ns) + Duration::from_secs(1);
        let spawned = std::thread::Builder::new()
            .name("nf-drain".into())
            .spawn(move || {
                let resp = match control.call(Request::Drain(req), bound) {
                    Ok(Reply::Drain(r)) => Response::json("200 OK", r.to_json()),
                    Ok(_) => Response::error_in(500, "drain", "unexpected reply"),
                    Err(e) => Response::error_in(e.status, "drain", &e.message),
                };
                let _ = resp.write(&mut c);
                busy.fetch_sub(1, Relaxed);
            });
        if spawned.is_err() {
            self.drains.fetch_sub(1, Relaxed);
        }
    }

    fn answer<S: Stream>(
        &self,
        c: &mut S,
        method: &str,
        path: &str,
        head: &str,
        rest: Vec<u8>,
    ) -> Response {
        match path {
            "/health" | "/" | "/stats" if method != "GET" => {
                Response::error(405, &format!("method {method} not allowed on {path} (GET)"))
            }
            "/health" => {
                let ready = self.stats.ready.load(Relaxed);
                Response::json(
                    if ready {
                        "200 OK"
                    } else {
                        "503 Service Unavailable"
                    },
                    json!({"ready": ready}),
                )
            }
            "/" | "/stats" => Response::json("200 OK", self.stats.to_json(&self.id)),
            "/state" => state_request(c, method, head, rest, self.control.as_deref(), &self.id),
            "/release" => release_request(method, self.control.as_deref()),
            "/config" => config_request(c, method, head, rest, self.control.as_deref()),
            _ => Response::json("404 Not Found", json!({"error": "not found"})),
        }
    }
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
        Response::error_in(status, "state", msg)
    }

    /// An error answer naming the request's `field` at fault.
    fn error_in(status: u16, field: &str, msg: &str) -> Response {
        let reason = match status {
            400 => "Bad Request",
            405 => "Method Not Allowed",
            409 => "Conflict",
            411 => "Length Required",
            413 => "Payload Too Large",
            501 => "Not Implemented",
            503 => "Service Unavailable",
            _ => "Internal Server Error",
        };
        Response::json(
            &format!("{status} {reason}"),
            json!({"error": msg, "field": field}),
        )
    }

    fn write(&self, c: &mut impl Write) -> std::io::Result<()> {
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
    c: &mut impl Read,
    method: &str,
    head: &str,
    rest: Vec<u8>,
    control: Option<&ControlHandle>,
    id: &Identity,
) -> Response {
    let control = match control {
        Some(c) if id.store_kind == "local" => c,
        _ => {
            return Response::error(
                409,
                &format!(
                "store {}: the state is not held by this process (only --store local moves state)",
                id.store_kind
            ),
            )
        }
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
            // Decode and build the new store here, off the runtime thread (a large snapshot takes
            // a while; the runtime keeps queueing packets meanwhile and only swaps the store in).
            let Ok(keys) = flowstore::KeySpace::for_tenant(&id.tenant, &id.nf_id) else {
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

/// `PUT /config` (the whole NF config, JSON): applied in place between two batches
/// ([`Request::Reconfigure`]): 200 `{"reconfigured": true}`; 400 invalid (nothing changed); 409
/// it takes a restart (a runtime option changes, or the NF cannot change in place).
fn config_request(
    c: &mut impl Read,
    method: &str,
    head: &str,
    rest: Vec<u8>,
    control: Option<&ControlHandle>,
) -> Response {
    if method != "PUT" {
        return Response::error_in(
            405,
            "config",
            &format!("method {method} not allowed on /config (PUT)"),
        );
    }
    let Some(control) = control else {
        return Response::error_in(409, "config", "no control channel: it takes a restart");
    };
    let body = match read_body(c, head, rest) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let cfg: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        Ok(_) => return Response::error_in(400, "config", "config must be a JSON object"),
        Err(e) => return Response::error_in(400, "config", &format!("invalid JSON: {e}")),
    };
    match control.call(Request::Reconfigure(cfg), Duration::from_secs(30)) {
        Ok(Reply::Reconfigured) => Response::json("200 OK", json!({"reconfigured": true})),
        Ok(_) => Response::error(500, "unexpected reply"),
        Err(e) => Response::error_in(e.status, "config", &e.message),
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

/// `POST /hold?buffer=N` ([`crate::hold`]): JSON `{"holding": true, "pending"}`; 409 when it is
/// buffering already, 400 naming the field of a bad query.
fn hold_request(method: &str, query: &str, control: Option<&ControlHandle>) -> Response {
    if method != "POST" {
        let msg = format!("method {method} not allowed on /hold (POST)");
        return Response::error_in(405, "method", &msg);
    }
    let cap = match crate::hold::parse_query(query) {
        Ok(cap) => cap,
        Err((field, e)) => return Response::error_in(400, field, &e),
    };
    let Some(control) = control else {
        return Response::error_in(501, "hold", "this endpoint does not reach the NF's runtime");
    };
    match control.call(Request::Hold(cap), Duration::from_secs(10)) {
        Ok(Reply::Holding { pending }) => {
            Response::json("200 OK", json!({"holding": true, "pending": pending}))
        }
        Ok(_) => Response::error_in(500, "hold", "unexpected reply"),
        Err(e) => Response::error_in(e.status, "hold", &e.message),
    }
}

/// The request body announced by Content-Length (required; at most [`MAX_STATE_BYTES`]).
fn read_body(c: &mut impl Read, head: &str, mut body: Vec<u8>) -> Result<Vec<u8>, Response> {
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
        match read_through_signals(c, &mut buf[..want]) {
            Ok(0) | Err(_) => return Err(Response::error(400, "body shorter than Content-Length")),
            Ok(n) => body.extend_from_slice(&buf[..n]),
        }
    }
    Ok(body)
}

/// How long a connection may take to send its request head, and its size at most.
const HEAD_WAIT: Duration = Duration::from_secs(2);
const HEAD_MAX: usize = 8192;

/// Read a request head up to its blank line (bounded, so a slow or hostile client cannot hold the
/// thread or make it allocate): (head, the bytes after it), or None when the connection ended,
/// timed out or sent [`HEAD_MAX`] bytes without one. The whole head is consumed before answering:
/// closing a socket with unread request bytes makes the kernel send a reset, which destroys the
/// answer in flight.
fn read_request_head(c: &mut impl Read) -> Option<(String, Vec<u8>)> {
    let mut head = Vec::with_capacity(256);
    let mut buf = [0u8; 1024];
    loop {
        if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            // Bytes after the blank line are the start of the body.
            let rest = head[i + 4..].to_vec();
            head.truncate(i);
            return Some((String::from_utf8_lossy(&head).into_owned(), rest));
        }
        if head.len() >= HEAD_MAX {
            return None;
        }
        match read_through_signals(c, &mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(addr: &Bound, raw: &str) -> String {
        fn talk(mut c: impl Stream, raw: &str) -> String {
            c.set_timeout(Duration::from_secs(10));
            c.write_all(raw.as_bytes()).unwrap();
            let mut s = String::new();
            let _ = c.read_to_string(&mut s);
            s
        }
        match addr {
            Bound::Tcp(a) => talk(TcpStream::connect(a).unwrap(), raw),
            Bound::Unix(p) => talk(UnixStream::connect(p).unwrap(), raw),
        }
    }

    fn tcp0() -> StatsAddr {
        StatsAddr::Tcp("127.0.0.1:0".into())
    }

    fn id(store: &str) -> Identity {
        Identity {
            nf_type: "firewall".into(),
            nf_id: "fw".into(),
            tenant: "default".into(),
            instance: "i".into(),
            store_kind: store.into(),
            cpu_latency_us: None,
            port: "p".into(),
        }
    }

    #[test]
    fn state_endpoint_refuses_cleanly() {
        let st = Arc::new(Stats::default());
        let redis = &serve_with_control(&tcp0(), st.clone(), id("redis"), None).unwrap();
        let r = req(redis, "GET /state HTTP/1.1\r\n\r\n");
        assert!(
            r.starts_with("HTTP/1.1 409") && r.contains("\"field\":\"state\""),
            "{r}"
        );
        // A local store whose runtime answers nothing here: length checks come first.
        let (h, _rx) = ControlHandle::channel();
        let local = &serve_with_control(&tcp0(), st, id("local"), Some(h)).unwrap();
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
        for path in ["/stats", "/health", "/"] {
            let r = req(local, &format!("POST {path} HTTP/1.1\r\n\r\n"));
            assert!(r.starts_with("HTTP/1.1 405") && r.contains("(GET)"), "{r}");
        }
        let r = req(redis, "POST /release HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 409"), "{r}");
        let r = req(local, "GET /health HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 503"), "not ready yet: {r}");
    }

    /// `/drain`: checked on the endpoint's thread (405, 400 naming the field, 501 without a
    /// runtime), then waited for on a thread of its own: `/health` answers meanwhile; more than
    /// [`MAX_DRAINS`] waiting at once are refused (503).
    #[test]
    fn drain_requests_wait_off_the_endpoint_thread() {
        let st = Arc::new(Stats::default());
        let none = &serve_with_control(&tcp0(), st.clone(), id("redis"), None).unwrap();
        let r = req(none, "POST /drain?quiet_ms=5 HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 501"), "{r}");
        let (h, rx) = ControlHandle::channel(); // a runtime that never answers
        let ep = serve_with_control(&tcp0(), st, id("redis"), Some(h)).unwrap();
        let r = req(&ep, "GET /drain?quiet_ms=5 HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 405"), "{r}");
        let r = req(&ep, "POST /drain?quiet_ms=x HTTP/1.1\r\n\r\n");
        assert!(
            r.starts_with("HTTP/1.1 400") && r.contains("\"field\":\"quiet_ms\""),
            "{r}"
        );
        let waiting: Vec<_> = (0..MAX_DRAINS)
            .map(|_| {
                let ep = ep.clone();
                std::thread::spawn(move || {
                    req(&ep, "POST /drain?quiet_ms=5&timeout_ms=1 HTTP/1.1\r\n\r\n")
                })
            })
            .collect();
        // Every one reaches the runtime (and holds its thread until the runtime answers).
        let mut got = vec![];
        while got.len() < MAX_DRAINS {
            let (r, reply) = rx.recv_timeout(Duration::from_secs(10)).expect("a request");
            assert!(
                matches!(r, Request::Drain(d) if d.quiet_ns == 5_000_000),
                "{r:?}"
            );
            got.push(reply); // kept: no answer, the caller waits out its bound
        }
        let r = req(&ep, "GET /health HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 503") && r.contains("ready"), "{r}");
        let r = req(&ep, "POST /drain?quiet_ms=5 HTTP/1.1\r\n\r\n");
        assert!(
            r.starts_with("HTTP/1.1 503") && r.contains("waiting already"),
            "{r}"
        );
        // Unanswered: 503 once the request's bound (timeout + 1 s) is over.
        for w in waiting {
            let r = w.join().unwrap();
            assert!(
                r.starts_with("HTTP/1.1 503") && r.contains("did not answer"),
                "{r}"
            );
        }
    }

    /// Reads played back from a script: bytes, or an error of a kind; then end of stream.
    struct Script(std::collections::VecDeque<Result<&'static [u8], std::io::ErrorKind>>);

    impl Read for Script {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match self.0.pop_front() {
                None => Ok(0),
                Some(Err(kind)) => Err(kind.into()),
                Some(Ok(b)) => {
                    buf[..b.len()].copy_from_slice(b);
                    Ok(b.len())
                }
            }
        }
    }

    /// A read interrupted by a signal (EINTR: the NF stopped and continued while the request
    /// was on its way) is no end of the request: head and body are read on. A head cut short
    /// (end of stream, timeout, too long) is None, never a guess.
    #[test]
    fn requests_are_read_through_interruptions_and_never_guessed() {
        use std::io::ErrorKind::{Interrupted, WouldBlock};
        let script = |s: Vec<Result<&'static [u8], std::io::ErrorKind>>| Script(s.into());
        let mut c = script(vec![
            Err(Interrupted),
            Ok(b"PUT /state HTTP/1.1\r\nCont"),
            Err(Interrupted),
            Ok(b"ent-Length: 4\r\n\r\nab"),
            Err(Interrupted),
            Ok(b"cd"),
        ]);
        let (head, rest) = read_request_head(&mut c).expect("a head");
        assert_eq!(head, "PUT /state HTTP/1.1\r\nContent-Length: 4");
        assert_eq!(rest, b"ab");
        let body = read_body(&mut c, &head, rest).ok().expect("the body");
        assert_eq!(body, b"abcd");
        static LONG: [u8; 1024] = [b'a'; 1024];
        for cut in [
            vec![],
            vec![Ok(&b"GET /stats HTTP/1.1\r\n"[..])],
            vec![Ok(b"POST /dra"), Err(Interrupted), Err(WouldBlock)],
            vec![Ok(&LONG[..]); HEAD_MAX / LONG.len() + 1],
        ] {
            assert!(
                read_request_head(&mut script(cut.clone())).is_none(),
                "{cut:?}"
            );
        }
    }

    /// On the endpoint: a request cut short is refused (400 naming the request), not answered as
    /// another one; the endpoint goes on.
    #[test]
    fn a_request_cut_short_is_refused() {
        let ep =
            serve_with_control(&tcp0(), Arc::new(Stats::default()), id("redis"), None).unwrap();
        let Bound::Tcp(a) = &ep else { unreachable!() };
        let mut c = TcpStream::connect(a).unwrap();
        c.write_all(b"GET /stats HTTP/1.1\r\n").unwrap();
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let mut r = String::new();
        c.read_to_string(&mut r).unwrap();
        assert!(
            r.starts_with("HTTP/1.1 400") && r.contains("\"field\":\"request\""),
            "{r}"
        );
        let r = req(&ep, "GET /health HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 503"), "{r}");
    }

    #[test]
    fn stats_addresses() {
        assert_eq!(
            StatsAddr::parse("127.0.0.1:9100").unwrap(),
            StatsAddr::Tcp("127.0.0.1:9100".into())
        );
        assert_eq!(
            StatsAddr::parse("unix:///run/x/i1.stats").unwrap(),
            StatsAddr::Unix("/run/x/i1.stats".into())
        );
        let long = format!("unix:///{}", "a".repeat(MAX_UNIX_PATH));
        for bad in [
            "",
            "9100",
            "host",
            ":80",
            "h:99999",
            "unix://rel",
            "unix:///d/",
            &long,
        ] {
            let e = StatsAddr::parse(bad).unwrap_err();
            assert!(e.contains("--stats"), "{bad}: {e}");
        }
    }

    /// On a unix socket: the same answers; mode 0600; a stale socket file is replaced, a live one
    /// (another endpoint) or a regular file is refused and left alone.
    #[test]
    fn unix_endpoint() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("unonfs-stats-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("i.stats");
        // A stale socket: bound once, its listener dropped.
        drop(UnixListener::bind(&path).unwrap());
        let st = Arc::new(Stats::default());
        let addr = StatsAddr::Unix(path.clone());
        let b = serve_with_control(&addr, st.clone(), id("redis"), None).unwrap();
        assert_eq!(b.to_string(), format!("unix://{}", path.display()));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let r = req(&b, "GET /health HTTP/1.1\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 503"), "{r}");
        st.ready.store(true, Relaxed);
        let r = req(&b, "GET /stats HTTP/1.1\r\n\r\n");
        assert!(
            r.starts_with("HTTP/1.1 200") && r.contains("\"instance\":\"i\""),
            "{r}"
        );
        let e = serve_with_control(&addr, st.clone(), id("redis"), None).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{e}");
        let file = dir.join("plain");
        std::fs::write(&file, b"x").unwrap();
        let e =
            serve_with_control(&StatsAddr::Unix(file.clone()), st, id("redis"), None).unwrap_err();
        assert!(e.to_string().contains("not a socket"), "{e}");
        assert_eq!(std::fs::read(&file).unwrap(), b"x");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
