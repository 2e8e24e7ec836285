//! Which models a request may go to, in which order.
//!
//! - `auto` (or no model): every active model;
//! - a plain id (`openai/gpt-oss-120b`, at groq and together): every active provider serving it;
//! - `provider::model`: that one model (fallback only across its keys);
//! - an alias from `[aliases]`: its models, in the order written.
//!
//! Only `active` models are candidates. Their order depends on `[route]
//! order` (docs/routing.md, "Order"), and is asserted in tests:
//!
//! - `balanced` (the default): config `priority` (lower first), then the
//!   measured cost ([`crate::route::speed`]: route's own traffic, the
//!   probes' figures where there is none; lower first), then catalog
//!   order. An alias keeps the order written.
//! - `fastest`: the cost, then `priority`, then catalog order; an alias
//!   too is ordered by cost, the order written breaking ties.
//! - `priority`: `priority`, then 24 h uptime from the log (higher first;
//!   no probes last), then median latency (lower first; none last), then
//!   catalog order. An alias keeps the order written.
//!
//! The cost is read, never computed, here: one atomic load per candidate.
//! `route --serve` keeps the static part of this order per requested model
//! ([`Costs::Equal`], in `route/engine/lists.rs`) and finishes it per request
//! with [`ByCost`]; [`candidates`] gives the whole order at once, for the
//! views and as the reference the kept lists are tested against.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::catalog::{ModelKey, Order, Resolved, model_key};
use crate::state::ModelState;

use super::health::HealthMap;
use super::speed::Speed;

/// One model a request may be sent to.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub provider: Arc<Resolved>,
    pub model: String,
    /// The `max_tokens` to send instead of the request's, when the router
    /// lowered it to the model's output cap (`None`: the request's own).
    pub max_tokens: Option<u32>,
    /// Its place in [`Speed`], where its measured figures are.
    pub slot: usize,
    /// Its provider's place among the usable providers (for key rotation).
    pub provider_index: usize,
    /// `provider::model`, made once with the candidate.
    pub id: ModelKey,
}

impl Candidate {
    /// `provider::model`.
    pub fn key(&self) -> String {
        self.id.as_str().to_string()
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

/// What orders candidates: `[route] order`, the probes' recent health
/// (for `priority`) and the measured costs (for the others).
#[derive(Clone, Copy)]
pub struct Ranking<'a> {
    pub order: Order,
    pub health: &'a HealthMap,
    pub speed: &'a Speed,
}

/// The candidates for `choice`, in order. `providers` are the usable
/// (resolved) providers in catalog order; `state_of` gives a model's state.
pub fn candidates(
    choice: &Choice,
    providers: &[Arc<Resolved>],
    aliases: &BTreeMap<String, Vec<String>>,
    state_of: impl Fn(&str) -> ModelState,
    ranking: Ranking<'_>,
) -> Result<Vec<Candidate>, NoCandidate> {
    let wanted = (ModelState::Active, Costs::Read);
    candidates_in(wanted, choice, providers, aliases, state_of, ranking)
}

/// Whether [`candidates_in`] reads the measured costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Costs {
    /// Read: the whole order.
    Read,
    /// Taken as equal: the static part of the order, which
    /// `route/engine/lists.rs` keeps and a request finishes by
    /// [`ByCost::of`] with the costs it reads (the result is what
    /// [`candidates`] gives for the same costs).
    Equal,
}

/// [`candidates`] among the models in `wanted`'s state rather than the
/// active ones (the paused, for degraded mode's last resort,
/// [`crate::route::degraded`]), in the same order; or, with
/// [`Costs::Equal`], the static part of that order (for `balanced` and
/// `fastest`: priority, then catalog or alias order; for `priority`: the
/// whole order, by recent health).
pub fn candidates_in(
    (wanted, costs): (ModelState, Costs),
    choice: &Choice,
    providers: &[Arc<Resolved>],
    aliases: &BTreeMap<String, Vec<String>>,
    state_of: impl Fn(&str) -> ModelState,
    ranking: Ranking<'_>,
) -> Result<Vec<Candidate>, NoCandidate> {
    let measured = costs == Costs::Read;
    let speed = ranking.speed;
    let make = |(pi, mi): (usize, usize), p: &Arc<Resolved>, m: &str| Candidate {
        provider: p.clone(),
        model: m.to_string(),
        max_tokens: None,
        slot: speed.slot_of(pi, mi),
        provider_index: pi,
        id: ModelKey::new(&p.provider.name, m),
    };
    let all = providers.iter().enumerate().flat_map(|(pi, p)| {
        p.provider
            .models
            .iter()
            .enumerate()
            .map(move |(mi, m)| ((pi, mi), p, m))
    });
    // Each candidate with its place in the catalog (or the alias), for the
    // final tie-break, and its cost read once: an outcome landing mid-sort
    // cannot make the comparison inconsistent.
    type Placed = (((usize, usize), f64), Candidate);
    let cand = |i: (usize, usize), at: (usize, usize), p: &Arc<Resolved>, m: &str| {
        let c = make(at, p, m);
        let cost = if measured { speed.rank(c.slot) } else { 0.0 };
        ((i, cost), c)
    };
    let (label, mut found): (String, Vec<Placed>) = match choice {
        Choice::Auto => (
            "auto".into(),
            all.map(|(i, p, m)| cand(i, i, p, m)).collect(),
        ),
        Choice::Id(id) => (
            id.clone(),
            all.filter(|(_, _, m)| *m == id)
                .map(|(i, p, m)| cand(i, i, p, m))
                .collect(),
        ),
        Choice::Pinned { provider, model } => (
            model_key(provider, model),
            all.filter(|(_, p, m)| p.provider.name == *provider && *m == model)
                .map(|(i, p, m)| cand(i, i, p, m))
                .collect(),
        ),
        Choice::Alias(name) => {
            let targets = aliases.get(name).cloned().unwrap_or_default();
            let found = targets
                .iter()
                .enumerate()
                .filter_map(|(order, t)| {
                    let (p, m) = crate::catalog::ModelKey::split(t)?;
                    let pi = providers.iter().position(|x| x.provider.name == p)?;
                    let prov = &providers[pi];
                    let mi = prov.provider.models.iter().position(|x| x == m)?;
                    Some(cand((order, 0), (pi, mi), prov, m))
                })
                .collect();
            (name.clone(), found)
        }
    };
    if found.is_empty() {
        return Err(NoCandidate::Unknown(label));
    }
    found.retain(|(_, c)| state_of(c.id.as_str()) == wanted);
    if found.is_empty() {
        return Err(NoCandidate::NoneActive(label));
    }
    let alias = matches!(choice, Choice::Alias(_));
    match ranking.order {
        Order::Priority if !alias => {
            let health = ranking.health;
            found.sort_by(|((ia, _), a), ((ib, _), b)| order(a, b, health).then(ia.cmp(ib)));
        }
        Order::Balanced if !alias => {
            found.sort_by(|((ia, ca), a), ((ib, cb), b)| {
                (a.provider.provider.priority)
                    .cmp(&b.provider.provider.priority)
                    .then(ca.total_cmp(cb))
                    .then(ia.cmp(ib))
            });
        }
        Order::Fastest => {
            found.sort_by(|((ia, ca), a), ((ib, cb), b)| {
                ca.total_cmp(cb)
                    .then(
                        a.provider
                            .provider
                            .priority
                            .cmp(&b.provider.provider.priority),
                    )
                    .then(ia.cmp(ib))
            });
        }
        _ => {}
    }
    Ok(found.into_iter().map(|(_, c)| c).collect())
}

/// How a request finishes the order of a list kept by `route/engine/lists.rs`: the
/// measured costs it reads then, and where they go in the sort key. A
/// candidate's place in the kept list stands for everything else in the
/// key (priority, catalog or alias order), so the whole key is one of:
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByCost {
    /// The kept order is the order (`priority`, and aliases but under
    /// `fastest`): no cost is read to sort.
    Not,
    /// Priority, then the cost, then the place (`balanced`).
    WithinPriority,
    /// The cost, then the place (`fastest`).
    First,
}

impl ByCost {
    /// What `order` does with the costs for `choice`.
    pub fn of(order: Order, choice: &Choice) -> ByCost {
        let alias = matches!(choice, Choice::Alias(_));
        match order {
            Order::Fastest => ByCost::First,
            Order::Balanced if !alias => ByCost::WithinPriority,
            _ => ByCost::Not,
        }
    }
}

/// Priority, then uptime (higher first), then median latency (lower
/// first); a model without data sorts after those with it.
fn order(a: &Candidate, b: &Candidate, health: &HealthMap) -> Ordering {
    let h = |c: &Candidate| health.get(c.id.as_str()).cloned().unwrap_or_default();
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

/// The usable providers and the aliases of catalog `toml`, no key needed
/// (for tests).
#[cfg(test)]
pub fn resolved(toml: &str) -> (Vec<Arc<Resolved>>, BTreeMap<String, Vec<String>>) {
    let c = crate::catalog::Catalog::from_toml_str(toml, "t.toml").unwrap();
    let ps = c
        .providers
        .iter()
        .map(|p| Arc::new(p.resolve_with(|_| None).unwrap()))
        .collect();
    (ps, c.aliases)
}

/// A [`Speed`] for `providers`, with its own metrics (for tests).
#[cfg(test)]
pub fn speed_of(providers: &[Arc<Resolved>]) -> Speed {
    let m = crate::route::metrics::Metrics::new();
    Speed::new(providers, m.ttft.clone(), m.total.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::health::ModelHealth;

    fn providers() -> (Vec<Arc<Resolved>>, BTreeMap<String, Vec<String>>) {
        resolved(
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
        )
    }

    fn speed(ps: &[Arc<Resolved>]) -> Speed {
        speed_of(ps)
    }

    fn by<'a>(order: Order, health: &'a HealthMap, speed: &'a Speed) -> Ranking<'a> {
        Ranking {
            order,
            health,
            speed,
        }
    }

    fn keys(r: Result<Vec<Candidate>, NoCandidate>) -> Vec<String> {
        r.unwrap().iter().map(Candidate::key).collect()
    }

    #[test]
    fn the_order_is_priority_then_uptime_then_latency_then_catalog() {
        let (ps, aliases) = providers();
        let sp = speed(&ps);
        let active = |_: &str| ModelState::Active;
        let mut h = HealthMap::new();
        // Without data: priority first (c has 5, the rest 100), then catalog order.
        let got = keys(candidates(
            &Choice::Auto,
            &ps,
            &aliases,
            active,
            by(Order::Priority, &h, &sp),
        ));
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
        let got = keys(candidates(
            &Choice::Auto,
            &ps,
            &aliases,
            active,
            by(Order::Priority, &h, &sp),
        ));
        assert_eq!(
            got,
            ["c::shared", "b::shared", "b::m2", "a::shared", "a::m1"]
        );
    }

    #[test]
    fn balanced_is_priority_then_cost_and_fastest_is_cost_first() {
        let (ps, aliases) = providers();
        let sp = speed(&ps);
        let h = HealthMap::new();
        let active = |_: &str| ModelState::Active;
        let order = |o: Order, choice: &Choice| {
            keys(candidates(choice, &ps, &aliases, active, by(o, &h, &sp)))
        };
        // Nothing measured: every cost is 0, so priority, then catalog.
        for o in [Order::Balanced, Order::Priority] {
            assert_eq!(
                order(o, &Choice::Auto),
                ["c::shared", "a::m1", "a::shared", "b::m2", "b::shared"]
            );
        }
        // a::m1 (slot 0) 500 ms, a::shared 100, b::shared 50, c::shared
        // 3 s; b::m2 unmeasured, so tried first: optimistic.
        let t = 1_800_000_000_000;
        for (slot, secs) in [(0, 0.5), (1, 0.1), (3, 0.05), (4, 3.0)] {
            sp.served(slot, secs, true, t);
        }
        assert_eq!(
            order(Order::Balanced, &Choice::Auto),
            ["c::shared", "b::m2", "b::shared", "a::shared", "a::m1"]
        );
        assert_eq!(
            order(Order::Fastest, &Choice::Auto),
            ["b::m2", "b::shared", "a::shared", "a::m1", "c::shared"]
        );
        // `priority` ignores the measurements.
        assert_eq!(
            order(Order::Priority, &Choice::Auto),
            ["c::shared", "a::m1", "a::shared", "b::m2", "b::shared"]
        );
        // A timeout drops b::shared behind at once.
        sp.failed(3, Some(5.0), t + 1);
        assert_eq!(
            order(Order::Balanced, &Choice::Id("shared".into())),
            ["c::shared", "a::shared", "b::shared"]
        );
        // An alias keeps its written order, but under `fastest`.
        sp.served(2, 0.9, true, t);
        let alias = Choice::Alias("fast".into());
        assert_eq!(order(Order::Balanced, &alias), ["b::m2", "a::m1"]);
        assert_eq!(order(Order::Priority, &alias), ["b::m2", "a::m1"]);
        assert_eq!(order(Order::Fastest, &alias), ["a::m1", "b::m2"]);
    }

    #[test]
    fn ids_pins_and_aliases() {
        let (ps, aliases) = providers();
        let sp = speed(&ps);
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
            keys(candidates(
                &id,
                &ps,
                &aliases,
                paused_b,
                by(Order::Priority, &h, &sp)
            )),
            ["c::shared", "a::shared"]
        );
        let pin = Choice::parse(Some("a::m1"), &aliases);
        assert_eq!(
            keys(candidates(
                &pin,
                &ps,
                &aliases,
                paused_b,
                by(Order::Priority, &h, &sp)
            )),
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
                by(Order::Priority, &h, &sp)
            )),
            ["b::m2", "a::m1"]
        );
        assert_eq!(
            keys(candidates(
                &alias,
                &ps,
                &aliases,
                paused_b,
                by(Order::Priority, &h, &sp)
            )),
            ["a::m1"]
        );
        assert_eq!(Choice::parse(None, &aliases), Choice::Auto);
        assert_eq!(Choice::parse(Some("auto"), &aliases), Choice::Auto);
    }

    #[test]
    fn unknown_and_inactive_are_told_apart() {
        let (ps, aliases) = providers();
        let sp = speed(&ps);
        let h = HealthMap::new();
        let nope = Choice::parse(Some("gpt-9"), &aliases);
        assert_eq!(
            candidates(
                &nope,
                &ps,
                &aliases,
                |_| ModelState::Active,
                by(Order::Priority, &h, &sp)
            )
            .unwrap_err(),
            NoCandidate::Unknown("gpt-9".into())
        );
        let pin = Choice::parse(Some("b::m2"), &aliases);
        assert_eq!(
            candidates(
                &pin,
                &ps,
                &aliases,
                |_| ModelState::Disabled,
                by(Order::Priority, &h, &sp)
            )
            .unwrap_err(),
            NoCandidate::NoneActive("b::m2".into())
        );
    }
}
