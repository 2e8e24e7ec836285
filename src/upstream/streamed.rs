//! A streamed reply read to its end, for a probe: the request is sent with
//! `stream` on, its events are mapped by the dialect's [`StreamMapper`]
//! (as `route` maps them) and assembled into the same [`ChatReply`] a
//! whole reply parses into, so that a probe's check is the same either
//! way, and the time to the first content token is taken on the way.
//!
//! What bounds a stream:
//!
//! - before its first byte, the probe's `timeout` (a reasoning model may
//!   think in silence);
//! - after it, `stall` between any two chunks of bytes (SSE comments such
//!   as OpenRouter's `: keep-alive` are bytes too), and `timeout` again for
//!   the rest of the stream, whatever trickles: a stream cannot hold a
//!   probe longer than twice its timeout;
//! - [`http::DEFAULT_BODY_CAP`] bytes in all, as a whole body;
//! - a stream that goes silent past `stall`, or ends without its
//!   terminating event (OpenAI's `[DONE]`, Anthropic's `message_stop`, and
//!   for Gemini, whose streams simply end, a chunk with its finish reason),
//!   or whose connection drops after its first byte, is
//!   [`TransportError::Stalled`]: `stalled after N bytes`.
//!
//! A response that is not an event stream is read whole, under the same
//! deadline, as an unstreamed reply: an error status, and a 2xx whose type
//! is not `text/event-stream` (one JSON reply from a server that ignored
//! `stream`, an HTML page). A 2xx without a type is read as a stream.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use tokio::time::Instant;

use super::dialect::{
    ChatReply, Dialect, ProviderError, ReplyDelta, StreamMapper, ToolCall, map_byte_stream, wire,
};
use super::http::{self, RawResponse, TransportError};

/// What bounds a stream (the module's documentation says how).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Before the first byte; and again for the rest of the stream.
    pub timeout: Duration,
    /// Between two chunks of bytes, once the first has come.
    pub stall: Duration,
}

/// What came back for a streamed request.
#[derive(Debug)]
pub enum Answer {
    /// Read whole: an error status, or a plain JSON reply.
    Whole(RawResponse),
    /// An event stream, read to its terminating event.
    Streamed(Streamed),
}

/// A stream read to its end, assembled.
#[derive(Debug, Clone)]
pub struct Streamed {
    pub status: u16,
    pub headers: HeaderMap,
    pub reply: ChatReply,
    /// From just before the request was sent to its first content token:
    /// the first piece of answer text that is not empty. Reasoning, tool
    /// calls and empty deltas are not content. `None` when no text came.
    pub first_token: Option<Duration>,
    /// From just before the request was sent to the terminating event.
    pub elapsed: Duration,
}

/// Why a streamed request gave no reply.
#[derive(Debug)]
pub enum Broken {
    /// No usable exchange, or a stream that stalled or was cut.
    Transport(TransportError),
    /// The upstream reported a failure inside the stream, after its 2xx.
    Event {
        status: u16,
        headers: HeaderMap,
        error: ProviderError,
    },
}

/// A byte stream's failure, carrying what [`TransportError`] it is.
enum ReadError {
    Stalled(u64),
    Timeout(Duration),
    TooLarge(usize),
    Http(reqwest::Error),
}

fn transport(e: ReadError) -> TransportError {
    match e {
        ReadError::Stalled(n) => TransportError::Stalled(n),
        ReadError::Timeout(d) => TransportError::Timeout(d),
        ReadError::TooLarge(n) => TransportError::TooLarge(n),
        ReadError::Http(e) => http::body_error(e),
    }
}

/// Send a streamed request and read what comes back to its end, under
/// `limits`, `mapper` reading the stream in `dialect`.
pub async fn read(
    builder: reqwest::RequestBuilder,
    mapper: StreamMapper,
    dialect: Dialect,
    limits: Limits,
) -> Result<Answer, Broken> {
    let started = Instant::now();
    let deadline = started + limits.timeout;
    let resp = http::open(builder, limits.timeout)
        .await
        .map_err(Broken::Transport)?;
    let status = resp.status().as_u16();
    if !(200..300).contains(&status) || !is_event_stream(resp.headers()) {
        let whole = http::read_body(resp, http::DEFAULT_BODY_CAP, started.into_std());
        return match tokio::time::timeout_at(deadline, whole).await {
            Ok(r) => r.map(Answer::Whole).map_err(Broken::Transport),
            Err(_) => Err(Broken::Transport(TransportError::Timeout(limits.timeout))),
        };
    }
    let headers = resp.headers().clone();
    let sent = Arc::new(AtomicU64::new(0));
    let ended = Arc::new(AtomicBool::new(false));
    let bytes = byte_stream(resp, deadline, limits, sent.clone(), ended.clone());
    let mut items = std::pin::pin!(map_byte_stream(bytes, mapper, transport));
    let mut reply = Assembly::default();
    let cut = || Broken::Transport(TransportError::Stalled(sent.load(Ordering::Relaxed)));
    while let Some(item) = items.next().await {
        let delta = match item {
            Ok(d) => d,
            // The connection dropped once the stream had begun: a stream
            // without its end.
            Err(TransportError::Reset(_)) if sent.load(Ordering::Relaxed) > 0 => {
                return Err(cut());
            }
            Err(e) => return Err(Broken::Transport(e)),
        };
        match delta {
            ReplyDelta::Done => {
                // Done at the body's end, not at an event: the stream's
                // end is its terminating event only for a dialect whose
                // streams simply stop, once it gave its finish reason.
                let at_eof = ended.load(Ordering::Relaxed);
                if at_eof && !(wire(dialect).stream_ends_at_eof() && reply.finished()) {
                    return Err(cut());
                }
                let (reply, first_token) = reply.into_reply();
                return Ok(Answer::Streamed(Streamed {
                    status,
                    headers,
                    reply,
                    first_token: first_token.map(|t| t - started),
                    elapsed: started.elapsed(),
                }));
            }
            // Made by the mapper when the body ended before the reply was
            // complete.
            ReplyDelta::Error(_) if ended.load(Ordering::Relaxed) => return Err(cut()),
            ReplyDelta::Error(error) => {
                return Err(Broken::Event {
                    status,
                    headers,
                    error,
                });
            }
            d => reply.push(d),
        }
    }
    Err(cut())
}

/// A body of server-sent events: `text/event-stream`, or no type at all.
/// Any other (one JSON reply from a server that ignored `stream`, an HTML
/// page) is read whole, as an unstreamed reply.
fn is_event_stream(headers: &HeaderMap) -> bool {
    match headers.get(CONTENT_TYPE).map(|v| v.to_str()) {
        None => true,
        Some(Ok(v)) => v
            .split(';')
            .next()
            .is_some_and(|t| t.trim().eq_ignore_ascii_case("text/event-stream")),
        Some(Err(_)) => false,
    }
}

/// The response's body chunk by chunk, bounded as the module says, with
/// the bytes read so far counted in `sent` and the body's clean end noted
/// in `ended`.
fn byte_stream(
    resp: reqwest::Response,
    deadline: Instant,
    limits: Limits,
    sent: Arc<AtomicU64>,
    ended: Arc<AtomicBool>,
) -> impl futures_util::Stream<Item = Result<Vec<u8>, ReadError>> + Send + 'static {
    // The rest of the stream's deadline, set by its first byte.
    let state = (resp, None::<Instant>);
    futures_util::stream::unfold(Some(state), move |state| {
        let (sent, ended) = (sent.clone(), ended.clone());
        async move {
            let (mut resp, rest) = state?;
            let so_far = sent.load(Ordering::Relaxed);
            let waited = match rest {
                None => tokio::time::timeout_at(deadline, resp.chunk())
                    .await
                    .map_err(|_| ReadError::Timeout(limits.timeout)),
                Some(rest) => {
                    let stall = Instant::now() + limits.stall;
                    match tokio::time::timeout_at(stall.min(rest), resp.chunk()).await {
                        Ok(r) => Ok(r),
                        Err(_) if stall <= rest => Err(ReadError::Stalled(so_far)),
                        Err(_) => Err(ReadError::Timeout(limits.timeout)),
                    }
                }
            };
            match waited {
                Err(e) => Some((Err(e), None)),
                Ok(Err(e)) => Some((Err(ReadError::Http(e)), None)),
                Ok(Ok(None)) => {
                    ended.store(true, Ordering::Relaxed);
                    None
                }
                Ok(Ok(Some(b))) => {
                    let total = so_far + b.len() as u64;
                    sent.store(total, Ordering::Relaxed);
                    if total > http::DEFAULT_BODY_CAP as u64 {
                        return Some((Err(ReadError::TooLarge(http::DEFAULT_BODY_CAP)), None));
                    }
                    let rest = rest.or_else(|| Some(Instant::now() + limits.timeout));
                    Some((Ok(b.to_vec()), Some((resp, rest))))
                }
            }
        }
    })
}

/// A reply put together from its deltas.
#[derive(Debug, Default)]
struct Assembly {
    reply: ChatReply,
    first_token: Option<Instant>,
}

impl Assembly {
    fn push(&mut self, d: ReplyDelta) {
        let r = &mut self.reply;
        match d {
            ReplyDelta::Text(t) => {
                if !t.is_empty() && self.first_token.is_none() {
                    self.first_token = Some(Instant::now());
                }
                r.text.push_str(&t);
            }
            ReplyDelta::Reasoning(t) => r.reasoning.get_or_insert_default().push_str(&t),
            ReplyDelta::ToolCall(c) => {
                while r.tool_calls.len() <= c.index {
                    r.tool_calls.push(ToolCall {
                        id: String::new(),
                        name: String::new(),
                        arguments: String::new(),
                    });
                }
                let call = &mut r.tool_calls[c.index];
                if let Some(id) = c.id {
                    call.id = id;
                }
                if let Some(name) = c.name {
                    call.name = name;
                }
                call.arguments.push_str(&c.arguments);
            }
            ReplyDelta::Finish(f) => r.finish_reason = Some(f),
            ReplyDelta::Usage(u) => r.usage = Some(u),
            ReplyDelta::Start { .. }
            | ReplyDelta::Raw(_)
            | ReplyDelta::Error(_)
            | ReplyDelta::Done => {}
        }
    }

    fn finished(&self) -> bool {
        self.reply.finish_reason.is_some()
    }

    fn into_reply(self) -> (ChatReply, Option<Instant>) {
        (self.reply, self.first_token)
    }
}

/// An answer's output tokens when the upstream did not count them: the
/// larger of its words and its characters / 4 (rounded up). A count runs
/// about a token a number, which words see and characters / 4 does not.
pub fn estimated_output_tokens(text: &str) -> u64 {
    let words = text.split_whitespace().count() as u64;
    let chars = (text.chars().count() as u64).div_ceil(4);
    words.max(chars)
}

/// Whether a whole response to a streamed request refuses the stream
/// itself (a 4xx that names it), so the probe is sent again unstreamed.
pub fn refuses_streaming(resp: &RawResponse) -> bool {
    matches!(resp.status, 400 | 405 | 415 | 422 | 501)
        && resp.text().to_ascii_lowercase().contains("stream")
}

/// The models (`provider::model`) whose provider refused a streamed probe
/// in this process: their later probes go unstreamed at once, so only the
/// first costs a second request.
static REFUSED: std::sync::Mutex<BTreeSet<String>> = std::sync::Mutex::new(BTreeSet::new());

/// Remember that `key` (`provider::model`) refuses streaming.
pub fn remember_refusal(key: &str) {
    REFUSED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key.to_string());
}

/// Whether `key` (`provider::model`) refused streaming in this process.
pub fn refused(key: &str) -> bool {
    REFUSED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::dialect::{ToolCallDelta, Usage};

    #[test]
    fn deltas_assemble_into_the_reply_a_whole_body_gives() {
        let mut a = Assembly::default();
        for d in [
            ReplyDelta::Start { id: None },
            ReplyDelta::Text(String::new()),
            ReplyDelta::Reasoning("hm".into()),
            ReplyDelta::Text("1".into()),
            ReplyDelta::Text("4".into()),
            ReplyDelta::ToolCall(ToolCallDelta {
                index: 0,
                id: Some("c".into()),
                name: Some("add".into()),
                arguments: "{\"a\":".into(),
            }),
            ReplyDelta::ToolCall(ToolCallDelta {
                index: 0,
                arguments: "1}".into(),
                ..Default::default()
            }),
            ReplyDelta::Finish("stop".into()),
            ReplyDelta::Usage(Usage {
                input_tokens: Some(3),
                output_tokens: Some(2),
            }),
        ] {
            a.push(d);
        }
        assert!(a.first_token.is_some());
        let (r, _) = a.into_reply();
        assert_eq!(r.text, "14");
        assert_eq!(r.reasoning.as_deref(), Some("hm"));
        assert_eq!(r.finish_reason.as_deref(), Some("stop"));
        assert_eq!(r.tool_calls[0].name, "add");
        assert_eq!(r.tool_calls[0].arguments, "{\"a\":1}");
        assert_eq!(r.usage.and_then(|u| u.output_tokens), Some(2));
    }

    #[test]
    fn reasoning_and_empty_text_are_not_the_first_token() {
        let mut a = Assembly::default();
        a.push(ReplyDelta::Reasoning("thinking".into()));
        a.push(ReplyDelta::Text(String::new()));
        assert!(a.first_token.is_none());
    }

    #[test]
    fn an_estimate_counts_a_number_a_token() {
        let count: Vec<String> = (10..=70).map(|n| n.to_string()).collect();
        assert_eq!(estimated_output_tokens(&count.join(" ")), 61);
        assert_eq!(estimated_output_tokens("abcdefgh"), 2);
        assert_eq!(estimated_output_tokens(""), 0);
    }

    #[test]
    fn a_refusal_names_the_stream() {
        let resp = |status, body: &str| RawResponse {
            status,
            headers: HeaderMap::new(),
            body: body.as_bytes().to_vec(),
            elapsed: Duration::ZERO,
        };
        assert!(refuses_streaming(&resp(
            400,
            r#"{"error":{"message":"Streaming is not supported"}}"#
        )));
        assert!(!refuses_streaming(&resp(400, r#"{"error":"bad model"}"#)));
        assert!(!refuses_streaming(&resp(429, "stream rate limit")));
    }
}
