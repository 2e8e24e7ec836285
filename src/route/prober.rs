//! `route --serve`'s re-prober: paused models come back in minutes, and
//! benches that were only route's guess are checked early.
//!
//! A background task looks once a second (real time) at what is due by
//! route's clock ([`crate::clock::Clock`], so a test moves it with the test
//! clock file):
//!
//! - **Paused models** ([`crate::state::reprobe::due`]: since the pause,
//!   `[route] reprobe_paused_secs`, doubling to an hour, never before the
//!   failure's `retry_at`), counted from the model's last probe by anyone:
//!   when one looks due by what this task remembers, its last probe is
//!   read from the log first, so a slot `check`, `check --paused` or
//!   another router already covered is not probed again (after a restart
//!   too). Each is probed with `check`'s prober
//!   ([`HttpProber`]: the prompt pool, the answer check), the provider's
//!   timeout, its `spacing` between two re-probes of one provider, and a
//!   place inside route's limits taken as a routed request takes one. The
//!   result is recorded as `check` records one ([`Writer`], marked
//!   `"source": "reprobe"`), so a pass makes the model active and the
//!   state watcher routes to it again; an unreachable host records nothing
//!   (the offline rule). Before each one the task tries `check`'s run lock
//!   without waiting and lets it go at once: when a `check` holds it, the
//!   slot is skipped, since that check probes paused models itself.
//!   Disabled models are never probed.
//! - **Heuristic benches of active models** ([`Bench::probe_due`]: a
//!   ladder step or a `repeated_failures` bench, half gone, more than a
//!   minute left). Each is probed once, with the same prober, on the
//!   benched key and model, and nothing is written to the log or the state
//!   file: a pass lifts the bench, a failure leaves it as it was.
//!
//! It does not run in one-shot `route`, with `reprobe_paused_secs = 0`
//! (paused models; benches are still checked), nor with `record =
//! "shared"` (the fleet's `check` re-probes then).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use crate::catalog::{ApiKey, Record, Resolved, model_key};
use crate::check::lanes::{HttpProber, Probed};
use crate::check::plan::Lane;
use crate::check::writer::Writer;
use crate::error::Error;
use crate::fsutil::{RunKind, RunLock};
use crate::outcome::{Outcome, SOURCE_REPROBE, Verdict};
use crate::settings::Settings;
use crate::state::StateEntry;
use crate::upstream::secret::Redactor;
use crate::usage::budget::QUESTION_TOKENS;

use super::cooldown::Bench;
use super::engine::{DueBench, Engine};
use super::metrics::ReprobeLabels;

/// How often (real time) the re-prober looks at what is due.
pub const TICK: Duration = Duration::from_secs(1);

/// A re-probe's time and outcome on route's clock: `clock_now` (route's
/// clock, truncated to the second, as the log's `ts` is written) and
/// `real_now` (the machine's, which dated the outcome's explicit wait when
/// the answer was classified) read at the same moment. The wait is kept
/// (rounded to the second), measured from the returned time, so that the
/// state's `retry_at` is `ts + wait` on one clock, under a test clock too.
fn on_clock(
    clock_now: DateTime<Utc>,
    real_now: DateTime<Utc>,
    mut outcome: Outcome,
) -> (DateTime<Utc>, Outcome) {
    let at = DateTime::from_timestamp(clock_now.timestamp(), 0).unwrap_or(clock_now);
    if let Some(r) = outcome.retry_at {
        let wait_ms = (r - real_now).num_milliseconds().max(0);
        let wait = TimeDelta::seconds((wait_ms + 500) / 1000);
        outcome.retry_at = Some(at + wait);
    }
    (at, outcome)
}

/// The re-prober of one `route --serve`.
pub struct Reprober {
    engine: Arc<Engine>,
    settings: Arc<Settings>,
    prober: Arc<HttpProber>,
    /// `[route] reprobe_paused_secs`; zero: paused models are not probed.
    interval: Duration,
    /// When each paused model (`provider::model`) was last probed: by this
    /// task (route's clock), or by anyone, as the log says when a model
    /// looks due ([`Reprober::learn_from_log`]). Unknown at start: the
    /// pause counts.
    last_probe: HashMap<String, DateTime<Utc>>,
    /// What `last_probe` held for a model when its log tail was last read
    /// ([`Reprober::learn_from_log`]): read again only once that changed.
    log_read: HashMap<String, Option<DateTime<Utc>>>,
    /// When each provider was last sent a re-probe, for its spacing.
    last_sent: HashMap<String, DateTime<Utc>>,
    /// The benches already probed (target id, set at): each once.
    benches_tried: HashSet<(String, DateTime<Utc>)>,
}

impl Reprober {
    /// The re-prober of `engine`'s server, or `None` when it has nothing
    /// to do: `record = "shared"` (routers do not re-probe then).
    /// With `reprobe_paused_secs = 0` it still checks heuristic benches.
    pub fn new(s: &Settings, engine: Arc<Engine>) -> Option<Reprober> {
        if engine.settings.record == Record::Shared {
            return None;
        }
        let client = engine.client.clone();
        let prober = HttpProber::new(
            client,
            s.prompts.clone(),
            Redactor::new(engine.providers().iter().flat_map(|p| p.secrets().cloned())),
            s.catalog.defaults.capability_max_tokens,
        );
        Some(Reprober {
            interval: engine.settings.reprobe_paused,
            engine,
            settings: Arc::new(s.clone()),
            prober: Arc::new(prober),
            last_probe: HashMap::new(),
            log_read: HashMap::new(),
            last_sent: HashMap::new(),
            benches_tried: HashSet::new(),
        })
    }

    /// Run until aborted: one round every [`TICK`].
    pub fn spawn(mut self) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                self.round().await;
                self.engine.telemetry.metrics.reprobe_rounds.inc();
            }
        })
    }

    /// Look at every paused model and heuristic bench once.
    async fn round(&mut self) {
        if !self.interval.is_zero() {
            self.paused().await;
        }
        self.benches().await;
    }

    fn count(&self, kind: &str, result: &str) {
        self.engine
            .telemetry
            .metrics
            .reprobes
            .get_or_create(&ReprobeLabels {
                kind: kind.to_string(),
                result: result.to_string(),
            })
            .inc();
    }

    /// The provider's spacing since its last re-probe has passed at `now`.
    fn spaced(&self, p: &Resolved, now: DateTime<Utc>) -> bool {
        let spacing = TimeDelta::from_std(p.provider.spacing).unwrap_or(TimeDelta::MAX);
        self.last_sent
            .get(&p.provider.name)
            .is_none_or(|last| now - *last >= spacing)
    }

    /// Every paused model that is due, in the state file's order.
    async fn paused(&mut self) {
        let snapshot = self.engine.record.states.current();
        self.learn_from_log(snapshot.paused()).await;
        for (key, entry) in snapshot.paused() {
            let now = self.engine.clock.now();
            let last = self.last_probe.get(key).copied();
            if !crate::state::reprobe::due(entry, last, self.interval, now) {
                continue;
            }
            let Some((p, model)) = self.model(key) else {
                continue;
            };
            if !self.spaced(&p, now) {
                continue;
            }
            // The slot is taken, whatever comes of it.
            self.last_probe.insert(key.clone(), now);
            if let Some(why) = self.check_running().await {
                tracing::info!(model = %key, %why, "re-probe skipped: a check is running");
                self.count("paused", "skipped");
                continue;
            }
            let Some((k, target)) = self.engine.ledger.probe_key(&p, &model, now) else {
                tracing::info!(model = %key, "re-probe skipped: every key is benched");
                self.count("paused", "skipped");
                continue;
            };
            let Some(outcome) = self.probe(&p, &model, k, &target, now, false).await else {
                self.count("paused", "skipped");
                continue;
            };
            if outcome.unreachable {
                tracing::info!(model = %key, error = outcome.error.as_deref(), "re-probe: unreachable; nothing recorded");
                self.count("paused", "unreachable");
                continue;
            }
            let passed = outcome.verdict() == Verdict::Pass;
            self.count("paused", if passed { "pass" } else { "fail" });
            let (at, outcome) = on_clock(self.engine.clock.now(), Utc::now(), outcome);
            let ts = crate::time::format_ts(at);
            let probed = Probed::basic(ts, &p.provider.name, &model, &outcome, !p.is_loopback());
            match self.record(probed).await {
                Ok(()) if passed => eprintln!("route: re-probe: {key} passed; active again"),
                Ok(()) => tracing::info!(model = %key, "re-probe failed; still paused"),
                Err(e) => eprintln!("warning: route: re-probe of {key} not recorded: {e}"),
            }
        }
    }

    /// The paused models that look due by what this task remembers are
    /// re-judged by the log: their last probe (any probe: `check`'s, a
    /// `check --paused` run's, another router's re-probe) is read from its
    /// tail, off the runtime ([`last_probes`]), and remembered when newer.
    /// So a restart does not re-probe every paused model at once, and a
    /// slot another process already covered is not probed again. The log
    /// is read only when something looks due.
    async fn learn_from_log(&mut self, paused: &[(String, StateEntry)]) {
        let now = self.engine.clock.now();
        let looks_due: Vec<(String, StateEntry)> = paused
            .iter()
            .filter(|(k, e)| {
                let last = self.last_probe.get(k).copied();
                crate::state::reprobe::due(e, last, self.interval, now)
                    && self.model(k).is_some()
                    // Read once per slot: a model the provider's spacing
                    // holds back does not re-read the log every round.
                    && self.log_read.get(k) != Some(&last)
            })
            .cloned()
            .collect();
        if looks_due.is_empty() {
            return;
        }
        for (k, _) in &looks_due {
            self.log_read
                .insert(k.clone(), self.last_probe.get(k).copied());
        }
        let log = self.settings.log_path();
        let read = tokio::task::spawn_blocking(move || {
            crate::check::paused::last_probes_of_paused(&log, &looks_due)
        })
        .await;
        match read {
            Ok(Ok(found)) => {
                for (k, at) in found {
                    let last = self.last_probe.entry(k).or_insert(at);
                    *last = (*last).max(at);
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "re-prober: cannot read the health log; judging by memory")
            }
            Err(e) => tracing::warn!(error = %e, "re-prober: the log read failed"),
        }
    }

    /// Every heuristic bench of an active model that is due, once.
    async fn benches(&mut self) {
        let now = self.engine.clock.now();
        let tried = &self.benches_tried;
        let (due, unmatched) = self.engine.due_benches(now, |b| {
            tried
                .iter()
                .any(|(t, set_at)| *set_at == b.set_at && *t == b.target)
        });
        // No active model here is kept out by these: nothing to probe.
        for b in unmatched {
            self.benches_tried.insert((b.target, b.set_at));
        }
        for due in due {
            let DueBench {
                provider,
                model,
                key,
                bench,
            } = due;
            let id = (bench.target.clone(), bench.set_at);
            if !self.spaced(&provider, now) {
                continue;
            }
            self.benches_tried.insert(id);
            let target = match &key {
                Some(k) => crate::route::cooldown::Target::new(&provider.provider.name, &model)
                    .with_key(k.index, &k.fingerprint),
                None => crate::route::cooldown::Target::new(&provider.provider.name, &model),
            };
            let Some(outcome) = self.probe(&provider, &model, key, &target, now, true).await else {
                self.count("bench", "skipped");
                continue;
            };
            let result = if outcome.unreachable {
                "unreachable"
            } else if outcome.verdict() == Verdict::Pass {
                "pass"
            } else {
                "fail"
            };
            self.count("bench", result);
            if result == "pass" {
                self.lift(&bench).await;
            } else {
                tracing::info!(bench = %bench.target, result, "bench probe did not pass; the bench stays");
            }
        }
        // Forget benches that ended.
        let now = self.engine.clock.now();
        self.benches_tried
            .retain(|(_, set_at)| now - *set_at < TimeDelta::days(2));
    }

    async fn lift(&self, b: &Bench) {
        self.engine.ledger.lift_bench(b).await;
        eprintln!(
            "route: bench probe: {} passed; its {} bench is lifted",
            b.target, b.reason
        );
    }

    /// The provider and model of `provider::model`, if this instance can
    /// use them (the provider is keyed and on, the catalog lists the model).
    fn model(&self, key: &str) -> Option<(Arc<Resolved>, String)> {
        let (provider, model) = crate::catalog::ModelKey::split(key)?;
        let p = self
            .engine
            .providers()
            .iter()
            .find(|p| p.provider.name == provider)?;
        p.provider
            .models
            .iter()
            .any(|m| m == model)
            .then(|| (p.clone(), model.to_string()))
    }

    /// `Some(why)` when a `check` holds the run lock. Taken without waiting,
    /// as a look that writes no note, and let go at once: re-probes never
    /// hold it, and a `check` that meets the look tries again rather than
    /// exiting 3.
    async fn check_running(&self) -> Option<String> {
        let dir = self.settings.stats_dir().to_path_buf();
        let taken = tokio::task::spawn_blocking(move || {
            RunLock::try_acquire_as(&dir, RunKind::Probe).map(drop)
        })
        .await;
        match taken {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(e) => Some(e.to_string()),
        }
    }

    /// Probe `model` of `p` on `key` (its cooldown target `target`), inside
    /// the limits. `None` when a limit (or, unless `of_bench`, a bench
    /// another instance set) says no: the slot is given up.
    async fn probe(
        &mut self,
        p: &Arc<Resolved>,
        model: &str,
        key: Option<ApiKey>,
        target: &crate::route::cooldown::Target,
        now: DateTime<Utc>,
        of_bench: bool,
    ) -> Option<Outcome> {
        let tokens = u64::from(p.provider.max_tokens) + QUESTION_TOKENS;
        let reservation = match self
            .engine
            .admit_probe(p, model, target, tokens, of_bench)
            .await
        {
            Ok(r) => r,
            Err(why) => {
                tracing::info!(model = %model_key(&p.provider.name, model), %why, "re-probe skipped: at a limit");
                return None;
            }
        };
        let mut resolved = (**p).clone();
        resolved.keys = key.into_iter().collect();
        let lane = Lane {
            resolved,
            models: vec![model.to_string()],
            spacing: p.provider.spacing,
            timeout: p.provider.timeout,
            caps: None,
        };
        self.last_sent.insert(p.provider.name.clone(), now);
        tracing::debug!(model = %model_key(&p.provider.name, model), "re-probe sent");
        let (outcome, requests) = self.prober.basic(&lane, model).await;
        if outcome.status.is_none() {
            self.engine.ledger.probe_unanswered(reservation);
        }
        // A stream the provider refused went again unstreamed: that
        // request counts too, whatever the limits say now (it has gone;
        // it used no tokens; later probes of the model go unstreamed at
        // once).
        for _ in 1..requests {
            self.engine.count_sent_probe(p, model, target).await;
        }
        Some(outcome)
    }

    /// Record one re-probe of a paused model as `check` records a probe,
    /// then reload the states at once.
    async fn record(&self, probed: Probed) -> crate::error::Result<()> {
        let settings = self.settings.clone();
        let engine = self.engine.clone();
        tokio::task::spawn_blocking(move || {
            let mut w = Writer::new(&settings).with_source(SOURCE_REPROBE);
            w.accept(vec![probed])?;
            w.finish();
            engine.record.states.refresh().map(drop)
        })
        .await
        .map_err(|e| Error::Internal(format!("the re-probe writer failed: {e}")))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_re_probes_wait_is_dated_from_its_own_time_on_routes_clock() {
        let t = |s: &str| crate::state::reprobe::parse(Some(s)).unwrap();
        // Route's clock is two hours ahead of the machine's; the answer
        // said "wait 30 s" a few milliseconds before it is recorded.
        let real = t("2026-12-02T10:00:00Z") + TimeDelta::milliseconds(996);
        let clock = real + TimeDelta::hours(2);
        let outcome = |retry_at| Outcome {
            failure: Some(crate::outcome::FailureType::RateLimit),
            latency_ms: 5,
            status: Some(429),
            error: None,
            unreachable: false,
            retry_at,
            model_gone: false,
            timing: Default::default(),
        };
        let said = outcome(Some(
            real - TimeDelta::milliseconds(4) + TimeDelta::seconds(30),
        ));
        let (at, o) = on_clock(clock, real, said);
        assert_eq!(at, t("2026-12-02T12:00:00Z"));
        assert_eq!(o.retry_at, Some(t("2026-12-02T12:00:30Z")));
        // No wait named: none recorded.
        let (_, o) = on_clock(clock, real, outcome(None));
        assert_eq!(o.retry_at, None);
    }
}
