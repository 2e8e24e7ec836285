//! Anthropic Messages (`POST {base}/messages`).

use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::request::{data_url_image, image_url_of, part_type};
use super::{
    ANTHROPIC_DEFAULT_MAX_TOKENS, BuildError, ChatReply, ChatRequest, Content, ReplyError, Usage,
    Wire, secret_header, u64_at,
};

pub struct Anthropic;

const VERSION: &str = "2023-06-01";

impl Wire for Anthropic {
    fn url(&self, base_url: &str, _model: &str, _stream: bool) -> String {
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

    fn body(&self, req: &ChatRequest) -> Result<Value, BuildError> {
        req.check_translatable("anthropic")?;
        // System prompts are a top-level field here, not a message.
        let system = req.lifted_system();
        let messages = req
            .messages
            .iter()
            .enumerate()
            .filter(|(_, m)| !m.is_system())
            .map(|(i, m)| {
                let content = match &m.content {
                    Some(Content::Text(t)) => json!(t),
                    Some(Content::Parts(parts)) => Value::Array(
                        parts
                            .iter()
                            .enumerate()
                            .map(|(j, p)| block(p, i, j))
                            .collect::<Result<_, _>>()?,
                    ),
                    None => return Err(no_content(i)),
                };
                Ok(json!({"role": m.role, "content": content}))
            })
            .collect::<Result<Vec<Value>, BuildError>>()?;
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
        if let Some(p) = req.top_p {
            body["top_p"] = json!(p);
        }
        if !req.stop.is_empty() {
            body["stop_sequences"] = json!(req.stop);
        }
        if req.stream {
            body["stream"] = json!(true);
        }
        Ok(body)
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

/// An OpenAI content part as an Anthropic content block.
fn block(part: &Value, i: usize, j: usize) -> Result<Value, BuildError> {
    match part_type(part) {
        "text" => {
            Ok(json!({"type": "text", "text": part.get("text").cloned().unwrap_or_default()}))
        }
        "image_url" => {
            if let Some((media_type, data)) = data_url_image(part) {
                return Ok(json!({
                    "type": "image",
                    "source": {"type": "base64", "media_type": media_type, "data": data},
                }));
            }
            match image_url_of(part) {
                Some(url) if url.starts_with("https://") || url.starts_with("http://") => {
                    Ok(json!({"type": "image", "source": {"type": "url", "url": url}}))
                }
                _ => Err(BuildError::Unsupported(format!(
                    "messages[{i}].content[{j}]: anthropic takes images as base64 data: URLs or http(s) URLs"
                ))),
            }
        }
        other => Err(BuildError::Unsupported(format!(
            "messages[{i}].content[{j}]: content parts of type {other:?} cannot be sent to anthropic"
        ))),
    }
}

fn no_content(i: usize) -> BuildError {
    BuildError::Unsupported(format!(
        "messages[{i}] has no content, which anthropic does not accept"
    ))
}
