//! L7 firewall: case directory in local and Redis modes and with two instances alternating
//! (classification continued across instances); a ClientHello split at every byte and a large
//! one over several segments; the inspection limit; config errors.

use flowstore::test_redis::TestRedis;
use flowstore::{LocalStore, RedisConfig, RedisStore};
use nf_l7fw::{tls, L7Firewall};
use nfcore::harness::{case, frame_from_json, run_alternating, run_frames_full, verdicts};
use packet::build::{FrameSpec, Transport};

/// `basic`, and `keepalive`: every request of a keep-alive HTTP connection (also pipelined, also
/// after a body) and every DNS query on a TCP connection is classified, not only the first.
#[test]
fn cases_local_redis_and_alternating() {
    for name in ["basic", "keepalive"] {
        case_local_redis_and_alternating(name);
    }
}

fn case_local_redis_and_alternating(name: &str) {
    let redis = TestRedis::start().expect("redis-server");
    let case = case("l7fw", name);
    let want: Vec<String> = serde_json::from_value(case.expected["verdicts"].clone()).unwrap();
    let mk = || Box::new(L7Firewall::from_config(&case.config).unwrap());
    for batch in [1, 4, 32] {
        let (local, nf, _) = run_frames_full(
            mk(),
            Box::new(LocalStore::new()),
            &format!("l7l{name}"),
            &case.frames,
            batch,
        );
        assert_eq!(verdicts(&local), want, "{name}: local batch {batch}");
        let st = nf.stats();
        for (k, v) in case.expected["counters"].as_object().unwrap() {
            assert_eq!(
                &st[k], v,
                "{name}: local batch {batch}: counter {k} in {st}"
            );
        }
        let s = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
        let (remote, nf, _) = run_frames_full(
            mk(),
            Box::new(s),
            &format!("l7r{name}{batch}"),
            &case.frames,
            batch,
        );
        assert_eq!(remote, local, "{name}: redis batch {batch}");
        assert_eq!(nf.stats(), st, "{name}: redis batch {batch}: counters");
    }
    let alt = run_alternating(
        || {
            let s = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
            (mk(), Box::new(s))
        },
        &format!("l7alt{name}"),
        &case.frames,
    );
    assert_eq!(verdicts(&alt), want, "{name}: two instances alternating");
}

/// A TLS connection whose ClientHello is cut at `cuts` (no handshake; the first payload starts
/// the classification).
fn hello_frames(hello: &[u8], cuts: &[usize]) -> Vec<(u64, Vec<u8>)> {
    let (c, s) = ("10.0.0.1".parse().unwrap(), "192.0.2.1".parse().unwrap());
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(hello.len());
    let mut out: Vec<Vec<u8>> = bounds
        .windows(2)
        .map(|w| {
            let t = Transport::Tcp {
                seq: 1 + w[0] as u32,
                ack: 1,
                flags: packet::TCP_ACK,
            };
            let mut f = FrameSpec::new(c, s, 5555, 443, t);
            f.payload = &hello[w[0]..w[1]];
            f.build()
        })
        .collect();
    // Then the server answers.
    let t = Transport::Tcp {
        seq: 1,
        ack: 1,
        flags: packet::TCP_ACK,
    };
    let mut f = FrameSpec::new(s, c, 443, 5555, t);
    f.payload = b"server hello";
    out.push(f.build());
    out.into_iter()
        .enumerate()
        .map(|(i, f)| (i as u64 * 1_000_000, f))
        .collect()
}

#[test]
fn client_hello_split_anywhere_is_classified() {
    let redis = TestRedis::start().expect("redis-server");
    let cfg = serde_json::json!({"block": [{"proto": "tls", "sni": "*.bad.example"}]});
    for (sni, blocked) in [("a.bad.example", true), ("a.good.example", false)] {
        let hello = tls::build_client_hello(Some(sni), 0);
        for cut in 1..hello.len() {
            let frames = hello_frames(&hello, &[cut]);
            let store: Box<dyn flowstore::FlowStore> = if cut % 10 == 0 {
                Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap())
            } else {
                Box::new(LocalStore::new())
            };
            let (out, nf, _) = run_frames_full(
                Box::new(L7Firewall::from_config(&cfg).unwrap()),
                store,
                &format!("l7s{cut}{blocked}"),
                &frames,
                1 + cut % 3,
            );
            let v = verdicts(&out);
            let want = if blocked {
                vec!["forward", "drop", "drop"]
            } else {
                vec!["forward", "forward", "forward"]
            };
            assert_eq!(v, want, "{sni} cut at {cut}");
            assert_eq!(nf.stats()["classified"]["tls"], 1, "{sni} cut at {cut}");
        }
    }
    // A post-quantum-sized hello over three segments.
    let big = tls::build_client_hello(Some("x.bad.example"), 2500);
    let (out, _, _) = run_frames_full(
        Box::new(L7Firewall::from_config(&cfg).unwrap()),
        Box::new(LocalStore::new()),
        "l7big",
        &hello_frames(&big, &[1000, 2000]),
        4,
    );
    assert_eq!(verdicts(&out), vec!["forward", "forward", "drop", "drop"]);
}

#[test]
fn inspection_limit_decides_with_what_it_has() {
    // An unfinished ClientHello at the packet limit is TLS with an unparsed name.
    let hello = tls::build_client_hello(Some("x.example"), 0);
    for (unparsed, last) in [("block", "drop"), ("allow", "forward")] {
        let cfg = serde_json::json!({"max_inspect_packets": 2, "unparsed": unparsed});
        let (out, nf, _) = run_frames_full(
            Box::new(L7Firewall::from_config(&cfg).unwrap()),
            Box::new(LocalStore::new()),
            "l7lim",
            &hello_frames(&hello, &[5, 10]),
            1,
        );
        assert_eq!(
            verdicts(&out)[..2],
            ["forward", last],
            "unparsed {unparsed}"
        );
        assert_eq!(nf.stats()["unparsed"], 1);
        assert_eq!(nf.stats()["classified"]["tls"], 1);
    }
}

#[test]
fn config_errors_name_the_field() {
    for (bad, field) in [
        (
            serde_json::json!({"block": [{"proto": "tls", "host": "x"}]}),
            "block[0].host",
        ),
        (
            serde_json::json!({"block": [{"proto": "gopher"}]}),
            "block[0].proto",
        ),
        (
            serde_json::json!({"allow": [{"sni": "x"}]}),
            "allow[0].proto",
        ),
        (serde_json::json!({"block": {"proto": "tls"}}), "block"),
        (serde_json::json!({"default": "maybe"}), "default"),
        (serde_json::json!({"unparsed": "x"}), "unparsed"),
        (
            serde_json::json!({"signatures": [{"name": "tls", "content": "x"}]}),
            "signatures[0].name",
        ),
        (
            serde_json::json!({"signatures": [{"name": "Bad Name", "content": "x"}]}),
            "signatures[0].name",
        ),
        (
            serde_json::json!({"signatures": [{"name": "p", "hex": "zz"}]}),
            "signatures[0]",
        ),
        (
            serde_json::json!({"signatures": [{"name": "p"}]}),
            "signatures[0]",
        ),
        (
            serde_json::json!({"max_inspect_bytes": 1}),
            "max_inspect_bytes",
        ),
        (serde_json::json!({"blocks": []}), "blocks"),
    ] {
        let e = L7Firewall::from_config(&bad).err().unwrap();
        assert!(e.contains(field), "{bad}: {e}");
    }
    // A configured signature name becomes a protocol rules can name.
    let ok = serde_json::json!({"signatures": [{"name": "myproto", "hex": "4d5950"}],
                                "block": [{"proto": "myproto"}]});
    assert!(L7Firewall::from_config(&ok).is_ok());
}

#[test]
fn blocked_flow_stays_blocked_while_active_and_expires_when_idle() {
    let cfg = serde_json::json!({"block": [{"proto": "tls", "sni": "*.bad.example"}], "idle_timeout_ms": 1000});
    let hello = tls::build_client_hello(Some("a.bad.example"), 0);
    let mut frames = hello_frames(&hello, &[])[..1].to_vec();
    let (c, s) = ("10.0.0.1".parse().unwrap(), "192.0.2.1".parse().unwrap());
    let data = |t_ms: u64, seq: u32| {
        let t = Transport::Tcp {
            seq,
            ack: 1,
            flags: packet::TCP_ACK,
        };
        let mut f = FrameSpec::new(c, s, 5555, 443, t);
        f.payload = b"more data";
        (t_ms * 1_000_000, f.build())
    };
    // Every 400 ms for 4 s (4x the idle timeout), then 3 s of silence (another flow's packet at
    // 6 s lets the due timer fire), then one more.
    for i in 1..=10u64 {
        frames.push(data(i * 400, 1000 + i as u32));
    }
    let mut other = FrameSpec::new(s, c, 53, 53, Transport::Udp);
    other.payload = b"x";
    frames.push((6_000_000_000, other.build()));
    frames.push(data(7000, 2000));
    for store in ["local", "redis"] {
        let redis = TestRedis::start().expect("redis-server");
        let st: Box<dyn flowstore::FlowStore> = if store == "local" {
            Box::new(LocalStore::new())
        } else {
            Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap())
        };
        let (out, nf, _) = run_frames_full(
            Box::new(L7Firewall::from_config(&cfg).unwrap()),
            st,
            "l7idle",
            &frames,
            1,
        );
        let v = verdicts(&out);
        assert!(v[..11].iter().all(|x| *x == "drop"), "{store}: {v:?}");
        // The TLS flow (due at 5 s, fired at 6 s) and the UDP one (due at 7 s).
        assert_eq!(nf.stats()["expired"], 2, "{store}");
        // After expiry the flow is new to the NF: its mid-stream bytes are "unknown", allowed.
        assert_eq!(v[12], "forward", "{store}");
        assert_eq!(
            nf.stats()["classified"]["unknown"],
            2,
            "{store}: the UDP flow and this one"
        );
    }
}

/// Timeouts per protocol and phase (default config): a blocked established TCP flow idle for
/// 10 min is still blocked (before: forgotten after 60 s, its bytes then allowed as `unknown`);
/// 130 s after both FINs it is forgotten (closing: 120 s); a blocked UDP flow never answered is
/// forgotten after 30 s idle. Local and Redis, batch by batch, and two instances alternating.
#[test]
fn timeouts_per_protocol_and_phase() {
    let cfg = serde_json::json!({"block": [{"proto": "tls", "sni": "*.bad.example"},
                                           {"proto": "dns", "qname": "*.tracker.example"}]});
    let hello = hex(&tls::build_client_hello(Some("a.bad.example"), 0));
    let query = hex(&nf_l7fw::dns::build_query("x.tracker.example", 7));
    let (c, s) = ("10.0.0.1", "192.0.2.1");
    let tcp = |t: u64, out: bool, flags: &str, seq: u32, data: &str| {
        let (src, dst, sp, dp) = if out {
            (c, s, 40000, 443)
        } else {
            (s, c, 443, 40000)
        };
        serde_json::json!({"t_ms": t, "src": src, "dst": dst, "sport": sp, "dport": dp,
                           "flags": flags, "seq": seq, "payload_hex": data})
    };
    let udp = |t: u64, data: &str| {
        serde_json::json!({"t_ms": t, "src": c, "dst": "192.0.2.53", "sport": 5353, "dport": 53,
                           "proto": "udp", "payload_hex": data})
    };
    let n = hello.len() as u32 / 2;
    let rows = [
        (tcp(0, true, "S", 99, ""), "forward"),
        (tcp(1, false, "SA", 499, ""), "forward"),
        (tcp(2, true, "A", 100, ""), "forward"),
        (tcp(3, true, "PA", 100, &hello), "drop"),
        (tcp(600_003, true, "PA", 100 + n, "6d6f7265"), "drop"),
        (tcp(600_004, false, "FA", 500, ""), "drop"),
        (tcp(600_005, true, "FA", 104 + n, ""), "drop"),
        (tcp(730_005, true, "PA", 105 + n, "6d6f7265"), "forward"),
        (udp(730_006, &query), "drop"),
        (udp(759_006, "6d6f7265"), "drop"),
        (udp(790_006, "6d6f7265"), "forward"),
    ];
    let frames: Vec<(u64, Vec<u8>)> = rows
        .iter()
        .map(|r| frame_from_json(&r.0).unwrap())
        .collect();
    let want: Vec<&str> = rows.iter().map(|r| r.1).collect();
    let redis = TestRedis::start().expect("redis-server");
    let mk = || Box::new(L7Firewall::from_config(&cfg).unwrap());
    let (local, _, _) = run_frames_full(mk(), Box::new(LocalStore::new()), "l7to", &frames, 1);
    assert_eq!(verdicts(&local), want, "local");
    let s = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
    let (remote, _, _) = run_frames_full(mk(), Box::new(s), "l7tor", &frames, 1);
    assert_eq!(verdicts(&remote), want, "redis");
    let alt = run_alternating(
        || {
            let s = RedisStore::connect(RedisConfig::new(&redis.url())).unwrap();
            (mk(), Box::new(s))
        },
        "l7toalt",
        &frames,
    );
    assert_eq!(verdicts(&alt), want, "two instances alternating");
    // The older key keeps its meaning: every phase 60 s, so the blocked flow idle 10 min is
    // forgotten and its bytes are allowed as unknown.
    let mut old = cfg.clone();
    old["idle_timeout_ms"] = 60_000.into();
    let (out, _, _) = run_frames_full(
        Box::new(L7Firewall::from_config(&old).unwrap()),
        Box::new(LocalStore::new()),
        "l7told",
        &frames,
        1,
    );
    assert_eq!(verdicts(&out)[4], "forward", "idle_timeout_ms 60000");
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Two instances handle packets of one keep-alive HTTP connection at the same instant: A has
/// read the connection's record for the server's FIN and not written it yet when B follows the
/// client's next request head part way. A's write is conditional on what it read, so it does
/// not apply (its packet stays; the server retransmits it) and B's progress stands: the rest of
/// the head completes the request, and the one after it, to a blocked Host, is caught. (With a
/// last-write-wins record A's stale record overwrote B's, the follower went back before bytes
/// the receiver already had, and every later client segment was dropped as ahead of the
/// stream: the connection stalled.) Real Redis, real runtimes on two threads.
#[test]
fn two_instances_at_the_same_instant_never_lose_an_update() {
    use nfcore::harness::gated::{Gate, GatedStore};
    use nfcore::harness::{recording_runtime, RecordingDevice};
    use nfcore::runtime::Runtime;
    let redis = TestRedis::start().expect("redis-server");
    let cfg = serde_json::json!({"block": [{"proto": "http", "host": "evil.example"}]});
    let (c, s) = ("10.0.0.1".parse().unwrap(), "192.0.2.1".parse().unwrap());
    let frame = |t_ms: u64, out: bool, seq: u32, flags: u8, payload: &[u8]| {
        let (a, b, pa, pb) = if out {
            (c, s, 40000, 80)
        } else {
            (s, c, 80, 40000)
        };
        let mut f = FrameSpec::new(a, b, pa, pb, Transport::Tcp { seq, ack: 1, flags });
        f.payload = payload;
        (t_ms * 1_000_000, f.build())
    };
    let ack = packet::TCP_ACK;
    let gate = Gate::new();
    let mk = |gated: bool| {
        let r = Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap());
        let store: Box<dyn flowstore::FlowStore> = if gated {
            Box::new(GatedStore {
                inner: r,
                gate: gate.clone(),
            })
        } else {
            r
        };
        let nf = Box::new(L7Firewall::from_config(&cfg).unwrap());
        recording_runtime(nf, store, "l7race", vec![], 1, 1)
    };
    let one = |rt: &mut Runtime<RecordingDevice>, f: &(u64, Vec<u8>)| {
        *rt.device_mut() = RecordingDevice::new(vec![f.clone()]);
        rt.step(f.0).expect("step");
        rt.device_mut().out.pop().flatten()
    };
    let (mut a, mut b) = (mk(true), mk(false));
    let req1 = b"GET /1 HTTP/1.1\r\nHost: a.example\r\n\r\n";
    let (p1, p2) = (&b"GET /2 HTTP/1.1\r\nHost: a.exa"[..], &b"mple\r\n\r\n"[..]);
    let n1 = req1.len() as u32;
    for f in [
        frame(0, true, 999, packet::TCP_SYN, b""),
        frame(1, false, 4999, packet::TCP_SYN | ack, b""),
        frame(2, true, 1000, ack, req1),
    ] {
        assert!(one(&mut b, &f).is_some());
    }
    gate.arm();
    let fin = frame(3, false, 5000, ack | packet::TCP_FIN, b"");
    let held = std::thread::spawn(move || {
        let out = one(&mut a, &fin);
        (a, out)
    });
    gate.wait_held();
    assert!(one(&mut b, &frame(3, true, 1000 + n1, ack, p1)).is_some());
    gate.release();
    let (mut a, out) = held.join().unwrap();
    assert!(
        out.is_none(),
        "A's record write lost: its packet must not leave"
    );
    let n2 = p1.len() as u32;
    assert!(
        one(&mut a, &frame(4, true, 1000 + n1 + n2, ack, p2)).is_some(),
        "the rest of the head follows B's progress"
    );
    let req3 = b"GET /3 HTTP/1.1\r\nHost: evil.example\r\n\r\n";
    let at = 1000 + n1 + n2 + p2.len() as u32;
    assert!(
        one(&mut a, &frame(5, true, at, ack, req3)).is_none(),
        "caught"
    );
    let st = a.nf().stats();
    assert_eq!(st["follow_ooo_dropped"], 0, "{st}");
    assert_eq!(st["blocked_flows"]["http"], 1, "{st}");
}

/// `PUT /config` on a running L7 firewall sharing Redis: a Host blocked by the new rules is
/// blocked at the next request of a live keep-alive connection, counters kept; a bad config is
/// 400 naming the field and changes nothing.
#[test]
fn rules_change_in_place_and_the_next_request_is_classified_by_them() {
    use nfcore::harness::{feed, reconfigure, recording_runtime};
    let redis = TestRedis::start().expect("redis-server");
    let store = Box::new(RedisStore::connect(RedisConfig::new(&redis.url())).unwrap());
    let old = serde_json::json!({"default": "allow"});
    let new = serde_json::json!({"default": "allow",
                                  "block": [{"proto": "http", "host": "shop.example"}]});
    let nf = Box::new(L7Firewall::from_config(&old).unwrap());
    let mut rt = recording_runtime(nf, store, "l7cfg", vec![], 8, 1_000_000);
    let (c, s) = ("10.0.0.1".parse().unwrap(), "192.0.2.1".parse().unwrap());
    let req = b"GET / HTTP/1.1\r\nHost: shop.example\r\n\r\n";
    let frame = |from_client: bool, seq: u32, payload: &[u8], t_ms: u64| {
        let t = Transport::Tcp {
            seq,
            ack: 1,
            flags: packet::TCP_ACK | packet::TCP_PSH,
        };
        let mut f = if from_client {
            FrameSpec::new(c, s, 5555, 80, t)
        } else {
            FrameSpec::new(s, c, 80, 5555, t)
        };
        f.payload = payload;
        (t_ms * 1_000_000, f.build())
    };
    let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    let out = feed(
        &mut rt,
        vec![frame(true, 1, req, 0), frame(false, 1, resp, 1)],
    );
    assert!(out.iter().all(|o| o.is_some()), "allowed by the old rules");
    let e = reconfigure(
        &mut rt,
        &serde_json::json!({"block": [{"proto": "gopher"}]}),
    )
    .unwrap_err();
    assert_eq!(e.status, 400);
    assert!(e.message.contains("block[0]"), "{}", e.message);
    reconfigure(&mut rt, &new).expect("in place");
    let n = req.len() as u32;
    let out = feed(&mut rt, vec![frame(true, 1 + n, req, 2)]);
    assert!(
        out[0].is_none(),
        "the second request, to a Host blocked now"
    );
    let st = rt.nf().stats();
    assert!(st["followed"].as_u64().unwrap() >= 1, "counters kept: {st}");
}
