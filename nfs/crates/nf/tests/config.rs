//! NF configs, both ways: what every NF accepts (its case configs, the runtime options beside its
//! own fields, a default written out means what its absence means) and what it refuses, with the
//! one-line error naming the field (unknown key, wrong type, out of range, missing, `null`, a
//! list where an object belongs).

use flowstore::LocalStore;
use nf::registry::{make_nf, TYPES};
use nfcore::config::RuntimeConfig;
use nfcore::harness::{case, run_frames_full};
use serde_json::{json, Value};

fn refused(kind: &str, cfg: Value) -> String {
    match make_nf(kind, &cfg) {
        Ok(_) => panic!("{kind}: {cfg} was accepted"),
        Err(e) => e,
    }
}

/// The case config of `kind` (`""`: as it is) with the field at `path` (`"rules.0.src"`) set to
/// `v`, or removed (None).
fn edited(kind: &str, path: &str, v: Option<Value>) -> Value {
    let name = if kind == "ips" { "split" } else { "basic" };
    let mut cfg = case(kind, name).config;
    if path.is_empty() {
        return cfg;
    }
    let keys: Vec<&str> = path.split('.').collect();
    let (last, parents) = keys.split_last().unwrap();
    let mut o = &mut cfg;
    for k in parents {
        o = match k.parse::<usize>() {
            Ok(i) => &mut o[i],
            Err(_) => &mut o[*k],
        };
    }
    match (v, last.parse::<usize>()) {
        (Some(v), Ok(i)) => o[i] = v,
        (Some(v), Err(_)) => o[*last] = v,
        (None, _) => {
            o.as_object_mut().unwrap().remove(*last);
        }
    }
    cfg
}

#[test]
fn refused_configs_name_the_field_and_why() {
    let runtime = "batch_size, fail_mode, timer_interval_ms, owner_cache, pipeline_depth, \
                   spin_us, cpu_latency_us";
    #[rustfmt::skip]
    let table: &[(&str, &str, Option<Value>, String)] = &[
        // Unknown keys: the key and the known ones (the NF's, then the runtime options).
        ("firewall", "rulez", Some(json!([])), format!("firewall config: unknown field \"rulez\" (allowed: rules, default, timeouts, idle_timeout_ms, close_timeout_ms, {runtime})")),
        ("firewall", "rules.0.srcc", Some(json!("any")), "rules[0]: unknown field \"srcc\" (allowed: action, proto, src, dst, dst_port)".into()),
        ("nat", "insid", Some(json!(1)), format!("nat config: unknown field \"insid\" (allowed: inside, public_ips, ports, timeouts, idle_timeout_ms, port_block, mapping_claim, {runtime})")),
        ("monitor", "counter", Some(json!("record")), format!("monitor config: unknown field \"counter\" (allowed: idle_timeout_ms, counters, flush_ms, {runtime})")),
        ("lb", "vips", Some(json!(1)), format!("lb config: unknown field \"vips\" (allowed: vip, port, proto, backends, on_backend_down, timeouts, idle_timeout_ms, close_timeout_ms, conn_claim, {runtime})")),
        ("ips", "signatures.0.sid", Some(json!(2)), "signatures[0]: unknown field \"sid\" (allowed: id, msg, content, hex)".into()),
        ("l7fw", "block.0.foo", Some(json!("x")), "block[0]: unknown field \"foo\" (allowed: proto, sni, host, qname, name)".into()),
        ("ipsec", "sas.0.selectors.0.port", Some(json!(1)), "sas[0].selectors[0]: unknown field \"port\" (allowed: src, dst)".into()),
        // Wrong types.
        ("firewall", "rules", Some(json!({})), "rules must be a list".into()),
        ("firewall", "rules.0", Some(json!(["allow", "tcp"])), "rules[0] must be an object".into()),
        ("firewall", "rules.0.src", Some(json!(5)), "rules[0].src must be a string".into()),
        ("firewall", "default", Some(json!(null)), "default must be a string".into()),
        ("nat", "inside", Some(json!([1])), "inside[0] must be a string".into()),
        ("nat", "ports", Some(json!(5)), "ports must be a string".into()),
        ("lb", "backends", Some(json!([1])), "backends[0] must be \"ADDR:PORT\", not 1".into()),
        ("ips", "nocase", Some(json!("yes")), "nocase must be true or false".into()),
        ("ips", "signatures.1.hex", Some(json!(5)), "signatures[1].hex must be hex digit pairs".into()),
        ("l7fw", "block", Some(json!({"proto": "tls"})), "block must be a list".into()),
        ("ipsec", "sas.0.key", Some(json!(5)), "sas[0].key must be a string".into()),
        ("ipsec", "unprotected", Some(json!(1)), "unprotected must be a string".into()),
        // Values out of range or not among the names.
        ("firewall", "idle_timeout_ms", Some(json!(0)), "idle_timeout_ms must be an integer in [1, 86400000]".into()),
        // Timeouts per protocol and phase.
        ("nat", "timeouts", Some(json!({"tcp_syn_ms": 0})), "timeouts.tcp_syn_ms must be an integer in [1, 2592000000]".into()),
        ("lb", "timeouts", Some(json!({"udp_ms": 1})), "timeouts: unknown field \"udp_ms\" (allowed: tcp_syn_ms, tcp_established_ms, tcp_closing_ms, tcp_closed_ms, udp_unreplied_ms, udp_replied_ms, icmp_ms, other_ms)".into()),
        ("ips", "timeouts", Some(json!([])), "timeouts must be an object".into()),
        ("ips", "record_writes", Some(json!("plain")), "record_writes must be \"checked\" or \"last_wins\", not \"plain\"".into()),
        ("l7fw", "timeouts", Some(json!({"tcp_established_ms": null})), "timeouts.tcp_established_ms must be an integer in [1, 2592000000]".into()),
        ("firewall", "timeouts", Some(json!({})), "idle_timeout_ms: not together with timeouts (timeouts sets each phase; idle_timeout_ms is the older key, give one of them)".into()),
        ("l7fw", "timeouts", Some(json!({"icmp_ms": 5})), "idle_timeout_ms: not together with timeouts (timeouts sets each phase; idle_timeout_ms is the older key, give one of them)".into()),
        ("firewall", "rules.0.proto", Some(json!("sctp")), "rules[0].proto must be \"any\", \"tcp\", \"udp\", \"icmp\" or \"icmpv6\", not \"sctp\"".into()),
        ("firewall", "rules.0.src", Some(json!("10.0.0.0/33")), "rules[0].src: bad prefix length in \"10.0.0.0/33\"".into()),
        ("firewall", "rules.0.dst_port", Some(json!("9-1")), "rules[0].dst_port: range is empty".into()),
        ("nat", "inside", Some(json!([])), "inside must be a non-empty list".into()),
        ("nat", "ports", Some(json!("9-1")), "ports must be \"lo-hi\" with 1 <= lo <= hi <= 65535, not \"9-1\"".into()),
        ("nat", "port_block", Some(json!(4097)), "port_block must be an integer in [1, 4096]".into()),
        ("nat", "mapping_claim", Some(json!("cas")), "mapping_claim must be \"atomic\" or \"pipelined\", not \"cas\"".into()),
        ("monitor", "flush_ms", Some(json!(5)), "flush_ms needs \"counters\": \"increments\"".into()),
        ("lb", "port", Some(json!(65536)), "port must be an integer in [1, 65535]".into()),
        ("lb", "backends", Some(json!([])), "backends must be a list of 1-1024 entries".into()),
        ("lb", "backends", Some(json!(["10.0.0.100:1"])), "backends[0]: must not be the vip".into()),
        ("ips", "signatures.0.id", Some(json!(4294967296u64)), "signatures[0].id must be an integer in [0, 4294967295]".into()),
        ("ips", "signatures.0.content", Some(json!("")), "signatures[0]: content must be 1-1024 bytes".into()),
        ("ips", "signatures.1.id", Some(json!(1001)), "signatures[1].id 1001 is a duplicate".into()),
        ("ips", "action", Some(json!("block")), "action must be \"drop\" or \"alert\", not \"block\"".into()),
        ("l7fw", "block.0", Some(json!({"proto": "gopher"})), "block[0].proto: \"gopher\" is not known (known: any, tls, http, dns, ssh, unknown, bittorrent, smb)".into()),
        ("l7fw", "block.0", Some(json!({"proto": "tls", "host": "x"})), "block[0].host needs proto \"http\"".into()),
        ("l7fw", "max_inspect_packets", Some(json!(65)), "max_inspect_packets must be an integer in [1, 64]".into()),
        ("ipsec", "sas.0.spi", Some(json!(255)), "sas[0].spi must be an integer in [256, 4294967295]".into()),
        ("ipsec", "sas.0.key", Some(json!("0011")), "sas[0].key must be 16 or 32 bytes (AES-128/256), got 2".into()),
        ("ipsec", "replay_window", Some(json!(100)), "replay_window must be a multiple of 64".into()),
        // Missing required keys.
        ("firewall", "rules.0", Some(json!({})), "rules[0].action is required".into()),
        ("lb", "vip", None, "vip is required".into()),
        ("ips", "signatures", None, "signatures is required".into()),
        ("ips", "signatures.0", Some(json!({"content": "a"})), "signatures[0].id is required".into()),
        ("l7fw", "allow.0", Some(json!({"sni": "x"})), "allow[0].proto is required".into()),
        ("ipsec", "sas.0.tunnel_src", None, "sas[0].tunnel_src is required".into()),
        // null is not an absent field.
        ("nat", "port_block", Some(json!(null)), "port_block must be an integer in [1, 4096]".into()),
        ("monitor", "idle_timeout_ms", Some(json!(null)), "idle_timeout_ms must be an integer in [1, 86400000]".into()),
        ("ips", "signatures.1.content", Some(json!(null)), "signatures[1].content must be a string".into()),
    ];
    for (kind, path, v, want) in table {
        let cfg = edited(kind, path, v.clone());
        assert_eq!(&refused(kind, cfg.clone()), want, "{kind}: {cfg}");
    }
    // Not an object at all.
    assert_eq!(
        refused("firewall", json!(5)),
        "firewall config must be an object"
    );
}

#[test]
fn case_configs_and_the_runtime_options_beside_them_are_accepted() {
    let runtime = json!({"batch_size": 1, "fail_mode": "open", "timer_interval_ms": 5,
        "owner_cache": true, "pipeline_depth": 64, "spin_us": 0, "cpu_latency_us": null});
    for kind in TYPES {
        let mut cfg = edited(kind, "", None);
        make_nf(kind, &cfg).unwrap_or_else(|e| panic!("{kind}: {e}"));
        for (k, v) in runtime.as_object().unwrap() {
            cfg[k] = v.clone();
        }
        make_nf(kind, &cfg).unwrap_or_else(|e| panic!("{kind} with runtime options: {e}"));
        let rt = RuntimeConfig::from_config(&cfg).unwrap();
        assert_eq!(
            (rt.batch_size.0, rt.pipeline_depth.0, rt.spin_us.0),
            (1, 64, 0)
        );
        assert!(rt.owner_cache && rt.cpu_latency_us.is_none());
    }
}

/// An IPsec selector prefix or SA name that is not a string is refused, naming the field: read as
/// `any` (as the parser before the typed one did) a selector would match every packet.
#[test]
fn ipsec_selector_prefixes_and_names_must_be_strings() {
    for (path, v, field) in [
        ("sas.0.selectors.0.src", json!(5), "sas[0].selectors[0].src"),
        (
            "sas.0.selectors.0.dst",
            json!(null),
            "sas[0].selectors[0].dst",
        ),
        ("sas.0.name", json!(5), "sas[0].name"),
    ] {
        let c = edited("ipsec", path, Some(v));
        let err = make_nf("ipsec", &c)
            .err()
            .unwrap_or_else(|| panic!("{c} accepted"));
        assert!(
            err.contains(field) && err.contains("must be a string"),
            "{err}"
        );
    }
}

/// Every default written out gives the same packets and counters as the field left out.
#[test]
fn a_default_written_out_means_what_its_absence_means() {
    // Timeouts: the defaults written out in full (the case configs' older keys are left out
    // of both runs: one of the two ways only).
    let t = json!({"tcp_syn_ms": 120000, "tcp_established_ms": 432000000, "tcp_closing_ms": 120000,
                        "tcp_closed_ms": 10000, "udp_unreplied_ms": 30000, "udp_replied_ms": 120000,
                        "icmp_ms": 30000, "other_ms": 600000});
    let defaults = [
        (
            "firewall",
            json!({"rules": [], "default": "deny", "timeouts": t}),
        ),
        (
            "nat",
            json!({"ports": "20000-29999", "timeouts": t, "mapping_claim": "atomic"}),
        ),
        (
            "monitor",
            json!({"idle_timeout_ms": 30000, "counters": "record"}),
        ),
        (
            "lb",
            json!({"proto": "tcp", "on_backend_down": "keep", "timeouts": t,
                      "conn_claim": "atomic"}),
        ),
        (
            "ips",
            json!({"nocase": false, "action": "drop", "max_ooo_segments": 4096,
                       "max_ooo_bytes": 4194304, "window": 4194304, "timeouts": t,
                       "resync_on_ack": true, "record_writes": "checked"}),
        ),
        (
            "l7fw",
            json!({"block": [], "allow": [], "default": "allow", "unparsed": "block",
                        "signatures": [], "max_inspect_bytes": 16384, "max_inspect_packets": 8,
                        "timeouts": t, "record_writes": "checked"}),
        ),
        (
            "ipsec",
            json!({"replay_window": 128, "seq_block": 4096, "unprotected": "bypass"}),
        ),
    ];
    assert_eq!(defaults.len(), TYPES.len());
    for (kind, dflt) in defaults {
        let c = case(kind, if kind == "ips" { "split" } else { "basic" });
        let mut absent = c.config.clone();
        if dflt.get("timeouts").is_some() {
            for k in ["idle_timeout_ms", "close_timeout_ms"] {
                absent.as_object_mut().unwrap().remove(k);
            }
        }
        let mut written = absent.clone();
        for (k, v) in dflt.as_object().unwrap() {
            absent.as_object_mut().unwrap().remove(k);
            written[k] = v.clone();
        }
        if kind == "ips" {
            absent["alert_log"] = "/dev/null".into();
            written["alert_log"] = "/dev/null".into();
        }
        let run = |cfg: &Value| {
            let nf = make_nf(kind, cfg).unwrap_or_else(|e| panic!("{kind}: {cfg}: {e}"));
            let (out, nf, _) = run_frames_full(nf, Box::new(LocalStore::new()), "d", &c.frames, 4);
            (out, nf.stats())
        };
        assert_eq!(run(&absent), run(&written), "{kind}: {absent} vs {written}");
    }
}
