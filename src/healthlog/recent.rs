//! Reading the recent end of the health log: backwards from the tail when
//! the file allows, else forward through all of it.
//!
//! `brief`, `state`, `route`'s ordering and `rollup`'s newest timestamp only
//! want the latest entries, and must cost the same on a year of history as
//! on a day. The tail reader ([`super::tail`]) gives entries newest first
//! but only for llmprobe's one-entry-per-line form; on anything else (the
//! old tool's pretty-printed file, a torn tail, damage) it gives up before
//! the caller has used anything, and the forward reader ([`super::read`]),
//! which is authoritative about torn tails and damage, reads it all instead.
//! This module is that policy, written once.

use std::path::Path;

use super::read::{self, Record, Sink};
use super::tail::{self, Tail};
use crate::error::Result;

/// How far before the window start the backward read goes on: entries are
/// appended in the order probes finish, and clocks may run slightly out of
/// order, so an entry a little older than the start may be followed by one
/// inside the window.
pub const CLOCK_SLACK_SECS: i64 = 3600;

/// Which way a sink is being fed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Newest first, from the tail; the reader may stop early.
    Backward,
    /// Oldest first, every entry.
    Forward,
}

/// A [`Sink`] that can also be fed newest first.
pub trait Recent: Sink {
    /// One entry, newest first, at or after the window's start less
    /// [`CLOCK_SLACK_SECS`]; `false` stops the read. By default it records
    /// and goes on.
    fn newest_first(&mut self, r: &Record<'_>) -> bool {
        self.record(r);
        true
    }

    /// The first entry too old to read on for, just before the read stops.
    fn too_old(&mut self, _r: &Record<'_>) {}
}

/// Feed the log's entries from `since` (Unix seconds; `None` for no bound)
/// to a sink made by `make`: newest first from the tail, stopping at the
/// first entry older than `since − CLOCK_SLACK_SECS` or when the sink says
/// so; or, when the file is not in line form, forward through every entry
/// into a fresh sink. Returns the sink and how many entries were skipped as
/// unusable.
pub fn read_recent<S: Recent>(
    log: &Path,
    since: Option<i64>,
    make: impl Fn(Direction) -> S,
) -> Result<(S, u64)> {
    let stop_before = since.map(|s| s.saturating_sub(CLOCK_SLACK_SECS));
    let mut sink = make(Direction::Backward);
    let tail = tail::read_backward(log, |r| {
        if stop_before.is_some_and(|b| r.ts < b) {
            sink.too_old(r);
            return false;
        }
        sink.newest_first(r)
    })?;
    match tail {
        Tail::Done { skipped } => Ok((sink, skipped)),
        Tail::NotLineForm => {
            let (sink, summary) = read::read_all(log, || make(Direction::Forward))?;
            Ok((sink, summary.skipped))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Timestamps seen, in the order seen, and the one that stopped the read.
    #[derive(Default)]
    struct Seen(Vec<i64>, Option<i64>);

    impl Sink for Seen {
        fn record(&mut self, r: &Record<'_>) {
            self.0.push(r.ts);
        }
        fn merge(&mut self, later: Self) {
            self.0.extend(later.0);
        }
    }

    impl Recent for Seen {
        fn too_old(&mut self, r: &Record<'_>) {
            self.1 = Some(r.ts);
        }
    }

    fn entry(ts: &str) -> String {
        format!(
            r#"{{"ts":"{ts}","provider":"p","model":"m","ok":1,"latency_ms":1,"failure_type":""}}"#
        )
    }

    fn at(ts: &str) -> i64 {
        crate::time::parse_ts(ts).unwrap()
    }

    #[test]
    fn backward_with_clock_slack_else_forward() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("health_log.json");
        let ts = [
            "2026-11-30T08:00:00Z",
            "2026-11-30T09:30:00Z",
            "2026-11-30T11:00:00Z",
            "2026-11-30T09:45:00Z", // a slow clock: older than the start
            "2026-11-30T12:00:00Z",
        ];
        let body: Vec<String> = ts.iter().map(|t| entry(t)).collect();
        std::fs::write(&log, format!("[\n{}\n]\n", body.join(",\n"))).unwrap();
        let since = Some(at("2026-11-30T10:00:00Z"));
        let (seen, skipped) = read_recent(&log, since, |d| {
            assert_eq!(d, Direction::Backward);
            Seen::default()
        })
        .unwrap();
        // Within the slack, 09:30 and 09:45 are read on; 08:00 stops it.
        let want: Vec<i64> = ts[1..].iter().rev().map(|t| at(t)).collect();
        assert_eq!(seen.0, want);
        assert_eq!(seen.1, Some(at(ts[0])));
        assert_eq!(skipped, 0);
        // Not one entry per line: everything, forward.
        std::fs::write(&log, format!("[{}]\n", body.join(", "))).unwrap();
        let dirs = std::cell::RefCell::new(Vec::new());
        let (seen, _) = read_recent(&log, since, |d| {
            dirs.borrow_mut().push(d);
            Seen::default()
        })
        .unwrap();
        assert_eq!(
            dirs.into_inner(),
            vec![Direction::Backward, Direction::Forward]
        );
        assert_eq!(seen.0, ts.iter().map(|t| at(t)).collect::<Vec<_>>());
        assert_eq!(seen.1, None);
    }
}
