//! Timestamps as DESIGN.md fixes them: RFC 3339, UTC, `Z`, second precision.

use chrono::{DateTime, SecondsFormat, Utc};

pub fn now_rfc3339() -> String {
    format_ts(Utc::now())
}

pub fn format_ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// Parse a timestamp as written in any log entry, new (`ts`) or legacy
/// (`timestamp`), into Unix seconds. Accepts RFC 3339 with any offset and
/// fractional seconds, and the naive `YYYY-MM-DDTHH:MM:SS` form (taken as UTC).
pub fn parse_ts(s: &str) -> Option<i64> {
    if let Some(fast) = parse_fast(s.as_bytes()) {
        return Some(fast);
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.timestamp());
    }
    chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f")
        .ok()
        .map(|t| t.and_utc().timestamp())
}

/// The common case, `YYYY-MM-DDTHH:MM:SSZ`, without allocation or chrono.
fn parse_fast(b: &[u8]) -> Option<i64> {
    if b.len() != 20
        || b[4] != b'-'
        || b[7] != b'-'
        || b[10] != b'T'
        || b[13] != b':'
        || b[16] != b':'
        || b[19] != b'Z'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let mut v = 0i64;
        for &c in &b[r] {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + (c - b'0') as i64;
        }
        Some(v)
    };
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    Some(days_from_civil(y, m, d) * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_path_agrees_with_chrono() {
        for s in [
            "1970-01-01T00:00:00Z",
            "2026-05-02T05:07:17Z",
            "2000-02-29T23:59:59Z",
            "2100-12-31T12:00:00Z",
        ] {
            let want = DateTime::parse_from_rfc3339(s).unwrap().timestamp();
            assert_eq!(parse_fast(s.as_bytes()), Some(want), "{s}");
        }
    }

    #[test]
    fn other_forms() {
        assert_eq!(
            parse_ts("2026-05-02T05:07:17+00:00"),
            parse_ts("2026-05-02T05:07:17Z")
        );
        assert_eq!(
            parse_ts("2026-05-02T05:07:17.5Z"),
            parse_ts("2026-05-02T05:07:17Z")
        );
        assert_eq!(
            parse_ts("2026-05-02T05:07:17"),
            parse_ts("2026-05-02T05:07:17Z")
        );
        assert_eq!(parse_ts("yesterday"), None);
        assert_eq!(parse_ts("2026-13-02T05:07:17Z"), None);
    }
}
