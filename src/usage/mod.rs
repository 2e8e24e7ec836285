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

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use self::limits::LimitLedger;
pub use self::target::Target;
pub use self::traffic::Traffic;
use crate::error::{DataError, Result, json_error_offset};
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
        let Some(bytes) = fsutil::read_data_file(path)? else {
            return Ok(ProbeUsage::default());
        };
        serde_json::from_slice(&bytes).map_err(|e| {
            DataError::new(
                path,
                Some(json_error_offset(&bytes, &e)),
                format!(
                    "not a valid probe usage file: {e}. It only holds the probes' request counts for today: move it aside (and keep it) to start counting again"
                ),
            )
            .into()
        })
    }

    /// Count what `f` adds into the file under the data lock: read what is
    /// there now, apply `f`, write it back atomically. What another
    /// process counted in between is never lost. The stats directory must
    /// exist (a run made it): one removed meanwhile is an error, never
    /// made again.
    pub fn update<T>(
        stats_dir: &Path,
        now: DateTime<Utc>,
        f: impl FnOnce(&mut LimitLedger) -> T,
    ) -> Result<T> {
        let lock = DataLock::acquire_existing(stats_dir)?;
        let path = Self::path(stats_dir);
        let mut usage = Self::load(&path)?;
        let out = f(&mut usage.budget);
        usage.budget.prune(now);
        usage.saved_at = Some(crate::time::format_ts(now));
        let mut text = serde_json::to_string_pretty(&usage).expect("probe usage serialises");
        text.push('\n');
        fsutil::atomic_write(&path, text.as_bytes(), &lock)?;
        Ok(out)
    }
}

impl crate::state::Watched for ProbeUsage {
    const KEPT: &'static str = "the probe counts read before";

    fn load(path: &Path) -> Result<ProbeUsage> {
        ProbeUsage::load(path)
    }
}

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
        let path = stats_dir.join(ROUTE_STATE_FILE);
        let Some(bytes) = fsutil::read_data_file(&path)? else {
            return Ok(RouteUsage::default());
        };
        serde_json::from_slice(&bytes).map_err(|e| {
            DataError::new(
                &path,
                Some(json_error_offset(&bytes, &e)),
                format!("not a valid route state: {e}"),
            )
            .into()
        })
    }
}
