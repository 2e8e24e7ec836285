//! The health log aggregated per provider and per model over a window:
//! uptime, latency (mean, median, p95), sample counts, a trend and each
//! model's newest probe. `rollup` formats it (Markdown, JSON, CSV,
//! Prometheus text, badges), and `route --serve` serves badges from it.
//!
//! The whole log is streamed once through [`super::read`]; each model
//! keeps a fixed-size accumulator (sums, a log-scale latency histogram for
//! the percentiles, 24 trend buckets), so memory does not grow with the
//! log. What the figures mean is in [`super::summary`] and
//! docs/formats.md.

use std::path::Path;

use serde::Serialize;

use crate::error::Result;
use crate::format::fmt_rfc3339;
use crate::grade;
use crate::window::Window;

use super::read::{self, FastMap, Record, Sink};
use super::recent::{self, Recent};
use super::scan::End;
use super::summary::{Figures, Spans};

/// `rollup --window`'s default for every format but `html`, and the
/// served badges' default `window`.
pub const DEFAULT_WINDOW: &str = "24h";

/// What a row stands for: a provider (its models' probes together) or one
/// model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    Provider,
    Model,
}

/// How many buckets the trend has.
pub const TREND_BUCKETS: usize = 24;

/// Everything read from the log, before formatting.
pub struct Report {
    pub window: Window,
    pub window_start: Option<i64>,
    pub trend: Option<TrendSpec>,
    acc: Acc,
    pub skipped: u64,
    pub torn_bytes: u64,
}

/// Read the log at `path` and aggregate it over `window` ending at `now`.
pub fn compute(path: &Path, window: &Window, now: i64, with_trend: bool) -> Result<Report> {
    // For `all`, the trend spans the log's own history: from its first entry
    // to its newest (read from the tail when the tail is in line form, else
    // up to now), so an old log's trend is not mostly empty buckets.
    let (first, trend_end) = if with_trend && window.secs.is_none() {
        // Pretty-printed (legacy) logs take one extra forward pass for the
        // newest timestamp. Such logs are small; ours are in line form.
        let newest = recent::read_recent(path, None, |_| NewestTs(None))?.0.0;
        (read::first_ts(path)?, newest.unwrap_or(now))
    } else {
        (None, now)
    };
    let trend = with_trend
        .then(|| TrendSpec::new(window, trend_end, first))
        .flatten();
    let start = window.start(now);
    let (acc, summary) = read::read_all(path, || Acc::new(start, now, trend))?;
    Ok(Report {
        window: window.clone(),
        window_start: window.secs.map(|_| start),
        trend,
        acc,
        skipped: summary.skipped,
        torn_bytes: match summary.end {
            End::Torn { torn_bytes, .. } => torn_bytes,
            _ => 0,
        },
    })
}

impl Report {
    /// Say on stderr what was left out, so that figures are never silently
    /// based on less than the file.
    pub fn warn(&self, path: &Path) {
        if self.newest().is_none() {
            // On stderr: the output itself (a README block, JSON, CSV)
            // must not carry a local path.
            eprintln!(
                "note: no probes recorded in {} ({}); run `llmprobe check`, or pass --stats-dir if the data is elsewhere",
                crate::fsutil::absolute(path).display(),
                if path.exists() {
                    "it holds no probes"
                } else {
                    "the file does not exist"
                }
            );
        }
        warn_read(path, self.torn_bytes, self.skipped);
    }

    pub fn newest(&self) -> Option<i64> {
        self.acc.newest
    }

    /// One row per provider or per model, sorted by name.
    pub fn rows(&self, per: Per) -> Vec<Row> {
        let mut rows = Vec::new();
        match per {
            Per::Provider => {
                let mut totals: Vec<(&str, Stats)> = Vec::new();
                for (p, _, st) in self.acc.iter() {
                    match totals.iter_mut().find(|(name, _)| *name == p) {
                        Some((_, total)) => total.merge(st),
                        None => {
                            let mut total = Stats::default();
                            total.merge(st);
                            totals.push((p, total));
                        }
                    }
                }
                for (p, total) in &totals {
                    rows.push(Row::new(p, None, total));
                }
            }
            Per::Model => {
                for (p, m, st) in self.acc.iter() {
                    rows.push(Row::new(p, Some(m), st));
                }
            }
        }
        rows.sort_by(|a, b| (&a.provider, &a.model).cmp(&(&b.provider, &b.model)));
        rows
    }
}

/// Say on stderr what a read of the log at `path` left out: a torn tail,
/// unusable entries.
pub fn warn_read(path: &Path, torn_bytes: u64, skipped: u64) {
    if torn_bytes > 0 {
        eprintln!(
            "warning: {}: ignored a torn tail of {torn_bytes} bytes (an interrupted write; the next check repairs it)",
            path.display(),
        );
    }
    if skipped > 0 {
        eprintln!(
            "note: {}: skipped {skipped} entries without a provider, a timestamp or a result",
            path.display(),
        );
    }
}

/// The newest timestamp in a log.
struct NewestTs(Option<i64>);

impl Sink for NewestTs {
    fn record(&mut self, r: &Record<'_>) {
        self.0 = self.0.max(Some(r.ts));
    }

    fn merge(&mut self, later: Self) {
        self.0 = self.0.max(later.0);
    }
}

impl Recent for NewestTs {
    /// The last entry in the file is the newest.
    fn newest_first(&mut self, r: &Record<'_>) -> bool {
        self.0 = Some(r.ts);
        false
    }
}

/// Where the 24 trend buckets lie. Buckets are aligned to multiples of their
/// width since the epoch, so that two runs in the same hour agree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrendSpec {
    pub width: i64,
    first_bucket: i64,
}

impl TrendSpec {
    /// `window/24` per bucket (hourly for 24h); for `all`, from the first
    /// entry to now, in whole hours. `None` for `all` on an empty log.
    fn new(window: &Window, now: i64, first: Option<i64>) -> Option<TrendSpec> {
        let n = TREND_BUCKETS as i64;
        let width = match window.secs {
            Some(s) => ((s + n - 1) / n).max(1),
            None => {
                let span = (now - first?).max(1);
                let hours = (span + n * 3600 - 1) / (n * 3600);
                hours.max(1) * 3600
            }
        };
        Some(TrendSpec {
            width,
            first_bucket: now.div_euclid(width) - (n - 1),
        })
    }

    #[inline]
    fn index(&self, ts: i64) -> usize {
        (ts.div_euclid(self.width) - self.first_bucket).clamp(0, TREND_BUCKETS as i64 - 1) as usize
    }
}

/// One model's figures over the window.
#[derive(Clone, Default)]
struct Stats {
    fig: Figures,
    trend: Vec<(f64, f64)>,
    /// Uptime over the last hour, day and week, whatever the window.
    spans: Spans,
    /// The newest probe of this model in the whole log, in or out of the
    /// window.
    newest: Option<i64>,
}

impl Stats {
    #[inline]
    fn add(&mut self, r: &Record<'_>, trend: Option<&TrendSpec>) {
        self.fig.add(r);
        if let Some(t) = trend {
            if self.trend.is_empty() {
                self.trend = vec![(0.0, 0.0); TREND_BUCKETS];
            }
            let b = &mut self.trend[t.index(r.ts)];
            b.0 += r.samples;
            b.1 += r.passed;
        }
    }

    fn merge(&mut self, o: &Stats) {
        self.fig.merge(&o.fig);
        self.spans.merge(&o.spans);
        if !o.trend.is_empty() {
            if self.trend.is_empty() {
                self.trend = vec![(0.0, 0.0); TREND_BUCKETS];
            }
            for (a, b) in self.trend.iter_mut().zip(&o.trend) {
                a.0 += b.0;
                a.1 += b.1;
            }
        }
        self.newest = self.newest.max(o.newest);
    }
}

/// The sink: per provider, per model. Maps hold indices rather than the
/// stats themselves, so that the hot path is one `get` per level (a
/// get-or-insert on a map of values would hash twice).
struct Acc {
    start: i64,
    now: i64,
    trend: Option<TrendSpec>,
    providers: FastMap<Box<str>, usize>,
    models: Vec<FastMap<Box<str>, usize>>,
    names: Vec<(Box<str>, Box<str>)>,
    stats: Vec<Stats>,
    newest: Option<i64>,
}

impl Acc {
    fn new(start: i64, now: i64, trend: Option<TrendSpec>) -> Acc {
        Acc {
            start,
            now,
            trend,
            providers: FastMap::default(),
            models: Vec::new(),
            names: Vec::new(),
            stats: Vec::new(),
            newest: None,
        }
    }

    #[inline]
    fn slot(&mut self, provider: &str, model: &str) -> usize {
        let p = match self.providers.get(provider) {
            Some(&p) => p,
            None => {
                self.models.push(FastMap::default());
                self.providers
                    .insert(provider.into(), self.models.len() - 1);
                self.models.len() - 1
            }
        };
        match self.models[p].get(model) {
            Some(&i) => i,
            None => {
                self.stats.push(Stats::default());
                self.names.push((provider.into(), model.into()));
                self.models[p].insert(model.into(), self.stats.len() - 1);
                self.stats.len() - 1
            }
        }
    }

    /// Every model's stats, with its provider and model names.
    fn iter(&self) -> impl Iterator<Item = (&str, &str, &Stats)> {
        self.names
            .iter()
            .zip(&self.stats)
            .map(|((p, m), st)| (&**p, &**m, st))
    }
}

impl Sink for Acc {
    #[inline]
    fn record(&mut self, r: &Record<'_>) {
        let (start, trend) = (self.start, self.trend);
        let sample = r.is_sample();
        if sample {
            self.newest = self.newest.max(Some(r.ts));
        }
        // Every model seen anywhere gets a row, so that a window without its
        // data shows "no samples" rather than nothing.
        let i = self.slot(r.provider, r.model);
        let st = &mut self.stats[i];
        if sample {
            st.newest = st.newest.max(Some(r.ts));
            if r.ts > self.now - super::summary::SPANS[2].1 {
                st.spans.add(r, self.now);
            }
            if r.ts >= start {
                st.add(r, trend.as_ref());
            }
        }
    }

    fn merge(&mut self, later: Acc) {
        self.newest = self.newest.max(later.newest);
        for ((p, m), st) in later.names.iter().zip(&later.stats) {
            let i = self.slot(p, m);
            self.stats[i].merge(st);
        }
    }
}

/// One output row.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub provider: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(serialize_with = "crate::format::serialize_count")]
    pub samples: f64,
    #[serde(serialize_with = "crate::format::serialize_count")]
    pub passed: f64,
    pub uptime: Option<f64>,
    pub avg_latency_ms: Option<f64>,
    /// The median latency of probes that got a response, from the same
    /// histogram as p95 (within 2%); what a latency badge shows.
    pub median_latency_ms: Option<f64>,
    pub p95_latency_ms: Option<f64>,
    /// The median time to the first token of streamed probes that
    /// passed (`ttft_ms`), from a histogram like p95's; `null` without any.
    pub median_ttft_ms: Option<f64>,
    /// Output tokens per second from the latest speed probe of the model
    /// (a provider row: the median of its models'), from
    /// capabilities.json (filled in by `report::rollup::set_speed`);
    /// `null` where none was measured.
    pub tokens_per_s: Option<f64>,
    /// Uptime over the last 1 h, 24 h and 7 d before now, whatever the
    /// window: `{"1h": 1.0, "24h": 0.98, "7d": null}`.
    pub uptime_by_span: std::collections::BTreeMap<&'static str, Option<f64>>,
    #[serde(skip)]
    pub spans: Spans,
    pub status: &'static str,
    pub last_probe: Option<String>,
    /// Uptime per trend bucket, oldest first; `null` where there were no
    /// probes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trend: Vec<Option<f64>>,
}

impl Row {
    fn new(provider: &str, model: Option<&str>, st: &Stats) -> Row {
        let uptime = st.fig.probes.uptime();
        Row {
            provider: provider.to_string(),
            model: model.map(str::to_string),
            samples: st.fig.probes.samples,
            passed: st.fig.probes.passed,
            uptime,
            avg_latency_ms: st.fig.latency.mean(),
            median_latency_ms: st.fig.median(),
            p95_latency_ms: st.fig.p95(),
            median_ttft_ms: st.fig.ttft.median(),
            tokens_per_s: None,
            uptime_by_span: st.spans.by_span(),
            spans: st.spans,
            status: grade::status_word(uptime),
            last_probe: st.newest.map(fmt_rfc3339),
            trend: st
                .trend
                .iter()
                .map(|&(n, ok)| (n > 0.0).then(|| ok / n))
                .collect(),
        }
    }

    pub fn name(&self) -> String {
        match &self.model {
            Some(m) => crate::catalog::model_key(&self.provider, m),
            None => self.provider.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trend_buckets_are_aligned() {
        let w = Window::parse("24h").unwrap();
        let now = 1_000_000 * 3600 + 1800;
        let t = TrendSpec::new(&w, now, None).unwrap();
        assert_eq!(t.width, 3600);
        assert_eq!(t.index(now), 23);
        assert_eq!(t.index(now - 3600), 22);
        assert_eq!(t.index(now - 24 * 3600), 0);
        assert_eq!(t.index(now + 99_999), 23);
        let all = Window::parse("all").unwrap();
        assert_eq!(TrendSpec::new(&all, now, None), None);
        let t = TrendSpec::new(&all, now, Some(now - 240 * 3600)).unwrap();
        assert_eq!(t.width, 10 * 3600);
    }
}
