//! The NF trait and the batch runtime of the UNO network functions.
//!
//! An NF implements [`NetworkFunction`]. Per batch the [`runtime::Runtime`]:
//! 1. receives a batch from its [`netio::Device`] and parses every frame (malformed frames are
//!    counted and dropped; non-IP frames are forwarded unchanged and counted),
//! 2. asks the NF for each packet's read set ([`NetworkFunction::read_set`]),
//! 3. fetches all keys in one round trip ([`flowstore::BatchState::fetch`]),
//! 4. calls [`NetworkFunction::process`] for each packet in order, with a [`Ctx`] whose reads see
//!    the earlier packets' writes of the same batch,
//! 5. writes the batch's changes in one round trip, then transmits the forwarded packets,
//! 6. every `timer_interval_ms`, claims due tier-held timers (each fires on exactly one instance)
//!    and calls [`NetworkFunction::on_timer`].
//!
//! A tier failure leads to the configured [`FailMode`] for the whole batch.

#[macro_use]
pub mod config;
pub mod control;
pub mod cpu_latency;
pub mod ctx;
pub mod drain;
pub mod harness;
pub mod hold;
pub mod runtime;
pub mod stats;
pub mod timeouts;

pub use ctx::Ctx;
pub use flowstore::{FlowStore, HashOp, Key, KeySpace, StoreError};
pub use packet::Parsed;
pub use timeouts::{Timeouts, Track};

/// What happens to a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Transmit (possibly rewritten) on the port.
    Forward,
    /// Discard.
    Drop,
}

config_enum! {
    /// Behaviour when the state tier cannot be reached (config `fail_mode`): `Closed` (default;
    /// security NFs) drops packets whose state cannot be read or written, `Open` forwards them
    /// unprocessed.
    #[derive(Default)]
    pub enum FailMode { #[default] Closed = "closed", Open = "open" }
}

config_enum! {
    /// How an NF claims a new connection's record in the tier (NAT `mapping_claim`, LB
    /// `conn_claim`) when two instances may see its first packets at the same instant. `Atomic`
    /// (default): a compare-and-set round trip, concurrent instances agree on one record (the
    /// loser adopts the winner's). `Pipelined`: written with the batch (`SET NX`,
    /// [`Ctx::claim`]), no round trip of its own; a lost claim's packets are dropped before they
    /// leave and the NF undoes its part ([`NetworkFunction::claim_lost`]).
    #[derive(Default)]
    pub enum Claim { #[default] Atomic = "atomic", Pipelined = "pipelined" }
}

config_enum! {
    /// How an NF that reads, changes and writes back a connection's record (IPS, L7 firewall)
    /// writes it (`record_writes`). `Checked` (default): conditional on the value read
    /// ([`Ctx::write_if_unchanged`], a compare-and-set script call per record and batch), so two
    /// instances handling packets of one connection at the same instant never overwrite each
    /// other's update (the loser's packets do not leave). `LastWins`: a plain write with the
    /// batch, cheaper for the tier, correct only while one instance handles a connection at a time.
    #[derive(Default)]
    pub enum RecordWrites { #[default] Checked = "checked", LastWins = "last_wins" }
}

/// Why an NF refused a new config in place ([`NetworkFunction::reconfigure`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The config is invalid, or invalid as a change of the running one (the message names the
    /// field).
    Invalid(String),
    /// The tier failed while the change was checked or applied.
    Store(StoreError),
}

impl From<String> for Refused {
    fn from(e: String) -> Refused {
        Refused::Invalid(e)
    }
}

impl From<StoreError> for Refused {
    fn from(e: StoreError) -> Refused {
        Refused::Store(e)
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Invalid(e) => f.write_str(e),
            Refused::Store(e) => write!(f, "state tier: {e}"),
        }
    }
}

/// A stateless network function: all per-flow state goes through the [`Ctx`] to the tier, so
/// any instance can process any packet of any flow.
pub trait NetworkFunction: Send {
    /// Type name ("firewall", "nat", ...).
    fn name(&self) -> &'static str;

    /// One-time setup against the tier (e.g. initialise a shared pool; idempotent across
    /// instances). Called before the first batch. A shared resource made from the config (NAT's
    /// pool, the LB's backends) follows this instance's config as a [`Self::reconfigure`]
    /// would: the new instances of a rolling update bring a changed pool to the tier.
    /// [`Refused::Invalid`] (naming the field): the tier's state cannot take this config.
    fn init(&mut self, _store: &mut dyn FlowStore, _keys: &KeySpace) -> Result<(), Refused> {
        Ok(())
    }

    /// Whether the state this NF keeps in the tier can take a change of its config (this one)
    /// to `cfg`, judged from the two configs alone: Err names the field of a change the records
    /// cannot take (e.g. a layout or a size they are kept in). [`Self::reconfigure`] refuses such
    /// a change, and so must a rolling update (`nf --check-config TYPE FILE --running FILE`).
    fn check_change(&self, _cfg: &serde_json::Value) -> Result<(), String> {
        Ok(())
    }

    /// Push the keys `process` will read for this packet onto `out` (fetched for the whole batch
    /// in one round trip). Reads of other keys still work but cost a round trip each.
    fn read_set(&self, keys: &KeySpace, pkt: &Parsed, frame: &[u8], out: &mut Vec<Key>);

    /// Process one packet. `frame` may be rewritten or resized; `pkt` is its parse.
    /// An `Err` (tier failure) applies the runtime's [`FailMode`] to this packet.
    fn process(
        &mut self,
        ctx: &mut Ctx<'_>,
        frame: &mut Vec<u8>,
        pkt: &Parsed,
    ) -> Result<Verdict, StoreError>;

    /// A timer this NF set with [`Ctx::timer_set`] is due; exactly one instance gets each call.
    fn on_timer(&mut self, _ctx: &mut Ctx<'_>, _member: &[u8]) -> Result<(), StoreError> {
        Ok(())
    }

    /// A claim this NF made with [`Ctx::claim`] was lost: another instance claimed `key` first.
    /// The packets that depended on it were dropped (none left with it); undo what this
    /// instance tied to `value` (NAT: its reverse mapping, and the pair goes back to its block).
    /// The next packet of the flow reads the winner's value.
    fn claim_lost(
        &mut self,
        _ctx: &mut Ctx<'_>,
        _key: &[u8],
        _value: &[u8],
    ) -> Result<(), StoreError> {
        Ok(())
    }

    /// The instance stops cleanly: give back shared resources it holds locally (NAT: the unused
    /// pairs of its port block). Not called on a crash.
    fn release(&mut self, _store: &mut dyn FlowStore, _keys: &KeySpace) -> Result<(), StoreError> {
        Ok(())
    }

    /// Take a new config (the whole NF config, runtime options included) while running, between
    /// two batches (nothing in flight, so `store` may be used directly, e.g. to change a shared
    /// pool): `Ok(true)` applied, `Ok(false)` this NF cannot change in place (the caller
    /// restarts it with the config), `Err` refused (nothing changed): [`Refused::Invalid`] names
    /// the config field, [`Refused::Store`] the tier could not be reached.
    fn reconfigure(
        &mut self,
        _cfg: &serde_json::Value,
        _store: &mut dyn FlowStore,
        _keys: &KeySpace,
    ) -> Result<bool, Refused> {
        Ok(false)
    }

    /// The longest a per-flow record this NF writes stays in the tier without being written
    /// again (its longest timeout), with this config: once no instance of a version writes a
    /// record layout any more, no record of it is left after this long (`nf --check-config`
    /// says it; the agent's live update then stops requiring readers of that layout). None:
    /// records without an end (e.g. the IPsec gateway's per-SA state).
    fn record_lifetime_ms(&self) -> Option<u64> {
        None
    }

    /// NF-specific counters for the stats endpoint.
    fn stats(&self) -> serde_json::Value {
        serde_json::json!({})
    }
}
