//! Flow monitor: counters per connection in local and Redis modes, and with two instances.

use flowstore::test_redis::TestRedis;
use flowstore::{FlowStore, KeySpace, LocalStore, RedisConfig, RedisStore};
use nf_monitor::{FlowRecord, Monitor};
use nfcore::harness::{case, run_alternating, run_frames_depth, run_frames_full, verdicts};
use packet::Parsed;

/// The record of the flow of packet `i` in either layout (None: not in the tier).
fn record(store: &mut dyn FlowStore, nf_id: &str, frame: &[u8]) -> Option<FlowRecord> {
    let ks = KeySpace::new(nf_id).unwrap();
    let key = Monitor::key(&ks, &Parsed::new_checked(frame).unwrap());
    let mut out = vec![];
    store
        .get_many(std::slice::from_ref(&key), &mut out)
        .unwrap();
    match out[0].as_deref() {
        Some(b) => FlowRecord::decode(b),
        None => {
            let h = store.hash_get_all(&key).unwrap();
            (!h.is_empty()).then(|| FlowRecord::from_hash(&h).unwrap())
        }
    }
}

fn check(store: &mut dyn FlowStore, nf_id: &str, case: &nfcore::harness::Case, what: &str) {
    for f in case.expected["flows"].as_array().unwrap() {
        let i = f["packet"].as_u64().unwrap() as usize;
        let r = record(store, nf_id, &case.frames[i].1).unwrap();
        assert_eq!(
            r.pkts_fwd + r.pkts_rev,
            f["pkts"].as_u64().unwrap(),
            "{what}: flow of packet {i}"
        );
        assert_eq!(
            r.bytes_fwd + r.bytes_rev,
            f["bytes"].as_u64().unwrap(),
            "{what}: flow of packet {i}"
        );
    }
}

#[test]
fn counters_same_in_all_modes() {
    let mut case = case("monitor", "basic");
    counters_same_in_all_modes_with(&case);
    // The counters as hash increments, flushed with every batch: the same counts.
    case.config["counters"] = "increments".into();
    counters_same_in_all_modes_with(&case);
}

/// Write-behind (`flush_ms` > 0): packets leave before their counts are written; the counts are
/// complete after a clean stop, and a crash loses only what was not flushed.
#[test]
fn write_behind_flushes_on_interval_and_release() {
    let redis = TestRedis::start().expect("redis-server");
    let case = case("monitor", "basic");
    let mut cfg = case.config.clone();
    cfg["counters"] = "increments".into();
    cfg["flush_ms"] = 60_000.into();
    let want: Vec<String> = serde_json::from_value(case.expected["verdicts"].clone()).unwrap();
    for local in [true, false] {
        let store: Box<dyn FlowStore> = if local {
            Box::new(LocalStore::new())
        } else {
            Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap())
        };
        let nf = Box::new(Monitor::from_config(&cfg).unwrap());
        let (out, mut nf, mut store) = run_frames_full(nf, store, "mwb", &case.frames, 2);
        assert_eq!(verdicts(&out), want);
        // Flushed at the first packet only (the interval has not passed since): a crash now
        // would lose the rest.
        assert_eq!(nf.stats()["flushes"], 1);
        assert!(nf.stats()["pending_flows"].as_u64().unwrap() > 0);
        let first = &case.frames[0].1;
        let r = record(store.as_mut(), "mwb", first).unwrap();
        assert_eq!(r.pkts_fwd + r.pkts_rev, 1);
        nf.release(store.as_mut(), &KeySpace::new("mwb").unwrap())
            .unwrap();
        assert_eq!(nf.stats()["pending_flows"], 0);
        check(store.as_mut(), "mwb", &case, "write-behind after release");
        // The flows' timers are in the tier.
        let tm = KeySpace::new("mwb").unwrap().global("timers");
        assert_eq!(
            store.timer_claim_due(&tm, u64::MAX / 2, 100).unwrap().len(),
            2
        );
    }
    for bad in [
        serde_json::json!({"counters": "deltas"}),
        serde_json::json!({"flush_ms": 5}),
        serde_json::json!({"counters": "increments", "flush_ms": -1}),
    ] {
        let e = Monitor::from_config(&bad).err().unwrap();
        assert!(
            e.contains("counters") || e.contains("flush_ms"),
            "{bad}: {e}"
        );
    }
}

fn counters_same_in_all_modes_with(case: &nfcore::harness::Case) {
    let redis = TestRedis::start().expect("redis-server");
    let want: Vec<String> = serde_json::from_value(case.expected["verdicts"].clone()).unwrap();
    let mk = || Box::new(Monitor::from_config(&case.config).unwrap());
    for batch in [1, 3, 32] {
        let (out, _, mut store) =
            run_frames_full(mk(), Box::new(LocalStore::new()), "m", &case.frames, batch);
        assert_eq!(verdicts(&out), want);
        assert_eq!(
            out.iter().flatten().collect::<Vec<_>>(),
            case.frames.iter().map(|f| &f.1).collect::<Vec<_>>()
        );
        check(store.as_mut(), "m", case, "local");
        let id = format!("m{batch}");
        let s = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
        let (out, _, mut store) = run_frames_full(mk(), Box::new(s), &id, &case.frames, batch);
        assert_eq!(verdicts(&out), want);
        check(store.as_mut(), &id, case, "redis");
        // Pipelined: up to 8 batches in flight.
        let id = format!("mp{batch}");
        let s = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
        let (out, _, mut store) = run_frames_depth(mk(), Box::new(s), &id, &case.frames, batch, 8);
        assert_eq!(verdicts(&out), want);
        check(store.as_mut(), &id, case, "redis pipelined");
    }
    let conn = || RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
    let out = run_alternating(|| (mk(), Box::new(conn())), "malt", &case.frames);
    assert_eq!(verdicts(&out), want);
    check(&mut conn(), "malt", case, "alternating");
}

/// Tier down: fail-closed drops and counts, fail-open forwards unprocessed; both reconnect.
#[test]
fn tier_failure_follows_fail_mode_and_recovers_counters() {
    use nfcore::config::RuntimeOptions;
    use nfcore::harness::RecordingDevice;
    use nfcore::runtime::Runtime;
    use nfcore::FailMode;
    use std::sync::atomic::Ordering::Relaxed;
    let case = case("monitor", "basic");
    for mode in [FailMode::Closed, FailMode::Open] {
        let mut redis = TestRedis::start().expect("redis-server");
        let s = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
        let opts = RuntimeOptions {
            batch_size: 2,
            fail_mode: mode,
            timer_interval_ms: 1000,
            owner_cache: false,
        };
        let nf = Box::new(Monitor::from_config(&case.config).unwrap());
        let dev = RecordingDevice::new(case.frames.clone());
        let mut rt = Runtime::new(nf, Box::new(s), dev, KeySpace::new("mf").unwrap(), opts);
        rt.init().unwrap();
        rt.step(0).unwrap();
        redis.kill();
        rt.step(0).unwrap();
        rt.step(0).unwrap();
        let st = rt.stats();
        let out = &rt.device().out;
        assert!(out[0].is_some() && out[1].is_some(), "before the failure");
        assert!(st.store_errors.load(Relaxed) >= 2);
        match mode {
            FailMode::Closed => {
                assert!(out[2..].iter().all(|o| o.is_none()));
                assert_eq!(st.fail_closed_dropped.load(Relaxed), 3);
            }
            FailMode::Open => {
                assert!(out[2..].iter().all(|o| o.is_some()));
                assert_eq!(st.fail_open_forwarded.load(Relaxed), 3);
            }
        }
    }
}

/// `PUT /config`: the idle timeout changes in place (counters kept); the counters mode cannot
/// (400 naming `counters`), nor an invalid config (400 naming the field), both changing nothing.
#[test]
fn idle_timeout_changes_in_place_counters_mode_is_refused() {
    use nfcore::harness::{feed, reconfigure, recording_runtime};
    let c = case("monitor", "basic");
    let nf =
        Box::new(Monitor::from_config(&serde_json::json!({"idle_timeout_ms": 30000})).unwrap());
    let mut rt = recording_runtime(
        nf,
        Box::new(LocalStore::new()),
        "moncfg",
        vec![],
        8,
        1_000_000,
    );
    feed(&mut rt, c.frames.clone());
    let flows = rt.nf().stats()["new_flows"].clone();
    assert!(flows.as_u64().unwrap() > 0);
    reconfigure(&mut rt, &serde_json::json!({"idle_timeout_ms": 5000})).expect("in place");
    for (bad, field) in [
        (serde_json::json!({"counters": "increments"}), "counters"),
        (serde_json::json!({"idle_timeout_ms": 0}), "idle_timeout_ms"),
    ] {
        let e = reconfigure(&mut rt, &bad).unwrap_err();
        assert_eq!(e.status, 400);
        assert!(e.message.starts_with(field), "{}", e.message);
    }
    assert_eq!(rt.nf().stats()["new_flows"], flows, "counters kept");
}
