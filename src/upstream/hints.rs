//! What an upstream said about waiting, read from its headers and body:
//! `Retry-After` (seconds or an HTTP date) and `retry-after-ms`, Gemini's
//! `retryDelay`, "try again in …" wording, rate-limit reset headers, and the
//! wording of a spent *daily* quota. [`crate::upstream::classify`] reads
//! them into an [`UpstreamError`](crate::upstream::classify::UpstreamError);
//! the router's bench policy (`route::cooldown`) decides what to do with them.
//!
//! Time is always passed in as `now`; nothing here reads the clock.

use std::time::Duration;

use chrono::{DateTime, NaiveTime, TimeDelta, Utc};
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::upstream::dialect::{self, Need};

/// The longest any upstream-named wait is honoured, so a bogus
/// `Retry-After` cannot take a key out (or hold a paused model back) for a
/// month.
pub const MAX_WAIT: Duration = Duration::from_secs(24 * 3600);

/// 00:00:00 UTC of the day after `now`: when daily quotas reset unless the
/// upstream says otherwise.
pub fn next_utc_midnight(now: DateTime<Utc>) -> DateTime<Utc> {
    let tomorrow = now.date_naive() + TimeDelta::days(1);
    tomorrow.and_time(NaiveTime::MIN).and_utc()
}

/// `now + d`, with `d` capped at [`MAX_WAIT`].
pub fn after(now: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    now + TimeDelta::from_std(d.min(MAX_WAIT)).unwrap_or(TimeDelta::MAX)
}

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
        // Whatever punctuation ends the sentence or the JSON around it
        // ("20s.\"}}") is not part of the duration.
        let token = first.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
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

/// What a 4xx says the model cannot take, when it names a capability
/// rather than a mistake any model would refuse: `route` sends such a
/// request elsewhere and remembers the verdict for a day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The model cannot take this need at all ("tools are not supported").
    Lacks(Need),
    /// The prompt is over the model's context window: the window, when the
    /// message states it.
    Context(Option<u64>),
    /// `max_tokens` is over the model's output cap: the cap, when stated.
    OutputCap(Option<u32>),
}

/// The capability an error message names, if any. `text` is the body or
/// the message, in any case. Wordings are the providers' own (tests below):
/// Groq "tools are not supported" / "tool calling is not supported with
/// this model", Ollama "… does not support tools", Gemini "Function calling
/// is not enabled for models/…" and "JSON mode is not enabled for
/// models/…", OpenAI "'response_format' of type 'json_schema' is not
/// supported with this model" and "image_url is only supported by certain
/// models", OpenRouter "No endpoints found that support tool use", and the
/// output caps "must be less than or equal to 8192" (Groq), "supports at
/// most 4096 completion tokens" (OpenAI), "> 8192, which is the maximum
/// allowed number of output tokens" (Anthropic).
///
/// The need must be named in the refusal phrase itself ([`refuses`]): a
/// body that says "not supported" and "image" apart ("You uploaded an
/// unsupported image", a model id with "image" in it) names none.
pub fn capability(text: &str) -> Option<Refusal> {
    let t = text.to_lowercase().replace(['`', '\'', '"'], "");
    let has = |words: &[&str]| words.iter().any(|w| t.contains(w));
    // vLLM words a prompt that leaves no room for `max_tokens` as a
    // max_tokens error ("'max_tokens' … is too large: 8000. This model's
    // maximum context length is 8192 tokens …"): the number it states is
    // the window, not an output cap.
    if t.contains("maximum context length") {
        return Some(Refusal::Context(context_window_stated(&t)));
    }
    if has(&[
        "max_tokens",
        "max_completion_tokens",
        "max_output_tokens",
        "maxoutputtokens",
    ]) && has(&[
        "less than or equal to",
        "at most",
        "too large",
        "which is the maximum",
        "supported range",
        "maximum value for",
    ]) {
        return Some(Refusal::OutputCap(output_cap_stated(&t)));
    }
    // A malformed tool or JSON schema ("Invalid schema for function 'f':
    // 'patternProperties' is not supported") is the request's own fault,
    // however it is worded.
    let malformed = has(&[
        "invalid schema",
        "invalid_function_parameters",
        "invalid_json_schema",
    ]);
    if !malformed {
        // Most specific first: "image url" before "image".
        const NEEDS: &[(Need, &[&str])] = &[
            (
                Need::Tools,
                &[
                    "tools",
                    "tool use",
                    "tool calling",
                    "tool_choice",
                    "function calling",
                ],
            ),
            (
                Need::Json,
                &[
                    "response_format",
                    "json mode",
                    "json_schema",
                    "json_object",
                    "structured output",
                ],
            ),
            (
                Need::ImageUrl,
                &["image url", "image urls", "url image", "url sources"],
            ),
            (
                Need::Vision,
                &[
                    "image",
                    "image input",
                    "image input modality",
                    "image_url",
                    "images",
                    "vision",
                    "multimodal",
                ],
            ),
            (Need::Audio, &["audio", "audio input", "input_audio"]),
            (Need::Suffix, &["suffix"]),
        ];
        if let Some((need, _)) = NEEDS.iter().find(|(_, terms)| refuses(&t, terms)) {
            return Some(Refusal::Lacks(*need));
        }
    }
    if has(&[
        "cannot read image",
        "can't read image",
        "does not have vision",
    ]) {
        return Some(Refusal::Lacks(Need::Vision));
    }
    if has(&[
        "n : number must be at most 1",
        "n must be 1",
        "only n=1",
        "n > 1 is not",
    ]) {
        return Some(Refusal::Lacks(Need::N));
    }
    None
}

/// Whether `t` (lowercased, quotes dropped) refuses one of `terms` in one
/// phrase: the term right before "is not supported" / "are not enabled" /
/// "is only supported by certain models", or right after "does not
/// support (the)" / "no endpoints found that support". A refusal and a
/// need word apart from each other are not enough.
fn refuses(t: &str, terms: &[&str]) -> bool {
    const AFTER: &[&str] = &[
        " not supported",
        " is not supported",
        " are not supported",
        " is not enabled",
        " are not enabled",
        " is only supported by certain models",
        " are only supported by certain models",
        " is not available for this model",
        " are not available for this model",
    ];
    const BEFORE: &[&str] = &[
        "does not support ",
        "doesnt support ",
        "do not support ",
        "dont support ",
        "does not support the ",
        "doesnt support the ",
        "no endpoints found that support ",
    ];
    terms.iter().any(|term| {
        AFTER.iter().any(|a| t.contains(&format!("{term}{a}")))
            || BEFORE.iter().any(|b| t.contains(&format!("{b}{term}")))
    })
}

/// The context window a context-overflow message states: OpenAI "maximum
/// context length is 8192 tokens", Anthropic "215000 tokens > 200000
/// maximum", Gemini "exceeds the maximum number of tokens allowed
/// (1048576)", llama.cpp "available context size (4096 tokens)".
pub fn context_window_stated(text: &str) -> Option<u64> {
    let t = text.to_lowercase();
    [
        "context length is",
        "tokens > ",
        "tokens allowed (",
        "context size (",
    ]
    .iter()
    .find_map(|m| number_after(&t, m))
}

/// The output cap a max_tokens message states. Gemini's range "to 8193
/// (exclusive)" is one above it.
fn output_cap_stated(t: &str) -> Option<u32> {
    if let Some(i) = t.find("(exclusive)")
        && let Some(n) = number_after(&t[..i], " to ")
    {
        return u32::try_from(n.saturating_sub(1)).ok();
    }
    [
        "less than or equal to",
        "at most",
        "> ",
        "maximum value for max_tokens is",
    ]
    .iter()
    .find_map(|m| number_after(t, m))
    .and_then(|n| u32::try_from(n).ok())
}

/// The number right after the last `marker` in `t` (spaces, quotes and
/// thousands separators allowed).
fn number_after(t: &str, marker: &str) -> Option<u64> {
    let at = t.rfind(marker)? + marker.len();
    let rest = t[at..].trim_start_matches([' ', '\'', '"', ':']);
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
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

    #[test]
    fn capability_refusals_name_the_need_in_each_providers_words() {
        use Refusal::*;
        for (text, want) in [
            (
                r#"{"error":{"message":"tools are not supported","type":"invalid_request_error"}}"#,
                Lacks(Need::Tools),
            ),
            (
                r#"{"error":{"message":"tool calling is not supported with this model","type":"invalid_request_error","param":"tool calling"}}"#,
                Lacks(Need::Tools),
            ),
            (
                r#"{"error":{"message":"registry.ollama.ai/library/gemma3:4b does not support tools","type":"api_error","param":null,"code":null}}"#,
                Lacks(Need::Tools),
            ),
            (
                r#"{"error":"llama3 does not support tools"}"#,
                Lacks(Need::Tools),
            ),
            (
                r#"{"error":{"code":400,"message":"Function calling is not enabled for models/gemma-3-27b-it","status":"INVALID_ARGUMENT"}}"#,
                Lacks(Need::Tools),
            ),
            (
                r#"{"error":{"code":400,"message":"JSON mode is not enabled for models/gemma-3-27b-it","status":"INVALID_ARGUMENT"}}"#,
                Lacks(Need::Json),
            ),
            (
                r#"{"error":{"message":"Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.","type":"invalid_request_error","param":"response_format","code":null}}"#,
                Lacks(Need::Json),
            ),
            (
                r#"{"error":{"message":"Invalid content type. image_url is only supported by certain models.","type":"invalid_request_error","param":"messages.[0].content.[1].type","code":null}}"#,
                Lacks(Need::Vision),
            ),
            (
                r#"{"error":{"message":"max_tokens for `llama-3.1-8b-instant` must be less than or equal to 8000","type":"invalid_request_error"}}"#,
                OutputCap(Some(8000)),
            ),
            (
                r#"{"error":{"message":"`max_tokens` must be less than or equal to `8192`, the maximum value for `max_tokens` is less than the `context_window` for this model","type":"invalid_request_error","param":"max_tokens"}}"#,
                OutputCap(Some(8192)),
            ),
            (
                r#"{"error":{"message":"max_completion_tokens must be less than or equal to 40960, the maximum value for max_completion_tokens is less than the context_window for this model","type":"invalid_request_error","param":"max_completion_tokens"}}"#,
                OutputCap(Some(40960)),
            ),
            (
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 65536 > 8192, which is the maximum allowed number of output tokens for claude-3-haiku-20240307"}}"#,
                OutputCap(Some(8192)),
            ),
            (
                r#"{"error":{"message":"max_tokens is too large: 100000. This model supports at most 4096 completion tokens, whereas you provided 100000.","type":"invalid_request_error","param":"max_tokens","code":"invalid_value"}}"#,
                OutputCap(Some(4096)),
            ),
            (
                r#"{"error":{"code":400,"message":"Unable to submit request because it has a maxOutputTokens value of 100000 but the supported range is from 1 (inclusive) to 65537 (exclusive). Update the value and try again.","status":"INVALID_ARGUMENT"}}"#,
                OutputCap(Some(65536)),
            ),
        ] {
            assert_eq!(capability(text), Some(want), "{text}");
        }
    }

    #[test]
    fn the_need_word_must_be_in_the_refusal_itself() {
        use Refusal::*;
        for (text, want) in [
            (
                r#"{"error":{"message":"No endpoints found that support tool use. Try disabling \"add\". To learn more about provider routing, visit: https://openrouter.ai/docs/provider-routing","code":404}}"#,
                Some(Lacks(Need::Tools)),
            ),
            (
                r#"{"error":{"message":"No endpoints found that support image input","code":404}}"#,
                Some(Lacks(Need::Vision)),
            ),
            (
                "tool use is not supported for this model",
                Some(Lacks(Need::Tools)),
            ),
            ("image input is not supported", Some(Lacks(Need::Vision))),
            (
                "this model does not support image inputs",
                Some(Lacks(Need::Vision)),
            ),
            (
                "Image input modality is not enabled for models/gemma",
                Some(Lacks(Need::Vision)),
            ),
            (
                "This model doesn't support the image content block that you provided.",
                Some(Lacks(Need::Vision)),
            ),
            (
                r#"{"error":{"message":"You uploaded an unsupported image. Please make sure your image is valid.","type":"invalid_request_error","param":null,"code":"invalid_image"}}"#,
                None,
            ),
            (
                r#"{"error":{"code":404,"message":"models/gemini-2.0-flash-exp-image-generation is not found for API version v1beta, or is not supported for generateContent.","status":"NOT_FOUND"}}"#,
                None,
            ),
            (
                "models/some-vision-audio-tools-model is not found, or is not supported for generateContent",
                None,
            ),
            (
                "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 8192 tokens and your request has 500 input tokens (8000 > 8192 - 500).",
                Some(Context(Some(8192))),
            ),
        ] {
            assert_eq!(capability(text), want, "{text}");
        }
    }

    #[test]
    fn a_mistake_any_model_would_refuse_names_no_capability() {
        for text in [
            r#"{"error":{"message":"Invalid value for 'temperature': must be <= 2.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}"#,
            r#"{"error":{"message":"'messages.1' : for 'role:user' the following must be satisfied[('messages.1' : property 'tool_calls' is unsupported, did you mean 'tool_call_id'?)]","type":"invalid_request_error"}}"#,
            r#"{"error":{"message":"Invalid schema for function 'f': In context=(), 'required' is required to be supplied","type":"invalid_request_error","param":"tools[0].function.parameters","code":"invalid_function_parameters"}}"#,
            r#"{"error":{"message":"Missing required parameter: 'messages'.","type":"invalid_request_error"}}"#,
            r#"{"error":{"message":"Invalid schema for function 'f': 'patternProperties' is not supported.","type":"invalid_request_error","param":"tools[0].function.parameters","code":"invalid_function_parameters"}}"#,
            r#"{"error":{"message":"max_tokens must be an integer","type":"invalid_request_error"}}"#,
        ] {
            assert_eq!(capability(text), None, "{text}");
        }
    }

    #[test]
    fn context_windows_are_read_where_stated() {
        for (text, want) in [
            (
                "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
                Some(8192),
            ),
            (
                "prompt is too long: 215000 tokens > 200000 maximum",
                Some(200000),
            ),
            (
                "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
                Some(1048576),
            ),
            (
                "the request exceeds the available context size (4096 tokens), try increasing it",
                Some(4096),
            ),
            (
                "the request exceeds the available context size, try increasing it",
                None,
            ),
        ] {
            assert_eq!(context_window_stated(text), want, "{text}");
        }
    }
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
        // The wording ends the JSON string: the quote and braces are not
        // part of the duration.
        assert_eq!(
            at(
                &[],
                r#"{"error":{"message":"Rate limited. Try again in 20s."}}"#
            ),
            ms(20_000)
        );
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
