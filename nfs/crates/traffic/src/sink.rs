//! Receive-side accounting (pure): loss, duplicates, reordering, latency percentiles.

use crate::Marker;
use std::collections::HashMap;

/// How many reordered (and missing) packets a report lists one by one.
pub const MAX_EVENTS: usize = 64;

#[derive(Debug, Default)]
struct FlowSeen {
    seen: Vec<u64>,
    max_seq: Option<u32>,
}

/// Accumulates markers of one run.
#[derive(Debug, Default)]
pub struct SinkStats {
    run: Option<u32>,
    flows: HashMap<u32, FlowSeen>,
    received: u64,
    duplicates: u64,
    reordered: u64,
    /// The first [`MAX_EVENTS`] reordered packets: (flow, seq, the flow's highest seq before it,
    /// receive time, one-way latency), so a report says which flows and when.
    events: Vec<(u32, u32, u32, u64, u64)>,
    latencies_ns: Vec<u64>,
    /// Receive times of the first and the last counted marker (the delivered rate's window).
    first_ns: Option<u64>,
    last_ns: u64,
}

impl SinkStats {
    /// Count only markers of `run` (None: the first run seen).
    pub fn new(run: Option<u32>) -> SinkStats {
        SinkStats {
            run,
            ..SinkStats::default()
        }
    }

    /// Account one received marker at time `now_ns` (same clock as the sender's timestamps).
    pub fn observe(&mut self, m: &Marker, now_ns: u64) {
        match self.run {
            Some(r) if r != m.run => return,
            None => self.run = Some(m.run),
            _ => {}
        }
        let f = self.flows.entry(m.flow).or_default();
        let (w, b) = ((m.seq / 64) as usize, m.seq % 64);
        if f.seen.len() <= w {
            f.seen.resize(w + 1, 0);
        }
        if f.seen[w] & (1 << b) != 0 {
            self.duplicates += 1;
            return;
        }
        f.seen[w] |= 1 << b;
        self.received += 1;
        match f.max_seq {
            Some(mx) if m.seq < mx => {
                self.reordered += 1;
                if self.events.len() < MAX_EVENTS {
                    let lat = now_ns.saturating_sub(m.ts_ns);
                    self.events.push((m.flow, m.seq, mx, now_ns, lat));
                }
            }
            _ => f.max_seq = Some(m.seq),
        }
        self.latencies_ns.push(now_ns.saturating_sub(m.ts_ns));
        self.first_ns.get_or_insert(now_ns);
        self.last_ns = now_ns;
    }

    pub fn received(&self) -> u64 {
        self.received
    }

    /// Report as JSON. `expected`: packets sent (flows x packets), if known; otherwise loss is
    /// counted up to the highest sequence number seen per flow.
    pub fn report(&mut self, expected: Option<u64>) -> serde_json::Value {
        let implied: u64 = self
            .flows
            .values()
            .map(|f| f.max_seq.map_or(0, |m| m as u64 + 1))
            .sum();
        let expected = expected.unwrap_or(implied);
        // The first missing packets (flow, seq) below each flow's highest seen: where a loss was.
        let mut flows: Vec<(&u32, &FlowSeen)> = self.flows.iter().collect();
        flows.sort_by_key(|(k, _)| **k);
        let mut missing = Vec::new();
        'outer: for (flow, f) in flows {
            for seq in 0..f.max_seq.map_or(0, |m| m + 1) {
                let (w, b) = ((seq / 64) as usize, seq % 64);
                if f.seen[w] & (1 << b) == 0 {
                    if missing.len() == MAX_EVENTS {
                        break 'outer;
                    }
                    missing.push(serde_json::json!([flow, seq]));
                }
            }
        }
        self.latencies_ns.sort_unstable();
        let pct = |q: f64| -> f64 {
            if self.latencies_ns.is_empty() {
                return 0.0;
            }
            let i = ((self.latencies_ns.len() - 1) as f64 * q).round() as usize;
            (self.latencies_ns[i] as f64 / 100.0).round() / 10.0
        };
        serde_json::json!({
            "run": self.run, "flows": self.flows.len(), "expected": expected, "received": self.received,
            "lost": expected.saturating_sub(self.received), "duplicates": self.duplicates,
            "reordered": self.reordered, "missing": missing,
            "reorder_events": self.events.iter().map(|&(flow, seq, max, at, lat)| serde_json::json!({
                "flow": flow, "seq": seq, "after": max, "at_ns": at, "latency_us": lat / 1000,
            })).collect::<Vec<_>>(),
            "rx_span_s": self.first_ns.map_or(0.0, |f| self.last_ns.saturating_sub(f) as f64 / 1e9),
            "latency_us": {"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "max": pct(1.0)},
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_dups_reorder_latency() {
        let mut s = SinkStats::new(Some(7));
        let m = |flow, seq, ts| Marker {
            run: 7,
            flow,
            seq,
            ts_ns: ts,
        };
        for (flow, seq) in [(0, 0), (0, 2), (0, 1), (0, 2), (1, 0), (1, 3)] {
            s.observe(&m(flow, seq, 1_000), 11_000);
        }
        s.observe(
            &Marker {
                run: 8,
                flow: 0,
                seq: 9,
                ts_ns: 0,
            },
            0,
        );
        let r = s.report(Some(8));
        assert_eq!(r["received"], 5);
        assert_eq!(r["duplicates"], 1);
        assert_eq!(r["reordered"], 1);
        assert_eq!(r["reorder_events"][0]["flow"], 0);
        assert_eq!(r["reorder_events"][0]["seq"], 1);
        assert_eq!(r["reorder_events"][0]["after"], 2);
        assert_eq!(r["reorder_events"][0]["latency_us"], 10);
        assert_eq!(r["lost"], 3);
        assert_eq!(r["missing"], serde_json::json!([[1, 1], [1, 2]]));
        assert_eq!(r["latency_us"]["p50"], 10.0);
        assert_eq!(r["rx_span_s"], 0.0);
        assert_eq!(s.report(None)["expected"], 3 + 4);
        s.observe(&m(1, 4, 1_000), 2_000_011_000);
        assert_eq!(s.report(Some(8))["rx_span_s"], 2.0);
    }
}
