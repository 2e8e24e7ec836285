//! The last probe of each of some models: backwards from the log's tail
//! until every one has been found (or the read passes a given start), else
//! forward through the whole file ([`super::recent`]'s policy). `state`
//! shows it; `check --paused`, `brief` and `state` take the next re-probe
//! slot of a paused model from it ([`crate::state::reprobe`]). And the
//! newest probe of each provider ([`Newest`]): `brief` and `check` judge a
//! provider stale by it ([`crate::stale`]), and `last_run.json` carries it.

use std::collections::BTreeMap;
use std::path::Path;

use super::read::{FastMap, Record, Sink};
use super::recent::{self, Recent};
use crate::error::Result;

/// One model's last probe.
#[derive(Debug, Clone, PartialEq)]
pub struct Last {
    /// Unix seconds.
    pub ts: i64,
    /// `ok`, or the failure ([`Record::result_label`]).
    pub result: String,
    pub latency_ms: f64,
}

/// provider → model → last probe, for the wanted models.
#[derive(Debug, Default)]
pub struct Lasts(FastMap<Box<str>, FastMap<Box<str>, Option<Last>>>);

impl Lasts {
    /// The last probe of `provider::model`, when it was wanted and found.
    pub fn get(&self, key: &str) -> Option<&Last> {
        let (p, m) = crate::catalog::ModelKey::split(key).unwrap_or((key, ""));
        self.0.get(p)?.get(m)?.as_ref()
    }
}

struct LastSink {
    lasts: Lasts,
    missing: usize,
}

impl LastSink {
    fn new(wanted: &[&str]) -> LastSink {
        let mut lasts = Lasts::default();
        let mut missing = 0;
        for k in wanted {
            let (p, m) = crate::catalog::ModelKey::split(k).unwrap_or((k, ""));
            if lasts
                .0
                .entry(p.into())
                .or_default()
                .insert(m.into(), None)
                .is_none()
            {
                missing += 1;
            }
        }
        LastSink { lasts, missing }
    }

    /// Take `r` when it is wanted, and when `overwrite` or nothing is known
    /// yet.
    fn take(&mut self, r: &Record<'_>, overwrite: bool) {
        if !r.is_sample() {
            return;
        }
        let Some(slot) = self
            .lasts
            .0
            .get_mut(r.provider)
            .and_then(|ms| ms.get_mut(r.model))
        else {
            return;
        };
        if slot.is_none() {
            self.missing -= 1;
        } else if !overwrite {
            return;
        }
        *slot = Some(Last {
            ts: r.ts,
            result: r.result_label(),
            latency_ms: r.latency_ms,
        });
    }
}

impl Sink for LastSink {
    fn record(&mut self, r: &Record<'_>) {
        self.take(r, true);
    }

    fn merge(&mut self, later: LastSink) {
        for (p, ms) in later.lasts.0 {
            for (m, last) in ms {
                if last.is_some()
                    && let Some(slot) = self.lasts.0.get_mut(&p).and_then(|x| x.get_mut(&m))
                {
                    *slot = last;
                }
            }
        }
    }
}

impl Recent for LastSink {
    /// Newest first, the first probe seen of a model is its last; stop once
    /// every wanted model has one.
    fn newest_first(&mut self, r: &Record<'_>) -> bool {
        self.take(r, false);
        self.missing > 0
    }
}

/// The last probe of each wanted model (`provider::model`): backwards from
/// the end until all are found, or forward through everything when the log
/// is not one entry per line. With `since` (Unix seconds), the backward
/// read stops at entries older than it (less the clock slack of
/// [`recent::read_recent`]): a caller that treats any probe before `since`
/// alike (the pause of a paused model) need not read a year of history for
/// a model it paused by hand.
pub fn last_probes(log: &Path, wanted: &[&str], since: Option<i64>) -> Result<Lasts> {
    if wanted.is_empty() {
        return Ok(Lasts::default());
    }
    Ok(recent::read_recent(log, since, |_| LastSink::new(wanted))?
        .0
        .lasts)
}

/// How far back a probe makes a provider one the user still probes: a
/// provider with no probe in the last 7 days is never stale, and a skip
/// for a missing key is warned about only within them.
pub const RECENT_SECS: i64 = 7 * 24 * 3600;

/// The newest probe of each provider in the health log, in Unix seconds: a
/// log sink, fed by `brief`'s read or by [`Newest::read`]. `disabled_skip`
/// rows are not probes and do not count, and neither do re-probes of
/// paused models (`"source": "reprobe"`): a router's re-prober, or a
/// `check --paused` line, keeps probing a paused model while the hourly job
/// may be dead or have lost its key, and must not make it look alive.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Newest(BTreeMap<String, i64>);

impl Newest {
    /// Count one log entry.
    pub fn add(&mut self, r: &Record<'_>) {
        if !r.is_sample() || r.is_reprobe() {
            return;
        }
        match self.0.get_mut(r.provider) {
            Some(t) => *t = (*t).max(r.ts),
            None => {
                self.0.insert(r.provider.to_string(), r.ts);
            }
        }
    }

    /// Record a probe of `provider` at `ts` (for tests and callers that
    /// know a probe's time without a log entry).
    pub fn insert(&mut self, provider: &str, ts: i64) {
        let t = self.0.entry(provider.to_string()).or_insert(ts);
        *t = (*t).max(ts);
    }

    /// Every provider's newest probe, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        self.0.iter().map(|(p, t)| (p.as_str(), *t))
    }

    /// The newest probe of `provider`, if the log read holds one.
    pub fn get(&self, provider: &str) -> Option<i64> {
        self.0.get(provider).copied()
    }

    /// Every provider's newest probe since `since` (Unix seconds), read
    /// backwards from the end of `log` (forward when the file is not one
    /// entry per line); a missing log holds none.
    pub fn read(log: &Path, since: i64) -> Result<Newest> {
        recent::read_recent(log, Some(since), |_| Newest::default()).map(|(n, _)| n)
    }
}

impl Sink for Newest {
    fn record(&mut self, r: &Record<'_>) {
        self.add(r);
    }

    fn merge(&mut self, later: Newest) {
        for (p, ts) in later.0 {
            self.insert(&p, ts);
        }
    }
}

impl Recent for Newest {}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(ts: &str, model: &str, ok: bool) -> String {
        format!(
            r#"{{"ts":"{ts}","provider":"p","model":"{model}","ok":{},"latency_ms":5,"failure_type":"{}"}}"#,
            ok as u8,
            if ok { "" } else { "rate_limit" }
        )
    }

    #[test]
    fn the_newest_probe_of_each_wanted_model() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("health_log.json");
        let lines = [
            line("2026-12-02T10:00:00Z", "a", true),
            line("2026-12-02T10:00:01Z", "b", false),
            line("2026-12-02T10:05:00Z", "a", false),
        ];
        std::fs::write(&log, format!("[\n{}\n]\n", lines.join(",\n"))).unwrap();
        let at = |s| crate::time::parse_ts(s).unwrap();
        let l = last_probes(&log, &["p::a", "p::b", "p::c"], None).unwrap();
        assert_eq!(l.get("p::a").unwrap().ts, at("2026-12-02T10:05:00Z"));
        assert_eq!(l.get("p::a").unwrap().result, "rate_limit");
        assert_eq!(l.get("p::b").unwrap().ts, at("2026-12-02T10:00:01Z"));
        assert_eq!(l.get("p::c"), None);
        assert_eq!(l.get("p::z"), None);
        // A pretty-printed file is read forward, to the same answer.
        std::fs::write(&log, format!("[\n  {}\n]", lines.join(",\n  \n"))).unwrap();
        let l = last_probes(&log, &["p::a"], None).unwrap();
        assert_eq!(l.get("p::a").unwrap().ts, at("2026-12-02T10:05:00Z"));
        // Nothing wanted, nothing read; a missing log has nothing.
        assert_eq!(last_probes(&log, &[], None).unwrap().get("p::a"), None);
        let none = last_probes(&dir.path().join("nope.json"), &["p::a"], None).unwrap();
        assert_eq!(none.get("p::a"), None);
    }
}
