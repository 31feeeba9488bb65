//! Generator -> veth -> sink with the real binaries (needs root; skipped with a message otherwise).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use testnet::Veth;
use traffic::gen::{frames, stamp, GenConfig};

#[test]
fn stamped_frames_keep_valid_checksums() {
    for tcp in [true, false] {
        let c = GenConfig {
            run: 3,
            flows: 2,
            pkts: 3,
            tcp,
            frame_len: 100,
            src: "10.0.0.1".parse().unwrap(),
            dst: "10.0.0.2".parse().unwrap(),
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            dst_port: 5001,
        };
        let mut fs: Vec<_> = frames(&c).collect();
        assert_eq!(fs.len(), if tcp { 6 + 6 + 4 } else { 6 });
        for f in fs.iter_mut() {
            stamp(f, 0x0123_4567_89ab_cdef);
            assert!(packet::build::checksums_valid(&f.frame));
            if f.marker_at.is_some() {
                assert_eq!(f.frame.len(), 100);
            }
        }
    }
}

#[test]
fn gen_to_sink_over_veth_reports_no_loss() {
    let Some((_v, a, b)) = Veth::pair("utg") else {
        eprintln!("SKIP: cannot create a veth pair (not root?)");
        return;
    };
    let bin = env!("CARGO_BIN_EXE_traffic");
    let mut sink = Command::new(bin)
        .args([
            "sink",
            "--port",
            &b,
            "--run",
            "5",
            "--expect",
            "400",
            "--duration-ms",
            "20000",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(sink.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.contains("ready"), "{line}");
    let g = Command::new(bin)
        .args([
            "gen", "--port", &a, "--run", "5", "--flows", "4", "--pkts", "100", "--rate", "20000",
            "--size", "200",
        ])
        .output()
        .unwrap();
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    line.clear();
    out.read_line(&mut line).unwrap();
    let _ = sink.wait();
    let r: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(r["received"], 400, "{r}");
    assert_eq!(r["lost"], 0);
    assert_eq!(r["duplicates"], 0);
    assert_eq!(r["flows"], 4);
    assert!(r["latency_us"]["p50"].as_f64().unwrap() > 0.0);
}
