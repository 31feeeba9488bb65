//! `nf <type> --port IFACE|--pcap-in F [--pcap-out F]
//!  --store redis://...|unix:///...|redis-cluster://HOST:PORT,...|local
//!  --nf-id ID --instance ID --config FILE [--stats HOST:PORT|unix:///PATH] [--xdp] [--buffer PACKETS]
//!  [--tenant NAME] [--store-user NAME --store-password-file PATH] [--store-wait N[:TIMEOUT_MS]]`
//!
//! Runs one NF instance until the input ends (pcap) or SIGINT/SIGTERM (live port). Prints the
//! final stats JSON on stdout. Operator errors: one line on stderr, exit status 2.
//!
//! `nf --version` prints the version; `nf --state-schema` the state record layouts it writes and
//! reads (JSON, [`nf::version::schema`]); `nf --check-config TYPE FILE [--running FILE]` validates
//! a config as a start would, and with `--running` as a change of the running config (exit 0 and
//! `{"ok": true}`, or exit 2 and `nf: config: ...` naming the field).
//!
//! `nf lb-backend --store redis://...|unix:///...|redis-cluster://... --nf-id ID --backend ADDR:PORT
//!  --state up|down [--tenant NAME] [--store-user NAME --store-password-file PATH]` marks a load
//! balancer's backend up or down in the tier and prints the pool.

use nf::{args, registry, version};

use flowstore::{
    CachedStore, ClusterStore, FlowStore, KeySpace, LocalStore, RedisConfig, RedisStore, StoreError,
};
use nfcore::config::RuntimeConfig;
use nfcore::runtime::{Runtime, TimeSource};
use nfcore::stats::Identity;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn main() {
    match run() {
        Ok(()) => {}
        Err((code, msg)) => {
            eprintln!("nf: {msg}");
            std::process::exit(code);
        }
    }
}

fn run() -> Result<(), (i32, String)> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if matches!(argv.first().map(String::as_str), Some("--help" | "-h")) {
        println!("{}", args::USAGE);
        return Ok(());
    }
    match argv.first().map(String::as_str) {
        Some("lb-backend") => return lb_backend(&argv[1..]),
        Some("--version") => {
            println!("{}", version::version());
            return Ok(());
        }
        Some("--state-schema") => {
            println!("{}", version::schema());
            return Ok(());
        }
        Some("--check-config") => return check_config(&argv[1..]),
        _ => {}
    }
    let a = args::parse(&argv).map_err(|e| (2, e))?;
    let cfg = nfcore::config::load(&a.config).map_err(|e| (2, e))?;
    let runtime = RuntimeConfig::from_config(&cfg).map_err(|e| (2, format!("config: {e}")))?;
    let runtime_cfg = runtime;
    let opts = runtime.options();
    let depth = runtime.pipeline_depth.0 as usize;
    let spin = runtime.spin_us.0;
    let cpu_latency = runtime.cpu_latency_us.map(|us| us.0 as u32);
    let nf = registry::make_nf(&a.nf_type, &cfg).map_err(|e| (2, format!("config: {e}")))?;
    let keys = KeySpace::for_tenant(&a.tenant, &a.nf_id).map_err(|e| (2, e))?;
    let password = a
        .store_password_file
        .as_deref()
        .map(read_password)
        .transpose()
        .map_err(|e| (2, e))?;
    // Held from before ready to the end of the run; released when dropped, or by the kernel if
    // the process dies. Not being allowed to hold it costs latency, not correctness: the NF runs
    // on with a warning.
    let cpu_latency_held = cpu_latency.and_then(|us| {
        nfcore::cpu_latency::CpuLatencyRequest::hold(us)
            .inspect(|_| eprintln!("nf: holding a CPU wake-up latency bound of {us} us"))
            .map_err(|e| eprintln!("nf: warning: config cpu_latency_us {us} not applied: {e}"))
            .ok()
    });
    // Start-up is on the failover path (a replacement in a warm slot is ready when /health answers):
    // the Redis connect (through the namespace's relay) and the port set-up (AF_PACKET ring) are
    // independent I/O, so they run in parallel. Ready (/health 200) still comes only after both and the
    // NF's init, i.e. when packets can be processed. Phase times go to stderr (the instance's log).
    let t0 = std::time::Instant::now();
    let ms = |t: std::time::Instant| t.elapsed().as_secs_f64() * 1e3;
    let (store_res, port_res, store_ms) = std::thread::scope(|sc| {
        let redis = (a.store != "local").then(|| {
            let mut rc = RedisConfig::new(&a.store);
            rc.spin = std::time::Duration::from_micros(spin);
            rc.user = a.store_user.clone();
            rc.password = password.clone();
            rc.wait = a.store_wait;
            let probe = keys.global("probe");
            let tenant = a.tenant.as_str();
            sc.spawn(move || {
                let t = std::time::Instant::now();
                let r = Tier::connect(rc)
                    .and_then(|mut t| t.check_access(&probe).map(|_| t))
                    .map_err(|e| (1, access_error(tenant, e)));
                (r, ms(t))
            })
        });
        let port = open_device(&a, opts.batch_size);
        let (store, store_ms) = match redis {
            None => (Ok(None), 0.0),
            Some(h) => match h.join() {
                Ok((r, t)) => (r.map(Some), t),
                Err(_) => (Err((1, "redis connect thread panicked".to_string())), 0.0),
            },
        };
        (store, port, store_ms)
    });
    let port_ms = ms(t0);
    let epoch = keys.global("epoch");
    let store: Box<dyn FlowStore> = match store_res? {
        None => Box::new(LocalStore::new()),
        Some(Tier::One(r)) if opts.owner_cache => Box::new(CachedStore::new(r, epoch, 1 << 20)),
        Some(Tier::Cluster(c)) if opts.owner_cache => Box::new(CachedStore::new(c, epoch, 1 << 20)),
        Some(Tier::One(r)) => Box::new(r),
        Some(Tier::Cluster(c)) => Box::new(c),
    };
    let (dev, time, port_desc) = port_res?;
    let id = Identity {
        nf_type: a.nf_type.clone(),
        nf_id: a.nf_id.clone(),
        tenant: a.tenant.clone(),
        instance: a.instance.clone(),
        store_kind: store.kind().into(),
        port: port_desc,
        cpu_latency_us: cpu_latency_held.as_ref().map(|r| r.us()),
    };
    let mut rt = Runtime::new(nf, store, dev, keys, opts);
    rt.set_pipeline_depth(depth);
    rt.set_runtime_config(runtime_cfg);
    if let Some(cap) = a.buffer {
        rt.set_buffering(cap);
    }
    let mut stats_bound = None;
    if let Some(addr) = &a.stats {
        // Answered by the runtime between batches: a drain (POST /drain), local state moved
        // (GET/PUT /state), a buffering instance released (POST /release).
        let control = Some(rt.control_handle());
        let bound = nfcore::stats::serve_with_control(addr, rt.stats(), id.clone(), control)
            .map_err(|e| (1, format!("stats {addr:?}: {e}")))?;
        eprintln!("nf: stats on {bound} (/stats, /health)");
        stats_bound = Some(bound);
    }
    let serve_ms = ms(t0);
    // SAFETY: installing an async-signal-safe handler (it only stores to an atomic).
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    rt.init().map_err(|e| match e {
        // The tier's state cannot take this config (e.g. a NAT pair retired earlier): the
        // operator's error, named like any config error.
        nfcore::Refused::Invalid(e) => (2, format!("config: {e}")),
        nfcore::Refused::Store(e) => (1, e.to_string()),
    })?;
    eprintln!(
        "nf: ready in {:.1} ms (store connect {store_ms:.1}, store+port {port_ms:.1}, stats server {:.1}, init {:.1})",
        ms(t0),
        serve_ms - port_ms,
        ms(t0) - serve_ms,
    );
    rt.run(time, &STOP).map_err(|e| (1, e.to_string()))?;
    if let Err(e) = rt.release() {
        eprintln!("nf: release on stop: {e}");
    }
    println!("{}", rt.stats().to_json(&id));
    // A clean stop removes its endpoint's socket file (after a crash the next bind replaces it).
    if let Some(nfcore::stats::Bound::Unix(p)) = stats_bound {
        let _ = std::fs::remove_file(p);
    }
    Ok(())
}

/// The state tier: one Redis, or a Redis Cluster (`redis-cluster://`).
enum Tier {
    One(RedisStore),
    Cluster(ClusterStore),
}

impl Tier {
    fn connect(rc: RedisConfig) -> Result<Tier, StoreError> {
        if rc.url.starts_with("redis-cluster://") {
            ClusterStore::connect(rc).map(Tier::Cluster)
        } else {
            RedisStore::connect(rc).map(Tier::One)
        }
    }

    /// Read one key of the NF's key space: a tier whose ACL does not cover the tenant's keys
    /// answers `NOPERM` here, at start, rather than on every batch.
    fn check_access(&mut self, key: &[u8]) -> Result<(), StoreError> {
        let mut out = Vec::new();
        let keys = [key.to_vec()];
        match self {
            Tier::One(r) => r.get_many(&keys, &mut out),
            Tier::Cluster(c) => c.get_many(&keys, &mut out),
        }
    }

    fn into_store(self) -> Box<dyn FlowStore> {
        match self {
            Tier::One(r) => Box::new(r),
            Tier::Cluster(c) => Box::new(c),
        }
    }
}

/// A store error at start, with what to check when the tier refused the tenant's keys.
fn access_error(tenant: &str, e: StoreError) -> String {
    if e.0.contains("NOPERM") {
        format!(
            "the tier refused the keys of tenant {tenant:?} (tn:{tenant}:*): {e} (the --store-user's ACL key pattern must cover them)"
        )
    } else {
        e.to_string()
    }
}

/// The tier's password: the first line of `path` (its line end removed). Errors name the option.
fn read_password(path: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--store-password-file {}: {e}", path.display()))?;
    let pw = text.lines().next().unwrap_or("");
    if pw.is_empty() {
        return Err(format!(
            "--store-password-file {}: the first line (the password) is empty",
            path.display()
        ));
    }
    Ok(pw.to_string())
}

/// `nf --check-config TYPE FILE [--running FILE]`: what a start checks of the config (runtime
/// options and the NF's own), without starting. With `--running` (the config the NF runs now),
/// also whether the state it keeps in the tier can take the change
/// ([`nfcore::NetworkFunction::check_change`]), as a change in place checks it; a running config
/// this version cannot read is not judged (`change_checked` false). Prints `{"ok": true,
/// "record_lifetime_ms": N|null, "change_checked": bool}`
/// ([`nfcore::NetworkFunction::record_lifetime_ms`]).
fn check_config(argv: &[String]) -> Result<(), (i32, String)> {
    const USAGE: &str = "usage: nf --check-config TYPE FILE [--running FILE]";
    let (nf_type, file, running) = match argv {
        [t, f] => (t, f, None),
        [t, f, flag, r] if flag == "--running" => (t, f, Some(r)),
        _ => return Err((2, USAGE.into())),
    };
    let cfg = nfcore::config::load(std::path::Path::new(file)).map_err(|e| (2, e))?;
    RuntimeConfig::from_config(&cfg).map_err(|e| (2, format!("config: {e}")))?;
    let nf = registry::make_nf(nf_type, &cfg).map_err(|e| (2, format!("config: {e}")))?;
    let mut checked = false;
    if let Some(r) = running {
        let old = nfcore::config::load(std::path::Path::new(r)).map_err(|e| (2, e))?;
        if let Ok(cur) = registry::make_nf(nf_type, &old) {
            cur.check_change(&cfg)
                .map_err(|e| (2, format!("config: {e}")))?;
            checked = true;
        }
    }
    println!(
        "{}",
        serde_json::json!({"ok": true, "record_lifetime_ms": nf.record_lifetime_ms(),
                           "change_checked": checked})
    );
    Ok(())
}

type Opened = (Box<dyn netio::Device>, TimeSource, String);

/// The packet device: the live port `--port` (AF_PACKET or XDP) or the pcap files.
fn open_device(a: &args::Args, batch: usize) -> Result<Opened, (i32, String)> {
    Ok(match &a.port {
        Some(iface) => (
            netio::open_port(iface, a.xdp, batch).map_err(|e| (1, e.to_string()))?,
            TimeSource::Wall,
            iface.clone(),
        ),
        None => (
            Box::new(
                netio::pcap::PcapDevice::open(a.pcap_in.as_deref(), a.pcap_out.as_deref())
                    .map_err(|e| (1, e.to_string()))?,
            ),
            TimeSource::Packets,
            "pcap".into(),
        ),
    })
}

/// `nf lb-backend`: mark a load balancer backend up or down in the shared pool.
fn lb_backend(argv: &[String]) -> Result<(), (i32, String)> {
    const USAGE: &str = "usage: nf lb-backend --store redis://HOST:PORT|unix:///SOCKET|redis-cluster://HOST:PORT,... \
        --nf-id ID --backend ADDR:PORT --state up|down [--tenant NAME] \
        [--store-user NAME --store-password-file PATH]";
    const OPTS: [&str; 7] = [
        "--store",
        "--nf-id",
        "--backend",
        "--state",
        "--tenant",
        "--store-user",
        "--store-password-file",
    ];
    if argv.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return Ok(());
    }
    let opt = |flag: &str| -> Result<Option<String>, (i32, String)> {
        match argv.iter().position(|a| a == flag) {
            None => Ok(None),
            Some(i) => argv
                .get(i + 1)
                .cloned()
                .map(Some)
                .ok_or_else(|| (2, format!("{flag} needs a value; {USAGE}"))),
        }
    };
    let get = |flag: &str| -> Result<String, (i32, String)> {
        opt(flag)?.ok_or_else(|| (2, format!("missing {flag}; {USAGE}")))
    };
    let (store, nf_id, backend, state) = (
        get("--store")?,
        get("--nf-id")?,
        get("--backend")?,
        get("--state")?,
    );
    if let Some(a) = argv.iter().step_by(2).find(|a| !OPTS.contains(&a.as_str())) {
        return Err((2, format!("unknown argument {a:?}; {USAGE}")));
    }
    let addr: std::net::SocketAddr = backend
        .parse()
        .map_err(|_| (2, format!("--backend must be ADDR:PORT, not {backend:?}")))?;
    let up = match state.as_str() {
        "up" => true,
        "down" => false,
        s => return Err((2, format!("--state must be up or down, not {s:?}"))),
    };
    if store.starts_with("redis-cluster://") {
        flowstore::parse_cluster_url(&store).map_err(|e| (2, format!("--store: {e}")))?;
    } else {
        flowstore::parse_url(&store).map_err(|e| (2, format!("--store (the shared tier): {e}")))?;
    }
    let tenant = opt("--tenant")?.unwrap_or_else(|| flowstore::DEFAULT_TENANT.to_string());
    let keys =
        KeySpace::for_tenant(&tenant, &nf_id).map_err(|e| (2, format!("--tenant/--nf-id: {e}")))?;
    let mut rc = RedisConfig::new(&store);
    rc.user = opt("--store-user")?;
    rc.password = opt("--store-password-file")?
        .map(|p| read_password(Path::new(&p)))
        .transpose()
        .map_err(|e| (2, e))?;
    if rc.user.is_some() && rc.password.is_none() {
        return Err((2, "--store-user needs --store-password-file".into()));
    }
    let mut s = Tier::connect(rc)
        .map_err(|e| (1, e.to_string()))?
        .into_store();
    match nf_lb::set_backend_state(s.as_mut(), &keys, addr, up) {
        Ok(true) => {}
        Ok(false) => return Err((2, format!("--backend {addr} is not in the pool of {nf_id}"))),
        Err(e) => return Err((1, e)),
    }
    let mut v = Vec::new();
    s.get_many(&[keys.global(nf_lb::POOL)], &mut v)
        .map_err(|e| (1, e.to_string()))?;
    print!(
        "{}",
        String::from_utf8_lossy(&v.pop().flatten().unwrap_or_default())
    );
    Ok(())
}
