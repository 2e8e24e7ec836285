//! Streamed answers, in each upstream's own shape (docs/providers.md,
//! "Streaming"), and the ways a stream breaks after HTTP 200.
//!
//! An answer is first laid out as a list of [`Step`]s (events, comments, and
//! the point where a broken stream stops) by the dialect's responder
//! (`fake/responder.rs`), then played out here as the body. The
//! router's stream mapping is tested against these, so they follow captured
//! streams: OpenAI `chat.completion.chunk`s ending in `data: [DONE]` with an
//! OpenRouter `: keep-alive` comment, Anthropic's named events in their
//! documented order, Gemini's `alt=sse` events (or one JSON array without it).

use std::io;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde_json::Value;
use tokio::sync::watch;

use super::asks::ToolCall;

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
    /// Everything but the last event, then the body ends cleanly.
    NoDone,
    /// Everything but the last event, then nothing until the server shuts
    /// down.
    NoDoneHang,
}

/// What a streamed answer says.
pub struct Answer<'a> {
    pub model: &'a str,
    pub prompt: &'a str,
    /// The answer's text; for a tool call, its arguments' JSON text.
    pub text: &'a str,
    /// The answer calls this tool instead of answering in text.
    pub tool: Option<&'a ToolCall>,
    /// Stopped by the token limit.
    pub truncated: bool,
    /// No choices / content blocks / candidates at all.
    pub empty: bool,
    /// OpenAI `stream_options.include_usage`.
    pub include_usage: bool,
}

/// One thing the body does.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
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

/// The response for a streamed request: `steps` is the whole stream as the
/// dialect lays it out, `first_content` the index of its first content
/// chunk, and `error` the event that a stream ending in [`Ending::Error`]
/// sends after it.
pub fn respond(
    mut steps: Vec<Step>,
    first_content: Option<usize>,
    error: Step,
    mode: Mode,
    ending: Ending,
    shutdown: watch::Receiver<bool>,
) -> Response {
    // A long answer (a speed probe's count) streams at a pace a model
    // might, so that its tokens per second are a figure, not a burst; a
    // short one goes at once, as every benchmark of route wants.
    let pace = if steps.len() > LONG_STREAM {
        PACE
    } else {
        Duration::ZERO
    };
    if matches!(ending, Ending::NoDone | Ending::NoDoneHang) {
        // Drop the stream's last event ([DONE], message_stop, Gemini's
        // final chunk).
        if let Some(i) = steps.iter().rposition(|s| matches!(s, Step::Data(..))) {
            steps.remove(i);
        }
        if ending == Ending::NoDoneHang {
            steps.push(Step::Stall);
        }
    } else if ending != Ending::Finish {
        // A stream that breaks has sent some of the answer first.
        steps.truncate(first_content.map_or(steps.len(), |i| i + 1));
        steps.push(match ending {
            Ending::Cut => Step::Cut,
            Ending::Stall => Step::Stall,
            _ => error,
        });
    }
    match mode {
        Mode::Sse => Sse::new(play(steps, shutdown, pace, |_, step| match step {
            Step::Data(Some(name), data) => Event::default().event(name).data(data),
            Step::Data(None, data) => Event::default().data(data),
            Step::Comment(c) => Event::default().comment(c),
            // Not used in SSE.
            _ => Event::default().comment(""),
        }))
        .into_response(),
        Mode::JsonArray => {
            if matches!(ending, Ending::Finish | Ending::Error) {
                steps.push(Step::Close);
            }
            let body = Body::from_stream(play(steps, shutdown, pace, |i, step| match step {
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
    pace: Duration,
    render: fn(usize, Step) -> T,
) -> impl Stream<Item = Result<T, io::Error>> + Send + 'static {
    futures_util::stream::unfold(
        (steps.into_iter().enumerate(), shutdown),
        move |(mut steps, mut shutdown)| async move {
            let (i, step) = steps.next()?;
            if i > 0 && !pace.is_zero() {
                tokio::time::sleep(pace).await;
            }
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

/// A stream of more steps than this is a long answer, paced by [`PACE`].
const LONG_STREAM: usize = 8;

/// The wait between the steps of a long answer: a count of 60 numbers
/// (about a dozen pieces) takes about 50 ms after its first token.
const PACE: Duration = Duration::from_millis(4);

/// The text cut into at least two pieces, as a model streams tokens.
pub fn pieces(text: &str) -> Vec<&str> {
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

/// An unnamed event with `v` as its data.
pub fn data(v: Value) -> Step {
    Step::Data(None, v.to_string())
}

/// A named SSE event with `v` as its data.
pub fn named(name: &'static str, v: Value) -> Step {
    Step::Data(Some(name), v.to_string())
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
