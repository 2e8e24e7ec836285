//! `stats/route_state.json`: what `route` must remember between one-shot
//! calls and across restarts (cooldowns and ladder hits, usage windows and
//! learned limits, and what upstreams said models cannot take). Keys appear only as index and fingerprint.
//!
//! Read like the other data files: missing means empty; a file that cannot
//! be parsed stops the command with exit 4 and is left byte-identical.
//! Written atomically under the data lock; fields this version does not
//! know are kept.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::Result;
use crate::fsutil::{self, DataLock};

use super::verdicts::Verdicts;
use crate::usage::limits::LimitLedger;
use crate::usage::traffic::Traffic;

pub const FILE: &str = crate::usage::ROUTE_STATE_FILE;

/// The file: a version, the payload, and whatever else it held.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RouteState<T> {
    #[serde(default = "version")]
    pub version: u32,
    #[serde(default)]
    pub saved_at: Option<String>,
    #[serde(default)]
    pub cooldowns: T,
    /// Usage windows and learned limits ([`LimitLedger`]); absent from files
    /// written before limits were enforced, and while it is empty. Named
    /// `budget` in the file, which other programs read.
    #[serde(
        rename = "budget",
        default,
        skip_serializing_if = "LimitLedger::is_empty"
    )]
    pub limits: LimitLedger,
    /// The part of `limits` this instance's own probes (re-probes of paused
    /// models, quiet bench probes) took, counted there too: `used_by_probes`.
    #[serde(default, skip_serializing_if = "LimitLedger::is_empty")]
    pub probe_budget: LimitLedger,
    /// The probes this instance sent each provider today, limits or not
    /// (`/metrics`' `probe_requests_today`, with `check`'s).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub probe_spent: crate::usage::Spent,
    /// What routed requests showed of each model ([`Traffic`]), for
    /// `check`'s traffic evidence.
    #[serde(default, skip_serializing_if = "Traffic::is_empty")]
    pub traffic: Traffic,
    /// What upstreams said models cannot take ([`Verdicts`]); absent from
    /// files written before, and while it is empty.
    #[serde(default, skip_serializing_if = "Verdicts::is_empty")]
    pub verdicts: Verdicts,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn version() -> u32 {
    1
}

impl<T: Default> RouteState<T> {
    pub fn empty() -> RouteState<T> {
        RouteState {
            version: version(),
            saved_at: None,
            cooldowns: T::default(),
            limits: LimitLedger::default(),
            probe_budget: LimitLedger::default(),
            probe_spent: Default::default(),
            traffic: Traffic::default(),
            verdicts: Verdicts::default(),
            extra: Map::new(),
        }
    }
}

pub fn path(stats_dir: &Path) -> PathBuf {
    stats_dir.join(FILE)
}

/// Read the file; missing or blank is the default.
pub fn load<T: DeserializeOwned + Default>(path: &Path) -> Result<RouteState<T>> {
    fsutil::read_json_file(path, |e| {
        format!(
            "not a valid route state: {e}. It only holds cooldowns: move it aside (and keep it) to start with none"
        )
    })
    .map(|s| s.unwrap_or_else(RouteState::empty))
}

/// Write the file atomically under the data lock.
pub fn save<T: Serialize>(stats_dir: &Path, state: &RouteState<T>) -> Result<()> {
    let lock = DataLock::acquire(stats_dir)?;
    let mut text = serde_json::to_string_pretty(state).expect("route state serialises");
    text.push('\n');
    fsutil::atomic_write(&path(stats_dir), text.as_bytes(), &lock)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Limits;
    use crate::route::cooldown::{Cooldowns, Target};
    use crate::usage::limits::{EffectiveLimits, LimitRequest};

    #[test]
    fn budget_is_saved_next_to_the_cooldowns_and_old_files_still_load() {
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path());
        // A file from before limits: no budget, and a field kept as is.
        std::fs::write(
            &file,
            r#"{"version":1,"saved_at":null,"cooldowns":{},"later":{"x":1}}"#,
        )
        .unwrap();
        let mut state: RouteState<Cooldowns> = load(&file).unwrap();
        assert!(state.limits.is_empty());
        assert!(state.verdicts.is_empty());
        let now = "2026-05-04T12:00:00Z".parse().unwrap();
        let eff = EffectiveLimits {
            model: Limits {
                rpm: Some(1),
                ..Limits::default()
            },
            ..EffectiveLimits::default()
        };
        let t = Target::new("p", "m");
        let req = LimitRequest {
            target: &t,
            limits: &eff,
            tokens: 5,
        };
        state.limits.check_and_count(&req, now).unwrap();
        save(dir.path(), &state).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            text.contains("\"budget\"") && text.contains("\"later\""),
            "{text}"
        );
        // A restart respects the window.
        let mut back: RouteState<Cooldowns> = load(&file).unwrap();
        assert_eq!(back.limits, state.limits);
        assert!(!text.contains("verdicts"), "{text}");
        assert!(back.limits.check_and_count(&req, now).is_err());
        // An empty budget is not written at all.
        save(dir.path(), &RouteState::<Cooldowns>::empty()).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains("budget"), "{text}");
    }

    #[test]
    fn verdicts_are_saved_and_read_back() {
        use crate::upstream::dialect::Need;
        use crate::upstream::hints::Refusal;
        let dir = tempfile::tempdir().unwrap();
        let now = "2026-05-04T12:00:00Z".parse().unwrap();
        let mut state = RouteState::<Cooldowns>::empty();
        state
            .verdicts
            .learn("groq::m", Refusal::Lacks(Need::Tools), "no tools", now);
        save(dir.path(), &state).unwrap();
        let back: RouteState<Cooldowns> = load(&path(dir.path())).unwrap();
        assert!(back.verdicts.lacks("groq::m", Need::Tools, now).is_some());
    }
}
