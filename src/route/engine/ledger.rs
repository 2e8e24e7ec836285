//! The engine's ledger: what this instance holds against upstreams. The
//! route state (benches, the limit counts, the capability marks upstreams
//! gave), whether it changed since it was saved, and Redis when instances
//! share it (`--shared-state`), where the in-process state is kept too, as
//! the fallback while Redis is away.
//!
//! The ledger never reads the clock or knows the stats directory: the
//! engine passes `now` and the directory in.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{DateTime, Utc};

use crate::catalog::{ApiKey, Resolved};
use crate::error::Result;
use crate::route::cooldown::{Bench, Cooldowns, Decision, Target};
use crate::route::persist::{self, RouteState};
use crate::route::shared::SharedState;
use crate::state::Watcher;
use crate::upstream::classify::UpstreamError;
use crate::usage::ProbeUsage;
use crate::usage::limits::Reservation;

use super::{lock, targets};

/// The route state as saved, its change flag, and the shared store.
pub struct Ledger {
    /// The route state: benches and the limit ledger, as saved. In an
    /// `Arc` so that a failure recorded off the request path can hold it.
    state: Arc<Mutex<RouteState<Cooldowns>>>,
    dirty: AtomicBool,
    /// Woken at each change, for the debounced saver.
    pub changed: tokio::sync::Notify,
    /// Redis, when instances share their state (`--shared-state`).
    shared: Option<Arc<SharedState>>,
    /// `check`'s probes (`stats/probe_usage.json`), watched: counted with
    /// this instance's own in every limit and view ([`crate::usage`]).
    pub check_probes: Arc<Watcher<ProbeUsage>>,
}

impl Ledger {
    /// A ledger holding `saved`, with nothing changed yet, watching the
    /// probes `check` counts in `stats_dir`. A probe file that cannot be
    /// read is a warning: route goes on without its counts.
    pub(super) fn new(saved: RouteState<Cooldowns>, stats_dir: &Path) -> Ledger {
        let (check_probes, problem) = Watcher::open_lenient(&ProbeUsage::path(stats_dir));
        if let Some(e) = problem {
            eprintln!("warning: {e}; routing goes on without the probes' counts");
        }
        Ledger {
            state: Arc::new(Mutex::new(saved)),
            dirty: AtomicBool::new(false),
            changed: tokio::sync::Notify::new(),
            shared: None,
            check_probes: Arc::new(check_probes),
        }
    }

    /// A routed request to `model` succeeded or (with its failure
    /// class) failed at `now`: traffic evidence for `check`
    /// ([`crate::usage::traffic`]).
    pub(super) fn traffic(&self, model: &str, failed: Option<&str>, now: DateTime<Utc>) {
        {
            let mut st = self.lock();
            match failed {
                None => st.traffic.success(model, now),
                Some(class) => st.traffic.failure(model, class, now),
            }
        }
        self.mark_dirty();
        if let Some(s) = self.shared.clone() {
            let (model, failed) = (model.to_string(), failed.map(str::to_string));
            tokio::spawn(async move { s.traffic(&model, failed.as_deref(), now).await });
        }
    }

    /// Share through `shared`: the in-process state starts empty and is
    /// only the fallback while Redis is away.
    pub(super) fn share(&mut self, shared: Arc<SharedState>) {
        self.state = Arc::new(Mutex::new(RouteState::default()));
        self.shared = Some(shared);
    }

    /// The shared store, if any.
    pub fn shared(&self) -> Option<&Arc<SharedState>> {
        self.shared.as_ref()
    }

    /// This instance's own state, locked (keep it short: every request
    /// takes the same lock).
    pub(super) fn lock(&self) -> MutexGuard<'_, RouteState<Cooldowns>> {
        lock(&self.state)
    }

    /// Look at this instance's own state (for a status view; keep it short:
    /// requests wait for the same lock).
    pub fn with_local_state<T>(&self, f: impl FnOnce(&RouteState<Cooldowns>) -> T) -> T {
        f(&self.lock())
    }

    pub(super) fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::Release);
        self.changed.notify_one();
    }

    /// Save the route state into `dir` if it changed since the last save
    /// (never for a shared instance: its state is in Redis). A save that
    /// fails leaves it marked changed, so that the next save (at the next
    /// change, or at shutdown) tries again.
    pub(super) fn save_if_dirty(&self, dir: &Path, now: DateTime<Utc>) -> Result<()> {
        if !self.dirty.swap(false, Ordering::AcqRel) || self.shared.is_some() {
            return Ok(());
        }
        let snapshot = {
            let mut cd = self.lock();
            cd.cooldowns.prune(now);
            cd.verdicts.prune(now);
            cd.traffic.prune(now);
            cd.saved_at = Some(crate::time::format_ts(now));
            cd.clone()
        };
        persist::save(dir, &snapshot).inspect_err(|_| {
            self.dirty.store(true, Ordering::Release);
        })
    }

    /// Remember what a capability error said about model `key`, here and
    /// in the shared store.
    pub(super) fn learn_verdict(&self, key: String, err: &UpstreamError, now: DateTime<Utc>) {
        let Some(cap) = crate::upstream::classify::capability_of(err) else {
            return;
        };
        let made = self.lock().verdicts.learn(&key, cap, &err.message, now);
        let Some((name, v)) = made else {
            return;
        };
        tracing::debug!(model = %key, verdict = %name, until = %crate::time::format_ts(v.until), "route: learned what the model cannot take");
        self.mark_dirty();
        if let Some(s) = self.shared.clone() {
            tokio::spawn(async move { s.put_verdict(&key, &name, &v).await });
        }
    }

    /// Take in what other instances learned about models.
    pub(super) async fn sync_verdicts(&self, now: DateTime<Utc>) {
        let Some(s) = self.shared.clone() else {
            return;
        };
        if let Ok(found) = s.verdicts(now).await {
            let mut st = self.lock();
            for (model, name, v) in found.entries() {
                st.verdicts.insert(model, name, v.clone());
            }
        }
    }

    /// A stream that failed after its first byte: too late to fall over,
    /// but it counts against the model like any other failure.
    pub(super) fn record_late_failure(
        &self,
        target: &Target,
        err: UpstreamError,
        now: DateTime<Utc>,
    ) {
        if !err.class.is_capability() {
            self.traffic(&target.model_id(), Some(err.class.as_str()), now);
        }
        match self.shared.clone() {
            Some(s) if s.is_healthy() => {
                let (t, local) = (target.clone(), self.state.clone());
                tokio::spawn(async move { record_failure(Some(&s), &local, &t, &err, now).await });
            }
            _ => {
                self.lock().cooldowns.record_failure(target, &err, now);
            }
        }
        self.mark_dirty();
    }

    /// A failed attempt: counted and benched in the shared store when
    /// there is one (so every instance climbs one ladder), else locally.
    pub(super) async fn record_failure(
        &self,
        target: &Target,
        err: &UpstreamError,
        now: DateTime<Utc>,
    ) -> Decision {
        record_failure(self.shared.as_ref(), &self.state, target, err, now).await
    }

    /// Replace a stream's estimated tokens with what it reported using.
    pub fn correct_tokens(&self, reservation: &mut Reservation, used: u64) {
        if reservation.is_shared() {
            if let Some(s) = self.shared.clone() {
                let mut r = reservation.clone();
                tokio::spawn(async move { s.correct(&mut r, used).await });
            }
            reservation.set_tokens(used);
            return;
        }
        self.lock().limits.correct(reservation, used);
        self.mark_dirty();
    }

    /// The key to probe `model` of `p` with, and its target: the first
    /// of the provider's keys, in the order listed, that this instance
    /// does not bench at `now`; `None` when every one is benched. A
    /// keyless provider has one "key": none.
    pub fn probe_key(
        &self,
        p: &Resolved,
        model: &str,
        now: DateTime<Utc>,
    ) -> Option<(Option<ApiKey>, Target)> {
        let st = self.lock();
        let keys: Vec<Option<ApiKey>> = if p.keys.is_empty() {
            vec![None]
        } else {
            p.keys.iter().cloned().map(Some).collect()
        };
        keys.into_iter()
            .zip(targets(p, model))
            .find(|(_, t)| st.cooldowns.blocked(t, now).is_none())
    }

    /// A probe that got no answer uses no tokens: its reservation counts
    /// the request only.
    pub fn probe_unanswered(&self, mut r: Reservation) {
        if !r.counted() {
            return;
        }
        if r.is_shared() {
            if let Some(s) = self.shared.clone() {
                // The total, and the probes' part beside it.
                let scopes = r
                    .scopes()
                    .iter()
                    .map(|x| format!("{}{x}", crate::usage::PROBES))
                    .collect();
                let mut part =
                    Reservation::shared(r.second(), r.day_resets_at(), scopes, r.tokens());
                tokio::spawn(async move {
                    let _ = s.correct(&mut r, 0).await;
                    let _ = s.correct(&mut part, 0).await;
                });
            }
            return;
        }
        let mut st = self.lock();
        st.limits.correct(&mut r.clone(), 0);
        st.probe_budget.correct(&mut r, 0);
        drop(st);
        self.mark_dirty();
    }

    /// A probe of `b` passed: lift it here and in the shared store, and
    /// save the route state as after any change. The ladder stays as it
    /// is.
    pub async fn lift_bench(&self, b: &Bench) {
        if self.lock().cooldowns.lift(b) {
            self.mark_dirty();
        }
        if let Some(s) = &self.shared {
            let _ = s.unbench(b).await;
        }
    }
}

/// Count a failure (in Redis when shared and reachable), decide with the
/// rules of [`crate::route::cooldown`], and put the bench in force everywhere.
async fn record_failure(
    shared: Option<&Arc<SharedState>>,
    local: &Mutex<RouteState<Cooldowns>>,
    target: &Target,
    err: &UpstreamError,
    now: DateTime<Utc>,
) -> Decision {
    let count = match (shared, Cooldowns::counter(target, err)) {
        (Some(s), Some((counter, id, window))) => s.count(counter, &id, window, now).await.ok(),
        _ => None,
    };
    let mut decision = lock(local)
        .cooldowns
        .record_failure_counted(target, err, now, count);
    if let (Some(s), Some(b)) = (shared, &decision.bench)
        && let Ok(kept) = s.bench(b, now).await
    {
        decision.bench = Some(kept);
    }
    decision
}
