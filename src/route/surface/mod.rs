//! Inbound surfaces: the API shapes clients speak to `route --serve`. A
//! surface parses its requests into a [`ChatRequest`](crate::upstream::dialect::ChatRequest),
//! and renders the engine's answers (replies, stream events, and
//! [`RouteError`](crate::route::domain::RouteError)s) in its own shape. The
//! engine never learns which surface a request came from; the server only
//! mounts each surface's handlers.
//!
//! [`openai`] is OpenAI chat completions; siblings for other APIs sit
//! beside it and share [`JsonBody`] (the body, read within
//! [`BodyLimit`]), [`error::ApiError`] (an error in no particular shape:
//! status, message, OpenAI's type and code, retry time; each surface
//! renders it), [`openai_finish_reason`] (the four finishes every
//! surface maps from), the SSE writers ([`sse_event`], [`sse_response`];
//! and [`event_stream`], [`Chunks`] and [`TokenUsage`] for the `data:`-only
//! streams of OpenAI's chat and legacy completions) and the server's
//! routing helpers (`serve::complete`, `serve::open`, `serve::Routed`).
//! Replies and events are typed `Serialize` models written straight to
//! bytes. A new surface implements:
//!
//! - a body extractor that parses its request into a `ChatRequest`, with
//!   rejections in its own error shape;
//! - its error shape for a [`RouteError`](crate::route::domain::RouteError)
//!   (status, type, code, retry time);
//! - a reply renderer from [`Completion`](crate::route::send::Completion)'s
//!   `ChatReply` (passing `body` on as it came when the upstream speaks the
//!   surface's dialect);
//! - a stream writer from [`StreamEvent`](crate::route::domain::StreamEvent)s:
//!   the deltas (start, text, reasoning, finish), the usage event (shown
//!   only if its client asks), a failure, the end; and `Raw` chunks, ahead
//!   of their deltas, to forward in place of them when the upstream speaks
//!   the surface's dialect. Usage correction and failure
//!   accounting are the engine's, for every surface
//!   (`Engine::watch_stream`).

pub mod anthropic;
pub mod calls;
pub mod chat_wire;
#[cfg(test)]
mod client_fields;
pub mod completions;
pub mod error;
pub mod lenient;
pub mod openai;
pub mod responses;

use axum::body::Bytes;
use axum::extract::{FromRef, FromRequest, Request};
use axum::http::{HeaderMap, StatusCode, header};

use serde::Serialize;

use crate::route::domain::StreamEvent;
use crate::upstream::dialect::Usage;

use error::{ApiError, ErrorKind};

/// What a surface left out of a request, for `X-Llmprobe-Dropped`: each
/// name once, in the order first met. A set beside the list keeps a body
/// of a hundred thousand unknown fields linear.
#[derive(Debug, Default)]
pub struct Dropped {
    names: Vec<String>,
    seen: std::collections::HashSet<String>,
}

impl Dropped {
    pub fn add(&mut self, name: impl Into<String>) {
        let name = name.into();
        if !self.seen.contains(&name) {
            self.seen.insert(name.clone());
            self.names.push(name);
        }
    }

    pub fn into_vec(self) -> Vec<String> {
        self.names
    }
}

/// What every surface's body extractor needs from the server's state: the
/// body size limit, to say it in the rejection, and how long a client has
/// to send the whole body (`[route] read_timeout_secs`).
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit(pub usize, pub std::time::Duration);

/// A request body sent as JSON (`Content-Type: application/json`) within
/// the body limit, not yet parsed. Its rejections are [`ApiError`]s, which
/// each surface renders in its own shape (take `Result<JsonBody,
/// ApiError>` in a handler to do so).
#[derive(Debug)]
pub struct JsonBody(pub Bytes);

impl<S> FromRequest<S> for JsonBody
where
    S: Send + Sync,
    BodyLimit: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<JsonBody, ApiError> {
        let is_json = is_json(req.headers());
        let BodyLimit(_, within) = BodyLimit::from_ref(state);
        // A client that sends its body slowly, or stops halfway, holds its
        // connection only this long.
        let read = tokio::time::timeout(within, Bytes::from_request(req, state)).await;
        let Ok(read) = read else {
            return Err(error::body_timeout(within));
        };
        let body = match read {
            Ok(b) => b,
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                return Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    ErrorKind::InvalidRequest,
                    "request_too_large",
                    format!(
                        "request body exceeds {} bytes",
                        BodyLimit::from_ref(state).0
                    ),
                ));
            }
            Err(e) => {
                return Err(ApiError::invalid(
                    "invalid_body",
                    format!("cannot read the request body: {e}"),
                ));
            }
        };
        if !is_json {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                ErrorKind::InvalidRequest,
                "unsupported_media_type",
                "send the request as Content-Type: application/json",
            ));
        }
        Ok(JsonBody(body))
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

/// A `text/event-stream` response (`Cache-Control: no-cache`) whose body
/// is `chunks`, each one or more whole events: the OpenAI-style surfaces
/// write their own `data:` and `event:` lines (Anthropic's uses axum's
/// `Sse`, for its keep-alive pings).
pub fn sse_response(
    chunks: impl futures_util::Stream<Item = String> + Send + 'static,
) -> axum::response::Response {
    let body = futures_util::StreamExt::map(chunks, |text| {
        Ok::<Bytes, std::convert::Infallible>(Bytes::from(text))
    });
    let mut resp = axum::response::Response::new(axum::body::Body::from_stream(body));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("text/event-stream"),
    );
    h.insert(
        header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-cache"),
    );
    resp
}

/// One server-sent event: `event: <name>` when named, then `data:` and
/// the JSON, then the blank line. The JSON is written straight into the
/// event's bytes (`serde_json::to_writer`), which costs about half what
/// formatting a `Value` with `Display` does, and a typed model is not
/// built as a `Value` first.
pub fn sse_event<T: Serialize + ?Sized>(name: Option<&str>, data: &T) -> String {
    let mut out = Vec::with_capacity(256);
    if let Some(name) = name {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"data: ");
    // The wire models have string keys only, and writing into a Vec
    // cannot fail.
    let _ = serde_json::to_writer(&mut out, data);
    out.extend_from_slice(b"\n\n");
    // JSON text is UTF-8, as are the names.
    String::from_utf8(out).unwrap_or_default()
}

/// The event that ends every `data:`-only stream (OpenAI's chat and
/// legacy completions).
pub const SSE_DONE: &str = "data: [DONE]\n\n";

/// What writes a served stream's events as `data:`-only events, the
/// stream shape of both OpenAI APIs: chat completion chunks
/// ([`openai::ChunkWriter`]) or text completion ones
/// ([`completions::TextWriter`]).
pub trait Chunks {
    /// The `data:` event `ev` becomes, if any; the end and failures are
    /// written by [`event_stream`].
    fn chunk(&mut self, ev: StreamEvent) -> Option<String>;
}

/// A served stream as a `data:`-only `text/event-stream` response:
/// chunks as [`Chunks`] writes them, a failure as an OpenAI error event
/// ([`error::stream_error`]), and `data: [DONE]` last.
pub fn event_stream(
    events: impl futures_util::Stream<Item = StreamEvent> + Send + 'static,
    mut writer: impl Chunks + Send + 'static,
) -> axum::response::Response {
    let body = futures_util::StreamExt::filter_map(events, move |ev| {
        let out = match ev {
            StreamEvent::Done => Some(SSE_DONE.to_string()),
            StreamEvent::Failed(msg) => Some(error::stream_error(&msg)),
            // The engine turns a stall into a failure with its words.
            StreamEvent::Stalled => None,
            ev => writer.chunk(ev),
        };
        std::future::ready(out)
    });
    sse_response(body)
}

/// The `usage` object of OpenAI's chat and legacy completions, when both
/// counts are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TokenUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

impl TokenUsage {
    pub fn of(u: Usage) -> Option<TokenUsage> {
        let (Some(p), Some(c)) = (u.input_tokens, u.output_tokens) else {
            return None;
        };
        Some(TokenUsage {
            prompt_tokens: p,
            completion_tokens: c,
            total_tokens: p + c,
        })
    }
}

/// Seconds since the Unix epoch, for `created`.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A provider's finish or stop reason as one of OpenAI's: `stop`,
/// `length`, `content_filter` or `tool_calls`. Anything unrecognised ends
/// normally, as `stop`. Every surface maps from these four, whatever its
/// own words for them.
pub fn openai_finish_reason(reason: &str) -> &'static str {
    match reason {
        "length" | "max_tokens" | "MAX_TOKENS" | "model_context_window_exceeded" => "length",
        "content_filter" | "refusal" | "SAFETY" | "RECITATION" | "BLOCKLIST"
        | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => "content_filter",
        "tool_calls" | "function_call" | "tool_use" => "tool_calls",
        _ => "stop",
    }
}

/// Which error shape a request gets where no handler of its own answers
/// (auth, unknown paths, methods, oversized heads): Anthropic's for its
/// paths and for any request with `anthropic-version`, OpenAI's otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    OpenAi,
    Anthropic,
}

impl Shape {
    pub fn of(path: &str, headers: &HeaderMap) -> Shape {
        if path.starts_with("/v1/messages") || headers.contains_key("anthropic-version") {
            Shape::Anthropic
        } else {
            Shape::OpenAi
        }
    }

    /// `e` as this shape's error response.
    pub fn error(
        self,
        e: ApiError,
        now: chrono::DateTime<chrono::Utc>,
    ) -> axum::response::Response {
        match self {
            Shape::OpenAi => e.into_response_at(now),
            Shape::Anthropic => anthropic::error_response(e, now),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_reasons_map_to_openai_values() {
        for (from, to) in [
            ("end_turn", "stop"),
            ("stop_sequence", "stop"),
            ("STOP", "stop"),
            ("stop", "stop"),
            ("max_tokens", "length"),
            ("MAX_TOKENS", "length"),
            ("length", "length"),
            ("SAFETY", "content_filter"),
            ("RECITATION", "content_filter"),
            ("refusal", "content_filter"),
            ("tool_use", "tool_calls"),
            ("tool_calls", "tool_calls"),
            ("FINISH_REASON_UNSPECIFIED", "stop"),
        ] {
            assert_eq!(openai_finish_reason(from), to, "{from}");
        }
    }
}
