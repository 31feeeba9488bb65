//! Bounded fuzz pass over each NF's packet path (stable toolchain, fixed seed and case count):
//! random and mutated frames from the case directories must never panic the runtime or an NF,
//! and every frame an NF forwards must still parse.

use flowstore::LocalStore;
use nfcore::harness::{load_case, run_frames};

#[test]
fn nf_packet_paths_survive_mutated_input() {
    let root = nfcore::harness::tests_data();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for (kind, case_name) in [
        ("firewall", "basic"),
        ("nat", "basic"),
        ("monitor", "basic"),
        ("lb", "basic"),
        ("ips", "split"),
        ("ips", "reordered"),
        ("l7fw", "basic"),
        ("ipsec", "basic"),
        ("ipsec-peer", "basic"),
    ] {
        let dir = root.join(kind.trim_end_matches("-peer")).join(case_name);
        let mut case = load_case(&dir).unwrap();
        if kind.starts_with("ipsec") {
            // Seeds include valid ESP: gateway A's output for the case's packets.
            let a = nf_ipsec::Ipsec::from_config(&case.config).unwrap();
            let out = run_frames(
                Box::new(a),
                Box::new(LocalStore::new()),
                "seed",
                &case.frames,
                8,
            );
            let esp: Vec<(u64, Vec<u8>)> = out.into_iter().flatten().map(|f| (0, f)).collect();
            case.frames.extend(esp);
            if kind == "ipsec-peer" {
                case.config = nfcore::config::load(&dir.join("peer.json")).unwrap();
            }
        }
        let mut frames = Vec::new();
        for i in 0..3000u64 {
            let mut f = case.frames[(next() as usize) % case.frames.len()].1.clone();
            if i % 7 == 0 {
                f = (0..(next() % 120) as usize).map(|_| next() as u8).collect();
            }
            for _ in 0..(next() % 3) {
                if !f.is_empty() {
                    let at = (next() as usize) % f.len();
                    f[at] = next() as u8;
                }
            }
            if next() % 5 == 0 && !f.is_empty() {
                let n = (next() as usize) % f.len();
                f.truncate(n);
            }
            frames.push((i * 1_000_000, f));
        }
        let cfg = &case.config;
        let nf: Box<dyn nfcore::NetworkFunction> = match kind {
            "firewall" => Box::new(nf_firewall::Firewall::from_config(cfg).unwrap()),
            "nat" => Box::new(nf_nat::Nat::from_config(cfg).unwrap()),
            "lb" => Box::new(nf_lb::LoadBalancer::from_config(cfg).unwrap()),
            "l7fw" => Box::new(nf_l7fw::L7Firewall::from_config(cfg).unwrap()),
            "ips" => {
                let mut c = cfg.clone();
                c["alert_log"] = "/dev/null".into();
                Box::new(nf_ips::Ips::from_config(&c).unwrap())
            }
            "ipsec" | "ipsec-peer" => Box::new(nf_ipsec::Ipsec::from_config(cfg).unwrap()),
            _ => Box::new(nf_monitor::Monitor::from_config(cfg).unwrap()),
        };
        let out = run_frames(nf, Box::new(LocalStore::new()), "fuzz", &frames, 16);
        for (i, o) in out.iter().enumerate() {
            if let Some(f) = o {
                if packet::Parsed::new_checked(&frames[i].1).is_ok() {
                    assert!(
                        packet::Parsed::new_checked(f).is_ok(),
                        "{kind}: forwarded frame {i} no longer parses"
                    );
                }
            }
        }
    }
}
