//! Where the packets of a paced run spent their time (`NFBENCH_DEBUG`): the mean of each phase of
//! the pipelined loop ([`nfcore::runtime::phases`]) over every packet after the warm-up and over
//! the slowest 1 % of them, and which phase was the largest part of each of those slowest packets.

use nfcore::runtime::phases::{PacketPhases, PHASES};
use std::fmt::Write;

/// One line describing `phases` (transmit order) without the first `skip` packets, or None when
/// nothing was recorded (a loop without phase marks: local or batch by batch).
pub fn describe(phases: &[PacketPhases], skip: usize) -> Option<String> {
    let steady = phases.get(skip..).filter(|p| !p.is_empty())?;
    let total = |p: &PacketPhases| p.marks.tx.saturating_sub(p.arrival_ns);
    let mut order: Vec<&PacketPhases> = steady.iter().collect();
    order.sort_by_key(|p| std::cmp::Reverse(total(p)));
    let tail = &order[..order.len().div_ceil(100)];
    let mean = |set: &[&PacketPhases]| {
        let mut sum = [0f64; 7];
        for p in set {
            for (s, d) in sum.iter_mut().zip(p.durations()) {
                *s += d as f64;
            }
        }
        sum.map(|s| s / 1e3 / set.len() as f64)
    };
    let all: Vec<&PacketPhases> = steady.iter().collect();
    let mut out = String::new();
    for (name, set) in [("all", &all[..]), ("slowest 1%", tail)] {
        let m = mean(set);
        let tot: f64 = m.iter().sum();
        let _ = write!(out, "{name} ({} pkts, mean {tot:.1} us:", set.len());
        for (n, v) in PHASES.iter().zip(m) {
            let _ = write!(out, " {n} {v:.1}");
        }
        let batch = set.iter().map(|p| p.marks.packets as f64).sum::<f64>() / set.len() as f64;
        let fl = set.iter().map(|p| p.marks.in_flight as f64).sum::<f64>() / set.len() as f64;
        let _ = write!(out, "; batch {batch:.1} pkts, in flight at recv {fl:.2}) ");
    }
    let mut largest = [0usize; 7];
    for p in tail {
        let d = p.durations();
        let i = (0..7).max_by_key(|&i| d[i]).unwrap_or(0);
        largest[i] += 1;
    }
    let _ = write!(out, "| slowest 1% by largest phase:");
    for (n, c) in PHASES.iter().zip(largest) {
        if c > 0 {
            let _ = write!(out, " {n} {c}");
        }
    }
    // When in the run the slowest packets were (tenths of the steady part), to tell a periodic
    // cause from a one-off.
    let t0 = steady[0].arrival_ns;
    let span = steady[steady.len() - 1]
        .arrival_ns
        .saturating_sub(t0)
        .max(1);
    let mut when = [0usize; 10];
    for p in tail {
        let f = p.arrival_ns.saturating_sub(t0) as f64 / span as f64;
        when[((f * 10.0) as usize).min(9)] += 1;
    }
    let _ = write!(out, " | by tenth of the run: {when:?}");
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nfcore::runtime::phases::Marks;

    fn pkt(arrival: u64, read_rt: u64) -> PacketPhases {
        PacketPhases {
            arrival_ns: arrival,
            marks: Marks {
                recv: arrival + 1_000,
                sent: arrival + 1_000,
                reads_in: arrival + 1_000 + read_rt,
                proc_start: arrival + 1_000 + read_rt,
                proc_end: arrival + 2_000 + read_rt,
                acked: arrival + 2_000 + read_rt,
                tx: arrival + 2_000 + read_rt,
                in_flight: 1,
                packets: 4,
            },
        }
    }

    #[test]
    fn the_slowest_packets_are_attributed_to_their_largest_phase() {
        let mut v: Vec<PacketPhases> = (0..200).map(|i| pkt(i * 10_000, 5_000)).collect();
        v[150] = pkt(150 * 10_000, 500_000);
        v[160] = pkt(160 * 10_000, 400_000);
        let s = describe(&v, 0).unwrap();
        assert!(s.contains("slowest 1% (2 pkts"), "{s}");
        assert!(s.contains("by largest phase: read_rt 2"), "{s}");
        assert!(s.contains("[0, 0, 0, 0, 0, 0, 0, 1, 1, 0]"), "{s}");
        assert!(describe(&v, 200).is_none());
    }
}
