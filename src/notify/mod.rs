//! Alerts: a message to a webhook when a model or a provider changes state,
//! so that people hear of a dead model before a request fails on it.
//!
//! - [`Change`] and [`Message`] are what is said, whoever says it (`check`
//!   after a run, `notify test`, and `route --serve`'s own events).
//! - `channel` turns a webhook URL into a channel (ntfy, Slack, Discord, a
//!   generic JSON POST) and a [`Message`] into that channel's request, and
//!   delivers it with bounded retries.
//! - `decide` is when to say it: it compares a run with what has been
//!   alerted before (`record`: `stats/notify_state.json`), applies
//!   `--notify-after`, and yields the changes worth a message;
//!   `observer` does it after every `check` run and sends the message.
//! - `notifier` is the one interface every sender goes through:
//!   [`Notifier`] (the configured channels; one message to all of them,
//!   blocking for `check`, spawned on `route --serve`'s runtime) and
//!   [`Batch`] (once per change of direction per subject, and the events
//!   of a short window in one message), which route's events use;
//!   `check`'s decision applies the same rule through
//!   [`record::Standing::raise`] and [`record::Standing::resolve`].
//!
//! A webhook URL is a secret (its path is the credential): it is never
//! written to a file llmprobe writes, and messages about a channel name
//! only its scheme and host.

pub mod channel;
pub mod check_alerts;
pub mod decide;
pub mod notifier;
pub mod record;

pub use channel::{Channel, configured, deliver};
pub use notifier::{Batch, Notifier};

use chrono::{DateTime, Utc};
use serde::Serialize;

/// What changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// A model went `paused` or `disabled`.
    ModelDown,
    /// A model came back `active`.
    ModelRecovered,
    /// Every probed model of a provider failed.
    ProviderDown,
    /// A provider that was down answered again.
    ProviderRecovered,
    /// `route --serve` benched a provider or one of its keys (or a key's
    /// use of a model) for a day or until the next UTC midnight: a 402, a
    /// 403, or a spent quota.
    Benched,
    /// That bench ended (its time ran out, or it was lifted).
    BenchEnded,
    /// `route --serve` entered degraded mode.
    Degraded,
    /// `route --serve` left degraded mode.
    Ready,
}

impl ChangeKind {
    /// A recovery resolves an earlier alert.
    pub fn is_recovery(self) -> bool {
        matches!(
            self,
            ChangeKind::ModelRecovered
                | ChangeKind::ProviderRecovered
                | ChangeKind::BenchEnded
                | ChangeKind::Ready
        )
    }

    /// A change of the whole router (degraded mode), of no provider.
    pub fn is_route_wide(self) -> bool {
        matches!(self, ChangeKind::Degraded | ChangeKind::Ready)
    }
}

/// How urgent a message is, by severity: ntfy's `Priority` header and the
/// JSON body's `priority` (docs/alerts.md, "Priority").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum Priority {
    /// Good news, or what comes back by itself: every recovery, a model
    /// paused.
    Low,
    /// One thing needs a person: a model disabled, a key benched for the
    /// day; and a test message.
    Default,
    /// Nothing of a provider works, or of most of them: a provider down,
    /// route degraded.
    High,
}

impl Priority {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// One change worth telling, in the generic JSON body as it is written
/// (docs/alerts.md documents the body; keep it stable).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub kind: ChangeKind,
    /// Empty (`null` in the JSON body) for a route-wide change.
    #[serde(serialize_with = "empty_as_null")]
    pub provider: String,
    /// `None` for a provider-wide change.
    pub model: Option<String>,
    /// For a bench on one key: which key, as `#0:3f9a1c2e` (its index and
    /// fingerprint, never the key). Absent from the body otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The state before, as the state file spells it (`active`, `paused`,
    /// `disabled`), or `up`/`down` for a provider.
    pub from: String,
    pub to: String,
    /// Why, in a few words (the state machine's reason).
    pub reason: String,
    /// The probe's error, redacted and shortened; `None` when there was
    /// none (a recovery).
    pub error: Option<String>,
    /// For a bench: when it ends. Absent from the body otherwise.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "rfc3339_opt"
    )]
    pub until: Option<DateTime<Utc>>,
    /// For a recovery: when the alert it resolves was sent (from
    /// `notify_state.json`), so that the message can name it and the JSON
    /// body can carry the alert's `id`; `None` for an alert, or when that
    /// is not known.
    #[serde(skip)]
    pub alerted_at: Option<DateTime<Utc>>,
}

impl Change {
    /// How urgent this change is ([`Priority`]).
    pub fn priority(&self) -> Priority {
        match self.kind {
            k if k.is_recovery() => Priority::Low,
            ChangeKind::ProviderDown | ChangeKind::Degraded => Priority::High,
            ChangeKind::ModelDown if self.to != "disabled" => Priority::Low,
            _ => Priority::Default,
        }
    }

    /// `groq::openai/gpt-oss-20b`, or `groq` for a provider-wide change;
    /// `groq#0:3f9a1c2e` for one key (`groq#0:3f9a1c2e::m`: its use of one
    /// model); `route` for a route-wide change.
    pub fn subject(&self) -> String {
        if self.kind.is_route_wide() {
            return "route".to_string();
        }
        let who = match &self.key {
            Some(k) => format!("{}{k}", self.provider),
            None => self.provider.clone(),
        };
        match &self.model {
            Some(m) => crate::catalog::model_key(&who, m),
            None => who,
        }
    }

    /// The incident this change belongs to, the same for an alert and the
    /// recovery that resolves it: `groq::m@2026-05-02T10:00:00Z`, the
    /// subject and when the alert was sent (`at` for an alert, the
    /// recovery's [`Change::alerted_at`] for a recovery). `None` for a
    /// recovery whose alert is not known.
    pub fn incident(&self, at: DateTime<Utc>) -> Option<String> {
        let when = match self.kind.is_recovery() {
            true => self.alerted_at?,
            false => at,
        };
        Some(format!(
            "{}@{}",
            self.subject(),
            when.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ))
    }
}

/// One message: every change of one run (or one event), at one time.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    /// When the run (or the event) happened.
    pub at: DateTime<Utc>,
    pub changes: Vec<Change>,
    /// `llmprobe notify test`: a test message, with no changes.
    pub test: bool,
}

impl Message {
    /// The priority of its most urgent change; `default` for a test.
    pub fn priority(&self) -> Priority {
        match self.test {
            true => Priority::Default,
            false => self
                .changes
                .iter()
                .map(Change::priority)
                .max()
                .unwrap_or(Priority::Default),
        }
    }
}

fn empty_as_null<S: serde::Serializer>(v: &str, s: S) -> Result<S::Ok, S::Error> {
    match v {
        "" => s.serialize_none(),
        v => s.serialize_str(v),
    }
}

fn rfc3339_opt<S: serde::Serializer>(v: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(t) => s.serialize_str(&t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        None => s.serialize_none(),
    }
}
