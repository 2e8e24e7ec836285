//! The one writer of a `check` run: it appends each batch of results to
//! the health log and applies it to the state file, each under the data
//! lock, and holds back remote unreachable results until it is known that
//! this machine is online (see the offline rule in `docs/formats.md`).

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::Serialize;

use super::lanes::Probed;
use crate::catalog::model_key;
use crate::error::Result;
use crate::fsutil::DataLock;
use crate::healthlog;
use crate::outcome::Entry;
use crate::state::{States, Transition};

/// No remote provider could be reached: what was not recorded, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Offline {
    /// Remote providers probed.
    pub providers: usize,
    /// Probes whose results were dropped.
    pub probes: usize,
    /// The distinct transport errors, e.g. "dns lookup failed".
    pub causes: Vec<String>,
}

impl std::fmt::Display for Offline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "offline: none of {} remote provider{} could be reached ({}); nothing recorded",
            self.providers,
            if self.providers == 1 { "" } else { "s" },
            self.causes.join(", ")
        )
    }
}

/// What the writer did.
#[derive(Debug)]
pub struct Written {
    pub entries: Vec<Entry>,
    pub changes: Vec<Transition>,
    pub offline: Option<Offline>,
}

/// Appends results and applies them to the state file, holding back remote
/// unreachable results until it is known that this machine is online.
pub struct Writer {
    log_path: PathBuf,
    state_path: PathBuf,
    stats_dir: PathBuf,
    disable_after: u32,
    /// Some remote provider answered (any HTTP response): the machine is
    /// online, and unreachable results are data.
    reached_remote: bool,
    /// Remote unreachable results, while no remote provider has answered.
    held: Vec<Probed>,
    remote_providers: BTreeSet<String>,
    entries: Vec<Entry>,
    changes: Vec<Transition>,
}

impl Writer {
    /// A writer for the data files of `stats_dir`.
    pub fn new(
        log_path: PathBuf,
        state_path: PathBuf,
        stats_dir: PathBuf,
        disable_after: u32,
    ) -> Writer {
        Writer {
            log_path,
            state_path,
            stats_dir,
            disable_after,
            reached_remote: false,
            held: Vec::new(),
            remote_providers: BTreeSet::new(),
            entries: Vec::new(),
            changes: Vec::new(),
        }
    }

    /// Record one batch of results (see the module's paragraph).
    pub fn accept(&mut self, batch: Vec<Probed>) -> Result<()> {
        let mut ready = Vec::with_capacity(batch.len());
        for p in batch {
            if p.remote {
                self.remote_providers.insert(p.entry.provider.clone());
                if !self.reached_remote {
                    if p.unreachable {
                        self.held.push(p);
                        continue;
                    }
                    self.reached_remote = true;
                    ready.append(&mut self.held);
                }
            }
            ready.push(p);
        }
        if ready.is_empty() {
            return Ok(());
        }
        let entries: Vec<Entry> = ready.iter().map(|p| p.entry.clone()).collect();
        let lock = DataLock::acquire(&self.stats_dir)?;
        healthlog::append(&self.log_path, &entries, &lock)?;
        let mut states = States::load(&self.state_path)?;
        let before = states.clone();
        for p in &ready {
            let key = model_key(&p.entry.provider, &p.entry.model);
            if let Some(t) = states.apply_probe(&key, p.verdict, &p.entry.ts, self.disable_after) {
                tracing::debug!(model = %t.model, from = %t.from, to = %t.to, reason = %t.reason, "state change");
                self.changes.push(t);
            }
        }
        if states != before {
            states.save(&self.state_path, &lock)?;
        }
        drop(lock);
        self.entries.extend(entries);
        Ok(())
    }

    /// Whatever is still held was never recorded: no remote provider
    /// answered, so the run was offline.
    pub fn finish(self) -> Written {
        let offline = (!self.held.is_empty()).then(|| {
            let mut causes: Vec<String> = Vec::new();
            for p in &self.held {
                let cause = p
                    .entry
                    .error
                    .clone()
                    .unwrap_or_else(|| p.entry.failure_type.into());
                if !causes.contains(&cause) {
                    causes.push(cause);
                }
            }
            causes.truncate(3);
            Offline {
                providers: self.remote_providers.len(),
                probes: self.held.len(),
                causes,
            }
        });
        Written {
            entries: self.entries,
            changes: self.changes,
            offline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{FailureType, Outcome};

    fn probed(provider: &str, remote: bool, unreachable: bool) -> Probed {
        let o = Outcome {
            failure: unreachable.then_some(FailureType::Error),
            latency_ms: if unreachable { 0 } else { 5 },
            status: (!unreachable).then_some(200),
            error: unreachable.then(|| "dns lookup failed".to_string()),
            unreachable,
        };
        Probed {
            entry: Entry::new("2026-12-01T00:00:00Z".into(), provider, "m", &o),
            verdict: o.verdict(),
            remote,
            unreachable,
        }
    }

    fn writer(dir: &std::path::Path) -> Writer {
        Writer {
            log_path: dir.join("health_log.json"),
            state_path: dir.join("model_state.json"),
            stats_dir: dir.to_path_buf(),
            disable_after: 3,
            reached_remote: false,
            held: Vec::new(),
            remote_providers: Default::default(),
            entries: Vec::new(),
            changes: Vec::new(),
        }
    }

    #[test]
    fn unreachable_remotes_are_held_until_one_answers() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path());
        w.accept(vec![probed("a", true, true), probed("local", false, true)])
            .unwrap();
        // Only the loopback result is written while no remote has answered.
        assert_eq!(w.entries.len(), 1);
        assert_eq!(w.entries[0].provider, "local");
        w.accept(vec![probed("b", true, false), probed("c", true, true)])
            .unwrap();
        let written: Vec<&str> = w.entries.iter().map(|e| e.provider.as_str()).collect();
        assert_eq!(written, ["local", "a", "b", "c"]);
        let done = w.finish();
        assert!(done.offline.is_none());
        assert_eq!(done.changes.len(), 3, "a, c and local are paused");
    }

    #[test]
    fn no_remote_answering_is_offline_and_writes_nothing_remote() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path());
        w.accept(vec![probed("a", true, true), probed("b", true, true)])
            .unwrap();
        w.accept(vec![probed("a", true, true)]).unwrap();
        let done = w.finish();
        let off = done.offline.expect("offline");
        assert_eq!((off.providers, off.probes), (2, 3));
        assert_eq!(
            off.to_string(),
            "offline: none of 2 remote providers could be reached (dns lookup failed); nothing recorded"
        );
        assert!(done.entries.is_empty() && done.changes.is_empty());
        assert!(!dir.path().join("health_log.json").exists());
        assert!(!dir.path().join("model_state.json").exists());
    }

    #[test]
    fn only_loopback_providers_are_never_offline() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path());
        w.accept(vec![probed("local", false, true)]).unwrap();
        let done = w.finish();
        assert!(done.offline.is_none());
        assert_eq!(done.entries.len(), 1);
    }
}
