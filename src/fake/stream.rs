//! Streamed answers, in each upstream's own shape (PROVIDERS.md,
//! "Streaming"), and the ways a stream breaks after HTTP 200.
//!
//! An answer is first laid out as a list of [`Step`]s (events, comments, and
//! the point where a broken stream stops), then played out as the body. The
//! router's stream mapping is tested against these, so they follow captured
//! streams: OpenAI `chat.completion.chunk`s ending in `data: [DONE]` with an
//! OpenRouter `: keep-alive` comment, Anthropic's named events in their
//! documented order, Gemini's `alt=sse` events (or one JSON array without it).

use std::io;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::Dialect;

/// How the client asked for a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Server-sent events: `"stream": true`, or Gemini's `alt=sse`.
    Sse,
    /// Gemini's `:streamGenerateContent` without `alt=sse`: one JSON array,
    /// sent element by element.
    JsonArray,
}

/// How a stream ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// Whole, with the dialect's last event.
    Finish,
    /// After the first content chunk the connection closes.
    Cut,
    /// After the first content chunk comes an error event.
    Error,
    /// After the first content chunk nothing comes until the server shuts
    /// down; then the connection closes.
    Stall,
}

/// What a streamed answer says.
pub struct Answer<'a> {
    pub dialect: Dialect,
    pub model: &'a str,
    pub prompt: &'a str,
    pub text: &'a str,
    /// Stopped by the token limit.
    pub truncated: bool,
    /// No choices / content blocks / candidates at all.
    pub empty: bool,
    /// OpenAI `stream_options.include_usage`.
    pub include_usage: bool,
}

/// One thing the body does.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    /// An event: an optional SSE event name and its data.
    Data(Option<&'static str>, String),
    /// An SSE comment line, which clients must ignore.
    Comment(&'static str),
    /// The closing `]` of a JSON array stream.
    Close,
    /// Close the connection without ending the body.
    Cut,
    /// Wait for the server's shutdown, then close the connection.
    Stall,
}

/// The response for a streamed request.
pub fn respond(
    a: &Answer<'_>,
    mode: Mode,
    ending: Ending,
    shutdown: watch::Receiver<bool>,
) -> Response {
    let (mut steps, first_content) = whole(a);
    if ending != Ending::Finish {
        // A stream that breaks has sent some of the answer first.
        steps.truncate(first_content.map_or(steps.len(), |i| i + 1));
        steps.push(match ending {
            Ending::Cut => Step::Cut,
            Ending::Stall => Step::Stall,
            _ => Step::Data(error_event(a.dialect), error_data(a)),
        });
    }
    match mode {
        Mode::Sse => Sse::new(play(steps, shutdown, |_, step| match step {
            Step::Data(Some(name), data) => Event::default().event(name).data(data),
            Step::Data(None, data) => Event::default().data(data),
            Step::Comment(c) => Event::default().comment(c),
            // Not used in SSE.
            _ => Event::default().comment(""),
        }))
        .into_response(),
        Mode::JsonArray => {
            if ending != Ending::Cut && ending != Ending::Stall {
                steps.push(Step::Close);
            }
            let body = Body::from_stream(play(steps, shutdown, |i, step| match step {
                Step::Data(_, data) if i == 0 => Bytes::from(format!("[{data}")),
                Step::Data(_, data) => Bytes::from(format!(",\r\n{data}")),
                Step::Close => Bytes::from_static(b"]"),
                _ => Bytes::new(),
            }));
            let mut resp = Response::new(body);
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json; charset=UTF-8"),
            );
            resp
        }
    }
}

/// Turn steps into a body stream. `Cut` and `Stall` end it with an error,
/// which makes hyper drop the connection without the body's end (no final
/// empty chunk), as a crashed upstream would.
fn play<T: Send + 'static>(
    steps: Vec<Step>,
    shutdown: watch::Receiver<bool>,
    render: fn(usize, Step) -> T,
) -> impl Stream<Item = Result<T, io::Error>> + Send + 'static {
    futures_util::stream::unfold(
        (steps.into_iter().enumerate(), shutdown),
        move |(mut steps, mut shutdown)| async move {
            let (i, step) = steps.next()?;
            let item = match step {
                Step::Cut => {
                    // hyper writes the socket only when the body is pending:
                    // yield once so that what came before is sent, then cut.
                    tokio::task::yield_now().await;
                    Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "stream-cut: the fake provider drops the connection",
                    ))
                }
                Step::Stall => {
                    let _ = shutdown.wait_for(|stop| *stop).await;
                    Err(io::Error::other(
                        "stream-stall: the fake provider is shutting down",
                    ))
                }
                step => Ok(render(i, step)),
            };
            Some((item, (steps, shutdown)))
        },
    )
}

/// The text cut into at least two pieces, as a model streams tokens.
fn pieces(text: &str) -> Vec<&str> {
    let n = text.chars().count();
    let size = n.div_ceil(2).clamp(1, 16);
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let cut = rest.char_indices().nth(size).map_or(rest.len(), |(i, _)| i);
        out.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    while out.len() < 2 {
        out.push("");
    }
    out
}

fn tokens(a: &Answer<'_>) -> (usize, usize) {
    let input = a.prompt.split_whitespace().count() + 8;
    let output = if a.empty {
        0
    } else {
        a.text.split_whitespace().count().max(1)
    };
    (input, output)
}

fn data(v: Value) -> Step {
    Step::Data(None, v.to_string())
}

fn named(name: &'static str, v: Value) -> Step {
    Step::Data(Some(name), v.to_string())
}

/// The whole stream, and the index of its first content chunk (none for an
/// empty answer).
fn whole(a: &Answer<'_>) -> (Vec<Step>, Option<usize>) {
    let (input, output) = tokens(a);
    let pieces = pieces(a.text);
    let mut steps = Vec::new();
    let first_content;
    match a.dialect {
        Dialect::Openai => {
            let created = chrono::Utc::now().timestamp();
            let chunk = |choices: Value| {
                json!({
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": a.model,
                    "choices": choices,
                })
            };
            let choice = |delta: Value, finish: Value| json!([{"index": 0, "delta": delta, "finish_reason": finish}]);
            if a.empty {
                steps.push(data(chunk(json!([]))));
                first_content = None;
            } else {
                steps.push(data(chunk(choice(
                    json!({"role": "assistant", "content": ""}),
                    Value::Null,
                ))));
                steps.push(Step::Comment("keep-alive"));
                first_content = Some(steps.len());
                for p in &pieces {
                    steps.push(data(chunk(choice(json!({"content": p}), Value::Null))));
                }
                let reason = if a.truncated { "length" } else { "stop" };
                steps.push(data(chunk(choice(json!({}), json!(reason)))));
            }
            if a.include_usage {
                let mut last = chunk(json!([]));
                last["usage"] = json!({
                    "prompt_tokens": input,
                    "completion_tokens": output,
                    "total_tokens": input + output,
                });
                steps.push(data(last));
            }
            steps.push(Step::Data(None, "[DONE]".into()));
        }
        Dialect::Anthropic => {
            steps.push(named(
                "message_start",
                json!({"type": "message_start", "message": {
                    "id": "msg_fake",
                    "type": "message",
                    "role": "assistant",
                    "model": a.model,
                    "content": [],
                    "stop_reason": null,
                    "stop_sequence": null,
                    "usage": {"input_tokens": input, "output_tokens": 1},
                }}),
            ));
            if a.empty {
                first_content = None;
            } else {
                steps.push(named(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": 0,
                           "content_block": {"type": "text", "text": ""}}),
                ));
                steps.push(named("ping", json!({"type": "ping"})));
                first_content = Some(steps.len());
                for p in &pieces {
                    steps.push(named(
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": 0,
                               "delta": {"type": "text_delta", "text": p}}),
                    ));
                }
                steps.push(named(
                    "content_block_stop",
                    json!({"type": "content_block_stop", "index": 0}),
                ));
            }
            let reason = if a.truncated {
                "max_tokens"
            } else {
                "end_turn"
            };
            steps.push(named(
                "message_delta",
                json!({"type": "message_delta",
                       "delta": {"stop_reason": reason, "stop_sequence": null},
                       "usage": {"output_tokens": output}}),
            ));
            steps.push(named("message_stop", json!({"type": "message_stop"})));
        }
        Dialect::Gemini => {
            let usage = json!({
                "promptTokenCount": input,
                "candidatesTokenCount": output,
                "totalTokenCount": input + output,
            });
            if a.empty {
                steps.push(data(json!({
                    "candidates": [],
                    "usageMetadata": usage,
                    "modelVersion": a.model,
                })));
                first_content = None;
            } else {
                first_content = Some(0);
                let last = pieces.len() - 1;
                for (i, p) in pieces.iter().enumerate() {
                    let mut candidate = json!({
                        "content": {"role": "model", "parts": [{"text": p}]},
                        "index": 0,
                    });
                    let mut v = json!({"modelVersion": a.model});
                    if i == last {
                        candidate["finishReason"] =
                            json!(if a.truncated { "MAX_TOKENS" } else { "STOP" });
                        v["usageMetadata"] = usage.clone();
                    }
                    v["candidates"] = json!([candidate]);
                    steps.push(data(v));
                }
            }
        }
    }
    (steps, first_content)
}

fn error_event(dialect: Dialect) -> Option<&'static str> {
    (dialect == Dialect::Anthropic).then_some("error")
}

/// The error an upstream sends inside a stream that has already begun.
fn error_data(a: &Answer<'_>) -> String {
    match a.dialect {
        // OpenRouter: a chunk with a top-level error and finish_reason
        // "error".
        Dialect::Openai => json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": chrono::Utc::now().timestamp(),
            "model": a.model,
            "error": {"code": 502, "message": "Provider disconnected unexpectedly",
                      "type": "server_error"},
            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
        }),
        Dialect::Anthropic => json!({
            "type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"},
        }),
        Dialect::Gemini => json!({"error": {
            "code": 503,
            "message": "The model is overloaded. Please try again later.",
            "status": "UNAVAILABLE",
        }}),
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_into_at_least_two_pieces() {
        assert_eq!(pieces("42"), ["4", "2"]);
        assert_eq!(pieces("7"), ["7", ""]);
        assert_eq!(pieces(""), ["", ""]);
        assert_eq!(pieces("1234567"), ["1234", "567"]);
        let long = "<think>Let me work this out.</think> 42 é";
        assert!(pieces(long).len() >= 3);
        assert_eq!(pieces(long).concat(), long);
    }
}
