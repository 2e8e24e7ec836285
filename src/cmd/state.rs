//! `llmprobe state`: every model's state with its last probe, and the hand
//! overrides `enable`, `disable`, `pause` and `reset`.
//!
//! The listing covers every catalog model (whether or not its key is set: it
//! is a catalog listing) plus any model the state file knows that the
//! catalog does not. The last probe of each comes from the log's tail, read
//! backwards until every listed model has been found or the start is
//! reached. Once capabilities have been probed (`stats/capabilities.json`
//! says anything about a listed model), a CAPABILITIES column shows each
//! model's verdicts and context window ([`crate::report::capview`]); a
//! verdicts file that cannot be parsed is named in a warning on stderr,
//! left alone, and the listing goes on with every capability unknown.
//!
//! A change takes the data lock, loads the state file fresh (people edit it
//! by hand), changes one entry and writes the file atomically. A name that
//! is neither in the catalog, the state file nor the health log is refused with the
//! closest names, before anything is locked or written.

use std::collections::HashSet;

use chrono::Utc;
use serde::Serialize;

use strsim::levenshtein;

use crate::catalog::Unusable;
use crate::cli::{StateAction, StateArgs, StateChange, StateFilter};
use crate::error::{Error, Result};
use crate::exit;
use crate::format::{fmt_minute, fmt_rfc3339};
use crate::fsutil::DataLock;
use crate::healthlog::last::last_probes;
use crate::healthlog::summary::Spans;
use crate::output;
use crate::report::ProviderFilter;
use crate::report::capview::{self, ModelCaps};
use crate::report::nextprobe::NextReprobe;
use crate::settings::Settings;
use crate::state::{ModelState, States};

pub fn run(s: &Settings, args: StateArgs) -> Result<u8> {
    // The listing filters mean nothing to a change. (They are not declared
    // as conflicting in clap, because that would also reject the global
    // flags after `state`.)
    if args.action.is_some() && (args.state.is_some() || !args.provider.is_empty() || args.json) {
        return Err(Error::config(
            "--state, --provider and --json apply to the listing (`llmprobe state`), not to a change",
        ));
    }
    match args.action {
        None => list(s, args.state, &args.provider, args.json),
        Some(StateAction::Enable(c)) => change(s, &c, ModelState::Active),
        Some(StateAction::Disable(c)) => change(s, &c, ModelState::Disabled),
        Some(StateAction::Pause(c)) => change(s, &c, ModelState::Paused),
        Some(StateAction::Reset { model, all }) => match (model.as_deref(), all) {
            (Some(key), false) => reset(s, Some(key)),
            (None, true) => reset(s, None),
            // Both is refused by clap; neither is refused here, with a message
            // that says what to pass.
            _ => Err(Error::config(
                "state reset: pass provider::model to reset one model, or --all to reset every model",
            )),
        },
    }
}

/// One row of the listing.
#[derive(Debug, Serialize)]
struct Row {
    model: String,
    provider: String,
    state: ModelState,
    reason: Option<String>,
    since: Option<String>,
    consecutive_failures: u32,
    recovered_at: Option<String>,
    in_catalog: bool,
    last_probe: Option<LastProbe>,
    /// Uptime over the last 1 h, 24 h and 7 d: `{"1h": 1.0, "24h": 0.98,
    /// "7d": null}`.
    uptime_by_span: std::collections::BTreeMap<&'static str, Option<f64>>,
    #[serde(skip)]
    spans: Spans,
    /// The median time to first token of its streamed probes that passed
    /// in the last 24 h.
    median_ttft_ms: Option<f64>,
    /// Its latest speed probe's output tokens per second.
    tokens_per_s: Option<f64>,
    /// A paused model's `next_reprobe` and `retry_at`.
    #[serde(flatten)]
    reprobe: Option<NextReprobe>,
    /// How often its probe budget lets it be probed, when less often than
    /// every run: "probed every 12h: 20 requests/day, probes use 2".
    #[serde(skip_serializing_if = "Option::is_none")]
    cadence: Option<String>,
    /// What the state means now: `active` (routed), `never_probed`,
    /// `no_key` (its provider's key variable is unset), `off` (its provider
    /// is disabled in the config), `paused` or `disabled`.
    status: &'static str,
    #[serde(skip)]
    status_text: String,
    #[serde(skip)]
    provider_unusable: Option<Unusable>,
    /// `capabilities` (each with its verdict, when it was seen, why a
    /// `no`, and whether the catalog lists it) and `context_window`.
    #[serde(flatten)]
    caps: ModelCaps,
    /// What its provider's model list says (docs/discovery.md): `new` (a
    /// discovered model not yet passed a probe, never routed), `dropped`
    /// (its first probe failed hard), `discovered` (passed, routed),
    /// `unlisted` (the list lacks it, its probe still answers), `retired`
    /// (the list lacks it and the provider said it does not exist).
    #[serde(skip_serializing_if = "Option::is_none")]
    listing: Option<&'static str>,
    /// The day the list first lacked it, for `unlisted` and `retired`.
    #[serde(skip_serializing_if = "Option::is_none")]
    missing_since: Option<String>,
}

impl Row {
    /// `status` and `status_text`, once the last probe is known.
    fn describe(&mut self) {
        let since = self.missing_since.clone().unwrap_or_default();
        let listed = match self.listing {
            Some("new") if self.last_probe.is_none() => {
                Some(("new", "new (not yet probed)".to_string()))
            }
            Some("new") => Some(("new", "new (not yet passed)".to_string())),
            Some("dropped") => Some(("dropped", "dropped (first probe failed)".to_string())),
            Some("retired") => Some(("retired", format!("retired (unlisted since {since})"))),
            _ => None,
        };
        if let Some((status, text)) = listed {
            self.status = status;
            self.status_text = text;
            return;
        }
        let (status, text) = match (&self.provider_unusable, self.state) {
            (Some(Unusable::Off { host_env }), ModelState::Active) => (
                "off",
                match host_env {
                    None => "off (disabled in config)".to_string(),
                    Some(var) => format!("off (local server; set {var})"),
                },
            ),
            (Some(Unusable::Missing(vars)), ModelState::Active) => (
                "no_key",
                format!("skipped: no key (set {})", vars.join(" and ")),
            ),
            (Some(Unusable::BadHost { var, .. }), ModelState::Active) => {
                ("off", format!("off (bad {var})"))
            }
            (Some(Unusable::Keyless { .. }), ModelState::Active) => (
                "off",
                "off (needs no key: enabled = true turns it on)".to_string(),
            ),
            (None, ModelState::Active) if self.last_probe.is_none() => {
                ("never_probed", "active (never probed)".to_string())
            }
            (None, ModelState::Active) => ("active", "active".to_string()),
            (why, st) => (
                st.as_str(),
                match why {
                    Some(
                        Unusable::Off { .. } | Unusable::BadHost { .. } | Unusable::Keyless { .. },
                    ) => {
                        format!("{st} (provider off)")
                    }
                    Some(Unusable::Missing(_)) => format!("{st} (no key)"),
                    None => st.to_string(),
                },
            ),
        };
        self.status = status;
        self.status_text = match self.listing {
            Some("unlisted") => format!("{text} (unlisted since {since})"),
            _ => text,
        };
    }
}

#[derive(Debug, Clone, Serialize)]
struct LastProbe {
    ts: String,
    result: String,
    latency_ms: f64,
}

fn split_key(key: &str) -> (&str, &str) {
    crate::catalog::ModelKey::split(key).unwrap_or((key, ""))
}

fn list(s: &Settings, filter: Option<StateFilter>, providers: &[String], json: bool) -> Result<u8> {
    let states = States::load(&s.state_path())?;
    // A provider the state file still names (the catalog dropped it) is
    // known too; any other unknown name is a typo worth saying.
    let providers = ProviderFilter::new(&s.catalog, providers, |p| {
        states.keys().any(|k| split_key(k).0 == p)
    })?;
    let now = crate::clock::Clock::from_env().now();
    // Discovered models that passed are the catalog's, as route sees them.
    let (s, _) = crate::discovery::with_adopted(s, crate::discovery::For::Route, now)?;
    let s = &s;
    // Two small files beside the state, neither needed to list states: one
    // that cannot be parsed is reported on stderr and read as empty.
    let (findings, findings_error) = capview::read_findings(&s.capabilities_path());
    let (learned, route_error) = match crate::route::persist::load::<
        crate::route::cooldown::Cooldowns,
    >(&crate::route::persist::path(s.stats_dir()))
    {
        Ok(st) => (st.verdicts, None),
        Err(e) => (Default::default(), Some(e.to_string())),
    };
    // The lists' record: a cache that cannot be read costs its marks.
    let lists = crate::discovery::ModelLists::load(s.stats_dir()).unwrap_or_else(|e| {
        eprintln!("warning: {e}; discovery's marks are not shown");
        Default::default()
    });
    let catalog: Vec<String> = s.catalog.model_keys().collect();
    let in_catalog: HashSet<&str> = catalog.iter().map(String::as_str).collect();
    let mut keys: Vec<(String, bool)> = catalog.iter().map(|k| (k.clone(), true)).collect();
    // Discovered models not (yet) in the catalog's candidates.
    for (k, d) in &lists.discovered {
        if d.status != crate::discovery::Probation::Passed && !in_catalog.contains(k.as_str()) {
            keys.push((k.clone(), true));
        }
    }
    let in_catalog: HashSet<String> = keys.iter().map(|(k, _)| k.clone()).collect();
    for k in states.keys() {
        if !in_catalog.contains(k.as_str()) {
            keys.push((k.clone(), false));
        }
    }
    let want_state = filter.map(|f| match f {
        StateFilter::Active => ModelState::Active,
        StateFilter::Paused => ModelState::Paused,
        StateFilter::Disabled => ModelState::Disabled,
    });
    let mut rows: Vec<Row> = keys
        .into_iter()
        .filter(|(k, _)| providers.admits_key(k))
        .map(|(k, in_catalog)| {
            let e = states.get(&k);
            let provider_unusable = s
                .catalog
                .provider(split_key(&k).0)
                .filter(|_| in_catalog)
                .and_then(|p| p.resolve().err());
            let info = capview::catalog_info(&s.catalog, &k);
            let cadence = s
                .catalog
                .provider(split_key(&k).0)
                .filter(|_| in_catalog)
                .and_then(|p| {
                    let probed = p
                        .models
                        .iter()
                        .filter(|m| {
                            states.state_of(&crate::catalog::model_key(&p.name, m))
                                != ModelState::Disabled
                        })
                        .count();
                    crate::usage::budget::by_catalog(p, split_key(&k).1, probed).cadence_words()
                });
            let missing = lists.missing.get(&k);
            let listing = match (lists.discovered.get(&k).map(|d| d.status), &e) {
                (_, Some(e)) if e.retired() => Some("retired"),
                (Some(crate::discovery::Probation::New), _) => Some("new"),
                (Some(crate::discovery::Probation::Dropped), _) => Some("dropped"),
                (Some(crate::discovery::Probation::Passed), _) => Some("discovered"),
                (None, _) if missing.is_some_and(|m| m.answering) => Some("unlisted"),
                _ => None,
            };
            let missing_since = e
                .as_ref()
                .and_then(|e| e.missing_since().map(str::to_string))
                .or_else(|| missing.map(|m| m.since.to_string()));
            Row {
                listing,
                missing_since,
                cadence,
                caps: ModelCaps::of(&k, info, &findings, &learned, now),
                status: "",
                status_text: String::new(),
                provider_unusable,
                provider: split_key(&k).0.to_string(),
                state: e.as_ref().map_or(ModelState::Active, |e| e.state),
                reason: e.as_ref().and_then(|e| e.reason.clone()),
                since: e.as_ref().and_then(|e| e.since.clone()),
                consecutive_failures: e.as_ref().map_or(0, |e| e.consecutive_failures),
                recovered_at: e.as_ref().and_then(|e| e.recovered_at.clone()),
                in_catalog,
                last_probe: None,
                uptime_by_span: Default::default(),
                spans: Spans::default(),
                median_ttft_ms: None,
                tokens_per_s: findings.tokens_per_s(&k),
                reprobe: None,
                model: k,
            }
        })
        .filter(|r| want_state.is_none_or(|w| r.state == w))
        .collect();
    let wanted: Vec<&str> = rows.iter().map(|r| r.model.as_str()).collect();
    let last = last_probes(&s.log_path(), &wanted, None)?;
    // Uptime over the last hour, day and week, and the day's first token:
    // a week of the log, read backwards as `brief` reads it.
    let now_ts = now.timestamp();
    let (week, _) = crate::report::brief::collect(
        &s.log_path(),
        now_ts - 86_400,
        now_ts - crate::report::brief::SPANS_BACK,
        now_ts,
    )?;
    for r in &mut rows {
        if let Some((spans, ttft)) = week.model_figures(&r.model) {
            r.spans = spans;
            r.median_ttft_ms = ttft;
        }
        r.uptime_by_span = r.spans.by_span();
        r.last_probe = last.get(&r.model).map(|l| LastProbe {
            ts: fmt_rfc3339(l.ts),
            result: l.result.clone(),
            latency_ms: l.latency_ms,
        });
        r.describe();
    }
    crate::report::nextprobe::add_to(s, &states, &mut rows, |r| {
        (r.state == ModelState::Paused).then_some((r.model.as_str(), &mut r.reprobe))
    })?;
    if let Some(e) = &findings_error {
        eprintln!("warning: {e}; every capability is shown as unknown");
    }
    if let Some(e) = &route_error {
        eprintln!("note: {e}; learned context windows are not shown");
    }
    if json {
        output::print_json(&rows)?;
        return Ok(exit::SUCCESS);
    }
    if rows.is_empty() {
        output::println("no models match")?;
        return Ok(exit::SUCCESS);
    }
    let mut out = table(&rows, now).to_string();
    out.push_str(&reprobe_lines(&rows, now));
    out.push_str(&cadence_lines(&rows));
    if rows.iter().all(|r| r.last_probe.is_none()) {
        let log = s.log_path();
        out.push_str(&format!(
            "\nno probes recorded in {} ({}); run `llmprobe check`, or pass --stats-dir if the data is elsewhere",
            crate::fsutil::absolute(&log).display(),
            if log.exists() {
                "none for these models"
            } else {
                "the file does not exist"
            }
        ));
    }
    output::println(&out)?;
    Ok(exit::SUCCESS)
}

/// Under the table: the models the probe budget probes less often than
/// every run, with their cadence.
fn cadence_lines(rows: &[Row]) -> String {
    let mut out = String::new();
    for r in rows.iter().filter(|r| r.state != ModelState::Disabled) {
        if let Some(c) = &r.cadence {
            out.push_str(&format!("\n  {}: {c}", r.model));
        }
    }
    if !out.is_empty() {
        out.insert_str(0, "\nprobe budget (probe_share):");
    }
    out
}

/// Under the table: when each paused model is next re-probed.
fn reprobe_lines(rows: &[Row], now: chrono::DateTime<Utc>) -> String {
    let mut out = String::new();
    for r in rows {
        if let Some(n) = &r.reprobe {
            out.push_str(&format!("\n  {}: {}", r.model, n.words(now)));
        }
    }
    if !out.is_empty() {
        out.insert_str(0, "\npaused:");
    }
    out
}

/// The listing's table. The CAPABILITIES column is there only once some
/// listed model has a verdict: before any capability probe, the table is
/// what it always was.
fn table(rows: &[Row], now: chrono::DateTime<Utc>) -> output::Fitted {
    let caps = rows.iter().any(|r| r.caps.probed());
    let mut header = vec![
        "MODEL",
        "STATE",
        "REASON",
        "SINCE",
        "FAILURES",
        "LAST PROBE",
        "1H · 24H · 7D",
        "SPEED",
    ];
    if caps {
        header.push("CAPABILITIES");
    }
    let mut t = output::table(&header);
    // On a narrow terminal: the speed, the spans, the failure count, then
    // since when, go first; with capabilities, then the last probe. The
    // reason, which says why a model is not active, always stays.
    t.optional(if caps {
        &[7, 6, 4, 3, 5]
    } else {
        &[7, 6, 4, 3]
    });
    for r in rows {
        let mut name = r.model.clone();
        if !r.in_catalog {
            name.push_str(" (not in catalog)");
        }
        let mut cells = vec![
            name,
            r.status_text.clone(),
            r.reason.clone().unwrap_or_default(),
            r.since.clone().unwrap_or_default(),
            r.consecutive_failures.to_string(),
            r.last_probe
                .as_ref()
                .map(|l| {
                    let when = crate::time::parse_ts(&l.ts)
                        .map(fmt_minute)
                        .unwrap_or_else(|| l.ts.clone());
                    if l.latency_ms > 0.0 {
                        format!("{} {:.0}ms, {when}", l.result, l.latency_ms)
                    } else {
                        format!("{}, {when}", l.result)
                    }
                })
                .unwrap_or_else(|| "—".into()),
            r.spans.cell(),
            crate::report::brief::speed_cell(r.median_ttft_ms, r.tokens_per_s),
        ];
        if caps {
            cells.push(r.caps.cell(now));
        }
        t.add_row(cells);
    }
    t
}

/// Check that `key` names a model we know, before anything is locked.
fn known(s: &Settings, states: &States, key: &str) -> Result<()> {
    let mut candidates: Vec<String> = s.catalog.model_keys().collect();
    candidates.extend(states.keys().cloned());
    if candidates.iter().any(|c| c == key) {
        return Ok(());
    }
    // A model the log has probed (one `brief` shows, say) is known too,
    // though the catalog has since dropped it. Read only on this path.
    let logged = logged_models(&s.log_path())?;
    if logged.contains(key) {
        return Ok(());
    }
    candidates.extend(logged);
    let close = closest(key, &candidates);
    let hint = if close.is_empty() {
        "run `llmprobe state` to list every model".to_string()
    } else {
        format!("did you mean {}?", close.join(", "))
    };
    Err(Error::config(format!(
        "unknown model '{key}': not in the catalog, the state file nor the health log (models are named provider::model); {hint}"
    )))
}

/// Up to three names closest to `input` by edit distance, comparing with the
/// model part alone too when `input` has no provider.
fn closest(input: &str, candidates: &[String]) -> Vec<String> {
    let input_l = input.to_lowercase();
    let mut scored: Vec<(usize, &String)> = candidates
        .iter()
        .map(|c| {
            let c_l = c.to_lowercase();
            let mut d = levenshtein(&input_l, &c_l);
            if !crate::catalog::ModelKey::is_key(input) {
                d = d.min(levenshtein(&input_l, split_key(&c_l).1));
            }
            (d, c)
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    let limit = (input.chars().count() / 3).max(2);
    scored
        .into_iter()
        .filter(|(d, _)| *d <= limit)
        .take(3)
        .map(|(_, c)| c.clone())
        .collect()
}

fn change(s: &Settings, c: &StateChange, to: ModelState) -> Result<u8> {
    let path = s.state_path();
    known(s, &States::load(&path)?, &c.model)?;
    let lock = DataLock::acquire(s.stats_dir())?;
    // Fresh, under the lock: the file may have changed since.
    let mut states = States::load(&path)?;
    let now = crate::time::format_ts(Utc::now());
    let retired = states.entry(&c.model).and_then(|e| {
        e.retired()
            .then(|| e.missing_since().unwrap_or("?").to_string())
    });
    if let Some(since) = retired.filter(|_| to != ModelState::Disabled) {
        eprintln!(
            "warning: {} was retired: its provider's model list has not carried it since {since}. \
             If the next fresh list still lacks it and it is answered \"not found\" again, check \
             retires it again",
            c.model
        );
    }
    let Some((from, e)) = states.change_by_hand(&c.model, to, c.reason.as_deref(), &now) else {
        output::println(&format!(
            "{}: active → active (already active; nothing to change)",
            c.model
        ))?;
        return Ok(exit::SUCCESS);
    };
    states.save(&path, &lock)?;
    tracing::info!(model = %c.model, %from, %to, path = %path.display(), "state changed by hand");
    output::println(&format!(
        "{}: {from} → {to} (reason: {}; failures: {})",
        c.model,
        e.reason.as_deref().unwrap_or(""),
        e.consecutive_failures
    ))?;
    Ok(exit::SUCCESS)
}

/// Reset one model (`Some`), or all of them (`None`, `--all`).
fn reset(s: &Settings, model: Option<&str>) -> Result<u8> {
    let path = s.state_path();
    if let Some(key) = model {
        known(s, &States::load(&path)?, key)?;
    } else if let Err(Error::Data(bad)) = States::load(&path) {
        return move_aside(s, &bad);
    }
    if States::load(&path)?.keys().next().is_none() {
        output::println(match model {
            Some(_) => "nothing to reset: the model is active and has no state entry",
            None => "nothing to reset: every model is active",
        })?;
        return Ok(exit::SUCCESS);
    }
    let lock = DataLock::acquire(s.stats_dir())?;
    let mut states = match States::load(&path) {
        // It went bad since: someone is editing it by hand.
        Err(Error::Data(bad)) if model.is_none() => {
            drop(lock);
            return move_aside(s, &bad);
        }
        r => r?,
    };
    let mut lines = Vec::new();
    match model {
        Some(key) => {
            let from = states.state_of(key);
            if !states.remove(key) {
                output::println(&format!(
                    "{key}: active → active (no state entry; nothing to reset)"
                ))?;
                return Ok(exit::SUCCESS);
            }
            lines.push(format!("{key}: {from} → active (reset)"));
        }
        None => {
            for (k, e) in states.iter() {
                lines.push(format!("{k}: {} → active (reset)", e.state));
            }
            states.clear();
        }
    }
    states.save(&path, &lock)?;
    output::println(&lines.join("\n"))?;
    Ok(exit::SUCCESS)
}

/// `state reset --all` on a state file that cannot be parsed: move it aside
/// to `model_state.json.corrupt-<UTC time>` (never delete it), say where it
/// went, and start fresh: with no file, every model is active.
fn move_aside(s: &Settings, bad: &crate::error::DataError) -> Result<u8> {
    let path = s.state_path();
    let lock = DataLock::acquire(s.stats_dir())?;
    // Under the lock: if it was repaired meanwhile, this is a normal reset.
    if !matches!(States::load(&path), Err(Error::Data(_))) {
        drop(lock);
        return reset(s, None);
    }
    let stamp = Utc::now().format("%Y%m%dT%H%M%SZ");
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let mut aside = path.with_file_name(format!("{name}.corrupt-{stamp}"));
    let mut n = 1;
    while aside.exists() {
        n += 1;
        aside = path.with_file_name(format!("{name}.corrupt-{stamp}-{n}"));
    }
    std::fs::rename(&path, &aside).map_err(|e| {
        Error::io(
            format!(
                "cannot move {} aside to {}",
                path.display(),
                aside.display()
            ),
            e,
        )
    })?;
    output::println(&format!(
        "moved the unreadable {}{} aside to {} (kept, not deleted); every model is active again",
        crate::fsutil::absolute(&path).display(),
        bad.offset
            .map(|o| format!(" (bad at byte offset {o})"))
            .unwrap_or_default(),
        crate::fsutil::absolute(&aside).display()
    ))?;
    Ok(exit::SUCCESS)
}

/// Every `provider::model` the health log names (none when there is no
/// log; a log that cannot be read is the usual data error).
fn logged_models(log: &std::path::Path) -> Result<std::collections::BTreeSet<String>> {
    use crate::healthlog::read::{Record, Sink, read_all};
    use std::collections::BTreeSet;
    struct Keys(BTreeSet<String>);
    impl Sink for Keys {
        fn record(&mut self, r: &Record<'_>) {
            self.0
                .insert(crate::catalog::ModelKey::new(r.provider, r.model).into());
        }
        fn merge(&mut self, later: Self) {
            self.0.extend(later.0);
        }
    }
    if !log.exists() {
        return Ok(BTreeSet::new());
    }
    Ok(read_all(log, || Keys(BTreeSet::new()))?.0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    // The distance is strsim's; these pin what "did you mean" relies on.
    use strsim::levenshtein as edit_distance;

    #[test]
    fn edit_distances() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("groq::llama", "groq::llama"), 0);
        assert_eq!(edit_distance("grok", "groq"), 1);
    }

    fn row(model: &str, caps: ModelCaps) -> Row {
        let mut r = Row {
            listing: None,
            missing_since: None,
            model: model.into(),
            provider: split_key(model).0.into(),
            state: ModelState::Paused,
            reason: Some("timeout".into()),
            since: Some("2026-12-02T09:00:00Z".into()),
            consecutive_failures: 2,
            recovered_at: None,
            in_catalog: true,
            last_probe: Some(LastProbe {
                ts: "2026-12-02T11:00:00Z".into(),
                result: "timeout (504)".into(),
                latency_ms: 0.0,
            }),
            uptime_by_span: Default::default(),
            spans: Spans::default(),
            median_ttft_ms: None,
            tokens_per_s: None,
            reprobe: None,
            cadence: None,
            status: "",
            status_text: String::new(),
            provider_unusable: None,
            caps,
        };
        r.describe();
        r
    }

    fn now() -> chrono::DateTime<Utc> {
        "2026-12-02T12:00:00Z".parse().unwrap()
    }

    fn caps(key: &str, findings: &str, window: Option<u64>) -> ModelCaps {
        let f: crate::capabilities::Findings = serde_json::from_str(findings).unwrap();
        let info = crate::catalog::ModelInfo {
            context_window: window,
            capabilities: Some(crate::capabilities::CapSet::all()),
            ..Default::default()
        };
        ModelCaps::of(key, info, &f, &Default::default(), now())
    }

    #[test]
    fn the_capability_column_fits_80_columns_with_long_model_ids() {
        let long = "openrouter::meta-llama/llama-3.3-70b-instruct:free";
        let findings = format!(
            r#"{{"{long}": {{"tools": {{"verdict": "yes", "seen": "2026-12-02T09:00:00Z"}},
                "json": {{"verdict": "no", "seen": "2026-12-01T12:00:00Z", "reason": "wrong_answer: not JSON"}}}}}}"#
        );
        let rows = vec![
            row(long, caps(long, &findings, Some(131_072))),
            row(
                "openrouter::deepseek/deepseek-chat-v3.1:free",
                caps("openrouter::deepseek/deepseek-chat-v3.1:free", "{}", None),
            ),
        ];
        assert_eq!(
            rows[0].caps.cell(now()),
            "tools ✔ json ✗ vision ? (24h) 128k"
        );
        assert_eq!(rows[1].caps.cell(now()), "tools ? json ? vision ?");
        let wide = table(&rows, now()).with_width(None).to_string();
        assert!(
            wide.contains("| tools ✔ json ✗ vision ? (24h) 128k |"),
            "{wide}"
        );
        let narrow = table(&rows, now()).with_width(Some(80)).to_string();
        for line in narrow.lines() {
            assert!(line.chars().count() <= 80, "{line:?} in\n{narrow}");
        }
        // The optional columns went first; the capabilities stayed; the
        // line under the table names what went.
        let (shown, note) = narrow.split_at(narrow.find("hidden to fit").expect("a note"));
        assert!(shown.contains("CAPABILITIES"), "{narrow}");
        assert!(
            !shown.contains("FAILURES") && !shown.contains("SINCE"),
            "{narrow}"
        );
        assert!(note.contains("FAILURES, SINCE"), "{narrow}");
        let text: String = narrow.split_whitespace().collect::<Vec<_>>().join(" ");
        for part in ["tools ✔", "json ✗", "(24h)", "128k"] {
            assert!(text.contains(part), "{part} in\n{narrow}");
        }
    }

    #[test]
    fn no_capability_column_before_any_capability_probe() {
        let rows = vec![row(
            "groq::llama-3.1-8b-instant",
            caps("groq::llama-3.1-8b-instant", "{}", Some(131_072)),
        )];
        let t = table(&rows, now()).with_width(None).to_string();
        assert!(!t.contains("CAPABILITIES") && !t.contains("128k"), "{t}");
        let header = t.lines().next().unwrap();
        assert!(
            header.starts_with("| MODEL ")
                && header
                    .trim_end_matches([' ', '|'])
                    .ends_with("| 1H · 24H · 7D | SPEED")
                && header.contains("| LAST PROBE "),
            "{t}"
        );
    }

    #[test]
    fn closest_names() {
        let c: Vec<String> = [
            "groq::llama-3.1-8b-instant",
            "groq::llama-3.3-70b-versatile",
            "mistral::mistral-small-latest",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            closest("grok::llama-3.1-8b-instant", &c)[0],
            "groq::llama-3.1-8b-instant"
        );
        assert_eq!(
            closest("llama-3.1-8b-instant", &c)[0],
            "groq::llama-3.1-8b-instant"
        );
        assert!(closest("zzzzzzzzzzzzzzzzzzzzzzz", &c).is_empty());
    }
}
