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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::{Stream, StreamExt};

use crate::catalog::{ApiKey, Catalog, Resolved, RouteSettings};
use crate::error::Result;
use crate::route::cooldown::{Cooldowns, Target};
use crate::state::ModelState;
use crate::upstream::classify::{ErrorClass, UpstreamError};
use crate::upstream::secret::Redactor;

use super::affinity::{AFFINITY_CAP, Affinity};
use super::ask::Ask;
use super::choose::{self, Candidate, Choice, NoCandidate};
pub use super::domain::{Attempt, AttemptClass, Exhausted, trail};
use super::domain::{RouteError, StreamEvent};
use super::persist::{self, RouteState};
use super::shared::SharedState;
use super::speed::{AFFINITY_FACTOR, Speed};
use crate::upstream::dialect::{self, Need, ReplyDelta};
use crate::usage::limits::Reservation;
use run::{Admission, AfterAttempt, Picker, Run};

mod bands;
mod for_prober;
mod ledger;
mod lists;
mod record;
mod run;
mod telemetry;
use crate::clock::Clock;
pub use bands::{Ability, Facts, Probed};
pub use for_prober::DueBench;
pub use ledger::Ledger;
use lists::{Inputs, Lists, Walk};
pub use record::Record;
pub use telemetry::Telemetry;
use telemetry::attempt_labels;

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
    /// When the attempt that served was sent, and the model's place in
    /// [`Speed`]: a stream's end is timed from it ([`Engine::watch_stream`]).
    pub timing: Timing,
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
    /// The attempt opened a stream: it returned at the first event (its
    /// time is the time to first token), and its end is timed later.
    pub streamed: bool,
}

/// When a served attempt was sent, and its model's place in [`Speed`].
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub slot: usize,
    pub sent: std::time::Instant,
}

impl<T> Sent<T> {
    pub fn failed(err: UpstreamError) -> Sent<T> {
        Sent {
            result: Err(err),
            headers: None,
            tokens: None,
            unsent: false,
            streamed: false,
        }
    }
}

/// Everything a request needs, shared by every handler: the settings,
/// the providers and how to reach them, and the three parts it keeps its
/// state in ([`Ledger`], [`Record`], [`Telemetry`]). What touches one
/// part lives with it; what needs several lives here.
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
    stats_dir: PathBuf,
    pub clock: Clock,
    pub redactor: Redactor,
    /// Degraded mode's grace state ([`Engine::mode`]).
    degraded: Mutex<super::degraded::Tracker>,
    /// Which model served each conversation last ([`super::affinity`]).
    affinity: Mutex<Affinity>,
    /// Benches, limits and capability marks, as saved; shared in Redis.
    pub ledger: Ledger,
    /// The model states, capability verdicts and recent health routed by.
    pub record: Record,
    /// Metrics, alerts, reach.
    pub telemetry: Telemetry,
    /// What route measured of each model, which orders candidates
    /// ([`super::speed`]).
    pub speed: Speed,
    /// Each requested model's candidates, kept until the states (or, for
    /// `order = "priority"`, the health) change ([`lists`]).
    lists: Lists,
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
        let record = Record::open(&stats_dir)?;
        let mut saved: RouteState<Cooldowns> = persist::load(&persist::path(&stats_dir))?;
        saved.cooldowns.prune(clock.now());
        saved.verdicts.prune(clock.now());
        let affinity = Mutex::new(Affinity::new(settings.affinity, AFFINITY_CAP));
        let ledger = Ledger::new(saved, &stats_dir);
        let telemetry = Telemetry::new(providers.iter().map(|p| p.provider.models.len()).sum());
        let speed = Speed::new(
            &providers,
            telemetry.metrics.ttft.clone(),
            telemetry.metrics.total.clone(),
        );
        Ok(Engine {
            speed,
            lists: Lists::default(),
            affinity,
            settings,
            aliases: catalog.aliases.clone(),
            rotation: providers.iter().map(|_| AtomicUsize::new(0)).collect(),
            providers,
            unkeyed,
            client,
            stats_dir,
            clock,
            redactor,
            degraded: Default::default(),
            ledger,
            record,
            telemetry,
        })
    }

    /// Tell `alerts` of day-long benches and degraded mode.
    pub fn with_alerts(mut self, alerts: super::alerts::RouteAlerts) -> Engine {
        self.telemetry.set_alerts(alerts);
        self
    }

    /// Resolve the alerted benches no longer in force and send the alerts
    /// whose window has passed ([`super::alerts::RouteAlerts::tick`]).
    pub fn tick_alerts(&self) {
        let Some(a) = self.telemetry.alerts() else {
            return;
        };
        let now = self.clock.now();
        a.tick(
            &self.client,
            self.ledger.shared(),
            |id| {
                self.ledger
                    .lock()
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
        self.ledger.share(shared);
        self
    }

    /// Read the record (model states, recent health, capability verdicts)
    /// from the shared store, as `check --shared-state` publishes it,
    /// instead of the stats directory ([`Engine::sync_record`] keeps it
    /// current). Call after [`Engine::with_shared`].
    pub fn with_shared_record(mut self) -> Engine {
        self.record.read_shared();
        self
    }

    /// Poll the shared record, and route on a new one when it changed:
    /// the same state snapshot, health and verdicts the local files give.
    /// With Redis away, the last record seen stays.
    pub async fn sync_record(&self) {
        if let Some(shared) = self.ledger.shared() {
            self.record.sync(shared, self.clock.now()).await;
            self.tick_speed();
        }
    }

    /// Recompute every model's cost now (the fade of traffic figures, and
    /// seeds from new probes); off the request path, every
    /// [`super::serve::SPEED_TICK`] and after each health refresh.
    pub fn tick_speed(&self) {
        let now = self.clock.now().timestamp_millis();
        self.speed.refresh(&self.record.health(), now);
    }

    /// With shared state, write the figures measured here since the last
    /// merge and take in the newer ones of other instances: one round
    /// trip (docs/routing.md, "Running N instances"). Off the request path.
    pub async fn merge_speed(&self) {
        let Some(shared) = self.ledger.shared() else {
            return;
        };
        let mine = self.speed.to_merge();
        match shared.merge_speed(&mine).await {
            Ok(all) => self.speed.merged(&all, self.clock.now().timestamp_millis()),
            // Written again at the next merge.
            Err(_) => self.speed.redirty(&mine),
        }
    }

    /// Where the record comes from and how fresh it is, for the status
    /// views; `None` for the local stats directory.
    pub fn record_view(&self) -> Option<super::shared::record::RecordView> {
        self.record.view(self.clock.now())
    }

    /// Re-read recent health from the log if it changed. Blocking: the
    /// server calls it from a background task, the one-shot command once.
    /// With a shared record it does nothing: the health comes from Redis.
    pub fn refresh_health(&self) -> Result<()> {
        self.record.refresh_health(self.clock.now())?;
        self.tick_speed();
        Ok(())
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
        let health = self.record.health_now();
        let snapshot = self.record.states.current();
        choose::candidates(
            &choice,
            &self.providers,
            &self.aliases,
            |k| snapshot.state_of(k),
            self.ranking(&health),
        )
        .map_err(|e| self.no_candidate(&choice, e))
    }

    fn no_candidate(&self, choice: &Choice, e: NoCandidate) -> RouteError {
        match e {
            NoCandidate::Unknown(model) => RouteError::UnknownModel {
                unset: self.unset_for(choice),
                model,
            },
            NoCandidate::NoneActive(model) => RouteError::NoneActive { model },
        }
    }

    /// One request's walk through the candidates for a requested model:
    /// its kept list ([`lists`]), with the measured costs read now.
    fn walk(&self, model: Option<&str>) -> std::result::Result<Walk, RouteError> {
        let health = self.record.health_now();
        let list = self.lists.get(
            model,
            Inputs {
                providers: &self.providers,
                aliases: &self.aliases,
                order: self.settings.order,
                states: self.record.states.current(),
                health: &health,
                speed: &self.speed,
            },
        );
        match list {
            Ok(list) => Ok(Walk::new(
                list,
                &self.speed,
                self.settings.order != crate::catalog::Order::Priority,
            )),
            Err(e) => Err(self.no_candidate(&Choice::parse(model, &self.aliases), e)),
        }
    }

    fn ranking<'a>(&'a self, health: &'a super::health::HealthMap) -> choose::Ranking<'a> {
        choose::Ranking {
            order: self.settings.order,
            health,
            speed: &self.speed,
        }
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
        self.routable_under(&self.ledger.lock().cooldowns, now)
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
        if self.record.awaits() {
            return Some("no_record");
        }
        if self.candidates(None).is_err() {
            return Some("no_active_models");
        }
        if routable.is_empty() {
            return Some("all_cooling_down");
        }
        let down = self.telemetry.reach.unreachable();
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
        if self.record.awaits() {
            self.telemetry.count_request("rejected");
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
        let active = match self.walk(ask.model.as_deref()) {
            // An unknown model is refused before routing, as a body that
            // does not parse is; a known one with nothing active is not.
            Err(error @ RouteError::UnknownModel { .. }) => {
                self.telemetry.count_request("refused");
                return Err(Exhausted {
                    error,
                    attempts: Vec::new(),
                });
            }
            Err(error) => {
                held = Some(error);
                Walk::none()
            }
            Ok(mut walk) => {
                self.previous_first(&mut walk, ask, now);
                match self.able(walk, ask, now) {
                    Ok((able, skipped)) => {
                        run.attempts = skipped;
                        able
                    }
                    Err(x) => {
                        run.attempts = x.attempts;
                        held = Some(x.error);
                        Walk::none()
                    }
                }
            }
        };
        match self
            .try_tier(&mut run, active, ask, now, false, &mut send)
            .await
        {
            ControlFlow::Break(r) => return r,
            ControlFlow::Continue(Ended::Stopped) => return Err(run.exhausted()),
            ControlFlow::Continue(Ended::Through) => {}
        }
        if let Some(paused) = self.last_resort(ask, now, &mut run) {
            return match self
                .try_tier(&mut run, paused, ask, now, true, &mut send)
                .await
            {
                ControlFlow::Break(r) => r,
                ControlFlow::Continue(_) => Err(run.exhausted()),
            };
        }
        match held {
            Some(error) => {
                self.telemetry.count_request(match error {
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
        candidates: Walk,
        ask: &Ask,
        now: DateTime<Utc>,
        last_resort: bool,
        send: &mut F,
    ) -> Tried<T>
    where
        F: FnMut(Candidate, Option<ApiKey>) -> Fut,
        Fut: Future<Output = Sent<T>>,
    {
        let mut picker = Picker::new(candidates, ask, now);
        let mut marked: Option<String> = None;
        while let Some((c, key, target)) = picker.next(self, &run.skip) {
            let c = &c;
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
            run.streamed = sent.streamed;
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
        let snapshot = self.record.states.current();
        let now = self.clock.now();
        let (mode, changed) = lock(&self.degraded).step(
            snapshot,
            self.providers.iter().map(|p| &**p),
            self.settings.degraded_below,
            self.settings.last_resort_paused,
            now,
        );
        if let (Some(a), Some(degraded)) = (self.telemetry.alerts(), changed) {
            a.mode_changed(degraded, mode.counts, mode.degraded_below, now);
        }
        mode
    }

    /// Degraded mode's last resort for `ask`, once every active candidate
    /// was tried or passed over: its paused models (never the disabled),
    /// in the candidate order, those that cannot take the request passed
    /// over in the trail (`skip:<need>`). `None` when not degraded, when
    /// `[route] last_resort_paused` is off, or when none can take it.
    fn last_resort(&self, ask: &Ask, now: DateTime<Utc>, run: &mut Run<'_>) -> Option<Walk> {
        if !self.settings.last_resort_paused || !self.mode().degraded() {
            return None;
        }
        let mut paused = self.paused_candidates(ask.model.as_deref())?;
        // A model whose pause came with a wait (`retry_at`) not yet over is
        // passed over: the provider said when.
        let snapshot = self.record.states.current();
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
        let (mut able, skipped) = match self.able(Walk::listed(paused), ask, now) {
            Ok(found) => found,
            Err(x) => (Walk::none(), x.attempts),
        };
        run.attempts.extend(skipped);
        able.nth(0).is_some().then_some(able)
    }

    /// The paused models for `model`, in the candidate order; `None` when
    /// there are none.
    fn paused_candidates(&self, model: Option<&str>) -> Option<Vec<Candidate>> {
        let choice = Choice::parse(model, &self.aliases);
        let health = self.record.health_now();
        let snapshot = self.record.states.current();
        choose::candidates_in(
            (ModelState::Paused, choose::Costs::Read),
            &choice,
            &self.providers,
            &self.aliases,
            |k| snapshot.state_of(k),
            self.ranking(&health),
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
        let down = self.telemetry.reach.unreachable();
        let snapshot = self.record.states.current();
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
        if self.record.reads_shared() {
            if self.telemetry.first_shared_evidence() {
                eprintln!(
                    "route: {key} served in degraded mode; with a shared record it stays paused here until the fleet's check (or check --paused) probes it"
                );
            }
            return;
        }
        let (dir, key, now) = (self.stats_dir.clone(), key.to_string(), self.clock.now());
        let states = self.record.states.clone();
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
    /// key, and (unless `order = "priority"`) its cost is at most
    /// [`AFFINITY_FACTOR`] times the best candidate's with a figure.
    fn previous_first(&self, walk: &mut Walk, ask: &Ask, now: DateTime<Utc>) {
        let Some(conv) = &ask.conversation else {
            return;
        };
        let Some(i) = lock(&self.affinity)
            .get(conv, now)
            .and_then(|prev| walk.place_of(prev))
        else {
            return;
        };
        let c = walk.candidate(i);
        let benched = {
            let st = self.ledger.lock();
            targets(&c.provider, &c.model)
                .iter()
                .all(|t| st.cooldowns.blocked(t, now).is_some())
        };
        if !benched && !self.affinity_yields(walk, i) {
            walk.put_first(i);
        }
    }

    /// True when the conversation's previous model, `candidates[i]`, has
    /// become slower than the best candidate by more than
    /// [`AFFINITY_FACTOR`], by the measured cost (candidates without any
    /// figure yet are not compared: exploring them is no reason to leave).
    fn affinity_yields(&self, walk: &Walk, i: u32) -> bool {
        if self.settings.order == crate::catalog::Order::Priority {
            return false;
        }
        let mine = walk.cost(i);
        let best = walk.best_known();
        best.is_finite() && mine > AFFINITY_FACTOR * best
    }

    /// The candidates that can take `ask`, known able first, then unknown
    /// ([`bands`]), each band in the order given; and a `skip:<need>`
    /// attempt for each known unable. When none can, the request is
    /// refused as one no active model could ever take
    /// ([`RouteError::Incapable`], or [`RouteError::ContextTooSmall`] when
    /// the prompt is what none can hold); the caller counts it. Each
    /// candidate's `max_tokens` is clamped to its output cap when the walk
    /// reaches it.
    ///
    /// A plain request (no need, not OpenAI-only) whose prompt fits every
    /// window the catalog gives its candidates and every window an
    /// upstream stated keeps its walk as it is: no candidate is looked at.
    fn able(
        &self,
        mut walk: Walk,
        ask: &Ask,
        now: DateTime<Utc>,
    ) -> std::result::Result<(Walk, Vec<Attempt>), Exhausted> {
        if ask.needs.is_empty()
            && ask.openai_only.is_none()
            && walk.list().fits(ask.prompt_tokens)
            && !self
                .ledger
                .lock()
                .verdicts
                .any_window_below(ask.prompt_tokens, now)
        {
            return Ok((walk, Vec::new()));
        }
        let order = walk.all();
        let active = order.len();
        // Only a request with a capability need looks at the probes.
        let probed = ask
            .needs
            .iter()
            .any(|n| crate::capabilities::Capability::of_need(*n).is_some())
            .then(|| self.record.probed());
        let mut able = Vec::new();
        let mut unknown = Vec::new();
        let mut skipped = Vec::new();
        let mut needs = Vec::new();
        let mut reasons = Vec::new();
        {
            let st = self.ledger.lock();
            for i in order {
                let c = walk.candidate(i);
                let band = match self.judge(c, ask, &st.verdicts, probed.as_deref(), now) {
                    Ability::Unable(need, why) => {
                        tracing::debug!(model = %c.key(), need = need.as_str(), why = %why, "route: skipped, cannot take it");
                        self.telemetry.count_skip(c, need.as_str());
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
                match band {
                    Ability::Unknown => unknown.push(i),
                    _ => able.push(i),
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
        Ok((walk.only(able), skipped))
    }

    /// The `max_tokens` to send to `c` instead of the request's: its
    /// output cap (the catalog's or one an upstream stated), when the
    /// request asks for more. A request with none asks a dialect that
    /// requires a `max_tokens` for its default.
    fn clamp(&self, c: &Candidate, ask: &Ask, now: DateTime<Utc>) -> Option<u32> {
        let asked = ask
            .max_tokens
            .or_else(|| dialect::wire(c.provider.provider.dialect).default_max_tokens())?;
        let learned = {
            let st = self.ledger.lock();
            (!st.verdicts.is_empty())
                .then(|| st.verdicts.output_cap(c.id.as_str(), now))
                .flatten()
        };
        let cap = [
            c.provider.provider.info(&c.model).max_output_tokens,
            learned,
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

    /// Take in what other instances learned about models (off the request
    /// path: the server's health poller calls it).
    pub async fn sync_verdicts(&self) {
        self.ledger.sync_verdicts(self.clock.now()).await;
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
        let start = self
            .rotation
            .get(c.provider_index)
            .map_or(0, |r| r.fetch_add(1, Ordering::Relaxed))
            % p.keys.len();
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
        self.ledger
            .record_late_failure(target, err, self.clock.now());
    }

    /// Save the route state if it changed since the last save (never for a
    /// shared instance: its state is in Redis). A save that fails leaves
    /// it marked changed, so that the next save (at the next change, or
    /// at shutdown) tries again.
    pub fn save_if_dirty(&self) -> Result<()> {
        self.ledger.save_if_dirty(&self.stats_dir, self.clock.now())
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
    ///
    /// With `timing`, the stream's end is the model's total time and a
    /// failure in it an error, in its measured figures ([`Speed`]).
    pub fn watch_stream<S: Stream<Item = StreamEvent>>(
        self: &Arc<Self>,
        target: Target,
        reservation: Option<Reservation>,
        prompt_tokens: u64,
        timing: Option<Timing>,
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
                engine.stream_failed(timing);
                let msg = format!("the upstream failed mid-stream: {msg}");
                engine.record_late_failure(&target, ErrorClass::ServerError, msg.clone());
                StreamEvent::Failed(msg)
            }
            StreamEvent::Stalled => {
                engine.stream_failed(timing);
                let msg = format!("the upstream sent nothing for {idle}");
                engine.record_late_failure(&target, ErrorClass::Timeout, msg.clone());
                StreamEvent::Failed(msg)
            }
            // A stream that ended without reporting its usage keeps its
            // estimate: reasoning the upstream never streamed was billed
            // too, so the characters seen would undercount it.
            StreamEvent::Done => {
                if let Some(t) = timing {
                    let now = engine.clock.now().timestamp_millis();
                    engine
                        .speed
                        .ended(t.slot, t.sent.elapsed().as_secs_f64(), now);
                }
                tally.settled = true;
                StreamEvent::Done
            }
            other => {
                tally.count(&other);
                other
            }
        })
    }

    fn stream_failed(&self, timing: Option<Timing>) {
        if let Some(t) = timing {
            let now = self.clock.now().timestamp_millis();
            self.speed.failed(t.slot, None, now);
        }
    }

    /// The stats directory the engine reads and writes.
    pub fn stats_dir(&self) -> &std::path::Path {
        &self.stats_dir
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
            self.engine.ledger.correct_tokens(r, used);
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
            self.engine.ledger.correct_tokens(&mut r, used);
        }
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
