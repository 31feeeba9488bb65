//! The pcap cases (`tests-data/<nf>/<case>/{config.json, input.pcap, expected.pcap,
//! expected.json}`): the committed files are what their generator writes
//! (`nfcore::harness::pcap_cases`), and every NF sends exactly the expected frames, packet by
//! packet, and ends with the expected counters: the `nf` binary in pcap mode (local store and
//! Redis) and, in process, batch by batch, in batches of 32 and as two instances sharing Redis
//! that take turns packet by packet.

use flowstore::test_redis::TestRedis;
use flowstore::{FlowStore, LocalStore, RedisConfig, RedisStore};
use nf::registry::{make_nf, TYPES};
use nfcore::harness::{
    case_dirs, compare_frames, load_case, pcap_cases, run_alternating, run_frames_full, verdicts,
    Case, CaseFormat,
};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The readable steps of a case, for a failure message.
fn steps(case: &Case) -> String {
    let lines: Vec<&str> = case.expected["steps"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    format!("case steps:\n  {}", lines.join("\n  "))
}

/// Every counter the case names has its value in `stats`.
fn check_counters(case: &Case, stats: &Value, what: &str) {
    if let Some(want) = case.expected["counters"].as_object() {
        for (k, v) in want {
            assert_eq!(
                &stats[k],
                v,
                "{what}: counter {k} in {stats}\n{}",
                steps(case)
            );
        }
    }
}

fn check_frames(case: &Case, sent: &[Vec<u8>], what: &str) {
    let want: Vec<Vec<u8>> = case
        .expected_out
        .as_ref()
        .expect("a pcap case")
        .iter()
        .map(|(_, f)| f.clone())
        .collect();
    if let Err(e) = compare_frames(sent, &want) {
        panic!("{what}: {e}\n{}", steps(case));
    }
}

/// `nf KIND --pcap-in input.pcap --pcap-out OUT --store STORE ...`: the frames sent and the
/// NF's counters.
fn run_binary(kind: &str, dir: &Path, store: &str, tag: &str) -> (Vec<Vec<u8>>, Value) {
    let out =
        std::env::temp_dir().join(format!("unonfs-pcapcase-{tag}-{}.pcap", std::process::id()));
    let o = Command::new(env!("CARGO_BIN_EXE_nf"))
        .arg(kind)
        .arg("--pcap-in")
        .arg(dir.join("input.pcap"))
        .arg("--pcap-out")
        .arg(&out)
        .args([
            "--store",
            store,
            "--nf-id",
            tag,
            "--instance",
            "t",
            "--config",
        ])
        .arg(dir.join("config.json"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stats: Value = serde_json::from_slice(&o.stdout).unwrap();
    let sent = netio::pcap::read_all(&out).unwrap();
    let _ = std::fs::remove_file(&out);
    (
        sent.into_iter().map(|(_, f)| f).collect(),
        stats["nf_stats"].clone(),
    )
}

#[test]
fn committed_pcap_cases_are_what_their_generator_writes() {
    let cases = pcap_cases::all();
    let root = nfcore::harness::tests_data();
    for case in &cases {
        let dir = root.join(case.nf).join(case.name);
        for (name, bytes) in case.files() {
            let on_disk = std::fs::read(dir.join(name)).unwrap_or_default();
            assert!(
                on_disk == bytes,
                "{}/{name} is not what the generator writes: run `cargo run -p nfcore --example \
                 pcap-cases` (and review the diff)",
                dir.display()
            );
        }
    }
    // And no pcap case on disk that the generator no longer writes.
    for kind in TYPES {
        for dir in case_dirs(kind, CaseFormat::Pcap) {
            let name = dir.file_name().unwrap().to_str().unwrap();
            assert!(
                cases.iter().any(|c| c.nf == *kind && c.name == name),
                "{}: a pcap case without a generator entry",
                dir.display()
            );
        }
    }
}

#[test]
fn every_pcap_case_sends_the_expected_frames() {
    let redis = TestRedis::start().expect("redis-server");
    let mut run = 0;
    for kind in TYPES {
        for dir in case_dirs(kind, CaseFormat::Pcap) {
            let case = load_case(&dir).unwrap();
            let name = format!("{kind}/{}", dir.file_name().unwrap().to_str().unwrap());
            let want: Vec<String> =
                serde_json::from_value(case.expected["verdicts"].clone()).unwrap();
            for store in ["local".to_string(), redis.url()] {
                run += 1;
                let (sent, stats) = run_binary(kind, &dir, &store, &format!("pc{run}"));
                let what = format!("{name}: nf binary, store {store}");
                check_frames(&case, &sent, &what);
                check_counters(&case, &stats, &what);
            }
            let mk = || make_nf(kind, &case.config).unwrap();
            let local = |batch| {
                let store = Box::new(LocalStore::new());
                let (out, nf, _) = run_frames_full(mk(), store, "pcl", &case.frames, batch);
                (out, Some(nf.stats()))
            };
            let conn = || -> Box<dyn FlowStore> {
                Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap())
            };
            run += 1;
            let alt = run_alternating(|| (mk(), conn()), &format!("pcalt{run}"), &case.frames);
            for (mode, (out, stats)) in [
                ("in process, batch 1", local(1)),
                ("in process, batch 32", local(32)),
                ("two instances on Redis taking turns", (alt, None)),
            ] {
                let what = format!("{name}: {mode}");
                assert_eq!(verdicts(&out), want, "{what}\n{}", steps(&case));
                check_frames(&case, &out.into_iter().flatten().collect::<Vec<_>>(), &what);
                if let Some(stats) = stats {
                    check_counters(&case, &stats, &what);
                }
            }
        }
    }
    assert!(
        run >= 4 * 3,
        "pcap cases of firewall, nat, lb and ips at least"
    );
}
