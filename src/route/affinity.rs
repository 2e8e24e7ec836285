//! Which model served each conversation's previous turn, so the next turn
//! goes there first while that model is healthy (docs/routing.md,
//! "Affinity"): a provider's prompt cache then holds the conversation, and
//! its answers keep one voice. In memory only, each entry for `[route]
//! affinity_secs` after the turn it records, at most [`AFFINITY_CAP`]
//! conversations (the oldest go first).

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

/// The most conversations remembered at once.
pub const AFFINITY_CAP: usize = 10_000;

/// Conversation → (`provider::model`, when it last served).
#[derive(Debug)]
pub struct Affinity {
    ttl: TimeDelta,
    cap: usize,
    seen: HashMap<String, (String, DateTime<Utc>)>,
}

impl Affinity {
    /// Entries that last `ttl` (zero: affinity off), at most `cap` of them.
    pub fn new(ttl: Duration, cap: usize) -> Affinity {
        Affinity {
            ttl: TimeDelta::from_std(ttl).unwrap_or(TimeDelta::MAX),
            cap: cap.max(1),
            seen: HashMap::new(),
        }
    }

    pub fn is_off(&self) -> bool {
        self.ttl.is_zero()
    }

    /// The model that served `conversation` last, if within the TTL.
    pub fn get(&self, conversation: &str, now: DateTime<Utc>) -> Option<&str> {
        self.seen
            .get(conversation)
            .filter(|(_, at)| now < *at + self.ttl)
            .map(|(m, _)| m.as_str())
    }

    /// `model` served `conversation` at `now`.
    pub fn record(&mut self, conversation: &str, model: &str, now: DateTime<Utc>) {
        if self.is_off() {
            return;
        }
        // The same model again (the usual turn): only its time moves.
        if let Some((m, at)) = self.seen.get_mut(conversation)
            && m == model
        {
            *at = now;
            return;
        }
        if self.seen.len() >= self.cap && !self.seen.contains_key(conversation) {
            let ttl = self.ttl;
            self.seen.retain(|_, (_, at)| now < *at + ttl);
            if self.seen.len() >= self.cap
                && let Some(oldest) = self
                    .seen
                    .iter()
                    .min_by_key(|(_, (_, at))| *at)
                    .map(|(k, _)| k.clone())
            {
                self.seen.remove(&oldest);
            }
        }
        self.seen
            .insert(conversation.to_string(), (model.to_string(), now));
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.seen.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_700_000_000 + secs, 0).unwrap()
    }

    #[test]
    fn a_conversation_sticks_for_the_ttl_after_its_last_turn() {
        let mut a = Affinity::new(Duration::from_secs(1800), 10);
        a.record("c", "groq::m", t(0));
        assert_eq!(a.get("c", t(1799)), Some("groq::m"));
        // Each turn starts the TTL again.
        a.record("c", "groq::m", t(1000));
        assert_eq!(a.get("c", t(2799)), Some("groq::m"));
        assert_eq!(a.get("c", t(2800)), None);
        assert_eq!(a.get("other", t(0)), None);
    }

    #[test]
    fn zero_is_off_and_the_oldest_go_when_full() {
        let mut off = Affinity::new(Duration::ZERO, 10);
        off.record("c", "m", t(0));
        assert_eq!(off.get("c", t(0)), None);
        let mut a = Affinity::new(Duration::from_secs(1800), 2);
        a.record("one", "m", t(0));
        a.record("two", "m", t(1));
        a.record("three", "m", t(2));
        assert_eq!(a.len(), 2);
        assert_eq!(a.get("one", t(3)), None);
        assert_eq!(a.get("three", t(3)), Some("m"));
    }
}
