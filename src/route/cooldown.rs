//! The router's bench policy: how long `route` keeps a provider, key or
//! model out of rotation after a failure ([`Cooldowns`]). What the upstream
//! itself asked for is read by [`crate::upstream::hints`]; this module
//! decides what to do with it. Other modules call in; none computes a wait
//! of its own.
//!
//! The rules, the cooldown table of docs/routing.md made precise:
//!
//! | class | what is benched | for how long | then |
//! |---|---|---|---|
//! | `rate_limit` | key + model | the upstream's wait ([`crate::upstream::hints::retry_after`]); else [`LADDER`] by hits in the last 24 h | next candidate |
//! | `quota_exhausted`, daily | key + model | the reset the upstream names in a header; else until the next UTC midnight | next candidate |
//! | `quota_exhausted`, not daily (OpenAI `insufficient_quota`) | key | [`KEY_PAYMENT`]: a billing state, not a window | next candidate |
//! | `auth` (401) | key | [`KEY_AUTH`] | next candidate |
//! | `payment` (402), `forbidden` (403) | key | [`KEY_PAYMENT`] | next candidate |
//! | `server_error`, `overloaded`, `timeout` | nothing lasting (but see below) | — | skip the provider for the rest of the request |
//! | `transport` | nothing lasting | — | skip the provider for the rest of the request |
//! | `model_not_found` | nothing lasting (but see below) | — | next candidate |
//! | `context_length`, `unsupported` | nothing (the router remembers the model's verdict for a day instead) | — | next candidate |
//! | `bad_request` | nothing | — | return the error to the client at once |
//!
//! A model whose own failures (`server_error`, `overloaded`, `timeout`,
//! `model_not_found`) reach [`MODEL_FAILURES`] within [`MODEL_WINDOW`] is
//! benched for [`MODEL_BENCH`]. A success resets the ladder of that key and
//! model. A key-level bench on a provider without a key falls on the whole
//! provider. No upstream can bench anything for longer than [`MAX_WAIT`].
//!
//! Time is always passed in as `now`; nothing here reads the clock, so the
//! tests control it completely.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use crate::upstream::classify::{ErrorClass, UpstreamError};

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);

/// The rate-limit ladder when the upstream names no wait: the n-th hit in
/// the last [`LADDER_WINDOW`] waits `LADDER[n - 1]` (the last step repeats).
pub const LADDER: [Duration; 4] = [
    Duration::from_secs(2 * 60),
    Duration::from_secs(10 * 60),
    HOUR,
    DAY,
];
/// How far back rate-limit hits count toward the ladder.
pub const LADDER_WINDOW: Duration = DAY;
/// A key the upstream rejected (401).
pub const KEY_AUTH: Duration = Duration::from_secs(5 * 60);
/// A key without credit (402), forbidden (403), or whose quota is spent for
/// good (OpenAI `insufficient_quota`).
pub const KEY_PAYMENT: Duration = DAY;
/// How long a model that keeps failing is benched…
pub const MODEL_BENCH: Duration = Duration::from_secs(10 * 60);
/// …once it has failed this many times…
pub const MODEL_FAILURES: usize = 3;
/// …within this window.
pub const MODEL_WINDOW: Duration = Duration::from_secs(15 * 60);
use crate::upstream::hints::after;
pub use crate::upstream::hints::next_utc_midnight;

pub use crate::usage::Target;

/// The id a bench of `scope` over `target` is stored under.
fn scope_id(target: &Target, scope: Scope) -> String {
    match scope {
        Scope::Provider => target.provider.clone(),
        Scope::Key if target.key_index.is_none() => target.provider.clone(),
        Scope::Key => target.key_id(),
        Scope::Model => target.model_id(),
        Scope::KeyModel => target.key_model_id(),
    }
}

/// What a bench covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Every model and key of a provider (a key-level failure of a keyless
    /// provider).
    Provider,
    /// One key, every model.
    Key,
    /// One model, every key.
    Model,
    /// One key's use of one model.
    KeyModel,
}

/// A cooldown in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bench {
    /// The id it is stored under: see [`Target::key_id`],
    /// [`Target::model_id`], [`Target::key_model_id`].
    pub target: String,
    pub scope: Scope,
    pub until: DateTime<Utc>,
    /// The [`ErrorClass`] name that caused it, or `repeated_failures` for a
    /// model benched after [`MODEL_FAILURES`].
    pub reason: String,
    pub set_at: DateTime<Utc>,
    /// The wait is route's own guess, not the upstream's word: a step of
    /// the rate-limit ladder (no `Retry-After` or `retryDelay`), or a
    /// [`REPEATED_FAILURES`] model bench. `route --serve`'s re-prober may
    /// probe such a bench early and lift it ([`Bench::probe_due`]); a
    /// bench the upstream timed is never probed early. Absent (false) in
    /// state written before the flag existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub heuristic: bool,
}

/// The classes whose bench lasts a day, or until the upstream's daily
/// reset (the next UTC midnight unless it names one): a key without
/// credit (402), a forbidden one (403), a spent quota. `route --serve`
/// alerts on these benches ([`Bench::lasts_the_day`]), never on the
/// short ones that come and go with traffic.
pub const DAY_LONG: [ErrorClass; 3] = [
    ErrorClass::Payment,
    ErrorClass::Forbidden,
    ErrorClass::QuotaExhausted,
];

/// How much of a heuristic bench must remain for an early probe to be
/// worth it.
pub const PROBE_MIN_LEFT: Duration = Duration::from_secs(60);

impl Bench {
    /// Set for one of the [`DAY_LONG`] classes: worth an alert.
    pub fn lasts_the_day(&self) -> bool {
        DAY_LONG.iter().any(|c| c.as_str() == self.reason)
    }

    /// True when `route --serve`'s re-prober may probe this bench at
    /// `now`: it is [`heuristic`](Bench::heuristic), half of it has
    /// passed, and more than [`PROBE_MIN_LEFT`] of it remains.
    pub fn probe_due(&self, now: DateTime<Utc>) -> bool {
        let half = self.set_at + (self.until - self.set_at) / 2;
        let min_left = TimeDelta::from_std(PROBE_MIN_LEFT).unwrap_or(TimeDelta::MAX);
        self.heuristic && now >= half && self.until - now > min_left
    }
}

/// The reason of a model bench set by [`MODEL_FAILURES`] failures.
pub const REPEATED_FAILURES: &str = "repeated_failures";

/// Which count a failure climbs ([`Cooldowns::counter`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    Ladder,
    Failures,
}

/// What the router does next after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Try the next candidate.
    TryNext,
    /// Skip every remaining candidate on this provider for the rest of
    /// this request (5xx, overload, timeout, transport).
    SkipProvider,
    /// Return the error to the client at once, trying nothing else: the
    /// request itself is at fault.
    ReturnToClient,
}

/// The result of [`Cooldowns::record_failure`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub action: Action,
    /// The bench this failure put in force (or extended), if any.
    pub bench: Option<Bench>,
}

/// Cooldowns and the counts behind them: the in-memory form of what `route`
/// keeps in `route_state.json`. Ids are those of [`Target`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cooldowns {
    /// Benches by target id; at most one per id, the one that ends last.
    #[serde(default, with = "bench_list")]
    benches: BTreeMap<String, Bench>,
    /// Rate-limit hits in the last [`LADDER_WINDOW`], by key+model id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    ladder: BTreeMap<String, Vec<DateTime<Utc>>>,
    /// A model's own failures in the last [`MODEL_WINDOW`], by model id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    failures: BTreeMap<String, Vec<DateTime<Utc>>>,
}

impl Cooldowns {
    pub fn new() -> Cooldowns {
        Cooldowns::default()
    }

    /// Apply the rules in the module docs to a failed attempt on `target`.
    pub fn record_failure(
        &mut self,
        target: &Target,
        err: &UpstreamError,
        now: DateTime<Utc>,
    ) -> Decision {
        self.record_failure_counted(target, err, now, None)
    }

    /// What a failure counts in, if anything: the rate-limit ladder of the
    /// key+model ([`LADDER_WINDOW`]) or the model's own failures
    /// ([`MODEL_WINDOW`]). The shared store counts there itself.
    pub fn counter(target: &Target, err: &UpstreamError) -> Option<(Counter, String, Duration)> {
        match err.class {
            ErrorClass::RateLimit => Some((Counter::Ladder, target.key_model_id(), LADDER_WINDOW)),
            ErrorClass::ServerError
            | ErrorClass::Overloaded
            | ErrorClass::Timeout
            | ErrorClass::ModelNotFound => {
                Some((Counter::Failures, target.model_id(), MODEL_WINDOW))
            }
            _ => None,
        }
    }

    /// [`Cooldowns::record_failure`], with the count of [`Cooldowns::counter`]
    /// (this failure included) taken from `shared` when given, so instances
    /// that share their counts climb one ladder.
    pub fn record_failure_counted(
        &mut self,
        target: &Target,
        err: &UpstreamError,
        now: DateTime<Utc>,
        shared: Option<usize>,
    ) -> Decision {
        let (scope, until) = match err.class {
            ErrorClass::BadRequest => {
                return Decision {
                    action: Action::ReturnToClient,
                    bench: None,
                };
            }
            // More than this model can take: another may take it, and the
            // model is no less healthy for it (the router remembers the
            // verdict instead of benching).
            ErrorClass::ContextLength | ErrorClass::Unsupported => {
                return Decision {
                    action: Action::TryNext,
                    bench: None,
                };
            }
            ErrorClass::Transport => {
                return Decision {
                    action: Action::SkipProvider,
                    bench: None,
                };
            }
            ErrorClass::ServerError | ErrorClass::Overloaded | ErrorClass::Timeout => {
                return Decision {
                    action: Action::SkipProvider,
                    bench: self.model_failure(target, now, shared),
                };
            }
            ErrorClass::ModelNotFound => {
                return Decision {
                    action: Action::TryNext,
                    bench: self.model_failure(target, now, shared),
                };
            }
            ErrorClass::Auth => (Scope::Key, after(now, KEY_AUTH)),
            ErrorClass::Payment | ErrorClass::Forbidden => (Scope::Key, after(now, KEY_PAYMENT)),
            ErrorClass::QuotaExhausted if err.daily => (
                Scope::KeyModel,
                err.waits_until(now)
                    .unwrap_or_else(|| next_utc_midnight(now)),
            ),
            ErrorClass::QuotaExhausted => (Scope::Key, after(now, KEY_PAYMENT)),
            ErrorClass::RateLimit => {
                let hits = self.ladder.entry(target.key_model_id()).or_default();
                keep_within(hits, now, LADDER_WINDOW);
                hits.push(now);
                let n = shared.unwrap_or(hits.len()).max(1);
                let step = LADDER[(n - 1).min(LADDER.len() - 1)];
                let waits = err.waits_until(now);
                let heuristic = waits.is_none();
                let until = waits.unwrap_or_else(|| after(now, step));
                let bench = self.bench(
                    scope_id(target, Scope::KeyModel),
                    Scope::KeyModel,
                    until,
                    err.class.as_str(),
                    now,
                    heuristic,
                );
                return Decision {
                    action: Action::TryNext,
                    bench: Some(bench),
                };
            }
        };
        let bench = self.bench(
            scope_id(target, scope),
            scope,
            until,
            err.class.as_str(),
            now,
            false,
        );
        Decision {
            action: Action::TryNext,
            bench: Some(bench),
        }
    }

    /// A success on `target`: its rate-limit ladder starts again at 2 min.
    /// Returns whether anything changed (so a caller saves only then).
    pub fn record_success(&mut self, target: &Target, _now: DateTime<Utc>) -> bool {
        // No ladder at all (the usual case): no id is written to look up.
        !self.ladder.is_empty() && self.ladder.remove(&target.key_model_id()).is_some()
    }

    /// The bench that keeps `target` out now, if any: on its provider, key,
    /// model or key+model. When several apply, the one that ends last.
    pub fn blocked(&self, target: &Target, now: DateTime<Utc>) -> Option<&Bench> {
        // Nothing benched (the usual case): no id is written to look up.
        if self.benches.is_empty() {
            return None;
        }
        [Scope::Provider, Scope::Key, Scope::Model, Scope::KeyModel]
            .into_iter()
            .filter_map(|s| self.benches.get(&scope_id(target, s)))
            .filter(|b| b.until > now)
            .max_by_key(|b| b.until)
    }

    /// When the first of `targets` becomes usable: `now` if one already
    /// is, `None` if there are no targets.
    pub fn earliest_retry<'a>(
        &self,
        targets: impl IntoIterator<Item = &'a Target>,
        now: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        targets
            .into_iter()
            .map(|t| self.blocked(t, now).map_or(now, |b| b.until))
            .min()
    }

    /// Drop expired benches and counts that no longer matter, so the state
    /// file stays small.
    pub fn prune(&mut self, now: DateTime<Utc>) {
        self.benches.retain(|_, b| b.until > now);
        for (map, window) in [
            (&mut self.ladder, LADDER_WINDOW),
            (&mut self.failures, MODEL_WINDOW),
        ] {
            map.retain(|_, hits| {
                keep_within(hits, now, window);
                !hits.is_empty()
            });
        }
    }

    /// Keep a bench another instance set (from the shared store), unless
    /// one that ends later is already here.
    /// The bench keeps the time it was set, so every instance judges a
    /// heuristic bench's half ([`Bench::probe_due`]) alike.
    pub fn insert(&mut self, b: Bench, now: DateTime<Utc>) {
        self.put(b, now);
    }

    /// Lift `b` (a probe of it passed): it is removed if it is still the
    /// bench in force on its id, and the ladder is left as it is. Returns
    /// whether anything changed.
    pub fn lift(&mut self, b: &Bench) -> bool {
        match self.benches.get(&b.target) {
            Some(cur) if cur.until == b.until && cur.set_at == b.set_at => {
                self.benches.remove(&b.target);
                true
            }
            _ => false,
        }
    }

    /// The benches in force, by target id, for display.
    pub fn active(&self, now: DateTime<Utc>) -> impl Iterator<Item = &Bench> {
        self.benches.values().filter(move |b| b.until > now)
    }

    /// Put a bench on `id`, unless one that ends later is already there.
    fn bench(
        &mut self,
        id: String,
        scope: Scope,
        until: DateTime<Utc>,
        reason: &str,
        now: DateTime<Utc>,
        heuristic: bool,
    ) -> Bench {
        let new = Bench {
            target: id,
            scope,
            until,
            reason: reason.to_string(),
            set_at: now,
            heuristic,
        };
        self.put(new, now)
    }

    /// Put `new` in force on its id, unless one that ends later is already
    /// there; the bench in force returned.
    fn put(&mut self, new: Bench, now: DateTime<Utc>) -> Bench {
        match self.benches.get(&new.target) {
            Some(old) if old.until > now && old.until >= new.until => old.clone(),
            _ => {
                self.benches.insert(new.target.clone(), new.clone());
                new
            }
        }
    }

    /// Count a failure that is the model's own; bench the model once it has
    /// failed [`MODEL_FAILURES`] times within [`MODEL_WINDOW`].
    fn model_failure(
        &mut self,
        target: &Target,
        now: DateTime<Utc>,
        shared: Option<usize>,
    ) -> Option<Bench> {
        let id = target.model_id();
        let times = self.failures.entry(id.clone()).or_default();
        keep_within(times, now, MODEL_WINDOW);
        times.push(now);
        (shared.unwrap_or(times.len()) >= MODEL_FAILURES).then(|| {
            self.bench(
                id,
                Scope::Model,
                after(now, MODEL_BENCH),
                REPEATED_FAILURES,
                now,
                true,
            )
        })
    }
}

/// Keep only the times within `window` before `now`.
fn keep_within(times: &mut Vec<DateTime<Utc>>, now: DateTime<Utc>, window: Duration) {
    let since = now - TimeDelta::from_std(window).unwrap_or(TimeDelta::MAX);
    times.retain(|t| *t > since);
}

/// Benches are written as a list (each names its target), and read back
/// into the map.
mod bench_list {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::Bench;

    pub fn serialize<S: Serializer>(m: &BTreeMap<String, Bench>, s: S) -> Result<S::Ok, S::Error> {
        m.values().collect::<Vec<_>>().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<BTreeMap<String, Bench>, D::Error> {
        let list = Vec::<Bench>::deserialize(d)?;
        let mut m: BTreeMap<String, Bench> = BTreeMap::new();
        for b in list {
            match m.get(&b.target) {
                Some(old) if old.until >= b.until => {}
                _ => {
                    m.insert(b.target.clone(), b);
                }
            }
        }
        Ok(m)
    }
}

/// The cooldown rules, with the clock in the test's hands.
#[cfg(test)]
mod rule_tests {
    use super::*;
    use crate::upstream::classify::ErrorClass::*;
    use crate::upstream::hints::retry_after;
    use reqwest::header::HeaderMap;

    fn t0() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-05-02T15:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn at(d: Duration) -> DateTime<Utc> {
        t0() + TimeDelta::from_std(d).unwrap()
    }

    fn mins(n: u64) -> Duration {
        Duration::from_secs(n * 60)
    }

    fn err(class: ErrorClass) -> UpstreamError {
        UpstreamError {
            status: None,
            class,
            retry_after: None,
            daily: false,
            message: String::new(),
        }
    }

    fn waiting(class: ErrorClass, d: Duration) -> UpstreamError {
        UpstreamError {
            retry_after: Some(d),
            ..err(class)
        }
    }

    fn groq(model: &str, key: usize) -> Target {
        Target::new("groq", model).with_key(key, &format!("fp{key}"))
    }

    #[test]
    fn target_ids() {
        let t = groq("llama", 1);
        assert_eq!(t.key_id(), "groq#key1:fp1");
        assert_eq!(t.model_id(), "groq::llama");
        assert_eq!(t.key_model_id(), "groq#key1:fp1::llama");
        let local = Target::new("ollama", "qwen");
        assert_eq!(local.key_id(), "ollama");
        assert_eq!(local.key_model_id(), "ollama::qwen");
    }

    #[test]
    fn next_midnight_is_utc() {
        assert_eq!(
            next_utc_midnight(t0()).to_rfc3339(),
            "2026-05-03T00:00:00+00:00"
        );
        let midnight = next_utc_midnight(t0());
        assert_eq!(
            next_utc_midnight(midnight).to_rfc3339(),
            "2026-05-04T00:00:00+00:00"
        );
    }

    #[test]
    fn a_named_wait_is_honoured_on_that_key_and_model() {
        let mut c = Cooldowns::new();
        let t = groq("llama", 0);
        let d = c.record_failure(&t, &waiting(RateLimit, Duration::from_secs(20)), t0());
        assert_eq!(d.action, Action::TryNext);
        let b = d.bench.unwrap();
        assert_eq!(
            (b.scope, b.until),
            (Scope::KeyModel, at(Duration::from_secs(20)))
        );
        assert_eq!(b.reason, "rate_limit");
        assert!(c.blocked(&t, at(Duration::from_secs(19))).is_some());
        assert!(c.blocked(&t, at(Duration::from_secs(20))).is_none());
        // Another key, or another model on the same key, is not held back.
        assert!(c.blocked(&groq("llama", 1), t0()).is_none());
        assert!(c.blocked(&groq("mixtral", 0), t0()).is_none());
    }

    #[test]
    fn waits_named_in_every_documented_form_reach_the_bench() {
        let now = t0();
        let h = |k: &str, v: &str| {
            let mut m = HeaderMap::new();
            m.insert(
                reqwest::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
            m
        };
        for (headers, body, want) in [
            (h("retry-after", "Sat, 02 May 2026 15:02:00 GMT"), "", 120),
            (h("retry-after", "30"), "", 30),
            (
                HeaderMap::new(),
                r#"{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"17s"}]}}"#,
                17,
            ),
            (
                HeaderMap::new(),
                "Rate limit reached. Please try again in 20s.",
                20,
            ),
        ] {
            let wait = retry_after(&headers, body.as_bytes(), now);
            assert_eq!(wait, Some(Duration::from_secs(want)), "{body}");
            let mut c = Cooldowns::new();
            let b = c
                .record_failure(
                    &groq("m", 0),
                    &UpstreamError {
                        retry_after: wait,
                        ..err(RateLimit)
                    },
                    now,
                )
                .bench
                .unwrap();
            assert_eq!(b.until, at(Duration::from_secs(want)));
        }
        assert_eq!(
            retry_after(&HeaderMap::new(), b"Please try again in 7.66s.", now),
            Some(Duration::from_millis(7_660))
        );
    }

    #[test]
    fn the_ladder_climbs_by_hits_in_the_last_day_and_a_success_resets_it() {
        let mut c = Cooldowns::new();
        let t = groq("llama", 0);
        let mut now = t0();
        let mut waits = Vec::new();
        for _ in 0..4 {
            let b = c.record_failure(&t, &err(RateLimit), now).bench.unwrap();
            waits.push(b.until - now);
            now = b.until;
        }
        let want: Vec<TimeDelta> = [mins(2), mins(10), mins(60), DAY]
            .iter()
            .map(|d| TimeDelta::from_std(*d).unwrap())
            .collect();
        assert_eq!(waits, want);
        // After the 24 h wait the earlier hits have left the window.
        let b = c.record_failure(&t, &err(RateLimit), now).bench.unwrap();
        assert_eq!(b.until - now, TimeDelta::minutes(2));
        // The last step repeats (hits from another instance sharing the
        // state can arrive while a bench is in force).
        let mut c = Cooldowns::new();
        let last = (0..6)
            .map(|s| {
                let now = at(Duration::from_secs(s));
                c.record_failure(&t, &err(RateLimit), now)
                    .bench
                    .unwrap()
                    .until
                    - now
            })
            .last();
        assert_eq!(last, Some(TimeDelta::days(1)));
        // Hits older than 24 h no longer count.
        let mut c = Cooldowns::new();
        c.record_failure(&t, &err(RateLimit), t0());
        c.record_failure(&t, &err(RateLimit), at(mins(5)));
        let b = c
            .record_failure(&t, &err(RateLimit), at(DAY + mins(1)))
            .bench
            .unwrap();
        assert_eq!(b.until, at(DAY + mins(1) + mins(10)));
        // A success starts again at 2 min.
        c.record_success(&t, at(DAY + mins(20)));
        let b = c
            .record_failure(&t, &err(RateLimit), at(DAY + mins(30)))
            .bench
            .unwrap();
        assert_eq!(b.until, at(DAY + mins(32)));
    }

    #[test]
    fn a_daily_quota_waits_for_midnight_or_the_named_reset() {
        let mut c = Cooldowns::new();
        let t = Target::new("gemini", "flash-lite").with_key(0, "ab");
        let daily = UpstreamError {
            daily: true,
            ..err(QuotaExhausted)
        };
        let b = c.record_failure(&t, &daily, t0()).bench.unwrap();
        assert_eq!(b.until, next_utc_midnight(t0()));
        assert_eq!(
            (b.scope, b.reason.as_str()),
            (Scope::KeyModel, "quota_exhausted")
        );
        assert!(c.blocked(&t, at(mins(8 * 60 + 59))).is_some());
        assert!(c.blocked(&t, next_utc_midnight(t0())).is_none());
        // Other Gemini models have their own daily quota.
        assert!(
            c.blocked(&Target::new("gemini", "flash").with_key(0, "ab"), t0())
                .is_none()
        );
        let named = UpstreamError {
            retry_after: Some(mins(173)),
            ..daily
        };
        let b = Cooldowns::new()
            .record_failure(&t, &named, t0())
            .bench
            .unwrap();
        assert_eq!(b.until, at(mins(173)));
    }

    #[test]
    fn a_spent_balance_benches_the_key_for_a_day() {
        let mut c = Cooldowns::new();
        let t = Target::new("openai", "gpt-4o-mini").with_key(0, "k0");
        let b = c
            .record_failure(&t, &err(QuotaExhausted), t0())
            .bench
            .unwrap();
        assert_eq!((b.scope, b.until), (Scope::Key, at(DAY)));
        assert!(
            c.blocked(&Target::new("openai", "gpt-4o").with_key(0, "k0"), t0())
                .is_some()
        );
    }

    #[test]
    fn key_problems_bench_the_key() {
        let mut c = Cooldowns::new();
        let k0 = groq("llama", 0);
        let b = c.record_failure(&k0, &err(Auth), t0()).bench.unwrap();
        assert_eq!((b.scope, b.target.as_str()), (Scope::Key, "groq#key0:fp0"));
        assert_eq!(b.until, at(KEY_AUTH));
        assert_eq!(KEY_AUTH, mins(5));
        // Every model on that key waits; the provider's other key does not.
        assert!(c.blocked(&groq("mixtral", 0), at(mins(4))).is_some());
        assert!(c.blocked(&groq("mixtral", 0), at(mins(5))).is_none());
        assert!(c.blocked(&groq("llama", 1), t0()).is_none());
        for class in [Payment, Forbidden] {
            let mut c = Cooldowns::new();
            let d = c.record_failure(&k0, &err(class), t0());
            assert_eq!(d.action, Action::TryNext);
            let b = d.bench.unwrap();
            assert_eq!((b.scope, b.until), (Scope::Key, at(DAY)), "{class}");
            assert!(c.blocked(&k0, at(DAY - mins(1))).is_some());
            assert!(c.blocked(&k0, at(DAY)).is_none());
        }
        // A shorter bench never cuts a longer one short.
        let mut c = Cooldowns::new();
        c.record_failure(&k0, &err(Payment), t0());
        let b = c
            .record_failure(&k0, &err(Auth), at(mins(1)))
            .bench
            .unwrap();
        assert_eq!(b.until, at(DAY));
        assert_eq!(b.reason, "payment");
    }

    #[test]
    fn a_keyless_provider_is_benched_whole() {
        let mut c = Cooldowns::new();
        let t = Target::new("ollama", "qwen");
        let b = c.record_failure(&t, &err(Auth), t0()).bench.unwrap();
        assert_eq!(b.target, "ollama");
        assert!(c.blocked(&Target::new("ollama", "llama"), t0()).is_some());
    }

    #[test]
    fn server_errors_and_timeouts_skip_the_provider_for_this_request_only() {
        for class in [ServerError, Overloaded, Timeout, Transport] {
            let mut c = Cooldowns::new();
            let t = groq("llama", 0);
            let d = c.record_failure(&t, &err(class), t0());
            assert_eq!(
                d,
                Decision {
                    action: Action::SkipProvider,
                    bench: None
                },
                "{class}"
            );
            assert!(c.blocked(&t, t0()).is_none());
        }
    }

    #[test]
    fn a_model_failing_three_times_in_fifteen_minutes_is_benched_ten() {
        let mut c = Cooldowns::new();
        // Failures on different keys all count against the model.
        assert_eq!(
            c.record_failure(&groq("llama", 0), &err(ServerError), t0())
                .bench,
            None
        );
        assert_eq!(
            c.record_failure(&groq("llama", 1), &err(Timeout), at(mins(7)))
                .bench,
            None
        );
        let d = c.record_failure(&groq("llama", 0), &err(ModelNotFound), at(mins(14)));
        assert_eq!(d.action, Action::TryNext);
        let b = d.bench.unwrap();
        assert_eq!((b.scope, b.target.as_str()), (Scope::Model, "groq::llama"));
        assert_eq!(
            (b.until, b.reason.as_str()),
            (at(mins(24)), REPEATED_FAILURES)
        );
        assert!(c.blocked(&groq("llama", 1), at(mins(23))).is_some());
        assert!(c.blocked(&groq("mixtral", 0), at(mins(15))).is_none());
        // Three failures spread over more than 15 minutes are not enough.
        let mut c = Cooldowns::new();
        for m in [0, 10, 16] {
            assert_eq!(
                c.record_failure(&groq("llama", 0), &err(Overloaded), at(mins(m)))
                    .bench,
                None
            );
        }
        // Transport failures are the path's, not the model's.
        let mut c = Cooldowns::new();
        for m in [0, 1, 2] {
            assert_eq!(
                c.record_failure(&groq("llama", 0), &err(Transport), at(mins(m)))
                    .bench,
                None
            );
        }
    }

    #[test]
    fn capability_errors_move_on_and_the_clients_own_go_straight_back() {
        for class in [ContextLength, Unsupported] {
            let mut c = Cooldowns::new();
            let d = c.record_failure(&groq("llama", 0), &err(class), t0());
            assert_eq!(
                d,
                Decision {
                    action: Action::TryNext,
                    bench: None
                }
            );
            assert_eq!(c, Cooldowns::new());
        }
        let mut c = Cooldowns::new();
        let d = c.record_failure(&groq("llama", 0), &err(BadRequest), t0());
        assert_eq!(
            d,
            Decision {
                action: Action::ReturnToClient,
                bench: None
            }
        );
        assert_eq!(c, Cooldowns::new());
    }

    #[test]
    fn earliest_retry_prune_and_active() {
        let mut c = Cooldowns::new();
        let a = groq("a", 0);
        let b = groq("b", 0);
        c.record_failure(&a, &waiting(RateLimit, mins(3)), t0());
        c.record_failure(&b, &waiting(RateLimit, mins(8)), t0());
        assert_eq!(c.earliest_retry([&a, &b], t0()), Some(at(mins(3))));
        assert_eq!(c.earliest_retry([&a, &b, &groq("c", 0)], t0()), Some(t0()));
        assert_eq!(c.earliest_retry([], t0()), None);
        assert_eq!(c.active(at(mins(5))).count(), 1);
        c.prune(at(mins(5)));
        assert_eq!(
            c.active(t0())
                .map(|b| b.target.as_str())
                .collect::<Vec<_>>(),
            ["groq#key0:fp0::b"]
        );
        // Ladder hits outlive the bench, until the day is over.
        c.prune(at(mins(60)));
        assert_eq!(c.active(t0()).count(), 0);
        let hit = c
            .record_failure(&a, &err(RateLimit), at(mins(61)))
            .bench
            .unwrap();
        assert_eq!(hit.until, at(mins(71)));
        c.prune(at(DAY + mins(62)));
        assert_eq!(c, Cooldowns::new());
    }

    #[test]
    fn a_store_survives_a_round_trip_through_json() {
        let mut c = Cooldowns::new();
        c.record_failure(&groq("a", 0), &err(RateLimit), t0());
        c.record_failure(&groq("a", 1), &err(Auth), t0());
        c.record_failure(&groq("b", 0), &err(ServerError), t0());
        let json = serde_json::to_string_pretty(&c).unwrap();
        assert!(
            json.contains("\"until\": \"2026-05-02T15:02:00Z\""),
            "{json}"
        );
        assert!(json.contains("\"scope\": \"key_model\""), "{json}");
        let back: Cooldowns = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
        // The ladder is remembered: the next hit waits 10 min.
        let mut back = back;
        let b = back
            .record_failure(&groq("a", 0), &err(RateLimit), at(mins(3)))
            .bench
            .unwrap();
        assert_eq!(b.until, at(mins(13)));
        assert_eq!(
            serde_json::from_str::<Cooldowns>("{}").unwrap(),
            Cooldowns::new()
        );
    }

    /// Which benches are route's own guess, and when the re-prober may
    /// probe one: half of it gone, more than a minute of it left.
    #[test]
    fn only_guessed_benches_are_probed_early_halfway_through() {
        let mut c = Cooldowns::new();
        let bench = |c: &mut Cooldowns, t: &Target, e: &UpstreamError, at: DateTime<Utc>| {
            c.record_failure(t, e, at).bench.unwrap()
        };
        // The ladder: the first step (2 min) never has more than a minute
        // left at its half; the second (10 min) does.
        let first = bench(&mut c, &groq("a", 0), &err(RateLimit), t0());
        assert!(first.heuristic);
        assert!(
            !first.probe_due(at(mins(1))),
            "60 s left is not more than 60 s"
        );
        let second = bench(&mut c, &groq("a", 0), &err(RateLimit), at(mins(3)));
        assert!(second.heuristic);
        assert_eq!(second.until, at(mins(13)));
        assert!(!second.probe_due(at(mins(3) + mins(5) - Duration::from_secs(1))));
        assert!(second.probe_due(at(mins(8))));
        assert!(second.probe_due(at(mins(11) + Duration::from_secs(59))));
        assert!(!second.probe_due(at(mins(12))));
        // The upstream's own wait, however long: never.
        let waited = bench(&mut c, &groq("b", 0), &waiting(RateLimit, mins(10)), t0());
        assert!(!waited.heuristic);
        assert!(!waited.probe_due(at(mins(6))));
        // Daily quota, credit, forbidden, auth: never.
        let daily = UpstreamError {
            daily: true,
            ..err(QuotaExhausted)
        };
        for e in [
            daily,
            err(QuotaExhausted),
            err(Payment),
            err(Forbidden),
            err(Auth),
        ] {
            let b = bench(&mut c, &groq("c", 1), &e, t0());
            assert!(!b.heuristic, "{:?}", e.class);
            assert!(!b.probe_due(at(mins(200))), "{:?}", e.class);
        }
        // A model that keeps failing: route's guess of 10 min.
        let t = groq("d", 0);
        for _ in 0..MODEL_FAILURES - 1 {
            assert!(
                c.record_failure(&t, &err(ServerError), t0())
                    .bench
                    .is_none()
            );
        }
        let repeated = bench(&mut c, &t, &err(Timeout), t0());
        assert_eq!(repeated.reason, REPEATED_FAILURES);
        assert!(repeated.heuristic && repeated.probe_due(at(mins(5))));
        // A lift removes the bench it names, and only while it is in force
        // as it was.
        assert!(c.blocked(&t, at(mins(5))).is_some());
        let mut stale = repeated.clone();
        stale.until = at(mins(99));
        assert!(!c.lift(&stale));
        assert!(c.lift(&repeated));
        assert!(c.blocked(&t, at(mins(5))).is_none());
        assert!(!c.lift(&repeated));
    }

    #[test]
    fn the_flag_survives_json_and_old_state_reads_as_not_heuristic() {
        let mut c = Cooldowns::new();
        c.record_failure(&groq("a", 0), &err(RateLimit), t0());
        c.record_failure(&groq("b", 0), &waiting(RateLimit, mins(5)), t0());
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(json.matches("\"heuristic\":true").count(), 1, "{json}");
        assert!(!json.contains("\"heuristic\":false"), "{json}");
        assert_eq!(serde_json::from_str::<Cooldowns>(&json).unwrap(), c);
        let old = r#"{"benches": [{"target": "groq#key0:fp0::a", "scope": "key_model", "until": "2026-05-02T15:10:00Z", "reason": "rate_limit", "set_at": "2026-05-02T15:00:00Z"}]}"#;
        let old: Cooldowns = serde_json::from_str(old).unwrap();
        let b = old.blocked(&groq("a", 0), t0()).unwrap();
        assert!(!b.heuristic && !b.probe_due(at(mins(6))));
    }
}
