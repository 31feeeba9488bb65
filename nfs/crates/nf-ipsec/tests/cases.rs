//! Case directories under nfs/tests-data/ipsec: gateway A (config.json) protects packets.json
//! toward gateway B (peer.json), B decapsulates them (and rejects the replays); in local and
//! Redis modes, several batch sizes, and as two instances of each gateway sharing one Redis and
//! processing packets alternately.

use flowstore::test_redis::TestRedis;
use flowstore::{FlowStore, LocalStore, RedisConfig, RedisStore};
use nf_ipsec::Ipsec;
use nfcore::harness::{case_dirs, load_case, run_alternating, run_frames, verdicts, CaseFormat};
use serde_json::Value;

type Frames = Vec<(u64, Vec<u8>)>;

fn is_esp(f: &[u8]) -> bool {
    packet::Parsed::new_checked(f).is_ok_and(|p| p.proto == nf_ipsec::esp::PROTO_ESP)
}

/// B's input: A's forwarded frames, then the replayed ones.
fn peer_input(a_out: &[Option<Vec<u8>>], frames: &Frames, replays: &[usize]) -> Frames {
    let fwd: Frames = a_out
        .iter()
        .zip(frames)
        .filter_map(|(o, (ts, _))| o.clone().map(|f| (*ts, f)))
        .collect();
    let mut v = fwd.clone();
    for &i in replays {
        v.push(fwd[i].clone());
    }
    v
}

/// Check one A/B run against the case; `what` names the mode for messages.
fn check(
    what: &str,
    case_frames: &Frames,
    expected: &Value,
    a_out: &[Option<Vec<u8>>],
    b_in: &Frames,
    b_out: &[Option<Vec<u8>>],
) {
    let want: Vec<String> = serde_json::from_value(expected["verdicts"].clone()).unwrap();
    assert_eq!(verdicts(a_out), want, "{what}: gateway A verdicts");
    let esp: Vec<bool> = serde_json::from_value(expected["esp"].clone()).unwrap();
    let fwd: Vec<&Vec<u8>> = a_out.iter().flatten().collect();
    assert_eq!(
        fwd.iter().map(|f| is_esp(f)).collect::<Vec<_>>(),
        esp,
        "{what}: which of A's frames are ESP"
    );
    let want_b: Vec<String> = serde_json::from_value(expected["peer_verdicts"].clone()).unwrap();
    assert_eq!(verdicts(b_out), want_b, "{what}: gateway B verdicts");
    // Every ESP frame B forwards is exactly A's input frame (round trip, link layer included).
    let originals: Vec<&Vec<u8>> = a_out
        .iter()
        .zip(case_frames)
        .filter(|(o, _)| o.is_some())
        .map(|(_, (_, f))| f)
        .collect();
    for (i, (o, (_, inp))) in b_out.iter().zip(b_in).enumerate().take(fwd.len()) {
        if let Some(out) = o {
            if is_esp(inp) {
                assert_eq!(out, originals[i], "{what}: frame {i} after the round trip");
                assert!(packet::build::checksums_valid(out));
            } else {
                assert_eq!(out, inp, "{what}: bypassed frame {i} unchanged");
            }
        }
    }
}

#[test]
fn cases_in_local_and_redis_modes_and_two_instances() {
    let redis = TestRedis::start().expect("redis-server");
    let mut run = 0;
    let dirs = case_dirs("ipsec", CaseFormat::Json);
    assert!(!dirs.is_empty());
    for dir in dirs {
        let case = load_case(&dir).unwrap();
        let peer_cfg = nfcore::config::load(&dir.join("peer.json")).unwrap();
        let replays: Vec<usize> = serde_json::from_value(case.expected["replays"].clone()).unwrap();
        let mk_a = || Box::new(Ipsec::from_config(&case.config).unwrap());
        let mk_b = || Box::new(Ipsec::from_config(&peer_cfg).unwrap());
        for batch in [1, 4, 32] {
            for mode in ["local", "redis"] {
                run += 1;
                let store = |_: &str| -> Box<dyn FlowStore> {
                    if mode == "local" {
                        Box::new(LocalStore::new())
                    } else {
                        Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap())
                    }
                };
                let a_out = run_frames(mk_a(), store("a"), &format!("a{run}"), &case.frames, batch);
                let b_in = peer_input(&a_out, &case.frames, &replays);
                let b_out = run_frames(mk_b(), store("b"), &format!("b{run}"), &b_in, batch);
                let what = format!("{} {mode} batch {batch}", dir.display());
                check(&what, &case.frames, &case.expected, &a_out, &b_in, &b_out);
            }
        }
        // Two instances of each gateway, one Redis, packets alternately (shared sequence
        // counter on A, shared replay window on B).
        run += 1;
        let url = redis.url();
        let conn = || -> Box<dyn FlowStore> {
            Box::new(RedisStore::connect(RedisConfig::new(&url)).unwrap())
        };
        let a_out = run_alternating(|| (mk_a(), conn()), &format!("a{run}"), &case.frames);
        let b_in = peer_input(&a_out, &case.frames, &replays);
        let b_out = run_alternating(|| (mk_b(), conn()), &format!("b{run}"), &b_in);
        let what = format!("{} two instances", dir.display());
        check(&what, &case.frames, &case.expected, &a_out, &b_in, &b_out);
    }
}
