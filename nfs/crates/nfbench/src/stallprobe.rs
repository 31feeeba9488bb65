//! Machine-stall probe for the paced latency runs: one real-time (SCHED_FIFO) thread per CPU
//! sleeps `PERIOD` again and again and records every wake-up later than `PERIOD + THRESHOLD`.
//! A real-time thread preempts whatever runs on its CPU as soon as its timer fires, so a late
//! wake-up means the CPU itself ran nothing of this machine for that long: on a virtual machine,
//! the host had taken the vCPU away (measured here: ~9 stalls/s of 0.3-14 ms over two busy
//! vCPUs, invisible to the guest's scheduler and its steal counter). The NF and Redis stop with
//! it, and a packet in flight then waits for the host, not for the tier.
//!
//! The paced runs report p99 over every packet and, beside it, p99 over the packets whose
//! arrival-to-transmit interval overlaps no recorded stall (`p99_clean_us`). Packets delayed by
//! the backlog a stall leaves behind stay in the clean set: the filter removes only what the
//! host certainly delayed, and it runs the same for the local baseline.
//!
//! A diagnosis, off by default (`--stall-probe`): two wake-ups per CPU per millisecond, each a
//! timer interrupt and on a VM an exit, perturb what is measured (the monitor's stateless p99
//! rose with it). Finding on the development VM (bench/RESULTS.md "cpu-latency"): stalls do
//! happen, mostly on an idle vCPU, but the stateless tail events (0.6-3 ms) came without any.
//! Needs CAP_SYS_NICE (root) for SCHED_FIFO; without it the probe reports itself unavailable.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long each probe thread sleeps between two looks at the clock.
const PERIOD: Duration = Duration::from_micros(500);
/// A wake-up this much later than asked is a stall (timer slack and wake-up cost are far below).
const THRESHOLD_NS: u64 = 250_000;

/// One interval in which a CPU ran nothing: [`start_ns`, `start_ns + dur_ns`) on the wall clock
/// ([`nfcore::runtime::wall_ns`]). The interval covers the whole late sleep, so it may start up
/// to [`PERIOD`] before the stall did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    pub cpu: usize,
    pub start_ns: u64,
    pub dur_ns: u64,
}

pub struct Probe {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<Option<Vec<Stall>>>>,
}

impl Probe {
    /// Start one probe thread per CPU in `cpus`.
    pub fn start(cpus: &[usize]) -> Probe {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = cpus
            .iter()
            .map(|&cpu| {
                let stop = stop.clone();
                std::thread::spawn(move || watch(cpu, &stop))
            })
            .collect();
        Probe { stop, threads }
    }

    /// Stop the threads: every stall recorded, by start time, or `None` when a thread could not
    /// be made real-time or pinned (its late wake-ups would be this machine's own scheduling).
    pub fn stop(self) -> Option<Vec<Stall>> {
        self.stop.store(true, Relaxed);
        let mut all = Vec::new();
        let mut ok = true;
        for t in self.threads {
            match t.join() {
                Ok(Some(v)) => all.extend(v),
                _ => ok = false,
            }
        }
        all.sort_by_key(|s| s.start_ns);
        ok.then_some(all)
    }
}

/// The probe loop of one CPU (`None`: it could not be pinned or made real-time).
fn watch(cpu: usize, stop: &AtomicBool) -> Option<Vec<Stall>> {
    // SAFETY: a zeroed cpu_set_t and sched_param are valid; CPU_SET writes inside the set;
    // pid 0 is this thread.
    let ok = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let pinned = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0;
        let mut p: libc::sched_param = std::mem::zeroed();
        p.sched_priority = 1;
        pinned && libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) == 0
    };
    if !ok {
        return None;
    }
    let period_ns = PERIOD.as_nanos() as u64;
    let mut stalls = Vec::new();
    while !stop.load(Relaxed) {
        let a = nfcore::runtime::wall_ns();
        std::thread::sleep(PERIOD);
        let b = nfcore::runtime::wall_ns();
        let slept = b.saturating_sub(a);
        if slept > period_ns + THRESHOLD_NS {
            stalls.push(Stall {
                cpu,
                start_ns: a,
                dur_ns: slept,
            });
        }
    }
    Some(stalls)
}

/// Whether a packet in flight over [`from_ns`, `to_ns`] overlaps a stall of `stalls` (sorted by
/// start).
pub fn touched(stalls: &[Stall], from_ns: u64, to_ns: u64) -> bool {
    // Stalls starting after the packet left cannot touch it; of the others, any still running
    // when it arrived does.
    let end = stalls.partition_point(|s| s.start_ns < to_ns);
    stalls[..end]
        .iter()
        .any(|s| s.start_ns + s.dur_ns > from_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(start_ns: u64, dur_ns: u64) -> Stall {
        Stall {
            cpu: 0,
            start_ns,
            dur_ns,
        }
    }

    #[test]
    fn a_packet_is_touched_by_a_stall_overlapping_its_flight() {
        let s = [st(100, 50), st(1_000, 10)];
        assert!(touched(&s, 90, 110), "stall starts in flight");
        assert!(touched(&s, 120, 200), "arrived during the stall");
        assert!(touched(&s, 50, 300), "stall inside the flight");
        assert!(!touched(&s, 150, 900), "after the stall ended");
        assert!(!touched(&s, 10, 100), "left as it started");
        assert!(touched(&s, 1_005, 1_006));
        assert!(!touched(&[], 0, u64::MAX));
    }

    #[test]
    fn the_probe_starts_and_stops() {
        // Without CAP_SYS_NICE it reports itself unavailable; with it, a list (maybe empty).
        let p = Probe::start(&[0]);
        std::thread::sleep(Duration::from_millis(5));
        if let Some(v) = p.stop() {
            assert!(v.iter().all(|s| s.dur_ns > THRESHOLD_NS && s.cpu == 0));
        }
    }
}
