//! Which models a request may go to, in which order.
//!
//! - `auto` (or no model): every active model;
//! - a plain id (`openai/gpt-oss-120b`, at groq and together): every active provider serving it;
//! - `provider::model`: that one model (fallback only across its keys);
//! - an alias from `[aliases]`: its models, in the order written.
//!
//! Only `active` models are candidates. Outside an alias the order is, and
//! is asserted in tests to be: config `priority` (lower first), then 24 h
//! uptime from the log (higher first; no probes last), then median latency
//! (lower first; none last), then catalog order.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::catalog::{Resolved, model_key};
use crate::state::ModelState;

use super::health::HealthMap;

/// One model a request may be sent to.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub provider: Arc<Resolved>,
    pub model: String,
    /// The `max_tokens` to send instead of the request's, when the router
    /// lowered it to the model's output cap (`None`: the request's own).
    pub max_tokens: Option<u32>,
}

impl Candidate {
    /// `provider::model`.
    pub fn key(&self) -> String {
        model_key(&self.provider.provider.name, &self.model)
    }
}

/// What the client asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    Auto,
    Id(String),
    Pinned { provider: String, model: String },
    Alias(String),
}

impl Choice {
    pub fn parse(model: Option<&str>, aliases: &BTreeMap<String, Vec<String>>) -> Choice {
        match model.map(str::trim) {
            None | Some("") | Some("auto") => Choice::Auto,
            Some(m) if aliases.contains_key(m) => Choice::Alias(m.to_string()),
            Some(m) => match crate::catalog::ModelKey::split(m) {
                Some((p, model)) => Choice::Pinned {
                    provider: p.to_string(),
                    model: model.to_string(),
                },
                None => Choice::Id(m.to_string()),
            },
        }
    }
}

/// Why nothing can be tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoCandidate {
    /// No usable provider serves this model at all (404).
    Unknown(String),
    /// It exists, but no model for it is active (503).
    NoneActive(String),
}

/// The candidates for `choice`, in order. `providers` are the usable
/// (resolved) providers in catalog order; `state_of` gives a model's state.
pub fn candidates(
    choice: &Choice,
    providers: &[Arc<Resolved>],
    aliases: &BTreeMap<String, Vec<String>>,
    state_of: impl Fn(&str) -> ModelState,
    health: &HealthMap,
) -> Result<Vec<Candidate>, NoCandidate> {
    candidates_in(
        ModelState::Active,
        choice,
        providers,
        aliases,
        state_of,
        health,
    )
}

/// [`candidates`] among the models in `wanted` state rather than the
/// active ones: the paused, for degraded mode's last resort
/// ([`crate::route::degraded`]), in the same order.
pub fn candidates_in(
    wanted: ModelState,
    choice: &Choice,
    providers: &[Arc<Resolved>],
    aliases: &BTreeMap<String, Vec<String>>,
    state_of: impl Fn(&str) -> ModelState,
    health: &HealthMap,
) -> Result<Vec<Candidate>, NoCandidate> {
    let all = providers.iter().enumerate().flat_map(|(pi, p)| {
        p.provider
            .models
            .iter()
            .enumerate()
            .map(move |(mi, m)| ((pi, mi), p, m))
    });
    // Each candidate with its place in the catalog (or the alias), for the
    // final tie-break.
    type Placed = ((usize, usize), Candidate);
    let (label, mut found): (String, Vec<Placed>) = match choice {
        Choice::Auto => (
            "auto".into(),
            all.map(|(i, p, m)| (i, cand(p, m))).collect(),
        ),
        Choice::Id(id) => (
            id.clone(),
            all.filter(|(_, _, m)| *m == id)
                .map(|(i, p, m)| (i, cand(p, m)))
                .collect(),
        ),
        Choice::Pinned { provider, model } => (
            model_key(provider, model),
            all.filter(|(_, p, m)| p.provider.name == *provider && *m == model)
                .map(|(i, p, m)| (i, cand(p, m)))
                .collect(),
        ),
        Choice::Alias(name) => {
            let targets = aliases.get(name).cloned().unwrap_or_default();
            let found = targets
                .iter()
                .enumerate()
                .filter_map(|(order, t)| {
                    let (p, m) = crate::catalog::ModelKey::split(t)?;
                    let prov = providers.iter().find(|x| x.provider.name == p)?;
                    prov.provider
                        .models
                        .iter()
                        .any(|x| x == m)
                        .then(|| ((order, 0), cand(prov, m)))
                })
                .collect();
            (name.clone(), found)
        }
    };
    if found.is_empty() {
        return Err(NoCandidate::Unknown(label));
    }
    found.retain(|(_, c)| state_of(&c.key()) == wanted);
    if found.is_empty() {
        return Err(NoCandidate::NoneActive(label));
    }
    if !matches!(choice, Choice::Alias(_)) {
        found.sort_by(|(ia, a), (ib, b)| order(a, b, health).then(ia.cmp(ib)));
    }
    Ok(found.into_iter().map(|(_, c)| c).collect())
}

fn cand(p: &Arc<Resolved>, m: &str) -> Candidate {
    Candidate {
        provider: p.clone(),
        model: m.to_string(),
        max_tokens: None,
    }
}

/// Priority, then uptime (higher first), then median latency (lower
/// first); a model without data sorts after those with it.
fn order(a: &Candidate, b: &Candidate, health: &HealthMap) -> Ordering {
    let h = |c: &Candidate| health.get(c.key().as_str()).cloned().unwrap_or_default();
    let (ha, hb) = (h(a), h(b));
    a.provider
        .provider
        .priority
        .cmp(&b.provider.provider.priority)
        .then_with(|| none_last(ha.uptime(), hb.uptime(), true))
        .then_with(|| none_last(ha.median_latency_ms(), hb.median_latency_ms(), false))
}

fn none_last(a: Option<f64>, b: Option<f64>, higher_first: bool) -> Ordering {
    match (a, b) {
        (Some(x), Some(y)) if higher_first => y.total_cmp(&x),
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use crate::route::health::ModelHealth;

    fn providers() -> (Vec<Arc<Resolved>>, BTreeMap<String, Vec<String>>) {
        let c = Catalog::from_toml_str(
            r#"
            include_default_catalog = false
            [aliases]
            fast = ["b::m2", "a::m1"]
            [[providers]]
            name = "a"
            dialect = "openai"
            base_url = "http://127.0.0.1:1/v1"
            models = ["m1", "shared"]
            [[providers]]
            name = "b"
            dialect = "openai"
            base_url = "http://127.0.0.1:2/v1"
            models = ["m2", "shared"]
            [[providers]]
            name = "c"
            dialect = "openai"
            base_url = "http://127.0.0.1:3/v1"
            models = ["shared"]
            priority = 5
            "#,
            "t.toml",
        )
        .unwrap();
        let ps = c
            .providers
            .iter()
            .map(|p| Arc::new(p.resolve_with(|_| None).unwrap()))
            .collect();
        (ps, c.aliases)
    }

    fn keys(r: Result<Vec<Candidate>, NoCandidate>) -> Vec<String> {
        r.unwrap().iter().map(Candidate::key).collect()
    }

    #[test]
    fn the_order_is_priority_then_uptime_then_latency_then_catalog() {
        let (ps, aliases) = providers();
        let active = |_: &str| ModelState::Active;
        let mut h = HealthMap::new();
        // Without data: priority first (c has 5, the rest 100), then catalog order.
        let got = keys(candidates(&Choice::Auto, &ps, &aliases, active, &h));
        assert_eq!(
            got,
            ["c::shared", "a::m1", "a::shared", "b::m2", "b::shared"]
        );
        // Uptime beats latency; latency breaks uptime ties; no data sorts last.
        h.insert(
            "b::m2".parse().unwrap(),
            ModelHealth::new(4.0, 4.0, vec![900.0]),
        );
        h.insert(
            "b::shared".parse().unwrap(),
            ModelHealth::new(4.0, 4.0, vec![100.0, 300.0]),
        );
        h.insert(
            "a::shared".parse().unwrap(),
            ModelHealth::new(4.0, 3.0, vec![10.0]),
        );
        let got = keys(candidates(&Choice::Auto, &ps, &aliases, active, &h));
        assert_eq!(
            got,
            ["c::shared", "b::shared", "b::m2", "a::shared", "a::m1"]
        );
    }

    #[test]
    fn ids_pins_and_aliases() {
        let (ps, aliases) = providers();
        let h = HealthMap::new();
        let paused_b = |k: &str| {
            if crate::catalog::ModelKey::provider_of(k) == "b" {
                ModelState::Paused
            } else {
                ModelState::Active
            }
        };
        let id = Choice::parse(Some("shared"), &aliases);
        assert_eq!(id, Choice::Id("shared".into()));
        assert_eq!(
            keys(candidates(&id, &ps, &aliases, paused_b, &h)),
            ["c::shared", "a::shared"]
        );
        let pin = Choice::parse(Some("a::m1"), &aliases);
        assert_eq!(
            keys(candidates(&pin, &ps, &aliases, paused_b, &h)),
            ["a::m1"]
        );
        // An alias keeps its own order, and drops what is not active.
        let alias = Choice::parse(Some("fast"), &aliases);
        assert_eq!(
            keys(candidates(
                &alias,
                &ps,
                &aliases,
                |_| ModelState::Active,
                &h
            )),
            ["b::m2", "a::m1"]
        );
        assert_eq!(
            keys(candidates(&alias, &ps, &aliases, paused_b, &h)),
            ["a::m1"]
        );
        assert_eq!(Choice::parse(None, &aliases), Choice::Auto);
        assert_eq!(Choice::parse(Some("auto"), &aliases), Choice::Auto);
    }

    #[test]
    fn unknown_and_inactive_are_told_apart() {
        let (ps, aliases) = providers();
        let h = HealthMap::new();
        let nope = Choice::parse(Some("gpt-9"), &aliases);
        assert_eq!(
            candidates(&nope, &ps, &aliases, |_| ModelState::Active, &h).unwrap_err(),
            NoCandidate::Unknown("gpt-9".into())
        );
        let pin = Choice::parse(Some("b::m2"), &aliases);
        assert_eq!(
            candidates(&pin, &ps, &aliases, |_| ModelState::Disabled, &h).unwrap_err(),
            NoCandidate::NoneActive("b::m2".into())
        );
    }
}
