//! The OpenAI chat completions surface: what is OpenAI-shaped about
//! `route --serve`.
//!
//! - [`ChatBody`] reads a request (an axum extractor whose rejections are
//!   OpenAI errors too);
//! - errors in the OpenAI API's shape, so that every OpenAI client (the
//!   SDKs, LangChain, coding agents) reports them as it reports OpenAI's
//!   own: `{"error":{"message","type","code","param","retryAtMs"?}}`, with
//!   `Retry-After` whenever a retry time is known (written by
//!   [`ApiError`] in [`super::error`], which every surface shares);
//! - replies and stream chunks as `chat.completion` JSON
//!   ([`ChatCompletion`]) and `data: {chunk}` events ([`ChunkWriter`]),
//!   each written from a typed model straight to bytes.

use axum::extract::{FromRef, FromRequest, Request};
use serde::Serialize;
use serde_json::Value;

use crate::route::domain::StreamEvent;
use crate::route::send::Completion;
use crate::upstream::dialect::{ChatReply, ChatRequest, ReplyDelta};

use super::error::{ApiError, invalid_request};
use super::{BodyLimit, Chunks, JsonBody, TokenUsage, openai_finish_reason, sse_event, unix_now};

/// A chat completions request body: JSON, within the body limit, that
/// parses as a [`ChatRequest`]. Every rejection is an OpenAI 4xx.
#[derive(Debug)]
pub struct ChatBody(pub ChatRequest);

impl<S> FromRequest<S> for ChatBody
where
    S: Send + Sync,
    BodyLimit: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<ChatBody, ApiError> {
        let JsonBody(body) = JsonBody::from_request(req, state).await?;
        let req = ChatRequest::from_openai_json(&body).map_err(invalid_request)?;
        // Never forwarded: every upstream refuses a tool result that
        // answers no call.
        if let Some(e) = req.orphan_tool_result() {
            return Err(invalid_request(e));
        }
        Ok(ChatBody(req))
    }
}

/// A non-streamed chat completions reply: an OpenAI upstream's body as it
/// came, or one rendered from the reply.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum ChatCompletionBody {
    Native(Value),
    Rendered(ChatCompletion),
}

/// OpenAI's `chat.completion`, fields in OpenAI's order.
#[derive(Debug, Serialize)]
pub struct ChatCompletion {
    id: String,
    object: &'static str,
    created: u64,
    model: String,
    choices: [ReplyChoice; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<TokenUsage>,
}

#[derive(Debug, Serialize)]
struct ReplyChoice {
    index: u32,
    message: ReplyMessage,
    finish_reason: Option<&'static str>,
}

#[derive(Debug, Serialize)]
struct ReplyMessage {
    role: &'static str,
    /// `null` when the model only called tools.
    content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<ReplyToolCall>,
}

#[derive(Debug, Serialize)]
struct ReplyToolCall {
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    function: ReplyFunction,
}

#[derive(Debug, Serialize)]
struct ReplyFunction {
    name: String,
    arguments: String,
}

/// A completion as OpenAI's `chat.completion` JSON. An OpenAI upstream's
/// body passes through as it came (route says where it went in headers,
/// not by rewriting bodies). Any other is rendered from its reply: `id`,
/// `object`, `created`, `model` (the candidate's), one choice with
/// `message{role:"assistant",content}` (plus `reasoning_content` when the
/// provider returned reasoning, and `tool_calls` when the model called
/// tools, with `content` null if it wrote nothing else), `finish_reason`
/// mapped by [`openai_finish_reason`] (`tool_calls` when the model called
/// tools and otherwise stopped normally: Gemini says `STOP` then), and
/// `usage` when the provider reported both token counts.
pub fn completion_body(c: Completion) -> ChatCompletionBody {
    match c.body {
        Some(body) => ChatCompletionBody::Native(body),
        None => ChatCompletionBody::Rendered(completion(
            c.reply,
            completion_id(c.upstream_id.as_deref()),
            c.model,
        )),
    }
}

fn completion(reply: ChatReply, id: String, model: String) -> ChatCompletion {
    let called = !reply.tool_calls.is_empty();
    let content = (!reply.text.is_empty() || !called).then_some(reply.text);
    let tool_calls = reply
        .tool_calls
        .into_iter()
        .map(|c| ReplyToolCall {
            id: c.id,
            kind: "function",
            function: ReplyFunction {
                name: c.name,
                arguments: c.arguments,
            },
        })
        .collect();
    ChatCompletion {
        id,
        object: "chat.completion",
        created: unix_now(),
        model,
        choices: [ReplyChoice {
            index: 0,
            message: ReplyMessage {
                role: "assistant",
                content,
                reasoning_content: reply.reasoning,
                tool_calls,
            },
            finish_reason: reply
                .finish_reason
                .as_deref()
                .map(|r| finish_with_calls(r, called)),
        }],
        usage: reply.usage.and_then(TokenUsage::of),
    }
}

/// `chatcmpl-` and the upstream's id, or a random one when it gave none.
fn completion_id(upstream: Option<&str>) -> String {
    match upstream.filter(|s| !s.is_empty()) {
        Some(id) => format!("chatcmpl-{id}"),
        None => format!("chatcmpl-{:016x}", rand::random::<u64>()),
    }
}

/// [`openai_finish_reason`], except that a reply that called tools and
/// stopped normally ends with `tool_calls`, as OpenAI's do.
fn finish_with_calls(reason: &str, called: bool) -> &'static str {
    match openai_finish_reason(reason) {
        "stop" if called => "tool_calls",
        r => r,
    }
}

/// One `chat.completion.chunk`, borrowing the writer's id and model:
/// fields in OpenAI's order, `usage` only on the usage chunk (whose
/// `choices` is empty).
#[derive(Serialize)]
struct Chunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: &'a [ChunkChoice<'a>],
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<TokenUsage>,
}

#[derive(Serialize)]
struct ChunkChoice<'a> {
    index: u32,
    delta: Delta<'a>,
    finish_reason: Option<&'static str>,
}

/// A chunk's `delta`: `role` first on the first chunk, as OpenAI writes
/// it, then the one field the delta carries (none on the finish chunk).
#[derive(Default, Serialize)]
struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<[CallDelta<'a>; 1]>,
}

/// A tool call's delta: `id` and `type` on its first delta only, then
/// `function` with a fragment of `arguments` (and `name`, first only).
#[derive(Serialize)]
struct CallDelta<'a> {
    index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    function: FunctionDelta<'a>,
}

#[derive(Serialize)]
struct FunctionDelta<'a> {
    arguments: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
}

/// Writes one served stream's events as `chat.completion.chunk`s. An
/// OpenAI upstream's chunks pass through as they came (the same-dialect
/// pass-through: nothing parsed or rebuilt here); any other's deltas
/// become chunks that share one `id`, `created` and `model`, the first
/// naming the role `assistant`, tool calls as `delta.tool_calls` (the
/// first delta of a call with its `id`, `type` and `name`, later ones
/// with fragments of `arguments` only), and the usage chunk is written
/// only for a client that asked for it (`stream_options.include_usage`).
#[derive(Debug)]
pub struct ChunkWriter {
    id: String,
    created: u64,
    model: String,
    wants_usage: bool,
    role_sent: bool,
    /// A tool call has been written: a normal stop is `tool_calls`.
    called: bool,
    /// The upstream's own chunks are being forwarded: the deltas they
    /// hold are not written again.
    forwarding: bool,
}

impl ChunkWriter {
    /// For a reply from `model` (the candidate's id), to a client that
    /// asked for the usage chunk or not.
    pub fn new(model: &str, wants_usage: bool) -> ChunkWriter {
        ChunkWriter {
            id: completion_id(None),
            created: unix_now(),
            model: model.to_string(),
            wants_usage,
            role_sent: false,
            called: false,
            forwarding: false,
        }
    }

    /// The `data:` event `ev` becomes, if any. The end and failures are
    /// not chunks: [`super::event_stream`] writes them.
    pub fn chunk(&mut self, ev: StreamEvent) -> Option<String> {
        match ev {
            // Ahead of its deltas. The usage-only chunk (no choices),
            // which the OpenAI dialect always asks for, reaches only a
            // client that asked for it; a cheap look at two fields, so the
            // pass-through stays lean.
            StreamEvent::Raw(v) => {
                self.forwarding = true;
                let usage_only = v["choices"].as_array().is_none_or(|c| c.is_empty())
                    && v.get("usage").is_some_and(|u| !u.is_null());
                (!usage_only || self.wants_usage).then(|| sse_event(None, &v))
            }
            StreamEvent::Delta(_) | StreamEvent::Usage { .. } if self.forwarding => None,
            StreamEvent::Usage { counts, .. } => {
                let usage = TokenUsage::of(counts).filter(|_| self.wants_usage)?;
                Some(self.frame(&[], Some(usage)))
            }
            StreamEvent::Delta(d) => match d {
                ReplyDelta::Start { id } => {
                    if id.is_some() {
                        self.id = completion_id(id.as_deref());
                    }
                    None
                }
                ReplyDelta::Text(t) => Some(self.choice(
                    Delta {
                        content: Some(&t),
                        ..Delta::default()
                    },
                    None,
                )),
                ReplyDelta::Reasoning(r) => Some(self.choice(
                    Delta {
                        reasoning_content: Some(&r),
                        ..Delta::default()
                    },
                    None,
                )),
                ReplyDelta::ToolCall(t) => {
                    self.called = true;
                    let call = CallDelta {
                        index: t.index,
                        id: t.id.as_deref(),
                        kind: t.id.is_some().then_some("function"),
                        function: FunctionDelta {
                            arguments: &t.arguments,
                            name: t.name.as_deref(),
                        },
                    };
                    Some(self.choice(
                        Delta {
                            tool_calls: Some([call]),
                            ..Delta::default()
                        },
                        None,
                    ))
                }
                ReplyDelta::Finish(reason) => {
                    let reason = finish_with_calls(&reason, self.called);
                    Some(self.choice(Delta::default(), Some(reason)))
                }
                // Carried by the events above, never as deltas.
                ReplyDelta::Usage(_)
                | ReplyDelta::Raw(_)
                | ReplyDelta::Error(_)
                | ReplyDelta::Done => None,
            },
            StreamEvent::Failed(_) | StreamEvent::Stalled | StreamEvent::Done => None,
        }
    }

    fn frame(&self, choices: &[ChunkChoice<'_>], usage: Option<TokenUsage>) -> String {
        sse_event(
            None,
            &Chunk {
                id: &self.id,
                object: "chat.completion.chunk",
                created: self.created,
                model: &self.model,
                choices,
                usage,
            },
        )
    }

    /// One choice's chunk; the first one the client gets names the role,
    /// ahead of the rest of the delta, as OpenAI itself writes it.
    fn choice(&mut self, mut delta: Delta<'_>, finish_reason: Option<&'static str>) -> String {
        if !self.role_sent {
            delta.role = Some("assistant");
            self.role_sent = true;
        }
        let choice = ChunkChoice {
            index: 0,
            delta,
            finish_reason,
        };
        self.frame(std::slice::from_ref(&choice), None)
    }
}

impl Chunks for ChunkWriter {
    fn chunk(&mut self, ev: StreamEvent) -> Option<String> {
        ChunkWriter::chunk(self, ev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::upstream::dialect::{
        self, Dialect, ProviderError, ReplyError, Usage, chunk_stream, map_byte_stream,
        parse_success, wire,
    };
    use eventsource_stream::Event;
    use futures_util::StreamExt;
    use serde_json::json;
    use std::convert::Infallible;

    /// What the non-streamed path does with a success body: parse it as
    /// `send::complete` does, then render it.
    fn reply_to_openai(dialect: Dialect, body: &[u8], model: &str) -> Result<Value, ReplyError> {
        let (reply, json) = parse_success(dialect, body)?;
        let upstream_id = wire(dialect).reply_id(&json).map(str::to_string);
        let body = completion_body(Completion {
            reply,
            body: (dialect == Dialect::Openai).then_some(json),
            upstream_id,
            model: model.to_string(),
            dropped: Vec::new(),
        });
        Ok(serde_json::to_value(body).unwrap())
    }

    #[test]
    fn anthropic_reply_becomes_a_chat_completion() {
        let body = br#"{"id":"msg_01","type":"message","role":"assistant","model":"claude-x","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"14"}],"stop_reason":"max_tokens","usage":{"input_tokens":10,"output_tokens":2}}"#;
        let v = reply_to_openai(Dialect::Anthropic, body, "anthropic::claude-x").unwrap();
        assert_eq!(v["id"], "chatcmpl-msg_01");
        assert_eq!(v["object"], "chat.completion");
        assert!(v["created"].as_u64().unwrap() > 1_700_000_000);
        assert_eq!(v["model"], "anthropic::claude-x");
        assert_eq!(
            v["choices"][0],
            json!({"index":0,"message":{"role":"assistant","content":"14","reasoning_content":"hmm"},"finish_reason":"length"})
        );
        assert_eq!(
            v["usage"],
            json!({"prompt_tokens":10,"completion_tokens":2,"total_tokens":12})
        );
    }

    #[test]
    fn gemini_reply_becomes_a_chat_completion() {
        let body = br#"{"candidates":[{"content":{"role":"model","parts":[{"text":"1"},{"text":"4"}]},"finishReason":"SAFETY"}],"responseId":"abc"}"#;
        let v = reply_to_openai(Dialect::Gemini, body, "gemini-2.5-flash").unwrap();
        assert_eq!(v["id"], "chatcmpl-abc");
        assert_eq!(v["choices"][0]["message"]["content"], "14");
        assert_eq!(v["choices"][0]["finish_reason"], "content_filter");
        assert!(
            v["choices"][0]["message"]
                .get("reasoning_content")
                .is_none()
        );
        // Usage is left out when the provider did not report it.
        assert!(v.get("usage").is_none());
        let other = reply_to_openai(
            Dialect::Gemini,
            br#"{"candidates":[{"content":{"parts":[{"text":"x"}]}}]}"#,
            "m",
        )
        .unwrap();
        assert!(other["id"].as_str().unwrap().starts_with("chatcmpl-"));
        assert_eq!(other["choices"][0]["finish_reason"], Value::Null);
    }

    #[test]
    fn openai_reply_passes_through_unchanged() {
        let body = br#"{"id":"gen-1","object":"chat.completion","model":"upstream/model","choices":[{"index":0,"message":{"role":"assistant","content":"14"},"finish_reason":"stop"}],"provider":"X"}"#;
        let v = reply_to_openai(Dialect::Openai, body, "label").unwrap();
        assert_eq!(v, serde_json::from_slice::<Value>(body).unwrap());
    }

    #[test]
    fn errors_in_a_success_body_stay_errors() {
        let body = br#"{"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"slow down"}}}"#;
        assert_eq!(
            reply_to_openai(Dialect::Openai, body, "m"),
            Err(ReplyError::Embedded(ProviderError {
                message: "Provider returned error: slow down".into(),
                code: None,
                embedded_status: Some(429),
            }))
        );
        let choice_error = br#"{"choices":[{"finish_reason":"error","error":{"message":"upstream died","code":502}}]}"#;
        assert!(matches!(
            reply_to_openai(Dialect::Openai, choice_error, "m"),
            Err(ReplyError::Embedded(_))
        ));
        assert!(matches!(
            reply_to_openai(Dialect::Anthropic, br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#, "m"),
            Err(ReplyError::Embedded(e)) if e.code.as_deref() == Some("overloaded_error")
        ));
        assert_eq!(
            reply_to_openai(Dialect::Gemini, b"", "m"),
            Err(ReplyError::Empty)
        );
    }

    // The stream tests: each dialect's recorded stream through its mapper
    // and this surface's writer, as a served stream runs them.

    /// What the client gets for one upstream event.
    #[derive(Debug, Clone, PartialEq)]
    enum StreamItem {
        Chunk(Value),
        Done,
        Error(ProviderError),
    }

    /// The dialect's mapper and this surface's writer together, named as
    /// the mapper was when it wrote OpenAI chunks itself. An OpenAI
    /// upstream's chunks pass through natively, as in `send`.
    struct StreamMapper {
        inner: dialect::StreamMapper,
        writer: ChunkWriter,
    }

    impl StreamMapper {
        fn new(d: Dialect, model: &str) -> StreamMapper {
            StreamMapper {
                inner: dialect::StreamMapper::new(d).native(d == Dialect::Openai),
                writer: ChunkWriter::new(model, false),
            }
        }

        fn include_usage(mut self, yes: bool) -> StreamMapper {
            self.writer.wants_usage = yes;
            self
        }

        fn map(&mut self, ev: &Event) -> Vec<StreamItem> {
            let deltas = self.inner.map(ev);
            self.render(deltas)
        }

        fn finish(&mut self) -> Vec<StreamItem> {
            let deltas = self.inner.finish();
            self.render(deltas)
        }

        fn usage(&self) -> Option<Usage> {
            self.inner.usage()
        }

        fn is_done(&self) -> bool {
            self.inner.is_done()
        }

        fn render(&mut self, deltas: impl IntoIterator<Item = ReplyDelta>) -> Vec<StreamItem> {
            deltas
                .into_iter()
                .filter_map(|d| match d {
                    ReplyDelta::Error(e) => Some(StreamItem::Error(e)),
                    ReplyDelta::Done => Some(StreamItem::Done),
                    d => self
                        .writer
                        .chunk(StreamEvent::from_delta(d))
                        .map(|ev| StreamItem::Chunk(data(&ev))),
                })
                .collect()
        }
    }

    /// The JSON of one `data:` event, which is all the event holds.
    fn data(ev: &str) -> Value {
        let json = ev
            .strip_prefix("data: ")
            .and_then(|e| e.strip_suffix("\n\n"))
            .unwrap_or_else(|| panic!("not one data event: {ev:?}"));
        serde_json::from_str(json).unwrap()
    }

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
        let mut m = StreamMapper::new(dialect, "p::model").include_usage(include_usage);
        map_pieces(&mut m, pieces).await
    }

    /// The chunks `m` renders from a stream delivered in `pieces`.
    async fn map_pieces(
        m: &mut StreamMapper,
        pieces: Vec<Result<Vec<u8>, Infallible>>,
    ) -> Vec<StreamItem> {
        let deltas: Vec<ReplyDelta> = map_byte_stream(
            futures_util::stream::iter(pieces),
            m.inner.clone(),
            |e| match e {},
        )
        .map(|r| r.unwrap())
        .collect()
        .await;
        m.render(deltas)
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

    const ANTHROPIC_TOOLS: &str =
        include_str!("../../../tests/fixtures/dialects/anthropic-tool-use.sse");
    const GEMINI_TOOLS: &str =
        include_str!("../../../tests/fixtures/dialects/gemini-function-call.sse");

    /// The tool calls a client assembles from a stream's chunks, as
    /// (id, name, arguments), checking on the way what OpenAI clients
    /// rely on: a call's first delta has its id, `type: "function"` and
    /// name, later ones only fragments of arguments, and indices count up
    /// from 0.
    fn streamed_calls(items: &[StreamItem]) -> Vec<(String, String, String)> {
        let mut calls: Vec<(String, String, String)> = Vec::new();
        for c in chunks(items) {
            let Some(deltas) = c.pointer("/choices/0/delta/tool_calls") else {
                continue;
            };
            for d in deltas.as_array().unwrap() {
                let i = d["index"].as_u64().unwrap() as usize;
                let args = d["function"]["arguments"].as_str().unwrap();
                if i == calls.len() {
                    assert_eq!(d["type"], "function", "{d}");
                    calls.push((
                        d["id"].as_str().expect("a first delta has the id").into(),
                        d["function"]["name"].as_str().expect("and the name").into(),
                        args.into(),
                    ));
                } else {
                    assert!(i < calls.len(), "index {i} skips ahead: {d}");
                    assert!(d.get("id").is_none() && d["function"].get("name").is_none());
                    calls[i].2.push_str(args);
                }
            }
        }
        calls
    }

    fn reply_calls(v: &Value) -> Vec<(String, String, String)> {
        v["choices"][0]["message"]["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                assert_eq!(c["type"], "function");
                let s = |p: &str| c.pointer(p).unwrap().as_str().unwrap().to_string();
                (s("/id"), s("/function/name"), s("/function/arguments"))
            })
            .collect()
    }

    fn parsed(args: &str) -> Value {
        serde_json::from_str(args).unwrap()
    }

    #[test]
    fn anthropic_tool_use_becomes_tool_calls() {
        let body = include_bytes!("../../../tests/fixtures/dialects/anthropic-tool-use.json");
        let v = reply_to_openai(Dialect::Anthropic, body, "a::claude").unwrap();
        let choice = &v["choices"][0];
        assert_eq!(
            choice["message"]["content"],
            "I'll check the current weather in San Francisco for you."
        );
        assert_eq!(choice["finish_reason"], "tool_calls");
        let calls = reply_calls(&v);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].0, "toolu_01A09q90qw90lq917835lq9");
        assert_eq!(calls[0].1, "get_weather");
        assert_eq!(
            parsed(&calls[0].2),
            json!({"location": "San Francisco, CA", "unit": "celsius"})
        );
    }

    #[test]
    fn gemini_function_calls_become_tool_calls_with_stable_ids() {
        let body = include_bytes!("../../../tests/fixtures/dialects/gemini-function-call.json");
        let v = reply_to_openai(Dialect::Gemini, body, "g::flash").unwrap();
        let choice = &v["choices"][0];
        // Only calls: no content, and Gemini's STOP is a tool_calls finish.
        assert_eq!(choice["message"]["content"], Value::Null);
        assert_eq!(choice["finish_reason"], "tool_calls");
        let calls = reply_calls(&v);
        let names: Vec<&str> = calls.iter().map(|c| c.1.as_str()).collect();
        assert_eq!(names, ["power_disco_ball", "start_music", "dim_lights"]);
        assert_eq!(
            parsed(&calls[1].2),
            json!({"energetic": true, "loud": true})
        );
        let ids: std::collections::BTreeSet<&str> = calls.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(ids.len(), 3, "{ids:?}");
        assert!(ids.iter().all(|id| id.starts_with("call_")));
        // The same reply parsed again names its calls the same.
        assert_eq!(
            reply_calls(&reply_to_openai(Dialect::Gemini, body, "g::flash").unwrap()),
            calls
        );
    }

    #[tokio::test]
    async fn anthropic_tool_stream_becomes_tool_call_deltas() {
        let items = run(Dialect::Anthropic, ANTHROPIC_TOOLS, false).await;
        assert_consistent(&items, "p::model");
        assert_eq!(items.last(), Some(&StreamItem::Done));
        assert_eq!(
            joined(&items, "content"),
            "Okay, let's check the weather for San Francisco, CA:"
        );
        let calls = streamed_calls(&items);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].0, "toolu_01T1x1fJ34qAmk2tNTrN7Up6");
        assert_eq!(calls[0].1, "get_weather");
        assert_eq!(
            parsed(&calls[0].2),
            json!({"location": "San Francisco, CA", "unit": "fahrenheit"})
        );
        assert_eq!(finish_reasons(&items), ["tool_calls"]);
    }

    #[tokio::test]
    async fn gemini_function_call_stream_matches_the_whole_reply() {
        let items = run(Dialect::Gemini, GEMINI_TOOLS, false).await;
        assert_consistent(&items, "p::model");
        assert_eq!(items.last(), Some(&StreamItem::Done));
        let streamed = streamed_calls(&items);
        let body = include_bytes!("../../../tests/fixtures/dialects/gemini-function-call.json");
        let whole = reply_calls(&reply_to_openai(Dialect::Gemini, body, "m").unwrap());
        // Same ids, names and arguments, streamed or not.
        assert_eq!(streamed, whole);
        assert_eq!(finish_reasons(&items), ["tool_calls"]);
    }

    /// JSON mode on Anthropic is a forced tool: its input is the content,
    /// the call is never shown, and the reply ends as a plain stop.
    #[tokio::test]
    async fn anthropic_json_mode_is_content_not_a_call() {
        let plan = dialect::ReplyPlan { json_tool: true };
        let body = br#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"tool_use","id":"toolu_9","name":"json_output","input":{"city":"Paris","temp":21}}],"stop_reason":"tool_use","usage":{"input_tokens":5,"output_tokens":9}}"#;
        let (mut reply, _) = parse_success(Dialect::Anthropic, body).unwrap();
        plan.apply(&mut reply);
        let v = serde_json::to_value(completion_body(Completion {
            reply,
            body: None,
            upstream_id: None,
            model: "a::c".into(),
            dropped: Vec::new(),
        }))
        .unwrap();
        let choice = &v["choices"][0];
        assert_eq!(
            parsed(choice["message"]["content"].as_str().unwrap()),
            json!({"city":"Paris","temp":21})
        );
        assert!(choice["message"].get("tool_calls").is_none());
        assert_eq!(choice["finish_reason"], "stop");

        let stream = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_2\",\"usage\":{\"input_tokens\":5}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_9\",\"name\":\"json_output\",\"input\":{}}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\": \\\"Pa\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"ris\\\"}\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":7}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        );
        let mut m = StreamMapper::new(Dialect::Anthropic, "a::c");
        m.inner = m.inner.clone().plan(plan);
        let pieces = vec![Ok::<_, Infallible>(stream.as_bytes().to_vec())];
        let items = map_pieces(&mut m, pieces).await;
        assert_eq!(parsed(&joined(&items, "content")), json!({"city": "Paris"}));
        assert!(streamed_calls(&items).is_empty());
        assert_eq!(finish_reasons(&items), ["stop"]);
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
        let mut m = StreamMapper::new(Dialect::Gemini, "g");
        let items: Vec<_> = chunk_stream(resp, m.inner.clone()).collect().await;
        let items: Vec<StreamItem> = m.render(items.into_iter().map(Result::unwrap));
        assert_eq!(joined(&items, "content"), "Hello there!");
        assert_eq!(items.last(), Some(&StreamItem::Done));
    }

    #[tokio::test]
    async fn the_first_rendered_chunk_names_the_role_first() {
        let items = run(Dialect::Anthropic, ANTHROPIC, false).await;
        let first = serde_json::to_string(&chunks(&items)[0]["choices"][0]["delta"]).unwrap();
        assert_eq!(first, r#"{"role":"assistant","content":""}"#);
        let items = run(Dialect::Gemini, GEMINI, false).await;
        let first = serde_json::to_string(&chunks(&items)[0]["choices"][0]["delta"]).unwrap();
        assert!(first.starts_with(r#"{"role":"assistant","#), "{first}");
    }
}
