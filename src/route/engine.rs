//! The router: try candidates in order within the attempt budget, fall
//! back on failure, bench what fails (through [`crate::route::cooldown`], the only
//! place that decides waits), and keep every attempt for the trail.
//!
//! One engine serves both modes. The one-shot command makes one request
//! and saves the cooldowns; the server shares the engine between handlers
//! and saves the cooldowns when they change (debounced) and at shutdown.

use std::collections::BTreeMap;
use std::future::Future;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::{Stream, StreamExt};

use crate::catalog::{ApiKey, Catalog, Resolved, RouteSettings};
use crate::error::Result;
use crate::route::cooldown::{Cooldowns, Target};
use crate::state::{ModelState, StateWatcher, Watcher};
use crate::upstream::classify::{ErrorClass, UpstreamError};
use crate::upstream::secret::Redactor;

use super::affinity::{AFFINITY_CAP, Affinity};
use super::ask::Ask;
use super::choose::{self, Candidate, Choice, NoCandidate};
pub use super::domain::{Attempt, AttemptClass, Exhausted, trail};
use super::domain::{RouteError, StreamEvent};
use super::health::HealthCache;
use super::limits::Reservation;
use super::persist::{self, RouteState};
use super::shared::SharedState;
use super::verdicts::Verdicts;
use crate::upstream::dialect::{self, Need, ReplyDelta};
use run::{Admission, AfterAttempt, Picker, Run};

mod bands;
mod for_prober;
mod run;
use crate::clock::Clock;
pub use bands::{Ability, Facts, Probed};
pub use for_prober::DueBench;

/// How trying one tier of candidates ended without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// Out of attempts or time: try nothing more.
    Stopped,
    /// Every candidate was tried or passed over.
    Through,
}

/// What trying one tier of candidates came to: an answer (served, or the
/// request itself refused), or how it ended without one.
type Tried<T> = std::ops::ControlFlow<std::result::Result<Served<T>, Exhausted>, Ended>;

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
    /// What the router changed in the request for the model that served,
    /// in the `X-Llmprobe-Dropped` vocabulary: `max_tokens→8192` when it
    /// lowered `max_tokens` to the model's output cap.
    pub clamped: Vec<String>,
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
    /// Nothing was sent: the candidate's dialect cannot express the
    /// request. The router passes over it (`skip:dialect`) and does not
    /// count it as an attempt.
    pub unsent: bool,
}

impl<T> Sent<T> {
    pub fn failed(err: UpstreamError) -> Sent<T> {
        Sent {
            result: Err(err),
            headers: None,
            tokens: None,
            unsent: false,
        }
    }
}

/// Everything a request needs, shared by every handler.
pub struct Engine {
    pub settings: RouteSettings,
    aliases: BTreeMap<String, Vec<String>>,
    /// Usable providers in catalog order; keys resolved.
    providers: Vec<Arc<Resolved>>,
    /// Catalog providers left out for an unset key: name, models, and the
    /// variables to set (for the "not served" error).
    unkeyed: Vec<(String, Vec<String>, String)>,
    /// Round-robin start per provider, for key rotation.
    rotation: Vec<AtomicUsize>,
    pub client: reqwest::Client,
    pub states: Arc<StateWatcher>,
    /// The latest capability probes (`stats/capabilities.json`), watched
    /// like the states; routing goes on without them when they cannot be
    /// read.
    pub capabilities: Arc<Watcher<Probed>>,
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
    /// The record read from Redis (`--record shared`) instead of the
    /// stats directory: states, recent health and capability verdicts.
    record: Option<super::shared::record::Reader>,
    /// Providers this instance could not reach ([`super::reach`]).
    pub reach: super::reach::Reach,
    /// Degraded mode's grace state ([`Engine::mode`]).
    degraded: Mutex<super::degraded::Tracker>,
    /// Which model served each conversation last ([`super::affinity`]).
    affinity: Mutex<Affinity>,
    /// Said once on stderr: with a shared record, a degraded-mode success
    /// is not recorded here ([`Engine::served_in_degraded_mode`]).
    said_shared_evidence: AtomicBool,
    /// `route --serve`'s alerts, when a channel is configured
    /// ([`super::alerts`]).
    alerts: Option<Arc<super::alerts::RouteAlerts>>,
}

/// The provider names of `provider::model` keys, each once, in order.
pub fn routable_providers(routable: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for key in routable {
        let p = crate::catalog::ModelKey::provider_of(key);
        if !out.iter().any(|x| x == p) {
            out.push(p.to_string());
        }
    }
    out
}

/// The explicit wait (`retry_at`) of paused `key` in `snapshot`, when it
/// is not over at `now`: degraded mode does not try the model before it.
fn retry_wait(
    snapshot: &crate::state::Snapshot,
    key: &str,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    snapshot
        .paused()
        .iter()
        .find(|(k, _)| k == key)
        .and_then(|(_, e)| crate::state::reprobe::parse(e.retry_at.as_deref()))
        .filter(|r| *r > now)
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
        let unkeyed = catalog
            .providers
            .iter()
            .filter_map(|p| match p.resolve() {
                Err(crate::catalog::Unusable::Missing(vars)) => {
                    Some((p.name.clone(), p.models.clone(), vars.join(" and ")))
                }
                _ => None,
            })
            .collect();
        let redactor = Redactor::new(providers.iter().flat_map(|p| p.secrets().cloned()));
        let states = Arc::new(StateWatcher::open(
            &stats_dir.join(crate::settings::STATE_FILE),
        )?);
        let (capabilities, problem) =
            Watcher::open_lenient(&stats_dir.join(crate::capabilities::FINDINGS_FILE));
        if let Some(e) = problem {
            eprintln!("warning: {e}; routing goes on without capability verdicts");
        }
        let mut saved: RouteState<Cooldowns> = persist::load(&persist::path(&stats_dir))?;
        saved.cooldowns.prune(clock.now());
        saved.verdicts.prune(clock.now());
        let affinity = Mutex::new(Affinity::new(settings.affinity, AFFINITY_CAP));
        Ok(Engine {
            affinity,
            settings,
            aliases: catalog.aliases.clone(),
            rotation: providers.iter().map(|_| AtomicUsize::new(0)).collect(),
            providers,
            unkeyed,
            client,
            states,
            capabilities: Arc::new(capabilities),
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
            record: None,
            reach: Default::default(),
            degraded: Default::default(),
            said_shared_evidence: AtomicBool::new(false),
            alerts: None,
        })
    }

    /// Tell `alerts` of day-long benches and degraded mode.
    pub fn with_alerts(mut self, alerts: super::alerts::RouteAlerts) -> Engine {
        self.alerts = Some(Arc::new(alerts));
        self
    }

    /// The alerts, when a channel is configured.
    pub fn alerts(&self) -> Option<&Arc<super::alerts::RouteAlerts>> {
        self.alerts.as_ref()
    }

    /// Resolve the alerted benches no longer in force and send the alerts
    /// whose window has passed ([`super::alerts::RouteAlerts::tick`]).
    pub fn tick_alerts(&self) {
        let Some(a) = &self.alerts else {
            return;
        };
        let now = self.clock.now();
        a.tick(
            &self.client,
            self.shared.as_ref(),
            |id| {
                lock(&self.state)
                    .cooldowns
                    .active(now)
                    .any(|b| b.target == id)
            },
            now,
        );
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

    /// Read the record (model states, recent health, capability verdicts)
    /// from the shared store, as `check --shared-state` publishes it,
    /// instead of the stats directory ([`Engine::sync_record`] keeps it
    /// current). Call after [`Engine::with_shared`].
    pub fn with_shared_record(mut self) -> Engine {
        self.record = Some(super::shared::record::Reader::new());
        // Nothing from the stats directory; until the first record is read
        // nothing is routed ([`Engine::awaits_record`]).
        self.states.publish(Default::default());
        self.capabilities.publish(Default::default());
        self.health.store(Default::default());
        self
    }

    /// True when the record comes from Redis: nothing reads the stats
    /// directory's states, capabilities or log then.
    pub fn reads_shared_record(&self) -> bool {
        self.record.is_some()
    }

    /// True while a shared-record router has not read a record yet: its
    /// snapshot is empty, where every model (disabled ones too) would look
    /// active, so it routes nothing (`no_record`) and `/readyz` says 503.
    pub fn awaits_record(&self) -> bool {
        self.record.as_ref().is_some_and(|r| !r.has_read())
    }

    /// Poll the shared record, and route on a new one when it changed:
    /// the same state snapshot, health and verdicts the local files give.
    /// With Redis away, the last record seen stays.
    pub async fn sync_record(&self) {
        let (Some(shared), Some(reader)) = (self.shared.as_ref(), self.record.as_ref()) else {
            return;
        };
        if let Some(r) = reader.poll(shared, self.clock.now()).await {
            self.states.publish(r.snapshot());
            self.capabilities
                .publish(r.findings.as_ref().map(Probed::from).unwrap_or_default());
            self.health.store(Arc::new(r.health));
        }
    }

    /// Where the record comes from and how fresh it is, for the status
    /// views; `None` for the local stats directory.
    pub fn record_view(&self) -> Option<super::shared::record::RecordView> {
        self.record.as_ref().map(|r| r.view(self.clock.now()))
    }

    /// Re-read recent health from the log if it changed. Blocking: the
    /// server calls it from a background task, the one-shot command once.
    /// With a shared record it does nothing: the health comes from Redis.
    pub fn refresh_health(&self) -> Result<()> {
        if self.record.is_some() {
            return Ok(());
        }
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
    /// The `[aliases]` names, in order.
    pub fn alias_names(&self) -> impl Iterator<Item = &str> {
        self.aliases.keys().map(String::as_str)
    }

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
            NoCandidate::Unknown(model) => RouteError::UnknownModel {
                unset: self.unset_for(&choice),
                model,
            },
            NoCandidate::NoneActive(model) => RouteError::NoneActive { model },
        })
    }

    /// The key variables that would let a provider serve `choice`: every
    /// catalog provider without its key that lists the model (or any, for
    /// `auto`), as `GROQ_API_KEY (groq)`.
    fn unset_for(&self, choice: &Choice) -> Vec<String> {
        let serves = |name: &str, models: &[String]| match choice {
            Choice::Auto => true,
            Choice::Id(m) => models.iter().any(|x| x == m),
            Choice::Pinned { provider, model } => {
                provider == name && models.iter().any(|x| x == model)
            }
            Choice::Alias(a) => self.aliases.get(a).is_some_and(|members| {
                members.iter().any(|k| {
                    crate::catalog::ModelKey::split(k)
                        .is_some_and(|(p, m)| p == name && models.iter().any(|x| x == m))
                })
            }),
        };
        self.unkeyed
            .iter()
            .filter(|(name, models, _)| serves(name, models))
            .map(|(name, _, vars)| format!("{vars} ({name})"))
            .collect()
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

    /// Why the server is not ready, if it is not: `no_active_models`,
    /// `all_cooling_down` when nothing is `routable`, or `all_unreachable`
    /// when every routable model's provider is out of reach from here.
    pub fn not_ready(&self, routable: &[String]) -> Option<&'static str> {
        if self.awaits_record() {
            return Some("no_record");
        }
        if self.candidates(None).is_err() {
            return Some("no_active_models");
        }
        if routable.is_empty() {
            return Some("all_cooling_down");
        }
        let down = self.reach.unreachable();
        if routable_providers(routable)
            .iter()
            .all(|p| down.contains_key(p))
        {
            return Some("all_unreachable");
        }
        None
    }

    /// The providers of the routable models, each once.
    pub fn routable_resolved(&self, routable: &[String]) -> Vec<Arc<Resolved>> {
        let names = routable_providers(routable);
        self.providers
            .iter()
            .filter(|p| names.contains(&p.provider.name))
            .cloned()
            .collect()
    }

    /// Try the candidates for `ask` in order with `send`, which makes one
    /// attempt on one candidate with one key. A request with a capability
    /// need goes to the models known able first, then to the unknown
    /// ([`Ability`]); a candidate that cannot take the request (its dialect,
    /// its known context window, a failed probe, or an upstream's word
    /// newer than its probe) is passed over before anything is sent
    /// (`skip:<need>`); a `max_tokens` over a candidate's output cap is
    /// lowered to it ([`Candidate::max_tokens`]); the model that served the
    /// conversation's previous turn goes first while it is healthy.
    pub async fn route<T, F, Fut>(
        &self,
        ask: &Ask,
        mut send: F,
    ) -> std::result::Result<Served<T>, Exhausted>
    where
        F: FnMut(Candidate, Option<ApiKey>) -> Fut,
        Fut: Future<Output = Sent<T>>,
    {
        if self.awaits_record() {
            self.count_request("rejected");
            return Err(Exhausted {
                error: RouteError::NoRecord,
                attempts: Vec::new(),
            });
        }
        let now = self.clock.now();
        let mut run = Run::new(self, 0);
        run.ask = Some(ask);
        // Why no active candidate can take the request, held while degraded
        // mode's last resort may still serve it.
        let mut held: Option<RouteError> = None;
        let active = match self.candidates(ask.model.as_deref()) {
            // An unknown model is refused before routing, as a body that
            // does not parse is; a known one with nothing active is not.
            Err(error @ RouteError::UnknownModel { .. }) => {
                self.count_request("refused");
                return Err(Exhausted {
                    error,
                    attempts: Vec::new(),
                });
            }
            Err(error) => {
                held = Some(error);
                Vec::new()
            }
            Ok(mut candidates) => {
                self.previous_first(&mut candidates, ask, now);
                match self.able(candidates, ask, now) {
                    Ok((able, skipped)) => {
                        run.attempts = skipped;
                        able
                    }
                    Err(x) => {
                        run.attempts = x.attempts;
                        held = Some(x.error);
                        Vec::new()
                    }
                }
            }
        };
        match self
            .try_tier(&mut run, &active, ask, false, &mut send)
            .await
        {
            ControlFlow::Break(r) => return r,
            ControlFlow::Continue(Ended::Stopped) => return Err(run.exhausted()),
            ControlFlow::Continue(Ended::Through) => {}
        }
        if let Some(paused) = self.last_resort(ask, now, &mut run) {
            return match self.try_tier(&mut run, &paused, ask, true, &mut send).await {
                ControlFlow::Break(r) => r,
                ControlFlow::Continue(_) => Err(run.exhausted()),
            };
        }
        match held {
            Some(error) => {
                self.count_request(match error {
                    RouteError::NoneActive { .. } => "exhausted",
                    _ => "rejected",
                });
                Err(Exhausted {
                    error,
                    attempts: run.attempts,
                })
            }
            None => Err(run.exhausted()),
        }
    }

    /// Try `candidates` in order (each with its keys in turn) within the
    /// run's budget. Degraded mode's `last_resort` tier marks each paused
    /// model it reaches with `last-resort:paused` in the trail, and a
    /// success there puts the model back to `active`
    /// ([`Engine::served_in_degraded_mode`]).
    async fn try_tier<T, F, Fut>(
        &self,
        run: &mut Run<'_>,
        candidates: &[Candidate],
        ask: &Ask,
        last_resort: bool,
        send: &mut F,
    ) -> Tried<T>
    where
        F: FnMut(Candidate, Option<ApiKey>) -> Fut,
        Fut: Future<Output = Sent<T>>,
    {
        let mut picker = Picker::new(candidates);
        let mut marked: Option<String> = None;
        while let Some((c, key, target)) = picker.next(self, &run.skip) {
            if last_resort && marked.as_deref() != Some(c.key().as_str()) {
                marked = Some(c.key());
                run.attempts.push(Attempt {
                    model: c.key(),
                    key: None,
                    class: AttemptClass::LastResort,
                    status: None,
                    message: None,
                    retry_at: None,
                });
            }
            run.tokens = self.reserved_tokens(c, ask);
            let mut reservation = match run.admit(c, key.as_ref(), &target).await {
                Admission::Skipped => continue,
                Admission::Stop => {
                    // Not tried after all: no mark.
                    if run
                        .attempts
                        .last()
                        .is_some_and(|a| a.class == AttemptClass::LastResort)
                    {
                        run.attempts.pop();
                    }
                    return ControlFlow::Continue(Ended::Stopped);
                }
                Admission::Send(r) => r,
            };
            let (sent, took) = run.send_one(c, &key, send).await;
            if sent.unsent {
                run.not_sent(c, &mut reservation, sent.result.err());
                picker.next_candidate();
                continue;
            }
            run.account(c, &target, &mut reservation, &sent);
            let next = run
                .record_outcome(c, key.as_ref(), target, reservation, sent.result, took)
                .await;
            match next {
                AfterAttempt::Served(s) => {
                    if let Some(conv) = &ask.conversation {
                        lock(&self.affinity).record(conv, &s.via, self.clock.now());
                    }
                    if last_resort {
                        self.served_in_degraded_mode(&s.via);
                    }
                    return ControlFlow::Break(Ok(s));
                }
                AfterAttempt::Rejected(x) => return ControlFlow::Break(Err(x)),
                AfterAttempt::NextKey => {}
                AfterAttempt::NextCandidate => picker.next_candidate(),
            }
        }
        ControlFlow::Continue(Ended::Through)
    }

    /// Whether route is degraded now ([`super::degraded`]): the counts of
    /// the current state snapshot, with the grace periods stepped at the
    /// clock's now. Cheap: a recount only when the snapshot changed.
    pub fn mode(&self) -> super::degraded::Mode {
        let snapshot = self.states.current();
        let now = self.clock.now();
        let (mode, changed) = lock(&self.degraded).step(
            snapshot,
            self.providers.iter().map(|p| &**p),
            self.settings.degraded_below,
            self.settings.last_resort_paused,
            now,
        );
        if let (Some(a), Some(degraded)) = (&self.alerts, changed) {
            a.mode_changed(degraded, mode.counts, mode.degraded_below, now);
        }
        mode
    }

    /// Degraded mode's last resort for `ask`, once every active candidate
    /// was tried or passed over: its paused models (never the disabled),
    /// in the candidate order, those that cannot take the request passed
    /// over in the trail (`skip:<need>`). `None` when not degraded, when
    /// `[route] last_resort_paused` is off, or when none can take it.
    fn last_resort(
        &self,
        ask: &Ask,
        now: DateTime<Utc>,
        run: &mut Run<'_>,
    ) -> Option<Vec<Candidate>> {
        if !self.settings.last_resort_paused || !self.mode().degraded() {
            return None;
        }
        let mut paused = self.paused_candidates(ask.model.as_deref())?;
        // A model whose pause came with a wait (`retry_at`) not yet over is
        // passed over: the provider said when.
        let snapshot = self.states.current();
        paused.retain(|c| {
            let key = c.key();
            let wait = retry_wait(&snapshot, &key, now);
            if let Some(r) = wait {
                run.attempts.push(Attempt {
                    model: key,
                    key: None,
                    class: AttemptClass::PausedWait,
                    status: None,
                    message: None,
                    retry_at: Some(r),
                });
            }
            wait.is_none()
        });
        let (able, skipped) = match self.able(paused, ask, now) {
            Ok(found) => found,
            Err(x) => (Vec::new(), x.attempts),
        };
        run.attempts.extend(skipped);
        (!able.is_empty()).then_some(able)
    }

    /// The paused models for `model`, in the candidate order; `None` when
    /// there are none.
    fn paused_candidates(&self, model: Option<&str>) -> Option<Vec<Candidate>> {
        let choice = Choice::parse(model, &self.aliases);
        let health = self.health.load();
        let snapshot = self.states.current();
        choose::candidates_in(
            ModelState::Paused,
            &choice,
            &self.providers,
            &self.aliases,
            |k| snapshot.state_of(k),
            &health,
        )
        .ok()
    }

    /// The paused models degraded mode could try now as a last resort
    /// (for `/readyz`): none unless degraded with `[route]
    /// last_resort_paused` on; else those `cooldowns` do not bench at
    /// `now`, on providers not known to be out of reach.
    pub fn last_resort_usable(
        &self,
        mode: &super::degraded::Mode,
        cooldowns: &Cooldowns,
        now: DateTime<Utc>,
    ) -> usize {
        if !self.settings.last_resort_paused || !mode.degraded() {
            return 0;
        }
        let down = self.reach.unreachable();
        let snapshot = self.states.current();
        self.paused_candidates(None).map_or(0, |cs| {
            cs.iter()
                .filter(|c| !down.contains_key(&c.provider.provider.name))
                .filter(|c| retry_wait(&snapshot, &c.key(), now).is_none())
                .filter(|c| {
                    targets(&c.provider, &c.model)
                        .iter()
                        .any(|t| cooldowns.blocked(t, now).is_none())
                })
                .count()
        })
    }

    /// A paused model served in degraded mode: evidence that it works.
    /// Put it back to `active` in the state file (reason `served in
    /// degraded mode`), off the request path; no health-log entry.
    ///
    /// With a shared record the local state file is not the record routed
    /// on: nothing is written and the snapshot stays the fleet's; the
    /// evidence is left to the fleet's `check` (said once on stderr).
    fn served_in_degraded_mode(&self, key: &str) {
        if self.reads_shared_record() {
            if !self.said_shared_evidence.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "route: {key} served in degraded mode; with a shared record it stays paused here until the fleet's check (or check --paused) probes it"
                );
            }
            return;
        }
        let (dir, key, now) = (self.stats_dir.clone(), key.to_string(), self.clock.now());
        let states = self.states.clone();
        tokio::task::spawn_blocking(move || {
            match super::degraded::record_served(&dir, &key, now) {
                Ok(true) => {
                    eprintln!("route: {key} served in degraded mode; it is active again");
                    // Route by the new state now, not at the next poll.
                    let _ = states.refresh();
                }
                Ok(false) => {}
                Err(e) => eprintln!(
                    "route: cannot record that {key} served in degraded mode: {e}; the state file is left as it is"
                ),
            }
        });
    }

    /// Put the model that served this conversation's previous turn first,
    /// if it is among the (active) candidates and not benched under every
    /// key.
    fn previous_first(&self, candidates: &mut Vec<Candidate>, ask: &Ask, now: DateTime<Utc>) {
        let Some(conv) = &ask.conversation else {
            return;
        };
        let Some(prev) = lock(&self.affinity).get(conv, now).map(str::to_string) else {
            return;
        };
        let Some(i) = candidates.iter().position(|c| c.key() == prev) else {
            return;
        };
        let c = &candidates[i];
        let benched = {
            let st = lock(&self.state);
            targets(&c.provider, &c.model)
                .iter()
                .all(|t| st.cooldowns.blocked(t, now).is_some())
        };
        if !benched {
            let c = candidates.remove(i);
            candidates.insert(0, c);
        }
    }

    /// The candidates that can take `ask` (each with its `max_tokens`
    /// clamped to its output cap), known able first, then unknown
    /// ([`bands`]), each band in the order given; and a `skip:<need>`
    /// attempt for each known unable. When none can, the request is
    /// refused as one no active model could ever take
    /// ([`RouteError::Incapable`], or [`RouteError::ContextTooSmall`] when
    /// the prompt is what none can hold); the caller counts it.
    fn able(
        &self,
        candidates: Vec<Candidate>,
        ask: &Ask,
        now: DateTime<Utc>,
    ) -> std::result::Result<(Vec<Candidate>, Vec<Attempt>), Exhausted> {
        let active = candidates.len();
        // Only a request with a capability need looks at the probes.
        let probed = ask
            .needs
            .iter()
            .any(|n| crate::capabilities::Capability::of_need(*n).is_some())
            .then(|| self.probed());
        let mut able = Vec::new();
        let mut unknown = Vec::new();
        let mut skipped = Vec::new();
        let mut needs = Vec::new();
        let mut reasons = Vec::new();
        {
            let st = lock(&self.state);
            for mut c in candidates {
                let band = match self.judge(&c, ask, &st.verdicts, probed.as_deref(), now) {
                    Ability::Unable(need, why) => {
                        tracing::debug!(model = %c.key(), need = need.as_str(), why = %why, "route: skipped, cannot take it");
                        self.count_skip(&c, need.as_str());
                        if !needs.contains(&need) {
                            needs.push(need);
                        }
                        reasons.push(format!("{}: {why}", c.key()));
                        skipped.push(Attempt {
                            model: c.key(),
                            key: None,
                            class: AttemptClass::Skipped(need),
                            status: None,
                            message: Some(why),
                            retry_at: None,
                        });
                        continue;
                    }
                    band => band,
                };
                c.max_tokens = self.clamp(&c, ask, &st.verdicts, now);
                match band {
                    Ability::Unknown => unknown.push(c),
                    _ => able.push(c),
                }
            }
        }
        able.append(&mut unknown);
        if able.is_empty() {
            let error = if needs == [Need::Context] {
                self.too_long(ask)
            } else {
                RouteError::Incapable {
                    needs,
                    active,
                    reasons,
                }
            };
            return Err(Exhausted {
                error,
                attempts: skipped,
            });
        }
        Ok((able, skipped))
    }

    /// The `max_tokens` to send to `c` instead of the request's: its
    /// output cap (the catalog's or one an upstream stated), when the
    /// request asks for more. A request with none asks a dialect that
    /// requires a `max_tokens` for its default.
    fn clamp(
        &self,
        c: &Candidate,
        ask: &Ask,
        verdicts: &Verdicts,
        now: DateTime<Utc>,
    ) -> Option<u32> {
        let asked = ask
            .max_tokens
            .or_else(|| dialect::wire(c.provider.provider.dialect).default_max_tokens())?;
        let cap = [
            c.provider.provider.info(&c.model).max_output_tokens,
            verdicts.output_cap(&c.key(), now),
        ]
        .into_iter()
        .flatten()
        .min()?;
        (asked > cap).then_some(cap)
    }

    /// What a request to `c` counts against token limits until the
    /// upstream reports its usage: the prompt, and the answer's
    /// `max_tokens` (as clamped) up to `[route] reserve_max_tokens`, or
    /// that setting when the request sets none.
    fn reserved_tokens(&self, c: &Candidate, ask: &Ask) -> u64 {
        let reserve = self.settings.reserve_max_tokens;
        let answer = match c.max_tokens.or(ask.max_tokens) {
            Some(m) if m <= reserve => m,
            _ => reserve,
        };
        ask.prompt_tokens + u64::from(answer)
    }

    /// Remember what a capability error said about `c`'s model, here and
    /// in the shared store.
    fn learn_verdict(&self, c: &Candidate, err: &UpstreamError) {
        let Some(cap) = crate::upstream::classify::capability_of(err) else {
            return;
        };
        let now = self.clock.now();
        let key = c.key();
        let made = lock(&self.state)
            .verdicts
            .learn(&key, cap, &err.message, now);
        let Some((name, v)) = made else {
            return;
        };
        tracing::debug!(model = %key, verdict = %name, until = %crate::time::format_ts(v.until), "route: learned what the model cannot take");
        self.mark_dirty();
        if let Some(s) = self.shared.clone() {
            tokio::spawn(async move { s.put_verdict(&key, &name, &v).await });
        }
    }

    /// Take in what other instances learned about models (off the request
    /// path: the server's health poller calls it).
    pub async fn sync_verdicts(&self) {
        let Some(s) = self.shared.clone() else {
            return;
        };
        if let Ok(found) = s.verdicts(self.clock.now()).await {
            let mut st = lock(&self.state);
            for (model, name, v) in found.entries() {
                st.verdicts.insert(model, name, v.clone());
            }
        }
    }

    /// Count one request under `outcome` in `/metrics`: `served`,
    /// `exhausted`, `rejected` (an upstream said the request itself is at
    /// fault) or `refused` (refused before routing: a body that does not
    /// parse, an unknown model).
    pub fn count_request(&self, outcome: &str) {
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
    /// shared instance: its state is in Redis). A save that fails leaves
    /// them marked changed, so that the next save (at the next change, or
    /// at shutdown) tries again.
    pub fn save_if_dirty(&self) -> Result<()> {
        if !self.dirty.swap(false, Ordering::AcqRel) || self.shared.is_some() {
            return Ok(());
        }
        let snapshot = {
            let mut cd = lock(&self.state);
            cd.cooldowns.prune(self.clock.now());
            cd.verdicts.prune(self.clock.now());
            cd.saved_at = Some(crate::time::format_ts(self.clock.now()));
            cd.clone()
        };
        persist::save(&self.stats_dir, &snapshot).inspect_err(|_| {
            self.dirty.store(true, Ordering::Release);
        })
    }

    /// A served stream's events, as the engine learns from them (for every
    /// surface): the usage event corrects the request's token estimate, and
    /// a failure after the first byte counts against the model. A failure
    /// or stall comes out as [`StreamEvent::Failed`] with the words the
    /// client is told. A stream dropped before its end and its usage (the
    /// client went away mid-answer, which drops it and so cancels the
    /// upstream request; or the upstream broke off) corrects the estimate
    /// to `prompt_tokens` plus the output streamed so far ([`StreamTally`]):
    /// those were billed upstream. One that ends without usage keeps the
    /// estimate.
    pub fn watch_stream<S: Stream<Item = StreamEvent>>(
        self: &Arc<Self>,
        target: Target,
        reservation: Option<Reservation>,
        prompt_tokens: u64,
        events: S,
    ) -> impl Stream<Item = StreamEvent> + use<S> {
        let engine = self.clone();
        let idle = crate::upstream::http::human_duration(self.settings.idle_timeout);
        let mut tally = StreamTally {
            engine: self.clone(),
            reservation,
            prompt_tokens,
            output_chars: 0,
            settled: false,
        };
        events.map(move |ev| match ev {
            StreamEvent::Usage {
                tokens: Some(t),
                counts,
            } => {
                tally.settle(t);
                StreamEvent::Usage {
                    tokens: Some(t),
                    counts,
                }
            }
            StreamEvent::Failed(msg) => {
                let msg = format!("the upstream failed mid-stream: {msg}");
                engine.record_late_failure(&target, ErrorClass::ServerError, msg.clone());
                StreamEvent::Failed(msg)
            }
            StreamEvent::Stalled => {
                let msg = format!("the upstream sent nothing for {idle}");
                engine.record_late_failure(&target, ErrorClass::Timeout, msg.clone());
                StreamEvent::Failed(msg)
            }
            // A stream that ended without reporting its usage keeps its
            // estimate: reasoning the upstream never streamed was billed
            // too, so the characters seen would undercount it.
            StreamEvent::Done => {
                tally.settled = true;
                StreamEvent::Done
            }
            other => {
                tally.count(&other);
                other
            }
        })
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

    /// The stats directory the engine reads and writes.
    pub fn stats_dir(&self) -> &std::path::Path {
        &self.stats_dir
    }

    /// The state of a model now (from the watched state file).
    pub fn state_of(&self, key: &str) -> ModelState {
        self.states.current().state_of(key)
    }
}

/// What a served stream has cost so far, for its reservation: the prompt's
/// estimate, and the output streamed, in characters (estimated as the
/// prompt is, characters / 4, as [`ChatRequest::estimated_tokens`] does).
/// The upstream's usage event settles
/// the reservation, and an end without usage leaves the estimate; dropped
/// before either (the client went away, the upstream broke off), it
/// corrects the reservation to the tally, locally or in the shared store.
///
/// [`ChatRequest::estimated_tokens`]: crate::upstream::dialect::ChatRequest::estimated_tokens
struct StreamTally {
    engine: Arc<Engine>,
    reservation: Option<Reservation>,
    prompt_tokens: u64,
    output_chars: u64,
    settled: bool,
}

impl StreamTally {
    fn settle(&mut self, used: u64) {
        if let Some(r) = self.reservation.as_mut() {
            self.engine.correct_tokens(r, used);
        }
        self.settled = true;
    }

    /// Count the output an event carries.
    fn count(&mut self, ev: &StreamEvent) {
        let chars = |s: &str| s.chars().count() as u64;
        self.output_chars += match ev {
            StreamEvent::Delta(ReplyDelta::Text(t) | ReplyDelta::Reasoning(t)) => chars(t),
            StreamEvent::Delta(ReplyDelta::ToolCall(c)) => {
                chars(&c.arguments) + c.name.as_deref().map_or(0, chars)
            }
            // A forwarded chunk's content comes as deltas too.
            _ => 0,
        };
    }

    /// The tokens the stream used so far, as estimated.
    fn used(&self) -> u64 {
        self.prompt_tokens + self.output_chars.div_ceil(4)
    }
}

impl Drop for StreamTally {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let used = self.used();
        if let Some(mut r) = self.reservation.take().filter(Reservation::counted) {
            // A shared correction is a task on the runtime; a stream is
            // dropped on it (hyper's connection task), but never panic
            // when not.
            if r.is_shared() && tokio::runtime::Handle::try_current().is_err() {
                return;
            }
            self.engine.correct_tokens(&mut r, used);
        }
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
