//! `check --paused`: which paused models are due a re-probe now, by the
//! one rule of [`crate::state::reprobe`] (slots fixed by the pause,
//! doubling to an hour, `retry_at` first), with the interval of `[route]
//! reprobe_paused_secs` and the last probe of each model from the log's
//! tail. The run itself is an ordinary `check` run of the plan cut down to
//! those models ([`super::Plan::retain_models`]).

use std::collections::BTreeSet;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::healthlog::last::last_probes;
use crate::state::{ModelState, StateEntry, States, reprobe};

/// The paused models of a state file, and which of them are due.
#[derive(Debug, Default, PartialEq)]
pub struct Due {
    /// The due models, as `provider::model`.
    pub keys: BTreeSet<String>,
    /// How many models are paused.
    pub paused: usize,
    /// The soonest time a paused model that is not due yet falls due.
    pub next: Option<DateTime<Utc>>,
}

impl std::fmt::Display for Due {
    /// Why nothing is probed, or what is, for `-v`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.paused == 0 {
            return f.write_str("check --paused: no model is paused");
        }
        write!(
            f,
            "check --paused: {} of {} paused model{} due",
            self.keys.len(),
            self.paused,
            if self.paused == 1 { "" } else { "s" }
        )?;
        if let Some(next) = self.next {
            write!(
                f,
                "; the next falls due at {}",
                crate::time::format_ts(next)
            )?;
        }
        Ok(())
    }
}

/// When `entry` is next due for a re-probe, given its last probe, for
/// `check --paused`: [`reprobe::next_reprobe`], except that with an
/// `interval` of zero (route's re-probes off) a paused model is due as soon
/// as its `retry_at` has passed, so that the cron line alone decides how
/// often. `None` for a model that is not paused.
pub fn next_due(
    entry: &StateEntry,
    last_probe: Option<DateTime<Utc>>,
    interval: Duration,
) -> Option<DateTime<Utc>> {
    if entry.state != ModelState::Paused {
        return None;
    }
    if interval.is_zero() {
        return Some(reprobe::parse(entry.retry_at.as_deref()).unwrap_or(DateTime::UNIX_EPOCH));
    }
    reprobe::next_reprobe(entry, last_probe, interval)
}

/// A paused model (`provider::model`), its entry, and when it is next due.
pub type NextTime = (String, StateEntry, Option<DateTime<Utc>>);

/// When each paused model of `states` is next due ([`next_due`]), with the
/// last probe of each read from `log`, in file order. The log is read back
/// to the oldest pause only: a paused entry without a parseable `since`
/// (written by hand) counts its last probe since then as its pause, and is
/// due at once when it has none ([`reprobe::next_reprobe`]). `brief` and
/// `state` show these; [`due`] picks from them.
pub fn next_times(
    states: &States,
    log: &std::path::Path,
    interval: Duration,
) -> Result<Vec<NextTime>> {
    let paused: Vec<(String, StateEntry)> = states
        .iter()
        .filter(|(_, e)| e.state == ModelState::Paused)
        .collect();
    if paused.is_empty() {
        return Ok(Vec::new());
    }
    let lasts = last_probes_of_paused(log, &paused)?;
    Ok(paused
        .into_iter()
        .map(|(key, entry)| {
            let last = lasts.get(&key).copied();
            let at = next_due(&entry, last, interval);
            (key, entry, at)
        })
        .collect())
}

/// The last probe in `log` of each of the `paused` models that has one,
/// by `provider::model`. A probe before the pause counts as the pause, so
/// the read stops at the oldest pause (a paused entry without a parseable
/// `since` does not move it). Route's re-prober reads the same way.
pub fn last_probes_of_paused(
    log: &std::path::Path,
    paused: &[(String, StateEntry)],
) -> Result<std::collections::HashMap<String, DateTime<Utc>>> {
    let since = paused
        .iter()
        .filter_map(|(_, e)| reprobe::parse(e.since.as_deref()))
        .map(|t| t.timestamp())
        .min();
    let wanted: Vec<&str> = paused.iter().map(|(k, _)| k.as_str()).collect();
    let lasts = last_probes(log, &wanted, since)?;
    Ok(paused
        .iter()
        .filter_map(|(k, _)| {
            let at = DateTime::from_timestamp(lasts.get(k)?.ts, 0)?;
            Some((k.clone(), at))
        })
        .collect())
}

/// The paused models of `states` and which of them are due at `now`
/// ([`next_times`]).
pub fn due(
    states: &States,
    log: &std::path::Path,
    interval: Duration,
    now: DateTime<Utc>,
) -> Result<Due> {
    let times = next_times(states, log, interval)?;
    let mut out = Due {
        paused: times.len(),
        ..Due::default()
    };
    for (key, _, at) in times {
        match at {
            Some(at) if at <= now => {
                out.keys.insert(key);
            }
            Some(at) => out.next = Some(out.next.map_or(at, |n| n.min(at))),
            None => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIVE_MIN: Duration = Duration::from_secs(300);

    fn t(s: &str) -> DateTime<Utc> {
        reprobe::parse(Some(s)).unwrap()
    }

    fn entry(state: ModelState, since: Option<&str>, retry_at: Option<&str>) -> StateEntry {
        StateEntry {
            state,
            reason: Some("rate_limit".into()),
            since: since.map(str::to_string),
            retry_at: retry_at.map(str::to_string),
            ..StateEntry::active()
        }
    }

    fn log_with(dir: &std::path::Path, lines: &[(&str, &str)]) -> std::path::PathBuf {
        let log = dir.join("health_log.json");
        let body: Vec<String> = lines
            .iter()
            .map(|(ts, model)| {
                format!(
                    r#"{{"ts":"{ts}","provider":"p","model":"{model}","ok":0,"latency_ms":3,"failure_type":"rate_limit"}}"#
                )
            })
            .collect();
        std::fs::write(&log, format!("[\n{}\n]\n", body.join(",\n"))).unwrap();
        log
    }

    #[test]
    fn only_paused_models_past_their_slot_and_their_wait_are_due() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = "2026-12-02T10:00:00Z";
        let log = log_with(
            dir.path(),
            &[
                (t0, "a"),
                (t0, "b"),
                (t0, "c"),
                // b's first re-probe failed: its next wait is 10 min.
                ("2026-12-02T10:05:00Z", "b"),
            ],
        );
        let mut states = States::default();
        states.set("p::a", entry(ModelState::Paused, Some(t0), None));
        states.set("p::b", entry(ModelState::Paused, Some(t0), None));
        states.set(
            "p::c",
            entry(ModelState::Paused, Some(t0), Some("2026-12-02T10:10:00Z")),
        );
        states.set("p::d", entry(ModelState::Disabled, Some(t0), None));
        states.set("p::e", entry(ModelState::Active, None, None));
        // A model paused by hand without a time: due at once.
        states.set("p::f", entry(ModelState::Paused, None, None));
        let due_at = |now: &str| due(&states, &log, FIVE_MIN, t(now)).unwrap();

        let d = due_at("2026-12-02T10:04:59Z");
        assert_eq!(d.paused, 4);
        assert_eq!(d.keys, BTreeSet::from(["p::f".to_string()]));
        assert_eq!(d.next, Some(t("2026-12-02T10:05:00Z")));
        let d = due_at("2026-12-02T10:05:00Z");
        assert_eq!(
            d.keys,
            BTreeSet::from(["p::a".to_string(), "p::f".to_string()])
        );
        // c's Retry-After holds it past its slot; b waits for 10:15.
        assert_eq!(d.next, Some(t("2026-12-02T10:10:00Z")));
        let d = due_at("2026-12-02T10:10:00Z");
        assert!(d.keys.contains("p::c") && !d.keys.contains("p::b"), "{d:?}");
        assert!(due_at("2026-12-02T10:15:00Z").keys.contains("p::b"));
        assert_eq!(
            d.to_string(),
            "check --paused: 3 of 4 paused models due; the next falls due at 2026-12-02T10:15:00Z"
        );
    }

    #[test]
    fn a_pause_without_a_time_counts_from_its_last_probe_since_the_oldest_pause() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = "2026-12-02T10:00:00Z";
        let log = log_with(
            dir.path(),
            &[
                ("2026-12-01T08:00:00Z", "old"),
                (t0, "a"),
                ("2026-12-02T10:02:00Z", "g"),
            ],
        );
        let mut states = States::default();
        states.set("p::a", entry(ModelState::Paused, Some(t0), None));
        for m in ["f", "g", "old"] {
            states.set(
                crate::catalog::ModelKey::new("p", m).as_str(),
                entry(ModelState::Paused, None, None),
            );
        }
        let times: Vec<(String, Option<DateTime<Utc>>)> = next_times(&states, &log, FIVE_MIN)
            .unwrap()
            .into_iter()
            .map(|(k, _, at)| (k, at))
            .collect();
        assert_eq!(
            times,
            [
                ("p::a".to_string(), Some(t("2026-12-02T10:05:00Z"))),
                // Never probed: due at once.
                ("p::f".to_string(), Some(DateTime::UNIX_EPOCH)),
                // Its last probe stands for the pause.
                ("p::g".to_string(), Some(t("2026-12-02T10:07:00Z"))),
                // The read stops at the oldest pause (less the clock
                // slack): a probe a day older is not looked for.
                ("p::old".to_string(), Some(DateTime::UNIX_EPOCH)),
            ]
        );
    }

    #[test]
    fn with_no_interval_only_the_explicit_wait_holds_a_model_back() {
        let dir = tempfile::tempdir().unwrap();
        let log = log_with(dir.path(), &[]);
        let t0 = "2026-12-02T10:00:00Z";
        let mut states = States::default();
        states.set("p::a", entry(ModelState::Paused, Some(t0), None));
        states.set(
            "p::c",
            entry(ModelState::Paused, Some(t0), Some("2026-12-02T10:10:00Z")),
        );
        let d = due(&states, &log, Duration::ZERO, t("2026-12-02T10:00:01Z")).unwrap();
        assert_eq!(d.keys, BTreeSet::from(["p::a".to_string()]));
        assert_eq!(d.next, Some(t("2026-12-02T10:10:00Z")));
        let nothing = due(&States::default(), &log, FIVE_MIN, t(t0)).unwrap();
        assert_eq!(nothing, Due::default());
        assert_eq!(nothing.to_string(), "check --paused: no model is paused");
    }
}
