//! The `nf` binary's command line and NF registry, also for its tests (which build NFs by type
//! name as the binary does).

pub mod args;
pub mod registry;
pub mod version;
