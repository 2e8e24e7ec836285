//! The fake's Gemini generateContent: the key in `x-goog-api-key` or
//! `?key=`, the model in the path, `contents` and `candidates`, Google's
//! `{"error": {code, message, status}}` with canonical status names, and
//! `:streamGenerateContent` as `alt=sse` events or one JSON array; tool
//! calls as whole `functionCall` parts, results as `functionResponse`
//! parts, and `generationConfig.responseMimeType` for JSON mode. Field
//! names are read in camelCase or snake_case, as Google accepts both.

use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};

use super::asks::{self, Asks, Choice, Json, Refusal, Tool, ToolCall, result_text};
use super::respond::{RETRY_SECS, error_response, json_response};
use super::responder::{DialectResponder, Failure, Malformed, Steps, Usage, header, role, text_of};
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

/// `v[camel]`, or `v[snake]` as Google also accepts.
fn field<'a>(v: &'a Value, camel: &str, snake: &str) -> Option<&'a Value> {
    v.get(camel).or_else(|| v.get(snake))
}

/// The parts of every turn in `contents`.
fn parts(turn: &Value) -> impl Iterator<Item = &Value> {
    turn.get("parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn context_exceeded(limit: u64, used: u64) -> Response {
    error(
        400,
        "INVALID_ARGUMENT",
        &format!(
            "The input token count ({used}) exceeds the maximum number of tokens allowed ({limit})."
        ),
    )
}

fn finish_reason(truncated: bool) -> &'static str {
    if truncated { "MAX_TOKENS" } else { "STOP" }
}

/// A part of `kind` (camelCase; its snake_case form is read too) in `turn`.
fn has_part(turn: &Value, camel: &str, snake: &str) -> bool {
    parts(turn).any(|p| field(p, camel, snake).is_some())
}

/// What Gemini refuses in a conversation's shape, in its wordings: a role
/// other than `user` or `model` (none at all is taken, as for a single
/// turn), and function responses in a turn that does not come right after
/// a `model` turn with a function call.
fn malformed(contents: &[Value]) -> Option<&'static str> {
    if contents
        .iter()
        .any(|c| role(c).is_some_and(|r| r != "user" && r != "model"))
    {
        return Some("Please use a valid role: user, model.");
    }
    for (i, turn) in contents.iter().enumerate() {
        if !has_part(turn, "functionResponse", "function_response") {
            continue;
        }
        let after_call = i.checked_sub(1).map(|p| &contents[p]).is_some_and(|prev| {
            role(prev) == Some("model") && has_part(prev, "functionCall", "function_call")
        });
        if !after_call {
            return Some(
                "Please ensure that function response turn comes immediately after a function \
                 call turn.",
            );
        }
    }
    None
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

    fn asks(&self, body: &Value) -> Asks {
        let tools = body
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| field(t, "functionDeclarations", "function_declarations"))
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(|f| {
                let schema = f
                    .get("parameters")
                    .or_else(|| field(f, "parametersJsonSchema", "parameters_json_schema"));
                Some(Tool {
                    name: f.get("name")?.as_str()?.to_string(),
                    schema: schema.cloned().unwrap_or(Value::Null),
                })
            })
            .collect();
        let config = field(body, "toolConfig", "tool_config")
            .and_then(|c| field(c, "functionCallingConfig", "function_calling_config"));
        let mode = config
            .and_then(|c| c.get("mode"))
            .and_then(Value::as_str)
            .map(str::to_ascii_uppercase);
        let allowed = config
            .and_then(|c| field(c, "allowedFunctionNames", "allowed_function_names"))
            .and_then(|a| a.get(0))
            .and_then(Value::as_str);
        let choice = match (mode.as_deref(), allowed) {
            (Some("NONE"), _) => Choice::None,
            (_, Some(name)) => Choice::Named(name.to_string()),
            _ => Choice::Auto,
        };
        let contents: &[Value] = body
            .get("contents")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        let results: Vec<String> = contents
            .last()
            .into_iter()
            .flat_map(parts)
            .filter_map(|p| field(p, "functionResponse", "function_response"))
            .map(|r| result_text(r.get("response").unwrap_or(&Value::Null)))
            .collect();
        let tool_result = (!results.is_empty()).then(|| results.join(", "));
        let results_so_far = contents
            .iter()
            .flat_map(parts)
            .filter(|p| field(p, "functionResponse", "function_response").is_some())
            .count();
        let image = contents.iter().flat_map(parts).any(|p| {
            [("inlineData", "inline_data"), ("fileData", "file_data")]
                .iter()
                .filter_map(|(c, s)| field(p, c, s))
                .filter_map(|d| field(d, "mimeType", "mime_type").and_then(Value::as_str))
                .any(|m| m.starts_with("image/"))
        });
        let pngs = contents
            .iter()
            .flat_map(parts)
            .filter_map(|p| field(p, "inlineData", "inline_data"))
            .filter(|d| {
                field(d, "mimeType", "mime_type").and_then(Value::as_str) == Some("image/png")
            })
            .filter_map(|d| d.get("data").and_then(Value::as_str).map(str::to_string))
            .collect();
        let generation = field(body, "generationConfig", "generation_config");
        let mime = generation
            .and_then(|g| field(g, "responseMimeType", "response_mime_type"))
            .and_then(Value::as_str);
        let (json, json_kind) = match mime {
            Some(m) if m.eq_ignore_ascii_case("application/json") => {
                let schema = generation
                    .and_then(|g| {
                        field(g, "responseSchema", "response_schema")
                            .or_else(|| field(g, "responseJsonSchema", "response_json_schema"))
                    })
                    .filter(|s| s.is_object());
                let json = schema.map_or(Json::Object, |s| Json::Schema(s.clone()));
                (Some(json), Some(m.to_string()))
            }
            _ => (None, None),
        };
        let max_tokens = generation
            .and_then(|g| field(g, "maxOutputTokens", "max_output_tokens"))
            .and_then(Value::as_u64)
            .map(|n| ("maxOutputTokens", n));
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

    fn tool_success(&self, model: &str, call: &ToolCall, usage: Usage) -> Value {
        json!({
            "candidates": [{
                "content": {"role": "model", "parts": [
                    {"functionCall": {"name": call.name, "args": call.args}},
                ]},
                "finishReason": "STOP",
                "index": 0,
            }],
            "usageMetadata": usage_metadata(usage),
            "modelVersion": model,
        })
    }

    fn answers_field(&self) -> &'static str {
        "candidates"
    }

    fn bad_request(&self, message: &str, _param: Option<&str>) -> Response {
        error(400, "INVALID_ARGUMENT", message)
    }

    fn malformed(&self, _headers: &HeaderMap, body: &Value) -> Option<Malformed> {
        malformed(body.get("contents")?.as_array()?).map(Malformed::new)
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

    fn failure(&self, f: Failure<'_>) -> Response {
        match f {
            Failure::E500 => error(
                500,
                "INTERNAL",
                "An internal error has occurred. Please retry or report the problem.",
            ),
            Failure::Overloaded => error(
                529,
                "UNAVAILABLE",
                "The model is overloaded. Please try again later.",
            ),
            Failure::E503 => error(
                503,
                "UNAVAILABLE",
                "The model is overloaded. Please try again later.",
            ),
            // Google answers a bad key with 400, not 401 (docs/providers.md).
            Failure::Unauthorized => json_response(
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
            ),
            Failure::Forbidden => error(
                403,
                "PERMISSION_DENIED",
                "Permission denied: this project cannot use this model.",
            ),
            Failure::ContextLength => context_exceeded(1048576, 1200000),
            // Gemini too: a retired model is one it does not find.
            Failure::NotFound { model } | Failure::Decommissioned { model } => error(
                404,
                "NOT_FOUND",
                &format!(
                    "models/{model} is not found for API version v1beta, or is not supported \
                     for generateContent."
                ),
            ),
            Failure::Internal { message } => error(500, "INTERNAL", message),
            Failure::EchoKey { key } => error(
                401,
                "UNAUTHENTICATED",
                &format!("API key not valid: {key}. Please pass a valid API key."),
            ),
        }
    }

    /// Google's wordings, as quoted in public bug reports: tools
    /// (agno-agi/agno#3505), JSON mode (vercel/ai#8080), images
    /// (google/generative-ai-docs#513), the output cap
    /// (stackblitz-labs/bolt.diy#955) and the context window
    /// (google-gemini/gemini-cli#12214).
    fn refuse(&self, why: &Refusal, model: &str) -> Response {
        let message = match why {
            Refusal::Tools { .. } => format!("Function calling is not enabled for models/{model}"),
            Refusal::Json { .. } => format!("JSON mode is not enabled for models/{model}"),
            Refusal::Images => format!("Image input modality is not enabled for models/{model}"),
            Refusal::MaxTokens { asked, cap, .. } => format!(
                "Unable to submit request because it has a maxOutputTokens value of {asked} but \
                 the supported range is from 1 (inclusive) to {} (exclusive). Update the value \
                 and try again.",
                cap + 1
            ),
            Refusal::Context { limit, used } => return context_exceeded(*limit, *used),
        };
        error(400, "INVALID_ARGUMENT", &message)
    }

    /// Gemini streams a call as one whole part, never in fragments.
    fn tool_steps(&self, a: &Answer<'_>, call: &ToolCall, _pieces: &[&str], usage: Usage) -> Steps {
        (vec![data(self.tool_success(a.model, call, usage))], Some(0))
    }

    fn stream_steps(&self, a: &Answer<'_>, pieces: &[&str], usage: Usage) -> Steps {
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
