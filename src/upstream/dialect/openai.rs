//! OpenAI chat completions (`POST {base}/chat/completions`), the dialect of
//! most providers and of Ollama, llama.cpp and vLLM.

use reqwest::header::{AUTHORIZATION, HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::{
    BuildError, ChatReply, ChatRequest, ReplyError, Usage, Wire, secret_header, text_of, u64_at,
};

pub struct OpenAi;

impl Wire for OpenAi {
    fn url(&self, base_url: &str, _model: &str, _stream: bool) -> String {
        format!("{}/chat/completions", base_url.trim_end_matches('/'))
    }

    fn auth_headers(&self, key: &str) -> Result<Vec<(HeaderName, HeaderValue)>, BuildError> {
        Ok(vec![(
            AUTHORIZATION,
            secret_header(&format!("Bearer {key}"))?,
        )])
    }

    /// The client's request as it came, in this key order: model, messages,
    /// the modelled fields, then every unknown field verbatim. A probe's
    /// body is `{"model","messages","temperature","max_tokens"}`.
    fn body(&self, req: &ChatRequest) -> Result<Value, BuildError> {
        let system = req
            .system
            .as_ref()
            .map(|s| json!({"role": "system", "content": s}));
        let messages: Vec<Value> = system
            .into_iter()
            .chain(req.messages.iter().map(|m| m.to_openai()))
            .collect();
        let mut body = json!({"model": req.model, "messages": messages});
        if let Some(t) = req.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(n) = req.max_tokens {
            let field = if req.max_completion_tokens {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            body[field] = json!(n);
        }
        if let Some(p) = req.top_p {
            body["top_p"] = json!(p);
        }
        match req.stop.as_slice() {
            [] => {}
            [one] => body["stop"] = json!(one),
            many => body["stop"] = json!(many),
        }
        if req.stream {
            body["stream"] = json!(true);
            // Usage arrives only when asked for; route needs it for token
            // budgets, and drops the extra chunk if the client did not ask.
            if !req.extra.contains_key("stream_options") {
                body["stream_options"] = json!({"include_usage": true});
            }
        }
        for (k, v) in &req.extra {
            body[k.as_str()] = v.clone();
        }
        Ok(body)
    }

    fn parse_reply(&self, json: &Value) -> Result<ChatReply, ReplyError> {
        let choices = json
            .get("choices")
            .and_then(Value::as_array)
            .ok_or_else(|| ReplyError::Shape("no choices in the response".into()))?;
        let first = choices
            .first()
            .ok_or_else(|| ReplyError::Shape("empty choices list".into()))?;
        let finish_reason = first
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_string);
        // OpenRouter reports a failed upstream generation as a choice with
        // finish_reason "error" and, sometimes, an error object in it.
        if let Some(err) = first.get("error").and_then(super::error_from_json_inner) {
            return Err(ReplyError::Embedded(err));
        }
        let message = first
            .get("message")
            .ok_or_else(|| ReplyError::Shape("no message in the first choice".into()))?;
        let reasoning = ["reasoning_content", "reasoning"]
            .iter()
            .find_map(|k| message.get(*k).and_then(Value::as_str))
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        let usage = json.get("usage").map(|u| Usage {
            input_tokens: u64_at(u, "prompt_tokens"),
            output_tokens: u64_at(u, "completion_tokens"),
        });
        Ok(ChatReply {
            // null content is a legitimate (empty) answer, e.g. a reasoning
            // model that spent max_tokens thinking.
            text: text_of(message.get("content")).unwrap_or_default(),
            reasoning,
            finish_reason,
            usage,
        })
    }
}
