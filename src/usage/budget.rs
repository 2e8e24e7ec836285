//! The probe budget: how much of a provider's daily allowance probing may
//! spend, and so how often each model is probed.
//!
//! For each daily limit known on a probe of a model (its `rpd` or `tpd` per
//! key and model, its key's `key_limits`, the provider's `daily_cap`;
//! configured, from the catalog, or learned from rate-limit headers), with
//! `share` the provider's `probe_share` (0.1 unless set):
//!
//! ```text
//! allowance = max(1, floor(share × limit))
//! ```
//!
//! A probe may go only while, for every such limit, the day's use by
//! everything llmprobe sent (probes and routed requests, [`super`]) is
//! below the allowance: the rest of the day, `limit − allowance`, is
//! reserved for traffic, and once the remaining requests are at or below
//! that reserve no probe goes until the day resets. Tokens the same way: a
//! probe's estimated tokens must fit under `max(1, floor(share × tpd))`.
//!
//! **Cadence.** A model's basic probe is due once per slot, where
//!
//! ```text
//! probes per day = min over its daily request limits of allowance ÷ models sharing it
//! slot           = 24 h ÷ probes per day
//! ```
//!
//! and slots start at the provider's `day_reset` (00:00 UTC unless set):
//! 20 requests a day and 0.1 give 2 probes a day, one in each 12 h slot
//! (00:00 and 12:00), however often `check` runs. A model with no daily
//! limit known has no slot: it is probed every run.
//!
//! Nothing here reads the clock or a file.

use chrono::{DateTime, NaiveTime, TimeDelta, Utc};
use serde::Serialize;

use super::LimitLedger;
use super::limits::{self, LimitKind, next_day_reset};
use super::target::Target;
use crate::catalog::Provider;

/// About the tokens of a probe's question, for the estimate a probe is
/// counted with before it is answered.
pub const QUESTION_TOKENS: u64 = 32;

/// `max(1, floor(share × limit))`: what probing may use of a daily limit.
pub fn allowance(share: f64, limit: u64) -> u64 {
    ((share * limit as f64).floor() as u64).max(1)
}

/// What kind of probe asks the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// A basic probe of a model probed before.
    Basic,
    /// A basic probe of a model never probed.
    Fresh,
    /// A capability probe.
    Capability,
}

/// One daily limit a probe of a model counts against.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Daily {
    /// The scope it counts in (as in `route --status`).
    pub scope: String,
    /// `rpd`, `tpd` or `daily_cap`.
    pub kind: LimitKind,
    pub limit: u64,
    /// What probing may use of it a day.
    pub allowance: u64,
    /// How many of the provider's probed models share it.
    pub sharing: usize,
    /// From rate-limit headers, tighter than anything configured.
    pub learned: bool,
}

impl Daily {
    fn counts_requests(&self) -> bool {
        self.kind != LimitKind::Tpd
    }
}

/// A model's probe budget: the daily limits on its probes, and the slot
/// its basic probe is due in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Budget {
    pub dailies: Vec<Daily>,
    /// Basic probes a day; `None` when no daily request limit is known
    /// (probed every run).
    pub per_day: Option<f64>,
    #[serde(skip)]
    pub day_reset: NaiveTime,
}

impl Budget {
    /// The budget of `model` of `p`, probed with `target` (the key probes
    /// use), `sharing` models of the provider being probed, with the limits
    /// any of `learned` learned. `share` is the provider's `probe_share`.
    pub fn of(
        p: &Provider,
        model: &str,
        target: &Target,
        sharing: usize,
        learned: &[&LimitLedger],
    ) -> Budget {
        let eff = limits::effective(p, model);
        let key_model = target.key_model_id();
        let dailies: Vec<Daily> = limits::limits_on(target, &eff, learned)
            .into_iter()
            .filter(|(_, kind, _, _)| {
                matches!(kind, LimitKind::Rpd | LimitKind::Tpd | LimitKind::DailyCap)
            })
            .map(|(scope, kind, limit, learned)| Daily {
                sharing: if scope == key_model {
                    1
                } else {
                    sharing.max(1)
                },
                allowance: allowance(p.probe_share, limit),
                scope,
                kind,
                limit,
                learned,
            })
            .collect();
        let per_day = dailies
            .iter()
            .filter(|d| d.counts_requests())
            .map(|d| d.allowance as f64 / d.sharing as f64)
            .min_by(f64::total_cmp);
        Budget {
            dailies,
            per_day,
            day_reset: p.day_reset,
        }
    }

    /// Whole slots a day, when at least one probe a day fits: `floor` of
    /// the probes a day, so that the slots of one day never ask for more
    /// than its allowance.
    fn slots_a_day(&self) -> Option<i64> {
        let per_day = self.per_day?;
        (per_day >= 1.0).then(|| (per_day.floor() as i64).clamp(1, 86_400))
    }

    /// Days a slot lasts when fewer than one probe a day fits (more models
    /// share a limit than its allowance): `ceil(1 ÷ probes a day)`.
    fn days_a_slot(&self) -> Option<i64> {
        let per_day = self.per_day?;
        (per_day < 1.0).then(|| (1.0 / per_day).ceil() as i64)
    }

    /// The length of a slot, when a daily limit is known.
    pub fn slot(&self) -> Option<TimeDelta> {
        match (self.slots_a_day(), self.days_a_slot()) {
            (Some(n), _) => Some(TimeDelta::milliseconds(86_400_000 / n)),
            (_, Some(d)) => Some(TimeDelta::days(d)),
            _ => None,
        }
    }

    /// The slot that holds `now`: its start and its end (the next slot's
    /// start). A day (from the provider's `day_reset` to the next) holds a
    /// whole number of slots, the first at the reset: 2 a day fall at the
    /// reset and 12 h after it. A slot of several days starts at a reset
    /// counted from 1970-01-01.
    pub fn slot_at(&self, now: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
        let day_end = next_day_reset(now, self.day_reset);
        let day_start = day_end - TimeDelta::days(1);
        if let Some(n) = self.slots_a_day() {
            let len = 86_400_000 / n;
            let idx = ((now - day_start).num_milliseconds() / len).min(n - 1);
            let start = day_start + TimeDelta::milliseconds(idx * len);
            let end = match idx + 1 == n {
                true => day_end,
                false => start + TimeDelta::milliseconds(len),
            };
            return Some((start, end));
        }
        let days = self.days_a_slot()?;
        let anchor = DateTime::<Utc>::UNIX_EPOCH
            .date_naive()
            .and_time(self.day_reset)
            .and_utc();
        let idx = (day_start - anchor).num_days().div_euclid(days);
        let start = anchor + TimeDelta::days(idx * days);
        Some((start, start + TimeDelta::days(days)))
    }

    /// The basic probes the slots still hold today after the one that
    /// holds `now`, for the other models sharing a limit: what a
    /// capability probe must leave of the allowance. A model's capability
    /// probe comes out of its own share: it may take the place of its own
    /// next basic probe, never of another model's.
    fn basic_still_due(&self, d: &Daily, now: DateTime<Utc>) -> u64 {
        let Some(n) = self.slots_a_day() else {
            return 0;
        };
        let day_start = next_day_reset(now, self.day_reset) - TimeDelta::days(1);
        let len = 86_400_000 / n;
        let idx = ((now - day_start).num_milliseconds() / len).min(n - 1);
        ((n - 1 - idx) as u64).saturating_mul(d.sharing.saturating_sub(1) as u64)
    }

    /// Whether a basic probe is due at `now`, the last one having been
    /// at `last` (`None`: never): always without a slot; else when the
    /// last probe is before the current slot. `Err` carries when the next
    /// slot starts.
    pub fn due(
        &self,
        last: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Result<(), DateTime<Utc>> {
        match (self.slot_at(now), last) {
            (Some((start, end)), Some(last)) if last >= start => Err(end),
            _ => Ok(()),
        }
    }

    /// Whether a probe of `tokens` estimated tokens may go now, the day's
    /// use being what `all` counted (every ledger: routed requests and
    /// probes). `Err` names the limit whose allowance is spent.
    pub fn admits(
        &self,
        all: &[&LimitLedger],
        tokens: u64,
        now: DateTime<Utc>,
    ) -> Result<(), Spent> {
        self.admits_as(all, tokens, Probe::Basic, now)
    }

    /// [`admits`](Budget::admits), for each kind of probe ([`Probe`]): in a
    /// limit several models share, a model never probed may only take the
    /// first half of the allowance (`max(1, allowance ÷ 2)`), so a long list
    /// of new models never starves the models in use; a capability probe
    /// comes last, and may only take what the other models' basic probes
    /// still due today leave.
    pub fn admits_as(
        &self,
        all: &[&LimitLedger],
        tokens: u64,
        probe: Probe,
        now: DateTime<Utc>,
    ) -> Result<(), Spent> {
        let fresh = probe == Probe::Fresh;
        let resets_at = next_day_reset(now, self.day_reset);
        for d in &self.dailies {
            let used = all
                .iter()
                .map(|l| l.used_here(&d.scope, d.kind, now, resets_at))
                .fold(0, u64::saturating_add);
            let cost = if d.counts_requests() { 1 } else { tokens };
            let allowance = match fresh && d.sharing > 1 {
                true => (d.allowance / 2).max(1),
                false => d.allowance,
            };
            let reserve = match probe == Probe::Capability && d.counts_requests() {
                true => self.basic_still_due(d, now),
                false => 0,
            };
            if used.saturating_add(cost).saturating_add(reserve) > allowance {
                let mut daily = d.clone();
                daily.allowance = allowance;
                return Err(Spent {
                    daily,
                    used,
                    resets_at,
                    fresh: allowance < d.allowance,
                });
            }
        }
        Ok(())
    }

    /// "probed every 12 h: 20 requests/day, probes use 2", or `None`
    /// without a daily limit.
    pub fn cadence_words(&self) -> Option<String> {
        let slot = self.slot()?;
        let d = self
            .dailies
            .iter()
            .filter(|d| d.counts_requests())
            .min_by(|a, b| {
                (a.allowance as f64 / a.sharing as f64)
                    .total_cmp(&(b.allowance as f64 / b.sharing as f64))
            })?;
        let shared = if d.sharing > 1 {
            format!(", shared by {} models", d.sharing)
        } else {
            String::new()
        };
        Some(format!(
            "probed every {}: {} requests/day{shared}, probes use {}",
            crate::duration::format(slot.num_seconds().max(0) as u64),
            d.limit,
            d.allowance
        ))
    }
}

/// How many of `p`'s models share its key and provider limits: its
/// catalog models that are not disabled (`disabled` says which are). One
/// count for every view and for `check` and route alike, whatever a run's
/// `--model` picks.
pub fn sharing(p: &Provider, disabled: impl Fn(&str) -> bool) -> usize {
    p.models
        .iter()
        .filter(|m| !disabled(&crate::catalog::model_key(&p.name, m)))
        .count()
        .max(1)
}

/// The budget of `model` of `p` by the catalog alone (no learned limits),
/// `models` of the provider being probed: what the views that read no
/// ledger (`brief`, `state`, the status page, staleness) show and judge by.
pub fn by_catalog(p: &Provider, model: &str, models: usize) -> Budget {
    Budget::of(p, model, &Target::new(&p.name, model), models, &[])
}

/// How often the most often probed of `models` (the provider's models
/// still probed) is probed by its budget: `None` when one of them has no
/// daily limit known, and is probed every run.
pub fn provider_interval(p: &Provider, models: &[&str]) -> Option<TimeDelta> {
    models
        .iter()
        .map(|m| by_catalog(p, m, models.len()).slot())
        .try_fold(None::<TimeDelta>, |least, slot| {
            let slot = slot?;
            Some(Some(least.map_or(slot, |l| l.min(slot))))
        })
        .flatten()
}

/// A daily allowance spent: no probe until `resets_at`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spent {
    pub daily: Daily,
    /// Used today, by probes and traffic together.
    pub used: u64,
    pub resets_at: DateTime<Utc>,
    /// The half a model never probed may take was the limit.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fresh: bool,
}

impl std::fmt::Display for Spent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let who = if self.fresh {
            "models never probed"
        } else {
            "probes"
        };
        write!(
            f,
            "{} {} of {} used today, {who} may use {}",
            self.daily.kind, self.used, self.daily.limit, self.daily.allowance
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Limits;
    use crate::usage::limits::{EffectiveLimits, LimitRequest};

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn provider(limits: Limits, key: Limits, cap: Option<u64>, models: &[&str]) -> Provider {
        let toml = format!(
            "include_default_catalog = false\n{}",
            crate::catalog::test_table("p", models, "")
        );
        let mut p = crate::catalog::Catalog::from_toml_str(&toml, "test.toml")
            .unwrap()
            .providers
            .remove(0);
        p.limits = limits;
        p.key_limits = key;
        p.daily_cap = cap;
        p
    }

    /// Count `n` requests of `t` under `limits` in `ledger` at `now`.
    fn spend(
        ledger: &mut LimitLedger,
        t: &Target,
        limits: EffectiveLimits,
        n: usize,
        now: DateTime<Utc>,
    ) {
        let req = LimitRequest {
            target: t,
            limits: &limits,
            tokens: 10,
        };
        for _ in 0..n {
            ledger.check_and_count(&req, now).unwrap();
        }
    }

    fn rpd(n: u64) -> Limits {
        Limits {
            rpd: Some(n),
            ..Limits::default()
        }
    }

    #[test]
    fn the_allowance_is_a_floor_share_but_never_zero() {
        assert_eq!(allowance(0.1, 20), 2);
        assert_eq!(allowance(0.1, 50), 5);
        assert_eq!(allowance(0.1, 5), 1);
        assert_eq!(allowance(0.1, 14_400), 1440);
        assert_eq!(allowance(1.0, 7), 7);
    }

    #[test]
    fn twenty_a_day_gives_two_probes_twelve_hours_apart() {
        let p = provider(rpd(20), Limits::default(), None, &["m"]);
        let t = Target::new("p", "m").with_key(0, "k1:ab");
        let b = Budget::of(&p, "m", &t, 1, &[]);
        assert_eq!(b.per_day, Some(2.0));
        assert_eq!(b.slot(), Some(TimeDelta::hours(12)));
        // Due at the first run of a slot, not at the next two.
        assert_eq!(
            b.due(Some(at("2026-12-06T23:00:00Z")), at("2026-12-07T00:05:00Z")),
            Ok(())
        );
        let last = at("2026-12-07T00:05:00Z");
        assert_eq!(
            b.due(Some(last), at("2026-12-07T01:05:00Z")),
            Err(at("2026-12-07T12:00:00Z"))
        );
        assert_eq!(
            b.due(Some(last), at("2026-12-07T11:59:00Z")),
            Err(at("2026-12-07T12:00:00Z"))
        );
        assert_eq!(b.due(Some(last), at("2026-12-07T12:00:00Z")), Ok(()));
        assert_eq!(b.due(None, at("2026-12-07T01:00:00Z")), Ok(()));
        assert_eq!(
            b.cadence_words().as_deref(),
            Some("probed every 12h: 20 requests/day, probes use 2")
        );
    }

    #[test]
    fn a_key_limit_is_shared_by_the_models_under_it() {
        let p = provider(Limits::default(), rpd(50), None, &["a", "b", "c"]);
        let t = Target::new("p", "a").with_key(0, "k1:ab");
        let b = Budget::of(&p, "a", &t, 3, &[]);
        assert_eq!(b.dailies[0].allowance, 5);
        assert_eq!(b.dailies[0].sharing, 3);
        // 5 ÷ 3 a day: one whole slot a day each, so a day never asks
        // for more than its allowance.
        assert_eq!(b.slot(), Some(TimeDelta::hours(24)));
        // Ten models under the same 5: one probe every 2 days each.
        let p = provider(Limits::default(), rpd(50), None, &["a"; 10]);
        let b = Budget::of(&p, "a", &t, 10, &[]);
        assert_eq!(b.slot(), Some(TimeDelta::days(2)));
        let now = at("2026-12-07T10:00:00Z");
        let (start, end) = b.slot_at(now).unwrap();
        assert_eq!(end - start, TimeDelta::days(2));
        assert!(start <= now && now < end);
    }

    #[test]
    fn a_capability_probe_leaves_what_the_other_models_basic_probes_need() {
        // 12 a day for three models: 4 each, in 6 h slots.
        let p = provider(
            Limits::default(),
            Limits::default(),
            Some(120),
            &["a", "b", "c"],
        );
        let t = Target::new("p", "a").with_key(0, "k1:ab");
        let b = Budget::of(&p, "a", &t, 3, &[]);
        assert_eq!(b.slot(), Some(TimeDelta::hours(6)));
        let eff = EffectiveLimits {
            daily_cap: Some(120),
            ..EffectiveLimits::default()
        };
        let mut used = LimitLedger::default();
        spend(&mut used, &t, eff, 3, at("2026-12-07T00:10:00Z"));
        // 3 used at 00:30; b and c still have 3 slots each today: 3 + 1 +
        // 6 = 10 ≤ 12 fits; with 6 used it would not.
        let now = at("2026-12-07T00:30:00Z");
        assert_eq!(b.admits_as(&[&used], 10, Probe::Capability, now), Ok(()));
        spend(&mut used, &t, eff, 3, at("2026-12-07T00:10:00Z"));
        assert!(b.admits_as(&[&used], 10, Probe::Capability, now).is_err());
        assert_eq!(b.admits_as(&[&used], 10, Probe::Basic, now), Ok(()));
        // In the last slot, nothing more is due: it fits.
        let late = at("2026-12-07T18:30:00Z");
        assert_eq!(b.admits_as(&[&used], 10, Probe::Capability, late), Ok(()));
    }

    #[test]
    fn no_daily_limit_means_every_run() {
        let p = provider(
            Limits {
                rpm: Some(10),
                ..Limits::default()
            },
            Limits::default(),
            None,
            &["m"],
        );
        let t = Target::new("p", "m");
        let b = Budget::of(&p, "m", &t, 1, &[]);
        assert_eq!(b.per_day, None);
        assert_eq!(
            b.due(Some(at("2026-12-07T00:59:00Z")), at("2026-12-07T01:00:00Z")),
            Ok(())
        );
        assert!(b.cadence_words().is_none());
    }

    #[test]
    fn a_probe_stops_once_the_days_use_reaches_the_allowance() {
        let p = provider(rpd(20), Limits::default(), Some(100), &["m"]);
        let t = Target::new("p", "m").with_key(0, "k1:ab");
        let b = Budget::of(&p, "m", &t, 1, &[]);
        let now = at("2026-12-07T10:00:00Z");
        let mut traffic = LimitLedger::default();
        let probes = LimitLedger::default();
        assert_eq!(b.admits(&[&traffic, &probes], 20, now), Ok(()));
        let eff = EffectiveLimits {
            model: rpd(20),
            daily_cap: Some(100),
            ..EffectiveLimits::default()
        };
        let req = LimitRequest {
            target: &t,
            limits: &eff,
            tokens: 10,
        };
        traffic.check_and_count(&req, now).unwrap();
        assert_eq!(b.admits(&[&traffic, &probes], 20, now), Ok(()));
        traffic.check_and_count(&req, now).unwrap();
        // 2 of 20 used: 18 left, which is what traffic keeps.
        let spent = b.admits(&[&traffic, &probes], 20, now).unwrap_err();
        assert_eq!(spent.daily.kind, LimitKind::Rpd);
        assert_eq!((spent.used, spent.daily.allowance), (2, 2));
        assert_eq!(spent.resets_at, at("2026-12-08T00:00:00Z"));
        assert_eq!(
            spent.to_string(),
            "rpd 2 of 20 used today, probes may use 2"
        );
        // The next day, it may go again.
        assert_eq!(
            b.admits(&[&traffic, &probes], 20, at("2026-12-08T00:00:01Z")),
            Ok(())
        );
    }

    #[test]
    fn models_never_probed_take_at_most_half_of_a_shared_allowance() {
        let p = provider(Limits::default(), Limits::default(), Some(100), &["a", "b"]);
        let t = Target::new("p", "a").with_key(0, "k1:ab");
        let b = Budget::of(&p, "a", &t, 2, &[]);
        let now = at("2026-12-07T10:00:00Z");
        let mut used = LimitLedger::default();
        let eff = EffectiveLimits {
            daily_cap: Some(100),
            ..EffectiveLimits::default()
        };
        spend(&mut used, &t, eff, 5, now);
        // 5 of the allowance of 10 used: a model in use may go on, a new
        // one may not.
        assert_eq!(b.admits(&[&used], 20, now), Ok(()));
        let spent = b.admits_as(&[&used], 20, Probe::Fresh, now).unwrap_err();
        assert_eq!(spent.daily.allowance, 5);
        assert_eq!(
            spent.to_string(),
            "daily_cap 5 of 100 used today, models never probed may use 5"
        );
    }

    #[test]
    fn a_learned_daily_limit_counts_too() {
        let p = provider(Limits::default(), Limits::default(), None, &["m"]);
        let t = Target::new("p", "m").with_key(0, "k1:ab");
        let mut learned = LimitLedger::default();
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("x-ratelimit-limit-requests", "30".parse().unwrap());
        headers.insert("x-ratelimit-remaining-requests", "29".parse().unwrap());
        learned.learn(
            &t,
            crate::catalog::RequestsWindow::Day,
            &headers,
            at("2026-12-07T00:00:00Z"),
        );
        let b = Budget::of(&p, "m", &t, 1, &[&learned]);
        assert_eq!(b.per_day, Some(3.0));
        assert!(b.dailies[0].learned);
    }
}
