//! `llmprobe rollup`: uptime, latency and sample counts per provider (or per
//! model) over a window, as Markdown for a README, JSON, CSV, Prometheus
//! text, an SVG badge or the status page. This file checks the flags,
//! reads and writes; what each format prints is [`crate::report::rollup`]'s.
//!
//! The figures are [`crate::healthlog::rollup`]'s: the whole log streamed
//! once, each model in a fixed-size accumulator, so memory does not grow
//! with the log.
//!
//! `--capabilities` reads the capability log instead and reports each
//! model's pass rate per capability with its latest verdict. Without it,
//! rollup reads only the health log: capability probes never count toward
//! uptime.

use std::path::Path;

use chrono::Utc;

use crate::badge;
use crate::cli::{GroupBy, RollupArgs, RollupFormat};
use crate::error::{Error, Result};
use crate::exit;
use crate::fsutil;
use crate::healthlog::rollup::{DEFAULT_WINDOW, Per, Row, compute, warn_read};
use crate::output;
use crate::report::rollup::{capabilities, csv, json, markdown, prom, replace_block};
use crate::settings::Settings;
use crate::window::Window;

pub const DEFAULT_START: &str = "<!-- BRAIN_HEALTH_START -->";
pub const DEFAULT_END: &str = "<!-- BRAIN_HEALTH_END -->";

pub fn run(s: &Settings, args: RollupArgs) -> Result<u8> {
    let format = if args.json {
        RollupFormat::Json
    } else {
        args.format
    };
    let window = Window::parse(args.window.as_deref().unwrap_or(match format {
        RollupFormat::Html => HTML_WINDOW,
        _ => DEFAULT_WINDOW,
    }))?;
    check_format_flags(&args, format)?;
    match format {
        RollupFormat::Html => return status_page(s, &args, window),
        RollupFormat::Badge => return badge(s, &args, window),
        _ => {}
    }
    if args.readme.is_some() && format != RollupFormat::Md {
        let flag = if args.json { "--json" } else { "--format" };
        return Err(Error::config(format!(
            "--readme writes Markdown; drop {flag}"
        )));
    }
    if args.markers.is_some() && args.readme.is_none() {
        return Err(Error::config("--markers only applies with --readme FILE"));
    }
    let (start_marker, end_marker) = match &args.markers {
        Some(m) => (m[0].clone(), m[1].clone()),
        None => (DEFAULT_START.to_string(), DEFAULT_END.to_string()),
    };
    if start_marker.is_empty() || end_marker.is_empty() || start_marker == end_marker {
        return Err(Error::config(
            "--markers: START and END must be two different, non-empty strings",
        ));
    }
    if args.capabilities && args.readme.is_some() && args.markers.is_none() {
        return Err(Error::config(
            "--capabilities --readme needs --markers START END of its own: the default markers hold the health block",
        ));
    }
    let now = Utc::now().timestamp();
    let text = if args.capabilities {
        capabilities(s, &window, now, format)?
    } else {
        let report = compute(&s.log_path(), &window, now, !args.no_trend)?;
        let logged: Vec<Row> = report.rows(Per::Provider);
        check_shown(s, &args, logged.iter().map(|r| r.provider.as_str()))?;
        report.warn(&s.log_path());
        let mut rows = report.rows(match args.by {
            GroupBy::Provider => Per::Provider,
            GroupBy::Model => Per::Model,
        });
        rows.retain(|r| shown(&args, &r.provider));
        let (findings, _) = crate::report::capview::read_findings(&s.capabilities_path());
        crate::report::rollup::set_speed(&mut rows, &findings);
        match format {
            RollupFormat::Md => markdown(&report, &rows, args.by),
            RollupFormat::Json => json(&report, &rows),
            RollupFormat::Csv => csv(&rows, args.by),
            RollupFormat::Prom => prom(&report, &rows, args.by),
            RollupFormat::Html | RollupFormat::Badge => unreachable!("handled above"),
        }
    };
    if let Some(readme) = &args.readme {
        let what = if args.capabilities {
            "capability"
        } else {
            "health"
        };
        update_readme(readme, &start_marker, &end_marker, &text, what)?;
    }
    if let Some(out) = &args.output {
        fsutil::atomic_write_unlocked(out, text.as_bytes())?;
    }
    if args.readme.is_none() && args.output.is_none() {
        output::print(&text)?;
    }
    Ok(exit::SUCCESS)
}

/// `--window`'s default for `--format html`: the status page's bars.
pub const HTML_WINDOW: &str = crate::status_page::WINDOW;

/// Refuse flags that the chosen format would ignore.
fn check_format_flags(args: &RollupArgs, format: RollupFormat) -> Result<()> {
    let name = match format {
        RollupFormat::Md => "md",
        RollupFormat::Json => "json",
        RollupFormat::Csv => "csv",
        RollupFormat::Prom => "prom",
        RollupFormat::Html => "html",
        RollupFormat::Badge => "badge",
    };
    let only = |flag: &str, formats: &str| {
        Err(Error::config(format!(
            "{flag} applies only to --format {formats}, not --format {name}"
        )))
    };
    if args.public && format != RollupFormat::Html {
        return only("--public", "html");
    }
    if args.by == GroupBy::Model && format == RollupFormat::Badge {
        return Err(Error::config(
            "--by model does not apply to --format badge: a badge of one model takes --model M",
        ));
    }
    if args.by == GroupBy::Model && format == RollupFormat::Html {
        return Err(Error::config(
            "--by model does not apply to --format html: the page shows each provider, then its models",
        ));
    }
    if args.no_trend && matches!(format, RollupFormat::Html | RollupFormat::Badge) {
        return only("--no-trend", "md or json");
    }
    if !args.exclude.is_empty() && format == RollupFormat::Badge {
        return Err(Error::config(
            "--exclude does not apply to --format badge: a badge is of the one --provider",
        ));
    }
    if args.model.is_some() && format != RollupFormat::Badge {
        return only("--model", "badge");
    }
    if args.metric != crate::cli::BadgeMetric::Uptime && format != RollupFormat::Badge {
        return only("--metric", "badge");
    }
    if matches!(format, RollupFormat::Html | RollupFormat::Badge) {
        if args.readme.is_some() {
            return only("--readme", "md");
        }
        if args.capabilities {
            return Err(Error::config(format!(
                "--capabilities has no --format {name}: the status page shows each model's verdicts"
            )));
        }
    }
    if let Some(p) = args.provider.iter().find(|p| args.exclude.contains(p)) {
        return Err(Error::config(format!(
            "provider {p:?} is both in --provider and in --exclude"
        )));
    }
    Ok(())
}

/// `--provider` and `--exclude` name providers the catalog or the log
/// (`logged`, every provider it holds) knows, by the badge's check
/// ([`badge::Known::provider`]): a misspelt name is exit 2 naming its flag
/// and the known names, not a page or a table of nothing.
fn check_shown<'a>(
    s: &Settings,
    args: &RollupArgs,
    logged: impl Iterator<Item = &'a str>,
) -> Result<()> {
    let logged: std::collections::BTreeSet<&str> = logged.collect();
    let known = badge::Known::of(&s.catalog);
    for (flag, names) in [("--provider", &args.provider), ("--exclude", &args.exclude)] {
        for name in names {
            if let Err(e) = known.provider(name, logged.contains(name.as_str())) {
                let all: std::collections::BTreeSet<&str> =
                    known.providers().chain(logged.iter().copied()).collect();
                return Err(Error::config(format!(
                    "{flag}: {e}; known providers: {}",
                    all.into_iter().collect::<Vec<_>>().join(", ")
                )));
            }
        }
    }
    Ok(())
}

/// Whether `--provider` or `--exclude` choose some providers.
fn shown_some(args: &RollupArgs) -> bool {
    !args.provider.is_empty() || !args.exclude.is_empty()
}

/// Whether `--provider`/`--exclude` keep this provider.
pub fn shown(args: &RollupArgs, provider: &str) -> bool {
    (args.provider.is_empty() || args.provider.iter().any(|p| p == provider))
        && !args.exclude.iter().any(|p| p == provider)
}

/// `--format html`: the status page ([`crate::status_page`]) from the stats
/// directory's files: the log, the model states, the capability verdicts
/// and, when `route_state.json` is there, the cooldowns in force.
fn status_page(s: &Settings, args: &RollupArgs, window: Window) -> Result<u8> {
    let now = crate::clock::Clock::from_env().now();
    let states = crate::state::States::load(&s.state_path())?;
    let (findings, findings_error) = crate::report::capview::read_findings(&s.capabilities_path());
    if let Some(e) = &findings_error {
        eprintln!("warning: {e}; every verdict is shown as unknown");
    }
    // A bad route state is route's problem, as in `brief`: say so, and
    // show the rest.
    let route_path = crate::route::persist::path(s.stats_dir());
    let cooldowns =
        match crate::route::persist::load::<crate::route::cooldown::Cooldowns>(&route_path) {
            Ok(route) => crate::route::providers::page_cooldowns(&route.cooldowns, now),
            Err(e) => {
                eprintln!("warning: {e}; the page shows no cooldowns");
                Vec::new()
            }
        };
    let shown = |p: &str| shown(args, p);
    let log = s.log_path();
    let page = crate::status_page::build(&crate::status_page::Inputs {
        log: &log,
        stats_dir: s.stats_dir(),
        catalog: &s.catalog,
        window: &window,
        now,
        states: &states,
        findings: &findings,
        cooldowns: &cooldowns,
        shown: &shown,
        public: args.public,
        redactor: &s.catalog.redactor(),
        cooldowns_note: if route_path.exists() {
            "cooldowns from route_state.json"
        } else {
            "no cooldowns recorded (no route_state.json)"
        },
    })?;
    check_shown(s, args, page.logged.iter().map(String::as_str))?;
    if page.newest.is_none() && !page.logged.is_empty() && shown_some(args) {
        eprintln!(
            "note: no probes of the providers shown (--provider/--exclude) in {}; the page says there is no data",
            crate::fsutil::absolute(&log).display()
        );
    } else if page.newest.is_none() {
        eprintln!(
            "note: no probes recorded in {}; the page says there is no data. Run `llmprobe check`, or pass --stats-dir if the data is elsewhere",
            crate::fsutil::absolute(&log).display()
        );
    }
    warn_read(&log, page.torn_bytes, page.skipped);
    let html = crate::status_page::render(&page);
    match &args.output {
        Some(out) => fsutil::atomic_write_unlocked(out, html.as_bytes())?,
        None => output::print(&html)?,
    }
    Ok(exit::SUCCESS)
}

/// `--format badge`: one provider's (or, with `--model`, one model's)
/// uptime or median latency as an SVG badge (docs/badges.md). A name
/// neither the catalog nor the log knows is an error; a known one without
/// probes in the window says `no data`.
fn badge(s: &Settings, args: &RollupArgs, window: Window) -> Result<u8> {
    let provider = match args.provider.as_slice() {
        [p] => p.as_str(),
        [] => {
            return Err(Error::config(
                "--format badge needs --provider NAME: a badge is of one provider (add --model M for one model)",
            ));
        }
        many => {
            return Err(Error::config(format!(
                "--format badge takes one --provider, got {}: write one badge per provider",
                many.join(", ")
            )));
        }
    };
    let now = crate::clock::Clock::from_env().now().timestamp();
    let report = compute(&s.log_path(), &window, now, false)?;
    let known = badge::Known::of(&s.catalog);
    let figures = badge::Figures::of(&report);
    let row = figures
        .find(&known, provider, args.model.as_deref())
        .map_err(|e| {
            let hint = match &e {
                badge::Unknown::Provider(_) => format!(
                    "known providers: {}",
                    known.providers().collect::<Vec<_>>().join(", ")
                ),
                badge::Unknown::Model { .. } => {
                    "`llmprobe providers` lists each provider's models".to_string()
                }
            };
            Error::config(format!("--format badge: {e}; {hint}"))
        })?;
    report.warn(&s.log_path());
    let subject = badge::subject(provider, args.model.as_deref());
    let svg = badge::Badge::of(&subject, args.metric, &window, row).svg();
    match &args.output {
        Some(out) => fsutil::atomic_write_unlocked(out, svg.as_bytes())?,
        None => output::print(&svg)?,
    }
    Ok(exit::SUCCESS)
}

/// Replace the text between the markers of `readme` with `block`, atomically,
/// and only when it changes. `what` names the block in messages (`health`,
/// `capability`).
fn update_readme(readme: &Path, start: &str, end: &str, block: &str, what: &str) -> Result<()> {
    let name = readme.display();
    let old = std::fs::read_to_string(readme)
        .map_err(|e| Error::config(format!("cannot read --readme {name}: {e}")))?;
    let new = replace_block(&old, start, end, block).map_err(|msg| {
        // A file with no markers yet: say what to paste, where the block
        // should go.
        let paste = if !old.contains(start) && !old.contains(end) {
            format!(
                ". Paste these two lines where the {what} block should go, then run this again:\n{start}\n{end}"
            )
        } else {
            String::new()
        };
        Error::config(format!(
            "{name}: {msg}; the file was left unchanged{paste}"
        ))
    })?;
    if new == old {
        output::println(&format!("{name}: {what} block unchanged"))?;
        return Ok(());
    }
    fsutil::atomic_write_unlocked(readme, new.as_bytes())?;
    output::println(&format!("{name}: {what} block updated"))
}
