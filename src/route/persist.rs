//! `stats/route_state.json`: what `route` must remember between one-shot
//! calls and across restarts (cooldowns and ladder hits). Keys appear only
//! as index and fingerprint.
//!
//! Read like the other data files: missing means empty; a file that cannot
//! be parsed stops the command with exit 4 and is left byte-identical.
//! Written atomically under the data lock; fields this version does not
//! know are kept.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{DataError, Result, json_error_offset};
use crate::fsutil::{self, DataLock};

pub const FILE: &str = "route_state.json";

/// The file: a version, the payload, and whatever else it held.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RouteState<T> {
    #[serde(default = "version")]
    pub version: u32,
    #[serde(default)]
    pub saved_at: Option<String>,
    #[serde(default)]
    pub cooldowns: T,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

fn version() -> u32 {
    1
}

impl<T: Default> RouteState<T> {
    pub fn empty() -> RouteState<T> {
        RouteState {
            version: version(),
            saved_at: None,
            cooldowns: T::default(),
            extra: Map::new(),
        }
    }
}

pub fn path(stats_dir: &Path) -> PathBuf {
    stats_dir.join(FILE)
}

/// Read the file; missing or blank is the default.
pub fn load<T: DeserializeOwned + Default>(path: &Path) -> Result<RouteState<T>> {
    let Some(bytes) = fsutil::read_data_file(path)? else {
        return Ok(RouteState::empty());
    };
    serde_json::from_slice(&bytes).map_err(|e| {
        DataError::new(
            path,
            Some(json_error_offset(&bytes, &e)),
            format!(
                "not a valid route state: {e}. It only holds cooldowns: move it aside (and keep it) to start with none"
            ),
        )
        .into()
    })
}

/// Write the file atomically under the data lock.
pub fn save<T: Serialize>(stats_dir: &Path, state: &RouteState<T>) -> Result<()> {
    let lock = DataLock::acquire(stats_dir)?;
    let mut text = serde_json::to_string_pretty(state).expect("route state serialises");
    text.push('\n');
    fsutil::atomic_write(&path(stats_dir), text.as_bytes(), &lock)
}
