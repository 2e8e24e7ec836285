//! The shared record: what `check --shared-state` publishes to Redis and
//! `route --record shared` reads instead of the local stats directory.
//! This module is the one place that names its keys and turns it into
//! Redis values and back; the publisher ([`super::publish`]) and the
//! reader ([`Reader`]) both go through it.
//!
//! - **`llmprobe:record:states`**: a hash, `provider::model` → the whole
//!   state entry as `model_state.json` holds it (`state`, `reason`,
//!   `since`, `consecutive_failures`, `recovered_at`, `retry_at`). Replaced
//!   whole, atomically, at every change, so a model whose entry went away
//!   goes away here too.
//! - **`llmprobe:record:health`**: a hash, `provider::model` → the figures
//!   route ranks by over the last 24 h ([`crate::route::health`]): probes,
//!   passed, median latency. Written after each run.
//! - **`llmprobe:record:capabilities`**: `capabilities.json` as it is,
//!   when there is one. Written after each run.
//! - **`llmprobe:record:meta`**: a hash: `version` (one more at every
//!   publish; readers poll it), `refreshed_at` (ms; the publisher's clock)
//!   and `stale_after` (ms: twice the schedule's interval, 2 h by default).
//!
//! A record not refreshed for `stale_after` is reported as stale
//! ([`Status`]). Every key also expires [`KEEP`] after the last publish,
//! so a record nobody refreshes any more does not stay in Redis forever.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use super::{Shared, SharedState, from_ms, ms};
use crate::capabilities::Findings;
use crate::catalog::ModelKey;
use crate::route::health::{HealthMap, ModelHealth};
use crate::state::{Snapshot, StateEntry, States};

/// Every model's state entry (hash).
pub const STATES_KEY: &str = "llmprobe:record:states";
/// Every model's recent health (hash).
pub const HEALTH_KEY: &str = "llmprobe:record:health";
/// `capabilities.json` (string).
pub const CAPABILITIES_KEY: &str = "llmprobe:record:capabilities";
/// `version`, `refreshed_at`, `stale_after` (hash).
pub const META_KEY: &str = "llmprobe:record:meta";
/// Every record key expires this long after the last publish.
pub const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);

/// One model's recent health as published: the figures route ranks by.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Probes in the window.
    pub probes: f64,
    /// How many of them passed.
    pub passed: f64,
    /// The median latency of passing probes, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_latency_ms: Option<f64>,
}

impl From<&ModelHealth> for Figures {
    fn from(h: &ModelHealth) -> Figures {
        Figures {
            probes: h.probes.samples,
            passed: h.probes.passed,
            median_latency_ms: h.median_latency_ms(),
        }
    }
}

impl From<&Figures> for ModelHealth {
    fn from(f: &Figures) -> ModelHealth {
        ModelHealth::summarised(f.probes, f.passed, f.median_latency_ms)
    }
}

/// When the record was last refreshed, and when that makes it stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// One more at every publish.
    pub version: i64,
    /// The publisher's time of its last publish.
    pub refreshed_at: DateTime<Utc>,
    /// Twice the publisher's schedule interval.
    pub stale_after: TimeDelta,
}

impl Stamp {
    /// True when the record has not been refreshed for `stale_after`.
    pub fn is_stale(&self, now: DateTime<Utc>) -> bool {
        now - self.refreshed_at > self.stale_after
    }
}

/// The whole record, read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub stamp: Stamp,
    /// `provider::model` → its state entry.
    pub states: HashMap<String, StateEntry>,
    pub health: HealthMap,
    /// The capability verdicts, when the publisher has any.
    pub findings: Option<Findings>,
}

impl Record {
    /// The model states as route's [`Snapshot`].
    /// The paused entries are kept (sorted by key), as the state file's
    /// are, so degraded mode honours their `retry_at`.
    pub fn snapshot(&self) -> Snapshot {
        let mut paused: Vec<(String, StateEntry)> = self
            .states
            .iter()
            .filter(|(_, e)| e.state == crate::state::ModelState::Paused)
            .map(|(k, e)| (k.clone(), e.clone()))
            .collect();
        paused.sort_by(|a, b| a.0.cmp(&b.0));
        Snapshot::new(self.states.iter().map(|(k, e)| (k.clone(), e.state))).with_paused(paused)
    }
}

/// The states hash's fields: every entry of `states`, whole.
pub fn encode_states(states: &States) -> Vec<(String, String)> {
    states
        .iter()
        .map(|(k, e)| {
            (
                k,
                serde_json::to_string(&e).expect("a state entry serialises"),
            )
        })
        .collect()
}

/// The health hash's fields.
pub fn encode_health(health: &HealthMap) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = health
        .iter()
        .map(|(k, h)| {
            let f = Figures::from(h);
            (
                k.to_string(),
                serde_json::to_string(&f).expect("figures serialise"),
            )
        })
        .collect();
    out.sort();
    out
}

/// The meta hash's fields for a publish at `now`.
pub fn encode_meta(now: DateTime<Utc>, stale_after: TimeDelta) -> [(&'static str, i64); 2] {
    [
        ("refreshed_at", ms(now)),
        ("stale_after", stale_after.num_milliseconds()),
    ]
}

/// The stamp of a meta hash; `None` when there is none (nothing was
/// published, or it expired).
pub fn decode_stamp(meta: &HashMap<String, String>) -> Result<Option<Stamp>, String> {
    if meta.is_empty() {
        return Ok(None);
    }
    let int = |f: &str| -> Result<i64, String> {
        meta.get(f)
            .and_then(|v| v.parse::<i64>().ok())
            .ok_or_else(|| format!("{META_KEY} has no whole number {f}"))
    };
    Ok(Some(Stamp {
        version: int("version")?,
        refreshed_at: from_ms(int("refreshed_at")?),
        stale_after: TimeDelta::milliseconds(int("stale_after")?.max(0)),
    }))
}

/// The record from its keys' values; `None` when nothing was published.
/// Anything that does not parse is an error naming the key and field:
/// the reader then keeps the record it had.
pub fn decode(
    meta: &HashMap<String, String>,
    states: &HashMap<String, String>,
    health: &HashMap<String, String>,
    capabilities: Option<&str>,
) -> Result<Option<Record>, String> {
    let Some(stamp) = decode_stamp(meta)? else {
        return Ok(None);
    };
    let mut out = Record {
        stamp,
        states: HashMap::with_capacity(states.len()),
        health: HashMap::with_capacity(health.len()),
        findings: None,
    };
    for (k, v) in states {
        let e: StateEntry = serde_json::from_str(v)
            .map_err(|e| format!("{STATES_KEY} field {k:?} is not a model state: {e}"))?;
        out.states.insert(k.clone(), e);
    }
    for (k, v) in health {
        let f: Figures = serde_json::from_str(v)
            .map_err(|e| format!("{HEALTH_KEY} field {k:?} is not health figures: {e}"))?;
        // A field that names no model is never looked up (route asks for
        // `provider::model`), so leaving it out changes nothing.
        if let Ok(key) = k.parse::<ModelKey>() {
            out.health.insert(key, ModelHealth::from(&f));
        }
    }
    if let Some(text) = capabilities {
        out.findings = Some(
            serde_json::from_str(text)
                .map_err(|e| format!("{CAPABILITIES_KEY} is not capability verdicts: {e}"))?,
        );
    }
    Ok(Some(out))
}

/// How fresh the record a router routes on is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Read from Redis, refreshed within `stale_after`.
    Fresh,
    /// Read from Redis, but not refreshed for `stale_after`: no `check
    /// --shared-state` has published for too long.
    Stale,
    /// Redis does not answer: routing goes on with the last record seen.
    Unreachable,
    /// Redis answers but holds no record (never published, expired, or a
    /// Redis that restarted empty): routing goes on with the last record
    /// seen, if any.
    Missing,
}

/// Judge the record at `now`: whether Redis answered the last poll,
/// whether it held a record, and the stamp of the last record seen.
pub fn status(reachable: bool, held: bool, last: Option<&Stamp>, now: DateTime<Utc>) -> Status {
    match (reachable, held, last) {
        (false, _, _) => Status::Unreachable,
        (true, false, _) | (true, true, None) => Status::Missing,
        (true, true, Some(s)) if s.is_stale(now) => Status::Stale,
        (true, true, Some(_)) => Status::Fresh,
    }
}

/// What `/readyz`, `/v1/providers` and `route --status` show of the
/// record: `{"source":"shared","status":"fresh","as_of":…}`.
#[derive(Debug, Clone, Serialize)]
pub struct RecordView {
    /// `shared`.
    pub source: &'static str,
    pub status: Status,
    /// When the record routed on was last refreshed (RFC 3339), if one
    /// was ever read.
    pub as_of: Option<String>,
    /// How long after `as_of` it counts as stale.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stale_after_secs: Option<i64>,
    /// What is wrong, in a sentence, when it is not fresh.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Default)]
struct Seen {
    stamp: Option<Stamp>,
    /// Redis answered the last poll.
    reachable: bool,
    /// Redis held a record at the last poll.
    held: bool,
    /// Why the record in Redis cannot be used (once per version).
    problem: Option<String>,
    /// The status last said on stderr.
    said: Option<Status>,
}

/// A router's view of the shared record: what it saw last, polled
/// ([`Reader::poll`]) every half second.
#[derive(Debug, Default)]
pub struct Reader {
    seen: Mutex<Seen>,
}

impl Reader {
    pub fn new() -> Reader {
        Reader::default()
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// One poll: the version key, then, when it moved, the whole record
    /// in one atomic read. Returns the new record to route on, if there is
    /// one. Changes of status go to stderr once each.
    pub async fn poll(&self, shared: &SharedState, now: DateTime<Utc>) -> Option<Record> {
        let known = self.seen().stamp.map(|s| s.version);
        let got = match shared.record_version().await {
            Err(_) => Err(()),
            Ok(None) => Ok(None),
            Ok(Some(v)) if Some(v) == known => Ok(Some(None)),
            Ok(Some(_)) => match shared.read_record().await {
                Err(_) => Err(()),
                Ok(r) => Ok(Some(Some(r))),
            },
        };
        let mut fresh = None;
        {
            let mut seen = self.seen();
            match got {
                Err(()) => seen.reachable = false,
                Ok(None) => (seen.reachable, seen.held) = (true, false),
                Ok(Some(None)) => (seen.reachable, seen.held) = (true, true),
                Ok(Some(Some(Ok(None)))) => (seen.reachable, seen.held) = (true, false),
                Ok(Some(Some(Ok(Some(r))))) => {
                    (seen.reachable, seen.held) = (true, true);
                    seen.stamp = Some(r.stamp);
                    seen.problem = None;
                    fresh = Some(r);
                }
                Ok(Some(Some(Err(why)))) => {
                    (seen.reachable, seen.held) = (true, true);
                    if seen.problem.as_ref() != Some(&why) {
                        eprintln!(
                            "warning: shared record: {why}; routing goes on with the record read before"
                        );
                    }
                    seen.problem = Some(why);
                }
            }
        }
        self.say(now);
        fresh
    }

    /// Say a change of status on stderr, once.
    fn say(&self, now: DateTime<Utc>) {
        let v = self.view(now);
        let mut seen = self.seen();
        if seen.said == Some(v.status) {
            return;
        }
        let first = seen.said.is_none();
        seen.said = Some(v.status);
        drop(seen);
        match (v.status, v.note) {
            (Status::Fresh, _) if !first => {
                eprintln!(
                    "shared record: fresh again (as of {})",
                    v.as_of.unwrap_or_default()
                )
            }
            (Status::Fresh, _) => {}
            (_, Some(note)) => eprintln!("warning: shared record: {note}"),
            (_, None) => {}
        }
    }

    /// True once a record has been read from Redis: until then nothing
    /// says which models are active, and the router routes nothing.
    pub fn has_read(&self) -> bool {
        self.seen().stamp.is_some()
    }

    /// What the status displays show, judged at `now`.
    pub fn view(&self, now: DateTime<Utc>) -> RecordView {
        let seen = self.seen();
        let st = status(seen.reachable, seen.held, seen.stamp.as_ref(), now);
        let as_of = seen.stamp.map(|s| crate::time::format_ts(s.refreshed_at));
        let kept = match &as_of {
            Some(t) => format!("routing on the record as of {t}"),
            None => "no record read yet: nothing is routed until one is".to_string(),
        };
        let note = match st {
            Status::Fresh => seen.problem.clone(),
            Status::Stale => Some(format!(
                "not refreshed for more than {} (is check --shared-state running?); {kept}",
                crate::duration::format(
                    seen.stamp
                        .map_or(0, |s| s.stale_after.num_seconds().max(0) as u64)
                )
            )),
            Status::Unreachable => Some(format!("Redis does not answer; {kept}")),
            Status::Missing => Some(format!(
                "Redis holds no record (check --shared-state has not published to it); {kept}"
            )),
        };
        RecordView {
            source: "shared",
            status: st,
            as_of,
            stale_after_secs: seen.stamp.map(|s| s.stale_after.num_seconds()),
            note,
        }
    }
}

/// What a run's end does with the published capability verdicts.
#[derive(Debug, Clone, Copy)]
pub enum Verdicts<'a> {
    /// Publish these (`capabilities.json`).
    Publish(&'a Findings),
    /// There are none: remove what was published.
    Remove,
    /// The file could not be read: leave what was published.
    Keep,
}

impl SharedState {
    /// Publish every model's state entry (the whole table, replacing what
    /// was there) and stamp the record.
    pub async fn publish_states(
        &self,
        states: &States,
        now: Option<DateTime<Utc>>,
        stale_after: TimeDelta,
    ) -> Shared<()> {
        let mut p = redis::pipe();
        p.atomic().del(STATES_KEY).ignore();
        let fields = encode_states(states);
        if !fields.is_empty() {
            p.hset_multiple(STATES_KEY, &fields).ignore();
        }
        self.stamped(p, now, stale_after).await
    }

    /// Publish the figures of a run's end (recent health, and the
    /// capability verdicts when there are any) and stamp the record.
    pub async fn publish_run(
        &self,
        health: &HealthMap,
        verdicts: Verdicts<'_>,
        now: Option<DateTime<Utc>>,
        stale_after: TimeDelta,
    ) -> Shared<()> {
        let mut p = redis::pipe();
        p.atomic().del(HEALTH_KEY).ignore();
        let fields = encode_health(health);
        if !fields.is_empty() {
            p.hset_multiple(HEALTH_KEY, &fields).ignore();
        }
        match verdicts {
            Verdicts::Publish(f) => p
                .set(
                    CAPABILITIES_KEY,
                    serde_json::to_string(f).expect("verdicts serialise"),
                )
                .ignore(),
            Verdicts::Remove => p.del(CAPABILITIES_KEY).ignore(),
            Verdicts::Keep => &mut p,
        };
        self.stamped(p, now, stale_after).await
    }

    /// `p`, then one more version, the stamp (when `now` is given: a
    /// `check --paused` run publishes its changes without refreshing the
    /// record's age, so a dead hourly job still shows), and every key's
    /// expiry.
    async fn stamped(
        &self,
        mut p: redis::Pipeline,
        now: Option<DateTime<Utc>>,
        stale_after: TimeDelta,
    ) -> Shared<()> {
        p.hincr(META_KEY, "version", 1).ignore();
        if let Some(now) = now {
            p.hset_multiple(META_KEY, &encode_meta(now, stale_after))
                .ignore();
        }
        for k in [STATES_KEY, HEALTH_KEY, CAPABILITIES_KEY, META_KEY] {
            p.pexpire(k, KEEP.as_millis() as i64).ignore();
        }
        let mut c = self.manager.clone();
        self.call(p.query_async::<()>(&mut c)).await
    }

    /// The record's version, `None` when there is no record.
    pub async fn record_version(&self) -> Shared<Option<i64>> {
        let mut c = self.manager.clone();
        self.call(
            redis::cmd("HGET")
                .arg(META_KEY)
                .arg("version")
                .query_async::<Option<i64>>(&mut c),
        )
        .await
    }

    /// The whole record in one atomic read; `Ok(Err(why))` when it does
    /// not parse.
    pub async fn read_record(&self) -> Shared<Result<Option<Record>, String>> {
        let mut p = redis::pipe();
        p.atomic()
            .hgetall(META_KEY)
            .hgetall(STATES_KEY)
            .hgetall(HEALTH_KEY)
            .get(CAPABILITIES_KEY);
        let mut c = self.manager.clone();
        type Hash = HashMap<String, String>;
        let (meta, states, health, caps): (Hash, Hash, Hash, Option<String>) =
            self.call(p.query_async(&mut c)).await?;
        Ok(decode(&meta, &states, &health, caps.as_deref()))
    }
}

#[cfg(test)]
mod tests {
    use super::super::PREFIX;
    use super::*;
    use crate::state::ModelState;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn meta(version: i64, refreshed: &str, stale_after_secs: i64) -> HashMap<String, String> {
        let mut m: HashMap<String, String> =
            encode_meta(at(refreshed), TimeDelta::seconds(stale_after_secs))
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        m.insert("version".into(), version.to_string());
        m
    }

    #[test]
    fn the_record_reads_back_as_published() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("model_state.json");
        std::fs::write(
            &path,
            r#"{"p::m": {"state": "paused", "reason": "rate_limit", "since": "2026-12-01T10:00:00Z",
                "consecutive_failures": 1, "retry_at": "2026-12-01T10:05:00Z", "note": "kept"},
               "p::n": {"state": "active", "recovered_at": "2026-12-01T09:00:00Z"}}"#,
        )
        .unwrap();
        let states = States::load(&path).unwrap();
        let mut health = HealthMap::new();
        health.insert(
            "p::m".parse().unwrap(),
            ModelHealth::new(4.0, 3.0, vec![100.0, 300.0, 200.0]),
        );
        health.insert("p::n".parse().unwrap(), ModelHealth::new(2.0, 0.0, vec![]));
        let mut findings = Findings::default();
        findings.record(
            "p::m",
            crate::capabilities::Capability::Tools,
            crate::capabilities::Finding {
                verdict: crate::capabilities::Judgement::Yes,
                seen: Some("2026-12-01T10:00:00Z".into()),
                ..Default::default()
            },
        );
        let as_map = |v: Vec<(String, String)>| v.into_iter().collect::<HashMap<_, _>>();
        let caps = serde_json::to_string(&findings).unwrap();
        let r = decode(
            &meta(7, "2026-12-01T10:00:00Z", 7200),
            &as_map(encode_states(&states)),
            &as_map(encode_health(&health)),
            Some(&caps),
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.stamp.version, 7);
        assert_eq!(r.stamp.refreshed_at, at("2026-12-01T10:00:00Z"));
        assert_eq!(r.stamp.stale_after, TimeDelta::hours(2));
        // Whole entries, unknown fields included.
        assert_eq!(r.states["p::m"], states.get("p::m").unwrap());
        assert_eq!(
            r.states["p::m"].retry_at.as_deref(),
            Some("2026-12-01T10:05:00Z")
        );
        assert_eq!(r.snapshot().state_of("p::m"), ModelState::Paused);
        assert_eq!(r.snapshot().state_of("p::n"), ModelState::Active);
        // The figures route ranks by.
        assert_eq!(r.health["p::m"].uptime(), Some(0.75));
        assert_eq!(r.health["p::m"].median_latency_ms(), Some(200.0));
        assert_eq!(r.health["p::m"].probes.samples, 4.0);
        assert_eq!(r.health["p::n"].uptime(), Some(0.0));
        assert_eq!(r.health["p::n"].median_latency_ms(), None);
        assert_eq!(r.findings, Some(findings));
        // No capabilities key: none.
        let r = decode(
            &meta(1, "2026-12-01T10:00:00Z", 60),
            &HashMap::new(),
            &HashMap::new(),
            None,
        )
        .unwrap()
        .unwrap();
        assert!(r.findings.is_none() && r.states.is_empty());
    }

    #[test]
    fn every_key_is_under_the_prefix() {
        for k in [STATES_KEY, HEALTH_KEY, CAPABILITIES_KEY, META_KEY] {
            assert!(k.starts_with(PREFIX), "{k}");
        }
    }

    #[test]
    fn nothing_published_is_no_record_and_bad_values_are_named() {
        let none = HashMap::new();
        assert_eq!(decode(&none, &none, &none, None), Ok(None));
        let mut bad = HashMap::new();
        bad.insert("p::m".to_string(), r#"{"state": "sleeping"}"#.to_string());
        let m = meta(1, "2026-12-01T10:00:00Z", 60);
        let err = decode(&m, &bad, &none, None).unwrap_err();
        assert!(err.contains(STATES_KEY) && err.contains("p::m"), "{err}");
        let err = decode(&m, &none, &bad, None).unwrap_err();
        assert!(err.contains(HEALTH_KEY), "{err}");
        let err = decode(&m, &none, &none, Some("[")).unwrap_err();
        assert!(err.contains(CAPABILITIES_KEY), "{err}");
        let mut m = m;
        m.remove("refreshed_at");
        let err = decode(&m, &none, &none, None).unwrap_err();
        assert!(err.contains("refreshed_at"), "{err}");
    }

    #[test]
    fn a_record_not_refreshed_for_stale_after_is_stale() {
        let s = decode_stamp(&meta(3, "2026-12-01T10:00:00Z", 7200))
            .unwrap()
            .unwrap();
        let now = |t: &str| at(t);
        assert!(!s.is_stale(now("2026-12-01T11:59:59Z")));
        assert!(!s.is_stale(now("2026-12-01T12:00:00Z")));
        assert!(s.is_stale(now("2026-12-01T12:00:01Z")));
        let t = now("2026-12-01T11:00:00Z");
        assert_eq!(status(true, true, Some(&s), t), Status::Fresh);
        assert_eq!(
            status(true, true, Some(&s), now("2026-12-01T13:00:00Z")),
            Status::Stale
        );
        // Redis away: unreachable, whatever the age of the last record.
        assert_eq!(status(false, true, Some(&s), t), Status::Unreachable);
        assert_eq!(status(false, false, None, t), Status::Unreachable);
        // Redis answers without a record (restarted empty, expired).
        assert_eq!(status(true, false, Some(&s), t), Status::Missing);
        assert_eq!(status(true, false, None, t), Status::Missing);
    }

    #[test]
    fn the_view_says_what_the_router_routes_on() {
        let r = Reader::new();
        let now = at("2026-12-01T13:00:00Z");
        let v = r.view(now);
        assert_eq!(v.status, Status::Unreachable);
        assert!(v.as_of.is_none());
        {
            let mut seen = r.seen();
            seen.reachable = true;
            seen.held = true;
            seen.stamp = decode_stamp(&meta(3, "2026-12-01T10:00:00Z", 7200)).unwrap();
        }
        let v = r.view(now);
        assert_eq!(v.status, Status::Stale);
        assert_eq!(v.stale_after_secs, Some(7200));
        let note = v.note.unwrap();
        assert!(note.contains("not refreshed for more than 2h"), "{note}");
        let j = serde_json::to_value(r.view(at("2026-12-01T10:30:00Z"))).unwrap();
        assert_eq!(j["source"], "shared");
        assert_eq!(j["status"], "fresh");
        assert!(
            j["as_of"].as_str().unwrap().starts_with("2026-12-01"),
            "{j}"
        );
        assert!(j.get("note").is_none(), "{j}");
    }
}
