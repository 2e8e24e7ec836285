//! Replies in the shape OpenAI clients expect: a whole `chat.completion`
//! from any dialect's success body, and the pieces the stream mapper
//! shares with it (ids, finish reasons, usage).

use serde_json::{Value, json};

use super::{ChatReply, Dialect, ReplyError, Usage, parse_success};

/// A 2xx body from a `dialect` upstream as an OpenAI `chat.completion`.
///
/// - OpenAI dialect: the upstream JSON exactly as it came (route reports
///   where it went in headers, not by rewriting bodies).
/// - Anthropic and Gemini: `id`, `object`, `created`, `model` (the given
///   `model` label), one choice with `message{role:"assistant",content}`
///   (plus `reasoning_content` when the provider returned reasoning),
///   `finish_reason` mapped by [`openai_finish_reason`], and `usage` when
///   the provider reported both token counts.
///
/// Every body is checked by the same parser as probes use, so an error
/// object in a 2xx body is [`ReplyError::Embedded`] for every dialect.
pub fn reply_to_openai(dialect: Dialect, body: &[u8], model: &str) -> Result<Value, ReplyError> {
    let (reply, json) = parse_success(dialect, body)?;
    Ok(openai_reply(dialect, &reply, json, model))
}

/// [`reply_to_openai`] for a body already parsed by
/// [`parse_success`](super::parse_success).
pub fn openai_reply(dialect: Dialect, reply: &ChatReply, json: Value, model: &str) -> Value {
    if dialect == Dialect::Openai {
        return json;
    }
    let upstream_id = match dialect {
        Dialect::Anthropic => json.get("id"),
        _ => json.get("responseId"),
    }
    .and_then(Value::as_str);
    completion(reply, &completion_id(upstream_id), model)
}

fn completion(reply: &ChatReply, id: &str, model: &str) -> Value {
    let mut message = json!({"role": "assistant", "content": reply.text});
    if let Some(r) = &reply.reasoning {
        message["reasoning_content"] = json!(r);
    }
    let mut out = json!({
        "id": id,
        "object": "chat.completion",
        "created": unix_now(),
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "finish_reason": reply.finish_reason.as_deref().map(openai_finish_reason),
        }],
    });
    if let Some(u) = reply.usage.and_then(usage_json) {
        out["usage"] = u;
    }
    out
}

/// `chatcmpl-` and the upstream's id, or a random one when it gave none.
pub(super) fn completion_id(upstream: Option<&str>) -> String {
    match upstream.filter(|s| !s.is_empty()) {
        Some(id) => format!("chatcmpl-{id}"),
        None => format!("chatcmpl-{:016x}", rand::random::<u64>()),
    }
}

pub(super) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// OpenAI's `usage` object, when both counts are known.
pub(super) fn usage_json(u: Usage) -> Option<Value> {
    let (Some(p), Some(c)) = (u.input_tokens, u.output_tokens) else {
        return None;
    };
    Some(json!({"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}))
}

/// A provider's finish or stop reason as one of OpenAI's: `stop`,
/// `length`, `content_filter` or `tool_calls`. Anything unrecognised ends
/// normally, as `stop`.
pub fn openai_finish_reason(reason: &str) -> &'static str {
    match reason {
        "length" | "max_tokens" | "MAX_TOKENS" | "model_context_window_exceeded" => "length",
        "content_filter" | "refusal" | "SAFETY" | "RECITATION" | "BLOCKLIST"
        | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => "content_filter",
        "tool_calls" | "function_call" | "tool_use" => "tool_calls",
        _ => "stop",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::dialect::ProviderError;

    #[test]
    fn anthropic_reply_becomes_a_chat_completion() {
        let body = br#"{"id":"msg_01","type":"message","role":"assistant","model":"claude-x","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"14"}],"stop_reason":"max_tokens","usage":{"input_tokens":10,"output_tokens":2}}"#;
        let v = reply_to_openai(Dialect::Anthropic, body, "anthropic::claude-x").unwrap();
        assert_eq!(v["id"], "chatcmpl-msg_01");
        assert_eq!(v["object"], "chat.completion");
        assert!(v["created"].as_u64().unwrap() > 1_700_000_000);
        assert_eq!(v["model"], "anthropic::claude-x");
        assert_eq!(
            v["choices"][0],
            json!({"index":0,"message":{"role":"assistant","content":"14","reasoning_content":"hmm"},"finish_reason":"length"})
        );
        assert_eq!(
            v["usage"],
            json!({"prompt_tokens":10,"completion_tokens":2,"total_tokens":12})
        );
    }

    #[test]
    fn gemini_reply_becomes_a_chat_completion() {
        let body = br#"{"candidates":[{"content":{"role":"model","parts":[{"text":"1"},{"text":"4"}]},"finishReason":"SAFETY"}],"responseId":"abc"}"#;
        let v = reply_to_openai(Dialect::Gemini, body, "gemini-2.5-flash").unwrap();
        assert_eq!(v["id"], "chatcmpl-abc");
        assert_eq!(v["choices"][0]["message"]["content"], "14");
        assert_eq!(v["choices"][0]["finish_reason"], "content_filter");
        assert!(
            v["choices"][0]["message"]
                .get("reasoning_content")
                .is_none()
        );
        // Usage is left out when the provider did not report it.
        assert!(v.get("usage").is_none());
        let other = reply_to_openai(
            Dialect::Gemini,
            br#"{"candidates":[{"content":{"parts":[{"text":"x"}]}}]}"#,
            "m",
        )
        .unwrap();
        assert!(other["id"].as_str().unwrap().starts_with("chatcmpl-"));
        assert_eq!(other["choices"][0]["finish_reason"], Value::Null);
    }

    #[test]
    fn openai_reply_passes_through_unchanged() {
        let body = br#"{"id":"gen-1","object":"chat.completion","model":"upstream/model","choices":[{"index":0,"message":{"role":"assistant","content":"14"},"finish_reason":"stop"}],"provider":"X"}"#;
        let v = reply_to_openai(Dialect::Openai, body, "label").unwrap();
        assert_eq!(v, serde_json::from_slice::<Value>(body).unwrap());
    }

    #[test]
    fn errors_in_a_success_body_stay_errors() {
        let body = br#"{"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"slow down"}}}"#;
        assert_eq!(
            reply_to_openai(Dialect::Openai, body, "m"),
            Err(ReplyError::Embedded(ProviderError {
                message: "Provider returned error: slow down".into(),
                code: None,
                embedded_status: Some(429),
            }))
        );
        let choice_error = br#"{"choices":[{"finish_reason":"error","error":{"message":"upstream died","code":502}}]}"#;
        assert!(matches!(
            reply_to_openai(Dialect::Openai, choice_error, "m"),
            Err(ReplyError::Embedded(_))
        ));
        assert!(matches!(
            reply_to_openai(Dialect::Anthropic, br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#, "m"),
            Err(ReplyError::Embedded(e)) if e.code.as_deref() == Some("overloaded_error")
        ));
        assert_eq!(
            reply_to_openai(Dialect::Gemini, b"", "m"),
            Err(ReplyError::Empty)
        );
    }

    #[test]
    fn finish_reasons_map_to_openai_values() {
        for (from, to) in [
            ("end_turn", "stop"),
            ("stop_sequence", "stop"),
            ("STOP", "stop"),
            ("stop", "stop"),
            ("max_tokens", "length"),
            ("MAX_TOKENS", "length"),
            ("length", "length"),
            ("SAFETY", "content_filter"),
            ("RECITATION", "content_filter"),
            ("refusal", "content_filter"),
            ("tool_use", "tool_calls"),
            ("tool_calls", "tool_calls"),
            ("FINISH_REASON_UNSPECIFIED", "stop"),
        ] {
            assert_eq!(openai_finish_reason(from), to, "{from}");
        }
    }
}
