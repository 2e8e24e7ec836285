//! The Messages API's bodies as types: what route writes (a `message`,
//! stream event data, an error), each declared in the key order
//! Anthropic's API writes, which is the order route's output has.

use serde::Serialize;
use serde_json::Value;

/// Anthropic's `usage` in a `message`: route caches nothing, so the cache
/// counts are always 0.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct MessageUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
}

/// A `message`: the whole reply, and the head of a stream's
/// `message_start` (no content and no stop yet).
#[derive(Debug, Serialize)]
pub struct Message {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: MessageType,
    pub role: Role,
    pub model: String,
    pub content: Vec<ReplyBlock>,
    pub stop_reason: Option<&'static str>,
    pub stop_sequence: Option<String>,
    pub usage: MessageUsage,
}

/// The constant `"type": "message"`.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageType {
    Message,
}

/// The constant `"role": "assistant"` of a reply.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Assistant,
}

/// A content block of a reply. In a stream's `content_block_start` a
/// text block starts empty and a call's `input` is `{}`: both follow as
/// deltas.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ReplyBlock {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
}

/// What a `content_block_delta` adds to its block.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Delta {
    TextDelta { text: String },
    InputJsonDelta { partial_json: String },
}

/// `message_delta`'s `delta`: how the reply stopped.
#[derive(Debug, Serialize)]
pub struct Stop {
    pub stop_reason: &'static str,
    pub stop_sequence: Option<String>,
}

/// `message_delta`'s `usage`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct DeltaUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// The data of one stream event, its `type` the event's name.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventData {
    MessageStart {
        message: Message,
    },
    ContentBlockStart {
        index: usize,
        content_block: ReplyBlock,
    },
    ContentBlockDelta {
        index: usize,
        delta: Delta,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: Stop,
        usage: DeltaUsage,
    },
    MessageStop,
    Error {
        error: ErrorDetail,
    },
}

impl EventData {
    /// The event's name, which is also its data's `type`.
    pub fn name(&self) -> &'static str {
        match self {
            EventData::MessageStart { .. } => "message_start",
            EventData::ContentBlockStart { .. } => "content_block_start",
            EventData::ContentBlockDelta { .. } => "content_block_delta",
            EventData::ContentBlockStop { .. } => "content_block_stop",
            EventData::MessageDelta { .. } => "message_delta",
            EventData::MessageStop => "message_stop",
            EventData::Error { .. } => "error",
        }
    }
}

/// `{"type":"error","error":{…}}`, Anthropic's error body.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename = "error")]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// An error's `type` and `message`, and for the clients that read it
/// `details.error_code`.
#[derive(Debug, Serialize)]
pub struct ErrorDetail {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<ErrorDetails>,
}

#[derive(Debug, Serialize)]
pub struct ErrorDetails {
    pub error_code: &'static str,
}

/// `count_tokens`' reply.
#[derive(Debug, Serialize)]
pub struct TokenCount {
    pub input_tokens: u64,
}
