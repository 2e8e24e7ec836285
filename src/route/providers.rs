//! What route knows about each provider, for `GET /v1/providers`,
//! `llmprobe route --status`, and the gauges of `/readyz` and `/metrics`:
//! in the shape of FreeLLMAPI's endpoint
//! (`{"providers":[{"platform","name","status","keys","resume_at"?}],
//! "counts":{…}}`), with the models by state, the cooldowns in force, the
//! usage against each limit and the 24 h uptime added, and the `[route]`
//! settings and `daily_cap`s in force with where each came from, what
//! upstreams said of each model within the day (learned context windows,
//! output caps and refused needs, with when each lapses), each model's
//! known context window and its source, and the state of
//! `stats/capabilities.json`. Keys appear as index and fingerprint only.
//!
//! A view is built from a [`RouteSnapshot`]: this process's own state, or, with
//! `--shared-state`, what every instance wrote to Redis, read in one round
//! trip off the request path. The view says which it is (`state`).

use std::collections::{BTreeMap, HashSet};

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::catalog::{Effective, model_key};
use crate::route::cooldown::{Bench, Cooldowns};
use crate::state::ModelState;

use super::engine::{Engine, targets};
use super::metrics::{LimitLabels, ProviderLabels};
use super::shared::Wanted;
use super::verdicts::{CONTEXT_WINDOW, Verdicts, WindowSource, known_window};
use crate::catalog::Resolved;
use crate::usage::limits::{self, LimitLedger, LimitUsage};

/// Where a view's cooldowns and usage come from.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantNames,
    strum::EnumIter,
)]
#[strum(serialize_all = "lowercase")]
pub enum Source {
    /// This process (and `route_state.json`): no shared state configured.
    Local,
    /// Redis, as every instance wrote it.
    Redis,
    /// This instance's own state, because Redis could not be read.
    #[strum(serialize = "local (redis unavailable)")]
    RedisUnavailable,
}

crate::names::serde_via_strum!(Source);

impl Source {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What a snapshot needs to hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// The cooldowns only (`/readyz`, `/metrics`).
    Cooldowns,
    /// The cooldowns, usage windows and learned limits (a whole view).
    Everything,
}

/// The cooldowns and budget a view is built from, at one instant.
#[derive(Debug)]
pub struct RouteSnapshot {
    pub now: DateTime<Utc>,
    pub source: Source,
    pub cooldowns: Cooldowns,
    /// Empty unless [`Want::Everything`].
    pub limits: LimitLedger,
    /// The part of `limits` this instance's (or, shared, every instance's)
    /// own probes took. Empty unless [`Want::Everything`].
    pub probe_limits: LimitLedger,
    /// `check`'s probes, from `stats/probe_usage.json`: added to both,
    /// unless the counts come from Redis (a shared `check` counts there);
    /// its probe spend is shown either way.
    pub check_probes: std::sync::Arc<crate::usage::ProbeUsage>,
}

impl RouteSnapshot {
    /// This process's own state, labelled `source`.
    pub fn local(engine: &Engine, want: Want, source: Source) -> RouteSnapshot {
        let (cooldowns, limits, probe_limits) = engine.ledger.with_local_state(|st| {
            let (limits, probes) = match want {
                Want::Everything => (st.limits.clone(), st.probe_budget.clone()),
                Want::Cooldowns => Default::default(),
            };
            (st.cooldowns.clone(), limits, probes)
        });
        RouteSnapshot {
            now: engine.clock.now(),
            source,
            cooldowns,
            limits,
            probe_limits,
            check_probes: engine.ledger.check_probes.current(),
        }
    }

    /// The shared state when instances share one and Redis answers (one
    /// round trip); otherwise this process's own, saying why.
    pub async fn read(engine: &Engine, want: Want) -> RouteSnapshot {
        let Some(shared) = engine.ledger.shared() else {
            return RouteSnapshot::local(engine, want, Source::Local);
        };
        let now = engine.clock.now();
        match shared.read(&wanted(engine, want, now), now).await {
            Ok((benches, mut limits)) => {
                let mut cooldowns = Cooldowns::new();
                for b in benches {
                    cooldowns.insert(b, now);
                }
                // Every probe, route's re-probes and a `check
                // --shared-state`'s, is counted in Redis with the rest and
                // in its probes' part: the file of a local `check` is not
                // added (a fleet's `check` shares its state too).
                let (limits, probe_limits) = super::shared::split_probes(&mut limits);
                RouteSnapshot {
                    now,
                    source: Source::Redis,
                    cooldowns,
                    limits,
                    probe_limits,
                    check_probes: engine.ledger.check_probes.current(),
                }
            }
            Err(_) => RouteSnapshot::local(engine, want, Source::RedisUnavailable),
        }
    }
}

/// The cooldowns in force at `now`, as the status page shows them.
pub fn page_cooldowns(
    cooldowns: &Cooldowns,
    now: DateTime<Utc>,
) -> Vec<crate::status_page::Cooldown> {
    cooldowns
        .active(now)
        .map(|b| crate::status_page::Cooldown {
            target: b.target.clone(),
            scope: serde_json::to_value(b.scope)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            until: b.until.timestamp(),
            reason: b.reason.clone(),
        })
        .collect()
}

/// The metrics text, with the gauges set from `snap` (the shared state
/// when there is one). Here rather than in the engine: the gauges are a
/// view of a snapshot, like [`view`].
pub fn metrics_text(engine: &Engine, snap: &RouteSnapshot) -> String {
    let now = snap.now;
    let metrics = &engine.telemetry.metrics;
    metrics
        .cooldowns_active
        .set(snap.cooldowns.active(now).count() as i64);
    metrics
        .routable_models
        .set(engine.routable_under(&snap.cooldowns, now).len() as i64);
    for p in engine.providers() {
        let provider = p.provider.name.clone();
        for u in usage(p, snap) {
            let labels = LimitLabels {
                provider: provider.clone(),
                scope: u.scope,
                kind: u.kind.as_str().to_string(),
            };
            metrics
                .limit_used_by_probes
                .get_or_create(&labels)
                .set(u.used_by_probes as i64);
            metrics.limit_used.get_or_create(&labels).set(u.used as i64);
        }
        let own = engine
            .ledger
            .with_local_state(|st| crate::usage::spent_today(&st.probe_spent, &provider, now));
        let today = snap.check_probes.spent_today(&provider, now) + own;
        metrics
            .probe_requests_today
            .get_or_create(&ProviderLabels { provider })
            .set(today as i64);
    }
    metrics.encode()
}

/// Every limit in force on `p`'s keys and models with its usage (route's
/// and `check`'s probes' together) in `snap`, each scope and kind once.
fn usage(p: &Resolved, snap: &RouteSnapshot) -> Vec<LimitUsage> {
    let mut usage: Vec<LimitUsage> = Vec::new();
    // Read from Redis, the counts hold a shared `check`'s probes already.
    let none = LimitLedger::default();
    let check = match snap.source {
        Source::Redis => &none,
        _ => &snap.check_probes.budget,
    };
    let probes = [&snap.probe_limits, check];
    for m in &p.provider.models {
        let eff = limits::effective(&p.provider, m);
        for t in targets(p, m) {
            for u in snap
                .limits
                .usage_with(&t, &eff, &[check], &probes, snap.now)
            {
                // A key's and the provider's limits recur per model.
                if !usage.iter().any(|x| x.scope == u.scope && x.kind == u.kind) {
                    usage.push(u);
                }
            }
        }
    }
    usage
}

/// The Redis keys behind every provider's view, named from the catalog:
/// the benches a request would look up and, for [`Want::Everything`], the
/// learned limits of each key and model and the windows of every scope a
/// limit counts in.
fn wanted(engine: &Engine, want: Want, now: DateTime<Utc>) -> Wanted {
    let mut w = Wanted::default();
    let (mut benches, mut windows) = (HashSet::new(), HashSet::new());
    for p in engine.providers() {
        let resets_at = limits::next_day_reset(now, p.provider.day_reset);
        for m in &p.provider.models {
            let eff = limits::effective(&p.provider, m);
            for t in targets(p, m) {
                for id in t.bench_ids() {
                    if benches.insert(id.clone()) {
                        w.benches.push(id);
                    }
                }
                if want == Want::Cooldowns {
                    continue;
                }
                let key_model = t.key_model_id();
                w.learned.push(key_model.clone());
                let scopes = limits::configured_checks(&t, &eff).into_iter().map(|c| c.0);
                for scope in std::iter::once(key_model).chain(scopes) {
                    if windows.insert(scope.clone()) {
                        // The probes' part beside each scope.
                        let probes = format!("{}{scope}", crate::usage::PROBES);
                        w.windows.push((scope, resets_at));
                        w.windows.push((probes, resets_at));
                    }
                }
            }
        }
    }
    w
}

#[derive(Debug, Serialize)]
pub struct KeyView {
    pub index: usize,
    pub fingerprint: String,
    pub benched: bool,
}

#[derive(Debug, Serialize)]
pub struct Keys {
    pub total: usize,
    pub benched: usize,
    pub list: Vec<KeyView>,
}

#[derive(Debug, Serialize)]
pub struct ProviderView {
    pub platform: String,
    pub name: String,
    /// `active` (something routable), `cooling_down` (active models, all
    /// benched), or `down` (no active model).
    pub status: &'static str,
    pub keys: Keys,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resume_at: Option<DateTime<Utc>>,
    /// Model ids by state: `active`, `paused`, `disabled`.
    pub models: BTreeMap<&'static str, Vec<String>>,
    pub cooldowns: Vec<Bench>,
    /// Every limit in force on the provider's keys and models, with its
    /// usage (by every instance, when they share their state).
    pub usage: Vec<LimitUsage>,
    /// Passed ÷ probed over the last 24 h, from the health log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uptime_24h: Option<f64>,
    /// Each model's known context window (the smallest of the catalog's
    /// and a learned one) and where it came from.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<WindowView>,
    /// What upstreams said of its models within the day.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub learned: Vec<LearnedView>,
    /// What this instance measured of its models' speed (its own traffic,
    /// or another instance's through shared state), and each one's cost
    /// in the candidate order (docs/routing.md, "Order").
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub speed: Vec<SpeedView>,
}

/// A model's measured speed.
#[derive(Debug, Serialize)]
pub struct SpeedView {
    pub model: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_ms: Option<f64>,
    pub error_rate: f64,
    /// Failures since its last success.
    pub failures: u32,
    /// Its cost now, ms (lower goes first).
    pub cost_ms: f64,
}

/// A model's context window, as routing counts it.
#[derive(Debug, Serialize)]
pub struct WindowView {
    pub model: String,
    pub tokens: u64,
    /// `catalog`, `listing` or `learned`.
    pub source: WindowSource,
    /// When a learned window lapses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<DateTime<Utc>>,
}

/// One thing an upstream said of a model, kept until `until`.
#[derive(Debug, Serialize)]
pub struct LearnedView {
    /// The model id (without the provider).
    pub model: String,
    /// `context_window`, `max_output_tokens`, or a need it refused
    /// (`tools`, `json`, `vision`, …).
    pub what: String,
    /// The window or cap it stated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Always `learned` (from an upstream's 400).
    pub source: WindowSource,
    pub until: DateTime<Utc>,
    /// The upstream's words, redacted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The capability verdicts routing reads (`stats/capabilities.json`).
#[derive(Debug, Serialize)]
pub struct CapabilitiesView {
    /// Where they are read: the file, or the shared record.
    pub file: String,
    /// Models with at least one verdict.
    pub models: usize,
    /// Why the file cannot be used as it is (routing goes on with the
    /// verdicts read before, or none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Counts {
    pub providers: usize,
    pub active: usize,
    pub cooling_down: usize,
    pub down: usize,
    pub routable_models: usize,
    pub cooldowns: usize,
}

#[derive(Debug, Serialize)]
pub struct StatusView {
    pub providers: Vec<ProviderView>,
    pub counts: Counts,
    /// Where the cooldowns and usage were read: `redis`, `local`, or
    /// `local (redis unavailable)`.
    pub state: Source,
    /// Every `[route]` setting and every `daily_cap` that is set, with its
    /// value and where it came from (`flag`, `env LLMPROBE_…`,
    /// `llmprobe.toml`, `default`).
    pub settings: Vec<Effective>,
    pub capabilities: CapabilitiesView,
    /// `ready` or `degraded` (docs/routing.md).
    pub mode: &'static str,
    /// What the mode is judged by: usable and active providers, the
    /// threshold, and any change under way.
    pub mode_counts: super::degraded::Mode,
    /// Where the model states, recent health and capability verdicts come
    /// from, when that is Redis (`--record shared`), and how fresh they are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<super::shared::record::RecordView>,
    /// `route --serve`'s alerts, when a channel is configured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alerts: Option<AlertsView>,
}

/// Where route's alerts go and how many have gone: channels by label
/// (scheme and host), never a URL's path.
#[derive(Debug, Clone, Serialize)]
pub struct AlertsView {
    pub channels: Vec<String>,
    /// Messages handed to the channels since the start.
    pub messages: u64,
    /// Changes waiting for their window to pass.
    pub pending: usize,
    /// Changes left out because another instance sharing Redis said them.
    pub said_elsewhere: u64,
}

/// The view of every usable provider, from `snap`.
pub fn view(engine: &Engine, snap: &RouteSnapshot) -> StatusView {
    let now = snap.now;
    let benches: Vec<Bench> = snap.cooldowns.active(now).cloned().collect();
    let routable = engine.routable_under(&snap.cooldowns, now);
    let health = engine.record.health();
    let verdicts: Verdicts = engine.ledger.with_local_state(|st| st.verdicts.clone());
    let mut providers = Vec::new();
    for (pi, p) in engine.providers().iter().enumerate() {
        let name = p.provider.name.clone();
        let mut models: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
        for m in &p.provider.models {
            let state = engine.record.state_of(&model_key(&name, m));
            models.entry(state.as_str()).or_default().push(m.clone());
        }
        let mine: Vec<Bench> = benches
            .iter()
            .filter(|b| {
                b.target == name
                    || b.target.starts_with(&format!("{name}#"))
                    || b.target.starts_with(&format!("{name}::"))
            })
            .cloned()
            .collect();
        let key_benched = |index: usize, fp: &str| {
            let id = format!("{name}#key{index}:{fp}");
            mine.iter().any(|b| b.target == id || b.target == name)
        };
        let list: Vec<KeyView> = p
            .keys
            .iter()
            .map(|k| KeyView {
                index: k.index,
                fingerprint: k.fingerprint.clone(),
                benched: key_benched(k.index, &k.fingerprint),
            })
            .collect();
        let any_routable = routable.iter().any(|r| r.starts_with(&format!("{name}::")));
        let any_active = models.contains_key(ModelState::Active.as_str());
        let status = match (any_routable, any_active) {
            (true, _) => "active",
            (false, true) => "cooling_down",
            (false, false) => "down",
        };
        let resume_at = (status == "cooling_down")
            .then(|| mine.iter().map(|b| b.until).filter(|t| *t > now).min())
            .flatten();
        let (samples, passed) = p
            .provider
            .models
            .iter()
            .filter_map(|m| health.get(model_key(&name, m).as_str()))
            .fold((0.0, 0.0), |(s, ok), h| {
                (s + h.probes.samples, ok + h.probes.passed)
            });
        let usage = usage(p, snap);
        providers.push(ProviderView {
            platform: name.clone(),
            name,
            status,
            keys: Keys {
                total: list.len(),
                benched: list.iter().filter(|k| k.benched).count(),
                list,
            },
            resume_at,
            models,
            cooldowns: mine,
            usage,
            uptime_24h: (samples > 0.0).then(|| passed / samples),
            windows: windows(&p.provider, &verdicts, now),
            speed: p
                .provider
                .models
                .iter()
                .enumerate()
                .filter_map(|(mi, m)| {
                    let slot = engine.speed.slot_of(pi, mi);
                    let f = engine.speed.measured(slot)?;
                    let round = |x: f64| (x * 10.0).round() / 10.0;
                    Some(SpeedView {
                        model: m.clone(),
                        ttft_ms: f.ttft_ms.map(round),
                        total_ms: f.total_ms.map(round),
                        error_rate: (f.err * 1000.0).round() / 1000.0,
                        failures: f.fails,
                        cost_ms: round(engine.speed.rank(slot)),
                    })
                })
                .collect(),
            learned: verdicts
                .entries()
                .filter(|(_, _, v)| v.until > now)
                .filter_map(|(m, what, v)| {
                    let model = crate::catalog::ModelKey::model_in(m, &p.provider.name)?;
                    Some((model, what, v))
                })
                .map(|(m, what, v)| LearnedView {
                    model: m.to_string(),
                    what: what.to_string(),
                    limit: v.limit,
                    source: WindowSource::Learned,
                    until: v.until,
                    message: v.message.clone(),
                })
                .collect(),
        });
    }
    let count = |s: &str| providers.iter().filter(|p| p.status == s).count();
    let counts = Counts {
        providers: providers.len(),
        active: count("active"),
        cooling_down: count("cooling_down"),
        down: count("down"),
        routable_models: routable.len(),
        cooldowns: benches.len(),
    };
    let mode = engine.mode();
    StatusView {
        mode: mode.name,
        mode_counts: mode,
        providers,
        counts,
        state: snap.source,
        settings: engine.settings.effective(),
        capabilities: CapabilitiesView {
            file: match engine.record.reads_shared() {
                true => "the shared record in Redis".to_string(),
                false => engine.record.capabilities_path().display().to_string(),
            },
            models: engine.record.probed().models(),
            error: engine.record.capabilities_problem(),
        },
        record: engine.record_view(),
        alerts: engine.telemetry.alerts().map(|a| {
            let (messages, pending, said_elsewhere) = a.counts();
            AlertsView {
                channels: a.labels(),
                messages,
                pending,
                said_elsewhere,
            }
        }),
    }
}

/// Each of `p`'s models with a known context window, by the one rule.
fn windows(
    p: &crate::catalog::Provider,
    verdicts: &Verdicts,
    now: DateTime<Utc>,
) -> Vec<WindowView> {
    p.models
        .iter()
        .filter_map(|m| {
            let key = model_key(&p.name, m);
            let (tokens, source) = known_window(
                p.info(m).context_window,
                None,
                verdicts.context_window(&key, now),
            )?;
            let until = (source == WindowSource::Learned)
                .then(|| {
                    verdicts
                        .entries()
                        .find(|(k, what, _)| *k == key && *what == CONTEXT_WINDOW)
                        .map(|(_, _, v)| v.until)
                })
                .flatten();
            Some(WindowView {
                model: m.clone(),
                tokens,
                source,
                until,
            })
        })
        .collect()
}

/// The view as a table, for `route --status`.
pub fn table(v: &StatusView) -> String {
    let mut t = crate::output::table(&[
        "Provider",
        "Status",
        "Active",
        "Paused",
        "Disabled",
        "Keys",
        "Uptime 24h",
        "Cooldowns",
        "LimitUsage",
    ]);
    for p in &v.providers {
        let n = |s: &str| p.models.get(s).map_or(0, Vec::len).to_string();
        let cooldowns = p
            .cooldowns
            .iter()
            .map(|b| {
                format!(
                    "{} {} until {}",
                    b.target,
                    b.reason,
                    crate::time::format_ts(b.until)
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        // Only what is in use: every limit of a large catalog would drown
        // the table (`--json` lists them all).
        let usage = p
            .usage
            .iter()
            .filter(|u| u.used > 0)
            .map(|u| {
                format!(
                    "{} {} {}/{}{}",
                    u.scope,
                    u.kind,
                    u.used,
                    u.limit,
                    if u.learned { " (learned)" } else { "" }
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        let or_dash = |s: String| if s.is_empty() { "—".into() } else { s };
        t.add_row(vec![
            p.name.clone(),
            p.status.to_string(),
            n("active"),
            n("paused"),
            n("disabled"),
            if p.keys.total == 0 {
                "keyless".into()
            } else {
                format!("{} ({} benched)", p.keys.total, p.keys.benched)
            },
            p.uptime_24h
                .map(crate::format::fmt_pct)
                .unwrap_or_else(|| "no probes".into()),
            or_dash(cooldowns),
            or_dash(usage),
        ]);
    }
    let mut settings = crate::output::table(&["Setting", "Value", "Source"]);
    for e in &v.settings {
        let value = match &e.value {
            serde_json::Value::Null => "—".to_string(),
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        settings.add_row(vec![e.setting.clone(), value, e.origin.to_string()]);
    }
    let mut learned = crate::output::table(&["Model", "Learned", "Until"]);
    let mut any = false;
    for p in &v.providers {
        for l in &p.learned {
            any = true;
            let what = match (l.what.as_str(), l.limit) {
                (CONTEXT_WINDOW, Some(n)) => {
                    let counts = p
                        .windows
                        .iter()
                        .any(|w| w.model == l.model && w.source == WindowSource::Learned);
                    format!(
                        "context window {n} tokens{}",
                        if counts {
                            ""
                        } else {
                            " (a smaller one counts)"
                        }
                    )
                }
                (super::verdicts::OUTPUT_CAP, Some(n)) => format!("output cap {n} tokens"),
                (need, _) => format!("refused {need}"),
            };
            learned.add_row(vec![
                model_key(&p.name, &l.model),
                what,
                crate::time::format_ts(l.until),
            ]);
        }
    }
    let learned = if any {
        format!("\nLearned from upstreams (kept 24 h):\n{learned}\n")
    } else {
        String::new()
    };
    let record = match &v.record {
        Some(r) => format!(
            "record: shared ({}{}){}\n",
            serde_json::to_value(r.status)
                .ok()
                .and_then(|s| s.as_str().map(str::to_string))
                .unwrap_or_default(),
            r.as_of
                .as_deref()
                .map(|t| format!(", as of {t}"))
                .unwrap_or_default(),
            r.note
                .as_deref()
                .map(|n| format!(": {n}"))
                .unwrap_or_default(),
        ),
        None => String::new(),
    };
    let caps = match &v.capabilities.error {
        Some(e) => format!(
            "capabilities: {e}; routing goes on with the verdicts read before ({} models)",
            v.capabilities.models
        ),
        None => format!(
            "capabilities: {} ({})",
            v.capabilities.file,
            crate::format::count(
                v.capabilities.models,
                "model with verdicts",
                "models with verdicts"
            )
        ),
    };
    let m = &v.mode_counts;
    let mode = format!(
        "mode: {} ({} of {} usable providers have an active model; degraded below {}{})",
        v.mode,
        m.counts.active_providers,
        m.counts.providers,
        m.degraded_below,
        match (m.changing_to, m.changing_since) {
            (Some(to), Some(t)) => format!(
                "; {to} once this has held {} s since {}",
                if to == "degraded" {
                    super::degraded::ENTER.as_secs()
                } else {
                    super::degraded::LEAVE.as_secs()
                },
                crate::time::format_ts(t)
            ),
            _ => String::new(),
        }
    );
    format!(
        "{t}\n{} providers: {} active, {} cooling down, {} down; {} routable models, {} cooldowns in force; state: {}\n{mode}\n{record}{caps}\n{learned}\n{settings}\n",
        v.counts.providers,
        v.counts.active,
        v.counts.cooling_down,
        v.counts.down,
        v.counts.routable_models,
        v.counts.cooldowns,
        v.state.as_str()
    )
}
