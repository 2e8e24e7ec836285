//! The Anthropic Messages surface: `POST /v1/messages` and
//! `POST /v1/messages/count_tokens`, what is Anthropic-shaped about
//! `route --serve`.
//!
//! - [`read_messages`] reads a Messages request into the chat request
//!   every dialect starts from: `system` (a string or text blocks) as the
//!   request's system prompt, and a `system` message inside `messages` as
//!   a system message in place (each dialect then folds it or keeps it);
//!   `text`, `image`, text `document`, `search_result`, `tool_use` and
//!   `tool_result` blocks as OpenAI content parts, `tool_calls` and `tool`
//!   messages; `tools`, `tool_choice`, `stop_sequences`, `top_k`,
//!   `metadata.user_id` and `output_config.format` as their chat
//!   equivalents. What no upstream behind route can take is dropped and
//!   reported (`thinking`, server tools, a block type, role or field route
//!   does not know) or refused with a 400 that names the field (`thread`,
//!   in the words the SDKs fall back on; a `tool_result` answering no
//!   call; PDF documents, `mcp_servers`, a forced server tool).
//! - [`message_body`] renders a completion as a `message`, and
//!   [`MessageWriter`] a served stream as Anthropic's named events
//!   (`message_start`, `content_block_*`, `message_delta`,
//!   `message_stop`, `ping` while waiting, `error` for a failure after the
//!   first byte), written by [`event_stream`].
//! - errors as Anthropic writes them,
//!   `{"type":"error","error":{"type","message"}}`, with its types
//!   (`invalid_request_error`, `authentication_error`,
//!   `permission_error`, `not_found_error`, `request_too_large`,
//!   `rate_limit_error`, `api_error`, `overloaded_error`) and
//!   `Retry-After` whenever a retry time is known ([`error_response`]).
//!
//! The bodies are types ([`wire`]): what route writes, in Anthropic's key
//! order, the chat pieces a request becomes, and lenient models of what
//! it reads, which this file checks in the order and words of
//! Anthropic's refusals.

pub mod wire;

use std::convert::Infallible;
use std::fmt::Display;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use futures_util::{Stream, StreamExt};
use serde_json::{Map, Value};

use super::Dropped;
use super::calls::Holdback;
use super::error::ApiError;
use super::openai_finish_reason;
use crate::route::domain::StreamEvent;
use crate::route::send::Completion;
use crate::upstream::dialect::{ChatMessage, ChatRequest, Content, ReplyDelta, Usage};
use serde::Deserialize;
use wire::chat;
use wire::input::{
    BlockIn, ContextManagementIn, FormatIn, SourceIn, TextIn, ToolChoiceIn, ToolIn, TypeIn, view,
};
use wire::{
    Delta, DeltaUsage, ErrorBody, ErrorDetail, ErrorDetails, EventData, Message, MessageType,
    MessageUsage, ReplyBlock, Role, Stop,
};

/// Anthropic's error type for a status, as its API documents them.
pub fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

/// `e` as Anthropic's error body.
pub fn error_body(e: &ApiError) -> ErrorBody {
    ErrorBody {
        error: ErrorDetail {
            kind: error_type(e.status),
            message: e.message.clone(),
            details: e.error_code.map(|error_code| ErrorDetails { error_code }),
        },
    }
}

/// `e` as an Anthropic error response, with `Retry-After` when a retry
/// time is known.
pub fn error_response(e: ApiError, now: DateTime<Utc>) -> Response {
    let mut resp = (e.status, axum::Json(error_body(&e))).into_response();
    if let Some(secs) = e.retry_after_secs(now)
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

/// What a Messages request is read for: a reply (`max_tokens` required)
/// or `count_tokens` (which takes none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    Create,
    Count,
}

/// A Messages request, read into the chat request every dialect starts
/// from.
#[derive(Debug)]
pub struct Messages {
    pub req: ChatRequest,
    /// What was left out although it may change the answer (`thinking`,
    /// `tools[web_search]`), for `X-Llmprobe-Dropped`.
    pub dropped: Vec<String>,
}

/// Pydantic's words, which Anthropic's 400s use.
const REQUIRED: &str = "Field required";

/// A 400 about the field at `at` (`messages.1.content.0.source.type`), in
/// Anthropic's `path: reason` form.
fn invalid(at: impl Display, why: impl Display) -> ApiError {
    ApiError::invalid("invalid_request", format!("{at}: {why}"))
}

/// A string field; `None` when absent or null.
fn opt_str(at: &str, v: Option<Value>) -> Result<Option<String>, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(invalid(at, "Input should be a valid string")),
    }
}

/// A required string field (`{at}.{field}`) of a block, a tool or a
/// source, in Pydantic's words when it is missing or not a string.
fn req_str(at: &str, field: &str, v: Option<Value>) -> Result<String, ApiError> {
    match v {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => Err(invalid(format!("{at}.{field}"), REQUIRED)),
        Some(_) => Err(invalid(
            format!("{at}.{field}"),
            "Input should be a valid string",
        )),
    }
}

fn opt_f64(at: &str, v: Option<Value>) -> Result<Option<f64>, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(_) => Err(invalid(at, "Input should be a valid number")),
    }
}

/// A block's `type`.
fn block_type<'a>(at: &str, b: &'a Value) -> Result<&'a str, ApiError> {
    if !b.is_object() {
        return Err(invalid(at, "Input should be a valid dictionary"));
    }
    match b.get("type") {
        Some(Value::String(t)) => Ok(t),
        None | Some(Value::Null) => Err(invalid(format!("{at}.type"), REQUIRED)),
        Some(_) => Err(invalid(
            format!("{at}.type"),
            "Input should be a valid string",
        )),
    }
}

/// Top-level fields route does not pass on because the answer is the same
/// without them: never reported. Everything else route does not translate
/// is reported by name in `X-Llmprobe-Dropped`.
const HARMLESS_FIELDS: &[(&str, &str)] = &[
    (
        "cache_control",
        "a prompt-caching breakpoint: caching changes cost, not the answer",
    ),
    ("service_tier", "Anthropic's capacity tier"),
    ("inference_geo", "where Anthropic runs the model"),
    ("speed", "Anthropic's fast mode: the same model, sooner"),
];

/// Content blocks left out because they carry nothing a model reads:
/// never reported.
const SILENT_BLOCKS: &[&str] = &[
    // Only the model that wrote them could verify their signatures, and
    // route never returns them.
    "thinking",
    "redacted_thinking",
    // "Not rendered into the prompt" (Anthropic's fallback beta): a marker
    // between the parts of a turn made before and after a fallback.
    "fallback",
];

/// The error Anthropic's SDKs read as "this server cannot thread the
/// request: send the whole conversation without `thread`". Checked
/// against the SDK sources: anthropic (Python) 2.17.0,
/// `anthropic/lib/threads/_thread_state.py` (`_unsupported_features`, then
/// `recovers_from`, which stops threading when the behaviour is
/// `continue_unthreaded`, the `tool_runner`'s default), and
/// @anthropic-ai/sdk (TypeScript) 1.17.0,
/// `src/lib/internal/threads/ThreadState.ts` (`unsupportedFeatures`): both
/// read `error.details.error_code` of a 400 and take a missing
/// `unsupported` list as "none named".
pub const THREAD_UNSUPPORTED: &str = "thread_unsupported_request";

/// What reading the messages keeps track of: the ids of the tool calls
/// made so far (a `tool_result` must answer one of them), and what was
/// dropped.
#[derive(Default)]
struct Reading {
    tool_uses: std::collections::HashSet<String>,
    dropped: Dropped,
}

/// Read a Messages request body. Errors are Anthropic-style 400s that
/// name the field (`max_tokens: Field required`).
pub fn read_messages(body: &[u8], purpose: Purpose) -> Result<Messages, ApiError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::invalid(
            "invalid_request",
            format!("The request body is not valid JSON: {e}"),
        )
    })?;
    let Value::Object(mut obj) = v else {
        return Err(ApiError::invalid(
            "invalid_request",
            "The request body must be a JSON object",
        ));
    };
    // A thread keeps the conversation on the server, which route does not:
    // refused first, in the words the SDKs fall back on (they then send the
    // whole history without `thread`).
    if obj.shift_remove("thread").is_some_and(|t| !t.is_null()) {
        return Err(invalid(
            "thread",
            "route keeps no message threads: send the whole conversation in messages, \
             without thread",
        )
        .with_error_code(THREAD_UNSUPPORTED));
    }
    let mut reading = Reading::default();
    let model = match obj.shift_remove("model") {
        Some(Value::String(s)) => s,
        None | Some(Value::Null) => return Err(invalid("model", REQUIRED)),
        Some(_) => return Err(invalid("model", "Input should be a valid string")),
    };
    let max_tokens = match obj.shift_remove("max_tokens") {
        // count_tokens takes no max_tokens, and counts only the prompt.
        _ if purpose == Purpose::Count => None,
        Some(Value::Number(n)) => match n.as_u64().and_then(|v| u32::try_from(v).ok()) {
            Some(v) if v >= 1 => Some(v),
            _ => {
                return Err(invalid(
                    "max_tokens",
                    "Input should be an integer of at least 1",
                ));
            }
        },
        None | Some(Value::Null) => return Err(invalid("max_tokens", REQUIRED)),
        Some(_) => return Err(invalid("max_tokens", "Input should be a valid integer")),
    };
    let system = match obj.shift_remove("system") {
        None | Some(Value::Null) => None,
        v => system_text("system", ContentIn::read(v), &mut reading.dropped)?,
    }
    .filter(|s| !s.is_empty());
    let turns: Vec<Turn> = match obj.shift_remove("messages") {
        Some(Value::Array(a)) => a.into_iter().map(Turn::read).collect(),
        None | Some(Value::Null) => return Err(invalid("messages", REQUIRED)),
        Some(_) => return Err(invalid("messages", "Input should be a valid list")),
    };
    if turns.is_empty() {
        return Err(invalid("messages", "at least one message is required"));
    }
    // Whether any message has a block: if none does, the messages are
    // empty, not made only of what route leaves out.
    let any_block = turns
        .iter()
        .any(|t| matches!(t, Turn::Object { content: ContentIn::Blocks(b), .. } if !b.is_empty()));
    unanswered_calls(&turns)?;
    let mut messages = Vec::with_capacity(turns.len());
    for (i, m) in turns.into_iter().enumerate() {
        read_message(i, m, &mut messages, &mut reading)?;
    }
    if !messages.iter().any(|m| !m.is_system()) {
        return Err(invalid(
            "messages",
            if messages.iter().any(ChatMessage::is_system) {
                "no message has content route can pass on (only system messages): send at \
                 least one user message"
            } else if any_block {
                "no message has content route can pass on (only thinking blocks, or blocks \
                 route leaves out)"
            } else {
                "every message's content is an empty list: send at least one content block"
            },
        ));
    }
    let mut dropped = std::mem::take(&mut reading.dropped);
    let tools = read_tools(&mut obj, &mut dropped)?;
    let stop = match obj.shift_remove("stop_sequences") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .into_iter()
            .enumerate()
            .map(|(i, s)| match s {
                Value::String(s) => Ok(s),
                _ => Err(invalid(
                    format!("stop_sequences.{i}"),
                    "Input should be a valid string",
                )),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(invalid("stop_sequences", "Input should be a valid list")),
    };
    let temperature = opt_f64("temperature", obj.shift_remove("temperature"))?;
    let top_p = opt_f64("top_p", obj.shift_remove("top_p"))?;
    let top_k = match obj.shift_remove("top_k") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) if n.is_u64() => Some(n),
        Some(_) => return Err(invalid("top_k", "Input should be a valid integer")),
    };
    let stream = match obj.shift_remove("stream") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => b,
        Some(_) => return Err(invalid("stream", "Input should be a valid boolean")),
    };
    // The router reads `metadata.user_id` as the conversation; the
    // server moves it to `user` once it has (`metadata_to_user`). Its
    // other keys are tags for Anthropic's own records.
    let mut metadata = None;
    if let Some(m) = obj.shift_remove("metadata").filter(|m| !m.is_null()) {
        let Value::Object(mut m) = m else {
            return Err(invalid("metadata", "Input should be a valid dictionary"));
        };
        metadata = opt_str("metadata.user_id", m.shift_remove("user_id"))?
            .map(|user_id| chat::Metadata { user_id });
    }
    if let Some(t) = obj.shift_remove("thinking").filter(|t| !t.is_null())
        && view::<TypeIn>(t).kind.as_deref() != Some("disabled")
    {
        dropped.add("thinking");
    }
    let mut format = None;
    if let Some(c) = obj.shift_remove("output_config").filter(|c| !c.is_null()) {
        let Value::Object(c) = c else {
            return Err(invalid(
                "output_config",
                "Input should be a valid dictionary",
            ));
        };
        for (k, v) in c {
            match k.as_str() {
                _ if v.is_null() => {}
                "format" => format = Some(output_format("output_config.format", v)?),
                // `effort` and anything newer: ways of thinking that no
                // mapping would honour on every candidate.
                _ => dropped.add(format!("output_config.{k}")),
            }
        }
    }
    // The structured-outputs beta's spelling of `output_config.format`.
    if let Some(f) = obj.shift_remove("output_format").filter(|f| !f.is_null()) {
        format = Some(output_format("output_format", f)?);
    }
    match obj.shift_remove("mcp_servers") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.is_empty() => {}
        Some(Value::Array(_)) => {
            return Err(invalid(
                "mcp_servers",
                "route cannot connect to MCP servers and no upstream behind it can: call the \
                 MCP tools from the client and declare them as tools",
            ));
        }
        Some(_) => return Err(invalid("mcp_servers", "Input should be a valid list")),
    }
    // Server-side edits of the context as it grows. Clearing old thinking
    // changes nothing here: route passes no thinking upstream. Any other
    // edit (clearing tool results, compaction) would have shortened what
    // the model reads, so leaving it out is reported.
    if let Some(cm) = obj
        .shift_remove("context_management")
        .filter(|c| !c.is_null())
    {
        // No edits at all ask for nothing either.
        let only_thinking = match view::<ContextManagementIn>(cm).edits {
            None | Some(Value::Null) => true,
            Some(Value::Array(edits)) => edits.into_iter().all(|e| {
                view::<TypeIn>(e)
                    .kind
                    .is_some_and(|t| t.starts_with("clear_thinking"))
            }),
            Some(_) => false,
        };
        if !only_thinking {
            dropped.add("context_management");
        }
    }
    // Everything left: harmless, or reported by name (`container`, which
    // only the code-execution server tool route drops would use, and every
    // field route does not know).
    for (k, v) in obj {
        if v.is_null() || HARMLESS_FIELDS.iter().any(|(h, _)| *h == k) {
            continue;
        }
        dropped.add(k);
    }
    Ok(Messages {
        req: chat_fields(
            ChatRequest {
                system,
                max_tokens,
                temperature,
                top_p,
                stop,
                stream,
                ..ChatRequest::new(&model, messages)
            },
            tools,
            top_k,
            metadata,
            format,
        ),
        dropped: dropped.into_vec(),
    })
}

/// A message, its role and content taken out: read whole before any of
/// it is checked, as calls left unanswered are refused ahead of anything
/// else in the messages.
enum Turn {
    /// Not an object: refused where it is read.
    NotObject,
    Object {
        role: Option<Value>,
        content: ContentIn,
        /// Whatever else it carries, which goes, named.
        rest: Map<String, Value>,
    },
}

impl Turn {
    fn read(m: Value) -> Turn {
        let Value::Object(mut m) = m else {
            return Turn::NotObject;
        };
        Turn::Object {
            role: m.shift_remove("role"),
            content: ContentIn::read(m.shift_remove("content")),
            rest: m,
        }
    }

    /// Its role when it is a string, else `""`.
    fn role(&self) -> &str {
        match self {
            Turn::Object {
                role: Some(Value::String(r)),
                ..
            } => r,
            _ => "",
        }
    }

    /// The ids of its `tool_use` blocks (`calls`) or of its
    /// `tool_result` blocks.
    fn ids(&self, calls: bool) -> Vec<&str> {
        let Turn::Object {
            content: ContentIn::Blocks(blocks),
            ..
        } = self
        else {
            return Vec::new();
        };
        blocks
            .iter()
            .filter_map(|b| match b {
                Slot::Block(BlockIn::ToolUse {
                    id: Some(Value::String(id)),
                    ..
                }) if calls => Some(id.as_str()),
                Slot::Block(BlockIn::ToolResult {
                    tool_use_id: Some(Value::String(id)),
                    ..
                }) if !calls => Some(id.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// A message's content (or a system prompt): absent or null, a string,
/// blocks, or anything else (refused where it is read).
enum ContentIn {
    Absent,
    Text(String),
    Blocks(Vec<Slot>),
    Other,
}

impl ContentIn {
    fn read(v: Option<Value>) -> ContentIn {
        match v {
            None | Some(Value::Null) => ContentIn::Absent,
            Some(Value::String(s)) => ContentIn::Text(s),
            Some(Value::Array(a)) => ContentIn::Blocks(a.into_iter().map(Slot::read).collect()),
            Some(_) => ContentIn::Other,
        }
    }
}

/// A content block read as its type says, or, when it is not an object
/// with a string `type`, as it came, for the refusal to name.
enum Slot {
    Block(BlockIn),
    Bad(Value),
    /// Cannot happen (see [`Slot::read`]); refused with serde's words if
    /// it does.
    Unread(String),
}

impl Slot {
    fn read(b: Value) -> Slot {
        let typed = b
            .as_object()
            .and_then(|o| o.get("type"))
            .is_some_and(Value::is_string);
        if !typed {
            return Slot::Bad(b);
        }
        // Every field of a known type is optional and lenient, and an
        // unknown type is `Other`: an object with a string type always
        // reads.
        match BlockIn::deserialize(b) {
            Ok(b) => Slot::Block(b),
            Err(e) => Slot::Unread(e.to_string()),
        }
    }
}

/// Every call of an assistant message answered by the next message
/// (system messages in between aside), as Anthropic requires: a call left
/// without its result is refused in Anthropic's words, never forwarded. A
/// final assistant message may end on calls.
fn unanswered_calls(turns: &[Turn]) -> Result<(), ApiError> {
    for (i, m) in turns.iter().enumerate() {
        if m.role() != "assistant" {
            continue;
        }
        let calls = m.ids(true);
        let Some(next) = turns[i + 1..].iter().find(|n| n.role() != "system") else {
            continue;
        };
        if calls.is_empty() {
            continue;
        }
        let results = next.ids(false);
        let missing: Vec<&str> = calls
            .iter()
            .filter(|c| !results.contains(c))
            .copied()
            .collect();
        if !missing.is_empty() {
            return Err(invalid(
                format!("messages.{i}"),
                format!(
                    "`tool_use` ids were found without `tool_result` blocks immediately after: \
                     {}. Each `tool_use` block must have a corresponding `tool_result` block in \
                     the next message.",
                    missing.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// A system prompt (the top-level `system`, or a `system` message's
/// content): a string, or text blocks joined by a blank line.
fn system_text(at: &str, v: ContentIn, dropped: &mut Dropped) -> Result<Option<String>, ApiError> {
    match v {
        ContentIn::Text(s) => Ok(Some(s)),
        ContentIn::Blocks(blocks) => {
            let mut texts = Vec::with_capacity(blocks.len());
            for (i, b) in blocks.into_iter().enumerate() {
                let at = format!("{at}.{i}");
                match checked(&at, b)? {
                    BlockIn::Text { text } => texts.push(req_str(&at, "text", text)?),
                    // A system prompt is text: anything else goes, named.
                    other => dropped.add(format!("content[{}]", other.kind())),
                }
            }
            Ok(Some(texts.join("\n\n")))
        }
        ContentIn::Absent | ContentIn::Other => Err(invalid(
            at,
            "Input should be a valid string or a list of text blocks",
        )),
    }
}

/// `{"type":"json_schema","schema"}` as a chat `response_format`.
fn output_format(at: &str, f: Value) -> Result<chat::ResponseFormat, ApiError> {
    let f = view::<FormatIn>(f);
    if f.kind.as_deref() != Some("json_schema") {
        return Err(invalid(
            format!("{at}.type"),
            "Input should be 'json_schema'",
        ));
    }
    let schema = f
        .schema
        .filter(Value::is_object)
        .ok_or_else(|| invalid(format!("{at}.schema"), REQUIRED))?;
    Ok(chat::ResponseFormat::JsonSchema {
        json_schema: Box::new(chat::JsonSchema {
            name: "output".into(),
            schema,
            strict: None,
            description: None,
        }),
    })
}

/// One message (`messages.{i}`), as one or more chat messages: a user
/// turn's tool results become `tool` messages ahead of the rest of it, as
/// the chat API wants them right after the assistant's calls; a `system`
/// message (mid-conversation instructions) stays where it is, for each
/// dialect to place (`upstream::dialect`); a message of a role route does
/// not know is left out and reported as `role[ROLE]`.
fn read_message(
    i: usize,
    m: Turn,
    out: &mut Vec<ChatMessage>,
    reading: &mut Reading,
) -> Result<(), ApiError> {
    let at = format!("messages.{i}");
    let Turn::Object {
        role,
        content,
        rest,
    } = m
    else {
        return Err(invalid(at, "Input should be a valid dictionary"));
    };
    let role = match role {
        Some(Value::String(r)) => r,
        None | Some(Value::Null) => return Err(invalid(format!("{at}.role"), REQUIRED)),
        Some(_) => {
            return Err(invalid(
                format!("{at}.role"),
                "Input should be a valid string",
            ));
        }
    };
    // A message is its role and content; anything else it carries goes,
    // named. A turn's own `output_config` (Claude Code 2.1.332's per-turn
    // effort) is named as the request's is.
    for (k, v) in &rest {
        match (k.as_str(), v) {
            (_, Value::Null) => {}
            ("output_config", Value::Object(c)) => {
                for (ck, cv) in c {
                    if !cv.is_null() {
                        reading.dropped.add(format!("output_config.{ck}"));
                    }
                }
            }
            _ => reading.dropped.add(format!("messages.{k}")),
        }
    }
    match role.as_str() {
        "user" | "assistant" => {}
        "system" => {
            let text = match content {
                ContentIn::Absent => {
                    return Err(invalid(format!("{at}.content"), REQUIRED));
                }
                c => system_text(&format!("{at}.content"), c, &mut reading.dropped)?,
            };
            if let Some(t) = text.filter(|t| !t.is_empty()) {
                out.push(ChatMessage::new("system", t));
            }
            return Ok(());
        }
        other => {
            reading.dropped.add(format!("role[{other}]"));
            return Ok(());
        }
    }
    let blocks = match content {
        ContentIn::Text(s) => {
            out.push(ChatMessage::new(role, s));
            return Ok(());
        }
        ContentIn::Blocks(blocks) => blocks,
        ContentIn::Absent => return Err(invalid(format!("{at}.content"), REQUIRED)),
        ContentIn::Other => {
            return Err(invalid(
                format!("{at}.content"),
                "Input should be a valid string or a list of content blocks",
            ));
        }
    };
    if role == "user" {
        user_turn(&at, blocks, out, reading)
    } else {
        assistant_turn(&at, blocks, out, reading)
    }
}

/// Content parts as a message's content: one text part as plain text
/// (which every OpenAI-compatible upstream takes), otherwise the parts.
fn content_of(mut parts: Vec<chat::Part>) -> Content {
    if parts.len() == 1
        && let Some(chat::Part::Text { text }) =
            parts.pop_if(|p| matches!(p, chat::Part::Text { .. }))
    {
        return Content::Text(text);
    }
    Content::Parts(parts.into_iter().map(chat::to_json).collect())
}

/// What one content block becomes: text, an image part, nothing (left out
/// silently, or reported), or, for the blocks that structure a
/// conversation, the caller's to handle.
enum Block {
    Text(String),
    Image(chat::Part),
    Silent,
    ToolUse {
        id: Option<Value>,
        name: Option<Value>,
        input: Option<Value>,
    },
    ToolResult {
        tool_use_id: Option<Value>,
        content: Option<Value>,
        is_error: Option<bool>,
    },
}

/// A block that is an object with a string `type`, or the refusal that
/// names what it is instead.
fn checked(at: &str, b: Slot) -> Result<BlockIn, ApiError> {
    match b {
        Slot::Block(b) => Ok(b),
        Slot::Bad(v) => Err(match block_type(at, &v) {
            Err(e) => e,
            Ok(_) => invalid(at, "Input should be a valid dictionary"),
        }),
        Slot::Unread(why) => Err(invalid(at, why)),
    }
}

/// A content block route reads the same way wherever it appears (a turn,
/// a tool result): text, an image, a text document, a search result, a
/// compaction summary; thinking left out silently; a block that records a
/// server tool's call or result (`server_tool_use`,
/// `web_search_tool_result`, …), which only Anthropic could have made and
/// no upstream here can read, or any type route does not know: left out
/// and reported as `content[TYPE]`.
fn content_block(at: &str, b: Slot, dropped: &mut Dropped) -> Result<Block, ApiError> {
    Ok(match checked(at, b)? {
        BlockIn::Text { text } => match req_str(at, "text", text)? {
            // Anthropic refuses an empty text block; it says nothing.
            t if t.is_empty() => Block::Silent,
            t => Block::Text(t),
        },
        BlockIn::Image { source } => Block::Image(image_part(at, source)?),
        BlockIn::Document {
            source,
            title,
            context,
        } => Block::Text(document_text(at, source, [title, context], dropped)?),
        BlockIn::SearchResult {
            title,
            source,
            content,
        } => Block::Text(search_result_text(at, title, source, content)?),
        // A summary of the conversation before it, which the model must
        // read; `null` is a compaction that failed, a no-op.
        BlockIn::Compaction { content } => match content {
            Some(t) if !t.is_empty() => Block::Text(t),
            _ => Block::Silent,
        },
        BlockIn::ToolUse { id, name, input } => Block::ToolUse { id, name, input },
        BlockIn::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => Block::ToolResult {
            tool_use_id,
            content,
            is_error,
        },
        BlockIn::Other { kind } if SILENT_BLOCKS.contains(&kind.as_str()) => Block::Silent,
        BlockIn::Other { kind } => {
            dropped.add(format!("content[{kind}]"));
            Block::Silent
        }
    })
}

/// The text of a `document` block whose source is text (`text`, or
/// `content` blocks), with its title and context ahead. A PDF (`base64`,
/// `url`, `file`) is a 400: no upstream behind route is known to read
/// one, and leaving it out would answer a different question.
fn document_text(
    at: &str,
    source: Option<Value>,
    head: [Option<String>; 2],
    dropped: &mut Dropped,
) -> Result<String, ApiError> {
    let sat = format!("{at}.source");
    let source: SourceIn = match source {
        Some(s @ Value::Object(_)) => view(s),
        _ => return Err(invalid(&sat, REQUIRED)),
    };
    let body = match source.kind.as_deref() {
        Some("text") => req_str(&sat, "data", source.data)?,
        Some("content") => match source.content {
            Some(Value::String(s)) => s,
            Some(Value::Array(blocks)) => {
                let mut texts = Vec::new();
                for c in blocks {
                    let c: TextIn = view(c);
                    match c.text {
                        Some(t) => texts.push(t),
                        None => {
                            dropped.add(format!("content[{}]", c.kind.as_deref().unwrap_or("?")))
                        }
                    }
                }
                texts.join("\n\n")
            }
            _ => return Err(invalid(format!("{sat}.content"), REQUIRED)),
        },
        Some(other) => {
            return Err(invalid(
                format!("{sat}.type"),
                format!(
                    "documents of source type {other:?} (a PDF) cannot be passed on: no upstream \
                     behind route is known to read PDFs; send the document's text as a text \
                     source or a text block"
                ),
            ));
        }
        None => return Err(invalid(format!("{sat}.type"), REQUIRED)),
    };
    // Its title and the context the client gave about it, then its text.
    let head: Vec<String> = head
        .into_iter()
        .flatten()
        .filter(|t| !t.is_empty())
        .collect();
    Ok(if head.is_empty() {
        body
    } else {
        format!("{}\n\n{body}", head.join("\n\n"))
    })
}

/// A `search_result` block as text: its title and source, then its text
/// blocks.
fn search_result_text(
    at: &str,
    title: Option<Value>,
    source: Option<Value>,
    content: Option<Vec<Value>>,
) -> Result<String, ApiError> {
    let title = req_str(at, "title", title)?;
    let source = req_str(at, "source", source)?;
    let body: Vec<String> = content
        .into_iter()
        .flatten()
        .filter_map(|c| view::<TextIn>(c).text)
        .collect();
    Ok(format!("{title} ({source})\n\n{}", body.join("\n\n")))
}

fn user_turn(
    at: &str,
    blocks: Vec<Slot>,
    out: &mut Vec<ChatMessage>,
    reading: &mut Reading,
) -> Result<(), ApiError> {
    let mut parts = Vec::new();
    for (j, b) in blocks.into_iter().enumerate() {
        let at = format!("{at}.content.{j}");
        match content_block(&at, b, &mut reading.dropped)? {
            Block::Text(text) => parts.push(chat::Part::Text { text }),
            Block::Image(p) => parts.push(p),
            Block::Silent => {}
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let (msg, images) = tool_result(&at, tool_use_id, content, is_error, reading)?;
                out.push(msg);
                parts.extend(images);
            }
            Block::ToolUse { .. } => {
                return Err(invalid(
                    format!("{at}.type"),
                    "tool_use blocks belong in assistant messages",
                ));
            }
        }
    }
    if !parts.is_empty() {
        out.push(ChatMessage {
            role: "user".into(),
            content: Some(content_of(parts)),
            extra: Map::new(),
        });
    }
    Ok(())
}

/// An `image` block as an `image_url` part: a `base64` source as a data
/// URL, a `url` source as its URL.
fn image_part(at: &str, source: Option<Value>) -> Result<chat::Part, ApiError> {
    let sat = format!("{at}.source");
    let source: SourceIn = match source {
        Some(s @ Value::Object(_)) => view(s),
        _ => return Err(invalid(sat, REQUIRED)),
    };
    let url = match source.kind.as_deref() {
        Some("base64") => format!(
            "data:{};base64,{}",
            req_str(&sat, "media_type", source.media_type)?,
            req_str(&sat, "data", source.data)?
        ),
        Some("url") => req_str(&sat, "url", source.url)?,
        Some("file") => {
            return Err(invalid(
                format!("{sat}.type"),
                "images given by file_id cannot be passed on: route has no Files API; send \
                 the image as base64 or by url",
            ));
        }
        _ => {
            return Err(invalid(
                format!("{sat}.type"),
                "Input should be 'base64' or 'url'",
            ));
        }
    };
    Ok(chat::Part::ImageUrl {
        image_url: chat::ImageUrl { url },
    })
}

/// A `tool_result` block as a `tool` message, and the images it holds,
/// which a `tool` message cannot: they go into the user turn's own content
/// (after its tool results, which come first), and the tool message says
/// so. `is_error` is said in the text (`Error: …`), since a `tool` message
/// has no flag for it.
fn tool_result(
    at: &str,
    tool_use_id: Option<Value>,
    content: Option<Value>,
    is_error: Option<bool>,
    reading: &mut Reading,
) -> Result<(ChatMessage, Vec<chat::Part>), ApiError> {
    let id = req_str(at, "tool_use_id", tool_use_id)?;
    // A result that answers no call is refused here, never forwarded:
    // every upstream refuses one (Anthropic: "unexpected `tool_use_id`
    // found in `tool_result` blocks"), and a client that sent it has lost
    // part of its conversation (a `thread` it kept on another server).
    if !reading.tool_uses.contains(&id) {
        return Err(invalid(
            format!("{at}.tool_use_id"),
            format!(
                "no tool_use block before it has the id {id:?}: a tool_result must answer a \
                 tool_use of an earlier assistant message; send the whole conversation, with \
                 the assistant message that made the call"
            ),
        ));
    }
    let mut texts = Vec::new();
    let mut images = Vec::new();
    match content {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) => texts.push(s),
        Some(Value::Array(blocks)) => {
            for (k, c) in blocks.into_iter().enumerate() {
                let at = format!("{at}.content.{k}");
                let inside = match content_block(&at, Slot::read(c), &mut reading.dropped)? {
                    Block::Text(t) => {
                        texts.push(t);
                        continue;
                    }
                    Block::Image(p) => {
                        images.push(p);
                        continue;
                    }
                    Block::Silent => continue,
                    Block::ToolUse { .. } => "tool_use",
                    Block::ToolResult { .. } => "tool_result",
                };
                return Err(invalid(
                    format!("{at}.type"),
                    format!("{inside} blocks cannot be inside a tool_result"),
                ));
            }
        }
        Some(_) => {
            return Err(invalid(
                format!("{at}.content"),
                "Input should be a valid string or a list of content blocks",
            ));
        }
    }
    let mut text = texts.join("\n\n");
    if !images.is_empty() {
        let note = match images.len() {
            1 => "[the tool returned an image: it is attached after the tool results]".to_string(),
            n => {
                format!("[the tool returned {n} images: they are attached after the tool results]")
            }
        };
        text = if text.is_empty() {
            note
        } else {
            format!("{text}\n\n{note}")
        };
    }
    if is_error == Some(true) {
        text = format!("Error: {text}");
    }
    let mut extra = Map::new();
    extra.insert("tool_call_id".into(), Value::String(id));
    let msg = ChatMessage {
        role: "tool".into(),
        content: Some(Content::Text(text)),
        extra,
    };
    Ok((msg, images))
}

fn assistant_turn(
    at: &str,
    blocks: Vec<Slot>,
    out: &mut Vec<ChatMessage>,
    reading: &mut Reading,
) -> Result<(), ApiError> {
    let mut texts = Vec::new();
    let mut calls = Vec::new();
    for (j, b) in blocks.into_iter().enumerate() {
        let at = format!("{at}.content.{j}");
        match content_block(&at, b, &mut reading.dropped)? {
            Block::Text(t) => texts.push(t),
            Block::Silent => {}
            b @ (Block::Image(_) | Block::ToolResult { .. }) => {
                let kind = if matches!(b, Block::Image(_)) {
                    "image"
                } else {
                    "tool_result"
                };
                return Err(invalid(
                    format!("{at}.type"),
                    format!("{kind} blocks belong in user messages"),
                ));
            }
            Block::ToolUse { id, name, input } => {
                let id = req_str(&at, "id", id)?;
                let name = req_str(&at, "name", name)?;
                let arguments = match input {
                    None | Some(Value::Null) => "{}".to_string(),
                    Some(v @ Value::Object(_)) => v.to_string(),
                    Some(_) => {
                        return Err(invalid(
                            format!("{at}.input"),
                            "Input should be a valid dictionary",
                        ));
                    }
                };
                reading.tool_uses.insert(id.clone());
                calls.push(chat::ToolCall {
                    id,
                    kind: chat::Function::Function,
                    function: chat::Call { name, arguments },
                });
            }
        }
    }
    if texts.is_empty() && calls.is_empty() {
        // Only thinking (or blocks left out): nothing the upstream could
        // read.
        return Ok(());
    }
    let content = (!texts.is_empty()).then(|| Content::Text(texts.join("\n\n")));
    let mut extra = Map::new();
    if !calls.is_empty() {
        extra.insert("tool_calls".into(), chat::to_json(calls));
    }
    out.push(ChatMessage {
        role: "assistant".into(),
        content,
        extra,
    });
    Ok(())
}

/// A Messages request's tools and `tool_choice`, as the chat API's.
#[derive(Debug, Default)]
struct Tools {
    tools: Vec<chat::Tool>,
    choice: Option<chat::ToolChoice>,
    parallel: Option<bool>,
}

/// `tools` and `tool_choice` as chat `tools`, `tool_choice` and
/// `parallel_tool_calls`. Custom tools (no `type`, or `custom`) become
/// function tools; Anthropic's server tools (`web_search_*`, `bash_*`,
/// …), which no upstream behind route runs, are dropped and reported as
/// `tools[name]`, unless `tool_choice` forces one: then a 400.
fn read_tools(obj: &mut Map<String, Value>, dropped: &mut Dropped) -> Result<Tools, ApiError> {
    let mut tools = Vec::new();
    let mut server = Vec::new();
    match obj.shift_remove("tools") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) => {
            for (i, t) in a.into_iter().enumerate() {
                let at = format!("tools.{i}");
                if !t.is_object() {
                    return Err(invalid(at, "Input should be a valid dictionary"));
                }
                // Every field is optional and read leniently: an object
                // always reads.
                let t = ToolIn::deserialize(t).map_err(|e| invalid(&at, e))?;
                let name = req_str(&at, "name", t.name)?;
                match t.kind.as_deref() {
                    None | Some("custom") => {}
                    Some(_) => {
                        dropped.add(format!("tools[{name}]"));
                        server.push(name);
                        continue;
                    }
                }
                let parameters = match t.input_schema {
                    None | Some(Value::Null) => None,
                    Some(s @ Value::Object(_)) => Some(s),
                    Some(_) => {
                        return Err(invalid(
                            format!("{at}.input_schema"),
                            "Input should be a valid dictionary",
                        ));
                    }
                };
                tools.push(chat::Tool {
                    kind: chat::Function::Function,
                    function: chat::Declaration {
                        name,
                        description: t.description.filter(|d| !d.is_null()),
                        parameters,
                        strict: (t.strict == Some(true)).then_some(Value::Bool(true)),
                    },
                });
            }
        }
        Some(_) => return Err(invalid("tools", "Input should be a valid list")),
    }
    let choice = match obj.shift_remove("tool_choice") {
        None | Some(Value::Null) => None,
        Some(c @ Value::Object(_)) => {
            Some(ToolChoiceIn::deserialize(c).map_err(|e| invalid("tool_choice", e))?)
        }
        Some(_) => return Err(invalid("tool_choice", "Input should be a valid dictionary")),
    };
    let mut parallel = None;
    let choice = match choice {
        None => None,
        Some(c) => {
            if c.disable_parallel_tool_use == Some(true) {
                parallel = Some(false);
            }
            let forced_server = |name: &str| {
                invalid(
                    "tool_choice",
                    format!(
                        "it forces {name:?}, one of Anthropic's server tools, which no upstream \
                         behind route runs"
                    ),
                )
            };
            match c.kind.as_deref() {
                Some("auto") => Some(chat::ToolChoice::Mode("auto".into())),
                Some("none") => Some(chat::ToolChoice::Mode("none".into())),
                Some("any") => {
                    if tools.is_empty() {
                        return Err(match server.first() {
                            Some(name) => forced_server(name),
                            None => {
                                invalid("tool_choice", "\"any\" needs tools, and none are declared")
                            }
                        });
                    }
                    Some(chat::ToolChoice::Mode("required".into()))
                }
                Some("tool") => {
                    let name = req_str("tool_choice", "name", c.name)?;
                    if server.contains(&name) {
                        return Err(forced_server(&name));
                    }
                    if !tools.iter().any(|t| t.function.name == name) {
                        return Err(invalid(
                            "tool_choice.name",
                            format!("no tool named {name:?} is declared"),
                        ));
                    }
                    Some(chat::ToolChoice::Forced {
                        kind: chat::Function::Function,
                        function: chat::Named { name },
                    })
                }
                _ => {
                    return Err(invalid(
                        "tool_choice.type",
                        "Input should be 'auto', 'any', 'tool' or 'none'",
                    ));
                }
            }
        }
    };
    // Without tools, `auto` and `none` ask for nothing (and the chat API
    // refuses tool fields without tools).
    if tools.is_empty() {
        return Ok(Tools::default());
    }
    Ok(Tools {
        tools,
        choice,
        parallel,
    })
}

/// `req` with the chat fields a Messages request sets beyond the ones
/// set already, in the order the chat request has always held them:
/// `tools`, `tool_choice`, `parallel_tool_calls`, `top_k`, `metadata`
/// (which [`metadata_to_user`] moves once the router has read it),
/// `response_format`. Each is read as a chat client's would be.
fn chat_fields(
    mut req: ChatRequest,
    tools: Tools,
    top_k: Option<serde_json::Number>,
    metadata: Option<chat::Metadata>,
    format: Option<chat::ResponseFormat>,
) -> ChatRequest {
    if !tools.tools.is_empty() {
        req.insert("tools".into(), chat::to_json(tools.tools));
    }
    if let Some(c) = tools.choice {
        req.insert("tool_choice".into(), chat::to_json(c));
    }
    if let Some(p) = tools.parallel {
        req.insert("parallel_tool_calls".into(), Value::Bool(p));
    }
    if let Some(k) = top_k {
        req.insert("top_k".into(), Value::Number(k));
    }
    if let Some(m) = metadata {
        req.insert("metadata".into(), chat::to_json(m));
    }
    if let Some(f) = format {
        req.insert("response_format".into(), chat::to_json(f));
    }
    req
}

/// Move `metadata.user_id` to the chat field `user` (which the Anthropic
/// dialect sends back as `metadata.user_id`), once the router has read it
/// as the conversation: OpenAI-compatible upstreams know no `metadata`
/// that means this.
pub fn metadata_to_user(req: &mut ChatRequest) {
    if let Some(Value::Object(mut m)) = req.remove_extra("metadata")
        && let Some(Value::String(u)) = m.shift_remove("user_id")
    {
        req.extra.insert("user".into(), Value::String(u));
    }
}

/// `msg_` and the upstream's id (as it came when it already starts with
/// `msg_`), or a random one when it gave none.
fn message_id(upstream: Option<&str>) -> String {
    match upstream.filter(|s| !s.is_empty()) {
        Some(id) if id.starts_with("msg_") => id.to_string(),
        Some(id) => format!("msg_{id}"),
        None => format!("msg_{:024x}", rand::random::<u128>() >> 32),
    }
}

/// A provider's finish reason as Anthropic's `stop_reason`: `end_turn`,
/// `max_tokens`, `stop_sequence`, `tool_use` (also for a reply that
/// called tools and otherwise stopped normally, as Gemini's do) or
/// `refusal` (a content filter).
pub fn stop_reason(reason: Option<&str>, called: bool) -> &'static str {
    match reason {
        Some("stop_sequence") => "stop_sequence",
        Some(r) => match openai_finish_reason(r) {
            "length" => "max_tokens",
            "tool_calls" => "tool_use",
            "content_filter" => "refusal",
            _ if called => "tool_use",
            _ => "end_turn",
        },
        None if called => "tool_use",
        None => "end_turn",
    }
}

/// The sequence a `stop_sequence` stop hit: known only when the request
/// had one (the reply does not say which).
fn stop_sequence(reason: &str, stop: &[String]) -> Option<String> {
    match stop {
        [one] if reason == "stop_sequence" => Some(one.clone()),
        _ => None,
    }
}

/// Anthropic's `usage`: the upstream's counts, or route's estimate of the
/// prompt and 0 for the answer where it gave none.
fn usage(u: Option<Usage>, input_estimate: u64) -> MessageUsage {
    let u = u.unwrap_or_default();
    MessageUsage {
        input_tokens: u.input_tokens.unwrap_or(input_estimate),
        output_tokens: u.output_tokens.unwrap_or(0),
        cache_creation_input_tokens: 0,
        cache_read_input_tokens: 0,
    }
}

/// A tool call's arguments as the `input` object: empty text is `{}`;
/// text that is not JSON stays a string, so the client sees it rather
/// than an invented object.
fn tool_input(arguments: &str) -> Value {
    if arguments.trim().is_empty() {
        return Value::Object(Map::new());
    }
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_string()))
}

/// A completion as Anthropic's `message`: `text` and `tool_use` blocks
/// (no empty text block beside tool calls), `stop_reason`,
/// `stop_sequence`, `usage` ([`usage`]), the candidate's model id. The
/// reply's reasoning is left out: `thinking` is never passed on.
pub fn message_body(c: &Completion, input_estimate: u64, stop: &[String]) -> Message {
    let reply = &c.reply;
    let called = !reply.tool_calls.is_empty();
    let mut content = Vec::with_capacity(1 + reply.tool_calls.len());
    if !reply.text.is_empty() || !called {
        content.push(ReplyBlock::Text {
            text: reply.text.clone(),
        });
    }
    for t in &reply.tool_calls {
        content.push(ReplyBlock::ToolUse {
            id: t.id.clone(),
            name: t.name.clone(),
            input: tool_input(&t.arguments),
        });
    }
    let reason = stop_reason(reply.finish_reason.as_deref(), called);
    Message {
        id: message_id(c.upstream_id.as_deref()),
        kind: MessageType::Message,
        role: Role::Assistant,
        model: c.model.clone(),
        content,
        stop_reason: Some(reason),
        stop_sequence: stop_sequence(reason, stop),
        usage: usage(reply.usage, input_estimate),
    }
}

/// The content block a stream has open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text { index: usize },
    Tool { call: usize, index: usize },
}

/// Writes one served stream's events as Anthropic's named events:
/// `message_start` (at the reply's start, with route's estimate of the
/// prompt as `input_tokens`), then per block `content_block_start`,
/// `content_block_delta` (`text_delta`, or `input_json_delta` with each
/// fragment of a tool call's arguments as it came) and
/// `content_block_stop`, closing the open block before the next opens.
/// The first call streams live; parallel calls interleaved with it, and
/// text while it is open, are written whole after it at the end
/// ([`Holdback`]). At the end `message_delta` (`stop_reason`, `stop_sequence`, usage)
/// and `message_stop`. A failure is an `error` event. Reasoning is left
/// out, as in [`message_body`].
#[derive(Debug)]
pub struct MessageWriter {
    model: String,
    input_estimate: u64,
    stop: Vec<String>,
    started: bool,
    open: Option<Open>,
    next_index: usize,
    /// Each call's block index, by the call's index.
    calls: Vec<(usize, usize)>,
    finish: Option<String>,
    usage: Option<Usage>,
    /// Parallel calls and text held while a call streams.
    hold: Holdback,
}

/// One event: its name and its data.
pub type Named = (&'static str, EventData);

impl MessageWriter {
    /// For a reply from `model` (the candidate's id) to a request whose
    /// prompt route estimates at `input_estimate` tokens, with these stop
    /// sequences.
    pub fn new(model: &str, input_estimate: u64, stop: &[String]) -> MessageWriter {
        MessageWriter {
            model: model.to_string(),
            input_estimate,
            stop: stop.to_vec(),
            started: false,
            open: None,
            next_index: 0,
            calls: Vec::new(),
            finish: None,
            usage: None,
            hold: Holdback::new(),
        }
    }

    /// The events `ev` becomes, in order.
    pub fn events(&mut self, ev: StreamEvent) -> Vec<Named> {
        let mut out = Vec::new();
        match ev {
            StreamEvent::Delta(d) => {
                if let Some(d) = self.hold.pass(d) {
                    self.delta(d, &mut out);
                }
            }
            StreamEvent::Usage { counts, .. } => self.usage = Some(counts),
            StreamEvent::Done => {
                self.start(None, &mut out);
                // The live call stays open to the end; calls and text
                // held meanwhile follow it, each a whole block.
                for d in self.hold.end() {
                    self.delta(d, &mut out);
                }
                self.close(&mut out);
                let reason = stop_reason(self.finish.as_deref(), !self.calls.is_empty());
                let u = self.usage.unwrap_or_default();
                out.push(named(EventData::MessageDelta {
                    delta: Stop {
                        stop_reason: reason,
                        stop_sequence: stop_sequence(reason, &self.stop),
                    },
                    usage: DeltaUsage {
                        input_tokens: u.input_tokens.unwrap_or(self.input_estimate),
                        output_tokens: u.output_tokens.unwrap_or(0),
                    },
                }));
                out.push(named(EventData::MessageStop));
            }
            StreamEvent::Failed(message) => out.push(named(EventData::Error {
                error: ErrorDetail {
                    kind: "api_error",
                    message,
                    details: None,
                },
            })),
            // The engine turns a stall into a failure; an upstream's own
            // chunks are never asked for, and their deltas come anyway.
            StreamEvent::Stalled | StreamEvent::Raw(_) => {}
        }
        out
    }

    /// The events a delta the holdback passed on becomes.
    fn delta(&mut self, d: ReplyDelta, out: &mut Vec<Named>) {
        match d {
            ReplyDelta::Start { id } => self.start(id.as_deref(), out),
            ReplyDelta::Text(t) if !t.is_empty() => {
                self.start(None, out);
                let index = match self.open {
                    Some(Open::Text { index }) => index,
                    _ => {
                        let index = self.open_block(
                            ReplyBlock::Text {
                                text: String::new(),
                            },
                            out,
                        );
                        self.open = Some(Open::Text { index });
                        index
                    }
                };
                out.push(delta(index, Delta::TextDelta { text: t }));
            }
            ReplyDelta::ToolCall(d) => {
                self.start(None, out);
                let known = self.calls.iter().find(|(c, _)| *c == d.index).map(|p| p.1);
                let index = match known {
                    Some(index) => index,
                    None => {
                        let block = ReplyBlock::ToolUse {
                            id: d
                                .id
                                .unwrap_or_else(|| format!("toolu_{:016x}", rand::random::<u64>())),
                            name: d.name.unwrap_or_default(),
                            input: Value::Object(Map::new()),
                        };
                        let index = self.open_block(block, out);
                        self.open = Some(Open::Tool {
                            call: d.index,
                            index,
                        });
                        self.calls.push((d.index, index));
                        index
                    }
                };
                // The live call's later fragments go to its block, which
                // stays open (see `Holdback`).
                if !d.arguments.is_empty() {
                    out.push(delta(
                        index,
                        Delta::InputJsonDelta {
                            partial_json: d.arguments,
                        },
                    ));
                }
            }
            ReplyDelta::Finish(r) => self.finish = Some(r),
            // Reasoning is not passed on; empty text says nothing; usage,
            // errors and the end come as their own stream events.
            _ => {}
        }
    }

    fn start(&mut self, id: Option<&str>, out: &mut Vec<Named>) {
        if self.started {
            return;
        }
        self.started = true;
        out.push(named(EventData::MessageStart {
            message: Message {
                id: message_id(id),
                kind: MessageType::Message,
                role: Role::Assistant,
                model: self.model.clone(),
                content: Vec::new(),
                stop_reason: None,
                stop_sequence: None,
                usage: usage(None, self.input_estimate),
            },
        }));
    }

    fn open_block(&mut self, content_block: ReplyBlock, out: &mut Vec<Named>) -> usize {
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        out.push(named(EventData::ContentBlockStart {
            index,
            content_block,
        }));
        index
    }

    fn close(&mut self, out: &mut Vec<Named>) {
        if let Some(Open::Text { index } | Open::Tool { index, .. }) = self.open.take() {
            out.push(named(EventData::ContentBlockStop { index }));
        }
    }
}

fn named(data: EventData) -> Named {
    (data.name(), data)
}

fn delta(index: usize, delta: Delta) -> Named {
    named(EventData::ContentBlockDelta { index, delta })
}

/// A served stream as Anthropic's `text/event-stream`: named events from
/// [`MessageWriter`], and a `ping` event whenever nothing else was sent
/// for a while.
pub fn event_stream(
    events: impl Stream<Item = StreamEvent> + Send + 'static,
    mut writer: MessageWriter,
) -> Response {
    let body = events.flat_map(move |ev| {
        let named = writer.events(ev).into_iter().map(|(name, data)| {
            // Nothing in the data can fail to serialize: no map has
            // non-string keys.
            let data = serde_json::to_string(&data).unwrap_or_default();
            Ok::<Event, Infallible>(Event::default().event(name).data(data))
        });
        futures_util::stream::iter(named)
    });
    let ping = Event::default().event("ping").data(r#"{"type": "ping"}"#);
    Sse::new(body)
        .keep_alive(KeepAlive::new().event(ping))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // The typed bodies as the JSON a client reads.
    fn error_body(e: &ApiError) -> Value {
        serde_json::to_value(super::error_body(e)).unwrap()
    }

    fn message_body(c: &Completion, input_estimate: u64, stop: &[String]) -> Value {
        serde_json::to_value(super::message_body(c, input_estimate, stop)).unwrap()
    }

    type Named = (&'static str, Value);

    fn events(w: &mut MessageWriter, ev: StreamEvent) -> Vec<Named> {
        w.events(ev)
            .into_iter()
            .map(|(name, data)| (name, serde_json::to_value(data).unwrap()))
            .collect()
    }

    fn read(body: Value) -> Result<Messages, ApiError> {
        read_messages(body.to_string().as_bytes(), Purpose::Create)
    }

    fn message(role: &str, content: Value) -> Value {
        json!({"role": role, "content": content})
    }

    fn request(messages: Value, more: Value) -> Value {
        let mut v = json!({"model": "claude-x", "max_tokens": 100, "messages": messages});
        for (k, x) in more.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    }

    fn err_message(body: Value) -> String {
        let e = read(body).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        e.message
    }

    #[test]
    fn system_blocks_become_the_system_prompt_and_cache_control_goes() {
        let m = read(request(
            json!([message("user", json!("hi"))]),
            json!({"system": [
                {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "Answer in French."}
            ], "cache_control": {"type": "ephemeral"}, "service_tier": "auto", "whatever": 1}),
        ))
        .unwrap();
        assert_eq!(
            m.req.system.as_deref(),
            Some("You are terse.\n\nAnswer in French.")
        );
        assert_eq!(m.req.model, "claude-x");
        assert_eq!(m.req.max_tokens, Some(100));
        assert_eq!(m.req.messages, vec![ChatMessage::user("hi")]);
        assert!(
            m.req.fields_as_sent().next().is_none(),
            "{:?}",
            m.req.fields_as_sent().collect::<Vec<_>>()
        );
        // cache_control and service_tier change nothing; a field route
        // does not know is reported, never silently ignored.
        assert_eq!(m.dropped, ["whatever"]);
    }

    #[test]
    fn images_become_image_url_parts() {
        let m = read(request(
            json!([message("user", json!([
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}},
                {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
                {"type": "text", "text": "what are these?", "cache_control": {"type": "ephemeral"}}
            ]))]),
            json!({}),
        ))
        .unwrap();
        let Some(Content::Parts(parts)) = &m.req.messages[0].content else {
            panic!("{:?}", m.req.messages)
        };
        assert_eq!(
            parts,
            &vec![
                json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}}),
                json!({"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}),
                json!({"type": "text", "text": "what are these?"}),
            ]
        );
        let needs = m.req.needs();
        assert!(needs.contains(&crate::upstream::dialect::Need::Vision));
        assert!(needs.contains(&crate::upstream::dialect::Need::ImageUrl));
    }

    #[test]
    fn tool_use_and_tool_result_keep_the_chat_apis_order() {
        let m = read(request(
            json!([
                message("user", json!("What is 12 + 30?")),
                message("assistant", json!([
                    {"type": "thinking", "thinking": "add", "signature": "s"},
                    {"type": "text", "text": "Let me add."},
                    {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 12, "b": 30}},
                    {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {}}
                ])),
                message("user", json!([
                    {"type": "text", "text": "here you go"},
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "42"}]},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "no such file", "is_error": true}
                ]))
            ]),
            json!({}),
        ))
        .unwrap();
        let roles: Vec<&str> = m.req.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "tool", "user"]);
        let a = &m.req.messages[1];
        assert_eq!(a.content, Some(Content::Text("Let me add.".into())));
        let calls = a.tool_calls(1).unwrap();
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("toolu_1", "add")
        );
        assert_eq!(calls.len(), 2);
        assert_eq!(
            serde_json::from_str::<Value>(&calls[0].arguments).unwrap(),
            json!({"a": 12, "b": 30})
        );
        assert_eq!(m.req.messages[2].tool_call_id(), Some("toolu_1"));
        assert_eq!(m.req.messages[2].content, Some(Content::Text("42".into())));
        assert_eq!(
            m.req.messages[3].content,
            Some(Content::Text("Error: no such file".into()))
        );
        assert_eq!(
            m.req.messages[4].content,
            Some(Content::Text("here you go".into()))
        );
        // Calls alone: no content.
        let m = read(request(
            json!([
                message("user", json!("q")),
                message(
                    "assistant",
                    json!([{"type": "tool_use", "id": "t", "name": "f", "input": {}}])
                ),
                message("user", json!([{"type": "tool_result", "tool_use_id": "t"}]))
            ]),
            json!({}),
        ))
        .unwrap();
        assert_eq!(m.req.messages[1].content, None);
        assert_eq!(m.req.messages.len(), 3);
    }

    #[test]
    fn a_tool_results_images_follow_the_tool_messages() {
        let m = read(request(
            json!([
                message("user", json!("look")),
                message("assistant", json!([{"type": "tool_use", "id": "t", "name": "shot", "input": {}}])),
                message("user", json!([{"type": "tool_result", "tool_use_id": "t", "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}}
                ]}]))
            ]),
            json!({}),
        ))
        .unwrap();
        assert_eq!(m.req.messages[2].role, "tool");
        // The note says where the image is: after the tool results, in
        // the user turn's own content (the dialect may merge the two).
        assert_eq!(
            m.req.messages[2].content.as_ref().unwrap().text(),
            "[the tool returned an image: it is attached after the tool results]"
        );
        assert_eq!(m.req.messages[3].role, "user");
        let Some(Content::Parts(p)) = &m.req.messages[3].content else {
            panic!()
        };
        assert_eq!(p[0]["image_url"]["url"], "data:image/png;base64,QUJD");
        assert_eq!(m.req.messages.len(), 4);
    }

    #[test]
    fn messages_with_no_blocks_get_a_400_that_says_they_are_empty() {
        let msg = err_message(request(json!([message("user", json!([]))]), json!({})));
        assert_eq!(
            msg,
            "messages: every message's content is an empty list: send at least one content block"
        );
        // Thinking blocks alone are another matter, and said so.
        let msg = err_message(request(
            json!([
                message("user", json!([])),
                message(
                    "assistant",
                    json!([{"type": "thinking", "thinking": "hm", "signature": "s"}])
                )
            ]),
            json!({}),
        ));
        assert!(msg.contains("(only thinking blocks"), "{msg}");
    }

    #[test]
    fn tools_and_tool_choice_become_function_tools() {
        let tools = json!([
            {"name": "add", "description": "Add.", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}},
            {"type": "custom", "name": "mul", "input_schema": {"type": "object"}, "strict": true},
            {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
        ]);
        let m = read(request(
            json!([message("user", json!("q"))]),
            json!({"tools": tools, "tool_choice": {"type": "any", "disable_parallel_tool_use": true}}),
        ))
        .unwrap();
        assert_eq!(m.dropped, ["tools[web_search]"]);
        assert_eq!(
            m.req.tools.as_ref().unwrap().raw,
            json!([
                {"type": "function", "function": {"name": "add", "description": "Add.", "parameters": {"type": "object"}}},
                {"type": "function", "function": {"name": "mul", "parameters": {"type": "object"}, "strict": true}}
            ])
        );
        assert_eq!(m.req.tool_choice.as_ref().unwrap().raw, "required");
        assert_eq!(m.req.parallel_tool_calls.as_ref().unwrap().raw, false);
        for (choice, want) in [
            (json!({"type": "auto"}), json!("auto")),
            (json!({"type": "none"}), json!("none")),
            (
                json!({"type": "tool", "name": "mul"}),
                json!({"type": "function", "function": {"name": "mul"}}),
            ),
        ] {
            let m = read(request(
                json!([message("user", json!("q"))]),
                json!({"tools": tools, "tool_choice": choice}),
            ))
            .unwrap();
            assert_eq!(m.req.tool_choice.as_ref().unwrap().raw, want);
        }
        // Only server tools: none is sent, and `auto` asks for nothing.
        let m = read(request(
            json!([message("user", json!("q"))]),
            json!({"tools": [tools[2].clone()], "tool_choice": {"type": "auto"}}),
        ))
        .unwrap();
        assert!(
            m.req.fields_as_sent().next().is_none(),
            "{:?}",
            m.req.fields_as_sent().collect::<Vec<_>>()
        );
        assert_eq!(m.dropped, ["tools[web_search]"]);
    }

    #[test]
    fn forcing_a_server_tool_is_a_400() {
        let tools = json!([{"type": "web_search_20250305", "name": "web_search"}]);
        for choice in [
            json!({"type": "tool", "name": "web_search"}),
            json!({"type": "any"}),
        ] {
            let msg = err_message(request(
                json!([message("user", json!("q"))]),
                json!({"tools": tools, "tool_choice": choice}),
            ));
            assert!(msg.starts_with("tool_choice: "), "{msg}");
            assert!(
                msg.contains("web_search") && msg.contains("server tools"),
                "{msg}"
            );
        }
    }

    #[test]
    fn thinking_is_dropped_and_reported_and_the_rest_translated() {
        let m = read(request(
            json!([message("user", json!("q"))]),
            json!({"thinking": {"type": "enabled", "budget_tokens": 2048},
                   "stop_sequences": ["END"], "temperature": 0.5, "top_p": 0.9, "top_k": 40,
                   "metadata": {"user_id": "u-1"}, "stream": true}),
        ))
        .unwrap();
        assert_eq!(m.dropped, ["thinking"]);
        assert_eq!(m.req.stop, ["END"]);
        assert_eq!((m.req.temperature, m.req.top_p), (Some(0.5), Some(0.9)));
        assert_eq!(m.req.extra["top_k"], 40);
        assert!(m.req.stream);
        let mut req = m.req;
        // The router reads the conversation from metadata.user_id…
        let ask = crate::route::ask::Ask::new(None, &req);
        assert_eq!(ask.conversation.as_deref(), Some("user:u-1"));
        // …then it travels as `user`.
        metadata_to_user(&mut req);
        assert_eq!(req.extra.get("metadata"), None);
        assert_eq!(req.extra["user"], "u-1");
        let m = read(request(
            json!([message("user", json!("q"))]),
            json!({"thinking": {"type": "disabled"}}),
        ))
        .unwrap();
        assert!(m.dropped.is_empty());
    }

    #[test]
    fn output_config_format_is_json_mode() {
        let m = read(request(
            json!([message("user", json!("q"))]),
            json!({"output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}, "effort": "low"}}),
        ))
        .unwrap();
        assert_eq!(
            m.req.response_format.as_ref().unwrap().raw["type"],
            "json_schema"
        );
        assert_eq!(m.dropped, ["output_config.effort"]);
    }

    #[test]
    fn missing_max_tokens_and_bad_blocks_are_named_400s() {
        let mut no_max = request(json!([message("user", json!("q"))]), json!({}));
        no_max.as_object_mut().unwrap().shift_remove("max_tokens");
        assert_eq!(err_message(no_max.clone()), "max_tokens: Field required");
        // count_tokens takes none.
        let m = read_messages(no_max.to_string().as_bytes(), Purpose::Count).unwrap();
        assert_eq!(m.req.max_tokens, None);
        let e = read(no_max).unwrap_err();
        assert_eq!(error_body(&e)["error"]["type"], "invalid_request_error");
        let cases = [
            (
                json!([
                    message("user", json!("q")),
                    message(
                        "user",
                        json!([{"type": "image", "source": {"type": "svg"}}])
                    )
                ]),
                "messages.1.content.0.source.type: Input should be 'base64' or 'url'",
            ),
            (
                json!([message(
                    "user",
                    json!([{"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}}])
                )]),
                "messages.0.content.0.source.type: documents of source type \"base64\" (a PDF) \
                 cannot be passed on",
            ),
            (
                json!([
                    message(
                        "assistant",
                        json!([{"type": "tool_use", "id": "t", "name": "f", "input": {}}])
                    ),
                    message(
                        "user",
                        json!([{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "document", "source": {"type": "url", "url": "https://x.test/a.pdf"}}]}])
                    )
                ]),
                "messages.1.content.0.content.0.source.type: documents of source type \"url\"",
            ),
            (
                json!([message("system", json!("q"))]),
                "messages: no message has content route can pass on",
            ),
            (
                json!([{"role": 42, "content": "q"}]),
                "messages.0.role: Input should be a valid string",
            ),
            (
                json!([message("user", json!([{"type": "text"}]))]),
                "messages.0.content.0.text: Field required",
            ),
            (json!([]), "messages: at least one message is required"),
        ];
        for (messages, want) in cases {
            let msg = err_message(request(messages, json!({})));
            assert!(msg.starts_with(want), "{msg}");
        }
        let msg = err_message(request(
            json!([message("user", json!("q"))]),
            json!({"mcp_servers": [{"type": "url", "url": "https://x.test", "name": "x"}]}),
        ));
        assert!(msg.starts_with("mcp_servers: "), "{msg}");
        assert!(err_message(json!({"max_tokens": 1, "messages": []})).starts_with("model: "));
    }

    #[test]
    fn a_system_message_in_the_conversation_stays_where_it_is() {
        // Claude Code 2.1.197 sends its instructions as a `system` message
        // after the user's question.
        let m = read(request(
            json!([
                message("user", json!([{"type": "text", "text": "What is 2+2?", "cache_control": {"type": "ephemeral"}}])),
                message("system", json!([{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Use tools."}])),
                message("assistant", json!("4")),
                message("system", json!("")),
                message("user", json!("and 3+3?"))
            ]),
            json!({"system": "You are Claude."}),
        ))
        .unwrap();
        let roles: Vec<&str> = m.req.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["user", "system", "assistant", "user"]);
        assert_eq!(
            m.req.messages[1].content,
            Some(Content::Text("Be brief.\n\nUse tools.".into()))
        );
        assert_eq!(m.req.system.as_deref(), Some("You are Claude."));
        assert!(m.dropped.is_empty(), "{:?}", m.dropped);
    }

    #[test]
    fn a_thread_is_refused_in_the_words_the_sdks_fall_back_on() {
        for thread in [
            json!({"type": "create"}),
            json!({"type": "continue", "previous_message_id": "msg_1"}),
        ] {
            let e = read(request(
                json!([message("user", json!("hi"))]),
                json!({ "thread": thread }),
            ))
            .unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST);
            let body = error_body(&e);
            assert_eq!(body["error"]["type"], "invalid_request_error");
            assert_eq!(
                body["error"]["details"]["error_code"],
                "thread_unsupported_request"
            );
            let msg = body["error"]["message"].as_str().unwrap();
            assert!(msg.starts_with("thread: "), "{msg}");
        }
        // Null asks for nothing.
        assert!(
            read(request(
                json!([message("user", json!("hi"))]),
                json!({"thread": null})
            ))
            .is_ok()
        );
    }

    #[test]
    fn a_tool_result_that_answers_no_call_is_refused_naming_the_block() {
        // What the tool_runner sends on a threaded `continue`: the result
        // alone.
        let msg = err_message(request(
            json!([message(
                "user",
                json!([
                    {"type": "tool_result", "tool_use_id": "toolu_9", "content": "42"}
                ])
            )]),
            json!({}),
        ));
        assert!(
            msg.starts_with(
                "messages.0.content.0.tool_use_id: no tool_use block before it has the id \"toolu_9\""
            ),
            "{msg}"
        );
        // A call made later does not count.
        let msg = err_message(request(
            json!([
                message(
                    "user",
                    json!([{"type": "tool_result", "tool_use_id": "t", "content": "x"}])
                ),
                message(
                    "assistant",
                    json!([{"type": "tool_use", "id": "t", "name": "f", "input": {}}])
                )
            ]),
            json!({}),
        ));
        assert!(
            msg.starts_with("messages.0.content.0.tool_use_id: "),
            "{msg}"
        );
    }

    #[test]
    fn a_call_left_without_its_result_is_refused_in_anthropics_words() {
        let call = message(
            "assistant",
            json!([{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]),
        );
        let msg = err_message(request(
            json!([
                message("user", json!("q")),
                call.clone(),
                message("user", json!("never mind"))
            ]),
            json!({}),
        ));
        assert!(
            msg.starts_with(
                "messages.1: `tool_use` ids were found without `tool_result` blocks immediately \
                 after: toolu_1."
            ),
            "{msg}"
        );
        // A conversation may end on the calls (the model is to go on), and
        // a system message between a call and its result is no gap.
        assert!(
            read(request(
                json!([message("user", json!("q")), call.clone()]),
                json!({})
            ))
            .is_ok()
        );
        assert!(
            read(request(
                json!([
                    message("user", json!("q")),
                    call,
                    message("system", json!("Be brief.")),
                    message(
                        "user",
                        json!([{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}])
                    )
                ]),
                json!({})
            ))
            .is_ok()
        );
    }

    #[test]
    fn what_route_cannot_pass_on_is_dropped_and_reported_never_refused_for_being_new() {
        let m = read(request(
            json!([
                message("user", json!([
                    {"type": "text", "text": "look"},
                    {"type": "a_new_block", "x": 1},
                    {"type": "text", "text": ""}
                ])),
                {"role": "critic", "content": "too long"},
                message("assistant", json!([
                    {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
                    {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                    {"type": "fallback", "from": {}, "to": {}},
                    {"type": "text", "text": "Found it."},
                    {"type": "a_new_block"}
                ])),
                message("user", json!("thanks"))
            ]),
            json!({
                "a_new_field": {"on": true},
                "container": "cntr_1",
                "context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]},
                "output_config": {"effort": "high", "task_budget": 5},
                "mcp_servers": [],
                "inference_geo": "us",
                "speed": "fast"
            }),
        ))
        .unwrap();
        assert_eq!(
            m.dropped,
            [
                "content[a_new_block]",
                "role[critic]",
                "content[server_tool_use]",
                "content[web_search_tool_result]",
                "output_config.effort",
                "output_config.task_budget",
                "context_management",
                "a_new_field",
                "container"
            ]
        );
        let roles: Vec<&str> = m.req.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        assert_eq!(
            m.req.messages[0].content,
            Some(Content::Text("look".into()))
        );
        assert_eq!(
            m.req.messages[1].content,
            Some(Content::Text("Found it.".into()))
        );
        // Claude Code's own context edit, clearing old thinking, changes
        // nothing here: route sends no thinking upstream.
        let m = read(request(
            json!([message("user", json!("hi"))]),
            json!({"context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
                   "thinking": {"type": "adaptive", "display": "omitted"}}),
        ))
        .unwrap();
        assert_eq!(m.dropped, ["thinking"]);
    }

    #[test]
    fn system_blocks_other_than_text_and_message_fields_are_reported_not_refused() {
        let m = read(request(
            json!([
                {"role": "user", "content": "hi", "a_new_message_field": 1},
                {"role": "system", "content": [
                    {"type": "text", "text": "Be brief."},
                    {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}}
                ], "output_config": {"effort": "medium"}}
            ]),
            json!({"system": [{"type": "text", "text": "Top."}, {"type": "a_new_block"}]}),
        ))
        .unwrap();
        assert_eq!(
            m.dropped,
            [
                "content[a_new_block]",
                "messages.a_new_message_field",
                "output_config.effort",
                "content[image]"
            ]
        );
        assert_eq!(m.req.system.as_deref(), Some("Top."));
        assert_eq!(
            m.req.messages[1].content,
            Some(Content::Text("Be brief.".into()))
        );
        let msg = err_message(request(
            json!([message("user", json!("hi"))]),
            json!({"mcp_servers": {"name": "x"}}),
        ));
        assert_eq!(msg, "mcp_servers: Input should be a valid list");
    }

    #[test]
    fn text_documents_search_results_and_compaction_summaries_are_read_as_text() {
        let m = read(request(
            json!([
                message("assistant", json!([{"type": "compaction", "content": "Earlier: the user asked for a sum."}])),
                message("user", json!([
                    {"type": "document", "title": "Notes", "source": {"type": "text", "media_type": "text/plain", "data": "x = 12"}},
                    {"type": "document", "source": {"type": "content", "content": [{"type": "text", "text": "y = 30"}]}},
                    {"type": "search_result", "title": "Sums", "source": "https://x.test", "content": [{"type": "text", "text": "12 + 30 = 42"}]},
                    {"type": "text", "text": "What is x + y?"}
                ]))
            ]),
            json!({}),
        ))
        .unwrap();
        assert!(m.dropped.is_empty(), "{:?}", m.dropped);
        assert_eq!(
            m.req.messages[0].content,
            Some(Content::Text("Earlier: the user asked for a sum.".into()))
        );
        let Some(Content::Parts(parts)) = &m.req.messages[1].content else {
            panic!("{:?}", m.req.messages[1]);
        };
        let texts: Vec<&str> = parts.iter().map(|p| p["text"].as_str().unwrap()).collect();
        assert_eq!(
            texts,
            [
                "Notes\n\nx = 12",
                "y = 30",
                "Sums (https://x.test)\n\n12 + 30 = 42",
                "What is x + y?"
            ]
        );
    }

    fn completion(reply: crate::upstream::dialect::ChatReply) -> Completion {
        Completion {
            reply,
            body: None,
            upstream_id: Some("abc".into()),
            model: "o::ok".into(),
            dropped: Vec::new(),
        }
    }

    #[test]
    fn replies_become_messages() {
        use crate::upstream::dialect::{ChatReply, ToolCall};
        let v = message_body(
            &completion(ChatReply {
                text: String::new(),
                reasoning: Some("hmm".into()),
                finish_reason: Some("tool_calls".into()),
                usage: Some(Usage {
                    input_tokens: Some(12),
                    output_tokens: Some(7),
                }),
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "add".into(),
                    arguments: r#"{"a":12,"b":30}"#.into(),
                }],
            }),
            99,
            &[],
        );
        assert_eq!(v["id"], "msg_abc");
        assert_eq!(v["type"], "message");
        assert_eq!(v["model"], "o::ok");
        assert_eq!(
            v["content"],
            json!([{"type": "tool_use", "id": "call_1", "name": "add", "input": {"a": 12, "b": 30}}])
        );
        assert_eq!(v["stop_reason"], "tool_use");
        assert_eq!(v["usage"]["input_tokens"], 12);
        assert_eq!(v["usage"]["output_tokens"], 7);
        // No usage from the upstream: route's estimate, and 0.
        let v = message_body(
            &completion(ChatReply {
                text: "14".into(),
                finish_reason: Some("stop_sequence".into()),
                ..ChatReply::default()
            }),
            99,
            &["END".to_string()],
        );
        assert_eq!(v["content"], json!([{"type": "text", "text": "14"}]));
        assert_eq!(
            (v["stop_reason"].as_str(), v["stop_sequence"].as_str()),
            (Some("stop_sequence"), Some("END"))
        );
        assert_eq!(v["usage"]["input_tokens"], 99);
        assert_eq!(v["usage"]["output_tokens"], 0);
        for (from, called, to) in [
            (Some("stop"), false, "end_turn"),
            (Some("STOP"), true, "tool_use"),
            (Some("length"), false, "max_tokens"),
            (Some("MAX_TOKENS"), false, "max_tokens"),
            (Some("end_turn"), false, "end_turn"),
            (Some("SAFETY"), false, "refusal"),
            (None, false, "end_turn"),
        ] {
            assert_eq!(stop_reason(from, called), to, "{from:?}");
        }
    }

    fn call(index: usize, id: Option<&str>, args: &str) -> StreamEvent {
        StreamEvent::Delta(ReplyDelta::ToolCall(
            crate::upstream::dialect::ToolCallDelta {
                index,
                id: id.map(str::to_string),
                name: id.map(|_| "add".to_string()),
                arguments: args.into(),
            },
        ))
    }

    #[test]
    fn a_stream_is_anthropics_events_in_order() {
        let mut w = MessageWriter::new("g::ok", 30, &[]);
        let evs = [
            StreamEvent::Delta(ReplyDelta::Start {
                id: Some("x1".into()),
            }),
            StreamEvent::Delta(ReplyDelta::Text(String::new())),
            StreamEvent::Delta(ReplyDelta::Reasoning("hmm".into())),
            StreamEvent::Delta(ReplyDelta::Text("Let me ".into())),
            StreamEvent::Delta(ReplyDelta::Text("add.".into())),
            call(0, Some("call_1"), ""),
            call(0, None, "{\"a\":"),
            call(0, None, "12,\"b\":30}"),
            call(1, Some("call_2"), "{}"),
            StreamEvent::Delta(ReplyDelta::Finish("STOP".into())),
            StreamEvent::Usage {
                tokens: None,
                counts: Usage {
                    input_tokens: None,
                    output_tokens: Some(9),
                },
            },
            StreamEvent::Done,
        ];
        let out: Vec<Named> = evs.into_iter().flat_map(|e| events(&mut w, e)).collect();
        let names: Vec<&str> = out.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop",
            ]
        );
        for (name, data) in &out {
            assert_eq!(data["type"], *name);
        }
        let start = &out[0].1["message"];
        assert_eq!(start["id"], "msg_x1");
        assert_eq!(start["model"], "g::ok");
        assert_eq!(start["content"], json!([]));
        assert_eq!(start["usage"]["input_tokens"], 30);
        assert_eq!(
            out[1].1["content_block"],
            json!({"type": "text", "text": ""})
        );
        assert_eq!(
            out[2].1["delta"],
            json!({"type": "text_delta", "text": "Let me "})
        );
        assert_eq!(
            out[5].1["content_block"],
            json!({"type": "tool_use", "id": "call_1", "name": "add", "input": {}})
        );
        assert_eq!(out[5].1["index"], 1);
        // The fragments, in order, as input_json_delta.
        let fragments: Vec<&str> = out[6..8]
            .iter()
            .map(|(_, d)| {
                assert_eq!(d["index"], 1);
                assert_eq!(d["delta"]["type"], "input_json_delta");
                d["delta"]["partial_json"].as_str().unwrap()
            })
            .collect();
        assert_eq!(fragments, ["{\"a\":", "12,\"b\":30}"]);
        assert_eq!(out[9].1["index"], 2);
        assert_eq!(
            out[12].1,
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                   "usage": {"input_tokens": 30, "output_tokens": 9}})
        );
    }

    /// Checks Anthropic's stream rules (one block open at a time, indexes
    /// from 0 in order, deltas only to the open block) and gives each
    /// block as its start with its deltas' text gathered.
    fn blocks(out: &[Named]) -> Vec<(Value, String)> {
        let mut blocks: Vec<(Value, String)> = Vec::new();
        let mut open = None;
        for (name, d) in out {
            match *name {
                "content_block_start" => {
                    assert_eq!(open, None, "{d} while a block is open");
                    assert_eq!(d["index"], blocks.len());
                    open = Some(blocks.len());
                    blocks.push((d["content_block"].clone(), String::new()));
                }
                "content_block_delta" => {
                    let i = open.expect("a delta with no block open");
                    assert_eq!(d["index"], i, "{d}");
                    let part = &d["delta"];
                    let text = part["partial_json"].as_str().or(part["text"].as_str());
                    blocks[i].1.push_str(text.unwrap());
                }
                "content_block_stop" => {
                    assert_eq!(d["index"], open.take().expect("a stop with no block open"));
                }
                _ => assert_eq!(open, None, "{name} while a block is open"),
            }
        }
        blocks
    }

    #[test]
    fn interleaved_parallel_calls_and_text_after_a_call_are_sequential_whole_blocks() {
        let mut w = MessageWriter::new("o::ok", 10, &[]);
        let evs = [
            StreamEvent::Delta(ReplyDelta::Text("Both.".into())),
            call(0, Some("call_a"), ""),
            call(1, Some("call_b"), ""),
            call(0, None, "{\"a\":"),
            call(1, None, "{\"b\":"),
            call(0, None, "1,\"c\":"),
            StreamEvent::Delta(ReplyDelta::Text("Then ".into())),
            call(1, None, "2}"),
            StreamEvent::Delta(ReplyDelta::Text("more.".into())),
            call(0, None, "3}"),
            StreamEvent::Delta(ReplyDelta::Finish("tool_calls".into())),
            StreamEvent::Done,
        ];
        let mut out = Vec::new();
        let mut live = Vec::new();
        for e in evs {
            let n = events(&mut w, e);
            live.push(n.len());
            out.extend(n);
        }
        // Call A streams live: its fragments go out as they come.
        assert_eq!(live[3], 1);
        assert_eq!(live[5], 1);
        assert_eq!(live[9], 1);
        let got = blocks(&out);
        assert_eq!(
            got,
            [
                (json!({"type": "text", "text": ""}), "Both.".to_string()),
                (
                    json!({"type": "tool_use", "id": "call_a", "name": "add", "input": {}}),
                    "{\"a\":1,\"c\":3}".to_string()
                ),
                (
                    json!({"type": "tool_use", "id": "call_b", "name": "add", "input": {}}),
                    "{\"b\":2}".to_string()
                ),
                (
                    json!({"type": "text", "text": ""}),
                    "Then more.".to_string()
                ),
            ]
        );
        let names: Vec<&str> = out.iter().map(|(n, _)| *n).collect();
        assert_eq!(names[0], "message_start");
        assert_eq!(&names[names.len() - 2..], ["message_delta", "message_stop"]);
        // A held call is one start, one delta, one stop.
        let b = out
            .iter()
            .position(|(_, d)| d["content_block"]["id"] == "call_b")
            .unwrap();
        assert_eq!(
            names[b..b + 3],
            [
                "content_block_start",
                "content_block_delta",
                "content_block_stop"
            ]
        );
        let end = &out[out.len() - 2].1;
        assert_eq!(end["delta"]["stop_reason"], "tool_use");
    }

    #[test]
    fn a_failure_after_the_first_byte_is_an_error_event() {
        let mut w = MessageWriter::new("a::ok", 3, &[]);
        let mut out = events(&mut w, StreamEvent::Delta(ReplyDelta::Text("Hel".into())));
        out.extend(events(
            &mut w,
            StreamEvent::Failed("upstream went away".into()),
        ));
        let names: Vec<&str> = out.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "error"
            ]
        );
        assert_eq!(
            out[3].1,
            json!({"type": "error", "error": {"type": "api_error", "message": "upstream went away"}})
        );
    }

    #[test]
    fn statuses_take_anthropics_error_types() {
        for (status, kind) in [
            (400, "invalid_request_error"),
            (401, "authentication_error"),
            (404, "not_found_error"),
            (413, "request_too_large"),
            (415, "invalid_request_error"),
            (429, "rate_limit_error"),
            (502, "api_error"),
            (503, "overloaded_error"),
            (504, "api_error"),
        ] {
            assert_eq!(error_type(StatusCode::from_u16(status).unwrap()), kind);
        }
        let e = ApiError::invalid("x", "bad");
        assert_eq!(
            error_body(&e),
            json!({"type":"error","error":{"type":"invalid_request_error","message":"bad"}})
        );
    }
}
