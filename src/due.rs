//! When a scheduled `check` should run: `--if-due` (has the last completed
//! run become old enough?) and `--jitter` (a random wait first, so that many
//! machines do not probe in lock-step).
//!
//! Both read the time from [`Clock`], so tests move time with the clock file
//! instead of waiting. The jitter wait sleeps in short steps and looks at
//! the clock again after each one; it also ends when the delay has passed
//! on the monotonic clock, so a wall clock set back cannot stretch it.

use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};

use crate::clock::Clock;
use crate::duration;
use crate::error::{Error, Result};
use crate::lastrun::{self, LastRun};

/// The longest `--jitter`: a day. More is surely a typo for another unit.
pub const MAX_JITTER: Duration = Duration::from_secs(24 * 3600);
/// The longest `--if-due` interval: a year.
pub const MAX_INTERVAL: Duration = Duration::from_secs(366 * 24 * 3600);

/// How long one step of the jitter wait sleeps at most: the countdown
/// moves every step, and a test that moves the clock is seen this soon.
const STEP: Duration = Duration::from_millis(200);

/// `--jitter` and `--if-due` checked against their bounds (exit 2).
pub fn check_bounds(jitter: Option<Duration>, if_due: Option<Duration>) -> Result<()> {
    let too_long = |flag: &str, max: Duration| {
        Error::config(format!(
            "{flag} is longer than {}, the most it can be",
            duration::format(max.as_secs())
        ))
    };
    if jitter.is_some_and(|j| j > MAX_JITTER) {
        return Err(too_long("--jitter", MAX_JITTER));
    }
    if if_due.is_some_and(|i| i > MAX_INTERVAL) {
        return Err(too_long("--if-due", MAX_INTERVAL));
    }
    Ok(())
}

/// Whether a run is due, and why.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Due(String),
    /// The last run finished `age` ago, less than the interval.
    NotDue {
        finished_at: DateTime<Utc>,
        age: Duration,
        interval: Duration,
    },
}

impl Decision {
    pub fn is_due(&self) -> bool {
        matches!(self, Decision::Due(_))
    }
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Decision::Due(why) => write!(f, "due: {why}"),
            Decision::NotDue {
                finished_at,
                age,
                interval,
            } => write!(
                f,
                "not due: the last check finished {} ago ({}); --if-due {} runs again in {}",
                duration::format(age.as_secs()),
                crate::time::format_ts(*finished_at),
                duration::format(interval.as_secs()),
                duration::format(interval.saturating_sub(*age).as_secs_f64().ceil() as u64),
            ),
        }
    }
}

/// Decide from the last completed run.
///
/// - No completed run yet: due.
/// - An offline run (exit 6) recorded no remote result, so it does not
///   count: a laptop that ran `check` at wake-up before its network came
///   back tries again at the next trigger, not an interval later.
/// - Nor does a run a signal stopped (130, 143): it did not probe
///   everything.
/// - A run that finished in the future means the clock was set back: due,
///   rather than skipping until the clock catches up.
pub fn decide(last: Option<&LastRun>, interval: Duration, now: DateTime<Utc>) -> Decision {
    let Some(last) = last else {
        return Decision::Due("no completed run yet".into());
    };
    if last.offline {
        return Decision::Due("the last run was offline: no remote result was recorded".into());
    }
    if matches!(
        last.exit_code,
        crate::exit::INTERRUPTED | crate::exit::TERMINATED
    ) {
        return Decision::Due(format!(
            "the last run was stopped by a signal (exit {})",
            last.exit_code
        ));
    }
    let elapsed = now - last.finished_at;
    if elapsed < TimeDelta::zero() {
        return Decision::Due(format!(
            "the last run finished at {}, after now: the clock was set back",
            crate::time::format_ts(last.finished_at)
        ));
    }
    let age = elapsed.to_std().unwrap_or(Duration::MAX);
    if age < interval {
        Decision::NotDue {
            finished_at: last.finished_at,
            age,
            interval,
        }
    } else {
        Decision::Due(format!(
            "the last run finished {} ago",
            duration::format(age.as_secs())
        ))
    }
}

/// Read `last_run.json` and decide. A file that cannot be parsed stops the
/// run (exit 4) and is left as it is: nobody should be told "all is well"
/// by a job that cannot tell when it last ran.
pub fn if_due(stats_dir: &Path, interval: Duration, now: DateTime<Utc>) -> Result<Decision> {
    let last = lastrun::read(stats_dir).map_err(|e| match e {
        Error::Data(mut d) => {
            d.message.push_str(
                "; check --if-due reads it: remove it (the next completed run writes a new one)",
            );
            Error::Data(d)
        }
        other => other,
    })?;
    let decision = decide(last.as_ref(), interval, now);
    tracing::info!(%decision, interval = %duration::format(interval.as_secs()), "--if-due");
    Ok(decision)
}

/// A uniformly random delay in `[0, max)`, to the millisecond.
pub fn jitter_delay(max: Duration) -> Duration {
    let ms = max.as_millis().min(u64::MAX as u128) as u64;
    if ms == 0 {
        return Duration::ZERO;
    }
    Duration::from_millis(rand::random_range(0..ms))
}

/// Wait `delay` (drawn from `--jitter max`), showing it: a countdown on a
/// terminal, else one line on stderr, such as
/// `waiting 3m12s (--jitter 5m) before probing`.
pub fn wait(delay: Duration, max: Duration, clock: &Clock) {
    if delay.is_zero() {
        return;
    }
    tracing::info!(delay_ms = delay.as_millis() as u64, "--jitter: waiting");
    let line = |left: Duration| {
        format!(
            "waiting {} (--jitter {}) before probing",
            duration::format(left.as_secs_f64().ceil() as u64),
            duration::format(max.as_secs())
        )
    };
    // The countdown only on a terminal, and not under -v, whose lines
    // would tear it.
    let bar =
        (std::io::stderr().is_terminal() && !tracing::enabled!(tracing::Level::INFO)).then(|| {
            let b = indicatif::ProgressBar::new_spinner();
            b.enable_steady_tick(Duration::from_millis(120));
            b
        });
    // The end is fixed before the line is printed: a test that reads the
    // line and then moves the clock past the end sees the wait stop.
    let until = clock.now() + TimeDelta::from_std(delay.min(MAX_JITTER)).unwrap_or_default();
    if bar.is_none() {
        eprintln!("{}", line(delay));
    }
    wait_until(until, delay, clock, |left| {
        if let Some(b) = &bar {
            b.set_message(line(left));
        }
    });
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}

/// Sleep in short steps until `clock` reaches `until`, or `at_most` has
/// passed on the monotonic clock; `tick` gets the time left after each step.
fn wait_until(until: DateTime<Utc>, at_most: Duration, clock: &Clock, tick: impl Fn(Duration)) {
    let started = Instant::now();
    loop {
        let by_clock = (until - clock.now()).to_std().unwrap_or(Duration::ZERO);
        let left = by_clock.min(at_most.saturating_sub(started.elapsed()));
        if left.is_zero() {
            break;
        }
        tick(left);
        std::thread::sleep(left.min(STEP));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(finished: &str, offline: bool) -> LastRun {
        let t: DateTime<Utc> = finished.parse().unwrap();
        LastRun {
            version: LastRun::VERSION,
            started_at: t - TimeDelta::seconds(60),
            finished_at: t,
            exit_code: if offline { 6 } else { 0 },
            offline,
            probes: 3,
            ok: 3,
            skipped: Vec::new(),
            newest: None,
        }
    }

    fn at(ts: &str) -> DateTime<Utc> {
        ts.parse().unwrap()
    }

    #[test]
    fn due_after_the_interval_and_never_held_back_by_an_offline_stopped_or_future_run() {
        let hour = Duration::from_secs(3600);
        let last = run("2026-12-01T10:00:00Z", false);
        let d = decide(Some(&last), hour, at("2026-12-01T10:12:00Z"));
        assert!(!d.is_due());
        assert_eq!(
            d.to_string(),
            "not due: the last check finished 12m ago (2026-12-01T10:00:00Z); --if-due 1h runs again in 48m"
        );
        assert!(!decide(Some(&last), hour, at("2026-12-01T10:59:59Z")).is_due());
        assert!(decide(Some(&last), hour, at("2026-12-01T11:00:00Z")).is_due());
        assert_eq!(
            decide(Some(&last), hour, at("2026-12-01T12:30:00Z")).to_string(),
            "due: the last run finished 2h30m ago"
        );
        assert!(decide(None, hour, at("2026-12-01T10:12:00Z")).is_due());
        let offline = run("2026-12-01T10:00:00Z", true);
        assert!(decide(Some(&offline), hour, at("2026-12-01T10:01:00Z")).is_due());
        let mut stopped = run("2026-12-01T10:00:00Z", false);
        stopped.exit_code = crate::exit::TERMINATED;
        assert_eq!(
            decide(Some(&stopped), hour, at("2026-12-01T10:01:00Z")).to_string(),
            "due: the last run was stopped by a signal (exit 143)"
        );
        assert!(decide(Some(&last), hour, at("2026-12-01T09:00:00Z")).is_due());
        assert!(decide(Some(&last), Duration::ZERO, at("2026-12-01T10:00:00Z")).is_due());
    }

    #[test]
    fn a_bad_last_run_file_is_a_data_error_that_says_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let p = lastrun::path(dir.path());
        std::fs::write(&p, "{not json").unwrap();
        let err = if_due(dir.path(), Duration::from_secs(60), Utc::now()).unwrap_err();
        assert_eq!(err.exit_code(), crate::exit::DATA);
        let msg = err.to_string();
        assert!(
            msg.contains("last_run.json") && msg.contains("--if-due"),
            "{msg}"
        );
        assert_eq!(std::fs::read(&p).unwrap(), b"{not json");
    }

    #[test]
    fn jitter_is_within_its_bounds() {
        let max = Duration::from_millis(5);
        for _ in 0..200 {
            assert!(jitter_delay(max) < max);
        }
        assert_eq!(jitter_delay(Duration::ZERO), Duration::ZERO);
        assert!(check_bounds(Some(MAX_JITTER), Some(MAX_INTERVAL)).is_ok());
        let err = check_bounds(Some(MAX_JITTER * 2), None).unwrap_err();
        assert_eq!(err.exit_code(), crate::exit::USAGE);
        assert!(err.to_string().contains("--jitter"), "{err}");
        let err = check_bounds(None, Some(MAX_INTERVAL * 2)).unwrap_err();
        assert!(err.to_string().contains("--if-due"), "{err}");
    }

    #[test]
    fn the_wait_ends_when_the_clock_moves_past_it() {
        // An hour's wait, cut short by a clock file an hour ahead: what a
        // test of the real binary relies on. (Were the clock not read, this
        // would hang for an hour.)
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("clock");
        std::fs::write(&file, "0").unwrap();
        let clock = Clock::with_offset_file(file.clone());
        let hour = Duration::from_secs(3600);
        let until = clock.now() + TimeDelta::seconds(3600);
        let t = std::thread::spawn(move || wait_until(until, hour, &clock, |_| {}));
        std::fs::write(&file, "3601").unwrap();
        t.join().unwrap();
    }
}
