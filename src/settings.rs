//! Global flags validated into the settings every command starts from: the
//! catalog, the prompt pool and the data-file paths.
//!
//! The user config is found the way users expect, first match wins:
//!
//! 1. `--config FILE`
//! 2. `LLMPROBE_CONFIG`
//! 3. `./llmprobe.toml`
//! 4. the user's config directory: `$XDG_CONFIG_HOME/llmprobe/llmprobe.toml`
//!    (else `$HOME/.config/llmprobe/llmprobe.toml`), or
//!    `%APPDATA%\llmprobe\llmprobe.toml` on Windows.
//!
//! A file named explicitly (1, 2) must exist; a discovered location (3, 4)
//! that does not exist is skipped. Which file was used is kept in
//! [`Settings::config`], so that `check --list` can say so: a typo in a
//! file the user did not know was read is then easy to spot.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::catalog::Catalog;
use crate::cli::GlobalArgs;
use crate::error::{Error, Result};
use crate::prompts::Pool;

pub use crate::healthlog::LOG_FILE;
pub const STATE_FILE: &str = "model_state.json";
pub const DEFAULT_STATS_DIR: &str = "stats";
pub const CONFIG_FILE: &str = "llmprobe.toml";
pub const CONFIG_ENV: &str = "LLMPROBE_CONFIG";

/// The user config file that was read, and how it was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigFile {
    pub path: PathBuf,
    /// `--config`, `LLMPROBE_CONFIG`, `working directory` or
    /// `user config directory`.
    pub found_by: &'static str,
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub catalog: Catalog,
    pub prompts: Pool,
    pub stats_dir: PathBuf,
    /// The user config layered over the embedded catalog; `None` when there
    /// was none.
    pub config: Option<ConfigFile>,
}

impl Settings {
    pub fn load(g: &GlobalArgs) -> Result<Settings> {
        let config = find_config(g.config.as_deref(), |k| std::env::var_os(k))?;
        match &config {
            Some(c) => {
                tracing::info!(path = %c.path.display(), found_by = c.found_by, "config file")
            }
            None => tracing::info!("no config file: the embedded catalog only"),
        }
        let catalog = Catalog::load(config.as_ref().map(|c| c.path.as_path()))?;
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
            config,
        })
    }

    pub fn log_path(&self) -> PathBuf {
        self.stats_dir.join(LOG_FILE)
    }

    pub fn state_path(&self) -> PathBuf {
        self.stats_dir.join(STATE_FILE)
    }

    /// `stats/capability_log.json`: the capability probes' log.
    pub fn capability_log_path(&self) -> PathBuf {
        self.stats_dir.join(crate::capabilities::LOG_FILE)
    }

    /// `stats/capabilities.json`: the latest capability verdicts.
    pub fn capabilities_path(&self) -> PathBuf {
        self.stats_dir.join(crate::capabilities::FINDINGS_FILE)
    }

    pub fn stats_dir(&self) -> &Path {
        &self.stats_dir
    }

    /// `config: /home/me/.config/llmprobe/llmprobe.toml (user config
    /// directory)`, or `config: none: embedded catalog only`.
    pub fn config_line(&self) -> String {
        match &self.config {
            Some(c) => format!("config: {} ({})", c.path.display(), c.found_by),
            None => "config: none: embedded catalog only".to_string(),
        }
    }

    /// The same, for JSON output: `{"path", "found_by"}`, or
    /// `{"path": null, "found_by": "none: embedded catalog only"}`.
    pub fn config_json(&self) -> serde_json::Value {
        match &self.config {
            Some(c) => serde_json::json!({ "path": c.path, "found_by": c.found_by }),
            None => serde_json::json!({ "path": null, "found_by": "none: embedded catalog only" }),
        }
    }
}

/// Find the user config. `explicit` is `--config` or `LLMPROBE_CONFIG`
/// (clap merges the two; `env` tells them apart).
pub fn find_config(
    explicit: Option<&Path>,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<Option<ConfigFile>> {
    if let Some(p) = explicit {
        let found_by = if env(CONFIG_ENV).is_some_and(|v| Path::new(&v) == p) {
            CONFIG_ENV
        } else {
            "--config"
        };
        if !p.exists() {
            return Err(Error::config(format!(
                "config file {} (from {found_by}) does not exist",
                p.display()
            )));
        }
        return Ok(Some(ConfigFile {
            path: crate::fsutil::absolute(p),
            found_by,
        }));
    }
    let here = Path::new(CONFIG_FILE);
    if here.exists() {
        return Ok(Some(ConfigFile {
            path: crate::fsutil::absolute(here),
            found_by: "working directory",
        }));
    }
    if let Some(p) = user_config_path(&env).filter(|p| p.exists()) {
        return Ok(Some(ConfigFile {
            path: p,
            found_by: "user config directory",
        }));
    }
    Ok(None)
}

/// The config file to write to (`models --write`,
/// [`crate::catalog::edit::add_models`]): the one [`find_config`] finds;
/// else the file `--config` or `LLMPROBE_CONFIG` names, to be made; else
/// the user config directory's, to be made, which the lookup then finds
/// from any working directory (`./llmprobe.toml` would hold only there);
/// `./llmprobe.toml` only when no config directory is known.
pub fn config_to_write(
    explicit: Option<&Path>,
    env: impl Fn(&str) -> Option<OsString>,
) -> ConfigFile {
    if let Ok(Some(found)) = find_config(explicit, &env) {
        return found;
    }
    match (explicit, user_config_path(&env)) {
        (Some(p), _) => ConfigFile {
            path: crate::fsutil::absolute(p),
            found_by: match env(CONFIG_ENV).is_some_and(|v| Path::new(&v) == p) {
                true => CONFIG_ENV,
                false => "--config",
            },
        },
        (None, Some(path)) => ConfigFile {
            path,
            found_by: "user config directory",
        },
        (None, None) => ConfigFile {
            path: crate::fsutil::absolute(Path::new(CONFIG_FILE)),
            found_by: "working directory",
        },
    }
}

/// `$XDG_CONFIG_HOME/llmprobe/llmprobe.toml`, else
/// `$HOME/.config/llmprobe/llmprobe.toml`; `%APPDATA%\llmprobe\llmprobe.toml`
/// on Windows. Relative or empty variables are ignored, as the XDG spec asks.
fn user_config_path(env: &impl Fn(&str) -> Option<OsString>) -> Option<PathBuf> {
    let dir = |k: &str| env(k).map(PathBuf::from).filter(|p| p.is_absolute());
    let base = if cfg!(windows) {
        dir("APPDATA")?
    } else {
        dir("XDG_CONFIG_HOME").or_else(|| dir("HOME").map(|h| h.join(".config")))?
    };
    Some(base.join("llmprobe").join(CONFIG_FILE))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn env_of(vars: &[(&str, &Path)]) -> impl Fn(&str) -> Option<OsString> + use<> {
        let vars: Vec<(String, OsString)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_os_str().to_owned()))
            .collect();
        move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn xdg_wins_over_home_and_missing_files_are_skipped() {
        let d = tempfile::tempdir().unwrap();
        let (xdg, home) = (d.path().join("xdg"), d.path().join("home"));
        let home_file = home.join(".config/llmprobe/llmprobe.toml");
        std::fs::create_dir_all(home_file.parent().unwrap()).unwrap();
        std::fs::write(&home_file, "").unwrap();
        let env = env_of(&[("XDG_CONFIG_HOME", &xdg), ("HOME", &home)]);
        // XDG_CONFIG_HOME is set, but has no file: nothing is found there,
        // and HOME is only the fallback for an unset XDG_CONFIG_HOME.
        assert_eq!(
            user_config_path(&env),
            Some(xdg.join("llmprobe/llmprobe.toml"))
        );
        let env = env_of(&[("HOME", &home)]);
        assert_eq!(user_config_path(&env), Some(home_file));
        assert_eq!(user_config_path(&env_of(&[])), None);
        let rel = Path::new("relative");
        assert_eq!(user_config_path(&env_of(&[("HOME", rel)])), None);
    }

    #[test]
    fn an_explicit_file_must_exist_and_says_where_it_came_from() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("c.toml");
        let err = find_config(Some(&f), env_of(&[])).unwrap_err();
        assert!(err.to_string().contains("c.toml"), "{err}");
        assert!(err.to_string().contains("--config"), "{err}");
        std::fs::write(&f, "").unwrap();
        let c = find_config(Some(&f), env_of(&[(CONFIG_ENV, &f)]))
            .unwrap()
            .unwrap();
        assert_eq!((c.path.as_path(), c.found_by), (f.as_path(), CONFIG_ENV));
    }

    #[test]
    fn the_file_to_write_is_the_one_found_else_where_it_is_looked_for() {
        let d = tempfile::tempdir().unwrap();
        let xdg = d.path().join("xdg");
        let env = env_of(&[("XDG_CONFIG_HOME", &xdg)]);
        // Nothing anywhere: the user config directory's, to be made.
        let none = config_to_write(None, &env);
        assert_eq!(
            (none.path, none.found_by),
            (xdg.join("llmprobe/llmprobe.toml"), "user config directory")
        );
        // A file named explicitly is written there, whether or not it exists.
        let f = d.path().join("c.toml");
        let named = config_to_write(Some(&f), &env);
        assert_eq!(
            (named.path.as_path(), named.found_by),
            (f.as_path(), "--config")
        );
        std::fs::write(&f, "").unwrap();
        assert_eq!(config_to_write(Some(&f), &env).path, f);
        // No config directory known: the working directory's.
        let here = config_to_write(None, env_of(&[]));
        assert_eq!(here.path, crate::fsutil::absolute(Path::new(CONFIG_FILE)));
    }
}
