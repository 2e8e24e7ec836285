//! `llmprobe check`: the flags, and the order of a run. The run itself is
//! the [`crate::check`] library; the channels that hear how it went
//! (`last_run.json`, `--ping-url`, `--prom-file`, the `--notify` alerts)
//! are [`crate::run_observer::RunObserver`]s, registered here.

use std::sync::Arc;
use std::time::Duration;

use crate::capabilities::Findings;
use crate::catalog::{bounded_secs, bounds, model_key};
use crate::check::budget::{Book, Skips};
use crate::check::writer::Writer;
use crate::check::{paused, plan, report};
use crate::cli::{CapabilityProbes, CheckArgs, GlobalArgs};
use crate::discovery;
use crate::due;
use crate::error::{Error, Result};
use crate::exit;
use crate::fsutil::{DataLock, RunKind, RunLock};
use crate::healthlog;
use crate::lastrun::LastRunRecord;
use crate::notify::check_alerts::NotifyObserver;
use crate::outcome::SOURCE_REPROBE;
use crate::output;
use crate::ping::{PingObserver, Pinger};
use crate::route::shared::check_publisher::Publisher;
use crate::run_observer::{FinishedRun, Observers, Ran};
use crate::settings::Settings;
use crate::state::States;
use crate::textfile::PromFile;

/// The longest a whole run waits for a `check --paused` run that holds the
/// run lock (past it, exit 3 as for any other holder). A paused run
/// probes only the paused models that are due, so it is short: this
/// covers ten due models of one provider at the default spacing.
pub const PAUSED_RUN_WAIT: Duration = Duration::from_secs(15 * 60);

/// `llmprobe check` from the command line. The settings are loaded here,
/// after the observers are set up, so that a broken config file is reported
/// to `--ping-url` too.
pub fn main(g: &GlobalArgs, a: CheckArgs) -> Result<u8> {
    if a.paused {
        return paused(g, a);
    }
    // A bad `--ping-url` is an error at once (exit 2): there is nowhere to
    // report anything. `--list` and `--dry-run` are not runs: no pings.
    let ping = a.ping_url.as_deref().map(Pinger::new).transpose()?;
    let mut observers = Observers::default();
    observers.push(LastRunRecord);
    if let Some(p) = ping.filter(|_| !a.list && !a.dry_run) {
        observers.push(PingObserver::new(p));
    }
    let result = match a.prom_file.as_deref().map(PromFile::new).transpose() {
        Ok(prom) => {
            if let Some(prom) = prom {
                observers.push(prom);
            }
            Settings::load(g).and_then(|s| {
                // A URL that names no channel is an error even for --list
                // and --dry-run, which send nothing.
                let notify =
                    NotifyObserver::new(&s, &a.notify, &a.notify_on, a.notify_after, false)?;
                if let Some(n) = notify.filter(|_| !a.list && !a.dry_run) {
                    observers.push(n);
                }
                run_with(&s, a, &mut observers)
            })
        }
        Err(e) => Err(e),
    };
    observers.end(&result);
    result.map(Ran::code)
}

/// `check --paused`: a run that no heartbeat channel hears of.
/// `last_run.json`, `--ping-url` (or `LLMPROBE_PING_URL`, which a
/// schedule's env file may set for the hourly run) and `--prom-file` are
/// the hourly run's heartbeat; a line every 10 minutes must never make a
/// dead hourly job look alive. Alerts are not a heartbeat: a re-probe that
/// brings a model back (or disables it) is a change worth telling, so
/// `--notify` (and `LLMPROBE_NOTIFY`) hear of it.
fn paused(g: &GlobalArgs, a: CheckArgs) -> Result<u8> {
    if a.ping_url.is_some() || a.prom_file.is_some() {
        tracing::info!(
            "check --paused: --ping-url and --prom-file are for the hourly run; ignored"
        );
    }
    let s = Settings::load(g)?;
    let mut observers = Observers::default();
    if let Some(n) = NotifyObserver::new(&s, &a.notify, &a.notify_on, a.notify_after, true)? {
        observers.push(n);
    }
    run_with(&s, a, &mut observers).map(Ran::code)
}

/// A run with settings made elsewhere (`demo`): it writes `last_run.json`,
/// and has no other channel.
pub fn run(s: &Settings, a: CheckArgs) -> Result<u8> {
    let mut observers = Observers::default();
    observers.push(LastRunRecord);
    run_with(s, a, &mut observers).map(Ran::code)
}

/// The order of a run: `--if-due` first (a skip takes no lock, waits for
/// nothing and changes no file), then the plan (so that a bad flag or
/// nothing to probe fails before any wait), the `--jitter` wait, the run
/// lock, `--if-due` again (another run may have finished during the wait),
/// the start ping, the probes, then `last_run.json`, `--prom-file` and the
/// summary.
fn run_with(s: &Settings, a: CheckArgs, observers: &mut Observers) -> Result<Ran> {
    if a.list {
        return super::providers::list(s, a.json).map(Ran::NotARun);
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
    let shared_state = shared_state(s, &a)?;
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
    // Discovered models, from the cached lists: those that passed, and
    // (not for `--paused`) a few on probation. The lists are read again
    // once the run holds its lock.
    let who = match a.paused {
        true => discovery::For::Route,
        false => discovery::For::Check,
    };
    let (adopted_s, mut adopted) = discovery::with_adopted(s, who, clock.now())?;
    let build = |s: &Settings| -> Result<plan::Plan> {
        plan::plan(
            s,
            &a.provider,
            &a.model,
            &states,
            spacing,
            timeout,
            if a.paused {
                CapabilityProbes::None
            } else {
                a.capabilities
            },
        )
    };
    let mut plan = build(&adopted_s)?;
    if a.paused && !retain_due(s, &mut plan, &states, &clock)? {
        return Ok(Ran::NotDue);
    }
    // A provider that discovers may have no model until its list is read
    // (after the lock): only then is an empty plan final.
    let discovers = !a.paused
        && s.catalog
            .providers
            .iter()
            .any(|p| p.discover != crate::catalog::Discover::Off && p.resolve().is_ok());
    if plan.lanes.is_empty() && (!discovers || a.dry_run) {
        return Err(plan::nothing_to_probe(&plan));
    }
    // The verdicts are read only when some capability probe may run, so a
    // bad file never stops `--capabilities none`; like a bad state file, it
    // stops any other run before the first probe (exit 4).
    let findings = |plan: &mut plan::Plan| -> Result<()> {
        if plan.wants_capabilities() {
            plan.set_findings(
                Findings::load(&s.capabilities_path()).map_err(without_capabilities)?,
            );
        }
        Ok(())
    };
    findings(&mut plan)?;
    // The probe budget and traffic evidence: what need not be probed now,
    // the order, and the ledger each probe is counted in.
    let budget = |plan: &mut plan::Plan| -> Result<(Arc<Book>, Skips)> {
        let keys: Vec<String> = plan
            .lanes
            .iter()
            .flat_map(|l| {
                l.models
                    .iter()
                    .map(|m| model_key(&l.resolved.provider.name, m))
            })
            .collect();
        let last = crate::check::budget::last_probes(&s.log_path(), &keys, clock.now())?;
        let traffic = shared_state
            .as_deref()
            .filter(|_| !a.paused)
            .and_then(|url| crate::route::shared::traffic_blocking(url, &keys, "this run"));
        let shared = shared_state.as_deref().map(|url| {
            Arc::new(crate::route::shared::CheckUsage::new(url))
                as Arc<dyn crate::usage::SharedUsage>
        });
        let (book, skips) = crate::check::budget::apply(
            s.stats_dir(),
            plan,
            &states,
            &last,
            (shared, traffic),
            (!a.paused).then_some(s.catalog.defaults.traffic_evidence),
            &clock,
        )?;
        Ok((Arc::new(book), skips))
    };
    if a.dry_run {
        let (book, mut skips) = budget(&mut plan)?;
        // What the allowance would stop now, as a run would find it at
        // the first probe (later probes of the run count too: not shown).
        let stopped = book.would_stop(&plan);
        plan.drop_models(|k| stopped.iter().any(|s| s.model == k));
        skips.budget.extend(stopped);
        let due = a
            .if_due
            .map(|i| due::if_due(s.stats_dir(), i, clock.now()).map(|d| (i, d)))
            .transpose()?;
        return report::dry_run(&plan, &skips, a.json, a.jitter, due, clock.now())
            .map(Ran::NotARun);
    }
    if let Some(max) = a.jitter {
        due::wait(due::jitter_delay(max), max, &clock);
    }
    let _run_lock = if a.paused {
        match RunLock::try_acquire_as(s.stats_dir(), RunKind::Paused) {
            // The running check probes paused models itself.
            Err(Error::Locked(_)) => {
                eprintln!(
                    "check --paused: another check is running, and it probes paused models itself"
                );
                return Ok(Ran::NotDue);
            }
            lock => lock?,
        }
    } else {
        // A `check --paused` line started with this run's schedule: wait
        // for it rather than fail the hourly run.
        RunLock::acquire_after_paused(s.stats_dir(), PAUSED_RUN_WAIT, |e| {
            eprintln!(
                "check: a check --paused run holds the run lock ({}); waiting for it (up to {})",
                e.holder,
                crate::duration::format_unit(PAUSED_RUN_WAIT.as_secs() as i64)
            );
        })?
    };
    if not_due(&clock)? {
        return Ok(Ran::NotDue);
    }
    // A run that held the lock meanwhile may have probed them.
    if a.paused && !retain_due(s, &mut plan, &States::load(&s.state_path())?, &clock)? {
        return Ok(Ran::NotDue);
    }
    observers.start()?;
    {
        // Refuse a bad log before spending any probes on it.
        let lock = DataLock::acquire(s.stats_dir())?;
        healthlog::preflight(&s.log_path(), &lock)?;
        if plan.wants_capabilities() {
            healthlog::preflight(&s.capability_log_path(), &lock).map_err(without_capabilities)?;
        }
    }
    // The providers' model lists, read again where older than their
    // `list_every_secs`: what discovery adopts, and what may retire a
    // model. A list that cannot be read changes nothing.
    let mut lists_run = crate::check::writer::Lists::default();
    let mut lists_unreachable = std::collections::BTreeMap::new();
    if !a.paused {
        match read_lists(s, &plan, &a.provider, &clock) {
            Ok((lists, unreachable)) => {
                lists_unreachable = unreachable;
                let (again, now_adopted) =
                    discovery::adopt(&s.catalog, &lists, discovery::For::Check, clock.now());
                if now_adopted != adopted {
                    let mut adopted_s = s.clone();
                    adopted_s.catalog = again;
                    plan = build(&adopted_s)?;
                    findings(&mut plan)?;
                    adopted = now_adopted;
                }
                lists_run.probation = adopted.probation.clone();
                lists_run.unlisted = unlisted(&plan, &lists, clock.now());
            }
            Err(e) => eprintln!("warning: {e}; no model list was read this run"),
        }
        if plan.lanes.is_empty() {
            return Err(plan::nothing_to_probe(&plan));
        }
    }
    // Every model the run covers, a model the budget or traffic leaves
    // out of this run among them: it is not a gap.
    let scope = plan::scope(&plan);
    let (book, skips) = budget(&mut plan)?;
    let started_at = clock.now();
    tracing::info!(
        providers = plan.lanes.len(),
        probes = plan.lanes.iter().map(|l| l.models.len()).sum::<usize>(),
        "check: run starts"
    );
    let publisher = shared_state
        .as_deref()
        .and_then(|url| Publisher::start(url, s, clock.clone(), !a.paused));
    let summary = if a.paused {
        let writer = Writer::new(s).with_source(SOURCE_REPROBE);
        crate::check::execute(s, plan, writer, Some(book), skips)?
    } else {
        let writer = Writer::new(s)
            .with_lists(lists_run)
            .with_lists_unreachable(lists_unreachable);
        crate::check::execute(s, plan, writer, Some(book), skips)?
    };
    if let Some(p) = publisher {
        p.finish(summary.offline.is_some());
    }
    // The providers skipped for a missing key are said once per stats
    // directory: when the previous run skipped others (or none), not again
    // while the set stays the same. Read before this run's record
    // replaces the previous one.
    let mut summary = summary;
    summary.missing_keys_said_before = missing_keys_said_before(s, &summary.skipped);
    // The hourly run says it (and `--fail-on-skipped` fails it); a line
    // every 10 minutes would only repeat it.
    let lost_keys = (!a.paused)
        .then(|| lost_keys_line(s, &summary.skipped, clock.now().timestamp()))
        .flatten();
    let code = if let Some(i) = &summary.interrupted {
        i.exit_code
    } else if summary.offline.is_some() {
        exit::OFFLINE
    } else if (a.fail_on_down && summary.entries.iter().any(|e| e.ok == 0))
        || (a.fail_on_skipped && lost_keys.is_some())
    {
        exit::CONDITION
    } else {
        exit::SUCCESS
    };
    let mut text = report::plain_summary(&summary);
    if let Some(line) = &lost_keys {
        text.push_str(line);
        text.push('\n');
    }
    let state_path = s.state_path();
    let finished = FinishedRun {
        started_at,
        finished_at: clock.now(),
        exit_code: code,
        entries: &summary.entries,
        state_changes: &summary.state_changes,
        offline: summary.offline.is_some(),
        scope: &scope,
        skipped: &summary.skipped,
        stats_dir: s.stats_dir(),
        state_path: &state_path,
        summary: &text,
    };
    observers.recorded(&finished)?;
    tracing::info!(
        exit_code = code,
        probes = summary.entries.len(),
        passed = finished.passed(),
        state_changes = summary.state_changes.len(),
        offline = finished.offline,
        "check: run finished"
    );
    // Before the summary is printed, so that a closed stdout does not leave
    // a channel stale; an error is reported after the summary.
    let told = observers.finish(&finished);
    if a.json {
        output::print_json(&summary)?;
    } else {
        report::print_summary(&summary)?;
    }
    if let Some(line) = &lost_keys {
        eprintln!("{line}");
    }
    for line in discovery_lines(s, &adopted) {
        eprintln!("{line}");
    }
    // The run's last lines: what the offline rule kept out, and what an
    // interrupted run recorded.
    if let Some(offline) = &summary.offline {
        eprintln!("{offline}");
    }
    if let Some(i) = &summary.interrupted {
        eprintln!("{}", i.line(&summary.state_changes));
    }
    told?;
    Ok(Ran::Completed(code))
}

/// Read the lists of the run's providers (and of the providers that
/// discover, whose catalog may list no model) where they are stale, note
/// the models discovery has not seen before, and return the cache, with
/// the providers whose list failed without reaching their host (and why):
/// for the offline rule, a first probe that failed so.
fn read_lists(
    s: &Settings,
    plan: &plan::Plan,
    wanted: &[String],
    clock: &crate::clock::Clock,
) -> Result<(
    discovery::ModelLists,
    std::collections::BTreeMap<String, String>,
)> {
    let mut providers: Vec<crate::catalog::Resolved> =
        plan.lanes.iter().map(|l| l.resolved.clone()).collect();
    for p in &s.catalog.providers {
        if p.discover != crate::catalog::Discover::Off
            && !providers.iter().any(|r| r.provider.name == p.name)
            && a_provider_is_wanted(plan, wanted, &p.name)
            && let Ok(r) = p.resolve()
        {
            providers.push(r);
        }
    }
    let (got, lists) = discovery::fetch::refresh(s, &providers, false, clock)?;
    let unreachable = got
        .into_iter()
        .filter_map(|(p, g)| match g {
            discovery::fetch::Got::Failed(f) if f.kind == discovery::FailKind::Unreachable => {
                Some((p, f.why))
            }
            _ => None,
        })
        .collect();
    let now = clock.now();
    if discovery::adopt(&s.catalog, &lists, discovery::For::Check, now)
        .1
        .found
        .is_empty()
    {
        return Ok((lists, unreachable));
    }
    let lists = discovery::ModelLists::update(s.stats_dir(), now, |l| {
        discovery::note_found(l, &s.catalog, now);
        l.clone()
    })?;
    Ok((lists, unreachable))
}

/// Whether the run covers `provider`: those `--provider` names (all
/// without it), less those the plan skipped.
fn a_provider_is_wanted(plan: &plan::Plan, wanted: &[String], provider: &str) -> bool {
    (wanted.is_empty() || wanted.iter().any(|w| w == provider))
        && !plan.skipped.iter().any(|k| k.provider == provider)
}

/// The catalog models of the run whose provider's fresh list lacks them,
/// with the first day it did.
fn unlisted(
    plan: &plan::Plan,
    lists: &discovery::ModelLists,
    now: chrono::DateTime<chrono::Utc>,
) -> std::collections::BTreeMap<String, chrono::NaiveDate> {
    let mut out = std::collections::BTreeMap::new();
    for lane in &plan.lanes {
        let p = &lane.resolved;
        if lists
            .fresh(&p.provider.name, &p.base_url, p.provider.list_every, now)
            .is_none()
        {
            continue;
        }
        for m in &lane.models {
            let key = model_key(&p.provider.name, m);
            if let Some(missing) = lists.missing.get(&key) {
                out.insert(key, missing.since);
            }
        }
    }
    out
}

/// What discovery found, per provider: `openrouter: 3 new free models
/// listed (probing 2 this run)`.
fn discovery_lines(s: &Settings, adopted: &discovery::Adopted) -> Vec<String> {
    adopted
        .found
        .iter()
        .map(|(p, (waiting, entering))| {
            let free = s
                .catalog
                .provider(p)
                .is_some_and(|p| p.discover == crate::catalog::Discover::Free);
            format!(
                "{p}: {} listed, not yet passed a probe (probing {entering} this run)",
                crate::format::count(
                    *waiting,
                    if free { "new free model" } else { "new model" },
                    if free {
                        "new free models"
                    } else {
                        "new models"
                    }
                )
            )
        })
        .collect()
}

/// Whether the previous run (`last_run.json`) skipped for a missing key
/// exactly the providers `skipped` does, so that its summary said them.
fn missing_keys_said_before(s: &Settings, skipped: &[plan::Skipped]) -> bool {
    let now: std::collections::BTreeSet<&str> = skipped
        .iter()
        .filter(|k| k.missing_key())
        .map(|k| k.provider.as_str())
        .collect();
    if now.is_empty() {
        return false;
    }
    crate::lastrun::read(s.stats_dir())
        .ok()
        .flatten()
        .is_some_and(|r| {
            let before: std::collections::BTreeSet<&str> = r
                .skipped
                .iter()
                .filter(|k| k.missing_key())
                .map(|k| k.provider.as_str())
                .collect();
            before == now
        })
}

/// The one line about providers skipped for a missing key that were
/// probed in the last 7 days ([`crate::stale::lost_keys`]), if any. Only
/// when some provider was skipped for a missing key; the previous
/// `last_run.json` says when each provider was last probed, and only
/// without it is the log read (backwards, a week at most). The run is
/// recorded by then, so a log that cannot be read costs the line (with a
/// warning), never the run.
fn lost_keys_line(s: &Settings, skipped: &[plan::Skipped], now: i64) -> Option<String> {
    if !skipped.iter().any(|k| k.missing_key()) {
        return None;
    }
    // The previous run's record carries each provider's newest probe (this
    // run's last_run.json is not written yet); without it, read the log.
    let carried = crate::lastrun::read(s.stats_dir())
        .ok()
        .flatten()
        .and_then(|r| r.newest_probes());
    let newest = match carried {
        Some(n) => Ok(n),
        None => crate::stale::Newest::read(&s.log_path(), now - crate::stale::RECENT_SECS),
    };
    match newest {
        Ok(newest) => crate::stale::lost_keys_line(&crate::stale::lost_keys(skipped, &newest, now)),
        Err(e) => {
            tracing::warn!("could not tell which skipped providers were probed this week: {e}");
            None
        }
    }
}

/// Where to publish the record: `--shared-state`, else `[check]
/// shared_state` (or its variable).
fn shared_state(s: &Settings, a: &CheckArgs) -> Result<Option<String>> {
    match &a.shared_state {
        Some(url) if !url.starts_with("redis://") => Err(Error::config(format!(
            "--shared-state {:?}: expected a redis:// URL",
            crate::catalog::redact_url(url)
        ))),
        Some(url) => Ok(Some(url.clone())),
        None => Ok(s.catalog.check.shared_state.clone()),
    }
}

/// `check --paused`: cut `plan` down to the paused models due now.
/// False when none is (said under `-v` only: a cron line every 10 minutes
/// prints nothing when there is nothing to do).
fn retain_due(
    s: &Settings,
    plan: &mut plan::Plan,
    states: &States,
    clock: &crate::clock::Clock,
) -> Result<bool> {
    let due = paused::due(
        states,
        &s.log_path(),
        s.catalog.route.reprobe_paused,
        clock.now(),
    )?;
    tracing::info!("{due}");
    plan.retain_models(&due.keys);
    Ok(!plan.lanes.is_empty())
}

/// A capability data file's error, with the way to run without it.
fn without_capabilities(e: Error) -> Error {
    match e {
        Error::Data(mut d) => {
            d.message
                .push_str("; `llmprobe check --capabilities none` probes without it");
            Error::Data(d)
        }
        e => e,
    }
}

fn secs_flag(
    v: f64,
    flag: &str,
    range: std::ops::RangeInclusive<f64>,
    positive: bool,
) -> Result<Duration> {
    bounded_secs(v, range, positive).map_err(|why| Error::config(format!("{flag} {why}")))
}
