//! The one interface every sender of alerts goes through: `check`'s run
//! observer ([`super::observer`]) and `route --serve`'s events
//! (`route/alerts.rs`).
//!
//! - [`Notifier`]: the channels configured for this invocation
//!   ([`super::configured`]), and one [`Message`] to all of them, with
//!   one warning line per channel that could not be reached (naming it by
//!   scheme and host only). Blocking for `check` ([`Notifier::send`]);
//!   async for `route --serve` ([`Notifier::send_async`]), from a task
//!   of its own, so that no request ever waits for a webhook.
//! - [`Batch`]: once per change of direction per subject, and the events
//!   of a short window in one message. Route offers each event as a
//!   [`Change`]; the rule is [`Standing::raise`] and
//!   [`Standing::resolve`], the same one `check`'s decision applies to
//!   `notify_state.json`.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use super::channel::{self, Channel, Outcome};
use super::record::Standing;
use super::{Change, Message};
use crate::error::Result;
use crate::settings::Settings;

/// Where alerts go: the configured channels.
#[derive(Debug, Clone)]
pub struct Notifier {
    channels: Vec<Channel>,
}

impl Notifier {
    /// The channels of this invocation: `urls` (`--notify`), then
    /// `LLMPROBE_NOTIFY`, then the variables `[notify] url_env` names.
    /// `None` when there are none: then nothing is ever sent. A URL that
    /// names no channel is a config error (exit 2).
    pub fn configured(s: &Settings, urls: &[String]) -> Result<Option<Notifier>> {
        let channels = channel::configured(s, urls)?;
        Ok((!channels.is_empty()).then(|| Notifier::new(channels)))
    }

    /// These channels (at least one, or nothing is ever sent).
    pub fn new(channels: Vec<Channel>) -> Notifier {
        Notifier { channels }
    }

    /// Each channel by its label (scheme and host, never the path).
    pub fn labels(&self) -> Vec<String> {
        self.channels.iter().map(Channel::label).collect()
    }

    /// Send `msg` to every channel and wait (`check`, after its run). One
    /// warning on stderr per channel that was not reached, ending with
    /// `regardless`. True when at least one channel took it.
    pub fn send(&self, msg: &Message, regardless: &str) -> bool {
        reached(&channel::deliver(&self.channels, msg), regardless)
    }

    /// [`Notifier::send`] on the caller's runtime, with its `client`:
    /// `route --serve` calls it from a task of its own, so that no request
    /// waits for a webhook.
    pub async fn send_async(
        &self,
        client: &reqwest::Client,
        msg: &Message,
        regardless: &str,
    ) -> bool {
        reached(
            &channel::deliver_async(client, &self.channels, msg).await,
            regardless,
        )
    }
}

/// Print one warning per channel not reached; whether any was.
fn reached(out: &[Outcome], regardless: &str) -> bool {
    for w in out.iter().filter_map(|o| o.warning_then(regardless)) {
        eprintln!("{w}");
    }
    out.iter().any(|o| o.result.is_ok())
}

/// Events said once per change of direction, a short window of them in one
/// message. Pure: time comes in.
#[derive(Debug, Clone)]
pub struct Batch {
    /// The alerts that stand, by [`Change::subject`].
    standing: BTreeMap<String, Standing>,
    /// What the next message says.
    changes: Vec<Change>,
    /// When its first change came.
    opened: Option<DateTime<Utc>>,
    window: Duration,
}

impl Batch {
    /// A batch that collects changes for `window` after the first one.
    pub fn new(window: Duration) -> Batch {
        Batch {
            standing: BTreeMap::new(),
            changes: Vec::new(),
            opened: None,
            window,
        }
    }

    /// Offer one event at `at`. An alert goes in unless an alert to the
    /// same state stands for its subject; a recovery goes in only when an
    /// alert stands (and then names when that alert was said, so the
    /// message resolves it). Returns whether it went in.
    pub fn offer(&mut self, mut change: Change, at: DateTime<Utc>) -> bool {
        let subject = change.subject();
        let s = self.standing.entry(subject.clone()).or_default();
        let goes = if change.kind.is_recovery() {
            match s.resolve() {
                Some((_, alerted_at)) => {
                    change.alerted_at = alerted_at;
                    true
                }
                None => false,
            }
        } else {
            s.raise(&change.to, at)
        };
        if s.is_empty() {
            self.standing.remove(&subject);
        }
        if goes {
            self.changes.push(change);
            self.opened.get_or_insert(at);
        }
        goes
    }

    /// Whether an alert stands for `subject`.
    #[cfg(test)]
    pub fn stands(&self, subject: &str) -> bool {
        self.standing.contains_key(subject)
    }

    /// The message, once `window` has passed since its first change (by
    /// the same clock as `offer`'s times); `None` before, or when there is
    /// nothing to say.
    pub fn take(&mut self, now: DateTime<Utc>) -> Option<Message> {
        let opened = self.opened?;
        let window = TimeDelta::from_std(self.window).unwrap_or(TimeDelta::MAX);
        if now < opened + window {
            return None;
        }
        self.opened = None;
        let changes = std::mem::take(&mut self.changes);
        // An alert's incident is its message's time (`Change::incident`):
        // the recovery resolves that.
        for c in changes.iter().filter(|c| !c.kind.is_recovery()) {
            self.said_at(&c.subject(), opened);
        }
        Some(Message {
            at: opened,
            changes,
            test: false,
        })
    }

    /// The alert that stands for `subject` was said at `at` (by this
    /// instance's message, or by another instance's): its recovery
    /// resolves that one.
    pub fn said_at(&mut self, subject: &str, at: DateTime<Utc>) {
        if let Some(s) = self.standing.get_mut(subject)
            && s.alerted.is_some()
        {
            s.alerted_at = Some(at);
        }
    }

    /// Changes waiting for their window to pass.
    pub fn pending(&self) -> usize {
        self.changes.len()
    }

    /// Those changes, as they are.
    #[cfg(test)]
    pub fn peek(&self) -> &[Change] {
        &self.changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::ChangeKind;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    fn change(kind: ChangeKind, key: &str) -> Change {
        let (from, to) = match kind.is_recovery() {
            true => ("benched", "up"),
            false => ("up", "benched"),
        };
        Change {
            kind,
            provider: "p".into(),
            model: None,
            key: Some(key.into()),
            from: from.into(),
            to: to.into(),
            reason: "payment".into(),
            error: None,
            until: None,
            alerted_at: None,
        }
    }

    #[test]
    fn a_burst_is_one_change_and_a_window_of_events_is_one_message() {
        let mut b = Batch::new(Duration::from_secs(3));
        assert!(b.offer(change(ChangeKind::Benched, "#0:aa"), at(0)));
        // The same bench again and again: said once.
        for s in 0..5 {
            assert!(!b.offer(change(ChangeKind::Benched, "#0:aa"), at(s)));
        }
        assert!(b.offer(change(ChangeKind::Benched, "#1:bb"), at(2)));
        assert_eq!(b.take(at(2)), None, "the window is still open");
        let m = b.take(at(3)).unwrap();
        assert_eq!(m.at, at(0));
        assert_eq!(m.changes.len(), 2);
        assert_eq!(b.take(at(100)), None, "nothing more to say");
        assert!(b.stands("p#0:aa"));
    }

    #[test]
    fn a_recovery_resolves_only_what_was_alerted_and_names_when() {
        let mut b = Batch::new(Duration::from_secs(3));
        assert!(!b.offer(change(ChangeKind::BenchEnded, "#0:aa"), at(0)));
        assert_eq!(b.take(at(10)), None);
        assert!(b.offer(change(ChangeKind::Benched, "#0:aa"), at(10)));
        b.take(at(20)).unwrap();
        assert!(b.offer(change(ChangeKind::BenchEnded, "#0:aa"), at(30)));
        assert!(!b.offer(change(ChangeKind::BenchEnded, "#0:aa"), at(31)));
        let m = b.take(at(40)).unwrap();
        assert_eq!(m.changes.len(), 1);
        assert_eq!(m.changes[0].alerted_at, Some(at(10)));
        // A later change of a batch resolves its message's time, which is
        // what its alert's `id` says.
        assert!(b.offer(change(ChangeKind::Benched, "#1:bb"), at(41)));
        assert!(b.offer(change(ChangeKind::Benched, "#2:cc"), at(42)));
        let m = b.take(at(45)).unwrap();
        assert_eq!(
            m.changes[1].incident(m.at).unwrap(),
            "p#2:cc@2027-01-15T08:00:41Z"
        );
        assert!(b.offer(change(ChangeKind::BenchEnded, "#2:cc"), at(50)));
        let m2 = b.take(at(60)).unwrap();
        assert_eq!(m2.changes[0].incident(m2.at), m.changes[1].incident(m.at));
        assert!(!b.stands("p#0:aa"));
        // And down again: a new alert.
        assert!(b.offer(change(ChangeKind::Benched, "#0:aa"), at(50)));
    }
}
