//! The `[route]` and `[aliases]` tables of `llmprobe.toml`: how `route`
//! falls back, where it listens, and names for lists of models.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

use super::bounded_secs;

/// `[route]` as written. Every field is optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RouteToml {
    max_attempts: Option<u32>,
    budget_secs: Option<f64>,
    listen: Option<String>,
    auth_token_env: Option<String>,
    idle_timeout_secs: Option<f64>,
    request_timeout_secs: Option<f64>,
    max_body_bytes: Option<u64>,
    shared_state: Option<String>,
    reserve_max_tokens: Option<u32>,
    affinity_secs: Option<f64>,
    detail_header: Option<bool>,
}

/// How `route` behaves, validated. Command-line flags override these.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteSettings {
    /// At most this many upstream attempts per request (docs/routing.md: 20).
    pub max_attempts: u32,
    /// All attempts of one request start within this time (docs/routing.md: 45 s).
    pub time_budget: Duration,
    /// `--serve` binds here (loopback by default).
    pub listen: SocketAddr,
    /// The variable holding the inbound bearer token; `None`: no auth.
    pub auth_token_env: Option<String>,
    /// A stream that sends nothing for this long counts as failed.
    pub idle_timeout: Duration,
    /// A whole request, every attempt included, ends after this.
    pub request_timeout: Duration,
    /// Request bodies larger than this get a 413.
    pub max_body_bytes: usize,
    /// `redis://…` to share cooldowns and limits between instances.
    pub shared_state: Option<String>,
    /// The answer's tokens counted against token limits before the
    /// upstream reports its usage, when the client sets no `max_tokens` or
    /// one above this (docs/configuration.md).
    pub reserve_max_tokens: u32,
    /// How long a conversation keeps going to the model that served its
    /// previous turn; zero turns affinity off (docs/routing.md).
    pub affinity: Duration,
    /// Send `X-Fallback-Detail` (each failed attempt's class and short,
    /// redacted reason) on routed responses (docs/routing.md).
    pub detail_header: bool,
}

pub const MAX_ATTEMPTS: std::ops::RangeInclusive<u32> = 1..=100;
pub const BUDGET_SECS: std::ops::RangeInclusive<f64> = 0.0..=3600.0;
pub const MAX_BODY: std::ops::RangeInclusive<u64> = 1024..=(256 << 20);
pub const RESERVE_MAX_TOKENS: std::ops::RangeInclusive<u32> = 1..=1_000_000;
pub const AFFINITY_SECS: std::ops::RangeInclusive<f64> = 0.0..=86400.0;

impl Default for RouteSettings {
    fn default() -> Self {
        RouteSettings {
            max_attempts: 20,
            time_budget: Duration::from_secs(45),
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            auth_token_env: None,
            idle_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(300),
            max_body_bytes: 4 << 20,
            shared_state: None,
            reserve_max_tokens: 4096,
            affinity: Duration::from_secs(30 * 60),
            detail_header: false,
        }
    }
}

impl RouteSettings {
    /// Validate `[route]`; `bad` turns a message into the caller's error
    /// (which names the file).
    pub(super) fn from_toml(t: &RouteToml) -> Result<RouteSettings, String> {
        let d = RouteSettings::default();
        let secs = |v: Option<f64>, field: &str, default: Duration| -> Result<Duration, String> {
            match v {
                None => Ok(default),
                Some(v) => {
                    bounded_secs(v, BUDGET_SECS, true).map_err(|why| format!("route.{field} {why}"))
                }
            }
        };
        let max_attempts = match t.max_attempts {
            None => d.max_attempts,
            Some(n) if MAX_ATTEMPTS.contains(&n) => n,
            Some(n) => {
                return Err(format!(
                    "route.max_attempts {n} is out of range: expected {} to {}",
                    MAX_ATTEMPTS.start(),
                    MAX_ATTEMPTS.end()
                ));
            }
        };
        let listen = match &t.listen {
            None => d.listen,
            Some(s) => {
                crate::server::parse_listen(s).map_err(|why| format!("route.listen {why}"))?
            }
        };
        let max_body_bytes = match t.max_body_bytes {
            None => d.max_body_bytes,
            Some(n) if MAX_BODY.contains(&n) => n as usize,
            Some(n) => {
                return Err(format!(
                    "route.max_body_bytes {n} is out of range: expected {} to {}",
                    MAX_BODY.start(),
                    MAX_BODY.end()
                ));
            }
        };
        let reserve_max_tokens = match t.reserve_max_tokens {
            None => d.reserve_max_tokens,
            Some(n) if RESERVE_MAX_TOKENS.contains(&n) => n,
            Some(n) => {
                return Err(format!(
                    "route.reserve_max_tokens {n} is out of range: expected {} to {}",
                    RESERVE_MAX_TOKENS.start(),
                    RESERVE_MAX_TOKENS.end()
                ));
            }
        };
        let affinity = match t.affinity_secs {
            None => d.affinity,
            Some(v) => bounded_secs(v, AFFINITY_SECS, false)
                .map_err(|why| format!("route.affinity_secs {why}"))?,
        };
        if let Some(url) = &t.shared_state
            && !url.starts_with("redis://")
        {
            return Err(format!(
                "route.shared_state {url:?} must start with redis://"
            ));
        }
        Ok(RouteSettings {
            max_attempts,
            time_budget: secs(t.budget_secs, "budget_secs", d.time_budget)?,
            listen,
            auth_token_env: t.auth_token_env.clone().filter(|v| !v.trim().is_empty()),
            idle_timeout: secs(t.idle_timeout_secs, "idle_timeout_secs", d.idle_timeout)?,
            request_timeout: secs(
                t.request_timeout_secs,
                "request_timeout_secs",
                d.request_timeout,
            )?,
            max_body_bytes,
            shared_state: t.shared_state.clone(),
            reserve_max_tokens,
            affinity,
            detail_header: t.detail_header.unwrap_or(d.detail_header),
        })
    }
}

/// Check `[aliases]`: every target is a `provider::model` of the catalog.
pub(super) fn validate_aliases(
    aliases: &BTreeMap<String, Vec<String>>,
    exists: impl Fn(&str) -> bool,
) -> Result<(), String> {
    for (name, targets) in aliases {
        if name.contains("::") || name == "auto" || name.trim().is_empty() {
            return Err(format!(
                "alias {name:?}: a name must be non-empty, not \"auto\", and without \"::\""
            ));
        }
        if targets.is_empty() {
            return Err(format!("alias {name:?} lists no models"));
        }
        for t in targets {
            if !t.contains("::") {
                return Err(format!("alias {name:?}: {t:?} is not provider::model"));
            }
            if !exists(t) {
                return Err(format!(
                    "alias {name:?}: {t:?} is not in the catalog (see `llmprobe check --list`)"
                ));
            }
        }
    }
    Ok(())
}
