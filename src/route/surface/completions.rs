//! The legacy OpenAI Completions surface: `POST /v1/completions`, which
//! editors use for ghost text, served through chat models.
//!
//! - [`parse`] reads a request ([`CompletionsRequest`]): its `prompt` (a
//!   string, or a list of one) becomes one user message of a chat
//!   request, and the other fields are read as Chat Completions reads them
//!   (`max_tokens`, `temperature`, `top_p`, `stop`, `stream`,
//!   `stream_options`, `n` of 1, `user`, …). A non-empty `suffix` is
//!   kept: it is the need `suffix`, which no chat candidate meets
//!   (`skip:suffix`). Fields that change the answer in a way a chat model
//!   cannot give are refused with a 400 naming them: several prompts,
//!   token arrays, `echo`, `best_of` above 1, `logprobs`, `n` above 1.
//! - replies as `text_completion` JSON ([`text_completion`]) and streams
//!   as `text_completion` chunks ([`TextWriter`], written by
//!   [`super::event_stream`]), both from [`TextCompletion`]; errors are
//!   OpenAI's ([`ApiError`]).
//!
//! A reply's tool calls and reasoning are not shown: the request offered
//! no tools, and a completion has only text.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::route::domain::StreamEvent;
use crate::route::send::Completion;
use crate::upstream::dialect::{ChatRequest, ReplyDelta, openai_object};

use super::error::{ApiError, invalid_request};
use super::{Chunks, TokenUsage, openai_finish_reason, sse_event, unix_now};

/// A completions request: the fields this surface reads itself, and every
/// other one in `extra`, in the order sent, for Chat Completions to read.
#[derive(Debug, Deserialize)]
pub struct CompletionsRequest {
    #[serde(default)]
    messages: Present,
    prompt: Option<Value>,
    suffix: Option<Value>,
    echo: Option<Value>,
    best_of: Option<Value>,
    logprobs: Option<Value>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// Whether a field was sent at all, `null` included.
#[derive(Debug, Default)]
struct Present(bool);

impl<'de> Deserialize<'de> for Present {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Present, D::Error> {
        serde::de::IgnoredAny::deserialize(d)?;
        Ok(Present(true))
    }
}

/// A completions request as the chat request that serves it: the prompt
/// as one user message, a non-empty `suffix` kept (the need `suffix`),
/// every other field as Chat Completions reads it. A 400 names what a
/// chat model cannot serve.
pub fn parse(body: &[u8]) -> Result<ChatRequest, ApiError> {
    // Read as an object first, as Chat Completions reads its body: the
    // same refusal of what is not one, and a key sent twice counts once.
    let obj = openai_object(body).map_err(invalid_request)?;
    let mut req = CompletionsRequest::deserialize(Value::Object(obj))
        .map_err(|e| ApiError::invalid("invalid_request", e.to_string()))?;
    if req.messages.0 {
        return Err(ApiError::invalid(
            "invalid_request",
            "'messages' is a chat field: send a chat request to /v1/chat/completions, \
             or a 'prompt' here",
        ));
    }
    let prompt = prompt(req.prompt.take())?;
    refuse_answer_changers(&req)?;
    let suffix = match req.suffix {
        None => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            return Err(ApiError::invalid(
                "invalid_request",
                "'suffix' must be a string",
            ));
        }
    };
    let mut obj = req.extra;
    obj.insert("messages".into(), user_message(prompt));
    if let Some(s) = suffix {
        obj.insert("suffix".into(), Value::String(s));
    }
    ChatRequest::from_openai_value(Value::Object(obj)).map_err(invalid_request)
}

/// `[{"role": "user", "content": prompt}]`, as Chat Completions reads
/// messages.
fn user_message(prompt: String) -> Value {
    let mut m = Map::with_capacity(2);
    m.insert("role".into(), Value::from("user"));
    m.insert("content".into(), Value::String(prompt));
    Value::Array(vec![Value::Object(m)])
}

/// The one prompt: a string, or a list of one string.
fn prompt(v: Option<Value>) -> Result<String, ApiError> {
    let bad = |msg: &str| Err(ApiError::invalid("invalid_prompt", msg.to_string()));
    match v {
        None => bad("Missing required parameter: 'prompt'."),
        Some(Value::String(s)) => Ok(s),
        Some(Value::Array(mut items)) => match items.as_mut_slice() {
            [Value::String(s)] => Ok(std::mem::take(s)),
            [] => bad("'prompt' is an empty list: send one prompt, as a string"),
            items if items.iter().all(Value::is_string) => bad(
                "'prompt' holds several prompts: route serves one prompt per request \
                 (each is a chat request); send them one at a time",
            ),
            _ => bad(
                "'prompt' as token ids is not served: route serves chat models, whose \
                 tokens it does not know; send the prompt as a string",
            ),
        },
        Some(_) => bad("'prompt' must be a string, or a list of one string"),
    }
}

/// Refuse the fields that change the answer in a way a chat model cannot
/// give. The ones that ask for what it gives anyway (`echo: false`,
/// `best_of: 1`, `logprobs: null`) are read here and not passed on.
fn refuse_answer_changers(req: &CompletionsRequest) -> Result<(), ApiError> {
    let refuse = |field: &str, why: &str| {
        Err(ApiError::invalid(
            "unsupported_parameter",
            format!("'{field}' is not supported on /v1/completions: {why}"),
        ))
    };
    if !matches!(req.echo, None | Some(Value::Bool(false))) {
        return refuse(
            "echo",
            "a chat model's reply does not repeat the prompt; prepend it yourself",
        );
    }
    if req.best_of.as_ref().is_some_and(|v| v.as_u64() != Some(1)) {
        return refuse(
            "best_of",
            "choosing the best of several answers needs their log probabilities, \
             which chat models do not give here",
        );
    }
    if req.logprobs.is_some() {
        return refuse(
            "logprobs",
            "route serves chat models and does not return token log probabilities",
        );
    }
    // `n` stays in `extra`, where Chat Completions reads it.
    if req
        .extra
        .get("n")
        .and_then(Value::as_u64)
        .is_some_and(|n| n > 1)
    {
        return refuse(
            "n",
            "route returns one choice per completion; send the request n times",
        );
    }
    Ok(())
}

/// `cmpl-` and the upstream's id (without its own `chatcmpl-`), or a
/// random one when it gave none.
fn completion_id(upstream: Option<&str>) -> String {
    match upstream.filter(|s| !s.is_empty()) {
        Some(id) => format!("cmpl-{}", id.strip_prefix("chatcmpl-").unwrap_or(id)),
        None => format!("cmpl-{:016x}", rand::random::<u64>()),
    }
}

/// A finish reason as a completion gives it: `stop`, `length` or
/// `content_filter` (a tool call, which the request did not offer, ends
/// as `stop`).
fn finish_reason(reason: &str) -> &'static str {
    match openai_finish_reason(reason) {
        "tool_calls" => "stop",
        r => r,
    }
}

/// OpenAI's `text_completion`, a whole reply or one chunk of a stream
/// (the two have one shape), fields in OpenAI's order; `choices` is empty
/// on the usage chunk.
#[derive(Debug, Serialize)]
pub struct TextCompletion<'a> {
    /// A chunk borrows its writer's; a whole reply owns its own.
    id: Cow<'a, str>,
    object: &'static str,
    created: u64,
    model: &'a str,
    #[serde(serialize_with = "zero_or_one")]
    choices: Option<TextChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<TokenUsage>,
}

#[derive(Debug, Serialize)]
struct TextChoice<'a> {
    text: &'a str,
    index: u32,
    /// Always `null`: log probabilities are refused.
    logprobs: (),
    finish_reason: Option<&'static str>,
}

/// A list of none or one, without allocating one.
fn zero_or_one<S: serde::Serializer, T: Serialize>(
    one: &Option<T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(one)
}

impl<'a> TextChoice<'a> {
    fn new(text: &'a str, finish_reason: Option<&'static str>) -> TextChoice<'a> {
        TextChoice {
            text,
            index: 0,
            logprobs: (),
            finish_reason,
        }
    }
}

/// A completion as OpenAI's `text_completion` JSON: `id` (`cmpl-…`),
/// `object`, `created`, `model` (the candidate's), one choice with the
/// reply's `text`, `logprobs: null` and its `finish_reason`, and `usage`
/// when the provider reported both token counts.
pub fn text_completion(c: &Completion) -> TextCompletion<'_> {
    let finish = c.reply.finish_reason.as_deref().map(finish_reason);
    TextCompletion {
        id: Cow::Owned(completion_id(c.upstream_id.as_deref())),
        object: "text_completion",
        created: unix_now(),
        model: &c.model,
        choices: Some(TextChoice::new(&c.reply.text, finish)),
        usage: c.reply.usage.and_then(TokenUsage::of),
    }
}

/// Writes one served stream's events as `text_completion` chunks that
/// share one `id`, `created` and `model`: one per piece of text
/// (`finish_reason` null), then one with the `finish_reason` and no text,
/// and, for a client that asked (`stream_options.include_usage`), a last
/// one with no choices and the `usage`. Reasoning and tool calls are not
/// text, and are left out.
#[derive(Debug)]
pub struct TextWriter {
    id: String,
    created: u64,
    model: String,
    wants_usage: bool,
}

impl TextWriter {
    /// For a reply from `model` (the candidate's id), to a client that
    /// asked for the usage chunk or not.
    pub fn new(model: &str, wants_usage: bool) -> TextWriter {
        TextWriter {
            id: completion_id(None),
            created: unix_now(),
            model: model.to_string(),
            wants_usage,
        }
    }

    fn frame(&self, choice: Option<TextChoice<'_>>, usage: Option<TokenUsage>) -> String {
        sse_event(
            None,
            &TextCompletion {
                id: Cow::Borrowed(&self.id),
                object: "text_completion",
                created: self.created,
                model: &self.model,
                choices: choice,
                usage,
            },
        )
    }
}

impl Chunks for TextWriter {
    fn chunk(&mut self, ev: StreamEvent) -> Option<String> {
        match ev {
            StreamEvent::Usage { counts, .. } => {
                let usage = TokenUsage::of(counts).filter(|_| self.wants_usage)?;
                Some(self.frame(None, Some(usage)))
            }
            StreamEvent::Delta(ReplyDelta::Start { id: Some(id) }) => {
                self.id = completion_id(Some(&id));
                None
            }
            StreamEvent::Delta(ReplyDelta::Text(t)) => {
                Some(self.frame(Some(TextChoice::new(&t, None)), None))
            }
            StreamEvent::Delta(ReplyDelta::Finish(reason)) => {
                let finish = finish_reason(&reason);
                Some(self.frame(Some(TextChoice::new("", Some(finish))), None))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::dialect::{ChatMessage, ChatReply, Need, ToolCall, Usage};
    use serde_json::json;

    fn as_json(v: TextCompletion<'_>) -> Value {
        serde_json::to_value(v).unwrap()
    }

    /// The JSON of one `data:` event, which is all the event holds.
    fn data(ev: String) -> Value {
        let json = ev
            .strip_prefix("data: ")
            .and_then(|e| e.strip_suffix("\n\n"))
            .unwrap_or_else(|| panic!("not one data event: {ev:?}"));
        serde_json::from_str(json).unwrap()
    }

    fn parsed(body: Value) -> Result<ChatRequest, ApiError> {
        parse(body.to_string().as_bytes())
    }

    #[test]
    fn the_prompt_becomes_one_user_message_and_the_options_stay() {
        let req = parsed(json!({
            "model": "auto", "prompt": "def add(a, b):", "max_tokens": 64,
            "temperature": 0.2, "top_p": 0.9, "stop": "\n\n", "stream": true,
            "stream_options": {"include_usage": true}, "n": 1, "user": "u1",
            "echo": false, "best_of": 1, "logprobs": null, "suffix": "",
        }))
        .unwrap();
        assert_eq!(req.model, "auto");
        assert_eq!(req.messages, [ChatMessage::user("def add(a, b):")]);
        assert_eq!(req.max_tokens, Some(64));
        assert_eq!(req.temperature, Some(0.2));
        assert_eq!(req.top_p, Some(0.9));
        assert_eq!(req.stop, ["\n\n"]);
        assert!(req.stream && req.wants_stream_usage());
        assert_eq!(req.extra["user"], "u1");
        for gone in ["prompt", "echo", "best_of", "logprobs", "suffix"] {
            assert!(!req.extra.contains_key(gone), "{gone}: {:?}", req.extra);
        }
        // An empty suffix asks for nothing.
        assert!(req.needs().is_empty());
        let listed = parsed(json!({"prompt": ["x"], "stop": ["a", "b"]})).unwrap();
        assert_eq!(listed.stop, ["a", "b"]);
        assert_eq!(listed.messages, [ChatMessage::user("x")]);
    }

    #[test]
    fn a_suffix_is_the_need_suffix() {
        let req = parsed(json!({"prompt": "fn main() {", "suffix": "}"})).unwrap();
        assert_eq!(req.extra["suffix"], "}");
        assert_eq!(req.needs().into_iter().collect::<Vec<_>>(), [Need::Suffix]);
    }

    #[test]
    fn what_a_chat_model_cannot_serve_is_a_400_naming_it() {
        for (body, names) in [
            (json!({"prompt": ["a", "b"]}), "several prompts"),
            (json!({"prompt": [1, 2, 3]}), "token ids"),
            (json!({"prompt": [[1, 2]]}), "token ids"),
            (json!({"prompt": []}), "empty list"),
            (json!({"prompt": 7}), "'prompt' must be"),
            (json!({"model": "auto"}), "'prompt'"),
            (json!({"prompt": "x", "echo": true}), "'echo'"),
            (json!({"prompt": "x", "best_of": 3}), "'best_of'"),
            (json!({"prompt": "x", "logprobs": 2}), "'logprobs'"),
            (json!({"prompt": "x", "logprobs": 0}), "'logprobs'"),
            (json!({"prompt": "x", "n": 2}), "'n'"),
            (json!({"prompt": "x", "suffix": 3}), "'suffix'"),
            (
                json!({"prompt": "x", "messages": []}),
                "/v1/chat/completions",
            ),
        ] {
            let e = parsed(body.clone()).unwrap_err();
            assert_eq!(e.status.as_u16(), 400, "{body}");
            assert!(e.message.contains(names), "{body}: {}", e.message);
        }
        let e = parse(b"{not json").unwrap_err();
        assert_eq!((e.status.as_u16(), e.code), (400, "invalid_request"));
        let e = parse(b"[1]").unwrap_err();
        assert!(e.message.contains("JSON object"), "{}", e.message);
    }

    fn completion(reply: ChatReply, upstream_id: Option<&str>) -> Completion {
        Completion {
            reply,
            body: None,
            upstream_id: upstream_id.map(str::to_string),
            model: "a::m".into(),
            dropped: Vec::new(),
        }
    }

    #[test]
    fn a_reply_is_a_text_completion() {
        let reply = ChatReply {
            text: "14".into(),
            reasoning: Some("hmm".into()),
            finish_reason: Some("max_tokens".into()),
            usage: Some(Usage {
                input_tokens: Some(10),
                output_tokens: Some(2),
            }),
            ..Default::default()
        };
        let v = as_json(text_completion(&completion(reply, Some("msg_01"))));
        assert_eq!(v["id"], "cmpl-msg_01");
        assert_eq!(v["object"], "text_completion");
        assert!(v["created"].as_u64().unwrap() > 1_700_000_000);
        assert_eq!(v["model"], "a::m");
        assert_eq!(
            v["choices"],
            json!([{"text": "14", "index": 0, "logprobs": null, "finish_reason": "length"}])
        );
        assert_eq!(
            v["usage"],
            json!({"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12})
        );
        // Tool calls are not text; the finish reason stays a completion's.
        let called = ChatReply {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: "c".into(),
                name: "f".into(),
                arguments: "{}".into(),
            }],
            finish_reason: Some("tool_calls".into()),
            ..Default::default()
        };
        let v = as_json(text_completion(&completion(called, Some("chatcmpl-9"))));
        assert_eq!(v["id"], "cmpl-9");
        assert_eq!(v["choices"][0]["text"], "");
        assert_eq!(v["choices"][0]["finish_reason"], "stop");
        assert!(v.get("usage").is_none());
        let anon = as_json(text_completion(&completion(ChatReply::default(), None)));
        assert!(anon["id"].as_str().unwrap().starts_with("cmpl-"));
        assert_eq!(anon["choices"][0]["finish_reason"], Value::Null);
    }

    #[test]
    fn a_stream_is_text_completion_chunks() {
        let counts = Usage {
            input_tokens: Some(3),
            output_tokens: Some(1),
        };
        let events = || {
            vec![
                StreamEvent::Delta(ReplyDelta::Start {
                    id: Some("up".into()),
                }),
                StreamEvent::Delta(ReplyDelta::Reasoning("hmm".into())),
                StreamEvent::Delta(ReplyDelta::Text("1".into())),
                StreamEvent::Delta(ReplyDelta::Text("4".into())),
                StreamEvent::Delta(ReplyDelta::Finish("end_turn".into())),
                StreamEvent::Usage {
                    tokens: Some(4),
                    counts,
                },
            ]
        };
        let mut w = TextWriter::new("a::m", false);
        let chunks: Vec<Value> = events()
            .into_iter()
            .filter_map(|e| w.chunk(e).map(data))
            .collect();
        assert_eq!(chunks.len(), 3, "{chunks:?}");
        for c in &chunks {
            assert_eq!(c["id"], "cmpl-up");
            assert_eq!(c["object"], "text_completion");
            assert_eq!(c["model"], "a::m");
            assert_eq!(c["created"], chunks[0]["created"]);
        }
        assert_eq!(
            chunks[0]["choices"],
            json!([{"text": "1", "index": 0, "logprobs": null, "finish_reason": null}])
        );
        assert_eq!(chunks[1]["choices"][0]["text"], "4");
        assert_eq!(
            chunks[2]["choices"],
            json!([{"text": "", "index": 0, "logprobs": null, "finish_reason": "stop"}])
        );
        // The usage chunk only for a client that asked.
        let mut w = TextWriter::new("a::m", true);
        let chunks: Vec<Value> = events()
            .into_iter()
            .filter_map(|e| w.chunk(e).map(data))
            .collect();
        let last = chunks.last().unwrap();
        assert_eq!(last["choices"], json!([]));
        assert_eq!(last["usage"]["total_tokens"], 4);
    }
}
