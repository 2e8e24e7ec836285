//! The `[route]` and `[aliases]` tables of `llmprobe.toml`: how `route`
//! falls back, where it listens, and names for lists of models.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ModelKey, bounded_secs};

/// `[route]` as written. Every field is optional. Every field is also a
/// variable `LLMPROBE_ROUTE_<FIELD>`: [`route_keys`] reads the fields from
/// the serde derive, so one added here is one there.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RouteToml {
    max_attempts: Option<u32>,
    budget_secs: Option<f64>,
    listen: Option<String>,
    auth_token_env: Option<String>,
    idle_timeout_secs: Option<f64>,
    request_timeout_secs: Option<f64>,
    read_timeout_secs: Option<f64>,
    max_body_bytes: Option<u64>,
    shared_state: Option<String>,
    reserve_max_tokens: Option<u32>,
    affinity_secs: Option<f64>,
    detail_header: Option<bool>,
    reprobe_paused_secs: Option<f64>,
    degraded_below: Option<f64>,
    last_resort_paused: Option<bool>,
    record: Option<Record>,
    public_status: Option<bool>,
    item_store_secs: Option<u64>,
    item_store_max_bytes: Option<u64>,
    item_store_shared: Option<bool>,
    order: Option<Order>,
}

/// Where `route --serve` reads the record (model states, recent health,
/// capability verdicts) from: `[route] record`, `--record`.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Record {
    /// The local stats directory (the default).
    #[default]
    Local,
    /// What `check --shared-state` publishes to Redis (needs
    /// `shared_state`).
    Shared,
}

/// How `route` orders candidates of the same band (`[route] order`,
/// docs/routing.md, "Order"): by configured priority and the probes'
/// 24 h uptime and latency as before this setting, by the measured score
/// alone, or by priority then the score.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Order {
    /// Configured priority, then 24 h uptime, then median probe latency,
    /// then catalog order (the only order before `order` existed).
    Priority,
    /// The measured score first (priority only breaks its ties); aliases
    /// are ordered by it too.
    Fastest,
    /// Configured priority, then the measured score (the default).
    #[default]
    Balanced,
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
    /// A client has this long to send a request's head (which also closes
    /// a keep-alive connection idle for as long), and as long again for
    /// its body; then its connection is closed (head) or it gets a 408
    /// (body), so a stalled client holds nothing for long.
    pub read_timeout: Duration,
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
    /// How long after a pause `route --serve` first re-probes a paused
    /// model (then 2×, 4×… capped at [`crate::state::reprobe::CAP`]); zero
    /// turns re-probes off.
    pub reprobe_paused: Duration,
    /// Route is degraded when the share of active providers falls below
    /// this (counted over at least [`DEGRADED_MIN_PROVIDERS`] providers).
    pub degraded_below: f64,
    /// While degraded, try paused models as a last resort when no active
    /// candidate can serve a request.
    pub last_resort_paused: bool,
    /// Where the record comes from: the local stats directory, or Redis.
    pub record: Record,
    /// Serve the public form of the status page (`/status`) and the badges
    /// (`/badge/…`) without the inbound token; otherwise they sit behind it
    /// like `/v1/*`.
    pub public_status: bool,
    /// How long the Responses surface keeps the output items it returns
    /// and the responses they belong to, after they were stored or last
    /// used (for `item_reference` and `previous_response_id`); zero keeps
    /// nothing (docs/surfaces/responses.md).
    pub item_store: Duration,
    /// The most the item store holds in memory, counted as the bytes of
    /// its JSON; the oldest go first.
    pub item_store_max_bytes: usize,
    /// Keep the items in Redis too (`shared_state`), so that every
    /// instance resolves the others' items.
    pub item_store_shared: bool,
    /// How candidates of one band are ordered ([`Order`]).
    pub order: Order,
    /// Where each value came from, for `route --status`.
    pub origins: Origins,
}

pub const MAX_ATTEMPTS: std::ops::RangeInclusive<u32> = 1..=100;
pub const BUDGET_SECS: std::ops::RangeInclusive<f64> = 0.0..=3600.0;
pub const MAX_BODY: std::ops::RangeInclusive<u64> = 1024..=(256 << 20);
pub const RESERVE_MAX_TOKENS: std::ops::RangeInclusive<u32> = 1..=1_000_000;
pub const AFFINITY_SECS: std::ops::RangeInclusive<f64> = 0.0..=86400.0;
pub const REPROBE_SECS: std::ops::RangeInclusive<f64> = 0.0..=86400.0;
/// `item_store_secs`: up to 30 days, as long as OpenAI keeps a response.
pub const ITEM_STORE_SECS: std::ops::RangeInclusive<u64> = 0..=(30 * 86400);
/// `item_store_max_bytes`: 1 KiB to 64 GiB.
pub const ITEM_STORE_BYTES: std::ops::RangeInclusive<u64> = 1024..=(64 << 30);
/// Degraded mode is judged only over at least this many usable providers.
pub const DEGRADED_MIN_PROVIDERS: usize = 3;

impl Default for RouteSettings {
    fn default() -> Self {
        RouteSettings {
            max_attempts: 20,
            time_budget: Duration::from_secs(45),
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            auth_token_env: None,
            idle_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(300),
            read_timeout: Duration::from_secs(30),
            max_body_bytes: 4 << 20,
            shared_state: None,
            reserve_max_tokens: 4096,
            affinity: Duration::from_secs(30 * 60),
            detail_header: false,
            reprobe_paused: Duration::from_secs(300),
            degraded_below: 0.5,
            last_resort_paused: true,
            record: Record::Local,
            public_status: false,
            item_store: Duration::from_secs(3600),
            item_store_max_bytes: 32 << 20,
            item_store_shared: false,
            order: Order::Balanced,
            origins: Origins::default(),
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
                crate::http_server::parse_listen(s).map_err(|why| format!("route.listen {why}"))?
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
        let reprobe_paused = match t.reprobe_paused_secs {
            None => d.reprobe_paused,
            Some(v) => bounded_secs(v, REPROBE_SECS, false)
                .map_err(|why| format!("route.reprobe_paused_secs {why}"))?,
        };
        let degraded_below = match t.degraded_below {
            None => d.degraded_below,
            Some(v) if (0.0..=1.0).contains(&v) => v,
            Some(v) => {
                return Err(format!(
                    "route.degraded_below {v} is out of range: expected a share from 0 to 1 (0 turns degraded mode off)"
                ));
            }
        };
        let item_store = match t.item_store_secs {
            None => d.item_store,
            Some(n) if ITEM_STORE_SECS.contains(&n) => Duration::from_secs(n),
            Some(n) => {
                return Err(format!(
                    "route.item_store_secs {n} is out of range: expected {} to {} seconds (0 keeps nothing)",
                    ITEM_STORE_SECS.start(),
                    ITEM_STORE_SECS.end()
                ));
            }
        };
        let item_store_max_bytes = match t.item_store_max_bytes {
            None => d.item_store_max_bytes,
            Some(n) if ITEM_STORE_BYTES.contains(&n) => n as usize,
            Some(n) => {
                return Err(format!(
                    "route.item_store_max_bytes {n} is out of range: expected {} to {}",
                    ITEM_STORE_BYTES.start(),
                    ITEM_STORE_BYTES.end()
                ));
            }
        };
        // `record = "shared"` without `shared_state` is refused where the
        // flags are known too (`route --serve`).
        let record = t.record.unwrap_or(d.record);
        if let Some(url) = &t.shared_state
            && !url.starts_with("redis://")
        {
            return Err(format!(
                "route.shared_state {:?} must start with redis://",
                redact_url(url)
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
            read_timeout: secs(t.read_timeout_secs, "read_timeout_secs", d.read_timeout)?,
            max_body_bytes,
            shared_state: t.shared_state.clone(),
            reserve_max_tokens,
            affinity,
            detail_header: t.detail_header.unwrap_or(d.detail_header),
            reprobe_paused,
            degraded_below,
            last_resort_paused: t.last_resort_paused.unwrap_or(d.last_resort_paused),
            record,
            public_status: t.public_status.unwrap_or(d.public_status),
            item_store,
            item_store_max_bytes,
            item_store_shared: t.item_store_shared.unwrap_or(d.item_store_shared),
            order: t.order.unwrap_or(d.order),
            origins: Origins::default(),
        })
    }

    /// The settings as `[route]` would write them (a password in
    /// `shared_state` masked), for `route --status`. Every field is named,
    /// so a field added to [`RouteToml`] must be added here.
    fn to_toml(&self) -> RouteToml {
        RouteToml {
            max_attempts: Some(self.max_attempts),
            budget_secs: Some(self.time_budget.as_secs_f64()),
            listen: Some(self.listen.to_string()),
            auth_token_env: self.auth_token_env.clone(),
            idle_timeout_secs: Some(self.idle_timeout.as_secs_f64()),
            request_timeout_secs: Some(self.request_timeout.as_secs_f64()),
            read_timeout_secs: Some(self.read_timeout.as_secs_f64()),
            max_body_bytes: Some(self.max_body_bytes as u64),
            shared_state: self.shared_state.as_deref().map(redact_url),
            reserve_max_tokens: Some(self.reserve_max_tokens),
            affinity_secs: Some(self.affinity.as_secs_f64()),
            detail_header: Some(self.detail_header),
            reprobe_paused_secs: Some(self.reprobe_paused.as_secs_f64()),
            degraded_below: Some(self.degraded_below),
            last_resort_paused: Some(self.last_resort_paused),
            record: Some(self.record),
            public_status: Some(self.public_status),
            item_store_secs: Some(self.item_store.as_secs()),
            item_store_max_bytes: Some(self.item_store_max_bytes as u64),
            item_store_shared: Some(self.item_store_shared),
            order: Some(self.order),
        }
    }

    /// Every `[route]` setting and every `daily_cap` that is set: its
    /// value and where it came from, `[route]` keys first in the table's
    /// order. A value that is unset (no auth token variable, no shared
    /// state) is `null`.
    pub fn effective(&self) -> Vec<Effective> {
        let values = match serde_json::to_value(self.to_toml()) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => Default::default(),
        };
        let mut out: Vec<Effective> = values
            .into_iter()
            .map(|(key, value)| Effective {
                origin: self
                    .origins
                    .route
                    .get(&key)
                    .cloned()
                    .unwrap_or(Origin::Default),
                variable: route_var(&key),
                setting: format!("route.{key}"),
                value,
            })
            .collect();
        for (provider, cap) in &self.origins.daily_cap {
            out.push(Effective {
                setting: format!("providers.{provider}.daily_cap"),
                value: cap.value.into(),
                origin: cap.origin.clone(),
                variable: daily_cap_var(provider),
            });
        }
        out
    }
}

/// Where a setting's value came from, by precedence: a command-line flag,
/// then the environment, then `llmprobe.toml`, then the default (the
/// embedded catalog's, for a `daily_cap`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Flag,
    /// The variable that set it.
    Env(String),
    File,
    Default,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Flag => f.write_str("flag"),
            Origin::Env(var) => write!(f, "env {var}"),
            // Whatever the file is called: the name says what kind of source.
            Origin::File => f.write_str("llmprobe.toml"),
            Origin::Default => f.write_str("default"),
        }
    }
}

impl Serialize for Origin {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A provider's `daily_cap` and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapOrigin {
    pub value: u64,
    pub origin: Origin,
}

/// Where each `[route]` setting and each `daily_cap` came from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Origins {
    /// By `[route]` key; a key missing here has its default.
    pub route: BTreeMap<String, Origin>,
    /// By provider name: the providers whose `daily_cap` is set.
    pub daily_cap: BTreeMap<String, CapOrigin>,
}

/// One setting in force, for `route --status`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Effective {
    /// `route.budget_secs`, `providers.groq.daily_cap`.
    pub setting: String,
    pub value: serde_json::Value,
    /// `flag`, `env LLMPROBE_ROUTE_…`, `llmprobe.toml` or `default`.
    #[serde(rename = "source")]
    pub origin: Origin,
    /// The variable that would set it.
    pub variable: String,
}

/// A URL without its password, for what is shown.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
        _ => url.to_string(),
    }
}

/// The prefix of the variables that set `[route]` keys.
pub const ROUTE_PREFIX: &str = "LLMPROBE_ROUTE_";
/// The prefix of the variables that set a provider's `daily_cap`.
pub const DAILY_CAP_PREFIX: &str = "LLMPROBE_DAILY_CAP_";

/// Every `[route]` key, in the table's order, read from [`RouteToml`]'s
/// serde derive: the TOML reader and the environment's share this list.
pub fn route_keys() -> Vec<String> {
    match serde_json::to_value(RouteToml::default()) {
        Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    }
}

/// `LLMPROBE_ROUTE_BUDGET_SECS` for `budget_secs`.
pub fn route_var(key: &str) -> String {
    format!("{ROUTE_PREFIX}{}", key.to_ascii_uppercase())
}

/// `LLMPROBE_DAILY_CAP_GITHUB_MODELS` for `github-models`: the name upper
/// case, every character other than an ASCII letter or digit written `_`.
pub fn daily_cap_var(provider: &str) -> String {
    let name: String = provider
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("{DAILY_CAP_PREFIX}{name}")
}

/// A variable's text as a TOML value would read: `true`/`false`, an
/// integer, a float, a quoted string; anything else is the text itself
/// (`127.0.0.1:9000`, `redis://…`, a variable name).
fn env_value(raw: &str) -> toml::Value {
    let parsed = toml::from_str::<toml::Table>(&format!("v = {}", raw.trim()))
        .ok()
        .filter(|t| t.len() == 1)
        .and_then(|mut t| t.remove("v"));
    match parsed {
        Some(v @ (toml::Value::Boolean(_) | toml::Value::Integer(_) | toml::Value::Float(_))) => v,
        Some(v @ toml::Value::String(_)) if raw.trim().starts_with(['"', '\'']) => v,
        _ => toml::Value::String(raw.to_string()),
    }
}

/// `raw` read as a `T` (`wrap` puts the value where `T` wants it); text
/// that reads as a number or boolean but
/// is wanted as text is taken as text (`LLMPROBE_ROUTE_AUTH_TOKEN_ENV=1`).
fn read_as<T: serde::de::DeserializeOwned>(
    raw: &str,
    wrap: impl Fn(toml::Value) -> toml::Value,
) -> Option<T> {
    let v = env_value(raw);
    if v.is_str() {
        return wrap(v).try_into().ok();
    }
    wrap(v)
        .try_into()
        .ok()
        .or_else(|| wrap(toml::Value::String(raw.to_string())).try_into().ok())
}

/// What a `T` takes, said for an operator: found by trying one value of
/// each kind, so it follows the field's type.
fn expected<T: serde::de::DeserializeOwned>(
    wrap: impl Fn(toml::Value) -> toml::Value,
) -> &'static str {
    let takes = |v: toml::Value| wrap(v).try_into::<T>().is_ok();
    if takes(toml::Value::Boolean(true)) {
        "true or false"
    } else if takes(toml::Value::Float(0.5)) {
        "a number"
    } else if takes(toml::Value::Integer(1)) {
        "a whole number"
    } else {
        "text"
    }
}

/// `[route]` keys and `daily_cap`s from the environment, parsed and
/// validated, before they are laid over `llmprobe.toml`.
#[derive(Debug, Default)]
pub(super) struct FromEnv {
    /// The `[route]` keys the environment sets.
    pub route: RouteToml,
    /// The variable that set each of those keys.
    pub route_vars: BTreeMap<String, String>,
    /// `daily_cap` by provider name, with its variable.
    pub daily_cap: BTreeMap<String, (u64, String)>,
}

/// Read the `LLMPROBE_ROUTE_*` and `LLMPROBE_DAILY_CAP_*` variables of
/// `vars` (the process's, or a test's). `providers` is every provider name
/// of the catalog. An empty variable counts as unset. Every error names
/// the variable and says what was expected.
pub(super) fn from_env(vars: &[(String, String)], providers: &[&str]) -> Result<FromEnv, String> {
    let keys = route_keys();
    let mut caps: BTreeMap<String, &str> = BTreeMap::new();
    for p in providers {
        if let Some(other) = caps.insert(daily_cap_var(p), p) {
            return Err(format!(
                "providers {other:?} and {p:?} both take the variable {}: rename one",
                daily_cap_var(p)
            ));
        }
    }
    let mut out = FromEnv::default();
    let mut table = serde_json::Map::new();
    for (name, raw) in vars {
        // A redis:// URL may hold a password: messages show it masked.
        let shown = redact_url(raw);
        if let Some(rest) = name.strip_prefix(ROUTE_PREFIX) {
            let key = rest.to_ascii_lowercase();
            if !keys.contains(&key) || route_var(&key) != *name {
                let all: Vec<String> = keys.iter().map(|k| route_var(k)).collect();
                return Err(format!(
                    "unknown variable {name}: it sets no [route] key.{} The variables are {}",
                    did_you_mean(name, &all),
                    all.join(", ")
                ));
            }
            if raw.is_empty() {
                continue;
            }
            let wrap =
                |v: toml::Value| toml::Value::Table(toml::Table::from_iter([(key.clone(), v)]));
            let Some(one) = read_as::<RouteToml>(raw, wrap) else {
                return Err(format!(
                    "{name}={shown:?}: expected {} (as [route] {key} in llmprobe.toml)",
                    expected::<RouteToml>(wrap)
                ));
            };
            // The same checks and ranges as the file's.
            RouteSettings::from_toml(&one).map_err(|why| {
                let why = why.strip_prefix(&format!("route.{key} ")).unwrap_or(&why);
                format!("{name}={shown:?}: {why}")
            })?;
            if let Ok(serde_json::Value::Object(m)) = serde_json::to_value(&one) {
                table.extend(m.into_iter().filter(|(_, v)| !v.is_null()));
            }
            out.route_vars.insert(key, name.clone());
        } else if name.starts_with(DAILY_CAP_PREFIX) {
            let Some(provider) = caps.get(name) else {
                let all: Vec<String> = caps.keys().cloned().collect();
                return Err(format!(
                    "unknown variable {name}: it names no provider of the catalog.{} The providers' variables are {}",
                    did_you_mean(name, &all),
                    all.join(", ")
                ));
            };
            if raw.is_empty() {
                continue;
            }
            let Some(cap) = read_as::<u64>(raw, |v| v) else {
                return Err(format!(
                    "{name}={shown:?}: expected a whole number of requests a day (as daily_cap in llmprobe.toml)"
                ));
            };
            super::check_daily_cap(cap).map_err(|why| format!("{name}={shown:?}: {why}"))?;
            out.daily_cap
                .insert(provider.to_string(), (cap, name.clone()));
        }
    }
    out.route = serde_json::from_value(serde_json::Value::Object(table))
        .map_err(|e| format!("the LLMPROBE_ROUTE_* variables: {e}"))?;
    Ok(out)
}

/// ` Did you mean X?` when one of `names` is a likely typo of `name`: one
/// it begins (`…_BUDGET` for `…_BUDGET_SECS`) before the closest by edits.
fn did_you_mean(name: &str, names: &[String]) -> String {
    names
        .iter()
        .map(|n| (!n.starts_with(name), strsim::levenshtein(name, n), n))
        .filter(|(_, d, _)| *d <= (name.len() / 4).max(2))
        .min()
        .map(|(_, _, n)| format!(" Did you mean {n}?"))
        .unwrap_or_default()
}

/// `file`'s `[route]` with `env`'s keys laid over it, validated, each key's
/// origin recorded.
pub(super) fn layered(file: &RouteToml, env: &FromEnv) -> Result<RouteSettings, String> {
    let object = |t: &RouteToml| match serde_json::to_value(t) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => Default::default(),
    };
    let mut merged = object(file);
    let mut origins = BTreeMap::new();
    for (key, v) in &merged {
        if !v.is_null() {
            origins.insert(key.clone(), Origin::File);
        }
    }
    for (key, v) in object(&env.route) {
        if !v.is_null() {
            merged.insert(key.clone(), v);
            let var = env
                .route_vars
                .get(&key)
                .cloned()
                .unwrap_or_else(|| route_var(&key));
            origins.insert(key, Origin::Env(var));
        }
    }
    let t: RouteToml = serde_json::from_value(serde_json::Value::Object(merged))
        .map_err(|e| format!("[route]: {e}"))?;
    let mut s = RouteSettings::from_toml(&t)?;
    s.origins.route = origins;
    Ok(s)
}

/// Check `[aliases]`: every target is a `provider::model` of the catalog
/// (`exists` is asked with its provider and model).
pub(super) fn validate_aliases(
    aliases: &BTreeMap<String, Vec<String>>,
    exists: impl Fn(&str, &str) -> bool,
) -> Result<(), String> {
    for (name, targets) in aliases {
        if ModelKey::is_key(name) || name == "auto" || name.trim().is_empty() {
            return Err(format!(
                "alias {name:?}: a name must be non-empty, not \"auto\", and without \"::\""
            ));
        }
        if targets.is_empty() {
            return Err(format!("alias {name:?} lists no models"));
        }
        for t in targets {
            let Some((provider, model)) = ModelKey::split(t) else {
                return Err(format!("alias {name:?}: {t:?} is not provider::model"));
            };
            if !exists(provider, model) {
                return Err(format!(
                    "alias {name:?}: {t:?} is not in the catalog (see `llmprobe check --list`)"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn env(v: &[(&str, &str)]) -> Result<FromEnv, String> {
        from_env(&vars(v), &["groq", "github-models"])
    }

    #[test]
    fn variable_names() {
        assert_eq!(route_var("budget_secs"), "LLMPROBE_ROUTE_BUDGET_SECS");
        assert_eq!(
            daily_cap_var("github-models"),
            "LLMPROBE_DAILY_CAP_GITHUB_MODELS"
        );
        assert_eq!(daily_cap_var("my.vLLM 2"), "LLMPROBE_DAILY_CAP_MY_VLLM_2");
        assert_eq!(daily_cap_var("café"), "LLMPROBE_DAILY_CAP_CAF_");
    }

    /// Every field of [`RouteToml`] is a key, has a variable that sets it,
    /// and is shown by `route --status`: a field added later cannot be
    /// left out of any of them.
    #[test]
    fn every_route_key_has_a_variable_and_a_shown_value() {
        let keys = route_keys();
        assert!(keys.len() >= 11, "{keys:?}");
        assert!(keys.contains(&"budget_secs".to_string()));
        let d = RouteSettings::default();
        // `to_toml` names every field and reads back as the same settings.
        assert_eq!(RouteSettings::from_toml(&d.to_toml()).unwrap(), d);
        let shown: Vec<String> = d.effective().into_iter().map(|e| e.setting).collect();
        let want: Vec<String> = keys.iter().map(|k| format!("route.{k}")).collect();
        assert_eq!(shown, want);
        // Each key's variable sets it, to a value other than the default.
        let other = RouteSettings {
            max_attempts: 7,
            time_budget: Duration::from_secs(9),
            listen: "127.0.0.1:9".parse().unwrap(),
            auth_token_env: Some("TOKEN".into()),
            idle_timeout: Duration::from_secs(8),
            request_timeout: Duration::from_secs(7),
            read_timeout: Duration::from_secs(6),
            max_body_bytes: 4096,
            shared_state: Some("redis://h:1".into()),
            reserve_max_tokens: 6,
            affinity: Duration::from_secs(5),
            detail_header: true,
            reprobe_paused: Duration::from_secs(60),
            degraded_below: 0.25,
            last_resort_paused: false,
            record: Record::Shared,
            public_status: true,
            item_store: Duration::from_secs(60),
            item_store_max_bytes: 4096,
            item_store_shared: true,
            order: Order::Priority,
            origins: Origins::default(),
        };
        let values = match serde_json::to_value(other.to_toml()).unwrap() {
            serde_json::Value::Object(m) => m,
            v => panic!("{v}"),
        };
        let mut set = Vec::new();
        for (key, v) in &values {
            assert_ne!(Some(v), serde_json::to_value(d.to_toml()).unwrap().get(key));
            let text = match v {
                serde_json::Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            set.push((route_var(key), text));
        }
        let from = from_env(&set, &[]).unwrap();
        let s = layered(&RouteToml::default(), &from).unwrap();
        assert_eq!(
            RouteSettings {
                origins: Origins::default(),
                ..s.clone()
            },
            other
        );
        for key in &keys {
            assert_eq!(s.origins.route[key], Origin::Env(route_var(key)), "{key}");
        }
    }

    #[test]
    fn values_read_as_toml_would() {
        let f = env(&[
            ("LLMPROBE_ROUTE_BUDGET_SECS", "20"),
            ("LLMPROBE_ROUTE_AFFINITY_SECS", "1.5"),
            ("LLMPROBE_ROUTE_MAX_BODY_BYTES", "1_048_576"),
            ("LLMPROBE_ROUTE_DETAIL_HEADER", "true"),
            ("LLMPROBE_ROUTE_LISTEN", "localhost:9000"),
            ("LLMPROBE_ROUTE_AUTH_TOKEN_ENV", "\"MY_TOKEN\""),
            ("LLMPROBE_ROUTE_SHARED_STATE", "redis://127.0.0.1:6379/0"),
            // Empty: unset, the file's value stands.
            ("LLMPROBE_ROUTE_MAX_ATTEMPTS", ""),
        ])
        .unwrap();
        let file: RouteToml = toml::from_str("max_attempts = 4\nbudget_secs = 30").unwrap();
        let s = layered(&file, &f).unwrap();
        assert_eq!(s.time_budget, Duration::from_secs(20));
        assert_eq!(s.affinity, Duration::from_millis(1500));
        assert_eq!(s.max_body_bytes, 1 << 20);
        assert!(s.detail_header);
        assert_eq!(s.listen.port(), 9000);
        assert_eq!(s.auth_token_env.as_deref(), Some("MY_TOKEN"));
        assert_eq!(s.shared_state.as_deref(), Some("redis://127.0.0.1:6379/0"));
        assert_eq!(s.max_attempts, 4);
        assert_eq!(s.origins.route["max_attempts"], Origin::File);
        assert_eq!(
            s.origins.route["budget_secs"],
            Origin::Env("LLMPROBE_ROUTE_BUDGET_SECS".into())
        );
        assert!(!s.origins.route.contains_key("idle_timeout_secs"));
        // A number wanted as text is text.
        let f = env(&[("LLMPROBE_ROUTE_AUTH_TOKEN_ENV", "12")]).unwrap();
        assert_eq!(f.route.auth_token_env.as_deref(), Some("12"));
    }

    #[test]
    fn bad_values_name_the_variable_and_what_was_expected() {
        let err = |k: &str, v: &str| env(&[(k, v)]).unwrap_err();
        let e = err("LLMPROBE_ROUTE_BUDGET_SECS", "soon");
        assert_eq!(
            e,
            "LLMPROBE_ROUTE_BUDGET_SECS=\"soon\": expected a number (as [route] budget_secs in llmprobe.toml)"
        );
        let e = err("LLMPROBE_ROUTE_MAX_ATTEMPTS", "2.5");
        assert!(e.contains("expected a whole number"), "{e}");
        let e = err("LLMPROBE_ROUTE_MAX_ATTEMPTS", "-1");
        assert!(e.contains("expected a whole number"), "{e}");
        let e = err("LLMPROBE_ROUTE_MAX_ATTEMPTS", "0");
        assert_eq!(
            e,
            "LLMPROBE_ROUTE_MAX_ATTEMPTS=\"0\": 0 is out of range: expected 1 to 100"
        );
        let e = err("LLMPROBE_ROUTE_DETAIL_HEADER", "yes");
        assert!(e.contains("expected true or false"), "{e}");
        let e = err("LLMPROBE_ROUTE_AFFINITY_SECS", "90000");
        assert!(e.contains("expected 0 to 86400 seconds"), "{e}");
        // A password is never echoed.
        let e = err("LLMPROBE_ROUTE_SHARED_STATE", "http://:hunter2@h");
        assert!(!e.contains("hunter2") && e.contains("redis://"), "{e}");
        let e = err("LLMPROBE_DAILY_CAP_GROQ", "many");
        assert!(e.starts_with("LLMPROBE_DAILY_CAP_GROQ=\"many\": expected a whole number"));
        let e = err("LLMPROBE_DAILY_CAP_GROQ", "0");
        assert!(e.contains("daily_cap is 0"), "{e}");
    }

    #[test]
    fn unknown_variables_and_colliding_providers() {
        let e = env(&[("LLMPROBE_ROUTE_BUDGET", "3")]).unwrap_err();
        assert!(
            e.starts_with("unknown variable LLMPROBE_ROUTE_BUDGET: it sets no [route] key. Did you mean LLMPROBE_ROUTE_BUDGET_SECS?"),
            "{e}"
        );
        assert!(e.contains("LLMPROBE_ROUTE_DETAIL_HEADER"), "{e}");
        // The key is the variable's name upper case, exactly.
        let e = env(&[("LLMPROBE_ROUTE_budget_secs", "3")]).unwrap_err();
        assert!(e.starts_with("unknown variable"), "{e}");
        let e = env(&[("LLMPROBE_DAILY_CAP_GITHUB", "3")]).unwrap_err();
        assert!(
            e.contains("names no provider") && e.contains("LLMPROBE_DAILY_CAP_GITHUB_MODELS"),
            "{e}"
        );
        let f = env(&[("LLMPROBE_DAILY_CAP_GITHUB_MODELS", "50")]).unwrap();
        assert_eq!(
            f.daily_cap["github-models"],
            (50, "LLMPROBE_DAILY_CAP_GITHUB_MODELS".to_string())
        );
        let e = from_env(&[], &["github-models", "github_models"]).unwrap_err();
        assert_eq!(
            e,
            "providers \"github-models\" and \"github_models\" both take the variable LLMPROBE_DAILY_CAP_GITHUB_MODELS: rename one"
        );
    }
}
