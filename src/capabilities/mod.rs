//! What each model can do beyond a plain answer: call a tool, return JSON
//! that matches a schema, read an image.
//!
//! `check` probes these the way it probes plain answers, with randomised
//! operands and an exact check ([`probe`]), far less often: a verdict falls
//! due a day after it was seen, or when the model comes back to `active`
//! ([`due`]). Each probe is appended to `stats/capability_log.json` (the
//! health log's format plus a `probe` field), and the latest verdict per
//! model and capability is kept in `stats/capabilities.json`
//! ([`Findings`]), written atomically under the data lock like the state
//! file and, like it, never overwritten when it cannot be parsed.
//!
//! `route` reads the verdicts to order candidates in three bands (known
//! able, unknown, known unable), and `state`, `brief` and `/v1/models`
//! show them.

// Until `check` runs the capability probes (the lead's merge of issue 18
// wires them in): remove these two allows then.
pub mod glyphs;
pub mod probe;

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{DataError, Result, json_error_offset};
use crate::fsutil::{self, DataLock};
pub use crate::outcome::{CapSet, Capability};
use crate::state::{ModelState, StateEntry};
use crate::upstream::dialect::Need;

/// The file name of the latest verdicts, in the stats directory.
pub const FINDINGS_FILE: &str = "capabilities.json";
/// The file name of the capability probes' log, in the stats directory.
pub const LOG_FILE: &str = "capability_log.json";

/// How long a verdict stands before it is probed again.
pub const VERDICT_AGE: chrono::TimeDelta = chrono::TimeDelta::hours(24);

/// What to do about a verdicts file that cannot be parsed.
const FIX_HINT: &str = "fix it by hand, or move it aside (and keep it): the next check starts a new one, and every capability is unknown until then";

/// The request needs a capability serves, and back.
impl Capability {
    /// The request need this capability serves; speed serves none.
    pub fn need(self) -> Option<Need> {
        match self {
            Capability::Tools => Some(Need::Tools),
            Capability::Json => Some(Need::Json),
            Capability::Vision => Some(Need::Vision),
            Capability::Speed => None,
        }
    }

    /// The capability a request need calls for, if a probe covers it.
    pub fn of_need(need: Need) -> Option<Capability> {
        match need {
            Need::Tools => Some(Capability::Tools),
            Need::Json => Some(Capability::Json),
            Need::Vision => Some(Capability::Vision),
            _ => None,
        }
    }
}

/// What the latest probe of a capability concluded.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Judgement {
    /// The probe passed.
    Yes,
    /// The model answered, and the answer failed the check.
    No,
    /// Never probed, or nothing decided yet.
    #[default]
    Unknown,
}

impl Judgement {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// The mark every view shows beside the word: ✔ yes, ✗ no, ? unknown.
    pub fn mark(self) -> &'static str {
        match self {
            Judgement::Yes => "✔",
            Judgement::No => "✗",
            Judgement::Unknown => "?",
        }
    }
}

/// One model's verdict on one capability, as `capabilities.json` keeps it.
/// Fields llmprobe does not know ride along in `extra`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Finding {
    pub verdict: Judgement,
    /// When the probe that decided it started (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen: Option<String>,
    /// Why a `no`: the failure class and a short reason, redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the latest probe that decided nothing started (a rate limit, a
    /// 5xx, a timeout): the verdict stands, and the capability waits its
    /// turn behind those never tried ([`overdue`]). Absent once a probe
    /// decides again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tried: Option<String>,
    /// The speed probe's figures when it passed: time to the first token
    /// (ms), output tokens, and output tokens per second after the first
    /// (docs/formats.md). Absent for every other capability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_s: Option<f64>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Finding {
    /// `seen`, parsed; `None` when absent or unreadable.
    pub fn seen_at(&self) -> Option<DateTime<Utc>> {
        at(self.seen.as_deref()?)
    }

    /// `tried`, parsed; `None` when absent or unreadable.
    pub fn tried_at(&self) -> Option<DateTime<Utc>> {
        at(self.tried.as_deref()?)
    }
}

fn at(ts: &str) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(crate::time::parse_ts(ts)?, 0)
}

/// `stats/capabilities.json`: `provider::model` → capability name → the
/// latest [`Finding`]. A missing model or capability is unknown. Names
/// llmprobe does not know (a capability a newer version probes) are kept.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Findings(BTreeMap<String, BTreeMap<String, Finding>>);

impl Findings {
    /// Read the verdicts file. A missing or blank file means every
    /// capability is unknown; one that cannot be parsed is a data error
    /// naming the file (exit 4), and is left as it is.
    pub fn load(path: &Path) -> Result<Findings> {
        let Some(bytes) = fsutil::read_data_file(path)? else {
            return Ok(Findings::default());
        };
        serde_json::from_slice(&bytes).map_err(|e| {
            let offset = json_error_offset(&bytes, &e);
            DataError::new(
                path,
                Some(offset),
                format!(
                    "not a valid capabilities file (an object keyed by \"provider::model\", each capability {{\"verdict\": \"yes\"|\"no\"|\"unknown\", \"seen\", \"reason\"}}): {e}; {FIX_HINT}"
                ),
            )
            .into()
        })
    }

    /// Write the file atomically. The caller holds the data lock.
    pub fn save(&self, path: &Path, lock: &DataLock) -> Result<()> {
        let mut text = serde_json::to_string_pretty(self).expect("findings serialise");
        text.push('\n');
        fsutil::atomic_write(path, text.as_bytes(), lock)
    }

    /// The finding for `key` (`provider::model`) and `cap`, if any.
    pub fn get(&self, key: &str, cap: Capability) -> Option<&Finding> {
        self.0.get(key)?.get(cap.as_str())
    }

    /// The latest passing speed probe's finding for `key`.
    pub fn speed(&self, key: &str) -> Option<&Finding> {
        self.get(key, Capability::Speed)
            .filter(|f| f.tokens_per_s.is_some())
    }

    /// The latest speed probe's output tokens per second for `key`.
    pub fn tokens_per_s(&self, key: &str) -> Option<f64> {
        self.speed(key)?.tokens_per_s
    }

    /// The median of the latest speed probes' tokens per second of
    /// `provider`'s models; `None` where none was measured.
    pub fn provider_tokens_per_s(&self, provider: &str) -> Option<f64> {
        let v: Vec<f64> = self
            .0
            .keys()
            .filter(|k| crate::catalog::ModelKey::split(k).is_some_and(|(p, _)| p == provider))
            .filter_map(|k| self.tokens_per_s(k))
            .collect();
        crate::healthlog::summary::Latencies::of(v).median()
    }

    /// The verdict for `key` and `cap`: `unknown` when there is none.
    pub fn verdict(&self, key: &str, cap: Capability) -> Judgement {
        self.get(key, cap).map_or(Judgement::Unknown, |f| f.verdict)
    }

    /// Record what a probe decided (`yes` or `no`), seen at `seen`.
    pub fn record(&mut self, key: &str, cap: Capability, finding: Finding) {
        self.0
            .entry(key.to_string())
            .or_default()
            .insert(cap.as_str().to_string(), finding);
    }

    /// Note a probe of `key`'s `cap` that decided nothing, started at
    /// `ts`: the verdict (or its absence) stands.
    pub fn tried(&mut self, key: &str, cap: Capability, ts: &str) {
        self.0
            .entry(key.to_string())
            .or_default()
            .entry(cap.as_str().to_string())
            .or_default()
            .tried = Some(ts.to_string());
    }

    /// Whether a capability probe of `key` started at `since` or later:
    /// one that decided a verdict (`seen`) or one that decided nothing
    /// (`tried`), as the capability log's latest entry for it would say.
    pub fn probed_since(&self, key: &str, since: DateTime<Utc>) -> bool {
        self.0.get(key).is_some_and(|caps| {
            caps.values()
                .flat_map(|f| [f.seen_at(), f.tried_at()])
                .any(|t| t.is_some_and(|t| t >= since))
        })
    }

    /// Every model with at least one finding, and its findings.
    pub fn models(&self) -> impl Iterator<Item = (&str, &BTreeMap<String, Finding>)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }
}

/// How overdue a capability's verdict is at `now`: `None` when it is not
/// due. A verdict never seen is the most overdue of all (`TimeDelta::MAX`);
/// one seen falls due [`VERDICT_AGE`] later; and one seen before the model
/// last came back to `active` (from `paused` by a probe, or from
/// `disabled` by hand: the state entry's `since`) is due at once, overdue
/// by the longer of the time since it came back and the time since its age
/// ran out.
///
/// A probe that decided nothing (`tried`, after the verdict was seen)
/// leaves the capability due, but overdue only since that try: it is tried
/// again, after every capability never tried and those waiting longer, so
/// one that keeps meeting a rate limit never starves the rest.
pub fn overdue(
    finding: Option<&Finding>,
    state: Option<&StateEntry>,
    now: DateTime<Utc>,
) -> Option<chrono::TimeDelta> {
    let seen = finding.and_then(Finding::seen_at);
    let tried = finding
        .and_then(Finding::tried_at)
        .filter(|t| seen.is_none_or(|s| *t > s));
    let Some(seen) = seen else {
        return Some(tried.map_or(chrono::TimeDelta::MAX, |t| now - t));
    };
    let back = state
        .filter(|e| e.state == ModelState::Active)
        .and_then(|e| e.since.as_deref())
        .and_then(at)
        .filter(|back| *back > seen);
    let due = match back {
        Some(back) => back.min(seen + VERDICT_AGE),
        None => seen + VERDICT_AGE,
    };
    if due > now {
        return None;
    }
    Some(match tried {
        Some(t) if t > due => now - t,
        _ => now - due,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn seen(ts: &str) -> Finding {
        Finding {
            verdict: Judgement::Yes,
            seen: Some(ts.into()),
            ..Finding::default()
        }
    }

    fn active_since(ts: &str) -> StateEntry {
        serde_json::from_value(serde_json::json!({"state": "active", "since": ts})).unwrap()
    }

    #[test]
    fn a_verdict_falls_due_a_day_after_it_was_seen_or_when_the_model_came_back() {
        let now = t("2026-12-02T12:00:00Z");
        assert_eq!(overdue(None, None, now), Some(chrono::TimeDelta::MAX));
        let f = seen("2026-12-01T13:00:00Z");
        assert_eq!(overdue(Some(&f), None, now), None, "23 h old");
        let f = seen("2026-12-01T11:00:00Z");
        assert_eq!(
            overdue(Some(&f), None, now),
            Some(chrono::TimeDelta::hours(1))
        );
        // Back from paused after the verdict: due at once.
        let f = seen("2026-12-02T08:00:00Z");
        let back = active_since("2026-12-02T10:00:00Z");
        assert_eq!(
            overdue(Some(&f), Some(&back), now),
            Some(chrono::TimeDelta::hours(2))
        );
        // Active since before the verdict: not due.
        let before = active_since("2026-12-02T07:00:00Z");
        assert_eq!(overdue(Some(&f), Some(&before), now), None);
        // Back from paused, and its age ran out before that: the longer.
        let old = seen("2026-11-30T08:00:00Z");
        assert_eq!(
            overdue(Some(&old), Some(&back), now),
            Some(chrono::TimeDelta::hours(28))
        );
    }

    #[test]
    fn a_probe_that_decided_nothing_waits_behind_those_never_tried() {
        let now = t("2026-12-02T12:00:00Z");
        let tried = |at: &str, f: Finding| Finding {
            tried: Some(at.into()),
            ..f
        };
        for (f, hours) in [
            (tried("2026-12-02T11:00:00Z", Finding::default()), 1),
            // A verdict due 3 h ago, tried 1 h ago without a decision.
            (
                tried("2026-12-02T11:00:00Z", seen("2026-12-01T09:00:00Z")),
                1,
            ),
            // A try older than the verdict counts for nothing.
            (
                tried("2026-11-01T11:00:00Z", seen("2026-12-01T09:00:00Z")),
                3,
            ),
        ] {
            assert_eq!(
                overdue(Some(&f), None, now),
                Some(chrono::TimeDelta::hours(hours)),
                "{f:?}"
            );
        }
        let mut all = Findings::default();
        all.tried("a::m", Capability::Json, "2026-12-02T11:00:00Z");
        assert_eq!(all.verdict("a::m", Capability::Json), Judgement::Unknown);
        assert!(all.get("a::m", Capability::Json).unwrap().tried.is_some());
    }

    #[test]
    fn the_file_round_trips_and_keeps_what_it_does_not_know() {
        let text = r#"{
  "groq::llama-3.1-8b-instant": {
    "tools": {"verdict": "yes", "seen": "2026-12-01T10:00:05Z"},
    "json": {"verdict": "no", "seen": "2026-12-01T11:00:07Z", "reason": "wrong_answer: not JSON"},
    "vision": {"verdict": "unknown"},
    "audio": {"verdict": "yes", "note": "from a newer llmprobe"}
  }
}"#;
        let f: Findings = serde_json::from_str(text).unwrap();
        let k = "groq::llama-3.1-8b-instant";
        assert_eq!(f.verdict(k, Capability::Tools), Judgement::Yes);
        assert_eq!(f.verdict(k, Capability::Json), Judgement::No);
        assert_eq!(f.verdict(k, Capability::Vision), Judgement::Unknown);
        assert_eq!(f.verdict("x::y", Capability::Tools), Judgement::Unknown);
        let back = serde_json::to_value(&f).unwrap();
        assert_eq!(back[k]["audio"]["note"], "from a newer llmprobe");
        assert_eq!(back[k]["json"]["reason"], "wrong_answer: not JSON");
    }

    #[test]
    fn a_file_that_does_not_parse_is_an_error_naming_it_and_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FINDINGS_FILE);
        std::fs::write(&path, "{\"a::b\": {\"tools\": {\"verdict\": \"maybe\"}}}").unwrap();
        let err = Findings::load(&path).unwrap_err();
        assert_eq!(err.exit_code(), crate::exit::DATA);
        assert!(err.to_string().contains("capabilities.json"), "{err}");
        assert!(
            std::fs::read_to_string(&path).unwrap().contains("maybe"),
            "left as it was"
        );
        assert_eq!(
            Findings::load(&dir.path().join("none.json")).unwrap(),
            Findings::default()
        );
    }

    #[test]
    fn a_capability_list_parses_into_a_set() {
        let s: CapSet = serde_json::from_str(r#"["json", "tools"]"#).unwrap();
        assert!(s.contains(Capability::Tools) && s.contains(Capability::Json));
        assert!(!s.contains(Capability::Vision));
        assert_eq!(serde_json::to_string(&s).unwrap(), r#"["tools","json"]"#);
        assert!(serde_json::from_str::<CapSet>(r#"["audio"]"#).is_err());
        assert_eq!(CapSet::all().iter().count(), 4);
        assert!(CapSet::all().contains(Capability::Speed));
        assert_eq!(Capability::Speed.as_str(), "speed");
        assert_eq!(Capability::Speed.need(), None);
        let f: Findings = serde_json::from_str(
            r#"{"a::m": {"speed": {"verdict": "yes", "seen": "2026-12-01T10:00:00Z", "ttft_ms": 310, "output_tokens": 61, "tokens_per_s": 68.5}},
                "a::n": {"speed": {"verdict": "no", "seen": "2026-12-01T10:00:00Z"}}}"#,
        )
        .unwrap();
        assert_eq!(f.speed("a::m").and_then(|s| s.ttft_ms), Some(310));
        assert_eq!(
            f.get("a::m", Capability::Speed)
                .and_then(|s| s.output_tokens),
            Some(61)
        );
        assert!(f.speed("a::n").is_none(), "no figures: not a measurement");
    }
}
