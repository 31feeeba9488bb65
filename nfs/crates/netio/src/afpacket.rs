//! AF_PACKET with a TPACKET_V3 mmap RX ring (block-batched receive) and `send` for transmit.
//!
//! The kernel fills blocks of the ring; user space takes all packets of a ready block as one
//! batch (up to the batch capacity) without a system call per packet, and hands the block back
//! when it has copied them. Our own transmissions are not looped back (PACKET_IGNORE_OUTGOING).
//! VLAN tags that the kernel stripped into metadata are put back into the frame.
//!
//! What waits in the ring ([`Device::rx_counts`]): the kernel counts every frame it puts into the
//! ring (PACKET_STATISTICS, under the lock it fills the ring with), we count every frame we take;
//! the difference is exact, also for frames in a block the kernel has not retired yet (a
//! TPACKET_V3 block is handed over only when full or after `retire_ms`, so an empty `recv` does not
//! mean an empty ring).

use crate::{Batch, Device};
use std::ffi::CString;
use std::io;
use std::sync::atomic::{fence, Ordering};

const SOL_PACKET: libc::c_int = 263;
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const PACKET_STATISTICS: libc::c_int = 6;
const TPACKET_V3: libc::c_int = 2;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_VLAN_VALID: u32 = 0x10;
const TP_STATUS_VLAN_TPID_VALID: u32 = 0x40;
const ETH_P_ALL: u16 = 0x0003;

/// Ring geometry and poll timeout.
#[derive(Debug, Clone, Copy)]
pub struct RingConfig {
    pub block_size: u32,
    pub block_nr: u32,
    pub frame_size: u32,
    /// The kernel retires a partly filled block after this many ms (bounds added latency).
    pub retire_ms: u32,
    /// `recv` waits at most this long for a block.
    pub poll_ms: i32,
    pub batch: usize,
}

impl RingConfig {
    /// The default ring: 4 MiB in 128 blocks of 32 KiB. While the NF does not run (throttled by
    /// its CPU quota, stopped, descheduled), the kernel retires a block every `retire_ms` however
    /// few frames it holds, so the ring holds `block_nr` ms of traffic at moderate rates: many
    /// small blocks, not a few large ones, keep a stopped NF's ring from filling with mostly
    /// empty blocks (bench/RESULTS.md, nfs, has the drops of both layouts).
    pub fn for_batch(batch: usize) -> RingConfig {
        RingConfig {
            block_size: 1 << 15,
            block_nr: 128,
            frame_size: 2048,
            retire_ms: 1,
            poll_ms: 10,
            batch,
        }
    }
}

/// An AF_PACKET TPACKET_V3 socket bound to one interface.
pub struct AfPacket {
    fd: libc::c_int,
    ring: *mut u8,
    ring_len: usize,
    cfg: RingConfig,
    iface: String,
    /// Block being consumed, and position inside it.
    block: u32,
    pkts_left: u32,
    pkt_off: usize,
    /// Frames taken out of the ring (also those too big to copy) since open.
    taken: u64,
    /// `recv`'s wait when shortened ([`Device::set_wait_ms`]); always at most `cfg.poll_ms`.
    wait_ms: Option<u32>,
    /// Frames the kernel put into the ring, and dropped because it was full, since open (summed
    /// from PACKET_STATISTICS, which resets on every read).
    delivered: u64,
    dropped: u64,
}

/// `struct tpacket_stats_v3`.
#[repr(C)]
#[derive(Default)]
struct TpacketStatsV3 {
    tp_packets: u32,
    tp_drops: u32,
    tp_freeze_q_cnt: u32,
}

// The ring is only touched through &mut self.
unsafe impl Send for AfPacket {}

fn os_err(what: &str, iface: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("AF_PACKET {what} on {iface}: {e}"))
}

fn setopt<T>(fd: libc::c_int, level: libc::c_int, name: libc::c_int, v: &T) -> libc::c_int {
    // SAFETY: v points to a live T of the given size.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    }
}

impl AfPacket {
    /// Open the ring on `iface` (needs CAP_NET_RAW).
    pub fn open(iface: &str, cfg: RingConfig) -> io::Result<AfPacket> {
        let cname = CString::new(iface)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad interface name"))?;
        // SAFETY: plain FFI calls with valid arguments; every failure path closes the fd.
        unsafe {
            let ifindex = libc::if_nametoindex(cname.as_ptr());
            if ifindex == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("interface {iface:?} does not exist"),
                ));
            }
            // Protocol 0: no packet hook until `bind` below names the protocol and the interface.
            // Opened with ETH_P_ALL, the socket is hooked to every interface at once and `bind`
            // must unhook it first, which waits for an RCU grace period (synchronize_net: several
            // ms, on a failover's start path); it also saw other interfaces' packets until then.
            let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0);
            if fd < 0 {
                return Err(os_err("socket", iface));
            }
            let fail = |what: &str| {
                let e = os_err(what, iface);
                libc::close(fd);
                e
            };
            if setopt(fd, SOL_PACKET, PACKET_VERSION, &TPACKET_V3) != 0 {
                return Err(fail("TPACKET_V3"));
            }
            let req = libc::tpacket_req3 {
                tp_block_size: cfg.block_size,
                tp_block_nr: cfg.block_nr,
                tp_frame_size: cfg.frame_size,
                tp_frame_nr: cfg.block_size / cfg.frame_size * cfg.block_nr,
                tp_retire_blk_tov: cfg.retire_ms,
                tp_sizeof_priv: 0,
                tp_feature_req_word: 0,
            };
            if setopt(fd, SOL_PACKET, PACKET_RX_RING, &req) != 0 {
                return Err(fail("PACKET_RX_RING"));
            }
            // Best effort (Linux >= 4.20); without it our own sends would come back as input.
            let one: libc::c_int = 1;
            if setopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one) != 0 {
                return Err(fail("PACKET_IGNORE_OUTGOING"));
            }
            let ring_len = (cfg.block_size * cfg.block_nr) as usize;
            let ring = libc::mmap(
                std::ptr::null_mut(),
                ring_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_LOCKED,
                fd,
                0,
            );
            let ring = if ring == libc::MAP_FAILED {
                // MAP_LOCKED may exceed RLIMIT_MEMLOCK: retry without it.
                libc::mmap(
                    std::ptr::null_mut(),
                    ring_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                )
            } else {
                ring
            };
            if ring == libc::MAP_FAILED {
                return Err(fail("mmap"));
            }
            let mut sll: libc::sockaddr_ll = std::mem::zeroed();
            sll.sll_family = libc::AF_PACKET as u16;
            sll.sll_protocol = ETH_P_ALL.to_be();
            sll.sll_ifindex = ifindex as i32;
            if libc::bind(
                fd,
                &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            ) != 0
            {
                libc::munmap(ring, ring_len);
                return Err(fail("bind"));
            }
            Ok(AfPacket {
                fd,
                ring: ring as *mut u8,
                ring_len,
                cfg,
                iface: iface.to_string(),
                block: 0,
                pkts_left: 0,
                pkt_off: 0,
                taken: 0,
                wait_ms: None,
                delivered: 0,
                dropped: 0,
            })
        }
    }

    fn block_ptr(&self, b: u32) -> *mut u8 {
        // SAFETY: b < block_nr, so the offset is inside the mapping.
        unsafe { self.ring.add((b * self.cfg.block_size) as usize) }
    }

    fn rd32(p: *const u8, off: usize) -> u32 {
        // SAFETY: callers pass offsets inside the current block (kernel-written headers).
        unsafe { std::ptr::read_volatile(p.add(off) as *const u32) }
    }

    fn rd16(p: *const u8, off: usize) -> u16 {
        // SAFETY: as rd32.
        unsafe { std::ptr::read_volatile(p.add(off) as *const u16) }
    }

    /// Take up to a batch from the ring; when it is empty and `wait`, poll once (`poll_ms`, or the
    /// wait set by [`Device::set_wait_ms`]).
    fn recv_impl(&mut self, batch: &mut Batch, wait: bool) -> io::Result<usize> {
        batch.clear();
        let mut waited = !wait;

        while !batch.is_full() {
            if self.pkts_left == 0 {
                if self.block_status() & TP_STATUS_USER == 0 {
                    if !batch.is_empty() || waited {
                        break;
                    }
                    waited = true;
                    if !self.wait_readable()? {
                        break;
                    }
                    continue;
                }
                fence(Ordering::Acquire);
                let bp = self.block_ptr(self.block);
                self.pkts_left = Self::rd32(bp, 12);
                self.pkt_off = Self::rd32(bp, 16) as usize;
                if self.pkts_left == 0 {
                    self.release_block();
                    continue;
                }
            }
            let bp = self.block_ptr(self.block);
            let hp = bp.wrapping_add(self.pkt_off);
            let next = Self::rd32(hp, 0) as usize;
            let sec = Self::rd32(hp, 4) as u64;
            let nsec = Self::rd32(hp, 8) as u64;
            let snap = Self::rd32(hp, 12) as usize;
            let status = Self::rd32(hp, 20);
            let mac = Self::rd16(hp, 24) as usize;
            let bs = self.cfg.block_size as usize;
            if self.pkt_off + mac + snap <= bs {
                // SAFETY: bounds checked against the block size just above.
                let data = unsafe { std::slice::from_raw_parts(hp.add(mac), snap) };
                let ts = sec * 1_000_000_000 + nsec;
                if status & TP_STATUS_VLAN_VALID != 0 && snap >= 12 {
                    let tci = Self::rd32(hp, 32) as u16;
                    let tpid = if status & TP_STATUS_VLAN_TPID_VALID != 0 {
                        Self::rd16(hp, 36)
                    } else {
                        0x8100
                    };
                    let mut f = Vec::with_capacity(snap + 4);
                    f.extend_from_slice(&data[..12]);
                    f.extend_from_slice(&tpid.to_be_bytes());
                    f.extend_from_slice(&tci.to_be_bytes());
                    f.extend_from_slice(&data[12..]);
                    batch.push(&f, ts);
                } else {
                    batch.push(data, ts);
                }
            }
            self.pkts_left -= 1;
            self.taken += 1;
            if self.pkts_left == 0 || next == 0 {
                // (next == 0 before the block's count: a malformed block; its rest is given up)
                self.taken += u64::from(self.pkts_left);
                self.pkts_left = 0;
                self.release_block();
            } else {
                self.pkt_off += next;
            }
        }
        Ok(batch.len())
    }

    fn block_status(&self) -> u32 {
        Self::rd32(self.block_ptr(self.block), 8)
    }

    fn release_block(&mut self) {
        let p = self.block_ptr(self.block);
        fence(Ordering::Release);
        // SAFETY: block_status lives at offset 8 of the block descriptor.
        unsafe { std::ptr::write_volatile(p.add(8) as *mut u32, TP_STATUS_KERNEL) };
        self.block = (self.block + 1) % self.cfg.block_nr;
    }

    /// Add the kernel's counts since the last read (PACKET_STATISTICS resets them).
    fn read_kernel_counts(&mut self) -> io::Result<()> {
        let mut st = TpacketStatsV3::default();
        let mut len = std::mem::size_of::<TpacketStatsV3>() as libc::socklen_t;
        // SAFETY: st is a live tpacket_stats_v3 of `len` bytes.
        let r = unsafe {
            libc::getsockopt(
                self.fd,
                SOL_PACKET,
                PACKET_STATISTICS,
                &mut st as *mut TpacketStatsV3 as *mut libc::c_void,
                &mut len,
            )
        };
        if r != 0 {
            return Err(os_err("PACKET_STATISTICS", &self.iface));
        }
        // tp_packets includes the drops (the kernel adds them when it reports).
        self.delivered += u64::from(st.tp_packets.saturating_sub(st.tp_drops));
        self.dropped += u64::from(st.tp_drops);
        Ok(())
    }

    fn wait_readable(&self) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN | libc::POLLERR,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let r = unsafe {
            libc::poll(
                &mut pfd,
                1,
                crate::wait_bound(self.cfg.poll_ms, self.wait_ms),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(e);
        }
        Ok(r > 0)
    }
}

impl Device for AfPacket {
    fn describe(&self) -> String {
        format!("af_packet(tpacket_v3) {}", self.iface)
    }

    fn recv(&mut self, batch: &mut Batch, _now_ns: u64) -> io::Result<usize> {
        self.recv_impl(batch, true)
    }

    fn recv_nowait(&mut self, batch: &mut Batch, _now_ns: u64) -> io::Result<usize> {
        self.recv_impl(batch, false)
    }

    fn set_wait_ms(&mut self, ms: Option<u32>) {
        self.wait_ms = ms;
    }

    fn rx_counts(&mut self) -> io::Result<crate::RxCounts> {
        self.read_kernel_counts()?;
        Ok(crate::RxCounts {
            waiting: Some(self.delivered.saturating_sub(self.taken)),
            dropped: Some(self.dropped),
        })
    }

    fn send(&mut self, batch: &Batch, keep: &[bool], _now_ns: u64) -> io::Result<usize> {
        let mut n = 0;
        for (i, f) in batch.iter().enumerate() {
            if !keep.get(i).copied().unwrap_or(false) {
                continue;
            }
            // SAFETY: f is a valid slice for the duration of the call.
            let r = unsafe { libc::send(self.fd, f.as_ptr() as *const libc::c_void, f.len(), 0) };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    // Transient (queue full, MTU): count as not sent, keep going.
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EMSGSIZE) => continue,
                    _ => {
                        return Err(io::Error::new(
                            e.kind(),
                            format!("send on {}: {e}", self.iface),
                        ))
                    }
                }
            }
            n += 1;
        }
        Ok(n)
    }
}

impl Drop for AfPacket {
    fn drop(&mut self) {
        // SAFETY: ring and fd were created in open and are released once.
        unsafe {
            libc::munmap(self.ring as *mut libc::c_void, self.ring_len);
            libc::close(self.fd);
        }
    }
}
