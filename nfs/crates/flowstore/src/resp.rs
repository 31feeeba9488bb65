//! A minimal RESP2 client connection (the Redis protocol): commands are encoded straight into one
//! reused output buffer, replies are parsed in place from one reused input buffer. Sending and
//! receiving are separate, so a caller can keep several pipelines in flight on one connection
//! (replies come back in the order the commands were sent).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

/// CPU time of the calling thread (ns).
fn thread_cpu_ns() -> u64 {
    // SAFETY: clock_gettime writes the timespec it is given; a zeroed timespec is a valid value.
    let mut t: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a timespec owned by this frame.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0 {
        return 0;
    }
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Longest unix socket path the kernel takes (`sun_path` is 108 bytes with its NUL).
pub const MAX_UNIX_PATH: usize = 107;

/// Where the tier listens: TCP `host:port`, or a unix socket path (reachable from every network
/// namespace of the machine, and cheaper per round trip than loopback TCP: no TCP stack).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Tcp(String),
    Unix(PathBuf),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Tcp(a) => write!(f, "{a}"),
            Endpoint::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// One `read`, repeated when a signal interrupts it. A blocking read on a socket with a timeout
/// is not restarted after a signal: it fails with EINTR when a handled signal arrives (SA_RESTART
/// or not) or, on Linux, when the process is stopped and continued (SIGSTOP/SIGCONT: a throttled
/// or debugged instance). That ends neither a reply nor a request; a timeout still does.
pub fn read_through_signals(src: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match src.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// The connected socket of either kind.
enum Sock {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Sock {
    fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => s.set_read_timeout(d),
            Sock::Unix(s) => s.set_read_timeout(d),
        }
    }

    fn set_write_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        match self {
            Sock::Tcp(s) => s.set_write_timeout(d),
            Sock::Unix(s) => s.set_write_timeout(d),
        }
    }
}

impl AsRawFd for Sock {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Sock::Tcp(s) => s.as_raw_fd(),
            Sock::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl Read for Sock {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.read(buf),
            Sock::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Sock {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sock::Tcp(s) => s.write(buf),
            Sock::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One parsed reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Nil,
    Status,
    Int(i64),
    Bulk(Vec<u8>),
    Array(Vec<Reply>),
    Error(String),
}

/// Append one command (array of bulk strings) to `out`.
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    encode_header(out, args.len());
    for a in args {
        encode_arg(out, a);
    }
}

/// Start a command of `n` arguments; follow with `n` calls of [`encode_arg`].
pub fn encode_header(out: &mut Vec<u8>, n: usize) {
    out.push(b'*');
    push_len(out, n);
    out.extend_from_slice(b"\r\n");
}

/// One bulk-string argument.
pub fn encode_arg(out: &mut Vec<u8>, a: &[u8]) {
    // One reservation for the whole argument (header of at most 1 + 20 + 2 bytes).
    out.reserve(a.len() + 25);
    out.push(b'$');
    push_len(out, a.len());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(a);
    out.extend_from_slice(b"\r\n");
}

/// Decimal digits of a length (one or two digits, the usual case, without the general loop).
fn push_len(out: &mut Vec<u8>, n: usize) {
    match n {
        0..=9 => out.push(b'0' + n as u8),
        10..=99 => out.extend_from_slice(&[b'0' + (n / 10) as u8, b'0' + (n % 10) as u8]),
        _ => {
            let (b, len) = itoa_buf(n as i64);
            out.extend_from_slice(&b[..len]);
        }
    }
}

/// Decimal digits of `v` without allocation: (buffer, length).
fn itoa_buf(v: i64) -> ([u8; 20], usize) {
    let mut buf = [0u8; 20];
    let neg = v < 0;
    let mut u = v.unsigned_abs();
    let mut tmp = [0u8; 20];
    let mut n = 0;
    loop {
        tmp[n] = b'0' + (u % 10) as u8;
        n += 1;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    let mut len = 0;
    if neg {
        buf[0] = b'-';
        len = 1;
    }
    for i in (0..n).rev() {
        buf[len] = tmp[i];
        len += 1;
    }
    (buf, len)
}

/// Append the decimal form of `v` as a bulk-string argument.
pub fn encode_int_arg(out: &mut Vec<u8>, v: i64) {
    let (b, n) = itoa_buf(v);
    encode_arg(out, &b[..n]);
}

/// Arrays nested deeper than this are refused (our commands' replies nest at most 2 deep; the
/// parser recurses, so a deeper reply could overflow the stack).
pub const MAX_DEPTH: usize = 32;

/// Parse one reply from `buf`. `Ok(None)`: incomplete, read more. `Err`: protocol violation.
pub fn parse(buf: &[u8]) -> Result<Option<(Reply, usize)>, String> {
    parse_at(buf, 0, true)
}

/// Length of the first reply in `buf` if it is complete, checked as [`parse`] checks it but
/// without building it (no allocation).
pub fn complete_len(buf: &[u8]) -> Result<Option<usize>, String> {
    Ok(parse_at(buf, 0, false)?.map(|(_, used)| used))
}

/// `build` false: validate and measure only (bulk strings empty, arrays without items).
fn parse_at(buf: &[u8], depth: usize, build: bool) -> Result<Option<(Reply, usize)>, String> {
    let Some(line_end) = find_crlf(buf) else {
        return Ok(None);
    };
    if line_end == 0 {
        return Err("empty reply line".into());
    }
    let line = &buf[1..line_end];
    let after = line_end + 2;
    match buf[0] {
        b'+' => Ok(Some((Reply::Status, after))),
        b'-' => Ok(Some((
            Reply::Error(String::from_utf8_lossy(line).into_owned()),
            after,
        ))),
        b':' => Ok(Some((Reply::Int(parse_int(line)?), after))),
        b'$' => Ok(bulk_at(buf, line_end)?.map(|(data, used)| {
            let reply = match data {
                None => Reply::Nil,
                Some(d) if build => Reply::Bulk(d.to_vec()),
                Some(_) => Reply::Bulk(Vec::new()),
            };
            (reply, used)
        })),
        b'*' => {
            let n = parse_int(line)?;
            if n < 0 {
                return Ok(Some((Reply::Nil, after)));
            }
            if depth >= MAX_DEPTH {
                return Err(format!("reply nested deeper than {MAX_DEPTH} arrays"));
            }
            let mut items = Vec::with_capacity(if build { (n as usize).min(4096) } else { 0 });
            let mut pos = after;
            for _ in 0..n {
                match parse_at(&buf[pos..], depth + 1, build)? {
                    None => return Ok(None),
                    Some((r, used)) => {
                        if build {
                            items.push(r);
                        }
                        pos += used;
                    }
                }
            }
            Ok(Some((Reply::Array(items), pos)))
        }
        c => Err(format!("unexpected reply type byte {c:#04x}")),
    }
}

/// A complete bulk string: its data (`None`: nil) and the bytes it takes.
type Bulk<'a> = (Option<&'a [u8]>, usize);

/// The bulk string at the start of `buf` (`$`, its length line ending at `line_end`); `None`:
/// incomplete.
fn bulk_at(buf: &[u8], line_end: usize) -> Result<Option<Bulk<'_>>, String> {
    let n = parse_int(&buf[1..line_end])?;
    let after = line_end + 2;
    if n < 0 {
        return Ok(Some((None, after)));
    }
    let n = n as usize;
    if buf.len() < after + n + 2 {
        return Ok(None);
    }
    if &buf[after + n..after + n + 2] != b"\r\n" {
        return Err("bulk string not terminated".into());
    }
    Ok(Some((Some(&buf[after..after + n]), after + n + 2)))
}

/// What [`parse_values`] found at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Values {
    /// A complete array of this many items, this long: its items were appended.
    Array { items: usize, used: usize },
    /// Not an array, or a nil array: nothing appended (read it with [`parse`]).
    Other,
    /// An incomplete reply: nothing appended, read more.
    Incomplete,
}

/// Append the items of the array at the start of `buf` to `out` as an MGET reply is read
/// (bulk strings as values, anything else as None), in one pass and without building a
/// [`Reply`]. Checks what [`parse`] checks; on an error or an incomplete reply nothing is left
/// appended.
pub fn parse_values(buf: &[u8], out: &mut Vec<Option<Vec<u8>>>) -> Result<Values, String> {
    match buf.first() {
        None => return Ok(Values::Incomplete),
        Some(&b'*') => {}
        Some(_) => return Ok(Values::Other),
    }
    let Some(line_end) = find_crlf(buf) else {
        return Ok(Values::Incomplete);
    };
    let n = parse_int(&buf[1..line_end])?;
    if n < 0 {
        return Ok(Values::Other);
    }
    let before = out.len();
    let r = push_values(buf, line_end + 2, n as usize, out);
    if !matches!(r, Ok(Values::Array { .. })) {
        out.truncate(before);
    }
    r
}

fn push_values(
    buf: &[u8],
    mut pos: usize,
    n: usize,
    out: &mut Vec<Option<Vec<u8>>>,
) -> Result<Values, String> {
    for _ in 0..n {
        let item = &buf[pos..];
        if item.first() == Some(&b'$') {
            let Some(line_end) = find_crlf(item) else {
                return Ok(Values::Incomplete);
            };
            let Some((data, used)) = bulk_at(item, line_end)? else {
                return Ok(Values::Incomplete);
            };
            out.push(data.map(<[u8]>::to_vec));
            pos += used;
        } else {
            match parse_at(item, 1, false)? {
                None => return Ok(Values::Incomplete),
                Some((_, used)) => {
                    out.push(None);
                    pos += used;
                }
            }
        }
    }
    Ok(Values::Array {
        items: n,
        used: pos,
    })
}

fn find_crlf(buf: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i + 1 < buf.len() {
        match buf[i + 1..].iter().position(|&b| b == b'\n') {
            None => return None,
            Some(p) => {
                let nl = i + 1 + p;
                if buf[nl - 1] == b'\r' {
                    return Some(nl - 1);
                }
                i = nl;
            }
        }
    }
    None
}

/// A decimal integer as `str::parse::<i64>` takes it (optional sign, digits, no overflow),
/// without the UTF-8 check and the generic parser (it runs for every item of a reply).
fn parse_int(s: &[u8]) -> Result<i64, String> {
    let bad = || format!("bad integer in reply: {:?}", String::from_utf8_lossy(s));
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        return Err(bad());
    }
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return Err(bad());
        }
        let d = (c - b'0') as i64;
        // Accumulate negatively when negative, so i64::MIN is reachable.
        v = v.checked_mul(10).ok_or_else(bad)?;
        v = if neg {
            v.checked_sub(d)
        } else {
            v.checked_add(d)
        }
        .ok_or_else(bad)?;
    }
    Ok(v)
}

fn invalid_data(e: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// A connection: buffered output, incremental input.
pub struct Conn {
    sock: Sock,
    pub out: Vec<u8>,
    /// Received bytes are `inbuf[start..end]` (the buffer is allocated and zeroed once).
    inbuf: Vec<u8>,
    start: usize,
    end: usize,
    spin: Duration,
    /// CPU time spent spinning for replies (ns): burnt waiting, not working.
    pub spun_ns: u64,
}

impl Conn {
    /// Connect to `ep` with `timeout` for connect (TCP; a unix socket connects or fails at once),
    /// reads and writes.
    pub fn connect(ep: &Endpoint, timeout: Duration) -> io::Result<Conn> {
        let sock = match ep {
            Endpoint::Tcp(addr) => Sock::Tcp(Self::connect_tcp(addr, timeout)?),
            Endpoint::Unix(path) => Sock::Unix(UnixStream::connect(path)?),
        };
        sock.set_read_timeout(Some(timeout))?;
        sock.set_write_timeout(Some(timeout))?;
        Ok(Conn {
            sock,
            out: Vec::with_capacity(16 * 1024),
            inbuf: vec![0; 256 * 1024],
            start: 0,
            end: 0,
            spin: Duration::ZERO,
            spun_ns: 0,
        })
    }

    fn connect_tcp(addr: &str, timeout: Duration) -> io::Result<TcpStream> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, format!("no address for {addr}"));
        for a in std::net::ToSocketAddrs::to_socket_addrs(addr)? {
            match TcpStream::connect_timeout(&a, timeout) {
                Ok(s) => {
                    s.set_nodelay(true)?;
                    return Ok(s);
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Write the buffered commands to the socket (one syscall when it fits).
    pub fn flush(&mut self) -> io::Result<()> {
        if !self.out.is_empty() {
            self.sock.write_all(&self.out)?;
            self.out.clear();
        }
        Ok(())
    }

    /// Read whatever has arrived into the input buffer: spin on non-blocking reads for up to
    /// `spin` first (a reply on loopback usually comes within tens of microseconds; sleeping and
    /// being woken costs about as much again, on this core and in latency), then block up to
    /// the socket timeout. Returns 0 at end of stream.
    fn fill(&mut self) -> io::Result<usize> {
        if !self.spin.is_zero() {
            let t0 = std::time::Instant::now();
            let fd = self.sock.as_raw_fd();
            // CPU time of this thread when the spin began (the first read found nothing): the
            // spin is counted in CPU time, not wall time, which also covers descheduled periods.
            let mut cpu0 = None;
            loop {
                let buf = &mut self.inbuf[self.end..];
                // SAFETY: `buf` is valid for writes of its length for the duration of the call.
                let r = unsafe {
                    libc::recv(
                        fd,
                        buf.as_mut_ptr() as *mut libc::c_void,
                        buf.len(),
                        libc::MSG_DONTWAIT,
                    )
                };
                if r >= 0 {
                    self.spun_ns += cpu0.map_or(0, |c| thread_cpu_ns().saturating_sub(c));
                    return Ok(r as usize);
                }
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => {}
                    _ => return Err(e),
                }
                let c0 = *cpu0.get_or_insert_with(thread_cpu_ns);
                if t0.elapsed() >= self.spin {
                    self.spun_ns += thread_cpu_ns().saturating_sub(c0);
                    break;
                }
                std::hint::spin_loop();
            }
        }
        read_through_signals(&mut self.sock, &mut self.inbuf[self.end..])
    }

    /// Change the read timeout (e.g. longer for a one-time bulk command).
    pub fn set_read_timeout(&mut self, d: Duration) -> io::Result<()> {
        self.sock.set_read_timeout(Some(d))
    }

    /// Spin up to `d` for replies before sleeping (0: always sleep).
    pub fn set_spin(&mut self, d: Duration) {
        self.spin = d;
    }

    /// Read the next reply (blocking up to the timeout). One read takes whatever has arrived,
    /// so the replies of several pipelined groups usually cost one syscall.
    pub fn read_reply(&mut self) -> io::Result<Reply> {
        loop {
            if let Some(r) = self.take_buffered()? {
                return Ok(r);
            }
            self.make_room();
            let n = self.fill()?;
            self.took(n)?;
        }
    }

    /// Read the next reply if it is an array (an MGET reply), appending its items to `out`
    /// (bulk strings as values, anything else as None) without building a [`Reply`]: returns
    /// the number of items. Any other reply (a nil array included) is left in the input for
    /// [`Conn::read_reply`] (None).
    pub fn read_values(&mut self, out: &mut Vec<Option<Vec<u8>>>) -> io::Result<Option<usize>> {
        loop {
            match parse_values(&self.inbuf[self.start..self.end], out).map_err(invalid_data)? {
                Values::Array { items, used } => {
                    self.consume(used);
                    return Ok(Some(items));
                }
                Values::Other => return Ok(None),
                Values::Incomplete => {
                    self.make_room();
                    let n = self.fill()?;
                    self.took(n)?;
                }
            }
        }
    }

    /// Whether the next reply is complete once what has already arrived is taken in; never waits
    /// (one non-blocking read at most). A caller about to wait for a reply that is not there yet
    /// can first send what it holds back.
    pub fn reply_ready(&mut self) -> io::Result<bool> {
        if self.buffered_complete()? {
            return Ok(true);
        }
        self.make_room();
        let buf = &mut self.inbuf[self.end..];
        // SAFETY: `buf` is valid for writes of its length for the duration of the call.
        let r = unsafe {
            libc::recv(
                self.sock.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(false),
                _ => Err(e),
            };
        }
        self.took(r as usize)?;
        self.buffered_complete()
    }

    /// Whether a whole reply is in the input buffer (checked, not built).
    fn buffered_complete(&self) -> io::Result<bool> {
        let r = complete_len(&self.inbuf[self.start..self.end]).map_err(invalid_data)?;
        Ok(r.is_some())
    }

    /// The next reply if it is complete in the input buffer (consumed).
    fn take_buffered(&mut self) -> io::Result<Option<Reply>> {
        match parse(&self.inbuf[self.start..self.end]).map_err(invalid_data)? {
            Some((r, used)) => {
                self.consume(used);
                Ok(Some(r))
            }
            None => Ok(None),
        }
    }

    /// Drop the first `used` bytes of the input (a reply taken).
    fn consume(&mut self, used: usize) {
        self.start += used;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Move the unparsed bytes to the front; grow the buffer when it is full.
    fn make_room(&mut self) {
        if self.start > 0 {
            self.inbuf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.inbuf.len() {
            let n = self.inbuf.len() * 2;
            self.inbuf.resize(n, 0);
        }
    }

    /// Account `n` bytes read into the buffer (0: the tier closed the connection).
    fn took(&mut self, n: usize) -> io::Result<()> {
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed by the tier",
            ));
        }
        self.end += n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_and_parse() {
        let mut o = vec![];
        encode(&mut o, &[b"SET", b"k", b""]);
        assert_eq!(o, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
        o.clear();
        encode_int_arg(&mut o, -120);
        assert_eq!(o, b"$4\r\n-120\r\n");
        // Lengths of one, two and more digits.
        for n in [0usize, 9, 10, 99, 100, 12345] {
            o.clear();
            encode_arg(&mut o, &vec![b'x'; n]);
            let want = format!("${n}\r\n{}\r\n", "x".repeat(n));
            assert_eq!(o, want.as_bytes());
            o.clear();
            encode_header(&mut o, n);
            assert_eq!(o, format!("*{n}\r\n").as_bytes());
        }
        let r = b"*3\r\n$2\r\nab\r\n$-1\r\n:7\r\n+OK\r\n";
        let (rep, used) = parse(r).unwrap().unwrap();
        assert_eq!(
            rep,
            Reply::Array(vec![Reply::Bulk(b"ab".to_vec()), Reply::Nil, Reply::Int(7)])
        );
        assert_eq!(parse(&r[used..]).unwrap().unwrap().0, Reply::Status);
        // Binary value containing CRLF; incomplete input asks for more.
        let b = b"$4\r\na\r\nb\r\n";
        assert_eq!(
            parse(b).unwrap().unwrap().0,
            Reply::Bulk(b"a\r\nb".to_vec())
        );
        for cut in 0..b.len() {
            assert_eq!(parse(&b[..cut]).unwrap(), None, "cut {cut}");
        }
        assert_eq!(
            parse(b"-ERR x\r\n").unwrap().unwrap().0,
            Reply::Error("ERR x".into())
        );
        assert!(parse(b"?x\r\n").is_err());
        assert!(parse(b":zz\r\n").is_err());
        assert!(parse(b"$2\r\nabXY").is_err());
    }

    /// Fuzz finding (nfs/fuzz, resp): 200000 nested arrays overflowed the stack (the
    /// parser recurses); now refused past MAX_DEPTH, on a small stack too.
    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let ok = b"*1\r\n".repeat(MAX_DEPTH);
        let deep = b"*1\r\n".repeat(200_000);
        let r = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                let mut a = ok.clone();
                a.extend_from_slice(b":1\r\n");
                let mut b = deep.clone();
                b.extend_from_slice(b":1\r\n");
                (parse(&a).map(|r| r.map(|x| x.1)), parse(&b).is_err())
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(r.0, Ok(Some(4 * MAX_DEPTH + 4)));
        assert!(r.1);
    }

    /// `reply_ready` never waits: false until a whole reply is in (taken in pieces), then the
    /// reply is returned once by `read_reply`; a closed peer is an error.
    /// A connection over a socket pair with an 8-byte input buffer (it grows as replies come in
    /// pieces), and the tier's end.
    fn test_conn() -> (Conn, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        let c = Conn {
            sock: Sock::Unix(a),
            out: Vec::new(),
            inbuf: vec![0; 8],
            start: 0,
            end: 0,
            spin: Duration::ZERO,
            spun_ns: 0,
        };
        (c, b)
    }

    /// A signal while a reply is awaited (EINTR: a read on a socket with a timeout is not
    /// restarted, also under SA_RESTART, nor after SIGSTOP/SIGCONT) does not end the wait: the
    /// reply that comes after it is read, not turned into an error that drops the connection.
    #[test]
    fn a_signal_while_waiting_is_not_an_error() {
        extern "C" fn nothing(_: libc::c_int) {}
        // SAFETY: a handler that does nothing, for SIGUSR2, which nothing else here uses.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = nothing as *const () as libc::sighandler_t;
            sa.sa_flags = libc::SA_RESTART;
            assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
        }
        let (mut c, mut tier) = test_conn();
        c.set_read_timeout(Duration::from_secs(30)).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            // SAFETY: plain calls naming this thread.
            tx.send(unsafe { (libc::pthread_self(), libc::gettid()) })
                .unwrap();
            c.read_reply()
        });
        let (thread, tid) = rx.recv().unwrap();
        // Signal it once it sleeps in its read (state S in /proc), a few times over.
        let stat = format!("/proc/self/task/{tid}/stat");
        let t0 = std::time::Instant::now();
        for _ in 0..3 {
            while !std::fs::read_to_string(&stat).is_ok_and(|s| {
                s.rsplit_once(") ")
                    .is_some_and(|(_, rest)| rest.starts_with('S'))
            }) {
                assert!(!reader.is_finished(), "a signal ended the wait");
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "the reader never waited"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            // SAFETY: `thread` is not joined yet (its handle keeps it valid, also once it ended).
            assert_eq!(unsafe { libc::pthread_kill(thread, libc::SIGUSR2) }, 0);
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!reader.is_finished(), "a signal ended the wait");
        tier.write_all(b":7\r\n").unwrap();
        assert_eq!(reader.join().unwrap().unwrap(), Reply::Int(7));
    }

    /// The integer parser takes exactly what `str::parse::<i64>` takes.
    #[test]
    fn parse_int_is_str_parse() {
        for t in [
            "0",
            "7",
            "-1",
            "+5",
            "-0",
            "007",
            "",
            "-",
            "+",
            "--1",
            "+-1",
            " 1",
            "1 ",
            "1a",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999",
            "\u{e9}",
        ] {
            assert_eq!(parse_int(t.as_bytes()).ok(), t.parse::<i64>().ok(), "{t:?}");
        }
        assert!(parse_int(&[0xff]).is_err());
    }

    /// `read_values` takes an MGET reply straight into values (in pieces too) and leaves
    /// any other reply, checked the same way, to `read_reply`.
    #[test]
    fn read_values_takes_arrays_and_leaves_the_rest() {
        let (mut c, mut b) = test_conn();
        let mut out = vec![Some(b"kept".to_vec())];
        b.write_all(b"*4\r\n$5\r\nhel").unwrap();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            b.write_all(b"lo\r\n$-1\r\n:7\r\n$0\r\n\r\n-ERR x\r\n*-1\r\n*1\r\n$1\r\nab\r\n")
                .unwrap();
            b
        });
        assert_eq!(c.read_values(&mut out).unwrap(), Some(4));
        let want = vec![
            Some(b"kept".to_vec()),
            Some(b"hello".to_vec()),
            None,
            None,
            Some(vec![]),
        ];
        assert_eq!(out, want);
        let _b = t.join().unwrap();
        // Not arrays: left in place, then read as replies.
        assert_eq!(c.read_values(&mut out).unwrap(), None);
        assert_eq!(c.read_reply().unwrap(), Reply::Error("ERR x".into()));
        assert_eq!(c.read_values(&mut out).unwrap(), None);
        assert_eq!(c.read_reply().unwrap(), Reply::Nil);
        assert_eq!(out, want, "nothing appended");
        // A protocol violation is an error, as in `read_reply`.
        assert!(c.read_values(&mut out).is_err());
        assert_eq!(out, want, "nothing appended");
    }

    #[test]
    fn reply_ready_never_waits() {
        let (mut c, mut b) = test_conn();
        assert!(!c.reply_ready().unwrap());
        b.write_all(b"*2\r\n$5\r\nhel").unwrap();
        assert!(!c.reply_ready().unwrap());
        b.write_all(b"lo\r\n:7\r\n+OK\r\n").unwrap();
        // The buffer (8 bytes) grows as the pieces come in.
        while !c.reply_ready().unwrap() {}
        assert!(c.reply_ready().unwrap(), "still ready until read");
        let want = Reply::Array(vec![Reply::Bulk(b"hello".to_vec()), Reply::Int(7)]);
        assert_eq!(c.read_reply().unwrap(), want);
        assert!(c.reply_ready().unwrap());
        assert_eq!(c.read_reply().unwrap(), Reply::Status);
        drop(b);
        assert!(c.reply_ready().is_err());
    }

    #[test]
    fn parse_never_panics_on_garbage() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            let mut v = vec![];
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = (x % 24) as usize;
            for j in 0..n {
                let c = (x >> (j % 8 * 8)) as u8;
                v.push(match c % 9 {
                    0 => b'*',
                    1 => b'$',
                    2 => b'\r',
                    3 => b'\n',
                    4 => b'-',
                    5 => b'1',
                    6 => b':',
                    _ => c,
                });
            }
            let _ = parse(&v);
        }
    }
}
