//! ESP behaviour across instances sharing the tier: sequence numbers continue (never repeat)
//! after a move, a moved gateway rejects replays of what the old one accepted, tampered ESP is
//! dropped, bad configs are refused naming the field.

use flowstore::test_redis::TestRedis;
use flowstore::{FlowStore, RedisConfig, RedisStore};
use nf_ipsec::Ipsec;
use nfcore::harness::{run_frames, run_frames_full};
use packet::build::{FrameSpec, Transport};
use packet::Parsed;
use serde_json::{json, Value};

fn cfg(name: &str) -> Value {
    let dir = nfcore::harness::tests_data().join("ipsec/basic");
    nfcore::config::load(&dir.join(name)).unwrap()
}

/// `n` UDP datagrams from site A (10.1/16) to site B (10.2/16), distinct payloads.
fn cleartext(n: usize, first: usize) -> Vec<(u64, Vec<u8>)> {
    (first..first + n)
        .map(|i| {
            let payload = format!("datagram {i}").into_bytes();
            let mut s = FrameSpec::new(
                "10.1.0.1".parse().unwrap(),
                "10.2.0.1".parse().unwrap(),
                1000 + i as u16,
                53,
                Transport::Udp,
            );
            s.payload = &payload;
            (i as u64 * 1_000_000, s.build())
        })
        .collect()
}

fn redis_store(url: &str) -> Box<dyn FlowStore> {
    Box::new(RedisStore::connect(RedisConfig::new(url)).unwrap())
}

fn seq_of(f: &[u8]) -> u32 {
    let p = Parsed::new_checked(f).unwrap();
    nf_ipsec::esp::esp_header(f, &p).expect("ESP").1
}

fn forwarded(out: Vec<Option<Vec<u8>>>, ts_from: &[(u64, Vec<u8>)]) -> Vec<(u64, Vec<u8>)> {
    out.into_iter()
        .zip(ts_from)
        .map(|(o, (ts, _))| (*ts, o.expect("forwarded")))
        .collect()
}

#[test]
fn sequence_continues_after_a_move_and_never_repeats() {
    let redis = TestRedis::start().expect("redis-server");
    let url = redis.url();
    let first = cleartext(10, 0);
    let second = cleartext(10, 10);
    // Instance 1 of gateway A, then (after a move) instance 2 with a fresh NF and connection.
    let a1 = run_frames(
        Box::new(Ipsec::from_config(&cfg("config.json")).unwrap()),
        redis_store(&url),
        "gwA",
        &first,
        4,
    );
    let a2 = run_frames(
        Box::new(Ipsec::from_config(&cfg("config.json")).unwrap()),
        redis_store(&url),
        "gwA",
        &second,
        4,
    );
    let s1: Vec<u32> = a1.iter().map(|o| seq_of(o.as_ref().unwrap())).collect();
    let s2: Vec<u32> = a2.iter().map(|o| seq_of(o.as_ref().unwrap())).collect();
    assert_eq!(s1, (1..=10).collect::<Vec<u32>>(), "blocks of 4 from 1");
    assert!(s2.windows(2).all(|w| w[0] < w[1]));
    assert!(
        s2[0] > *s1.last().unwrap(),
        "the moved instance continues above: {s2:?}"
    );
    assert_eq!(
        s2[0], 13,
        "instance 1 held 9-12; 11, 12 are a gap, never reused"
    );
    // The peer accepts the whole sequence, gap included.
    let mut esp = forwarded(a1, &first);
    esp.extend(forwarded(a2, &second));
    let b = run_frames(
        Box::new(Ipsec::from_config(&cfg("peer.json")).unwrap()),
        redis_store(&url),
        "gwB",
        &esp,
        8,
    );
    assert!(b.iter().all(|o| o.is_some()));
    let mut all = first.clone();
    all.extend(second.clone());
    for (o, (_, orig)) in b.iter().zip(&all) {
        assert_eq!(o.as_ref().unwrap(), orig, "round trip");
    }
}

#[test]
fn moved_gateway_rejects_replays_of_what_the_old_one_accepted() {
    let redis = TestRedis::start().expect("redis-server");
    let url = redis.url();
    let clear = cleartext(12, 0);
    let a = run_frames(
        Box::new(Ipsec::from_config(&cfg("config.json")).unwrap()),
        redis_store(&url),
        "gwA",
        &clear,
        4,
    );
    let esp = forwarded(a, &clear);
    // Instance 1 of gateway B accepts the first 10; instance 2 (after a move) gets replays of 0, 5, 9, then the two new ones, then a replay of
    // a new one.
    let input = vec![
        esp[0].clone(),
        esp[5].clone(),
        esp[9].clone(),
        esp[10].clone(),
        esp[11].clone(),
        esp[10].clone(),
    ];
    for batch in [1, 8] {
        let id = format!("gwB{batch}");
        // Same history in the tier: instance 1 under this id first.
        let b1 = run_frames(
            Box::new(Ipsec::from_config(&cfg("peer.json")).unwrap()),
            redis_store(&url),
            &id,
            &esp[..10],
            4,
        );
        assert!(b1.iter().all(|o| o.is_some()));
        let (b2, nf, _) = run_frames_full(
            Box::new(Ipsec::from_config(&cfg("peer.json")).unwrap()),
            redis_store(&url),
            &id,
            &input,
            batch,
        );
        let kept: Vec<bool> = b2.iter().map(|o| o.is_some()).collect();
        assert_eq!(
            kept,
            [false, false, false, true, true, false],
            "batch {batch}"
        );
        assert_eq!(nf.stats()["replay_dropped"], 4, "batch {batch}");
        assert_eq!(nf.stats()["decapsulated"], 2, "batch {batch}");
    }
}

#[test]
fn tampered_esp_is_dropped() {
    let clear = cleartext(3, 0);
    let store = || Box::new(flowstore::LocalStore::new());
    let a = run_frames(
        Box::new(Ipsec::from_config(&cfg("config.json")).unwrap()),
        store(),
        "gwA",
        &clear,
        4,
    );
    let esp = forwarded(a, &clear);
    let (ts, good) = esp[0].clone();
    let l4 = Parsed::new_checked(&good).unwrap().l4_offset;
    // Every byte of the ESP part (SPI, sequence number, IV, ciphertext, ICV), one bit flipped.
    let mut input = vec![];
    for at in l4..good.len() {
        for bit in [0x01u8, 0x80] {
            let mut f = good.clone();
            f[at] ^= bit;
            input.push((ts, f));
        }
    }
    let n_bad = input.len();
    input.push((ts, good.clone()));
    input.push((ts, esp[1].1.clone()));
    let (out, nf, _) = run_frames_full(
        Box::new(Ipsec::from_config(&cfg("peer.json")).unwrap()),
        store(),
        "gwB",
        &input,
        16,
    );
    assert!(
        out[..n_bad].iter().all(|o| o.is_none()),
        "no tampered frame passes"
    );
    assert_eq!(
        out[n_bad].as_ref(),
        Some(&clear[0].1),
        "the genuine frame still passes"
    );
    assert_eq!(out[n_bad + 1].as_ref(), Some(&clear[1].1));
    let st = nf.stats();
    assert!(st["auth_failed"].as_u64().unwrap() > 0, "{st}");
    assert_eq!(
        st["auth_failed"].as_u64().unwrap()
            + st["unknown_spi"].as_u64().unwrap()
            + st["replay_dropped"].as_u64().unwrap()
            + st["malformed_esp"].as_u64().unwrap(),
        n_bad as u64,
        "{st}"
    );
}

#[test]
fn bad_configs_name_the_field() {
    let good = cfg("config.json");
    let with = |path: &[&str], v: Value| {
        let mut c = good.clone();
        let mut at = &mut c;
        for p in &path[..path.len() - 1] {
            at = match p.parse::<usize>() {
                Ok(i) => &mut at[i],
                Err(_) => &mut at[*p],
            };
        }
        at[path[path.len() - 1]] = v;
        c
    };
    for (c, field) in [
        (with(&["sas", "0", "key"], json!("abcd")), "sas[0].key"),
        (with(&["sas", "0", "key"], json!("zz")), "sas[0].key"),
        (with(&["sas", "1", "salt"], json!("0102")), "sas[1].salt"),
        (with(&["sas", "0", "spi"], json!(255)), "sas[0].spi"),
        (with(&["sas", "0", "dir"], json!("both")), "sas[0].dir"),
        (
            with(&["sas", "0", "tunnel_dst"], json!("::1")),
            "sas[0].tunnel_dst",
        ),
        (
            with(&["sas", "0", "selectors"], json!([])),
            "sas[0].selectors",
        ),
        (
            with(&["sas", "1", "selectors"], json!([{"src": "10.0.0.0/99"}])),
            "sas[1].selectors[0].src",
        ),
        (with(&["sas", "0", "colour"], json!(1)), "colour"),
        (with(&["replay_window"], json!(100)), "replay_window"),
        (with(&["seq_block"], json!(0)), "seq_block"),
        (with(&["unprotected"], json!("maybe")), "unprotected"),
        (with(&["sas"], json!([])), "sas"),
    ] {
        let e = Ipsec::from_config(&c).err().expect("refused");
        assert!(e.contains(field), "{field}: {e}");
    }
    let mut dup = good.clone();
    dup["sas"][1]["dir"] = json!("out");
    dup["sas"][1]["spi"] = json!(4097);
    assert!(Ipsec::from_config(&dup)
        .err()
        .expect("refused")
        .contains("spi"));
}

/// `PUT /config` on a running gateway: an SA added and a selector changed in place (the kept
/// outbound SA's sequence numbers go on, none repeated); another key for a live SPI takes a
/// rolling update (409); another replay window is refused naming it; nothing changes then.
#[test]
fn sas_change_in_place_and_a_rekeyed_sa_takes_a_roll() {
    use nfcore::harness::{feed, reconfigure, recording_runtime};
    let redis = TestRedis::start().expect("redis-server");
    let base = cfg("config.json");
    let nf = Box::new(Ipsec::from_config(&base).unwrap());
    let mut rt = recording_runtime(
        nf,
        redis_store(&redis.url()),
        "ipseccfg",
        vec![],
        8,
        1_000_000,
    );
    let seqs = |out: Vec<Option<Vec<u8>>>| -> Vec<u32> {
        out.iter()
            .map(|o| seq_of(o.as_ref().expect("encapsulated")))
            .collect()
    };
    let first = seqs(feed(&mut rt, cleartext(3, 0)));
    assert_eq!(first, [1, 2, 3]);
    let mut added = base.clone();
    let mut extra = added["sas"][0].clone();
    extra["name"] = "a-to-c".into();
    extra["spi"] = 4098.into();
    extra["tunnel_dst"] = "203.0.113.3".into();
    extra["selectors"] = json!([{"src": "10.1.0.0/16", "dst": "10.3.0.0/16"}]);
    added["sas"].as_array_mut().unwrap().push(extra);
    added["sas"][0]["name"] = "renamed".into();
    reconfigure(&mut rt, &added).expect("in place");
    assert_eq!(
        seqs(feed(&mut rt, cleartext(3, 3))),
        [4, 5, 6],
        "the kept SA goes on"
    );
    let mut rekeyed = added.clone();
    rekeyed["sas"][0]["key"] = "ffeeddccbbaa99887766554433221100".into();
    let e = reconfigure(&mut rt, &rekeyed).unwrap_err();
    assert_eq!(e.status, 409, "{}", e.message);
    let mut window = added.clone();
    window["replay_window"] = 256.into();
    let e = reconfigure(&mut rt, &window).unwrap_err();
    assert_eq!(e.status, 400);
    assert!(e.message.starts_with("replay_window"), "{}", e.message);
    assert_eq!(
        seqs(feed(&mut rt, cleartext(2, 6))),
        [7, 8],
        "unchanged by the refusals"
    );
    assert_eq!(rt.nf().stats()["encapsulated"], 8, "counters kept");
}
