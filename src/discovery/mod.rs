//! What each provider serves now, from its own model list: `llmprobe
//! models`, discovery (new models adopted on probation) and retirement
//! (docs/discovery.md).
//!
//! Lists are cached in `stats/model_lists.json` ([`ModelLists`]), read
//! again once older than the provider's `list_every_secs`. The same file
//! keeps the record of discovered models ([`Discovered`]: new, passed or
//! dropped) and of catalog models a fresh list no longer carries
//! ([`Missing`]). That record is llmprobe's own: older versions never read
//! the file, so no older binary routes a model on probation, and
//! `model_state.json` gains nothing a reader would not know.

pub mod fetch;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::catalog::{Catalog, Discover, ModelInfo, Provider, model_key};
use crate::error::Result;
use crate::fsutil::{self, DataLock};
pub use crate::upstream::dialect::models::Listed;

/// The file, in the stats directory.
pub const MODEL_LISTS_FILE: &str = "model_lists.json";

/// `stats/model_lists.json`. Fields this version does not know are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelLists {
    #[serde(default = "version")]
    pub version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_at: Option<String>,
    /// Each provider's list, by provider name.
    #[serde(default)]
    pub lists: BTreeMap<String, ProviderList>,
    /// Models discovery found, by `provider::model`.
    #[serde(default)]
    pub discovered: BTreeMap<String, Discovered>,
    /// Catalog models a fresh, complete list did not carry, by
    /// `provider::model`.
    #[serde(default)]
    pub missing: BTreeMap<String, Missing>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn version() -> u32 {
    1
}

impl Default for ModelLists {
    fn default() -> ModelLists {
        ModelLists {
            version: version(),
            saved_at: None,
            lists: BTreeMap::new(),
            discovered: BTreeMap::new(),
            missing: BTreeMap::new(),
            extra: Map::new(),
        }
    }
}

/// One provider's list, as last read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderList {
    /// The base URL it was read from: a list of another URL is not this
    /// provider's any more.
    pub base_url: String,
    /// When the list was last read whole; `None` when it never was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetched_at: Option<DateTime<Utc>>,
    /// Its chat models, as of `fetched_at`.
    #[serde(default)]
    pub models: Vec<Listed>,
    /// The last attempt, when it failed after `fetched_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<ListFailure>,
}

/// Why a list could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListFailure {
    pub at: DateTime<Utc>,
    pub kind: FailKind,
    /// Already redacted; never a response body.
    pub why: String,
}

/// What kind of failure: only `unreachable` says anything about the
/// network (an offline run).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumString, strum::VariantNames,
)]
#[strum(serialize_all = "snake_case")]
pub enum FailKind {
    /// No answer: DNS, refused, reset, a timeout.
    Unreachable,
    /// 401 or 403: the key.
    Refused,
    /// 404 or 405: the provider has no list there.
    NoEndpoint,
    /// An answer that is not the dialect's list (an HTML page, other JSON).
    NotAList,
    /// Any other HTTP status.
    Http,
    /// A known key or provider limit is full: not sent.
    Limit,
}

crate::names::serde_via_strum!(FailKind);

/// A model discovery found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discovered {
    /// When a list first carried it.
    pub first_listed: DateTime<Utc>,
    /// The list said it is free.
    #[serde(default)]
    pub free: bool,
    pub status: Probation,
    /// Its last probe, while on probation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probed_at: Option<DateTime<Utc>>,
    /// Why it was dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// Where a discovered model stands.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::EnumString, strum::VariantNames,
)]
#[strum(serialize_all = "snake_case")]
pub enum Probation {
    /// Not yet passed a probe: probed a few a run, never routed.
    New,
    /// Passed a probe: probed and routed like a catalog model.
    Passed,
    /// Its first probe failed hard: no longer probed.
    Dropped,
}

crate::names::serde_via_strum!(Probation);

/// A catalog model a fresh list did not carry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Missing {
    /// The first day a list missed it (the state's `missing_since`).
    pub since: NaiveDate,
    /// It answered a probe while missing: kept, shown as `unlisted`.
    #[serde(default)]
    pub answering: bool,
}

impl ModelLists {
    pub fn path(stats_dir: &Path) -> PathBuf {
        stats_dir.join(MODEL_LISTS_FILE)
    }

    /// Read the file; missing or blank is empty. A file that cannot be
    /// parsed is an error naming it, and is left as it is.
    pub fn load(stats_dir: &Path) -> Result<ModelLists> {
        fsutil::read_json_file(&Self::path(stats_dir), |e| {
            format!(
                "not a valid model list cache: {e}. It holds the providers' model lists and \
                 discovery's record: move it aside (and keep it) to fetch the lists again"
            )
        })
        .map(Option::unwrap_or_default)
    }

    /// Change the file under the data lock: read what is there now,
    /// apply `f`, write it back atomically.
    pub fn update<T>(
        stats_dir: &Path,
        now: DateTime<Utc>,
        f: impl FnOnce(&mut ModelLists) -> T,
    ) -> Result<T> {
        let lock = DataLock::acquire(stats_dir)?;
        Self::update_locked(stats_dir, now, &lock, f)
    }

    /// [`ModelLists::update`] under a lock the caller holds.
    pub fn update_locked<T>(
        stats_dir: &Path,
        now: DateTime<Utc>,
        lock: &DataLock,
        f: impl FnOnce(&mut ModelLists) -> T,
    ) -> Result<T> {
        let mut lists = Self::load(stats_dir)?;
        let before = lists.clone();
        let out = f(&mut lists);
        if lists != before {
            lists.saved_at = Some(crate::time::format_ts(now));
            let mut text = serde_json::to_string_pretty(&lists).expect("model lists serialise");
            text.push('\n');
            fsutil::atomic_write(&Self::path(stats_dir), text.as_bytes(), lock)?;
        }
        Ok(out)
    }

    /// `p`'s list, when it was read from `base_url` within `every` of
    /// `now`: a fresh, complete list, the one that may retire a model.
    pub fn fresh(
        &self,
        p: &str,
        base_url: &str,
        every: std::time::Duration,
        now: DateTime<Utc>,
    ) -> Option<&ProviderList> {
        let l = self.lists.get(p).filter(|l| l.base_url == base_url)?;
        let at = l.fetched_at?;
        let every = TimeDelta::from_std(every).unwrap_or(TimeDelta::MAX);
        (now < at + every && at <= now + TimeDelta::minutes(5)).then_some(l)
    }

    /// Whether `p`'s list need not be asked for now: fresh, or its last
    /// attempt within `every` failed in a way that asking again soon would
    /// not change (no list endpoint, the key refused, not a list).
    pub fn settled(
        &self,
        p: &str,
        base_url: &str,
        every: std::time::Duration,
        now: DateTime<Utc>,
    ) -> bool {
        if self.fresh(p, base_url, every, now).is_some() {
            return true;
        }
        let every = TimeDelta::from_std(every).unwrap_or(TimeDelta::MAX);
        self.lists
            .get(p)
            .filter(|l| l.base_url == base_url)
            .and_then(|l| l.failed.as_ref())
            .is_some_and(|f| {
                matches!(
                    f.kind,
                    FailKind::NoEndpoint | FailKind::Refused | FailKind::NotAList
                ) && now < f.at + every
                    && f.at <= now + TimeDelta::minutes(5)
            })
    }

    /// `p`'s last list read from `base_url`, however old.
    pub fn cached(&self, p: &str, base_url: &str) -> Option<&ProviderList> {
        self.lists
            .get(p)
            .filter(|l| l.base_url == base_url && l.fetched_at.is_some())
    }

    /// Record a list just read whole, and which of `catalog_models` it
    /// lacks (kept from the first day it lacked them) or carries again.
    pub fn record_list(
        &mut self,
        p: &str,
        base_url: &str,
        models: Vec<Listed>,
        catalog_models: &[String],
        now: DateTime<Utc>,
    ) {
        for m in catalog_models {
            let key = model_key(p, m);
            if models.iter().any(|l| same_id(&l.id, m)) {
                self.missing.remove(&key);
            } else {
                self.missing.entry(key).or_insert(Missing {
                    since: now.date_naive(),
                    answering: false,
                });
            }
        }
        self.lists.insert(
            p.to_string(),
            ProviderList {
                base_url: base_url.to_string(),
                fetched_at: Some(now),
                models,
                failed: None,
            },
        );
    }

    /// Record a failed attempt; the last list read, if any, stays.
    pub fn record_failure(&mut self, p: &str, base_url: &str, failure: ListFailure) {
        let l = self
            .lists
            .entry(p.to_string())
            .or_insert_with(|| ProviderList {
                base_url: base_url.to_string(),
                fetched_at: None,
                models: Vec::new(),
                failed: None,
            });
        if l.base_url != base_url {
            *l = ProviderList {
                base_url: base_url.to_string(),
                fetched_at: None,
                models: Vec::new(),
                failed: None,
            };
        }
        l.failed = Some(failure);
    }

    /// The record of `provider::model`, when discovery found it.
    pub fn discovered(&self, key: &str) -> Option<&Discovered> {
        self.discovered.get(key)
    }
}

/// Whether a list's id and a catalog's id name one model (Gemini's may be
/// written `models/…` in a catalog).
pub fn same_id(listed: &str, catalog: &str) -> bool {
    listed == catalog || catalog.strip_prefix("models/") == Some(listed)
}

/// A catalog provider's models against its list.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Compared {
    /// Catalog models the list carries.
    pub listed: Vec<String>,
    /// Catalog models the list does not carry.
    pub gone: Vec<String>,
    /// Listed models the catalog does not have.
    pub new: Vec<Listed>,
}

/// Compare `models` (a provider's catalog models) with its `list`.
pub fn compare(models: &[String], list: &[Listed]) -> Compared {
    let (listed, gone) = models
        .iter()
        .cloned()
        .partition(|m| list.iter().any(|l| same_id(&l.id, m)));
    let new = list
        .iter()
        .filter(|l| !models.iter().any(|m| same_id(&l.id, m)))
        .cloned()
        .collect();
    Compared { listed, gone, new }
}

/// Whether `discover` adopts `l`.
pub fn adopts(discover: Discover, l: &Listed) -> bool {
    match discover {
        Discover::Off => false,
        Discover::Free => l.free == Some(true),
        Discover::All => true,
    }
}

/// The model's hints from its list, as a catalog's `model_info`.
fn hints(l: &Listed) -> ModelInfo {
    ModelInfo {
        context_window: l.context_window.filter(|n| *n > 0),
        max_output_tokens: l.max_output_tokens.filter(|n| *n > 0),
        capabilities: (!l.capabilities.is_empty()).then_some(l.capabilities),
        deprecated: l.deprecated,
        successor: None,
    }
}

/// What discovery adds to a run or a router.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Adopted {
    /// Discovered models that passed, now in the catalog.
    pub passed: BTreeSet<String>,
    /// Models on probation that enter this run (`check` only).
    pub probation: BTreeSet<String>,
    /// Per provider: models its list carries that discovery would adopt
    /// and that have not passed yet, and how many enter this run.
    pub found: BTreeMap<String, (usize, usize)>,
}

/// Who adopts: `check` probes models on probation, a few a run; a router
/// (and every view) takes only those that passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum For {
    Check,
    Route,
}

/// `catalog` with what discovery adopted from the cached lists: passed
/// models (as catalog models, with their list's hints), and, `For::Check`,
/// up to `discover_per_run` models on probation per provider, fewer
/// where half the provider's daily probe allowance has gone to them
/// today ([`probation_room`]).
pub fn adopt(
    catalog: &Catalog,
    lists: &ModelLists,
    who: For,
    now: DateTime<Utc>,
) -> (Catalog, Adopted) {
    let mut out = catalog.clone();
    let mut adopted = Adopted::default();
    for p in &mut out.providers {
        if p.discover == Discover::Off || p.enabled == Some(false) {
            continue;
        }
        let Some(list) = lists.lists.get(&p.name).filter(|l| l.fetched_at.is_some()) else {
            continue;
        };
        let mut waiting: Vec<(&Listed, Option<DateTime<Utc>>)> = Vec::new();
        for l in &list.models {
            if !adopts(p.discover, l) || p.models.iter().any(|m| same_id(&l.id, m)) {
                continue;
            }
            let key = model_key(&p.name, &l.id);
            match lists.discovered(&key).map(|d| (d.status, d.probed_at)) {
                Some((Probation::Passed, _)) => {
                    adopted.passed.insert(key);
                    add(p, l);
                }
                Some((Probation::Dropped, _)) => {}
                Some((Probation::New, probed)) => waiting.push((l, probed)),
                None => waiting.push((l, None)),
            }
        }
        // Never probed first (in the list's order), then the longest
        // waiting.
        waiting.sort_by_key(|(_, probed)| (probed.is_some(), *probed));
        let room = match who {
            For::Check => probation_room(p, lists, now),
            For::Route => 0,
        };
        let entering = waiting.len().min(room);
        for (l, _) in &waiting[..entering] {
            adopted.probation.insert(model_key(&p.name, &l.id));
            add(p, l);
        }
        if !waiting.is_empty() {
            adopted
                .found
                .insert(p.name.clone(), (waiting.len(), entering));
        }
    }
    (out, adopted)
}

/// Record, as new, each model a cached list carries that `catalog`'s
/// providers would discover and that discovery has not seen before.
/// Returns how many it added.
pub fn note_found(lists: &mut ModelLists, catalog: &Catalog, now: DateTime<Utc>) -> usize {
    let mut added = 0;
    for p in &catalog.providers {
        if p.discover == Discover::Off || p.enabled == Some(false) {
            continue;
        }
        let Some(list) = lists.lists.get(&p.name) else {
            continue;
        };
        let found: Vec<(String, bool)> = list
            .models
            .iter()
            .filter(|l| adopts(p.discover, l) && !p.models.iter().any(|m| same_id(&l.id, m)))
            .map(|l| (model_key(&p.name, &l.id), l.free == Some(true)))
            .collect();
        for (key, free) in found {
            lists.discovered.entry(key).or_insert_with(|| {
                added += 1;
                Discovered {
                    first_listed: now,
                    free,
                    status: Probation::New,
                    probed_at: None,
                    why: None,
                }
            });
        }
    }
    added
}

/// Add a listed model to `p`, with its list's hints.
fn add(p: &mut Provider, l: &Listed) {
    p.models.push(l.id.clone());
    let info = hints(l);
    if info != ModelInfo::default() {
        p.model_info.insert(l.id.clone(), info);
    }
}

/// How many models on probation may enter a run of `p`: its
/// `discover_per_run`, and, where a daily request limit covers the whole
/// key or provider (`key_limits.rpd`, `daily_cap`), no more than half of
/// the probe allowance of that limit a day, less those probed today.
pub fn probation_room(p: &Provider, lists: &ModelLists, now: DateTime<Utc>) -> usize {
    let per_run = p.discover_per_run as usize;
    let shared = [p.key_limits.rpd, p.daily_cap].into_iter().flatten().min();
    let Some(limit) = shared else {
        return per_run;
    };
    let half = (crate::usage::budget::allowance(p.probe_share, limit) / 2).max(1) as usize;
    let prefix = format!("{}::", p.name);
    let today = now.date_naive();
    let probed_today = lists
        .discovered
        .iter()
        .filter(|(k, d)| {
            k.starts_with(&prefix) && d.probed_at.is_some_and(|t| t.date_naive() == today)
        })
        .count();
    per_run.min(half.saturating_sub(probed_today))
}

/// A settings' catalog with the models discovery adopted for `who`, read
/// from the cached lists; a cache that cannot be read adopts nothing
/// (with a warning): the catalog's own models are never held up by it.
pub fn with_adopted(
    s: &crate::settings::Settings,
    who: For,
    now: DateTime<Utc>,
) -> Result<(crate::settings::Settings, Adopted)> {
    if !s
        .catalog
        .providers
        .iter()
        .any(|p| p.discover != Discover::Off)
    {
        return Ok((s.clone(), Adopted::default()));
    }
    let lists = match ModelLists::load(s.stats_dir()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("warning: {e}; no discovered model is used");
            return Ok((s.clone(), Adopted::default()));
        }
    };
    let (catalog, adopted) = adopt(&s.catalog, &lists, who, now);
    let mut out = s.clone();
    out.catalog = catalog;
    Ok((out, adopted))
}
