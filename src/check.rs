//! `llmprobe check`: probe every model once, append each result to the
//! health log as soon as it is known, and drive the state machine.
//!
//! Providers run concurrently; a provider's models run one after another with
//! starts at least `spacing` apart. One writer thread serialises the appends
//! and state updates, each under the data lock, so entries land in the order
//! probes finished and a crash loses nothing that was already written. The
//! whole run holds the run lock, so a second `check` exits at once with
//! code 3.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use crate::catalog::{Resolved, Unusable, model_key};
use crate::cli::CheckArgs;
use crate::error::{Error, Result};
use crate::exit;
use crate::fsutil::{DataLock, RunLock};
use crate::healthlog;
use crate::outcome::{Entry, Outcome};
use crate::output;
use crate::prompts::Pool;
use crate::secret::Redactor;
use crate::settings::Settings;
use crate::state::{ModelState, States, Transition};

/// One provider's share of a run.
#[derive(Debug)]
struct Lane {
    resolved: Resolved,
    models: Vec<String>,
    spacing: Duration,
    timeout: Duration,
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
}

pub fn run(s: &Settings, a: CheckArgs) -> Result<u8> {
    if a.list {
        return list(s, a.json);
    }
    let spacing = a
        .spacing
        .map(|v| secs_flag(v, "--spacing", true))
        .transpose()?;
    let timeout = a
        .timeout
        .map(|v| secs_flag(v, "--timeout", false))
        .transpose()?;
    let states = States::load(&s.state_path())?;
    let plan = plan(s, &a, &states, spacing, timeout)?;
    if a.dry_run {
        return if a.json {
            dry_run_json(&plan)
        } else {
            dry_run(&plan)
        };
    }
    let _run_lock = RunLock::try_acquire(s.stats_dir())?;
    {
        // Refuse a bad log before spending any probes on it.
        let lock = DataLock::acquire(s.stats_dir())?;
        healthlog::preflight(&s.log_path(), &lock)?;
    }
    if plan.lanes.is_empty() {
        eprintln!(
            "nothing to probe: no provider is ready{}. Set a provider's key variable (see `llmprobe check --list`), or try `llmprobe demo`.",
            if plan.skipped.is_empty() {
                ""
            } else {
                " (see skipped providers below)"
            }
        );
    }
    let report = execute(s, plan)?;
    if a.json {
        output::print_json(&report)?;
    } else {
        print_summary(&report)?;
    }
    let any_failed = report.entries.iter().any(|e| e.ok == 0);
    Ok(if a.fail_on_down && any_failed {
        exit::CONDITION
    } else {
        exit::SUCCESS
    })
}

fn secs_flag(v: f64, flag: &str, zero_ok: bool) -> Result<Duration> {
    match Duration::try_from_secs_f64(v) {
        Ok(d) if zero_ok || !d.is_zero() => Ok(d),
        _ => Err(Error::config(format!(
            "invalid value {v} for {flag}: expected a {} number of seconds",
            if zero_ok { "non-negative" } else { "positive" }
        ))),
    }
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
            Err(Unusable::Disabled) if a.provider.is_empty() => continue,
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

fn dry_run(plan: &Plan) -> Result<u8> {
    let mut t = output::table(&["Provider", "#", "Model", "Starts at", "Timeout"]);
    for lane in &plan.lanes {
        for (i, m) in lane.models.iter().enumerate() {
            t.add_row(vec![
                lane.resolved.provider.name.clone(),
                (i + 1).to_string(),
                m.clone(),
                format!("+{}", fmt_secs(lane.spacing * i as u32)),
                fmt_secs(lane.timeout),
            ]);
        }
    }
    let longest = plan
        .lanes
        .iter()
        .map(|l| l.spacing * (l.models.len() as u32).saturating_sub(1))
        .max()
        .unwrap_or_default();
    let mut out = format!(
        "dry run: {} probes on {} providers in parallel; the last starts at +{}\n{t}\n",
        plan.lanes.iter().map(|l| l.models.len()).sum::<usize>(),
        plan.lanes.len(),
        fmt_secs(longest)
    );
    out.push_str(&footer(&plan.skipped, &plan.not_probed));
    output::print(&out)?;
    Ok(exit::SUCCESS)
}

/// `check --dry-run --json`: the plan of [`dry_run`] as JSON.
fn dry_run_json(plan: &Plan) -> Result<u8> {
    #[derive(Serialize)]
    struct Probe<'a> {
        provider: &'a str,
        order: usize,
        model: &'a str,
        starts_at_secs: f64,
        timeout_secs: f64,
    }
    let probes: Vec<Probe> = plan
        .lanes
        .iter()
        .flat_map(|lane| {
            lane.models.iter().enumerate().map(move |(i, m)| Probe {
                provider: &lane.resolved.provider.name,
                order: i + 1,
                model: m,
                starts_at_secs: (lane.spacing * i as u32).as_secs_f64(),
                timeout_secs: lane.timeout.as_secs_f64(),
            })
        })
        .collect();
    output::print_json(&serde_json::json!({
        "dry_run": true,
        "probes": probes,
        "skipped": plan.skipped,
        "not_probed": plan.not_probed,
    }))?;
    Ok(exit::SUCCESS)
}

fn fmt_secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}s")
    } else {
        format!("{s:.2}s")
    }
}

/// Run the plan: probes in parallel lanes, results through one writer.
fn execute(s: &Settings, plan: Plan) -> Result<Report> {
    let started = crate::time::now_rfc3339();
    let redactor = Redactor::new(plan.lanes.iter().filter_map(|l| l.resolved.key.clone()));
    let progress = Progress::new(&plan.lanes);
    let (tx, rx) = mpsc::channel::<Entry>();

    // The writer: one append and one state update per result, each under
    // the data lock, so that `state` commands can interleave with a run.
    let log_path = s.log_path();
    let state_path = s.state_path();
    let stats_dir = s.stats_dir().to_path_buf();
    let disable_after = s.catalog.defaults.disable_after;
    let writer = std::thread::spawn(move || -> Result<(Vec<Entry>, Vec<Transition>)> {
        let mut entries = Vec::new();
        let mut changes = Vec::new();
        // Results that arrive together (many providers finishing at once) go
        // out in one append and one state write: one fsync each, not one per
        // entry, so the writer keeps up with any number of providers.
        while let Ok(first) = rx.recv() {
            let batch: Vec<Entry> = std::iter::once(first).chain(rx.try_iter()).collect();
            let lock = DataLock::acquire(&stats_dir)?;
            healthlog::append(&log_path, &batch, &lock)?;
            let mut states = States::load(&state_path)?;
            let before = states.clone();
            for e in &batch {
                let key = model_key(&e.provider, &e.model);
                if let Some(t) = states.apply_probe(&key, e.failure(), &e.ts, disable_after) {
                    changes.push(t);
                }
            }
            if states != before {
                states.save(&state_path, &lock)?;
            }
            drop(lock);
            entries.extend(batch);
        }
        Ok((entries, changes))
    });

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::io("cannot start the async runtime", e))?;
    let client = crate::probe::http_client();
    let pool = Arc::new(s.prompts.clone());
    let redactor = Arc::new(redactor);
    rt.block_on(async {
        let mut tasks = Vec::new();
        for (i, lane) in plan.lanes.into_iter().enumerate() {
            let (client, pool, redactor, tx) =
                (client.clone(), pool.clone(), redactor.clone(), tx.clone());
            let bar = progress.bar(i);
            tasks.push(tokio::spawn(async move {
                run_lane(lane, client, pool, redactor, tx, bar).await
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
    });
    drop(tx);
    progress.clear();
    let (entries, state_changes) = writer.join().expect("writer thread")?;
    Ok(Report {
        started,
        finished: crate::time::now_rfc3339(),
        entries,
        state_changes,
        skipped: plan.skipped,
        not_probed: plan.not_probed,
    })
}

async fn run_lane(
    lane: Lane,
    client: reqwest::Client,
    pool: Arc<Pool>,
    redactor: Arc<Redactor>,
    tx: mpsc::Sender<Entry>,
    bar: ProgressBar,
) {
    let name = lane.resolved.provider.name.clone();
    let n = lane.models.len();
    let mut next_start = tokio::time::Instant::now();
    for (i, model) in lane.models.iter().enumerate() {
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
        let start = tokio::time::Instant::now();
        next_start = start + lane.spacing;
        let ts = crate::time::now_rfc3339();
        bar.set_message(format!("probing {model}  ({}/{n})", i + 1));
        let question = {
            let mut rng = rand::rng();
            pool.draw(&mut rng)
        };
        let outcome: Outcome = crate::probe::probe(
            &client,
            &lane.resolved,
            model,
            &question,
            lane.timeout,
            &redactor,
        )
        .await;
        let entry = Entry::new(ts, &name, model, &outcome);
        if tx.send(entry).is_err() {
            // The writer stopped on an error; it is reported from there.
            break;
        }
    }
    bar.finish_with_message(format!("done ({n} probed)"));
}

/// Per-provider progress lines on stderr, only when stderr is a terminal.
struct Progress {
    multi: MultiProgress,
    bars: Vec<ProgressBar>,
}

impl Progress {
    fn new(lanes: &[Lane]) -> Progress {
        let target = if std::io::stderr().is_terminal() {
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
    out.push_str(&format!("{ok}/{} probes passed", r.entries.len()));
    if !r.state_changes.is_empty() {
        out.push_str(&format!(", {} state change(s)", r.state_changes.len()));
    }
    out.push('\n');
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
                key_set: resolved.ok().and_then(|r| r.key_source),
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
