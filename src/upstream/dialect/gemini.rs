//! Gemini `generateContent` (`POST {base}/models/{model}:generateContent`).
//!
//! The key goes in the `x-goog-api-key` header, never in `?key=`: reqwest
//! error messages and proxies' logs include the URL.

use eventsource_stream::Event;
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::request::{data_url_image, part_type};
use super::stream::{StreamState, unreadable};
use super::{
    BuildError, ChatReply, ChatRequest, Content, ReplyDelta, ReplyError, Usage, Wire,
    error_from_json, secret_header, u64_at,
};

pub struct Gemini;

impl Wire for Gemini {
    /// Each event is a whole response holding only the new text; the last
    /// has `finishReason`. The stream simply ends
    /// ([`stream_ends_at_eof`](Wire::stream_ends_at_eof)).
    fn stream_event(&self, ev: &Event, st: &mut StreamState, out: &mut Vec<ReplyDelta>) {
        let Some(data) = super::parse_json(&ev.data) else {
            out.push(unreadable(&ev.data));
            return;
        };
        if data.get("error").is_some()
            && let Some(err) = error_from_json(&data)
        {
            out.push(ReplyDelta::Error(err));
            return;
        }
        if let Some(u) = data.get("usageMetadata") {
            st.usage = Usage {
                input_tokens: u64_at(u, "promptTokenCount").or(st.usage.input_tokens),
                output_tokens: u64_at(u, "candidatesTokenCount").or(st.usage.output_tokens),
            };
        }
        let first_event = !st.started;
        st.start(data.get("responseId").and_then(Value::as_str), out);
        let first = data.pointer("/candidates/0");
        let parts: &[Value] = first
            .and_then(|c| c.pointer("/content/parts"))
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        let join = |thought: bool| -> String {
            parts
                .iter()
                .filter(|p| (p.get("thought").and_then(Value::as_bool) == Some(true)) == thought)
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect()
        };
        let (text, reasoning) = (join(false), join(true));
        if !reasoning.is_empty() {
            out.push(ReplyDelta::Reasoning(reasoning));
        }
        // The first event always gives text, even empty, as it always has.
        if !text.is_empty() || first_event {
            out.push(ReplyDelta::Text(text));
        }
        let finish = first
            .and_then(|c| c.get("finishReason"))
            .and_then(Value::as_str);
        // A prompt blocked for safety has no candidates at all.
        let blocked = first.is_none() && data.pointer("/promptFeedback/blockReason").is_some();
        if let Some(reason) = finish.or(blocked.then_some("SAFETY")) {
            st.finish(reason.to_string(), out);
        }
    }

    fn stream_ends_at_eof(&self) -> bool {
        true
    }

    fn url_names_model(&self) -> bool {
        true
    }

    fn url(&self, base_url: &str, model: &str, stream: bool) -> String {
        // Model ids are sometimes written as the API names them,
        // "models/gemini-2.5-flash".
        let model = model.strip_prefix("models/").unwrap_or(model);
        let base = base_url.trim_end_matches('/');
        if stream {
            // Without alt=sse the streamed reply is one JSON array.
            format!("{base}/models/{model}:streamGenerateContent?alt=sse")
        } else {
            format!("{base}/models/{model}:generateContent")
        }
    }

    fn auth_headers(&self, key: &str) -> Result<Vec<(HeaderName, HeaderValue)>, BuildError> {
        Ok(vec![(
            HeaderName::from_static("x-goog-api-key"),
            secret_header(key)?,
        )])
    }

    fn body(&self, req: &ChatRequest) -> Result<Value, BuildError> {
        req.check_translatable("gemini")?;
        let system: Vec<Value> = req
            .lifted_system()
            .into_iter()
            .map(|t| json!({"text": t}))
            .collect();
        let contents = req
            .messages
            .iter()
            .enumerate()
            .filter(|(_, m)| !m.is_system())
            .map(|(i, m)| {
                let role = if m.role == "assistant" {
                    "model"
                } else {
                    "user"
                };
                let parts: Vec<Value> = match &m.content {
                    Some(Content::Text(t)) => vec![json!({"text": t})],
                    Some(Content::Parts(parts)) => parts
                        .iter()
                        .enumerate()
                        .map(|(j, p)| part(p, i, j))
                        .collect::<Result<_, _>>()?,
                    None => {
                        return Err(BuildError::Unsupported(format!(
                            "messages[{i}] has no content, which gemini does not accept"
                        )));
                    }
                };
                Ok(json!({"role": role, "parts": parts}))
            })
            .collect::<Result<Vec<Value>, BuildError>>()?;
        let mut config = serde_json::Map::new();
        if let Some(t) = req.temperature {
            config.insert("temperature".into(), json!(t));
        }
        if let Some(n) = req.max_tokens {
            config.insert("maxOutputTokens".into(), json!(n));
        }
        if let Some(p) = req.top_p {
            config.insert("topP".into(), json!(p));
        }
        if !req.stop.is_empty() {
            config.insert("stopSequences".into(), json!(req.stop));
        }
        let mut body = json!({"contents": contents, "generationConfig": config});
        if !system.is_empty() {
            body["systemInstruction"] = json!({"parts": system});
        }
        Ok(body)
    }

    fn reply_id<'a>(&self, json: &'a Value) -> Option<&'a str> {
        json.get("responseId").and_then(Value::as_str)
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

/// An OpenAI content part as a Gemini part.
fn part(p: &Value, i: usize, j: usize) -> Result<Value, BuildError> {
    match part_type(p) {
        "text" => Ok(json!({"text": p.get("text").cloned().unwrap_or_default()})),
        "image_url" => match data_url_image(p) {
            Some((mime_type, data)) => {
                Ok(json!({"inlineData": {"mimeType": mime_type, "data": data}}))
            }
            None => Err(BuildError::Unsupported(format!(
                "messages[{i}].content[{j}]: gemini takes images only as base64 data: URLs"
            ))),
        },
        other => Err(BuildError::Unsupported(format!(
            "messages[{i}].content[{j}]: content parts of type {other:?} cannot be sent to gemini"
        ))),
    }
}
