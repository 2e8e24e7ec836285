//! Anthropic Messages (`POST {base}/messages`).

use eventsource_stream::Event;
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::request::{data_url_image, image_url_of, part_type};
use super::stream::{StreamState, unreadable};
use super::{
    ANTHROPIC_DEFAULT_MAX_TOKENS, BuildError, ChatReply, ChatRequest, Content, ProviderError,
    ReplyDelta, ReplyError, Usage, Wire, error_from_json, secret_header, u64_at,
};

pub struct Anthropic;

/// `message_delta`'s counts are cumulative; keep the latest of each.
fn stream_usage(st: &mut StreamState, u: &Value) {
    if let Some(n) = u64_at(u, "input_tokens") {
        st.usage.input_tokens = Some(n);
    }
    if let Some(n) = u64_at(u, "output_tokens") {
        st.usage.output_tokens = Some(n);
    }
}

const VERSION: &str = "2023-06-01";

impl Wire for Anthropic {
    /// `message_start` starts the reply (its id, and the input tokens),
    /// text deltas give text, thinking deltas give reasoning,
    /// `message_delta` gives the finish reason and output tokens,
    /// `message_stop` ends it, and `event: error` is an error. `ping` and
    /// block starts and stops carry nothing.
    fn stream_event(&self, ev: &Event, st: &mut StreamState, out: &mut Vec<ReplyDelta>) {
        let Some(data) = super::parse_json(&ev.data) else {
            out.push(unreadable(&ev.data));
            return;
        };
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(ev.event.as_str());
        match kind {
            "message_start" => {
                let message = data.get("message");
                if let Some(u) = message.and_then(|m| m.get("usage")) {
                    stream_usage(st, u);
                }
                let id = message.and_then(|m| m.get("id")).and_then(Value::as_str);
                st.start(id, out);
                // The role's chunk has always had empty content.
                out.push(ReplyDelta::Text(String::new()));
            }
            "content_block_start" => {
                // A text block may open with text already in it.
                if let Some(t) = data.pointer("/content_block/text").and_then(Value::as_str)
                    && !t.is_empty()
                {
                    out.push(ReplyDelta::Text(t.to_string()));
                }
            }
            "content_block_delta" => {
                let delta = data.get("delta");
                let text = |field: &str| {
                    delta
                        .and_then(|d| d.get(field))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                };
                match delta.and_then(|d| d.get("type")).and_then(Value::as_str) {
                    Some("text_delta") => out.extend(text("text").map(ReplyDelta::Text)),
                    Some("thinking_delta") => {
                        out.extend(text("thinking").map(ReplyDelta::Reasoning))
                    }
                    // signature_delta, input_json_delta, citations: nothing
                    // a reply carries yet.
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(u) = data.get("usage") {
                    stream_usage(st, u);
                }
                if let Some(reason) = data.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    st.finish(reason.to_string(), out);
                }
            }
            "message_stop" => st.end(out),
            "error" => out.push(ReplyDelta::Error(error_from_json(&data).unwrap_or_else(
                || ProviderError {
                    message: "error event without details".into(),
                    ..ProviderError::default()
                },
            ))),
            // ping, content_block_stop, and event types added later.
            _ => {}
        }
    }

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
