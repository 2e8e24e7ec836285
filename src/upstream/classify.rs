//! Turn whatever came back from an upstream into one of two things: an
//! [`UpstreamError`] with a fine [`ErrorClass`] (used by both `check` and
//! `route`), or a usable reply, which a probe then checks for the right
//! answer, or for what a capability probe asked ([`classify`], with a
//! [`Judge`]). The log's five-class `failure_type` is always
//! [`ErrorClass::failure_type`], so the two commands can never disagree.
//!
//! | what happened | class | `failure_type` |
//! |---|---|---|
//! | deadline passed (body included), connect timeout, HTTP 408 | `timeout` | `timeout` |
//! | 429, or a 4xx (not 401/402/413) with rate or quota wording, or Cloudflare 3040 | `rate_limit` | `rate_limit` |
//! | the same, but a spent balance (OpenAI's `insufficient_quota`, xAI's 429 "used all available credits or reached its monthly spending limit") or a per-day allowance (Gemini `…PerDay…`, Groq TPD/RPD, Cloudflare 3036) | `quota_exhausted` | `rate_limit` |
//! | 401; a 4xx whose code is `API_KEY_INVALID` (Gemini's bad key is a 400) or `invalid_api_key`, or that says "Incorrect API key" (xAI's bad key is a 400) | `auth` | `error` |
//! | 402; a 4xx about the credit balance (Anthropic's 400 "credit balance is too low", xAI's 403 with its spent-credits wording) | `payment` | `error` |
//! | 403 (but Together's 403 context overflow is `context_length`, and OpenRouter's moderation 403 is `bad_request`) | `forbidden` | `error` |
//! | 404, 410; a 4xx saying the model does not exist (Groq `model_decommissioned`, Cloudflare 5007, OpenRouter "not a valid model ID") | `model_not_found` | `error` |
//! | 413 (incl. Groq's "rate_limit_exceeded" size error); a 4xx about the context (`context_length_exceeded`, llama.cpp `exceed_context_size_error`, Anthropic "prompt is too long") | `context_length` | `error` |
//! | a 4xx naming a capability the model lacks (Groq "tools are not supported", Ollama "does not support tools", Gemini "Function calling / JSON mode is not enabled", OpenAI "'response_format' … is not supported with this model", "image_url is only supported by certain models") or an output cap `max_tokens` is over ("must be less than or equal to 8192", "> 8192, which is the maximum") | `unsupported` | `error` |
//! | any other 4xx | `bad_request` | `error` |
//! | 503, 529, a 5xx saying "overloaded" | `overloaded` | `http_error` |
//! | any other 5xx; a 2xx with an error object and no other code; a 2xx whose `finish_reason` is `error` (the upstream behind a gateway failed mid-generation) | `server_error` | `http_error` |
//! | a 2xx with an error object carrying a status or rate wording (OpenRouter) | as that status or wording | |
//! | connection refused, DNS, TLS, reset, body over the cap; a 2xx that is HTML, not JSON, empty, or has no choices/candidates/content; a 3xx (redirects are never followed: the base URL is wrong) or 1xx | `transport` | `error` |
//! | a reply: right answer | — | none |
//! | a reply: wrong, empty, reasoning only, or cut off | — | `wrong_answer` |
//!
//! `transport` means "no usable exchange", not "unreachable": whether the
//! host could be reached at all is [`TransportError::is_unreachable`], and
//! only that sets [`Outcome::unreachable`].
//!
//! `latency_ms` is the time to the full response when one arrived, and 0
//! otherwise (timeouts included), as docs/formats.md defines it ("0
//! when none came"). Every message passes through the [`Redactor`] before it is
//! cut to 200 characters, so a truncation can never leave half a key. How
//! long to wait after an error is [`crate::route::cooldown`]'s business; this
//! module only reads what the upstream said.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::outcome::{FailureType, Outcome, Timing, truncate_reason};
use crate::prompts::check_answer;
use crate::upstream::dialect::{self, ChatReply, Dialect, ProviderError, ReplyError, ReplyPlan};
use crate::upstream::hints;
use crate::upstream::http::{RawResponse, TransportError};
use crate::upstream::secret::Redactor;
use crate::upstream::streamed;

/// What kind of upstream failure an attempt met. Fine enough for `route` to
/// pick a cooldown; [`ErrorClass::failure_type`] folds it into the log's
/// five classes.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantNames,
    strum::EnumIter,
)]
#[strum(serialize_all = "snake_case")]
pub enum ErrorClass {
    RateLimit,
    QuotaExhausted,
    Auth,
    Payment,
    Forbidden,
    ModelNotFound,
    ContextLength,
    /// A 4xx naming a capability this model lacks (tools, JSON mode,
    /// images, …) or an output cap `max_tokens` is over
    /// ([`hints::capability`]): another model may take the request.
    Unsupported,
    BadRequest,
    Overloaded,
    ServerError,
    Timeout,
    Transport,
}

crate::names::serde_via_strum!(ErrorClass);

impl ErrorClass {
    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn parse(s: &str) -> Option<ErrorClass> {
        s.parse().ok()
    }

    /// The health log's `failure_type` for this class.
    pub fn failure_type(self) -> FailureType {
        match self {
            ErrorClass::RateLimit | ErrorClass::QuotaExhausted => FailureType::RateLimit,
            ErrorClass::Overloaded | ErrorClass::ServerError => FailureType::HttpError,
            ErrorClass::Timeout => FailureType::Timeout,
            ErrorClass::Auth
            | ErrorClass::Payment
            | ErrorClass::Forbidden
            | ErrorClass::ModelNotFound
            | ErrorClass::ContextLength
            | ErrorClass::Unsupported
            | ErrorClass::BadRequest
            | ErrorClass::Transport => FailureType::Error,
        }
    }

    /// The client's own request is at fault: `route` returns the error at
    /// once instead of trying another provider. A context overflow or an
    /// unsupported capability is the model's limit, not the request's
    /// fault: another model may take it.
    pub fn is_client_fault(self) -> bool {
        self == ErrorClass::BadRequest
    }

    /// The request asked for more than this model can take (a longer
    /// prompt, a capability, more output): `route` tries the next
    /// candidate without benching this one.
    pub fn is_capability(self) -> bool {
        matches!(self, ErrorClass::ContextLength | ErrorClass::Unsupported)
    }
}

impl std::fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An attempt that produced no usable reply.
#[derive(Debug, Clone, PartialEq)]
pub struct UpstreamError {
    /// The HTTP status, when a response arrived (200 for an error inside a
    /// success body).
    pub status: Option<u16>,
    pub class: ErrorClass,
    /// The wait the upstream named, if any ([`hints::retry_after`]). For
    /// a daily quota, only a reset named in a header
    /// ([`hints::daily_reset`]).
    pub retry_after: Option<Duration>,
    /// A per-day allowance is spent (only with `quota_exhausted`).
    pub daily: bool,
    /// A short reason (≤ 200 chars), already redacted.
    pub message: String,
}

impl UpstreamError {
    /// When the upstream said this failure ends, seen from `now`: the wait
    /// it named ([`UpstreamError::retry_after`], capped at
    /// [`hints::MAX_WAIT`]), or for a spent daily allowance without one, the
    /// next UTC midnight. `None` when it named no wait. Route benches until
    /// then; a probe records it as the model's `retry_at`.
    pub fn waits_until(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self.retry_after {
            Some(d) => Some(hints::after(now, d)),
            None if self.daily => Some(hints::next_utc_midnight(now)),
            None => None,
        }
    }
}

/// What a capability error says the model cannot take, read back from its
/// (redacted) message: `None` for any other class. A context overflow
/// whose message states no window is still a [`hints::Refusal::Context`].
pub fn capability_of(err: &UpstreamError) -> Option<hints::Refusal> {
    match err.class {
        ErrorClass::ContextLength => Some(hints::Refusal::Context(hints::context_window_stated(
            &err.message,
        ))),
        ErrorClass::Unsupported => hints::capability(&err.message),
        _ => None,
    }
}

/// What a probe makes of a usable reply: `Ok(())` passes, `Err(reason)`
/// is a wrong answer for that reason ([`answers`] for the plain probe, the
/// capability probes' own checks in `capabilities::probe`).
pub trait Judge: FnOnce(&ChatReply) -> Result<(), String> {}
impl<F: FnOnce(&ChatReply) -> Result<(), String>> Judge for F {}

/// The plain probe's judge: the reply's text answers `expected`
/// ([`check_answer`]).
pub fn answers(expected: i64) -> impl Judge {
    move |reply: &ChatReply| {
        if check_answer(&reply.text, expected) {
            Ok(())
        } else {
            Err(wrong_answer_reason(reply, expected))
        }
    }
}

/// A probe's exchange, classified: the log's outcome and, when the
/// upstream gave no usable reply, its error (whose class and message say,
/// for instance, which capability a 400 refused: [`capability_of`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Classified {
    pub outcome: Outcome,
    pub error: Option<UpstreamError>,
    /// The response's headers, when there was a response: the rate-limit
    /// headers a probe's ledger learns from ([`crate::usage::limits`]).
    pub headers: Option<reqwest::header::HeaderMap>,
    /// Requests sent to the provider: 2 when a streamed probe was refused
    /// and sent again unstreamed, for the ledger to count.
    pub requests: u32,
}

/// Classify the result of [`crate::upstream::http::send`] for a probe:
/// the reply, once `plan` has undone the dialect's translation, is judged
/// by `judge`.
pub fn classify(
    dialect: Dialect,
    result: &Result<RawResponse, TransportError>,
    plan: ReplyPlan,
    judge: impl Judge,
    redactor: &Redactor,
) -> Classified {
    match result {
        Ok(resp) => classify_response(dialect, resp, plan, judge, redactor),
        Err(e) => Classified {
            outcome: classify_transport(e, redactor),
            error: Some(transport_error(e, redactor)),
            headers: None,
            requests: 1,
        },
    }
}

/// A probe that produced no response.
pub fn classify_transport(err: &TransportError, redactor: &Redactor) -> Outcome {
    Outcome {
        unreachable: err.is_unreachable(),
        ..failed(&transport_error(err, redactor), 0)
    }
}

/// A probe's complete response, of any status.
pub fn classify_response(
    dialect: Dialect,
    resp: &RawResponse,
    plan: ReplyPlan,
    judge: impl Judge,
    redactor: &Redactor,
) -> Classified {
    let latency_ms = millis(resp.elapsed);
    // The clock the log's `ts` is written by: it dates an HTTP-date
    // Retry-After, and the explicit wait the outcome carries.
    let now = Utc::now();
    let mut reply = match read_response(dialect, resp, redactor, now) {
        Ok(reply) => reply,
        Err(e) => {
            return Classified {
                outcome: Outcome {
                    retry_at: e.waits_until(now),
                    ..failed(&e, latency_ms)
                },
                error: Some(e),
                headers: Some(resp.headers.clone()),
                requests: 1,
            };
        }
    };
    plan.apply(&mut reply);
    judged(
        &reply,
        judge,
        resp.status,
        latency_ms,
        &resp.headers,
        redactor,
    )
}

/// A reply's outcome: `judge` passes it, or it is a wrong answer.
fn judged(
    reply: &ChatReply,
    judge: impl Judge,
    status: u16,
    latency_ms: u64,
    headers: &reqwest::header::HeaderMap,
    redactor: &Redactor,
) -> Classified {
    let (failure, error) = match judge(reply) {
        Ok(()) => (None, None),
        Err(why) => (
            Some(FailureType::WrongAnswer),
            Some(truncate_reason(&redactor.redact(&why))),
        ),
    };
    Classified {
        outcome: Outcome {
            failure,
            latency_ms,
            status: Some(status),
            error,
            unreachable: false,
            retry_at: None,
            model_gone: false,
            timing: Default::default(),
        },
        error: None,
        headers: Some(headers.clone()),
        requests: 1,
    }
}

/// A duration in whole ms, rounded up: a response that took 0.4 ms must
/// not read as "no response", which is what 0 means in the log.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_micros().div_ceil(1000))
        .unwrap_or(u64::MAX)
        .max(1)
}

/// The shortest time from the first token to the end that a rate is
/// worked out over: an answer that came in one burst (a proxy that
/// buffers the stream) has no honest rate, and shows none.
pub const MIN_RATE_SPAN: std::time::Duration = std::time::Duration::from_millis(10);

/// A streamed probe's reply, read to its end
/// ([`crate::upstream::streamed`]): judged as a whole reply is, with its
/// timing. `tokens_per_s` is the output tokens after the first (the
/// upstream's count, else [`streamed::estimated_output_tokens`]) over the
/// time from the first content token to the end, when that is at least
/// [`MIN_RATE_SPAN`].
pub fn classify_streamed(
    s: &streamed::Streamed,
    judge: impl Judge,
    redactor: &Redactor,
) -> Classified {
    let latency_ms = millis(s.elapsed);
    if s.reply.finish_reason.as_deref() == Some("error") {
        return stream_event_error(
            s.status,
            &s.headers,
            &ProviderError {
                message: "generation failed upstream (finish_reason \"error\")".into(),
                ..ProviderError::default()
            },
            redactor,
        );
    }
    let r = &s.reply;
    if r.text.is_empty() && r.reasoning.is_none() && r.tool_calls.is_empty() && !r.truncated() {
        // What a whole body without choices, candidates or content is; a
        // stream does not tell those from an empty answer (which a whole
        // body gives as a wrong one). Cut off at `max_tokens`, it is the
        // model's unfinished answer, judged as such.
        let e = UpstreamError {
            status: Some(s.status),
            class: ErrorClass::Transport,
            retry_after: None,
            daily: false,
            message: "the stream held no reply: no choices, candidates or content".into(),
        };
        return Classified {
            outcome: failed(&e, latency_ms),
            error: Some(e),
            headers: Some(s.headers.clone()),
            requests: 1,
        };
    }
    let mut c = judged(&s.reply, judge, s.status, latency_ms, &s.headers, redactor);
    let output_tokens = s
        .reply
        .usage
        .and_then(|u| u.output_tokens)
        .unwrap_or_else(|| streamed::estimated_output_tokens(&s.reply.text));
    let after_first = s.first_token.map(|t| s.elapsed.saturating_sub(t));
    c.outcome.timing = Timing {
        ttft_ms: s.first_token.map(millis),
        output_tokens: Some(output_tokens),
        tokens_per_s: after_first
            .filter(|d| *d >= MIN_RATE_SPAN)
            .map(|d| output_tokens.saturating_sub(1) as f64 / d.as_secs_f64()),
    };
    c
}

/// A failure the upstream reported inside a stream, after its 2xx: as
/// an error inside a 2xx body is classed.
pub fn stream_event_error(
    status: u16,
    headers: &reqwest::header::HeaderMap,
    pe: &ProviderError,
    redactor: &Redactor,
) -> Classified {
    let e = UpstreamError {
        status: Some(status),
        class: class_for_embedded(pe, pe.message.as_bytes()),
        retry_after: None,
        daily: false,
        message: truncate_reason(&redactor.redact(&format!(
            "error in the stream: {}",
            describe_provider_error(pe)
        ))),
    };
    Classified {
        outcome: failed(&e, 0),
        error: Some(e),
        headers: Some(headers.clone()),
        requests: 1,
    }
}

/// The outcome of `e`, without the explicit wait (which needs a clock).
fn failed(e: &UpstreamError, latency_ms: u64) -> Outcome {
    Outcome {
        failure: Some(e.class.failure_type()),
        latency_ms,
        status: e.status,
        error: Some(e.message.clone()),
        unreachable: false,
        retry_at: None,
        model_gone: e.class == ErrorClass::ModelNotFound,
        timing: Default::default(),
    }
}

/// The upstream error in a complete response: `None` when it is a usable
/// 2xx reply (the tests' view of [`read_response`]).
#[cfg(test)]
pub fn upstream_error(
    dialect: Dialect,
    resp: &RawResponse,
    redactor: &Redactor,
    now: DateTime<Utc>,
) -> Option<UpstreamError> {
    read_response(dialect, resp, redactor, now).err()
}

/// A complete response as a reply, or as the upstream error it is.
pub fn read_response(
    dialect: Dialect,
    resp: &RawResponse,
    redactor: &Redactor,
    now: DateTime<Utc>,
) -> Result<ChatReply, UpstreamError> {
    read_reply(dialect, resp, redactor, now).map(|(reply, _)| reply)
}

/// [`read_response`], also keeping the body's parsed JSON (for `route`,
/// which passes it on to its client, so the body is parsed once).
pub fn read_reply(
    dialect: Dialect,
    resp: &RawResponse,
    redactor: &Redactor,
    now: DateTime<Utc>,
) -> Result<(ChatReply, serde_json::Value), UpstreamError> {
    let error = |class: ErrorClass, reason: &str| {
        let (retry_after, daily) = waits(class, resp, now);
        UpstreamError {
            status: Some(resp.status),
            class,
            retry_after,
            daily,
            message: truncate_reason(&redactor.redact(reason)),
        }
    };
    if !(200..300).contains(&resp.status) {
        let class = class_for_status(resp.status, &resp.body);
        let reason = format!("HTTP {}: {}", resp.status, describe_error_body(&resp.body));
        return Err(error(class, &reason));
    }
    let (reply, json) = match dialect::parse_success(dialect, &resp.body) {
        Ok(parsed) => parsed,
        Err(ReplyError::Embedded(pe)) => {
            let code = pe
                .embedded_status
                .map(|s| format!(" {s}"))
                .unwrap_or_default();
            let reason = format!(
                "HTTP {} with an error{code} in the body: {}",
                resp.status,
                describe_provider_error(&pe)
            );
            return Err(error(class_for_embedded(&pe, &resp.body), &reason));
        }
        Err(ReplyError::NotJson) => {
            let reason = format!("response is not JSON: {}", snippet(&resp.text()));
            return Err(error(ErrorClass::Transport, &reason));
        }
        Err(e) => return Err(error(ErrorClass::Transport, &e.to_string())),
    };
    if reply.finish_reason.as_deref() == Some("error") {
        return Err(error(
            ErrorClass::ServerError,
            "generation failed upstream (finish_reason \"error\")",
        ));
    }
    Ok((reply, json))
}

/// A request that produced no response.
pub fn transport_error(err: &TransportError, redactor: &Redactor) -> UpstreamError {
    let class = match err {
        TransportError::Timeout(_)
        | TransportError::ConnectTimeout(_)
        | TransportError::Stalled(_) => ErrorClass::Timeout,
        TransportError::Connect(_)
        | TransportError::Tls(_)
        | TransportError::Reset(_)
        | TransportError::TooLarge(_)
        | TransportError::Other(_) => ErrorClass::Transport,
    };
    UpstreamError {
        status: None,
        class,
        retry_after: None,
        daily: false,
        message: truncate_reason(&redactor.redact(&err.to_string())),
    }
}

/// The wait the upstream named, and whether a daily allowance is spent.
fn waits(class: ErrorClass, resp: &RawResponse, now: DateTime<Utc>) -> (Option<Duration>, bool) {
    if class == ErrorClass::QuotaExhausted && hints::is_daily_quota(&resp.body) {
        return (hints::daily_reset(&resp.headers, now), true);
    }
    (hints::retry_after(&resp.headers, &resp.body, now), false)
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

/// The class of a non-2xx response.
pub fn class_for_status(status: u16, body: &[u8]) -> ErrorClass {
    let said = Said::new(body);
    match status {
        408 => ErrorClass::Timeout,
        401 => ErrorClass::Auth,
        402 => ErrorClass::Payment,
        // Groq's 413 "Request too large … rate_limit_exceeded" is about
        // size, not rate, as is Anthropic's `request_too_large`.
        413 => ErrorClass::ContextLength,
        429 => limit_class(body),
        503 | 529 => ErrorClass::Overloaded,
        500..=599 if said.any(&["overloaded"]) => ErrorClass::Overloaded,
        500..=599 => ErrorClass::ServerError,
        400..=499 => {
            if said.code_is(&["api_key_invalid", "invalid_api_key"])
                || said.any(&["incorrect api key"])
            {
                ErrorClass::Auth
            } else if said.code_is(&["billing_error", "insufficient_balance"])
                || said.any(&[
                    "credit balance",
                    "insufficient balance",
                    "insufficient credits",
                ])
                || said.any(SPENT_CREDITS)
            {
                ErrorClass::Payment
            } else if said.is_missing_model() {
                ErrorClass::ModelNotFound
            } else if is_rate_limited(body) {
                limit_class(body)
            } else if let Some(c) = said
                .may_name_capability(status)
                .then(|| hints::capability(&said.lower))
                .flatten()
            {
                match c {
                    hints::Refusal::Context(_) => ErrorClass::ContextLength,
                    _ => ErrorClass::Unsupported,
                }
            } else if said.is_context_overflow() {
                ErrorClass::ContextLength
            } else if status == 403 && said.any(&["moderation", "flagged"]) {
                // OpenRouter refuses flagged input with a 403: the
                // request is at fault, not the key.
                ErrorClass::BadRequest
            } else {
                match status {
                    403 => ErrorClass::Forbidden,
                    404 | 410 => ErrorClass::ModelNotFound,
                    _ => ErrorClass::BadRequest,
                }
            }
        }
        // Redirects are never followed (see `http::client`), so a 3xx means
        // a wrong base URL: no usable exchange with this provider.
        _ => ErrorClass::Transport,
    }
}

/// The class of an error object that came with a 2xx status.
fn class_for_embedded(err: &ProviderError, body: &[u8]) -> ErrorClass {
    match err.embedded_status {
        Some(s) if !(200..300).contains(&s) => class_for_status(s, body),
        _ if is_rate_limited(body) => limit_class(body),
        _ if Said::new(body).any(&["overloaded"]) => ErrorClass::Overloaded,
        // docs/providers.md: an error after a 200 is an upstream 5xx.
        _ => ErrorClass::ServerError,
    }
}

/// xAI's words for a spent prepaid balance, which it sends as a 429 or a
/// 403: "Your team … has either used all available credits or reached its
/// monthly spending limit", or "You have run out of credits". Credits come
/// back when someone buys them, not when a window passes.
const SPENT_CREDITS: &[&str] = &[
    "used all available credits",
    "monthly spending limit",
    "run out of credits",
];

/// A rate limit, or a quota that will not come back within minutes.
fn limit_class(body: &[u8]) -> ErrorClass {
    // OpenAI's `insufficient_quota` is a spent balance, not a window.
    let said = Said::new(body);
    if said.any(&["insufficient_quota"]) || said.any(SPENT_CREDITS) || hints::is_daily_quota(body) {
        ErrorClass::QuotaExhausted
    } else {
        ErrorClass::RateLimit
    }
}

/// Quota or rate-limit wording, or Cloudflare's capacity codes.
fn is_rate_limited(body: &[u8]) -> bool {
    const WORDS: &[&str] = &[
        "quota",
        "rate limit",
        "rate_limit",
        "ratelimit",
        "resource_exhausted",
        "too many requests",
    ];
    let said = Said::new(body);
    said.any(WORDS) || said.code_is(&["3036", "3040"])
}

/// What an error body says, lowercased, with the provider's code.
struct Said {
    lower: String,
    code: String,
}

impl Said {
    fn new(body: &[u8]) -> Said {
        Said {
            // xAI has sent its messages URL-encoded ("Incorrect%20API%20key").
            lower: String::from_utf8_lossy(body)
                .to_lowercase()
                .replace("%20", " "),
            code: dialect::parse_error(body)
                .and_then(|e| e.code)
                .unwrap_or_default()
                .to_lowercase(),
        }
    }

    fn any(&self, words: &[&str]) -> bool {
        words.iter().any(|w| self.lower.contains(w))
    }

    fn code_is(&self, codes: &[&str]) -> bool {
        codes.contains(&self.code.as_str())
    }

    /// OpenAI `context_length_exceeded`, llama.cpp
    /// `exceed_context_size_error`, Anthropic "prompt is too long", Gemini
    /// "exceeds the maximum number of tokens", Together's (and TGI's)
    /// "`inputs` tokens + `max_new_tokens` must be <= N".
    fn is_context_overflow(&self) -> bool {
        self.code_is(&[
            "context_length_exceeded",
            "exceed_context_size_error",
            "request_too_large",
        ]) || self.any(&[
            "context length",
            "context_length",
            "context window",
            "context size",
            "maximum context",
            "prompt is too long",
            "input is too long",
            "maximum number of tokens",
            "`inputs` tokens",
        ])
    }

    /// Whether a refusal may be about what the model lacks: a 400 or a
    /// 422 (vLLM, TGI), or OpenRouter's 404 "No endpoints found that
    /// support tool use". Any other 403 or 404 is about the key or the
    /// model itself, whatever else its wording says.
    fn may_name_capability(&self, status: u16) -> bool {
        matches!(status, 400 | 422) || self.any(&["no endpoints found that support"])
    }

    /// The model does not exist (any more) at this provider: Groq
    /// `model_decommissioned`, Cloudflare 5007, OpenRouter "not a valid
    /// model ID", OpenAI `model_not_found`, Gemini "is not found for API
    /// version".
    fn is_missing_model(&self) -> bool {
        self.code_is(&["model_not_found", "model_decommissioned", "5007"])
            || (self.lower.contains("model")
                && self.any(&[
                    "not a valid model",
                    "no such model",
                    "model not found",
                    "does not exist",
                    "decommissioned",
                    // Gemini: "models/… is not found for API version v1beta,
                    // or is not supported for generateContent".
                    "is not found for api version",
                ]))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_has_no_rate_and_a_paced_stream_has_one() {
        let streamed = |first_ms: u64, end_ms: u64| streamed::Streamed {
            status: 200,
            headers: Default::default(),
            reply: crate::upstream::dialect::ChatReply {
                text: "1 2 3 4 5 6 7 8 9 10 11".into(),
                finish_reason: Some("stop".into()),
                usage: Some(crate::upstream::dialect::Usage {
                    output_tokens: Some(21),
                    ..Default::default()
                }),
                ..Default::default()
            },
            first_token: Some(std::time::Duration::from_millis(first_ms)),
            elapsed: std::time::Duration::from_millis(end_ms),
        };
        let judge = |_: &crate::upstream::dialect::ChatReply| Ok(());
        let burst = classify_streamed(&streamed(200, 203), judge, &Redactor::default());
        assert_eq!(burst.outcome.failure, None);
        assert_eq!(burst.outcome.timing.ttft_ms, Some(200));
        assert_eq!(burst.outcome.timing.output_tokens, Some(21));
        assert_eq!(burst.outcome.timing.tokens_per_s, None);
        let paced = classify_streamed(&streamed(200, 300), judge, &Redactor::default());
        // 20 tokens after the first, over 100 ms.
        assert_eq!(paced.outcome.timing.tokens_per_s, Some(200.0));
    }
    use crate::outcome::{UNREACHABLE, Verdict};
    use crate::upstream::hints::{is_daily_quota, retry_after};
    use crate::upstream::secret::Secret;
    use reqwest::header::HeaderMap;

    fn resp(status: u16, body: &str) -> RawResponse {
        RawResponse {
            status,
            headers: HeaderMap::new(),
            body: body.as_bytes().to_vec(),
            elapsed: Duration::from_millis(123),
        }
    }

    fn run(dialect: Dialect, status: u16, body: &str) -> Outcome {
        classify_response(
            dialect,
            &resp(status, body),
            ReplyPlan::default(),
            answers(14),
            &Redactor::default(),
        )
        .outcome
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
                retry_at: None,
                model_gone: false,
                timing: Default::default(),
            }
        );
    }

    /// The outcome of `status` with `body` and one `retry-after` header
    /// (none when `None`), and the clock before and after classifying.
    fn timed(
        dialect: Dialect,
        status: u16,
        retry_after: Option<&str>,
        body: &str,
    ) -> (Outcome, DateTime<Utc>, DateTime<Utc>) {
        let mut r = resp(status, body);
        if let Some(v) = retry_after {
            r.headers.insert("retry-after", v.parse().unwrap());
        }
        let before = Utc::now();
        let o = classify_response(
            dialect,
            &r,
            ReplyPlan::default(),
            answers(14),
            &Redactor::default(),
        )
        .outcome;
        (o, before, Utc::now())
    }

    #[test]
    fn a_failed_probe_carries_the_wait_the_upstream_named() {
        let secs = |n: i64| chrono::TimeDelta::seconds(n);
        let within = |o: &Outcome, b: DateTime<Utc>, a: DateTime<Utc>, wait: i64| {
            let at = o.retry_at.unwrap_or_else(|| panic!("no wait in {o:?}"));
            assert!(
                at >= b + secs(wait) && at <= a + secs(wait),
                "{at} not {wait}s after {b}..{a}"
            );
        };
        let busy = r#"{"error":{"message":"slow down","type":"requests"}}"#;
        // Retry-After in seconds.
        let (o, b, a) = timed(Dialect::Openai, 429, Some("600"), busy);
        assert_eq!(o.failure, Some(FailureType::RateLimit));
        within(&o, b, a, 600);
        // …as an HTTP date.
        let date = (Utc::now() + secs(300)).to_rfc2822();
        let (o, b, a) = timed(Dialect::Openai, 503, Some(&date), busy);
        assert_eq!(o.failure, Some(FailureType::HttpError));
        within(&o, b - secs(1), a, 300);
        // Gemini's retryDelay, and "try again in" wording.
        let minute = GEMINI_429_PER_DAY.replace("PerDay", "PerMinute");
        let (o, b, a) = timed(Dialect::Gemini, 429, None, &minute);
        within(&o, b, a, 7);
        let wording =
            r#"{"error":{"message":"Rate limit reached. Please try again in 20s. See the docs."}}"#;
        let (o, b, a) = timed(Dialect::Openai, 429, None, wording);
        within(&o, b, a, 20);
        // A spent daily quota: its header's reset, else the next UTC
        // midnight (never Gemini's per-minute retryDelay).
        let (o, b, _) = timed(Dialect::Gemini, 429, None, GEMINI_429_PER_DAY);
        let midnight = crate::upstream::hints::next_utc_midnight(b);
        assert!(o.retry_at == Some(midnight) || b.date_naive() != Utc::now().date_naive());
        let (o, b, a) = timed(Dialect::Gemini, 429, Some("3600"), GEMINI_429_PER_DAY);
        within(&o, b, a, 3600);
        // A bogus wait is capped at a day, as route caps it.
        let (o, b, a) = timed(Dialect::Openai, 429, Some("99999999"), busy);
        within(&o, b, a, 24 * 3600);
        // No wait named, a hard failure without one, and a pass: none.
        assert_eq!(timed(Dialect::Openai, 429, None, busy).0.retry_at, None);
        assert_eq!(timed(Dialect::Openai, 500, None, busy).0.retry_at, None);
        assert_eq!(
            timed(Dialect::Openai, 200, Some("60"), OPENAI_OK)
                .0
                .retry_at,
            None
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
            retry_after(&HeaderMap::new(), GEMINI_429_PER_DAY.as_bytes(), Utc::now()),
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
                retry_at: None,
                model_gone: false,
                timing: Default::default(),
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
        let o = classify_response(
            Dialect::Openai,
            &resp(401, &body),
            ReplyPlan::default(),
            answers(14),
            &redactor,
        )
        .outcome;
        let e = o.error.unwrap();
        assert!(!e.contains(key), "{e}");
        assert!(!e.contains("0a1b"), "{e}");
        assert!(
            e.starts_with("HTTP 401: Incorrect API key provided: [REDACTED]"),
            "{e}"
        );
        // Also in a wrong answer that repeats it.
        let body = OPENAI_OK.replace("\"14\"", &format!("\"{key}\""));
        let o = classify_response(
            Dialect::Openai,
            &resp(200, &body),
            ReplyPlan::default(),
            answers(14),
            &redactor,
        )
        .outcome;
        assert!(!o.error.unwrap().contains(key));
    }
}

/// The fine classes, from bodies as docs/providers.md records them.
#[cfg(test)]
mod class_tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-05-02T15:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn err_with(dialect: Dialect, status: u16, hs: &[(&str, &str)], body: &str) -> UpstreamError {
        let resp = RawResponse {
            status,
            headers: hs
                .iter()
                .map(|(k, v)| {
                    (
                        HeaderName::from_bytes(k.as_bytes()).unwrap(),
                        HeaderValue::from_str(v).unwrap(),
                    )
                })
                .collect::<HeaderMap>(),
            body: body.as_bytes().to_vec(),
            elapsed: Duration::from_millis(5),
        };
        upstream_error(dialect, &resp, &Redactor::default(), now()).expect("an error")
    }

    fn err(status: u16, body: &str) -> UpstreamError {
        err_with(Dialect::Openai, status, &[], body)
    }

    fn class(status: u16, body: &str) -> ErrorClass {
        err(status, body).class
    }

    #[test]
    fn names_round_trip_and_fold_into_the_log_classes() {
        for c in <ErrorClass as strum::IntoEnumIterator>::iter() {
            assert_eq!(ErrorClass::parse(c.as_str()), Some(c));
            assert_eq!(
                serde_json::to_string(&c).unwrap(),
                format!("\"{}\"", c.as_str())
            );
        }
        use ErrorClass::*;
        use FailureType as F;
        for (c, f, client) in [
            (RateLimit, F::RateLimit, false),
            (QuotaExhausted, F::RateLimit, false),
            (Auth, F::Error, false),
            (Payment, F::Error, false),
            (Forbidden, F::Error, false),
            (ModelNotFound, F::Error, false),
            (ContextLength, F::Error, false),
            (Unsupported, F::Error, false),
            (BadRequest, F::Error, true),
            (Overloaded, F::HttpError, false),
            (ServerError, F::HttpError, false),
            (Timeout, F::Timeout, false),
            (Transport, F::Error, false),
        ] {
            assert_eq!(c.failure_type(), f, "{c}");
            assert_eq!(c.is_client_fault(), client, "{c}");
        }
    }

    #[test]
    fn a_usable_reply_is_no_error() {
        let ok = r#"{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}"#;
        let resp = RawResponse {
            status: 200,
            headers: HeaderMap::new(),
            body: ok.as_bytes().to_vec(),
            elapsed: Duration::from_millis(5),
        };
        assert_eq!(
            upstream_error(Dialect::Openai, &resp, &Redactor::default(), now()),
            None
        );
    }

    #[test]
    fn openai_insufficient_quota_is_not_a_rate_limit() {
        let spent = err(
            429,
            r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#,
        );
        assert_eq!(spent.class, ErrorClass::QuotaExhausted);
        assert!(!spent.daily);
        assert_eq!(spent.status, Some(429));
        let limited = err_with(
            Dialect::Openai,
            429,
            &[("retry-after", "20")],
            r#"{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-x on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
        );
        assert_eq!(limited.class, ErrorClass::RateLimit);
        assert_eq!(limited.retry_after, Some(Duration::from_secs(20)));
        assert!(!limited.daily);
    }

    const GEMINI_PER_DAY: &str = r#"{"error":{"code":429,"message":"You exceeded your current quota.\nPlease retry in 7.81s.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaId":"GenerateRequestsPerDayPerProjectPerModel-FreeTier","quotaValue":"20"}]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"7s"}]}}"#;

    #[test]
    fn gemini_per_day_is_a_daily_quota_and_per_minute_a_rate_limit() {
        let day = err_with(Dialect::Gemini, 429, &[], GEMINI_PER_DAY);
        assert_eq!(day.class, ErrorClass::QuotaExhausted);
        assert!(day.daily);
        // The per-minute hint Gemini attaches is not a daily reset.
        assert_eq!(day.retry_after, None);
        let minute = GEMINI_PER_DAY.replace("PerDay", "PerMinute");
        let minute = err_with(Dialect::Gemini, 429, &[], &minute);
        assert_eq!(minute.class, ErrorClass::RateLimit);
        assert_eq!(minute.retry_after, Some(Duration::from_secs(7)));
    }

    #[test]
    fn daily_quotas_of_groq_and_cloudflare() {
        let groq = err_with(
            Dialect::Openai,
            429,
            &[("retry-after", "173")],
            r#"{"error":{"message":"Rate limit reached for model `llama-3.3-70b-versatile` in organization `org_01` service tier `on_demand` on tokens per day (TPD): Limit 100000, Used 99500, Requested 900. Please try again in 2m52.8s.","type":"tokens","code":"rate_limit_exceeded"}}"#,
        );
        assert_eq!(groq.class, ErrorClass::QuotaExhausted);
        assert!(groq.daily);
        // A reset the upstream names in a header is kept.
        assert_eq!(groq.retry_after, Some(Duration::from_secs(173)));
        let cf = err(
            429,
            r#"{"success":false,"errors":[{"code":3036,"message":"Account limited: you have used up your daily free allocation of 10,000 neurons."}],"messages":[],"result":null}"#,
        );
        assert_eq!(
            (cf.class, cf.daily, cf.retry_after),
            (ErrorClass::QuotaExhausted, true, None)
        );
    }

    #[test]
    fn capability_refusals_are_unsupported_and_name_what_is_missing() {
        use crate::upstream::dialect::Need;
        use hints::Refusal;
        for (status, body, want) in [
            (
                400,
                r#"{"error":{"message":"tools are not supported","type":"invalid_request_error"}}"#,
                Refusal::Lacks(Need::Tools),
            ),
            (
                400,
                r#"{"error":{"code":400,"message":"JSON mode is not enabled for models/gemma-3-27b-it","status":"INVALID_ARGUMENT"}}"#,
                Refusal::Lacks(Need::Json),
            ),
            (
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 65536 > 8192, which is the maximum allowed number of output tokens for claude-3-haiku-20240307"}}"#,
                Refusal::OutputCap(Some(8192)),
            ),
        ] {
            let e = err(status, body);
            assert_eq!(e.class, ErrorClass::Unsupported, "{body}");
            assert!(e.class.is_capability() && !e.class.is_client_fault());
            // Read back from the message the router keeps.
            assert_eq!(capability_of(&e), Some(want), "{}", e.message);
        }
        let e = err(
            400,
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
        );
        assert_eq!(capability_of(&e), Some(Refusal::Context(Some(8192))));
        let bad = err(
            400,
            r#"{"error":{"message":"Invalid value for 'temperature': must be <= 2.","type":"invalid_request_error"}}"#,
        );
        assert_eq!(
            (bad.class, capability_of(&bad)),
            (ErrorClass::BadRequest, None)
        );
    }

    #[test]
    fn only_a_400_or_422_refuses_a_capability_after_the_missing_model_check() {
        use crate::upstream::dialect::Need;
        use hints::Refusal;
        // The same refusal as a 422 (vLLM, TGI) is one; as a 403 or a
        // 404 it is about the key or the model, not what the model lacks.
        let tools =
            r#"{"error":{"message":"tools are not supported","type":"invalid_request_error"}}"#;
        assert_eq!(class(422, tools), ErrorClass::Unsupported);
        assert_eq!(class(403, tools), ErrorClass::Forbidden);
        assert_eq!(class(404, tools), ErrorClass::ModelNotFound);
        // A model that is gone, named with a need word in its id, or
        // refused in words that also say "not supported".
        for (status, body) in [
            (
                404,
                r#"{"error":{"code":404,"message":"models/gemini-2.0-flash-exp-image-generation is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods.","status":"NOT_FOUND"}}"#,
            ),
            (
                400,
                r#"{"error":{"code":400,"message":"models/gemini-2.0-flash-exp-image-generation is not found for API version v1beta, or is not supported for generateContent.","status":"INVALID_ARGUMENT"}}"#,
            ),
            (
                400,
                r#"{"error":{"message":"The model `whisper-audio-tools` does not exist or you do not have access to it; audio is not supported.","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#,
            ),
        ] {
            let e = err(status, body);
            assert_eq!(e.class, ErrorClass::ModelNotFound, "{body}");
            assert_eq!(capability_of(&e), None, "{body}");
        }
        // OpenRouter says a capability is missing with a 404.
        for (body, need) in [
            (
                r#"{"error":{"message":"No endpoints found that support tool use. Try disabling \"add\". To learn more about provider routing, visit: https://openrouter.ai/docs/provider-routing","code":404}}"#,
                Need::Tools,
            ),
            (
                r#"{"error":{"message":"No endpoints found that support image input","code":404}}"#,
                Need::Vision,
            ),
        ] {
            let e = err(404, body);
            assert_eq!(e.class, ErrorClass::Unsupported, "{body}");
            assert_eq!(capability_of(&e), Some(Refusal::Lacks(need)), "{body}");
        }
        // Its plain missing model stays one.
        assert_eq!(
            class(
                404,
                r#"{"error":{"message":"No endpoints found for meta-llama/llama-9-70b.","code":404}}"#
            ),
            ErrorClass::ModelNotFound
        );
    }

    #[test]
    fn a_bad_image_file_is_the_requests_fault() {
        let e = err(
            400,
            r#"{"error":{"message":"You uploaded an unsupported image. Please make sure your image is valid.","type":"invalid_request_error","param":null,"code":"invalid_image"}}"#,
        );
        assert_eq!((e.class, capability_of(&e)), (ErrorClass::BadRequest, None));
    }

    #[test]
    fn a_max_tokens_refusal_stating_the_context_window_is_about_context() {
        use hints::Refusal;
        // vLLM: 8192 is the whole window, not an output cap.
        let e = err(
            400,
            r#"{"object":"error","message":"'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 8192 tokens and your request has 500 input tokens (8000 > 8192 - 500). None","type":"BadRequestError","param":null,"code":400}"#,
        );
        assert_eq!(e.class, ErrorClass::ContextLength);
        assert_eq!(capability_of(&e), Some(Refusal::Context(Some(8192))));
    }

    #[test]
    fn size_and_context_errors_are_the_clients() {
        // Groq's 413 says rate_limit_exceeded but is about size.
        assert_eq!(
            class(
                413,
                r#"{"error":{"message":"Request too large for model `llama-3.1-8b-instant` on tokens per minute (TPM): Limit 6000, Requested 9000, please reduce your message size and try again.","type":"tokens","code":"rate_limit_exceeded"}}"#
            ),
            ErrorClass::ContextLength
        );
        // Together's context overflow is a 403.
        assert_eq!(
            class(
                403,
                r#"{"error":{"message":"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8193. Given: 9000 `inputs` tokens and 512 `max_new_tokens`","type":"invalid_request_error","param":null,"code":null}}"#
            ),
            ErrorClass::ContextLength
        );
        for body in [
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
            r#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}"#,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 215000 tokens > 200000 maximum"}}"#,
        ] {
            let e = err(400, body);
            assert_eq!(e.class, ErrorClass::ContextLength, "{body}");
            // Another model, with a larger window, may take it.
            assert!(!e.class.is_client_fault() && e.class.is_capability());
        }
        assert_eq!(
            class(
                400,
                r#"{"error":{"message":"Invalid value for 'temperature': must be <= 2.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}"#
            ),
            ErrorClass::BadRequest
        );
        assert_eq!(
            class(
                403,
                r#"{"error":{"code":403,"message":"Input was flagged by moderation","metadata":{"reasons":["harassment"]}}}"#
            ),
            ErrorClass::BadRequest
        );
    }

    #[test]
    fn key_problems() {
        assert_eq!(
            class(
                401,
                r#"{"error":{"message":"Incorrect API key provided","code":"invalid_api_key"}}"#
            ),
            ErrorClass::Auth
        );
        assert_eq!(
            err_with(
                Dialect::Gemini,
                400,
                &[],
                r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}"#
            )
            .class,
            ErrorClass::Auth
        );
        assert_eq!(
            class(
                402,
                r#"{"error":{"message":"Insufficient Balance","type":"unknown_error"}}"#
            ),
            ErrorClass::Payment
        );
        assert_eq!(
            err_with(
                Dialect::Anthropic,
                400,
                &[],
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}"#
            )
            .class,
            ErrorClass::Payment
        );
        assert_eq!(
            class(403, r#"{"error":{"message":"Forbidden"}}"#),
            ErrorClass::Forbidden
        );
    }

    /// xAI answers `{"code": <gRPC status text>, "error": <message>}`. The
    /// messages are as captured in public issue trackers (key fragments
    /// replaced); the `code` of the credit errors is inferred from the
    /// captured 400.
    #[test]
    fn xai_bad_keys_and_spent_credits() {
        // A bad key is a 400, not a 401: it must not read as the client's
        // own bad request, which route would return without falling back.
        for body in [
            r#"{"code":"Client specified an invalid argument","error":"Incorrect API key provided: xa***ke. You can obtain an API key from https://console.x.ai."}"#,
            r#"{"code":"Client specified an invalid argument","error":"Incorrect%20API%20key%20provided:%20xa***ke.%20You%20can%20obtain%20an%20API%20key%20from%20https://console.x.ai."}"#,
        ] {
            let e = err(400, body);
            assert_eq!(e.class, ErrorClass::Auth, "{body}");
            assert!(!e.class.is_client_fault());
            assert!(
                e.message.starts_with("HTTP 400: Incorrect"),
                "{}",
                e.message
            );
        }
        // Spent credits come as a 429 or a 403. As a 429 it is a spent
        // balance, like OpenAI's insufficient_quota: logged as a rate
        // limit, but not one that passes in minutes, nor at midnight.
        let spent = "Your team 0000aaaa-0000-0000-0000-00000000aaaa has either used all available credits or reached its monthly spending limit. To continue making API requests, please purchase more credits or raise your spending limit.";
        let body = |code: &str| format!(r#"{{"code":"{code}","error":"{spent}"}}"#);
        let e = err(429, &body("Some resource has been exhausted"));
        assert_eq!((e.class, e.daily), (ErrorClass::QuotaExhausted, false));
        assert_eq!(e.class.failure_type(), FailureType::RateLimit);
        let e = err(
            403,
            &body("The caller does not have permission to execute the specified operation"),
        );
        assert_eq!(e.class, ErrorClass::Payment);
        assert_eq!(
            class(
                403,
                r#"{"code":"The caller does not have permission to execute the specified operation","error":"You have run out of credits or need a Grok subscription."}"#
            ),
            ErrorClass::Payment
        );
        // A 429 without those words is still an ordinary rate limit.
        assert_eq!(
            class(
                429,
                r#"{"code":"Some resource has been exhausted","error":"Too many requests"}"#
            ),
            ErrorClass::RateLimit
        );
    }

    #[test]
    fn missing_models() {
        for (status, body) in [
            (
                404,
                r#"{"error":{"message":"The model `gpt-9` does not exist","type":"invalid_request_error","code":"model_not_found"}}"#,
            ),
            (
                400,
                r#"{"error":{"message":"The model `mixtral-8x7b-32768` has been decommissioned and is no longer supported.","type":"invalid_request_error","code":"model_decommissioned"}}"#,
            ),
            // Groq sends 400; a 404 with the same code is gone too.
            (
                404,
                r#"{"error":{"message":"The model `llama3-70b-8192` has been decommissioned and is no longer supported. Please refer to https://console.groq.com/docs/deprecations for a recommendation on which model to use instead.","type":"invalid_request_error","code":"model_decommissioned"}}"#,
            ),
            // Anthropic's word for a model it does not serve.
            (
                404,
                r#"{"type":"error","error":{"type":"not_found_error","message":"model: claude-3-sonnet-20240229"}}"#,
            ),
            (
                400,
                r#"{"success":false,"errors":[{"code":5007,"message":"No such model @cf/meta/llama-9 or task"}],"messages":[],"result":null}"#,
            ),
            (410, ""),
        ] {
            assert_eq!(class(status, body), ErrorClass::ModelNotFound, "{body}");
        }
    }

    #[test]
    fn overload_server_errors_and_timeouts() {
        let anthropic = err_with(
            Dialect::Anthropic,
            529,
            &[],
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert_eq!(anthropic.class, ErrorClass::Overloaded);
        assert_eq!(
            class(503, "<html><title>503</title></html>"),
            ErrorClass::Overloaded
        );
        assert_eq!(
            class(
                500,
                r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#
            ),
            ErrorClass::ServerError
        );
        assert_eq!(class(502, ""), ErrorClass::ServerError);
        assert_eq!(class(408, ""), ErrorClass::Timeout);
        assert_eq!(class(301, ""), ErrorClass::Transport);
    }

    #[test]
    fn errors_inside_a_200() {
        // OpenRouter: the embedded code decides.
        let e = err(
            200,
            r#"{"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"temporarily rate-limited upstream","provider_name":"Venice"}}}"#,
        );
        assert_eq!((e.class, e.status), (ErrorClass::RateLimit, Some(200)));
        assert_eq!(
            class(
                200,
                r#"{"error":{"message":"Provider returned error","code":502}}"#
            ),
            ErrorClass::ServerError
        );
        // No code at all: an upstream failure, as docs/providers.md says.
        assert_eq!(
            class(200, r#"{"error":{"message":"Internal error"}}"#),
            ErrorClass::ServerError
        );
        assert_eq!(
            class(
                200,
                r#"{"choices":[{"message":{"role":"assistant","content":""},"finish_reason":"error"}]}"#
            ),
            ErrorClass::ServerError
        );
        assert_eq!(
            class(200, "<html><body>hi</body></html>"),
            ErrorClass::Transport
        );
    }

    #[test]
    fn transport_classes() {
        let r = Redactor::default();
        for (e, c) in [
            (
                TransportError::Timeout(Duration::from_secs(30)),
                ErrorClass::Timeout,
            ),
            (
                TransportError::ConnectTimeout(Duration::from_secs(10)),
                ErrorClass::Timeout,
            ),
            (
                TransportError::Connect("connection refused".into()),
                ErrorClass::Transport,
            ),
            (
                TransportError::Tls("bad certificate".into()),
                ErrorClass::Transport,
            ),
            (
                TransportError::Reset("closed".into()),
                ErrorClass::Transport,
            ),
            (TransportError::TooLarge(1 << 20), ErrorClass::Transport),
        ] {
            let u = transport_error(&e, &r);
            assert_eq!((u.class, u.status, u.retry_after), (c, None, None), "{e}");
            assert_eq!(u.message, e.to_string());
        }
    }
}
