//! The catalog of providers and models: the embedded default, layered with
//! the user's `llmprobe.toml`, validated, then resolved against the
//! environment.
//!
//! The config names *where* a key lives (`api_key_env`), never what it is.
//! Keys are read from the environment only in [`Catalog::resolve`], straight
//! into a [`Secret`].

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::error::{ConfigError, Error, Result};
use crate::secret::Secret;

const DEFAULT_CATALOG: &str = include_str!("default.toml");

/// The wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dialect {
    /// OpenAI chat completions; also most other providers, Ollama, llama.cpp
    /// and vLLM.
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// Gemini `generateContent`.
    Gemini,
}

impl Dialect {
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Openai => "openai",
            Dialect::Anthropic => "anthropic",
            Dialect::Gemini => "gemini",
        }
    }
}

/// `api_key_env`: a single name or a list of names.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum KeyEnv {
    One(String),
    Many(Vec<String>),
}

impl KeyEnv {
    fn into_vec(self) -> Vec<String> {
        match self {
            KeyEnv::One(s) if s.is_empty() => vec![],
            KeyEnv::One(s) => vec![s],
            KeyEnv::Many(v) => v,
        }
    }
}

/// Request limits of a provider's free tier, used by `route`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub rpm: Option<u64>,
    pub rpd: Option<u64>,
    pub tpm: Option<u64>,
    pub tpd: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DefaultsToml {
    spacing_secs: Option<f64>,
    timeout_secs: Option<f64>,
    max_tokens: Option<u32>,
    disable_after: Option<u32>,
}

/// One `[[providers]]` table. Every field but `name` is optional so that a
/// user entry can override an embedded provider field by field.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderToml {
    name: String,
    enabled: Option<bool>,
    dialect: Option<Dialect>,
    base_url: Option<String>,
    api_key_env: Option<KeyEnv>,
    key_optional: Option<bool>,
    url_vars: Option<BTreeMap<String, String>>,
    models: Option<Vec<String>>,
    spacing_secs: Option<f64>,
    timeout_secs: Option<f64>,
    max_tokens: Option<u32>,
    headers: Option<BTreeMap<String, String>>,
    priority: Option<i64>,
    limits: Option<Limits>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigToml {
    include_default_catalog: Option<bool>,
    #[serde(default)]
    defaults: DefaultsToml,
    #[serde(default)]
    providers: Vec<ProviderToml>,
}

/// Settings that apply to every provider unless it says otherwise.
#[derive(Debug, Clone, PartialEq)]
pub struct Defaults {
    pub spacing: Duration,
    pub timeout: Duration,
    pub max_tokens: u32,
    pub disable_after: u32,
}

/// A validated provider, as configured (keys not yet read).
#[derive(Debug, Clone, PartialEq)]
pub struct Provider {
    pub name: String,
    pub enabled: bool,
    pub dialect: Dialect,
    /// May hold `{var}` placeholders, filled from `url_vars`.
    pub base_url: String,
    pub api_key_env: Vec<String>,
    pub key_optional: bool,
    pub url_vars: BTreeMap<String, String>,
    pub models: Vec<String>,
    pub spacing: Duration,
    pub timeout: Duration,
    pub max_tokens: u32,
    pub headers: BTreeMap<String, String>,
    pub priority: i64,
    pub limits: Limits,
}

/// A provider ready to be called: URL filled in, key read.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub provider: Provider,
    pub base_url: String,
    /// `None` for keyless providers.
    pub key: Option<Secret>,
    /// Which variable the key came from.
    pub key_source: Option<String>,
}

/// Why a configured provider cannot be used right now.
#[derive(Debug, Clone, PartialEq)]
pub enum Unusable {
    /// Disabled in the catalog or config.
    Disabled,
    /// A needed environment variable is unset; the message names it.
    Missing(String),
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unusable::Disabled => f.write_str("disabled in config"),
            Unusable::Missing(var) => write!(f, "skipped: set {var}"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Catalog {
    pub defaults: Defaults,
    pub providers: Vec<Provider>,
}

/// Where a config came from, for error messages.
fn parse_toml(text: &str, origin: &str) -> Result<ConfigToml> {
    toml::from_str(text).map_err(|e| {
        // toml's message names the key and shows the line and column.
        Error::config(format!(
            "invalid config {origin}: {}",
            e.to_string().trim_end()
        ))
    })
}

impl Catalog {
    /// The embedded default catalog alone.
    pub fn embedded() -> Catalog {
        Catalog::build(None).expect("the embedded catalog is valid")
    }

    /// Load the catalog: the embedded default, layered with the user file at
    /// `path` when given.
    pub fn load(path: Option<&Path>) -> Result<Catalog> {
        let user = match path {
            None => None,
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|e| {
                    Error::config(format!("cannot read config file {}: {e}", p.display()))
                })?;
                Some((
                    parse_toml(&text, &p.display().to_string())?,
                    p.display().to_string(),
                ))
            }
        };
        Catalog::build(user)
    }

    /// Load from TOML text (for tests and the demo).
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Catalog> {
        Catalog::build(Some((parse_toml(text, origin)?, origin.to_string())))
    }

    fn build(user: Option<(ConfigToml, String)>) -> Result<Catalog> {
        let base = parse_toml(DEFAULT_CATALOG, "(embedded default catalog)")?;
        let (user, origin) = match user {
            Some((u, o)) => (u, o),
            None => (ConfigToml::default(), String::new()),
        };
        let mut defaults = base.defaults.clone();
        merge_defaults(&mut defaults, &user.defaults);
        let mut tables: Vec<ProviderToml> = if user.include_default_catalog.unwrap_or(true) {
            base.providers
        } else {
            Vec::new()
        };
        for p in user.providers {
            if let Some(existing) = tables.iter_mut().find(|e| e.name == p.name) {
                merge_provider(existing, p);
            } else {
                tables.push(p);
            }
        }
        let defaults = Defaults {
            spacing: secs(
                defaults.spacing_secs.unwrap_or(90.0),
                "defaults.spacing_secs",
                &origin,
            )?,
            timeout: secs(
                defaults.timeout_secs.unwrap_or(30.0),
                "defaults.timeout_secs",
                &origin,
            )?,
            max_tokens: defaults.max_tokens.unwrap_or(16),
            disable_after: defaults.disable_after.unwrap_or(3).max(1),
        };
        let mut providers = Vec::with_capacity(tables.len());
        for t in tables {
            providers.push(validate_provider(t, &defaults, &origin)?);
        }
        Ok(Catalog {
            defaults,
            providers,
        })
    }

    pub fn provider(&self, name: &str) -> Option<&Provider> {
        self.providers.iter().find(|p| p.name == name)
    }

    /// Every `provider::model` in the catalog, enabled or not.
    pub fn model_keys(&self) -> impl Iterator<Item = String> + '_ {
        self.providers
            .iter()
            .flat_map(|p| p.models.iter().map(move |m| model_key(&p.name, m)))
    }
}

/// The key of a model in `model_state.json`.
pub fn model_key(provider: &str, model: &str) -> String {
    format!("{provider}::{model}")
}

impl Provider {
    /// Read the environment: fill the URL and find the key.
    pub fn resolve(&self) -> std::result::Result<Resolved, Unusable> {
        self.resolve_with(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    pub fn resolve_with(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> std::result::Result<Resolved, Unusable> {
        if !self.enabled {
            return Err(Unusable::Disabled);
        }
        let mut base_url = self.base_url.clone();
        for (placeholder, var) in &self.url_vars {
            let value = env(var).ok_or_else(|| Unusable::Missing(var.clone()))?;
            base_url = base_url.replace(&format!("{{{placeholder}}}"), &value);
        }
        let found = self
            .api_key_env
            .iter()
            .find_map(|var| env(var).map(|v| (var.clone(), Secret::new(v))));
        let (key_source, key) = match found {
            Some((var, key)) => (Some(var), Some(key)),
            None if self.api_key_env.is_empty() || self.key_optional => (None, None),
            None => return Err(Unusable::Missing(self.api_key_env.join(" or "))),
        };
        Ok(Resolved {
            provider: self.clone(),
            base_url: base_url.trim_end_matches('/').to_string(),
            key,
            key_source,
        })
    }
}

fn merge_defaults(into: &mut DefaultsToml, from: &DefaultsToml) {
    if from.spacing_secs.is_some() {
        into.spacing_secs = from.spacing_secs;
    }
    if from.timeout_secs.is_some() {
        into.timeout_secs = from.timeout_secs;
    }
    if from.max_tokens.is_some() {
        into.max_tokens = from.max_tokens;
    }
    if from.disable_after.is_some() {
        into.disable_after = from.disable_after;
    }
}

fn merge_provider(into: &mut ProviderToml, from: ProviderToml) {
    macro_rules! take {
        ($($f:ident),*) => { $( if from.$f.is_some() { into.$f = from.$f; } )* };
    }
    take!(
        enabled,
        dialect,
        base_url,
        api_key_env,
        key_optional,
        url_vars,
        models,
        spacing_secs,
        timeout_secs,
        max_tokens,
        headers,
        priority,
        limits
    );
}

fn secs(v: f64, field: &str, origin: &str) -> Result<Duration> {
    Duration::try_from_secs_f64(v).map_err(|_| {
        Error::config(format!(
            "invalid config {}: {field} must be a non-negative number of seconds, got {v}",
            if origin.is_empty() {
                "(embedded)"
            } else {
                origin
            }
        ))
    })
}

fn validate_provider(t: ProviderToml, d: &Defaults, origin: &str) -> Result<Provider> {
    let bad = |msg: String| -> Error {
        ConfigError(format!(
            "invalid config {}: provider \"{}\": {msg}",
            if origin.is_empty() {
                "(embedded)"
            } else {
                origin
            },
            t.name
        ))
        .into()
    };
    if t.name.trim().is_empty() || t.name.contains("::") {
        return Err(bad(
            "a provider needs a non-empty name without \"::\"".into()
        ));
    }
    let dialect = t.dialect.ok_or_else(|| {
        bad("missing `dialect` (openai, anthropic or gemini) for a new provider".into())
    })?;
    let base_url = t
        .base_url
        .clone()
        .ok_or_else(|| bad("missing `base_url` for a new provider".into()))?;
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(bad(format!(
            "base_url \"{base_url}\" must start with http:// or https://"
        )));
    }
    let url_vars = t.url_vars.clone().unwrap_or_default();
    for placeholder in url_vars.keys() {
        if !base_url.contains(&format!("{{{placeholder}}}")) {
            return Err(bad(format!(
                "url_vars names {{{placeholder}}}, which base_url does not contain"
            )));
        }
    }
    let models = t.models.clone().unwrap_or_default();
    let enabled = t.enabled.unwrap_or(true);
    if enabled && models.is_empty() {
        return Err(bad("`models` is empty".into()));
    }
    if let Some(m) = models.iter().find(|m| m.trim().is_empty()) {
        return Err(bad(format!("model id \"{m}\" is empty")));
    }
    let spacing = match t.spacing_secs {
        Some(v) => secs(v, "spacing_secs", origin)?,
        None => d.spacing,
    };
    let timeout = match t.timeout_secs {
        Some(v) => secs(v, "timeout_secs", origin)?,
        None => d.timeout,
    };
    if timeout.is_zero() {
        return Err(bad("timeout_secs must be greater than 0".into()));
    }
    Ok(Provider {
        enabled,
        dialect,
        base_url,
        api_key_env: t
            .api_key_env
            .clone()
            .map(KeyEnv::into_vec)
            .unwrap_or_default(),
        key_optional: t.key_optional.unwrap_or(false),
        url_vars,
        models,
        spacing,
        timeout,
        max_tokens: t.max_tokens.unwrap_or(d.max_tokens),
        headers: t.headers.clone().unwrap_or_default(),
        priority: t.priority.unwrap_or(100),
        limits: t.limits.clone().unwrap_or_default(),
        name: t.name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_catalog_covers_the_old_tool() {
        let c = Catalog::embedded();
        for name in [
            "anthropic",
            "cerebras",
            "cloudflare",
            "cohere",
            "fireworks",
            "gemini",
            "groq",
            "huggingface",
            "mistral",
            "ollama",
            "openai",
            "openrouter",
            "pollinations",
            "sambanova",
            "github",
            "nvidia",
            "together",
        ] {
            let p = c.provider(name).unwrap_or_else(|| panic!("{name} missing"));
            assert!(!p.models.is_empty());
        }
        assert_eq!(c.defaults.spacing, Duration::from_secs(90));
    }

    #[test]
    fn user_file_overrides_field_by_field_and_removes() {
        let c = Catalog::from_toml_str(
            r#"
            [defaults]
            spacing_secs = 0.2
            [[providers]]
            name = "groq"
            models = ["only-this"]
            [[providers]]
            name = "openai"
            enabled = false
            [[providers]]
            name = "local"
            dialect = "openai"
            base_url = "http://127.0.0.1:9/v1"
            models = ["m"]
            "#,
            "test.toml",
        )
        .unwrap();
        let groq = c.provider("groq").unwrap();
        assert_eq!(groq.models, vec!["only-this"]);
        assert_eq!(groq.base_url, "https://api.groq.com/openai/v1");
        assert_eq!(groq.spacing, Duration::from_millis(200));
        assert!(!c.provider("openai").unwrap().enabled);
        assert!(c.provider("local").unwrap().api_key_env.is_empty());
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let err = Catalog::from_toml_str("[defaults]\nspacing_secs = 1\nspacingg = 2\n", "my.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("spacingg"), "{err}");
        assert!(err.contains("line 3"), "{err}");
        assert!(err.contains("my.toml"), "{err}");
    }

    #[test]
    fn cloudflare_account_placeholder_is_filled_from_env() {
        let c = Catalog::embedded();
        let cf = c.provider("cloudflare").unwrap();
        let env = |k: &str| match k {
            "CLOUDFLARE_ACCOUNT_ID" => Some("acc123".to_string()),
            "CLOUDFLARE_API_TOKEN" => Some("tok".to_string()),
            _ => None,
        };
        let r = cf.resolve_with(env).unwrap();
        assert_eq!(
            r.base_url,
            "https://api.cloudflare.com/client/v4/accounts/acc123/ai/v1"
        );
        let missing = cf.resolve_with(|_| None).unwrap_err();
        assert_eq!(missing, Unusable::Missing("CLOUDFLARE_ACCOUNT_ID".into()));
        let groq = c
            .provider("groq")
            .unwrap()
            .resolve_with(|_| None)
            .unwrap_err();
        assert_eq!(groq.to_string(), "skipped: set GROQ_API_KEY");
    }
}
