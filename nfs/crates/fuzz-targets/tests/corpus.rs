//! Stable replay of the fuzz corpora: every file of `nfs/fuzz/corpus/<target>/` (seeds and
//! regression inputs of crashes the fuzzer found) and every generated seed runs through the
//! same target body that cargo-fuzz runs, so `cargo test` checks the corpora on every run.

use nf_fuzz_targets::{seeds::seeds, TARGETS};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

fn corpus_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

#[test]
fn every_corpus_file_passes_its_target() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for t in TARGETS {
        let dir = corpus_root().join(t.name);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e} (run fuzz-seeds)", dir.display()))
            .flatten()
            .map(|e| e.path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{}: empty corpus", dir.display());
        let mut inputs: Vec<(String, Vec<u8>)> = files
            .iter()
            .map(|p| (p.display().to_string(), std::fs::read(p).unwrap()))
            .collect();
        inputs.extend(
            seeds(t.name)
                .into_iter()
                .enumerate()
                .map(|(i, s)| (format!("{} generated seed {i}", t.name), s)),
        );
        for (what, data) in inputs {
            runs += 1;
            if let Err(e) = catch_unwind(AssertUnwindSafe(|| (t.run)(&data))) {
                let msg = e
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push(format!("{what}: {msg}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {runs} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn corpus_directories_name_targets() {
    for e in std::fs::read_dir(corpus_root()).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(
            nf_fuzz_targets::target(&name).is_some(),
            "corpus directory {name} is not a target"
        );
    }
    let fuzz_dir = corpus_root().join("../fuzz_targets");
    for t in TARGETS {
        let f = fuzz_dir.join(format!("{}.rs", t.name));
        let src = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(
            src.contains(&format!("\"{}\"", t.name)),
            "{} runs another target",
            f.display()
        );
    }
}
