//! The fake's Gemini generateContent: the key in `x-goog-api-key` or
//! `?key=`, the model in the path, `contents` and `candidates`, Google's
//! `{"error": {code, message, status}}` with canonical status names, and
//! `:streamGenerateContent` as `alt=sse` events or one JSON array.

use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};

use super::respond::{RETRY_SECS, error_response, json_response};
use super::responder::{DialectResponder, Usage, header, text_of};
use super::stream::{Answer, Mode, Step, data};

pub struct Gemini;

/// `status` is Google's canonical status name.
fn error(code: u16, status: &str, message: &str) -> Response {
    error_response(
        code,
        &json!({"error": {"code": code, "message": message, "status": status}}),
    )
}

fn usage_metadata(usage: Usage) -> Value {
    json!({
        "promptTokenCount": usage.input,
        "candidatesTokenCount": usage.output,
        "totalTokenCount": usage.input + usage.output,
    })
}

fn finish_reason(truncated: bool) -> &'static str {
    if truncated { "MAX_TOKENS" } else { "STOP" }
}

impl DialectResponder for Gemini {
    fn api_key(&self, headers: &HeaderMap, uri: &Uri) -> Option<String> {
        header(headers, "x-goog-api-key")
            .map(String::from)
            .or_else(|| {
                uri.query()?
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("key="))
                    .filter(|k| !k.is_empty())
                    .map(String::from)
            })
    }

    fn prompt(&self, body: &Value) -> Option<String> {
        body.get("contents")?
            .as_array()?
            .iter()
            .rev()
            .find(|c| {
                c.get("role")
                    .and_then(Value::as_str)
                    .is_none_or(|r| r == "user")
            })
            .and_then(|c| text_of(c.get("parts")?))
    }

    fn no_prompt(&self) -> &'static str {
        "contents: a user turn with text parts is required"
    }

    fn stream_mode(&self, from_path: Option<Mode>, _body: &Value) -> Option<Mode> {
        from_path
    }

    fn success(&self, model: &str, text: &str, truncated: bool, usage: Usage) -> Value {
        json!({
            "candidates": [{
                "content": {"role": "model", "parts": [{"text": text}]},
                "finishReason": finish_reason(truncated),
                "index": 0,
            }],
            "usageMetadata": usage_metadata(usage),
            "modelVersion": model,
        })
    }

    fn answers_field(&self) -> &'static str {
        "candidates"
    }

    fn bad_request(&self, message: &str) -> Response {
        error(400, "INVALID_ARGUMENT", message)
    }

    /// Gemini sends no header; the wait is only in the body.
    fn rate_limit(&self) -> Response {
        json_response(
            StatusCode::TOO_MANY_REQUESTS,
            &json!({"error": {
                "code": 429,
                "message": format!(
                    "You exceeded your current quota, please check your plan and billing \
                     details. Please retry in {RETRY_SECS}s."
                ),
                "status": "RESOURCE_EXHAUSTED",
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                        "violations": [{
                            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                            "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                        }],
                    },
                    {
                        "@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": format!("{RETRY_SECS}s"),
                    },
                ],
            }}),
        )
    }

    fn e500(&self) -> Response {
        error(
            500,
            "INTERNAL",
            "An internal error has occurred. Please retry or report the problem.",
        )
    }

    fn overloaded(&self) -> Response {
        error(
            529,
            "UNAVAILABLE",
            "The model is overloaded. Please try again later.",
        )
    }

    fn e503(&self) -> Response {
        error(
            503,
            "UNAVAILABLE",
            "The model is overloaded. Please try again later.",
        )
    }

    /// Google answers a bad key with 400, not 401 (docs/providers.md).
    fn unauthorized(&self) -> Response {
        json_response(
            StatusCode::BAD_REQUEST,
            &json!({"error": {
                "code": 400,
                "message": "API key not valid. Please pass a valid API key.",
                "status": "INVALID_ARGUMENT",
                "details": [{
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                    "metadata": {"service": "generativelanguage.googleapis.com"},
                }],
            }}),
        )
    }

    fn forbidden(&self) -> Response {
        error(
            403,
            "PERMISSION_DENIED",
            "Permission denied: this project cannot use this model.",
        )
    }

    fn context_length(&self) -> Response {
        error(
            400,
            "INVALID_ARGUMENT",
            "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
        )
    }

    fn not_found(&self, model: &str) -> Response {
        error(
            404,
            "NOT_FOUND",
            &format!(
                "models/{model} is not found for API version v1beta, or is not supported \
                 for generateContent."
            ),
        )
    }

    fn echo_key(&self, key: &str) -> Response {
        error(
            401,
            "UNAUTHENTICATED",
            &format!("API key not valid: {key}. Please pass a valid API key."),
        )
    }

    fn stream_steps(
        &self,
        a: &Answer<'_>,
        pieces: &[&str],
        usage: Usage,
    ) -> (Vec<Step>, Option<usize>) {
        let usage = usage_metadata(usage);
        if a.empty {
            let empty = json!({
                "candidates": [],
                "usageMetadata": usage,
                "modelVersion": a.model,
            });
            return (vec![data(empty)], None);
        }
        let last = pieces.len() - 1;
        let steps = pieces
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let mut candidate = json!({
                    "content": {"role": "model", "parts": [{"text": p}]},
                    "index": 0,
                });
                let mut v = json!({"modelVersion": a.model});
                if i == last {
                    candidate["finishReason"] = json!(finish_reason(a.truncated));
                    v["usageMetadata"] = usage.clone();
                }
                v["candidates"] = json!([candidate]);
                data(v)
            })
            .collect();
        (steps, Some(0))
    }

    fn stream_error(&self, _a: &Answer<'_>) -> Step {
        data(json!({"error": {
            "code": 503,
            "message": "The model is overloaded. Please try again later.",
            "status": "UNAVAILABLE",
        }}))
    }
}
