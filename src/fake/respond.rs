//! The bodies the fake provider sends whatever the dialect (garbage, HTML,
//! a cut-off body, OpenRouter's error-in-200), and the helpers the
//! per-dialect responders (`fake/responder.rs`) share.
//!
//! Shapes and messages follow captured responses (docs/providers.md) closely
//! enough that a classifier written against the fake also works against the
//! real providers: the same status codes, error types and wait hints.

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::responder::{DialectResponder, Usage};

/// The wait every rate limit asks for, in seconds.
pub const RETRY_SECS: u64 = 7;

/// About how much of its body the `reset` response sends; it announces twice
/// as much.
const RESET_SENT: usize = 512 << 10;

pub fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// An error body with the given status; an invalid status is sent as 500.
pub fn error_response(status: u16, body: &Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(status, body)
}

/// A completed answer with `text` as the model's output.
pub fn success(
    r: &dyn DialectResponder,
    model: &str,
    text: &str,
    truncated: bool,
    prompt: &str,
) -> Value {
    r.success(model, text, truncated, Usage::of(prompt, text))
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
pub fn empty(r: &dyn DialectResponder, model: &str) -> Value {
    let mut v = success(r, model, "", false, "");
    v[r.answers_field()] = json!([]);
    v
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

/// Groq's context overflow: OpenAI's code, with no window stated.
pub fn groq_context_length() -> Response {
    json_response(
        StatusCode::BAD_REQUEST,
        &json!({"error": {
            "message": "Please reduce the length of the messages or completion.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }}),
    )
}

/// Groq's 413 for a request over the key's tokens-per-minute limit: the
/// 6000 it names is a rate limit's, not the model's context window.
pub fn groq_tpm(model: &str) -> Response {
    json_response(
        StatusCode::PAYLOAD_TOO_LARGE,
        &json!({"error": {
            "message": format!(
                "Request too large for model `{model}` in organization `org_fake` service tier \
                 `on_demand` on tokens per minute (TPM): Limit 6000, Requested 9120, please \
                 reduce your message size and try again. Need more tokens? Upgrade to Dev Tier \
                 today at https://console.groq.com/settings/billing"
            ),
            "type": "tokens",
            "code": "rate_limit_exceeded",
        }}),
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

/// A valid answer padded to about `mib` MiB, for testing the client's body
/// cap. The padding is streamed in 64 KiB chunks, so the fake never holds
/// the whole body.
pub fn huge(answer: Value, mib: u64) -> Response {
    const CHUNK: usize = 64 << 10;
    let mut v = answer;
    v["fake_padding"] = Value::String(String::new());
    let text = v.to_string();
    // Split at the empty padding string: `…"fake_padding":"` + x… + `"…`.
    let at = text.find(r#""fake_padding":""#).map_or(0, |i| i + 16);
    let (head, tail) = (text[..at].to_string(), text[at..].to_string());
    let chunks = usize::try_from(mib)
        .unwrap_or(usize::MAX)
        .saturating_mul(16);
    let pad = Bytes::from(vec![b'x'; CHUNK]);
    let body = std::iter::once(Bytes::from(head))
        .chain(std::iter::repeat_n(pad, chunks))
        .chain(std::iter::once(Bytes::from(tail)))
        .map(Ok::<_, std::io::Error>);
    let mut resp = Response::new(Body::from_stream(futures_util::stream::iter(body)));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// 200 and JSON headers, then no body until `shutdown`; then the connection
/// closes without the body's end.
pub fn hang_headers(mut shutdown: watch::Receiver<bool>) -> Response {
    let body = futures_util::stream::once(async move {
        let _ = shutdown.wait_for(|s| *s).await;
        Err::<Bytes, _>(std::io::Error::other(
            "hang-headers: the fake provider is shutting down",
        ))
    });
    let mut resp = Response::new(Body::from_stream(body));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// `answer` sent one byte a second, until done or `shutdown`.
pub fn drip(answer: &Value, shutdown: watch::Receiver<bool>) -> Response {
    let bytes = answer.to_string().into_bytes();
    let body = futures_util::stream::unfold(
        (bytes.into_iter(), shutdown, true),
        |(mut bytes, mut shutdown, first)| async move {
            let b = bytes.next()?;
            if !first {
                let stopped = tokio::select! {
                    _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => false,
                    _ = shutdown.wait_for(|s| *s) => true,
                };
                if stopped {
                    let e = std::io::Error::other("drip: the fake provider is shutting down");
                    return Some((Err(e), (bytes, shutdown, false)));
                }
            }
            Some((Ok(Bytes::from(vec![b])), (bytes, shutdown, false)))
        },
    );
    let mut resp = Response::new(Body::from_stream(body));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// A 200 answer in JSON whose answer text holds bytes that are not UTF-8.
pub fn bad_utf8(answer: &Value, text: &str) -> Response {
    let body = answer.to_string();
    // Put the bad bytes in front of the answer's text, inside its string.
    let quoted = serde_json::to_string(text).unwrap_or_default();
    let mut out = Vec::with_capacity(body.len() + 4);
    match body.find(&quoted) {
        Some(i) => {
            out.extend_from_slice(&body.as_bytes()[..=i]);
            out.extend_from_slice(b"\xff\xfe\xc3");
            out.extend_from_slice(&body.as_bytes()[i + 1..]);
        }
        None => {
            out.extend_from_slice(body.as_bytes());
            out.extend_from_slice(b"\xff\xfe");
        }
    }
    let mut resp = Response::new(Body::from(out));
    *resp.status_mut() = StatusCode::OK;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
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
