//! Gemini `generateContent` (`POST {base}/models/{model}:generateContent`).
//!
//! The key goes in the `x-goog-api-key` header, never in `?key=`: reqwest
//! error messages and proxies' logs include the URL.

use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::{BuildError, ChatReply, ChatRequest, ReplyError, Usage, Wire, secret_header, u64_at};

pub struct Gemini;

impl Wire for Gemini {
    fn url(&self, base_url: &str, model: &str) -> String {
        // Model ids are sometimes written as the API names them,
        // "models/gemini-2.5-flash".
        let model = model.strip_prefix("models/").unwrap_or(model);
        format!(
            "{}/models/{model}:generateContent",
            base_url.trim_end_matches('/')
        )
    }

    fn auth_headers(&self, key: &str) -> Result<Vec<(HeaderName, HeaderValue)>, BuildError> {
        Ok(vec![(
            HeaderName::from_static("x-goog-api-key"),
            secret_header(key)?,
        )])
    }

    fn body(&self, req: &ChatRequest) -> Value {
        let system: Vec<Value> = req
            .messages
            .iter()
            .filter(|m| m.role == "system")
            .map(|m| json!({"text": m.content}))
            .collect();
        let contents: Vec<Value> = req
            .messages
            .iter()
            .filter(|m| m.role != "system")
            .map(|m| {
                let role = if m.role == "assistant" {
                    "model"
                } else {
                    "user"
                };
                json!({"role": role, "parts": [{"text": m.content}]})
            })
            .collect();
        let mut config = serde_json::Map::new();
        if let Some(t) = req.temperature {
            config.insert("temperature".into(), json!(t));
        }
        if let Some(n) = req.max_tokens {
            config.insert("maxOutputTokens".into(), json!(n));
        }
        let mut body = json!({"contents": contents, "generationConfig": config});
        if !system.is_empty() {
            body["systemInstruction"] = json!({"parts": system});
        }
        body
    }

    fn parse_reply(&self, json: &Value) -> Result<ChatReply, ReplyError> {
        let candidates = json
            .get("candidates")
            .and_then(Value::as_array)
            .filter(|c| !c.is_empty());
        let Some(first) = candidates.and_then(|c| c.first()) else {
            let blocked = json
                .pointer("/promptFeedback/blockReason")
                .and_then(Value::as_str);
            return Err(ReplyError::Shape(match blocked {
                Some(reason) => format!("no candidates (prompt blocked: {reason})"),
                None => "no candidates in the response".into(),
            }));
        };
        // A candidate cut off by maxOutputTokens (typical for thinking
        // models) has a content without parts: an empty answer, not a
        // malformed response.
        let parts: &[Value] = first
            .pointer("/content/parts")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        let is_thought = |p: &&Value| p.get("thought").and_then(Value::as_bool) == Some(true);
        let join = |thought: bool| -> String {
            parts
                .iter()
                .filter(|p| is_thought(p) == thought)
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect()
        };
        let reasoning = join(true);
        Ok(ChatReply {
            text: join(false),
            reasoning: (!reasoning.is_empty()).then_some(reasoning),
            finish_reason: first
                .get("finishReason")
                .and_then(Value::as_str)
                .map(str::to_string),
            usage: json.get("usageMetadata").map(|u| Usage {
                input_tokens: u64_at(u, "promptTokenCount"),
                output_tokens: u64_at(u, "candidatesTokenCount"),
            }),
        })
    }
}
