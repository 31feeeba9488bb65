//! The `nf` binary end to end on pcap files: same output in local and Redis modes; operator
//! errors exit 2 with one line.

use flowstore::test_redis::TestRedis;
use nfcore::harness::TempDir;
use std::path::{Path, PathBuf};
use std::process::Command;

fn data(p: &str) -> PathBuf {
    nfcore::harness::tests_data().join(p)
}

fn run_nf(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_nf"))
        .args(args)
        .output()
        .unwrap()
}

fn run_case(
    kind: &str,
    store: &str,
    dir: &Path,
    tmp: &Path,
    tag: &str,
) -> (Vec<Vec<u8>>, serde_json::Value) {
    let case = nfcore::harness::load_case(dir).unwrap();
    let pin = tmp.join(format!("{tag}-in.pcap"));
    let pout = tmp.join(format!("{tag}-out.pcap"));
    netio::pcap::write_all(&pin, &case.frames).unwrap();
    let cfg = dir.join("config.json");
    let o = run_nf(&[
        kind,
        "--pcap-in",
        pin.to_str().unwrap(),
        "--pcap-out",
        pout.to_str().unwrap(),
        "--store",
        store,
        "--nf-id",
        tag,
        "--instance",
        "i1",
        "--config",
        cfg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stats: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let out = netio::pcap::read_all(&pout)
        .unwrap()
        .into_iter()
        .map(|(_, f)| f)
        .collect();
    (out, stats)
}

#[test]
fn pcap_in_out_same_in_both_modes() {
    let redis = TestRedis::start().expect("redis-server");
    let tmp = TempDir::new("cli-modes");
    for (kind, case_name) in [
        ("firewall", "basic"),
        ("nat", "basic"),
        ("monitor", "basic"),
        ("lb", "basic"),
        ("ips", "split"),
        ("l7fw", "basic"),
        ("ipsec", "basic"),
    ] {
        let dir = data(&format!("{kind}/{case_name}"));
        let (local, ls) = run_case(kind, "local", &dir, &tmp.0, &format!("{kind}l"));
        let (remote, rs) = run_case(kind, &redis.url(), &dir, &tmp.0, &format!("{kind}r"));
        assert_eq!(local, remote, "{kind}");
        // Over the server's unix socket: the same packets.
        let (unix, us) = run_case(kind, &redis.unix_url(), &dir, &tmp.0, &format!("{kind}u"));
        assert_eq!(local, unix, "{kind} over the unix socket");
        assert_eq!(us["store_kind"], "redis");
        let exp = nfcore::config::load(&dir.join("expected.json")).unwrap();
        let n_fwd = exp["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| *v == "forward")
            .count();
        assert_eq!(local.len(), n_fwd, "{kind}");
        assert_eq!(ls["counters"]["tx"], n_fwd, "{kind}");
        assert_eq!(rs["store_kind"], "redis");
        assert!(rs["store"]["round_trips"].as_u64().unwrap() >= 1);
    }
}

/// `nf TYPE --pcap-in PCAP --store STORE --nf-id ID --instance i --config CFG`, then `extra`.
fn nf_args<'a>(
    kind: &'a str,
    pcap: &'a str,
    store: &'a str,
    id: &'a str,
    cfg: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut v = vec![
        kind,
        "--pcap-in",
        pcap,
        "--store",
        store,
        "--nf-id",
        id,
        "--instance",
        "i",
        "--config",
        cfg,
    ];
    v.extend_from_slice(extra);
    v
}

#[test]
fn operator_errors_exit_2_with_one_line() {
    let tmp = TempDir::new("cli-errs");
    let bad_cfg = tmp.0.join("bad.json");
    std::fs::write(
        &bad_cfg,
        r#"{"rules": [{"action": "allow", "src": "nonsense"}]}"#,
    )
    .unwrap();
    let good = data("firewall/basic/config.json");
    let g = good.to_str().unwrap();
    let bad = bad_cfg.to_str().unwrap();
    for (args, word) in [
        (vec!["firewall"], "--port or --pcap-in"),
        (
            nf_args("teleporter", "x", "local", "a", g, &[]),
            "unknown NF type",
        ),
        (nf_args("firewall", "x", "local", "a", bad, &[]), "rules[0]"),
        (nf_args("firewall", "x", "local", "a:b", g, &[]), "nf-id"),
        (
            nf_args("firewall", "x", "local", "a", "/nonexistent.json", &[]),
            "config",
        ),
        (
            nf_args("firewall", "x", "unix://redis.sock", "a", g, &[]),
            "unix:///ABSOLUTE/PATH",
        ),
        (
            nf_args(
                "firewall",
                "x",
                "local",
                "a",
                g,
                &["--stats", "unix://x.sock"],
            ),
            "--stats",
        ),
    ] {
        let o = run_nf(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(word), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    // Missing input file and an unreachable store are runtime errors (exit 1), still one line.
    let o = run_nf(&nf_args(
        "firewall",
        "/nonexistent.pcap",
        "local",
        "a",
        g,
        &[],
    ));
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("nonexistent.pcap"));
    let gone = format!("unix://{}", tmp.0.join("no-redis.sock").display());
    let pcap = tmp.0.join("empty.pcap");
    netio::pcap::write_all(&pcap, &[]).unwrap();
    let o = run_nf(&nf_args(
        "firewall",
        pcap.to_str().unwrap(),
        &gone,
        "a",
        g,
        &[],
    ));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&gone) && err.trim().lines().count() == 1,
        "{err}"
    );
}

#[test]
fn lb_backend_marks_a_backend_down_in_the_shared_pool() {
    let redis = TestRedis::start().expect("redis-server");
    let tmp = TempDir::new("cli-lbb");
    let url = redis.url();
    let mark = |backend: &str, state: &str| {
        run_nf(&[
            "lb-backend",
            "--store",
            &url,
            "--nf-id",
            "lbb",
            "--backend",
            backend,
            "--state",
            state,
        ])
    };
    let o = mark("10.1.0.2:8080", "down");
    assert_eq!(o.status.code(), Some(1), "pool not seeded yet");
    assert!(String::from_utf8_lossy(&o.stderr).contains("not initialised"));
    // An LB instance seeds the pool from its config.
    let dir = data("lb/basic");
    run_case("lb", &url, &dir, &tmp.0, "lbb");
    let o = mark("10.1.0.2:8080", "down");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "10.1.0.1:8080 up\n10.1.0.2:8080 down\n"
    );
    for (backend, state, word) in [
        ("10.9.9.9:1", "down", "not in the pool"),
        ("10.1.0.2", "down", "--backend"),
        ("10.1.0.2:8080", "sideways", "--state"),
    ] {
        let o = mark(backend, state);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{backend} {state}: {err}");
        assert!(err.contains(word), "{err}");
        assert_eq!(err.trim().lines().count(), 1);
    }
    let o = run_nf(&["lb-backend", "--store", &url]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn help_is_the_usage_on_stdout_exit_0() {
    // `nf --help` printed the usage as an error (stderr, exit 2)
    for flag in ["--help", "-h"] {
        let o = run_nf(&[flag]);
        assert_eq!(o.status.code(), Some(0), "{flag}");
        assert!(String::from_utf8_lossy(&o.stdout).starts_with("usage: nf <type>"));
    }
    assert_eq!(run_nf(&[]).status.code(), Some(2)); // no arguments stays a usage error
}

#[test]
fn version_schema_and_check_config() {
    let o = run_nf(&["--version"]);
    assert!(o.status.success());
    let v = String::from_utf8(o.stdout).unwrap();
    let o = run_nf(&["--state-schema"]);
    assert!(o.status.success());
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["version"], v.trim());
    assert!(s["types"]["firewall"]["reads"].is_array() && s["snapshot"].is_u64());
    let tmp = TempDir::new("cli-check");
    let cfg = tmp.0.join("c.json");
    for (text, ok, word) in [
        (r#"{"rules": [], "default": "deny"}"#, true, ""),
        (r#"{"rules": [{"action": "maybe"}]}"#, false, "rules[0]"),
        (r#"{"batch_size": 0}"#, false, "batch_size"),
        (r#"{"bogus": 1}"#, false, "bogus"),
    ] {
        std::fs::write(&cfg, text).unwrap();
        let o = run_nf(&["--check-config", "firewall", cfg.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.success(), ok, "{text}: {err}");
        if ok {
            let a: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            // The firewall's longest timeout: TCP established, 5 days by default.
            assert_eq!(
                a,
                serde_json::json!({"ok": true, "record_lifetime_ms": 432_000_000u64,
                                   "change_checked": false})
            );
        }
        if !ok {
            assert_eq!(o.status.code(), Some(2));
            assert!(
                err.starts_with("nf: config: ") && err.contains(word),
                "{text}: {err}"
            );
        }
    }
    let o = run_nf(&["--check-config", "teleporter", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let o = run_nf(&["--check-config", "firewall"]);
    assert_eq!(o.status.code(), Some(2));
    // As a change of the running config: what the state in the tier cannot take is refused.
    let running = tmp.0.join("r.json");
    std::fs::write(&running, r#"{"counters": "record"}"#).unwrap();
    std::fs::write(&cfg, r#"{"counters": "increments"}"#).unwrap();
    let args = ["--check-config", "monitor", cfg.to_str().unwrap()];
    assert!(run_nf(&args).status.success(), "valid on its own");
    let o = run_nf(&[&args[..], &["--running", running.to_str().unwrap()]].concat());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.starts_with("nf: config: counters: "), "{err}");
    std::fs::write(&cfg, r#"{"counters": "record", "idle_timeout_ms": 1000}"#).unwrap();
    let o = run_nf(&[&args[..], &["--running", running.to_str().unwrap()]].concat());
    let a: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(a["change_checked"], true, "{a}");
    let o = run_nf(&[&args[..], &["--running"]].concat());
    assert_eq!(o.status.code(), Some(2), "--running without a file");
}
