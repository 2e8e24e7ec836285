//! `stats/model_state.json` and the state machine of docs/formats.md.
//!
//! The file is an object keyed by `provider::model`; a model without an entry
//! is `active`. It is read fresh every time (people edit it by hand), written
//! atomically under the data lock, and fields llmprobe does not know are kept
//! as they are. A file that cannot be parsed is never overwritten.
//!
//! `route --serve` reads it through [`StateWatcher`], which reloads it when
//! it changes and hands request handlers a [`Snapshot`] without a lock.

#[cfg(test)]
mod props;
pub mod reprobe;
mod snapshot;

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{DataError, Result, json_error_offset};
use crate::fsutil::{self, DataLock};
use crate::outcome::Verdict;

pub use self::snapshot::{Snapshot, StateWatcher, Watched, Watcher};

/// What to do about a state file that cannot be parsed.
const RESET_HINT: &str = "fix it by hand, or run `llmprobe state reset --all` to move it aside (it is kept) and start with every model active";

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantNames,
    strum::EnumIter,
)]
#[strum(serialize_all = "lowercase")]
pub enum ModelState {
    Active,
    Paused,
    Disabled,
}

crate::names::serde_via_strum!(ModelState);

impl ModelState {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl std::fmt::Display for ModelState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One model's entry. Unknown fields ride along in `extra`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateEntry {
    pub state: ModelState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    #[serde(default)]
    pub consecutive_failures: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovered_at: Option<String>,
    /// The explicit wait (`Retry-After`, `retryDelay`, a daily quota's
    /// reset) the last failed probe carried, as RFC 3339: no re-probe comes
    /// before it. Set and cleared by each probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl StateEntry {
    /// The entry of a model with none: active, no failures.
    pub fn active() -> StateEntry {
        StateEntry {
            state: ModelState::Active,
            reason: None,
            since: None,
            consecutive_failures: 0,
            recovered_at: None,
            retry_at: None,
            extra: Map::new(),
        }
    }
}

/// A change of state, for output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transition {
    pub model: String,
    pub from: ModelState,
    pub to: ModelState,
    pub reason: String,
}

/// The whole file, in its original key order.
///
/// Each entry is kept twice: as the JSON it was read as, so that entries
/// llmprobe does not change are written back exactly as they were, and
/// typed, so that reading one never deserialises.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct States {
    entries: Map<String, Value>,
    typed: HashMap<String, StateEntry>,
}

impl States {
    /// Read the state file. A missing or blank file means every model is
    /// active.
    pub fn load(path: &Path) -> Result<States> {
        let Some(bytes) = fsutil::read_data_file(path)? else {
            return Ok(States::default());
        };
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            let offset = json_error_offset(&bytes, &e);
            DataError::new(
                path,
                Some(offset),
                format!("not valid JSON: {e}; {RESET_HINT}"),
            )
        })?;
        let Value::Object(entries) = value else {
            return Err(DataError::new(
                path,
                Some(0),
                format!("expected a JSON object keyed by \"provider::model\"; {RESET_HINT}"),
            )
            .into());
        };
        // Type every entry now, so that no later read or write can meet a
        // bad one.
        let mut typed = HashMap::with_capacity(entries.len());
        for (key, v) in &entries {
            let entry = StateEntry::deserialize(v).map_err(|e| {
                DataError::new(
                    path,
                    None,
                    format!("entry \"{key}\" is not a valid model state: {e}; {RESET_HINT}"),
                )
            })?;
            typed.insert(key.clone(), entry);
        }
        Ok(States { entries, typed })
    }

    /// Write the file atomically. The caller holds the data lock.
    pub fn save(&self, path: &Path, lock: &DataLock) -> Result<()> {
        let mut text = serde_json::to_string_pretty(&self.entries).expect("states serialise");
        text.push('\n');
        fsutil::atomic_write(path, text.as_bytes(), lock)
    }

    pub fn get(&self, key: &str) -> Option<StateEntry> {
        self.entry(key).cloned()
    }

    /// A model's entry, borrowed.
    pub fn entry(&self, key: &str) -> Option<&StateEntry> {
        self.typed.get(key)
    }

    /// The state of a model; `active` when it has no entry.
    pub fn state_of(&self, key: &str) -> ModelState {
        self.entry(key).map_or(ModelState::Active, |e| e.state)
    }

    pub fn set(&mut self, key: &str, entry: StateEntry) {
        let v = serde_json::to_value(&entry).expect("entry serialises");
        self.entries.insert(key.to_string(), v);
        self.typed.insert(key.to_string(), entry);
    }

    pub fn remove(&mut self, key: &str) -> bool {
        self.typed.remove(key);
        self.entries.shift_remove(key).is_some()
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.typed.clear();
    }

    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.entries.keys()
    }

    /// Every entry, in file order.
    pub fn iter(&self) -> impl Iterator<Item = (String, StateEntry)> + '_ {
        self.entries
            .keys()
            .filter_map(|k| Some((k.clone(), self.typed.get(k)?.clone())))
    }

    /// Every model's state, for lock-free reads by request handlers.
    pub fn snapshot(&self) -> Snapshot {
        let (paused, disabled) = self
            .iter()
            .filter(|(_, e)| e.state != ModelState::Active)
            .partition(|(_, e)| e.state == ModelState::Paused);
        Snapshot::new(self.typed.iter().map(|(k, e)| (k.clone(), e.state)))
            .with_paused(paused)
            .with_disabled(disabled)
    }

    /// A change by hand (`llmprobe state enable|disable|pause`): `key`
    /// goes to `to` with `reason` (else "enabled by hand" and the like),
    /// `since` becomes `ts` when the state changes (or had no `since`), and
    /// an enable resets the hard-failure count; pause and disable keep it.
    /// Returns the state before and the new entry; `None` when nothing
    /// changes (enabling a model without an entry: it is active already).
    pub fn change_by_hand(
        &mut self,
        key: &str,
        to: ModelState,
        reason: Option<&str>,
        ts: &str,
    ) -> Option<(ModelState, StateEntry)> {
        let before = self.get(key);
        let from = before.as_ref().map_or(ModelState::Active, |e| e.state);
        if before.is_none() && to == ModelState::Active {
            return None;
        }
        let mut e = before.unwrap_or_else(StateEntry::active);
        let default_reason = match to {
            ModelState::Active => "enabled by hand",
            ModelState::Paused => "paused by hand",
            ModelState::Disabled => "disabled by hand",
        };
        e.reason = Some(reason.unwrap_or(default_reason).to_string());
        if from != to || e.since.is_none() {
            e.since = Some(ts.to_string());
        }
        e.state = to;
        if to == ModelState::Active {
            e.consecutive_failures = 0;
        }
        if to != ModelState::Disabled {
            e.extra.remove(MISSING_SINCE);
        }
        self.set(key, e.clone());
        Some((from, e))
    }

    /// A paused model that served a request in degraded mode: the state
    /// machine's pass (count to 0, `since` and `recovered_at` at `ts`, the
    /// wait cleared), with `reason`. A model that is not paused (active, or
    /// disabled: only a person enables it) is left as it is. Returns
    /// whether it changed.
    pub fn recover_served(&mut self, key: &str, ts: &str, reason: &str) -> bool {
        if self.state_of(key) != ModelState::Paused {
            return false;
        }
        self.apply_probe(key, Verdict::Pass, ts, u32::MAX);
        let mut e = self.get(key).expect("a paused model has an entry");
        e.reason = Some(reason.to_string());
        self.set(key, e);
        true
    }

    /// Feed one probe result through the state machine. Returns the
    /// transition, if the state changed.
    pub fn apply_probe(
        &mut self,
        key: &str,
        verdict: Verdict,
        ts: &str,
        disable_after: u32,
    ) -> Option<Transition> {
        self.apply_probe_waiting(key, verdict, ts, disable_after, None)
    }

    /// [`States::apply_probe`], with the explicit wait the failure carried
    /// (`retry_at`, RFC 3339): kept in the entry of a model that is
    /// paused, so that no re-probe comes before it. A pass, a failure
    /// without a wait, or one that leaves the model active or disables it,
    /// clears it.
    pub fn apply_probe_waiting(
        &mut self,
        key: &str,
        verdict: Verdict,
        ts: &str,
        disable_after: u32,
        retry_at: Option<&str>,
    ) -> Option<Transition> {
        let before = self.get(key);
        let mut e = before.clone().unwrap_or_else(StateEntry::active);
        let from = e.state;
        step(&mut e, verdict, ts, disable_after);
        // A disabled model probed all the same is left as it is; one that
        // this failure disables keeps no wait (it is no longer paused).
        if from != ModelState::Disabled {
            e.retry_at = match (verdict, e.state) {
                (Verdict::Pass, _) | (_, ModelState::Active | ModelState::Disabled) => None,
                _ => retry_at.map(str::to_string),
            };
        }
        if before.as_ref() == Some(&e) || (before.is_none() && e == StateEntry::active()) {
            return None;
        }
        let to = e.state;
        let reason = e.reason.clone().unwrap_or_else(|| "passing probe".into());
        self.set(key, e);
        (from != to).then(|| Transition {
            model: key.to_string(),
            from,
            to,
            reason,
        })
    }
}

/// The reason of a model its provider retired: a fresh, complete list no
/// longer carried it and its probe was answered "not found".
pub const RETIRED: &str = "retired";

/// The state entry's field that says since when the provider's list
/// lacked a retired model (a date, `YYYY-MM-DD`).
pub const MISSING_SINCE: &str = "missing_since";

impl States {
    /// Disable `key` at once as retired ([`RETIRED`]), missing from its
    /// provider's list since `missing_since`. A model already disabled is
    /// left as it is.
    pub fn retire(
        &mut self,
        key: &str,
        ts: &str,
        missing_since: chrono::NaiveDate,
    ) -> Option<Transition> {
        let mut e = self.get(key).unwrap_or_else(StateEntry::active);
        let from = e.state;
        if from == ModelState::Disabled {
            return None;
        }
        e.state = ModelState::Disabled;
        e.reason = Some(RETIRED.to_string());
        e.since = Some(ts.to_string());
        e.consecutive_failures = e.consecutive_failures.saturating_add(1);
        e.retry_at = None;
        e.extra.insert(
            MISSING_SINCE.to_string(),
            Value::String(missing_since.to_string()),
        );
        self.set(key, e);
        Some(Transition {
            model: key.to_string(),
            from,
            to: ModelState::Disabled,
            reason: RETIRED.to_string(),
        })
    }
}

impl StateEntry {
    /// Whether the provider retired the model (state reason `retired`).
    pub fn retired(&self) -> bool {
        self.state == ModelState::Disabled && self.reason.as_deref() == Some(RETIRED)
    }

    /// Since when its provider's list lacked it, for a retired model.
    pub fn missing_since(&self) -> Option<&str> {
        self.extra.get(MISSING_SINCE).and_then(Value::as_str)
    }
}

/// The state machine of docs/formats.md, on one entry.
///
/// - A passing probe: the count goes to 0; a paused model becomes active and
///   gets `recovered_at`.
/// - A temporary failure (timeout, rate_limit, http_error, or a host that
///   could not be reached: refused, DNS, TLS, reset): an active model is
///   paused; the hard-failure count is neither raised nor reset.
/// - A hard failure (wrong_answer, any other error): the count goes up; at
///   `disable_after` the model is disabled.
/// - A disabled model is never probed, so it never gets here; if it does, it
///   stays disabled: only a person enables it.
pub fn step(e: &mut StateEntry, verdict: Verdict, ts: &str, disable_after: u32) {
    if e.state == ModelState::Disabled {
        return;
    }
    match verdict {
        Verdict::Pass => {
            e.consecutive_failures = 0;
            if e.state == ModelState::Paused {
                e.state = ModelState::Active;
                e.since = Some(ts.to_string());
                e.recovered_at = Some(ts.to_string());
                e.reason = None;
            }
        }
        Verdict::Temporary(why) => {
            if e.state == ModelState::Active {
                e.state = ModelState::Paused;
                e.since = Some(ts.to_string());
                e.reason = Some(why.to_string());
            }
        }
        Verdict::Hard(why) => {
            e.consecutive_failures = e.consecutive_failures.saturating_add(1);
            e.reason = Some(why.to_string());
            if e.consecutive_failures >= disable_after {
                e.state = ModelState::Disabled;
                e.since = Some(ts.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::outcome::UNREACHABLE;

    const TIMEOUT: Verdict = Verdict::Temporary("timeout");
    const RATE_LIMIT: Verdict = Verdict::Temporary("rate_limit");
    const HTTP_ERROR: Verdict = Verdict::Temporary("http_error");
    const OFFLINE: Verdict = Verdict::Temporary(UNREACHABLE);
    const HARD: Verdict = Verdict::Hard("error");
    const WRONG: Verdict = Verdict::Hard("wrong_answer");
    const PASS: Verdict = Verdict::Pass;

    fn run(seq: &[Verdict]) -> (States, Vec<Transition>) {
        let mut s = States::default();
        let mut t = Vec::new();
        for (i, f) in seq.iter().enumerate() {
            if let Some(tr) = s.apply_probe("p::m", *f, &format!("2026-11-30T00:00:{i:02}Z"), 3) {
                t.push(tr);
            }
        }
        (s, t)
    }

    /// Found by the `state_read` fuzz target: serde_json's default float
    /// parser may miss the nearest double by one bit, so a number in a
    /// field llmprobe does not know (`1.5e200`) changed each time the file
    /// was written back. `float_roundtrip` parses it exactly.
    #[test]
    fn unknown_numbers_are_written_back_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model_state.json");
        let text =
            r#"{"p::m":{"state":"active","f":1.5e200,"g":0.1,"h":-2.2250738585072014e-308}}"#;
        std::fs::write(&path, text).unwrap();
        let states = States::load(&path).unwrap();
        let lock = DataLock::acquire(dir.path()).unwrap();
        states.save(&path, &lock).unwrap();
        assert_eq!(States::load(&path).unwrap(), states);
        let saved: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(saved["p::m"]["f"].as_f64(), Some(1.5e200));
    }

    #[test]
    fn temporary_failure_pauses_and_a_pass_recovers() {
        let (s, t) = run(&[TIMEOUT, RATE_LIMIT, PASS]);
        assert_eq!(t.len(), 2);
        assert_eq!(
            (t[0].from, t[0].to),
            (ModelState::Active, ModelState::Paused)
        );
        assert_eq!(
            (t[1].from, t[1].to),
            (ModelState::Paused, ModelState::Active)
        );
        let e = s.get("p::m").unwrap();
        assert_eq!(e.recovered_at.as_deref(), Some("2026-11-30T00:00:02Z"));
        assert_eq!(e.consecutive_failures, 0);
    }

    #[test]
    fn temporary_failures_never_disable_nor_reset_the_count() {
        let (s, _) = run(&[HARD, HTTP_ERROR, TIMEOUT, RATE_LIMIT, HTTP_ERROR, WRONG]);
        let e = s.get("p::m").unwrap();
        assert_eq!(e.state, ModelState::Paused);
        assert_eq!(e.consecutive_failures, 2);
        let (s, t) = run(&[HARD, TIMEOUT, WRONG, HTTP_ERROR, HARD]);
        assert_eq!(s.state_of("p::m"), ModelState::Disabled);
        assert_eq!(t.last().unwrap().to, ModelState::Disabled);
    }

    #[test]
    fn hard_failures_disable_after_three_from_active_and_paused() {
        let (s, t) = run(&[HARD, HARD, WRONG]);
        assert_eq!(s.state_of("p::m"), ModelState::Disabled);
        assert_eq!(t.len(), 1);
        assert_eq!(
            (t[0].from, t[0].to),
            (ModelState::Active, ModelState::Disabled)
        );
        let (s, _) = run(&[HARD, HARD]);
        assert_eq!(s.state_of("p::m"), ModelState::Active);
        let (s, t) = run(&[TIMEOUT, HARD, HARD, HARD]);
        assert_eq!(s.state_of("p::m"), ModelState::Disabled);
        assert_eq!(
            (t[1].from, t[1].to),
            (ModelState::Paused, ModelState::Disabled)
        );
    }

    #[test]
    fn an_unreachable_host_pauses_and_never_disables() {
        // A laptop offline overnight, or a stopped local server: any number
        // of unreachable probes leave the model paused, the count untouched.
        let (s, t) = run(&[HARD; 2]
            .iter()
            .copied()
            .chain([OFFLINE; 10])
            .collect::<Vec<_>>());
        let e = s.get("p::m").unwrap();
        assert_eq!(e.state, ModelState::Paused);
        assert_eq!(e.reason.as_deref(), Some(UNREACHABLE));
        assert_eq!(e.consecutive_failures, 2);
        assert_eq!(t.len(), 1);
        let (s, _) = run(&[OFFLINE, OFFLINE, OFFLINE, PASS]);
        assert_eq!(s.state_of("p::m"), ModelState::Active);
    }

    #[test]
    fn a_pass_resets_the_count() {
        let (s, _) = run(&[HARD, HARD, PASS, HARD, HARD]);
        assert_eq!(s.state_of("p::m"), ModelState::Active);
        assert_eq!(s.get("p::m").unwrap().consecutive_failures, 2);
    }

    #[test]
    fn a_failure_that_disables_clears_the_wait() {
        // Found by the property test: a paused model's wait outlived the
        // hard failure that disabled it (and came back with a later pause
        // by hand).
        let mut s = States::default();
        s.apply_probe_waiting(
            "p::m",
            TIMEOUT,
            "2026-11-30T00:00:00Z",
            1,
            Some("2026-11-30T00:05:00Z"),
        );
        assert_eq!(
            s.get("p::m").unwrap().retry_at.as_deref(),
            Some("2026-11-30T00:05:00Z")
        );
        s.apply_probe_waiting("p::m", WRONG, "2026-11-30T00:01:00Z", 1, None);
        let e = s.get("p::m").unwrap();
        assert_eq!(e.state, ModelState::Disabled);
        assert_eq!(e.retry_at, None);
    }

    #[test]
    fn disabled_stays_disabled() {
        let mut s = States::default();
        let mut e = StateEntry::active();
        e.state = ModelState::Disabled;
        s.set("p::m", e.clone());
        assert_eq!(s.apply_probe("p::m", PASS, "2026-11-30T00:00:00Z", 3), None);
        assert_eq!(s.get("p::m").unwrap(), e);
    }

    #[test]
    fn unknown_fields_survive_a_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model_state.json");
        std::fs::write(
            &path,
            r#"{"z::m": {"state": "paused", "reason": "timeout", "since": "2026-05-02T15:00:00Z", "consecutive_failures": 1, "note": "by hand", "nested": {"a": [1]}}, "a::m": {"state": "disabled"}}"#,
        )
        .unwrap();
        let mut s = States::load(&path).unwrap();
        s.apply_probe("z::m", PASS, "2026-11-30T00:00:00Z", 3);
        let lock = DataLock::acquire(dir.path()).unwrap();
        s.save(&path, &lock).unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["z::m"]["note"], "by hand");
        assert_eq!(v["z::m"]["nested"]["a"][0], 1);
        assert_eq!(v["z::m"]["state"], "active");
        let keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        assert_eq!(keys, vec!["z::m", "a::m"]);
    }

    #[test]
    fn bad_files_are_data_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model_state.json");
        for bad in [
            "{\"a::b\": {\"state\": \"paused\"",
            "[1,2]",
            "{\"a::b\": {\"state\": \"sleeping\"}}",
        ] {
            std::fs::write(&path, bad).unwrap();
            let err = States::load(&path).unwrap_err();
            assert!(matches!(err, Error::Data(_)), "{bad}: {err}");
            assert!(err.to_string().contains("model_state.json"));
        }
    }
}
