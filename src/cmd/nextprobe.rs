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
    /// When it falls due, RFC 3339 (`next_reprobe` in JSON); `None` when
    /// re-probes are off (`[route] reprobe_paused_secs = 0`) and no
    /// `retry_at` holds it back.
    #[serde(rename = "next_reprobe")]
    pub at: Option<String>,
    /// The explicit wait of the failure that paused it, when set.
    pub retry_at: Option<String>,
    #[serde(skip)]
    at_ts: Option<DateTime<Utc>>,
    #[serde(skip)]
    retry_ts: Option<DateTime<Utc>>,
}

impl NextReprobe {
    /// In a few words, at `now`: `next re-probe 10:35 (in 3m)`, `(in 10m,
    /// the provider's Retry-After)`, or, once its time has passed and
    /// nothing has re-probed it yet, who would.
    pub fn words(&self, now: DateTime<Utc>) -> String {
        match self.at_ts {
            Some(at) if at <= now => {
                "re-probe due (by route --serve or check --paused)".to_string()
            }
            Some(at) => {
                let left = (at - now).num_seconds();
                let wait = if self.retry_ts == Some(at) {
                    ", the provider's Retry-After"
                } else {
                    ""
                };
                format!(
                    "next re-probe {} (in {}{wait})",
                    fmt_minute(at.timestamp()),
                    crate::duration::format_unit(left.max(60) / 60 * 60)
                )
            }
            None => "re-probes off ([route] reprobe_paused_secs = 0)".to_string(),
        }
    }
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
            // With re-probes off, `check --paused` still honours the wait.
            let at = at.filter(|t| !(interval.is_zero() && *t == DateTime::UNIX_EPOCH));
            let next = NextReprobe {
                at: at.map(crate::time::format_ts),
                retry_at: entry.retry_at.clone(),
                at_ts: at,
                retry_ts,
            };
            (key, next)
        })
        .collect())
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
        assert_eq!(
            next(None, None).words(now),
            "re-probes off ([route] reprobe_paused_secs = 0)"
        );
        let json = serde_json::to_value(&held).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"next_reprobe": "2026-12-02T10:12:00Z", "retry_at": "2026-12-02T10:12:00Z"})
        );
    }
}
