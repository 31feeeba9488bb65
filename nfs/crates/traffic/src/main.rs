//! `traffic gen --port IFACE [--flows N] [--pkts P] [--rate PPS] [--size BYTES] [--udp] [--run ID]
//!              [--src IP] [--dst IP] [--dst-port P] [--src-mac M] [--dst-mac M]`
//! `traffic sink --port IFACE [--run ID] [--expect N] [--duration-ms MS] [--idle-ms MS]
//!               [--esp-key HEX --esp-salt HEX]`
//!
//! The generator prints `{"sent": N, ...}`; the sink prints its report (JSON) when `--expect`
//! packets arrived, after `--idle-ms` without data once data started, or after `--duration-ms`.
//! With `--esp-key`/`--esp-salt` (an IPsec gateway's outbound SA) it also reads the markers of
//! ESP frames, decrypted after their arrival time is taken.

use netio::afpacket::{AfPacket, RingConfig};
use netio::{Batch, Device};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use traffic::esp::EspOpener;
use traffic::gen::{frame_count, frames, stamp, GenConfig};
use traffic::sink::SinkStats;
use traffic::Marker;

fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let v: Vec<u8> = s
        .split(':')
        .map(|x| u8::from_str_radix(x, 16))
        .collect::<Result<_, _>>()
        .map_err(|_| format!("bad MAC {s:?}"))?;
    v.try_into().map_err(|_| format!("bad MAC {s:?}"))
}

const USAGE: &str =
    "usage: traffic gen --port IFACE [--flows N] [--pkts P] [--rate PPS] [--size BYTES (60-1514)] \
[--udp] [--run ID] [--src IP] [--dst IP] [--dst-port P] [--src-mac M] [--dst-mac M]
       traffic sink --port IFACE [--run ID] [--expect N] [--duration-ms MS] [--idle-ms MS] \
[--esp-key HEX --esp-salt HEX]";
const GEN_OPTS: &[&str] = &[
    "port", "flows", "pkts", "rate", "size", "udp", "run", "src", "dst", "dst-port", "src-mac",
    "dst-mac",
];
const SINK_OPTS: &[&str] = &[
    "port",
    "run",
    "expect",
    "duration-ms",
    "idle-ms",
    "esp-key",
    "esp-salt",
];

/// The options of one subcommand; an option it does not know is an error (a typo must not fall back to a
/// default silently).
fn opts(args: &[String], known: &[&str]) -> Result<HashMap<String, String>, String> {
    let mut m = HashMap::new();
    let mut it = args.iter();
    while let Some(k) = it.next() {
        let Some(name) = k.strip_prefix("--") else {
            return Err(format!("unexpected argument {k:?}"));
        };
        if !known.contains(&name) {
            return Err(format!(
                "unknown option {k:?} (known: --{})",
                known.join(", --")
            ));
        }
        if name == "udp" {
            m.insert("udp".into(), "1".into());
            continue;
        }
        let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
        m.insert(name.to_string(), v.clone());
    }
    Ok(m)
}

fn get<T: std::str::FromStr>(m: &HashMap<String, String>, k: &str, d: T) -> Result<T, String> {
    match m.get(k) {
        None => Ok(d),
        Some(v) => v.parse().map_err(|_| format!("--{k}: bad value {v:?}")),
    }
}

fn gen(m: &HashMap<String, String>) -> Result<serde_json::Value, String> {
    let port = m.get("port").ok_or("--port is required")?;
    let cfg = GenConfig {
        run: get(m, "run", 1u32)?,
        flows: get(m, "flows", 1u32)?,
        pkts: get(m, "pkts", 1000u32)?,
        tcp: !m.contains_key("udp"),
        frame_len: get(m, "size", 64usize)?,
        src: get(m, "src", "10.0.0.1".parse().unwrap())?,
        dst: get(m, "dst", "10.0.0.2".parse().unwrap())?,
        src_mac: parse_mac(m.get("src-mac").map_or("02:00:00:00:00:01", |s| s))?,
        dst_mac: parse_mac(m.get("dst-mac").map_or("02:00:00:00:00:02", |s| s))?,
        dst_port: get(m, "dst-port", 5001u16)?,
    };
    if cfg.flows == 0 {
        return Err("--flows must be >= 1".into());
    }
    if !(60..=1514).contains(&cfg.frame_len) {
        return Err(format!(
            "--size must be 60..1514 bytes, got {}",
            cfg.frame_len
        ));
    }
    if cfg.src.is_ipv4() != cfg.dst.is_ipv4() {
        return Err("--src and --dst must be of one address family".into());
    }
    let rate: f64 = get(m, "rate", 10_000.0)?;
    if rate.is_nan() || rate <= 0.0 {
        return Err("--rate must be > 0".into());
    }
    let mut dev = AfPacket::open(port, RingConfig::for_batch(32)).map_err(|e| e.to_string())?;
    let total = frame_count(&cfg);
    let mut all = frames(&cfg);
    let mut b = Batch::with_capacity(32);
    let t0 = Instant::now();
    let mut sent = 0usize;
    let mut i = 0u64;
    while i < total {
        // Pace: do not get ahead of rate.
        let due = Duration::from_secs_f64(i as f64 / rate);
        if let Some(w) = due.checked_sub(t0.elapsed()) {
            std::thread::sleep(w);
        }
        b.clear();
        let now_due = ((t0.elapsed().as_secs_f64() * rate) as u64 + 1).min(total);
        while !b.is_full() && i < now_due.max(i + 1) && i < total {
            let Some(mut g) = all.next() else { break };
            stamp(&mut g, wall_ns());
            b.push(&g.frame, 0);
            i += 1;
        }
        let keep = vec![true; b.len()];
        sent += dev.send(&b, &keep, 0).map_err(|e| e.to_string())?;
    }
    let data = u64::from(cfg.flows) * u64::from(cfg.pkts);
    Ok(
        serde_json::json!({"sent": sent, "data_packets": data, "frames": i, "seconds": t0.elapsed().as_secs_f64()}),
    )
}

fn sink(m: &HashMap<String, String>) -> Result<serde_json::Value, String> {
    let port = m.get("port").ok_or("--port is required")?;
    let run: Option<u32> = m
        .get("run")
        .map(|r| r.parse().map_err(|_| "--run: bad value"))
        .transpose()?;
    let expect: Option<u64> = m
        .get("expect")
        .map(|r| r.parse().map_err(|_| "--expect: bad value"))
        .transpose()?;
    let duration = Duration::from_millis(get(m, "duration-ms", 60_000u64)?);
    let idle = Duration::from_millis(get(m, "idle-ms", 2_000u64)?);
    let esp = match (m.get("esp-key"), m.get("esp-salt")) {
        (Some(k), Some(s)) => Some(EspOpener::new(k, s)?),
        (None, None) => None,
        _ => return Err("--esp-key and --esp-salt go together".into()),
    };
    let mut dev = AfPacket::open(port, RingConfig::for_batch(64)).map_err(|e| e.to_string())?;
    println!("{}", serde_json::json!({"ready": true}));
    let mut st = SinkStats::new(run);
    let mut b = Batch::with_capacity(64);
    let t0 = Instant::now();
    let mut last = None::<Instant>;
    while t0.elapsed() < duration {
        if expect.is_some_and(|e| st.received() >= e) || last.is_some_and(|l| l.elapsed() > idle) {
            break;
        }
        dev.recv(&mut b, 0).map_err(|e| e.to_string())?;
        let now = wall_ns();
        for f in b.iter() {
            let Ok(p) = packet::Parsed::new_checked(f) else {
                continue;
            };
            let esp_mk = || esp.as_ref().and_then(|o| o.marker(f));
            if let Some(mk) = Marker::read(p.payload(f)).or_else(esp_mk) {
                st.observe(&mk, now);
                last = Some(Instant::now());
            }
        }
    }
    Ok(st.report(expect))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return;
    }
    let r = match args.first().map(|s| s.as_str()) {
        Some("gen") => opts(&args[1..], GEN_OPTS).and_then(|m| gen(&m)),
        Some("sink") => opts(&args[1..], SINK_OPTS).and_then(|m| sink(&m)),
        _ => Err(USAGE.into()),
    };
    match r {
        Ok(v) => println!("{v}"),
        Err(e) => {
            eprintln!("traffic: {e}");
            std::process::exit(2);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn unknown_options_are_errors_not_ignored() {
        // `--rat 100` (a typo of --rate) must not be ignored: the run would go at the default rate
        let e = opts(&args(&["--port", "x", "--rat", "100"]), GEN_OPTS).unwrap_err();
        assert!(
            e.contains("unknown option \"--rat\"") && e.contains("--rate"),
            "{e}"
        );
        assert!(opts(&args(&["--port", "x", "--expect", "5"]), GEN_OPTS).is_err());
        let m = opts(&args(&["--port", "x", "--udp", "--rate", "5"]), GEN_OPTS).unwrap();
        assert_eq!(
            (
                m["port"].as_str(),
                m["rate"].as_str(),
                m.contains_key("udp")
            ),
            ("x", "5", true)
        );
        assert!(opts(&args(&["--port", "x", "--expect", "5"]), SINK_OPTS).is_ok());
    }

    #[test]
    fn out_of_range_sizes_and_zero_flows_are_errors_not_clamped() {
        for (k, v, want) in [
            ("size", "9000", "--size"),
            ("size", "10", "--size"),
            ("flows", "0", "--flows"),
        ] {
            let m = opts(
                &args(&["--port", "nosuchif0", &format!("--{k}"), v]),
                GEN_OPTS,
            )
            .unwrap();
            let e = gen(&m).unwrap_err();
            assert!(e.starts_with(want), "{e}");
        }
    }
}
