//! The `nf` binary holds the CPU wake-up latency bound of its config (`cpu_latency_us`) while it
//! runs and the kernel drops it when the process ends, by a clean stop or a kill. Needs root and
//! /dev/cpu_dma_latency (SKIP otherwise).

use nfcore::cpu_latency::current_us;
use std::process::{Command, Stdio};
use std::time::Duration;

mod common;
use common::{stats_json, wait_ready, Child, TempDir};
use testnet::Veth;

fn start(port: &str, dir: &std::path::Path, name: &str) -> (Child, std::path::PathBuf) {
    let cfg = dir.join(format!("{name}.json"));
    std::fs::write(&cfg, r#"{"rules": [], "cpu_latency_us": 3}"#).unwrap();
    let stats = dir.join(format!("{name}.stats"));
    let child = Child(
        Command::new(env!("CARGO_BIN_EXE_nf"))
            .args(["firewall", "--port", port, "--store", "local"])
            .args(["--nf-id", name, "--instance", "i1"])
            .args(["--config", cfg.to_str().unwrap()])
            .args(["--stats", &format!("unix://{}", stats.display())])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_ready(stats.as_path(), Duration::from_secs(10), name);
    (child, stats)
}

#[test]
fn the_bound_is_held_while_the_nf_runs_and_released_when_it_ends() {
    let Ok(before) = current_us() else {
        eprintln!("SKIP: no /dev/cpu_dma_latency");
        return;
    };
    let tag = std::process::id() % 100_000;
    let Some((_v, _a, b)) = Veth::pair("ucl") else {
        eprintln!("SKIP: cannot create a veth pair (not root?)");
        return;
    };
    let dir = TempDir(std::env::temp_dir().join(format!("unonfs-cpulat-{tag}")));
    std::fs::create_dir_all(&dir.0).unwrap();
    // A clean stop (SIGTERM), then a kill: both release the bound.
    for (name, sig) in [("term", libc::SIGTERM), ("kill", libc::SIGKILL)] {
        let (mut nf, stats) = start(&b, &dir.0, &format!("cl{name}{tag}"));
        assert!(current_us().unwrap() <= 3, "{name}: held while running");
        assert_eq!(
            stats_json(stats.as_path())["cpu_latency_us"],
            3,
            "{name}: reported"
        );
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(nf.0.id() as libc::pid_t, sig) };
        nf.0.wait().unwrap();
        assert_eq!(
            current_us().unwrap(),
            before,
            "{name}: released when the NF ended"
        );
    }
}
