//! AF_XDP (XSK) port in copy mode with generic (skb) XDP, queue 0: works on any driver,
//! including veth, on kernels with AF_XDP and BPF links (5.9+). No libbpf: the redirect program
//! (6 BPF instructions: `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)`) is
//! loaded and attached with the `bpf` system call; its link is closed (detaching it) on drop.
//!
//! One UMEM of 4096 frames of 2 KiB: half posted to the fill ring for receive, half kept for
//! transmit (reclaimed from the completion ring). Receive copies frames out of the UMEM into the
//! batch and gives the frame back at once; transmit copies into a free frame.

use crate::{Batch, Device};
use std::ffi::CString;
use std::io;
use std::sync::atomic::{AtomicU32, Ordering};

const AF_XDP: libc::c_int = 44;
const SOL_XDP: libc::c_int = 283;
const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_TX_RING: libc::c_int = 3;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_STATISTICS: libc::c_int = 7;
const XDP_PGOFF_RX_RING: i64 = 0;
const XDP_PGOFF_TX_RING: i64 = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: i64 = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: i64 = 0x1_8000_0000;
const XDP_COPY: u16 = 1 << 1;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;

const FRAMES: u32 = 4096;
const FRAME_SIZE: u32 = 2048;
const RING: u32 = 2048;

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

/// `struct xdp_statistics`.
#[repr(C)]
#[derive(Default)]
struct XdpStatistics {
    rx_dropped: u64,
    rx_invalid_descs: u64,
    tx_invalid_descs: u64,
    rx_ring_full: u64,
    rx_fill_ring_empty_descs: u64,
    tx_ring_empty_descs: u64,
}

#[repr(C)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct XdpDesc {
    addr: u64,
    len: u32,
    options: u32,
}

/// One mmapped ring: producer and consumer indexes, descriptors of type `T`.
struct Ring<T> {
    map: *mut u8,
    map_len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    desc: *mut T,
    mask: u32,
}

impl<T: Copy> Ring<T> {
    /// # Safety
    /// `fd` is an XSK socket whose ring at `pgoff` was sized with `RING` entries.
    unsafe fn map(fd: libc::c_int, off: &RingOffset, pgoff: i64) -> io::Result<Ring<T>> {
        let map_len = off.desc as usize + RING as usize * std::mem::size_of::<T>();
        let p = libc::mmap(
            std::ptr::null_mut(),
            map_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd,
            pgoff,
        );
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let b = p as *mut u8;
        Ok(Ring {
            map: b,
            map_len,
            producer: b.add(off.producer as usize) as *const AtomicU32,
            consumer: b.add(off.consumer as usize) as *const AtomicU32,
            desc: b.add(off.desc as usize) as *mut T,
            mask: RING - 1,
        })
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping, 4-byte aligned (kernel layout).
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*self.consumer }
    }

    fn read(&self, idx: u32) -> T {
        // SAFETY: idx & mask < RING entries inside the mapping.
        unsafe { std::ptr::read_volatile(self.desc.add((idx & self.mask) as usize)) }
    }

    fn write(&self, idx: u32, v: T) {
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(self.desc.add((idx & self.mask) as usize), v) }
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.map_len) };
    }
}

fn bpf(cmd: libc::c_long, attr: &mut [u8; 128]) -> io::Result<libc::c_int> {
    // SAFETY: attr is a zero-padded bpf_attr of the size passed.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len() as u32) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as libc::c_int)
    }
}

fn put32(a: &mut [u8; 128], at: usize, v: u32) {
    a[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

fn put64(a: &mut [u8; 128], at: usize, v: u64) {
    a[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

/// A BPF instruction: code, dst, src, off, imm.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[0] = code;
    b[1] = (src << 4) | (dst & 0xf);
    b[2..4].copy_from_slice(&off.to_le_bytes());
    b[4..8].copy_from_slice(&imm.to_le_bytes());
    b
}

/// Owned file descriptor, closed on drop.
struct Fd(libc::c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        if self.0 >= 0 {
            // SAFETY: closing a descriptor this process owns.
            unsafe { libc::close(self.0) };
        }
    }
}

/// The XSK map, the program and its link on the interface (closing the link detaches).
struct Redirect {
    _link: Fd,
    _prog: Fd,
    _map: Fd,
}

fn attach_redirect(ifindex: u32, xsk: libc::c_int) -> io::Result<Redirect> {
    let mut a = [0u8; 128];
    put32(&mut a, 0, BPF_MAP_TYPE_XSKMAP);
    put32(&mut a, 4, 4); // key size
    put32(&mut a, 8, 4); // value size
    put32(&mut a, 12, 1); // max entries: queue 0
    let map = Fd(bpf(BPF_MAP_CREATE, &mut a)
        .map_err(|e| io::Error::new(e.kind(), format!("create XSK map: {e}")))?);
    let key = 0u32;
    let val = xsk as u32;
    let mut a = [0u8; 128];
    put32(&mut a, 0, map.0 as u32);
    put64(&mut a, 8, &key as *const u32 as u64);
    put64(&mut a, 16, &val as *const u32 as u64);
    bpf(BPF_MAP_UPDATE_ELEM, &mut a)
        .map_err(|e| io::Error::new(e.kind(), format!("XSK map update: {e}")))?;
    // r2 = ctx->rx_queue_index; r1 = &xsks; r3 = XDP_PASS; call bpf_redirect_map; exit
    let prog: Vec<u8> = [
        insn(0x61, 2, 1, 16, 0),
        insn(0x18, 1, 1, 0, map.0),
        insn(0, 0, 0, 0, 0),
        insn(0xb7, 3, 0, 0, 2),
        insn(0x85, 0, 0, 0, 51),
        insn(0x95, 0, 0, 0, 0),
    ]
    .concat();
    let license = CString::new("Apache-2.0").expect("no NUL");
    let mut log = vec![0u8; 4096];
    let mut a = [0u8; 128];
    put32(&mut a, 0, BPF_PROG_TYPE_XDP);
    put32(&mut a, 4, (prog.len() / 8) as u32);
    put64(&mut a, 8, prog.as_ptr() as u64);
    put64(&mut a, 16, license.as_ptr() as u64);
    put32(&mut a, 24, 1); // log level
    put32(&mut a, 28, log.len() as u32);
    put64(&mut a, 32, log.as_mut_ptr() as u64);
    put32(&mut a, 68, BPF_XDP); // expected attach type
    let prog_fd = Fd(bpf(BPF_PROG_LOAD, &mut a).map_err(|e| {
        let msg = String::from_utf8_lossy(&log);
        io::Error::new(
            e.kind(),
            format!("load XDP program: {e}: {}", msg.trim_end_matches('\0')),
        )
    })?);
    let mut a = [0u8; 128];
    put32(&mut a, 0, prog_fd.0 as u32);
    put32(&mut a, 4, ifindex);
    put32(&mut a, 8, BPF_XDP);
    put32(&mut a, 12, XDP_FLAGS_SKB_MODE);
    let link = Fd(bpf(BPF_LINK_CREATE, &mut a)
        .map_err(|e| io::Error::new(e.kind(), format!("attach XDP program: {e}")))?);
    Ok(Redirect {
        _link: link,
        _prog: prog_fd,
        _map: map,
    })
}

/// An AF_XDP socket on queue 0 of one interface.
pub struct AfXdp {
    iface: String,
    // Field order is drop order: program first (stop redirecting), then rings, socket, UMEM.
    _redirect: Redirect,
    rx: Ring<XdpDesc>,
    tx: Ring<XdpDesc>,
    fill: Ring<u64>,
    comp: Ring<u64>,
    sock: Fd,
    umem: *mut u8,
    umem_len: usize,
    /// Frames free for transmit.
    free_tx: Vec<u64>,
    poll_ms: i32,
    /// `recv`'s wait when shortened ([`Device::set_wait_ms`]); always at most `poll_ms`.
    wait_ms: Option<u32>,
    /// Frames not sent for want of a free UMEM frame.
    pub tx_dropped: u64,
}

// SAFETY: the raw pointers refer to mappings owned by this value; it is used by one thread.
unsafe impl Send for AfXdp {}

fn sockopt<T>(fd: libc::c_int, opt: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: v points to a value of the size passed.
    let r = unsafe {
        libc::setsockopt(
            fd,
            SOL_XDP,
            opt,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl AfXdp {
    /// Open queue 0 of `iface` (needs CAP_NET_ADMIN and CAP_BPF/CAP_SYS_ADMIN).
    pub fn open(iface: &str) -> io::Result<AfXdp> {
        let name = CString::new(iface)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name"))?;
        // SAFETY: valid C string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface {iface}"),
            ));
        }
        // SAFETY: plain socket call.
        let sock = Fd(unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) });
        if sock.0 < 0 {
            return Err(io::Error::last_os_error());
        }
        let umem_len = (FRAMES * FRAME_SIZE) as usize;
        // SAFETY: anonymous private mapping.
        let umem = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                umem_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if umem == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let umem = umem as *mut u8;
        let unmap = |e: io::Error| {
            // SAFETY: the UMEM mapping made above, unmapped once on this error path.
            unsafe { libc::munmap(umem as *mut libc::c_void, umem_len) };
            e
        };
        let reg = UmemReg {
            addr: umem as u64,
            len: umem_len as u64,
            chunk_size: FRAME_SIZE,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        let setup = || -> io::Result<()> {
            sockopt(sock.0, XDP_UMEM_REG, &reg)?;
            sockopt(sock.0, XDP_UMEM_FILL_RING, &RING)?;
            sockopt(sock.0, XDP_UMEM_COMPLETION_RING, &RING)?;
            sockopt(sock.0, XDP_RX_RING, &RING)?;
            sockopt(sock.0, XDP_TX_RING, &RING)
        };
        setup().map_err(|e| unmap(io::Error::new(e.kind(), format!("XSK setup: {e}"))))?;
        let mut off = MmapOffsets::default();
        let mut optlen = std::mem::size_of::<MmapOffsets>() as libc::socklen_t;
        // SAFETY: off is a buffer of optlen bytes.
        let r = unsafe {
            libc::getsockopt(
                sock.0,
                SOL_XDP,
                XDP_MMAP_OFFSETS,
                &mut off as *mut MmapOffsets as *mut libc::c_void,
                &mut optlen,
            )
        };
        if r < 0 {
            return Err(unmap(io::Error::last_os_error()));
        }
        // SAFETY: rings were sized with RING entries just above.
        let rings = unsafe {
            (|| -> io::Result<_> {
                Ok((
                    Ring::<XdpDesc>::map(sock.0, &off.rx, XDP_PGOFF_RX_RING)?,
                    Ring::<XdpDesc>::map(sock.0, &off.tx, XDP_PGOFF_TX_RING)?,
                    Ring::<u64>::map(sock.0, &off.fr, XDP_UMEM_PGOFF_FILL_RING)?,
                    Ring::<u64>::map(sock.0, &off.cr, XDP_UMEM_PGOFF_COMPLETION_RING)?,
                ))
            })()
        };
        let (rx, tx, fill, comp) = rings.map_err(unmap)?;
        // Half the frames to the fill ring (receive), half for transmit.
        let half = FRAMES / 2;
        for i in 0..half {
            fill.write(i, (i * FRAME_SIZE) as u64);
        }
        fill.producer().store(half, Ordering::Release);
        let free_tx = (half..FRAMES).map(|i| (i * FRAME_SIZE) as u64).collect();
        let sa = SockaddrXdp {
            family: AF_XDP as u16,
            flags: XDP_COPY,
            ifindex,
            queue_id: 0,
            shared_umem_fd: 0,
        };
        // A socket on this queue that was just closed (an NF restarted or moved) is torn down
        // asynchronously by the kernel: bind fails with EBUSY for a moment. Retry for up to 2 s.
        let t0 = std::time::Instant::now();
        let r = loop {
            // SAFETY: sa is a sockaddr_xdp of the size passed.
            let r = unsafe {
                libc::bind(
                    sock.0,
                    &sa as *const SockaddrXdp as *const libc::sockaddr,
                    std::mem::size_of::<SockaddrXdp>() as libc::socklen_t,
                )
            };
            let busy = r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EBUSY);
            if !busy || t0.elapsed() > std::time::Duration::from_secs(2) {
                break r;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            drop((rx, tx, fill, comp));
            return Err(unmap(io::Error::new(
                e.kind(),
                format!("bind XSK to {iface}: {e}"),
            )));
        }
        let redirect = match attach_redirect(ifindex, sock.0) {
            Ok(r) => r,
            Err(e) => {
                drop((rx, tx, fill, comp));
                return Err(unmap(e));
            }
        };
        Ok(AfXdp {
            iface: iface.to_string(),
            _redirect: redirect,
            rx,
            tx,
            fill,
            comp,
            sock,
            umem,
            umem_len,
            free_tx,
            poll_ms: 10,
            wait_ms: None,
            tx_dropped: 0,
        })
    }

    fn frame(&self, addr: u64, len: usize) -> &[u8] {
        let a = (addr as usize).min(self.umem_len);
        let l = len.min(self.umem_len - a);
        // SAFETY: bounded to the UMEM mapping.
        unsafe { std::slice::from_raw_parts(self.umem.add(a), l) }
    }

    fn reclaim(&mut self) {
        let prod = self.comp.producer().load(Ordering::Acquire);
        let mut cons = self.comp.consumer().load(Ordering::Relaxed);
        while cons != prod {
            self.free_tx.push(self.comp.read(cons));
            cons = cons.wrapping_add(1);
        }
        self.comp.consumer().store(cons, Ordering::Release);
    }

    fn take(&mut self, batch: &mut Batch, now_ns: u64) -> usize {
        let prod = self.rx.producer().load(Ordering::Acquire);
        let mut cons = self.rx.consumer().load(Ordering::Relaxed);
        let mut fprod = self.fill.producer().load(Ordering::Relaxed);
        while cons != prod && !batch.is_full() {
            let d = self.rx.read(cons);
            batch.push(self.frame(d.addr, d.len as usize), now_ns);
            // Give the frame back for receive at once (aligned mode: the chunk's base).
            self.fill.write(fprod, d.addr & !((FRAME_SIZE as u64) - 1));
            fprod = fprod.wrapping_add(1);
            cons = cons.wrapping_add(1);
        }
        self.fill.producer().store(fprod, Ordering::Release);
        self.rx.consumer().store(cons, Ordering::Release);
        batch.len()
    }

    /// Have the kernel transmit up to `prod`: in copy mode each sendto handles a bounded number
    /// of descriptors (32 in current kernels), so kick until the ring is consumed.
    fn kick(&mut self, prod: u32) -> io::Result<()> {
        for _ in 0..RING / 16 {
            // SAFETY: sendto with no data on our socket.
            let r = unsafe {
                libc::sendto(
                    self.sock.0,
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) => {}
                    _ => return Err(e),
                }
            }
            if self.tx.consumer().load(Ordering::Acquire) == prod {
                break;
            }
        }
        Ok(())
    }

    fn recv_impl(&mut self, batch: &mut Batch, now_ns: u64, wait: bool) -> io::Result<usize> {
        batch.clear();
        if self.take(batch, now_ns) > 0 || !wait {
            return Ok(batch.len());
        }
        let mut pfd = libc::pollfd {
            fd: self.sock.0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, crate::wait_bound(self.poll_ms, self.wait_ms)) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        Ok(self.take(batch, now_ns))
    }
}

impl Device for AfXdp {
    fn describe(&self) -> String {
        format!("af_xdp(copy, skb mode) {} queue 0", self.iface)
    }

    fn recv(&mut self, batch: &mut Batch, now_ns: u64) -> io::Result<usize> {
        self.recv_impl(batch, now_ns, true)
    }

    fn recv_nowait(&mut self, batch: &mut Batch, now_ns: u64) -> io::Result<usize> {
        self.recv_impl(batch, now_ns, false)
    }

    fn set_wait_ms(&mut self, ms: Option<u32>) {
        self.wait_ms = ms;
    }

    /// Waiting: the RX ring's producer (the kernel publishes a descriptor, in generic mode at
    /// once, before it moves the index) minus our consumer. Dropped: the socket's XDP_STATISTICS
    /// (no buffer or RX ring full).
    fn rx_counts(&mut self) -> io::Result<crate::RxCounts> {
        let prod = self.rx.producer().load(Ordering::Acquire);
        let cons = self.rx.consumer().load(Ordering::Relaxed);
        let mut st = XdpStatistics::default();
        let mut len = std::mem::size_of::<XdpStatistics>() as libc::socklen_t;
        // SAFETY: st is a live xdp_statistics of `len` bytes.
        let r = unsafe {
            libc::getsockopt(
                self.sock.0,
                SOL_XDP,
                XDP_STATISTICS,
                &mut st as *mut XdpStatistics as *mut libc::c_void,
                &mut len,
            )
        };
        let dropped = (r == 0).then_some(st.rx_dropped + st.rx_ring_full);
        Ok(crate::RxCounts {
            waiting: Some(u64::from(prod.wrapping_sub(cons))),
            dropped,
        })
    }

    fn send(&mut self, batch: &Batch, keep: &[bool], _now_ns: u64) -> io::Result<usize> {
        self.reclaim();
        let mut prod = self.tx.producer().load(Ordering::Relaxed);
        let mut n = 0;
        for (i, f) in batch.iter().enumerate() {
            if !keep.get(i).copied().unwrap_or(false) {
                continue;
            }
            if f.len() > FRAME_SIZE as usize {
                self.tx_dropped += 1;
                continue;
            }
            let Some(addr) = self.free_tx.pop() else {
                self.tx_dropped += 1;
                continue;
            };
            // SAFETY: addr is a frame of FRAME_SIZE bytes inside the UMEM; f fits (checked).
            unsafe {
                std::ptr::copy_nonoverlapping(f.as_ptr(), self.umem.add(addr as usize), f.len())
            };
            self.tx.write(
                prod,
                XdpDesc {
                    addr,
                    len: f.len() as u32,
                    options: 0,
                },
            );
            prod = prod.wrapping_add(1);
            n += 1;
        }
        if n > 0 {
            self.tx.producer().store(prod, Ordering::Release);
            self.kick(prod)?;
        }
        Ok(n)
    }
}

impl Drop for AfXdp {
    fn drop(&mut self) {
        // Rings, program and socket are dropped by their own Drop impls (fields); the UMEM
        // mapping is ours. The socket must be closed before the UMEM goes: close it here.
        let fd = std::mem::replace(&mut self.sock.0, -1);
        // SAFETY: closing our socket once (Fd's drop then sees -1).
        unsafe { libc::close(fd) };
        // SAFETY: unmapping the UMEM made in open, once.
        unsafe { libc::munmap(self.umem as *mut libc::c_void, self.umem_len) };
    }
}
