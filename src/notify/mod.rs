//! Alerts: a message to a webhook when a model or a provider changes state,
//! so that people hear of a dead model before a request fails on it.
//!
//! - [`Change`] and [`Message`] are what is said, whoever says it (`check`
//!   after a run, `notify test`, and `route --serve`'s own events).
//! - `channel` turns a webhook URL into a channel (ntfy, Slack, Discord, a
//!   generic JSON POST) and a [`Message`] into that channel's request, and
//!   delivers it with bounded retries.
//! - `decide` is when to say it: it compares a run with what has been
//!   alerted before (`stats/notify_state.json`), applies `--notify-after`,
//!   and yields the changes worth a message.
//!
//! A webhook URL is a secret (its path is the credential): it is never
//! written to a file llmprobe writes, and messages about a channel name
//! only its scheme and host.

// Groundwork: the channel and decide parts use these; drop this once they do.
#![allow(dead_code)]

pub mod decide;
pub mod observer;
pub mod record;

/// TEMPORARY stand-in for the channels branch's `channel` module (same
/// signatures), until it is merged.
pub mod channel {
    use super::Message;
    use crate::error::Result;
    use crate::settings::Settings;

    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Channel;
    pub struct Outcome {
        pub label: String,
        pub result: std::result::Result<u16, String>,
    }
    pub fn configured(_: &Settings, _: &[String]) -> Result<Vec<Channel>> {
        Ok(Vec::new())
    }
    pub fn send(_: &[Channel], _: &Message) -> Vec<Outcome> {
        Vec::new()
    }
}

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
}

impl ChangeKind {
    /// A recovery resolves an earlier alert.
    pub fn is_recovery(self) -> bool {
        matches!(
            self,
            ChangeKind::ModelRecovered | ChangeKind::ProviderRecovered
        )
    }
}

/// One change worth telling, in the generic JSON body as it is written
/// (docs/alerts.md documents the body; keep it stable).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub kind: ChangeKind,
    pub provider: String,
    /// `None` for a provider-wide change.
    pub model: Option<String>,
    /// The state before, as the state file spells it (`active`, `paused`,
    /// `disabled`), or `up`/`down` for a provider.
    pub from: String,
    pub to: String,
    /// Why, in a few words (the state machine's reason).
    pub reason: String,
    /// The probe's error, redacted and shortened; `None` when there was
    /// none (a recovery).
    pub error: Option<String>,
    /// A recovery: when the alert it resolves was sent (the link between
    /// the two, for channels that can show one). Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alerted_at: Option<DateTime<Utc>>,
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
