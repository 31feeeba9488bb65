//! Writes the pcap cases (`nfcore::harness::pcap_cases`) into `nfs/tests-data/<nf>/<case>/`, or
//! below the directory given:
//!
//! ```text
//! cargo run -p nfcore --example pcap-cases [-- DIR]
//! ```
//!
//! The cases are tables in that module (each packet, what the NF must do with it and why); run
//! this after changing one, then `cargo test -p nf --test pcap_cases`.

use nfcore::harness::{pcap_cases, tests_data};

fn main() {
    let root = std::env::args_os()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(tests_data);
    for case in pcap_cases::all() {
        case.write(&root)
            .unwrap_or_else(|e| panic!("{}/{}: {e}", case.nf, case.name));
        println!(
            "{}/{}/{}: {} packets in, {} out",
            root.display(),
            case.nf,
            case.name,
            case.input().len(),
            case.expected_out().len()
        );
    }
}
