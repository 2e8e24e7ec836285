//! What route measures of each model from its own traffic, and the score
//! that orders candidates by it (docs/routing.md, "Order").
//!
//! Per model, exponentially weighted moving averages of the time to first
//! token (a peak-EWMA: a slower sample is taken at once, a faster one
//! blended in), of the total time, and of the error rate, seeded from the
//! probes (median TTFT, else median latency; error rate `1 − 24 h
//! uptime`). From them a cost in milliseconds, lower first:
//!
//! ```text
//! cost = L × (1 + 4·E) + 500 ms × E
//! ```
//!
//! `L` the TTFT average, `E` the error-rate average. A model with no
//! figure at all costs 0: it is tried first, so a faster one is found. A
//! model whose last [`HELD_AFTER`] attempts failed is held behind every
//! other for [`HOLD`] after the last. Traffic figures fade back to the
//! probes' (to nothing, without probes) with a [`HALF_LIFE`] half-life
//! since the model's last outcome, so a model that was slow is tried
//! again once the fade puts it first.
//!
//! The figures live in one slot per catalog model, fixed when the engine
//! is built. An outcome updates its slot and stores the slot's cost in an
//! atomic; a request only loads those atomics, never computes a cost, nor
//! formats or allocates anything ([`Speed::rank`]). A tick off the
//! request path ([`Speed::refresh`]) recomputes every cost for the fade and
//! new probe seeds; with shared state, [`Speed::to_merge`] and
//! [`Speed::merged`] exchange figures through Redis
//! ([`crate::route::shared::speed`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

use crate::catalog::{ModelKey, Resolved, model_key};
use crate::route::health::HealthMap;
use crate::route::metrics::ModelLabels;

/// The weight of a new sample in each average (a faster TTFT, the total
/// time, the error rate).
pub const ALPHA: f64 = 0.3;
/// How much a unit of error rate multiplies the latency by, beyond 1.
pub const ERROR_FACTOR: f64 = 4.0;
/// What a unit of error rate adds, in ms: the cost of falling over.
pub const ERROR_MS: f64 = 500.0;
/// Consecutive failures after which a model is held behind every other.
pub const HELD_AFTER: u32 = 3;
/// How long a model stays held after its last failure, in ms.
pub const HOLD: i64 = 10 * 60 * 1000;
/// The half-life, in ms, of traffic figures fading back to the probes'.
pub const HALF_LIFE: f64 = 60_000.0;
/// What a held model's cost starts at: behind any real cost.
const HELD_COST: f64 = 1e9;
/// Affinity yields when the previous model's cost is over this many times
/// the best candidate's (docs/routing.md, "Affinity").
pub const AFFINITY_FACTOR: f64 = 2.0;

/// One model's averages from route's own traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Figures {
    /// Time to first token, ms (a non-streamed reply's is its total time:
    /// the client sees its first token with the whole answer).
    pub ttft_ms: Option<f64>,
    /// Time to the complete answer, ms.
    pub total_ms: Option<f64>,
    /// Error rate, 0 to 1.
    pub err: f64,
    /// Failures since the last success.
    pub fails: u32,
    /// When the last outcome came (engine clock, Unix ms); 0: never.
    pub at_ms: i64,
}

impl Figures {
    fn measured(&self) -> bool {
        self.at_ms != 0
    }

    /// An answer began `ttft_ms` after the request (and, unstreamed,
    /// ended then: `total_ms`).
    pub fn served(&mut self, ttft_ms: f64, total_ms: Option<f64>, at_ms: i64) {
        self.ttft_ms = Some(peak(self.ttft_ms, ttft_ms));
        if let Some(t) = total_ms {
            self.total_ms = Some(ewma(self.total_ms, t));
        }
        self.err *= 1.0 - ALPHA;
        self.fails = 0;
        self.at_ms = at_ms;
    }

    /// A streamed answer ended `total_ms` after the request.
    pub fn ended(&mut self, total_ms: f64, at_ms: i64) {
        self.total_ms = Some(ewma(self.total_ms, total_ms));
        self.at_ms = self.at_ms.max(at_ms);
    }

    /// An attempt failed; `waited_ms` when it timed out (the time waited
    /// is then a TTFT sample: the model drops behind at once).
    pub fn failed(&mut self, waited_ms: Option<f64>, at_ms: i64) {
        if let Some(w) = waited_ms {
            self.ttft_ms = Some(peak(self.ttft_ms, w));
        }
        self.err = self.err * (1.0 - ALPHA) + ALPHA;
        self.fails += 1;
        self.at_ms = at_ms;
    }
}

fn peak(old: Option<f64>, x: f64) -> f64 {
    match old {
        Some(o) if x < o => o + ALPHA * (x - o),
        _ => x,
    }
}

fn ewma(old: Option<f64>, x: f64) -> f64 {
    old.map_or(x, |o| o + ALPHA * (x - o))
}

/// What the probes say of a model: the seed of its figures.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Seed {
    /// Median TTFT of streamed probes, else median latency; ms.
    pub ttft_ms: Option<f64>,
    /// `1 − 24 h uptime`; 0 without probes.
    pub err: f64,
}

impl Seed {
    /// The seed a model's recent probes give; `None` without probes.
    pub fn of(health: &crate::route::health::ModelHealth) -> Option<Seed> {
        let uptime = health.uptime()?;
        Some(Seed {
            ttft_ms: health
                .median_ttft_ms()
                .or_else(|| health.median_latency_ms()),
            err: 1.0 - uptime,
        })
    }
}

/// The cost of a model (ms, lower first) at `now_ms`, from its traffic
/// figures and its probes' seed.
pub fn cost(f: &Figures, seed: Option<&Seed>, now_ms: i64) -> f64 {
    let (l0, e0) = seed.map_or((None, 0.0), |s| (s.ttft_ms, s.err));
    let of = |l: Option<f64>, e: f64| l.unwrap_or(0.0) * (1.0 + ERROR_FACTOR * e) + ERROR_MS * e;
    if !f.measured() {
        return of(l0, e0);
    }
    let age = (now_ms - f.at_ms).max(0);
    if f.fails >= HELD_AFTER && age < HOLD {
        return HELD_COST + of(f.ttft_ms, f.err);
    }
    let w = 0.5f64.powf(age as f64 / HALF_LIFE);
    let fade = |x: f64, to: f64| to + (x - to) * w;
    let l = match (f.ttft_ms, l0) {
        (Some(x), to) => Some(fade(x, to.unwrap_or(0.0))),
        (None, to) => to,
    };
    of(l, fade(f.err, e0))
}

/// One model's place: its figures and seed, whether it changed since the
/// last merge, and its `/metrics` histograms once it has traffic (its
/// cost as last computed is in [`Speed`]'s `ranks`, beside the others').
#[derive(Debug, Default)]
struct Slot {
    state: Mutex<(Figures, Option<Seed>)>,
    dirty: AtomicBool,
    /// TTFT and total time histograms, made at the first observation.
    hist: OnceLock<(Histogram, Histogram)>,
}

/// Every catalog model's figures, by slot: the models of the usable
/// providers in catalog order ([`Speed::slot_of`]).
pub struct Speed {
    slots: Box<[Slot]>,
    /// Each slot's cost as last computed, as `f64` bits: side by side, so
    /// that a request reading a whole list's costs reads a few cache lines.
    ranks: Box<[AtomicU64]>,
    /// `provider::model` of each slot (for the merge and the metrics).
    keys: Box<[(String, String)]>,
    /// The first slot of each provider, in the engine's provider order.
    firsts: Box<[usize]>,
    index: HashMap<String, usize>,
    /// The health map the seeds were taken from, to take them again only
    /// when it changes.
    seeded: Mutex<Option<Arc<HealthMap>>>,
    ttft: Family<ModelLabels, Histogram, fn() -> Histogram>,
    total: Family<ModelLabels, Histogram, fn() -> Histogram>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Speed {
    /// A slot for each model of `providers`, in order; histograms in
    /// `ttft` and `total`.
    pub fn new(
        providers: &[Arc<Resolved>],
        ttft: Family<ModelLabels, Histogram, fn() -> Histogram>,
        total: Family<ModelLabels, Histogram, fn() -> Histogram>,
    ) -> Speed {
        let mut keys = Vec::new();
        let mut firsts = Vec::new();
        for p in providers {
            firsts.push(keys.len());
            for m in &p.provider.models {
                keys.push((p.provider.name.clone(), m.clone()));
            }
        }
        let index = keys
            .iter()
            .enumerate()
            .map(|(i, (p, m))| (model_key(p, m), i))
            .collect();
        Speed {
            slots: keys.iter().map(|_| Slot::default()).collect(),
            ranks: keys.iter().map(|_| AtomicU64::new(0)).collect(),
            keys: keys.into(),
            firsts: firsts.into(),
            index,
            seeded: Mutex::new(None),
            ttft,
            total,
        }
    }

    /// The slot of the `m`th model of the `p`th provider.
    pub fn slot_of(&self, p: usize, m: usize) -> usize {
        self.firsts.get(p).map_or(usize::MAX, |f| f + m)
    }

    /// The slot's cost as last computed; 0 for an unknown slot. One atomic
    /// load: what a request reads.
    pub fn rank(&self, slot: usize) -> f64 {
        self.ranks
            .get(slot)
            .map_or(0.0, |r| f64::from_bits(r.load(Ordering::Relaxed)))
    }

    /// True when the slot has a figure (traffic, or probes): a cost
    /// above 0. One atomic load. (A request reads it from its walk's
    /// costs, `route/engine/lists.rs`.)
    #[cfg(test)]
    pub fn known(&self, slot: usize) -> bool {
        self.rank(slot) > 0.0
    }

    /// The slot's traffic figures, when it has any (for `/v1/providers`).
    pub fn measured(&self, slot: usize) -> Option<Figures> {
        let s = self.slots.get(slot)?;
        let f = lock(&s.state).0;
        f.measured().then_some(f)
    }

    fn update(&self, slot: usize, now_ms: i64, f: impl FnOnce(&mut Figures)) {
        let Some(s) = self.slots.get(slot) else {
            return;
        };
        let mut st = lock(&s.state);
        f(&mut st.0);
        let c = cost(&st.0, st.1.as_ref(), now_ms);
        self.ranks[slot].store(c.to_bits(), Ordering::Relaxed);
        s.dirty.store(true, Ordering::Relaxed);
    }

    fn hist(&self, slot: usize) -> Option<&(Histogram, Histogram)> {
        let s = self.slots.get(slot)?;
        Some(s.hist.get_or_init(|| {
            let (provider, model) = self.keys[slot].clone();
            let l = ModelLabels { provider, model };
            (
                self.ttft.get_or_create_owned(&l),
                self.total.get_or_create_owned(&l),
            )
        }))
    }

    /// An attempt served: a stream's first event came `ttft_secs` after it
    /// was sent (`streamed`), or a whole reply then.
    pub fn served(&self, slot: usize, secs: f64, streamed: bool, now_ms: i64) {
        let ms = secs * 1000.0;
        let total = (!streamed).then_some(ms);
        self.update(slot, now_ms, |f| f.served(ms, total, now_ms));
        if let Some((ttft, whole)) = self.hist(slot) {
            if streamed {
                ttft.observe(secs);
            } else {
                whole.observe(secs);
            }
        }
    }

    /// A served stream ended `secs` after its attempt was sent.
    pub fn ended(&self, slot: usize, secs: f64, now_ms: i64) {
        self.update(slot, now_ms, |f| f.ended(secs * 1000.0, now_ms));
        if let Some((_, whole)) = self.hist(slot) {
            whole.observe(secs);
        }
    }

    /// An attempt failed (`waited_secs` when it timed out).
    pub fn failed(&self, slot: usize, waited_secs: Option<f64>, now_ms: i64) {
        self.update(slot, now_ms, |f| {
            f.failed(waited_secs.map(|s| s * 1000.0), now_ms)
        });
    }

    /// Recompute every cost at `now_ms` (the fade), taking the seeds from
    /// `health` again when it is not the map they came from. Off the
    /// request path: a tick, and each new health map.
    pub fn refresh(&self, health: &Arc<HealthMap>, now_ms: i64) {
        let reseed = {
            let mut seeded = lock(&self.seeded);
            let changed = !seeded.as_ref().is_some_and(|h| Arc::ptr_eq(h, health));
            if changed {
                *seeded = Some(health.clone());
            }
            changed
        };
        for (i, s) in self.slots.iter().enumerate() {
            let mut st = lock(&s.state);
            if reseed {
                let (p, m) = &self.keys[i];
                st.1 = health.get(&ModelKey::new(p, m)).and_then(Seed::of);
            }
            let c = cost(&st.0, st.1.as_ref(), now_ms);
            self.ranks[i].store(c.to_bits(), Ordering::Relaxed);
        }
    }

    /// The figures of the models that changed since the last call, as
    /// `(provider::model, encoded)`, to write to the shared store.
    pub fn to_merge(&self) -> Vec<(String, String)> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.dirty.swap(false, Ordering::Relaxed))
            .map(|(i, s)| {
                let (p, m) = &self.keys[i];
                (model_key(p, m), encode(&lock(&s.state).0))
            })
            .collect()
    }

    /// Mark `sent` (from [`Speed::to_merge`]) to go out again: the merge
    /// failed.
    pub fn redirty(&self, sent: &[(String, String)]) {
        for (key, _) in sent {
            if let Some(&i) = self.index.get(key) {
                self.slots[i].dirty.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Take in the shared figures: for each model, another instance's
    /// figures when their last outcome is newer than this one's.
    pub fn merged(&self, all: &HashMap<String, String>, now_ms: i64) {
        for (key, value) in all {
            let (Some(&i), Some(theirs)) = (self.index.get(key), decode(value)) else {
                continue;
            };
            let s = &self.slots[i];
            let mut st = lock(&s.state);
            if theirs.at_ms > st.0.at_ms {
                st.0 = theirs;
                let c = cost(&st.0, st.1.as_ref(), now_ms);
                self.ranks[i].store(c.to_bits(), Ordering::Relaxed);
            }
        }
    }
}

/// `at_ms|ttft|total|err|fails`, an empty field for none: the figures as
/// the shared store keeps them.
pub fn encode(f: &Figures) -> String {
    let opt = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_default();
    format!(
        "{}|{}|{}|{:.6}|{}",
        f.at_ms,
        opt(f.ttft_ms),
        opt(f.total_ms),
        f.err,
        f.fails
    )
}

/// [`encode`]'s inverse; `None` for anything else.
pub fn decode(s: &str) -> Option<Figures> {
    let mut it = s.split('|');
    let at_ms = it.next()?.parse().ok()?;
    let opt = |v: &str| -> Option<Option<f64>> {
        if v.is_empty() {
            Some(None)
        } else {
            v.parse::<f64>().ok().filter(|x| x.is_finite()).map(Some)
        }
    };
    let ttft_ms = opt(it.next()?)?;
    let total_ms = opt(it.next()?)?;
    let err: f64 = it.next()?.parse().ok()?;
    let fails = it.next()?.parse().ok()?;
    if it.next().is_some() || !(0.0..=1.0).contains(&err) {
        return None;
    }
    Some(Figures {
        ttft_ms,
        total_ms,
        err,
        fails,
        at_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000_000;

    #[test]
    fn a_slower_sample_is_taken_at_once_a_faster_one_blended() {
        let mut f = Figures::default();
        f.served(100.0, None, T0);
        assert_eq!(f.ttft_ms, Some(100.0));
        f.served(3000.0, None, T0 + 1);
        assert_eq!(f.ttft_ms, Some(3000.0), "peak: at once");
        f.served(100.0, None, T0 + 2);
        assert_eq!(f.ttft_ms, Some(3000.0 - 0.3 * 2900.0));
        // Total time is a plain average.
        f.ended(1000.0, T0 + 3);
        f.ended(2000.0, T0 + 4);
        assert_eq!(f.total_ms, Some(1300.0));
    }

    #[test]
    fn the_cost_is_latency_with_an_error_penalty() {
        let mut f = Figures::default();
        f.served(200.0, None, T0);
        assert_eq!(cost(&f, None, T0), 200.0);
        f.failed(None, T0);
        // E = 0.3: 200 × (1 + 1.2) + 150.
        let c = cost(&f, None, T0);
        assert!((c - (200.0 * 2.2 + 150.0)).abs() < 1e-9, "{c}");
        // A success lowers E by 30%.
        f.served(200.0, None, T0);
        assert!(cost(&f, None, T0) < c);
    }

    #[test]
    fn unmeasured_is_optimistic_and_probes_seed_it() {
        let none = Figures::default();
        assert_eq!(cost(&none, None, T0), 0.0);
        let seed = Seed {
            ttft_ms: Some(300.0),
            err: 0.25,
        };
        assert_eq!(cost(&none, Some(&seed), T0), 300.0 * 2.0 + 125.0);
        // Traffic replaces the seed.
        let mut f = Figures::default();
        f.served(50.0, None, T0);
        assert_eq!(cost(&f, Some(&seed), T0), 50.0);
    }

    #[test]
    fn a_timeout_drops_a_model_behind_at_once_and_three_hold_it() {
        let mut slow = Figures::default();
        slow.served(50.0, None, T0);
        let mut other = Figures::default();
        other.served(400.0, None, T0);
        slow.failed(Some(5000.0), T0 + 10);
        assert!(cost(&slow, None, T0 + 10) > cost(&other, None, T0 + 10));
        slow.failed(Some(5000.0), T0 + 20);
        slow.failed(Some(5000.0), T0 + 30);
        assert!(cost(&slow, None, T0 + 30) >= HELD_COST);
        // Held for HOLD after the last failure, then it fades like any.
        assert!(cost(&slow, None, T0 + 30 + HOLD - 1) >= HELD_COST);
        assert!(cost(&slow, None, T0 + 30 + HOLD) < HELD_COST);
        // A failure without a wait (a 500) does not look fast.
        let mut e500 = Figures::default();
        e500.failed(None, T0);
        assert!(cost(&e500, None, T0) > cost(&Figures::default(), None, T0));
    }

    #[test]
    fn traffic_fades_back_to_the_probes_with_the_half_life() {
        let seed = Seed {
            ttft_ms: Some(100.0),
            err: 0.0,
        };
        let mut f = Figures::default();
        f.served(3000.0, None, T0);
        assert_eq!(cost(&f, Some(&seed), T0), 3000.0);
        let half = cost(&f, Some(&seed), T0 + HALF_LIFE as i64);
        assert!((half - 1550.0).abs() < 1e-6, "{half}");
        // Without probes it fades to nothing: tried again in time.
        let gone = cost(&f, None, T0 + 20 * HALF_LIFE as i64);
        assert!(gone < 0.01, "{gone}");
    }

    #[test]
    fn figures_round_trip_the_shared_encoding() {
        let mut f = Figures::default();
        f.served(123.5, Some(900.25), T0);
        f.failed(Some(5000.0), T0 + 5);
        assert_eq!(decode(&encode(&f)), Some(f));
        let empty = Figures {
            at_ms: 5,
            ..Default::default()
        };
        assert_eq!(decode(&encode(&empty)), Some(empty));
        assert_eq!(decode("1|2|3|4"), None);
        assert_eq!(decode("1|2|3|1.5|0"), None);
        assert_eq!(decode("x|||0|0"), None);
    }

    fn speed(models: &[&str]) -> Speed {
        let c = crate::catalog::Catalog::from_toml_str(
            &(String::from("include_default_catalog = false\n")
                + &crate::catalog::test_table("a", models, "")),
            "t.toml",
        )
        .unwrap();
        let ps: Vec<Arc<Resolved>> = c
            .providers
            .iter()
            .map(|p| Arc::new(p.resolve_with(|_| None).unwrap()))
            .collect();
        let m = crate::route::metrics::Metrics::new();
        Speed::new(&ps, m.ttft.clone(), m.total.clone())
    }

    #[test]
    fn slots_rank_by_their_last_outcome_and_merge_the_newer() {
        let s = speed(&["x", "y"]);
        let (x, y) = (s.slot_of(0, 0), s.slot_of(0, 1));
        assert_eq!((x, y), (0, 1));
        assert_eq!(s.rank(x), 0.0);
        s.served(x, 0.05, true, T0);
        s.served(y, 0.5, false, T0);
        assert!(s.rank(x) < s.rank(y));
        // What changed goes out once.
        let out = s.to_merge();
        assert_eq!(out.len(), 2);
        assert!(s.to_merge().is_empty());
        // Another instance saw y fast and x time out, later: taken.
        let other = speed(&["x", "y"]);
        other.failed(0, Some(5.0), T0 + 10);
        other.served(1, 0.01, true, T0 + 10);
        let theirs: HashMap<String, String> = other.to_merge().into_iter().collect();
        s.merged(&theirs, T0 + 10);
        assert!(s.rank(y) < s.rank(x));
        // Older figures are not taken.
        let stale: HashMap<String, String> = out.into_iter().collect();
        s.merged(&stale, T0 + 10);
        assert!(s.rank(y) < s.rank(x));
        // The refresh fades them; seeds come from the probes.
        let mut h = HealthMap::new();
        h.insert(
            "a::y".parse().unwrap(),
            crate::route::health::ModelHealth::new(2.0, 2.0, vec![700.0]).with_ttfts(vec![20.0]),
        );
        s.refresh(&Arc::new(h), T0 + 10);
        assert!(s.known(y));
        assert!(s.rank(y) < s.rank(x));
    }
}
