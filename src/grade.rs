//! How uptime is graded, in one place for `brief` and `rollup`: the
//! thresholds. How it is shown is in [`crate::format`].
//!
//! The thresholds are the old tool's README block's (✅ ≥90%, ⚠️ 60–90%,
//! ❌ <60%), so that a published block keeps its meaning; `brief` uses the
//! same ones.
//!
//! Latency badges grade the median latency of the probe (a one-line
//! question, a few tokens of answer), so mostly the time to the first
//! token: up to [`LATENCY_GOOD_MS`] is good, up to [`LATENCY_FAIR_MS`]
//! fair, slower is poor.

/// At or above: good (`brief` [ OK ], `rollup` ✅ `ok`).
pub const GOOD: f64 = 0.90;
/// At or above, and below [`GOOD`]: fair (`brief` [WARN], `rollup` ⚠️
/// `degraded`). Below: poor (`brief` [POOR] and a routing advisory,
/// `rollup` ❌ `down`).
pub const FAIR: f64 = 0.60;

/// At or below, in milliseconds: a good median latency.
pub const LATENCY_GOOD_MS: f64 = 2000.0;
/// At or below, and above [`LATENCY_GOOD_MS`]: fair. Above: poor.
pub const LATENCY_FAIR_MS: f64 = 5000.0;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grade {
    Good,
    Fair,
    Poor,
}

/// The grade of an uptime fraction.
pub fn grade(uptime: f64) -> Grade {
    if uptime >= GOOD {
        Grade::Good
    } else if uptime >= FAIR {
        Grade::Fair
    } else {
        Grade::Poor
    }
}

/// The grade of a median latency in milliseconds.
pub fn latency_grade(ms: f64) -> Grade {
    if ms <= LATENCY_GOOD_MS {
        Grade::Good
    } else if ms <= LATENCY_FAIR_MS {
        Grade::Fair
    } else {
        Grade::Poor
    }
}

/// The word for an uptime, as `rollup` rows and the status page say it:
/// `ok`, `degraded`, `down` by its grade, `no_samples` without probes.
pub fn status_word(uptime: Option<f64>) -> &'static str {
    match uptime.map(grade) {
        None => "no_samples",
        Some(Grade::Good) => "ok",
        Some(Grade::Fair) => "degraded",
        Some(Grade::Poor) => "down",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_set_of_thresholds() {
        assert_eq!(grade(0.90), Grade::Good);
        assert_eq!(grade(0.899), Grade::Fair);
        assert_eq!(grade(0.60), Grade::Fair);
        assert_eq!(grade(0.599), Grade::Poor);
        assert_eq!(latency_grade(2000.0), Grade::Good);
        assert_eq!(latency_grade(2001.0), Grade::Fair);
        assert_eq!(latency_grade(5000.0), Grade::Fair);
        assert_eq!(latency_grade(5001.0), Grade::Poor);
    }
}
