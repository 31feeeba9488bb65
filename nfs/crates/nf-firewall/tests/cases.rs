//! Case directories under nfs/tests-data/firewall: local and Redis modes, several batch sizes,
//! and two instances sharing one Redis processing packets alternately.

use flowstore::test_redis::TestRedis;
use flowstore::{LocalStore, RedisConfig, RedisStore};
use nf_firewall::Firewall;
use nfcore::harness::{case_dirs, load_case, run_alternating, run_frames, verdicts, CaseFormat};

#[test]
fn cases_same_in_local_and_redis_modes_and_two_instances() {
    let redis = TestRedis::start().expect("redis-server");
    let dirs = case_dirs("firewall", CaseFormat::Json);
    assert!(!dirs.is_empty());
    for dir in dirs {
        let case = load_case(&dir).unwrap();
        let want: Vec<String> = serde_json::from_value(case.expected["verdicts"].clone()).unwrap();
        let mk = || Box::new(Firewall::from_config(&case.config).unwrap());
        for batch in [1, 4, 32] {
            let local = run_frames(
                mk(),
                Box::new(LocalStore::new()),
                "fwl",
                &case.frames,
                batch,
            );
            assert_eq!(
                verdicts(&local),
                want,
                "{} local batch {batch}",
                dir.display()
            );
            let nf_id = format!("fwr{batch}");
            let store = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
            let remote = run_frames(mk(), Box::new(store), &nf_id, &case.frames, batch);
            assert_eq!(remote, local, "{} redis batch {batch}", dir.display());
            // Owner cache (one instance owns the flows): same results.
            let id = format!("fwc{batch}");
            let epoch = flowstore::KeySpace::new(&id).unwrap().global("epoch");
            let r = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
            let cached = run_frames(
                mk(),
                Box::new(flowstore::CachedStore::new(r, epoch, 1000)),
                &id,
                &case.frames,
                batch,
            );
            assert_eq!(cached, local, "{} cached batch {batch}", dir.display());
        }
        let alt = run_alternating(
            || {
                let s = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
                (mk(), Box::new(s))
            },
            "fwalt",
            &case.frames,
        );
        assert_eq!(
            verdicts(&alt),
            want,
            "{} two instances alternating",
            dir.display()
        );
    }
}

#[test]
fn config_errors_name_the_field() {
    for (cfg, field) in [
        (
            serde_json::json!({"rules": [{"action": "maybe"}]}),
            "rules[0]",
        ),
        (
            serde_json::json!({"rules": [{"action": "allow", "src": "10.0.0.0/33"}]}),
            "rules[0]",
        ),
        (
            serde_json::json!({"rules": [{"action": "allow", "dst_port": "9-1"}]}),
            "dst_port",
        ),
        (serde_json::json!({"default": "x"}), "default"),
        (serde_json::json!({"idle_timeout_ms": 0}), "idle_timeout_ms"),
        (serde_json::json!({"rulez": []}), "rulez"),
    ] {
        let e = Firewall::from_config(&cfg).err().unwrap();
        assert!(e.contains(field), "{cfg}: {e}");
    }
}

#[test]
fn reconfigure_changes_rules_in_place_and_refuses_a_bad_config_unchanged() {
    use nfcore::NetworkFunction;
    let allow =
        serde_json::json!({"rules": [{"action": "allow", "proto": "udp"}], "default": "deny"});
    let mut fw = Firewall::from_config(&allow).unwrap();
    let mut store = LocalStore::new();
    let keys = flowstore::KeySpace::new("fwre").unwrap();
    let deny =
        serde_json::json!({"rules": [{"action": "deny", "proto": "udp"}], "default": "deny"});
    assert_eq!(fw.reconfigure(&deny, &mut store, &keys), Ok(true));
    let bad = serde_json::json!({"rules": [{"action": "maybe"}]});
    let e = fw
        .reconfigure(&bad, &mut store, &keys)
        .unwrap_err()
        .to_string();
    assert!(e.contains("rules[0]"), "{e}");
    // The refused config changed nothing: still the deny rule (a UDP flow may not open).
    let k = packet::FlowKey {
        src: "10.0.0.1".parse().unwrap(),
        dst: "10.0.0.2".parse().unwrap(),
        src_port: 1,
        dst_port: 2,
        proto: packet::PROTO_UDP,
    };
    assert!(!fw.may_open(&k));
    assert_eq!(fw.reconfigure(&allow, &mut store, &keys), Ok(true));
    assert!(fw.may_open(&k));
}
