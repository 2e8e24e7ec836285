//! What `brief` shows: the last 24 hours read from the log (per provider
//! the checks, uptime, latency and each model's last probe), judged into
//! icons, advisories and the stale warnings ([`crate::stale`]), with the
//! models out of rotation, route's cooldowns and the capability table
//! ([`crate::report::capview`]), as text or JSON. `cmd/brief.rs` gathers the
//! files and calls.
//!
//! Its cost must not grow with the history: [`collect`] reads the log
//! backwards from the end and stops at the first entry more than
//! [`CLOCK_SLACK_SECS`](crate::healthlog::recent::CLOCK_SLACK_SECS) older
//! than the window start, which lets slightly out-of-order clocks through;
//! a log that is not one entry per line (the old tool's pretty-printed
//! file) is read forward in full instead ([`crate::healthlog::recent`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::error::Result;
use crate::format::{fmt_ago, fmt_count, fmt_minute, fmt_pct, fmt_rfc3339};
use crate::grade::{self, FAIR, GOOD, Grade};
use crate::healthlog::read::{Record, Sink};
use crate::healthlog::recent::{self, Direction, Recent};
use crate::healthlog::summary::{Latency, Probes, SPANS, Spans, Ttft};
use crate::output;
use crate::report::ProviderFilter;
use crate::report::capview::ModelCaps;
use crate::report::nextprobe::NextReprobe;
use crate::schedule::{Health, Warning};
use crate::settings::Settings;
use crate::stale::{self, Newest, Stale};
use crate::state::{ModelState, States};
use crate::window::Window;

/// With no probe for this long, the hourly job has probably stopped.
const STALE_SECS: i64 = stale::RECORD_STALE_SECS;

/// Read what the brief needs: backwards when the file allows, else forward;
/// from `since`: the window's start, or earlier to find each provider's
/// newest probe.
pub fn collect(log: &std::path::Path, start: i64, since: i64, now: i64) -> Result<(Collect, u64)> {
    recent::read_recent(log, Some(since), |d| Collect::new(start, now, d))
}

/// How far back `brief` reads at least: the longest of the uptime spans
/// it shows (a week), whatever the window.
pub const SPANS_BACK: i64 = SPANS[2].1;

/// The last probe of a model: its time, its order in the file (to break ties
/// between equal timestamps), whether it was an error, and its result.
#[derive(Debug, Clone)]
struct Last {
    ts: i64,
    seq: i64,
    error: bool,
    label: String,
}

impl Last {
    fn newer_than(&self, o: &Last) -> bool {
        (self.ts, self.seq) > (o.ts, o.seq)
    }
}

#[derive(Default)]
struct ProviderAgg {
    probes: Probes,
    latency: Latency,
    models: BTreeMap<String, Last>,
}

/// One model's figures: uptime over the spans, time to first token over
/// the window.
#[derive(Default)]
struct ModelAgg {
    spans: Spans,
    ttft: Ttft,
}

/// The sink for both directions. `step` is +1 reading forward and −1
/// reading backward, so that `seq` always grows with the position in the
/// file.
pub struct Collect {
    start: i64,
    now: i64,
    seq: i64,
    step: i64,
    providers: BTreeMap<String, ProviderAgg>,
    /// Each model's figures, by `provider::model`.
    models: BTreeMap<String, ModelAgg>,
    /// The buffer a record's `provider::model` is written into.
    key: String,
    pub newest: Option<i64>,
    /// Each provider's newest probe, window or not (a week back at least).
    pub latest: Newest,
}

impl Collect {
    pub fn new(start: i64, now: i64, d: Direction) -> Collect {
        Collect {
            start,
            now,
            seq: 0,
            step: match d {
                Direction::Forward => 1,
                Direction::Backward => -1,
            },
            providers: BTreeMap::new(),
            models: BTreeMap::new(),
            key: String::new(),
            newest: None,
            latest: Newest::default(),
        }
    }
}

impl Collect {
    /// Every model (`provider::model`) with a probe in the window.
    pub fn probed_in_window(&self) -> std::collections::HashSet<String> {
        self.providers
            .iter()
            .flat_map(|(p, agg)| agg.models.keys().map(|m| crate::catalog::model_key(p, m)))
            .collect()
    }

    /// `key`'s (`provider::model`) uptime over the last hour, day and
    /// week, and its median time to first token over the window; `None`
    /// when it was not probed in the last week.
    pub fn model_figures(&self, key: &str) -> Option<(Spans, Option<f64>)> {
        self.models.get(key).map(|m| (m.spans, m.ttft.median()))
    }
}

impl Sink for Collect {
    fn record(&mut self, r: &Record<'_>) {
        // `disabled_skip` rows are not probes: they neither count nor
        // refresh the staleness clock.
        if !r.is_sample() {
            return;
        }
        self.seq += self.step;
        // Re-probes of paused models are samples, but no sign that the
        // scheduled job runs (crate::stale).
        if !r.is_reprobe() {
            self.newest = self.newest.max(Some(r.ts));
        }
        self.latest.add(r);
        // Each model's figures: the spans (a week at most) and the first
        // token over the window, whichever reaches further back.
        if r.ts >= self.start.min(self.now - SPANS_BACK) {
            // The key is built in a buffer kept for it: a week of entries
            // allocates once per model, not once per entry.
            crate::catalog::ModelKey::write_into(&mut self.key, r.provider, r.model);
            let m = match self.models.get_mut(&self.key) {
                Some(m) => m,
                None => self.models.entry(self.key.clone()).or_default(),
            };
            m.spans.add(r, self.now);
            if r.ts >= self.start {
                m.ttft.add(r);
            }
        }
        if r.ts < self.start {
            return;
        }
        let p = match self.providers.get_mut(r.provider) {
            Some(p) => p,
            None => self.providers.entry(r.provider.to_string()).or_default(),
        };
        p.probes.add(r);
        p.latency.add(r);
        let last = Last {
            ts: r.ts,
            seq: self.seq,
            error: r.is_error(),
            label: r.result_label(),
        };
        match p.models.get_mut(r.model) {
            Some(old) if last.newer_than(old) => *old = last,
            Some(_) => {}
            None => {
                p.models.insert(r.model.to_string(), last);
            }
        }
    }

    fn merge(&mut self, later: Collect) {
        self.newest = self.newest.max(later.newest);
        for (k, m) in later.models {
            let mine = self.models.entry(k).or_default();
            mine.spans.merge(&m.spans);
            mine.ttft.merge(&m.ttft);
        }
        self.latest.merge(later.latest);
        for (name, lp) in later.providers {
            let p = self.providers.entry(name).or_default();
            p.probes.merge(&lp.probes);
            p.latency.merge(&lp.latency);
            for (m, last) in lp.models {
                // The later half of the file wins ties.
                match p.models.get(&m) {
                    Some(old) if old.ts > last.ts => {}
                    _ => {
                        p.models.insert(m, last);
                    }
                }
            }
        }
    }
}

impl Recent for Collect {
    fn too_old(&mut self, r: &Record<'_>) {
        // Too old to count, but it still dates the newest probe when
        // nothing newer exists.
        if r.is_sample() && !r.is_reprobe() {
            self.newest = self.newest.max(Some(r.ts));
        }
    }
}

#[derive(Debug, Serialize)]
struct ProviderLine {
    provider: String,
    /// `ok`, `warn`, `poor` or `down`.
    status: &'static str,
    icon: &'static str,
    uptime: Option<f64>,
    /// Uptime over the last 1 h, 24 h and 7 d, whatever the window.
    uptime_by_span: BTreeMap<&'static str, Option<f64>>,
    #[serde(skip)]
    spans: Spans,
    avg_latency_ms: Option<f64>,
    /// The median time to first token of streamed probes that passed in
    /// the window.
    median_ttft_ms: Option<f64>,
    /// The median of its models' latest speed probes, from
    /// capabilities.json (filled in by the caller).
    pub tokens_per_s: Option<f64>,
    #[serde(serialize_with = "crate::format::serialize_count")]
    checks: f64,
    last_check: Option<String>,
    last_result: String,
    /// Its newest probe is too old ([`crate::stale`]): the icon is then
    /// `[STALE]`, whatever the figures' grade in `status`.
    stale: bool,
    /// Why, when the last run says (`skipped: GROQ_API_KEY unset in the
    /// last run`).
    stale_reason: Option<String>,
    #[serde(skip)]
    last_ts: Option<i64>,
}

#[derive(Debug, Serialize)]
pub struct OutOfRotation {
    pub model: String,
    pub state: ModelState,
    reason: Option<String>,
    since: Option<String>,
    consecutive_failures: u32,
    /// A paused model's `next_reprobe` and `retry_at`.
    #[serde(flatten)]
    pub reprobe: Option<NextReprobe>,
}

/// How fast one model answers, and how often: every model probed in the
/// last week.
#[derive(Debug, Serialize)]
pub struct ModelSpeed {
    pub model: String,
    /// Uptime over the last 1 h, 24 h and 7 d.
    pub uptime_by_span: BTreeMap<&'static str, Option<f64>>,
    #[serde(skip)]
    spans: Spans,
    /// The median time to first token of its streamed probes that passed
    /// in the window.
    pub median_ttft_ms: Option<f64>,
    /// Its latest speed probe's output tokens per second (filled in by
    /// the caller from capabilities.json).
    pub tokens_per_s: Option<f64>,
}

/// One model's capabilities.
#[derive(Debug, Serialize)]
pub struct ModelLine {
    pub model: String,
    /// `capabilities` (each with its verdict, when it was seen, why a
    /// `no`, and whether the catalog lists it) and `context_window`.
    #[serde(flatten)]
    pub caps: ModelCaps,
}

#[derive(Debug, Serialize)]
pub struct Advisory {
    provider: String,
    reason: String,
}

/// A model its provider retired.
#[derive(Debug, Clone, Serialize)]
pub struct Retired {
    pub model: String,
    /// When it was disabled.
    pub since: Option<String>,
    /// The first day its provider's list lacked it.
    pub missing_since: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Brief {
    now: String,
    window: String,
    /// Nothing to act on: not stale, no advisory, no warning, route state
    /// readable. `--quiet-if-healthy` prints nothing then.
    pub healthy: bool,
    pub stale: bool,
    newest_probe: Option<String>,
    /// Every stale provider, with or without a row (a provider probed this
    /// week but not in the window has none).
    pub stale_providers: Vec<Stale>,
    providers: Vec<ProviderLine>,
    /// Every model probed in the last week: uptime over the spans, time
    /// to first token and tokens per second.
    pub model_speed: Vec<ModelSpeed>,
    pub out_of_rotation: Vec<OutOfRotation>,
    /// Models their provider retired (docs/discovery.md): disabled
    /// because a fresh list no longer carries them and their probe was
    /// answered "not found", apart from those disabled for failing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub retired: Vec<Retired>,
    /// About the catalog itself: what discovery found, models on
    /// probation, and deprecation dates near or past.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub catalog_notes: Vec<String>,
    pub advisories: Vec<Advisory>,
    /// About the schedule: none installed while check does not run, or an
    /// installed one that stopped; and each stale provider
    /// (`provider_stale`), unless the whole record is stale.
    pub warnings: Vec<Warning>,
    /// Whether a schedule is installed, and the last run
    /// (`schedule.json`, `last_run.json`).
    pub schedule: Option<Health>,
    skipped_entries: u64,
    /// What `route` has benched, from route_state.json (only that small
    /// file is read).
    pub route_cooldowns: Vec<crate::route::cooldown::Bench>,
    /// Why route_state.json could not be read, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route_state_error: Option<String>,
    /// The models probed in the window (a basic or a capability probe)
    /// and those whose provider has its key set, of the catalog and of
    /// the verdicts file, with their capabilities and context window;
    /// with `--all`, every one.
    pub models: Vec<ModelLine>,
    /// The models `models` leaves out (none with `--all`), counted under
    /// the capabilities table; in JSON, `models_hidden`, their number.
    #[serde(rename = "models_hidden", serialize_with = "count")]
    pub hidden_models: Vec<ModelLine>,
    /// Why capabilities.json could not be read, if it could not (every
    /// capability is then unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities_error: Option<String>,
    #[serde(skip)]
    now_at: chrono::DateTime<chrono::Utc>,
    /// The log read, as an absolute path.
    pub health_log: String,
    #[serde(skip)]
    pub log_missing: bool,
    #[serde(skip)]
    now_ts: i64,
    #[serde(skip)]
    newest_ts: Option<i64>,
    /// How old the newest probe may be before the whole record is stale
    /// ([`stale::record_stale_after`]).
    #[serde(skip)]
    record_after: i64,
    /// The models whose probe budget spaces their probes further apart
    /// than every run, with their cadence ([`crate::usage::budget`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub probe_budget: Vec<Cadence>,
    /// Active models route's traffic has proven since their last probe:
    /// `check` does not probe them while it holds ([`crate::usage::traffic`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub proven_by_traffic: Vec<Proven>,
    #[serde(skip)]
    title: String,
    /// "not probed in the last 24h", or "never probed" over all time.
    #[serde(skip)]
    unprobed: String,
    /// The providers `--provider` named, for the text; empty for all.
    #[serde(skip)]
    only: String,
}

impl Brief {
    pub fn build(window: &Window, now: i64, col: Collect, states: &States, skipped: u64) -> Brief {
        let mut providers = Vec::new();
        let mut advisories = Vec::new();
        let model_speed = col
            .models
            .iter()
            .map(|(k, m)| ModelSpeed {
                model: k.clone(),
                uptime_by_span: m.spans.by_span(),
                spans: m.spans,
                median_ttft_ms: m.ttft.median(),
                tokens_per_s: None,
            })
            .collect();
        for (name, p) in col.providers {
            // A provider's spans and first token are its models' together.
            let (mut spans, mut ttft) = (Spans::default(), Ttft::default());
            for (_, m) in col
                .models
                .iter()
                .filter(|(k, _)| crate::catalog::ModelKey::model_in(k, &name).is_some())
            {
                spans.merge(&m.spans);
                ttft.merge(&m.ttft);
            }
            let uptime = p.probes.uptime();
            let latest = p
                .models
                .values()
                .max_by(|a, b| (a.ts, a.seq).cmp(&(b.ts, b.seq)))
                .cloned();
            let all_down = !p.models.is_empty() && p.models.values().all(|l| l.error);
            let (status, icon) = match uptime.map(grade::grade) {
                _ if all_down => ("down", "[DOWN]"),
                Some(Grade::Good) => ("ok", "[ OK ]"),
                Some(Grade::Fair) => ("warn", "[WARN]"),
                _ => ("poor", "[POOR]"),
            };
            let mut why = Vec::new();
            if let Some(u) = uptime.filter(|&u| grade::grade(u) == Grade::Poor) {
                why.push(format!("uptime {} over {}", fmt_pct(u), window.label));
            }
            if let Some(l) = latest.as_ref().filter(|l| l.error) {
                why.push(format!(
                    "last probe failed: {} at {}",
                    l.label,
                    fmt_minute(l.ts)
                ));
            }
            if all_down && p.models.len() > 1 {
                why.push(format!(
                    "the last probe of all {} models failed",
                    p.models.len()
                ));
            }
            if !why.is_empty() {
                advisories.push(Advisory {
                    provider: name.clone(),
                    reason: why.join("; "),
                });
            }
            providers.push(ProviderLine {
                provider: name,
                status,
                icon,
                uptime,
                uptime_by_span: spans.by_span(),
                spans,
                avg_latency_ms: p.latency.mean(),
                median_ttft_ms: ttft.median(),
                tokens_per_s: None,
                checks: p.probes.samples,
                last_check: latest.as_ref().map(|l| fmt_rfc3339(l.ts)),
                last_result: latest.as_ref().map(|l| l.label.clone()).unwrap_or_default(),
                stale: false,
                stale_reason: None,
                last_ts: latest.map(|l| l.ts),
            });
        }
        let (retired, out): (Vec<_>, Vec<_>) = states
            .iter()
            .filter(|(_, e)| e.state != ModelState::Active)
            .partition(|(_, e)| e.retired());
        let retired = retired
            .into_iter()
            .map(|(k, e)| Retired {
                missing_since: e.missing_since().map(str::to_string),
                since: e.since,
                model: k,
            })
            .collect();
        let out_of_rotation = out
            .into_iter()
            .map(|(k, e)| OutOfRotation {
                model: k,
                state: e.state,
                reason: e.reason,
                since: e.since,
                consecutive_failures: e.consecutive_failures,
                reprobe: None,
            })
            .collect();
        let stale = col.newest.is_none_or(|t| now - t > STALE_SECS);
        Brief {
            now: fmt_rfc3339(now),
            window: window.label.clone(),
            stale,
            newest_probe: col.newest.map(fmt_rfc3339),
            stale_providers: Vec::new(),
            providers,
            model_speed,
            out_of_rotation,
            retired,
            catalog_notes: Vec::new(),
            advisories,
            healthy: false,
            warnings: Vec::new(),
            schedule: None,
            skipped_entries: skipped,
            route_cooldowns: Vec::new(),
            route_state_error: None,
            models: Vec::new(),
            hidden_models: Vec::new(),
            capabilities_error: None,
            now_at: chrono::DateTime::from_timestamp(now, 0).unwrap_or_default(),
            health_log: String::new(),
            log_missing: false,
            now_ts: now,
            newest_ts: col.newest,
            record_after: STALE_SECS,
            probe_budget: Vec::new(),
            proven_by_traffic: Vec::new(),
            title: window.title().to_lowercase(),
            unprobed: match window.secs {
                Some(_) => format!("not probed in the {}", window.title().to_lowercase()),
                None => "never probed".into(),
            },
            only: String::new(),
        }
    }

    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "llmprobe brief: {}, as of {}",
            self.title,
            fmt_minute(self.now_ts)
        );
        match self.newest_ts {
            None => {
                let _ = write!(
                    out,
                    "\n!!! STALE: NO PROBES RECORDED in {} ({}).\n\
                     !!! Run `llmprobe check`, and schedule it (`llmprobe schedule install`); \
                     or pass --stats-dir if the data is elsewhere.\n",
                    self.health_log,
                    if self.log_missing {
                        "the file does not exist"
                    } else {
                        "it holds no probes"
                    }
                );
            }
            Some(t) if self.stale => {
                if let Some([a, b]) = stale::record_warning(t, self.now_ts, self.record_after) {
                    let _ = write!(out, "\n!!! {a}\n!!! {b}\n");
                }
            }
            Some(t) => {
                let _ = writeln!(
                    out,
                    "newest probe: {} ({})",
                    fmt_minute(t),
                    fmt_ago(self.now_ts - t)
                );
            }
        }
        if let Some(run) = self
            .schedule
            .as_ref()
            .and_then(|h| h.last_run.as_ref())
            .filter(|r| r.offline && self.stale)
        {
            let t = run.finished_at.timestamp();
            let _ = writeln!(
                out,
                "!!! The last check run, {}, was offline: it reached no remote provider and recorded none of their results.",
                fmt_ago(self.now_ts - t)
            );
        }
        for w in &self.warnings {
            let _ = writeln!(out, "WARNING: {}", w.message);
        }
        out.push('\n');
        if self.providers.is_empty() {
            let of = match self.only.as_str() {
                "" => String::new(),
                only => format!(" of {only}"),
            };
            let _ = writeln!(
                out,
                "no samples{of} in the {} in {}",
                self.title, self.health_log
            );
        } else {
            let mut t = output::table(&[
                "",
                "PROVIDER",
                "UPTIME",
                "1H · 24H · 7D",
                "SPEED",
                "AVG LATENCY",
                "CHECKS",
                "LAST CHECK",
                "LAST RESULT",
            ]);
            // On a narrow terminal: the check count, then the latency,
            // the spans and the speed go first.
            t.optional(&[6, 5, 3, 4]);
            for p in &self.providers {
                t.add_row(vec![
                    p.icon.to_string(),
                    p.provider.clone(),
                    p.uptime.map(fmt_pct).unwrap_or_else(|| "no samples".into()),
                    p.spans.cell(),
                    speed_cell(p.median_ttft_ms, p.tokens_per_s),
                    fmt_ms(p.avg_latency_ms),
                    fmt_count(p.checks),
                    p.last_ts
                        .map(|t| format!("{} ({})", fmt_minute(t), fmt_ago(self.now_ts - t)))
                        .unwrap_or_default(),
                    p.last_result.clone(),
                ]);
            }
            let _ = writeln!(out, "{t}");
            let _ = writeln!(
                out,
                "[ OK ] ≥{:.0}% · [WARN] ≥{:.0}% · [POOR] below · [DOWN] the last probe of every model failed with an error",
                GOOD * 100.0,
                FAIR * 100.0
            );
        }
        out.push('\n');
        if self.out_of_rotation.is_empty() {
            out.push_str("out of rotation: none\n");
        } else {
            out.push_str("out of rotation:\n");
            let mut t = output::table(&["MODEL", "STATE", "REASON", "SINCE", "FAILURES"]);
            t.optional(&[4, 3]);
            for m in &self.out_of_rotation {
                t.add_row(vec![
                    m.model.clone(),
                    m.state.to_string(),
                    m.reason.clone().unwrap_or_default(),
                    m.since.clone().unwrap_or_default(),
                    m.consecutive_failures.to_string(),
                ]);
            }
            let _ = writeln!(out, "{t}");
            self.reprobe_text(&mut out);
        }
        self.budget_text(&mut out);
        self.catalog_text(&mut out);
        self.speed_text(&mut out);
        self.capabilities_text(&mut out);
        if !self.route_cooldowns.is_empty() {
            out.push_str("\nroute: cooling down\n");
            for b in &self.route_cooldowns {
                let left = (b.until.timestamp() - self.now_ts).max(0);
                let _ = writeln!(
                    out,
                    "  {}: {} until {} (in {})",
                    b.target,
                    b.reason,
                    fmt_minute(b.until.timestamp()),
                    crate::duration::format_unit(left.max(60) / 60 * 60)
                );
            }
        }
        if let Some(e) = &self.route_state_error {
            let _ = writeln!(out, "\nroute: {e}");
        }
        if let Some(e) = &self.capabilities_error {
            let _ = writeln!(out, "\ncapabilities: {e}");
        }
        if !self.advisories.is_empty() {
            out.push('\n');
            for a in &self.advisories {
                let _ = writeln!(out, "ROUTING ADVISORY: avoid {}: {}", a.provider, a.reason);
            }
        }
        if self.skipped_entries > 0 {
            let _ = writeln!(
                out,
                "\nnote: skipped {} log entries without a provider, a timestamp or a result",
                self.skipped_entries
            );
        }
        out
    }

    /// Judge each catalog provider's staleness ([`stale::judge`]) by its
    /// newest probe, at the brief's now, with 2 × the schedule's interval
    /// and the last run's reasons; mark the rows of the stale ones, and
    /// warn about each (`provider_stale`) unless the whole record is stale,
    /// which the banner already says.
    pub fn judge_providers(
        &mut self,
        s: &Settings,
        states: &States,
        newest: &Newest,
        h: &Health,
        only: &ProviderFilter,
    ) {
        // A record whose providers' budgets all space their probes out is
        // stale only past twice the shortest of their cadences.
        self.record_after = stale::record_stale_after(&s.catalog, states, newest);
        // A model route's traffic proved is not probed (for up to a day):
        // while `check` still runs (its last run is recent), its latest
        // routed success keeps the record fresh as a probe would. A
        // stopped scheduler is still called stale.
        let check_runs = h
            .last_run
            .as_ref()
            .is_some_and(|r| self.now_ts - r.finished_at.timestamp() <= self.record_after);
        let proven_at = |p: Option<&str>| {
            if !check_runs {
                return None;
            }
            self.proven_by_traffic
                .iter()
                .filter(|m| p.is_none_or(|p| crate::catalog::ModelKey::provider_of(&m.model) == p))
                .filter_map(|m| m.traffic.last_ok)
                .map(|t| t.timestamp())
                .max()
        };
        let freshest = self.newest_ts.max(proven_at(None));
        self.stale = freshest.is_none_or(|t| self.now_ts - t > self.record_after);
        let stale: Vec<Stale> = stale::judge(
            &s.catalog,
            states,
            newest,
            h.last_run.as_ref(),
            self.now_ts,
            h.interval.stale_after(),
        )
        .into_iter()
        .filter(|st| {
            only.admits(&st.provider)
                && proven_at(Some(&st.provider))
                    .is_none_or(|t| self.now_ts - t > h.interval.stale_after().num_seconds())
        })
        .collect();
        for row in &mut self.providers {
            if let Some(st) = stale.iter().find(|st| st.provider == row.provider) {
                row.stale = true;
                row.stale_reason = st.reason.clone();
                row.icon = "[STALE]";
            }
        }
        if !self.stale {
            for st in &stale {
                self.warnings.push(Warning {
                    kind: "provider_stale",
                    message: stale::provider_warning(st, self.now_ts, &h.every),
                });
            }
        }
        self.stale_providers = stale;
    }

    /// Only `only`'s providers: their rows, models, advisories, cooldowns
    /// and notes on their models (`brief --provider`). The stale warnings
    /// are [`Brief::judge_providers`]'s.
    pub fn keep(&mut self, only: &ProviderFilter) {
        self.only = only.names().join(", ");
        self.providers.retain(|p| only.admits(&p.provider));
        self.advisories.retain(|a| only.admits(&a.provider));
        self.model_speed.retain(|m| only.admits_key(&m.model));
        self.out_of_rotation.retain(|m| only.admits_key(&m.model));
        self.retired.retain(|m| only.admits_key(&m.model));
        self.probe_budget.retain(|m| only.admits_key(&m.model));
        self.proven_by_traffic.retain(|m| only.admits_key(&m.model));
        // A bench's target is its provider, then `#key…` or `::model`.
        self.route_cooldowns
            .retain(|b| only.admits(b.target.split(['#', ':']).next().unwrap_or_default()));
    }

    /// The models probed less often than every run by their probe budget,
    /// each with its cadence, and the models route's traffic has proven
    /// since their last probe (not probed while it does).
    fn budget_text(&self, out: &mut String) {
        if !self.probe_budget.is_empty() {
            let _ = writeln!(
                out,
                "\nprobe budget: {} probed less often than every run (probe_share)",
                crate::format::count(self.probe_budget.len(), "model", "models")
            );
            for c in &self.probe_budget {
                let _ = writeln!(out, "  {}: {}", c.model, c.cadence);
            }
        }
        if !self.proven_by_traffic.is_empty() {
            let _ = writeln!(
                out,
                "\nproven by route's traffic since the last probe ({}, not probed while it holds):",
                crate::format::count(self.proven_by_traffic.len(), "model", "models")
            );
            for p in &self.proven_by_traffic {
                let _ = writeln!(out, "  {}: {}", p.model, p.traffic.words(self.now_at));
            }
        }
    }

    /// The retired models and the catalog's notes.
    fn catalog_text(&self, out: &mut String) {
        if !self.retired.is_empty() {
            let _ = writeln!(
                out,
                "\nretired by their providers ({}: no longer listed, answered \"not found\"):",
                crate::format::count(self.retired.len(), "model", "models")
            );
            for r in &self.retired {
                let _ = writeln!(
                    out,
                    "  {}: unlisted since {}",
                    r.model,
                    r.missing_since.as_deref().unwrap_or("?")
                );
            }
        }
        if !self.catalog_notes.is_empty() {
            out.push('\n');
            for n in &self.catalog_notes {
                let _ = writeln!(out, "{n}");
            }
        }
    }

    /// When each paused model is next re-probed, under the out-of-rotation
    /// table.
    fn reprobe_text(&self, out: &mut String) {
        for m in &self.out_of_rotation {
            if let Some(r) = &m.reprobe {
                let _ = writeln!(out, "  {}: {}", m.model, r.words(self.now_at));
            }
        }
    }

    /// Fill in tokens per second from the latest speed probes.
    pub fn set_speed(&mut self, findings: &crate::capabilities::Findings) {
        for p in &mut self.providers {
            p.tokens_per_s = findings.provider_tokens_per_s(&p.provider);
        }
        for m in &mut self.model_speed {
            m.tokens_per_s = findings.tokens_per_s(&m.model);
        }
    }

    /// Each model probed this week: uptime over the spans, first token
    /// and tokens per second.
    fn speed_text(&self, out: &mut String) {
        if self.model_speed.is_empty() {
            return;
        }
        out.push_str("\nmodels (uptime over the last hour, day and week; median first token over the window):\n");
        let mut t = output::table(&["MODEL", "1H · 24H · 7D", "FIRST TOKEN", "TOKENS/S"]);
        t.optional(&[3]);
        for m in &self.model_speed {
            t.add_row(vec![
                m.model.clone(),
                m.spans.cell(),
                fmt_ms(m.median_ttft_ms),
                crate::report::rollup::fmt_rate(m.tokens_per_s),
            ]);
        }
        let _ = writeln!(out, "{t}");
    }

    /// The capabilities table, once some model has a verdict: the models
    /// the verdicts file or the catalog says something about. Nothing at
    /// all before the first capability probe.
    /// The models left out (`--all` shows them) are counted under it.
    fn capabilities_text(&self, out: &mut String) {
        let all = || self.models.iter().chain(&self.hidden_models);
        if !all().any(|m| m.caps.probed()) {
            return;
        }
        out.push_str("\ncapabilities:\n");
        let rows: Vec<&ModelLine> = self
            .models
            .iter()
            .filter(|m| m.caps.of_interest())
            .collect();
        if !rows.is_empty() {
            let mut t = output::table(&["MODEL", "CAPABILITIES"]);
            for m in rows {
                t.add_row(vec![m.model.clone(), m.caps.cell(self.now_at)]);
            }
            let _ = writeln!(out, "{t}");
            out.push_str(CAPABILITIES_LEGEND);
            out.push('\n');
        }
        let hidden = self
            .hidden_models
            .iter()
            .filter(|m| m.caps.of_interest())
            .count();
        if hidden > 0 {
            let _ = writeln!(
                out,
                "{} not shown ({} and no key set for {}); --all shows them",
                crate::format::count(hidden, "model", "models"),
                self.unprobed,
                if hidden == 1 {
                    "its provider"
                } else {
                    "their providers"
                },
            );
        }
    }
}

/// `412ms`, or `—` where none was measured.
fn fmt_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), |v| format!("{v:.0}ms"))
}

/// A provider's first token, and its models' tokens per second where a
/// speed probe measured them: `412ms · 96 tok/s`.
pub fn speed_cell(ttft: Option<f64>, rate: Option<f64>) -> String {
    match rate {
        Some(_) => format!(
            "{} · {}",
            fmt_ms(ttft),
            crate::report::rollup::fmt_rate(rate)
        ),
        None => fmt_ms(ttft),
    }
}

/// A model's probe cadence, as its budget sets it.
#[derive(Debug, Clone, Serialize)]
pub struct Cadence {
    pub model: String,
    /// "probed every 12h: 20 requests/day, probes use 2".
    pub cadence: String,
}

/// A model route's traffic has proven since its last probe.
#[derive(Debug, Clone, Serialize)]
pub struct Proven {
    pub model: String,
    pub traffic: crate::usage::traffic::Since,
}

/// What the capability cells mean, under the table.
pub const CAPABILITIES_LEGEND: &str =
    "✔ passed · ✗ failed · ? unknown · (3h) age of the oldest verdict · 128k context";

/// A list serialized as its length.
fn count<S: serde::Serializer, T>(items: &[T], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(items.len() as u64)
}
