//! What an upstream said about waiting, read from its headers and body:
//! `Retry-After` (seconds or an HTTP date) and `retry-after-ms`, Gemini's
//! `retryDelay`, "try again in …" wording, rate-limit reset headers, and the
//! wording of a spent *daily* quota. [`crate::upstream::classify`] reads
//! them into an [`UpstreamError`](crate::upstream::classify::UpstreamError);
//! the router's bench policy (`route::cooldown`) decides what to do with them.
//!
//! Time is always passed in as `now`; nothing here reads the clock.

use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::upstream::dialect;

/// The time from `now` until `t`, zero when `t` has passed.
fn until(t: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    (t - now).to_std().unwrap_or(Duration::ZERO)
}

/// How long an upstream asked us to wait, in docs/providers.md's order:
/// `retry-after-ms`, `retry-after` (seconds or an HTTP date), Gemini's
/// `retryDelay`, the message's wording ("try again in 1m0.36s", "retry in
/// 7.81s", "Please wait 5 seconds"), then the reset header of a bucket whose
/// remaining count is 0.
pub fn retry_after(headers: &HeaderMap, body: &[u8], now: DateTime<Utc>) -> Option<Duration> {
    if let Some(d) = explicit_header_wait(headers, now) {
        return Some(d);
    }
    let text = String::from_utf8_lossy(body);
    if let Some(delay) = dialect::parse_json(&text)
        .as_ref()
        .and_then(find_retry_delay)
        .and_then(parse_go_duration)
    {
        return Some(delay);
    }
    if let Some(d) = wait_from_wording(&text) {
        return Some(d);
    }
    exhausted_bucket_reset(headers, now)
}

/// The reset of a *daily* quota as the upstream names it: only from headers
/// (`retry-after-ms`, `retry-after`, or an exhausted bucket's reset). Body
/// hints are ignored here because Gemini attaches its per-minute
/// `retryDelay` ("7s", "Please retry in 7.81s") to per-day violations too;
/// waiting that long only earns another 429.
pub fn daily_reset(headers: &HeaderMap, now: DateTime<Utc>) -> Option<Duration> {
    explicit_header_wait(headers, now).or_else(|| exhausted_bucket_reset(headers, now))
}

/// `retry-after-ms`, then `retry-after` (seconds or an HTTP date).
fn explicit_header_wait(headers: &HeaderMap, now: DateTime<Utc>) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    let v = header("retry-after")?;
    if let Ok(secs) = v.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let date = DateTime::parse_from_rfc2822(v).ok()?;
    Some(until(date.with_timezone(&Utc), now))
}

/// Gemini's `RetryInfo.retryDelay`, wherever it sits in the details.
fn find_retry_delay(v: &Value) -> Option<&str> {
    match v {
        Value::Object(m) => m
            .get("retryDelay")
            .and_then(Value::as_str)
            .or_else(|| m.values().find_map(find_retry_delay)),
        Value::Array(a) => a.iter().find_map(find_retry_delay),
        _ => None,
    }
}

/// A Go-style duration as OpenAI and Groq send them: `1s`, `6m0s`,
/// `2m59.56s`, `7.66s`, `1m0.36s`, `20ms`. A bare number is not one.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let mut rest = s.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total = 0.0f64;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        // Longest units first, so "ms" is not read as minutes.
        let (unit_secs, unit_len) = [
            ("ms", 1e-3),
            ("us", 1e-6),
            ("µs", 1e-6),
            ("ns", 1e-9),
            ("h", 3600.0),
            ("m", 60.0),
            ("s", 1.0),
        ]
        .iter()
        .find(|(u, _)| rest.starts_with(u))
        .map(|(u, f)| (*f, u.len()))?;
        total += value * unit_secs;
        rest = &rest[unit_len..];
    }
    Duration::try_from_secs_f64(total).ok()
}

/// "try again in 1m0.36s", "Please retry in 7.81s.", "Please wait 5
/// seconds before retrying", "retry after 30 seconds".
pub fn wait_from_wording(text: &str) -> Option<Duration> {
    let lower = text.to_lowercase();
    for marker in ["try again in ", "retry in ", "retry after ", "please wait "] {
        let Some(at) = lower.find(marker) else {
            continue;
        };
        let mut words = lower[at + marker.len()..].split_whitespace();
        let Some(first) = words.next() else {
            continue;
        };
        let token = first.trim_end_matches(['.', ',', ';', ')', '"', '\'']);
        if let Some(d) = parse_go_duration(token) {
            return Some(d);
        }
        let Ok(value) = token.parse::<f64>() else {
            continue;
        };
        let unit = words
            .next()
            .map(|w| w.trim_end_matches(|c: char| !c.is_alphabetic()))
            .unwrap_or("");
        let factor = match unit {
            "ms" | "millisecond" | "milliseconds" => 1e-3,
            "m" | "min" | "mins" | "minute" | "minutes" => 60.0,
            "h" | "hour" | "hours" => 3600.0,
            _ => 1.0,
        };
        if let Ok(d) = Duration::try_from_secs_f64(value * factor) {
            return Some(d);
        }
    }
    None
}

/// Whether a rate-limit body says a *daily* allowance is spent, so the
/// router waits until the next UTC midnight: Gemini's `quotaId`
/// `…PerDay…`, Groq's "tokens per day (TPD)", Cloudflare's 3036 (daily
/// neurons).
pub fn is_daily_quota(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    if text.contains("PerDay") {
        return true;
    }
    let lower = text.to_lowercase();
    if ["per day", "daily", "(tpd)", "(rpd)"]
        .iter()
        .any(|w| lower.contains(w))
    {
        return true;
    }
    dialect::parse_error(body)
        .and_then(|e| e.code)
        .is_some_and(|c| c == "3036")
}

/// The longest reset among buckets whose `*remaining*` header is 0. Reset
/// values come as Go durations (OpenAI, Groq), float seconds (Cerebras),
/// RFC 3339 (Anthropic) or epoch milliseconds (OpenRouter).
pub fn exhausted_bucket_reset(headers: &HeaderMap, now: DateTime<Utc>) -> Option<Duration> {
    headers
        .iter()
        .filter(|(name, value)| {
            name.as_str().contains("remaining")
                && value
                    .to_str()
                    .ok()
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    == Some(0.0)
        })
        .filter_map(|(name, _)| {
            let reset = headers.get(name.as_str().replace("remaining", "reset"))?;
            parse_reset(reset.to_str().ok()?.trim(), now)
        })
        .max()
}

/// One rate-limit reset value, in any of the formats above.
pub fn parse_reset(v: &str, now: DateTime<Utc>) -> Option<Duration> {
    if let Ok(n) = v.parse::<f64>() {
        return if n > 1e12 {
            let at = DateTime::from_timestamp_millis(n as i64)?;
            Some(until(at, now))
        } else if n > 1e9 {
            let at = DateTime::from_timestamp(n as i64, 0)?;
            Some(until(at, now))
        } else {
            Duration::try_from_secs_f64(n).ok()
        };
    }
    if let Ok(at) = DateTime::parse_from_rfc3339(v) {
        return Some(until(at.with_timezone(&Utc), now));
    }
    parse_go_duration(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderName, HeaderValue};

    const GEMINI_429_PER_DAY: &str = r#"{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 20, model: gemini-2.5-flash-lite\nPlease retry in 7.81s.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash-lite"},"quotaValue":"20"}]},{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"}]}}"#;

    #[test]
    fn go_durations() {
        let ms = |n: u64| Some(Duration::from_millis(n));
        assert_eq!(parse_go_duration("2m59.56s"), ms(179_560));
        assert_eq!(parse_go_duration("7.66s"), ms(7_660));
        assert_eq!(parse_go_duration("1m0.36s"), ms(60_360));
        assert_eq!(parse_go_duration("6m0s"), ms(360_000));
        assert_eq!(parse_go_duration("1s"), ms(1_000));
        assert_eq!(parse_go_duration("260ms"), ms(260));
        assert_eq!(parse_go_duration("1h2m"), ms(3_720_000));
        assert_eq!(parse_go_duration("17"), None);
        assert_eq!(parse_go_duration(""), None);
        assert_eq!(parse_go_duration("5x"), None);
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| {
                (
                    HeaderName::from_bytes(k.as_bytes()).unwrap(),
                    HeaderValue::from_str(v).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn retry_after_follows_the_documented_order() {
        let now = DateTime::parse_from_rfc3339("2026-05-02T15:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let at = |h: &[(&str, &str)], body: &str| retry_after(&headers(h), body.as_bytes(), now);
        let ms = |n: u64| Some(Duration::from_millis(n));
        assert_eq!(
            at(&[("retry-after-ms", "1500"), ("retry-after", "9")], ""),
            ms(1500)
        );
        assert_eq!(at(&[("retry-after", "9")], GEMINI_429_PER_DAY), ms(9000));
        assert_eq!(
            at(&[("retry-after", "Sat, 02 May 2026 15:01:00 GMT")], ""),
            ms(60_000)
        );
        assert_eq!(at(&[], GEMINI_429_PER_DAY), ms(7000));
        assert_eq!(
            at(
                &[],
                r#"{"error":{"message":"Rate limit reached ... Please try again in 1m0.36s. Visit ..."}}"#
            ),
            ms(60_360)
        );
        assert_eq!(at(&[], "Please retry in 7.81s."), ms(7_810));
        assert_eq!(
            at(
                &[],
                "Rate limit of 15 per 60s exceeded. Please wait 42 seconds before retrying."
            ),
            ms(42_000)
        );
        assert_eq!(
            at(
                &[
                    ("x-ratelimit-remaining-requests", "0"),
                    ("x-ratelimit-reset-requests", "2m59.56s"),
                    ("x-ratelimit-remaining-tokens", "5000"),
                    ("x-ratelimit-reset-tokens", "7.66s"),
                ],
                ""
            ),
            ms(179_560)
        );
        assert_eq!(
            at(
                &[
                    ("anthropic-ratelimit-requests-remaining", "0"),
                    ("anthropic-ratelimit-requests-reset", "2026-05-02T15:00:30Z"),
                ],
                ""
            ),
            ms(30_000)
        );
        assert_eq!(
            at(
                &[
                    ("x-ratelimit-remaining", "0"),
                    ("x-ratelimit-reset", "1777734005000"),
                ],
                ""
            ),
            ms(5_000)
        );
        assert_eq!(at(&[], r#"{"error":{"message":"nope"}}"#), None);
    }
}
