//! Fuzz target bodies of the UNO network functions, shared by the cargo-fuzz crate (`nfs/fuzz`,
//! nightly, libFuzzer) and the stable corpus replay test (`tests/corpus.rs`), so every committed
//! corpus file runs through exactly the code the fuzzer runs, on every `cargo test`.
//!
//! Each target takes arbitrary bytes and asserts invariants (a failed assertion is a crash to
//! the fuzzer): never a panic, and where there is one a property, e.g. a rewrite keeps the
//! checksums valid, reassembly never scans more bytes than the receiver can deliver,
//! `decode(encode(x)) == x` for the state records, and an ESP round trip gives back the frame.
//! [`TARGETS`] lists them; `nfs/fuzz/fuzz_targets/<name>.rs` is one line per target.

pub mod esp;
pub mod input;
pub mod nfs;
pub mod parsers;
pub mod seeds;
pub mod streams;

/// A fuzz target: its name (= the cargo-fuzz target and the corpus directory) and body.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
    /// What it checks (for the docs and `fuzz-seeds --list`).
    pub checks: &'static str,
}

/// Every target, in the order `make fuzz` runs them.
pub const TARGETS: &[Target] = &[
    Target {
        name: "packet",
        run: parsers::packet,
        checks: "Ethernet/VLAN/QinQ, IPv4/IPv6, TCP/UDP/ICMP views never panic; frames built from a \
                 FrameSpec parse back to its fields; rewrites keep IPv4 and TCP/UDP checksums valid \
                 (recomputed and compared) and equal a frame built from scratch",
    },
    Target {
        name: "resp",
        run: parsers::resp,
        checks: "RESP reply parser: never panics, consumes at most the input, a complete reply's \
                 prefixes ask for more (never an error), parse(serialize(reply)) == reply, encoded \
                 commands parse back to their arguments",
    },
    Target {
        name: "config",
        run: parsers::config,
        checks: "every NF's JSON config parser and the runtime options: Ok or a one-line error, \
                 never a panic",
    },
    Target {
        name: "state",
        run: parsers::state,
        checks: "tier records of every NF (firewall, NAT, LB, IPS, reassembly buffer, L7, monitor, \
                 replay window, LB pool text): decode(arbitrary) never panics and \
                 decode(encode(decode(x))) == decode(x)",
    },
    Target {
        name: "reasm",
        run: streams::reasm,
        checks: "IPS TCP reassembly fed overlapping, reordered, duplicated segments of one stream \
                 per direction: scanned bytes never exceed the bytes given and equal exactly what a \
                 receiver of the forwarded segments can deliver in order; alerts equal the \
                 signature occurrences in that prefix",
    },
    Target {
        name: "l7_classify",
        run: streams::l7_classify,
        checks: "L7 classifier: never NeedMore at the last look; names are valid host names; a \
                 decision on a prefix stays the decision on the whole (segmentation cannot change \
                 it); built ClientHello / DNS query / HTTP request give back their name",
    },
    Target {
        name: "esp",
        run: esp::esp,
        checks: "ESP encapsulate/decapsulate round trip gives back the inner frame; any changed \
                 byte of the ESP part fails authentication; arbitrary frames never panic decap",
    },
    Target {
        name: "replay",
        run: esp::replay,
        checks: "anti-replay window against a reference model (set of accepted numbers), and \
                 decode(encode(window)) == window after every step",
    },
    Target {
        name: "nf_firewall",
        run: nfs::firewall,
        checks: "firewall packet path (local store): no panic, non-IP forwarded unchanged, \
                 malformed dropped, frames unchanged; every forwarded packet's connection was \
                 opened by a packet the rules allow",
    },
    Target {
        name: "nf_nat",
        run: nfs::nat,
        checks: "NAT packet path: checksums stay valid, outbound leaves from a pool address and \
                 port, one public endpoint per flow and one flow per endpoint, inbound goes to the \
                 flow that owns the endpoint",
    },
    Target {
        name: "nf_lb",
        run: nfs::lb,
        checks: "LB packet path: checksums stay valid, nothing to the VIP leaves unrewritten, \
                 rewritten packets go to a configured backend",
    },
    Target {
        name: "nf_ips",
        run: nfs::ips,
        checks: "IPS packet path: no panic, frames unchanged, no forwarded UDP datagram carries a \
                 signature",
    },
    Target {
        name: "nf_l7fw",
        run: nfs::l7fw,
        checks: "L7 firewall packet path: no panic, frames unchanged",
    },
    Target {
        name: "nf_monitor",
        run: nfs::monitor,
        checks: "monitor packet path: forwards every frame that parses, unchanged",
    },
    Target {
        name: "nf_ipsec",
        run: nfs::ipsec,
        checks: "IPsec gateways (A and B of the case): no (SPI, sequence number) is ever sent \
                 twice (nonce reuse) nor accepted twice (replay); decapsulated frames parse and \
                 match the SA's selectors",
    },
];

/// The target named `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// Run target `name` on `data` (what each cargo-fuzz target calls).
pub fn run(name: &str, data: &[u8]) {
    (target(name)
        .unwrap_or_else(|| panic!("no fuzz target {name}"))
        .run)(data)
}
