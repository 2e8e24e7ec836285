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
use super::responder::{DialectResponder, Usage, header, last_user_message};
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
        // Results come back as blocks of the last user turn.
        let results: Vec<String> = messages
            .last()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
            .map(|m| {
                blocks(m, "tool_result")
                    .map(|b| result_text(b.get("content").unwrap_or(&Value::Null)))
                    .collect()
            })
            .unwrap_or_default();
        let tool_result = (!results.is_empty()).then(|| results.join(", "));
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
            json,
            json_kind,
            image,
            pngs,
            max_tokens,
            input_tokens: asks::estimated_tokens(body),
        }
    }

    fn success(&self, model: &str, text: &str, truncated: bool, usage: Usage) -> Value {
        json!({
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": if truncated { "max_tokens" } else { "end_turn" },
            "stop_sequence": null,
            "usage": {"input_tokens": usage.input, "output_tokens": usage.output},
        })
    }

    fn tool_success(&self, model: &str, call: &ToolCall, usage: Usage) -> Value {
        json!({
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{
                "type": "tool_use",
                "id": format!("toolu_{}", call.id),
                "name": call.name,
                "input": call.args,
            }],
            "stop_reason": "tool_use",
            "stop_sequence": null,
            "usage": {"input_tokens": usage.input, "output_tokens": usage.output},
        })
    }

    fn answers_field(&self) -> &'static str {
        "content"
    }

    fn bad_request(&self, message: &str) -> Response {
        error(400, "invalid_request_error", message)
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

    fn e500(&self) -> Response {
        error(500, "api_error", "Internal server error")
    }

    fn overloaded(&self) -> Response {
        error(529, "overloaded_error", "Overloaded")
    }

    fn e503(&self) -> Response {
        error(503, "api_error", "Service unavailable")
    }

    fn unauthorized(&self) -> Response {
        error(401, "authentication_error", "invalid x-api-key")
    }

    fn forbidden(&self) -> Response {
        error(
            403,
            "permission_error",
            "Your API key does not have permission to use the specified resource.",
        )
    }

    fn context_length(&self) -> Response {
        context_exceeded(200000, 210000)
    }

    fn not_found(&self, model: &str) -> Response {
        error(404, "not_found_error", &format!("model: {model}"))
    }

    fn echo_key(&self, key: &str) -> Response {
        error(
            401,
            "authentication_error",
            &format!("invalid x-api-key: {key}"),
        )
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

    fn tool_steps(
        &self,
        a: &Answer<'_>,
        call: &ToolCall,
        pieces: &[&str],
        usage: Usage,
    ) -> (Vec<Step>, Option<usize>) {
        let mut steps = vec![
            message_start(a, usage),
            named(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {
                    "type": "tool_use",
                    "id": format!("toolu_{}", call.id),
                    "name": call.name,
                    "input": {},
                }}),
            ),
            named("ping", json!({"type": "ping"})),
        ];
        let first_content = Some(steps.len());
        for p in pieces {
            steps.push(named(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "input_json_delta", "partial_json": p}}),
            ));
        }
        steps.push(named(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ));
        steps.extend(message_end("tool_use", usage));
        (steps, first_content)
    }

    fn stream_steps(
        &self,
        a: &Answer<'_>,
        pieces: &[&str],
        usage: Usage,
    ) -> (Vec<Step>, Option<usize>) {
        let mut steps = vec![message_start(a, usage)];
        let first_content;
        if a.empty {
            first_content = None;
        } else {
            steps.push(named(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "text", "text": ""}}),
            ));
            steps.push(named("ping", json!({"type": "ping"})));
            first_content = Some(steps.len());
            for p in pieces {
                steps.push(named(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "text_delta", "text": p}}),
                ));
            }
            steps.push(named(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ));
        }
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
