//! Global flags validated into the settings every command starts from: the
//! catalog, the prompt pool and the data-file paths.

use std::path::{Path, PathBuf};

use crate::catalog::Catalog;
use crate::cli::GlobalArgs;
use crate::error::Result;
use crate::prompts::Pool;

pub const LOG_FILE: &str = "health_log.json";
pub const STATE_FILE: &str = "model_state.json";
pub const DEFAULT_STATS_DIR: &str = "stats";

#[derive(Debug)]
pub struct Settings {
    pub catalog: Catalog,
    pub prompts: Pool,
    pub stats_dir: PathBuf,
}

impl Settings {
    pub fn load(g: &GlobalArgs) -> Result<Settings> {
        let catalog = Catalog::load(g.config.as_deref())?;
        let prompts = match &g.prompts {
            Some(p) => Pool::load(p)?,
            None => Pool::embedded(),
        };
        Ok(Settings {
            catalog,
            prompts,
            stats_dir: g
                .stats_dir
                .clone()
                .unwrap_or_else(|| PathBuf::from(DEFAULT_STATS_DIR)),
        })
    }

    pub fn log_path(&self) -> PathBuf {
        self.stats_dir.join(LOG_FILE)
    }

    pub fn state_path(&self) -> PathBuf {
        self.stats_dir.join(STATE_FILE)
    }

    pub fn stats_dir(&self) -> &Path {
        &self.stats_dir
    }
}
