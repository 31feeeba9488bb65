//! Stateful firewall (thesis Algorithm 4): connections may be opened by packets that the rules
//! allow; packets of a tracked connection pass in both directions while its TCP state machine
//! allows them. All connection state lives in the tier (key table `fw`, one key per connection,
//! canonical 5-tuple), idle expiry by tier-held timers.
//!
//! Config (JSON): `{"rules": [{"action": "allow", "proto": "tcp", "src": "10.0.0.0/8",
//! "dst": "any", "dst_port": 80}], "default": "deny", "timeouts": {...}}` plus the runtime
//! options. Timeouts per protocol and phase ([`nfcore::timeouts`]); the older
//! `idle_timeout_ms` / `close_timeout_ms` instead of `timeouts` still work as they did.

pub mod conn;
pub mod rules;

use conn::{tcp_step, ConnState, Phase, Step};
use nfcore::config::{parse_nf, present, Int, Object};
use nfcore::timeouts::{Legacy, TimeoutsConfig};
use nfcore::{Ctx, Key, KeySpace, NetworkFunction, Parsed, StoreError, Timeouts, Track, Verdict};
use packet::PROTO_TCP;
use rules::{may_open, Action, Rule};
use serde::Deserialize;
use serde_json::Value;

/// State table name in the key layout.
pub const TABLE: &str = "fw";

#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    opened: u64,
    denied_by_rule: u64,
    denied_by_state: u64,
    closed: u64,
    expired: u64,
}

/// The firewall NF.
pub struct Firewall {
    rules: Vec<Rule>,
    default_allow: bool,
    timeouts: Timeouts,
    c: Counters,
}

/// The config as written (besides the runtime options).
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct Config {
    rules: Vec<Rule>,
    default: Action,
    #[serde(deserialize_with = "present")]
    timeouts: Option<Object<TimeoutsConfig>>,
    #[serde(deserialize_with = "present")]
    idle_timeout_ms: Option<Int<1, 86_400_000>>,
    #[serde(deserialize_with = "present")]
    close_timeout_ms: Option<Int<1, 86_400_000>>,
}

/// What `close_timeout_ms` meant when absent, before `timeouts` (kept for configs with
/// `idle_timeout_ms`).
pub const LEGACY_CLOSE_MS: u64 = 2_000;

impl Firewall {
    pub fn from_config(cfg: &Value) -> Result<Firewall, String> {
        let c: Config = parse_nf(cfg, "firewall config")?;
        Ok(Firewall {
            rules: c.rules,
            default_allow: c.default == Action::Allow,
            timeouts: Timeouts::resolve(
                c.timeouts.map(|t| t.0),
                Legacy {
                    idle_ms: c.idle_timeout_ms.map(|x| x.0),
                    close_ms: c.close_timeout_ms.map(|x| x.0),
                    close_default_ms: Some(LEGACY_CLOSE_MS),
                },
            )?,
            c: Counters::default(),
        })
    }

    fn key(keys: &KeySpace, pkt: &Parsed) -> Key {
        keys.flow(pkt.flow_key().bidirectional_hash(), TABLE)
    }

    /// Whether the rules let the connection `k` open (its initiator's packet).
    pub fn may_open(&self, k: &packet::FlowKey) -> bool {
        may_open(&self.rules, self.default_allow, k)
    }

    /// The timeouts in use.
    pub fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }

    fn save(&self, ctx: &mut Ctx<'_>, key: &Key, st: ConnState, proto: u8) {
        let timeout = self.timeouts.for_track(st.track, proto);
        ctx.set(key, st.encode());
        ctx.timer_set(key.clone(), st.refreshed_ms + timeout);
    }
}

impl NetworkFunction for Firewall {
    fn name(&self) -> &'static str {
        "firewall"
    }

    fn record_lifetime_ms(&self) -> Option<u64> {
        Some(self.timeouts.longest_ms())
    }

    fn read_set(&self, keys: &KeySpace, pkt: &Parsed, _frame: &[u8], out: &mut Vec<Key>) {
        out.push(Self::key(keys, pkt));
    }

    /// Rules, default and timeouts change in place (counters kept). Connections already open
    /// stay open: a rule is checked when a connection opens, as before the change.
    fn reconfigure(
        &mut self,
        cfg: &Value,
        _store: &mut dyn nfcore::FlowStore,
        _keys: &KeySpace,
    ) -> Result<bool, nfcore::Refused> {
        let new = Firewall::from_config(cfg)?;
        (self.rules, self.default_allow, self.timeouts) =
            (new.rules, new.default_allow, new.timeouts);
        Ok(true)
    }

    fn process(
        &mut self,
        ctx: &mut Ctx<'_>,
        _frame: &mut Vec<u8>,
        pkt: &Parsed,
    ) -> Result<Verdict, StoreError> {
        let fk = pkt.flow_key();
        let (_, dir) = fk.canonical();
        let key = Self::key(ctx.keys, pkt);
        let now = ctx.now_ms();
        let flags = pkt.tcp_flags();
        let is_tcp = pkt.proto == PROTO_TCP;
        let d = (dir == packet::Direction::Reverse) as usize;
        // A connection idle past its timeout is gone even if its timer has not fired yet.
        let st = ctx
            .get(&key)?
            .and_then(ConnState::decode)
            .filter(|st| now < st.refreshed_ms + self.timeouts.for_track(st.track, pkt.proto));
        let Some(st) = st else {
            // Algorithm 4 on a new connection: the rules decide whether it may open.
            if !may_open(&self.rules, self.default_allow, &fk) {
                self.c.denied_by_rule += 1;
                return Ok(Verdict::Drop);
            }
            let phase = if !is_tcp {
                Phase::Established
            } else if flags & (packet::TCP_SYN | packet::TCP_ACK | packet::TCP_RST)
                == packet::TCP_SYN
            {
                Phase::SynSent
            } else {
                self.c.denied_by_state += 1;
                return Ok(Verdict::Drop);
            };
            self.c.opened += 1;
            self.save(
                ctx,
                &key,
                ConnState {
                    phase,
                    initiator: dir,
                    refreshed_ms: now,
                    track: Track::default().seen(d, pkt.proto, flags),
                },
                pkt.proto,
            );
            return Ok(Verdict::Forward);
        };
        let step = if is_tcp {
            tcp_step(&st, dir, flags)
        } else {
            Step::Allow(st.phase)
        };
        match step {
            Step::Deny => {
                self.c.denied_by_state += 1;
                Ok(Verdict::Drop)
            }
            Step::AllowAndClose => {
                self.c.closed += 1;
                ctx.del(&key);
                ctx.timer_cancel(key);
                Ok(Verdict::Forward)
            }
            Step::Allow(phase) => {
                // Write only on a change or to move the idle timer (not on every packet).
                let track = st.track.seen(d, pkt.proto, flags);
                let timeout = self.timeouts.for_track(track, pkt.proto);
                if phase != st.phase
                    || track != st.track
                    || now.saturating_sub(st.refreshed_ms) >= timeout / 4
                {
                    self.save(
                        ctx,
                        &key,
                        ConnState {
                            phase,
                            refreshed_ms: now,
                            track,
                            ..st
                        },
                        pkt.proto,
                    );
                }
                Ok(Verdict::Forward)
            }
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, member: &[u8]) -> Result<(), StoreError> {
        self.c.expired += 1;
        ctx.del(member);
        Ok(())
    }

    fn stats(&self) -> Value {
        serde_json::json!({
            "opened": self.c.opened, "denied_by_rule": self.c.denied_by_rule,
            "denied_by_state": self.c.denied_by_state, "closed": self.c.closed, "expired": self.c.expired,
        })
    }
}
