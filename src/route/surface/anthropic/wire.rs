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

/// The chat request's pieces a Messages request becomes, as types: the
/// router's request holds them as JSON (`to_json`), in the chat API's
/// shapes and key order.
pub mod chat {
    use serde::Serialize;
    use serde_json::Value;

    /// A content part of a user turn.
    #[derive(Debug, Serialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    pub enum Part {
        Text { text: String },
        ImageUrl { image_url: ImageUrl },
    }

    #[derive(Debug, Serialize)]
    pub struct ImageUrl {
        pub url: String,
    }

    /// The constant `"type": "function"` of a tool, a call and a forced
    /// choice.
    #[derive(Debug, Clone, Copy, Serialize)]
    #[serde(rename_all = "snake_case")]
    pub enum Function {
        Function,
    }

    /// An assistant's tool call.
    #[derive(Debug, Serialize)]
    pub struct ToolCall {
        pub id: String,
        #[serde(rename = "type")]
        pub kind: Function,
        pub function: Call,
    }

    #[derive(Debug, Serialize)]
    pub struct Call {
        pub name: String,
        pub arguments: String,
    }

    /// A function tool.
    #[derive(Debug, Serialize)]
    pub struct Tool {
        #[serde(rename = "type")]
        pub kind: Function,
        pub function: Declaration,
    }

    #[derive(Debug, Serialize)]
    pub struct Declaration {
        pub name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub description: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub parameters: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub strict: Option<bool>,
    }

    /// `tool_choice`: a mode, or one function forced.
    #[derive(Debug, Serialize)]
    #[serde(untagged)]
    pub enum ToolChoice {
        Mode(&'static str),
        Forced {
            #[serde(rename = "type")]
            kind: Function,
            function: Named,
        },
    }

    #[derive(Debug, Serialize)]
    pub struct Named {
        pub name: String,
    }

    /// `response_format` asking for JSON that follows `schema`.
    #[derive(Debug, Serialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    pub enum ResponseFormat {
        JsonSchema { json_schema: JsonSchema },
    }

    #[derive(Debug, Serialize)]
    pub struct JsonSchema {
        pub name: &'static str,
        pub schema: Value,
    }

    /// What the router reads the conversation from.
    #[derive(Debug, Serialize)]
    pub struct Metadata {
        pub user_id: String,
    }

    /// `x` as the JSON the router's request holds.
    pub fn to_json(x: impl Serialize) -> Value {
        // These types have only string keys and finite numbers: nothing
        // in them can fail to serialize.
        serde_json::to_value(x).unwrap_or_default()
    }
}
