//! The catalog of providers and models: the embedded default, layered with
//! the user's `llmprobe.toml`, validated, then resolved against the
//! environment.
//!
//! The config names *where* a key lives (`api_key_env`), never what it is.
//! Keys are read from the environment only in [`Catalog::resolve`], straight
//! into a [`Secret`].

use std::collections::BTreeMap;
use std::ops::RangeInclusive;
use std::path::Path;
use std::time::Duration;

use chrono::{NaiveDate, NaiveTime};
use serde::Deserialize;

use crate::error::{ConfigError, Error, Result};
use crate::upstream::secret::{Redactor, Secret};

const DEFAULT_CATALOG: &str = include_str!("default.toml");

/// The accepted range of every user number that meets time or cost, on the
/// command line and in config alike. Out of range is a usage error (exit 2),
/// never an overflow in the middle of a run.
pub mod bounds {
    use std::ops::RangeInclusive;

    /// Seconds between probe starts on one provider.
    pub const SPACING_SECS: RangeInclusive<f64> = 0.0..=3600.0;
    /// Seconds a probe may take; must also be more than 0.
    pub const TIMEOUT_SECS: RangeInclusive<f64> = 0.0..=3600.0;
    /// Seconds a streamed probe may go without a byte once its first has
    /// come; must also be more than 0.
    pub const STALL_SECS: RangeInclusive<f64> = 0.0..=3600.0;
    /// Tokens a probe may ask for.
    pub const MAX_TOKENS: RangeInclusive<u32> = 1..=32_768;
    /// Hard failures in a row that disable a model.
    pub const DISABLE_AFTER: RangeInclusive<u32> = 1..=1000;
    /// Seconds between fetches of a provider's model list: at least a
    /// minute, at most 30 days.
    pub const LIST_EVERY_SECS: RangeInclusive<f64> = 60.0..=2_592_000.0;
    /// Discovered models that may enter one `check` run, per provider.
    pub const DISCOVER_PER_RUN: RangeInclusive<u32> = 1..=100;
}

/// `v` seconds as a duration, if it lies in `range` (and, with `positive`,
/// is more than 0). The error says what was expected, for the caller to
/// prefix with the flag or field name.
pub fn bounded_secs(
    v: f64,
    range: RangeInclusive<f64>,
    positive: bool,
) -> std::result::Result<Duration, String> {
    let ok = range.contains(&v) && (!positive || v > 0.0);
    match Duration::try_from_secs_f64(v) {
        Ok(d) if ok => Ok(d),
        _ if positive => Err(format!(
            "{v} is out of range: expected more than 0 and at most {} seconds",
            range.end()
        )),
        _ => Err(format!(
            "{v} is out of range: expected {} to {} seconds",
            range.start(),
            range.end()
        )),
    }
}

fn bounded_u32(v: u32, range: RangeInclusive<u32>) -> std::result::Result<u32, String> {
    if range.contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "{v} is out of range: expected {} to {}",
            range.start(),
            range.end()
        ))
    }
}

use crate::upstream::dialect::wire;
pub use crate::upstream::dialect::{Dialect, Endpoint, SystemMessages};
pub use route::{
    CapOrigin, DAILY_CAP_PREFIX, Effective, Order, Origin, Origins, ROUTE_PREFIX, Record,
    RouteSettings, daily_cap_var, redact_url, route_keys, route_var,
};

pub mod edit;
pub mod key;
mod route;
pub use key::ModelKey;
pub use route::DEGRADED_MIN_PROVIDERS;
#[cfg(test)]
mod registry;
#[cfg(test)]
mod same_as_before;

/// The ranges of `[route]` numbers, for the flags that override them.
pub mod route_bounds {
    pub use super::route::{BUDGET_SECS, MAX_ATTEMPTS};
}

/// `api_key_env`: a single name or a list of names.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum KeyEnv {
    One(String),
    Many(Vec<String>),
}

/// `api_key_env` as the list of names it means; `""` names none.
fn key_env<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Vec<String>, D::Error> {
    Ok(match KeyEnv::deserialize(d)? {
        KeyEnv::One(s) if s.is_empty() => vec![],
        KeyEnv::One(s) => vec![s],
        KeyEnv::Many(v) => v,
    })
}

/// What the ambiguous `x-ratelimit-*-requests` header family counts, the
/// provider's `requests_header_window`: per minute in OpenAI's meaning, per
/// day on Groq. A provider quirk lives here, in the catalog, so that
/// `route::limits` never compares provider names.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[strum(serialize_all = "lowercase")]
pub enum RequestsWindow {
    #[default]
    Minute,
    Day,
}

/// A field whose value is one of `T`'s names, or an error that lists
/// every value it may take (`what`: "a window", "a choice").
fn named<T>(field: &str, what: &str, s: &str) -> std::result::Result<T, String>
where
    T: std::str::FromStr + strum::IntoEnumIterator + Into<&'static str>,
{
    s.parse().map_err(|_| {
        let names: Vec<String> = T::iter().map(|w| format!("{:?}", w.into())).collect();
        let (last, rest) = names.split_last().expect("an enum has a name");
        let list = match rest {
            [] => last.clone(),
            _ => format!("{} or {last}", rest.join(", ")),
        };
        format!("{field} {s:?} is not {what}: use {list}")
    })
}

/// `discover`: which models of a provider's own list `check` adds to its
/// probe set (docs/discovery.md). Off unless the user turns it on: free
/// endpoints may log prompts, so adopting a model is the user's decision.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::EnumIter,
)]
#[strum(serialize_all = "lowercase")]
pub enum Discover {
    #[default]
    Off,
    /// Only the models the list itself marks free.
    Free,
    /// Every chat model the list carries.
    All,
}

impl Discover {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Request and token limits, used by `route` (see `route::limits`):
/// requests and tokens per minute (a sliding 60 s window) and per day (reset
/// at the provider's `day_reset`). `None` means no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub rpm: Option<u64>,
    pub rpd: Option<u64>,
    pub tpm: Option<u64>,
    pub tpd: Option<u64>,
}

impl Limits {
    /// `self`, with every field `over` sets replacing it.
    pub fn overlaid(self, over: &Limits) -> Limits {
        Limits {
            rpm: over.rpm.or(self.rpm),
            rpd: over.rpd.or(self.rpd),
            tpm: over.tpm.or(self.tpm),
            tpd: over.tpd.or(self.tpd),
        }
    }

    /// Field by field, the tighter of the two; a limit beats no limit.
    pub fn tightest(self, other: &Limits) -> Limits {
        fn min(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        }
        Limits {
            rpm: min(self.rpm, other.rpm),
            rpd: min(self.rpd, other.rpd),
            tpm: min(self.tpm, other.tpm),
            tpd: min(self.tpd, other.tpd),
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }

    /// The name of the first field set to 0, which limits nothing useful and
    /// is almost certainly a mistake.
    fn zero_field(&self) -> Option<&'static str> {
        [
            ("rpm", self.rpm),
            ("rpd", self.rpd),
            ("tpm", self.tpm),
            ("tpd", self.tpd),
        ]
        .into_iter()
        .find(|(_, v)| *v == Some(0))
        .map(|(name, _)| name)
    }
}

/// What a provider documents about one model (`model_info`), for `route`:
/// the longest prompt it holds and the most it writes in one reply. A
/// request over the window is not sent there (`skip:context`), and a
/// `max_tokens` over the cap is lowered to it (docs/routing.md).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelInfo {
    /// Tokens of prompt (and reply) the model holds.
    pub context_window: Option<u64>,
    /// The largest `max_tokens` the upstream accepts.
    pub max_output_tokens: Option<u32>,
    /// What `check` probes this model for (`capabilities = ["tools",
    /// "json", "vision"]`); none when unset, unless `check --capabilities
    /// all`.
    pub capabilities: Option<crate::outcome::CapSet>,
    /// The day the provider retires the model (`deprecated =
    /// "YYYY-MM-DD"`), as a registry or the provider announces it.
    pub deprecated: Option<NaiveDate>,
    /// The model that replaces it (`successor = "model-id"`), by its id at
    /// the same provider.
    pub successor: Option<String>,
}

/// One `model_info` entry as serde reads it; [`ModelInfoTable::validate`]
/// makes the [`ModelInfo`]. The fields' order is the order toml's
/// "expected one of" lists them in.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelInfoTable {
    context_window: Option<u64>,
    max_output_tokens: Option<u32>,
    capabilities: Option<crate::outcome::CapSet>,
    /// Read as any value (a string, or a TOML date written bare) so that
    /// a bad one is reported with the provider's and the model's names,
    /// which toml's own error would not give.
    deprecated: Option<toml::Value>,
    successor: Option<String>,
}

impl ModelInfoTable {
    /// The checks serde cannot make; an error names the field, for the
    /// caller to prefix with the provider and `model_info."model"`.
    fn validate(&self, model: &str) -> std::result::Result<ModelInfo, String> {
        if self.context_window == Some(0) {
            return Err("context_window is 0: remove it when it is not known".into());
        }
        if self.max_output_tokens == Some(0) {
            return Err("max_output_tokens is 0: remove it when it is not known".into());
        }
        let deprecated = match &self.deprecated {
            None => None,
            Some(toml::Value::String(s)) => {
                Some(parse_model_date(s).map_err(|why| format!("deprecated {why}"))?)
            }
            // `deprecated = 2027-01-14`, a TOML local date, is the same day.
            Some(toml::Value::Datetime(d)) if d.time.is_none() && d.offset.is_none() => {
                Some(parse_model_date(&d.to_string()).map_err(|why| format!("deprecated {why}"))?)
            }
            Some(other) => {
                return Err(format!(
                    "deprecated {other} is not a date written YYYY-MM-DD, such as \"2027-01-14\""
                ));
            }
        };
        if let Some(s) = &self.successor {
            if s.trim().is_empty() {
                return Err("successor is empty: name the model that replaces it".into());
            }
            if s == model {
                return Err(format!("successor {s:?} is the model itself"));
            }
        }
        Ok(ModelInfo {
            context_window: self.context_window,
            max_output_tokens: self.max_output_tokens,
            capabilities: self.capabilities,
            deprecated,
            successor: self.successor.clone(),
        })
    }
}

/// A calendar day written `YYYY-MM-DD` (`model_info`'s `deprecated`); the
/// error quotes the value and says what was expected.
pub fn parse_model_date(s: &str) -> std::result::Result<NaiveDate, String> {
    let bad = || format!("{s:?} is not a date written YYYY-MM-DD, such as \"2027-01-14\"");
    let b = s.as_bytes();
    let shaped = b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
    if !shaped {
        return Err(bad());
    }
    NaiveDate::parse_from_str(s, "%Y-%m-%d").map_err(|_| bad())
}

/// `day_reset = "HH:MM"`: the UTC time of day a provider's daily windows
/// reset. A fixed UTC time, never a time zone, so a reset that follows
/// daylight saving (Gemini: midnight Pacific) is written as the later of
/// its two UTC times, which never resets early.
pub fn parse_day_reset(s: &str) -> std::result::Result<NaiveTime, String> {
    let bad =
        || format!("day_reset {s:?} is not a UTC time of day written HH:MM, such as \"07:00\"");
    let (h, m) = s.split_once(':').ok_or_else(bad)?;
    if h.len() != 2 || m.len() != 2 {
        return Err(bad());
    }
    let (h, m): (u32, u32) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    NaiveTime::from_hms_opt(h, m, 0).ok_or_else(bad)
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DefaultsToml {
    spacing_secs: Option<f64>,
    timeout_secs: Option<f64>,
    stall_secs: Option<f64>,
    max_tokens: Option<u32>,
    disable_after: Option<u32>,
    capability_max_tokens: Option<u32>,
    probe_share: Option<f64>,
    traffic_evidence: Option<u32>,
    list_every_secs: Option<f64>,
    discover_per_run: Option<u32>,
}

/// One `[[providers]]` table as serde reads it, once the user's table is
/// layered over the embedded one ([`layer`]): every key a provider may set,
/// each holding what it means when no table sets it. A value that
/// `[defaults]` supplies, or whose absence means something, stays an
/// `Option`; [`ProviderTable::validate`] makes the [`Provider`].
///
/// The fields' order is the order toml's "expected one of" lists them in.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderTable {
    name: String,
    enabled: Option<bool>,
    host_env: Option<String>,
    dialect: Option<Dialect>,
    base_url: Option<String>,
    #[serde(default, deserialize_with = "key_env")]
    api_key_env: Vec<String>,
    #[serde(default)]
    key_optional: bool,
    #[serde(default)]
    url_vars: BTreeMap<String, String>,
    #[serde(default)]
    models: Vec<String>,
    /// Appended to `models`: what a user adds to an embedded provider
    /// without restating (and freezing) its list.
    #[serde(default)]
    models_add: Vec<String>,
    spacing_secs: Option<f64>,
    timeout_secs: Option<f64>,
    stall_secs: Option<f64>,
    max_tokens: Option<u32>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default = "ProviderTable::priority")]
    priority: i64,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    model_limits: BTreeMap<String, Limits>,
    #[serde(default)]
    model_info: BTreeMap<String, ModelInfoTable>,
    #[serde(default)]
    key_limits: Limits,
    daily_cap: Option<u64>,
    #[serde(default = "ProviderTable::capabilities")]
    capabilities: bool,
    day_reset: Option<String>,
    /// Read as text so that a bad value is reported with the provider's
    /// name, which toml's own error would not give.
    requests_header_window: Option<String>,
    /// As text, for the same reason.
    system_messages: Option<String>,
    probe_share: Option<f64>,
    /// As text, for the same reason.
    discover: Option<String>,
    list_every_secs: Option<f64>,
    discover_per_run: Option<u32>,
}

/// The side tables keyed by model: a user's `models` without one of them
/// trims the embedded one to the models left.
const TRIMMED_WITH_MODELS: [&str; 2] = ["model_limits", "model_info"];

/// The layering rules of `[[providers]]`, all of them (docs/configuration.md):
/// `over`, a user's table, layers over `into`, the table of the same name
/// before it (the embedded one, or the user's own earlier one). Each key
/// `over` sets replaces `into`'s value whole, a table-valued key too
/// (`limits`, `headers`, `url_vars`, `model_limits`, `model_info`): nothing
/// merges below the top level. The one exception keeps trimming a list from
/// being an error: `models` given without one of [`TRIMMED_WITH_MODELS`]
/// keeps that table's entries of the models left.
fn layer(into: &mut toml::Table, over: toml::Table) {
    if let Some(models) = over.get("models").and_then(toml::Value::as_array) {
        let kept = |m: &str| models.iter().any(|v| v.as_str() == Some(m));
        for side in TRIMMED_WITH_MODELS {
            if !over.contains_key(side)
                && let Some(table) = into.get_mut(side).and_then(toml::Value::as_table_mut)
            {
                table.retain(|m, _| kept(m));
            }
        }
    }
    into.extend(over);
}

/// A provider table's `name` (the checked parse has made it a string).
fn table_name(t: &toml::Table) -> &str {
    t.get("name").and_then(toml::Value::as_str).unwrap_or("")
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigToml {
    include_default_catalog: Option<bool>,
    #[serde(default)]
    defaults: DefaultsToml,
    /// Read here only to report a bad key or value where it is written;
    /// the providers are layered as tables ([`ConfigFile::providers`]).
    #[serde(default)]
    #[expect(dead_code, reason = "read for its errors only")]
    providers: Vec<ProviderTable>,
    #[serde(default)]
    route: route::RouteToml,
    #[serde(default)]
    aliases: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    check: CheckToml,
    #[serde(default)]
    notify: NotifyToml,
}

/// `[notify]` as written. Its keys are read leniently and judged in
/// [`NotifySettings::from_toml`], so that a misplaced webhook URL (`url =
/// "https://…"`, or `url_env = "https://…"`) is refused by its key's name
/// and never quoted, as toml's own error would.
#[derive(Debug, Clone, Default, Deserialize)]
struct NotifyToml {
    #[serde(default)]
    url_env: Option<toml::Value>,
    after: Option<i64>,
    on: Option<toml::Value>,
    #[serde(flatten)]
    other: BTreeMap<String, toml::Value>,
}

/// Where alerts go: `[notify]`. The file names the variables that hold
/// webhook URLs, never a URL: a URL's path is its secret
/// (docs/alerts.md).
#[derive(Debug, Clone, PartialEq)]
pub struct NotifySettings {
    /// `[notify] url_env`: variables whose values are webhook URLs
    /// (whitespace-separated), in order, each once.
    pub url_env: Vec<String>,
    /// `[notify] after`: alert on a paused model or a provider down only
    /// once it has failed this many runs in a row (`check --notify-after`
    /// overrides it).
    pub after: u32,
    /// `[notify] on`: what `check` alerts on, each once, in order
    /// (`check --notify-on` overrides it).
    pub on: Vec<AlertOn>,
}

impl Default for NotifySettings {
    fn default() -> Self {
        NotifySettings {
            url_env: Vec::new(),
            after: NotifySettings::AFTER,
            on: AlertOn::DEFAULT.to_vec(),
        }
    }
}

/// What `check` alerts on (`[notify] on`, `check --notify-on`); the
/// recovery of whatever was alerted is always said. docs/alerts.md.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    strum::EnumString,
    strum::IntoStaticStr,
    strum::EnumIter,
    clap::ValueEnum,
)]
#[strum(serialize_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum AlertOn {
    /// A model paused: a temporary failure, such as a rate limit.
    Paused,
    /// A model disabled: it needs a person.
    Disabled,
    /// Every probed model of a provider failed.
    ProviderDown,
}

impl AlertOn {
    /// The default: what needs a person, not what comes back by itself.
    pub const DEFAULT: [AlertOn; 2] = [AlertOn::Disabled, AlertOn::ProviderDown];

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl NotifySettings {
    /// `after`'s default, and its bounds.
    pub const AFTER: u32 = 2;
    pub const AFTER_MAX: u32 = 1000;

    /// Each name must be a variable's name; one that looks like a URL is
    /// refused without being quoted, since it is probably the secret itself.
    fn from_toml(t: &NotifyToml) -> std::result::Result<Self, String> {
        if let Some(key) = t.other.keys().next() {
            return Err(format!(
                "notify.{key}: unknown key ([notify] takes url_env, after and on); webhook URLs \
                 never go in a file: set LLMPROBE_NOTIFY, or name the variables that hold them \
                 in url_env = [\"SLACK_HOOK\"]"
            ));
        }
        let names: Vec<&str> = match &t.url_env {
            None => Vec::new(),
            Some(toml::Value::String(one)) => vec![one.as_str()],
            Some(toml::Value::Array(many)) => many
                .iter()
                .map(|v| v.as_str())
                .collect::<Option<Vec<&str>>>()
                .ok_or("notify.url_env: a list of environment variables' names, as in url_env = [\"SLACK_HOOK\"]")?,
            Some(_) => {
                return Err("notify.url_env: a list of environment variables' names, as in url_env = [\"SLACK_HOOK\"]".into());
            }
        };
        let mut url_env: Vec<String> = Vec::new();
        for (i, name) in names.into_iter().enumerate() {
            let name = name.trim();
            if name.contains("://") || name.contains('/') {
                return Err(format!(
                    "notify.url_env[{i}] looks like a URL: url_env names environment variables \
                     that hold webhook URLs (as in url_env = [\"SLACK_HOOK\"]); a URL's path is \
                     a secret and does not belong in a file"
                ));
            }
            if !is_env_name(name) {
                return Err(format!(
                    "notify.url_env[{i}] {name:?} is not an environment variable's name \
                     (letters, digits and _, not starting with a digit)"
                ));
            }
            if !url_env.iter().any(|n| n == name) {
                url_env.push(name.to_string());
            }
        }
        let after = match t.after {
            None => NotifySettings::AFTER,
            Some(n) if (1..=NotifySettings::AFTER_MAX as i64).contains(&n) => n as u32,
            Some(n) => {
                return Err(format!(
                    "notify.after = {n}: runs in a row before an alert, from 1 to {}",
                    NotifySettings::AFTER_MAX
                ));
            }
        };
        let on = match &t.on {
            None => AlertOn::DEFAULT.to_vec(),
            Some(v) => {
                let bad = || {
                    "notify.on: a list of what to alert on, as in on = [\"disabled\", \"provider_down\"]"
                        .to_string()
                };
                let names: Vec<&str> = match v {
                    toml::Value::String(one) => vec![one.as_str()],
                    toml::Value::Array(many) => many
                        .iter()
                        .map(|v| v.as_str())
                        .collect::<Option<Vec<&str>>>()
                        .ok_or_else(bad)?,
                    _ => return Err(bad()),
                };
                let mut on = Vec::new();
                for (i, name) in names.into_iter().enumerate() {
                    let what: AlertOn = named(&format!("notify.on[{i}]"), "an alert", name)?;
                    on.push(what);
                }
                on.sort_unstable();
                on.dedup();
                on
            }
        };
        Ok(NotifySettings { url_env, after, on })
    }
}

/// `[check]` as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckToml {
    shared_state: Option<String>,
}

/// The variable that sets `[check] shared_state` (over the file).
pub const CHECK_SHARED_STATE_VAR: &str = "LLMPROBE_CHECK_SHARED_STATE";

/// How `check` runs beyond the providers' own settings: `[check]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CheckSettings {
    /// `redis://…` to publish the record to, for `route --record shared`
    /// (`[check] shared_state`, [`CHECK_SHARED_STATE_VAR`], `check
    /// --shared-state`).
    pub shared_state: Option<String>,
}

impl CheckSettings {
    /// `[check]` from the file, then `env`'s [`CHECK_SHARED_STATE_VAR`]
    /// over it (an empty value leaves the file's). The error names the key
    /// or the variable.
    fn layered(t: &CheckToml, env: &[(String, String)]) -> std::result::Result<Self, String> {
        let from_env = env
            .iter()
            .find(|(n, v)| n == CHECK_SHARED_STATE_VAR && !v.is_empty())
            .map(|(_, v)| v.clone());
        let (url, what) = match from_env {
            Some(v) => (Some(v), CHECK_SHARED_STATE_VAR),
            None => (t.shared_state.clone(), "check.shared_state"),
        };
        if let Some(u) = &url
            && !u.starts_with("redis://")
        {
            return Err(format!(
                "{what} {:?} must start with redis://",
                redact_url(u)
            ));
        }
        Ok(CheckSettings { shared_state: url })
    }
}

/// Settings that apply to every provider unless it says otherwise.
#[derive(Debug, Clone, PartialEq)]
pub struct Defaults {
    pub spacing: Duration,
    pub timeout: Duration,
    /// How long a streamed probe may go without a byte after its first.
    pub stall: Duration,
    pub max_tokens: u32,
    pub disable_after: u32,
    /// `max_tokens` for a capability probe: a tool call does not fit in the
    /// plain probe's few tokens.
    pub capability_max_tokens: u32,
    /// The share of each known daily limit that probing may use
    /// ([`crate::usage::budget`]); a provider's own `probe_share` wins.
    pub probe_share: f64,
    /// How many routed successes, and no failure, since a model's last
    /// probe stand in for its next basic probe ([`crate::usage::traffic`]);
    /// 0 turns traffic evidence off.
    pub traffic_evidence: u32,
    /// How old a provider's cached model list may grow before `check` or
    /// `models` fetches it again.
    pub list_every: Duration,
    /// Discovered models that may enter one run, per provider.
    pub discover_per_run: u32,
}

/// A validated provider, as configured (keys not yet read).
#[derive(Debug, Clone, PartialEq)]
pub struct Provider {
    pub name: String,
    /// `enabled` as configured; `None` means on, except for a provider with
    /// a `host_env` (a local server), which is on only when that variable is
    /// set.
    pub enabled: Option<bool>,
    /// A local server's conventional host variable (`OLLAMA_HOST`): when
    /// set, it turns the provider on and supplies its scheme, host and port.
    pub host_env: Option<String>,
    pub dialect: Dialect,
    /// May hold `{var}` placeholders, filled from `url_vars`.
    pub base_url: String,
    pub api_key_env: Vec<String>,
    pub key_optional: bool,
    pub url_vars: BTreeMap<String, String>,
    pub models: Vec<String>,
    pub spacing: Duration,
    pub timeout: Duration,
    /// `stall_secs`: once a streamed probe's first byte has come, the
    /// longest it may then go without another before it fails as stalled
    /// (`timeout` bounds the wait for the first).
    pub stall: Duration,
    pub max_tokens: u32,
    pub headers: BTreeMap<String, String>,
    pub priority: i64,
    /// Limits of each model of the provider, for each key: free tiers are
    /// documented per model and per account, and each key is an account.
    pub limits: Limits,
    /// Per-model overrides of `limits`, field by field. Every key names a
    /// model in `models`.
    pub model_limits: BTreeMap<String, Limits>,
    /// Context windows and output caps of the models that document them.
    /// Every key names a model in `models`.
    pub model_info: BTreeMap<String, ModelInfo>,
    /// Limits of each key across all models of the provider.
    pub key_limits: Limits,
    /// Requests per day across the whole provider, every key and model.
    pub daily_cap: Option<u64>,
    /// `capabilities = false`: `check` never probes this provider's models
    /// for capabilities, whatever `model_info` lists.
    pub capabilities: bool,
    /// When daily windows reset, as a UTC time of day; midnight by default.
    pub day_reset: NaiveTime,
    /// What `x-ratelimit-*-requests` counts; per minute by default.
    pub requests_header_window: RequestsWindow,
    /// Where later system messages go (`system_messages`); `None` leaves
    /// the dialect's default.
    pub system_messages: Option<SystemMessages>,
    /// The share of each known daily limit its probes may use
    /// (`probe_share`, else `[defaults]`'s).
    pub probe_share: f64,
    /// Which listed models `check` adopts (`discover`), off by default.
    pub discover: Discover,
    /// How often its model list is fetched (`list_every_secs`).
    pub list_every: Duration,
    /// Discovered models that may enter one run (`discover_per_run`).
    pub discover_per_run: u32,
}

/// A provider ready to be called: URL filled in, keys read.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub provider: Provider,
    pub base_url: String,
    /// Every variable of `api_key_env` that is set, in the order listed.
    /// Empty for keyless providers (and optional keys left unset).
    pub keys: Vec<ApiKey>,
    endpoint: std::sync::OnceLock<Endpoint>,
}

/// One API key read from the environment.
///
/// `route` cools down per key, so it needs a name for each that is safe to
/// print and persist: the [`fingerprint`](ApiKey::fingerprint). The value
/// itself stays in `secret`, whose Debug prints `*****`, so deriving Debug
/// here is safe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// Position of `var` in the provider's `api_key_env`, from 0.
    pub index: usize,
    /// The environment variable the key was read from.
    pub var: String,
    /// `k1:` and the first 8 hex digits of the SHA-256 of the value, such
    /// as `k1:3f9a1c2e`. `k1` names the fingerprint scheme, not a position
    /// (that is `index`): the fingerprint depends only on the value, so it
    /// survives reordering `api_key_env`, and a rotated key gets a new one.
    /// 32 bits of a hash of a high-entropy key reveal nothing usable.
    pub fingerprint: String,
    pub secret: Secret,
}

impl ApiKey {
    pub fn new(index: usize, var: impl Into<String>, secret: Secret) -> ApiKey {
        ApiKey {
            index,
            var: var.into(),
            fingerprint: fingerprint(&secret),
            secret,
        }
    }
}

/// See [`ApiKey::fingerprint`].
pub fn fingerprint(secret: &Secret) -> String {
    use sha2::{Digest, Sha256};
    use std::fmt::Write;
    let digest = Sha256::digest(secret.expose().as_bytes());
    let mut out = String::from("k1:");
    for b in &digest[..4] {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Why a configured provider cannot be used right now.
#[derive(Debug, Clone, PartialEq)]
pub enum Unusable {
    /// Turned off: `enabled = false`, or a local server whose host variable
    /// (named here) is unset.
    Off { host_env: Option<String> },
    /// Needed environment variables are unset, every one named; an entry
    /// `A or B` means either will do.
    Missing(Vec<String>),
    /// A host variable holds something that is not a host or URL.
    BadHost { var: String, value: String },
    /// A remote provider that works without a key, neither turned on
    /// (`enabled = true`) nor given its key (named here).
    Keyless { var: String },
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unusable::Off { host_env: None } => f.write_str("off (enabled = false in config)"),
            Unusable::Off {
                host_env: Some(var),
            } => write!(
                f,
                "off: a local server; set {var}, or enabled = true in llmprobe.toml"
            ),
            Unusable::Missing(vars) => write!(f, "skipped: set {}", vars.join(" and ")),
            Unusable::Keyless { var } => write!(
                f,
                "off: works without a key; enabled = true in llmprobe.toml turns it on (or set {var})"
            ),
            Unusable::BadHost { var, value } => {
                write!(
                    f,
                    "skipped: {var}={value:?} is not a host, host:port or URL"
                )
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct Catalog {
    pub defaults: Defaults,
    pub providers: Vec<Provider>,
    /// `[route]`, validated.
    pub route: RouteSettings,
    /// `[aliases]`: a name for an ordered list of `provider::model`.
    pub aliases: BTreeMap<String, Vec<String>>,
    /// `[check]`, validated.
    pub check: CheckSettings,
    /// `[notify]`, validated.
    pub notify: NotifySettings,
}

/// One config file, read: every section checked where it is written and
/// typed, and its `[[providers]]` also kept as tables, for [`layer`].
#[derive(Debug, Default)]
struct ConfigFile {
    toml: ConfigToml,
    providers: Vec<toml::Table>,
}

/// Read a config file; `origin` names it in errors.
fn parse_toml(text: &str, origin: &str) -> Result<ConfigFile> {
    let toml: ConfigToml = toml::from_str(text).map_err(|e| parse_error(&e, text, origin))?;
    // Cannot fail where the checked read did not.
    let mut whole: toml::Table = toml::from_str(text).map_err(|e| parse_error(&e, text, origin))?;
    let providers = match whole.remove("providers") {
        Some(toml::Value::Array(tables)) => tables
            .into_iter()
            .filter_map(|t| match t {
                toml::Value::Table(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Ok(ConfigFile { toml, providers })
}

/// A parse error of the config `text` read from `origin`.
///
/// toml's message names the key; the line and column are ours. toml's own
/// rendering also quotes the line at fault, which would print an
/// `api_key = "…"` or a webhook URL written where it does not belong, so
/// the line itself is never shown.
fn parse_error(e: &toml::de::Error, text: &str, origin: &str) -> Error {
    let at = e
        .span()
        .map(|span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let start = before.rfind('\n').map_or(0, |i| i + 1);
            let column = before.len() - start + 1;
            // The key of that line, when it is spelled as config keys
            // are (lowercase words, no digits): a key pasted in as a
            // name is not shown.
            let key = text[start..]
                .lines()
                .next()
                .and_then(|l| l.split_once('='))
                .map(|(k, _)| k.trim())
                .filter(|k| {
                    !k.is_empty()
                        && k.len() <= 40
                        && k.chars()
                            .all(|c| c.is_ascii_lowercase() || "_-.".contains(c))
                })
                .map(|k| format!(" ({k})"))
                .unwrap_or_default();
            format!("line {line}, column {column}{key}: ")
        })
        .unwrap_or_default();
    Error::config(format!(
        "invalid config {origin}: {at}{}",
        without_values(e.message().trim_end())
    ))
}

/// A parse error's message without the value it quotes. serde words a
/// value of the wrong type or an unknown name with the value itself
/// (`invalid type: string "sk-…", expected f64`, ``unknown variant
/// `sk-…`, expected one of …``), which would print a key pasted where it
/// does not belong. The key's name and what was expected stay.
fn without_values(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    loop {
        let string = rest.find("string \"").map(|i| (i, "string ".len(), '"'));
        let variant = rest
            .find("unknown variant `")
            .map(|i| (i, "unknown variant ".len(), '`'));
        let Some((at, skip, quote)) = [string, variant].into_iter().flatten().min() else {
            out.push_str(rest);
            return out;
        };
        let open = at + skip;
        out.push_str(&rest[..open]);
        // The quoted value: a Debug-escaped string, or a backticked name.
        let body = &rest[open + 1..];
        let mut end = None;
        let mut escaped = false;
        for (i, c) in body.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' if quote == '"' => escaped = true,
                c if c == quote => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        }
        match end {
            Some(i) => {
                out.push_str("(value not shown)");
                rest = &body[i + 1..];
            }
            None => {
                out.push_str("(value not shown)");
                return out;
            }
        }
    }
}

impl Catalog {
    /// A redactor of every key the catalog resolves (and of anything
    /// shaped like a key): what every message, page and error that leaves
    /// the process goes through.
    pub fn redactor(&self) -> Redactor {
        Redactor::new(
            self.providers
                .iter()
                .filter_map(|p| p.resolve().ok())
                .flat_map(|p| p.secrets().cloned().collect::<Vec<_>>()),
        )
    }

    /// The embedded default catalog alone.
    pub fn embedded() -> Catalog {
        Catalog::build(None, &[]).expect("the embedded catalog is valid")
    }

    /// Load the catalog: the embedded default, layered with the user file at
    /// `path` when given, then with the `LLMPROBE_ROUTE_*` and
    /// `LLMPROBE_DAILY_CAP_*` variables of the environment.
    pub fn load(path: Option<&Path>) -> Result<Catalog> {
        let user = match path {
            None => None,
            Some(p) => {
                let text = crate::fsutil::read_text_file(p).map_err(|e| {
                    Error::config(format!("cannot read config file {}: {e}", p.display()))
                })?;
                Some((
                    parse_toml(&text, &p.display().to_string())?,
                    p.display().to_string(),
                ))
            }
        };
        Catalog::build(user, &settings_env()?)
    }

    /// Load from TOML text (for tests and the demo), without the
    /// environment's settings.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Catalog> {
        Catalog::build(Some((parse_toml(text, origin)?, origin.to_string())), &[])
    }

    /// `user` over the embedded catalog, then `env`'s settings (`(name,
    /// value)` of the `LLMPROBE_ROUTE_*` and `LLMPROBE_DAILY_CAP_*`
    /// variables) over both.
    fn build(user: Option<(ConfigFile, String)>, env: &[(String, String)]) -> Result<Catalog> {
        let base = parse_toml(DEFAULT_CATALOG, "(embedded default catalog)")?;
        let (user, origin) = user.unwrap_or_default();
        let mut tables = base.providers;
        if !user.toml.include_default_catalog.unwrap_or(true) {
            tables.clear();
        }
        let capped_in_file: Vec<String> = user
            .providers
            .iter()
            .filter(|t| t.contains_key("daily_cap"))
            .map(|t| table_name(t).to_string())
            .collect();
        for t in user.providers {
            match tables.iter_mut().find(|e| table_name(e) == table_name(&t)) {
                Some(existing) => layer(existing, t),
                None => tables.push(t),
            }
        }
        let (ours, theirs) = (&base.toml.defaults, &user.toml.defaults);
        let defaults = Defaults {
            spacing: secs(
                theirs.spacing_secs.or(ours.spacing_secs).unwrap_or(90.0),
                bounds::SPACING_SECS,
                false,
                "defaults.spacing_secs",
                &origin,
            )?,
            timeout: secs(
                theirs.timeout_secs.or(ours.timeout_secs).unwrap_or(30.0),
                bounds::TIMEOUT_SECS,
                true,
                "defaults.timeout_secs",
                &origin,
            )?,
            stall: secs(
                theirs.stall_secs.or(ours.stall_secs).unwrap_or(10.0),
                bounds::STALL_SECS,
                true,
                "defaults.stall_secs",
                &origin,
            )?,
            max_tokens: count(
                theirs.max_tokens.or(ours.max_tokens).unwrap_or(16),
                bounds::MAX_TOKENS,
                "defaults.max_tokens",
                &origin,
            )?,
            disable_after: count(
                theirs.disable_after.or(ours.disable_after).unwrap_or(3),
                bounds::DISABLE_AFTER,
                "defaults.disable_after",
                &origin,
            )?,
            capability_max_tokens: count(
                theirs
                    .capability_max_tokens
                    .or(ours.capability_max_tokens)
                    .unwrap_or(256),
                bounds::MAX_TOKENS,
                "defaults.capability_max_tokens",
                &origin,
            )?,
            probe_share: share(theirs.probe_share.or(ours.probe_share).unwrap_or(0.1)).map_err(
                |why| {
                    Error::config(format!(
                        "invalid config {}: defaults.probe_share {why}",
                        origin_name(&origin)
                    ))
                },
            )?,
            traffic_evidence: theirs
                .traffic_evidence
                .or(ours.traffic_evidence)
                .unwrap_or(3),
            list_every: secs(
                theirs
                    .list_every_secs
                    .or(ours.list_every_secs)
                    .unwrap_or(86_400.0),
                bounds::LIST_EVERY_SECS,
                false,
                "defaults.list_every_secs",
                &origin,
            )?,
            discover_per_run: count(
                theirs
                    .discover_per_run
                    .or(ours.discover_per_run)
                    .unwrap_or(2),
                bounds::DISCOVER_PER_RUN,
                "defaults.discover_per_run",
                &origin,
            )?,
        };
        let mut providers = Vec::with_capacity(tables.len());
        for t in tables {
            providers.push(ProviderTable::read(t, &origin)?.validate(&defaults, &origin)?);
        }
        let user = user.toml;
        let invalid =
            |why: String| Error::config(format!("invalid config {}: {why}", origin_name(&origin)));
        RouteSettings::from_toml(&user.route).map_err(invalid)?;
        let check = CheckSettings::layered(&user.check, env).map_err(|why| {
            match why.starts_with(CHECK_SHARED_STATE_VAR) {
                true => Error::config(why),
                false => invalid(why),
            }
        })?;
        let notify = NotifySettings::from_toml(&user.notify).map_err(invalid)?;
        let names: Vec<&str> = providers.iter().map(|p| p.name.as_str()).collect();
        let env = route::from_env(env, &names).map_err(Error::config)?;
        let mut route = route::layered(&user.route, &env).map_err(invalid)?;
        for p in &mut providers {
            let origin = match env.daily_cap.get(&p.name) {
                Some((cap, var)) => {
                    p.daily_cap = Some(*cap);
                    route::Origin::Env(var.clone())
                }
                None if capped_in_file.contains(&p.name) => route::Origin::File,
                None => route::Origin::Default,
            };
            if let Some(value) = p.daily_cap {
                route
                    .origins
                    .daily_cap
                    .insert(p.name.clone(), route::CapOrigin { value, origin });
            }
        }
        route::validate_aliases(&user.aliases, |p, m| {
            providers
                .iter()
                .any(|x| x.name == p && x.models.iter().any(|y| y == m))
        })
        .map_err(invalid)?;
        Ok(Catalog {
            defaults,
            providers,
            route,
            aliases: user.aliases,
            check,
            notify,
        })
    }

    /// The provider `name`, or an error naming `flag` and every provider.
    pub fn known_provider(&self, name: &str, flag: &str) -> Result<&Provider> {
        self.provider(name).ok_or_else(|| {
            let known: Vec<&str> = self.providers.iter().map(|p| p.name.as_str()).collect();
            let hint = closest_name(name, &known)
                .map(|c| format!("did you mean \"{c}\"? "))
                .unwrap_or_default();
            Error::config(format!(
                "unknown provider \"{name}\" in {flag}; {hint}known providers: {}",
                known.join(", ")
            ))
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

/// The name in `known` closest to `name` (case aside) within a third of
/// its length (at least 2 edits): a typo's likely meaning.
pub fn closest_name<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    let lower = name.to_lowercase();
    let limit = (name.chars().count() / 3).max(2);
    known
        .iter()
        .map(|k| (strsim::levenshtein(&lower, &k.to_lowercase()), *k))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, k)| k)
}

/// Whether `url`'s host is this machine (localhost, 127.0.0.0/8, ::1).
fn is_loopback_url(url: &str) -> bool {
    let Some(host) = reqwest::Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
    else {
        return false;
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => bare == "localhost" || bare.ends_with(".localhost"),
    }
}

/// The base URL of a local server whose host variable holds `value`
/// (`OLLAMA_HOST=0.0.0.0:11434`, `myhost`, `https://box:8443`): its scheme
/// (http unless given), host and port (the default's unless given), and the
/// default's path unless it names one. A bind-all address means this
/// machine. `None` when `value` is not a host or URL.
fn url_from_host(default_base: &str, value: &str) -> Option<String> {
    let value = value.trim();
    let with_scheme = if value.contains("://") {
        value.to_string()
    } else {
        format!("http://{value}")
    };
    let mut url = reqwest::Url::parse(&with_scheme).ok()?;
    let default = reqwest::Url::parse(default_base).ok()?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none_or(str::is_empty) {
        return None;
    }
    let authority = with_scheme
        .split_once("://")
        .map_or("", |(_, rest)| rest.split('/').next().unwrap_or(""));
    let explicit_port = authority
        .rsplit_once(']')
        .map_or(authority, |(_, after)| after)
        .contains(':');
    if !explicit_port {
        url.set_port(default.port()).ok()?;
    }
    match url.host_str() {
        Some("0.0.0.0") => url.set_host(Some("127.0.0.1")).ok()?,
        Some("[::]") => url.set_host(Some("[::1]")).ok()?,
        _ => {}
    }
    if url.path() == "/" {
        url.set_path(default.path());
    }
    Some(url.as_str().trim_end_matches('/').to_string())
}

impl Resolved {
    /// The key probes use: the first variable that is set.
    pub fn first_key(&self) -> Option<&ApiKey> {
        self.keys.first()
    }

    /// The variable the first key came from (`check --list` shows it).
    pub fn key_source(&self) -> Option<&str> {
        self.first_key().map(|k| k.var.as_str())
    }

    /// Every key's value, for a [`crate::upstream::secret::Redactor`].
    pub fn secrets(&self) -> impl Iterator<Item = &Secret> {
        self.keys.iter().map(|k| &k.secret)
    }

    /// Where and how to send requests, without the keys. Built once.
    pub fn endpoint(&self) -> &Endpoint {
        self.endpoint.get_or_init(|| {
            Endpoint::new(
                self.provider.name.clone(),
                self.provider.dialect,
                self.base_url.clone(),
                self.provider.headers.clone(),
            )
            .with_system_messages(self.provider.system_messages)
        })
    }

    /// Whether the provider lives on this machine (localhost, 127.0.0.0/8,
    /// ::1). Such a provider says nothing about the network: a refusal
    /// means its server is not running.
    pub fn is_loopback(&self) -> bool {
        is_loopback_url(&self.base_url)
    }
}

/// For unit tests: a keyless OpenAI-dialect provider's `[[providers]]`
/// table, on a port nothing listens on, with `models` and then `more`
/// (lines such as `enabled = false`, or a `[providers.model_limits]`
/// table); catalogs are these tables one after another.
#[cfg(test)]
pub(crate) fn test_table(name: &str, models: &[&str], more: &str) -> String {
    let models: Vec<String> = models.iter().map(|m| format!("{m:?}")).collect();
    format!(
        "[[providers]]\nname = {name:?}\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodels = [{}]\n{more}\n",
        models.join(", ")
    )
}

/// For unit tests: a provider named `local` of `dialect` at `base_url`
/// with the one model `m`, resolved, holding `key` when one is given.
#[cfg(test)]
pub(crate) fn test_provider(dialect: &str, base_url: &str, key: Option<&str>) -> Resolved {
    let c = Catalog::from_toml_str(
        &format!(
            "include_default_catalog = false\n[[providers]]\nname = \"local\"\ndialect = \"{dialect}\"\nbase_url = \"{base_url}\"\nmodels = [\"m\"]\nmax_tokens = 16\n"
        ),
        "test.toml",
    )
    .unwrap();
    let mut r = c.providers[0].resolve_with(|_| None).unwrap();
    if let Some(k) = key {
        r.keys = vec![ApiKey::new(0, "KEY", Secret::new(k.into()))];
    }
    r
}

/// Whether `name` can be an environment variable's name as llmprobe
/// reads them (`[notify] url_env`, an env file's lines): letters, digits
/// and `_`, not starting with a digit.
pub fn is_env_name(name: &str) -> bool {
    name.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The key of a model in `model_state.json`, as the `String` the maps keyed
/// by text hold: [`ModelKey`] writes it.
pub fn model_key(provider: &str, model: &str) -> String {
    ModelKey::new(provider, model).into()
}

impl Provider {
    /// What the catalog knows of `model` (nothing, when it documents none).
    pub fn info(&self, model: &str) -> ModelInfo {
        self.model_info.get(model).cloned().unwrap_or_default()
    }

    /// Read the environment: fill the URL and find the key.
    pub fn resolve(&self) -> std::result::Result<Resolved, Unusable> {
        self.resolve_with(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    }

    pub fn resolve_with(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> std::result::Result<Resolved, Unusable> {
        let host = self
            .host_env
            .as_ref()
            .and_then(|var| Some((var, env(var)?)));
        let on = match (self.enabled, &host) {
            (Some(explicit), _) => explicit,
            (None, _) if self.host_env.is_some() => host.is_some(),
            (None, _) => true,
        };
        if !on {
            return Err(Unusable::Off {
                host_env: self.host_env.clone().filter(|_| self.enabled.is_none()),
            });
        }
        let mut base_url = match &host {
            Some((var, value)) => {
                url_from_host(&self.base_url, value).ok_or_else(|| Unusable::BadHost {
                    var: (*var).clone(),
                    value: value.clone(),
                })?
            }
            None => self.base_url.clone(),
        };
        let mut missing = Vec::new();
        for (placeholder, var) in &self.url_vars {
            match env(var) {
                Some(value) => base_url = base_url.replace(&format!("{{{placeholder}}}"), &value),
                None => missing.push(var.clone()),
            }
        }
        let keys: Vec<ApiKey> = self
            .api_key_env
            .iter()
            .enumerate()
            .filter_map(|(i, var)| Some(ApiKey::new(i, var.clone(), Secret::new(env(var)?))))
            .collect();
        if keys.is_empty() && !self.api_key_env.is_empty() && !self.key_optional {
            missing.push(self.api_key_env.join(" or "));
        }
        // A remote provider that works without a key is one the user has
        // not asked for until they set its key or turn it on: probing it
        // unasked sends traffic they never chose.
        if keys.is_empty()
            && self.key_optional
            && self.enabled.is_none()
            && self.host_env.is_none()
            && missing.is_empty()
            && !is_loopback_url(&base_url)
        {
            return Err(Unusable::Keyless {
                var: self.api_key_env.join(" or "),
            });
        }
        if !missing.is_empty() {
            return Err(Unusable::Missing(missing));
        }
        Ok(Resolved {
            provider: self.clone(),
            base_url: base_url.trim_end_matches('/').to_string(),
            keys,
            endpoint: std::sync::OnceLock::new(),
        })
    }
}

fn origin_name(origin: &str) -> &str {
    if origin.is_empty() {
        "(embedded)"
    } else {
        origin
    }
}

fn secs(
    v: f64,
    range: RangeInclusive<f64>,
    positive: bool,
    field: &str,
    origin: &str,
) -> Result<Duration> {
    bounded_secs(v, range, positive).map_err(|why| {
        Error::config(format!(
            "invalid config {}: {field} {why}",
            origin_name(origin)
        ))
    })
}

fn count(v: u32, range: RangeInclusive<u32>, field: &str, origin: &str) -> Result<u32> {
    bounded_u32(v, range).map_err(|why| {
        Error::config(format!(
            "invalid config {}: {field} {why}",
            origin_name(origin)
        ))
    })
}

/// A `daily_cap`, from the file or the environment: 0 is refused.
fn check_daily_cap(cap: u64) -> std::result::Result<(), String> {
    if cap == 0 {
        return Err("daily_cap is 0: remove it for no limit".into());
    }
    Ok(())
}

/// The `LLMPROBE_ROUTE_*` and `LLMPROBE_DAILY_CAP_*` variables of this
/// process, sorted by name. A value that is not UTF-8 is an error that
/// names the variable.
fn settings_env() -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (name, value) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if !(name.starts_with(ROUTE_PREFIX)
            || name.starts_with(DAILY_CAP_PREFIX)
            || name == CHECK_SHARED_STATE_VAR)
        {
            continue;
        }
        let value = value
            .into_string()
            .map_err(|_| Error::config(format!("{name} is not valid UTF-8")))?;
        out.push((name.to_string(), value));
    }
    out.sort();
    Ok(out)
}

impl ProviderTable {
    fn priority() -> i64 {
        100
    }

    fn capabilities() -> bool {
        true
    }

    /// Serde's one read of a layered table. Each value was checked, where
    /// it is written, when its file was read, so an error here is a bug.
    fn read(t: toml::Table, origin: &str) -> Result<ProviderTable> {
        let name = table_name(&t).to_string();
        toml::Value::Table(t)
            .try_into()
            .map_err(|e: toml::de::Error| {
                Error::config(format!(
                    "invalid config {}: provider {name:?}: {}",
                    origin_name(origin),
                    without_values(e.message().trim_end())
                ))
            })
    }

    /// The checks serde cannot make: what a new provider must say, what
    /// needs `[defaults]` or another field, ranges, and the values read as
    /// text. Each error names the provider and the field.
    fn validate(self, d: &Defaults, origin: &str) -> Result<Provider> {
        let t = self;
        let bad = |msg: String| -> Error {
            ConfigError(format!(
                "invalid config {}: provider \"{}\": {msg}",
                origin_name(origin),
                t.name
            ))
            .into()
        };
        if t.name.trim().is_empty() || ModelKey::is_key(&t.name) {
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
        for placeholder in t.url_vars.keys() {
            if !base_url.contains(&format!("{{{placeholder}}}")) {
                return Err(bad(format!(
                    "url_vars names {{{placeholder}}}, which base_url does not contain"
                )));
            }
        }
        let discover = match &t.discover {
            Some(s) => named::<Discover>("discover", "a choice", s).map_err(bad)?,
            None => Discover::Off,
        };
        if let Some(m) = t
            .models
            .iter()
            .chain(&t.models_add)
            .find(|m| m.trim().is_empty())
        {
            return Err(bad(format!("model id \"{m}\" is empty")));
        }
        let mut models = t.models.clone();
        for m in &t.models_add {
            if !models.contains(m) {
                models.push(m.clone());
            }
        }
        if t.enabled != Some(false) && models.is_empty() && discover == Discover::Off {
            return Err(bad(
                "`models` is empty (list models, or turn on discover = \"free\" or \"all\")".into(),
            ));
        }
        let list_every = match t.list_every_secs {
            Some(v) => bounded_secs(v, bounds::LIST_EVERY_SECS, false)
                .map_err(|why| bad(format!("list_every_secs {why}")))?,
            None => d.list_every,
        };
        let discover_per_run = match t.discover_per_run {
            Some(v) => bounded_u32(v, bounds::DISCOVER_PER_RUN)
                .map_err(|why| bad(format!("discover_per_run {why}")))?,
            None => d.discover_per_run,
        };
        let spacing = match t.spacing_secs {
            Some(v) => bounded_secs(v, bounds::SPACING_SECS, false)
                .map_err(|why| bad(format!("spacing_secs {why}")))?,
            None => d.spacing,
        };
        let timeout = match t.timeout_secs {
            Some(v) => bounded_secs(v, bounds::TIMEOUT_SECS, true)
                .map_err(|why| bad(format!("timeout_secs {why}")))?,
            None => d.timeout,
        };
        let stall = match t.stall_secs {
            Some(v) => bounded_secs(v, bounds::STALL_SECS, true)
                .map_err(|why| bad(format!("stall_secs {why}")))?,
            None => d.stall,
        };
        let max_tokens = match t.max_tokens {
            Some(v) => bounded_u32(v, bounds::MAX_TOKENS)
                .map_err(|why| bad(format!("max_tokens {why}")))?,
            None => d.max_tokens,
        };
        if let Some(var) = t.host_env.as_ref().filter(|v| v.trim().is_empty()) {
            return Err(bad(format!("host_env {var:?} is empty")));
        }
        let zero = |field: String| bad(format!("{field} is 0: remove it for no limit"));
        if let Some(f) = t.limits.zero_field() {
            return Err(zero(format!("limits.{f}")));
        }
        if let Some(f) = t.key_limits.zero_field() {
            return Err(zero(format!("key_limits.{f}")));
        }
        if let Some(cap) = t.daily_cap {
            check_daily_cap(cap).map_err(bad)?;
        }
        for (model, l) in &t.model_limits {
            if !models.contains(model) {
                return Err(bad(format!(
                    "model_limits names {model:?}, which is not in `models`"
                )));
            }
            if let Some(f) = l.zero_field() {
                return Err(zero(format!("model_limits.{model:?}.{f}")));
            }
        }
        let mut model_info = BTreeMap::new();
        for (model, i) in &t.model_info {
            if !models.contains(model) {
                return Err(bad(format!(
                    "model_info names {model:?}, which is not in `models`"
                )));
            }
            let info = i
                .validate(model)
                .map_err(|why| bad(format!("model_info.{model:?}.{why}")))?;
            model_info.insert(model.clone(), info);
        }
        let probe_share = match t.probe_share {
            Some(v) => share(v).map_err(|why| bad(format!("probe_share {why}")))?,
            None => d.probe_share,
        };
        let day_reset = match &t.day_reset {
            Some(s) => parse_day_reset(s).map_err(bad)?,
            None => NaiveTime::MIN,
        };
        let requests_header_window = match &t.requests_header_window {
            Some(s) => {
                named::<RequestsWindow>("requests_header_window", "a window", s).map_err(bad)?
            }
            None => RequestsWindow::default(),
        };
        let system_messages = match &t.system_messages {
            None => None,
            Some(s) => {
                let can = wire(dialect).system_messages();
                let names: Vec<String> = can.iter().map(|c| format!("{:?}", c.as_str())).collect();
                match s.parse::<SystemMessages>() {
                    Ok(v) if can.contains(&v) => Some(v),
                    _ => {
                        return Err(bad(format!(
                            "system_messages {s:?} is not a placement the {} dialect has: use {}",
                            dialect.as_str(),
                            names.join(" or ")
                        )));
                    }
                }
            }
        };
        Ok(Provider {
            name: t.name,
            enabled: t.enabled,
            host_env: t.host_env,
            dialect,
            base_url,
            api_key_env: t.api_key_env,
            key_optional: t.key_optional,
            url_vars: t.url_vars,
            models,
            spacing,
            timeout,
            stall,
            max_tokens,
            headers: t.headers,
            priority: t.priority,
            limits: t.limits,
            model_limits: t.model_limits,
            model_info,
            key_limits: t.key_limits,
            daily_cap: t.daily_cap,
            capabilities: t.capabilities,
            day_reset,
            requests_header_window,
            system_messages,
            probe_share,
            discover,
            list_every,
            discover_per_run,
        })
    }
}

/// A `probe_share`: a fraction of a daily limit, above 0 and at most 1.
fn share(v: f64) -> std::result::Result<f64, String> {
    if v.is_finite() && v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(format!(
            "{v} is out of range: a share of each daily limit, above 0 and at most 1 (0.1 is 10 %)"
        ))
    }
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
            "nvidia",
            "together",
        ] {
            let p = c.provider(name).unwrap_or_else(|| panic!("{name} missing"));
            assert!(!p.models.is_empty());
        }
        // GitHub Models, which the old tool had, was retired on 2026-07-30
        // (github.blog/changelog/2026-07-30-github-models-is-now-retired).
        assert!(c.provider("github").is_none());
        assert_eq!(c.defaults.spacing, Duration::from_secs(90));
    }

    #[test]
    fn check_shared_state_comes_from_the_file_or_its_variable_and_is_named_when_bad() {
        let file = |url: &str| {
            let text =
                format!("include_default_catalog = false\n[check]\nshared_state = \"{url}\"\n");
            (parse_toml(&text, "x.toml").unwrap(), "x.toml".to_string())
        };
        let none = Catalog::build(None, &[]).unwrap();
        assert_eq!(none.check, CheckSettings::default());
        let c = Catalog::build(Some(file("redis://h:1/0")), &[]).unwrap();
        assert_eq!(c.check.shared_state.as_deref(), Some("redis://h:1/0"));
        let var = |v: &str| vec![(CHECK_SHARED_STATE_VAR.to_string(), v.to_string())];
        let c = Catalog::build(Some(file("redis://h:1/0")), &var("redis://e:2/0")).unwrap();
        assert_eq!(c.check.shared_state.as_deref(), Some("redis://e:2/0"));
        // An empty variable leaves the file's.
        let c = Catalog::build(Some(file("redis://h:1/0")), &var("")).unwrap();
        assert_eq!(c.check.shared_state.as_deref(), Some("redis://h:1/0"));
        let e = Catalog::build(Some(file("http://u:secret@h:1")), &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("x.toml") && e.contains("check.shared_state"),
            "{e}"
        );
        assert!(!e.contains("secret"), "{e}");
        let e = Catalog::build(None, &var("h:1")).unwrap_err().to_string();
        assert!(e.contains(CHECK_SHARED_STATE_VAR), "{e}");
        let text = "[check]\nshared = \"redis://h\"\n";
        let e = parse_toml(text, "y.toml").unwrap_err().to_string();
        assert!(e.contains("y.toml") && e.contains("shared"), "{e}");
    }

    #[test]
    fn notify_url_env_names_variables_and_never_quotes_a_url() {
        let load = |body: &str| {
            let text = format!("include_default_catalog = false\n[notify]\n{body}\n");
            Catalog::from_toml_str(&text, "n.toml")
        };
        assert_eq!(Catalog::embedded().notify, NotifySettings::default());
        let c = load(r#"url_env = ["SLACK_HOOK", "_X1", "SLACK_HOOK"]"#).unwrap();
        assert_eq!(c.notify.url_env, ["SLACK_HOOK", "_X1"]);
        let e = load(r#"url_env = ["https://hooks.slack.com/services/SECRET"]"#).unwrap_err();
        assert_eq!(e.exit_code(), crate::exit::USAGE);
        let e = e.to_string();
        assert!(
            e.contains("n.toml") && e.contains("notify.url_env[0]"),
            "{e}"
        );
        assert!(!e.contains("SECRET"), "{e}");
        let e = load(r#"url_env = ["1BAD"]"#).unwrap_err().to_string();
        assert!(e.contains("\"1BAD\" is not an environment variable"), "{e}");
        let e = load(r#"url = "x""#).unwrap_err().to_string();
        assert!(e.contains("n.toml") && e.contains("url"), "{e}");
        // A URL where it does not belong is refused by its key, never quoted.
        for body in [
            r#"url = "https://hooks.slack.com/services/SECRET""#,
            r#"url_env = "https://hooks.slack.com/services/SECRET""#,
            r#"url_env = ["A", 5, "https://hooks.slack.com/services/SECRET"]"#,
            // Not even TOML: the line at fault is named, not shown.
            r#"url_env = "SLACK" "https://hooks.slack.com/services/SECRET""#,
        ] {
            let e = load(body).unwrap_err();
            assert_eq!(e.exit_code(), crate::exit::USAGE, "{body}");
            let e = e.to_string();
            assert!(e.contains("n.toml") && e.contains("url"), "{body}: {e}");
            assert!(!e.contains("SECRET"), "{body}: {e}");
        }
        // One name as a string is a list of one.
        let c = load(r#"url_env = "SLACK_HOOK""#).unwrap();
        assert_eq!(c.notify.url_env, ["SLACK_HOOK"]);
    }

    #[test]
    fn notify_on_names_what_to_alert_on() {
        let load = |body: &str| {
            let text = format!("include_default_catalog = false\n[notify]\n{body}\n");
            Catalog::from_toml_str(&text, "n.toml")
        };
        let d = Catalog::embedded().notify;
        assert_eq!(d.on, [AlertOn::Disabled, AlertOn::ProviderDown]);
        assert_eq!(d.after, 2);
        let c = load(r#"on = ["provider_down", "paused", "disabled", "paused"]"#).unwrap();
        assert_eq!(
            c.notify.on,
            [AlertOn::Paused, AlertOn::Disabled, AlertOn::ProviderDown]
        );
        assert_eq!(
            load(r#"on = "paused""#).unwrap().notify.on,
            [AlertOn::Paused]
        );
        assert!(load("on = []").unwrap().notify.on.is_empty());
        let e = load(r#"on = ["disabled", "pause"]"#).unwrap_err();
        assert_eq!(e.exit_code(), crate::exit::USAGE);
        let e = e.to_string();
        assert!(
            e.contains("n.toml")
                && e.contains(r#"notify.on[1] "pause""#)
                && e.contains(r#""paused", "disabled" or "provider_down""#),
            "{e}"
        );
        let e = load("on = 3").unwrap_err().to_string();
        assert!(e.contains("notify.on: a list"), "{e}");
        let e = load("when = 1").unwrap_err().to_string();
        assert!(e.contains("takes url_env, after and on"), "{e}");
    }

    #[test]
    fn the_environment_sets_route_keys_and_daily_caps_over_the_file() {
        let text = r#"
            include_default_catalog = false
            [route]
            budget_secs = 30
            max_attempts = 4
            [[providers]]
            name = "a"
            dialect = "openai"
            base_url = "http://127.0.0.1:1/v1"
            models = ["m"]
            daily_cap = 5
            [[providers]]
            name = "b-2"
            dialect = "openai"
            base_url = "http://127.0.0.1:1/v1"
            models = ["m"]
        "#;
        let build = |env: &[(&str, &str)]| {
            let env: Vec<(String, String)> = env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            Catalog::build(
                Some((parse_toml(text, "t.toml").unwrap(), "t.toml".into())),
                &env,
            )
        };
        let c = build(&[
            ("LLMPROBE_ROUTE_BUDGET_SECS", "20"),
            ("LLMPROBE_DAILY_CAP_B_2", "3"),
        ])
        .unwrap();
        assert_eq!(c.route.time_budget, Duration::from_secs(20));
        assert_eq!(c.route.max_attempts, 4);
        assert_eq!(c.provider("b-2").unwrap().daily_cap, Some(3));
        assert_eq!(c.provider("a").unwrap().daily_cap, Some(5));
        let caps = &c.route.origins.daily_cap;
        assert_eq!(caps["a"].origin, Origin::File);
        assert_eq!(
            caps["b-2"],
            CapOrigin {
                value: 3,
                origin: Origin::Env("LLMPROBE_DAILY_CAP_B_2".into())
            }
        );
        let shown: Vec<String> = c
            .route
            .effective()
            .iter()
            .map(|e| format!("{}={} ({})", e.setting, e.value, e.origin))
            .collect();
        assert!(shown.contains(&"route.budget_secs=20.0 (env LLMPROBE_ROUTE_BUDGET_SECS)".into()));
        assert!(shown.contains(&"route.max_attempts=4 (llmprobe.toml)".into()));
        assert!(shown.contains(&"route.idle_timeout_secs=60.0 (default)".into()));
        assert!(shown.contains(&"providers.a.daily_cap=5 (llmprobe.toml)".into()));
        // Errors are config errors (exit 2) that name the variable.
        let e = build(&[("LLMPROBE_DAILY_CAP_B", "3")]).unwrap_err();
        assert_eq!(e.exit_code(), crate::exit::USAGE);
        assert!(e.to_string().contains("LLMPROBE_DAILY_CAP_B_2"), "{e}");
        // Without the variables, the file's values, from the file.
        let c = build(&[]).unwrap();
        assert_eq!(c.route.origins.route["budget_secs"], Origin::File);
        assert!(!c.route.origins.daily_cap.contains_key("b-2"));
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
        assert_eq!(c.provider("openai").unwrap().enabled, Some(false));
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
    fn a_config_error_never_quotes_the_line_at_fault() {
        let text = "include_default_catalog = false\n[[providers]]\nname = \"a\"\n\
                    dialect = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
                    models = [\"m\"]\napi_key = \"sk-canary-SECRET-1234567890\"\n";
        let err = Catalog::from_toml_str(text, "k.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("api_key") && err.contains("line 7"), "{err}");
        assert!(!err.contains("SECRET"), "{err}");
    }

    /// Found by the `config_parse` fuzz target: a value of the wrong type
    /// or an unknown name was quoted by serde's message, so a key pasted
    /// into `timeout_secs` or `dialect` was printed.
    /// Found by the `config_parse` fuzz target: a key pasted in as a key's
    /// name was shown as the key of the line at fault.
    #[test]
    fn a_config_error_never_shows_a_key_pasted_as_a_name() {
        let text = "[defaults]\nQ_API_KEsk-canary-SECRET-1234567890 = X\n";
        let err = Catalog::from_toml_str(text, "k.toml")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("SECRET"), "{err}");
        assert!(err.contains("line 2"), "{err}");
        // A key spelled as config keys are is still named.
        let err = Catalog::from_toml_str("[defaults]\ntimeout_secs = x\n", "k.toml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("(timeout_secs)"), "{err}");
    }

    #[test]
    fn a_config_error_never_quotes_the_value_at_fault() {
        for text in [
            "[defaults]\ntimeout_secs = \"sk-canary-SECRET-1234567890\"\n",
            "[[providers]]\nname = \"a\"\ndialect = \"sk-canary-SECRET-1234567890\"\n",
            "[defaults]\ntimeout_secs = \"a \\\" sk-canary-SECRET-1234567890\"\n",
        ] {
            let err = Catalog::from_toml_str(text, "k.toml")
                .unwrap_err()
                .to_string();
            assert!(!err.contains("SECRET"), "{err}");
            assert!(
                err.contains("(value not shown)") && err.contains("line "),
                "{err}"
            );
        }
        assert_eq!(
            without_values("invalid type: string \"x\\\"y\", expected f64"),
            "invalid type: string (value not shown), expected f64"
        );
    }

    /// Every provider the old tool logged, read from its real log the way
    /// `rollup` reads it, so a migrating user's history never names a
    /// provider that `check` no longer probes.
    #[test]
    fn embedded_catalog_has_every_provider_of_the_compat_log() {
        use crate::healthlog::read::{Record, Sink, read_all};
        use std::collections::BTreeSet;

        struct Names(BTreeSet<String>);
        impl Sink for Names {
            fn record(&mut self, r: &Record<'_>) {
                self.0.insert(r.provider.to_string());
            }
            fn merge(&mut self, later: Self) {
                self.0.extend(later.0);
            }
        }
        let log = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/compat/the-brain-health_log.json");
        let (names, summary) = read_all(&log, || Names(BTreeSet::new())).unwrap();
        assert_eq!(summary.skipped, 0, "every entry names its provider");
        assert!(!names.0.is_empty(), "no providers read from {log:?}");
        let c = Catalog::embedded();
        let missing: Vec<&String> = names.0.iter().filter(|n| c.provider(n).is_none()).collect();
        assert!(
            missing.is_empty(),
            "not in the embedded catalog: {missing:?}"
        );
    }

    #[test]
    fn xai_is_keyed_like_the_others() {
        let c = Catalog::embedded();
        let xai = c.provider("xai").unwrap();
        assert_eq!(xai.dialect, Dialect::Openai);
        assert_eq!(xai.base_url, "https://api.x.ai/v1");
        assert!(xai.limits.is_empty(), "no source gives xAI limits");
        let unset = xai.resolve_with(|_| None).unwrap_err();
        assert_eq!(unset.to_string(), "skipped: set XAI_API_KEY");
        let r = xai
            .resolve_with(|k| (k == "XAI_API_KEY").then(|| "xai-test-not-a-key".to_string()))
            .unwrap();
        assert_eq!(r.key_source(), Some("XAI_API_KEY"));
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
        // Every missing variable is named, not only the first.
        let missing = cf.resolve_with(|_| None).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "skipped: set CLOUDFLARE_ACCOUNT_ID and CLOUDFLARE_API_TOKEN or CLOUDFLARE_API_KEY"
        );
        let groq = c
            .provider("groq")
            .unwrap()
            .resolve_with(|_| None)
            .unwrap_err();
        assert_eq!(groq.to_string(), "skipped: set GROQ_API_KEY");
    }

    #[test]
    fn every_set_key_is_kept_with_a_fingerprint() {
        let c = Catalog::from_toml_str(
            r#"
            include_default_catalog = false
            [[providers]]
            name = "p"
            dialect = "openai"
            base_url = "https://example.com/v1"
            api_key_env = ["A_KEY", "B_KEY", "C_KEY"]
            models = ["m"]
            "#,
            "t.toml",
        )
        .unwrap();
        let (a, b) = ("sk-first-0123456789abcdef", "sk-second-0123456789abcdef");
        let env = |k: &str| match k {
            "A_KEY" => Some(a.to_string()),
            "C_KEY" => Some(b.to_string()),
            _ => None,
        };
        let r = c.providers[0].resolve_with(env).unwrap();
        assert_eq!(r.keys.len(), 2);
        assert_eq!((r.keys[0].index, r.keys[0].var.as_str()), (0, "A_KEY"));
        assert_eq!((r.keys[1].index, r.keys[1].var.as_str()), (2, "C_KEY"));
        assert_eq!(r.first_key().unwrap().secret.expose(), a);
        assert_eq!(r.key_source(), Some("A_KEY"));
        let (fa, fb) = (&r.keys[0].fingerprint, &r.keys[1].fingerprint);
        assert_ne!(fa, fb);
        // Stable across runs and builds: SHA-256 of the value starts 50fb52a6.
        assert_eq!(fa, "k1:50fb52a6");
        for (k, value) in r.keys.iter().zip([a, b]) {
            let debug = format!("{k:?}");
            assert!(!debug.contains(value), "{debug}");
            assert!(!debug.contains("0123456789"), "{debug}");
            assert!(debug.contains(&k.fingerprint), "{debug}");
            assert!(!k.fingerprint.contains(value));
        }
        // None set: the provider is skipped, naming every alternative.
        let none = c.providers[0].resolve_with(|_| None).unwrap_err();
        assert_eq!(none.to_string(), "skipped: set A_KEY or B_KEY or C_KEY");
    }

    #[test]
    fn limits_layer_per_model_per_key_and_per_provider() {
        let c = Catalog::from_toml_str(
            r#"
            [[providers]]
            name = "groq"
            key_limits = { rpm = 100 }
            daily_cap = 5000
            day_reset = "07:30"
            [providers.model_limits]
            "openai/gpt-oss-20b" = { rpm = 5 }
            "#,
            "t.toml",
        )
        .unwrap();
        let groq = c.provider("groq").unwrap();
        assert_eq!(groq.limits.rpm, Some(30));
        // The user's model_limits replace the embedded map as a whole.
        assert_eq!(
            groq.model_limits["openai/gpt-oss-20b"],
            Limits {
                rpm: Some(5),
                ..Limits::default()
            }
        );
        assert_eq!(groq.key_limits.rpm, Some(100));
        assert_eq!(groq.daily_cap, Some(5000));
        assert_eq!(groq.day_reset, NaiveTime::from_hms_opt(7, 30, 0).unwrap());
        assert_eq!(c.provider("openai").unwrap().day_reset, NaiveTime::MIN);
        assert_eq!(
            c.provider("gemini").unwrap().day_reset,
            NaiveTime::from_hms_opt(8, 0, 0).unwrap()
        );
    }

    #[test]
    fn trimming_models_keeps_the_limits_of_those_left() {
        let c = Catalog::from_toml_str(
            "[[providers]]\nname = \"groq\"\nmodels = [\"openai/gpt-oss-120b\", \"new\"]\n",
            "t.toml",
        )
        .unwrap();
        let groq = c.provider("groq").unwrap();
        assert_eq!(
            groq.model_limits.keys().collect::<Vec<_>>(),
            ["openai/gpt-oss-120b"]
        );
    }

    #[test]
    fn bad_limits_are_named() {
        let err = |extra: &str| {
            Catalog::from_toml_str(
                &format!("[[providers]]\nname = \"groq\"\n{extra}\n"),
                "t.toml",
            )
            .unwrap_err()
            .to_string()
        };
        let e = err("model_limits = { \"no-such-model\" = { rpm = 1 } }");
        assert!(e.contains("\"no-such-model\"") && e.contains("groq"), "{e}");
        let e = err("limits = { rpm = 0 }");
        assert!(e.contains("limits.rpm is 0"), "{e}");
        let e = err("key_limits = { tpd = 0 }");
        assert!(e.contains("key_limits.tpd is 0"), "{e}");
        let e = err("daily_cap = 0");
        assert!(e.contains("daily_cap is 0"), "{e}");
        let e = err("model_limits = { \"openai/gpt-oss-20b\" = { tpm = 0 } }");
        assert!(
            e.contains("model_limits.\"openai/gpt-oss-20b\".tpm is 0"),
            "{e}"
        );
        let e = err("limits = { rpmm = 1 }");
        assert!(e.contains("rpmm"), "{e}");
        for bad in [
            "\"7:00\"",
            "\"24:00\"",
            "\"07:60\"",
            "\"0700\"",
            "\"07:00Z\"",
        ] {
            let e = err(&format!("day_reset = {bad}"));
            assert!(e.contains("day_reset") && e.contains("HH:MM"), "{bad}: {e}");
        }
    }

    #[test]
    fn a_model_date_is_a_calendar_day_written_yyyy_mm_dd() {
        assert_eq!(
            parse_model_date("2027-01-14"),
            Ok(NaiveDate::from_ymd_opt(2027, 1, 14).unwrap())
        );
        assert_eq!(
            parse_model_date("2028-02-29"),
            Ok(NaiveDate::from_ymd_opt(2028, 2, 29).unwrap())
        );
        for bad in [
            "",
            "2027-1-14",
            "2027-01-4",
            "27-01-14",
            "2027/01/14",
            "2027-13-01",
            "2027-02-30",
            "2027-01-14T00:00:00Z",
            " 2027-01-14",
            "+027-01-14",
            "2027-01-1a",
        ] {
            let e = parse_model_date(bad).unwrap_err();
            assert_eq!(
                e,
                format!("{bad:?} is not a date written YYYY-MM-DD, such as \"2027-01-14\""),
            );
        }
    }

    #[test]
    fn deprecated_and_successor_are_read_and_their_errors_named() {
        let c = Catalog::from_toml_str(
            "[[providers]]\nname = \"openai\"\nmodel_info = { \"gpt-4o-mini\" = \
             { deprecated = \"2027-01-14\", successor = \"gpt-5.4-mini\" } }\n",
            "t.toml",
        )
        .unwrap();
        let info = c.provider("openai").unwrap().info("gpt-4o-mini");
        assert_eq!(info.deprecated, NaiveDate::from_ymd_opt(2027, 1, 14));
        assert_eq!(info.successor.as_deref(), Some("gpt-5.4-mini"));
        // The embedded catalog fills them where the registry gives a date.
        let embedded = Catalog::embedded()
            .provider("openai")
            .unwrap()
            .info("gpt-4o-mini");
        assert_eq!(embedded.deprecated, NaiveDate::from_ymd_opt(2027, 1, 14));
        let err = |entry: &str| {
            Catalog::from_toml_str(
                &format!(
                    "[[providers]]\nname = \"openai\"\nmodel_info = {{ \"gpt-4o-mini\" = {{ {entry} }} }}\n"
                ),
                "t.toml",
            )
            .unwrap_err()
            .to_string()
        };
        assert_eq!(
            err("deprecated = \"2027-13-01\""),
            "invalid config t.toml: provider \"openai\": model_info.\"gpt-4o-mini\".deprecated \
             \"2027-13-01\" is not a date written YYYY-MM-DD, such as \"2027-01-14\""
        );
        assert_eq!(
            err("successor = \" \""),
            "invalid config t.toml: provider \"openai\": model_info.\"gpt-4o-mini\".successor \
             is empty: name the model that replaces it"
        );
        assert_eq!(
            err("successor = \"gpt-4o-mini\""),
            "invalid config t.toml: provider \"openai\": model_info.\"gpt-4o-mini\".successor \
             \"gpt-4o-mini\" is the model itself"
        );
        // A TOML date written bare is the same day; a time or a number is not.
        let c = Catalog::from_toml_str(
            "[[providers]]\nname = \"openai\"\nmodel_info = { \"gpt-4o-mini\" = { deprecated = 2027-01-14 } }\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(
            c.provider("openai").unwrap().info("gpt-4o-mini").deprecated,
            NaiveDate::from_ymd_opt(2027, 1, 14)
        );
        assert_eq!(
            err("deprecated = 2027-01-14T00:00:00Z"),
            "invalid config t.toml: provider \"openai\": model_info.\"gpt-4o-mini\".deprecated \
             \"2027-01-14T00:00:00Z\" is not a date written YYYY-MM-DD, such as \"2027-01-14\""
        );
        assert_eq!(
            err("deprecated = 20270114"),
            "invalid config t.toml: provider \"openai\": model_info.\"gpt-4o-mini\".deprecated \
             20270114 is not a date written YYYY-MM-DD, such as \"2027-01-14\""
        );
        // The other model_info errors keep their wording.
        assert_eq!(
            err("context_window = 0"),
            "invalid config t.toml: provider \"openai\": model_info.\"gpt-4o-mini\".context_window \
             is 0: remove it when it is not known"
        );
        let e = err("deprecation = \"2027-01-14\"");
        assert!(
            e.contains("unknown field `deprecation`") && e.contains("`deprecated`, `successor`"),
            "{e}"
        );
    }

    #[test]
    fn requests_header_window_is_a_catalog_field() {
        let embedded = Catalog::embedded();
        let window = |c: &Catalog, p: &str| c.provider(p).unwrap().requests_header_window;
        assert_eq!(window(&embedded, "groq"), RequestsWindow::Day);
        assert_eq!(window(&embedded, "openai"), RequestsWindow::Minute);
        assert_eq!(window(&embedded, "cerebras"), RequestsWindow::Minute);
        // A user file sets it on any provider, and can set Groq's back.
        let c = Catalog::from_toml_str(
            "[[providers]]\nname = \"openai\"\nrequests_header_window = \"day\"\n\n\
             [[providers]]\nname = \"groq\"\nrequests_header_window = \"minute\"\n",
            "t.toml",
        )
        .unwrap();
        assert_eq!(window(&c, "openai"), RequestsWindow::Day);
        assert_eq!(window(&c, "groq"), RequestsWindow::Minute);
        // Another field of groq's leaves it as embedded.
        let c = Catalog::from_toml_str("[[providers]]\nname = \"groq\"\npriority = 5\n", "t.toml")
            .unwrap();
        assert_eq!(window(&c, "groq"), RequestsWindow::Day);
    }

    #[test]
    fn unknown_requests_header_window_names_provider_field_and_values() {
        for bad in ["\"daily\"", "\"Day\"", "\"\""] {
            let e = Catalog::from_toml_str(
                &format!("[[providers]]\nname = \"groq\"\nrequests_header_window = {bad}\n"),
                "t.toml",
            )
            .unwrap_err();
            let e = e.to_string();
            assert!(
                e.contains("t.toml")
                    && e.contains("provider \"groq\"")
                    && e.contains(&format!("requests_header_window {bad}"))
                    && e.contains("use \"minute\" or \"day\""),
                "{bad}: {e}"
            );
        }
        // Not a string at all: toml names the field.
        let e = Catalog::from_toml_str(
            "[[providers]]\nname = \"groq\"\nrequests_header_window = 1\n",
            "t.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("requests_header_window"), "{e}");
    }

    #[test]
    fn limits_overlay_and_tighten_field_by_field() {
        let a = Limits {
            rpm: Some(30),
            rpd: Some(1000),
            ..Limits::default()
        };
        let b = Limits {
            rpm: Some(10),
            tpm: Some(6000),
            ..Limits::default()
        };
        assert_eq!(
            a.overlaid(&b),
            Limits {
                rpm: Some(10),
                rpd: Some(1000),
                tpm: Some(6000),
                tpd: None
            }
        );
        let loose = Limits {
            rpm: Some(60),
            ..Limits::default()
        };
        assert_eq!(a.tightest(&loose).rpm, Some(30));
        assert_eq!(loose.tightest(&b).tpm, Some(6000));
    }
}
