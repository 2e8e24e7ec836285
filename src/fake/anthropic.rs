//! The fake's Anthropic Messages: `x-api-key` and a required
//! `anthropic-version`, `messages`, `content` blocks,
//! `{"type": "error", "error": {type, message}}`, and the named stream
//! events in their documented order; tool calls as `tool_use` blocks
//! (streamed as `input_json_delta` fragments) and results as
//! `tool_result` blocks. Anthropic has no JSON mode: `llmprobe` asks for it
//! as a forced call of its JSON tool, which the fake answers with JSON.

use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderMap, HeaderValue, Uri};
use axum::response::Response;
use serde_json::{Value, json};

use super::asks::{self, Asks, Choice, Refusal, Tool, ToolCall, result_text};
use super::respond::{RETRY_SECS, error_response};
use super::responder::{
    DialectResponder, Failure, Malformed, Steps, Usage, header, last_user_message, role,
};
use super::stream::{Answer, Step, named};
use crate::upstream::dialect::JSON_TOOL;

pub struct Anthropic;

fn error(status: u16, kind: &str, message: &str) -> Response {
    error_response(
        status,
        &json!({
            "type": "error",
            "error": {"type": kind, "message": message},
        }),
    )
}

/// The prompt is longer than `limit` tokens, in Anthropic's words.
fn context_exceeded(limit: u64, used: u64) -> Response {
    error(
        400,
        "invalid_request_error",
        &format!("prompt is too long: {used} tokens > {limit} maximum"),
    )
}

/// The blocks of type `kind` in a message's content.
fn blocks<'a>(m: &'a Value, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    m.get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(move |b| b.get("type").and_then(Value::as_str) == Some(kind))
}

/// The beta under which `messages` may hold `system` messages, as Claude
/// Code sends them.
pub const MID_CONVERSATION_SYSTEM: &str = "mid-conversation-system-2026-04-07";

/// Whether the request turns on `name`: `anthropic-beta` is a
/// comma-separated list, and may be sent as several headers.
fn beta(headers: &HeaderMap, name: &str) -> bool {
    headers
        .get_all("anthropic-beta")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|b| b.trim() == name)
}

/// The ids of the blocks of type `kind` in a message, under `field`
/// (`id` of a `tool_use`, `tool_use_id` of a `tool_result`), with each
/// block's index.
fn ids<'a>(m: &'a Value, kind: &'a str, field: &'a str) -> Vec<(usize, &'a str)> {
    m.get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, b)| b.get("type").and_then(Value::as_str) == Some(kind))
        .filter_map(|(i, b)| Some((i, b.get(field)?.as_str()?)))
        .collect()
}

/// A text block with no text, in `content` or in a tool result's content
/// within it.
fn has_empty_text(content: Option<&Value>) -> bool {
    content
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|b| match b.get("type").and_then(Value::as_str) {
            Some("text") => b.get("text").and_then(Value::as_str) == Some(""),
            Some("tool_result") => has_empty_text(b.get("content")),
            _ => false,
        })
}

/// `""` or `[]`.
fn is_empty_content(content: Option<&Value>) -> bool {
    match content {
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        _ => false,
    }
}

/// What Anthropic refuses in a conversation's shape, in its wordings: a
/// role other than `user` or `assistant` (`system` is taken under the
/// [`MID_CONVERSATION_SYSTEM`] beta, `system_ok`, when its content is
/// text), an empty text block, an empty message other than a final
/// assistant one, a `tool_result` that answers no `tool_use` of the
/// message just before it, and `tool_use` blocks whose results are not all
/// in the message just after (unless the calls are the last message).
fn malformed(messages: &[Value], system_ok: bool) -> Option<String> {
    for (n, m) in messages.iter().enumerate() {
        match role(m) {
            Some("user" | "assistant") => {}
            Some("system") if system_ok => {
                // Text only: a string, or text blocks. (This wording is
                // the validator's usual form; no capture of it exists.)
                let other = m
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .position(|b| b.get("type").and_then(Value::as_str) != Some("text"));
                if let Some(i) = other {
                    return Some(format!(
                        "messages.{n}.content.{i}.type: Input should be 'text'"
                    ));
                }
            }
            None => return Some(format!("messages.{n}.role: Field required")),
            _ => {
                return Some(format!(
                    "messages.{n}.role: Input should be 'user' or 'assistant'"
                ));
            }
        }
    }
    if messages.iter().any(|m| has_empty_text(m.get("content"))) {
        return Some("messages: text content blocks must be non-empty".into());
    }
    let last = messages.len().saturating_sub(1);
    for (n, m) in messages.iter().enumerate() {
        let final_assistant = n == last && role(m) == Some("assistant");
        if is_empty_content(m.get("content")) && !final_assistant {
            return Some(format!(
                "messages.{n}: all messages must have non-empty content except for the \
                 optional final assistant message"
            ));
        }
    }
    for (n, m) in messages.iter().enumerate() {
        let called: Vec<&str> = match n.checked_sub(1).map(|p| &messages[p]) {
            Some(prev) if role(prev) == Some("assistant") => ids(prev, "tool_use", "id")
                .into_iter()
                .map(|(_, id)| id)
                .collect(),
            _ => Vec::new(),
        };
        let results = ids(m, "tool_result", "tool_use_id");
        if let Some((i, id)) = results.iter().find(|(_, id)| !called.contains(id)) {
            return Some(format!(
                "messages.{n}.content.{i}: unexpected `tool_use_id` found in `tool_result` \
                 blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` \
                 block in the previous message."
            ));
        }
        if role(m) != Some("assistant") || n == last {
            continue;
        }
        let answered = ids(&messages[n + 1], "tool_result", "tool_use_id");
        let missing: Vec<&str> = ids(m, "tool_use", "id")
            .into_iter()
            .map(|(_, id)| id)
            .filter(|id| !answered.iter().any(|(_, a)| a == id))
            .collect();
        if !missing.is_empty() {
            return Some(format!(
                "messages.{n}: `tool_use` ids were found without `tool_result` blocks \
                 immediately after: {}. Each `tool_use` block must have a corresponding \
                 `tool_result` block in the next message.",
                missing.join(", ")
            ));
        }
    }
    None
}

impl DialectResponder for Anthropic {
    fn api_key(&self, headers: &HeaderMap, _uri: &Uri) -> Option<String> {
        header(headers, "x-api-key").map(String::from)
    }

    fn missing_header(&self, headers: &HeaderMap) -> Option<&'static str> {
        header(headers, "anthropic-version")
            .is_none()
            .then_some("anthropic-version: header is required")
    }

    fn prompt(&self, body: &Value) -> Option<String> {
        last_user_message(body)
    }

    fn asks(&self, body: &Value) -> Asks {
        let tools: Vec<Tool> = body
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| {
                Some(Tool {
                    name: t.get("name")?.as_str()?.to_string(),
                    schema: t.get("input_schema").cloned().unwrap_or(Value::Null),
                })
            })
            .collect();
        let choice = match body.pointer("/tool_choice/type").and_then(Value::as_str) {
            Some("none") => Choice::None,
            Some("tool") => body
                .pointer("/tool_choice/name")
                .and_then(Value::as_str)
                .map_or(Choice::Auto, |n| Choice::Named(n.to_string())),
            _ => Choice::Auto,
        };
        let messages: &[Value] = body
            .get("messages")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        // Results come back as blocks of the last user turn; a
        // mid-conversation system message may follow it.
        let results: Vec<String> = messages
            .iter()
            .rfind(|m| role(m) != Some("system"))
            .filter(|m| role(m) == Some("user"))
            .map(|m| {
                blocks(m, "tool_result")
                    .map(|b| result_text(b.get("content").unwrap_or(&Value::Null)))
                    .collect()
            })
            .unwrap_or_default();
        let tool_result = (!results.is_empty()).then(|| results.join(", "));
        let results_so_far = messages
            .iter()
            .map(|m| blocks(m, "tool_result").count())
            .sum();
        let image = messages.iter().any(|m| blocks(m, "image").next().is_some());
        let pngs = messages
            .iter()
            .flat_map(|m| blocks(m, "image"))
            .filter_map(|b| b.get("source"))
            .filter(|s| {
                s.get("type").and_then(Value::as_str) == Some("base64")
                    && s.get("media_type").and_then(Value::as_str) == Some("image/png")
            })
            .filter_map(|s| s.get("data").and_then(Value::as_str).map(str::to_string))
            .collect();
        // JSON mode comes as a forced call of the JSON tool, whose schema
        // is the one asked for (`upstream::dialect::JSON_TOOL`).
        let json = match &choice {
            Choice::Named(n) if n == JSON_TOOL => tools
                .iter()
                .find(|t| t.name == JSON_TOOL)
                .map(|t| asks::Json::Schema(t.schema.clone())),
            _ => None,
        };
        let json_kind = json.as_ref().map(|_| JSON_TOOL.to_string());
        let max_tokens = body
            .get("max_tokens")
            .and_then(Value::as_u64)
            .map(|n| ("max_tokens", n));
        Asks {
            tools,
            choice,
            tool_result,
            results_so_far,
            json,
            json_kind,
            image,
            pngs,
            max_tokens,
            input_tokens: asks::estimated_tokens(body),
        }
    }

    fn success(&self, model: &str, text: &str, truncated: bool, usage: Usage) -> Value {
        let reason = if truncated { "max_tokens" } else { "end_turn" };
        message(model, json!({"type": "text", "text": text}), reason, usage)
    }

    fn tool_success(&self, model: &str, call: &ToolCall, usage: Usage) -> Value {
        let block = json!({
            "type": "tool_use",
            "id": format!("toolu_{}", call.id),
            "name": call.name,
            "input": call.args,
        });
        message(model, block, "tool_use", usage)
    }

    fn answers_field(&self) -> &'static str {
        "content"
    }

    fn bad_request(&self, message: &str, _param: Option<&str>) -> Response {
        error(400, "invalid_request_error", message)
    }

    fn malformed(&self, headers: &HeaderMap, body: &Value) -> Option<Malformed> {
        let system_ok = beta(headers, MID_CONVERSATION_SYSTEM);
        malformed(body.get("messages")?.as_array()?, system_ok).map(Malformed::new)
    }

    fn rate_limit(&self) -> Response {
        let mut resp = error(
            429,
            "rate_limit_error",
            "This request would exceed the rate limit for your organization of 50 \
             requests per minute.",
        );
        resp.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(RETRY_SECS));
        resp
    }

    fn failure(&self, f: Failure<'_>) -> Response {
        match f {
            Failure::E500 => error(500, "api_error", "Internal server error"),
            Failure::Overloaded => error(529, "overloaded_error", "Overloaded"),
            Failure::E503 => error(503, "api_error", "Service unavailable"),
            Failure::Unauthorized => error(401, "authentication_error", "invalid x-api-key"),
            Failure::Forbidden => error(
                403,
                "permission_error",
                "Your API key does not have permission to use the specified resource.",
            ),
            Failure::ContextLength => context_exceeded(200000, 210000),
            // Anthropic has one word for a model it does not serve, retired
            // or never there.
            Failure::NotFound { model } | Failure::Decommissioned { model } => {
                error(404, "not_found_error", &format!("model: {model}"))
            }
            Failure::Internal { message } => error(500, "api_error", message),
            Failure::EchoKey { key } => error(
                401,
                "authentication_error",
                &format!("invalid x-api-key: {key}"),
            ),
        }
    }

    /// The output cap is Anthropic's own wording
    /// (chathub-dev/chathub#1222, anthropics/claude-code#24451). Every
    /// Claude model takes tools, and images since Claude 3, so those have
    /// no Anthropic wording to copy: images use Bedrock's for Claude 3.5
    /// Haiku (boto/boto3#4581), tools the `field: message` form of
    /// Anthropic's own validation errors, which JSON mode (a forced call of
    /// the JSON tool in this dialect) meets too.
    fn refuse(&self, why: &Refusal, model: &str) -> Response {
        let message = match why {
            Refusal::Tools { .. } => "tools: this model does not support tool use".to_string(),
            // JSON mode comes as a forced tool call: a model without tool
            // use refuses it so.
            Refusal::Json { .. } => "tools: this model does not support tool use".to_string(),
            Refusal::Images => "This model doesn't support the image content block that you \
                                provided. Update the content block and try again."
                .to_string(),
            Refusal::MaxTokens { asked, cap, .. } => format!(
                "max_tokens: {asked} > {cap}, which is the maximum allowed number of output \
                 tokens for {model}"
            ),
            Refusal::Context { limit, used } => return context_exceeded(*limit, *used),
        };
        error(400, "invalid_request_error", &message)
    }

    fn tool_steps(&self, a: &Answer<'_>, call: &ToolCall, pieces: &[&str], usage: Usage) -> Steps {
        let mut steps = vec![message_start(a, usage)];
        let block = json!({
            "type": "tool_use",
            "id": format!("toolu_{}", call.id),
            "name": call.name,
            "input": {},
        });
        let first_content = Some(block_steps(
            &mut steps,
            block,
            pieces,
            |p| json!({"type": "input_json_delta", "partial_json": p}),
        ));
        steps.extend(message_end("tool_use", usage));
        (steps, first_content)
    }

    fn stream_steps(&self, a: &Answer<'_>, pieces: &[&str], usage: Usage) -> Steps {
        let mut steps = vec![message_start(a, usage)];
        let first_content = (!a.empty).then(|| {
            let block = json!({"type": "text", "text": ""});
            block_steps(
                &mut steps,
                block,
                pieces,
                |p| json!({"type": "text_delta", "text": p}),
            )
        });
        let reason = if a.truncated {
            "max_tokens"
        } else {
            "end_turn"
        };
        steps.extend(message_end(reason, usage));
        (steps, first_content)
    }

    fn stream_error(&self, _a: &Answer<'_>) -> Step {
        named(
            "error",
            json!({
                "type": "error",
                "error": {"type": "overloaded_error", "message": "Overloaded"},
            }),
        )
    }
}

/// A completed message whose content is the one `block`, stopped for
/// `reason`.
fn message(model: &str, block: Value, reason: &str, usage: Usage) -> Value {
    json!({
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [block],
        "stop_reason": reason,
        "stop_sequence": null,
        "usage": {"input_tokens": usage.input, "output_tokens": usage.output},
    })
}

/// Streams content block 0: its start (`block`, empty), a ping, a delta per
/// piece, and its stop. Returns the index of the first delta.
fn block_steps(
    steps: &mut Vec<Step>,
    block: Value,
    pieces: &[&str],
    delta: impl Fn(&str) -> Value,
) -> usize {
    steps.push(named(
        "content_block_start",
        json!({"type": "content_block_start", "index": 0, "content_block": block}),
    ));
    steps.push(named("ping", json!({"type": "ping"})));
    let first = steps.len();
    for p in pieces {
        steps.push(named(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta(p)}),
        ));
    }
    steps.push(named(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    first
}

/// A stream's first event.
fn message_start(a: &Answer<'_>, usage: Usage) -> Step {
    named(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": a.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": usage.input, "output_tokens": 1},
        }}),
    )
}

/// A stream's last two events, stopped for `reason`.
fn message_end(reason: &str, usage: Usage) -> [Step; 2] {
    [
        named(
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": reason, "stop_sequence": null},
                   "usage": {"output_tokens": usage.output}}),
        ),
        named("message_stop", json!({"type": "message_stop"})),
    ]
}
