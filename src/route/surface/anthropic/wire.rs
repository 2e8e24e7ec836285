//! The Messages API's bodies as types: what route writes (a `message`,
//! stream event data, an error), each declared in the key order
//! Anthropic's API writes, which is the order route's output has; the
//! chat pieces a request becomes ([`chat`]); and what route reads of a
//! request ([`input`]).

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

    pub use crate::route::surface::chat_wire::{
        Call, Declaration, Function, JsonSchema, Named, ResponseFormat, Tool, ToolCall, ToolChoice,
        to_json,
    };

    /// What the router reads the conversation from.
    #[derive(Debug, Serialize)]
    pub struct Metadata {
        pub user_id: String,
    }
}

/// What route reads of a Messages request's parts, as types. Lenient by
/// construction: a field route refuses a wrong value of is kept as JSON
/// (`Option<Value>`) and checked by the reader, in the order and words
/// of Anthropic's refusals; a field route only looks for one value in
/// (`strict: true`, `is_error: true`) reads a value of another type as
/// absent. A block of a type route does not know is data
/// ([`BlockIn::Other`]), not a parse error.
pub mod input {
    use serde::Deserialize;
    use serde_json::Value;

    pub use crate::route::surface::lenient::{lenient, view};

    /// A content block, by its `type`.
    #[derive(Debug, Deserialize, strum::IntoStaticStr)]
    #[serde(tag = "type", rename_all = "snake_case")]
    #[strum(serialize_all = "snake_case")]
    pub enum BlockIn {
        Text {
            text: Option<Value>,
        },
        Image {
            source: Option<Value>,
        },
        Document {
            source: Option<Value>,
            #[serde(default, deserialize_with = "lenient")]
            title: Option<String>,
            #[serde(default, deserialize_with = "lenient")]
            context: Option<String>,
        },
        SearchResult {
            title: Option<Value>,
            source: Option<Value>,
            #[serde(default, deserialize_with = "lenient")]
            content: Option<Vec<Value>>,
        },
        /// A summary of the conversation before it.
        Compaction {
            #[serde(default, deserialize_with = "lenient")]
            content: Option<String>,
        },
        ToolUse {
            id: Option<Value>,
            name: Option<Value>,
            input: Option<Value>,
        },
        ToolResult {
            tool_use_id: Option<Value>,
            content: Option<Value>,
            #[serde(default, deserialize_with = "lenient")]
            is_error: Option<bool>,
        },
        /// Any other type: thinking, a server tool's call or result, a
        /// type newer than route.
        #[serde(untagged)]
        Other {
            #[serde(rename = "type")]
            kind: String,
        },
    }

    impl BlockIn {
        /// Its `type`.
        pub fn kind(&self) -> &str {
            match self {
                BlockIn::Other { kind } => kind,
                known => known.into(),
            }
        }
    }

    /// An image's or a document's `source`.
    #[derive(Debug, Default, Deserialize)]
    pub struct SourceIn {
        #[serde(rename = "type", default, deserialize_with = "lenient")]
        pub kind: Option<String>,
        pub media_type: Option<Value>,
        pub data: Option<Value>,
        pub url: Option<Value>,
        pub content: Option<Value>,
    }

    /// A block route takes only the text of (a text document's content,
    /// a search result's): anything else reads as no text.
    #[derive(Debug, Default, Deserialize)]
    pub struct TextIn {
        #[serde(rename = "type", default, deserialize_with = "lenient")]
        pub kind: Option<String>,
        #[serde(default, deserialize_with = "lenient")]
        pub text: Option<String>,
    }

    /// A declared tool; `name` is checked by the reader.
    #[derive(Debug, Deserialize)]
    pub struct ToolIn {
        pub name: Option<Value>,
        #[serde(rename = "type", default, deserialize_with = "lenient")]
        pub kind: Option<String>,
        pub description: Option<Value>,
        pub input_schema: Option<Value>,
        #[serde(default, deserialize_with = "lenient")]
        pub strict: Option<bool>,
    }

    /// `tool_choice`.
    #[derive(Debug, Deserialize)]
    pub struct ToolChoiceIn {
        #[serde(rename = "type", default, deserialize_with = "lenient")]
        pub kind: Option<String>,
        pub name: Option<Value>,
        #[serde(default, deserialize_with = "lenient")]
        pub disable_parallel_tool_use: Option<bool>,
    }

    /// `output_config.format`, or the beta's `output_format`.
    #[derive(Debug, Default, Deserialize)]
    pub struct FormatIn {
        #[serde(rename = "type", default, deserialize_with = "lenient")]
        pub kind: Option<String>,
        pub schema: Option<Value>,
    }

    /// `thinking`, and an edit of `context_management.edits`: only the
    /// type matters.
    #[derive(Debug, Default, Deserialize)]
    pub struct TypeIn {
        #[serde(rename = "type", default, deserialize_with = "lenient")]
        pub kind: Option<String>,
    }

    /// `context_management`.
    #[derive(Debug, Default, Deserialize)]
    pub struct ContextManagementIn {
        pub edits: Option<Value>,
    }
}
