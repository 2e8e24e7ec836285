//! The pieces of OpenAI's reply shape that the stream mapper and the
//! OpenAI surface share: ids, finish reasons, usage.

use serde_json::{Value, json};

use super::Usage;

/// `chatcmpl-` and the upstream's id, or a random one when it gave none.
pub fn completion_id(upstream: Option<&str>) -> String {
    match upstream.filter(|s| !s.is_empty()) {
        Some(id) => format!("chatcmpl-{id}"),
        None => format!("chatcmpl-{:016x}", rand::random::<u64>()),
    }
}

/// Seconds since the Unix epoch, for `created`.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// OpenAI's `usage` object, when both counts are known.
pub fn usage_json(u: Usage) -> Option<Value> {
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
