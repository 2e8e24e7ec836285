//! The plan of a `check` run: which providers run, which of their models
//! are probed, which are left out and why, and when each probe starts.
//! Nothing here sends a request or touches a file.

use std::time::Duration;

use serde::Serialize;

use crate::catalog::{Resolved, Unusable, model_key};
use crate::error::{Error, Result};
use crate::settings::Settings;
use crate::state::{ModelState, States};

/// One provider's share of a run.
#[derive(Debug)]
pub struct Lane {
    pub resolved: Resolved,
    pub models: Vec<String>,
    pub spacing: Duration,
    pub timeout: Duration,
}

/// A provider left out of the run, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub provider: String,
    pub reason: String,
    /// Skipped because its key variable is unset.
    #[serde(skip)]
    pub missing_key: bool,
}

/// A model left out because of its state.
#[derive(Debug, Clone, Serialize)]
pub struct NotProbed {
    pub model: String,
    pub state: ModelState,
}

/// What a run will do, and what it leaves out.
#[derive(Debug)]
pub struct Plan {
    pub lanes: Vec<Lane>,
    pub skipped: Vec<Skipped>,
    pub not_probed: Vec<NotProbed>,
}

/// Every model the run covers, probed or skipped as disabled, as
/// (provider, model).
pub fn scope(plan: &Plan) -> Vec<(String, String)> {
    let mut scope: Vec<(String, String)> = plan
        .lanes
        .iter()
        .flat_map(|l| {
            l.models
                .iter()
                .map(|m| (l.resolved.provider.name.clone(), m.clone()))
        })
        .collect();
    scope.extend(plan.not_probed.iter().filter_map(|n| {
        n.model
            .split_once("::")
            .map(|(p, m)| (p.to_string(), m.to_string()))
    }));
    scope
}

/// Why a run has nothing to do, and what to do about it. A cron job that
/// lost its keys must not look healthy, so this is an error (exit 2).
pub fn nothing_to_probe(plan: &Plan) -> Error {
    let mut why = Vec::new();
    let missing = plan.skipped.iter().filter(|s| s.missing_key).count();
    if missing > 0 {
        why.push(format!("{missing} skipped for a missing key"));
    }
    let other = plan.skipped.len() - missing;
    if other > 0 {
        why.push(format!("{other} off or misconfigured"));
    }
    if !plan.not_probed.is_empty() {
        why.push(format!("{} model(s) disabled", plan.not_probed.len()));
    }
    let detail = if why.is_empty() {
        String::new()
    } else {
        format!(" ({})", why.join(", "))
    };
    let mut msg = format!(
        "nothing to probe: no selected provider is ready{detail}. Set a provider's key variable (`llmprobe check --list` names them), turn on a local server, or try `llmprobe demo`"
    );
    if !plan.not_probed.is_empty() {
        msg.push_str("; re-enable a disabled model with `llmprobe state enable P::M`");
    }
    let details: Vec<String> = plan
        .skipped
        .iter()
        .map(|s| format!("\n  {}: {}", s.provider, s.reason))
        .collect();
    msg.push_str(&details.concat());
    Error::config(msg)
}

/// The plan for `providers` and `models` (`--provider`, `--model`; empty:
/// all), with `spacing` and `timeout` overriding the catalog's.
pub fn plan(
    s: &Settings,
    providers: &[String],
    models: &[String],
    states: &States,
    spacing: Option<Duration>,
    timeout: Option<Duration>,
) -> Result<Plan> {
    for p in providers {
        if s.catalog.provider(p).is_none() {
            let known: Vec<&str> = s
                .catalog
                .providers
                .iter()
                .map(|p| p.name.as_str())
                .collect();
            return Err(Error::config(format!(
                "unknown provider \"{p}\" in --provider; known providers: {}",
                known.join(", ")
            )));
        }
    }
    let wanted_model = |provider: &str, model: &str| {
        models.is_empty()
            || models
                .iter()
                .any(|m| m == model || *m == model_key(provider, model))
    };
    let mut matched_models = 0usize;
    let mut plan = Plan {
        lanes: Vec::new(),
        skipped: Vec::new(),
        not_probed: Vec::new(),
    };
    for p in &s.catalog.providers {
        if !providers.is_empty() && !providers.contains(&p.name) {
            continue;
        }
        let models: Vec<&String> = p
            .models
            .iter()
            .filter(|m| wanted_model(&p.name, m))
            .collect();
        matched_models += models.len();
        if models.is_empty() {
            continue;
        }
        let resolved = match p.resolve() {
            Ok(r) => r,
            Err(Unusable::Off { .. }) if providers.is_empty() => continue,
            Err(why) => {
                plan.skipped.push(Skipped {
                    provider: p.name.clone(),
                    reason: why.to_string(),
                    missing_key: matches!(why, Unusable::Missing(_)),
                });
                continue;
            }
        };
        let mut probe = Vec::new();
        for m in models {
            let key = model_key(&p.name, m);
            match states.state_of(&key) {
                ModelState::Disabled => plan.not_probed.push(NotProbed {
                    model: key,
                    state: ModelState::Disabled,
                }),
                _ => probe.push(m.clone()),
            }
        }
        if !probe.is_empty() {
            plan.lanes.push(Lane {
                spacing: spacing.unwrap_or(p.spacing),
                timeout: timeout.unwrap_or(p.timeout),
                resolved,
                models: probe,
            });
        }
    }
    if !models.is_empty() && matched_models == 0 {
        return Err(Error::config(format!(
            "--model {} matches no model in the catalog (see `llmprobe check --list`)",
            models.join(",")
        )));
    }
    Ok(plan)
}

/// When the `i`-th model of a lane starts, after the run's start. Checked:
/// a user's spacing times a model count must not overflow.
pub fn start_offset(lane: &Lane, i: usize) -> Result<Duration> {
    u32::try_from(i)
        .ok()
        .and_then(|i| lane.spacing.checked_mul(i))
        .ok_or_else(|| {
            Error::config(format!(
                "provider {}: spacing {} × {} models is too long a run",
                lane.resolved.provider.name,
                crate::duration::format_secs(lane.spacing),
                lane.models.len()
            ))
        })
}

/// One planned probe, for `--dry-run`.
#[derive(Debug, Serialize)]
pub struct Planned<'a> {
    pub provider: &'a str,
    pub order: usize,
    pub model: &'a str,
    #[serde(serialize_with = "as_secs")]
    pub starts_at_secs: Duration,
    #[serde(serialize_with = "as_secs")]
    pub timeout_secs: Duration,
}

fn as_secs<S: serde::Serializer>(d: &Duration, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// Every probe of the plan with its start offset, checked.
pub fn schedule(plan: &Plan) -> Result<Vec<Planned<'_>>> {
    let mut out = Vec::new();
    for lane in &plan.lanes {
        for (i, m) in lane.models.iter().enumerate() {
            out.push(Planned {
                provider: &lane.resolved.provider.name,
                order: i + 1,
                model: m,
                starts_at_secs: start_offset(lane, i)?,
                timeout_secs: lane.timeout,
            });
        }
    }
    Ok(out)
}
