//! A CPU wake-up latency request (Linux PM QoS, `/dev/cpu_dma_latency`), held while its value
//! lives: the idle governor then keeps every CPU in idle states that wake within the bound (0:
//! polling, never halting). `tuned`'s latency-performance profile and cyclictest do the same.
//!
//! Why an NF host wants it: the tier's round trip wakes Redis, and Redis's reply wakes the NF
//! when it stopped spinning. A halted CPU, above all a halted vCPU (each halt is a VM exit, and
//! the host may run something else meanwhile), takes far longer to wake than a round trip over
//! the unix socket takes (bench/RESULTS.md "cpu-latency" has the figures). The cost: idle CPUs
//! poll instead of sleeping (power, and on a VM the host's CPU time).
//!
//! The request is system-wide and ends when the file is closed: on drop, and by the kernel when
//! the process dies, so nothing is left behind.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};

pub const DEVICE: &str = "/dev/cpu_dma_latency";
/// Largest bound accepted (1 s): anything above asks for nothing.
pub const MAX_US: u32 = 1_000_000;

/// A held request (dropped: released).
#[derive(Debug)]
pub struct CpuLatencyRequest {
    _file: File,
    us: u32,
}

impl CpuLatencyRequest {
    /// Ask that CPUs wake within `us` microseconds. Errors name the device and the cause (no
    /// such device in a container, or no permission: it takes root or write access).
    pub fn hold(us: u32) -> io::Result<CpuLatencyRequest> {
        if us > MAX_US {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("cpu latency bound {us} us: at most {MAX_US}"),
            ));
        }
        let named = |e: io::Error| io::Error::new(e.kind(), format!("{DEVICE}: {e}"));
        let mut f = OpenOptions::new().write(true).open(DEVICE).map_err(named)?;
        // The device takes the bound as a native-endian 32-bit integer.
        f.write_all(&(us as i32).to_ne_bytes()).map_err(named)?;
        Ok(CpuLatencyRequest { _file: f, us })
    }

    /// The bound asked for (us).
    pub fn us(&self) -> u32 {
        self.us
    }
}

/// The bound in force now (the lowest of all held requests; the kernel's default when none),
/// in us.
pub fn current_us() -> io::Result<i64> {
    let mut b = [0u8; 4];
    File::open(DEVICE)?.read_exact(&mut b)?;
    Ok(i64::from(i32::from_ne_bytes(b)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_above_the_maximum_is_refused_before_touching_the_device() {
        let e = CpuLatencyRequest::hold(MAX_US + 1).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("at most"), "{e}");
    }

    #[test]
    fn a_held_request_is_in_force_until_dropped() {
        // Needs the device and write access (root); elsewhere the error must name the device.
        let before = current_us().ok();
        match CpuLatencyRequest::hold(7) {
            Ok(r) => {
                assert_eq!(r.us(), 7);
                let now = current_us().unwrap();
                assert!(now <= 7, "in force while held: {now}");
                drop(r);
                // Released on close: the bound in force is what it was (assumes no other
                // process changes its own request meanwhile).
                assert_eq!(current_us().ok(), before, "released on drop");
            }
            Err(e) => assert!(e.to_string().contains(DEVICE), "{e}"),
        }
    }
}
