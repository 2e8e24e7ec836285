//! Route's metrics, served as Prometheus text at `GET /metrics`, through
//! the official client library (prometheus-client).
//!
//! Counters and the latency histograms are updated as requests run; the
//! gauges (cooldowns active, routable models) are set when scraped.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    /// `served`, `exhausted`, `rejected` (an upstream refused the
    /// client's request) or `refused` (refused before routing: a body that
    /// does not parse, an unknown model).
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AttemptLabels {
    pub provider: String,
    pub model: String,
    /// `ok` or an error class.
    pub class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabels {
    pub provider: String,
    pub model: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SkipLabels {
    pub provider: String,
    pub model: String,
    /// `rpm`, `rpd`, `tpm`, `tpd`, `daily_cap`, or `cooldown`.
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReprobeLabels {
    /// `paused` (a paused model, recorded) or `bench` (a heuristic bench
    /// of an active model, quiet).
    pub kind: String,
    /// `pass`, `fail`, `unreachable` (nothing recorded) or `skipped` (the
    /// slot was given up: a `check` held the run lock, a limit was full,
    /// every key was benched).
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    pub provider: String,
    /// The scope it counts in, as in `/v1/providers` (`groq#key0:k1:…::m`,
    /// a key, or the provider).
    pub scope: String,
    /// `rpm`, `rpd`, `tpm`, `tpd` or `daily_cap`.
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProviderLabels {
    pub provider: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// `item` (an output item, `msg_…`, `fc_…`) or `response` (`resp_…`).
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EvictionLabels {
    /// `expired` (kept `item_store_secs` since stored or last used) or
    /// `size` (pushed out by `item_store_max_bytes`, oldest first).
    pub reason: String,
}

/// Latency buckets in seconds: 5 ms to about 82 s.
fn latency_histogram() -> Histogram {
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.005, 2.0, 15,
    ))
}

pub struct Metrics {
    registry: Registry,
    pub requests: Family<OutcomeLabels, Counter>,
    pub attempts: Family<AttemptLabels, Counter>,
    pub fallbacks: Family<AttemptLabels, Counter>,
    pub latency: Family<ModelLabels, Histogram, fn() -> Histogram>,
    /// Served streams' time to their first event, per model
    /// ([`crate::route::speed`] observes it).
    pub ttft: Family<ModelLabels, Histogram, fn() -> Histogram>,
    /// Served answers' time to their end, streamed or not, per model.
    pub total: Family<ModelLabels, Histogram, fn() -> Histogram>,
    pub skips: Family<SkipLabels, Counter>,
    pub cooldowns_active: Gauge,
    pub routable_models: Gauge,
    pub reprobes: Family<ReprobeLabels, Counter>,
    pub reprobe_rounds: Counter,
    /// The Responses item store ([`crate::route::items`]): what it holds
    /// in bytes, its entries by kind, and what left it by reason.
    pub item_store_bytes: Gauge,
    pub item_store_items: Family<KindLabels, Gauge>,
    pub item_store_evictions: Family<EvictionLabels, Counter>,
    pub limit_used: Family<LimitLabels, Gauge>,
    pub limit_used_by_probes: Family<LimitLabels, Gauge>,
    pub probe_requests_today: Family<ProviderLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("llmprobe_route");
        let requests = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "requests",
            "Chat requests handled, by outcome",
            requests.clone(),
        );
        let attempts = Family::<AttemptLabels, Counter>::default();
        registry.register(
            "attempts",
            "Upstream attempts sent, by provider, model and result class",
            attempts.clone(),
        );
        let fallbacks = Family::<AttemptLabels, Counter>::default();
        registry.register(
            "fallbacks",
            "Failed attempts that were followed by a fallback, by provider, model and class",
            fallbacks.clone(),
        );
        let latency = Family::<ModelLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        registry.register_with_unit(
            "upstream_latency",
            "Time of each upstream attempt: to the complete answer, the first chunk of a stream, or the failure",
            Unit::Seconds,
            latency.clone(),
        );
        let ttft = Family::<ModelLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        registry.register_with_unit(
            "ttft",
            "Time to first token of each served stream: from sending the attempt to its first event",
            Unit::Seconds,
            ttft.clone(),
        );
        let total = Family::<ModelLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        registry.register_with_unit(
            "total_latency",
            "Total time of each served answer: from sending the attempt to the whole reply, or to a stream's end",
            Unit::Seconds,
            total.clone(),
        );
        let skips = Family::<SkipLabels, Counter>::default();
        registry.register(
            "skips",
            "Candidates passed over without sending, by reason (a limit or a cooldown)",
            skips.clone(),
        );
        let cooldowns_active = Gauge::default();
        registry.register(
            "cooldowns_active",
            "Cooldowns (benched keys, models, providers) in force",
            cooldowns_active.clone(),
        );
        let routable_models = Gauge::default();
        registry.register(
            "routable_models",
            "Active models that are not cooling down",
            routable_models.clone(),
        );
        let reprobes = Family::<ReprobeLabels, Counter>::default();
        registry.register(
            "reprobes",
            "Re-probes by route --serve's re-prober, by kind (paused, bench) and result",
            reprobes.clone(),
        );
        let reprobe_rounds = Counter::default();
        registry.register(
            "reprobe_rounds",
            "Rounds of the re-prober: each looks at every paused model and bench once",
            reprobe_rounds.clone(),
        );
        let item_store_bytes = Gauge::default();
        registry.register_with_unit(
            "item_store",
            "What the Responses item store holds in memory, as the bytes of its JSON",
            Unit::Bytes,
            item_store_bytes.clone(),
        );
        let item_store_items = Family::<KindLabels, Gauge>::default();
        registry.register(
            "item_store_items",
            "Entries in the Responses item store: output items (item) and responses (response)",
            item_store_items.clone(),
        );
        let item_store_evictions = Family::<EvictionLabels, Counter>::default();
        registry.register(
            "item_store_evictions",
            "Entries that left the Responses item store, by reason (expired, size)",
            item_store_evictions.clone(),
        );
        let limit_used = Family::<LimitLabels, Gauge>::default();
        registry.register(
            "limit_used",
            "Use of each limit in force, by everything sent: routed requests and probes",
            limit_used.clone(),
        );
        let limit_used_by_probes = Family::<LimitLabels, Gauge>::default();
        registry.register(
            "limit_used_by_probes",
            "The probes' part of limit_used: check's probes and route's re-probes",
            limit_used_by_probes.clone(),
        );
        let probe_requests_today = Family::<ProviderLabels, Gauge>::default();
        registry.register(
            "probe_requests_today",
            "Probe requests sent each provider since 00:00 UTC: check's (stats/probe_usage.json) and this route's re-probes",
            probe_requests_today.clone(),
        );
        Metrics {
            limit_used,
            limit_used_by_probes,
            probe_requests_today,
            item_store_bytes,
            item_store_items,
            item_store_evictions,
            reprobes,
            reprobe_rounds,
            registry,
            requests,
            attempts,
            fallbacks,
            latency,
            ttft,
            total,
            skips,
            cooldowns_active,
            routable_models,
        }
    }

    /// The exposition text.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}
