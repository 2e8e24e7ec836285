//! `check`'s alerts, as a run observer: once the run is recorded it
//! decides what is worth telling ([`super::decide`]), sends one message
//! to every configured channel when something is, and remembers what it
//! said in `notify_state.json` ([`super::record`]).
//!
//! - The file is read when the run starts (it holds the run lock, before
//!   the first probe), so a file that cannot be parsed stops the run with
//!   exit 4 before it spends a probe, and is left as it is.
//! - An offline run (exit 6) sends nothing (the channels could not be
//!   reached either) and says so once on stderr; the file is not touched.
//! - A channel that cannot be reached costs one warning naming only its
//!   scheme and host, never the exit code. When no channel took the
//!   message, the alerts in it are not marked as sent, so the next run
//!   that still sees them says them again.
//! - `--list`, `--dry-run` and a run that was not due never get here
//!   (`cmd/check.rs` registers no alert observer for the first two; the
//!   last never starts).

use std::path::PathBuf;

use super::Message;
use super::decide::{self, Rules, Run};
use super::notifier::Notifier;
use super::record::{self, NotifyState};
use crate::catalog::ModelKey;
use crate::error::Result;
use crate::fsutil::DataLock;
use crate::run_observer::{FinishedRun, RunObserver};
use crate::settings::Settings;
use crate::state::{ModelState, States};
use crate::upstream::secret::Redactor;
use std::collections::BTreeSet;

/// Alerts for one `check` run.
pub struct NotifyObserver {
    notifier: Notifier,
    rules: Rules,
    reprobe: bool,
    /// Every key the catalog resolves, for the errors a message quotes.
    redactor: Redactor,
    path: PathBuf,
    /// Every model (`provider::model`) and provider the catalog has,
    /// whatever `--provider` chose: what `notify_state.json` keeps.
    known: Known,
    /// `notify_state.json` as the run found it.
    prev: Option<NotifyState>,
}

impl NotifyObserver {
    /// The alerts for a run with these settings, `--notify` URLs,
    /// `--notify-on` (else `[notify] on`) and `--notify-after` (else
    /// `[notify] after`); `reprobe` for `check --paused`. `None` when no
    /// channel is configured: then nothing is sent, and
    /// `notify_state.json` is neither read nor written. A URL that names
    /// no channel is a config error (exit 2).
    pub fn new(
        s: &Settings,
        urls: &[String],
        on: &[crate::catalog::AlertOn],
        after: Option<u32>,
        reprobe: bool,
    ) -> Result<Option<NotifyObserver>> {
        let Some(notifier) = Notifier::configured(s, urls)? else {
            let mut given = Vec::new();
            if !on.is_empty() {
                let names: Vec<&str> = on.iter().map(|o| o.as_str()).collect();
                given.push(format!("--notify-on {}", names.join(",")));
            }
            if let Some(n) = after {
                given.push(format!("--notify-after {n}"));
            }
            if !given.is_empty() {
                eprintln!(
                    "warning: notify: {} has no effect: no alert channel is configured \
                     (give --notify URL, set {}, or name variables in [notify] url_env)",
                    given.join(" and "),
                    super::channel::NOTIFY_VAR
                );
            }
            return Ok(None);
        };
        let redactor = s.catalog.redactor();
        Ok(Some(NotifyObserver {
            notifier,
            rules: Rules::of(&s.catalog.notify, on, after),
            reprobe,
            redactor,
            path: record::path(s.stats_dir()),
            known: Known::of(&s.catalog),
            prev: None,
        }))
    }
}

/// The catalog's models and providers.
struct Known {
    models: BTreeSet<ModelKey>,
    providers: BTreeSet<String>,
}

impl Known {
    fn of(catalog: &crate::catalog::Catalog) -> Known {
        Known {
            models: catalog
                .providers
                .iter()
                .flat_map(|p| p.models.iter().map(|m| ModelKey::new(&p.name, m)))
                .collect(),
            providers: catalog.providers.iter().map(|p| p.name.clone()).collect(),
        }
    }
}

impl RunObserver for NotifyObserver {
    fn on_start(&mut self) -> Result<()> {
        self.prev = Some(NotifyState::load(&self.path)?);
        Ok(())
    }

    fn on_finish(&mut self, run: &FinishedRun<'_>) -> Result<()> {
        let Some(prev) = self.prev.take() else {
            return Ok(());
        };
        if run.offline {
            eprintln!(
                "notify: offline run: no alert sent (no provider could be reached, so no webhook could be either)"
            );
            return Ok(());
        }
        let states = States::load(run.state_path)?;
        let state_of = |k: &str| states.state_of(k);
        let disabled: Vec<(String, Option<String>)> = states
            .iter()
            .filter(|(k, e)| {
                e.state == ModelState::Disabled && self.known.models.contains(k.as_str())
            })
            .map(|(k, e)| (k, e.reason))
            .collect();
        let redactor = &self.redactor;
        let d = decide::decide(
            &prev,
            &Run {
                at: run.finished_at,
                entries: run.entries,
                transitions: run.state_changes,
                state_of: &state_of,
                reprobe: self.reprobe,
                disabled: &disabled,
                catalog: &self.known.models,
            },
            &self.rules,
            &|t| decide::clean_error(redactor, t),
        );
        let mut next = d.state;
        if !d.changes.is_empty() {
            let n = d.changes.len();
            let msg = Message {
                at: run.finished_at,
                changes: d.changes,
                test: false,
            };
            if !self.notifier.send(&msg, "the run's result is unchanged") {
                next = next.unsent(&prev);
            } else {
                tracing::info!(changes = n, "notify: alert sent");
            }
        }
        let next = next.known_only(&self.known.models, &self.known.providers);
        if next != prev {
            let lock = DataLock::acquire(run.stats_dir)?;
            next.save(&self.path, &lock)?;
        }
        Ok(())
    }
}
