//! The fake's Anthropic Messages: `x-api-key` and a required
//! `anthropic-version`, `messages`, `content` blocks,
//! `{"type": "error", "error": {type, message}}`, and the named stream
//! events in their documented order.

use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderMap, HeaderValue, Uri};
use axum::response::Response;
use serde_json::{Value, json};

use super::respond::{RETRY_SECS, error_response};
use super::responder::{DialectResponder, Usage, header, last_user_message};
use super::stream::{Answer, Step, named};

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
        error(
            400,
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
        )
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

    fn stream_steps(
        &self,
        a: &Answer<'_>,
        pieces: &[&str],
        usage: Usage,
    ) -> (Vec<Step>, Option<usize>) {
        let mut steps = vec![named(
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
        )];
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
        steps.push(named(
            "message_delta",
            json!({"type": "message_delta",
                   "delta": {"stop_reason": reason, "stop_sequence": null},
                   "usage": {"output_tokens": usage.output}}),
        ));
        steps.push(named("message_stop", json!({"type": "message_stop"})));
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
