//! The router: try candidates in order within the attempt budget, fall
//! back on failure, bench what fails (through [`crate::route::cooldown`], the only
//! place that decides waits), and keep every attempt for the trail.
//!
//! One engine serves both modes. The one-shot command makes one request
//! and saves the cooldowns; the server shares the engine between handlers
//! and saves the cooldowns when they change (debounced) and at shutdown.

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::catalog::{ApiKey, Catalog, Resolved, RouteSettings};
use crate::error::Result;
use crate::route::cooldown::{Action, Cooldowns, Target};
use crate::state::{ModelState, StateWatcher};
use crate::upstream::classify::{ErrorClass, UpstreamError};
use crate::upstream::secret::Redactor;

use super::choose::{self, Candidate, Choice, NoCandidate};
use super::domain::RouteError;
pub use super::domain::{Attempt, Exhausted, trail};
use super::health::HealthCache;
use super::limits::{self, LimitRequest, Reservation};
use super::persist::{self, RouteState};
use super::shared::{Admit, SharedState};
use crate::clock::Clock;

/// A request that was served.
#[derive(Debug)]
pub struct Served<T> {
    /// `provider::model`.
    pub via: String,
    /// What served, for a failure that comes later (mid-stream).
    pub target: Target,
    /// Every attempt before the one that served, skipped ones included.
    pub attempts: Vec<Attempt>,
    /// The request as counted against limits, for a later correction from
    /// a stream's usage.
    pub reservation: Option<Reservation>,
    pub value: T,
}

impl<T> Served<T> {
    /// Failed attempts before the one that served.
    pub fn fallbacks(&self) -> usize {
        self.attempts.iter().filter(|a| a.failed()).count()
    }
}

/// What one attempt produced, besides its result: what the engine learns
/// limits and real token counts from.
#[derive(Debug)]
pub struct Sent<T> {
    pub result: std::result::Result<T, UpstreamError>,
    /// The response's headers, when a response arrived.
    pub headers: Option<reqwest::header::HeaderMap>,
    /// Tokens the upstream reported using (prompt + completion).
    pub tokens: Option<u64>,
}

impl<T> Sent<T> {
    pub fn failed(err: UpstreamError) -> Sent<T> {
        Sent {
            result: Err(err),
            headers: None,
            tokens: None,
        }
    }
}

/// Everything a request needs, shared by every handler.
pub struct Engine {
    pub settings: RouteSettings,
    aliases: BTreeMap<String, Vec<String>>,
    /// Usable providers in catalog order; keys resolved.
    providers: Vec<Arc<Resolved>>,
    /// Round-robin start per provider, for key rotation.
    rotation: Vec<AtomicUsize>,
    pub client: reqwest::Client,
    pub states: Arc<StateWatcher>,
    /// Recent health, re-read from the log off the request path
    /// ([`Engine::refresh_health`]) and read lock-free by requests.
    health: arc_swap::ArcSwap<super::health::HealthMap>,
    health_cache: Mutex<HealthCache>,
    /// The route state: benches and the limit ledger, as saved.
    state: Arc<Mutex<RouteState<Cooldowns>>>,
    dirty: AtomicBool,
    pub changed: tokio::sync::Notify,
    stats_dir: PathBuf,
    pub clock: Clock,
    pub redactor: Redactor,
    pub metrics: super::metrics::Metrics,
    /// Redis, when instances share their state (`--shared-state`). The
    /// in-process state is kept too, as the fallback while Redis is away.
    shared: Option<Arc<SharedState>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Engine {
    /// Build the engine: resolve providers, load the model states and the
    /// saved cooldowns (a bad route_state.json is an error, left as is).
    pub fn new(
        catalog: &Catalog,
        settings: RouteSettings,
        stats_dir: PathBuf,
        client: reqwest::Client,
        clock: Clock,
    ) -> Result<Engine> {
        let providers: Vec<Arc<Resolved>> = catalog
            .providers
            .iter()
            .filter_map(|p| p.resolve().ok())
            .map(Arc::new)
            .collect();
        let redactor = Redactor::new(providers.iter().flat_map(|p| p.secrets().cloned()));
        let states = Arc::new(StateWatcher::open(
            &stats_dir.join(crate::settings::STATE_FILE),
        )?);
        let mut saved: RouteState<Cooldowns> = persist::load(&persist::path(&stats_dir))?;
        saved.cooldowns.prune(clock.now());
        Ok(Engine {
            settings,
            aliases: catalog.aliases.clone(),
            rotation: providers.iter().map(|_| AtomicUsize::new(0)).collect(),
            providers,
            client,
            states,
            health: arc_swap::ArcSwap::from_pointee(Default::default()),
            health_cache: Mutex::new(HealthCache::new(stats_dir.join(crate::settings::LOG_FILE))),
            state: Arc::new(Mutex::new(saved)),
            dirty: AtomicBool::new(false),
            changed: tokio::sync::Notify::new(),
            stats_dir,
            clock,
            redactor,
            metrics: super::metrics::Metrics::new(),
            shared: None,
        })
    }

    /// Share cooldowns, counts and limits through Redis. A shared instance
    /// neither reads nor writes `route_state.json`: its in-process state
    /// starts empty and is only the fallback while Redis is away.
    pub fn with_shared(mut self, shared: Arc<SharedState>) -> Engine {
        self.state = Arc::new(Mutex::new(RouteState::default()));
        self.shared = Some(shared);
        self
    }

    /// The shared store, if any.
    pub fn shared(&self) -> Option<&Arc<SharedState>> {
        self.shared.as_ref()
    }

    /// Re-read recent health from the log if it changed. Blocking: the
    /// server calls it from a background task, the one-shot command once.
    pub fn refresh_health(&self) -> Result<()> {
        let now = self.clock.now().timestamp();
        let map = lock(&self.health_cache).get(now)?;
        self.health.store(map);
        Ok(())
    }

    /// The recent health the candidate order uses.
    pub fn health(&self) -> Arc<super::health::HealthMap> {
        self.health.load_full()
    }

    pub fn providers(&self) -> &[Arc<Resolved>] {
        &self.providers
    }

    /// The candidates for a requested model, in order.
    pub fn candidates(
        &self,
        model: Option<&str>,
    ) -> std::result::Result<Vec<Candidate>, RouteError> {
        let choice = Choice::parse(model, &self.aliases);
        let health = self.health.load();
        let snapshot = self.states.current();
        choose::candidates(
            &choice,
            &self.providers,
            &self.aliases,
            |k| snapshot.state_of(k),
            &health,
        )
        .map_err(|e| match e {
            NoCandidate::Unknown(model) => RouteError::UnknownModel { model },
            NoCandidate::NoneActive(model) => RouteError::NoneActive { model },
        })
    }

    /// Every active `provider::model` that this instance's own state does
    /// not bench now.
    pub fn routable(&self) -> Vec<String> {
        let now = self.clock.now();
        self.routable_under(&lock(&self.state).cooldowns, now)
    }

    /// Every active `provider::model` that `cooldowns` does not bench at
    /// `now` (this instance's, or the shared ones read for a status view).
    pub fn routable_under(&self, cooldowns: &Cooldowns, now: DateTime<Utc>) -> Vec<String> {
        self.candidates(None)
            .map(|cs| {
                cs.iter()
                    .filter(|c| {
                        targets(&c.provider, &c.model)
                            .iter()
                            .any(|t| cooldowns.blocked(t, now).is_none())
                    })
                    .map(Candidate::key)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Why the server is not ready, if it is not: `no_active_models`, or
    /// `all_cooling_down` when nothing is `routable`.
    pub fn not_ready(&self, routable: &[String]) -> Option<&'static str> {
        if self.candidates(None).is_err() {
            return Some("no_active_models");
        }
        if routable.is_empty() {
            return Some("all_cooling_down");
        }
        None
    }

    /// Try the candidates for `model` in order with `send`, which makes one
    /// attempt on one candidate with one key.
    /// `tokens` is the request's estimate, counted against token limits
    /// until the upstream reports its usage.
    pub async fn route<T, F, Fut>(
        &self,
        model: Option<&str>,
        tokens: u64,
        mut send: F,
    ) -> std::result::Result<Served<T>, Exhausted>
    where
        F: FnMut(Candidate, Option<ApiKey>) -> Fut,
        Fut: Future<Output = Sent<T>>,
    {
        let candidates = self.candidates(model).map_err(|error| Exhausted {
            error,
            attempts: Vec::new(),
        })?;
        let started = tokio::time::Instant::now();
        let mut attempts: Vec<Attempt> = Vec::new();
        let mut sent = 0u32;
        let mut skip: HashSet<String> = HashSet::new();
        let mut all_targets: Vec<Target> = Vec::new();
        let mut pending_fallback = None;
        'candidates: for c in &candidates {
            let provider = &c.provider.provider.name;
            if skip.contains(provider) {
                continue;
            }
            for (key, target) in self.rotated_keys(c) {
                all_targets.push(target.clone());
                let now = self.clock.now();
                // The first attempt and the first retry always run.
                let out_of_attempts = sent >= self.settings.max_attempts
                    || (sent >= 2 && started.elapsed() >= self.settings.time_budget);
                let limits = limits::effective(&c.provider.provider, &c.model);
                let req = LimitRequest {
                    target: &target,
                    limits: &limits,
                    tokens,
                };
                // Shared: benches and limits in one round trip to Redis.
                let admitted = match &self.shared {
                    Some(s) if !out_of_attempts => s.admit(&req, now).await.ok(),
                    _ => None,
                };
                let benched = match &admitted {
                    Some(Admit::Benched(b)) => {
                        lock(&self.state).cooldowns.insert(b.clone(), now);
                        Some(b.clone())
                    }
                    Some(_) => None,
                    None => lock(&self.state).cooldowns.blocked(&target, now).cloned(),
                };
                if let Some(b) = benched {
                    tracing::debug!(
                        model = %c.key(),
                        key = key.as_ref().map(key_label).as_deref(),
                        reason = %b.reason,
                        until = %crate::time::format_ts(b.until),
                        "route: skipped, cooling down"
                    );
                    self.count_skip(c, "cooldown");
                    attempts.push(Attempt {
                        model: c.key(),
                        key: key.as_ref().map(key_label),
                        class: format!("cooldown:{}", b.reason),
                        status: None,
                        message: None,
                        retry_at: Some(b.until),
                    });
                    continue;
                }
                if out_of_attempts {
                    break 'candidates;
                }
                // Stay inside every limit: skip, don't send.
                let checked = match admitted {
                    Some(Admit::Limited(hit)) => Err(hit),
                    Some(Admit::Counted(r)) => {
                        // Mirrored, for the fallback: this instance's own
                        // requests.
                        let _ = lock(&self.state).limits.check_and_count(&req, now);
                        Ok(r)
                    }
                    _ => lock(&self.state).limits.check_and_count(&req, now),
                };
                let mut reservation = match checked {
                    Ok(r) => r,
                    Err(hit) => {
                        tracing::debug!(
                            model = %c.key(),
                            limit = %hit.trail(),
                            scope = %hit.scope,
                            until = %crate::time::format_ts(hit.until),
                            "route: skipped, at a limit"
                        );
                        self.count_skip(c, hit.kind.as_str());
                        attempts.push(Attempt {
                            model: c.key(),
                            key: key.as_ref().map(key_label),
                            class: hit.trail(),
                            status: None,
                            message: Some(format!(
                                "{} full until {}",
                                hit.scope,
                                crate::time::format_ts(hit.until)
                            )),
                            retry_at: Some(hit.until),
                        });
                        continue;
                    }
                };
                if reservation.counted() {
                    self.mark_dirty();
                }
                sent += 1;
                if let Some(prev) = pending_fallback.take() {
                    self.metrics.fallbacks.get_or_create(&prev).inc();
                }
                tracing::debug!(
                    model = %c.key(),
                    key = key.as_ref().map(key_label).as_deref(),
                    attempt = sent,
                    "route: attempt"
                );
                let t0 = std::time::Instant::now();
                let sent_now = send(c.clone(), key.clone()).await;
                self.count_attempt(c, &sent_now.result, t0.elapsed());
                // A failed request used no tokens; a served one, what the
                // upstream says (streams: corrected at their end).
                let used = match &sent_now.result {
                    Err(_) => Some(0),
                    Ok(_) => sent_now.tokens,
                };
                let learned = {
                    let mut st = lock(&self.state);
                    let learned = sent_now
                        .headers
                        .as_ref()
                        .map(|h| st.limits.learn(&target, h, self.clock.now()))
                        .unwrap_or_default();
                    if let Some(used) = used
                        && reservation.counted()
                        && !reservation.is_shared()
                    {
                        st.limits.correct(&mut reservation, used);
                    }
                    learned
                };
                if let Some(s) = &self.shared {
                    // Off the request path: the reply does not wait for
                    // Redis to store learned limits or a corrected token
                    // count. They land one round trip after it, in order.
                    let correction = used.filter(|_| reservation.is_shared()).map(|u| {
                        let estimated = reservation.clone();
                        reservation.set_tokens(u);
                        (estimated, u)
                    });
                    if !learned.is_empty() || correction.is_some() {
                        let (s, t) = (s.clone(), target.clone());
                        tokio::spawn(async move {
                            let _ = s.learn(&t, &learned).await;
                            if let Some((mut r, u)) = correction {
                                let _ = s.correct(&mut r, u).await;
                            }
                        });
                    }
                }
                match sent_now.result {
                    Ok(value) => {
                        tracing::debug!(model = %c.key(), ms = t0.elapsed().as_millis() as u64, "route: served");
                        self.count_request("served");
                        let changed = lock(&self.state)
                            .cooldowns
                            .record_success(&target, self.clock.now());
                        if changed {
                            self.mark_dirty();
                        }
                        if let Some(s) = self.shared.clone() {
                            // Off the request path: a ladder to reset is rare.
                            let t = target.clone();
                            tokio::spawn(async move { s.success(&t).await });
                        }
                        return Ok(Served {
                            via: c.key(),
                            target,
                            attempts,
                            reservation: reservation.counted().then_some(reservation),
                            value,
                        });
                    }
                    Err(err) => {
                        let now = self.clock.now();
                        let decision = self.record_failure(&target, &err, now).await;
                        // The message is redacted where the error was made.
                        tracing::debug!(
                            model = %c.key(),
                            class = err.class.as_str(),
                            status = err.status,
                            message = %err.message,
                            action = ?decision.action,
                            bench = decision.bench.as_ref().map(|b| format!(
                                "{} until {}",
                                b.reason,
                                crate::time::format_ts(b.until)
                            )),
                            "route: attempt failed"
                        );
                        self.mark_dirty();
                        attempts.push(Attempt {
                            model: c.key(),
                            key: key.as_ref().map(key_label),
                            class: err.class.as_str().to_string(),
                            status: err.status,
                            message: Some(err.message.clone()),
                            retry_at: decision.bench.as_ref().map(|b| b.until),
                        });
                        pending_fallback = Some(attempt_labels(c, err.class.as_str()));
                        match decision.action {
                            Action::ReturnToClient => {
                                self.count_request("rejected");
                                return Err(Exhausted {
                                    error: RouteError::client_fault(
                                        err.class,
                                        err.status,
                                        err.message.clone(),
                                    ),
                                    attempts,
                                });
                            }
                            Action::SkipProvider => {
                                skip.insert(provider.clone());
                                continue 'candidates;
                            }
                            Action::TryNext => {
                                // A model-level failure: the other keys
                                // would fail the same way.
                                if matches!(err.class, ErrorClass::ModelNotFound) {
                                    continue 'candidates;
                                }
                            }
                        }
                    }
                }
            }
        }
        let now = self.clock.now();
        let retry_at = lock(&self.state)
            .cooldowns
            .earliest_retry(all_targets.iter(), now)
            .filter(|t| *t > now);
        // Everything is cooling down or at a limit: nothing was sent and
        // something names a time, or every candidate is benched now.
        let limit_wait = attempts
            .iter()
            .filter(|a| a.class.starts_with("limit:"))
            .filter_map(|a| a.retry_at)
            .filter(|t| *t > now)
            .min();
        let retry_at = match (retry_at, limit_wait) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let cooling = retry_at.is_some()
            && (sent == 0
                || all_targets
                    .iter()
                    .all(|t| lock(&self.state).cooldowns.blocked(t, now).is_some()));
        let error = match retry_at {
            Some(retry_at) if cooling => RouteError::AllCoolingDown { retry_at },
            _ => RouteError::AllFailed {
                attempts: sent,
                retry_at,
            },
        };
        self.count_request("exhausted");
        Err(Exhausted { error, attempts })
    }

    fn count_request(&self, outcome: &str) {
        self.metrics
            .requests
            .get_or_create(&super::metrics::OutcomeLabels {
                outcome: outcome.to_string(),
            })
            .inc();
    }

    fn count_attempt<T>(
        &self,
        c: &Candidate,
        result: &std::result::Result<T, UpstreamError>,
        took: Duration,
    ) {
        let class = match result {
            Ok(_) => "ok",
            Err(e) => e.class.as_str(),
        };
        self.metrics
            .attempts
            .get_or_create(&attempt_labels(c, class))
            .inc();
        self.metrics
            .latency
            .get_or_create(&super::metrics::ModelLabels {
                provider: c.provider.provider.name.clone(),
                model: c.model.clone(),
            })
            .observe(took.as_secs_f64());
    }

    /// A candidate passed over without sending (`cooldown`, or a limit).
    pub fn count_skip(&self, c: &Candidate, reason: &str) {
        self.metrics
            .skips
            .get_or_create(&super::metrics::SkipLabels {
                provider: c.provider.provider.name.clone(),
                model: c.model.clone(),
                reason: reason.to_string(),
            })
            .inc();
    }

    /// A candidate's keys, starting at the next one in turn, each with the
    /// cooldown target it is benched under. A keyless provider has one
    /// "key": none.
    fn rotated_keys(&self, c: &Candidate) -> Vec<(Option<ApiKey>, Target)> {
        let p = &c.provider;
        let base = Target::new(&p.provider.name, &c.model);
        if p.keys.is_empty() {
            return vec![(None, base)];
        }
        let i = self
            .providers
            .iter()
            .position(|x| Arc::ptr_eq(x, p))
            .unwrap_or(0);
        let start = self.rotation[i].fetch_add(1, Ordering::Relaxed) % p.keys.len();
        (0..p.keys.len())
            .map(|k| {
                let key = p.keys[(start + k) % p.keys.len()].clone();
                let t = base.clone().with_key(key.index, &key.fingerprint);
                (Some(key), t)
            })
            .collect()
    }

    /// A stream that failed after its first byte: too late to fall over,
    /// but it counts against the model like any other failure.
    pub fn record_late_failure(&self, target: &Target, class: ErrorClass, message: String) {
        let err = UpstreamError {
            status: None,
            class,
            retry_after: None,
            daily: false,
            message,
        };
        match self.shared.clone() {
            Some(s) if s.is_healthy() => {
                let (t, now, local) = (target.clone(), self.clock.now(), self.state.clone());
                tokio::spawn(async move { record_failure(Some(&s), &local, &t, &err, now).await });
            }
            _ => {
                lock(&self.state)
                    .cooldowns
                    .record_failure(target, &err, self.clock.now());
            }
        }
        self.mark_dirty();
    }

    /// A failed attempt: counted and benched in the shared store when
    /// there is one (so every instance climbs one ladder), else locally.
    async fn record_failure(
        &self,
        target: &Target,
        err: &UpstreamError,
        now: DateTime<Utc>,
    ) -> crate::route::cooldown::Decision {
        record_failure(self.shared.as_ref(), &self.state, target, err, now).await
    }

    fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::Release);
        self.changed.notify_one();
    }

    /// Save the cooldowns if they changed since the last save (never for a
    /// shared instance: its state is in Redis).
    pub fn save_if_dirty(&self) -> Result<()> {
        if !self.dirty.swap(false, Ordering::AcqRel) || self.shared.is_some() {
            return Ok(());
        }
        let snapshot = {
            let mut cd = lock(&self.state);
            cd.cooldowns.prune(self.clock.now());
            cd.saved_at = Some(crate::time::format_ts(self.clock.now()));
            cd.clone()
        };
        persist::save(&self.stats_dir, &snapshot)
    }

    /// Replace a stream's estimated tokens with what it reported using.
    pub fn correct_tokens(&self, reservation: &mut Reservation, used: u64) {
        if reservation.is_shared() {
            if let Some(s) = self.shared.clone() {
                let mut r = reservation.clone();
                tokio::spawn(async move { s.correct(&mut r, used).await });
            }
            reservation.set_tokens(used);
            return;
        }
        lock(&self.state).limits.correct(reservation, used);
        self.mark_dirty();
    }

    /// Look at this instance's own state (for a status view; keep it short:
    /// requests wait for the same lock).
    pub fn with_local_state<T>(&self, f: impl FnOnce(&RouteState<Cooldowns>) -> T) -> T {
        f(&lock(&self.state))
    }

    /// The state of a model now (from the watched state file).
    pub fn state_of(&self, key: &str) -> ModelState {
        self.states.current().state_of(key)
    }
}

/// Count a failure (in Redis when shared and reachable), decide with the
/// rules of [`crate::route::cooldown`], and put the bench in force everywhere.
async fn record_failure(
    shared: Option<&Arc<SharedState>>,
    local: &Mutex<RouteState<Cooldowns>>,
    target: &Target,
    err: &UpstreamError,
    now: DateTime<Utc>,
) -> crate::route::cooldown::Decision {
    let count = match (shared, Cooldowns::counter(target, err)) {
        (Some(s), Some((counter, id, window))) => s.count(counter, &id, window, now).await.ok(),
        _ => None,
    };
    let mut decision = lock(local)
        .cooldowns
        .record_failure_counted(target, err, now, count);
    if let (Some(s), Some(b)) = (shared, &decision.bench)
        && let Ok(kept) = s.bench(b, now).await
    {
        decision.bench = Some(kept);
    }
    decision
}

fn attempt_labels(c: &Candidate, class: &str) -> super::metrics::AttemptLabels {
    super::metrics::AttemptLabels {
        provider: c.provider.provider.name.clone(),
        model: c.model.clone(),
        class: class.to_string(),
    }
}

/// What `model` on `p` is benched and counted under: one target per key,
/// or one without a key for a keyless provider.
pub fn targets(p: &Resolved, model: &str) -> Vec<Target> {
    let base = Target::new(&p.provider.name, model);
    if p.keys.is_empty() {
        return vec![base];
    }
    p.keys
        .iter()
        .map(|k| base.clone().with_key(k.index, &k.fingerprint))
        .collect()
}

/// `#1:3f9a1c2e`: which key, never the key.
pub fn key_label(k: &ApiKey) -> String {
    format!("#{}:{}", k.index, k.fingerprint)
}

/// How long the debounced saver waits after a change before writing.
pub const SAVE_DEBOUNCE: Duration = Duration::from_millis(500);
