//! The probe budget and traffic evidence in a `check` run
//! ([`crate::usage`]): which planned models are probed this run, in which
//! order, and the [`Book`] every probe is admitted and counted by.
//!
//! Before the run, [`apply`] leaves out of the plan:
//!
//! - an **active** model that route's traffic has proven since its last
//!   probe ([`crate::usage::traffic::Since::proves`]): no probe and no log
//!   entry, the table says `traffic: 5 ok since 13:02`;
//! - a model whose basic probe is not due in its budget's slot
//!   ([`crate::usage::budget::Budget::due`]): the table says
//!   `budget: next probe 14:00`. A model with a routed failure since its
//!   last probe is due at once.
//!
//! and orders each lane: paused models first, then models probed before,
//! then models never probed (capability probes come last, as always). So a
//! scarce budget goes to the models in use. At each send, [`Book::admit`]
//! checks the day's use (route's and the probes') against the allowance
//! and counts the probe in `stats/probe_usage.json`; a probe that would eat
//! into traffic's reserve is not sent, and says so.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::plan::Plan;
use crate::capabilities::Capability;
use crate::catalog::{RequestsWindow, Resolved, model_key};
use crate::error::Result;
use crate::state::{ModelState, States};
use crate::usage::budget::{Budget, Probe};
use crate::usage::limits::{self, EffectiveLimits, LimitRequest, Reservation};
use crate::usage::traffic::Since;
use crate::usage::{LimitLedger, ProbeUsage, RouteUsage, SharedUsage, Target, Traffic};

/// A model not probed this run because of its budget.
#[derive(Debug, Clone, Serialize)]
pub struct BudgetSkip {
    /// `provider::model`.
    pub model: String,
    /// When its next probe may go: the next slot, or the day's reset.
    pub next: DateTime<Utc>,
    /// Why: `not due` (its slot's probe is done) or the allowance spent.
    pub why: String,
    /// "probed every 12h: 20 requests/day, probes use 2".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cadence: Option<String>,
    /// A capability probe the allowance stopped (the model's basic probe
    /// went); `None` for the basic probe.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capability: Option<Capability>,
}

/// A model not probed this run because route's traffic proved it.
#[derive(Debug, Clone, Serialize)]
pub struct TrafficSkip {
    pub model: String,
    pub traffic: Since,
}

/// What the budget and the traffic left out of a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Skips {
    pub budget: Vec<BudgetSkip>,
    pub traffic: Vec<TrafficSkip>,
}

/// One planned model's budget, and what its probes count against.
#[derive(Debug, Clone)]
struct Entry {
    budget: Budget,
    /// Never probed: it may take only the first half of a shared
    /// allowance ([`Budget::admits_as`]).
    fresh: bool,
    target: Target,
    limits: EffectiveLimits,
    window: RequestsWindow,
}

/// Admits and counts every probe of a run ([`crate::usage`]).
pub struct Book {
    stats_dir: PathBuf,
    entries: HashMap<String, Entry>,
    clock: crate::clock::Clock,
    /// Probes not sent because the allowance was spent at send time.
    spent: Mutex<Vec<BudgetSkip>>,
    /// Each sent probe's reservation, until it is answered.
    reserved: Mutex<HashMap<String, Reservation>>,
    /// The probe usage file could not be written (said once).
    unwritable: std::sync::atomic::AtomicBool,
    /// The shared store (`--shared-state`): route's counts are read from
    /// it, and every probe is counted in it too.
    pub shared: Option<Arc<dyn SharedUsage>>,
}

/// The target probes of `p` count against: its first key, as a probe
/// sends with it.
pub fn probe_target(p: &Resolved, model: &str) -> Target {
    let t = Target::new(&p.provider.name, model);
    match p.first_key() {
        Some(k) => t.with_key(k.index, &k.fingerprint),
        None => t,
    }
}

/// Read route's file for its counts and traffic; one that cannot be read
/// costs them (with a warning), never the run.
fn route_usage(stats_dir: &std::path::Path) -> RouteUsage {
    RouteUsage::load(stats_dir).unwrap_or_else(|e| {
        eprintln!("warning: {e}; this run's probe budget leaves out route's counts");
        RouteUsage::default()
    })
}

/// Leave out of `plan` what the budget and the traffic say need not be
/// probed now, order each lane, and make the run's [`Book`].
/// `traffic_evidence`: the successes that stand in for a probe (`[defaults]
/// traffic_evidence`); `None` for `check --paused`, which follows the
/// re-probe schedule: neither cadence nor traffic leaves anything out, and
/// only the allowance stops a probe. `shared`:
/// traffic read from Redis (`--shared-state`), added to route's file's.
/// `last`: each model's last basic probe, from the health log.
pub fn apply(
    stats_dir: &std::path::Path,
    plan: &mut Plan,
    states: &States,
    last: &HashMap<String, DateTime<Utc>>,
    (shared, traffic): (Option<Arc<dyn SharedUsage>>, Option<Traffic>),
    traffic_evidence: Option<u32>,
    clock: &crate::clock::Clock,
) -> Result<(Book, Skips)> {
    let now = clock.now();
    let by_cadence = traffic_evidence.is_some();
    let traffic_evidence = traffic_evidence.unwrap_or(0);
    let mut route = route_usage(stats_dir);
    if let Some(t) = traffic {
        route.traffic.merge(&t);
    }
    let probes = ProbeUsage::load(&ProbeUsage::path(stats_dir))?;
    let learned = [&route.budget, &probes.budget];
    let mut skips = Skips::default();
    let mut entries = HashMap::new();
    for lane in &mut plan.lanes {
        let p = &lane.resolved;
        let sharing = crate::usage::budget::sharing(&p.provider, |k| {
            states.state_of(k) == ModelState::Disabled
        });
        let mut kept: Vec<(u8, String)> = Vec::new();
        for m in &lane.models {
            let key = model_key(&p.provider.name, m);
            let target = probe_target(p, m);
            let budget = Budget::of(&p.provider, m, &target, sharing, &learned);
            let state = states.state_of(&key);
            let last = last.get(&key).copied();
            let traffic = route.traffic.since(&key, last);
            entries.insert(
                key.clone(),
                Entry {
                    budget: budget.clone(),
                    fresh: last.is_none(),
                    target,
                    limits: limits::effective(&p.provider, m),
                    window: p.provider.requests_header_window,
                },
            );
            if by_cadence
                && state == ModelState::Active
                && traffic.proves(traffic_evidence, last, now)
            {
                skips.traffic.push(TrafficSkip {
                    model: key,
                    traffic,
                });
                continue;
            }
            // A routed failure since the last probe makes it due at once.
            // A paused model is due every run (within the allowance): it
            // is out of rotation until a probe passes.
            if by_cadence
                && state != ModelState::Paused
                && traffic.failed.is_empty()
                && let Err(next) = budget.due(last, now)
            {
                skips.budget.push(BudgetSkip {
                    model: key,
                    next,
                    why: "not due".into(),
                    cadence: budget.cadence_words(),
                    capability: None,
                });
                continue;
            }
            let class = match (state, last) {
                (ModelState::Paused, _) => 0,
                (_, Some(_)) => 1,
                (_, None) => 2,
            };
            kept.push((class, m.clone()));
        }
        kept.sort_by_key(|(class, _)| *class);
        lane.models = kept.into_iter().map(|(_, m)| m).collect();
        lane.caps_follow_models();
    }
    plan.lanes.retain(|l| !l.models.is_empty());
    Ok((
        Book {
            stats_dir: stats_dir.to_path_buf(),
            entries,
            clock: clock.clone(),
            spent: Mutex::default(),
            reserved: Mutex::default(),
            unwritable: Default::default(),
            shared,
        },
        skips,
    ))
}

impl std::fmt::Debug for Book {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Book")
            .field("stats_dir", &self.stats_dir)
            .field("models", &self.entries.len())
            .field("shared", &self.shared.is_some())
            .finish()
    }
}

impl Book {
    /// What a probe of `model` of `p` counts against: its target and
    /// limits, when the run planned it.
    pub fn target(&self, p: &Resolved, model: &str) -> Option<(Target, EffectiveLimits)> {
        let e = self.entries.get(&model_key(&p.provider.name, model))?;
        Some((e.target.clone(), e.limits))
    }

    /// Whether a probe of `model` of `p` (of about `tokens` tokens; a
    /// capability probe's when `cap`) may go now; if so, it is counted in
    /// `stats/probe_usage.json` under the data lock before it is sent.
    /// The day's use is route's file's and this file's, or, with `shared`
    /// (every instance's counts in the shared store, this run's probes
    /// among them), the shared store's alone. Blocking (file I/O). `Err`
    /// says why not, and the skip is kept for the run's report.
    pub fn admit(
        &self,
        p: &Resolved,
        model: &str,
        tokens: u64,
        cap: Option<Capability>,
        shared: Option<&LimitLedger>,
    ) -> Result<(), String> {
        let key = model_key(&p.provider.name, model);
        let Some(e) = self.entries.get(&key) else {
            return Ok(());
        };
        let now = self.clock.now();
        let probe = match (cap, e.fresh) {
            (Some(_), _) => Probe::Capability,
            (None, true) => Probe::Fresh,
            (None, false) => Probe::Basic,
        };
        // Shared routers write no file: the shared store holds what they
        // and this run's probes counted.
        let route = match shared {
            Some(_) => RouteUsage::default(),
            None => route_usage(&self.stats_dir),
        };
        let counted = ProbeUsage::update(&self.stats_dir, now, |usage| {
            let seen: Vec<&LimitLedger> = match shared {
                Some(all) => vec![all],
                None => vec![&route.budget, &usage.budget],
            };
            e.budget
                .admits_as(&seen, tokens, probe, now)
                .map_err(|spent| (spent.resets_at, spent.to_string()))?;
            let req = LimitRequest {
                target: &e.target,
                limits: &e.limits,
                tokens,
            };
            let r = match shared {
                // Checked against the shared counts; the file only keeps
                // its own record.
                Some(all) => {
                    let mut scratch = all.clone();
                    scratch
                        .check_and_count(&req, now)
                        .map_err(|hit| (hit.until, format!("{} full", hit.kind)))?;
                    usage.budget.check_and_count(&req, now).ok()
                }
                None => Some(
                    usage
                        .budget
                        .check_and_count_with(&req, &[&route.budget], now)
                        .map_err(|hit| (hit.until, format!("{} full", hit.kind)))?,
                ),
            };
            usage.spend(&p.provider.name, tokens, now);
            Ok(r)
        });
        match counted {
            Ok(Ok(r)) => {
                if let Some(r) = r {
                    lock(&self.reserved).insert(key, r);
                }
                Ok(())
            }
            Ok(Err((next, why))) => {
                let why = match cap {
                    Some(c) => format!("its {c} probe: {why}"),
                    None => why,
                };
                lock(&self.spent).push(BudgetSkip {
                    model: key,
                    next,
                    why: why.clone(),
                    cadence: e.budget.cadence_words(),
                    capability: cap,
                });
                Err(why)
            }
            // A probe usage file that cannot be parsed: nothing may go
            // uncounted, and it is left as it is.
            Err(err @ crate::error::Error::Data(_)) => Err(err.to_string()),
            // The count could not be written (a read-only or removed stats
            // directory, a full disk): the probe goes uncounted, and the
            // writer, which cannot write either, stops the run with the
            // error. Said once.
            Err(err) => {
                if !self
                    .unwritable
                    .swap(true, std::sync::atomic::Ordering::Relaxed)
                {
                    eprintln!(
                        "warning: {err}; this run's probes are not counted in the probe budget"
                    );
                }
                Ok(())
            }
        }
    }

    /// What a `--dry-run` says of each planned basic probe: the ones the
    /// allowance would stop now (route's file and the probe file read,
    /// nothing written; a shared store is not read), as skips.
    pub fn would_stop(&self, plan: &Plan) -> Vec<BudgetSkip> {
        let now = self.clock.now();
        let route = route_usage(&self.stats_dir);
        let Ok(probes) = ProbeUsage::load(&ProbeUsage::path(&self.stats_dir)) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for lane in &plan.lanes {
            let tokens = u64::from(lane.resolved.provider.max_tokens)
                + crate::usage::budget::QUESTION_TOKENS;
            for m in &lane.models {
                let key = model_key(&lane.resolved.provider.name, m);
                let Some(e) = self.entries.get(&key) else {
                    continue;
                };
                let probe = if e.fresh { Probe::Fresh } else { Probe::Basic };
                if let Err(spent) =
                    e.budget
                        .admits_as(&[&route.budget, &probes.budget], tokens, probe, now)
                {
                    out.push(BudgetSkip {
                        model: key,
                        next: spent.resets_at,
                        why: spent.to_string(),
                        cadence: e.budget.cadence_words(),
                        capability: None,
                    });
                }
            }
        }
        out
    }

    /// A probe of `model` of `p` was answered (`answered`, with the
    /// response's `headers` when they are known) or not (it used no
    /// tokens). Limits the headers name are learned for route and later
    /// probes.
    pub fn answered(
        &self,
        p: &Resolved,
        model: &str,
        answered: bool,
        headers: Option<&reqwest::header::HeaderMap>,
    ) {
        let key = model_key(&p.provider.name, model);
        let Some(e) = self.entries.get(&key) else {
            return;
        };
        let reservation = lock(&self.reserved).remove(&key);
        let now = self.clock.now();
        if answered && headers.is_none() {
            return;
        }
        let result = ProbeUsage::update(&self.stats_dir, now, |usage| {
            if let Some(h) = headers {
                usage.budget.learn(&e.target, e.window, h, now);
            }
            if let Some(mut r) = reservation.filter(|_| !answered) {
                usage.budget.correct(&mut r, 0);
            }
        });
        if let Err(err) = result {
            tracing::warn!(%err, "check: a probe's usage could not be updated");
        }
    }

    /// Count `extra` requests of `model` of `p` that went beside an
    /// admitted probe (a streamed probe its provider refused, sent again
    /// unstreamed): every request to a provider counts, and these have
    /// gone, so no limit stops them. They used no tokens.
    pub fn count_extra(&self, p: &Resolved, model: &str, extra: u32) {
        let Some(e) = self.entries.get(&model_key(&p.provider.name, model)) else {
            return;
        };
        let now = self.clock.now();
        let req = LimitRequest {
            target: &e.target,
            limits: &e.limits,
            tokens: 0,
        };
        let result = ProbeUsage::update(&self.stats_dir, now, |usage| {
            for _ in 0..extra {
                usage.budget.count_sent(&req, now);
            }
        });
        if let Err(err) = result {
            tracing::warn!(%err, "check: a probe's second request could not be counted");
        }
    }

    /// The probes the allowance stopped at send time.
    pub fn spent(&self) -> Vec<BudgetSkip> {
        lock(&self.spent).clone()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How far back the log is read for a model's last probe: a model not
/// probed for longer is probed as if never.
const LOOK_BACK: chrono::TimeDelta = chrono::TimeDelta::days(8);

/// Each model's last basic probe in the log at `log`, for `keys`, within
/// [`LOOK_BACK`] of `now`.
pub fn last_probes(
    log: &std::path::Path,
    keys: &[String],
    now: DateTime<Utc>,
) -> Result<HashMap<String, DateTime<Utc>>> {
    let wanted: Vec<&str> = keys.iter().map(String::as_str).collect();
    let since = (now - LOOK_BACK).timestamp();
    let lasts = crate::healthlog::last::last_probes(log, &wanted, Some(since))?;
    Ok(keys
        .iter()
        .filter_map(|k| Some((k.clone(), DateTime::from_timestamp(lasts.get(k)?.ts, 0)?)))
        .collect())
}
