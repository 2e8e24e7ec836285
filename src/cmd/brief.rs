//! `llmprobe brief`: the last 24 hours at a glance, for the start of a
//! working session: per provider an icon, uptime, latency, checks and the
//! last check; the models out of rotation; a routing advisory for every
//! provider to avoid; and a loud warning when the data is stale. Once
//! capabilities have been probed, the models the verdicts file or the
//! catalog says something about, with their verdicts and context window
//! ([`crate::report::capview`]): those probed in the window or whose
//! provider has its key set (`--all`: every one), the others counted.
//! `--provider` keeps only the providers named, as `state --provider`
//! does ([`crate::report::ProviderFilter`]). A provider whose own newest probe is too old
//! is stale too, in its row and in a warning ([`crate::stale`]). This file
//! gathers the files and calls; what is read of the log, how it is judged
//! and how it is shown are [`crate::report::brief`]'s.
//!
//! It runs at the start of every session, so its cost must not grow with the
//! history: only the window of the log is read, from the end
//! ([`crate::report::brief::collect`]). Each provider's newest probe
//! in the last week comes from `last_run.json`, which carries it from run
//! to run; only a stats directory whose last run did not keep it is read a
//! week back ([`crate::stale::RECENT_SECS`]).

use crate::catalog::{ModelKey, model_key};
use crate::cli::BriefArgs;
use crate::clock::Clock;
use crate::error::Result;
use crate::exit;
use crate::output;
use crate::report::ProviderFilter;
use crate::report::brief::{Brief, Cadence, ModelLine, Proven, collect};
use crate::report::capview::{self, ModelCaps};
use crate::schedule::Health;
use crate::settings::Settings;
use crate::stale;
use crate::state::{ModelState, States};
use crate::window::Window;

pub fn run(s: &Settings, args: BriefArgs) -> Result<u8> {
    let window = Window::parse(&args.window)?;
    let states = States::load(&s.state_path())?;
    // As `state --provider`: a provider the state file still names is
    // known too.
    let only = ProviderFilter::new(&s.catalog, &args.provider, |p| {
        states.keys().any(|k| ModelKey::provider_of(k) == p)
    })?;
    let now_at = Clock::from_env().now();
    let now = now_at.timestamp();
    let start = window.start(now);
    let log = s.log_path();
    // Each provider's newest probe in the last week: carried in
    // last_run.json when the last run kept it, so only the window is read;
    // else (a stats directory from before that) a week of the log.
    let carried = crate::lastrun::read(s.stats_dir())
        .ok()
        .flatten()
        .and_then(|r| r.newest_probes());
    // A week at least, for the uptime over the last hour, day and week.
    let since = match carried {
        Some(_) => start,
        None => start.min(now - stale::RECENT_SECS),
    }
    .min(now - crate::report::brief::SPANS_BACK);
    let (mut col, skipped) = collect(&log, start, since, now)?;
    // Two small files, schedule.json and last_run.json: nothing is spawned.
    let schedule = Health::assess(s.stats_dir(), now_at, col.newest);
    let mut newest = std::mem::take(&mut col.latest);
    if let Some(carried) = carried {
        for (p, t) in carried.iter() {
            newest.insert(p, t);
        }
    }
    // The models with a probe in the window, before the brief takes the
    // figures.
    let in_window = col.probed_in_window();
    let mut brief = Brief::build(&window, now, col, &states, skipped);
    crate::report::nextprobe::add_to(s, &states, &mut brief.out_of_rotation, |r| {
        (r.state == ModelState::Paused).then_some((r.model.as_str(), &mut r.reprobe))
    })?;
    brief.health_log = crate::fsutil::absolute(&log).display().to_string();
    brief.log_missing = !log.exists();
    // A bad route state is route's problem: say so, and brief the rest.
    let mut learned = crate::route::verdicts::Verdicts::default();
    let mut traffic = crate::usage::Traffic::default();
    match crate::route::persist::load::<crate::route::cooldown::Cooldowns>(
        &crate::route::persist::path(s.stats_dir()),
    ) {
        Ok(state) => {
            brief.route_cooldowns = state.cooldowns.active(now_at).cloned().collect();
            brief.route_cooldowns.sort_by_key(|b| b.until);
            learned = state.verdicts;
            traffic = state.traffic;
        }
        Err(e) => brief.route_state_error = Some(e.to_string()),
    }
    // So is a bad verdicts file: every capability is unknown meanwhile.
    let (findings, findings_error) = capview::read_findings(&s.capabilities_path());
    brief.capabilities_error = findings_error;
    let window_start = chrono::DateTime::from_timestamp(start, 0).unwrap_or_default();
    let shown = |key: &str| {
        args.all
            || in_window.contains(key)
            || findings.probed_since(key, window_start)
            || s.catalog
                .provider(ModelKey::provider_of(key))
                .is_some_and(|p| p.resolve().is_ok())
    };
    let (shown, hidden): (Vec<ModelLine>, Vec<ModelLine>) =
        model_lines(s, &findings, &learned, now_at)
            .into_iter()
            .filter(|m| only.admits_key(&m.model))
            .partition(|m| shown(&m.model));
    brief.models = shown;
    brief.hidden_models = hidden;
    brief.set_speed(&findings);
    budget_lines(s, &states, &newest, &traffic, now_at, &mut brief)?;
    brief.catalog_notes = catalog_notes(s, now_at, &only);
    brief.warnings = schedule.warnings.clone();
    brief.judge_providers(s, &states, &newest, &schedule, &only);
    brief.keep(&only);
    brief.schedule = Some(schedule);
    brief.healthy = !brief.stale
        && brief.stale_providers.is_empty()
        && brief.advisories.is_empty()
        && brief.warnings.is_empty()
        && brief.route_state_error.is_none()
        && brief.capabilities_error.is_none();
    if args.quiet_if_healthy && brief.healthy {
        return Ok(exit::SUCCESS);
    }
    if args.json {
        output::print_json(&brief)?;
    } else {
        output::print(&brief.text())?;
    }
    Ok(exit::SUCCESS)
}

/// Every catalog model, then every other model the verdicts file names,
/// with what is known of its capabilities.
fn model_lines(
    s: &Settings,
    findings: &crate::capabilities::Findings,
    learned: &crate::route::verdicts::Verdicts,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<ModelLine> {
    let mut keys: Vec<String> = s.catalog.model_keys().collect();
    let catalog: std::collections::HashSet<String> = keys.iter().cloned().collect();
    keys.extend(
        findings
            .models()
            .map(|(k, _)| k.to_string())
            .filter(|k| !catalog.contains(k)),
    );
    keys.into_iter()
        .map(|model| {
            let info = capview::catalog_info(&s.catalog, &model);
            ModelLine {
                caps: ModelCaps::of(&model, info, findings, learned, now),
                model,
            }
        })
        .collect()
}

/// The probe budget's cadences and the traffic's proofs, for the models of
/// the providers probed this week that are still probed.
fn budget_lines(
    s: &Settings,
    states: &States,
    newest: &stale::Newest,
    traffic: &crate::usage::Traffic,
    now: chrono::DateTime<chrono::Utc>,
    brief: &mut Brief,
) -> Result<()> {
    let mut active = Vec::new();
    for p in &s.catalog.providers {
        if newest.get(&p.name).is_none() || stale::retired(p, states) {
            continue;
        }
        let models: Vec<&String> = p
            .models
            .iter()
            .filter(|m| states.state_of(&model_key(&p.name, m)) != ModelState::Disabled)
            .collect();
        for m in &models {
            let key = model_key(&p.name, m);
            if let Some(cadence) =
                crate::usage::budget::by_catalog(p, m, models.len()).cadence_words()
            {
                brief.probe_budget.push(Cadence {
                    model: key.clone(),
                    cadence,
                });
            }
            if states.state_of(&key) == ModelState::Active {
                active.push(key);
            }
        }
    }
    // Routers that share their state keep their traffic in Redis.
    let mut traffic = traffic.clone();
    if let Some(url) = &s.catalog.check.shared_state
        && let Some(t) = crate::route::shared::traffic_blocking(url, &active, "brief")
    {
        traffic.merge(&t);
    }
    active.retain(|k| traffic.models.contains_key(k));
    let last = crate::check::budget::last_probes(&s.log_path(), &active, now)?;
    for key in active {
        let at = last.get(&key).copied();
        let since = traffic.since(&key, at);
        if since.proves(s.catalog.defaults.traffic_evidence, at, now) {
            brief.proven_by_traffic.push(Proven {
                model: key,
                traffic: since,
            });
        }
    }
    Ok(())
}

/// What `brief` says of the catalog: per provider, what discovery found
/// in the last day and how many of those are still on probation
/// (docs/discovery.md). A cache that cannot be read costs the notes.
fn catalog_notes(
    s: &Settings,
    now: chrono::DateTime<chrono::Utc>,
    only: &ProviderFilter,
) -> Vec<String> {
    let mut notes = deprecation_notes(s, now, only);
    notes.extend(discovery_notes(s, now, only));
    notes
}

/// A week before a model in use (its provider's key set) is deprecated
/// (`model_info`'s `deprecated`), and after, by the wall clock: the day,
/// and its `successor` where the catalog names one.
fn deprecation_notes(
    s: &Settings,
    now: chrono::DateTime<chrono::Utc>,
    only: &ProviderFilter,
) -> Vec<String> {
    let today = now.date_naive();
    let mut out = Vec::new();
    for p in s
        .catalog
        .providers
        .iter()
        .filter(|p| only.admits(&p.name) && p.resolve().is_ok())
    {
        for m in &p.models {
            let info = p.info(m);
            let Some(day) = info.deprecated else {
                continue;
            };
            let left = (day - today).num_days();
            let then = match &info.successor {
                Some(next) => format!("; its successor is {}::{next}", p.name),
                None => String::new(),
            };
            let key = crate::catalog::model_key(&p.name, m);
            if left < 0 {
                out.push(format!("deprecated: {key} since {day}{then}"));
            } else if left <= 7 {
                out.push(format!(
                    "deprecated soon: {key} on {day} ({}){then}",
                    crate::format::count(left as usize, "day left", "days left")
                ));
            }
        }
    }
    out
}

/// What discovery found, per provider.
fn discovery_notes(
    s: &Settings,
    now: chrono::DateTime<chrono::Utc>,
    only: &ProviderFilter,
) -> Vec<String> {
    use crate::discovery::{ModelLists, Probation};
    let lists = match ModelLists::load(s.stats_dir()) {
        Ok(l) => l,
        Err(e) => return vec![format!("note: {e}; discovery's findings are not shown")],
    };
    let mut by_provider: std::collections::BTreeMap<&str, (usize, usize, usize)> =
        Default::default();
    for (key, d) in &lists.discovered {
        let p = ModelKey::provider_of(key);
        if !only.admits(p) {
            continue;
        }
        let e = by_provider.entry(p).or_default();
        if now - d.first_listed < chrono::TimeDelta::days(1) {
            e.0 += 1;
        }
        match d.status {
            Probation::New if d.probed_at.is_none() => e.1 += 1,
            Probation::New => e.2 += 1,
            _ => {}
        }
    }
    by_provider
        .into_iter()
        .filter(|(_, (found, waiting, trying))| found + waiting + trying > 0)
        .map(|(p, (found, waiting, trying))| {
            let mut parts = Vec::new();
            if found > 0 {
                parts.push(format!(
                    "{} listed in the last day",
                    crate::format::count(found, "new model", "new models")
                ));
            }
            if waiting > 0 {
                parts.push(format!("{waiting} new (not yet probed)"));
            }
            if trying > 0 {
                parts.push(format!("{trying} probed, not yet passed"));
            }
            format!("{p}: {}", parts.join("; "))
        })
        .collect()
}
