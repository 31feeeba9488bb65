//! Command-line parsing (no dependency; every error names the option).

use nfcore::stats::StatsAddr;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    pub nf_type: String,
    pub port: Option<String>,
    pub pcap_in: Option<PathBuf>,
    pub pcap_out: Option<PathBuf>,
    pub store: String,
    pub nf_id: String,
    pub instance: String,
    pub config: PathBuf,
    pub stats: Option<StatsAddr>,
    pub xdp: bool,
    /// Start in buffering mode (a move's target): queue up to this many packets until the state
    /// is imported with `PUT /state` (local store) or the queue is released with `POST /release`
    /// (state in the tier: the old instance has drained, so every write of it is in the tier).
    pub buffer: Option<usize>,
    /// The tenant whose keys the NF uses (`tn:<tenant>:...`; default `default`).
    pub tenant: String,
    /// ACL user of the tier (`AUTH user password`).
    pub store_user: Option<String>,
    /// File holding the tier's password (first line; never the password itself on the command
    /// line, where any local user can read it).
    pub store_password_file: Option<PathBuf>,
    /// `--store-wait N[:TIMEOUT_MS]`: each batch's writes acknowledged by N replicas.
    pub store_wait: Option<flowstore::WaitPolicy>,
}

/// Upper bound of `--buffer` (packets; each is held as a copy until the state arrives).
pub const MAX_BUFFER: usize = 1_000_000;

pub const USAGE: &str = "usage: nf <type> (--port IFACE | --pcap-in FILE [--pcap-out FILE]) \
--store redis://HOST:PORT|unix:///SOCKET|redis-cluster://HOST:PORT[,HOST:PORT...]|local \
--nf-id ID --instance ID --config FILE \
[--stats HOST:PORT|unix:///PATH] [--xdp] \
[--buffer PACKETS (with --stats)] [--tenant NAME] \
[--store-user NAME --store-password-file PATH] [--store-wait N[:TIMEOUT_MS]] \
(types: firewall, nat, monitor, lb, ips, l7fw, ipsec); or nf lb-backend --help";

pub fn parse(argv: &[String]) -> Result<Args, String> {
    let mut it = argv.iter();
    let nf_type = it
        .next()
        .filter(|t| !t.starts_with('-'))
        .ok_or(USAGE)?
        .clone();
    let (mut port, mut pin, mut pout, mut store, mut nf_id, mut inst, mut config, mut stats) =
        (None, None, None, None, None, None, None, None);
    let mut buffer = None;
    let (mut tenant, mut user, mut pwfile, mut wait) = (None, None, None, None);
    let mut xdp = false;
    while let Some(opt) = it.next() {
        if opt == "--xdp" {
            xdp = true;
            continue;
        }
        let slot: &mut Option<String> = match opt.as_str() {
            "--port" => &mut port,
            "--pcap-in" => &mut pin,
            "--pcap-out" => &mut pout,
            "--store" => &mut store,
            "--nf-id" => &mut nf_id,
            "--instance" => &mut inst,
            "--config" => &mut config,
            "--stats" => &mut stats,
            "--buffer" => &mut buffer,
            "--tenant" => &mut tenant,
            "--store-user" => &mut user,
            "--store-password-file" => &mut pwfile,
            "--store-wait" => &mut wait,
            _ => return Err(format!("unknown option {opt:?}; {USAGE}")),
        };
        let v = it.next().ok_or_else(|| format!("{opt} needs a value"))?;
        if slot.is_some() {
            return Err(format!("{opt} given twice"));
        }
        *slot = Some(v.clone());
    }
    if port.is_some() == pin.is_some() {
        return Err("give exactly one of --port or --pcap-in".into());
    }
    if port.is_some() && pout.is_some() {
        return Err("--pcap-out only goes with --pcap-in".into());
    }
    let store = store.ok_or(
        "--store is required (redis://HOST:PORT, unix:///SOCKET, redis-cluster://HOST:PORT,... or local)",
    )?;
    if store.starts_with("redis-cluster://") {
        flowstore::parse_cluster_url(&store).map_err(|e| format!("--store: {e}"))?;
    } else if store != "local" {
        flowstore::parse_url(&store)
            .map_err(|e| format!("--store: {e} (or redis-cluster://HOST:PORT,... or local)"))?;
    }
    let tenant = tenant.unwrap_or_else(|| flowstore::DEFAULT_TENANT.to_string());
    flowstore::check_tenant(&tenant).map_err(|e| format!("--tenant: {e}"))?;
    if let Some(u) = &user {
        if u.is_empty()
            || u.len() > 128
            || u.bytes()
                .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(format!(
                "--store-user must be 1-128 characters without spaces, not {u:?}"
            ));
        }
        if pwfile.is_none() {
            return Err("--store-user needs --store-password-file".into());
        }
    }
    let store_wait = wait.map(|w| flowstore::WaitPolicy::parse(&w)).transpose()?;
    if store == "local" {
        for (given, opt) in [
            (user.is_some(), "--store-user"),
            (pwfile.is_some(), "--store-password-file"),
            (store_wait.is_some(), "--store-wait"),
        ] {
            if given {
                return Err(format!("{opt} needs a Redis store, not --store local"));
            }
        }
    }
    let stats = stats.map(|s| StatsAddr::parse(&s)).transpose()?;
    let buffer = match buffer {
        None => None,
        Some(b) => {
            let n = b
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=MAX_BUFFER).contains(n))
                .ok_or_else(|| format!("--buffer must be 1-{MAX_BUFFER} packets, not {b:?}"))?;
            if stats.is_none() {
                return Err(
                    "--buffer needs --stats (released by PUT /state or POST /release)".into(),
                );
            }
            Some(n)
        }
    };
    let inst = inst.ok_or("--instance is required")?;
    if inst.is_empty() {
        return Err("--instance must not be empty".into());
    }
    Ok(Args {
        nf_type,
        port,
        pcap_in: pin.map(PathBuf::from),
        pcap_out: pout.map(PathBuf::from),
        store,
        nf_id: nf_id.ok_or("--nf-id is required")?,
        instance: inst,
        config: config.ok_or("--config is required")?.into(),
        stats,
        xdp,
        buffer,
        tenant,
        store_user: user,
        store_password_file: pwfile.map(PathBuf::from),
        store_wait,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Args, String> {
        parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn parses_and_rejects() {
        let a = p("firewall --pcap-in a.pcap --pcap-out b.pcap --store local --nf-id fw --instance i1 --config c.json")
            .unwrap();
        assert_eq!(a.nf_type, "firewall");
        assert_eq!(a.pcap_out, Some(PathBuf::from("b.pcap")));
        // A tier NF may start buffering too (released by POST /release after the old one drained).
        let a = p("ips --port x --store redis://h:1 --nf-id a --instance i --config c --stats unix:///r/i.stats --buffer 9")
            .unwrap();
        assert_eq!(a.buffer, Some(9));
        assert_eq!(a.stats, Some(StatsAddr::Unix("/r/i.stats".into())));
        let a = p("nat --port x --store unix:///r/redis.sock --nf-id a --instance i --config c --stats 127.0.0.1:0")
            .unwrap();
        assert_eq!(a.store, "unix:///r/redis.sock");
        assert_eq!(a.tenant, "default");
        assert_eq!(a.store_wait, None);
        let a = p("nat --port x --store redis-cluster://h:1,h:2 --nf-id a --instance i --config c --tenant acme \
                   --store-user acme-nf --store-password-file /r/pw --store-wait 1:50")
            .unwrap();
        assert_eq!(a.tenant, "acme");
        assert_eq!(a.store_user.as_deref(), Some("acme-nf"));
        assert_eq!(a.store_password_file, Some(PathBuf::from("/r/pw")));
        assert_eq!(
            a.store_wait,
            Some(flowstore::WaitPolicy {
                replicas: 1,
                timeout_ms: 50
            })
        );
        let a =
            p("nat --port x --store redis://h:1 --nf-id a --instance i --config c --store-wait 2")
                .unwrap();
        assert_eq!(
            a.store_wait.unwrap().timeout_ms,
            flowstore::WaitPolicy::DEFAULT_TIMEOUT_MS
        );
        for (bad, word) in [
            ("", "usage"),
            (
                "firewall --store local --nf-id a --instance i --config c",
                "--port or --pcap-in",
            ),
            (
                "firewall --port x --pcap-in y --store local --nf-id a --instance i --config c",
                "exactly one",
            ),
            (
                "firewall --port x --store mem --nf-id a --instance i --config c",
                "--store",
            ),
            (
                "firewall --port x --store local --instance i --config c",
                "--nf-id",
            ),
            (
                "firewall --port x --store local --nf-id a --instance i --config",
                "needs a value",
            ),
            ("firewall --port x --port y", "twice"),
            ("firewall --bogus 1", "unknown option"),
            (
                "firewall --port x --store unix://rel --nf-id a --instance i --config c",
                "ABSOLUTE",
            ),
            (
                "firewall --port x --store local --nf-id a --instance i --config c --stats s",
                "--stats",
            ),
            (
                "firewall --port x --store local --nf-id a --instance i --config c --stats h:1 --buffer 0",
                "--buffer must be",
            ),
            (
                "firewall --port x --store local --nf-id a --instance i --config c --stats h:1 --buffer x",
                "--buffer must be",
            ),
            (
                "firewall --port x --store local --nf-id a --instance i --config c --buffer 9",
                "--stats",
            ),
            ("firewall --port x --store redis-cluster://h --nf-id a --instance i --config c", "redis-cluster://"),
            ("firewall --port x --store redis://h:1 --nf-id a --instance i --config c --tenant Bad", "--tenant"),
            ("firewall --port x --store redis://h:1 --nf-id a --instance i --config c --tenant a{b}", "--tenant"),
            ("firewall --port x --store redis://h:1 --nf-id a --instance i --config c --store-user u", "--store-password-file"),
            ("firewall --port x --store local --nf-id a --instance i --config c --store-wait 1", "--store-wait"),
            ("firewall --port x --store redis://h:1 --nf-id a --instance i --config c --store-wait 0", "--store-wait"),
            ("firewall --port x --store redis://h:1 --nf-id a --instance i --config c --store-wait 1:0", "--store-wait"),
            ("firewall --port x --store redis://h:1 --nf-id a --instance i --config c --store-wait 1:x", "--store-wait"),
            ("firewall --port x --store local --nf-id a --instance i --config c --store-user u --store-password-file f", "--store-user"),
        ] {
            let e = p(bad).unwrap_err();
            assert!(e.contains(word), "{bad}: {e}");
        }
    }
}
