//! Turn whatever came back from an upstream — a transport failure, an HTTP
//! error, a malformed body or a reply — into a DESIGN.md [`Outcome`], and
//! read the wait an upstream asked for ([`retry_after`]).
//!
//! | what happened | failure |
//! |---|---|
//! | deadline passed (body included), connect timeout, HTTP 408 | `timeout` |
//! | HTTP 429; a 4xx (not 401/402/413) with quota or rate wording or Cloudflare code 3036/3040 | `rate_limit` |
//! | HTTP 5xx (incl. Anthropic 529, Gemini 503) | `http_error` |
//! | 2xx whose body is an error object: by its embedded code (429 → `rate_limit`, 5xx → `http_error`, wording as above, else `error`) | see left |
//! | 2xx with a choice whose `finish_reason` is `error` | `http_error` (the upstream behind a gateway failed mid-generation: transient, not the model's fault) |
//! | 401, 402, 403, 404, 400 (incl. Gemini `API_KEY_INVALID`), 413 (incl. Groq's "rate_limit_exceeded" size error), other 4xx, 3xx | `error` |
//! | 2xx that is HTML, not JSON, empty, or has no choices/candidates/content | `error` |
//! | connection refused, DNS, TLS, reset, body over the cap | `error` |
//! | a reply: right answer | none |
//! | a reply: wrong, empty, reasoning only, or cut off | `wrong_answer` |
//!
//! `latency_ms` is the time to the full response when one arrived, and 0
//! otherwise (timeouts included), as DESIGN.md defines it: "0 if no
//! response". Every `error` text passes through the [`Redactor`] before it
//! is cut to 200 characters, so a truncation can never leave half a key.

use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::catalog::Dialect;
use crate::dialect::{self, ChatReply, ProviderError, ReplyError};
use crate::http::{RawResponse, TransportError};
use crate::outcome::{FailureType, Outcome, truncate_reason};
use crate::prompts::check_answer;
use crate::secret::Redactor;

/// Classify the result of [`crate::http::send`] for a probe that expects
/// `expected`.
pub fn classify(
    dialect: Dialect,
    result: &Result<RawResponse, TransportError>,
    expected: i64,
    redactor: &Redactor,
) -> Outcome {
    match result {
        Ok(resp) => classify_response(dialect, resp, expected, redactor),
        Err(e) => classify_transport(e, redactor),
    }
}

/// A request that produced no response.
pub fn classify_transport(err: &TransportError, redactor: &Redactor) -> Outcome {
    let failure = match err {
        TransportError::Timeout(_) | TransportError::ConnectTimeout(_) => FailureType::Timeout,
        TransportError::Connect(_)
        | TransportError::Tls(_)
        | TransportError::Reset(_)
        | TransportError::TooLarge(_)
        | TransportError::Other(_) => FailureType::Error,
    };
    Outcome {
        unreachable: err.is_unreachable(),
        ..failed(failure, 0, None, &err.to_string(), redactor)
    }
}

/// A complete response, of any status.
pub fn classify_response(
    dialect: Dialect,
    resp: &RawResponse,
    expected: i64,
    redactor: &Redactor,
) -> Outcome {
    // Rounded up: a response that took 0.4 ms must not read as "no
    // response", which is what 0 means in the log.
    let latency_ms = u64::try_from(resp.elapsed.as_micros().div_ceil(1000))
        .unwrap_or(u64::MAX)
        .max(1);
    let status = Some(resp.status);
    if !(200..300).contains(&resp.status) {
        let failure = failure_for_status(resp.status, &resp.body);
        let reason = format!("HTTP {}: {}", resp.status, describe_error_body(&resp.body));
        return failed(failure, latency_ms, status, &reason, redactor);
    }
    let reply = match dialect::parse_reply(dialect, &resp.body) {
        Ok(reply) => reply,
        Err(e) => {
            let (failure, reason) = match &e {
                ReplyError::Embedded(pe) => {
                    let failure = failure_for_embedded(pe, &resp.body);
                    let code = pe
                        .embedded_status
                        .map(|s| format!(" {s}"))
                        .unwrap_or_default();
                    (
                        failure,
                        format!(
                            "HTTP {} with an error{code} in the body: {}",
                            resp.status,
                            describe_provider_error(pe)
                        ),
                    )
                }
                ReplyError::NotJson => (
                    FailureType::Error,
                    format!("response is not JSON: {}", snippet(&resp.text())),
                ),
                _ => (FailureType::Error, e.to_string()),
            };
            return failed(failure, latency_ms, status, &reason, redactor);
        }
    };
    if reply.finish_reason.as_deref() == Some("error") {
        return failed(
            FailureType::HttpError,
            latency_ms,
            status,
            "generation failed upstream (finish_reason \"error\")",
            redactor,
        );
    }
    if check_answer(&reply.text, expected) {
        return Outcome {
            failure: None,
            latency_ms,
            status,
            error: None,
            unreachable: false,
        };
    }
    let reason = wrong_answer_reason(&reply, expected);
    failed(
        FailureType::WrongAnswer,
        latency_ms,
        status,
        &reason,
        redactor,
    )
}

fn failed(
    failure: FailureType,
    latency_ms: u64,
    status: Option<u16>,
    reason: &str,
    redactor: &Redactor,
) -> Outcome {
    Outcome {
        failure: Some(failure),
        latency_ms,
        status,
        error: Some(truncate_reason(&redactor.redact(reason))),
        unreachable: false,
    }
}

fn wrong_answer_reason(reply: &ChatReply, expected: i64) -> String {
    let why = if !reply.text.trim().is_empty() {
        return format!(
            "wrong answer: expected {expected}, got \"{}\"",
            snippet(&reply.text)
        );
    } else if reply.truncated() {
        "an empty reply (cut off at max_tokens)"
    } else if reply.reasoning.is_some() {
        "only reasoning, no answer"
    } else {
        "an empty reply"
    };
    format!("wrong answer: expected {expected}, got {why}")
}

/// The failure type of a non-2xx response (the router uses this too).
pub fn failure_for_status(status: u16, body: &[u8]) -> FailureType {
    match status {
        429 => FailureType::RateLimit,
        500..=599 => FailureType::HttpError,
        408 => FailureType::Timeout,
        // Payment and size problems are not rate limits even when worded
        // like one: Groq's 413 "Request too large … rate_limit_exceeded".
        401 | 402 | 413 => FailureType::Error,
        400..=499 if is_rate_limited(body) => FailureType::RateLimit,
        _ => FailureType::Error,
    }
}

/// The failure type of an error object that came with a 2xx status.
fn failure_for_embedded(err: &ProviderError, body: &[u8]) -> FailureType {
    match err.embedded_status {
        Some(s) if !(200..300).contains(&s) => failure_for_status(s, body),
        _ if is_rate_limited(body) => FailureType::RateLimit,
        _ => FailureType::Error,
    }
}

/// Quota or rate-limit wording, or Cloudflare's capacity codes.
fn is_rate_limited(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body).to_lowercase();
    const WORDS: &[&str] = &[
        "quota",
        "rate limit",
        "rate_limit",
        "ratelimit",
        "resource_exhausted",
        "too many requests",
    ];
    if WORDS.iter().any(|w| text.contains(w)) {
        return true;
    }
    dialect::parse_error(body)
        .and_then(|e| e.code)
        .is_some_and(|c| c == "3036" || c == "3040")
}

/// Whether a rate-limit body says a *daily* allowance is spent, so the
/// router can wait until the next UTC midnight: Gemini's `quotaId`
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

/// A one-line description of an error body: the provider's message (and
/// code), a note for an HTML page, or the start of the text. Not yet
/// redacted.
pub fn describe_error_body(body: &[u8]) -> String {
    if let Some(pe) = dialect::parse_error(body) {
        return describe_provider_error(&pe);
    }
    let text = String::from_utf8_lossy(body);
    if text.trim().is_empty() {
        return "empty body".into();
    }
    if dialect::looks_like_html(&text) {
        return match dialect::html_title(&text) {
            Some(title) => format!("HTML error page: {title}"),
            None => "HTML error page".into(),
        };
    }
    snippet(&text)
}

fn describe_provider_error(pe: &ProviderError) -> String {
    let message = collapse(&pe.message);
    match &pe.code {
        Some(code) if message.is_empty() => code.clone(),
        Some(code) if !message.contains(code.as_str()) => format!("{message} ({code})"),
        _ if message.is_empty() => "error with no message".into(),
        _ => message,
    }
}

/// Whitespace collapsed, control characters dropped.
fn collapse(s: &str) -> String {
    s.split_whitespace()
        .map(|w| w.chars().filter(|c| !c.is_control()).collect::<String>())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The start of an untrusted text, safe to quote in one line.
fn snippet(s: &str) -> String {
    const MAX: usize = 80;
    let c = collapse(s);
    if c.chars().count() <= MAX {
        c
    } else {
        let mut out: String = c.chars().take(MAX).collect();
        out.push('…');
        out
    }
}

/// How long an upstream asked us to wait, in PROVIDERS.md's order:
/// `retry-after-ms`, `retry-after` (seconds or an HTTP date), Gemini's
/// `retryDelay`, the message's wording ("try again in 1m0.36s", "retry in
/// 7.81s", "Please wait 5 seconds"), then the reset header of a bucket whose
/// remaining count is 0.
pub fn retry_after(headers: &HeaderMap, body: &[u8]) -> Option<Duration> {
    retry_after_at(headers, body, Utc::now())
}

/// [`retry_after`] against a given clock, for tests.
pub fn retry_after_at(headers: &HeaderMap, body: &[u8], now: DateTime<Utc>) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    if let Some(v) = header("retry-after") {
        if let Ok(secs) = v.parse::<f64>() {
            return Duration::try_from_secs_f64(secs).ok();
        }
        if let Ok(date) = DateTime::parse_from_rfc2822(v) {
            return Some(until(date.with_timezone(&Utc), now));
        }
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

fn until(t: DateTime<Utc>, now: DateTime<Utc>) -> Duration {
    (t - now).to_std().unwrap_or(Duration::ZERO)
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
fn wait_from_wording(text: &str) -> Option<Duration> {
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

/// The longest reset among buckets whose `*remaining*` header is 0. Reset
/// values come as Go durations (OpenAI, Groq), float seconds (Cerebras),
/// RFC 3339 (Anthropic) or epoch milliseconds (OpenRouter).
fn exhausted_bucket_reset(headers: &HeaderMap, now: DateTime<Utc>) -> Option<Duration> {
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

fn parse_reset(v: &str, now: DateTime<Utc>) -> Option<Duration> {
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
    use crate::outcome::{UNREACHABLE, Verdict};
    use crate::secret::Secret;
    use reqwest::header::{HeaderName, HeaderValue};

    fn resp(status: u16, body: &str) -> RawResponse {
        RawResponse {
            status,
            headers: HeaderMap::new(),
            body: body.as_bytes().to_vec(),
            elapsed: Duration::from_millis(123),
        }
    }

    fn run(dialect: Dialect, status: u16, body: &str) -> Outcome {
        classify_response(dialect, &resp(status, body), 14, &Redactor::default())
    }

    fn failure(o: &Outcome) -> Option<FailureType> {
        o.failure
    }

    const OPENAI_OK: &str = r#"{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"14"},"finish_reason":"stop"}],"usage":{"prompt_tokens":20,"completion_tokens":1,"total_tokens":21}}"#;

    #[test]
    fn right_answer_is_ok_with_latency_and_status() {
        let o = run(Dialect::Openai, 200, OPENAI_OK);
        assert_eq!(
            o,
            Outcome {
                failure: None,
                latency_ms: 123,
                status: Some(200),
                error: None,
                unreachable: false,
            }
        );
    }

    #[test]
    fn wrong_answer_quotes_the_reply() {
        let body = OPENAI_OK.replace("\"14\"", "\"15\"");
        let o = run(Dialect::Openai, 200, &body);
        assert_eq!(failure(&o), Some(FailureType::WrongAnswer));
        assert_eq!(
            o.error.as_deref(),
            Some("wrong answer: expected 14, got \"15\"")
        );
    }

    #[test]
    fn empty_reasoning_only_and_truncated_are_wrong_answers() {
        let reasoning = r#"{"choices":[{"message":{"content":null,"reasoning_content":"Let me add 7 and 7"},"finish_reason":"stop"}]}"#;
        let o = run(Dialect::Openai, 200, reasoning);
        assert_eq!(failure(&o), Some(FailureType::WrongAnswer));
        assert!(o.error.unwrap().contains("only reasoning"));
        let cut = r#"{"choices":[{"message":{"content":""},"finish_reason":"length"}]}"#;
        let o = run(Dialect::Openai, 200, cut);
        assert_eq!(failure(&o), Some(FailureType::WrongAnswer));
        assert!(o.error.unwrap().contains("cut off"));
        let gemini = r#"{"candidates":[{"content":{"role":"model"},"finishReason":"MAX_TOKENS"}]}"#;
        let o = run(Dialect::Gemini, 200, gemini);
        assert_eq!(failure(&o), Some(FailureType::WrongAnswer));
    }

    #[test]
    fn http_429_is_a_rate_limit() {
        let body = r#"{"error":{"message":"Rate limit reached for model `llama-3.1-8b-instant` in organization `org_01` service tier `on_demand` on tokens per minute (TPM): Limit 6000, Used 5996, Requested 30. Please try again in 260ms.","type":"tokens","code":"rate_limit_exceeded"}}"#;
        let o = run(Dialect::Openai, 429, body);
        assert_eq!(failure(&o), Some(FailureType::RateLimit));
        assert_eq!(o.status, Some(429));
        let e = o.error.unwrap();
        assert!(e.starts_with("HTTP 429: Rate limit reached"), "{e}");
        assert!(e.chars().count() <= 200);
    }

    #[test]
    fn openrouter_error_inside_http_200_uses_the_embedded_code() {
        let body = r#"{"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"meta-llama/llama-3.3-70b-instruct:free is temporarily rate-limited upstream. Please retry shortly.","provider_name":"Venice"}},"user_id":"user_2x"}"#;
        let o = run(Dialect::Openai, 200, body);
        assert_eq!(failure(&o), Some(FailureType::RateLimit));
        assert_eq!(o.status, Some(200));
        assert!(o.error.unwrap().contains("temporarily rate-limited"));
        let body502 = r#"{"error":{"message":"Provider returned error","code":502,"metadata":{"raw":"upstream connect error","provider_name":"X"}}}"#;
        assert_eq!(
            failure(&run(Dialect::Openai, 200, body502)),
            Some(FailureType::HttpError)
        );
        let body400 = r#"{"error":{"message":"deepseek/x is not a valid model ID","code":400}}"#;
        assert_eq!(
            failure(&run(Dialect::Openai, 200, body400)),
            Some(FailureType::Error)
        );
    }

    #[test]
    fn finish_reason_error_is_an_http_error() {
        let body = r#"{"choices":[{"message":{"role":"assistant","content":""},"finish_reason":"error"}]}"#;
        assert_eq!(
            failure(&run(Dialect::Openai, 200, body)),
            Some(FailureType::HttpError)
        );
    }

    #[test]
    fn anthropic_529_overloaded_is_an_http_error() {
        let body = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let o = run(Dialect::Anthropic, 529, body);
        assert_eq!(failure(&o), Some(FailureType::HttpError));
        assert_eq!(
            o.error.as_deref(),
            Some("HTTP 529: Overloaded (overloaded_error)")
        );
    }

    const GEMINI_429_PER_DAY: &str = r#"{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 20, model: gemini-2.5-flash-lite\nPlease retry in 7.81s.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_content_free_tier_requests","quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaDimensions":{"location":"global","model":"gemini-2.5-flash-lite"},"quotaValue":"20"}]},{"@type":"type.googleapis.com/google.rpc.Help","links":[{"description":"Learn more about Gemini API quotas","url":"https://ai.google.dev/gemini-api/docs/rate-limits"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"}]}}"#;

    #[test]
    fn gemini_429_resource_exhausted_per_day() {
        let o = run(Dialect::Gemini, 429, GEMINI_429_PER_DAY);
        assert_eq!(failure(&o), Some(FailureType::RateLimit));
        let e = o.error.unwrap();
        assert!(
            e.starts_with("HTTP 429: You exceeded your current quota"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        assert!(is_daily_quota(GEMINI_429_PER_DAY.as_bytes()));
        // retryDelay comes before the "retry in" wording.
        assert_eq!(
            retry_after(&HeaderMap::new(), GEMINI_429_PER_DAY.as_bytes()),
            Some(Duration::from_secs(7))
        );
    }

    #[test]
    fn gemini_400_api_key_invalid_is_an_error() {
        let body = r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}},{"@type":"type.googleapis.com/google.rpc.LocalizedMessage","locale":"en-US","message":"API key not valid. Please pass a valid API key."}]}}"#;
        let o = run(Dialect::Gemini, 400, body);
        assert_eq!(failure(&o), Some(FailureType::Error));
        assert_eq!(
            o.error.as_deref(),
            Some("HTTP 400: API key not valid. Please pass a valid API key. (API_KEY_INVALID)")
        );
    }

    #[test]
    fn gemini_503_unavailable_is_an_http_error() {
        let body = r#"{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}"#;
        assert_eq!(
            failure(&run(Dialect::Gemini, 503, body)),
            Some(FailureType::HttpError)
        );
    }

    #[test]
    fn cloudflare_envelope_codes() {
        let neurons = r#"{"success":false,"errors":[{"code":3036,"message":"Account limited: you have used up your daily free allocation of 10,000 neurons, please upgrade to Cloudflare's Workers Paid plan if you would like to continue usage."}],"messages":[],"result":null}"#;
        let o = run(Dialect::Openai, 429, neurons);
        assert_eq!(failure(&o), Some(FailureType::RateLimit));
        assert!(o.error.unwrap().starts_with("HTTP 429: Account limited"));
        assert!(is_daily_quota(neurons.as_bytes()));
        // The code alone is enough, even on a 4xx that is not a 429.
        let capacity = r#"{"success":false,"errors":[{"code":3040,"message":"Capacity temporarily exceeded, please try again."}],"messages":[],"result":null}"#;
        assert_eq!(
            failure(&run(Dialect::Openai, 400, capacity)),
            Some(FailureType::RateLimit)
        );
        let no_model = r#"{"success":false,"errors":[{"code":5007,"message":"No such model @cf/meta/llama-9 or task"}],"messages":[],"result":null}"#;
        let o = run(Dialect::Openai, 400, no_model);
        assert_eq!(failure(&o), Some(FailureType::Error));
        assert_eq!(
            o.error.as_deref(),
            Some("HTTP 400: No such model @cf/meta/llama-9 or task (5007)")
        );
    }

    #[test]
    fn mistral_object_error() {
        let body = r#"{"object":"error","message":"Service tier capacity exceeded for this model.","type":"service_tier_capacity_exceeded","param":null,"code":"3505"}"#;
        assert_eq!(
            failure(&run(Dialect::Openai, 429, body)),
            Some(FailureType::RateLimit)
        );
        let unauthorized = r#"{"object":"error","message":"Unauthorized","type":"invalid_request_error","param":null,"code":null}"#;
        let o = run(Dialect::Openai, 401, unauthorized);
        assert_eq!(failure(&o), Some(FailureType::Error));
        assert_eq!(
            o.error.as_deref(),
            Some("HTTP 401: Unauthorized (invalid_request_error)")
        );
    }

    #[test]
    fn nvidia_problem_json() {
        let o = run(
            Dialect::Openai,
            429,
            r#"{"status":429,"title":"Too Many Requests"}"#,
        );
        assert_eq!(failure(&o), Some(FailureType::RateLimit));
        assert_eq!(o.error.as_deref(), Some("HTTP 429: Too Many Requests"));
        let o = run(
            Dialect::Openai,
            404,
            r#"{"type":"about:blank","status":404,"title":"Not Found","detail":"Function 'x': Not found for account 'y'"}"#,
        );
        assert_eq!(failure(&o), Some(FailureType::Error));
    }

    #[test]
    fn quota_wording_on_a_4xx_is_a_rate_limit() {
        let body = r#"{"error":{"message":"Quota exceeded for quota metric 'Requests' and limit 'Requests per minute'","code":403}}"#;
        assert_eq!(
            failure(&run(Dialect::Openai, 403, body)),
            Some(FailureType::RateLimit)
        );
    }

    #[test]
    fn groq_413_too_large_is_an_error_not_a_rate_limit() {
        let body = r#"{"error":{"message":"Request too large for model `llama-3.1-8b-instant` in organization `org_01` service tier `on_demand` on tokens per minute (TPM): Limit 6000, Requested 9000, please reduce your message size and try again.","type":"tokens","code":"rate_limit_exceeded"}}"#;
        assert_eq!(
            failure(&run(Dialect::Openai, 413, body)),
            Some(FailureType::Error)
        );
    }

    #[test]
    fn auth_payment_and_not_found_are_errors() {
        for (status, body) in [
            (
                401,
                r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
            ),
            (
                402,
                r#"{"error":{"message":"Insufficient Balance","type":"unknown_error","param":null,"code":"invalid_request_error"}}"#,
            ),
            (403, r#"{"error":{"message":"Forbidden"}}"#),
            (
                404,
                r#"{"error":{"message":"The model `gpt-9` does not exist","type":"invalid_request_error","code":"model_not_found"}}"#,
            ),
            (301, ""),
        ] {
            let o = run(Dialect::Openai, status, body);
            assert_eq!(failure(&o), Some(FailureType::Error), "{status}");
            assert_eq!(o.status, Some(status));
        }
    }

    #[test]
    fn html_pages_become_a_short_note() {
        let page = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n";
        let o = run(Dialect::Openai, 502, page);
        assert_eq!(failure(&o), Some(FailureType::HttpError));
        assert_eq!(
            o.error.as_deref(),
            Some("HTTP 502: HTML error page: 502 Bad Gateway")
        );
        let o = run(Dialect::Openai, 200, page);
        assert_eq!(failure(&o), Some(FailureType::Error));
        let e = o.error.unwrap();
        assert!(!e.contains('<'), "{e}");
    }

    #[test]
    fn malformed_success_bodies_are_errors() {
        for (dialect, body) in [
            (Dialect::Openai, r#"{"id":"x","choices":[]}"#),
            (Dialect::Gemini, r#"{"candidates":[]}"#),
            (Dialect::Anthropic, r#"{"type":"message","content":[]}"#),
            (Dialect::Openai, "\u{1}\u{2} garbage {"),
            (Dialect::Openai, ""),
            (Dialect::Openai, r#"{"unexpected":true}"#),
        ] {
            let o = run(dialect, 200, body);
            assert_eq!(failure(&o), Some(FailureType::Error), "{body}");
            assert_eq!(o.latency_ms, 123);
        }
        let o = run(Dialect::Openai, 200, "\u{1}\u{2} garbage {");
        assert_eq!(o.error.as_deref(), Some("response is not JSON: garbage {"));
    }

    #[test]
    fn transport_failures() {
        let r = Redactor::default();
        let o = classify_transport(&TransportError::Timeout(Duration::from_secs(30)), &r);
        assert_eq!(
            o,
            Outcome {
                failure: Some(FailureType::Timeout),
                latency_ms: 0,
                status: None,
                error: Some("timed out after 30s".into()),
                unreachable: false,
            }
        );
        // A slow upstream is a timeout; a host that cannot be reached is a
        // temporary failure whatever its class.
        assert_eq!(o.verdict(), Verdict::Temporary("timeout"));
        let o = classify_transport(&TransportError::ConnectTimeout(Duration::from_secs(10)), &r);
        assert_eq!(o.failure, Some(FailureType::Timeout));
        assert_eq!(o.error.as_deref(), Some("connect timed out after 10s"));
        assert_eq!(o.verdict(), Verdict::Temporary(UNREACHABLE));
        for (e, unreachable) in [
            (TransportError::Connect("connection refused".into()), true),
            (TransportError::Connect("dns lookup failed".into()), true),
            (
                TransportError::Tls("invalid peer certificate: UnknownIssuer".into()),
                true,
            ),
            (
                TransportError::Reset("connection closed mid-body".into()),
                true,
            ),
            (TransportError::TooLarge(1 << 20), false),
            (TransportError::Other("invalid request".into()), false),
        ] {
            let o = classify_transport(&e, &r);
            assert_eq!(o.failure, Some(FailureType::Error), "{e}");
            assert_eq!(o.latency_ms, 0);
            assert_eq!(o.unreachable, unreachable, "{e}");
            assert_eq!(
                o.verdict(),
                if unreachable {
                    Verdict::Temporary(UNREACHABLE)
                } else {
                    Verdict::Hard("error")
                },
                "{e}"
            );
        }
        assert_eq!(
            classify_transport(&TransportError::TooLarge(1 << 20), &r)
                .error
                .as_deref(),
            Some("response larger than 1 MiB")
        );
    }

    #[test]
    fn an_echoed_key_never_reaches_the_outcome() {
        let key = "canary-7f3e9a1b2c4d5e6f0a1b";
        let redactor = Redactor::new([Secret::new(key.into())]);
        let body = format!(
            r#"{{"error":{{"message":"Incorrect API key provided: {key}. Also seen as canary-7...0a1b.","type":"invalid_request_error","code":"invalid_api_key"}}}}"#
        );
        let o = classify_response(Dialect::Openai, &resp(401, &body), 14, &redactor);
        let e = o.error.unwrap();
        assert!(!e.contains(key), "{e}");
        assert!(!e.contains("0a1b"), "{e}");
        assert!(
            e.starts_with("HTTP 401: Incorrect API key provided: [REDACTED]"),
            "{e}"
        );
        // Also in a wrong answer that repeats it.
        let body = OPENAI_OK.replace("\"14\"", &format!("\"{key}\""));
        let o = classify_response(Dialect::Openai, &resp(200, &body), 14, &redactor);
        assert!(!o.error.unwrap().contains(key));
    }

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
        let at = |h: &[(&str, &str)], body: &str| retry_after_at(&headers(h), body.as_bytes(), now);
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
