//! What the engine tells about itself and does not route by: the
//! `/metrics` counters, the route alerts, which providers this instance
//! could not reach, and what it says once on stderr.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use std::time::Duration;

use crate::route::alerts::RouteAlerts;
use crate::route::choose::Candidate;
use crate::route::metrics::{AttemptLabels, Metrics, ModelLabels, OutcomeLabels, SkipLabels};
use crate::route::reach::Reach;
use crate::upstream::classify::UpstreamError;

/// The engine's metrics, alerts, reach and said-once flags.
pub struct Telemetry {
    pub metrics: Metrics,
    /// Providers this instance could not reach ([`crate::route::reach`]).
    pub reach: Reach,
    /// `route --serve`'s alerts, when a channel is configured
    /// ([`crate::route::alerts`]).
    alerts: Option<Arc<RouteAlerts>>,
    /// Said once on stderr: with a shared record, a degraded-mode success
    /// is not recorded here ([`Telemetry::first_shared_evidence`]).
    said_shared_evidence: AtomicBool,
    /// The `served` requests' counter, once a request served: counted
    /// without building its labels again.
    served: OnceLock<Counter>,
    /// Each model's `ok` attempts' counter and its latency histogram, by
    /// its place in [`crate::route::speed::Speed`], made at its first
    /// served attempt: a served attempt is counted without building labels
    /// or hashing them.
    ok_by_slot: Box<[OnceLock<(Counter, Histogram)>]>,
}

impl Telemetry {
    /// The telemetry of an engine with `slots` models.
    pub(super) fn new(slots: usize) -> Telemetry {
        Telemetry {
            metrics: Metrics::new(),
            reach: Default::default(),
            alerts: None,
            said_shared_evidence: AtomicBool::new(false),
            served: OnceLock::new(),
            ok_by_slot: (0..slots).map(|_| OnceLock::new()).collect(),
        }
    }

    /// Tell `alerts` of day-long benches and degraded mode.
    pub(super) fn set_alerts(&mut self, alerts: RouteAlerts) {
        self.alerts = Some(Arc::new(alerts));
    }

    /// The alerts, when a channel is configured.
    pub fn alerts(&self) -> Option<&Arc<RouteAlerts>> {
        self.alerts.as_ref()
    }

    /// True the first time only: a degraded-mode success with a shared
    /// record is said once on stderr, not at every request.
    pub(super) fn first_shared_evidence(&self) -> bool {
        !self.said_shared_evidence.swap(true, Ordering::Relaxed)
    }

    /// Count one request under `outcome` in `/metrics`: `served`,
    /// `exhausted`, `rejected` (an upstream said the request itself is at
    /// fault) or `refused` (refused before routing: a body that does not
    /// parse, an unknown model).
    pub fn count_request(&self, outcome: &str) {
        if outcome == "served" {
            let served = self.served.get_or_init(|| {
                self.metrics.requests.get_or_create_owned(&OutcomeLabels {
                    outcome: outcome.to_string(),
                })
            });
            served.inc();
            return;
        }
        self.metrics
            .requests
            .get_or_create(&OutcomeLabels {
                outcome: outcome.to_string(),
            })
            .inc();
    }

    pub(super) fn count_attempt<T>(
        &self,
        c: &Candidate,
        result: &std::result::Result<T, UpstreamError>,
        took: Duration,
    ) {
        let class = match result {
            Ok(_) => {
                if let Some(cell) = self.ok_by_slot.get(c.slot) {
                    let (n, latency) = cell.get_or_init(|| {
                        (
                            self.metrics
                                .attempts
                                .get_or_create_owned(&attempt_labels(c, "ok")),
                            self.metrics.latency.get_or_create_owned(&ModelLabels {
                                provider: c.provider.provider.name.clone(),
                                model: c.model.clone(),
                            }),
                        )
                    });
                    n.inc();
                    latency.observe(took.as_secs_f64());
                    return;
                }
                "ok"
            }
            Err(e) => e.class.as_str(),
        };
        self.metrics
            .attempts
            .get_or_create(&attempt_labels(c, class))
            .inc();
        self.metrics
            .latency
            .get_or_create(&ModelLabels {
                provider: c.provider.provider.name.clone(),
                model: c.model.clone(),
            })
            .observe(took.as_secs_f64());
    }

    /// A candidate passed over without sending (`cooldown`, or a limit).
    pub fn count_skip(&self, c: &Candidate, reason: &str) {
        self.metrics
            .skips
            .get_or_create(&SkipLabels {
                provider: c.provider.provider.name.clone(),
                model: c.model.clone(),
                reason: reason.to_string(),
            })
            .inc();
    }
}

pub(super) fn attempt_labels(c: &Candidate, class: &str) -> AttemptLabels {
    AttemptLabels {
        provider: c.provider.provider.name.clone(),
        model: c.model.clone(),
        class: class.to_string(),
    }
}
