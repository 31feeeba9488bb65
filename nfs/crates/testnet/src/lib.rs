//! Test support for the crates' tests on real veth pairs (needs root; a test skips without it): a
//! guard that deletes the pair it made also when the test fails, and the `ip` shell-out.
//! A dev-dependency only.

use std::process::Command;

/// `ip ARGS...`; false when it fails (e.g. not root).
pub fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Set both ends of a veth pair up; false when that fails.
pub fn link_up(a: &str, b: &str) -> bool {
    ip(&["link", "set", a, "up"]) && ip(&["link", "set", b, "up"])
}

/// A veth pair, deleted (with its peer) on drop.
pub struct Veth(pub String);

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).status();
    }
}

impl Veth {
    /// Add the pair `a` / `b`, both still down and without IPv6; None when it cannot be made
    /// (not root). Without IPv6 the pair carries only the test's frames: a fresh link otherwise
    /// sends its own (MLD reports, neighbour and router solicitations) for ~10 s after it comes
    /// up, which an NF under test receives and counts.
    pub fn add(a: &str, b: &str) -> Option<Veth> {
        if !ip(&["link", "add", a, "type", "veth", "peer", "name", b]) {
            return None;
        }
        let v = Veth(a.to_string());
        for i in [a, b] {
            let knob = format!("/proc/sys/net/ipv6/conf/{i}/disable_ipv6");
            // Absent when the kernel has no IPv6 (then there is no chatter either).
            if std::path::Path::new(&knob).exists() {
                std::fs::write(&knob, "1").unwrap_or_else(|e| panic!("{knob}: {e}"));
            }
        }
        Some(v)
    }

    /// Add the pair `a` / `b` and set both up; None when it cannot be made (not root). Panics
    /// when a pair that could be made cannot be set up.
    pub fn named(a: &str, b: &str) -> Option<Veth> {
        let v = Veth::add(a, b)?;
        assert!(link_up(a, b), "cannot set {a} / {b} up");
        Some(v)
    }

    /// A veth pair `<prefix>A<pid>` / `<prefix>B<pid>`, both up: (guard, a, b); None when it cannot
    /// be made (not root).
    pub fn pair(prefix: &str) -> Option<(Veth, String, String)> {
        let tag = std::process::id() % 100_000;
        let (a, b) = (format!("{prefix}A{tag}"), format!("{prefix}B{tag}"));
        let v = Veth::named(&a, &b)?;
        Some((v, a, b))
    }
}
