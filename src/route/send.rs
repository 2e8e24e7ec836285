//! One attempt on one candidate with one key: build the wire request
//! through the candidate's dialect, send it, and read back either a reply
//! ([`Completion`]) or an [`UpstreamError`] for the engine to act on.
//! Streaming attempts return once the first event has arrived, so that a
//! failure before the first byte to the client can still fall over.

use std::pin::Pin;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use serde_json::Value;

use crate::catalog::ApiKey;
use crate::upstream::classify::{self, ErrorClass, UpstreamError};
use crate::upstream::dialect::{
    self, BuildError, ChatReply, ChatRequest, ReplyDelta, StreamMapper, Usage,
};
use crate::upstream::http;
use crate::upstream::secret::Redactor;

use super::choose::Candidate;
pub use super::domain::StreamEvent;
use super::engine::{Engine, Sent};
use crate::clock::Clock;

/// A complete reply, in no surface's shape: the parsed [`ChatReply`]
/// (text, reasoning, tool calls, finish reason, usage) for any surface to
/// render, and,
/// for the same-dialect pass-through, the upstream's own body. Both are
/// redacted.
#[derive(Debug)]
pub struct Completion {
    pub reply: ChatReply,
    /// The upstream's body as JSON, for a surface that speaks its dialect
    /// and passes it on as it came. Kept only for upstreams whose dialect
    /// is Chat Completions itself (OpenAI's), and only when the caller
    /// asked for it (`native`), so others cost no redaction.
    pub body: Option<Value>,
    /// The upstream's id for the reply, if it gave one.
    pub upstream_id: Option<String>,
    /// The candidate's model id, which a rendered reply names.
    pub model: String,
    /// What the request lost on the way ([`dialect::Built::dropped`]),
    /// for the `X-Llmprobe-Dropped` header: field names, and whatever
    /// else the router notes (`max_tokens→8192` for a clamp).
    pub dropped: Vec<String>,
}

/// The request as this candidate needs it: its own model id.
fn for_candidate(req: &ChatRequest, c: &Candidate) -> ChatRequest {
    let mut r = req.clone();
    r.model = c.model.clone();
    // The router's clamp to the model's output cap (docs/routing.md).
    if c.max_tokens.is_some() {
        r.max_tokens = c.max_tokens;
    }
    r
}

/// The wire request for `c`, or the attempt that could not be made: a
/// request its dialect cannot express ([`BuildError::Unsupported`]: an
/// unknown content part, tool arguments that are not an object, …) is
/// not sent at all, and the router passes over the candidate as
/// `skip:dialect`; a bad key or header from the config fails as before.
fn build<T>(
    client: &reqwest::Client,
    c: &Candidate,
    key: Option<&ApiKey>,
    req: &ChatRequest,
    redactor: &Redactor,
) -> Result<dialect::Built, Box<Sent<T>>> {
    dialect::build_request(
        client,
        c.provider.endpoint(),
        key.map(|k| &k.secret),
        &for_candidate(req, c),
    )
    .map_err(|e| {
        let unsent = matches!(e, BuildError::Unsupported(_));
        let message = if unsent {
            format!(
                "not sent: the {} dialect cannot express it: {e}",
                c.provider.provider.dialect.as_str()
            )
        } else {
            e.to_string()
        };
        Box::new(Sent {
            unsent,
            ..Sent::failed(UpstreamError {
                status: None,
                class: ErrorClass::BadRequest,
                retry_after: None,
                daily: false,
                message: redactor.redact(&message),
            })
        })
    })
}

/// A non-streaming attempt. `native`: the caller passes an upstream's body
/// on as it came when its dialect is Chat Completions itself (an OpenAI
/// upstream's: the Chat Completions surface and the one-shot command), so
/// [`Completion::body`] keeps it; other surfaces render from the parsed
/// reply alone.
pub async fn complete(
    engine: &Engine,
    c: &Candidate,
    key: Option<&ApiKey>,
    req: &ChatRequest,
    native: bool,
) -> Sent<Completion> {
    let (client, clock) = (&engine.client, &engine.clock);
    let redactor = engine.redactor.with(key.map(|k| &k.secret));
    let dialect::Built {
        builder,
        dropped,
        plan,
    } = match build(client, c, key, req, &redactor) {
        Ok(b) => b,
        Err(unsent) => return *unsent,
    };
    let dialect = c.provider.provider.dialect;
    let resp = match http::send(builder, c.provider.provider.timeout, http::DEFAULT_BODY_CAP).await
    {
        Ok(r) => r,
        Err(e) => return Sent::failed(classify::transport_error(&e, &redactor)),
    };
    let result =
        classify::read_reply(dialect, &resp, &redactor, clock.now()).map(|(mut reply, json)| {
            plan.apply(&mut reply);
            // The pass-through needs no id; a rendered reply is named after
            // the upstream's.
            let (body, upstream_id) = if native && dialect::wire(dialect).passes_through() {
                (Some(redacted(json, &redactor)), None)
            } else {
                let id = dialect::wire(dialect).reply_id(&json);
                (None, id.map(|id| redactor.redact(id)))
            };
            Completion {
                reply: redacted_reply(reply, &redactor),
                body,
                upstream_id,
                model: c.model.clone(),
                dropped,
            }
        });
    let tokens = result
        .as_ref()
        .ok()
        .and_then(|c| total_tokens(c.reply.usage));
    Sent {
        result,
        headers: Some(resp.headers),
        tokens,
        unsent: false,
        streamed: false,
    }
}

/// Input plus output tokens, when the upstream reported both (or either).
pub fn total_tokens(u: Option<Usage>) -> Option<u64> {
    let u = u?;
    match (u.input_tokens, u.output_tokens) {
        (None, None) => None,
        (i, o) => Some(i.unwrap_or(0) + o.unwrap_or(0)),
    }
}

/// A served stream's events (or an in-stream failure) as they arrive.
pub type ChunkStream = Pin<Box<dyn Stream<Item = StreamEvent> + Send>>;

/// A streaming attempt that has produced its first event.
pub struct Opened {
    pub first: Vec<StreamEvent>,
    pub rest: ChunkStream,
    /// The candidate's model id, which rendered chunks name.
    pub model: String,
    /// What the request lost on the way, as [`Completion::dropped`].
    pub dropped: Vec<String>,
}

/// A streaming attempt: returns once the first chunk has arrived, so any
/// failure before it is an [`UpstreamError`] the engine can fall over on.
/// The stream fails when no chunk arrives within the engine's idle timeout.
/// `native`: an upstream's chunks that a Chat Completions client reads as
/// they are (an OpenAI upstream's) come as they came too
/// ([`StreamEvent::Raw`]), for that surface to forward; every surface gets
/// deltas from every dialect.
pub async fn open_stream(
    engine: &Engine,
    c: &Candidate,
    key: Option<&ApiKey>,
    req: &ChatRequest,
    native: bool,
) -> Sent<Opened> {
    let mut headers = None;
    let redactor = engine.redactor.with(key.map(|k| &k.secret));
    let built = match build(&engine.client, c, key, req, &redactor) {
        Ok(b) => b,
        Err(unsent) => return *unsent,
    };
    let result = open_stream_inner(
        built,
        c,
        &redactor,
        &engine.clock,
        engine.settings.idle_timeout,
        native,
        &mut headers,
    )
    .await;
    Sent {
        result,
        headers,
        tokens: None,
        unsent: false,
        streamed: true,
    }
}

async fn open_stream_inner(
    built: dialect::Built,
    c: &Candidate,
    redactor: &Redactor,
    clock: &Clock,
    idle: Duration,
    native: bool,
    headers_out: &mut Option<reqwest::header::HeaderMap>,
) -> Result<Opened, UpstreamError> {
    let redactor = redactor.clone();
    let dialect::Built {
        builder,
        dropped,
        plan,
    } = built;
    let dialect = c.provider.provider.dialect;
    let timeout = c.provider.provider.timeout;
    let started = std::time::Instant::now();
    let resp = http::open(builder, timeout)
        .await
        .map_err(|e| classify::transport_error(&e, &redactor))?;
    let status = resp.status().as_u16();
    *headers_out = Some(resp.headers().clone());
    if !(200..300).contains(&status) {
        // An error answered before any stream: read it whole and classify
        // it as a non-streaming response.
        let headers = resp.headers().clone();
        let whole = http::read_body(resp, http::DEFAULT_BODY_CAP, started);
        let raw = tokio::time::timeout(timeout, whole)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or(http::RawResponse {
                status,
                headers,
                body: Vec::new(),
                elapsed: Duration::ZERO,
            });
        return Err(
            classify::read_response(dialect, &raw, &redactor, clock.now())
                .err()
                .unwrap_or_else(|| UpstreamError {
                    status: Some(status),
                    class: ErrorClass::ServerError,
                    retry_after: None,
                    daily: false,
                    message: format!("HTTP {status}"),
                }),
        );
    }
    // For the Chat Completions surface an OpenAI upstream's chunks pass
    // through as they came, beside the deltas they hold.
    let mapper = StreamMapper::new(dialect)
        .native(native && dialect::wire(dialect).passes_through())
        .plan(plan);
    let mut items: ItemStream = Box::pin(dialect::chunk_stream(resp, mapper));
    let fail = |class: ErrorClass, message: String| UpstreamError {
        status: Some(status),
        class,
        retry_after: None,
        daily: false,
        message: redactor.redact(&message),
    };
    // Wait for the first chunk: until then, any failure can fall over.
    let first_wait = idle.min(timeout);
    let first = match tokio::time::timeout(first_wait, items.next()).await {
        Err(_) => {
            return Err(fail(
                ErrorClass::Timeout,
                format!("no first chunk within {}", http::human_duration(first_wait)),
            ));
        }
        Ok(None) | Ok(Some(Ok(ReplyDelta::Done))) => {
            return Err(fail(
                ErrorClass::ServerError,
                "the stream ended before its first chunk".into(),
            ));
        }
        Ok(Some(Err(t))) => {
            return Err(fail(
                ErrorClass::Transport,
                format!("the stream broke before its first chunk: {t}"),
            ));
        }
        Ok(Some(Ok(ReplyDelta::Error(pe)))) => {
            return Err(fail(
                ErrorClass::ServerError,
                format!("error in the stream: {}", pe.message),
            ));
        }
        Ok(Some(Ok(d))) => StreamEvent::from_delta(redacted_delta(d, &redactor)),
    };
    Ok(Opened {
        first: vec![first],
        rest: client_events(items, std::sync::Arc::new(redactor), idle),
        model: c.model.clone(),
        dropped,
    })
}

type ItemStream = Pin<Box<dyn Stream<Item = Result<ReplyDelta, http::TransportError>> + Send>>;

/// The rest of an upstream stream as client events, with the idle timeout
/// and redaction applied, always ending in `Done`, `Failed` or `Stalled`.
fn client_events(
    items: ItemStream,
    redactor: std::sync::Arc<Redactor>,
    idle: Duration,
) -> ChunkStream {
    Box::pin(futures_util::stream::unfold(Some(items), move |items| {
        let redactor = redactor.clone();
        async move {
            let mut items = items?;
            let ev = match tokio::time::timeout(idle, items.next()).await {
                Err(_) => StreamEvent::Stalled,
                Ok(None) => StreamEvent::Done,
                Ok(Some(Ok(ReplyDelta::Done))) => StreamEvent::Done,
                Ok(Some(Ok(ReplyDelta::Error(pe)))) => {
                    StreamEvent::Failed(redactor.redact(&pe.message))
                }
                Ok(Some(Ok(d))) => {
                    let ev = StreamEvent::from_delta(redacted_delta(d, &redactor));
                    return Some((ev, Some(items)));
                }
                Ok(Some(Err(t))) => StreamEvent::Failed(redactor.redact(&t.to_string())),
            };
            // The last event: nothing is read after it.
            Some((ev, None))
        }
    }))
}

/// Redact every string in a JSON value: an upstream may echo a key in any
/// field of a reply.
/// `v` with [`redact_value`] applied.
fn redacted(mut v: Value, redactor: &Redactor) -> Value {
    redact_value(&mut v, redactor);
    v
}

/// `d` with keys masked in every string it carries: an upstream may echo
/// a key in any of them. Strings with nothing to mask are not copied.
fn redacted_delta(mut d: ReplyDelta, redactor: &Redactor) -> ReplyDelta {
    let mask = |s: &mut String| {
        if let std::borrow::Cow::Owned(masked) = redactor.redact_cow(s) {
            *s = masked;
        }
    };
    match &mut d {
        ReplyDelta::Raw(v) => redact_value(v, redactor),
        ReplyDelta::Start { id: Some(s) }
        | ReplyDelta::Text(s)
        | ReplyDelta::Reasoning(s)
        | ReplyDelta::Finish(s) => mask(s),
        ReplyDelta::Error(e) => mask(&mut e.message),
        ReplyDelta::ToolCall(t) => {
            for s in [&mut t.id, &mut t.name].into_iter().flatten() {
                mask(s);
            }
            mask(&mut t.arguments);
        }
        ReplyDelta::Start { id: None } | ReplyDelta::Usage(_) | ReplyDelta::Done => {}
    }
    d
}

/// `reply` with keys masked in its text, reasoning and tool calls: an
/// upstream may echo a key there too. Text with nothing to mask is not
/// copied.
fn redacted_reply(mut reply: ChatReply, redactor: &Redactor) -> ChatReply {
    let calls = reply
        .tool_calls
        .iter_mut()
        .flat_map(|c| [&mut c.id, &mut c.name, &mut c.arguments]);
    for s in std::iter::once(&mut reply.text)
        .chain(reply.reasoning.as_mut())
        .chain(calls)
    {
        if let std::borrow::Cow::Owned(masked) = redactor.redact_cow(s) {
            *s = masked;
        }
    }
    reply
}

/// Mask keys in every string of `v`, in place. Strings with nothing to mask
/// (nearly all of them) are neither copied nor rebuilt.
pub fn redact_value(v: &mut Value, redactor: &Redactor) {
    match v {
        Value::String(s) => {
            if let std::borrow::Cow::Owned(masked) = redactor.redact_cow(s) {
                *s = masked;
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| redact_value(x, redactor)),
        Value::Object(o) => o.values_mut().for_each(|x| redact_value(x, redactor)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::secret::Secret;

    #[test]
    fn a_replys_text_and_reasoning_are_redacted() {
        let key = "sk-test-0123456789abcdef0123";
        let redactor = Redactor::new([Secret::new(key.to_string())]);
        let reply = ChatReply {
            text: format!("your key is {key}"),
            reasoning: Some(format!("echo {key}")),
            finish_reason: Some("stop".into()),
            usage: None,
            tool_calls: vec![dialect::ToolCall {
                id: "c1".into(),
                name: "f".into(),
                arguments: format!(r#"{{"k":"{key}"}}"#),
            }],
        };
        let out = redacted_reply(reply, &redactor);
        assert!(!out.tool_calls[0].arguments.contains(key));
        assert_eq!(out.tool_calls[0].name, "f");
        assert!(!out.text.contains(key), "{}", out.text);
        assert!(out.text.starts_with("your key is "), "{}", out.text);
        assert!(!out.reasoning.unwrap().contains(key));
        assert_eq!(out.finish_reason.as_deref(), Some("stop"));
    }

    #[test]
    fn stream_deltas_are_redacted_wherever_a_key_can_hide() {
        let key = "sk-test-0123456789abcdef0123";
        let redactor = Redactor::new([Secret::new(key.to_string())]);
        let native = serde_json::json!({"choices": [{"delta": {"content": format!("k={key}")}}]});
        for d in [
            ReplyDelta::Text(format!("k={key}")),
            ReplyDelta::Reasoning(format!("k={key}")),
            ReplyDelta::Start {
                id: Some(key.to_string()),
            },
            ReplyDelta::Raw(native),
            ReplyDelta::ToolCall(dialect::ToolCallDelta {
                index: 0,
                id: Some("c".into()),
                name: None,
                arguments: format!("\"{key}"),
            }),
            ReplyDelta::Error(dialect::ProviderError {
                message: format!("bad key {key}"),
                ..Default::default()
            }),
        ] {
            let out = format!("{:?}", redacted_delta(d, &redactor));
            assert!(!out.contains(key), "{out}");
        }
        assert_eq!(
            redacted_delta(ReplyDelta::Text("plain".into()), &redactor),
            ReplyDelta::Text("plain".into())
        );
    }
}
