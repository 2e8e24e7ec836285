//! `route --serve`'s alerts (docs/alerts.md, "Route-side alerts"): what
//! route tells the channels `check` tells, through the same interface
//! ([`crate::notify::Notifier`], [`crate::notify::Batch`]).
//!
//! - **A day-long bench** ([`Bench::lasts_the_day`]: 402, 403, a spent
//!   quota) is one alert naming the provider (and key, and model for a
//!   daily quota), the class and until when; when that bench is no longer
//!   in force (its time ran out, or it was lifted) a resolved message
//!   follows. Shorter benches come and go with traffic, and are not said.
//! - **Degraded mode**: entering it (with the counts) is an alert,
//!   leaving it resolves it.
//! - **Once per change of direction per subject**: a burst of requests
//!   that meets the same bench says it once ([`Batch::offer`]).
//! - **One message per window**: the events of [`WINDOW`] (by route's
//!   clock) after the first go in one message, sent by
//!   [`RouteAlerts::tick`] from a task, never on a request's path. A
//!   channel that cannot be reached costs one warning naming its scheme
//!   and host.
//!
//! - **Several instances** sharing Redis (`--shared-state`) say each
//!   change once between them: before sending, each change is claimed
//!   ([`SharedState::claim_alert`]); a change another instance said is
//!   left out (and its time kept, so the recovery resolves that alert).
//!   While Redis is away, each instance says what it saw.
//!
//! What has been said lives in memory (and in Redis when shared): a
//! restarted instance on its own says a bench it meets again once more.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::cooldown::{Bench, Scope, Target};
use super::degraded::Counts;
use super::shared::{Claimed, SharedState};
use crate::notify::{Batch, Change, ChangeKind, Message, Notifier};

/// Events within this long of the first (by route's clock) make one
/// message.
pub const WINDOW: Duration = Duration::from_secs(3);

/// What follows each warning about a channel that was not reached.
const REGARDLESS: &str = "routing goes on";

/// How long another instance keeps from repeating a recovery, and an
/// alert with no end of its own (degraded mode): the claim's life in
/// Redis. A bench's alert lives until the bench ends, and this long more.
const RESOLVED_CLAIM: Duration = Duration::from_secs(3600);
const ALERT_CLAIM: Duration = Duration::from_secs(24 * 3600);

/// Route's alerts: the channels, and what has been said.
pub struct RouteAlerts {
    notifier: Arc<Notifier>,
    inner: Mutex<Inner>,
}

struct Inner {
    batch: Batch,
    /// The benches alerted, by bench id, with the alert that said each.
    benches: BTreeMap<String, Change>,
    /// Messages handed to the channels.
    sent: u64,
    /// Changes left out because another instance said them.
    elsewhere: u64,
}

impl RouteAlerts {
    pub fn new(notifier: Notifier) -> RouteAlerts {
        RouteAlerts {
            notifier: Arc::new(notifier),
            inner: Mutex::new(Inner {
                batch: Batch::new(WINDOW),
                benches: BTreeMap::new(),
                sent: 0,
                elsewhere: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The channels, by label (scheme and host only).
    pub fn labels(&self) -> Vec<String> {
        self.notifier.labels()
    }

    /// Messages handed to the channels so far, changes waiting for their
    /// window, and changes left out because another instance said them.
    pub fn counts(&self) -> (u64, usize, u64) {
        let g = self.lock();
        (g.sent, g.batch.pending(), g.elsewhere)
    }

    /// `bench` is in force on `target` (which an attempt just met):
    /// alerted if it lasts the day and is not alerted already. `error`:
    /// the upstream's words, redacted and shortened.
    pub fn benched(
        &self,
        target: &Target,
        bench: &Bench,
        error: Option<String>,
        now: DateTime<Utc>,
    ) {
        if !bench.lasts_the_day() {
            return;
        }
        let keyed = matches!(bench.scope, Scope::Key | Scope::KeyModel);
        let change = Change {
            kind: ChangeKind::Benched,
            provider: target.provider.clone(),
            model: matches!(bench.scope, Scope::Model | Scope::KeyModel)
                .then(|| target.model.clone()),
            key: match (keyed, target.key_index, &target.key_fingerprint) {
                (true, Some(i), Some(fp)) => Some(format!("#{i}:{fp}")),
                (true, Some(i), None) => Some(format!("#{i}")),
                _ => None,
            },
            from: "up".into(),
            to: "benched".into(),
            reason: bench.reason.clone(),
            error,
            until: Some(bench.until),
            alerted_at: None,
        };
        let mut g = self.lock();
        if g.benches.contains_key(&bench.target) {
            return;
        }
        if g.batch.offer(change.clone(), now) {
            g.benches.insert(bench.target.clone(), change);
        }
    }

    /// Degraded mode changed at `now`: entered (`degraded`) or left.
    pub fn mode_changed(&self, degraded: bool, c: Counts, below: f64, now: DateTime<Utc>) {
        let counts = format!(
            "{} of {} providers have an active model",
            c.active_providers, c.providers
        );
        let (kind, from, to, reason) = match degraded {
            true => (
                ChangeKind::Degraded,
                "ready",
                "degraded",
                format!("{counts}, below {below}"),
            ),
            false => (ChangeKind::Ready, "degraded", "ready", counts),
        };
        self.lock().batch.offer(
            Change {
                kind,
                provider: String::new(),
                model: None,
                key: None,
                from: from.into(),
                to: to.into(),
                reason,
                error: None,
                until: None,
                alerted_at: None,
            },
            now,
        );
    }

    /// Every [`crate::route::serve::MODE_POLL`]: each alerted bench no
    /// longer `in_force` (by bench id) is resolved, and the batch, once
    /// its window has passed, goes to the channels from a task on the
    /// current runtime, with `client` (claimed in `shared` first, when
    /// instances share Redis).
    pub fn tick(
        self: &Arc<Self>,
        client: &reqwest::Client,
        shared: Option<&Arc<SharedState>>,
        in_force: impl Fn(&str) -> bool,
        now: DateTime<Utc>,
    ) {
        let msg = {
            let mut g = self.lock();
            let ended: Vec<String> = g
                .benches
                .keys()
                .filter(|id| !in_force(id))
                .cloned()
                .collect();
            for id in ended {
                let Some(alert) = g.benches.remove(&id) else {
                    continue;
                };
                let over = alert.until.is_some_and(|u| u <= now);
                g.batch.offer(
                    Change {
                        kind: ChangeKind::BenchEnded,
                        from: "benched".into(),
                        to: "up".into(),
                        reason: if over {
                            "its bench ended".into()
                        } else {
                            "its bench was lifted".into()
                        },
                        error: None,
                        until: None,
                        ..alert
                    },
                    now,
                );
            }
            g.batch.take(now)
        };
        if let Some(m) = msg {
            let (me, client, shared) = (self.clone(), client.clone(), shared.cloned());
            tokio::spawn(async move { me.say(&client, shared.as_deref(), m).await });
        }
    }

    /// At shutdown: send what waits for its window now, waiting at most
    /// `limit` for the channels.
    pub async fn flush(
        &self,
        client: &reqwest::Client,
        shared: Option<&Arc<SharedState>>,
        limit: Duration,
    ) {
        let Some(m) = self.lock().batch.take(DateTime::<Utc>::MAX_UTC) else {
            return;
        };
        let say = self.say(client, shared.map(|s| &**s), m);
        if tokio::time::timeout(limit, say).await.is_err() {
            eprintln!("warning: notify: shutting down before the last alert was delivered");
        }
    }

    /// Send `msg`, less what another instance said already.
    async fn say(&self, client: &reqwest::Client, shared: Option<&SharedState>, mut msg: Message) {
        if let Some(s) = shared {
            let mut kept = Vec::new();
            for c in std::mem::take(&mut msg.changes) {
                let (direction, ttl) = match c.kind.is_recovery() {
                    true => ("up", RESOLVED_CLAIM),
                    false => (
                        "down",
                        c.until
                            .and_then(|u| (u - msg.at).to_std().ok())
                            .map_or(ALERT_CLAIM, |left| left + RESOLVED_CLAIM),
                    ),
                };
                let subject = c.subject();
                match s.claim_alert(&subject, direction, msg.at, ttl).await {
                    Ok(Claimed::Theirs(at)) => {
                        let mut g = self.lock();
                        g.elsewhere += 1;
                        if let (false, Some(at)) = (c.kind.is_recovery(), at) {
                            g.batch.said_at(&subject, at);
                        }
                    }
                    // Ours, or Redis is away: said here.
                    Ok(Claimed::Mine) | Err(_) => kept.push(c),
                }
            }
            msg.changes = kept;
        }
        if msg.changes.is_empty() {
            return;
        }
        self.lock().sent += 1;
        tracing::info!(changes = msg.changes.len(), "notify: route alert sent");
        self.notifier.send_async(client, &msg, REGARDLESS).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::Channel;
    use crate::route::cooldown::Cooldowns;
    use crate::upstream::classify::{ErrorClass, UpstreamError};

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    fn alerts() -> RouteAlerts {
        let ch = Channel::parse("json+http://127.0.0.1:9/hook").unwrap();
        RouteAlerts::new(Notifier::new(vec![ch]))
    }

    /// The bench the cooldown rules put on `t` for `class`.
    fn bench(t: &Target, class: ErrorClass, daily: bool) -> Bench {
        let err = UpstreamError {
            status: None,
            class,
            retry_after: None,
            daily,
            message: String::new(),
        };
        Cooldowns::new()
            .record_failure(t, &err, at(0))
            .bench
            .expect("a bench")
    }

    #[test]
    fn day_long_benches_are_said_with_key_model_and_until_and_short_ones_never() {
        let a = alerts();
        let t = Target::new("p", "m").with_key(1, "3f9a1c2e");
        // A 429 comes and goes with traffic: not said.
        a.benched(&t, &bench(&t, ErrorClass::RateLimit, false), None, at(0));
        assert_eq!(a.counts().1, 0);
        // A daily quota: the key's use of the model, until midnight.
        let daily = bench(&t, ErrorClass::QuotaExhausted, true);
        a.benched(&t, &daily, Some("quota".into()), at(0));
        // A 402: the key, every model.
        let paid = bench(&t, ErrorClass::Payment, false);
        a.benched(&t, &paid, None, at(1));
        a.benched(&t, &paid, None, at(2));
        let g = a.lock();
        let said: Vec<(String, &str, Option<DateTime<Utc>>)> = g
            .batch
            .peek()
            .iter()
            .map(|c| (c.subject(), c.reason.as_str(), c.until))
            .collect();
        assert_eq!(
            said,
            [
                (
                    "p#1:3f9a1c2e::m".to_string(),
                    "quota_exhausted",
                    Some(crate::upstream::hints::next_utc_midnight(at(0)))
                ),
                ("p#1:3f9a1c2e".to_string(), "payment", Some(paid.until)),
            ]
        );
    }

    #[test]
    fn a_bench_no_longer_in_force_is_resolved_as_ended_or_lifted() {
        let a = alerts();
        let t = Target::new("p", "m");
        let b = bench(&t, ErrorClass::Forbidden, false);
        // A keyless provider's key bench is the provider's.
        a.benched(&t, &b, None, at(0));
        let client = crate::upstream::http::client().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let a = Arc::new(a);
        rt.block_on(async {
            // In force: nothing ends; the window has not passed.
            a.tick(&client, None, |_| true, at(1));
            assert_eq!(a.counts().1, 1);
            // Lifted before its time, in the same window.
            a.tick(&client, None, |_| false, at(2));
        });
        let g = a.lock();
        let c = &g.batch.peek()[1];
        assert_eq!(c.kind, ChangeKind::BenchEnded);
        assert_eq!(c.subject(), "p");
        assert_eq!(c.reason, "its bench was lifted");
        assert_eq!(c.alerted_at, Some(at(0)));
    }
}
