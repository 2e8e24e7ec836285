//! Traffic as evidence: what route's own requests showed of each model,
//! kept in `route_state.json` under `traffic` (and in Redis when state is
//! shared), so that `check` need not ask a model that traffic has just
//! shown working.
//!
//! Per model, route keeps the times of its latest successes (at most
//! [`KEEP`]) and, per failure class, how many and the latest. `check`
//! reads them against the time of the model's last health-log entry
//! ([`Evidence::since`]): a model with at least `traffic_evidence`
//! successes and no failure since then is proven by traffic
//! ([`Since::proves`]). Nothing here moves a model between states or
//! writes the health log.

use std::collections::{BTreeMap, VecDeque};

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

/// The latest successes kept per model.
pub const KEEP: usize = 32;
/// What is older than this is dropped.
pub const KEPT_FOR: TimeDelta = TimeDelta::days(2);
/// A model proven by traffic for longer than this still gets a probe.
pub const AT_MOST: TimeDelta = TimeDelta::days(1);

/// Every model's traffic, by `provider::model`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Traffic {
    pub models: BTreeMap<String, Evidence>,
}

/// One model's traffic.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// The latest successes, oldest first.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub ok: VecDeque<DateTime<Utc>>,
    /// Failures by class (`timeout`, `rate_limited`, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failed: BTreeMap<String, Failed>,
}

/// Failures of one class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failed {
    pub count: u64,
    pub last: DateTime<Utc>,
}

impl Traffic {
    pub fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// A routed request to `model` succeeded at `now`.
    pub fn success(&mut self, model: &str, now: DateTime<Utc>) {
        // A model seen before (the usual case) is found without a copy of
        // its name.
        if !self.models.contains_key(model) {
            self.models.insert(model.to_string(), Evidence::default());
        }
        let Some(e) = self.models.get_mut(model) else {
            return;
        };
        if e.ok.len() >= KEEP {
            e.ok.pop_front();
        }
        e.ok.push_back(now);
    }

    /// A routed request to `model` failed at `now` with `class`.
    pub fn failure(&mut self, model: &str, class: &str, now: DateTime<Utc>) {
        let e = self.models.entry(model.to_string()).or_default();
        let f = e.failed.entry(class.to_string()).or_insert(Failed {
            count: 0,
            last: now,
        });
        f.count += 1;
        f.last = f.last.max(now);
    }

    /// Take in `other`'s evidence (another instance's): successes merged
    /// by time, failures added.
    pub fn merge(&mut self, other: &Traffic) {
        for (model, theirs) in &other.models {
            let e = self.models.entry(model.clone()).or_default();
            let mut ok: Vec<DateTime<Utc>> = e.ok.iter().chain(&theirs.ok).copied().collect();
            ok.sort();
            ok.dedup();
            let skip = ok.len().saturating_sub(KEEP);
            e.ok = ok.into_iter().skip(skip).collect();
            for (class, f) in &theirs.failed {
                let mine = e.failed.entry(class.clone()).or_insert(Failed {
                    count: 0,
                    last: f.last,
                });
                mine.count += f.count;
                mine.last = mine.last.max(f.last);
            }
        }
    }

    /// Drop what is older than [`KEPT_FOR`].
    pub fn prune(&mut self, now: DateTime<Utc>) {
        let cut = now - KEPT_FOR;
        self.models.retain(|_, e| {
            while e.ok.front().is_some_and(|t| *t < cut) {
                e.ok.pop_front();
            }
            e.failed.retain(|_, f| f.last >= cut);
            !e.ok.is_empty() || !e.failed.is_empty()
        });
    }

    /// What traffic showed of `model` after `after` (its last health-log
    /// entry; `None`: it has none).
    pub fn since(&self, model: &str, after: Option<DateTime<Utc>>) -> Since {
        self.models
            .get(model)
            .map(|e| e.since(after))
            .unwrap_or_default()
    }
}

impl Evidence {
    /// What this showed after `after`.
    pub fn since(&self, after: Option<DateTime<Utc>>) -> Since {
        let newer = |t: &DateTime<Utc>| after.is_none_or(|a| *t > a);
        let ok: Vec<DateTime<Utc>> = self.ok.iter().copied().filter(newer).collect();
        Since {
            ok: ok.len(),
            // Every kept success is newer: there may have been more.
            at_least: ok.len() == KEEP,
            first_ok: ok.first().copied(),
            last_ok: ok.last().copied(),
            failed: self
                .failed
                .iter()
                .filter(|(_, f)| newer(&f.last))
                .map(|(c, f)| (c.clone(), f.last))
                .collect(),
        }
    }
}

/// What traffic showed of a model since its last health-log entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Since {
    /// Successes (at least this many when `at_least`).
    pub ok: usize,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub at_least: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_ok: Option<DateTime<Utc>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_ok: Option<DateTime<Utc>>,
    /// Classes that failed, with the latest failure of each.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub failed: BTreeMap<String, DateTime<Utc>>,
}

impl Since {
    /// Whether this stands in for a basic probe: at least `needed`
    /// successes (`needed` > 0) and no failure, the last probe (`last`)
    /// being less than [`AT_MOST`] old at `now`.
    pub fn proves(&self, needed: u32, last: Option<DateTime<Utc>>, now: DateTime<Utc>) -> bool {
        needed > 0
            && self.failed.is_empty()
            && self.ok >= needed as usize
            && last.is_some_and(|l| now - l < AT_MOST)
    }

    /// "5 ok since 13:02 UTC" (the first success's time; its date too
    /// when it is not on `now`'s UTC day).
    pub fn words(&self, now: DateTime<Utc>) -> String {
        let more = if self.at_least { "+" } else { "" };
        match self.first_ok {
            Some(t) => format!(
                "{}{more} ok since {}",
                self.ok,
                crate::format::fmt_soon(t.timestamp(), now.timestamp())
            ),
            None => format!("{} ok", self.ok),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn successes_after_the_last_entry_prove_a_model_until_one_fails() {
        let mut t = Traffic::default();
        let entry = at("2026-12-07T13:00:00Z");
        t.success("p::m", at("2026-12-07T12:59:00Z"));
        for min in [2, 10, 20] {
            t.success("p::m", entry + TimeDelta::minutes(min));
        }
        let now = at("2026-12-07T14:00:00Z");
        let s = t.since("p::m", Some(entry));
        assert_eq!(s.ok, 3);
        assert!(s.proves(3, Some(entry), now));
        assert!(!s.proves(4, Some(entry), now));
        assert!(!s.proves(0, Some(entry), now), "0 turns it off");
        assert_eq!(s.words(now), "3 ok since 13:02 UTC");
        // Never probed: traffic does not stand in for a first probe.
        assert!(!t.since("p::m", None).proves(3, None, now));
        // A day after the last probe, a probe is due whatever traffic says.
        assert!(!s.proves(3, Some(entry), entry + AT_MOST));
        t.failure("p::m", "timeout", entry + TimeDelta::minutes(30));
        let s = t.since("p::m", Some(entry));
        assert!(!s.proves(3, Some(entry), now));
        assert_eq!(s.failed.len(), 1);
        // A failure before the entry is not held against it.
        assert!(t.since("p::m", Some(now)).failed.is_empty());
    }

    #[test]
    fn evidence_is_bounded_merged_and_pruned() {
        let mut a = Traffic::default();
        let t0 = at("2026-12-07T00:00:00Z");
        for i in 0..40 {
            a.success("p::m", t0 + TimeDelta::seconds(i));
        }
        assert_eq!(a.models["p::m"].ok.len(), KEEP);
        let s = a.since("p::m", Some(t0 - TimeDelta::hours(1)));
        assert!(s.at_least);
        assert_eq!(s.words(t0), "32+ ok since 00:00 UTC");
        let mut b = Traffic::default();
        b.success("p::n", t0);
        b.failure("p::m", "timeout", t0);
        a.merge(&b);
        assert_eq!(a.models["p::m"].failed["timeout"].count, 1);
        assert!(a.models.contains_key("p::n"));
        a.prune(t0 + KEPT_FOR + TimeDelta::hours(1));
        assert!(a.is_empty());
    }
}
