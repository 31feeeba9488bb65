//! Hash maps and sets for the per-batch bookkeeping keyed by tier keys (read sets, overlays,
//! write grouping, pipeline overlays, the owner cache).
//!
//! Every packet hashes its tier keys (a few dozen bytes each) several times on the batch path, so
//! the hash function's cost counts: foldhash is much cheaper than the standard library's
//! SipHash-1-3 on such keys and is still seeded per process from the OS's randomness, so an attacker who chooses packets
//! (and with them the flow hashes inside keys) cannot precompute colliding keys; the maps are
//! also per batch or bounded by what is in flight, so even a collision costs at most a slower
//! batch, never unbounded growth.

/// The hasher of [`FastMap`] and [`FastSet`] (random per process, not per map).
pub type FastState = foldhash::fast::RandomState;

/// A `HashMap` with [`FastState`].
pub type FastMap<K, V> = std::collections::HashMap<K, V, FastState>;

/// A `HashSet` with [`FastState`].
pub type FastSet<K> = std::collections::HashSet<K, FastState>;
