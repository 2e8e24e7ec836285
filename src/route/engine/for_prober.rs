//! What `route --serve`'s re-prober ([`crate::route::prober`]) asks of
//! the engine: a key to probe a model with, a place inside the limits as
//! a routed request would take one, the heuristic benches of active
//! models, and the lifting of one of them. What only the ledger answers
//! (the key, the lifting, a probe that got no answer) is on
//! [`super::Ledger`]; what also needs the clock or the record is here.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::catalog::{ApiKey, Resolved};
use crate::route::cooldown::{Bench, Target};
use crate::route::shared::Admit;
use crate::state::ModelState;
use crate::usage::budget::Budget;
use crate::usage::limits::{self, LimitRequest, Reservation};

use super::{Engine, targets};

/// A heuristic bench of an active model that is due for its one early
/// probe: the provider, the model, the key to probe it with (`None` for
/// a keyless provider) and the bench.
#[derive(Debug, Clone)]
pub struct DueBench {
    pub provider: Arc<Resolved>,
    pub model: String,
    pub key: Option<ApiKey>,
    pub bench: Bench,
}

impl Engine {
    /// Count a probe of `model` on `target` (of `tokens` tokens) against
    /// the limits, as a routed request is counted before it is sent, in
    /// the shared store when there is one. `Err` says why it may not go
    /// now (a limit is full, or, unless `of_bench`, another instance
    /// benched the target); the caller gives the slot up rather than wait.
    /// `of_bench`: the probe is of the target's bench, which must not stop
    /// it.
    pub async fn admit_probe(
        &self,
        p: &Resolved,
        model: &str,
        target: &Target,
        tokens: u64,
        of_bench: bool,
    ) -> Result<Reservation, String> {
        let now = self.clock.now();
        let eff = limits::effective(&p.provider, model);
        let req = LimitRequest {
            target,
            limits: &eff,
            tokens,
        };
        // Inside the probe budget first: what every probe may spend of
        // the day's limits, `check`'s probes counted too. Shared, the counts are every instance's and `check
        // --shared-state`'s, in Redis; else this instance's and the file's.
        let check = self.ledger.check_probes.current();
        let redis = match self.ledger.shared() {
            Some(s) => s.usage_of(target, &eff, now).await.ok().map(|(all, _)| all),
            None => None,
        };
        {
            let st = self.ledger.lock();
            let seen: Vec<&crate::usage::LimitLedger> = match &redis {
                Some(all) => vec![all],
                None => vec![&st.limits, &check.budget],
            };
            let states = self.record.states.current();
            let sharing = crate::usage::budget::sharing(&p.provider, |k| {
                states.state_of(k) == ModelState::Disabled
            });
            let budget = Budget::of(&p.provider, model, target, sharing, &seen);
            if let Err(spent) = budget.admits(&seen, tokens, now) {
                return Err(format!("probe budget spent: {spent}"));
            }
        }
        let admitted = match self.ledger.shared() {
            Some(s) if of_bench => s.admit_limits(&req, now).await.ok(),
            Some(s) => s.admit(&req, now).await.ok(),
            None => None,
        };
        let checked = match admitted {
            Some(Admit::Benched(b)) => {
                self.ledger.lock().cooldowns.insert(b.clone(), now);
                return Err(format!("benched ({})", b.reason));
            }
            Some(Admit::Limited(hit)) => Err(hit),
            Some(Admit::Counted(r)) => {
                {
                    let mut st = self.ledger.lock();
                    let _ = st.limits.check_and_count(&req, now);
                    let _ = st.probe_budget.check_and_count(&req, now);
                }
                // Its part as a probe, in Redis beside the total.
                if let Some(s) = self.ledger.shared().cloned() {
                    let (t, l) = (target.clone(), eff);
                    tokio::spawn(async move { s.count_probe_part(&t, &l, tokens, now).await });
                }
                Ok(r)
            }
            None => {
                let mut st = self.ledger.lock();
                let r = st.limits.check_and_count_with(&req, &[&check.budget], now);
                if r.is_ok() {
                    let _ = st.probe_budget.check_and_count(&req, now);
                }
                r
            }
        };
        match checked {
            Ok(r) => {
                let spent = &mut self.ledger.lock().probe_spent;
                crate::usage::spend(spent, &p.provider.name, tokens, now);
                self.ledger.mark_dirty();
                Ok(r)
            }
            Err(hit) => Err(format!(
                "{} full until {}",
                hit.scope,
                crate::time::format_ts(hit.until)
            )),
        }
    }

    /// Count a request already sent for a probe of `model` on `target`
    /// (a stream the provider refused, sent again unstreamed): it used no
    /// tokens, and it went whatever the limits say now, so it is counted
    /// without a check, in this instance's windows and probe spend. With
    /// shared state it is counted in Redis too where the limits let it
    /// (the shared store has no count without a check).
    pub async fn count_sent_probe(&self, p: &Resolved, model: &str, target: &Target) {
        let now = self.clock.now();
        let eff = limits::effective(&p.provider, model);
        let req = LimitRequest {
            target,
            limits: &eff,
            tokens: 0,
        };
        if let Some(s) = self.ledger.shared()
            && !matches!(s.admit_limits(&req, now).await, Ok(Admit::Counted(_)))
        {
            tracing::info!(model = %crate::catalog::model_key(&p.provider.name, model), "a probe's second request is counted here only: the shared limits are full");
        }
        {
            let mut st = self.ledger.lock();
            st.limits.count_sent(&req, now);
            st.probe_budget.count_sent(&req, now);
            crate::usage::spend(&mut st.probe_spent, &p.provider.name, 0, now);
        }
        self.ledger.mark_dirty();
    }

    /// The heuristic benches ([`Bench::probe_due`]) of active models that
    /// this instance holds at `now` and `tried` has not seen, each once,
    /// with a key it covers; and those of them no active model of this
    /// instance is kept out by (the caller need not look at them again).
    ///
    /// Cheap when nothing is due: one pass over the benches in force under
    /// the request lock, allocating nothing. Only a due bench not yet tried
    /// is mapped back to its provider's models and keys.
    pub fn due_benches(
        &self,
        now: DateTime<Utc>,
        tried: impl Fn(&Bench) -> bool,
    ) -> (Vec<DueBench>, Vec<Bench>) {
        let due: Vec<Bench> = {
            let st = self.ledger.lock();
            st.cooldowns
                .active(now)
                .filter(|b| b.probe_due(now) && !tried(b))
                .cloned()
                .collect()
        };
        if due.is_empty() {
            return (Vec::new(), Vec::new());
        }
        let snapshot = self.record.states.current();
        let (mut out, mut unmatched) = (Vec::new(), Vec::new());
        for b in due {
            // The provider a bench id starts with: `p`, `p#key…`, `p::m`.
            let provider = b.target.split(['#', ':']).next().unwrap_or_default();
            let found = self
                .providers
                .iter()
                .filter(|p| p.provider.name == provider)
                .find_map(|p| self.covered_by(p, &b, &snapshot, now));
            match found {
                Some(d) => out.push(d),
                None => unmatched.push(b),
            }
        }
        (out, unmatched)
    }

    /// The first active model of `p`, on the first key, that `b` keeps out
    /// (it is the bench [`crate::route::cooldown::Cooldowns::blocked`]
    /// names for it at `now`).
    fn covered_by(
        &self,
        p: &Arc<Resolved>,
        b: &Bench,
        snapshot: &crate::state::Snapshot,
        now: DateTime<Utc>,
    ) -> Option<DueBench> {
        for m in &p.provider.models {
            if snapshot.state_of(&crate::catalog::model_key(&p.provider.name, m))
                != ModelState::Active
            {
                continue;
            }
            let keys: Vec<Option<ApiKey>> = if p.keys.is_empty() {
                vec![None]
            } else {
                p.keys.iter().cloned().map(Some).collect()
            };
            let st = self.ledger.lock();
            for (k, t) in keys.into_iter().zip(targets(p, m)) {
                if st
                    .cooldowns
                    .blocked(&t, now)
                    .is_some_and(|x| x.target == b.target)
                {
                    return Some(DueBench {
                        provider: p.clone(),
                        model: m.clone(),
                        key: k,
                        bench: b.clone(),
                    });
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;
    use crate::catalog::{Catalog, test_table};
    use crate::clock::Clock;
    use crate::route::cooldown::Scope;

    fn catalog() -> String {
        test_table("a", &["m", "n"], "") + &test_table("b", &["m"], "")
    }

    fn bench(target: &str, scope: Scope, now: DateTime<Utc>, heuristic: bool) -> Bench {
        Bench {
            target: target.to_string(),
            scope,
            until: now + TimeDelta::minutes(5),
            reason: "rate_limit".into(),
            set_at: now - TimeDelta::minutes(6),
            heuristic,
        }
    }

    #[test]
    fn only_due_untried_benches_are_mapped_back_and_the_unmatched_are_named() {
        let dir = tempfile::tempdir().unwrap();
        // a::n is paused: a bench on it keeps no active model out.
        std::fs::write(
            dir.path().join(crate::settings::STATE_FILE),
            r#"{"a::n": {"state": "paused", "reason": "timeout", "since": "2026-01-01T00:00:00Z", "consecutive_failures": 1}}"#,
        )
        .unwrap();
        let catalog = Catalog::from_toml_str(&catalog(), "test.toml").unwrap();
        let engine = Engine::new(
            &catalog,
            catalog.route.clone(),
            dir.path().to_path_buf(),
            crate::upstream::http::client().unwrap(),
            Clock::with_offset_file(dir.path().join("clock")),
        )
        .unwrap();
        let now = engine.clock.now();
        assert_eq!(engine.due_benches(now, |_| false).0.len(), 0, "no bench");
        {
            let mut st = engine.ledger.lock();
            st.cooldowns
                .insert(bench("a::m", Scope::Model, now, true), now);
            st.cooldowns
                .insert(bench("a::n", Scope::Model, now, true), now);
            st.cooldowns
                .insert(bench("b", Scope::Provider, now, true), now);
            // The upstream's own wait, shorter than the provider's bench:
            // never probed early, and not what keeps b::m out.
            let mut timed = bench("b::m", Scope::Model, now, false);
            timed.until = now + TimeDelta::minutes(2);
            st.cooldowns.insert(timed, now);
        }
        let (due, unmatched) = engine.due_benches(now, |_| false);
        let mut got: Vec<(String, String)> = due
            .iter()
            .map(|d| {
                (
                    d.bench.target.clone(),
                    crate::catalog::model_key(&d.provider.provider.name, &d.model),
                )
            })
            .collect();
        got.sort();
        assert_eq!(
            got,
            [("a::m".into(), "a::m".into()), ("b".into(), "b::m".into())]
        );
        assert_eq!(
            unmatched
                .iter()
                .map(|b| b.target.as_str())
                .collect::<Vec<_>>(),
            ["a::n"]
        );
        // Those tried are not looked at again.
        let (due, unmatched) = engine.due_benches(now, |b| b.target != "b");
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].bench.target, "b");
        assert!(unmatched.is_empty());
    }
}
