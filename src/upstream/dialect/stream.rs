//! Streamed replies: each dialect's server-sent events as OpenAI
//! `chat.completion.chunk`s.
//!
//! `eventsource-stream` does the SSE framing (line endings, multi-line
//! data, and comment lines such as OpenRouter's `: OPENROUTER PROCESSING`
//! and `: keep-alive`, which it drops). A [`StreamMapper`] only maps parsed
//! events:
//!
//! - OpenAI: chunks pass through as they came; `[DONE]` ends the stream; a
//!   chunk with an `error` object or `finish_reason: "error"` (OpenRouter,
//!   after HTTP 200) is an error.
//! - Anthropic: `message_start` gives the first chunk (role), text deltas
//!   give content, thinking deltas give `reasoning_content`,
//!   `message_delta` gives the finish reason, `message_stop` ends it, and
//!   `event: error` is an error. `ping` and block starts and stops carry
//!   nothing.
//! - Gemini: each event is a whole response holding only the new text;
//!   the last has `finishReason`. The stream simply ends, so
//!   [`StreamMapper::finish`] ends it.

use std::collections::VecDeque;
use std::pin::Pin;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};
use serde_json::{Value, json};

use super::reply::{completion_id, openai_finish_reason, unix_now, usage_json};
use super::{Dialect, ProviderError, Usage, error_from_json, u64_at};
use crate::upstream::http::TransportError;

/// What one upstream event becomes.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamItem {
    /// An OpenAI `chat.completion.chunk`, to send as `data: {chunk}`.
    Chunk(Value),
    /// The reply is complete: send `data: [DONE]`.
    Done,
    /// The upstream reported a failure mid-stream. Nothing follows.
    Error(ProviderError),
}

/// Maps one upstream stream's events to OpenAI chunks; one per response.
///
/// Every chunk it makes has the same `id`, `created` and `model` (the
/// label given to [`StreamMapper::new`]); the first carries
/// `role: "assistant"`, and the last content chunk `finish_reason`. OpenAI
/// chunks pass through unchanged, keeping the upstream's own fields.
#[derive(Debug, Clone)]
pub struct StreamMapper {
    dialect: Dialect,
    model: String,
    id: String,
    created: u64,
    include_usage: bool,
    role_sent: bool,
    finish_sent: bool,
    done: bool,
    usage: Usage,
}

impl StreamMapper {
    pub fn new(dialect: Dialect, model_label: &str) -> StreamMapper {
        StreamMapper {
            dialect,
            model: model_label.to_string(),
            id: completion_id(None),
            created: unix_now(),
            include_usage: false,
            role_sent: false,
            finish_sent: false,
            done: false,
            usage: Usage::default(),
        }
    }

    /// Whether the client asked for a final usage chunk
    /// ([`super::ChatRequest::wants_stream_usage`]). Off by default: the
    /// OpenAI dialect always asks the upstream for usage (route counts
    /// tokens), and the mapper then drops the usage-only chunk unless the
    /// client asked too. For Anthropic and Gemini, on means a `choices: []`
    /// chunk with `usage` before the end.
    pub fn include_usage(mut self, yes: bool) -> StreamMapper {
        self.include_usage = yes;
        self
    }

    /// Token counts seen so far: the OpenAI usage chunk, Anthropic
    /// `message_start` and `message_delta`, Gemini `usageMetadata`.
    pub fn usage(&self) -> Option<Usage> {
        (self.usage != Usage::default()).then_some(self.usage)
    }

    /// The stream has ended, with [`StreamItem::Done`] or an error.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Map one event. After the end, every event maps to nothing.
    pub fn map(&mut self, ev: &Event) -> Vec<StreamItem> {
        if self.done {
            return Vec::new();
        }
        let items = match self.dialect {
            Dialect::Openai => self.openai(ev),
            Dialect::Anthropic => self.anthropic(ev),
            Dialect::Gemini => self.gemini(ev),
        };
        if items
            .iter()
            .any(|i| matches!(i, StreamItem::Done | StreamItem::Error(_)))
        {
            self.done = true;
        }
        items
    }

    /// Call when the upstream's body ends. Gemini streams end this way, as
    /// do OpenAI-compatible servers that omit `[DONE]`: if the finish
    /// reason has been sent, this is [`StreamItem::Done`]. A stream cut off
    /// before that is an error, never a silently shortened answer.
    pub fn finish(&mut self) -> Vec<StreamItem> {
        if self.done {
            return Vec::new();
        }
        self.done = true;
        if self.finish_sent || (self.dialect == Dialect::Gemini && self.role_sent) {
            let mut out = self.usage_chunk();
            out.push(StreamItem::Done);
            out
        } else {
            vec![StreamItem::Error(ProviderError {
                message: "the upstream stream ended before the reply was complete".into(),
                ..ProviderError::default()
            })]
        }
    }

    fn openai(&mut self, ev: &Event) -> Vec<StreamItem> {
        let data = ev.data.trim();
        if data == "[DONE]" {
            return vec![StreamItem::Done];
        }
        let Some(chunk) = self.event_json(ev) else {
            return vec![unreadable(data)];
        };
        if let Some(err) = error_from_json(&chunk).filter(|_| chunk.get("error").is_some()) {
            return vec![StreamItem::Error(err)];
        }
        let first = chunk.pointer("/choices/0");
        if first
            .and_then(|c| c.get("finish_reason"))
            .and_then(Value::as_str)
            == Some("error")
        {
            let err = first
                .and_then(|c| c.get("error"))
                .and_then(super::error_from_json_inner)
                .unwrap_or_else(|| ProviderError {
                    message: "the upstream failed mid-stream".into(),
                    ..ProviderError::default()
                });
            return vec![StreamItem::Error(err)];
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Usage {
                input_tokens: u64_at(u, "prompt_tokens"),
                output_tokens: u64_at(u, "completion_tokens"),
            };
        }
        if first.is_some() {
            self.role_sent = true;
        }
        if first
            .and_then(|c| c.get("finish_reason"))
            .is_some_and(|f| !f.is_null())
        {
            self.finish_sent = true;
        }
        let usage_only = chunk
            .get("choices")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty);
        if usage_only && !self.include_usage {
            return Vec::new();
        }
        vec![StreamItem::Chunk(chunk)]
    }

    fn anthropic(&mut self, ev: &Event) -> Vec<StreamItem> {
        let Some(data) = self.event_json(ev) else {
            return vec![unreadable(&ev.data)];
        };
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(ev.event.as_str());
        match kind {
            "message_start" => {
                let message = data.get("message");
                if let Some(id) = message.and_then(|m| m.get("id")).and_then(Value::as_str) {
                    self.id = completion_id(Some(id));
                }
                if let Some(u) = message.and_then(|m| m.get("usage")) {
                    self.anthropic_usage(u);
                }
                vec![self.delta(json!({"role": "assistant", "content": ""}))]
            }
            "content_block_start" => {
                // A text block may open with text already in it.
                match data.pointer("/content_block/text").and_then(Value::as_str) {
                    Some(t) if !t.is_empty() => vec![self.delta(json!({"content": t}))],
                    _ => Vec::new(),
                }
            }
            "content_block_delta" => {
                let delta = data.get("delta");
                let text = |field: &str| {
                    delta
                        .and_then(|d| d.get(field))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                };
                match delta.and_then(|d| d.get("type")).and_then(Value::as_str) {
                    Some("text_delta") => text("text")
                        .map(|t| vec![self.delta(json!({"content": t}))])
                        .unwrap_or_default(),
                    Some("thinking_delta") => text("thinking")
                        .map(|t| vec![self.delta(json!({"reasoning_content": t}))])
                        .unwrap_or_default(),
                    // signature_delta, input_json_delta, citations: nothing
                    // an OpenAI client reads.
                    _ => Vec::new(),
                }
            }
            "message_delta" => {
                if let Some(u) = data.get("usage") {
                    self.anthropic_usage(u);
                }
                match data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    Some(reason) => vec![self.finish_chunk(reason)],
                    None => Vec::new(),
                }
            }
            "message_stop" => {
                let mut out = self.usage_chunk();
                out.push(StreamItem::Done);
                out
            }
            "error" => vec![StreamItem::Error(error_from_json(&data).unwrap_or_else(
                || ProviderError {
                    message: "error event without details".into(),
                    ..ProviderError::default()
                },
            ))],
            // ping, content_block_stop, and event types added later.
            _ => Vec::new(),
        }
    }

    fn anthropic_usage(&mut self, u: &Value) {
        // message_delta's counts are cumulative; keep the latest of each.
        if let Some(n) = u64_at(u, "input_tokens") {
            self.usage.input_tokens = Some(n);
        }
        if let Some(n) = u64_at(u, "output_tokens") {
            self.usage.output_tokens = Some(n);
        }
    }

    fn gemini(&mut self, ev: &Event) -> Vec<StreamItem> {
        let Some(data) = self.event_json(ev) else {
            return vec![unreadable(&ev.data)];
        };
        if data.get("error").is_some()
            && let Some(err) = error_from_json(&data)
        {
            return vec![StreamItem::Error(err)];
        }
        if !self.role_sent
            && let Some(id) = data.get("responseId").and_then(Value::as_str)
        {
            self.id = completion_id(Some(id));
        }
        if let Some(u) = data.get("usageMetadata") {
            self.usage = Usage {
                input_tokens: u64_at(u, "promptTokenCount").or(self.usage.input_tokens),
                output_tokens: u64_at(u, "candidatesTokenCount").or(self.usage.output_tokens),
            };
        }
        let first = data.pointer("/candidates/0");
        let parts: &[Value] = first
            .and_then(|c| c.pointer("/content/parts"))
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        let join = |thought: bool| -> String {
            parts
                .iter()
                .filter(|p| (p.get("thought").and_then(Value::as_bool) == Some(true)) == thought)
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect()
        };
        let (text, reasoning) = (join(false), join(true));
        let mut delta = serde_json::Map::new();
        if !reasoning.is_empty() {
            delta.insert("reasoning_content".into(), json!(reasoning));
        }
        if !text.is_empty() || !self.role_sent {
            delta.insert("content".into(), json!(text));
        }
        let mut out = Vec::new();
        // The first event always gives a chunk, to carry the role.
        if !delta.is_empty() {
            out.push(self.delta(Value::Object(delta)));
        }
        let finish = first
            .and_then(|c| c.get("finishReason"))
            .and_then(Value::as_str);
        // A prompt blocked for safety has no candidates at all.
        let blocked = first.is_none() && data.pointer("/promptFeedback/blockReason").is_some();
        if let Some(reason) = finish.or(blocked.then_some("SAFETY")) {
            out.push(self.finish_chunk(reason));
        }
        out
    }

    /// The event's data as JSON (tolerating a leading BOM or blank line).
    fn event_json(&self, ev: &Event) -> Option<Value> {
        super::parse_json(&ev.data)
    }

    fn chunk(&self, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        })
    }

    fn delta(&mut self, delta: Value) -> StreamItem {
        self.choice(delta, Value::Null)
    }

    fn finish_chunk(&mut self, reason: &str) -> StreamItem {
        self.finish_sent = true;
        self.choice(json!({}), json!(openai_finish_reason(reason)))
    }

    /// One choice's chunk; the first one the client gets names the role.
    fn choice(&mut self, mut delta: Value, finish_reason: Value) -> StreamItem {
        if !self.role_sent {
            delta["role"] = json!("assistant");
            self.role_sent = true;
        }
        StreamItem::Chunk(self.chunk(json!([{
            "index": 0,
            "delta": delta,
            "finish_reason": finish_reason,
        }])))
    }

    /// The final `choices: []` chunk with usage, when the client asked for
    /// it and the upstream reported both counts. OpenAI upstreams send
    /// their own.
    fn usage_chunk(&self) -> Vec<StreamItem> {
        if !self.include_usage || self.dialect == Dialect::Openai {
            return Vec::new();
        }
        usage_json(self.usage)
            .map(|u| {
                let mut c = self.chunk(json!([]));
                c["usage"] = u;
                StreamItem::Chunk(c)
            })
            .into_iter()
            .collect()
    }
}

fn unreadable(data: &str) -> StreamItem {
    let head: String = data.chars().take(100).collect();
    StreamItem::Error(ProviderError {
        message: format!("unreadable stream event: {head}"),
        ..ProviderError::default()
    })
}

/// A streamed response's body as mapped items, ending after
/// [`StreamItem::Done`] or the first error. No deadline applies here: the
/// caller bounds the wait for each item.
pub fn chunk_stream(
    resp: reqwest::Response,
    mapper: StreamMapper,
) -> impl Stream<Item = Result<StreamItem, TransportError>> + Send {
    let bytes = futures_util::stream::unfold(Some(resp), |resp| async move {
        let mut resp = resp?;
        match resp.chunk().await {
            Ok(Some(b)) => Some((Ok(b), Some(resp))),
            Ok(None) => None,
            // Nothing is read after a failure.
            Err(e) => Some((Err(e), None)),
        }
    });
    map_byte_stream(bytes, mapper, crate::upstream::http::body_error)
}

/// [`chunk_stream`] over any stream of byte chunks, with `transport`
/// turning its errors into [`TransportError`]s.
pub fn map_byte_stream<S, B, E>(
    bytes: S,
    mapper: StreamMapper,
    transport: fn(E) -> TransportError,
) -> impl Stream<Item = Result<StreamItem, TransportError>> + Send
where
    S: Stream<Item = Result<B, E>> + Send + 'static,
    B: AsRef<[u8]> + Send,
    E: Send,
{
    struct State<T> {
        events: Pin<Box<T>>,
        mapper: StreamMapper,
        pending: VecDeque<StreamItem>,
        ended: bool,
    }
    let state = State {
        events: Box::pin(bytes.eventsource()),
        mapper,
        pending: VecDeque::new(),
        ended: false,
    };
    futures_util::stream::unfold(state, move |mut st| async move {
        loop {
            if let Some(item) = st.pending.pop_front() {
                if matches!(item, StreamItem::Done | StreamItem::Error(_)) {
                    st.pending.clear();
                    st.ended = true;
                }
                return Some((Ok(item), st));
            }
            if st.ended {
                return None;
            }
            match st.events.next().await {
                Some(Ok(ev)) => st.pending.extend(st.mapper.map(&ev)),
                Some(Err(e)) => {
                    st.ended = true;
                    let err = match e {
                        EventStreamError::Transport(e) => transport(e),
                        EventStreamError::Utf8(_) | EventStreamError::Parser(_) => {
                            TransportError::Other(
                                "the upstream stream is not valid server-sent events".into(),
                            )
                        }
                    };
                    return Some((Err(err), st));
                }
                None => {
                    st.pending.extend(st.mapper.finish());
                    st.ended = true;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    const OPENAI: &str = include_str!("../../../tests/fixtures/streams/openai.sse");
    const ANTHROPIC: &str = include_str!("../../../tests/fixtures/streams/anthropic.sse");
    const ANTHROPIC_ERROR: &str =
        include_str!("../../../tests/fixtures/streams/anthropic-error.sse");
    const GEMINI: &str = include_str!("../../../tests/fixtures/streams/gemini.sse");

    /// Run a recorded stream through the mapper, delivered in 7-byte
    /// pieces so that events and lines are split across reads.
    async fn run(dialect: Dialect, fixture: &str, include_usage: bool) -> Vec<StreamItem> {
        let pieces: Vec<Result<Vec<u8>, Infallible>> = fixture
            .as_bytes()
            .chunks(7)
            .map(|c| Ok(c.to_vec()))
            .collect();
        let mapper = StreamMapper::new(dialect, "p::model").include_usage(include_usage);
        map_byte_stream(futures_util::stream::iter(pieces), mapper, |e| match e {})
            .map(|r| r.unwrap())
            .collect()
            .await
    }

    fn chunks(items: &[StreamItem]) -> Vec<&Value> {
        items
            .iter()
            .filter_map(|i| match i {
                StreamItem::Chunk(c) => Some(c),
                _ => None,
            })
            .collect()
    }

    fn joined(items: &[StreamItem], field: &str) -> String {
        chunks(items)
            .iter()
            .filter_map(|c| c.pointer(&format!("/choices/0/delta/{field}"))?.as_str())
            .collect()
    }

    fn finish_reasons(items: &[StreamItem]) -> Vec<&str> {
        chunks(items)
            .iter()
            .filter_map(|c| c.pointer("/choices/0/finish_reason")?.as_str())
            .collect()
    }

    /// What every OpenAI client relies on: one id, created and model; role
    /// first; object chunk.
    fn assert_consistent(items: &[StreamItem], model: &str) {
        let cs = chunks(items);
        assert_eq!(cs[0]["choices"][0]["delta"]["role"], "assistant");
        for c in &cs {
            assert_eq!(c["object"], "chat.completion.chunk");
            assert_eq!(c["id"], cs[0]["id"]);
            assert_eq!(c["created"], cs[0]["created"]);
            assert_eq!(c["model"], model);
        }
    }

    #[tokio::test]
    async fn openai_chunks_pass_through_and_comments_vanish() {
        let items = run(Dialect::Openai, OPENAI, false).await;
        assert_eq!(items.last(), Some(&StreamItem::Done));
        // Four chunks; the usage-only chunk is dropped because the client
        // did not ask for it.
        assert_eq!(chunks(&items).len(), 4);
        assert_consistent(&items, "meta-llama/llama-3.3-70b-instruct:free");
        assert_eq!(joined(&items, "content"), "Hello there");
        assert_eq!(finish_reasons(&items), ["stop"]);
        // Passed through untouched, OpenRouter's extra fields included.
        assert_eq!(chunks(&items)[1]["provider"], "Together");

        let with_usage = run(Dialect::Openai, OPENAI, true).await;
        let cs = chunks(&with_usage);
        assert_eq!(cs.len(), 5);
        assert_eq!(cs[4]["choices"], json!([]));
        assert_eq!(cs[4]["usage"]["total_tokens"], 14);
    }

    #[test]
    fn openai_usage_is_recorded() {
        let mut m = StreamMapper::new(Dialect::Openai, "x");
        for block in OPENAI.split("\n\n").filter(|b| b.starts_with("data: ")) {
            m.map(&Event {
                data: block["data: ".len()..].to_string(),
                event: "message".into(),
                ..Event::default()
            });
        }
        assert!(m.is_done());
        assert_eq!(
            m.usage(),
            Some(Usage {
                input_tokens: Some(12),
                output_tokens: Some(2)
            })
        );
    }

    #[tokio::test]
    async fn anthropic_events_become_chunks() {
        let items = run(Dialect::Anthropic, ANTHROPIC, false).await;
        assert_eq!(items.last(), Some(&StreamItem::Done));
        assert_consistent(&items, "p::model");
        let cs = chunks(&items);
        assert_eq!(cs[0]["id"], "chatcmpl-msg_01XFDUDYJgAACzvnptvVoYEL");
        assert_eq!(
            cs[0]["choices"][0]["delta"],
            json!({"role":"assistant","content":""})
        );
        assert_eq!(joined(&items, "content"), "Hello!");
        assert_eq!(joined(&items, "reasoning_content"), "7 + 7 = 14.");
        assert_eq!(finish_reasons(&items), ["stop"]);
        // The finish reason is on the last chunk; pings and signatures
        // made none.
        assert_eq!(cs.last().unwrap()["choices"][0]["finish_reason"], "stop");
        assert_eq!(cs.len(), 5);

        let with_usage = run(Dialect::Anthropic, ANTHROPIC, true).await;
        let last = *chunks(&with_usage).last().unwrap();
        assert_eq!(last["choices"], json!([]));
        assert_eq!(
            last["usage"],
            json!({"prompt_tokens":25,"completion_tokens":15,"total_tokens":40})
        );
    }

    #[test]
    fn anthropic_usage_comes_from_start_and_delta() {
        let mut m = StreamMapper::new(Dialect::Anthropic, "x");
        for block in ANTHROPIC.split("\n\n").filter(|b| !b.is_empty()) {
            let (event, data) = block.split_once('\n').unwrap();
            m.map(&Event {
                event: event["event: ".len()..].into(),
                data: data["data: ".len()..].into(),
                ..Event::default()
            });
        }
        assert_eq!(
            m.usage(),
            Some(Usage {
                input_tokens: Some(25),
                output_tokens: Some(15)
            })
        );
        assert!(m.finish().is_empty(), "message_stop already ended it");
    }

    #[tokio::test]
    async fn anthropic_error_event_is_an_error() {
        let items = run(Dialect::Anthropic, ANTHROPIC_ERROR, false).await;
        assert_eq!(joined(&items, "content"), "Hel");
        match items.last() {
            Some(StreamItem::Error(e)) => {
                assert_eq!(e.code.as_deref(), Some("overloaded_error"));
                assert_eq!(e.message, "Overloaded");
            }
            other => panic!("{other:?}"),
        }
        assert!(!items.contains(&StreamItem::Done));
    }

    #[tokio::test]
    async fn a_stream_cut_short_is_an_error_not_a_short_answer() {
        let cut = &ANTHROPIC[..ANTHROPIC.find("event: message_delta").unwrap()];
        let items = run(Dialect::Anthropic, cut, false).await;
        assert!(
            matches!(items.last(), Some(StreamItem::Error(e)) if e.message.contains("ended before")),
            "{items:?}"
        );
        let cut = &OPENAI[..OPENAI.find(": keep-alive").unwrap()];
        let items = run(Dialect::Openai, cut, false).await;
        assert!(
            matches!(items.last(), Some(StreamItem::Error(_))),
            "{items:?}"
        );
    }

    #[tokio::test]
    async fn gemini_responses_become_chunks_and_eof_is_done() {
        let items = run(Dialect::Gemini, GEMINI, false).await;
        assert_eq!(items.last(), Some(&StreamItem::Done));
        assert_consistent(&items, "p::model");
        let cs = chunks(&items);
        assert_eq!(cs[0]["id"], "chatcmpl-mAitaNbVGvyCmtkPqJ6GwAc");
        assert_eq!(joined(&items, "content"), "Hello there!");
        assert_eq!(joined(&items, "reasoning_content"), "Counting.");
        assert_eq!(finish_reasons(&items), ["stop"]);

        let with_usage = run(Dialect::Gemini, GEMINI, true).await;
        let last = *chunks(&with_usage).last().unwrap();
        assert_eq!(last["usage"]["prompt_tokens"], 8);
        assert_eq!(last["usage"]["completion_tokens"], 3);
    }

    #[test]
    fn gemini_blocked_prompt_and_errors() {
        let mut m = StreamMapper::new(Dialect::Gemini, "x");
        let items = m.map(&Event {
            data: r#"{"promptFeedback":{"blockReason":"SAFETY"}}"#.into(),
            ..Event::default()
        });
        assert_eq!(finish_reasons(&items), ["content_filter"]);
        assert_eq!(m.finish(), vec![StreamItem::Done]);

        let mut m = StreamMapper::new(Dialect::Gemini, "x");
        let items = m.map(&Event {
            data: r#"{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}"#.into(),
            ..Event::default()
        });
        assert!(
            matches!(&items[..], [StreamItem::Error(e)] if e.embedded_status == Some(503)),
            "{items:?}"
        );
        assert!(m.is_done());
        assert!(m.finish().is_empty());
    }

    #[test]
    fn openrouter_mid_stream_error_is_an_error() {
        let mut m = StreamMapper::new(Dialect::Openai, "x");
        let items = m.map(&Event {
            data: r#"{"id":"gen-1","object":"chat.completion.chunk","error":{"code":502,"message":"Provider disconnected"},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}"#.into(),
            ..Event::default()
        });
        assert!(
            matches!(&items[..], [StreamItem::Error(e)] if e.embedded_status == Some(502) && e.message == "Provider disconnected"),
            "{items:?}"
        );
    }

    #[tokio::test]
    async fn chunk_stream_reads_a_real_response() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 65536];
            let _ = sock.read(&mut buf).await;
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(GEMINI.as_bytes()).await;
            let _ = sock.shutdown().await;
        });
        let resp = crate::upstream::http::client()
            .unwrap()
            .post(format!("http://{addr}/"))
            .send()
            .await
            .unwrap();
        let items: Vec<_> = chunk_stream(resp, StreamMapper::new(Dialect::Gemini, "g"))
            .collect()
            .await;
        let items: Vec<StreamItem> = items.into_iter().map(Result::unwrap).collect();
        assert_eq!(joined(&items, "content"), "Hello there!");
        assert_eq!(items.last(), Some(&StreamItem::Done));
    }
}
