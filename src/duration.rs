//! Durations as users write and read them: the one parser behind every
//! duration flag (`--jitter 5m`, `--if-due 1h`, `--every 90m`, a crontab's
//! `--if-due`), and the few spellings llmprobe shows them in.
//!
//! Each spelling exists because a test, a file or a reader depends on it, so
//! they differ on purpose: a flag's value must read back through [`parse`]
//! (which knows no days), a window is shown in the largest unit that divides
//! it (days included), a run's spacing keeps its hundredths. The spelling of
//! configured timeouts in transport errors stays with the HTTP layer
//! (`upstream::http::human_duration`): that layer sits below this module,
//! whose parser reads through `upstream::hints`.

use std::time::Duration;

/// A clap value parser for durations written like `1h`, `90m`, `5m30s`,
/// `45s` or `0` (the same Go-style spelling providers use), for flags such as
/// `--every` and `--jitter`.
pub fn parse(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    crate::upstream::hints::parse_go_duration(s)
        .ok_or_else(|| format!("{s:?} is not a duration; write it like 1h, 90m, 5m30s or 45s"))
}

/// A span as people write it in flags (`--jitter 5m`), in whole seconds:
/// `3m12s`, `1h`, `1h0m5s`, `45s`, `0s`.
pub fn format(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    match (h, m, s) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, 0) => format!("{h}h{m}m"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

/// The first of `units` that divides `secs`, as `7h`; seconds otherwise.
fn largest_unit(secs: u64, units: &[(&str, u64)]) -> String {
    units
        .iter()
        .find(|(_, n)| secs.is_multiple_of(*n))
        .map_or_else(
            || format!("{secs}s"),
            |(unit, n)| format!("{}{unit}", secs / n),
        )
}

/// A window or a wait in the largest unit that divides it, days included:
/// `1d`, `7h`, `225s`.
pub fn format_unit(secs: i64) -> String {
    let body = largest_unit(
        secs.unsigned_abs(),
        &[("d", 86_400), ("h", 3600), ("m", 60)],
    );
    if secs < 0 { format!("-{body}") } else { body }
}

/// A flag's value for a scheduled job, in the largest of hours, minutes or
/// seconds that divides it (`1h`, `45m`, `150s`, `168h`; `0`), so that
/// [`parse`] (and so `check --if-due` and `--jitter`) reads it back.
pub fn format_flag(d: Duration) -> String {
    match d.as_secs() {
        0 => "0".into(),
        secs => largest_unit(secs, &[("h", 3600), ("m", 60)]),
    }
}

/// Seconds, with hundredths when there are any: `90s`, `1.20s`, `0.20s`
/// (spacings and timeouts accept fractions).
pub fn format_secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}s")
    } else {
        format!("{s:.2}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_read_like_flags() {
        let cases = [
            (0, "0s"),
            (45, "45s"),
            (300, "5m"),
            (192, "3m12s"),
            (3600, "1h"),
            (3900, "1h5m"),
            (3605, "1h0m5s"),
            (90_000, "25h"),
        ];
        for (secs, text) in cases {
            assert_eq!(format(secs), text);
            // Each one is read back by the flag parser.
            assert_eq!(parse(text), Ok(Duration::from_secs(secs)), "{text}");
        }
    }

    #[test]
    fn the_parser_takes_zero_and_refuses_what_is_no_duration() {
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        let err = parse("5").unwrap_err();
        assert!(err.contains("write it like 1h"), "{err}");
        assert!(parse("1d").is_err(), "days are not a flag unit");
    }

    #[test]
    fn units_are_the_largest_that_divide() {
        assert_eq!(format_unit(86_400), "1d");
        assert_eq!(format_unit(7 * 86_400), "7d");
        assert_eq!(format_unit(7 * 3600), "7h");
        assert_eq!(format_unit(5400), "90m");
        assert_eq!(format_unit(225), "225s");
        assert_eq!(format_unit(0), "0d");
    }

    #[test]
    fn flags_know_no_days_and_read_back() {
        for (d, text) in [(0, "0"), (150, "150s"), (2700, "45m"), (604_800, "168h")] {
            assert_eq!(format_flag(Duration::from_secs(d)), text);
            assert_eq!(parse(text), Ok(Duration::from_secs(d)), "{text}");
        }
    }

    #[test]
    fn seconds_keep_their_hundredths() {
        assert_eq!(format_secs(Duration::from_secs(90)), "90s");
        assert_eq!(format_secs(Duration::from_millis(1200)), "1.20s");
        assert_eq!(format_secs(Duration::from_millis(200)), "0.20s");
        assert_eq!(format_secs(Duration::ZERO), "0s");
    }
}
