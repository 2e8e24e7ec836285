//! The OpenAI Responses surface: `POST /v1/responses`, what is
//! Responses-shaped about `route --serve`.
//!
//! - [`Request::read`] reads a request body (within the body limit, as
//!   [`super::JsonBody`] takes it) and names what it refers to in route's
//!   item store (`item_reference`s, `previous_response_id`);
//!   [`Request::translate`], given what the store holds of those
//!   ([`Held`]), turns it into the chat request every dialect starts
//!   from: `instructions` and the `input` items become chat messages,
//!   function tools chat tools, `text.format` a `response_format`,
//!   `max_output_tokens` `max_tokens`. [`parse`] is both with nothing
//!   held. What no upstream here can carry is dropped and reported (an
//!   unknown field, item type, content part type or role, built-in tools
//!   OpenAI runs); a 400 is kept for what dropping would change the
//!   answer of (`conversation`, `background`, a stored `prompt`, an item
//!   or response route does not hold, a forced built-in tool). `wire`
//!   holds the request as types: lenient views of the body, its input
//!   items and content parts (tagged enums whose catch-all is a type
//!   route does not know), and the chat pieces it becomes, handed to the
//!   router through the chat API's parser ([`ChatRequest::from_openai_value`]).
//! - [`response_body`] renders a completion as a `response` object
//!   (`reply`: the object and its output items, typed structs written
//!   straight into the body); [`EventWriter`] and [`event_stream`]
//!   (`stream`) render a served stream as the Responses API's named events
//!   (`response.created`, …, `response.completed`), each with its
//!   `sequence_number`.
//! - Errors are OpenAI's ([`ApiError`]), as on the chat surface.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::upstream::dialect::{ChatRequest, openai_object};

use super::Dropped;
use super::error::{ApiError, invalid_request};
use wire::chat::{self, Chat, Msg, Part, ResponseFormat, Role, Settings, ToolChoice};
use wire::input::{
    FormatIn, ItemIn, MessageIn, OutputPartIn, PartIn, RequestIn, TextIn, ToolChoiceIn, ToolIn,
    view,
};

mod reply;
mod stream;
mod wire;

pub use reply::{OutputItem, response_body};
pub use stream::{BeforeEnd, EventWriter, event_stream};

/// Input items that record a built-in tool's call or result. Route never
/// produces them, so in a conversation's history they came from a
/// conversation held elsewhere; they are dropped and reported
/// (`input[web_search_call]`), since no upstream here could read them. So
/// is a `function_call_output` that answers one of them (Codex CLI sends a
/// `local_shell_call`'s output so), as `input[function_call_output]`. An
/// item of a type route does not know at all is dropped the same way, so
/// this list only says which types are known (docs/surfaces/responses.md
/// names them; the tests check each is dropped).
#[cfg_attr(not(test), allow(dead_code))]
const BUILT_IN_ITEMS: &[&str] = &[
    "web_search_call",
    "file_search_call",
    "computer_call",
    "computer_call_output",
    "code_interpreter_call",
    "image_generation_call",
    "local_shell_call",
    "local_shell_call_output",
    "shell_call",
    "shell_call_output",
    "apply_patch_call",
    "apply_patch_call_output",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "mcp_approval_response",
    "custom_tool_call",
    "custom_tool_call_output",
    "tool_search_call",
    "tool_search_output",
    "program",
    "program_output",
    // A compacted stretch of an earlier conversation, encrypted: only
    // OpenAI can read it.
    "compaction",
];

/// Input items that change what the model is asked or may do from that
/// point on, which route does not translate: a 400 says why.
const REFUSED_ITEMS: &[(&str, &str)] = &[
    (
        "compaction_trigger",
        "it asks OpenAI to compact the conversation, which route cannot do; send the \
         conversation without it",
    ),
    (
        "additional_tools",
        "tools added mid-conversation are not translated; declare every tool in the \
         request's tools",
    ),
    (
        "configuration_update",
        "settings changed mid-conversation are not translated; send them as the request's \
         text and reasoning",
    ),
];

/// The request fields route translates, honours or refuses: the fields
/// of [`RequestIn`] (a test holds the two the same), each handled where
/// the request is read.
#[cfg_attr(not(test), allow(dead_code))]
const HANDLED: &[&str] = &[
    "model",
    "instructions",
    "input",
    "previous_response_id",
    "store",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "max_output_tokens",
    "temperature",
    "top_p",
    "text",
    "stream",
    // Dropped and reported by name.
    "reasoning",
    "top_logprobs",
    "max_tool_calls",
    // Refused when they ask for something (`background: true`).
    "conversation",
    "background",
    "prompt",
];

/// The request fields route accepts and ignores without reporting them:
/// the answer is the same without them. Any other field is reported in
/// `X-Llmprobe-Dropped` by its name; none reaches an upstream, since the
/// chat request is built from the fields route handles only.
pub const HARMLESS: &[(&str, &str)] = &[
    (
        "include",
        "asks for extra output data (encrypted reasoning, log probabilities, search \
         sources); what route cannot produce is left out, and the answer is the same",
    ),
    (
        "truncation",
        "'auto' lets OpenAI cut the start of a conversation over the context window; route \
         never cuts one (one over every window gets a 400), so an answer given is the same",
    ),
    (
        "user",
        "an end-user id for OpenAI's caching and abuse monitoring",
    ),
    (
        "metadata",
        "tags kept with a stored response, repeated in the response; never shown to the model",
    ),
    (
        "service_tier",
        "OpenAI's processing tier: speed and price, not the answer",
    ),
    ("prompt_cache_key", "an OpenAI prompt-cache hint"),
    (
        "prompt_cache_retention",
        "how long OpenAI keeps a prompt cache",
    ),
    (
        "prompt_cache_options",
        "OpenAI's prompt-cache breakpoints and lifetime",
    ),
    (
        "safety_identifier",
        "an end-user id for OpenAI's abuse monitoring",
    ),
    (
        "stream_options",
        "include_obfuscation pads OpenAI's stream events against side channels; route's \
         events carry no padding",
    ),
    (
        "client_metadata",
        "Codex CLI's own turn metadata (not an OpenAI field), for its logs",
    ),
    (
        "background_options",
        "options of background mode, which route does not run (background: true is refused)",
    ),
];

/// The chat field names route reports in `X-Llmprobe-Dropped` (the
/// router's clamps, what a dialect could not carry) for the fields this
/// surface mapped to them, as the client named them.
pub const RENAMED: &[(&str, &str)] = &[
    ("max_tokens", "max_output_tokens"),
    ("verbosity", "text.verbosity"),
];

/// The tool calls seen so far in `input`: each function call's
/// `call_id`, and the `call_id` and `id` of each built-in or unknown call
/// dropped, so that an output answering one is dropped with it.
#[derive(Default)]
struct Calls {
    function: HashSet<String>,
    dropped: HashSet<String>,
}

/// A Responses request as route serves it: the chat request, what the
/// surface dropped on the way (for `X-Llmprobe-Dropped`), the request
/// fields a `response` object repeats back, and what to keep in the item
/// store once it is answered (`None` with `store: false`, or when route
/// keeps nothing).
#[derive(Debug)]
pub struct Parsed {
    pub req: ChatRequest,
    pub dropped: Vec<String>,
    pub echo: Echo,
    pub keep: Option<ToKeep>,
}

/// What a stored response keeps of its request: the response it followed,
/// and its own input, references replaced by the items they named (the
/// earlier turns stay with the earlier responses).
#[derive(Debug, Clone, PartialEq)]
pub struct ToKeep {
    pub previous: Option<String>,
    pub input: Vec<Value>,
}

/// What route's item store holds of a request's references.
#[derive(Debug, Default)]
pub struct Held {
    /// How long route keeps items, in seconds (0: it keeps none), for
    /// the messages that say so.
    pub secs: u64,
    /// The items held, by id.
    pub items: HashMap<String, Value>,
    /// The items of the `previous_response_id` chain, oldest turn first;
    /// `None` when route does not hold that response (or one before it).
    pub history: Option<Vec<Value>>,
    /// The shared store (Redis) was asked for what this instance does
    /// not hold, and did not answer.
    pub unavailable: bool,
}

/// The request's settings as every `response` object repeats them
/// (`tools`, `tool_choice`, `temperature`, `text`, …), with OpenAI's
/// defaults where the client sent nothing. Serialized straight into each
/// `response` object, in this order: no JSON map is built per reply.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Echo {
    instructions: Value,
    max_output_tokens: Value,
    metadata: Value,
    parallel_tool_calls: bool,
    /// As sent: the response this one follows.
    previous_response_id: Value,
    reasoning: Value,
    /// Whether route keeps this response (and its items) in its item
    /// store: not with `store: false`, nor when it keeps nothing.
    store: bool,
    temperature: Value,
    text: Value,
    tool_choice: Value,
    /// The function tools only (built-in ones were dropped).
    tools: Vec<Value>,
    top_p: Value,
    truncation: Value,
    user: Value,
}

/// A 400 about the field `at`.
fn bad(at: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::invalid("invalid_request", format!("Invalid '{at}': {why}"))
}

/// A 400 for a field route cannot honour (`unsupported_parameter`).
fn refused(at: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::invalid(
        "unsupported_parameter",
        format!("'{at}' is not supported here: {why}"),
    )
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn expected(at: &str, what: &str, got: &Value) -> ApiError {
    bad(
        at,
        format!("expected {what}, but got {} instead", kind(got)),
    )
}

/// The value of `field`, unless absent or `null`.
fn field<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    obj.get(name).filter(|v| !v.is_null())
}

fn string<'a>(obj: &'a Map<String, Value>, name: &str, at: &str) -> Result<&'a str, ApiError> {
    match field(obj, name) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(expected(at, "a string", other)),
        None => Err(ApiError::invalid(
            "missing_required_parameter",
            format!("Missing required parameter: '{at}'."),
        )),
    }
}

/// How long route keeps what it stores, as the 400s for what it does not
/// hold say it.
fn kept_for(held: &Held, what: &str) -> String {
    let secs = held.secs;
    let mut out = if secs == 0 {
        format!("route keeps no {what} ([route] item_store_secs = 0)")
    } else {
        format!(
            "route keeps the {what} it returns for {secs} s ([route] item_store_secs) after \
             they were stored or last used, and none answered with store: false"
        )
    };
    if held.unavailable {
        out.push_str("; the Redis through which route instances share them does not answer now");
    }
    out
}

/// The 400 for an `item_reference` to an item route does not hold.
fn unknown_item(at: &str, id: &str, held: &Held) -> ApiError {
    ApiError::invalid(
        "item_not_found",
        format!(
            "Invalid '{at}.id': route holds no item {id:?}: it is unknown or expired ({}); \
             send the item itself instead of a reference",
            kept_for(held, "items")
        ),
    )
}

/// The 400 for a `previous_response_id` route does not hold.
fn unknown_response(id: &str, held: &Held) -> ApiError {
    ApiError::invalid(
        "previous_response_not_found",
        format!(
            "Invalid 'previous_response_id': route holds no response {id:?}: it is unknown or \
             expired ({}); send the whole conversation as input instead",
            kept_for(held, "responses")
        ),
    )
}

/// The id an `input` item refers to when it is a reference:
/// `{"type": "item_reference", "id"}`, or an object with an `id` and
/// neither `type` nor `role` (OpenAI's `type` is optional there). `Some`
/// of the id as sent, which may not be a string.
fn reference(item: &Value) -> Option<Option<&Value>> {
    let Value::Object(obj) = item else {
        return None;
    };
    match field(obj, "type") {
        Some(Value::String(t)) if t == "item_reference" => Some(field(obj, "id")),
        None if field(obj, "role").is_none() && field(obj, "id").is_some() => {
            Some(field(obj, "id"))
        }
        _ => None,
    }
}

/// Parse a Responses request body into the chat request route sends on,
/// with nothing in the item store: every reference is unknown. Errors are
/// OpenAI 400s naming the field at fault (`input[2].call_id`). For the
/// tests and the fuzz target; the server looks references up in between
/// ([`Request::read`], then [`Request::translate`]).
#[cfg(any(test, feature = "fuzzing"))]
pub fn parse(body: &[u8]) -> Result<Parsed, ApiError> {
    Request::read(body)?.translate(&Held::default())
}

/// The most `item_reference`s one request may hold: each is a lookup, in
/// Redis too when the store is shared.
pub const MAX_REFERENCES: usize = 4096;

/// A Responses request body, read: a JSON object, with nothing in it that
/// route refuses outright.
#[derive(Debug)]
pub struct Request {
    body: RequestIn,
    /// The ids of its `item_reference`s, in order.
    references: Vec<String>,
}

impl Request {
    /// Read `body`: a JSON object, nothing refused outright
    /// (`conversation`, `background: true`, a stored `prompt`).
    pub fn read(body: &[u8]) -> Result<Request, ApiError> {
        let body = read_body(body)?;
        refuse_stateful(&body)?;
        let references: Vec<String> = match &body.input {
            Some(Value::Array(items)) => items
                .iter()
                .filter_map(|i| reference(i)?.and_then(Value::as_str).map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
        if references.len() > MAX_REFERENCES {
            return Err(bad(
                "input",
                format!(
                    "{} item_references: route resolves at most {MAX_REFERENCES} in one request; \
                     send the items themselves",
                    references.len()
                ),
            ));
        }
        Ok(Request { body, references })
    }

    /// The items its `item_reference`s name.
    pub fn references(&self) -> &[String] {
        &self.references
    }

    /// The response it follows, when `previous_response_id` is a string.
    pub fn previous_response_id(&self) -> Option<&str> {
        self.body
            .previous_response_id
            .as_ref()
            .and_then(Value::as_str)
    }

    /// The chat request route sends on, with `held` (what the item store
    /// holds of [`Request::references`] and
    /// [`Request::previous_response_id`]) in place of what they name. The
    /// request's items move into the chat request, not copied.
    pub fn translate(self, held: &Held) -> Result<Parsed, ApiError> {
        let mut body = self.body;
        let mut echo = echo(&body);
        let mut dropped = Dropped::default();
        let mut chat = Chat::default();
        match body.model.take() {
            None => {}
            Some(Value::String(m)) => chat.model = Some(m),
            Some(other) => return Err(expected("model", "a string", &other)),
        }
        let messages = &mut chat.messages;
        match body.instructions.take() {
            None => {}
            Some(Value::String(s)) => messages.push(Msg::new(Role::System, s)),
            Some(other) => return Err(expected("instructions", "a string", &other)),
        }
        let store = match &body.store {
            None => true,
            Some(Value::Bool(b)) => *b,
            Some(other) => return Err(expected("store", "a boolean", other)),
        };
        let previous = match body.previous_response_id.take() {
            None => None,
            Some(Value::String(id)) => Some(id),
            Some(other) => return Err(expected("previous_response_id", "a string", &other)),
        };
        let keeping = store && held.secs > 0;
        let mut calls = Calls::default();
        // The earlier turns first, as OpenAI puts them; their
        // instructions are not carried over.
        if let Some(id) = &previous {
            let Some(history) = &held.history else {
                return Err(unknown_response(id, held));
            };
            for (j, item) in history.iter().enumerate() {
                let at = format!("previous_response_id[{j}]");
                input_item(&at, item.clone(), messages, &mut calls, &mut dropped)?;
            }
        }
        // The new input, each reference replaced by its item; what is
        // kept is copied only when the response is kept.
        let mut input: Vec<Value> = Vec::new();
        match body.input.take() {
            // A turn may add nothing to the one it follows.
            None if previous.is_some() => {}
            None => {
                return Err(ApiError::invalid(
                    "missing_required_parameter",
                    "Missing required parameter: 'input'. Send the conversation as input, or \
                     name the response it follows as previous_response_id.",
                ));
            }
            Some(Value::String(s)) => {
                if keeping {
                    input.push(json!({"role": "user", "content": s}));
                }
                messages.push(Msg::new(Role::User, s));
            }
            Some(Value::Array(items)) => {
                for (i, item) in items.into_iter().enumerate() {
                    let at = format!("input[{i}]");
                    let item = match reference(&item) {
                        None => item,
                        Some(Some(Value::String(id))) => held
                            .items
                            .get(id)
                            .ok_or_else(|| unknown_item(&at, id, held))?
                            .clone(),
                        Some(Some(other)) => {
                            return Err(expected(&format!("{at}.id"), "a string", other));
                        }
                        Some(None) => {
                            return Err(ApiError::invalid(
                                "missing_required_parameter",
                                format!("Missing required parameter: '{at}.id'."),
                            ));
                        }
                    };
                    if keeping {
                        input.push(item.clone());
                    }
                    input_item(&at, item, messages, &mut calls, &mut dropped)?;
                }
            }
            Some(other) => return Err(expected("input", "a string or an array", &other)),
        }
        // Instructions alone, or an empty text, ask nothing.
        if !messages
            .iter()
            .any(|m| m.role != Role::System && m.has_content())
        {
            return Err(bad(
                "input",
                "input is empty: it holds no message with content, nothing for the model to \
                 answer",
            ));
        }
        let settings = &mut chat.settings;
        tools(&mut body, settings, &mut dropped)?;
        match body.max_output_tokens.take() {
            None => {}
            Some(Value::Number(n)) if n.as_u64().is_some_and(|v| v >= 1) => {
                settings.max_tokens = Some(n);
            }
            Some(other) => {
                return Err(bad(
                    "max_output_tokens",
                    format!("expected an integer of at least 1, but got {other} instead"),
                ));
            }
        }
        settings.temperature = body.temperature.take();
        settings.top_p = body.top_p.take();
        text(body.text.take(), settings, &mut dropped)?;
        for (name, v) in [
            ("reasoning", &body.reasoning),
            ("top_logprobs", &body.top_logprobs),
            ("max_tool_calls", &body.max_tool_calls),
        ] {
            if v.is_some() {
                dropped.add(name);
            }
        }
        settings.stream = match &body.stream {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => return Err(expected("stream", "a boolean", other)),
        };
        // Whatever else was sent, and asks for something: reported.
        for (name, v) in &body.rest {
            let known = HARMLESS.iter().any(|(h, _)| h == name);
            if !known && !v.is_null() {
                dropped.add(name.as_str());
            }
        }
        let req = hand_over(chat)?;
        let keep = keeping.then_some(ToKeep { previous, input });
        echo.store = keep.is_some();
        Ok(Parsed {
            req,
            dropped: dropped.into_vec(),
            echo,
            keep,
        })
    }
}

/// The chat request, handed to the router as every surface built on
/// chat's does: through the chat API's parser, whose refusals (a
/// `temperature` out of range, say) are this surface's.
fn hand_over(chat: Chat) -> Result<ChatRequest, ApiError> {
    ChatRequest::from_openai_value(chat.into_json()).map_err(invalid_request)
}

/// The body as [`RequestIn`], read straight from its bytes; when that
/// fails (it is not JSON, not an object, or names a field twice), read as
/// an object first, with that parser's refusals and its rule that the
/// last of two same-named fields counts.
fn read_body(body: &[u8]) -> Result<RequestIn, ApiError> {
    if let Ok(b) = serde_json::from_slice(body) {
        return Ok(b);
    }
    let obj = openai_object(body).map_err(invalid_request)?;
    typed("", Value::Object(obj))
}

/// `v` as `T`, a view every value of the shape checked before reads as;
/// serde's words, should one not.
fn typed<T: DeserializeOwned>(at: &str, v: Value) -> Result<T, ApiError> {
    T::deserialize(v).map_err(|e| bad(at, e))
}

/// The string `v`, required at `at`.
fn required(at: &str, v: Option<Value>) -> Result<String, ApiError> {
    match v {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(expected(at, "a string", &other)),
        None => Err(ApiError::invalid(
            "missing_required_parameter",
            format!("Missing required parameter: '{at}'."),
        )),
    }
}

/// What needs a store route does not keep, or a mode it does not run.
fn refuse_stateful(body: &RequestIn) -> Result<(), ApiError> {
    if body.conversation.is_some() {
        return Err(refused(
            "conversation",
            "route keeps no conversations; send the whole conversation as input, or name the \
             response it follows as previous_response_id",
        ));
    }
    if body.background == Some(Value::Bool(true)) {
        return Err(refused(
            "background",
            "route answers while the request is open and keeps no responses to poll",
        ));
    }
    if body.prompt.is_some() {
        return Err(refused(
            "prompt",
            "a stored prompt template lives in an OpenAI project; send its text as \
             instructions and input",
        ));
    }
    Ok(())
}

/// One `input` item (at `at`, `input[2]`), appended to `messages` as
/// chat messages.
fn input_item(
    at: &str,
    item: Value,
    messages: &mut Vec<Msg>,
    calls: &mut Calls,
    dropped: &mut Dropped,
) -> Result<(), ApiError> {
    let Value::Object(obj) = &item else {
        return Err(expected(at, "an object", &item));
    };
    let item: ItemIn = match field(obj, "type") {
        None if obj.contains_key("role") => ItemIn::Message(typed(at, item)?),
        None => return Err(bad(&format!("{at}.type"), "missing")),
        Some(Value::String(_)) => typed(at, item)?,
        Some(other) => return Err(expected(&format!("{at}.type"), "a string", other)),
    };
    match item {
        ItemIn::Message(m) => {
            if let Some(m) = message(at, m, dropped)? {
                messages.push(m);
            }
        }
        ItemIn::FunctionCall {
            call_id,
            name,
            arguments,
        } => {
            let call_id = required(&format!("{at}.call_id"), call_id)?;
            let name = required(&format!("{at}.name"), name)?;
            let arguments = match arguments {
                None => String::new(),
                Some(Value::String(s)) => s,
                Some(other) => other.to_string(),
            };
            calls.function.insert(call_id.clone());
            let call = chat::ToolCall {
                id: call_id,
                kind: chat::Function::Function,
                function: chat::Call { name, arguments },
            };
            // Calls after an assistant turn (its text, or other calls)
            // belong to that turn, as chat has them.
            match messages.last_mut() {
                Some(m) if m.role == Role::Assistant => m.tool_calls.push(call),
                _ => messages.push(Msg {
                    role: Role::Assistant,
                    tool_call_id: None,
                    content: None,
                    tool_calls: vec![call],
                }),
            }
        }
        ItemIn::FunctionCallOutput { call_id, output } => {
            let call_id = required(&format!("{at}.call_id"), call_id)?;
            if calls.dropped.contains(&call_id) {
                dropped.add("input[function_call_output]");
                return Ok(());
            }
            if !calls.function.contains(&call_id) {
                return Err(bad(
                    &format!("{at}.call_id"),
                    format!(
                        "no function_call item before it has the call_id {call_id:?}: a tool \
                         output must follow the call it answers"
                    ),
                ));
            }
            let output = match output {
                Some(Value::String(s)) => s,
                Some(Value::Array(parts)) => {
                    let mut text = Vec::new();
                    for (j, p) in parts.into_iter().enumerate() {
                        let pat = format!("{at}.output[{j}]");
                        let p: OutputPartIn = view(p);
                        match p.kind.as_deref() {
                            Some("input_text" | "output_text") => match p.text {
                                Some(Value::String(t)) => text.push(t),
                                other => {
                                    return Err(expected(
                                        &format!("{pat}.text"),
                                        "a string",
                                        &other.unwrap_or(Value::Null),
                                    ));
                                }
                            },
                            Some(t) => {
                                return Err(refused(
                                    &format!("{pat}.type"),
                                    format!(
                                        "a tool output of type {t:?}: route passes on text \
                                         tool outputs only"
                                    ),
                                ));
                            }
                            None => return Err(bad(&format!("{pat}.type"), "missing")),
                        }
                    }
                    text.join("\n")
                }
                Some(other) => {
                    return Err(expected(
                        &format!("{at}.output"),
                        "a string or an array",
                        &other,
                    ));
                }
                None => {
                    return Err(ApiError::invalid(
                        "missing_required_parameter",
                        format!("Missing required parameter: '{at}.output'."),
                    ));
                }
            };
            messages.push(Msg {
                role: Role::Tool,
                tool_call_id: Some(call_id),
                content: Some(chat::Content::Text(output)),
                tool_calls: Vec::new(),
            });
        }
        // Reasoning from an earlier turn: only the model that wrote it can
        // read it (it is encrypted, or a summary), and the answer does not
        // depend on it.
        ItemIn::Reasoning {} => {}
        ItemIn::Other { kind, .. }
            if let Some((_, why)) = REFUSED_ITEMS.iter().find(|(r, _)| *r == kind) =>
        {
            return Err(refused(
                &format!("{at}.type"),
                format!("an item of type {kind:?}: {why}"),
            ));
        }
        // A built-in tool's call or output (BUILT_IN_ITEMS), or a type
        // route does not know: no upstream here could read it. An
        // `item_reference` here is one inside a stored item, which route
        // never stores.
        ItemIn::Other { kind, call_id, id } => {
            calls.dropped.extend(call_id);
            calls.dropped.extend(id);
            dropped.add(format!("input[{kind}]"));
        }
    }
    Ok(())
}

/// A `message` input item as a chat message; `None` when its role is one
/// route does not know (dropped and reported as `role[ROLE]`), or when
/// every part of its content was dropped.
fn message(at: &str, m: MessageIn, dropped: &mut Dropped) -> Result<Option<Msg>, ApiError> {
    let role = required(&format!("{at}.role"), m.role)?;
    let Some(role) = Role::of_message(&role) else {
        dropped.add(format!("role[{role}]"));
        return Ok(None);
    };
    // A message is its role and content; its `id` and `status` are the
    // item's bookkeeping, and `phase` (an assistant message's
    // `commentary` or `final_answer`) only labels what was said. Anything
    // else goes, named.
    for (k, v) in &m.rest {
        if !v.is_null() && !matches!(k.as_str(), "type" | "id" | "status" | "phase") {
            dropped.add(format!("input.{k}"));
        }
    }
    let content = match m.content {
        Some(Value::String(s)) => chat::Content::Text(s),
        Some(Value::Array(parts)) => {
            let sent = parts.len();
            let mut out = Vec::new();
            for (j, p) in parts.into_iter().enumerate() {
                if let Some(part) = content_part(&format!("{at}.content[{j}]"), p, dropped)? {
                    out.push(part);
                }
            }
            if out.is_empty() && sent > 0 {
                return Ok(None);
            }
            // All text: one string, which every dialect reads the same way.
            if out.iter().all(|p| matches!(p, Part::Text(_))) {
                let texts: Vec<String> = out
                    .into_iter()
                    .filter_map(|p| match p {
                        Part::Text(t) => Some(t),
                        Part::ImageUrl { .. } => None,
                    })
                    .collect();
                chat::Content::Text(texts.join("\n\n"))
            } else {
                chat::Content::Parts(out)
            }
        }
        Some(other) => {
            return Err(expected(
                &format!("{at}.content"),
                "a string or an array",
                &other,
            ));
        }
        None => {
            return Err(ApiError::invalid(
                "missing_required_parameter",
                format!("Missing required parameter: '{at}.content'."),
            ));
        }
    };
    Ok(Some(Msg {
        role,
        tool_call_id: None,
        content: Some(content),
        tool_calls: Vec::new(),
    }))
}

/// One content part as a chat content part; `None` for a part type route
/// does not know, dropped and reported as `content[TYPE]`.
fn content_part(at: &str, p: Value, dropped: &mut Dropped) -> Result<Option<Part>, ApiError> {
    let Value::Object(obj) = &p else {
        return Err(expected(at, "an object", &p));
    };
    string(obj, "type", &format!("{at}.type"))?;
    match typed(at, p)? {
        PartIn::InputText { text } => Ok(Some(Part::Text(required(&format!("{at}.text"), text)?))),
        PartIn::Refusal { refusal } => Ok(Some(Part::Text(required(
            &format!("{at}.refusal"),
            refusal,
        )?))),
        PartIn::InputImage {
            file_id,
            image_url,
            detail,
        } => {
            if file_id.is_some() {
                return Err(refused(
                    &format!("{at}.file_id"),
                    "route has no file store; send the image as image_url (a URL or a data: URL)",
                ));
            }
            let url = required(&format!("{at}.image_url"), image_url)?;
            Ok(Some(Part::ImageUrl { url, detail }))
        }
        PartIn::InputFile {} => Err(refused(
            &format!("{at}.type"),
            "file inputs need a file store and document reading no upstream here is known to \
             have; send the text as input_text",
        )),
        PartIn::InputAudio {} => Err(refused(&format!("{at}.type"), "audio input is not routed")),
        PartIn::Other { kind } => {
            dropped.add(format!("content[{kind}]"));
            Ok(None)
        }
    }
}

/// `tools`, `tool_choice` and `parallel_tool_calls` as chat's.
fn tools(body: &mut RequestIn, chat: &mut Settings, dropped: &mut Dropped) -> Result<(), ApiError> {
    let mut functions = Vec::new();
    let mut built_in = Vec::new();
    match body.tools.take() {
        None => {}
        Some(Value::Array(list)) => {
            for (i, t) in list.into_iter().enumerate() {
                let at = format!("tools[{i}]");
                let Value::Object(obj) = &t else {
                    return Err(expected(&at, "an object", &t));
                };
                let ty = string(obj, "type", &format!("{at}.type"))?;
                // Any other type (`web_search`, `file_search`, `local_shell`,
                // `mcp`, `custom`, …) is a tool OpenAI runs or a grammar
                // no upstream here takes.
                if ty != "function" {
                    built_in.push(ty.to_string());
                    continue;
                }
                let t: ToolIn = typed(&at, t)?;
                functions.push(chat::Tool {
                    kind: chat::Function::Function,
                    function: chat::Declaration {
                        name: required(&format!("{at}.name"), t.name)?,
                        description: t.description,
                        parameters: t.parameters,
                        strict: t.strict,
                    },
                });
            }
        }
        Some(other) => return Err(expected("tools", "an array", &other)),
    }
    let choice = match body.tool_choice.take() {
        None => None,
        Some(Value::String(s)) => match s.as_str() {
            "auto" | "none" => Some(ToolChoice::Mode(s.into())),
            "required" if functions.is_empty() && !built_in.is_empty() => {
                return Err(refused(
                    "tool_choice",
                    format!(
                        "'required' with only built-in tools ({}): no upstream here runs them; \
                         offer function tools",
                        built_in.join(", ")
                    ),
                ));
            }
            "required" => Some(ToolChoice::Mode(s.into())),
            _ => {
                return Err(bad(
                    "tool_choice",
                    format!("{s:?} is not one of 'auto', 'none' and 'required'"),
                ));
            }
        },
        Some(c @ Value::Object(_)) => {
            let c: ToolChoiceIn = view(c);
            match c.kind.as_deref() {
                Some("function") => Some(ToolChoice::Forced {
                    kind: chat::Function::Function,
                    function: chat::Named {
                        name: required("tool_choice.name", c.name)?,
                    },
                }),
                Some("allowed_tools") => {
                    return Err(refused(
                        "tool_choice",
                        "allowed_tools is not translated; send only the tools the model may \
                         call, with tool_choice 'auto' or 'required'",
                    ));
                }
                Some(t) => {
                    return Err(refused(
                        "tool_choice",
                        format!(
                            "it forces the tool type {t:?}: only function tools are routed \
                             (built-in tools run at OpenAI, which no upstream here is)"
                        ),
                    ));
                }
                None => return Err(bad("tool_choice.type", "missing")),
            }
        }
        Some(other) => return Err(expected("tool_choice", "a string or an object", &other)),
    };
    for t in built_in {
        dropped.add(format!("tools[{t}]"));
    }
    if let Some(ToolChoice::Forced { function, .. }) = &choice
        && !functions.iter().any(|f| f.function.name == function.name)
    {
        return Err(bad(
            "tool_choice",
            format!(
                "it names the function {:?}, which is not among the function tools",
                function.name
            ),
        ));
    }
    if functions.is_empty() {
        return Ok(());
    }
    chat.tools = functions;
    chat.tool_choice = choice;
    chat.parallel_tool_calls = body.parallel_tool_calls.take();
    Ok(())
}

/// `text.format` as `response_format`, `text.verbosity` as `verbosity`
/// (reported as `text.verbosity` when dropped: [`RENAMED`]); any other
/// field of `text` is reported as `text.NAME`.
fn text(text: Option<Value>, chat: &mut Settings, dropped: &mut Dropped) -> Result<(), ApiError> {
    let Some(text) = text else {
        return Ok(());
    };
    if !text.is_object() {
        return Err(expected("text", "an object", &text));
    }
    let text: TextIn = typed("text", text)?;
    for (name, v) in &text.rest {
        if !v.is_null() {
            dropped.add(format!("text.{name}"));
        }
    }
    chat.verbosity = text.verbosity;
    let Some(format) = text.format else {
        return Ok(());
    };
    let Value::Object(obj) = &format else {
        return Err(expected("text.format", "an object", &format));
    };
    match string(obj, "type", "text.format.type")? {
        "text" => {}
        "json_object" => chat.response_format = Some(ResponseFormat::JsonObject),
        "json_schema" => {
            let f: FormatIn = typed("text.format", format)?;
            let name = required("text.format.name", f.name)?;
            let Some(schema) = f.schema else {
                return Err(ApiError::invalid(
                    "missing_required_parameter",
                    "Missing required parameter: 'text.format.schema'.",
                ));
            };
            chat.response_format = Some(ResponseFormat::JsonSchema {
                json_schema: Box::new(chat::JsonSchema {
                    name: name.into(),
                    schema,
                    strict: f.strict,
                    description: f.description,
                }),
            });
        }
        t => {
            return Err(bad(
                "text.format.type",
                format!("{t:?} is not one of 'text', 'json_object' and 'json_schema'"),
            ));
        }
    }
    Ok(())
}

/// The request settings a `response` object repeats: the function tools
/// (built-in ones were not offered to the model), `tool_choice`, and the
/// sampling and text settings as sent, with OpenAI's defaults.
fn echo(body: &RequestIn) -> Echo {
    let get = |v: &Option<Value>| v.clone().unwrap_or(Value::Null);
    let or = |v: &Option<Value>, default: Value| v.clone().unwrap_or(default);
    // Harmless fields, not handled, so among the rest.
    let rest = |k: &str| field(&body.rest, k).cloned();
    Echo {
        instructions: get(&body.instructions),
        max_output_tokens: get(&body.max_output_tokens),
        metadata: or(&rest("metadata"), json!({})),
        parallel_tool_calls: body
            .parallel_tool_calls
            .as_ref()
            .and_then(Value::as_bool)
            .unwrap_or(true),
        previous_response_id: get(&body.previous_response_id),
        reasoning: get(&body.reasoning),
        // Set by the caller, which knows whether the response is kept.
        store: false,
        temperature: or(&body.temperature, json!(1.0)),
        text: or(&body.text, json!({"format": {"type": "text"}})),
        tool_choice: or(&body.tool_choice, json!("auto")),
        tools: match &body.tools {
            Some(Value::Array(t)) => t
                .iter()
                .filter(|t| t["type"] == "function")
                .cloned()
                .collect(),
            _ => Vec::new(),
        },
        top_p: or(&body.top_p, json!(1.0)),
        truncation: or(&rest("truncation"), json!("disabled")),
        user: rest("user").unwrap_or(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::reply::reply_object;
    use super::*;
    use crate::route::domain::StreamEvent;
    use crate::upstream::dialect::{
        ChatReply, Dialect, ReplyDelta, ResponseFormat, ToolCall, ToolCallDelta, ToolChoice, Usage,
        wire,
    };

    /// The events `ev` becomes, as `(type, data)` pairs.
    fn written(w: &mut EventWriter, ev: StreamEvent) -> Vec<(&'static str, Value)> {
        w.events(ev).iter().map(|e| (e.kind, e.data())).collect()
    }

    fn parsed(v: Value) -> Parsed {
        parse(v.to_string().as_bytes()).unwrap()
    }

    fn refusal(v: Value) -> ApiError {
        parse(v.to_string().as_bytes()).unwrap_err()
    }

    /// The chat request as OpenAI JSON, as an OpenAI upstream gets it.
    fn chat(p: &Parsed) -> Value {
        wire(Dialect::Openai).body(&p.req).unwrap()
    }

    #[test]
    fn a_string_input_and_instructions_are_a_system_and_a_user_message() {
        let p = parsed(json!({
            "model": "auto", "instructions": "Be brief.", "input": "What is 2 + 2?",
            "max_output_tokens": 50, "temperature": 0.2, "top_p": 0.9,
            "store": false, "include": ["reasoning.encrypted_content"], "prompt_cache_key": "k",
            "service_tier": "auto", "truncation": "auto", "user": "u", "metadata": {"a": "b"},
            "safety_identifier": "s", "stream_options": {"include_obfuscation": false},
            "some_future_field": {"x": 1}, "client_metadata": {"x-codex-turn": 1},
            "prompt_cache_retention": "24h", "prompt_cache_options": {"ttl": "30m"},
            "background": false, "background_options": {"completion_window": "soonest"},
            "another_one": null,
        }));
        assert_eq!(p.req.model, "auto");
        assert_eq!(p.req.max_tokens, Some(50));
        assert_eq!(p.req.temperature, Some(0.2));
        assert_eq!(p.req.top_p, Some(0.9));
        assert!(!p.req.stream);
        let m = &p.req.messages;
        assert_eq!(
            (m[0].role.as_str(), m[0].content.as_ref().unwrap().text()),
            ("system", "Be brief.".into())
        );
        assert_eq!(
            (m[1].role.as_str(), m[1].content.as_ref().unwrap().text()),
            ("user", "What is 2 + 2?".into())
        );
        // Every field route does not handle is reported by its name,
        // unless it is known to be harmless or asks for nothing (null).
        assert_eq!(p.dropped, ["some_future_field"]);
        // Nothing Responses-only reaches an OpenAI upstream's chat body.
        let body = chat(&p);
        for k in [
            "include",
            "store",
            "prompt_cache_key",
            "some_future_field",
            "instructions",
            "input",
        ] {
            assert!(body.get(k).is_none(), "{k} in {body}");
        }
        let echo = serde_json::to_value(&p.echo).unwrap();
        assert_eq!(echo["instructions"], "Be brief.");
        assert_eq!(echo["temperature"], 0.2);
    }

    #[test]
    fn each_input_item_kind_becomes_its_chat_message() {
        let p = parsed(json!({"input": [
            {"role": "developer", "content": "Use tools."},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "Add these."},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"},
            ]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "xyz"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sure."}]},
            {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": "{\"a\":1,\"b\":2}"},
            {"type": "function_call", "call_id": "call_2", "name": "add", "arguments": "{\"a\":3,\"b\":4}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "3"},
            {"type": "function_call_output", "call_id": "call_2",
             "output": [{"type": "input_text", "text": "7"}]},
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            {"role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
        ]}));
        let m = &p.req.messages;
        let roles: Vec<&str> = m.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(
            roles,
            ["developer", "user", "assistant", "tool", "tool", "user"]
        );
        let body = chat(&p);
        let msgs = &body["messages"];
        assert_eq!(
            msgs[1]["content"][1]["image_url"],
            json!({"url": "data:image/png;base64,AAAA", "detail": "low"})
        );
        // The text and both calls are one assistant turn.
        assert_eq!(msgs[2]["content"], "Sure.");
        let calls = m[2].tool_calls(2).unwrap();
        assert_eq!(
            calls,
            [
                ToolCall {
                    id: "call_1".into(),
                    name: "add".into(),
                    arguments: "{\"a\":1,\"b\":2}".into()
                },
                ToolCall {
                    id: "call_2".into(),
                    name: "add".into(),
                    arguments: "{\"a\":3,\"b\":4}".into()
                },
            ]
        );
        assert_eq!(
            (m[3].tool_call_id(), msgs[3]["content"].as_str()),
            (Some("call_1"), Some("3"))
        );
        assert_eq!(
            (m[4].tool_call_id(), msgs[4]["content"].as_str()),
            (Some("call_2"), Some("7"))
        );
        assert_eq!(msgs[5]["content"], "a\n\nb");
        assert_eq!(p.dropped, ["input[web_search_call]"]);
    }

    #[test]
    fn calls_with_no_assistant_turn_before_them_open_one() {
        let p = parsed(json!({"input": [
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "ok"},
        ]}));
        let body = chat(&p);
        assert_eq!(body["messages"][1]["role"], "assistant");
        assert_eq!(body["messages"][1]["content"], Value::Null);
        assert_eq!(body["messages"][1]["tool_calls"][0]["id"], "c");
    }

    #[test]
    fn malformed_items_get_a_400_naming_the_field() {
        let cases = [
            (
                json!([{"role": "user", "content": "x"}, {}, {"type": "function_call", "name": "f"}]),
                "input[1].type",
            ),
            (
                json!([{"type": "function_call", "name": "f"}]),
                "input[0].call_id",
            ),
            (
                json!([
                    {"type": "function_call", "call_id": "c", "name": "f"},
                    {"type": "function_call_output", "call_id": "c"}
                ]),
                "input[1].output",
            ),
            (
                json!([{"type": "message", "content": "x"}]),
                "input[0].role",
            ),
            (
                json!([{"type": "message", "role": 7, "content": "x"}]),
                "input[0].role",
            ),
            (
                json!([{"role": "user", "content": [{"type": "input_text"}]}]),
                "input[0].content[0].text",
            ),
            (
                json!([{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}]),
                "input[0].content[0].file_id",
            ),
            (
                json!([{"role": "user", "content": [{"type": "input_file", "file_id": "file-1"}]}]),
                "input[0].content[0].type",
            ),
            (
                json!([{"type": "item_reference", "id": "msg_1"}]),
                "input[0].id",
            ),
            (json!([{"type": "item_reference"}]), "input[0].id"),
            (json!([{"type": "item_reference", "id": 7}]), "input[0].id"),
            (
                json!([{"role": "user", "content": [{"text": "x"}]}]),
                "input[0].content[0].type",
            ),
            (json!(7), "input"),
        ];
        for (input, at) in cases {
            let e = refusal(json!({"model": "m", "input": input}));
            assert_eq!(e.status, 400, "{at}");
            assert!(
                e.message.contains(&format!("'{at}'")),
                "{at}: {}",
                e.message
            );
        }
    }

    #[test]
    fn a_built_in_calls_output_is_dropped_with_it_and_an_orphan_output_is_a_400() {
        // Codex CLI sends a local_shell_call's output as a
        // function_call_output; one may also answer a call by its `id`.
        let p = parsed(json!({"input": [
            {"role": "user", "content": "list the files"},
            {"type": "local_shell_call", "id": "lsh_1", "call_id": "ls1", "status": "completed",
             "action": {"type": "exec", "command": ["ls"]}},
            {"type": "function_call_output", "call_id": "ls1", "output": "a.txt"},
            {"type": "shell_call", "id": "sh_1", "action": {"commands": ["pwd"]}},
            {"type": "function_call_output", "call_id": "sh_1", "output": "/w"},
            {"type": "shell_call_output", "call_id": "sh_1", "output": []},
            {"type": "function_call", "call_id": "c1", "name": "read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "text"},
        ]}));
        let roles: Vec<&str> = p.req.messages.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "tool"]);
        assert_eq!(p.req.messages[2].tool_call_id(), Some("c1"));
        assert_eq!(
            p.dropped,
            [
                "input[local_shell_call]",
                "input[function_call_output]",
                "input[shell_call]",
                "input[shell_call_output]",
            ]
        );
        // An output that answers no call at all never reaches an upstream.
        let e = refusal(json!({"input": [
            {"role": "user", "content": "hi"},
            {"type": "function_call_output", "call_id": "nope", "output": "x"},
        ]}));
        assert_eq!(e.status, 400);
        assert!(
            e.message
                .starts_with("Invalid 'input[1].call_id': no function_call item"),
            "{}",
            e.message
        );
        // The call must come first.
        let e = refusal(json!({"input": [
            {"type": "function_call_output", "call_id": "c", "output": "x"},
            {"type": "function_call", "call_id": "c", "name": "f"},
        ]}));
        assert!(e.message.contains("'input[0].call_id'"), "{}", e.message);
    }

    #[test]
    fn every_history_item_type_is_translated_dropped_or_refused() {
        // Opaque, built-in, or unknown: dropped and reported.
        for t in BUILT_IN_ITEMS.iter().chain(&["a_type_from_next_year"]) {
            let p = parsed(json!({"input": [
                {"role": "user", "content": "hi"},
                {"type": t, "id": "x_1", "encrypted_content": "zzz"},
            ]}));
            assert_eq!(p.dropped, [format!("input[{t}]")], "{t}");
            assert_eq!(p.req.messages.len(), 1, "{t}");
        }
        // What changes the request from that point on: a 400 saying why.
        for (t, why) in [
            ("compaction_trigger", "compact"),
            ("additional_tools", "declare every tool"),
            ("configuration_update", "settings changed mid-conversation"),
        ] {
            let e = refusal(json!({"input": [
                {"role": "user", "content": "hi"},
                {"type": t, "role": "developer", "tools": []},
            ]}));
            assert_eq!(e.code, "unsupported_parameter", "{t}");
            assert!(
                e.message
                    .starts_with("'input[1].type' is not supported here")
                    && e.message.contains(why),
                "{t}: {}",
                e.message
            );
        }
    }

    #[test]
    fn an_empty_input_or_no_positive_output_cap_is_a_400() {
        for body in [
            json!({"input": ""}),
            json!({"input": "", "instructions": "Be brief."}),
            json!({"input": []}),
            json!({"input": [{"role": "user", "content": []}], "instructions": "x"}),
            json!({"input": [{"type": "reasoning", "id": "rs_1", "summary": []}]}),
            json!({"input": [{"type": "compaction", "encrypted_content": "z"}]}),
        ] {
            let e = refusal(body.clone());
            assert_eq!(e.status, 400, "{body}");
            assert!(
                e.message.starts_with("Invalid 'input': input is empty"),
                "{body}: {}",
                e.message
            );
        }
        for n in [json!(0), json!(-5), json!(1.5), json!("100")] {
            let e = refusal(json!({"input": "hi", "max_output_tokens": n}));
            assert_eq!(
                e.message,
                format!(
                    "Invalid 'max_output_tokens': expected an integer of at least 1, but got {n} \
                     instead"
                )
            );
        }
        assert_eq!(
            parsed(json!({"input": "hi", "max_output_tokens": 1}))
                .req
                .max_tokens,
            Some(1)
        );
    }

    #[test]
    fn a_body_that_is_not_json_or_not_an_object_gets_the_chat_surfaces_400() {
        for body in ["{not json", "[1]", "\"hi\""] {
            let e = parse(body.as_bytes()).unwrap_err();
            let chat = ChatRequest::from_openai_json(body.as_bytes()).unwrap_err();
            assert_eq!(
                (e.status.as_u16(), e.code, e.message),
                (400, "invalid_request", chat.to_string()),
                "{body}"
            );
        }
    }

    #[test]
    fn what_route_does_not_run_gets_a_400_that_says_what_to_send() {
        for (field, value) in [
            ("conversation", json!("conv_1")),
            ("background", json!(true)),
            ("prompt", json!({"id": "pmpt_1"})),
        ] {
            let mut req = json!({"model": "m", "input": "hi"});
            req[field] = value;
            let e = refusal(req);
            assert_eq!(
                (e.status.as_u16(), e.kind.as_str(), e.code),
                (400, "invalid_request_error", "unsupported_parameter"),
                "{field}"
            );
            assert!(
                e.message
                    .starts_with(&format!("'{field}' is not supported here")),
                "{}",
                e.message
            );
        }
        // Null is no value at all; background false is the default.
        parsed(
            json!({"input": "hi", "previous_response_id": null, "background": false, "store": true}),
        );
        let e = refusal(json!({"input": "hi", "store": "yes"}));
        assert!(e.message.starts_with("Invalid 'store'"), "{}", e.message);
    }

    /// A store holding `items` and, when given, a chain's history, kept
    /// for an hour.
    fn held(items: &[Value], history: Option<Vec<Value>>) -> Held {
        Held {
            secs: 3600,
            items: items
                .iter()
                .map(|i| (i["id"].as_str().unwrap().to_string(), i.clone()))
                .collect(),
            history,
            unavailable: false,
        }
    }

    fn translated(v: Value, held: &Held) -> Result<Parsed, ApiError> {
        Request::read(v.to_string().as_bytes())?.translate(held)
    }

    fn answer(id: &str, text: &str) -> Value {
        json!({"id": id, "type": "message", "status": "completed", "role": "assistant",
               "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]})
    }

    fn texts(p: &Parsed) -> Vec<(String, String)> {
        p.req
            .messages
            .iter()
            .map(|m| {
                (
                    m.role.clone(),
                    m.content.as_ref().map(|c| c.text()).unwrap_or_default(),
                )
            })
            .collect()
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn item_references_are_replaced_by_the_items_route_holds() {
        // As the Vercel AI SDK sends a third turn: the assistant's answers
        // by reference, a function call in full.
        let body = json!({"model": "m", "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "one"}]},
            {"type": "item_reference", "id": "msg_1"},
            {"role": "user", "content": "two"},
            {"id": "msg_2"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {"role": "user", "content": "three"},
        ]});
        let r = Request::read(body.to_string().as_bytes()).unwrap();
        assert_eq!(r.references(), ["msg_1", "msg_2"]);
        assert_eq!(r.previous_response_id(), None);
        let h = held(&[answer("msg_1", "1"), answer("msg_2", "2")], None);
        let p = r.translate(&h).unwrap();
        assert_eq!(
            texts(&p),
            pairs(&[
                ("user", "one"),
                ("assistant", "1"),
                ("user", "two"),
                ("assistant", "2"),
                ("tool", "ok"),
                ("user", "three"),
            ])
        );
        assert!(p.dropped.is_empty(), "{:?}", p.dropped);
        // What the response keeps: its input as resolved.
        let keep = p.keep.unwrap();
        assert_eq!(keep.previous, None);
        assert_eq!(keep.input.len(), 7);
        assert_eq!(keep.input[1], answer("msg_1", "1"));
        assert_eq!(keep.input[3], answer("msg_2", "2"));
        assert_eq!(serde_json::to_value(&p.echo).unwrap()["store"], true);

        // An item route does not hold (unknown, expired, or from OpenAI).
        let e = translated(body.clone(), &held(&[answer("msg_1", "1")], None)).unwrap_err();
        assert_eq!((e.status.as_u16(), e.code), (400, "item_not_found"));
        assert_eq!(
            e.message,
            "Invalid 'input[3].id': route holds no item \"msg_2\": it is unknown or expired \
             (route keeps the items it returns for 3600 s ([route] item_store_secs) after they \
             were stored or last used, and none answered with store: false); send the item \
             itself instead of a reference"
        );
        let e = refusal(body);
        assert_eq!(
            e.message,
            "Invalid 'input[1].id': route holds no item \"msg_1\": it is unknown or expired \
             (route keeps no items ([route] item_store_secs = 0)); send the item itself \
             instead of a reference"
        );
    }

    #[test]
    fn previous_response_id_puts_the_chain_before_the_new_input() {
        let history = vec![
            json!({"role": "user", "content": "What is 2 + 2?"}),
            answer("msg_1", "4"),
            json!({"role": "user", "content": "Add 3."}),
            json!({"id": "fc_1", "type": "function_call", "status": "completed",
                   "call_id": "call_1", "name": "add", "arguments": "{\"a\":4,\"b\":3}"}),
        ];
        let body = json!({
            "model": "m", "instructions": "Be brief.", "previous_response_id": "resp_2",
            "input": [{"type": "function_call_output", "call_id": "call_1", "output": "7"}],
        });
        let p = translated(body.clone(), &held(&[], Some(history.clone()))).unwrap();
        // The new instructions first; the earlier turns' are not carried
        // over (they were never stored).
        assert_eq!(
            texts(&p),
            pairs(&[
                ("system", "Be brief."),
                ("user", "What is 2 + 2?"),
                ("assistant", "4"),
                ("user", "Add 3."),
                ("assistant", ""),
                ("tool", "7"),
            ])
        );
        // The call in the chain is the one the new output answers.
        assert_eq!(p.req.messages[4].tool_calls(4).unwrap()[0].id, "call_1");
        let keep = p.keep.clone().unwrap();
        assert_eq!(keep.previous.as_deref(), Some("resp_2"));
        assert_eq!(keep.input, body["input"].as_array().unwrap().clone());
        let echo = serde_json::to_value(&p.echo).unwrap();
        assert_eq!(echo["previous_response_id"], "resp_2");
        assert_eq!(echo["store"], true);
        // A turn may add nothing.
        let p = translated(
            json!({"model": "m", "previous_response_id": "resp_2"}),
            &held(&[], Some(history[..2].to_vec())),
        )
        .unwrap();
        assert_eq!(p.req.messages.len(), 2);
        // store: false keeps nothing, and says so.
        let mut nostore = body.clone();
        nostore["store"] = json!(false);
        let p = translated(nostore, &held(&[], Some(history))).unwrap();
        assert!(p.keep.is_none());
        assert_eq!(serde_json::to_value(&p.echo).unwrap()["store"], false);
        // A response route does not hold.
        let e = translated(body, &held(&[], None)).unwrap_err();
        assert_eq!(
            (e.status.as_u16(), e.code),
            (400, "previous_response_not_found")
        );
        assert_eq!(
            e.message,
            "Invalid 'previous_response_id': route holds no response \"resp_2\": it is unknown \
             or expired (route keeps the responses it returns for 3600 s ([route] \
             item_store_secs) after they were stored or last used, and none answered with \
             store: false); send the whole conversation as input instead"
        );
        // Where instances share the store and Redis did not answer, the
        // 400 says so.
        let mut gone = held(&[], None);
        gone.unavailable = true;
        let e = translated(
            json!({"input": "hi", "previous_response_id": "resp_2"}),
            &gone,
        )
        .unwrap_err();
        assert!(
            e.message.contains(
                "none answered with store: false; the Redis through which route instances \
                 share them does not answer now); send the whole conversation"
            ),
            "{}",
            e.message
        );
        let e = refusal(json!({"input": "hi", "previous_response_id": 7}));
        assert!(
            e.message
                .starts_with("Invalid 'previous_response_id': expected a string"),
            "{}",
            e.message
        );
        // Nothing held: nothing kept either.
        assert!(parsed(json!({"input": "hi"})).keep.is_none());
    }

    #[test]
    fn unknown_fields_items_parts_and_roles_are_dropped_and_reported_once_each() {
        let p = parsed(json!({
            "model": "m", "moderation": {"model": "omni"}, "seed": 7,
            "text": {"verbosity": "low", "shape": "round"},
            "input": [
                {"type": "teleport", "call_id": "tp_1"},
                {"role": "user", "content": [
                    {"type": "input_text", "text": "hi"},
                    {"type": "input_hologram", "data": "x"},
                    {"type": "input_hologram", "data": "y"},
                ]},
                {"type": "function_call_output", "call_id": "tp_1", "output": "beamed"},
                {"role": "critic", "content": "bad"},
                {"role": "critic", "content": "worse"},
                {"role": "user", "content": [{"type": "input_smell"}]},
                {"type": "teleport"},
                {"role": "user", "content": "there?"},
            ],
            "context_management": [{"type": "compaction"}],
        }));
        assert_eq!(
            p.dropped,
            [
                "input[teleport]",
                "content[input_hologram]",
                "input[function_call_output]",
                "role[critic]",
                "content[input_smell]",
                "text.shape",
                "moderation",
                "seed",
                "context_management",
            ]
        );
        assert_eq!(texts(&p), pairs(&[("user", "hi"), ("user", "there?")]));
    }

    #[test]
    fn developer_and_system_messages_stay_where_they_are() {
        let p = parsed(json!({"instructions": "Be brief.", "input": [
            {"role": "user", "content": "hi"},
            {"role": "developer", "content": "Answer in French."},
            {"role": "assistant", "content": "Salut."},
            {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "Now in German."}]},
            {"role": "user", "content": "again"},
        ]}));
        assert_eq!(
            texts(&p),
            pairs(&[
                ("system", "Be brief."),
                ("user", "hi"),
                ("developer", "Answer in French."),
                ("assistant", "Salut."),
                ("system", "Now in German."),
                ("user", "again"),
            ])
        );
        assert!(p.dropped.is_empty());
    }

    #[test]
    fn the_handled_fields_are_the_typed_ones() {
        let body: Map<String, Value> = HANDLED.iter().map(|k| (k.to_string(), json!(1))).collect();
        let read: RequestIn = serde_json::from_value(Value::Object(body)).unwrap();
        assert!(read.rest.is_empty(), "{:?}", read.rest);
        let typed = serde_json::to_string(&format!("{read:?}")).unwrap();
        assert_eq!(typed.matches("Some(Number(1))").count(), HANDLED.len());
    }

    #[test]
    fn no_harmless_field_is_reported_and_none_is_handled_too() {
        for (name, why) in HARMLESS {
            assert!(!HANDLED.contains(name), "{name}");
            assert!(!why.is_empty());
            let mut body = json!({"input": "hi"});
            body[*name] = json!({"any": "value"});
            assert!(parsed(body).dropped.is_empty(), "{name}");
        }
    }

    const ADD: &str = r#"{"type":"function","name":"add","description":"Add.","strict":true,
        "parameters":{"type":"object","properties":{"a":{"type":"number"}},"required":["a"]}}"#;

    fn add() -> Value {
        serde_json::from_str(ADD).unwrap()
    }

    #[test]
    fn function_tools_and_tool_choice_become_chats() {
        let p = parsed(json!({
            "input": "hi", "tools": [add(), {"type": "web_search"}],
            "tool_choice": {"type": "function", "name": "add"}, "parallel_tool_calls": false,
        }));
        let decls = p.req.tools().unwrap();
        assert_eq!(decls.len(), 1);
        assert_eq!(decls[0].name, "add");
        assert_eq!(decls[0].description.as_deref(), Some("Add."));
        assert_eq!(
            decls[0].parameters.as_ref().unwrap()["required"],
            json!(["a"])
        );
        assert_eq!(
            p.req.tool_choice().unwrap(),
            Some(ToolChoice::Function("add".into()))
        );
        assert_eq!(p.req.parallel_tool_calls(), Some(false));
        assert_eq!(chat(&p)["tools"][0]["function"]["strict"], true);
        assert_eq!(p.dropped, ["tools[web_search]"]);
        // Only the function tool is echoed: the model was offered no other.
        assert_eq!(
            serde_json::to_value(&p.echo).unwrap()["tools"],
            json!([add()])
        );
        for (choice, want) in [
            ("auto", ToolChoice::Auto),
            ("none", ToolChoice::None),
            ("required", ToolChoice::Required),
        ] {
            let p = parsed(json!({"input": "hi", "tools": [add()], "tool_choice": choice}));
            assert_eq!(p.req.tool_choice().unwrap(), Some(want));
        }
    }

    #[test]
    fn built_in_tools_are_dropped_unless_forced() {
        // Only built-in tools, none required: dropped, and no tools sent.
        for choice in [json!(null), json!("auto"), json!("none")] {
            let p = parsed(json!({
                "input": "hi", "tool_choice": choice,
                "tools": [{"type": "web_search_preview"}, {"type": "file_search", "vector_store_ids": ["v"]},
                          {"type": "local_shell"}, {"type": "mcp", "server_label": "x"}],
            }));
            assert_eq!(
                p.dropped,
                [
                    "tools[web_search_preview]",
                    "tools[file_search]",
                    "tools[local_shell]",
                    "tools[mcp]"
                ]
            );
            assert!(!p.req.declares_tools());
            assert!(chat(&p).get("tool_choice").is_none());
        }
        let e = refusal(
            json!({"input": "hi", "tools": [add(), {"type": "web_search"}], "tool_choice": {"type": "web_search"}}),
        );
        assert!(
            e.message.contains("tool_choice") && e.message.contains("web_search"),
            "{}",
            e.message
        );
        let e = refusal(
            json!({"input": "hi", "tools": [{"type": "web_search"}], "tool_choice": "required"}),
        );
        assert!(
            e.message.contains("required") && e.message.contains("web_search"),
            "{}",
            e.message
        );
        let e = refusal(
            json!({"input": "hi", "tools": [add()], "tool_choice": {"type": "function", "name": "sub"}}),
        );
        assert!(
            e.message.contains("'tool_choice'") && e.message.contains("sub"),
            "{}",
            e.message
        );
        // Required with a function tool beside the built-in one is fine.
        let p = parsed(
            json!({"input": "hi", "tools": [add(), {"type": "code_interpreter"}], "tool_choice": "required"}),
        );
        assert_eq!(p.req.tool_choice().unwrap(), Some(ToolChoice::Required));
        assert_eq!(p.dropped, ["tools[code_interpreter]"]);
    }

    #[test]
    fn text_format_becomes_response_format_and_reasoning_is_dropped() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let p = parsed(json!({
            "input": "hi", "reasoning": {"effort": "high", "summary": "auto"},
            "text": {"format": {"type": "json_schema", "name": "n", "schema": schema, "strict": true}, "verbosity": "low"},
        }));
        assert_eq!(
            p.req.response_format().unwrap(),
            Some(ResponseFormat::JsonSchema {
                name: "n".into(),
                schema: schema.clone()
            })
        );
        assert_eq!(chat(&p)["response_format"]["json_schema"]["strict"], true);
        assert_eq!(chat(&p)["verbosity"], "low");
        assert!(chat(&p).get("reasoning_effort").is_none());
        assert_eq!(p.dropped, ["reasoning"]);
        let p = parsed(json!({"input": "hi", "text": {"format": {"type": "json_object"}}}));
        assert_eq!(
            p.req.response_format().unwrap(),
            Some(ResponseFormat::JsonObject)
        );
        let p = parsed(json!({"input": "hi", "text": {"format": {"type": "text"}}}));
        assert_eq!(p.req.response_format().unwrap(), None);
        let e = refusal(
            json!({"input": "hi", "text": {"format": {"type": "json_schema", "name": "n"}}}),
        );
        assert!(e.message.contains("text.format.schema"), "{}", e.message);
    }

    #[test]
    fn a_reply_with_text_and_two_calls_is_a_message_and_two_function_call_items() {
        let reply = ChatReply {
            text: "Adding.".into(),
            finish_reason: Some("tool_calls".into()),
            usage: Some(Usage {
                input_tokens: Some(10),
                output_tokens: Some(5),
            }),
            tool_calls: vec![
                ToolCall {
                    id: "call_a".into(),
                    name: "add".into(),
                    arguments: "{\"a\":1}".into(),
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "mul".into(),
                    arguments: "{\"a\":2}".into(),
                },
            ],
            ..ChatReply::default()
        };
        let echo = parsed(json!({"input": "hi", "tools": [add()], "temperature": 0.5})).echo;
        let r = serde_json::to_value(reply_object(&reply, "p::m", &echo)).unwrap();
        assert!(r["id"].as_str().unwrap().starts_with("resp_"), "{r}");
        assert_eq!(
            (
                r["object"].as_str(),
                r["status"].as_str(),
                r["model"].as_str()
            ),
            (Some("response"), Some("completed"), Some("p::m"))
        );
        assert_eq!(r["output_text"], "Adding.");
        let out = r["output"].as_array().unwrap();
        assert_eq!(out.len(), 3);
        assert_eq!(out[0]["type"], "message");
        assert!(out[0]["id"].as_str().unwrap().starts_with("msg_"));
        assert_eq!(
            out[0]["content"],
            json!([{"type": "output_text", "text": "Adding.", "annotations": [], "logprobs": []}])
        );
        for (item, (call_id, name, args)) in out[1..].iter().zip([
            ("call_a", "add", "{\"a\":1}"),
            ("call_b", "mul", "{\"a\":2}"),
        ]) {
            assert!(item["id"].as_str().unwrap().starts_with("fc_"));
            assert_eq!(
                (
                    item["type"].as_str(),
                    item["call_id"].as_str(),
                    item["name"].as_str(),
                    item["arguments"].as_str(),
                    item["status"].as_str()
                ),
                (
                    Some("function_call"),
                    Some(call_id),
                    Some(name),
                    Some(args),
                    Some("completed")
                )
            );
        }
        assert_eq!(r["usage"]["input_tokens"], 10);
        assert_eq!(r["usage"]["output_tokens"], 5);
        assert_eq!(r["usage"]["total_tokens"], 15);
        assert_eq!(r["usage"]["output_tokens_details"]["reasoning_tokens"], 0);
        assert_eq!(r["temperature"], 0.5);
        assert_eq!(r["tool_choice"], "auto");
        assert_eq!(r["error"], Value::Null);
        // Cut by the cap: incomplete.
        let cut = ChatReply {
            text: "Lo".into(),
            finish_reason: Some("MAX_TOKENS".into()),
            ..ChatReply::default()
        };
        let r = serde_json::to_value(reply_object(&cut, "p::m", &echo)).unwrap();
        assert_eq!(r["status"], "incomplete");
        assert_eq!(
            r["incomplete_details"],
            json!({"reason": "max_output_tokens"})
        );
        assert_eq!(r["usage"], Value::Null);
    }

    fn call(index: usize, id: Option<&str>, name: Option<&str>, args: &str) -> StreamEvent {
        StreamEvent::Delta(ReplyDelta::ToolCall(ToolCallDelta {
            index,
            id: id.map(str::to_string),
            name: name.map(str::to_string),
            arguments: args.into(),
        }))
    }

    fn text(t: &str) -> StreamEvent {
        StreamEvent::Delta(ReplyDelta::Text(t.into()))
    }

    #[test]
    fn a_stream_with_interleaved_text_and_fragmented_calls_closes_each_item_before_the_next() {
        let mut w = EventWriter::new("p::m", Echo::default());
        let events = [
            StreamEvent::Delta(ReplyDelta::Start { id: None }),
            text("Let me "),
            text("add."),
            call(0, Some("call_a"), Some("add"), "{\"a\":"),
            call(0, None, None, "1}"),
            call(1, Some("call_b"), Some("mul"), ""),
            call(1, None, None, "{}"),
            text("Done."),
            StreamEvent::Delta(ReplyDelta::Finish("tool_calls".into())),
            StreamEvent::Usage {
                tokens: Some(9),
                counts: Usage {
                    input_tokens: Some(4),
                    output_tokens: Some(5),
                },
            },
            StreamEvent::Done,
        ];
        let out: Vec<(&str, Value)> = events
            .into_iter()
            .flat_map(|e| written(&mut w, e))
            .collect();
        let kinds: Vec<&str> = out.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            kinds,
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        for (i, (k, d)) in out.iter().enumerate() {
            assert_eq!(d["sequence_number"], i, "{k}");
            assert_eq!(d["type"], *k);
        }
        let data = |i: usize| &out[i].1;
        assert_eq!(data(0)["response"]["status"], "in_progress");
        assert_eq!(data(6)["text"], "Let me add.");
        assert_eq!(data(10)["output_index"], 1);
        assert_eq!(data(12)["arguments"], "{\"a\":1}");
        assert_eq!(data(13)["item"]["call_id"], "call_a");
        assert_eq!(data(17)["item"]["name"], "mul");
        assert_eq!(data(17)["item"]["arguments"], "{}");
        assert_eq!(data(21)["output_index"], 3);
        let done = &data(24)["response"];
        assert_eq!(done["status"], "completed");
        assert_eq!(done["output"].as_array().unwrap().len(), 4);
        assert_eq!(done["output_text"], "Let me add.Done.");
        assert_eq!(done["usage"]["total_tokens"], 9);
        assert_eq!(done["id"], data(0)["response"]["id"]);
        // Nothing after the end.
        assert!(written(&mut w, text("late")).is_empty());
    }

    #[test]
    fn interleaved_parallel_calls_keep_every_fragment_and_items_stay_sequential() {
        let mut w = EventWriter::new("p::m", Echo::default());
        let events = [
            text("Both."),
            call(0, Some("call_a"), Some("add"), ""),
            call(1, Some("call_b"), Some("mul"), ""),
            call(0, None, None, "{\"a\":"),
            call(1, None, None, "{\"b\":"),
            call(0, None, None, "1,\"c\":"),
            text("Then "),
            call(1, None, None, "2}"),
            text("more."),
            call(0, None, None, "3}"),
            StreamEvent::Delta(ReplyDelta::Finish("tool_calls".into())),
            StreamEvent::Done,
        ];
        let out: Vec<(&str, Value)> = events
            .into_iter()
            .flat_map(|e| written(&mut w, e))
            .collect();
        for (i, (k, d)) in out.iter().enumerate() {
            assert_eq!(d["sequence_number"], i, "{k}");
        }
        // Items open and close one at a time, at output indexes in order;
        // every event inside an item names it.
        let mut open: Option<(u64, String)> = None;
        let mut done = Vec::new();
        let mut arguments = std::collections::BTreeMap::<String, String>::new();
        for (k, d) in &out {
            match *k {
                "response.output_item.added" => {
                    assert!(open.is_none(), "{d}");
                    assert_eq!(d["output_index"], done.len());
                    let id = d["item"]["id"].as_str().unwrap().to_string();
                    open = Some((d["output_index"].as_u64().unwrap(), id));
                }
                "response.output_item.done" => {
                    let (at, id) = open.take().unwrap();
                    assert_eq!(
                        (
                            d["output_index"].as_u64().unwrap(),
                            d["item"]["id"].as_str().unwrap()
                        ),
                        (at, id.as_str())
                    );
                    done.push(d["item"].clone());
                }
                "response.created" | "response.in_progress" | "response.completed" => {
                    assert!(open.is_none(), "{k}")
                }
                _ => {
                    let (at, id) = open.as_ref().unwrap();
                    assert_eq!(d["output_index"], *at, "{d}");
                    assert_eq!(d["item_id"], id.as_str(), "{d}");
                    if *k == "response.function_call_arguments.delta" {
                        let a = arguments.entry(id.clone()).or_default();
                        a.push_str(d["delta"].as_str().unwrap());
                    }
                    if *k == "response.function_call_arguments.done" {
                        assert_eq!(d["arguments"], arguments[id].as_str(), "{d}");
                    }
                }
            }
        }
        let summary: Vec<(&str, &str)> = done
            .iter()
            .map(|i| match i["type"].as_str().unwrap() {
                "message" => ("text", i["content"][0]["text"].as_str().unwrap()),
                _ => (
                    i["call_id"].as_str().unwrap(),
                    i["arguments"].as_str().unwrap(),
                ),
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("text", "Both."),
                ("call_a", "{\"a\":1,\"c\":3}"),
                ("call_b", "{\"b\":2}"),
                ("text", "Then more."),
            ]
        );
        let (kind, last) = out.last().unwrap();
        assert_eq!(*kind, "response.completed");
        assert_eq!(last["response"]["output"], json!(done));
        assert_eq!(last["response"]["output"][2]["name"], "mul");
        assert_eq!(last["response"]["output_text"], "Both.Then more.");
    }

    #[test]
    fn a_stream_cut_by_the_cap_is_incomplete_and_a_failure_is_response_failed() {
        let mut w = EventWriter::new("p::m", Echo::default());
        let mut out = written(&mut w, text("Lo"));
        out.extend(written(
            &mut w,
            StreamEvent::Delta(ReplyDelta::Finish("length".into())),
        ));
        out.extend(written(&mut w, StreamEvent::Done));
        let (kind, last) = out.last().unwrap();
        assert_eq!(*kind, "response.incomplete");
        assert_eq!(
            last["response"]["incomplete_details"]["reason"],
            "max_output_tokens"
        );

        let mut w = EventWriter::new("p::m", Echo::default());
        let mut out = written(&mut w, text("Lo"));
        out.extend(written(
            &mut w,
            StreamEvent::Failed("upstream went away".into()),
        ));
        let (kind, last) = out.last().unwrap();
        assert_eq!(*kind, "response.failed");
        assert_eq!(last["response"]["status"], "failed");
        assert_eq!(last["response"]["error"]["message"], "upstream went away");
        assert_eq!(last["sequence_number"], out.len() - 1);
        assert!(written(&mut w, StreamEvent::Done).is_empty());
    }

    #[test]
    fn too_many_references_in_one_request_are_a_400() {
        let refs: Vec<Value> = (0..=MAX_REFERENCES)
            .map(|i| json!({"type": "item_reference", "id": format!("msg_{i}")}))
            .collect();
        let body = json!({"model": "m", "input": refs}).to_string();
        let e = Request::read(body.as_bytes()).unwrap_err();
        assert!(
            e.message
                .starts_with("Invalid 'input': 4097 item_references"),
            "{}",
            e.message
        );
        let body = json!({"model": "m", "input": &refs[..MAX_REFERENCES]}).to_string();
        assert_eq!(
            Request::read(body.as_bytes()).unwrap().references().len(),
            MAX_REFERENCES
        );
    }
}
