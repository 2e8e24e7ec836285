//! What a `check` run shows: the run's summary as a table or JSON, the
//! same in a few plain lines for a monitor, and the `--dry-run` plan.
//! Capability probes are shown apart from the basic probes and counted
//! apart: they never change a state or the exit code.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::plan::{NotProbed, Plan, Skipped, cap_schedule, schedule};
use super::writer::{CapRecord, Offline};
use crate::capabilities::Judgement;
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
    /// The basic probes, as appended to the health log.
    pub entries: Vec<Entry>,
    /// The capability probes, as appended to the capability log, each with
    /// what it decided.
    pub capabilities: Vec<CapRecord>,
    pub state_changes: Vec<Transition>,
    /// Each model a hard failure of this run moved toward `disabled`: its
    /// hard failures in a row now, and how many disable it (`disable_after`).
    pub hard_failures: BTreeMap<String, HardFailures>,
    pub skipped: Vec<Skipped>,
    pub not_probed: Vec<NotProbed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offline: Option<Offline>,
    /// A signal stopped the run: what it had recorded by then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<Interrupted>,
    /// Models not probed because of their probe budget, each with when
    /// its next probe may go ([`crate::usage::budget`]).
    pub budget: Vec<super::budget::BudgetSkip>,
    /// Active models not probed because route's traffic proved them since
    /// their last probe ([`crate::usage::traffic`]).
    pub traffic: Vec<super::budget::TrafficSkip>,
    /// The previous run (its `last_run.json`) skipped the same providers
    /// for a missing key: the table leaves them unsaid (`check --list`
    /// and `--json` still say them).
    #[serde(skip)]
    pub missing_keys_said_before: bool,
}

/// A run that a signal stopped (exit 130 or 143): every result measured
/// before it is recorded; the probes under way are abandoned and the rest
/// are not sent.
#[derive(Debug, Clone, Serialize)]
pub struct Interrupted {
    /// `SIGINT` (Ctrl-C) or `SIGTERM`.
    pub signal: &'static str,
    /// Results recorded (basic and capability probes).
    pub recorded: usize,
    /// Basic probes of the plan not done: not sent, or abandoned under way.
    pub not_done: usize,
    /// 130 (SIGINT) or 143 (SIGTERM).
    pub exit_code: u8,
}

impl Interrupted {
    /// The run's last line: `interrupted (SIGINT): 3 results recorded, 1
    /// state change (openai::x → disabled); 4 planned probes not done`.
    pub fn line(&self, changes: &[Transition]) -> String {
        let count = crate::format::count;
        let mut out = format!(
            "interrupted ({}): {} recorded, {}",
            self.signal,
            count(self.recorded, "result", "results"),
            count(changes.len(), "state change", "state changes")
        );
        if !changes.is_empty() {
            const SHOWN: usize = 3;
            let mut each: Vec<String> = changes
                .iter()
                .take(SHOWN)
                .map(|t| format!("{} → {}", t.model, t.to))
                .collect();
            if changes.len() > SHOWN {
                each.push(format!("{} more", changes.len() - SHOWN));
            }
            out.push_str(&format!(" ({})", each.join(", ")));
        }
        if self.not_done > 0 {
            out.push_str(&format!(
                "; {} not done",
                count(self.not_done, "planned probe", "planned probes")
            ));
        }
        out
    }
}

/// A model's hard failures in a row after this run, of the count that
/// disables it.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct HardFailures {
    pub in_a_row: u32,
    pub disable_after: u32,
}

/// The Result of a remote result that the offline rule kept out of the
/// record.
pub const NOT_RECORDED: &str = "not recorded (offline)";

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
            "failed {}: {}{status}{error}\n",
            crate::catalog::ModelKey::new(&e.provider, &e.model),
            e.failure_type
        ));
    }
    for t in &r.state_changes {
        out.push_str(&format!(
            "state {}: {} → {} ({})\n",
            t.model, t.from, t.to, t.reason
        ));
    }
    if !r.capabilities.is_empty() {
        out.push_str(&cap_count(&r.capabilities));
        for c in &r.capabilities {
            out.push_str(&format!("capability {}\n", cap_line(c)));
        }
    }
    out.push_str(&skip_lines("skipped", &r.budget, &r.traffic));
    out.push_str(&footer(&r.skipped, &r.not_probed, true));
    if let Some(offline) = &r.offline {
        out.push_str(&format!("{offline}\n"));
    }
    if let Some(i) = &r.interrupted {
        out.push_str(&format!("{}\n", i.line(&r.state_changes)));
    }
    out
}

/// "1/2 capability probes passed (they never change a model's state)".
fn cap_count(caps: &[CapRecord]) -> String {
    let ok = caps.iter().filter(|c| c.entry.ok == 1).count();
    format!(
        "{ok}/{} capability probe{} passed (they never change a model's state)\n",
        caps.len(),
        if caps.len() == 1 { "" } else { "s" }
    )
}

/// One capability probe in a line: "groq::m tools ✔ (412 ms)", "groq::m
/// speed ✔ (1200 ms, first token 310 ms, 61 tokens at 68.5/s)", "groq::m
/// json ✗ wrong_answer: not JSON", or, when it decided nothing, "groq::m
/// tools ? rate_limit (429), verdict unchanged: …".
pub fn cap_line(c: &CapRecord) -> String {
    let e = &c.entry;
    let cap = e.probe.map(|p| p.as_str()).unwrap_or("?");
    let key = model_key(&e.provider, &e.model);
    let class = match e.status {
        Some(st) if e.ok == 0 && e.failure_type != "wrong_answer" => {
            format!("{} ({st})", e.failure_type)
        }
        _ => e.failure_type.to_string(),
    };
    let error = e
        .error
        .as_ref()
        .map(|x| format!(": {x}"))
        .unwrap_or_default();
    match c.decided {
        Some(Judgement::Yes) => {
            let first = e
                .ttft_ms
                .map(|t| format!(", first token {t} ms"))
                .unwrap_or_default();
            let rate = match (e.output_tokens, e.tokens_per_s) {
                (Some(n), Some(r)) => format!(", {n} tokens at {r}/s"),
                _ => String::new(),
            };
            format!("{key} {cap} ✔ ({} ms{first}{rate})", e.latency_ms)
        }
        Some(Judgement::No) => format!("{key} {cap} ✗ {class}{error}"),
        _ if e.ok == 1 => format!(
            "{key} {cap} ? passed, verdict unchanged ({} ms)",
            e.latency_ms
        ),
        _ => format!("{key} {cap} ? {class}, verdict unchanged{error}"),
    }
}

/// `--dry-run`: every planned probe with its start, the `--jitter` wait
/// and the `--if-due` decision, as a table or JSON.
pub fn dry_run(
    plan: &Plan,
    skips: &super::budget::Skips,
    json: bool,
    jitter: Option<Duration>,
    due: Option<(Duration, due::Decision)>,
    now: DateTime<Utc>,
) -> Result<u8> {
    let probes = schedule(plan)?;
    let caps = cap_schedule(plan, now)?;
    if json {
        let mut v = serde_json::json!({
            "dry_run": true,
            "probes": probes,
            "capability_probes": caps,
            "skipped": plan.skipped,
            "not_probed": plan.not_probed,
            "budget": skips.budget,
            "traffic": skips.traffic,
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
        .chain(caps.iter().map(|c| c.starts_at_secs))
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
    let plus_caps = if caps.is_empty() {
        String::new()
    } else {
        format!(
            " and {}",
            crate::format::count(caps.len(), "capability probe", "capability probes")
        )
    };
    out.push_str(&format!(
        "dry run: {}{plus_caps} on {} in parallel; the last starts at +{}\n{t}\n",
        crate::format::count(probes.len(), "probe", "probes"),
        crate::format::count(plan.lanes.len(), "provider", "providers"),
        crate::duration::format_secs(longest)
    ));
    for c in &caps {
        out.push_str(&format!(
            "capability probe: {} {} at +{}, if {} passes ({})\n",
            crate::catalog::ModelKey::new(c.provider, &c.model),
            c.capability,
            crate::duration::format_secs(c.starts_at_secs),
            c.model,
            c.why
        ));
    }
    out.push_str(&skip_lines("not probed", &skips.budget, &skips.traffic));
    out.push_str(&footer(&plan.skipped, &plan.not_probed, true));
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
    // The offline rule's remote results are shown, marked as not recorded.
    let held = r
        .offline
        .iter()
        .flat_map(|o| &o.not_recorded)
        .filter(|e| e.probe.is_none());
    let mut rows: Vec<(&Entry, bool)> = r
        .entries
        .iter()
        .map(|e| (e, true))
        .chain(held.map(|e| (e, false)))
        .collect();
    rows.sort_by(|(a, _), (b, _)| (&a.provider, &a.ts).cmp(&(&b.provider, &b.ts)));
    let mut t = output::table(&["Provider", "Model", "Result", "Latency", "State change"]);
    for (e, recorded) in rows {
        if !recorded {
            t.add_row(vec![
                e.provider.clone(),
                e.model.clone(),
                NOT_RECORDED.to_string(),
                e.latency(),
                String::new(),
            ]);
            continue;
        }
        let key = model_key(&e.provider, &e.model);
        let mut result = e.result();
        // A failure that moves the model toward `disabled` says how far.
        if e.ok == 0
            && let Some(h) = r.hard_failures.get(&key)
        {
            result.push_str(&format!(" hard {}/{}", h.in_a_row, h.disable_after));
        }
        let change = changes
            .get(key.as_str())
            .map(|t| format!("{} → {} ({})", t.from, t.to, t.reason))
            .unwrap_or_default();
        t.add_row(vec![
            e.provider.clone(),
            e.model.clone(),
            result,
            e.latency(),
            change,
        ]);
    }
    for b in &r.budget {
        let (p, m) = crate::catalog::ModelKey::split(&b.model).unwrap_or((&b.model, ""));
        t.add_row(vec![
            p.to_string(),
            m.to_string(),
            budget_words(b),
            String::new(),
            String::new(),
        ]);
    }
    for x in &r.traffic {
        let (p, m) = crate::catalog::ModelKey::split(&x.model).unwrap_or((&x.model, ""));
        t.add_row(vec![
            p.to_string(),
            m.to_string(),
            format!(
                "traffic: {}",
                x.traffic.words(crate::clock::Clock::from_env().now())
            ),
            String::new(),
            String::new(),
        ]);
    }
    let ok = r.entries.iter().filter(|e| e.ok == 1).count();
    let mut out = String::new();
    if t.row_count() > 0 {
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
            out.push_str(&format!(
                "  {}: {err}\n",
                crate::catalog::ModelKey::new(&e.provider, &e.model)
            ));
        }
    }
    if !r.capabilities.is_empty() {
        out.push_str("capability probes:\n");
        for c in &r.capabilities {
            out.push_str(&format!("  {}\n", cap_line(c)));
        }
        out.push_str(&cap_count(&r.capabilities));
    }
    if !r.budget.is_empty() || !r.traffic.is_empty() {
        out.push_str(&skips_line(r));
    }
    out.push_str(&footer(
        &r.skipped,
        &r.not_probed,
        !r.missing_keys_said_before,
    ));
    output::print(&out)
}

/// A line per model the budget or the traffic left out: `PREFIX p::m:
/// budget: …` or `PREFIX p::m: traffic: 3 ok since 13:02 UTC`.
fn skip_lines(
    prefix: &str,
    budget: &[super::budget::BudgetSkip],
    traffic: &[super::budget::TrafficSkip],
) -> String {
    let now = crate::clock::Clock::from_env().now();
    let budget = budget
        .iter()
        .map(|b| format!("{prefix} {}: {}\n", b.model, budget_words(b)));
    let traffic = traffic
        .iter()
        .map(|x| format!("{prefix} {}: traffic: {}\n", x.model, x.traffic.words(now)));
    budget.chain(traffic).collect()
}

/// "budget: next probe 14:00", or, when the allowance ran out at send
/// time, "budget: rpd 2 of 20 used today, probes may use 2; next 00:00".
fn budget_words(b: &super::budget::BudgetSkip) -> String {
    let next = crate::format::fmt_soon(
        b.next.timestamp(),
        crate::clock::Clock::from_env().now().timestamp(),
    );
    match b.why.as_str() {
        "not due" => format!("budget: next probe {next}"),
        why => format!("budget: {why}; next {next}"),
    }
}

/// One line saying what the budget and traffic left out, and each
/// budget-limited model's cadence once.
fn skips_line(r: &RunSummary) -> String {
    let mut out = String::new();
    let models = r.budget.iter().filter(|b| b.capability.is_none()).count();
    let caps = r.budget.len() - models;
    if models > 0 {
        out.push_str(&format!(
            "{} not probed this run: the probe budget (probe_share) holds them back\n",
            crate::format::count(models, "model", "models")
        ));
    }
    if caps > 0 {
        out.push_str(&format!(
            "{} not sent: the basic probes still due today come first\n",
            crate::format::count(caps, "capability probe", "capability probes")
        ));
    }
    if !r.budget.is_empty() {
        let mut seen = std::collections::BTreeSet::new();
        for b in &r.budget {
            if let Some(c) = &b.cadence
                && seen.insert((b.model.as_str(), c.as_str()))
            {
                out.push_str(&format!("  {}: {c}\n", b.model));
            }
        }
    }
    if !r.traffic.is_empty() {
        out.push_str(&format!(
            "{} proven by route's traffic since the last probe: not probed, nothing logged\n",
            crate::format::count(r.traffic.len(), "model", "models")
        ));
    }
    out
}

/// Providers left out, and models not probed. A few providers without a
/// key get a line each; more (the embedded catalog's, which most users
/// never set up) get one line that names them and points at `--list`.
/// `missing_keys`: say those without a key at all (a run's table says
/// them once per stats directory: [`RunSummary::missing_keys_said_before`]).
fn footer(skipped: &[Skipped], not_probed: &[NotProbed], missing_keys: bool) -> String {
    let mut out = String::new();
    let (no_key, other): (Vec<&Skipped>, Vec<&Skipped>) =
        skipped.iter().partition(|s| s.missing_key());
    if !missing_keys {
        // Said by an earlier run of this stats directory.
    } else if no_key.len() > MISSING_KEY_LINES {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::Capability;
    use crate::outcome::{FailureType, Outcome};

    fn cap(
        model: &str,
        c: Capability,
        failure: Option<FailureType>,
        status: Option<u16>,
        error: Option<&str>,
        decided: Option<Judgement>,
    ) -> CapRecord {
        let o = Outcome {
            failure,
            latency_ms: if failure.is_none() { 412 } else { 90 },
            status,
            error: error.map(str::to_string),
            unreachable: false,
            retry_at: None,
            model_gone: false,
            timing: Default::default(),
        };
        let mut entry = Entry::new("2026-12-01T10:00:05Z".into(), "groq", model, &o);
        entry.probe = Some(c);
        CapRecord { entry, decided }
    }

    #[test]
    fn capability_probes_are_shown_and_counted_apart() {
        let caps = vec![
            cap(
                "a",
                Capability::Tools,
                None,
                Some(200),
                None,
                Some(Judgement::Yes),
            ),
            cap(
                "b",
                Capability::Json,
                Some(FailureType::WrongAnswer),
                Some(200),
                Some("not JSON"),
                Some(Judgement::No),
            ),
            cap(
                "c",
                Capability::Vision,
                Some(FailureType::RateLimit),
                Some(429),
                Some("HTTP 429: slow down"),
                None,
            ),
        ];
        let lines: Vec<String> = caps.iter().map(cap_line).collect();
        assert_eq!(
            lines,
            [
                "groq::a tools ✔ (412 ms)",
                "groq::b json ✗ wrong_answer: not JSON",
                "groq::c vision ? rate_limit (429), verdict unchanged: HTTP 429: slow down",
            ]
        );
        let ok = Outcome {
            failure: None,
            latency_ms: 5,
            status: Some(200),
            error: None,
            unreachable: false,
            retry_at: None,
            model_gone: false,
            timing: Default::default(),
        };
        let r = RunSummary {
            started: String::new(),
            finished: String::new(),
            entries: vec![Entry::new("2026-12-01T10:00:00Z".into(), "groq", "a", &ok)],
            capabilities: caps,
            state_changes: Vec::new(),
            hard_failures: BTreeMap::new(),
            skipped: Vec::new(),
            not_probed: Vec::new(),
            offline: None,
            interrupted: None,
            budget: Vec::new(),
            traffic: Vec::new(),
            missing_keys_said_before: false,
        };
        let text = plain_summary(&r);
        assert!(
            text.starts_with("1/1 probes passed, 0 state changes\n"),
            "{text}"
        );
        assert!(
            text.contains("1/3 capability probes passed (they never change a model's state)\ncapability groq::a tools ✔ (412 ms)\n"),
            "{text}"
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["entries"].as_array().unwrap().len(), 1);
        assert_eq!(v["capabilities"][1]["probe"], "json");
        assert_eq!(v["capabilities"][1]["verdict"], "no");
        assert_eq!(v["capabilities"][2]["verdict"], serde_json::Value::Null);
    }
}
