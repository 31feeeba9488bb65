//! `nf <type> --port IFACE|--pcap-in F [--pcap-out F] --store redis://...|unix:///...|local
//!  --nf-id ID --instance ID --config FILE [--stats HOST:PORT|unix:///PATH] [--xdp] [--buffer PACKETS]`
//!
//! Runs one NF instance until the input ends (pcap) or SIGINT/SIGTERM (live port). Prints the
//! final stats JSON on stdout. Operator errors: one line on stderr, exit status 2.
//!
//! `nf --version` prints the version; `nf --state-schema` the state record layouts it writes and
//! reads (JSON, [`nf::version::schema`]); `nf --check-config TYPE FILE` validates a config as a
//! start would (exit 0 and `{"ok": true}`, or exit 2 and `nf: config: ...` naming the field).
//!
//! `nf lb-backend --store redis://...|unix:///... --nf-id ID --backend ADDR:PORT --state up|down` marks a
//! load balancer's backend up or down in the tier and prints the pool.

use nf::{args, registry, version};

use flowstore::{CachedStore, FlowStore, KeySpace, LocalStore, RedisConfig, RedisStore};
use nfcore::config::RuntimeConfig;
use nfcore::runtime::{Runtime, TimeSource};
use nfcore::stats::Identity;
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
    let keys = KeySpace::new(&a.nf_id).map_err(|e| (2, e))?;
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
            sc.spawn(move || {
                let t = std::time::Instant::now();
                let r = RedisStore::connect(rc).map_err(|e| (1, e.to_string()));
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
    let store: Box<dyn FlowStore> = match store_res? {
        None => Box::new(LocalStore::new()),
        Some(redis) if opts.owner_cache => {
            Box::new(CachedStore::new(redis, keys.global("epoch"), 1 << 20))
        }
        Some(redis) => Box::new(redis),
    };
    let (dev, time, port_desc) = port_res?;
    let id = Identity {
        nf_type: a.nf_type.clone(),
        nf_id: a.nf_id.clone(),
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
    rt.init().map_err(|e| (1, e.to_string()))?;
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

/// `nf --check-config TYPE FILE`: what a start checks of the config (runtime options and the
/// NF's own), without starting.
fn check_config(argv: &[String]) -> Result<(), (i32, String)> {
    let [nf_type, file] = argv else {
        return Err((2, "usage: nf --check-config TYPE FILE".into()));
    };
    let cfg = nfcore::config::load(std::path::Path::new(file)).map_err(|e| (2, e))?;
    RuntimeConfig::from_config(&cfg).map_err(|e| (2, format!("config: {e}")))?;
    registry::make_nf(nf_type, &cfg).map_err(|e| (2, format!("config: {e}")))?;
    println!("{{\"ok\": true}}");
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
    const USAGE: &str = "usage: nf lb-backend --store redis://HOST:PORT|unix:///SOCKET --nf-id ID \
        --backend ADDR:PORT --state up|down";
    if argv.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return Ok(());
    }
    let get = |flag: &str| -> Result<String, (i32, String)> {
        let i = argv
            .iter()
            .position(|a| a == flag)
            .ok_or_else(|| (2, format!("missing {flag}; {USAGE}")))?;
        argv.get(i + 1)
            .cloned()
            .ok_or_else(|| (2, format!("{flag} needs a value; {USAGE}")))
    };
    let (store, nf_id, backend, state) = (
        get("--store")?,
        get("--nf-id")?,
        get("--backend")?,
        get("--state")?,
    );
    if let Some(a) = argv
        .iter()
        .step_by(2)
        .find(|a| !["--store", "--nf-id", "--backend", "--state"].contains(&a.as_str()))
    {
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
    flowstore::parse_url(&store).map_err(|e| (2, format!("--store (the shared tier): {e}")))?;
    let keys = KeySpace::new(&nf_id).map_err(|e| (2, e))?;
    let mut s = RedisStore::connect(RedisConfig::new(&store)).map_err(|e| (1, e.to_string()))?;
    match nf_lb::set_backend_state(&mut s, &keys, addr, up) {
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
