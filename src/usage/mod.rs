//! One ledger for everything llmprobe sends a provider, whichever command
//! sends it: `check`'s basic and capability probes, `check --paused`,
//! route's re-probes and quiet bench probes, and routed requests. Each is
//! counted in the same usage windows ([`limits`]: `rpm`, `rpd`, `tpm`,
//! `tpd`, `key_limits`, `daily_cap`) under the same scope ids
//! ([`Target`]).
//!
//! **How the two writers meet.** Each process writes only its own file,
//! and every reader adds the two:
//!
//! - `route` keeps its counts in `stats/route_state.json` (`budget`, all it
//!   sent; `probe_budget`, the part its own probes took; `traffic`, what
//!   its requests showed of each model, [`traffic`]). It rewrites that file
//!   from memory, as before.
//! - `check` keeps its probes' counts in `stats/probe_usage.json`
//!   ([`ProbeUsage`]), read, counted and written back under the data lock
//!   after each probe, so two `check`s never lose each other's counts.
//! - `route --serve` watches `probe_usage.json` (every 500 ms, like the
//!   states) and adds its counts and learned limits to its own when it
//!   admits a request and in every view; `check` reads `route_state.json`
//!   before each probe. Neither ever writes the other's file, so neither
//!   can drop the other's counts.
//!
//! [`budget`] decides, from the two together, whether a probe may go.

pub mod budget;
pub mod limits;
pub mod target;
pub mod traffic;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use self::limits::LimitLedger;
pub use self::target::Target;
pub use self::traffic::Traffic;
use crate::error::Result;
use crate::fsutil::{self, DataLock};

/// `route`'s file, in the stats directory.
pub const ROUTE_STATE_FILE: &str = "route_state.json";
/// `check`'s probes, in the stats directory.
pub const PROBE_USAGE_FILE: &str = "probe_usage.json";

/// `stats/probe_usage.json`: the usage windows and learned limits of the
/// probes `check` sent. Fields this version does not know are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeUsage {
    #[serde(default = "version")]
    pub version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_at: Option<String>,
    /// The probes' counts, by the same scopes as route's `budget`.
    #[serde(default)]
    pub budget: LimitLedger,
    /// Every probe sent each provider on the UTC day `day`, limits or
    /// not: the probe spend `/metrics` shows.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub spent: Spent,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn version() -> u32 {
    1
}

impl Default for ProbeUsage {
    fn default() -> ProbeUsage {
        ProbeUsage {
            version: version(),
            saved_at: None,
            budget: LimitLedger::default(),
            spent: BTreeMap::new(),
            extra: Map::new(),
        }
    }
}

impl ProbeUsage {
    pub fn path(stats_dir: &Path) -> PathBuf {
        stats_dir.join(PROBE_USAGE_FILE)
    }

    /// Read the file; missing or blank is empty. A file that cannot be
    /// parsed is an error naming it, and is left as it is.
    pub fn load(path: &Path) -> Result<ProbeUsage> {
        fsutil::read_json_file(path, |e| {
            format!(
                "not a valid probe usage file: {e}. It only holds the probes' request counts for today: move it aside (and keep it) to start counting again"
            )
        })
        .map(Option::unwrap_or_default)
    }

    /// Count what `f` adds into the file under the data lock: read what is
    /// there now, apply `f`, write it back atomically. What another
    /// process counted in between is never lost. The stats directory must
    /// exist (a run made it): one removed meanwhile is an error, never
    /// made again.
    pub fn update<T>(
        stats_dir: &Path,
        now: DateTime<Utc>,
        f: impl FnOnce(&mut ProbeUsage) -> T,
    ) -> Result<T> {
        let lock = DataLock::acquire_existing(stats_dir)?;
        let path = Self::path(stats_dir);
        let mut usage = Self::load(&path)?;
        let out = f(&mut usage);
        usage.budget.prune(now);
        usage.spent.retain(|_, s| s.day == now.date_naive());
        usage.saved_at = Some(crate::time::format_ts(now));
        let mut text = serde_json::to_string_pretty(&usage).expect("probe usage serialises");
        text.push('\n');
        fsutil::atomic_write(&path, text.as_bytes(), &lock)?;
        Ok(out)
    }
}

impl ProbeUsage {
    /// Count one probe of `provider` sent at `now`.
    pub fn spend(&mut self, provider: &str, tokens: u64, now: DateTime<Utc>) {
        spend(&mut self.spent, provider, tokens, now);
    }

    /// The probes sent `provider` on `now`'s UTC day.
    pub fn spent_today(&self, provider: &str, now: DateTime<Utc>) -> u64 {
        spent_today(&self.spent, provider, now)
    }
}

/// The probe spend of each provider, by UTC day: `check`'s in its file,
/// route's own re-probes in `route_state.json`.
pub type Spent = BTreeMap<String, Spend>;

/// Count one probe of `provider` (about `tokens` tokens) sent at `now`
/// in `spent`: a new UTC day starts from nothing.
pub fn spend(spent: &mut Spent, provider: &str, tokens: u64, now: DateTime<Utc>) {
    let today = now.date_naive();
    let s = spent.entry(provider.to_string()).or_insert(Spend {
        day: today,
        requests: 0,
        tokens: 0,
    });
    if s.day != today {
        *s = Spend {
            day: today,
            requests: 0,
            tokens: 0,
        };
    }
    s.requests += 1;
    s.tokens = s.tokens.saturating_add(tokens);
}

/// The probes `spent` counts for `provider` on `now`'s UTC day.
pub fn spent_today(spent: &Spent, provider: &str, now: DateTime<Utc>) -> u64 {
    spent
        .get(provider)
        .filter(|s| s.day == now.date_naive())
        .map_or(0, |s| s.requests)
}

/// The probes sent one provider on one UTC day.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    pub day: chrono::NaiveDate,
    pub requests: u64,
    /// Estimated: what each probe was counted with before it was sent.
    pub tokens: u64,
}

impl crate::state::Watched for ProbeUsage {
    const KEPT: &'static str = "the probe counts read before";

    fn load(path: &Path) -> Result<ProbeUsage> {
        ProbeUsage::load(path)
    }
}

/// A future the shared store answers with.
pub type Pending<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Where instances share their usage (Redis, `--shared-state`). There,
/// route counts every request it sends in the shared windows, not in its
/// file; a `check --shared-state` reads route's counts from them and counts
/// its probes in them too, with the probes' part kept apart (scopes
/// prefixed [`PROBES`]). Implemented by `route::shared`; `check` cannot
/// name it.
pub trait SharedUsage: Send + Sync {
    /// Every instance's counts in the scopes of `target` under `limits`,
    /// and the probes' part: `(all, probes)`. `None` while the store is
    /// away.
    fn read<'a>(
        &'a self,
        target: &'a Target,
        limits: &'a limits::EffectiveLimits,
        now: DateTime<Utc>,
    ) -> Pending<'a, Option<(LimitLedger, LimitLedger)>>;
    /// Count one probe of about `tokens` tokens in every shared window it
    /// falls in, and in the probes' part.
    fn count_probe<'a>(
        &'a self,
        target: &'a Target,
        limits: &'a limits::EffectiveLimits,
        tokens: u64,
        now: DateTime<Utc>,
    ) -> Pending<'a, ()>;
}

/// The prefix of the shared windows that count probes only: the
/// probes' part of a scope `s` is kept under `probes|s`.
pub const PROBES: &str = "probes|";

/// What `check` reads of `route_state.json`: route's counts (its own
/// probes' among them) and what its traffic showed. The rest of the file
/// is route's alone.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RouteUsage {
    #[serde(default)]
    pub budget: LimitLedger,
    #[serde(default)]
    pub traffic: Traffic,
}

impl RouteUsage {
    /// Read route's file; missing is empty. A file that cannot be parsed
    /// is an error naming it (route refuses it too), left as it is.
    pub fn load(stats_dir: &Path) -> Result<RouteUsage> {
        fsutil::read_json_file(&stats_dir.join(ROUTE_STATE_FILE), |e| {
            format!("not a valid route state: {e}")
        })
        .map(Option::unwrap_or_default)
    }
}

/// A request to a provider that asks no model (a model-list fetch): it
/// counts in the key's and the provider's windows (`key_limits`,
/// `daily_cap`) and in the day's probe spend, like any probe, with no
/// tokens.
pub fn list_request(p: &crate::catalog::Provider, target: &Target) -> limits::EffectiveLimits {
    debug_assert!(target.model.is_empty());
    limits::EffectiveLimits {
        model: crate::catalog::Limits::default(),
        key: p.key_limits,
        daily_cap: p.daily_cap,
        day_reset: p.day_reset,
    }
}

/// Whether a list fetch of `p` with `target` fits the key's and the
/// provider's limits now, by `check`'s and route's counts: `Err` names
/// the limit that is full. Reads, writes nothing.
pub fn list_fetch_fits(
    stats_dir: &Path,
    p: &crate::catalog::Provider,
    target: &Target,
    now: DateTime<Utc>,
) -> std::result::Result<(), String> {
    let eff = list_request(p, target);
    let req = limits::LimitRequest {
        target,
        limits: &eff,
        tokens: 0,
    };
    let route = RouteUsage::load(stats_dir).unwrap_or_default();
    let mut probes = ProbeUsage::load(&ProbeUsage::path(stats_dir)).map_err(|e| e.to_string())?;
    probes
        .budget
        .check_and_count_with(&req, &[&route.budget], now)
        .map(drop)
        .map_err(|hit| {
            format!(
                "{} full until {}",
                hit.kind,
                crate::time::format_ts(hit.until)
            )
        })
}

/// Count one list fetch of `p` that reached it (any HTTP answer) in
/// `stats/probe_usage.json`, under the data lock.
pub fn count_list_fetch(
    stats_dir: &Path,
    p: &crate::catalog::Provider,
    target: &Target,
    now: DateTime<Utc>,
) -> Result<()> {
    let eff = list_request(p, target);
    ProbeUsage::update(stats_dir, now, |u| {
        let req = limits::LimitRequest {
            target,
            limits: &eff,
            tokens: 0,
        };
        // Sent already: a window that filled meanwhile leaves it out,
        // the day's spend still has it.
        let _ = u.budget.check_and_count(&req, now);
        u.spend(&p.name, 0, now);
    })
}
