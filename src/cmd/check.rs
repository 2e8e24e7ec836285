//! `llmprobe check`: probe every model once, append each result to the
//! health log as soon as it is known, and drive the state machine.
//!
//! Providers run concurrently; a provider's models run one after another with
//! starts at least `spacing` apart. One writer thread serialises the appends
//! and state updates, each under the data lock, so entries land in the order
//! probes finished and a crash loses nothing that was already written. The
//! whole run holds the run lock, so a second `check` exits at once with
//! code 3.
//!
//! A run is offline when every probe to a remote (non-loopback) provider
//! failed to reach its host. Those results say nothing about the providers,
//! so the writer holds remote unreachable results back until some remote
//! host answers; if none ever does, they are dropped, no state changes, and
//! the run exits 6. Loopback providers are judged on their own.
//!
//! Probes go through the [`Prober`] trait, so the scheduler (spacing,
//! parallel lanes, errors) is tested with tokio's paused time and a mock.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use crate::catalog::{Resolved, Unusable, bounded_secs, bounds, model_key};
use crate::cli::{CheckArgs, GlobalArgs};
use crate::due;
use crate::error::{Error, Result};
use crate::exit;
use crate::fsutil::{DataLock, RunLock};
use crate::healthlog;
use crate::outcome::{Entry, Outcome, Verdict};
use crate::output;
use crate::ping::Pinger;
use crate::prompts::Pool;
use crate::settings::Settings;
use crate::state::{ModelState, States, Transition};
use crate::upstream::secret::Redactor;

/// One provider's share of a run.
#[derive(Debug)]
pub struct Lane {
    pub resolved: Resolved,
    pub models: Vec<String>,
    pub spacing: Duration,
    pub timeout: Duration,
}

/// Asks one model one question. The real one is [`HttpProber`]; tests of the
/// scheduler use a mock under tokio's paused time.
pub trait Prober: Send + Sync + 'static {
    fn probe(&self, lane: &Lane, model: &str) -> impl Future<Output = Outcome> + Send;
}

/// The real prober: a randomised question from the pool, over HTTP.
pub struct HttpProber {
    client: reqwest::Client,
    pool: Pool,
    redactor: Redactor,
}

impl Prober for HttpProber {
    async fn probe(&self, lane: &Lane, model: &str) -> Outcome {
        let question = {
            let mut rng = rand::rng();
            self.pool.draw(&mut rng)
        };
        crate::probe::probe(
            &self.client,
            &lane.resolved,
            model,
            &question,
            lane.timeout,
            &self.redactor,
        )
        .await
    }
}

/// One finished probe on its way to the writer.
#[derive(Debug)]
pub struct Probed {
    pub entry: Entry,
    pub verdict: Verdict,
    /// The provider is not on this machine.
    pub remote: bool,
    /// No response: the host could not be reached.
    pub unreachable: bool,
}

/// A provider left out of the run, and why.
#[derive(Debug, Clone, Serialize)]
struct Skipped {
    provider: String,
    reason: String,
}

/// A model left out because of its state.
#[derive(Debug, Clone, Serialize)]
struct NotProbed {
    model: String,
    state: ModelState,
}

#[derive(Debug)]
struct Plan {
    lanes: Vec<Lane>,
    skipped: Vec<Skipped>,
    not_probed: Vec<NotProbed>,
}

#[derive(Debug, Serialize)]
struct Report {
    started: String,
    finished: String,
    entries: Vec<Entry>,
    state_changes: Vec<Transition>,
    skipped: Vec<Skipped>,
    not_probed: Vec<NotProbed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    offline: Option<Offline>,
}

/// No remote provider could be reached: what was not recorded, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Offline {
    /// Remote providers probed.
    pub providers: usize,
    /// Probes whose results were dropped.
    pub probes: usize,
    /// The distinct transport errors, e.g. "dns lookup failed".
    pub causes: Vec<String>,
}

impl std::fmt::Display for Offline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "offline: none of {} remote provider{} could be reached ({}); nothing recorded",
            self.providers,
            if self.providers == 1 { "" } else { "s" },
            self.causes.join(", ")
        )
    }
}

/// How a `check` invocation ended, for the monitoring hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ran {
    /// `--list` or `--dry-run`: not a run, nothing to ping.
    NotARun(u8),
    /// `--if-due`: the last run is recent; nothing was done (exit 0). A
    /// skip sends no ping: the monitor expects one ping per real run, and
    /// its period and grace are those of the runs, not of the triggers.
    NotDue,
    /// A run that completed: exit 0, 1 (`--fail-on-down`) or 6 (offline).
    Completed(u8),
}

impl Ran {
    fn code(self) -> u8 {
        match self {
            Ran::NotARun(c) | Ran::Completed(c) => c,
            Ran::NotDue => exit::SUCCESS,
        }
    }
}

/// `--ping-url` and `--prom-file`, checked before anything runs.
#[derive(Debug, Default)]
struct Hooks {
    ping: Option<Pinger>,
    prom_file: Option<PathBuf>,
    /// The run's summary, for the end ping, once the run has one.
    summary: Option<String>,
}

impl Hooks {
    /// A bad `--ping-url` is an error at once (exit 2): there is nowhere to
    /// report anything. `--list` and `--dry-run` are not runs: no pings.
    fn new(a: &CheckArgs) -> Result<Hooks> {
        let ping = a.ping_url.as_deref().map(Pinger::new).transpose()?;
        Ok(Hooks {
            ping: ping.filter(|_| !a.list && !a.dry_run),
            prom_file: a.prom_file.clone(),
            summary: None,
        })
    }

    /// The end ping: success for exit 0, fail for anything else.
    fn finish(&mut self, result: &Result<Ran>) {
        let Some(ping) = &mut self.ping else {
            return;
        };
        let (code, error) = match result {
            Ok(Ran::NotARun(_) | Ran::NotDue) => return,
            Ok(Ran::Completed(code)) => (*code, None),
            // A closed stdout is not a failure (see `crate::run`).
            Err(e) if e.is_broken_pipe() => (exit::SUCCESS, None),
            Err(e) => (e.exit_code(), Some(e)),
        };
        let mut body = format!("llmprobe check: exit {code} ({})\n", exit::meaning(code));
        if let Some(summary) = &self.summary {
            body.push_str(summary);
        }
        if let Some(e) = error {
            body.push_str(&format!("error: {e}\n"));
        }
        ping.finish(code == exit::SUCCESS, &body);
    }
}

/// `llmprobe check` from the command line. The settings are loaded here,
/// inside the hooks, so that a broken config file is reported to
/// `--ping-url` too.
pub fn main(g: &GlobalArgs, a: CheckArgs) -> Result<u8> {
    let mut hooks = Hooks::new(&a)?;
    let result = a
        .prom_file
        .as_deref()
        .map_or(Ok(()), crate::textfile::check_path)
        .and_then(|()| Settings::load(g))
        .and_then(|s| run_with(&s, a, &mut hooks));
    hooks.finish(&result);
    result.map(Ran::code)
}

/// A run with settings made elsewhere (`demo`), without hooks.
pub fn run(s: &Settings, a: CheckArgs) -> Result<u8> {
    run_with(s, a, &mut Hooks::default()).map(Ran::code)
}

/// The order of a run: `--if-due` first (a skip takes no lock, waits for
/// nothing and changes no file), then the plan (so that a bad flag or
/// nothing to probe fails before any wait), the `--jitter` wait, the run
/// lock, `--if-due` again (another run may have finished during the wait),
/// the start ping, the probes, then `last_run.json`, `--prom-file` and the
/// summary.
fn run_with(s: &Settings, a: CheckArgs, hooks: &mut Hooks) -> Result<Ran> {
    if a.list {
        return list(s, a.json).map(Ran::NotARun);
    }
    let spacing = a
        .spacing
        .map(|v| secs_flag(v, "--spacing", bounds::SPACING_SECS, false))
        .transpose()?;
    let timeout = a
        .timeout
        .map(|v| secs_flag(v, "--timeout", bounds::TIMEOUT_SECS, true))
        .transpose()?;
    due::check_bounds(a.jitter, a.if_due)?;
    let clock = crate::clock::Clock::from_env();
    let not_due = |clock: &crate::clock::Clock| -> Result<bool> {
        let Some(interval) = a.if_due else {
            return Ok(false);
        };
        let decision = due::if_due(s.stats_dir(), interval, clock.now())?;
        if !decision.is_due() {
            eprintln!("{decision}");
        }
        Ok(!decision.is_due())
    };
    if !a.dry_run && not_due(&clock)? {
        return Ok(Ran::NotDue);
    }
    let states = States::load(&s.state_path())?;
    let plan = plan(s, &a, &states, spacing, timeout)?;
    if plan.lanes.is_empty() {
        return Err(nothing_to_probe(&plan));
    }
    if a.dry_run {
        let due = a
            .if_due
            .map(|i| due::if_due(s.stats_dir(), i, clock.now()).map(|d| (i, d)))
            .transpose()?;
        return dry_run(&plan, a.json, a.jitter, due).map(Ran::NotARun);
    }
    if let Some(max) = a.jitter {
        due::wait(due::jitter_delay(max), max, &clock);
    }
    let created = !s.stats_dir().exists();
    let _run_lock = RunLock::try_acquire(s.stats_dir())?;
    if not_due(&clock)? {
        return Ok(Ran::NotDue);
    }
    if let Some(p) = &mut hooks.ping {
        p.start();
    }
    if created {
        eprintln!("created stats directory {}", s.stats_dir().display());
    }
    {
        // Refuse a bad log before spending any probes on it.
        let lock = DataLock::acquire(s.stats_dir())?;
        healthlog::preflight(&s.log_path(), &lock)?;
    }
    let started_at = clock.now();
    let scope = plan_scope(&plan);
    tracing::info!(
        providers = plan.lanes.len(),
        probes = plan.lanes.iter().map(|l| l.models.len()).sum::<usize>(),
        "check: run starts"
    );
    let report = execute(s, plan)?;
    let code = if report.offline.is_some() {
        exit::OFFLINE
    } else if a.fail_on_down && report.entries.iter().any(|e| e.ok == 0) {
        exit::CONDITION
    } else {
        exit::SUCCESS
    };
    let finished_at = clock.now();
    crate::lastrun::write(
        s.stats_dir(),
        &crate::lastrun::LastRun {
            version: crate::lastrun::LastRun::VERSION,
            started_at,
            finished_at,
            exit_code: code,
            offline: report.offline.is_some(),
            probes: report.entries.len() as u64,
            ok: report.entries.iter().filter(|e| e.ok != 0).count() as u64,
        },
    )?;
    tracing::info!(
        exit_code = code,
        probes = report.entries.len(),
        passed = report.entries.iter().filter(|e| e.ok != 0).count(),
        state_changes = report.state_changes.len(),
        offline = report.offline.is_some(),
        "check: run finished"
    );
    if hooks.ping.is_some() {
        hooks.summary = Some(plain_summary(&report));
    }
    // Written before the summary is printed, so that a closed stdout does
    // not leave it stale; an error is reported after the summary.
    let prom = match &hooks.prom_file {
        Some(path) => write_prom(s, path, &report, scope, finished_at),
        None => Ok(()),
    };
    if a.json {
        output::print_json(&report)?;
    } else {
        print_summary(&report)?;
    }
    if let Some(offline) = &report.offline {
        eprintln!("{offline}");
    }
    prom?;
    Ok(Ran::Completed(code))
}

/// Every model the run covers, probed or skipped as disabled, as
/// (provider, model).
fn plan_scope(plan: &Plan) -> Vec<(String, String)> {
    let mut scope: Vec<(String, String)> = plan
        .lanes
        .iter()
        .flat_map(|l| {
            l.models
                .iter()
                .map(|m| (l.resolved.provider.name.clone(), m.clone()))
        })
        .collect();
    scope.extend(plan.not_probed.iter().filter_map(|n| {
        n.model
            .split_once("::")
            .map(|(p, m)| (p.to_string(), m.to_string()))
    }));
    scope
}

/// `--prom-file`: the run's probes, and each model's state after it.
fn write_prom(
    s: &Settings,
    path: &std::path::Path,
    report: &Report,
    scope: Vec<(String, String)>,
    finished_at: chrono::DateTime<chrono::Utc>,
) -> Result<()> {
    let states = States::load(&s.state_path())?;
    let metrics = crate::textfile::RunMetrics {
        probes: &report.entries,
        states: scope
            .into_iter()
            .map(|(p, m)| {
                let state = states.state_of(&model_key(&p, &m));
                (p, m, state)
            })
            .collect(),
        finished_at,
        offline: report.offline.is_some(),
    };
    crate::textfile::write(path, &metrics.render())?;
    tracing::info!(path = %path.display(), "--prom-file written");
    Ok(())
}

/// The run in a few plain lines, for the end ping's body: counts, each
/// failure (its error is already redacted), each state change, the
/// skipped providers, and the offline note.
fn plain_summary(r: &Report) -> String {
    let ok = r.entries.iter().filter(|e| e.ok == 1).count();
    let mut out = format!(
        "{ok}/{} probes passed, {} state change(s)\n",
        r.entries.len(),
        r.state_changes.len()
    );
    for e in r.entries.iter().filter(|e| e.ok == 0) {
        let status = e.status.map(|s| format!(" ({s})")).unwrap_or_default();
        let error = e
            .error
            .as_ref()
            .map(|x| format!(": {x}"))
            .unwrap_or_default();
        out.push_str(&format!(
            "failed {}::{}: {}{status}{error}\n",
            e.provider, e.model, e.failure_type
        ));
    }
    for t in &r.state_changes {
        out.push_str(&format!(
            "state {}: {} → {} ({})\n",
            t.model, t.from, t.to, t.reason
        ));
    }
    out.push_str(&footer(&r.skipped, &r.not_probed));
    if let Some(offline) = &r.offline {
        out.push_str(&format!("{offline}\n"));
    }
    out
}

fn secs_flag(
    v: f64,
    flag: &str,
    range: std::ops::RangeInclusive<f64>,
    positive: bool,
) -> Result<Duration> {
    bounded_secs(v, range, positive).map_err(|why| Error::config(format!("{flag} {why}")))
}

/// Why a run has nothing to do, and what to do about it. A cron job that
/// lost its keys must not look healthy, so this is an error (exit 2).
fn nothing_to_probe(plan: &Plan) -> Error {
    let mut why = Vec::new();
    let missing = plan
        .skipped
        .iter()
        .filter(|s| s.reason.starts_with("skipped"))
        .count();
    if missing > 0 {
        why.push(format!("{missing} skipped for a missing key"));
    }
    let other = plan.skipped.len() - missing;
    if other > 0 {
        why.push(format!("{other} off or misconfigured"));
    }
    if !plan.not_probed.is_empty() {
        why.push(format!("{} model(s) disabled", plan.not_probed.len()));
    }
    let detail = if why.is_empty() {
        String::new()
    } else {
        format!(" ({})", why.join(", "))
    };
    let mut msg = format!(
        "nothing to probe: no selected provider is ready{detail}. Set a provider's key variable (`llmprobe check --list` names them), turn on a local server, or try `llmprobe demo`"
    );
    if !plan.not_probed.is_empty() {
        msg.push_str("; re-enable a disabled model with `llmprobe state enable P::M`");
    }
    let details: Vec<String> = plan
        .skipped
        .iter()
        .map(|s| format!("\n  {}: {}", s.provider, s.reason))
        .collect();
    msg.push_str(&details.concat());
    Error::config(msg)
}

fn plan(
    s: &Settings,
    a: &CheckArgs,
    states: &States,
    spacing: Option<Duration>,
    timeout: Option<Duration>,
) -> Result<Plan> {
    for p in &a.provider {
        if s.catalog.provider(p).is_none() {
            let known: Vec<&str> = s
                .catalog
                .providers
                .iter()
                .map(|p| p.name.as_str())
                .collect();
            return Err(Error::config(format!(
                "unknown provider \"{p}\" in --provider; known providers: {}",
                known.join(", ")
            )));
        }
    }
    let wanted_model = |provider: &str, model: &str| {
        a.model.is_empty()
            || a.model
                .iter()
                .any(|m| m == model || *m == model_key(provider, model))
    };
    let mut matched_models = 0usize;
    let mut plan = Plan {
        lanes: Vec::new(),
        skipped: Vec::new(),
        not_probed: Vec::new(),
    };
    for p in &s.catalog.providers {
        if !a.provider.is_empty() && !a.provider.contains(&p.name) {
            continue;
        }
        let models: Vec<&String> = p
            .models
            .iter()
            .filter(|m| wanted_model(&p.name, m))
            .collect();
        matched_models += models.len();
        if models.is_empty() {
            continue;
        }
        let resolved = match p.resolve() {
            Ok(r) => r,
            Err(Unusable::Off { .. }) if a.provider.is_empty() => continue,
            Err(why) => {
                plan.skipped.push(Skipped {
                    provider: p.name.clone(),
                    reason: why.to_string(),
                });
                continue;
            }
        };
        let mut probe = Vec::new();
        for m in models {
            let key = model_key(&p.name, m);
            match states.state_of(&key) {
                ModelState::Disabled => plan.not_probed.push(NotProbed {
                    model: key,
                    state: ModelState::Disabled,
                }),
                _ => probe.push(m.clone()),
            }
        }
        if !probe.is_empty() {
            plan.lanes.push(Lane {
                spacing: spacing.unwrap_or(p.spacing),
                timeout: timeout.unwrap_or(p.timeout),
                resolved,
                models: probe,
            });
        }
    }
    if !a.model.is_empty() && matched_models == 0 {
        return Err(Error::config(format!(
            "--model {} matches no model in the catalog (see `llmprobe check --list`)",
            a.model.join(",")
        )));
    }
    Ok(plan)
}

/// When the `i`-th model of a lane starts, after the run's start. Checked:
/// a user's spacing times a model count must not overflow.
fn start_offset(lane: &Lane, i: usize) -> Result<Duration> {
    u32::try_from(i)
        .ok()
        .and_then(|i| lane.spacing.checked_mul(i))
        .ok_or_else(|| {
            Error::config(format!(
                "provider {}: spacing {} × {} models is too long a run",
                lane.resolved.provider.name,
                crate::duration::format_secs(lane.spacing),
                lane.models.len()
            ))
        })
}

/// One planned probe, for `--dry-run`.
#[derive(Debug, Serialize)]
struct Planned<'a> {
    provider: &'a str,
    order: usize,
    model: &'a str,
    #[serde(serialize_with = "as_secs")]
    starts_at_secs: Duration,
    #[serde(serialize_with = "as_secs")]
    timeout_secs: Duration,
}

fn as_secs<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Every probe of the plan with its start offset, checked.
fn schedule(plan: &Plan) -> Result<Vec<Planned<'_>>> {
    let mut out = Vec::new();
    for lane in &plan.lanes {
        for (i, m) in lane.models.iter().enumerate() {
            out.push(Planned {
                provider: &lane.resolved.provider.name,
                order: i + 1,
                model: m,
                starts_at_secs: start_offset(lane, i)?,
                timeout_secs: lane.timeout,
            });
        }
    }
    Ok(out)
}

fn dry_run(
    plan: &Plan,
    json: bool,
    jitter: Option<Duration>,
    due: Option<(Duration, due::Decision)>,
) -> Result<u8> {
    let probes = schedule(plan)?;
    if json {
        let mut v = serde_json::json!({
            "dry_run": true,
            "probes": probes,
            "skipped": plan.skipped,
            "not_probed": plan.not_probed,
        });
        if let Some(j) = jitter {
            v["jitter_secs"] = j.as_secs_f64().into();
        }
        if let Some((interval, d)) = &due {
            v["if_due"] = serde_json::json!({
                "interval_secs": interval.as_secs_f64(),
                "due": d.is_due(),
                "note": d.to_string(),
            });
        }
        output::print_json(&v)?;
        return Ok(exit::SUCCESS);
    }
    let mut t = output::table(&["Provider", "#", "Model", "Starts at", "Timeout"]);
    for p in &probes {
        t.add_row(vec![
            p.provider.to_string(),
            p.order.to_string(),
            p.model.to_string(),
            format!("+{}", crate::duration::format_secs(p.starts_at_secs)),
            crate::duration::format_secs(p.timeout_secs),
        ]);
    }
    let longest = probes
        .iter()
        .map(|p| p.starts_at_secs)
        .max()
        .unwrap_or_default();
    let mut out = String::new();
    if let Some((_, d)) = &due {
        let stop = if d.is_due() {
            ""
        } else {
            " (a run now would stop here)"
        };
        out.push_str(&format!("{d}{stop}\n"));
    }
    if let Some(j) = jitter.filter(|j| !j.is_zero()) {
        let j = crate::duration::format(j.as_secs());
        out.push_str(&format!(
            "--jitter {j}: a random wait of up to {j} before the first probe (a dry run does not wait)\n"
        ));
    }
    out.push_str(&format!(
        "dry run: {} probes on {} providers in parallel; the last starts at +{}\n{t}\n",
        probes.len(),
        plan.lanes.len(),
        crate::duration::format_secs(longest)
    ));
    out.push_str(&footer(&plan.skipped, &plan.not_probed));
    output::print(&out)?;
    Ok(exit::SUCCESS)
}

/// Run the plan: probes in parallel lanes, results through one writer.
fn execute(s: &Settings, plan: Plan) -> Result<Report> {
    let started = crate::time::now_rfc3339();
    let progress = Progress::new(&plan.lanes);
    let (tx, rx) = mpsc::channel::<Probed>();
    let mut writer = Writer {
        log_path: s.log_path(),
        state_path: s.state_path(),
        stats_dir: s.stats_dir().to_path_buf(),
        disable_after: s.catalog.defaults.disable_after,
        reached_remote: false,
        held: Vec::new(),
        remote_providers: std::collections::BTreeSet::new(),
        entries: Vec::new(),
        changes: Vec::new(),
    };
    // The writer: one append and one state update per batch of results,
    // each under the data lock, so that `state` commands can interleave
    // with a run.
    let writer = std::thread::spawn(move || -> Result<Written> {
        // Results that arrive together (many providers finishing at once) go
        // out in one append and one state write: one fsync each, not one per
        // entry, so the writer keeps up with any number of providers.
        while let Ok(first) = rx.recv() {
            let batch: Vec<Probed> = std::iter::once(first).chain(rx.try_iter()).collect();
            writer.accept(batch)?;
        }
        Ok(writer.finish())
    });

    let rt = crate::server::runtime(2)?;
    let prober = HttpProber {
        client: crate::upstream::http::client()?,
        pool: s.prompts.clone(),
        redactor: Redactor::new(
            plan.lanes
                .iter()
                .flat_map(|l| l.resolved.secrets().cloned()),
        ),
    };
    let bars: Vec<ProgressBar> = (0..plan.lanes.len()).map(|i| progress.bar(i)).collect();
    let lanes_result = rt.block_on(run_lanes(plan.lanes, Arc::new(prober), tx, bars));
    progress.clear();
    // The writer has every result sent before a lane failed: wait for it
    // first, so nothing already probed is lost, then report the failure.
    let written = writer
        .join()
        .map_err(|p| Error::Internal(format!("the log writer panicked: {}", panic_text(&*p))))?;
    lanes_result?;
    let written = written?;
    Ok(Report {
        started,
        finished: crate::time::now_rfc3339(),
        entries: written.entries,
        state_changes: written.changes,
        skipped: plan.skipped,
        not_probed: plan.not_probed,
        offline: written.offline,
    })
}

/// Run every lane at once and wait for all of them. A lane that fails or
/// panics fails the run, after the others have finished.
pub async fn run_lanes<P: Prober>(
    lanes: Vec<Lane>,
    prober: Arc<P>,
    tx: mpsc::Sender<Probed>,
    bars: Vec<ProgressBar>,
) -> Result<()> {
    let mut tasks = Vec::new();
    for (lane, bar) in lanes.into_iter().zip(bars) {
        let name = lane.resolved.provider.name.clone();
        let (prober, tx) = (prober.clone(), tx.clone());
        tasks.push((
            name,
            tokio::spawn(async move { run_lane(lane, prober, tx, bar).await }),
        ));
    }
    drop(tx);
    let mut first_error = None;
    for (name, task) in tasks {
        let err = match task.await {
            Ok(Ok(())) => continue,
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
    first_error.map_or(Ok(()), Err)
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// One provider: its models one after another, starts `spacing` apart.
async fn run_lane<P: Prober>(
    lane: Lane,
    prober: Arc<P>,
    tx: mpsc::Sender<Probed>,
    bar: ProgressBar,
) -> Result<()> {
    let name = lane.resolved.provider.name.clone();
    let remote = !lane.resolved.is_loopback();
    let n = lane.models.len();
    let first_start = tokio::time::Instant::now();
    for (i, model) in lane.models.iter().enumerate() {
        let next_start = first_start
            .checked_add(start_offset(&lane, i)?)
            .ok_or_else(|| {
                Error::config(format!(
                    "provider {name}: spacing {} is too long",
                    crate::duration::format_secs(lane.spacing)
                ))
            })?;
        // Count down to this model's start, a second at a time, for the TTY.
        loop {
            let now = tokio::time::Instant::now();
            if now >= next_start {
                break;
            }
            let left = next_start - now;
            bar.set_message(format!(
                "next: {model} in {}s  ({}/{n})",
                left.as_secs_f64().ceil() as u64,
                i + 1
            ));
            tokio::time::sleep(left.min(Duration::from_secs(1))).await;
        }
        let ts = crate::time::now_rfc3339();
        bar.set_message(format!("probing {model}  ({}/{n})", i + 1));
        tracing::debug!(provider = %name, model = %model, "probe sent");
        let outcome = prober.probe(&lane, model).await;
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
        let probed = Probed {
            entry: Entry::new(ts, &name, model, &outcome),
            verdict: outcome.verdict(),
            remote,
            unreachable: outcome.unreachable,
        };
        if tx.send(probed).is_err() {
            // The writer stopped on an error; it is reported from there.
            break;
        }
    }
    bar.finish_with_message(format!("done ({n} probed)"));
    Ok(())
}

/// What the writer did.
#[derive(Debug)]
struct Written {
    entries: Vec<Entry>,
    changes: Vec<Transition>,
    offline: Option<Offline>,
}

/// Appends results and applies them to the state file, holding back remote
/// unreachable results until it is known that this machine is online.
struct Writer {
    log_path: std::path::PathBuf,
    state_path: std::path::PathBuf,
    stats_dir: std::path::PathBuf,
    disable_after: u32,
    /// Some remote provider answered (any HTTP response): the machine is
    /// online, and unreachable results are data.
    reached_remote: bool,
    /// Remote unreachable results, while no remote provider has answered.
    held: Vec<Probed>,
    remote_providers: std::collections::BTreeSet<String>,
    entries: Vec<Entry>,
    changes: Vec<Transition>,
}

impl Writer {
    fn accept(&mut self, batch: Vec<Probed>) -> Result<()> {
        let mut ready = Vec::with_capacity(batch.len());
        for p in batch {
            if p.remote {
                self.remote_providers.insert(p.entry.provider.clone());
                if !self.reached_remote {
                    if p.unreachable {
                        self.held.push(p);
                        continue;
                    }
                    self.reached_remote = true;
                    ready.append(&mut self.held);
                }
            }
            ready.push(p);
        }
        if ready.is_empty() {
            return Ok(());
        }
        let entries: Vec<Entry> = ready.iter().map(|p| p.entry.clone()).collect();
        let lock = DataLock::acquire(&self.stats_dir)?;
        healthlog::append(&self.log_path, &entries, &lock)?;
        let mut states = States::load(&self.state_path)?;
        let before = states.clone();
        for p in &ready {
            let key = model_key(&p.entry.provider, &p.entry.model);
            if let Some(t) = states.apply_probe(&key, p.verdict, &p.entry.ts, self.disable_after) {
                tracing::debug!(model = %t.model, from = %t.from, to = %t.to, reason = %t.reason, "state change");
                self.changes.push(t);
            }
        }
        if states != before {
            states.save(&self.state_path, &lock)?;
        }
        drop(lock);
        self.entries.extend(entries);
        Ok(())
    }

    /// Whatever is still held was never recorded: no remote provider
    /// answered, so the run was offline.
    fn finish(self) -> Written {
        let offline = (!self.held.is_empty()).then(|| {
            let mut causes: Vec<String> = Vec::new();
            for p in &self.held {
                let cause = p
                    .entry
                    .error
                    .clone()
                    .unwrap_or_else(|| p.entry.failure_type.into());
                if !causes.contains(&cause) {
                    causes.push(cause);
                }
            }
            causes.truncate(3);
            Offline {
                providers: self.remote_providers.len(),
                probes: self.held.len(),
                causes,
            }
        });
        Written {
            entries: self.entries,
            changes: self.changes,
            offline,
        }
    }
}

/// Per-provider progress lines on stderr, only when stderr is a terminal.
struct Progress {
    multi: MultiProgress,
    bars: Vec<ProgressBar>,
}

impl Progress {
    fn new(lanes: &[Lane]) -> Progress {
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

    fn bar(&self, i: usize) -> ProgressBar {
        self.bars[i].clone()
    }

    fn clear(&self) {
        let _ = self.multi.clear();
    }
}

fn print_summary(r: &Report) -> Result<()> {
    let changes: BTreeMap<&str, &Transition> = r
        .state_changes
        .iter()
        .map(|t| (t.model.as_str(), t))
        .collect();
    let mut rows: Vec<&Entry> = r.entries.iter().collect();
    rows.sort_by(|a, b| (&a.provider, &a.ts).cmp(&(&b.provider, &b.ts)));
    let mut t = output::table(&["Provider", "Model", "Result", "Latency", "State change"]);
    for e in rows {
        let result = match (e.ok, e.status) {
            (1, _) => "ok".to_string(),
            (_, Some(st)) => format!("{} ({st})", e.failure_type),
            _ => e.failure_type.to_string(),
        };
        let key = model_key(&e.provider, &e.model);
        let change = changes
            .get(key.as_str())
            .map(|t| format!("{} → {} ({})", t.from, t.to, t.reason))
            .unwrap_or_default();
        t.add_row(vec![
            e.provider.clone(),
            e.model.clone(),
            result,
            if e.latency_ms > 0 {
                format!("{} ms", e.latency_ms)
            } else {
                "no response".into()
            },
            change,
        ]);
    }
    let ok = r.entries.iter().filter(|e| e.ok == 1).count();
    let mut out = String::new();
    if !r.entries.is_empty() {
        out.push_str(&format!("{t}\n"));
    }
    // An offline run that recorded nothing says so on stderr, once; a
    // "0/0 passed" line would only blur that.
    if r.offline.is_none() || !r.entries.is_empty() {
        out.push_str(&format!("{ok}/{} probes passed", r.entries.len()));
        if !r.state_changes.is_empty() {
            out.push_str(&format!(", {} state change(s)", r.state_changes.len()));
        }
        out.push('\n');
    }
    // Details of failures, already redacted and short.
    for e in r.entries.iter().filter(|e| e.ok == 0) {
        if let Some(err) = &e.error {
            out.push_str(&format!("  {}::{}: {err}\n", e.provider, e.model));
        }
    }
    out.push_str(&footer(&r.skipped, &r.not_probed));
    output::print(&out)
}

fn footer(skipped: &[Skipped], not_probed: &[NotProbed]) -> String {
    let mut out = String::new();
    for s in skipped {
        out.push_str(&format!("{}: {}\n", s.provider, s.reason));
    }
    for n in not_probed {
        out.push_str(&format!(
            "{}: not probed ({}; `llmprobe state enable {}` to re-enable)\n",
            n.model, n.state, n.model
        ));
    }
    out
}

/// `check --list` / `providers`: every provider and model, with where its
/// key comes from and whether it is set. Never the key itself.
pub fn list(s: &Settings, json: bool) -> Result<u8> {
    #[derive(Serialize)]
    struct Row {
        provider: String,
        dialect: &'static str,
        base_url: String,
        models: Vec<String>,
        key_env: Vec<String>,
        key_set: Option<String>,
        status: String,
    }
    let rows: Vec<Row> = s
        .catalog
        .providers
        .iter()
        .map(|p| {
            let resolved = p.resolve();
            let status = match &resolved {
                Ok(_) => "ready".to_string(),
                Err(why) => why.to_string(),
            };
            Row {
                provider: p.name.clone(),
                dialect: p.dialect.as_str(),
                base_url: p.base_url.clone(),
                models: p.models.clone(),
                key_env: p.api_key_env.clone(),
                key_set: resolved
                    .ok()
                    .and_then(|r| r.key_source().map(str::to_string)),
                status,
            }
        })
        .collect();
    if json {
        let out = serde_json::json!({ "config": s.config_json(), "providers": rows });
        output::print_json(&out)?;
        return Ok(exit::SUCCESS);
    }
    let mut t = output::table(&["Provider", "Dialect", "Models", "Key", "Status"]);
    for (r, p) in rows.iter().zip(&s.catalog.providers) {
        let key = if r.key_env.is_empty() {
            "none (keyless)".to_string()
        } else {
            r.key_env
                .iter()
                .map(|v| {
                    let set = std::env::var_os(v).is_some_and(|x| !x.is_empty());
                    format!("{v} ({})", if set { "set" } else { "unset" })
                })
                .collect::<Vec<_>>()
                .join("\n")
                + if p.key_optional { "\n(optional)" } else { "" }
        };
        t.add_row(vec![
            r.provider.clone(),
            r.dialect.to_string(),
            r.models.join("\n"),
            key,
            r.status.clone(),
        ]);
    }
    let ready = rows.iter().filter(|r| r.status == "ready").count();
    output::print(&format!(
        "{t}\n{} providers, {} models; {ready} providers ready to probe\n{}\n",
        rows.len(),
        rows.iter().map(|r| r.models.len()).sum::<usize>(),
        s.config_line()
    ))?;
    Ok(exit::SUCCESS)
}

#[cfg(test)]
mod tests {
    //! The scheduler under tokio's paused time: spacing, parallel lanes and
    //! lane failures are asserted exactly, whatever the machine's load.

    use std::sync::Mutex;

    use super::*;
    use crate::catalog::Catalog;
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
            self.calls
                .lock()
                .unwrap()
                .push((format!("{}::{model}", lane.resolved.provider.name), at));
            assert!(model != "panic", "scripted panic");
            tokio::time::sleep(self.busy).await;
            Outcome {
                failure: (model == "down").then_some(FailureType::Error),
                latency_ms: 1,
                status: None,
                error: None,
                unreachable: model == "down",
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
        }
    }

    async fn run(
        lanes: Vec<Lane>,
        busy: Duration,
    ) -> (Result<()>, Vec<(String, Duration)>, Vec<Probed>) {
        let mock = Arc::new(Mock {
            t0: tokio::time::Instant::now(),
            busy,
            calls: Mutex::new(Vec::new()),
        });
        let (tx, rx) = mpsc::channel();
        let bars = lanes.iter().map(|_| ProgressBar::hidden()).collect();
        let r = run_lanes(lanes, mock.clone(), tx, bars).await;
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

    #[test]
    fn start_offsets_are_checked() {
        let mut l = lane("a", "https://a.example/v1", &["1", "2", "3"], 3600.0);
        assert_eq!(start_offset(&l, 2).unwrap(), Duration::from_secs(7200));
        l.spacing = Duration::MAX;
        let err = start_offset(&l, 2).unwrap_err();
        assert_eq!(err.exit_code(), exit::USAGE);
    }

    fn probed(provider: &str, remote: bool, unreachable: bool) -> Probed {
        let o = Outcome {
            failure: unreachable.then_some(FailureType::Error),
            latency_ms: if unreachable { 0 } else { 5 },
            status: (!unreachable).then_some(200),
            error: unreachable.then(|| "dns lookup failed".to_string()),
            unreachable,
        };
        Probed {
            entry: Entry::new("2026-12-01T00:00:00Z".into(), provider, "m", &o),
            verdict: o.verdict(),
            remote,
            unreachable,
        }
    }

    fn writer(dir: &std::path::Path) -> Writer {
        Writer {
            log_path: dir.join("health_log.json"),
            state_path: dir.join("model_state.json"),
            stats_dir: dir.to_path_buf(),
            disable_after: 3,
            reached_remote: false,
            held: Vec::new(),
            remote_providers: Default::default(),
            entries: Vec::new(),
            changes: Vec::new(),
        }
    }

    #[test]
    fn unreachable_remotes_are_held_until_one_answers() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path());
        w.accept(vec![probed("a", true, true), probed("local", false, true)])
            .unwrap();
        // Only the loopback result is written while no remote has answered.
        assert_eq!(w.entries.len(), 1);
        assert_eq!(w.entries[0].provider, "local");
        w.accept(vec![probed("b", true, false), probed("c", true, true)])
            .unwrap();
        let written: Vec<&str> = w.entries.iter().map(|e| e.provider.as_str()).collect();
        assert_eq!(written, ["local", "a", "b", "c"]);
        let done = w.finish();
        assert!(done.offline.is_none());
        assert_eq!(done.changes.len(), 3, "a, c and local are paused");
    }

    #[test]
    fn no_remote_answering_is_offline_and_writes_nothing_remote() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path());
        w.accept(vec![probed("a", true, true), probed("b", true, true)])
            .unwrap();
        w.accept(vec![probed("a", true, true)]).unwrap();
        let done = w.finish();
        let off = done.offline.expect("offline");
        assert_eq!((off.providers, off.probes), (2, 3));
        assert_eq!(
            off.to_string(),
            "offline: none of 2 remote providers could be reached (dns lookup failed); nothing recorded"
        );
        assert!(done.entries.is_empty() && done.changes.is_empty());
        assert!(!dir.path().join("health_log.json").exists());
        assert!(!dir.path().join("model_state.json").exists());
    }

    #[test]
    fn only_loopback_providers_are_never_offline() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path());
        w.accept(vec![probed("local", false, true)]).unwrap();
        let done = w.finish();
        assert!(done.offline.is_none());
        assert_eq!(done.entries.len(), 1);
    }
}
