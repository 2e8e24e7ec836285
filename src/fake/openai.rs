//! The fake's OpenAI chat completions: `Authorization: Bearer`, `messages`,
//! `choices`, `{"error": {message, type, param, code}}`, and
//! `chat.completion.chunk` streams ending in `data: [DONE]` with
//! OpenRouter's `: keep-alive` comment and in-stream error chunk; tool
//! calls as `tool_calls` (arguments a JSON string, streamed as fragments),
//! and `response_format` for JSON mode.

use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderMap, HeaderValue, Uri};
use axum::response::Response;
use serde_json::{Value, json};

use super::asks::{self, Asks, Choice, Refusal, Tool, ToolCall, result_text};
use super::respond::{RETRY_SECS, error_response};
use super::responder::{
    DialectResponder, Failure, Malformed, Steps, Usage, header, last_user_message, role,
};
use super::stream::{Answer, Step, data};

pub struct OpenAi;

fn error(status: u16, kind: &str, code: Option<&str>, message: &str) -> Response {
    error_response(
        status,
        &json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
    )
}

/// The `usage` object of a reply or a stream's last chunk.
fn usage_json(usage: Usage) -> Value {
    json!({
        "prompt_tokens": usage.input,
        "completion_tokens": usage.output,
        "total_tokens": usage.input + usage.output,
    })
}

/// The prompt is longer than `limit` tokens: OpenAI's own wording.
fn context_exceeded(limit: u64, used: u64) -> Response {
    error(
        400,
        "invalid_request_error",
        Some("context_length_exceeded"),
        &format!(
            "This model's maximum context length is {limit} tokens. However, your messages \
             resulted in {used} tokens. Please reduce the length of the messages."
        ),
    )
}

/// A stream's last chunks: the usage, when the client asked for it, and
/// `[DONE]`.
fn stream_end(steps: &mut Vec<Step>, a: &Answer<'_>, created: i64, usage: Usage) {
    if a.include_usage {
        let mut last = chunk(created, a.model, json!([]));
        last["usage"] = usage_json(usage);
        steps.push(data(last));
    }
    steps.push(Step::Data(None, "[DONE]".into()));
}

/// A completed answer with one choice: `message`, stopped for `reason`.
fn completion(model: &str, message: Value, reason: &str, usage: Usage) -> Value {
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": chrono::Utc::now().timestamp(),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reason}],
        "usage": usage_json(usage),
    })
}

fn chunk(created: i64, model: &str, choices: Value) -> Value {
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": choices,
    })
}

/// The calls of an assistant message whose answers are being read: its
/// index, its calls' ids, and those not answered yet.
struct Open<'a> {
    at: usize,
    ids: Vec<&'a str>,
    unanswered: Vec<&'a str>,
}

/// What OpenAI refuses in a conversation's shape: a `tool` message that
/// answers no call of the assistant message before it (tool messages and
/// system or developer ones may come between), and an assistant message
/// whose calls are not all answered before the next user or assistant
/// message (unless it is the last message). OpenAI's wordings, its typo
/// ("preceeding") included.
fn malformed(messages: &[Value]) -> Option<Malformed> {
    let unanswered = |open: &Open<'_>| {
        (!open.unanswered.is_empty()).then(|| {
            Malformed::at(
                format!(
                    "An assistant message with 'tool_calls' must be followed by tool messages \
                     responding to each 'tool_call_id'. The following tool_call_ids did not \
                     have response messages: {}",
                    open.unanswered.join(", ")
                ),
                format!("messages.[{}].role", open.at),
            )
        })
    };
    let mut open: Option<Open<'_>> = None;
    for (n, m) in messages.iter().enumerate() {
        match role(m) {
            Some("tool") => {
                let id = m.get("tool_call_id").and_then(Value::as_str);
                match (&mut open, id) {
                    (Some(o), Some(id)) if o.ids.contains(&id) => o.unanswered.retain(|u| *u != id),
                    _ => {
                        return Some(Malformed::at(
                            "Invalid parameter: messages with role 'tool' must be a response \
                             to a preceeding message with 'tool_calls'.",
                            format!("messages.[{n}].role"),
                        ));
                    }
                }
            }
            Some("user" | "assistant") => {
                if let Some(e) = open.take().as_ref().and_then(unanswered) {
                    return Some(e);
                }
                let ids: Vec<&str> = m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.get("id").and_then(Value::as_str))
                    .collect();
                if role(m) == Some("assistant") && !ids.is_empty() {
                    open = Some(Open {
                        at: n,
                        unanswered: ids.clone(),
                        ids,
                    });
                }
            }
            // System, developer and the legacy function messages.
            _ => {}
        }
    }
    // Calls left open by the last message are the model's to make.
    open.filter(|o| o.at + 1 < messages.len())
        .as_ref()
        .and_then(unanswered)
}

impl DialectResponder for OpenAi {
    fn api_key(&self, headers: &HeaderMap, _uri: &Uri) -> Option<String> {
        header(headers, "authorization")
            .and_then(|v| v.strip_prefix("Bearer ").or(v.strip_prefix("bearer ")))
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(String::from)
    }

    fn prompt(&self, body: &Value) -> Option<String> {
        last_user_message(body)
    }

    fn asks(&self, body: &Value) -> Asks {
        let tools = body
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| {
                let f = t.get("function")?;
                Some(Tool {
                    name: f.get("name")?.as_str()?.to_string(),
                    schema: f.get("parameters").cloned().unwrap_or(Value::Null),
                })
            })
            .collect();
        let choice = match body.get("tool_choice") {
            Some(Value::String(s)) if s == "none" => Choice::None,
            Some(c) => c
                .pointer("/function/name")
                .and_then(Value::as_str)
                .map_or(Choice::Auto, |n| Choice::Named(n.to_string())),
            None => Choice::Auto,
        };
        let messages: &[Value] = body
            .get("messages")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        // The results of the last turn's calls: the trailing `tool`
        // messages (system messages may stand among and after them).
        let is_result = |m: &Value| matches!(role(m), Some("tool" | "function"));
        let results: Vec<String> = messages
            .iter()
            .rev()
            .take_while(|m| is_result(m) || matches!(role(m), Some("system" | "developer")))
            .filter(|m| is_result(m))
            .map(|m| result_text(m.get("content").unwrap_or(&Value::Null)))
            .collect();
        let tool_result =
            (!results.is_empty()).then(|| results.into_iter().rev().collect::<Vec<_>>().join(", "));
        let results_so_far = messages.iter().filter(|m| is_result(m)).count();
        let (json, json_kind) = body
            .get("response_format")
            .and_then(asks::json_kind)
            .unzip();
        let image = messages.iter().any(|m| {
            m.get("content")
                .and_then(Value::as_array)
                .is_some_and(|parts| {
                    parts
                        .iter()
                        .any(|p| p.get("type").and_then(Value::as_str) == Some("image_url"))
                })
        });
        let pngs = messages
            .iter()
            .filter_map(|m| m.get("content").and_then(Value::as_array))
            .flatten()
            .filter_map(|p| {
                let url = p.get("image_url")?;
                url.get("url").unwrap_or(url).as_str()
            })
            .filter_map(asks::png_of_data_url)
            .collect();
        // The newer name wins when both are sent, as OpenAI reads them.
        let max_tokens = ["max_completion_tokens", "max_tokens"]
            .into_iter()
            .find_map(|f| Some((f, body.get(f)?.as_u64()?)));
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
        let reason = if truncated { "length" } else { "stop" };
        completion(
            model,
            json!({"role": "assistant", "content": text}),
            reason,
            usage,
        )
    }

    fn tool_success(&self, model: &str, call: &ToolCall, usage: Usage) -> Value {
        let message = json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": format!("call_{}", call.id),
            "type": "function",
            "function": {"name": call.name, "arguments": call.args_text()},
        }]});
        completion(model, message, "tool_calls", usage)
    }

    fn answers_field(&self) -> &'static str {
        "choices"
    }

    fn bad_request(&self, message: &str, param: Option<&str>) -> Response {
        error_response(
            400,
            &json!({"error": {"message": message, "type": "invalid_request_error",
                              "param": param, "code": null}}),
        )
    }

    fn malformed(&self, _headers: &HeaderMap, body: &Value) -> Option<Malformed> {
        malformed(body.get("messages")?.as_array()?)
    }

    fn rate_limit(&self) -> Response {
        let mut resp = error(
            429,
            "requests",
            Some("rate_limit_exceeded"),
            &format!(
                "Rate limit reached for requests per min (RPM): Limit 30, Used 30, \
                 Requested 1. Please try again in {RETRY_SECS}s."
            ),
        );
        resp.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(RETRY_SECS));
        resp
    }

    fn failure(&self, f: Failure<'_>) -> Response {
        match f {
            Failure::E500 => error(
                500,
                "server_error",
                None,
                "The server had an error while processing your request. Sorry about that!",
            ),
            Failure::Overloaded => error(529, "overloaded_error", Some("overloaded"), "Overloaded"),
            Failure::E503 => error(
                503,
                "server_error",
                None,
                "The server is overloaded or not ready yet.",
            ),
            Failure::Unauthorized => error(
                401,
                "invalid_request_error",
                Some("invalid_api_key"),
                "Incorrect API key provided. You can find your API key at \
                 https://platform.openai.com/account/api-keys.",
            ),
            Failure::Forbidden => error(
                403,
                "invalid_request_error",
                None,
                "You are not allowed to sample from this model.",
            ),
            Failure::ContextLength => context_exceeded(8192, 9120),
            Failure::NotFound { model } => error(
                404,
                "invalid_request_error",
                Some("model_not_found"),
                &format!("The model `{model}` does not exist or you do not have access to it."),
            ),
            // Groq's, as its users quote it (status 400, not 404).
            Failure::Decommissioned { model } => error(
                400,
                "invalid_request_error",
                Some("model_decommissioned"),
                &format!(
                    "The model `{model}` has been decommissioned and is no longer supported. \
                     Please refer to https://console.groq.com/docs/deprecations for a \
                     recommendation on which model to use instead."
                ),
            ),
            Failure::Internal { message } => error(500, "server_error", None, message),
            Failure::EchoKey { key } => error(
                401,
                "invalid_request_error",
                Some("invalid_api_key"),
                &format!(
                    "Incorrect API key provided: {key}. You can find your API key at \
                     https://platform.openai.com/account/api-keys."
                ),
            ),
        }
    }

    /// Wordings captured from real OpenAI-compatible hosts, as quoted in
    /// public bug reports: Groq's for tools (langflow-ai/langflow#11120) and
    /// output caps (anomalyco/opencode#1000), Ollama's for tools
    /// (pydantic/pydantic-ai#703, ollama/ollama#6027), OpenAI's for JSON
    /// mode (openai/openai-node#439) and images (vllm-project/vllm#11629).
    fn refuse(&self, why: &Refusal, model: &str) -> Response {
        let body = |message: String, kind: &str, param: Value| {
            error_response(
                400,
                &json!({"error": {"message": message, "type": kind, "param": param, "code": null}}),
            )
        };
        match why {
            Refusal::Tools { ollama: false } => body(
                "tool calling is not supported with this model".into(),
                "invalid_request_error",
                json!("tool calling"),
            ),
            Refusal::Tools { ollama: true } => {
                // Ollama names a library model by its registry path.
                let path = if model.contains('/') {
                    model.to_string()
                } else {
                    format!("library/{model}")
                };
                body(
                    format!("registry.ollama.ai/{path} does not support tools"),
                    "api_error",
                    Value::Null,
                )
            }
            Refusal::Json { kind } => body(
                format!(
                    "Invalid parameter: 'response_format' of type '{kind}' is not supported \
                     with this model."
                ),
                "invalid_request_error",
                json!("response_format"),
            ),
            Refusal::Images => body(
                "Invalid content type. image_url is only supported by certain models.".into(),
                "invalid_request_error",
                json!("messages"),
            ),
            Refusal::MaxTokens { field, cap, .. } => body(
                format!(
                    "`{field}` must be less than or equal to `{cap}`, the maximum value for \
                     `{field}` is less than the `context_window` for this model"
                ),
                "invalid_request_error",
                json!(field),
            ),
            Refusal::Context { limit, used } => context_exceeded(*limit, *used),
        }
    }

    /// The first delta of the call has its id and name, the later ones
    /// fragments of its arguments, as OpenAI streams them.
    fn tool_steps(&self, a: &Answer<'_>, call: &ToolCall, pieces: &[&str], usage: Usage) -> Steps {
        let created = chrono::Utc::now().timestamp();
        let chunk = |choices| chunk(created, a.model, choices);
        let delta = |tool: Value| json!([{"index": 0, "delta": {"tool_calls": [tool]}, "finish_reason": null}]);
        let mut first = delta(json!({
            "index": 0,
            "id": format!("call_{}", call.id),
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }));
        first[0]["delta"]["role"] = json!("assistant");
        first[0]["delta"]["content"] = Value::Null;
        let mut steps = vec![data(chunk(first))];
        let first_content = Some(steps.len());
        for p in pieces {
            steps.push(data(chunk(delta(
                json!({"index": 0, "function": {"arguments": p}}),
            ))));
        }
        steps.push(data(chunk(
            json!([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
        )));
        stream_end(&mut steps, a, created, usage);
        (steps, first_content)
    }

    fn stream_steps(&self, a: &Answer<'_>, pieces: &[&str], usage: Usage) -> Steps {
        let created = chrono::Utc::now().timestamp();
        let chunk = |choices| chunk(created, a.model, choices);
        let choice = |delta: Value, finish: Value| json!([{"index": 0, "delta": delta, "finish_reason": finish}]);
        let mut steps = Vec::new();
        let first_content;
        if a.empty {
            steps.push(data(chunk(json!([]))));
            first_content = None;
        } else {
            steps.push(data(chunk(choice(
                json!({"role": "assistant", "content": ""}),
                Value::Null,
            ))));
            steps.push(Step::Comment("keep-alive"));
            first_content = Some(steps.len());
            for p in pieces {
                steps.push(data(chunk(choice(json!({"content": p}), Value::Null))));
            }
            let reason = if a.truncated { "length" } else { "stop" };
            steps.push(data(chunk(choice(json!({}), json!(reason)))));
        }
        stream_end(&mut steps, a, created, usage);
        (steps, first_content)
    }

    /// OpenRouter's: a chunk with a top-level error and finish_reason
    /// "error".
    fn stream_error(&self, a: &Answer<'_>) -> Step {
        data(json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": chrono::Utc::now().timestamp(),
            "model": a.model,
            "error": {"code": 502, "message": "Provider disconnected unexpectedly",
                      "type": "server_error"},
            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
        }))
    }
}
