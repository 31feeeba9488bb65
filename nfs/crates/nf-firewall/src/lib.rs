//! Stateful firewall (thesis Algorithm 4): connections may be opened by packets that the rules
//! allow; packets of a tracked connection pass in both directions while its TCP state machine
//! allows them. All connection state lives in the tier (key table `fw`, one key per connection,
//! canonical 5-tuple), idle expiry by tier-held timers.
//!
//! Config (JSON): `{"rules": [{"action": "allow", "proto": "tcp", "src": "10.0.0.0/8",
//! "dst": "any", "dst_port": 80}], "default": "deny", "idle_timeout_ms": 60000,
//! "close_timeout_ms": 2000}` plus the runtime options.

pub mod conn;
pub mod rules;

use conn::{tcp_step, ConnState, Phase, Step};
use nfcore::config::{parse_nf, Int};
use nfcore::{Ctx, Key, KeySpace, NetworkFunction, Parsed, StoreError, Verdict};
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
    idle_ms: u64,
    close_ms: u64,
    c: Counters,
}

/// The config as written (besides the runtime options).
#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct Config {
    rules: Vec<Rule>,
    default: Action,
    idle_timeout_ms: Int<1, 86_400_000, 60_000>,
    close_timeout_ms: Int<1, 86_400_000, 2_000>,
}

impl Firewall {
    pub fn from_config(cfg: &Value) -> Result<Firewall, String> {
        let c: Config = parse_nf(cfg, "firewall config")?;
        Ok(Firewall {
            rules: c.rules,
            default_allow: c.default == Action::Allow,
            idle_ms: c.idle_timeout_ms.0,
            close_ms: c.close_timeout_ms.0,
            c: Counters::default(),
        })
    }

    fn key(keys: &KeySpace, pkt: &Parsed) -> Key {
        keys.flow(pkt.flow_key().bidirectional_hash(), TABLE)
    }

    fn save(&self, ctx: &mut Ctx<'_>, key: &Key, st: ConnState) {
        let timeout = if st.phase == Phase::Closing {
            self.close_ms
        } else {
            self.idle_ms
        };
        ctx.set(key, st.encode());
        ctx.timer_set(key.clone(), st.refreshed_ms + timeout);
    }
}

impl NetworkFunction for Firewall {
    fn name(&self) -> &'static str {
        "firewall"
    }

    fn read_set(&self, keys: &KeySpace, pkt: &Parsed, _frame: &[u8], out: &mut Vec<Key>) {
        out.push(Self::key(keys, pkt));
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
        // A connection idle past its timeout is gone even if its timer has not fired yet.
        let st = ctx.get(&key)?.and_then(ConnState::decode).filter(|st| {
            let timeout = if st.phase == Phase::Closing {
                self.close_ms
            } else {
                self.idle_ms
            };
            now < st.refreshed_ms + timeout
        });
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
                },
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
                let timeout = if phase == Phase::Closing {
                    self.close_ms
                } else {
                    self.idle_ms
                };
                if phase != st.phase || now.saturating_sub(st.refreshed_ms) >= timeout / 4 {
                    self.save(
                        ctx,
                        &key,
                        ConnState {
                            phase,
                            refreshed_ms: now,
                            ..st
                        },
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
