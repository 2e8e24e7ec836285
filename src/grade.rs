//! How uptime is graded and shown, in one place for `brief` and `rollup`:
//! the thresholds, percentages and sample counts.
//!
//! The thresholds are the old tool's README block's (✅ ≥90%, ⚠️ 60–90%,
//! ❌ <60%), so that a published block keeps its meaning; `brief` uses the
//! same ones.

/// At or above: good (`brief` [ OK ], `rollup` ✅ `ok`).
pub const GOOD: f64 = 0.90;
/// At or above, and below [`GOOD`]: fair (`brief` [WARN], `rollup` ⚠️
/// `degraded`). Below: poor (`brief` [POOR] and a routing advisory,
/// `rollup` ❌ `down`).
pub const FAIR: f64 = 0.60;

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

/// An uptime fraction as a percentage rounded to one decimal: 2 of 3 is
/// 66.7. It is 100 only when every probe passed and 0 only when none did,
/// so 9,999 of 10,000 is 99.9, not 100.
pub fn pct(u: f64) -> f64 {
    let exact = u * 100.0;
    let rounded = (exact * 10.0).round() / 10.0;
    if rounded >= 100.0 && u < 1.0 {
        99.9
    } else if rounded <= 0.0 && u > 0.0 {
        0.1
    } else {
        rounded
    }
}

/// [`pct`] with a `%`: `66.7%`, and whole numbers without a fraction when
/// they are exact: `50%`, `100%`.
pub fn fmt_pct(u: f64) -> String {
    let exact = u * 100.0;
    if (exact - exact.round()).abs() < 1e-9 {
        format!("{}%", exact.round() as i64)
    } else {
        format!("{:.1}%", pct(u))
    }
}

/// Serialize a sample count as a JSON integer when it is whole (it always
/// is but for legacy averaged entries, whose passes are `uptime ×
/// sample_count`), else as a number.
pub fn serialize_count<S: serde::Serializer>(n: &f64, s: S) -> Result<S::Ok, S::Error> {
    if (n - n.round()).abs() < 1e-9 && n.abs() < 9.0e15 {
        s.serialize_i64(n.round() as i64)
    } else {
        s.serialize_f64((n * 1000.0).round() / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_and_never_reach_100_or_0_by_rounding() {
        assert_eq!(fmt_pct(2.0 / 3.0), "66.7%");
        assert_eq!(fmt_pct(1.0 / 3.0), "33.3%");
        assert_eq!(fmt_pct(1.0), "100%");
        assert_eq!(fmt_pct(0.9999), "99.9%");
        assert_eq!(fmt_pct(0.99951), "99.9%");
        assert_eq!(fmt_pct(0.0001), "0.1%");
        assert_eq!(fmt_pct(0.5), "50%");
        assert_eq!(fmt_pct(12.0 / 13.0), "92.3%");
        assert_eq!(fmt_pct(0.0), "0%");
        assert_eq!(pct(2.0 / 3.0), 66.7);
    }

    #[test]
    fn one_set_of_thresholds() {
        assert_eq!(grade(0.90), Grade::Good);
        assert_eq!(grade(0.899), Grade::Fair);
        assert_eq!(grade(0.60), Grade::Fair);
        assert_eq!(grade(0.599), Grade::Poor);
    }
}
