//! One request's run through its candidates, in named steps, so that each
//! can be read and tested alone: [`Picker::next`] picks the next candidate
//! and key, [`Run::admit`] decides whether to send to it (benched, at a
//! limit, out of attempts or time), [`Run::send_one`] makes one attempt,
//! [`Run::account`] and [`Run::record_outcome`] learn from it, and
//! [`Run::exhausted`] says why nothing served. [`Engine::route`] strings
//! them together.

use std::collections::HashSet;
use std::future::Future;
use std::time::Duration;

use crate::catalog::ApiKey;
use crate::route::cooldown::{Action, Target};
use crate::route::domain::RouteError;
use crate::route::metrics::AttemptLabels;
use crate::route::shared::Admit;
use crate::upstream::classify::{ErrorClass, UpstreamError};
use crate::usage::limits::{self, LimitRequest, Reservation};

use chrono::{DateTime, Utc};

use crate::route::ask::Ask;

use super::lists::Walk;
use super::{
    Attempt, AttemptClass, Candidate, Engine, Exhausted, Sent, Served, attempt_labels, key_label,
};

/// The candidates in order, each with its keys in turn.
pub(super) struct Picker<'a> {
    walk: Walk,
    /// The request, for each candidate's `max_tokens` clamp.
    ask: &'a Ask,
    now: DateTime<Utc>,
    next: usize,
    current: Option<Candidate>,
    keys: std::vec::IntoIter<(Option<ApiKey>, Target)>,
}

impl<'a> Picker<'a> {
    pub(super) fn new(walk: Walk, ask: &'a Ask, now: DateTime<Utc>) -> Picker<'a> {
        Picker {
            walk,
            ask,
            now,
            next: 0,
            current: None,
            keys: Vec::new().into_iter(),
        }
    }

    /// The next candidate and key to try. A candidate whose provider is in
    /// `skip` when it is reached is passed over whole; its keys are
    /// rotated only when it is reached, so a request that never gets
    /// there leaves its turn alone. A candidate is taken from the walk
    /// when reached, its `max_tokens` clamped to its output cap then.
    pub(super) fn next(
        &mut self,
        engine: &Engine,
        skip: &HashSet<String>,
    ) -> Option<(Candidate, Option<ApiKey>, Target)> {
        loop {
            if let Some(c) = &self.current
                && let Some((key, target)) = self.keys.next()
            {
                return Some((c.clone(), key, target));
            }
            let place = self.walk.nth(self.next)?;
            self.next += 1;
            let c = self.walk.candidate(place);
            if skip.contains(&c.provider.provider.name) {
                self.current = None;
                continue;
            }
            let mut c = c.clone();
            c.max_tokens = engine.clamp(&c, self.ask, self.now);
            self.keys = engine.rotated_keys(&c).into_iter();
            self.current = Some(c);
        }
    }

    /// Leave the current candidate's other keys untried.
    pub(super) fn next_candidate(&mut self) {
        self.current = None;
    }
}

/// What admission decided for one candidate and key.
#[derive(Debug)]
pub(super) enum Admission {
    /// Passed over, benched or at a limit; the trail says which.
    Skipped,
    /// Out of attempts or time: try nothing more.
    Stop,
    /// Send, counted against the limits as this.
    Send(Reservation),
}

/// What the run does after an attempt.
#[derive(Debug)]
pub(super) enum AfterAttempt<T> {
    Served(Served<T>),
    /// The request itself is at fault: answer now, try nothing else.
    Rejected(Exhausted),
    NextKey,
    NextCandidate,
}

/// One request's progress.
pub(super) struct Run<'e> {
    engine: &'e Engine,
    /// The request, for the error when no window holds its prompt.
    pub(super) ask: Option<&'e crate::route::ask::Ask>,
    /// The request's token estimate for the candidate at hand.
    pub(super) tokens: u64,
    started: tokio::time::Instant,
    /// The trail so far, `skip:<need>` entries first.
    pub(super) attempts: Vec<Attempt>,
    /// Attempts sent so far.
    sent: u32,
    /// Providers passed over for the rest of the request.
    pub(super) skip: HashSet<String>,
    /// Every target reached, for the retry time of the exhaustion.
    targets: Vec<Target>,
    /// The last failure, counted as a fallback once another attempt goes.
    pending_fallback: Option<AttemptLabels>,
    /// Candidates passed over because their dialect cannot express the
    /// request ([`Run::not_sent`]).
    unbuildable: u32,
    /// Sent attempts refused for a capability, and the last such refusal:
    /// when every attempt was one, the upstreams' 400 is the answer.
    refusals: u32,
    last_refusal: Option<UpstreamError>,
    /// Of those, the refusals of a prompt over the context window.
    context_refusals: u32,
    /// The attempt at hand opened a stream ([`super::Sent::streamed`]).
    pub(super) streamed: bool,
}

impl<'e> Run<'e> {
    pub(super) fn new(engine: &'e Engine, tokens: u64) -> Run<'e> {
        Run {
            engine,
            ask: None,
            tokens,
            started: tokio::time::Instant::now(),
            attempts: Vec::new(),
            sent: 0,
            skip: HashSet::new(),
            targets: Vec::new(),
            pending_fallback: None,
            refusals: 0,
            last_refusal: None,
            context_refusals: 0,
            unbuildable: 0,
            streamed: false,
        }
    }

    /// Whether to send to `c` with `key` now: not while it is benched, nor
    /// when it would exceed a limit (both recorded in the trail), nor once
    /// the attempts or the time budget are spent.
    pub(super) async fn admit(
        &mut self,
        c: &Candidate,
        key: Option<&ApiKey>,
        target: &Target,
    ) -> Admission {
        let e = self.engine;
        self.targets.push(target.clone());
        let now = e.clock.now();
        // The first attempt and the first retry always run.
        let out_of_attempts = self.sent >= e.settings.max_attempts
            || (self.sent >= 2 && self.started.elapsed() >= e.settings.time_budget);
        let limits = limits::effective(&c.provider.provider, &c.model);
        let req = LimitRequest {
            target,
            limits: &limits,
            tokens: self.tokens,
        };
        // Shared: benches and limits in one round trip to Redis.
        let admitted = match e.ledger.shared() {
            Some(s) if !out_of_attempts => s.admit(&req, now).await.ok(),
            _ => None,
        };
        let benched = match &admitted {
            Some(Admit::Benched(b)) => {
                e.ledger.lock().cooldowns.insert(b.clone(), now);
                Some(b.clone())
            }
            Some(_) => None,
            None => e.ledger.lock().cooldowns.blocked(target, now).cloned(),
        };
        if let Some(b) = benched {
            tracing::debug!(
                model = %c.key(),
                key = key.map(key_label).as_deref(),
                reason = %b.reason,
                until = %crate::time::format_ts(b.until),
                "route: skipped, cooling down"
            );
            e.telemetry.count_skip(c, "cooldown");
            self.attempts.push(Attempt {
                model: c.key(),
                key: key.map(key_label),
                class: AttemptClass::Cooldown(b.reason.clone()),
                status: None,
                message: None,
                retry_at: Some(b.until),
            });
            return Admission::Skipped;
        }
        if out_of_attempts {
            return Admission::Stop;
        }
        // Stay inside every limit: skip, don't send.
        let checked = match admitted {
            Some(Admit::Limited(hit)) => Err(hit),
            Some(Admit::Counted(r)) => {
                // Mirrored, for the fallback: this instance's own requests.
                let _ = e.ledger.lock().limits.check_and_count(&req, now);
                Ok(r)
            }
            _ => {
                let probes = e.ledger.check_probes.current();
                e.ledger
                    .lock()
                    .limits
                    .check_and_count_with(&req, &[&probes.budget], now)
            }
        };
        match checked {
            Ok(r) => {
                if r.counted() {
                    e.ledger.mark_dirty();
                }
                Admission::Send(r)
            }
            Err(hit) => {
                tracing::debug!(
                    model = %c.key(),
                    limit = %AttemptClass::Limit(hit.kind),
                    scope = %hit.scope,
                    until = %crate::time::format_ts(hit.until),
                    "route: skipped, at a limit"
                );
                e.telemetry.count_skip(c, hit.kind.as_str());
                self.attempts.push(Attempt {
                    model: c.key(),
                    key: key.map(key_label),
                    class: AttemptClass::Limit(hit.kind),
                    status: None,
                    message: Some(format!(
                        "{} full until {}",
                        hit.scope,
                        crate::time::format_ts(hit.until)
                    )),
                    retry_at: Some(hit.until),
                });
                Admission::Skipped
            }
        }
    }

    /// Send one attempt with `send`, counted; returns what it produced and
    /// how long it took.
    pub(super) async fn send_one<T, F, Fut>(
        &mut self,
        c: &Candidate,
        key: &Option<ApiKey>,
        send: &mut F,
    ) -> (Sent<T>, Duration)
    where
        F: FnMut(Candidate, Option<ApiKey>) -> Fut,
        Fut: Future<Output = Sent<T>>,
    {
        let e = self.engine;
        self.sent += 1;
        if let Some(prev) = self.pending_fallback.take() {
            e.telemetry.metrics.fallbacks.get_or_create(&prev).inc();
        }
        tracing::debug!(
            model = %c.key(),
            key = key.as_ref().map(key_label).as_deref(),
            attempt = self.sent,
            "route: attempt"
        );
        let t0 = std::time::Instant::now();
        let sent = send(c.clone(), key.clone()).await;
        let took = t0.elapsed();
        e.telemetry.count_attempt(c, &sent.result, took);
        (sent, took)
    }

    /// An attempt that was never sent (its dialect cannot express the
    /// request): uncount it, give its reservation back, and leave
    /// `skip:dialect` in the trail.
    pub(super) fn not_sent(
        &mut self,
        c: &Candidate,
        reservation: &mut Reservation,
        err: Option<UpstreamError>,
    ) {
        let e = self.engine;
        self.sent -= 1;
        if reservation.counted() && !reservation.is_shared() {
            e.ledger.lock().limits.correct(reservation, 0);
        } else if reservation.is_shared()
            && let Some(s) = e.ledger.shared().cloned()
        {
            let mut r = reservation.clone();
            tokio::spawn(async move {
                let _ = s.correct(&mut r, 0).await;
            });
        }
        tracing::debug!(model = %c.key(), "route: not sent, the dialect cannot express the request");
        self.attempts.push(Attempt {
            model: c.key(),
            key: None,
            class: AttemptClass::Unbuildable,
            status: None,
            message: err.map(|e| e.message),
            retry_at: None,
        });
        self.unbuildable += 1;
    }

    /// Learn limits from an attempt's headers and replace its token
    /// estimate with what it used: nothing for a failure; for a reply,
    /// what the upstream reported (streams: corrected at their end).
    pub(super) fn account<T>(
        &self,
        c: &Candidate,
        target: &Target,
        reservation: &mut Reservation,
        sent: &Sent<T>,
    ) {
        let e = self.engine;
        let used = match &sent.result {
            Err(_) => Some(0),
            Ok(_) => sent.tokens,
        };
        let learned = {
            let mut st = e.ledger.lock();
            let learned = sent
                .headers
                .as_ref()
                .map(|h| {
                    let window = c.provider.provider.requests_header_window;
                    st.limits.learn(target, window, h, e.clock.now())
                })
                .unwrap_or_default();
            if let Some(used) = used
                && reservation.counted()
                && !reservation.is_shared()
            {
                st.limits.correct(reservation, used);
            }
            learned
        };
        if let Some(s) = e.ledger.shared() {
            // Off the request path: the reply does not wait for Redis to
            // store learned limits or a corrected token count. They land
            // one round trip after it, in order.
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
    }

    /// Record what an attempt came to: a success resets the target's
    /// ladder and serves; a failure is benched by the cooldown policy,
    /// which also says where to go next.
    pub(super) async fn record_outcome<T>(
        &mut self,
        c: &Candidate,
        key: Option<&ApiKey>,
        target: Target,
        reservation: Reservation,
        result: Result<T, UpstreamError>,
        took: Duration,
    ) -> AfterAttempt<T> {
        let e = self.engine;
        let err = match result {
            Ok(value) => {
                tracing::debug!(model = %c.key(), ms = took.as_millis() as u64, "route: served");
                e.telemetry.count_request("served");
                let now_ms = e.clock.now().timestamp_millis();
                e.speed
                    .served(c.slot, took.as_secs_f64(), self.streamed, now_ms);
                let sent = std::time::Instant::now();
                let timing = super::Timing {
                    slot: c.slot,
                    sent: sent.checked_sub(took).unwrap_or(sent),
                };
                e.ledger
                    .lock()
                    .cooldowns
                    .record_success(&target, e.clock.now());
                e.ledger.traffic(&c.key(), None, e.clock.now());
                if let Some(s) = e.ledger.shared().cloned() {
                    // Off the request path: a ladder to reset is rare.
                    let t = target.clone();
                    tokio::spawn(async move { s.success(&t).await });
                }
                return AfterAttempt::Served(Served {
                    via: c.key(),
                    target,
                    timing,
                    attempts: std::mem::take(&mut self.attempts),
                    reservation: reservation.counted().then_some(reservation),
                    clamped: c
                        .max_tokens
                        .map(|n| format!("max_tokens→{n}"))
                        .into_iter()
                        .collect(),
                    value,
                });
            }
            Err(err) => err,
        };
        let decision = e.ledger.record_failure(&target, &err, e.clock.now()).await;
        if let (Some(a), Some(b)) = (e.telemetry.alerts(), &decision.bench) {
            let error = crate::notify::decide::clean_error(&e.redactor, &err.message);
            a.benched(&target, b, Some(error), e.clock.now());
        }
        if err.class.is_capability() {
            e.ledger.learn_verdict(c.key(), &err, e.clock.now());
            self.refusals += 1;
            if err.class == ErrorClass::ContextLength {
                self.context_refusals += 1;
            }
            self.last_refusal = Some(err.clone());
        }
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
        // What says something of the model, for `check`: not a client's
        // fault, nor a need the model lacks.
        if decision.action != Action::ReturnToClient && !err.class.is_capability() {
            e.ledger
                .traffic(&c.key(), Some(err.class.as_str()), e.clock.now());
            let waited = (err.class == ErrorClass::Timeout).then_some(took.as_secs_f64());
            e.speed
                .failed(c.slot, waited, e.clock.now().timestamp_millis());
        } else {
            e.ledger.mark_dirty();
        }
        self.attempts.push(Attempt {
            model: c.key(),
            key: key.map(key_label),
            class: AttemptClass::Failed(err.class),
            status: err.status,
            message: Some(err.message.clone()),
            retry_at: decision.bench.as_ref().map(|b| b.until),
        });
        self.pending_fallback = Some(attempt_labels(c, err.class.as_str()));
        match decision.action {
            Action::ReturnToClient => {
                e.telemetry.count_request("rejected");
                AfterAttempt::Rejected(Exhausted {
                    error: RouteError::client_fault(err.class, err.status, err.message),
                    attempts: std::mem::take(&mut self.attempts),
                })
            }
            Action::SkipProvider => {
                self.skip.insert(c.provider.provider.name.clone());
                AfterAttempt::NextCandidate
            }
            // A model-level failure: the other keys would fail the same way.
            Action::TryNext
                if err.class == ErrorClass::ModelNotFound || err.class.is_capability() =>
            {
                AfterAttempt::NextCandidate
            }
            Action::TryNext => AfterAttempt::NextKey,
        }
    }

    /// Why nothing served: everything is cooling down or at a limit when
    /// nothing was sent and something names a time, or when every target
    /// is benched now; the upstreams' own refusal when every attempt sent
    /// was refused for a capability; otherwise every attempt failed.
    pub(super) fn exhausted(self) -> Exhausted {
        let e = self.engine;
        let now = e.clock.now();
        let retry_at = e
            .ledger
            .lock()
            .cooldowns
            .earliest_retry(self.targets.iter(), now)
            .filter(|t| *t > now);
        let limit_wait = self
            .attempts
            .iter()
            .filter(|a| matches!(a.class, AttemptClass::Limit(_)))
            .filter_map(|a| a.retry_at)
            .filter(|t| *t > now)
            .min();
        let retry_at = match (retry_at, limit_wait) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // A candidate that could take the request was passed over for
        // time (benched, or at a limit): waiting would serve it.
        let waited = self.attempts.iter().any(|a| a.class.waits());
        let cooling = retry_at.is_some()
            && (self.sent == 0
                || (waited && self.refusals == self.sent)
                || self
                    .targets
                    .iter()
                    .all(|t| e.ledger.lock().cooldowns.blocked(t, now).is_some()));
        let unbuildable: Vec<String> = self
            .attempts
            .iter()
            .filter(|a| a.class == AttemptClass::Unbuildable)
            .map(|a| format!("{}: {}", a.model, a.message.as_deref().unwrap_or("")))
            .collect();
        let error = match (retry_at, self.last_refusal) {
            (Some(retry_at), _) if cooling => RouteError::AllCoolingDown { retry_at },
            // Nothing was sent, and some candidate's dialect could not
            // express the request: no upstream saw it.
            (_, None) if self.sent == 0 && self.unbuildable > 0 => RouteError::Incapable {
                needs: Vec::new(),
                active: self.unbuildable as usize,
                reasons: unbuildable,
            },
            // Every model sent to said the prompt is too long, and every
            // other was known too small: none can hold it, and some
            // window is known to say so with, smaller than the prompt
            // (else the upstream's own words are the better answer: a
            // window that holds the prompt but not its answer, say).
            (_, Some(_))
                if self.context_refusals == self.sent
                    && let Some(too_long) = self.ask.map(|a| e.too_long(a))
                    && matches!(
                        &too_long,
                        RouteError::ContextTooSmall {
                            prompt_tokens,
                            largest: Some((w, _)),
                        } if w < prompt_tokens
                    ) =>
            {
                too_long
            }
            // Every model sent to said it cannot take the request: that is
            // the answer, not a failure of the upstreams.
            (_, Some(r)) if self.refusals == self.sent => {
                RouteError::client_fault(r.class, r.status, r.message)
            }
            _ => RouteError::AllFailed {
                attempts: self.sent,
                retry_at,
            },
        };
        e.telemetry.count_request("exhausted");
        Exhausted {
            error,
            attempts: self.attempts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{Catalog, test_table};
    use crate::clock::Clock;
    use crate::route::ask::Ask;
    use crate::upstream::dialect::ChatRequest;

    // Two keyless providers on a port nothing listens on: no step here
    // sends anything; `send` is a closure.
    fn catalog() -> String {
        test_table(
            "a",
            &["m", "n"],
            "[providers.model_limits]\n\"n\" = { rpm = 1 }",
        ) + &test_table(
            "b",
            &["m", "t"],
            "[providers.model_limits]\n\"t\" = { tpm = 100 }",
        )
    }

    struct Fixture {
        dir: tempfile::TempDir,
        engine: Engine,
    }

    /// An engine on the test clock, which [`Fixture::advance`] moves.
    fn fixture() -> Fixture {
        fixture_with(&catalog())
    }

    fn fixture_with(catalog: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::from_toml_str(catalog, "test.toml").unwrap();
        // These tests are about fallback, not order: the old order keeps
        // them independent of how fast a closure answers (the measured
        // order has its own tests, and `fixture_ordered`).
        let settings = crate::catalog::RouteSettings {
            order: crate::catalog::Order::Priority,
            ..catalog.route.clone()
        };
        let engine = Engine::new(
            &catalog,
            settings,
            dir.path().to_path_buf(),
            crate::upstream::http::client().unwrap(),
            Clock::with_offset_file(dir.path().join("clock")),
        )
        .unwrap();
        Fixture { dir, engine }
    }

    impl Fixture {
        fn advance(&self, secs: u64) {
            std::fs::write(self.dir.path().join("clock"), secs.to_string()).unwrap();
        }

        fn candidate(&self, model: &str) -> Candidate {
            self.engine.candidates(Some(model)).unwrap().remove(0)
        }
    }

    fn target(c: &Candidate) -> Target {
        Target::new(&c.provider.provider.name, &c.model)
    }

    fn err(class: ErrorClass, status: u16) -> UpstreamError {
        UpstreamError {
            status: Some(status),
            class,
            retry_after: None,
            daily: false,
            message: "boom".into(),
        }
    }

    fn send(r: &Admission) -> Reservation {
        match r {
            Admission::Send(r) => r.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn pick_passes_over_skipped_providers_and_abandoned_keys() {
        let f = fixture();
        let cs: Vec<Candidate> = ["a::m", "a::n", "b::m"]
            .iter()
            .map(|m| f.candidate(m))
            .collect();
        let mut skip = HashSet::new();
        let plain = ask(None, r#"{"messages":[{"role":"user","content":"hi"}]}"#);
        let now = f.engine.clock.now();
        let mut picker = Picker::new(Walk::listed(cs.clone()), &plain, now);
        let (c, key, t) = picker.next(&f.engine, &skip).unwrap();
        assert_eq!(
            (c.key(), key.is_none(), t),
            ("a::m".into(), true, target(&c))
        );
        // A provider skipped from here on: its other models are not tried.
        skip.insert("a".to_string());
        assert_eq!(picker.next(&f.engine, &skip).unwrap().0.key(), "b::m");
        assert!(picker.next(&f.engine, &skip).is_none());

        let mut picker = Picker::new(Walk::listed(cs), &plain, now);
        picker.next(&f.engine, &HashSet::new()).unwrap();
        picker.next_candidate();
        assert_eq!(
            picker.next(&f.engine, &HashSet::new()).unwrap().0.key(),
            "a::n"
        );
    }

    #[tokio::test]
    async fn admit_skips_at_a_limit_until_its_window_slides() {
        let f = fixture();
        let c = f.candidate("a::n");
        let mut run = Run::new(&f.engine, 10);
        assert!(send(&run.admit(&c, None, &target(&c)).await).counted());
        assert!(matches!(
            run.admit(&c, None, &target(&c)).await,
            Admission::Skipped
        ));
        let skipped = run.attempts.last().unwrap();
        assert!(
            matches!(skipped.class, AttemptClass::Limit(_)),
            "{skipped:?}"
        );
        assert!(!skipped.failed());
        f.advance(61);
        send(&run.admit(&c, None, &target(&c)).await);
    }

    #[tokio::test]
    async fn admit_skips_a_benched_target_until_its_bench_ends() {
        let f = fixture();
        let c = f.candidate("a::m");
        let mut run = Run::new(&f.engine, 10);
        let r = send(&run.admit(&c, None, &target(&c)).await);
        let limited = UpstreamError {
            retry_after: Some(Duration::from_secs(30)),
            ..err(ErrorClass::RateLimit, 429)
        };
        let next = run
            .record_outcome(
                &c,
                None,
                target(&c),
                r,
                Err::<(), _>(limited),
                Duration::ZERO,
            )
            .await;
        assert!(matches!(next, AfterAttempt::NextKey), "{next:?}");
        assert!(matches!(
            run.admit(&c, None, &target(&c)).await,
            Admission::Skipped
        ));
        assert_eq!(
            run.attempts.last().unwrap().class.to_string(),
            "cooldown:rate_limit"
        );
        f.advance(31);
        send(&run.admit(&c, None, &target(&c)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn admit_stops_when_the_attempts_or_the_time_are_spent() {
        let mut f = fixture();
        f.engine.settings.max_attempts = 3;
        let c = f.candidate("a::m");
        let mut run = Run::new(&f.engine, 10);
        let mut fail = |_c, _k| async { Sent::<()>::failed(err(ErrorClass::Transport, 502)) };
        for _ in 0..2 {
            send(&run.admit(&c, None, &target(&c)).await);
            run.send_one(&c, &None, &mut fail).await;
        }
        // The first two always run; after them the time budget counts.
        tokio::time::advance(f.engine.settings.time_budget).await;
        assert!(matches!(
            run.admit(&c, None, &target(&c)).await,
            Admission::Stop
        ));
        let mut run = Run::new(&f.engine, 10);
        for _ in 0..3 {
            send(&run.admit(&c, None, &target(&c)).await);
            run.send_one(&c, &None, &mut fail).await;
        }
        assert!(matches!(
            run.admit(&c, None, &target(&c)).await,
            Admission::Stop
        ));
    }

    #[tokio::test]
    async fn send_one_counts_the_attempt_and_passes_the_candidate() {
        let f = fixture();
        let c = f.candidate("b::m");
        let mut run = Run::new(&f.engine, 10);
        let mut seen = Vec::new();
        let mut ok = |c: Candidate, _k| {
            seen.push(c.key());
            async { Sent::<u8>::failed(err(ErrorClass::Transport, 502)) }
        };
        let (sent, _) = run.send_one(&c, &None, &mut ok).await;
        assert!(sent.result.is_err());
        assert_eq!(run.sent, 1);
        assert_eq!(seen, ["b::m"]);
    }

    #[tokio::test]
    async fn record_outcome_serves_rejects_or_moves_on() {
        let f = fixture();
        let c = f.candidate("a::m");
        let mut run = Run::new(&f.engine, 10);
        let mut outcome = async |result: Result<u8, UpstreamError>| {
            let r = send(&run.admit(&c, None, &target(&c)).await);
            run.record_outcome(&c, None, target(&c), r, result, Duration::ZERO)
                .await
        };
        match outcome(Err(err(ErrorClass::Transport, 502))).await {
            AfterAttempt::NextCandidate => {}
            other => panic!("{other:?}"),
        }
        // Too long for this model, not for every model: the next one.
        match outcome(Err(err(ErrorClass::ContextLength, 413))).await {
            AfterAttempt::NextCandidate => {}
            other => panic!("{other:?}"),
        }
        match outcome(Err(err(ErrorClass::BadRequest, 400))).await {
            AfterAttempt::Rejected(x) => {
                assert_eq!(
                    x.error,
                    RouteError::client_fault(ErrorClass::BadRequest, Some(400), "boom".into())
                );
                assert_eq!(x.attempts.len(), 3);
            }
            other => panic!("{other:?}"),
        }
        match outcome(Ok(7)).await {
            AfterAttempt::Served(s) => {
                assert_eq!((s.via.as_str(), s.value), ("a::m", 7));
                assert!(s.attempts.is_empty());
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn exhausted_is_cooling_when_nothing_was_sent_and_failed_otherwise() {
        let f = fixture();
        let c = f.candidate("a::n");
        let mut run = Run::new(&f.engine, 10);
        // Another request used the minute's one request.
        send(&Run::new(&f.engine, 10).admit(&c, None, &target(&c)).await);
        run.admit(&c, None, &target(&c)).await;
        let x = run.exhausted();
        assert!(
            matches!(x.error, RouteError::AllCoolingDown { retry_at } if retry_at > f.engine.clock.now()),
            "{:?}",
            x.error
        );

        let c = f.candidate("b::m");
        let mut run = Run::new(&f.engine, 10);
        let r = send(&run.admit(&c, None, &target(&c)).await);
        let mut fail = |_c, _k| async { Sent::<()>::failed(err(ErrorClass::Transport, 502)) };
        let (sent, took) = run.send_one(&c, &None, &mut fail).await;
        run.record_outcome(&c, None, target(&c), r, sent.result, took)
            .await;
        let x = run.exhausted();
        assert_eq!(
            x.error,
            RouteError::AllFailed {
                attempts: 1,
                retry_at: None
            }
        );
        assert_eq!(
            x.message(),
            "every candidate failed (1 attempt): b::m=transport"
        );
    }

    #[tokio::test]
    async fn a_refusal_while_a_capable_candidate_waits_is_a_429_not_the_400() {
        let f = fixture();
        let a = f.candidate("a::n");
        // Another request used a::n's one request of the minute.
        send(&Run::new(&f.engine, 10).admit(&a, None, &target(&a)).await);
        let mut run = Run::new(&f.engine, 10);
        assert!(matches!(
            run.admit(&a, None, &target(&a)).await,
            Admission::Skipped
        ));
        let b = f.candidate("b::m");
        let r = send(&run.admit(&b, None, &target(&b)).await);
        let mut refuse = |_c, _k| async { refused("tools are not supported") };
        let (sent, took) = run.send_one(&b, &None, &mut refuse).await;
        run.record_outcome(&b, None, target(&b), r, sent.result, took)
            .await;
        let x = run.exhausted();
        assert!(
            matches!(x.error, RouteError::AllCoolingDown { .. }),
            "{:?}",
            x.error
        );
    }

    #[tokio::test]
    async fn a_stream_dropped_before_its_usage_counts_the_prompt_and_what_it_streamed() {
        use crate::route::send::StreamEvent;
        use crate::upstream::dialect::ReplyDelta;
        use futures_util::StreamExt;
        let f = fixture();
        let engine = std::sync::Arc::new(f.engine);
        let c = engine.candidates(Some("b::t")).unwrap().remove(0);
        // 90 of b::t's 100 tpm reserved: no room for another such request.
        let r = send(&Run::new(&engine, 90).admit(&c, None, &target(&c)).await);
        let chunk = |text: &str| StreamEvent::Delta(ReplyDelta::Text(text.into()));
        // Never-ending, as an upstream still answering when its client
        // goes away: eight characters pass, then the client drops it.
        let events = futures_util::stream::iter(vec![chunk("abcd"), chunk("efgh")])
            .chain(futures_util::stream::pending());
        let mut watched = Box::pin(engine.watch_stream(target(&c), Some(r), 4, None, events));
        watched.next().await.unwrap();
        watched.next().await.unwrap();
        assert!(matches!(
            Run::new(&engine, 90).admit(&c, None, &target(&c)).await,
            Admission::Skipped
        ));
        drop(watched);
        // Now 4 prompt tokens and 2 streamed (8 characters / 4): 6 + 90
        // fits in 100.
        send(&Run::new(&engine, 90).admit(&c, None, &target(&c)).await);
    }

    #[tokio::test]
    async fn a_stream_that_ends_without_usage_keeps_its_estimate() {
        use crate::route::send::StreamEvent;
        use crate::upstream::dialect::ReplyDelta;
        use futures_util::StreamExt;
        let f = fixture();
        let engine = std::sync::Arc::new(f.engine);
        let c = engine.candidates(Some("b::t")).unwrap().remove(0);
        let r = send(&Run::new(&engine, 90).admit(&c, None, &target(&c)).await);
        // A whole answer, no usage: hidden reasoning may have been billed,
        // so the 8 characters seen must not shrink the 90 reserved.
        let events = futures_util::stream::iter(vec![
            StreamEvent::Delta(ReplyDelta::Text("abcdefgh".into())),
            StreamEvent::Done,
        ]);
        let _: Vec<StreamEvent> = engine
            .watch_stream(target(&c), Some(r), 4, None, events)
            .collect()
            .await;
        assert!(matches!(
            Run::new(&engine, 90).admit(&c, None, &target(&c)).await,
            Admission::Skipped
        ));
    }

    #[tokio::test]
    async fn usage_in_a_chunk_with_choices_settles_the_stream() {
        use crate::route::send::StreamEvent;
        use crate::upstream::dialect::{ReplyDelta, Usage};
        use futures_util::StreamExt;
        let f = fixture();
        let engine = std::sync::Arc::new(f.engine);
        let c = engine.candidates(Some("b::t")).unwrap().remove(0);
        let r = send(&Run::new(&engine, 90).admit(&c, None, &target(&c)).await);
        // A forwarded chunk with choices and usage: its usage comes with it
        // (the dialect's stream tests show it), not at an end that may
        // never come.
        let events = futures_util::stream::iter(vec![
            StreamEvent::Delta(ReplyDelta::Text("a".into())),
            StreamEvent::from_delta(ReplyDelta::Usage(Usage {
                input_tokens: Some(4),
                output_tokens: Some(6),
            })),
        ])
        .chain(futures_util::stream::pending());
        let mut watched = Box::pin(engine.watch_stream(target(&c), Some(r), 4, None, events));
        watched.next().await.unwrap();
        watched.next().await.unwrap();
        // Settled at 10 by the chunk: dropping it now changes nothing (the
        // tally would say 5). 10 + 91 is over 100; 10 + 90 fits.
        drop(watched);
        assert!(matches!(
            Run::new(&engine, 91).admit(&c, None, &target(&c)).await,
            Admission::Skipped
        ));
        send(&Run::new(&engine, 90).admit(&c, None, &target(&c)).await);
    }

    #[tokio::test]
    async fn a_watched_stream_corrects_its_tokens_and_counts_a_late_failure() {
        use crate::route::send::StreamEvent;
        use crate::upstream::dialect::{ReplyDelta, Usage};
        use futures_util::StreamExt;
        let f = fixture();
        let engine = std::sync::Arc::new(f.engine);
        let c = engine.candidates(Some("b::t")).unwrap().remove(0);
        let r = send(&Run::new(&engine, 90).admit(&c, None, &target(&c)).await);
        // At the limit until the stream says what it used.
        assert!(matches!(
            Run::new(&engine, 90).admit(&c, None, &target(&c)).await,
            Admission::Skipped
        ));
        let events = futures_util::stream::iter(vec![
            StreamEvent::from_delta(ReplyDelta::Usage(Usage {
                input_tokens: Some(4),
                output_tokens: Some(6),
            })),
            StreamEvent::Failed("cut".into()),
        ]);
        let out: Vec<StreamEvent> = engine
            .watch_stream(target(&c), Some(r), 0, None, events)
            .collect()
            .await;
        assert!(
            matches!(
                &out[0],
                StreamEvent::Usage {
                    tokens: Some(10),
                    ..
                }
            ),
            "{out:?}"
        );
        assert!(
            matches!(&out[1], StreamEvent::Failed(m) if m == "the upstream failed mid-stream: cut"),
            "{out:?}"
        );
        send(&Run::new(&engine, 90).admit(&c, None, &target(&c)).await);
        let stalled = engine
            .watch_stream(
                target(&c),
                None,
                0,
                None,
                futures_util::stream::iter(vec![StreamEvent::Stalled]),
            )
            .collect::<Vec<_>>()
            .await;
        assert!(
            matches!(&stalled[..], [StreamEvent::Failed(m)] if m.starts_with("the upstream sent nothing for")),
            "{stalled:?}"
        );
    }

    // One model per dialect; the OpenAI one documents a small window and
    // cap, and a second OpenAI provider has none.
    const DIALECTS: &str = r#"
        include_default_catalog = false
        [[providers]]
        name = "anth"
        dialect = "anthropic"
        base_url = "http://127.0.0.1:9/v1"
        models = ["c"]
        [[providers]]
        name = "gem"
        dialect = "gemini"
        base_url = "http://127.0.0.1:9/v1"
        models = ["g"]
        [[providers]]
        name = "oai"
        dialect = "openai"
        base_url = "http://127.0.0.1:9/v1"
        models = ["o"]
        [providers.model_info]
        "o" = { context_window = 50, max_output_tokens = 64 }
        [[providers]]
        name = "big"
        dialect = "openai"
        base_url = "http://127.0.0.1:9/v1"
        models = ["b"]
    "#;

    fn ask(model: Option<&str>, body: &str) -> Ask {
        Ask::new(
            model,
            &ChatRequest::from_openai_json(body.as_bytes()).unwrap(),
        )
    }

    fn ok<T>(v: T) -> Sent<T> {
        Sent {
            result: Ok(v),
            headers: None,
            tokens: None,
            unsent: false,
            streamed: false,
        }
    }

    fn refused(message: &str) -> Sent<String> {
        Sent::failed(UpstreamError {
            message: format!("HTTP 400: {message}"),
            ..err(ErrorClass::Unsupported, 400)
        })
    }

    fn classes(attempts: &[Attempt]) -> Vec<String> {
        attempts
            .iter()
            .map(|a| format!("{}={}", a.model, a.class))
            .collect()
    }

    /// Route `ask` with `reply` deciding each attempt; the models tried,
    /// in order, with the `max_tokens` each was given.
    async fn route_with(
        engine: &Engine,
        ask: &Ask,
        mut reply: impl FnMut(&Candidate) -> Sent<String>,
    ) -> (
        Result<Served<String>, Exhausted>,
        Vec<(String, Option<u32>)>,
    ) {
        let mut tried = Vec::new();
        let out = engine
            .route(ask, |c, _k| {
                tried.push((c.key(), c.max_tokens));
                let sent = reply(&c);
                async move { sent }
            })
            .await;
        (out, tried)
    }

    const TWO: &str = r#"{"messages":[{"role":"user","content":"hi"}],"n":2}"#;

    #[tokio::test]
    async fn what_a_dialect_cannot_carry_is_skipped_before_sending() {
        let f = fixture_with(DIALECTS);
        let (out, tried) = route_with(&f.engine, &ask(None, TWO), |c| ok(c.key())).await;
        let s = out.unwrap();
        assert_eq!(s.via, "oai::o");
        assert_eq!(tried, [("oai::o".to_string(), None)]);
        assert_eq!(classes(&s.attempts), ["anth::c=skip:n", "gem::g=skip:n"]);
        // Nothing was sent to them: no fallback.
        assert_eq!(s.fallbacks(), 0);
        // A prompt over the catalog's window of 50 tokens: skip:context.
        let long = format!(
            r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#,
            "x".repeat(400)
        );
        let (out, tried) = route_with(&f.engine, &ask(Some("o"), &long), |c| ok(c.key())).await;
        let x = out.unwrap_err();
        assert!(tried.is_empty());
        assert_eq!(classes(&x.attempts), ["oai::o=skip:context"]);
        assert_eq!(
            x.error,
            RouteError::ContextTooSmall {
                prompt_tokens: 100,
                largest: Some((50, "oai::o".to_string()))
            }
        );
        assert!(x.error.is_usage_error());
    }

    #[tokio::test]
    async fn none_that_could_ever_take_it_is_a_400_and_capable_but_cooling_a_429() {
        let f = fixture_with(DIALECTS);
        let pinned = ask(Some("anth::c"), TWO);
        let (out, tried) = route_with(&f.engine, &pinned, |c| ok(c.key())).await;
        let x = out.unwrap_err();
        assert!(tried.is_empty());
        assert!(x.error.is_usage_error());
        assert_eq!(
            x.message(),
            "no active model can take this request: it asks for several choices (n > 1), and the one active model cannot return several choices (anth::c: cannot return several choices (the anthropic dialect))"
        );
        assert_eq!(
            crate::route::surface::error::route_error(&x).code,
            "no_capable_model"
        );
        // The OpenAI models could take it, but both are rate limited.
        let limited = || {
            Sent::<String>::failed(UpstreamError {
                retry_after: Some(Duration::from_secs(30)),
                ..err(ErrorClass::RateLimit, 429)
            })
        };
        let (out, tried) = route_with(&f.engine, &ask(None, TWO), |_| limited()).await;
        assert_eq!(tried.len(), 2);
        assert!(out.is_err());
        let (out, tried) = route_with(&f.engine, &ask(None, TWO), |c| ok(c.key())).await;
        let x = out.unwrap_err();
        assert!(tried.is_empty());
        assert!(
            matches!(x.error, RouteError::AllCoolingDown { .. }),
            "{:?}",
            x.error
        );
        assert!(!x.error.is_usage_error());
    }

    #[tokio::test]
    async fn a_capability_400_falls_back_and_is_remembered_for_a_day() {
        let f = fixture_with(DIALECTS);
        // n: 2 leaves the two OpenAI models; oai::o refuses tools.
        let tools = r#"{"messages":[{"role":"user","content":"hi"}],"n":2,"tools":[{"type":"function","function":{"name":"f"}}]}"#;
        let a = ask(None, tools);
        let reply = |c: &Candidate| {
            if c.key() == "oai::o" {
                refused("tools are not supported")
            } else {
                ok(c.key())
            }
        };
        let (out, tried) = route_with(&f.engine, &a, reply).await;
        let s = out.unwrap();
        assert_eq!(s.via, "big::b");
        let names: Vec<&str> = tried.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["oai::o", "big::b"]);
        assert_eq!(s.fallbacks(), 1);
        // The next request with tools passes oai::o over without sending.
        let (out, tried) = route_with(&f.engine, &a, reply).await;
        let s = out.unwrap();
        assert_eq!(tried, [("big::b".to_string(), None)]);
        assert_eq!(
            classes(&s.attempts),
            ["anth::c=skip:n", "gem::g=skip:n", "oai::o=skip:tools"]
        );
        assert_eq!(s.fallbacks(), 0);
        // One without tools still goes there.
        let plain = ask(
            Some("o"),
            r#"{"messages":[{"role":"user","content":"hi"}]}"#,
        );
        assert_eq!(
            route_with(&f.engine, &plain, |c| ok(c.key()))
                .await
                .0
                .unwrap()
                .via,
            "oai::o"
        );
        // Just short of a day it stands; a day after, it is tried again
        // (new conversations, so affinity to big::b plays no part).
        f.advance(24 * 3600 - 1);
        let fresh = |s| a.clone().with_session(Some(s));
        let (_, tried) = route_with(&f.engine, &fresh("one"), reply).await;
        assert_eq!(tried, [("big::b".to_string(), None)]);
        f.advance(24 * 3600);
        let (_, tried) = route_with(&f.engine, &fresh("two"), reply).await;
        assert_eq!(tried[0].0, "oai::o");
    }

    #[tokio::test]
    async fn when_every_model_sent_to_refuses_the_upstreams_400_is_the_answer() {
        let f = fixture_with(DIALECTS);
        let tools = r#"{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}"#;
        let (out, _) = route_with(&f.engine, &ask(Some("o"), tools), |_| {
            refused("tools are not supported")
        })
        .await;
        let x = out.unwrap_err();
        assert!(x.error.is_usage_error(), "{:?}", x.error);
        assert!(
            x.message().contains("tools are not supported"),
            "{}",
            x.message()
        );
    }

    #[tokio::test]
    async fn max_tokens_is_clamped_to_the_cap_and_reserved_up_to_the_setting() {
        let f = fixture_with(DIALECTS);
        let body = |n: Option<u32>| match n {
            Some(n) => format!(
                r#"{{"messages":[{{"role":"user","content":"12345678"}}],"max_tokens":{n}}}"#
            ),
            None => r#"{"messages":[{"role":"user","content":"12345678"}]}"#.to_string(),
        };
        let (out, tried) = route_with(
            &f.engine,
            &ask(Some("o"), &body(Some(100))),
            |c| ok(c.key()),
        )
        .await;
        let s = out.unwrap();
        assert_eq!(tried, [("oai::o".to_string(), Some(64))]);
        assert_eq!(s.clamped, ["max_tokens→64"]);
        // Under the cap: sent as asked, nothing reported.
        let (out, tried) =
            route_with(&f.engine, &ask(Some("o"), &body(Some(10))), |c| ok(c.key())).await;
        assert_eq!(tried, [("oai::o".to_string(), None)]);
        assert!(out.unwrap().clamped.is_empty());
        // Reserved: the prompt (2) and the answer as clamped, at most the
        // setting, which is also what a request without max_tokens gets.
        let e = &f.engine;
        let mut c = f.candidate("oai::o");
        c.max_tokens = Some(64);
        assert_eq!(e.reserved_tokens(&c, &ask(None, &body(Some(100)))), 2 + 64);
        let c = f.candidate("big::b");
        assert_eq!(e.reserved_tokens(&c, &ask(None, &body(None))), 2 + 4096);
        assert_eq!(
            e.reserved_tokens(&c, &ask(None, &body(Some(10_000)))),
            2 + 4096
        );
        assert_eq!(e.reserved_tokens(&c, &ask(None, &body(Some(300)))), 2 + 300);
        // A cap an upstream states is learned and applied next time.
        let (out, _) = route_with(&f.engine, &ask(Some("b"), &body(Some(100))), |_| {
            refused("max_tokens must be less than or equal to 30")
        })
        .await;
        assert!(out.is_err());
        let (out, tried) = route_with(
            &f.engine,
            &ask(Some("b"), &body(Some(100))),
            |c| ok(c.key()),
        )
        .await;
        assert_eq!(tried, [("big::b".to_string(), Some(30))]);
        assert_eq!(out.unwrap().clamped, ["max_tokens→30"]);
    }

    #[tokio::test]
    async fn a_conversation_goes_back_to_its_model_while_it_is_healthy() {
        let f = fixture();
        let turn = ask(
            Some("m"),
            r#"{"messages":[{"role":"user","content":"hi"}]}"#,
        );
        // a::m fails the first turn, b::m serves it.
        let (out, _) = route_with(&f.engine, &turn, |c| {
            if c.key() == "a::m" {
                Sent::failed(err(ErrorClass::Transport, 502))
            } else {
                ok(c.key())
            }
        })
        .await;
        assert_eq!(out.unwrap().via, "b::m");
        // The next turn tries b::m first, though a::m works again.
        let (out, tried) = route_with(&f.engine, &turn, |c| ok(c.key())).await;
        assert_eq!(out.unwrap().via, "b::m");
        assert_eq!(tried[0].0, "b::m");
        // Another conversation keeps the usual order.
        let other = ask(
            Some("m"),
            r#"{"messages":[{"role":"user","content":"yo"}]}"#,
        );
        assert_eq!(
            route_with(&f.engine, &other, |c| ok(c.key())).await.1[0].0,
            "a::m"
        );
        // Past the TTL after the last turn, the usual order again.
        f.advance(30 * 60);
        let (_, tried) = route_with(&f.engine, &turn, |c| ok(c.key())).await;
        assert_eq!(tried[0].0, "a::m");
        // Benched, the previous model is not put first.
        let limited = UpstreamError {
            retry_after: Some(Duration::from_secs(300)),
            ..err(ErrorClass::RateLimit, 429)
        };
        let (out, _) = route_with(&f.engine, &other, |c| ok(c.key())).await;
        assert_eq!(out.unwrap().via, "a::m");
        let c = f.candidate("a::m");
        let mut run = Run::new(&f.engine, 1);
        let r = send(&run.admit(&c, None, &target(&c)).await);
        run.record_outcome(
            &c,
            None,
            target(&c),
            r,
            Err::<(), _>(limited),
            Duration::ZERO,
        )
        .await;
        let (out, tried) = route_with(&f.engine, &other, |c| ok(c.key())).await;
        assert_eq!(out.unwrap().via, "b::m");
        assert_eq!(tried[0].0, "b::m");
    }

    const TOOLS: &str = r#"{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}"#;

    fn write_caps(f: &Fixture, text: &str) {
        std::fs::write(f.dir.path().join(crate::capabilities::FINDINGS_FILE), text).unwrap();
    }

    #[tokio::test]
    async fn known_able_goes_first_unknown_next_and_known_unable_never() {
        let f = fixture_with(
            &("include_default_catalog = false\n".to_string()
                + &test_table("a", &["m", "n"], "")
                + &test_table("b", &["m", "t"], "")),
        );
        let seen = crate::time::format_ts(f.engine.clock.now() - chrono::TimeDelta::hours(1));
        write_caps(
            &f,
            &format!(
                r#"{{"a::m": {{"tools": {{"verdict": "no", "seen": "{seen}", "reason": "wrong_answer: text"}}}},
                    "b::t": {{"tools": {{"verdict": "yes", "seen": "{seen}"}}}}}}"#
            ),
        );
        assert!(f.engine.record.capabilities.refresh().unwrap());
        let a = ask(None, TOOLS);
        // b::t, known able, refuses tools all the same: marked, and the
        // request goes on to the unknown band in its order.
        let reply = |c: &Candidate| {
            if c.key() == "b::t" {
                refused("tools are not supported")
            } else {
                ok(c.key())
            }
        };
        let (out, tried) = route_with(&f.engine, &a, reply).await;
        let s = out.unwrap();
        let names: Vec<&str> = tried.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["b::t", "a::n"]);
        assert_eq!(
            classes(&s.attempts),
            ["a::m=skip:tools", "b::t=unsupported"]
        );
        assert_eq!(s.fallbacks(), 1, "a skip is not an attempt");
        // The refusal is newer than the probe: b::t is skipped now.
        let (out, tried) = route_with(&f.engine, &a, reply).await;
        let s = out.unwrap();
        assert_eq!(tried, [("a::n".to_string(), None)]);
        assert_eq!(classes(&s.attempts), ["a::m=skip:tools", "b::t=skip:tools"]);
        assert_eq!(s.fallbacks(), 0);
        // A plain request keeps the order it always had.
        let plain = ask(None, r#"{"messages":[{"role":"user","content":"hello"}]}"#);
        let (_, tried) = route_with(&f.engine, &plain, |c| ok(c.key())).await;
        assert_eq!(tried[0].0, "a::m");
        // A probe newer than the refusal lifts it.
        f.advance(7200);
        let later = crate::time::format_ts(f.engine.clock.now() - chrono::TimeDelta::minutes(1));
        write_caps(
            &f,
            &format!(r#"{{"b::t": {{"tools": {{"verdict": "yes", "seen": "{later}"}}}}}}"#),
        );
        assert!(f.engine.record.capabilities.refresh().unwrap());
        let (_, tried) = route_with(&f.engine, &a.clone().with_session(Some("x")), |c| {
            ok(c.key())
        })
        .await;
        assert_eq!(tried[0].0, "b::t");
        // A file that stops parsing keeps the verdicts read before, and is
        // left as it is.
        write_caps(&f, "{not json");
        assert!(f.engine.record.capabilities.refresh().is_err());
        assert!(
            f.engine
                .record
                .capabilities_problem()
                .unwrap()
                .contains("capabilities.json")
        );
        let (_, tried) = route_with(&f.engine, &a.clone().with_session(Some("y")), |c| {
            ok(c.key())
        })
        .await;
        assert_eq!(tried[0].0, "b::t");
        assert_eq!(
            std::fs::read_to_string(f.dir.path().join("capabilities.json")).unwrap(),
            "{not json"
        );
    }

    #[tokio::test]
    async fn a_prompt_no_window_holds_names_the_largest() {
        let f = fixture_with(DIALECTS);
        // About 100 tokens: over oai::o's 50 (catalog); big::b says 80.
        let long = format!(
            r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#,
            "x".repeat(400)
        );
        let a = ask(Some("big::b"), &long);
        let (out, _) = route_with(&f.engine, &a, |_| {
            Sent::failed(UpstreamError {
                message: "HTTP 400: This model's maximum context length is 80 tokens".into(),
                ..err(ErrorClass::ContextLength, 400)
            })
        })
        .await;
        let x = out.unwrap_err();
        assert_eq!(
            x.message(),
            "no active model can hold a prompt of about 100 tokens; the largest context window among them is 80 tokens (big::b)"
        );
        assert!(x.error.is_usage_error());
        // Learned: the next one is not sent.
        let (out, tried) = route_with(&f.engine, &a, |c| ok(c.key())).await;
        assert!(tried.is_empty());
        assert_eq!(classes(&out.unwrap_err().attempts), ["big::b=skip:context"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_window_that_holds_the_prompt_but_not_its_answer_keeps_the_upstreams_words() {
        let f = fixture_with(DIALECTS);
        // About 100 tokens of prompt and 2,000 of answer; big::b says 150:
        // the prompt fits, prompt and answer do not.
        let body = format!(
            r#"{{"max_tokens":2000,"messages":[{{"role":"user","content":"{}"}}]}}"#,
            "x".repeat(400)
        );
        let a = ask(Some("big::b"), &body);
        let said = "HTTP 400: This model's maximum context length is 150 tokens. However, you requested 2100 tokens (100 in the messages, 2000 in the completion).";
        let (out, _) = route_with(&f.engine, &a, |_| {
            Sent::failed(UpstreamError {
                message: said.into(),
                ..err(ErrorClass::ContextLength, 400)
            })
        })
        .await;
        let x = out.unwrap_err();
        assert_eq!(
            x.message(),
            format!("the upstream rejected the request itself: {said}")
        );
        assert!(x.error.is_usage_error());
    }
}
