//! How numbers and times are shown, for every command that prints the
//! record: percentages (rounded, never truncated), sample counts and
//! timestamps.

use chrono::{DateTime, Utc};

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

/// A sample count: whole numbers print without a fraction.
pub fn fmt_count(n: f64) -> String {
    if (n - n.round()).abs() < 1e-9 {
        format!("{}", n.round() as i64)
    } else {
        format!("{n:.1}")
    }
}

pub fn fmt_rfc3339(ts: i64) -> String {
    DateTime::<Utc>::from_timestamp(ts, 0)
        .map(crate::time::format_ts)
        .unwrap_or_else(|| ts.to_string())
}

/// `2026-05-02 19:57 UTC`, as the old block wrote it.
pub fn fmt_minute(ts: i64) -> String {
    DateTime::<Utc>::from_timestamp(ts, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| ts.to_string())
}

/// `14m ago`, `3h ago`, `2d ago`: how long ago something happened, `secs`
/// before now.
pub fn fmt_ago(secs: i64) -> String {
    if secs < 0 {
        return "in the future: check the clock".into();
    }
    match secs {
        0..60 => "just now".into(),
        60..7200 => format!("{}m ago", secs / 60),
        7200..172_800 => format!("{}h ago", secs / 3600),
        _ => format!("{}d ago", secs / 86_400),
    }
}

/// `1 provider`, `2 providers`: a count and its noun, agreeing.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_agree_with_their_noun() {
        assert_eq!(count(1, "provider", "providers"), "1 provider");
        assert_eq!(count(0, "probe", "probes"), "0 probes");
        assert_eq!(count(2, "model", "models"), "2 models");
    }

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
}
