//! `stats/notify_state.json`: which alerts stand, and how many runs in a
//! row each model (and provider) has failed, so that `--notify-after` and
//! "once per change of direction" hold from one `check` run to the next.
//!
//! It holds model keys, provider names, state names, counts and times:
//! never a URL (a webhook's path is its credential) and never an error
//! text. `check` reads it after taking the run lock, before the first
//! probe, and rewrites it atomically (under the data lock too) once the
//! run's message is sent. A file that cannot be parsed stops the run with
//! exit 4 naming it, and is left byte for byte.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use chrono::{DateTime, SubsecRound, Utc};
use serde::{Deserialize, Serialize};

use crate::catalog::ModelKey;
use crate::error::{DataError, Result, json_error_offset};
use crate::fsutil::{self, DataLock};

pub const FILE: &str = "notify_state.json";

/// What to do about a file that cannot be parsed.
const FIX_HINT: &str = "fix it by hand, or delete it: alerts then start afresh (the models down by then are taken as said; later changes are alerted)";

pub fn path(stats_dir: &Path) -> PathBuf {
    stats_dir.join(FILE)
}

/// The whole file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotifyState {
    pub version: u32,
    /// By `provider::model`.
    #[serde(default)]
    pub models: BTreeMap<String, Standing>,
    /// By provider name.
    #[serde(default)]
    pub providers: BTreeMap<String, Standing>,
    /// There was no file: alerts were just turned on, or the file was
    /// deleted. Not written.
    #[serde(skip)]
    pub fresh: bool,
}

impl Default for NotifyState {
    fn default() -> Self {
        NotifyState {
            version: NotifyState::VERSION,
            models: BTreeMap::new(),
            providers: BTreeMap::new(),
            fresh: false,
        }
    }
}

/// One model's or provider's standing. An entry with nothing to say
/// (no failures, no alert) is left out of the file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Standing {
    /// Consecutive runs in which its probe failed (a provider: in which
    /// it was down).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed_runs: u32,
    /// The alert that stands, by what it said the thing went to:
    /// `paused` or `disabled` for a model, `down` for a provider. Absent
    /// when no alert stands (never alerted, or resolved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alerted: Option<String>,
    /// When that alert was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alerted_at: Option<DateTime<Utc>>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Standing {
    pub fn is_empty(&self) -> bool {
        *self == Standing::default()
    }

    /// Once per change of direction, the alert side: raise an alert that
    /// the subject went `to` at `at`. False, and nothing changes, when an
    /// alert to `to` stands already (said once, never once per run or per
    /// request). `check`'s decision raises only what its own rules
    /// (`--notify-after`, disabled) found due; route's [`super::Batch`]
    /// raises every event it is offered.
    pub fn raise(&mut self, to: &str, at: DateTime<Utc>) -> bool {
        if self.alerted.as_deref() == Some(to) {
            return false;
        }
        self.alerted = Some(to.to_string());
        // Whole seconds, like every other time llmprobe writes.
        self.alerted_at = Some(at.trunc_subsecs(0));
        true
    }

    /// Once per change of direction, the recovery side: the alert that
    /// stands, taken (what it said the subject went to, and when it was
    /// sent), so that a recovery can resolve it. `None` when no alert
    /// stands: then there is nothing to resolve, and the recovery is not
    /// said.
    pub fn resolve(&mut self) -> Option<(String, Option<DateTime<Utc>>)> {
        let was = self.alerted.take()?;
        Some((was, self.alerted_at.take()))
    }
}

impl NotifyState {
    pub const VERSION: u32 = 1;

    /// Read the file. A missing or blank file is a fresh start: nothing
    /// alerted, nothing failing.
    pub fn load(path: &Path) -> Result<NotifyState> {
        let Some(bytes) = fsutil::read_data_file(path)? else {
            return Ok(NotifyState {
                fresh: true,
                ..NotifyState::default()
            });
        };
        let state: NotifyState = serde_json::from_slice(&bytes).map_err(|e| {
            DataError::new(
                path,
                Some(json_error_offset(&bytes, &e)),
                format!(
                    "not a valid notify state file (an object with \"version\": 1, \"models\" and \"providers\"): {e}; {FIX_HINT}"
                ),
            )
        })?;
        if state.version != NotifyState::VERSION {
            return Err(DataError::new(
                path,
                None,
                format!(
                    "version {} is not one this llmprobe knows ({}); {FIX_HINT}",
                    state.version,
                    NotifyState::VERSION
                ),
            )
            .into());
        }
        Ok(state)
    }

    /// This state (`next`, after a run) with the alerts of `prev` put back:
    /// the run's message reached no channel, so what it said is not
    /// marked as said, and the next run that still sees it says it again.
    /// The failure counts stay as the run left them.
    pub fn unsent(mut self, prev: &NotifyState) -> NotifyState {
        for (table, before) in [
            (&mut self.models, &prev.models),
            (&mut self.providers, &prev.providers),
        ] {
            for (k, s) in table.iter_mut() {
                let old = before.get(k).cloned().unwrap_or_default();
                s.alerted = old.alerted;
                s.alerted_at = old.alerted_at;
            }
            for (k, old) in before {
                if old.alerted.is_some() && !table.contains_key(k) {
                    table.insert(
                        k.clone(),
                        Standing {
                            failed_runs: 0,
                            ..old.clone()
                        },
                    );
                }
            }
            table.retain(|_, s| !s.is_empty());
        }
        self
    }

    /// This state without the models and providers the catalog no longer
    /// has at all (`models` and `providers` are the whole catalog's, not
    /// what `--provider` chose for one run), so that the file does not
    /// keep what was removed forever.
    pub fn known_only(
        mut self,
        models: &BTreeSet<ModelKey>,
        providers: &BTreeSet<String>,
    ) -> NotifyState {
        self.models.retain(|k, _| models.contains(k.as_str()));
        self.providers.retain(|k, _| providers.contains(k));
        self
    }

    /// Replace the file atomically. The caller holds the data lock.
    pub fn save(&self, path: &Path, lock: &DataLock) -> Result<()> {
        let mut text = serde_json::to_string_pretty(self).expect("a notify state serialises");
        text.push('\n');
        fsutil::atomic_write(path, text.as_bytes(), lock)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_a_fresh_start_and_a_saved_one_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path());
        let fresh = NotifyState::load(&p).unwrap();
        assert!(fresh.fresh);
        assert_eq!(
            fresh,
            NotifyState {
                fresh: true,
                ..NotifyState::default()
            }
        );
        let mut s = NotifyState::default();
        s.models.insert(
            "p::m".into(),
            Standing {
                failed_runs: 2,
                alerted: Some("paused".into()),
                alerted_at: Some("2026-12-02T10:00:00Z".parse().unwrap()),
            },
        );
        s.providers.insert(
            "p".into(),
            Standing {
                failed_runs: 1,
                ..Standing::default()
            },
        );
        let lock = DataLock::acquire(dir.path()).unwrap();
        s.save(&p, &lock).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "version": 1,
                "models": {"p::m": {"failed_runs": 2, "alerted": "paused",
                                    "alerted_at": "2026-12-02T10:00:00Z"}},
                "providers": {"p": {"failed_runs": 1}},
            })
        );
        assert_eq!(NotifyState::load(&p).unwrap(), s);
    }

    #[test]
    fn an_unsent_message_leaves_the_alerts_as_they_were_and_keeps_the_counts() {
        let standing = |failed_runs, alerted: Option<&str>| Standing {
            failed_runs,
            alerted: alerted.map(str::to_string),
            alerted_at: alerted.map(|_| "2026-12-02T10:00:00Z".parse().unwrap()),
        };
        let mut prev = NotifyState::default();
        prev.models
            .insert("p::up".into(), standing(1, Some("paused")));
        prev.models.insert("p::down".into(), standing(0, None));
        let mut next = NotifyState::default();
        // p::up recovered (resolved, nothing left); p::down alerted.
        next.models
            .insert("p::down".into(), standing(1, Some("paused")));
        let kept = next.unsent(&prev);
        assert_eq!(kept.models["p::up"], standing(0, Some("paused")));
        assert_eq!(kept.models["p::down"], standing(1, None));
        assert_eq!(kept.models.len(), 2);
    }

    #[test]
    fn an_alert_is_stamped_in_whole_seconds() {
        let mut s = Standing::default();
        let at: DateTime<Utc> = "2026-12-02T10:00:00.123456789Z".parse().unwrap();
        assert!(s.raise("paused", at));
        assert_eq!(
            serde_json::to_value(&s).unwrap()["alerted_at"],
            "2026-12-02T10:00:00Z"
        );
    }

    #[test]
    fn only_what_the_catalog_still_has_is_kept() {
        let mut s = NotifyState::default();
        for k in ["p::kept", "p::gone", "q::gone"] {
            s.models.insert(
                k.into(),
                Standing {
                    failed_runs: 1,
                    ..Standing::default()
                },
            );
        }
        s.providers.insert("q".into(), s.models["q::gone"].clone());
        s.providers.insert("p".into(), s.models["p::kept"].clone());
        let models = BTreeSet::from([ModelKey::new("p", "kept")]);
        let providers = BTreeSet::from(["p".to_string()]);
        let kept = s.known_only(&models, &providers);
        assert_eq!(kept.models.keys().collect::<Vec<_>>(), ["p::kept"]);
        assert_eq!(kept.providers.keys().collect::<Vec<_>>(), ["p"]);
    }

    #[test]
    fn garbage_and_a_future_version_are_data_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path());
        for bad in ["{\"version\": 1, \"models\": [", "[]", "{\"version\": 9}"] {
            std::fs::write(&p, bad).unwrap();
            let err = NotifyState::load(&p).unwrap_err();
            assert_eq!(err.exit_code(), crate::exit::DATA, "{bad}");
            assert!(err.to_string().contains("notify_state.json"), "{err}");
            assert_eq!(std::fs::read_to_string(&p).unwrap(), bad);
        }
    }
}
