//! The fake's OpenAI chat completions: `Authorization: Bearer`, `messages`,
//! `choices`, `{"error": {message, type, param, code}}`, and
//! `chat.completion.chunk` streams ending in `data: [DONE]` with
//! OpenRouter's `: keep-alive` comment and in-stream error chunk.

use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderMap, HeaderValue, Uri};
use axum::response::Response;
use serde_json::{Value, json};

use super::respond::{RETRY_SECS, error_response};
use super::responder::{DialectResponder, Usage, header, last_user_message};
use super::stream::{Answer, Step, data};

pub struct OpenAi;

fn error(status: u16, kind: &str, code: Option<&str>, message: &str) -> Response {
    error_response(
        status,
        &json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
    )
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

    fn success(&self, model: &str, text: &str, truncated: bool, usage: Usage) -> Value {
        json!({
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": chrono::Utc::now().timestamp(),
            "model": model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": if truncated { "length" } else { "stop" },
            }],
            "usage": {
                "prompt_tokens": usage.input,
                "completion_tokens": usage.output,
                "total_tokens": usage.input + usage.output,
            },
        })
    }

    fn answers_field(&self) -> &'static str {
        "choices"
    }

    fn bad_request(&self, message: &str) -> Response {
        error(400, "invalid_request_error", None, message)
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

    fn e500(&self) -> Response {
        error(
            500,
            "server_error",
            None,
            "The server had an error while processing your request. Sorry about that!",
        )
    }

    fn overloaded(&self) -> Response {
        error(529, "overloaded_error", Some("overloaded"), "Overloaded")
    }

    fn e503(&self) -> Response {
        error(
            503,
            "server_error",
            None,
            "The server is overloaded or not ready yet.",
        )
    }

    fn unauthorized(&self) -> Response {
        error(
            401,
            "invalid_request_error",
            Some("invalid_api_key"),
            "Incorrect API key provided. You can find your API key at \
             https://platform.openai.com/account/api-keys.",
        )
    }

    fn forbidden(&self) -> Response {
        error(
            403,
            "invalid_request_error",
            None,
            "You are not allowed to sample from this model.",
        )
    }

    fn context_length(&self) -> Response {
        error(
            400,
            "invalid_request_error",
            Some("context_length_exceeded"),
            "This model's maximum context length is 8192 tokens. However, your messages resulted in 9120 tokens. Please reduce the length of the messages.",
        )
    }

    fn not_found(&self, model: &str) -> Response {
        error(
            404,
            "invalid_request_error",
            Some("model_not_found"),
            &format!("The model `{model}` does not exist or you do not have access to it."),
        )
    }

    fn echo_key(&self, key: &str) -> Response {
        error(
            401,
            "invalid_request_error",
            Some("invalid_api_key"),
            &format!(
                "Incorrect API key provided: {key}. You can find your API key at \
                 https://platform.openai.com/account/api-keys."
            ),
        )
    }

    fn stream_steps(
        &self,
        a: &Answer<'_>,
        pieces: &[&str],
        usage: Usage,
    ) -> (Vec<Step>, Option<usize>) {
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
        if a.include_usage {
            let mut last = chunk(json!([]));
            last["usage"] = json!({
                "prompt_tokens": usage.input,
                "completion_tokens": usage.output,
                "total_tokens": usage.input + usage.output,
            });
            steps.push(data(last));
        }
        steps.push(Step::Data(None, "[DONE]".into()));
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
