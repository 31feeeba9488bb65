//! Signatures compiled into one Aho-Corasick DFA whose state is an integer that can be stored in
//! the tier (thesis Algorithm 2: "automata state per flow"). A state read back from the tier is
//! validated against the set of the DFA's reachable states before use, so a corrupt or foreign
//! value can never make the automaton panic.

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::dfa::DFA;
use aho_corasick::{Anchored, MatchKind, StartKind};
use nfcore::config::{content_or_hex, present, Hex, Int, Object};
use serde::Deserialize;

/// One signature. In a config: `{"id": 1001, "msg": "...", "content": "text"}` or with
/// `"hex": "de ad be ef"` instead of `content`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Object<SignatureConfig>")]
pub struct Signature {
    pub id: u32,
    pub msg: String,
    pub content: Vec<u8>,
}

/// A signature as the config writes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureConfig {
    id: Int<0, { u32::MAX as u64 }>,
    #[serde(default)]
    msg: String,
    #[serde(default, deserialize_with = "present")]
    content: Option<String>,
    #[serde(default, deserialize_with = "present")]
    hex: Option<Hex>,
}

impl TryFrom<Object<SignatureConfig>> for Signature {
    type Error = String;
    fn try_from(Object(c): Object<SignatureConfig>) -> Result<Signature, String> {
        let content = content_or_hex(c.content, c.hex)?;
        if content.is_empty() || content.len() > 1024 {
            return Err("content must be 1-1024 bytes".into());
        }
        Ok(Signature {
            id: c.id.0 as u32,
            msg: c.msg,
            content,
        })
    }
}

/// A match found while scanning: which signature, and the stream offset just past its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    pub sig: usize,
    pub end_offset: u64,
}

pub struct Matcher {
    dfa: DFA,
    start: u32,
    /// Bit set of the reachable state ids.
    valid: Vec<u64>,
    states: usize,
    /// Identifies the signature set: stored with each flow's state so a state from another
    /// signature set is never fed to this automaton.
    pub fingerprint: u32,
    pub sigs: Vec<Signature>,
}

impl Matcher {
    pub fn new(sigs: Vec<Signature>, nocase: bool) -> Result<Matcher, String> {
        let dfa = DFA::builder()
            .match_kind(MatchKind::Standard)
            .start_kind(StartKind::Unanchored)
            .ascii_case_insensitive(nocase)
            .build(sigs.iter().map(|s| &s.content))
            .map_err(|e| format!("signatures: {e}"))?;
        let start = dfa
            .start_state(Anchored::No)
            .map_err(|e| format!("signatures: {e}"))?;
        // Every state a flow can be in is reachable from the start state.
        let mut valid: Vec<u64> = Vec::new();
        let mut insert = |sid: u32| -> bool {
            let (w, b) = ((sid / 64) as usize, sid % 64);
            if w >= valid.len() {
                valid.resize(w + 1, 0);
            }
            let new = valid[w] & (1 << b) == 0;
            valid[w] |= 1 << b;
            new
        };
        let mut todo = vec![start];
        insert(start.as_u32());
        let mut states = 1;
        while let Some(s) = todo.pop() {
            for b in 0..=255u8 {
                let n = dfa.next_state(Anchored::No, s, b);
                if insert(n.as_u32()) {
                    states += 1;
                    todo.push(n);
                }
            }
        }
        let mut fp = vec![nocase as u8];
        for s in &sigs {
            fp.extend_from_slice(&(s.content.len() as u32).to_le_bytes());
            fp.extend_from_slice(&s.content);
        }
        let fingerprint = packet::flow::fnv1a(&fp) as u32;
        Ok(Matcher {
            dfa,
            start: start.as_u32(),
            valid,
            states,
            fingerprint,
            sigs,
        })
    }

    /// The state of a stream that has seen nothing yet.
    pub fn start(&self) -> u32 {
        self.start
    }

    /// Whether `state` (from the tier) is a state of this automaton.
    pub fn is_valid(&self, state: u32) -> bool {
        self.valid
            .get((state / 64) as usize)
            .is_some_and(|w| w & (1 << (state % 64)) != 0)
    }

    /// Number of automaton states (for stats).
    pub fn states(&self) -> usize {
        self.states
    }

    /// Feed `data` (stream bytes starting at stream offset `offset`) from `state`; push matches
    /// on `hits` and return the new state. `state` must be valid.
    pub fn scan(&self, state: u32, data: &[u8], offset: u64, hits: &mut Vec<Hit>) -> u32 {
        debug_assert!(self.is_valid(state));
        let mut sid = StateID::new(state as usize).expect("validated state");
        for (i, b) in data.iter().enumerate() {
            sid = self.dfa.next_state(Anchored::No, sid, *b);
            if self.dfa.is_match(sid) {
                for k in 0..self.dfa.match_len(sid) {
                    hits.push(Hit {
                        sig: self.dfa.match_pattern(sid, k).as_usize(),
                        end_offset: offset + i as u64 + 1,
                    });
                }
            }
        }
        sid.as_u32()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m() -> Matcher {
        let sig = |id, c: &str| Signature {
            id,
            msg: format!("s{id}"),
            content: c.as_bytes().to_vec(),
        };
        Matcher::new(
            vec![sig(1, "ATTACK"), sig(2, "TACK"), sig(3, "evil")],
            false,
        )
        .unwrap()
    }

    #[test]
    fn state_carries_matches_across_chunks() {
        let m = m();
        let mut hits = vec![];
        let s = m.scan(m.start(), b"xxATT", 0, &mut hits);
        assert!(hits.is_empty() && m.is_valid(s));
        let s = m.scan(s, b"ACKyy", 5, &mut hits);
        let mut sigs: Vec<_> = hits.iter().map(|h| (h.sig, h.end_offset)).collect();
        sigs.sort();
        assert_eq!(
            sigs,
            vec![(0, 8), (1, 8)],
            "overlapping signatures both reported"
        );
        hits.clear();
        m.scan(s, b"an evil x", 10, &mut hits);
        assert_eq!(
            hits,
            vec![Hit {
                sig: 2,
                end_offset: 17
            }]
        );
    }

    #[test]
    fn foreign_states_are_rejected() {
        let m = m();
        assert!(m.is_valid(m.start()));
        assert!(!m.is_valid(u32::MAX));
        assert!(m.states() > 10);
        let other = Matcher::new(
            vec![Signature {
                id: 1,
                msg: String::new(),
                content: b"x".to_vec(),
            }],
            false,
        )
        .unwrap();
        assert_ne!(other.fingerprint, m.fingerprint);
    }
}
