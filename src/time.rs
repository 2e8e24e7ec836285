//! Timestamps as docs/formats.md fixes them: RFC 3339, UTC, `Z`, second precision.

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
///
/// The common form takes a fast path; it changes only speed, never meaning:
/// on every input `parse_ts` gives what [`parse_slow`] gives (a property
/// test below holds it to that).
pub fn parse_ts(s: &str) -> Option<i64> {
    if let Some(fast) = parse_fast(s.as_bytes()) {
        return Some(fast);
    }
    parse_slow(s)
}

/// [`parse_ts`] by chrono alone: the reference the fast path must agree with.
fn parse_slow(s: &str) -> Option<i64> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.timestamp());
    }
    chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f")
        .ok()
        .map(|t| t.and_utc().timestamp())
}

/// The common case, `YYYY-MM-DDTHH:MM:SSZ`, without allocation or chrono.
/// `None` means "not for the fast path", not "invalid": the caller then asks
/// chrono, which decides. Second 60 (a leap second, which chrono reads as
/// the last instant of second 59) is left to chrono, being rare.
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
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) || hh > 23 || mm > 59 || ss > 59 {
        return None;
    }
    Some(days_from_civil(y, m, d) * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// The length of month `m` (1–12) of year `y`, proleptic Gregorian.
fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if y % 4 == 0 && (y % 100 != 0 || y % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
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

    /// A field of the fast path's shape: usually in range, sometimes just
    /// outside it, sometimes not digits at all.
    fn field(width: usize, max: u32) -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0..=max).prop_map(move |v| format!("{v:0width$}")),
            1 => (0..10u32.pow(width as u32)).prop_map(move |v| format!("{v:0width$}")),
            1 => proptest::collection::vec(
                prop::sample::select(vec!['0', '9', 'a', ' ', '-', '+', '\u{e9}']),
                width..=width
            )
            .prop_map(|v| v.into_iter().collect()),
        ]
    }

    /// The fast path must give what chrono gives, `Some(t)` or `None`, on
    /// every input: dates near and past each month's end, leap years and
    /// century years, second 60, hour 24, stray characters.
    #[test]
    fn parse_ts_is_chrono_on_edge_cases() {
        let mut n = 0;
        for y in ["1900", "2000", "2024", "2026", "2100", "0000", "9999"] {
            for m in 0..=13 {
                for d in [0, 1, 27, 28, 29, 30, 31, 32] {
                    for t in [
                        "00:00:00", "23:59:59", "23:59:60", "12:34:60", "24:00:00", "23:60:00",
                        "2a:00:00", "00:00:61", "99:99:99",
                    ] {
                        let s = format!("{y}-{m:02}-{d:02}T{t}Z");
                        assert_eq!(parse_ts(&s), parse_slow(&s), "{s}");
                        n += 1;
                    }
                }
            }
        }
        assert_eq!(n, 7 * 14 * 8 * 9);
        // What the old fast path got wrong.
        assert_eq!(parse_ts("2026-02-30T00:00:00Z"), None);
        assert_eq!(parse_ts("2026-04-31T00:00:00Z"), None);
        assert_eq!(
            parse_ts("2024-02-29T23:59:60Z"),
            parse_ts("2024-02-29T23:59:59Z")
        );
    }

    proptest::proptest! {
        #[test]
        fn parse_ts_is_chrono_on_the_fast_shape(
            y in field(4, 9999), mo in field(2, 12), d in field(2, 31),
            h in field(2, 24), mi in field(2, 60), sec in field(2, 60),
        ) {
            let s = format!("{y}-{mo}-{d}T{h}:{mi}:{sec}Z");
            proptest::prop_assert_eq!(parse_ts(&s), parse_slow(&s), "{}", s);
        }

        #[test]
        fn parse_ts_is_chrono_on_any_string(
            c in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::char::range('0', '9'),
                    proptest::sample::select(vec!['-', ':', 'T', 'Z', '.', '+', 't', 'z', ' ']),
                    proptest::char::any(),
                ],
                0..26,
            )
        ) {
            let s: String = c.into_iter().collect();
            proptest::prop_assert_eq!(parse_ts(&s), parse_slow(&s), "{:?}", s);
        }
    }
}
