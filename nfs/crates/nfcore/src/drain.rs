//! The exact drain of an instance that leaves (a move's old instance, a scale-in's leaving one):
//! `POST /drain?quiet_ms=N` is answered by the runtime, which alone knows what is still inside it,
//! once at one instant
//! - its port's receive ring is empty by the kernel's own count ([`netio::Device::rx_counts`]:
//!   also frames the kernel has not handed over yet, e.g. in a TPACKET_V3 block not retired),
//! - nothing is in flight (every batch received has been sent or dropped, its writes
//!   acknowledged), and
//! - no frame was taken from the port for `quiet_ms`, counted from the request's arrival at the
//!   earliest (frames the switches sent to the port just before the remap may still be on their
//!   way: that, not a CPU quota, is what the window covers).
//!
//! A descheduled instance (a CPU-throttled sNIC) answers later, never early: the ring is looked at
//! when the runtime runs, and whatever the kernel put there meanwhile is counted. Past the
//! request's deadline the answer is "not drained" with what was found. A port that cannot tell
//! what waits in it gets no answer from this rule (the agent then polls counters, as before).
//!
//! The decision ([`decide`]) and the bookkeeping ([`Drains`]) take the time as an argument.

use netio::RxCounts;
use std::sync::OnceLock;
use std::time::Instant;

/// Upper bound of `quiet_ms`.
pub const MAX_QUIET_MS: u64 = 10_000;
/// Upper bound of `timeout_ms` (the default is [`DEFAULT_TIMEOUT_MS`]).
pub const MAX_TIMEOUT_MS: u64 = 60_000;
pub const DEFAULT_TIMEOUT_MS: u64 = 5_000;

/// ns on a monotonic clock shared by every thread of the process (the HTTP thread stamps a
/// request, the runtime thread compares).
pub fn mono_ns() -> u64 {
    mono_of(Instant::now())
}

/// `t` on the [`mono_ns`] clock (0 for an instant before its first use).
pub fn mono_of(t: Instant) -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    t.saturating_duration_since(*EPOCH.get_or_init(Instant::now))
        .as_nanos() as u64
}

/// One drain request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainRequest {
    /// When it arrived ([`mono_ns`]): the quiet window never starts before.
    pub since_ns: u64,
    pub quiet_ns: u64,
    /// Answered "not drained" at this time at the latest.
    pub deadline_ns: u64,
    /// The instance's rx counter when it arrived (frames taken later are reported as `late`).
    pub rx_at: u64,
    /// A flush, not a drain: answered once every frame that reached the port before the end of
    /// the quiet window (counted then: taken + waiting in the ring) has been sent or dropped, while
    /// later frames keep coming. What a scale-out waits for at the instances that keep serving
    /// before the new ones, which hold the flows that move to them, may go on.
    pub flush: bool,
    /// A flush's mark: that count, fixed at the first look after the quiet window.
    pub mark: Option<u64>,
}

impl DrainRequest {
    /// A request that arrived at `since_ns`, the rx counter at `rx_at`, with `quiet_ms` and
    /// `timeout_ms` (bounds checked by the caller: [`parse_query`]).
    pub fn new(since_ns: u64, rx_at: u64, quiet_ms: u64, timeout_ms: u64) -> DrainRequest {
        DrainRequest {
            since_ns,
            quiet_ns: quiet_ms * 1_000_000,
            deadline_ns: since_ns + timeout_ms * 1_000_000,
            rx_at,
            flush: false,
            mark: None,
        }
    }

    /// The same request as a flush ([`DrainRequest::flush`]).
    pub fn flushing(self) -> DrainRequest {
        DrainRequest {
            flush: true,
            ..self
        }
    }
}

/// What the runtime knows of its port when it looks: when it last took frames from it
/// ([`mono_ns`]; 0 = never), its rx counter, and what is in flight inside the runtime (received,
/// not yet sent or dropped).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seen {
    pub last_rx_ns: u64,
    pub rx: u64,
    pub in_flight: u64,
}

/// What a check decides for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Drained,
    /// Not yet: look again later.
    Wait,
    /// The deadline passed first.
    Expired,
    /// The port cannot tell what waits in it.
    CannotTell,
}

/// Pure: the earliest time at which `req`'s quiet window can be over, the last frame having been
/// taken at `last_rx_ns`.
pub fn quiet_until(req: &DrainRequest, last_rx_ns: u64) -> u64 {
    if req.flush {
        // A flush's window runs from its arrival: frames keep coming.
        return req.since_ns + req.quiet_ns;
    }
    req.since_ns.max(last_rx_ns) + req.quiet_ns
}

/// Pure: whether a check at `now_ns` could answer `req` (so the port is worth asking): its quiet
/// window is over with nothing in flight, or its deadline passed.
pub fn due(req: &DrainRequest, seen: &Seen, now_ns: u64) -> bool {
    now_ns >= req.deadline_ns
        || ((seen.in_flight == 0 || req.flush) && now_ns >= quiet_until(req, seen.last_rx_ns))
}

/// Pure: the answer to `req` at `now_ns`, given what the runtime holds and what waits in the port
/// (`waiting`: [`RxCounts::waiting`], read after `now_ns`). Drained wins over a deadline reached at
/// the same check.
pub fn decide(req: &mut DrainRequest, seen: &Seen, now_ns: u64, waiting: Option<u64>) -> Decision {
    if req.flush {
        return decide_flush(req, seen, now_ns, waiting);
    }
    match waiting {
        None => Decision::CannotTell,
        Some(0) if seen.in_flight == 0 && now_ns >= quiet_until(req, seen.last_rx_ns) => {
            Decision::Drained
        }
        Some(_) if now_ns >= req.deadline_ns => Decision::Expired,
        Some(_) => Decision::Wait,
    }
}

/// Pure: [`decide`] for a flush: its mark is fixed at the first look after the quiet window
/// (frames taken so far + frames waiting in the ring), and it is flushed once the frames taken
/// and no longer in flight reach the mark.
fn decide_flush(
    req: &mut DrainRequest,
    seen: &Seen,
    now_ns: u64,
    waiting: Option<u64>,
) -> Decision {
    let Some(waiting) = waiting else {
        return Decision::CannotTell;
    };
    if now_ns < quiet_until(req, seen.last_rx_ns) {
        return if now_ns >= req.deadline_ns {
            Decision::Expired
        } else {
            Decision::Wait
        };
    }
    let mark = *req.mark.get_or_insert(seen.rx + waiting);
    if seen.rx.saturating_sub(seen.in_flight) >= mark {
        Decision::Drained
    } else if now_ns >= req.deadline_ns {
        Decision::Expired
    } else {
        Decision::Wait
    }
}

/// The answer to one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DrainReport {
    pub decision: Decision,
    /// From the request's arrival to the answer.
    pub waited_ms: f64,
    pub quiet_ms: f64,
    /// Frames taken from the port after the request arrived, and when the last one was (ms after
    /// the request).
    pub late: u64,
    pub last_ms: Option<f64>,
    /// The rx counter at the answer (every frame it counts has been sent or dropped when drained).
    pub rx: u64,
    /// At the last look: frames in the port's ring, frames in flight in the runtime.
    pub waiting: Option<u64>,
    pub in_flight: u64,
    /// Frames the port dropped since it opened (ring full), when it counts them.
    pub port_drops: Option<u64>,
}

impl DrainReport {
    pub fn to_json(&self) -> serde_json::Value {
        let r2 = |x: f64| (x * 100.0).round() / 100.0;
        serde_json::json!({
            "drained": self.decision == Decision::Drained,
            "waited_ms": r2(self.waited_ms), "quiet_ms": r2(self.quiet_ms),
            "late": self.late, "last_ms": self.last_ms.map(r2), "rx": self.rx,
            "waiting": self.waiting, "in_flight": self.in_flight, "port_drops": self.port_drops,
        })
    }
}

/// Requests waiting for their answer, each with its reply handle `R`.
#[derive(Debug)]
pub struct Drains<R> {
    waiting: Vec<(DrainRequest, R)>,
}

impl<R> Default for Drains<R> {
    fn default() -> Self {
        Drains { waiting: vec![] }
    }
}

impl<R> Drains<R> {
    pub fn add(&mut self, req: DrainRequest, reply: R) {
        self.waiting.push((req, reply));
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Whether any request could be answered at `now_ns` (see [`due`]).
    pub fn any_due(&self, seen: &Seen, now_ns: u64) -> bool {
        self.waiting.iter().any(|(r, _)| due(r, seen, now_ns))
    }

    /// How long from `now_ns` until a request may be answered (its quiet window over, or its
    /// deadline), with nothing in flight; None without requests. The runtime waits on its port at
    /// most this long, so an answer is not late by a whole poll period.
    pub fn wake_in_ns(&self, seen: &Seen, now_ns: u64) -> Option<u64> {
        self.waiting
            .iter()
            .map(|(r, _)| quiet_until(r, seen.last_rx_ns).min(r.deadline_ns))
            .min()
            .map(|t| t.saturating_sub(now_ns))
    }

    /// Decide every request with what was found at `now_ns`; returns the answered ones (the
    /// others keep waiting).
    pub fn settle(&mut self, seen: &Seen, now_ns: u64, rx: RxCounts) -> Vec<(R, DrainReport)> {
        let mut out = vec![];
        let mut i = 0;
        while i < self.waiting.len() {
            let decision = decide(&mut self.waiting[i].0, seen, now_ns, rx.waiting);
            if decision == Decision::Wait {
                i += 1;
                continue;
            }
            let (req, reply) = self.waiting.swap_remove(i);
            let ms = |ns: u64| ns as f64 / 1e6;
            let report = DrainReport {
                decision,
                waited_ms: ms(now_ns.saturating_sub(req.since_ns)),
                quiet_ms: ms(req.quiet_ns),
                late: seen.rx.saturating_sub(req.rx_at),
                last_ms: (seen.last_rx_ns >= req.since_ns && seen.rx > req.rx_at)
                    .then(|| ms(seen.last_rx_ns - req.since_ns)),
                rx: seen.rx,
                waiting: rx.waiting,
                in_flight: seen.in_flight,
                port_drops: rx.dropped,
            };
            out.push((reply, report));
        }
        out
    }
}

/// `quiet_ms` (required, 0..=[`MAX_QUIET_MS`]), `timeout_ms` (1..=[`MAX_TIMEOUT_MS`], default
/// [`DEFAULT_TIMEOUT_MS`]) and `flush` (0 or 1, default 0: [`DrainRequest::flush`]) from a
/// request's query string; the error names the field.
pub fn parse_query(query: &str) -> Result<(u64, u64, bool), (&'static str, String)> {
    let (mut quiet, mut timeout, mut flush) = (None, None, None);
    for kv in query.split('&').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let (field, slot, lo, hi) = match k {
            "quiet_ms" => ("quiet_ms", &mut quiet, 0, MAX_QUIET_MS),
            "timeout_ms" => ("timeout_ms", &mut timeout, 1, MAX_TIMEOUT_MS),
            "flush" => ("flush", &mut flush, 0, 1),
            _ => {
                return Err((
                    "query",
                    format!("unknown parameter {k:?} (quiet_ms, timeout_ms, flush)"),
                ))
            }
        };
        match v.parse::<u64>() {
            Ok(n) if (lo..=hi).contains(&n) && slot.is_none() => *slot = Some(n),
            _ if slot.is_some() => return Err((field, format!("{field} given twice"))),
            _ => {
                return Err((
                    field,
                    format!("{field} must be an integer {lo}..{hi}, not {v:?}"),
                ))
            }
        }
    }
    let quiet = quiet.ok_or(("quiet_ms", "quiet_ms is required".to_string()))?;
    Ok((
        quiet,
        timeout.unwrap_or(DEFAULT_TIMEOUT_MS),
        flush == Some(1),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn rx(waiting: Option<u64>) -> RxCounts {
        RxCounts {
            waiting,
            dropped: Some(0),
        }
    }

    fn seen(last_ms: u64, in_flight: u64) -> Seen {
        Seen {
            last_rx_ns: last_ms * MS,
            rx: 0,
            in_flight,
        }
    }

    #[test]
    fn drained_needs_an_empty_ring_nothing_in_flight_and_the_quiet_window() {
        let req = DrainRequest::new(100 * MS, 0, 20, 500);
        let idle = seen(40, 0); // last frame long before the request
                                // The window counts from the request, not from an older last frame.
        assert_eq!(quiet_until(&req, idle.last_rx_ns), 120 * MS);
        assert_eq!(
            decide(&mut req.clone(), &idle, 119 * MS, Some(0)),
            Decision::Wait
        );
        assert_eq!(
            decide(&mut req.clone(), &idle, 120 * MS, Some(0)),
            Decision::Drained
        );
        // Frames in the ring (the kernel's count), or in flight: not drained, however quiet.
        assert_eq!(
            decide(&mut req.clone(), &idle, 300 * MS, Some(3)),
            Decision::Wait
        );
        assert_eq!(
            decide(&mut req.clone(), &seen(40, 1), 300 * MS, Some(0)),
            Decision::Wait
        );
        // A frame taken after the request restarts the window.
        let late = seen(150, 0);
        assert_eq!(
            decide(&mut req.clone(), &late, 160 * MS, Some(0)),
            Decision::Wait
        );
        assert_eq!(
            decide(&mut req.clone(), &late, 170 * MS, Some(0)),
            Decision::Drained
        );
        // quiet 0: drained as soon as the ring is empty and nothing is in flight.
        let now = DrainRequest::new(100 * MS, 0, 0, 500);
        assert_eq!(
            decide(&mut now.clone(), &idle, 100 * MS, Some(0)),
            Decision::Drained
        );
        assert_eq!(
            decide(&mut now.clone(), &idle, 100 * MS, Some(1)),
            Decision::Wait
        );
    }

    #[test]
    fn deadline_and_unknown_ports() {
        let req = DrainRequest::new(0, 0, 20, 500);
        assert_eq!(
            decide(&mut req.clone(), &seen(0, 0), 500 * MS, Some(2)),
            Decision::Expired
        );
        assert_eq!(
            decide(&mut req.clone(), &seen(0, 4), 500 * MS, Some(0)),
            Decision::Expired
        );
        // Drained at the very check the deadline is reached: drained.
        assert_eq!(
            decide(&mut req.clone(), &seen(0, 0), 500 * MS, Some(0)),
            Decision::Drained
        );
        assert_eq!(
            decide(&mut req.clone(), &seen(0, 0), 30 * MS, None),
            Decision::CannotTell
        );
    }

    #[test]
    fn due_only_when_an_answer_is_possible() {
        let req = DrainRequest::new(0, 0, 20, 500);
        assert!(!due(&req, &seen(0, 0), 10 * MS)); // window not over: no need to ask the port
        assert!(due(&req, &seen(0, 0), 20 * MS));
        assert!(!due(&req, &seen(0, 2), 20 * MS)); // frames in flight
        assert!(!due(&req, &seen(5, 0), 20 * MS)); // a frame at 5 ms: window until 25 ms
        assert!(due(&req, &seen(0, 2), 500 * MS)); // deadline
    }

    #[test]
    fn drains_report_late_frames_and_answer_each_request_once() {
        let mut d: Drains<u32> = Drains::default();
        d.add(DrainRequest::new(0, 100, 20, 500), 1);
        d.add(DrainRequest::new(10 * MS, 103, 0, 100), 2);
        assert_eq!(d.len(), 2);
        // 6 frames after request 1 (3 after request 2), the last taken at 12 ms.
        let s = Seen {
            last_rx_ns: 12 * MS,
            rx: 106,
            in_flight: 0,
        };
        assert!(!d.any_due(&s, 11 * MS));
        assert_eq!(d.wake_in_ns(&s, 11 * MS), Some(MS)); // request 2's window ends at 12 ms
                                                         // Request 2 (quiet 0) may be answered from the last frame (12 ms) on; the ring still
                                                         // holds 1 frame then.
        assert!(d.any_due(&s, 12 * MS));
        assert!(d.settle(&s, 15 * MS, rx(Some(1))).is_empty());
        let s = Seen {
            last_rx_ns: 16 * MS,
            rx: 107,
            in_flight: 0,
        };
        let out = d.settle(&s, 17 * MS, rx(Some(0)));
        assert_eq!(out.len(), 1);
        let (who, r) = &out[0];
        assert_eq!(*who, 2);
        assert_eq!(r.decision, Decision::Drained);
        assert_eq!((r.late, r.last_ms, r.waited_ms), (4, Some(6.0), 7.0));
        // Request 1: window from the last frame (16 ms) + 20 ms.
        assert!(!d.any_due(&s, 35 * MS));
        assert!(d.settle(&s, 35 * MS, rx(Some(0))).is_empty());
        let out = d.settle(&s, 36 * MS, rx(Some(0)));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, 1);
        assert_eq!((out[0].1.decision, out[0].1.late), (Decision::Drained, 7));
        assert!(d.is_empty());
        assert_eq!(d.wake_in_ns(&s, 36 * MS), None);
        // No frame after the request: no last_ms. Past the deadline: "not drained" with what
        // was found.
        d.add(DrainRequest::new(40 * MS, 107, 20, 50), 3);
        let s = Seen {
            last_rx_ns: 16 * MS,
            rx: 107,
            in_flight: 2,
        };
        let out = d.settle(&s, 90 * MS, rx(Some(7)));
        let r = out[0].1;
        assert_eq!(r.decision, Decision::Expired);
        assert_eq!(
            (r.waiting, r.in_flight, r.late, r.last_ms),
            (Some(7), 2, 0, None)
        );
        let v = r.to_json();
        assert_eq!(v["drained"], false);
        assert_eq!(v["waiting"], 7);
    }

    #[test]
    fn a_flush_waits_for_what_came_before_its_window_ended_not_for_quiet() {
        let mut req = DrainRequest::new(100 * MS, 0, 20, 500).flushing();
        let busy = |rx: u64, in_flight: u64, last_ms: u64| Seen {
            last_rx_ns: last_ms * MS,
            rx,
            in_flight,
        };
        // Frames keep coming (the last one now): the window still ends 20 ms after the request.
        assert!(!due(&req, &busy(50, 4, 110), 110 * MS));
        assert!(due(&req, &busy(50, 4, 120), 120 * MS));
        assert_eq!(
            decide(&mut req, &busy(50, 4, 119), 119 * MS, Some(3)),
            Decision::Wait
        );
        assert_eq!(req.mark, None);
        // At 120 ms: 50 taken + 3 in the ring = mark 53; 46 of them out (4 in flight).
        assert_eq!(
            decide(&mut req, &busy(50, 4, 120), 120 * MS, Some(3)),
            Decision::Wait
        );
        assert_eq!(req.mark, Some(53));
        // Later frames do not move the mark: 60 taken, 7 in flight = 53 out.
        assert_eq!(
            decide(&mut req, &busy(60, 7, 130), 130 * MS, Some(9)),
            Decision::Drained
        );
        // One that never gets there expires at its deadline.
        let mut slow = DrainRequest::new(100 * MS, 0, 20, 500).flushing();
        assert_eq!(
            decide(&mut slow, &busy(50, 50, 120), 120 * MS, Some(0)),
            Decision::Wait
        );
        assert_eq!(
            decide(&mut slow, &busy(50, 50, 600), 600 * MS, Some(0)),
            Decision::Expired
        );
        assert_eq!(
            decide(&mut slow, &busy(50, 0, 600), 600 * MS, None),
            Decision::CannotTell
        );
    }

    #[test]
    fn query_is_validated() {
        assert_eq!(
            parse_query("quiet_ms=20"),
            Ok((20, DEFAULT_TIMEOUT_MS, false))
        );
        assert_eq!(
            parse_query("quiet_ms=0&timeout_ms=300"),
            Ok((0, 300, false))
        );
        assert_eq!(
            parse_query("quiet_ms=5&flush=1"),
            Ok((5, DEFAULT_TIMEOUT_MS, true))
        );
        for (q, field) in [
            ("", "quiet_ms"),
            ("timeout_ms=5", "quiet_ms"),
            ("quiet_ms=-1", "quiet_ms"),
            ("quiet_ms=10001", "quiet_ms"),
            ("quiet_ms=1.5", "quiet_ms"),
            ("quiet_ms=", "quiet_ms"),
            ("quiet_ms=5&quiet_ms=6", "quiet_ms"),
            ("quiet_ms=5&timeout_ms=0", "timeout_ms"),
            ("quiet_ms=5&timeout_ms=60001", "timeout_ms"),
            ("quiet_ms=5&x=1", "query"),
            ("quiet_ms=5&flush=2", "flush"),
            ("quiet_ms=5&flush=1&flush=1", "flush"),
        ] {
            let e = parse_query(q).unwrap_err();
            assert_eq!(e.0, field, "{q}: {e:?}");
        }
    }
}
