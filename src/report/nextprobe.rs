//! What `state` and `brief` show of a paused model's next re-probe: when
//! it comes, by the rule `check --paused` and route's re-prober share
//! ([`crate::check::paused::next_times`], [`crate::state::reprobe`]),
//! and the `retry_at` the failure that paused it carried.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::check::paused;
use crate::error::Result;
use crate::format::fmt_minute;
use crate::settings::Settings;
use crate::state::{States, reprobe};

/// A paused model's next re-probe.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NextReprobe {
    /// When it falls due, RFC 3339 (`next_reprobe` in JSON). With `[route]
    /// reprobe_paused_secs = 0`, `route --serve` does not re-probe and
    /// `check --paused` probes it on every run: this is its `retry_at`,
    /// or `None` when it has none.
    #[serde(rename = "next_reprobe")]
    pub at: Option<String>,
    /// The explicit wait of the failure that paused it, when set.
    pub retry_at: Option<String>,
    #[serde(skip)]
    at_ts: Option<DateTime<Utc>>,
    #[serde(skip)]
    retry_ts: Option<DateTime<Utc>>,
    /// `[route] reprobe_paused_secs = 0`: only `check --paused` re-probes.
    #[serde(skip)]
    route_off: bool,
}

/// What the words add when `route --serve` does not re-probe.
const ROUTE_OFF: &str = "route --serve does not re-probe ([route] reprobe_paused_secs = 0)";

impl NextReprobe {
    /// In a few words, at `now`: `next re-probe 10:35 (in 3m)`, `(in 10m,
    /// the provider's Retry-After)`, or, once its time has passed and
    /// nothing has re-probed it yet, who would. With `[route]
    /// reprobe_paused_secs = 0`: that `check --paused` probes it on each
    /// run (or once its `retry_at` passes), and `route --serve` does not.
    pub fn words(&self, now: DateTime<Utc>) -> String {
        if self.route_off {
            return match self.retry_ts.filter(|r| *r > now) {
                Some(r) => format!(
                    "check --paused re-probes it once the provider's Retry-After passes, {} (in {}); {ROUTE_OFF}",
                    fmt_minute(r.timestamp()),
                    minutes_left(r, now)
                ),
                None => format!("check --paused re-probes it on each run; {ROUTE_OFF}"),
            };
        }
        match self.at_ts {
            Some(at) if at > now => {
                let wait = if self.retry_ts == Some(at) {
                    ", the provider's Retry-After"
                } else {
                    ""
                };
                format!(
                    "next re-probe {} (in {}{wait})",
                    fmt_minute(at.timestamp()),
                    minutes_left(at, now)
                )
            }
            _ => "re-probe due (by route --serve or check --paused)".to_string(),
        }
    }
}

/// `at - now` in whole minutes, one at least: `3m`.
fn minutes_left(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let left = (at - now).num_seconds();
    crate::duration::format_unit(left.max(60) / 60 * 60)
}

/// The next re-probe of every paused model of `states`, by key, with the
/// interval of `[route] reprobe_paused_secs` and the last probe of each
/// from the log's tail.
pub fn of_paused(s: &Settings, states: &States) -> Result<HashMap<String, NextReprobe>> {
    let interval = s.catalog.route.reprobe_paused;
    Ok(paused::next_times(states, &s.log_path(), interval)?
        .into_iter()
        .map(|(key, entry, at)| {
            let retry_ts = reprobe::parse(entry.retry_at.as_deref());
            // With re-probes off, `check --paused` honours the wait alone.
            let at = if interval.is_zero() { retry_ts } else { at };
            let next = NextReprobe {
                at: at.map(crate::time::format_ts),
                retry_at: entry.retry_at.clone(),
                at_ts: at,
                retry_ts,
                route_off: interval.is_zero(),
            };
            (key, next)
        })
        .collect())
}

/// Give each paused row of `brief` or `state` its next re-probe
/// ([`of_paused`]). `slot` gives a row's model key and where its next
/// re-probe goes, for a paused row only; the log is read only when there
/// is one.
pub fn add_to<R>(
    s: &Settings,
    states: &States,
    rows: &mut [R],
    slot: impl Fn(&mut R) -> Option<(&str, &mut Option<NextReprobe>)>,
) -> Result<()> {
    if !rows.iter_mut().any(|r| slot(r).is_some()) {
        return Ok(());
    }
    let mut next = of_paused(s, states)?;
    for r in rows {
        if let Some((model, at)) = slot(r) {
            *at = next.remove(model);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        reprobe::parse(Some(s)).unwrap()
    }

    fn next(at: Option<&str>, retry_at: Option<&str>) -> NextReprobe {
        NextReprobe {
            at: at.map(str::to_string),
            retry_at: retry_at.map(str::to_string),
            at_ts: at.map(t),
            retry_ts: retry_at.map(t),
            route_off: false,
        }
    }

    #[test]
    fn the_words_say_when_why_and_who() {
        let now = t("2026-12-02T10:02:00Z");
        let slot = next(Some("2026-12-02T10:05:00Z"), None);
        let w = slot.words(now);
        assert!(
            w.starts_with("next re-probe ") && w.ends_with(" (in 3m)"),
            "{w}"
        );
        let held = next(Some("2026-12-02T10:12:00Z"), Some("2026-12-02T10:12:00Z"));
        assert!(
            held.words(now)
                .ends_with(" (in 10m, the provider's Retry-After)"),
            "{}",
            held.words(now)
        );
        assert_eq!(
            slot.words(t("2026-12-02T10:05:00Z")),
            "re-probe due (by route --serve or check --paused)"
        );
        // `[route] reprobe_paused_secs = 0`: check --paused alone.
        let off = |retry_at| NextReprobe {
            route_off: true,
            ..next(retry_at, retry_at)
        };
        assert_eq!(
            off(None).words(now),
            "check --paused re-probes it on each run; \
             route --serve does not re-probe ([route] reprobe_paused_secs = 0)"
        );
        let w = off(Some("2026-12-02T10:12:00Z")).words(now);
        assert!(
            w.starts_with("check --paused re-probes it once the provider's Retry-After passes, ")
                && w.ends_with(
                    " (in 10m); route --serve does not re-probe ([route] reprobe_paused_secs = 0)"
                ),
            "{w}"
        );
        assert_eq!(
            off(Some("2026-12-02T10:01:00Z")).words(now),
            off(None).words(now)
        );
        let json = serde_json::to_value(&held).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"next_reprobe": "2026-12-02T10:12:00Z", "retry_at": "2026-12-02T10:12:00Z"})
        );
    }
}
