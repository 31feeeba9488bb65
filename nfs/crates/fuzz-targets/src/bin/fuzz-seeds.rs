//! `fuzz-seeds DIR`: write every target's seeds to `DIR/<target>/seed-<n>` (stale `seed-*`
//! files of a target are removed first; other files, e.g. regression inputs, are kept).
//! `fuzz-seeds --list`: the targets and what each checks.

use nf_fuzz_targets::{seeds::seeds, TARGETS};
use std::path::PathBuf;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [l] if l == "--list" => {
            for t in TARGETS {
                println!(
                    "{}\t{}",
                    t.name,
                    t.checks.split_whitespace().collect::<Vec<_>>().join(" ")
                );
            }
        }
        [dir] if !dir.starts_with('-') => {
            let root = PathBuf::from(dir);
            for t in TARGETS {
                let d = root.join(t.name);
                std::fs::create_dir_all(&d).expect("create corpus directory");
                for e in std::fs::read_dir(&d)
                    .expect("read corpus directory")
                    .flatten()
                {
                    if e.file_name().to_string_lossy().starts_with("seed-") {
                        std::fs::remove_file(e.path()).expect("remove stale seed");
                    }
                }
                let s = seeds(t.name);
                for (i, b) in s.iter().enumerate() {
                    std::fs::write(d.join(format!("seed-{i:02}")), b).expect("write seed");
                }
                println!("{}: {} seeds", t.name, s.len());
            }
        }
        _ => {
            eprintln!("usage: fuzz-seeds DIR | fuzz-seeds --list");
            std::process::exit(2);
        }
    }
}
