//! What a `check` run shows: the run's summary as a table or JSON, the
//! same in a few plain lines for a monitor, and the `--dry-run` plan.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::plan::{NotProbed, Plan, Skipped, schedule};
use super::writer::Offline;
use crate::catalog::model_key;
use crate::due;
use crate::error::Result;
use crate::exit;
use crate::outcome::Entry;
use crate::output;
use crate::state::Transition;

/// What one `check` run did: its entries and state changes, what it left
/// out, and whether it was offline. `--json` prints it as it is.
#[derive(Debug, Serialize)]
pub struct RunSummary {
    pub started: String,
    pub finished: String,
    pub entries: Vec<Entry>,
    pub state_changes: Vec<Transition>,
    pub skipped: Vec<Skipped>,
    pub not_probed: Vec<NotProbed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offline: Option<Offline>,
}

/// Up to this many providers without a key are listed one per line.
const MISSING_KEY_LINES: usize = 3;

/// The run in a few plain lines, for a monitor (the end ping's body): counts, each
/// failure (its error is already redacted), each state change, the
/// skipped providers, and the offline note.
pub fn plain_summary(r: &RunSummary) -> String {
    let ok = r.entries.iter().filter(|e| e.ok == 1).count();
    let mut out = format!(
        "{ok}/{} probes passed, {}\n",
        r.entries.len(),
        crate::format::count(r.state_changes.len(), "state change", "state changes")
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

/// `--dry-run`: every planned probe with its start, the `--jitter` wait
/// and the `--if-due` decision, as a table or JSON.
pub fn dry_run(
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
        "dry run: {} on {} in parallel; the last starts at +{}\n{t}\n",
        crate::format::count(probes.len(), "probe", "probes"),
        crate::format::count(plan.lanes.len(), "provider", "providers"),
        crate::duration::format_secs(longest)
    ));
    out.push_str(&footer(&plan.skipped, &plan.not_probed));
    output::print(&out)?;
    Ok(exit::SUCCESS)
}

/// The run as a table on stdout, then its failures and what it left out.
pub fn print_summary(r: &RunSummary) -> Result<()> {
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
            out.push_str(&format!(
                ", {}",
                crate::format::count(r.state_changes.len(), "state change", "state changes")
            ));
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

/// Providers left out, and models not probed. A few providers without a
/// key get a line each; more (the embedded catalog's, which most users
/// never set up) get one line that names them and points at `--list`.
fn footer(skipped: &[Skipped], not_probed: &[NotProbed]) -> String {
    let mut out = String::new();
    let (no_key, other): (Vec<&Skipped>, Vec<&Skipped>) =
        skipped.iter().partition(|s| s.missing_key);
    if no_key.len() > MISSING_KEY_LINES {
        let names: Vec<&str> = no_key.iter().map(|s| s.provider.as_str()).collect();
        out.push_str(&format!(
            "{} skipped for a missing key ({}); `llmprobe check --list` names their variables\n",
            crate::format::count(no_key.len(), "provider", "providers"),
            names.join(", ")
        ));
    } else {
        for s in &no_key {
            out.push_str(&format!("{}: {}\n", s.provider, s.reason));
        }
    }
    for s in other {
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
