//! The OpenAI Responses surface: `POST /v1/responses`, what is
//! Responses-shaped about `route --serve`.
//!
//! - [`parse`] reads a request body (within the body limit, as
//!   [`super::JsonBody`] takes it) and turns it into the chat request every
//!   dialect starts from: `instructions` and the `input` items become chat
//!   messages, function tools chat tools, `text.format` a
//!   `response_format`, `max_output_tokens` `max_tokens`. Route keeps no
//!   conversation store, so what needs one (`previous_response_id`,
//!   `conversation`, `item_reference`, `background`, a stored `prompt`)
//!   gets a 400 that says so; built-in tools (`web_search`, …) no upstream
//!   here runs are dropped and reported, unless the request forces one.
//! - [`response_body`] renders a completion as a `response` object;
//!   [`EventWriter`] and [`event_stream`] render a served stream as the
//!   Responses API's named events (`response.created`, …,
//!   `response.completed`), each with its `sequence_number`.
//! - Errors are OpenAI's ([`ApiError`]), as on the chat surface.

use axum::response::Response;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::route::domain::StreamEvent;
use crate::route::send::Completion;
use crate::upstream::dialect::{ChatReply, ChatRequest, ReplyDelta, Usage, openai_object};

use super::calls::Holdback;
use super::openai::{ApiError, invalid_request, openai_finish_reason};

/// Input items that record a built-in tool's call or result. Route never
/// produces them, so in a conversation's history they came from a
/// conversation held elsewhere; they are dropped and reported
/// (`input[web_search_call]`), since no upstream here could read them. So
/// is a `function_call_output` that answers one of them (Codex CLI sends a
/// `local_shell_call`'s output so), as `input[function_call_output]`.
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

/// The chat field names route reports in `X-Llmprobe-Dropped` (the
/// router's clamps, what a dialect could not carry) for the fields this
/// surface mapped to them, as the client named them.
pub const RENAMED: &[(&str, &str)] = &[
    ("max_tokens", "max_output_tokens"),
    ("verbosity", "text.verbosity"),
];

/// The tool calls seen so far in `input`: each function call's
/// `call_id`, and the `call_id` and `id` of each built-in call dropped,
/// so that an output answering one is dropped with it.
#[derive(Default)]
struct Calls {
    function: std::collections::HashSet<String>,
    dropped: std::collections::HashSet<String>,
}

/// A Responses request as route serves it: the chat request, what the
/// surface dropped on the way (for `X-Llmprobe-Dropped`), and the request
/// fields a `response` object repeats back.
#[derive(Debug)]
pub struct Parsed {
    pub req: ChatRequest,
    pub dropped: Vec<String>,
    pub echo: Echo,
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
    /// Always null: route keeps no responses to chain.
    previous_response_id: (),
    reasoning: Value,
    /// Always false: nothing is stored, whatever the client asked.
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

/// Parse a Responses request body into the chat request route sends on.
/// Errors are OpenAI 400s naming the field at fault (`input[2].call_id`).
pub fn parse(body: &[u8]) -> Result<Parsed, ApiError> {
    let obj = openai_object(body).map_err(invalid_request)?;
    refuse_stateful(&obj)?;
    let mut dropped = Vec::new();
    let mut chat = Map::new();
    match field(&obj, "model") {
        None => {}
        Some(Value::String(m)) => {
            chat.insert("model".into(), json!(m));
        }
        Some(other) => return Err(expected("model", "a string", other)),
    }
    let mut messages = Vec::new();
    match field(&obj, "instructions") {
        None => {}
        Some(Value::String(s)) => messages.push(json!({"role": "system", "content": s})),
        Some(other) => return Err(expected("instructions", "a string", other)),
    }
    match field(&obj, "input") {
        None => {
            return Err(ApiError::invalid(
                "missing_required_parameter",
                "Missing required parameter: 'input'. Route keeps no conversation store: send \
                 the whole conversation as input.",
            ));
        }
        Some(Value::String(s)) => messages.push(json!({"role": "user", "content": s})),
        Some(Value::Array(items)) => {
            let mut calls = Calls::default();
            for (i, item) in items.iter().enumerate() {
                input_item(i, item, &mut messages, &mut calls, &mut dropped)?;
            }
        }
        Some(other) => return Err(expected("input", "a string or an array", other)),
    }
    // Instructions alone, or an empty text, ask nothing.
    if !messages
        .iter()
        .any(|m| m["role"] != "system" && has_content(m))
    {
        return Err(bad(
            "input",
            "input is empty: it holds no message with content, nothing for the model to \
             answer",
        ));
    }
    chat.insert("messages".into(), Value::Array(messages));
    tools(&obj, &mut chat, &mut dropped)?;
    match field(&obj, "max_output_tokens") {
        None => {}
        Some(Value::Number(n)) if n.as_u64().is_some_and(|v| v >= 1) => {
            chat.insert("max_tokens".into(), json!(n));
        }
        Some(other) => {
            return Err(bad(
                "max_output_tokens",
                format!("expected an integer of at least 1, but got {other} instead"),
            ));
        }
    }
    for name in ["temperature", "top_p"] {
        if let Some(v) = field(&obj, name) {
            chat.insert(name.into(), v.clone());
        }
    }
    text(&obj, &mut chat)?;
    if field(&obj, "reasoning").is_some() {
        dropped.push("reasoning".into());
    }
    for name in ["top_logprobs", "max_tool_calls"] {
        if field(&obj, name).is_some() {
            dropped.push(name.into());
        }
    }
    let stream = match field(&obj, "stream") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => return Err(expected("stream", "a boolean", other)),
    };
    chat.insert("stream".into(), json!(stream));
    let req = ChatRequest::from_openai_value(Value::Object(chat)).map_err(invalid_request)?;
    Ok(Parsed {
        req,
        dropped,
        echo: echo(&obj),
    })
}

/// What needs a store route does not keep, or a mode it does not run.
fn refuse_stateful(obj: &Map<String, Value>) -> Result<(), ApiError> {
    const NO_STORE: &str = "route keeps no conversation store; send the whole conversation as \
                            input, with store: false";
    if field(obj, "previous_response_id").is_some() {
        return Err(refused("previous_response_id", NO_STORE));
    }
    if field(obj, "conversation").is_some() {
        return Err(refused("conversation", NO_STORE));
    }
    if field(obj, "background") == Some(&Value::Bool(true)) {
        return Err(refused(
            "background",
            "route answers while the request is open and keeps no responses to poll",
        ));
    }
    if field(obj, "prompt").is_some() {
        return Err(refused(
            "prompt",
            "a stored prompt template lives in an OpenAI project; send its text as \
             instructions and input",
        ));
    }
    Ok(())
}

/// Whether a chat message built here says anything: text that is not
/// empty, any other part, or tool calls.
fn has_content(m: &Value) -> bool {
    match &m["content"] {
        Value::String(s) => !s.is_empty(),
        Value::Array(parts) => !parts.is_empty(),
        _ => m.get("tool_calls").is_some(),
    }
}

/// One `input` item, appended to `messages` as chat messages.
fn input_item(
    i: usize,
    item: &Value,
    messages: &mut Vec<Value>,
    calls: &mut Calls,
    dropped: &mut Vec<String>,
) -> Result<(), ApiError> {
    let at = format!("input[{i}]");
    let Value::Object(obj) = item else {
        return Err(expected(&at, "an object", item));
    };
    let ty = match field(obj, "type") {
        None if obj.contains_key("role") => "message",
        None => return Err(bad(&format!("{at}.type"), "missing")),
        Some(Value::String(t)) => t.as_str(),
        Some(other) => return Err(expected(&format!("{at}.type"), "a string", other)),
    };
    match ty {
        "message" => messages.push(message(&at, obj)?),
        "function_call" => {
            let call_id = string(obj, "call_id", &format!("{at}.call_id"))?;
            let name = string(obj, "name", &format!("{at}.name"))?;
            let arguments = match field(obj, "arguments") {
                None => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            };
            calls.function.insert(call_id.to_string());
            let call = json!({
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            });
            // Calls after an assistant turn (its text, or other calls)
            // belong to that turn, as chat has them.
            match messages.last_mut() {
                Some(m) if m["role"] == "assistant" => match m.get_mut("tool_calls") {
                    Some(Value::Array(calls)) => calls.push(call),
                    _ => m["tool_calls"] = json!([call]),
                },
                _ => messages.push(json!({
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [call],
                })),
            }
        }
        "function_call_output" => {
            let call_id = string(obj, "call_id", &format!("{at}.call_id"))?;
            if calls.dropped.contains(call_id) {
                dropped.push(format!("input[{ty}]"));
                return Ok(());
            }
            if !calls.function.contains(call_id) {
                return Err(bad(
                    &format!("{at}.call_id"),
                    format!(
                        "no function_call item before it has the call_id {call_id:?}: a tool \
                         output must follow the call it answers"
                    ),
                ));
            }
            let output = match field(obj, "output") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(parts)) => {
                    let mut text = Vec::new();
                    for (j, p) in parts.iter().enumerate() {
                        let pat = format!("{at}.output[{j}]");
                        match p.get("type").and_then(Value::as_str) {
                            Some("input_text" | "output_text") => match p.get("text") {
                                Some(Value::String(t)) => text.push(t.clone()),
                                other => {
                                    return Err(expected(
                                        &format!("{pat}.text"),
                                        "a string",
                                        other.unwrap_or(&Value::Null),
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
                        other,
                    ));
                }
                None => {
                    return Err(ApiError::invalid(
                        "missing_required_parameter",
                        format!("Missing required parameter: '{at}.output'."),
                    ));
                }
            };
            messages.push(json!({"role": "tool", "tool_call_id": call_id, "content": output}));
        }
        // Reasoning from an earlier turn: only the model that wrote it can
        // read it (it is encrypted, or a summary), and the answer does not
        // depend on it.
        "reasoning" => {}
        "item_reference" => {
            return Err(refused(
                &format!("{at}.type"),
                "an item_reference points into a conversation store, which route does not \
                 keep; send the item itself",
            ));
        }
        t if BUILT_IN_ITEMS.contains(&t) => {
            for k in ["call_id", "id"] {
                if let Some(Value::String(id)) = field(obj, k) {
                    calls.dropped.insert(id.clone());
                }
            }
            dropped.push(format!("input[{t}]"));
        }
        t if let Some((_, why)) = REFUSED_ITEMS.iter().find(|(r, _)| *r == t) => {
            return Err(refused(
                &format!("{at}.type"),
                format!("an item of type {t:?}: {why}"),
            ));
        }
        t => {
            return Err(bad(
                &format!("{at}.type"),
                format!("unknown item type {t:?}"),
            ));
        }
    }
    Ok(())
}

/// A `message` input item as a chat message.
fn message(at: &str, obj: &Map<String, Value>) -> Result<Value, ApiError> {
    let role = string(obj, "role", &format!("{at}.role"))?;
    if !matches!(role, "user" | "assistant" | "system" | "developer") {
        return Err(bad(
            &format!("{at}.role"),
            format!(
                "{role:?} is not one of 'user', 'assistant', 'system' and 'developer' (tool \
                 results are function_call_output items)"
            ),
        ));
    }
    let content = match field(obj, "content") {
        Some(Value::String(s)) => json!(s),
        Some(Value::Array(parts)) => {
            let mut out = Vec::new();
            for (j, p) in parts.iter().enumerate() {
                out.push(content_part(&format!("{at}.content[{j}]"), p)?);
            }
            // All text: one string, which every dialect reads the same way.
            if out.iter().all(|p| p["type"] == "text") {
                let texts: Vec<&str> = out.iter().filter_map(|p| p["text"].as_str()).collect();
                json!(texts.join("\n\n"))
            } else {
                Value::Array(out)
            }
        }
        Some(other) => {
            return Err(expected(
                &format!("{at}.content"),
                "a string or an array",
                other,
            ));
        }
        None => {
            return Err(ApiError::invalid(
                "missing_required_parameter",
                format!("Missing required parameter: '{at}.content'."),
            ));
        }
    };
    Ok(json!({"role": role, "content": content}))
}

/// One content part as a chat content part.
fn content_part(at: &str, p: &Value) -> Result<Value, ApiError> {
    let Value::Object(obj) = p else {
        return Err(expected(at, "an object", p));
    };
    let ty = string(obj, "type", &format!("{at}.type"))?;
    match ty {
        "input_text" | "output_text" | "text" => {
            let text = string(obj, "text", &format!("{at}.text"))?;
            Ok(json!({"type": "text", "text": text}))
        }
        // An assistant turn that refused: what the model said.
        "refusal" => {
            let text = string(obj, "refusal", &format!("{at}.refusal"))?;
            Ok(json!({"type": "text", "text": text}))
        }
        "input_image" => {
            if field(obj, "file_id").is_some() {
                return Err(refused(
                    &format!("{at}.file_id"),
                    "route has no file store; send the image as image_url (a URL or a data: URL)",
                ));
            }
            let url = string(obj, "image_url", &format!("{at}.image_url"))?;
            let mut image = json!({"url": url});
            if let Some(d) = field(obj, "detail") {
                image["detail"] = d.clone();
            }
            Ok(json!({"type": "image_url", "image_url": image}))
        }
        "input_file" => Err(refused(
            &format!("{at}.type"),
            "file inputs need a file store and document reading no upstream here is known to \
             have; send the text as input_text",
        )),
        "input_audio" => Err(refused(&format!("{at}.type"), "audio input is not routed")),
        t => Err(bad(
            &format!("{at}.type"),
            format!("unknown content part type {t:?}"),
        )),
    }
}

/// `tools`, `tool_choice` and `parallel_tool_calls` as chat's.
fn tools(
    obj: &Map<String, Value>,
    chat: &mut Map<String, Value>,
    dropped: &mut Vec<String>,
) -> Result<(), ApiError> {
    let mut functions = Vec::new();
    let mut built_in = Vec::new();
    match field(obj, "tools") {
        None => {}
        Some(Value::Array(list)) => {
            for (i, t) in list.iter().enumerate() {
                let at = format!("tools[{i}]");
                let Value::Object(t) = t else {
                    return Err(expected(&at, "an object", t));
                };
                let ty = string(t, "type", &format!("{at}.type"))?;
                // Any other type (`web_search`, `file_search`, `local_shell`,
                // `mcp`, `custom`, …) is a tool OpenAI runs or a grammar
                // no upstream here takes.
                if ty != "function" {
                    built_in.push(ty.to_string());
                    continue;
                }
                let name = string(t, "name", &format!("{at}.name"))?;
                let mut function = json!({"name": name});
                for k in ["description", "parameters", "strict"] {
                    if let Some(v) = field(t, k) {
                        function[k] = v.clone();
                    }
                }
                functions.push(json!({"type": "function", "function": function}));
            }
        }
        Some(other) => return Err(expected("tools", "an array", other)),
    }
    let choice = match field(obj, "tool_choice") {
        None => None,
        Some(Value::String(s)) => match s.as_str() {
            "auto" | "none" => Some(json!(s)),
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
            "required" => Some(json!(s)),
            _ => {
                return Err(bad(
                    "tool_choice",
                    format!("{s:?} is not one of 'auto', 'none' and 'required'"),
                ));
            }
        },
        Some(Value::Object(c)) => match c.get("type").and_then(Value::as_str) {
            Some("function") => {
                let name = string(c, "name", "tool_choice.name")?;
                Some(json!({"type": "function", "function": {"name": name}}))
            }
            Some("allowed_tools") => {
                return Err(refused(
                    "tool_choice",
                    "allowed_tools is not translated; send only the tools the model may call, \
                     with tool_choice 'auto' or 'required'",
                ));
            }
            Some(t) => {
                return Err(refused(
                    "tool_choice",
                    format!(
                        "it forces the tool type {t:?}: only function tools are routed (built-in \
                         tools run at OpenAI, which no upstream here is)"
                    ),
                ));
            }
            None => return Err(bad("tool_choice.type", "missing")),
        },
        Some(other) => return Err(expected("tool_choice", "a string or an object", other)),
    };
    for t in built_in {
        dropped.push(format!("tools[{t}]"));
    }
    if let Some(name) = choice.as_ref().and_then(|c| c["function"]["name"].as_str())
        && !functions.iter().any(|f| f["function"]["name"] == name)
    {
        return Err(bad(
            "tool_choice",
            format!("it names the function {name:?}, which is not among the function tools"),
        ));
    }
    if functions.is_empty() {
        return Ok(());
    }
    chat.insert("tools".into(), Value::Array(functions));
    if let Some(c) = choice {
        chat.insert("tool_choice".into(), c);
    }
    if let Some(p) = field(obj, "parallel_tool_calls") {
        chat.insert("parallel_tool_calls".into(), p.clone());
    }
    Ok(())
}

/// `text.format` as `response_format`, `text.verbosity` as `verbosity`
/// (reported as `text.verbosity` when dropped: [`RENAMED`]).
fn text(obj: &Map<String, Value>, chat: &mut Map<String, Value>) -> Result<(), ApiError> {
    let Some(text) = field(obj, "text") else {
        return Ok(());
    };
    let Value::Object(text) = text else {
        return Err(expected("text", "an object", text));
    };
    if let Some(v) = field(text, "verbosity") {
        chat.insert("verbosity".into(), v.clone());
    }
    let Some(format) = field(text, "format") else {
        return Ok(());
    };
    let Value::Object(format) = format else {
        return Err(expected("text.format", "an object", format));
    };
    match string(format, "type", "text.format.type")? {
        "text" => {}
        "json_object" => {
            chat.insert("response_format".into(), json!({"type": "json_object"}));
        }
        "json_schema" => {
            let name = string(format, "name", "text.format.name")?;
            let Some(schema) = field(format, "schema") else {
                return Err(ApiError::invalid(
                    "missing_required_parameter",
                    "Missing required parameter: 'text.format.schema'.",
                ));
            };
            let mut js = json!({"name": name, "schema": schema});
            for k in ["strict", "description"] {
                if let Some(v) = field(format, k) {
                    js[k] = v.clone();
                }
            }
            chat.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": js}),
            );
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
fn echo(obj: &Map<String, Value>) -> Echo {
    let get = |k: &str| field(obj, k).cloned().unwrap_or(Value::Null);
    let or = |k: &str, default: Value| field(obj, k).cloned().unwrap_or(default);
    Echo {
        instructions: get("instructions"),
        max_output_tokens: get("max_output_tokens"),
        metadata: or("metadata", json!({})),
        parallel_tool_calls: field(obj, "parallel_tool_calls")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        previous_response_id: (),
        reasoning: get("reasoning"),
        store: false,
        temperature: or("temperature", json!(1.0)),
        text: or("text", json!({"format": {"type": "text"}})),
        tool_choice: or("tool_choice", json!("auto")),
        tools: match field(obj, "tools") {
            Some(Value::Array(t)) => t
                .iter()
                .filter(|t| t["type"] == "function")
                .cloned()
                .collect(),
            _ => Vec::new(),
        },
        top_p: or("top_p", json!(1.0)),
        truncation: or("truncation", json!("disabled")),
        user: get("user"),
    }
}

/// `resp_`, `msg_`, `fc_` and 32 hex digits.
fn new_id(prefix: &str) -> String {
    format!(
        "{prefix}_{:016x}{:016x}",
        rand::random::<u64>(),
        rand::random::<u64>()
    )
}

fn unix_now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// How a reply ended, as a response's `status` and `incomplete_details`:
/// cut by the output cap or by a content filter is `incomplete`.
fn ending(finish: Option<&str>) -> (&'static str, Value) {
    match finish.map(openai_finish_reason) {
        Some("length") => ("incomplete", json!({"reason": "max_output_tokens"})),
        Some("content_filter") => ("incomplete", json!({"reason": "content_filter"})),
        _ => ("completed", Value::Null),
    }
}

/// The Responses `usage` object, when both counts are known.
fn usage_json(u: Option<Usage>) -> Value {
    match u {
        Some(Usage {
            input_tokens: Some(i),
            output_tokens: Some(o),
        }) => json!({
            "input_tokens": i,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": o,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": i + o,
        }),
        _ => Value::Null,
    }
}

/// A `response` object: `id`, `created_at`, `model`, `status`, `output`,
/// `output_text`, `usage`, and the echoed request settings, serialized as
/// it stands (a reply is written straight from it, with no JSON map built).
#[derive(Debug, Serialize)]
pub struct ResponseObject<'a> {
    id: String,
    object: &'static str,
    created_at: i64,
    status: &'a str,
    background: bool,
    error: Value,
    incomplete_details: Value,
    model: &'a str,
    output: Vec<Value>,
    output_text: String,
    usage: Value,
    #[serde(flatten)]
    echo: &'a Echo,
}

/// A `response` object as JSON, for the stream's events, which carry it
/// whole (`response.created`, `response.completed`, …).
fn response_object(
    id: &str,
    created_at: i64,
    model: &str,
    status: &str,
    output: Vec<Value>,
    echo: &Echo,
) -> Value {
    let output_text: String = output
        .iter()
        .filter(|o| o["type"] == "message")
        .flat_map(|o| o["content"].as_array().into_iter().flatten())
        .filter_map(|p| p["text"].as_str())
        .collect();
    serde_json::to_value(ResponseObject {
        id: id.to_string(),
        object: "response",
        created_at,
        status,
        background: false,
        error: Value::Null,
        incomplete_details: Value::Null,
        model,
        output,
        output_text,
        usage: Value::Null,
        echo,
    })
    .unwrap_or_default()
}

fn message_item(id: &str, text: &str, status: &str) -> Value {
    json!({
        "id": id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    })
}

fn call_item(id: &str, call_id: &str, name: &str, arguments: &str, status: &str) -> Value {
    json!({
        "id": id,
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    })
}

/// A completion as a `response` object: the answer text as one `message`
/// item, then each tool call as a `function_call` item; `status`
/// `incomplete` (with `incomplete_details.reason`) when the output cap or
/// a content filter cut the reply. Reasoning is left out: only the model
/// that wrote it could read it back.
pub fn response_body<'a>(c: &'a Completion, echo: &'a Echo) -> ResponseObject<'a> {
    reply_object(&c.reply, &c.model, echo)
}

fn reply_object<'a>(reply: &'a ChatReply, model: &'a str, echo: &'a Echo) -> ResponseObject<'a> {
    let (status, incomplete) = ending(reply.finish_reason.as_deref());
    let mut output = Vec::new();
    if !reply.text.is_empty() {
        output.push(message_item(&new_id("msg"), &reply.text, status));
    }
    for call in &reply.tool_calls {
        let call_id = if call.id.is_empty() {
            new_id("call")
        } else {
            call.id.clone()
        };
        output.push(call_item(
            &new_id("fc"),
            &call_id,
            &call.name,
            &call.arguments,
            "completed",
        ));
    }
    ResponseObject {
        id: new_id("resp"),
        object: "response",
        created_at: unix_now(),
        status,
        background: false,
        error: Value::Null,
        incomplete_details: incomplete,
        model,
        output,
        output_text: reply.text.clone(),
        usage: usage_json(reply.usage),
        echo,
    }
}

/// The output item a stream is writing.
#[derive(Debug)]
enum Open {
    Text {
        id: String,
        text: String,
    },
    Call {
        id: String,
        index: usize,
        call_id: String,
        name: String,
        arguments: String,
    },
}

/// Writes one served stream's events as the Responses API's: first
/// `response.created` and `response.in_progress`; then each output item
/// opened with `response.output_item.added` and closed with
/// `response.output_item.done`, text as `response.content_part.added`,
/// `response.output_text.delta`s, `response.output_text.done` and
/// `response.content_part.done`, a tool call as
/// `response.function_call_arguments.delta`s and `.done`; then
/// `response.completed` (or `response.incomplete`) with the whole
/// response, or `response.failed` when the upstream failed after the
/// first byte. Text and calls may interleave in a reply: each item is
/// closed before the next opens. The first call streams live; parallel
/// calls interleaved with it, and text while it is open, are written
/// whole after it at the end ([`Holdback`]). Every event has a
/// `sequence_number` counting from 0.
#[derive(Debug)]
pub struct EventWriter {
    id: String,
    created_at: i64,
    model: String,
    echo: Echo,
    seq: u64,
    started: bool,
    ended: bool,
    output: Vec<Value>,
    open: Option<Open>,
    /// Parallel calls and text held while a call streams: a closed item
    /// takes no more fragments.
    hold: Holdback,
    finish: Option<String>,
    usage: Option<Usage>,
}

impl EventWriter {
    /// For a reply from `model` (the candidate's id) to a request whose
    /// settings are `echo`.
    pub fn new(model: &str, echo: Echo) -> EventWriter {
        EventWriter {
            id: new_id("resp"),
            created_at: unix_now(),
            model: model.to_string(),
            echo,
            seq: 0,
            started: false,
            ended: false,
            output: Vec::new(),
            open: None,
            hold: Holdback::new(),
            finish: None,
            usage: None,
        }
    }

    /// The events `ev` becomes, as `(type, data)` pairs, in order.
    pub fn events(&mut self, ev: StreamEvent) -> Vec<(&'static str, Value)> {
        let mut out = Vec::new();
        if self.ended {
            return out;
        }
        if !self.started {
            self.started = true;
            let r = self.response("in_progress");
            self.push(&mut out, "response.created", json!({"response": r}));
            self.push(&mut out, "response.in_progress", json!({"response": r}));
        }
        match ev {
            StreamEvent::Delta(d) => {
                if let Some(d) = self.hold.pass(d) {
                    self.delta(&mut out, d);
                }
            }
            StreamEvent::Usage { counts, .. } => self.usage = Some(counts),
            StreamEvent::Done => {
                // The live call stays open to the end; calls and text
                // held meanwhile follow it, each a whole item.
                for d in self.hold.end() {
                    self.delta(&mut out, d);
                }
                self.close(&mut out);
                self.ended = true;
                let (status, incomplete) = ending(self.finish.as_deref());
                let mut r = self.response(status);
                r["incomplete_details"] = incomplete;
                r["usage"] = usage_json(self.usage);
                let kind = if status == "completed" {
                    "response.completed"
                } else {
                    "response.incomplete"
                };
                self.push(&mut out, kind, json!({"response": r}));
            }
            StreamEvent::Failed(msg) => {
                self.ended = true;
                let mut r = self.response("failed");
                r["error"] = json!({"code": "server_error", "message": msg});
                self.push(&mut out, "response.failed", json!({"response": r}));
            }
            // The engine turns a stall into a failure; `Native` is never
            // asked for.
            StreamEvent::Stalled | StreamEvent::Native(_) => {}
        }
        out
    }

    /// The events a delta the holdback passed on becomes.
    fn delta(&mut self, out: &mut Vec<(&'static str, Value)>, d: ReplyDelta) {
        match d {
            ReplyDelta::Text(t) if !t.is_empty() => self.text(out, &t),
            ReplyDelta::ToolCall(d) => {
                let same =
                    matches!(&self.open, Some(Open::Call { index, .. }) if *index == d.index);
                if !same {
                    self.close(out);
                    let id = new_id("fc");
                    let call_id = d.id.clone().unwrap_or_else(|| new_id("call"));
                    let name = d.name.clone().unwrap_or_default();
                    let item = call_item(&id, &call_id, &name, "", "in_progress");
                    let at = self.output.len();
                    self.push(
                        out,
                        "response.output_item.added",
                        json!({"output_index": at, "item": item}),
                    );
                    self.open = Some(Open::Call {
                        id,
                        index: d.index,
                        call_id,
                        name,
                        arguments: String::new(),
                    });
                }
                if !d.arguments.is_empty() {
                    let at = self.output.len();
                    let item_id = match &mut self.open {
                        Some(Open::Call { id, arguments, .. }) => {
                            arguments.push_str(&d.arguments);
                            id.clone()
                        }
                        _ => return,
                    };
                    self.push(
                        out,
                        "response.function_call_arguments.delta",
                        json!({"item_id": item_id, "output_index": at, "delta": d.arguments}),
                    );
                }
            }
            ReplyDelta::Finish(r) => self.finish = Some(r),
            // Reasoning is left out (see `response_body`); usage, errors
            // and the end come as their own stream events.
            _ => {}
        }
    }

    fn response(&self, status: &str) -> Value {
        response_object(
            &self.id,
            self.created_at,
            &self.model,
            status,
            self.output.clone(),
            &self.echo,
        )
    }

    fn push(&mut self, out: &mut Vec<(&'static str, Value)>, kind: &'static str, mut data: Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.seq);
        self.seq += 1;
        out.push((kind, data));
    }

    fn text(&mut self, out: &mut Vec<(&'static str, Value)>, t: &str) {
        if !matches!(self.open, Some(Open::Text { .. })) {
            self.close(out);
            let id = new_id("msg");
            let at = self.output.len();
            let mut item = message_item(&id, "", "in_progress");
            item["content"] = json!([]);
            self.push(
                out,
                "response.output_item.added",
                json!({"output_index": at, "item": item}),
            );
            self.push(
                out,
                "response.content_part.added",
                json!({
                    "item_id": id, "output_index": at, "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []},
                }),
            );
            self.open = Some(Open::Text {
                id,
                text: String::new(),
            });
        }
        let at = self.output.len();
        let item_id = match &mut self.open {
            Some(Open::Text { id, text }) => {
                text.push_str(t);
                id.clone()
            }
            _ => return,
        };
        self.push(
            out,
            "response.output_text.delta",
            json!({
                "item_id": item_id, "output_index": at, "content_index": 0,
                "delta": t, "logprobs": [],
            }),
        );
    }

    /// Close the open item, if any, and add it to the output.
    fn close(&mut self, out: &mut Vec<(&'static str, Value)>) {
        let at = self.output.len();
        let item = match self.open.take() {
            None => return,
            Some(Open::Text { id, text }) => {
                self.push(
                    out,
                    "response.output_text.done",
                    json!({
                        "item_id": id, "output_index": at, "content_index": 0,
                        "text": text, "logprobs": [],
                    }),
                );
                self.push(
                    out,
                    "response.content_part.done",
                    json!({
                        "item_id": id, "output_index": at, "content_index": 0,
                        "part": {"type": "output_text", "text": text, "annotations": []},
                    }),
                );
                message_item(&id, &text, "completed")
            }
            Some(Open::Call {
                id,
                call_id,
                name,
                arguments,
                ..
            }) => {
                self.push(
                    out,
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": at, "arguments": arguments}),
                );
                call_item(&id, &call_id, &name, &arguments, "completed")
            }
        };
        self.push(
            out,
            "response.output_item.done",
            json!({"output_index": at, "item": item}),
        );
        self.output.push(item);
    }
}

/// One event as server-sent event text: `event: <type>` and its data.
fn sse(kind: &str, data: &Value) -> String {
    super::sse_event(Some(kind), data)
}

/// A served stream as a Responses `text/event-stream` response
/// ([`EventWriter`]). The stream ends after `response.completed`,
/// `response.incomplete` or `response.failed`; there is no `[DONE]`.
pub fn event_stream(
    events: impl futures_util::Stream<Item = StreamEvent> + Send + 'static,
    mut writer: EventWriter,
) -> Response {
    let body = futures_util::StreamExt::filter_map(events, move |ev| {
        let text: String = writer
            .events(ev)
            .iter()
            .map(|(kind, data)| sse(kind, data))
            .collect();
        std::future::ready((!text.is_empty()).then_some(text))
    });
    super::sse_response(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::dialect::{
        Dialect, ResponseFormat, ToolCall, ToolCallDelta, ToolChoice, wire,
    };

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
            "some_future_field": {"x": 1},
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
        assert!(p.dropped.is_empty(), "{:?}", p.dropped);
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
                json!([{"type": "message", "role": "tool", "content": "x"}]),
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
                "input[0].type",
            ),
            (json!([{"type": "teleport"}]), "input[0].type"),
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
        let e =
            refusal(json!({"model": "m", "input": [{"type": "item_reference", "id": "msg_1"}]}));
        assert!(e.message.contains("store"), "{}", e.message);
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
                "input[function_call_output]",
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
        // Opaque or built-in: dropped and reported.
        for t in [
            "compaction",
            "tool_search_call",
            "tool_search_output",
            "program",
            "program_output",
        ] {
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
    fn what_needs_a_store_gets_a_400_that_says_to_send_the_whole_input() {
        for (field, value) in [
            ("previous_response_id", json!("resp_1")),
            ("conversation", json!("conv_1")),
            ("background", json!(true)),
            ("prompt", json!({"id": "pmpt_1"})),
        ] {
            let mut req = json!({"model": "m", "input": "hi"});
            req[field] = value;
            let e = refusal(req);
            assert_eq!(
                (e.status.as_u16(), e.kind),
                (400, "invalid_request_error"),
                "{field}"
            );
            assert!(e.message.contains(field), "{}", e.message);
        }
        let e = refusal(json!({"model": "m", "input": "hi", "previous_response_id": "resp_1"}));
        assert!(
            e.message.contains("send the whole conversation as input"),
            "{}",
            e.message
        );
        // Null is no value at all; background false is the default.
        parsed(
            json!({"input": "hi", "previous_response_id": null, "background": false, "store": true}),
        );
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
                chunk: None,
            },
            StreamEvent::Done,
        ];
        let out: Vec<(&str, Value)> = events.into_iter().flat_map(|e| w.events(e)).collect();
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
        assert!(w.events(text("late")).is_empty());
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
        let out: Vec<(&str, Value)> = events.into_iter().flat_map(|e| w.events(e)).collect();
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
        let mut out = w.events(text("Lo"));
        out.extend(w.events(StreamEvent::Delta(ReplyDelta::Finish("length".into()))));
        out.extend(w.events(StreamEvent::Done));
        let (kind, last) = out.last().unwrap();
        assert_eq!(*kind, "response.incomplete");
        assert_eq!(
            last["response"]["incomplete_details"]["reason"],
            "max_output_tokens"
        );

        let mut w = EventWriter::new("p::m", Echo::default());
        let mut out = w.events(text("Lo"));
        out.extend(w.events(StreamEvent::Failed("upstream went away".into())));
        let (kind, last) = out.last().unwrap();
        assert_eq!(*kind, "response.failed");
        assert_eq!(last["response"]["status"], "failed");
        assert_eq!(last["response"]["error"]["message"], "upstream went away");
        assert_eq!(last["sequence_number"], out.len() - 1);
        assert!(w.events(StreamEvent::Done).is_empty());
    }
}
