//! The one writer of a `check` run: it appends each batch of results to
//! the health log and applies it to the state file, each under the data
//! lock, and holds back remote unreachable results until it is known that
//! this machine is online (see the offline rule in `docs/formats.md`).
//!
//! Capability probes' results go the same way to their own files: appended
//! to `capability_log.json` (the health log's format and append, plus
//! `probe`), and, when a probe decided something, recorded in
//! `capabilities.json`, under the same lock and after the batch's basic
//! results are safe. They never touch the health log or the state file,
//! and the offline rule holds them back like any other result.

use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDate;
use std::path::PathBuf;

use serde::Serialize;

use super::lanes::Probed;
use crate::capabilities::{Finding, Findings, Judgement};
use crate::catalog::model_key;
use crate::discovery::{ModelLists, Probation};
use crate::error::Result;
use crate::fsutil::DataLock;
use crate::healthlog;
use crate::outcome::{Entry, Verdict};
use crate::settings::Settings;
use crate::state::{States, Transition};

/// No remote provider could be reached: what was recorded and what was
/// not, and why (the offline rule, docs/formats.md).
#[derive(Debug, Clone, Serialize)]
pub struct Offline {
    /// Remote providers probed, or whose model list failed to reach them.
    pub providers: usize,
    /// Remote results not recorded (`not_recorded`'s length).
    pub probes: usize,
    /// The distinct transport errors, e.g. "dns lookup failed".
    pub causes: Vec<String>,
    /// Results recorded: the loopback providers', judged on their own.
    pub recorded: usize,
    /// Basic probes of the plan not done because the run stopped once it
    /// knew it was offline (not sent, or given up under way).
    pub not_done: usize,
    /// The remote results not recorded, as their log entries would have
    /// been.
    pub not_recorded: Vec<Entry>,
}

impl std::fmt::Display for Offline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = crate::format::count;
        write!(
            f,
            "offline: {} could not be reached ({}); ",
            count(self.providers, "remote provider", "remote providers"),
            self.causes.join(", ")
        )?;
        match self.probes {
            0 => write!(f, "no probe was sent to them; ")?,
            1 => write!(f, "their 1 result was not recorded; ")?,
            n => write!(f, "their {n} results were not recorded; ")?,
        }
        match self.recorded {
            0 => write!(f, "nothing was recorded")?,
            1 => write!(f, "1 result from loopback providers was recorded")?,
            n => write!(f, "{n} results from loopback providers were recorded")?,
        }
        if self.not_done > 0 {
            write!(
                f,
                "; {} not done",
                count(self.not_done, "planned probe", "planned probes")
            )?;
        }
        Ok(())
    }
}

/// One recorded capability probe: its `capability_log.json` entry, and
/// what it decided (`null` in JSON when it decided nothing and the verdict
/// stays as it was).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapRecord {
    #[serde(flatten)]
    pub entry: Entry,
    #[serde(rename = "verdict")]
    pub decided: Option<Judgement>,
}

/// What the writer did.
#[derive(Debug)]
pub struct Written {
    /// Basic probes, in the health log.
    pub entries: Vec<Entry>,
    /// Capability probes, in the capability log.
    pub capabilities: Vec<CapRecord>,
    pub changes: Vec<Transition>,
    /// Each model a hard failure of this run moved toward `disabled`: its
    /// hard failures in a row after it, and how many disable it.
    pub hard: BTreeMap<String, (u32, u32)>,
    pub offline: Option<Offline>,
    /// The verdicts file could not be read when a capability result came:
    /// the run fails with it (exit 4) once everything else is recorded.
    pub findings_error: Option<crate::error::Error>,
}

/// Discovery's record of one probe of `key` ([`Lists::concerns`]).
fn record_listed(lists: &mut ModelLists, run: &Lists, key: &str, p: &Probed) {
    let at = crate::time::parse_ts(&p.entry.ts)
        .and_then(|t| chrono::DateTime::from_timestamp(t, 0))
        .unwrap_or_else(|| crate::clock::Clock::from_env().now());
    if run.probation.contains(key) {
        let Some(d) = lists.discovered.get_mut(key) else {
            return;
        };
        d.probed_at = Some(at);
        match p.verdict {
            Verdict::Pass => d.status = Probation::Passed,
            // The key refused: says nothing of the model.
            Verdict::Hard(_) if matches!(p.entry.status, Some(401 | 403)) => {}
            Verdict::Hard(_) => {
                d.status = Probation::Dropped;
                d.why = Some(
                    p.entry
                        .error
                        .clone()
                        .unwrap_or_else(|| p.entry.failure_type.to_string()),
                );
            }
            Verdict::Temporary(_) => {}
        }
    } else if p.verdict == Verdict::Pass
        && let Some(m) = lists.missing.get_mut(key)
    {
        m.answering = true;
    }
}

/// Appends results and applies them to the state file, holding back remote
/// unreachable results until it is known that this machine is online.
pub struct Writer {
    log_path: PathBuf,
    state_path: PathBuf,
    cap_log_path: PathBuf,
    findings_path: PathBuf,
    stats_dir: PathBuf,
    disable_after: u32,
    /// Some remote provider answered (any HTTP response): the machine is
    /// online, and unreachable results are data.
    reached_remote: bool,
    /// Remote unreachable results, while no remote provider has answered.
    held: Vec<Probed>,
    remote_providers: BTreeSet<String>,
    /// The remote providers with a probe due this run ([`Writer::watch_offline`]).
    remote_due: BTreeSet<String>,
    /// Remote providers whose model list failed this run without reaching
    /// their host, with why.
    lists_unreachable: BTreeMap<String, String>,
    entries: Vec<Entry>,
    capabilities: Vec<CapRecord>,
    changes: Vec<Transition>,
    /// Hard failures in a row, and the count that disables, per model.
    hard: BTreeMap<String, (u32, u32)>,
    /// The verdicts file could not be read: left alone, reported at the end.
    findings_error: Option<crate::error::Error>,
    /// The `source` each entry is written with (`reprobe`), if any.
    source: Option<&'static str>,
    /// What discovery and retirement judge of this run's probes.
    lists: Lists,
}

/// What the writer needs to know of the providers' model lists
/// (docs/discovery.md).
#[derive(Debug, Clone, Default)]
pub struct Lists {
    /// Discovered models on probation in this run: a pass adopts one, a
    /// hard failure drops it, and neither touches the state file.
    pub probation: BTreeSet<String>,
    /// Catalog models a fresh, complete list lacks, with the first day it
    /// lacked them: a "not found" retires one at once; a pass marks it
    /// `unlisted`.
    pub unlisted: BTreeMap<String, NaiveDate>,
}

impl Lists {
    fn concerns(&self, key: &str) -> bool {
        self.probation.contains(key) || self.unlisted.contains_key(key)
    }
}

impl Writer {
    /// A writer for the data files of the settings' stats directory.
    pub fn new(s: &Settings) -> Writer {
        Writer {
            log_path: s.log_path(),
            state_path: s.state_path(),
            cap_log_path: s.capability_log_path(),
            findings_path: s.capabilities_path(),
            stats_dir: s.stats_dir().to_path_buf(),
            disable_after: s.catalog.defaults.disable_after,
            reached_remote: false,
            held: Vec::new(),
            remote_providers: BTreeSet::new(),
            remote_due: BTreeSet::new(),
            lists_unreachable: BTreeMap::new(),
            entries: Vec::new(),
            capabilities: Vec::new(),
            changes: Vec::new(),
            hard: BTreeMap::new(),
            findings_error: None,
            source: None,
            lists: Lists::default(),
        }
    }

    /// Judge the probes of models on probation, and of models their
    /// provider's list lacks, by `lists`.
    pub fn with_lists(mut self, lists: Lists) -> Writer {
        self.lists = lists;
        self
    }

    /// Remote providers whose model list failed this run without reaching
    /// their host (provider → why): each counts as a first probe that
    /// failed so ([`Writer::offline_now`]).
    pub fn with_lists_unreachable(mut self, failed: BTreeMap<String, String>) -> Writer {
        self.lists_unreachable = failed;
        self
    }

    /// The remote providers with a probe due this run, whose first
    /// results [`Writer::offline_now`] watches.
    pub fn watch_offline(&mut self, remote_due: BTreeSet<String>) {
        self.remote_due = remote_due;
    }

    /// Whether the run is known to be offline already: no remote provider
    /// has answered, and every one with a probe due this run has failed
    /// its first probe, or its model list, without reaching its host.
    /// Their later probes would say nothing more: the run may stop.
    pub fn offline_now(&self) -> bool {
        !self.reached_remote
            && !self.remote_due.is_empty()
            && self.remote_due.iter().all(|p| {
                self.lists_unreachable.contains_key(p)
                    || self.held.iter().any(|h| &h.entry.provider == p)
            })
    }

    /// Mark every entry written with `source` ([`crate::outcome::SOURCE_REPROBE`]).
    pub fn with_source(mut self, source: &'static str) -> Writer {
        self.source = Some(source);
        self
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
        if let Some(source) = self.source {
            for p in &mut ready {
                p.entry.source = Some(source);
            }
        }
        if ready.is_empty() {
            return Ok(());
        }
        let (caps, basic): (Vec<Probed>, Vec<Probed>) =
            ready.into_iter().partition(Probed::is_capability);
        // The run made or found the stats directory when it started; one
        // removed since is an error, never made again (see
        // `DataLock::acquire_existing`).
        let lock = DataLock::acquire_existing(&self.stats_dir)?;
        if !basic.is_empty() {
            let entries: Vec<Entry> = basic.iter().map(|p| p.entry.clone()).collect();
            let appended = healthlog::append(&self.log_path, &entries, &lock)?;
            // The log and the state file change together or not at all: a
            // state that cannot be read or written takes the batch back out
            // of the log, so that the next run starts from a state that
            // agrees with the log.
            let undo =
                |e: crate::error::Error| match healthlog::undo(&self.log_path, &appended, &lock) {
                    Ok(()) => e,
                    Err(u) => {
                        eprintln!("warning: {u}");
                        e
                    }
                };
            let mut states = States::load(&self.state_path).map_err(undo)?;
            let before = states.clone();
            let changed_before = self.changes.len();
            let listed: Vec<(&Probed, String)> = basic
                .iter()
                .map(|p| (p, model_key(&p.entry.provider, &p.entry.model)))
                .filter(|(_, key)| self.lists.concerns(key))
                .collect();
            if !listed.is_empty() {
                // A model list cache that cannot be read is left as it is:
                // these probes then count as the catalog's own.
                let now = crate::clock::Clock::from_env().now();
                if let Err(e) = ModelLists::update_locked(&self.stats_dir, now, &lock, |lists| {
                    for (p, key) in &listed {
                        record_listed(lists, &self.lists, key, p);
                    }
                }) {
                    eprintln!("warning: {e}; discovery's record is not updated");
                }
            }
            for p in &basic {
                let key = model_key(&p.entry.provider, &p.entry.model);
                if self.lists.probation.contains(&key) {
                    // On probation: the record above judges it; the state
                    // file knows it only once it passed.
                    if p.verdict != Verdict::Pass {
                        continue;
                    }
                } else if let Some(since) = self.lists.unlisted.get(&key)
                    && p.model_gone
                {
                    if let Some(t) = states.retire(&key, &p.entry.ts, *since) {
                        self.changes.push(t);
                    }
                    continue;
                }
                if let Some(t) = states.apply_probe_waiting(
                    &key,
                    p.verdict,
                    &p.entry.ts,
                    self.disable_after,
                    p.retry_at.as_deref(),
                ) {
                    tracing::debug!(model = %t.model, from = %t.from, to = %t.to, reason = %t.reason, "state change");
                    self.changes.push(t);
                }
                if matches!(p.verdict, Verdict::Hard(_))
                    && let Some(e) = states.entry(&key)
                {
                    self.hard
                        .insert(key.clone(), (e.consecutive_failures, self.disable_after));
                }
            }
            if states != before
                && let Err(e) = states.save(&self.state_path, &lock)
            {
                self.changes.truncate(changed_before);
                return Err(undo(e));
            }
            self.entries.extend(entries);
        }
        // Capability results last, so that a bad capability file never
        // keeps a basic result from the health log or the state file.
        if !caps.is_empty() {
            let entries: Vec<Entry> = caps.iter().map(|p| p.entry.clone()).collect();
            let appended = healthlog::append(&self.cap_log_path, &entries, &lock)?;
            self.capabilities.extend(caps.iter().map(|p| CapRecord {
                entry: p.entry.clone(),
                decided: p.decided,
            }));
            // A verdicts file that no longer parses (edited by hand during
            // the run) is left as it is, and reported when the run ends:
            // the other providers' results keep being recorded.
            match Findings::load(&self.findings_path) {
                Ok(mut findings) => {
                    for p in &caps {
                        let Some(cap) = p.entry.probe else { continue };
                        let key = model_key(&p.entry.provider, &p.entry.model);
                        match p.decided {
                            Some(verdict) => findings.record(&key, cap, finding(&p.entry, verdict)),
                            None => findings.tried(&key, cap, &p.entry.ts),
                        }
                    }
                    // As for the state file: a verdicts file that cannot
                    // be written takes these capability entries back out.
                    if let Err(e) = findings.save(&self.findings_path, &lock) {
                        if let Err(u) = healthlog::undo(&self.cap_log_path, &appended, &lock) {
                            eprintln!("warning: {u}");
                        }
                        return Err(e);
                    }
                }
                Err(e) => {
                    self.findings_error.get_or_insert(e);
                }
            }
        }
        drop(lock);
        Ok(())
    }

    /// Whatever is still held was never recorded: no remote provider
    /// answered, so the run was offline (so too when every remote
    /// provider's model list failed and the run stopped before probing
    /// them).
    pub fn finish(self) -> Written {
        let offline = (!self.held.is_empty() || self.offline_now()).then(|| {
            let mut causes: Vec<String> = Vec::new();
            let mut providers = self.remote_providers.clone();
            let lists = self
                .lists_unreachable
                .iter()
                .filter(|(p, _)| self.remote_due.contains(*p));
            for (p, why) in lists {
                providers.insert(p.clone());
                if !causes.contains(why) {
                    causes.push(why.clone());
                }
            }
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
                providers: providers.len(),
                probes: self.held.len(),
                causes,
                recorded: self.entries.len() + self.capabilities.len(),
                not_done: 0,
                not_recorded: self.held.iter().map(|p| p.entry.clone()).collect(),
            }
        });
        Written {
            entries: self.entries,
            capabilities: self.capabilities,
            changes: self.changes,
            hard: self.hard,
            offline,
            findings_error: self.findings_error,
        }
    }
}

/// The verdict a capability probe's `entry` decided, seen when the probe
/// started. A `no` says why: the failure class and the (redacted) reason,
/// e.g. "wrong_answer: answered in text, no call of add". A `yes` of the
/// speed probe keeps its figures (only its entries carry them).
fn finding(entry: &Entry, verdict: Judgement) -> Finding {
    let passed = verdict == Judgement::Yes;
    let reason = (verdict == Judgement::No).then(|| match &entry.error {
        Some(e) if !entry.failure_type.is_empty() => format!("{}: {e}", entry.failure_type),
        Some(e) => e.clone(),
        None if !entry.failure_type.is_empty() => entry.failure_type.to_string(),
        None => "failed the check".to_string(),
    });
    Finding {
        verdict,
        seen: Some(entry.ts.clone()),
        reason: reason.map(|r| crate::outcome::truncate_reason(&r)),
        ttft_ms: entry.ttft_ms.filter(|_| passed),
        output_tokens: entry.output_tokens.filter(|_| passed),
        tokens_per_s: entry.tokens_per_s.filter(|_| passed),
        ..Finding::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::Capability;
    use crate::outcome::{FailureType, Outcome};

    fn probed(provider: &str, remote: bool, unreachable: bool) -> Probed {
        let o = Outcome {
            failure: unreachable.then_some(FailureType::Error),
            latency_ms: if unreachable { 0 } else { 5 },
            status: (!unreachable).then_some(200),
            error: unreachable.then(|| "dns lookup failed".to_string()),
            unreachable,
            retry_at: None,
            model_gone: false,
            timing: Default::default(),
        };
        Probed {
            entry: Entry::new("2026-12-01T00:00:00Z".into(), provider, "m", &o),
            verdict: o.verdict(),
            remote,
            unreachable,
            decided: None,
            retry_at: None,
            model_gone: false,
        }
    }

    /// A capability probe of `provider::model` for `cap`: `failure` with
    /// `status` and `error`, deciding `decided`.
    fn cap_probed(
        model: &str,
        cap: Capability,
        failure: Option<FailureType>,
        status: Option<u16>,
        error: Option<&str>,
        decided: Option<Judgement>,
    ) -> Probed {
        let o = Outcome {
            failure,
            latency_ms: 7,
            status,
            error: error.map(str::to_string),
            unreachable: false,
            retry_at: None,
            model_gone: false,
            timing: Default::default(),
        };
        let mut entry = Entry::new("2026-12-01T10:00:05Z".into(), "p", model, &o);
        entry.probe = Some(cap);
        Probed {
            entry,
            verdict: o.verdict(),
            remote: true,
            unreachable: false,
            decided,
            retry_at: None,
            model_gone: false,
        }
    }

    fn writer(dir: &std::path::Path) -> Writer {
        Writer {
            log_path: dir.join("health_log.json"),
            state_path: dir.join("model_state.json"),
            cap_log_path: dir.join(crate::capabilities::LOG_FILE),
            findings_path: dir.join(crate::capabilities::FINDINGS_FILE),
            stats_dir: dir.to_path_buf(),
            disable_after: 3,
            reached_remote: false,
            held: Vec::new(),
            remote_providers: Default::default(),
            remote_due: Default::default(),
            lists_unreachable: Default::default(),
            entries: Vec::new(),
            capabilities: Vec::new(),
            changes: Vec::new(),
            hard: BTreeMap::new(),
            findings_error: None,
            source: None,
            lists: Lists::default(),
        }
    }

    fn read_json(path: &std::path::Path) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn the_wait_a_failure_carried_is_the_paused_models_retry_at() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path()).with_source(crate::outcome::SOURCE_REPROBE);
        let wait = chrono::DateTime::parse_from_rfc3339("2026-12-01T10:10:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let limited = Outcome {
            failure: Some(FailureType::RateLimit),
            latency_ms: 3,
            status: Some(429),
            error: Some("HTTP 429: slow down".into()),
            unreachable: false,
            retry_at: Some(wait),
            model_gone: false,
            timing: Default::default(),
        };
        let ts = "2026-12-01T10:00:00Z";
        w.accept(vec![Probed::basic(ts.into(), "p", "m", &limited, true)])
            .unwrap();
        let state = read_json(&dir.path().join("model_state.json"));
        assert_eq!(state["p::m"]["state"], "paused");
        assert_eq!(state["p::m"]["since"], ts);
        assert_eq!(state["p::m"]["retry_at"], "2026-12-01T10:10:00Z");
        let log = read_json(&dir.path().join("health_log.json"));
        assert_eq!(log[0]["source"], "reprobe");
        // A pass clears it, and brings the model back.
        let ok = Outcome {
            failure: None,
            status: Some(200),
            error: None,
            retry_at: None,
            ..limited
        };
        let later = "2026-12-01T10:10:05Z";
        w.accept(vec![Probed::basic(later.into(), "p", "m", &ok, true)])
            .unwrap();
        let state = read_json(&dir.path().join("model_state.json"));
        assert_eq!(state["p::m"]["state"], "active");
        assert_eq!(state["p::m"]["recovered_at"], later);
        assert!(state["p::m"].get("retry_at").is_none(), "{state}");
    }

    /// A state file that cannot be written takes the batch back out of
    /// the log; a verdicts file that cannot be written, the capability
    /// entries out of theirs. Batches recorded before stay.
    #[test]
    fn a_failed_state_write_takes_the_batch_back_out_of_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path());
        w.accept(vec![Probed::basic(
            "2026-12-01T00:00:00Z".into(),
            "p",
            "m",
            &Outcome {
                failure: Some(FailureType::WrongAnswer),
                latency_ms: 1,
                status: Some(200),
                error: None,
                unreachable: false,
                retry_at: None,
                model_gone: false,
                timing: Default::default(),
            },
            true,
        )])
        .unwrap();
        let log = std::fs::read(&w.log_path).unwrap();
        // The state file's directory is gone: its temporary file cannot
        // be made.
        w.state_path = dir.path().join("gone/model_state.json");
        w.findings_path = dir.path().join("gone/capabilities.json");
        let failing = Outcome {
            failure: Some(FailureType::WrongAnswer),
            latency_ms: 1,
            status: Some(200),
            error: None,
            unreachable: false,
            retry_at: None,
            model_gone: false,
            timing: Default::default(),
        };
        let err = w
            .accept(vec![Probed::basic(
                "2026-12-01T00:01:00Z".into(),
                "p",
                "m",
                &failing,
                true,
            )])
            .unwrap_err();
        assert_eq!(err.exit_code(), crate::exit::IO, "{err}");
        assert!(err.to_string().contains("model_state.json"), "{err}");
        assert_eq!(std::fs::read(&w.log_path).unwrap(), log);
        assert_eq!(w.entries.len(), 1);
        let err = w
            .accept(vec![cap_probed(
                "m",
                Capability::Tools,
                None,
                Some(200),
                None,
                Some(Judgement::Yes),
            )])
            .unwrap_err();
        assert!(err.to_string().contains("capabilities.json"), "{err}");
        assert_eq!(std::fs::read(&w.cap_log_path).unwrap(), b"");
    }

    #[test]
    fn a_stats_directory_removed_during_the_run_is_not_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let stats = dir.path().join("stats");
        std::fs::create_dir(&stats).unwrap();
        let mut w = writer(&stats);
        std::fs::remove_dir(&stats).unwrap();
        let err = w.accept(vec![probed("p", true, false)]).unwrap_err();
        assert_eq!(err.exit_code(), crate::exit::IO);
        assert!(err.to_string().contains("is gone"), "{err}");
        assert!(!stats.exists());
    }

    #[test]
    fn capability_results_go_to_their_own_log_and_verdicts_never_to_state() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path());
        let wrong = "answered in text, no call of add";
        w.accept(vec![
            probed("p", true, false),
            cap_probed(
                "m",
                Capability::Tools,
                None,
                Some(200),
                None,
                Some(Judgement::Yes),
            ),
            cap_probed(
                "n",
                Capability::Json,
                Some(FailureType::WrongAnswer),
                Some(200),
                Some(wrong),
                Some(Judgement::No),
            ),
        ])
        .unwrap();
        // The health log has only the basic probe, with no `probe` field.
        let health = read_json(&dir.path().join("health_log.json"));
        assert_eq!(health.as_array().unwrap().len(), 1);
        assert!(health[0].get("probe").is_none(), "{health}");
        // The capability log: the six fields, then `probe`, then the rest.
        let text = std::fs::read_to_string(dir.path().join("capability_log.json")).unwrap();
        assert!(
            text.contains(r#"{"ts":"2026-12-01T10:00:05Z","provider":"p","model":"n","ok":0,"latency_ms":7,"failure_type":"wrong_answer","probe":"json","status":200,"error":"answered in text, no call of add"}"#),
            "{text}"
        );
        let caplog = read_json(&dir.path().join("capability_log.json"));
        assert_eq!(caplog.as_array().unwrap().len(), 2);
        assert_eq!(caplog[0]["probe"], "tools");
        assert_eq!(caplog[0]["ok"], 1);
        let f = read_json(&dir.path().join("capabilities.json"));
        assert_eq!(
            f,
            serde_json::json!({
                "p::m": {"tools": {"verdict": "yes", "seen": "2026-12-01T10:00:05Z"}},
                "p::n": {"json": {"verdict": "no", "seen": "2026-12-01T10:00:05Z",
                                  "reason": "wrong_answer: answered in text, no call of add"}},
            })
        );
        // A failed capability probe changes no state: nothing was written
        // for p::n, and the basic pass changed nothing either.
        assert!(!dir.path().join("model_state.json").exists());
        let done = w.finish();
        assert_eq!(done.entries.len(), 1);
        assert_eq!(done.capabilities.len(), 2);
        assert!(done.changes.is_empty());
        assert_eq!(
            serde_json::to_value(&done.capabilities[1]).unwrap()["verdict"],
            "no"
        );
    }

    #[test]
    fn an_undecided_capability_probe_leaves_the_verdict() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("capabilities.json");
        let before = "{\n  \"p::m\": {\"tools\": {\"verdict\": \"yes\", \"seen\": \"2026-11-30T10:00:00Z\"}}\n}\n";
        std::fs::write(&path, before).unwrap();
        let mut w = writer(dir.path());
        w.accept(vec![cap_probed(
            "m",
            Capability::Tools,
            Some(FailureType::RateLimit),
            Some(429),
            Some("HTTP 429: slow down"),
            None,
        )])
        .unwrap();
        // The verdict and its date stand; the try is noted, so that the
        // capability waits behind those never tried.
        let after = read_json(&path);
        assert_eq!(
            after["p::m"]["tools"],
            serde_json::json!({"verdict": "yes", "seen": "2026-11-30T10:00:00Z", "tried": "2026-12-01T10:00:05Z"}),
        );
        let caplog = read_json(&dir.path().join("capability_log.json"));
        assert_eq!(caplog[0]["failure_type"], "rate_limit");
        assert!(!dir.path().join("health_log.json").exists());
        assert!(!dir.path().join("model_state.json").exists());
        let done = w.finish();
        assert_eq!(done.capabilities[0].decided, None);
        assert!(done.entries.is_empty());
    }

    /// A verdicts file that stops parsing during a run is left byte for
    /// byte; every other result is still recorded, and the run fails with
    /// exit 4 naming the file once it is done.
    #[test]
    fn an_unparseable_verdicts_file_is_left_alone_and_the_rest_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("capabilities.json");
        let bad = "{\"p::m\": {\"tools\": {\"verdict\": \"maybe\"}}";
        std::fs::write(&path, bad).unwrap();
        let mut w = writer(dir.path());
        let cap = || {
            cap_probed(
                "m",
                Capability::Tools,
                None,
                Some(200),
                None,
                Some(Judgement::Yes),
            )
        };
        w.accept(vec![probed("p", true, false), cap()]).unwrap();
        w.accept(vec![probed("q", true, false), cap()]).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), bad.as_bytes());
        let done = w.finish();
        let err = done.findings_error.expect("reported at the end");
        assert_eq!(err.exit_code(), crate::exit::DATA);
        assert!(err.to_string().contains("capabilities.json"), "{err}");
        let log = |f: &str| read_json(&dir.path().join(f)).as_array().unwrap().len();
        assert_eq!(log("health_log.json"), 2, "both basic results recorded");
        assert_eq!(log("capability_log.json"), 2);
    }

    #[test]
    fn an_offline_run_records_no_capability_entry_either() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path());
        let mut cap = cap_probed(
            "m",
            Capability::Vision,
            Some(FailureType::Error),
            None,
            Some("dns lookup failed"),
            None,
        );
        cap.unreachable = true;
        w.accept(vec![probed("p", true, true), cap]).unwrap();
        let done = w.finish();
        assert_eq!(done.offline.expect("offline").probes, 2);
        assert!(done.capabilities.is_empty());
        assert!(!dir.path().join("capability_log.json").exists());
        assert!(!dir.path().join("capabilities.json").exists());
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
            "offline: 2 remote providers could not be reached (dns lookup failed); their 3 results were not recorded; nothing was recorded"
        );
        assert!(done.entries.is_empty() && done.changes.is_empty());
        assert!(!dir.path().join("health_log.json").exists());
        assert!(!dir.path().join("model_state.json").exists());
    }

    /// The run may stop once every remote provider due has failed its
    /// first probe or its model list without reaching its host; the line
    /// says what was recorded and what was not, with counts.
    #[test]
    fn offline_is_known_once_every_remote_due_failed_its_first_probe_or_list() {
        let dir = tempfile::tempdir().unwrap();
        let due = |names: &[&str]| names.iter().map(|n| n.to_string()).collect();
        let lists = BTreeMap::from([("c".to_string(), "dns lookup failed".to_string())]);
        let mut w = writer(dir.path()).with_lists_unreachable(lists.clone());
        w.watch_offline(due(&["a", "b", "c"]));
        assert!(!w.offline_now(), "a and b not yet probed");
        w.accept(vec![probed("a", true, true), probed("local", false, false)])
            .unwrap();
        assert!(!w.offline_now(), "b not yet probed");
        w.accept(vec![probed("b", true, true)]).unwrap();
        assert!(w.offline_now());
        let mut done = w.finish().offline.expect("offline");
        assert_eq!(
            (done.providers, done.probes, done.recorded),
            (3, 2, 1),
            "{done:?}"
        );
        assert_eq!(done.not_recorded.len(), 2);
        done.not_done = 4;
        assert_eq!(
            done.to_string(),
            "offline: 3 remote providers could not be reached (dns lookup failed); their 2 results were not recorded; 1 result from loopback providers was recorded; 4 planned probes not done"
        );
        // A remote that answers: never offline, whatever came before.
        let mut w = writer(dir.path()).with_lists_unreachable(lists.clone());
        w.watch_offline(due(&["a", "c"]));
        w.accept(vec![probed("a", true, false)]).unwrap();
        assert!(!w.offline_now());
        assert!(w.finish().offline.is_none());
        // Every remote list failed: known before any probe, and said so.
        let mut w = writer(dir.path()).with_lists_unreachable(lists);
        w.watch_offline(due(&["c"]));
        assert!(w.offline_now());
        let off = w.finish().offline.expect("offline");
        assert_eq!(
            off.to_string(),
            "offline: 1 remote provider could not be reached (dns lookup failed); no probe was sent to them; nothing was recorded"
        );
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
