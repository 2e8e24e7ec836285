//! Request and token budgets for `route`: a candidate that would exceed a
//! limit is skipped (the trail says `limit:rpm` and so on), never sent.
//!
//! - **What is limited.** [`EffectiveLimits`], from the catalog: a model's
//!   `limits` (the provider's, overlaid by its `model_limits`) count per key
//!   and model, because free tiers are documented per model and per
//!   account, and each key is an account; `key_limits` count per key across
//!   its models; `daily_cap` counts requests across the whole provider.
//!   Scopes are named with [`Target`]'s ids: `key_model_id`, `key_id` and
//!   the provider name. For a keyless provider the key scope *is* the
//!   provider, as with cooldowns, and a request is counted there once.
//! - **Windows.** Per minute: a sliding 60 s window of per-second counts.
//!   Per day: counters that reset at the provider's `day_reset` (UTC
//!   midnight unless configured).
//! - **Tokens.** Before sending, a request counts as
//!   [`ChatRequest::estimated_tokens`](crate::upstream::dialect::ChatRequest::estimated_tokens):
//!   its characters / 4 plus `max_tokens` (or a default). [`LimitLedger::correct`]
//!   replaces the estimate with the upstream's `usage` once known, streams
//!   included.
//! - **Learned limits.** [`LimitLedger::learn`] reads `x-ratelimit-*` and
//!   `anthropic-ratelimit-*` headers into the key-and-model scope. A learned
//!   limit only tightens: the check uses the smaller of it and the
//!   configured one. A bucket whose `remaining` is 0 blocks until its reset.
//! - **All or nothing.** [`LimitLedger::check_and_count`] checks every limit and
//!   counts the request in every window only if all pass.
//!
//! [`LimitLedger`] is the persisted form (in `route_state.json`), so one-shot
//! calls and restarts respect the windows. Time is always passed in; nothing
//! here reads the clock.

use std::collections::{BTreeMap, VecDeque};

use chrono::{DateTime, NaiveTime, TimeDelta, Utc};
use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize};

use super::Target;
use crate::catalog::{Limits, Provider, RequestsWindow};
use crate::upstream::hints::MAX_WAIT;
use crate::upstream::hints::parse_reset;

/// The sliding window of per-minute limits.
pub const MINUTE: TimeDelta = TimeDelta::seconds(60);
const DAY: TimeDelta = TimeDelta::days(1);
/// How long a learned limit is trusted without being heard again, so a
/// tier the account has since left stops tightening anything.
pub const LEARNED_TTL: TimeDelta = TimeDelta::days(7);

/// Which limit a request would exceed.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantNames,
    strum::EnumIter,
)]
#[strum(serialize_all = "snake_case")]
pub enum LimitKind {
    Rpm,
    Rpd,
    Tpm,
    Tpd,
    DailyCap,
}

crate::names::serde_via_strum!(LimitKind);

impl LimitKind {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    fn per_minute(self) -> bool {
        matches!(self, LimitKind::Rpm | LimitKind::Tpm)
    }

    fn counts_tokens(self) -> bool {
        matches!(self, LimitKind::Tpm | LimitKind::Tpd)
    }
}

impl std::fmt::Display for LimitKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The configured limits that apply to one model of a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EffectiveLimits {
    /// Per key and model: the provider's `limits`, overlaid field by field
    /// by the model's `model_limits`.
    pub model: Limits,
    /// Per key, across the provider's models.
    pub key: Limits,
    /// Requests per day across the whole provider.
    pub daily_cap: Option<u64>,
    /// When day windows reset, as a UTC time of day.
    pub day_reset: NaiveTime,
}

impl EffectiveLimits {
    /// Whether nothing is configured (learned limits may still apply).
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.model.is_empty() && self.key.is_empty() && self.daily_cap.is_none()
    }
}

/// The limits of `model` on `provider`, from the catalog.
pub fn effective(provider: &Provider, model: &str) -> EffectiveLimits {
    let own = provider
        .model_limits
        .get(model)
        .copied()
        .unwrap_or_default();
    EffectiveLimits {
        model: provider.limits.overlaid(&own),
        key: provider.key_limits,
        daily_cap: provider.daily_cap,
        day_reset: provider.day_reset,
    }
}

/// The first instant after `now` at `reset` (UTC): when the day window
/// that holds `now` ends.
pub fn next_day_reset(now: DateTime<Utc>, reset: NaiveTime) -> DateTime<Utc> {
    let today = now.date_naive().and_time(reset).and_utc();
    if today > now { today } else { today + DAY }
}

/// One request about to be sent.
#[derive(Debug, Clone, Copy)]
pub struct LimitRequest<'a> {
    pub target: &'a Target,
    pub limits: &'a EffectiveLimits,
    /// The estimate: [`ChatRequest::estimated_tokens`](crate::upstream::dialect::ChatRequest::estimated_tokens).
    pub tokens: u64,
}

/// Why a candidate was skipped, and when it could pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitHit {
    pub kind: LimitKind,
    /// The scope whose window is full (`groq#key0:k1:…::model`, …).
    pub scope: String,
    /// When a retry of the same request could pass this limit: when enough
    /// of the minute window has slid out, the next day reset, or the reset
    /// of an exhausted upstream bucket. A request larger than a whole
    /// token window never passes; its `until` is when that window empties.
    pub until: DateTime<Utc>,
}

/// A counted request, for [`LimitLedger::correct`] once its usage is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    id: u64,
    /// The minute-window second it was counted in.
    second: DateTime<Utc>,
    day_resets_at: DateTime<Utc>,
    scopes: Vec<String>,
    tokens: u64,
    /// Counted in the shared store, not in this process's [`LimitLedger`].
    shared: bool,
}

impl Reservation {
    /// The tokens it counts now: the estimate until corrected.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// Whether any window counted it (no limit applies: nothing to save).
    pub fn counted(&self) -> bool {
        !self.scopes.is_empty()
    }

    /// A reservation counted by the shared store.
    pub fn shared(
        second: DateTime<Utc>,
        day_resets_at: DateTime<Utc>,
        scopes: Vec<String>,
        tokens: u64,
    ) -> Reservation {
        Reservation {
            id: 0,
            second,
            day_resets_at,
            scopes,
            tokens,
            shared: true,
        }
    }

    /// Whether the shared store counted it.
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// The minute-window second it was counted in.
    pub fn second(&self) -> DateTime<Utc> {
        self.second
    }

    /// The end of the day window it was counted in.
    pub fn day_resets_at(&self) -> DateTime<Utc> {
        self.day_resets_at
    }

    /// The scopes that counted it.
    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }

    /// Set the tokens it counts (the shared store corrected its windows).
    pub fn set_tokens(&mut self, tokens: u64) {
        self.tokens = tokens;
    }
}

/// The requests of one second in a minute window. Requests are counted
/// in the second they fall in, rounded up, so a window never lets one
/// slide out early; a window holds at most 61 entries however many
/// requests pass, so checking a limit and saving the budget stay cheap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MinuteEntry {
    pub at: DateTime<Utc>,
    #[serde(default = "one")]
    pub requests: u64,
    pub tokens: u64,
}

fn one() -> u64 {
    1
}

/// `t` rounded up to the whole second.
pub fn second_of(t: DateTime<Utc>) -> DateTime<Utc> {
    let floor = DateTime::<Utc>::from_timestamp(t.timestamp(), 0).unwrap_or(t);
    if floor == t {
        t
    } else {
        floor + chrono::TimeDelta::seconds(1)
    }
}

/// A day window's counts, for the day ending at `resets_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayCount {
    pub resets_at: DateTime<Utc>,
    pub requests: u64,
    pub tokens: u64,
}

/// The usage of one scope.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageWindow {
    /// Oldest first.
    #[serde(default, skip_serializing_if = "VecDeque::is_empty")]
    pub minute: VecDeque<MinuteEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub day: Option<DayCount>,
}

impl UsageWindow {
    fn in_minute(&self, now: DateTime<Utc>) -> impl Iterator<Item = &MinuteEntry> {
        self.minute
            .iter()
            // A second rounded up can lie just ahead of `now`: it counts.
            .filter(move |e| e.at + MINUTE > now)
    }

    fn day_counts(&self, resets_at: DateTime<Utc>) -> (u64, u64) {
        match &self.day {
            Some(d) if d.resets_at == resets_at => (d.requests, d.tokens),
            _ => (0, 0),
        }
    }

    /// Drop minute entries that have slid out (they are oldest first).
    fn slide(&mut self, now: DateTime<Utc>) {
        while self.minute.front().is_some_and(|e| e.at + MINUTE <= now) {
            self.minute.pop_front();
        }
    }

    fn prune(&mut self, now: DateTime<Utc>) {
        self.slide(now);
        if self.day.as_ref().is_some_and(|d| d.resets_at <= now) {
            self.day = None;
        }
    }

    fn is_empty(&self) -> bool {
        self.minute.is_empty() && self.day.is_none()
    }
}

/// What an upstream said about one of its buckets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Learned {
    pub kind: LimitKind,
    /// The bucket's size, when it is one this module enforces (Anthropic's
    /// separate input and output token buckets are not: the estimate
    /// covers both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_at: Option<DateTime<Utc>>,
    pub learned_at: DateTime<Utc>,
}

impl Learned {
    /// When this bucket blocks every request: it is spent and its reset
    /// has not come.
    fn blocked_until(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.reset_at
            .filter(|&at| self.remaining == Some(0) && at > now)
    }
}

/// Every usage window and learned limit: the persisted form, kept in
/// `route_state.json` under `budget`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitLedger {
    /// Scope id → usage.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub windows: BTreeMap<String, UsageWindow>,
    /// Key-and-model scope id → bucket name (`requests`, `tokens`,
    /// `input-tokens`, `requests-day`, …) → what the upstream said.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub learned: BTreeMap<String, BTreeMap<String, Learned>>,
    /// The id of the next reservation.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub next_id: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One limit on one scope.
struct Check {
    scope: String,
    kind: LimitKind,
    limit: u64,
    /// The limit is a learned one, tighter than any configured.
    learned: bool,
}

/// One line of [`LimitLedger::usage`]: a limit in force and how much of it is
/// used now, as status displays show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitUsage {
    /// The scope it counts in: `provider#key<i>:<fingerprint>::model`, a
    /// key, or the provider (`daily_cap`).
    pub scope: String,
    pub kind: LimitKind,
    /// Used by everything llmprobe sent: routed requests and probes.
    pub used: u64,
    /// The probes' part of `used`: `check`'s probes and route's re-probes.
    pub used_by_probes: u64,
    /// The limit in force: the tighter of configured and learned.
    pub limit: u64,
    /// Whether that is a learned limit (from the upstream's headers).
    pub learned: bool,
}

impl LimitLedger {
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty() && self.learned.is_empty()
    }

    /// The limits learned for a key-and-model scope, as [`Limits`].
    fn learned_limits(&self, scope: &str) -> Limits {
        let mut out = Limits::default();
        for l in self.learned.get(scope).into_iter().flat_map(|m| m.values()) {
            let Some(limit) = l.limit else { continue };
            let slot = match l.kind {
                LimitKind::Rpm => &mut out.rpm,
                LimitKind::Rpd => &mut out.rpd,
                LimitKind::Tpm => &mut out.tpm,
                LimitKind::Tpd => &mut out.tpd,
                LimitKind::DailyCap => continue,
            };
            *slot = Some(slot.map_or(limit, |s| s.min(limit)));
        }
        out
    }

    /// Every limit on `target`, configured and learned (here or in
    /// `others`), the tighter winning.
    fn checks(
        &self,
        target: &Target,
        eff: &EffectiveLimits,
        others: &[&LimitLedger],
    ) -> Vec<Check> {
        let scope = target.key_model_id();
        let mut learned = self.learned_limits(&scope);
        for o in others {
            learned = learned.tightest(&o.learned_limits(&scope));
        }
        checks_with(target, eff, &learned)
    }

    /// How much of `kind` is used now in `scope`, by this ledger alone
    /// (`resets_at`: the end of the day window that holds `now`).
    pub fn used_here(
        &self,
        scope: &str,
        kind: LimitKind,
        now: DateTime<Utc>,
        resets_at: DateTime<Utc>,
    ) -> u64 {
        let Some(w) = self.windows.get(scope) else {
            return 0;
        };
        match (kind.per_minute(), kind.counts_tokens()) {
            (true, false) => w.in_minute(now).map(|e| e.requests).sum(),
            (true, true) => w.in_minute(now).map(|e| e.tokens).sum(),
            (false, false) => w.day_counts(resets_at).0,
            (false, true) => w.day_counts(resets_at).1,
        }
    }

    /// How much of `c` is used now, here and in `others`.
    fn used(
        &self,
        c: &Check,
        others: &[&LimitLedger],
        now: DateTime<Utc>,
        resets_at: DateTime<Utc>,
    ) -> u64 {
        std::iter::once(self)
            .chain(others.iter().copied())
            .map(|l| l.used_here(&c.scope, c.kind, now, resets_at))
            .fold(0, u64::saturating_add)
    }

    /// When `c` fails for a request of `tokens`, the time it could pass.
    fn fails(
        &self,
        c: &Check,
        others: &[&LimitLedger],
        tokens: u64,
        now: DateTime<Utc>,
        resets_at: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        let cost = if c.kind.counts_tokens() { tokens } else { 1 };
        if self.used(c, others, now, resets_at).saturating_add(cost) <= c.limit {
            return None;
        }
        if !c.kind.per_minute() {
            return Some(resets_at);
        }
        // Slide the oldest entries out until the request fits.
        let mut entries: Vec<&MinuteEntry> = std::iter::once(self)
            .chain(others.iter().copied())
            .filter_map(|l| l.windows.get(&c.scope))
            .flat_map(|w| w.in_minute(now))
            .collect();
        entries.sort_by_key(|e| e.at);
        let weight = |e: &MinuteEntry| {
            if c.kind.counts_tokens() {
                e.tokens
            } else {
                e.requests
            }
        };
        let mut left: u64 = entries.iter().map(|e| weight(e)).sum();
        for e in &entries {
            left -= weight(e);
            if left.saturating_add(cost) <= c.limit {
                return Some(e.at + MINUTE);
            }
        }
        // Larger than the whole window: it never fits.
        Some(entries.last().map_or(now + MINUTE, |e| e.at + MINUTE))
    }

    /// Check every limit on the request's target; if all pass, count the
    /// request and its estimated tokens in every window, else count nothing.
    /// Of several limits that fail, the one that frees last is reported.
    pub fn check_and_count(
        &mut self,
        req: &LimitRequest<'_>,
        now: DateTime<Utc>,
    ) -> Result<Reservation, LimitHit> {
        self.check_and_count_with(req, &[], now)
    }

    /// [`check_and_count`](LimitLedger::check_and_count), with the counts
    /// and learned limits of `others` (another process's, read from its
    /// file) added to this ledger's. Only this ledger counts the request.
    pub fn check_and_count_with(
        &mut self,
        req: &LimitRequest<'_>,
        others: &[&LimitLedger],
        now: DateTime<Utc>,
    ) -> Result<Reservation, LimitHit> {
        let resets_at = next_day_reset(now, req.limits.day_reset);
        let checks = self.checks(req.target, req.limits, others);
        let key_model = req.target.key_model_id();
        let mut worst: Option<LimitHit> = None;
        let mut consider = |hit: LimitHit| {
            if worst.as_ref().is_none_or(|w| hit.until > w.until) {
                worst = Some(hit);
            }
        };
        for c in &checks {
            if let Some(until) = self.fails(c, others, req.tokens, now, resets_at) {
                consider(LimitHit {
                    kind: c.kind,
                    scope: c.scope.clone(),
                    until,
                });
            }
        }
        for l in std::iter::once(&*self)
            .chain(others.iter().copied())
            .filter_map(|l| l.learned.get(&key_model))
            .flat_map(|m| m.values())
        {
            if let Some(until) = l.blocked_until(now) {
                consider(LimitHit {
                    kind: l.kind,
                    scope: key_model.clone(),
                    until,
                });
            }
        }
        if let Some(hit) = worst {
            return Err(hit);
        }
        Ok(self.count(checks, req, now))
    }

    /// Count a request that has gone whatever the limits say (a probe's
    /// second request, sent unstreamed when its provider refused the
    /// stream), in every window of its target.
    pub fn count_sent(&mut self, req: &LimitRequest<'_>, now: DateTime<Utc>) {
        let checks = self.checks(req.target, req.limits, &[]);
        self.count(checks, req, now);
    }

    /// Count `req` in the windows of `checks`.
    fn count(
        &mut self,
        checks: Vec<Check>,
        req: &LimitRequest<'_>,
        now: DateTime<Utc>,
    ) -> Reservation {
        let resets_at = next_day_reset(now, req.limits.day_reset);
        let mut scopes: Vec<String> = checks.into_iter().map(|c| c.scope).collect();
        scopes.sort();
        scopes.dedup();
        let id = self.next_id;
        self.next_id += 1;
        let second = second_of(now);
        for scope in &scopes {
            let w = self.windows.entry(scope.clone()).or_default();
            w.slide(now);
            match w.minute.back_mut() {
                // A clock that stepped back counts in the newest second.
                Some(e) if e.at >= second => {
                    e.requests += 1;
                    e.tokens = e.tokens.saturating_add(req.tokens);
                }
                _ => w.minute.push_back(MinuteEntry {
                    at: second,
                    requests: 1,
                    tokens: req.tokens,
                }),
            }
            let day = match &mut w.day {
                Some(d) if d.resets_at == resets_at => d,
                slot => slot.insert(DayCount {
                    resets_at,
                    requests: 0,
                    tokens: 0,
                }),
            };
            day.requests += 1;
            day.tokens = day.tokens.saturating_add(req.tokens);
        }
        Reservation {
            id,
            second,
            day_resets_at: resets_at,
            scopes,
            tokens: req.tokens,
            shared: false,
        }
    }

    /// Replace a reservation's token count (the estimate, or an earlier
    /// correction) with the upstream's `usage`, in every window that still
    /// holds it. Calling it again with the same count changes nothing.
    pub fn correct(&mut self, r: &mut Reservation, actual_tokens: u64) {
        for scope in &r.scopes {
            let Some(w) = self.windows.get_mut(scope) else {
                continue;
            };
            if let Some(e) = w.minute.iter_mut().rev().find(|e| e.at <= r.second) {
                e.tokens = e
                    .tokens
                    .saturating_sub(r.tokens)
                    .saturating_add(actual_tokens);
            }
            if let Some(d) = w.day.as_mut().filter(|d| d.resets_at == r.day_resets_at) {
                d.tokens = d
                    .tokens
                    .saturating_sub(r.tokens)
                    .saturating_add(actual_tokens);
            }
        }
        r.tokens = actual_tokens;
    }

    /// Learn `target`'s limits from an upstream's rate-limit headers (any
    /// status). `requests` is the provider's `requests_header_window` from
    /// the catalog: what the ambiguous `x-ratelimit-*-requests` counts (per
    /// day on Groq, per minute in OpenAI's meaning).
    /// Returns what it learned, by bucket name.
    pub fn learn(
        &mut self,
        target: &Target,
        requests: RequestsWindow,
        headers: &HeaderMap,
        now: DateTime<Utc>,
    ) -> Vec<(String, Learned)> {
        let found = learned_buckets(requests, headers, now);
        if found.is_empty() {
            return found;
        }
        let scope = self.learned.entry(target.key_model_id()).or_default();
        for (name, l) in &found {
            scope.insert(name.clone(), l.clone());
        }
        found
    }

    /// Every limit on `target` with how much of it is used, for display.
    #[cfg(test)]
    pub fn usage(
        &self,
        target: &Target,
        eff: &EffectiveLimits,
        now: DateTime<Utc>,
    ) -> Vec<LimitUsage> {
        self.usage_with(target, eff, &[], &[], now)
    }

    /// Every limit on `target` with how much of it is used, here and in
    /// `others`, and how much of that by probes (counted in `probes`,
    /// which hold only probes), for display.
    pub fn usage_with(
        &self,
        target: &Target,
        eff: &EffectiveLimits,
        others: &[&LimitLedger],
        probes: &[&LimitLedger],
        now: DateTime<Utc>,
    ) -> Vec<LimitUsage> {
        let resets_at = next_day_reset(now, eff.day_reset);
        self.checks(target, eff, others)
            .into_iter()
            .map(|c| LimitUsage {
                used: self.used(&c, others, now, resets_at),
                used_by_probes: probes
                    .iter()
                    .map(|l| l.used_here(&c.scope, c.kind, now, resets_at))
                    .fold(0, u64::saturating_add),
                kind: c.kind,
                scope: c.scope,
                limit: c.limit,
                learned: c.learned,
            })
            .collect()
    }

    /// Drop what no longer counts: minute entries older than 60 s, day
    /// counts whose day is over, learned buckets older than
    /// [`LEARNED_TTL`] or spent buckets (not enforced) past their reset.
    pub fn prune(&mut self, now: DateTime<Utc>) {
        self.windows.retain(|_, w| {
            w.prune(now);
            !w.is_empty()
        });
        self.learned.retain(|_, buckets| {
            buckets.retain(|_, l| {
                l.learned_at + LEARNED_TTL > now
                    && (l.limit.is_some() || l.blocked_until(now).is_some())
            });
            !buckets.is_empty()
        });
    }
}

/// Every configured limit on `target`, tightened by `learned` on the
/// key-and-model scope.
fn checks_with(target: &Target, eff: &EffectiveLimits, learned: &Limits) -> Vec<Check> {
    let key_model = target.key_model_id();
    let model = eff.model.tightest(learned);
    let mut checks = Vec::new();
    let mut push = |scope: &str, limits: &Limits, configured: &Limits| {
        let by_kind = |l: &Limits| {
            [
                (LimitKind::Rpm, l.rpm),
                (LimitKind::Rpd, l.rpd),
                (LimitKind::Tpm, l.tpm),
                (LimitKind::Tpd, l.tpd),
            ]
        };
        for ((kind, limit), (_, configured)) in by_kind(limits).into_iter().zip(by_kind(configured))
        {
            if let Some(limit) = limit {
                checks.push(Check {
                    scope: scope.to_string(),
                    kind,
                    limit,
                    learned: configured.is_none_or(|c| limit < c),
                });
            }
        }
    };
    push(&key_model, &model, &eff.model);
    push(&target.key_id(), &eff.key, &eff.key);
    if let Some(cap) = eff.daily_cap {
        checks.push(Check {
            scope: target.provider.clone(),
            kind: LimitKind::DailyCap,
            limit: cap,
            learned: false,
        });
    }
    checks
}

/// Every limit on `target` as (scope, kind, limit, learned): the
/// configured ones, tightened by what any of `ledgers` learned.
pub fn limits_on(
    target: &Target,
    eff: &EffectiveLimits,
    ledgers: &[&LimitLedger],
) -> Vec<(String, LimitKind, u64, bool)> {
    let scope = target.key_model_id();
    let learned = ledgers.iter().fold(Limits::default(), |l, x| {
        l.tightest(&x.learned_limits(&scope))
    });
    checks_with(target, eff, &learned)
        .into_iter()
        .map(|c| (c.scope, c.kind, c.limit, c.learned))
        .collect()
}

/// The configured limits on `target` as (scope, kind, limit), for the
/// shared store, which applies learned limits itself.
pub fn configured_checks(target: &Target, eff: &EffectiveLimits) -> Vec<(String, LimitKind, u64)> {
    checks_with(target, eff, &Limits::default())
        .into_iter()
        .map(|c| (c.scope, c.kind, c.limit))
        .collect()
}

/// One family of rate-limit headers: where each value is, what it counts,
/// and whether its size is enforced.
struct HeaderBucket {
    name: &'static str,
    limit: String,
    remaining: String,
    reset: String,
    kind: Option<LimitKind>,
    enforce: bool,
}

fn bucket(
    name: &'static str,
    [limit, remaining, reset]: [String; 3],
    kind: Option<LimitKind>,
    enforce: bool,
) -> HeaderBucket {
    HeaderBucket {
        name,
        limit,
        remaining,
        reset,
        kind,
        enforce,
    }
}

/// `x-ratelimit-{limit,remaining,reset}{suffix}`.
fn x(suffix: &str) -> [String; 3] {
    ["limit", "remaining", "reset"].map(|f| format!("x-ratelimit-{f}{suffix}"))
}

/// `anthropic-ratelimit-{what}-{limit,remaining,reset}`.
fn anthropic(what: &str) -> [String; 3] {
    ["limit", "remaining", "reset"].map(|f| format!("anthropic-ratelimit-{what}-{f}"))
}

/// The buckets of every header family docs/providers.md lists. A `kind` of
/// `None` is decided by the reset: more than a minute away means a day.
fn header_buckets(requests: RequestsWindow) -> Vec<HeaderBucket> {
    use LimitKind::*;
    let requests = match requests {
        RequestsWindow::Minute => Rpm,
        RequestsWindow::Day => Rpd,
    };
    vec![
        bucket("requests", x("-requests"), Some(requests), true),
        bucket("tokens", x("-tokens"), Some(Tpm), true),
        bucket("requests-day", x("-requests-day"), Some(Rpd), true),
        bucket("tokens-minute", x("-tokens-minute"), Some(Tpm), true),
        // OpenRouter's own 429s: which window is not said.
        bucket("unsuffixed", x(""), None, false),
        bucket("anthropic-requests", anthropic("requests"), Some(Rpm), true),
        bucket("anthropic-tokens", anthropic("tokens"), Some(Tpm), true),
        bucket(
            "anthropic-input-tokens",
            anthropic("input-tokens"),
            Some(Tpm),
            false,
        ),
        bucket(
            "anthropic-output-tokens",
            anthropic("output-tokens"),
            Some(Tpm),
            false,
        ),
    ]
}

fn learned_buckets(
    requests: RequestsWindow,
    headers: &HeaderMap,
    now: DateTime<Utc>,
) -> Vec<(String, Learned)> {
    // Every family below has "ratelimit" in its names; most responses have
    // none, and this runs on every one of them.
    if !headers.keys().any(|k| k.as_str().contains("ratelimit")) {
        return Vec::new();
    }
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let count = |name: &str| {
        text(name)
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|n| n.is_finite() && *n >= 0.0)
            .map(|n| n as u64)
    };
    let mut out = Vec::new();
    for b in header_buckets(requests) {
        let limit = count(&b.limit).filter(|&n| n > 0);
        let remaining = count(&b.remaining);
        let reset_at = text(&b.reset)
            .and_then(|v| parse_reset(v, now))
            // To the millisecond, so "2m59.56s" is not 179.559999999 s.
            .map(|d| {
                now + TimeDelta::milliseconds(
                    (d.min(MAX_WAIT).as_secs_f64() * 1000.0).round() as i64
                )
            });
        let kind = b.kind.unwrap_or(match reset_at {
            Some(at) if at - now > MINUTE => LimitKind::Rpd,
            _ => LimitKind::Rpm,
        });
        let l = Learned {
            kind,
            limit: limit.filter(|_| b.enforce),
            remaining,
            reset_at,
            learned_at: now,
        };
        if l.limit.is_some() || l.blocked_until(now).is_some() {
            out.push((b.name.to_string(), l));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use reqwest::header::{HeaderName, HeaderValue};

    /// The target's provider's `requests_header_window` in the embedded
    /// catalog, as the engine passes it.
    fn window(t: &Target) -> RequestsWindow {
        Catalog::embedded()
            .provider(&t.provider)
            .map_or(RequestsWindow::default(), |p| p.requests_header_window)
    }

    fn t0() -> DateTime<Utc> {
        "2026-05-04T12:00:00Z".parse().unwrap()
    }

    fn secs(s: f64) -> DateTime<Utc> {
        t0() + TimeDelta::milliseconds((s * 1000.0) as i64)
    }

    fn target() -> Target {
        Target::new("p", "m").with_key(0, "k1:aaaaaaaa")
    }

    fn limits(model: Limits) -> EffectiveLimits {
        EffectiveLimits {
            model,
            ..EffectiveLimits::default()
        }
    }

    fn send(
        b: &mut LimitLedger,
        t: &Target,
        eff: &EffectiveLimits,
        tokens: u64,
        now: DateTime<Utc>,
    ) -> Result<Reservation, LimitHit> {
        b.check_and_count(
            &LimitRequest {
                target: t,
                limits: eff,
                tokens,
            },
            now,
        )
    }

    fn fixture(name: &str) -> HeaderMap {
        let text = match name {
            "groq" => include_str!("../../tests/fixtures/ratelimit/groq.txt"),
            "openai" => include_str!("../../tests/fixtures/ratelimit/openai.txt"),
            "anthropic" => include_str!("../../tests/fixtures/ratelimit/anthropic.txt"),
            "cerebras" => include_str!("../../tests/fixtures/ratelimit/cerebras.txt"),
            "openrouter" => include_str!("../../tests/fixtures/ratelimit/openrouter.txt"),
            _ => unreachable!(),
        };
        let mut h = HeaderMap::new();
        for line in text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let (k, v) = line.split_once(':').unwrap();
            h.insert(
                HeaderName::from_bytes(k.trim().to_lowercase().as_bytes()).unwrap(),
                HeaderValue::from_str(v.trim()).unwrap(),
            );
        }
        h
    }

    #[test]
    fn each_kind_stops_the_request_after_the_limit() {
        let t = target();
        // rpm 3: the 4th within a minute is skipped until the 1st slides out.
        let eff = limits(Limits {
            rpm: Some(3),
            ..Limits::default()
        });
        let mut b = LimitLedger::default();
        for i in 0..3 {
            send(&mut b, &t, &eff, 10, secs(i as f64)).unwrap();
        }
        let hit = send(&mut b, &t, &eff, 10, secs(5.0)).unwrap_err();
        assert_eq!(hit.kind, LimitKind::Rpm);
        assert_eq!(
            crate::route::domain::AttemptClass::Limit(hit.kind).to_string(),
            "limit:rpm"
        );
        assert_eq!(hit.scope, "p#key0:k1:aaaaaaaa::m");
        assert_eq!(hit.until, secs(60.0));

        // rpd 2: the 3rd waits for UTC midnight.
        let eff = limits(Limits {
            rpd: Some(2),
            ..Limits::default()
        });
        let mut b = LimitLedger::default();
        send(&mut b, &t, &eff, 10, secs(0.0)).unwrap();
        send(&mut b, &t, &eff, 10, secs(3600.0)).unwrap();
        let hit = send(&mut b, &t, &eff, 10, secs(7200.0)).unwrap_err();
        assert_eq!(hit.kind, LimitKind::Rpd);
        assert_eq!(
            hit.until,
            "2026-05-05T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );

        // tpm 100: 60 + 30 fit; 20 more must wait until the 60 slides out.
        let eff = limits(Limits {
            tpm: Some(100),
            ..Limits::default()
        });
        let mut b = LimitLedger::default();
        send(&mut b, &t, &eff, 60, secs(0.0)).unwrap();
        send(&mut b, &t, &eff, 30, secs(10.0)).unwrap();
        let hit = send(&mut b, &t, &eff, 20, secs(20.0)).unwrap_err();
        assert_eq!((hit.kind, hit.until), (LimitKind::Tpm, secs(60.0)));
        // 10 still fits.
        send(&mut b, &t, &eff, 10, secs(20.0)).unwrap();
        // More than the whole window never fits; it waits for the window to empty.
        let hit = send(&mut b, &t, &eff, 101, secs(21.0)).unwrap_err();
        assert_eq!((hit.kind, hit.until), (LimitKind::Tpm, secs(80.0)));

        // tpd 1000.
        let eff = limits(Limits {
            tpd: Some(1000),
            ..Limits::default()
        });
        let mut b = LimitLedger::default();
        send(&mut b, &t, &eff, 900, secs(0.0)).unwrap();
        let hit = send(&mut b, &t, &eff, 101, secs(600.0)).unwrap_err();
        assert_eq!(hit.kind, LimitKind::Tpd);
        assert_eq!(
            hit.until,
            "2026-05-05T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
        send(&mut b, &t, &eff, 100, secs(600.0)).unwrap();

        // daily_cap 2 across the provider: the second key and another model
        // share it.
        let eff = EffectiveLimits {
            daily_cap: Some(2),
            ..EffectiveLimits::default()
        };
        let mut b = LimitLedger::default();
        send(&mut b, &t, &eff, 1, secs(0.0)).unwrap();
        let other = Target::new("p", "m2").with_key(1, "k1:bbbbbbbb");
        send(&mut b, &other, &eff, 1, secs(1.0)).unwrap();
        let hit = send(&mut b, &t, &eff, 1, secs(2.0)).unwrap_err();
        assert_eq!(
            (
                hit.kind,
                hit.scope.as_str(),
                crate::route::domain::AttemptClass::Limit(hit.kind)
                    .to_string()
                    .as_str()
            ),
            (LimitKind::DailyCap, "p", "limit:daily_cap")
        );
        // Another provider is not affected.
        send(&mut b, &Target::new("q", "m"), &eff, 1, secs(2.0)).unwrap();
    }

    #[test]
    fn key_limits_count_across_models_and_model_limits_per_key() {
        let eff = EffectiveLimits {
            model: Limits {
                rpm: Some(1),
                ..Limits::default()
            },
            key: Limits {
                rpm: Some(2),
                ..Limits::default()
            },
            ..EffectiveLimits::default()
        };
        let mut b = LimitLedger::default();
        let k0 = |m: &str| Target::new("p", m).with_key(0, "k1:aaaaaaaa");
        send(&mut b, &k0("a"), &eff, 1, secs(0.0)).unwrap();
        // Same key, same model: the model's rpm.
        let hit = send(&mut b, &k0("a"), &eff, 1, secs(1.0)).unwrap_err();
        assert_eq!(
            (hit.kind, hit.scope.as_str()),
            (LimitKind::Rpm, "p#key0:k1:aaaaaaaa::a")
        );
        // Another key has its own allowance for the model.
        let k1 = Target::new("p", "a").with_key(1, "k1:bbbbbbbb");
        send(&mut b, &k1, &eff, 1, secs(1.0)).unwrap();
        // Same key, another model: passes the model's, then the key's stops a third.
        send(&mut b, &k0("b"), &eff, 1, secs(2.0)).unwrap();
        let hit = send(&mut b, &k0("c"), &eff, 1, secs(3.0)).unwrap_err();
        assert_eq!(
            (hit.kind, hit.scope.as_str()),
            (LimitKind::Rpm, "p#key0:k1:aaaaaaaa")
        );
    }

    #[test]
    fn keyless_provider_counts_key_and_provider_scope_once() {
        let eff = EffectiveLimits {
            key: Limits {
                rpd: Some(2),
                ..Limits::default()
            },
            daily_cap: Some(2),
            ..EffectiveLimits::default()
        };
        let t = Target::new("local", "m");
        let mut b = LimitLedger::default();
        send(&mut b, &t, &eff, 1, secs(0.0)).unwrap();
        send(&mut b, &t, &eff, 1, secs(1.0)).unwrap();
        assert!(send(&mut b, &t, &eff, 1, secs(2.0)).is_err());
        assert_eq!(b.windows["local"].day.as_ref().unwrap().requests, 2);
    }

    #[test]
    fn minute_window_slides() {
        let t = target();
        let eff = limits(Limits {
            rpm: Some(60),
            ..Limits::default()
        });
        let mut b = LimitLedger::default();
        for i in 0..60 {
            send(&mut b, &t, &eff, 1, secs(i as f64)).unwrap();
        }
        let hit = send(&mut b, &t, &eff, 1, secs(59.5)).unwrap_err();
        assert_eq!(hit.until, secs(60.0));
        // The first has slid out by t = 60.5; the second has not.
        send(&mut b, &t, &eff, 1, secs(60.5)).unwrap();
        let hit = send(&mut b, &t, &eff, 1, secs(60.6)).unwrap_err();
        assert_eq!(hit.until, secs(61.0));
        send(&mut b, &t, &eff, 1, secs(61.0)).unwrap();
    }

    #[test]
    fn day_window_resets_at_midnight_or_the_configured_time() {
        let t = target();
        let late: DateTime<Utc> = "2026-05-04T23:59:59Z".parse().unwrap();
        let midnight: DateTime<Utc> = "2026-05-05T00:00:00Z".parse().unwrap();
        let eff = limits(Limits {
            rpd: Some(1),
            ..Limits::default()
        });
        let mut b = LimitLedger::default();
        send(&mut b, &t, &eff, 1, late).unwrap();
        assert_eq!(send(&mut b, &t, &eff, 1, late).unwrap_err().until, midnight);
        send(&mut b, &t, &eff, 1, midnight).unwrap();

        // Reset at 08:00 UTC (Gemini's midnight Pacific, winter).
        let eff = EffectiveLimits {
            day_reset: NaiveTime::from_hms_opt(8, 0, 0).unwrap(),
            ..eff
        };
        let mut b = LimitLedger::default();
        send(&mut b, &t, &eff, 1, late).unwrap();
        let reset: DateTime<Utc> = "2026-05-05T08:00:00Z".parse().unwrap();
        // Midnight UTC does not reset it…
        assert_eq!(
            send(&mut b, &t, &eff, 1, midnight).unwrap_err().until,
            reset
        );
        // …08:00 does.
        send(&mut b, &t, &eff, 1, reset).unwrap();
        assert_eq!(
            next_day_reset(reset - TimeDelta::seconds(1), eff.day_reset),
            reset
        );
    }

    #[test]
    fn nothing_is_counted_when_one_limit_fails() {
        let t = target();
        let eff = EffectiveLimits {
            model: Limits {
                rpm: Some(10),
                tpm: Some(100),
                ..Limits::default()
            },
            key: Limits {
                rpd: Some(10),
                ..Limits::default()
            },
            daily_cap: Some(10),
            ..EffectiveLimits::default()
        };
        let mut b = LimitLedger::default();
        send(&mut b, &t, &eff, 90, secs(0.0)).unwrap();
        let before = b.clone();
        // The tokens fail; rpm, rpd and the cap would pass.
        let hit = send(&mut b, &t, &eff, 20, secs(1.0)).unwrap_err();
        assert_eq!(hit.kind, LimitKind::Tpm);
        assert_eq!(b, before);
        let used = b.usage(&t, &eff, secs(1.0));
        assert_eq!(
            used.iter()
                .map(|u| (u.kind, u.used, u.limit))
                .collect::<Vec<_>>(),
            [
                (LimitKind::Rpm, 1, 10),
                (LimitKind::Tpm, 90, 100),
                (LimitKind::Rpd, 1, 10),
                (LimitKind::DailyCap, 1, 10),
            ]
        );
    }

    #[test]
    fn the_limit_that_frees_last_is_reported() {
        let t = target();
        let eff = limits(Limits {
            rpm: Some(1),
            rpd: Some(1),
            ..Limits::default()
        });
        let mut b = LimitLedger::default();
        send(&mut b, &t, &eff, 1, secs(0.0)).unwrap();
        assert_eq!(
            send(&mut b, &t, &eff, 1, secs(1.0)).unwrap_err().kind,
            LimitKind::Rpd
        );
    }

    #[test]
    fn estimate_is_corrected_down_and_up() {
        let t = target();
        let eff = limits(Limits {
            tpm: Some(1000),
            tpd: Some(5000),
            ..Limits::default()
        });
        let mut b = LimitLedger::default();
        let mut r = send(&mut b, &t, &eff, 900, secs(0.0)).unwrap();
        assert!(send(&mut b, &t, &eff, 200, secs(1.0)).is_err());
        // The answer was short: 900 estimated, 150 used.
        b.correct(&mut r, 150);
        assert_eq!(r.tokens(), 150);
        b.correct(&mut r, 150);
        let tpd = |b: &LimitLedger| b.windows[&t.key_model_id()].day.as_ref().unwrap().tokens;
        assert_eq!(tpd(&b), 150);
        send(&mut b, &t, &eff, 200, secs(1.0)).unwrap();
        // A long answer: 100 estimated, 700 used; now 150 + 200 + 700 in the minute.
        let mut r = send(&mut b, &t, &eff, 100, secs(2.0)).unwrap();
        b.correct(&mut r, 700);
        assert_eq!(tpd(&b), 1050);
        let hit = send(&mut b, &t, &eff, 100, secs(3.0)).unwrap_err();
        // Once the 150 slides out, 900 + 100 fits.
        assert_eq!((hit.kind, hit.until), (LimitKind::Tpm, secs(60.0)));
        // A correction after the window moved on changes only the day.
        let mut r = send(&mut b, &t, &eff, 10, secs(200.0)).unwrap();
        b.prune(secs(300.0));
        b.correct(&mut r, 20);
        assert_eq!(tpd(&b), 1070);
    }

    #[test]
    fn groq_headers_count_requests_per_day_and_tokens_per_minute() {
        let t = Target::new("groq", "llama-3.3-70b-versatile").with_key(0, "k1:aaaaaaaa");
        let mut b = LimitLedger::default();
        b.learn(&t, window(&t), &fixture("groq"), t0());
        let learned = &b.learned[&t.key_model_id()];
        assert_eq!(learned["requests"].kind, LimitKind::Rpd);
        assert_eq!(learned["requests"].limit, Some(1000));
        assert_eq!(learned["requests"].remaining, Some(997));
        assert_eq!(
            learned["requests"].reset_at,
            Some(t0() + TimeDelta::milliseconds(179_560))
        );
        assert_eq!(
            (learned["tokens"].kind, learned["tokens"].limit),
            (LimitKind::Tpm, Some(12000))
        );
        // Configured looser (14,400 rpd, 20,000 tpm): the learned limits win.
        // Configured tighter (6,000 tpm): it stays.
        let loose = limits(Limits {
            rpd: Some(14400),
            tpm: Some(20000),
            ..Limits::default()
        });
        let u = b.usage(&t, &loose, t0());
        assert_eq!(
            u.iter()
                .map(|u| (u.kind, u.limit, u.learned))
                .collect::<Vec<_>>(),
            [(LimitKind::Rpd, 1000, true), (LimitKind::Tpm, 12000, true)]
        );
        let tight = limits(Limits {
            tpm: Some(6000),
            ..Limits::default()
        });
        let u = b.usage(&t, &tight, t0());
        assert_eq!(
            u.iter()
                .map(|u| (u.kind, u.limit, u.learned))
                .collect::<Vec<_>>(),
            [(LimitKind::Rpd, 1000, true), (LimitKind::Tpm, 6000, false)]
        );
        // The learned rpd and the configured tpm are both enforced.
        let hit = send(&mut b, &t, &tight, 6001, t0()).unwrap_err();
        assert_eq!(hit.kind, LimitKind::Tpm);
        send(&mut b, &t, &tight, 6000, t0()).unwrap();
    }

    #[test]
    fn the_same_headers_from_openai_count_per_minute() {
        let t = Target::new("openai", "gpt-4o-mini").with_key(0, "k1:aaaaaaaa");
        let mut b = LimitLedger::default();
        b.learn(&t, window(&t), &fixture("openai"), t0());
        let l = b.learned_limits(&t.key_model_id());
        assert_eq!(
            l,
            Limits {
                rpm: Some(500),
                tpm: Some(200000),
                ..Limits::default()
            }
        );
        assert_eq!(
            b.learned[&t.key_model_id()]["tokens"].reset_at,
            Some(t0() + TimeDelta::milliseconds(14))
        );
    }

    #[test]
    fn the_window_of_requests_headers_comes_from_the_catalog() {
        // OpenAI's headers, from a provider the catalog says counts per day.
        let c = Catalog::from_toml_str(
            "[[providers]]\nname = \"openai\"\nrequests_header_window = \"day\"\n",
            "t.toml",
        )
        .unwrap();
        let window = c.provider("openai").unwrap().requests_header_window;
        let t = Target::new("openai", "gpt-4o-mini").with_key(0, "k1:aaaaaaaa");
        let mut b = LimitLedger::default();
        b.learn(&t, window, &fixture("openai"), t0());
        let l = b.learned_limits(&t.key_model_id());
        assert_eq!((l.rpm, l.rpd), (None, Some(500)));
        // And Groq's, from a Groq the user says counts per minute.
        let t = Target::new("groq", "llama-3.3-70b-versatile").with_key(0, "k1:aaaaaaaa");
        b.learn(&t, RequestsWindow::Minute, &fixture("groq"), t0());
        let l = b.learned_limits(&t.key_model_id());
        assert_eq!((l.rpm, l.rpd), (Some(1000), None));
    }

    #[test]
    fn cerebras_buckets_name_their_windows() {
        let t = Target::new("cerebras", "llama3.1-8b").with_key(0, "k1:aaaaaaaa");
        let mut b = LimitLedger::default();
        b.learn(&t, window(&t), &fixture("cerebras"), t0());
        let learned = &b.learned[&t.key_model_id()];
        assert_eq!(
            b.learned_limits(&t.key_model_id()),
            Limits {
                rpd: Some(14400),
                tpm: Some(60000),
                ..Limits::default()
            }
        );
        assert_eq!(
            learned["requests-day"].reset_at,
            Some(t0() + TimeDelta::milliseconds(33_011_380))
        );
    }

    #[test]
    fn anthropic_spent_bucket_blocks_until_its_reset() {
        let t = Target::new("anthropic", "claude-haiku-4-5").with_key(0, "k1:aaaaaaaa");
        let mut b = LimitLedger::default();
        b.learn(&t, window(&t), &fixture("anthropic"), t0());
        assert_eq!(
            b.learned_limits(&t.key_model_id()),
            Limits {
                rpm: Some(50),
                tpm: Some(50000),
                ..Limits::default()
            }
        );
        // The input and output buckets are remembered but their sizes not
        // enforced: the estimate mixes the two.
        let learned = &b.learned[&t.key_model_id()];
        assert_eq!(learned["anthropic-input-tokens"].limit, None);
        assert_eq!(learned["anthropic-input-tokens"].remaining, Some(0));
        // A bucket neither enforced nor spent is not worth keeping.
        assert!(!learned.contains_key("anthropic-output-tokens"));
        let eff = EffectiveLimits::default();
        let reset: DateTime<Utc> = "2026-05-04T12:00:31Z".parse().unwrap();
        let hit = send(&mut b, &t, &eff, 1, t0()).unwrap_err();
        assert_eq!((hit.kind, hit.until), (LimitKind::Tpm, reset));
        assert!(b.windows.is_empty(), "a blocked request is not counted");
        send(&mut b, &t, &eff, 1, reset).unwrap();
        // The spent input bucket is dropped once past its reset.
        b.prune(reset);
        assert!(!b.learned[&t.key_model_id()].contains_key("anthropic-input-tokens"));
    }

    #[test]
    fn openrouter_429_blocks_until_its_epoch_ms_reset() {
        let t = Target::new("openrouter", "google/gemma-3-27b-it:free").with_key(0, "k1:aaaaaaaa");
        let mut b = LimitLedger::default();
        b.learn(&t, window(&t), &fixture("openrouter"), t0());
        // The window is not said, so the size is not enforced…
        assert_eq!(b.learned_limits(&t.key_model_id()), Limits::default());
        // …but the spent bucket blocks, and a reset hours away means a day.
        let hit = send(&mut b, &t, &EffectiveLimits::default(), 1, t0()).unwrap_err();
        assert_eq!(hit.kind, LimitKind::Rpd);
        assert_eq!(
            hit.until,
            "2026-05-05T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
    }

    #[test]
    fn learning_never_loosens_and_a_later_header_replaces_an_earlier() {
        let t = Target::new("openai", "m").with_key(0, "k1:aaaaaaaa");
        let eff = limits(Limits {
            rpm: Some(2),
            ..Limits::default()
        });
        let mut b = LimitLedger::default();
        b.learn(&t, window(&t), &fixture("openai"), t0());
        send(&mut b, &t, &eff, 1, t0()).unwrap();
        send(&mut b, &t, &eff, 1, t0()).unwrap();
        let hit = send(&mut b, &t, &eff, 1, t0()).unwrap_err();
        assert_eq!(hit.kind, LimitKind::Rpm);
        let mut h = HeaderMap::new();
        h.insert("x-ratelimit-limit-requests", HeaderValue::from_static("1"));
        b.learn(&t, window(&t), &h, secs(120.0));
        assert_eq!(b.learned_limits(&t.key_model_id()).rpm, Some(1));
        send(&mut b, &t, &eff, 1, secs(120.0)).unwrap();
        assert!(send(&mut b, &t, &eff, 1, secs(121.0)).is_err());
        // No rate-limit headers: nothing learned, nothing forgotten.
        b.learn(&t, window(&t), &HeaderMap::new(), secs(130.0));
        assert_eq!(b.learned_limits(&t.key_model_id()).rpm, Some(1));
        // Learned limits expire when not heard again.
        b.prune(secs(120.0) + LEARNED_TTL);
        assert!(b.learned.is_empty());
    }

    #[test]
    fn prune_drops_what_no_longer_counts() {
        let t = target();
        let eff = limits(Limits {
            rpm: Some(10),
            rpd: Some(10),
            ..Limits::default()
        });
        let mut b = LimitLedger::default();
        send(&mut b, &t, &eff, 1, secs(0.0)).unwrap();
        b.prune(secs(60.0));
        let w = &b.windows[&t.key_model_id()];
        assert!(w.minute.is_empty());
        assert_eq!(w.day.as_ref().unwrap().requests, 1);
        b.prune("2026-05-05T00:00:00Z".parse().unwrap());
        assert!(b.is_empty());
    }

    #[test]
    fn budget_round_trips_through_json() {
        let t = target();
        let eff = EffectiveLimits {
            model: Limits {
                rpm: Some(10),
                tpd: Some(1000),
                ..Limits::default()
            },
            daily_cap: Some(5),
            ..EffectiveLimits::default()
        };
        let mut b = LimitLedger::default();
        send(&mut b, &t, &eff, 7, secs(0.0)).unwrap();
        b.learn(&t, window(&t), &fixture("groq"), secs(1.0));
        let text = serde_json::to_string_pretty(&b).unwrap();
        assert!(text.contains("\"p#key0:k1:aaaaaaaa::m\""), "{text}");
        let back: LimitLedger = serde_json::from_str(&text).unwrap();
        assert_eq!(back, b);
        // The restored budget keeps counting where it left off.
        let mut back = back;
        let r = send(&mut back, &t, &eff, 3, secs(2.0)).unwrap();
        assert_ne!(r.id, 0);
        assert_eq!(
            serde_json::from_str::<LimitLedger>("{}").unwrap(),
            LimitLedger::default()
        );
    }

    #[test]
    fn effective_limits_come_from_the_catalog() {
        let c = Catalog::from_toml_str(
            r#"
            [[providers]]
            name = "groq"
            key_limits = { rpd = 20000 }
            daily_cap = 30000
            "#,
            "t.toml",
        )
        .unwrap();
        let groq = c.provider("groq").unwrap();
        let e = effective(groq, "openai/gpt-oss-20b");
        assert_eq!(
            e.model,
            Limits {
                rpm: Some(30),
                rpd: Some(1000),
                tpm: Some(8000),
                tpd: Some(200000)
            }
        );
        assert_eq!(e.key.rpd, Some(20000));
        assert_eq!(e.daily_cap, Some(30000));
        assert_eq!(effective(groq, "unlisted").model.rpd, None);
        let gemini = effective(c.provider("gemini").unwrap(), "gemini-3.5-flash");
        assert_eq!(gemini.day_reset, NaiveTime::from_hms_opt(8, 0, 0).unwrap());
        assert!(effective(c.provider("openai").unwrap(), "gpt-4o-mini").is_empty());
    }
}
