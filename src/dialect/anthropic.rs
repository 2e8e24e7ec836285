//! Anthropic Messages (`POST {base}/messages`).

use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::{
    ANTHROPIC_DEFAULT_MAX_TOKENS, BuildError, ChatReply, ChatRequest, ReplyError, Usage, Wire,
    secret_header, u64_at,
};

pub struct Anthropic;

const VERSION: &str = "2023-06-01";

impl Wire for Anthropic {
    fn url(&self, base_url: &str, _model: &str) -> String {
        format!("{}/messages", base_url.trim_end_matches('/'))
    }

    fn auth_headers(&self, key: &str) -> Result<Vec<(HeaderName, HeaderValue)>, BuildError> {
        Ok(vec![(
            HeaderName::from_static("x-api-key"),
            secret_header(key)?,
        )])
    }

    /// Sent even without a key: a keyless Anthropic-compatible server (or a
    /// proxy in front of one) still checks the version.
    fn fixed_headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        vec![(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(VERSION),
        )]
    }

    fn body(&self, req: &ChatRequest) -> Value {
        // System prompts are a top-level field here, not a message.
        let system: Vec<&str> = req
            .messages
            .iter()
            .filter(|m| m.role == "system")
            .map(|m| m.content.as_str())
            .collect();
        let messages: Vec<Value> = req
            .messages
            .iter()
            .filter(|m| m.role != "system")
            .map(|m| json!({"role": m.role, "content": m.content}))
            .collect();
        let mut body = json!({
            "model": req.model,
            "max_tokens": req.max_tokens.unwrap_or(ANTHROPIC_DEFAULT_MAX_TOKENS),
            "messages": messages,
        });
        if !system.is_empty() {
            body["system"] = json!(system.join("\n\n"));
        }
        if let Some(t) = req.temperature {
            body["temperature"] = json!(t);
        }
        body
    }

    fn parse_reply(&self, json: &Value) -> Result<ChatReply, ReplyError> {
        let content = json
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| ReplyError::Shape("no content in the response".into()))?;
        if content.is_empty() {
            return Err(ReplyError::Shape("empty content array".into()));
        }
        let of_type = |ty: &str, field: &str| -> String {
            content
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some(ty))
                .filter_map(|b| b.get(field).and_then(Value::as_str))
                .collect()
        };
        let reasoning = of_type("thinking", "thinking");
        Ok(ChatReply {
            text: of_type("text", "text"),
            reasoning: (!reasoning.is_empty()).then_some(reasoning),
            finish_reason: json
                .get("stop_reason")
                .and_then(Value::as_str)
                .map(str::to_string),
            usage: json.get("usage").map(|u| Usage {
                input_tokens: u64_at(u, "input_tokens"),
                output_tokens: u64_at(u, "output_tokens"),
            }),
        })
    }
}
