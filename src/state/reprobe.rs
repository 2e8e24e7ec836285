//! When a paused model is next re-probed: the one rule that `route
//! --serve`'s re-prober, `check --paused`, `brief` and `state` share.
//!
//! A model paused at `since` is re-probed at `since + i`, then each wait
//! doubles after a failed re-probe: `i`, `2i`, `4i`… capped at [`CAP`]
//! (with the default `i` of 5 minutes: at 5, 15, 35, 75 minutes after the
//! pause, then hourly). These slots are fixed by the pause time, so every
//! process that knows when the model was last probed agrees on the next
//! one without sharing anything: the next slot is the first one after the
//! last probe (whoever sent it: the hourly `check` counts as well). An
//! explicit wait the failure carried (`retry_at`) comes first: no slot
//! before it counts.
//!
//! Nothing here reads the clock or a file.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use super::{ModelState, StateEntry};

/// The longest wait between two re-probes of a paused model.
pub const CAP: Duration = Duration::from_secs(3600);

/// The time an entry's RFC 3339 field names, if it parses.
pub fn parse(ts: Option<&str>) -> Option<DateTime<Utc>> {
    let secs = crate::time::parse_ts(ts?)?;
    DateTime::from_timestamp(secs, 0)
}

/// The wait before re-probe number `n` (0 = the first after the pause):
/// `interval × 2ⁿ`, capped at [`CAP`] (or at `interval` itself when that is
/// longer).
pub fn wait(interval: Duration, n: u32) -> Duration {
    let cap = CAP.max(interval);
    interval
        .checked_mul(1u32.checked_shl(n).unwrap_or(u32::MAX))
        .map_or(cap, |d| d.min(cap))
}

/// When `entry`'s model is next due for a re-probe, given when it was last
/// probed (`last_probe`; `None` when unknown: the pause itself counts), and
/// the first `interval` (`[route] reprobe_paused_secs`). `None` when the
/// model is not paused or the interval is zero (re-probes off).
///
/// An entry without a parseable `since` (paused by hand) counts its last
/// probe as its pause (slots from there), and is due at once when no probe
/// of it is known; `retry_at` still comes first.
///
/// The answer may lie in the past: the model is overdue, and a re-prober
/// probes it at once.
pub fn next_reprobe(
    entry: &StateEntry,
    last_probe: Option<DateTime<Utc>>,
    interval: Duration,
) -> Option<DateTime<Utc>> {
    if entry.state != ModelState::Paused || interval.is_zero() {
        return None;
    }
    let retry_at = parse(entry.retry_at.as_deref());
    let Some(since) = parse(entry.since.as_deref()).or(last_probe) else {
        return Some(retry_at.unwrap_or(DateTime::UNIX_EPOCH));
    };
    let last = last_probe.map_or(since, |l| l.max(since));
    let mut slot = since;
    for n in 0.. {
        slot += TimeDelta::from_std(wait(interval, n)).ok()?;
        if slot > last {
            break;
        }
        // Past the cap every wait is the same: jump to the slot after
        // `last` at once rather than walking a long-paused model's slots.
        if wait(interval, n) >= CAP.max(interval) {
            let step = TimeDelta::from_std(CAP.max(interval)).ok()?;
            let behind = (last - slot).num_seconds() / step.num_seconds().max(1);
            slot += step * (behind as i32 + 1);
            break;
        }
    }
    Some(retry_at.map_or(slot, |r| r.max(slot)))
}

/// True when `entry`'s model may be re-probed at `now` (see
/// [`next_reprobe`]).
pub fn due(
    entry: &StateEntry,
    last_probe: Option<DateTime<Utc>>,
    interval: Duration,
    now: DateTime<Utc>,
) -> bool {
    next_reprobe(entry, last_probe, interval).is_some_and(|at| at <= now)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIVE_MIN: Duration = Duration::from_secs(300);

    fn t(s: &str) -> DateTime<Utc> {
        parse(Some(s)).unwrap()
    }

    fn paused(since: &str, retry_at: Option<&str>) -> StateEntry {
        StateEntry {
            state: ModelState::Paused,
            reason: Some("rate_limit".into()),
            since: Some(since.into()),
            retry_at: retry_at.map(str::to_string),
            ..StateEntry::active()
        }
    }

    #[test]
    fn waits_double_from_the_interval_up_to_an_hour() {
        let mins: Vec<u64> = (0..7).map(|n| wait(FIVE_MIN, n).as_secs() / 60).collect();
        assert_eq!(mins, [5, 10, 20, 40, 60, 60, 60]);
        assert_eq!(wait(Duration::from_secs(7200), 3).as_secs(), 7200);
        assert_eq!(wait(FIVE_MIN, 200), CAP);
    }

    #[test]
    fn the_slots_are_fixed_by_the_pause_and_follow_the_last_probe() {
        let e = paused("2026-12-02T10:00:00Z", None);
        let next = |last: Option<&str>| next_reprobe(&e, last.map(t), FIVE_MIN).unwrap();
        assert_eq!(next(None), t("2026-12-02T10:05:00Z"));
        assert_eq!(
            next(Some("2026-12-02T10:00:00Z")),
            t("2026-12-02T10:05:00Z")
        );
        // A failed re-probe at 10:05: the next wait is 10 min.
        assert_eq!(
            next(Some("2026-12-02T10:05:00Z")),
            t("2026-12-02T10:15:00Z")
        );
        assert_eq!(
            next(Some("2026-12-02T10:15:01Z")),
            t("2026-12-02T10:35:00Z")
        );
        assert_eq!(
            next(Some("2026-12-02T10:35:00Z")),
            t("2026-12-02T11:15:00Z")
        );
        // Past the cap: hourly from the last capped slot.
        assert_eq!(
            next(Some("2026-12-02T11:15:00Z")),
            t("2026-12-02T12:15:00Z")
        );
        assert_eq!(
            next(Some("2026-12-03T09:20:00Z")),
            t("2026-12-03T10:15:00Z")
        );
        // A probe older than the pause counts as the pause.
        assert_eq!(
            next(Some("2026-12-02T09:00:00Z")),
            t("2026-12-02T10:05:00Z")
        );
    }

    #[test]
    fn an_explicit_wait_comes_first() {
        let e = paused("2026-12-02T10:00:00Z", Some("2026-12-02T10:30:00Z"));
        assert_eq!(
            next_reprobe(&e, None, FIVE_MIN),
            Some(t("2026-12-02T10:30:00Z"))
        );
        assert!(!due(&e, None, FIVE_MIN, t("2026-12-02T10:29:59Z")));
        assert!(due(&e, None, FIVE_MIN, t("2026-12-02T10:30:00Z")));
        // A wait that already passed does not hold the next slot back.
        let e = paused("2026-12-02T10:00:00Z", Some("2026-12-02T10:01:00Z"));
        assert_eq!(
            next_reprobe(&e, None, FIVE_MIN),
            Some(t("2026-12-02T10:05:00Z"))
        );
    }

    #[test]
    fn a_pause_without_a_time_counts_from_the_last_probe_or_is_due_at_once() {
        let mut e = paused("2026-12-02T10:00:00Z", None);
        e.since = None;
        let next =
            |e: &StateEntry, last: Option<&str>| next_reprobe(e, last.map(t), FIVE_MIN).unwrap();
        // Nothing known of it: due at once.
        assert_eq!(next(&e, None), DateTime::UNIX_EPOCH);
        assert!(due(&e, None, FIVE_MIN, t("2026-12-02T10:00:00Z")));
        // Its last probe stands for the pause.
        assert_eq!(
            next(&e, Some("2026-12-02T10:02:00Z")),
            t("2026-12-02T10:07:00Z")
        );
        assert!(!due(
            &e,
            Some(t("2026-12-02T10:02:00Z")),
            FIVE_MIN,
            t("2026-12-02T10:06:59Z")
        ));
        // A `since` that does not parse is no time either.
        e.since = Some("yesterday".into());
        assert_eq!(next(&e, None), DateTime::UNIX_EPOCH);
        // The explicit wait still comes first.
        e.retry_at = Some("2026-12-02T10:30:00Z".into());
        assert_eq!(next(&e, None), t("2026-12-02T10:30:00Z"));
        assert_eq!(
            next(&e, Some("2026-12-02T10:02:00Z")),
            t("2026-12-02T10:30:00Z")
        );
        assert_eq!(next_reprobe(&e, None, Duration::ZERO), None);
    }

    #[test]
    fn only_paused_models_with_an_interval_are_due() {
        let e = paused("2026-12-02T10:00:00Z", None);
        assert_eq!(next_reprobe(&e, None, Duration::ZERO), None);
        let mut active = e.clone();
        active.state = ModelState::Active;
        assert_eq!(next_reprobe(&active, None, FIVE_MIN), None);
        let mut disabled = e.clone();
        disabled.state = ModelState::Disabled;
        assert_eq!(next_reprobe(&disabled, None, FIVE_MIN), None);
    }
}
