//! Where a packet's time goes in the pipelined loop (diagnosis; nf-bench with `NFBENCH_DEBUG`):
//! per batch, wall-clock marks of each step from its receive to its transmit, kept per packet
//! with the packet's own timestamp (its arrival, for a paced memory port). Off unless
//! [`super::Runtime::record_phases`] turned it on: then a batch takes a clock reading per step,
//! otherwise it costs one branch per step.

/// Wall-clock ns ([`super::wall_ns`]) at which a batch passed each step; 0 = not (yet) passed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Marks {
    /// Taken from the port.
    pub recv: u64,
    /// Its reads pushed to the tier (a send; = `recv` for a batch that reads nothing).
    pub sent: u64,
    /// Its reads' reply taken (= `sent` for a batch that reads nothing).
    pub reads_in: u64,
    /// Processing started and ended.
    pub proc_start: u64,
    pub proc_end: u64,
    /// Its writes' acknowledgement taken (= `proc_end` for a batch that writes nothing).
    pub acked: u64,
    /// Transmitted.
    pub tx: u64,
    /// Batches in flight (reading or waiting for their acknowledgement) when it was taken.
    pub in_flight: u32,
    /// Its packets.
    pub packets: u32,
}

/// One packet's marks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PacketPhases {
    /// The frame's timestamp (its arrival on a paced port).
    pub arrival_ns: u64,
    pub marks: Marks,
}

/// The phases a packet's latency is made of, in order (names and ns).
pub const PHASES: [&str; 7] = [
    "port",       // arrival -> taken from the port
    "to_send",    // taken -> its reads pushed
    "read_rt",    // pushed -> reply taken
    "to_process", // reply taken -> processing starts (the core busy with earlier batches)
    "process",    // processing
    "write_ack",  // processed -> writes acknowledged
    "to_tx",      // acknowledged -> transmitted (earlier batches first)
];

impl PacketPhases {
    /// The duration of each of [`PHASES`] in ns (their sum: arrival to transmit).
    pub fn durations(&self) -> [u64; 7] {
        let m = &self.marks;
        let pts = [
            self.arrival_ns,
            m.recv,
            m.sent,
            m.reads_in,
            m.proc_start,
            m.proc_end,
            m.acked,
            m.tx,
        ];
        let mut d = [0u64; 7];
        for i in 0..7 {
            d[i] = pts[i + 1].saturating_sub(pts[i]);
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_add_up_to_arrival_to_transmit() {
        let p = PacketPhases {
            arrival_ns: 100,
            marks: Marks {
                recv: 150,
                sent: 160,
                reads_in: 200,
                proc_start: 210,
                proc_end: 230,
                acked: 260,
                tx: 265,
                in_flight: 1,
                packets: 3,
            },
        };
        let d = p.durations();
        assert_eq!(d, [50, 10, 40, 10, 20, 30, 5]);
        assert_eq!(d.iter().sum::<u64>(), 165);
    }
}
