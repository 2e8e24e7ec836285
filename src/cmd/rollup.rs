//! `llmprobe rollup`: uptime, latency and sample counts per provider (or per
//! model) over a window, as Markdown for a README, JSON, CSV, Prometheus
//! text or an SVG badge.
//!
//! The figures are [`crate::healthlog::rollup`]'s: the whole log streamed
//! once, each model in a fixed-size accumulator, so memory does not grow
//! with the log.
//!
//! Meaning, per docs/formats.md: a legacy averaged entry counts as `sample_count`
//! probes with `uptime × sample_count` passes, and its latency is weighted by
//! `sample_count`; `disabled_skip` rows are not probes. Latency figures are
//! over probes that got a response (`latency_ms > 0`).
//!
//! `--readme` output must be reproducible: nothing in the block depends on
//! the clock except which entries fall in the window, and the "Last checked"
//! time is that of the newest entry, so a second run without new data leaves
//! the file alone.
//!
//! `--capabilities` reads the capability log (`stats/capability_log.json`,
//! the health log's format plus `probe`) with the same reader instead, and
//! reports per model and capability the probes, passes and pass rate over
//! the window, with the latest verdict from `stats/capabilities.json`.
//! Without it, rollup reads only the health log: capability probes never
//! count toward uptime.

use std::fmt::Write as _;
use std::path::Path;

use chrono::Utc;
use serde::Serialize;

use crate::badge;
use crate::capabilities::{Capability, Judgement};
use crate::cli::{GroupBy, RollupArgs, RollupFormat};
use crate::error::{Error, Result};
use crate::exit;
use crate::format::{fmt_count, fmt_minute, fmt_pct, fmt_rfc3339};
use crate::fsutil;
use crate::grade::{FAIR, GOOD};
use crate::healthlog::read::{self, Record, Sink};
use crate::healthlog::rollup::{
    DEFAULT_WINDOW, Per, Report, Row, TREND_BUCKETS, compute, warn_read,
};
use crate::healthlog::scan::End;
use crate::healthlog::summary::Probes;
use crate::output;
use crate::settings::Settings;
use crate::window::Window;

pub const DEFAULT_START: &str = "<!-- BRAIN_HEALTH_START -->";
pub const DEFAULT_END: &str = "<!-- BRAIN_HEALTH_END -->";

const SPARKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

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
    let (findings, findings_error) = crate::cmd::capview::read_findings(&s.capabilities_path());
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

fn icon(status: &str) -> &'static str {
    match status {
        "ok" => "✅",
        "degraded" => "⚠️",
        "down" => "❌",
        _ => "—",
    }
}

fn sparkline(trend: &[Option<f64>]) -> String {
    trend
        .iter()
        .map(|b| match b {
            None => '·',
            Some(u) => SPARKS[((u * 8.0).floor() as usize).min(7)],
        })
        .collect()
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The Markdown block, in the style of the old tool's README block.
fn markdown(rep: &Report, rows: &[Row], by: GroupBy) -> String {
    let mut out = String::new();
    match rep.newest() {
        Some(t) => {
            let _ = writeln!(
                out,
                "*Last checked: {} — the newest probe in the health log; updated by `llmprobe rollup`*",
                fmt_minute(t)
            );
        }
        None => out.push_str("*Last checked: never — the health log has no probes yet*\n"),
    }
    let what = match by {
        GroupBy::Provider => "Provider",
        GroupBy::Model => "Model",
    };
    let _ = writeln!(out, "\n## {what} Health ({})\n", rep.window.title());
    if rows.is_empty() {
        out.push_str("*No samples.*\n");
        return out;
    }
    // Rows with data first, fastest first, as the old block had them; then
    // those without samples in the window, by name.
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by(|a, b| {
        let key = |r: &Row| (r.uptime.is_none(), r.avg_latency_ms.unwrap_or(f64::MAX));
        let (ka, kb) = (key(a), key(b));
        ka.0.cmp(&kb.0)
            .then(ka.1.total_cmp(&kb.1))
            .then_with(|| a.name().cmp(&b.name()))
    });
    let trend = rep
        .trend
        .filter(|_| rows.iter().any(|r| !r.trend.is_empty()));
    let mut header = match by {
        GroupBy::Provider => "| Provider |".to_string(),
        GroupBy::Model => "| Provider | Model |".to_string(),
    };
    header.push_str(" Status | Uptime | Avg Latency | p95 Latency | Samples |");
    if trend.is_some() {
        header.push_str(" Trend |");
    }
    let cols = header.matches('|').count() - 1;
    out.push_str(&header);
    out.push('\n');
    out.push('|');
    out.push_str(&"---|".repeat(cols));
    out.push('\n');
    for r in sorted {
        let _ = write!(out, "| **{}** |", md_cell(&r.provider));
        if let Some(m) = &r.model {
            let _ = write!(out, " {} |", md_cell(m));
        }
        let ms = |v: Option<f64>| v.map(|v| format!("{v:.0}ms")).unwrap_or_else(|| "—".into());
        match r.uptime {
            Some(u) => {
                let _ = write!(
                    out,
                    " {} | {} | {} | {} | {} |",
                    icon(r.status),
                    fmt_pct(u),
                    ms(r.avg_latency_ms),
                    ms(r.p95_latency_ms),
                    fmt_count(r.samples)
                );
            }
            None => {
                let _ = write!(out, " — | no samples | — | — | 0 |");
            }
        }
        if trend.is_some() {
            let _ = write!(out, " {} |", sparkline(&r.trend));
        }
        out.push('\n');
    }
    let _ = write!(
        out,
        "\n*✅ ≥{:.0}% uptime · ⚠️ {:.0}–{:.0}% · ❌ <{:.0}% · — no samples in the window. \
         Latency over probes that got a response; p95 from a fixed log-scale histogram (±2%).",
        GOOD * 100.0,
        FAIR * 100.0,
        GOOD * 100.0,
        FAIR * 100.0
    );
    if let Some(t) = trend {
        let _ = write!(
            out,
            " Trend: uptime in {TREND_BUCKETS} buckets of {}, oldest first, ▁ <12.5% … █ ≥87.5%, · no probes.",
            crate::duration::format_unit(t.width)
        );
    }
    out.push_str("*\n");
    out
}

fn json(rep: &Report, rows: &[Row]) -> String {
    #[derive(Serialize)]
    struct Out<'a> {
        window: &'a str,
        window_start: Option<String>,
        newest_probe: Option<String>,
        trend_bucket_secs: Option<i64>,
        skipped_entries: u64,
        torn_tail_bytes: u64,
        rows: &'a [Row],
    }
    let out = Out {
        window: &rep.window.label,
        window_start: rep.window_start.map(fmt_rfc3339),
        newest_probe: rep.newest().map(fmt_rfc3339),
        trend_bucket_secs: rep.trend.map(|t| t.width),
        skipped_entries: rep.skipped,
        torn_tail_bytes: rep.torn_bytes,
        rows,
    };
    let mut s = serde_json::to_string_pretty(&out).expect("serialisable");
    s.push('\n');
    s
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn csv(rows: &[Row], by: GroupBy) -> String {
    let mut out = String::new();
    out.push_str("provider,");
    if by == GroupBy::Model {
        out.push_str("model,");
    }
    out.push_str("samples,uptime_pct,avg_latency_ms,p95_latency_ms,status,last_probe\n");
    let opt = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_default();
    for r in rows {
        out.push_str(&csv_field(&r.provider));
        out.push(',');
        if let Some(m) = &r.model {
            out.push_str(&csv_field(m));
            out.push(',');
        }
        let _ = writeln!(
            out,
            "{},{},{},{},{},{}",
            fmt_count(r.samples),
            opt(r.uptime.map(crate::format::pct)),
            opt(r.avg_latency_ms),
            opt(r.p95_latency_ms),
            r.status,
            r.last_probe.as_deref().unwrap_or("")
        );
    }
    out
}

/// Prometheus text exposition format, for node_exporter's textfile
/// collector. Groups without samples export only `llmprobe_samples 0`, never
/// a made-up ratio.
fn prom(rep: &Report, rows: &[Row], by: GroupBy) -> String {
    let labels = |r: &Row| {
        let mut l = format!("provider=\"{}\"", crate::textfile::label(&r.provider));
        if by == GroupBy::Model
            && let Some(m) = &r.model
        {
            let _ = write!(l, ",model=\"{}\"", crate::textfile::label(m));
        }
        let _ = write!(
            l,
            ",window=\"{}\"",
            crate::textfile::label(&rep.window.label)
        );
        l
    };
    let metrics: [Metric<Row>; 5] = [
        (
            "llmprobe_uptime_ratio",
            "Share of probes that passed over the window, 0 to 1.",
            true,
            |r| r.uptime,
        ),
        (
            "llmprobe_samples",
            "Probes counted over the window (legacy averaged entries count sample_count).",
            true,
            |r| Some(r.samples),
        ),
        (
            "llmprobe_latency_avg_seconds",
            "Mean latency of probes that got a response, over the window.",
            true,
            |r| r.avg_latency_ms.map(|v| v / 1000.0),
        ),
        (
            "llmprobe_latency_p95_seconds",
            "95th percentile latency (log-scale histogram, within 2%) over the window.",
            true,
            |r| r.p95_latency_ms.map(|v| v / 1000.0),
        ),
        (
            "llmprobe_last_probe_timestamp_seconds",
            "Unix time of the newest probe in the log.",
            true,
            |r| unix_secs(r.last_probe.as_deref()),
        ),
    ];
    gauges(rows, &metrics, |r, _| labels(r))
}

/// One Prometheus gauge family: its name, help, whether its samples carry
/// the `window` label, and its value for a row (none: no sample).
type Metric<R> = (&'static str, &'static str, bool, fn(&R) -> Option<f64>);

/// Each metric's family, with a sample for every row that has a value;
/// `labels` gets the row and whether the family is windowed.
fn gauges<R>(rows: &[R], metrics: &[Metric<R>], labels: impl Fn(&R, bool) -> String) -> String {
    let mut out = String::new();
    for (name, help, windowed, get) in metrics {
        crate::textfile::gauge_header(&mut out, name, help);
        for r in rows {
            if let Some(v) = get(r) {
                let _ = writeln!(out, "{name}{{{}}} {v}", labels(r, *windowed));
            }
        }
    }
    out
}

/// An RFC 3339 time as Unix seconds, for a gauge.
fn unix_secs(ts: Option<&str>) -> Option<f64> {
    ts.and_then(crate::time::parse_ts).map(|t| t as f64)
}

/// One model's probes of one capability: over the window, and the newest
/// in the whole log.
#[derive(Clone, Default)]
struct CapStats {
    probes: Probes,
    /// The newest probe's time, order in the file (ties go to the later
    /// entry) and result.
    newest: Option<(i64, u64, String)>,
}

/// The capability log's sink: (provider, model, capability) → figures.
/// The log is small (at most one probe per provider per check run), so a
/// plain ordered map does.
struct CapAcc {
    start: i64,
    seq: u64,
    stats: std::collections::BTreeMap<(String, String, String), CapStats>,
    /// Entries without a `probe`: not capability probes, not counted.
    unlabelled: u64,
    newest: Option<i64>,
}

impl CapAcc {
    fn new(start: i64) -> CapAcc {
        CapAcc {
            start,
            seq: 0,
            stats: Default::default(),
            unlabelled: 0,
            newest: None,
        }
    }
}

impl Sink for CapAcc {
    fn record(&mut self, r: &Record<'_>) {
        if !r.is_sample() {
            return;
        }
        if r.probe.is_empty() {
            self.unlabelled += 1;
            return;
        }
        self.seq += 1;
        self.newest = self.newest.max(Some(r.ts));
        let key = (
            r.provider.to_string(),
            r.model.to_string(),
            r.probe.to_string(),
        );
        let st = self.stats.entry(key).or_default();
        if r.ts >= self.start {
            st.probes.add(r);
        }
        if st
            .newest
            .as_ref()
            .is_none_or(|n| (r.ts, self.seq) >= (n.0, n.1))
        {
            st.newest = Some((r.ts, self.seq, r.result_label()));
        }
    }

    fn merge(&mut self, later: CapAcc) {
        self.newest = self.newest.max(later.newest);
        self.unlabelled += later.unlabelled;
        let offset = self.seq;
        self.seq += later.seq;
        for (k, st) in later.stats {
            let mine = self.stats.entry(k).or_default();
            mine.probes.merge(&st.probes);
            if let Some((ts, seq, label)) = st.newest {
                let seq = seq + offset;
                if mine.newest.as_ref().is_none_or(|n| (ts, seq) >= (n.0, n.1)) {
                    mine.newest = Some((ts, seq, label));
                }
            }
        }
    }
}

/// One row of `rollup --capabilities`.
#[derive(Debug, Clone, Serialize)]
struct CapRow {
    provider: String,
    model: String,
    capability: String,
    /// Probes over the window.
    #[serde(serialize_with = "crate::format::serialize_count")]
    probes: f64,
    #[serde(serialize_with = "crate::format::serialize_count")]
    passed: f64,
    /// Passed ÷ probes, 0 to 1; `null` without probes in the window.
    pass_rate: Option<f64>,
    /// The newest probe in the whole log, and its result (`ok`,
    /// `wrong_answer`, `rate_limit (429)`).
    last_probe: Option<String>,
    last_result: Option<String>,
    /// The latest verdict, from capabilities.json: `yes`, `no` or
    /// `unknown` (a temporary failure decides nothing).
    verdict: Judgement,
    verdict_seen: Option<String>,
}

/// Capability pass rates over `window`, in `format`.
fn capabilities(s: &Settings, window: &Window, now: i64, format: RollupFormat) -> Result<String> {
    let path = s.capability_log_path();
    let start = window.start(now);
    let (acc, summary) = read::read_all(&path, || CapAcc::new(start))?;
    let (findings, findings_error) = crate::cmd::capview::read_findings(&s.capabilities_path());
    if acc.newest.is_none() {
        eprintln!(
            "note: no capability probes yet in {} ({}); `llmprobe check` probes the capabilities the catalog lists, or all of them with --capabilities all",
            crate::fsutil::absolute(&path).display(),
            if path.exists() {
                "it holds none"
            } else {
                "the file does not exist"
            }
        );
    }
    let torn = match summary.end {
        End::Torn { torn_bytes, .. } => torn_bytes,
        _ => 0,
    };
    warn_read(&path, torn, summary.skipped);
    if acc.unlabelled > 0 {
        eprintln!(
            "note: {}: skipped {} entries without a `probe` (not capability probes)",
            path.display(),
            acc.unlabelled
        );
    }
    if let Some(e) = &findings_error {
        eprintln!("warning: {e}; every verdict is shown as unknown");
    }
    let mut rows: Vec<CapRow> = acc
        .stats
        .into_iter()
        .map(|((provider, model, capability), st)| {
            let key = crate::catalog::model_key(&provider, &model);
            let finding = capability
                .parse::<Capability>()
                .ok()
                .and_then(|c| findings.get(&key, c));
            CapRow {
                pass_rate: st.probes.uptime(),
                probes: st.probes.samples,
                passed: st.probes.passed,
                last_probe: st.newest.as_ref().map(|n| fmt_rfc3339(n.0)),
                last_result: st.newest.map(|n| n.2),
                verdict: finding.map_or(Judgement::Unknown, |f| f.verdict),
                verdict_seen: finding.and_then(|f| f.seen.clone()),
                provider,
                model,
                capability,
            }
        })
        .collect();
    // Capabilities in the order every view shows them; names this version
    // does not know after them.
    let rank = |c: &str| c.parse::<Capability>().map_or(u8::MAX, |c| c as u8);
    rows.sort_by(|a, b| {
        (&a.provider, &a.model, rank(&a.capability), &a.capability).cmp(&(
            &b.provider,
            &b.model,
            rank(&b.capability),
            &b.capability,
        ))
    });
    let newest = acc.newest;
    Ok(match format {
        RollupFormat::Md => cap_markdown(window, newest, &rows),
        RollupFormat::Json => {
            #[derive(Serialize)]
            struct Out<'a> {
                window: &'a str,
                window_start: Option<String>,
                newest_probe: Option<String>,
                skipped_entries: u64,
                torn_tail_bytes: u64,
                rows: &'a [CapRow],
            }
            let out = Out {
                window: &window.label,
                window_start: window.secs.map(|_| fmt_rfc3339(start)),
                newest_probe: newest.map(fmt_rfc3339),
                skipped_entries: summary.skipped + acc.unlabelled,
                torn_tail_bytes: torn,
                rows: &rows,
            };
            let mut s = serde_json::to_string_pretty(&out).expect("serialisable");
            s.push('\n');
            s
        }
        RollupFormat::Csv => cap_csv(&rows),
        RollupFormat::Prom => cap_prom(window, &rows),
        RollupFormat::Html | RollupFormat::Badge => unreachable!("refused by check_format_flags"),
    })
}

fn cap_markdown(window: &Window, newest: Option<i64>, rows: &[CapRow]) -> String {
    let mut out = String::new();
    match newest {
        Some(t) => {
            let _ = writeln!(
                out,
                "*Last capability probe: {} — the newest in the capability log; updated by `llmprobe rollup --capabilities`*",
                fmt_minute(t)
            );
        }
        None => out.push_str("*Last capability probe: never*\n"),
    }
    let _ = writeln!(out, "\n## Capabilities ({})\n", window.title());
    if rows.is_empty() {
        out.push_str("*No capability probes yet.*\n");
        return out;
    }
    out.push_str("| Provider | Model | Capability | Pass Rate | Probes | Last Probe | Verdict |\n");
    out.push_str("|---|---|---|---|---|---|---|\n");
    for r in rows {
        let rate = match r.pass_rate {
            Some(p) => fmt_pct(p),
            None => "no probes".into(),
        };
        let last = match (&r.last_probe, &r.last_result) {
            (Some(t), Some(res)) => format!(
                "{res}, {}",
                crate::time::parse_ts(t)
                    .map(fmt_minute)
                    .unwrap_or_else(|| t.clone())
            ),
            _ => "—".into(),
        };
        let _ = writeln!(
            out,
            "| **{}** | {} | {} | {rate} | {} | {} | {} {} |",
            md_cell(&r.provider),
            md_cell(&r.model),
            md_cell(&r.capability),
            fmt_count(r.probes),
            md_cell(&last),
            crate::cmd::capview::mark(r.verdict),
            r.verdict.as_str()
        );
    }
    out.push_str(
        "\n*Pass rate over the window's capability probes (a rate limit or a timeout counts as a failed probe); \
         the verdict is the latest one that decided: ✔ yes · ✗ no · ? unknown.*\n",
    );
    out
}

fn cap_csv(rows: &[CapRow]) -> String {
    let mut out = String::from(
        "provider,model,capability,probes,passed,pass_rate_pct,last_probe,last_result,verdict,verdict_seen\n",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{}",
            csv_field(&r.provider),
            csv_field(&r.model),
            csv_field(&r.capability),
            fmt_count(r.probes),
            fmt_count(r.passed),
            r.pass_rate
                .map(|p| format!("{:.1}", crate::format::pct(p)))
                .unwrap_or_default(),
            r.last_probe.as_deref().unwrap_or(""),
            csv_field(r.last_result.as_deref().unwrap_or("")),
            r.verdict.as_str(),
            r.verdict_seen.as_deref().unwrap_or("")
        );
    }
    out
}

/// Prometheus text for the capability rows. The verdict is exported only
/// when known: 1 for yes, 0 for no.
fn cap_prom(window: &Window, rows: &[CapRow]) -> String {
    let labels = |r: &CapRow, with_window: bool| {
        let mut l = format!(
            "provider=\"{}\",model=\"{}\",capability=\"{}\"",
            crate::textfile::label(&r.provider),
            crate::textfile::label(&r.model),
            crate::textfile::label(&r.capability)
        );
        if with_window {
            let _ = write!(l, ",window=\"{}\"", crate::textfile::label(&window.label));
        }
        l
    };
    let metrics: [Metric<CapRow>; 4] = [
        (
            "llmprobe_capability_pass_ratio",
            "Share of capability probes that passed over the window, 0 to 1.",
            true,
            |r| r.pass_rate,
        ),
        (
            "llmprobe_capability_probes",
            "Capability probes counted over the window.",
            true,
            |r| Some(r.probes),
        ),
        (
            "llmprobe_capability_verdict",
            "The latest verdict: 1 when the capability passed, 0 when it failed; absent while unknown.",
            false,
            |r| match r.verdict {
                Judgement::Yes => Some(1.0),
                Judgement::No => Some(0.0),
                Judgement::Unknown => None,
            },
        ),
        (
            "llmprobe_capability_last_probe_timestamp_seconds",
            "Unix time of the newest probe of the capability in the log.",
            false,
            |r| unix_secs(r.last_probe.as_deref()),
        ),
    ];
    gauges(rows, &metrics, labels)
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

/// The text with exactly one `start … end` span replaced by
/// `start\n<block>end`.
pub fn replace_block(
    text: &str,
    start: &str,
    end: &str,
    block: &str,
) -> std::result::Result<String, String> {
    let (ns, ne) = (text.matches(start).count(), text.matches(end).count());
    if ns == 0 {
        return Err(format!("no start marker {start} found"));
    }
    if ne == 0 {
        return Err(format!("no end marker {end} found"));
    }
    if ns > 1 || ne > 1 {
        return Err(format!(
            "the markers are unbalanced ({ns} × {start}, {ne} × {end}); expected exactly one of each"
        ));
    }
    let s = text.find(start).expect("counted");
    let e = text.find(end).expect("counted");
    if e < s + start.len() {
        return Err(format!(
            "the end marker {end} comes before the start marker"
        ));
    }
    let mut out = String::with_capacity(text.len() + block.len());
    out.push_str(&text[..s + start.len()]);
    out.push('\n');
    out.push_str(block);
    if !block.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&text[e..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_replacement() {
        let t = "a\n<!-- S -->\nold\n<!-- E -->\nb\n";
        assert_eq!(
            replace_block(t, "<!-- S -->", "<!-- E -->", "new\n").unwrap(),
            "a\n<!-- S -->\nnew\n<!-- E -->\nb\n"
        );
        for bad in [
            "a\n<!-- E -->\n",
            "<!-- S -->\n",
            "<!-- E --><!-- S -->",
            "<!-- S --><!-- S --><!-- E -->",
        ] {
            assert!(
                replace_block(bad, "<!-- S -->", "<!-- E -->", "x").is_err(),
                "{bad}"
            );
        }
    }
}
