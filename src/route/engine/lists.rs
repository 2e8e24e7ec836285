//! The candidates of each requested model, worked out when what they
//! depend on changes rather than per request, and one request's walk
//! through them (docs/performance.md, "The catalog's size and one request
//! at a time").
//!
//! A [`List`] holds, for one requested model as the client wrote it
//! (`auto`, an id, `provider::model`, an alias), its active candidates in
//! the static part of the order ([`Costs::Equal`]): priority, then
//! catalog or alias order (for `order = "priority"`, the whole order, by
//! recent health). It depends on the catalog (fixed for the engine's
//! life), the model states (a new snapshot each time `model_state.json`
//! changes) and, for `priority` only, the recent health (a new map each
//! time the log does). Each of those is published as a new `Arc`: the
//! kept lists remember the ones they were built from, and the first
//! request that sees another empties them (the `Arc`'s identity is the
//! generation; nothing else has to bump a counter).
//!
//! What changes per request is read per request, on the candidates a
//! request reaches: the measured costs (one atomic load per candidate, as
//! before), benches and limits (at admission, by the candidate's target),
//! and the request's needs. A plain request whose prompt fits every
//! window the catalog and the upstreams gave does no per-candidate work
//! beyond reading the costs: its first candidate is found by one scan,
//! and the rest are sorted only if it falls over.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rustc_hash::FxHashMap;

use crate::catalog::{Order, Resolved};
use crate::route::choose::{self, ByCost, Candidate, Choice, Costs, NoCandidate, Ranking};
use crate::route::health::HealthMap;
use crate::route::speed::Speed;
use crate::state::{ModelState, Snapshot};

use super::lock;

/// At most this many requested models' lists are kept (only names the
/// catalog or the aliases answer to are); past it the cache starts over.
const KEPT: usize = 1024;

/// The candidates of one requested model, in the static order.
#[derive(Debug)]
pub struct List {
    candidates: Box<[Candidate]>,
    by_cost: ByCost,
    /// With [`ByCost::WithinPriority`], the candidates of the first
    /// (lowest) priority: the first candidate is among them.
    first_group: usize,
    /// The smallest context window the catalog gives any candidate; `None`
    /// when it gives none. A prompt within it (and within every learned
    /// window) is too long for none of them.
    min_window: Option<u64>,
    /// Each candidate's place, by `provider::model`.
    places: FxHashMap<String, u32>,
}

impl List {
    fn new(candidates: Vec<Candidate>, by_cost: ByCost) -> List {
        let first_group = match candidates.first() {
            Some(c) if by_cost == ByCost::WithinPriority => {
                let p = c.provider.provider.priority;
                candidates
                    .iter()
                    .take_while(|x| x.provider.provider.priority == p)
                    .count()
            }
            _ => candidates.len(),
        };
        let min_window = candidates
            .iter()
            .filter_map(|c| c.provider.provider.info(&c.model).context_window)
            .min();
        let places = candidates
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id.as_str().to_string(), i as u32))
            .collect();
        List {
            candidates: candidates.into(),
            by_cost,
            first_group,
            min_window,
            places,
        }
    }

    pub fn len(&self) -> usize {
        self.candidates.len()
    }

    /// True when the catalog's windows hold a prompt of `tokens`.
    pub fn fits(&self, tokens: u64) -> bool {
        self.min_window.is_none_or(|w| tokens <= w)
    }
}

/// What the kept lists were built from, and the lists.
#[derive(Default)]
struct Kept {
    states: Option<Arc<Snapshot>>,
    health: Option<Arc<HealthMap>>,
    lists: FxHashMap<String, Result<Arc<List>, NoCandidate>>,
}

/// The kept lists, by requested model.
#[derive(Default)]
pub struct Lists {
    kept: Mutex<Kept>,
}

/// What a list is built from.
pub struct Inputs<'a> {
    pub providers: &'a [Arc<Resolved>],
    pub aliases: &'a BTreeMap<String, Vec<String>>,
    pub order: Order,
    pub states: Arc<Snapshot>,
    pub health: &'a Arc<HealthMap>,
    pub speed: &'a Speed,
}

impl Lists {
    /// The list for `model` (`None`: `auto`), built now if the kept one
    /// is missing or was built from other inputs.
    pub fn get(&self, model: Option<&str>, inputs: Inputs<'_>) -> Result<Arc<List>, NoCandidate> {
        let asked = model.map_or("", str::trim);
        let mut kept = lock(&self.kept);
        let same = kept
            .states
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, &inputs.states))
            && (inputs.order != Order::Priority
                || kept
                    .health
                    .as_ref()
                    .is_some_and(|h| Arc::ptr_eq(h, inputs.health)));
        if !same || kept.lists.len() >= KEPT {
            kept.lists.clear();
            kept.states = Some(inputs.states.clone());
            kept.health = Some(inputs.health.clone());
        }
        if let Some(found) = kept.lists.get(asked) {
            return found.clone();
        }
        let built = build(model, &inputs);
        // A name nothing in the catalog answers to is not kept: the names
        // kept are the catalog's and the aliases', not whatever clients send.
        if !matches!(built, Err(NoCandidate::Unknown(_))) {
            kept.lists.insert(asked.to_string(), built.clone());
        }
        built
    }
}

fn build(model: Option<&str>, i: &Inputs<'_>) -> Result<Arc<List>, NoCandidate> {
    let choice = Choice::parse(model, i.aliases);
    let ranking = Ranking {
        order: i.order,
        health: i.health,
        speed: i.speed,
    };
    let found = choose::candidates_in(
        (ModelState::Active, Costs::Equal),
        &choice,
        i.providers,
        i.aliases,
        |k| i.states.state_of(k),
        ranking,
    )?;
    Ok(Arc::new(List::new(found, ByCost::of(i.order, &choice))))
}

/// One request's candidates in order, worked out as far as the request
/// goes: the first by one scan of the costs, the rest sorted only when
/// the request reaches its second candidate. The costs are read once, when
/// the walk starts, so the order is the one [`choose::candidates`] gives
/// for those costs.
#[derive(Debug)]
pub struct Walk {
    list: Arc<List>,
    /// The measured cost of each candidate when the walk started; empty
    /// when nothing reads them (`order = "priority"`).
    costs: Vec<f64>,
    /// The first candidate, if any.
    head: Option<u32>,
    /// The others in order, once worked out.
    rest: Option<Vec<u32>>,
}

impl Walk {
    /// Walk `list`, with the costs read now from `speed` when `costs`.
    pub fn new(list: Arc<List>, speed: &Speed, costs: bool) -> Walk {
        let costs: Vec<f64> = if costs || list.by_cost != ByCost::Not {
            list.candidates.iter().map(|c| speed.rank(c.slot)).collect()
        } else {
            Vec::new()
        };
        let head = match list.by_cost {
            _ if list.candidates.is_empty() => None,
            ByCost::Not => Some(0),
            by => {
                let end = if by == ByCost::WithinPriority {
                    list.first_group
                } else {
                    list.len()
                };
                // The lowest cost, the earlier place on a tie.
                let mut best = 0;
                for i in 1..end {
                    if costs[i].total_cmp(&costs[best]).is_lt() {
                        best = i;
                    }
                }
                Some(best as u32)
            }
        };
        Walk {
            list,
            costs,
            head,
            rest: None,
        }
    }

    /// `candidates`, in that order, as a walk of their own (degraded
    /// mode's last resort, and tests).
    pub fn listed(candidates: Vec<Candidate>) -> Walk {
        let n = candidates.len() as u32;
        Walk {
            list: Arc::new(List::new(candidates, ByCost::Not)),
            costs: Vec::new(),
            head: (n > 0).then_some(0),
            rest: Some((1..n).collect()),
        }
    }

    /// Nothing to walk.
    pub fn none() -> Walk {
        Walk::listed(Vec::new())
    }

    /// The same candidates, walked in `order` (places in the list).
    pub fn only(&self, order: Vec<u32>) -> Walk {
        let mut order = order.into_iter();
        Walk {
            list: self.list.clone(),
            costs: self.costs.clone(),
            head: order.next(),
            rest: Some(order.collect()),
        }
    }

    pub fn list(&self) -> &List {
        &self.list
    }

    /// The candidate at `place` in the list.
    pub fn candidate(&self, place: u32) -> &Candidate {
        &self.list.candidates[place as usize]
    }

    /// The place of `provider::model` in the list, if it is there.
    pub fn place_of(&self, key: &str) -> Option<u32> {
        self.list.places.get(key).copied()
    }

    /// The cost of the candidate at `place` when the walk started.
    pub fn cost(&self, place: u32) -> f64 {
        self.costs.get(place as usize).copied().unwrap_or(0.0)
    }

    /// The lowest cost among the candidates with a figure (a cost above 0),
    /// when the walk started; infinite when none has one.
    pub fn best_known(&self) -> f64 {
        self.costs
            .iter()
            .copied()
            .filter(|c| *c > 0.0)
            .fold(f64::INFINITY, f64::min)
    }

    /// Put the candidate at `place` first, the others in their order.
    pub fn put_first(&mut self, place: u32) {
        if self.head != Some(place) {
            self.head = Some(place);
            self.rest = None;
        }
    }

    /// The `n`th candidate's place in the walk's order.
    pub fn nth(&mut self, n: usize) -> Option<u32> {
        if n == 0 {
            return self.head;
        }
        self.rest().get(n - 1).copied()
    }

    /// Every place, in order.
    pub fn all(&mut self) -> Vec<u32> {
        let mut out: Vec<u32> = self.head.into_iter().collect();
        out.extend_from_slice(self.rest());
        out
    }

    /// The places after the first, in order: worked out the first time.
    fn rest(&mut self) -> &[u32] {
        if self.rest.is_none() {
            let head = self.head;
            let mut rest: Vec<u32> = (0..self.list.len() as u32)
                .filter(|i| Some(*i) != head)
                .collect();
            let costs = &self.costs;
            let cands = &self.list.candidates;
            match self.list.by_cost {
                ByCost::Not => {}
                ByCost::WithinPriority => rest.sort_by(|&a, &b| {
                    let (ca, cb) = (&cands[a as usize], &cands[b as usize]);
                    (ca.provider.provider.priority)
                        .cmp(&cb.provider.provider.priority)
                        .then(costs[a as usize].total_cmp(&costs[b as usize]))
                        .then(a.cmp(&b))
                }),
                ByCost::First => rest.sort_by(|&a, &b| {
                    costs[a as usize]
                        .total_cmp(&costs[b as usize])
                        .then(a.cmp(&b))
                }),
            }
            self.rest = Some(rest);
        }
        self.rest.as_deref().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::choose::{resolved, speed_of};

    fn providers() -> (Vec<Arc<Resolved>>, BTreeMap<String, Vec<String>>) {
        let mut toml = String::from(
            "include_default_catalog = false\n[aliases]\nfast = [\"b::m2\", \"a::m1\", \"c::m0\"]\n",
        );
        for (p, prio) in [("a", 100), ("b", 100), ("c", 5), ("d", 100)] {
            toml += &format!(
                "[[providers]]\nname = \"{p}\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodels = [\"m0\", \"m1\", \"m2\", \"shared\"]\npriority = {prio}\n"
            );
        }
        resolved(&toml)
    }

    fn keys(cs: &[Candidate]) -> Vec<String> {
        cs.iter().map(Candidate::key).collect()
    }

    /// Every order, every kind of requested model, costs with ties, unknown
    /// (0) and held ones: a walk gives what [`choose::candidates`] gives,
    /// whether the request stops at the first candidate or goes through.
    #[test]
    fn a_walk_is_the_whole_order_for_the_same_costs() {
        let (ps, aliases) = providers();
        let speed = speed_of(&ps);
        let health = Arc::new(HealthMap::new());
        let states = Arc::new(Snapshot::default());
        let t = 1_800_000_000_000;
        // Costs: some slots measured (with ties), some failed, the rest 0.
        for (slot, secs) in [(0, 0.5), (1, 0.1), (5, 0.1), (6, 0.05), (9, 3.0), (12, 0.1)] {
            speed.served(slot, secs, true, t);
        }
        speed.failed(1, Some(5.0), t);
        for _ in 0..3 {
            speed.failed(13, None, t);
        }
        for order in [Order::Balanced, Order::Fastest, Order::Priority] {
            // The order is the engine's, fixed: one cache per order.
            let lists = Lists::default();
            for model in [
                None,
                Some("shared"),
                Some("b::m2"),
                Some("fast"),
                Some("m1"),
            ] {
                let ranking = Ranking {
                    order,
                    health: &health,
                    speed: &speed,
                };
                let choice = Choice::parse(model, &aliases);
                let want =
                    choose::candidates(&choice, &ps, &aliases, |_| ModelState::Active, ranking)
                        .unwrap();
                let inputs = || Inputs {
                    providers: &ps,
                    aliases: &aliases,
                    order,
                    states: states.clone(),
                    health: &health,
                    speed: &speed,
                };
                let list = lists.get(model, inputs()).unwrap();
                let mut walk = Walk::new(list.clone(), &speed, true);
                let got: Vec<Candidate> = walk
                    .all()
                    .into_iter()
                    .map(|i| walk.candidate(i).clone())
                    .collect();
                assert_eq!(keys(&got), keys(&want), "{order:?} {model:?}");
                // Step by step, as a request that falls over.
                let mut walk = Walk::new(list, &speed, true);
                let mut stepped = Vec::new();
                while let Some(i) = walk.nth(stepped.len()) {
                    stepped.push(walk.candidate(i).key());
                }
                assert_eq!(stepped, keys(&want), "{order:?} {model:?} stepped");
            }
        }
    }

    #[test]
    fn lists_are_built_again_when_the_states_change() {
        let (ps, aliases) = providers();
        let speed = speed_of(&ps);
        let health = Arc::new(HealthMap::new());
        let lists = Lists::default();
        let get = |states: &Arc<Snapshot>| {
            lists.get(
                Some("shared"),
                Inputs {
                    providers: &ps,
                    aliases: &aliases,
                    order: Order::Balanced,
                    states: states.clone(),
                    health: &health,
                    speed: &speed,
                },
            )
        };
        let all_active = Arc::new(Snapshot::default());
        let first = get(&all_active).unwrap();
        assert_eq!(first.len(), 4);
        // The same inputs: the same list, not a new one.
        assert!(Arc::ptr_eq(&first, &get(&all_active).unwrap()));
        let next = Arc::new(Snapshot::new([(
            "c::shared".to_string(),
            ModelState::Paused,
        )]));
        let second = get(&next).unwrap();
        assert_eq!(second.len(), 3);
        assert!(!second.places.contains_key("c::shared"));
    }
}
