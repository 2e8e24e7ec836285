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
    if secs < 60 {
        return "just now".into();
    }
    format!("{} ago", fmt_age(secs))
}

/// An age in one short unit, as [`fmt_ago`] words it without the "ago":
/// `0m`, `14m`, `3h`, `2d` (minutes below two hours, hours below two
/// days); `future` when `secs` is negative.
/// A time within days of `now` (Unix seconds), short: `14:00 UTC` on
/// `now`'s UTC day, `Dec 08 14:00 UTC` on another.
pub fn fmt_soon(t: i64, now: i64) -> String {
    let (Some(at), Some(today)) = (
        chrono::DateTime::from_timestamp(t, 0),
        chrono::DateTime::from_timestamp(now, 0),
    ) else {
        return fmt_minute(t);
    };
    match at.date_naive() == today.date_naive() {
        true => at.format("%H:%M UTC").to_string(),
        false => at.format("%b %d %H:%M UTC").to_string(),
    }
}

pub fn fmt_age(secs: i64) -> String {
    match secs {
        ..0 => "future".into(),
        0..7200 => format!("{}m", secs / 60),
        7200..172_800 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

/// A token count the way context windows are spoken of: `8k` (8,192),
/// `128k` (131,072 or 128,000), `200k`, `1M` (1,048,576), `1.5M`; exact
/// below 1,000. Binary multiples (that are not also decimal ones) are
/// counted in 1,024s, others in 1,000s.
pub fn fmt_tokens(n: u64) -> String {
    let (k, m) = if !n.is_multiple_of(1000) && n.is_multiple_of(1024) {
        (n as f64 / 1024.0, n as f64 / 1_048_576.0)
    } else {
        (n as f64 / 1000.0, n as f64 / 1_000_000.0)
    };
    if n < 1000 {
        n.to_string()
    } else if m >= 1.0 {
        let m = (m * 10.0).round() / 10.0;
        format!("{}M", trim_zero(m))
    } else {
        format!("{}k", k.round() as u64)
    }
}

/// `1.0` as `1`, `1.5` as `1.5`.
fn trim_zero(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{}", v.round() as u64)
    } else {
        format!("{v:.1}")
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
    fn ages_and_token_counts_are_short() {
        assert_eq!(fmt_age(59), "0m");
        assert_eq!(fmt_age(14 * 60), "14m");
        assert_eq!(fmt_age(3 * 3600 + 5), "3h");
        assert_eq!(fmt_age(3 * 86_400), "3d");
        assert_eq!(fmt_age(-1), "future");
        assert_eq!(fmt_ago(30), "just now");
        assert_eq!(fmt_ago(3 * 3600), "3h ago");
        assert_eq!(fmt_tokens(8192), "8k");
        assert_eq!(fmt_tokens(131_072), "128k");
        assert_eq!(fmt_tokens(128_000), "128k");
        assert_eq!(fmt_tokens(6000), "6k");
        assert_eq!(fmt_tokens(1_048_576), "1M");
        assert_eq!(fmt_tokens(1_047_576), "1M");
        assert_eq!(fmt_tokens(1_500_000), "1.5M");
        assert_eq!(fmt_tokens(512), "512");
    }

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
