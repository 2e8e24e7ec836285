//! Degraded mode: when most of the pool is down, route says so and, as a
//! last resort, tries paused models (docs/routing.md).
//!
//! - **Counting** ([`count`]): a usable provider (enabled, its keys set:
//!   the engine's resolved providers) is active when at least one of its
//!   models is. The condition ([`holds`]) is a share of active providers
//!   below `[route] degraded_below`, over at least
//!   [`DEGRADED_MIN_PROVIDERS`] providers; 0 turns it off.
//! - **Grace** ([`Grace`]): entering takes [`ENTER`] of the condition
//!   holding, leaving takes [`LEAVE`] of it not holding, so a flapping
//!   provider does not flip it. Time is passed in (`now`): nothing here
//!   reads a clock.
//! - **Evidence** ([`record_served`]): a paused model that served a request
//!   in degraded mode goes back to `active` in the state file, with reason
//!   [`SERVED_REASON`]; nothing is written to the health log, which holds
//!   probes only.

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::catalog::{DEGRADED_MIN_PROVIDERS, Resolved, model_key};
use crate::error::Result;
use crate::fsutil::DataLock;
use crate::state::{ModelState, States};

/// How long the condition must hold before route is degraded.
pub const ENTER: Duration = Duration::from_secs(60);
/// How long the condition must not hold before route is ready again.
pub const LEAVE: Duration = Duration::from_secs(120);
/// The state `reason` of a paused model that served in degraded mode.
pub const SERVED_REASON: &str = "served in degraded mode";

/// Usable providers, and how many of them have an active model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Usable providers counted (enabled, keys set).
    pub providers: usize,
    /// Of those, providers with at least one active model.
    pub active_providers: usize,
}

/// Count `providers` (the usable ones) and those with an active model,
/// by `state_of(provider::model)`.
pub fn count<'a>(
    providers: impl IntoIterator<Item = &'a Resolved>,
    state_of: impl Fn(&str) -> ModelState,
) -> Counts {
    let mut c = Counts::default();
    for p in providers {
        c.providers += 1;
        let name = &p.provider.name;
        if p.provider
            .models
            .iter()
            .any(|m| state_of(&model_key(name, m)) == ModelState::Active)
        {
            c.active_providers += 1;
        }
    }
    c
}

/// Whether the share of active providers is below `below`, counted over
/// at least [`DEGRADED_MIN_PROVIDERS`]; never when `below` is 0.
pub fn holds(c: Counts, below: f64) -> bool {
    below > 0.0
        && c.providers >= DEGRADED_MIN_PROVIDERS
        && (c.active_providers as f64) < below * c.providers as f64
}

/// Degraded or not, with the grace periods applied.
#[derive(Debug, Clone, Default)]
pub struct Grace {
    degraded: bool,
    /// Since when the condition has disagreed with `degraded`.
    pending: Option<DateTime<Utc>>,
    /// When the mode last changed.
    since: Option<DateTime<Utc>>,
}

impl Grace {
    /// Whether route is degraded now.
    pub fn degraded(&self) -> bool {
        self.degraded
    }

    /// When the mode last changed (`None`: ready since the start).
    pub fn since(&self) -> Option<DateTime<Utc>> {
        self.since
    }

    /// Take in whether the condition `holds` at `now`. Returns the new
    /// mode (`true`: degraded) when it changes, once.
    pub fn observe(&mut self, holds: bool, now: DateTime<Utc>) -> Option<bool> {
        if holds == self.degraded {
            self.pending = None;
            return None;
        }
        let from = *self.pending.get_or_insert(now);
        let grace = if holds { ENTER } else { LEAVE };
        if (now - from).to_std().is_ok_and(|held| held >= grace) {
            self.degraded = holds;
            self.pending = None;
            self.since = Some(now);
            return Some(holds);
        }
        None
    }
}

/// The mode as `/readyz`, `/v1/providers` and `route --status` show it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Mode {
    /// `ready` or `degraded` (shown beside these figures, as `mode`).
    #[serde(skip)]
    pub name: &'static str,
    #[serde(flatten)]
    pub counts: Counts,
    /// `[route] degraded_below`.
    pub degraded_below: f64,
    /// When the mode last changed, if it has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
    /// The mode the counts point to, while its grace period runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changing_to: Option<&'static str>,
    /// Since when they have pointed there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changing_since: Option<DateTime<Utc>>,
}

impl Mode {
    pub fn degraded(&self) -> bool {
        self.name == DEGRADED
    }
}

const DEGRADED: &str = "degraded";
const READY: &str = "ready";

fn name(degraded: bool) -> &'static str {
    if degraded { DEGRADED } else { READY }
}

/// The engine's view: the grace state, and the counts of the last state
/// snapshot (recounted only when the snapshot changes).
#[derive(Debug, Default)]
pub struct Tracker {
    grace: Grace,
    /// The snapshot the counts are of.
    seen: Option<std::sync::Arc<crate::state::Snapshot>>,
    counts: Counts,
}

impl Tracker {
    /// Step the grace with `snapshot` at `now`: recount if the snapshot is
    /// new, log a change of mode once on stderr, and return the mode, with
    /// the change when there was one (`Some(true)`: entered degraded
    /// mode, once). `last_resort`: `[route] last_resort_paused`, for what
    /// the log line says.
    pub fn step<'a>(
        &mut self,
        snapshot: std::sync::Arc<crate::state::Snapshot>,
        providers: impl IntoIterator<Item = &'a Resolved>,
        below: f64,
        last_resort: bool,
        now: DateTime<Utc>,
    ) -> (Mode, Option<bool>) {
        if !self
            .seen
            .as_ref()
            .is_some_and(|s| std::sync::Arc::ptr_eq(s, &snapshot))
        {
            self.counts = count(providers, |k| snapshot.state_of(k));
            self.seen = Some(snapshot);
        }
        let c = self.counts;
        let changed = self.grace.observe(holds(c, below), now);
        match changed {
            Some(true) => eprintln!(
                "route: degraded: {} of {} providers have an active model (below {below} for {} s); {}",
                c.active_providers,
                c.providers,
                ENTER.as_secs(),
                if last_resort {
                    "paused models are tried as a last resort"
                } else {
                    "paused models are not tried ([route] last_resort_paused = false)"
                }
            ),
            Some(false) => eprintln!(
                "route: ready again: {} of {} providers have an active model",
                c.active_providers, c.providers
            ),
            None => {}
        }
        let g = &self.grace;
        let mode = Mode {
            name: name(g.degraded()),
            counts: c,
            degraded_below: below,
            since: g.since(),
            changing_to: g.pending.map(|_| name(!g.degraded())),
            changing_since: g.pending,
        };
        (mode, changed)
    }
}

/// Record that the paused model `key` served a request in degraded mode:
/// `active` again, with reason [`SERVED_REASON`] and `since` and
/// `recovered_at` at `now`, under the data lock, through the one atomic
/// write. A model no longer paused (active, or disabled meanwhile) is left
/// as it is. Returns whether the file changed. A state file that cannot
/// be parsed is an error, and is not written.
pub fn record_served(stats_dir: &Path, key: &str, now: DateTime<Utc>) -> Result<bool> {
    let path = stats_dir.join(crate::settings::STATE_FILE);
    let lock = DataLock::acquire(stats_dir)?;
    let mut states = States::load(&path)?;
    let ts = crate::time::format_ts(now);
    if !states.recover_served(key, &ts, SERVED_REASON) {
        return Ok(false);
    }
    states.save(&path, &lock)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, test_table};

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap()
    }

    fn counts(providers: usize, active_providers: usize) -> Counts {
        Counts {
            providers,
            active_providers,
        }
    }

    #[test]
    fn the_condition_needs_three_providers_and_a_share_below() {
        // Fewer than three providers: never degraded, even with none active.
        assert!(!holds(counts(2, 0), 0.5));
        assert!(!holds(counts(0, 0), 0.5));
        assert!(holds(counts(3, 1), 0.5));
        assert!(holds(counts(4, 1), 0.5));
        // Exactly half is not below half.
        assert!(!holds(counts(4, 2), 0.5));
        // 0 turns it off.
        assert!(!holds(counts(4, 0), 0.0));
        assert!(holds(counts(4, 3), 1.0));
    }

    #[test]
    fn entering_takes_60_s_and_leaving_120_s_and_a_flap_resets_the_wait() {
        let mut g = Grace::default();
        assert_eq!(g.observe(true, at(0)), None);
        assert_eq!(g.observe(true, at(59)), None);
        assert!(!g.degraded());
        // A flap back restarts the wait.
        assert_eq!(g.observe(false, at(59)), None);
        assert_eq!(g.observe(true, at(60)), None);
        assert_eq!(g.observe(true, at(119)), None);
        assert_eq!(g.observe(true, at(120)), Some(true));
        assert!(g.degraded());
        assert_eq!(g.since(), Some(at(120)));
        // Logged once: no second change.
        assert_eq!(g.observe(true, at(500)), None);
        assert_eq!(g.observe(false, at(500)), None);
        assert_eq!(g.observe(false, at(619)), None);
        assert!(g.degraded());
        assert_eq!(g.observe(false, at(620)), Some(false));
        assert!(!g.degraded());
        // A clock that goes back never flips it.
        assert_eq!(g.observe(true, at(700)), None);
        assert_eq!(g.observe(true, at(0)), None);
        assert!(!g.degraded());
    }

    #[test]
    fn only_usable_providers_count_and_one_active_model_makes_a_provider_active() {
        let tables = [
            test_table("a", &["m", "n"], ""),
            test_table("b", &["m"], ""),
            test_table("c", &["m"], ""),
            test_table("off", &["m"], "enabled = false"),
            test_table(
                "keyed",
                &["m"],
                "api_key_env = \"LLMPROBE_TEST_DEGRADED_NEVER_SET\"",
            ),
        ];
        let catalog = Catalog::from_toml_str(
            &format!("include_default_catalog = false\n{}", tables.concat()),
            "t.toml",
        )
        .unwrap();
        let usable: Vec<Resolved> = catalog
            .providers
            .iter()
            .filter_map(|p| p.resolve().ok())
            .collect();
        let state = |k: &str| match k {
            // One of a's two models is paused: a is still active.
            "a::m" => ModelState::Paused,
            "b::m" => ModelState::Paused,
            "c::m" => ModelState::Disabled,
            _ => ModelState::Active,
        };
        let c = count(&usable, state);
        // `off` and `keyed` (its key unset) are not counted, though their
        // models are active.
        assert_eq!(c, counts(3, 1));
        assert!(holds(c, 0.5));
        // With only two usable providers, never degraded.
        assert!(!holds(count(&usable[..2], |_| ModelState::Paused), 0.5));
    }

    #[test]
    fn a_model_that_served_is_active_again_and_nothing_else_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(crate::settings::STATE_FILE);
        std::fs::write(
            &path,
            r#"{"a::m": {"state": "paused", "reason": "timeout", "since": "2026-01-01T00:00:00Z", "consecutive_failures": 1, "retry_at": "2026-01-01T01:00:00Z", "note": "kept"},
                "b::m": {"state": "disabled", "reason": "bad key", "consecutive_failures": 3}}"#,
        )
        .unwrap();
        assert!(record_served(dir.path(), "a::m", at(0)).unwrap());
        let s = States::load(&path).unwrap();
        let e = s.get("a::m").unwrap();
        let ts = crate::time::format_ts(at(0));
        assert_eq!(e.state, ModelState::Active);
        assert_eq!(e.reason.as_deref(), Some(SERVED_REASON));
        assert_eq!(e.since.as_deref(), Some(ts.as_str()));
        assert_eq!(e.recovered_at.as_deref(), Some(ts.as_str()));
        assert_eq!(e.consecutive_failures, 0);
        assert_eq!(e.retry_at, None);
        assert_eq!(e.extra["note"], "kept");
        // Disabled and active models are left alone.
        assert!(!record_served(dir.path(), "b::m", at(0)).unwrap());
        assert!(!record_served(dir.path(), "a::m", at(1)).unwrap());
        assert_eq!(s.get("b::m").unwrap().state, ModelState::Disabled);
        // A file that does not parse is an error, and is left as it is.
        std::fs::write(&path, "{ nope").unwrap();
        assert!(record_served(dir.path(), "a::m", at(2)).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{ nope");
    }
}
