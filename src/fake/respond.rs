//! The bodies the fake provider sends, in each dialect's own shape.
//!
//! Shapes and messages follow captured responses (PROVIDERS.md) closely
//! enough that a classifier written against the fake also works against the
//! real providers: the same status codes, error types and wait hints.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::Dialect;

/// The wait every rate limit asks for, in seconds.
pub const RETRY_SECS: u64 = 7;

/// About how much of its body the `reset` response sends; it announces twice
/// as much.
const RESET_SENT: usize = 512 << 10;

/// About 8 MiB, the size of the `huge` body.
const HUGE_BYTES: usize = 8 << 20;

pub fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// A completed answer with `text` as the model's output.
pub fn success(dialect: Dialect, model: &str, text: &str, truncated: bool, prompt: &str) -> Value {
    let input_tokens = prompt.split_whitespace().count() + 8;
    let output_tokens = text.split_whitespace().count().max(1);
    match dialect {
        Dialect::Openai => json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": chrono::Utc::now().timestamp(),
            "model": model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": if truncated { "length" } else { "stop" },
            }],
            "usage": {
                "prompt_tokens": input_tokens,
                "completion_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
            },
        }),
        Dialect::Anthropic => json!({
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": if truncated { "max_tokens" } else { "end_turn" },
            "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        }),
        Dialect::Gemini => json!({
            "candidates": [{
                "content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": if truncated { "MAX_TOKENS" } else { "STOP" },
                "index": 0,
            }],
            "usageMetadata": {
                "promptTokenCount": input_tokens,
                "candidatesTokenCount": output_tokens,
                "totalTokenCount": input_tokens + output_tokens,
            },
            "modelVersion": model,
        }),
    }
}

/// OpenAI's request-bucket headers for a limit of `n` a minute, one request
/// of which this answer used.
pub fn rpm_headers(h: &mut axum::http::HeaderMap, n: u64) {
    for (name, value) in [
        ("x-ratelimit-limit-requests", n.to_string()),
        ("x-ratelimit-remaining-requests", (n - 1).to_string()),
        ("x-ratelimit-reset-requests", "1m0s".to_string()),
    ] {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    }
}

/// A 200 that carries no answer at all.
pub fn empty(dialect: Dialect, model: &str) -> Value {
    let mut v = success(dialect, model, "", false, "");
    match dialect {
        Dialect::Openai => v["choices"] = json!([]),
        Dialect::Anthropic => v["content"] = json!([]),
        Dialect::Gemini => v["candidates"] = json!([]),
    }
    v
}

/// An error in the dialect's shape. `kind` is the OpenAI `type` / Anthropic
/// `error.type`; `gemini_status` is Google's canonical status name.
fn error_body(
    dialect: Dialect,
    status: StatusCode,
    kind: &str,
    code: Option<&str>,
    gemini_status: &str,
    message: &str,
) -> Value {
    match dialect {
        Dialect::Openai => json!({
            "error": {"message": message, "type": kind, "param": null, "code": code}
        }),
        Dialect::Anthropic => json!({
            "type": "error",
            "error": {"type": kind, "message": message},
        }),
        Dialect::Gemini => json!({
            "error": {"code": status.as_u16(), "message": message, "status": gemini_status}
        }),
    }
}

fn error(
    dialect: Dialect,
    status: u16,
    kind: &str,
    code: Option<&str>,
    gemini_status: &str,
    message: &str,
) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(
        status,
        &error_body(dialect, status, kind, code, gemini_status, message),
    )
}

/// A malformed request, rejected the way the real provider would.
pub fn bad_request(dialect: Dialect, message: &str) -> Response {
    error(
        dialect,
        400,
        "invalid_request_error",
        None,
        "INVALID_ARGUMENT",
        message,
    )
}

pub fn rate_limit(dialect: Dialect) -> Response {
    let mut resp = match dialect {
        Dialect::Openai => error(
            dialect,
            429,
            "requests",
            Some("rate_limit_exceeded"),
            "",
            &format!(
                "Rate limit reached for requests per min (RPM): Limit 30, Used 30, \
                 Requested 1. Please try again in {RETRY_SECS}s."
            ),
        ),
        Dialect::Anthropic => error(
            dialect,
            429,
            "rate_limit_error",
            None,
            "",
            "This request would exceed the rate limit for your organization of 50 \
             requests per minute.",
        ),
        // Gemini sends no header; the wait is only in the body.
        Dialect::Gemini => {
            return json_response(
                StatusCode::TOO_MANY_REQUESTS,
                &json!({"error": {
                    "code": 429,
                    "message": format!(
                        "You exceeded your current quota, please check your plan and billing \
                         details. Please retry in {RETRY_SECS}s."
                    ),
                    "status": "RESOURCE_EXHAUSTED",
                    "details": [
                        {
                            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                            "violations": [{
                                "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                                "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                            }],
                        },
                        {
                            "@type": "type.googleapis.com/google.rpc.RetryInfo",
                            "retryDelay": format!("{RETRY_SECS}s"),
                        },
                    ],
                }}),
            );
        }
    };
    resp.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_SECS));
    resp
}

pub fn e500(dialect: Dialect) -> Response {
    let msg = match dialect {
        Dialect::Openai => {
            "The server had an error while processing your request. Sorry about that!"
        }
        Dialect::Anthropic => "Internal server error",
        Dialect::Gemini => "An internal error has occurred. Please retry or report the problem.",
    };
    let kind = match dialect {
        Dialect::Anthropic => "api_error",
        _ => "server_error",
    };
    error(dialect, 500, kind, None, "INTERNAL", msg)
}

pub fn overloaded(dialect: Dialect) -> Response {
    let msg = match dialect {
        Dialect::Gemini => "The model is overloaded. Please try again later.",
        _ => "Overloaded",
    };
    error(
        dialect,
        529,
        "overloaded_error",
        Some("overloaded"),
        "UNAVAILABLE",
        msg,
    )
}

pub fn e503(dialect: Dialect) -> Response {
    let (kind, msg) = match dialect {
        Dialect::Openai => ("server_error", "The server is overloaded or not ready yet."),
        Dialect::Anthropic => ("api_error", "Service unavailable"),
        Dialect::Gemini => ("", "The model is overloaded. Please try again later."),
    };
    error(dialect, 503, kind, None, "UNAVAILABLE", msg)
}

pub fn unauthorized(dialect: Dialect) -> Response {
    match dialect {
        Dialect::Openai => error(
            dialect,
            401,
            "invalid_request_error",
            Some("invalid_api_key"),
            "",
            "Incorrect API key provided. You can find your API key at \
             https://platform.openai.com/account/api-keys.",
        ),
        Dialect::Anthropic => error(
            dialect,
            401,
            "authentication_error",
            None,
            "",
            "invalid x-api-key",
        ),
        // Google answers a bad key with 400, not 401 (PROVIDERS.md).
        Dialect::Gemini => json_response(
            StatusCode::BAD_REQUEST,
            &json!({"error": {
                "code": 400,
                "message": "API key not valid. Please pass a valid API key.",
                "status": "INVALID_ARGUMENT",
                "details": [{
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                    "metadata": {"service": "generativelanguage.googleapis.com"},
                }],
            }}),
        ),
    }
}

pub fn forbidden(dialect: Dialect) -> Response {
    let (kind, msg) = match dialect {
        Dialect::Openai => (
            "invalid_request_error",
            "You are not allowed to sample from this model.",
        ),
        Dialect::Anthropic => (
            "permission_error",
            "Your API key does not have permission to use the specified resource.",
        ),
        Dialect::Gemini => ("", "Permission denied: this project cannot use this model."),
    };
    error(dialect, 403, kind, None, "PERMISSION_DENIED", msg)
}

pub fn context_length(dialect: Dialect) -> Response {
    match dialect {
        Dialect::Openai => error(
            dialect,
            400,
            "invalid_request_error",
            Some("context_length_exceeded"),
            "",
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens. Please reduce the length of the messages.",
        ),
        Dialect::Anthropic => error(
            dialect,
            400,
            "invalid_request_error",
            None,
            "",
            "prompt is too long: 210000 tokens > 200000 maximum",
        ),
        Dialect::Gemini => error(
            dialect,
            400,
            "",
            None,
            "INVALID_ARGUMENT",
            "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
        ),
    }
}

pub fn not_found(dialect: Dialect, model: &str) -> Response {
    match dialect {
        Dialect::Openai => error(
            dialect,
            404,
            "invalid_request_error",
            Some("model_not_found"),
            "",
            &format!("The model `{model}` does not exist or you do not have access to it."),
        ),
        Dialect::Anthropic => error(
            dialect,
            404,
            "not_found_error",
            None,
            "",
            &format!("model: {model}"),
        ),
        Dialect::Gemini => error(
            dialect,
            404,
            "",
            None,
            "NOT_FOUND",
            &format!(
                "models/{model} is not found for API version v1beta, or is not supported \
                 for generateContent."
            ),
        ),
    }
}

/// A 401 that quotes the key back, as some providers do. Redaction must
/// catch this before it reaches a log.
pub fn echo_key(dialect: Dialect, key: &str) -> Response {
    match dialect {
        Dialect::Openai => error(
            dialect,
            401,
            "invalid_request_error",
            Some("invalid_api_key"),
            "",
            &format!(
                "Incorrect API key provided: {key}. You can find your API key at \
                 https://platform.openai.com/account/api-keys."
            ),
        ),
        Dialect::Anthropic => error(
            dialect,
            401,
            "authentication_error",
            None,
            "",
            &format!("invalid x-api-key: {key}"),
        ),
        Dialect::Gemini => error(
            dialect,
            401,
            "",
            None,
            "UNAUTHENTICATED",
            &format!("API key not valid: {key}. Please pass a valid API key."),
        ),
    }
}

/// OpenRouter's habit: status 200, error in the body.
pub fn error_in_200() -> Response {
    json_response(
        StatusCode::OK,
        &json!({
            "error": {
                "code": 429,
                "message": "Provider returned error",
                "metadata": {
                    "raw": "{\"error\":{\"message\":\"Rate limit exceeded upstream\"}}",
                    "provider_name": "FakeUpstream",
                },
            },
            "user_id": "user_fake",
        }),
    )
}

pub fn garbage() -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        "upstream said: <<not json>> {{{ \u{1}",
    )
        .into_response()
}

pub fn html(status: StatusCode) -> Response {
    let page = if status == StatusCode::OK {
        "<!DOCTYPE html><html><head><title>Sign in</title></head><body>\
         <h1>Welcome</h1><p>Please sign in to continue.</p></body></html>"
    } else {
        "<html><head><title>502 Bad Gateway</title></head><body>\
         <h1>502 Bad Gateway</h1><hr><center>nginx</center></body></html>"
    };
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        page,
    )
        .into_response()
}

/// A valid answer padded to about 8 MiB, for testing the client's body cap.
pub fn huge(answer: Value) -> Response {
    let mut v = answer;
    v["fake_padding"] = Value::String("x".repeat(HUGE_BYTES));
    json_response(StatusCode::OK, &v)
}

/// Announce a long body, send part of it, then end: the client gets the
/// status line, headers and some body, then the connection closes under it.
///
/// The stream body has no known length, so hyper trusts the header, finds the
/// body short and aborts the connection. The part sent is larger than hyper's
/// write buffer (about 408 KiB) because hyper only flushes to the socket when
/// that buffer is full; a short fragment would be discarded together with the
/// headers, and the client would see no response at all.
pub fn reset() -> Response {
    let mut part = String::from(r#"{"id":"chatcmpl-fake","choices":[{"message":{"content":""#);
    part.push_str(&" ".repeat(RESET_SENT));
    let body = Body::from_stream(Body::from(part).into_data_stream());
    let mut resp = Response::new(body);
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(2 * RESET_SENT));
    resp
}
