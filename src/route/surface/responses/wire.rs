//! The Responses API's request as types: what route reads of a request
//! ([`input`]), and the chat request's pieces it becomes ([`chat`]). The
//! replies and stream events are typed in `reply` and `stream`.

/// What route reads of a Responses request, as types. Lenient by
/// construction, as the Messages surface's views are: a field route
/// refuses a wrong value of is kept as JSON (`Option<Value>`) and checked
/// by the reader, in the order and words of today's refusals; a field
/// route only looks for one kind of value in reads a value of another
/// kind as absent. An item or content part of a type route does not know
/// is data ([`ItemIn::Other`], [`PartIn::Other`]), not a parse error.
pub mod input {
    use serde::Deserialize;
    use serde_json::{Map, Value};

    pub use crate::route::surface::lenient::{lenient, view};

    /// The request body. Each field route handles (`HANDLED`) is one of
    /// these; whatever else was sent is `rest`, reported by name unless
    /// it is harmless.
    #[derive(Debug, Default, Deserialize)]
    pub struct RequestIn {
        pub model: Option<Value>,
        pub instructions: Option<Value>,
        pub input: Option<Value>,
        pub previous_response_id: Option<Value>,
        pub store: Option<Value>,
        pub tools: Option<Value>,
        pub tool_choice: Option<Value>,
        pub parallel_tool_calls: Option<Value>,
        pub max_output_tokens: Option<Value>,
        pub temperature: Option<Value>,
        pub top_p: Option<Value>,
        pub text: Option<Value>,
        pub stream: Option<Value>,
        pub reasoning: Option<Value>,
        pub top_logprobs: Option<Value>,
        pub max_tool_calls: Option<Value>,
        pub conversation: Option<Value>,
        pub background: Option<Value>,
        pub prompt: Option<Value>,
        #[serde(flatten)]
        pub rest: Map<String, Value>,
    }

    /// An `input` item (or one held for it), by its `type`.
    #[derive(Debug, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    pub enum ItemIn {
        Message(MessageIn),
        FunctionCall {
            call_id: Option<Value>,
            name: Option<Value>,
            arguments: Option<Value>,
        },
        FunctionCallOutput {
            call_id: Option<Value>,
            output: Option<Value>,
        },
        /// Reasoning from an earlier turn.
        Reasoning {},
        /// Any other type: a built-in tool's call or output, an item
        /// that is refused, a type newer than route. The ids of a call,
        /// so that an output answering it goes with it.
        #[serde(untagged)]
        Other {
            #[serde(rename = "type")]
            kind: String,
            #[serde(default, deserialize_with = "lenient")]
            call_id: Option<String>,
            #[serde(default, deserialize_with = "lenient")]
            id: Option<String>,
        },
    }

    /// A `message` item: its role and content, and everything else it
    /// carries (`id`, `status`, `phase`, or a field to report).
    #[derive(Debug, Deserialize)]
    pub struct MessageIn {
        pub role: Option<Value>,
        pub content: Option<Value>,
        #[serde(flatten)]
        pub rest: Map<String, Value>,
    }

    /// A content part of a message, by its `type`.
    #[derive(Debug, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    pub enum PartIn {
        #[serde(alias = "output_text", alias = "text")]
        InputText {
            text: Option<Value>,
        },
        /// An assistant turn that refused: what the model said.
        Refusal {
            refusal: Option<Value>,
        },
        InputImage {
            file_id: Option<Value>,
            image_url: Option<Value>,
            detail: Option<Value>,
        },
        InputFile {},
        InputAudio {},
        /// Any other type.
        #[serde(untagged)]
        Other {
            #[serde(rename = "type")]
            kind: String,
        },
    }

    /// A part of a `function_call_output`'s `output`: only text is
    /// passed on.
    #[derive(Debug, Default, Deserialize)]
    pub struct OutputPartIn {
        #[serde(rename = "type", default, deserialize_with = "lenient")]
        pub kind: Option<String>,
        pub text: Option<Value>,
    }

    /// A declared tool; its `type` is checked before it is read.
    #[derive(Debug, Deserialize)]
    pub struct ToolIn {
        pub name: Option<Value>,
        pub description: Option<Value>,
        pub parameters: Option<Value>,
        pub strict: Option<Value>,
    }

    /// `tool_choice` as an object.
    #[derive(Debug, Default, Deserialize)]
    pub struct ToolChoiceIn {
        #[serde(rename = "type", default, deserialize_with = "lenient")]
        pub kind: Option<String>,
        pub name: Option<Value>,
    }

    /// `text`: its format, its verbosity, and any other field, reported.
    #[derive(Debug, Default, Deserialize)]
    pub struct TextIn {
        pub format: Option<Value>,
        pub verbosity: Option<Value>,
        #[serde(flatten)]
        pub rest: Map<String, Value>,
    }

    /// `text.format`; its `type` is checked before it is read.
    #[derive(Debug, Default, Deserialize)]
    pub struct FormatIn {
        pub name: Option<Value>,
        pub schema: Option<Value>,
        pub strict: Option<Value>,
        pub description: Option<Value>,
    }
}

/// The chat request's pieces a Responses request becomes, as types, in
/// the chat API's shapes and key order. The router's request is read from
/// them as JSON ([`Chat::into_json`]), through the chat surface's parser.
pub mod chat {
    use serde::Serialize;
    use serde_json::{Map, Number, Value};

    /// The chat request: its model, its messages, and the settings that
    /// follow them.
    #[derive(Debug, Default)]
    pub struct Chat {
        pub model: Option<String>,
        pub messages: Vec<Msg>,
        pub settings: Settings,
    }

    /// The chat request's fields after `messages`, in the order the chat
    /// request has always held them.
    #[derive(Debug, Default, Serialize)]
    pub struct Settings {
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub tools: Vec<Tool>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub tool_choice: Option<ToolChoice>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub parallel_tool_calls: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub max_tokens: Option<Number>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub temperature: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub top_p: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub verbosity: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        pub response_format: Option<ResponseFormat>,
        pub stream: bool,
    }

    impl Chat {
        /// The chat request as JSON: the messages' text moved into it
        /// ([`Msg::into_json`]), not copied.
        pub fn into_json(self) -> Value {
            let mut obj = Map::new();
            if let Some(m) = self.model {
                obj.insert("model".into(), Value::String(m));
            }
            let messages = self.messages.into_iter().map(Msg::into_json).collect();
            obj.insert("messages".into(), Value::Array(messages));
            if let Value::Object(settings) = to_json(self.settings) {
                obj.extend(settings);
            }
            Value::Object(obj)
        }
    }

    /// A chat role a message here has.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
    #[strum(serialize_all = "snake_case")]
    pub enum Role {
        System,
        Developer,
        User,
        Assistant,
        Tool,
    }

    impl Role {
        /// The role of a `message` item, when it is one route knows.
        pub fn of_message(name: &str) -> Option<Role> {
            match name {
                "system" => Some(Role::System),
                "developer" => Some(Role::Developer),
                "user" => Some(Role::User),
                "assistant" => Some(Role::Assistant),
                _ => None,
            }
        }
    }

    /// A chat message.
    #[derive(Debug)]
    pub struct Msg {
        pub role: Role,
        /// A tool message's call.
        pub tool_call_id: Option<String>,
        /// `None`: an assistant turn of calls only (`content: null`).
        pub content: Option<Content>,
        pub tool_calls: Vec<ToolCall>,
    }

    impl Msg {
        pub fn new(role: Role, content: impl Into<String>) -> Msg {
            Msg {
                role,
                tool_call_id: None,
                content: Some(Content::Text(content.into())),
                tool_calls: Vec::new(),
            }
        }

        /// Whether it says anything: text that is not empty, any other
        /// part, or tool calls.
        pub fn has_content(&self) -> bool {
            match &self.content {
                Some(Content::Text(s)) => !s.is_empty(),
                Some(Content::Parts(parts)) => !parts.is_empty(),
                None => !self.tool_calls.is_empty(),
            }
        }

        /// As JSON: `role`, `tool_call_id`, `content`, `tool_calls`, the
        /// text moved, not copied.
        fn into_json(self) -> Value {
            let mut m = Map::new();
            m.insert("role".into(), Value::from(<&str>::from(self.role)));
            if let Some(id) = self.tool_call_id {
                m.insert("tool_call_id".into(), Value::String(id));
            }
            let content = match self.content {
                None => Value::Null,
                Some(Content::Text(s)) => Value::String(s),
                Some(Content::Parts(parts)) => {
                    Value::Array(parts.into_iter().map(Part::into_json).collect())
                }
            };
            m.insert("content".into(), content);
            if !self.tool_calls.is_empty() {
                m.insert("tool_calls".into(), to_json(self.tool_calls));
            }
            Value::Object(m)
        }
    }

    /// A message's content: one text, or parts.
    #[derive(Debug)]
    pub enum Content {
        Text(String),
        Parts(Vec<Part>),
    }

    /// A content part.
    #[derive(Debug)]
    pub enum Part {
        Text(String),
        ImageUrl { url: String, detail: Option<Value> },
    }

    impl Part {
        /// `{"type": "text", "text"}` or `{"type": "image_url",
        /// "image_url": {"url", "detail"}}`, the text moved.
        fn into_json(self) -> Value {
            let mut m = Map::new();
            match self {
                Part::Text(text) => {
                    m.insert("type".into(), Value::from("text"));
                    m.insert("text".into(), Value::String(text));
                }
                Part::ImageUrl { url, detail } => {
                    let mut image = Map::new();
                    image.insert("url".into(), Value::String(url));
                    if let Some(d) = detail {
                        image.insert("detail".into(), d);
                    }
                    m.insert("type".into(), Value::from("image_url"));
                    m.insert("image_url".into(), Value::Object(image));
                }
            }
            Value::Object(m)
        }
    }

    pub use crate::route::surface::chat_wire::{
        Call, Declaration, Function, JsonSchema, Named, ResponseFormat, Tool, ToolCall, ToolChoice,
        to_json,
    };
}
