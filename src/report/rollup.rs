//! What `rollup` prints: the health figures of [`crate::healthlog::rollup`]
//! as Markdown for a README, JSON, CSV or Prometheus text, and
//! `--capabilities`' pass rates per model and capability, read from the
//! capability log, in the same formats. `cmd/rollup.rs` parses the flags,
//! reads and writes; the badge and the status page have their own modules
//! ([`crate::badge`], [`crate::status_page`]).
//!
//! Meaning, per docs/formats.md: a legacy averaged entry counts as `sample_count`
//! probes with `uptime × sample_count` passes, and its latency is weighted by
//! `sample_count`; `disabled_skip` rows are not probes. Latency figures are
//! over probes that got a response (`latency_ms > 0`).
//!
//! The Markdown block must be reproducible: nothing in it depends on the
//! clock except which entries fall in the window, and the "Last checked"
//! time is that of the newest entry, so a second `--readme` run without new
//! data leaves the file alone.
//!
//! The capability log (`stats/capability_log.json`, the health log's format
//! plus `probe`) is read with the same reader; each row carries the latest
//! verdict from `stats/capabilities.json`. Capability probes never count
//! toward uptime.

use std::fmt::Write as _;

use serde::Serialize;

use crate::capabilities::{Capability, Judgement};
use crate::cli::{GroupBy, RollupFormat};
use crate::error::Result;
use crate::format::{fmt_count, fmt_minute, fmt_pct, fmt_rfc3339};
use crate::grade::{FAIR, GOOD};
use crate::healthlog::read::{self, Record, Sink};
use crate::healthlog::rollup::{Report, Row, TREND_BUCKETS, warn_read};
use crate::healthlog::scan::End;
use crate::healthlog::summary::Probes;
use crate::settings::Settings;
use crate::window::Window;

const SPARKS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

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

/// Fill in each row's [`Row::tokens_per_s`] from the latest speed probes
/// in `findings`: a model's own, a provider's the median of its models'.
pub fn set_speed(rows: &mut [Row], findings: &crate::capabilities::Findings) {
    for r in rows {
        r.tokens_per_s = match &r.model {
            Some(m) => findings.tokens_per_s(&crate::catalog::model_key(&r.provider, m)),
            None => findings.provider_tokens_per_s(&r.provider),
        };
    }
}

/// `142 tok/s`, or `—` where none was measured.
pub fn fmt_rate(v: Option<f64>) -> String {
    v.map_or_else(|| "—".into(), |v| format!("{} tok/s", v.round() as i64))
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The Markdown block, in the style of the old tool's README block.
pub fn markdown(rep: &Report, rows: &[Row], by: GroupBy) -> String {
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
    // Highest uptime first, then by name; rows without samples in the
    // window last. (Sorting by latency put dead models that fail fast on
    // top.)
    let mut sorted: Vec<&Row> = rows.iter().collect();
    sorted.sort_by(|a, b| {
        let key = |r: &Row| r.uptime.unwrap_or(-1.0);
        key(b)
            .total_cmp(&key(a))
            .then_with(|| a.name().cmp(&b.name()))
    });
    let trend = rep
        .trend
        .filter(|_| rows.iter().any(|r| !r.trend.is_empty()));
    let mut header = match by {
        GroupBy::Provider => "| Provider |".to_string(),
        GroupBy::Model => "| Provider | Model |".to_string(),
    };
    // Speed columns only where something was measured: a log from before
    // streamed probes, or without speed probes, keeps its old block.
    let ttft = rows.iter().any(|r| r.median_ttft_ms.is_some());
    let rate = rows.iter().any(|r| r.tokens_per_s.is_some());
    header.push_str(" Status | Uptime | 1h · 24h · 7d |");
    if ttft {
        header.push_str(" TTFT |");
    }
    header.push_str(" Avg Latency | p95 Latency |");
    if rate {
        header.push_str(" Tokens/s |");
    }
    header.push_str(" Samples |");
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
        let (status, uptime) = match r.uptime {
            Some(u) => (icon(r.status), fmt_pct(u)),
            None => ("—", "no samples".to_string()),
        };
        let _ = write!(out, " {status} | {uptime} | {} |", r.spans.cell());
        if ttft {
            let _ = write!(out, " {} |", ms(r.median_ttft_ms));
        }
        let _ = write!(
            out,
            " {} | {} |",
            ms(r.avg_latency_ms),
            ms(r.p95_latency_ms)
        );
        if rate {
            let _ = write!(out, " {} |", fmt_rate(r.tokens_per_s));
        }
        let _ = write!(out, " {} |", fmt_count(r.samples));
        if trend.is_some() {
            let _ = write!(out, " {} |", sparkline(&r.trend));
        }
        out.push('\n');
    }
    let _ = write!(
        out,
        "\n*✅ ≥{:.0}% uptime · ⚠️ {:.0}–{:.0}% · ❌ <{:.0}% · — no samples in the window. \
         Uptime over the window, then over the last hour, day and week. \
         Latency over probes that got a response; p95 from a fixed log-scale histogram (±2%).",
        GOOD * 100.0,
        FAIR * 100.0,
        GOOD * 100.0,
        FAIR * 100.0
    );
    if ttft {
        out.push_str(" TTFT: the median time to the first token of streamed probes that passed.");
    }
    if rate {
        out.push_str(" Tokens/s: output tokens per second after the first, from the latest speed probe (a provider: the median of its models').");
    }
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

pub fn json(rep: &Report, rows: &[Row]) -> String {
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

pub fn csv(rows: &[Row], by: GroupBy) -> String {
    let mut out = String::new();
    out.push_str("provider,");
    if by == GroupBy::Model {
        out.push_str("model,");
    }
    out.push_str("samples,uptime_pct,avg_latency_ms,p95_latency_ms,status,last_probe,uptime_1h_pct,uptime_24h_pct,uptime_7d_pct,median_ttft_ms,tokens_per_s\n");
    let opt = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_default();
    for r in rows {
        out.push_str(&csv_field(&r.provider));
        out.push(',');
        if let Some(m) = &r.model {
            out.push_str(&csv_field(m));
            out.push(',');
        }
        let [h1, h24, d7] = r.spans.uptimes().map(|u| opt(u.map(crate::format::pct)));
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{h1},{h24},{d7},{},{}",
            fmt_count(r.samples),
            opt(r.uptime.map(crate::format::pct)),
            opt(r.avg_latency_ms),
            opt(r.p95_latency_ms),
            r.status,
            r.last_probe.as_deref().unwrap_or(""),
            opt(r.median_ttft_ms),
            opt(r.tokens_per_s),
        );
    }
    out
}

/// Prometheus text exposition format, for node_exporter's textfile
/// collector. Groups without samples export only `llmprobe_samples 0`, never
/// a made-up ratio.
pub fn prom(rep: &Report, rows: &[Row], by: GroupBy) -> String {
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
    let metrics: [Metric<Row>; 7] = [
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
            "llmprobe_ttft_median_seconds",
            "Median time to the first token of streamed probes that passed, over the window.",
            true,
            |r| r.median_ttft_ms.map(|v| v / 1000.0),
        ),
        (
            "llmprobe_tokens_per_second",
            "Output tokens per second from the latest speed probe (a provider: the median of its models').",
            false,
            |r| r.tokens_per_s,
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
pub fn capabilities(
    s: &Settings,
    window: &Window,
    now: i64,
    format: RollupFormat,
) -> Result<String> {
    let path = s.capability_log_path();
    let start = window.start(now);
    let (acc, summary) = read::read_all(&path, || CapAcc::new(start))?;
    let (findings, findings_error) = crate::report::capview::read_findings(&s.capabilities_path());
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
            crate::report::capview::mark(r.verdict),
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
