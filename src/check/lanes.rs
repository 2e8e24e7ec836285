//! Running a plan's lanes: one task per provider, its models one after
//! another with starts at least `spacing` apart, then at most one
//! capability probe (the most overdue verdict among the models that just
//! passed), one spacing after the last; each result is sent to the writer
//! as soon as it is known. Probes go through the [`Prober`] trait, so the
//! scheduling is tested with tokio's paused time and a mock.
//!
//! The lanes stop early when told to ([`Stop`]): on a signal, and once the
//! run is known to be offline.

use std::future::Future;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::watch;

use super::budget::Book;
use super::plan::{Lane, start_offset};
use crate::capabilities::probe::CapOutcome;
use crate::capabilities::{Capability, Judgement};
use crate::error::{Error, Result};
use crate::http_server::StopSignal;
use crate::outcome::{Entry, Outcome, Verdict};
use crate::prompts::Pool;
use crate::upstream::secret::Redactor;
use crate::usage::budget::QUESTION_TOKENS;

/// Asks one model one question. The real one is [`HttpProber`]; tests of the
/// scheduler use a mock under tokio's paused time.
pub trait Prober: Send + Sync + 'static {
    /// The basic probe: a randomised arithmetic question.
    fn probe(&self, lane: &Lane, model: &str) -> impl Future<Output = Outcome> + Send;
    /// A capability probe of `model` for `cap`.
    fn capability(
        &self,
        lane: &Lane,
        model: &str,
        cap: Capability,
    ) -> impl Future<Output = CapOutcome> + Send;
    /// Whether the probe budget lets a probe of `model` go now (a
    /// capability probe's when `cap`), counting it if so; `Err` says why
    /// not. The real prober asks its [`Book`]; mocks let every probe go.
    fn admit(
        &self,
        _lane: &Lane,
        _model: &str,
        _cap: Option<Capability>,
    ) -> impl Future<Output = std::result::Result<(), String>> + Send {
        async { Ok(()) }
    }
}

/// The real prober: a randomised question from the pool, over HTTP.
pub struct HttpProber {
    client: reqwest::Client,
    pool: Pool,
    redactor: Redactor,
    /// `[defaults] capability_max_tokens`.
    capability_max_tokens: u32,
    /// The run's probe budget and ledger; `None`: nothing is counted
    /// here (route's re-prober counts through its engine).
    book: Option<Arc<Book>>,
}

impl HttpProber {
    pub fn new(
        client: reqwest::Client,
        pool: Pool,
        redactor: Redactor,
        capability_max_tokens: u32,
    ) -> HttpProber {
        HttpProber {
            client,
            pool,
            redactor,
            capability_max_tokens,
            book: None,
        }
    }

    /// Admit and count every probe through `book`.
    pub fn with_book(mut self, book: Arc<Book>) -> HttpProber {
        self.book = Some(book);
        self
    }

    /// The run's book, if it keeps one.
    pub fn book(&self) -> Option<&Arc<Book>> {
        self.book.as_ref()
    }

    /// Tell the book how a probe of `model` went: answered or not, its
    /// headers, and any request beyond the one it admitted.
    async fn settle(
        &self,
        lane: &Lane,
        model: &str,
        answered: bool,
        headers: Option<reqwest::header::HeaderMap>,
        requests: u32,
    ) {
        let Some(book) = self.book.clone() else {
            return;
        };
        let (p, m) = (lane.resolved.clone(), model.to_string());
        let _ = tokio::task::spawn_blocking(move || {
            if requests > 1 {
                book.count_extra(&p, &m, requests - 1);
            }
            book.answered(&p, &m, answered, headers.as_ref())
        })
        .await;
    }
}

impl HttpProber {
    /// The basic probe, and the requests it sent (2 when its provider
    /// refused the stream): [`Prober::probe`] for a caller that counts
    /// requests in a ledger of its own (route's re-prober).
    pub async fn basic(&self, lane: &Lane, model: &str) -> (Outcome, u32) {
        let question = {
            let mut rng = rand::rng();
            self.pool.draw(&mut rng)
        };
        let c = crate::probe::probe(
            &self.client,
            &lane.resolved,
            model,
            &question,
            lane.timeout,
            &self.redactor,
        )
        .await;
        self.settle(
            lane,
            model,
            c.outcome.status.is_some(),
            c.headers,
            c.requests,
        )
        .await;
        (c.outcome, c.requests)
    }
}

impl Prober for HttpProber {
    async fn probe(&self, lane: &Lane, model: &str) -> Outcome {
        self.basic(lane, model).await.0
    }

    async fn admit(
        &self,
        lane: &Lane,
        model: &str,
        cap: Option<Capability>,
    ) -> std::result::Result<(), String> {
        let Some(book) = self.book.clone() else {
            return Ok(());
        };
        let max = match cap {
            None => lane.resolved.provider.max_tokens,
            Some(_) => self
                .capability_max_tokens
                .max(lane.resolved.provider.max_tokens),
        };
        let tokens = u64::from(max) + QUESTION_TOKENS;
        // Shared: every instance's counts first, then the probe counted
        // there too once the budget lets it go.
        let shared = match (&book.shared, book.target(&lane.resolved, model)) {
            (Some(s), Some((t, l))) => Some((s.clone(), t, l)),
            _ => None,
        };
        let now = crate::clock::Clock::from_env().now();
        let seen = match &shared {
            Some((s, t, l)) => s.read(t, l, now).await.map(|(all, _)| all),
            None => None,
        };
        let (p, m) = (lane.resolved.clone(), model.to_string());
        let admitted =
            tokio::task::spawn_blocking(move || book.admit(&p, &m, tokens, cap, seen.as_ref()))
                .await
                .unwrap_or_else(|e| Err(e.to_string()));
        if admitted.is_ok()
            && let Some((s, t, l)) = &shared
        {
            s.count_probe(t, l, tokens, now).await;
        }
        admitted
    }

    async fn capability(&self, lane: &Lane, model: &str, cap: Capability) -> CapOutcome {
        let (c, headers, requests) = crate::capabilities::probe::probe(
            &self.client,
            &lane.resolved,
            model,
            cap,
            self.capability_max_tokens,
            lane.timeout,
            &self.redactor,
        )
        .await;
        self.settle(lane, model, c.outcome.status.is_some(), headers, requests)
            .await;
        c
    }
}

/// One finished probe on its way to the writer: a basic probe, or a
/// capability probe (`entry.probe` names the capability).
#[derive(Debug)]
pub struct Probed {
    pub entry: Entry,
    pub verdict: Verdict,
    /// The provider is not on this machine.
    pub remote: bool,
    /// No response: the host could not be reached.
    pub unreachable: bool,
    /// What a capability probe decided (`None` for a basic probe, and for
    /// a capability probe that decided nothing: the verdict stays).
    pub decided: Option<Judgement>,
    /// The explicit wait a basic probe's failure carried
    /// ([`Outcome::retry_at`]), as RFC 3339: the state entry's `retry_at`.
    pub retry_at: Option<String>,
    /// The provider said the model does not exist
    /// ([`Outcome::model_gone`]).
    pub model_gone: bool,
}

impl Probed {
    /// A basic probe's result: `outcome` of asking `provider`'s `model` at
    /// `ts`. `remote`: the provider is not on this machine. Every basic
    /// probe, from `check` or a re-probe, is built here.
    pub fn basic(
        ts: String,
        provider: &str,
        model: &str,
        outcome: &Outcome,
        remote: bool,
    ) -> Probed {
        Probed {
            entry: Entry::new(ts, provider, model, outcome),
            verdict: outcome.verdict(),
            remote,
            unreachable: outcome.unreachable,
            decided: None,
            retry_at: outcome.retry_at.map(crate::time::format_ts),
            model_gone: outcome.model_gone,
        }
    }

    /// A capability probe's result, not a basic probe's.
    pub fn is_capability(&self) -> bool {
        self.entry.probe.is_some()
    }
}

/// Why the lanes stop before their plan is done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stop {
    #[default]
    Running,
    /// Every remote provider due has failed its first probe (or its model
    /// list) without reaching its host (the offline rule, docs/formats.md):
    /// remote lanes stop at once, and loopback lanes send no probe that
    /// would have to wait for its start, but finish the one under way and
    /// any due now.
    Offline,
    /// A signal: every lane stops at once, and a probe under way is
    /// abandoned (no result: nothing to record).
    Signal(StopSignal),
}

impl Stop {
    /// Whether a lane stops rather than start its next probe, or go on
    /// waiting for it (`must_wait`: its start has not come).
    fn before_start(self, remote: bool, must_wait: bool) -> bool {
        match self {
            Stop::Running => false,
            Stop::Offline => remote || must_wait,
            Stop::Signal(_) => true,
        }
    }

    /// Whether a lane abandons the probe it is waiting for.
    fn under_way(self, remote: bool) -> bool {
        match self {
            Stop::Running => false,
            Stop::Offline => remote,
            Stop::Signal(_) => true,
        }
    }

    /// What a stopped lane's progress line says.
    fn words(self) -> &'static str {
        match self {
            Stop::Running => "stopped",
            Stop::Offline => "stopped: offline",
            Stop::Signal(StopSignal::Interrupt) => "stopped: interrupted",
            Stop::Signal(StopSignal::Terminate) => "stopped: terminated",
        }
    }
}

/// Resolves once `stop` says the lane must give up the probe under way;
/// never when the sender is gone.
async fn abandon(stop: &mut watch::Receiver<Stop>, remote: bool) -> Stop {
    let seen = stop.wait_for(|s| s.under_way(remote)).await.map(|s| *s);
    match seen {
        Ok(s) => s,
        Err(_) => std::future::pending().await,
    }
}

/// Run every lane at once and wait for all of them; the result is the
/// number of basic probes of the plan that a [`Stop`] left undone (not
/// sent, or abandoned under way). A lane that fails or panics fails the
/// run, after the others have finished.
pub async fn run_lanes<P: Prober>(
    lanes: Vec<Lane>,
    prober: Arc<P>,
    tx: mpsc::Sender<Probed>,
    bars: Vec<ProgressBar>,
    stop: watch::Receiver<Stop>,
) -> Result<usize> {
    let mut tasks = Vec::new();
    for (lane, bar) in lanes.into_iter().zip(bars) {
        let name = lane.resolved.provider.name.clone();
        let (prober, tx, stop) = (prober.clone(), tx.clone(), stop.clone());
        tasks.push((
            name,
            tokio::spawn(async move { run_lane(lane, prober, tx, bar, stop).await }),
        ));
    }
    drop(tx);
    let mut first_error = None;
    let mut undone = 0;
    for (name, task) in tasks {
        let err = match task.await {
            Ok(Ok(left)) => {
                undone += left;
                continue;
            }
            Ok(Err(e)) => e,
            Err(join) => Error::Internal(format!(
                "the {name} lane {}",
                if join.is_panic() {
                    format!("panicked: {}", panic_text(&*join.into_panic()))
                } else {
                    "was cancelled".to_string()
                }
            )),
        };
        first_error.get_or_insert(err);
    }
    first_error.map_or(Ok(undone), Err)
}

pub(crate) fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// One provider: its models one after another, starts `spacing` apart,
/// then at most one capability probe one spacing after the last. Returns
/// how many of its basic probes a [`Stop`] left undone.
async fn run_lane<P: Prober>(
    lane: Lane,
    prober: Arc<P>,
    tx: mpsc::Sender<Probed>,
    bar: ProgressBar,
    mut stop: watch::Receiver<Stop>,
) -> Result<usize> {
    let name = lane.resolved.provider.name.clone();
    let remote = !lane.resolved.is_loopback();
    let n = lane.models.len();
    let first_start = tokio::time::Instant::now();
    let mut tally = Tally::default();
    let stopped = |bar: &ProgressBar, tally: &Tally, why: Stop| {
        bar.finish_with_message(tally.line(why.words(), None));
    };
    // The models whose basic probe passed, with its ts.
    let mut passed: Vec<(&str, String)> = Vec::new();
    for (i, model) in lane.models.iter().enumerate() {
        let at = Some((i + 1, n));
        if let Some(why) = wait_for_start(
            &lane,
            first_start,
            i,
            &bar,
            |left| tally.line(&format!("next: {model} in {left}s"), at),
            &mut stop,
            remote,
        )
        .await?
        {
            stopped(&bar, &tally, why);
            return Ok(n - i);
        }
        if let Err(why) = prober.admit(&lane, model, None).await {
            tracing::info!(provider = %name, model = %model, %why, "probe not sent: probe budget");
            continue;
        }
        let ts = crate::time::format_ts(crate::clock::Clock::from_env().now());
        bar.set_message(tally.line(&format!("probing {model}"), at));
        tracing::debug!(provider = %name, model = %model, "probe sent");
        let outcome = tokio::select! {
            o = prober.probe(&lane, model) => o,
            why = abandon(&mut stop, remote) => {
                tracing::debug!(provider = %name, model = %model, "probe abandoned: the run stops");
                stopped(&bar, &tally, why);
                return Ok(n - i);
            }
        };
        // The error is redacted where the outcome was made.
        tracing::debug!(
            provider = %name,
            model = %model,
            class = outcome.failure.map(|f| f.as_str()).unwrap_or("ok"),
            latency_ms = outcome.latency_ms,
            status = outcome.status,
            unreachable = outcome.unreachable,
            error = outcome.error.as_deref(),
            "probe answered"
        );
        if outcome.ok() {
            passed.push((model.as_str(), ts.clone()));
        }
        let probed = Probed::basic(ts, &name, model, &outcome, remote);
        tally.add(&bar, &probed.entry);
        if tx.send(probed).is_err() {
            // The writer stopped on an error; it is reported from there.
            bar.finish_with_message("stopped");
            return Ok(0);
        }
    }
    let choice = lane.caps.as_ref().and_then(|caps| {
        let passed: Vec<(&str, &str)> = passed.iter().map(|(m, t)| (*m, t.as_str())).collect();
        caps.choose(&passed, caps.clock.now())
    });
    let Some(choice) = choice else {
        bar.finish_with_message(tally.line("done", None));
        return Ok(0);
    };
    let (model, cap) = (choice.model.as_str(), choice.capability);
    if let Some(why) = wait_for_start(
        &lane,
        first_start,
        n,
        &bar,
        |left| tally.line(&format!("next: {model} {cap} in {left}s"), None),
        &mut stop,
        remote,
    )
    .await?
    {
        stopped(&bar, &tally, why);
        return Ok(0);
    }
    if let Err(why) = prober.admit(&lane, model, Some(cap)).await {
        tracing::info!(provider = %name, model = %model, capability = %cap, %why, "capability probe not sent: probe budget");
        bar.finish_with_message(tally.line("done", None));
        return Ok(0);
    }
    let ts = crate::time::format_ts(crate::clock::Clock::from_env().now());
    bar.set_message(tally.line(&format!("probing {model} for {cap}"), None));
    tracing::debug!(provider = %name, model = %model, capability = %cap, why = %choice.why(), "capability probe sent");
    let CapOutcome { outcome, decided } = tokio::select! {
        c = prober.capability(&lane, model, cap) => c,
        why = abandon(&mut stop, remote) => {
            stopped(&bar, &tally, why);
            return Ok(0);
        }
    };
    tracing::debug!(
        provider = %name,
        model = %model,
        capability = %cap,
        class = outcome.failure.map(|f| f.as_str()).unwrap_or("ok"),
        latency_ms = outcome.latency_ms,
        status = outcome.status,
        decided = decided.map(|d| d.as_str()),
        error = outcome.error.as_deref(),
        "capability probe answered"
    );
    let mut entry = Entry::new(ts, &name, model, &outcome);
    entry.probe = Some(cap);
    bar.println(result_line(&entry));
    // A send to a writer that stopped fails; that is reported from there.
    let _ = tx.send(Probed {
        entry,
        verdict: outcome.verdict(),
        remote,
        unreachable: outcome.unreachable,
        decided,
        retry_at: None,
        model_gone: false,
    });
    bar.finish_with_message(tally.line(&format!("done, {model} for {cap}"), None));
    Ok(0)
}

/// A lane's results so far, for its progress line.
#[derive(Debug, Default)]
struct Tally {
    ok: usize,
    failed: usize,
}

impl Tally {
    /// Count a basic probe's result, and print it above the progress lines
    /// (nothing when they are hidden: not a terminal, or under `-v`).
    fn add(&mut self, bar: &ProgressBar, e: &Entry) {
        match e.ok {
            1 => self.ok += 1,
            _ => self.failed += 1,
        }
        bar.println(result_line(e));
    }

    /// The progress line: `2 ok · 1 failed · next: MODEL in 18s (3/5)`;
    /// the counts once something finished, `(i/n)` when `at` says where
    /// the lane is.
    fn line(&self, what: &str, at: Option<(usize, usize)>) -> String {
        let mut out = String::new();
        if self.ok + self.failed > 0 {
            out.push_str(&format!("{} ok · {} failed · ", self.ok, self.failed));
        }
        out.push_str(what);
        if let Some((i, n)) = at {
            out.push_str(&format!(" ({i}/{n})"));
        }
        out
    }
}

/// One finished probe, as printed above the progress lines when it lands:
/// `groq::llama: ok, 412 ms`, `groq::x: rate_limit (429), 90 ms: slow
/// down`, `groq::m tools: ok, 812 ms`. The error is already redacted.
fn result_line(e: &Entry) -> String {
    let cap = e.probe.map(|c| format!(" {c}")).unwrap_or_default();
    let error = e
        .error
        .as_deref()
        .filter(|_| e.ok == 0)
        .map(|x| format!(": {}", crate::outcome::shorten(x, 80)))
        .unwrap_or_default();
    format!(
        "{}{cap}: {}, {}{error}",
        crate::catalog::ModelKey::new(&e.provider, &e.model),
        e.result(),
        e.latency()
    )
}

/// Wait until the lane's `i`-th start, counting down a second at a time on
/// the progress line (`label` gets the seconds left). `Some` when `stop`
/// says the lane stops instead ([`Stop::before_start`]).
async fn wait_for_start(
    lane: &Lane,
    first_start: tokio::time::Instant,
    i: usize,
    bar: &ProgressBar,
    label: impl Fn(u64) -> String,
    stop: &mut watch::Receiver<Stop>,
    remote: bool,
) -> Result<Option<Stop>> {
    let next_start = first_start
        .checked_add(start_offset(lane, i)?)
        .ok_or_else(|| {
            Error::config(format!(
                "provider {}: spacing {} is too long",
                lane.resolved.provider.name,
                crate::duration::format_secs(lane.spacing)
            ))
        })?;
    loop {
        let now = tokio::time::Instant::now();
        let why = *stop.borrow_and_update();
        if why.before_start(remote, now < next_start) {
            return Ok(Some(why));
        }
        if now >= next_start {
            return Ok(None);
        }
        let left = next_start - now;
        bar.set_message(label(left.as_secs_f64().ceil() as u64));
        tokio::select! {
            () = tokio::time::sleep(left.min(Duration::from_secs(1))) => {}
            // A sender gone changes nothing: wait out the second.
            Ok(()) = stop.changed() => {}
        }
    }
}

/// Per-provider progress lines on stderr, only when stderr is a terminal.
pub struct Progress {
    multi: MultiProgress,
    bars: Vec<ProgressBar>,
}

impl Progress {
    pub fn new(lanes: &[Lane]) -> Progress {
        // Not under -v: its lines would tear the bars.
        let target = if std::io::stderr().is_terminal() && !tracing::enabled!(tracing::Level::INFO)
        {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let multi = MultiProgress::with_draw_target(target);
        let width = lanes
            .iter()
            .map(|l| l.resolved.provider.name.len())
            .max()
            .unwrap_or(8);
        let style =
            ProgressStyle::with_template(&format!("{{spinner}} {{prefix:{width}}}  {{wide_msg}}"))
                .expect("valid template");
        let bars = lanes
            .iter()
            .map(|l| {
                let b = multi.add(ProgressBar::new_spinner());
                b.set_style(style.clone());
                b.set_prefix(l.resolved.provider.name.clone());
                b.enable_steady_tick(Duration::from_millis(120));
                b
            })
            .collect();
        Progress { multi, bars }
    }

    pub fn bar(&self, i: usize) -> ProgressBar {
        self.bars[i].clone()
    }

    pub fn clear(&self) {
        let _ = self.multi.clear();
    }
}

#[cfg(test)]
mod tests {
    //! The scheduler under tokio's paused time: spacing, parallel lanes and
    //! lane failures are asserted exactly, whatever the machine's load.

    use std::sync::Mutex;

    use super::*;
    use crate::capabilities::{Finding, Findings};
    use crate::catalog::Catalog;
    use crate::check::plan::CapPlan;
    use crate::clock::Clock;
    use crate::exit;
    use crate::outcome::FailureType;

    /// Records when each model was probed, in virtual time since the start;
    /// takes `busy` per probe; panics on a model named "panic".
    struct Mock {
        t0: tokio::time::Instant,
        busy: Duration,
        calls: Mutex<Vec<(String, Duration)>>,
    }

    impl Prober for Mock {
        async fn probe(&self, lane: &Lane, model: &str) -> Outcome {
            let at = self.t0.elapsed();
            self.calls.lock().unwrap().push((
                crate::catalog::ModelKey::new(&lane.resolved.provider.name, model).into(),
                at,
            ));
            assert!(model != "panic", "scripted panic");
            tokio::time::sleep(self.busy).await;
            Outcome {
                failure: (model == "down").then_some(FailureType::Error),
                latency_ms: 1,
                status: None,
                error: None,
                unreachable: model == "down",
                retry_at: None,
                model_gone: false,
                timing: Default::default(),
            }
        }

        /// Recorded as "provider::model cap"; a model named "notools"
        /// answers in text (a `no`), any other passes.
        async fn capability(&self, lane: &Lane, model: &str, cap: Capability) -> CapOutcome {
            let at = self.t0.elapsed();
            self.calls.lock().unwrap().push((
                format!(
                    "{} {cap}",
                    crate::catalog::ModelKey::new(&lane.resolved.provider.name, model)
                ),
                at,
            ));
            tokio::time::sleep(self.busy).await;
            let no = model == "notools";
            CapOutcome {
                outcome: Outcome {
                    failure: no.then_some(FailureType::WrongAnswer),
                    latency_ms: 1,
                    status: Some(200),
                    error: no.then(|| "answered in text, no call of add".into()),
                    unreachable: false,
                    retry_at: None,
                    model_gone: false,
                    timing: Default::default(),
                },
                decided: Some(if no { Judgement::No } else { Judgement::Yes }),
            }
        }
    }

    fn lane(name: &str, url: &str, models: &[&str], spacing_secs: f64) -> Lane {
        let c = Catalog::from_toml_str(
            &format!(
                "include_default_catalog = false\n[[providers]]\nname = {name:?}\ndialect = \"openai\"\nbase_url = {url:?}\nmodels = {models:?}\n"
            ),
            "test.toml",
        )
        .unwrap();
        Lane {
            resolved: c.providers[0].resolve_with(|_| None).unwrap(),
            models: models.iter().map(|m| m.to_string()).collect(),
            spacing: Duration::from_secs_f64(spacing_secs),
            timeout: Duration::from_secs(30),
            caps: None,
        }
    }

    /// `l` with capability probes of `wanted` (model, capabilities), the
    /// verdicts `seen` (model, capability, hours ago) and the state
    /// entries `states` (model, JSON).
    fn with_caps(
        mut l: Lane,
        wanted: &[(&str, &[Capability])],
        seen: &[(&str, Capability, i64)],
        states: &[(&str, serde_json::Value)],
    ) -> Lane {
        let provider = l.resolved.provider.name.clone();
        let mut findings = Findings::default();
        for (m, cap, hours) in seen {
            let at = chrono::Utc::now() - chrono::TimeDelta::hours(*hours);
            findings.record(
                crate::catalog::ModelKey::new(&provider, m).as_str(),
                *cap,
                Finding {
                    verdict: Judgement::Yes,
                    seen: Some(crate::time::format_ts(at)),
                    ..Finding::default()
                },
            );
        }
        l.caps = Some(CapPlan {
            provider,
            wanted: wanted
                .iter()
                .map(|(m, caps)| (m.to_string(), caps.iter().copied().collect()))
                .collect(),
            listed: Default::default(),
            findings: Arc::new(findings),
            states: states
                .iter()
                .map(|(m, v)| (m.to_string(), serde_json::from_value(v.clone()).unwrap()))
                .collect(),
            clock: Clock::default(),
        });
        l
    }

    async fn run(
        lanes: Vec<Lane>,
        busy: Duration,
    ) -> (Result<usize>, Vec<(String, Duration)>, Vec<Probed>) {
        run_stopped(lanes, busy, None).await
    }

    /// [`run`], told `stop` after the given time.
    async fn run_stopped(
        lanes: Vec<Lane>,
        busy: Duration,
        stop: Option<(Duration, Stop)>,
    ) -> (Result<usize>, Vec<(String, Duration)>, Vec<Probed>) {
        let mock = Arc::new(Mock {
            t0: tokio::time::Instant::now(),
            busy,
            calls: Mutex::new(Vec::new()),
        });
        let (tx, rx) = mpsc::channel();
        let bars = lanes.iter().map(|_| ProgressBar::hidden()).collect();
        let (stop_tx, stop_rx) = watch::channel(Stop::Running);
        let lanes = run_lanes(lanes, mock.clone(), tx, bars, stop_rx);
        let told = async {
            if let Some((after, why)) = stop {
                tokio::time::sleep(after).await;
                stop_tx.send_replace(why);
            }
            std::future::pending::<()>().await
        };
        let r = tokio::select! {
            r = lanes => r,
            () = told => unreachable!(),
        };
        let calls = mock.calls.lock().unwrap().clone();
        (r, calls, rx.try_iter().collect())
    }

    fn secs(calls: &[(String, Duration)], provider: &str) -> Vec<f64> {
        calls
            .iter()
            .filter(|(k, _)| k.starts_with(&format!("{provider}::")))
            .map(|(_, at)| at.as_secs_f64())
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn lanes_run_in_parallel_with_starts_spacing_apart() {
        let lanes = vec![
            lane("a", "https://a.example/v1", &["1", "2", "3"], 90.0),
            lane("b", "https://b.example/v1", &["1", "2"], 30.0),
            lane("c", "https://c.example/v1", &["1"], 90.0),
        ];
        let t0 = tokio::time::Instant::now();
        let (r, calls, probed) = run(lanes, Duration::from_secs(2)).await;
        r.unwrap();
        assert_eq!(secs(&calls, "a"), [0.0, 90.0, 180.0]);
        assert_eq!(secs(&calls, "b"), [0.0, 30.0]);
        assert_eq!(secs(&calls, "c"), [0.0]);
        // The whole run: (largest model count − 1) × spacing + one probe.
        assert_eq!(t0.elapsed(), Duration::from_secs(182));
        assert_eq!(probed.len(), 6);
        assert!(
            probed
                .iter()
                .all(|p| p.remote && p.verdict == Verdict::Pass)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn each_provider_adds_one_capability_probe_the_most_overdue_one_spacing_later() {
        use Capability::{Json, Tools, Vision};
        let a = with_caps(
            lane("a", "https://a.example/v1", &["1", "2", "3"], 90.0),
            &[("1", &[Tools]), ("2", &[Tools, Json]), ("3", &[Json])],
            // 1 tools: 2 h old, not due; 2 tools: due 6 h ago; 2 json: due
            // 1 h ago; 3 json: due 2 h ago. The most overdue is 2 tools.
            &[
                ("1", Tools, 2),
                ("2", Tools, 30),
                ("2", Json, 25),
                ("3", Json, 26),
            ],
            &[],
        );
        let b = with_caps(
            lane("b", "https://b.example/v1", &["down", "notools"], 30.0),
            // `down` was never probed for anything, but its basic probe fails
            // in this run: not worth the tokens. `notools` is due.
            &[("down", &[Tools, Json, Vision]), ("notools", &[Tools])],
            &[("notools", Tools, 48)],
            &[],
        );
        // Nothing due on c: its run is unchanged.
        let c = with_caps(
            lane("c", "https://c.example/v1", &["1", "2"], 60.0),
            &[("1", &[Vision])],
            &[("1", Vision, 1)],
            &[],
        );
        let t0 = tokio::time::Instant::now();
        let (r, calls, probed) = run(vec![a, b, c], Duration::from_secs(2)).await;
        r.unwrap();
        assert_eq!(secs(&calls, "a"), [0.0, 90.0, 180.0, 270.0]);
        assert_eq!(calls[calls.len() - 1].0, "a::2 tools", "{calls:?}");
        assert_eq!(secs(&calls, "b"), [0.0, 30.0, 60.0]);
        assert!(
            calls
                .iter()
                .any(|(k, at)| k == "b::notools tools" && at.as_secs() == 60)
        );
        assert_eq!(secs(&calls, "c"), [0.0, 60.0]);
        // The whole run: (largest model count) × spacing + one probe.
        assert_eq!(t0.elapsed(), Duration::from_secs(3 * 90 + 2));
        let caps: Vec<(String, Option<Capability>, Option<Judgement>, u8)> = probed
            .iter()
            .filter(|p| p.is_capability())
            .map(|p| {
                (
                    crate::catalog::ModelKey::new(&p.entry.provider, &p.entry.model).into(),
                    p.entry.probe,
                    p.decided,
                    p.entry.ok,
                )
            })
            .collect();
        assert_eq!(
            caps,
            [
                (
                    "b::notools".to_string(),
                    Some(Tools),
                    Some(Judgement::No),
                    0
                ),
                ("a::2".to_string(), Some(Tools), Some(Judgement::Yes), 1),
            ]
        );
        assert_eq!(probed.len(), 7 + 2);
        assert!(
            probed
                .iter()
                .filter(|p| !p.is_capability())
                .all(|p| p.decided.is_none())
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_model_back_from_paused_is_due_at_once_and_a_paused_one_never() {
        use Capability::Tools;
        let paused = serde_json::json!({"state": "paused", "since": "2026-01-01T00:00:00Z", "reason": "rate_limit"});
        // `1` was checked an hour ago, but it was paused and passes now: it
        // came back, so its verdict is due. `down` stays paused (its probe
        // fails) and is never chosen, though never probed for tools.
        let a = with_caps(
            lane("a", "https://a.example/v1", &["down", "1"], 10.0),
            &[("down", &[Tools]), ("1", &[Tools])],
            &[("1", Tools, 1)],
            &[("down", paused.clone()), ("1", paused)],
        );
        let (r, calls, _) = run(vec![a], Duration::ZERO).await;
        r.unwrap();
        let names: Vec<&str> = calls.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["a::down", "a::1", "a::1 tools"]);
        assert_eq!(secs(&calls, "a"), [0.0, 10.0, 20.0]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_longer_than_the_spacing_delays_the_next_start_only() {
        let lanes = vec![lane("a", "http://127.0.0.1:9/v1", &["1", "2", "3"], 10.0)];
        let (r, calls, probed) = run(lanes, Duration::from_secs(25)).await;
        r.unwrap();
        // Starts are at least `spacing` apart and never overlap a probe.
        assert_eq!(secs(&calls, "a"), [0.0, 25.0, 50.0]);
        assert!(probed.iter().all(|p| !p.remote), "127.0.0.1 is loopback");
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_lane_fails_the_run_after_the_others_finish() {
        let lanes = vec![
            lane("a", "https://a.example/v1", &["1", "panic", "3"], 5.0),
            lane("b", "https://b.example/v1", &["1", "2", "3", "4"], 5.0),
        ];
        let (r, calls, probed) = run(lanes, Duration::ZERO).await;
        let err = r.unwrap_err();
        assert!(matches!(err, Error::Internal(_)), "{err}");
        assert_eq!(err.exit_code(), exit::INTERNAL);
        assert!(
            err.to_string()
                .contains("the a lane panicked: scripted panic"),
            "{err}"
        );
        // b ran to the end; a's result before the panic was delivered.
        assert_eq!(secs(&calls, "b"), [0.0, 5.0, 10.0, 15.0]);
        assert_eq!(probed.len(), 5);
    }

    /// Offline: remote lanes stop at once, abandoning a probe under way;
    /// a loopback lane finishes its probe under way, then sends none that
    /// would have to wait.
    #[tokio::test(start_paused = true)]
    async fn offline_stops_remote_lanes_at_once_and_loopback_ones_at_their_next_wait() {
        let lanes = vec![
            lane("a", "https://a.example/v1", &["1", "2", "3"], 90.0),
            lane("b", "https://b.example/v1", &["1", "2"], 90.0),
            lane("local", "http://127.0.0.1:9/v1", &["1", "2"], 90.0),
        ];
        let t0 = tokio::time::Instant::now();
        let stop = Some((Duration::from_secs(5), Stop::Offline));
        let (r, calls, probed) = run_stopped(lanes, Duration::from_secs(10), stop).await;
        // Every basic probe but local's first is undone: 3 + 2 + 1.
        assert_eq!(r.unwrap(), 6);
        assert_eq!(secs(&calls, "a"), [0.0]);
        assert_eq!(secs(&calls, "local"), [0.0]);
        let done: Vec<&str> = probed.iter().map(|p| p.entry.provider.as_str()).collect();
        assert_eq!(done, ["local"], "remote probes under way are abandoned");
        assert_eq!(
            t0.elapsed(),
            Duration::from_secs(10),
            "local's probe ran out"
        );
    }

    /// A signal: every lane stops at once, loopback ones too.
    #[tokio::test(start_paused = true)]
    async fn a_signal_stops_every_lane_at_once() {
        let lanes = vec![
            lane("a", "https://a.example/v1", &["1", "2", "3"], 90.0),
            lane("local", "http://127.0.0.1:9/v1", &["1", "2"], 1.0),
        ];
        let t0 = tokio::time::Instant::now();
        let stop = Some((Duration::from_secs(5), Stop::Signal(StopSignal::Interrupt)));
        let (r, calls, probed) = run_stopped(lanes, Duration::from_millis(500), stop).await;
        // a: its first probe done, two left; local: both done.
        assert_eq!(r.unwrap(), 2);
        assert_eq!(secs(&calls, "local"), [0.0, 1.0]);
        assert_eq!(probed.len(), 3);
        assert_eq!(t0.elapsed(), Duration::from_secs(5));
        // Under way when the signal came: abandoned, not recorded.
        let lanes = vec![lane("a", "https://a.example/v1", &["1", "2"], 90.0)];
        let stop = Some((Duration::from_secs(5), Stop::Signal(StopSignal::Terminate)));
        let (r, _, probed) = run_stopped(lanes, Duration::from_secs(30), stop).await;
        assert_eq!(r.unwrap(), 2);
        assert!(probed.is_empty());
    }

    #[test]
    fn the_progress_line_counts_results_as_they_land() {
        let mut t = Tally::default();
        assert_eq!(
            t.line("next: m in 18s", Some((1, 5))),
            "next: m in 18s (1/5)"
        );
        let bar = ProgressBar::hidden();
        let o = |failure: Option<FailureType>, status: Option<u16>, error: Option<&str>| Outcome {
            failure,
            latency_ms: if status.is_some() { 412 } else { 0 },
            status,
            error: error.map(str::to_string),
            unreachable: status.is_none(),
            retry_at: None,
            model_gone: false,
            timing: Default::default(),
        };
        let ok = Entry::new("t".into(), "groq", "a", &o(None, Some(200), None));
        let limited = Entry::new(
            "t".into(),
            "groq",
            "b",
            &o(Some(FailureType::RateLimit), Some(429), Some("slow down")),
        );
        let gone = Entry::new(
            "t".into(),
            "groq",
            "c",
            &o(Some(FailureType::Error), None, Some("dns lookup failed")),
        );
        for e in [&ok, &limited, &ok] {
            t.add(&bar, e);
        }
        assert_eq!(
            t.line("next: m in 18s", Some((3, 5))),
            "2 ok · 1 failed · next: m in 18s (3/5)"
        );
        assert_eq!(result_line(&ok), "groq::a: ok, 412 ms");
        assert_eq!(
            result_line(&limited),
            "groq::b: rate_limit (429), 412 ms: slow down"
        );
        assert_eq!(
            result_line(&gone),
            "groq::c: error, no response: dns lookup failed"
        );
    }

    #[test]
    fn start_offsets_are_checked() {
        let mut l = lane("a", "https://a.example/v1", &["1", "2", "3"], 3600.0);
        assert_eq!(start_offset(&l, 2).unwrap(), Duration::from_secs(7200));
        l.spacing = Duration::MAX;
        let err = start_offset(&l, 2).unwrap_err();
        assert_eq!(err.exit_code(), exit::USAGE);
    }
}
