//! IPS: case directories (signatures split over packets, reordered, retransmitted, overlapping;
//! buffer bounds) in local and Redis modes and with two instances alternating; alert log
//! contents; alert-only mode; every split and adjacent reordering of a stream; config errors.

use flowstore::test_redis::TestRedis;
use flowstore::{LocalStore, RedisConfig, RedisStore};
use nf_ips::Ips;
use nfcore::harness::{
    case_dirs, load_case, run_alternating, run_frames_full, verdicts, CaseFormat, TempDir,
};
use packet::build::{FrameSpec, Transport};
use std::path::{Path, PathBuf};

fn cases() -> Vec<PathBuf> {
    let v = case_dirs("ips", CaseFormat::Json);
    assert!(v.len() >= 2);
    v
}

fn with_log(cfg: &serde_json::Value, log: &Path) -> serde_json::Value {
    let mut c = cfg.clone();
    c["alert_log"] = log.to_str().unwrap().into();
    c
}

fn read_alerts(log: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn cases_same_in_local_and_redis_modes_and_two_instances() {
    let redis = TestRedis::start().expect("redis-server");
    let tmp = TempDir::new("ips-cases");
    for dir in cases() {
        let name = dir.file_name().unwrap().to_str().unwrap().to_string();
        let case = load_case(&dir).unwrap();
        let want: Vec<String> = serde_json::from_value(case.expected["verdicts"].clone()).unwrap();
        for batch in [1, 4, 32] {
            for mode in ["local", "redis"] {
                let log = tmp.0.join(format!("{name}-{mode}-{batch}.jsonl"));
                let nf = Box::new(Ips::from_config(&with_log(&case.config, &log)).unwrap());
                let store: Box<dyn flowstore::FlowStore> = if mode == "local" {
                    Box::new(LocalStore::new())
                } else {
                    Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap())
                };
                let id = format!("ips{name}{batch}");
                let (out, nf, _) = run_frames_full(nf, store, &id, &case.frames, batch);
                let what = format!("{name} {mode} batch {batch}");
                assert_eq!(verdicts(&out), want, "{what}");
                let st = nf.stats();
                for (k, v) in case.expected["counters"].as_object().unwrap() {
                    assert_eq!(&st[k], v, "{what}: counter {k} in {st}");
                }
                let alerts = read_alerts(&log);
                let exp = case.expected["alerts"].as_array().unwrap();
                assert_eq!(alerts.len(), exp.len(), "{what}: {alerts:?}");
                for (a, e) in alerts.iter().zip(exp) {
                    for (k, v) in e.as_object().unwrap() {
                        assert_eq!(&a[k], v, "{what}: alert field {k}: {a}");
                    }
                    assert_eq!(a["action"], "drop");
                }
            }
        }
        let log = tmp.0.join(format!("{name}-alt.jsonl"));
        let cfg = with_log(&case.config, &log);
        let alt = run_alternating(
            || {
                let s = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
                (Box::new(Ips::from_config(&cfg).unwrap()), Box::new(s))
            },
            &format!("ipsalt{name}"),
            &case.frames,
        );
        assert_eq!(verdicts(&alt), want, "{name} two instances alternating");
        assert_eq!(
            read_alerts(&log).len(),
            case.expected["alerts"].as_array().unwrap().len(),
            "{name}: alerts of both instances"
        );
    }
}

#[test]
fn alert_only_mode_forwards_and_logs() {
    let tmp = TempDir::new("ips-alert");
    let dir = cases().into_iter().find(|d| d.ends_with("split")).unwrap();
    let case = load_case(&dir).unwrap();
    let log = tmp.0.join("a.jsonl");
    let mut cfg = with_log(&case.config, &log);
    cfg["action"] = "alert".into();
    let (out, nf, _) = run_frames_full(
        Box::new(Ips::from_config(&cfg).unwrap()),
        Box::new(LocalStore::new()),
        "ipsa",
        &case.frames,
        8,
    );
    let v = verdicts(&out);
    // Only the packet of a connection the IPS never saw open is dropped.
    let dropped: Vec<usize> = (0..v.len()).filter(|i| v[*i] == "drop").collect();
    assert_eq!(dropped, vec![10]);
    assert_eq!(nf.stats()["alerts"], 3);
    let alerts = read_alerts(&log);
    assert_eq!(alerts.len(), 3);
    assert!(alerts
        .iter()
        .all(|a| a["action"] == "alert" && a["msg"] == "ATTACK in stream"));
}

/// Frames of one TCP connection whose client stream is `data`, cut at `cuts`, with the data
/// segments in `order`.
fn stream_frames(data: &[u8], cuts: &[usize], order: &[usize]) -> Vec<(u64, Vec<u8>)> {
    let (c, s) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    let tcp = |seq, flags| Transport::Tcp { seq, ack: 0, flags };
    let mut out = vec![FrameSpec::new(c, s, 1234, 80, tcp(999, packet::TCP_SYN)).build()];
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(data.len());
    let segs: Vec<Vec<u8>> = bounds
        .windows(2)
        .map(|w| {
            let mut f = FrameSpec::new(c, s, 1234, 80, tcp(1000 + w[0] as u32, packet::TCP_ACK));
            f.payload = &data[w[0]..w[1]];
            f.build()
        })
        .collect();
    for i in order {
        out.push(segs[*i].clone());
    }
    out.into_iter()
        .enumerate()
        .map(|(i, f)| (i as u64 * 1_000_000, f))
        .collect()
}

#[test]
fn every_split_and_adjacent_reordering_of_a_signature_is_caught() {
    let redis = TestRedis::start().expect("redis-server");
    let cfg = serde_json::json!({"signatures": [{"id": 1, "content": "MALWARE-SIG"}], "alert_log": "/dev/null"});
    let clean = b"0123456789abcdefghijMALWARE-SIx0123456789".to_vec();
    let mut bad = clean.clone();
    bad[20..31].copy_from_slice(b"MALWARE-SIG");
    let mut runs = 0;
    for a in 1..bad.len() - 1 {
        for b in [a + 1, a + 5, a + 11] {
            if b >= bad.len() {
                continue;
            }
            for order in [[0, 1, 2], [1, 0, 2], [0, 2, 1], [2, 1, 0]] {
                for (data, expect_block) in [(&bad, true), (&clean, false)] {
                    let frames = stream_frames(data, &[a, b], &order);
                    let store: Box<dyn flowstore::FlowStore> = if runs % 8 == 0 {
                        Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap())
                    } else {
                        Box::new(LocalStore::new())
                    };
                    runs += 1;
                    let (out, nf, _) = run_frames_full(
                        Box::new(Ips::from_config(&cfg).unwrap()),
                        store,
                        &format!("ipsp{runs}"),
                        &frames,
                        1 + runs % 3,
                    );
                    let st = nf.stats();
                    let what = format!("cuts {a},{b} order {order:?} block {expect_block}");
                    if expect_block {
                        assert_eq!(st["alerts"], 1, "{what}");
                        // The receiver never gets the whole stream: some segment is dropped.
                        assert!(out.iter().any(|o| o.is_none()), "{what}");
                    } else {
                        assert_eq!(st["alerts"], 0, "{what}");
                        assert!(out.iter().all(|o| o.is_some()), "{what}");
                        assert_eq!(
                            st["scanned_bytes"],
                            data.len() as u64,
                            "{what}: each byte once"
                        );
                    }
                }
            }
        }
    }
    assert!(runs > 500);
}

#[test]
fn largest_signature_set_builds_and_matches_case_insensitively() {
    // 64 KiB of distinct signatures, the configured maximum.
    let sigs: Vec<_> = (0..256)
        .map(|i| {
            let body: String = (0..252)
                .map(|k| (b'a' + ((i * 7 + k * 13 + k / 5) % 26) as u8) as char)
                .collect();
            serde_json::json!({"id": i, "content": format!("{i:04}{body}")})
        })
        .collect();
    let cfg = serde_json::json!({"signatures": sigs, "alert_log": "/dev/null", "nocase": true,
                                  "action": "alert"});
    let target = cfg["signatures"][17]["content"]
        .as_str()
        .unwrap()
        .to_ascii_uppercase();
    let frames = stream_frames(format!("..{target}..").as_bytes(), &[100], &[0, 1]);
    let (_, nf, _) = run_frames_full(
        Box::new(Ips::from_config(&cfg).unwrap()),
        Box::new(LocalStore::new()),
        "ipsbig",
        &frames,
        4,
    );
    assert!(nf.stats()["automaton_states"].as_u64().unwrap() > 10_000);
    assert_eq!(nf.stats()["alerts"], 1);
}

#[test]
fn config_errors_name_the_field() {
    for (bad, field) in [
        (serde_json::json!({}), "signatures"),
        (serde_json::json!({"signatures": []}), "signatures"),
        (
            serde_json::json!({"signatures": [{"id": 1}]}),
            "signatures[0]",
        ),
        (
            serde_json::json!({"signatures": [{"id": 1, "content": ""}]}),
            "signatures[0]",
        ),
        (
            serde_json::json!({"signatures": [{"id": 1, "hex": "abc"}]}),
            "signatures[0].hex",
        ),
        (
            serde_json::json!({"signatures": [{"id": 1, "content": "a", "hex": "61"}]}),
            "signatures[0]",
        ),
        (
            serde_json::json!({"signatures": [{"content": "a"}]}),
            "signatures[0].id",
        ),
        (
            serde_json::json!({"signatures": [{"id": 1, "content": "a"}, {"id": 1, "content": "b"}]}),
            "signatures[1].id",
        ),
        (
            serde_json::json!({"signatures": [{"id": 1, "content": "a", "sid": 2}]}),
            "sid",
        ),
        (
            serde_json::json!({"signatures": [{"id": 1, "content": "a"}], "action": "block"}),
            "action",
        ),
        (
            serde_json::json!({"signatures": [{"id": 1, "content": "a"}], "alert_log": "/nonexistent/x.log"}),
            "alert_log",
        ),
        (
            serde_json::json!({"signatures": [{"id": 1, "content": "a"}], "window": 0}),
            "window",
        ),
        (
            serde_json::json!({"signatures": [{"id": 1, "content": "a"}], "nocase": "yes"}),
            "nocase",
        ),
        (
            serde_json::json!({"signatures": (0..70)
                .map(|i| serde_json::json!({"id": i, "content": "x".repeat(1000)}))
                .collect::<Vec<_>>()}),
            "total content",
        ),
    ] {
        let e = Ips::from_config(&bad).err().unwrap();
        assert!(e.contains(field), "{bad}: {e}");
    }
}

#[test]
fn idle_expiry_removes_record_and_buffer_once_with_two_instances() {
    use nfcore::harness::recording_runtime;
    use nfcore::runtime::TimeSource;
    let redis = TestRedis::start().expect("redis-server");
    let cfg = serde_json::json!({"signatures": [{"id": 1, "content": "zzz"}], "alert_log": "/dev/null",
                                  "idle_timeout_ms": 1000});
    let mk = |frames| {
        let s = Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap());
        let nf = Box::new(Ips::from_config(&cfg).unwrap());
        recording_runtime(nf, s, "ipst", frames, 4, 1_000_000)
    };
    // SYN, then two segments ahead of the stream (buffered in the tier, one slot each).
    let frames = stream_frames(b"hello world", &[3, 6], &[1, 2]);
    let mut a = mk(frames.clone());
    let mut b = mk(vec![]);
    a.run(
        TimeSource::Packets,
        &std::sync::atomic::AtomicBool::new(false),
    )
    .unwrap();
    assert_eq!(a.nf().stats()["ooo_buffered"], 2);
    let keys = flowstore::KeySpace::new("ipst").unwrap();
    let p = packet::Parsed::new_checked(&frames[0].1).unwrap();
    let h = p.flow_key().bidirectional_hash();
    let both = [
        keys.flow(h, nf_ips::TABLE),
        keys.flow(h, &nf_ips::ooo_table(0, 0)),
        keys.flow(h, &nf_ips::ooo_table(0, 1)),
    ];
    let mut vals = vec![];
    a.store_mut().get_many(&both, &mut vals).unwrap();
    assert!(
        vals.iter().all(|v| v.is_some()),
        "record and buffer in the tier"
    );
    let late = 100_000_000_000;
    let fired =
        b.fire_timers(late).unwrap() + a.fire_timers(late).unwrap() + b.fire_timers(late).unwrap();
    assert_eq!(fired, 1);
    a.store_mut().get_many(&both, &mut vals).unwrap();
    assert!(vals.iter().all(|v| v.is_none()), "both removed");
}

/// After a move the new instance's record can lag: the old instance scanned and forwarded bytes
/// whose record update the new one never saw. The receiver's ACK for those bytes resynchronises
/// the direction, so the stream does not stall and later bytes are scanned again.
#[test]
fn a_lagging_record_resyncs_on_the_receivers_ack_and_scanning_resumes() {
    let (c, s) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    let cfg = serde_json::json!({"signatures": [{"id": 1, "content": "MALWARE-SIG"}], "alert_log": "/dev/null"});
    let data = |seq: u32, ack: u32, payload: &'static [u8]| {
        let mut f = FrameSpec::new(
            c,
            s,
            1234,
            80,
            Transport::Tcp {
                seq,
                ack,
                flags: packet::TCP_ACK,
            },
        );
        f.payload = payload;
        f.build()
    };
    let to_client = |seq: u32, ack: u32, flags: u8| {
        FrameSpec::new(s, c, 80, 1234, Transport::Tcp { seq, ack, flags }).build()
    };
    let syn = || {
        let t = Transport::Tcp {
            seq: 999,
            ack: 0,
            flags: packet::TCP_SYN,
        };
        FrameSpec::new(c, s, 1234, 80, t).build()
    };
    // One packet per batch, 1 ms apart, through a fresh IPS and local store: verdicts and stats.
    let run = |frames: Vec<Vec<u8>>| {
        let frames: Vec<(u64, Vec<u8>)> = frames
            .into_iter()
            .enumerate()
            .map(|(i, f)| (i as u64 * 1_000_000, f))
            .collect();
        let (out, nf, _) = run_frames_full(
            Box::new(Ips::from_config(&cfg).unwrap()),
            Box::new(LocalStore::new()),
            "ipsr",
            &frames,
            1,
        );
        (verdicts(&out), nf.stats())
    };
    let (v, st) = run(vec![
        syn(),
        to_client(4999, 1000, packet::TCP_SYN | packet::TCP_ACK),
        data(1000, 5000, b""),
        // Bytes 1000..1010 went through the OLD instance: this one never saw them. Next segment:
        data(1010, 5000, b"0123456789"), // ahead of the lagging record: buffered, forwarded
        to_client(5000, 1020, packet::TCP_ACK), // the server has everything up to 1020
        data(1020, 5000, b"xxMALWARE-SIGxx"), // in order again: scanned, caught
    ]);
    assert_eq!(
        v,
        vec!["forward", "forward", "forward", "forward", "forward", "drop"]
    );
    assert_eq!(st["resyncs"], 1, "{st}");
    assert_eq!(st["resync_gap_bytes"], 10, "{st}");
    assert_eq!(st["alerts"], 1, "{st}");
    assert_eq!(st["ooo_overflow"], 0, "{st}");
    // An ACK that does not pass the expected sequence number changes nothing (normal traffic).
    let (_, st) = run(vec![
        syn(),
        to_client(4999, 1000, packet::TCP_SYN | packet::TCP_ACK),
        data(1000, 5000, b"hello"),
        to_client(5000, 1005, packet::TCP_ACK),
    ]);
    assert_eq!(st["resyncs"], 0);
}

/// One client stream of `n` full-size segments (1448 bytes) after the SYN, with `sig` written at
/// byte `sig_at`; the segments in `order` (indexes), 1 ms apart.
fn window_frames(
    n: usize,
    order: &[usize],
    sig: Option<(&[u8], usize)>,
) -> (Vec<(u64, Vec<u8>)>, usize) {
    const MSS: usize = 1448;
    let mut data: Vec<u8> = (0..n * MSS).map(|i| b'a' + (i % 23) as u8).collect();
    if let Some((s, at)) = sig {
        data[at..at + s.len()].copy_from_slice(s);
    }
    let cuts: Vec<usize> = (1..n).map(|i| i * MSS).collect();
    (stream_frames(&data, &cuts, order), data.len())
}

/// A hole before a whole TCP window (one segment lost before the IPS, e.g. its port ring was
/// full; the sender keeps sending its window): every segment behind the hole is held and
/// forwarded, none dropped (a drop behind the hole would cost the sender a retransmission
/// timeout), the buffer is not read while it grows (one write per segment), and
/// once the hole is filled every byte is scanned once, in order. In Redis and local mode.
#[test]
fn a_hole_before_a_whole_window_holds_every_segment_and_scans_it_once_filled() {
    let redis = TestRedis::start().expect("redis-server");
    let cfg = serde_json::json!({"signatures": [{"id": 1, "content": "MALWARE-SIG"}], "alert_log": "/dev/null"});
    let n = 700;
    let order: Vec<usize> = (1..n).chain([0]).collect(); // segment 0 lost, retransmitted last
    for redis_mode in [true, false] {
        let (frames, total) = window_frames(n, &order, None);
        let store: Box<dyn flowstore::FlowStore> = if redis_mode {
            Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap())
        } else {
            Box::new(LocalStore::new())
        };
        let (out, nf, store) = run_frames_full(
            Box::new(Ips::from_config(&cfg).unwrap()),
            store,
            "ipsw",
            &frames,
            32,
        );
        let st = nf.stats();
        assert!(
            out.iter().all(|o| o.is_some()),
            "every segment forwarded: {st}"
        );
        assert_eq!(st["ooo_overflow"], 0, "{st}");
        assert_eq!(st["ooo_buffered"], (n - 1) as u64, "{st}");
        assert_eq!(st["reassembled"], (n - 1) as u64, "{st}");
        assert_eq!(st["scanned_bytes"], total as u64, "each byte once: {st}");
        // The record is read with its batch; only filling the hole reads the buffer (once).
        assert!(store.stats().unplanned_reads <= 1, "{:?}", store.stats());
    }
    // A signature in the held bytes (across two segments behind the hole) is caught once the
    // hole is filled: the filling segment is dropped, so the receiver cannot deliver any of it.
    let (frames, _) = window_frames(n, &order, Some((b"MALWARE-SIG", 349 * 1448 - 5)));
    let (out, nf, _) = run_frames_full(
        Box::new(Ips::from_config(&cfg).unwrap()),
        Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap()),
        "ipsx",
        &frames,
        32,
    );
    assert_eq!(nf.stats()["alerts"], 1, "{}", nf.stats());
    assert!(
        out.last().unwrap().is_none(),
        "the segment that fills the hole is dropped"
    );
}

/// Two holes in one window: filling the first delivers up to the second and keeps the rest in
/// one slot; filling the second delivers everything; no slot is left in the tier.
#[test]
fn two_holes_deliver_in_two_steps_and_leave_no_slot_behind() {
    let redis = TestRedis::start().expect("redis-server");
    let cfg =
        serde_json::json!({"signatures": [{"id": 1, "content": "zzz"}], "alert_log": "/dev/null"});
    let n = 400;
    // 0 and 200 lost; 0 comes back after the window, 200 after that.
    let order: Vec<usize> = (1..200).chain(201..n).chain([0, 200]).collect();
    let (frames, total) = window_frames(n, &order, None);
    let (out, nf, mut store) = run_frames_full(
        Box::new(Ips::from_config(&cfg).unwrap()),
        Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap()),
        "ipsh",
        &frames,
        8,
    );
    let st = nf.stats();
    assert!(out.iter().all(|o| o.is_some()), "{st}");
    assert_eq!(st["scanned_bytes"], total as u64, "{st}");
    assert_eq!(st["reassembled"], (n - 2) as u64, "{st}");
    let keys = flowstore::KeySpace::new("ipsh").unwrap();
    let h = packet::Parsed::new_checked(&frames[0].1)
        .unwrap()
        .flow_key()
        .bidirectional_hash();
    let slots: Vec<_> = (0..n as u16)
        .map(|i| keys.flow(h, &nf_ips::ooo_table(0, i)))
        .collect();
    let mut vals = vec![];
    store.get_many(&slots, &mut vals).unwrap();
    assert!(vals.iter().all(|v| v.is_none()), "every slot deleted");
}

/// Two instances handle segments of one connection at the same instant (StatelessNF: any
/// instance may take any packet): instance A has read the connection's record and not written
/// it yet when instance B runs a whole batch. The segments "ATT" (A) and "ACK" (B) together make
/// the signature. B's segment is ahead of the stream: buffered and forwarded. A's write of the
/// record is conditional on what it read, so it does not apply and A's segment does not leave;
/// its retransmission then completes the signature in the buffer: caught. (With a last-write-
/// wins record A's write overwrote B's: both segments left, "ATTACK" reached the receiver and
/// was never scanned whole.) Real Redis, real runtimes on two threads.
#[test]
fn two_instances_at_the_same_instant_never_lose_an_update() {
    use nfcore::harness::gated::{Gate, GatedStore};
    use nfcore::harness::{recording_runtime, RecordingDevice};
    use nfcore::runtime::Runtime;
    let redis = TestRedis::start().expect("redis-server");
    let tmp = TempDir::new("ips-race");
    let log = tmp.0.join("alerts.jsonl");
    let cfg = serde_json::json!({"signatures": [{"id": 7, "content": "ATTACK"}],
                                 "alert_log": log.to_str().unwrap()});
    let (c, s) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    let frame = |t_ms: u64, out: bool, seq: u32, flags: u8, payload: &[u8]| {
        let (a, b, pa, pb) = if out {
            (c, s, 1234, 80)
        } else {
            (s, c, 80, 1234)
        };
        let mut f = FrameSpec::new(a, b, pa, pb, Transport::Tcp { seq, ack: 0, flags });
        f.payload = payload;
        (t_ms * 1_000_000, f.build())
    };
    let ack = packet::TCP_ACK;
    let gate = Gate::new();
    let store = |gated: bool| -> Box<dyn flowstore::FlowStore> {
        let r = Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap());
        if gated {
            Box::new(GatedStore {
                inner: r,
                gate: gate.clone(),
            })
        } else {
            r
        }
    };
    let mk = |gated| {
        let nf = Box::new(Ips::from_config(&cfg).unwrap());
        recording_runtime(nf, store(gated), "ipsrace", vec![], 1, 1)
    };
    let one = |rt: &mut Runtime<RecordingDevice>, f: &(u64, Vec<u8>)| {
        *rt.device_mut() = RecordingDevice::new(vec![f.clone()]);
        rt.step(f.0).expect("step");
        rt.device_mut().out.pop().flatten()
    };
    let (mut a, mut b) = (mk(true), mk(false));
    for f in [
        frame(0, true, 999, packet::TCP_SYN, b""),
        frame(1, false, 4999, packet::TCP_SYN | ack, b""),
        frame(2, true, 1000, ack, b""),
    ] {
        assert!(one(&mut b, &f).is_some());
    }
    let s1 = frame(3, true, 1000, ack, b"ATT");
    let s2 = frame(3, true, 1003, ack, b"ACK");
    gate.arm();
    let held = {
        let s1 = s1.clone();
        std::thread::spawn(move || {
            let out = one(&mut a, &s1);
            (a, out)
        })
    };
    gate.wait_held();
    assert!(
        one(&mut b, &s2).is_some(),
        "B: buffered ahead of the stream, forwarded"
    );
    gate.release();
    let (mut a, out) = held.join().unwrap();
    assert!(
        out.is_none(),
        "A's record write lost: its segment must not leave"
    );
    let st = a.stats();
    assert_eq!(
        st.claim_dropped.load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    // The sender retransmits "ATT" (to either instance): the buffered "ACK" follows it.
    assert!(
        one(&mut a, &frame(200, true, 1000, ack, b"ATT")).is_none(),
        "caught"
    );
    let alerts = read_alerts(&log);
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert_eq!(alerts[0]["sig_id"], 7);
    // Blocked both ways from now on, on either instance.
    assert!(one(&mut b, &frame(201, false, 5000, ack, b"ok")).is_none());

    // The other way round, on a new connection: A (held) buffers "ACK" ahead of the stream in a
    // slot of its own while B delivers "ATT" in order. A's record write loses (its segment
    // stays), the slot it claimed is counted by no record: the next segment buffered there
    // loses its claim (dropped, the sender retransmits; its batch's record counts the slot from
    // then on), and its retransmission is buffered at the next slot. Nothing unscanned leaves.
    let frame = |t_ms: u64, out: bool, seq: u32, flags: u8, payload: &[u8]| {
        let (a, b, pa, pb) = if out {
            (c, s, 1235, 80)
        } else {
            (s, c, 80, 1235)
        };
        let mut f = FrameSpec::new(a, b, pa, pb, Transport::Tcp { seq, ack: 0, flags });
        f.payload = payload;
        (t_ms * 1_000_000, f.build())
    };
    assert!(one(&mut b, &frame(300, true, 999, packet::TCP_SYN, b"")).is_some());
    gate.arm();
    let held = {
        let f = frame(301, true, 1003, ack, b"ACK");
        std::thread::spawn(move || {
            let out = one(&mut a, &f);
            (a, out)
        })
    };
    gate.wait_held();
    assert!(one(&mut b, &frame(301, true, 1000, ack, b"ATT")).is_some());
    gate.release();
    let (mut a, out) = held.join().unwrap();
    assert!(out.is_none(), "A's record write lost");
    let ahead = frame(302, true, 1006, ack, b"xyz");
    assert!(
        one(&mut a, &ahead).is_none(),
        "the orphan slot was in the way"
    );
    assert_eq!(a.nf().stats()["lost_races"], 1, "{}", a.nf().stats());
    assert!(
        one(&mut a, &ahead).is_some(),
        "buffered at the next slot, forwarded"
    );
    assert!(
        one(&mut b, &frame(303, true, 1003, ack, b"ACK")).is_none(),
        "fills the gap: caught"
    );
    assert_eq!(read_alerts(&log).len(), 2);
}

/// `PUT /config` on a running IPS sharing Redis: a new signature set applies to a live
/// connection from its next segment (its automata restart), counters are kept, a bad config is
/// 400 naming the field and changes nothing.
#[test]
fn signatures_change_in_place_on_a_live_connection() {
    use nfcore::harness::{feed, reconfigure, recording_runtime};
    let redis = TestRedis::start().expect("redis-server");
    let store = Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap());
    let old = serde_json::json!({"signatures": [{"id": 1, "content": "evil"}]});
    let new = serde_json::json!({"signatures": [{"id": 2, "content": "BAD"}]});
    let nf = Box::new(Ips::from_config(&old).unwrap());
    let mut rt = recording_runtime(nf, store, "ipscfg", vec![], 8, 1_000_000);
    let data = b"one BAD two BAD three";
    let frames = stream_frames(data, &[4, 11], &[0, 1, 2]);
    let out = feed(&mut rt, frames[..2].to_vec());
    assert!(
        out.iter().all(|o| o.is_some()),
        "no match yet: BAD is not a signature"
    );
    let e = reconfigure(&mut rt, &serde_json::json!({"signatures": []})).unwrap_err();
    assert_eq!(e.status, 400);
    assert!(e.message.contains("signatures"), "{}", e.message);
    // Still the old set: the second segment passes.
    let out = feed(&mut rt, frames[2..3].to_vec());
    assert!(out[0].is_some());
    reconfigure(&mut rt, &new).expect("in place");
    let out = feed(&mut rt, frames[3..].to_vec());
    assert!(
        out[0].is_none(),
        "the new signature matches in the live connection"
    );
    let st = rt.nf().stats();
    assert_eq!(st["signature_set_changed"], 1, "{st}");
    assert!(st["alerts"].as_u64().unwrap() >= 1, "{st}");
}
