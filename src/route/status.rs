//! What route knows about each provider, for `GET /v1/providers` and
//! `llmprobe route --status`: in the shape of FreeLLMAPI's endpoint
//! (`{"providers":[{"platform","name","status","keys","resume_at"?}],
//! "counts":{…}}`), with the models by state, the cooldowns in force and the
//! 24 h uptime added. Keys appear as index and fingerprint only.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::catalog::model_key;
use crate::cooldown::Bench;
use crate::state::ModelState;

use super::engine::Engine;

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
    /// Passed ÷ probed over the last 24 h, from the health log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uptime_24h: Option<f64>,
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
}

/// The view of every usable provider now.
pub fn view(engine: &Engine) -> StatusView {
    let now = engine.clock.now();
    let benches = engine.benches();
    let routable = engine.routable();
    let health = engine.health();
    let mut providers = Vec::new();
    for p in engine.providers() {
        let name = p.provider.name.clone();
        let mut models: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
        for m in &p.provider.models {
            let state = engine.state_of(&model_key(&name, m));
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
            .filter_map(|m| health.get(&model_key(&name, m)))
            .fold((0.0, 0.0), |(s, ok), h| (s + h.samples, ok + h.passed));
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
            uptime_24h: (samples > 0.0).then(|| passed / samples),
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
    StatusView { providers, counts }
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
            if cooldowns.is_empty() {
                "—".into()
            } else {
                cooldowns
            },
        ]);
    }
    format!(
        "{t}\n{} providers: {} active, {} cooling down, {} down; {} routable models, {} cooldowns in force\n",
        v.counts.providers,
        v.counts.active,
        v.counts.cooling_down,
        v.counts.down,
        v.counts.routable_models,
        v.counts.cooldowns
    )
}
